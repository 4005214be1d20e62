/* Regression fits and the "fit" cost model: weighted least squares
 * recovers exact linear data, its 95% prediction interval covers about
 * 95% of new noisy measurements and widens away from the data, the
 * features are the documented ones, and the fit model prices each
 * operator by its fit inside and outside the measured grid, counting the
 * latter (docs/cost-models.md). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "catalog.h"
#include "check-main.h"
#include "config.h"
#include "costmodel.h"
#include "fitting.h"
#include "grid.h"
#include "store.h"

START_TEST(wls_recovers_linear)
{
	double X[50 * 3], y[50];
	struct cal_fit f;
	struct ss_error err = { 0 };

	for (int i = 0; i < 50; i++) {
		X[3 * i] = 1.0;
		X[3 * i + 1] = i;
		X[3 * i + 2] = (i * 7) % 13;
		y[i] = 2.0 + 3.0 * X[3 * i + 1] + 0.5 * X[3 * i + 2];
	}
	gsl_set_error_handler_off();
	ck_assert_msg(cal_fit_wls(&f, X, y, 50, 3, &err) == 0, "%s", err.msg);
	ck_assert_double_eq_tol(f.c[0], 2.0, 1e-9);
	ck_assert_double_eq_tol(f.c[1], 3.0, 1e-9);
	ck_assert_double_eq_tol(f.c[2], 0.5, 1e-9);
	ck_assert(f.s2 < 1e-20);
	ck_assert_uint_eq(f.n, 50);
	ck_assert_double_eq_tol(cal_fit_eval(&f, (double[]){ 1, 100, 2 }), 303.0, 1e-7);
}
END_TEST

/* y = (1 + 0.5 x)(1 + 0.05 e), e ~ N(0, 1): 5% relative noise. */
START_TEST(prediction_interval_coverage)
{
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	double X[200 * 2], y[200], p, lo, hi, w_in, w_out, lo2, hi2;
	struct cal_fit f;
	struct ss_error err = { 0 };
	int inside = 0, trials = 4000;

	gsl_set_error_handler_off();
	gsl_rng_set(r, 7);
	for (int i = 0; i < 200; i++) {
		double x = 10.0 * gsl_rng_uniform(r);

		X[2 * i] = 1.0;
		X[2 * i + 1] = x;
		y[i] = (1.0 + 0.5 * x) * (1.0 + 0.05 * gsl_ran_gaussian(r, 1.0));
	}
	ck_assert_int_eq(cal_fit_wls(&f, X, y, 200, 2, &err), 0);
	ck_assert_double_eq_tol(f.s2, 0.05 * 0.05, 0.0008);
	for (int t = 0; t < trials; t++) {
		double x = 10.0 * gsl_rng_uniform(r);
		double meas = (1.0 + 0.5 * x) * (1.0 + 0.05 * gsl_ran_gaussian(r, 1.0));

		cal_fit_predict(&f, (double[]){ 1.0, x }, &p, &lo, &hi);
		ck_assert(lo < p && p < hi);
		inside += meas >= lo && meas <= hi;
	}
	/* binomial(4000, 0.95) has a standard deviation of 0.34% */
	ck_assert_msg(inside > 0.93 * trials && inside < 0.97 * trials, "%d of %d inside", inside,
		      trials);
	/* far from the data the fitted value is less certain: relative to the
	 * prediction the interval widens */
	cal_fit_predict(&f, (double[]){ 1.0, 5.0 }, &p, &lo, &hi);
	w_in = (hi - lo) / p;
	cal_fit_predict(&f, (double[]){ 1.0, 500.0 }, &p, &lo2, &hi2);
	w_out = (hi2 - lo2) / p;
	ck_assert(w_out > w_in);
	gsl_rng_free(r);
}
END_TEST

