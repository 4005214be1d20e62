/* workload_build(): the trace/arrival/lengths rules, the arrival processes
 * and length distributions (moments checked against their definitions),
 * seeded determinism, rate scaling and the size limits. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-main.h"
#include "workload.h"

/* Samples for the moment checks.  The relative standard deviation of a
 * sample mean is cv / sqrt(n); with n = 200,000 that is 0.22% for an
 * exponential (cv = 1), so the 2% tolerances below sit about 9 standard
 * deviations out: a correct generator never fails them, a wrong mean (or a
 * rate used as a mean) always does. */
#define N_MOMENTS 200000

static void tmp_write(char *path, size_t len, const char *text)
{
	int fd;

	snprintf(path, len, "/tmp/ss-gen-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void build_ok(struct workload *wl, const struct workload_spec *spec)
{
	struct ss_error err = { 0 };
	int rc;

	workload_init(wl);
	rc = workload_build(wl, spec, &err);
	ck_assert_msg(rc == 0, "build failed: %s:%ld: %s", err.file, err.line, err.msg);
	ck_assert_uint_gt(wl->n, 0);
	ck_assert_int_eq(wl->req[0].arrival_ns, 0);
	for (size_t i = 1; i < wl->n; i++)
		ck_assert_int_ge(wl->req[i].arrival_ns, wl->req[i - 1].arrival_ns);
	for (size_t i = 0; i < wl->n; i++) {
		ck_assert_int_ge(wl->req[i].prompt_tokens, 1);
		ck_assert_int_ge(wl->req[i].output_tokens, 1);
	}
}

/* Build must fail with -EINVAL (unless code says otherwise), message
 * containing want, leaving wl empty. */
static void build_bad(const struct workload_spec *spec, int code, const char *want)
{
	struct ss_error err = { 0 };
	struct workload wl;

	workload_init(&wl);
	ck_assert_int_eq(workload_build(&wl, spec, &err), code);
	ck_assert_int_eq(err.code, code);
	ck_assert_msg(strstr(err.msg, want), "message '%s' lacks '%s'", err.msg, want);
	ck_assert_ptr_null(wl.req);
	ck_assert_uint_eq(wl.n, 0);
}

/* Mean and coefficient of variation of the gaps between arrivals (s). */
static void gap_stats(const struct workload *wl, double *mean, double *cv)
{
	double s = 0, s2 = 0, g, m;
	size_t n = wl->n - 1;

	for (size_t i = 1; i < wl->n; i++) {
		g = (wl->req[i].arrival_ns - wl->req[i - 1].arrival_ns) * 1e-9;
		s += g;
		s2 += g * g;
	}
	m = s / n;
	*mean = m;
	*cv = sqrt(s2 / n - m * m) / m;
}

static void length_means(const struct workload *wl, double *prompt, double *output)
{
	double sp = 0, so = 0;

	for (size_t i = 0; i < wl->n; i++) {
		sp += wl->req[i].prompt_tokens;
		so += wl->req[i].output_tokens;
	}
	*prompt = sp / wl->n;
	*output = so / wl->n;
}

/* ---- arrival processes ------------------------------------------------- */

START_TEST(poisson_mean_gap)
{
	struct workload_spec spec = {
		.arrival = "poisson:rate=5", .lengths = "fixed:prompt=512,output=128",
		.num_requests = N_MOMENTS + 1, .seed = 1,
	};
	struct workload wl;
	double mean, cv;

	build_ok(&wl, &spec);
	ck_assert_uint_eq(wl.n, N_MOMENTS + 1);
	gap_stats(&wl, &mean, &cv);
	ck_assert_double_eq_tol(mean, 0.2, 0.2 * 0.02);
	/* exponential gaps have cv 1; the sample cv has about the same
	 * relative spread as the mean */
	ck_assert_double_eq_tol(cv, 1.0, 0.03);
	ck_assert_int_eq(wl.format, TRACE_AUTO);
	ck_assert(wl.has_arrivals);
	ck_assert_str_eq(wl.source, "poisson:rate=5 x fixed:prompt=512,output=128");
	for (size_t i = 0; i < wl.n; i++) {
		ck_assert_int_eq(wl.req[i].prompt_tokens, 512);
		ck_assert_int_eq(wl.req[i].output_tokens, 128);
	}
	workload_release(&wl);
}
END_TEST

START_TEST(gamma_cv_and_mean)
{
	static const double cvs[] = { 0.5, 2.0 };
	struct workload wl;
	double mean, cv;
	char arr[64];

	for (size_t k = 0; k < 2; k++) {
		struct workload_spec spec = {
			.arrival = arr, .lengths = "fixed:prompt=1,output=1",
			.num_requests = N_MOMENTS + 1, .seed = 7,
		};

		snprintf(arr, sizeof(arr), "gamma:rate=10,cv=%g", cvs[k]);
		build_ok(&wl, &spec);
		gap_stats(&wl, &mean, &cv);
		/* mean: cv/sqrt(n) = 0.45% at cv 2, tolerance 2%.  cv: for a
		 * gamma with shape k the sample variance has relative sd
		 * sqrt((2 + 6/k)/n) = 1.1% at cv 2 (k = 1/4), so the sample cv
		 * is within ~0.6%; 3% is 5 sd out. */
		ck_assert_double_eq_tol(mean, 0.1, 0.1 * 0.02);
		ck_assert_double_eq_tol(cv, cvs[k], cvs[k] * 0.03);
		workload_release(&wl);
	}
}
END_TEST

/* Mean rate (n - 1) / last arrival, req/s. */
static double mean_rate(const struct workload *wl)
{
	return (double)(wl->n - 1) / (wl->req[wl->n - 1].arrival_ns * 1e-9);
}

/* Index of dispersion of counts: variance over mean of the number of
 * arrivals in the m consecutive windows of win_s seconds from 0. */
static double idc(const struct workload *wl, double win_s, size_t m)
{
	double *c = calloc(m, sizeof(*c)), s = 0, s2 = 0, mean;

	ck_assert_ptr_nonnull(c);
	for (size_t i = 0; i < wl->n; i++) {
		size_t w = (size_t)(wl->req[i].arrival_ns * 1e-9 / win_s);

		if (w < m)
			c[w]++;
	}
	for (size_t w = 0; w < m; w++) {
		s += c[w];
		s2 += c[w] * c[w];
	}
	free(c);
	mean = s / m;
	return (s2 - m * mean * mean) / (m - 1) / mean;
}

/* The index of dispersion of a two-state MMPP (rates r1, r2, mean times
 * s1, s2 in the states) over windows of T seconds.  The arrival rate
 * L(t) is a two-state Markov chain: stationary mean Lm = (r1 s1 + r2 s2) /
 * (s1 + s2), variance V = p1 p2 (r1 - r2)^2 with p1 = s1 / (s1 + s2),
 * p2 = s2 / (s1 + s2), and autocovariance V exp(-a tau), a = 1/s1 + 1/s2.
 * The count N(T) of a doubly stochastic Poisson process has
 *   Var N(T) = Lm T + 2 V int_0^T (T - tau) exp(-a tau) dtau
 *            = Lm T + 2 V (T / a - (1 - exp(-a T)) / a^2),
 * so IDC(T) = 1 + (2 V / (Lm a)) (1 - (1 - exp(-a T)) / (a T)); as T grows
 * it tends to 1 + 2 (r1 - r2)^2 s1^2 s2^2 / ((s1 + s2)^2 (r1 s1 + r2 s2)),
 * the asymptotic IDC of the issue. */
static double mmpp2_idc(double r1, double r2, double s1, double s2, double T)
{
	double p1 = s1 / (s1 + s2), p2 = s2 / (s1 + s2);
	double lm = p1 * r1 + p2 * r2, v = p1 * p2 * (r1 - r2) * (r1 - r2), a = 1 / s1 + 1 / s2;

	return 1 + 2 * v / (lm * a) * (1 - (1 - exp(-a * T)) / (a * T));
}

START_TEST(mmpp2_idc_limit)
{
	/* the closed form's limit is the formula: rates 10 and 1 for
	 * 1 s each give 1 + 2 * 81 * 1 / (4 * 11) = 4.6818... */
	ck_assert_double_eq_tol(mmpp2_idc(10, 1, 1, 1, 1e12), 1 + 2.0 * 81 / 44, 1e-9);
	/* on-off 20 req/s, 0.5 s on, 1.5 s off: 1 + 2 * 400 * 0.5625 / (4 * 10) = 12.25 */
	ck_assert_double_eq_tol(mmpp2_idc(20, 0, 0.5, 1.5, 1e12), 12.25, 1e-9);
	/* over a short window bursts are not yet seen: IDC -> 1 */
	ck_assert_double_eq_tol(mmpp2_idc(10, 1, 1, 1, 1e-9), 1, 1e-6);
}
END_TEST

/* The mean rate over N_MOMENTS arrivals is the stationary mean sum(Rk Sk) /
 * sum(Sk).  The count in a long time T has variance IDC x mean, so the
 * estimate's relative sd is sqrt(IDC / n): sqrt(4.68 / 2e5) = 0.48% for the
 * mmpp below and sqrt(12.25 / 2e5) = 0.78% for the on-off one; the 4%
 * tolerance is over 5 sd out.  A process that ignored the sojourn times
 * (mean of the rates: 5.5 vs 10 for on-off) or stayed in one state fails. */
START_TEST(mmpp_and_onoff_mean_rate)
{
	static const struct {
		const char *arrival;
		double rate;
	} cases[] = {
		{ "mmpp:rates=10,1,switch_s=1,1", 5.5 },
		{ "mmpp:rates=10,1,switch_s=3,1", 7.75 },
		{ "onoff:rate=20,on_s=0.5,off_s=1.5", 5 },
		{ "mmpp:rates=30,0,6,switch_s=0.2,0.5,1", (30 * 0.2 + 6 * 1) / 1.7 },
	};
	struct workload wl;

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct workload_spec spec = {
			.arrival = cases[k].arrival, .lengths = "fixed:prompt=1,output=1",
			.num_requests = N_MOMENTS + 1, .seed = 5,
		};

		build_ok(&wl, &spec);
		ck_assert_msg(fabs(mean_rate(&wl) / cases[k].rate - 1) < 0.04,
			      "%s: rate %g, expected %g", cases[k].arrival, mean_rate(&wl),
			      cases[k].rate);
		workload_release(&wl);
	}
}
END_TEST

/* Counts in 2000 windows of 50 s, 25 to 40 switching cycles each.  The
 * sample variance of m roughly normal counts has relative sd sqrt(2/(m-1))
 * = 3.2% (neighbouring windows are nearly independent: the rate forgets
 * its state in 1/a < 0.5 s), so the sample IDC is within 15% of its value
 * (4.7 sd) for every seed; Poisson's is 1 within 0.15.  The theory
 * (mmpp2_idc) at T = 50 s: 4.645 for the mmpp, 12.17 for on-off. */
START_TEST(mmpp_and_onoff_dispersion)
{
	static const struct {
		const char *arrival;
		double r1, r2, s1, s2;
	} cases[] = {
		{ "mmpp:rates=10,1,switch_s=1,1", 10, 1, 1, 1 },
		{ "onoff:rate=20,on_s=0.5,off_s=1.5", 20, 0, 0.5, 1.5 },
		{ "poisson:rate=5.5", 5.5, 5.5, 1, 1 },   /* equal rates: IDC 1 */
	};
	const double win = 50;
	const size_t m = 2000;
	struct workload wl;

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct workload_spec spec = {
			.arrival = cases[k].arrival, .lengths = "fixed:prompt=1,output=1",
			.duration_ns = (int64_t)(win * m * 1e9), .seed = 8,
		};
		double want = mmpp2_idc(cases[k].r1, cases[k].r2, cases[k].s1, cases[k].s2, win);
		double got;

		build_ok(&wl, &spec);
		got = idc(&wl, win, m);
		if (cases[k].r1 == cases[k].r2) {
			ck_assert_double_eq_tol(want, 1, 1e-12);
			ck_assert_msg(fabs(got - 1) < 0.15, "%s: IDC %g, expected 1", cases[k].arrival, got);
		} else {
			ck_assert_msg(want > 4, "theory %g", want);
			ck_assert_msg(fabs(got / want - 1) < 0.15, "%s: IDC %g, expected %g",
				      cases[k].arrival, got, want);
		}
		workload_release(&wl);
	}
}
END_TEST

