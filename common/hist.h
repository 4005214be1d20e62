/* servesim — streaming histogram for per-token and per-step quantities.
 *
 * Per-token latencies (ITL) and per-step sizes are far too many to store, so
 * they are counted in a log-linear histogram (the HdrHistogram layout): values
 * below 2^SUB_BITS are exact, larger values fall into 2^SUB_BITS sub-buckets
 * per power of two, so a reported quantile (the bucket midpoint) is within
 * 2^-(SUB_BITS+1) = 0.2% of a true sample value.  Count, sum, min and max are
 * exact.  Recording is O(1) with no allocation; memory is fixed (~60 KiB).
 * Values are non-negative int64 (ns for latencies, counts for sizes).
 */
#ifndef SS_HIST_H
#define SS_HIST_H

#include <assert.h>
#include <stdint.h>

#define SS_HIST_SUB_BITS 8
#define SS_HIST_BUCKETS ((64 - SS_HIST_SUB_BITS + 1) << SS_HIST_SUB_BITS)

struct ss_hist {
	uint64_t count;
	double sum;     /* exact enough: a sum of int64 values as double */
	int64_t min, max;
	uint64_t bucket[SS_HIST_BUCKETS];
};

void ss_hist_init(struct ss_hist *h);
void ss_hist_merge(struct ss_hist *into, const struct ss_hist *from);
/* q in [0,1]; returns 0 for an empty histogram.  Uses the same nearest-rank
 * rule as ss_quantile_sorted() on the bucketed values. */
double ss_hist_quantile(const struct ss_hist *h, double q);
double ss_hist_mean(const struct ss_hist *h);

/* Bucket of a value: exact below 2^SUB_BITS, else exponent group e >= 1
 * holds [2^(SUB+e-1), 2^(SUB+e)) in 2^SUB sub-buckets. */
static inline unsigned ss_hist_bucket(uint64_t v)
{
	unsigned msb;

	if (v < (1u << SS_HIST_SUB_BITS))
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	return ((msb - SS_HIST_SUB_BITS + 1) << SS_HIST_SUB_BITS) +
	       (unsigned)((v >> (msb - SS_HIST_SUB_BITS)) & ((1u << SS_HIST_SUB_BITS) - 1));
}

/* Record v >= 0.  Inline: the engine records every token gap and two
 * sizes per step (a call was 4% of a 10,000-request run's instructions). */
static inline void ss_hist_add(struct ss_hist *h, int64_t v)
{
	assert(v >= 0);
	if (h->count == 0 || v < h->min)
		h->min = v;
	if (h->count == 0 || v > h->max)
		h->max = v;
	h->count++;
	h->sum += (double)v;
	h->bucket[ss_hist_bucket((uint64_t)v)]++;
}

/* Quantile of n sorted doubles by linear interpolation between closest ranks
 * (numpy's default, which vLLM's benchmark uses).  0 when n == 0. */
double ss_quantile_sorted(const double *v, uint64_t n, double q);

#endif
