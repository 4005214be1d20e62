/* The engine end to end on small hand-checked scenarios: exact step timing
 * with the constant cost model, batching of simultaneous arrivals, KV
 * accounting across preemption (nothing leaks, nothing is freed twice),
 * rejection instead of hanging, routing, determinism and config errors. */
#include <errno.h>
#include <inttypes.h>

#include "check-main.h"
#include "engine-fixture.h"
#include "executor.h"
/* white box: the pool of in-flight requests (memory_follows_requests_in_flight) */
#include "engine-debug.h"
#include "spec.h"

#define MS 1000000LL

static const char *cost_a = "constant:prefill_ms_per_token=0.1,decode_ms_per_step=1";

START_TEST(single_request_exact_times)
{
	struct wl_request rq[] = { { .arrival_ns = 5 * MS, .prompt_tokens = 100, .output_tokens = 3 } };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, cost_a, "vllm", 100);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	/* prefill 100 x 0.1 ms = 10 ms emits token 1; two 1 ms decodes follow */
	ck_assert_int_eq(r.req[0].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[0].first_sched_ns, 5 * MS);
	ck_assert_int_eq(r.req[0].first_token_ns, 15 * MS);
	ck_assert_int_eq(r.req[0].finish_ns, 17 * MS);
	ck_assert_int_eq(r.req[0].generated_tokens, 3);
	ck_assert_uint_eq(r.itl->count, 2);
	ck_assert_int_eq(r.itl->min, 1 * MS);
	ck_assert_int_eq(r.inst[0].steps, 3);
	ck_assert_int_eq(engine_kv_free_blocks(e, 0), 100);
	engine_free(e);
}
END_TEST

START_TEST(simultaneous_arrivals_share_a_step)
{
	struct wl_request rq[] = {
		{ .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 2 },
		{ .arrival_ns = 0, .prompt_tokens = 100, .output_tokens = 2 },
	};
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 2);
	cfg_tiny(&c, cost_a, "vllm", 100);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(r.req[i].first_token_ns, 20 * MS);
		ck_assert_int_eq(r.req[i].finish_ns, 21 * MS);
	}
	ck_assert_int_eq(r.inst[0].steps, 2);
	ck_assert_double_eq(r.inst[0].batch_seqs.max, 2);
	engine_free(e);
}
END_TEST

START_TEST(decode_continues_while_a_new_prompt_is_chunked)
{
	/* B arrives while A decodes; with a 64-token budget B's 150-token
	 * prompt is prefilled in chunks alongside A's decodes. */
	struct wl_request rq[] = {
		{ .arrival_ns = 0, .prompt_tokens = 20, .output_tokens = 10 },
		{ .arrival_ns = 3 * MS, .prompt_tokens = 150, .output_tokens = 2 },
	};
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 2);
	cfg_tiny(&c, cost_a, "vllm:max_num_batched_tokens=64", 100);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[1].state, REQ_FINISHED);
	ck_assert_double_le(r.inst[0].batch_tokens.max, 64);
	/* A's gaps never stretch to a whole 150-token prefill (15 ms):
	 * the longest is a 63-token chunk plus a decode, 7.3 ms. */
	ck_assert_int_le(r.itl->max, 7310000);
	engine_free(e);
}
END_TEST

START_TEST(preemption_keeps_kv_accounting_exact)
{
	enum { N = 60 };
	struct wl_request rq[N];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	uint64_t preempted = 0, tokens = 0;

	/* 24 blocks of 16 tokens; each request peaks at 8 blocks, so at most
	 * three fit and decodes keep running out of blocks. */
	for (int i = 0; i < N; i++)
		rq[i] = (struct wl_request){ .arrival_ns = i * 100000LL, .prompt_tokens = 64,
					     .output_tokens = 64 };
	wl_fill(&wl, rq, N);
	cfg_tiny(&c, cost_a, "vllm", 24);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		ck_assert_int_eq(r.req[i].generated_tokens, 64);
		preempted += (uint64_t)r.req[i].preemptions;
		tokens += (uint64_t)r.req[i].generated_tokens;
	}
	ck_assert_uint_gt(preempted, 0);
	ck_assert_uint_eq(preempted, r.inst[0].preemptions);
	ck_assert_int_le(r.inst[0].peak_used_blocks, 24);
	ck_assert_int_eq(engine_kv_free_blocks(e, 0), 24);
	/* every token but each request's first is an ITL gap */
	ck_assert_uint_eq(r.itl->count, tokens - N);
	engine_free(e);
}
END_TEST

START_TEST(impossible_requests_are_rejected_with_reasons)
{
	struct wl_request rq[] = {
		{ .arrival_ns = 0, .prompt_tokens = 4000, .output_tokens = 200 },  /* > context 4096 */
		{ .arrival_ns = 1, .prompt_tokens = 300, .output_tokens = 30 },    /* > 20 blocks */
		{ .arrival_ns = 2, .prompt_tokens = 100, .output_tokens = 5 },     /* fine */
		{ .arrival_ns = 3, .prompt_tokens = 200, .output_tokens = 5 },     /* > unchunked budget */
	};
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 4);
	cfg_tiny(&c, cost_a, "vllm:chunked=off,max_num_batched_tokens=128", 20);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].state, REQ_REJECTED);
	ck_assert_ptr_nonnull(strstr(r.req[0].reject_reason, "context"));
	ck_assert_int_eq(r.req[1].state, REQ_REJECTED);
	ck_assert_ptr_nonnull(strstr(r.req[1].reject_reason, "KV"));
	ck_assert_int_eq(r.req[2].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[3].state, REQ_REJECTED);
	ck_assert_ptr_nonnull(strstr(r.req[3].reject_reason, "max_num_batched_tokens"));
	engine_free(e);
}
END_TEST

START_TEST(round_robin_spreads_requests)
{
	enum { N = 30 };
	struct wl_request rq[N];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	int per[3] = { 0 };

	for (int i = 0; i < N; i++)
		rq[i] = (struct wl_request){ .arrival_ns = i * MS, .prompt_tokens = 50,
					     .output_tokens = 5 };
	wl_fill(&wl, rq, N);
	cfg_tiny(&c, cost_a, "vllm", 100);
	c.n_instances = 3;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(r.req[i].instance, i % 3);
		per[r.req[i].instance]++;
	}
	ck_assert_int_eq(per[0], 10);
	ck_assert_int_eq(per[2], 10);
	engine_free(e);
	/* no router given is the default, rr, as engine_config_defaults and
	 * the CLI say (it used to mean lor, which would send every short
	 * request away from instance 0 while the long first one runs) */
	rq[0].output_tokens = 1000;
	for (int i = 1; i < N; i++)
		rq[i] = (struct wl_request){ .arrival_ns = i * 100 * MS, .prompt_tokens = 50,
					     .output_tokens = 1 };
	c.router = NULL;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(r.req[i].instance, i % 3);
	engine_free(e);
}
END_TEST

START_TEST(lot_routes_to_the_least_loaded)
{
	/* A long request lands on instance 0; the next goes to instance 1;
	 * the third to whichever holds fewer tokens: instance 1. */
	struct wl_request rq[] = {
		{ .arrival_ns = 0, .prompt_tokens = 1000, .output_tokens = 50 },
		{ .arrival_ns = 1, .prompt_tokens = 10, .output_tokens = 50 },
		{ .arrival_ns = 2, .prompt_tokens = 10, .output_tokens = 50 },
	};
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 3);
	cfg_tiny(&c, cost_a, "vllm", 200);
	c.n_instances = 2;
	c.router = "lot";
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].instance, 0);
	ck_assert_int_eq(r.req[1].instance, 1);
	ck_assert_int_eq(r.req[2].instance, 1);
	engine_free(e);
}
END_TEST

