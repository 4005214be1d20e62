/* servesim — the CUDA backend's attention over the paged KV cache
 * (docs/kernels.md, "The CUDA backend").
 *
 * Both kernels read K and V only through block tables (position j of a
 * request is block table[j / block_size], offset j % block_size) and keep
 * FlashAttention's online softmax: a running maximum m, sum l and output
 * accumulator per query row, rescaled by exp(m_old - m_new) whenever a tile
 * of keys raises the maximum, so nothing grows with the context.  Scores
 * are computed in fp32 from bf16 Q and K and pre-multiplied by
 * scale x log2(e) so the weights are exp2f of them; P stays fp32 (bf16 on
 * the tensor cores) and P.V accumulates in fp32; the output is rounded to
 * bf16 once.  Grouped-query heads that share a KV head are processed
 * together, so each K/V row fetched serves the whole group.
 *
 * Prefill takes the tensor-core kernel (prefill_mma_kernel, described at
 * its definition: FlashAttention-2's forward pass on mma.sync, ldmatrix
 * and cp.async, P in bf16) when head_dim is a multiple of 16, the Q and
 * output rows allow 16-byte copies, its tiles fit the device's shared
 * memory (prefill_mma_ok) and the cache is bf16; otherwise the CUDA-core
 * kernel below, which also reads fp8 caches (converting each K/V tile to
 * bf16 in shared memory).
 *
 * Prefill on CUDA cores (prefill_kernel): FlashAttention-2's varlen form.  A block of 256
 * threads (16 x 16) owns PF_ROWS = 64 query rows of one sequence and one KV
 * head, a row being a (token, head of the group) pair, and walks the keys
 * 0 .. context + its last token in tiles of PF_KEYS = 64.  Per tile: the K
 * tile is fetched through the block table into shared memory, each thread
 * computes a 4 x 4 block of scores (rows ty*4.., keys tx + 16c), applies the
 * causal mask (key j <= context + token), updates its rows' running max
 * with a reduction over the 16 threads sharing them, writes P (transposed)
 * to shared memory, then the V tile replaces K and each thread accumulates
 * its 4 rows x (head_dim / 16) output columns.  Shared memory: Q, one K/V
 * tile (bf16 rows padded to an odd number of 32-bit words, so the 16
 * different keys a warp reads fall in 16 different banks) and P: 50 KiB at
 * head_dim 128, 82 KiB at 256.
 *
 * Decode (decode_kernel, decode_reduce_kernel): flash-decoding, as vLLM's
 * paged_attention_v2 and FlashInfer's split-KV decode.  The grid is
 * sequences x (KV heads x chunks of up to DEC_GROUP query heads of a group)
 * x partitions; a block of 4 warps owns one partition of a sequence's keys
 * (part keys, a multiple of DEC_PART_MIN = 256) for every query head of its
 * chunk, so the heads of a GQA group share each K and V row fetched.  The
 * warps take tiles of 32 keys in turn; in a tile each lane scores one key
 * against every head of the chunk (its K row read with 16-byte loads),
 * then the warp reads the tile's V rows d/8 lanes to a row, 16 bytes a
 * lane (32/(d/8) rows at once), each lane accumulating its 8 columns.  The
 * warps' (m, l, accumulator) are merged in shared memory; a sequence that
 * fits one partition writes its output there, a longer one writes the
 * partition's fp32 accumulator, maximum and sum, and decode_reduce_kernel
 * combines its partitions by their log-sum-exp.  decode_split chooses the
 * partition length from the grid the batch alone makes: no split when the
 * sequences x KV heads fill the GPU (DEC_BLOCKS_PER_SM blocks per SM) or
 * the longest context is at most 256 keys, otherwise enough partitions to
 * fill it (batch 1 at 32K keys and 8 KV heads: 64 partitions of 512).
 *
 * fp8 KV caches (cache->dtype KERNEL_DTYPE_FP8_E4M3, one byte per element)
 * go through the same kernels, templated on the cache's element type KV:
 * decode reads K rows with 16-byte loads of 16 fp8 and V rows with 8-byte
 * loads of 8 (a lane keeps 8 output columns per head either way) and
 * dequantises in registers (scale 1.0); the prefill kernel converts each
 * K/V tile to bf16 as it stores it in shared memory, which is exact (every
 * E4M3 value is a bf16 value), so everything after the load is unchanged.
 *
 * Block ids and lengths are read from device memory, so the kernels check
 * them: a block id outside the cache reads as zeros, a bad chunk or length
 * skips its sequence, and either raises a fault (-EINVAL at the next call
 * that waits).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>

#include "cuda-int.h"
#include "warp-mma.h"  /* not "mma.h": the toolkit has one (WMMA) */

#define LOG2E 1.4426950408889634f

#define PF_ROWS 64              /* query rows (token, head) per block */
#define PF_KEYS 64              /* keys per tile */
#define PF_THREADS 256          /* 16 x 16 */
#define PF_PS (PF_ROWS + 4)     /* floats per key in the transposed P tile (16-byte rows) */

#define MMA_KEYS 64             /* keys per K / V tile of the tensor-core prefill */
#define MMA_WARPS 4             /* its warps, 16 x MT query rows each */
#define MMA_THREADS (32 * MMA_WARPS)
#define MMA_PAD 8               /* bf16 of padding per shared-memory row (16 bytes) */

#define DEC_WARPS 4
#define DEC_THREADS (32 * DEC_WARPS)
#define DEC_GROUP 8             /* query heads per decode block */
#define DEC_TILE (32 * DEC_WARPS)       /* keys a decode block's warps take in one round */
#define DEC_PART_MIN 256        /* keys per partition, at least (a multiple of DEC_TILE) */
#define DEC_BLOCKS_PER_SM 4     /* decode blocks per SM the split aims for */
#define DEC_WS_MAX ((size_t)256 << 20)  /* bytes of partials a split launch may use */

#define MAX_GRID_YZ 65535

struct prefill_params {
	const bf16 *q;                  /* [tokens, ldq]: head h at column h * d */
	size_t ldq;
	bf16 *out;
	size_t ldo;
	const int32_t *q_start, *context;
	const int32_t *bt;              /* [n_seqs, ldbt] */
	size_t ldbt;
	const void *kc, *vc;            /* the layer's slab of K and V (bf16 or fp8) */
	int num_blocks, bs, kv_heads, d, group;
	int tokens, max_q_len, max_kv_len;
	float scale_log2;               /* softmax scale x log2(e) */
	bool vec_q, vec_kv;             /* rows allow 16-byte loads */
	struct cuda_fault_ref fault;
};

struct decode_params {
	const bf16 *q;
	size_t ldq;
	bf16 *out;
	size_t ldo;
	const int32_t *kv_len;
	const int32_t *bt;
	size_t ldbt;
	const void *kc, *vc;            /* bf16 or fp8 (the kernel's KV) */
	int num_blocks, bs, kv_heads, d, group;
	int max_kv_len;
	float scale_log2;
	bool vec_kv;                    /* V rows allow 8-element vector loads (d % 8 == 0) */
	bool vec_k;                     /* K rows allow 16-byte loads (d % (16 / element) == 0) */
	int part;                       /* keys per partition (>= max_kv_len: one) */
	int parts;                      /* partitions in the grid (gridDim.z) */
	float *po;                      /* [n_seqs, heads, parts, d] partial accumulators */
	float *pm, *pl;                 /* [n_seqs, heads, parts] their maxima and sums */
	struct cuda_fault_ref fault;
};

static __device__ __forceinline__ float bf2f(bf16 h)
{
	return __bfloat162float(h);
}

