/* servesim — the CUDA backend's internals (kernels/cuda/; docs/kernels.md,
 * "The CUDA backend").  C++ for nvcc; only files in this folder include it,
 * and only this folder includes CUDA headers.
 *
 * Split: cuda.cu holds the ops table, the instance (stream, cuBLAS handle),
 * memory, transfers, timers, the GEMM and the host side of kv_copy;
 * elementwise.cu the row-wise operators and the block-copy kernel;
 * attention.cu the prefill and decode attention kernels.  Operators only
 * enqueue work on the instance's stream and return launch errors; errors
 * that a kernel finds in device-resident data (a block id outside the cache,
 * a slot, a length) are recorded in the fault record below and reported by
 * the next call that waits (sync, download, timer_end).
 */
#ifndef SS_KERNELS_CUDA_INT_H
#define SS_KERNELS_CUDA_INT_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

extern "C" {
#include "kernels-int.h"

extern const struct kernel_backend_ops kernel_cuda_ops;
}

typedef __nv_bfloat16 bf16;
typedef __nv_fp8_e4m3 fp8;      /* an fp8 KV cache's element (1 byte, OCP E4M3) */

/* A KV cache element of either type (bf16, or fp8 for a cache of dtype
 * KERNEL_DTYPE_FP8_E4M3) from fp32, and back.  fp8 rounds to nearest even
 * and saturates to +-448 (__NV_SATFINITE, the cast vLLM's fp8 cache writes
 * use; one cvt instruction on sm_89+, cuda_fp8.h's software path on sm_80),
 * bit for bit kernel_fp8_e4m3_from_f32; per-tensor scales are 1.0.  Every
 * kernel that writes a cache element goes through kv_store, so a new
 * writer supports both types with one call. */
static __device__ __forceinline__ void kv_store(bf16 *dst, float x)
{
	*dst = __float2bfloat16_rn(x);
}

static __device__ __forceinline__ void kv_store(fp8 *dst, float x)
{
	dst->__x = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

static __device__ __forceinline__ float kv_load(bf16 x)
{
	return __bfloat162float(x);
}

/* An E4M3 byte as fp32, exactly, before sm_89 (no fp8 conversion
 * instructions; cuda_fp8.h's software path normalises subnormals in a loop,
 * which made the decode kernels spill on sm_80): the byte's sign at bit 31
 * and its 7 other bits at 26..20 make an fp32 whose exponent and mantissa
 * fields are E4M3's, worth the value times 2^-120 (E4M3's subnormals become
 * fp32 subnormals, kept: the kernels are not built with flush-to-zero), so
 * one multiply by 2^120 gives the value; 0x7f and 0xff are NaN. */
static __device__ __forceinline__ float fp8_bits_to_float(uint32_t b)
{
	const uint32_t u = (b & 0x7fu) == 0x7fu ? 0x7fc00000u   /* NaN, which the multiply keeps */
						: (b & 0x80u) << 24 | (b & 0x7fu) << 20;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f * 0x1p120f;
}

static __device__ __forceinline__ float kv_load(fp8 x)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
	return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.__x, __NV_E4M3)));
#else
	return fp8_bits_to_float(x.__x);
#endif
}

/* Two adjacent fp8 elements (the lower address in the low byte) as floats:
 * one cvt to f16x2 on sm_89+, fp8_bits_to_float before. */
static __device__ __forceinline__ float2 fp8x2_to_float2(uint16_t two)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
	return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(two, __NV_E4M3)));
#else
	return make_float2(fp8_bits_to_float(two & 0xffu), fp8_bits_to_float(two >> 8));
#endif
}

/* What a kernel found wrong in device-resident data.  The first fault of a
 * kernel claims the record (an atomic on a device word), writes the fields
 * and then `op`, in mapped pinned host memory, so the host reads it after
 * the stream has drained without a copy.  All fields are 0 when clear. */
enum cuda_fault_op {
	FAULT_NONE = 0,
	FAULT_ROPE_POS,          /* item = token, value = position; extra = 1: rope_kv_write */
	FAULT_KV_SLOT,           /* item = token, value = slot, limit = slots in the cache;
				  * extra = 1: rope_kv_write */
	FAULT_GATHER_IDX,        /* item = row, value = index, limit = source rows */
	FAULT_PREFILL_BLOCK,     /* item = sequence, index = table entry, value = block, limit = blocks */
	FAULT_DECODE_BLOCK,      /* the same for decode */
	FAULT_PREFILL_CHUNK,     /* item = sequence, index = q_start, value = q_end, extra = context */
	FAULT_DECODE_LEN,        /* item = sequence, value = kv_len, limit = max_kv_len */
};

struct cuda_fault {
	int op;                  /* enum cuda_fault_op; written last */
	int item, index, value, limit, extra;
};

/* Passed to every kernel that checks device data (by value). */
struct cuda_fault_ref {
	int *claim;              /* device int, 0 while the record is free */
	struct cuda_fault *rec;  /* device address of the mapped host record */
};

