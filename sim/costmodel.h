/* servesim — cost models: how long a step takes and what it costs in energy.
 *
 * A cost model is a const ops table selected by name ("constant",
 * "roofline"; later "table", "fit") with "name:key=value" parameters.  The
 * framework allocates priv_size bytes of private state for each instance.
 * Given one step (a list of requests, each with the tokens it processes and
 * the KV context it already has), step() returns the predicted duration, the
 * energy, and a per-operator breakdown.  step() is on the hot path: it must
 * not allocate and must be O(items).
 */
#ifndef SS_COSTMODEL_H
#define SS_COSTMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "params.h"
#include "precision.h"
#include "ss-error.h"

#define COST_MODEL_VERSION 3   /* 2: step() returns int and takes an error; 3: lora_kernel */

/* Operators a step decomposes into (docs/design.md section 4). */
enum cost_op {
	COST_OP_GEMM = 0,        /* QKV, O, MLP projections, all layers */
	COST_OP_ATTN_PREFILL,    /* prefill/chunk attention, all layers */
	COST_OP_ATTN_DECODE,     /* decode attention, all layers */
	COST_OP_ELEMENTWISE,     /* norms, RoPE, activation, residual adds */
	COST_OP_LM_HEAD,         /* final norm, LM head GEMM, sampling */
	COST_OP_ALLREDUCE,       /* tensor-parallel all-reduce */
	COST_OP_HOST,            /* per-step host overhead (scheduling, input prep) */
	COST_OP_LORA,            /* LoRA adapters' shrink and expand GEMMs (lora.h), all layers;
				  * priced by the engine's adapter component, 0 from a cost model */
	COST_OP_COUNT
};
const char *cost_op_name(enum cost_op op);

/* The instance a cost model predicts for. */
struct cost_config {
	const struct model_spec *model;
	const struct gpu_spec *gpu;
	int tp;                  /* tensor-parallel degree, >= 1 */
	/* Calibration stores to read measurements from (table, fit), in order
	 * of preference; NULL entries are skipped.  n_stores may be 0. */
	const char *const *stores;
	int n_stores;
	double power_cap_w;      /* per-GPU power limit, W; 0 = none (the GPU's TDP) */
	double clock_frac;       /* SM clock locked at this fraction of the maximum,
				  * (0.2, 1]; 0 = not locked */
	/* The shared data folder (../shared/data: profiles/distserve/...)
	 * where a model without a file= parameter finds its default file;
	 * NULL or "" = none.  The CLI sets it from SERVESIM_SHARED_DATA. */
	const char *shared_data;
	/* (transfer none) The serving engine whose host work, launches and
	 * collective floor are added to the kernels (engine-profile.h);
	 * NULL = kernels only, with the backend's own host term. */
	const struct engine_profile *engine;
	/* Precision (precision.h): the linear layers' weights and the KV
	 * cache; SS_DTYPE_MODEL (0) = the model's dtype_bytes. */
	enum ss_dtype weight_dtype, kv_dtype;
	/* Expert parallelism and data-parallel attention (engine.h,
	 * docs/cost-models.md "Expert parallelism"): with dp_attention D > 1
	 * a step is one attention rank's, on tp / D GPUs (attention, dense
	 * layers, LM head at tensor parallelism tp / D; energy of those
	 * GPUs), its MoE layers run over all tp GPUs with every rank of the
	 * instance carrying as many tokens as this one; ep E > 1 spreads the
	 * routed experts over E GPUs (tensor parallelism tp / E inside each)
	 * and replaces the MoE all-reduce with an all-to-all dispatch and
	 * combine, over NVLink within a node of gpus_per_node GPUs (0 = 8),
	 * else over the RDMA link.  0 or 1 = off. */
	int ep, dp_attention, gpus_per_node;
	/* (transfer none) The GPUs whose measured tables may price another
	 * GPU of their family (the catalog's, n_ref_gpus of them): "auto"
	 * and "scaled" look among them for the closest one the stores cover
	 * (cost-scaled.c, docs/cost-models.md "scaled").  NULL = none:
	 * "auto" is the table or the roofline, as before the scaled model. */
	const struct gpu_spec *ref_gpus;
	size_t n_ref_gpus;
};

