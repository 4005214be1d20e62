/* The shared remote KV tier (--kv-remote, sim/kvm-remote.c,
 * docs/kv-cache.md "Remote tier"): what one instance computes, another
 * fetches, with exact bytes and time; capacity is LRU; hits by tier add up;
 * the prefix router prefers a GPU hit to a remote one.
 *
 * Workloads: the tiny model (2 KiB of KV per token, so a 16-token block is
 * 32,768 bytes) and the constant cost model (0.1 ms per prefill token, 1 ms
 * per decode step), so every time is exact.  Prefixes are 16-token hash
 * blocks (workload.hash_block_tokens = 16). */
#include <errno.h>
#include <string.h>

#include "check-main.h"
#include "engine-fixture.h"

#include "kvm.h"

#define MS 1000000LL
#define BLOCK_BYTES 32768.0     /* tiny model: 16 tokens x 2 KiB */

static const char *cost_a = "constant:prefill_ms_per_token=0.1,decode_ms_per_step=1";

/* 1 GB/s per GPU, 100 us: a 10-block fetch is 327,680 B / 1e9 B/s =
 * 327,680 ns + 100,000 ns */
static const char *remote_big = "gb=1,bw_gbps=1,latency_us=100";
#define FETCH10_NS (327680LL + 100000LL)

/* Requests of 161 prompt tokens (10 whole blocks + 1 to compute) and 2
 * output tokens; request i's prefix is group[i] (10 hash blocks each). */
struct fx {
	struct wl_request rq[8];
	uint32_t hashes[8 * 10];
	struct workload wl;
};

static void fx_make(struct fx *f, int n, const int64_t *arrival_ms, const int *group)
{
	memset(f, 0, sizeof(*f));
	for (int i = 0; i < n; i++) {
		f->rq[i] = (struct wl_request){ .arrival_ns = arrival_ms[i] * MS, .prompt_tokens = 161,
						.output_tokens = 2, .prefix_off = (uint32_t)i * 10,
						.prefix_n = 10 };
		for (int b = 0; b < 10; b++)
			f->hashes[i * 10 + b] = (uint32_t)group[i] * 1000 + (uint32_t)b + 1;
	}
	wl_fill(&f->wl, f->rq, (size_t)n);
	f->wl.hashes = f->hashes;
	f->wl.n_hashes = (size_t)n * 10;
	f->wl.hash_block_tokens = 16;
}

static void cfg_remote(struct engine_config *c, uint32_t instances, const char *remote)
{
	cfg_tiny(c, cost_a, "vllm", 1000);
	c->n_instances = instances;
	c->prefix_cache = "on";
	c->kv_remote = remote;
}

/* A computes a prefix on instance 0; B, with the same prefix, routed (rr) to
 * instance 1 after A finished, fetches its 10 blocks from the store: its
 * first token comes after the fetch and one token's prefill, where without
 * the store it recomputes all 161 tokens. */
START_TEST(a_prefix_computed_on_one_instance_is_fetched_by_another)
{
	static const int64_t at[] = { 0, 100 };
	static const int grp[] = { 1, 1 };
	struct fx f;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	fx_make(&f, 2, at, grp);
	cfg_remote(&c, 2, remote_big);
	e = run_ok(&c, &f.wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].instance, 0);
	ck_assert_int_eq(r.req[1].instance, 1);
	ck_assert_int_eq(r.req[0].cached_tokens, 0);
	ck_assert_int_eq(r.req[0].first_token_ns, 16100000);   /* 161 x 0.1 ms */
	ck_assert_int_eq(r.req[1].cached_tokens, 160);
	/* fetch, then the 1 token left (the constant model prices a
	 * 1-token item as a decode step: 1 ms) */
	ck_assert_int_eq(r.req[1].first_token_ns, 100 * MS + FETCH10_NS + 1 * MS);
	ck_assert_ptr_nonnull(r.kv_remote);
	ck_assert_uint_eq(r.kv_remote->hit_tokens, 160);
	ck_assert_uint_eq(r.kv_remote->blocks_fetched, 10);
	ck_assert_double_eq(r.kv_remote->bytes, 10 * BLOCK_BYTES);
	ck_assert_double_eq(r.kv_remote->block_bytes, BLOCK_BYTES);
	ck_assert_uint_eq(r.kv_remote->fetches, 1);
	ck_assert_int_eq(r.kv_remote->fetch_ns, FETCH10_NS);
	/* A's 10 blocks were stored; B's same blocks were already there */
	ck_assert_uint_eq(r.kv_remote->puts, 10);
	ck_assert_uint_eq(r.kv_remote->evictions, 0);
	ck_assert_int_eq(r.kv_remote->capacity_blocks, (int64_t)(1e9 / BLOCK_BYTES));
	engine_free(e);

	/* without --kv-remote: B recomputes */
	cfg_remote(&c, 2, NULL);
	e = run_ok(&c, &f.wl);
	engine_results(e, &r);
	ck_assert_ptr_null(r.kv_remote);
	ck_assert_int_eq(r.req[1].cached_tokens, 0);
	ck_assert_int_eq(r.req[1].first_token_ns, 100 * MS + 16100000);
	engine_free(e);

	/* an engine that loads layer by layer (kv_load layerwise; the tiny
	 * model has 2 layers): the 1 ms step takes max(1 ms + 100 us +
	 * 327,680 / 2 ns, 427,680 ns + 0.5 ms), 263,840 ns more, not 427,680 */
	{
		struct engine_profile prof = { .name = "lw", .kv_load = ENGINE_KV_LOAD_LAYERWISE };

		cfg_remote(&c, 2, remote_big);
		c.engine = &prof;
		e = run_ok(&c, &f.wl);
		engine_results(e, &r);
		ck_assert_int_eq(r.req[1].cached_tokens, 160);
		ck_assert_int_eq(r.req[1].first_token_ns, 100 * MS + 1 * MS + 263840);
		ck_assert_int_eq(r.kv_remote->fetch_ns, 263840);
		engine_free(e);
	}
}
END_TEST

