/* servesim — the CPU emulation of CUDA behind emu.h: the block scheduler
 * (coroutines and barriers), the runtime API calls and cuBLAS GemmEx that
 * kernels/cuda/ uses.  Test tooling only (kernels/cuda/test/emu-run.sh,
 * the kernels-cuda-emu tests). */
/* The switches between coroutines are _setjmp/_longjmp from one stack to
 * another, which glibc's fortified longjmp (__longjmp_chk) would take for
 * a jump into an uninitialised frame and abort. */
#undef _FORTIFY_SOURCE

#include "emu.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#include <map>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace emu {

enum state { RUN, AT_BLOCK, AT_WARP, DONE };

#define STACK_BYTES (256 * 1024)
#define MAX_THREADS 1024

/* A thread starts on its own stack through makecontext/setcontext, and
 * from then on switches with _setjmp/_longjmp: swapcontext saves and sets
 * the signal mask, a system call per switch that was half the emulation's
 * run time (a block barrier is two switches per thread). */
struct thread {
	ucontext_t ctx;
	jmp_buf jb;
	bool started;
	char *stack;
	state st;
};

static thread th[MAX_THREADS];
static jmp_buf sched;
static int cur, nthreads;
static const std::function<void()> *body;
static std::vector<unsigned char> dyn;
static unsigned long long slots[MAX_THREADS];
static unsigned char wide[MAX_THREADS][EMU_WIDE_BYTES];

static void die(const char *what)
{
	fprintf(stderr, "cuda emulation: %s (block %u,%u,%u)\n", what, blockIdx.x, blockIdx.y,
		blockIdx.z);
	abort();
}

unsigned char *dyn_smem()
{
	return dyn.data();
}

int current_thread()
{
	return cur;
}

unsigned long long *shfl_slots()
{
	return slots;
}

unsigned char (*wide_slots())[EMU_WIDE_BYTES]
{
	return wide;
}

static void wait_as(state s)
{
	th[cur].st = s;
	if (!_setjmp(th[cur].jb))
		_longjmp(sched, 1);
}

void block_barrier()
{
	wait_as(AT_BLOCK);
}

void warp_barrier()
{
	wait_as(AT_WARP);
}

/* A thread's last act: back to the scheduler, never returning (its
 * ucontext's uc_link is not used). */
static void entry()
{
	(*body)();
	th[cur].st = DONE;
	_longjmp(sched, 1);
}

static void set_thread_idx(int t)
{
	threadIdx.x = (unsigned)t % blockDim.x;
	threadIdx.y = (unsigned)t / blockDim.x % blockDim.y;
	threadIdx.z = (unsigned)t / (blockDim.x * blockDim.y);
}

/* Run thread t until it waits at a barrier or exits. */
static __attribute__((noinline)) void resume(int t)
{
	cur = t;
	set_thread_idx(t);
	if (_setjmp(sched))
		return;
	if (th[t].started)
		_longjmp(th[t].jb, 1);
	th[t].started = true;
	setcontext(&th[t].ctx);
}

static void run_block()
{
	for (int t = 0; t < nthreads; t++) {
		if (!th[t].stack)
			th[t].stack = (char *)malloc(STACK_BYTES);
		getcontext(&th[t].ctx);
		th[t].ctx.uc_stack.ss_sp = th[t].stack;
		th[t].ctx.uc_stack.ss_size = STACK_BYTES;
		th[t].ctx.uc_link = NULL;
		makecontext(&th[t].ctx, entry, 0);
		th[t].started = false;
		th[t].st = RUN;
	}
	memset(dyn.data(), 0xff, dyn.size());
	for (;;) {
		bool released = false, all_done = true, all_block = true;

		for (int t = 0; t < nthreads; t++)
			if (th[t].st == RUN)
				resume(t);
		for (int w = 0; w < nthreads / 32; w++) {
			int at_warp = 0, done = 0;

			for (int t = 32 * w; t < 32 * w + 32; t++) {
				at_warp += th[t].st == AT_WARP;
				done += th[t].st == DONE;
			}
			if (at_warp && done)
				die("a warp shuffle with lanes that have exited");
			if (at_warp == 32) {
				for (int t = 32 * w; t < 32 * w + 32; t++)
					th[t].st = RUN;
				released = true;
			}
		}
		if (released)
			continue;
		for (int t = 0; t < nthreads; t++) {
			all_done &= th[t].st == DONE;
			all_block &= th[t].st == AT_BLOCK || th[t].st == DONE;
		}
		if (all_done)
			return;
		if (!all_block)
			die("deadlock: threads wait at different barriers");
		for (int t = 0; t < nthreads; t++)
			if (th[t].st == AT_BLOCK)
				th[t].st = RUN;
	}
}

void launch(dim3 grid, dim3 block, size_t smem, std::function<void()> fn)
{
	nthreads = (int)(block.x * block.y * block.z);
	if (nthreads < 1 || nthreads > MAX_THREADS || nthreads % 32)
		die("block size must be a multiple of 32 up to 1024 in the emulation");
	if (grid.y > 65535 || grid.z > 65535 || !grid.x || !grid.y || !grid.z)
		die("grid dimensions out of range");
	body = &fn;
	blockDim = block;
	gridDim = grid;
	dyn.assign(smem ? smem : 1, 0xff);
	for (unsigned z = 0; z < grid.z; z++)
		for (unsigned y = 0; y < grid.y; y++)
			for (unsigned x = 0; x < grid.x; x++) {
				blockIdx.x = x;
				blockIdx.y = y;
				blockIdx.z = z;
				run_block();
			}
	body = NULL;
}

}  // namespace emu