/* GPUs one step of cfg runs on: an attention rank's tp / dp_attention with
 * data-parallel attention, else tp. */
static inline int cost_config_step_gpus(const struct cost_config *c)
{
	return c->dp_attention > 1 ? c->tp / c->dp_attention : c->tp;
}

/* The layout tp x ep x dp (ep, dp: 0 or 1 = off) is one model m can run:
 * ep and dp divide tp; ep > 1 needs an MoE model whose experts ep divides;
 * dp > 1 needs an MoE model.  -EINVAL with one line naming the options
 * (as the caller calls them, e.g. "--decode-ep") otherwise. */
int cost_layout_check(const struct model_spec *m, int tp, int ep, int dp,
		      const char *tp_opt, const char *ep_opt, const char *dp_opt,
		      struct ss_error *err);

/* One request's share of a step. */
struct cost_item {
	int32_t tokens;          /* tokens processed this step (chunk; 1 for a decode) */
	int32_t context;         /* tokens already in the KV cache before this step */
};

struct cost_step {
	const struct cost_item *items;
	uint32_t n_items;
	uint32_t n_prefill;      /* items with tokens > 1, or first chunk of a prompt */
	uint32_t n_emit;         /* items that produce an output token (LM head rows) */
	int64_t total_tokens;    /* sum of items[].tokens */
	/* A step of a multi-step burst (engine-profile.h, docs/engines.md):
	 * the engine's host terms it leaves out (enum engine_step_part bits;
	 * 0: a step of its own) and, when engine_part is set, the output
	 * tokens whose processing it pays (a burst's last step: all of the
	 * burst's).  Only an engine profile reads them; kernels do not. */
	unsigned engine_part;
	uint32_t n_out;
	/* Data-parallel attention (cost_config.dp_attention D > 1): the tokens
	 * the MoE layers carry in this step, summed over the D attention ranks
	 * of the instance, which step together (the engine's lock-step group,
	 * docs/cost-models.md "Expert parallelism"); 0 = not known: every rank
	 * carries as many as this step (D x total_tokens, the symmetric load a
	 * plan probe or a policy's estimate is priced at).  Ignored without
	 * DP attention. */
	int64_t group_tokens;
	/* Speculative decoding (sim/spec.h): items of 2..spec_q tokens verify
	 * drafts; an engine runs them with its decode attention kernel (vLLM's
	 * MLA backends take queries up to 1 + k tokens long as decodes), which
	 * for MLA is the absorbed form over the latent, not the prefill's
	 * up-projected K and V.  0 = none (every q > 1 item is a chunk). */
	int32_t spec_q;
};

struct cost_result {
	int64_t duration_ns;           /* > 0 */
	double energy_j;               /* all tp GPUs of the instance, J */
	int64_t op_ns[COST_OP_COUNT];  /* breakdown; sums to duration_ns */
	int64_t compute_ns;            /* time of compute-bound kernels (scale with the
					* SM clock); -1 when the backend cannot tell */
	uint32_t out_of_grid;          /* predictions made outside the measured grid */
	int64_t out_of_grid_ns;        /* time of the operators those predictions cover */
};

/* The adapter (LoRA) kernels' cost on a model's device, measured: one
 * kernel call, the shrink and expand of one module group over a step's
 * segments (calibrate/lora-kernel.h counts its bytes and FLOPs), takes
 *   call_s + seg_s x segments + adapter bytes x s_per_adapter_byte
 *   + activation bytes x s_per_act_byte + flops x s_per_flop.
 * All >= 0. */
