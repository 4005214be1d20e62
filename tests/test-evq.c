/* The event queue fires events in (time, priority, push order) and cancels
 * any queued event. */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check-main.h"
#include "evq.h"

START_TEST(orders_by_time_then_prio_then_seq)
{
	struct evq q;
	struct event ev[5];

	ck_assert_int_eq(evq_init(&q, 2), 0);
	event_init(&ev[0], 0, 2, 0);   /* t=10 prio 2 */
	event_init(&ev[1], 0, 1, 1);   /* t=10 prio 1 */
	event_init(&ev[2], 0, 1, 2);   /* t=10 prio 1, pushed after ev[1] */
	event_init(&ev[3], 0, 0, 3);   /* t=5 */
	event_init(&ev[4], 0, 0, 4);   /* t=20 prio 0 */
	evq_push(&q, &ev[0], 10);
	evq_push(&q, &ev[1], 10);
	evq_push(&q, &ev[4], 20);
	evq_push(&q, &ev[2], 10);
	evq_push(&q, &ev[3], 5);
	ck_assert_uint_eq(evq_size(&q), 5);
	ck_assert_uint_eq(evq_pop(&q)->target, 3);
	ck_assert_uint_eq(evq_pop(&q)->target, 1);
	ck_assert_uint_eq(evq_pop(&q)->target, 2);
	ck_assert_uint_eq(evq_pop(&q)->target, 0);
	ck_assert_uint_eq(evq_pop(&q)->target, 4);
	ck_assert_ptr_null(evq_pop(&q));
	ck_assert(!event_queued(&ev[4]));
	evq_release(&q);
}
END_TEST

static int cmp_key(const void *a, const void *b)
{
	const struct event *x = *(struct event *const *)a, *y = *(struct event *const *)b;

	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	if (x->prio != y->prio)
		return x->prio < y->prio ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

START_TEST(random_push_cancel_matches_sorted_reference)
{
	enum { N = 5000 };
	struct event *ev = calloc(N, sizeof(*ev));
	struct event **ref = calloc(N, sizeof(*ref));
	struct evq q;
	uint32_t n_ref = 0;
	uint64_t x = 99;

	ck_assert_int_eq(evq_init(&q, 1), 0);
	for (int i = 0; i < N; i++) {
		x = x * 6364136223846793005ULL + 1;
		event_init(&ev[i], 0, (uint32_t)(x >> 62), (uint32_t)i);
		evq_push(&q, &ev[i], (int64_t)((x >> 33) % 1000));
	}
	/* cancel every third event */
	for (int i = 0; i < N; i += 3)
		evq_cancel(&q, &ev[i]);
	for (int i = 0; i < N; i++)
		if (i % 3)
			ref[n_ref++] = &ev[i];
	qsort(ref, n_ref, sizeof(*ref), cmp_key);
	ck_assert_uint_eq(evq_size(&q), n_ref);
	for (uint32_t k = 0; k < n_ref; k++)
		ck_assert_ptr_eq(evq_pop(&q), ref[k]);
	ck_assert_uint_eq(evq_size(&q), 0);
	evq_release(&q);
	free(ev);
	free(ref);
}
END_TEST

/* The reference: the first of the queued events by (time, prio, seq),
 * found by a scan. */
static struct event *ref_first(struct event *ev, const bool *in, int n)
{
	struct event *best = NULL;

	for (int i = 0; i < n; i++)
		if (in[i] && (!best || cmp_key(&(struct event *){ &ev[i] }, &best) < 0))
			best = &ev[i];
	return best;
}

/* As a simulation uses it: pops interleaved with pushes at or after the
 * time popped (often at that time, often the next to fire, which is kept
 * beside the heap), and cancels of any queued event, the one beside the
 * heap included.  Every pop is the reference's first. */
START_TEST(interleaved_like_a_simulation_matches_reference)
{
	enum { N = 64, OPS = 200000 };
	struct event ev[N];
	bool in[N] = { false };
	struct evq q;
	uint64_t x = 7;
	int64_t now = 0;
	uint32_t queued = 0, fronts = 0;

	ck_assert_int_eq(evq_init(&q, 1), 0);
	for (int i = 0; i < N; i++)
		event_init(&ev[i], 0, (uint32_t)(i % 4), (uint32_t)i);
	for (int op = 0; op < OPS; op++) {
		int i;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		i = (int)((x >> 40) % N);
		switch ((x >> 20) % 4) {
		case 0:
		case 1:   /* push, now or a little later */
			if (!in[i]) {
				ck_assert_int_eq(evq_push(&q, &ev[i], now + (int64_t)((x >> 8) % 3) * ((x >> 12) % 50)), 0);
				in[i] = true;
				queued++;
				fronts += ev[i].heap_idx == EVQ_FRONT;
			}
			break;
		case 2:   /* pop */
			if (queued) {
				struct event *want = ref_first(ev, in, N), *got = evq_pop(&q);

				ck_assert_ptr_eq(got, want);
				ck_assert(!event_queued(got));
				in[got->target] = false;
				queued--;
				now = got->time_ns;
			} else {
				ck_assert_ptr_null(evq_pop(&q));
			}
			break;
		default:  /* cancel */
			if (in[i]) {
				evq_cancel(&q, &ev[i]);
				ck_assert(!event_queued(&ev[i]));
				in[i] = false;
				queued--;
			}
		}
		ck_assert_uint_eq(evq_size(&q), queued);
		ck_assert_ptr_eq(evq_peek(&q), queued ? ref_first(ev, in, N) : NULL);
	}
	ck_assert_uint_gt(fronts, OPS / 20);   /* the path beside the heap was taken */
	evq_release(&q);
}
END_TEST

START_TEST(requeue_after_pop)
{
	struct evq q;
	struct event a, b;

	evq_init(&q, 4);
	event_init(&a, 0, 0, 1);
	event_init(&b, 0, 0, 2);
	evq_push(&q, &a, 3);
	evq_push(&q, &b, 4);
	ck_assert_ptr_eq(evq_pop(&q), &a);
	evq_push(&q, &a, 5);
	ck_assert_ptr_eq(evq_peek(&q), &b);
	evq_cancel(&q, &b);
	ck_assert_ptr_eq(evq_pop(&q), &a);
	evq_release(&q);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("evq");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, orders_by_time_then_prio_then_seq);
	tcase_add_test(tc, random_push_cancel_matches_sorted_reference);
	tcase_add_test(tc, requeue_after_pop);
	tcase_add_test(tc, interleaved_like_a_simulation_matches_reference);
	suite_add_tcase(s, tc);
	return s;
}
