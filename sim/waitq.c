/* servesim — one instance's waiting queue (waitq.h).
 *
 * Every kind keeps the queue's requests in one array, a[head .. head + n),
 * which is what the batch policy is shown; the kinds differ in how much of
 * it is in order and what keeps it so.  Costs per schedule, for W waiting:
 *   FIFO     nothing: a join appends (amortised O(1)), a preempted request
 *            goes before the head (O(1), room kept there), a step's picks
 *            leave from the front without moving anything.
 *   SORT     O(W) keys and a sort of what joined since the last schedule,
 *            merged with the rest (the queue was in order then).
 *   STATIC   nothing per waiting request: a join is O(log W) or O(len),
 *            one leaving the sorted head O(log W) (see "static keys").
 *            Under aging, plus O(len) for the rounding check, or SORT's
 *            cost while near-ties sit at the head.
 *   TENANT   O(len + A log A) for A tenants waiting; a join or leave is a
 *            binary search and a memmove in its tenant's queue.
 * Expiry adds O(k log W) for the k requests due (see "expiry"); under FIFO
 * or SORT, plus the distance from the front to the last of them.  With the
 * prefix cache, STATIC and TENANT add O(len log W) for the lookups they
 * give back and the keys those move ("the prefix cache's window").
 */
#include "waitq.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"
#include "ss-grow.h"
#include "ss-sort.h"

/* waitq_node.mark bits */
#define MK_TAKE 1u     /* picked by a step (waitq_mark) */
#define MK_EXPIRE 2u   /* expires at this schedule */
#define MK_ONCE 4u     /* listed once (the prefix cache's window lists) */

/* A waiting request with its order key, for sorting. */
struct waitq_keyed {
	double key;
	struct req_view *v;
};

static inline struct request *req(struct req_view *v)
{
	return request_of(v);
}

/* ---- orders ---------------------------------------------------------------
 * Every kind orders as the sorting path does: key, then arrival time,
 * then id (a total order: ids are unique). */

static inline bool arr_before(const struct request *a, const struct request *b)
{
	if (a->v.arrival_ns != b->v.arrival_ns)
		return a->v.arrival_ns < b->v.arrival_ns;
	return a->v.id < b->v.id;
}

static inline bool key_before(const void *ctx, const struct request *a, const struct request *b)
{
	(void)ctx;
	if (a->wq.key != b->wq.key)
		return a->wq.key < b->wq.key;
	return arr_before(a, b);
}

static inline bool deadline_before(const void *ctx, const struct request *a,
				   const struct request *b)
{
	(void)ctx;
	return a->wq.deadline < b->wq.deadline;
}

static inline bool keyed_before(const void *ctx, const struct waitq_keyed *a,
				const struct waitq_keyed *b)
{
	(void)ctx;
	if (a->key != b->key)
		return a->key < b->key;
	if (a->v->arrival_ns != b->v->arrival_ns)
		return a->v->arrival_ns < b->v->arrival_ns;
	return a->v->id < b->v->id;
}

static inline bool tq_before(const struct waitq *q, uint32_t ta, const struct request *a,
			     uint32_t tb, const struct request *b)
{
	if (q->tkey[ta] != q->tkey[tb])
		return q->tkey[ta] < q->tkey[tb];
	return arr_before(a, b);
}

/* The merge's order of tenants: by their next requests. */
static inline bool cur_before(const void *ctx, const struct waitq_tenant *a,
			      const struct waitq_tenant *b)
{
	return tq_before(ctx, a->t, a->a[a->head + a->k], b->t, b->a[b->head + b->k]);
}

SS_HEAP_DEFINE(waitq_keyheap, struct request, wq.hpos, key_before);
SS_HEAP_DEFINE(waitq_xheap, struct request, wq.xpos, deadline_before);
SS_HEAP_DEFINE(waitq_merge, struct waitq_tenant, hpos, cur_before);
SS_SORT_DEFINE(sort_keyed, struct waitq_keyed, keyed_before);

/* ---- the array ------------------------------------------------------------ */

static int append(struct waitq *q, struct req_view *v)
{
	if (q->head + q->n == q->cap) {
		if (q->head > q->cap / 2) {
			memmove(q->a, q->a + q->head, sizeof(*q->a) * q->n);
			q->head = 0;
		} else if (SS_GROW(&q->a, &q->cap, q->cap + 1)) {
			return -ENOMEM;
		}
	}
	q->a[q->head + q->n++] = v;
	return 0;
}

static int prepend(struct waitq *q, struct req_view *v)
{
	if (q->head == 0) {
		uint32_t gap = q->n / 2 + 16;

		if (SS_GROW(&q->a, &q->cap, q->n + gap))
			return -ENOMEM;
		memmove(q->a + gap, q->a, sizeof(*q->a) * q->n);
		q->head = gap;
	}
	q->a[--q->head] = v;
	q->n++;
	return 0;
}

/* Take out the n_take requests marked mk.  Steps take mostly from the
 * front, so scan only until all are found and advance the head past a
 * marked prefix without moving anything. */
static void array_take(struct waitq *q, uint32_t n_take, uint32_t mk)
{
	struct req_view **w = q->a + q->head;
	uint32_t rd = 0, wr, found = 0;

	while (rd < q->n && found < n_take && (req(w[rd])->wq.mark & mk)) {
		req(w[rd])->wq.mark &= ~mk;
		rd++;
		found++;
	}
	q->head += rd;
	q->n -= rd;
	w += rd;
	if (found == n_take)
		return;
	for (rd = 0, wr = 0; rd < q->n && found < n_take; rd++) {
		struct request *r = req(w[rd]);

		if (r->wq.mark & mk) {
			r->wq.mark &= ~mk;
			found++;
			continue;
		}
		w[wr++] = w[rd];
	}
	/* the rest moves up as one block (multi-LoRA's view takes requests
	 * from deep in the queue: this stays O(queue), at memmove's speed) */
	memmove(w + wr, w + rd, sizeof(*w) * (q->n - rd));
	q->n = wr + (q->n - rd);
}

