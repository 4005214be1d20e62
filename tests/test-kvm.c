/* The KV manager (sim/kvm.h) on its own, without an engine: lookups find
 * blocks per tier (GPU, host, remote store), lookups pin and unpin, growth
 * stops at -ENOSPC, registered blocks are hit, offloaded blocks come back
 * with their PCIe time, the router's peek does not move the store's LRU
 * order, and swaps are accounted and priced.
 *
 * Fixture: 16-token blocks of 1 MB each (whole instance, tp 1), a GPU whose
 * PCIe moves 1e9 bytes/s and idles at 100 W, so one block's transfer is
 * exactly 1 ms (+ 20 us per PCIe transfer, SWAP_LATENCY_NS).  Request i has
 * prompt 16 x blocks[i] + 1 tokens and prefix group group[i] (its hash
 * blocks, one per KV block). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "kvm.h"
#include "kvpool.h"

#define MS 1000000LL
#define BS 16
#define BLOCK_BYTES 1e6
#define NREQ 6

struct fx {
	struct wl_request rq[NREQ];
	uint32_t hashes[NREQ * 8];
	struct workload wl;
	struct gpu_spec gpu;
	struct instance_stats st[2];
	int64_t now;                  /* the clock the manager reads, ns */
	struct kvm *m;
	struct kvm_inst *ki[2];
	struct request r[NREQ];
};

static struct fx f;

/* A manager of n instances of blocks GPU blocks each; options as the
 * command line gives them (NULL: not given). */
static void fx_up(uint32_t n, int32_t blocks, const char *prefix_cache, const char *preemption,
		  const char *kv_offload, const char *kv_remote, const int *nblocks, const int *group)
{
	struct engine_config cfg;
	struct kvm_opts o;
	struct ss_error err = { 0 };
	size_t nh = 0;

	memset(&f, 0, sizeof(f));
	for (int i = 0; i < NREQ; i++) {
		f.rq[i] = (struct wl_request){ .prompt_tokens = BS * nblocks[i] + 1, .output_tokens = 4,
					       .prefix_off = (uint32_t)nh,
					       .prefix_n = (uint32_t)nblocks[i] };
		for (int b = 0; b < nblocks[i]; b++)
			f.hashes[nh++] = (uint32_t)group[i] * 100 + (uint32_t)b + 1;
		f.r[i].v.id = (uint32_t)i;
		f.r[i].v.prompt_tokens = f.rq[i].prompt_tokens;
		f.r[i].output_tokens = f.rq[i].output_tokens;
		f.r[i].slot = (uint32_t)i;
	}
	workload_init(&f.wl);
	f.wl.req = f.rq;
	f.wl.n = NREQ;
	f.wl.hashes = f.hashes;
	f.wl.n_hashes = nh;
	f.wl.hash_block_tokens = BS;
	f.gpu.pcie_bw = 1e9;
	f.gpu.idle_w = 100;
	f.gpu.rdma_bw = 1e9;

	memset(&cfg, 0, sizeof(cfg));
	cfg.prefix_cache = prefix_cache;
	cfg.preemption = preemption;
	cfg.kv_offload = kv_offload;
	ck_assert_int_eq(kvm_opts_parse(&o, &cfg, &err), 0);
	ck_assert_int_eq(kvm_new(&f.m,
				 &(struct kvm_config){ .wl = &f.wl, .now = &f.now, .n_inst = n,
						       .block_size = BS, .n_layers = 4,
						       .kv_remote = kv_remote,
						       .remote_block_bytes = BLOCK_BYTES },
				 &o, &err), 0);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_int_eq(kvm_inst_init(f.m, i,
					       &(struct kvm_inst_config){
						       .blocks = blocks, .block_bytes = BLOCK_BYTES,
						       .tp = 1, .pp = 1, .gpu = &f.gpu, .st = &f.st[i] },
					       &f.ki[i], &err), 0);
}

static void fx_down(void)
{
	for (int i = 0; i < NREQ; i++)
		kvm_req_release(&f.r[i].kv);
	kvm_free(f.m);
	kvm_free(NULL);
}

/* Request i, from the queue, computes its whole prompt in one step on
 * instance inst and registers its full blocks; then (done) finishes. */
