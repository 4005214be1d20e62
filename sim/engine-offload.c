/* servesim — KV offload to host memory (--kv-offload; docs/kv-cache.md,
 * "Offload to host memory").
 *
 * Owns: each instance's host tier of cached KV blocks (a struct kvtier of
 * block hashes, LRU), what goes into it and what comes back, and their
 * PCIe transfers.  As vLLM's CPU offload (OffloadingConnector) and LMCache
 * keep KV that GPU memory lets go of:
 *   - write-back on eviction: a cached block the GPU pool evicts (kvpool's
 *     on_evict hook) is copied to host (D2H), unless host already holds
 *     it (then it is only marked recently used);
 *   - the prefix lookup continues the chain of a waiting request's blocks
 *     past the GPU's hits into host memory: the blocks held there count
 *     as computed, and when the request enters a step each gets a GPU
 *     block and is copied back (H2D; eng_offload_load), as vLLM's
 *     scheduler loads an external hit only for a request it schedules;
 *     host keeps its copy (the tiers are inclusive: a block may be in
 *     both, so evicting it from the GPU again copies nothing);
 *   - preempted requests' KV is swapped out to host (the swap path of
 *     engine-sched.c) within the same capacity: cached blocks are dropped
 *     from the host tier, least recently used first, to make room for it.
 * Every transfer is bytes over the instance's PCIe (pool.pcie_bw).  A
 * request's loads are one transfer for the step it enters (the step needs
 * them), which the engine profile's kv_load either puts before the step's
 * kernels (blocking, as a swap-in) or pipelines with them layer by layer
 * (layerwise; eng_kv_load_ns).  Stores overlap the step that evicts (a
 * copy engine, the link's other direction, as the connectors'
 * asynchronous stores): only the time by which they outlast it is added
 * (eng_offload_price).
 *
 * Invariant (tests/test-offload.c): per instance, tier blocks + swapped
 * blocks <= host_blocks_cap; every block the GPU evicts is counted once as
 * stored, kept (already on host) or dropped (no room), and the tier holds
 * stored - host_evictions blocks.
 * Cost: O(1) expected per evicted, looked-up or loaded block; nothing at
 * all when --kv-offload is off (engine.off is NULL, the pools' on_evict
 * hooks NULL).
 */
#include "engine-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier.h"
#include "params.h"
#include "sstime.h"

struct off_inst {
	struct engine *e;
	struct instance *in;
	struct kvtier tier;       /* cached blocks held in host memory */
	double store_bytes;       /* D2H stores since the last priced step, bytes */
	double load_bytes;        /* H2D loads for the next step, bytes */
	uint32_t n_loads;         /* and their transfers (one per request) */
};

struct eng_offload {
	struct off_inst *inst;    /* engine.n_inst */
	/* Per in-flight request slot (request.slot): the blocks its lookup
	 * found past its GPU blocks (on host, or on the GPU past a block the
	 * GPU lost), counted as computed but taken only when it enters a
	 * step (eng_offload_load); whose they are (request id); the chain
	 * hash of the block before them. */
	int32_t *pend_n;
	uint32_t *pend_owner;
	uint64_t *pend_prev;
	uint32_t cap_pend, cap_owner, cap_prev;
	int err;                  /* sticky -ENOMEM from a tier or array that could not grow */
};

static bool offload_on(const struct engine *e)
{
	return e->cfg.kv_offload && strcmp(e->cfg.kv_offload, "off") != 0;
}