/* On-off is the two-state mmpp with rate 0 off, draw for draw; an mmpp is
 * seeded like the other processes and leaves the lengths alone. */
START_TEST(onoff_is_mmpp_and_seeded)
{
	struct workload_spec spec = {
		.arrival = "onoff:rate=20,on_s=0.5,off_s=1.5",
		.lengths = "uniform:prompt_min=1,prompt_max=1000,output_min=1,output_max=100",
		.num_requests = 20000, .seed = 3,
	};
	struct workload a, b, c, d;
	size_t long_gaps = 0;

	build_ok(&a, &spec);
	spec.arrival = "mmpp:rates=20,0,switch_s=0.5,1.5";
	build_ok(&b, &spec);
	ck_assert_uint_eq(a.n, b.n);
	ck_assert_int_eq(memcmp(a.req, b.req, a.n * sizeof(a.req[0])), 0);
	spec.seed = 4;
	build_ok(&c, &spec);
	ck_assert_int_ne(memcmp(a.req, c.req, a.n * sizeof(a.req[0])), 0);
	spec.seed = 3;
	spec.arrival = "poisson:rate=5";
	build_ok(&d, &spec);
	for (size_t i = 0; i < a.n; i++) {
		ck_assert_int_eq(a.req[i].prompt_tokens, d.req[i].prompt_tokens);
		ck_assert_int_eq(a.req[i].output_tokens, d.req[i].output_tokens);
	}
	/* OFF periods show as long gaps: a gap > 1 s has probability e^-20
	 * within an ON period, but about 1/4 of the gaps span an OFF period
	 * (mean 1.5 s; 10 arrivals an ON period on average, so 1 gap in 10
	 * holds one, and exp(-1/1.5) = 51% of those exceed 1 s: ~5%) */
	for (size_t i = 1; i < a.n; i++)
		long_gaps += a.req[i].arrival_ns - a.req[i - 1].arrival_ns > 1000000000;
	ck_assert_msg(long_gaps > a.n / 40 && long_gaps < a.n / 10, "%zu long gaps", long_gaps);
	workload_release(&a);
	workload_release(&b);
	workload_release(&c);
	workload_release(&d);
}
END_TEST

