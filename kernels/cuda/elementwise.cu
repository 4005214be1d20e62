/* servesim — the CUDA backend's row-wise operators and block copies:
 * RMSNorm, RoPE, SiLU-and-multiply / ReLU, kv_write, RoPE fused with
 * kv_write, gather, argmax, the device-to-device kv_copy kernel, and the
 * uniform fill that initialises weights on the device (docs/kernels.md,
 * "The CUDA backend").
 *
 * bf16 in memory, fp32 in registers, one rounding per output.  Row-wise
 * kernels take one block per row (grid-stride over rows beyond the grid
 * limit where rows can be many); copies use 16-byte vectors when the
 * views allow it (vec8_ok), bf16 elements otherwise.  Indices read from
 * device memory (positions, slots, gather indices) are range-checked: a bad
 * one skips its row and raises a fault that the next waiting call reports.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>

#include "cuda-int.h"

#define NORM_THREADS 256
#define ROPE_THREADS 128
#define FILL_THREADS 256
#define FILL_BLOCKS_PER_SM 16   /* fill_uniform grid: a grid-stride loop beyond this */
#define ACT_THREADS 256
#define COPY_THREADS 128
#define ARGMAX_THREADS 512
#define MAX_GRID_Y 65535
#define KV_COPY_BATCH 256   /* block pairs per kv_copy launch (kernel parameter space) */

static __device__ __forceinline__ float bf2f(bf16 h)
{
	return __bfloat162float(h);
}

static __device__ __forceinline__ bf16 f2bf(float f)
{
	return __float2bfloat16_rn(f);
}

/* Copy n elements of T (bf16, or fp8 in KV block copies) from src to dst
 * (16-byte vectors when vec, the caller having checked alignment), by the
 * threads of one block. */
template <typename T>
static __device__ __forceinline__ void copy_row(T *dst, const T *src, size_t n, bool vec)
{
	if (vec) {
		const uint4 *s = (const uint4 *)src;
		uint4 *d = (uint4 *)dst;

		for (size_t i = threadIdx.x; i < n / (16 / sizeof(T)); i += blockDim.x)
			d[i] = s[i];
	} else {
		for (size_t i = threadIdx.x; i < n; i += blockDim.x)
			dst[i] = src[i];
	}
}

/* ---- RMSNorm ---- */

/* One block per row: the sum of squares in fp32 (per thread, then across
 * warps in a fixed order), then out = x * rsqrt(mean + eps) * w.  out may
 * be x: each element is read and written by the same thread. */
__global__ void __launch_bounds__(NORM_THREADS)
rmsnorm_kernel(const bf16 *x, size_t ldx, const bf16 *__restrict__ w, bf16 *out, size_t ldo,
	       int rows, int cols, float eps)
{
	__shared__ float part[NORM_THREADS / 32];
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

	for (int r = blockIdx.x; r < rows; r += gridDim.x) {
		const bf16 *xr = x + (size_t)r * ldx;
		bf16 *orow = out + (size_t)r * ldo;
		float ss = 0, inv;

		for (int c = threadIdx.x; c < cols; c += NORM_THREADS) {
			float v = bf2f(xr[c]);

			ss += v * v;
		}
		ss = warp_sum(ss);
		if (lane == 0)
			part[warp] = ss;
		__syncthreads();
		ss = 0;
		for (int i = 0; i < NORM_THREADS / 32; i++)
			ss += part[i];
		inv = rsqrtf(ss / (float)cols + eps);
		for (int c = threadIdx.x; c < cols; c += NORM_THREADS)
			orow[c] = f2bf(bf2f(xr[c]) * inv * bf2f(w[c]));
		__syncthreads();   /* part is reused by the next row */
	}
}

int cuda_rmsnorm(void *priv, const struct kernel_rmsnorm_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const int grid = a->rows < INT_MAX ? a->rows : INT_MAX;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	rmsnorm_kernel<<<grid, NORM_THREADS, 0, p->stream>>>(
		vbf(&a->x), row_ld(&a->x, a->rows, a->cols), vbf(&a->weight), vbf(&a->out),
		row_ld(&a->out, a->rows, a->cols), a->rows, a->cols, a->eps);
	return cuda_launched(err, "rmsnorm_kernel");
}

