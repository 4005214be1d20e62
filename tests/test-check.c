/* `calibrate check`: k-fold hold-out error and the cross-source check.
 *
 *   test-check            synthetic stores: exact data gives ~0 error,
 *                         every held-out point is scored or counted as
 *                         outside, folds are deterministic, the JSON report
 *                         has the documented shape and is written atomically
 *   test-check shipped    the shipped store ($SERVESIM_DATA/calibration.db;
 *                         exit 77 when it is missing): the fidelity targets
 *                         on the aiconfigurator H100 tables (GEMM and decode
 *                         attention MAPE <= 5%, prefill attention <= 8%) and
 *                         the selection helper (h100-sxm + llama-3.1-8b yes,
 *                         l40s no). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>
#include <jansson.h>

#include "catalog.h"
#include "config.h"
#include "costmodel.h"
#include "fidelity.h"
#include "store.h"

/* ---- synthetic ------------------------------------------------------------ */

static char dir[256], path[512];

/* Exactly linear in the fit's features: the fit prior is exact, so
 * interpolation between nodes is too. */
static double lin_gemm(double m, double n, double k)
{
	return 0.003 + 0.01 * 2.0 * m * n * k * 1e-9 + 0.0004 * 2.0 * (n * k + m * k + m * n) * 1e-6;
}

static void put(struct cal_store *s, struct cal_meas *m, const char *dev, const char *variant,
		const char *source, double ms)
{
	struct ss_error err = { 0 };

	m->mean_ms = ms;
	snprintf(m->device, sizeof(m->device), "%s", dev);
	snprintf(m->dtype, sizeof(m->dtype), "bf16");
	snprintf(m->variant, sizeof(m->variant), "%s", variant);
	snprintf(m->source, sizeof(m->source), "%s", source);
	ck_assert_msg(cal_store_insert(s, m, &err) == 0, "%s", err.msg);
}

static size_t n_gemm, n_dec, n_norm;

static void setup(void)
{
	static const double ns[] = { 1024, 2048, 3072, 6144, 16384 }, ks[] = { 1024, 2048, 8192 };
	struct ss_error err = { 0 };
	struct cal_store *s;
	struct cal_meas m;

	gsl_set_error_handler_off();
	snprintf(dir, sizeof(dir), "/tmp/ss-check-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/synthetic.db", dir);
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_CREATE, &err), 0);
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	n_gemm = n_dec = n_norm = 0;
	for (double mm = 1; mm <= 4096; mm *= 2)
		for (int i = 0; i < 5; i++)
			for (int j = 0; j < 3; j++) {
				cal_meas_init(&m, CAL_GEMM);
				m.m = (int64_t)mm;
				m.n = (int64_t)ns[i];
				m.k = (int64_t)ks[j];
				put(s, &m, "h100-sxm", "synthetic", "aiconfigurator/x.csv",
				    lin_gemm(mm, ns[i], ks[j]));
				n_gemm++;
			}
	for (int64_t b = 1; b <= 64; b *= 2)
		for (int64_t l = 2; l <= 16384 && b * l <= (1 << 17); l *= 2) {
			cal_meas_init(&m, CAL_ATTN_DECODE);
			m.batch = b;
			m.q_len = 1;
			m.kv_len = l;
			m.heads = 32;
			m.kv_heads = 8;
			m.head_dim = 64;
			put(s, &m, "h100-sxm", "synthetic", "aiconfigurator/y.csv",
			    0.01 + 0.002 * b + 0.003 * b * l * 1e-3);
			n_dec++;
		}
	for (int64_t t = 1; t <= 4096; t *= 2) {
		cal_meas_init(&m, CAL_RMSNORM);
		m.tokens = t;
		m.width = 4096;
		put(s, &m, "a100-80gb-sxm", "vidur:input_layernorm", "vidur/z.csv",
		    0.002 + 0.001 * t * 4096 * 1e-6);
		n_norm++;
	}
	/* cross-source: Vidur's attn_pre_proj of a model with d 2048, 16 heads
	 * of 128 (QKV n = 6144, k = 2048 at tp 1), equal to the grid */
	for (int64_t mm = 1; mm <= 4096; mm *= 4) {
		cal_meas_init(&m, CAL_GEMM);
		m.m = mm;
		m.n = 6144;
		m.k = 2048;
		m.tp = 1;
		put(s, &m, "h100-sxm", "vidur:attn_pre_proj", "vidur/compute/mlp.csv",
		    lin_gemm((double)mm, 6144, 2048));
	}
	ck_assert_int_eq(cal_store_commit(s, &err), 0);
	cal_store_close(s);
}

static void teardown(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[1024];

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

static const struct cal_check_row *find(const struct cal_check_report *r, const char *dev,
					const char *op)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->rows[i].device, dev) && !strcmp(r->rows[i].op, op))
			return &r->rows[i];
	return NULL;
}

