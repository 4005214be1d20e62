/* Pipeline parallelism (docs/cost-models.md "Pipeline parallelism"): the
 * layer split as vLLM's get_pp_indices makes it, a step cut into stage
 * times, the pipeline's bubble arithmetic by hand with the constant cost
 * model (a request alone waits for every stage and transfer; several
 * requests keep pp batches in flight, one leaving per slowest stage), the
 * transfer over NVLink or the inter-node link by placement, KV capacity
 * per stage, and the configurations refused; and, on the shipped catalog,
 * models whose stages hold different layers (DeepSeek-V3's dense layers
 * on stage 0, gemma-3's sliding-window layers): each stage's weights, KV
 * and share of a step from its own layers, the slowest stage pacing the
 * pipeline, and Qwen3-235B-A22B's pipeline of expert-parallel stages. */
#include <errno.h>
#include <inttypes.h>

#include "catalog-fixture.h"
#include "check-main.h"
#include "engine-fixture.h"
#include "metrics.h"
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
	/* the summary's stage shares: 4 batches of 2, 4, 4, 2 ms over a run
	 * of 24 ms + 3 transfers; the outer stages idle half the time the
	 * inner (busiest) ones work */
	{
		struct summary sum;
		struct ss_error err = { 0 };
		static const double busy[4] = { 8, 16, 16, 8 }, bubble[4] = { 0.5, 0, 0, 0.5 };

		ck_assert_int_eq(summary_compute(&sum, &r, NULL, 1, &err), 0);
		ck_assert_int_eq(sum.pp_stages, 4);
		for (int s = 0; s < 4; s++) {
			ck_assert_double_eq_tol(sum.stage_busy_share[s],
						busy[s] * MS / (24.0 * MS + 3.0 * (double)x), 1e-12);
			ck_assert_double_eq_tol(sum.stage_bubble_share[s], bubble[s], 1e-12);
		}
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
	c.pools[ENGINE_POOL_PREFILL].n = 1;
	c.pools[ENGINE_POOL_DECODE].n = 1;
	c.pools[ENGINE_POOL_DECODE].pp = 65;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "--decode-pp"), "%s", err.msg);
	cfg_tiny(&c, "constant", "vllm", 100);
	c.model = &m;
	c.pp = 2;
	c.semi_pd_sm = 0.5;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "--semi-pd with --pp"), "%s", err.msg);
	/* layers not alike: 4 of 8 MoE (every second one): runs, each
	 * stage priced from its slice (formerly refused) */
	cfg_tiny(&c, "roofline", "vllm", 100);
	m.n_experts = 8;
	m.experts_per_token = 2;
	m.moe_intermediate = 128;
	m.moe_step = 2;
	c.model = &m;
	c.pp = 2;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_int_eq(engine_run(e, &err), 0);
	engine_free(e);
	e = NULL;
	/* every layer MoE: alike, runs */
	m.moe_step = 1;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), 0);
	engine_free(e);
	e = NULL;
	/* expert parallelism within each stage runs (formerly refused);
	 * data-parallel attention in a pipeline stays refused, one line */
	cfg_tiny(&c, "roofline", "vllm", 100);
	c.model = &m;
	c.tp = 2;
	c.pp = 2;
	c.ep = 2;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_int_eq(engine_run(e, &err), 0);
	engine_free(e);
	e = NULL;
	c.ep = 0;
	c.dp_attention = 2;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "--pp with --dp-attention: not modelled yet") &&
		      !strchr(err.msg, '\n'), "%s", err.msg);
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
	/* every instance count up to the limit: tp 1: 1, 2, 3, 4 instances;
	 * tp 1 pp 2: 1, 2; tp 2: 1, 2; tp 2 pp 2: 1 */
	ck_assert_uint_eq(n, 9);
	ck_assert_str_eq(cfg[0].key, "colocated gpu=test-gpu tp=1 instances=1 policy=vllm");
	ck_assert_int_eq(cfg[0].pp, 0);
	ck_assert_str_eq(cfg[2].key, "colocated gpu=test-gpu tp=1 instances=3 policy=vllm");
	ck_assert_str_eq(cfg[4].key, "colocated gpu=test-gpu tp=1 pp=2 instances=1 policy=vllm");
	ck_assert_int_eq(cfg[5].gpus, 4);
	ck_assert_str_eq(cfg[8].key, "colocated gpu=test-gpu tp=2 pp=2 instances=1 policy=vllm");
	ck_assert_int_eq(cfg[8].tp, 2);
	ck_assert_int_eq(cfg[8].gpus, 4);
	plan_config_tp_label(&cfg[8], label, sizeof(label));
	ck_assert_str_eq(label, "2 pp2");
	plan_config_tp_label(&cfg[6], label, sizeof(label));
	ck_assert_str_eq(label, "2");
	engine_config_defaults(&base);
	base.model = &tiny_model;
	plan_config_engine(&cfg[8], &base, &ec);
	ck_assert_int_eq(ec.tp, 2);
	ck_assert_int_eq(ec.pp, 2);
	free(cfg);
	/* more stages than the model's layers */
	sp.pp[1] = 3;
	ck_assert_int_eq(plan_enumerate(&sp, NULL, &cfg, &n, &ex, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "pp") && strstr(err.msg, "2 layers"), "%s", err.msg);
}
END_TEST