static void compute_prompt(uint32_t inst, int i, bool done)
{
	struct request *r = &f.r[i];
	int32_t tokens = r->v.prompt_tokens - r->v.computed_tokens;

	ck_assert_int_eq(kvm_enter(f.ki[inst], r, tokens, true), 0);
	r->v.computed_tokens += tokens;
	kvm_register(f.ki[inst], r);
	if (done)
		kvm_finish(f.ki[inst], r);
}

/* A step of step_ns priced with the transfers it waits for: its duration. */
static int64_t priced(uint32_t inst, int64_t step_ns, double *energy_j)
{
	struct exec_result xr = { .duration_ns = step_ns };
	struct ss_error err = { 0 };

	ck_assert_int_eq(kvm_price(f.ki[inst], &xr, &err), 0);
	if (energy_j)
		*energy_j = xr.energy_j;
	return xr.duration_ns;
}

/* Growth takes free blocks until none is left, then fails with -ENOSPC
 * leaving the table as it was; the KV-time integral counts used blocks
 * over time. */
START_TEST(grow_until_enospc)
{
	static const int nb[NREQ] = { 4, 4, 4, 4, 4, 4 }, grp[NREQ] = { 1, 2, 3, 4, 5, 6 };
	struct request *r = &f.r[0];

	fx_up(1, 8, NULL, NULL, NULL, NULL, nb, grp);
	ck_assert_int_eq(kvm_total_blocks(f.ki[0]), 8);
	ck_assert_int_eq(kvm_grow(f.ki[0], r, 5), 0);
	ck_assert_int_eq(kvm_grow(f.ki[0], r, 3), 0);
	ck_assert_int_eq(r->v.kv_blocks, 8);
	ck_assert_int_eq(kvm_free_blocks(f.ki[0]), 0);
	ck_assert_int_eq(kvm_grow(f.ki[0], r, 1), -ENOSPC);
	ck_assert_int_eq(r->v.kv_blocks, 8);
	ck_assert_int_eq(kvm_grow(f.ki[0], &f.r[1], 1), -ENOSPC);
	ck_assert_int_eq(f.r[1].v.kv_blocks, 0);
	ck_assert_int_eq(f.st[0].peak_used_blocks, 8);
	f.now = 1000;
	kvm_finish(f.ki[0], r);   /* 8 blocks held for 1000 ns */
	ck_assert_double_eq(f.st[0].kv_block_ns, 8000.0);
	ck_assert_int_eq(kvm_free_blocks(f.ki[0]), 8);
	ck_assert_int_eq(kvm_used_blocks(f.ki[0]), 0);
	fx_down();
}
END_TEST

/* A registered prefix is found by the next request with it: its blocks
 * are pinned (no longer free, nor evictable) and count as computed; an
 * unpin gives them back and the request starts over; without the prefix
 * cache nothing is found. */
