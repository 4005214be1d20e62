/* servesim — generating a workload from a fitted model
 * (workload-model.h; docs/workloads.md, "Workload models").
 *
 * Arrivals reuse the --arrival gamma and mmpp generators
 * (traces/generators.c, through workload_build, so the same seed streams
 * and limits apply): a gamma renewal process of the model's rate and gap
 * cv, or its two-state MMPP.  A model with a
 * rate curve draws that process at rate 1 in the curve's "expected count"
 * time and maps each arrival through the inverse of the curve's integral
 * (rate_curve_time, traces/rate-curve.c), so the slow change follows the
 * curve and the burstiness within it is the gamma's.
 *
 * Lengths: a Gaussian copula.  Two standard normals with correlation
 * r = 2 sin(pi rho / 6) (the Gaussian correlation whose rank correlation
 * is Spearman's rho) become two uniforms through the normal CDF, and each
 * uniform a length through the model's quantiles (linear between grid
 * points), times --prompt-scale / --output-scale, rounded, at least 1.
 * The draws come from SS_RNG_LENGTHS, two normals per request in order,
 * so request i's lengths depend only on the seed and the model.
 */
#include "workload-model.h"
#include "workload-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>

#include "rng.h"
#include "sstime.h"

/* The model's length at probability u, linear between grid points. */
static double quantile_at(const double *p, const double *q, size_t n, double u)
{
	size_t lo = 0, hi = n - 1;

	if (u <= 0)
		return q[0];
	if (u >= 1)
		return q[n - 1];
	while (hi - lo > 1) {    /* p[lo] <= u < p[hi] */
		size_t mid = lo + (hi - lo) / 2;

		if (p[mid] <= u)
			lo = mid;
		else
			hi = mid;
	}
	return q[lo] + (q[hi] - q[lo]) * (u - p[lo]) / (p[hi] - p[lo]);
}

static int32_t tokens(double v)
{
	v = round(v);
	if (!(v >= 1))
		return 1;
	return v >= INT32_MAX ? INT32_MAX : (int32_t)v;
}

/* The rate curve of m in rate-curve.c's representation: owned arrays. */
static int curve_of(const struct wlmodel *m, struct rate_curve *c)
{
	size_t n = 2 * m->n_curve;

	memset(c, 0, sizeof(*c));
	c->t = malloc(n * sizeof(*c->t));
	c->r = malloc(n * sizeof(*c->r));
	c->cum = malloc(n * sizeof(*c->cum));
	if (!c->t || !c->r || !c->cum) {
		rate_curve_free(c);
		return -ENOMEM;
	}
	wlmodel_curve_rows(m, c->t, c->r);
	c->n = n;
	c->cum[0] = 0;
	for (size_t i = 1; i < n; i++)
		c->cum[i] = c->cum[i - 1] + (c->t[i] - c->t[i - 1]) * (c->r[i] + c->r[i - 1]) / 2;
	c->period = c->t[n - 1];
	c->total = c->cum[n - 1];
	return 0;
}

/* The requests the curve expects from 0 to t (s), across periods. */
static double curve_count(const struct rate_curve *c, double t)
{
	double q = floor(t / c->period), x = t - q * c->period, sum = q * c->total;

	for (size_t i = 0; i + 1 < c->n; i++) {
		double d = c->t[i + 1] - c->t[i];

		if (x >= c->t[i + 1])
			continue;
		x -= c->t[i];
		return sum + c->cum[i] + c->r[i] * x + (c->r[i + 1] - c->r[i]) / d * x * x / 2;
	}
	return sum + c->total;
}

/* The --arrival spec of m's process (of batches, when m has them: at
 * rate_rps / batch_mean) with rates divided by per and times multiplied by
 * it: per = 1 for time in s; per = rate_rps for the curve's count time
 * (one expected request a unit). */
static void arrival_spec(const struct wlmodel *m, double per, char *buf, size_t len)
{
	if (m->process == WLM_MMPP)
		snprintf(buf, len, "mmpp:rates=%.17g,%.17g,switch_s=%.17g,%.17g",
			 m->mmpp_rps[0] / per, m->mmpp_rps[1] / per, m->mmpp_switch_s[0] * per,
			 m->mmpp_switch_s[1] * per);
	else
		snprintf(buf, len, "gamma:rate=%.17g,cv=%.17g", m->rate_rps / m->batch_mean / per,
			 m->gap_cv);
}

