/* servesim — a CPU emulation of the CUDA subset kernels/cuda/ uses, so that
 * the CUDA backend's own code (kernels, launch configuration, host logic)
 * runs through the conformance suite on a machine without a GPU
 * (kernels/cuda/test/emu-run.sh; docs/kernels.md, "Testing without a GPU").
 *
 * Force-included (g++ -include emu.h) before a .cu file that emu-run.sh has
 * rewritten: `k<<<grid, block, smem, stream>>>(args)` becomes
 * `EMU_LAUNCH(k, grid, block, smem, stream)(args)` and `extern __shared__
 * T name[];` a pointer to the launch's dynamic shared memory.
 *
 * Model: a launch runs its blocks one after another; a block's threads are
 * coroutines (ucontext) that run until they reach __syncthreads or a warp
 * shuffle, which are barriers (a block barrier releases when every live
 * thread of the block waits at one; a warp barrier when all 32 lanes of the
 * warp wait at one, and a shuffle that a lane has exited from is an error,
 * as is a deadlock).  `__shared__` variables are function statics: shared
 * by the threads of a block, garbage-filled before each block where they
 * are dynamic.  Device memory is host memory filled with 0xff (bf16 NaN)
 * by cudaMalloc, so reading memory that was never written shows.  Streams
 * are synchronous; events read CLOCK_MONOTONIC.  cuBLAS's GemmEx is a
 * column-major reference loop with the documented semantics.
 *
 * Stream capture (CUDA graphs): while a stream captures, kernel launches,
 * GemmEx, memsets, event records and copies between device or pinned
 * memory issued on it are recorded into the graph in order instead of
 * running, and cudaGraphLaunch runs them in that order.  The calls CUDA
 * refuses in a thread-local capture (a copy touching pageable host memory,
 * a synchronize, cudaMalloc/cudaFree/cudaHostAlloc/cudaFreeHost) fail with
 * cudaErrorStreamCaptureUnsupported and spoil the capture, whose
 * cudaStreamEndCapture then fails with cudaErrorStreamCaptureInvalidated,
 * as on a GPU.  One capture at a time.
 *
 * The warp-level instructions of kernels/cuda/warp-mma.h (mma.sync,
 * ldmatrix, cp.async) have emulated bodies there, chosen by SS_CUDA_EMU:
 * warp barriers that gather every lane's registers (emu_warp_gather) and
 * compute each lane's result by the PTX fragment layouts.
 *
 * Not modelled: concurrency between blocks, memory-model races within a
 * block (the coroutines interleave only at barriers), asynchronous copies
 * (cp.async completes at once, so a missing wait_group goes unseen),
 * performance.
 */
#ifndef SS_CUDA_EMU_H
#define SS_CUDA_EMU_H

/* For code that has an emulated body beside its PTX (kernels/cuda/warp-mma.h). */
#define SS_CUDA_EMU 1

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __launch_bounds__(...)

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stddef.h>
#include <string.h>

#include <functional>

extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

namespace emu {
void launch(dim3 grid, dim3 block, size_t smem, cudaStream_t s, std::function<void()> body);
unsigned char *dyn_smem();
void block_barrier();
void warp_barrier();
int current_thread();
unsigned long long *shfl_slots();
/* Per-thread slots of EMU_WIDE_BYTES for emu_warp_gather. */
#define EMU_WIDE_BYTES 64
unsigned char (*wide_slots())[EMU_WIDE_BYTES];

/* k(args...) for every thread of every block of the launch. */
template <typename K> struct launcher {
	K *k;
	dim3 grid, block;
	size_t smem;
	cudaStream_t stream;

	template <typename... A> void operator()(A... args) const
	{
		K *fn = k;

		launch(grid, block, smem, stream, [=]() { fn(args...); });
	}
};

template <typename K>
launcher<K> make_launcher(K *k, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t s = 0)
{
	return launcher<K>{ k, grid, block, smem, s };
}
}  // namespace emu

#define EMU_LAUNCH(k, ...) emu::make_launcher(&k, __VA_ARGS__)

static inline void __syncthreads()
{
	emu::block_barrier();
}

template <typename T> static inline T emu_exchange(T v, int src_lane)
{
	const int me = emu::current_thread(), base = me - me % 32;
	unsigned long long *slots = emu::shfl_slots();
	T r;

	static_assert(sizeof(T) <= sizeof(unsigned long long), "shuffle of a wide type");
	memcpy(&slots[me], &v, sizeof(T));
	emu::warp_barrier();
	memcpy(&r, &slots[base + (src_lane & 31)], sizeof(T));
	emu::warp_barrier();   /* nobody overwrites a slot before all have read */
	return r;
}

/* Every lane's v into all[0..31] (a warp barrier, as a warp-wide
 * instruction such as mma.sync or ldmatrix is): the wider exchange the
 * emulated warp-mma.h wrappers use. */
template <typename T> static inline void emu_warp_gather(const T &v, T *all)
{
	const int me = emu::current_thread(), base = me - me % 32;
	unsigned char (*slots)[EMU_WIDE_BYTES] = emu::wide_slots();

	static_assert(sizeof(T) <= EMU_WIDE_BYTES, "a gather wider than the slots");
	memcpy(slots[me], &v, sizeof(T));
	emu::warp_barrier();
	for (int l = 0; l < 32; l++)
		memcpy(&all[l], slots[base + l], sizeof(T));
	emu::warp_barrier();   /* nobody overwrites a slot before all have read */
}

template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
	(void)width;
	if (mask != 0xffffffffu)
		__builtin_trap();   /* only full-warp shuffles are modelled */
	return emu_exchange(v, (emu::current_thread() % 32) ^ lane_mask);
}

template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
	(void)width;
	if (mask != 0xffffffffu)
		__builtin_trap();
	return emu_exchange(v, src);
}

static inline int atomicCAS(int *a, int cmp, int val)
{
	int old = *a;

	if (old == cmp)
		*a = val;
	return old;
}

static inline void __threadfence_system()
{
}

static inline float rsqrtf(float x)
{
	return 1.0f / sqrtf(x);
}

/* fp32 operations rounded to nearest, never contracted (g++ for baseline
 * x86-64 emits no FMA, and SSE has no excess precision). */
static inline float __fmul_rn(float a, float b)
{
	return a * b;
}

static inline float __fadd_rn(float a, float b)
{
	return a + b;
}

#endif