/* After the fetch the blocks are in instance 1's GPU cache: a third request
 * with the prefix on instance 1 hits the GPU, fetches nothing, and the hits
 * by tier add up to the cached tokens, nothing counted twice. */
START_TEST(hits_by_tier_add_up_and_fetched_blocks_stay_on_the_gpu)
{
	/* rr over 2: A on 0, B on 1, C on 0, D on 1 */
	static const int64_t at[] = { 0, 100, 200, 300 };
	static const int grp[] = { 1, 1, 2, 1 };
	struct fx f;
	struct engine_config c;
	struct engine_results r;
	struct summary s;
	struct ss_error err = { 0 };
	struct engine *e;
	uint64_t hit = 0, cached = 0;

	fx_make(&f, 4, at, grp);
	cfg_remote(&c, 2, remote_big);
	e = run_ok(&c, &f.wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[3].instance, 1);
	ck_assert_int_eq(r.req[3].cached_tokens, 160);            /* from instance 1's GPU */
	ck_assert_int_eq(r.req[3].first_token_ns, 300 * MS + 1 * MS);   /* no fetch */
	ck_assert_uint_eq(r.kv_remote->blocks_fetched, 10);        /* B's only */
	ck_assert_uint_eq(r.kv_remote->puts, 20);                  /* groups 1 and 2 */
	for (uint32_t i = 0; i < r.n_instances; i++)
		hit += r.inst[i].prefix_hit_tokens;
	for (uint64_t i = 0; i < r.n_req; i++)
		cached += (uint64_t)r.req[i].cached_tokens;
	ck_assert_uint_eq(hit, cached);
	ck_assert_uint_eq(hit, 320);
	ck_assert_uint_eq(r.kv_remote->hit_tokens, 160);
	ck_assert_uint_eq(r.kv_remote->blocks_fetched * 16, r.kv_remote->hit_tokens);
	/* the summary splits them by tier */
	ck_assert_int_eq(summary_compute(&s, &r, NULL, 1, &err), 0);
	ck_assert(s.kv_remote);
	ck_assert_uint_eq(s.prefix_hit_tokens - s.remote.hit_tokens, 160);
	engine_free(e);
}
END_TEST

/* The store keeps the least recently used blocks out: with room for 10
 * blocks, group 2's 10 blocks push group 1's out and B (group 1, on a third
 * instance) recomputes; with room for 20 it fetches them. */
START_TEST(remote_capacity_is_lru)
{
	static const int64_t at[] = { 0, 100, 200 };
	static const int grp[] = { 1, 2, 1 };
	char spec[128];
	struct fx f;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	fx_make(&f, 3, at, grp);
	/* 10 blocks: 10 x 32,768 bytes (a hair more, against rounding) */
	snprintf(spec, sizeof(spec), "gb=%.10g,bw_gbps=1,latency_us=100", 10.5 * BLOCK_BYTES / 1e9);
	cfg_remote(&c, 3, spec);
	e = run_ok(&c, &f.wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.kv_remote->capacity_blocks, 10);
	ck_assert_int_eq(r.req[2].instance, 2);
	ck_assert_int_eq(r.req[2].cached_tokens, 0);
	ck_assert_uint_eq(r.kv_remote->evictions, 20);   /* group 1 by 2, then 2 by 1 */
	ck_assert_uint_eq(r.kv_remote->puts, 30);
	ck_assert_uint_eq(r.kv_remote->blocks_fetched, 0);
	engine_free(e);

	snprintf(spec, sizeof(spec), "gb=%.10g,bw_gbps=1,latency_us=100", 20.5 * BLOCK_BYTES / 1e9);
	cfg_remote(&c, 3, spec);
	e = run_ok(&c, &f.wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.kv_remote->capacity_blocks, 20);
	ck_assert_int_eq(r.req[2].cached_tokens, 160);
	ck_assert_uint_eq(r.kv_remote->evictions, 0);
	ck_assert_uint_eq(r.kv_remote->blocks_fetched, 10);
	engine_free(e);
}
END_TEST