/* A model whose stages hold different layers: each per-layer operator is
 * shared out as the stages' slices take it.  By hand: GEMMs of 9,000 ns
 * whose slices take 1,000 and 2,000 ns (a dense stage reading a third of
 * the MoE stage's weights): 3,000 and 6,000; attention priced 500 and
 * 500: 400 each of 800; host 100 on stage 0; LM head 50 and the rounding
 * on the last.  Stage 1 takes 6,450 of 9,950 ns (1.84 x stage 0). */
START_TEST(sliced_split_shares_each_operator)
{
	int64_t op[COST_OP_COUNT] = { 0 }, st[3];
	int64_t sl[3][COST_OP_COUNT] = { { 0 } };

	op[COST_OP_GEMM] = 9000;
	op[COST_OP_ATTN_DECODE] = 800;
	op[COST_OP_HOST] = 100;
	op[COST_OP_LM_HEAD] = 50;
	sl[0][COST_OP_GEMM] = 1000;
	sl[1][COST_OP_GEMM] = 2000;
	sl[0][COST_OP_ATTN_DECODE] = 500;
	sl[1][COST_OP_ATTN_DECODE] = 500;
	sl[0][COST_OP_HOST] = 777;   /* a slice's host and LM head are not shares */
	sl[1][COST_OP_LM_HEAD] = 999;
	cost_pp_split_sliced(op, 9950, 4, 2, (const int64_t (*)[COST_OP_COUNT])sl, st);
	ck_assert_int_eq(st[0], 3000 + 400 + 100);
	ck_assert_int_eq(st[1], 6000 + 400 + 50);
	/* an operator no slice has: by layer count (4 layers: 2 and 2) */
	op[COST_OP_ALLREDUCE] = 1000;
	cost_pp_split_sliced(op, 10950, 4, 2, (const int64_t (*)[COST_OP_COUNT])sl, st);
	ck_assert_int_eq(st[0], 3500 + 500);
	ck_assert_int_eq(st[1], 10950 - 4000);
	/* three stages whose slices are alike: as cost_pp_split by layers */
	for (int s = 0; s < 3; s++) {
		memset(sl[s], 0, sizeof(sl[s]));
		sl[s][COST_OP_GEMM] = s == 1 ? 2 : 1;   /* 1, 2, 1 layers */
	}
	op[COST_OP_ALLREDUCE] = 0;
	op[COST_OP_ATTN_DECODE] = 0;
	op[COST_OP_GEMM] = 8000;
	cost_pp_split_sliced(op, 8150, 4, 3, (const int64_t (*)[COST_OP_COUNT])sl, st);
	ck_assert_int_eq(st[0], 2100);
	ck_assert_int_eq(st[1], 4000);
	ck_assert_int_eq(st[2], 2050);
	ck_assert_int_eq(cost_pp_stage_first(61, 4, 0), 0);
	ck_assert_int_eq(cost_pp_stage_first(61, 4, 2), 30);
	ck_assert_int_eq(cost_pp_stage_first(61, 4, 3), 46);
}
END_TEST