/* ---- rate curves (--rate-curve) ----------------------------------------- */

/* A triangle 0 -> 50 -> 0 req/s over 200 s, then 100 s at 0, repeating
 * every 300 s: 5000 requests a period.  Linear between rows, the expected
 * counts in the 50 s bins of a period are the areas under the line: 625,
 * 1875, 1875, 625, then 0 (a step curve, rate r_i until t_i+1, would give
 * 0 and 5000 in the first two 100 s, so the test tells them apart).  Over
 * 10 periods a bin expects E = 6250 or 18750 requests (plus request 0, at
 * 0); Poisson counts have sd sqrt(E) (79 and 137), and the tolerance is
 * 5 sd.  The bins at rate 0 must be exactly empty. */
START_TEST(rate_curve_counts_match_integral)
{
	static const double want[6] = { 6250, 18750, 18750, 6250, 0, 0 };
	double got[6] = { 0 };
	struct workload_spec spec = {
		.lengths = "fixed:prompt=1,output=1", .duration_ns = 3000 * (int64_t)1000000000,
		.seed = 2,
	};
	struct workload wl;
	char path[64];

	tmp_write(path, sizeof(path), "time_s,rate\n0,0\n100,50\n200,0\n\n300,0\n");
	spec.rate_curve = path;
	build_ok(&wl, &spec);
	for (size_t i = 1; i < wl.n; i++) {   /* request 0 is at 0 by convention */
		double t = fmod(wl.req[i].arrival_ns * 1e-9, 300);

		got[(size_t)(t / 50)]++;
		ck_assert_int_lt(wl.req[i].arrival_ns, spec.duration_ns);
	}
	for (size_t b = 0; b < 6; b++) {
		if (want[b] == 0)
			ck_assert_msg(got[b] == 0, "bin %zu: %g arrivals at rate 0", b, got[b]);
		else
			ck_assert_msg(fabs(got[b] - want[b]) < 5 * sqrt(want[b]),
				      "bin %zu: %g arrivals, expected %g", b, got[b], want[b]);
	}
	ck_assert_str_eq(wl.source + strlen(wl.source) - strlen(" x fixed:prompt=1,output=1"),
			 " x fixed:prompt=1,output=1");
	ck_assert(!strncmp(wl.source, "rate-curve:", 11));
	workload_release(&wl);
	/* a constant curve is Poisson at its rate: the mean gap checks as
	 * poisson_mean_gap does */
	tmp_write(path, sizeof(path), "rate,time_s\n5,0\n5,7\n");
	spec.duration_ns = 0;
	spec.num_requests = N_MOMENTS + 1;
	build_ok(&wl, &spec);
	{
		double mean, cv;

		gap_stats(&wl, &mean, &cv);
		ck_assert_double_eq_tol(mean, 0.2, 0.2 * 0.02);
		ck_assert_double_eq_tol(cv, 1.0, 0.03);
	}
	workload_release(&wl);
	unlink(path);
}
END_TEST

START_TEST(rate_curve_errors)
{
	static const struct {
		const char *text, *want;
		long line;
	} cases[] = {
		{ "", "empty file: expected the header time_s,rate", 0 },
		{ "t,r\n0,1\n", "expected the header time_s,rate", 1 },
		{ "time_s,rate\n0,1\n5,abc\n", "rate: expected a rate from 0 to 1e9 req/s, got 'abc'", 3 },
		{ "time_s,rate\n0,1\n\n5,-1\n", "rate: expected a rate from 0 to 1e9 req/s, got '-1'", 4 },
		{ "time_s,rate\n1,1\n5,1\n", "time_s: expected the first row at time 0, got '1'", 2 },
		{ "time_s,rate\n0,1\n5,1\n5,2\n", "expected times increasing row by row, got '5'", 4 },
		{ "time_s,rate\n0,1\n5,1,3\n", "expected 2 fields (time_s,rate), got 3", 3 },
		{ "time_s,rate\n0,1\n", "expected at least 2 rows", 2 },
		{ "time_s,rate\n0,0\n5,0\n", "the curve holds 0 requests a period", 3 },
		{ "time_s,rate\n0,1\nx,1\n", "time_s: expected a time from 0 to 1e9 s, got 'x'", 3 },
	};
	struct workload_spec spec = { .lengths = "fixed:prompt=1,output=1", .num_requests = 10 };
	struct ss_error err;
	struct workload wl;
	char path[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tmp_write(path, sizeof(path), cases[i].text);
		spec.rate_curve = path;
		err = (struct ss_error){ 0 };
		workload_init(&wl);
		ck_assert_int_lt(workload_build(&wl, &spec, &err), 0);
		ck_assert_msg(strstr(err.msg, cases[i].want), "case %zu: '%s' lacks '%s'", i, err.msg,
			      cases[i].want);
		ck_assert_str_eq(err.file, path);   /* a bad file: exit 1 */
		ck_assert_int_eq(err.line, cases[i].line);
		ck_assert_ptr_null(wl.req);
		unlink(path);
	}
	spec.rate_curve = "/nonexistent/curve.csv";
	build_bad(&spec, -ENOENT, "cannot open rate curve");
	/* with --arrival: a bad command line (no file named) */
	spec.rate_curve = "/nonexistent/curve.csv";
	spec.arrival = "poisson:rate=1";
	build_bad(&spec, -EINVAL, "--rate-curve cannot be combined with --arrival");
	spec.arrival = NULL;
	spec.lengths = NULL;
	spec.closed = true;
	build_bad(&spec, -EINVAL, "--rate-curve cannot be combined with --concurrency");
}
END_TEST

/* ---- --rate on a trace --------------------------------------------------- */

/* Five requests at 0, 1, 2, 4, 8 s: 4 gaps over 8 s, 0.5 req/s.  --rate 2
 * is a scale of 4: times 0, 0.25, 0.5, 1, 2 s.  With --num-requests 3 the
 * replayed requests span 2 s (1 req/s), so --rate 2 is a scale of 2. */