static void kfold(struct cal_check_report *rep, int folds, const char *device)
{
	struct cal_check_opts o = { .folds = folds, .device = device };
	struct ss_error err = { 0 };
	struct cal_store *st;

	ck_assert_int_eq(cal_store_open(&st, path, CAL_OPEN_READONLY, &err), 0);
	cal_check_report_init(rep);
	ck_assert_msg(cal_check_kfold(st, &o, rep, &err) == 0, "%s", err.msg);
	cal_store_close(st);
}

START_TEST(kfold_exact_data)
{
	struct cal_check_report rep, again;
	const struct cal_check_row *g, *d, *n, *v;

	kfold(&rep, 5, NULL);
	g = find(&rep, "h100-sxm", "gemm");
	d = find(&rep, "h100-sxm", "attn_decode");
	n = find(&rep, "a100-80gb-sxm", "rmsnorm");
	v = find(&rep, "h100-sxm", "gemm.vidur");
	ck_assert_ptr_nonnull(g);
	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(n);
	ck_assert_ptr_nonnull(v);
	/* every held-out point is scored or counted as outside */
	ck_assert_uint_eq(g->n + g->n_outside, n_gemm);
	ck_assert_uint_eq(d->n + d->n_outside, n_dec);
	ck_assert_uint_eq(n->n + n->n_outside, n_norm);
	ck_assert_uint_gt(g->n, n_gemm / 2);
	ck_assert_uint_gt(d->n, n_dec / 2);
	/* data exactly linear in the fit's features: no error, table or fit */
	ck_assert_msg(g->mape_pct < 1e-6 && g->p90_ape_pct < 1e-6, "%g %g", g->mape_pct,
		      g->p90_ape_pct);
	ck_assert(d->mape_pct < 1e-6 && n->mape_pct < 1e-6);
	ck_assert(g->fit_mape_pct < 1e-6 && d->fit_mape_pct < 1e-6);
	ck_assert_uint_eq(g->fit_n, n_gemm);
	/* deterministic: the same folds every time */
	kfold(&again, 5, NULL);
	ck_assert_uint_eq(again.n, rep.n);
	for (size_t i = 0; i < rep.n; i++) {
		ck_assert_str_eq(again.rows[i].op, rep.rows[i].op);
		ck_assert_uint_eq(again.rows[i].n, rep.rows[i].n);
		ck_assert_uint_eq(again.rows[i].n_outside, rep.rows[i].n_outside);
	}
	cal_check_report_release(&again);
	/* one device only */
	kfold(&again, 3, "a100-80gb-sxm");
	ck_assert_uint_eq(again.n, 1);
	ck_assert_str_eq(again.rows[0].op, "rmsnorm");
	cal_check_report_release(&again);
	cal_check_report_release(&rep);
}
END_TEST

/* A point off the smooth surface shows up in the error. */
START_TEST(kfold_sees_outlier)
{
	struct ss_error err = { 0 };
	struct cal_check_report rep;
	struct cal_store *st;
	struct cal_meas m;
	const struct cal_check_row *r;

	ck_assert_int_eq(cal_store_open(&st, path, CAL_OPEN_WRITE, &err), 0);
	for (int64_t t = 3; t <= 3000; t *= 10) {
		cal_meas_init(&m, CAL_RMSNORM);
		m.tokens = t;
		m.width = 4096;
		put(st, &m, "a100-80gb-sxm", "vidur:input_layernorm", "vidur/z.csv",
		    2.0 * (0.002 + 0.001 * t * 4096 * 1e-6));
	}
	cal_store_close(st);
	kfold(&rep, 5, "a100-80gb-sxm");
	r = find(&rep, "a100-80gb-sxm", "rmsnorm");
	ck_assert_ptr_nonnull(r);
	ck_assert_msg(r->mape_pct > 1.0 && r->p90_ape_pct > r->mape_pct, "%g %g", r->mape_pct,
		      r->p90_ape_pct);
	cal_check_report_release(&rep);
}
END_TEST

START_TEST(json_report)
{
	struct cal_check_report rep;
	struct ss_error err = { 0 };
	char out[600];
	json_error_t je;
	json_t *root, *o;
	DIR *d;
	struct dirent *e;
	int files = 0;

	kfold(&rep, 5, NULL);
	snprintf(out, sizeof(out), "%s/check.json", dir);
	ck_assert_msg(cal_check_write_json(&rep, out, &err) == 0, "%s", err.msg);
	root = json_load_file(out, 0, &je);
	ck_assert_msg(root != NULL, "%s", je.text);
	o = json_object_get(json_object_get(root, "h100-sxm"), "attn_decode");
	ck_assert_ptr_nonnull(o);
	ck_assert(json_is_number(json_object_get(o, "mape_pct")));
	ck_assert(json_is_number(json_object_get(o, "p90_ape_pct")));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "n")),
			 (json_int_t)find(&rep, "h100-sxm", "attn_decode")->n);
	ck_assert_ptr_nonnull(json_object_get(json_object_get(root, "a100-80gb-sxm"), "rmsnorm"));
	json_decref(root);
	/* written under a temporary name and renamed: nothing else is left */
	d = opendir(dir);
	while ((e = readdir(d)))
		files += e->d_name[0] != '.';
	closedir(d);
	ck_assert_int_eq(files, 2);
	/* an unwritable place is an error naming it */
	ck_assert_int_ne(cal_check_write_json(&rep, "/nonexistent-dir/x.json", &err), 0);
	ck_assert_ptr_nonnull(strstr(err.file, "/nonexistent-dir/x.json"));
	cal_check_report_release(&rep);
}
END_TEST