START_TEST(same_seed_same_run)
{
	enum { N = 500 };
	struct wl_request *rq = calloc(N, sizeof(*rq));
	struct workload wl;
	struct engine_config c;
	struct engine_results r1, r2;
	struct engine *e1, *e2;
	uint64_t x = 7;

	for (int i = 0; i < N; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		rq[i] = (struct wl_request){ .arrival_ns = i * 2 * MS,
					     .prompt_tokens = 10 + (int32_t)((x >> 40) % 500),
					     .output_tokens = 1 + (int32_t)((x >> 20) % 100) };
	}
	wl_fill(&wl, rq, N);
	cfg_tiny(&c, "roofline", "vllm", 60);
	c.n_instances = 2;
	c.router = "lot";
	e1 = run_ok(&c, &wl);
	e2 = run_ok(&c, &wl);
	engine_results(e1, &r1);
	engine_results(e2, &r2);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(r1.req[i].finish_ns, r2.req[i].finish_ns);
		ck_assert_int_eq(r1.req[i].first_token_ns, r2.req[i].first_token_ns);
		ck_assert_int_eq(r1.req[i].instance, r2.req[i].instance);
		ck_assert_int_eq(r1.req[i].preemptions, r2.req[i].preemptions);
	}
	ck_assert_int_eq(r1.end_ns, r2.end_ns);
	engine_free(e1);
	engine_free(e2);
	free(rq);
}
END_TEST

START_TEST(bad_configurations_are_errors)
{
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 2 } };
	struct workload wl;
	struct engine_config c;
	struct ss_error err = { 0 };
	struct engine *e = NULL;

	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, cost_a, "nosuch", 10);
	ck_assert_int_lt(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "nosuch"));
	ck_assert_ptr_null(e);
	cfg_tiny(&c, cost_a, "vllm:max_num_seqz=3", 10);
	ck_assert_int_lt(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "max_num_seqz"));
	cfg_tiny(&c, cost_a, "vllm", 10);
	c.router = "fastest";
	ck_assert_int_lt(engine_new(&e, &c, &wl, &err), 0);
	cfg_tiny(&c, "magic", "vllm", 10);
	ck_assert_int_lt(engine_new(&e, &c, &wl, &err), 0);
	cfg_tiny(&c, cost_a, "vllm", 10);
	c.tp = 0;
	ck_assert_int_lt(engine_new(&e, &c, &wl, &err), 0);
}
END_TEST

/* The memory estimate grows with instances x blocks and with requests, and
 * engine_new refuses a configuration over its memory limit before
 * allocating anything for it. */
START_TEST(memory_limit_refuses_before_allocating)
{
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 2 } };
	struct workload wl;
	struct engine_config c;
	struct engine_memory m1, m2, m3, m4;
	struct ss_error err = { 0 };
	struct engine *e = NULL;

	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, cost_a, "vllm", 1000);
	ck_assert_int_eq(engine_memory_estimate(&c, 1, &m1, &err), 0);
	c.n_instances = 10;
	ck_assert_int_eq(engine_memory_estimate(&c, 1, &m2, &err), 0);
	ck_assert_int_eq(m2.n_instances, 10);
	ck_assert_int_eq(m2.kv_blocks, 10000);
	ck_assert_uint_ge(m2.kv_bytes, 10 * m1.kv_bytes);
	ck_assert_int_eq(engine_memory_estimate(&c, 1000001, &m3, &err), 0);
	ck_assert_uint_ge(m3.request_bytes - m2.request_bytes, 1000000 * sizeof(struct wl_request));
	c.prefix_cache = "on";
	ck_assert_int_eq(engine_memory_estimate(&c, 1, &m4, &err), 0);
	ck_assert_uint_gt(m4.kv_bytes, m2.kv_bytes);
	/* a limit below the estimate: refused with the estimate in words */
	cfg_tiny(&c, cost_a, "vllm", 100000000);
	c.memory_limit_bytes = 1000000000;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -ENOMEM);
	ck_assert_ptr_null(e);
	ck_assert_msg(strstr(err.msg, "this run needs about 1.") &&
		      strstr(err.msg, "(1 instance x 100000000 KV blocks, 1 requests); the machine has 1.0 GB"),
		      "%s", err.msg);
	/* bad configurations are the estimate's errors as they are engine_new's */
	cfg_tiny(&c, cost_a, "vllm", 10);
	c.tp = 0;
	ck_assert_int_lt(engine_memory_estimate(&c, 1, &m1, &err), 0);
	/* within the limit: runs */
	cfg_tiny(&c, cost_a, "vllm", 10);
	c.memory_limit_bytes = 1000000000;
	e = run_ok(&c, &wl);
	engine_free(e);
}
END_TEST

/* A struct request lives only while its request is in the run: requests
 * that arrive one after another's finish reuse one slab of structs, a
 * burst needs as many as are in flight at once, and every request's record
 * is complete either way. */
START_TEST(memory_follows_requests_in_flight)
{
	enum { N = 5000, BURST = 3000 };
	struct wl_request *rq = calloc(N, sizeof(*rq));
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	uint32_t per_slab;

	for (int i = 0; i < N; i++)   /* 10 ms apart; each takes 2 ms */
		rq[i] = (struct wl_request){ .arrival_ns = i * 10 * MS, .prompt_tokens = 10,
					     .output_tokens = 2 };
	wl_fill(&wl, rq, N);
	cfg_tiny(&c, cost_a, "vllm", 1000);
	e = run_ok(&c, &wl);
	ck_assert_uint_eq(engine_debug_slabs(e, &per_slab), 1);
	engine_results(e, &r);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(r.req[i].id, i);
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		ck_assert_int_eq(r.req[i].first_token_ns, i * 10 * MS + 1 * MS);
		ck_assert_int_eq(r.req[i].finish_ns, i * 10 * MS + 2 * MS);
	}
	engine_free(e);
	for (int i = 0; i < BURST; i++)   /* all at once: all in flight */
		rq[i].arrival_ns = 0;
	wl_fill(&wl, rq, BURST);
	cfg_tiny(&c, cost_a, "vllm:max_num_seqs=4096,max_num_batched_tokens=65536", 100000);
	e = run_ok(&c, &wl);
	ck_assert_uint_eq(engine_debug_slabs(e, &per_slab), (BURST + per_slab - 1) / per_slab);
	engine_results(e, &r);
	for (int i = 0; i < BURST; i++)
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
	engine_free(e);
	free(rq);
}
END_TEST

START_TEST(model_too_big_for_gpu)
{
	struct model_spec big = tiny_model;
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 2 } };
	struct workload wl;
	struct engine_config c;
	struct ss_error err = { 0 };
	struct engine *e = NULL;

	big.n_layers = 4000;   /* ~2.6e9 params per layer group: far over 16 GB */
	big.hidden = 4096;
	big.intermediate = 16384;
	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, cost_a, "vllm", 0);
	c.model = &big;
	ck_assert_int_lt(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "does not fit"));
}
END_TEST

