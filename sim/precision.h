/* servesim — numeric precision of a deployment: the weights' and the KV
 * cache's element types (--weight-dtype, --kv-dtype; docs/cost-models.md
 * "Precision").
 *
 * SS_DTYPE_MODEL (0, what a zeroed config holds) means the model entry's
 * own dtype_bytes, so every existing configuration prices exactly as
 * before.  fp8 is E4M3 with per-tensor or per-channel scales (vLLM's and
 * TensorRT-LLM's "fp8" checkpoints); fp4 is NVFP4: 4-bit E2M1 values with
 * one E4M3 scale per 16 values, 4.5 bits a weight.  Only the linear layers'
 * weights (QKV, O, MLP) take the weight dtype: embeddings, the LM head,
 * norms and biases stay in the model's dtype, as in the published fp8 and
 * NVFP4 checkpoints (their quantization configs list lm_head as ignored).
 */
#ifndef SS_PRECISION_H
#define SS_PRECISION_H

#include "catalog.h"
#include "ss-error.h"

enum ss_dtype {
	SS_DTYPE_MODEL = 0,   /* the model's dtype_bytes (bf16 for every shipped entry) */
	SS_DTYPE_BF16,
	SS_DTYPE_FP8,
	SS_DTYPE_FP4,
};

/* "bf16" | "fp8" | "fp4" (also "bfloat16", "fp16", "float16", "nvfp4");
 * -EINVAL for anything else. */
int ss_dtype_parse(const char *s, enum ss_dtype *out);
const char *ss_dtype_name(enum ss_dtype d);   /* "model" for SS_DTYPE_MODEL */

/* Bytes per element: the model's dtype_bytes, 2, 1, or 0.5625 (NVFP4's
 * 4 bits plus one 8-bit scale per 16 values). */
double ss_dtype_bytes(enum ss_dtype d, const struct model_spec *m);

/* Parameters of the linear layers (QKV, O and MLP weight matrices, all
 * layers, without biases): what --weight-dtype quantises. */
double model_linear_params(const struct model_spec *m);

/* Whole-model weight bytes with the linear layers at weight dtype w and
 * everything else at the model's dtype; exactly model_weight_bytes(m)
 * when w is the model's own dtype. */
double model_weight_bytes_as(const struct model_spec *m, enum ss_dtype w);

/* The weights a run prices: w, or where w is SS_DTYPE_MODEL (no
 * --weight-dtype) the dtype m's checkpoint holds its linear layers in
 * (model_spec.weight_dtype: FP8 for DeepSeek-V3, FP4 for gpt-oss's
 * MXFP4), SS_DTYPE_MODEL again where the checkpoint is dtype_bytes. */
enum ss_dtype model_weights_dtype(const struct model_spec *m, enum ss_dtype w);

/* KV bytes per token, whole model, at KV dtype kv; exactly
 * model_kv_bytes_per_token(m) when kv is the model's own dtype. */
double model_kv_bytes_per_token_as(const struct model_spec *m, enum ss_dtype kv);

/* Dense tensor FLOP/s of g's layer GEMMs with weights at w: fp8 at
 * fp8_flops (W8A8, activations quantised per token), fp4 at fp4_flops
 * (W4A4); an fp8 checkpoint on a GPU without fp8 tensor cores
 * (fp8_flops 0: A100) runs as W8A16, vLLM's Marlin kernels dequantising
 * to bf16: bf16_flops, with the weight bytes still halved; likewise an
 * fp4 checkpoint without fp4 tensor cores (fp4_flops 0: H100, H200, A100)
 * runs as W4A16 (vLLM's Marlin MXFP4 / NVFP4 paths): bf16_flops, weights
 * read at 0.5625 bytes. */
double gpu_gemm_flops(const struct gpu_spec *g, enum ss_dtype w);

/* True when g runs weights of dtype w weight-only (fp8 or fp4 without
 * such tensor cores: W8A16 / W4A16, GEMMs at bf16_flops). */
bool gpu_weight_only(const struct gpu_spec *g, enum ss_dtype w);

/* 0, or -EINVAL with one line naming what g cannot run; every GPU runs
 * every dtype today: fp8 and fp4 weights weight-only (W8A16, W4A16) where
 * g has no such tensor cores, fp8 KV anywhere (stored in 8 bits and
 * dequantised in the attention kernel, vLLM --kv-cache-dtype fp8).  Kept
 * as the one place a future refusal goes. */
int precision_check(const struct gpu_spec *g, enum ss_dtype w, enum ss_dtype kv,
		    struct ss_error *err);

#endif
