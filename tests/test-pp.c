/* Pipeline parallelism (docs/cost-models.md "Pipeline parallelism"): the
 * layer split as vLLM's get_pp_indices makes it, a step cut into stage
 * times, the pipeline's bubble arithmetic by hand with the constant cost
 * model (a request alone waits for every stage and transfer; several
 * requests keep pp batches in flight, one leaving per slowest stage), the
 * transfer over NVLink or the inter-node link by placement, KV capacity
 * per stage, and the configurations refused. */
#include <errno.h>
#include <inttypes.h>

#include "check-main.h"
#include "engine-fixture.h"
#include "plan.h"

#define MS 1000000LL

/* The fixture's tiny model with 8 layers (and 6, for unequal stages):
 * per layer (4 x 256 x 256 + 3 x 256 x 512 + 2 x 256) x 2 B = 1,311,744 B
 * of weights and 2 x 4 x 64 x 2 B = 1 KiB of KV per token. */
static struct model_spec tiny8(int layers)
{
	struct model_spec m = tiny_model;

	m.n_layers = layers;
	return m;
}

/* Activations between stages for t tokens: hidden states and residual,
 * 2 x t x 256 x 2 B, over tiny_gpu's 100 GB/s NVLink (one lane, tp 1)
 * plus its default 5 us latency, truncated to ns. */
static int64_t nvl_ns(int64_t t)
{
	return (int64_t)(4.0 * 256 * (double)t / 100e9 * 1e9 + 5000.0);
}

START_TEST(stage_layers_follow_vllm)
{
	/* get_pp_indices: n / pp each, the remainder one each to the stages
	 * before the last, from the second-to-last back */
	const int l61[4] = { 15, 15, 16, 15 }, l5[4] = { 1, 1, 2, 1 }, l7[4] = { 2, 2, 2, 1 };
	const int l80[3] = { 27, 27, 26 };

	for (int s = 0; s < 4; s++) {
		ck_assert_int_eq(cost_pp_stage_layers(61, 4, s), l61[s]);
		ck_assert_int_eq(cost_pp_stage_layers(5, 4, s), l5[s]);
		ck_assert_int_eq(cost_pp_stage_layers(7, 4, s), l7[s]);
		ck_assert_int_eq(cost_pp_stage_layers(32, 4, s), 8);
	}
	for (int s = 0; s < 3; s++)
		ck_assert_int_eq(cost_pp_stage_layers(80, 3, s), l80[s]);
	ck_assert_int_eq(cost_pp_stage_layers(32, 1, 0), 32);
}
END_TEST

START_TEST(step_split_into_stages)
{
	int64_t op[COST_OP_COUNT] = { 0 }, st[4];

	/* 8 layers of 1000 ns GEMMs + 200 ns all-reduces, 100 ns host,
	 * 50 ns LM head: 2 layers a stage, host first, LM head last */
	op[COST_OP_GEMM] = 8000;
	op[COST_OP_ALLREDUCE] = 1600;
	op[COST_OP_HOST] = 100;
	op[COST_OP_LM_HEAD] = 50;
	cost_pp_split(op, 9750, 8, 4, st);
	ck_assert_int_eq(st[0], 2400 + 100);
	ck_assert_int_eq(st[1], 2400);
	ck_assert_int_eq(st[2], 2400);
	ck_assert_int_eq(st[3], 2400 + 50);
	/* 6 layers over 4 stages: 1, 2, 2, 1 */
	cost_pp_split(op, 9750, 6, 4, st);
	ck_assert_int_eq(st[0], 1600 + 100);
	ck_assert_int_eq(st[1], 3200);
	ck_assert_int_eq(st[2], 3200);
	ck_assert_int_eq(st[3], 9750 - 1700 - 6400);
}
END_TEST

/* One request alone on pp 4: each token waits for all 4 stages and the
 * 3 transfers between them. */