/* DeepSeek-V3 (61 layers: 3 dense, then 58 MoE; MLA) with fp8 linear
 * weights (1 B; norms, biases, embeddings 2 B) on H200 (0.9 of
 * 150,754,820,096 B usable), 4 GiB reserved, bf16 KV.  By hand, per
 * layer: MLA projections d ql + ql h (nope + rope) + d (kl + rope) +
 * kl h (nope + v) + h v d = 187,105,280 params, norms ql + kl + 2 d;
 * a dense layer adds the 3 x 7168 x 18432 MLP: 583,499,776 B; an MoE
 * layer the router (7168 x 256, 256 biases), 256 routed and 1 shared
 * expert of 3 x 7168 x 2048: 11,507,302,912 B.  Embedding and LM head
 * 129280 x 7168 x 2 = 1,853,358,080 B each, final norm 14,336 B.  KV:
 * (512 + 64) x 2 B per layer and token, on every GPU (MLA, not / tp).
 *   pp 2 x tp 4: stages of 31 (layers 0-30: the 3 dense + 28 MoE) and 30
 *     MoE layers: 325,808,338,944 B (with the embedding) and
 *     347,072,459,776 B (with norm and LM head), / 4 per GPU; blocks of
 *     31 and 30 x 1152 x 16 B: 87,387 and 80,686: the last stage's.
 *     (By layer count both stages would hold ~(61 layers' average) and
 *     stage 0 would be charged 3 MoE layers' experts it does not hold.)
 *   pp 4 x tp 2: 15 (3 dense + 12 MoE), 15, 16, 15 MoE: 70,845,746,176,
 *     86,304,771,840, 92,058,423,296 and 87,231,458,048 B per GPU;
 *     218,962, 163,048, 133,348, 159,696 blocks: stage 2's 16 layers. */
START_TEST(deepseek_stages_hold_their_own_layers)
{
	static const double w2[2] = { 325808338944.0 / 4, 347072459776.0 / 4 };
	static const double w4[4] = { 70845746176.0, 86304771840.0, 92058423296.0,
				      87231458048.0 };
	static const int dense4[4] = { 3, 0, 0, 0 };
	struct engine_config c;
	struct ss_error err = { 0 };
	struct model_spec sl;
	int32_t blocks;
	double w, kv;

	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "deepseek-v3");
	c.gpu = catalog_gpu(&cat, "h200-sxm");
	ck_assert_ptr_nonnull(c.model);
	c.weight_dtype = SS_DTYPE_FP8;
	c.activation_reserve_bytes = 4.0 * 1073741824.0;
	c.tp = 4;
	c.pp = 2;
	model_slice(c.model, 0, 31, &sl);
	ck_assert_int_eq(model_moe_layers(&sl), 28);
	model_slice(c.model, 31, 30, &sl);
	ck_assert_int_eq(model_moe_layers(&sl), 30);
	for (int s = 0; s < 2; s++) {
		engine_pp_stage_bytes(&c, s, &w, &kv);
		ck_assert_double_eq_tol(w, w2[s], 1.0);
		ck_assert_double_eq(kv, (s == 0 ? 31 : 30) * 1152.0);
	}
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 80686);
	c.tp = 2;
	c.pp = 4;
	for (int s = 0; s < 4; s++) {
		int first = cost_pp_stage_first(61, 4, s), n = cost_pp_stage_layers(61, 4, s);

		model_slice(c.model, first, n, &sl);
		ck_assert_int_eq(n - model_moe_layers(&sl), dense4[s]);
		engine_pp_stage_bytes(&c, s, &w, &kv);
		ck_assert_double_eq_tol(w, w4[s], 1.0);
		ck_assert_double_eq(kv, n * 1152.0);
	}
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 133348);
}
END_TEST

