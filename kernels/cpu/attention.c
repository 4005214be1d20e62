/* servesim — CPU attention over the paged KV cache.
 *
 * Both prefill and decode come down to one routine: a group of query heads
 * that share one KV head attend to the first kv_len positions of a request,
 * read block by block through its block table.  Keys are taken in tiles of
 * at most TILE_KEYS positions inside one block; each tile's scores are kept
 * on the stack and folded into a running (max, sum, accumulator) triple --
 * the online softmax of FlashAttention, so memory does not grow with the
 * context and every K/V row is read once per head group.  Work items are
 * (query token, KV head, head group), spread over OpenMP threads with a
 * dynamic schedule because a causal chunk's later tokens see more keys.
 * Each item is computed by one thread in a fixed order, so results do not
 * depend on the thread count.
 *
 * An fp8 cache (one E4M3 byte per element) is read the same way: each tile's
 * K and V rows of the KV head are decoded to fp32 on the stack first (exact,
 * once per tile for every head of the group, through a 256-entry table: a
 * load per element, where decoding by arithmetic, even vectorized, made
 * decode attention about four times slower than over fp32), and the loops below run on
 * those rows.
 *
 * Block ids, lengths and chunk bounds are checked on the host thread before
 * the parallel loop; a bad one is -EINVAL and nothing is computed.
 */
#include <errno.h>
#include <math.h>

#include "cpu-int.h"

#define GROUP_HEADS 8   /* query heads processed together against one KV head */
#define TILE_KEYS 64    /* keys per score tile */

/* e^x for x <= 0 (softmax weights after subtracting the maximum), in a form
 * the compiler vectorizes (libm's expf is a call per element, and was half
 * of prefill attention's time).  Cephes' expf: x = n ln2 + r with |r| <=
 * ln2/2 (ln2 split in two for an exact product), e^r by a degree-5
 * polynomial plus 1 + r, times 2^n through the exponent bits.  Relative
 * error about 2 ulp; below -87 (e^x < 2^-126) it returns 0. */
static inline float exp_nonpos(float x)
{
	const float log2e = 1.44269504088896341f;
	const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
	float n, r, p;
	int32_t e;
	union { float f; int32_t i; } scale;

	if (x < -87.0f)
		x = -87.0f - 1.0f;
	n = __builtin_floorf(x * log2e + 0.5f);
	r = x - n * ln2_hi - n * ln2_lo;
	p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	e = (int32_t)n + 127;
	scale.i = (e > 0 ? e : 0) << 23;   /* 2^n, or 0 below the normal range */
	return p * scale.f;
}

struct attn_job {
	const struct kernel_kv_cache *c;
	int layer, heads, group;   /* group = heads / kv_heads */
	int subgroups;             /* ceil(group / GROUP_HEADS) */
	float scale;
	const float *lut;          /* fp8 E4M3 code -> value (cpu_priv) */
};

/* The build targets baseline x86-64 (SSE2, no FMA) so that binaries run
 * anywhere; the attention inner loops are also compiled for x86-64-v3
 * (AVX2, FMA) and the loader picks the variant the CPU runs (an ifunc).
 * Results differ between the two in the last bits, never between runs. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define ATTN_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
#endif
#ifndef ATTN_CLONES
#define ATTN_CLONES
#endif

/* Query heads h0 .. h0+ng-1 (all on KV head kvh) of one token row q attend to
 * positions 0 .. kv_len-1 through block table bt; results into out (same
 * layout as q). */