/* WAITQ_FIFO: r's index in the array (from the head), by its fseq, which
 * grows from front to back. */
static uint32_t fifo_find(const struct waitq *q, const struct request *r)
{
	struct req_view *const *w = q->a + q->head;
	uint32_t lo = 0, hi = q->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (req(w[mid])->wq.fseq < r->wq.fseq)
			lo = mid + 1;
		else
			hi = mid;
	}
	assert(lo < q->n && w[lo] == &r->v);
	return lo;
}

/* WAITQ_FIFO: take out take[0 .. n_take), marked mk.  Each is found by a
 * binary search on fseq, and only the shorter side moves: the entries
 * before the last taken one towards the back (the head advances), or those
 * after the first taken one towards the front.  O(n_take log n + that
 * side): a step that takes from the front (a plain run) or from the back
 * (multi-LoRA's view, whose eligible requests are often the latest
 * arrivals of a running adapter) moves little, where array_take scans from
 * the front. */
static void fifo_take(struct waitq *q, struct request *const *take, uint32_t n_take, uint32_t mk)
{
	struct req_view **w = q->a + q->head;
	uint32_t lo = q->n, hi = 0;

	for (uint32_t k = 0; k < n_take; k++) {
		uint32_t p = fifo_find(q, take[k]);

		lo = p < lo ? p : lo;
		hi = p > hi ? p : hi;
	}
	if (hi + 1 <= q->n - lo) {
		uint32_t wr = hi + 1;

		for (uint32_t rd = hi + 1; rd-- > 0;) {
			struct request *r = req(w[rd]);

			if (r->wq.mark & mk) {
				r->wq.mark &= ~mk;
				continue;
			}
			w[--wr] = w[rd];
		}
		assert(wr == n_take);
		q->head += n_take;
	} else {
		uint32_t wr = lo;

		for (uint32_t rd = lo; rd < q->n; rd++) {
			struct request *r = req(w[rd]);

			if (r->wq.mark & mk) {
				r->wq.mark &= ~mk;
				continue;
			}
			w[wr++] = w[rd];
		}
		assert(wr == q->n - n_take);
	}
	q->n -= n_take;
}

/* ---- static keys (WAITQ_STATIC) -------------------------------------------
 *
 * With an order whose keys do not change while a request waits (sjf, spf
 * without the prefix cache, priority without aging: order_ops.key_static),
 * the queue is kept as
 *
 *     a[0 .. prefix)          the prefix smallest requests in the order,
 *                             sorted;
 *     a[prefix .. n)          the others, unordered, each at node.pos,
 *                             indexed by the heap kh;
 *
 * with prefix == min(n, len).  Keys are computed once, when a request
 * joins (node.key).  A join costs O(log n) (heap) or O(len) (insertion
 * into the sorted prefix, a memmove of at most len pointers); a request
 * leaving the prefix is replaced by the heap's minimum in O(log n).
 * Nothing is done per step for requests that did not change.
 *
 * Rejected alternatives: sorting the tail and merging before every step
 * (WAITQ_SORT: O(n) per step, quadratic under overload); one sorted array
 * with binary insertion (a memmove of O(n) pointers per arrival, quadratic
 * again); a heap alone (the policies read the head of the queue in order
 * as an array, and popping and re-pushing len entries every step costs
 * O(len log n) per step where this costs nothing).  A key that moves with
 * a request's own prefix-cache lookup (spf's pending tokens) is taken
 * again after the lookup (rekey_moved); priority aging uses this structure
 * by its static key (static_key, aging_check). */

/* The structure is in use (not while an aging order sorts a[] like
 * WAITQ_SORT until the next waitq_order: unsorted). */
static inline bool static_on(const struct waitq *q)
{
	return q->kind == WAITQ_STATIC && !q->unsorted;
}

/* node.key: the key itself, or under aging (rate > 0) the static key
 * base + rate * arrival_s, base = key at arrival; the largest |base| is
 * kept for the rounding margin (aging_check). */
static double static_key(struct waitq *q, const struct request *r, int64_t now)
{
	double base;

	if (q->rate == 0)
		return q->c.order->key(q->c.order_priv, &r->v, now);
	base = q->c.order->key(q->c.order_priv, &r->v, r->v.arrival_ns);
	if (fabs(base) > q->bmax || base != base)
		q->bmax = base == base ? fabs(base) : INFINITY;
	return base + q->rate * ((double)r->v.arrival_ns * 1e-9);
}

/* Put r (joining) in its place: the sorted prefix or the heap. */
static int static_insert(struct waitq *q, struct request *r, int64_t now)
{
	struct req_view **w;
	uint32_t P = q->prefix, lo = 0, hi = P;
	struct request *out = NULL;

	assert(q->head == 0);
	r->wq.key = static_key(q, r, now);
	if (append(q, &r->v))
		return -ENOMEM;
	w = q->a;
	q->n--;   /* appended at n: placed below */
	if (P == q->c.len && !key_before(NULL, r, req(w[P - 1]))) {
		out = r;          /* not among the smallest: to the heap */
	} else {
		/* after every request it does not go before (upper bound) */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (key_before(NULL, r, req(w[mid])))
				hi = mid;
			else
				lo = mid + 1;
		}
		if (P == q->c.len) {
			out = req(w[P - 1]);
			P--;
		} else {
			/* prefix < len: the heap is empty, w[P] is free */
			assert(q->kh.n == 0);
		}
		memmove(w + lo + 1, w + lo, sizeof(*w) * (P - lo));
		w[lo] = &r->v;
		P++;
	}
	q->prefix = P;
	if (out) {
		out->wq.pos = P + q->kh.n;
		w[out->wq.pos] = &out->v;
		if (waitq_keyheap_push(&q->kh, out))
			return -ENOMEM;
	}
	q->n = q->prefix + q->kh.n;
	return 0;
}

