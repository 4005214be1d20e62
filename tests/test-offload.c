/* KV offload to host memory (--kv-offload, sim/kvm-host.c): hits
 * from host with their PCIe time, host capacity as LRU, preempted KV
 * through host, and the tiers' accounting (docs/kv-cache.md, "Offload to
 * host memory").  The tiny model has 2 KiB of KV per token: a 16-token
 * block is 32,768 bytes; the test GPU's PCIe moves 16e9 bytes/s. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "engine-fixture.h"

#include "kvm.h"
#include "kvpool.h"

static const char *cost = "constant:prefill_ms_per_token=0.1,decode_ms_per_step=1";

#define BLOCK_BYTES 32768.0
#define SEC 1000000000LL

/* The prefix hashes: A's and B's prompts share ten 16-token blocks
 * (hashes 100..109); the flushers have none. */
static uint32_t hashes[10] = { 100, 101, 102, 103, 104, 105, 106, 107, 108, 109 };

/* A (161 tokens: ten full blocks and one token), then n_flush requests
 * without prefix hashes that each need all 40 blocks of the pool (631
 * tokens), so they evict every cached block, then B with A's prefix; one
 * at a time, a second apart. */
static size_t scenario(struct wl_request *rq, struct workload *wl, int n_flush)
{
	size_t n = 0;

	rq[n++] = (struct wl_request){ .arrival_ns = 0, .prompt_tokens = 161, .output_tokens = 1,
				       .prefix_off = 0, .prefix_n = 10 };
	for (int i = 0; i < n_flush; i++)
		rq[n++] = (struct wl_request){ .arrival_ns = (int64_t)(i + 1) * SEC,
					       .prompt_tokens = 630, .output_tokens = 1 };
	rq[n++] = (struct wl_request){ .arrival_ns = (int64_t)(n_flush + 1) * SEC,
				       .prompt_tokens = 161, .output_tokens = 1,
				       .prefix_off = 0, .prefix_n = 10 };
	wl_fill(wl, rq, n);
	wl->hashes = hashes;
	wl->n_hashes = 10;
	wl->hash_block_tokens = 16;
	return n;
}

static int64_t ttft(const struct engine_results *r, size_t i)
{
	return r->req[i].first_token_ns - r->req[i].arrival_ns;
}

/* B's prefix was flushed out of the GPU: with offload it comes back from
 * host, ten blocks of H2D (327,680 bytes: 20.48 us at 16 GB/s, plus the
 * transfer's fixed 20 us) before B's one-token step; without offload B
 * recomputes all 161 tokens. */
START_TEST(flushed_prefix_comes_back_from_host)
{
	struct wl_request rq[8];
	struct workload wl;
	struct engine_config c;
	struct engine_results rg, rh, ro;
	struct engine *eg, *eh, *eo;
	size_t n;

	/* reference: nothing flushes A's blocks, B finds them on the GPU */
	scenario(rq, &wl, 0);
	cfg_tiny(&c, cost, "vllm", 40);
	c.kv_offload = "host_gb=1";
	eg = run_ok(&c, &wl);
	engine_results(eg, &rg);
	ck_assert_int_eq(rg.req[1].cached_tokens, 160);
	ck_assert_uint_eq(rg.inst[0].load_blocks, 0);

	n = scenario(rq, &wl, 2);
	eh = run_ok(&c, &wl);
	engine_results(eh, &rh);
	ck_assert_int_eq(rh.req[n - 1].cached_tokens, 160);
	ck_assert_uint_eq(rh.inst[0].load_blocks, 10);
	ck_assert_double_eq_tol(rh.inst[0].load_bytes, 10 * BLOCK_BYTES, 1e-6);
	ck_assert_uint_eq(rh.inst[0].host_hit_tokens, 160);
	ck_assert_uint_eq(rh.inst[0].prefix_hit_tokens, 160);
	/* A's ten cached blocks were written back as the flushers evicted them */
	ck_assert_uint_ge(rh.inst[0].offload_blocks, 10);
	/* the same one-token step, later by exactly the load:
	 * 327680 B / 16e9 B/s = 20480 ns, + 20000 ns per transfer */
	ck_assert_int_eq(ttft(&rh, n - 1), ttft(&rg, 1) + 20480 + 20000);

	/* without offload B recomputes its prompt */
	c.kv_offload = NULL;
	c.prefix_cache = "on";
	eo = run_ok(&c, &wl);
	engine_results(eo, &ro);
	ck_assert_int_eq(ro.req[n - 1].cached_tokens, 0);
	ck_assert_int_gt(ttft(&ro, n - 1), ttft(&rh, n - 1) + 10 * 1000000);  /* 160 x 0.1 ms more */
	ck_assert_uint_eq(ro.inst[0].host_cap_blocks, 0);
	engine_free(eg);
	engine_free(eh);
	engine_free(eo);
}
END_TEST

