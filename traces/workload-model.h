/* servesim — workload models fitted to traces (docs/workloads.md, "Workload
 * models").
 *
 * A workload model is a small, physical summary of a trace that can be
 * written as JSON (`servesim workload fit`), read back, and generated from
 * (`servesim run --workload MODEL.json`) at another rate or with longer or
 * shorter requests:
 *   - arrivals: the mean rate, the burstiness of the gaps (their coefficient
 *     of variation), the index of dispersion of counts (IDC) measured at
 *     windows of 1 s to 1 h, a process that reproduces them -- a gamma
 *     renewal process of that cv, or a two-state Markov-modulated Poisson
 *     process fitted to the IDC curve, whichever reproduces the measured
 *     IDC and cv better (the --arrival gamma and mmpp generators) -- and an
 *     hourly rate curve when the trace spans at least WLM_CURVE_MIN_S;
 *   - lengths: empirical quantiles of prompt and output tokens on a fixed
 *     probability grid, joined by a Gaussian copula with the trace's rank
 *     (Spearman) correlation;
 *   - prefix sharing (traces with prefix block hashes), measured only;
 *   - provenance: source file, format, requests, duration.
 */
#ifndef SS_WORKLOAD_MODEL_H
#define SS_WORKLOAD_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ss-error.h"
#include "workload.h"

/* "servesim_workload_model": the version this code writes and reads. */
#define WLM_VERSION 1

/* A trace spanning at least this long (s) gets a rate curve of
 * WLM_CURVE_BIN_S bins: two hours, so a curve has at least two points. */
#define WLM_CURVE_MIN_S 7200.0
#define WLM_CURVE_BIN_S 3600.0

/* Most IDC windows and rate-curve bins a model may hold (a year of hours). */
#define WLM_IDC_MAX 12
#define WLM_CURVE_MAX 8784

/* Batches (struct wlmodel): the share of requests sharing an earlier
 * one's arrival time from which a model has them, and most sizes kept. */
#define WLM_BATCH_MIN_SHARE 0.05
#define WLM_BATCH_SIZES_MAX 4096

/* The largest Zipf exponent an adapter-popularity fit reports. */
#define WLM_ZIPF_MAX 8.0

/* Most quantile points: the grid written is WLM_QUANTILES points. */
#define WLM_QUANTILES_MAX 1024

/* A fitted model.  Arrays are owned (wlmodel_release frees them). */
struct wlmodel {
	/* provenance */
	char source[256];        /* trace file name (its base name) */
	char format[32];         /* trace format name */
	uint64_t requests;       /* requests in the trace, >= 2 */
	double duration_s;       /* first to last arrival, s, > 0 */
	/* arrivals */
	double rate_rps;         /* (requests - 1) / duration_s, req/s */
	double gap_cv;           /* coefficient of variation of the gaps between
				  * arrivals (after removing the rate curve, when
				  * there is one); the generator's gamma cv */
	size_t n_idc;            /* measured index of dispersion of counts */
	double idc_window_s[WLM_IDC_MAX];  /* window, s */
	double idc[WLM_IDC_MAX];           /* variance / mean of counts per window */
	enum wlm_process {
		WLM_GAMMA,       /* gamma renewal: rate_rps, gap_cv */
		WLM_MMPP,        /* two-state MMPP: mmpp_rps, mmpp_switch_s */
	} process;
	double mmpp_rps[2];      /* MMPP: Poisson rate in each state, req/s (>= 0);
				  * stationary mean = rate_rps */
	double mmpp_switch_s[2]; /* MMPP: mean time in each state, s (> 0) */
	/* Batches: requests that share an arrival time (a trace whose clock
	 * ticks coarsely, as Mooncake's 3-s one).  When at least
	 * WLM_BATCH_MIN_SHARE of the requests share their time with an earlier
	 * one, the process above (gap_cv, mmpp_rps, the IDC it is fitted to)
	 * times *batches* -- distinct arrival times, at rate_rps / batch_mean
	 * -- and each batch holds batch_size[k] requests with probability
	 * batch_prob[k].  n_batch = 0: every request on its own. */
	size_t n_batch;
	double *batch_size;      /* distinct sizes, increasing, >= 1 */
	double *batch_prob;      /* their probabilities (sum 1) */
	double batch_mean;       /* mean size, >= 1 (1 when n_batch = 0) */
	double fit_error[2];     /* the misfit of the gamma's and the MMPP's
				  * generated IDC and cv against the trace's (a
				  * weighted sum of squared log errors; lower is
				  * better); 0 = not tried.  Informative
				  * (source.fit in the JSON) */
	size_t n_curve;          /* rate-curve bins, 0 = none (a stationary rate) */
	double curve_bin_s;      /* bin width, s (the last bin may be shorter) */
	double *curve_rps;       /* n_curve mean rates, req/s */
	/* lengths */
	size_t n_q;              /* quantile points, >= 2 */
	double *q_p;             /* probabilities, 0 = q_p[0] < ... < q_p[n_q-1] = 1 */
	double *q_prompt;        /* prompt tokens at each probability, non-decreasing, >= 1 */
	double *q_output;        /* output tokens at each probability, non-decreasing, >= 1 */
	double spearman;         /* rank correlation of prompt and output tokens, [-1, 1] */
	/* prefix sharing (measured; not generated) */
	bool has_prefix;
	uint32_t prefix_block_tokens;   /* tokens a prefix hash block covers */
	double prefix_reused_share;     /* share of prompt blocks (of those with
					 * hashes) whose leading-hash chain was
					 * seen in an earlier request, [0, 1] */
	/* Multi-LoRA adapters (a trace's adapter column; measured, not
	 * generated: `run --lora adapters=N,popularity=zipf:S` takes them) */
	bool has_adapters;
	uint32_t adapters;              /* distinct adapters the trace names, >= 1 */
	double adapter_base_share;      /* share of requests naming none, [0, 1) */
	double adapter_top_share;       /* of those naming one, the most popular's share, (0, 1] */
	double adapter_zipf_s;          /* Zipf exponent of the adapters' popularity by
					 * rank, maximum likelihood over [0, WLM_ZIPF_MAX] */	/* Sessions (a session trace, wl->sess): then the arrivals above time
	 * session starts (requests = sessions, rate_rps sessions/s) and the
	 * lengths are those of each session's first call; the rest of a
	 * session is drawn from here.  Arrays on the length grid q_p (n_q
	 * points) or of n_turns / n_fanout values; all NULL when
	 * !has_sessions. */
	bool has_sessions;
	uint64_t calls;          /* calls in the trace, > requests */
	size_t n_turns;          /* distinct turn counts (steps a session) */
	double *turns_v;         /* turn counts, increasing whole numbers >= 1 */
	double *turns_p;         /* their probabilities (sum 1) */
	double turns_mean;       /* mean steps a session */
	size_t n_fanout;         /* distinct fan-outs of steps after the first */
	double *fanout_v;        /* calls a later step, increasing whole numbers >= 1 */
	double *fanout_p;        /* their probabilities (sum 1) */
	double *q_think_s;       /* think time before a later step, s (as the
				  * reader derived it), non-decreasing, >= 0 */
	double *q_new;           /* new tokens of a later call, >= 1 */
	double *q_out_later;     /* output tokens of a later call, >= 1 */
	double spearman_later;   /* rank correlation of a later call's new and
				  * output tokens, [-1, 1] (Gaussian copula) */
};

