/* servesim — the event queue.
 *
 * Events are ordered by (time, priority, sequence number): earlier time
 * first; at equal times the lower kind priority first; at equal priority the
 * event pushed first.  The sequence number makes the order total, so a run
 * replays bit-for-bit.
 *
 * Data structure: a binary min-heap of pointers to caller-owned events, each
 * event storing its heap index so that cancel and reschedule are O(log n)
 * (the indexed heap of common/ss-heap.h).
 * The engine pre-allocates its events (one step-completion and one
 * scheduling event per instance, one arrival and one sampling event), so the
 * heap holds O(instances) entries and the hot path never allocates.
 * One event may wait beside the heap, in `front`, when it precedes every
 * event in the heap: a simulation's commonest pushes are the event that
 * fires next (a step's completion when nothing else is due first; the
 * schedule an instance asks for at the current time), and popping it from
 * there costs no sift either way.  The order popped is the same.
 * Rejected alternatives: a calendar queue (O(1) amortized, but it needs
 * tuning to the event-time distribution and gains nothing at this heap
 * size); a pairing heap (pointer-chasing, no cheaper here); a sorted list
 * (O(n) insertion with 64+ instances).
 */
#ifndef SS_EVQ_H
#define SS_EVQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ss-error.h"
#include "ss-heap.h"

#define EVQ_NOT_QUEUED SS_HEAP_NONE
#define EVQ_FRONT (UINT32_MAX - 1)   /* heap_idx of the event in evq.front */

struct event {
	int64_t time_ns;     /* when it fires */
	uint32_t prio;       /* kind priority: lower fires first at equal times */
	uint32_t heap_idx;   /* position in the heap, EVQ_NOT_QUEUED when not queued */
	uint64_t seq;        /* push order, assigned by evq_push */
	uint32_t kind;       /* caller's event kind */
	uint32_t target;     /* caller's payload (e.g. instance index) */
};

static inline bool event_before(const void *ctx, const struct event *a, const struct event *b)
{
	(void)ctx;
	if (a->time_ns != b->time_ns)
		return a->time_ns < b->time_ns;
	if (a->prio != b->prio)
		return a->prio < b->prio;
	return a->seq < b->seq;
}

/* The heap of events (common/ss-heap.h), each at event.heap_idx. */
SS_HEAP_STRUCT(evq_heap, struct event);
SS_HEAP_DEFINE(evq_heap, struct event, heap_idx, event_before);

struct evq {
	struct evq_heap h;
	uint64_t next_seq;
	struct event *front;   /* NULL, or an event before all of heap[0 .. n) */
};

int evq_init(struct evq *q, uint32_t cap_hint);
void evq_release(struct evq *q);

static inline void event_init(struct event *ev, uint32_t kind, uint32_t prio,
			      uint32_t target)
{
	ev->time_ns = 0;
	ev->prio = prio;
	ev->heap_idx = EVQ_NOT_QUEUED;
	ev->seq = 0;
	ev->kind = kind;
	ev->target = target;
}

static inline bool event_queued(const struct event *ev)
{
	return ev->heap_idx != EVQ_NOT_QUEUED;
}

/* Queue ev at time_ns.  ev must not be queued already. */
int evq_push(struct evq *q, struct event *ev, int64_t time_ns);
/* Remove and return the first event, NULL when empty. */
struct event *evq_pop(struct evq *q);
static inline struct event *evq_peek(const struct evq *q)
{
	return q->front ? q->front : evq_heap_top(&q->h);
}
/* Remove a queued event. */
void evq_cancel(struct evq *q, struct event *ev);
static inline uint32_t evq_size(const struct evq *q)
{
	return q->h.n + (q->front != NULL);
}

#endif