/* Record the first fault of the stream's kernels; later ones are dropped. */
static __device__ __forceinline__ void cuda_fault_raise(struct cuda_fault_ref f, int op, int item,
							int index, int value, int limit, int extra)
{
	if (atomicCAS(f.claim, 0, 1) == 0) {
		f.rec->item = item;
		f.rec->index = index;
		f.rec->value = value;
		f.rec->limit = limit;
		f.rec->extra = extra;
		__threadfence_system();
		f.rec->op = op;
		__threadfence_system();
	}
}

#define FULL_MASK 0xffffffffu

/* Sum and maximum over the 32 lanes of a warp (every lane gets it). */
static __device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(FULL_MASK, v, o);
	return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
	return v;
}

/* One backend instance (the framework's priv, zeroed at allocation). */
struct cuda_priv {
	int device;                     /* CUDA ordinal */
	cudaStream_t stream;            /* every operator and copy, in order */
	cublasHandle_t blas;            /* bound to stream */
	char name[256];                 /* the device's name */
	int cc_major, cc_minor;         /* compute capability */
	int sms;                        /* streaming multiprocessors */
	size_t smem_optin;              /* bytes of shared memory a block may opt in to */
	int runtime_version, driver_version;   /* CUDA versions, e.g. 13000 */
	char driver[64];                /* the driver's own version, e.g. "580.65.06" */
	struct cuda_fault *fault;       /* mapped pinned host memory */
	struct cuda_fault_ref fault_ref;
	void *stage;                    /* pinned staging for the _f32 transfers */
	size_t stage_bytes;
	void *dec_ws;                   /* split decode's partials (attention.cu), grown on use */
	size_t dec_ws_bytes;
	/* Graphs (cuda.cu, docs/kernels.md "Graphs"): cuBLAS's workspace,
	 * set once so that a captured GEMM allocates nothing; the graphs
	 * alive; device buffers a live graph may still use that their owner
	 * replaced (the decode partials when they grow), freed with the last
	 * graph. */
	void *blas_ws;
	int graphs;
	void **retired;
	int n_retired;
};

/* Make the instance's device current for the calling thread (a thread
 * starts on device 0; one instance may be used by different threads in
 * turn), calling cudaSetDevice only when another device is current.  Every
 * entry point calls it first. */
int cuda_enter(const struct cuda_priv *p, struct ss_error *err);

/* Free device buffer buf, or keep it until the last graph is freed when
 * graphs are alive (a graph captured its address). */
int cuda_retire(struct cuda_priv *p, void *buf, struct ss_error *err);

/* Set err from a CUDA / cuBLAS status: -EIO, "cuda: CALL: MESSAGE". */
int cuda_fail(struct ss_error *err, const char *call, cudaError_t e);
int cublas_fail(struct ss_error *err, const char *call, cublasStatus_t s);
/* The launch status of the last kernel (cudaGetLastError), as above. */
int cuda_launched(struct ss_error *err, const char *kernel);

/* Typed device pointers of a view. */
static inline bf16 *vbf(const struct kernel_view *v)
{
	return (bf16 *)v->buf + v->off;
}

static inline int32_t *vi32(const struct kernel_view *v)
{
	return (int32_t *)v->buf + v->off;
}

/* A view's row stride for an operator: ld, or the row's width for a single
 * row (whose ld the framework leaves unchecked). */
static inline size_t row_ld(const struct kernel_view *v, int rows, long cols)
{
	return rows > 1 || v->ld >= (size_t)cols ? v->ld : (size_t)cols;
}

/* 16-byte vector access is possible for rows of a view: the first element,
 * the stride and the width are multiples of 8 bf16 (buffers themselves are
 * 256-byte aligned by cudaMalloc). */
static inline bool vec8_ok(size_t off, size_t ld, long width)
{
	return off % 8 == 0 && ld % 8 == 0 && width % 8 == 0;
}

/* elementwise.cu */
int cuda_rmsnorm(void *priv, const struct kernel_rmsnorm_args *a, struct ss_error *err);
int cuda_rope(void *priv, const struct kernel_rope_args *a, struct ss_error *err);
int cuda_act(void *priv, const struct kernel_act_args *a, struct ss_error *err);
int cuda_kv_write(void *priv, const struct kernel_kv_write_args *a, struct ss_error *err);
int cuda_rope_kv_write(void *priv, const struct kernel_rope_kv_write_args *a, struct ss_error *err);
int cuda_fill_uniform(void *priv, const struct kernel_fill_uniform_args *a, struct ss_error *err);
int cuda_gather(void *priv, const struct kernel_gather_args *a, struct ss_error *err);
int cuda_argmax(void *priv, const struct kernel_argmax_args *a, struct ss_error *err);
/* Copy n whole blocks (every layer, K and V) between two device caches in
 * one launch. */
int cuda_kv_copy_device(struct cuda_priv *p, const struct kernel_kv_copy_args *a,
			struct ss_error *err);

/* attention.cu */
int cuda_attn_prefill(void *priv, const struct kernel_attn_prefill_args *a, struct ss_error *err);
int cuda_attn_decode(void *priv, const struct kernel_attn_decode_args *a, struct ss_error *err);
/* Let the prefill kernels use the shared memory they need (init). */
int cuda_attn_setup(struct cuda_priv *p, struct ss_error *err);

#endif