/* The router's view (policy_host.prefix_hit): a GPU-held block counts
 * whole, a block only in the store half, nothing nothing. */
START_TEST(router_view_weighs_remote_blocks_half)
{
	static const int64_t at[] = { 0, 100, 200 };
	static const int grp[] = { 1, 1, 3 };
	struct fx f;
	struct engine_config c;
	struct engine *e;
	struct request q;

	fx_make(&f, 3, at, grp);
	f.wl.n = 1;   /* run A only, on instance 0 */
	cfg_remote(&c, 2, remote_big);
	e = run_ok(&c, &f.wl);
	memset(&q, 0, sizeof(q));
	q.v.id = 1;   /* B: A's prefix */
	q.v.prompt_tokens = 161;
	ck_assert_int_eq(kvm_prefix_hit(engine_kvm(e), 0, &q), 160);
	ck_assert_int_eq(kvm_prefix_hit(engine_kvm(e), 1, &q), 80);
	q.v.id = 2;   /* a prefix nobody has */
	ck_assert_int_eq(kvm_prefix_hit(engine_kvm(e), 0, &q), 0);
	ck_assert_int_eq(kvm_prefix_hit(engine_kvm(e), 1, &q), 0);
	engine_free(e);

	cfg_remote(&c, 2, NULL);   /* without the store: the GPU only */
	e = run_ok(&c, &f.wl);
	q.v.id = 1;
	ck_assert_int_eq(kvm_prefix_hit(engine_kvm(e), 0, &q), 160);
	ck_assert_int_eq(kvm_prefix_hit(engine_kvm(e), 1, &q), 0);
	engine_free(e);
}
END_TEST

/* --router prefix: B (A's prefix) arrives while A still decodes on
 * instance 0, so instance 1 is less loaded and sees B's prefix in the
 * store; B still goes to instance 0, whose GPU holds it (a remote hit
 * weighs less; with equal weights the tie would go to the less loaded
 * instance 1).  C, whose prefix nobody holds, goes by load. */
START_TEST(prefix_router_prefers_a_gpu_hit_to_a_remote_one)
{
	static const int64_t at[] = { 0, 20, 21 };
	static const int grp[] = { 1, 1, 4 };
	struct fx f;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	fx_make(&f, 3, at, grp);
	f.rq[0].output_tokens = 50;   /* A decodes from 16.1 ms to 65.1 ms */
	cfg_remote(&c, 2, remote_big);
	c.router = "prefix";
	e = run_ok(&c, &f.wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].instance, 0);
	ck_assert_int_eq(r.req[1].instance, 0);     /* GPU hit over remote + less load */
	ck_assert_int_eq(r.req[1].cached_tokens, 160);
	ck_assert_int_eq(r.req[2].instance, 1);     /* no hit anywhere: least loaded */
	ck_assert_uint_eq(r.kv_remote->blocks_fetched, 0);
	engine_free(e);
}
END_TEST

/* Bad specs are errors naming what was expected; the store needs the
 * prefix cache. */
START_TEST(bad_specs_are_errors)
{
	static const char *const bad[] = {
		"gb=0", "gb=-1", "bw_gbps=2", "gb=1,bw_gbps=0", "gb=1,latency_us=-1",
		"gb=1,frob=2", "gb=nan", "gb=1e-12",
	};
	static const int64_t at[] = { 0 };
	static const int grp[] = { 1 };
	struct fx f;
	struct engine_config c;
	struct ss_error err = { 0 };
	struct engine *e = NULL;

	fx_make(&f, 1, at, grp);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cfg_remote(&c, 2, bad[i]);
		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(engine_new(&e, &c, &f.wl, &err), -EINVAL);
		ck_assert_ptr_null(e);
		ck_assert_msg(strstr(err.msg, "--kv-remote"), "%s: %s", bad[i], err.msg);
	}
	cfg_remote(&c, 2, "gb=1");
	c.prefix_cache = "off";
	ck_assert_int_eq(engine_new(&e, &c, &f.wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "--prefix-cache"), "%s", err.msg);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("kv-remote");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, a_prefix_computed_on_one_instance_is_fetched_by_another);
	tcase_add_test(tc, hits_by_tier_add_up_and_fetched_blocks_stay_on_the_gpu);
	tcase_add_test(tc, remote_capacity_is_lru);
	tcase_add_test(tc, router_view_weighs_remote_blocks_half);
	tcase_add_test(tc, prefix_router_prefers_a_gpu_hit_to_a_remote_one);
	tcase_add_test(tc, bad_specs_are_errors);
	suite_add_tcase(s, tc);
	return s;
}