/* The prefix lost requests and now holds `kept` at its front: refill it
 * from the heap, moving the rest's last entry into each hole the heap's
 * minimum leaves. */
static void static_refill(struct waitq *q, uint32_t kept)
{
	struct req_view **w = q->a;
	uint32_t rest = q->prefix;   /* the rest starts here */

	while (kept < q->c.len && q->kh.n > 0) {
		struct request *m = waitq_keyheap_pop(&q->kh);
		uint32_t last = rest + q->kh.n;   /* the rest's last entry, after the pop */

		w[kept++] = &m->v;
		if (m->wq.pos != last) {
			w[m->wq.pos] = w[last];
			req(w[m->wq.pos])->wq.pos = m->wq.pos;
		}
	}
	/* The heap is empty or the prefix is full again (while the heap has
	 * entries, prefix == len): either way the queue is contiguous. */
	assert(q->kh.n == 0 || kept == rest);
	q->prefix = kept;
	q->n = q->prefix + q->kh.n;
}

/* Take x[0..m), each marked mk, out of the structure: those in the heap
 * first (the rest staying contiguous), then the sorted prefix, refilled.
 * O(m log n + len). */
static void static_take(struct waitq *q, struct request **x, uint32_t m, uint32_t mk)
{
	struct req_view **w = q->a;
	uint32_t kept = 0;

	for (uint32_t k = 0; k < m; k++) {
		if (waitq_keyheap_contains(&q->kh, x[k])) {
			uint32_t last;

			waitq_keyheap_remove(&q->kh, x[k]);
			last = q->prefix + q->kh.n;
			if (x[k]->wq.pos != last) {
				w[x[k]->wq.pos] = w[last];
				req(w[x[k]->wq.pos])->wq.pos = x[k]->wq.pos;
			}
		}
	}
	for (uint32_t k = 0; k < q->prefix; k++)
		if (!(req(w[k])->wq.mark & mk))
			w[kept++] = w[k];
	static_refill(q, kept);
}

/* Take the n_take requests marked mk out of the sorted prefix (a step
 * takes only from the first len waiting requests). */
static void static_take_prefix(struct waitq *q, uint32_t n_take, uint32_t mk)
{
	struct req_view **w = q->a;
	uint32_t wr = 0, found = 0;

	for (uint32_t rd = 0; rd < q->prefix; rd++) {
		struct request *r = req(w[rd]);

		if (found < n_take && (r->wq.mark & mk)) {
			r->wq.mark &= ~mk;
			found++;
			continue;
		}
		w[wr++] = w[rd];
	}
	assert(found == n_take);
	static_refill(q, wr);
}

/* ---- tenant keys (WAITQ_TENANT) -------------------------------------------
 *
 * With an order whose key is one per tenant, changed only by enqueued()
 * and served() (vtc: order_ops.key_tenant), the sorting path's order --
 * key, then arrival time, then id -- is a merge of the tenants' waiting
 * requests, each tenant's in (arrival, id) order, by (tenant key, arrival,
 * id).  So each tenant keeps its waiting requests sorted (tq[t]: a join
 * is a binary search and a memmove towards the nearer end, in practice at
 * the back for an arrival and near the front for a preempted request), its
 * key is re-evaluated after each enqueued()/served() call for it
 * (waitq_tenant_rekey: O(1)), and before a step the first len requests of
 * the merge are swapped to the front of a[] (tenant_merge).  The rest of
 * a[] holds the other waiting requests unordered, each at node.pos.  Cost
 * per step: O(len + A log A) for A tenants with requests waiting,
 * independent of the queue's length; a run of one tenant's requests is
 * taken without heap operations (and without comparisons when its key is
 * below every other tenant's).
 *
 * Rejected alternative: a heap of tenants kept across steps (the merge
 * still has to lay out len requests for the batch policy each step, and
 * every step changes the keys of the tenants it serves). */

static int tenant_insert(struct waitq *q, struct request *r, int64_t now)
{
	uint32_t t = (uint32_t)r->v.tenant, lo = 0, hi;
	struct waitq_tenant *tq = &q->tq[t];

	assert(q->head == 0);
	if (append(q, &r->v))
		return -ENOMEM;
	r->wq.pos = q->n - 1;
	if (tq->n == 0) {
		/* re-evaluated here too: the key may have moved while the
		 * tenant had nothing waiting (served() of its running requests) */
		q->tkey[t] = q->c.order->key(q->c.order_priv, &r->v, now);
		tq->apos = q->n_t_act;
		q->t_act[q->n_t_act++] = t;
		tq->head = tq->cap / 2;
	}
	/* upper bound: after every request it does not go before */
	hi = tq->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (arr_before(r, tq->a[tq->head + mid]))
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo < tq->n / 2 && tq->head > 0) {
		memmove(tq->a + tq->head - 1, tq->a + tq->head, sizeof(*tq->a) * lo);
		tq->head--;
	} else {
		if (tq->head + tq->n == tq->cap) {
			/* recentre, growing to twice the entries plus slack */
			uint32_t need = 2 * tq->n + 16, nh;

			if (tq->cap < need) {
				struct request **a = realloc(tq->a, sizeof(*a) * need);

				if (!a)
					return -ENOMEM;
				tq->a = a;
				tq->cap = need;
			}
			nh = (tq->cap - tq->n) / 2;
			memmove(tq->a + nh, tq->a + tq->head, sizeof(*tq->a) * tq->n);
			tq->head = nh;
		}
		memmove(tq->a + tq->head + lo + 1, tq->a + tq->head + lo,
			sizeof(*tq->a) * (tq->n - lo));
	}
	tq->a[tq->head + lo] = r;
	tq->n++;
	return 0;
}

