/* Prefill/decode disaggregation in the engine, on the constant cost model so
 * every time is exact: the KV transfer's time over NVLink and RDMA, FIFO
 * contention on a link, layer-by-layer overlap, decode admission waiting
 * for free blocks, requests with one output token never moving, nothing
 * leaking in either pool, heterogeneous pools, and configuration errors. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check-main.h"
#include "engine-fixture.h"

#define MS 1000000LL

/* prefill 0.1 ms per prompt token, 1 ms per decode step */
static const char *cost_a = "constant:prefill_ms_per_token=0.1,decode_ms_per_step=1";

/* tiny model: 2 KiB of KV per token; tiny GPU: NVLink 100 GB/s */
#define KV_BYTES_PER_TOKEN 2048.0

static void cfg_pd(struct engine_config *c, uint32_t np, uint32_t nd, int64_t kv_blocks)
{
	cfg_tiny(c, cost_a, "vllm", kv_blocks);
	c->pools[ENGINE_POOL_PREFILL].n = np;
	c->pools[ENGINE_POOL_DECODE].n = nd;
}

/* engine_pool_resolve: a disaggregated pool's own fields where set, else
 * the colocated ones; a colocated config's pools are the colocated fields,
 * whatever a pool holds.  engine_pool_config_equal compares as given. */
START_TEST(a_pool_resolves_its_fields_over_the_colocated_ones)
{
	static struct gpu_spec other = { .name = "other" };
	struct engine_config c;
	struct engine_pool_config p, d, a, b;

	cfg_pd(&c, 2, 3, 100);
	c.tp = 2;
	c.pp = 2;
	c.policy = "vllm:max_num_seqs=8";
	c.pools[ENGINE_POOL_DECODE].gpu = &other;
	c.pools[ENGINE_POOL_DECODE].tp = 4;
	c.pools[ENGINE_POOL_PREFILL].ep = 2;
	c.pools[ENGINE_POOL_PREFILL].policy = "vllm:max_num_seqs=1";
	ck_assert(engine_config_disaggregated(&c));
	p = engine_pool_resolve(&c, ENGINE_POOL_PREFILL);
	d = engine_pool_resolve(&c, ENGINE_POOL_DECODE);
	ck_assert_uint_eq(p.n, 2);
	ck_assert_uint_eq(d.n, 3);
	ck_assert_ptr_eq(p.gpu, c.gpu);
	ck_assert_ptr_eq(d.gpu, &other);
	ck_assert_int_eq(p.tp, 2);
	ck_assert_int_eq(d.tp, 4);
	ck_assert_int_eq(p.ep, 2);
	ck_assert_int_eq(d.ep, c.ep);
	ck_assert_int_eq(p.pp, 2);
	ck_assert_int_eq(d.pp, 2);
	ck_assert_str_eq(p.policy, "vllm:max_num_seqs=1");
	ck_assert_str_eq(d.policy, "vllm:max_num_seqs=8");
	ck_assert_str_eq(engine_pool_name(ENGINE_POOL_PREFILL), "prefill");
	ck_assert_str_eq(engine_pool_name(ENGINE_POOL_DECODE), "decode");
	{
		char o[32];

		ck_assert_str_eq(engine_pool_option(ENGINE_POOL_PREFILL, "dp-attention", o, sizeof(o)),
				 "--prefill-dp-attention");
		ck_assert_str_eq(engine_pool_option(ENGINE_POOL_DECODE, "tp", o, sizeof(o)),
				 "--decode-tp");
		ck_assert_str_eq(engine_pool_option(-1, "pp", o, sizeof(o)), "--pp");
	}

	/* one pool without instances: not disaggregated, the colocated fields */
	c.pools[ENGINE_POOL_PREFILL].n = 0;
	ck_assert(!engine_config_disaggregated(&c));
	d = engine_pool_resolve(&c, ENGINE_POOL_DECODE);
	ck_assert_ptr_eq(d.gpu, c.gpu);
	ck_assert_int_eq(d.tp, 2);

	/* equality as given: a field set to the colocated value differs */
	a = c.pools[ENGINE_POOL_PREFILL];
	b = a;
	ck_assert(engine_pool_config_equal(&a, &b));
	b.tp = c.tp;
	ck_assert(!engine_pool_config_equal(&a, &b));
	b = a;
	b.policy = NULL;
	ck_assert(!engine_pool_config_equal(&a, &b));
	a.policy = "";
	ck_assert(engine_pool_config_equal(&a, &b));   /* NULL reads as "" */
	b.gpu = &other;
	ck_assert(!engine_pool_config_equal(&a, &b));
	ck_assert(engine_pool_config_set(&b));
	memset(&b, 0, sizeof(b));
	ck_assert(!engine_pool_config_set(&b));
}
END_TEST

