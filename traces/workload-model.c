/* servesim — fitting a workload model to a trace, and its JSON form
 * (workload-model.h; docs/workloads.md, "Workload models").
 *
 * Statistics come from GSL (quantiles, Spearman correlation, mean and
 * standard deviation); JSON is jansson.
 */
#include "workload-model.h"
#include "workload-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <jansson.h>

/* The probability grid of the length quantiles: every percentile, then
 * three points in the top percent, where the tails that drive latency
 * live (103 points; docs/workloads.md says why). */
static const double tail_p[] = { 0.995, 0.999, 1.0 };
#define GRID_STEP 0.01
#define GRID_N (100 + sizeof(tail_p) / sizeof(tail_p[0]))

/* IDC windows tried, s; those with fewer than WLM_IDC_MIN_WINDOWS whole
 * windows in the trace are left out. */
static const double idc_windows[] = { 1, 3, 10, 30, 60, 120, 300, 600, 1800, 3600 };

void wlmodel_init(struct wlmodel *m)
{
	memset(m, 0, sizeof(*m));
}

void wlmodel_release(struct wlmodel *m)
{
	if (!m)
		return;
	free(m->curve_rps);
	free(m->q_p);
	free(m->q_prompt);
	free(m->q_output);
	free(m->batch_size);
	free(m->batch_prob);
	free(m->turns_v);
	free(m->turns_p);
	free(m->fanout_v);
	free(m->fanout_p);
	free(m->q_think_s);
	free(m->q_new);
	free(m->q_out_later);
	wlmodel_init(m);
}

double wlmodel_idc(const struct workload *wl, double window_s)
{
	double span, mean, var;
	size_t nw, *cnt;

	if (wl->n < 2 || !(window_s > 0))
		return 0;
	span = (double)wl->req[wl->n - 1].arrival_ns * 1e-9;
	if (!(span / window_s >= WLM_IDC_MIN_WINDOWS) || span / window_s > 1e8)
		return 0;
	nw = (size_t)(span / window_s);
	cnt = calloc(nw, sizeof(*cnt));
	if (!cnt)
		return 0;
	for (size_t i = 0; i < wl->n; i++) {
		size_t k = (size_t)((double)wl->req[i].arrival_ns * 1e-9 / window_s);

		if (k < nw)
			cnt[k]++;
	}
	mean = 0;
	for (size_t k = 0; k < nw; k++)
		mean += (double)cnt[k];
	mean /= (double)nw;
	var = 0;
	for (size_t k = 0; k < nw; k++)
		var += ((double)cnt[k] - mean) * ((double)cnt[k] - mean);
	var /= (double)(nw - 1);
	free(cnt);
	return mean > 0 ? var / mean : 0;
}

/* The expected count from 0 to t (s) of the piecewise-linear curve through
 * (ct[i], cr[i]), n points: the integral, trapezoids plus the part of the
 * segment holding t. */
static double curve_integral(const double *ct, const double *cr, size_t n, double t)
{
	double sum = 0;

	for (size_t i = 0; i + 1 < n; i++) {
		double d = ct[i + 1] - ct[i], x, k;

		if (t >= ct[i + 1]) {
			sum += d * (cr[i] + cr[i + 1]) / 2;
			continue;
		}
		x = t - ct[i];
		if (x > 0) {
			k = (cr[i + 1] - cr[i]) / d;
			sum += cr[i] * x + k * x * x / 2;
		}
		break;
	}
	return sum;
}

void wlmodel_curve_rows(const struct wlmodel *m, double *t, double *r)
{
	size_t n = m->n_curve;

	for (size_t h = 0; h < n; h++) {
		double lo = (double)h * m->curve_bin_s;

		t[2 * h] = lo;
		t[2 * h + 1] = h + 1 == n ? m->duration_s : lo + m->curve_bin_s - WLM_CURVE_STEP_S;
		r[2 * h] = r[2 * h + 1] = m->curve_rps[h];
	}
}

/* The hourly rate curve of a long trace: the count of each bin over its
 * length (the last bin is what is left of the span, at least half a bin,
 * else it joins the one before). */
static int fit_curve(struct wlmodel *m, const struct workload *wl)
{
	double span = m->duration_s, bin = WLM_CURVE_BIN_S;
	size_t n = (size_t)(span / bin), *cnt;

	if (span - (double)n * bin >= bin / 2)
		n++;
	if (n < 2)
		n = 2;
	if (n > WLM_CURVE_MAX)
		return 0;   /* a trace longer than a year: no curve (documented) */
	cnt = calloc(n, sizeof(*cnt));
	m->curve_rps = calloc(n, sizeof(*m->curve_rps));
	if (!cnt || !m->curve_rps) {
		free(cnt);
		return -ENOMEM;
	}
	for (size_t i = 0; i < wl->n; i++) {
		size_t k = (size_t)((double)wl->req[i].arrival_ns * 1e-9 / bin);

		cnt[k < n ? k : n - 1]++;
	}
	for (size_t k = 0; k < n; k++) {
		double len = k + 1 == n ? span - (double)k * bin : bin;

		m->curve_rps[k] = (double)cnt[k] / len;
	}
	free(cnt);
	m->n_curve = n;
	m->curve_bin_s = bin;
	return 0;
}

/* The coefficient of variation of the gaps, in the time of the rate curve
 * when there is one (each arrival mapped to the count the curve expects by
 * it, so the slow daily change is not counted as burstiness). */
static int fit_gaps(struct wlmodel *m, const struct workload *wl)
{
	size_t n = wl->n, nc = 2 * m->n_curve;
	double *g = malloc((n - 1) * sizeof(*g)), *ct = NULL, *cr = NULL, prev = 0, mean, sd;

	if (!g)
		return -ENOMEM;
	if (m->n_curve) {
		ct = malloc(nc * sizeof(*ct));
		cr = malloc(nc * sizeof(*cr));
		if (!ct || !cr) {
			free(g);
			free(ct);
			free(cr);
			return -ENOMEM;
		}
		wlmodel_curve_rows(m, ct, cr);
	}
	for (size_t i = 0; i < n; i++) {
		double t = (double)wl->req[i].arrival_ns * 1e-9;
		double x = ct ? curve_integral(ct, cr, nc, t) : t;

		if (i > 0)
			g[i - 1] = x - prev;
		prev = x;
	}
	mean = gsl_stats_mean(g, 1, n - 1);
	sd = n > 2 ? gsl_stats_sd_m(g, 1, n - 1, mean) : 0;
	m->gap_cv = mean > 0 ? sd / mean : 1;
	free(g);
	free(ct);
	free(cr);
	return 0;
}

/* Quantiles of one column on the grid, from sorted data, at least lo
 * (1 for lengths, 0 for times). */
static void quantiles_lo(const double *sorted, size_t n, const double *p, size_t np, double *q,
			 double lo)
{
	for (size_t k = 0; k < np; k++) {
		q[k] = gsl_stats_quantile_from_sorted_data(sorted, 1, n, p[k]);
		if (q[k] < lo)
			q[k] = lo;
		if (k > 0 && q[k] < q[k - 1])   /* rounding: keep it monotone */
			q[k] = q[k - 1];
	}
}

static void quantiles(const double *sorted, size_t n, const double *p, size_t np, double *q)
{
	quantiles_lo(sorted, n, p, np, q, 1);
}

/* Open-addressing set of 32-bit hashes (capacity a power of 2, at most
 * half full), for the prefix-reuse measure: O(1) per block. */
struct hset {
	uint32_t *v;
	bool *used;
	size_t cap, n;
};

static int hset_add(struct hset *s, uint32_t h, bool *seen)
{
	size_t i;

	if (2 * (s->n + 1) > s->cap) {
		struct hset t = { .cap = s->cap ? 2 * s->cap : 4096 };
		bool dummy;

		t.v = malloc(t.cap * sizeof(*t.v));
		t.used = calloc(t.cap, sizeof(*t.used));
		if (!t.v || !t.used) {
			free(t.v);
			free(t.used);
			return -ENOMEM;
		}
		for (size_t k = 0; k < s->cap; k++)
			if (s->used[k])
				hset_add(&t, s->v[k], &dummy);
		free(s->v);
		free(s->used);
		*s = t;
	}
	for (i = (h * 2654435761u) & (s->cap - 1); s->used[i]; i = (i + 1) & (s->cap - 1)) {
		if (s->v[i] == h) {
			*seen = true;
			return 0;
		}
	}
	s->used[i] = true;
	s->v[i] = h;
	s->n++;
	*seen = false;
	return 0;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

static int cmp_u64_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y) - (x > y);
}

