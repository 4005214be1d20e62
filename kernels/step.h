/* servesim — a synthetic transformer step on a kernel backend.
 *
 * A Llama-style decoder with random weights at a given shape, run through
 * the kernel backend (backend.h) one engine step at a time, so the live
 * executor measures what a real step costs and the calibration sweeps time
 * real operators.  A step mixes prefill chunks and decodes as the batch
 * policy formed it; each item brings its block table from the simulator's
 * KV block manager (sim/kvpool.h) and the model reads and writes its paged
 * KV cache exactly through those tables.
 *
 * One step, per layer: RMSNorm, QKV GEMM, RoPE (neox, theta 10000) fused
 * with the write of the step's K/V (kernel_rope_kv_write), decode attention
 * for single-token items and prefill attention (over the cached context,
 * causal) for the others, O GEMM + residual, RMSNorm, gate/up GEMM,
 * SiLU-and-multiply (ReLU for a plain MLP), down GEMM + residual; then for
 * the rows that emit: final RMSNorm, LM head GEMM and argmax sampling.
 * Inside a step the tokens are laid out decodes first, then the prefill
 * chunks; neither the results nor the timing depend on the caller's item
 * order beyond that.
 *
 * Input token ids are synthetic unless an item brings its own: the id at
 * position p is a hash of (seed, p), so one prompt prefilled in any
 * chunking sees the same tokens.
 *
 * Nothing is allocated per step once the workspace has grown to the largest
 * step seen (buffers grow geometrically).  The model keeps a pointer to the
 * backend, which must outlive it.
 */
#ifndef SS_KERNELS_STEP_H
#define SS_KERNELS_STEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "ss-error.h"

/* Shapes of the synthetic model (the caller converts a catalog model_spec;
 * kernels/ does not depend on sim/). */
struct synth_shape {
	int layers;         /* decoder blocks, >= 1 */
	int hidden;         /* model width, >= 1 */
	int heads;          /* query heads, >= 1 */
	int kv_heads;       /* key/value heads, divides heads (GQA) */
	int head_dim;       /* elements per head, even, <= KERNEL_MAX_HEAD_DIM */
	int intermediate;   /* MLP inner width, >= 1 */
	int vocab;          /* LM head rows, >= 1 */
	bool gated;         /* SwiGLU MLP (gate and up); false: fc1, ReLU, fc2 */
	/* The KV cache's element type (struct kernel_kv_cache's dtype): 0, the
	 * backend's own, or KERNEL_DTYPE_FP8_E4M3 (vLLM's --kv-cache-dtype
	 * fp8); synth_model_new refuses one the backend cannot hold. */
	enum kernel_dtype kv_dtype;
};

/* -EINVAL naming the first field out of range. */
int synth_shape_check(const struct synth_shape *s, struct ss_error *err);

/* Scale a model down for the CPU (docs/kernels.md, "CPU scaling"):
 * widths divide by width_div and layers becomes `layers` (0: unchanged).
 * head_dim and the GQA ratio heads/kv_heads are kept; kv_heads becomes
 * max(1, kv_heads / width_div) and heads follows from the ratio; hidden,
 * intermediate and vocab divide by width_div, rounded up to a multiple of 8
 * (vocab at least 256).  So every weight matrix shrinks by width_div^2 and
 * attention (per token and context position) by width_div.  width_div 1
 * and layers 0 leave the shape as it was. */
int synth_shape_scale(struct synth_shape *s, int width_div, int layers, struct ss_error *err);

/* Parameters (elements) of the synthetic model: embedding, layers, final
 * norm, LM head (untied). */
size_t synth_shape_params(const struct synth_shape *s);

/* One request's share of a step. */
struct synth_item {
	int32_t tokens;              /* tokens this step: 1 for a decode, the chunk length
				      * for a prefill chunk; >= 1 */
	int32_t context;             /* tokens already in the KV cache, >= 0 */
	const int32_t *block_table;  /* (transfer none) the request's block ids in order;
				      * must cover context + tokens positions */
	int32_t n_blocks;            /* entries in block_table */
	bool emit;                   /* this item produces a token (a decode, or the
				      * prompt's last chunk): its last row gets the LM head */
	int32_t emit_rows;           /* with emit: its last emit_rows rows get the LM head
				      * (a verify of drafts scores each of its tokens);
				      * 0 or 1: the last row only; <= tokens */
	const int32_t *token_ids;    /* optional [tokens] input ids (< vocab); NULL: synthetic */
	/* Multi-LoRA (synth_model_set_lora): the item's rows go through the
	 * adapter in GPU slot lora_slot (loaded: synth_model_lora_load); false:
	 * the base model alone. */
	bool lora;
	int32_t lora_slot;           /* with lora: 0 .. slots - 1 */
};

struct synth_model;

/* Random weights at shape, drawn on the backend (kernel_fill_uniform, one
 * call per tensor; seeded: the same seed gives the same weights on every
 * backend of the same dtype, see synth_model_weights) and a zeroed paged KV
 * cache of num_blocks blocks of block_size tokens per layer, of
 * shape->kv_dtype. */
int synth_model_new(struct synth_model **out, struct kernel_backend *kb,
		    const struct synth_shape *shape, int num_blocks, int block_size,
		    uint64_t seed, struct ss_error *err);
void synth_model_free(struct synth_model *sm);

/* Run one engine step of n >= 1 items.  *elapsed_ns (may be NULL) is the
 * step's duration on the backend's timer: input preparation and upload,
 * every kernel, sampling, up to the point where the tokens are ready.  Bad
 * items (block tables too short, block ids outside the cache, ...) are
 * -EINVAL before anything runs. */