START_TEST(one_request_moves_over_nvlink)
{
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 3 } };
	/* 100 tokens x 2 KiB over 100 GB/s, plus 5 us */
	int64_t xfer = (int64_t)(100 * KV_BYTES_PER_TOKEN / 100e9 * 1e9) + 5000;
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 1);
	cfg_pd(&c, 1, 1, 100);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert(r.disaggregated);
	/* the prefill instance emits the first token */
	ck_assert_int_eq(r.req[0].first_token_ns, 10 * MS);
	ck_assert_int_eq(r.req[0].prefill_instance, 0);
	ck_assert_int_eq(r.req[0].instance, 1);
	ck_assert_int_eq(r.req[0].kv_xfer_ns, xfer);
	/* two decode steps on the decode instance after the transfer */
	ck_assert_int_eq(r.req[0].finish_ns, 10 * MS + xfer + 2 * MS);
	ck_assert_int_eq(r.inst[0].steps, 1);
	ck_assert_int_eq(r.inst[1].steps, 2);
	ck_assert_uint_eq(r.inst[0].kv_transfers_out, 1);
	ck_assert_str_eq(r.inst[0].role, "prefill");
	ck_assert_str_eq(r.inst[1].role, "decode");
	ck_assert_int_eq(engine_kv_free_blocks(e, 0), 100);
	ck_assert_int_eq(engine_kv_free_blocks(e, 1), 100);
	engine_free(e);
}
END_TEST

START_TEST(across_nodes_the_transfer_uses_rdma)
{
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 2 } };
	/* 50 GB/s per GPU by default, plus 10 us */
	int64_t xfer = (int64_t)(100 * KV_BYTES_PER_TOKEN / 50e9 * 1e9) + 10000;
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 1);
	cfg_pd(&c, 1, 1, 100);
	c.gpus_per_node = 1;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].kv_xfer_ns, xfer);
	engine_free(e);
}
END_TEST

START_TEST(transfers_on_one_link_queue)
{
	/* Two prompts prefilled in one step leave together for the one
	 * decode instance: the second transfer waits for the first. */
	struct wl_request rq[] = {
		{ .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 2 },
		{ .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 2 },
	};
	int64_t xfer = (int64_t)(100 * KV_BYTES_PER_TOKEN / 100e9 * 1e9) + 5000;
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 2);
	cfg_pd(&c, 1, 1, 100);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].first_token_ns, 20 * MS);
	ck_assert_int_eq(r.req[1].first_token_ns, 20 * MS);
	ck_assert_int_eq(r.req[0].kv_xfer_ns, xfer);
	ck_assert_int_eq(r.req[1].kv_xfer_ns, 2 * xfer);
	engine_free(e);
}
END_TEST

START_TEST(overlap_hides_the_transfer_behind_the_prefill)
{
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 2 } };
	int64_t xfer = (int64_t)(100 * KV_BYTES_PER_TOKEN / 100e9 * 1e9) + 5000;
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 1);
	cfg_pd(&c, 1, 1, 100);
	c.kv_overlap = true;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	/* the 10 ms prefill hides all but the last of the 2 layers */
	ck_assert_int_eq(r.req[0].kv_xfer_ns, xfer / 2);
	engine_free(e);
}
END_TEST

