/* servesim — KV blocks of requests and the prefix cache (see engine-int.h,
 * sim/kvpool.h, docs/kv-cache.md).
 *
 * Owns: a request's block table (r->blocks, sized once for its whole life),
 * allocating and releasing its blocks in the instance's kvpool, the
 * per-instance integral of used blocks over time (kv_block_ns, brought up
 * to date by eng_kv_mark before every change of the pool) and the peak;
 * and the prefix cache: the chained hash of each KV block from the
 * workload's prefix hashes, lookup of a waiting request's longest cached
 * prefix (pinning those blocks), registration of blocks as they fill, and
 * unpinning.
 *
 * Invariants: r->v.kv_blocks blocks of r->blocks are held in the pool; the
 * first r->hashed_blocks of them are registered (or were found) under
 * chained hashes ending in r->hash_last; RF_LOOKED marks a waiting request
 * holding the blocks its lookup found.  A block's hash is never 0.  With
 * --kv-offload a waiting request's lookup may also find blocks in host
 * memory (engine-offload.c): they count in computed_tokens and
 * hashed_blocks before they are held, until it enters a step.
 * Cost: O(blocks) per allocation or release; lookup is O(hit blocks) hash
 * probes; registration O(1) amortised per filled block.
 */
#include "engine-int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

/* ---- KV accounting ------------------------------------------------------ */

void eng_kv_mark(struct engine *e, struct instance *in)
{
	in->st->kv_block_ns += (double)kvpool_used(&in->pool) * (double)(e->now - in->kv_mark_ns);
	in->kv_mark_ns = e->now;
}

void eng_kv_release(struct engine *e, struct instance *in, struct request *r)
{
	eng_kv_mark(e, in);
	kvpool_free(&in->pool, r->blocks, r->v.kv_blocks);
	r->v.kv_blocks = 0;
}

int64_t eng_kv_load_ns(const struct engine *e, const struct instance *in, int64_t step_ns,
		       int64_t lat_ns, int64_t xfer_ns)
{
	const struct engine_profile *p = e->cfg.engine;
	int pp = in->pl->pp > 1 ? in->pl->pp : 1;

	return engine_kv_load_added_ns(p ? p->kv_load : ENGINE_KV_LOAD_BLOCKING,
				       (e->cfg.model->n_layers + pp - 1) / pp, step_ns, lat_ns, xfer_ns);
}

static int ensure_block_cap(struct instance *in, struct request *r, int32_t want);

int eng_kv_grow(struct engine *e, struct instance *in, struct request *r, int32_t need)
{
	int32_t want = r->v.kv_blocks + need;

	if (need == 0)
		return 0;
	if (ensure_block_cap(in, r, want))
		return -ENOMEM;
	eng_kv_mark(e, in);
	if (kvpool_alloc(&in->pool, need, r->blocks + r->v.kv_blocks))
		return -ENOSPC;
	r->v.kv_blocks = want;
	if (kvpool_used(&in->pool) > in->st->peak_used_blocks)
		in->st->peak_used_blocks = kvpool_used(&in->pool);
	return 0;
}

/* ---- prefix cache (docs/kv-cache.md) ------------------------------------- */

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
static int32_t hashable_blocks(const struct engine *e, const struct request *r)
{
	const struct wl_request *w = &e->wl->req[r->v.id];
	int64_t tokens = (int64_t)w->prefix_n * e->wl->hash_block_tokens;
	int64_t cap = r->v.prompt_tokens;

	if (w->prefix_n == 0)
		return 0;
	if (e->wl->hashes_cover_output)
		cap += r->output_tokens - 1;
	if (tokens > cap)
		tokens = cap;
	return (int32_t)(tokens / e->cfg.block_size);
}

/* The hash of KV block k of r given the hash of block k-1 (0 for k = 0):
 * it chains the workload's hash of the prefix block holding block k's last
 * token with k's offset in it, so equal hashes mean equal tokens up to the
 * end of block k.  Never 0. */
static uint64_t block_hash(const struct engine *e, const struct request *r, int32_t k,
			   uint64_t prev)
{
	const struct wl_request *w = &e->wl->req[r->v.id];
	int64_t first = (int64_t)k * e->cfg.block_size;
	int64_t last = first + e->cfg.block_size - 1;
	uint32_t H = e->wl->hash_block_tokens;
	uint64_t word = e->wl->hashes[w->prefix_off + last / H];
	uint64_t h = mix64(prev ^ mix64((word << 32) | (uint64_t)(first % H)));

	return h ? h : 1;
}

uint64_t eng_block_hash(const struct engine *e, const struct request *r, int32_t k,
			uint64_t prev)
{
	return block_hash(e, r, k, prev);
}

/* Most blocks a lookup may find: whole hashable blocks, leaving at least
 * one prompt token to compute (its logits give the first output token). */
static int32_t max_hit_blocks(const struct engine *e, const struct request *r)
{
	int32_t n = hashable_blocks(e, r);
	int32_t cap = (r->v.prompt_tokens - 1) / e->cfg.block_size;

	return n < cap ? n : cap;
}

