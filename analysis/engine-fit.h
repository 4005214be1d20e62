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
	struct engine_config ec;     /* the run as configured; its engine is replaced */
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
	struct engine_profile profile;     /* start with the free parameters fitted */
	/* The runs' serving stack (the first run's ec.stack, or an empty one
	 * named "fitted" where none was given) with its free terms fitted;
	 * has_stack: some free parameter was a stack term. */
	struct stack_profile stack;
	bool has_stack;
	int n_params;
	double value[EFIT_MAX_PARAMS];     /* fitted, in the parameter's unit */
	double ci_lo[EFIT_MAX_PARAMS], ci_hi[EFIT_MAX_PARAMS];  /* 95% interval */
	double rms_log;                    /* training RMS of log(sim / measured), fitted targets */
	double mape;                       /* training mean |sim / measured - 1|, fitted targets */
	int iterations;
	int evaluations;                   /* simulations of the whole set */
};

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

/* Leave one group out: for every group, fit on the other runs and predict
 * that group's.  pred[i * EFIT_MAX_TARGETS + k] is run i's target k as
 * predicted without i's group (n_obs x EFIT_MAX_TARGETS doubles). */
int efit_leave_group_out(const struct engine_profile *start, const struct efit_param *free,
			 int n_free, const struct efit_obs *obs, size_t n_obs, int jobs, double *pred,
			 struct ss_error *err);

#endif