START_TEST(target_rate_rescales_trace)
{
	static const int64_t want4[] = { 0, 250, 500, 1000, 2000 };
	struct workload_spec spec = { .target_rate = 2, .seed = 1 };
	struct workload wl;
	char path[64];

	tmp_write(path, sizeof(path),
		  "arrival_ms,prompt_tokens,output_tokens\n0,1,1\n1000,2,2\n2000,3,3\n4000,4,4\n8000,5,5\n");
	spec.trace = path;
	build_ok(&wl, &spec);
	ck_assert_uint_eq(wl.n, 5);
	for (size_t i = 0; i < 5; i++)
		ck_assert_int_eq(wl.req[i].arrival_ns, want4[i] * 1000000);
	workload_release(&wl);
	spec.num_requests = 3;
	build_ok(&wl, &spec);
	ck_assert_uint_eq(wl.n, 3);
	ck_assert_int_eq(wl.req[1].arrival_ns, 500000000);
	ck_assert_int_eq(wl.req[2].arrival_ns, 1000000000);
	workload_release(&wl);
	/* --duration cuts after the scaling: 1.5 s keeps the first 4 */
	spec.num_requests = 0;
	spec.duration_ns = 1500000000;
	build_ok(&wl, &spec);
	ck_assert_uint_eq(wl.n, 4);
	workload_release(&wl);
	spec.duration_ns = 0;
	/* refused: with --rate-scale, with synthetic times, a single request */
	spec.rate_scale = 2;
	build_bad(&spec, -EINVAL, "--rate cannot be combined with --rate-scale");
	spec.rate_scale = 0;
	spec.arrival = "poisson:rate=1";
	build_bad(&spec, -EINVAL, "--rate applies to a trace replayed at its own times");
	spec.arrival = NULL;
	spec.target_rate = -1;
	build_bad(&spec, -EINVAL, "--rate: expected a rate in req/s, > 0");
	spec.target_rate = 2;
	spec.num_requests = 1;
	{
		struct ss_error err = { 0 };

		workload_init(&wl);
		ck_assert_int_eq(workload_build(&wl, &spec, &err), -EINVAL);
		ck_assert_str_eq(err.file, path);   /* the trace's fault: exit 1 */
		ck_assert_msg(strstr(err.msg, "arrives at one instant"), "%s", err.msg);
	}
	unlink(path);
	spec = (struct workload_spec){ .target_rate = 2, .lengths = "fixed:prompt=1,output=1",
				       .arrival = "poisson:rate=1", .num_requests = 5 };
	build_bad(&spec, -EINVAL, "without --arrival (whose rate= sets the rate)");
}
END_TEST

/* ---- length distributions ---------------------------------------------- */

START_TEST(lognormal_means_and_clamp)
{
	struct workload_spec spec = {
		.arrival = "poisson:rate=1",
		.lengths = "lognormal:prompt_mean=1000,prompt_cv=0.5,output_mean=200,output_cv=1",
		.num_requests = N_MOMENTS, .seed = 3,
	};
	struct workload wl;
	double pm, om;
	int32_t pmax = 0;

	build_ok(&wl, &spec);
	length_means(&wl, &pm, &om);
	/* relative sd of the means: 0.5/sqrt(n) = 0.11%, 1/sqrt(n) = 0.22%;
	 * rounding to whole tokens moves a mean of 200 by far less than 2% */
	ck_assert_double_eq_tol(pm, 1000, 1000 * 0.02);
	ck_assert_double_eq_tol(om, 200, 200 * 0.02);
	workload_release(&wl);

	spec.lengths = "lognormal:prompt_mean=1000,prompt_cv=0.5,output_mean=200,output_cv=1,"
		       "prompt_max=1200,output_max=50";
	build_ok(&wl, &spec);
	for (size_t i = 0; i < wl.n; i++) {
		ck_assert_int_le(wl.req[i].prompt_tokens, 1200);
		ck_assert_int_le(wl.req[i].output_tokens, 50);
		if (wl.req[i].prompt_tokens > pmax)
			pmax = wl.req[i].prompt_tokens;
	}
	ck_assert_int_eq(pmax, 1200);   /* P(prompt > 1200) is about 30% */
	workload_release(&wl);
}
END_TEST

START_TEST(geometric_mean)
{
	struct workload_spec spec = {
		.arrival = "poisson:rate=1", .lengths = "geometric:prompt=100,output_mean=50",
		.num_requests = N_MOMENTS, .seed = 4,
	};
	struct workload wl;
	double pm, om;

	build_ok(&wl, &spec);
	length_means(&wl, &pm, &om);
	ck_assert_double_eq(pm, 100);
	/* geometric cv = sqrt(1 - p) ~ 0.99: relative sd of the mean 0.22% */
	ck_assert_double_eq_tol(om, 50, 50 * 0.02);
	workload_release(&wl);

	/* mean 1: every output is exactly one token */
	spec.lengths = "geometric:prompt=1,output_mean=1";
	spec.num_requests = 1000;
	build_ok(&wl, &spec);
	for (size_t i = 0; i < wl.n; i++)
		ck_assert_int_eq(wl.req[i].output_tokens, 1);
	workload_release(&wl);
}
END_TEST

START_TEST(uniform_inclusive_bounds)
{
	struct workload_spec spec = {
		.arrival = "poisson:rate=1",
		.lengths = "uniform:prompt_min=1,prompt_max=4,output_min=10,output_max=10",
		.num_requests = 10000, .seed = 5,
	};
	struct workload wl;
	size_t hits[5] = { 0 };

	build_ok(&wl, &spec);
	for (size_t i = 0; i < wl.n; i++) {
		ck_assert_int_ge(wl.req[i].prompt_tokens, 1);
		ck_assert_int_le(wl.req[i].prompt_tokens, 4);
		ck_assert_int_eq(wl.req[i].output_tokens, 10);
		hits[wl.req[i].prompt_tokens]++;
	}
	/* each value expected 2500 times, sd ~43 */
	for (int v = 1; v <= 4; v++)
		ck_assert_uint_gt(hits[v], 2200);
	workload_release(&wl);
}
END_TEST

START_TEST(empirical_samples_pairs_jointly)
{
	struct workload_spec spec = {
		.arrival = "poisson:rate=1", .num_requests = 30000, .seed = 6,
	};
	struct workload wl;
	char path[64], lengths[128];
	size_t hits[4] = { 0 };

	tmp_write(path, sizeof(path),
		  "num_prefill_tokens,num_decode_tokens\n10,1\n20,2\n30,3\n");
	snprintf(lengths, sizeof(lengths), "empirical:%s", path);
	spec.lengths = lengths;
	build_ok(&wl, &spec);
	for (size_t i = 0; i < wl.n; i++) {
		/* pairs are kept together: output = prompt / 10 */
		ck_assert_int_eq(wl.req[i].prompt_tokens, 10 * wl.req[i].output_tokens);
		hits[wl.req[i].output_tokens]++;
	}
	/* 10,000 expected each, sd ~82 */
	for (int v = 1; v <= 3; v++)
		ck_assert_uint_gt(hits[v], 9500);
	workload_release(&wl);

	/* file=PATH is accepted too */
	snprintf(lengths, sizeof(lengths), "empirical:file=%s", path);
	build_ok(&wl, &spec);
	workload_release(&wl);
	unlink(path);
}
END_TEST

