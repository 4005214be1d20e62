/* servesim — time arithmetic: user units to int64 nanoseconds, checked.
 *
 * Time is int64_t nanoseconds everywhere (docs/design.md §2).  Users give
 * milliseconds or seconds as doubles; a cost model computes durations in
 * double seconds.  Every such conversion, and every `now + duration`, goes
 * through these helpers, so a value that does not fit is an error the user
 * sees instead of a wrapped or undefined int64 (libuv's uv__time discipline).
 *
 * SS_TIME_MAX_NS is the largest representable instant: about 292 years.  A
 * simulated run never gets there; a duration that would take it there is a
 * modelling error (a GPU with 1e-300 B/s of bandwidth, a 1e300 ms table row)
 * and is reported as such.
 */
#ifndef SS_SSTIME_H
#define SS_SSTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "ss-error.h"

#define SS_TIME_MAX_NS INT64_MAX

/* Nanoseconds per unit, as doubles for the conversions below. */
#define SS_NS_PER_S 1e9
#define SS_NS_PER_MS 1e6
#define SS_NS_PER_US 1e3

/* v units (ns_per_unit nanoseconds each) to nanoseconds, rounded to nearest.
 * Returns false, leaving *out untouched, when v is NaN, negative, or the
 * result would exceed SS_TIME_MAX_NS.  Zero is allowed. */
bool ss_time_from_units(double v, double ns_per_unit, int64_t *out);

/* The same with an error naming what (e.g. "--slo ttft_ms") for the user:
 * "--slo ttft_ms: expected a duration between 0 and 9.2e+12 ms, got 1e+300".
 * Returns 0 or -ERANGE. */
int ss_time_parse_ms(double ms, const char *what, int64_t *out, struct ss_error *err);
int ss_time_parse_s(double s, const char *what, int64_t *out, struct ss_error *err);

/* -ERANGE in err saying that what (a step, a transfer) would end at end_s
 * seconds, past the range: the one wording of a computed time that does
 * not fit (the engine's eng_time_error and the KV manager's).  Returns
 * -ERANGE. */
int ss_time_range_error(struct ss_error *err, double end_s, const char *what);

/* Double seconds to ns, for computed durations; false as above. */
static inline bool ss_time_from_s(double s, int64_t *out)
{
	return ss_time_from_units(s, SS_NS_PER_S, out);
}

/* a + b for a >= 0, b >= 0 instants/durations; false on overflow. */
static inline bool ss_time_add(int64_t a, int64_t b, int64_t *out)
{
	return !__builtin_add_overflow(a, b, out);
}

/* a + b saturating at SS_TIME_MAX_NS, for accumulators that only report. */
static inline int64_t ss_time_add_sat(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

/* a x n for a >= 0, n >= 0, saturating at INT64_MAX. */
static inline int64_t ss_time_mul_sat(int64_t a, int64_t n)
{
	int64_t r;
	return __builtin_mul_overflow(a, n, &r) ? INT64_MAX : r;
}

#endif