/* Negative log-likelihood, per request, of counts c[0] >= ... >= c[k-1]
 * (total n) under Zipf(s) over k ranks: s sum c_i ln i / n + ln H(k, s). */
static double zipf_nll(const uint64_t *c, size_t k, uint64_t n, double s)
{
	double a = 0.0, h = 0.0;

	for (size_t i = 0; i < k; i++) {
		double li = log((double)(i + 1));

		a += (double)c[i] * li;
		h += exp(-s * li);
	}
	return s * a / (double)n + log(h);
}

/* The adapters a trace's requests name (wl->adapter): how many, the share
 * naming none, the most popular's share, and the Zipf exponent of their
 * popularity by rank (maximum likelihood: the negative log-likelihood is
 * convex in s, so a golden-section search over [0, WLM_ZIPF_MAX] finds it).
 * Ranks are the trace's own order of popularity, as a planner reads a
 * rank-frequency plot (a small trace's tail biases s upwards; said in
 * docs/workloads.md).  Nothing when no request names an adapter. */
static int fit_adapters(struct wlmodel *m, const struct workload *wl)
{
	int32_t *ids = malloc(wl->n * sizeof(*ids));
	uint64_t *cnt = NULL, named = 0;
	size_t k = 0;

	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < wl->n; i++)
		if (wl->adapter[i] >= 0)
			ids[named++] = wl->adapter[i];
	if (!named) {
		free(ids);
		return 0;
	}
	qsort(ids, named, sizeof(*ids), cmp_i32);
	cnt = malloc(named * sizeof(*cnt));
	if (!cnt) {
		free(ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < named; i++) {
		if (i == 0 || ids[i] != ids[i - 1])
			cnt[k++] = 0;
		cnt[k - 1]++;
	}
	qsort(cnt, k, sizeof(*cnt), cmp_u64_desc);
	{
		const double g = 0.5 * (sqrt(5.0) - 1.0);
		double lo = 0.0, hi = WLM_ZIPF_MAX;
		double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
		double f1 = zipf_nll(cnt, k, named, x1), f2 = zipf_nll(cnt, k, named, x2);

		for (int it = 0; it < 80 && k > 1; it++) {
			if (f1 <= f2) {
				hi = x2;
				x2 = x1;
				f2 = f1;
				x1 = hi - g * (hi - lo);
				f1 = zipf_nll(cnt, k, named, x1);
			} else {
				lo = x1;
				x1 = x2;
				f1 = f2;
				x2 = lo + g * (hi - lo);
				f2 = zipf_nll(cnt, k, named, x2);
			}
		}
		m->adapter_zipf_s = k > 1 ? 0.5 * (lo + hi) : 0.0;
	}
	m->has_adapters = true;
	m->adapters = (uint32_t)k;
	m->adapter_base_share = (double)(wl->n - named) / (double)wl->n;
	m->adapter_top_share = (double)cnt[0] / (double)named;
	free(cnt);
	free(ids);
	return 0;
}

/* Share of hashed prompt blocks that continue a prefix seen before: for
 * each request, its leading run of block hashes already seen in earlier
 * requests (Mooncake hash_ids name a block by its whole prefix, so a
 * block seen before is a reusable prefix block). */
static int fit_prefix(struct wlmodel *m, const struct workload *wl)
{
	struct hset s = { 0 };
	uint64_t total = 0, reused = 0;
	int rc = 0;

	for (size_t i = 0; i < wl->n && !rc; i++) {
		const struct wl_request *q = &wl->req[i];
		bool lead = true, seen;

		for (uint32_t b = 0; b < q->prefix_n && !rc; b++) {
			rc = hset_add(&s, wl->hashes[q->prefix_off + b], &seen);
			lead = lead && seen;
			reused += lead;
			total++;
		}
	}
	free(s.v);
	free(s.used);
	if (!rc && total) {
		m->has_prefix = true;
		m->prefix_block_tokens = wl->hash_block_tokens;
		m->prefix_reused_share = (double)reused / (double)total;
	}
	return rc;
}

/* A two-state MMPP's index of dispersion at window t (s): 1 + A g(gamma t)
 * with g(x) = 1 - (1 - e^-x) / x, A = 2 pi1 pi2 (l1 - l2)^2 / (mean gamma)
 * and gamma the sum of the two switching rates (the standard result for
 * the MMPP(2) counting process; e.g. Fischer and Meier-Hellstern 1993). */
static double mmpp_g(double x)
{
	return x < 1e-6 ? x / 2 : 1 - (1 - exp(-x)) / x;
}

/* Fit (A, gamma) to the measured IDC curve: over a log grid of gamma
 * (1e-5 .. 10 /s, 241 points), A in closed form (least squares of IDC - 1
 * on g), and the gamma whose curve is nearest on the log scale, each
 * window weighted by its number of windows (as process_error weighs
 * them); then turn them into two states: equal time in each
 * (pi1 = pi2 = 1/2, l1,2 = mean +- sqrt(mean gamma A / 2)) when that keeps
 * l2 >= 0, else an on-off process (l2 = 0, pi1 = 1 / (1 + A gamma / (2
 * mean))).  false when the curve has no excess dispersion to fit. */
static bool fit_mmpp(struct wlmodel *m, const double *win, const double *idc, size_t n_idc)
{
	double best = INFINITY, bg = 0, ba = 0, mean = m->rate_rps, pi1, d;

	if (n_idc < 2)
		return false;
	for (int k = 0; k <= 240; k++) {
		double gam = pow(10, -5 + k / 40.0), sg = 0, sy = 0, a, err = 0;

		for (size_t i = 0; i < n_idc; i++) {
			double g = mmpp_g(gam * win[i]), w = floor(m->duration_s / win[i]);

			sg += w * g * g;
			sy += w * g * (idc[i] - 1);
		}
		a = sg > 0 ? sy / sg : 0;
		if (!(a > 0))
			continue;
		for (size_t i = 0; i < n_idc; i++) {
			double e = log(1 + a * mmpp_g(gam * win[i])) - log(idc[i]);

			err += e * e * floor(m->duration_s / win[i]);
		}
		if (err < best) {
			best = err;
			bg = gam;
			ba = a;
		}
	}
	if (!(ba > 0))
		return false;
	d = sqrt(mean * bg * ba / 2);
	if (d <= mean) {
		pi1 = 0.5;
		m->mmpp_rps[0] = mean + d;
		m->mmpp_rps[1] = mean - d;
	} else {
		pi1 = 1 / (1 + ba * bg / (2 * mean));
		m->mmpp_rps[0] = mean / pi1;
		m->mmpp_rps[1] = 0;
	}
	/* pi1 = r2 / (r1 + r2), gamma = r1 + r2; a state's mean time is 1/r */
	m->mmpp_switch_s[0] = 1 / (bg * (1 - pi1));
	m->mmpp_switch_s[1] = 1 / (bg * pi1);
	return m->mmpp_switch_s[0] <= 1e9 && m->mmpp_switch_s[1] <= 1e9;
}

/* Coefficient of variation of wl's gaps (as they are, in time). */
static double raw_cv(const struct workload *wl)
{
	double s = 0, s2 = 0, n = (double)(wl->n - 1), mean;

	for (size_t i = 1; i < wl->n; i++) {
		double g = (double)(wl->req[i].arrival_ns - wl->req[i - 1].arrival_ns) * 1e-9;

		s += g;
		s2 += g * g;
	}
	mean = s / n;
	return mean > 0 ? sqrt(fmax(s2 / n - mean * mean, 0)) / mean : 0;
}

