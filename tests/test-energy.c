/* Energy accounting and the power-cap / clock model: the DVFS transform's
 * arithmetic, the cap search, and what a capped or clock-locked run
 * reports (docs/energy.md). */
#include <math.h>

#include "check-main.h"
#include "engine-fixture.h"

START_TEST(clock_ratio_stretches_compute_and_scales_dynamic_energy)
{
	/* 10 ms step, 4 ms compute-bound, 5 J of which idle 100 W x 10 ms = 1 J */
	struct cost_result r = { .duration_ns = 10000000, .energy_j = 5.0, .compute_ns = 4000000 };

	r.op_ns[COST_OP_GEMM] = 6000000;
	r.op_ns[COST_OP_ATTN_DECODE] = 4000000;
	cost_result_at_clock(&r, 0.5, 100.0);
	/* T = 4 / 0.5 + 6 = 14 ms; E = 100 W x 14 ms + 4 J x 0.25 = 2.4 J */
	ck_assert_int_eq(r.duration_ns, 14000000);
	ck_assert_double_eq_tol(r.energy_j, 2.4, 1e-9);
	ck_assert_int_eq(r.op_ns[COST_OP_GEMM] + r.op_ns[COST_OP_ATTN_DECODE], 14000000);
	ck_assert_int_eq(r.compute_ns, 8000000);
}
END_TEST

START_TEST(full_clock_is_identity)
{
	struct cost_result r = { .duration_ns = 7, .energy_j = 1.5, .compute_ns = 3 };
	struct cost_result before;

	r.op_ns[COST_OP_HOST] = 7;
	before = r;
	cost_result_at_clock(&r, 1.0, 50.0);
	ck_assert_mem_eq(&r, &before, sizeof(r));
}
END_TEST

START_TEST(cap_search_meets_the_cap)
{
	/* 1 s at 600 W (idle 60 W), all compute-bound */
	struct cost_result r = { .duration_ns = 1000000000, .energy_j = 600.0,
				 .compute_ns = 1000000000 };
	struct cost_result x;
	double ratio;

	r.op_ns[COST_OP_GEMM] = 1000000000;
	ck_assert_double_eq(cost_clock_for_cap(&r, 700.0, 60.0), 1.0);   /* under the cap */
	ratio = cost_clock_for_cap(&r, 300.0, 60.0);
	ck_assert_double_lt(ratio, 1.0);
	x = r;
	cost_result_at_clock(&x, ratio, 60.0);
	/* all compute-bound: P(r) = 60 + 540 r^3, so r = (240/540)^(1/3) */
	ck_assert_double_eq_tol(ratio, cbrt(240.0 / 540.0), 1e-6);
	ck_assert_double_le(x.energy_j / (x.duration_ns * 1e-9), 300.0 + 1e-6);
	/* a cap below what the lowest clock draws: lowest clock */
	ck_assert_double_eq(cost_clock_for_cap(&r, 61.0, 60.0), CLOCK_FRAC_MIN);
}
END_TEST

static void run_scenario(double cap_w, double clock, struct summary *s)
{
	enum { N = 200 };
	struct wl_request rq[N];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct slo_config slo = { 0 };
	struct ss_error err = { 0 };
	struct engine *e;

	for (int i = 0; i < N; i++)
		rq[i] = (struct wl_request){ .arrival_ns = i * 20000000LL,
					     .prompt_tokens = 500 + 37 * (i % 11),
					     .output_tokens = 20 + 13 * (i % 7) };
	wl_fill(&wl, rq, N);
	cfg_tiny(&c, "roofline", "vllm", 2000);
	c.power_cap_w = cap_w;
	c.clock_frac = clock;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(summary_compute(s, &r, &slo, 1, &err), 0);
	engine_free(e);
}

START_TEST(phases_add_up_and_cap_bounds_peak_power)
{
	struct summary free_run, capped, locked;
	double cap;

	run_scenario(0, 0, &free_run);
	/* prefill + decode = busy; busy + idle = total */
	ck_assert_double_eq_tol(free_run.energy_prefill_j + free_run.energy_decode_j,
				free_run.energy_busy_j, 1e-6 * free_run.energy_busy_j);
	ck_assert_double_eq_tol(free_run.energy_busy_j + free_run.energy_idle_j,
				free_run.energy_j, 1e-9 * free_run.energy_j);
	ck_assert_double_gt(free_run.energy_prefill_j, 0);
	ck_assert_double_gt(free_run.energy_decode_j, 0);
	ck_assert_double_le(free_run.peak_power_w_per_gpu, tiny_gpu.tdp_w + 1e-6);

	cap = 0.5 * (tiny_gpu.idle_w + free_run.peak_power_w_per_gpu);
	run_scenario(cap, 0, &capped);
	ck_assert_double_le(capped.peak_power_w_per_gpu, cap + 1e-6);
	/* slower, and less energy per token (dynamic energy ~ r^2) */
	ck_assert_double_gt(capped.e2e_ms.mean, free_run.e2e_ms.mean);
	ck_assert_double_lt(capped.j_per_output_token, free_run.j_per_output_token);

	run_scenario(0, 0.5, &locked);
	ck_assert_double_gt(locked.ttft_ms.mean, free_run.ttft_ms.mean);
	ck_assert_double_lt(locked.peak_power_w_per_gpu, free_run.peak_power_w_per_gpu);
}
END_TEST

START_TEST(bad_cap_or_clock_is_an_error)
{
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 2 } };
	struct workload wl;
	struct engine_config c;
	struct ss_error err = { 0 };
	struct engine *e = NULL;

	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, "roofline", "vllm", 10);
	c.power_cap_w = tiny_gpu.idle_w - 1;
	ck_assert_int_lt(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "idle power"));
	cfg_tiny(&c, "roofline", "vllm", 10);
	c.clock_frac = 0.1;
	ck_assert_int_lt(engine_new(&e, &c, &wl, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "--gpu-clock"));
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("energy");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, clock_ratio_stretches_compute_and_scales_dynamic_energy);
	tcase_add_test(tc, full_clock_is_identity);
	tcase_add_test(tc, cap_search_meets_the_cap);
	tcase_add_test(tc, phases_add_up_and_cap_bounds_peak_power);
	tcase_add_test(tc, bad_cap_or_clock_is_an_error);
	suite_add_tcase(s, tc);
	return s;
}