/* Take r out of its tenant's queue and out of a[] (the last entry of a[]
 * fills its place: the head's order holds again only after the next
 * tenant_merge). */
static void tenant_remove(struct waitq *q, struct request *r)
{
	uint32_t t = (uint32_t)r->v.tenant, lo = 0, hi;
	struct waitq_tenant *tq = &q->tq[t];
	struct req_view **w = q->a;

	hi = tq->n;
	while (lo < hi) {   /* lower bound: r itself */
		uint32_t mid = lo + (hi - lo) / 2;

		if (arr_before(tq->a[tq->head + mid], r))
			lo = mid + 1;
		else
			hi = mid;
	}
	assert(lo < tq->n && tq->a[tq->head + lo] == r);
	if (lo < tq->n / 2) {
		memmove(tq->a + tq->head + 1, tq->a + tq->head, sizeof(*tq->a) * lo);
		tq->head++;
	} else {
		memmove(tq->a + tq->head + lo, tq->a + tq->head + lo + 1,
			sizeof(*tq->a) * (tq->n - lo - 1));
	}
	if (--tq->n == 0) {
		uint32_t last = q->t_act[--q->n_t_act];

		q->t_act[tq->apos] = last;
		q->tq[last].apos = tq->apos;
	}
	assert(q->head == 0 && w[r->wq.pos] == &r->v);
	if (r->wq.pos != q->n - 1) {
		w[r->wq.pos] = w[q->n - 1];
		req(w[r->wq.pos])->wq.pos = r->wq.pos;
	}
	q->n--;
}

/* Put the first min(len, n) waiting requests in the order's sequence at
 * a[0 ..): a merge of the tenants' queues by a heap of tenants. */
static void tenant_merge(struct waitq *q)
{
	struct waitq_merge *h = &q->merge;
	struct req_view **w = q->a;
	uint32_t m = q->n < q->c.len ? q->n : q->c.len, i = 0;

	h->n = 0;
	for (uint32_t k = 0; k < q->n_t_act; k++) {
		struct waitq_tenant *tq = &q->tq[q->t_act[k]];

		tq->k = 0;
		waitq_merge_append(h, tq);
	}
	waitq_merge_build(h);
	while (i < m) {
		struct waitq_tenant *tq = waitq_merge_top(h);
		/* the rival: the next tenant after it */
		struct waitq_tenant *rival = h->n < 2 ? NULL
					     : h->n > 2 && cur_before(q, waitq_merge_at(h, 2),
								      waitq_merge_at(h, 1))
					     ? waitq_merge_at(h, 2) : waitq_merge_at(h, 1);
		/* a smaller tenant key: the whole run precedes the rival's */
		bool whole = !rival || q->tkey[tq->t] < q->tkey[rival->t];

		do {
			struct request *r = tq->a[tq->head + tq->k];

			/* lay r out at w[i] */
			if (w[i] != &r->v) {
				uint32_t j = r->wq.pos;

				w[j] = w[i];
				req(w[j])->wq.pos = j;
				w[i] = &r->v;
				r->wq.pos = i;
			}
			i++;
		} while (++tq->k < tq->n && i < m && (whole || cur_before(q, tq, rival)));
		if (tq->k == tq->n) {
			waitq_merge_pop(h);
			if (h->n == 0)
				break;
		} else {
			waitq_merge_fix(h, tq);
		}
	}
	assert(i == m);
}

void waitq_tenant_rekey(struct waitq *q, const struct request *r, int64_t now)
{
	if (q->kind == WAITQ_TENANT)
		q->tkey[r->v.tenant] = q->c.order->key(q->c.order_priv, &r->v, now);
}

/* ---- the sorting path (WAITQ_SORT, and STATIC while unsorted) ------------ */

/* Sort a[] by (key at now, arrival, id). */
static int sort_all(struct waitq *q, int64_t now)
{
	struct req_view **w = q->a + q->head;
	uint32_t n = q->n, run = 1;
	struct waitq_keyed *a;

	if (n < 2)
		return 0;
	if (SS_GROW(&q->sortbuf, &q->cap_sortbuf, 2 * n))
		return -ENOMEM;
	a = q->sortbuf;
	for (uint32_t k = 0; k < n; k++)
		a[k] = (struct waitq_keyed){ q->c.order->key(q->c.order_priv, w[k], now), w[k] };
	/* The queue was in order after the last step; usually only the
	 * requests that arrived since (at its end) are out of place:
	 * sort what follows the sorted head and merge the two. */
	while (run < n && !keyed_before(NULL, &a[run], &a[run - 1]))
		run++;
	if (run < n) {
		struct waitq_keyed *tmp = a + n;

		sort_keyed(a + run, tmp, n - run, NULL);
		sort_keyed_merge(a, run, a + run, n - run, tmp, NULL);
		for (uint32_t k = 0; k < n; k++)
			w[k] = tmp[k].v;
	}
	return 0;
}

/* Back from sorting (unsorted) to the static structure: sort by (node.key,
 * arrival, id); a sorted array is a valid heap for the rest. */
