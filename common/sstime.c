/* servesim — checked conversions to int64 nanoseconds (see sstime.h). */
#include "sstime.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>

bool ss_time_from_units(double v, double ns_per_unit, int64_t *out)
{
	double ns = v * ns_per_unit;

	/* 2^63 is exactly representable; anything at or above it does not fit.
	 * NaN fails every comparison, so it is rejected here too. */
	if (!(ns >= 0.0 && ns < 9223372036854775808.0))
		return false;
	ns = nearbyint(ns);
	if (ns >= 9223372036854775808.0)
		return false;
	*out = (int64_t)ns;
	return true;
}

static int parse(double v, double ns_per_unit, const char *unit, const char *what,
		 int64_t *out, struct ss_error *err)
{
	if (ss_time_from_units(v, ns_per_unit, out))
		return 0;
	return ss_error_set(err, -ERANGE, NULL, 0,
			    "%s: expected a duration between 0 and %.3g %s, got %g", what,
			    (double)SS_TIME_MAX_NS / ns_per_unit, unit, v);
}

int ss_time_parse_ms(double ms, const char *what, int64_t *out, struct ss_error *err)
{
	return parse(ms, SS_NS_PER_MS, "ms", what, out, err);
}

int ss_time_parse_s(double s, const char *what, int64_t *out, struct ss_error *err)
{
	return parse(s, SS_NS_PER_S, "s", what, out, err);
}

int ss_time_range_error(struct ss_error *err, double end_s, const char *what)
{
	return ss_error_set(err, -ERANGE, NULL, 0,
			    "%s would end at %.3g s, past the simulator's time range (int64 ns, "
			    "about 292 years); check the bandwidths, latencies and speeds given",
			    what, end_s);
}
