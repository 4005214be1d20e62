/* servesim — writing a run's results.
 *
 * With --out DIR a run writes, in this order: requests.csv, results.db
 * (SQLite), plots (PNG through gnuplot, or .gp/.dat without it),
 * summary.txt, report.html (one self-contained page: html.h) and finally
 * summary.json.  Every file is written under a
 * temporary name in DIR and renamed into place once complete, so an
 * interrupted run never leaves a result that looks complete.
 */
#ifndef SS_REPORT_H
#define SS_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "metrics.h"

/* One choice of the serving stack (batch policy, order, ...), as the user
 * would give it on the command line. */
struct stack_item {
	const char *key;             /* summary.json key under "stack": "prefix_cache" */
	const char *label;           /* in summary.txt: "prefix cache" */
	const char *spec;            /* "sarathi:chunk=512", "fcfs", "none" */
	/* Where it came from: NULL = the command line; else what chose it,
	 * printed in parentheses ("default", "engine vllm's default"). */
	const char *from;
};

#define REPORT_STACK_MAX 14

/* What was run: the full configuration, for summaries and the runs table. */
struct run_info {
	const char *version;
	const char *mode;            /* "sim" (later "live") */
	uint64_t seed;
	const char *model, *gpu;
	int tp;
	uint32_t n_instances;
	const char *policy, *router, *cost_model;
	const char *workload;        /* trace path or generator description */
	/* The load: concurrency 0 = open loop (requests arrive at the
	 * workload's times); > 0 = a closed loop of that many clients
	 * (docs/workloads.md), each pausing think_time (its description,
	 * think_time_describe) between a request's end and its next. */
	uint32_t concurrency;
	const char *think_time;
	int64_t ramp_ns;             /* closed loop: the clients started over this long, ns */
	json_t *config;              /* (transfer none) every option, as given or defaulted */
	json_t *notes;               /* (transfer none) options that had no effect on this
				      * workload (cli_effect_notes), an array; NULL: none */
	const char *status;          /* NULL: the run completed; else why it stopped early */
	/* Live runs: the meter that measured energy ("RAPL package-0"), or why
	 * there was none; NULL in simulation (energy is modelled). */
	const char *energy_meter;
	bool energy_metered;         /* false: energy figures are absent, not zero */
	/* Disaggregated runs: "N prefill x TP GPU + M decode x TP GPU, pairing
	 * R"; NULL when colocated. */
	const char *pools;
	/* How long gnuplot may take over one plot, ns; 0 = REPORT_PLOT_TIMEOUT_NS.
	 * A gnuplot that runs longer is killed, and the run's other files are
	 * written all the same (plots are optional). */
	int64_t plot_timeout_ns;
	/* "weights fp8, KV fp8" (or "... in the model's dtype") when --weight-dtype or --kv-dtype was
	 * given (docs/cost-models.md, "Precision"); NULL: the model's own. */
	const char *precision;
	/* Expert parallelism / DP attention ("ep 8, dp-attention 8: 16
	 * attention ranks of 1 GPU"), or NULL: printed under the scenario. */
	const char *layout;
	/* How the KV cache was sized ("KV cache: 0.9 of the memory free after
	 * weights and activations (TensorRT-LLM's ..., engine trtllm), blocks
	 * of 32 tokens"), or NULL under vLLM's default rule: printed under the
	 * scenario. */
	const char *kv_rule;
	/* Pipeline stages per instance (--pp, docs/cost-models.md); 0 or 1:
	 * none, and nothing about it is printed. */
	int pp;
	/* The serving stack, in the order printed: "stack" in summary.json, a
	 * "stack:" line in the text.  n_stack 0: neither. */
	struct stack_item stack[REPORT_STACK_MAX];
	int n_stack;
	/* Live runs: the backend and its device ("cpu (CPU: ...)") and the
	 * model as run ("llama-3.2-1b scaled: ..."), named in the header;
	 * NULL in simulation. */
	const char *backend;
	const char *model_run;
	/* "SIGINT" or "SIGTERM": the run was stopped by that signal and the
	 * results are those so far (docs/servesim.1.md "SIGNALS"); NULL
	 * for a run that was not. */
	const char *interrupted;
	/* The command as typed ("servesim run --model ..."), shown in
	 * report.html's configuration; NULL: left out. */
	const char *command_line;
	/* A session workload's figures (analysis/sessions.h): "sessions" in
	 * summary.json and a few lines of text; NULL: no sessions, nothing. */
	const struct session_summary *sessions;
	/* Its calls (workload.sess, one per record, workload order): requests.csv
	 * adds session, turn, branch and cached_tokens columns; NULL: none. */
	const struct wl_call *session_calls;
};

/* Whether a run's energy figures are absent: a live run with no meter that
 * read (they are null in summary.json and left out of the text and plots). */
static inline bool run_info_unmetered(const struct run_info *ri)
{
	return ri->energy_meter && !ri->energy_metered;
}

#define REPORT_PLOT_TIMEOUT_NS (30 * (int64_t)1000000000)   /* 30 s */

/* What became of the PNGs.  Neither case is an error: the .gp and .dat
 * files are written and the other results are complete. */
struct plot_outcome {
	bool skipped;                /* gnuplot is not on PATH: no PNG */
	/* code != 0: rendering stopped at a plot (gnuplot ran past its time
	 * limit and was killed); msg says which and what is missing. */
	struct ss_error warning;
	/* The plots written (file stems: "ttft_cdf"), in order, whether or
	 * not their PNGs were rendered: report.html embeds these. */
	const char *names[4];
	int n_names;
};

/* The line a CLI prints about po for output directory dir, or NULL when
 * every PNG was rendered.  buf holds the text. */
const char *plot_outcome_warning(const struct plot_outcome *po, const char *dir, char *buf,
				 size_t len);

/* How summary.json is serialized: sorted keys and a fixed precision make
 * two runs with the same inputs byte-identical. */
#define REPORT_JSON_FLAGS (JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(10))

/* summary.json document: the fields of docs/outputs.md and docs/metrics.md;
 * NULL when out of memory.  Holds a reference to ri->config.  (transfer full) */
json_t *report_summary_json(const struct summary *s, const struct run_info *ri);
/* The requests of a workload longer than its context (workload.h), as
 * summary.json and plan.json state them: {context, requests, over, share,
 * prompt_over, max_excess_tokens, overlong (reject or truncate),
 * truncated, reachable_attainment}.  (transfer full) */
struct wl_context;
json_t *report_context_json(const struct wl_context *c);
/* The readable text summary. */
void report_summary_text(FILE *f, const struct summary *s, const struct run_info *ri);

/* Create dir (with its parents) and take its writer's lock
 * (ss_dir_lock: one run, sweep or plan writing a directory at a time):
 * the descriptor holding it (release with ss_dir_unlock), or a negative
 * errno with err set (-EBUSY: another writer has it). */
int report_lock_dir(const char *dir, struct ss_error *err);
/* Write everything into dir (created with its parents if missing).
 * *plots (may be NULL) says whether PNGs were rendered: gnuplot missing or
 * timed out is not an error (the .gp and .dat files are written).  A summary.json left by an earlier
 * run is removed first, so after a failure the directory never looks
 * complete; the error names the file and the call that failed. */
int report_write_dir(const char *dir, const struct summary *s, const struct run_info *ri,
		     const struct engine_results *r, struct plot_outcome *plots,
		     struct ss_error *err);

#endif
