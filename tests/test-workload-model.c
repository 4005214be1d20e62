/* Workload models (traces/workload-model.h): fitting a workload of known
 * rate, burstiness, lengths and correlation gets them back; generating from
 * the model and fitting again gets the model back; the rate and length
 * knobs do what they say; the JSON round-trips and every bad field is an
 * error naming the file and the field. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <jansson.h>

#include "check-main.h"
#include "workload-model.h"
#include "workload.h"

/* Requests in the synthetic workloads fitted below. */
#define N 50000

/* Lengths of the synthetic workloads: ln(prompt) ~ N(ln 1000, 1) and
 * ln(output) ~ N(ln 200, 0.8), their normals correlated with r = 0.6, so
 * Spearman's rho = (6 / pi) asin(r / 2) = 0.5824 and the quantiles are
 * known: prompt p50 1000, p90 1000 e^1.2816 = 3602. */
#define R_NORMAL 0.6
#define RHO_EXPECTED 0.58241
#define P50_PROMPT 1000.0
#define P90_PROMPT 3602.2

static void build(struct workload *wl, const char *arrival, uint64_t n)
{
	struct workload_spec spec = { .arrival = arrival, .lengths = "fixed:prompt=1,output=1",
				      .num_requests = n, .seed = 11 };
	struct ss_error err = { 0 };
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);

	workload_init(wl);
	ck_assert_msg(workload_build(wl, &spec, &err) == 0, "%s", err.msg);
	gsl_rng_set(r, 7);
	for (size_t i = 0; i < wl->n; i++) {
		double z1 = gsl_ran_ugaussian(r);
		double z2 = R_NORMAL * z1 + sqrt(1 - R_NORMAL * R_NORMAL) * gsl_ran_ugaussian(r);

		wl->req[i].prompt_tokens = (int32_t)lround(exp(log(1000) + z1));
		wl->req[i].output_tokens = (int32_t)lround(exp(log(200) + 0.8 * z2));
		if (wl->req[i].prompt_tokens < 1)
			wl->req[i].prompt_tokens = 1;
		if (wl->req[i].output_tokens < 1)
			wl->req[i].output_tokens = 1;
	}
	gsl_rng_free(r);
	snprintf(wl->source, sizeof(wl->source), "/some/dir/synthetic.csv");
	wl->format = TRACE_NATIVE;
}

static void fit_ok(struct wlmodel *m, const struct workload *wl)
{
	struct ss_error err = { 0 };

	wlmodel_init(m);
	ck_assert_msg(wlmodel_fit(m, wl, &err) == 0, "%s", err.msg);
}

static double at_p(const struct wlmodel *m, const double *q, double p)
{
	for (size_t k = 0; k < m->n_q; k++)
		if (fabs(m->q_p[k] - p) < 1e-9)
			return q[k];
	ck_abort_msg("no grid point at %g", p);
	return 0;
}

static double rel(double a, double b)
{
	return fabs(a - b) / fabs(b);
}

static double mean_len(const struct workload *wl, bool prompt)
{
	double s = 0;

	for (size_t i = 0; i < wl->n; i++)
		s += prompt ? wl->req[i].prompt_tokens : wl->req[i].output_tokens;
	return s / (double)wl->n;
}

START_TEST(fit_gamma_known)
{
	struct workload wl;
	struct wlmodel m;

	build(&wl, "gamma:rate=5,cv=2", N);
	fit_ok(&m, &wl);
	ck_assert_str_eq(m.source, "synthetic.csv");
	ck_assert_str_eq(m.format, "native");
	ck_assert_uint_eq(m.requests, N);
	/* the sample mean gap has relative sd cv / sqrt(n) = 2 / 224 = 0.9%:
	 * 5% is over 5 sd */
	ck_assert_msg(rel(m.rate_rps, 5) < 0.05, "rate %g", m.rate_rps);
	/* a gamma of cv 2 (shape 1/4, excess kurtosis 24): the sample sd's
	 * relative sd is about sqrt((kurtosis - 1) / 4n) = 1.2%; 8% is over
	 * 6 sd */
	ck_assert_msg(rel(m.gap_cv, 2) < 0.08, "cv %g", m.gap_cv);
	/* a renewal process's IDC tends to cv^2 = 4 for windows of many gaps
	 * (60 s hold 300): its estimate over 166 windows has relative sd
	 * about sqrt(2 / 166) = 11%; 40% is over 3.5 sd */
	for (size_t k = 0; k < m.n_idc; k++)
		if (m.idc_window_s[k] == 60)
			ck_assert_msg(rel(m.idc[k], 4) < 0.4, "idc(60) %g", m.idc[k]);
	/* Spearman's rho of n = 50,000 pairs: sd about (1 - rho^2) / sqrt(n)
	 * = 0.003; 0.02 is over 6 sd */
	ck_assert_msg(fabs(m.spearman - RHO_EXPECTED) < 0.02, "rho %g", m.spearman);
	/* sample quantiles of a lognormal (sigma 1): the median's relative sd
	 * is about 1.25 sigma / sqrt(n) = 0.6%, the p90's 1%; 3% and 5% */
	ck_assert_msg(rel(at_p(&m, m.q_prompt, 0.5), P50_PROMPT) < 0.03, "p50");
	ck_assert_msg(rel(at_p(&m, m.q_prompt, 0.9), P90_PROMPT) < 0.05, "p90");
	ck_assert(m.q_p[0] == 0 && m.q_p[m.n_q - 1] == 1);
	ck_assert(m.n_q >= 64 && m.n_q <= 128);
	/* 10,000 s: over 2 h, so hourly bins, the last 0.78 h long, each
	 * holding about 18,000 requests: counts' relative sd sqrt(cv^2 / n) =
	 * 1.5%; 10% */
	ck_assert_uint_eq(m.n_curve, 3);
	for (size_t k = 0; k < m.n_curve; k++)
		ck_assert_msg(rel(m.curve_rps[k], 5) < 0.1, "bin %zu: %g", k, m.curve_rps[k]);
	ck_assert(!m.has_prefix);
	/* the renewal process reproduces a renewal trace: gamma is chosen */
	ck_assert_msg(m.process == WLM_GAMMA, "errors %g %g", m.fit_error[0], m.fit_error[1]);
	wlmodel_release(&m);
	workload_release(&wl);
}
END_TEST

