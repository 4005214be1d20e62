/* servesim — instance scheduling: from the waiting queue to a step and
 * back (see engine-int.h).
 *
 * Owns, per instance: the waiting queue wait[wait_head .. wait_head +
 * n_wait) with room before the head so preempted requests go back to the
 * front in O(1) (under a static-key order: a sorted head and a heap; under
 * a tenant-key order: per-tenant queues merged into its head); per tenant
 * its requests waiting or running (inst_view.tenant_active); the
 * running set in admission order; the batch policy's
 * plan; the step in flight (fl_*); swap and energy accounting of a step.
 * on_schedule runs prepare_queues (admission expiry, the queue order, the
 * victim order of the running set, prefix-cache lookups for the head of the
 * queue), asks the batch policy for a plan, applies its preemptions and
 * starts the step (under multi-step scheduling a decode step runs as a
 * burst of steps: see "bursts"); on_step_done emits tokens and finishes
 * requests or hands prefilled ones to their decode instance.
 *
 * Invariants: a request is in exactly one of waiting, running, in flight
 * between instances, finished or rejected; RF_PICKED and RF_REMOVE are
 * clear between events; an idle instance with requests running starts a
 * step, and one with only requests waiting starts one or rejects its head
 * request, unless KV leaving it for decode instances will free blocks; so
 * no instance hangs.  A decode instance whose head request must recompute
 * more than fits beside the received KV waiting behind it offers that KV's
 * requests to the policy first (offer_kv_first), so none livelocks either.
 * Cost per schedule: under an order whose keys are fixed while requests
 * wait (sjf, spf, priority without aging: engine.q_static), nothing per
 * waiting request: a request joining the queue costs O(log W) or O(q_len),
 * one leaving its sorted head O(log W) (see "waiting queue of a static-key
 * order" below).  Under an order with one key per tenant (vtc:
 * engine.q_tenant) O(q_len + A log A) for A tenants waiting, a join or
 * leave a binary search and a memmove within its tenant's queue (see
 * "waiting queue of a tenant-key order").  Under priority aging
 * (engine.q_rate) as a static-key order plus O(q_len) per step for the
 * rounding check (q_aging_check), or the fallback's cost while near-ties
 * sit at the head.  A queue timeout (admission_ops.expire) adds
 * O(k log W) for the k requests due to expire, found by deadline (see
 * "expiry"); under fcfs or the sorting path, plus the distance from the
 * queue's front to the last of them.  With the prefix cache a static-key
 * or tenant-key order adds O(q_len log W) for the lookups it gives back and
 * the keys they move (see "the prefix cache under an incremental order").
 * The running set is insertion-sorted (nearly sorted between steps); a
 * step is O(items).
 */
#include "engine-int.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sstime.h"

static int wait_append(struct instance *in, struct req_view *v)
{
	if (in->wait_head + in->n_wait == in->cap_wait) {
		if (in->wait_head > in->cap_wait / 2) {
			memmove(in->wait, in->wait + in->wait_head, sizeof(*in->wait) * in->n_wait);
			in->wait_head = 0;
		} else if (eng_grow((void **)&in->wait, &in->cap_wait, in->cap_wait + 1,
				sizeof(*in->wait))) {
			return -ENOMEM;
		}
	}
	in->wait[in->wait_head + in->n_wait++] = v;
	return 0;
}

/* ---- waiting queue of a static-key order (engine.q_static) ---------------
 *
 * With an order whose keys do not change while a request waits (sjf, spf
 * without the prefix cache, priority without aging: order_ops.key_static),
 * the waiting queue is kept as
 *
 *     wait[0 .. q_prefix)                 the q_prefix smallest requests in
 *                                         the order, sorted;
 *     wait[q_prefix .. n_wait)            the others, unordered, indexed by
 *                                         the binary min-heap qheap;
 *
 * with q_prefix == min(n_wait, q_len), q_len the most waiting requests the
 * batch policy reads (its max_items).  The order is the fallback path's:
 * key, then arrival time, then id; keys are computed once, when a request
 * joins the queue (request.qkey).  A join costs O(log n) (heap) or O(q_len)
 * (insertion into the sorted prefix, a memmove of at most q_len pointers);
 * a request leaving the prefix is replaced by the heap's minimum in
 * O(log n).  Nothing is done per step for requests that did not change.
 *
 * Rejected alternatives: sorting the tail and merging before every step
 * (the fallback path: O(n) per step, quadratic under overload); one sorted
 * array with binary insertion (a memmove of O(n) pointers per arrival,
 * quadratic again); a heap alone (the policies read the head of the queue
 * in order as an array, and popping and re-pushing max_items entries every
 * step costs O(max_items log n) per step where this costs nothing).
 * A key that moves with a request's own prefix-cache lookup (spf's pending
 * tokens) is taken again after the lookup (pc_rekey); vtc's counters have
 * the tenant-key path below; priority aging uses this structure by its
 * static key (q_key, q_aging_check).  A queue timeout takes expired
 * requests from anywhere in it: from the heap by request.hpos (expire_due). */

/* The static structure is in use on in (not while an aging order sorts
 * in->wait like the fallback until the next prepare_queues: q_unsorted). */
static inline bool q_on(const struct engine *e, const struct instance *in)
{
	return e->q_static && !in->q_unsorted;
}

/* request.qkey: the key itself, or under an aging order (engine.q_rate >
 * 0) the static key base + rate * arrival_s, base = key at arrival; the
 * largest |base| is kept for the rounding margin (q_aging_check). */
static double q_key(struct engine *e, struct instance *in, const struct request *r)
{
	double base;

	if (e->q_rate == 0)
		return e->oops->key(in->order_priv, &r->v, e->now);
	base = e->oops->key(in->order_priv, &r->v, r->v.arrival_ns);
	if (fabs(base) > in->q_bmax || base != base)
		in->q_bmax = base == base ? fabs(base) : INFINITY;
	return base + e->q_rate * ((double)r->v.arrival_ns * 1e-9);
}

static bool q_before(const struct request *a, const struct request *b)
{
	if (a->qkey != b->qkey)
		return a->qkey < b->qkey;
	if (a->v.arrival_ns != b->v.arrival_ns)
		return a->v.arrival_ns < b->v.arrival_ns;
	return a->v.id < b->v.id;
}

static inline void qheap_set(struct instance *in, uint32_t k, struct request *r)
{
	in->qheap[k] = r;
	r->hpos = k;
}

/* Put x at k or above it, moving larger parents down. */
static void qheap_up(struct instance *in, uint32_t k, struct request *x)
{
	while (k > 0) {
		uint32_t up = (k - 1) / 2;

		if (!q_before(x, in->qheap[up]))
			break;
		qheap_set(in, k, in->qheap[up]);
		k = up;
	}
	qheap_set(in, k, x);
}

/* Put x at k or below it, moving smaller children up. */
static void qheap_down(struct instance *in, uint32_t k, struct request *x)
{
	uint32_t n = in->n_qheap;

	for (;;) {
		uint32_t c = 2 * k + 1;

		if (c >= n)
			break;
		if (c + 1 < n && q_before(in->qheap[c + 1], in->qheap[c]))
			c++;
		if (!q_before(in->qheap[c], x))
			break;
		qheap_set(in, k, in->qheap[c]);
		k = c;
	}
	qheap_set(in, k, x);
}

static int qheap_push(struct instance *in, struct request *r)
{
	if (eng_grow((void **)&in->qheap, &in->cap_qheap, in->n_qheap + 1, sizeof(*in->qheap)))
		return -ENOMEM;
	r->flags |= RF_QHEAP;
	qheap_up(in, in->n_qheap++, r);
	return 0;
}

static struct request *qheap_pop(struct instance *in)
{
	struct request *top = in->qheap[0], *last = in->qheap[--in->n_qheap];

	top->flags &= ~RF_QHEAP;
	if (in->n_qheap > 0)
		qheap_down(in, 0, last);
	return top;
}

/* Take r (RF_QHEAP) out of the heap, in O(log n). */
static void qheap_remove(struct instance *in, struct request *r)
{
	uint32_t k = r->hpos;
	struct request *last = in->qheap[--in->n_qheap];

	assert((r->flags & RF_QHEAP) && in->qheap[k] == r);
	r->flags &= ~RF_QHEAP;
	if (last == r)
		return;
	if (k > 0 && q_before(last, in->qheap[(k - 1) / 2]))
		qheap_up(in, k, last);
	else
		qheap_down(in, k, last);
}

/* Put r (joining the queue) in its place: the sorted prefix or the heap. */
static int q_insert(struct engine *e, struct instance *in, struct request *r)
{
	struct req_view **w = in->wait;
	uint32_t P = in->q_prefix, lo = 0, hi = P;
	struct request *out = NULL;

	assert(in->wait_head == 0);
	r->qkey = q_key(e, in, r);
	if (wait_append(in, &r->v))
		return -ENOMEM;
	w = in->wait;
	in->n_wait--;   /* appended at n_wait: placed below */
	if (P == in->q_len && !q_before(r, request_of(w[P - 1]))) {
		out = r;          /* not among the smallest: to the heap */
	} else {
		/* after every request it does not go before (upper bound) */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (q_before(r, request_of(w[mid])))
				hi = mid;
			else
				lo = mid + 1;
		}
		if (P == in->q_len) {
			out = request_of(w[P - 1]);
			P--;
		} else {
			/* q_prefix < q_len: the heap is empty, w[P] is free */
			assert(in->n_qheap == 0);
		}
		memmove(w + lo + 1, w + lo, sizeof(*w) * (P - lo));
		w[lo] = &r->v;
		P++;
	}
	in->q_prefix = P;
	if (out) {
		out->qpos = P + in->n_qheap;
		w[out->qpos] = &out->v;
		if (qheap_push(in, out))
			return -ENOMEM;
	}
	in->n_wait = in->q_prefix + in->n_qheap;
	return 0;
}

/* The prefix lost requests and now holds `kept` at its front: refill it
 * from the heap, moving the rest's last entry into each hole the heap's
 * minimum leaves. */
static void q_refill(struct instance *in, uint32_t kept)
{
	struct req_view **w = in->wait;
	uint32_t rest = in->q_prefix;   /* the rest starts here */

	while (kept < in->q_len && in->n_qheap > 0) {
		struct request *m = qheap_pop(in);
		uint32_t last = rest + in->n_qheap;   /* the rest's last entry, after the pop */

		w[kept++] = &m->v;
		if (m->qpos != last) {
			w[m->qpos] = w[last];
			request_of(w[m->qpos])->qpos = m->qpos;
		}
	}
	/* The heap is empty or the prefix is full again (while the heap has
	 * entries, q_prefix == q_len): either way the queue is contiguous. */
	assert(in->n_qheap == 0 || kept == rest);
	in->q_prefix = kept;
	in->n_wait = in->q_prefix + in->n_qheap;
}

/* Take the requests flagged RF_PICKED out of the sorted prefix (a plan
 * takes only from the first q_len waiting requests). */
static void q_remove_picked(struct instance *in, uint32_t n_picked)
{
	struct req_view **w = in->wait;
	uint32_t wr = 0, found = 0;

	for (uint32_t rd = 0; rd < in->q_prefix; rd++) {
		struct request *r = request_of(w[rd]);

		if (found < n_picked && (r->flags & RF_PICKED)) {
			r->flags &= ~RF_PICKED;
			found++;
			continue;
		}
		w[wr++] = w[rd];
	}
	assert(found == n_picked);
	q_refill(in, wr);
}


/* ---- waiting queue of a tenant-key order (engine.q_tenant) ---------------
 *
 * With an order whose key is one per tenant, changed only by enqueued()
 * and served() (vtc: order_ops.key_tenant), the fallback's order -- key,
 * then arrival time, then id -- is a merge of the tenants' waiting
 * requests, each tenant's in (arrival, id) order, by (tenant key, arrival,
 * id).  So each tenant keeps its waiting requests sorted (tq[t]: a join
 * is a binary search and a memmove towards the nearer end, in practice at
 * the back for an arrival and near the front for a preempted request), its
 * key is re-evaluated after each enqueued()/served() call for it
 * (eng_tenant_rekey: O(1)), and before a step the first q_len requests of
 * the merge are swapped to the front of wait[] (prepare_tenant_queue).  The
 * rest of wait[] holds the other waiting requests unordered, each at
 * request.qpos.  Cost per step: O(q_len + A log A) for A tenants with
 * requests waiting, independent of the queue's length; a run of one
 * tenant's requests is taken without heap operations (and without
 * comparisons when its key is below every other tenant's).
 *
 * Rejected alternative: a heap of tenants kept across steps (the merge
 * still has to lay out q_len requests for the batch policy each step, and
 * every step changes the keys of the tenants it serves). */