/* The stream of batch sizes: one of its own, so that a model with batches
 * draws its arrivals and lengths as the other streams say.  A number
 * outside common/rng.h's enum, which names the streams the engine uses. */
#define WLM_RNG_BATCH ((enum ss_rng_stream)64)

/* Give each of wl's arrivals (the batches' times) a size drawn from m's
 * batch sizes, and make that many requests at that time, stopping at
 * max_n requests (0: no limit). */
static int expand_batches(struct workload *wl, const struct wlmodel *m, uint64_t max_n,
			  uint64_t seed, struct ss_error *err)
{
	struct workload out;
	gsl_rng *r = ss_rng_new(seed, WLM_RNG_BATCH);
	size_t limit = max_n ? (size_t)max_n : WL_MAX_REQUESTS;
	int rc = 0;

	workload_init(&out);
	if (!r)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (size_t i = 0; i < wl->n && out.n < limit && !rc; i++) {
		double u = gsl_rng_uniform(r), c = 0;
		size_t k = 0, b;

		for (k = 0; k + 1 < m->n_batch; k++) {    /* O(sizes): a few dozen */
			c += m->batch_prob[k];
			if (u < c)
				break;
		}
		b = (size_t)m->batch_size[k];
		for (size_t j = 0; j < b && out.n < limit; j++) {
			struct wl_request *q = wl_append(&out);

			if (!q) {
				rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
				break;
			}
			*q = wl->req[i];
		}
	}
	if (!rc && !max_n && out.n == WL_MAX_REQUESTS)
		rc = ss_error_set(err, -E2BIG, NULL, 0,
				  "more than %u requests; expected a smaller --num-requests, --duration or "
				  "rate", WL_MAX_REQUESTS);
	gsl_rng_free(r);
	if (rc) {
		workload_release(&out);
		return rc;
	}
	free(wl->req);
	wl->req = out.req;
	wl->n = out.n;
	wl->cap = out.cap;
	return 0;
}

/* ---- sessions ------------------------------------------------------------ */

/* A sessions model's draws for sessions_generate_from (traces/sessions.c):
 * the first call's lengths are the request generated at the session's
 * start; turns and fan-out from the model's distributions, think time and
 * a later call's lengths through its quantiles (a Gaussian copula of
 * spearman_later for new and output tokens). */
struct model_draw {
	const struct wlmodel *m;
	const struct workload *first;  /* request s: session s's first call */
	double ps, os, r, cr;
};

static double pmf_draw(const double *v, const double *p, size_t n, gsl_rng *r)
{
	double u = gsl_rng_uniform(r), c = 0;
	size_t k;

	for (k = 0; k + 1 < n; k++) {
		c += p[k];
		if (u < c)
			break;
	}
	return v[k];
}

static uint32_t md_turns(void *ctx, gsl_rng *r)
{
	const struct wlmodel *m = ((struct model_draw *)ctx)->m;

	return (uint32_t)pmf_draw(m->turns_v, m->turns_p, m->n_turns, r);
}

static uint32_t md_fanout(void *ctx, gsl_rng *r)
{
	const struct wlmodel *m = ((struct model_draw *)ctx)->m;

	return (uint32_t)pmf_draw(m->fanout_v, m->fanout_p, m->n_fanout, r);
}

static double md_think(void *ctx, gsl_rng *r)
{
	const struct wlmodel *m = ((struct model_draw *)ctx)->m;

	return quantile_at(m->q_p, m->q_think_s, m->n_q, gsl_rng_uniform(r));
}

static void md_lengths(void *ctx, gsl_rng *r, size_t s, uint32_t step, uint32_t b,
		       int32_t *new_tokens, int32_t *output_tokens)
{
	const struct model_draw *d = ctx;
	const struct wlmodel *m = d->m;
	double z1, z2;

	if (step == 0 && b == 0) {
		*new_tokens = d->first->req[s].prompt_tokens;
		*output_tokens = d->first->req[s].output_tokens;
		return;
	}
	z1 = gsl_ran_ugaussian(r);
	z2 = d->r * z1 + d->cr * gsl_ran_ugaussian(r);
	*new_tokens = tokens(d->ps * quantile_at(m->q_p, m->q_new, m->n_q, gsl_cdf_ugaussian_P(z1)));
	*output_tokens =
		tokens(d->os * quantile_at(m->q_p, m->q_out_later, m->n_q, gsl_cdf_ugaussian_P(z2)));
}