/* 32-bit words per shared-memory row of a head: at least ceil(d / 2), odd. */
static __host__ __device__ __forceinline__ int smem_row_words(int d)
{
	return ((d + 1) / 2) | 1;
}

/* Dynamic shared memory of prefill_kernel at head dimension d, bytes. */
static size_t prefill_smem(int d)
{
	return (size_t)(PF_ROWS + PF_KEYS) * smem_row_words(d) * 4 + (size_t)PF_KEYS * PF_PS * 4;
}

/* Element offset, within the layer's slab, of position j's row of KV head
 * kvh for a request with block table bt; -1 (and a fault) when its block
 * id is outside the cache. */
static __device__ __forceinline__ long long key_offset(const int32_t *bt, int j, int bs,
						       int num_blocks, size_t kvw, int kvh, int d,
						       int seq, int fault_op,
						       struct cuda_fault_ref fault)
{
	const int b = bt[j / bs];

	if (b < 0 || b >= num_blocks) {
		cuda_fault_raise(fault, fault_op, seq, j / bs, b, num_blocks, 0);
		return -1;
	}
	return (long long)(((size_t)b * bs + j % bs) * kvw + (size_t)kvh * d);
}

/* One element of a row as bf16: itself, or an fp8 one converted (exact). */
static __device__ __forceinline__ bf16 to_bf16(bf16 x)
{
	return x;
}

static __device__ __forceinline__ bf16 to_bf16(fp8 x)
{
	return __float2bfloat16_rn(kv_load(x));
}

/* Copy PF_ROWS-or-PF_KEYS rows of d elements of T (bf16, or an fp8 cache's)
 * to shared memory rows of sw words of bf16; row r comes from base +
 * off[r], a row with off[r] < 0 is zeros.  Elements past d in a row's last
 * word are zero (odd d).  vec: 8 elements a load (16 bytes of bf16, 8 of
 * fp8; d % 8 == 0). */
template <typename T>
static __device__ __forceinline__ void load_rows(bf16 *dst, int sw, const T *base,
						 const long long *off, int rows, int d, bool vec)
{
	if (vec) {
		const int per = d / 8;

		for (int u = threadIdx.x; u < rows * per; u += PF_THREADS) {
			const int r = u / per, c = u % per;
			uint4 v = make_uint4(0, 0, 0, 0);
			uint32_t *w = (uint32_t *)dst + (size_t)r * sw + c * 4;

			if constexpr (sizeof(T) == 1) {
				if (off[r] >= 0) {
					const uint2 raw = *(const uint2 *)(base + off[r] + c * 8);
					uint32_t h[4];

					for (int z = 0; z < 4; z++) {
						const uint32_t two = (z < 2 ? raw.x : raw.y) >> (z % 2 * 16);
						const float2 f = fp8x2_to_float2((uint16_t)two);
						const __nv_bfloat162 b2 = __floats2bfloat162_rn(f.x, f.y);

						memcpy(&h[z], &b2, 4);
					}
					v = make_uint4(h[0], h[1], h[2], h[3]);
				}
			} else {
				if (off[r] >= 0)
					v = *(const uint4 *)(base + off[r] + c * 8);
			}
			w[0] = v.x;
			w[1] = v.y;
			w[2] = v.z;
			w[3] = v.w;
		}
	} else {
		const int de = (d + 1) / 2 * 2;

		for (int u = threadIdx.x; u < rows * de; u += PF_THREADS) {
			const int r = u / de, e = u % de;

			dst[(size_t)r * sw * 2 + e] = off[r] >= 0 && e < d
							      ? to_bf16(base[off[r] + e])
							      : __float2bfloat16_rn(0.0f);
		}
	}
}

/* The tensor-core prefill's instances: head sizes up to dmax = 64, 128 or
 * 256, and MT m-tiles (16 query rows each) per warp.  Two up to 128 (a
 * block of 128 rows), so each K and V fragment a warp reads from shared
 * memory feeds two products; one at 256 (64 rows), where the 16 x 256
 * fp32 accumulator alone is 128 registers a lane.  ptxas (CUDA 13.0):
 * 194-201, 252-254 and 212-214 registers, no spills. */
static __host__ __device__ constexpr int prefill_mma_mt(int dmax)
{
	return dmax <= 128 ? 2 : 1;
}

/* Query rows of a block of the instance for dmax. */
static int prefill_mma_rows(int dmax)
{
	return 16 * MMA_WARPS * prefill_mma_mt(dmax);
}

/* Dynamic shared memory of the instance for dmax: Q, a K and a V tile,
 * rows of dmax + MMA_PAD bf16. */
static size_t prefill_mma_smem(int dmax)
{
	return (size_t)(prefill_mma_rows(dmax) + 2 * MMA_KEYS) * (dmax + MMA_PAD) * sizeof(bf16);
}

/* Whether the device gives a block the shared memory of the instance for
 * dmax (dynamic plus the static row offsets). */
static bool prefill_mma_fits(const struct cuda_priv *p, int dmax)
{
	return prefill_mma_smem(dmax) +
	       sizeof(long long) * (prefill_mma_rows(dmax) + 2 * MMA_KEYS) <= p->smem_optin;
}

/* Issue the cp.async copies of rows 0 .. rows-1 of d bf16 (d % 8 == 0) to
 * shared rows ds elements apart: row r from base + off[r] (16-byte
 * aligned), zeros where off[r] < 0.  Every thread of the block takes a
 * share; the caller commits. */
static __device__ __forceinline__ void mma_load_rows(bf16 *dst, int ds, const bf16 *base,
						     const long long *off, int rows, int d)
{
	/* thread u's chunks are u, u + MMA_THREADS, ...: row r = u / per, chunk
	 * c = u % per, stepped without a division per chunk */
	const int per = d / 8, dr = MMA_THREADS / per, dc = MMA_THREADS % per;
	int r = threadIdx.x / per, c = threadIdx.x % per;

	for (; r < rows; r += dr, c += dc) {
		long long o;

		if (c >= per) {
			c -= per;
			r++;
			if (r >= rows)
				break;
		}
		o = off[r];
		cp_async_16(dst + (size_t)r * ds + 8 * c, o >= 0 ? base + o + 8 * c : base,
			    o >= 0 ? 16 : 0);
	}
}

/* The query rows a prefill block owns: block blockIdx.x of sequence s's
 * chunk (queries q0 .. q1 - 1 after ctx cached tokens), rows to a block.
 * False when the chunk's metadata is out of range (FAULT_PREFILL_CHUNK,
 * raised by one thread of the sequence) or the block lies past the chunk's
 * rows; else its first row *r0, its rows *nrows and *kv_end, one past the
 * last key any of them sees.  Both prefill kernels start with it. */
static __device__ __forceinline__ bool prefill_block_rows(const struct prefill_params &p, int s,
							  int q0, int q1, int ctx, int rows,
							  long long *r0, int *nrows, int *kv_end)
{
	const int len = q1 - q0;
	long long total;

	if (q0 < 0 || q1 < q0 || q1 > p.tokens || len > p.max_q_len || ctx < 0 ||
	    ctx > p.max_kv_len - len) {
		if (blockIdx.x == 0 && blockIdx.z == 0 && threadIdx.x == 0)
			cuda_fault_raise(p.fault, FAULT_PREFILL_CHUNK, s, q0, q1, 0, ctx);
		return false;
	}
	total = (long long)len * p.group;
	*r0 = (long long)blockIdx.x * rows;
	if (*r0 >= total)
		return false;
	*nrows = total - *r0 < rows ? (int)(total - *r0) : rows;
	*kv_end = ctx + (int)((*r0 + *nrows - 1) / p.group) + 1;
	return true;
}

