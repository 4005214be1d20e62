/* servesim — comparing runs.  Two runs of the same trace (typically
 * simulated against live): per-request and percentile errors of TTFT, TPOT
 * and E2E, the ITL percentiles, and throughput, OTHER relative to REFERENCE.
 * N runs (struct cmp_set): their figures side by side, as differences from a
 * reference run or with their spread (docs/compare.md).
 */
#ifndef SS_COMPARE_H
#define SS_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "ss-error.h"

struct plot_outcome;   /* report.h */

/* One run, read back from its --out directory (results.db). */
struct run_data {
	char dir[1024];
	char mode[16];           /* "sim" or "live" */
	uint64_t n;              /* requests */
	int32_t *prompt, *output;/* per request, by id */
	bool *finished;
	double *ttft_ms, *tpot_ms, *e2e_ms;   /* NAN where undefined */
	json_t *summary;         /* the run's summary.json (owned) */
};

void run_data_init(struct run_data *rd);
void run_data_release(struct run_data *rd);
/* Read DIR/results.db.  Errors name the file and what was wrong. */
int run_data_load(struct run_data *rd, const char *dir, struct ss_error *err);
/* Read a measured serving benchmark result with per-request records
 * (traces/serving.h) as a run: its served requests in the order `run --trace
 * RESULT` numbers them (by send time, stable; file order without send
 * times), mode "measured", and a summary with the ITL percentiles and
 * throughput computed from it (compare-result.c). */
int run_data_load_result(struct run_data *rd, const char *path, struct ss_error *err);

enum { CMP_TTFT = 0, CMP_TPOT, CMP_E2E, CMP_ITL, CMP_N_METRICS };

struct cmp_metric {
	const char *name;        /* "ttft_ms"... */
	uint64_t n_matched;      /* requests defined in both runs (0 for ITL) */
	double mape_pct;         /* mean |other - ref| / ref over matched requests */
	double p50_ape_pct;      /* median per-request absolute % error */
	double p90_ape_pct;
	double ref[3], other[3]; /* p50, p90, p99 of each run, ms */
	double err_pct[3];       /* (other - ref) / ref of those percentiles, % */
};

struct cmp_result {
	uint64_t n_requests;
	struct cmp_metric m[CMP_N_METRICS];
	double ref_rps, other_rps, rps_err_pct;        /* requests/s */
	double ref_otps, other_otps, otps_err_pct;     /* output tokens/s */
};

/* Compare other against ref.  Error when the two runs are not of the same
 * trace (request count, or a request's prompt/output lengths differ). */
int compare_runs(const struct run_data *ref, const struct run_data *other,
		 struct cmp_result *out, struct ss_error *err);
void compare_print(FILE *f, const struct run_data *ref, const struct run_data *other,
		   const struct cmp_result *c);
/* (transfer full) */
json_t *compare_json(const struct run_data *ref, const struct run_data *other,
		     const struct cmp_result *c);

/* ---- N runs (compare-many.c) ----------------------------------------------
 * The same figures of each run side by side: TTFT, TPOT, ITL and E2E
 * percentiles, throughput, SLO attainment and goodput.  With a reference
 * run, every other run as a difference from it (and the per-request errors
 * of compare_runs(), so all runs must replay the reference's trace); without
 * one, the spread of each figure (max/min) and the best run. */
#define CMP_SET_ROWS 16

struct cmp_set {
	int n;                          /* runs, >= 2 */
	const struct run_data *runs;    /* [n], the caller's */
	const char *const *names;       /* [n], the caller's, distinct */
	int ref;                        /* index of the reference, -1 for none */
	bool same_slo;                  /* every run's summary has the same "slo" */
	double (*v)[CMP_SET_ROWS];      /* [n][row]: each run's figures, NAN if absent */
	struct cmp_result *pair;        /* [n], against the reference (when ref >= 0) */
};

/* Error when ref >= 0 and a run is not of the reference's trace. */
int cmp_set_build(struct cmp_set *s, int n, const struct run_data *runs,
		  const char *const *names, int ref, struct ss_error *err);
void cmp_set_release(struct cmp_set *s);
void cmp_set_print(FILE *f, const struct cmp_set *s);
/* (transfer full) Two runs with a reference: compare_json()'s object with
 * "runs" and "same_slo" added; otherwise {runs, reference, same_slo, spread}
 * (docs/compare.md). */
json_t *cmp_set_json(const struct cmp_set *s);
/* CDFs of TTFT, TPOT and E2E of all runs, log x axis, p50/p90/p99 marked,
 * into dir (compare_{ttft,tpot,e2e}_cdf: .dat, .gp, and .png through gnuplot
 * when installed; *plots says whether the PNGs were rendered). */
int cmp_set_plots(const char *dir, const struct cmp_set *s, struct plot_outcome *plots,
		  struct ss_error *err);
/* dir/report.html: the runs, the table, the per-request errors against the
 * reference, the CDFs cmp_set_plots() rendered (plots says whether it did),
 * command_line (may be NULL), the runs' scenarios and stacks, and the
 * comparison as printed; written atomically. */
int cmp_set_html(const char *dir, const struct cmp_set *s, const struct plot_outcome *plots,
		 const char *command_line, struct ss_error *err);

#endif
