/* One instance's waiting queue (sim/waitq.h), through its header: under
 * each kind of order the head it lays out, push_front, removal, the picks
 * of a step and expiry, against a brute-force sorted model. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "request.h"
#include "waitq.h"

enum { N = 400, LEN = 6, TENANTS = 5 };

/* The orders under test: their key and capabilities. */
struct order_priv {
	int kind;             /* 0 static (sjf-like), 1 aging, 2 moving (sort), 3 tenant */
	double tkey[TENANTS]; /* kind 3: each tenant's key */
};

static double t_key(const void *priv, const struct req_view *r, int64_t now)
{
	const struct order_priv *p = priv;

	switch (p->kind) {
	case 0:
		return (double)(r->prompt_tokens % 7);   /* few values: ties */
	case 1:
		return (double)(r->prompt_tokens % 5) -
		       0.5 * ((double)(now - r->arrival_ns) * 1e-9);
	case 2:
		return (double)((r->prompt_tokens + now / 1000) % 9);
	default:
		return p->tkey[r->tenant];
	}
}

static bool t_static(const void *priv)
{
	return ((const struct order_priv *)priv)->kind == 0;
}

static bool t_tenant(const void *priv)
{
	return ((const struct order_priv *)priv)->kind == 3;
}

static double t_aging(const void *priv)
{
	return ((const struct order_priv *)priv)->kind == 1 ? 0.5 : 0;
}

static const struct order_ops keyed_ops = {
	.version = 2, .name = "test", .key = t_key,
	.key_static = t_static, .key_tenant = t_tenant, .key_aging = t_aging,
};
static const struct order_ops fifo_ops = {
	.version = 2, .name = "fifo", .key = NULL,
	.key_static = t_static, .key_tenant = t_tenant, .key_aging = t_aging,
};

static bool t_expire(const void *priv, const struct req_view *r, int64_t now,
		     const char **reason)
{
	(void)priv;
	(void)now;
	*reason = "test";
	return r->id % 3 != 0;     /* some due requests stay */
}

static uint64_t rng = 2463534242ULL;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return (uint32_t)(rng % n);
}

/* The model: the requests waiting, in push order (FIFO: front pushes
 * first), and a sort of them by (key at now, arrival, id). */
struct model {
	struct request *w[N];
	uint32_t n;
};

static const struct order_priv *g_priv;
static int64_t g_now;

static int by_order(const void *pa, const void *pb)
{
	const struct request *a = *(struct request *const *)pa, *b = *(struct request *const *)pb;
	double ka = t_key(g_priv, &a->v, g_now), kb = t_key(g_priv, &b->v, g_now);

	if (ka != kb)
		return ka < kb ? -1 : 1;
	if (a->v.arrival_ns != b->v.arrival_ns)
		return a->v.arrival_ns < b->v.arrival_ns ? -1 : 1;
	return a->v.id < b->v.id ? -1 : a->v.id > b->v.id;
}

static void model_del(struct model *m, const struct request *r)
{
	for (uint32_t k = 0; k < m->n; k++)
		if (m->w[k] == r) {
			memmove(m->w + k, m->w + k + 1, sizeof(*m->w) * (m->n - k - 1));
			m->n--;
			return;
		}
	ck_abort_msg("request %u not in the model", r->v.id);
}

/* After waitq_order: the queue holds the model's requests, and its
 * ordered head is the model's, sorted (or, FIFO, in the model's order). */
static void check_queue(const struct waitq *q, struct model *m, bool keyed)
{
	struct request *sorted[N];
	struct req_view **w = waitq_items(q);
	uint32_t ord = waitq_ordered(q);
	bool seen[N] = { false };

	ck_assert_uint_eq(waitq_len(q), m->n);
	memcpy(sorted, m->w, sizeof(*sorted) * m->n);
	if (keyed)
		qsort(sorted, m->n, sizeof(*sorted), by_order);
	ck_assert_uint_le(ord, m->n);
	if ((q->kind == WAITQ_STATIC && !q->unsorted) || q->kind == WAITQ_TENANT)
		ck_assert_uint_eq(ord, m->n < LEN ? m->n : LEN);
	for (uint32_t k = 0; k < ord; k++)
		ck_assert_msg(w[k] == &sorted[k]->v, "position %u: request %u, expected %u", k,
			      w[k]->id, sorted[k]->v.id);
	for (uint32_t k = 0; k < m->n; k++) {
		ck_assert(!seen[w[k]->id]);
		seen[w[k]->id] = true;
	}
	for (uint32_t k = 0; k < m->n; k++)
		ck_assert(seen[m->w[k]->v.id]);
}