ATTN_CLONES static void attend(const struct attn_job *j, int kvh, int h0, int ng, const float *q,
		   int kv_len, const int32_t *bt, float *out)
{
	const struct kernel_kv_cache *c = j->c;
	const int d = c->head_dim, bs = c->block_size;
	const size_t ts = kv_token_elems(c);
	const bool fp8 = kernel_kv_cache_is_fp8(c);
	float acc[GROUP_HEADS][KERNEL_MAX_HEAD_DIM];
	float s[GROUP_HEADS][TILE_KEYS];
	float mx[GROUP_HEADS], sum[GROUP_HEADS];
	/* an fp8 tile decoded (128 KiB of stack at most, touched by fp8 caches only) */
	float kdq[TILE_KEYS * KERNEL_MAX_HEAD_DIM], vdq[TILE_KEYS * KERNEL_MAX_HEAD_DIM];

	for (int g = 0; g < ng; g++) {
		mx[g] = -INFINITY;
		sum[g] = 0;
		for (int e = 0; e < d; e++)
			acc[g][e] = 0;
	}
	for (int j0 = 0; j0 < kv_len;) {
		int off = j0 % bs, n = bs - off;
		size_t slot0 = (size_t)bt[j0 / bs] * bs + off;
		const float *kt, *vt;
		size_t rs = ts;   /* elements from one key's row to the next */

		if (n > TILE_KEYS)
			n = TILE_KEYS;
		if (n > kv_len - j0)
			n = kv_len - j0;
		if (fp8) {
			const uint8_t *kb = (const uint8_t *)kv_slot_ptr(c, c->k, j->layer, slot0) +
					    (size_t)kvh * d;
			const uint8_t *vb = (const uint8_t *)kv_slot_ptr(c, c->v, j->layer, slot0) +
					    (size_t)kvh * d;

			for (int k = 0; k < n; k++) {
				const uint8_t *kr = kb + k * ts, *vr = vb + k * ts;
				float *kd = kdq + k * d, *vd = vdq + k * d;

				for (int e = 0; e < d; e++) {
					kd[e] = j->lut[kr[e]];
					vd[e] = j->lut[vr[e]];
				}
			}
			kt = kdq;
			vt = vdq;
			rs = (size_t)d;
		} else {
			kt = kv_slot(c, c->k, j->layer, slot0) + (size_t)kvh * d;
			vt = kv_slot(c, c->v, j->layer, slot0) + (size_t)kvh * d;
		}
		for (int g = 0; g < ng; g++) {
			const float *qh = q + (size_t)(h0 + g) * d;
			float tmax = -INFINITY, corr;

			int k = 0;

			/* four keys at a time: four independent sums in flight */
			for (; k + 4 <= n; k += 4) {
				const float *k0 = kt + k * rs, *k1 = k0 + rs, *k2 = k1 + rs,
					    *k3 = k2 + rs;
				float d0 = 0, d1 = 0, d2 = 0, d3 = 0;

#pragma omp simd reduction(+ : d0, d1, d2, d3)
				for (int e = 0; e < d; e++) {
					d0 += qh[e] * k0[e];
					d1 += qh[e] * k1[e];
					d2 += qh[e] * k2[e];
					d3 += qh[e] * k3[e];
				}
				s[g][k] = d0 * j->scale;
				s[g][k + 1] = d1 * j->scale;
				s[g][k + 2] = d2 * j->scale;
				s[g][k + 3] = d3 * j->scale;
			}
			for (; k < n; k++) {
				const float *kr = kt + k * rs;
				float dot = 0;

#pragma omp simd reduction(+ : dot)
				for (int e = 0; e < d; e++)
					dot += qh[e] * kr[e];
				s[g][k] = dot * j->scale;
			}
			for (k = 0; k < n; k++)
				if (s[g][k] > tmax)
					tmax = s[g][k];
			if (tmax > mx[g]) {
				corr = expf(mx[g] - tmax);   /* 0 on the first tile */
				sum[g] *= corr;
				for (int e = 0; e < d; e++)
					acc[g][e] *= corr;
				mx[g] = tmax;
			}
			{
				float tsum = 0, m = mx[g];

#pragma omp simd reduction(+ : tsum)
				for (int k = 0; k < n; k++) {
					s[g][k] = exp_nonpos(s[g][k] - m);
					tsum += s[g][k];
				}
				sum[g] += tsum;
			}
			/* four V rows per pass over the accumulator */
			for (k = 0; k + 4 <= n; k += 4) {
				const float *v0 = vt + k * rs, *v1 = v0 + rs, *v2 = v1 + rs,
					    *v3 = v2 + rs;
				const float p0 = s[g][k], p1 = s[g][k + 1], p2 = s[g][k + 2],
					    p3 = s[g][k + 3];

#pragma omp simd
				for (int e = 0; e < d; e++)
					acc[g][e] += p0 * v0[e] + p1 * v1[e] + p2 * v2[e] + p3 * v3[e];
			}
			for (; k < n; k++) {
				const float *vr = vt + k * rs;
				const float p = s[g][k];

#pragma omp simd
				for (int e = 0; e < d; e++)
					acc[g][e] += p * vr[e];
			}
		}
		j0 += n;
	}
	for (int g = 0; g < ng; g++) {
		float inv = 1 / sum[g];
		float *o = out + (size_t)(h0 + g) * d;

		for (int e = 0; e < d; e++)
			o[e] = acc[g][e] * inv;
	}
}

/* Run work item w = ((row * kv_heads) + kvh) * subgroups + sub. */
static void attend_item(const struct attn_job *j, long w, const float *q, float *out,
			int kv_len, const int32_t *bt)
{
	int sub = (int)(w % j->subgroups);
	int kvh = (int)(w / j->subgroups % j->c->kv_heads);
	int h0 = kvh * j->group + sub * GROUP_HEADS;
	int ng = j->group - sub * GROUP_HEADS;

	if (ng > GROUP_HEADS)
		ng = GROUP_HEADS;
	attend(j, kvh, h0, ng, q, kv_len, bt, out);
}

