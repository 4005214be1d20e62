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
 *     block and is copied back (H2D; kvm_host_load), as vLLM's
 *     scheduler loads an external hit only for a request it schedules;
 *     host keeps its copy (the tiers are inclusive: a block may be in
 *     both, so evicting it from the GPU again copies nothing);
 *   - preempted requests' KV is swapped out to host (the swap path of
 *     kvm_preempt) within the same capacity: cached blocks are dropped
 *     from the host tier, least recently used first, to make room for it.
 * Every transfer is bytes over the instance's PCIe (kvm_inst.pcie_bw).  A
 * request's loads are one transfer for the step it enters (the step needs
 * them), which the engine profile's kv_load either puts before the step's
 * kernels (blocking, as a swap-in) or pipelines with them layer by layer
 * (layerwise; kvm_load_ns).  Stores overlap the step that evicts (a
 * copy engine, the link's other direction, as the connectors'
 * asynchronous stores): only the time by which they outlast it is added
 * (kvm_host_price).
 *
 * Invariant (tests/test-offload.c): per instance, tier blocks + swapped
 * blocks <= host_cap; every block the GPU evicts is counted once as
 * stored, kept (already on host) or dropped (no room), and the tier holds
 * stored - host_evictions blocks.
 * Cost: O(1) expected per evicted, looked-up or loaded block; nothing at
 * all when --kv-offload is off (kvm_opts.offload false, the pools'
 * on_evict hooks NULL).
 */
#include "kvm-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "ss-grow.h"
#include "sstime.h"

static bool offload_on(const struct engine_config *cfg)
{
	return cfg->kv_offload && strcmp(cfg->kv_offload, "off") != 0;
}