template <int DMAX, typename KV>
__global__ void __launch_bounds__(PF_THREADS) prefill_kernel(struct prefill_params p)
{
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ long long rowoff[PF_KEYS];     /* Q rows, then each tile's key rows */
	constexpr int NP = DMAX / 32;             /* column pairs per thread */
	const int s = blockIdx.y, kvh = blockIdx.z;
	const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	const int d = p.d, sw = smem_row_words(d), dw = (d + 1) / 2;
	bf16 *qs = (bf16 *)smem;                              /* [PF_ROWS][sw words] */
	bf16 *kvs = qs + (size_t)PF_ROWS * sw * 2;            /* [PF_KEYS][sw words] */
	float *ps = (float *)(kvs + (size_t)PF_KEYS * sw * 2); /* [PF_KEYS][PF_PS] */
	const int q0 = p.q_start[s], q1 = p.q_start[s + 1], ctx = p.context[s];
	const int32_t *bt = p.bt + (size_t)s * p.ldbt;
	const size_t kvw = (size_t)p.kv_heads * d;
	float m[4], l[4], acc[4][NP][2];
	int lim[4];
	long long r0;
	int nrows, kv_end;

	if (!prefill_block_rows(p, s, q0, q1, ctx, PF_ROWS, &r0, &nrows, &kv_end))
		return;

	/* Q rows of this block */
	if (threadIdx.x < PF_ROWS) {
		const int r = threadIdx.x;

		rowoff[r] = -1;
		if (r < nrows) {
			const long long gr = r0 + r;
			const int t = (int)(gr / p.group), h = kvh * p.group + (int)(gr % p.group);

			rowoff[r] = (long long)((size_t)(q0 + t) * p.ldq + (size_t)h * d);
		}
	}
	__syncthreads();
	load_rows(qs, sw, p.q, rowoff, PF_ROWS, d, p.vec_q);
	for (int i = 0; i < 4; i++) {
		const int r = ty * 4 + i;

		m[i] = -INFINITY;
		l[i] = 0;
		lim[i] = r < nrows ? ctx + (int)((r0 + r) / p.group) : -1;   /* last key it sees */
		for (int c = 0; c < NP; c++)
			acc[i][c][0] = acc[i][c][1] = 0;
	}

	for (int j0 = 0; j0 < kv_end; j0 += PF_KEYS) {
		const int nk = kv_end - j0 < PF_KEYS ? kv_end - j0 : PF_KEYS;
		float sc[4][4];

		__syncthreads();   /* the previous tile is consumed (and Q's offsets read) */
		if (threadIdx.x < PF_KEYS) {
			const int j = j0 + threadIdx.x;

			rowoff[threadIdx.x] = j < kv_end ?
				key_offset(bt, j, p.bs, p.num_blocks, kvw, kvh, d, s,
					   FAULT_PREFILL_BLOCK, p.fault) : -1;
		}
		__syncthreads();
		load_rows(kvs, sw, (const KV *)p.kc, rowoff, PF_KEYS, d, p.vec_kv);
		__syncthreads();

		/* S = Q K^T for rows ty*4+i, keys tx+16c */
		for (int i = 0; i < 4; i++)
			for (int c = 0; c < 4; c++)
				sc[i][c] = 0;
		for (int e = 0; e < dw; e++) {
			float2 qv[4], kv[4];

			for (int i = 0; i < 4; i++)
				qv[i] = __bfloat1622float2(
					((const __nv_bfloat162 *)qs)[(size_t)(ty * 4 + i) * sw + e]);
			for (int c = 0; c < 4; c++)
				kv[c] = __bfloat1622float2(
					((const __nv_bfloat162 *)kvs)[(size_t)(tx + 16 * c) * sw + e]);
			for (int i = 0; i < 4; i++)
				for (int c = 0; c < 4; c++)
					sc[i][c] = fmaf(qv[i].x, kv[c].x, fmaf(qv[i].y, kv[c].y, sc[i][c]));
		}

		/* mask, online softmax; P into shared memory */
		for (int i = 0; i < 4; i++) {
			float tmax = -INFINITY, mnew, mu, corr, rs = 0;

			for (int c = 0; c < 4; c++) {
				const int j = j0 + tx + 16 * c;

				sc[i][c] = j <= lim[i] ? sc[i][c] * p.scale_log2 : -INFINITY;
				tmax = fmaxf(tmax, sc[i][c]);
			}
			for (int o = 8; o > 0; o >>= 1)   /* over the 16 threads of the row */
				tmax = fmaxf(tmax, __shfl_xor_sync(FULL_MASK, tmax, o));
			mnew = fmaxf(m[i], tmax);
			mu = mnew == -INFINITY ? 0.0f : mnew;   /* a row with no key yet */
			corr = exp2f(m[i] - mu);
			m[i] = mnew;
			for (int c = 0; c < 4; c++) {
				sc[i][c] = exp2f(sc[i][c] - mu);
				rs += sc[i][c];
			}
			l[i] = l[i] * corr + rs;   /* this thread's share; summed at the end */
			for (int c = 0; c < NP; c++) {
				acc[i][c][0] *= corr;
				acc[i][c][1] *= corr;
			}
		}
		for (int c = 0; c < 4; c++)
			*(float4 *)(ps + (size_t)(tx + 16 * c) * PF_PS + ty * 4) =
				make_float4(sc[0][c], sc[1][c], sc[2][c], sc[3][c]);
		__syncthreads();   /* K consumed, P complete */
		load_rows(kvs, sw, (const KV *)p.vc, rowoff, PF_KEYS, d, p.vec_kv);
		__syncthreads();

		/* O += P V for rows ty*4+i, column pairs tx + 16c */
		for (int k = 0; k < nk; k++) {
			const float4 pr = *(const float4 *)(ps + (size_t)k * PF_PS + ty * 4);
			const __nv_bfloat162 *vr = (const __nv_bfloat162 *)kvs + (size_t)k * sw;

			for (int c = 0; c < NP; c++) {
				const int e = tx + 16 * c;

				if (e < dw) {
					const float2 v = __bfloat1622float2(vr[e]);

					acc[0][c][0] = fmaf(pr.x, v.x, acc[0][c][0]);
					acc[0][c][1] = fmaf(pr.x, v.y, acc[0][c][1]);
					acc[1][c][0] = fmaf(pr.y, v.x, acc[1][c][0]);
					acc[1][c][1] = fmaf(pr.y, v.y, acc[1][c][1]);
					acc[2][c][0] = fmaf(pr.z, v.x, acc[2][c][0]);
					acc[2][c][1] = fmaf(pr.z, v.y, acc[2][c][1]);
					acc[3][c][0] = fmaf(pr.w, v.x, acc[3][c][0]);
					acc[3][c][1] = fmaf(pr.w, v.y, acc[3][c][1]);
				}
			}
		}
	}

	for (int i = 0; i < 4; i++) {
		const int r = ty * 4 + i;
		float inv;

		for (int o = 8; o > 0; o >>= 1)
			l[i] += __shfl_xor_sync(FULL_MASK, l[i], o);
		if (r >= nrows)
			continue;
		inv = 1.0f / l[i];
		{
			const long long gr = r0 + r;
			const int t = (int)(gr / p.group), h = kvh * p.group + (int)(gr % p.group);
			bf16 *o = p.out + (size_t)(q0 + t) * p.ldo + (size_t)h * d;

			for (int c = 0; c < NP; c++) {
				const int e = 2 * (tx + 16 * c);

				if (e < d)
					o[e] = __float2bfloat16_rn(acc[i][c][0] * inv);
				if (e + 1 < d)
					o[e + 1] = __float2bfloat16_rn(acc[i][c][1] * inv);
			}
		}
	}
}