/* fit, generate as many requests, fit again: the second model is the
 * first (the generator reproduces what the model says). */
START_TEST(fit_generate_fit)
{
	struct workload_spec spec = { .num_requests = N, .seed = 3 };
	struct ss_error err = { 0 };
	struct workload wl, g;
	struct wlmodel m, m2;

	build(&wl, "gamma:rate=5,cv=2", N);
	fit_ok(&m, &wl);
	workload_init(&g);
	ck_assert_msg(wlmodel_build(&g, &m, &spec, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(g.n, N);
	fit_ok(&m2, &g);
	/* tolerances as in fit_gamma_known, the two samples' errors adding */
	ck_assert_msg(rel(m2.rate_rps, m.rate_rps) < 0.05, "rate %g vs %g", m2.rate_rps, m.rate_rps);
	ck_assert_msg(rel(m2.gap_cv, m.gap_cv) < 0.1, "cv %g vs %g", m2.gap_cv, m.gap_cv);
	/* the copula on rounded lengths: ties move rho by well under 0.01 */
	ck_assert_msg(fabs(m2.spearman - m.spearman) < 0.03, "rho %g vs %g", m2.spearman,
		      m.spearman);
	ck_assert_msg(rel(at_p(&m2, m2.q_prompt, 0.5), at_p(&m, m.q_prompt, 0.5)) < 0.04, "p50");
	ck_assert_msg(rel(at_p(&m2, m2.q_prompt, 0.9), at_p(&m, m.q_prompt, 0.9)) < 0.06, "p90");
	ck_assert_msg(rel(at_p(&m2, m2.q_output, 0.9), at_p(&m, m.q_output, 0.9)) < 0.06,
		      "out p90");
	wlmodel_release(&m);
	wlmodel_release(&m2);
	workload_release(&wl);
	workload_release(&g);
}
END_TEST

/* An MMPP trace (20 req/s for 5 s, 2 req/s for 20 s): its IDC grows with
 * the window to about 70 at 60 s, which no renewal process of its gap cv
 * shows, so the fit picks the MMPP, and the generated workload has the
 * trace's IDC. */
START_TEST(fit_mmpp_known)
{
	struct workload_spec spec = { .num_requests = N, .seed = 5 };
	struct ss_error err = { 0 };
	struct workload wl, g;
	struct wlmodel m;
	double mean = (20 * 5 + 2 * 20) / 25.0;

	build(&wl, "mmpp:rates=20,2,switch_s=5,20", N);
	fit_ok(&m, &wl);
	ck_assert_int_eq(m.process, WLM_MMPP);
	/* the rate of ~360 cycles: relative sd of the count about
	 * sqrt(IDC / n) = 4%; 15% */
	ck_assert_msg(rel(m.rate_rps, mean) < 0.15, "rate %g", m.rate_rps);
	workload_init(&g);
	ck_assert_msg(wlmodel_build(&g, &m, &spec, &err) == 0, "%s", err.msg);
	/* IDC at 60 s from ~150 windows of strongly correlated counts: each
	 * estimate is within about 30% (2 sd); generated vs trace within a
	 * factor of 1.6 */
	{
		double a = wlmodel_idc(&wl, 60), b = wlmodel_idc(&g, 60);

		ck_assert_msg(a > 20 && b / a < 1.6 && a / b < 1.6, "idc %g vs %g", b, a);
	}
	wlmodel_release(&m);
	workload_release(&wl);
	workload_release(&g);
}
END_TEST

/* A 4-hour trace from a rate curve (2, 8, 2, 8 req/s by the hour, linear
 * between the rows at the hours' middles): the model has hourly bins and
 * generation follows them. */
START_TEST(fit_rate_curve)
{
	static const char curve[] = "time_s,rate\n0,2\n3599,2\n3600,8\n7199,8\n7200,2\n10799,2\n"
				    "10800,8\n14400,8\n";
	char path[] = "/tmp/ss-wlm-curve-XXXXXX";
	struct workload_spec spec = { .lengths = "fixed:prompt=10,output=10", .seed = 2,
				      .duration_ns = 14400000000000 };
	struct workload_spec gs = { .seed = 9, .duration_ns = 14400000000000 };
	struct ss_error err = { 0 };
	struct workload wl, g;
	struct wlmodel m;
	int fd = mkstemp(path);
	size_t cnt[4] = { 0 };

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, curve, strlen(curve)), (ssize_t)strlen(curve));
	close(fd);
	spec.rate_curve = path;
	workload_init(&wl);
	ck_assert_msg(workload_build(&wl, &spec, &err) == 0, "%s", err.msg);
	unlink(path);
	fit_ok(&m, &wl);
	ck_assert_uint_eq(m.n_curve, 4);
	/* 7,200 or 28,800 Poisson requests an hour: relative sd 1.2% and
	 * 0.6%; 5% */
	ck_assert_msg(rel(m.curve_rps[0], 2) < 0.05 && rel(m.curve_rps[1], 8) < 0.05 &&
		      rel(m.curve_rps[2], 2) < 0.05 && rel(m.curve_rps[3], 8) < 0.05,
		      "curve %g %g %g %g", m.curve_rps[0], m.curve_rps[1], m.curve_rps[2],
		      m.curve_rps[3]);
	/* Poisson within the hours: with the curve taken out, gaps of cv 1
	 * (the sample cv of 72,000 exponential gaps has relative sd
	 * sqrt(8 / 4n) = 0.5%, the fitted bins' own error adds about 1%); 5% */
	ck_assert_msg(rel(m.gap_cv, 1) < 0.05, "cv %g", m.gap_cv);
	/* and no burstiness left for an MMPP to model */
	ck_assert_int_eq(m.process, WLM_GAMMA);
	workload_init(&g);
	ck_assert_msg(wlmodel_build(&g, &m, &gs, &err) == 0, "%s", err.msg);
	for (size_t i = 0; i < g.n; i++)
		cnt[g.req[i].arrival_ns / 3600000000000 < 4 ? g.req[i].arrival_ns / 3600000000000 : 3]++;
	/* the model's curve holds each hour's rate over the hour: the
	 * generated hourly counts are the trace's hours' (each a Poisson count
	 * of 7,200 or 28,800, sd 1.2% and 0.6%, for each side); 5% */
	for (int h = 0; h < 4; h++)
		ck_assert_msg(rel((double)cnt[h], m.curve_rps[h] * 3600) < 0.05,
			      "hour %d: %zu vs %g", h, cnt[h], m.curve_rps[h] * 3600);
	ck_assert_msg(rel((double)(cnt[0] + cnt[1] + cnt[2] + cnt[3]), (double)wl.n) < 0.05,
		      "total %zu vs %zu", cnt[0] + cnt[1] + cnt[2] + cnt[3], wl.n);
	wlmodel_release(&m);
	workload_release(&wl);
	workload_release(&g);
}
END_TEST

