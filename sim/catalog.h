/* servesim — model and GPU catalogs.
 *
 * Both catalogs are JSON data files (data/models.json, data/gpus.json), so a
 * user adds a model or a GPU without recompiling: entries from a user file
 * given later override shipped entries of the same name.  Names are lowercase
 * with dashes ("llama-3.1-8b", "h100-sxm").  See docs/catalogs.md.
 */
#ifndef SS_CATALOG_H
#define SS_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine-profile.h"
#include "spec-accept.h"
#include "stack-profile.h"
#include "ss-error.h"

enum mlp_kind {
	MLP_GATED = 0,   /* SwiGLU: gate and up projections, then down (Llama, Mistral, Qwen) */
	MLP_PLAIN = 1,   /* fc1, activation, fc2 (OPT) */
};

enum norm_kind {
	NORM_RMS = 0,    /* RMSNorm: one weight vector (Llama, Mistral, Qwen) */
	NORM_LAYER = 1,  /* LayerNorm: weight and bias vectors (OPT) */
};

struct model_spec {
	char name[64];
	char hf_id[128];          /* Hugging Face id the shapes come from */
	int n_layers;
	int hidden;               /* model width d */
	int n_heads;              /* query heads */
	int n_kv_heads;           /* key/value heads (GQA); == n_heads for MHA */
	int head_dim;
	int intermediate;         /* MLP inner width */
	int vocab;
	int max_context;          /* tokens (max_position_embeddings) */
	enum mlp_kind mlp;
	bool tied_embeddings;     /* LM head shares the embedding matrix */
	bool qkv_bias;
	/* Added with the catalogs: what the parameter count needs beyond the
	 * shapes above.  Zero values mean a Llama-style model. */
	enum norm_kind norm;      /* "rmsnorm" | "layernorm" in JSON */
	bool linear_bias;         /* O projection and MLP layers carry biases (OPT) */
	int pos_embeddings;       /* rows of a learned position table, 0 with RoPE */
	int dtype_bytes;          /* weights and KV cache element size (2 = bf16/fp16) */
	/* models.json "weight_dtype" (an enum ss_dtype, precision.h): the
	 * dtype its published checkpoint holds its linear layers in, where
	 * that is not dtype_bytes (DeepSeek-V3: FP8 block-scaled; gpt-oss:
	 * MXFP4 experts), and so what a run without --weight-dtype prices
	 * (model_weights_dtype); absent ("dtype_bytes", 0): dtype_bytes. */
	int weight_dtype;
	char source[256];         /* citation: config file URL */
	/* Added with issue 12 (docs/catalogs.md): mixture-of-experts, MLA,
	 * local attention.  Every field is optional in JSON and 0 / false means
	 * a dense model with full attention, so the models above are unchanged. */
	bool qk_norm;             /* RMSNorm on each head's Q and K (Qwen3, Gemma 3): 2 x head_dim */
	bool sandwich_norm;       /* four norms per layer, before and after attention and MLP (Gemma) */
	/* Mixture of experts: n_experts > 0 makes the MoE layers' MLP a router
	 * (hidden x n_experts), n_experts routed experts of width
	 * moe_intermediate, experts_per_token of them active per token, and
	 * n_shared_experts always-active experts of width shared_intermediate
	 * (0: moe_intermediate).  Which layers are MoE: not the first
	 * moe_first_dense ones, not those in moe_dense_layers[], and of the
	 * rest layer i when (i + 1) % moe_step == 0 (moe_step 0 or 1: every
	 * one).  Dense layers keep "intermediate". */
	/* Multi-token prediction layers the checkpoint ships (DeepSeek-V3's
	 * num_nextn_predict_layers), which --spec mtp drafts with; 0 = none. */
	int mtp_layers;
	int n_experts;
	int experts_per_token;
	int moe_intermediate;     /* routed expert MLP inner width */
	int n_shared_experts;
	int shared_intermediate;  /* shared expert MLP inner width; 0 = moe_intermediate */
	int moe_first_dense;      /* leading dense layers (DeepSeek first_k_dense_replace) */
	int moe_step;             /* decoder_sparse_step / interleave_moe_layer_step */
	bool router_bias;         /* the router carries n_experts biases (gpt-oss; DeepSeek-V3's
				   * e_score_correction_bias) */
#define MODEL_DENSE_LAYERS_MAX 32
	int32_t moe_dense_layers[MODEL_DENSE_LAYERS_MAX];  /* explicit dense layers (mlp_only_layers) */
	int32_t n_moe_dense_layers;
	/* Local attention: sliding_window tokens (each token attends to the last
	 * W) or attn_chunk tokens (attends within its chunk of C, Llama 4); at
	 * most one of the two.  local_period P: in each run of P layers the first
	 * P - 1 are local and the last is full attention; 0 = every layer local. */
	int sliding_window;       /* tokens; 0 = none */
	int attn_chunk;           /* tokens; 0 = none */
	int local_period;         /* layers */
	bool attn_sinks;          /* a learned sink logit per head (gpt-oss): n_heads per layer */
	/* Multi-head latent attention (DeepSeek-V2/V3): kv_lora_rank > 0 turns
	 * the Q/K/V/O shapes above into MLA's; the KV cache holds the
	 * compressed latent (kv_lora_rank) and the decoupled RoPE key
	 * (qk_rope_head_dim) per layer.  q_lora_rank 0: Q projected directly. */
	int kv_lora_rank;
	int q_lora_rank;
	int qk_nope_head_dim;
	int qk_rope_head_dim;
	int v_head_dim;
	/* A pipeline stage's slice of a model (model_slice): its n_layers are
	 * layers layer_first .. layer_first + n_layers - 1 of the model it is
	 * cut from, whose layer types (MoE or dense, local or full) they keep.
	 * 0 for a whole model; never read from JSON. */
	int layer_first;
};

