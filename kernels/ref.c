/* servesim — the reference backend ("ref"): every operator as the plainest
 * loops, accumulating in double and rounding once to fp32 at the end.  The
 * conformance suite (tests/test-kernels.c) compares every other backend
 * with it.  Single-threaded and slow by design; never used for timing.
 * An fp8 KV cache holds one E4M3 byte per element (kernel_fp8_e4m3_from_f32
 * on write, exact on read), as on every backend.
 * Every block id and slot it reads is range-checked, so a bad block table
 * is -EINVAL here rather than a stray read. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels-int.h"

#define KERNEL_REF_LORA_MAX_RANK 1024   /* LORA_MAX_RANK, sim/lora.h */

static int ref_init(void *priv, const struct kernel_backend_config *cfg, struct ss_error *err)
{
	(void)priv;
	(void)cfg;
	(void)err;
	return 0;
}

static int ref_gemm(void *priv, const struct kernel_gemm_args *a, struct ss_error *err)
{
	const float *x = view_f32(&a->x), *w = view_f32(&a->w);
	float *y = view_f32(&a->y);

	(void)priv;
	(void)err;
	for (int i = 0; i < a->m; i++)
		for (int j = 0; j < a->n; j++) {
			double s = a->accumulate ? y[i * a->y.ld + j] : 0;

			for (int l = 0; l < a->k; l++)
				s += (double)x[i * a->x.ld + l] * w[j * a->w.ld + l];
			y[i * a->y.ld + j] = (float)s;
		}
	return 0;
}

static int ref_rmsnorm(void *priv, const struct kernel_rmsnorm_args *a, struct ss_error *err)
{
	const float *w = view_f32(&a->weight);

	(void)priv;
	(void)err;
	for (int r = 0; r < a->rows; r++) {
		const float *x = view_f32(&a->x) + r * a->x.ld;
		float *out = view_f32(&a->out) + r * a->out.ld;
		double ss = 0, inv;

		for (int c = 0; c < a->cols; c++)
			ss += (double)x[c] * x[c];
		inv = 1 / sqrt(ss / a->cols + a->eps);
		for (int c = 0; c < a->cols; c++)
			out[c] = (float)(x[c] * inv * w[c]);
	}
	return 0;
}

static void rotate(float *x, int d, long pos, double theta)
{
	for (int i = 0; i < d / 2; i++) {
		double ang = (double)pos * pow(theta, -2.0 * i / d);
		double x1 = x[i], x2 = x[i + d / 2];

		x[i] = (float)(x1 * cos(ang) - x2 * sin(ang));
		x[i + d / 2] = (float)(x2 * cos(ang) + x1 * sin(ang));
	}
}

static int ref_rope(void *priv, const struct kernel_rope_args *a, struct ss_error *err)
{
	const int32_t *pos = view_i32(&a->pos);

	(void)priv;
	for (int t = 0; t < a->tokens; t++) {
		if (pos[t] < 0)
			return ss_error_set(err, -EINVAL, NULL, 0, "rope: token %d has position %d",
					    t, pos[t]);
		for (int h = 0; h < a->heads; h++)
			rotate(view_f32(&a->q) + t * a->q.ld + h * a->head_dim, a->head_dim,
			       pos[t], a->theta);
		for (int h = 0; h < a->kv_heads; h++)
			rotate(view_f32(&a->k) + t * a->k.ld + h * a->head_dim, a->head_dim,
			       pos[t], a->theta);
	}
	return 0;
}

static int ref_act(void *priv, const struct kernel_act_args *a, struct ss_error *err)
{
	(void)priv;
	(void)err;
	for (int t = 0; t < a->tokens; t++) {
		const float *in = view_f32(&a->in) + t * a->in.ld;
		float *out = view_f32(&a->out) + t * a->out.ld;

		for (int i = 0; i < a->width; i++) {
			double g = in[i];

			if (a->act == KERNEL_ACT_SILU_MUL)
				out[i] = (float)(g / (1 + exp(-g)) * in[a->width + i]);
			else
				out[i] = (float)(g > 0 ? g : 0);
		}
	}
	return 0;
}

static int ref_kv_write(void *priv, const struct kernel_kv_write_args *a, struct ss_error *err)
{
	const struct kernel_kv_cache *c = a->cache;
	const int32_t *slots = view_i32(&a->slots);
	size_t w = kv_token_elems(c);
	long n_slots = (long)c->num_blocks * c->block_size;

	(void)priv;
	for (int t = 0; t < a->tokens; t++) {
		if (slots[t] < 0)
			continue;
		if (slots[t] >= n_slots)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "kv_write: token %d's slot %d is outside the cache (%ld slots)",
					    t, slots[t], n_slots);
		kv_store_row(c, kv_slot_ptr(c, c->k, a->layer, slots[t]),
			     view_f32(&a->k) + t * a->k.ld, w);
		kv_store_row(c, kv_slot_ptr(c, c->v, a->layer, slots[t]),
			     view_f32(&a->v) + t * a->v.ld, w);
	}
	return 0;
}