struct cost_lora_kernel {
	double call_s;                 /* a call, s */
	double seg_s;                  /* a segment (a distinct adapter of the step), s */
	double s_per_adapter_byte;     /* s per byte of the adapters' A and B read:
					* 1 / the bandwidth reached */
	double s_per_act_byte;         /* s per byte of activations (x, the rank-wide
					* intermediate, y) moved */
	double s_per_flop;             /* s per FLOP: 1 / the FLOP rate reached */
};

struct cost_model_ops {
	int version;
	const char *name;
	const char *description;       /* one line, for `servesim list` */
	size_t priv_size;
	/* Validate params (mark every key it reads) and prepare priv. */
	int (*init)(void *priv, const struct cost_config *cfg, struct ss_params *params,
		    struct ss_error *err);
	/* Predict one step: set out's duration_ns, energy_j and every
	 * op_ns[], and compute_ns, out_of_grid and out_of_grid_ns where it
	 * knows them (cost_model_predict sets them to -1, 0 and 0 first, so
	 * its callers need not zero out).  Returns 0, or -ERANGE (detail in
	 * err) when its duration
	 * does not fit in int64 nanoseconds or is not a number, e.g. a GPU
	 * far outside physical range, a 1e300 ms table row, a fit beyond its
	 * domain; never a wrapped or clamped value. */
	int (*step)(void *priv, const struct cost_step *step, struct cost_result *out,
		    struct ss_error *err);
	void (*release)(void *priv);   /* optional */
	/* Optional: which backend produces op's times ("table", "fit",
	 * "roofline", ...); default: the model's own name. */
	const char *(*op_backend)(const void *priv, enum cost_op op);
	/* Optional: the GPU whose measurements it prices this GPU from, by
	 * name ("scaled": its reference); default NULL, the GPU's own. */
	const char *(*reference)(const void *priv);
	/* Optional (version >= 3): 0 and *out when it has measured the
	 * device's adapter kernels (the table model: `calibrate run`'s lora
	 * rows); default -ENOENT: the adapter component prices them from the
	 * roofline's priors (sim/lora.c). */
	int (*lora_kernel)(const void *priv, struct cost_lora_kernel *out);
};

const struct cost_model_ops *cost_model_find(const char *name);
const struct cost_model_ops *const *cost_model_registry(size_t *n);

/* The built-in cost models (docs/cost-models.md). */
#define COST_MODEL(ident) extern const struct cost_model_ops cost_##ident##_ops;
#include "costmodels.def"
#undef COST_MODEL

/* True when the calibration stores (in order of preference; NULL entries
 * skipped) hold GEMM, prefill-attention and decode-attention measurements
 * of GPU g usable for model m's shapes at tensor parallelism tp, i.e. when
 * the "table" model prices those operators from measurements.  Otherwise
 * false, with the reason in why (len bytes; why may be NULL); always
 * false for MLA and local-attention models, whose attention the table
 * model takes from the roofline. */
bool cost_store_covers(const char *const *stores, int n, const struct model_spec *m,
		       const struct gpu_spec *g, int tp, char *why, size_t len);

/* For measured backends (table, fit): finish out from per-operator times
 * in ms (taken where measured[op], else the roofline's rl.op_ns).  Energy:
 * an operator whose measurements carry energy draws its measured average
 * power op_power_w[op] (whole instance, W; 0 = not measured) over its time;
 * the rest of the step draws the roofline's average power for the same
 * step.  The compute-bound share is the roofline's; out-of-grid count and
 * time (ms) are passed through.  The duration is at least 1 ns. */
struct cal_data;
/* For measured backends: the adapter kernels' cost from a fit of a
 * device's lora rows (calibrate/lora-kernel.h: ms a call, a segment, an
 * MB of adapters, an MB of activations, a GFLOP). */
void cost_lora_kernel_from_ms(const double c[5], struct cost_lora_kernel *out);
/* Measured average power per operator of an instance of tp GPUs (W; 0 where
 * no measurement of that operator carries energy or power), from the rows
 * a measured backend loaded: GEMMs and the LM head from gemm rows, each
 * attention from its own, element-wise from all element-wise kinds,
 * all-reduce from the collectives.  Host time never has GPU energy rows. */