static bool tq_before(const struct instance *in, uint32_t ta, const struct request *a,
		      uint32_t tb, const struct request *b)
{
	if (in->tkey[ta] != in->tkey[tb])
		return in->tkey[ta] < in->tkey[tb];
	if (a->v.arrival_ns != b->v.arrival_ns)
		return a->v.arrival_ns < b->v.arrival_ns;
	return a->v.id < b->v.id;
}

/* Within a tenant: (arrival, id). */
static bool arr_before(const struct request *a, const struct request *b)
{
	if (a->v.arrival_ns != b->v.arrival_ns)
		return a->v.arrival_ns < b->v.arrival_ns;
	return a->v.id < b->v.id;
}

void eng_tenant_rekey(struct engine *e, struct instance *in, const struct request *r)
{
	if (e->q_tenant)
		in->tkey[r->v.tenant] = e->oops->key(in->order_priv, &r->v, e->now);
}

static int tq_insert(struct engine *e, struct instance *in, struct request *r)
{
	uint32_t t = (uint32_t)r->v.tenant, lo = 0, hi;
	struct tqueue *q = &in->tq[t];

	assert(in->wait_head == 0);
	if (wait_append(in, &r->v))
		return -ENOMEM;
	r->qpos = in->n_wait - 1;
	if (q->n == 0) {
		/* re-evaluated here too: the key may have moved while the
		 * tenant had nothing waiting (served() of its running requests) */
		in->tkey[t] = e->oops->key(in->order_priv, &r->v, e->now);
		q->apos = in->n_tq_act;
		in->tq_act[in->n_tq_act++] = t;
		q->head = q->cap / 2;
	}
	/* upper bound: after every request it does not go before */
	hi = q->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (arr_before(r, q->a[q->head + mid]))
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo < q->n / 2 && q->head > 0) {
		memmove(q->a + q->head - 1, q->a + q->head, sizeof(*q->a) * lo);
		q->head--;
	} else {
		if (q->head + q->n == q->cap) {
			/* recentre, growing to twice the entries plus slack */
			uint32_t need = 2 * q->n + 16, nh;

			if (q->cap < need) {
				struct request **a = realloc(q->a, sizeof(*a) * need);

				if (!a)
					return -ENOMEM;
				q->a = a;
				q->cap = need;
			}
			nh = (q->cap - q->n) / 2;
			memmove(q->a + nh, q->a + q->head, sizeof(*q->a) * q->n);
			q->head = nh;
		}
		memmove(q->a + q->head + lo + 1, q->a + q->head + lo, sizeof(*q->a) * (q->n - lo));
	}
	q->a[q->head + lo] = r;
	q->n++;
	return 0;
}

/* Take r out of its tenant's queue and out of wait[] (the last entry of
 * wait[] fills its place: the head's order holds again only after the
 * next prepare_tenant_queue). */
static void tq_remove(struct instance *in, struct request *r)
{
	uint32_t t = (uint32_t)r->v.tenant, lo = 0, hi;
	struct tqueue *q = &in->tq[t];
	struct req_view **w = in->wait;

	hi = q->n;
	while (lo < hi) {   /* lower bound: r itself */
		uint32_t mid = lo + (hi - lo) / 2;

		if (arr_before(q->a[q->head + mid], r))
			lo = mid + 1;
		else
			hi = mid;
	}
	assert(lo < q->n && q->a[q->head + lo] == r);
	if (lo < q->n / 2) {
		memmove(q->a + q->head + 1, q->a + q->head, sizeof(*q->a) * lo);
		q->head++;
	} else {
		memmove(q->a + q->head + lo, q->a + q->head + lo + 1, sizeof(*q->a) * (q->n - lo - 1));
	}
	if (--q->n == 0) {
		uint32_t last = in->tq_act[--in->n_tq_act];

		in->tq_act[q->apos] = last;
		in->tq[last].apos = q->apos;
	}
	assert(in->wait_head == 0 && w[r->qpos] == &r->v);
	if (r->qpos != in->n_wait - 1) {
		w[r->qpos] = w[in->n_wait - 1];
		request_of(w[r->qpos])->qpos = r->qpos;
	}
	in->n_wait--;
}

static bool cur_before(const struct instance *in, const struct tq_cursor *a,
		       const struct tq_cursor *b)
{
	const struct tqueue *qa = &in->tq[a->t], *qb = &in->tq[b->t];

	return tq_before(in, a->t, qa->a[qa->head + a->k], b->t, qb->a[qb->head + b->k]);
}

static void cur_sift_down(const struct instance *in, struct tq_cursor *h, uint32_t n, uint32_t k)
{
	struct tq_cursor x = h[k];

	for (;;) {
		uint32_t c = 2 * k + 1;

		if (c >= n)
			break;
		if (c + 1 < n && cur_before(in, &h[c + 1], &h[c]))
			c++;
		if (!cur_before(in, &h[c], &x))
			break;
		h[k] = h[c];
		k = c;
	}
	h[k] = x;
}

/* Put the first min(q_len, n_wait) waiting requests in the order's
 * sequence at wait[0 ..). */
static void prepare_tenant_queue(struct instance *in)
{
	struct tq_cursor *h = in->tq_merge;
	struct req_view **w = in->wait;
	uint32_t nh = in->n_tq_act, m = in->n_wait < in->q_len ? in->n_wait : in->q_len, i = 0;

	for (uint32_t k = 0; k < nh; k++)
		h[k] = (struct tq_cursor){ in->tq_act[k], 0 };
	for (uint32_t k = nh / 2; k-- > 0;)
		cur_sift_down(in, h, nh, k);
	while (i < m) {
		struct tqueue *q = &in->tq[h[0].t];
		uint32_t rival = nh > 2 && cur_before(in, &h[2], &h[1]) ? 2 : 1;
		/* a smaller tenant key: the whole run precedes the rival's */
		bool whole = nh == 1 || in->tkey[h[0].t] < in->tkey[h[rival].t];

		do {
			struct request *r = q->a[q->head + h[0].k];

			/* lay r out at wait[i] */
			if (w[i] != &r->v) {
				uint32_t j = r->qpos;

				w[j] = w[i];
				request_of(w[j])->qpos = j;
				w[i] = &r->v;
				r->qpos = i;
			}
			i++;
		} while (++h[0].k < q->n && i < m && (whole || cur_before(in, &h[0], &h[rival])));
		if (h[0].k == q->n) {
			h[0] = h[--nh];
			if (nh == 0)
				break;
		}
		cur_sift_down(in, h, nh, 0);
	}
	assert(i == m);
}

/* ---- expiry (admission_ops.expire) ---------------------------------------
 *
 * The waiting requests that may expire -- never scheduled and never
 * preempted, fixed while they wait -- are indexed per instance by a binary
 * min-heap on their deadline (admission_ops.deadline, computed when they
 * join the queue), each at request.xpos, so that a step finds the k due
 * ones by a walk of the heap pruned below now (O(k)) and leaves the rest
 * alone; one that leaves the queue (scheduled or dropped) leaves the heap
 * in O(log n).  A policy without a deadline gives INT64_MIN: every request
 * is due at every step, the O(n) scan expiry has always cost.
 *
 * The due requests that expire are dropped in the order the fallback's
 * scan of wait[] meets them (which decides, with the prefix cache, whose
 * looked-up blocks are given back first):
 *   fallback (fcfs or a re-sorted order): wait[] in place, so a scan from
 *     its front to the last of them (its O(position) is small where it
 *     matters: under fcfs the expired are the oldest, near the front);
 *   static-key or tenant-key order: as the fallback would have held them,
 *     i.e. first those that were waiting when the queue was last put in
 *     order (jseq < instance.prep_jseq), in that order (the keys at that
 *     time, instance.prep_now: x_before), then those that joined since,
 *     in the order they joined (request.jseq).
 *
 * Rejected alternatives: keeping the scan but stopping at the first request
 * not yet due (the queue is in order of its key, not of the deadline); a
 * sorted list of deadlines (O(n) per join when deadlines arrive out of
 * order, as they may with per-request deadlines); removing stale entries
 * lazily when they surface (a request struct is reused once it retires). */

static inline void xh_set(struct instance *in, uint32_t k, struct request *r)
{
	in->xheap[k] = r;
	r->xpos = k;
}

static void xh_up(struct instance *in, uint32_t k, struct request *x)
{
	while (k > 0) {
		uint32_t up = (k - 1) / 2;

		if (in->xheap[up]->xdeadline <= x->xdeadline)
			break;
		xh_set(in, k, in->xheap[up]);
		k = up;
	}
	xh_set(in, k, x);
}

static void xh_down(struct instance *in, uint32_t k, struct request *x)
{
	uint32_t n = in->n_xheap;

	for (;;) {
		uint32_t c = 2 * k + 1;

		if (c >= n)
			break;
		if (c + 1 < n && in->xheap[c + 1]->xdeadline < in->xheap[c]->xdeadline)
			c++;
		if (in->xheap[c]->xdeadline >= x->xdeadline)
			break;
		xh_set(in, k, in->xheap[c]);
		k = c;
	}
	xh_set(in, k, x);
}

/* r joins in's queue: index it by its deadline if it may expire. */
static int xh_join(struct engine *e, struct instance *in, struct request *r)
{
	r->jseq = e->jseq++;
	if (!e->aops->expire || r->first_sched_ns >= 0 || r->v.preemptions > 0)
		return 0;
	if (eng_grow((void **)&in->xheap, &in->cap_xheap, in->n_xheap + 1, sizeof(*in->xheap)))
		return -ENOMEM;
	r->xdeadline = e->aops->deadline(e->adm_priv, &r->v);
	r->flags |= RF_XHEAP;
	xh_up(in, in->n_xheap++, r);
	return 0;
}

/* r leaves in's queue (scheduled or dropped): O(log n). */
static void xh_leave(struct instance *in, struct request *r)
{
	uint32_t k = r->xpos;
	struct request *last;

	if (!(r->flags & RF_XHEAP))
		return;
	assert(in->xheap[k] == r);
	r->flags &= ~RF_XHEAP;
	last = in->xheap[--in->n_xheap];
	if (last == r)
		return;
	if (k > 0 && last->xdeadline < in->xheap[(k - 1) / 2]->xdeadline)
		xh_up(in, k, last);
	else
		xh_down(in, k, last);
}

/* Append the entries at or below k whose deadline is <= now to out. */
static void xh_due(const struct instance *in, uint32_t k, int64_t now, struct request **out,
		   uint32_t *n)
{
	if (k >= in->n_xheap || in->xheap[k]->xdeadline > now)
		return;
	out[(*n)++] = in->xheap[k];
	xh_due(in, 2 * k + 1, now, out, n);
	xh_due(in, 2 * k + 2, now, out, n);
}

/* Append v to the waiting queue (fallback path) or put it in its place. */
int eng_wait_push_back(struct engine *e, struct instance *in, struct req_view *v)
{
	if (xh_join(e, in, request_of(v)))
		return -ENOMEM;
	in->tenant_active[v->tenant]++;
	if (e->q_tenant)
		return tq_insert(e, in, request_of(v));
	if (q_on(e, in))
		return q_insert(e, in, request_of(v));
	return wait_append(in, v);
}

static int wait_push_front(struct instance *in, struct req_view *v)
{
	if (in->wait_head == 0) {
		uint32_t gap = in->n_wait / 2 + 16;

		if (eng_grow((void **)&in->wait, &in->cap_wait, in->n_wait + gap, sizeof(*in->wait)))
			return -ENOMEM;
		memmove(in->wait + gap, in->wait, sizeof(*in->wait) * in->n_wait);
		in->wait_head = gap;
	}
	in->wait[--in->wait_head] = v;
	in->n_wait++;
	return 0;
}

/* Remove the requests flagged RF_PICKED from the waiting queue.  Plans take
 * mostly from the front, so scan only until all n_picked are found and
 * advance the head past a picked prefix without moving anything. */