START_TEST(kv_capacity_from_memory)
{
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 2 } };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	double per_block = 2.0 * 2 * 4 * 64 * 2 * 16;   /* bytes */
	double expect;

	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, cost_a, "vllm", 0);
	c.activation_reserve_bytes = 1e9;
	c.gpu_mem_util = 0.5;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	expect = (16e9 * 0.5 - model_weight_bytes(&tiny_model) - 1e9) / per_block;
	ck_assert_int_eq(r.kv_blocks_per_instance, (int64_t)expect);
	engine_free(e);
}
END_TEST

/* An engine profile with kv_profile_step reserves the activations of the
 * batch policy's own step (its token budget and sequence limit), as vLLM's
 * profiling run does; without it, or where the spec leaves them out, the
 * fixed 8192-token step of 256 sequences (docs/kv-cache.md "Capacity"). */
static int64_t kv_blocks_with(const struct engine_profile *p, const char *policy)
{
	struct engine_config c;
	struct ss_error err = { 0 };
	int32_t blocks = 0;

	cfg_tiny(&c, cost_a, policy, 0);
	c.engine = p;
	ck_assert_msg(engine_kv_capacity(&c, &blocks, &err) == 0, "%s", err.msg);
	return blocks;
}

START_TEST(kv_reserve_follows_the_profile_step)
{
	struct engine_profile plain = { .name = "plain" };
	struct engine_profile prof = { .name = "prof", .kv_profile_step = true };
	/* tiny_model per token: (4 x 256 + 2 x 512) x 2 B of activations;
	 * per sequence: 1000 fp32 logits; a block: 16 x 2 KiB of KV */
	double act = (4.0 * 256 + 2.0 * 512) * 2, logit = 1000 * 4.0, block = 16 * 2048.0;
	double free0 = 16e9 * 0.9 - model_weight_bytes(&tiny_model) - 1073741824.0;
	int64_t fixed = (int64_t)((free0 - 8192 * act - 256 * logit) / block);

	ck_assert_int_eq(kv_blocks_with(&plain, "vllm"), fixed);
	ck_assert_int_eq(kv_blocks_with(&plain, "vllm:max_num_batched_tokens=500000"), fixed);
	ck_assert_int_eq(kv_blocks_with(&prof, "vllm"), fixed);
	ck_assert_int_eq(kv_blocks_with(&prof, "vllm:max_num_batched_tokens=500000,max_num_seqs=8"),
			 (int64_t)((free0 - 500000 * act - 8 * logit) / block));
	ck_assert_int_eq(kv_blocks_with(&prof, "vllm:max_num_seqs=1024"),
			 (int64_t)((free0 - 8192 * act - 1024 * logit) / block));
	/* another policy's keys (sarathi: token_budget), and one without any */
	ck_assert_int_eq(kv_blocks_with(&prof, "sarathi:token_budget=512"),
			 (int64_t)((free0 - 512 * act - 256 * logit) / block));
	ck_assert_int_eq(kv_blocks_with(&prof, "static"), fixed);
}
END_TEST

/* ---- live mode: a wall clock instead of simulated time ---------------- */

/* A stand-in wall clock that advances only when slept on or when a step
 * "runs", so a live run with known step durations is reproducible. */
struct fake_wall {
	int64_t t;
	void *model_exec;   /* the model executor's state */
};

static int64_t fake_now(void *ctx)
{
	return ((struct fake_wall *)ctx)->t;
}

static void fake_sleep(void *ctx, int64_t until)
{
	struct fake_wall *w = ctx;

	if (until > w->t)
		w->t = until;
}

/* A "live" executor: the model executor's durations, taken as wall time
 * passing while the step runs (as a kernel backend would). */
static int fake_run_step(void *priv, const struct exec_step *step, struct exec_result *out,
			 struct ss_error *err)
{
	struct fake_wall *w = priv;
	int rc = executor_model_ops.run_step(w->model_exec, step, out, err);

	w->t += out->duration_ns;
	return rc;
}

static const struct executor_ops fake_live_ops = {
	.version = EXECUTOR_VERSION,
	.name = "fake-live",
	.run_step = fake_run_step,
};

START_TEST(live_clock_makes_the_same_decisions)
{
	enum { N = 300 };
	struct wl_request *rq = calloc(N, sizeof(*rq));
	struct workload wl;
	struct engine_config c;
	struct engine_results rs, rl;
	struct engine *sim, *live = NULL;
	struct ss_error err = { 0 };
	struct fake_wall wall = { 0 };
	struct engine_clock clock = { fake_now, fake_sleep, &wall };
	struct cost_config cc = { .model = &tiny_model, .gpu = &tiny_gpu, .tp = 1 };
	struct cost_model *cm = NULL;
	char model_exec[64];
	uint64_t x = 11;

	/* bursts and gaps, KV pressure (preemptions), chunked prefill */
	for (int i = 0; i < N; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		rq[i] = (struct wl_request){ .arrival_ns = (i / 10) * 40 * MS + (i % 10) * 997,
					     .prompt_tokens = 20 + (int32_t)((x >> 30) % 300),
					     .output_tokens = 1 + (int32_t)((x >> 10) % 80) };
	}
	wl_fill(&wl, rq, N);
	cfg_tiny(&c, cost_a, "vllm:max_num_batched_tokens=256", 60);
	sim = run_ok(&c, &wl);

	ck_assert_int_eq(cost_model_new(&cm, cost_a, &cc, &err), 0);
	ck_assert_uint_le(executor_model_ops.priv_size, sizeof(model_exec));
	ck_assert_int_eq(executor_model_ops.init(model_exec, cm, &err), 0);
	wall.model_exec = model_exec;
	c.clock = &clock;
	c.executor = &fake_live_ops;
	c.exec_priv = &wall;
	ck_assert_msg(engine_new(&live, &c, &wl, &err) == 0 && engine_run(live, &err) == 0,
		      "%s", err.msg);

	engine_results(sim, &rs);
	engine_results(live, &rl);
	ck_assert_uint_gt(rs.inst[0].preemptions, 0);
	ck_assert_uint_eq(rs.inst[0].preemptions, rl.inst[0].preemptions);
	ck_assert_uint_eq(rs.inst[0].steps, rl.inst[0].steps);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(rs.req[i].state, rl.req[i].state);
		ck_assert_int_eq(rs.req[i].first_sched_ns, rl.req[i].first_sched_ns);
		ck_assert_int_eq(rs.req[i].first_token_ns, rl.req[i].first_token_ns);
		ck_assert_int_eq(rs.req[i].finish_ns, rl.req[i].finish_ns);
		ck_assert_int_eq(rs.req[i].preemptions, rl.req[i].preemptions);
	}
	engine_free(sim);
	engine_free(live);
	cost_model_free(cm);
	free(rq);
}
END_TEST

/* engine_config.stop (docs/servesim.1.md "SIGNALS"): a live clock whose
 * wait raises the flag when asked to wait until 150 ms or later.  Requests
 * of 10 prompt and 5 output tokens at 0, 100, 200 and 300 ms each finish
 * in about 5 ms (1 ms of prefill, four 1 ms decode steps), so the flag
 * goes up in the wait for the arrival at 200 ms: two requests finished,
 * the other two never arrived.  A flag up before the run stops it at its
 * first event; one that stays down changes nothing. */
static volatile sig_atomic_t stop_flag;

static void stopping_sleep(void *ctx, int64_t until)
{
	fake_sleep(ctx, until);
	if (until >= 150 * MS)
		stop_flag = 1;
}