/* Replace wl (one request a session: its start and first call) with the
 * sessions m draws from seed. */
static int build_sessions(struct workload *wl, const struct wlmodel *m, double ps, double os,
			  uint64_t seed, struct ss_error *err)
{
	struct workload out;
	struct model_draw md = { .m = m, .first = wl, .ps = ps, .os = os };
	struct sess_draw d = { .ctx = &md, .turns = md_turns, .think_s = md_think,
			       .fanout = md_fanout, .lengths = md_lengths };
	int64_t *start = malloc((wl->n ? wl->n : 1) * sizeof(*start));
	int rc;

	if (!start)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	md.r = 2 * sin(M_PI * m->spearman_later / 6);
	md.cr = sqrt(1 - md.r * md.r > 0 ? 1 - md.r * md.r : 0);
	for (size_t i = 0; i < wl->n; i++)
		start[i] = wl->req[i].arrival_ns;
	workload_init(&out);
	rc = sessions_generate_from(&out, wl->n, start, &d, seed, err);
	free(start);
	if (rc) {
		workload_release(&out);
		return rc;
	}
	workload_release(wl);
	*wl = out;
	return 0;
}

int wlmodel_build(struct workload *wl, const struct wlmodel *m,
		  const struct workload_spec *spec, struct ss_error *err)
{
	struct workload_spec sub = { 0 };
	struct rate_curve curve = { 0 };
	double scale = spec->rate_scale > 0 ? spec->rate_scale : 1;
	double ps = spec->prompt_scale > 0 ? spec->prompt_scale : 1;
	double os = spec->output_scale > 0 ? spec->output_scale : 1;
	double r, cr;
	char arrival[256];
	gsl_rng *rl = NULL;
	int rc;

	workload_release(wl);
	if (spec->trace || spec->arrival || spec->rate_curve || spec->lengths || spec->closed)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--workload cannot be combined with %s (the model gives the arrivals and "
				    "the lengths); expected --workload alone, with --rate or --rate-scale, "
				    "--prompt-scale, --output-scale, --num-requests, --duration, --seed",
				    spec->trace ? "--trace" : spec->arrival ? "--arrival" :
				    spec->rate_curve ? "--rate-curve" : spec->lengths ? "--lengths" :
				    "--concurrency");
	if (m->has_sessions && spec->tenants)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--tenants with a sessions model: tenants of sessions are not "
				    "modelled; expected no --tenants");
	if (spec->prompt_scale < 0 || spec->output_scale < 0 || !isfinite(ps) || !isfinite(os))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--prompt-scale / --output-scale: expected factors > 0");
	if (spec->target_rate > 0) {
		if (spec->rate_scale != 0 && spec->rate_scale != 1)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--rate cannot be combined with --rate-scale (both set the "
					    "workload's rate); expected one of them");
		scale = spec->target_rate / m->rate_rps;
	}
	if (!(scale > 0) || !isfinite(scale))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate-scale: expected a number > 0, got %g", scale);
	sub.lengths = "fixed:prompt=1,output=1";   /* draws nothing; replaced below */
	sub.num_requests = spec->num_requests;
	if (!spec->num_requests && !spec->duration_ns)
		sub.num_requests = m->requests;     /* as many as the trace had */
	sub.seed = spec->seed;
	sub.tenants = spec->tenants;
	if (!m->n_curve) {
		arrival_spec(m, 1, arrival, sizeof(arrival));
		sub.arrival = arrival;
		sub.rate_scale = scale;
		sub.duration_ns = spec->duration_ns;
		rc = workload_build(wl, &sub, err);
		if (rc)
			return rc;
	} else {
		/* rate 1 in the curve's count time, then mapped to time */
		double lam_max = 0;

		rc = curve_of(m, &curve);
		if (rc)
			return ss_error_set(err, rc, NULL, 0, "out of memory");
		if (spec->duration_ns) {
			lam_max = curve_count(&curve, (double)spec->duration_ns * 1e-9 * scale);
			if (!(lam_max * 1e9 < 9e18)) {
				rc = ss_error_set(err, -E2BIG, NULL, 0,
						  "--duration: more requests than a workload may hold");
				goto out;
			}
			sub.duration_ns = (int64_t)ceil(lam_max * 1e9) + 1;
		}
		arrival_spec(m, m->rate_rps, arrival, sizeof(arrival));
		sub.arrival = arrival;
		rc = workload_build(wl, &sub, err);
		if (rc)
			goto out;
		for (size_t i = 0; i < wl->n; i++) {
			double t = rate_curve_time(&curve, (double)wl->req[i].arrival_ns * 1e-9) / scale;

			if (!ss_time_from_s(t, &wl->req[i].arrival_ns)) {
				rc = ss_error_set(err, -ERANGE, NULL, 0,
						  "--workload: arrival times beyond 292 years; lower "
						  "--num-requests or --duration");
				goto out;
			}
			/* rounding at the end of the count range */
			if (spec->duration_ns && wl->req[i].arrival_ns >= spec->duration_ns) {
				wl->n = i;
				break;
			}
		}
	}

	if (m->n_batch) {
		rc = expand_batches(wl, m, sub.num_requests, spec->seed, err);
		if (rc)
			goto out;
	}

	/* --rate R without --duration: the requests generated are rescaled to a
	 * mean of exactly R, (n - 1) / (last - first arrival), the measure
	 * --rate applies to a trace; a bursty process's sample mean over a few
	 * of its cycles is otherwise off by tens of percent */
	if (spec->target_rate > 0 && !spec->duration_ns && wl->n >= 2 &&
	    wl->req[wl->n - 1].arrival_ns > 0) {
		double f = (double)(wl->n - 1) / ((double)wl->req[wl->n - 1].arrival_ns * 1e-9) /
			   spec->target_rate;

		for (size_t i = 0; i < wl->n; i++) {
			double ns = (double)wl->req[i].arrival_ns * f;

			if (!(ns < 9.2e18)) {
				rc = ss_error_set(err, -ERANGE, NULL, 0,
						  "--rate: arrival times beyond 292 years");
				goto out;
			}
			wl->req[i].arrival_ns = llround(ns);
		}
	}

	rl = ss_rng_new(spec->seed, SS_RNG_LENGTHS);
	if (!rl) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	r = 2 * sin(M_PI * m->spearman / 6);
	cr = sqrt(1 - r * r > 0 ? 1 - r * r : 0);
	for (size_t i = 0; i < wl->n; i++) {
		double z1 = gsl_ran_ugaussian(rl), z2 = r * z1 + cr * gsl_ran_ugaussian(rl);

		wl->req[i].prompt_tokens =
			tokens(ps * quantile_at(m->q_p, m->q_prompt, m->n_q, gsl_cdf_ugaussian_P(z1)));
		wl->req[i].output_tokens =
			tokens(os * quantile_at(m->q_p, m->q_output, m->n_q, gsl_cdf_ugaussian_P(z2)));
	}
	if (m->has_sessions && (rc = build_sessions(wl, m, ps, os, spec->seed, err)))
		goto out;
	wl->format = TRACE_AUTO;
	wl->has_arrivals = true;
	snprintf(wl->source, sizeof(wl->source), "model:%.200s", m->source);
