/* servesim — the event queue (evq.h): the indexed heap of common/ss-heap.h
 * plus the one event that may wait beside it, in front. */
#include "evq.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

int evq_init(struct evq *q, uint32_t cap_hint)
{
	q->front = NULL;
	q->next_seq = 0;
	evq_heap_init(&q->h, NULL);
	return evq_heap_reserve(&q->h, cap_hint ? cap_hint : 16);
}

void evq_release(struct evq *q)
{
	if (!q)
		return;
	evq_heap_release(&q->h);
	q->front = NULL;
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
		if (!event_before(NULL, ev, q->front))
			return evq_heap_push(&q->h, ev);
		rc = evq_heap_push(&q->h, q->front);
		if (rc)
			return rc;
	} else if (q->h.n && !event_before(NULL, ev, evq_heap_top(&q->h))) {
		return evq_heap_push(&q->h, ev);
	}
	q->front = ev;
	ev->heap_idx = EVQ_FRONT;
	return 0;
}

/* The order of events is total (time, priority, sequence), so every valid
 * heap pops the same sequence: the heap's layout never changes a result. */
struct event *evq_pop(struct evq *q)
{
	struct event *ev;

	if (q->front) {
		ev = q->front;
		q->front = NULL;
		ev->heap_idx = EVQ_NOT_QUEUED;
		return ev;
	}
	return evq_heap_pop(&q->h);
}

void evq_cancel(struct evq *q, struct event *ev)
{
	if (ev->heap_idx == EVQ_FRONT) {
		assert(q->front == ev);
		q->front = NULL;
		ev->heap_idx = EVQ_NOT_QUEUED;
		return;
	}
	assert(evq_heap_contains(&q->h, ev));
	evq_heap_remove(&q->h, ev);
}