START_TEST(single_request_waits_for_every_stage)
{
	struct model_spec m = tiny8(8);
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 5 } };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	/* prefill: 100 x 0.01 ms = 1 ms of GEMMs (4 stages of 0.25 ms);
	 * 100 tokens of activations cross 3 links */
	int64_t ttft = 1 * MS + 3 * nvl_ns(100);
	/* a decode step: 10 ms (4 x 2.5 ms) + 3 one-token transfers */
	int64_t tok = 10 * MS + 3 * nvl_ns(1);

	ck_assert_int_eq(nvl_ns(1), 5010);
	ck_assert_int_eq(nvl_ns(100), 6024);
	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, "constant:prefill_ms_per_token=0.01,decode_ms_per_step=10", "vllm", 1000);
	c.model = &m;
	c.pp = 4;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[0].first_token_ns, ttft);
	ck_assert_int_eq(r.req[0].finish_ns, ttft + 4 * tok);
	ck_assert_int_eq(r.itl->min, tok);
	ck_assert_int_eq(r.itl->max, tok);
	ck_assert_int_eq(r.inst[0].steps, 5);
	/* each stage's GPU is busy a quarter of every step */
	ck_assert_int_eq(r.inst[0].busy_ns, (1 * MS + 4 * 10 * MS) / 4);
	ck_assert_int_eq(r.inst[0].gpus, 4);
	ck_assert_double_eq_tol(r.inst[0].idle_power_w, 4 * 50.0, 1e-9);
	ck_assert_double_eq_tol(r.idle_power_w, 4 * 50.0, 1e-9);
	/* the constant model's 300 W (tdp x tp) over every stage's time */
	ck_assert_double_eq_tol(r.inst[0].busy_energy_j, 300.0 * 41e-3, 1e-9);
	ck_assert_int_eq(engine_kv_free_blocks(e, 0), 1000);
	engine_free(e);
}
END_TEST

/* Four requests, one per batch (a budget of 1 token a step): four batches in flight,
 * each entering stage 1 as it frees; every request gets a token per
 * pipeline latency, so four tokens leave per latency. */
START_TEST(full_pipeline_keeps_pp_batches_in_flight)
{
	struct model_spec m = tiny8(8);
	struct wl_request rq[4];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	int64_t lat = 10 * MS + 3 * nvl_ns(1);

	for (int k = 0; k < 4; k++)
		rq[k] = (struct wl_request){ .arrival_ns = 0, .prompt_tokens = 1, .output_tokens = 3 };
	wl_fill(&wl, rq, 4);
	cfg_tiny(&c, "constant:decode_ms_per_step=10", "vllm:max_num_batched_tokens=1", 1000);
	c.model = &m;
	c.pp = 4;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (int k = 0; k < 4; k++) {
		/* request k enters stage 1 at k x 2.5 ms, when it frees */
		ck_assert_int_eq(r.req[k].first_sched_ns, k * 2500000LL);
		ck_assert_int_eq(r.req[k].first_token_ns, k * 2500000LL + lat);
		ck_assert_int_eq(r.req[k].finish_ns, k * 2500000LL + 3 * lat);
	}
	ck_assert_int_eq(r.inst[0].steps, 12);
	engine_free(e);
}
END_TEST

/* Stages of 1, 2, 2 and 1 layers (6 layers, pp 4): a step of 12 ms is
 * 2, 4, 4, 2 ms; batches queue behind the 4 ms stages, so with the
 * pipeline full one leaves every 4 ms (the slowest stage), not 3. */
START_TEST(unequal_stages_pace_the_pipeline)
{
	struct model_spec m = tiny8(6);
	struct wl_request rq[4];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	int64_t x = nvl_ns(1);

	for (int k = 0; k < 4; k++)
		rq[k] = (struct wl_request){ .arrival_ns = 0, .prompt_tokens = 1, .output_tokens = 1 };
	wl_fill(&wl, rq, 4);
	cfg_tiny(&c, "constant:decode_ms_per_step=12", "vllm:max_num_batched_tokens=1", 1000);
	c.model = &m;
	c.pp = 4;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (int k = 0; k < 4; k++) {
		ck_assert_int_eq(r.req[k].first_sched_ns, k * 2 * MS);
		ck_assert_int_eq(r.req[k].first_token_ns, 12 * MS + k * 4 * MS + 3 * x);
	}
	engine_free(e);
}
END_TEST

/* The running-set limit counts the requests in flight (vLLM V1's
 * max_num_seqs counts every running request): with max_num_seqs=2 only
 * two batches of one are in flight; the third request is admitted when
 * the first finishes (3 pipeline latencies), not when stage 1 frees. */