/* A random run of joins, preemptions' returns, removals, a step's picks
 * from the head and expiry, under order kind `kind` (-1: no key), with
 * waitq_order before every look at the head. */
static void run_kind(int kind, enum waitq_kind want, bool sorting)
{
	static struct request rq[N];
	struct order_priv priv = { .kind = kind < 0 ? 0 : kind };
	struct waitq_config c = {
		.order = kind < 0 ? &fifo_ops : &keyed_ops, .order_priv = &priv,
		.len = LEN, .n_tenants = TENANTS, .instance = 0,
		.expire = t_expire, .expire_priv = NULL,
	};
	struct waitq q;
	struct model m = { .n = 0 };
	uint32_t next = 0, expired = 0, fronts = 0;
	bool keyed = kind >= 0;

	g_priv = &priv;
	for (int t = 0; t < TENANTS; t++)
		priv.tkey[t] = rnd(4);
	ck_assert_int_eq(waitq_init(&q, &c), 0);
	if (sorting)
		waitq_use_sorting(&q);
	ck_assert_int_eq(q.kind, want);
	memset(rq, 0, sizeof(rq));
	for (g_now = 0; g_now < 4000000 && (next < N || m.n); g_now += 1000 + rnd(30000)) {
		uint32_t op = rnd(10);

		if (op < 5 && next < N) {                      /* a join */
			struct request *r = &rq[next];

			r->v.id = next++;
			r->v.arrival_ns = g_now - rnd(3) * 1000;   /* some arrive out of order */
			r->v.prompt_tokens = (int32_t)rnd(1000);
			r->v.tenant = (int32_t)rnd(TENANTS);
			r->v.state = REQ_QUEUED;
			if (kind == 3 && rnd(2))   /* enqueued() moved its tenant's key */
				priv.tkey[r->v.tenant] = rnd(4);
			waitq_tenant_rekey(&q, r, g_now);
			ck_assert_int_eq(waitq_push(&q, r, rnd(2) ? g_now + rnd(200000) : WAITQ_NEVER,
						    g_now), 0);
			m.w[m.n++] = r;
		} else if (op < 7 && m.n) {                    /* a rejection anywhere */
			struct request *r = m.w[rnd(m.n)];

			waitq_remove(&q, r);
			model_del(&m, r);
			r->v.state = REQ_REJECTED;
		} else if (op < 9 && m.n) {                    /* a step picks from the head */
			struct req_view **w;
			struct request *picked[LEN];
			uint32_t np = 0;

			ck_assert_int_eq(waitq_order(&q, g_now), 0);
			check_queue(&q, &m, keyed);
			w = waitq_items(&q);
			for (uint32_t k = 0; k < waitq_ordered(&q) && k < LEN; k++)
				if (rnd(2))
					picked[np++] = request_of(w[k]);
			for (uint32_t k = 0; k < np; k++) {
				ck_assert_int_eq(waitq_mark(&q, picked[k]), 0);
				model_del(&m, picked[k]);
			}
			waitq_take_marked(&q);
			/* some run a while and are preempted back */
			for (uint32_t k = 0; k < np; k++) {
				if (rnd(3))
					continue;
				if (kind == 3)    /* served() moved its tenant's key */
					priv.tkey[picked[k]->v.tenant] += 1;
				waitq_tenant_rekey(&q, picked[k], g_now);
				ck_assert_int_eq(waitq_push_front(&q, picked[k], g_now), 0);
				memmove(m.w + 1, m.w, sizeof(*m.w) * m.n);
				m.w[0] = picked[k];
				m.n++;
				fronts++;
			}
		} else {                                       /* expiry */
			struct request **x;
			uint32_t n;

			ck_assert_int_eq(waitq_expire(&q, g_now, &x, &n), 0);
			for (uint32_t k = 0; k < n; k++) {
				/* due, and let go by expire() */
				ck_assert_int_le(x[k]->wq.deadline, g_now);
				ck_assert_uint_ne(x[k]->v.id % 3, 0);
				ck_assert_str_eq(x[k]->reject_reason, "test");
				model_del(&m, x[k]);
				x[k]->v.state = REQ_REJECTED;
				expired++;
			}
			/* none due and expiring is left */
			for (uint32_t k = 0; k < m.n; k++)
				ck_assert(!(m.w[k]->wq.xpos != SS_HEAP_NONE &&
					    m.w[k]->wq.deadline <= g_now && m.w[k]->v.id % 3));
		}
		if (!keyed && m.n) {
			/* FIFO: the whole queue in the model's order, always */
			ck_assert_int_eq(waitq_order(&q, g_now), 0);
			for (uint32_t k = 0; k < m.n; k++)
				ck_assert_ptr_eq(waitq_items(&q)[k], &m.w[k]->v);
		}
	}
	ck_assert_uint_gt(expired, 0);
	ck_assert_uint_gt(fronts, 0);
	waitq_release(&q);
}