static void wait_remove_picked(struct instance *in, uint32_t n_picked)
{
	struct req_view **w = in->wait + in->wait_head;
	uint32_t rd = 0, wr, found = 0;

	while (rd < in->n_wait && found < n_picked && (request_of(w[rd])->flags & RF_PICKED)) {
		request_of(w[rd])->flags &= ~RF_PICKED;
		rd++;
		found++;
	}
	in->wait_head += rd;
	in->n_wait -= rd;
	w += rd;
	if (found == n_picked)
		return;
	for (rd = 0, wr = 0; rd < in->n_wait; rd++) {
		struct request *r = request_of(w[rd]);

		if (found < n_picked && (r->flags & RF_PICKED)) {
			r->flags &= ~RF_PICKED;
			found++;
			continue;
		}
		w[wr++] = w[rd];
	}
	in->n_wait = wr;
}

static void running_compact(struct instance *in)
{
	uint32_t wr = 0;

	if (!in->n_remove)
		return;
	in->n_remove = 0;
	for (uint32_t rd = 0; rd < in->n_running; rd++) {
		struct request *r = request_of(in->running[rd]);

		if (r->flags & RF_REMOVE) {
			r->flags &= ~RF_REMOVE;
			continue;
		}
		in->running[wr++] = in->running[rd];
	}
	in->n_running = wr;
}

/* ---- steps ---------------------------------------------------------------- */

static int apply_preemptions(struct engine *e, struct instance *in, struct ss_error *err)
{
	const struct step_plan *p = &in->plan;

	for (uint32_t k = 0; k < p->n_preempt; k++) {
		struct request *r = request_of(p->preempt[k]);

		if (r->v.state != REQ_RUNNING || r->instance != (int32_t)in->idx || (r->flags & RF_REMOVE))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "batch policy %s preempted request %u which is not running on instance %u",
					    e->bops->name, r->v.id, in->idx);
		kvm_preempt(in->kv, r);   /* swapped out, or to recompute */
		r->v.state = REQ_QUEUED;
		r->v.preemptions++;
		r->flags |= RF_REMOVE;
		in->n_remove++;
		in->st->preemptions++;
	}
	running_compact(in);
	for (uint32_t k = 0; k < p->n_preempt; k++)
		if (e->q_tenant ? tq_insert(e, in, request_of(p->preempt[k]))
		    : q_on(e, in) ? q_insert(e, in, request_of(p->preempt[k]))
				  : wait_push_front(in, (struct req_view *)p->preempt[k]))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	return 0;
}

/* Split a step's energy into prefill and decode work: prefill attention
 * to prefill, decode attention to decode, every other operator (GEMMs,
 * element-wise, LM head, collectives, host) by the two phases' shares of the
 * step's tokens; power is taken as uniform over the step.  Also tracks the
 * peak step power and the power the time series shows. */
static void account_energy(struct instance *in, const struct exec_result *xr,
			   int64_t prefill_tokens, int64_t total_tokens)
{
	double dur = (double)xr->duration_ns;
	double pf_time = (double)xr->op_ns[COST_OP_ATTN_PREFILL];
	double dec_time = (double)xr->op_ns[COST_OP_ATTN_DECODE];
	double shared = dur - pf_time - dec_time;
	double pf_share = total_tokens ? (double)prefill_tokens / (double)total_tokens : 0;
	double e_pf = xr->energy_j * (pf_time + shared * pf_share) / dur;

	in->st->prefill_energy_j += e_pf;
	in->st->decode_energy_j += xr->energy_j - e_pf;
	in->step_power_w = xr->energy_j / (dur / 1e9);
	if (in->step_power_w > in->st->peak_power_w)
		in->st->peak_power_w = in->step_power_w;
}

static int launch_step(struct engine *e, struct instance *in, struct exec_step *xs,
		       int64_t prefill_tokens, struct ss_error *err);
static int pp_launch(struct engine *e, struct instance *in, struct exec_step *xs,
		     int64_t prefill_tokens, struct ss_error *err);

