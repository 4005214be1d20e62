/* Behaviours of analysis/sweep-grid: grid axes (lists, ranges with binary
 * fractions), the order of points, the mean and 95% Student t interval
 * over seeds against hand-computed figures, and the CSV.
 *
 * Hand computations (t quantiles from tables of Student's t):
 *   {1, 2, 3, 4, 5}: mean 3, s = sqrt(2.5) = 1.5811388, t(0.975, 4) = 2.7764451,
 *                    half-width 2.7764451 x 1.5811388 / sqrt(5) = 1.9632432
 *   {10, 12}:        mean 11, s = sqrt(2), t(0.975, 1) = 12.70620474,
 *                    half-width 12.70620474 x sqrt(2) / sqrt(2) = 12.70620474
 *   {7, 7, 7}:       mean 7, half-width 0
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sweep-grid.h"

#include "check-main.h"

static void parse_ok(struct sweep_axis *ax, const char *spec)
{
	struct ss_error err = { 0 };

	ck_assert_msg(sweep_axis_parse(ax, spec, &err) == 0, "%s: %s", spec, err.msg);
}

START_TEST(range_with_half_steps)
{
	static const char *const want[] = { "1", "1.5", "2", "2.5", "3", "3.5", "4" };
	struct sweep_axis ax;

	parse_ok(&ax, "rate-scale=1:4:0.5");
	ck_assert_str_eq(ax.key, "rate-scale");
	ck_assert_uint_eq(ax.n, 7);
	for (size_t i = 0; i < 7; i++)
		ck_assert_str_eq(ax.values[i], want[i]);
	sweep_axis_release(&ax);
	/* (0.3 - 0.1) / 0.1 is 1.9999999999999998 in binary: still 3 values,
	 * printed as written */
	parse_ok(&ax, "x=0.1:0.3:0.1");
	ck_assert_uint_eq(ax.n, 3);
	ck_assert_str_eq(ax.values[2], "0.3");
	sweep_axis_release(&ax);
	/* downwards, and a range of one */
	parse_ok(&ax, "x=2:1:-0.5");
	ck_assert_uint_eq(ax.n, 3);
	ck_assert_str_eq(ax.values[0], "2");
	ck_assert_str_eq(ax.values[2], "1");
	sweep_axis_release(&ax);
	parse_ok(&ax, "x=3:3:1");
	ck_assert_uint_eq(ax.n, 1);
	sweep_axis_release(&ax);
	/* a step that does not land on STOP stops before it */
	parse_ok(&ax, "chunk=256:1000:256");
	ck_assert_uint_eq(ax.n, 3);
	ck_assert_str_eq(ax.values[2], "768");
	sweep_axis_release(&ax);
}
END_TEST

START_TEST(lists)
{
	struct sweep_axis ax;

	parse_ok(&ax, "policy=vllm,sarathi,orca");
	ck_assert_uint_eq(ax.n, 3);
	ck_assert_str_eq(ax.values[1], "sarathi");
	sweep_axis_release(&ax);
	/* ';' when a value holds commas; a policy spec with ':' is no range */
	parse_ok(&ax, "policy=sarathi:token_budget=512,max_num_seqs=64;vllm:chunked=off");
	ck_assert_uint_eq(ax.n, 2);
	ck_assert_str_eq(ax.values[0], "sarathi:token_budget=512,max_num_seqs=64");
	ck_assert_str_eq(ax.values[1], "vllm:chunked=off");
	sweep_axis_release(&ax);
	parse_ok(&ax, "kv-overlap=on,off");
	ck_assert_uint_eq(ax.n, 2);
	sweep_axis_release(&ax);
}
END_TEST

START_TEST(bad_axes)
{
	static const char *const bad[] = { "policy", "=vllm", "policy=", "policy=a,,b", "tp=1,2,1",
					   "x=1:2:0", "x=2:1:0.5", "x=1:2:-1", "x=0:1e9:1" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sweep_axis ax;
		struct ss_error err = { 0 };

		ck_assert_msg(sweep_axis_parse(&ax, bad[i], &err) == -EINVAL, "%s accepted", bad[i]);
		ck_assert_msg(strstr(err.msg, "--sweep") != NULL, "%s: %s", bad[i], err.msg);
		sweep_axis_release(&ax);
	}
}
END_TEST