/* Tensor-core prefill (prefill_mma_kernel): FlashAttention-2's forward
 * pass, varlen and paged.  A block of MMA_WARPS = 4 warps owns 64 x MT
 * query rows of one sequence and one KV head (rows as in prefill_kernel:
 * (token, head of the group) pairs), 16 x MT per warp (MT m-tiles, each
 * K and V fragment a warp loads feeding MT products), and walks the keys
 * 0 .. context + its last token in tiles of MMA_KEYS = 64.  Q, one K tile
 * and one V tile live in shared memory as bf16 rows of d + MMA_PAD
 * elements; the 16 bytes of padding put the 8 rows an ldmatrix phase
 * reads in 8 different 16-byte bank groups (d % 16 == 0, so a row is an
 * odd number of 16-byte units).  Copies are cp.async of 16 bytes through
 * the block table, zero-filled for keys past the end (and for a block id
 * outside the cache), in FlashAttention-2's pipeline: V_n is fetched
 * while S = Q K_n^T and the softmax run, K_(n+1) while O += P V_n runs.
 * Per warp and tile: S in registers from mma.sync m16n8k16 (Q and K
 * fragments by ldmatrix), scaled by scale x log2(e), masked only where the
 * tile crosses the warp's causal diagonal, row maxima and sums over the 4
 * lanes of a row by shuffles, the accumulator rescaled, P rounded to bf16
 * straight into A fragments and O += P V by mma.sync (V fragments by
 * ldmatrix.trans).  Tiles wholly above the block's last row are not
 * visited, and a warp skips the arithmetic of tiles wholly above its own
 * rows.  d any multiple of 16 up to DMAX; the fragment loops are unrolled
 * for DMAX and guarded by d. */
template <int DMAX>
__global__ void __launch_bounds__(MMA_THREADS) prefill_mma_kernel(struct prefill_params p)
{
	constexpr int MT = prefill_mma_mt(DMAX);     /* m-tiles per warp */
	constexpr int ROWS = 16 * MT * MMA_WARPS;   /* query rows of the block */
	constexpr int NT = DMAX / 8;                /* accumulator n-tiles of 8 columns */
	constexpr int KT = MMA_KEYS / 8;            /* score n-tiles of 8 keys */
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ long long qoff[ROWS];            /* Q's row offsets */
	__shared__ long long koff[2][MMA_KEYS];     /* key tile n's in [n & 1] */
	const int s = blockIdx.y, kvh = blockIdx.z;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
	const int wr = 16 * MT * warp;              /* the warp's first row in the block */
	const int d = p.d, ds = d + MMA_PAD, dk = d / 16;
	bf16 *qs = (bf16 *)smem;                    /* [ROWS][ds] */
	bf16 *ks = qs + (size_t)ROWS * ds;          /* [MMA_KEYS][ds] */
	bf16 *vs = ks + (size_t)MMA_KEYS * ds;      /* [MMA_KEYS][ds] */
	/* the row each lane addresses for ldmatrix (lane 8i + r: row r of
	 * matrix i, warp-mma.h): Q's A fragment (i = 0..3: rows 0-7 / 8-15 x
	 * columns 0-7 / 8-15 of the k-step), K's B fragments for two n-tiles
	 * of keys (keys 0-7 x dims 0-7, 0-7 x 8-15, 8-15 x 0-7, 8-15 x 8-15)
	 * and V's, transposed (keys 0-7 x dims 0-7, 8-15 x 0-7, 0-7 x 8-15,
	 * 8-15 x 8-15) */
	const bf16 *qa_row = qs + (size_t)(wr + lane % 16) * ds + 8 * (lane / 16);
	const bf16 *kb_row = ks + (size_t)(8 * (lane / 16) + lane % 8) * ds + 8 * (lane / 8 % 2);
	const bf16 *vb_row = vs + (size_t)(8 * (lane / 8 % 2) + lane % 8) * ds + 8 * (lane / 16);
	const int q0 = p.q_start[s], q1 = p.q_start[s + 1], ctx = p.context[s];
	const int32_t *bt = p.bt + (size_t)s * p.ldbt;
	const size_t kvw = (size_t)p.kv_heads * d;
	/* per m-tile mt and half h: rows wr + 16 mt + g + 8 h */
	float o[MT][NT][4], m[MT][2], l[MT][2];
	int lim[MT][2], nrows, kv_end, ntiles, wlo, whi;
	long long r0;

	if (!prefill_block_rows(p, s, q0, q1, ctx, ROWS, &r0, &nrows, &kv_end))
		return;
	ntiles = (kv_end + MMA_KEYS - 1) / MMA_KEYS;
	/* the last key of the warp's first and last (real) rows, and of each
	 * of this lane's rows (rows past nrows are computed, not written) */
	wlo = ctx + (int)((r0 + wr) / p.group);
	whi = ctx + (int)((r0 + (wr + 16 * MT - 1 < nrows ? wr + 16 * MT - 1 : nrows - 1)) /
			  p.group);
	for (int mt = 0; mt < MT; mt++)
		for (int h = 0; h < 2; h++)
			lim[mt][h] = ctx + (int)((r0 + wr + 16 * mt + g + 8 * h) / p.group);

	/* Q's row offsets and tile 0's key offsets */
	for (int r = threadIdx.x; r < ROWS; r += MMA_THREADS) {
		qoff[r] = -1;
		if (r < nrows) {
			const long long gr = r0 + r;
			const int t = (int)(gr / p.group), h = kvh * p.group + (int)(gr % p.group);

			qoff[r] = (long long)((size_t)(q0 + t) * p.ldq + (size_t)h * d);
		}
	}
	if (threadIdx.x < MMA_KEYS) {
		const int j = threadIdx.x;

		koff[0][j] = j < kv_end ? key_offset(bt, j, p.bs, p.num_blocks, kvw, kvh, d, s,
						     FAULT_PREFILL_BLOCK, p.fault) : -1;
	}
	__syncthreads();
	mma_load_rows(qs, ds, p.q, qoff, ROWS, d);
	mma_load_rows(ks, ds, (const bf16 *)p.kc, koff[0], MMA_KEYS, d);
	cp_async_commit();
	for (int mt = 0; mt < MT; mt++) {
		for (int h = 0; h < 2; h++) {
			m[mt][h] = -INFINITY;
			l[mt][h] = 0;
		}
#pragma unroll
		for (int c = 0; c < NT; c++)
			o[mt][c][0] = o[mt][c][1] = o[mt][c][2] = o[mt][c][3] = 0;
	}

	for (int n = 0; n < ntiles; n++) {
		const int j0 = n * MMA_KEYS;
		/* warp-uniform: the warp has real rows that see a key of the tile */
		const bool busy = wr < nrows && j0 <= whi;
		uint32_t pa[MT][MMA_KEYS / 16][4];   /* P as A fragments, k-step by k-step */

		__syncthreads();   /* V_(n-1) consumed, koff[n & 1] complete */
		mma_load_rows(vs, ds, (const bf16 *)p.vc, koff[n & 1], MMA_KEYS, d);
		cp_async_commit();
		if (n + 1 < ntiles && threadIdx.x < MMA_KEYS) {
			const int j = j0 + MMA_KEYS + threadIdx.x;

			koff[(n + 1) & 1][threadIdx.x] =
				j < kv_end ? key_offset(bt, j, p.bs, p.num_blocks, kvw, kvh, d, s,
							FAULT_PREFILL_BLOCK, p.fault) : -1;
		}
		cp_async_wait<1>();   /* this thread's copies of K_n (and Q) are in */
		__syncthreads();      /* and everyone's */

		if (busy) {
			float sc[MT][KT][4];
			const bool diag = j0 + MMA_KEYS - 1 > wlo;

#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int c = 0; c < KT; c++)
					sc[mt][c][0] = sc[mt][c][1] = sc[mt][c][2] = sc[mt][c][3] = 0;
			/* S = Q K^T: each K fragment (16 keys) serves the MT m-tiles */
#pragma unroll
			for (int kk = 0; kk < DMAX / 16; kk++) {
				uint32_t qa[MT][4];

				if (kk >= dk)
					break;
#pragma unroll
				for (int mt = 0; mt < MT; mt++)
					ldmatrix_x4(qa[mt], qa_row + 16 * (mt * ds + kk));
#pragma unroll
				for (int jj = 0; jj < KT / 2; jj++) {
					uint32_t kb[4];

					ldmatrix_x4(kb, kb_row + 16 * (jj * ds + kk));
#pragma unroll
					for (int mt = 0; mt < MT; mt++) {
						mma_bf16_16816(sc[mt][2 * jj], qa[mt], kb, sc[mt][2 * jj]);
						mma_bf16_16816(sc[mt][2 * jj + 1], qa[mt], kb + 2,
							       sc[mt][2 * jj + 1]);
					}
				}
			}
#pragma unroll
			for (int mt = 0; mt < MT; mt++) {
				float mx[2] = { -INFINITY, -INFINITY }, mu[2], corr[2], rs[2] = { 0, 0 };

				/* element i of n-tile c: row 16 mt + g + 8 (i / 2), key
				 * j0 + 8c + 2tq + i % 2 */
#pragma unroll
				for (int c = 0; c < KT; c++)
#pragma unroll
					for (int i = 0; i < 4; i++) {
						float v = sc[mt][c][i] * p.scale_log2;

						if (diag && j0 + 8 * c + 2 * tq + i % 2 > lim[mt][i / 2])
							v = -INFINITY;
						sc[mt][c][i] = v;
						mx[i / 2] = fmaxf(mx[i / 2], v);
					}
				for (int h = 0; h < 2; h++) {
					float mnew;

					mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL_MASK, mx[h], 1));
					mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL_MASK, mx[h], 2));
					mnew = fmaxf(m[mt][h], mx[h]);
					/* 0 for a row with no key yet */
					mu[h] = mnew == -INFINITY ? 0.0f : mnew;
					corr[h] = exp2f(m[mt][h] - mu[h]);
					m[mt][h] = mnew;
				}