START_TEST(stop_flag_ends_the_run_as_it_stands)
{
	struct wl_request rq[4];
	struct workload wl;
	struct engine_config c;
	struct engine_results r, full;
	struct summary sum;
	struct slo_config slo = { 0 };
	struct engine *e = NULL, *ref;
	struct ss_error err = { 0 };
	struct fake_wall wall = { 0 };
	struct engine_clock clock = { fake_now, stopping_sleep, &wall };

	for (int i = 0; i < 4; i++)
		rq[i] = (struct wl_request){ .arrival_ns = i * 100 * MS, .prompt_tokens = 10,
					     .output_tokens = 5 };
	wl_fill(&wl, rq, 4);
	cfg_tiny(&c, cost_a, "vllm", 100);
	stop_flag = 0;
	c.stop = &stop_flag;
	ref = run_ok(&c, &wl);   /* down all along: complete */
	engine_results(ref, &full);
	ck_assert_int_eq(full.req[3].state, REQ_FINISHED);

	c.clock = &clock;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_int_eq(engine_run(e, &err), -EINTR);
	ck_assert_ptr_nonnull(strstr(err.msg, "interrupted after 2 of 4 requests"));
	engine_results(e, &r);
	ck_assert_uint_eq(r.n_req, 4);
	ck_assert_int_eq(r.req[0].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[1].state, REQ_FINISHED);
	ck_assert_int_lt(r.req[1].finish_ns, 150 * MS);
	ck_assert_int_eq(r.req[1].finish_ns, full.req[1].finish_ns);   /* kept as they were */
	ck_assert_int_eq(r.req[2].finish_ns, -1);
	ck_assert_int_eq(r.req[3].finish_ns, -1);
	ck_assert_int_lt(r.end_ns, 150 * MS);   /* the arrival waited for was not handled */
	ck_assert_int_eq(summary_compute(&sum, &r, &slo, 1, &err), 0);
	ck_assert_uint_eq(sum.requests, 4);
	ck_assert_uint_eq(sum.completed, 2);
	ck_assert_uint_eq(sum.unfinished, 2);
	engine_free(e);

	/* up before the run: nothing is handled */
	c.clock = NULL;
	e = NULL;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_int_eq(engine_run(e, &err), -EINTR);
	engine_results(e, &r);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(r.req[i].finish_ns, -1);
	engine_free(e);
	engine_free(ref);
}
END_TEST

/* An executor's step duration is data (a live measurement, a cost model's
 * answer): one of 0 ns, or one that ends past the int64 ns clock, fails
 * engine_run with an error instead of an assertion or a wrapped time. */
static int64_t bad_duration;

static int bad_run_step(void *priv, const struct exec_step *step, struct exec_result *out,
			struct ss_error *err)
{
	(void)priv;
	(void)step;
	(void)err;
	memset(out, 0, sizeof(*out));
	out->duration_ns = bad_duration;
	return 0;
}

static const struct executor_ops bad_exec_ops = {
	.version = EXECUTOR_VERSION,
	.name = "bad",
	.run_step = bad_run_step,
};

START_TEST(a_step_duration_out_of_range_is_an_error)
{
	/* the second arrives after the first step started, so its step
	 * starts at a time > 0 and INT64_MAX ns from then does not fit */
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 2 },
				   { .arrival_ns = 5, .prompt_tokens = 10, .output_tokens = 2 } };
	const int64_t dur[2] = { 0, INT64_MAX / 2 + 1 };
	const char *want[2] = { "the bad executor gave a step on instance 0 a duration of 0 ns",
				"a step on instance 0 would end at 9.22e+09 s, past the simulator's "
				"time range" };

	for (int k = 0; k < 2; k++) {
		struct workload wl;
		struct engine_config c;
		struct ss_error err = { 0 };
		struct engine *e = NULL;

		wl_fill(&wl, rq, 2);
		cfg_tiny(&c, cost_a, "vllm:max_num_seqs=1", 100);
		c.executor = &bad_exec_ops;
		bad_duration = dur[k];
		ck_assert_int_eq(engine_new(&e, &c, &wl, &err), 0);
		ck_assert_int_eq(engine_run(e, &err), -ERANGE);
		ck_assert_msg(strstr(err.msg, want[k]), "case %d: %s", k, err.msg);
		engine_free(e);
	}
}
END_TEST

/* Executors see a view of each request (struct exec_req): its block table,
 * covering the step's positions, and whether it emits; and they label the
 * results themselves (executor_ops.identity) rather than the CLI patching
 * them.  A recording executor wraps the model executor and checks the views
 * every step; its identity shows in engine_results. */
struct rec_exec {
	void *model_exec;
	int32_t kv_blocks, block_size;
	uint64_t steps, bad;
	int64_t idle_ns;
};

static int rec_run_step(void *priv, const struct exec_step *step, struct exec_result *out,
			struct ss_error *err)
{
	struct rec_exec *x = priv;
	uint32_t emit = 0;

	for (uint32_t k = 0; k < step->n_items; k++) {
		const struct exec_req *q = &step->reqs[k];
		int64_t need = step->items[k].context + step->items[k].tokens;

		if (!q->block_table || (int64_t)q->n_blocks * x->block_size < need)
			x->bad++;
		for (int32_t b = 0; b < q->n_blocks; b++)
			if (q->block_table[b] < 0 || q->block_table[b] >= x->kv_blocks)
				x->bad++;
		emit += q->emit;
	}
	if (emit != step->n_emit)
		x->bad++;
	x->steps++;
	return executor_model_ops.run_step(x->model_exec, step, out, err);
}

static void rec_identity(const void *priv, int64_t idle_ns, struct exec_identity *out)
{
	struct rec_exec *x = (struct rec_exec *)priv;

	x->idle_ns = idle_ns;
	out->cost_model_name = "recorded";
	out->op_backend[COST_OP_GEMM] = "recorder";
	out->idle_power_w = 123;
}

START_TEST(executors_see_request_views_and_name_themselves)
{
	enum { N = 200 };
	struct wl_request *rq = calloc(N, sizeof(*rq));
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e = NULL;
	struct ss_error err = { 0 };
	struct cost_config cc = { .model = &tiny_model, .gpu = &tiny_gpu, .tp = 1 };
	struct cost_model *cm = NULL;
	char model_exec[64];
	struct rec_exec x = { .model_exec = model_exec, .kv_blocks = 60, .block_size = 16 };
	struct executor_ops ops = { .version = EXECUTOR_VERSION, .name = "recorder",
				    .run_step = rec_run_step, .identity = rec_identity };
	uint64_t h = 7;

	for (int i = 0; i < N; i++) {
		h = h * 6364136223846793005ULL + 1442695040888963407ULL;
		rq[i] = (struct wl_request){ .arrival_ns = i * 3 * MS,
					     .prompt_tokens = 10 + (int32_t)((h >> 30) % 200),
					     .output_tokens = 1 + (int32_t)((h >> 10) % 40) };
	}
	wl_fill(&wl, rq, N);
	ck_assert_int_eq(cost_model_new(&cm, cost_a, &cc, &err), 0);
	ck_assert_uint_le(executor_model_ops.priv_size, sizeof(model_exec));
	ck_assert_int_eq(executor_model_ops.init(model_exec, cm, &err), 0);
	/* chunked prefill and KV pressure: partial prompts, preemptions */
	cfg_tiny(&c, cost_a, "vllm:max_num_batched_tokens=128", x.kv_blocks);
	c.executor = &ops;
	c.exec_priv = &x;
	ck_assert_msg(engine_new(&e, &c, &wl, &err) == 0 && engine_run(e, &err) == 0, "%s",
		      err.msg);
	engine_results(e, &r);
	ck_assert_uint_gt(r.inst[0].preemptions, 0);
	ck_assert_uint_eq(x.steps, r.inst[0].steps);
	ck_assert_uint_eq(x.bad, 0);
	ck_assert_str_eq(r.executor_name, "recorder");
	ck_assert_str_eq(r.cost_model_name, "recorded");
	ck_assert_str_eq(r.op_backend[COST_OP_GEMM], "recorder");
	/* the rest keep the engine's defaults: the cost model's backends */
	ck_assert_str_eq(r.op_backend[COST_OP_HOST], cost_model_op_backend(cm, COST_OP_HOST));
	ck_assert_double_eq(r.idle_power_w, 123);
	ck_assert_int_eq(x.idle_ns, r.end_ns - r.inst[0].busy_ns);
	engine_free(e);

	/* a version-1 table has no identity: the cost model's, the GPU's idle power */
	ops.version = 1;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_str_eq(r.cost_model_name, "constant");
	ck_assert_double_eq(r.idle_power_w, tiny_gpu.idle_w);
	engine_free(e);
	e = NULL;
	/* a table newer than this engine is refused, not run */
	ops.version = EXECUTOR_VERSION + 1;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, "executor recorder: version"));
	cost_model_free(cm);
	free(rq);
}
END_TEST