static int static_rebuild(struct waitq *q, int64_t now)
{
	uint32_t n = q->n, P = n < q->c.len ? n : q->c.len;
	struct req_view **w;
	struct waitq_keyed *a;

	if (q->head) {
		memmove(q->a, q->a + q->head, sizeof(*q->a) * n);
		q->head = 0;
	}
	w = q->a;
	if (SS_GROW(&q->sortbuf, &q->cap_sortbuf, 2 * n) ||
	    waitq_keyheap_reserve(&q->kh, n - P))
		return -ENOMEM;
	a = q->sortbuf;
	for (uint32_t k = 0; k < n; k++) {
		req(w[k])->wq.key = static_key(q, req(w[k]), now);
		a[k] = (struct waitq_keyed){ req(w[k])->wq.key, w[k] };
	}
	sort_keyed(a, a + n, n, NULL);
	q->kh.n = 0;
	for (uint32_t k = 0; k < n; k++) {
		struct request *r = req(a[k].v);

		w[k] = &r->v;
		r->wq.pos = k;
		r->wq.hpos = SS_HEAP_NONE;
		if (k >= P)
			waitq_keyheap_append(&q->kh, r);
	}
	waitq_keyheap_build(&q->kh);   /* in order already: moves nothing */
	q->prefix = P;
	q->unsorted = false;
	return 0;
}

/* Whether a and b have the same key at every now: the same key at arrival
 * (bit for bit) and the same arrival time (order_ops.key_aging: the key is
 * a function of those and now). */
static bool same_inputs(const struct waitq *q, const struct request *a, const struct request *b)
{
	double ka, kb;

	if (a->v.arrival_ns != b->v.arrival_ns)
		return false;
	ka = q->c.order->key(q->c.order_priv, &a->v, a->v.arrival_ns);
	kb = q->c.order->key(q->c.order_priv, &b->v, b->v.arrival_ns);
	return memcmp(&ka, &kb, sizeof(ka)) == 0;
}

static bool key_at_most(const void *arg, const struct request *r)
{
	return r->wq.key <= *(const double *)arg;
}

/* Under an aging order (rate > 0): does the head, a[0 .. prefix) in
 * node.key order, equal the first prefix requests by (key at now,
 * arrival, id), the sorting path's order?
 *
 * In exact arithmetic key(now) = node.key - rate * now_s for every
 * request, so the orders agree.  In floating point node.key and key(now)
 * are each within eps = 6u (|key at arrival| + rate * now_s) of their
 * exact values (u = 2^-53; at most 5 roundings each: order_ops.key_aging),
 * so a request whose node.key exceeds another's by more than delta = 4 eps
 * has the larger key at now too; two requests with the same inputs have
 * the same key at every now, so arrival and id order them both ways.  If
 * each pair of consecutive head entries is apart by more than delta or
 * has the same inputs, and so is every heap entry within delta of the
 * head's last, the head is in the sorting path's order and nothing else
 * belongs in it (by transitivity for pairs further apart).  Otherwise
 * (near-ties, or keys too large for the bound) false, and the queue sorts
 * like WAITQ_SORT (unsorted) for the next backoff schedules. */
static int aging_check(struct waitq *q, int64_t now, bool *ok_out)
{
	struct req_view *const *w = q->a;
	uint32_t P = q->prefix;
	/* 32u > 24u covers the rounding of delta itself; DBL_MIN covers
	 * products that underflow */
	double delta = 32 * DBL_EPSILON / 2 * (q->bmax + q->rate * ((double)now * 1e-9)) +
		       8 * DBL_MIN;
	bool ok = delta < DBL_MAX / 4;

	for (uint32_t k = 1; ok && k < P; k++) {
		const struct request *a = req(w[k - 1]), *b = req(w[k]);

		ok = b->wq.key - a->wq.key > delta || same_inputs(q, a, b);
	}
	if (ok && P > 0 && q->kh.n > 0) {
		const struct request *last = req(w[P - 1]);
		double lim = last->wq.key + delta;
		uint32_t m;

		if (SS_GROW(&q->xbuf, &q->cap_xbuf, q->kh.n))
			return -ENOMEM;
		m = waitq_keyheap_walk(&q->kh, key_at_most, &lim, q->xbuf);
		for (uint32_t k = 0; ok && k < m; k++)
			ok = same_inputs(q, q->xbuf[k], last);
	}
	if (!ok) {
		/* sort like WAITQ_SORT, for 1, 2, 4, ... 1024 steps while the
		 * near-ties last (rebuilding costs O(n log n)); the heap is
		 * given up until then */
		q->unsorted = true;
		q->backoff = q->backoff ? (q->backoff < 512 ? 2 * q->backoff : 1024) : 1;
		q->retry = q->backoff - 1;
		waitq_keyheap_clear(&q->kh);
	}
	*ok_out = ok;
	return 0;
}

/* ---- expiry ---------------------------------------------------------------
 *
 * The waiting requests that may expire -- never scheduled and never
 * preempted, fixed while they wait -- are indexed by a heap on their
 * deadline (admission_ops.deadline, computed when they join), each at
 * node.xpos, so that a step finds the k due ones by a walk of the heap
 * pruned below now (O(k)) and leaves the rest alone; one that leaves the
 * queue (scheduled or dropped) leaves the heap in O(log n).  A policy
 * without a deadline gives INT64_MIN: every request is due at every step,
 * the O(n) scan expiry has always cost.
 *
 * The due requests that expire are dropped in the order the sorting
 * path's scan of a[] meets them (which decides, with the prefix cache,
 * whose looked-up blocks are given back first):
 *   FIFO or SORT (or STATIC while unsorted): a[] in place, so a scan from
 *     its front to the last of them (its O(position) is small where it
 *     matters: under fcfs the expired are the oldest, near the front);
 *   STATIC or TENANT: as the sorting path would have held them, i.e.
 *     first those that were waiting when the queue was last put in order
 *     (jseq < prep_jseq), in that order (the keys at that time, prep_now:
 *     due_before), then those that joined since, in the order they joined
 *     (node.jseq).
 *
 * Rejected alternatives: keeping the scan but stopping at the first request
 * not yet due (the queue is in order of its key, not of the deadline); a
 * sorted list of deadlines (O(n) per join when deadlines arrive out of
 * order, as they may with per-request deadlines); removing stale entries
 * lazily when they surface (a request struct is reused once it retires). */

