#include "evq.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

static bool before(const struct event *a, const struct event *b)
{
	if (a->time_ns != b->time_ns)
		return a->time_ns < b->time_ns;
	if (a->prio != b->prio)
		return a->prio < b->prio;
	return a->seq < b->seq;
}

static void place(struct evq *q, uint32_t i, struct event *ev)
{
	q->heap[i] = ev;
	ev->heap_idx = i;
}

static void sift_up(struct evq *q, uint32_t i)
{
	struct event *ev = q->heap[i];

	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (!before(ev, q->heap[parent]))
			break;
		place(q, i, q->heap[parent]);
		i = parent;
	}
	place(q, i, ev);
}

int evq_init(struct evq *q, uint32_t cap_hint)
{
	q->front = NULL;
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
	q->front = NULL;
}

/* Put ev in the heap; its time and sequence number are set. */
static int heap_push(struct evq *q, struct event *ev)
{
	if (q->n == q->cap) {
		uint32_t cap = q->cap * 2;
		struct event **h = realloc(q->heap, sizeof(*h) * cap);

		if (!h)
			return -ENOMEM;
		q->heap = h;
		q->cap = cap;
	}
	place(q, q->n++, ev);
	sift_up(q, q->n - 1);
	return 0;
}

int evq_push(struct evq *q, struct event *ev, int64_t time_ns)
{
	int rc;

	assert(!event_queued(ev));
	ev->time_ns = time_ns;
	ev->seq = q->next_seq++;
	if (q->front) {
		/* ev is later than front (ev's sequence number is larger),
		 * or it takes front's place and front goes to the heap */
		if (!before(ev, q->front))
			return heap_push(q, ev);
		rc = heap_push(q, q->front);
		if (rc)
			return rc;
	} else if (q->n && !before(ev, q->heap[0])) {
		return heap_push(q, ev);
	}
	q->front = ev;
	ev->heap_idx = EVQ_FRONT;
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
	struct event *last;
	uint32_t n;

	q->heap[i]->heap_idx = EVQ_NOT_QUEUED;
	n = --q->n;
	if (n == i)
		return;
	last = q->heap[n];
	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && before(q->heap[c + 1], q->heap[c]))
			c++;
		place(q, i, q->heap[c]);
		i = c;
	}
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (!before(last, q->heap[parent]))
			break;
		place(q, i, q->heap[parent]);
		i = parent;
	}
	place(q, i, last);
}

struct event *evq_pop(struct evq *q)
{
	struct event *ev;

	if (q->front) {
		ev = q->front;
		q->front = NULL;
		ev->heap_idx = EVQ_NOT_QUEUED;
		return ev;
	}
	if (q->n == 0)
		return NULL;
	ev = q->heap[0];
	remove_at(q, 0);
	return ev;
}

void evq_cancel(struct evq *q, struct event *ev)
{
	if (ev->heap_idx == EVQ_FRONT) {
		assert(q->front == ev);
		q->front = NULL;
		ev->heap_idx = EVQ_NOT_QUEUED;
		return;
	}
	assert(event_queued(ev) && ev->heap_idx < q->n && q->heap[ev->heap_idx] == ev);
	remove_at(q, ev->heap_idx);
}
