/* servesim — fitting an engine profile to measured serving runs
 * (`servesim calibrate fit-engine`, docs/engines.md).
 *
 * Each measured run is re-simulated exactly (its configuration and
 * workload, the profile being fitted in place of the engine's) and the
 * profile's free parameters are moved, by GSL's nonlinear least squares
 * (trust-region Levenberg-Marquardt), to bring the simulated figures to the
 * measured ones.  Residuals are log(simulated / measured), so a run of
 * 50 ms and one of 5 s weigh the same, and a Cauchy loss (iteratively
 * reweighted, scale 10%) keeps one odd run from pulling the fit.  Free
 * parameters move in log space within their bounds, so they stay
 * positive.  Confidence intervals come from the Jacobian at the optimum
 * scaled by the residual variance; leave-one-group-out errors from
 * refitting without each group of runs (a model, a GPU, a TP degree, a
 * file) and predicting it.
 */
#ifndef SS_ENGINE_FIT_H
#define SS_ENGINE_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "engine-profile.h"
#include "ss-error.h"

/* The figures a measured run can be judged by; their names and where a
 * summary holds them are one table (engine-fit.c's metrics[]). */
enum efit_metric {
	EFIT_TTFT_MEAN = 0, EFIT_TTFT_P50, EFIT_TTFT_P90, EFIT_TTFT_P95, EFIT_TTFT_P99,
	EFIT_TPOT_MEAN, EFIT_TPOT_P50, EFIT_TPOT_P95, EFIT_TPOT_P99,
	EFIT_ITL_MEAN, EFIT_ITL_P50, EFIT_ITL_P99,
	EFIT_E2E_MEAN, EFIT_E2E_P50, EFIT_E2E_P95,
	EFIT_OUTPUT_TPS,             /* output tokens/s over the run */
	EFIT_METRIC_COUNT
};
/* "ttft_p50", ... (output_tps in tokens/s, the rest in ms) */
const char *efit_metric_name(enum efit_metric m);

#define EFIT_MAX_TARGETS 12
#define EFIT_MAX_PARAMS 8
/* Serving stacks a fit may fit terms of (one per deployment, efit_obs's
 * ec.stack), and so the values a fit may have: each free engine key is
 * one, each free stack term one per stack. */
#define EFIT_MAX_STACKS 32
#define EFIT_MAX_VALUES (EFIT_MAX_PARAMS * (1 + EFIT_MAX_STACKS))
/* Threads an evaluation may use (efit_fit's jobs): each simulates a share
 * of the runs; the results do not depend on how many. */
#define EFIT_MAX_JOBS 64

struct efit_target {
	enum efit_metric metric;
	double value;                /* measured: ms, or tokens/s for EFIT_OUTPUT_TPS; > 0 */
	/* Reported beside the fit (measured, predicted, error) but not in its
	 * objective: efit_fit's residuals, training MAPE and RMS leave it out.
	 * The figures a source gives beyond those its fits were made on. */
	bool report;
};

/* One measured run. */
struct efit_obs {
	const char *name;            /* for reports: "splitwise llama2-70b tp8 b1 p512" */
	const char *group;           /* leave-out unit; runs with equal groups go together */
	/* What a reader of the report must know about the run's figures
	 * ("burst: TTFT is queueing"), or NULL.  (transfer none) */
	const char *note;
	/* The engine the run measured, as its result names it ("vllm",
	 * "sglang"; "" unknown): runs of two engines are never repeats of one
	 * configuration (efit_obs_merge_repeats).  (transfer none) */
	const char *engine;
	/* How the measured server was launched where the result says
	 * (GPUStack's serve_cmd), NULL otherwise: two launches are never
	 * repeats, as flags servesim does not model (an attention backend,
	 * a CUDA-graph limit) may still move the figures.  (transfer none) */
	const char *launch;
	/* The run as configured; its engine is replaced.  Its stack is the
	 * deployment's: runs whose ec.stack is the same pointer share the
	 * stack's fitted terms (one source, `fit-engine --sources`), runs of
	 * two pointers each have their own. */
	struct engine_config ec;
	/* The stack is measured, not fitted (engine-side clocks: no serving
	 * stack in the figures): its terms stay as given when stack terms are
	 * free. */
	bool stack_known;
	const struct workload *wl;   /* (transfer none) */
	struct efit_target targets[EFIT_MAX_TARGETS];
	int n_targets;
	int repeats;                 /* measured runs it stands for (medians), 0 or 1: one */
	/* Requests at the start of the workload (a benchmark's warm-up)
	 * left out of the mean TTFT, TPOT and E2E; the other metrics are
	 * the whole run's.  0 = none. */
	uint32_t warmup;
	/* Closed loop (ec.concurrency > 0): the clients are out of phase,
	 * starting evenly over one request's duration (the mean E2E of one
	 * round of all clients from idle, simulated first), not all at 0. */
	bool spread;
	/* With spread, R > 0: the measured phase is R rounds that start on an
	 * idle engine (a benchmark whose warm-up drains before it measures:
	 * perf_analyzer's), its first round all clients at once and the other
	 * R - 1 out of phase.  The mean TTFT, TPOT and E2E are then (the first
	 * round's + (R - 1) x the out-of-phase window's) / R, the first
	 * round's being that of the round spread simulates anyway.  0 = off. */
	int drained;
};

