/* servesim — the KV manager (kvm.h, docs/kv-cache.md): options and setup,
 * the GPU block pools, the prefix cache, swap, a request's KV through its
 * life and the price of the transfers a step waits for.  The host tier is
 * kvm-host.c, the remote store kvm-remote.c.
 *
 * Owns: a request's block table (r->kv.blocks, sized once for its whole life),
 * allocating and releasing its blocks in the instance's kvpool, the
 * per-instance integral of used blocks over time (kv_block_ns, brought up
 * to date by kvm_mark before every change of the pool) and the peak;
 * the prefix cache: the chained hash of each KV block from the workload's
 * prefix hashes, lookup of a waiting request's longest cached prefix
 * (pinning those blocks), registration of blocks as they fill, and
 * unpinning; swapped-out KV in host memory and the PCIe time of swaps.
 *
 * Invariants: r->v.kv_blocks blocks of r->kv.blocks are held in the pool; the
 * first r->kv.hashed of them are registered (or were found) under
 * chained hashes ending in r->kv.hash_last; RF_LOOKED marks a waiting request
 * holding the blocks its lookup found.  A block's hash is never 0.  With
 * --kv-offload a waiting request's lookup may also find blocks in host
 * memory (kvm-host.c): they count in computed_tokens and kv.hashed
 * before they are held, until it enters a step.  Per instance, swapped
 * blocks + the host tier's blocks <= host_cap.
 * Cost: O(blocks) per allocation or release; lookup is O(hit blocks) hash
 * probes; registration O(1) amortised per filled block.
 */
#include "kvm-int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-profile.h"
#include "params.h"
#include "sstime.h"
#include "workload.h"

/* ---- options -------------------------------------------------------------- */

/* --prefix-cache off | on | blocks=N */
static int parse_prefix_cache(struct kvm_opts *o, const struct engine_config *cfg,
			      struct ss_error *err)
{
	const char *s = cfg->prefix_cache ? cfg->prefix_cache : "off";
	int64_t n;

	if (!strcmp(s, "off"))
		return 0;
	o->prefix_cache = true;
	if (!strcmp(s, "on"))
		return 0;
	if (!strncmp(s, "blocks=", 7) && ss_parse_int64(s + 7, &n) && n >= 1 && n <= INT32_MAX) {
		o->cache_cap = (int32_t)n;
		return 0;
	}
	return ss_error_set(err, -EINVAL, NULL, 0,
			    "--prefix-cache: expected off, on or blocks=N (N >= 1), got '%s'", s);
}

/* --preemption recompute | swap[:host_gb=G,pcie_gbps=B] */
static int parse_preemption(struct kvm_opts *o, const struct engine_config *cfg,
			    struct ss_error *err)
{
	struct ss_params p;
	double host_gb, bw;
	int rc;

	rc = ss_params_parse(&p, "--preemption", cfg->preemption ? cfg->preemption : "recompute",
			     true, err);
	if (rc)
		return rc;
	if (!strcmp(p.name, "recompute"))
		return ss_params_check_unused(&p, err);
	if (strcmp(p.name, "swap"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--preemption: expected recompute or swap[:host_gb=G,pcie_gbps=B], got '%s'",
				    p.name);
	/* vLLM's default swap space is 4 GiB per GPU; 0 = the catalog's PCIe */
	rc = ss_params_double(&p, "host_gb", 4.0 * 1.073741824, &host_gb, err);
	if (!rc)
		rc = ss_params_double(&p, "pcie_gbps", ss_params_has(&p, "pcie_gbps") ? 0 : 1, &bw, err);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	if (rc)
		return rc;
	if (!(host_gb >= 0 && host_gb < 1e6) || !(bw > 0 && bw < 1e6))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--preemption swap: expected 0 <= host_gb < 1e6 and 0 < pcie_gbps < 1e6, got %g and %g",
				    host_gb, bw);
	o->swap = true;
	o->host_gb = host_gb;
	o->link_gbps = ss_params_has(&p, "pcie_gbps") ? bw : 0;
	return 0;
}

