/* servesim — streaming histogram for per-token and per-step quantities.
 *
 * Per-token latencies (ITL) and per-step sizes are far too many to store, so
 * they are counted in a log-linear histogram (the HdrHistogram layout): values
 * below 2^SUB_BITS are exact, larger values fall into 2^SUB_BITS sub-buckets
 * per power of two, so a reported quantile (the bucket midpoint) is within
 * 2^-(SUB_BITS+1) = 0.2% of a true sample value.  Count, sum, min and max are
 * exact.  Recording is O(1) with no allocation.  Values are non-negative
 * int64 (ns for latencies, counts for sizes).
 *
 * Memory: the buckets form SS_HIST_GROUPS groups of 2^SUB_BITS counters, one
 * group per exponent (group 0 holds the exact values), 114 KiB in all, but a
 * run only ever counts into a few groups (an ITL spans a few powers of two).
 * The bucket array is therefore mapped fresh from the kernel at init and
 * never cleared: a page is only faulted in when a count lands in it, and
 * `used` marks the groups that may hold counts, so readers (merge, quantile)
 * skip the others without reading (and so faulting in) their pages.  A
 * small run touches 2-4 of the 29 pages; the first touch of a page costs
 * ~14 us on our VMs, and clearing every histogram's 29 pages was 30% of a
 * two-request run's page faults.
 * Rejected: buckets inside the struct (init's memset touches every page);
 * calloc (glibc clears blocks below its adaptive mmap threshold with
 * memset); one malloc per group on first use (every add could then fail,
 * on the hottest path of the engine, which has no error return).
 */
#ifndef SS_HIST_H
#define SS_HIST_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#define SS_HIST_SUB_BITS 8
#define SS_HIST_GROUPS (64 - SS_HIST_SUB_BITS + 1)
#define SS_HIST_BUCKETS (SS_HIST_GROUPS << SS_HIST_SUB_BITS)

/* One exponent group's counters.  A struct rather than a bare uint64_t
 * array so that, by the type of the access, a count cannot be one of the
 * caller's int64_t fields: the engine then keeps the value it just
 * recorded in a register instead of reloading it after ss_hist_add. */
struct ss_hist_group {
	uint64_t n[1u << SS_HIST_SUB_BITS];
};

/* bytes of one histogram's bucket array (its share of memory estimates) */
#define SS_HIST_BUCKET_BYTES (SS_HIST_GROUPS * sizeof(struct ss_hist_group))

struct ss_hist {
	uint64_t count;
	double sum;       /* exact enough: a sum of int64 values as double */
	int64_t min, max;
	struct ss_hist_group *group; /* SS_HIST_GROUPS, untouched pages unmapped */
	/* used[g]: group g may hold counts.  A flag per group, not a bitmask:
	 * marking it is one store in ss_hist_add (a mask's shift-and-OR took
	 * about one instruction more per call); bool, not a char type, which
	 * would alias everything. */
	bool used[SS_HIST_GROUPS];
};

/* 0, or -ENOMEM when the bucket array cannot be mapped.  Pair with
 * ss_hist_release(); a struct that was zeroed but never initialised may be
 * released too. */
int ss_hist_init(struct ss_hist *h);
/* Unmaps the buckets and leaves h zeroed (accepts NULL). */
void ss_hist_release(struct ss_hist *h);
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

/* Record v >= 0 n >= 1 times in an initialised histogram, as n calls of
 * ss_hist_add would: the sum gets n additions of v in turn -- or v n at
 * once where that is the same double: the sum is a sum of whole values, so
 * while it stays below 2^53 every partial sum is exact and the additions
 * round nowhere -- the rest is counted once.  For the
 * engine, whose requests in one step mostly emit after the same gap.  The
 * bucket is ss_hist_bucket(v), computed here from its group so that
 * marking the group costs one store. */
static inline void ss_hist_add_n(struct ss_hist *h, int64_t v, uint64_t n)
{
	uint64_t u = (uint64_t)v;
	unsigned g = 0, sub = (unsigned)u;

	assert(v >= 0 && n >= 1);
	if (h->count == 0 || v < h->min)
		h->min = v;
	if (h->count == 0 || v > h->max)
		h->max = v;
	h->count += n;
	/* u n <= 2^53 converts exactly; a rounded total below 2^53 means the
	 * exact one is below it too */
	if (n > 1 && u <= (UINT64_C(1) << 53) / n && h->sum + (double)(u * n) < 0x1p53)
		h->sum += (double)(u * n);
	else
		for (uint64_t i = 0; i < n; i++)
			h->sum += (double)v;
	if (u >= (1u << SS_HIST_SUB_BITS)) {
		unsigned msb = 63u - (unsigned)__builtin_clzll(u);

		g = msb - SS_HIST_SUB_BITS + 1;
		sub = (unsigned)((u >> (msb - SS_HIST_SUB_BITS)) & ((1u << SS_HIST_SUB_BITS) - 1));
	}
	h->used[g] = true;
	h->group[g].n[sub] += n;
}

/* Record v >= 0 once.  Inline: the engine records every token gap and two
 * sizes per step (a call was 4% of a 10,000-request run's instructions);
 * with n = 1 ss_hist_add_n's loop and counts fold to single adds. */
static inline void ss_hist_add(struct ss_hist *h, int64_t v)
{
	ss_hist_add_n(h, v, 1);
}

/* Quantile of n sorted doubles by linear interpolation between closest ranks
 * (numpy's default, which vLLM's benchmark uses).  0 when n == 0. */
double ss_quantile_sorted(const double *v, uint64_t n, double q);

#endif