out:
	gsl_rng_free(rl);
	rate_curve_free(&curve);
	if (rc)
		workload_release(wl);
	return rc;
}

int wlmodel_build_spec(struct workload *wl, const struct workload_spec *spec,
		       struct ss_error *err)
{
	struct wlmodel m;
	int rc;

	wlmodel_init(&m);
	rc = wlmodel_read(&m, spec->model, err);
	if (!rc)
		rc = wlmodel_build(wl, &m, spec, err);
	if (!rc) {
		char knobs[160] = "";
		double ps = spec->prompt_scale > 0 ? spec->prompt_scale : 1;
		double os = spec->output_scale > 0 ? spec->output_scale : 1;
		size_t k = 0;

		if (spec->target_rate > 0)
			k += (size_t)snprintf(knobs + k, sizeof(knobs) - k, ", rate %g req/s",
					      spec->target_rate);
		else if (spec->rate_scale > 0 && spec->rate_scale != 1)
			k += (size_t)snprintf(knobs + k, sizeof(knobs) - k, ", rate x%g",
					      spec->rate_scale);
		if (ps != 1 && k < sizeof(knobs))
			k += (size_t)snprintf(knobs + k, sizeof(knobs) - k, ", prompts x%g", ps);
		if (os != 1 && k < sizeof(knobs))
			snprintf(knobs + k, sizeof(knobs) - k, ", outputs x%g", os);
		snprintf(wl->source, sizeof(wl->source), "model:%.180s%s", spec->model, knobs);
	}
	wlmodel_release(&m);
	return rc;
}
