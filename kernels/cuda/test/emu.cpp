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

/* The capture in progress: the stream recording, its graph, and whether
 * a refused call has spoiled it. */
static cudaStream_t capture_stream;
static std::vector<std::function<void()>> *capture_nodes;
static bool capture_spoiled;

/* Record node into the capture when stream s is capturing. */
static bool captured(cudaStream_t s, const std::function<void()> &node)
{
	if (!capture_nodes || s != capture_stream)
		return false;
	capture_nodes->push_back(node);
	return true;
}

static void run_launch(dim3 grid, dim3 block, size_t smem, const std::function<void()> &fn)
{
	nthreads = (int)(block.x * block.y * block.z);
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

void launch(dim3 grid, dim3 block, size_t smem, cudaStream_t s, std::function<void()> fn)
{
	int n = (int)(block.x * block.y * block.z);

	/* checked when launched, captured or not, as CUDA does */
	if (n < 1 || n > MAX_THREADS || n % 32)
		die("block size must be a multiple of 32 up to 1024 in the emulation");
	if (grid.y > 65535 || grid.z > 65535 || !grid.x || !grid.y || !grid.z)
		die("grid dimensions out of range");
	if (!captured(s, [=]() { run_launch(grid, block, smem, fn); }))
		run_launch(grid, block, smem, fn);
}

}  // namespace emu

/* The emulated graph and its executable form: the recorded work, in order. */
struct CUgraph_st {
	std::vector<std::function<void()>> nodes;
};

struct CUgraphExec_st {
	std::vector<std::function<void()>> nodes;
};

/* ---- runtime API ---- */

static void gemm_run(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float al,
		     const __nv_bfloat16 *a, int lda, const __nv_bfloat16 *b, int ldb, float be,
		     __nv_bfloat16 *c, int ldc);

static std::map<const void *, cudaMemoryType> allocations;
static std::map<const void *, size_t> allocation_bytes;
static cudaError_t last_error = cudaSuccess;

/* Devices: SERVESIM_CUDA_EMU_DEVICES of them (default 1), the current one
 * per host thread as in the runtime (a thread starts on device 0), and a
 * stream belongs to the device current when it was created: work issued on
 * it while another device is current fails, as the runtime refuses a
 * stream of another device (cudaErrorInvalidResourceHandle).  So a backend
 * that does not make its device current fails the suite, and the count of
 * cudaSetDevice calls (read by kernels/cuda/test/devices.c) shows one that
 * switches more than it needs to. */
static thread_local int current_device = 0;
static std::map<cudaStream_t, int> stream_device;
extern "C" {
unsigned long emu_set_device_calls;   /* cudaSetDevice calls, for devices.c */
}

static int device_count(void)
{
	const char *n = getenv("SERVESIM_CUDA_EMU_DEVICES");

	return n && atoi(n) > 0 ? atoi(n) : 1;
}

/* Work may be issued on s from this thread: s is the current device's. */
static bool on_current_device(cudaStream_t s)
{
	std::map<cudaStream_t, int>::iterator it = stream_device.find(s);

	return it == stream_device.end() || it->second == current_device;
}

static cudaError_t fail(cudaError_t e)
{
	last_error = e;
	return e;
}

/* A call CUDA refuses while this thread captures (thread-local mode):
 * cudaErrorStreamCaptureUnsupported, and the capture is spoiled. */
static bool refused_in_capture(cudaError_t *e)
{
	if (!emu::capture_nodes)
		return false;
	emu::capture_spoiled = true;
	*e = fail(cudaErrorStreamCaptureUnsupported);
	return true;
}