/* rope then kv_write, token by token, through the same code as ref_rope and
 * ref_kv_write (so the same bits); every position and slot is checked
 * first, so a bad one leaves q, k and the cache untouched. */
static int ref_rope_kv_write(void *priv, const struct kernel_rope_kv_write_args *a,
			     struct ss_error *err)
{
	const struct kernel_kv_cache *c = a->cache;
	const int32_t *pos = view_i32(&a->pos), *slots = view_i32(&a->slots);
	const int d = c->head_dim;
	size_t w = kv_token_elems(c);
	long n_slots = (long)c->num_blocks * c->block_size;

	(void)priv;
	for (int t = 0; t < a->tokens; t++) {
		if (pos[t] < 0)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "rope_kv_write: token %d has position %d", t, pos[t]);
		if (slots[t] >= n_slots)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "rope_kv_write: token %d's slot %d is outside the cache "
					    "(%ld slots)", t, slots[t], n_slots);
	}
	for (int t = 0; t < a->tokens; t++) {
		float *k = view_f32(&a->k) + t * a->k.ld;

		for (int h = 0; h < a->heads; h++)
			rotate(view_f32(&a->q) + t * a->q.ld + h * d, d, pos[t], a->theta);
		for (int h = 0; h < c->kv_heads; h++)
			rotate(k + h * d, d, pos[t], a->theta);
		if (slots[t] < 0)
			continue;
		kv_store_row(c, kv_slot_ptr(c, c->k, a->layer, slots[t]), k, w);
		kv_store_row(c, kv_slot_ptr(c, c->v, a->layer, slots[t]),
			     view_f32(&a->v) + t * a->v.ld, w);
	}
	return 0;
}

static int ref_fill_uniform(void *priv, const struct kernel_fill_uniform_args *a,
			    struct ss_error *err)
{
	float *x = view_f32(&a->x);

	(void)priv;
	(void)err;
	for (size_t i = 0; i < a->n; i++)
		x[i] = kernel_uniform_draw(a->key, i, a->scale, a->bias);
	return 0;
}

/* One query row (all heads) attending to positions 0 .. kv_len-1 of a
 * request whose blocks are bt[]. */
static int attend(const struct kernel_kv_cache *c, int layer, int heads, float scale,
		  const float *q, int kv_len, const int32_t *bt, float *out, double *p,
		  const char *op, struct ss_error *err)
{
	int group = heads / c->kv_heads, d = c->head_dim;

	for (int j = 0; j < (kv_len + c->block_size - 1) / c->block_size; j++)
		if (bt[j] < 0 || bt[j] >= c->num_blocks)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: block table entry %d is %d, outside the cache (%d blocks)",
					    op, j, bt[j], c->num_blocks);
	for (int h = 0; h < heads; h++) {
		int kvh = h / group;
		double mx = -INFINITY, sum = 0;

		for (int j = 0; j < kv_len; j++) {
			size_t slot = (size_t)bt[j / c->block_size] * c->block_size +
				      j % c->block_size;
			const void *k = kv_slot_ptr(c, c->k, layer, slot);
			double s = 0;

			for (int e = 0; e < d; e++)
				s += (double)q[h * d + e] * kv_load(c, k, (size_t)kvh * d + e);
			p[j] = s * scale;
			if (p[j] > mx)
				mx = p[j];
		}
		for (int j = 0; j < kv_len; j++) {
			p[j] = exp(p[j] - mx);
			sum += p[j];
		}
		for (int e = 0; e < d; e++) {
			double o = 0;

			for (int j = 0; j < kv_len; j++) {
				size_t slot = (size_t)bt[j / c->block_size] * c->block_size +
					      j % c->block_size;

				o += p[j] * kv_load(c, kv_slot_ptr(c, c->v, layer, slot),
						    (size_t)kvh * d + e);
			}
			out[h * d + e] = (float)(o / sum);
		}
	}
	return 0;
}

static int ref_attn_prefill(void *priv, const struct kernel_attn_prefill_args *a,
			    struct ss_error *err)
{
	const int32_t *q_start = view_i32(&a->q_start), *ctx = view_i32(&a->context);
	double *p = malloc((size_t)a->max_kv_len * sizeof(*p));
	int rc = 0;

	(void)priv;
	if (!p)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (int s = 0; s < a->n_seqs && !rc; s++) {
		const int32_t *bt = view_i32(&a->block_tables) + s * a->block_tables.ld;

		if (q_start[s] < 0 || q_start[s + 1] < q_start[s] || q_start[s + 1] > a->tokens ||
		    q_start[s + 1] - q_start[s] > a->max_q_len || ctx[s] < 0 ||
		    ctx[s] + q_start[s + 1] - q_start[s] > a->max_kv_len) {
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "attn_prefill: sequence %d's chunk [%d, %d) with context %d "
					  "is outside tokens %d / max_q_len %d / max_kv_len %d", s,
					  q_start[s], q_start[s + 1], ctx[s], a->tokens,
					  a->max_q_len, a->max_kv_len);
			break;
		}
		for (int t = q_start[s]; t < q_start[s + 1] && !rc; t++)
			rc = attend(a->cache, a->layer, a->heads, a->scale,
				    view_f32(&a->q) + t * a->q.ld, ctx[s] + t - q_start[s] + 1, bt,
				    view_f32(&a->out) + t * a->out.ld, p, "attn_prefill", err);
	}
	free(p);
	return rc;
}