/* Every block a request of kv_len tokens reads is inside the cache. */
static int check_table(const struct kernel_kv_cache *c, const int32_t *bt, int kv_len,
		       const char *op, int seq, struct ss_error *err)
{
	for (int b = 0; b < (kv_len + c->block_size - 1) / c->block_size; b++)
		if (bt[b] < 0 || bt[b] >= c->num_blocks)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: sequence %d's block table entry %d is %d, "
					    "outside the cache (%d blocks)", op, seq, b, bt[b],
					    c->num_blocks);
	return 0;
}

static void job_init(struct attn_job *j, const struct kernel_kv_cache *c, int layer, int heads,
		     float scale)
{
	j->c = c;
	j->layer = layer;
	j->heads = heads;
	j->group = heads / c->kv_heads;
	j->subgroups = (j->group + GROUP_HEADS - 1) / GROUP_HEADS;
	j->scale = scale;
}

int cpu_attn_prefill(void *priv, const struct kernel_attn_prefill_args *a, struct ss_error *err)
{
	const struct cpu_priv *p = priv;
	const int32_t *q_start = view_i32(&a->q_start), *ctx = view_i32(&a->context);
	const int32_t *bt0 = view_i32(&a->block_tables);
	struct attn_job j;
	long per_row, items;
	int rc;

	if (q_start[0] != 0 || q_start[a->n_seqs] != a->tokens)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "attn_prefill: q_start runs %d..%d, expected 0..%d",
				    q_start[0], q_start[a->n_seqs], a->tokens);
	for (int s = 0; s < a->n_seqs; s++) {
		int len = q_start[s + 1] - q_start[s];

		if (len < 0 || len > a->max_q_len || ctx[s] < 0 || ctx[s] + len > a->max_kv_len)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "attn_prefill: sequence %d's chunk of %d tokens after %d "
					    "is outside max_q_len %d / max_kv_len %d", s, len, ctx[s],
					    a->max_q_len, a->max_kv_len);
		rc = check_table(a->cache, bt0 + s * a->block_tables.ld, ctx[s] + len,
				 "attn_prefill", s, err);
		if (rc)
			return rc;
	}
	job_init(&j, a->cache, a->layer, a->heads, a->scale);
	j.lut = p->fp8_lut;
	per_row = (long)a->cache->kv_heads * j.subgroups;
	items = (long)a->tokens * per_row;
#pragma omp parallel for num_threads(p->threads) if (p->threads > 1) schedule(dynamic, 4)
	for (long w = 0; w < items; w++) {
		int t = (int)(w / per_row);
		int lo = 0, hi = a->n_seqs - 1;

		/* the sequence whose chunk holds row t: q_start[s] <= t < q_start[s+1] */
		while (lo < hi) {
			int mid = (lo + hi + 1) / 2;

			if (q_start[mid] <= t)
				lo = mid;
			else
				hi = mid - 1;
		}
		attend_item(&j, w, view_f32(&a->q) + t * a->q.ld, view_f32(&a->out) + t * a->out.ld,
			    ctx[lo] + (t - q_start[lo]) + 1, bt0 + lo * a->block_tables.ld);
	}
	return 0;
}

int cpu_attn_decode(void *priv, const struct kernel_attn_decode_args *a, struct ss_error *err)
{
	const struct cpu_priv *p = priv;
	const int32_t *kv_len = view_i32(&a->kv_len), *bt0 = view_i32(&a->block_tables);
	struct attn_job j;
	long per_row, items;
	int rc;

	for (int s = 0; s < a->n_seqs; s++) {
		if (kv_len[s] < 1 || kv_len[s] > a->max_kv_len)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "attn_decode: sequence %d's kv_len %d is outside 1..%d",
					    s, kv_len[s], a->max_kv_len);
		rc = check_table(a->cache, bt0 + s * a->block_tables.ld, kv_len[s],
				 "attn_decode", s, err);
		if (rc)
			return rc;
	}
	job_init(&j, a->cache, a->layer, a->heads, a->scale);
	j.lut = p->fp8_lut;
	per_row = (long)a->cache->kv_heads * j.subgroups;
	items = (long)a->n_seqs * per_row;
#pragma omp parallel for num_threads(p->threads) if (p->threads > 1) schedule(dynamic, 1)
	for (long w = 0; w < items; w++) {
		int s = (int)(w / per_row);

		attend_item(&j, w, view_f32(&a->q) + s * a->q.ld, view_f32(&a->out) + s * a->out.ld,
			    kv_len[s], bt0 + s * a->block_tables.ld);
	}
	return 0;
}