/* ---- determinism and independence of the streams ------------------------ */

START_TEST(same_seed_same_workload)
{
	struct workload_spec spec = {
		.arrival = "gamma:rate=3,cv=1.5",
		.lengths = "lognormal:prompt_mean=500,prompt_cv=1,output_mean=100,output_cv=1",
		.num_requests = 5000, .seed = 42,
	};
	struct workload a, b, c;

	build_ok(&a, &spec);
	build_ok(&b, &spec);
	ck_assert_uint_eq(a.n, b.n);
	ck_assert_int_eq(memcmp(a.req, b.req, a.n * sizeof(a.req[0])), 0);
	spec.seed = 43;
	build_ok(&c, &spec);
	ck_assert_int_ne(memcmp(a.req, c.req, a.n * sizeof(a.req[0])), 0);
	workload_release(&a);
	workload_release(&b);
	workload_release(&c);
}
END_TEST

START_TEST(streams_are_independent)
{
	struct workload_spec spec = {
		.arrival = "poisson:rate=2",
		.lengths = "uniform:prompt_min=1,prompt_max=1000,output_min=1,output_max=100",
		.num_requests = 5000, .seed = 9,
	};
	struct workload a, b, c;

	build_ok(&a, &spec);
	/* another arrival process: the same lengths for every request */
	spec.arrival = "gamma:rate=20,cv=3";
	build_ok(&b, &spec);
	for (size_t i = 0; i < a.n; i++) {
		ck_assert_int_eq(a.req[i].prompt_tokens, b.req[i].prompt_tokens);
		ck_assert_int_eq(a.req[i].output_tokens, b.req[i].output_tokens);
	}
	/* other lengths: the same arrival times */
	spec.arrival = "poisson:rate=2";
	spec.lengths = "geometric:prompt=7,output_mean=30";
	build_ok(&c, &spec);
	for (size_t i = 0; i < a.n; i++)
		ck_assert_int_eq(a.req[i].arrival_ns, c.req[i].arrival_ns);
	workload_release(&a);
	workload_release(&b);
	workload_release(&c);
}
END_TEST

/* ---- rate scale and limits ---------------------------------------------- */

START_TEST(rate_scale_divides_times)
{
	struct workload_spec spec = {
		.arrival = "poisson:rate=4", .lengths = "fixed:prompt=8,output=8",
		.num_requests = 1000, .seed = 11, .rate_scale = 1,
	};
	struct workload a, b;
	char path[64];

	build_ok(&a, &spec);
	spec.rate_scale = 2;
	build_ok(&b, &spec);
	ck_assert_uint_eq(a.n, b.n);
	/* both are rounded to whole ns from the same unscaled times */
	for (size_t i = 0; i < a.n; i++)
		ck_assert_int_le(llabs(2 * b.req[i].arrival_ns - a.req[i].arrival_ns), 2);
	workload_release(&a);
	workload_release(&b);

	/* trace replay too; 0 means "unset" and is taken as 1 */
	tmp_write(path, sizeof(path),
		  "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n1,2,2\n3,3,3\n");
	spec = (struct workload_spec){ .trace = path, .rate_scale = 2 };
	build_ok(&a, &spec);
	ck_assert_int_eq(a.req[1].arrival_ns, 500000000);
	ck_assert_int_eq(a.req[2].arrival_ns, 1500000000);
	ck_assert_str_eq(a.source, path);
	workload_release(&a);
	spec.rate_scale = 0;
	build_ok(&a, &spec);
	ck_assert_int_eq(a.req[2].arrival_ns, 3000000000LL);
	workload_release(&a);
	unlink(path);
}
END_TEST

START_TEST(duration_and_count_limits)
{
	struct workload_spec spec = {
		.arrival = "poisson:rate=100", .lengths = "fixed:prompt=8,output=8",
		.duration_ns = 10000000000LL, .seed = 12,
	};
	struct workload wl;
	char path[64];

	build_ok(&wl, &spec);
	/* 1000 expected, sd sqrt(1000) = 32 */
	ck_assert_uint_gt(wl.n, 850);
	ck_assert_uint_lt(wl.n, 1150);
	ck_assert_int_lt(wl.req[wl.n - 1].arrival_ns, spec.duration_ns);
	workload_release(&wl);

	/* rate scale first, then the duration: twice the requests */
	spec.rate_scale = 2;
	build_ok(&wl, &spec);
	ck_assert_uint_gt(wl.n, 1800);
	ck_assert_int_lt(wl.req[wl.n - 1].arrival_ns, spec.duration_ns);
	workload_release(&wl);

	/* both: the tighter one wins */
	spec.rate_scale = 1;
	spec.num_requests = 10;
	build_ok(&wl, &spec);
	ck_assert_uint_eq(wl.n, 10);
	workload_release(&wl);

	/* trace replay: arrivals 0, 1, 2, 3 s */
	tmp_write(path, sizeof(path),
		  "arrival_ms,prompt_tokens,output_tokens\n0,1,1\n1000,2,2\n2000,3,3\n3000,4,4\n");
	spec = (struct workload_spec){ .trace = path, .duration_ns = 2000000000LL };
	build_ok(&wl, &spec);
	ck_assert_uint_eq(wl.n, 2);   /* < 2 s: the row at exactly 2 s is cut */
	workload_release(&wl);
	spec = (struct workload_spec){ .trace = path, .num_requests = 3 };
	build_ok(&wl, &spec);
	ck_assert_uint_eq(wl.n, 3);
	ck_assert_int_eq(wl.req[2].prompt_tokens, 3);
	workload_release(&wl);
	spec = (struct workload_spec){ .trace = path, .num_requests = 99 };
	build_ok(&wl, &spec);
	ck_assert_uint_eq(wl.n, 4);
	workload_release(&wl);
	unlink(path);
}
END_TEST

START_TEST(trace_lengths_with_synthetic_arrivals)
{
	struct workload_spec spec = { .arrival = "poisson:rate=10", .seed = 13 };
	struct workload wl;
	char path[64];

	/* out of order in the file: lengths must stay in file order */
	tmp_write(path, sizeof(path),
		  "arrived_at,num_prefill_tokens,num_decode_tokens\n5,50,5\n1,10,1\n3,30,3\n");
	spec.trace = path;
	build_ok(&wl, &spec);
	ck_assert_uint_eq(wl.n, 3);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 50);
	ck_assert_int_eq(wl.req[1].prompt_tokens, 10);
	ck_assert_int_eq(wl.req[2].prompt_tokens, 30);
	ck_assert(wl.has_arrivals);
	ck_assert_ptr_nonnull(strstr(wl.source, "poisson:rate=10"));
	ck_assert_ptr_nonnull(strstr(wl.source, path));
	workload_release(&wl);
	unlink(path);

	/* a lengths-only trace needs --arrival ... */
	tmp_write(path, sizeof(path), "num_prefill_tokens,num_decode_tokens\n5,6\n7,8\n");
	spec = (struct workload_spec){ .trace = path };
	build_bad(&spec, -EINVAL, "no arrival times");
	/* ... and works with it; num_requests keeps the first N */
	spec.arrival = "gamma:rate=1,cv=2";
	spec.num_requests = 1;
	build_ok(&wl, &spec);
	ck_assert_uint_eq(wl.n, 1);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 5);
	ck_assert_int_eq(wl.req[0].output_tokens, 6);
	workload_release(&wl);
	unlink(path);
}
END_TEST