#pragma unroll
				for (int c = 0; c < KT; c++)
#pragma unroll
					for (int i = 0; i < 4; i++) {
						sc[mt][c][i] = exp2f(sc[mt][c][i] - mu[i / 2]);
						rs[i / 2] += sc[mt][c][i];
					}
				for (int h = 0; h < 2; h++)
					l[mt][h] = l[mt][h] * corr[h] + rs[h];   /* this lane's share */
#pragma unroll
				for (int c = 0; c < NT; c++) {
					o[mt][c][0] *= corr[0];
					o[mt][c][1] *= corr[0];
					o[mt][c][2] *= corr[1];
					o[mt][c][3] *= corr[1];
				}
				/* n-tiles 2k and 2k + 1 of S are k-step k of P's A fragments */
#pragma unroll
				for (int k = 0; k < MMA_KEYS / 16; k++) {
					pa[mt][k][0] = mma_pack_bf16(sc[mt][2 * k][0], sc[mt][2 * k][1]);
					pa[mt][k][1] = mma_pack_bf16(sc[mt][2 * k][2], sc[mt][2 * k][3]);
					pa[mt][k][2] = mma_pack_bf16(sc[mt][2 * k + 1][0],
								     sc[mt][2 * k + 1][1]);
					pa[mt][k][3] = mma_pack_bf16(sc[mt][2 * k + 1][2],
								     sc[mt][2 * k + 1][3]);
				}
			}
		}

		cp_async_wait<0>();   /* this thread's copies of V_n are in */
		__syncthreads();      /* everyone's; K_n consumed; koff[(n + 1) & 1] complete */
		if (n + 1 < ntiles) {
			mma_load_rows(ks, ds, (const bf16 *)p.kc, koff[(n + 1) & 1], MMA_KEYS, d);
			cp_async_commit();
		}

		if (busy) {
			/* O += P V: each V fragment (16 keys x 16 columns) serves the
			 * MT m-tiles */
#pragma unroll
			for (int k = 0; k < MMA_KEYS / 16; k++)
#pragma unroll
				for (int c = 0; c < NT / 2; c++) {
					uint32_t vb[4];

					if (c >= dk)
						break;
					ldmatrix_x4_trans(vb, vb_row + 16 * (k * ds + c));
#pragma unroll
					for (int mt = 0; mt < MT; mt++) {
						mma_bf16_16816(o[mt][2 * c], pa[mt][k], vb, o[mt][2 * c]);
						mma_bf16_16816(o[mt][2 * c + 1], pa[mt][k], vb + 2,
							       o[mt][2 * c + 1]);
					}
				}
		}
	}

	for (int mt = 0; mt < MT; mt++)
		for (int h = 0; h < 2; h++) {
			const int r = wr + 16 * mt + g + 8 * h;
			float inv;

			l[mt][h] += __shfl_xor_sync(FULL_MASK, l[mt][h], 1);
			l[mt][h] += __shfl_xor_sync(FULL_MASK, l[mt][h], 2);
			if (r >= nrows)
				continue;
			inv = 1.0f / l[mt][h];
			{
				const long long gr = r0 + r;
				const int t = (int)(gr / p.group);
				const int hd = kvh * p.group + (int)(gr % p.group);
				bf16 *out = p.out + (size_t)(q0 + t) * p.ldo + (size_t)hd * d + 2 * tq;

#pragma unroll
				for (int c = 0; c < NT; c++)
					if (8 * c < d)
						*(__nv_bfloat162 *)(out + 8 * c) = __floats2bfloat162_rn(
							o[mt][c][2 * h] * inv, o[mt][c][2 * h + 1] * inv);
			}
		}
}

/* The N elements of T (bf16, or an fp8 cache's) at src as floats: one
 * load of N x sizeof(T) bytes, 8 or 16, when vec (src aligned to it, N
 * elements there), else element by element, n of them (zeros past n). */
template <int N, typename T>
static __device__ __forceinline__ void load_vec(const T *src, int n, bool vec, float *f)
{
	static_assert(N * sizeof(T) == 8 || N * sizeof(T) == 16, "8- or 16-byte loads");
	if (vec) {
		uint32_t w[N * sizeof(T) / 4];

		if constexpr (N * sizeof(T) == 16) {
			const uint4 raw = *(const uint4 *)src;

			w[0] = raw.x;
			w[1] = raw.y;
			w[2] = raw.z;
			w[3] = raw.w;
		} else {
			const uint2 raw = *(const uint2 *)src;

			w[0] = raw.x;
			w[1] = raw.y;
		}
#pragma unroll
		for (int z = 0; z < N / 2; z++) {
			float2 x;

			if constexpr (sizeof(T) == 1) {
				x = fp8x2_to_float2((uint16_t)(w[z / 2] >> (z % 2 * 16)));
			} else {
				x = __bfloat1622float2(*(const __nv_bfloat162 *)&w[z]);
			}
			f[2 * z] = x.x;
			f[2 * z + 1] = x.y;
		}
	} else {
#pragma unroll
		for (int z = 0; z < N; z++)
			f[z] = z < n ? kv_load(src[z]) : 0.0f;
	}
}