static int start_step(struct engine *e, struct instance *in, struct ss_error *err)
{
	const struct step_plan *p = &in->plan;
	struct exec_step xs = { .instance = (int32_t)in->idx, .start_ns = e->now };
	uint32_t n_picked = 0;
	int64_t prefill_tokens = 0;
	int rc;

	if (eng_grow((void **)&in->fl_req, &in->cap_fl_req, p->n_items, sizeof(*in->fl_req)) ||
	    eng_grow((void **)&in->fl_tokens, &in->cap_fl_tokens, p->n_items, sizeof(*in->fl_tokens)) ||
	    eng_grow((void **)&in->fl_items, &in->cap_fl_items, p->n_items, sizeof(*in->fl_items)) ||
	    eng_grow((void **)&in->fl_xreq, &in->cap_fl_xreq, p->n_items, sizeof(*in->fl_xreq)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");

	for (uint32_t k = 0; k < p->n_items; k++) {
		struct request *r = request_of(p->items[k].req);
		int32_t tokens = p->items[k].tokens;
		bool from_wait = r->v.state == REQ_QUEUED;

		if (r->instance != (int32_t)in->idx || (!from_wait && r->v.state != REQ_RUNNING) ||
		    (r->flags & (RF_PICKED | RF_INFLIGHT)) || tokens < 1 ||
		    tokens > req_pending_tokens(&r->v))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "batch policy %s planned an invalid item (request %u, %d tokens)",
					    e->bops->name, r->v.id, tokens);
		/* its KV: host hits loaded, blocks for tokens, swapped KV back */
		rc = kvm_enter(in->kv, r, tokens, from_wait);
		if (rc)
			return ss_error_set(err, rc, NULL, 0,
					    "batch policy %s planned more KV blocks than free on instance %u",
					    e->bops->name, in->idx);
		in->fl_xreq[k] = (struct exec_req){
			.block_table = r->kv.blocks,
			.n_blocks = r->v.kv_blocks,
			.emit = r->v.computed_tokens + tokens == req_total_tokens(&r->v),
		};
		{
			int32_t pf = r->v.prompt_tokens - r->v.computed_tokens;

			pf = pf < 0 ? 0 : pf > tokens ? tokens : pf;
			e->oops->served(in->order_priv, &r->v, pf, tokens - pf);
			eng_tenant_rekey(e, in, r);
		}
		if (e->next_arrival < e->n_req)
			e->tenant_service[r->v.tenant] += tokens;
		if (from_wait) {
			r->flags |= RF_PICKED;
			n_picked++;
			r->v.state = REQ_RUNNING;
			if (eng_grow((void **)&in->running, &in->cap_running, in->n_running + 1,
				 sizeof(*in->running)))
				return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			in->running[in->n_running++] = &r->v;
			if (r->first_sched_ns < 0)
				r->first_sched_ns = e->now;
			xh_leave(in, r);
			r->flags &= ~RF_QHEAP;  /* stale after a sort under aging */
		}
		in->fl_req[k] = r;
		in->fl_tokens[k] = tokens;
		in->fl_items[k] = (struct cost_item){ .tokens = tokens, .context = r->v.computed_tokens };
		xs.total_tokens += tokens;
		if (r->v.computed_tokens + tokens == req_total_tokens(&r->v))
			xs.n_emit++;
		if (tokens > 1 || r->v.generated_tokens == 0) {
			xs.n_prefill++;
			prefill_tokens += tokens;
		}
	}
	if (n_picked && e->q_tenant) {
		for (uint32_t k = 0; k < p->n_items; k++) {
			struct request *r = request_of(p->items[k].req);

			if (r->flags & RF_PICKED) {
				r->flags &= ~RF_PICKED;
				tq_remove(in, r);
			}
		}
	} else if (n_picked && q_on(e, in))
		q_remove_picked(in, n_picked);
	else if (n_picked)
		wait_remove_picked(in, n_picked);
	if (in->n_running > in->st->peak_running)
		in->st->peak_running = in->n_running;
	in->n_fl = p->n_items;
	return launch_step(e, in, &xs, prefill_tokens, err);
}

/* The step whose items are in.fl_*[0 .. n_fl), summed up in xs, priced by
 * the executor into *xr, with the KV transfers it waits for (kvm_price,
 * which then clears them). */
static int price_step(struct instance *in, const struct exec_step *xs,
		      struct exec_result *xr, struct ss_error *err)
{
	int rc;

	rc = in->pl->xops->run_step(in->pl->xpriv, xs, xr, err);
	if (rc)
		return rc;
	if (xr->duration_ns <= 0)   /* a live step can measure 0 on a coarse clock */
		return ss_error_set(err, -ERANGE, NULL, 0,
				    "the %s executor gave a step on instance %u a duration of %" PRId64
				    " ns; expected > 0",
				    in->pl->xops->name, in->idx, xr->duration_ns);
	return kvm_price(in->kv, xr, err);
}

/* Account a priced step: its energy to its requests (by their tokens in
 * it, xs's items) and to prefill and decode work, and the instance's step
 * statistics. */
static void account_step(struct instance *in, const struct exec_step *xs,
			 const struct exec_result *xr, int64_t prefill_tokens)
{
	if (xs->total_tokens == in->n_fl) {
		/* one token each (x * 1.0 is x: the same share as below) */
		double share = xr->energy_j / (double)xs->total_tokens;

		for (uint32_t k = 0; k < in->n_fl; k++)
			in->fl_req[k]->energy_j += share;
	} else {
		for (uint32_t k = 0; k < in->n_fl; k++)
			in->fl_req[k]->energy_j += xr->energy_j * (double)in->fl_tokens[k] /
						   (double)xs->total_tokens;
	}
	account_energy(in, xr, prefill_tokens, xs->total_tokens);
	in->st->steps++;
	/* A pipeline's stages (tp GPUs each) run the step's layers one after
	 * the other: its tp x pp GPUs are busy duration / pp on average, the
	 * instance's busy time (idle energy is charged on the rest). */
	in->st->busy_ns = ss_time_add_sat(in->st->busy_ns, in->pl->pp > 1 ?
					  xr->duration_ns / in->pl->pp : xr->duration_ns);
	in->st->busy_energy_j += xr->energy_j;
	in->st->out_of_grid += xr->out_of_grid;
	in->st->out_of_grid_ns += xr->out_of_grid_ns;
	for (int op = 0; op < COST_OP_COUNT; op++)
		in->st->op_ns[op] += xr->op_ns[op];
	ss_hist_add(&in->st->batch_seqs, in->n_fl);
	ss_hist_add(&in->st->batch_tokens, xs->total_tokens);
}

/* ---- bursts (multi-step scheduling) ----------------------------------------
 *
 * With a profile's scheduler_steps k > 1 (vLLM 0.6's num_scheduler_steps;
 * docs/engines.md, "Multi-step scheduling"), a decision whose step decodes
 * one token of each of its requests (no prefill tokens: vLLM gives prompt
 * runs no lookahead slots) runs that batch for k decode steps, a burst:
 *   - the decision allocates each request's KV blocks for the tokens it
 *     computes in the burst, min(k, output tokens left), as vLLM reserves
 *     k - 1 lookahead slots; when they do not all fit, the burst is the
 *     longest whose blocks fit (at least the 1 step the policy planned: a
 *     policy does not know k);
 *   - every step is priced by the executor as a decode step of the grown
 *     contexts; the engine's scheduling and input preparation are paid by
 *     the first step only, output processing (of every token of the burst)
 *     by the last only, launches by each;
 *   - a request that has emitted its last token idles in its slot until
 *     the burst ends (the batch keeps its shape, as vLLM's does): its row
 *     is priced as a decode of its last position again, and its blocks
 *     are freed at the end;
 *   - nobody is admitted, preempted or expired within a burst (no
 *     decision is made), and the burst's tokens reach the client together
 *     at its end: k - 1 gaps of 0 and one of the whole burst in each
 *     request's ITL, its TPOT as before.
 * The burst is one completion event: within it the engine has nothing to
 * decide (an arrival queues; a schedule finds the instance busy). */

/* The steps the step in flight runs for: k for a decode-only step of a
 * profile with k > 1 scheduler steps on an instance that decodes (fewer
 * when its blocks do not fit), else 1.  O(items), O(items x k) when the
 * burst is shortened. */
static uint32_t burst_len(const struct engine *e, const struct instance *in,
			  const struct exec_step *xs)
{
	uint32_t k = engine_profile_burst(e->cfg.engine);
	int32_t bs = e->cfg.block_size;

	/* every item decodes its one pending token (a 1-token chunk of a
	 * recompute has tokens 1 but emits nothing: not a decode) */
	if (k <= 1 || xs->n_prefill || xs->total_tokens != (int64_t)in->n_fl ||
	    xs->n_emit != in->n_fl || in->pl->role == POOL_PREFILL)
		return 1;
	for (; k > 1; k--) {
		int64_t need = 0;

		for (uint32_t i = 0; i < in->n_fl; i++) {
			const struct request *r = in->fl_req[i];
			int32_t left = r->output_tokens - r->v.generated_tokens;

			need += req_blocks_needed(&r->v, left < (int32_t)k ? left : (int32_t)k, bs);
		}
		if (need <= kvm_free_blocks(in->kv))
			break;
	}
	return k;
}

/* Run the burst of nb > 1 steps formed at this decision (see "bursts"):
 * its blocks, the served tokens, each step priced and accounted; *dur its
 * duration.  xs is the first step as start_step formed it. */
static int run_burst(struct engine *e, struct instance *in, struct exec_step *xs, uint32_t nb,
		     int64_t *dur, struct ss_error *err)
{
	struct exec_result xr;
	uint32_t n_out = 0;
	double energy = 0.0;
	int rc;

	for (uint32_t k = 0; k < in->n_fl; k++) {
		struct request *r = in->fl_req[k];
		int32_t left = r->output_tokens - r->v.generated_tokens;
		int32_t bt = left < (int32_t)nb ? left : (int32_t)nb;

		/* burst_len counted these blocks free: only -ENOMEM */
		rc = kvm_grow(in->kv, r, req_blocks_needed(&r->v, bt, e->cfg.block_size));
		if (rc)
			return ss_error_set(err, rc, NULL, 0, "out of memory for a block table");
		in->fl_xreq[k].block_table = r->kv.blocks;
		in->fl_xreq[k].n_blocks = r->v.kv_blocks;
		if (bt > 1) {
			/* the first token was served by the decision */
			e->oops->served(in->order_priv, &r->v, 0, bt - 1);
			if (e->q_tenant)
				eng_tenant_rekey(e, in, r);
			if (e->next_arrival < e->n_req)
				e->tenant_service[r->v.tenant] += bt - 1;
		}
		in->fl_tokens[k] = 1;
		n_out += (uint32_t)bt;
	}
	xs->n_out = n_out;
	*dur = 0;
	for (uint32_t j = 0; j < nb; j++) {
		for (uint32_t k = 0; k < in->n_fl; k++) {
			const struct request *r = in->fl_req[k];
			int32_t left = r->output_tokens - r->v.generated_tokens;
			/* an idle slot decodes its last position again */
			int32_t at = (int32_t)j < left ? (int32_t)j : left - 1;

			in->fl_items[k].context = r->v.computed_tokens + at;
		}
		xs->engine_part = (j ? ENGINE_PART_NO_SCHED : 0u) |
				  (j + 1 < nb ? ENGINE_PART_NO_OUTPUT : 0u);
		xs->start_ns = ss_time_add_sat(e->now, *dur);
		rc = price_step(in, xs, &xr, err);
		if (rc)
			return rc;
		if (!ss_time_add(*dur, xr.duration_ns, dur))
			return eng_time_error(err, ((double)e->now + (double)*dur +
						    (double)xr.duration_ns) / 1e9,
					      "a burst of %u steps on instance %u", nb, in->idx);
		account_step(in, xs, &xr, 0);
		energy += xr.energy_j;
	}
	/* what the time series shows while the burst runs: its mean power */
	in->step_power_w = energy / ((double)*dur / 1e9);
	for (uint32_t k = 0; k < in->n_fl; k++) {
		const struct request *r = in->fl_req[k];
		int32_t left = r->output_tokens - r->v.generated_tokens;

		in->fl_tokens[k] = left < (int32_t)nb ? left : (int32_t)nb;
	}
	return 0;
}

/* ---- pipeline parallelism (docs/cost-models.md, "Pipeline parallelism") ---
 *
 * An instance of pp > 1 stages runs batches as vLLM V1
 * (--pipeline-parallel-size, its batch queue of pp) and SGLang do: a
 * new batch enters stage 1 when stage 1 is free and fewer than pp batches
 * are in flight; a request is in at most one batch in flight (the batch
 * policy sees only the running requests in none: RF_INFLIGHT); a batch's
 * tokens are emitted when it leaves the last stage.  The executor prices
 * the batch as one step of every layer; cost_pp_split cuts that into
 * stage times T_s, and between stages the activations move
 * (eng_pp_link_ns).  Formed at t, the batch occupies stage s from
 *   start_s = max(t_s, stage_free[s]),  t_0 = t,
 *   t_{s+1} = start_s + T_s + X_s  (X_s: the transfer after stage s)
 * to start_s + T_s, which becomes stage_free[s]; it completes at the end
 * of the last stage.  Alone, a batch takes sum T_s + sum X_s; with
 * enough requests to keep pp batches in flight, one leaves every max T_s
 * (plus transfer waits): bubbles appear when fewer are ready or the
 * stages differ.  Completions are in formation order (each batch starts
 * its last stage after the previous one left it), so one EV_STEP_DONE
 * per instance serves the oldest batch, ring slot pp_head. */

/* Hide the running requests in flight from the batch policy's view. */
static int pp_hide_inflight(struct instance *in)
{
	uint32_t m = 0;

	if (eng_grow((void **)&in->pp_vis, &in->cap_pp_vis, in->n_running, sizeof(*in->pp_vis)))
		return -ENOMEM;
	for (uint32_t k = 0; k < in->n_running; k++)
		if (!(request_of(in->running[k])->flags & RF_INFLIGHT))
			in->pp_vis[m++] = in->running[k];
	in->view.running = (const struct req_view *const *)in->pp_vis;
	in->view.n_running = m;
	in->view.n_inflight = in->n_running - m;
	return 0;
}

static void pp_swap(struct instance *in, struct pp_batch *b)
{
	struct request **rq = in->fl_req;
	int32_t *tk = in->fl_tokens;
	uint32_t cr = in->cap_fl_req, ct = in->cap_fl_tokens;

	in->fl_req = b->req;
	in->fl_tokens = b->tokens;
	in->cap_fl_req = b->cap_req;
	in->cap_fl_tokens = b->cap_tokens;
	b->req = rq;
	b->tokens = tk;
	b->cap_req = cr;
	b->cap_tokens = ct;
}

/* Stage times of a step xs (priced whole in xr) on a pipeline whose
 * stages differ in their layers' types (pool.stage_cm): each stage's
 * slice prices the same step, and the whole step's operators are shared
 * out as the slices' are (cost_pp_split_sliced). */
static int pp_stage_split(const struct instance *in, const struct exec_step *xs,
			  const struct exec_result *xr, int n_layers, int64_t *stage_ns,
			  struct ss_error *err)
{
	const struct pool *pl = in->pl;
	int64_t op[64][COST_OP_COUNT];
	struct cost_step cs = {
		.items = xs->items, .n_items = xs->n_items, .n_prefill = xs->n_prefill,
		.n_emit = xs->n_emit, .total_tokens = xs->total_tokens,
		.engine_part = xs->engine_part, .n_out = xs->n_out,
	};

	for (int s = 0; s < pl->pp; s++) {
		struct cost_result cr;

		int j = 0;

		while (j < s && pl->stage_cm[j] != pl->stage_cm[s])
			j++;
		if (j < s) {   /* a stage of the same layers: the same times */
			memcpy(op[s], op[j], sizeof(op[s]));
			continue;
		}
		if (cost_model_predict(pl->stage_cm[s], &cs, &cr, err))
			return -ERANGE;
		memcpy(op[s], cr.op_ns, sizeof(op[s]));
	}
	cost_pp_split_sliced(xr->op_ns, xr->duration_ns, n_layers, pl->pp,
			     (const int64_t (*)[COST_OP_COUNT])op, stage_ns);
	return 0;
}

/* The batch in in.fl_*[0 .. n_fl) (xs, prefill_tokens as launch_step
 * has them) enters the pipeline now. */
static int pp_launch(struct engine *e, struct instance *in, struct exec_step *xs,
		     int64_t prefill_tokens, struct ss_error *err)
{
	const struct model_spec *m = e->cfg.model;
	int pp = in->pl->pp;
	int64_t stage_ns[64], t = e->now, end = 0;
	/* hidden states and the residual, tokens x hidden each (vLLM's and
	 * SGLang's intermediate tensors), in the model's activation dtype */
	double bytes = 2.0 * (double)xs->total_tokens * m->hidden * m->dtype_bytes;
	struct exec_result xr = { 0 };
	struct pp_batch *b;
	int rc;

	in->burst_n = 1;
	rc = price_step(in, xs, &xr, err);
	if (rc)
		return rc;
	if (in->pl->stage_cm) {
		rc = pp_stage_split(in, xs, &xr, m->n_layers, stage_ns, err);
		if (rc)
			return rc;
	} else {
		cost_pp_split(xr.op_ns, xr.duration_ns, m->n_layers, pp, stage_ns);
	}
	for (int s = 0; s < pp; s++) {
		int64_t start = t > in->stage_free[s] ? t : in->stage_free[s];

		if (!ss_time_add(start, stage_ns[s], &end))
			return eng_time_error(err, ((double)start + (double)stage_ns[s]) / 1e9,
					      "stage %d of a step on instance %u", s, in->idx);
		in->stage_free[s] = end;
		in->st->stage_busy_ns[s] = ss_time_add_sat(in->st->stage_busy_ns[s], stage_ns[s]);
		if (s + 1 < pp) {
			int64_t x;

			rc = eng_pp_link_ns(e, in, s, bytes, &x, err);
			if (rc)
				return rc;
			if (!ss_time_add(end, x, &t))
				return eng_time_error(err, ((double)end + (double)x) / 1e9,
						      "a step on instance %u", in->idx);
		}
	}
	account_step(in, xs, &xr, prefill_tokens);
	/* step_power_w is now one stage's power while it runs this batch
	 * (tp GPUs); each batch in flight keeps about one stage busy, the
	 * other stages' GPUs idle: the instance's power with pp_n + 1 in
	 * flight (the time series scales it the same way, engine.c) */
	{
		double p = in->step_power_w * (in->pp_n + 1) +
			   in->pl->gpu->idle_w * in->pl->tp * (pp - 1 - (int)in->pp_n);

		if (p > in->st->peak_power_w)
			in->st->peak_power_w = p;
	}
	b = &in->ppb[(in->pp_head + in->pp_n) % (uint32_t)pp];
	pp_swap(in, b);
	b->n = in->n_fl;
	b->start_ns = e->now;
	b->end_ns = end;
	for (uint32_t k = 0; k < b->n; k++)
		b->req[k]->flags |= RF_INFLIGHT;
	in->n_fl = 0;
	in->burst_n = 0;
	in->pp_n++;
	in->busy = true;
	in->step_start_ns = e->now;
	eng_refresh_view(in);
	rc = in->pp_n == 1 ? evq_push(&e->q, &in->ev_step, end) : 0;
	if (!rc)
		rc = eng_push_schedule(e, in);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

/* EV_STEP_DONE on a pipeline: the oldest batch leaves the last stage; its
 * requests and tokens go back to in.fl_* for eng_on_step_done. */
static void pp_take_oldest(struct instance *in)
{
	struct pp_batch *b = &in->ppb[in->pp_head];

	pp_swap(in, b);
	in->n_fl = b->n;
	b->n = 0;
	in->step_start_ns = b->start_ns;
	in->pp_head = (in->pp_head + 1) % (uint32_t)in->pl->pp;
	in->pp_n--;
	for (uint32_t k = 0; k < in->n_fl; k++)
		in->fl_req[k]->flags &= ~RF_INFLIGHT;
}

/* The step whose items are in.fl_*[0 .. n_fl), summed up in xs (its
 * tokens, emitting and prefilling items) and prefill_tokens, starts now:
 * it is priced by the executor (a burst of steps under multi-step
 * scheduling), accounted, and its completion queued. */
static int launch_step(struct engine *e, struct instance *in, struct exec_step *xs,
		       int64_t prefill_tokens, struct ss_error *err)
{
	struct exec_result xr = { 0 };
	int64_t end, dur = 0;
	int rc;

	xs->n_items = in->n_fl;
	xs->items = in->fl_items;
	xs->reqs = in->fl_xreq;
	if (in->pl->dp > 1) {
		/* an attention rank: its group launches it (group_launch) */
		in->grp_xs = *xs;
		in->grp_prefill = prefill_tokens;
		in->grp_ready = true;
		return 0;
	}
	if (in->pl->pp > 1)
		return pp_launch(e, in, xs, prefill_tokens, err);
	in->burst_n = burst_len(e, in, xs);
	if (in->burst_n > 1) {
		rc = run_burst(e, in, xs, in->burst_n, &dur, err);
		if (rc)
			return rc;
	} else {
		rc = price_step(in, xs, &xr, err);
		if (rc)
			return rc;
		dur = xr.duration_ns;
	}
	if (!ss_time_add(e->now, dur, &end))
		return eng_time_error(err, ((double)e->now + (double)dur) / 1e9,
				      "a step on instance %u", in->idx);
	if (in->burst_n <= 1)
		account_step(in, xs, &xr, prefill_tokens);
	in->busy = true;
	in->step_start_ns = e->now;
	eng_refresh_view(in);
	rc = evq_push(&e->q, &in->ev_step, end);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

static int ensure_plan_room(struct instance *in, uint32_t max_items)
{
	uint32_t cap;

	cap = in->plan.cap_items;
	if (eng_grow((void **)&in->plan.items, &cap, in->n_running + max_items,
		 sizeof(*in->plan.items)))
		return -ENOMEM;
	in->plan.cap_items = cap;
	cap = in->plan.cap_preempt;
	if (eng_grow((void **)&in->plan.preempt, &cap, in->n_running + 1, sizeof(*in->plan.preempt)))
		return -ENOMEM;
	in->plan.cap_preempt = cap;
	return 0;
}


/* r leaves in's waiting queue rejected: everything but taking it out of
 * the queue's structure, which the caller does. */
static void drop_account(struct engine *e, struct instance *in, struct request *r,
			 const char *reason)
{
	kvm_drop(in->kv, r);
	in->tenant_active[r->v.tenant]--;
	xh_leave(in, r);
	in->view.outstanding_tokens -= req_total_tokens(&r->v);
	in->view.outstanding_requests--;
	eng_reject(e, r, reason);
}

/* Take waiting request w[k] out of the queue and reject it. */
static void drop_waiting(struct engine *e, struct instance *in, uint32_t k, const char *reason)
{
	struct req_view **w = in->wait + in->wait_head;
	struct request *r = request_of(w[k]);

	if (e->q_tenant) {
		assert(k < in->n_wait);
		tq_remove(in, r);
	} else if (q_on(e, in)) {
		/* only the head is dropped this way (expiry: expire_due) */
		assert(k < in->q_prefix);
		memmove(w + k, w + k + 1, sizeof(*w) * (in->q_prefix - k - 1));
		q_refill(in, in->q_prefix - 1);
	} else {
		memmove(w + k, w + k + 1, sizeof(*w) * (in->n_wait - k - 1));
		in->n_wait--;
	}
	drop_account(e, in, r, reason);
}

/* Whether due request a is met before b by the fallback's scan, under a
 * static-key or tenant-key order: see "expiry" above.  The fallback sorted
 * by the key at its last sort (instance.prep_now): a static key is the
 * same at every now; an aging key is computed at that now, as the sort
 * did, bit for bit; a tenant's key is the one it had then (tkey_prep). */
static bool x_before(const struct engine *e, const struct instance *in, const struct request *a,
		     const struct request *b)
{
	bool a_old = a->jseq < in->prep_jseq, b_old = b->jseq < in->prep_jseq;
	double ka, kb;

	if (a_old != b_old)
		return a_old;
	if (!a_old)
		return a->jseq < b->jseq;
	if (e->q_tenant) {
		ka = in->tkey_prep[a->v.tenant];
		kb = in->tkey_prep[b->v.tenant];
	} else if (e->q_rate == 0) {
		ka = a->qkey;
		kb = b->qkey;
	} else {
		ka = e->oops->key(in->order_priv, &a->v, in->prep_now);
		kb = e->oops->key(in->order_priv, &b->v, in->prep_now);
	}
	if (ka != kb)
		return ka < kb;
	return arr_before(a, b);
}

/* Stable bottom-up merge sort of a[0..n) by x_before, using tmp[0..n). */
static void sort_due(const struct engine *e, const struct instance *in, struct request **a,
		     struct request **tmp, uint32_t n)
{
	for (uint32_t w = 1; w < n; w *= 2) {
		for (uint32_t lo = 0; lo < n; lo += 2 * w) {
			uint32_t mid = lo + w < n ? lo + w : n;
			uint32_t hi = lo + 2 * w < n ? lo + 2 * w : n;
			uint32_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				tmp[k++] = x_before(e, in, a[j], a[i]) ? a[j++] : a[i++];
			while (i < mid)
				tmp[k++] = a[i++];
			while (j < hi)
				tmp[k++] = a[j++];
		}
		memcpy(a, tmp, sizeof(*a) * n);
	}
}

/* Take x[0..m), each flagged flag, out of the static-key structure:
 * those in the heap first (the queue's rest staying contiguous), then the
 * sorted prefix, refilled.  O(m log n + q_len). */
static void q_take_out(struct instance *in, struct request **x, uint32_t m, uint32_t flag)
{
	struct req_view **w = in->wait;
	uint32_t kept = 0;

	for (uint32_t k = 0; k < m; k++) {
		if (x[k]->flags & RF_QHEAP) {
			uint32_t last;

			qheap_remove(in, x[k]);
			last = in->q_prefix + in->n_qheap;
			if (x[k]->qpos != last) {
				w[x[k]->qpos] = w[last];
				request_of(w[x[k]->qpos])->qpos = x[k]->qpos;
			}
		}
	}
	for (uint32_t k = 0; k < in->q_prefix; k++)
		if (!(request_of(w[k])->flags & flag))
			w[kept++] = w[k];
	q_refill(in, kept);
}

/* Drop the waiting requests that expire now: those whose deadline has come
 * and that expire() then lets go, in the fallback scan's order ("expiry"
 * above).  O(k log n) for k due requests, plus under the fallback the
 * distance from the queue's front to the last of them.  0 or -ENOMEM. */
static int expire_due(struct engine *e, struct instance *in)
{
	struct request **x;
	uint32_t n = 0, m = 0;

	if (in->n_xheap == 0 || in->xheap[0]->xdeadline > e->now)
		return 0;
	if (eng_grow((void **)&e->xbuf, &e->cap_xbuf, 2 * in->n_xheap, sizeof(*e->xbuf)))
		return -ENOMEM;
	x = e->xbuf;
	xh_due(in, 0, e->now, x, &n);
	for (uint32_t k = 0; k < n; k++) {
		const char *reason = NULL;

		if (e->aops->expire(e->adm_priv, &x[k]->v, e->now, &reason)) {
			x[k]->reject_reason = reason ? reason : "expired in the queue";
			x[k]->flags |= RF_EXPIRE;
			x[m++] = x[k];
		}
	}
	if (m == 0)
		return 0;
	if (e->q_tenant || q_on(e, in)) {
		sort_due(e, in, x, x + m, m);
		for (uint32_t k = 0; k < m; k++)
			drop_account(e, in, x[k], x[k]->reject_reason);
		if (e->q_tenant) {
			for (uint32_t k = 0; k < m; k++)
				tq_remove(in, x[k]);
		} else {
			q_take_out(in, x, m, RF_EXPIRE);
		}
		for (uint32_t k = 0; k < m; k++)
			x[k]->flags &= ~RF_EXPIRE;
	} else {
		/* the fallback: from the front of wait[] to the last of
		 * them, then close the gaps by moving what is before them */
		struct req_view **w = in->wait + in->wait_head;
		uint32_t found = 0, end = 0, wr;

		while (found < m) {
			struct request *r = request_of(w[end++]);

			if (r->flags & RF_EXPIRE) {
				drop_account(e, in, r, r->reject_reason);
				found++;
			}
		}
		wr = end;
		for (uint32_t rd = end; rd-- > 0;) {
			struct request *r = request_of(w[rd]);

			if (r->flags & RF_EXPIRE)
				r->flags &= ~RF_EXPIRE;
			else
				w[--wr] = w[rd];
		}
		assert(wr == m);
		in->wait_head += m;
		in->n_wait -= m;
	}
	return 0;
}

static bool keyed_before(const struct keyed *a, const struct keyed *b)
{
	if (a->key != b->key)
		return a->key < b->key;
	if (a->v->arrival_ns != b->v->arrival_ns)
		return a->v->arrival_ns < b->v->arrival_ns;
	return a->v->id < b->v->id;
}

/* Stable bottom-up merge sort of a[0..n) using tmp[0..n). */
static void sort_keyed(struct keyed *a, struct keyed *tmp, uint32_t n)
{
	for (uint32_t w = 1; w < n; w *= 2) {
		for (uint32_t lo = 0; lo < n; lo += 2 * w) {
			uint32_t mid = lo + w < n ? lo + w : n;
			uint32_t hi = lo + 2 * w < n ? lo + 2 * w : n;
			uint32_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				tmp[k++] = keyed_before(&a[j], &a[i]) ? a[j++] : a[i++];
			while (i < mid)
				tmp[k++] = a[i++];
			while (j < hi)
				tmp[k++] = a[j++];
		}
		memcpy(a, tmp, sizeof(*a) * n);
	}
}

/* The fallback: sort wait[] by (key at now, arrival, id). */
static int sort_waiting(struct engine *e, struct instance *in)
{
	struct req_view **w = in->wait + in->wait_head;
	uint32_t n = in->n_wait, run = 1;
	struct keyed *a;

	if (n < 2)
		return 0;
	if (eng_grow((void **)&e->sortbuf, &e->cap_sortbuf, 2 * n, sizeof(*e->sortbuf)))
		return -ENOMEM;
	a = e->sortbuf;
	for (uint32_t k = 0; k < n; k++)
		a[k] = (struct keyed){ e->oops->key(in->order_priv, w[k], e->now), w[k] };
	/* The queue was in order after the last step; usually only the
	 * requests that arrived since (at its end) are out of place:
	 * sort what follows the sorted head and merge the two. */
	while (run < n && !keyed_before(&a[run], &a[run - 1]))
		run++;
	if (run < n) {
		struct keyed *tmp = a + n;
		uint32_t i = 0, j = run, k = 0;

		sort_keyed(a + run, tmp, n - run);
		while (i < run && j < n)
			tmp[k++] = keyed_before(&a[j], &a[i]) ? a[j++] : a[i++];
		while (i < run)
			tmp[k++] = a[i++];
		while (j < n)
			tmp[k++] = a[j++];
		for (k = 0; k < n; k++)
			w[k] = tmp[k].v;
	}
	return 0;
}

/* Back from a sorted step (q_unsorted) to the static structure: sort by
 * (qkey, arrival, id); a sorted array is a valid heap for the rest. */
static int q_rebuild(struct engine *e, struct instance *in)
{
	uint32_t n = in->n_wait, P = n < in->q_len ? n : in->q_len;
	struct req_view **w;
	struct keyed *a;

	if (in->wait_head) {
		memmove(in->wait, in->wait + in->wait_head, sizeof(*in->wait) * n);
		in->wait_head = 0;
	}
	w = in->wait;
	if (eng_grow((void **)&e->sortbuf, &e->cap_sortbuf, 2 * n, sizeof(*e->sortbuf)) ||
	    eng_grow((void **)&in->qheap, &in->cap_qheap, n - P, sizeof(*in->qheap)))
		return -ENOMEM;
	a = e->sortbuf;
	for (uint32_t k = 0; k < n; k++) {
		request_of(w[k])->qkey = q_key(e, in, request_of(w[k]));
		a[k] = (struct keyed){ request_of(w[k])->qkey, w[k] };
	}
	sort_keyed(a, a + n, n);
	for (uint32_t k = 0; k < n; k++) {
		struct request *r = request_of(a[k].v);

		w[k] = &r->v;
		r->qpos = k;
		r->flags &= ~RF_QHEAP;
		if (k >= P) {
			qheap_set(in, k - P, r);
			r->flags |= RF_QHEAP;
		}
	}
	in->q_prefix = P;
	in->n_qheap = n - P;
	in->q_unsorted = false;
	return 0;
}

/* Whether a and b have the same key at every now: the same key at arrival
 * (bit for bit) and the same arrival time (order_ops.key_aging: the key is
 * a function of those and now). */
static bool q_same_inputs(const struct engine *e, const struct instance *in,
			  const struct request *a, const struct request *b)
{
	double ka, kb;

	if (a->v.arrival_ns != b->v.arrival_ns)
		return false;
	ka = e->oops->key(in->order_priv, &a->v, a->v.arrival_ns);
	kb = e->oops->key(in->order_priv, &b->v, b->v.arrival_ns);
	return memcmp(&ka, &kb, sizeof(ka)) == 0;
}

/* Every heap entry at or below k with qkey <= lim has the same inputs as r. */
static bool q_heap_near_same(const struct engine *e, const struct instance *in, uint32_t k,
			     double lim, const struct request *r)
{
	if (k >= in->n_qheap || !(in->qheap[k]->qkey <= lim))
		return true;
	return q_same_inputs(e, in, in->qheap[k], r) &&
	       q_heap_near_same(e, in, 2 * k + 1, lim, r) &&
	       q_heap_near_same(e, in, 2 * k + 2, lim, r);
}

/* Under an aging order (engine.q_rate > 0): does the static structure's
 * head, wait[0 .. q_prefix) in qkey order, equal the first q_prefix
 * requests by (key at now, arrival, id), the fallback's order?
 *
 * In exact arithmetic key(now) = qkey - rate * now_s for every request,
 * so the orders agree.  In floating point qkey and key(now) are each
 * within eps = 6u (|key at arrival| + rate * now_s) of their exact values
 * (u = 2^-53; at most 5 roundings each: order_ops.key_aging), so a request
 * whose qkey exceeds another's by more than delta = 4 eps has the larger
 * key at now too; two requests with the same inputs have the same key at
 * every now, so arrival and id order them both ways.  If each pair of
 * consecutive head entries is apart by more than delta or has the same
 * inputs, and so is every heap entry within delta of the head's last, the
 * head is in the fallback's order and nothing else belongs in it (by
 * transitivity for pairs further apart).  Otherwise (near-ties, or keys
 * too large for the bound) false, and the instance sorts like the fallback
 * (q_unsorted) for the next q_backoff schedules. */
static bool q_aging_check(const struct engine *e, struct instance *in)
{
	const struct req_view *const *w = (const struct req_view *const *)in->wait;
	uint32_t P = in->q_prefix;
	/* 32u > 24u covers the rounding of delta itself; DBL_MIN covers
	 * products that underflow */
	double delta = 32 * DBL_EPSILON / 2 *
		       (in->q_bmax + e->q_rate * ((double)e->now * 1e-9)) + 8 * DBL_MIN;

	bool ok = delta < DBL_MAX / 4;

	for (uint32_t k = 1; ok && k < P; k++) {
		const struct request *a = request_of(w[k - 1]), *b = request_of(w[k]);

		ok = b->qkey - a->qkey > delta || q_same_inputs(e, in, a, b);
	}
	ok = ok && (P == 0 || q_heap_near_same(e, in, 0, request_of(w[P - 1])->qkey + delta,
					       request_of(w[P - 1])));
	if (!ok) {
		/* sort like the fallback, for 1, 2, 4, ... 1024 steps while
		 * the near-ties last (rebuilding costs O(n log n)) */
		in->q_unsorted = true;
		in->q_backoff = in->q_backoff ? (in->q_backoff < 512 ? 2 * in->q_backoff : 1024) : 1;
		in->q_retry = in->q_backoff - 1;
	}
	return ok;
}

/* A waiting request on a decode instance that holds its prompt's KV
 * (received from its prefill instance) only has to decode; one that was
 * preempted has to prefill its whole context again (recompute) or bring
 * it back from host memory (swap), into blocks of this pool.  When the
 * head of the queue is such a request and its context needs more blocks
 * than the pool has beside those the KV-holding waiting requests hold, it
 * can never run while they wait behind it: each step would grow it by a
 * chunk and then preempt it again (a livelock), since a policy only
 * preempts running requests.  Then offer the KV holders to the batch
 * policy first, in queue order, and the other waiting requests after them,
 * as vLLM V0 resumes swapped requests before recomputing preempted ones.
 * The queue itself keeps its order; only the policy's view changes, and
 * only in that case, so every other schedule is untouched.  Under a
 * static-key or tenant-key order the policy reads the ordered head only,
 * so the holders are taken from it.  Returns -ENOMEM or 0. */
static int offer_kv_first(struct engine *e, struct instance *in)
{
	/* only the ordered head is read by the policy under an incremental
	 * order (static-key: q_prefix; tenant-key: the first q_len) */
	uint32_t n = e->q_static ? in->q_prefix
		     : e->q_tenant ? (in->n_wait < in->q_len ? in->n_wait : in->q_len)
				   : in->n_wait;
	struct req_view **w = in->wait + in->wait_head;
	const struct req_view *head;
	int64_t held = 0, need;
	uint32_t k, m = 0;

	if (in->pl->role != POOL_DECODE || n < 2)
		return 0;
	head = w[0];
	if (head->kv_blocks > 0)
		return 0;
	for (k = 1; k < n; k++)
		if (w[k]->kv_blocks > 0 && w[k]->computed_tokens >= w[k]->prompt_tokens)
			held += w[k]->kv_blocks;
	need = kvm_blocks_for(in->kv, req_total_tokens(head));
	if (held == 0 || need <= (int64_t)kvm_total_blocks(in->kv) - held)
		return 0;
	if (eng_grow((void **)&e->kvfirst, &e->cap_kvfirst, n, sizeof(*e->kvfirst)))
		return -ENOMEM;
	for (k = 1; k < n; k++)
		if (w[k]->kv_blocks > 0 && w[k]->computed_tokens >= w[k]->prompt_tokens)
			e->kvfirst[m++] = w[k];
	for (k = 0; k < n; k++)
		if (k == 0 || !(w[k]->kv_blocks > 0 && w[k]->computed_tokens >= w[k]->prompt_tokens))
			e->kvfirst[m++] = w[k];
	assert(m == n);
	in->view.waiting = (const struct req_view *const *)e->kvfirst;
	in->view.n_waiting = n;
	return 0;
}

/* ---- the prefix cache under an incremental order -----------------------
 *
 * The sorting path looks up the cache for the first `lookups` requests of
 * the sorted queue (the window) and gives back the lookups of every other
 * waiting request, in queue order, before every step.  A request holds a
 * lookup only from a window it was in, so under a static-key or
 * tenant-key order the ones to give back are those of the last window
 * (instance.pc_moved) now outside it, in the order's sequence (pc_before):
 * O(q_len log q_len) per step.  Taking or giving back a lookup moves a
 * request's computed tokens, so a static key that depends on them (spf's
 * pending tokens; the cache's contents themselves enter no key) is
 * computed again at the next schedule, before its sort would have used it
 * (pc_rekey): O(q_len log n).  No tenant key reads them (order_ops). */

static int pc_moved_add(struct instance *in, struct request *r)
{
	if (eng_grow((void **)&in->pc_moved, &in->cap_pc_moved, in->n_pc_moved + 1,
		     sizeof(*in->pc_moved)))
		return -ENOMEM;
	in->pc_moved[in->n_pc_moved++] = r;
	return 0;
}

/* Whether r, an entry of in->pc_moved, is still waiting on in (the list may
 * name requests since scheduled, dropped, or whose structs were reused). */
static bool pc_waiting(const struct instance *in, const struct request *r)
{
	return r->instance == (int32_t)in->idx && r->v.state == REQ_QUEUED;
}

/* Put the requests of the last schedule's lookups back in their places by
 * their keys now. */
static int pc_rekey(struct engine *e, struct instance *in)
{
	struct request **x;
	uint32_t m = 0;

	if (in->n_pc_moved == 0)
		return 0;
	if (eng_grow((void **)&e->xbuf, &e->cap_xbuf, in->n_pc_moved, sizeof(*e->xbuf)))
		return -ENOMEM;
	x = e->xbuf;
	for (uint32_t k = 0; k < in->n_pc_moved; k++) {
		struct request *r = in->pc_moved[k];
		double key;

		if (!pc_waiting(in, r) || (r->flags & RF_WINDOW))
			continue;
		key = q_key(e, in, r);
		if (memcmp(&key, &r->qkey, sizeof(key)) == 0)
			continue;
		r->flags |= RF_WINDOW;   /* marks it taken out (once) */
		x[m++] = r;
	}
	if (m == 0)
		return 0;
	q_take_out(in, x, m, RF_WINDOW);
	for (uint32_t k = 0; k < m; k++) {
		x[k]->flags &= ~RF_WINDOW;
		if (q_insert(e, in, x[k]))
			return -ENOMEM;
	}
	return 0;
}

/* Whether a precedes b in the order the sorting path put the queue in at
 * this schedule: the keys now (an aging key computed at now, as its sort
 * does; a tenant's current key), then arrival, then id. */
static bool pc_before(const struct engine *e, const struct instance *in, const struct request *a,
		      const struct request *b)
{
	double ka, kb;

	if (e->q_tenant)
		return tq_before(in, (uint32_t)a->v.tenant, a, (uint32_t)b->v.tenant, b);
	if (e->q_rate == 0)
		return q_before(a, b);
	ka = e->oops->key(in->order_priv, &a->v, e->now);
	kb = e->oops->key(in->order_priv, &b->v, e->now);
	if (ka != kb)
		return ka < kb;
	return arr_before(a, b);
}

/* After the lookups of wait[0 .. window): give back those of the last
 * window's requests now outside it, in queue order, and remember both. */
static int pc_window_done(struct engine *e, struct instance *in, uint32_t window)
{
	struct req_view **w = in->wait;
	struct request **x;
	uint32_t m = 0;

	assert(in->wait_head == 0 && (e->q_tenant || window <= in->q_prefix));
	if (eng_grow((void **)&e->xbuf, &e->cap_xbuf, in->n_pc_moved, sizeof(*e->xbuf)))
		return -ENOMEM;
	x = e->xbuf;
	for (uint32_t k = 0; k < window; k++)
		request_of(w[k])->flags |= RF_WINDOW;
	for (uint32_t k = 0; k < in->n_pc_moved; k++) {
		struct request *r = in->pc_moved[k];

		if (pc_waiting(in, r) && (r->flags & RF_LOOKED) && !(r->flags & RF_WINDOW)) {
			uint32_t j = m++;

			r->flags |= RF_WINDOW;   /* once */
			while (j > 0 && pc_before(e, in, r, x[j - 1])) {
				x[j] = x[j - 1];
				j--;
			}
			x[j] = r;
		}
	}
	in->n_pc_moved = 0;
	for (uint32_t k = 0; k < m; k++) {
		x[k]->flags &= ~RF_WINDOW;
		kvm_unpin(in->kv, x[k]);
		if (pc_moved_add(in, x[k]))
			return -ENOMEM;
	}
	for (uint32_t k = 0; k < window; k++) {
		request_of(w[k])->flags &= ~RF_WINDOW;
		if (pc_moved_add(in, request_of(w[k])))
			return -ENOMEM;
	}
	return 0;
}

/* Expire, order and look up the waiting queue; order the running set. */
static int prepare_queues(struct engine *e, struct instance *in, uint32_t lookups)
{
	struct req_view **w;
	uint32_t n;

	if (expire_due(e, in) || (kvm_caching(e->kv) && q_on(e, in) && pc_rekey(e, in)))
		return -ENOMEM;
	/* what joins from now on joins after this ordering (expire_due) */
	in->prep_jseq = e->jseq;
	in->prep_now = e->now;
	if (e->q_tenant && e->aops->expire)
		for (uint32_t k = 0; k < in->n_tq_act; k++)
			in->tkey_prep[in->tq_act[k]] = in->tkey[in->tq_act[k]];
	w = in->wait + in->wait_head;
	n = in->n_wait;
	if (e->q_tenant) {
		prepare_tenant_queue(in);
	} else if (e->q_static && e->q_rate > 0) {
		if (in->q_unsorted && in->q_retry > 0) {
			in->q_retry--;
			if (sort_waiting(e, in))
				return -ENOMEM;
		} else if ((in->q_unsorted && q_rebuild(e, in)) ||
			   (!q_aging_check(e, in) && sort_waiting(e, in))) {
			return -ENOMEM;
		} else if (!in->q_unsorted && in->q_retry == 0) {
			in->q_backoff = 0;
		}
	} else if (e->oops->key && !e->q_static) {
		if (sort_waiting(e, in))
			return -ENOMEM;
	}
	w = in->wait + in->wait_head;   /* q_rebuild may move it */
	n = in->n_wait;
	if (e->vops->compare) {
		/* insertion sort: stable, and nearly sorted from step to step */
		for (uint32_t i = 1; i < in->n_running; i++) {
			struct req_view *v = in->running[i];
			uint32_t j = i;

			while (j > 0 && e->vops->compare(in->running[j - 1], v) > 0) {
				in->running[j] = in->running[j - 1];
				j--;
			}
			in->running[j] = v;
		}
	}
	if (kvm_caching(e->kv)) {
		uint32_t window = n < lookups ? n : lookups;

		for (uint32_t k = 0; k < window; k++)
			if (kvm_lookup(in->kv, request_of(w[k])))
				return -ENOMEM;
		/* An order can move requests out of the window: they let go. */
		if (q_on(e, in) || e->q_tenant) {
			if (pc_window_done(e, in, window))
				return -ENOMEM;
		} else if (e->oops->key) {
			for (uint32_t k = window; k < n; k++)
				kvm_unpin(in->kv, request_of(w[k]));
			/* an aging order sorting for a while (q_unsorted):
			 * its window, for when the structure is back */
			in->n_pc_moved = 0;
			for (uint32_t k = 0; e->q_static && k < window; k++)
				if (pc_moved_add(in, request_of(w[k])))
					return -ENOMEM;
		}
	}
	return 0;
}

/* ---- the steady-decode path ------------------------------------------------
 *
 * Most steps of a run decode one token of each running request and admit
 * nobody: either nobody waits, or the head of the queue does not fit and
 * does not fit any better as the decodes take more blocks.  A batch policy
 * that promises what it plans then (batch_policy_ops.steady_decode) is not
 * asked: the engine forms the step itself, the same items in the same
 * order, with the same effects start_step has on the policy's plan, without
 * the view, pick_step or the plan's checks.  Every other step takes the
 * general path.  Results are bit-for-bit the same either way
 * (engine_config.steady_off; test-engine's steady_* tests).
 *
 * The promise with requests waiting rests on the last plan: instance.
 * steady_n is the size of the running set when the policy (or this path)
 * last planned exactly that set for one decode token each, admitting and
 * preempting nobody, with steady_head the waiting request it saw first
 * (its id, computed tokens and blocks, which a prefix-cache lookup may
 * change) and steady_left the free blocks it saw less those the decodes
 * needed; 0 after any other plan.
 */

/* req_blocks_needed(v, 1, bs) without a division when v's blocks already
 * hold one more token (most steps). */
static inline int32_t decode_need(const struct req_view *v, int32_t bs)
{
	return (int64_t)v->computed_tokens + 1 <= (int64_t)v->kv_blocks * bs ? 0
	       : req_blocks_needed(v, 1, bs);
}

/* Blocks the running requests need for one more token each, or -1 when
 * one of them is not a pure decode (more than one pending token, no
 * token emitted yet, or swapped out). */
static int64_t steady_need(const struct instance *in)
{
	int64_t need = 0;

	for (uint32_t k = 0; k < in->n_running; k++) {
		const struct req_view *v = in->running[k];

		if (req_pending_tokens(v) != 1 || v->generated_tokens == 0 || v->host_blocks)
			return -1;
		need += decode_need(v, in->view.block_size);
	}
	return need;
}

/* After a plan from pick_step: remember it if it is the steady shape. */
static void steady_arm(struct instance *in)
{
	const struct step_plan *p = &in->plan;
	int64_t need;

	in->steady_n = 0;
	if (!in->steady_max || p->n_preempt || p->n_items != in->n_running)
		return;
	for (uint32_t k = 0; k < p->n_items; k++)
		if (p->items[k].req != in->running[k] || p->items[k].tokens != 1)
			return;
	need = steady_need(in);
	if (need < 0)
		return;
	in->steady_n = in->n_running;
	in->steady_head = (struct steady_head){ UINT32_MAX, 0, 0 };
	if (in->view.n_waiting)
		in->steady_head = (struct steady_head){ in->view.waiting[0]->id,
							in->view.waiting[0]->computed_tokens,
							in->view.waiting[0]->kv_blocks };
	in->steady_left = (int64_t)in->view.free_blocks - need;
}

/* Whether in's next step is one its policy promised, its queues prepared:
 * 1 .. steady_max running requests, each with one pending token of its
 * output and not swapped out; no victim order re-sorting them; no swap
 * pending; the free blocks cover their next blocks; and either nobody
 * waits, or (not on a decode pool, whose view puts KV holders first) the
 * last plan was of this running set, the same request, unchanged, heads
 * the queue, and no more blocks are left after the decodes than then. */
static bool steady_ready(const struct engine *e, const struct instance *in, int64_t *left)
{
	const struct req_view *head;
	int64_t need;

	if (!in->n_running || in->n_running > in->steady_max || kvm_swap_pending(in->kv) ||
	    e->vops->compare)
		return false;
	need = steady_need(in);
	if (need < 0 || need > kvm_free_blocks(in->kv))
		return false;
	*left = (int64_t)kvm_free_blocks(in->kv) - need;
	if (!in->n_wait)
		return true;
	head = in->wait[in->wait_head];
	if (in->pl->role == POOL_DECODE || in->steady_n != in->n_running ||
	    head->id != in->steady_head.id || head->computed_tokens != in->steady_head.computed ||
	    head->kv_blocks != in->steady_head.kv_blocks || *left > in->steady_left)
		return false;
	for (uint32_t k = 0; k < in->n_running; k++)
		if (in->running[k] != &in->fl_req[k]->v)
			return false;
	return true;
}

/* Start the step steady_ready found: what start_step does with the plan
 * the policy promised, every running request for one token. */
static int steady_start(struct engine *e, struct instance *in, struct ss_error *err)
{
	struct exec_step xs = { .instance = (int32_t)in->idx, .start_ns = e->now };
	uint32_t n = in->n_running;
	int rc;

	if (eng_grow((void **)&in->fl_req, &in->cap_fl_req, n, sizeof(*in->fl_req)) ||
	    eng_grow((void **)&in->fl_tokens, &in->cap_fl_tokens, n, sizeof(*in->fl_tokens)) ||
	    eng_grow((void **)&in->fl_items, &in->cap_fl_items, n, sizeof(*in->fl_items)) ||
	    eng_grow((void **)&in->fl_xreq, &in->cap_fl_xreq, n, sizeof(*in->fl_xreq)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (uint32_t k = 0; k < n; k++) {
		struct request *r = request_of(in->running[k]);
		int32_t need = decode_need(&r->v, e->cfg.block_size);

		/* steady_ready counted these blocks free: only -ENOMEM */
		if (need && (rc = kvm_grow(in->kv, r, need)))
			return ss_error_set(err, rc, NULL, 0, "out of memory for a block table");
		in->fl_xreq[k] = (struct exec_req){
			.block_table = r->kv.blocks,
			.n_blocks = r->v.kv_blocks,
			.emit = true,
		};
		e->oops->served(in->order_priv, &r->v, 0, 1);
		if (e->q_tenant)
			eng_tenant_rekey(e, in, r);
		if (e->next_arrival < e->n_req)
			e->tenant_service[r->v.tenant] += 1;
		in->fl_req[k] = r;
		in->fl_tokens[k] = 1;
		in->fl_items[k] = (struct cost_item){ .tokens = 1, .context = r->v.computed_tokens };
	}
	xs.total_tokens = n;
	xs.n_emit = n;
	in->n_fl = n;
	in->steady_steps++;
	return launch_step(e, in, &xs, 0, err);
}

/* KV blocks the plan's items need beyond those they hold: O(items). */
static int64_t plan_need(const struct instance *in)
{
	int64_t need = 0;

	for (uint32_t k = 0; k < in->plan.n_items; k++)
		need += req_blocks_needed(in->plan.items[k].req, in->plan.items[k].tokens,
					  in->view.block_size);
	return need;
}

/* Form in's next step (the plan of its batch policy, or the steady path)
 * and start it, or, an attention rank, leave it for its group to start
 * (grp_form); nothing when in is busy. */
static int schedule_unit(struct engine *e, struct instance *in, struct ss_error *err)
{
	uint32_t max_items = e->bops->max_items(in->batch_priv);
	uint32_t lookups = max_items;  /* waiting requests that look up the prefix cache */
	int rc;

	if (in->pl->pp > 1) {
		if (in->pp_n >= (uint32_t)in->pl->pp)
			return 0;     /* the next batch to leave asks again */
		if (e->now < in->stage_free[0]) {
			rc = eng_push_schedule(e, in);   /* when stage 1 frees */
			return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue")
				  : 0;
		}
	} else if (in->busy) {
		return 0;
	}
	for (bool first = true;; first = false) {
		int64_t left;

		if (ensure_plan_room(in, max_items) || prepare_queues(e, in, lookups))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		if (first && in->steady_max && steady_ready(e, in, &left)) {
			in->steady_left = left;
			if (in->pl->dp > 1) {
				in->grp_form = GRP_STEADY;   /* its group starts it */
				return 0;
			}
			return steady_start(e, in, err);
		}
		in->plan.n_items = 0;
		in->plan.n_preempt = 0;
		eng_refresh_view(in);
		if (offer_kv_first(e, in) || (in->pp_n && pp_hide_inflight(in)))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		e->bops->pick_step(in->batch_priv, &in->view, e->now, &e->host, &in->plan);
		assert(in->plan.n_items <= in->plan.cap_items);
		assert(in->plan.n_preempt <= in->plan.cap_preempt);
		if (in->plan.n_preempt) {
			/* blocks free once the victims let go, as the view shows it */
			int64_t promised = in->view.free_blocks;

			for (uint32_t k = 0; k < in->plan.n_preempt; k++)
				promised += in->plan.preempt[k]->kv_blocks;
			rc = apply_preemptions(e, in, err);
			if (rc)
				return rc;
			/* A victim frees only the blocks no other request
			 * holds: with the prefix cache, blocks it shares with
			 * running requests or that waiting requests' lookups
			 * pinned stay held.  A plan that fits what the view
			 * promised but not the pool is made again on the pool
			 * as it is (the running set is smaller, so this ends);
			 * one that does not even fit the view is the policy's
			 * error (start_step reports it). */
			if (in->plan.n_items) {
				int64_t need = plan_need(in);

				if (need > kvm_free_blocks(in->kv) && need <= promised)
					continue;
			}
		}
		if (in->plan.n_items) {
			steady_arm(in);
			if (in->pl->dp > 1) {
				in->grp_form = GRP_PLAN;     /* its group starts it */
				return 0;
			}
			return start_step(e, in, err);
		}
		if (in->plan.n_preempt)
			continue;
		if (in->pp_n > 0) {
			/* a batch leaving the pipeline asks again */
			eng_refresh_view(in);
			return 0;
		}
		if (in->n_running > 0)
			/* nothing would ever wake this instance again */
			return ss_error_set(err, -EPROTO, NULL, 0,
					    "batch policy %s formed no step with %u requests running on instance %u",
					    e->bops->name, in->n_running, in->idx);
		if (in->n_wait > 0 && in->n_migrating == 0) {
			/* An idle, empty instance that cannot start its head
			 * request never will (unless KV on its way to decode
			 * instances will free blocks): reject it rather than hang --
			 * once the others have let go of the cached blocks
			 * they hold, which could be what is in its way. */
			bool unpinned = false;

			for (uint32_t k = 1; k < in->n_wait; k++) {
				struct request *r = request_of(in->wait[in->wait_head + k]);

				if (kvm_unpin(in->kv, r)) {
					unpinned = true;
					if (q_on(e, in) && pc_moved_add(in, r))
						return ss_error_set(err, -ENOMEM, NULL, 0,
								    "out of memory");
				}
			}
			if (unpinned) {
				lookups = 1;
				continue;
			}
			drop_waiting(e, in, 0, "could not be scheduled on an idle instance");
			lookups = max_items;
			continue;
		}
		eng_refresh_view(in);
		/* An idle decode instance: transfers paused for a waiting
		 * request that has since left may start now. */
		if (in->pl->role == POOL_DECODE && in->n_running == 0)
			return eng_start_transfers(e, in, err);
		return 0;
	}
}

/* ---- lock-step ranks (data-parallel attention) ----------------------------
 *
 * With dp_attention D > 1 an instance's D attention ranks (pool units
 * first + g D .. first + g D + D - 1, engine-int.h) each plan their own
 * batch with their own policy, queues and KV cache, but step together,
 * as SGLang and TensorRT-LLM run them: every MoE layer's all-to-all (or
 * all-gather and reduce-scatter) takes every rank's tokens, so no rank
 * starts a step before all have finished the last one (docs/cost-models.md
 * "Expert parallelism"):
 *   - the group schedules when none of its ranks is busy: each rank
 *     plans (schedule_unit leaves its plan or steady step: grp_form),
 *     the engine profile's attention-DP balancer (adp_balance) may hold
 *     the ranks' context work back, then each rank forms its step
 *     (launch_step leaves it: grp_ready); when none has anything to run
 *     the group stays idle;
 *   - a rank with nothing to run joins with an idle batch, one dummy
 *     decode token that emits nothing (TensorRT-LLM's attention-DP dummy
 *     request, _pad_attention_dp_dummy_request; SGLang's IDLE batch,
 *     prepare_mlp_sync_batch);
 *   - every rank is priced with the group's MoE tokens (exec_step.
 *     group_tokens: the ranks' real tokens summed), and the step lasts
 *     the longest rank's time: a shorter rank waits in the collectives
 *     (its wait is counted as all-reduce time, at idle power);
 *   - all ranks' completions fall at that one time, in rank order.
 * Multi-step bursts and pipeline stages are refused with DP attention at
 * setup.  O(D) per group step, on top of each rank's own work. */

/* The first rank of in's lock-step group. */
static struct instance *group_of(struct engine *e, const struct instance *in)
{
	const struct pool *pl = in->pl;

	return &e->inst[pl->first + (in->idx - pl->first) / (uint32_t)pl->dp * (uint32_t)pl->dp];
}

/* The idle batch a rank with nothing to run joins a group step with. */
static const struct cost_item idle_item = { .tokens = 1, .context = 0 };
static const struct exec_req idle_req = { .block_table = NULL, .n_blocks = 0, .emit = false };

/* Launch the group step of rk[0 .. D) whose ranks with grp_ready formed
 * a step (at least one): price each (the rest an idle batch), and start
 * all of them for the longest one's duration. */
static int group_launch(struct engine *e, struct instance *rk, uint32_t D, struct ss_error *err)
{
	int64_t group_tokens = 0, dur = 0, end;
	int rc;

	for (uint32_t k = 0; k < D; k++)
		if (rk[k].grp_ready)
			group_tokens += rk[k].grp_xs.total_tokens;
	for (uint32_t k = 0; k < D; k++) {
		struct instance *in = &rk[k];

		if (!in->grp_ready) {
			in->n_fl = 0;
			in->grp_xs = (struct exec_step){
				.instance = (int32_t)in->idx, .n_items = 1, .items = &idle_item,
				.reqs = &idle_req, .total_tokens = 1, .start_ns = e->now,
			};
			in->grp_prefill = 0;
		}
		in->grp_xs.group_tokens = group_tokens;
		rc = price_step(in, &in->grp_xs, &in->grp_xr, err);
		if (rc)
			return rc;
		if (in->grp_xr.duration_ns > dur)
			dur = in->grp_xr.duration_ns;
	}
	if (!ss_time_add(e->now, dur, &end))
		return eng_time_error(err, ((double)e->now + (double)dur) / 1e9,
				      "a step on instance %u", rk[0].idx);
	for (uint32_t k = 0; k < D; k++) {
		struct instance *in = &rk[k];
		struct exec_result *xr = &in->grp_xr;
		int64_t wait = dur - xr->duration_ns;

		xr->energy_j += in->pl->gpu->idle_w * in->pl->tp * (double)wait * 1e-9;
		xr->op_ns[COST_OP_ALLREDUCE] += wait;
		xr->duration_ns = dur;
		if (in->grp_ready) {
			account_step(in, &in->grp_xs, xr, in->grp_prefill);
		} else {
			/* the idle batch: the rank's GPUs' time and energy,
			 * no request's (and not a step of the batch statistics) */
			account_energy(in, xr, 0, 0);
			in->st->idle_steps++;
			in->st->busy_ns = ss_time_add_sat(in->st->busy_ns, dur);
			in->st->busy_energy_j += xr->energy_j;
			in->st->out_of_grid += xr->out_of_grid;
			in->st->out_of_grid_ns += xr->out_of_grid_ns;
			for (int op = 0; op < COST_OP_COUNT; op++)
				in->st->op_ns[op] += xr->op_ns[op];
		}
		in->grp_ready = false;
		in->busy = true;
		in->step_start_ns = e->now;
		eng_refresh_view(in);
		rc = evq_push(&e->q, &in->ev_step, end);
		if (rc)
			return ss_error_set(err, rc, NULL, 0, "out of memory in the event queue");
	}
	return 0;
}

/* An item of a plan that is context (prefill) work: more than one token,
 * or the first token of a prompt (start_step's n_prefill). */
static inline bool plan_item_ctx(const struct step_item *it)
{
	return it->tokens > 1 || it->req->generated_tokens == 0;
}

/* TensorRT-LLM's attention-DP balancer (engine_profile.adp_balance;
 * tensorrt_llm/_torch/pyexecutor/py_executor.py, _balance_adp_requests):
 * over the ranks' plans of this group step, whether every rank has
 * context work and room for it (fewer generation items than its policy's
 * most items) and generation work; the new context work of every rank is
 * held back (dropped from the plans: the requests stay queued) until all
 * ranks have some, for at most timeout_iters group steps, or at once when
 * some rank has nothing to decode; once all have some and all decode, it
 * waits batching_wait_iters steps more.  The counters are the group's
 * (TensorRT-LLM's ranks compute them alike from the gathered counts).
 * O(items of the plans). */
static void adp_balance(struct engine *e, struct instance *rk, uint32_t D)
{
	const struct engine_profile *p = e->cfg.engine;
	bool room = true, all_ctx = true, all_gen = true, hold = true;

	for (uint32_t k = 0; k < D; k++) {
		const struct instance *in = &rk[k];
		uint32_t ctx = 0, gen = 0;

		if (in->grp_form == GRP_STEADY) {
			gen = in->n_running;
		} else if (in->grp_form == GRP_PLAN) {
			for (uint32_t i = 0; i < in->plan.n_items; i++)
				ctx += plan_item_ctx(&in->plan.items[i]);
			gen = in->plan.n_items - ctx;
		}
		room &= gen < e->bops->max_items(in->batch_priv);
		all_ctx &= ctx > 0;
		all_gen &= gen > 0;
	}
	if (room && all_ctx) {
		rk->adp_wait = 0;
		hold = false;
		if (all_gen) {
			hold = rk->adp_batch < (uint32_t)p->adp_batching_wait_iters;
			rk->adp_batch = hold ? rk->adp_batch + 1 : 0;
		}
	} else if (++rk->adp_wait >= (uint32_t)p->adp_timeout_iters || !all_gen) {
		rk->adp_wait = 0;
		hold = false;
	}
	if (!hold)
		return;
	for (uint32_t k = 0; k < D; k++) {
		struct step_plan *pl = &rk[k].plan;
		uint32_t w = 0;

		if (rk[k].grp_form != GRP_PLAN)
			continue;
		for (uint32_t i = 0; i < pl->n_items; i++)
			if (!plan_item_ctx(&pl->items[i]))
				pl->items[w++] = pl->items[i];
		pl->n_items = w;   /* >= 1: every rank decodes (all_gen) */
	}
}

/* EV_SCHEDULE of an attention rank: when no rank of its group is busy,
 * every rank forms its step (the engine profile's attention-DP balancer
 * may hold context work back) and the group launches them together. */
static int group_schedule(struct engine *e, struct instance *in, struct ss_error *err)
{
	struct instance *rk = group_of(e, in);
	uint32_t D = (uint32_t)in->pl->dp;
	bool any = false;
	int rc;

	for (uint32_t k = 0; k < D; k++)
		if (rk[k].busy)
			return 0;   /* the group's completion asks again */
	for (uint32_t k = 0; k < D; k++) {
		rc = schedule_unit(e, &rk[k], err);
		if (rc)
			return rc;
		any |= rk[k].grp_form != GRP_NONE;
	}
	if (!any)
		return 0;
	if (e->cfg.engine && e->cfg.engine->adp_balance)
		adp_balance(e, rk, D);
	for (uint32_t k = 0; k < D; k++) {
		struct instance *r = &rk[k];

		rc = r->grp_form == GRP_STEADY ? steady_start(e, r, err) :
		     r->grp_form == GRP_PLAN ? start_step(e, r, err) : 0;
		r->grp_form = GRP_NONE;
		if (rc)
			return rc;
	}
	return group_launch(e, rk, D, err);
}

int eng_on_schedule(struct engine *e, struct instance *in, struct ss_error *err)
{
	if (in->pl->dp > 1)
		return group_schedule(e, in, err);
	return schedule_unit(e, in, err);
}

/* r has emitted its last token: it leaves the running set (at the next
 * compaction) and gives back its blocks. */
static void finish(struct engine *e, struct instance *in, struct request *r)
{
	r->finish_ns = e->now;
	r->v.state = REQ_FINISHED;
	kvm_finish(in->kv, r);
	r->flags |= RF_REMOVE;
	in->n_remove++;
	in->view.outstanding_tokens -= req_total_tokens(&r->v);
	in->view.outstanding_requests--;
	in->tenant_active[r->v.tenant]--;
	e->n_done++;
	eng_retire(e, r);
}

/* Count n token gaps of gap ns into e->itl, in runs of equal gaps
 * (*gap_v, *gap_n: the run so far). */
static inline void itl_add(struct engine *e, int64_t *gap_v, uint64_t *gap_n, int64_t gap,
			   uint64_t n)
{
	if (gap != *gap_v || !*gap_n) {
		if (*gap_n)
			ss_hist_add_n(&e->itl, *gap_v, *gap_n);
		*gap_v = gap;
		*gap_n = 0;
	}
	*gap_n += n;
}

int eng_on_step_done(struct engine *e, struct instance *in, struct ss_error *err)
{
	/* token gaps for e->itl, counted in runs of equal gaps */
	int64_t gap_v = 0;
	uint64_t gap_n = 0;
	int rc;

	if (in->pl->pp > 1)
		pp_take_oldest(in);
	for (uint32_t k = 0; k < in->n_fl; k++) {
		struct request *r = in->fl_req[k];

		r->last_step_ns = e->now - in->step_start_ns;
		r->v.computed_tokens += in->fl_tokens[k];
		kvm_register(in->kv, r);
		if (in->burst_n > 1) {
			/* A burst's fl_tokens[k] tokens (docs/engines.md): they
			 * reach the client together, now, after the gap since
			 * its last one. */
			int64_t gap = e->now - r->last_token_ns;

			r->v.generated_tokens += in->fl_tokens[k];
			in->view.outstanding_tokens += in->fl_tokens[k];
			itl_add(e, &gap_v, &gap_n, gap, 1);
			if (in->fl_tokens[k] > 1)
				itl_add(e, &gap_v, &gap_n, 0, (uint64_t)in->fl_tokens[k] - 1);
			if (gap > r->max_gap_ns)
				r->max_gap_ns = gap;
			r->last_token_ns = e->now;
			if (r->v.generated_tokens >= r->output_tokens)
				finish(e, in, r);
			continue;
		}
		if (r->v.computed_tokens < req_total_tokens(&r->v))
			continue;
		/* All known tokens are in the KV cache: one output token. */
		r->v.generated_tokens++;
		in->view.outstanding_tokens++;
		if (r->first_token_ns < 0)
			r->first_token_ns = e->now;
		else {
			int64_t gap = e->now - r->last_token_ns;

			itl_add(e, &gap_v, &gap_n, gap, 1);
			if (gap > r->max_gap_ns)
				r->max_gap_ns = gap;
		}
		r->last_token_ns = e->now;
		if (r->v.generated_tokens >= r->output_tokens) {
			finish(e, in, r);
		} else if (in->pl->role == POOL_PREFILL) {
			rc = eng_handoff(e, in, r, err);
			if (rc)
				return rc;
		}
	}
	if (gap_n)
		ss_hist_add_n(&e->itl, gap_v, gap_n);
	in->n_fl = 0;
	in->burst_n = 0;
	running_compact(in);
	in->busy = in->pp_n > 0;
	if (in->pp_n > 0) {
		rc = evq_push(&e->q, &in->ev_step, in->ppb[in->pp_head].end_ns);
		if (rc)
			return ss_error_set(err, rc, NULL, 0, "out of memory in the event queue");
	}
	eng_refresh_view(in);
	if (in->pl->role == POOL_DECODE) {
		rc = eng_start_transfers(e, in, err);
		if (rc)
			return rc;
	}
	/* The schedule this asks for is the next event when nothing else is
	 * due before it at this instant: then it runs here, as the loop would
	 * run it next (not live, where the loop also reads the clock). */
	if (!e->cfg.clock && !event_queued(&in->ev_sched)) {
		const struct event *next = evq_peek(&e->q);

		if (!next || next->time_ns > e->now || next->prio > EV_SCHEDULE)
			return eng_on_schedule(e, in, err);
	}
	rc = eng_push_schedule(e, in);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}