/* Whether due request a is met before b by the sorting path's scan under
 * STATIC or TENANT: see "expiry" above.  The sorting path sorted by the
 * key at its last sort (prep_now): a static key is the same at every now;
 * an aging key is computed at that now, as the sort did, bit for bit; a
 * tenant's key is the one it had then (tkey_prep). */
static inline bool due_before(const void *ctx, struct request *const *pa,
			      struct request *const *pb)
{
	const struct waitq *q = ctx;
	const struct request *a = *pa, *b = *pb;
	bool a_old = a->wq.jseq < q->prep_jseq, b_old = b->wq.jseq < q->prep_jseq;
	double ka, kb;

	if (a_old != b_old)
		return a_old;
	if (!a_old)
		return a->wq.jseq < b->wq.jseq;
	if (q->kind == WAITQ_TENANT) {
		ka = q->tkey_prep[a->v.tenant];
		kb = q->tkey_prep[b->v.tenant];
	} else if (q->rate == 0) {
		ka = a->wq.key;
		kb = b->wq.key;
	} else {
		ka = q->c.order->key(q->c.order_priv, &a->v, q->prep_now);
		kb = q->c.order->key(q->c.order_priv, &b->v, q->prep_now);
	}
	if (ka != kb)
		return ka < kb;
	return arr_before(a, b);
}

SS_SORT_DEFINE(sort_due, struct request *, due_before);

static bool due_by(const void *arg, const struct request *r)
{
	return r->wq.deadline <= *(const int64_t *)arg;
}

int waitq_expire(struct waitq *q, int64_t now, struct request ***out, uint32_t *n_out)
{
	struct request **x;
	uint32_t n, m = 0;

	*n_out = 0;
	if (q->xh.n == 0 || waitq_xheap_top(&q->xh)->wq.deadline > now)
		return 0;
	if (SS_GROW(&q->xbuf, &q->cap_xbuf, 2 * q->xh.n))
		return -ENOMEM;
	x = q->xbuf;
	n = waitq_xheap_walk(&q->xh, due_by, &now, x);
	for (uint32_t k = 0; k < n; k++) {
		const char *reason = NULL;

		if (q->c.expire(q->c.expire_priv, &x[k]->v, now, &reason)) {
			x[k]->reject_reason = reason ? reason : "expired in the queue";
			x[k]->wq.mark |= MK_EXPIRE;
			x[m++] = x[k];
		}
	}
	if (m == 0)
		return 0;
	for (uint32_t k = 0; k < m; k++)
		waitq_xheap_remove(&q->xh, x[k]);
	if (q->kind == WAITQ_TENANT || static_on(q)) {
		sort_due(x, x + m, m, q);
		if (q->kind == WAITQ_TENANT)
			for (uint32_t k = 0; k < m; k++)
				tenant_remove(q, x[k]);
		else
			static_take(q, x, m, MK_EXPIRE);
		for (uint32_t k = 0; k < m; k++)
			x[k]->wq.mark &= ~MK_EXPIRE;
	} else {
		/* a[] from its front to the last of them, then close the gaps
		 * by moving what is before them */
		struct req_view **w = q->a + q->head;
		uint32_t found = 0, end = 0, wr;

		while (found < m) {
			struct request *r = req(w[end++]);

			if (r->wq.mark & MK_EXPIRE)
				x[found++] = r;
		}
		wr = end;
		for (uint32_t rd = end; rd-- > 0;) {
			struct request *r = req(w[rd]);

			if (r->wq.mark & MK_EXPIRE)
				r->wq.mark &= ~MK_EXPIRE;
			else
				w[--wr] = w[rd];
		}
		assert(wr == m);
		q->head += m;
		q->n -= m;
	}
	*out = x;
	*n_out = m;
	return 0;
}

/* ---- the prefix cache's window --------------------------------------------
 *
 * The sorting path looks up the cache for the first `window` requests of
 * the sorted queue and gives back the lookups of every other waiting
 * request, in queue order, before every step.  A request holds a lookup
 * only from a window it was in, so under STATIC or TENANT the ones to give
 * back are those of the last window (moved) now outside it, in the order's
 * sequence (window_before): O(len log len) per step.  Taking or giving
 * back a lookup moves a request's computed tokens, so a static key that
 * depends on them (spf's pending tokens; the cache's contents themselves
 * enter no key) is computed again at the next waitq_order, before its
 * sort would have used it (rekey_moved): O(len log n).  No tenant key
 * reads them (order_ops). */

static int moved_add(struct waitq *q, struct request *r)
{
	if (SS_GROW(&q->moved, &q->cap_moved, q->n_moved + 1))
		return -ENOMEM;
	q->moved[q->n_moved++] = r;
	return 0;
}

/* Whether r, an entry of moved, is still waiting here (the list may name
 * requests since scheduled, dropped, or whose structs were reused). */
static bool still_waiting(const struct waitq *q, const struct request *r)
{
	return r->instance == q->c.instance && r->v.state == REQ_QUEUED;
}

/* Put the requests of the last window's lookups back in their places by
 * their keys now. */