START_TEST(register_then_lookup_pins_and_unpins)
{
	static const int nb[NREQ] = { 4, 4, 4, 4, 4, 4 }, grp[NREQ] = { 1, 1, 2, 1, 1, 1 };

	fx_up(1, 16, "on", NULL, NULL, NULL, nb, grp);
	ck_assert(kvm_caching(f.m));
	compute_prompt(0, 0, true);
	ck_assert_int_eq(kvm_free_blocks(f.ki[0]), 16);   /* cached blocks are evictable */
	ck_assert_int_eq(kvm_prefix_hit(f.m, 0, &f.r[1]), 64);
	ck_assert_int_eq(kvm_prefix_hit(f.m, 0, &f.r[2]), 0);   /* another prefix */

	ck_assert_int_eq(kvm_lookup(f.ki[0], &f.r[1]), 0);
	ck_assert(f.r[1].flags & RF_LOOKED);
	ck_assert_int_eq(f.r[1].v.kv_blocks, 4);
	ck_assert_int_eq(f.r[1].v.computed_tokens, 64);
	ck_assert_int_eq(f.r[1].v.cached_tokens, 64);
	ck_assert_int_eq(kvm_free_blocks(f.ki[0]), 12);
	ck_assert_int_eq(kvm_lookup(f.ki[0], &f.r[1]), 0);   /* once: nothing more pinned */
	ck_assert_int_eq(kvm_free_blocks(f.ki[0]), 12);

	ck_assert(kvm_unpin(f.ki[0], &f.r[1]));
	ck_assert(!kvm_unpin(f.ki[0], &f.r[1]));   /* nothing left to give back */
	ck_assert(!(f.r[1].flags & RF_LOOKED));
	ck_assert_int_eq(f.r[1].v.kv_blocks, 0);
	ck_assert_int_eq(f.r[1].v.computed_tokens, 0);
	ck_assert_int_eq(kvm_free_blocks(f.ki[0]), 16);

	/* looked up again and admitted: the hit is counted once it runs */
	ck_assert_int_eq(kvm_lookup(f.ki[0], &f.r[1]), 0);
	ck_assert_int_eq(kvm_enter(f.ki[0], &f.r[1], 1, true), 0);
	ck_assert_int_eq(f.r[1].v.kv_blocks, 5);
	ck_assert_uint_eq(f.st[0].prefix_hit_tokens, 64);
	ck_assert_uint_eq(f.st[0].prefix_lookup_tokens, 65);
	ck_assert(!(f.r[1].flags & RF_LOOKED));
	fx_down();

	fx_up(1, 16, NULL, NULL, NULL, NULL, nb, grp);   /* caching off */
	ck_assert(!kvm_caching(f.m));
	compute_prompt(0, 0, true);
	ck_assert_int_eq(kvm_prefix_hit(f.m, 0, &f.r[1]), 0);
	fx_down();
}
END_TEST

/* With a host tier, the blocks the GPU evicts go to host (a D2H store
 * that overlaps the step); a later lookup finds them there, and entering
 * a step loads them back: one H2D transfer of 4 blocks before the kernels
 * (blocking kv_load), 4 ms + 20 us at 1e9 bytes/s, the GPU idling. */
START_TEST(offload_then_load)
{
	/* A: 4 blocks of prefix 1; C: 8 blocks without a shared prefix,
	 * which evicts A's cached blocks from an 8-block pool; B: A's prefix */
	static const int nb[NREQ] = { 4, 4, 7, 4, 4, 4 }, grp[NREQ] = { 1, 1, 2, 3, 4, 5 };
	double energy;

	fx_up(1, 8, NULL, NULL, "host_gb=0.0105", NULL, nb, grp);   /* 10 host blocks */
	ck_assert(kvm_caching(f.m));     /* --kv-offload turns caching on */
	ck_assert(kvm_swapping(f.m));    /* and swap */
	ck_assert_int_eq(kvm_host_capacity(f.ki[0]), 10);
	compute_prompt(0, 0, true);
	compute_prompt(0, 2, false);     /* 8 blocks: all of A's evicted */
	ck_assert_uint_eq(f.st[0].offload_blocks, 4);
	ck_assert_int_eq(f.st[0].host_cached_blocks, 4);
	/* the 4 ms store hides under a 10 ms step */
	ck_assert_int_eq(priced(0, 10 * MS, NULL), 10 * MS);
	kvm_finish(f.ki[0], &f.r[2]);

	ck_assert_int_eq(kvm_prefix_hit(f.m, 0, &f.r[1]), 64);   /* host blocks count whole */
	ck_assert_int_eq(kvm_lookup(f.ki[0], &f.r[1]), 0);
	ck_assert_int_eq(f.r[1].v.kv_blocks, 0);                 /* none on the GPU */
	ck_assert_int_eq(f.r[1].v.computed_tokens, 64);          /* all on host */
	ck_assert_int_eq(kvm_enter(f.ki[0], &f.r[1], 1, true), 0);
	ck_assert_int_eq(f.r[1].v.kv_blocks, 5);
	ck_assert_uint_eq(f.st[0].load_blocks, 4);
	ck_assert_uint_eq(f.st[0].host_hit_tokens, 64);
	ck_assert_int_eq(priced(0, 1 * MS, &energy), 1 * MS + 4 * MS + 20000);
	ck_assert_double_eq_tol(energy, 100.0 * 4.02e-3, 1e-12);
	ck_assert_int_eq(priced(0, 1 * MS, NULL), 1 * MS);       /* priced once */

	/* A store that outlasts its step adds the difference: B lets go;
	 * request 3 takes the free block and evicts C's 3 cached blocks left
	 * (stored: 3 ms) and then A's last (on host already: kept). */
	kvm_finish(f.ki[0], &f.r[1]);
	ck_assert_uint_eq(f.st[0].offload_kept_blocks, 0);
	ck_assert_int_eq(kvm_enter(f.ki[0], &f.r[3], 65, true), 0);
	ck_assert_uint_eq(f.st[0].offload_kept_blocks, 1);
	ck_assert_uint_eq(f.st[0].offload_blocks, 4 + 4 + 3);
	ck_assert(kvm_host_holds(f.m, 0, f.r[1].kv.hash_last));
	ck_assert_int_eq(priced(0, 1 * MS, NULL), 3 * MS);
	kvm_finish(f.ki[0], &f.r[3]);
	fx_down();
}
END_TEST

