/* servesim — weight and KV precision (precision.h). */
#include "precision.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

int ss_dtype_parse(const char *s, enum ss_dtype *out)
{
	static const struct { const char *name; enum ss_dtype d; } names[] = {
		{ "bf16", SS_DTYPE_BF16 }, { "bfloat16", SS_DTYPE_BF16 },
		{ "fp16", SS_DTYPE_BF16 }, { "float16", SS_DTYPE_BF16 },
		{ "fp8", SS_DTYPE_FP8 }, { "fp4", SS_DTYPE_FP4 }, { "nvfp4", SS_DTYPE_FP4 },
	};

	for (size_t i = 0; s && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(s, names[i].name)) {
			*out = names[i].d;
			return 0;
		}
	return -EINVAL;
}

const char *ss_dtype_name(enum ss_dtype d)
{
	switch (d) {
	case SS_DTYPE_BF16: return "bf16";
	case SS_DTYPE_FP8:  return "fp8";
	case SS_DTYPE_FP4:  return "fp4";
	case SS_DTYPE_MODEL:
	default:            return "model";
	}
}

double ss_dtype_bytes(enum ss_dtype d, const struct model_spec *m)
{
	switch (d) {
	case SS_DTYPE_BF16: return 2.0;
	case SS_DTYPE_FP8:  return 1.0;
	case SS_DTYPE_FP4:  return 0.5 + 1.0 / 16.0;   /* E2M1 + an E4M3 scale per 16 */
	case SS_DTYPE_MODEL:
	default:            return m->dtype_bytes;
	}
}

/* The layers' linear weights, the ones a quantised checkpoint stores at
 * the weight dtype: attention QKV and O, and per layer either the dense
 * MLP or the MoE block's router (hidden x n_experts), every routed
 * expert's MLP (moe_intermediate wide) and the shared experts' MLPs
 * (shared_intermediate, or moe_intermediate when 0).  MLA's attention:
 * q_a and q_b (or q_proj), kv_a (latent + RoPE key), kv_b and o_proj.
 * Embeddings, norms and biases stay at the model's dtype. */
double model_linear_params(const struct model_spec *m)
{
	double d = m->hidden, hd = m->head_dim, ff = m->intermediate;
	double mats = m->mlp == MLP_GATED ? 3.0 : 2.0;
	double attn = (m->n_heads + 2.0 * m->n_kv_heads) * hd * d   /* QKV */
		      + m->n_heads * hd * d;                          /* O */

	if (m->kv_lora_rank > 0) {
		double h = m->n_heads, ql = m->q_lora_rank, kl = m->kv_lora_rank;
		double qk = h * (m->qk_nope_head_dim + m->qk_rope_head_dim);

		attn = (ql > 0 ? d * ql + ql * qk : d * qk)                 /* q_a, q_b | q_proj */
		       + d * (kl + m->qk_rope_head_dim)                     /* kv_a */
		       + kl * h * (m->qk_nope_head_dim + m->v_head_dim)     /* kv_b */
		       + h * m->v_head_dim * d;                             /* o_proj */
	}
	double layer = attn + mats * d * ff;                          /* MLP */
	int n_moe = model_moe_layers(m);
	double sh_ff, moe;

	if (n_moe == 0)
		return m->n_layers * layer;
	sh_ff = m->shared_intermediate > 0 ? m->shared_intermediate : m->moe_intermediate;
	moe = attn + d * m->n_experts                                  /* router */
	      + (double)m->n_experts * mats * d * m->moe_intermediate  /* routed */
	      + (double)m->n_shared_experts * mats * d * sh_ff;        /* shared */
	return (double)(m->n_layers - n_moe) * layer + (double)n_moe * moe;
}

enum ss_dtype model_weights_dtype(const struct model_spec *m, enum ss_dtype w)
{
	_Static_assert(SS_DTYPE_MODEL == 0 && SS_DTYPE_BF16 == 1 && SS_DTYPE_FP8 == 2 &&
		       SS_DTYPE_FP4 == 3, "catalog.c's weight_dtype_names index enum ss_dtype");
	return w == SS_DTYPE_MODEL && m ? (enum ss_dtype)m->weight_dtype : w;
}

double model_weight_bytes_as(const struct model_spec *m, enum ss_dtype w)
{
	double wb = ss_dtype_bytes(model_weights_dtype(m, w), m), lin;

	if (wb == (double)m->dtype_bytes)
		return model_weight_bytes(m);
	lin = model_linear_params(m);
	return lin * wb + (model_params(m) - lin) * m->dtype_bytes;
}

double model_kv_bytes_per_token_as(const struct model_spec *m, enum ss_dtype kv)
{
	double kb = ss_dtype_bytes(kv, m);

	if (kb == (double)m->dtype_bytes)
		return model_kv_bytes_per_token(m);
	/* every attention kind's KV (GQA, MLA's latent, local layers) scales
	 * with the element size; exact for the powers of two used here */
	return model_kv_bytes_per_token(m) * kb / m->dtype_bytes;
}

double gpu_gemm_flops(const struct gpu_spec *g, enum ss_dtype w)
{
	if (w == SS_DTYPE_FP8 && g->fp8_flops > 0.0)
		return g->fp8_flops;
	if (w == SS_DTYPE_FP4 && g->fp4_flops > 0.0)
		return g->fp4_flops;
	return g->bf16_flops;
}

bool gpu_weight_only(const struct gpu_spec *g, enum ss_dtype w)
{
	return (w == SS_DTYPE_FP8 && !(g->fp8_flops > 0.0)) ||
	       (w == SS_DTYPE_FP4 && !(g->fp4_flops > 0.0));
}

int precision_check(const struct gpu_spec *g, enum ss_dtype w, enum ss_dtype kv,
		    struct ss_error *err)
{
	/* fp8 KV is stored and dequantised on any GPU (vLLM --kv-cache-dtype
	 * fp8); fp4 weights run anywhere too: on a GPU without fp4 tensor
	 * cores as weight-only W4A16 (vLLM: Marlin for NVFP4 and, on Ampere,
	 * MXFP4; Triton matmul_ogs for MXFP4 MoE on Hopper; bf16 activations
	 * against weights dequantised in the GEMM), gpu_gemm_flops */
	(void)g;
	(void)w;
	(void)kv;
	(void)err;
	return 0;
}