struct gpu_spec {
	char name[64];
	double bf16_flops;        /* dense bf16 tensor FLOP/s (no sparsity) */
	double hbm_bytes;         /* device memory, bytes (nvidia-smi's total: MiB x 2^20) */
	double hbm_bw;            /* memory bandwidth, bytes/s */
	double nvlink_bw;         /* per-GPU NVLink bandwidth, one direction, bytes/s; 0 = none */
	double pcie_bw;           /* host link bandwidth, one direction, bytes/s */
	double tdp_w;             /* board power limit, W */
	double idle_w;            /* idle power, W */
	double cost_per_hour;     /* USD per GPU-hour, 0 when unknown */
	/* Optional (0 when absent; the engine then uses docs/disaggregation.md's
	 * defaults): per-GPU RDMA bandwidth between nodes, one direction,
	 * bytes/s, and the fixed latency of one KV transfer over each link. */
	double rdma_bw;
	double nvlink_latency_us, rdma_latency_us;
	/* Optional power model (docs/energy.md; 0 when absent, then the
	 * defaults of cost_mem_power_frac and cost_host_gap_power_w).
	 * host_gap_w: power of one GPU while the host holds the step up
	 * (scheduling, input preparation, sampling; clocks up, no kernels),
	 * W, in [idle_w, tdp_w].  mem_power_lo / mem_power_hi: share of the
	 * dynamic range (tdp_w - idle_w) drawn by memory-bound kernel time at
	 * a batch of one request and at a saturated batch, in (0, 1];
	 * mem_power_batch: the batch (requests in the step) at which half of
	 * that rise is reached, requests. */
	double host_gap_w;
	double mem_power_lo, mem_power_hi, mem_power_batch;
	char source[512];         /* citations for each value */
	/* Optional (0 when absent: no such tensor cores): dense fp8 (E4M3)
	 * and fp4 (NVFP4) tensor FLOP/s without sparsity, for GEMMs with
	 * --weight-dtype fp8 / fp4 (precision.h, docs/cost-models.md). */
	double fp8_flops;
	double fp4_flops;
	/* Optional (0 when absent: a switch, as NVLink's NVSwitch, gives every
	 * GPU its whole nvlink_bw towards any group of peers): the GPUs of a
	 * node form a fully connected mesh (AMD Instinct's xGMI) of link_peers
	 * direct links per GPU, each nvlink_bw / link_peers one direction, so
	 * a group of n GPUs reaches only min(n - 1, link_peers) of them
	 * (gpu_link_share). */
	int link_peers;
	/* Optional ("" when absent: a family of its own): the kernel
	 * architecture the GPU's kernels are built for (CUDA's sm80, sm90,
	 * sm100 family, AMD's gfx942, ...; docs/catalogs.md).  GPUs of one
	 * family run the same kernels, so one whose measured tables are in
	 * a calibration store prices the others, scaled by the roofline
	 * (the "scaled" cost model, docs/cost-models.md). */
	char family[32];
};

/* The share of g's nvlink_bw a GPU can drive towards n - 1 peers of its
 * node at once (a collective among n GPUs; n = 2: one peer, a KV or
 * activation copy): 1 on a switch, min(n - 1, link_peers) / link_peers on
 * a mesh; 1 for n < 2. */
double gpu_link_share(const struct gpu_spec *g, int n);

/* The latency figures an interval applies to (data/intervals.json's
 * ttft_*, tpot_*, itl_*, e2e_* keys; analysis/metrics.def names one per
 * catalogued distribution).  INTERVAL_NONE: a figure without one. */
enum interval_metric {
	INTERVAL_NONE = -1,
	INTERVAL_TTFT,
	INTERVAL_TPOT,
	INTERVAL_ITL,
	INTERVAL_E2E,
	INTERVAL_METRICS
};