int synth_model_step(struct synth_model *sm, const struct synth_item *items, int n,
		     int64_t *elapsed_ns, struct ss_error *err);

/* Graphs (docs/kernels.md, "Graphs"): run decode-only steps as backend
 * graphs (CUDA graphs) captured at batch sizes sizes[0..n) (ascending,
 * >= 1), as serving engines do.  A step whose items are all decodes, at
 * most sizes[n-1] of them, each with a KV length within max_kv_len
 * (clamped to the cache), is padded to the smallest size >= its count and
 * replayed in one launch; other steps run eagerly.  Graphs use their own
 * workspace, sized once for the largest size, and read block tables of
 * ceil(max_kv_len / block_size) entries per row, so decode attention is
 * launched for max_kv_len.  A size is captured the first time a step needs
 * it, before that step's timer starts, unless synth_model_capture_graphs
 * captured every size first.  n = 0 (the default) turns graphs off (and
 * frees them): every step eager, as without this call.  -ENOTSUP on a
 * backend without graphs (the host backends), -EINVAL for bad sizes. */
int synth_model_set_graphs(struct synth_model *sm, const int32_t *sizes, int n, int max_kv_len,
			   struct ss_error *err);
/* Capture every size not yet captured, now (untimed; vLLM captures all its
 * sizes at start-up).  Capturing runs the graph's operators once on
 * padding rows, which write no KV. */
int synth_model_capture_graphs(struct synth_model *sm, struct ss_error *err);
/* Steps run through a graph since the model was created. */
uint64_t synth_model_graph_steps(const struct synth_model *sm);

/* Multi-LoRA (docs/kernels.md, "LoRA"; docs/live.md): low-rank adapters
 * on the attention's q, k, v and o projections (the multi-LoRA component's
 * default targets, sim/lora.h), run by kernel_lora for the items that name
 * a slot.  The model holds `slots` GPU slots, each sized for max_rank
 * (vLLM preallocates its LoRA stacks at max_lora_rank), and a host store
 * of adapters: adapter a's synthetic weights (A of variance 1/d_in, B
 * scaled to a tenth of that, scaling folded in) are drawn into host memory
 * the first time synth_model_lora_stage names it, a pure function of the
 * model's seed, a and its rank; synth_model_lora_load copies them into a
 * slot, a real host-to-device copy (a memcpy on the CPU).  Steps with
 * adapters run eagerly (never through a graph).  Once per model, before
 * any step uses it; slots 1.., max_rank 1..1024.  -EINVAL, -ENOMEM. */
int synth_model_set_lora(struct synth_model *sm, int slots, int max_rank, struct ss_error *err);
/* Draw adapter a (>= 0) of rank r (1..max_rank) into the host store if it
 * is not there (host work, not a copy to the device: untimed by the
 * caller).  -EINVAL for a rank that differs from the one it was drawn at. */
int synth_model_lora_stage(struct synth_model *sm, int32_t a, int rank, struct ss_error *err);
/* Copy staged adapter a into slot (its A and B of every layer and module,
 * rank x (d_in + d_out) elements each): the load a step waits for. */
int synth_model_lora_load(struct synth_model *sm, int slot, int32_t a, struct ss_error *err);
/* Bytes one load of adapter a copies (staged; 0 otherwise), and the time
 * the last step spent in its adapters' kernels, ns (backend timer around
 * each kernel_lora call). */
size_t synth_model_lora_bytes(const struct synth_model *sm, int32_t a);
int64_t synth_model_lora_ns(const struct synth_model *sm);

/* Rows that emitted in the last step (items with emit, in item order). */
int synth_model_n_emit(const struct synth_model *sm);
/* Copy the last step's emitted rows to the host: the final-normed hidden
 * state [n_emit, hidden], the logits [n_emit, vocab] and the sampled ids
 * [n_emit]; any of the three may be NULL. */
int synth_model_outputs(struct synth_model *sm, float *hidden, float *logits, int32_t *tokens,
			struct ss_error *err);

const struct synth_shape *synth_model_shape(const struct synth_model *sm);
/* The weights buffer (transfer none) and its element count, *n =
 * synth_shape_params(): the embedding [vocab, hidden], then per layer the
 * attention norm [hidden], QKV [q_w + 2 kv_w, hidden], O [hidden, q_w], MLP
 * norm [hidden], gate/up [up_w, hidden] (gate rows first; up_w =
 * 2 intermediate when gated, else intermediate) and down [hidden,
 * intermediate]; then the final norm [hidden] and the LM head [vocab,
 * hidden], packed in that order.  Tensor t starting at element off is
 * kernel_fill_uniform with key splitmix64(seed ^ splitmix64(off + 1)),
 * scale sqrt(3 / fan_in) (1 for the embedding) and bias 0, or scale 0.1 and
 * bias 1 for the norms. */
const void *synth_model_weights(const struct synth_model *sm, size_t *n);
/* The model's KV cache (for kernel_kv_copy swaps; transfer none). */
const struct kernel_kv_cache *synth_model_kv(const struct synth_model *sm);
/* Backend memory held: weights, KV cache (at its own element size: 1 byte
 * for fp8), and the step workspace (bytes). */
size_t synth_model_weight_bytes(const struct synth_model *sm);
size_t synth_model_kv_bytes(const struct synth_model *sm);
size_t synth_model_workspace_bytes(const struct synth_model *sm);

#endif