/* How far m's process, generated (seed 0, the trace's size), is from the
 * trace: the squared log error of the IDC at each measured window, each
 * weighted by about its inverse variance (an IDC estimated from k windows
 * has a log with variance about 2 / k, so weight k / 2), plus that of the
 * gap cv with the weight of the shortest window's IDC (the same short-
 * scale information): a chi-square-like statistic; INFINITY when the
 * process cannot be generated. */
static double process_error(const struct wlmodel *m, const double *win, const double *idc,
			    size_t n_idc, double cv_obs)
{
	struct workload_spec spec = { .num_requests = m->requests };
	struct workload g;
	double err = 0, cv;

	workload_init(&g);
	if (wlmodel_build(&g, m, &spec, NULL) || g.n < 2) {
		workload_release(&g);
		return INFINITY;
	}
	for (size_t i = 0; i < n_idc; i++) {
		double v = wlmodel_idc(&g, win[i]);
		double e = log(v > 1e-9 ? v : 1e-9) - log(idc[i] > 1e-9 ? idc[i] : 1e-9);

		err += e * e * floor(m->duration_s / win[i]) / 2;
	}
	cv = raw_cv(&g);
	err += pow(log(cv > 1e-9 ? cv : 1e-9) - log(cv_obs > 1e-9 ? cv_obs : 1e-9), 2) *
	       (n_idc ? floor(m->duration_s / win[0]) / 2 : 1);
	workload_release(&g);
	return err;
}

/* The process: the candidate whose generated arrivals are nearer the
 * trace's IDC curve and gap cv (docs/workloads.md).  With a rate curve,
 * both are fitted and compared on the trace with the curve taken out
 * (each arrival at the time the curve expects its count by, at the mean
 * rate), the candidates generated without the curve: the curve already
 * gives the slow change, which the process must not count twice. */
static int fit_process(struct wlmodel *m, const struct workload *wl)
{
	struct wlmodel base = *m;
	struct workload flat;
	const struct workload *w = wl;
	double win[WLM_IDC_MAX], idc[WLM_IDC_MAX], cv_obs, eg, em;
	size_t n_idc = 0;

	workload_init(&flat);
	if (m->n_curve) {
		size_t nc = 2 * m->n_curve;
		double *ct = malloc(nc * sizeof(*ct)), *cr = malloc(nc * sizeof(*cr));

		if (!ct || !cr || wl_reserve(&flat, wl->n)) {
			free(ct);
			free(cr);
			workload_release(&flat);
			return -ENOMEM;
		}
		wlmodel_curve_rows(m, ct, cr);
		for (size_t i = 0; i < wl->n; i++) {
			double t = (double)wl->req[i].arrival_ns * 1e-9;

			flat.req[i] = wl->req[i];
			flat.req[i].arrival_ns =
				llround(curve_integral(ct, cr, nc, t) / m->rate_rps * 1e9);
		}
		free(ct);
		free(cr);
		flat.n = wl->n;
		for (size_t i = 1; i < flat.n; i++)    /* rounding: keep it sorted */
			if (flat.req[i].arrival_ns < flat.req[i - 1].arrival_ns)
				flat.req[i].arrival_ns = flat.req[i - 1].arrival_ns;
		flat.has_arrivals = true;
		w = &flat;
		base.n_curve = 0;
		base.curve_rps = NULL;
	}
	for (size_t k = 0; k < sizeof(idc_windows) / sizeof(idc_windows[0]); k++) {
		double v = wlmodel_idc(w, idc_windows[k]);

		if (v > 0 && n_idc < WLM_IDC_MAX) {
			win[n_idc] = idc_windows[k];
			idc[n_idc++] = v;
		}
	}
	if (fit_mmpp(&base, win, idc, n_idc)) {
		cv_obs = raw_cv(w);
		base.process = WLM_GAMMA;
		eg = process_error(&base, win, idc, n_idc, cv_obs);
		base.process = WLM_MMPP;
		em = process_error(&base, win, idc, n_idc, cv_obs);
		m->fit_error[0] = eg;
		m->fit_error[1] = em;
		/* the MMPP has two parameters more than the gamma: it must
		 * better the statistic by more than 4, Akaike's penalty */
		if (em + 4 < eg) {
			m->process = WLM_MMPP;
			memcpy(m->mmpp_rps, base.mmpp_rps, sizeof(m->mmpp_rps));
			memcpy(m->mmpp_switch_s, base.mmpp_switch_s, sizeof(m->mmpp_switch_s));
		}
	}
	workload_release(&flat);
	return 0;
}

/* The gaps' cv and the process, fitted to the requests, or, when the
 * trace comes in batches, to the batches' times (the first request of
 * each), at the batches' rate, with the curve in batches too. */
static int fit_arrivals(struct wlmodel *m, const struct workload *wl)
{
	struct wlmodel e = *m;
	struct workload ep;
	int rc = 0;

	m->process = WLM_GAMMA;
	if (!m->n_batch) {
		rc = fit_gaps(m, wl);
		m->gap_cv = fmin(fmax(m->gap_cv, 1e-3), 1e3);   /* --arrival gamma's range */
		return rc ? rc : fit_process(m, wl);
	}
	workload_init(&ep);
	e.n_batch = 0;
	e.batch_size = e.batch_prob = NULL;
	e.batch_mean = 1;
	e.rate_rps = m->rate_rps / m->batch_mean;
	e.curve_rps = NULL;
	if (m->n_curve) {
		e.curve_rps = malloc(m->n_curve * sizeof(*e.curve_rps));
		if (!e.curve_rps)
			return -ENOMEM;
		for (size_t k = 0; k < m->n_curve; k++)
			e.curve_rps[k] = m->curve_rps[k] / m->batch_mean;
	}
	for (size_t i = 0; i < wl->n && !rc; i++) {
		struct wl_request *q;

		if (i > 0 && wl->req[i].arrival_ns == wl->req[i - 1].arrival_ns)
			continue;
		q = wl_append(&ep);
		if (!q)
			rc = -ENOMEM;
		else
			*q = wl->req[i];
	}
	ep.has_arrivals = true;
	e.requests = ep.n;
	if (!rc && ep.n >= 2) {
		rc = fit_gaps(&e, &ep);
		e.gap_cv = fmin(fmax(e.gap_cv, 1e-3), 1e3);
		if (!rc)
			rc = fit_process(&e, &ep);
	}
	m->gap_cv = e.gap_cv;
	m->process = e.process;
	memcpy(m->mmpp_rps, e.mmpp_rps, sizeof(m->mmpp_rps));
	memcpy(m->mmpp_switch_s, e.mmpp_switch_s, sizeof(m->mmpp_switch_s));
	memcpy(m->fit_error, e.fit_error, sizeof(m->fit_error));
	free(e.curve_rps);
	workload_release(&ep);
	return rc;
}

/* The batch sizes: runs of requests with one arrival time (wl is sorted).
 * None unless at least WLM_BATCH_MIN_SHARE of the requests share their
 * time with an earlier one (a trace of distinct times is not batched by a
 * few coincidences). */