/* Most distinct turn counts or fan-outs a sessions model may hold. */
#define WLM_SESS_VALUES_MAX 100000

void wlmodel_init(struct wlmodel *m);
void wlmodel_release(struct wlmodel *m);

/* Fit m (initialized) to wl, whose source/format name the provenance.
 * wl needs arrival times and at least 2 requests over a time span > 0:
 * -EINVAL with err naming wl->source otherwise.  A session workload
 * (wl->sess) is fitted as sessions: the arrivals and lengths of its
 * session starts and first calls (at least 2 sessions over a span), and
 * the session fields of m (has_sessions, unless no session has a second
 * step). */
int wlmodel_fit(struct wlmodel *m, const struct workload *wl, struct ss_error *err);

/* The model as a JSON text (transfer full: free() it), NULL when out of
 * memory.  Keys are in a fixed order, numbers to 15 significant digits. */
char *wlmodel_to_json(const struct wlmodel *m);

/* Read path into m (initialized and empty): every field is checked; an
 * error names path, the JSON field (as "arrivals.gap_cv") and what was
 * expected, and leaves m empty.  -EINVAL for bad content, -errno when the
 * file cannot be read. */
int wlmodel_read(struct wlmodel *m, const char *path, struct ss_error *err);

/* Build wl from a model (spec->model names it) as workload_build does
 * (traces/workload-model-gen.c): spec->num_requests (default: the model's
 * requests), spec->duration_ns, spec->rate_scale or spec->target_rate
 * (the mean rate, req/s), spec->prompt_scale and spec->output_scale
 * (multiply the sampled lengths), spec->seed, spec->tenants.  A sessions
 * model (m->has_sessions) draws session starts and first calls so (the
 * counts and rates are of sessions), then the rest of each session through
 * sessions_generate_from (traces/sessions.c); tenants are refused. */
int wlmodel_build(struct workload *wl, const struct wlmodel *m,
		  const struct workload_spec *spec, struct ss_error *err);
/* workload_build() of a spec naming a model: read spec->model, then
 * wlmodel_build(). */
int wlmodel_build_spec(struct workload *wl, const struct workload_spec *spec,
		       struct ss_error *err);

/* Index of dispersion of counts of wl's arrivals in windows of window_s
 * seconds over the whole windows of [0, last arrival): variance / mean of
 * the counts; 0 when fewer than WLM_IDC_MIN_WINDOWS windows fit. */
#define WLM_IDC_MIN_WINDOWS 10
double wlmodel_idc(const struct workload *wl, double window_s);

/* The rows (time s, rate req/s) of m's rate curve (m->n_curve > 0) as the
 * generator follows it (traces/rate-curve.c's representation, linear
 * between rows): each bin's rate held over the bin, a row at its start and
 * one WLM_CURVE_STEP_S before its end (the last bin's at duration_s), so
 * the curve steps between bins within 1 ms and expects each bin's count.
 * t and r hold 2 m->n_curve entries. */
#define WLM_CURVE_STEP_S 1e-3
void wlmodel_curve_rows(const struct wlmodel *m, double *t, double *r);

#endif