static int rekey_moved(struct waitq *q, int64_t now)
{
	struct request **x;
	uint32_t m = 0;

	if (q->n_moved == 0)
		return 0;
	if (SS_GROW(&q->xbuf, &q->cap_xbuf, q->n_moved))
		return -ENOMEM;
	x = q->xbuf;
	for (uint32_t k = 0; k < q->n_moved; k++) {
		struct request *r = q->moved[k];
		double key;

		if (!still_waiting(q, r) || (r->wq.mark & MK_ONCE))
			continue;
		key = static_key(q, r, now);
		if (memcmp(&key, &r->wq.key, sizeof(key)) == 0)
			continue;
		r->wq.mark |= MK_ONCE;   /* taken out once */
		x[m++] = r;
	}
	if (m == 0)
		return 0;
	static_take(q, x, m, MK_ONCE);
	for (uint32_t k = 0; k < m; k++) {
		x[k]->wq.mark &= ~MK_ONCE;
		if (static_insert(q, x[k], now))
			return -ENOMEM;
	}
	return 0;
}

/* Whether a precedes b in the order the sorting path put the queue in at
 * now: the keys now (an aging key computed at now, as its sort does; a
 * tenant's current key), then arrival, then id. */
static bool window_before(const struct waitq *q, const struct request *a,
			  const struct request *b, int64_t now)
{
	double ka, kb;

	if (q->kind == WAITQ_TENANT)
		return tq_before(q, (uint32_t)a->v.tenant, a, (uint32_t)b->v.tenant, b);
	if (q->rate == 0)
		return key_before(NULL, a, b);
	ka = q->c.order->key(q->c.order_priv, &a->v, now);
	kb = q->c.order->key(q->c.order_priv, &b->v, now);
	if (ka != kb)
		return ka < kb;
	return arr_before(a, b);
}

int waitq_window_done(struct waitq *q, uint32_t window, int64_t now)
{
	struct req_view **w = q->a + q->head;
	struct request **x;
	uint32_t m = 0;

	if (!q->c.unpin)
		return 0;
	if (!static_on(q) && q->kind != WAITQ_TENANT) {
		if (q->kind == WAITQ_FIFO)
			return 0;
		/* the sorting path: everything after the window lets go */
		for (uint32_t k = window; k < q->n; k++)
			q->c.unpin(q->c.unpin_ctx, req(w[k]));
		/* an aging order sorting for a while (unsorted): its window,
		 * for when the structure is back */
		q->n_moved = 0;
		for (uint32_t k = 0; q->kind == WAITQ_STATIC && k < window; k++)
			if (moved_add(q, req(w[k])))
				return -ENOMEM;
		return 0;
	}
	assert(q->head == 0 && (q->kind == WAITQ_TENANT || window <= q->prefix));
	if (SS_GROW(&q->xbuf, &q->cap_xbuf, q->n_moved))
		return -ENOMEM;
	x = q->xbuf;
	for (uint32_t k = 0; k < window; k++)
		req(w[k])->wq.mark |= MK_ONCE;
	/* the last window's requests still waiting outside this one, in
	 * the order's sequence (an insertion sort: a few, nearly in order) */
	for (uint32_t k = 0; k < q->n_moved; k++) {
		struct request *r = q->moved[k];

		if (still_waiting(q, r) && !(r->wq.mark & MK_ONCE)) {
			uint32_t j = m++;

			r->wq.mark |= MK_ONCE;   /* once */
			while (j > 0 && window_before(q, r, x[j - 1], now)) {
				x[j] = x[j - 1];
				j--;
			}
			x[j] = r;
		}
	}
	q->n_moved = 0;
	for (uint32_t k = 0; k < m; k++) {
		x[k]->wq.mark &= ~MK_ONCE;
		if (q->c.unpin(q->c.unpin_ctx, x[k]) && moved_add(q, x[k]))
			return -ENOMEM;
	}
	for (uint32_t k = 0; k < window; k++) {
		req(w[k])->wq.mark &= ~MK_ONCE;
		if (moved_add(q, req(w[k])))
			return -ENOMEM;
	}
	return 0;
}

int waitq_unpin_behind_head(struct waitq *q)
{
	struct req_view **w = q->a + q->head;
	int any = 0;

	if (!q->c.unpin)
		return 0;
	for (uint32_t k = 1; k < q->n; k++) {
		struct request *r = req(w[k]);

		if (q->c.unpin(q->c.unpin_ctx, r)) {
			any = 1;
			if (static_on(q) && moved_add(q, r))
				return -ENOMEM;
		}
	}
	return any;
}

/* ---- the queue ------------------------------------------------------------ */

int waitq_init(struct waitq *q, const struct waitq_config *c)
{
	const struct order_ops *o = c->order;

	memset(q, 0, sizeof(*q));
	q->fseq_front = -1;
	q->c = *c;
	if (q->c.len == 0)
		q->c.len = 1;
	waitq_keyheap_init(&q->kh, NULL);
	waitq_xheap_init(&q->xh, NULL);
	waitq_merge_init(&q->merge, q);
	q->kind = o->key ? WAITQ_SORT : WAITQ_FIFO;
	/* Static keys: kept ordered incrementally, with the prefix cache
	 * too (a key that moves with a request's own lookup, spf, is taken
	 * again after it: rekey_moved); aging orders (priority:aging) by
	 * their static key, checking the rounding margin at every order. */
	if (o->key && o->key_static(c->order_priv)) {
		q->kind = WAITQ_STATIC;
	} else if (o->key) {
		double rate = o->key_aging(c->order_priv);

		if (rate > 0 && rate < DBL_MAX) {
			q->kind = WAITQ_STATIC;
			q->rate = rate;
		}
	}
	if (q->kind == WAITQ_SORT && o->key_tenant(c->order_priv) && c->n_tenants > 0) {
		q->kind = WAITQ_TENANT;
		q->tq = calloc(c->n_tenants, sizeof(*q->tq));
		q->tkey = calloc(c->n_tenants, sizeof(*q->tkey));
		q->tkey_prep = calloc(c->n_tenants, sizeof(*q->tkey_prep));
		q->t_act = calloc(c->n_tenants, sizeof(*q->t_act));
		if (!q->tq || !q->tkey || !q->tkey_prep || !q->t_act ||
		    waitq_merge_reserve(&q->merge, c->n_tenants))
			return -ENOMEM;
		for (uint32_t t = 0; t < c->n_tenants; t++)
			q->tq[t].t = t;
	}
	return 0;
}