static int fit_batches(struct wlmodel *m, const struct workload *wl)
{
	size_t n = wl->n, groups = 1, run = 1, maxs = 1, *cnt, k;

	m->batch_mean = 1;
	for (size_t i = 1; i < n; i++) {
		if (wl->req[i].arrival_ns == wl->req[i - 1].arrival_ns) {
			if (++run > maxs)
				maxs = run;
		} else {
			groups++;
			run = 1;
		}
	}
	if ((double)(n - groups) < WLM_BATCH_MIN_SHARE * (double)n || groups < 2)
		return 0;
	cnt = calloc(maxs + 1, sizeof(*cnt));
	if (!cnt)
		return -ENOMEM;
	run = 1;
	for (size_t i = 1; i <= n; i++) {
		if (i < n && wl->req[i].arrival_ns == wl->req[i - 1].arrival_ns) {
			run++;
			continue;
		}
		cnt[run]++;
		run = 1;
	}
	for (k = 1; k <= maxs; k++)
		m->n_batch += cnt[k] > 0;
	if (m->n_batch > WLM_BATCH_SIZES_MAX) {   /* not a batch structure worth keeping */
		m->n_batch = 0;
		free(cnt);
		return 0;
	}
	m->batch_size = malloc(m->n_batch * sizeof(double));
	m->batch_prob = malloc(m->n_batch * sizeof(double));
	if (!m->batch_size || !m->batch_prob) {
		free(cnt);
		return -ENOMEM;
	}
	m->n_batch = 0;
	for (k = 1; k <= maxs; k++) {
		if (!cnt[k])
			continue;
		m->batch_size[m->n_batch] = (double)k;
		m->batch_prob[m->n_batch++] = (double)cnt[k] / (double)groups;
	}
	m->batch_mean = (double)n / (double)groups;
	free(cnt);
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

static int fit_requests(struct wlmodel *m, const struct workload *wl, struct ss_error *err)
{
	size_t n = wl->n;
	double *a = NULL, *b = NULL, *work = NULL;
	int rc = 0;

	wlmodel_release(m);
	if (!wl->has_arrivals)
		return ss_error_set(err, -EINVAL, wl->source, 0,
				    "the trace has no arrival times (expected a trace with a time column "
				    "to fit arrivals to)");
	if (n < 2 || wl->req[n - 1].arrival_ns <= wl->req[0].arrival_ns)
		return ss_error_set(err, -EINVAL, wl->source, 0,
				    "expected at least 2 requests over a time span to fit a model, got %zu "
				    "request%s%s", n, n == 1 ? "" : "s", n >= 2 ? " at one instant" : "");
	snprintf(m->source, sizeof(m->source), "%s", base_name(wl->source));
	snprintf(m->format, sizeof(m->format), "%s", trace_format_name(wl->format));
	m->requests = n;
	m->duration_s = (double)(wl->req[n - 1].arrival_ns - wl->req[0].arrival_ns) * 1e-9;
	m->rate_rps = (double)(n - 1) / m->duration_s;
	for (size_t k = 0; k < sizeof(idc_windows) / sizeof(idc_windows[0]); k++) {
		double v = wlmodel_idc(wl, idc_windows[k]);

		if (v > 0 && m->n_idc < WLM_IDC_MAX) {
			m->idc_window_s[m->n_idc] = idc_windows[k];
			m->idc[m->n_idc++] = v;
		}
	}
	if (m->duration_s >= WLM_CURVE_MIN_S) {
		rc = fit_curve(m, wl);
		if (rc)
			goto out;
	}
	rc = fit_batches(m, wl);
	if (rc)
		goto out;

	m->n_q = GRID_N;
	m->q_p = malloc(GRID_N * sizeof(double));
	m->q_prompt = malloc(GRID_N * sizeof(double));
	m->q_output = malloc(GRID_N * sizeof(double));
	a = malloc(n * sizeof(*a));
	b = malloc(n * sizeof(*b));
	work = malloc(2 * n * sizeof(*work));
	if (!m->q_p || !m->q_prompt || !m->q_output || !a || !b || !work) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < 100; k++)
		m->q_p[k] = (double)k * GRID_STEP;
	for (size_t k = 0; k < GRID_N - 100; k++)
		m->q_p[100 + k] = tail_p[k];
	for (size_t i = 0; i < n; i++) {
		a[i] = wl->req[i].prompt_tokens;
		b[i] = wl->req[i].output_tokens;
	}
	/* Spearman's rho on average ranks (ties are common: output lengths
	 * cut at a cap); 0 when a column is constant */
	m->spearman = gsl_stats_spearman(a, 1, b, 1, n, work);
	if (!isfinite(m->spearman))
		m->spearman = 0;
	gsl_sort(a, 1, n);
	gsl_sort(b, 1, n);
	quantiles(a, n, m->q_p, GRID_N, m->q_prompt);
	quantiles(b, n, m->q_p, GRID_N, m->q_output);
	if (wl->n_hashes)
		rc = fit_prefix(m, wl);
	if (!rc && wl->adapter)
		rc = fit_adapters(m, wl);
	if (!rc)
		rc = fit_arrivals(m, wl);
out:
	free(a);
	free(b);
	free(work);
	if (rc) {
		wlmodel_release(m);
		ss_error_set(err, rc, wl->source, 0, "out of memory fitting a workload model");
	}
	return rc;
}

/* The distinct values of v (n, sorted here) and their shares, malloc'ed. */
static int pmf_of(double *v, size_t n, double **val, double **prob, size_t *n_val)
{
	size_t k = 0;

	gsl_sort(v, 1, n);
	*n_val = 0;
	for (size_t i = 0; i < n; i++)
		*n_val += i == 0 || v[i] != v[i - 1];
	*val = malloc(*n_val * sizeof(double));
	*prob = malloc(*n_val * sizeof(double));
	if (!*val || !*prob)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || v[i] != v[i - 1]) {
			(*val)[k] = v[i];
			(*prob)[k++] = 0;
		}
		(*prob)[k - 1] += 1;
	}
	for (k = 0; k < *n_val; k++)
		(*prob)[k] /= (double)n;
	return 0;
}

/* The session structure of wl (wl->sess) beyond its starts and first
 * calls: turns, fan-out and think time of later steps, and the new and
 * output tokens of later calls.  A trace without a later call leaves
 * has_sessions false (its sessions are single requests). */
static int fit_sessions(struct wlmodel *m, const struct workload *wl)
{
	size_t n = wl->n, n_s = 0, n_steps = 0, n_later = 0, pf = 0;
	double *turns = calloc(n, sizeof(double));
	double *fan = malloc(n * sizeof(double)), *think = malloc(n * sizeof(double));
	double *nw = malloc(n * sizeof(double)), *out = malloc(n * sizeof(double));
	double *work = malloc(2 * n * sizeof(double));
	int64_t ctx = 0;
	int rc = -ENOMEM;

	if (!turns || !fan || !think || !nw || !out || !work)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct wl_call *c = &wl->sess[i];

		if (c->step == 0 && i == c->step_first) {
			n_s++;
		} else if (i == c->step_first) {
			/* ctx_s = the previous step's first prompt + all its outputs */
			ctx = wl->req[pf].prompt_tokens;
			for (size_t j = pf; j < pf + wl->sess[pf].step_n; j++)
				ctx += wl->req[j].output_tokens;
			fan[n_steps] = c->step_n;
			think[n_steps++] = (double)c->think_ns * 1e-9;
		}
		if (i == c->step_first)
			pf = i;
		turns[n_s - 1] = c->step + 1;
		if (c->step > 0) {
			int64_t d = wl->req[i].prompt_tokens - ctx;

			nw[n_later] = d < 1 ? 1 : (double)d;
			out[n_later++] = wl->req[i].output_tokens;
		}
	}
	rc = 0;
	if (!n_later || n_s < 2)
		goto out;
	m->has_sessions = true;
	m->calls = n;
	m->turns_mean = gsl_stats_mean(turns, 1, n_s);
	m->spearman_later = gsl_stats_spearman(nw, 1, out, 1, n_later, work);
	if (!isfinite(m->spearman_later))
		m->spearman_later = 0;
	m->q_think_s = malloc(m->n_q * sizeof(double));
	m->q_new = malloc(m->n_q * sizeof(double));
	m->q_out_later = malloc(m->n_q * sizeof(double));
	if (!m->q_think_s || !m->q_new || !m->q_out_later ||
	    pmf_of(turns, n_s, &m->turns_v, &m->turns_p, &m->n_turns) ||
	    pmf_of(fan, n_steps, &m->fanout_v, &m->fanout_p, &m->n_fanout)) {
		rc = -ENOMEM;
		goto out;
	}
	gsl_sort(think, 1, n_steps);
	gsl_sort(nw, 1, n_later);
	gsl_sort(out, 1, n_later);
	quantiles_lo(think, n_steps, m->q_p, m->n_q, m->q_think_s, 0);
	quantiles(nw, n_later, m->q_p, m->n_q, m->q_new);
	quantiles(out, n_later, m->q_p, m->n_q, m->q_out_later);
out:
	free(turns);
	free(fan);
	free(think);
	free(nw);
	free(out);
	free(work);
	return rc;
}