template <int DMAX, typename KV>
__global__ void __launch_bounds__(DEC_THREADS) decode_kernel(struct decode_params p)
{
	constexpr int KVEC = 16 / sizeof(KV);    /* K elements per 16-byte load: 8 bf16, 16 fp8 */
	constexpr int LPR = DMAX / 8;             /* lanes per V row, 8 columns each */
	constexpr int RPW = 32 / LPR;             /* V rows a warp reads at once */
	__shared__ float qsh[DEC_GROUP][DMAX];    /* the chunk's query heads, pre-scaled */
	__shared__ float msh[DEC_WARPS][DEC_GROUP], lsh[DEC_WARPS][DEC_GROUP];
	__shared__ float osh[DEC_WARPS][DEC_GROUP][DMAX];
	const int chunks = (p.group + DEC_GROUP - 1) / DEC_GROUP;
	const int s = blockIdx.x, kvh = blockIdx.y / chunks, g0 = blockIdx.y % chunks * DEC_GROUP;
	const int part = blockIdx.z;
	const int ng = p.group - g0 < DEC_GROUP ? p.group - g0 : DEC_GROUP;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, d = p.d;
	const int col = lane % LPR * 8, sub = lane / LPR;   /* this lane's V columns and row */
	const int len = p.kv_len[s];
	const int32_t *bt = p.bt + (size_t)s * p.ldbt;
	const size_t kvw = (size_t)p.kv_heads * d;
	const bf16 *qrow = p.q + (size_t)s * p.ldq + (size_t)(kvh * p.group + g0) * d;
	float m[DEC_GROUP], l[DEC_GROUP], acc[DEC_GROUP][8];
	int t_begin, t_end;

	if (len < 1 || len > p.max_kv_len) {
		if (blockIdx.y == 0 && part == 0 && threadIdx.x == 0)
			cuda_fault_raise(p.fault, FAULT_DECODE_LEN, s, 0, len, p.max_kv_len, 0);
		return;
	}
	t_begin = part * p.part;   /* part < parts, so within max_kv_len */
	if (t_begin >= len)
		return;   /* a shorter sequence than the launch's longest */
	t_end = len - t_begin < p.part ? len : t_begin + p.part;
	for (int u = threadIdx.x; u < ng * DMAX; u += DEC_THREADS) {
		const int g = u / DMAX, e = u % DMAX;

		qsh[g][e] = e < d ? bf2f(qrow[(size_t)g * d + e]) * p.scale_log2 : 0.0f;
	}
#pragma unroll
	for (int g = 0; g < DEC_GROUP; g++) {
		m[g] = -INFINITY;
		l[g] = 0;
#pragma unroll
		for (int z = 0; z < 8; z++)
			acc[g][z] = 0;
	}
	__syncthreads();

	for (int t0 = t_begin + warp * 32; t0 < t_end; t0 += DEC_TILE) {
		const int j = t0 + lane, nk = t_end - t0 < 32 ? t_end - t0 : 32;
		const long long off = j < t_end ? key_offset(bt, j, p.bs, p.num_blocks, kvw, kvh, d,
							     s, FAULT_DECODE_BLOCK, p.fault) : -1;
		float sc[DEC_GROUP];

		/* this lane's key against every head of the chunk */
#pragma unroll
		for (int g = 0; g < DEC_GROUP; g++)
			sc[g] = 0;
		if (off >= 0) {
			const KV *kr = (const KV *)p.kc + off;

			for (int e = 0; e < d; e += KVEC) {
				float kf[KVEC];

				load_vec<KVEC>(kr + e, d - e, p.vec_k, kf);
#pragma unroll
				for (int g = 0; g < DEC_GROUP; g++)
					if (g < ng)
#pragma unroll
						for (int z = 0; z < KVEC; z++)
							sc[g] = fmaf(qsh[g][e + z], kf[z], sc[g]);
			}
		}
		/* online softmax over the tile, per head (ng is the same in every
		 * lane, so the shuffles inside see the whole warp) */
#pragma unroll
		for (int g = 0; g < DEC_GROUP; g++)
			if (g < ng) {
				const float v = off >= 0 ? sc[g] : -INFINITY;
				const float mnew = fmaxf(m[g], warp_max(v));
				const float mu = mnew == -INFINITY ? 0.0f : mnew;
				const float corr = exp2f(m[g] - mu);

				m[g] = mnew;
				sc[g] = exp2f(v - mu);
				l[g] = l[g] * corr + sc[g];   /* this lane's share */
#pragma unroll
				for (int z = 0; z < 8; z++)
					acc[g][z] *= corr;
			}
		/* P.V: RPW keys of the tile at a time, each read by LPR lanes with
		 * one 16-byte load apiece; a lane sums its rows' share of its 8
		 * columns, the RPW row groups are added at the end */
		for (int k0 = 0; k0 < nk; k0 += RPW) {
			const int k = k0 + sub;
			const long long ro = __shfl_sync(FULL_MASK, off, k);
			float pk[DEC_GROUP], v[8];

#pragma unroll
			for (int g = 0; g < DEC_GROUP; g++)
				pk[g] = g < ng ? __shfl_sync(FULL_MASK, sc[g], k) : 0.0f;
			if (k >= nk || ro < 0 || col >= d)
				continue;
			load_vec<8>((const KV *)p.vc + ro + col, d - col, p.vec_kv, v);
#pragma unroll
			for (int g = 0; g < DEC_GROUP; g++)
				if (g < ng)
#pragma unroll
					for (int z = 0; z < 8; z++)
						acc[g][z] = fmaf(pk[g], v[z], acc[g][z]);
		}
	}

	/* the warp's row groups, then the warps */
#pragma unroll
	for (int g = 0; g < DEC_GROUP; g++)
		if (g < ng) {
			for (int o = LPR; o < 32; o <<= 1)
#pragma unroll
				for (int z = 0; z < 8; z++)
					acc[g][z] += __shfl_xor_sync(FULL_MASK, acc[g][z], o);
			l[g] = warp_sum(l[g]);
			if (lane == 0) {
				msh[warp][g] = m[g];
				lsh[warp][g] = l[g];
			}
			if (sub == 0)
#pragma unroll
				for (int z = 0; z < 8; z++)
					if (col + z < d)
						osh[warp][g][col + z] = acc[g][z];
		}
	__syncthreads();
	for (int u = threadIdx.x; u < ng * d; u += DEC_THREADS) {
		const int g = u / d, e = u % d, h = kvh * p.group + g0 + g;
		float mx = -INFINITY, sum = 0, o = 0;

		for (int w = 0; w < DEC_WARPS; w++)
			mx = fmaxf(mx, msh[w][g]);
		for (int w = 0; w < DEC_WARPS; w++) {
			const float f = msh[w][g] == -INFINITY ? 0.0f : exp2f(msh[w][g] - mx);

			sum += lsh[w][g] * f;
			o += osh[w][g][e] * f;
		}
		if (len <= p.part) {   /* the sequence's only partition: the output */
			p.out[(size_t)s * p.ldo + (size_t)h * d + e] = __float2bfloat16_rn(o / sum);
		} else {               /* a partial for decode_reduce_kernel */
			const size_t i = ((size_t)s * p.kv_heads * p.group + h) * p.parts + part;

			p.po[i * d + e] = o;
			if (e == 0) {
				p.pm[i] = mx;
				p.pl[i] = sum;
			}
		}
	}
}