void waitq_release(struct waitq *q)
{
	if (!q)
		return;
	free(q->a);
	waitq_keyheap_release(&q->kh);
	waitq_xheap_release(&q->xh);
	waitq_merge_release(&q->merge);
	free(q->moved);
	if (q->tq)
		for (uint32_t t = 0; t < q->c.n_tenants; t++)
			free(q->tq[t].a);
	free(q->tq);
	free(q->tkey);
	free(q->tkey_prep);
	free(q->t_act);
	free(q->sortbuf);
	free(q->xbuf);
	free(q->take);
	memset(q, 0, sizeof(*q));
}

void waitq_use_sorting(struct waitq *q)
{
	assert(q->n == 0);
	if (q->c.order->key)
		q->kind = WAITQ_SORT;
	q->rate = 0;
}

uint32_t waitq_ordered(const struct waitq *q)
{
	switch (q->kind) {
	case WAITQ_STATIC:
		/* while unsorted, the head the structure last had (the
		 * whole queue is sorted then, but the head is what the
		 * batch policy was shown), never past the queue's end */
		return q->prefix < q->n ? q->prefix : q->n;
	case WAITQ_TENANT:
		return q->n < q->c.len ? q->n : q->c.len;
	default:
		return q->n;
	}
}

int waitq_push(struct waitq *q, struct request *r, int64_t deadline_ns, int64_t now)
{
	r->wq.jseq = q->jseq++;
	r->wq.mark = 0;
	r->wq.hpos = r->wq.xpos = SS_HEAP_NONE;
	if (deadline_ns != WAITQ_NEVER) {
		r->wq.deadline = deadline_ns;
		if (waitq_xheap_push(&q->xh, r))
			return -ENOMEM;
	}
	if (q->kind == WAITQ_TENANT)
		return tenant_insert(q, r, now);
	if (static_on(q))
		return static_insert(q, r, now);
	r->wq.fseq = q->fseq_back++;
	return append(q, &r->v);
}

int waitq_push_front(struct waitq *q, struct request *r, int64_t now)
{
	if (q->kind == WAITQ_TENANT)
		return tenant_insert(q, r, now);
	if (static_on(q))
		return static_insert(q, r, now);
	r->wq.fseq = q->fseq_front--;
	return prepend(q, &r->v);
}

void waitq_remove(struct waitq *q, struct request *r)
{
	if (waitq_xheap_contains(&q->xh, r))
		waitq_xheap_remove(&q->xh, r);
	if (q->kind == WAITQ_TENANT) {
		tenant_remove(q, r);
	} else if (static_on(q)) {
		struct request *x[1] = { r };

		r->wq.mark |= MK_ONCE;
		static_take(q, x, 1, MK_ONCE);
		r->wq.mark &= ~MK_ONCE;
	} else {
		r->wq.mark |= MK_TAKE;
		array_take(q, 1, MK_TAKE);
	}
}

int waitq_mark(struct waitq *q, struct request *r)
{
	if (waitq_xheap_contains(&q->xh, r))
		waitq_xheap_remove(&q->xh, r);
	if (SS_GROW(&q->take, &q->cap_take, q->n_take + 1))
		return -ENOMEM;
	q->take[q->n_take++] = r;
	r->wq.mark |= MK_TAKE;
	return 0;
}

void waitq_take_marked(struct waitq *q)
{
	uint32_t n = q->n_take;

	q->n_take = 0;
	if (n == 0)
		return;
	if (q->kind == WAITQ_TENANT) {
		for (uint32_t k = 0; k < n; k++) {
			q->take[k]->wq.mark &= ~MK_TAKE;
			tenant_remove(q, q->take[k]);
		}
	} else if (static_on(q)) {
		static_take_prefix(q, n, MK_TAKE);
	} else if (q->kind == WAITQ_FIFO) {
		fifo_take(q, q->take, n, MK_TAKE);
	} else {
		array_take(q, n, MK_TAKE);
	}
}

int waitq_order(struct waitq *q, int64_t now)
{
	bool ok;

	if (q->c.unpin && static_on(q) && rekey_moved(q, now))
		return -ENOMEM;
	/* what joins from now on joins after this ordering (waitq_expire) */
	q->prep_jseq = q->jseq;
	q->prep_now = now;
	if (q->kind == WAITQ_TENANT && q->c.expire)
		for (uint32_t k = 0; k < q->n_t_act; k++)
			q->tkey_prep[q->t_act[k]] = q->tkey[q->t_act[k]];
	switch (q->kind) {
	case WAITQ_TENANT:
		tenant_merge(q);
		return 0;
	case WAITQ_SORT:
		return sort_all(q, now);
	case WAITQ_STATIC:
		if (q->rate == 0)
			return 0;
		if (q->unsorted && q->retry > 0) {
			q->retry--;
			return sort_all(q, now);
		}
		if (q->unsorted && static_rebuild(q, now))
			return -ENOMEM;
		if (aging_check(q, now, &ok))
			return -ENOMEM;
		if (!ok)
			return sort_all(q, now);
		if (!q->unsorted && q->retry == 0)
			q->backoff = 0;
		return 0;
	default:
		return 0;
	}
}