/* One entry of data/intervals.json (docs/metrics.md "Intervals"): the
 * leave-one-source-out error bounds of one engine profile, as ratios
 * measured / predicted, so that a predicted figure p lies in
 * [p * lo, p * hi].  A bound pair absent from the file is 0 (the reader
 * then takes the "prior" entry's); a pair present has 0 < lo <= 1 <= hi. */
struct interval_entry {
	char name[64];            /* an engine profile's, "prior" or "none" */
	int sources;              /* held-out sources behind the bounds; 0: not said */
	double lo[INTERVAL_METRICS], hi[INTERVAL_METRICS];   /* ratios, 0 = absent */
};

/* interval_metric's name as data/intervals.json spells it ("ttft"). */
const char *interval_metric_name(enum interval_metric m);

struct catalog {
	struct model_spec *models;
	size_t n_models;
	struct gpu_spec *gpus;
	size_t n_gpus;
	struct engine_profile *engines;   /* data/engines.json (engine-profile.h) */
	size_t n_engines;
	/* Which of engines[] are the data folder's own (false: replaced or
	 * added by --engine-catalog or --engine-store, a user's profile, which
	 * data/intervals.json's bounds do not describe); n_engines of them. */
	bool *engine_shipped;
	struct interval_entry *intervals;  /* data/intervals.json; NULL: none */
	size_t n_intervals;
	struct stack_profile *stacks;     /* data/stacks.json (stack-profile.h) */
	size_t n_stacks;
	struct spec_accept *acceptance;   /* data/acceptance.json (spec-accept.h) */
	size_t n_acceptance;
};

void catalog_init(struct catalog *c);
void catalog_release(struct catalog *c);

/* Add every entry of a models / GPUs JSON file; an entry whose name exists
 * replaces it.  Errors name the file (and line for JSON syntax errors) and
 * the entry and field that were wrong. */
int catalog_load_models(struct catalog *c, const char *path, struct ss_error *err);
int catalog_load_gpus(struct catalog *c, const char *path, struct ss_error *err);
int catalog_load_engines(struct catalog *c, const char *path, struct ss_error *err);
/* Add every entry of an intervals JSON file (data/intervals.json's
 * format, docs/metrics.md "Intervals"); an entry whose name exists
 * replaces it.  Errors name the file, the entry and what was expected. */
int catalog_load_intervals(struct catalog *c, const char *path, struct ss_error *err);
/* The entry named name, or NULL. */
const struct interval_entry *catalog_interval(const struct catalog *c, const char *name);
/* Whether engine profile name is the data folder's own (not a user's). */
bool catalog_engine_shipped(const struct catalog *c, const char *name);
/* Add (or replace) one engine profile from the JSON text of an engines.json
 * entry; origin names it in errors ("store.db: engine_profiles 'x'"). */
int catalog_add_engine_text(struct catalog *c, const char *text, const char *origin,
			    struct ss_error *err);
/* Add every serving stack of a stacks JSON file (stack-profile.h); each
 * is resolved (stack_profile_resolve). */
int catalog_load_stacks(struct catalog *c, const char *path, struct ss_error *err);
/* Add every speculative-decoding acceptance entry of an acceptance JSON
 * file (data/acceptance.json's format, spec-accept.h); an entry whose name
 * exists replaces it.  Errors name the file, the entry and what was
 * expected. */
int catalog_load_acceptance(struct catalog *c, const char *path, struct ss_error *err);
/* Load dir/models.json, dir/gpus.json, dir/engines.json, dir/stacks.json,
 * dir/acceptance.json and dir/intervals.json (the last four when there). */
int catalog_load_dir(struct catalog *c, const char *dir, struct ss_error *err);

const struct model_spec *catalog_model(const struct catalog *c, const char *name);
const struct gpu_spec *catalog_gpu(const struct catalog *c, const char *name);
/* A name as a user types it (docs/catalogs.md, "Names"): the entry named
 * exactly, else the one named so ignoring case, else (models) the one
 * whose Hugging Face id, or the part of it after '/', matches ignoring
 * case and a trailing -Instruct / -hf / -chat, else the one entry whose
 * name starts so ignoring case.  NULL otherwise, with *hint (hint_len
 * bytes) naming the nearest entries ("did you mean h100-sxm, h200-sxm?")
 * or empty. */
const struct model_spec *catalog_model_find(const struct catalog *c, const char *name,
					    char *hint, size_t hint_len);
const struct gpu_spec *catalog_gpu_find(const struct catalog *c, const char *name,
					char *hint, size_t hint_len);
const struct engine_profile *catalog_engine(const struct catalog *c, const char *name);
const struct stack_profile *catalog_stack(const struct catalog *c, const char *name);
const struct spec_accept *catalog_acceptance(const struct catalog *c, const char *name);