START_TEST(cross_source_synthetic)
{
	struct cal_check_model model = { "synthetic", 2048, 16, 16, 128, 4096, true };
	const int tps[] = { 1 };
	struct cal_check_opts o = { 0 };
	struct cal_check_report rep;
	struct ss_error err = { 0 };
	struct cal_store *st;
	const struct cal_check_row *r;

	ck_assert_int_eq(cal_store_open(&st, path, CAL_OPEN_READONLY, &err), 0);
	cal_check_report_init(&rep);
	ck_assert_msg(cal_check_cross_source(st, &o, &model, 1, tps, 1, &rep, &err) == 0, "%s",
		      err.msg);
	cal_store_close(st);
	r = find(&rep, "h100-sxm", "gemm:attn_pre_proj");
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->n, 7);
	ck_assert(r->mape_pct < 1e-6);
	ck_assert_double_eq_tol(r->median_ratio, 1.0, 1e-9);
	cal_check_report_release(&rep);
}
END_TEST

static Suite *synthetic_suite(void)
{
	Suite *s = suite_create("check");
	TCase *tc = tcase_create("synthetic");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, kfold_exact_data);
	tcase_add_test(tc, kfold_sees_outlier);
	tcase_add_test(tc, json_report);
	tcase_add_test(tc, cross_source_synthetic);
	suite_add_tcase(s, tc);
	return s;
}

/* ---- the shipped store ------------------------------------------------------- */

static char shipped[4096];

START_TEST(shipped_h100_targets)
{
	struct cal_check_opts o = { .folds = 5, .device = "h100-sxm" };
	struct cal_check_report rep;
	struct ss_error err = { 0 };
	struct cal_store *st;
	static const struct {
		const char *op;
		double max_mape;
	} targets[] = { { "gemm", 5.0 }, { "attn_decode", 5.0 }, { "attn_prefill", 8.0 } };

	gsl_set_error_handler_off();
	ck_assert_msg(cal_store_open(&st, shipped, CAL_OPEN_READONLY, &err) == 0, "%s", err.msg);
	cal_check_report_init(&rep);
	ck_assert_msg(cal_check_kfold(st, &o, &rep, &err) == 0, "%s", err.msg);
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		const struct cal_check_row *r = find(&rep, "h100-sxm", targets[i].op);

		ck_assert_msg(r != NULL, "no %s rows for h100-sxm in %s", targets[i].op, shipped);
		ck_assert_uint_gt(r->n, 1000);
		ck_assert_msg(r->mape_pct <= targets[i].max_mape, "%s: MAPE %.2f%% > %.0f%%",
			      targets[i].op, r->mape_pct, targets[i].max_mape);
	}
	cal_check_report_release(&rep);
	cal_store_close(st);
}
END_TEST

START_TEST(shipped_selection)
{
	struct catalog cat;
	struct ss_error err = { 0 };
	const char *d = getenv("SERVESIM_DATA");
	const char *stores[1] = { shipped };
	char why[512];

	gsl_set_error_handler_off();
	catalog_init(&cat);
	ck_assert_int_eq(catalog_load_dir(&cat, d && *d ? d : SERVESIM_SRC_DATADIR, &err), 0);
	ck_assert_msg(cost_store_covers(stores, 1, catalog_model(&cat, "llama-3.1-8b"),
					catalog_gpu(&cat, "h100-sxm"), 1, why, sizeof(why)), "%s", why);
	ck_assert(!cost_store_covers(stores, 1, catalog_model(&cat, "llama-3.1-8b"),
				     catalog_gpu(&cat, "l40s"), 1, why, sizeof(why)));
	ck_assert_ptr_nonnull(strstr(why, "l40s"));
	catalog_release(&cat);
}
END_TEST

static Suite *shipped_suite(void)
{
	Suite *s = suite_create("check-shipped");
	TCase *tc = tcase_create("shipped");

	tcase_add_test(tc, shipped_h100_targets);
	tcase_add_test(tc, shipped_selection);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	bool use_shipped = argc > 1 && !strcmp(argv[1], "shipped");
	SRunner *sr;
	int failed;

	if (use_shipped) {
		const char *d = getenv("SERVESIM_DATA");
		struct stat st;

		snprintf(shipped, sizeof(shipped), "%s/calibration.db",
			 d && *d ? d : SERVESIM_SRC_DATADIR);
		if (stat(shipped, &st)) {
			printf("skipped: %s not found\n", shipped);
			return 77;
		}
	}
	sr = srunner_create(use_shipped ? shipped_suite() : synthetic_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
