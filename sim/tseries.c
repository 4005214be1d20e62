/* servesim — the time series of instance samples, bounded (see tseries.h). */
#include "tseries.h"

#include <stdlib.h>
#include <string.h>

void tseries_init(struct tseries *ts, uint32_t n_inst, int64_t interval_ns, uint64_t max_samples)
{
	uint64_t times;

	memset(ts, 0, sizeof(*ts));
	if (max_samples == 0)
		max_samples = TSERIES_MAX_SAMPLES;
	ts->n_inst = n_inst ? n_inst : 1;
	times = max_samples / ts->n_inst;
	if (times > TSERIES_MAX_TIMES)
		times = TSERIES_MAX_TIMES;
	times &= ~(uint64_t)1;     /* even: halving keeps the grid */
	ts->max_times = times >= 2 ? times : 2;
	ts->interval_ns = ts->requested_ns = interval_ns;
}

/* Keep sampling times 0, 2, 4, ... and double the interval.  The interval
 * stops doubling where it would overflow (a run that long cannot be
 * simulated in int64 ns anyway); the series then keeps halving. */
static void coarsen(struct tseries *ts)
{
	uint64_t times = ts->n / ts->n_inst;

	for (uint64_t k = 1; 2 * k < times; k++)
		memcpy(&ts->s[k * ts->n_inst], &ts->s[2 * k * ts->n_inst],
		       ts->n_inst * sizeof(*ts->s));
	ts->n = (times + 1) / 2 * ts->n_inst;
	if (ts->interval_ns <= INT64_MAX / 2)
		ts->interval_ns *= 2;
}

struct ts_sample *tseries_append(struct tseries *ts)
{
	struct ts_sample *slot;

	if (ts->n / ts->n_inst >= ts->max_times)
		coarsen(ts);
	if (ts->n + ts->n_inst > ts->cap) {
		uint64_t limit = ts->max_times * ts->n_inst;
		uint64_t cap = ts->cap ? ts->cap * 2 : 1024 * (uint64_t)ts->n_inst;
		struct ts_sample *s;

		if (cap > limit)
			cap = limit;
		s = realloc(ts->s, cap * sizeof(*s));
		if (!s)
			return NULL;
		ts->s = s;
		ts->cap = cap;
	}
	slot = &ts->s[ts->n];
	ts->n += ts->n_inst;
	return slot;
}

void tseries_release(struct tseries *ts)
{
	free(ts->s);
	memset(ts, 0, sizeof(*ts));
}