/* Set the number-valued field key of entry (one of fields[0..n)) from
 * text, as the catalog's reader would set it from a JSON number: 0, or
 * -ENOENT when fields has no such number-valued key, or -EINVAL when text
 * is not a number in the field's range (err says which, under where:
 * "--stack"). */
int catalog_field_set_text(const struct catalog_field *fields, size_t n, void *entry,
			   const char *key, const char *text, const char *where,
			   struct ss_error *err);

/* Derived quantities. */
double model_params(const struct model_spec *m);        /* parameter count */
double model_weight_bytes(const struct model_spec *m);  /* params x dtype_bytes */
/* KV cache bytes per token for the whole model (all layers, K and V; the
 * compressed latent for MLA), counting local-attention layers as full ones:
 * what a token costs while the context is within the window. */
double model_kv_bytes_per_token(const struct model_spec *m);
/* KV cache bytes one sequence of `tokens` tokens holds, per layer type:
 * full-attention layers hold every token, sliding-window layers at most
 * sliding_window tokens, chunked layers at most attn_chunk tokens. */
double model_kv_bytes_for_tokens(const struct model_spec *m, double tokens);

/* Layer types (docs/catalogs.md). */
bool model_layer_is_moe(const struct model_spec *m, int layer);
bool model_layer_is_local(const struct model_spec *m, int layer);
int model_moe_layers(const struct model_spec *m);     /* how many layers are MoE */
int model_local_layers(const struct model_spec *m);   /* how many use local attention */
/* True when every layer of m is of one type (all MoE or all dense, all
 * local or all full attention): pipeline stages then differ only in their
 * layer count (docs/cost-models.md "Pipeline parallelism"). */
bool model_layers_alike(const struct model_spec *m);
/* Layers first .. first + n - 1 of m (0 <= first, 0 <= n, first + n <=
 * m's layers) as a model of n layers of the same types, with m's
 * embeddings, final norm and LM head (a pipeline stage is priced, and its
 * weights and KV counted, from its slice). */
void model_slice(const struct model_spec *m, int first, int n, struct model_spec *out);
/* Parameters one token's forward pass uses (routed experts: only
 * experts_per_token of them); == model_params for a dense model. */
double model_active_params(const struct model_spec *m);
/* Expected number of distinct experts, of n_experts, that `tokens` tokens
 * choosing k each (uniformly, without replacement per token) touch:
 * E (1 - (1 - k/E)^tokens), k at one token, -> E as tokens grow; 0 for
 * no tokens or no experts (docs/cost-models.md "Mixture of experts"). */
double model_distinct_experts(double n_experts, double k, double tokens);
/* What the cost models do not price yet: "multi-head latent attention
 * with local attention" (MLA whose layers also use a window or chunks);
 * NULL otherwise: MoE, MLA, sliding-window and chunked attention and
 * sinks are priced by the roofline and the table model (issue 12). */
const char *model_unpriced(const struct model_spec *m);
/* The attention kind the measured dense fits (fit, distserve), the live
 * executor and calibrate run do not model: "multi-head latent attention",
 * "sliding-window attention", "chunked attention"; NULL for full GQA/MHA
 * (with or without sinks, whose cost is below rounding). */
const char *model_attn_special(const struct model_spec *m);
/* 0, or -ENOTSUP with "NAME: WHAT cost is not modelled yet (issue 12)"
 * when model_unpriced says so: the one refusal every deployment goes
 * through (engine_new, cost_model_new, plan). */
int model_check_priced(const struct model_spec *m, struct ss_error *err);
/* Short label of the attention kind for listings: "mha", "gqa", "mqa",
 * "mla", plus "+swa", "+chunk", "+sinks". */
void model_attn_label(const struct model_spec *m, char *buf, size_t size);

/* Read a Hugging Face config.json (llama, mistral, qwen2, qwen3, qwen3_moe,
 * mixtral, deepseek_v3, gpt_oss, llama4, gemma2, gemma3, phi3; keyed on
 * model_type) into *m named `name` (lowercase, dashes); errors name the
 * file, the key and what was expected.  Weights and KV in bf16
 * (dtype_bytes 2) whatever torch_dtype says, as vLLM serves them. */
int model_from_hf_config(struct model_spec *m, const char *path, const char *name,
			 struct ss_error *err);
/* Add (or replace) one model in the catalog. */
int catalog_add_model(struct catalog *c, const struct model_spec *m, struct ss_error *err);
/* The checks a models.json entry passes (name, heads, dtype, the issue-12
 * fields hanging together); where names the entry in errors. */
int model_spec_validate(const struct model_spec *m, const char *path, const char *where,
			struct ss_error *err);

#endif