/* The same load under an engine whose kv_load is layerwise (SGLang's
 * HiCache): the tiny model's two layers pipeline the copy with B's step,
 * which then grows by max(S + 20000 + 20480/2, 40480 + S/2) - S, S the
 * step's own time, instead of the whole 40,480 ns. */
START_TEST(a_layerwise_engine_hides_the_load_behind_the_step)
{
	struct engine_profile prof = { .name = "layerwise", .kv_load = ENGINE_KV_LOAD_LAYERWISE };
	struct wl_request rq[8];
	struct workload wl;
	struct engine_config c;
	struct engine_results rg, rh;
	struct engine *eg, *eh;
	int64_t step, want;
	size_t n;

	scenario(rq, &wl, 0);
	cfg_tiny(&c, cost, "vllm", 40);
	c.kv_offload = "host_gb=1";
	c.engine = &prof;
	eg = run_ok(&c, &wl);
	engine_results(eg, &rg);
	ck_assert_int_eq(rg.req[1].cached_tokens, 160);
	step = ttft(&rg, 1);   /* B arrives at an idle instance: its TTFT is its step */

	n = scenario(rq, &wl, 2);
	eh = run_ok(&c, &wl);
	engine_results(eh, &rh);
	ck_assert_uint_eq(rh.inst[0].load_blocks, 10);
	want = (step + 20000 + 10240 > 40480 + step / 2 ? step + 20000 + 10240
							  : 40480 + step / 2) - step;
	ck_assert_int_eq(ttft(&rh, n - 1), step + want);
	ck_assert_int_lt(want, 40480);
	engine_free(eg);
	engine_free(eh);
}
END_TEST

/* Host space for 5 blocks: the pool evicts A's blocks tail first (9, 8,
 * ..., 0), so LRU keeps 4..0 and drops 9..5; B loads its first five
 * blocks from host and computes the rest. */
START_TEST(host_capacity_is_lru)
{
	struct wl_request rq[8];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	size_t n;

	n = scenario(rq, &wl, 2);
	cfg_tiny(&c, cost, "vllm", 40);
	/* 5.03 blocks of 32768 B: floor -> 5 */
	c.kv_offload = "host_gb=0.000165";
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.inst[0].host_cap_blocks, 5);
	ck_assert_uint_eq(r.inst[0].offload_blocks, 10);
	ck_assert_uint_eq(r.inst[0].host_evictions, 5);
	ck_assert_uint_eq(r.inst[0].load_blocks, 5);
	ck_assert_int_eq(r.req[n - 1].cached_tokens, 80);
	ck_assert_uint_eq(r.inst[0].host_hit_tokens, 80);
	ck_assert_int_le(r.inst[0].host_peak_blocks, 5);
	engine_free(e);
}
END_TEST

/* Requests in 6 groups sharing prefixes of 2..12 blocks, arriving faster
 * than a 48-block pool serves them (preemptions, evictions, loads): every
 * block the GPU evicts is counted once (stored, already held or dropped),
 * the host holds what was stored less what it evicted, never more than
 * its capacity, and every request finishes. */