START_TEST(single_token_outputs_never_move)
{
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 50, .output_tokens = 1 } };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 1);
	cfg_pd(&c, 1, 1, 100);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[0].finish_ns, 5 * MS);
	ck_assert_int_eq(r.req[0].kv_xfer_ns, -1);
	ck_assert_uint_eq(r.inst[0].kv_transfers_out, 0);
	ck_assert_int_eq(r.inst[1].steps, 0);
	engine_free(e);
}
END_TEST

START_TEST(decode_admission_waits_for_free_blocks)
{
	/* Pools of 20 blocks (320 tokens) and 200-token prompts that decode
	 * for 30 steps: one request at a time fits on each instance, so
	 * transfers wait for the decode instance's blocks. */
	struct wl_request rq[8];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	int64_t longest = 0;

	for (int i = 0; i < 8; i++)
		rq[i] = (struct wl_request){ .arrival_ns = i * MS, .prompt_tokens = 200,
					     .output_tokens = 30 };
	wl_fill(&wl, rq, 8);
	cfg_pd(&c, 1, 1, 20);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		if (r.req[i].kv_xfer_ns > longest)
			longest = r.req[i].kv_xfer_ns;
	}
	/* Each transfer waits for the previous request's 29 decode steps
	 * to end (the 20 ms prefill covers the rest): 9 ms, not the 9 us
	 * the link takes.  And the prefill instance, holding each prompt's
	 * KV until it has moved, is held back in turn: request 7's first
	 * token comes ~7 decode lifetimes after its arrival order would say. */
	ck_assert_int_gt(longest, 5 * MS);
	ck_assert_int_gt(r.req[7].first_token_ns, 7 * 25 * MS);
	ck_assert_int_eq(engine_kv_free_blocks(e, 0), 20);
	ck_assert_int_eq(engine_kv_free_blocks(e, 1), 20);
	engine_free(e);
}
END_TEST

START_TEST(many_requests_no_leaks_and_counts_agree)
{
	struct workload_spec ws = { .arrival = "poisson:rate=200",
				    .lengths = "uniform:prompt_min=10,prompt_max=400,output_min=1,output_max=60",
				    .num_requests = 2000, .rate_scale = 1, .seed = 3 };
	struct ss_error err = { 0 };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	uint64_t moved = 0, multi = 0, out = 0;

	workload_init(&wl);
	ck_assert_int_eq(workload_build(&wl, &ws, &err), 0);
	cfg_pd(&c, 3, 2, 300);
	c.router = "lot";
	c.pairing = "kvfree";
	c.prefix_cache = "on";
	c.preemption = "swap";
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (uint64_t i = 0; i < r.n_req; i++) {
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		if (r.req[i].output_tokens > 1) {
			multi++;
			ck_assert_int_ge(r.req[i].instance, 3);
			ck_assert_int_ge(r.req[i].kv_xfer_ns, 0);
		}
	}
	for (uint32_t i = 0; i < 5; i++) {
		ck_assert_int_eq(engine_kv_free_blocks(e, i), 300);
		moved += r.inst[i].kv_transfers_out;
		if (i < 3)
			out += r.inst[i].kv_transfers_out;
		else
			ck_assert_uint_eq(r.inst[i].kv_transfers_out, 0);
	}
	ck_assert_uint_eq(moved, multi);
	ck_assert_uint_eq(out, multi);
	engine_free(e);
	workload_release(&wl);
}
END_TEST

START_TEST(pool_errors)
{
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 2 } };
	struct ss_error err = { 0 };
	struct workload wl;
	struct engine_config c;
	struct engine *e = NULL;

	wl_fill(&wl, rq, 1);
	cfg_pd(&c, 2, 0, 100);
	ck_assert_int_ne(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "expected both (disaggregated) or neither"));
	cfg_pd(&c, 1, 1, 100);
	c.pairing = "nope";
	ck_assert_int_ne(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "--pairing: unknown router 'nope'"));
	cfg_pd(&c, 1, 1, 100);
	c.pools[ENGINE_POOL_DECODE].tp = 65;
	ck_assert_int_ne(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "--decode-tp"));
	ck_assert_ptr_null(e);
}
END_TEST

