/* Host terms from whole-step residuals (calibrate/host-fit.h): the fit
 * recovers known per-step, per-token and per-emitted-row terms, holds a
 * term that would be negative at 0 (non-negative least squares), weighs
 * steps by relative error, and refuses input it cannot fit. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include <gsl/gsl_errno.h>

#include "check-main.h"
#include "host-fit.h"

/* Steps like the sweep's: decode batches (tokens = emitted rows), prefill
 * chunks (one row emitted) and mixed steps; kernels_ms made up, walls
 * kernels + the given host terms (us) times (1 + noise[i]). */
static size_t make_steps(struct host_step_obs *o, double a, double b, double c,
			 const double *noise)
{
	static const double tok[] = { 1, 4, 16, 64, 1, 4, 16, 64, 16, 64, 256, 1024, 132, 144 };
	static const double emit[] = { 1, 4, 16, 64, 1, 4, 16, 64, 1, 1, 1, 1, 5, 17 };
	size_t n = sizeof(tok) / sizeof(tok[0]);

	for (size_t i = 0; i < n; i++) {
		double kern = 0.4 + 0.05 * tok[i] + 0.01 * emit[i] * (i % 3);
		double wall = kern + (a + b * tok[i] + c * emit[i]) * 1e-3;

		o[i] = (struct host_step_obs){ .tokens = tok[i], .n_emit = emit[i],
			.wall_ms = wall * (1.0 + (noise ? noise[i] : 0.0)), .kernels_ms = kern };
	}
	return n;
}

START_TEST(recovers_the_three_terms)
{
	struct host_step_obs o[16];
	struct host_fit f;
	size_t n = make_steps(o, 90.0, 1.5, 45.0, NULL);

	ck_assert_int_eq(host_fit_run(o, n, &f, NULL), 0);
	ck_assert_uint_eq(f.n, n);
	ck_assert_uint_eq(f.free_mask, 7u);
	/* exact data: recovered to rounding */
	ck_assert_double_eq_tol(f.coef_us[HOST_FIT_STEP], 90.0, 1e-6);
	ck_assert_double_eq_tol(f.coef_us[HOST_FIT_TOKEN], 1.5, 1e-9);
	ck_assert_double_eq_tol(f.coef_us[HOST_FIT_EMIT], 45.0, 1e-6);
	ck_assert_double_eq_tol(f.rms_rel_after, 0.0, 1e-9);
	ck_assert_double_eq_tol(f.rms_rel_loo, 0.0, 1e-9);   /* exact terms carry to every step */
	ck_assert(f.rms_rel_before > 0.05);
	ck_assert_double_eq_tol(host_fit_eval(&f, 10, 2, 0), 90.0 + 15.0 + 90.0, 1e-6);
}
END_TEST

/* The sweep's steps at 8 layers and their decode batches at 1 layer (the
 * one-layer slice calibrate run times): the per-step and per-layer terms
 * come apart; with one depth only, the per-layer term stays 0 and the
 * per-step term carries both. */
START_TEST(separates_per_layer_from_per_step)
{
	struct host_step_obs o[32];
	struct host_fit f;
	size_t n = make_steps(o, 0.0, 1.5, 45.0, NULL), n8 = n;

	for (size_t i = 0; i < n8; i++) {
		o[i].layers = 8;
		o[i].wall_ms += (200.0 + 8 * 50.0) * 1e-3;
		if (i < 8) {   /* the decode batches, again at one layer */
			o[n] = o[i];
			o[n].layers = 1;
			o[n].kernels_ms /= 8.0;
			o[n].wall_ms = o[n].kernels_ms + (200.0 + 50.0 + 1.5 * o[i].tokens +
							  45.0 * o[i].n_emit) * 1e-3;
			n++;
		}
	}
	ck_assert_int_eq(host_fit_run(o, n, &f, NULL), 0);
	ck_assert_double_eq_tol(f.coef_us[HOST_FIT_STEP], 200.0, 1e-6);
	ck_assert_double_eq_tol(f.coef_us[HOST_FIT_LAYER], 50.0, 1e-6);
	ck_assert_double_eq_tol(f.coef_us[HOST_FIT_TOKEN], 1.5, 1e-9);
	ck_assert_double_eq_tol(host_fit_eval(&f, 1, 1, 1), 200.0 + 50.0 + 1.5 + 45.0, 1e-6);
	/* one depth: the same steps' host is 600 us a step, all of it
	 * per step */
	ck_assert_int_eq(host_fit_run(o, n8, &f, NULL), 0);
	ck_assert_double_eq_tol(f.coef_us[HOST_FIT_STEP], 600.0, 1e-6);
	ck_assert_double_eq(f.coef_us[HOST_FIT_LAYER], 0.0);
}
END_TEST