int wlmodel_fit(struct wlmodel *m, const struct workload *wl, struct ss_error *err)
{
	struct workload first;
	int rc;

	if (!wl->sess)
		return fit_requests(m, wl, err);
	/* a session trace: the arrival process and lengths of the sessions'
	 * first calls (one request a session, at its start), then the rest */
	workload_init(&first);
	for (size_t i = 0; i < wl->n; i++) {
		struct wl_request *q;

		if (wl->sess[i].step != 0 || i != wl->sess[i].step_first)
			continue;
		q = wl_append(&first);
		if (!q) {
			workload_release(&first);
			return ss_error_set(err, -ENOMEM, wl->source, 0,
					    "out of memory fitting a workload model");
		}
		*q = wl->req[i];
		q->prefix_off = q->prefix_n = 0;
	}
	if (first.n < 2 || first.req[first.n - 1].arrival_ns <= first.req[0].arrival_ns) {
		size_t ns = first.n;

		workload_release(&first);
		return ss_error_set(err, -EINVAL, wl->source, 0,
				    "expected at least 2 sessions starting over a time span to fit a "
				    "model, got %zu session%s%s", ns, ns == 1 ? "" : "s",
				    ns >= 2 ? " starting at one instant" : "");
	}
	first.has_arrivals = wl->has_arrivals;
	first.format = wl->format;
	snprintf(first.source, sizeof(first.source), "%s", wl->source);
	rc = fit_requests(m, &first, err);
	workload_release(&first);
	if (!rc && (rc = fit_sessions(m, wl))) {
		wlmodel_release(m);
		ss_error_set(err, rc, wl->source, 0, "out of memory fitting a workload model");
	}
	return rc;
}

/* ---- JSON ----------------------------------------------------------------- */

static json_t *num_array(const double *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_real(v[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

char *wlmodel_to_json(const struct wlmodel *m)
{
	json_t *root, *idc, *w;
	char *s;

	idc = json_array();
	for (size_t k = 0; idc && k < m->n_idc; k++)
		json_array_append_new(idc, json_pack("{s:f,s:f}", "window_s", m->idc_window_s[k],
						     "idc", m->idc[k]));
	root = json_pack("{s:i,s:{s:s,s:s,s:I,s:f},s:{s:f,s:f,s:o,s:s}}",
			 "servesim_workload_model", WLM_VERSION,
			 "source", "file", m->source, "format", m->format,
			 "requests", (json_int_t)m->requests, "duration_s", m->duration_s,
			 "arrivals", "rate_rps", m->rate_rps, "gap_cv", m->gap_cv,
			 "idc", idc ? idc : json_null(), "process",
			 m->process == WLM_MMPP ? "mmpp" : "gamma");
	if (!root)
		return NULL;
	json_object_set_new(json_object_get(root, "source"), "fit",
			    json_pack("{s:f,s:f,s:f,s:i,s:o,s:o}", "curve_min_s", WLM_CURVE_MIN_S,
				      "curve_bin_s", WLM_CURVE_BIN_S, "batch_min_share",
				      WLM_BATCH_MIN_SHARE, "idc_min_windows", WLM_IDC_MIN_WINDOWS,
				      "misfit_gamma", m->fit_error[0] > 0 ?
				      json_real(m->fit_error[0]) : json_null(),
				      "misfit_mmpp", m->fit_error[1] > 0 ?
				      json_real(m->fit_error[1]) : json_null()));
	w = json_object_get(root, "arrivals");
	if (m->n_batch)
		json_object_set_new(w, "batch",
				    json_pack("{s:o,s:o}", "sizes", num_array(m->batch_size, m->n_batch),
					      "probabilities", num_array(m->batch_prob, m->n_batch)));
	else
		json_object_set_new(w, "batch", json_null());
	if (m->process == WLM_MMPP)
		json_object_set_new(w, "mmpp",
				    json_pack("{s:o,s:o}", "rates_rps", num_array(m->mmpp_rps, 2),
					      "switch_s", num_array(m->mmpp_switch_s, 2)));
	else
		json_object_set_new(w, "mmpp", json_null());
	if (m->n_curve)
		json_object_set_new(w, "rate_curve",
				    json_pack("{s:f,s:o}", "bin_s", m->curve_bin_s, "rates_rps",
					      num_array(m->curve_rps, m->n_curve)));
	else
		json_object_set_new(w, "rate_curve", json_null());
	json_object_set_new(root, "lengths",
			    json_pack("{s:o,s:o,s:o,s:f,s:s}",
				      "p", num_array(m->q_p, m->n_q),
				      "prompt_tokens", num_array(m->q_prompt, m->n_q),
				      "output_tokens", num_array(m->q_output, m->n_q),
				      "spearman_rho", m->spearman, "copula", "gaussian"));
	if (m->has_prefix)
		json_object_set_new(root, "prefix",
				    json_pack("{s:I,s:f}", "block_tokens",
					      (json_int_t)m->prefix_block_tokens,
					      "reused_share", m->prefix_reused_share));
	else
		json_object_set_new(root, "prefix", json_null());
	/* adapters: only for a trace that names some (a model without keeps
	 * the form it had) */
	if (m->has_adapters)
		json_object_set_new(root, "adapters",
				    json_pack("{s:I,s:f,s:f,s:f}", "count", (json_int_t)m->adapters,
					      "base_share", m->adapter_base_share,
					      "top_share", m->adapter_top_share,
					      "zipf_s", m->adapter_zipf_s));
	/* session structure: null for a trace without sessions */
	if (m->has_sessions)
		json_object_set_new(
			root, "sessions",
			json_pack("{s:I,s:I,s:{s:f,s:f,s:o,s:o},s:{s:o,s:o},s:o,s:o,s:o,s:f}",
				  "sessions", (json_int_t)m->requests, "calls",
				  (json_int_t)m->calls, "turns", "mean", m->turns_mean, "max",
				  m->turns_v[m->n_turns - 1], "values",
				  num_array(m->turns_v, m->n_turns), "probabilities",
				  num_array(m->turns_p, m->n_turns), "fanout", "values",
				  num_array(m->fanout_v, m->n_fanout), "probabilities",
				  num_array(m->fanout_p, m->n_fanout), "think_s",
				  num_array(m->q_think_s, m->n_q), "new_tokens",
				  num_array(m->q_new, m->n_q), "output_tokens",
				  num_array(m->q_out_later, m->n_q), "spearman_rho",
				  m->spearman_later));
	else
		json_object_set_new(root, "sessions", json_null());
	s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
	json_decref(root);
	return s;
}

/* ---- reading, with every field checked ------------------------------------ */

struct rd {
	const char *path;
	struct ss_error *err;
};

static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: case JSON_REAL: return "a number";
	case JSON_TRUE: case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

static int bad(const struct rd *r, const char *field, const char *expected, const json_t *got)
{
	return ss_error_set(r->err, -EINVAL, r->path, 0, "%s: expected %s, got %s", field, expected,
			    got ? json_kind(got) : "nothing (the field is missing)");
}

/* Refuse a key of obj not in keys (NULL-terminated): a misspelt field
 * would otherwise be silently ignored. */
static int only_keys(const struct rd *r, json_t *obj, const char *where,
		     const char *const *keys)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v) {
		size_t i;

		for (i = 0; keys[i] && strcmp(keys[i], k); i++)
			;
		if (!keys[i])
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "%s%s%s: unknown field (not in servesim_workload_model %d)",
					    where, *where ? "." : "", k, WLM_VERSION);
	}
	return 0;
}

