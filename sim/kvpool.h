/* servesim — the paged KV block pool of one instance.
 *
 * The KV cache is divided into blocks of block_size tokens (vLLM's
 * PagedAttention layout).  A request holds a block table: the ids of its
 * blocks in order.  The pool is a stack of free block ids plus a reference
 * count per block (prefix sharing will hold blocks more than once), so
 * allocation and release are O(blocks) with no search.  Freeing a block that
 * is not allocated is a programming error and asserts.
 */
#ifndef SS_KVPOOL_H
#define SS_KVPOOL_H

#include <stdint.h>

struct kvpool {
	int32_t total;        /* blocks in the pool */
	int32_t n_free;
	int32_t block_size;   /* tokens per block */
	int32_t *free_ids;    /* stack: free_ids[0..n_free) */
	uint16_t *refcnt;     /* per block; 0 = free */
};

int kvpool_init(struct kvpool *p, int32_t total, int32_t block_size);
void kvpool_release(struct kvpool *p);

/* Take n blocks, writing their ids to out[0..n).  -ENOSPC (and nothing
 * taken) when fewer than n are free. */
int kvpool_alloc(struct kvpool *p, int32_t n, int32_t *out);
/* Drop one reference to each of ids[0..n); blocks reaching 0 become free. */
void kvpool_free(struct kvpool *p, const int32_t *ids, int32_t n);

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
