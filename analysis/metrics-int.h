/* servesim — analysis/ internals shared by metrics.c, report.c and plots.c. */
#ifndef SS_METRICS_INT_H
#define SS_METRICS_INT_H

#include <stdint.h>

#include "metrics.h"

/* Per-request metrics that summary_compute() and the plots collect. */
enum req_metric {
	REQ_METRIC_TTFT = 0,
	REQ_METRIC_TPOT,
	REQ_METRIC_E2E,
	REQ_METRIC_QUEUE,
};

/* Store the value (ms) of metric m of every finished request for which it
 * is defined into out[], in workload order, and return how many were
 * stored; out must have room for one value per finished request. */
uint64_t metrics_collect(const struct engine_results *r, enum req_metric m, double *out);

/* Sort v[0..n) ascending (NaN-free). */
void metrics_sort(double *v, uint64_t n);

/* The distribution of v[0..n) (NaN-free): count, mean (v summed in
 * order), nearest-rank-interpolated p50/p90/p95/p99 (ss_quantile_sorted)
 * and max.  v is reordered.  metrics_dist selects the ranks it reads
 * (expected O(n), in place); metrics_dist_sorted sorts v first (O(n log n),
 * two scratch arrays): the same figures, bit for bit (test-metrics). */
void metrics_dist(struct dist *d, double *v, uint64_t n);
void metrics_dist_sorted(struct dist *d, double *v, uint64_t n);

/* Name of a request state as written to requests.csv and results.db. */
const char *metrics_state_name(enum req_state st);

#endif
