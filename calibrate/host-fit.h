/* servesim — host terms of a step from whole-step measurements.
 *
 * `servesim calibrate run` times whole synthetic steps (decode batches,
 * prefill chunks, and the two mixed) besides single operators.  A whole
 * step takes longer than the sum of its operators timed one by one: in the
 * sweep an operator runs again and again on the same data, with its
 * weights and activations already in the core's caches, while inside a
 * step each operator finds them evicted by the operators before it (the
 * weights of a layer were last read one step earlier, the activations
 * were written by the previous kernel), and the step also prepares its
 * metadata and samples its emitted rows, which no operator row prices.
 * What the simulator must add to its operators is therefore the residual
 *
 *   r = (whole-step wall time) - (the simulator's price of the step's
 *       operators, from the same store),
 *
 * modelled with three terms of physical meaning, all >= 0:
 *
 *   r = step_us + per_layer_us x layers + per_token_us x tokens
 *       + per_emit_us x emitted rows
 *
 * per step (metadata preparation and upload, the embedding and LM head
 * reloaded into the core's caches), per layer of the step's model (its
 * weights reloaded once per step: the one term that tells a one-layer
 * drafter's pass from the target's step, fitted apart from the per-step
 * term only when steps of two depths were measured, which `calibrate run`
 * does), per token of the step (each row's activations through the
 * layers' caches, the embedding gather, the KV write) and per emitted row
 * (sampling over the vocabulary).  The fit
 * weighs each step by 1/wall^2, so it minimises relative error (what TTFT
 * and TPOT errors are), and a term that would come out negative is held at
 * 0 (exact non-negative least squares over the four terms: every subset
 * of free terms is fitted and the feasible fit of least cost kept).  The
 * terms become an engine profile (sim/engine-profile.h: prep_us,
 * prep_us_per_layer, prep_us_per_token, output_us_per_seq) that `servesim run --engine`
 * composes with the table model's operators.  docs/calibration.md.
 */
#ifndef SS_HOST_FIT_H
#define SS_HOST_FIT_H

#include <stddef.h>

#include "ss-error.h"

/* One whole step measured. */
struct host_step_obs {
	double tokens;        /* tokens in the step, >= 1 */
	double n_emit;        /* rows through the LM head (and sampled), >= 0 */
	double layers;        /* decoder layers of the step's model, >= 0 (0: not given) */
	double wall_ms;       /* the whole step's measured time, ms, > 0 */
	double kernels_ms;    /* the simulator's price of its operators, ms, >= 0 */
};

enum { HOST_FIT_STEP, HOST_FIT_TOKEN, HOST_FIT_EMIT, HOST_FIT_LAYER, HOST_FIT_TERMS };

struct host_fit {
	double coef_us[HOST_FIT_TERMS];   /* step_us, per_token_us, per_emit_us, per_layer_us; >= 0 */
	unsigned free_mask;               /* bit t: term t was fitted (not held at 0) */
	double rms_rel_before;            /* RMS of (kernels - wall) / wall over the steps */
	double rms_rel_after;             /* RMS of (kernels + host - wall) / wall */
	double max_rel_after;             /* largest |kernels + host - wall| / wall */
	/* RMS relative error of each step predicted by the terms fitted to
	 * the others (leave one step out): how well the three terms carry
	 * to a step shape they were not fitted on */
	double rms_rel_loo;
	size_t n;                         /* steps fitted */
};

/* The host of one step of a model of `layers` layers under fit f, us. */
double host_fit_eval(const struct host_fit *f, double tokens, double n_emit, double layers);

/* Fit the four terms to n >= 3 steps (the per-layer term stays 0 unless
 * the steps' models differ in depth: with one depth it is the per-step
 * term, which is kept).  -EINVAL (err says which) for a
 * step with a non-finite or out-of-range field or too few steps; -EDOM
 * when the steps cannot separate any term (all the same shape). */
int host_fit_run(const struct host_step_obs *obs, size_t n, struct host_fit *out,
		 struct ss_error *err);

#endif