START_TEST(wls_errors)
{
	double X[6] = { 1, 1, 1, 2, 1, 3 }, y[3] = { 1, 2, 3 }, yneg[3] = { 1, -2, 3 };
	struct cal_fit f;
	struct ss_error err = { 0 };

	gsl_set_error_handler_off();
	ck_assert_int_eq(cal_fit_wls(&f, X, y, 2, 2, &err), -EDOM);
	ck_assert_int_eq(cal_fit_wls(&f, X, yneg, 3, 2, &err), -EDOM);
	ck_assert_ptr_nonnull(strstr(err.msg, "expected > 0"));
	ck_assert_int_eq(cal_fit_wls(&f, X, y, 3, CAL_FIT_MAX_P + 1, &err), -EINVAL);
	ck_assert_int_eq(cal_fit_wls(&f, X, y, 3, 2, &err), 0);
}
END_TEST

START_TEST(features)
{
	struct cal_series s = { 0 };
	double f[CAL_FIT_MAX_P];

	s.op = CAL_GEMM;
	s.ndim = 3;
	ck_assert_int_eq(cal_series_features(&s, (double[]){ 2, 3, 5 }, f), 3);
	ck_assert_double_eq_tol(f[1], 60e-9, 1e-20);
	ck_assert_double_eq_tol(f[2], 2.0 * (15 + 10 + 6) * 1e-6, 1e-18);
	s.ndim = 1;
	s.key[0] = 3;
	s.key[1] = 5;
	ck_assert_int_eq(cal_series_features(&s, (double[]){ 2 }, f), 3);
	ck_assert_double_eq_tol(f[1], 60e-9, 1e-20);
	s.op = CAL_ATTN_DECODE;
	s.ndim = 2;
	ck_assert_int_eq(cal_series_features(&s, (double[]){ 4, 100 }, f), 3);
	ck_assert_double_eq(f[1], 4.0);
	ck_assert_double_eq_tol(f[2], 0.4, 1e-15);
	s.op = CAL_ATTN_PREFILL;
	s.ndim = 3;
	ck_assert_int_eq(cal_series_features(&s, (double[]){ 10, 4, 2 }, f), 3);
	ck_assert_double_eq_tol(f[1], 8e-3, 1e-15);
	ck_assert_double_eq_tol(f[2], 2.0 * (40 + 10) * 1e-6, 1e-15);
	s.op = CAL_ALL_REDUCE;
	s.ndim = 1;
	ck_assert_int_eq(cal_series_features(&s, (double[]){ 2e6 }, f), 2);
	ck_assert_double_eq_tol(f[1], 2.0, 1e-12);
	s.op = CAL_RMSNORM;
	s.key[0] = 4096;
	ck_assert_int_eq(cal_series_features(&s, (double[]){ 1000 }, f), 2);
	ck_assert_double_eq_tol(f[1], 4.096, 1e-12);
}
END_TEST

/* ---- the fit cost model on data that is exactly linear in the features ---- */

#define DEV "h100-sxm"
#define MODEL "llama-3.2-1b"
#define LAYERS 16.0

static struct catalog cat;
static char dir[256], path[512];
static const char *stores[1] = { path };

static double lin_gemm(double m, double n, double k)
{
	return 0.003 + 0.01 * 2.0 * m * n * k * 1e-9 + 0.0004 * 2.0 * (n * k + m * k + m * n) * 1e-6;
}

static double lin_dec(double b, double kv_tokens)
{
	return 0.01 + 0.002 * b + 0.003 * kv_tokens * 1e-3;
}

static double lin_pf(double tokens, double positions)
{
	return 0.02 + 0.004 * tokens * 1e-3 + 0.001 * positions * 1e-6;
}

static void put(struct cal_store *s, struct cal_meas *m, double ms)
{
	struct ss_error err = { 0 };

	m->mean_ms = ms;
	snprintf(m->device, sizeof(m->device), DEV);
	snprintf(m->dtype, sizeof(m->dtype), "bf16");
	snprintf(m->variant, sizeof(m->variant), "synthetic");
	ck_assert_msg(cal_store_insert(s, m, &err) == 0, "%s", err.msg);
}