/* admission_ops.deadline of the reference: none known, so expire is asked
 * about every waiting request at every step, as the engine always did. */
static int64_t deadline_scan(const void *priv, const struct req_view *req)
{
	(void)priv;
	(void)req;
	return INT64_MIN;
}

/* Run on the engine's reference path: the whole waiting queue sorted
 * before every step (what prefix caching still needs), and with scan, a
 * queue timeout asking every waiting request at every step. */
static struct engine *run_sorting(const struct engine_config *c, const struct workload *wl,
				  bool scan)
{
	struct ss_error err = { 0 };
	struct engine *e = NULL;

	if (engine_new(&e, c, wl, &err))
		ck_abort_msg("engine failed: %s", err.msg);
	for (uint32_t i = 0; i < engine_debug_instances(e); i++)
		waitq_use_sorting(engine_debug_waitq(e, i));
	if (scan)
		engine_debug_set_deadline(e, deadline_scan);
	if (engine_run(e, &err))
		ck_abort_msg("engine failed: %s", err.msg);
	return e;
}

/* n requests 20 us apart with random prompts, outputs, priorities and
 * tenants (tenant 0 floods): an overload for one small instance. */
static struct wl_request *overload_requests(int n)
{
	struct wl_request *rq = calloc((size_t)n, sizeof(*rq));
	uint64_t x = 12345;

	ck_assert_ptr_nonnull(rq);
	for (int i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		rq[i] = (struct wl_request){
			.arrival_ns = i * 20000LL,
			.prompt_tokens = 8 + (int32_t)(x >> 33) % 120,
			.output_tokens = 1 + (int32_t)(x >> 45) % 60,
			.priority = (int32_t)(x >> 20) % 4,
			/* tenant 0 floods: vtc serves the others first */
			.tenant = (int32_t)((x >> 50) % 6) < 3 ? 0 : (int32_t)((x >> 50) % 6) - 2,
		};
	}
	return rq;
}

/* Under sjf, spf and strict priority the engine keeps the waiting queue
 * ordered incrementally (a sorted head and a heap, sim/engine-sched.c),
 * with aging by the static key within its rounding margin (aging=50000
 * levels/s is one level per 20 us, the arrival spacing: exact ties, so
 * steps where the engine must sort), under vtc as per-tenant queues merged
 * by tenant key.  An overloaded instance that reads 3 waiting requests per
 * step and keeps preempting (so requests rejoin the queue) must serve
 * every request at the same times as on the path that sorts the whole
 * queue before every step, and not in arrival order. */
START_TEST(static_key_orders_match_the_sorting_path)
{
	enum { N = 1500 };
	static const char *const orders[] = { "sjf", "spf", "priority", "priority:aging=0.5",
					      "priority:aging=50000", "vtc", "vtc:wp=1,wq=0.25" };
	struct wl_request *rq = overload_requests(N);

	for (size_t o = 0; o < sizeof(orders) / sizeof(*orders); o++) {
		struct workload wl;
		struct engine_config c;
		struct engine_results rf, rs;
		struct engine *fast, *sorting;
		uint64_t preempted = 0;
		int out_of_order = 0;

		wl_fill(&wl, rq, N);
		cfg_tiny(&c, cost_a, "vllm:max_num_seqs=3", 20);
		c.order = orders[o];
		fast = run_ok(&c, &wl);
		sorting = run_sorting(&c, &wl, false);
		engine_results(fast, &rf);
		engine_results(sorting, &rs);
		for (int i = 0; i < N; i++) {
			ck_assert_int_eq(rf.req[i].state, rs.req[i].state);
			ck_assert_int_eq(rf.req[i].first_sched_ns, rs.req[i].first_sched_ns);
			ck_assert_int_eq(rf.req[i].first_token_ns, rs.req[i].first_token_ns);
			ck_assert_int_eq(rf.req[i].finish_ns, rs.req[i].finish_ns);
			ck_assert_int_eq(rf.req[i].preemptions, rs.req[i].preemptions);
			preempted += (uint64_t)rf.req[i].preemptions;
			if (i > 0 && rf.req[i].first_sched_ns < rf.req[i - 1].first_sched_ns)
				out_of_order++;
		}
		ck_assert_msg(preempted > 0, "%s: no preemptions", orders[o]);
		ck_assert_msg(out_of_order > N / 10, "%s: served nearly in arrival order",
			      orders[o]);
		engine_free(fast);
		engine_free(sorting);
	}
	free(rq);
}
END_TEST

/* A queue timeout indexes the waiting requests by deadline (arrival + ms)
 * and asks only the due ones, under every order's queue structure; the
 * reference sorts the whole queue and asks every waiting request at every
 * step.  Both must drop the same requests and serve the others at the
 * same times; and as the timeout says, a request scheduled at all was
 * scheduled within ms of its arrival (expiry is checked before each step
 * is formed), and one dropped for it never started. */
START_TEST(queue_timeout_expires_as_the_scan_does)
{
	enum { N = 1500 };
	static const char *const orders[] = { "fcfs", "sjf", "spf", "priority",
					      "priority:aging=50000", "vtc", "vtc:wp=1,wq=0.25" };
	const int64_t limit_ns = 8000 * 1000000LL;  /* timeout:ms=8000 */
	struct wl_request *rq = overload_requests(N);
	uint64_t preempted = 0;   /* over all orders: requests rejoin the queue */

	for (size_t o = 0; o < sizeof(orders) / sizeof(*orders); o++) {
		struct workload wl;
		struct engine_config c;
		struct engine_results rf, rs;
		struct engine *fast, *ref;
		int dropped = 0, served = 0;

		wl_fill(&wl, rq, N);
		cfg_tiny(&c, cost_a, "vllm:max_num_seqs=3", 20);
		c.order = orders[o];
		c.admission = "timeout:ms=8000";
		fast = run_ok(&c, &wl);
		ref = run_sorting(&c, &wl, true);
		engine_results(fast, &rf);
		engine_results(ref, &rs);
		for (int i = 0; i < N; i++) {
			const struct req_record *a = &rf.req[i];

			ck_assert_int_eq(a->state, rs.req[i].state);
			ck_assert_int_eq(a->first_sched_ns, rs.req[i].first_sched_ns);
			ck_assert_int_eq(a->first_token_ns, rs.req[i].first_token_ns);
			ck_assert_int_eq(a->finish_ns, rs.req[i].finish_ns);
			ck_assert_int_eq(a->preemptions, rs.req[i].preemptions);
			ck_assert(a->reject_reason == rs.req[i].reject_reason ||
				  (a->reject_reason && rs.req[i].reject_reason &&
				   !strcmp(a->reject_reason, rs.req[i].reject_reason)));
			preempted += (uint64_t)a->preemptions;
			if (a->state == REQ_REJECTED && a->reject_reason &&
			    !strcmp(a->reject_reason, "queue timeout")) {
				ck_assert_int_eq(a->first_sched_ns, -1);
				ck_assert_int_eq(a->preemptions, 0);
				dropped++;
			}
			if (a->first_sched_ns >= 0) {
				ck_assert_int_le(a->first_sched_ns - a->arrival_ns, limit_ns);
				served++;
			}
		}
		ck_assert_msg(dropped > N / 10 && served > N / 10, "%s: %d dropped, %d served",
			      orders[o], dropped, served);
		engine_free(fast);
		engine_free(ref);
	}
	ck_assert(preempted > 0);
	free(rq);
}
END_TEST