START_TEST(fifo_keeps_arrival_order_and_resumes_preempted_first)
{
	run_kind(-1, WAITQ_FIFO, false);
}
END_TEST

START_TEST(static_keys_head_matches_sorted_model)
{
	run_kind(0, WAITQ_STATIC, false);
}
END_TEST

START_TEST(aging_head_matches_sorted_model)
{
	run_kind(1, WAITQ_STATIC, false);
}
END_TEST

START_TEST(moving_keys_sort_like_the_model)
{
	run_kind(2, WAITQ_SORT, false);
}
END_TEST

START_TEST(tenant_keys_head_matches_sorted_model)
{
	run_kind(3, WAITQ_TENANT, false);
}
END_TEST

START_TEST(sorting_path_matches_the_model_for_every_order)
{
	run_kind(0, WAITQ_SORT, true);
	run_kind(1, WAITQ_SORT, true);
	run_kind(3, WAITQ_SORT, true);
}
END_TEST

/* Expiry under a static key: the requests dropped are those the sorting
 * path's scan meets in order -- those waiting at the last waitq_order in
 * its order, then those that joined since, in join order. */
START_TEST(expiry_order_is_the_sorting_scan_order)
{
	static struct request rq[8];
	struct order_priv priv = { .kind = 0 };
	struct waitq_config c = {
		.order = &keyed_ops, .order_priv = &priv, .len = LEN, .n_tenants = 1,
		.expire = t_expire,
	};
	/* prompt % 7 is the key; ids 0 and 3 never expire (id % 3 == 0) */
	const int32_t prompt[8] = { 0, 5, 1, 0, 4, 2, 6, 3 };
	const uint32_t want[] = { 2, 4, 1, 5, 7 };
	struct request **x;
	struct waitq q;
	uint32_t n;

	g_priv = &priv;
	ck_assert_int_eq(waitq_init(&q, &c), 0);
	for (uint32_t i = 0; i < 8; i++) {
		rq[i].v = (struct req_view){ .id = i, .arrival_ns = i, .prompt_tokens = prompt[i],
					     .state = REQ_QUEUED };
		if (i == 5)   /* 0 .. 4 were waiting when the queue was put in order */
			ck_assert_int_eq(waitq_order(&q, 10), 0);
		ck_assert_int_eq(waitq_push(&q, &rq[i], 100, 10), 0);
	}
	/* 5, 6, 7 joined since, in that order, whatever their keys */
	ck_assert_int_eq(waitq_expire(&q, 99, &x, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(waitq_expire(&q, 100, &x, &n), 0);
	ck_assert_uint_eq(n, 5);
	for (uint32_t k = 0; k < n; k++)
		ck_assert_uint_eq(x[k]->v.id, want[k]);
	ck_assert_uint_eq(waitq_len(&q), 3);
	waitq_release(&q);
}
END_TEST

/* The prefix cache's window: unpin() is asked for the requests of the
 * last window that are now outside it, in the queue's order, and only
 * those that held a lookup are remembered. */
static bool looked[16];
static uint32_t unpinned[16], n_unpinned;

static bool t_unpin(void *ctx, struct request *r)
{
	(void)ctx;
	if (!looked[r->v.id])
		return false;
	looked[r->v.id] = false;
	unpinned[n_unpinned++] = r->v.id;
	return true;
}

START_TEST(window_gives_back_lookups_of_those_that_left_it)
{
	static struct request rq[16];
	struct order_priv priv = { .kind = 0 };
	struct waitq_config c = {
		.order = &keyed_ops, .order_priv = &priv, .len = 4, .n_tenants = 1,
		.unpin = t_unpin,
	};
	struct waitq q;

	g_priv = &priv;
	ck_assert_int_eq(waitq_init(&q, &c), 0);
	memset(looked, 0, sizeof(looked));
	n_unpinned = 0;
	/* keys (prompt % 7) 3, 4, 5, 6: all four in the window */
	for (uint32_t i = 0; i < 4; i++) {
		rq[i].v = (struct req_view){ .id = i, .arrival_ns = i, .prompt_tokens = 3 + (int)i,
					     .state = REQ_QUEUED };
		ck_assert_int_eq(waitq_push(&q, &rq[i], WAITQ_NEVER, 0), 0);
	}
	ck_assert_int_eq(waitq_order(&q, 0), 0);
	for (uint32_t i = 0; i < 4; i++)
		looked[i] = i != 2;    /* 2's lookup found nothing */
	ck_assert_int_eq(waitq_window_done(&q, 4, 0), 0);
	ck_assert_uint_eq(n_unpinned, 0);
	/* three smaller keys push 1, 2 and 3 out of a window of 4 */
	for (uint32_t i = 4; i < 7; i++) {
		rq[i].v = (struct req_view){ .id = i, .arrival_ns = i, .prompt_tokens = (int)i - 4,
					     .state = REQ_QUEUED };
		ck_assert_int_eq(waitq_push(&q, &rq[i], WAITQ_NEVER, 1), 0);
	}
	ck_assert_int_eq(waitq_order(&q, 1), 0);
	ck_assert_uint_eq(waitq_items(&q)[3]->id, 0);
	ck_assert_int_eq(waitq_window_done(&q, 4, 1), 0);
	/* 1 and 3 let go, in key order; 2 held nothing; 0 is still in */
	ck_assert_uint_eq(n_unpinned, 2);
	ck_assert_uint_eq(unpinned[0], 1);
	ck_assert_uint_eq(unpinned[1], 3);
	ck_assert(looked[0]);
	/* an idle instance lets go of everything behind its head */
	looked[5] = looked[0] = true;
	ck_assert_int_eq(waitq_unpin_behind_head(&q), 1);
	ck_assert_uint_eq(n_unpinned, 4);
	ck_assert_int_eq(waitq_unpin_behind_head(&q), 0);
	waitq_release(&q);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("waitq");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, fifo_keeps_arrival_order_and_resumes_preempted_first);
	tcase_add_test(tc, static_keys_head_matches_sorted_model);
	tcase_add_test(tc, aging_head_matches_sorted_model);
	tcase_add_test(tc, moving_keys_sort_like_the_model);
	tcase_add_test(tc, tenant_keys_head_matches_sorted_model);
	tcase_add_test(tc, sorting_path_matches_the_model_for_every_order);
	tcase_add_test(tc, expiry_order_is_the_sorting_scan_order);
	tcase_add_test(tc, window_gives_back_lookups_of_those_that_left_it);
	suite_add_tcase(s, tc);
	return s;
}