void cost_measured_power(const struct cal_data *d, int tp, double out[COST_OP_COUNT]);

int cost_result_from_measured(struct cost_result *out, const double ms[COST_OP_COUNT],
			      const bool measured[COST_OP_COUNT],
			      const double op_power_w[COST_OP_COUNT],
			      const struct cost_result *rl, uint32_t oog_n, double oog_ms,
			      const char *model, const struct cost_step *s, struct ss_error *err);

/* For init() methods: read params[key] (default def) into *out and check
 * min <= value <= max; the error names the key and the accepted range. */
int cost_param(struct ss_params *params, const char *key, double def,
	       double min, double max, double *out, struct ss_error *err);

/* One GEMM y[m, n] = x[m, k] W^T alone, priced as the roofline prices a
 * step's layer GEMM (cost-roofline.c: max(2 m n k / achievable FLOP/s,
 * (n k x W's bytes + m (n + k) x act_bytes) / achievable HBM B/s) +
 * kernel_us), with the same parameters and the same expressions.  For
 * `calibrate check --cross-gpu`, which scales one GPU's measured GEMMs to
 * another by the ratio of two of these, as the scaled model scales a
 * step's GEMMs by the ratio of two rooflines (cost-scaled.c). */
struct cost_gemm_roofline {
	double s_per_wflop;    /* s per FLOP: 1 / (gpu_gemm_flops(g, w) x gemm_eff or gemm_fp8_eff) */
	double s_per_byte;     /* s per byte: 1 / (hbm_bw x mem_eff) */
	double kernel_s;       /* launch and tail per kernel, s */
	double act_bytes;      /* bytes of an activation element (2: bf16) */
	double wq;             /* a weight element's bytes over act_bytes */
};
/* Weights at w (not SS_DTYPE_MODEL), activations at act_bytes > 0; params
 * are the roofline's (NULL: its defaults), a key it does not know an
 * error. */
int cost_gemm_roofline_init(struct cost_gemm_roofline *rg, const struct gpu_spec *g,
			    enum ss_dtype w, double act_bytes, struct ss_params *params,
			    struct ss_error *err);
/* Seconds for m rows of an n x k weight. */
double cost_gemm_roofline_s(const struct cost_gemm_roofline *rg, double m, double n, double k);

/* An instantiated cost model. */
struct cost_model {
	const struct cost_model_ops *ops;
	void *priv;
	struct cost_config cfg;
	/* Roofline used to tell a step's compute-bound time when the backend
	 * cannot and a power cap or clock setting needs it; NULL otherwise. */
	struct cost_model *shadow;
	/* With an engine that captures CUDA graphs: room for a decode step
	 * padded to the largest captured size (dummy rows of one token and
	 * no context). */
	struct cost_item *pad;
	uint32_t n_pad;
	/* pad[pad_dirty ..] hold padding rows already (what a step's memcpy
	 * overwrote is below it), so a step writes only the padding rows a
	 * larger step's items took; graph_of[n], n <= n_pad, is
	 * engine_profile_graph_size(engine, n), looked up once per size */
	uint32_t pad_dirty;
	int32_t *graph_of;
	/* The spec it was built from ("auto" resolved to the backend it
	 * chose), for cost_model_new_like. */
	char *spec;
};

/* spec is "name[:key=value,...]".  Unknown names and unknown keys are errors. */
int cost_model_new(struct cost_model **out, const char *spec,
		   const struct cost_config *cfg, struct ss_error *err);
/* The same backend with the same parameters as `like` (its spec), for
 * another configuration cfg: a pipeline stage's slice of the model
 * (engine-setup.c). */
int cost_model_new_like(struct cost_model **out, const struct cost_model *like,
			const struct cost_config *cfg, struct ss_error *err);