/* With the prefix cache a static-key, aging or tenant-key order keeps its
 * structure: the lookups it gives back are those of the last window now
 * outside it, and spf's key (pending tokens) is taken again after a lookup
 * moves it.  An
 * overloaded instance whose requests share prefixes in 7 groups (16-token
 * blocks), with a cache that evicts, with and without a queue timeout,
 * must serve, cache and drop every request as the sorting path does. */
START_TEST(incremental_orders_with_the_prefix_cache_match_the_sorting_path)
{
	enum { N = 1200 };
	static const char *const orders[] = { "sjf", "spf", "priority", "priority:aging=50000",
					      "vtc" };
	static const char *const caches[] = { "on", "blocks=6" };
	static const char *const admissions[] = { "none", "timeout:ms=6000" };
	struct wl_request *rq = overload_requests(N);
	uint32_t *hashes = calloc(N * 8, sizeof(*hashes));
	size_t n_hashes = 0;
	int64_t hits = 0;
	int dropped = 0;

	ck_assert_ptr_nonnull(hashes);
	for (int i = 0; i < N; i++) {
		int32_t blocks = rq[i].prompt_tokens / 16 < 8 ? rq[i].prompt_tokens / 16 : 8;

		rq[i].prefix_off = (uint32_t)n_hashes;
		rq[i].prefix_n = (uint32_t)blocks;
		for (int32_t b = 0; b < blocks; b++)
			hashes[n_hashes++] = (uint32_t)(i % 7) * 1000 + (uint32_t)b;
	}
	for (size_t o = 0; o < sizeof(orders) / sizeof(*orders); o++) {
		for (size_t k = 0; k < 4; k++) {
			struct workload wl;
			struct engine_config c;
			struct engine_results rf, rs;
			struct engine *fast, *ref;

			wl_fill(&wl, rq, N);
			wl.hashes = hashes;
			wl.n_hashes = n_hashes;
			wl.hash_block_tokens = 16;
			cfg_tiny(&c, cost_a, "vllm:max_num_seqs=3", 24);
			c.order = orders[o];
			c.prefix_cache = caches[k % 2];
			c.admission = admissions[k / 2];
			fast = run_ok(&c, &wl);
			ck_assert(engine_debug_waitq(fast, 0)->kind == WAITQ_STATIC ||
				  engine_debug_waitq(fast, 0)->kind == WAITQ_TENANT);
			ref = run_sorting(&c, &wl, true);
			engine_results(fast, &rf);
			engine_results(ref, &rs);
			for (int i = 0; i < N; i++) {
				const struct req_record *a = &rf.req[i], *b = &rs.req[i];

				ck_assert_int_eq(a->state, b->state);
				ck_assert_int_eq(a->first_sched_ns, b->first_sched_ns);
				ck_assert_int_eq(a->first_token_ns, b->first_token_ns);
				ck_assert_int_eq(a->finish_ns, b->finish_ns);
				ck_assert_int_eq(a->preemptions, b->preemptions);
				ck_assert_int_eq(a->cached_tokens, b->cached_tokens);
				hits += a->cached_tokens;
				dropped += a->state == REQ_REJECTED;
			}
			ck_assert_int_eq(rf.inst[0].prefix_hit_tokens, rs.inst[0].prefix_hit_tokens);
			ck_assert_int_eq(rf.inst[0].prefix_lookup_tokens,
					 rs.inst[0].prefix_lookup_tokens);
			engine_free(fast);
			engine_free(ref);
		}
	}
	ck_assert(hits > 0 && dropped > 0);
	free(hashes);
	free(rq);
}
END_TEST

/* Requests gap_ms apart on average (uniform in 0 .. 2 gap_ms), with random
 * prompts, outputs, priorities, tenants and shared prefixes (hashes[],
 * 8 per request): decodes run long between arrivals. */
static struct wl_request *steady_requests(int n, int64_t gap_ms, uint32_t *hashes,
					  size_t *n_hashes)
{
	struct wl_request *rq = calloc((size_t)n, sizeof(*rq));
	uint64_t x = 777;
	int64_t t = 0;

	ck_assert_ptr_nonnull(rq);
	*n_hashes = 0;
	for (int i = 0; i < n; i++) {
		int32_t blocks;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		rq[i] = (struct wl_request){
			.arrival_ns = t,
			.prompt_tokens = 8 + (int32_t)(x >> 33) % 300,
			.output_tokens = 1 + (int32_t)(x >> 45) % 200,
			.priority = (int32_t)(x >> 20) % 4,
			.tenant = (int32_t)((x >> 50) % 3),
		};
		t += (int64_t)((x >> 24) % (uint64_t)(2 * gap_ms * MS + 1));
		blocks = rq[i].prompt_tokens / 16 < 8 ? rq[i].prompt_tokens / 16 : 8;
		rq[i].prefix_off = (uint32_t)*n_hashes;
		rq[i].prefix_n = (uint32_t)blocks;
		for (int32_t b = 0; b < blocks; b++)
			hashes[(*n_hashes)++] = (uint32_t)(i % 5) * 1000 + (uint32_t)b;
	}
	return rq;
}

/* Cases of the steady-decode path's test (below). */
struct steady_case {
	const char *policy, *order, *admission, *prefix, *preemption, *victim;
	int64_t blocks, gap_ms;
	uint32_t instances, n_prefill, n_decode;
	int steady;    /* 1: the path takes a quarter of the steps or more; 0: never;
			* -1: either (the budget cuts most steps short: the runs
			* must still match) */
	int dp;        /* attention ranks in lock-step (tiny_moe, tp = ep = dp); 0 = none */
	const char *spec;   /* --spec (speculative decoding); NULL = none */
};

/* tiny_model with 4 experts (2 active) in its MLP: data-parallel
 * attention needs an MoE model. */
static const struct model_spec tiny_moe = {
	.name = "tiny-moe", .n_layers = 2, .hidden = 256, .n_heads = 4, .n_kv_heads = 4,
	.head_dim = 64, .intermediate = 512, .vocab = 1000, .max_context = 4096,
	.mlp = MLP_GATED, .dtype_bytes = 2, .n_experts = 4, .experts_per_token = 2,
	.moe_intermediate = 128,
};