START_TEST(negative_term_is_held_at_zero)
{
	struct host_step_obs o[16];
	struct host_fit f;
	/* walls below kernels + per-step term for the big steps: the free
	 * per-token term would come out negative (-2 us) */
	size_t n = make_steps(o, 200.0, -2.0, 30.0, NULL);

	ck_assert_int_eq(host_fit_run(o, n, &f, NULL), 0);
	ck_assert_double_eq(f.coef_us[HOST_FIT_TOKEN], 0.0);
	ck_assert(!(f.free_mask & (1u << HOST_FIT_TOKEN)));
	for (int t = 0; t < HOST_FIT_TERMS; t++)
		ck_assert(f.coef_us[t] >= 0.0);
	/* the residual of operators that overprice every step: no host at all */
	n = make_steps(o, 0.0, 0.0, 0.0, NULL);
	for (size_t i = 0; i < n; i++)
		o[i].wall_ms *= 0.8;
	ck_assert_int_eq(host_fit_run(o, n, &f, NULL), 0);
	ck_assert_uint_eq(f.free_mask, 0u);
	ck_assert_double_eq(host_fit_eval(&f, 100, 10, 0), 0.0);
	ck_assert_double_eq_tol(f.rms_rel_after, f.rms_rel_before, 1e-12);
}
END_TEST

START_TEST(relative_weighting)
{
	struct host_step_obs o[16];
	struct host_fit f;
	size_t n = make_steps(o, 50.0, 1.0, 40.0, NULL);

	/* the 1024-token step 20% long: with weights 1/wall^2 it counts as
	 * one step of 14, so the fit stays within 5% on every other step
	 * (3.3% at most here); with unit weights its 17 ms excess would
	 * dominate and push the per-token term onto the small steps */
	o[11].wall_ms *= 1.2;
	ck_assert_int_eq(host_fit_run(o, n, &f, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		double pred = o[i].kernels_ms + host_fit_eval(&f, o[i].tokens, o[i].n_emit, o[i].layers) * 1e-3;

		if (i != 11)
			ck_assert_double_le(fabs(pred / o[i].wall_ms - 1.0), 0.05);
	}
	ck_assert_double_le(f.max_rel_after, 0.2);
	/* left out, the long step is predicted from the others' terms: its
	 * own 20% excess is the error, the others' stay small */
	ck_assert_double_gt(f.rms_rel_loo, f.rms_rel_after);
	ck_assert_double_le(f.rms_rel_loo, 0.2 / sqrt((double)n) + 0.03);
}
END_TEST

START_TEST(bad_input)
{
	struct host_step_obs o[16];
	struct host_fit f;
	struct ss_error err = { 0 };
	size_t n = make_steps(o, 50.0, 1.0, 40.0, NULL);

	ck_assert_int_eq(host_fit_run(o, 2, &f, &err), -EINVAL);
	o[3].wall_ms = NAN;
	ck_assert_int_eq(host_fit_run(o, n, &f, &err), -EINVAL);
	o[3].wall_ms = 1.0;
	o[4].tokens = 0;
	ck_assert_int_eq(host_fit_run(o, n, &f, &err), -EINVAL);
	/* one shape only: nothing to separate the terms */
	for (size_t i = 0; i < n; i++)
		o[i] = (struct host_step_obs){ .tokens = 8, .n_emit = 8, .wall_ms = 1.0 + 0.01 * i,
			.kernels_ms = 0.5 };
	ck_assert_int_eq(host_fit_run(o, n, &f, &err), -EDOM);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("host-fit");
	TCase *tc = tcase_create("core");

	gsl_set_error_handler_off();
	tcase_add_test(tc, recovers_the_three_terms);
	tcase_add_test(tc, separates_per_layer_from_per_step);
	tcase_add_test(tc, negative_term_is_held_at_zero);
	tcase_add_test(tc, relative_weighting);
	tcase_add_test(tc, bad_input);
	suite_add_tcase(s, tc);
	return s;
}