/* --kv-offload host_gb=G[,bw_gbps=B] | off */
int eng_offload_parse(struct engine *e, struct ss_error *err)
{
	struct ss_params p, q;
	double host_gb, bw;
	bool swap_own = false;
	int rc;

	if (!offload_on(e))
		return 0;
	rc = ss_params_parse(&p, "--kv-offload", e->cfg.kv_offload, false, err);
	if (rc)
		return rc;
	if (p.name[0] || !ss_params_has(&p, "host_gb"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--kv-offload: expected off or host_gb=G[,bw_gbps=B], got '%s'",
				    e->cfg.kv_offload);
	rc = ss_params_double(&p, "host_gb", 0, &host_gb, err);
	if (!rc)
		rc = ss_params_double(&p, "bw_gbps", 1, &bw, err);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	if (rc)
		return rc;
	if (!(host_gb > 0 && host_gb < 1e6) || !(bw > 0 && bw < 1e6))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--kv-offload: expected 0 < host_gb < 1e6 and 0 < bw_gbps < 1e6,"
				    " got %g and %g",
				    host_gb, bw);
	/* --preemption swap shares the host space: parameters of its own
	 * must say the same */
	if (e->swap) {
		double v;

		rc = ss_params_parse(&q, "--preemption", e->cfg.preemption, true, err);
		if (!rc && ss_params_has(&q, "host_gb")) {
			rc = ss_params_double(&q, "host_gb", 0, &v, err);
			swap_own |= v != host_gb;
		}
		if (!rc && ss_params_has(&q, "pcie_gbps")) {
			rc = ss_params_double(&q, "pcie_gbps", 0, &v, err);
			swap_own |= !ss_params_has(&p, "bw_gbps") || v != bw;
		}
		if (rc)
			return rc;
	}
	if (swap_own)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--kv-offload and --preemption swap share host memory: give host_gb"
				    " and bw_gbps once (--kv-offload), or the same values in both");
	e->swap = true;           /* preempted KV goes to host too */
	e->pc_on = true;          /* offload keeps cached blocks: caching is on */
	for (uint32_t k = 0; k < e->n_pools; k++) {
		struct pool *pl = &e->pools[k];
		double per_gpu = ss_params_has(&p, "bw_gbps") ? bw * 1e9 : pl->gpu->pcie_bw;

		/* host_gb per GPU, as --preemption swap's: an instance of tp
		 * GPUs (per stage of a pipeline: the stages' hosts hold their
		 * layers' share) has tp x host_gb */
		pl->host_blocks_cap = (int64_t)(host_gb * 1e9 * pl->tp / pl->kv_bytes_per_block);
		pl->pcie_bw = per_gpu * pl->tp;
	}
	return 0;
}

/* A GPU pool evicts cached block h (kvpool.on_evict). */
static void on_evict(void *ctx, uint64_t h);

int eng_offload_init(struct engine *e, struct ss_error *err)
{
	if (!offload_on(e))
		return 0;
	e->off = calloc(1, sizeof(*e->off));
	if (e->off)
		e->off->inst = calloc(e->n_inst, sizeof(*e->off->inst));
	if (!e->off || !e->off->inst)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct off_inst *o = &e->off->inst[i];
		struct instance *in = &e->inst[i];

		o->e = e;
		o->in = in;
		if (kvtier_init(&o->tier, in->pl->host_blocks_cap))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		in->pool.on_evict = on_evict;
		in->pool.evict_ctx = o;
		in->st->host_cap_blocks = in->pl->host_blocks_cap;
	}
	return 0;
}

void eng_offload_free(struct engine *e)
{
	if (!e->off)
		return;
	for (uint32_t i = 0; e->off->inst && i < e->n_inst; i++)
		kvtier_release(&e->off->inst[i].tier);
	free(e->off->inst);
	free(e->off->pend_n);
	free(e->off->pend_owner);
	free(e->off->pend_prev);
	free(e->off);
	e->off = NULL;
}

static void note_host_use(struct off_inst *o)
{
	struct instance_stats *st = o->in->st;
	int64_t used = o->tier.n + o->e->host_used[o->in->idx];

	st->host_cached_blocks = o->tier.n;
	if (used > st->host_peak_blocks)
		st->host_peak_blocks = used;
}

/* Drop cached blocks from the host tier, least recently used first, until
 * need more blocks fit beside it and the swapped KV; whether they do. */