extern "C" {

cudaError_t cudaGetDeviceCount(int *n)
{
	if (getenv("SERVESIM_CUDA_EMU_NODEV")) {
		*n = 0;
		return fail(cudaErrorNoDevice);
	}
	*n = device_count();
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
	emu_set_device_calls++;
	if (d < 0 || d >= device_count())
		return fail(cudaErrorInvalidDevice);
	current_device = d;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
	*d = current_device;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int d)
{
	if (d < 0 || d >= device_count())
		return fail(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "CPU emulation of CUDA");
	prop->major = 9;
	prop->minor = 0;
	/* an H100's 132 (attention.cu splits decode by it), or
	 * SERVESIM_CUDA_EMU_SMS: devices.c makes grids that are capped by the
	 * SM count small enough to loop at sizes the emulation runs quickly */
	prop->multiProcessorCount = getenv("SERVESIM_CUDA_EMU_SMS") &&
				    atoi(getenv("SERVESIM_CUDA_EMU_SMS")) > 0 ?
				    atoi(getenv("SERVESIM_CUDA_EMU_SMS")) : 132;
	prop->sharedMemPerBlockOptin = 232448;   /* an H100's */
	return cudaSuccess;
}

/* No PCI device: the bus id of nothing, which NVML will not find. */
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d)
{
	if (d < 0 || d >= device_count())
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
	case cudaErrorInvalidResourceHandle:
		return "invalid resource handle";
	case cudaErrorStreamCaptureUnsupported:
		return "operation not permitted when stream is capturing";
	case cudaErrorStreamCaptureInvalidated:
		return "operation failed due to a previous error during capture";
	case cudaErrorIllegalState:
		return "the operation cannot be performed in the present state";
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
	cudaError_t e;

	*p = NULL;
	if (refused_in_capture(&e))
		return e;
	*p = aligned_alloc(256, (bytes + 255) / 256 * 256);
	if (!*p)
		return fail(cudaErrorMemoryAllocation);
	memset(*p, 0xff, bytes);   /* never-written device memory reads as NaN */
	allocations[*p] = cudaMemoryTypeDevice;
	allocation_bytes[*p] = bytes;
	return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	cudaError_t e;

	if (refused_in_capture(&e))
		return e;
	if (p && !allocations.erase(p))
		return fail(cudaErrorInvalidValue);
	allocation_bytes.erase(p);
	free(p);
	return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
	cudaError_t e;

	(void)flags;
	*p = NULL;
	if (refused_in_capture(&e))
		return e;
	*p = aligned_alloc(256, (bytes + 255) / 256 * 256);
	if (!*p)
		return fail(cudaErrorMemoryAllocation);
	memset(*p, 0xff, bytes);
	allocations[*p] = cudaMemoryTypeHost;
	allocation_bytes[*p] = bytes;
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

/* Device memory or pinned host memory (an allocation of ours), which a
 * captured copy may touch; pageable host memory may not. */
static bool ours(const void *p)
{
	std::map<const void *, size_t>::iterator it = allocation_bytes.upper_bound(p);

	if (it == allocation_bytes.begin())
		return false;
	--it;
	return (const char *)p < (const char *)it->first + it->second;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
			    cudaStream_t s)
{
	(void)kind;
	if (!on_current_device(s))
		return fail(cudaErrorInvalidResourceHandle);
	if (emu::capture_nodes && s == emu::capture_stream) {
		cudaError_t e;

		/* a pageable end cannot be a graph node (its copy is staged
		 * synchronously by the driver) */
		if (!ours(dst) || !ours(src)) {
			refused_in_capture(&e);
			return e;
		}
		emu::captured(s, [=]() { memmove(dst, src, bytes); });
		return cudaSuccess;
	}
	memmove(dst, src, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
	if (!on_current_device(s))
		return fail(cudaErrorInvalidResourceHandle);
	if (!emu::captured(s, [=]() { memset(p, v, bytes); }))
		memset(p, v, bytes);
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
	(void)flags;
	*s = (cudaStream_t)malloc(1);
	stream_device[*s] = current_device;
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	stream_device.erase(s);
	free((void *)s);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	cudaError_t e;

	if (!on_current_device(s))
		return fail(cudaErrorInvalidResourceHandle);
	if (refused_in_capture(&e))
		return e;
	return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
	(void)mode;
	if (emu::capture_nodes)
		return fail(cudaErrorIllegalState);   /* one capture at a time here */
	emu::capture_stream = s;
	emu::capture_nodes = new std::vector<std::function<void()>>();
	emu::capture_spoiled = false;
	return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
	std::vector<std::function<void()>> *nodes = emu::capture_nodes;

	*g = NULL;
	if (!nodes || s != emu::capture_stream)
		return fail(cudaErrorIllegalState);
	emu::capture_nodes = NULL;
	emu::capture_stream = NULL;
	if (emu::capture_spoiled) {
		delete nodes;
		return fail(cudaErrorStreamCaptureInvalidated);
	}
	*g = new CUgraph_st{ *nodes };
	delete nodes;
	return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
	(void)flags;
	*x = new CUgraphExec_st{ g->nodes };
	return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s)
{
	if (!on_current_device(s))
		return fail(cudaErrorInvalidResourceHandle);
	if (emu::capture_nodes && s == emu::capture_stream)
		return fail(cudaErrorStreamCaptureUnsupported);   /* no child graphs here */
	for (const std::function<void()> &node : x->nodes)
		node();
	return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	delete x;
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	delete g;
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
	if (!emu::captured(s, [=]() { *(double *)(void *)e = now_ms(); }))
		*(double *)(void *)e = now_ms();
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	cudaError_t r;

	(void)e;
	if (refused_in_capture(&r))
		return r;
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

/* The emulated handle: the stream its calls go to (captured with it). */
struct cublasContext {
	cudaStream_t stream;
	void *ws;
	size_t ws_bytes;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
	*h = new cublasContext();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
	delete h;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
	h->stream = s;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t bytes)
{
	if (bytes && !ours(ws))
		return CUBLAS_STATUS_INVALID_VALUE;
	h->ws = ws;
	h->ws_bytes = bytes;
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
	/* host alpha and beta are read at the call, captured by value */
	const float al = *(const float *)alpha, be = *(const float *)beta;

	(void)algo;
	if (at != CUDA_R_16BF || bt != CUDA_R_16BF || ct != CUDA_R_16BF || comp != CUBLAS_COMPUTE_32F)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (m < 0 || n < 0 || k < 0 || lda < (ta == CUBLAS_OP_N ? m : k) ||
	    ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m || lda < 1 || ldb < 1 || ldc < 1)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!emu::captured(h->stream, [=]() { gemm_run(ta, tb, m, n, k, al, a, lda, b, ldb, be, c,
						       ldc); }))
		gemm_run(ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
	return CUBLAS_STATUS_SUCCESS;
}

}  /* extern "C" */

static void gemm_run(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float al,
		     const __nv_bfloat16 *a, int lda, const __nv_bfloat16 *b, int ldb, float be,
		     __nv_bfloat16 *c, int ldc)
{
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
}