/* ---- runtime API ---- */

static std::map<const void *, cudaMemoryType> allocations;
static cudaError_t last_error = cudaSuccess;

static cudaError_t fail(cudaError_t e)
{
	last_error = e;
	return e;
}

extern "C" {

cudaError_t cudaGetDeviceCount(int *n)
{
	if (getenv("SERVESIM_CUDA_EMU_NODEV")) {
		*n = 0;
		return fail(cudaErrorNoDevice);
	}
	*n = 1;
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
	*v = 13000;
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
	*v = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
	return d == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int d)
{
	if (d != 0)
		return fail(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "CPU emulation of CUDA");
	prop->major = 9;
	prop->minor = 0;
	prop->multiProcessorCount = 132;   /* an H100's: attention.cu splits decode by it */
	prop->sharedMemPerBlockOptin = 232448;   /* an H100's */
	return cudaSuccess;
}

/* No PCI device: the bus id of nothing, which NVML will not find. */
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d)
{
	if (d != 0)
		return fail(cudaErrorInvalidDevice);
	snprintf(id, (size_t)len, "0000:00:00.0");
	return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "no error";
	case cudaErrorNoDevice:
		return "no CUDA-capable device is detected";
	case cudaErrorInvalidDevice:
		return "invalid device ordinal";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	default:
		return "emulated error";
	}
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;

	last_error = cudaSuccess;
	return e;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	*p = aligned_alloc(256, (bytes + 255) / 256 * 256);
	if (!*p)
		return fail(cudaErrorMemoryAllocation);
	memset(*p, 0xff, bytes);   /* never-written device memory reads as NaN */
	allocations[*p] = cudaMemoryTypeDevice;
	return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	if (p && !allocations.erase(p))
		return fail(cudaErrorInvalidValue);
	free(p);
	return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
	(void)flags;
	*p = aligned_alloc(256, (bytes + 255) / 256 * 256);
	if (!*p)
		return fail(cudaErrorMemoryAllocation);
	memset(*p, 0xff, bytes);
	allocations[*p] = cudaMemoryTypeHost;
	return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
	return cudaFree(p);
}

cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned int flags)
{
	(void)flags;
	*d = h;
	return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
	std::map<const void *, cudaMemoryType>::iterator it = allocations.upper_bound(p);

	memset(a, 0, sizeof(*a));
	a->type = cudaMemoryTypeUnregistered;
	if (it != allocations.begin()) {
		--it;
		a->type = it->second;   /* the allocation at or below p (buffers are never offset here) */
	}
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
			    cudaStream_t s)
{
	(void)kind;
	(void)s;
	memmove(dst, src, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
	(void)s;
	memset(p, v, bytes);
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
	(void)flags;
	*s = (cudaStream_t)malloc(1);
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	free((void *)s);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	(void)s;
	return cudaSuccess;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = (cudaEvent_t)calloc(1, sizeof(double));
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	free((void *)e);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	(void)s;
	*(double *)(void *)e = now_ms();
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	*ms = (float)(*(double *)(void *)b - *(double *)(void *)a);
	return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *f, enum cudaFuncAttribute attr, int v)
{
	(void)f;
	(void)attr;
	return v > 232448 ? fail(cudaErrorInvalidValue) : cudaSuccess;
}

/* ---- cuBLAS ---- */

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
	*h = (cublasHandle_t)malloc(1);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
	free((void *)h);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
	(void)h;
	(void)s;
	return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s)
{
	return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
}

/* C = alpha op(A) op(B) + beta C, column-major: op(A) is m x k, op(B) k x n;
 * A is lda x (k or m), element (i, j) at A[i + j * lda].  bf16 only, fp32
 * accumulation, one rounding of C; argument checks as cuBLAS documents. */
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
			    int n, int k, const void *alpha, const void *A, cudaDataType at, int lda,
			    const void *B, cudaDataType bt, int ldb, const void *beta, void *C,
			    cudaDataType ct, int ldc, cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
	const __nv_bfloat16 *a = (const __nv_bfloat16 *)A, *b = (const __nv_bfloat16 *)B;
	__nv_bfloat16 *c = (__nv_bfloat16 *)C;
	const float al = *(const float *)alpha, be = *(const float *)beta;

	(void)h;
	(void)algo;
	if (at != CUDA_R_16BF || bt != CUDA_R_16BF || ct != CUDA_R_16BF || comp != CUBLAS_COMPUTE_32F)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (m < 0 || n < 0 || k < 0 || lda < (ta == CUBLAS_OP_N ? m : k) ||
	    ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m || lda < 1 || ldb < 1 || ldc < 1)
		return CUBLAS_STATUS_INVALID_VALUE;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float s = 0;

			for (int l = 0; l < k; l++) {
				float x = __bfloat162float(ta == CUBLAS_OP_N ? a[i + (size_t)l * lda]
									    : a[l + (size_t)i * lda]);
				float y = __bfloat162float(tb == CUBLAS_OP_N ? b[l + (size_t)j * ldb]
									    : b[j + (size_t)l * ldb]);

				s += x * y;
			}
			s *= al;
			if (be != 0)
				s += be * __bfloat162float(c[i + (size_t)j * ldc]);
			c[i + (size_t)j * ldc] = __float2bfloat16_rn(s);
		}
	return CUBLAS_STATUS_SUCCESS;
}

}  /* extern "C" */
