#include "kvpool.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

int kvpool_init(struct kvpool *p, int32_t total, int32_t block_size)
{
	assert(total >= 0 && block_size > 0);
	p->total = total;
	p->n_free = total;
	p->block_size = block_size;
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
	p->free_ids = NULL;
	p->refcnt = NULL;
	p->total = p->n_free = 0;
}

int kvpool_alloc(struct kvpool *p, int32_t n, int32_t *out)
{
	assert(n >= 0);
	if (n > p->n_free)
		return -ENOSPC;
	for (int32_t i = 0; i < n; i++) {
		int32_t id = p->free_ids[--p->n_free];

		assert(p->refcnt[id] == 0);
		p->refcnt[id] = 1;
		out[i] = id;
	}
	return 0;
}

void kvpool_free(struct kvpool *p, const int32_t *ids, int32_t n)
{
	for (int32_t i = 0; i < n; i++) {
		int32_t id = ids[i];

		assert(id >= 0 && id < p->total);
		assert(p->refcnt[id] > 0 && "double free of a KV block");
		if (--p->refcnt[id] == 0)
			p->free_ids[p->n_free++] = id;
	}
}