/* ---- RoPE ---- */

/* Rotate the pair (a, b) by the angle of (cs, sn): the one expression
 * rope_kernel and rope_kv_write_kernel share. */
static __device__ __forceinline__ void rot_pair(bf16 *a, bf16 *b, float cs, float sn)
{
	float x1 = bf2f(*a), x2 = bf2f(*b);

	*a = f2bf(x1 * cs - x2 * sn);
	*b = f2bf(x2 * cs + x1 * sn);
}

static __device__ __forceinline__ void rotate(bf16 *x, int i, int half, float cs, float sn)
{
	rot_pair(x + i, x + i + half, cs, sn);
}

/* One block per token; thread i of the rotation pairs computes its angle
 * once (in double, as the CPU backend: pos x theta^(-2i/d) in fp32 would
 * lose pos x 6e-8 rad) and rotates pair i of every Q and K head. */
__global__ void __launch_bounds__(ROPE_THREADS)
rope_kernel(bf16 *q, size_t ldq, bf16 *k, size_t ldk, const int32_t *__restrict__ pos,
	    int tokens, int heads, int kv_heads, int d, double theta, struct cuda_fault_ref fault)
{
	const int half = d / 2;

	for (int t = blockIdx.x; t < tokens; t += gridDim.x) {
		const int ps = pos[t];

		if (ps < 0) {
			if (threadIdx.x == 0)
				cuda_fault_raise(fault, FAULT_ROPE_POS, t, 0, ps, 0, 0);
			continue;
		}
		for (int i = threadIdx.x; i < half; i += ROPE_THREADS) {
			double sn, cs;

			sincos((double)ps * pow(theta, -2.0 * i / d), &sn, &cs);
			for (int h = 0; h < heads; h++)
				rotate(q + (size_t)t * ldq + (size_t)h * d, i, half, (float)cs, (float)sn);
			for (int h = 0; h < kv_heads; h++)
				rotate(k + (size_t)t * ldk + (size_t)h * d, i, half, (float)cs, (float)sn);
		}
	}
}

int cuda_rope(void *priv, const struct kernel_rope_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const int grid = a->tokens < INT_MAX ? a->tokens : INT_MAX;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	rope_kernel<<<grid, ROPE_THREADS, 0, p->stream>>>(
		a->heads ? vbf(&a->q) : NULL, row_ld(&a->q, a->tokens, (long)a->heads * a->head_dim),
		a->kv_heads ? vbf(&a->k) : NULL,
		row_ld(&a->k, a->tokens, (long)a->kv_heads * a->head_dim), vi32(&a->pos), a->tokens,
		a->heads, a->kv_heads, a->head_dim, (double)a->theta, p->fault_ref);
	return cuda_launched(err, "rope_kernel");
}

/* ---- activations ---- */

/* grid.x covers a row's width, grid.y strides over the rows.  SILU_MUL
 * reads the gate at column c and the up projection at width + c. */
__global__ void __launch_bounds__(ACT_THREADS)
act_kernel(const bf16 *in, size_t ldi, bf16 *out, size_t ldo, int tokens, int width, bool silu)
{
	const int c = blockIdx.x * ACT_THREADS + threadIdx.x;

	if (c >= width)
		return;
	for (int t = blockIdx.y; t < tokens; t += gridDim.y) {
		const bf16 *row = in + (size_t)t * ldi;
		float g = bf2f(row[c]), y;

		if (silu)
			y = g / (1.0f + expf(-g)) * bf2f(row[width + c]);
		else
			y = g > 0 ? g : 0.0f;
		out[(size_t)t * ldo + c] = f2bf(y);
	}
}

int cuda_act(void *priv, const struct kernel_act_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const bool silu = a->act == KERNEL_ACT_SILU_MUL;
	dim3 grid((unsigned)((a->width + ACT_THREADS - 1) / ACT_THREADS),
		  (unsigned)(a->tokens < MAX_GRID_Y ? a->tokens : MAX_GRID_Y));
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	act_kernel<<<grid, ACT_THREADS, 0, p->stream>>>(
		vbf(&a->in), row_ld(&a->in, a->tokens, silu ? 2L * a->width : a->width), vbf(&a->out),
		row_ld(&a->out, a->tokens, a->width), a->tokens, a->width, silu);
	return cuda_launched(err, "act_kernel");
}