/* 10 blocks (10.5 MB: 10 MB in binary floating point may fall short of
 * 10 blocks), 1e9 bytes/s, 100 us */
#define REMOTE "gb=0.0105,bw_gbps=1,latency_us=100"

/* The remote store: blocks one instance registers are written through;
 * another instance's router peek counts them half, and its lookup finds
 * them and fetches them before its step (4 blocks at 1e9 bytes/s + 100 us).
 * A peek leaves the store's LRU order alone; a lookup touches. */
START_TEST(remote_put_lookup_and_peek)
{
	/* A: prefix 1 (4 blocks); D: prefix 2 (6 blocks); E: prefix 3 (1) */
	static const int nb[NREQ] = { 4, 4, 6, 1, 4, 4 }, grp[NREQ] = { 1, 1, 2, 3, 1, 1 };
	const struct kv_remote_stats *rs;

	fx_up(2, 32, "on", NULL, NULL, REMOTE, nb, grp);
	rs = kvm_remote_stats(f.m);
	ck_assert_ptr_nonnull(rs);
	ck_assert_int_eq(rs->capacity_blocks, 10);
	compute_prompt(0, 0, true);
	ck_assert_uint_eq(rs->puts, 4);
	ck_assert_int_eq(kvm_prefix_hit(f.m, 0, &f.r[1]), 64);   /* GPU: whole */
	ck_assert_int_eq(kvm_prefix_hit(f.m, 1, &f.r[1]), 32);   /* store only: half */

	/* fetched by instance 1 */
	ck_assert_int_eq(kvm_lookup(f.ki[1], &f.r[1]), 0);
	ck_assert_int_eq(f.r[1].v.kv_blocks, 0);
	ck_assert_int_eq(f.r[1].v.computed_tokens, 64);
	ck_assert_int_eq(kvm_enter(f.ki[1], &f.r[1], 1, true), 0);
	ck_assert_uint_eq(rs->blocks_fetched, 4);
	ck_assert_uint_eq(rs->hit_tokens, 64);
	ck_assert_uint_eq(f.st[1].remote_hit_tokens, 64);
	ck_assert_int_eq(priced(1, 1 * MS, NULL), 1 * MS + 4 * MS + 100000);
	ck_assert_uint_eq(rs->fetches, 1);
	f.r[1].v.computed_tokens += 1;
	kvm_register(f.ki[1], &f.r[1]);   /* its blocks are A's: stored already */
	ck_assert_uint_eq(rs->puts, 4);
	kvm_finish(f.ki[1], &f.r[1]);

	fx_down();

	/* D fills the store (A's 4 + D's 6 = 10, A's first block the least
	 * recently used); a peek from instance 1 (nothing on its GPU) at A's
	 * chain touches nothing, so E's block evicts A's first block and A's
	 * chain is gone from the store */
	fx_up(2, 32, "on", NULL, NULL, REMOTE, nb, grp);
	rs = kvm_remote_stats(f.m);
	compute_prompt(0, 0, true);
	compute_prompt(0, 2, true);
	ck_assert_uint_eq(rs->puts, 10);
	ck_assert_int_eq(kvm_prefix_hit(f.m, 1, &f.r[4]), 32);
	compute_prompt(0, 3, true);
	ck_assert_uint_eq(rs->evictions, 1);
	ck_assert_int_eq(kvm_prefix_hit(f.m, 1, &f.r[4]), 0);
	ck_assert_int_eq(kvm_prefix_hit(f.m, 0, &f.r[4]), 64);   /* still on 0's GPU */
	fx_down();

	/* the same, but a lookup on instance 1 touches A's chain first: E's
	 * block evicts D's first block instead, and A's chain stays */
	fx_up(2, 32, "on", NULL, NULL, REMOTE, nb, grp);
	rs = kvm_remote_stats(f.m);
	compute_prompt(0, 0, true);
	compute_prompt(0, 2, true);
	ck_assert_int_eq(kvm_lookup(f.ki[1], &f.r[4]), 0);
	ck_assert_int_eq(f.r[4].v.computed_tokens, 64);
	kvm_unpin(f.ki[1], &f.r[4]);
	ck_assert_int_eq(f.r[4].v.computed_tokens, 0);
	compute_prompt(0, 3, true);
	ck_assert_uint_eq(rs->evictions, 1);
	ck_assert_int_eq(kvm_prefix_hit(f.m, 1, &f.r[4]), 32);
	fx_down();
}
END_TEST