static void setup(void)
{
	static const double ns[] = { 1024, 2048, 3072, 16384, 65536 }, ks[] = { 1024, 2048, 8192 };
	struct ss_error err = { 0 };
	const char *d = getenv("SERVESIM_DATA");
	struct cal_store *s;
	struct cal_meas m;

	gsl_set_error_handler_off();
	catalog_init(&cat);
	ck_assert_int_eq(catalog_load_dir(&cat, d && *d ? d : SERVESIM_SRC_DATADIR, &err), 0);
	snprintf(dir, sizeof(dir), "/tmp/ss-fit-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/linear.db", dir);
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_CREATE, &err), 0);
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	for (double mm = 1; mm <= 4096; mm *= 2)
		for (int i = 0; i < 5; i++)
			for (int j = 0; j < 3; j++) {
				cal_meas_init(&m, CAL_GEMM);
				m.m = (int64_t)mm;
				m.n = (int64_t)ns[i];
				m.k = (int64_t)ks[j];
				put(s, &m, lin_gemm(mm, ns[i], ks[j]));
			}
	for (int64_t b = 1; b <= 64; b *= 2)
		for (int64_t l = 2; l <= 16384; l *= 4) {
			cal_meas_init(&m, CAL_ATTN_DECODE);
			m.batch = b;
			m.q_len = 1;
			m.kv_len = l;
			m.heads = 32;
			m.kv_heads = 8;
			m.head_dim = 64;
			put(s, &m, lin_dec((double)b, (double)(b * l)));
		}
	for (int64_t b = 1; b <= 8; b *= 2)
		for (int64_t q = 16; q <= 4096; q *= 4) {
			cal_meas_init(&m, CAL_ATTN_PREFILL);
			m.batch = b;
			m.q_len = q;
			m.kv_len = 0;
			m.heads = 32;
			m.kv_heads = 8;
			m.head_dim = 64;
			put(s, &m, lin_pf((double)(b * q), b * 0.5 * q * (q + 1.0)));
		}
	ck_assert_int_eq(cal_store_commit(s, &err), 0);
	cal_store_close(s);
}

static void teardown(void)
{
	unlink(path);
	rmdir(dir);
	catalog_release(&cat);
}

static struct cost_model *make(const char *spec)
{
	struct cost_config cfg = {
		.model = catalog_model(&cat, MODEL), .gpu = catalog_gpu(&cat, DEV), .tp = 1,
		.stores = stores, .n_stores = 1,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	ck_assert_msg(cost_model_new(&cm, spec, &cfg, &err) == 0, "%s: %s", spec, err.msg);
	return cm;
}

static struct cost_result run(struct cost_model *cm, const struct cost_item *it, uint32_t n)
{
	struct cost_step s = { .items = it, .n_items = n };
	struct cost_result r;
	int64_t sum = 0;