static int get_obj(const struct rd *r, json_t *parent, const char *key, const char *field,
		   bool nullable, json_t **out)
{
	json_t *v = json_object_get(parent, key);

	*out = NULL;
	if (nullable && v && json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return bad(r, field, nullable ? "an object or null" : "an object", v);
	*out = v;
	return 0;
}

/* A number in [lo, hi] (open at lo when open_lo). */
static int get_num(const struct rd *r, json_t *parent, const char *key, const char *field,
		   double lo, double hi, bool open_lo, double *out)
{
	json_t *v = json_object_get(parent, key);
	char exp[96];

	snprintf(exp, sizeof(exp), "a number %s %g%s%g", open_lo ? ">" : ">=", lo,
		 " and <= ", hi);
	if (!json_is_number(v))
		return bad(r, field, exp, v);
	*out = json_number_value(v);
	if (!(open_lo ? *out > lo : *out >= lo) || !(*out <= hi))
		return ss_error_set(r->err, -EINVAL, r->path, 0, "%s: expected %s, got %g", field,
				    exp, *out);
	return 0;
}

/* An array of n (0: any number from lo_n to hi_n) numbers, each in
 * [lo, hi], non-decreasing when mono; malloc'ed into *out. */
static int get_array(const struct rd *r, json_t *parent, const char *key, const char *field,
		     size_t lo_n, size_t hi_n, double lo, double hi, bool mono,
		     double **out, size_t *n, const char *per)
{
	json_t *a = json_object_get(parent, key), *v;
	size_t i;

	if (!json_is_array(a))
		return bad(r, field, "an array of numbers", a);
	if (json_array_size(a) < lo_n || json_array_size(a) > hi_n)
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "%s: expected %zu to %zu numbers, got %zu", field, lo_n, hi_n,
				    json_array_size(a));
	if (*n && json_array_size(a) != *n)
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "%s: expected %zu numbers (one per %s), got %zu", field, *n, per,
				    json_array_size(a));
	*n = json_array_size(a);
	*out = malloc(*n * sizeof(**out));
	if (!*out)
		return ss_error_set(r->err, -ENOMEM, r->path, 0, "out of memory");
	json_array_foreach(a, i, v) {
		double x;

		if (!json_is_number(v))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "%s[%zu]: expected a number, got %s", field, i, json_kind(v));
		x = json_number_value(v);
		if (!(x >= lo && x <= hi))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "%s[%zu]: expected a number from %g to %g, got %g", field, i,
					    lo, hi, x);
		if (mono && i > 0 && x < (*out)[i - 1])
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "%s[%zu]: expected values non-decreasing, got %g after %g",
					    field, i, x, (*out)[i - 1]);
		(*out)[i] = x;
	}
	return 0;
}

static int get_str(const struct rd *r, json_t *parent, const char *key, const char *field,
		   char *out, size_t len)
{
	json_t *v = json_object_get(parent, key);

	if (!json_is_string(v))
		return bad(r, field, "a string", v);
	if (strlen(json_string_value(v)) >= len)
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "%s: expected a string of at most %zu bytes", field, len - 1);
	snprintf(out, len, "%s", json_string_value(v));
	return 0;
}

static int read_source(const struct rd *r, json_t *root, struct wlmodel *m)
{
	static const char *const keys[] = { "file", "format", "requests", "duration_s", "fit", NULL };
	static const char *const fkeys[] = { "curve_min_s", "curve_bin_s", "batch_min_share",
					     "idc_min_windows", "misfit_gamma", "misfit_mmpp", NULL };
	json_t *o, *v;
	int rc;

	if ((rc = get_obj(r, root, "source", "source", false, &o)) ||
	    (rc = only_keys(r, o, "source", keys)) ||
	    (rc = get_str(r, o, "file", "source.file", m->source, sizeof(m->source))) ||
	    (rc = get_str(r, o, "format", "source.format", m->format, sizeof(m->format))))
		return rc;
	v = json_object_get(o, "requests");
	if (!json_is_integer(v) || json_integer_value(v) < 2 ||
	    json_integer_value(v) > (json_int_t)WL_MAX_REQUESTS)
		return v && json_is_integer(v) ?
			ss_error_set(r->err, -EINVAL, r->path, 0,
				     "source.requests: expected an integer from 2 to %u, got %lld",
				     WL_MAX_REQUESTS, (long long)json_integer_value(v)) :
			bad(r, "source.requests", "an integer >= 2", v);
	m->requests = (uint64_t)json_integer_value(v);
	if ((rc = get_num(r, o, "duration_s", "source.duration_s", 0, 1e10, true, &m->duration_s)))
		return rc;
	/* how it was fitted (informative: generation reads none of it) */
	if ((rc = get_obj(r, o, "fit", "source.fit", false, &v)) ||
	    (rc = only_keys(r, v, "source.fit", fkeys)))
		return rc;
	for (size_t i = 0; fkeys[i]; i++) {
		json_t *x = json_object_get(v, fkeys[i]);
		char f[64];

		snprintf(f, sizeof(f), "source.fit.%s", fkeys[i]);
		if (!json_is_number(x) && !(json_is_null(x) && !strncmp(fkeys[i], "misfit", 6)))
			return bad(r, f, !strncmp(fkeys[i], "misfit", 6) ? "a number or null" :
				   "a number", x);
		if (json_is_number(x) && !strcmp(fkeys[i], "misfit_gamma"))
			m->fit_error[0] = json_number_value(x);
		if (json_is_number(x) && !strcmp(fkeys[i], "misfit_mmpp"))
			m->fit_error[1] = json_number_value(x);
	}
	return 0;
}

/* arrivals.batch: null, or sizes (increasing integers >= 1) and their
 * probabilities (> 0, summing to 1 within 1e-6). */
static int read_batch(const struct rd *r, json_t *o, struct wlmodel *m)
{
	static const char *const keys[] = { "sizes", "probabilities", NULL };
	json_t *b;
	size_t n = 0;
	double sum = 0, mean = 0;
	int rc;

	m->batch_mean = 1;
	if ((rc = get_obj(r, o, "batch", "arrivals.batch", true, &b)) || !b)
		return rc;
	if ((rc = only_keys(r, b, "arrivals.batch", keys)) ||
	    (rc = get_array(r, b, "sizes", "arrivals.batch.sizes", 1, WLM_BATCH_SIZES_MAX, 1,
			    WL_MAX_REQUESTS, true, &m->batch_size, &n, NULL)))
		return rc;
	m->n_batch = n;
	if ((rc = get_array(r, b, "probabilities", "arrivals.batch.probabilities", 1,
			    WLM_BATCH_SIZES_MAX, 0, 1, false, &m->batch_prob, &n,
			    "arrivals.batch.sizes")))
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (m->batch_size[i] != floor(m->batch_size[i]) ||
		    (i > 0 && !(m->batch_size[i] > m->batch_size[i - 1])))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "arrivals.batch.sizes[%zu]: expected increasing whole numbers, "
					    "got %g", i, m->batch_size[i]);
		if (!(m->batch_prob[i] > 0))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "arrivals.batch.probabilities[%zu]: expected a number > 0, "
					    "got %g", i, m->batch_prob[i]);
		sum += m->batch_prob[i];
		mean += m->batch_prob[i] * m->batch_size[i];
	}
	if (!(fabs(sum - 1) <= 1e-6))
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "arrivals.batch.probabilities: expected a sum of 1, got %.9g", sum);
	m->batch_mean = mean / sum;
	return 0;
}