int32_t eng_prefix_hit(void *ctx, int32_t inst, const struct req_view *req)
{
	struct engine *e = ctx;
	const struct request *r = request_of(req);
	const struct kvpool *pool = &e->inst[inst].pool;
	int32_t n = e->pc_on ? max_hit_blocks(e, r) : 0, k, j = 0;
	uint64_t h = 0;

	for (k = 0; k < n; k++) {
		uint64_t hk = block_hash(e, r, k, h);

		if (kvpool_lookup(pool, hk) < 0)
			break;
		h = hk;
	}
	/* host-held blocks count in full, blocks only in the remote store half
	 * (docs/kv-cache.md); the store's chain is taken from the GPU's end, so
	 * what it holds beyond the host's chain is what counts half */
	if (e->off)
		j = eng_offload_hit(e, (uint32_t)inst, r, k, n, h);
	if (e->remote) {
		int32_t m = eng_remote_peek(e, r, k, h);

		if (m > j)
			return (k + j) * e->cfg.block_size + (m - j) * e->cfg.block_size / 2;
	}
	return (k + j) * e->cfg.block_size;
}

int32_t eng_prefix_max_blocks(const struct engine *e, const struct request *r)
{
	return max_hit_blocks(e, r);
}

static int ensure_block_cap(struct instance *in, struct request *r, int32_t want)
{
	int32_t cap;
	int32_t *b;

	if (want <= r->blocks_cap)
		return 0;
	/* Sized once for the request's whole life (prompt + output); the
	 * loop covers a policy that over-reserves. */
	cap = kvpool_blocks_for(&in->pool, (int64_t)r->v.prompt_tokens + r->output_tokens);
	if (cap < 1)
		cap = 1;
	while (cap < want)
		cap *= 2;
	b = realloc(r->blocks, sizeof(*b) * (size_t)cap);
	if (!b)
		return -ENOMEM;
	r->blocks = b;
	r->blocks_cap = cap;
	return 0;
}

/* A waiting request that holds nothing takes the cached blocks of its
 * longest cached prefix: they count as computed.  With a host tier
 * (--kv-offload), the chain goes on in host memory, then, with a remote
 * tier, in the remote store: those blocks count as computed too,
 * but are allocated and fetched only when the request is admitted, and
 * registered when its first step ends (they are blocks hashed_blocks ..
 * computed_tokens / block_size, beyond r->v.kv_blocks, until then). */
int eng_prefix_lookup(struct engine *e, struct instance *in, struct request *r)
{
	int32_t n, k, m;
	uint64_t h = 0;

	if ((r->flags & RF_LOOKED) || r->v.computed_tokens > 0 || r->v.kv_blocks > 0 ||
	    r->v.host_blocks > 0)
		return 0;
	r->flags |= RF_LOOKED;
	n = max_hit_blocks(e, r);
	if (n > 0 && ensure_block_cap(in, r, n))
		return -ENOMEM;
	eng_kv_mark(e, in);
	for (k = 0; k < n; k++) {
		uint64_t hk = block_hash(e, r, k, h);
		int32_t id = kvpool_lookup(&in->pool, hk);

		if (id < 0)
			break;
		kvpool_acquire(&in->pool, id);
		r->blocks[k] = id;
		h = hk;
	}
	r->v.kv_blocks = k;
	if (e->off)   /* further on in host memory: taken when it enters a step */
		k += eng_offload_lookup(e, in, r, k, n, &h);
	/* further on in the remote store: fetched when it enters a step */
	m = e->remote ? eng_remote_lookup(e, in, r, k, h) : 0;
	r->v.computed_tokens = (k + m) * e->cfg.block_size;
	r->v.cached_tokens = r->v.computed_tokens;
	r->hashed_blocks = k;
	r->hash_last = h;
	if (kvpool_used(&in->pool) > in->st->peak_used_blocks)
		in->st->peak_used_blocks = kvpool_used(&in->pool);
	return 0;
}

/* Register r's blocks that have become full of computed tokens. */
void eng_prefix_register(struct engine *e, struct instance *in, struct request *r)
{
	int32_t full = r->v.computed_tokens / e->cfg.block_size;
	int32_t n = hashable_blocks(e, r);

	if (full > n)
		full = n;
	if (full > r->v.kv_blocks)
		full = r->v.kv_blocks;
	while (r->hashed_blocks < full) {
		r->hash_last = block_hash(e, r, r->hashed_blocks, r->hash_last);
		kvpool_register(&in->pool, r->blocks[r->hashed_blocks], r->hash_last);
		if (e->remote)   /* write-through (docs/kv-cache.md) */
			eng_remote_put(e, r->hash_last);
		r->hashed_blocks++;
	}
}

void eng_prefix_forget(struct request *r)
{
	r->flags &= ~RF_LOOKED;
	r->hashed_blocks = 0;
	r->hash_last = 0;
}


/* Give back the blocks a waiting request's lookup pinned. */
void eng_prefix_unpin(struct engine *e, struct instance *in, struct request *r)
{
	if (!(r->flags & RF_LOOKED))
		return;
	eng_kv_release(e, in, r);
	r->v.computed_tokens = 0;
	eng_prefix_forget(r);
}