/* --kv-offload host_gb=G[,bw_gbps=B] | off */
int kvm_host_parse(struct kvm_opts *o, const struct engine_config *cfg, struct ss_error *err)
{
	struct ss_params p, q;
	double host_gb, bw;
	bool swap_own = false;
	int rc;

	if (!offload_on(cfg))
		return 0;
	rc = ss_params_parse(&p, "--kv-offload", cfg->kv_offload, false, err);
	if (rc)
		return rc;
	if (p.name[0] || !ss_params_has(&p, "host_gb"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--kv-offload: expected off or host_gb=G[,bw_gbps=B], got '%s'",
				    cfg->kv_offload);
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
	if (o->swap) {
		double v;

		rc = ss_params_parse(&q, "--preemption", cfg->preemption, true, err);
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
	o->swap = true;           /* preempted KV goes to host too */
	o->prefix_cache = true;   /* offload keeps cached blocks: caching is on */
	o->offload = true;
	/* host_gb per GPU, as --preemption swap's (kvm_inst_init) */
	o->host_gb = host_gb;
	o->link_gbps = ss_params_has(&p, "bw_gbps") ? bw : 0;
	return 0;
}

/* A GPU pool evicts cached block h (kvpool.on_evict). */
static void on_evict(void *ctx, uint64_t h);

int kvm_host_init(struct kvm_inst *ki)
{
	if (kvtier_init(&ki->tier, ki->host_cap))
		return -ENOMEM;
	ki->pool.on_evict = on_evict;
	ki->pool.evict_ctx = ki;
	ki->st->host_cap_blocks = ki->host_cap;
	return 0;
}

void kvm_host_free(struct kvm *m)
{
	for (uint32_t i = 0; i < m->c.n_inst; i++)
		kvtier_release(&m->inst[i].tier);
}

static void note_host_use(struct kvm_inst *ki)
{
	struct instance_stats *st = ki->st;
	int64_t used = ki->tier.n + ki->swapped;

	st->host_cached_blocks = ki->tier.n;
	if (used > st->host_peak_blocks)
		st->host_peak_blocks = used;
}

/* Drop cached blocks from the host tier, least recently used first, until
 * need more blocks fit beside it and the swapped KV; whether they do. */
static bool make_room(struct kvm_inst *ki, int64_t need)
{
	int64_t cap = ki->host_cap;
	int64_t swapped = ki->swapped;

	if (swapped + need > cap)
		return false;
	while (ki->tier.n + swapped + need > cap) {
		kvtier_remove(&ki->tier, ki->tier.hash[ki->tier.head]);
		ki->st->host_evictions++;
	}
	return true;
}

static void on_evict(void *ctx, uint64_t h)
{
	struct kvm_inst *ki = ctx;
	int rc;

	if (kvtier_touch(&ki->tier, h)) {
		ki->st->offload_kept_blocks++;
		return;
	}
	if (!make_room(ki, 1)) {
		ki->st->offload_dropped_blocks++;
		return;
	}
	rc = kvtier_put(&ki->tier, h);
	if (rc < 0) {
		ki->m->host_err = rc;
		ki->st->offload_dropped_blocks++;
		return;
	}
	ki->st->offload_blocks++;
	ki->st->offload_bytes += ki->block_bytes;
	ki->store_bytes += ki->block_bytes;
	note_host_use(ki);
}

void kvm_host_room(struct kvm_inst *ki, int64_t blocks)
{
	make_room(ki, blocks);
	ki->st->host_cached_blocks = ki->tier.n;
}

void kvm_host_swapped(struct kvm_inst *ki)
{
	note_host_use(ki);
}

/* The pending blocks of slot's request, if they are r's: 0 or more. */
static int32_t pending_of(const struct kvm *m, const struct request *r)
{
	if (r->slot >= m->cap_pend || r->slot >= m->cap_owner || r->slot >= m->cap_prev ||
	    m->pend_owner[r->slot] != r->v.id)
		return 0;
	return m->pend_n[r->slot];
}

int32_t kvm_host_lookup(struct kvm_inst *ki, struct request *r, int32_t k, int32_t n, uint64_t *h)
{
	struct kvm *m = ki->m;
	int32_t start = k;
	uint64_t prev = *h;

	if (SS_GROW(&m->pend_n, &m->cap_pend, r->slot + 1) ||
	    SS_GROW(&m->pend_owner, &m->cap_owner, r->slot + 1) ||
	    SS_GROW(&m->pend_prev, &m->cap_prev, r->slot + 1)) {
		m->host_err = -ENOMEM;
		return 0;
	}
	for (; k < n; k++) {
		uint64_t hk = kvm_block_hash(m, r, k, prev);

		/* host marks it used; one the GPU still holds past a block it
		 * lost is taken from there when the request enters a step */
		if (!kvtier_touch(&ki->tier, hk) && kvpool_lookup(&ki->pool, hk) < 0)
			break;
		prev = hk;
	}
	m->pend_owner[r->slot] = r->v.id;
	m->pend_n[r->slot] = k - start;
	m->pend_prev[r->slot] = *h;
	*h = prev;
	return k - start;
}

void kvm_host_load(struct kvm_inst *ki, struct request *r)
{
	struct kvm *m = ki->m;
	int32_t n = pending_of(m, r), k0 = r->v.kv_blocks, j, loaded = 0;
	uint64_t prev;

	if (n == 0)
		return;
	m->pend_n[r->slot] = 0;
	prev = m->pend_prev[r->slot];
	kvm_mark(ki);
	for (j = 0; j < n; j++) {
		uint64_t hk = kvm_block_hash(m, r, k0 + j, prev);
		int32_t id = kvpool_lookup(&ki->pool, hk);

		if (id >= 0) {
			kvpool_acquire(&ki->pool, id);
		} else if (kvtier_touch(&ki->tier, hk) && !kvpool_alloc(&ki->pool, 1, &id)) {
			kvpool_register(&ki->pool, id, hk);
			loaded++;
		} else {
			break;   /* lost from both since the lookup: computed instead */
		}
		r->kv.blocks[k0 + j] = id;
		prev = hk;
	}
	r->v.kv_blocks = k0 + j;
	if (j < n) {
		r->v.computed_tokens = r->v.kv_blocks * m->c.block_size;
		r->v.cached_tokens = r->v.computed_tokens;
		r->kv.hashed = r->v.kv_blocks;
		r->kv.hash_last = prev;
	}
	kvm_note_peak(ki);
	if (loaded) {
		/* one H2D copy of its blocks for this step (kvm_host_price) */
		ki->load_bytes += loaded * ki->block_bytes;
		ki->n_loads++;
		ki->st->load_blocks += (uint64_t)loaded;
		ki->st->load_bytes += loaded * ki->block_bytes;
		ki->st->host_hit_tokens += (uint64_t)loaded * (uint64_t)m->c.block_size;
	}
}

bool kvm_host_holds(const struct kvm *m, uint32_t inst, uint64_t h)
{
	return m->o.offload && kvtier_contains(&m->inst[inst].tier, h);
}

int32_t kvm_host_hit(const struct kvm_inst *ki, const struct request *r, int32_t k, int32_t n,
		     uint64_t h)
{
	int32_t start = k;

	for (; k < n; k++) {
		h = kvm_block_hash(ki->m, r, k, h);
		if (kvpool_lookup(&ki->pool, h) < 0 && !kvtier_contains(&ki->tier, h))
			break;
	}
	return k - start;
}

int kvm_host_price(struct kvm_inst *ki, struct exec_result *xr, struct ss_error *err)
{
	double now_s = (double)*ki->m->c.now / 1e9;
	int64_t t;

	if (ki->m->host_err)
		return ss_error_set(err, ki->m->host_err, NULL, 0,
				    "out of memory for the host KV tier of instance %u", ki->idx);
	if (ki->n_loads) {
		/* H2D loads of host hits, before the kernels or under them */
		bool ok = kvm_ns_trunc(ki->load_bytes / ki->pcie_bw * 1e9, &t);

		if (ok)
			t = kvm_load_ns(ki, xr->duration_ns, (int64_t)ki->n_loads * SWAP_LATENCY_NS, t);
		if (!ok || !ss_time_add(xr->duration_ns, t, &xr->duration_ns))
			return kvm_time_error(err, now_s + ki->load_bytes / ki->pcie_bw,
					      "a KV load from host on instance %u", ki->idx);
		ki->load_bytes = 0;
		ki->n_loads = 0;
		xr->energy_j += ki->gpu->idle_w * ki->tp * (double)t / 1e9;
		ki->st->swap_ns = ss_time_add_sat(ki->st->swap_ns, t);
	}
	if (ki->store_bytes == 0)
		return 0;
	/* Stores run on a copy engine beside the step (D2H, its own
	 * direction of the link): only what outlasts the step adds to it. */
	if (!kvm_ns_trunc(ki->store_bytes / ki->pcie_bw * 1e9, &t))
		return kvm_time_error(err, now_s + ki->store_bytes / ki->pcie_bw,
				      "a KV offload on instance %u", ki->idx);
	ki->store_bytes = 0;
	if (t <= xr->duration_ns)
		return 0;
	t -= xr->duration_ns;
	xr->duration_ns += t;
	xr->energy_j += ki->gpu->idle_w * ki->tp * (double)t / 1e9;
	ki->st->swap_ns = ss_time_add_sat(ki->st->swap_ns, t);
	return 0;
}