static int read_arrivals(const struct rd *r, json_t *root, struct wlmodel *m)
{
	static const char *const keys[] = { "rate_rps", "gap_cv", "idc", "process", "batch", "mmpp",
					    "rate_curve", NULL };
	static const char *const mkeys[] = { "rates_rps", "switch_s", NULL };
	static const char *const ikeys[] = { "window_s", "idc", NULL };
	static const char *const ckeys[] = { "bin_s", "rates_rps", NULL };
	json_t *o, *a, *c, *v;
	char proc[16], f[64];
	size_t i, n = 0;
	double *rates = NULL;
	int rc;

	if ((rc = get_obj(r, root, "arrivals", "arrivals", false, &o)) ||
	    (rc = only_keys(r, o, "arrivals", keys)) ||
	    (rc = get_num(r, o, "rate_rps", "arrivals.rate_rps", 0, 1e9, true, &m->rate_rps)) ||
	    /* the --arrival gamma generator's cv range */
	    (rc = get_num(r, o, "gap_cv", "arrivals.gap_cv", 1e-3, 1e3, false, &m->gap_cv)) ||
	    (rc = get_str(r, o, "process", "arrivals.process", proc, sizeof(proc))) ||
	    (rc = read_batch(r, o, m)))
		return rc;
	if (!strcmp(proc, "gamma")) {
		m->process = WLM_GAMMA;
	} else if (!strcmp(proc, "mmpp")) {
		double *v2 = NULL, mean;
		size_t n2 = 0;

		m->process = WLM_MMPP;
		if ((rc = get_obj(r, o, "mmpp", "arrivals.mmpp", false, &c)) ||
		    (rc = only_keys(r, c, "arrivals.mmpp", mkeys)))
			return rc;
		rc = get_array(r, c, "rates_rps", "arrivals.mmpp.rates_rps", 2, 2, 0, 1e9, false,
			       &v2, &n2, NULL);
		if (!rc)
			memcpy(m->mmpp_rps, v2, sizeof(m->mmpp_rps));
		free(v2);
		v2 = NULL;
		n2 = 0;
		if (!rc)
			rc = get_array(r, c, "switch_s", "arrivals.mmpp.switch_s", 2, 2, 1e-9, 1e9,
				       false, &v2, &n2, NULL);
		if (!rc)
			memcpy(m->mmpp_switch_s, v2, sizeof(m->mmpp_switch_s));
		free(v2);
		if (rc)
			return rc;
		mean = (m->mmpp_rps[0] * m->mmpp_switch_s[0] + m->mmpp_rps[1] * m->mmpp_switch_s[1]) /
		       (m->mmpp_switch_s[0] + m->mmpp_switch_s[1]);
		if (!(fabs(mean - m->rate_rps / m->batch_mean) <= 1e-6 * m->rate_rps))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "arrivals.mmpp: expected a stationary mean rate equal to "
					    "arrivals.rate_rps%s (%g), got %g",
					    m->n_batch ? " / the mean batch size" : "",
					    m->rate_rps / m->batch_mean, mean);
	} else {
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "arrivals.process: expected \"gamma\" (a gamma renewal process of "
				    "rate_rps and gap_cv) or \"mmpp\" (arrivals.mmpp), got \"%s\"", proc);
	}
	a = json_object_get(o, "idc");
	if (!json_is_array(a) || json_array_size(a) > WLM_IDC_MAX)
		return json_is_array(a) ?
			ss_error_set(r->err, -EINVAL, r->path, 0,
				     "arrivals.idc: expected at most %d windows, got %zu", WLM_IDC_MAX,
				     json_array_size(a)) :
			bad(r, "arrivals.idc", "an array of {window_s, idc}", a);
	json_array_foreach(a, i, v) {
		snprintf(f, sizeof(f), "arrivals.idc[%zu]", i);
		if (!json_is_object(v))
			return bad(r, f, "an object {window_s, idc}", v);
		if ((rc = only_keys(r, v, f, ikeys)))
			return rc;
		snprintf(f, sizeof(f), "arrivals.idc[%zu].window_s", i);
		if ((rc = get_num(r, v, "window_s", f, 0, 1e10, true, &m->idc_window_s[i])))
			return rc;
		snprintf(f, sizeof(f), "arrivals.idc[%zu].idc", i);
		if ((rc = get_num(r, v, "idc", f, 0, 1e12, false, &m->idc[i])))
			return rc;
	}
	m->n_idc = json_array_size(a);
	if ((rc = get_obj(r, o, "rate_curve", "arrivals.rate_curve", true, &c)) || !c)
		return rc;
	if ((rc = only_keys(r, c, "arrivals.rate_curve", ckeys)) ||
	    (rc = get_num(r, c, "bin_s", "arrivals.rate_curve.bin_s", 0, 1e9, true,
			  &m->curve_bin_s)) ||
	    (rc = get_array(r, c, "rates_rps", "arrivals.rate_curve.rates_rps", 2, WLM_CURVE_MAX,
			    0, 1e9, false, &rates, &n, NULL))) {
		free(rates);
		return rc;
	}
	m->curve_rps = rates;
	m->n_curve = n;
	/* the bins must cover the span, the last one partly */
	if (!((double)(n - 1) * m->curve_bin_s < m->duration_s &&
	      m->duration_s <= (double)n * m->curve_bin_s * 1.5 + 1e-9))
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "arrivals.rate_curve: expected bins covering source.duration_s "
				    "(%g s), got %zu bins of %g s", m->duration_s, n, m->curve_bin_s);
	{
		double sum = 0;

		for (i = 0; i < n; i++)
			sum += m->curve_rps[i];
		if (!(sum > 0))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "arrivals.rate_curve.rates_rps: expected a rate > 0 in some bin");
	}
	return 0;
}

static int read_lengths(const struct rd *r, json_t *root, struct wlmodel *m)
{
	static const char *const keys[] = { "p", "prompt_tokens", "output_tokens", "spearman_rho",
					    "copula", NULL };
	char cop[16];
	json_t *o;
	size_t n = 0;
	int rc;

	if ((rc = get_obj(r, root, "lengths", "lengths", false, &o)) ||
	    (rc = only_keys(r, o, "lengths", keys)) ||
	    (rc = get_array(r, o, "p", "lengths.p", 2, WLM_QUANTILES_MAX, 0, 1, true, &m->q_p, &n,
			    NULL)))
		return rc;
	m->n_q = n;
	if (m->q_p[0] != 0 || m->q_p[n - 1] != 1)
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "lengths.p: expected probabilities from 0 to 1, got %g to %g",
				    m->q_p[0], m->q_p[n - 1]);
	for (size_t i = 1; i < n; i++)
		if (!(m->q_p[i] > m->q_p[i - 1]))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "lengths.p[%zu]: expected probabilities increasing, got %g "
					    "after %g", i, m->q_p[i], m->q_p[i - 1]);
	if ((rc = get_array(r, o, "prompt_tokens", "lengths.prompt_tokens", 2, WLM_QUANTILES_MAX,
			    1, INT32_MAX, true, &m->q_prompt, &n, "lengths.p")) ||
	    (rc = get_array(r, o, "output_tokens", "lengths.output_tokens", 2, WLM_QUANTILES_MAX,
			    1, INT32_MAX, true, &m->q_output, &n, "lengths.p")) ||
	    (rc = get_num(r, o, "spearman_rho", "lengths.spearman_rho", -1, 1, false,
			  &m->spearman)) ||
	    (rc = get_str(r, o, "copula", "lengths.copula", cop, sizeof(cop))))
		return rc;
	if (strcmp(cop, "gaussian"))
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "lengths.copula: expected \"gaussian\", got \"%s\"", cop);
	return 0;
}

static int read_adapters(const struct rd *r, json_t *root, struct wlmodel *m)
{
	static const char *const keys[] = { "count", "base_share", "top_share", "zipf_s", NULL };
	json_t *o, *v;
	int rc;

	if (!json_object_get(root, "adapters"))
		return 0;   /* a model of a trace without adapters has no key */
	if ((rc = get_obj(r, root, "adapters", "adapters", true, &o)) || !o)
		return rc;
	if ((rc = only_keys(r, o, "adapters", keys)))
		return rc;
	v = json_object_get(o, "count");
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1000000)
		return bad(r, "adapters.count", "an integer from 1 to 1000000", v);
	m->adapters = (uint32_t)json_integer_value(v);
	m->has_adapters = true;
	if ((rc = get_num(r, o, "base_share", "adapters.base_share", 0, 1, false,
			  &m->adapter_base_share)) ||
	    (rc = get_num(r, o, "top_share", "adapters.top_share", 0, 1, false,
			  &m->adapter_top_share)))
		return rc;
	return get_num(r, o, "zipf_s", "adapters.zipf_s", 0, WLM_ZIPF_MAX, false,
		       &m->adapter_zipf_s);
}

static int read_prefix(const struct rd *r, json_t *root, struct wlmodel *m)
{
	static const char *const keys[] = { "block_tokens", "reused_share", NULL };
	json_t *o, *v;
	int rc;

	if ((rc = get_obj(r, root, "prefix", "prefix", true, &o)) || !o)
		return rc;
	if ((rc = only_keys(r, o, "prefix", keys)))
		return rc;
	v = json_object_get(o, "block_tokens");
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1 << 20)
		return bad(r, "prefix.block_tokens", "an integer from 1 to 1048576", v);
	m->prefix_block_tokens = (uint32_t)json_integer_value(v);
	m->has_prefix = true;
	return get_num(r, o, "reused_share", "prefix.reused_share", 0, 1, false,
		       &m->prefix_reused_share);
}