static int ref_attn_decode(void *priv, const struct kernel_attn_decode_args *a,
			   struct ss_error *err)
{
	const int32_t *kv_len = view_i32(&a->kv_len);
	double *p = malloc((size_t)a->max_kv_len * sizeof(*p));
	int rc = 0;

	(void)priv;
	if (!p)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (int s = 0; s < a->n_seqs && !rc; s++) {
		if (kv_len[s] < 1 || kv_len[s] > a->max_kv_len) {
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "attn_decode: sequence %d's kv_len %d is outside 1..%d",
					  s, kv_len[s], a->max_kv_len);
			break;
		}
		rc = attend(a->cache, a->layer, a->heads, a->scale, view_f32(&a->q) + s * a->q.ld,
			    kv_len[s], view_i32(&a->block_tables) + s * a->block_tables.ld,
			    view_f32(&a->out) + s * a->out.ld, p, "attn_decode", err);
	}
	free(p);
	return rc;
}

static int ref_gather(void *priv, const struct kernel_gather_args *a, struct ss_error *err)
{
	const int32_t *idx = view_i32(&a->idx);

	(void)priv;
	for (int r = 0; r < a->rows; r++) {
		if (idx[r] < 0 || idx[r] >= a->src_rows)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "gather: index %d of row %d is outside 0..%d",
					    idx[r], r, a->src_rows - 1);
		for (int c = 0; c < a->cols; c++)
			view_f32(&a->out)[r * a->out.ld + c] =
				view_f32(&a->src)[idx[r] * a->src.ld + c];
	}
	return 0;
}

/* Per row, the rank-r intermediate kept in double (never stored): another
 * computation than the GEMMs of the shared default, for the conformance
 * suite. */
static int ref_lora(void *priv, const struct kernel_lora_args *a, struct ss_error *err)
{
	const float *x = view_f32(&a->x);
	float *y = view_f32(&a->y);
	double t[KERNEL_REF_LORA_MAX_RANK];

	(void)priv;
	if (a->max_rank > KERNEL_REF_LORA_MAX_RANK)
		return ss_error_set(err, -EINVAL, NULL, 0, "lora: the reference takes ranks up to %d",
				    KERNEL_REF_LORA_MAX_RANK);
	for (int s = 0; s < a->n_segs; s++) {
		int r = a->seg_rank[s];
		const float *A, *B;

		if (a->seg_slot[s] < 0)
			continue;
		A = view_f32(&a->a) + (size_t)a->seg_slot[s] * a->a_slot;
		B = view_f32(&a->b) + (size_t)a->seg_slot[s] * a->b_slot;

		for (int i = a->seg_start[s]; i < a->seg_start[s + 1]; i++) {
			const float *xr = x + (size_t)i * a->x.ld;
			float *yr = y + (size_t)i * a->y.ld;

			for (int j = 0; j < r; j++) {
				t[j] = 0;
				for (int l = 0; l < a->d_in; l++)
					t[j] += (double)xr[l] * A[(size_t)j * a->a.ld + l];
			}
			for (int o = 0; o < a->d_out; o++) {
				double sum = yr[o];

				for (int j = 0; j < r; j++)
					sum += t[j] * B[(size_t)o * r + j];
				yr[o] = (float)sum;
			}
		}
	}
	return 0;
}

static int ref_argmax(void *priv, const struct kernel_argmax_args *a, struct ss_error *err)
{
	(void)priv;
	(void)err;
	for (int r = 0; r < a->rows; r++) {
		const float *x = view_f32(&a->x) + r * a->x.ld;
		int best = 0;

		for (int c = 1; c < a->cols; c++)
			if (x[c] > x[best])
				best = c;
		view_i32(&a->out)[r] = best;
	}
	return 0;
}

const struct kernel_backend_ops kernel_ref_ops = {
	.version = KERNEL_BACKEND_VERSION,
	.name = "ref",
	.description = "reference: naive fp32 loops with double accumulation (tests only)",
	.priv_size = 0,
	.dtype = KERNEL_DTYPE_F32,
	.init = ref_init,
	.alloc = kernel_host_alloc,
	.free = kernel_host_free,
	.upload = kernel_host_upload,
	.download = kernel_host_download,
	.gemm = ref_gemm,
	.rmsnorm = ref_rmsnorm,
	.rope = ref_rope,
	.act = ref_act,
	.kv_write = ref_kv_write,
	.attn_prefill = ref_attn_prefill,
	.attn_decode = ref_attn_decode,
	.kv_copy = kernel_host_kv_copy,
	.gather = ref_gather,
	.argmax = ref_argmax,
	.rope_kv_write = ref_rope_kv_write,
	.fill_uniform = ref_fill_uniform,
	.kv_fp8 = true,
	.lora = ref_lora,
};