START_TEST(t_interval)
{
	const double five[] = { 1, 2, 3, 4, 5 }, two[] = { 10, 12 }, same[] = { 7, 7, 7 };
	const double one[] = { 42 }, with_nan[] = { 1, NAN, 3 };
	struct sweep_stat st;

	sweep_aggregate(five, 5, &st);
	ck_assert_uint_eq(st.n, 5);
	ck_assert_double_eq_tol(st.mean, 3, 1e-12);
	ck_assert_double_eq_tol(st.ci95, 1.9632432, 1e-6);
	sweep_aggregate(two, 2, &st);
	ck_assert_double_eq_tol(st.mean, 11, 1e-12);
	ck_assert_double_eq_tol(st.ci95, 12.7062047, 1e-6);
	sweep_aggregate(same, 3, &st);
	ck_assert_double_eq(st.mean, 7);
	ck_assert_double_eq(st.ci95, 0);
	/* one seed: a mean, no interval */
	sweep_aggregate(one, 1, &st);
	ck_assert_double_eq(st.mean, 42);
	ck_assert(isnan(st.ci95));
	sweep_aggregate(with_nan, 3, &st);
	ck_assert(isnan(st.mean) && isnan(st.ci95));
}
END_TEST

/* Two axes (2 x 3), two seeds: the last axis varies fastest; a point whose
 * runs are missing has no row; the CSV carries the hand-computed figures. */
START_TEST(table_and_csv)
{
	struct sweep_axis ax[2];
	double values[6 * 2 * SWM_COUNT];
	bool done[12] = { 0 };
	struct sweep_table t;
	struct sweep_stat st[SWM_COUNT];
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	parse_ok(&ax[0], "policy=vllm,sarathi");
	parse_ok(&ax[1], "rate-scale=1:2:0.5");
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		values[i] = 1.0;
	/* point 4 = (sarathi, 1.5): seeds give ttft_p99 10 and 12 */
	done[8] = done[9] = true;
	values[8 * SWM_COUNT + SWM_TTFT_P99] = 10;
	values[9 * SWM_COUNT + SWM_TTFT_P99] = 12;
	/* point 0: one seed only */
	done[0] = true;
	t = (struct sweep_table){ .axes = ax, .n_axes = 2, .n_points = 6, .seed0 = 0, .n_seeds = 2,
				  .values = values, .done = done };
	ck_assert_uint_eq(sweep_point_value(&t, 4, 0), 1);
	ck_assert_uint_eq(sweep_point_value(&t, 4, 1), 1);
	ck_assert_uint_eq(sweep_point_value(&t, 5, 1), 2);
	ck_assert_uint_eq(sweep_point_stats(&t, 4, st), 2);
	ck_assert_double_eq_tol(st[SWM_TTFT_P99].ci95, 12.7062047, 1e-6);
	ck_assert_uint_eq(sweep_point_stats(&t, 1, st), 0);
	f = open_memstream(&buf, &len);
	ck_assert_int_eq(sweep_write_csv(f, &t), 0);
	fclose(f);
	{
		const char *head = "policy,rate-scale,seeds,ttft_p50_ms_mean,ttft_p50_ms_ci95,";

		ck_assert_msg(!strncmp(buf, head, strlen(head)), "%s", buf);
	}
	/* the header and two rows: point 0 (no interval: empty) and point 4 */
	ck_assert_msg(strstr(buf, "\nvllm,1,1,1,,1,,1,,") != NULL, "%s", buf);
	ck_assert_msg(strstr(buf, "\nsarathi,1.5,2,1,0,1,0,11,12.70620474,") != NULL, "%s", buf);
	ck_assert_ptr_null(strstr(buf, "\nvllm,1.5"));
	free(buf);
	sweep_axis_release(&ax[0]);
	sweep_axis_release(&ax[1]);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("sweep");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, range_with_half_steps);
	tcase_add_test(tc, lists);
	tcase_add_test(tc, bad_axes);
	tcase_add_test(tc, t_interval);
	tcase_add_test(tc, table_and_csv);
	suite_add_tcase(s, tc);
	return s;
}
