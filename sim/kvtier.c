/* servesim — a KV cache tier below GPU memory (see kvtier.h). */
#include "kvtier.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

int kvtier_init(struct kvtier *t, int64_t cap)
{
	assert(cap >= 0);
	*t = (struct kvtier){ .cap = cap, .head = -1, .tail = -1, .free_head = -1 };
	return 0;
}

void kvtier_release(struct kvtier *t)
{
	if (!t)
		return;
	free(t->hash);
	free(t->prev);
	free(t->next);
	free(t->tab);
	*t = (struct kvtier){ .head = -1, .tail = -1, .free_head = -1 };
}

/* ---- hash -> slot: linear probing, backward-shift deletion ---------------- */

static uint64_t home_of(const struct kvtier *t, uint64_t h)
{
	return (h ^ (h >> 29)) & t->tab_mask;
}

static int64_t find(const struct kvtier *t, uint64_t h)
{
	if (!t->tab || h == 0)
		return -1;
	for (uint64_t s = home_of(t, h);; s = (s + 1) & t->tab_mask) {
		int64_t id = t->tab[s];

		if (id < 0 || t->hash[id] == h)
			return id;
	}
}

static void tab_insert(struct kvtier *t, int64_t id)
{
	uint64_t s = home_of(t, t->hash[id]);

	while (t->tab[s] >= 0)
		s = (s + 1) & t->tab_mask;
	t->tab[s] = id;
}

static void tab_remove(struct kvtier *t, int64_t id)
{
	uint64_t s = home_of(t, t->hash[id]);

	while (t->tab[s] != id)
		s = (s + 1) & t->tab_mask;
	/* Shift later members of the probe run back over the hole: the entry
	 * at j may move to s unless its home lies in (s, j]. */
	for (uint64_t j = (s + 1) & t->tab_mask; t->tab[j] >= 0; j = (j + 1) & t->tab_mask) {
		uint64_t home = home_of(t, t->hash[t->tab[j]]);

		if (((j - home) & t->tab_mask) >= ((j - s) & t->tab_mask)) {
			t->tab[s] = t->tab[j];
			s = j;
		}
	}
	t->tab[s] = -1;
}

/* Grow to hold more slots (doubling, at most cap); the table is rebuilt
 * at twice the slots.  -ENOMEM leaves t as it was. */
static int grow(struct kvtier *t)
{
	int64_t want = t->n_slots < 32 ? 64 : 2 * t->n_slots;
	uint64_t size = 16;
	uint64_t *hash;
	int64_t *prev, *next, *tab;

	if (want > t->cap)
		want = t->cap;
	assert(want > t->n_slots);
	while (size < 2 * (uint64_t)want)
		size *= 2;
	hash = realloc(t->hash, sizeof(*hash) * (size_t)want);
	if (hash)
		t->hash = hash;
	prev = realloc(t->prev, sizeof(*prev) * (size_t)want);
	if (prev)
		t->prev = prev;
	next = realloc(t->next, sizeof(*next) * (size_t)want);
	if (next)
		t->next = next;
	tab = malloc(sizeof(*tab) * size);
	if (!hash || !prev || !next || !tab) {
		free(tab);      /* the grown arrays are kept: only their tails are unused */
		return -ENOMEM;
	}
	for (int64_t i = t->n_slots; i < want; i++) {
		t->hash[i] = 0;
		t->next[i] = i + 1 < want ? i + 1 : t->free_head;
	}
	t->free_head = t->n_slots;
	t->n_slots = want;
	free(t->tab);
	t->tab = tab;
	t->tab_mask = size - 1;
	for (uint64_t s = 0; s < size; s++)
		tab[s] = -1;
	for (int64_t i = 0; i < t->n_slots; i++)
		if (t->hash[i])
			tab_insert(t, i);
	return 0;
}

/* ---- LRU list ------------------------------------------------------------- */

static void lru_unlink(struct kvtier *t, int64_t id)
{
	int64_t a = t->prev[id], b = t->next[id];

	if (a >= 0)
		t->next[a] = b;
	else
		t->head = b;
	if (b >= 0)
		t->prev[b] = a;
	else
		t->tail = a;
}

static void lru_push(struct kvtier *t, int64_t id)
{
	t->prev[id] = t->tail;
	t->next[id] = -1;
	if (t->tail >= 0)
		t->next[t->tail] = id;
	else
		t->head = id;
	t->tail = id;
}

static void drop(struct kvtier *t, int64_t id)
{
	lru_unlink(t, id);
	tab_remove(t, id);
	t->hash[id] = 0;
	t->next[id] = t->free_head;
	t->free_head = id;
	t->n--;
}

/* ---- public --------------------------------------------------------------- */

bool kvtier_contains(const struct kvtier *t, uint64_t h)
{
	return find(t, h) >= 0;
}

bool kvtier_touch(struct kvtier *t, uint64_t h)
{
	int64_t id = find(t, h);

	if (id < 0)
		return false;
	if (id != t->tail) {
		lru_unlink(t, id);
		lru_push(t, id);
	}
	return true;
}

int kvtier_put(struct kvtier *t, uint64_t h)
{
	int64_t id;

	assert(h != 0);
	if (t->cap == 0)
		return 0;
	if (kvtier_touch(t, h))
		return 0;
	if (t->free_head < 0 && t->n_slots < t->cap) {
		int rc = grow(t);

		if (rc)
			return rc;
	}
	if (t->free_head < 0) {             /* full: the least recently used goes */
		assert(t->n == t->cap && t->head >= 0);
		drop(t, t->head);
		t->evictions++;
	}
	id = t->free_head;
	t->free_head = t->next[id];
	t->hash[id] = h;
	tab_insert(t, id);
	lru_push(t, id);
	t->n++;
	t->puts++;
	return 1;
}

bool kvtier_remove(struct kvtier *t, uint64_t h)
{
	int64_t id = find(t, h);

	if (id < 0)
		return false;
	drop(t, id);
	return true;
}
