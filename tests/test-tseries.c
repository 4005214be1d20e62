/* The time series stays within its bounds by doubling its interval, and
 * what it keeps is exactly what sampling at the final interval from the
 * start would have kept. */
#include <check.h>
#include <stdlib.h>

#include "check-main.h"
#include "tseries.h"

/* Sample n_inst instances every ts->interval_ns from t = 0 until t_end,
 * as the engine does; sample values carry their time and instance. */
static void run(struct tseries *ts, int64_t t_end)
{
	for (int64_t t = 0; t <= t_end; t += ts->interval_ns) {
		struct ts_sample *s = tseries_append(ts);

		ck_assert_ptr_nonnull(s);
		for (uint32_t i = 0; i < ts->n_inst; i++)
			s[i] = (struct ts_sample){ .t_ns = t, .instance = (int32_t)i,
						   .queued = (int32_t)(t / 10) };
	}
}

START_TEST(small_series_is_untouched)
{
	struct tseries ts;

	tseries_init(&ts, 2, 10, 100);
	run(&ts, 90);      /* 10 times x 2 instances = 20 samples, within 100 */
	ck_assert_uint_eq(ts.n, 20);
	ck_assert_int_eq(ts.interval_ns, 10);
	ck_assert_int_eq(ts.requested_ns, 10);
	for (uint64_t k = 0; k < ts.n; k++)
		ck_assert_int_eq(ts.s[k].t_ns, (int64_t)(k / 2) * 10);
	tseries_release(&ts);
}
END_TEST

START_TEST(long_series_coarsens_to_a_regular_grid)
{
	struct tseries ts;
	int64_t t_end = 1000000;   /* 100,001 sampling times at the requested 10 ns */

	/* 3 instances, at most 12 samples: 4 sampling times */
	tseries_init(&ts, 3, 10, 12);
	ck_assert_uint_eq(ts.max_times, 4);
	run(&ts, t_end);
	ck_assert_uint_le(ts.n, 12);
	ck_assert_uint_le(ts.cap, 12);
	ck_assert_int_gt(ts.interval_ns, 10);
	ck_assert_int_eq(ts.requested_ns, 10);
	/* a power-of-two multiple of the request */
	ck_assert_int_eq(ts.interval_ns % 10, 0);
	ck_assert_int_eq((ts.interval_ns / 10) & (ts.interval_ns / 10 - 1), 0);
	/* times 0, I, 2I, ... each with every instance in order, reaching
	 * within one interval of the end */
	ck_assert_uint_eq(ts.n % 3, 0);
	for (uint64_t k = 0; k < ts.n; k++) {
		ck_assert_int_eq(ts.s[k].t_ns, (int64_t)(k / 3) * ts.interval_ns);
		ck_assert_int_eq(ts.s[k].instance, (int32_t)(k % 3));
		ck_assert_int_eq(ts.s[k].queued, (int32_t)(ts.s[k].t_ns / 10));
	}
	ck_assert_int_gt(ts.s[ts.n - 1].t_ns + 2 * ts.interval_ns, t_end);
	tseries_release(&ts);
}
END_TEST

START_TEST(default_bounds)
{
	struct tseries ts;

	tseries_init(&ts, 1, 1, 0);
	ck_assert_uint_eq(ts.max_times, TSERIES_MAX_TIMES);
	tseries_init(&ts, 64, 1, 0);
	ck_assert_uint_eq(ts.max_times, TSERIES_MAX_SAMPLES / 64 & ~1ull);
	/* more instances than the budget: still two times, to coarsen between */
	tseries_init(&ts, 3000000, 1, 0);
	ck_assert_uint_eq(ts.max_times, 2);
	/* a tiny interval over a long run: bounded (the run itself is O(samples)) */
	tseries_init(&ts, 2, 1, 0);
	run(&ts, 50000000);          /* 5e7 ns at 1 ns: 5e7 times asked for */
	ck_assert_uint_le(ts.n / 2, TSERIES_MAX_TIMES);
	ck_assert_uint_le(ts.cap, 2 * TSERIES_MAX_TIMES);
	tseries_release(&ts);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("tseries");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, small_series_is_untouched);
	tcase_add_test(tc, long_series_coarsens_to_a_regular_grid);
	tcase_add_test(tc, default_bounds);
	suite_add_tcase(s, tc);
	return s;
}