/* --rate, --rate-scale, --prompt-scale, --output-scale; the same seed
 * gives the same workload, another seed another. */
START_TEST(knobs)
{
	struct workload_spec base = { .num_requests = 20000, .seed = 1 };
	struct workload_spec s;
	struct ss_error err = { 0 };
	struct workload wl, a, b;
	struct wlmodel m;
	double pa, oa, span;

	build(&wl, "gamma:rate=5,cv=2", N);
	fit_ok(&m, &wl);
	workload_init(&a);
	workload_init(&b);
	ck_assert(wlmodel_build(&a, &m, &base, &err) == 0);
	pa = mean_len(&a, true);
	oa = mean_len(&a, false);
	/* the same seed: the same requests */
	ck_assert(wlmodel_build(&b, &m, &base, &err) == 0);
	ck_assert_uint_eq(a.n, b.n);
	ck_assert(!memcmp(a.req, b.req, a.n * sizeof(*a.req)));
	s = base;
	s.seed = 2;
	ck_assert(wlmodel_build(&b, &m, &s, &err) == 0);
	ck_assert(memcmp(a.req, b.req, a.n * sizeof(*a.req)));
	/* prompts 20% longer: each length is the same draw times 1.2, rounded
	 * (so within 0.5 token + the rounding of the draw) */
	s = base;
	s.prompt_scale = 1.2;
	ck_assert(wlmodel_build(&b, &m, &s, &err) == 0);
	ck_assert_msg(rel(mean_len(&b, true), 1.2 * pa) < 0.002, "%g vs %g", mean_len(&b, true),
		      1.2 * pa);
	ck_assert(mean_len(&b, false) == oa);
	ck_assert(b.req[b.n - 1].arrival_ns == a.req[a.n - 1].arrival_ns);
	s = base;
	s.output_scale = 0.5;
	ck_assert(wlmodel_build(&b, &m, &s, &err) == 0);
	ck_assert_msg(rel(mean_len(&b, false), 0.5 * oa) < 0.01, "out");
	ck_assert(mean_len(&b, true) == pa);
	/* --rate-scale 3: every time divided by 3 (to the ns) */
	s = base;
	s.rate_scale = 3;
	ck_assert(wlmodel_build(&b, &m, &s, &err) == 0);
	ck_assert(llabs(b.req[b.n - 1].arrival_ns - a.req[a.n - 1].arrival_ns / 3) <= 1);
	/* --rate 12: the generated mean (n - 1) / span is 12 exactly */
	s = base;
	s.target_rate = 12;
	ck_assert(wlmodel_build(&b, &m, &s, &err) == 0);
	span = (double)b.req[b.n - 1].arrival_ns * 1e-9;
	ck_assert_msg(rel((double)(b.n - 1) / span, 12) < 1e-6, "rate %g", (b.n - 1) / span);
	/* --duration 100 s at 5 req/s: about 500 requests, all before 100 s
	 * (the count of a gamma of cv 2: sd about sqrt(500 x 4) = 45; 200) */
	s = base;
	s.num_requests = 0;
	s.duration_ns = 100000000000;
	ck_assert(wlmodel_build(&b, &m, &s, &err) == 0);
	ck_assert_msg(b.n > 300 && b.n < 700, "n %zu", b.n);
	ck_assert(b.req[b.n - 1].arrival_ns < s.duration_ns);
	/* no size: as many requests as the trace */
	s = base;
	s.num_requests = 0;
	ck_assert(wlmodel_build(&b, &m, &s, &err) == 0);
	ck_assert_uint_eq(b.n, N);
	/* refused: a model with a trace, or with --rate and --rate-scale */
	s = base;
	s.trace = "x.csv";
	ck_assert_int_eq(wlmodel_build(&b, &m, &s, &err), -EINVAL);
	ck_assert(strstr(err.msg, "--workload cannot be combined with --trace"));
	s = base;
	s.target_rate = 3;
	s.rate_scale = 2;
	ck_assert_int_eq(wlmodel_build(&b, &m, &s, &err), -EINVAL);
	ck_assert(strstr(err.msg, "--rate cannot be combined with --rate-scale"));
	wlmodel_release(&m);
	workload_release(&wl);
	workload_release(&a);
	workload_release(&b);
}
END_TEST