/* Swap preemption: a preempted request's KV goes to host when it fits
 * beside what is swapped already (its computed tokens kept), else it is
 * dropped to recompute; the PCIe time (1 ms per block + 20 us per
 * transfer) is added to the next step, once; resuming brings it back. */
START_TEST(swap_out_and_in)
{
	static const int nb[NREQ] = { 4, 4, 4, 4, 4, 4 }, grp[NREQ] = { 1, 2, 3, 4, 5, 6 };
	struct request *a = &f.r[0], *b = &f.r[1];

	fx_up(1, 16, NULL, "swap:host_gb=0.0045,pcie_gbps=1", NULL, NULL, nb, grp);
	ck_assert(kvm_swapping(f.m));
	ck_assert_int_eq(kvm_host_capacity(f.ki[0]), 4);
	ck_assert_int_eq(kvm_enter(f.ki[0], a, 40, true), 0);   /* 3 blocks */
	a->v.computed_tokens = 40;
	ck_assert_int_eq(kvm_enter(f.ki[0], b, 20, true), 0);   /* 2 blocks */
	b->v.computed_tokens = 20;
	ck_assert(!kvm_swap_pending(f.ki[0]));

	kvm_preempt(f.ki[0], a);
	ck_assert_int_eq(a->v.host_blocks, 3);
	ck_assert_int_eq(a->v.kv_blocks, 0);
	ck_assert_int_eq(a->v.computed_tokens, 40);
	ck_assert_int_eq(kvm_swapped_blocks(f.ki[0]), 3);
	kvm_preempt(f.ki[0], b);   /* 3 + 2 > 4: recomputed */
	ck_assert_int_eq(b->v.host_blocks, 0);
	ck_assert_int_eq(b->v.computed_tokens, 0);
	ck_assert_uint_eq(f.st[0].swap_outs, 1);
	ck_assert_int_eq(kvm_used_blocks(f.ki[0]), 0);
	ck_assert(kvm_swap_pending(f.ki[0]));
	ck_assert_int_eq(priced(0, 1 * MS, NULL), 1 * MS + 3 * MS + 20000);
	ck_assert_int_eq(f.st[0].swap_ns, 3 * MS + 20000);
	ck_assert(!kvm_swap_pending(f.ki[0]));

	ck_assert_int_eq(kvm_enter(f.ki[0], a, 1, false), 0);   /* resumes */
	ck_assert_int_eq(a->v.kv_blocks, 3);
	ck_assert_int_eq(a->v.host_blocks, 0);
	ck_assert_int_eq(kvm_swapped_blocks(f.ki[0]), 0);
	ck_assert_uint_eq(f.st[0].swap_ins, 1);
	ck_assert_int_eq(priced(0, 1 * MS, NULL), 1 * MS + 3 * MS + 20000);

	/* a swapped-out request dropped from the queue gives its host space back */
	kvm_preempt(f.ki[0], a);
	ck_assert_int_eq(kvm_swapped_blocks(f.ki[0]), 3);
	kvm_drop(f.ki[0], a);
	ck_assert_int_eq(kvm_swapped_blocks(f.ki[0]), 0);
	ck_assert_int_eq(a->v.host_blocks, 0);
	fx_down();
}
END_TEST