START_TEST(no_block_lost_or_double_counted)
{
	enum { N = 300 };
	struct wl_request *rq = calloc(N, sizeof(*rq));
	uint32_t *hs = calloc(N * 12, sizeof(*hs));
	const char *caps[] = { "host_gb=0.0005", "host_gb=0.0015", "host_gb=1" };
	struct workload wl;
	struct engine_config c;
	size_t nh = 0;

	ck_assert_ptr_nonnull(rq);
	ck_assert_ptr_nonnull(hs);
	for (int i = 0; i < N; i++) {
		int blocks = 2 + (i * 7) % 11;

		rq[i].arrival_ns = (int64_t)i * 3000000;
		rq[i].prompt_tokens = blocks * 16 + 1 + (i % 5) * 16;
		rq[i].output_tokens = 4 + (i * 13) % 40;
		rq[i].prefix_off = (uint32_t)nh;
		rq[i].prefix_n = (uint32_t)blocks;
		for (int b = 0; b < blocks; b++)
			hs[nh++] = (uint32_t)(i % 6) * 1000 + (uint32_t)b;
	}
	for (size_t k = 0; k < sizeof(caps) / sizeof(*caps); k++) {
		struct engine_results r;
		struct engine *e;
		const struct instance_stats *st;

		wl_fill(&wl, rq, N);
		wl.hashes = hs;
		wl.n_hashes = nh;
		wl.hash_block_tokens = 16;
		cfg_tiny(&c, cost, "vllm", 48);
		c.kv_offload = caps[k];
		e = run_ok(&c, &wl);
		engine_results(e, &r);
		st = &r.inst[0];
		ck_assert_uint_gt(st->prefix_evictions, 0);
		ck_assert_uint_eq(st->offload_blocks + st->offload_kept_blocks +
				  st->offload_dropped_blocks, st->prefix_evictions);
		ck_assert_int_eq((int64_t)st->offload_blocks - (int64_t)st->host_evictions,
				 st->host_cached_blocks);
		ck_assert_int_le(st->host_cached_blocks, st->host_cap_blocks);
		ck_assert_int_le(st->host_peak_blocks, st->host_cap_blocks);
		ck_assert_uint_le(st->host_hit_tokens, st->prefix_hit_tokens);
		ck_assert_uint_le(st->host_hit_tokens, st->load_blocks * 16);
		ck_assert_uint_eq(st->swap_ins, st->swap_outs);
		ck_assert_double_eq_tol(st->offload_bytes, st->offload_blocks * BLOCK_BYTES, 1e-3);
		for (size_t i = 0; i < N; i++)
			ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		if (k == 2)   /* room for everything: the host loses nothing */
			ck_assert_uint_eq(st->host_evictions + st->offload_dropped_blocks, 0);
		else
			ck_assert_uint_gt(st->host_evictions, 0);
		ck_assert_uint_gt(st->load_blocks, 0);
		engine_free(e);
	}
	free(rq);
	free(hs);
}
END_TEST

/* The same accounting checked at every eviction of the GPU pool, by a
 * hook around the KV manager's (kvm_inst_pool): the evicted block is then on
 * host unless counted as dropped; stored + kept + dropped = evictions so
 * far; host holds stored - evicted cached blocks and, with the swapped-out
 * KV, no more than its capacity.  At the end every block host holds is
 * one the GPU evicted (nothing else enters the tier). */
static struct checker {
	struct engine *e;
	struct kvm *kv;
	void (*hook)(void *ctx, uint64_t h);
	uint64_t evictions, failures;
	uint64_t *seen;           /* distinct hashes evicted */
	size_t n_seen;
} chk;