START_TEST(fit_refused)
{
	struct ss_error err = { 0 };
	struct workload wl;
	struct wlmodel m;

	build(&wl, "poisson:rate=5", 1);
	wlmodel_init(&m);
	ck_assert_int_eq(wlmodel_fit(&m, &wl, &err), -EINVAL);
	ck_assert(strstr(err.msg, "expected at least 2 requests"));
	ck_assert_str_eq(err.file, "/some/dir/synthetic.csv");
	workload_release(&wl);
	build(&wl, "poisson:rate=5", 10);
	wl.has_arrivals = false;
	ck_assert_int_eq(wlmodel_fit(&m, &wl, &err), -EINVAL);
	ck_assert(strstr(err.msg, "no arrival times"));
	workload_release(&wl);
}
END_TEST

/* ---- JSON ----------------------------------------------------------------- */

static char model_path[64];

/* Write a fitted model's JSON, edited by fn (NULL: as written). */
static void write_model(void (*fn)(json_t *root))
{
	struct workload wl;
	struct wlmodel m;
	json_error_t je;
	json_t *root;
	char *text;
	FILE *f;
	int fd;

	build(&wl, "mmpp:rates=20,2,switch_s=5,20", 5000);
	fit_ok(&m, &wl);
	text = wlmodel_to_json(&m);
	ck_assert_ptr_nonnull(text);
	root = json_loads(text, 0, &je);
	ck_assert_ptr_nonnull(root);
	if (fn)
		fn(root);
	snprintf(model_path, sizeof(model_path), "/tmp/ss-wlm-XXXXXX");
	fd = mkstemp(model_path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_int_eq(json_dumpf(root, f, JSON_INDENT(1)), 0);
	fclose(f);
	json_decref(root);
	free(text);
	wlmodel_release(&m);
	workload_release(&wl);
}

/* Reading the file must fail naming it and saying want. */
static void read_bad(void (*fn)(json_t *root), const char *want)
{
	struct ss_error err = { 0 };
	struct wlmodel m;

	write_model(fn);
	wlmodel_init(&m);
	ck_assert_int_eq(wlmodel_read(&m, model_path, &err), -EINVAL);
	ck_assert_str_eq(err.file, model_path);
	ck_assert_msg(strstr(err.msg, want), "got '%s', expected '%s'", err.msg, want);
	ck_assert_ptr_null(m.q_p);
	unlink(model_path);
}

START_TEST(json_round_trip)
{
	struct workload wl;
	struct wlmodel m, r;
	struct ss_error err = { 0 };
	char *a, *b;

	build(&wl, "mmpp:rates=20,2,switch_s=5,20", 5000);
	fit_ok(&m, &wl);
	write_model(NULL);
	wlmodel_init(&r);
	ck_assert_msg(wlmodel_read(&r, model_path, &err) == 0, "%s", err.msg);
	unlink(model_path);
	/* 15 significant digits: written again, the same text */
	a = wlmodel_to_json(&m);
	b = wlmodel_to_json(&r);
	ck_assert_str_eq(a, b);
	ck_assert_int_eq(r.process, m.process);
	ck_assert_uint_eq(r.n_q, m.n_q);
	ck_assert(rel(r.rate_rps, m.rate_rps) < 1e-14);
	free(a);
	free(b);
	wlmodel_release(&m);
	wlmodel_release(&r);
	workload_release(&wl);
}
END_TEST

static void del_rho(json_t *r) { json_object_del(json_object_get(r, "lengths"), "spearman_rho"); }
static void str_rate(json_t *r)
{
	json_object_set_new(json_object_get(r, "arrivals"), "rate_rps", json_string("fast"));
}
static void version2(json_t *r)
{
	json_object_set_new(r, "servesim_workload_model", json_integer(2));
}
static void no_version(json_t *r) { json_object_del(r, "servesim_workload_model"); }
static void unknown(json_t *r)
{
	json_object_set_new(json_object_get(r, "source"), "fiel", json_true());
}
static void q_down(json_t *r)
{
	json_array_set_new(json_object_get(json_object_get(r, "lengths"), "prompt_tokens"), 50,
			   json_real(1));
}
static void q_short(json_t *r)
{
	json_array_remove(json_object_get(json_object_get(r, "lengths"), "output_tokens"), 3);
}
static void bad_proc(json_t *r)
{
	json_object_set_new(json_object_get(r, "arrivals"), "process", json_string("hawkes"));
}
static void mmpp_mean(json_t *r)
{
	json_object_set_new(json_object_get(r, "arrivals"), "process", json_string("mmpp"));
	json_object_set_new(json_object_get(r, "arrivals"), "mmpp",
			    json_pack("{s:[f,f],s:[f,f]}", "rates_rps", 100.0, 1.0, "switch_s", 1.0,
				      1.0));
}
static void neg_cv(json_t *r)
{
	json_object_set_new(json_object_get(r, "arrivals"), "gap_cv", json_real(-1));
}
static void sessions(json_t *r) { json_object_set_new(r, "sessions", json_object()); }
static void sessions_num(json_t *r) { json_object_set_new(r, "sessions", json_integer(3)); }
static void batch_sum(json_t *r)
{
	json_object_set_new(json_object_get(r, "arrivals"), "batch",
			    json_pack("{s:[i,i],s:[f,f]}", "sizes", 1, 2, "probabilities", 0.5, 0.4));
}
static void batch_order(json_t *r)
{
	json_object_set_new(json_object_get(r, "arrivals"), "batch",
			    json_pack("{s:[i,i],s:[f,f]}", "sizes", 3, 2, "probabilities", 0.5, 0.5));
}

START_TEST(json_errors)
{
	struct ss_error err = { 0 };
	struct wlmodel m;
	FILE *f;
	int fd;

	read_bad(del_rho, "lengths.spearman_rho: expected a number >= -1 and <= 1, got nothing "
		 "(the field is missing)");
	read_bad(str_rate, "arrivals.rate_rps: expected a number > 0 and <= 1e+09, got a string");
	read_bad(version2, "servesim_workload_model: expected version 1, got 2");
	read_bad(no_version, "servesim_workload_model: expected the format version, an integer, "
		 "got nothing");
	read_bad(unknown, "source.fiel: unknown field");
	read_bad(q_down, "lengths.prompt_tokens[50]: expected values non-decreasing, got 1 after");
	read_bad(q_short, "lengths.output_tokens: expected 103 numbers (one per lengths.p), got 102");
	read_bad(bad_proc, "arrivals.process: expected \"gamma\"");
	read_bad(mmpp_mean, "arrivals.mmpp: expected a stationary mean rate equal to arrivals.rate_rps");
	read_bad(neg_cv, "arrivals.gap_cv: expected a number >= 0.001 and <= 1000, got -1");
	/* a sessions object on a model fitted without sessions: its fields
	 * are checked (sessions_json_errors checks each on a sessions model) */
	read_bad(sessions, "sessions.sessions: expected an integer (source.requests), got nothing");
	read_bad(sessions_num, "sessions: expected an object or null, got a number");
	read_bad(batch_sum, "arrivals.batch.probabilities: expected a sum of 1, got 0.9");
	read_bad(batch_order, "arrivals.batch.sizes[1]: expected values non-decreasing, got 2 after 3");
	/* not JSON: the line jansson stopped at */
	snprintf(model_path, sizeof(model_path), "/tmp/ss-wlm-XXXXXX");
	fd = mkstemp(model_path);
	f = fdopen(fd, "w");
	fputs("{\n\"servesim_workload_model\": 1,\n oops\n}\n", f);
	fclose(f);
	wlmodel_init(&m);
	ck_assert_int_eq(wlmodel_read(&m, model_path, &err), -EINVAL);
	ck_assert_int_eq(err.line, 3);
	ck_assert(strstr(err.msg, "expected a servesim workload model (JSON)"));
	unlink(model_path);
	ck_assert_int_eq(wlmodel_read(&m, "/nonexistent/m.json", &err), -ENOENT);
	ck_assert(strstr(err.msg, "cannot open workload model"));
}
END_TEST

/* Batches: a trace whose arrivals come in groups with one time (sizes 1
 * to 5 with probabilities 0.1, 0.2, 0.4, 0.2, 0.1, mean 3) at Poisson
 * times of 2 batches/s: the fit finds the sizes, and the generated
 * workload has them again. */
static void batch_sizes(const struct workload *wl, double *p, size_t *groups)
{
	size_t run = 1;

	memset(p, 0, 8 * sizeof(*p));
	*groups = 0;
	for (size_t i = 1; i <= wl->n; i++) {
		if (i < wl->n && wl->req[i].arrival_ns == wl->req[i - 1].arrival_ns) {
			run++;
			continue;
		}
		p[run < 7 ? run : 7]++;
		++*groups;
		run = 1;
	}
	for (int k = 0; k < 8; k++)
		p[k] /= (double)*groups;
}

START_TEST(fit_batches_known)
{
	static const double prob[] = { 0, 0.1, 0.2, 0.4, 0.2, 0.1 };
	struct workload_spec spec = { .num_requests = 30000, .seed = 8 };
	struct ss_error err = { 0 };
	struct workload ep, wl, g;
	struct wlmodel m;
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	double p[8];
	size_t groups;

	build(&ep, "poisson:rate=2", 10000);
	workload_init(&wl);
	gsl_rng_set(r, 3);
	for (size_t i = 0; i < ep.n; i++) {
		double u = gsl_rng_uniform(r), c = 0;
		int k;

		for (k = 1; k < 5; k++)
			if (u < (c += prob[k]))
				break;
		for (int j = 0; j < k; j++) {
			if (wl.n == wl.cap) {
				wl.cap = wl.cap ? 2 * wl.cap : 1024;
				wl.req = realloc(wl.req, wl.cap * sizeof(*wl.req));
				ck_assert_ptr_nonnull(wl.req);
			}
			wl.req[wl.n++] = ep.req[i];
		}
	}
	gsl_rng_free(r);
	wl.has_arrivals = true;
	wl.format = TRACE_NATIVE;
	snprintf(wl.source, sizeof(wl.source), "batches.csv");
	fit_ok(&m, &wl);
	ck_assert_uint_eq(m.n_batch, 5);
	/* 10,000 batches: each probability's sd is at most sqrt(0.24 / 1e4) =
	 * 0.005; 0.02.  The mean size 3 within 2% (its sd is 0.011 / 3) */
	for (size_t k = 0; k < 5; k++) {
		ck_assert_double_eq(m.batch_size[k], (double)(k + 1));
		ck_assert_msg(fabs(m.batch_prob[k] - prob[k + 1]) < 0.02, "p(%zu) %g", k + 1,
			      m.batch_prob[k]);
	}
	ck_assert_msg(rel(m.batch_mean, 3) < 0.02, "mean %g", m.batch_mean);
	/* the batches' times are Poisson at 2/s: gap cv 1 (5%), requests at
	 * 6 req/s (n = 30,000: 2%, plus the batch count's own 1%; 4%) */
	ck_assert_msg(rel(m.gap_cv, 1) < 0.05, "cv %g", m.gap_cv);
	ck_assert_msg(rel(m.rate_rps, 6) < 0.04, "rate %g", m.rate_rps);
	workload_init(&g);
	ck_assert_msg(wlmodel_build(&g, &m, &spec, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(g.n, 30000);
	batch_sizes(&g, p, &groups);
	/* 10,000 generated batches against the fitted probabilities: 0.02 */
	for (size_t k = 0; k < 5; k++)
		ck_assert_msg(fabs(p[k + 1] - m.batch_prob[k]) < 0.02, "gen p(%zu) %g", k + 1, p[k + 1]);
	ck_assert_msg(rel((double)(g.n - 1) / ((double)g.req[g.n - 1].arrival_ns * 1e-9),
			  m.rate_rps) < 0.05, "generated rate");
	wlmodel_release(&m);
	workload_release(&ep);
	workload_release(&wl);
	workload_release(&g);
}
END_TEST

/* Prefix sharing: requests whose hash chains repeat an earlier one's. */
START_TEST(prefix_share)
{
	struct workload wl;
	struct wlmodel m;
	static uint32_t h[] = { 1, 2, 3, 1, 2, 9, 4 };

	build(&wl, "poisson:rate=5", 3);
	wl.hashes = malloc(sizeof(h));
	memcpy(wl.hashes, h, sizeof(h));
	wl.n_hashes = wl.cap_hashes = 7;
	wl.hash_block_tokens = 512;
	/* request 0: 1,2,3 (new); 1: 1,2 seen, 9 new; 2: 4 new -> 2 of 7 */
	wl.req[0].prefix_off = 0, wl.req[0].prefix_n = 3;
	wl.req[1].prefix_off = 3, wl.req[1].prefix_n = 3;
	wl.req[2].prefix_off = 6, wl.req[2].prefix_n = 1;
	fit_ok(&m, &wl);
	ck_assert(m.has_prefix);
	ck_assert_uint_eq(m.prefix_block_tokens, 512);
	ck_assert_double_eq_tol(m.prefix_reused_share, 2.0 / 7, 1e-12);
	wlmodel_release(&m);
	workload_release(&wl);
}
END_TEST

/* ---- sessions --------------------------------------------------------------- */

/* A session workload of known structure from the --sessions generator:
 * SESS_N sessions starting as a Poisson process of 2 sessions/s, geometric
 * turns of mean 5, exponential think time of mean 3 s, every later step 2
 * parallel calls, new tokens uniform on [100, 300] and output tokens
 * uniform on [20, 80], independent. */
#define SESS_N 4000
#define SESS_SPEC "rate=2,turns=5,think_s=3,fanout=2"
#define SESS_LENGTHS "uniform:prompt_min=100,prompt_max=300,output_min=20,output_max=80"

static void build_sessions(struct workload *wl, uint64_t seed)
{
	struct workload_spec spec = { .sessions = SESS_SPEC, .lengths = SESS_LENGTHS,
				      .num_requests = SESS_N, .seed = seed };
	struct ss_error err = { 0 };

	workload_init(wl);
	ck_assert_msg(workload_build(wl, &spec, &err) == 0, "%s", err.msg);
	ck_assert_ptr_nonnull(wl->sess);
	snprintf(wl->source, sizeof(wl->source), "/some/dir/sessions.csv");
	wl->format = TRACE_SESSIONS;
}

/* The share of turn count v in m's distribution. */
static double turns_share(const struct wlmodel *m, double v)
{
	for (size_t k = 0; k < m->n_turns; k++)
		if (m->turns_v[k] == v)
			return m->turns_p[k];
	return 0;
}

/* The figures of a fit of the structure above, each within a tolerance of
 * about 4 standard errors at SESS_N sessions (so a correct fit fails less
 * than once in 10,000 seeds), or exact where the fit reads it off. */
static void check_session_fit(const struct wlmodel *m, double rate)
{
	ck_assert(m->has_sessions);
	ck_assert_uint_eq(m->requests, SESS_N);
	/* starts: (n - 1) / span of a Poisson process: relative se
	 * 1 / sqrt(4000) = 1.6%; 7% */
	ck_assert_msg(rel(m->rate_rps, rate) < 0.07, "start rate %g", m->rate_rps);
	/* the cv of exponential gaps is 1, se about sqrt(2 / n) = 0.022; 0.1 */
	ck_assert_msg(fabs(m->gap_cv - 1) < 0.1, "start gap cv %g", m->gap_cv);
	/* geometric turns of mean 5: sd 4.47, se 0.071; 0.3.  P(1 turn) =
	 * 0.2, se 0.0063; 0.03 */
	ck_assert_msg(fabs(m->turns_mean - 5) < 0.3, "turns mean %g", m->turns_mean);
	ck_assert_msg(fabs(turns_share(m, 1) - 0.2) < 0.03, "P(1 turn) %g", turns_share(m, 1));
	/* every later step has 2 calls: exact */
	ck_assert_uint_eq(m->n_fanout, 1);
	ck_assert(m->fanout_v[0] == 2 && m->fanout_p[0] == 1);
	/* exponential think time of mean 3 s over about 16,000 steps: median
	 * 3 ln 2 = 2.079 s (se 0.024) and p90 3 ln 10 = 6.908 s (se 0.071);
	 * 6% of each (5 and 6 se) */
	ck_assert_msg(rel(at_p(m, m->q_think_s, 0.5), 3 * log(2)) < 0.06, "think p50 %g",
		      at_p(m, m->q_think_s, 0.5));
	ck_assert_msg(rel(at_p(m, m->q_think_s, 0.9), 3 * log(10)) < 0.06, "think p90 %g",
		      at_p(m, m->q_think_s, 0.9));
	/* later calls' new tokens are recovered from the prompts (the
	 * previous step's prompt and outputs subtracted): uniform on
	 * [100, 300], p50 200 and p10 120 (se about 1 token over 32,000
	 * calls); 3%.  Outputs uniform on [20, 80]: p50 50; 3% */
	ck_assert_msg(rel(at_p(m, m->q_new, 0.5), 200) < 0.03, "new p50 %g", at_p(m, m->q_new, 0.5));
	ck_assert_msg(rel(at_p(m, m->q_new, 0.1), 120) < 0.03, "new p10 %g", at_p(m, m->q_new, 0.1));
	ck_assert(m->q_new[0] >= 100 && m->q_new[m->n_q - 1] <= 300);
	ck_assert_msg(rel(at_p(m, m->q_out_later, 0.5), 50) < 0.03, "out p50 %g",
		      at_p(m, m->q_out_later, 0.5));
	/* independent draws: rank correlation 0, se 1 / sqrt(32000); 0.05 */
	ck_assert_msg(fabs(m->spearman_later) < 0.05, "rho %g", m->spearman_later);
	/* the first calls: a prompt of just new tokens, p50 200 (se about 3
	 * tokens over 4000 sessions); 5% */
	ck_assert_msg(rel(at_p(m, m->q_prompt, 0.5), 200) < 0.05, "first prompt p50 %g",
		      at_p(m, m->q_prompt, 0.5));
}

START_TEST(sessions_fit_generate_fit)
{
	struct workload_spec spec = { .seed = 5 };
	struct ss_error err = { 0 };
	struct workload wl, g, g2;
	struct wlmodel m, m2;

	/* fit the generator's sessions */
	build_sessions(&wl, 21);
	fit_ok(&m, &wl);
	check_session_fit(&m, 2);
	ck_assert_uint_eq(m.calls, wl.n);
	/* generate from the model (as many sessions as it was fitted to) and
	 * fit again: the same figures, within the same tolerances */
	workload_init(&g);
	ck_assert_msg(wlmodel_build(&g, &m, &spec, &err) == 0, "%s", err.msg);
	ck_assert_ptr_nonnull(g.sess);
	ck_assert_uint_eq(g.n_sessions, SESS_N);
	ck_assert(g.hashes_cover_output);
	snprintf(g.source, sizeof(g.source), "model");
	fit_ok(&m2, &g);
	check_session_fit(&m2, 2);
	ck_assert(m2.turns_v[m2.n_turns - 1] <= m.turns_v[m.n_turns - 1]);
	wlmodel_release(&m2);
	/* deterministic from the seed */
	workload_init(&g2);
	ck_assert(wlmodel_build(&g2, &m, &spec, &err) == 0);
	ck_assert_uint_eq(g2.n, g.n);
	ck_assert(!memcmp(g2.req, g.req, g.n * sizeof(*g.req)));
	ck_assert(!memcmp(g2.sess, g.sess, g.n * sizeof(*g.sess)));
	/* --rate-scale 3 scales session starts (not think times); 100
	 * sessions with --num-requests 100; --prompt-scale 1.5 and
	 * --output-scale 2 stretch every call's new and output tokens */
	spec.rate_scale = 3;
	spec.num_requests = 100;
	spec.prompt_scale = 1.5;
	spec.output_scale = 2;
	ck_assert_msg(wlmodel_build(&g2, &m, &spec, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(g2.n_sessions, 100);
	ck_assert_uint_eq(g2.sess[g2.n - 1].session, 99);
	{
		size_t i0 = 0, i1 = 0;
		int64_t last = 0;

		for (size_t i = 0; i < g2.n; i++) {
			if (g2.sess[i].step == 0)
				last = g2.req[i].arrival_ns;
			/* outputs uniform on [20, 80] doubled: [40, 160] */
			ck_assert(g2.req[i].output_tokens >= 40 && g2.req[i].output_tokens <= 160);
			if (g2.sess[i].step == 0) {
				/* a first prompt: new tokens of [100, 300] x 1.5 */
				ck_assert(g2.req[i].prompt_tokens >= 150 &&
					  g2.req[i].prompt_tokens <= 450);
				i0++;
			} else {
				i1++;
			}
		}
		ck_assert(i0 == 100 && i1 > 100);
		/* 99 gaps at 6 sessions/s: mean 16.5 s, sd 1.7 s; 10 to 25 s */
		ck_assert_msg(last > 10000000000LL && last < 25000000000LL, "last start %lld",
			      (long long)last);
	}
	/* --duration counts sessions starting before it: about 2 x 50 = 100
	 * (Poisson, sd 10); 60 to 140 */
	spec = (struct workload_spec){ .seed = 5, .duration_ns = 50000000000LL };
	ck_assert(wlmodel_build(&g2, &m, &spec, &err) == 0);
	ck_assert_msg(g2.n_sessions > 60 && g2.n_sessions < 140, "sessions %zu", g2.n_sessions);
	/* tenants are refused for sessions */
	spec.tenants = "2";
	ck_assert_int_eq(wlmodel_build(&g2, &m, &spec, &err), -EINVAL);
	ck_assert(strstr(err.msg, "--tenants with a sessions model"));
	wlmodel_release(&m);
	workload_release(&wl);
	workload_release(&g);
	workload_release(&g2);
}
END_TEST

/* A sessions model written and read back is the same model; each field of
 * the sessions object is checked. */
static char sess_path[64];

static void write_sess_model(void (*fn)(json_t *root))
{
	struct workload wl;
	struct wlmodel m;
	json_error_t je;
	json_t *root;
	char *text;
	FILE *f;
	int fd;

	build_sessions(&wl, 3);
	fit_ok(&m, &wl);
	text = wlmodel_to_json(&m);
	root = json_loads(text, 0, &je);
	ck_assert_ptr_nonnull(root);
	if (fn)
		fn(json_object_get(root, "sessions"));
	snprintf(sess_path, sizeof(sess_path), "/tmp/ss-wlm-XXXXXX");
	fd = mkstemp(sess_path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_int_eq(json_dumpf(root, f, JSON_INDENT(1)), 0);
	fclose(f);
	json_decref(root);
	free(text);
	wlmodel_release(&m);
	workload_release(&wl);
}

static void sess_bad(void (*fn)(json_t *s), const char *want)
{
	struct ss_error err = { 0 };
	struct wlmodel m;

	write_sess_model(fn);
	wlmodel_init(&m);
	ck_assert_int_eq(wlmodel_read(&m, sess_path, &err), -EINVAL);
	ck_assert_str_eq(err.file, sess_path);
	ck_assert_msg(strstr(err.msg, want), "got '%s', expected '%s'", err.msg, want);
	ck_assert_ptr_null(m.q_p);
	ck_assert_ptr_null(m.turns_v);
	unlink(sess_path);
}

static void s_count(json_t *s) { json_object_set_new(s, "sessions", json_integer(7)); }
static void s_calls(json_t *s) { json_object_set_new(s, "calls", json_integer(10)); }
static void s_key(json_t *s) { json_object_set_new(s, "turn", json_integer(1)); }
static void s_tmean(json_t *s)
{
	json_object_set_new(json_object_get(s, "turns"), "mean", json_real(2));
}
static void s_tmax(json_t *s)
{
	json_object_set_new(json_object_get(s, "turns"), "max", json_real(1e6));
}
static void s_tval(json_t *s)
{
	json_array_set_new(json_object_get(json_object_get(s, "turns"), "values"), 0,
			   json_real(0.5));
}
static void s_fsum(json_t *s)
{
	json_object_set_new(json_object_get(s, "fanout"), "probabilities", json_pack("[f]", 0.5));
}
static void s_fbig(json_t *s)
{
	json_object_set_new(json_object_get(s, "fanout"), "values", json_pack("[i]", 5000));
}
static void s_think(json_t *s)
{
	json_array_set_new(json_object_get(s, "think_s"), 0, json_real(-1));
}
static void s_new(json_t *s) { json_array_remove(json_object_get(s, "new_tokens"), 0); }
static void s_out(json_t *s) { json_object_set_new(s, "output_tokens", json_string("x")); }
static void s_rho(json_t *s) { json_object_set_new(s, "spearman_rho", json_real(2)); }

START_TEST(sessions_json)
{
	struct ss_error err = { 0 };
	struct workload wl;
	struct wlmodel m, r;
	char *a, *b;

	build_sessions(&wl, 3);
	fit_ok(&m, &wl);
	write_sess_model(NULL);
	wlmodel_init(&r);
	ck_assert_msg(wlmodel_read(&r, sess_path, &err) == 0, "%s", err.msg);
	unlink(sess_path);
	a = wlmodel_to_json(&m);
	b = wlmodel_to_json(&r);
	ck_assert_str_eq(a, b);
	ck_assert(r.has_sessions);
	free(a);
	free(b);
	wlmodel_release(&m);
	wlmodel_release(&r);
	workload_release(&wl);

	sess_bad(s_count, "sessions.sessions: expected source.requests (4000");
	sess_bad(s_calls, "sessions.calls: expected an integer from sessions.sessions + 1");
	sess_bad(s_key, "sessions.turn: unknown field");
	sess_bad(s_tmean, "sessions.turns.mean: expected the mean of sessions.turns.values");
	sess_bad(s_tmax, "sessions.turns.max: expected the last of sessions.turns.values");
	sess_bad(s_tval, "sessions.turns.values[0]: expected a number from 1 to 1e+06, got 0.5");
	sess_bad(s_fsum, "sessions.fanout.probabilities: expected a sum of 1, got 0.5");
	sess_bad(s_fbig, "sessions.fanout.values[0]: expected a number from 1 to 1024, got 5000");
	sess_bad(s_think, "sessions.think_s[0]: expected a number from 0 to 3.6e+06, got -1");
	sess_bad(s_new, "sessions.new_tokens: expected 103 numbers (one per lengths.p), got 102");
	sess_bad(s_out, "sessions.output_tokens: expected an array of numbers, got a string");
	sess_bad(s_rho, "sessions.spearman_rho: expected a number >= -1 and <= 1, got 2");
}
END_TEST

/* A session trace whose sessions are single calls is fitted as requests
 * (sessions null): nothing follows a first call. */
START_TEST(sessions_single_calls)
{
	struct workload_spec spec = { .sessions = "rate=2,turns=fixed:1,think_s=1",
				      .lengths = SESS_LENGTHS, .num_requests = 50, .seed = 2 };
	struct ss_error err = { 0 };
	struct workload wl;
	struct wlmodel m;
	char *text;

	workload_init(&wl);
	ck_assert_msg(workload_build(&wl, &spec, &err) == 0, "%s", err.msg);
	fit_ok(&m, &wl);
	ck_assert(!m.has_sessions);
	ck_assert_uint_eq(m.requests, 50);
	text = wlmodel_to_json(&m);
	ck_assert(strstr(text, "\"sessions\": null"));
	free(text);
	wlmodel_release(&m);
	workload_release(&wl);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("workload-model");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, fit_gamma_known);
	tcase_add_test(tc, fit_generate_fit);
	tcase_add_test(tc, fit_mmpp_known);
	tcase_add_test(tc, fit_rate_curve);
	tcase_add_test(tc, knobs);
	tcase_add_test(tc, fit_refused);
	tcase_add_test(tc, json_round_trip);
	tcase_add_test(tc, json_errors);
	tcase_add_test(tc, prefix_share);
	tcase_add_test(tc, fit_batches_known);
	tcase_add_test(tc, sessions_fit_generate_fit);
	tcase_add_test(tc, sessions_json);
	tcase_add_test(tc, sessions_single_calls);
	suite_add_tcase(s, tc);
	return s;
}