/* prefill_policy / decode_policy give each pool its own limits of the one
 * batch policy (aiconfigurator's disaggregated launch: prefill workers
 * max_batch_size 1).  Two 100-token prompts at 0: one 20 ms step of both,
 * or, one request a step, first tokens at 10 and 20 ms.  On a decode
 * instance of one sequence the second request waits for the first to
 * finish its two decode steps. */
START_TEST(each_pool_has_its_own_batch_limits)
{
	struct wl_request rq[] = {
		{ .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 3 },
		{ .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 3 },
	};
	int64_t xfer = (int64_t)(100 * KV_BYTES_PER_TOKEN / 100e9 * 1e9) + 5000;
	struct ss_error err = { 0 };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e = NULL;

	wl_fill(&wl, rq, 2);
	cfg_pd(&c, 1, 1, 100);
	c.pools[ENGINE_POOL_PREFILL].policy = "vllm:max_num_seqs=1";
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].first_token_ns, 10 * MS);
	ck_assert_int_eq(r.req[1].first_token_ns, 20 * MS);
	engine_free(e);

	/* both prefilled in one step; their transfers queue (x, 2x); the
	 * decode instance runs one at a time: 20 + x + 2, then 2 more */
	cfg_pd(&c, 1, 1, 100);
	c.pools[ENGINE_POOL_DECODE].policy = "vllm:max_num_seqs=1";
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].first_token_ns, 20 * MS);
	ck_assert_int_eq(r.req[0].finish_ns, 20 * MS + xfer + 2 * MS);
	ck_assert_int_eq(r.req[1].finish_ns, 20 * MS + xfer + 4 * MS);
	engine_free(e);
	/* without it the second joins the first's second step */
	cfg_pd(&c, 1, 1, 100);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[1].finish_ns, 20 * MS + xfer + 3 * MS);
	engine_free(e);

	/* another policy than the other pool's is refused */
	e = NULL;
	cfg_pd(&c, 1, 1, 100);
	c.pools[ENGINE_POOL_PREFILL].policy = "sarathi";
	ck_assert_int_ne(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "prefill pool's policy 'sarathi': expected policy vllm"));
	ck_assert_ptr_null(e);
}
END_TEST

/* A KV transfer that does not fit the simulator's int64 ns clock (a link
 * of 1e-300 B/s, a latency of 1e300 us, or one ending just past the range)
 * is an error from engine_run naming the transfer: never a wrapped event
 * time (which aborted on engine_run's time assertion) or a clamped one. */
START_TEST(a_transfer_past_the_time_range_is_an_error)
{
	static struct gpu_spec slow_link[3];
	/* latency such that the transfer alone fits int64 ns, but not once it
	 * starts after the 10 ms prefill: 2^63 - 4.8e6 ns */
	const double lat_us[3] = { 10, 1e300, 9.22337203685e15 };
	const double bw[3] = { 1e-300, 50e9, 50e9 };
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 3 } };
	struct workload wl;
	struct engine_config c;

	for (int k = 0; k < 3; k++) {
		struct ss_error err = { 0 };
		struct engine *e = NULL;

		slow_link[k] = tiny_gpu;
		snprintf(slow_link[k].name, sizeof(slow_link[k].name), "slow-link");
		slow_link[k].rdma_bw = bw[k];
		slow_link[k].rdma_latency_us = lat_us[k];
		wl_fill(&wl, rq, 1);
		cfg_pd(&c, 1, 1, 100);
		c.pools[ENGINE_POOL_DECODE].gpu = &slow_link[k];   /* another GPU type: RDMA */
		ck_assert_int_eq(engine_new(&e, &c, &wl, &err), 0);
		ck_assert_msg(engine_run(e, &err) == -ERANGE, "case %d: ran", k);
		ck_assert_msg(strstr(err.msg, "a KV transfer from instance 0 to 1 would end at") &&
				      strstr(err.msg, "past the simulator's time range"),
			      "case %d: %s", k, err.msg);
		engine_free(e);
	}
}
END_TEST