/* A free parameter: a numeric key of the profile (engines.json's name)
 * or of the runs' serving stack (stacks.json's: frontend_ms, ...) and its
 * bounds, 0 < lo <= hi. */
struct efit_param {
	const char *key;
	double lo, hi;
};

struct efit_result {
	struct engine_profile profile;     /* start with the free engine keys fitted */
	/* The runs' serving stacks with their free terms fitted, one per
	 * distinct ec.stack of the runs whose stack is not known (an empty one
	 * named "fitted" for runs without a stack), in order of first
	 * appearance; stack_of[s] is the runs' pointer stacks[s] was fitted
	 * for.  has_stack: some free key was a stack term; stack = stacks[0]
	 * (the one stack of a single deployment). */
	struct stack_profile stack;
	bool has_stack;
	int n_stacks;
	struct stack_profile stacks[EFIT_MAX_STACKS];
	const struct stack_profile *stack_of[EFIT_MAX_STACKS];
	/* The fitted values: a free engine key once (stack_index -1), a free
	 * stack term once per stack (stack_index s), in the order of the
	 * free keys; with one stack, value[j] is free key j's. */
	int n_params;
	const char *key[EFIT_MAX_VALUES];
	int stack_index[EFIT_MAX_VALUES];
	double value[EFIT_MAX_VALUES];     /* fitted, in the parameter's unit */
	double ci_lo[EFIT_MAX_VALUES], ci_hi[EFIT_MAX_VALUES];  /* 95% interval */
	/* Identifiability, from the Jacobian at the optimum: flat, no fitted
	 * figure moves with the value (it stays where it started), or too
	 * little to tell it (a standard error above EFIT_LOG_SD_MAX in log
	 * space: its 95% interval spans more than a factor of 90 each way);
	 * confounded, the index of another value whose estimate it cannot
	 * be told from (|correlation| >= EFIT_CONFOUNDED), else -1. */
	bool flat[EFIT_MAX_VALUES];
	int confounded[EFIT_MAX_VALUES];
	double correlation[EFIT_MAX_VALUES];
	double rms_log;                    /* training RMS of log(sim / measured), fitted targets */
	double mape;                       /* training mean |sim / measured - 1|, fitted targets */
	int iterations;
	int evaluations;                   /* simulations of the whole set */
};

/* |correlation| of two fitted values at or above which they are reported
 * as not separable by the runs given. */
#define EFIT_CONFOUNDED 0.98
/* Standard error of a fitted value's log above which the runs do not
 * determine it (ln 10: one standard error is a factor of 10). */
#define EFIT_LOG_SD_MAX 2.302585

/* Fit free[0..n_free) of start to obs, simulating the runs of each
 * evaluation on jobs threads (1 = this thread only; at most EFIT_MAX_JOBS;
 * the runs are independent simulations, so the result is bit for bit the
 * same for every jobs).  0, or -EINVAL (a bad key or bound, no targets),
 * -ERANGE or -ECANCELED (a simulation failed; efit_predict), -ENOMEM. */
int efit_fit(const struct engine_profile *start, const struct efit_param *free, int n_free,
	     const struct efit_obs *obs, size_t n_obs, int jobs, struct efit_result *out,
	     struct ss_error *err);

/* Simulate o under profile p: sim[k] for each of o's targets.  -ECANCELED
 * (err: how many requests and why) when the run leaves requests that
 * never complete, e.g. rejected as unschedulable: a preempted request's
 * re-prefill above max_num_batched_tokens with chunked prefill off. */
int efit_predict(const struct engine_profile *p, const struct efit_obs *o, double *sim,
		 struct ss_error *err);

/* Simulate o under a fit's result: its profile, and o's stack with the
 * terms fitted for it; a run whose stack the fit did not see (a held-out
 * deployment) keeps the stack it was given, its deployment's prior (the
 * terms fitted to other deployments absorb what each one's client and
 * harness add, and do not carry over: docs/engines.md); a known stack
 * stays. */
int efit_predict_fitted(const struct efit_result *res, const struct efit_obs *o, double *sim,
			struct ss_error *err);

/* Leave one group out: for every group, fit on the other runs and predict
 * that group's (efit_predict_fitted: a group within a deployment with its
 * deployment's fitted stack, a whole deployment held out behind the stack
 * it was given).  pred[i * EFIT_MAX_TARGETS + k] is run i's target k as
 * predicted without i's group (n_obs x EFIT_MAX_TARGETS doubles). */
int efit_leave_group_out(const struct engine_profile *start, const struct efit_param *free,
			 int n_free, const struct efit_obs *obs, size_t n_obs, int jobs, double *pred,
			 struct ss_error *err);

#endif