/* ---- KV cache writes ---- */

/* Eight bf16 (16 bytes) as eight fp8 (8 bytes), kv_store's rounding. */
static __device__ __forceinline__ uint2 bf16x8_to_fp8x8(uint4 raw)
{
	const __nv_bfloat162 *h2 = (const __nv_bfloat162 *)&raw;
	uint16_t w[4];

	for (int z = 0; z < 4; z++)
		w[z] = __nv_cvt_float2_to_fp8x2(__bfloat1622float2(h2[z]), __NV_SATFINITE,
						__NV_E4M3);
	return make_uint2((uint32_t)w[0] | (uint32_t)w[1] << 16,
			  (uint32_t)w[2] | (uint32_t)w[3] << 16);
}

/* Row src of n bf16 into a cache row of fp8 (kv_store's rounding): 8
 * elements at a time when vec (a 16-byte load, an 8-byte store), else one
 * by one. */
static __device__ __forceinline__ void store_row_fp8(fp8 *dst, const bf16 *src, size_t n,
						     bool vec)
{
	if (vec) {
		for (size_t i = threadIdx.x; i < n / 8; i += blockDim.x)
			((uint2 *)dst)[i] = bf16x8_to_fp8x8(((const uint4 *)src)[i]);
	} else {
		for (size_t i = threadIdx.x; i < n; i += blockDim.x)
			kv_store(dst + i, bf2f(src[i]));
	}
}

/* One block per token: its K and V rows (kv_heads x head_dim) to slot
 * slots[t] of the layer; slot -1 is padding.  T is the cache's element:
 * bf16 rows are copied, fp8 rows rounded (kv_store). */
template <typename T>
__global__ void __launch_bounds__(COPY_THREADS)
kv_write_kernel(const bf16 *__restrict__ k, size_t ldk, const bf16 *__restrict__ v, size_t ldv,
		const int32_t *__restrict__ slots, T *kc, T *vc, int tokens, long long n_slots,
		size_t kvw, bool vec, struct cuda_fault_ref fault)
{
	for (int t = blockIdx.x; t < tokens; t += gridDim.x) {
		const int slot = slots[t];

		if (slot < 0)
			continue;
		if (slot >= n_slots) {
			if (threadIdx.x == 0)
				cuda_fault_raise(fault, FAULT_KV_SLOT, t, 0, slot,
						 n_slots < INT_MAX ? (int)n_slots : INT_MAX, 0);
			continue;
		}
		if constexpr (sizeof(T) == 1) {
			store_row_fp8(kc + (size_t)slot * kvw, k + (size_t)t * ldk, kvw, vec);
			store_row_fp8(vc + (size_t)slot * kvw, v + (size_t)t * ldv, kvw, vec);
		} else {
			copy_row(kc + (size_t)slot * kvw, k + (size_t)t * ldk, kvw, vec);
			copy_row(vc + (size_t)slot * kvw, v + (size_t)t * ldv, kvw, vec);
		}
	}
}

int cuda_kv_write(void *priv, const struct kernel_kv_write_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const struct kernel_kv_cache *c = a->cache;
	const size_t kvw = kv_token_elems(c);
	const size_t layer = (size_t)c->num_blocks * c->block_size * kvw;
	const size_t ldk = row_ld(&a->k, a->tokens, (long)kvw), ldv = row_ld(&a->v, a->tokens, (long)kvw);
	const bool vec = vec8_ok(a->k.off, ldk, (long)kvw) && vec8_ok(a->v.off, ldv, (long)kvw);
	const int grid = a->tokens < INT_MAX ? a->tokens : INT_MAX;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	/* vec: the views allow 16-byte loads of 8 bf16, and kvw % 8 == 0 makes
	 * every fp8 cache row 8-byte aligned for the 8-element stores */
	if (kernel_kv_cache_is_fp8(c))
		kv_write_kernel<fp8><<<grid, COPY_THREADS, 0, p->stream>>>(
			vbf(&a->k), ldk, vbf(&a->v), ldv, vi32(&a->slots),
			(fp8 *)c->k + a->layer * layer, (fp8 *)c->v + a->layer * layer, a->tokens,
			(long long)c->num_blocks * c->block_size, kvw, vec, p->fault_ref);
	else
		kv_write_kernel<bf16><<<grid, COPY_THREADS, 0, p->stream>>>(
			vbf(&a->k), ldk, vbf(&a->v), ldv, vi32(&a->slots),
			(bf16 *)c->k + a->layer * layer, (bf16 *)c->v + a->layer * layer, a->tokens,
			(long long)c->num_blocks * c->block_size, kvw, vec, p->fault_ref);
	return cuda_launched(err, "kv_write_kernel");
}