static const struct steady_case steady_cases[] = {
	{ "vllm", NULL, NULL, NULL, NULL, NULL, 60, 15, 1, 0, 0, true, 0, NULL },
	{ "vllm", NULL, NULL, NULL, NULL, NULL, 400, 40, 1, 0, 0, true, 0, NULL },
	{ "vllm:max_num_batched_tokens=64,max_num_seqs=5", NULL, NULL, NULL, NULL, NULL, 80, 10, 1, 0, 0, true, 0, NULL },
	{ "vllm:chunked=off,max_num_batched_tokens=300", "sjf", NULL, NULL, NULL, NULL, 60, 15, 1, 0, 0, true, 0, NULL },
	{ "vllm:v0=on", "priority:aging=2", "timeout:ms=900", NULL, NULL, NULL, 60, 15, 1, 0, 0, true, 0, NULL },
	{ "vllm", "vtc", "timeout:ms=700", NULL, "swap:host_gb=1", NULL, 50, 12, 1, 0, 0, true, 0, NULL },
	{ "vllm", "spf", NULL, "on", NULL, NULL, 60, 15, 1, 0, 0, true, 0, NULL },
	{ "vllm:max_num_seqs=4", NULL, "timeout:ms=150", "on", NULL, NULL, 40, 6, 1, 0, 0, true, 0, NULL },
	{ "vllm:max_num_seqs=6", "sjf", "timeout:ms=250", "blocks=8", NULL, NULL, 50, 6, 1, 0, 0, true, 0, NULL },
	{ "vllm", NULL, NULL, NULL, NULL, "largest", 60, 15, 1, 0, 0, false, 0, NULL },
	{ "vllm", NULL, NULL, NULL, NULL, NULL, 60, 8, 2, 0, 0, true, 0, NULL },
	{ "vllm", NULL, NULL, NULL, NULL, NULL, 80, 8, 1, 1, 2, true, 0, NULL },
	{ "sarathi:token_budget=32,max_num_seqs=16", NULL, NULL, NULL, NULL, NULL, 60, 15, 1, 0, 0, true, 0, NULL },
	{ "splitfuse:token_budget=40,max_num_seqs=16", "sjf", NULL, NULL, NULL, NULL, 60, 15, 1, 0, 0, true, 0, NULL },
	{ "orca:max_batch=6,max_len=512", NULL, NULL, NULL, NULL, NULL, 200, 15, 1, 0, 0, true, 0, NULL },
	{ "static:max_batch=6,max_len=512", NULL, NULL, NULL, NULL, NULL, 200, 15, 1, 0, 0, true, 0, NULL },
	/* attention ranks in lock-step: a rank's steady step waits for its
	 * group like any other */
	{ "vllm", NULL, NULL, NULL, NULL, NULL, 60, 8, 1, 0, 0, true, 2, NULL },
	{ "vllm:max_num_seqs=4", NULL, "timeout:ms=150", "on", NULL, NULL, 40, 6, 2, 0, 0, true, 4, NULL },
	/* speculative decoding: a decode and its drafts a step (the budget
	 * cutting verifies short where it is tight; the dynamic rule turning
	 * drafts off as the batch grows) */
	{ "vllm", NULL, NULL, NULL, NULL, NULL, 60, 15, 1, 0, 0, true, 0, "eagle3:k=3,alpha=0.7,decay=0.9" },
	{ "vllm:max_num_batched_tokens=24,max_num_seqs=5", "sjf", NULL, NULL, NULL, NULL, 80, 10, 1, 0, 0, -1, 0, "ngram:k=4,alpha=0.6" },
	{ "vllm:max_num_seqs=6", NULL, "timeout:ms=250", "on", NULL, NULL, 50, 6, 1, 0, 0, true, 0, "eagle:k=2,tree=4,alpha=0.8" },
	{ "vllm", "vtc", NULL, NULL, "swap:host_gb=1", NULL, 50, 12, 1, 0, 0, true, 0, "eagle3:k=2,alpha=0.7,max_batch=6" },
	{ "vllm", NULL, NULL, NULL, NULL, NULL, 80, 8, 1, 1, 2, true, 0, "eagle3:k=2,alpha=0.7" },
	{ "sarathi:token_budget=32,max_num_seqs=16", NULL, NULL, NULL, NULL, NULL, 60, 15, 1, 0, 0, true, 0, "eagle3:k=2,alpha=0.7" },
	{ "splitfuse:token_budget=40,max_num_seqs=16", "sjf", NULL, NULL, NULL, NULL, 60, 15, 1, 0, 0, true, 0, "ngram:k=3,alpha=0.6" },
	{ "orca:max_batch=6,max_len=512", NULL, NULL, NULL, NULL, NULL, 200, 15, 1, 0, 0, true, 0, "eagle3:k=3,alpha=0.7" },
	{ "static:max_batch=6,max_len=512", NULL, NULL, NULL, NULL, NULL, 200, 15, 1, 0, 0, true, 0, "eagle3:k=3,alpha=0.7" },
};

/* One case of steady_cases (index i) with the steady-decode path on and
 * off, under engine profile p (NULL: none), compared. */
