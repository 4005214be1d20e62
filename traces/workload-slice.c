/* servesim — a slice of a trace against the whole trace (workload.h).
 *
 * `--num-requests` and `--duration` keep the first part of a trace.  A plan
 * or a run on that part answers for the whole only when the part looks like
 * it: the same mean arrival rate and the same length distribution.  The
 * figures compared are those a capacity answer depends on: the rate (the
 * plan's scale 1) and the p50/p90/p99 of prompt and output lengths (the
 * service time and KV footprint of typical and tail requests).
 */
#include "workload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double rate(const struct wl_request *req, size_t n)
{
	double span;

	if (n < 2)
		return 0;
	span = (double)(req[n - 1].arrival_ns - req[0].arrival_ns) / 1e9;
	return span > 0 ? (double)(n - 1) / span : 0;
}

/* p50, p90, p99 of the prompt (output false) or output lengths of req[0..n). */
static void percentiles(const struct wl_request *req, size_t n, bool output, double *v,
			double out[3])
{
	static const double q[3] = { 0.50, 0.90, 0.99 };

	for (size_t i = 0; i < n; i++)
		v[i] = output ? req[i].output_tokens : req[i].prompt_tokens;
	qsort(v, n, sizeof(*v), cmp_double);
	for (int k = 0; k < 3; k++)
		out[k] = ss_quantile_sorted(v, n, q[k]);
}

static bool beyond(double slice, double whole, double tol)
{
	return whole > 0 ? fabs(slice - whole) > tol * whole : slice > 0;
}

bool workload_slice_compare(const struct workload *wl, struct wl_slice *s)
{
	struct wl_slice x = { 0 };
	double *v;

	if (wl->n_source <= wl->n || wl->n == 0)
		return false;
	v = malloc(wl->n_source * sizeof(*v));
	if (!v)
		return false;
	x.n[0] = wl->n;
	x.n[1] = wl->n_source;
	for (int w = 0; w < 2; w++) {
		x.rate_rps[w] = rate(wl->req, x.n[w]);
		percentiles(wl->req, x.n[w], false, v, x.prompt[w]);
		percentiles(wl->req, x.n[w], true, v, x.output[w]);
	}
	free(v);
	/* a rate the slice or the whole does not have (all at once) is not compared */
	x.differs[0] = x.rate_rps[0] > 0 && x.rate_rps[1] > 0 &&
		       beyond(x.rate_rps[0], x.rate_rps[1], WL_SLICE_RATE_TOL);
	for (int k = 0; k < 3; k++) {
		x.differs[1 + k] = beyond(x.prompt[0][k], x.prompt[1][k], WL_SLICE_LEN_TOL);
		x.differs[4 + k] = beyond(x.output[0][k], x.output[1][k], WL_SLICE_LEN_TOL);
	}
	for (int k = 0; k < 7; k++)
		x.any |= x.differs[k];
	*s = x;
	return true;
}

static void add(char *buf, size_t len, size_t *at, const char *name, double a, double b,
		const char *unit)
{
	int w;

	if (*at >= len)
		return;
	w = snprintf(buf + *at, len - *at, "%s%s %.4g vs %.4g%s (%+.0f%%)", *at ? "; " : "", name,
		     a, b, unit, b > 0 ? 100 * (a - b) / b : 0.0);
	*at += w > 0 ? (size_t)w : 0;
}

void workload_slice_text(const struct wl_slice *s, char *buf, size_t len)
{
	static const char *const pn[3] = { "p50", "p90", "p99" };
	size_t at = 0;
	char name[32];

	if (len)
		buf[0] = '\0';
	if (s->differs[0])
		add(buf, len, &at, "rate", s->rate_rps[0], s->rate_rps[1], " req/s");
	for (int k = 0; k < 3; k++)
		if (s->differs[1 + k]) {
			snprintf(name, sizeof(name), "prompt %s", pn[k]);
			add(buf, len, &at, name, s->prompt[0][k], s->prompt[1][k], " tokens");
		}
	for (int k = 0; k < 3; k++)
		if (s->differs[4 + k]) {
			snprintf(name, sizeof(name), "output %s", pn[k]);
			add(buf, len, &at, name, s->output[0][k], s->output[1][k], " tokens");
		}
}
