/* servesim — sweeps: a grid of run configurations, each run over several
 * seeds, summarised by the mean and a 95% confidence interval per grid
 * point (docs/sweep.md).
 *
 * The command (cli/cmd-sweep.c) turns each (point, seed) into a `servesim
 * run` and runs it; this module holds what is not command-line work: the
 * grid axes (lists and ranges), the metrics kept of each run (taken from
 * the run's struct summary, analysis/metrics.h: nothing is recomputed), the
 * aggregation over seeds (Student t interval), the CSV and JSON of the
 * aggregates, and the sweep database (sweep-db.c), the sweep's journal.
 */
#ifndef SS_SWEEP_GRID_H
#define SS_SWEEP_GRID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "metrics.h"
#include "ss-error.h"

/* Values one axis may take, and axes one sweep may have. */
#define SWEEP_MAX_VALUES 10000
#define SWEEP_MAX_AXES 16
/* Runs (points x seeds) one sweep may hold. */
#define SWEEP_MAX_RUNS 1000000

/* One axis of the grid: a run option and the values it takes. */
struct sweep_axis {
	char key[64];                /* the run option's long name, "rate-scale" */
	char **values;               /* n values, as given (lists) or printed %.12g (ranges) */
	size_t n;
};

/* Parse "KEY=V1,V2,..." (or "KEY=V1;V2;..." when a value holds commas, as
 * policy parameters do) or "KEY=START:STOP:STEP" (every START + i STEP up
 * to STOP inclusive; the count is floor((STOP - START) / STEP + 1e-9) + 1,
 * so 1:4:0.5 gives 7 values despite binary fractions).  The key is checked
 * by the caller.  -EINVAL with err "--sweep: ..." for a bad spec. */
int sweep_axis_parse(struct sweep_axis *ax, const char *spec, struct ss_error *err);
void sweep_axis_release(struct sweep_axis *ax);

/* The metrics kept of each run, in the order of the CSV's columns: the
 * metric catalog (analysis/metrics.def), SWM_ID = METRIC_ID; then the two
 * ends of each DIST entry's interval (docs/metrics.md "Intervals"),
 * SWM_ID_LO and SWM_ID_HI, named NAME_lo and NAME_hi ("ttft_p99_ms_lo"),
 * NaN for a run without one. */
enum sweep_metric {
#define DIST(ID, ...) SWM_##ID = METRIC_##ID,
#define VALUE(ID, ...) SWM_##ID = METRIC_##ID,
#include "metrics.def"
#undef DIST
#undef VALUE
	SWM_CATALOG = METRIC_COUNT,
	SWM_INTERVALS_START = SWM_CATALOG - 1,   /* so that the first _LO is SWM_CATALOG */
#define DIST(ID, ...) SWM_##ID##_LO, SWM_##ID##_HI,
#define VALUE(...)
#include "metrics.def"
#undef DIST
#undef VALUE
	SWM_COUNT
};

/* The column name of metric m ("ttft_p99_ms"). */
const char *sweep_metric_name(enum sweep_metric m);

/* The metrics of one run, from its summary (summary_compute()): each
 * catalog entry's get().  NaN where a run has none: TPOT/ITL without a
 * request of two tokens, energy per token where nothing was metered or
 * modelled (energy 0). */
void sweep_values_from_summary(const struct summary *s, double v[SWM_COUNT]);

/* One metric over the seeds of a point. */
struct sweep_stat {
	uint32_t n;                  /* runs */
	double mean;                 /* NaN when a run has no value */
	double ci95;                 /* half-width of the 95% Student t interval of the
				      * mean, t(0.975, n-1) s / sqrt(n); NaN for n < 2 */
};

/* Mean and 95% interval of x[0..n) (gsl_stats_mean, gsl_stats_sd,
 * gsl_cdf_tdist_Pinv).  Any NaN makes both NaN. */
void sweep_aggregate(const double *x, size_t n, struct sweep_stat *out);

/* A sweep's results: the grid, the seeds and every run's metrics. */
struct sweep_table {
	const struct sweep_axis *axes;
	size_t n_axes;
	size_t n_points;             /* the product of the axes' sizes */
	int64_t seed0;               /* seeds seed0 .. seed0 + n_seeds - 1 */
	uint32_t n_seeds;
	/* n_points x n_seeds x SWM_COUNT, point-major: run r = point x n_seeds
	 * + k (seed seed0 + k) */
	const double *values;
	const bool *done;            /* n_points x n_seeds: the run finished */
};

/* The value index of axis a at point p (the last axis varies fastest). */
size_t sweep_point_value(const struct sweep_table *t, size_t p, size_t a);
/* The aggregates of point p over its finished runs; returns their count. */
uint32_t sweep_point_stats(const struct sweep_table *t, size_t p, struct sweep_stat st[SWM_COUNT]);

/* sweep.csv: a header, then one row per point with a finished run: the
 * swept keys, seeds, and NAME_mean, NAME_ci95 for every metric (empty for
 * NaN; %.10g).  Returns 0 or a negative errno. */
int sweep_write_csv(FILE *f, const struct sweep_table *t);

/* Create dir (and its parents) for a sweep's outputs. */
int sweep_prepare_dir(const char *dir, struct ss_error *err);
/* dir/sweep.csv, written atomically (a temporary name renamed into place);
 * remove it with done false (an unfinished sweep leaves no CSV that
 * looks complete). */
int sweep_write_dir_csv(const char *dir, const struct sweep_table *t, bool done,
			struct ss_error *err);

/* The aggregates as JSON (transfer full), NULL when out of memory. */
json_t *sweep_json(const struct sweep_table *t, const char *version, const char *description);

/* ---- the database (sweep-db.c; schema in docs/sweep.md) ------------------ */

struct sweep_db;

/* Open or create path, a sweep database for the sweep described by
 * description (the base options and the grid, cli/cmd-sweep.c): a database
 * of another description is refused with -ESTALE, err naming both.  */
int sweep_db_open(struct sweep_db **out, const char *path, const struct sweep_table *t,
		  const char *description, struct ss_error *err);
void sweep_db_close(struct sweep_db *d);
/* Load the finished runs of t's seeds into values[] and done[] (the table's
 * arrays, writable) and count them. */
int sweep_db_load(struct sweep_db *d, const struct sweep_table *t, double *values, bool *done,
		  size_t *n_done, struct ss_error *err);
/* Commit one run (its own transaction). */
int sweep_db_store(struct sweep_db *d, const struct sweep_table *t, size_t point, int64_t seed,
		   const double v[SWM_COUNT], double wall_s, struct ss_error *err);
/* Replace the aggregates table with t's aggregates (one transaction). */
int sweep_db_aggregate(struct sweep_db *d, const struct sweep_table *t, struct ss_error *err);

#endif
