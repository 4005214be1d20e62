/* servesim — one instance's waiting queue, in its order's order.
 *
 * The scheduler (engine-sched.c) keeps the requests waiting on an instance
 * in a struct waitq and never sees how it is kept: it pushes requests (at
 * the back, or preempted ones at the front), reads the first n in order
 * (the window the batch policy sees), takes out those a step picked, and
 * asks which ones expire.  How the queue is kept is chosen once, at init,
 * from the order's capabilities (policy.h order_ops):
 *
 *   WAITQ_FIFO    no key: arrival order, an array with room before its
 *                 head so preempted requests go back to the front in O(1);
 *   WAITQ_SORT    a key that may move while requests wait: the array,
 *                 sorted by (key now, arrival, id) at every waitq_order
 *                 (the reference every other kind matches, bit for bit);
 *   WAITQ_STATIC  keys fixed while waiting (sjf, spf, priority;
 *                 key_static, or key_aging with a finite rate): a sorted
 *                 prefix of the first `len` and an indexed heap for the
 *                 rest; an aging order checks its rounding margin at every
 *                 waitq_order and sorts like WAITQ_SORT while near-ties
 *                 sit at the head;
 *   WAITQ_TENANT  one key per tenant (vtc; key_tenant): per-tenant queues
 *                 merged into the head at every waitq_order.
 * Expiry (admission_ops.expire): the requests that may expire are indexed
 * by deadline in an indexed heap, whatever the kind.  With the prefix cache,
 * the queue remembers the window of requests that looked up the cache last
 * (waitq_window_done), gives back the lookups of those that left it, and
 * puts those whose static key their lookup moved back in place.
 * waitq.c says what each operation costs and why it is kept so.
 *
 * A request carries its place in the queue in an embedded struct
 * waitq_node (request.wq), as libuv embeds its heap node in a timer.
 */
#ifndef SS_WAITQ_H
#define SS_WAITQ_H

#include <stdbool.h>
#include <stdint.h>

#include "policy.h"
#include "ss-heap.h"

struct request;

/* A request's place in one waiting queue (request.wq); owned by waitq.c. */
struct waitq_node {
	double key;          /* WAITQ_STATIC: its order key, taken when it joined */
	uint32_t pos;        /* its index in waitq.a while outside the ordered head */
	uint32_t hpos;       /* index in the key heap, SS_HEAP_NONE when not in it */
	uint32_t xpos;       /* index in the expiry heap, SS_HEAP_NONE when not in it */
	uint32_t mark;       /* waitq.c's marks, 0 between calls */
	int64_t deadline;    /* when it may expire, ns (admission_ops.deadline) */
	uint64_t jseq;       /* the queue's joins before it joined (waitq.jseq) */
	int64_t fseq;        /* WAITQ_FIFO: its place, growing from front to back */
};

enum waitq_kind { WAITQ_FIFO, WAITQ_SORT, WAITQ_STATIC, WAITQ_TENANT };

/* Pushing with this deadline: the request never expires (not indexed). */
#define WAITQ_NEVER INT64_MAX

/* The waiting requests of one tenant (WAITQ_TENANT), sorted by (arrival,
 * id): a[head .. head + n), room on both sides. */
struct waitq_tenant {
	struct request **a;
	uint32_t head, n, cap;
	uint32_t apos;            /* index in waitq.t_act while n > 0 */
	uint32_t t;               /* its tenant index */
	uint32_t k;               /* the merge's cursor: a[head + k] is next */
	uint32_t hpos;            /* index in the merge's heap */
};

SS_HEAP_STRUCT(waitq_keyheap, struct request);
SS_HEAP_STRUCT(waitq_xheap, struct request);
SS_HEAP_STRUCT(waitq_merge, struct waitq_tenant);

/* What a queue needs from its instance, fixed at init. */
struct waitq_config {
	const struct order_ops *order;     /* resolved (policy.h): optional methods set */
	void *order_priv;
	uint32_t len;                      /* the most waiting requests the batch policy reads, >= 1 */
	uint32_t n_tenants;
	int32_t instance;                  /* the instance's index (request.instance) */
	/* admission_ops.expire, or NULL: nothing expires */
	bool (*expire)(const void *priv, const struct req_view *req, int64_t now,
		       const char **reason);
	const void *expire_priv;
	/* The prefix cache: give back the blocks r's lookup holds, if any;
	 * whether it held any.  NULL: no prefix cache. */
	bool (*unpin)(void *ctx, struct request *r);
	void *unpin_ctx;
};

