/* servesim — the writers report_write_dir() calls, one per output. */
#ifndef SS_REPORT_INT_H
#define SS_REPORT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "report.h"

/* results.db: runs, requests, timeseries and summary tables (docs/outputs.md).
 * summary_json is the text stored in summary.json. */
int results_db_write(const char *dir, const struct run_info *ri,
		     const struct engine_results *r, const char *summary_json,
		     struct ss_error *err);

/* ttft_cdf, tpot_cdf and timeseries: .dat and .gp files, and PNGs when
 * gnuplot is on PATH (see plots_render()).  metered false: no power panel
 * (nothing measured it; its .dat columns are NaN). */
int plots_write(const char *dir, const struct engine_results *r, bool metered, int64_t timeout_ns,
		struct plot_outcome *po, struct ss_error *err);

/* What a run's plots name and mark: a line naming the scenario (under each
 * title; NULL: none) and the TTFT and TPOT SLOs, ms, drawn on their CDFs
 * (0: none). */
struct plot_scenario {
	const char *line;
	double ttft_slo_ms, tpot_slo_ms;
};
/* plots_write with a scenario (sc may be NULL: plots_write's plots). */
int plots_write_scenario(const char *dir, const struct engine_results *r, bool metered,
			 const struct plot_scenario *sc, int64_t timeout_ns, struct plot_outcome *po,
			 struct ss_error *err);

/* The opening lines of every gnuplot script: arguments and a PNG terminal
 * of 900 x height pixels. */
void plots_gp_prologue(FILE *f, const char *name, const char *what, int height);

/* Text that is not ours (file names, catalog names, policy specs) in a
 * gnuplot script: always a single-quoted string, where gnuplot expands
 * neither backslashes nor backquotes, with ' doubled and control
 * characters and backquotes written as '?' (a newline would end the
 * command).  Never put such text inside a double-quoted gnuplot string:
 * there a backquote runs a shell command. */
void plots_gp_string(FILE *f, const char *s);

/* Text that is not ours in a .dat file's comment or quoted label: control
 * characters, '"' and '`' written as '?', so it can neither end the line
 * nor the label. */
void plots_dat_text(FILE *f, const char *s);

/* Run dir/NAME.gp for each name, producing dir/NAME.png (through a
 * temporary file); po->skipped when gnuplot is not on PATH.  A gnuplot that
 * runs past timeout_ns (0 = REPORT_PLOT_TIMEOUT_NS) is killed (with its
 * process group), po->warning says so and the remaining plots are not
 * rendered; that is not an error.  A gnuplot that fails is. */
int plots_render(const char *dir, const char *const *names, int n, int64_t timeout_ns,
		 struct plot_outcome *po, struct ss_error *err);

/* The latency table of summary.txt and report.html: its rows, in order, a
 * name and the distribution of struct summary at byte offset dist. */
struct report_latency_row {
	const char *name;            /* "TTFT" */
	size_t dist;                 /* offsetof(struct summary, ttft_ms) */
};
#define REPORT_LATENCY_ROWS 5
extern const struct report_latency_row report_latency_rows[REPORT_LATENCY_ROWS];

/* Metric id of s as the metric catalog formats it (scale x value, its
 * decimals), in buf; returns buf.  summary.txt and report.html print the
 * catalog's figures with it. */
char *report_metric_text(char *buf, size_t size, const struct summary *s, enum metric_id id);

/* summary.txt's last line: "other figures: LABEL VALUE; ...", every entry
 * of the metric catalog whose bit in shown (1 << enum metric_id) is clear,
 * as the catalog formats it; nothing when every bit is set (every figure
 * had its place in the text above it). */
void report_text_other_figures(FILE *f, const struct summary *s, uint64_t shown);

/* What priced the run's steps, truthfully, into buf (len bytes; returns
 * buf): the cost model's name when every operator with busy time came from
 * it ("table"); "scaled (h100-sxm's tables x the roofline)" for a scaled
 * model; otherwise the name followed by the other backends, their
 * operators and their share of the busy time, e.g. "table; roofline for
 * gemm, elementwise (77.1% of busy time)" -- an MoE run whose GEMMs are
 * the roofline's never reads as "table" alone.  summary.txt's and
 * report.html's "cost model". */
char *report_cost_label(char *buf, size_t len, const struct summary *s, const struct run_info *ri);

/* report.html (report-html.c, html.h): the summary's tables, the PNGs of
 * po->names embedded (or why there are none), the configuration and the
 * text summary, written atomically into dir. */
int report_html_write(const char *dir, const struct summary *s, const struct run_info *ri,
		      const struct plot_outcome *po, struct ss_error *err);

#endif