/* A distribution {values, probabilities} at field: increasing whole
 * values in [1, hi], probabilities > 0 summing to 1 within 1e-6; *mean
 * (when not NULL) its mean. */
static int read_pmf(const struct rd *r, json_t *o, const char *field, double hi,
		    const char *const *keys, double **val, double **prob, size_t *n_out,
		    double *mean)
{
	char f[96];
	size_t n = 0;
	double sum = 0, mu = 0;
	int rc;

	if ((rc = only_keys(r, o, field, keys)))
		return rc;
	snprintf(f, sizeof(f), "%s.values", field);
	if ((rc = get_array(r, o, "values", f, 1, WLM_SESS_VALUES_MAX, 1, hi, true, val, &n,
			    NULL)))
		return rc;
	*n_out = n;
	snprintf(f, sizeof(f), "%s.probabilities", field);
	{
		char per[96];

		snprintf(per, sizeof(per), "%s.values", field);
		if ((rc = get_array(r, o, "probabilities", f, 1, WLM_SESS_VALUES_MAX, 0, 1, false,
				    prob, &n, per)))
			return rc;
	}
	for (size_t i = 0; i < n; i++) {
		if ((*val)[i] != floor((*val)[i]) || (i > 0 && !((*val)[i] > (*val)[i - 1])))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "%s.values[%zu]: expected increasing whole numbers, got %g",
					    field, i, (*val)[i]);
		if (!((*prob)[i] > 0))
			return ss_error_set(r->err, -EINVAL, r->path, 0,
					    "%s[%zu]: expected a number > 0, got %g", f, i, (*prob)[i]);
		sum += (*prob)[i];
		mu += (*prob)[i] * (*val)[i];
	}
	if (!(fabs(sum - 1) <= 1e-6))
		return ss_error_set(r->err, -EINVAL, r->path, 0, "%s: expected a sum of 1, got %.9g",
				    f, sum);
	if (mean)
		*mean = mu / sum;
	return 0;
}

/* sessions: null, or the session structure (workload-model.h). */
static int read_sessions(const struct rd *r, json_t *root, struct wlmodel *m)
{
	static const char *const keys[] = { "sessions", "calls", "turns", "fanout", "think_s",
					    "new_tokens", "output_tokens", "spearman_rho", NULL };
	static const char *const tkeys[] = { "mean", "max", "values", "probabilities", NULL };
	static const char *const fkeys[] = { "values", "probabilities", NULL };
	json_t *o, *t, *v;
	double mean, x;
	size_t n = m->n_q;
	int rc;

	if ((rc = get_obj(r, root, "sessions", "sessions", true, &o)) || !o)
		return rc;
	m->has_sessions = true;
	if ((rc = only_keys(r, o, "sessions", keys)))
		return rc;
	v = json_object_get(o, "sessions");
	if (!json_is_integer(v) || (uint64_t)json_integer_value(v) != m->requests)
		return v && json_is_integer(v) ?
			ss_error_set(r->err, -EINVAL, r->path, 0,
				     "sessions.sessions: expected source.requests (%llu: the model "
				     "times session starts), got %lld", (unsigned long long)m->requests,
				     (long long)json_integer_value(v)) :
			bad(r, "sessions.sessions", "an integer (source.requests)", v);
	v = json_object_get(o, "calls");
	if (!json_is_integer(v) || json_integer_value(v) <= (json_int_t)m->requests ||
	    json_integer_value(v) > (json_int_t)WL_MAX_REQUESTS)
		return v && json_is_integer(v) ?
			ss_error_set(r->err, -EINVAL, r->path, 0,
				     "sessions.calls: expected an integer from sessions.sessions + 1 "
				     "to %u, got %lld", WL_MAX_REQUESTS, (long long)json_integer_value(v)) :
			bad(r, "sessions.calls", "an integer", v);
	m->calls = (uint64_t)json_integer_value(v);
	if ((rc = get_obj(r, o, "turns", "sessions.turns", false, &t)) ||
	    (rc = read_pmf(r, t, "sessions.turns", 1e6, tkeys, &m->turns_v, &m->turns_p,
			   &m->n_turns, &mean)) ||
	    (rc = get_num(r, t, "mean", "sessions.turns.mean", 1, 1e6, false, &m->turns_mean)) ||
	    (rc = get_num(r, t, "max", "sessions.turns.max", 1, 1e6, false, &x)))
		return rc;
	if (!(fabs(m->turns_mean - mean) <= 1e-6 * mean))
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "sessions.turns.mean: expected the mean of sessions.turns.values "
				    "(%.9g), got %.9g", mean, m->turns_mean);
	if (x != m->turns_v[m->n_turns - 1])
		return ss_error_set(r->err, -EINVAL, r->path, 0,
				    "sessions.turns.max: expected the last of sessions.turns.values "
				    "(%g), got %g", m->turns_v[m->n_turns - 1], x);
	/* the --sessions generator's fan-out range */
	if ((rc = get_obj(r, o, "fanout", "sessions.fanout", false, &t)) ||
	    (rc = read_pmf(r, t, "sessions.fanout", 1024, fkeys, &m->fanout_v, &m->fanout_p,
			   &m->n_fanout, NULL)) ||
	    (rc = get_array(r, o, "think_s", "sessions.think_s", 2, WLM_QUANTILES_MAX, 0, 3.6e6,
			    true, &m->q_think_s, &n, "lengths.p")) ||
	    (rc = get_array(r, o, "new_tokens", "sessions.new_tokens", 2, WLM_QUANTILES_MAX, 1,
			    INT32_MAX, true, &m->q_new, &n, "lengths.p")) ||
	    (rc = get_array(r, o, "output_tokens", "sessions.output_tokens", 2, WLM_QUANTILES_MAX,
			    1, INT32_MAX, true, &m->q_out_later, &n, "lengths.p")) ||
	    (rc = get_num(r, o, "spearman_rho", "sessions.spearman_rho", -1, 1, false,
			  &m->spearman_later)))
		return rc;
	return 0;
}

int wlmodel_read(struct wlmodel *m, const char *path, struct ss_error *err)
{
	static const char *const keys[] = { "servesim_workload_model", "source", "arrivals",
					    "lengths", "prefix", "sessions", "adapters", NULL };
	struct rd r = { .path = path, .err = err };
	json_error_t je;
	json_t *root, *v;
	FILE *f;
	int rc;

	wlmodel_release(m);
	f = fopen(path, "r");
	if (!f)
		return ss_error_set(err, -errno, path, 0, "cannot open workload model: %s",
				    strerror(errno));
	/* a model is small: refuse what is not (a trace given by mistake) */
	root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
	fclose(f);
	if (!root)
		return ss_error_set(err, -EINVAL, path, je.line > 0 ? je.line : 0,
				    "expected a servesim workload model (JSON): %s", je.text);
	rc = 0;
	if (!json_is_object(root)) {
		rc = bad(&r, "(top level)", "an object", root);
		goto out;
	}
	v = json_object_get(root, "servesim_workload_model");
	if (!json_is_integer(v)) {
		rc = bad(&r, "servesim_workload_model", "the format version, an integer", v);
		goto out;
	}
	if (json_integer_value(v) != WLM_VERSION) {
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "servesim_workload_model: expected version %d, got %lld (written by "
				  "another servesim?)", WLM_VERSION, (long long)json_integer_value(v));
		goto out;
	}
	if ((rc = only_keys(&r, root, "", keys)) ||
	    (rc = read_source(&r, root, m)) ||
	    (rc = read_arrivals(&r, root, m)) ||
	    (rc = read_lengths(&r, root, m)) ||
	    (rc = read_prefix(&r, root, m)) ||
	    (rc = read_adapters(&r, root, m)))
		goto out;
	rc = read_sessions(&r, root, m);
out:
	json_decref(root);
	if (rc)
		wlmodel_release(m);
	return rc;
}