START_TEST(a_slower_decode_gpu_stretches_tpot)
{
	static const struct gpu_spec slow = {
		.name = "slow-gpu", .bf16_flops = 1e11, .hbm_bytes = 16e9, .hbm_bw = 1e9,
		.nvlink_bw = 100e9, .pcie_bw = 16e9, .tdp_w = 300, .idle_w = 50,
	};
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 500, .output_tokens = 50 } };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	int64_t fast_decode, slow_decode;

	wl_fill(&wl, rq, 1);
	cfg_pd(&c, 1, 1, 200);
	c.cost_model = "roofline";
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	fast_decode = r.req[0].finish_ns - r.req[0].first_token_ns;
	engine_free(e);
	c.pools[ENGINE_POOL_DECODE].gpu = &slow;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	slow_decode = r.req[0].finish_ns - r.req[0].first_token_ns;
	/* a different GPU type is another node: RDMA; decode at 1/1000 of
	 * the bandwidth is memory-bound, so much slower */
	ck_assert_int_gt(slow_decode, 2 * fast_decode);
	ck_assert_int_eq(r.inst[1].gpus, 1);
	engine_free(e);
}
END_TEST

START_TEST(semi_pd_splits_each_gpu_without_copies)
{
	struct wl_request rq[] = {
		{ .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 3 },
		{ .arrival_ns = 0, .prompt_tokens = 60, .output_tokens = 4 },
	};
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct summary s;
	struct ss_error err = { 0 };
	struct engine *e;

	wl_fill(&wl, rq, 2);
	cfg_tiny(&c, cost_a, "vllm", 400);
	c.n_instances = 2;
	c.semi_pd_sm = 0.5;
	c.semi_pd_kv = 0.25;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_uint_eq(r.n_instances, 4);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		/* the decode half of the GPU that prefilled it, no copy */
		ck_assert_int_eq(r.req[i].instance, r.req[i].prefill_instance + 2);
		ck_assert_int_eq(r.req[i].kv_xfer_ns, 0);
	}
	ck_assert_int_eq(r.inst[0].total_blocks, 100);
	ck_assert_int_eq(r.inst[2].total_blocks, 300);
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_int_eq(engine_kv_free_blocks(e, i), r.inst[i].total_blocks);
	ck_assert_int_eq(summary_compute(&s, &r, NULL, 1, &err), 0);
	ck_assert_int_eq(s.n_gpus, 2);
	engine_free(e);
	cfg_tiny(&c, cost_a, "vllm", 400);
	c.semi_pd_sm = 1.5;
	ck_assert_int_ne(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "--semi-pd"));
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("disagg");
	TCase *tc = tcase_create("disagg");

	tcase_add_test(tc, a_pool_resolves_its_fields_over_the_colocated_ones);
	tcase_add_test(tc, one_request_moves_over_nvlink);
	tcase_add_test(tc, across_nodes_the_transfer_uses_rdma);
	tcase_add_test(tc, transfers_on_one_link_queue);
	tcase_add_test(tc, overlap_hides_the_transfer_behind_the_prefill);
	tcase_add_test(tc, single_token_outputs_never_move);
	tcase_add_test(tc, decode_admission_waits_for_free_blocks);
	tcase_add_test(tc, many_requests_no_leaks_and_counts_agree);
	tcase_add_test(tc, pool_errors);
	tcase_add_test(tc, each_pool_has_its_own_batch_limits);
	tcase_add_test(tc, a_transfer_past_the_time_range_is_an_error);
	tcase_add_test(tc, a_slower_decode_gpu_stretches_tpot);
	tcase_add_test(tc, semi_pd_splits_each_gpu_without_copies);
	suite_add_tcase(s, tc);
	return s;
}