/* ---- tenants ------------------------------------------------------------ */

#define N_TENANTS 20000

static void tenant_counts(const struct workload *wl, size_t *hits, int32_t ntenants)
{
	for (size_t i = 0; i < wl->n; i++) {
		ck_assert_int_ge(wl->req[i].tenant, 0);
		ck_assert_int_lt(wl->req[i].tenant, ntenants);
		hits[wl->req[i].tenant]++;
	}
}

START_TEST(tenants_weighted)
{
	struct workload_spec spec = {
		.arrival = "poisson:rate=10", .lengths = "fixed:prompt=16,output=4",
		.num_requests = N_TENANTS, .seed = 21, .tenants = "10,1",
	};
	struct workload wl;
	size_t hits[2] = { 0 };

	build_ok(&wl, &spec);
	tenant_counts(&wl, hits, 2);
	/* tenant 0 is binomial(20000, 10/11): mean 18182, sd
	 * sqrt(n p (1 - p)) = 40.7; 250 is over 6 sd, while a swapped or
	 * uniform draw (1818 or 10000) is thousands away */
	ck_assert_uint_ge(hits[0], 18182 - 250);
	ck_assert_uint_le(hits[0], 18182 + 250);
	ck_assert_uint_eq(hits[0] + hits[1], N_TENANTS);
	workload_release(&wl);
}
END_TEST

START_TEST(tenants_uniform)
{
	struct workload_spec spec = {
		.arrival = "poisson:rate=10", .lengths = "fixed:prompt=16,output=4",
		.num_requests = N_TENANTS, .seed = 22, .tenants = "4",
	};
	struct workload wl;
	size_t hits[4] = { 0 };

	build_ok(&wl, &spec);
	tenant_counts(&wl, hits, 4);
	/* each binomial(20000, 1/4): mean 5000, sd 61.2; 370 is 6 sd */
	for (int t = 0; t < 4; t++) {
		ck_assert_uint_ge(hits[t], 5000 - 370);
		ck_assert_uint_le(hits[t], 5000 + 370);
	}
	workload_release(&wl);

	/* "1": everyone is tenant 0 */
	spec.tenants = "1";
	spec.num_requests = 100;
	build_ok(&wl, &spec);
	for (size_t i = 0; i < wl.n; i++)
		ck_assert_int_eq(wl.req[i].tenant, 0);
	workload_release(&wl);
}
END_TEST

START_TEST(tenants_seeded_and_separate_stream)
{
	struct workload_spec spec = {
		.arrival = "gamma:rate=5,cv=2",
		.lengths = "uniform:prompt_min=1,prompt_max=1000,output_min=1,output_max=100",
		.num_requests = 5000, .seed = 23, .tenants = "3,2,1",
	};
	struct workload a, b, c, d, e;
	size_t differ = 0;

	build_ok(&a, &spec);
	build_ok(&b, &spec);
	ck_assert_int_eq(memcmp(a.req, b.req, a.n * sizeof(a.req[0])), 0);
	/* another seed, another assignment */
	spec.seed = 24;
	build_ok(&c, &spec);
	for (size_t i = 0; i < a.n; i++)
		differ += a.req[i].tenant != c.req[i].tenant;
	ck_assert_uint_gt(differ, 1000);
	/* without --tenants: the same arrivals and lengths (a stream of its
	 * own), and tenant 0 everywhere */
	spec.seed = 23;
	spec.tenants = NULL;
	build_ok(&d, &spec);
	for (size_t i = 0; i < a.n; i++) {
		ck_assert_int_eq(a.req[i].arrival_ns, d.req[i].arrival_ns);
		ck_assert_int_eq(a.req[i].prompt_tokens, d.req[i].prompt_tokens);
		ck_assert_int_eq(a.req[i].output_tokens, d.req[i].output_tokens);
		ck_assert_int_eq(d.req[i].tenant, 0);
	}
	/* request i's tenant depends on its index only: a shorter run gets the
	 * same first tenants */
	spec.tenants = "3,2,1";
	spec.num_requests = 100;
	build_ok(&e, &spec);
	for (size_t i = 0; i < e.n; i++)
		ck_assert_int_eq(e.req[i].tenant, a.req[i].tenant);
	workload_release(&a);
	workload_release(&b);
	workload_release(&c);
	workload_release(&d);
	workload_release(&e);
}
END_TEST

START_TEST(tenants_override_trace)
{
	struct workload_spec spec = { .seed = 25 };
	struct workload wl;
	char path[64];
	size_t hits[2] = { 0 };
	char *text = malloc(64 + 1000 * 24);
	size_t off;

	ck_assert_ptr_nonnull(text);
	off = (size_t)sprintf(text, "arrival_ms,prompt_tokens,output_tokens,tenant\n");
	for (int i = 0; i < 1000; i++)
		off += (size_t)sprintf(text + off, "%d,10,1,7\n", i);
	tmp_write(path, sizeof(path), text);
	free(text);
	spec.trace = path;

	/* without the option the trace's column is kept ... */
	build_ok(&wl, &spec);
	for (size_t i = 0; i < wl.n; i++)
		ck_assert_int_eq(wl.req[i].tenant, 7);
	workload_release(&wl);

	/* ... with it, every request is redrawn */
	spec.tenants = "2";
	build_ok(&wl, &spec);
	tenant_counts(&wl, hits, 2);
	/* binomial(1000, 1/2): sd 15.8; both well away from 0 */
	ck_assert_uint_gt(hits[0], 400);
	ck_assert_uint_gt(hits[1], 400);
	workload_release(&wl);

	/* trace lengths under synthetic arrivals too */
	spec.arrival = "poisson:rate=100";
	spec.tenants = "1,1,1,1,1";
	build_ok(&wl, &spec);
	for (size_t i = 0; i < wl.n; i++) {
		ck_assert_int_ge(wl.req[i].tenant, 0);
		ck_assert_int_le(wl.req[i].tenant, 4);
	}
	workload_release(&wl);
	unlink(path);
}
END_TEST