static void checked_evict(void *ctx, uint64_t h)
{
	const struct kvm_inst *ki = kvm_inst(chk.kv, 0);
	const struct instance_stats *st = kvm_inst_stats(ki);
	uint64_t dropped = st->offload_dropped_blocks;
	size_t i;

	chk.hook(ctx, h);
	chk.evictions++;
	if (!kvm_host_holds(chk.kv, 0, h) && st->offload_dropped_blocks != dropped + 1)
		chk.failures++;
	if (st->offload_blocks + st->offload_kept_blocks + st->offload_dropped_blocks !=
	    chk.evictions)
		chk.failures++;
	if ((int64_t)st->offload_blocks - (int64_t)st->host_evictions != st->host_cached_blocks ||
	    st->host_cached_blocks + kvm_swapped_blocks(ki) > kvm_host_capacity(ki))
		chk.failures++;
	for (i = 0; i < chk.n_seen && chk.seen[i] != h; i++)
		;
	if (i == chk.n_seen)
		chk.seen[chk.n_seen++] = h;
}

START_TEST(accounting_holds_at_every_eviction)
{
	enum { N = 200 };
	struct wl_request *rq = calloc(N, sizeof(*rq));
	uint32_t *hs = calloc(N * 12, sizeof(*hs));
	struct workload wl;
	struct engine_config c;
	struct ss_error err = { 0 };
	size_t nh = 0, on_host = 0;
	const struct instance_stats *st;
	struct kvpool *pool;

	ck_assert_ptr_nonnull(rq);
	ck_assert_ptr_nonnull(hs);
	for (int i = 0; i < N; i++) {
		int blocks = 2 + (i * 5) % 11;

		rq[i].arrival_ns = (int64_t)i * 2000000;
		rq[i].prompt_tokens = blocks * 16 + 1 + (i % 3) * 16;
		rq[i].output_tokens = 4 + (i * 11) % 50;
		rq[i].prefix_off = (uint32_t)nh;
		rq[i].prefix_n = (uint32_t)blocks;
		for (int b = 0; b < blocks; b++)
			hs[nh++] = (uint32_t)(i % 9) * 1000 + (uint32_t)b;
	}
	wl_fill(&wl, rq, N);
	wl.hashes = hs;
	wl.n_hashes = nh;
	wl.hash_block_tokens = 16;
	cfg_tiny(&c, cost, "vllm", 40);
	c.kv_offload = "host_gb=0.001";   /* 30 blocks */
	chk = (struct checker){ .seen = calloc(N * 12, sizeof(uint64_t)) };
	ck_assert_ptr_nonnull(chk.seen);
	ck_assert_int_eq(engine_new(&chk.e, &c, &wl, &err), 0);
	chk.kv = engine_kvm(chk.e);
	pool = kvm_inst_pool(kvm_inst(chk.kv, 0));
	chk.hook = pool->on_evict;
	pool->on_evict = checked_evict;
	ck_assert_int_eq(engine_run(chk.e, &err), 0);
	st = kvm_inst_stats(kvm_inst(chk.kv, 0));
	ck_assert_uint_gt(chk.evictions, 100);
	ck_assert_uint_gt(st->host_evictions, 0);
	ck_assert_uint_gt(st->swap_outs, 0);
	ck_assert_uint_eq(chk.failures, 0);
	for (size_t i = 0; i < chk.n_seen; i++)
		on_host += kvm_host_holds(chk.kv, 0, chk.seen[i]);
	ck_assert_int_eq((int64_t)on_host, st->host_cached_blocks);
	engine_free(chk.e);
	free(chk.seen);
	free(rq);
	free(hs);
}
END_TEST

/* The prefix router's view (policy_host.prefix_hit) counts blocks held in
 * host memory as hits: after A's blocks were flushed to host, A's prompt
 * is still 160 tokens cached with offload, none without. */