/* ---- RoPE fused with the KV write ---- */

/* One block per token (grid-stride): the block computes the token's
 * rotation angles once into shared memory (in double, as rope_kernel), then
 * its threads take work items (head, group of pairs) over the q heads and
 * the k heads: an item rotates its pairs in place and, for a k head with a
 * slot, stores the rotated values to the cache too, so k is read and
 * written once instead of twice; v is copied as in kv_write_kernel.  With
 * vec (every view's offset and stride and half of head_dim multiples of 8
 * bf16) an item is 8 pairs, two 16-byte loads and two (four for k) 16-byte
 * stores; otherwise one pair and element accesses.  The arithmetic of a
 * pair is rot_pair(), rope_kernel's, so the result equals rope_kernel then
 * kv_write_kernel.
 * A negative position skips the token (FAULT_ROPE_POS), a slot past the
 * cache skips its write (FAULT_KV_SLOT); extra = 1 names the fused op. */
template <typename T>
__global__ void __launch_bounds__(ROPE_THREADS)
rope_kv_write_kernel(bf16 *q, size_t ldq, bf16 *k, size_t ldk, const bf16 *__restrict__ v,
		     size_t ldv, const int32_t *__restrict__ pos, const int32_t *__restrict__ slots,
		     T *kc, T *vc, int tokens, int heads, int kv_heads, int d, double theta,
		     long long n_slots, bool vec, struct cuda_fault_ref fault)
{
	__shared__ float cs_s[KERNEL_MAX_HEAD_DIM / 2], sn_s[KERNEL_MAX_HEAD_DIM / 2];
	const int half = d / 2, per = vec ? 8 : 1, groups = half / per;
	const int items = (heads + kv_heads) * groups;
	const size_t kvw = (size_t)kv_heads * d;

	for (int t = blockIdx.x; t < tokens; t += gridDim.x) {
		const int ps = pos[t], slot = slots[t];
		const bool write = slot >= 0 && slot < n_slots;

		if (ps < 0) {
			if (threadIdx.x == 0)
				cuda_fault_raise(fault, FAULT_ROPE_POS, t, 0, ps, 0, 1);
			continue;
		}
		if (slot >= n_slots && threadIdx.x == 0)
			cuda_fault_raise(fault, FAULT_KV_SLOT, t, 0, slot,
					 n_slots < INT_MAX ? (int)n_slots : INT_MAX, 1);
		for (int i = threadIdx.x; i < half; i += ROPE_THREADS) {
			double sn, cs;

			sincos((double)ps * pow(theta, -2.0 * i / d), &sn, &cs);
			cs_s[i] = (float)cs;
			sn_s[i] = (float)sn;
		}
		__syncthreads();
		for (int it = threadIdx.x; it < items; it += ROPE_THREADS) {
			const int h = it / groups, i0 = it % groups * per;
			const bool is_k = h >= heads;
			bf16 *x = is_k ? k + (size_t)t * ldk + (size_t)(h - heads) * d
				       : q + (size_t)t * ldq + (size_t)h * d;
			T *cx = is_k && write ? kc + (size_t)slot * kvw + (size_t)(h - heads) * d
					    : NULL;

			if (vec) {
				uint4 lo = *(const uint4 *)(x + i0), hi = *(const uint4 *)(x + half + i0);
				bf16 *l = (bf16 *)&lo, *u = (bf16 *)&hi;

#pragma unroll
				for (int j = 0; j < 8; j++)
					rot_pair(l + j, u + j, cs_s[i0 + j], sn_s[i0 + j]);
				*(uint4 *)(x + i0) = lo;
				*(uint4 *)(x + half + i0) = hi;
				if (cx && sizeof(T) == 1) {   /* fp8: 8 bytes a half */
					*(uint2 *)(cx + i0) = bf16x8_to_fp8x8(lo);
					*(uint2 *)(cx + half + i0) = bf16x8_to_fp8x8(hi);
				} else if (cx) {
					*(uint4 *)(cx + i0) = lo;
					*(uint4 *)(cx + half + i0) = hi;
				}
			} else {
				rotate(x, i0, half, cs_s[i0], sn_s[i0]);
				if (cx) {
					kv_store(cx + i0, bf2f(x[i0]));
					kv_store(cx + i0 + half, bf2f(x[i0 + half]));
				}
			}
		}
		if (write) {
			if constexpr (sizeof(T) == 1)
				store_row_fp8(vc + (size_t)slot * kvw, v + (size_t)t * ldv, kvw, vec);
			else
				copy_row(vc + (size_t)slot * kvw, v + (size_t)t * ldv, kvw, vec);
		}
		__syncthreads();   /* cs_s and sn_s are rewritten for the next token */
	}
}