START_TEST(running_limit_counts_batches_in_flight)
{
	struct model_spec m = tiny8(8);
	struct wl_request rq[3];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	int64_t lat = 10 * MS + 3 * nvl_ns(1);

	for (int k = 0; k < 3; k++)
		rq[k] = (struct wl_request){ .arrival_ns = 0, .prompt_tokens = 1, .output_tokens = 3 };
	wl_fill(&wl, rq, 3);
	cfg_tiny(&c, "constant:decode_ms_per_step=10", "vllm:max_num_batched_tokens=1,max_num_seqs=2",
		 1000);
	c.model = &m;
	c.pp = 4;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].first_sched_ns, 0);
	ck_assert_int_eq(r.req[1].first_sched_ns, 2500000);
	ck_assert_int_eq(r.req[0].finish_ns, 3 * lat);
	ck_assert_int_eq(r.req[2].first_sched_ns, 3 * lat);
	ck_assert_uint_eq(r.inst[0].peak_running, 2);
	engine_free(e);
}
END_TEST

/* gpus_per_node 2, tp 1, pp 4: stages 0-1 and 2-3 share a node; the
 * transfer between stages 1 and 2 crosses nodes over the default 50 GB/s
 * RDMA link with its 10 us latency. */
START_TEST(transfer_across_nodes_takes_the_inter_node_link)
{
	struct model_spec m = tiny8(8);
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 1, .output_tokens = 2 } };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	int64_t rdma = (int64_t)(1024.0 / 50e9 * 1e9 + 10000.0);
	int64_t lat = 10 * MS + 2 * nvl_ns(1) + rdma;

	ck_assert_int_eq(rdma, 10020);
	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, "constant:decode_ms_per_step=10", "vllm", 1000);
	c.model = &m;
	c.pp = 4;
	c.gpus_per_node = 2;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].first_token_ns, lat);
	ck_assert_int_eq(r.req[0].finish_ns, 2 * lat);
	engine_free(e);
}
END_TEST

/* KV capacity per stage by hand: 14.4 GB usable of 16 GB at 0.9, 1 GB
 * reserved.  pp 1: 11,518,464 B of weights, 8 KiB of KV per token.
 * pp 4: 2 layers a stage (2,623,616 B, final norm included), the 512,000 B
 * embedding on stage 0 and the 512,000 B LM head on stage 3, 2 KiB of KV
 * per token: the first and last stages have the least room. */
START_TEST(kv_capacity_from_the_fullest_stage)
{
	struct model_spec m = tiny8(8);
	struct engine_config c;
	struct ss_error err = { 0 };
	int32_t blocks;

	ck_assert_double_eq(model_weight_bytes(&m), 11518464.0);
	cfg_tiny(&c, "constant", "vllm", 0);
	c.model = &m;
	c.activation_reserve_bytes = 1e9;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	/* (14.4e9 - 1e9 - 11,518,464) / (8 KiB x 16) */
	ck_assert_int_eq(blocks, 102146);
	c.pp = 1;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 102146);
	c.pp = 4;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	/* (14.4e9 - 1e9 - 2,623,616 - 512,000) / (2 KiB x 16) */
	ck_assert_int_eq(blocks, 408839);
	/* a stage too full: the error names it */
	c.gpu_mem_util = 0.0626;   /* 1.0016 GB: 1.6 MB left after the reserve */
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), -EINVAL);
	ck_assert_msg((strstr(err.msg, "stage 0") || strstr(err.msg, "stage 3")) &&
		      strstr(err.msg, "--pp"), "%s", err.msg);
}
END_TEST

/* The same model under TensorRT-LLM's rule (a fraction of what the
 * weights and the reserve leave, docs/kv-cache.md "Engine rules"), 0.9:
 *   pp 1: 0.9 x (16e9 - 1e9 - 11,518,464) / (8 KiB x 16) = 102,917.7 -> 102,917
 *   pp 4: 0.9 x (16e9 - 1e9 - 2,623,616 - 512,000) / (2 KiB x 16) = 411,901.8
 *         -> 411,901 (the fullest stage's)
 * and 0.5: 0.5 x 14,996,864,384 / 32,768 = 228,833.4 -> 228,833.  Giving
 * both rules is refused. */