/* Disaggregation: KV on its way to a decode instance takes blocks there
 * (kvm_xfer_reserve); when it arrives the prefill instance's blocks go
 * back and the request holds the decode instance's; the KV-time integral
 * of each instance is flushed at the end. */
START_TEST(xfer_moves_the_table)
{
	static const int nb[NREQ] = { 4, 4, 4, 4, 4, 4 }, grp[NREQ] = { 1, 2, 3, 4, 5, 6 };
	struct request *r = &f.r[0];

	fx_up(2, 8, "on", NULL, NULL, NULL, nb, grp);
	compute_prompt(0, 0, false);      /* prefilled on 0: 5 blocks, 4 registered */
	ck_assert_int_eq(kvm_used_blocks(f.ki[0]), 5);
	ck_assert_int_eq(kvm_xfer_reserve(f.ki[1], r, 9), -ENOSPC);
	kvm_req_release(&(struct kvm_req){ .xfer = r->kv.xfer });   /* what a failed run frees */
	r->kv.xfer = NULL;
	ck_assert_int_eq(kvm_xfer_reserve(f.ki[1], r, 5), 0);
	ck_assert_int_eq(kvm_used_blocks(f.ki[1]), 5);
	ck_assert_int_eq(f.st[1].peak_used_blocks, 5);
	f.now = 10;
	kvm_xfer_arrive(f.ki[0], r);
	ck_assert_int_eq(kvm_used_blocks(f.ki[0]), 0);
	ck_assert_int_eq(r->v.kv_blocks, 5);
	ck_assert_int_eq(r->kv.hashed, 0);   /* not registered on 1 */
	ck_assert_ptr_null(r->kv.xfer);
	ck_assert_int_eq(kvm_prefix_hit(f.m, 0, &f.r[0]), 64);   /* cached on 0 */
	f.now = 20;
	kvm_inst_flush(f.ki[0]);
	kvm_inst_flush(f.ki[1]);
	ck_assert_double_eq(f.st[0].kv_block_ns, 50.0);    /* 5 blocks for 10 ns */
	ck_assert_double_eq(f.st[1].kv_block_ns, 100.0);   /* 5 blocks for 20 ns */
	kvm_finish(f.ki[1], r);
	ck_assert_int_eq(kvm_free_blocks(f.ki[1]), 8);
	fx_down();
}
END_TEST

/* Bad options are refused with the option's name. */
START_TEST(options_are_checked)
{
	struct engine_config cfg;
	struct kvm_opts o;
	struct ss_error err = { 0 };

	memset(&cfg, 0, sizeof(cfg));
	cfg.prefix_cache = "blocks=0";
	ck_assert_int_eq(kvm_opts_parse(&o, &cfg, &err), -EINVAL);
	ck_assert(strstr(err.msg, "--prefix-cache"));
	cfg.prefix_cache = "blocks=64";
	ck_assert_int_eq(kvm_opts_parse(&o, &cfg, &err), 0);
	ck_assert(o.prefix_cache && o.cache_cap == 64 && !o.swap && !o.offload);
	cfg.preemption = "swap:host_gb=2";
	cfg.kv_offload = "host_gb=3";
	ck_assert_int_eq(kvm_opts_parse(&o, &cfg, &err), -EINVAL);
	ck_assert(strstr(err.msg, "share host memory"));
	cfg.kv_offload = "host_gb=2,bw_gbps=8";
	ck_assert_int_eq(kvm_opts_parse(&o, &cfg, &err), 0);
	ck_assert(o.swap && o.offload && o.host_gb == 2 && o.link_gbps == 8);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("kvm");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, grow_until_enospc);
	tcase_add_test(tc, register_then_lookup_pins_and_unpins);
	tcase_add_test(tc, offload_then_load);
	tcase_add_test(tc, remote_put_lookup_and_peek);
	tcase_add_test(tc, swap_out_and_in);
	tcase_add_test(tc, xfer_moves_the_table);
	tcase_add_test(tc, options_are_checked);
	suite_add_tcase(s, tc);
	return s;
}