/* Qwen3-235B-A22B (94 layers, all MoE) at tp 4 x pp 2 x ep 4 on H200,
 * bf16, 4 GiB reserved: expert parallelism inside a stage's 4 GPUs holds
 * the same bytes per GPU as TP (the routed experts / 4 either way).  Per
 * layer (2 B each): QKV and O (64 + 2 x 4) x 128 x 4096 + 64 x 128 x
 * 4096, Q/K norms 256, two norms, router 4096 x 128, 128 experts of
 * 3 x 4096 x 1536: 4,975,510,016 B; 47 layers a stage plus half the final
 * norm (prorated: the layers are alike) plus the 1,244,659,712 B
 * embedding or LM head: 58,773,408,640 B per GPU on each stage.  KV: 4 KV
 * heads / 4 GPUs = 1, 2 x 128 x 2 B x 47 layers = 24,064 B per token:
 * floor((135,679,338,086.4 - 58,773,408,640 - 4 GiB) / (24,064 x 16)) =
 * 188,588 blocks.  And the pipeline of EP stages runs. */
START_TEST(qwen3_pipeline_of_expert_parallel_stages)
{
	struct wl_request rq[6];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct ss_error err = { 0 };
	struct engine *e;
	int32_t blocks;
	double w, kv;

	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "qwen3-235b-a22b");
	c.gpu = catalog_gpu(&cat, "h200-sxm");
	ck_assert_ptr_nonnull(c.model);
	c.activation_reserve_bytes = 4.0 * 1073741824.0;
	c.tp = 4;
	c.pp = 2;
	c.ep = 4;
	for (int s = 0; s < 2; s++) {
		engine_pp_stage_bytes(&c, s, &w, &kv);
		ck_assert_double_eq_tol(w, 58773408640.0, 1.0);
		ck_assert_double_eq(kv, 24064.0);
	}
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 188588);
	for (int k = 0; k < 6; k++)
		rq[k] = (struct wl_request){ .arrival_ns = k * MS, .prompt_tokens = 100 + k,
					     .output_tokens = 5 };
	wl_fill(&wl, rq, 6);
	c.cost_model = "roofline";
	c.policy = "vllm";
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (int k = 0; k < 6; k++)
		ck_assert_int_eq(r.req[k].generated_tokens, 5);
	engine_free(e);
}
END_TEST

/* gemma-3-27b (62 layers, five of each six sliding-window, the sixth
 * full) at pp 4: stages of 15, 16, 16, 15 layers hold 2, 3, 2, 3 full
 * layers (layers 5, 11 | 17, 23, 29 | 35, 41 | 47, 53, 59); a local
 * layer's KV per token is charged min(W + block, L_ref) / L_ref of a full
 * one (engine_kv_token_bytes_gpu): 16 KV heads x 128 x 2 x 2 B = 8,192 B
 * per full layer, x 1040 / 131072 per local one. */
START_TEST(local_layers_kv_per_stage)
{
	static const int full[4] = { 2, 3, 2, 3 };
	struct engine_config c;
	double w, kv;

	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "gemma-3-27b");
	c.gpu = catalog_gpu(&cat, "h200-sxm");
	ck_assert_ptr_nonnull(c.model);
	c.pp = 4;
	for (int s = 0; s < 4; s++) {
		int n = cost_pp_stage_layers(62, 4, s);

		engine_pp_stage_bytes(&c, s, &w, &kv);
		ck_assert_double_eq_tol(kv, 8192.0 * (full[s] + (n - full[s]) * 1040.0 / 131072.0),
					1e-6);
	}
}
END_TEST

/* The pipeline of DeepSeek-V3 (tp 4 x pp 2, fp8, roofline, no engine
 * profile): four one-token requests at once, one per batch.  Each stage's
 * time is the whole step's operators shared out as the stages' slices
 * take them (priced here directly: stage 1, 30 MoE layers, against stage
 * 0's 3 dense + 28 MoE, plus the LM head), so the first token takes
 * T0 + X + T1 and the next batches leave one per max(T0, T1): the slower
 * stage (here the first, with the dense layers and the host work), not
 * the mean, paces the pipeline. */