START_TEST(tenants_errors)
{
	static const char *const bad[] = {
		"x", "", "0", "-3", "4097", "1.5", "10,0", "10,-1", "1,", ",1", "10,abc",
		"1,nan", "1,inf", "1e308,1e308",
	};
	struct workload_spec s = {
		.arrival = "poisson:rate=1", .lengths = "fixed:prompt=1,output=1", .num_requests = 10,
	};
	struct ss_error err = { 0 };
	struct workload wl;
	char want[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s.tenants = bad[i];
		snprintf(want, sizeof(want),
			 "--tenants: expected N (1..4096) or comma-separated positive weights, got '%s'",
			 bad[i]);
		build_bad(&s, -EINVAL, want);
	}
	/* the whole message, as the CLI prints it */
	s.tenants = "x";
	workload_init(&wl);
	ck_assert_int_eq(workload_build(&wl, &s, &err), -EINVAL);
	ck_assert_str_eq(err.msg,
			 "--tenants: expected N (1..4096) or comma-separated positive weights, got 'x'");
	ck_assert_str_eq(err.file, "");
	ck_assert_int_eq(err.line, 0);
	/* a bad spec on a trace leaves the workload empty too */
	s = (struct workload_spec){ .trace = "/nonexistent/t.csv", .tenants = "10,0" };
	build_bad(&s, -EINVAL, "(weight 2 is '0', expected a number > 0)");
	/* 4096 is the most */
	s = (struct workload_spec){ .arrival = "poisson:rate=1", .lengths = "fixed:prompt=1,output=1",
				    .num_requests = 10, .tenants = "4096" };
	build_ok(&wl, &s);
	workload_release(&wl);
}
END_TEST

/* ---- errors ------------------------------------------------------------- */

START_TEST(combination_errors)
{
	struct workload_spec s;

	s = (struct workload_spec){ .trace = "t.csv", .lengths = "fixed:prompt=1,output=1" };
	build_bad(&s, -EINVAL, "--lengths cannot be combined with --trace");
	s = (struct workload_spec){ .arrival = "poisson:rate=1", .num_requests = 5 };
	build_bad(&s, -EINVAL, "expected --lengths");
	s = (struct workload_spec){ .lengths = "fixed:prompt=1,output=1", .num_requests = 5 };
	build_bad(&s, -EINVAL, "--lengths needs --arrival");
	s = (struct workload_spec){ .num_requests = 5 };
	build_bad(&s, -EINVAL, "expected --trace");
	s = (struct workload_spec){ .arrival = "poisson:rate=1", .lengths = "fixed:prompt=1,output=1" };
	build_bad(&s, -EINVAL, "--num-requests");
	s.num_requests = 1;
	s.rate_scale = -1;
	build_bad(&s, -EINVAL, "--rate-scale");
	s.rate_scale = 1;
	s.duration_ns = -5;
	build_bad(&s, -EINVAL, "--duration");
	s = (struct workload_spec){ .trace = "/nonexistent/t.csv" };
	build_bad(&s, -ENOENT, "cannot open");
}
END_TEST

START_TEST(spec_errors)
{
	static const struct {
		const char *arrival, *lengths, *want;
	} cases[] = {
		{ "poisson:rate=0", NULL, "--arrival poisson: expected rate > 0" },
		{ "poisson:rate=-3", NULL, "expected rate > 0" },
		{ "poisson:rate=fast", NULL, "expected a number for 'rate'" },
		{ "poisson", NULL, "missing 'rate'" },
		{ "poisson:rate=1,burst=2", NULL, "unknown parameter 'burst'" },
		{ "gamma:rate=1", NULL, "--arrival gamma: missing 'cv'" },
		{ "gamma:rate=1,cv=0", NULL, "expected cv > 0" },
		{ "weibull:rate=1", NULL, "unknown process 'weibull'" },
		{ NULL, "fixed:prompt=0,output=1", "--lengths fixed: expected prompt >= 1" },
		{ NULL, "fixed:prompt=5", "missing 'output'" },
		{ NULL, "fixed:prompt=5,output=1,extra=2", "unknown parameter 'extra'" },
		{ NULL, "uniform:prompt_min=5,prompt_max=4,output_min=1,output_max=1",
		  "expected prompt_min <= prompt_max" },
		{ NULL, "uniform:prompt_min=1,prompt_max=4,output_min=3,output_max=1",
		  "expected output_min <= output_max" },
		{ NULL, "lognormal:prompt_mean=100,prompt_cv=0,output_mean=10,output_cv=1",
		  "expected prompt_cv > 0" },
		{ NULL, "lognormal:prompt_mean=100,prompt_cv=1,output_mean=10,output_cv=1,prompt_max=0",
		  "expected prompt_max >= 1" },
		{ NULL, "geometric:prompt=10,output_mean=0.5", "expected output_mean >= 1" },
		{ NULL, "empirical", "missing trace file" },
		{ NULL, "zipf:s=1", "unknown distribution 'zipf'" },
		/* absurd parameters (issue 10 section 3): a clear error instead
		 * of wrapped, zero or NaN lengths, or gaps of 0 */
		{ NULL, "geometric:prompt=10,output_mean=3e9",
		  "--lengths geometric: expected output_mean <= 2147483647 tokens, got 3e+09" },
		{ NULL, "geometric:prompt=10,output_mean=1e18", "expected output_mean <= 2147483647" },
		{ NULL, "lognormal:prompt_mean=100,prompt_cv=1e200,output_mean=10,output_cv=1",
		  "--lengths lognormal: expected prompt_cv <= 1000, got 1e+200" },
		{ NULL, "lognormal:prompt_mean=100,prompt_cv=1,output_mean=1e300,output_cv=1",
		  "expected output_mean <= 2147483647 tokens" },
		{ NULL, "fixed:prompt=0x10,output=1", "expected an integer for 'prompt', got '0x10'" },
		{ NULL, "lognormal:prompt_mean=0x1p4,prompt_cv=1,output_mean=10,output_cv=1",
		  "expected a number for 'prompt_mean', got '0x1p4'" },
		{ NULL, "lognormal:prompt_mean=inf,prompt_cv=1,output_mean=10,output_cv=1",
		  "expected a number for 'prompt_mean', got 'inf'" },
		{ "gamma:rate=1,cv=1e-300", NULL, "--arrival gamma: expected cv from 0.001 to 1000, got 1e-300" },
		{ "gamma:rate=1,cv=1e200", NULL, "expected cv from 0.001 to 1000" },
		{ "gamma:rate=1,cv=nan", NULL, "expected a number for 'cv'" },
		{ "poisson:rate=1e300", NULL, "expected rate <= 1e+09 req/s" },
		{ "mmpp:rates=1,2", NULL, "--arrival mmpp: missing 'switch_s'" },
		{ "mmpp:switch_s=1,2", NULL, "--arrival mmpp: missing 'rates'" },
		{ "mmpp:rates=1,2,switch_s=1", NULL, "expected as many rates as switch_s, at least 2, got 2 and 1" },
		{ "mmpp:rates=1,switch_s=1", NULL, "at least 2, got 1 and 1" },
		{ "mmpp:rates=1,-2,switch_s=1,1", NULL, "expected rates from 0 to 1e+09 req/s, got -2" },
		{ "mmpp:rates=1,2,switch_s=1,0", NULL, "expected mean times in a state > 0" },
		{ "mmpp:rates=0,0,switch_s=1,1", NULL, "at least 0.001 arrivals" },
		{ "mmpp:rates=1,x,switch_s=1,1", NULL, "expected a number, got 'x'" },
		{ "mmpp:rates=1,2,switch_s=1,1,burst=3", NULL, "unknown or repeated parameter 'burst'" },
		{ "mmpp:rates=1,2,rates=3,switch_s=1,1", NULL, "unknown or repeated parameter 'rates'" },
		{ "mmpp:1,rates=1,2,switch_s=1,1", NULL, "'1' before any key" },
		{ "mmpp:rates=1,,2,switch_s=1,1", NULL, "malformed parameter ''" },
		{ "mmpp:rates=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,switch_s=1", NULL,
		  "more than 16 states" },
		{ "onoff:rate=5,on_s=1", NULL, "--arrival onoff: missing 'off_s'" },
		{ "onoff:rate=0,on_s=1,off_s=1", NULL, "expected rate > 0" },
		{ "onoff:rate=5,on_s=1,off_s=-1", NULL, "expected off_s > 0" },
		{ "onoff:rate=5,on_s=1,off_s=1,rates=2", NULL, "unknown parameter 'rates'" },
	};
	struct workload_spec s;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		s = (struct workload_spec){
			.arrival = cases[i].arrival ? cases[i].arrival : "poisson:rate=1",
			.lengths = cases[i].lengths ? cases[i].lengths : "fixed:prompt=1,output=1",
			.num_requests = 10,
		};
		build_bad(&s, -EINVAL, cases[i].want);
	}
	s = (struct workload_spec){ .arrival = "poisson:rate=1",
				    .lengths = "empirical:/nonexistent/x.csv", .num_requests = 1 };
	build_bad(&s, -ENOENT, "cannot open");
}
END_TEST