START_TEST(kv_capacity_free_rule_per_stage)
{
	struct model_spec m = tiny8(8);
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 2 } };
	struct workload wl;
	struct engine_config c;
	struct ss_error err = { 0 };
	struct engine *e = NULL;
	int32_t blocks;

	cfg_tiny(&c, "constant", "vllm", 0);
	c.model = &m;
	c.activation_reserve_bytes = 1e9;
	c.kv_free_fraction = 0.9;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 102917);
	c.pp = 4;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 411901);
	c.kv_free_fraction = 0.5;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 228833);
	/* nothing free: the error names the stage and the rule */
	c.activation_reserve_bytes = 16e9;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), -EINVAL);
	ck_assert_msg((strstr(err.msg, "stage 0") || strstr(err.msg, "stage 3")) &&
		      strstr(err.msg, "(kv_free_fraction 0.5 of what they leave, from --kv-free-fraction)"),
		      "%s", err.msg);
	/* both rules at once: refused before anything is sized */
	wl_fill(&wl, rq, 1);
	c.activation_reserve_bytes = 1e9;
	c.gpu_mem_util = 0.9;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "--gpu-memory-utilization and --kv-free-fraction"), "%s",
		      err.msg);
	c.gpu_mem_util = 0;
	c.kv_free_fraction = 1.5;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "--kv-free-fraction: expected a fraction"), "%s", err.msg);
}
END_TEST

START_TEST(refused_configurations)
{
	struct model_spec m = tiny8(8);
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 2 } };
	struct workload wl;
	struct engine_config c;
	struct ss_error err = { 0 };
	struct engine *e = NULL;

	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, "constant", "vllm", 100);
	c.model = &m;
	c.pp = 9;          /* more stages than layers */
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "--pp") && strstr(err.msg, "8 layers"), "%s", err.msg);
	c.pp = 2;
	c.n_prefill = 1;
	c.n_decode = 1;
	c.decode_pp = 65;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "--decode-pp"), "%s", err.msg);
	cfg_tiny(&c, "constant", "vllm", 100);
	c.model = &m;
	c.pp = 2;
	c.semi_pd_sm = 0.5;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "--semi-pd with --pp"), "%s", err.msg);
	/* layers not alike: 4 of 8 MoE (every second one) */
	cfg_tiny(&c, "constant", "vllm", 100);
	m.n_experts = 8;
	m.experts_per_token = 2;
	m.moe_intermediate = 128;
	m.moe_step = 2;
	c.model = &m;
	c.pp = 2;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "4 of its 8 layers are MoE"), "%s", err.msg);
	/* every layer MoE: alike, runs */
	m.moe_step = 1;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), 0);
	engine_free(e);
	e = NULL;
	ck_assert_ptr_null(e);
}
END_TEST

/* pp 0 and pp 1 are the engine without a pipeline: the same results. */
START_TEST(pp_one_is_no_pipeline)
{
	struct wl_request rq[6];
	struct workload wl;
	struct engine_config c;
	struct engine_results r0, r1;
	struct engine *e0, *e1;

	for (int k = 0; k < 6; k++)
		rq[k] = (struct wl_request){ .arrival_ns = k * 3 * MS, .prompt_tokens = 50 + 10 * k,
					     .output_tokens = 4 + k };
	wl_fill(&wl, rq, 6);
	cfg_tiny(&c, "roofline", "vllm", 200);
	e0 = run_ok(&c, &wl);
	c.pp = 1;
	e1 = run_ok(&c, &wl);
	engine_results(e0, &r0);
	engine_results(e1, &r1);
	for (int k = 0; k < 6; k++) {
		ck_assert_int_eq(r0.req[k].first_token_ns, r1.req[k].first_token_ns);
		ck_assert_int_eq(r0.req[k].finish_ns, r1.req[k].finish_ns);
	}
	ck_assert_int_eq(r0.inst[0].busy_ns, r1.inst[0].busy_ns);
	ck_assert_double_eq(r0.inst[0].busy_energy_j, r1.inst[0].busy_energy_j);
	engine_free(e0);
	engine_free(e1);
}
END_TEST

/* A pipeline with more requests than batches: every request finishes,
 * no KV block leaks, and the run is deterministic. */
START_TEST(busy_pipeline_finishes_everything)
{
	struct model_spec m = tiny8(8);
	struct wl_request rq[40];
	struct workload wl;
	struct engine_config c;
	struct engine_results r, r2;
	struct engine *e, *e2;

	for (int k = 0; k < 40; k++)
		rq[k] = (struct wl_request){ .arrival_ns = k * 500000LL, .prompt_tokens = 20 + 7 * k,
					     .output_tokens = 3 + k % 9 };
	wl_fill(&wl, rq, 40);
	cfg_tiny(&c, "roofline", "vllm:max_num_seqs=4", 64);
	c.model = &m;
	c.pp = 3;
	e = run_ok(&c, &wl);
	e2 = run_ok(&c, &wl);
	engine_results(e, &r);
	engine_results(e2, &r2);
	for (int k = 0; k < 40; k++) {
		ck_assert_int_eq(r.req[k].state, REQ_FINISHED);
		ck_assert_int_eq(r.req[k].generated_tokens, rq[k].output_tokens);
		ck_assert_int_eq(r.req[k].finish_ns, r2.req[k].finish_ns);
	}
	ck_assert_int_eq(engine_kv_free_blocks(e, 0), 64);
	engine_free(e);
	engine_free(e2);
}
END_TEST

