#include "evq.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

static inline bool before(const struct evq_slot *a, const struct evq_slot *b)
{
	return a->time_ns < b->time_ns || (a->time_ns == b->time_ns && a->key < b->key);
}

static inline void place(struct evq *q, uint32_t i, struct evq_slot s)
{
	q->heap[i] = s;
	s.ev->heap_idx = i;
}

static void sift_up(struct evq *q, uint32_t i, struct evq_slot s)
{
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (!before(&s, &q->heap[parent]))
			break;
		place(q, i, q->heap[parent]);
		i = parent;
	}
	place(q, i, s);
}

int evq_init(struct evq *q, uint32_t cap_hint)
{
	q->n = 0;
	q->next_seq = 0;
	q->cap = cap_hint ? cap_hint : 16;
	q->heap = malloc(sizeof(*q->heap) * q->cap);
	return q->heap ? 0 : -ENOMEM;
}

void evq_release(struct evq *q)
{
	if (!q)
		return;
	free(q->heap);
	q->heap = NULL;
	q->n = q->cap = 0;
}

int evq_push(struct evq *q, struct event *ev, int64_t time_ns)
{
	assert(!event_queued(ev));
	assert(ev->prio < (1u << (64 - EVQ_SEQ_BITS)) && q->next_seq < (1ull << EVQ_SEQ_BITS));
	if (q->n == q->cap) {
		uint32_t cap = q->cap * 2;
		struct evq_slot *h = realloc(q->heap, sizeof(*h) * cap);

		if (!h)
			return -ENOMEM;
		q->heap = h;
		q->cap = cap;
	}
	ev->time_ns = time_ns;
	ev->seq = q->next_seq++;
	sift_up(q, q->n++, (struct evq_slot){ time_ns, (uint64_t)ev->prio << EVQ_SEQ_BITS | ev->seq,
					     ev });
	return 0;
}

/* Remove heap[i]: Floyd's bottom-up deletion.  The hole left at i moves
 * down to a leaf along the earlier child (one comparison per level instead
 * of two), and the last element is sifted up from there; in a simulation
 * the last element is usually late, so it rarely climbs.  The order of
 * events is total (time, priority, sequence), so every valid heap pops the
 * same sequence: the layout never changes a result. */
static void remove_at(struct evq *q, uint32_t i)
{
	struct evq_slot last;
	uint32_t n;

	q->heap[i].ev->heap_idx = EVQ_NOT_QUEUED;
	n = --q->n;
	if (n == i)
		return;
	last = q->heap[n];
	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && before(&q->heap[c + 1], &q->heap[c]))
			c++;
		place(q, i, q->heap[c]);
		i = c;
	}
	sift_up(q, i, last);
}

struct event *evq_pop(struct evq *q)
{
	struct event *ev;

	if (q->n == 0)
		return NULL;
	ev = q->heap[0].ev;
	remove_at(q, 0);
	return ev;
}

void evq_cancel(struct evq *q, struct event *ev)
{
	assert(event_queued(ev) && ev->heap_idx < q->n && q->heap[ev->heap_idx].ev == ev);
	remove_at(q, ev->heap_idx);
}
