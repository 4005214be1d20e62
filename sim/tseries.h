/* servesim — the time series of instance samples, bounded in size.
 *
 * Sampling every instance every interval grows with the run's simulated
 * length, not its work: a slow trickle of requests over hours, or
 * --sample-interval 1e-9, once filled memory (3.5 GB) and the output
 * directory (4.8 GB) before the run ended.  The series therefore keeps at
 * most TSERIES_MAX_TIMES sampling times and TSERIES_MAX_SAMPLES samples in
 * all: when it is full it doubles its interval and keeps every other
 * sampling time it holds (so what is stored is exactly what sampling at
 * the doubled interval from the start would have stored), and sampling
 * goes on at the doubled interval.  Memory is then O(limit) and the work
 * O(limit) per doubling, O(samples) in all.  The effective interval is
 * reported with the results (summary.json's timeseries.interval_s).
 *
 * Rejected: dropping samples past a limit (loses the end of the run);
 * streaming them to disk (the engine writes no files, and the files were
 * the other half of the problem); averaging pairs on coarsening (a queue
 * length averaged is no longer a length anyone observed).
 */
#ifndef SS_TSERIES_H
#define SS_TSERIES_H

#include <stdint.h>

#include "engine.h"

#define TSERIES_MAX_TIMES 100000      /* sampling times kept at most */
#define TSERIES_MAX_SAMPLES 1000000   /* samples (times x instances) kept at most, ~32 MB */

struct tseries {
	struct ts_sample *s;         /* n samples, in time order, n_inst per time */
	uint64_t n, cap;             /* samples held, allocated */
	uint32_t n_inst;             /* instances sampled at each time */
	uint64_t max_times;          /* sampling times held at most: even, >= 2 */
	int64_t interval_ns;         /* the interval sampling goes on at, ns */
	int64_t requested_ns;        /* the interval asked for, ns */
};

/* An empty series of n_inst instances sampled every interval_ns (> 0),
 * holding at most max_samples samples (and TSERIES_MAX_TIMES times);
 * max_samples 0 = TSERIES_MAX_SAMPLES. */
void tseries_init(struct tseries *ts, uint32_t n_inst, int64_t interval_ns, uint64_t max_samples);

/* Room for the n_inst samples of the next sampling time (the caller fills
 * them in, instance order), coarsening first when the series is full; NULL
 * when out of memory.  Sampling times must be interval_ns apart: read
 * interval_ns again after each call for the time of the next. */
struct ts_sample *tseries_append(struct tseries *ts);

void tseries_release(struct tseries *ts);

#endif
