/* servesim — a serving run's percentiles and throughput from its
 * per-request records (serving.h), computed as analysis/metrics.c computes
 * servesim's own. */
#include "serving-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "hist.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Mean and percentiles of v[0..n) (sorted here), or NAN when n == 0. */
static void dist(double *v, size_t n, double out[SERVING_N_STATS])
{
	double sum = 0;

	if (n == 0) {
		for (int k = 0; k < SERVING_N_STATS; k++)
			out[k] = NAN;
		return;
	}
	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	out[SERVING_MEAN] = sum / (double)n;
	out[SERVING_P50] = ss_quantile_sorted(v, n, 0.50);
	out[SERVING_P90] = ss_quantile_sorted(v, n, 0.90);
	out[SERVING_P99] = ss_quantile_sorted(v, n, 0.99);
}

int serving_run_stats(const struct serving_run *r, struct serving_stats *st)
{
	size_t m = r->n_req > r->n_itl ? r->n_req : r->n_itl;
	double *v = malloc((m ? m : 1) * sizeof(*v)), out_tokens = 0;
	int64_t first = INT64_MAX, last = INT64_MIN;
	size_t n;

	if (!v)
		return -ENOMEM;
	*st = (struct serving_stats){ 0 };
	/* TTFT */
	n = 0;
	for (size_t i = 0; i < r->n_req; i++) {
		const struct serving_request *q = &r->req[i];

		if (!q->ok)
			continue;
		st->n++;
		out_tokens += q->output_tokens;
		if (q->issue_ns != SERVING_NONE) {
			if (q->issue_ns < first)
				first = q->issue_ns;
			if (q->e2e_ns != SERVING_NONE && q->issue_ns + q->e2e_ns > last)
				last = q->issue_ns + q->e2e_ns;
		}
		if (q->ttft_ns != SERVING_NONE)
			v[n++] = (double)q->ttft_ns / 1e6;
	}
	dist(v, n, st->ttft_ms);
	n = 0;
	for (size_t i = 0; i < r->n_req; i++)
		if (r->req[i].ok && r->req[i].output_tokens > 1 && r->req[i].tpot_ns != SERVING_NONE)
			v[n++] = (double)r->req[i].tpot_ns / 1e6;
	dist(v, n, st->tpot_ms);
	n = 0;
	for (size_t i = 0; i < r->n_req; i++)
		if (r->req[i].ok && r->req[i].e2e_ns != SERVING_NONE)
			v[n++] = (double)r->req[i].e2e_ns / 1e6;
	dist(v, n, st->e2e_ms);
	n = 0;
	for (size_t i = 0; i < r->n_req; i++)
		for (uint32_t k = 0; r->req[i].ok && k < r->req[i].itl_n; k++)
			v[n++] = (double)r->itl_ns[r->req[i].itl_off + k] / 1e6;
	dist(v, n, st->itl_ms);
	free(v);
	st->duration_s = r->duration_ns != SERVING_NONE ? (double)r->duration_ns / 1e9
			 : first < last ? (double)(last - first) / 1e9 : NAN;
	st->requests_per_s = st->output_tokens_per_s = NAN;
	if (st->duration_s > 0 && st->n) {
		st->requests_per_s = (double)st->n / st->duration_s;
		st->output_tokens_per_s = out_tokens / st->duration_s;
	}
	return 0;
}
