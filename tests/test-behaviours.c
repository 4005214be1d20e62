/* The behaviours users rely on when they compare policies (issue 5), each on
 * a fixed seed with Llama-3.1-8B on one H100 priced by the roofline:
 *   - chunked prefill (sarathi) lowers p99 time between tokens against the
 *     vLLM-style policy without chunking, at the same load;
 *   - shortest-job-first lowers mean TTFT against FCFS on heavy-tailed
 *     output lengths;
 *   - swap preemption beats recompute when PCIe is fast and loses when it
 *     is slow;
 *   - the fairness order (vtc) equalizes per-tenant service when one tenant
 *     floods the queue;
 *   - every batch policy x queue order x victim x preemption mode x prefix
 *     cache runs to completion, leaks no KV block and replays bit-for-bit.
 * With the argument "real": prefix-affinity routing raises the prefix-cache
 * hit rate against round-robin on the Mooncake conversation trace
 * (../shared/data; exit 77 where it is absent). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "engine.h"
#include "metrics.h"

static struct catalog cat;

static void load_catalog(void)
{
	struct ss_error err = { 0 };
	const char *d = getenv("SERVESIM_DATA");

	catalog_init(&cat);
	if (catalog_load_dir(&cat, d ? d : "data", &err))
		ck_abort_msg("catalog: %s", err.msg);
}

struct scenario {
	const char *trace, *arrival, *lengths, *tenants;
	uint64_t n;
	double rate_scale;
	uint32_t instances;
	const char *policy, *order, *victim, *preemption, *prefix_cache, *router, *predictor;
	int64_t kv_blocks;
};

/* Run sc and summarize it into *s (TTFT SLO 2 s, TPOT 100 ms). */
static void run(const struct scenario *sc, struct summary *s)
{
	struct workload_spec ws = { .trace = sc->trace, .arrival = sc->arrival,
				    .lengths = sc->lengths, .num_requests = sc->n,
				    .rate_scale = sc->rate_scale > 0 ? sc->rate_scale : 1,
				    .tenants = sc->tenants, .seed = 7 };
	struct slo_config slo = { .ttft_ms = 2000, .tpot_ms = 100 };
	struct ss_error err = { 0 };
	struct engine_config c;
	struct engine_results r;
	struct workload wl;
	struct engine *e = NULL;

	workload_init(&wl);
	if (workload_build(&wl, &ws, &err))
		ck_abort_msg("workload: %s", err.msg);
	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "llama-3.1-8b");
	c.gpu = catalog_gpu(&cat, "h100-sxm");
	ck_assert_ptr_nonnull(c.model);
	ck_assert_ptr_nonnull(c.gpu);
	c.cost_model = "roofline";
	c.n_instances = sc->instances ? sc->instances : 1;
	c.kv_blocks_override = sc->kv_blocks;
	c.seed = 7;
#define SET(f) if (sc->f) c.f = sc->f
	SET(policy);
	SET(order);
	SET(victim);
	SET(preemption);
	SET(prefix_cache);
	SET(router);
	SET(predictor);
#undef SET
	if (engine_new(&e, &c, &wl, &err) || engine_run(e, &err))
		ck_abort_msg("%s: %s", sc->policy ? sc->policy : "vllm", err.msg);
	engine_results(e, &r);
	if (summary_compute(s, &r, &slo, 1, &err))
		ck_abort_msg("summary: %s", err.msg);
	for (uint32_t i = 0; i < r.n_instances; i++)
		ck_assert_int_eq(engine_kv_free_blocks(e, i), r.kv_blocks_per_instance);
	engine_free(e);
	workload_release(&wl);
}

