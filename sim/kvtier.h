/* servesim — a KV cache tier below GPU memory (host memory, a remote store).
 *
 * A tier remembers which KV blocks it holds, by their content hash (the
 * chained prefix hash of sim/kvm.c, never 0), up to a capacity in
 * blocks, and drops the least recently used block when a new one does not
 * fit (LRU, as vLLM's CPU offload, LMCache's local backends and Mooncake's
 * store evict).  It holds no data and no times: the engine charges the
 * transfers.  One tier per instance (host memory) or one per cluster (a
 * remote store shared by every instance).
 *
 * Data structure: slots in arrays that grow by doubling up to the capacity
 * (a tier of terabytes is mostly empty in short runs, so nothing is sized
 * to the capacity up front); an open-addressing table from hash to slot
 * (linear probing, backward-shift deletion, load <= 1/2) and a doubly
 * linked LRU list through the slots.  Every operation is O(1) expected.
 * Rejected: a sorted structure or a heap of last-use times (O(log n) for
 * nothing LRU needs), a chained hash table (a node allocation per block).
 */
#ifndef SS_KVTIER_H
#define SS_KVTIER_H

#include <stdbool.h>
#include <stdint.h>

struct kvtier {
	int64_t cap;          /* most blocks held, >= 0 */
	int64_t n;            /* blocks held */
	int64_t n_slots;      /* slots allocated, n <= n_slots <= cap */
	uint64_t *hash;       /* per slot: the block held, 0 = free slot */
	int64_t *prev, *next; /* LRU list through used slots, -1 ends it */
	int64_t head, tail;   /* least and most recently used slot, -1 = empty */
	int64_t free_head;    /* free slots chained through next[], -1 = none */
	int64_t *tab;         /* hash -> slot, -1 = empty */
	uint64_t tab_mask;    /* table size - 1 (a power of two) */
	/* counters (blocks) */
	uint64_t puts;        /* blocks newly stored */
	uint64_t evictions;   /* blocks dropped to make room */
};

/* An empty tier of cap blocks (cap >= 0; 0 holds nothing).  0 or -ENOMEM. */
int kvtier_init(struct kvtier *t, int64_t cap);
/* Free its memory; accepts NULL and a released or zeroed tier. */
void kvtier_release(struct kvtier *t);

/* Whether block h is held; does not change the LRU order. */
bool kvtier_contains(const struct kvtier *t, uint64_t h);
/* Mark block h (held) as the most recently used; a block not held is
 * left alone.  Returns whether it is held. */
bool kvtier_touch(struct kvtier *t, uint64_t h);
/* Store block h as the most recently used, evicting the least recently
 * used block when the tier is full.  A block already held is touched.
 * Returns 1 when newly stored, 0 when it was held (or cap is 0), -ENOMEM
 * when growing failed (the tier is unchanged). */
int kvtier_put(struct kvtier *t, uint64_t h);
/* Drop block h; returns whether it was held. */
bool kvtier_remove(struct kvtier *t, uint64_t h);

#endif