/* A generated workload beyond the request limit is refused before any
 * request is drawn (it used to fail only after 10^8 of them). */
START_TEST(request_limit_refused_up_front)
{
	struct workload_spec s = { .arrival = "poisson:rate=1000",
				   .lengths = "fixed:prompt=1,output=1",
				   .num_requests = 100000001 };

	build_bad(&s, -E2BIG, "more than 100000000 requests");
	s.num_requests = 0;
	s.duration_ns = 1000000000000000LL;     /* 1e6 s x 1000 req/s = 1e9 */
	build_bad(&s, -E2BIG, "more than 100000000 requests (1e+09 expected)");
}
END_TEST

/* A geometric mean near 2^31 tokens: draws above INT32_MAX are clamped,
 * never wrapped to small or zero counts (GSL's unsigned int result wraps
 * above 2^32, which a mean of 2^31 reaches once in e^2 draws). */
START_TEST(geometric_huge_mean_clamps)
{
	struct workload_spec s = { .arrival = "poisson:rate=1",
				   .lengths = "geometric:prompt=1,output_mean=2147483647",
				   .num_requests = 2000, .seed = 3 };
	struct workload wl;
	size_t clamped = 0;

	build_ok(&wl, &s);
	for (size_t i = 0; i < wl.n; i++) {
		ck_assert_int_ge(wl.req[i].output_tokens, 1);
		clamped += wl.req[i].output_tokens == INT32_MAX;
	}
	/* P(draw >= 2^31) = e^-1: about 736 of 2000 */
	ck_assert_uint_gt(clamped, 600);
	ck_assert_uint_lt(clamped, 880);
	workload_release(&wl);
}
END_TEST

/* ---- scale -------------------------------------------------------------- */

/* A million requests are generated whole and in order.  (How fast is
 * bench/bench-core gen's figure: tests never assert wall-clock times.) */
START_TEST(million_requests_generated)
{
	struct workload_spec spec = {
		.arrival = "gamma:rate=100,cv=2",
		.lengths = "lognormal:prompt_mean=1000,prompt_cv=1,output_mean=200,output_cv=1,"
			   "prompt_max=8000,output_max=2000",
		.num_requests = 1000000, .seed = 1,
	};
	struct ss_error err = { 0 };
	struct workload wl;
	int64_t prev = 0;

	workload_init(&wl);
	ck_assert_int_eq(workload_build(&wl, &spec, &err), 0);
	ck_assert_uint_eq(wl.n, 1000000);
	for (size_t i = 0; i < wl.n; i++) {
		const struct wl_request *r = &wl.req[i];

		if (r->arrival_ns < prev || r->prompt_tokens < 1 || r->prompt_tokens > 8000 ||
		    r->output_tokens < 1 || r->output_tokens > 2000)
			ck_abort_msg("request %zu: arrival %lld ns after %lld, prompt %d, output %d", i,
				     (long long)r->arrival_ns, (long long)prev, (int)r->prompt_tokens,
				     (int)r->output_tokens);
		prev = r->arrival_ns;
	}
	/* 10^6 gaps of mean 10 ms: 10,000 s, sd 2/100 x 1000 = 20 s */
	ck_assert_double_eq_tol(prev / 1e9, 10000, 200);
	workload_release(&wl);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("generators");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, poisson_mean_gap);
	tcase_add_test(tc, gamma_cv_and_mean);
	tcase_add_test(tc, mmpp2_idc_limit);
	tcase_add_test(tc, mmpp_and_onoff_mean_rate);
	tcase_add_test(tc, mmpp_and_onoff_dispersion);
	tcase_add_test(tc, onoff_is_mmpp_and_seeded);
	tcase_add_test(tc, rate_curve_counts_match_integral);
	tcase_add_test(tc, rate_curve_errors);
	tcase_add_test(tc, target_rate_rescales_trace);
	tcase_add_test(tc, lognormal_means_and_clamp);
	tcase_add_test(tc, geometric_mean);
	tcase_add_test(tc, uniform_inclusive_bounds);
	tcase_add_test(tc, empirical_samples_pairs_jointly);
	tcase_add_test(tc, same_seed_same_workload);
	tcase_add_test(tc, streams_are_independent);
	tcase_add_test(tc, rate_scale_divides_times);
	tcase_add_test(tc, duration_and_count_limits);
	tcase_add_test(tc, trace_lengths_with_synthetic_arrivals);
	tcase_add_test(tc, tenants_weighted);
	tcase_add_test(tc, tenants_uniform);
	tcase_add_test(tc, tenants_seeded_and_separate_stream);
	tcase_add_test(tc, tenants_override_trace);
	tcase_add_test(tc, tenants_errors);
	tcase_add_test(tc, combination_errors);
	tcase_add_test(tc, spec_errors);
	tcase_add_test(tc, geometric_huge_mean_clamps);
	tcase_add_test(tc, request_limit_refused_up_front);
	tcase_add_test(tc, million_requests_generated);
	suite_add_tcase(s, tc);
	return s;
}