/* run() with a prefill and a decode pool */
static void run_pd(const struct scenario *sc, uint32_t np, uint32_t nd, struct summary *s)
{
	struct workload_spec ws = { .trace = sc->trace, .num_requests = sc->n,
				    .rate_scale = sc->rate_scale, .seed = 7 };
	struct slo_config slo = { .ttft_ms = 2000, .tpot_ms = 100 };
	struct ss_error err = { 0 };
	struct engine_config c;
	struct engine_results r;
	struct workload wl;
	struct engine *e = NULL;

	workload_init(&wl);
	if (workload_build(&wl, &ws, &err))
		ck_abort_msg("workload: %s", err.msg);
	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "llama-3.1-8b");
	c.gpu = catalog_gpu(&cat, "h100-sxm");
	c.cost_model = "roofline";
	c.pools[ENGINE_POOL_PREFILL].n = np;
	c.pools[ENGINE_POOL_DECODE].n = nd;
	c.policy = sc->policy;
	if (engine_new(&e, &c, &wl, &err) || engine_run(e, &err))
		ck_abort_msg("disaggregated: %s", err.msg);
	engine_results(e, &r);
	if (summary_compute(s, &r, &slo, 1, &err))
		ck_abort_msg("summary: %s", err.msg);
	for (uint32_t i = 0; i < r.n_instances; i++)
		ck_assert_int_eq(engine_kv_free_blocks(e, i), r.inst[i].total_blocks);
	engine_free(e);
	workload_release(&wl);
}

START_TEST(chunked_prefill_lowers_p99_tbt)
{
	struct scenario sc = {
		.arrival = "poisson:rate=6",
		.lengths = "lognormal:prompt_mean=2500,prompt_cv=0.3,output_mean=200,output_cv=0.5",
		.n = 600,
	};
	struct summary whole, chunked;

	sc.policy = "vllm:chunked=off";
	run(&sc, &whole);
	sc.policy = "sarathi:token_budget=512";
	run(&sc, &chunked);
	printf("p99 TBT: vllm unchunked %.2f ms, sarathi %.2f ms\n", whole.itl_ms.p99,
	       chunked.itl_ms.p99);
	ck_assert_uint_eq(whole.completed, 600);
	ck_assert_uint_eq(chunked.completed, 600);
	ck_assert_double_lt(chunked.itl_ms.p99, 0.6 * whole.itl_ms.p99);
}
END_TEST

START_TEST(sjf_lowers_mean_ttft_on_heavy_tails)
{
	/* A running-set limit of 16 makes requests queue for slots; output
	 * lengths with cv 2 make the jobs heavy-tailed. */
	struct scenario sc = {
		.arrival = "poisson:rate=14",
		.lengths = "lognormal:prompt_mean=300,prompt_cv=0.5,output_mean=300,output_cv=2",
		.n = 1500, .policy = "vllm:max_num_seqs=16",
	};
	struct summary fcfs, sjf, noisy;

	sc.order = "fcfs";
	run(&sc, &fcfs);
	sc.order = "sjf";
	run(&sc, &sjf);
	sc.predictor = "noisy:sigma=1";
	run(&sc, &noisy);
	printf("mean TTFT: fcfs %.1f ms, sjf (oracle) %.1f ms, sjf (noisy, sigma 1) %.1f ms\n",
	       fcfs.ttft_ms.mean, sjf.ttft_ms.mean, noisy.ttft_ms.mean);
	ck_assert_double_lt(sjf.ttft_ms.mean, 0.5 * fcfs.ttft_ms.mean);
	/* a poor predictor still helps, but less than the oracle */
	ck_assert_double_lt(noisy.ttft_ms.mean, fcfs.ttft_ms.mean);
	ck_assert_double_gt(noisy.ttft_ms.mean, sjf.ttft_ms.mean);
}
END_TEST