static void steady_case_check(size_t i, const struct engine_profile *p, uint32_t *hashes)
{
	enum { N = 600 };
	const struct steady_case *cs = &steady_cases[i];
	size_t n_hashes;
	struct wl_request *rq = steady_requests(N, cs->gap_ms, hashes, &n_hashes);
	struct engine *on, *off;
	struct engine_results a, b;
	struct engine_config c;
	struct workload wl;
	struct spec_config spec;
	uint64_t steady = 0, steps = 0, waited = 0, idle = 0, verifies = 0;

	wl_fill(&wl, rq, N);
	wl.hashes = hashes;
	wl.n_hashes = n_hashes;
	wl.hash_block_tokens = 16;
	cfg_tiny(&c, "roofline", cs->policy, cs->blocks);
	if (cs->order)
		c.order = cs->order;
	if (cs->admission)
		c.admission = cs->admission;
	if (cs->prefix)
		c.prefix_cache = cs->prefix;
	if (cs->preemption)
		c.preemption = cs->preemption;
	if (cs->victim)
		c.victim = cs->victim;
	c.n_instances = cs->instances;
	if (cs->instances > 1)
		c.router = "lot";
	c.pools[ENGINE_POOL_PREFILL].n = cs->n_prefill;
	c.pools[ENGINE_POOL_DECODE].n = cs->n_decode;
	if (cs->dp) {
		c.model = &tiny_moe;
		c.tp = c.ep = c.dp_attention = cs->dp;
	}
	if (cs->spec) {
		struct ss_error err = { 0 };

		ck_assert_msg(spec_config_parse(&spec, cs->spec, NULL, c.model, &err) == 0, "%s",
			      err.msg);
		c.spec = &spec;
	}
	c.engine = p;
	on = run_ok(&c, &wl);
	c.steady_off = true;
	off = run_ok(&c, &wl);
	engine_results(on, &a);
	engine_results(off, &b);
	for (int k = 0; k < N; k++) {
		const struct req_record *x = &a.req[k], *y = &b.req[k];

		ck_assert_int_eq(x->state, y->state);
		ck_assert_int_eq(x->instance, y->instance);
		ck_assert_int_eq(x->first_sched_ns, y->first_sched_ns);
		ck_assert_int_eq(x->first_token_ns, y->first_token_ns);
		ck_assert_int_eq(x->finish_ns, y->finish_ns);
		ck_assert_int_eq(x->max_gap_ns, y->max_gap_ns);
		ck_assert_int_eq(x->kv_xfer_ns, y->kv_xfer_ns);
		ck_assert(x->energy_j == y->energy_j);
		ck_assert_int_eq(x->generated_tokens, y->generated_tokens);
		ck_assert_int_eq(x->preemptions, y->preemptions);
		ck_assert_int_eq(x->cached_tokens, y->cached_tokens);
		ck_assert_uint_eq(x->spec_verifies, y->spec_verifies);
		ck_assert_uint_eq(x->spec_accepted, y->spec_accepted);
		verifies += x->spec_verifies;
		waited += x->first_sched_ns < 0 || x->first_sched_ns > rq[k].arrival_ns;
	}
	ck_assert_uint_eq(a.n_instances, b.n_instances);
	for (uint32_t k = 0; k < a.n_instances; k++) {
		ck_assert_uint_eq(a.inst[k].steps, b.inst[k].steps);
		ck_assert_uint_eq(a.inst[k].idle_steps, b.inst[k].idle_steps);
		idle += a.inst[k].idle_steps;
		ck_assert_int_eq(a.inst[k].busy_ns, b.inst[k].busy_ns);
		ck_assert(a.inst[k].busy_energy_j == b.inst[k].busy_energy_j);
		ck_assert(a.inst[k].decode_energy_j == b.inst[k].decode_energy_j);
		ck_assert(a.inst[k].kv_block_ns == b.inst[k].kv_block_ns);
		ck_assert_int_eq(a.inst[k].peak_used_blocks, b.inst[k].peak_used_blocks);
		ck_assert_uint_eq(a.inst[k].preemptions, b.inst[k].preemptions);
		ck_assert_uint_eq(a.inst[k].swap_outs, b.inst[k].swap_outs);
		ck_assert_uint_eq(engine_debug_steady_steps(off, k), 0);
		/* and every block back in its pool */
		ck_assert_int_eq(engine_kv_free_blocks(on, k), engine_kv_free_blocks(off, k));
		steady += engine_debug_steady_steps(on, k);
		/* decisions: a burst of k steps is one */
		steps += a.inst[k].steps / engine_profile_burst(p);
	}
	ck_assert_msg(waited > N / 4, "case %zu: requests hardly waited (%llu)", i, (unsigned long long)waited);
	/* with --spec, decodes verified drafts */
	ck_assert(cs->spec ? verifies > 0 : verifies == 0);
	/* ranks joined their groups' steps with idle batches */
	ck_assert(cs->dp ? idle > 0 : idle == 0);
	if (cs->steady > 0)
		ck_assert_msg(steady > steps / 4, "case %zu: %" PRIu64 " of %" PRIu64
			      " steps steady", i, steady, steps);
	else if (cs->steady == 0)
		ck_assert_uint_eq(steady, 0);
	engine_free(on);
	engine_free(off);
	free(rq);
}

/* The steady-decode path (sim/engine-sched.c) forms most decode steps
 * without asking the batch policy, on its promise
 * (batch_policy_ops.steady_decode).  Every policy of the library, under
 * orders, admission, the prefix cache, swapping, several instances and
 * disaggregation, with KV scarce enough that requests wait behind a head
 * that does not fit, must give the same run, to the nanosecond and the
 * joule, as with the path off -- and the path must be taken. */
START_TEST(steady_decode_path_matches_the_policy)
{
	uint32_t *hashes = calloc(600 * 8, sizeof(*hashes));

	ck_assert_ptr_nonnull(hashes);
	for (size_t i = 0; i < sizeof(steady_cases) / sizeof(*steady_cases); i++)
		steady_case_check(i, NULL, hashes);
	free(hashes);
}
END_TEST

/* The same under multi-step scheduling (an engine profile's
 * scheduler_steps, docs/engines.md): the path forms a decision's step,
 * the engine runs it as a burst either way, so the runs still match --
 * with KV scarce enough that bursts are shortened and requests preempted
 * at their boundaries, swapping, the prefix cache and disaggregation. */
START_TEST(steady_decode_path_matches_the_policy_in_bursts)
{
	static const size_t pick[] = { 0, 4, 5, 7, 11, 12 };
	/* about the roofline's own host term (which a profile replaces),
	 * mostly a launch floor paid by every step of a burst (were it all
	 * scheduling, paid once per burst, the host-bound tiny model would
	 * decode ~3x faster and requests would hardly wait) */
	struct engine_profile p = { .name = "k4", .scheduler_steps = 4, .sched_us = 100,
				    .sched_us_per_seq = 40, .output_us = 100, .launch_us = 700,
				    .launch_overlap = 0.01 };
	uint32_t *hashes = calloc(600 * 8, sizeof(*hashes));

	ck_assert_ptr_nonnull(hashes);
	for (size_t i = 0; i < sizeof(pick) / sizeof(*pick); i++)
		steady_case_check(pick[i], &p, hashes);
	free(hashes);
}
END_TEST

/* The same for attention ranks in lock-step under TensorRT-LLM's
 * attention-DP balancer (engine_profile.adp_balance), which drops context
 * work from the ranks' plans after the policy made them: the path must
 * still only form the steps the policy would. */
START_TEST(steady_decode_path_matches_the_policy_with_adp_balance)
{
	struct engine_profile p = { .name = "adp", .adp_balance = true, .adp_timeout_iters = 5,
				    .adp_batching_wait_iters = 2 };
	uint32_t *hashes = calloc(600 * 8, sizeof(*hashes));

	ck_assert_ptr_nonnull(hashes);
	for (size_t i = 0; i < sizeof(steady_cases) / sizeof(*steady_cases); i++)
		if (steady_cases[i].dp)
			steady_case_check(i, &p, hashes);
	free(hashes);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, single_request_exact_times);
	tcase_add_test(tc, kv_reserve_follows_the_profile_step);
	tcase_add_test(tc, simultaneous_arrivals_share_a_step);
	tcase_add_test(tc, decode_continues_while_a_new_prompt_is_chunked);
	tcase_add_test(tc, preemption_keeps_kv_accounting_exact);
	tcase_add_test(tc, impossible_requests_are_rejected_with_reasons);
	tcase_add_test(tc, round_robin_spreads_requests);
	tcase_add_test(tc, lot_routes_to_the_least_loaded);
	tcase_add_test(tc, same_seed_same_run);
	tcase_add_test(tc, bad_configurations_are_errors);
	tcase_add_test(tc, model_too_big_for_gpu);
	tcase_add_test(tc, kv_capacity_from_memory);
	tcase_add_test(tc, memory_limit_refuses_before_allocating);
	tcase_add_test(tc, memory_follows_requests_in_flight);
	tcase_add_test(tc, live_clock_makes_the_same_decisions);
	tcase_add_test(tc, static_key_orders_match_the_sorting_path);
	tcase_add_test(tc, queue_timeout_expires_as_the_scan_does);
	tcase_add_test(tc, incremental_orders_with_the_prefix_cache_match_the_sorting_path);
	tcase_add_test(tc, a_step_duration_out_of_range_is_an_error);
	tcase_add_test(tc, stop_flag_ends_the_run_as_it_stands);
	tcase_add_test(tc, executors_see_request_views_and_name_themselves);
	tcase_add_test(tc, steady_decode_path_matches_the_policy);
	tcase_add_test(tc, steady_decode_path_matches_the_policy_with_adp_balance);
	tcase_add_test(tc, steady_decode_path_matches_the_policy_in_bursts);
	suite_add_tcase(s, tc);
	return s;
}
