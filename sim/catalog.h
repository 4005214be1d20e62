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
	char source[256];         /* citation: config file URL */
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
};

struct catalog {
	struct model_spec *models;
	size_t n_models;
	struct gpu_spec *gpus;
	size_t n_gpus;
	struct engine_profile *engines;   /* data/engines.json (engine-profile.h) */
	size_t n_engines;
};

void catalog_init(struct catalog *c);
void catalog_release(struct catalog *c);

/* Add every entry of a models / GPUs JSON file; an entry whose name exists
 * replaces it.  Errors name the file (and line for JSON syntax errors) and
 * the entry and field that were wrong. */
int catalog_load_models(struct catalog *c, const char *path, struct ss_error *err);
int catalog_load_gpus(struct catalog *c, const char *path, struct ss_error *err);
int catalog_load_engines(struct catalog *c, const char *path, struct ss_error *err);
/* Add (or replace) one engine profile from the JSON text of an engines.json
 * entry; origin names it in errors ("store.db: engine_profiles 'x'"). */
int catalog_add_engine_text(struct catalog *c, const char *text, const char *origin,
			    struct ss_error *err);
/* Load dir/models.json, dir/gpus.json and dir/engines.json. */
int catalog_load_dir(struct catalog *c, const char *dir, struct ss_error *err);

const struct model_spec *catalog_model(const struct catalog *c, const char *name);
const struct gpu_spec *catalog_gpu(const struct catalog *c, const char *name);
const struct engine_profile *catalog_engine(const struct catalog *c, const char *name);

/* Derived quantities. */
double model_params(const struct model_spec *m);        /* parameter count */
double model_weight_bytes(const struct model_spec *m);  /* params x dtype_bytes */
/* KV cache bytes per token for the whole model (all layers, K and V). */
double model_kv_bytes_per_token(const struct model_spec *m);

#endif