/* plan --pp: each stage count with each tp, tp x pp GPUs per instance
 * within max_gpus; pp 1 keys as before, pp > 1 in the key, the tp label
 * and the engine configuration. */
START_TEST(plan_space_has_a_pp_axis)
{
	struct plan_space sp;
	struct plan_config *cfg = NULL;
	struct plan_excluded ex;
	struct engine_config base, ec;
	struct ss_error err = { 0 };
	size_t n = 0;
	char label[64];

	memset(&sp, 0, sizeof(sp));
	sp.model = &tiny_model;     /* 2 layers */
	sp.gpus[0] = &tiny_gpu;
	sp.n_gpus = 1;
	sp.tp[0] = 1;
	sp.tp[1] = 2;
	sp.n_tp = 2;
	sp.pp[0] = 1;
	sp.pp[1] = 2;
	sp.n_pp = 2;
	sp.max_gpus = 4;
	sp.policies[0] = plan_policy_find("vllm");
	sp.n_policies = 1;
	sp.colocated = true;
	ck_assert_int_eq(plan_enumerate(&sp, NULL, &cfg, &n, &ex, &err), 0);
	/* tp 1: 1, 2, 4 instances; tp 1 pp 2: 1, 2; tp 2: 1, 2; tp 2 pp 2: 1 */
	ck_assert_uint_eq(n, 8);
	ck_assert_str_eq(cfg[0].key, "colocated gpu=test-gpu tp=1 instances=1 policy=vllm");
	ck_assert_int_eq(cfg[0].pp, 0);
	ck_assert_str_eq(cfg[3].key, "colocated gpu=test-gpu tp=1 pp=2 instances=1 policy=vllm");
	ck_assert_int_eq(cfg[4].gpus, 4);
	ck_assert_str_eq(cfg[7].key, "colocated gpu=test-gpu tp=2 pp=2 instances=1 policy=vllm");
	ck_assert_int_eq(cfg[7].tp, 2);
	ck_assert_int_eq(cfg[7].gpus, 4);
	plan_config_tp_label(&cfg[7], label, sizeof(label));
	ck_assert_str_eq(label, "2 pp2");
	plan_config_tp_label(&cfg[5], label, sizeof(label));
	ck_assert_str_eq(label, "2");
	engine_config_defaults(&base);
	base.model = &tiny_model;
	plan_config_engine(&cfg[7], &base, &ec);
	ck_assert_int_eq(ec.tp, 2);
	ck_assert_int_eq(ec.pp, 2);
	free(cfg);
	/* more stages than the model's layers */
	sp.pp[1] = 3;
	ck_assert_int_eq(plan_enumerate(&sp, NULL, &cfg, &n, &ex, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "pp") && strstr(err.msg, "2 layers"), "%s", err.msg);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("pp");
	TCase *tc = tcase_create("pp");

	tcase_add_test(tc, stage_layers_follow_vllm);
	tcase_add_test(tc, step_split_into_stages);
	tcase_add_test(tc, single_request_waits_for_every_stage);
	tcase_add_test(tc, full_pipeline_keeps_pp_batches_in_flight);
	tcase_add_test(tc, unequal_stages_pace_the_pipeline);
	tcase_add_test(tc, running_limit_counts_batches_in_flight);
	tcase_add_test(tc, transfer_across_nodes_takes_the_inter_node_link);
	tcase_add_test(tc, kv_capacity_from_the_fullest_stage);
	tcase_add_test(tc, kv_capacity_free_rule_per_stage);
	tcase_add_test(tc, refused_configurations);
	tcase_add_test(tc, pp_one_is_no_pipeline);
	tcase_add_test(tc, busy_pipeline_finishes_everything);
	tcase_add_test(tc, plan_space_has_a_pp_axis);
	suite_add_tcase(s, tc);
	return s;
}