int cuda_rope_kv_write(void *priv, const struct kernel_rope_kv_write_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const struct kernel_kv_cache *c = a->cache;
	const int d = c->head_dim;
	const size_t kvw = kv_token_elems(c);
	const size_t layer = (size_t)c->num_blocks * c->block_size * kvw;
	const size_t ldq = row_ld(&a->q, a->tokens, (long)a->heads * d);
	const size_t ldk = row_ld(&a->k, a->tokens, (long)kvw), ldv = row_ld(&a->v, a->tokens, (long)kvw);
	/* 16-byte accesses: q, k and v rows and the pair groups (d / 2) on
	 * 8-element boundaries (then so are the cache's rows). */
	const bool vec = (d / 2) % 8 == 0 && (!a->heads || vec8_ok(a->q.off, ldq, 8)) &&
			 vec8_ok(a->k.off, ldk, 8) && vec8_ok(a->v.off, ldv, 8);
	const int grid = a->tokens < INT_MAX ? a->tokens : INT_MAX;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	/* fp8 caches: vec also makes every K half-row and V row of the cache
	 * 8-byte aligned (d and kv_heads x d multiples of 16) */
	if (kernel_kv_cache_is_fp8(c))
		rope_kv_write_kernel<fp8><<<grid, ROPE_THREADS, 0, p->stream>>>(
			a->heads ? vbf(&a->q) : NULL, ldq, vbf(&a->k), ldk, vbf(&a->v), ldv,
			vi32(&a->pos), vi32(&a->slots), (fp8 *)c->k + a->layer * layer,
			(fp8 *)c->v + a->layer * layer, a->tokens, a->heads, c->kv_heads, d,
			(double)a->theta, (long long)c->num_blocks * c->block_size, vec, p->fault_ref);
	else
		rope_kv_write_kernel<bf16><<<grid, ROPE_THREADS, 0, p->stream>>>(
			a->heads ? vbf(&a->q) : NULL, ldq, vbf(&a->k), ldk, vbf(&a->v), ldv,
			vi32(&a->pos), vi32(&a->slots), (bf16 *)c->k + a->layer * layer,
			(bf16 *)c->v + a->layer * layer, a->tokens, a->heads, c->kv_heads, d,
			(double)a->theta, (long long)c->num_blocks * c->block_size, vec, p->fault_ref);
	return cuda_launched(err, "rope_kv_write_kernel");
}

/* ---- uniform fill (weights drawn on the device) ---- */

/* x[i] = bias + scale * u(key, i) (backend.h).  A thread draws a group of
 * 8 consecutive elements and stores them with one 16-byte store when vec
 * (x on an 8-element boundary) and the group is whole, else element by
 * element; grid-stride over the groups.  u is exact (kernel_uniform_u,
 * shared with the host backends); the product and the sum are __fmul_rn
 * and __fadd_rn so nvcc cannot contract them into an FMA, which rounds
 * once where the host rounds twice: the bf16 result is then the host's
 * fp32 value rounded to nearest even, bit for bit. */
