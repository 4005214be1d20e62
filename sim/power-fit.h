/* servesim — fitting the power model (docs/energy.md) to measured power.
 *
 * A measurement is a run whose GPU time the cost model can price: a few
 * representative steps, each counted a number of times, inside a measured
 * wall time, with the measured mean power per GPU.  The model's prediction
 * for it prices the steps with the roofline (whose energy is the power
 * model), charges the rest of the wall time at the host-gap power (the
 * engine's time the kernels do not account for: the GPU waits on the
 * host), and divides by the wall time and the GPUs.  So a measurement is
 * compared like with like: all GPUs of the instance, the gaps between
 * kernels included, at the batch the run had.
 *
 * The memory-bound curve is fitted as dynamic energy per byte of HBM
 * bandwidth (J/B), shared by all GPUs: a memory-bound kernel streams
 * bytes at the GPU's datasheet bandwidth, so its dynamic power is that
 * energy per byte times the bandwidth, clamped at the board limit (TDP).
 * The host gap is a fraction of each GPU's dynamic range (tdp_w - idle_w).
 * So one fit carries over to another GPU through its datasheet bandwidth,
 * TDP and measured idle power; that is what the cross-GPU hold-outs test.
 */
#ifndef SS_POWER_FIT_H
#define SS_POWER_FIT_H

#include <stdbool.h>
#include <stddef.h>

#include "catalog.h"
#include "ss-error.h"

enum power_source {
	POWER_SRC_MLENERGY = 0,   /* ML.ENERGY leaderboard v2 (vLLM 0.4.2) */
	POWER_SRC_SPLITWISE,      /* Splitwise perf_model_a100.csv power columns */
	POWER_SRC_ANL,            /* LLM-Inference-Bench power_results_llama3_8b.csv */
	POWER_SRC_COUNT
};
const char *power_source_name(enum power_source s);

/* The four constants of the power model.  With per_byte (the fitted
 * model), mem_lo and mem_hi are the dynamic energy of memory-bound kernel
 * time per byte of the GPU's HBM bandwidth at one request and at many, J/B:
 * a GPU's catalog fractions are mem_power_lo = min(1, mem_lo x hbm_bw /
 * (tdp_w - idle_w)), and the same for hi.  Without per_byte (the model
 * before the fit), they are those fractions directly, the same on every
 * GPU.  mem_batch is the catalog's mem_power_batch, and gap_frac the
 * host-gap power's place in the dynamic range,
 * host_gap_w = idle_w + gap_frac x (tdp_w - idle_w). */
struct power_params {
	double mem_lo, mem_hi;    /* > 0, lo <= hi: J/B (per_byte) or fractions (0, 1] */
	double mem_batch;         /* requests, > 0 */
	double gap_frac;          /* [0, 1] */
	bool per_byte;            /* mem_lo/mem_hi in J/B of HBM bandwidth */
};

/* The largest energy per byte a fit may reach, J/B: 1 nJ/B, several
 * times what any GPU in the catalog can draw at its bandwidth (the fit
 * lands near 0.2 nJ/B). */
#define POWER_MAX_J_PER_BYTE 1e-9

/* A representative step: n requests, each processing `tokens` tokens with
 * `context` tokens already cached, repeated `count` times in the run. */
struct power_step {
	int n, tokens, context;
	double count;
};

struct power_obs {
	enum power_source src;
	char gpu[64], model[64];  /* catalog names */
	int tp;                   /* GPUs of the instance */
	double batch;             /* mean requests per decode step */
	struct power_step steps[2];
	int n_steps;
	double wall_s;            /* the measured time the steps span, s */
	double measured_w;        /* measured mean power per GPU, W */
	char label[128];          /* what was measured, for reports */
};

/* Read the measurements under dir (the shared data folder): ML.ENERGY v2
 * chat runs, Splitwise's A100 power columns (medians per configuration)
 * and LLM-Inference-Bench's A100 power, restricted to the models and GPUs
 * the catalog knows.  *out (transfer full) has *n entries.  -ENOENT when a
 * file is missing; a malformed row is an error naming file and line. */
int power_obs_load(const char *dir, const struct catalog *cat, struct power_obs **out,
		   size_t *n, struct ss_error *err);

/* g with the power model's catalog fields set from p (the memory-bound
 * fractions from g's hbm_bw, tdp_w and idle_w when p->per_byte). */
void power_params_apply(const struct power_params *p, struct gpu_spec *g);

/* Predicted mean power per GPU of o, W, under p (docs/energy.md). */
int power_predict(const struct power_obs *o, const struct catalog *cat,
		  const struct power_params *p, double *watts, struct ss_error *err);

/* What power_fit fits; the rest of *p stays as given. */
#define POWER_FIT_MEM 1u          /* mem_lo, mem_hi, mem_batch */
#define POWER_FIT_GAP 2u          /* gap_frac */

/* Least squares on the relative error (GSL, trust region, finite-difference
 * Jacobian) over the observations with use[i] (NULL = all), from the start
 * *p, which receives the fit of the parameters `what` names.  A weak prior
 * holds mem_batch near 16 requests where the data cannot tell.  -EINVAL
 * when fewer than 4 are used. */
int power_fit(const struct power_obs *obs, size_t n, const bool *use,
	      const struct catalog *cat, unsigned what, struct power_params *p,
	      struct ss_error *err);

/* Where the fits start: 90 pJ/B at batch 1 rising to 130 pJ/B (on an
 * A100-SXM4-40GB about 0.4 and 0.6 of its dynamic range), half-way at 16
 * requests; host gaps at 0.2 of the dynamic range. */
extern const struct power_params power_params_start;

/* The procedure behind the shipped constants (docs/energy.md): from
 * power_params_start, every parameter on the observations with
 * use_curve[i], then the host gap alone on those with use_gap[i] (one
 * GPU's runs with host gaps: its ML.ENERGY runs), the memory-bound curve
 * held.  use_gap NULL = no second stage. */
int power_fit_two_stage(const struct power_obs *obs, size_t n, const bool *use_curve,
			const bool *use_gap, const struct catalog *cat, struct power_params *p,
			struct ss_error *err);

/* Mean absolute and mean signed relative error (fractions) of p's
 * predictions over the observations with use[i] (NULL = all); *count
 * receives how many. */
int power_error(const struct power_obs *obs, size_t n, const bool *use,
		const struct catalog *cat, const struct power_params *p,
		double *mape, double *bias, size_t *count, struct ss_error *err);

#endif
