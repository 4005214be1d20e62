/* servesim — a model's operators on measured data: which measured series
 * price each GEMM, attention, element-wise, host-overhead and collective
 * operator of one model shape on one GPU, and their interpolators and fits
 * (calibrate/op-plan.c; docs/cost-models.md).  Built on the series and
 * interpolators of grid.h; cal_plan_load() reads the stores through a
 * cache beside them (store-cache.h).
 *
 * Library code: no printing, no globals; errors fill struct ss_error.
 */
#ifndef SS_CAL_OP_PLAN_H
#define SS_CAL_OP_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fitting.h"
#include "grid.h"
#include "ss-error.h"

/* A model's shapes on one GPU as the measured cost models need them. */
struct cal_shape {
	int layers;
	int hidden;                /* model width d */
	int heads, kv_heads;       /* per GPU, after tensor parallelism */
	int head_dim;
	int ff;                    /* MLP inner width per GPU */
	bool gated;                /* gate and up projections fused into one GEMM of 2 ff */
	bool rope;                 /* rotary position embeddings */
	bool layernorm;            /* LayerNorm (else RMSNorm) */
	int vocab;                 /* whole vocabulary; the LM head holds vocab / tp rows */
	int tp;
	int dtype_bytes;
	const char *model_id;      /* Hugging Face id, to find the model's own host
				    * overheads; may be NULL */
	/* Weight dtype of the layer GEMMs (QKV, O, up, down): NULL = 16-bit
	 * (cal_series_is_16bit), else e.g. "fp8": those four come only from a
	 * GEMM grid of a store dtype that prices such weights, the first of
	 * cal_gemm_dtype_for_weights's order the device has ("fp8", else
	 * "fp8_block"; no 16-bit grid or line stands in for it), and the LM
	 * head stays 16-bit, as quantised checkpoints keep it. */
	const char *gemm_dtype;
};

enum cal_gemm_id { CAL_G_QKV = 0, CAL_G_O, CAL_G_UP, CAL_G_DOWN, CAL_G_LM, CAL_G_COUNT };

/* One GEMM of the model, priced as mult x T(m, n, k) where (n, k) may be a
 * block of the real shape: a GEMM wider or deeper than every measured one
 * is split into equal column (row) blocks that fit the grid, as
 * vocabulary-parallel LM heads are.  */
struct cal_plan_gemm {
	const struct cal_series *s;  /* grid or vidur line; NULL = not measured */
	double n, k;                 /* block shape evaluated */
	double mult;                 /* number of blocks */
	struct cal_interp *ip;       /* interpolator of s (transfer none) */
	struct cal_fit fit;          /* local fit on the measured (n, k) lines around the block */
};

struct cal_plan_op {
	const struct cal_series *s;  /* NULL = not measured */
	struct cal_interp ip;
	double mult;                 /* calls per step */
	double f;                    /* attention: batch factor; element-wise: model width / measured width */
};

enum { CAL_EW_NORM = 0, CAL_EW_ROPE, CAL_EW_ACT, CAL_EW_ADD, CAL_EW_EMBED, CAL_EW_COUNT };
enum { CAL_HOST_PARTS = 4 };

struct cal_plan {
	struct cal_shape shape;
	struct cal_interp grid_ip;   /* the GEMM grid's interpolator (when used) */
	struct cal_interp line_ip[CAL_G_COUNT];
	struct cal_plan_gemm gemm[CAL_G_COUNT];
	struct cal_plan_op pf, dec;
	struct cal_plan_op ew[CAL_EW_COUNT];   /* per-layer kinds (mult = calls per step) */
	struct cal_plan_op fnorm;              /* final norm, LM head operator */
	struct cal_plan_op ar[3];              /* all-reduce by enum cal_coll_kind */
	struct cal_plan_op ag;                 /* logits all-gather */
	struct cal_plan_op host[CAL_HOST_PARTS];
	/* Which operators are fully measured (docs/cost-models.md). */
	bool gemm_ok, lm_ok, pf_ok, dec_ok, ew_ok, ar_ok, host_ok;
	char host_device[64];                  /* device whose host overheads are used */
	char why[512];                         /* what is missing, for messages */
	/* Rows read by cal_plan_load (the series above point into them). */
	struct cal_data data;
	/* The interpolator of the shape's gemm_dtype grid (when set and
	 * found): the layer GEMMs' series. */
	struct cal_interp qgrid_ip;
	/* The adapter (LoRA) kernels of the device (cal_lora_fit): p = 0
	 * when it has no lora rows or they give no fit. */
	struct cal_fit lora;
	double lora_rms_rel;                   /* the fit's RMS relative error over its rows */
};