void cost_model_free(struct cost_model *cm);
/* Backend that produces op's times in this instantiated model. */
const char *cost_model_op_backend(const struct cost_model *cm, enum cost_op op);
/* The device's adapter kernels as cm measured them: 0 and *out, or
 * -ENOENT (not measured, or a cost model older than version 3). */
int cost_model_lora_kernel(const struct cost_model *cm, struct cost_lora_kernel *out);
/* The GPU whose measurements price cm's GPU ("scaled": its reference GPU's
 * name), NULL when they are the GPU's own or there are none. */
const char *cost_model_reference(const struct cost_model *cm);
/* What "auto" keeps a table for: cm (a "table" model) prices its GEMMs,
 * prefill and decode attention from measurements, those the dtypes move
 * to its roofline (fp8 KV, fp4 weights) aside. */
bool cost_model_auto_covers(const struct cost_model *cm);
/* The reference of a "scaled" model for cfg (cost-scaled.c): among
 * cfg->ref_gpus, the GPU of cfg->gpu's family (not cfg->gpu) whose table
 * cost_model_auto_covers, nearest in |ln peak FLOP/s ratio| + |ln HBM
 * bandwidth ratio| (ties: catalog order); *ref NULL when there is none
 * (no family, no stores, nothing measured).  A store that cannot be read
 * is an error, as for "table". */
int cost_scaled_reference(const struct cost_config *cfg, const struct gpu_spec **ref,
			  struct ss_error *err);
/* Predict one step, then apply the power cap / clock setting
 * (docs/energy.md): compute-bound time stretches by 1/r at clock ratio r,
 * dynamic energy scales by r^2; under a cap, r is the highest ratio whose
 * step power fits the cap.  With cfg.engine, the kernels of a graphed
 * decode step are priced at its padded size and the engine's host work
 * is composed in last (engine_profile_step). */
int cost_model_predict(struct cost_model *cm, const struct cost_step *s, struct cost_result *out,
		       struct ss_error *err);
/* The same for estimates that cannot fail (a policy's prefill estimate):
 * a step whose duration does not fit reads as SS_TIME_MAX_NS, i.e.
 * "never finishes".  Deprecated: callers should move to
 * cost_model_predict and propagate its error. */
void cost_model_step(struct cost_model *cm, const struct cost_step *s, struct cost_result *out);

/* For step() methods: ns (a computed time, nanoseconds, not yet rounded)
 * is a duration int64 nanoseconds hold: finite, >= 0 and below 2^63.
 * (The models keep their own rounding, llround or +0.5 truncation, so
 * results stay bit for bit; this is the range check ss_time_from_units
 * makes.) */
static inline bool cost_ns_fits(double ns)
{
	return ns >= 0.0 && ns < 9223372036854775808.0;
}
/* llround(ns) for 0 <= ns < 2^63 (what cost_ns_fits accepts), inline: the
 * hot path rounds every operator of every step, and the libm call was 6%
 * of a 10,000-request run.  The same result: below 2^52 the fraction
 * ns - trunc(ns) is exact, and from 2^52 on ns is already an integer. */
static inline int64_t cost_ns_round(double ns)
{
	int64_t i = (int64_t)ns;

	return i + (ns - (double)i >= 0.5);
}
/* The error a step() returns when a time does not fit: names the model,
 * what overflowed and the step's size.  Returns -ERANGE. */
int cost_step_range_error(struct ss_error *err, const char *model, const char *what,
			  double ns, const struct cost_step *s);

/* The power model's regimes (docs/energy.md), per GPU, from the GPU's
 * catalog entry.  A compute-bound kernel draws tdp_w; memory-bound kernel
 * time draws idle_w + (tdp_w - idle_w) x cost_mem_power_frac(g, batch),
 * which rises with the step's batch (requests in the step, >= 1; below 1
 * reads as 1) and saturates below TDP:
 *   f(b) = hi - (hi - lo) x h / (h + b - 1)
 * (lo = mem_power_lo at b = 1, hi = mem_power_hi as b grows, h =
 * mem_power_batch: half the rise at b = h + 1).  Where the catalog has no
 * curve, f = 0.5 at every batch (the model before the fit). */
