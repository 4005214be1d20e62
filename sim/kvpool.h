/* servesim — the paged KV block pool of one instance.
 *
 * The KV cache is divided into blocks of block_size tokens (vLLM's
 * PagedAttention layout).  A request holds a block table: the ids of its
 * blocks in order.  The pool is a stack of free block ids plus a reference
 * count per block, so allocation and release are O(blocks) with no search.
 * Freeing a block that is not allocated is a programming error and asserts.
 *
 * Prefix caching (kvpool_enable_cache): a full block whose content is known
 * can be registered under a hash that chains every token before it
 * (docs/kv-cache.md).  Requests with the same prefix then share its blocks
 * by reference.  A registered block whose last reference goes stays cached
 * but evictable, in LRU order (least recently released first); it counts
 * as free, and allocation takes never-cached blocks before it evicts any.
 * A cache capacity bounds how many evictable cached blocks are kept.
 */
#ifndef SS_KVPOOL_H
#define SS_KVPOOL_H

#include <stdbool.h>
#include <stdint.h>

struct kvpool {
	int32_t total;        /* blocks in the pool */
	int32_t n_free;       /* never-cached free blocks + evictable cached ones */
	int32_t block_size;   /* tokens per block */
	int32_t *free_ids;    /* stack of uncached free blocks: free_ids[0..n_stack) */
	int32_t n_stack;
	uint32_t *refcnt;     /* per block; 0 = free or evictable */
	/* prefix cache; hash == NULL when off */
	uint64_t *hash;       /* per block: content hash, 0 = not registered */
	int32_t *lru_prev, *lru_next;   /* evictable blocks, oldest at lru_head */
	int32_t lru_head, lru_tail, n_lru;
	int32_t cache_cap;    /* most evictable blocks kept */
	int32_t *tab;         /* open addressing: hash -> block id, -1 = empty */
	uint32_t tab_mask;
	uint64_t evictions;   /* cached blocks dropped (reused or over capacity) */
	/* Optional: called with the hash of each cached block as it is
	 * evicted, before the block is reused (a lower KV tier keeps it:
	 * docs/kv-cache.md, "Offload to host memory"); NULL = nobody. */
	void (*on_evict)(void *ctx, uint64_t h);
	void *evict_ctx;
	/* Optional: blocks lent to another owner that it gives back on demand
	 * (multi-LoRA's unified paging: pages of adapters no running request
	 * uses, docs/lora.md).  n_reclaimable of the used blocks count as
	 * free to the scheduler (kvm_free_blocks); when an allocation finds
	 * fewer than it needs in n_free, reclaim(ctx, short) is asked to
	 * kvpool_free at least `short` of them first.  NULL = nobody. */
	void (*reclaim)(void *ctx, int32_t short_by);
	void *reclaim_ctx;
	int32_t n_reclaimable;
};

int kvpool_init(struct kvpool *p, int32_t total, int32_t block_size);
void kvpool_release(struct kvpool *p);
/* Turn prefix caching on (before any allocation).  cache_cap bounds the
 * evictable cached blocks (<= 0: the whole pool). */
int kvpool_enable_cache(struct kvpool *p, int32_t cache_cap);

/* Take n blocks, writing their ids to out[0..n).  -ENOSPC (and nothing
 * taken) when fewer than n are free. */
int kvpool_alloc(struct kvpool *p, int32_t n, int32_t *out);
/* Drop one reference to each of ids[0..n); blocks reaching 0 become free
 * (cached ones evictable, the last of ids first in line for eviction). */
void kvpool_free(struct kvpool *p, const int32_t *ids, int32_t n);

/* The cached block registered under h, or -1. */
int32_t kvpool_lookup(const struct kvpool *p, uint64_t h);
/* Take a reference to a cached block (found by kvpool_lookup). */
void kvpool_acquire(struct kvpool *p, int32_t id);
/* Register allocated block id as holding content h (h != 0).  A block
 * already registered, or an h another block holds, is left as it is. */
void kvpool_register(struct kvpool *p, int32_t id, uint64_t h);

static inline bool kvpool_caching(const struct kvpool *p)
{
	return p->hash != 0;
}

static inline int32_t kvpool_used(const struct kvpool *p)
{
	return p->total - p->n_free;
}

/* Blocks needed to hold `tokens` tokens. */
static inline int32_t kvpool_blocks_for(const struct kvpool *p, int64_t tokens)
{
	return (int32_t)((tokens + p->block_size - 1) / p->block_size);
}

#endif