/* Part names of the host overhead that add up to a step's CPU time:
 * schedule, prepare_inputs_e2e, sampler_e2e, process_model_outputs.  A host
 * row's variant is "<part>" or "<part>:<model id>". */
extern const char *const cal_host_parts[CAL_HOST_PARTS];

/* Select and build everything for shape on device from d (device rows) and
 * host (host overhead rows of any device; may be d). */
int cal_plan_build(struct cal_plan *p, const struct cal_data *d, const struct cal_data *host,
		   const char *device, const struct cal_shape *shape, struct ss_error *err);
/* Read device's rows (and host overheads of any device) from the stores in
 * order of preference and build the plan; the plan owns the rows. */
int cal_plan_load(struct cal_plan *p, const char *const *stores, int n_stores,
		  const char *device, const struct cal_shape *shape, struct ss_error *err);
void cal_plan_release(struct cal_plan *p);
/* The adapter kernels' cost on device from its `lora` rows (those of the
 * most preferred store that has any, of dtypes of one element size):
 * out (p = CAL_LORA_TERMS, coefficients in ms per feature of
 * cal_series_features: a call, a segment, an MB, a GFLOP; lora-kernel.h),
 * fitted with weights 1/t^2 and every term >= 0; its RMS relative error
 * and the rows fitted.  out->p = 0 and 0 when there are no rows; -EDOM
 * (err) when they give no fit, -ENOMEM. */
int cal_lora_fit(const struct cal_data *d, const char *device, struct cal_fit *out,
		 double *rms_rel, size_t *n_rows, struct ss_error *err);
/* Measured GEMM g at m rows (ms); false outside the grid. */
bool cal_plan_gemm_eval(const struct cal_plan *p, int g, double m, double *y);
/* The fit's GEMM g at m rows (ms). */
double cal_plan_gemm_fit(const struct cal_plan *p, int g, double m);
/* Coefficients of the fit's GEMM g as a + b m (ms). */
void cal_plan_gemm_linear(const struct cal_plan *p, int g, double *a, double *b);
/* The fit of one planned operator at natural coordinates x (ms; 0 without
 * a series or fit).  Attention ignores mult and f (callers scale). */
double cal_plan_op_fit(const struct cal_plan_op *o, const double *x);
/* Fits as affine functions of the step's quantity (ms, mult included):
 * element-wise kinds at m tokens, the final norm at m tokens, host parts at
 * n requests, one collective of kind (or the all-gather when kind < 0) at b
 * bytes. */
void cal_plan_ew_linear(const struct cal_plan *p, double *a, double *b);
void cal_plan_fnorm_linear(const struct cal_plan *p, double *a, double *b);
void cal_plan_host_linear(const struct cal_plan *p, double *a, double *b);
void cal_plan_coll_linear(const struct cal_plan *p, int kind, double *a, double *b);

/* The attention fits' features (cal_series_features) from step sums, for
 * hot paths: decode over `batch` rows reading kv_tokens in total; prefill
 * of `tokens` query tokens with `positions` causal key positions. */
static inline double cal_decode_fit(const struct cal_fit *f, double batch, double kv_tokens)
{
	return f->c[0] + f->c[1] * batch + f->c[2] * kv_tokens * 1e-3;
}

static inline double cal_prefill_fit(const struct cal_fit *f, double tokens, double positions)
{
	return f->c[0] + f->c[1] * tokens * 1e-3 + f->c[2] * positions * 1e-6;
}

#endif