/* Combine a sequence's partitions (the second pass of the split decode):
 * one block of DEC_THREADS per (sequence, query head), a thread per output
 * column.  Partition i holds an unnormalised accumulator o_i with its own
 * maximum m_i (log2 domain) and sum l_i; with M = max m_i the output is
 * sum 2^(m_i - M) o_i / sum 2^(m_i - M) l_i.  Sequences with one partition
 * were written by decode_kernel; a bad length was reported there. */
__global__ void __launch_bounds__(DEC_THREADS) decode_reduce_kernel(struct decode_params p)
{
	const int s = blockIdx.x, h = blockIdx.y, d = p.d;
	const int len = p.kv_len[s];
	const size_t i0 = ((size_t)s * p.kv_heads * p.group + h) * p.parts;
	int np;
	float mx = -INFINITY;

	if (len <= p.part || len > p.max_kv_len)
		return;
	np = (len + p.part - 1) / p.part;
	for (int i = 0; i < np; i++)
		mx = fmaxf(mx, p.pm[i0 + i]);
	for (int e = threadIdx.x; e < d; e += DEC_THREADS) {
		float sum = 0, o = 0;

		for (int i = 0; i < np; i++) {
			const float m = p.pm[i0 + i];
			const float f = m == -INFINITY ? 0.0f : exp2f(m - mx);

			sum += p.pl[i0 + i] * f;
			o += p.po[(i0 + i) * d + e] * f;
		}
		p.out[(size_t)s * p.ldo + (size_t)h * d + e] = __float2bfloat16_rn(o / sum);
	}
}

int cuda_attn_setup(struct cuda_priv *p, struct ss_error *err)
{
	static const int dmax[6] = { 64, 128, 256, 64, 128, 256 };
	void (*const kern[6])(struct prefill_params) = {
		prefill_kernel<64, bf16>, prefill_kernel<128, bf16>, prefill_kernel<256, bf16>,
		prefill_kernel<64, fp8>, prefill_kernel<128, fp8>, prefill_kernel<256, fp8>,
	};
	void (*const mma[3])(struct prefill_params) = {
		prefill_mma_kernel<64>, prefill_mma_kernel<128>, prefill_mma_kernel<256>,
	};

	for (int i = 0; i < 6; i++) {
		size_t need = prefill_smem(dmax[i]);
		cudaError_t e;

		if (need + sizeof(long long) * PF_KEYS > p->smem_optin)
			continue;   /* cuda_attn_prefill refuses those head sizes */
		e = cudaFuncSetAttribute((const void *)kern[i],
					 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)need);
		if (e != cudaSuccess)
			return cuda_fail(err, "cudaFuncSetAttribute (prefill_kernel)", e);
	}
	for (int i = 0; i < 3; i++) {
		cudaError_t e;

		if (!prefill_mma_fits(p, dmax[i]))
			continue;   /* those head sizes take prefill_kernel */
		e = cudaFuncSetAttribute((const void *)mma[i],
					 cudaFuncAttributeMaxDynamicSharedMemorySize,
					 (int)prefill_mma_smem(dmax[i]));
		if (e != cudaSuccess)
			return cuda_fail(err, "cudaFuncSetAttribute (prefill_mma_kernel)", e);
	}
	return 0;
}

/* Whether the tensor-core kernel takes a prefill at head dimension d
 * (else prefill_kernel does): d a multiple of 16 (the mma k-step), Q and
 * output rows that allow 16-byte copies, and Q, K and V tiles at the
 * head size's instance within the device's shared memory (at d = 256,
 * 100.5 KiB: not on compute capability 8.6 / 8.9, whose blocks get 99
 * KiB). */
static bool prefill_mma_ok(const struct cuda_priv *p, const struct kernel_attn_prefill_args *a,
			   size_t ldq, size_t ldo)
{
	const int d = a->cache->head_dim;

	return d % 16 == 0 && prefill_mma_fits(p, d <= 64 ? 64 : d <= 128 ? 128 : 256) &&
	       vec8_ok(a->q.off, ldq, d) && vec8_ok(a->out.off, ldo, d);
}

int cuda_attn_prefill(void *priv, const struct kernel_attn_prefill_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const struct kernel_kv_cache *c = a->cache;
	const int d = c->head_dim, group = a->heads / c->kv_heads;
	const size_t w = (size_t)a->heads * d;
	const size_t layer = (size_t)c->num_blocks * c->block_size * kv_token_elems(c);
	const size_t smem = prefill_smem(d);
	const bool fp8kv = kernel_kv_cache_is_fp8(c);
	const size_t es = fp8kv ? sizeof(fp8) : sizeof(bf16);   /* bytes per cache element */
	const long long tiles = ((long long)a->max_q_len * group + PF_ROWS - 1) / PF_ROWS;
	struct prefill_params pp;
	dim3 grid;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	if (smem + sizeof(long long) * PF_KEYS > p->smem_optin)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "attn_prefill: head_dim %d needs %zu bytes of shared memory per "
				    "block; %s allows %zu", d, smem, p->name, p->smem_optin);
	if (a->n_seqs > MAX_GRID_YZ || c->kv_heads > MAX_GRID_YZ || tiles > INT_MAX)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "attn_prefill: %d sequences, %d KV heads or %lld row tiles exceed "
				    "the launch grid", a->n_seqs, c->kv_heads, tiles);
	pp.q = vbf(&a->q);
	pp.ldq = row_ld(&a->q, a->tokens, (long)w);
	pp.out = vbf(&a->out);
	pp.ldo = row_ld(&a->out, a->tokens, (long)w);
	pp.q_start = vi32(&a->q_start);
	pp.context = vi32(&a->context);
	pp.bt = vi32(&a->block_tables);
	pp.ldbt = a->block_tables.ld;
	pp.kc = (const char *)c->k + a->layer * layer * es;
	pp.vc = (const char *)c->v + a->layer * layer * es;
	pp.num_blocks = c->num_blocks;
	pp.bs = c->block_size;
	pp.kv_heads = c->kv_heads;
	pp.d = d;
	pp.group = group;
	pp.tokens = a->tokens;
	pp.max_q_len = a->max_q_len;
	pp.max_kv_len = a->max_kv_len;
	pp.scale_log2 = a->scale * LOG2E;
	pp.vec_q = vec8_ok(a->q.off, pp.ldq, d);
	pp.vec_kv = d % 8 == 0;
	pp.fault = p->fault_ref;
	grid = dim3((unsigned)tiles, (unsigned)a->n_seqs, (unsigned)c->kv_heads);
	if (!fp8kv && prefill_mma_ok(p, a, pp.ldq, pp.ldo)) {
		/* the instance's shared memory (as cuda_attn_setup allowed it) and
		 * rows per block */
		const int dmax = d <= 64 ? 64 : d <= 128 ? 128 : 256, rows = prefill_mma_rows(dmax);
		const size_t ms = prefill_mma_smem(dmax);

		grid.x = (unsigned)(((long long)a->max_q_len * group + rows - 1) / rows);
		if (dmax == 64)
			prefill_mma_kernel<64><<<grid, MMA_THREADS, ms, p->stream>>>(pp);
		else if (dmax == 128)
			prefill_mma_kernel<128><<<grid, MMA_THREADS, ms, p->stream>>>(pp);
		else
			prefill_mma_kernel<256><<<grid, MMA_THREADS, ms, p->stream>>>(pp);
		return cuda_launched(err, "prefill_mma_kernel");
	}
	if (d <= 64 && fp8kv)
		prefill_kernel<64, fp8><<<grid, PF_THREADS, smem, p->stream>>>(pp);
	else if (d <= 128 && fp8kv)
		prefill_kernel<128, fp8><<<grid, PF_THREADS, smem, p->stream>>>(pp);
	else if (fp8kv)
		prefill_kernel<256, fp8><<<grid, PF_THREADS, smem, p->stream>>>(pp);
	else if (d <= 64)
		prefill_kernel<64, bf16><<<grid, PF_THREADS, smem, p->stream>>>(pp);
	else if (d <= 128)
		prefill_kernel<128, bf16><<<grid, PF_THREADS, smem, p->stream>>>(pp);
	else
		prefill_kernel<256, bf16><<<grid, PF_THREADS, smem, p->stream>>>(pp);
	return cuda_launched(err, "prefill_kernel");
}

