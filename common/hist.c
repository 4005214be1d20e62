#include "hist.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A fresh anonymous mapping reads as zeros and costs no page until written
 * (see hist.h); calloc where the system has no anonymous mappings. */
int ss_hist_init(struct ss_hist *h)
{
	void *p;

	memset(h, 0, sizeof(*h));
#ifdef MAP_ANONYMOUS
	p = mmap(NULL, SS_HIST_BUCKET_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
#else
	p = calloc(SS_HIST_GROUPS, sizeof(struct ss_hist_group));
	if (!p)
		return -ENOMEM;
#endif
	h->group = p;
	return 0;
}

void ss_hist_release(struct ss_hist *h)
{
	if (!h)
		return;
	if (h->group) {
#ifdef MAP_ANONYMOUS
		munmap(h->group, SS_HIST_BUCKET_BYTES);
#else
		free(h->group);
#endif
	}
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
	/* only the groups from may have counted into: the others' pages stay
	 * untouched in both */
	for (unsigned g = 0; g < SS_HIST_GROUPS; g++) {
		if (!from->used[g])
			continue;
		into->used[g] = true;
		for (unsigned i = 0; i < (1u << SS_HIST_SUB_BITS); i++)
			into->group[g].n[i] += from->group[g].n[i];
	}
}

double ss_hist_mean(const struct ss_hist *h)
{
	return h->count ? h->sum / (double)h->count : 0.0;
}

/* Value of the k-th smallest sample (0-based), as its bucket midpoint clamped
 * to the exact [min, max].  Groups outside `used` hold no counts and are
 * skipped unread. */
static double kth(const struct ss_hist *h, uint64_t k)
{
	uint64_t seen = 0;

	for (unsigned g = 0; g < SS_HIST_GROUPS; g++) {
		if (!h->used[g])
			continue;
		for (unsigned i = 0; i < (1u << SS_HIST_SUB_BITS); i++) {
			seen += h->group[g].n[i];
			if (seen > k) {
				double mid = bucket_mid((g << SS_HIST_SUB_BITS) + i);

				if (mid < (double)h->min)
					mid = (double)h->min;
				if (mid > (double)h->max)
					mid = (double)h->max;
				return mid;
			}
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