struct waitq {
	enum waitq_kind kind;
	struct waitq_config c;
	double rate;              /* WAITQ_STATIC under aging: order_ops.key_aging, else 0 */
	/* The queue, a[head .. head + n): in order up to the ordered head
	 * (waitq_ordered), the rest in no particular order. */
	struct req_view **a;
	uint32_t head, n, cap;
	/* WAITQ_STATIC: a[0 .. prefix) sorted, the rest indexed by kh; while
	 * unsorted (aging with near-ties at the head) sorted like WAITQ_SORT
	 * for retry more schedules, backoff doubling up to 1024; bmax the
	 * largest |key at arrival| seen, for the rounding margin. */
	uint32_t prefix;
	double bmax;
	bool unsorted;
	uint32_t backoff, retry;
	struct waitq_keyheap kh;
	/* Expiry: the requests that may expire, by deadline; jseq counts
	 * joins; prep_jseq and prep_now are jseq and the time, ns, when the
	 * queue was last put in order (waitq_order). */
	struct waitq_xheap xh;
	uint64_t jseq, prep_jseq;
	int64_t prep_now;
	/* WAITQ_FIFO: the next fseq at the back and at the front */
	int64_t fseq_back, fseq_front;
	/* The prefix cache: the requests of the last window, and those whose
	 * lookups it gave back (their keys may have moved). */
	struct request **moved;
	uint32_t n_moved, cap_moved;
	/* WAITQ_TENANT: per tenant its queue and key (tkey_prep: the keys at
	 * the last waitq_order, for expiry); the tenants with requests
	 * waiting, t_act[0 .. n_t_act); the merge's heap of tenants. */
	struct waitq_tenant *tq;
	double *tkey, *tkey_prep;
	uint32_t *t_act, n_t_act;
	struct waitq_merge merge;
	/* the requests a step picked (waitq_mark), in its order */
	struct request **take;
	uint32_t n_take, cap_take;
	/* scratch: sorting (2 x the queue) and lists of requests */
	struct waitq_keyed *sortbuf;
	uint32_t cap_sortbuf;
	struct request **xbuf;
	uint32_t cap_xbuf;
};

/* Set q up for the order c->order; 0 or -ENOMEM.  q is released after
 * either (waitq_release accepts a queue init failed on). */
int waitq_init(struct waitq *q, const struct waitq_config *c);
void waitq_release(struct waitq *q);
/* An empty q takes the sorting path from now on: the reference the
 * incremental kinds must match (tests), and a queue in order throughout
 * (multi-LoRA's view reads past the head, engine-lora.c). */
void waitq_use_sorting(struct waitq *q);

/* r joins the queue (arrives, or arrives with its KV on a decode
 * instance): at the back, or in its place under an order; indexed by its
 * deadline unless that is WAITQ_NEVER.  0 or -ENOMEM. */
int waitq_push(struct waitq *q, struct request *r, int64_t deadline_ns, int64_t now);
/* r, just preempted, goes back: at the front, or in its place under an
 * order (its deadline and join order do not change).  0 or -ENOMEM. */
int waitq_push_front(struct waitq *q, struct request *r, int64_t now);
/* Take out r, waiting in q (rejected). */
void waitq_remove(struct waitq *q, struct request *r);
/* A step picked r from the window: waitq_take_marked takes out every
 * request marked since the last call, in one pass.  0 or -ENOMEM. */
int waitq_mark(struct waitq *q, struct request *r);
void waitq_take_marked(struct waitq *q);

/* Expiry: take out the requests whose deadline has come and that the
 * admission policy's expire() lets go at now (their reject_reason set),
 * in the order the sorting path's scan of the queue meets them: *out
 * (valid until the next call on q) and *n.  0 or -ENOMEM. */
int waitq_expire(struct waitq *q, int64_t now, struct request ***out, uint32_t *n);
/* Put the queue in order for a schedule at now (after waitq_expire):
 * with the prefix cache, re-key those the last lookups moved; sort, merge
 * or check the head as the kind does.  0 or -ENOMEM. */
int waitq_order(struct waitq *q, int64_t now);
/* The prefix cache (after waitq_order and the lookups of the first
 * `window` requests): give back the lookups of the other waiting
 * requests, in the queue's order, and remember this window.  0 or -ENOMEM. */
int waitq_window_done(struct waitq *q, uint32_t window, int64_t now);
/* An idle instance that cannot start its head request: give back the
 * lookups of every request behind it.  1 when one was given back, 0 when
 * none, -ENOMEM. */
int waitq_unpin_behind_head(struct waitq *q);

/* The order key of r's tenant may have changed (the order's enqueued()
 * or served() ran for r): re-evaluated at now under WAITQ_TENANT. */
void waitq_tenant_rekey(struct waitq *q, const struct request *r, int64_t now);

/* The waiting requests, in order up to waitq_ordered (NULL when none has
 * ever waited). */
static inline struct req_view **waitq_items(const struct waitq *q)
{
	return q->a ? q->a + q->head : NULL;
}
static inline uint32_t waitq_len(const struct waitq *q)
{
	return q->n;
}
/* How many of waitq_items are in the order's order after waitq_order:
 * all of them, or under an incremental kind the head the batch policy
 * reads. */
uint32_t waitq_ordered(const struct waitq *q);

#endif