double cost_mem_power_frac(const struct gpu_spec *g, double batch);
/* Power of one GPU, W, during a host-bound gap: time the GPU waits for the
 * host (scheduling, input preparation, sampling, output processing) with
 * its clocks up and no kernel running.  The catalog's host_gap_w, else
 * idle_w.  An engine that adds a span of t seconds of host time to a step
 * of an instance of tp GPUs charges tp x cost_host_gap_power_w(g) x t J
 * for it (the roofline charges its own host operator this way). */
double cost_host_gap_power_w(const struct gpu_spec *g);
/* The energy, J, of ns nanoseconds (>= 0) of host-bound time on an
 * instance of tp GPUs of type g: tp x cost_host_gap_power_w(g) x ns. */
static inline double cost_host_gap_energy_j(const struct gpu_spec *g, int tp, int64_t ns)
{
	return (double)tp * cost_host_gap_power_w(g) * (double)ns * 1e-9;
}

/* The DVFS transform on its own (exposed for tests): given a step predicted
 * at full clock, rewrite it for clock ratio r in (0, 1]. */
int cost_result_at_clock(struct cost_result *res, double r, double idle_w);
/* The clock ratio a step runs at under an instance power cap (W, all GPUs),
 * in [CLOCK_FRAC_MIN, 1]. */
double cost_clock_for_cap(const struct cost_result *res, double cap_w, double idle_w);
#define CLOCK_FRAC_MIN 0.2

/* ---- pipeline parallelism (docs/cost-models.md "Pipeline parallelism") ----
 *
 * An instance of tp x pp GPUs splits the model's layers into pp stages of
 * tp GPUs each, as vLLM's get_pp_indices does
 * (vllm/distributed/utils.py): n_layers / pp layers each, the remainder
 * n_layers % pp going one each to the stages before the last, counting
 * back from the second-to-last (the last stage, which carries the LM
 * head, never gets one).  The embedding sits on the first stage; final
 * norm, LM head and sampler on the last. */

/* Layers of stage s (0 .. pp - 1) of a model of n_layers split pp ways
 * (1 <= pp <= n_layers). */
int cost_pp_stage_layers(int n_layers, int pp, int s);
/* The first layer of stage s: the layers of stages 0 .. s - 1. */
int cost_pp_stage_first(int n_layers, int pp, int s);

/* Split a whole-model step priced by a cost model (one tp group running
 * every layer: its operators' times op_ns, summing to duration_ns) into
 * its pp stages' times, ns, into stage_ns[pp]:
 * stage s gets the per-layer operators (GEMMs, attention, element-wise,
 * all-reduces) times its share of the layers, the first stage also the
 * host operator (the engine's scheduling and input preparation happen
 * before stage 1 starts), the last the LM head.  The stage times sum to
 * duration_ns (the last stage takes the rounding and any time outside
 * the operators); each is at least 1 ns.  A stage's energy is the step's
 * x stage_ns[s] / duration_ns (its tp GPUs over its share of the work). */
void cost_pp_split(const int64_t op_ns[COST_OP_COUNT], int64_t duration_ns, int n_layers, int pp,
		   int64_t *stage_ns);

/* The same for a model whose layers are not all alike (dense and MoE,
 * local and full attention: model_layers_alike false), whose stages hold
 * different work: stage_op[s] is the same step priced on stage s's slice
 * (model_slice: its layers only, by the same cost model), and stage s
 * gets, of each per-layer operator's time in op_ns, the share its slice's
 * time of that operator is of all slices' (the share of its layers when
 * no slice has any of it).  Host on the first stage, LM head and rounding
 * on the last, every stage at least 1 ns, as cost_pp_split. */
void cost_pp_split_sliced(const int64_t op_ns[COST_OP_COUNT], int64_t duration_ns, int n_layers,
			  int pp, const int64_t (*stage_op)[COST_OP_COUNT], int64_t *stage_ns);

#endif