START_TEST(swap_wins_with_fast_pcie_and_loses_with_slow)
{
	/* 1500 blocks of 16 tokens for requests that grow to ~2k tokens:
	 * the pool runs out and running requests are preempted. */
	struct scenario sc = {
		.arrival = "poisson:rate=8",
		.lengths = "lognormal:prompt_mean=1500,prompt_cv=0.3,output_mean=600,output_cv=0.3",
		.n = 300, .kv_blocks = 1500,
	};
	struct summary rec, fast, slow;

	sc.preemption = "recompute";
	run(&sc, &rec);
	sc.preemption = "swap:pcie_gbps=200";
	run(&sc, &fast);
	sc.preemption = "swap:pcie_gbps=0.05";
	run(&sc, &slow);
	printf("mean E2E: recompute %.0f ms (%llu preemptions), swap at 200 GB/s %.0f ms (%llu swaps), at 0.05 GB/s %.0f ms\n",
	       rec.e2e_ms.mean, (unsigned long long)rec.preemptions, fast.e2e_ms.mean,
	       (unsigned long long)fast.swap_outs, slow.e2e_ms.mean);
	ck_assert_uint_gt(rec.preemptions, 10);
	ck_assert_uint_gt(fast.swap_outs, 10);
	ck_assert_uint_eq(fast.swap_outs, fast.swap_ins);
	ck_assert_double_lt(fast.e2e_ms.mean, rec.e2e_ms.mean);
	ck_assert_double_gt(slow.e2e_ms.mean, rec.e2e_ms.mean);
}
END_TEST

START_TEST(vtc_equalizes_service_when_one_tenant_floods)
{
	/* Tenant 0 sends 4 requests for each of tenant 1's, at about 2.5x
	 * what the instance serves: tenant 1 alone asks for half of it. */
	struct scenario sc = {
		.arrival = "poisson:rate=40",
		.lengths = "lognormal:prompt_mean=1000,prompt_cv=0.3,output_mean=250,output_cv=0.3",
		.n = 3000, .tenants = "4,1", .policy = "vllm:max_num_seqs=32",
	};
	struct summary fcfs, vtc;

	sc.order = "fcfs";
	run(&sc, &fcfs);
	sc.order = "vtc";
	run(&sc, &vtc);
	ck_assert_uint_eq(fcfs.n_tenants, 2);
	printf("service tok/s (tenant 0, 1): fcfs %.0f %.0f (Jain %.3f), vtc %.0f %.0f (Jain %.3f)\n",
	       fcfs.tenants[0].service_tokens_per_s, fcfs.tenants[1].service_tokens_per_s,
	       fcfs.fairness_jain, vtc.tenants[0].service_tokens_per_s,
	       vtc.tenants[1].service_tokens_per_s, vtc.fairness_jain);
	ck_assert_double_lt(fcfs.fairness_jain, 0.85);
	ck_assert_double_gt(vtc.fairness_jain, 0.95);
	/* and the light tenant waits far less */
	ck_assert_double_lt(vtc.tenants[1].ttft_ms.p50, 0.5 * fcfs.tenants[1].ttft_ms.p50);
}
END_TEST

START_TEST(a_disaggregated_decode_pool_does_not_thrash)
{
	/* Received KV waits holding its blocks; before transfers left room
	 * for running requests to grow, this scenario preempted and
	 * re-admitted one request forever (simulated time ran into days). */
	char trace[1024];
	struct scenario sc = { .n = 1000, .rate_scale = 16,
			       .policy = "vllm:max_num_batched_tokens=2048" };
	struct summary s;
	const char *d = getenv("SERVESIM_DATA");

	snprintf(trace, sizeof(trace), "%s/traces/azure_conv_2000.csv", d ? d : "data");
	sc.trace = trace;
	run_pd(&sc, 1, 1, &s);
	ck_assert_uint_eq(s.completed, 1000);
	ck_assert_double_lt(s.duration_s, 3600);
}
END_TEST

/* Under overload a decode instance preempted a request by recompute; it
 * went back to the head of the queue, where each step grew it by a chunk
 * of its 20k-token context and preempted it again, while the requests
 * waiting behind it with their received KV held the blocks it needed: a
 * livelock (simulated time and steps grew forever, with every plan
 * non-empty).  The KV holders are now offered to the batch policy first
 * when the head's recompute cannot fit beside them.  The run is bounded by
 * this test case's timeout and its step count; under a dynamic order and
 * a static-key one (priority keeps the heap-backed queue). */