START_TEST(slowest_stage_paces_a_mixed_pipeline)
{
	const struct model_spec *m;
	struct model_spec sl[2];
	struct cost_model *whole, *stage[2];
	struct cost_config cc = { 0 };
	struct cost_item it = { .tokens = 1, .context = 0 };
	struct cost_step st = { .items = &it, .n_items = 1, .n_prefill = 1, .n_emit = 1,
				.total_tokens = 1 };
	struct cost_result rw, rs[2];
	int64_t sop[2][COST_OP_COUNT], t[2], x, period;
	struct wl_request rq[4];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct ss_error err = { 0 };
	struct engine *e;

	m = catalog_model(&cat, "deepseek-v3");
	ck_assert_ptr_nonnull(m);
	cc.model = m;
	cc.gpu = catalog_gpu(&cat, "h200-sxm");
	cc.tp = 4;
	cc.weight_dtype = SS_DTYPE_FP8;
	ck_assert_int_eq(cost_model_new(&whole, "roofline", &cc, &err), 0);
	ck_assert_int_eq(cost_model_predict(whole, &st, &rw, &err), 0);
	for (int s = 0; s < 2; s++) {
		model_slice(m, s ? 31 : 0, s ? 30 : 31, &sl[s]);
		cc.model = &sl[s];
		ck_assert_int_eq(cost_model_new(&stage[s], "roofline", &cc, &err), 0);
		ck_assert_int_eq(cost_model_predict(stage[s], &st, &rs[s], &err), 0);
		memcpy(sop[s], rs[s].op_ns, sizeof(sop[s]));
		cost_model_free(stage[s]);
	}
	cost_model_free(whole);
	/* stage 0 from the shares (cost_pp_split_sliced's formula); stage 1
	 * the rest */
	{
		static const int ops[] = { COST_OP_GEMM, COST_OP_ATTN_PREFILL,
					   COST_OP_ATTN_DECODE, COST_OP_ELEMENTWISE,
					   COST_OP_ALLREDUCE };
		double t0 = (double)rw.op_ns[COST_OP_HOST];

		for (int k = 0; k < 5; k++) {
			double a = (double)sop[0][ops[k]], b = (double)sop[1][ops[k]];

			if (a + b > 0)
				t0 += (double)rw.op_ns[ops[k]] * a / (a + b);
		}
		t[0] = (int64_t)(t0 + 0.5);
		t[1] = rw.duration_ns - t[0];
	}
	/* one token reads about as many bytes in a dense layer (its MLP) as
	 * in an MoE layer (8 routed and the shared expert): stage 0's 31
	 * layers and the host work outweigh stage 1's 30 and the LM head
	 * (4.30 against 3.53 ms); neither is the mean */
	ck_assert_int_gt(t[0], t[1] + t[1] / 10);
	/* hidden states and residual, 2 x 7168 x 2 B, over NVLink (4 lanes) */
	x = (int64_t)(2.0 * 7168 * 2 / (cc.gpu->nvlink_bw * 4) * 1e9 +
		      (cc.gpu->nvlink_latency_us > 0 ? cc.gpu->nvlink_latency_us : 5) * 1e3);
	period = t[0] > t[1] ? t[0] : t[1];
	for (int k = 0; k < 4; k++)
		rq[k] = (struct wl_request){ .arrival_ns = 0, .prompt_tokens = 1, .output_tokens = 1 };
	wl_fill(&wl, rq, 4);
	engine_config_defaults(&c);
	c.model = m;
	c.gpu = cc.gpu;
	c.tp = 4;
	c.pp = 2;
	c.weight_dtype = SS_DTYPE_FP8;
	c.cost_model = "roofline";
	c.policy = "vllm:max_num_batched_tokens=1";
	c.engine = NULL;
	c.kv_blocks_override = 1000;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(r.req[k].first_token_ns, t[0] + x + t[1] + k * period);
	engine_free(e);
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
	tcase_add_test(tc, sliced_split_shares_each_operator);
	suite_add_tcase(s, tc);
	tc = tcase_create("moe");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, deepseek_stages_hold_their_own_layers);
	tcase_add_test(tc, qwen3_pipeline_of_expert_parallel_stages);
	tcase_add_test(tc, local_layers_kv_per_stage);
	tcase_add_test(tc, slowest_stage_paces_a_mixed_pipeline);
	suite_add_tcase(s, tc);
	return s;
}