static bool make_room(struct off_inst *o, int64_t need)
{
	int64_t cap = o->in->pl->host_blocks_cap;
	int64_t swapped = o->e->host_used[o->in->idx];

	if (swapped + need > cap)
		return false;
	while (o->tier.n + swapped + need > cap) {
		kvtier_remove(&o->tier, o->tier.hash[o->tier.head]);
		o->in->st->host_evictions++;
	}
	return true;
}

static void on_evict(void *ctx, uint64_t h)
{
	struct off_inst *o = ctx;
	struct instance *in = o->in;
	int rc;

	if (kvtier_touch(&o->tier, h)) {
		in->st->offload_kept_blocks++;
		return;
	}
	if (!make_room(o, 1)) {
		in->st->offload_dropped_blocks++;
		return;
	}
	rc = kvtier_put(&o->tier, h);
	if (rc < 0) {
		o->e->off->err = rc;
		in->st->offload_dropped_blocks++;
		return;
	}
	in->st->offload_blocks++;
	in->st->offload_bytes += in->pl->kv_bytes_per_block;
	o->store_bytes += in->pl->kv_bytes_per_block;
	note_host_use(o);
}

void eng_offload_room(struct engine *e, struct instance *in, int64_t blocks)
{
	struct off_inst *o = &e->off->inst[in->idx];

	make_room(o, blocks);
	o->in->st->host_cached_blocks = o->tier.n;
}

void eng_offload_swapped(struct engine *e, struct instance *in)
{
	note_host_use(&e->off->inst[in->idx]);
}

/* The pending blocks of slot's request, if they are r's: 0 or more. */
static int32_t pending_of(const struct eng_offload *off, const struct request *r)
{
	if (r->slot >= off->cap_pend || r->slot >= off->cap_owner || r->slot >= off->cap_prev ||
	    off->pend_owner[r->slot] != r->v.id)
		return 0;
	return off->pend_n[r->slot];
}

int32_t eng_offload_lookup(struct engine *e, struct instance *in, struct request *r, int32_t k,
			   int32_t n, uint64_t *h)
{
	struct eng_offload *off = e->off;
	struct off_inst *o = &off->inst[in->idx];
	int32_t start = k;
	uint64_t prev = *h;

	if (eng_grow((void **)&off->pend_n, &off->cap_pend, r->slot + 1, sizeof(*off->pend_n)) ||
	    eng_grow((void **)&off->pend_owner, &off->cap_owner, r->slot + 1,
		     sizeof(*off->pend_owner)) ||
	    eng_grow((void **)&off->pend_prev, &off->cap_prev, r->slot + 1,
		     sizeof(*off->pend_prev))) {
		off->err = -ENOMEM;
		return 0;
	}
	for (; k < n; k++) {
		uint64_t hk = eng_block_hash(e, r, k, prev);

		/* host marks it used; one the GPU still holds past a block it
		 * lost is taken from there when the request enters a step */
		if (!kvtier_touch(&o->tier, hk) && kvpool_lookup(&in->pool, hk) < 0)
			break;
		prev = hk;
	}
	off->pend_owner[r->slot] = r->v.id;
	off->pend_n[r->slot] = k - start;
	off->pend_prev[r->slot] = *h;
	*h = prev;
	return k - start;
}

