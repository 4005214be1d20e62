/* servesim — the paged KV block pool (see kvpool.h). */
#include "kvpool.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

int kvpool_init(struct kvpool *p, int32_t total, int32_t block_size)
{
	assert(total >= 0 && block_size > 0);
	*p = (struct kvpool){ .total = total, .n_free = total, .n_stack = total,
			      .block_size = block_size, .lru_head = -1, .lru_tail = -1 };
	p->free_ids = malloc(sizeof(*p->free_ids) * (size_t)(total ? total : 1));
	p->refcnt = calloc((size_t)(total ? total : 1), sizeof(*p->refcnt));
	if (!p->free_ids || !p->refcnt) {
		kvpool_release(p);
		return -ENOMEM;
	}
	/* Lowest ids on top of the stack, so a fresh pool hands out 0, 1, 2... */
	for (int32_t i = 0; i < total; i++)
		p->free_ids[i] = total - 1 - i;
	return 0;
}

void kvpool_release(struct kvpool *p)
{
	if (!p)
		return;
	free(p->free_ids);
	free(p->refcnt);
	free(p->hash);
	free(p->lru_prev);
	free(p->lru_next);
	free(p->tab);
	*p = (struct kvpool){ .lru_head = -1, .lru_tail = -1 };
}

int kvpool_enable_cache(struct kvpool *p, int32_t cache_cap)
{
	size_t n = (size_t)(p->total ? p->total : 1);
	uint32_t slots = 16;

	assert(p->n_free == p->total && !p->hash);
	while (slots < 2 * n)
		slots *= 2;
	p->hash = calloc(n, sizeof(*p->hash));
	p->lru_prev = malloc(n * sizeof(*p->lru_prev));
	p->lru_next = malloc(n * sizeof(*p->lru_next));
	p->tab = malloc(slots * sizeof(*p->tab));
	if (!p->hash || !p->lru_prev || !p->lru_next || !p->tab) {
		free(p->hash);
		free(p->lru_prev);
		free(p->lru_next);
		free(p->tab);
		p->hash = NULL;
		p->lru_prev = p->lru_next = p->tab = NULL;
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < slots; i++)
		p->tab[i] = -1;
	p->tab_mask = slots - 1;
	p->cache_cap = cache_cap > 0 && cache_cap < p->total ? cache_cap : p->total;
	return 0;
}

/* ---- hash table: linear probing, backward-shift deletion ---------------- */

static uint32_t slot_of(const struct kvpool *p, uint64_t h)
{
	return (uint32_t)(h ^ (h >> 29)) & p->tab_mask;
}

int32_t kvpool_lookup(const struct kvpool *p, uint64_t h)
{
	if (!p->hash || h == 0)
		return -1;
	for (uint32_t s = slot_of(p, h);; s = (s + 1) & p->tab_mask) {
		int32_t id = p->tab[s];

		if (id < 0)
			return -1;
		if (p->hash[id] == h)
			return id;
	}
}

static void tab_remove(struct kvpool *p, int32_t id)
{
	uint32_t s = slot_of(p, p->hash[id]);

	while (p->tab[s] != id)
		s = (s + 1) & p->tab_mask;
	/* Shift later members of the probe run back over the hole. */
	for (uint32_t j = (s + 1) & p->tab_mask; p->tab[j] >= 0; j = (j + 1) & p->tab_mask) {
		uint32_t home = slot_of(p, p->hash[p->tab[j]]);

		/* j's entry may move to s if its home is not in (s, j]. */
		if (((j - home) & p->tab_mask) >= ((j - s) & p->tab_mask)) {
			p->tab[s] = p->tab[j];
			s = j;
		}
	}
	p->tab[s] = -1;
	p->hash[id] = 0;
}

void kvpool_register(struct kvpool *p, int32_t id, uint64_t h)
{
	uint32_t s;

	assert(p->hash && h != 0 && id >= 0 && id < p->total && p->refcnt[id] > 0);
	if (p->hash[id] != 0 || kvpool_lookup(p, h) >= 0)
		return;
	p->hash[id] = h;
	for (s = slot_of(p, h); p->tab[s] >= 0; s = (s + 1) & p->tab_mask)
		;
	p->tab[s] = id;
}