__global__ void __launch_bounds__(FILL_THREADS)
fill_uniform_kernel(bf16 *x, size_t n, unsigned long long key, float scale, float bias, bool vec)
{
	const size_t groups = (n + 7) / 8, stride = (size_t)gridDim.x * FILL_THREADS;

	for (size_t g = (size_t)blockIdx.x * FILL_THREADS + threadIdx.x; g < groups; g += stride) {
		const size_t i0 = g * 8;
		const int m = n - i0 < 8 ? (int)(n - i0) : 8;
		uint4 pack;
		bf16 *v = (bf16 *)&pack;

		/* all 8 drawn (a tail group's extra draws are never stored), so
		 * the unrolled loops index pack with constants: registers */
#pragma unroll
		for (int j = 0; j < 8; j++)
			v[j] = f2bf(__fadd_rn(bias, __fmul_rn(scale, kernel_uniform_u(key, i0 + j))));
		if (vec && m == 8) {
			*(uint4 *)(x + i0) = pack;
		} else {
#pragma unroll
			for (int j = 0; j < 8; j++)
				if (j < m)
					x[i0 + j] = v[j];
		}
	}
}

int cuda_fill_uniform(void *priv, const struct kernel_fill_uniform_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const size_t need = (a->n + 8 * FILL_THREADS - 1) / (8 * FILL_THREADS);
	const size_t cap = (size_t)(p->sms > 0 ? p->sms : 1) * FILL_BLOCKS_PER_SM;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	fill_uniform_kernel<<<(unsigned)(need < cap ? need : cap), FILL_THREADS, 0, p->stream>>>(
		vbf(&a->x), a->n, (unsigned long long)a->key, a->scale, a->bias, a->x.off % 8 == 0);
	return cuda_launched(err, "fill_uniform_kernel");
}

/* ---- gather ---- */

__global__ void __launch_bounds__(COPY_THREADS)
gather_kernel(const bf16 *__restrict__ src, size_t lds, const int32_t *__restrict__ idx,
	      bf16 *__restrict__ out, size_t ldo, int rows, int cols, int src_rows, bool vec,
	      struct cuda_fault_ref fault)
{
	for (int r = blockIdx.x; r < rows; r += gridDim.x) {
		const int i = idx[r];

		if (i < 0 || i >= src_rows) {
			if (threadIdx.x == 0)
				cuda_fault_raise(fault, FAULT_GATHER_IDX, r, 0, i, src_rows, 0);
			continue;
		}
		copy_row(out + (size_t)r * ldo, src + (size_t)i * lds, (size_t)cols, vec);
	}
}

int cuda_gather(void *priv, const struct kernel_gather_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const size_t lds = row_ld(&a->src, a->src_rows, a->cols), ldo = row_ld(&a->out, a->rows, a->cols);
	const bool vec = vec8_ok(a->src.off, lds, a->cols) && vec8_ok(a->out.off, ldo, a->cols);
	const int grid = a->rows < INT_MAX ? a->rows : INT_MAX;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	gather_kernel<<<grid, COPY_THREADS, 0, p->stream>>>(
		vbf(&a->src), lds, vi32(&a->idx), vbf(&a->out), ldo, a->rows, a->cols, a->src_rows, vec,
		p->fault_ref);
	return cuda_launched(err, "gather_kernel");
}

/* ---- argmax ---- */

/* (value, column) a beats b: larger, or equal at an earlier column, so the
 * first column holding the maximum wins as in the reference. */
static __device__ __forceinline__ bool beats(float av, int ai, float bv, int bi)
{
	return av > bv || (av == bv && ai < bi);
}

/* One block per row: each thread scans its columns in order, then the
 * block reduces (value, column) pairs. */