START_TEST(a_decode_recompute_does_not_block_received_kv)
{
	static const char *const orders[] = { "fcfs", "priority" };

	for (int k = 0; k < 2; k++) {
		struct workload_spec ws = {
			.arrival = "gamma:rate=120,cv=3",
			.lengths = "lognormal:prompt_mean=1500,prompt_cv=1.5,output_mean=300,output_cv=1",
			.num_requests = 200, .rate_scale = 1, .seed = 5 };
		struct ss_error err = { 0 };
		struct engine_config c;
		struct engine_results r;
		struct workload wl;
		struct engine *e = NULL;
		uint64_t steps = 0, done = 0;

		workload_init(&wl);
		if (workload_build(&wl, &ws, &err))
			ck_abort_msg("workload: %s", err.msg);
		engine_config_defaults(&c);
		c.model = catalog_model(&cat, "llama-3.1-8b");
		c.gpu = catalog_gpu(&cat, "h100-sxm");
		c.cost_model = "roofline";
		c.pools[ENGINE_POOL_PREFILL].n = 2;
		c.pools[ENGINE_POOL_DECODE].n = 1;
		c.pairing = "lot";
		c.order = orders[k];
		c.kv_blocks_override = 800;
		c.seed = 5;
		if (engine_new(&e, &c, &wl, &err) || engine_run(e, &err))
			ck_abort_msg("%s: %s", orders[k], err.msg);
		engine_results(e, &r);
		for (uint64_t i = 0; i < r.n_req; i++)
			done += r.req[i].state == REQ_FINISHED;
		for (uint32_t i = 0; i < r.n_instances; i++) {
			steps += r.inst[i].steps;
			ck_assert_int_eq(engine_kv_free_blocks(e, i), r.inst[i].total_blocks);
		}
		ck_assert_uint_eq(done, 200);
		/* about 9,800 steps in all; the livelock passed 10^6 */
		ck_assert_uint_lt(steps, 20000);
		engine_free(e);
		workload_release(&wl);
	}
}
END_TEST

/* A workload whose requests share prefixes: 8 groups, each request's
 * first 128..512 tokens from its group (hashes of 32-token blocks). */
static void prefix_workload(struct workload *wl, size_t n)
{
	uint64_t x = 12345;

	workload_init(wl);
	wl->req = calloc(n, sizeof(*wl->req));
	wl->hashes = calloc(n * 16, sizeof(*wl->hashes));
	ck_assert_ptr_nonnull(wl->req);
	ck_assert_ptr_nonnull(wl->hashes);
	wl->n = wl->cap = n;
	wl->hash_block_tokens = 32;
	wl->has_arrivals = true;
	for (size_t i = 0; i < n; i++) {
		struct wl_request *r = &wl->req[i];
		uint32_t group, blocks;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		group = (uint32_t)(x >> 40) % 8;
		blocks = 4 + (uint32_t)(x >> 20) % 13;
		r->arrival_ns = (int64_t)i * 20000000;
		r->prompt_tokens = (int32_t)(blocks * 32 + (x >> 50) % 200 + 1);
		r->output_tokens = 1 + (int32_t)((x >> 10) % 120);
		r->tenant = (int32_t)(i % 3);
		r->priority = (int32_t)((x >> 30) % 3);
		r->prefix_off = (uint32_t)wl->n_hashes;
		r->prefix_n = blocks;
		for (uint32_t b = 0; b < blocks; b++)
			wl->hashes[wl->n_hashes++] = group * 1000 + b;
	}
}