START_TEST(router_sees_host_hits)
{
	struct wl_request rq[8];
	struct workload wl;
	struct engine_config c;
	struct request probe;
	struct engine *e;
	size_t n = scenario(rq, &wl, 2);

	wl.n = n - 1;   /* A and the flushers */
	memset(&probe, 0, sizeof(probe));
	probe.v.id = 0;
	probe.v.prompt_tokens = 161;
	cfg_tiny(&c, cost, "vllm", 40);
	c.kv_offload = "host_gb=1";
	e = run_ok(&c, &wl);
	ck_assert_int_eq(kvm_used_blocks(kvm_inst(engine_kvm(e), 0)), 0);
	ck_assert_int_eq(kvm_prefix_hit(engine_kvm(e), 0, &probe), 160);
	engine_free(e);
	c.kv_offload = NULL;
	c.prefix_cache = "on";
	e = run_ok(&c, &wl);
	ck_assert_int_eq(kvm_prefix_hit(engine_kvm(e), 0, &probe), 0);
	engine_free(e);
}
END_TEST

/* Two requests whose decodes outgrow a 12-block pool: with offload the
 * victim's KV goes to host and comes back (no recompute); with host space
 * smaller than its KV it is recomputed. */
START_TEST(preempted_kv_comes_back_from_host)
{
	struct wl_request rq[2] = {
		{ .arrival_ns = 0, .prompt_tokens = 60, .output_tokens = 70 },
		{ .arrival_ns = 0, .prompt_tokens = 60, .output_tokens = 70 },
	};
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 2);
	cfg_tiny(&c, cost, "vllm", 12);
	c.kv_offload = "host_gb=1";
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_uint_gt(r.inst[0].preemptions, 0);
	ck_assert_uint_eq(r.inst[0].swap_outs, r.inst[0].preemptions);
	ck_assert_uint_eq(r.inst[0].swap_ins, r.inst[0].swap_outs);
	ck_assert_int_gt(r.inst[0].host_peak_blocks, 0);
	ck_assert_int_gt(r.inst[0].swap_ns, 0);
	ck_assert_int_eq(r.req[0].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[1].state, REQ_FINISHED);
	engine_free(e);
	/* 2 blocks of host space: a victim holds more, it recomputes */
	c.kv_offload = "host_gb=0.0000656";
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.inst[0].host_cap_blocks, 2);
	ck_assert_uint_gt(r.inst[0].preemptions, 0);
	ck_assert_uint_eq(r.inst[0].swap_outs, 0);
	engine_free(e);
}
END_TEST

/* Bad specs and a clash with --preemption swap are refused by name. */
START_TEST(bad_specs_are_refused)
{
	static const char *bad[] = { "host_gb=0", "host_gb=-1", "bw_gbps=10", "host_gb=1,bw_gbps=0",
				     "host_gb=1,foo=2", "on", "host_gb=abc" };
	struct wl_request rq[1] = { { .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 2 } };
	struct workload wl;
	struct engine_config c;
	struct ss_error err = { 0 };
	struct engine *e = NULL;

	wl_fill(&wl, rq, 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cfg_tiny(&c, cost, "vllm", 40);
		c.kv_offload = bad[i];
		ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
		ck_assert_ptr_null(e);
		ck_assert_msg(strstr(err.msg, "--kv-offload"), "%s: %s", bad[i], err.msg);
	}
	cfg_tiny(&c, cost, "vllm", 40);
	c.kv_offload = "host_gb=8";
	c.preemption = "swap:host_gb=4";
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "share host memory"), "%s", err.msg);
	/* the same values, or swap without its own, are fine */
	c.preemption = "swap:host_gb=8";
	e = run_ok(&c, &wl);
	engine_free(e);
	c.preemption = "swap";
	e = run_ok(&c, &wl);
	engine_free(e);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("offload");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, flushed_prefix_comes_back_from_host);
	tcase_add_test(tc, a_layerwise_engine_hides_the_load_behind_the_step);
	tcase_add_test(tc, host_capacity_is_lru);
	tcase_add_test(tc, no_block_lost_or_double_counted);
	tcase_add_test(tc, accounting_holds_at_every_eviction);
	tcase_add_test(tc, router_sees_host_hits);
	tcase_add_test(tc, preempted_kv_comes_back_from_host);
	tcase_add_test(tc, bad_specs_are_refused);
	suite_add_tcase(s, tc);
	return s;
}