int kvm_opts_parse(struct kvm_opts *o, const struct engine_config *cfg, struct ss_error *err)
{
	int rc;

	memset(o, 0, sizeof(*o));
	rc = parse_prefix_cache(o, cfg, err);
	if (!rc)
		rc = parse_preemption(o, cfg, err);
	if (!rc)
		rc = kvm_host_parse(o, cfg, err);
	return rc;
}

/* ---- setup ---------------------------------------------------------------- */

int kvm_new(struct kvm **out, const struct kvm_config *c, const struct kvm_opts *o,
	    struct ss_error *err)
{
	struct kvm *m = calloc(1, sizeof(*m));
	int rc;

	*out = NULL;
	if (m)
		m->inst = calloc(c->n_inst ? c->n_inst : 1, sizeof(*m->inst));
	if (!m || !m->inst) {
		free(m);
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	}
	m->c = *c;
	m->o = *o;
	rc = kvm_remote_setup(m, err);
	if (rc) {
		kvm_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

int kvm_inst_init(struct kvm *m, uint32_t i, const struct kvm_inst_config *ic,
		  struct kvm_inst **out, struct ss_error *err)
{
	struct kvm_inst *ki = &m->inst[i];
	int pp = ic->pp > 1 ? ic->pp : 1;

	ki->m = m;
	ki->idx = i;
	ki->st = ic->st;
	ki->block_bytes = ic->block_bytes;
	ki->tp = ic->tp;
	ki->gpu = ic->gpu;
	ki->stage_layers = (m->c.n_layers + pp - 1) / pp;
	if (m->o.swap) {
		/* host_gb per GPU: an instance of tp GPUs (per stage of a
		 * pipeline: the stages' hosts hold their layers' share) has
		 * tp x host_gb; each of the tp GPUs moves its shard over its
		 * own link */
		double per_gpu = m->o.link_gbps > 0 ? m->o.link_gbps * 1e9 : ic->gpu->pcie_bw;

		ki->host_cap = (int64_t)(m->o.host_gb * 1e9 * ic->tp / ic->block_bytes);
		ki->pcie_bw = per_gpu * ic->tp;
		/* a tier that holds no block is a mistake, not a tier (as
		 * --kv-remote's: kvm-remote.c) */
		if (ki->host_cap < 1)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: host_gb=%g holds no KV block of %.0f bytes per GPU",
					    m->o.offload ? "--kv-offload" : "--preemption swap",
					    m->o.host_gb, (double)ic->block_bytes / ic->tp);
	}
	if (kvpool_init(&ki->pool, ic->blocks, m->c.block_size) ||
	    (m->o.prefix_cache && kvpool_enable_cache(&ki->pool, m->o.cache_cap)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory for %d KV blocks",
				    ic->blocks);
	if (m->o.offload && kvm_host_init(ki))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	*out = ki;
	return 0;
}

void kvm_free(struct kvm *m)
{
	if (!m)
		return;
	kvm_remote_free(m);
	kvm_host_free(m);
	for (uint32_t i = 0; i < m->c.n_inst; i++)
		kvpool_release(&m->inst[i].pool);
	free(m->inst);
	free(m->pend_n);
	free(m->pend_owner);
	free(m->pend_prev);
	free(m);
}

/* ---- queries -------------------------------------------------------------- */

size_t kvm_inst_bytes(void)
{
	return sizeof(struct kvm_inst);
}

bool kvm_caching(const struct kvm *m)
{
	return m->o.prefix_cache;
}

bool kvm_swapping(const struct kvm *m)
{
	return m->o.swap;
}

const struct kv_remote_stats *kvm_remote_stats(const struct kvm *m)
{
	return m->remote ? &m->remote->st : NULL;
}

struct kvm_inst *kvm_inst(struct kvm *m, uint32_t i)
{
	return &m->inst[i];
}

int32_t kvm_free_blocks(const struct kvm_inst *ki)
{
	return ki->pool.n_free + ki->pool.n_reclaimable;
}

int32_t kvm_total_blocks(const struct kvm_inst *ki)
{
	return ki->pool.total;
}

int32_t kvm_used_blocks(const struct kvm_inst *ki)
{
	return kvpool_used(&ki->pool);
}

int32_t kvm_blocks_for(const struct kvm_inst *ki, int64_t tokens)
{
	return kvpool_blocks_for(&ki->pool, tokens);
}

bool kvm_swap_pending(const struct kvm_inst *ki)
{
	return ki->n_xfers != 0;
}

int64_t kvm_swapped_blocks(const struct kvm_inst *ki)
{
	return ki->swapped;
}

int64_t kvm_host_capacity(const struct kvm_inst *ki)
{
	return ki->host_cap;
}

const struct instance_stats *kvm_inst_stats(const struct kvm_inst *ki)
{
	return ki->st;
}

struct kvpool *kvm_inst_pool(struct kvm_inst *ki)
{
	return &ki->pool;
}

/* ---- helpers -------------------------------------------------------------- */

int kvm_time_error(struct ss_error *err, double end_s, const char *fmt, ...)
{
	char what[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ss_time_range_error(err, end_s, what);
}

int64_t kvm_load_ns(const struct kvm_inst *ki, int64_t step_ns, int64_t lat_ns, int64_t xfer_ns)
{
	return engine_kv_load_added_ns(ki->m->c.kv_load, ki->stage_layers, step_ns, lat_ns, xfer_ns);
}

void kvm_note_peak(struct kvm_inst *ki)
{
	if (kvpool_used(&ki->pool) > ki->st->peak_used_blocks)
		ki->st->peak_used_blocks = kvpool_used(&ki->pool);
}

/* ---- KV accounting -------------------------------------------------------- */

void kvm_mark(struct kvm_inst *ki)
{
	int64_t now = *ki->m->c.now;

	ki->st->kv_block_ns += (double)kvpool_used(&ki->pool) * (double)(now - ki->mark_ns);
	ki->mark_ns = now;
}

void kvm_inst_flush(struct kvm_inst *ki)
{
	kvm_mark(ki);
	ki->st->prefix_evictions = ki->pool.evictions;
}

void kvm_release(struct kvm_inst *ki, struct request *r)
{
	kvm_mark(ki);
	kvpool_free(&ki->pool, r->kv.blocks, r->v.kv_blocks);
	r->v.kv_blocks = 0;
}

static int ensure_block_cap(struct kvm_inst *ki, struct request *r, int32_t want)
{
	int32_t cap;
	int32_t *b;

	if (want <= r->kv.cap)
		return 0;
	/* Sized once for the request's whole life (prompt + output); the
	 * loop covers a policy that over-reserves. */
	cap = kvpool_blocks_for(&ki->pool, (int64_t)r->v.prompt_tokens + r->output_tokens);
	if (cap < 1)
		cap = 1;
	while (cap < want)
		cap *= 2;
	b = realloc(r->kv.blocks, sizeof(*b) * (size_t)cap);
	if (!b)
		return -ENOMEM;
	r->kv.blocks = b;
	r->kv.cap = cap;
	return 0;
}

int kvm_grow(struct kvm_inst *ki, struct request *r, int32_t need)
{
	int32_t want = r->v.kv_blocks + need;

	if (need == 0)
		return 0;
	if (ensure_block_cap(ki, r, want))
		return -ENOMEM;
	kvm_mark(ki);
	if (kvpool_alloc(&ki->pool, need, r->kv.blocks + r->v.kv_blocks))
		return -ENOSPC;
	r->v.kv_blocks = want;
	kvm_note_peak(ki);
	return 0;
}

/* ---- prefix cache (docs/kv-cache.md) -------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* KV blocks of r whose content the workload identifies: whole blocks
 * inside both the prompt and its prefix hashes -- or, when the workload's
 * hashes cover outputs too (a session's calls: workload.h), inside the
 * tokens whose KV is written (prompt + output - 1) and the hashes, so that
 * blocks of generated tokens are cached as vLLM and SGLang cache them. */
static int32_t hashable_blocks(const struct kvm *m, const struct request *r)
{
	const struct workload *wl = m->c.wl;
	const struct wl_request *w = &wl->req[r->v.id];
	int64_t tokens = (int64_t)w->prefix_n * wl->hash_block_tokens;
	int64_t cap = r->v.prompt_tokens;

	if (w->prefix_n == 0)
		return 0;
	if (wl->hashes_cover_output)
		cap += r->output_tokens - 1;
	if (tokens > cap)
		tokens = cap;
	return (int32_t)(tokens / m->c.block_size);
}

/* The hash of KV block k of r given the hash of block k-1 (0 for k = 0):
 * it chains the workload's hash of the prefix block holding block k's last
 * token with k's offset in it, so equal hashes mean equal tokens up to the
 * end of block k.  Never 0. */
uint64_t kvm_block_hash(const struct kvm *m, const struct request *r, int32_t k, uint64_t prev)
{
	const struct workload *wl = m->c.wl;
	const struct wl_request *w = &wl->req[r->v.id];
	int64_t first = (int64_t)k * m->c.block_size;
	int64_t last = first + m->c.block_size - 1;
	uint32_t H = wl->hash_block_tokens;
	uint64_t word = wl->hashes[w->prefix_off + last / H];
	uint64_t h = mix64(prev ^ mix64((word << 32) | (uint64_t)(first % H)));

	return h ? h : 1;
}

/* Most blocks a lookup may find: whole hashable blocks, leaving at least
 * one prompt token to compute (its logits give the first output token). */
int32_t kvm_max_hit_blocks(const struct kvm *m, const struct request *r)
{
	int32_t n = hashable_blocks(m, r);
	int32_t cap = (r->v.prompt_tokens - 1) / m->c.block_size;

	return n < cap ? n : cap;
}

int32_t kvm_prefix_hit(const struct kvm *m, uint32_t inst, const struct request *r)
{
	const struct kvm_inst *ki = &m->inst[inst];
	int32_t bs = m->c.block_size;
	int32_t n = m->o.prefix_cache ? kvm_max_hit_blocks(m, r) : 0, k, j = 0;
	uint64_t h = 0;

	for (k = 0; k < n; k++) {
		uint64_t hk = kvm_block_hash(m, r, k, h);

		if (kvpool_lookup(&ki->pool, hk) < 0)
			break;
		h = hk;
	}
	/* host-held blocks count in full, blocks only in the remote store half
	 * (docs/kv-cache.md); the store's chain is taken from the GPU's end, so
	 * what it holds beyond the host's chain is what counts half */
	if (m->o.offload)
		j = kvm_host_hit(ki, r, k, n, h);
	if (m->remote) {
		int32_t rm = kvm_remote_peek(m, r, k, h);

		if (rm > j)
			return (k + j) * bs + (rm - j) * bs / 2;
	}
	return (k + j) * bs;
}

/* A waiting request that holds nothing takes the cached blocks of its
 * longest cached prefix: they count as computed.  With a host tier
 * (--kv-offload), the chain goes on in host memory, then, with a remote
 * tier, in the remote store: those blocks count as computed too,
 * but are allocated and fetched only when the request is admitted, and
 * registered when its first step ends (they are blocks kv.hashed ..
 * computed_tokens / block_size, beyond r->v.kv_blocks, until then). */
int kvm_lookup(struct kvm_inst *ki, struct request *r)
{
	struct kvm *m = ki->m;
	int32_t n, k, rm;
	uint64_t h = 0;

	if ((r->flags & RF_LOOKED) || r->v.computed_tokens > 0 || r->v.kv_blocks > 0 ||
	    r->v.host_blocks > 0)
		return 0;
	r->flags |= RF_LOOKED;
	n = kvm_max_hit_blocks(m, r);
	if (n > 0 && ensure_block_cap(ki, r, n))
		return -ENOMEM;
	kvm_mark(ki);
	for (k = 0; k < n; k++) {
		uint64_t hk = kvm_block_hash(m, r, k, h);
		int32_t id = kvpool_lookup(&ki->pool, hk);

		if (id < 0)
			break;
		kvpool_acquire(&ki->pool, id);
		r->kv.blocks[k] = id;
		h = hk;
	}
	r->v.kv_blocks = k;
	if (m->o.offload)   /* further on in host memory: taken when it enters a step */
		k += kvm_host_lookup(ki, r, k, n, &h);
	/* further on in the remote store: fetched when it enters a step */
	rm = m->remote ? kvm_remote_lookup(m, r, k, h) : 0;
	r->v.computed_tokens = (k + rm) * m->c.block_size;
	r->v.cached_tokens = r->v.computed_tokens;
	r->kv.hashed = k;
	r->kv.hash_last = h;
	kvm_note_peak(ki);
	return 0;
}

void kvm_register(struct kvm_inst *ki, struct request *r)
{
	struct kvm *m = ki->m;
	int32_t full, n;

	if (!m->o.prefix_cache)
		return;
	full = r->v.computed_tokens / m->c.block_size;
	n = hashable_blocks(m, r);
	if (full > n)
		full = n;
	if (full > r->v.kv_blocks)
		full = r->v.kv_blocks;
	while (r->kv.hashed < full) {
		r->kv.hash_last = kvm_block_hash(m, r, r->kv.hashed, r->kv.hash_last);
		kvpool_register(&ki->pool, r->kv.blocks[r->kv.hashed], r->kv.hash_last);
		if (m->remote)   /* write-through (docs/kv-cache.md) */
			kvm_remote_put(m, r->kv.hash_last);
		r->kv.hashed++;
	}
}

void kvm_forget(struct request *r)
{
	r->flags &= ~RF_LOOKED;
	r->kv.hashed = 0;
	r->kv.hash_last = 0;
}

bool kvm_unpin(struct kvm_inst *ki, struct request *r)
{
	if (!(r->flags & RF_LOOKED))
		return false;
	kvm_release(ki, r);
	r->v.computed_tokens = 0;
	kvm_forget(r);
	return true;
}

/* ---- a request's life ----------------------------------------------------- */

int kvm_enter(struct kvm_inst *ki, struct request *r, int32_t tokens, bool from_wait)
{
	struct kvm *m = ki->m;
	bool looked = from_wait && (r->flags & RF_LOOKED);
	int rc;

	if (m->o.offload && looked)
		kvm_host_load(ki, r);
	rc = kvm_grow(ki, r, req_blocks_needed(&r->v, tokens, m->c.block_size));
	if (rc)
		return rc;
	if (r->v.host_blocks > 0) {
		/* swapped back in before the step runs */
		ki->swapped -= r->v.host_blocks;
		ki->xfer_bytes += r->v.host_blocks * ki->block_bytes;
		ki->n_xfers++;
		ki->st->swap_ins++;
		r->v.host_blocks = 0;
	}
	if (looked) {
		r->flags &= ~RF_LOOKED;
		ki->st->prefix_lookup_tokens += (uint64_t)r->v.prompt_tokens;
		ki->st->prefix_hit_tokens += (uint64_t)r->v.cached_tokens;
		if (m->remote)
			kvm_remote_fetch(ki, r);
	}
	return 0;
}

void kvm_preempt(struct kvm_inst *ki, struct request *r)
{
	struct kvm *m = ki->m;

	if (m->o.offload && r->v.computed_tokens > 0)   /* cached host blocks yield */
		kvm_host_room(ki, r->v.kv_blocks);
	if (m->o.swap && r->v.computed_tokens > 0 && ki->swapped + r->v.kv_blocks <= ki->host_cap) {
		/* Swap: the KV goes to host memory over PCIe and comes back
		 * when the request resumes. */
		ki->swapped += r->v.kv_blocks;
		r->v.host_blocks = r->v.kv_blocks;
		ki->xfer_bytes += r->v.kv_blocks * ki->block_bytes;
		ki->n_xfers++;
		ki->st->swap_outs++;
		if (m->o.offload)
			kvm_host_swapped(ki);
	} else {
		r->v.computed_tokens = 0;
	}
	kvm_release(ki, r);
	kvm_forget(r);
}

void kvm_finish(struct kvm_inst *ki, struct request *r)
{
	kvm_release(ki, r);
	free(r->kv.blocks);
	r->kv.blocks = NULL;
	r->kv.cap = 0;
}

void kvm_drop(struct kvm_inst *ki, struct request *r)
{
	kvm_unpin(ki, r);
	if (r->v.kv_blocks > 0)
		kvm_release(ki, r);
	ki->swapped -= r->v.host_blocks;
	r->v.host_blocks = 0;
}

int kvm_price(struct kvm_inst *ki, struct exec_result *xr, struct ss_error *err)
{
	struct kvm *m = ki->m;
	int rc;

	if (ki->n_xfers) {
		/* Swaps run over PCIe before the step's kernels (the GPU
		 * waits, drawing idle power): docs/policies.md. */
		int64_t t;

		if (!kvm_ns_trunc(ki->xfer_bytes / ki->pcie_bw * 1e9, &t) ||
		    !ss_time_add(t, (int64_t)ki->n_xfers * SWAP_LATENCY_NS, &t) ||
		    !ss_time_add(xr->duration_ns, t, &xr->duration_ns))
			return kvm_time_error(err, (double)*m->c.now / 1e9 +
						   ki->xfer_bytes / ki->pcie_bw,
					      "a swap of %u requests' KV on instance %u",
					      ki->n_xfers, ki->idx);
		xr->energy_j += ki->gpu->idle_w * ki->tp * (double)t / 1e9;
		ki->st->swap_ns = ss_time_add_sat(ki->st->swap_ns, t);
		ki->xfer_bytes = 0;
		ki->n_xfers = 0;
	}
	if (m->o.offload && (rc = kvm_host_price(ki, xr, err)))
		return rc;
	if (m->remote)   /* remote KV read before the step (kvm-remote.c) */
		return kvm_remote_charge(ki, &xr->duration_ns, &xr->energy_j, err);
	return 0;
}

void kvm_req_release(struct kvm_req *q)
{
	free(q->blocks);
	free(q->xfer);
	q->blocks = q->xfer = NULL;
	q->cap = 0;
	q->xfer_n = 0;
}

/* ---- disaggregation ------------------------------------------------------- */

int kvm_xfer_reserve(struct kvm_inst *ki, struct request *r, int32_t need)
{
	r->kv.xfer = malloc(sizeof(*r->kv.xfer) * (size_t)(need ? need : 1));
	if (!r->kv.xfer)
		return -ENOMEM;
	kvm_mark(ki);
	if (kvpool_alloc(&ki->pool, need, r->kv.xfer))
		return -ENOSPC;
	r->kv.xfer_n = need;
	kvm_note_peak(ki);
	return 0;
}

void kvm_xfer_arrive(struct kvm_inst *from, struct request *r)
{
	kvm_release(from, r);
	kvm_forget(r);
	free(r->kv.blocks);
	r->kv.blocks = r->kv.xfer;
	r->kv.cap = r->kv.xfer_n;
	r->v.kv_blocks = r->kv.xfer_n;
	r->kv.xfer = NULL;
	r->kv.xfer_n = 0;
}