START_TEST(every_combination_completes_without_leaks)
{
	static const char *policies[] = { "vllm", "vllm:chunked=off", "vllm:v0=on", "static:max_len=2048",
					  "orca:max_len=2048", "sarathi", "splitfuse" };
	static const char *orders[] = { "fcfs", "spf", "sjf", "priority:aging=1", "vtc" };
	static const char *victims[] = { "newest", "priority", "largest" };
	static const char *preempt[] = { "recompute", "swap:host_gb=0.05" };
	static const char *caches[] = { "off", "on", "blocks=8" };
	struct workload wl;

	prefix_workload(&wl, 120);
	for (size_t p = 0; p < sizeof(policies) / sizeof(*policies); p++)
	for (size_t o = 0; o < sizeof(orders) / sizeof(*orders); o++)
	for (size_t v = 0; v < sizeof(victims) / sizeof(*victims); v++)
	for (size_t m = 0; m < sizeof(preempt) / sizeof(*preempt); m++)
	for (size_t k = 0; k < sizeof(caches) / sizeof(*caches); k++) {
		int64_t first_end = -1;

		for (int rep = 0; rep < 2; rep++) {
			struct ss_error err = { 0 };
			struct engine_config c;
			struct engine_results r;
			struct engine *e = NULL;
			uint64_t hits = 0;

			engine_config_defaults(&c);
			c.model = catalog_model(&cat, "llama-3.2-1b");
			c.gpu = catalog_gpu(&cat, "h100-sxm");
			c.cost_model = "roofline";
			c.kv_blocks_override = 300;   /* 9600 tokens: preemptions happen */
			c.block_size = 32;
			c.n_instances = 2;
			c.router = "prefix";
			c.policy = policies[p];
			c.order = orders[o];
			c.victim = victims[v];
			c.preemption = preempt[m];
			c.prefix_cache = caches[k];
			if (engine_new(&e, &c, &wl, &err) || engine_run(e, &err))
				ck_abort_msg("%s %s %s %s %s: %s", policies[p], orders[o], victims[v],
					     preempt[m], caches[k], err.msg);
			engine_results(e, &r);
			for (uint64_t i = 0; i < r.n_req; i++)
				ck_assert(r.req[i].state == REQ_FINISHED ||
					  r.req[i].state == REQ_REJECTED);
			for (uint32_t i = 0; i < r.n_instances; i++) {
				ck_assert_int_eq(engine_kv_free_blocks(e, i), 300);
				hits += r.inst[i].prefix_hit_tokens;
			}
			if (k == 0)
				ck_assert_uint_eq(hits, 0);
			if (rep == 0)
				first_end = r.end_ns;
			else
				ck_assert_int_eq(r.end_ns, first_end);
			engine_free(e);
		}
	}
	free(wl.req);
	free(wl.hashes);
}
END_TEST

START_TEST(prefix_cache_hits_shared_prefixes)
{
	struct ss_error err = { 0 };
	struct engine_config c;
	struct engine_results r;
	struct engine *e = NULL;
	struct workload wl;
	uint64_t looked = 0, hit = 0;

	prefix_workload(&wl, 200);
	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "llama-3.2-1b");
	c.gpu = catalog_gpu(&cat, "h100-sxm");
	c.cost_model = "roofline";
	c.prefix_cache = "on";
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_int_eq(engine_run(e, &err), 0);
	engine_results(e, &r);
	looked = r.inst[0].prefix_lookup_tokens;
	hit = r.inst[0].prefix_hit_tokens;
	/* Every group's prefix is computed once; afterwards requests find the
	 * whole 16-token blocks of the group prefix they share. */
	ck_assert_uint_gt(hit, looked / 3);
	for (uint64_t i = 0; i < r.n_req; i++) {
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		ck_assert_int_lt(r.req[i].cached_tokens, r.req[i].prompt_tokens);
		ck_assert_int_eq(r.req[i].cached_tokens % 16, 0);
	}
	ck_assert_int_eq(engine_kv_free_blocks(e, 0), r.kv_blocks_per_instance);
	engine_free(e);
	free(wl.req);
	free(wl.hashes);
}
END_TEST