/* ---- LRU of evictable cached blocks --------------------------------------- */

static void lru_unlink(struct kvpool *p, int32_t id)
{
	int32_t a = p->lru_prev[id], b = p->lru_next[id];

	if (a >= 0)
		p->lru_next[a] = b;
	else
		p->lru_head = b;
	if (b >= 0)
		p->lru_prev[b] = a;
	else
		p->lru_tail = a;
	p->n_lru--;
}

static void lru_push(struct kvpool *p, int32_t id)
{
	p->lru_prev[id] = p->lru_tail;
	p->lru_next[id] = -1;
	if (p->lru_tail >= 0)
		p->lru_next[p->lru_tail] = id;
	else
		p->lru_head = id;
	p->lru_tail = id;
	p->n_lru++;
}

/* Drop the least recently released cached block from the cache; it stays
 * free, now uncached. */
static int32_t evict_oldest(struct kvpool *p)
{
	int32_t id = p->lru_head;

	assert(id >= 0);
	if (p->on_evict)
		p->on_evict(p->evict_ctx, p->hash[id]);
	lru_unlink(p, id);
	tab_remove(p, id);
	p->evictions++;
	return id;
}

void kvpool_acquire(struct kvpool *p, int32_t id)
{
	assert(p->hash && id >= 0 && id < p->total && p->hash[id] != 0);
	if (p->refcnt[id]++ == 0) {
		lru_unlink(p, id);
		p->n_free--;
	}
}

/* The stack's top, n_free and the arrays are held in locals in the two
 * loops below: out, ids and the stack are int32_t like the counts, so a
 * store through one would reload them every block. */
int kvpool_alloc(struct kvpool *p, int32_t n, int32_t *out)
{
	int32_t top;
	const int32_t *stack = p->free_ids;
	uint32_t *ref = p->refcnt;

	assert(n >= 0);
	if (n > p->n_free && p->reclaim && p->n_reclaimable > 0)
		p->reclaim(p->reclaim_ctx, n - p->n_free);   /* (it frees through kvpool_free) */
	if (n > p->n_free)
		return -ENOSPC;
	top = p->n_stack;
	for (int32_t i = 0; i < n; i++) {
		/* (evict_oldest leaves the stack alone) */
		int32_t id = top > 0 ? stack[--top] : evict_oldest(p);

		assert(ref[id] == 0);
		ref[id] = 1;
		out[i] = id;
	}
	p->n_stack = top;
	p->n_free -= n;
	return 0;
}

void kvpool_free(struct kvpool *p, const int32_t *ids, int32_t n)
{
	int32_t top = p->n_stack, freed = 0;
	int32_t *stack = p->free_ids;
	uint32_t *ref = p->refcnt;
	const uint64_t *hash = p->hash;

	/* Last block first: a request's tail is the least shared part of it,
	 * so it should be the first evicted. */
	if (!hash) {
		/* no cache: every block whose last reference goes is free */
		for (int32_t i = n - 1; i >= 0; i--) {
			int32_t id = ids[i];

			assert(id >= 0 && id < p->total);
			assert(ref[id] > 0 && "double free of a KV block");
			if (--ref[id] == 0)
				stack[top++] = id;
		}
		p->n_free += top - p->n_stack;
		p->n_stack = top;
		return;
	}
	for (int32_t i = n - 1; i >= 0; i--) {
		int32_t id = ids[i];

		assert(id >= 0 && id < p->total);
		assert(ref[id] > 0 && "double free of a KV block");
		if (--ref[id] > 0)
			continue;
		freed++;
		if (hash && hash[id] != 0) {
			/* the pool as the loop has left it, for the LRU */
			p->n_stack = top;
			p->n_free += freed;
			freed = 0;
			lru_push(p, id);
			if (p->n_lru > p->cache_cap)
				p->free_ids[p->n_stack++] = evict_oldest(p);
			top = p->n_stack;
		} else {
			stack[top++] = id;
		}
	}
	p->n_stack = top;
	p->n_free += freed;
}