void eng_offload_load(struct engine *e, struct instance *in, struct request *r)
{
	struct eng_offload *off = e->off;
	struct off_inst *o = &off->inst[in->idx];
	int32_t n = pending_of(off, r), k0 = r->v.kv_blocks, j, loaded = 0;
	uint64_t prev;

	if (n == 0)
		return;
	off->pend_n[r->slot] = 0;
	prev = off->pend_prev[r->slot];
	eng_kv_mark(e, in);
	for (j = 0; j < n; j++) {
		uint64_t hk = eng_block_hash(e, r, k0 + j, prev);
		int32_t id = kvpool_lookup(&in->pool, hk);

		if (id >= 0) {
			kvpool_acquire(&in->pool, id);
		} else if (kvtier_touch(&o->tier, hk) && !kvpool_alloc(&in->pool, 1, &id)) {
			kvpool_register(&in->pool, id, hk);
			loaded++;
		} else {
			break;   /* lost from both since the lookup: computed instead */
		}
		r->blocks[k0 + j] = id;
		prev = hk;
	}
	r->v.kv_blocks = k0 + j;
	if (j < n) {
		r->v.computed_tokens = r->v.kv_blocks * e->cfg.block_size;
		r->v.cached_tokens = r->v.computed_tokens;
		r->hashed_blocks = r->v.kv_blocks;
		r->hash_last = prev;
	}
	if (kvpool_used(&in->pool) > in->st->peak_used_blocks)
		in->st->peak_used_blocks = kvpool_used(&in->pool);
	if (loaded) {
		/* one H2D copy of its blocks for this step (eng_offload_price) */
		o->load_bytes += loaded * in->pl->kv_bytes_per_block;
		o->n_loads++;
		in->st->load_blocks += (uint64_t)loaded;
		in->st->load_bytes += loaded * in->pl->kv_bytes_per_block;
		in->st->host_hit_tokens += (uint64_t)loaded * (uint64_t)e->cfg.block_size;
	}
}

bool eng_offload_holds(const struct engine *e, uint32_t inst, uint64_t h)
{
	return e->off && kvtier_contains(&e->off->inst[inst].tier, h);
}

int32_t eng_offload_hit(const struct engine *e, uint32_t inst, const struct request *r, int32_t k,
			int32_t n, uint64_t h)
{
	const struct off_inst *o = &e->off->inst[inst];
	int32_t start = k;

	for (; k < n; k++) {
		h = eng_block_hash(e, r, k, h);
		if (kvpool_lookup(&e->inst[inst].pool, h) < 0 && !kvtier_contains(&o->tier, h))
			break;
	}
	return k - start;
}

int eng_offload_price(struct engine *e, struct instance *in, struct exec_result *xr,
		      struct ss_error *err)
{
	struct off_inst *o = &e->off->inst[in->idx];
	int64_t t;

	if (e->off->err)
		return ss_error_set(err, e->off->err, NULL, 0,
				    "out of memory for the host KV tier of instance %u", in->idx);
	if (o->n_loads) {
		/* H2D loads of host hits, before the kernels or under them */
		bool ok = eng_ns_trunc(o->load_bytes / in->pl->pcie_bw * 1e9, &t);

		if (ok)
			t = eng_kv_load_ns(e, in, xr->duration_ns,
					   (int64_t)o->n_loads * SWAP_LATENCY_NS, t);
		if (!ok || !ss_time_add(xr->duration_ns, t, &xr->duration_ns))
			return eng_time_error(err, (double)e->now / 1e9 + o->load_bytes / in->pl->pcie_bw,
					      "a KV load from host on instance %u", in->idx);
		o->load_bytes = 0;
		o->n_loads = 0;
		xr->energy_j += in->pl->gpu->idle_w * in->pl->tp * (double)t / 1e9;
		in->st->swap_ns = ss_time_add_sat(in->st->swap_ns, t);
	}
	if (o->store_bytes == 0)
		return 0;
	/* Stores run on a copy engine beside the step (D2H, its own
	 * direction of the link): only what outlasts the step adds to it. */
	if (!eng_ns_trunc(o->store_bytes / in->pl->pcie_bw * 1e9, &t))
		return eng_time_error(err, (double)e->now / 1e9 + o->store_bytes / in->pl->pcie_bw,
				      "a KV offload on instance %u", in->idx);
	o->store_bytes = 0;
	if (t <= xr->duration_ns)
		return 0;
	t -= xr->duration_ns;
	xr->duration_ns += t;
	xr->energy_j += in->pl->gpu->idle_w * in->pl->tp * (double)t / 1e9;
	in->st->swap_ns = ss_time_add_sat(in->st->swap_ns, t);
	return 0;
}