/* A preempted request frees only the KV blocks no other request holds.
 * Request 0 leaves an 8-block prefix in the cache; 10 requests arriving
 * together share it (8 shared blocks + 1 of their own each: 18 of 20
 * blocks) and decode in lockstep, all needing a block on the same step.
 * vllm preempts the newest counting its 9 blocks as freed, but only 1
 * is: the engine must plan again rather than fail the step ("planned
 * more KV blocks than free"), under any order. */
START_TEST(preempting_a_request_sharing_cached_blocks_frees_only_its_own)
{
	static const char *orders[] = { "fcfs", "vtc" };
	struct wl_request req[11] = { { 0 } };
	uint32_t hashes[11 * 8];
	struct workload wl;

	workload_init(&wl);
	wl.req = req;
	wl.n = 11;
	wl.hashes = hashes;
	wl.hash_block_tokens = 16;
	wl.has_arrivals = true;
	for (uint32_t i = 0; i < 11; i++) {
		req[i].arrival_ns = i == 0 ? 0 : 1000000000;
		req[i].prompt_tokens = 144;
		req[i].output_tokens = i == 0 ? 1 : 40;
		req[i].tenant = (int32_t)(i % 2);
		req[i].prefix_off = (uint32_t)wl.n_hashes;
		req[i].prefix_n = 8;
		for (uint32_t b = 0; b < 8; b++)
			hashes[wl.n_hashes++] = 77000 + b;
	}
	for (size_t o = 0; o < sizeof(orders) / sizeof(*orders); o++) {
		struct ss_error err = { 0 };
		struct engine_config c;
		struct engine_results r;
		struct engine *e = NULL;

		engine_config_defaults(&c);
		c.model = catalog_model(&cat, "llama-3.2-1b");
		c.gpu = catalog_gpu(&cat, "h100-sxm");
		c.cost_model = "roofline";
		c.kv_blocks_override = 20;
		c.block_size = 16;
		c.policy = "vllm";
		c.order = orders[o];
		c.prefix_cache = "on";
		if (engine_new(&e, &c, &wl, &err) || engine_run(e, &err))
			ck_abort_msg("%s: %s", orders[o], err.msg);
		engine_results(e, &r);
		for (uint64_t i = 0; i < r.n_req; i++)
			ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		ck_assert_uint_gt(r.inst[0].preemptions, 0);
		ck_assert_uint_gt(r.inst[0].prefix_hit_tokens, 0);
		ck_assert_int_eq(engine_kv_free_blocks(e, 0), 20);
		engine_free(e);
	}
}
END_TEST

START_TEST(bad_policy_options_are_errors)
{
	static const struct { const char *field, *value, *msg; } cases[] = {
		{ "order", "nope", "--order: unknown queue order 'nope'" },
		{ "victim", "oldest", "--victim: unknown victim order 'oldest'" },
		{ "admission", "queue:max=-1", "--admission" },
		{ "preemption", "swap:pcie_gbps=0", "--preemption swap" },
		{ "preemption", "migrate", "--preemption: expected recompute or swap" },
		{ "prefix_cache", "blocks=0", "--prefix-cache: expected off, on or blocks=N" },
		{ "predictor", "psychic", "--predictor: expected none, oracle or noisy" },
	};
	struct wl_request rq = { .prompt_tokens = 10, .output_tokens = 2 };
	struct workload wl;

	workload_init(&wl);
	wl.req = &rq;
	wl.n = 1;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct ss_error err = { 0 };
		struct engine_config c;
		struct engine *e = NULL;

		engine_config_defaults(&c);
		c.model = catalog_model(&cat, "llama-3.2-1b");
		c.gpu = catalog_gpu(&cat, "h100-sxm");
		c.cost_model = "roofline";
		if (!strcmp(cases[i].field, "order"))
			c.order = cases[i].value;
		else if (!strcmp(cases[i].field, "victim"))
			c.victim = cases[i].value;
		else if (!strcmp(cases[i].field, "admission"))
			c.admission = cases[i].value;
		else if (!strcmp(cases[i].field, "preemption"))
			c.preemption = cases[i].value;
		else if (!strcmp(cases[i].field, "prefix_cache"))
			c.prefix_cache = cases[i].value;
		else
			c.predictor = cases[i].value;
		ck_assert_int_ne(engine_new(&e, &c, &wl, &err), 0);
		ck_assert_ptr_null(e);
		ck_assert_msg(strstr(err.msg, cases[i].msg), "%s=%s: '%s'", cases[i].field,
			      cases[i].value, err.msg);
	}
}
END_TEST

