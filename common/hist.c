#include "hist.h"

#include <assert.h>
#include <string.h>

void ss_hist_init(struct ss_hist *h)
{
	memset(h, 0, sizeof(*h));
}

/* Midpoint of a bucket's value range. */
static double bucket_mid(unsigned b)
{
	unsigned e = b >> SS_HIST_SUB_BITS;
	unsigned sub = b & ((1u << SS_HIST_SUB_BITS) - 1);
	double width, lo;

	if (e == 0)
		return (double)sub;
	width = (double)(1ULL << (e - 1));
	lo = (double)(((uint64_t)(1u << SS_HIST_SUB_BITS) + sub) << (e - 1));
	return lo + (width - 1) / 2.0;
}

void ss_hist_merge(struct ss_hist *into, const struct ss_hist *from)
{
	if (from->count == 0)
		return;
	if (into->count == 0 || from->min < into->min)
		into->min = from->min;
	if (into->count == 0 || from->max > into->max)
		into->max = from->max;
	into->count += from->count;
	into->sum += from->sum;
	for (unsigned i = 0; i < SS_HIST_BUCKETS; i++)
		into->bucket[i] += from->bucket[i];
}

double ss_hist_mean(const struct ss_hist *h)
{
	return h->count ? h->sum / (double)h->count : 0.0;
}

/* Value of the k-th smallest sample (0-based), as its bucket midpoint clamped
 * to the exact [min, max]. */
static double kth(const struct ss_hist *h, uint64_t k)
{
	uint64_t seen = 0;

	for (unsigned b = 0; b < SS_HIST_BUCKETS; b++) {
		seen += h->bucket[b];
		if (seen > k) {
			double m = bucket_mid(b);

			if (m < (double)h->min)
				m = (double)h->min;
			if (m > (double)h->max)
				m = (double)h->max;
			return m;
		}
	}
	return (double)h->max;
}

double ss_hist_quantile(const struct ss_hist *h, double q)
{
	double pos, frac, a, b;
	uint64_t lo;

	if (h->count == 0)
		return 0.0;
	pos = q * (double)(h->count - 1);
	lo = (uint64_t)pos;
	frac = pos - (double)lo;
	a = kth(h, lo);
	if (frac == 0.0 || lo + 1 >= h->count)
		return a;
	b = kth(h, lo + 1);
	return a + frac * (b - a);
}

double ss_quantile_sorted(const double *v, uint64_t n, double q)
{
	double pos, frac;
	uint64_t lo;

	if (n == 0)
		return 0.0;
	pos = q * (double)(n - 1);
	lo = (uint64_t)pos;
	frac = pos - (double)lo;
	if (lo + 1 >= n)
		return v[n - 1];
	return v[lo] + frac * (v[lo + 1] - v[lo]);
}