/* How decode splits the keys: the partition length (a multiple of
 * DEC_PART_MIN, or max_kv_len for no split) and the partition count.  The
 * unsplit grid is base = n_seqs x kv_heads x head chunks blocks; when that
 * is short of DEC_BLOCKS_PER_SM per SM (few sequences, few KV heads) each
 * sequence's keys are cut into enough partitions to make up the
 * difference, none shorter than DEC_PART_MIN keys, so that the extra pass
 * and the partials stay small beside the KV read.  The partials
 * (n_seqs x heads x parts x (d + 2) floats) are kept under DEC_WS_MAX by
 * longer partitions. */
static int decode_split(const struct cuda_priv *p, long long base, int heads, long long heads_total,
			int d, int max_kv_len, int *parts)
{
	const long long want = ((long long)DEC_BLOCKS_PER_SM * p->sms + base - 1) / base;
	long long part, np;

	/* heads is the reduce pass's grid height */
	if (want <= 1 || max_kv_len <= DEC_PART_MIN || heads > MAX_GRID_YZ)
		goto single;
	part = (max_kv_len + want - 1) / want;
	part = (part + DEC_PART_MIN - 1) / DEC_PART_MIN * DEC_PART_MIN;
	np = (max_kv_len + part - 1) / part;
	while (np > 1 && (np > MAX_GRID_YZ ||
			  (size_t)(heads_total * np) * (size_t)(d + 2) * 4 > DEC_WS_MAX)) {
		part *= 2;
		np = (max_kv_len + part - 1) / part;
	}
	if (np <= 1)
		goto single;
	*parts = (int)np;
	return (int)part;
single:
	*parts = 1;
	return max_kv_len;
}

/* The decode partials' device memory: at least bytes, grown as needed (the
 * old buffer's cudaFree waits for the kernels that may still use it; a
 * graph captured with it keeps it alive, cuda_retire).  Under capture the
 * growth fails (cudaMalloc is not allowed there): a graph's decode runs
 * once eagerly before its capture so the buffer already fits. */
static int decode_ws(struct cuda_priv *p, size_t bytes, struct ss_error *err)
{
	cudaError_t e;
	int rc;

	if (bytes <= p->dec_ws_bytes)
		return 0;
	if (p->dec_ws) {
		rc = cuda_retire(p, p->dec_ws, err);
		p->dec_ws = NULL;
		p->dec_ws_bytes = 0;
		if (rc)
			return rc;
	}
	e = cudaMalloc(&p->dec_ws, bytes);
	if (e != cudaSuccess) {
		p->dec_ws = NULL;
		return cuda_fail(err, "cudaMalloc (decode partials)", e);
	}
	p->dec_ws_bytes = bytes;
	return 0;
}

int cuda_attn_decode(void *priv, const struct kernel_attn_decode_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const struct kernel_kv_cache *c = a->cache;
	const int d = c->head_dim, group = a->heads / c->kv_heads;
	const size_t w = (size_t)a->heads * d;
	const size_t layer = (size_t)c->num_blocks * c->block_size * kv_token_elems(c);
	const int chunks = (group + DEC_GROUP - 1) / DEC_GROUP;
	const long long ychunks = (long long)c->kv_heads * chunks;
	const bool fp8kv = kernel_kv_cache_is_fp8(c);
	const size_t es = fp8kv ? sizeof(fp8) : sizeof(bf16);   /* bytes per cache element */
	struct decode_params dp;
	dim3 grid;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	if (ychunks > MAX_GRID_YZ)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "attn_decode: %d KV heads x %d head chunks exceed the launch "
				    "grid", c->kv_heads, chunks);
	dp.q = vbf(&a->q);
	dp.ldq = row_ld(&a->q, a->n_seqs, (long)w);
	dp.out = vbf(&a->out);
	dp.ldo = row_ld(&a->out, a->n_seqs, (long)w);
	dp.kv_len = vi32(&a->kv_len);
	dp.bt = vi32(&a->block_tables);
	dp.ldbt = a->block_tables.ld;
	dp.kc = (const char *)c->k + a->layer * layer * es;
	dp.vc = (const char *)c->v + a->layer * layer * es;
	dp.num_blocks = c->num_blocks;
	dp.bs = c->block_size;
	dp.kv_heads = c->kv_heads;
	dp.d = d;
	dp.group = group;
	dp.max_kv_len = a->max_kv_len;
	dp.scale_log2 = a->scale * LOG2E;
	dp.vec_kv = d % 8 == 0;
	dp.vec_k = d % (int)(16 / es) == 0;
	dp.part = decode_split(p, (long long)a->n_seqs * ychunks, a->heads,
			       (long long)a->n_seqs * a->heads, d, a->max_kv_len, &dp.parts);
	dp.po = dp.pm = dp.pl = NULL;
	dp.fault = p->fault_ref;
	if (dp.parts > 1) {
		const size_t n = (size_t)a->n_seqs * a->heads * dp.parts;

		rc = decode_ws(p, n * (size_t)(d + 2) * sizeof(float), err);
		if (rc)
			return rc;
		dp.po = (float *)p->dec_ws;
		dp.pm = dp.po + n * d;
		dp.pl = dp.pm + n;
	}
	grid = dim3((unsigned)a->n_seqs, (unsigned)ychunks, (unsigned)dp.parts);
	if (d <= 64 && fp8kv)
		decode_kernel<64, fp8><<<grid, DEC_THREADS, 0, p->stream>>>(dp);
	else if (d <= 128 && fp8kv)
		decode_kernel<128, fp8><<<grid, DEC_THREADS, 0, p->stream>>>(dp);
	else if (fp8kv)
		decode_kernel<256, fp8><<<grid, DEC_THREADS, 0, p->stream>>>(dp);
	else if (d <= 64)
		decode_kernel<64, bf16><<<grid, DEC_THREADS, 0, p->stream>>>(dp);
	else if (d <= 128)
		decode_kernel<128, bf16><<<grid, DEC_THREADS, 0, p->stream>>>(dp);
	else
		decode_kernel<256, bf16><<<grid, DEC_THREADS, 0, p->stream>>>(dp);
	rc = cuda_launched(err, "decode_kernel");
	if (rc || dp.parts == 1)
		return rc;
	grid = dim3((unsigned)a->n_seqs, (unsigned)a->heads, 1);
	decode_reduce_kernel<<<grid, DEC_THREADS, 0, p->stream>>>(dp);
	return cuda_launched(err, "decode_reduce_kernel");
}