/* ---- on real data ----------------------------------------------------------- */

START_TEST(prefix_affinity_raises_hit_rate_on_mooncake)
{
	char path[1024];
	/* 100,000 blocks (1.6M tokens) per instance: the cache of a
	 * conversation's earlier turns outlives the minutes between turns
	 * only when large; an H100's own ~26,000 blocks keep ~6% of tokens. */
	struct scenario sc = { .n = 4000, .instances = 4, .prefix_cache = "on",
			       .rate_scale = 1.0, .kv_blocks = 100000 };
	struct summary rr, prefix;

	snprintf(path, sizeof(path), "%s/traces/mooncake_fast25/conversation_trace.jsonl",
		 getenv("SERVESIM_SHARED_DATA"));
	sc.trace = path;
	sc.router = "rr";
	run(&sc, &rr);
	sc.router = "prefix";
	run(&sc, &prefix);
	printf("Mooncake conversation, 4 instances: prefix-cache hit rate rr %.1f%%, prefix %.1f%%\n",
	       100 * rr.prefix_hit_rate, 100 * prefix.prefix_hit_rate);
	ck_assert_double_gt(prefix.prefix_hit_rate, rr.prefix_hit_rate + 0.05);
}
END_TEST

int main(int argc, char **argv)
{
	bool real = argc > 1 && !strcmp(argv[1], "real");
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;

	if (real) {
		const char *d = getenv("SERVESIM_SHARED_DATA");
		char probe[1024];

		snprintf(probe, sizeof(probe), "%s/traces/mooncake_fast25/conversation_trace.jsonl",
			 d ? d : "");
		if (!d || access(probe, R_OK) != 0) {
			printf("SKIP: %s not readable\n", probe);
			return 77;
		}
	}
	load_catalog();
	s = suite_create("behaviours");
	tc = tcase_create("behaviours");
	tcase_set_timeout(tc, 600);
	if (real) {
		tcase_add_test(tc, prefix_affinity_raises_hit_rate_on_mooncake);
	} else {
		tcase_add_test(tc, chunked_prefill_lowers_p99_tbt);
		tcase_add_test(tc, sjf_lowers_mean_ttft_on_heavy_tails);
		tcase_add_test(tc, swap_wins_with_fast_pcie_and_loses_with_slow);
		tcase_add_test(tc, vtc_equalizes_service_when_one_tenant_floods);
		tcase_add_test(tc, every_combination_completes_without_leaks);
		tcase_add_test(tc, prefix_cache_hits_shared_prefixes);
		tcase_add_test(tc, preempting_a_request_sharing_cached_blocks_frees_only_its_own);
		tcase_add_test(tc, bad_policy_options_are_errors);
		tcase_add_test(tc, a_disaggregated_decode_pool_does_not_thrash);
	}
	suite_add_tcase(s, tc);
	if (!real) {
		/* a livelock fails here in a minute, not after the 600 s above */
		tc = tcase_create("livelock");
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, a_decode_recompute_does_not_block_received_kv);
		suite_add_tcase(s, tc);
	}
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	catalog_release(&cat);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