__global__ void __launch_bounds__(ARGMAX_THREADS)
argmax_kernel(const bf16 *__restrict__ x, size_t ldx, int32_t *__restrict__ out, int rows,
	      int cols)
{
	__shared__ float sv[ARGMAX_THREADS / 32];
	__shared__ int si[ARGMAX_THREADS / 32];
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

	for (int r = blockIdx.x; r < rows; r += gridDim.x) {
		const bf16 *xr = x + (size_t)r * ldx;
		float bv = -INFINITY;
		int bi = INT_MAX;

		for (int c = threadIdx.x; c < cols; c += ARGMAX_THREADS) {
			float v = bf2f(xr[c]);

			if (bi == INT_MAX || v > bv) {
				bv = v;
				bi = c;
			}
		}
		for (int o = 16; o > 0; o >>= 1) {
			float ov = __shfl_xor_sync(FULL_MASK, bv, o);
			int oi = __shfl_xor_sync(FULL_MASK, bi, o);

			if (beats(ov, oi, bv, bi)) {
				bv = ov;
				bi = oi;
			}
		}
		if (lane == 0) {
			sv[warp] = bv;
			si[warp] = bi;
		}
		__syncthreads();
		if (threadIdx.x == 0) {
			for (int w = 1; w < ARGMAX_THREADS / 32; w++)
				if (beats(sv[w], si[w], bv, bi)) {
					bv = sv[w];
					bi = si[w];
				}
			out[r] = bi;
		}
		__syncthreads();
	}
}

int cuda_argmax(void *priv, const struct kernel_argmax_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const int grid = a->rows < INT_MAX ? a->rows : INT_MAX;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	argmax_kernel<<<grid, ARGMAX_THREADS, 0, p->stream>>>(
		vbf(&a->x), row_ld(&a->x, a->rows, a->cols), vi32(&a->out), a->rows, a->cols);
	return cuda_launched(err, "argmax_kernel");
}

/* ---- block copies within the device ---- */

/* Up to KV_COPY_BATCH (source, destination) block pairs, by value in the
 * kernel's parameters: no staging buffer whose lifetime must be tracked. */
struct kv_copy_batch {
	int n;
	int32_t src[KV_COPY_BATCH], dst[KV_COPY_BATCH];
};

/* grid (pair, layer, K or V): one block copies one block of one layer.
 * T is the caches' element (bf16 or fp8): sizes count elements. */
template <typename T>
__global__ void __launch_bounds__(COPY_THREADS)
kv_copy_kernel(const T *sk, const T *sv, T *dk, T *dv, size_t s_layer, size_t d_layer,
	       size_t block, bool vec, struct kv_copy_batch b)
{
	const int i = blockIdx.x, l = blockIdx.y;
	const T *from = (blockIdx.z ? sv : sk) + l * s_layer + (size_t)b.src[i] * block;
	T *to = (blockIdx.z ? dv : dk) + l * d_layer + (size_t)b.dst[i] * block;

	copy_row(to, from, block, vec);
}

int cuda_kv_copy_device(struct cuda_priv *p, const struct kernel_kv_copy_args *a,
			struct ss_error *err)
{
	const struct kernel_kv_cache *s = a->src, *d = a->dst;
	const size_t block = (size_t)s->block_size * kv_token_elems(s);
	const bool same = s->k == d->k;
	struct kv_copy_batch b;
	dim3 grid;
	int i = 0;

	while (i < a->n) {
		b.n = 0;
		for (; i < a->n && b.n < KV_COPY_BATCH; i++) {
			if (same && a->src_ids[i] == a->dst_ids[i])
				continue;
			b.src[b.n] = a->src_ids[i];
			b.dst[b.n] = a->dst_ids[i];
			b.n++;
		}
		if (!b.n)
			break;
		grid = dim3((unsigned)b.n, (unsigned)s->layers, 2);
		if (kernel_kv_cache_is_fp8(s))   /* 16-byte copies: 16 fp8 */
			kv_copy_kernel<fp8><<<grid, COPY_THREADS, 0, p->stream>>>(
				(const fp8 *)s->k, (const fp8 *)s->v, (fp8 *)d->k, (fp8 *)d->v,
				(size_t)s->num_blocks * block, (size_t)d->num_blocks * block, block,
				block % 16 == 0, b);
		else
			kv_copy_kernel<bf16><<<grid, COPY_THREADS, 0, p->stream>>>(
				(const bf16 *)s->k, (const bf16 *)s->v, (bf16 *)d->k, (bf16 *)d->v,
				(size_t)s->num_blocks * block, (size_t)d->num_blocks * block, block,
				block % 8 == 0, b);
		if (cuda_launched(err, "kv_copy_kernel"))
			return -EIO;
	}
	return 0;
}