	for (uint32_t i = 0; i < n; i++) {
		s.total_tokens += it[i].tokens;
		s.n_prefill += it[i].tokens > 1;
		s.n_emit++;
	}
	cost_model_step(cm, &s, &r);
	for (int op = 0; op < COST_OP_COUNT; op++)
		sum += r.op_ns[op];
	ck_assert_int_eq(sum, r.duration_ns);
	return r;
}

/* The fit is exact on linear data: nanoseconds apart at most. */
#define ck_assert_ns(got_ns, want_ms) \
	ck_assert_msg(llabs((got_ns) - llround((want_ms) * 1e6)) <= 2, \
		      "%s: %lld ns, expected %.3f ns", #got_ns, (long long)(got_ns), (want_ms) * 1e6)

static double gemm_step(double m)
{
	return LAYERS * (lin_gemm(m, 3072, 2048) + lin_gemm(m, 2048, 2048) +
			 lin_gemm(m, 16384, 2048) + lin_gemm(m, 2048, 8192));
}

START_TEST(fit_model_everywhere)
{
	struct cost_model *cm = make("fit");
	struct cost_item it[200], pf = { 100, 500 };
	struct cost_result r, rm;

	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_GEMM), "fit");
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_ATTN_PREFILL), "fit");
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_ATTN_DECODE), "fit");
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_ELEMENTWISE), "roofline");
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_HOST), "roofline");
	/* decode, inside the grid; mixed lengths equal the mean length (linear) */
	for (int i = 0; i < 8; i++)
		it[i] = (struct cost_item){ 1, i % 2 ? 15 : 8191 };
	r = run(cm, it, 8);
	ck_assert_ns(r.op_ns[COST_OP_ATTN_DECODE], LAYERS * lin_dec(8, 8 * (16 + 8192) / 2.0));
	ck_assert_ns(r.op_ns[COST_OP_GEMM], gemm_step(8));
	ck_assert_int_eq(r.out_of_grid, 0);
	for (int i = 0; i < 8; i++)
		it[i] = (struct cost_item){ 1, (16 + 8192) / 2 - 1 };
	rm = run(cm, it, 8);
	ck_assert_int_le(llabs(rm.op_ns[COST_OP_ATTN_DECODE] - r.op_ns[COST_OP_ATTN_DECODE]), 2);
	/* 200 decodes: beyond the measured batch sizes, counted */
	for (int i = 0; i < 200; i++)
		it[i] = (struct cost_item){ 1, 99 };
	r = run(cm, it, 200);
	ck_assert_ns(r.op_ns[COST_OP_ATTN_DECODE], LAYERS * lin_dec(200, 200 * 100.0));
	ck_assert_int_eq(r.out_of_grid, 200);
	/* a chunk with prior context: [1, tokens, causal positions] */
	r = run(cm, &pf, 1);
	ck_assert_ns(r.op_ns[COST_OP_ATTN_PREFILL], LAYERS * lin_pf(100, 100 * 500 + 5050));
	ck_assert_ns(r.op_ns[COST_OP_GEMM], gemm_step(100));
	/* GEMM beyond the grid: the same fit, counted */
	pf = (struct cost_item){ 6000, 0 };
	r = run(cm, &pf, 1);
	ck_assert_ns(r.op_ns[COST_OP_GEMM], gemm_step(6000));
	ck_assert_int_ge(r.out_of_grid, 2);
	cost_model_free(cm);
}
END_TEST

/* The table model on the same data agrees with the fit at measured points
 * and prices the same out-of-grid query with the fit. */
START_TEST(table_uses_fit_outside)
{
	struct cost_model *tab = make("table"), *fit = make("fit");
	struct cost_item it[200];
	struct cost_result a, b;

	for (int i = 0; i < 200; i++)
		it[i] = (struct cost_item){ 1, 99 };
	a = run(tab, it, 200);
	b = run(fit, it, 200);
	ck_assert_int_eq(a.out_of_grid, 200);
	ck_assert_int_le(llabs(a.op_ns[COST_OP_ATTN_DECODE] - b.op_ns[COST_OP_ATTN_DECODE]), 2);
	a = run(tab, it, 16);
	b = run(fit, it, 16);
	ck_assert_int_eq(a.out_of_grid, 0);
	ck_assert_int_le(llabs(a.op_ns[COST_OP_ATTN_DECODE] - b.op_ns[COST_OP_ATTN_DECODE]), 2);
	cost_model_free(tab);
	cost_model_free(fit);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("fit");
	TCase *tc = tcase_create("fitting");

	tcase_add_test(tc, wls_recovers_linear);
	tcase_add_test(tc, prediction_interval_coverage);
	tcase_add_test(tc, wls_errors);
	tcase_add_test(tc, features);
	suite_add_tcase(s, tc);
	tc = tcase_create("model");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, fit_model_everywhere);
	tcase_add_test(tc, table_uses_fit_outside);
	suite_add_tcase(s, tc);
	return s;
}
