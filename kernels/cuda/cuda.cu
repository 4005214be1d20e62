/* servesim — the CUDA backend ("cuda"): bf16 storage, fp32 accumulation
 * (docs/kernels.md, "The CUDA backend").
 *
 * This file: the ops table, the instance (one non-blocking stream, one
 * cuBLAS handle bound to it), memory, transfers, CUDA-event timers, the
 * GEMM (cuBLAS), the host side of kv_copy and graphs (stream capture).  The kernels are in
 * elementwise.cu and attention.cu.
 *
 * Everything is issued on the instance's stream.  Calls that wait
 * (download, the _f32 transfers, upload, sync, timer_end) synchronize the
 * stream, so they surface errors of kernels issued before them, and then
 * read the fault record (cuda-int.h) in which kernels report bad
 * device-resident data; such a fault is -EINVAL, a CUDA error -EIO.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-int.h"

#define STAGE_BYTES ((size_t)4 << 20)   /* pinned staging of the _f32 transfers */
/* cuBLAS's workspace, set once (cublasSetWorkspace): 32 MiB, what cuBLAS's
 * documentation of cublasSetWorkspace recommends on Hopper (4 MiB before). */
#define BLAS_WS_BYTES ((size_t)32 << 20)

/* CUDA-event timer (struct kernel_timer's event). */
struct cuda_timer {
	cudaEvent_t start, stop;
};

/* ---- errors ---- */

int cuda_fail(struct ss_error *err, const char *call, cudaError_t e)
{
	(void)cudaGetLastError();   /* clear a non-sticky error so later calls start clean */
	return ss_error_set(err, -EIO, NULL, 0, "cuda: %s: %s", call, cudaGetErrorString(e));
}

int cublas_fail(struct ss_error *err, const char *call, cublasStatus_t s)
{
	return ss_error_set(err, -EIO, NULL, 0, "cuda: %s: %s", call, cublasGetStatusString(s));
}

int cuda_launched(struct ss_error *err, const char *kernel)
{
	cudaError_t e = cudaGetLastError();

	if (e == cudaSuccess)
		return 0;
	return ss_error_set(err, -EIO, NULL, 0, "cuda: %s launch: %s", kernel,
			    cudaGetErrorString(e));
}

/* Switch only when the calling thread's current device is another one.
 * The runtime keeps the current device per host thread and cudaGetDevice
 * reads it, whereas cudaSetDevice, called by every entry point before,
 * goes to the driver each time to make the device's primary context
 * current (FasterTransformer's getSetDevice checks first the same way).
 * Asking the runtime rather than caching the device last set by this
 * module in a thread-local: the answer is right for whatever thread calls
 * (an instance may move between threads, and a new thread starts on device
 * 0), it stays right when the application or another instance switches the
 * device in between, and the library keeps no thread-local state
 * (STYLE.md). */
int cuda_enter(const struct cuda_priv *p, struct ss_error *err)
{
	int cur = -1;
	cudaError_t e = cudaGetDevice(&cur);

	if (e == cudaSuccess && cur == p->device)
		return 0;
	e = cudaSetDevice(p->device);
	return e == cudaSuccess ? 0 : cuda_fail(err, "cudaSetDevice", e);
}

/* The fault a kernel recorded since the last check, as -EINVAL naming the
 * operator and the bad value; clears the record. */
static int fault_check(struct cuda_priv *p, struct ss_error *err)
{
	volatile struct cuda_fault *f = p->fault;
	static const char found[] = "found on the GPU; that operator's output is invalid";
	struct cuda_fault c;

	if (!f->op)
		return 0;
	c.op = f->op;
	c.item = f->item;
	c.index = f->index;
	c.value = f->value;
	c.limit = f->limit;
	c.extra = f->extra;
	f->item = 0;
	f->index = 0;
	f->value = 0;
	f->limit = 0;
	f->extra = 0;
	f->op = 0;
	/* The stream is idle: free the claim for later kernels. */
	(void)cudaMemsetAsync(p->fault_ref.claim, 0, sizeof(int), p->stream);
	switch (c.op) {
	case FAULT_ROPE_POS:
		return ss_error_set(err, -EINVAL, NULL, 0, "%s: token %d has position %d (%s)",
				    c.extra ? "rope_kv_write" : "rope", c.item, c.value, found);
	case FAULT_KV_SLOT:
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s: token %d's slot %d is outside the cache (%d slots) (%s)",
				    c.extra ? "rope_kv_write" : "kv_write", c.item, c.value, c.limit,
				    found);
	case FAULT_GATHER_IDX:
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "gather: index %d of row %d is outside 0..%d (%s)", c.value,
				    c.item, c.limit - 1, found);
	case FAULT_PREFILL_BLOCK:
	case FAULT_DECODE_BLOCK:
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s: sequence %d's block table entry %d is %d, outside the cache "
				    "(%d blocks) (%s)",
				    c.op == FAULT_PREFILL_BLOCK ? "attn_prefill" : "attn_decode",
				    c.item, c.index, c.value, c.limit, found);
	case FAULT_PREFILL_CHUNK:
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "attn_prefill: sequence %d's chunk [%d, %d) with context %d is "
				    "outside tokens, max_q_len or max_kv_len (%s)", c.item, c.index,
				    c.value, c.extra, found);
	case FAULT_DECODE_LEN:
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "attn_decode: sequence %d's kv_len %d is outside 1..%d (%s)", c.item,
				    c.value, c.limit, found);
	}
	return ss_error_set(err, -EINVAL, NULL, 0, "fault %d (%s)", c.op, found);
}

/* Wait for the stream, then report what its kernels found. */
static int drain(struct cuda_priv *p, struct ss_error *err)
{
	cudaError_t e = cudaStreamSynchronize(p->stream);

	if (e != cudaSuccess)
		return cuda_fail(err, "cudaStreamSynchronize", e);
	return fault_check(p, err);
}

/* ---- instance ---- */

static void cuda_release(void *priv)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;

	(void)cudaSetDevice(p->device);
	if (p->stream)
		(void)cudaStreamSynchronize(p->stream);
	if (p->blas)
		(void)cublasDestroy(p->blas);
	if (p->fault_ref.claim)
		(void)cudaFree(p->fault_ref.claim);
	if (p->fault)
		(void)cudaFreeHost(p->fault);
	if (p->stage)
		(void)cudaFreeHost(p->stage);
	if (p->dec_ws)
		(void)cudaFree(p->dec_ws);
	for (int i = 0; i < p->n_retired; i++)
		(void)cudaFree(p->retired[i]);
	free(p->retired);
	if (p->blas_ws)
		(void)cudaFree(p->blas_ws);
	if (p->stream)
		(void)cudaStreamDestroy(p->stream);
	(void)cudaGetLastError();
	memset(p, 0, sizeof(*p));
}

/* "13.0" from 13000. */
static void version_str(int v, char *buf, size_t len)
{
	snprintf(buf, len, "%d.%d", v / 1000, v % 1000 / 10);
}

/* The NVIDIA kernel module's version ("580.65.06") from Linux's
 * /proc/driver/nvidia/version; else the CUDA version the driver supports. */
static void driver_str(int cuda_version, char *buf, size_t len)
{
	char line[256], *at;
	FILE *f = fopen("/proc/driver/nvidia/version", "r");
	bool found = false;

	if (f) {
		if (fgets(line, sizeof(line), f) && (at = strstr(line, "Kernel Module"))) {
			at += strlen("Kernel Module");
			at += strspn(at, " \t");
			at[strcspn(at, " \t\n")] = '\0';
			found = *at != '\0';
			if (found)
				snprintf(buf, len, "%s", at);
		}
		fclose(f);
	}
	if (!found) {
		char v[16];

		version_str(cuda_version, v, sizeof(v));
		snprintf(buf, len, "for CUDA %s", v);
	}
}

static int cuda_init(void *priv, const struct kernel_backend_config *cfg, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	struct cudaDeviceProp prop;
	cublasStatus_t bs;
	cudaError_t e;
	char rt[16];
	int n = 0, rc = 0;

	(void)cudaDriverGetVersion(&p->driver_version);
	(void)cudaRuntimeGetVersion(&p->runtime_version);
	version_str(p->runtime_version, rt, sizeof(rt));
	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return ss_error_set(err, -ENODEV, NULL, 0, "cuda: no CUDA device: %s%s (runtime %s)",
				    cudaGetErrorString(e),
				    p->driver_version ? "" : "; no NVIDIA driver is loaded", rt);
	}
	if (n < 1)
		return ss_error_set(err, -ENODEV, NULL, 0,
				    "cuda: no CUDA device: cudaGetDeviceCount found none");
	if (cfg->device < 0 || cfg->device >= n)
		return ss_error_set(err, -ENODEV, NULL, 0,
				    "cuda: no CUDA device %d (this machine has %d, numbered from 0)",
				    cfg->device, n);
	p->device = cfg->device;
	e = cudaSetDevice(p->device);
	if (e == cudaSuccess)
		e = cudaGetDeviceProperties(&prop, p->device);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return ss_error_set(err, -ENODEV, NULL, 0, "cuda: no usable CUDA device %d: %s",
				    p->device, cudaGetErrorString(e));
	}
	snprintf(p->name, sizeof(p->name), "%s", prop.name);
	driver_str(p->driver_version, p->driver, sizeof(p->driver));
	p->cc_major = prop.major;
	p->cc_minor = prop.minor;
	p->sms = prop.multiProcessorCount;
	p->smem_optin = prop.sharedMemPerBlockOptin;
	/* The build carries sm_80 and sm_90 code and compute_90 PTX: GPUs of
	 * compute capability 8.x run the sm_80 code, 9.0 and later the rest. */
	if (p->cc_major < 8)
		return ss_error_set(err, -ENODEV, NULL, 0,
				    "cuda: %s has compute capability %d.%d; servesim's CUDA kernels "
				    "need 8.0 (Ampere) or newer", p->name, p->cc_major, p->cc_minor);

	e = cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		rc = cuda_fail(err, "cudaStreamCreateWithFlags", e);
		goto fail;
	}
	bs = cublasCreate(&p->blas);
	if (bs == CUBLAS_STATUS_SUCCESS)
		bs = cublasSetStream(p->blas, p->stream);
	if (bs != CUBLAS_STATUS_SUCCESS) {
		rc = cublas_fail(err, "cublasCreate", bs);
		goto fail;
	}
	/* A workspace of our own: without one cuBLAS allocates its own, and
	 * under stream capture that is either refused (cudaMalloc is not
	 * allowed while capturing) or, from CUDA 12.2, captured as a
	 * cudaMallocAsync node in each graph; PyTorch sets one per handle for
	 * the same reason (pytorch#83461: a new workspace per captured graph
	 * otherwise).  One buffer, allocated once, used by eager and captured
	 * GEMMs alike: they run in stream order, never at once. */
	e = cudaMalloc(&p->blas_ws, BLAS_WS_BYTES);
	if (e != cudaSuccess) {
		p->blas_ws = NULL;
		rc = cuda_fail(err, "cudaMalloc (cuBLAS workspace)", e);
		goto fail;
	}
	bs = cublasSetWorkspace(p->blas, p->blas_ws, BLAS_WS_BYTES);
	if (bs != CUBLAS_STATUS_SUCCESS) {
		rc = cublas_fail(err, "cublasSetWorkspace", bs);
		goto fail;
	}
	e = cudaHostAlloc((void **)&p->fault, sizeof(*p->fault), cudaHostAllocMapped);
	if (e == cudaSuccess) {
		memset(p->fault, 0, sizeof(*p->fault));
		e = cudaHostGetDevicePointer((void **)&p->fault_ref.rec, p->fault, 0);
	}
	if (e != cudaSuccess) {
		rc = cuda_fail(err, "cudaHostAlloc (fault record)", e);
		goto fail;
	}
	e = cudaMalloc((void **)&p->fault_ref.claim, sizeof(int));
	if (e == cudaSuccess)
		e = cudaMemsetAsync(p->fault_ref.claim, 0, sizeof(int), p->stream);
	if (e != cudaSuccess) {
		rc = cuda_fail(err, "cudaMalloc (fault claim)", e);
		goto fail;
	}
	e = cudaHostAlloc(&p->stage, STAGE_BYTES, cudaHostAllocDefault);
	if (e != cudaSuccess) {
		p->stage = NULL;
		rc = cuda_fail(err, "cudaHostAlloc (staging)", e);
		goto fail;
	}
	p->stage_bytes = STAGE_BYTES;
	rc = cuda_attn_setup(p, err);
	if (rc)
		goto fail;
	e = cudaStreamSynchronize(p->stream);
	if (e != cudaSuccess) {
		rc = cuda_fail(err, "cudaStreamSynchronize", e);
		goto fail;
	}
	return 0;
fail:
	cuda_release(p);
	return rc;
}

static void cuda_device_name(void *priv, char *buf, size_t len)
{
	const struct cuda_priv *p = (const struct cuda_priv *)priv;
	char rt[16];

	version_str(p->runtime_version, rt, sizeof(rt));
	snprintf(buf, len, "%s (sm_%d%d, %d SMs), CUDA %s, driver %s", p->name, p->cc_major,
		 p->cc_minor, p->sms, rt, p->driver);
}

static bool cuda_device_pci_bus_id(void *priv, char *buf, size_t len)
{
	const struct cuda_priv *p = (const struct cuda_priv *)priv;

	return cudaDeviceGetPCIBusId(buf, (int)len, p->device) == cudaSuccess;
}

/* ---- memory and transfers ---- */

static int cuda_alloc(void *priv, void **buf, size_t bytes, enum kernel_mem mem,
		      struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	cudaError_t e;
	int rc = cuda_enter(p, err);

	*buf = NULL;
	if (rc)
		return rc;
	if (mem == KERNEL_MEM_HOST) {
		/* Pinned and mapped: copy engines reach it at full speed. */
		e = cudaHostAlloc(buf, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
		if (e != cudaSuccess) {
			*buf = NULL;
			(void)cudaGetLastError();
			return ss_error_set(err, -EIO, NULL, 0, "cuda: cudaHostAlloc of %zu bytes: %s",
					    bytes, cudaGetErrorString(e));
		}
		memset(*buf, 0, bytes);
		return 0;
	}
	e = cudaMalloc(buf, bytes);
	if (e != cudaSuccess) {
		*buf = NULL;
		(void)cudaGetLastError();
		return ss_error_set(err, -EIO, NULL, 0, "cuda: cudaMalloc of %zu bytes: %s", bytes,
				    cudaGetErrorString(e));
	}
	e = cudaMemsetAsync(*buf, 0, bytes, p->stream);
	if (e != cudaSuccess) {
		(void)cudaFree(*buf);
		*buf = NULL;
		return cuda_fail(err, "cudaMemsetAsync", e);
	}
	return 0;
}

/* Is buf pinned host memory (KERNEL_MEM_HOST) rather than device memory? */
static bool is_host(const void *buf)
{
	struct cudaPointerAttributes at;

	if (cudaPointerGetAttributes(&at, buf) != cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	return at.type == cudaMemoryTypeHost;
}

static void cuda_free(void *priv, void *buf)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;

	if (!buf || cuda_enter(p, NULL))
		return;
	/* Work still queued may use buf: let it finish (cudaFree waits for
	 * the device by itself; cudaFreeHost is not documented to). */
	(void)cudaStreamSynchronize(p->stream);
	if (is_host(buf))
		(void)cudaFreeHost(buf);
	else
		(void)cudaFree(buf);
	(void)cudaGetLastError();
}

static int cuda_upload(void *priv, void *dst, size_t off, const void *src, size_t bytes,
		       struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	cudaError_t e;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	e = cudaMemcpyAsync((char *)dst + off, src, bytes, cudaMemcpyDefault, p->stream);
	if (e != cudaSuccess)
		return cuda_fail(err, "cudaMemcpyAsync (upload)", e);
	/* src may be reused on return whatever memory it is */
	return drain(p, err);
}

static int cuda_download(void *priv, void *dst, const void *src, size_t off, size_t bytes,
			 struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	cudaError_t e;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	e = cudaMemcpyAsync(dst, (const char *)src + off, bytes, cudaMemcpyDefault, p->stream);
	if (e != cudaSuccess)
		return cuda_fail(err, "cudaMemcpyAsync (download)", e);
	return drain(p, err);
}

/* float -> bf16, rounding to nearest even; NaN stays a (quiet) NaN. */
static inline uint16_t f2bf(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static inline float bf2f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Host floats, converted on the host into pinned staging, then copied. */
static int cuda_upload_f32(void *priv, void *dst, size_t off, const float *src, size_t n,
			   struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	uint16_t *stage = (uint16_t *)p->stage;
	const size_t chunk = p->stage_bytes / sizeof(uint16_t);
	int rc = cuda_enter(p, err);

	for (size_t done = 0; done < n && !rc;) {
		size_t k = n - done < chunk ? n - done : chunk;
		cudaError_t e;

		for (size_t i = 0; i < k; i++)
			stage[i] = f2bf(src[done + i]);
		e = cudaMemcpyAsync((uint16_t *)dst + off + done, stage, k * sizeof(uint16_t),
				    cudaMemcpyDefault, p->stream);
		if (e != cudaSuccess)
			return cuda_fail(err, "cudaMemcpyAsync (upload)", e);
		rc = drain(p, err);   /* before the staging is refilled */
		done += k;
	}
	return rc;
}

static int cuda_download_f32(void *priv, float *dst, const void *src, size_t off, size_t n,
			     struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const uint16_t *stage = (const uint16_t *)p->stage;
	const size_t chunk = p->stage_bytes / sizeof(uint16_t);
	int rc = cuda_enter(p, err);

	for (size_t done = 0; done < n && !rc;) {
		size_t k = n - done < chunk ? n - done : chunk;
		cudaError_t e;

		e = cudaMemcpyAsync(p->stage, (const uint16_t *)src + off + done,
				    k * sizeof(uint16_t), cudaMemcpyDefault, p->stream);
		if (e != cudaSuccess)
			return cuda_fail(err, "cudaMemcpyAsync (download)", e);
		rc = drain(p, err);
		for (size_t i = 0; i < k && !rc; i++)
			dst[done + i] = bf2f(stage[i]);
		done += k;
	}
	return rc;
}

static int cuda_sync(void *priv, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	int rc = cuda_enter(p, err);

	return rc ? rc : drain(p, err);
}

/* ---- timing ---- */

static int cuda_timer_begin(void *priv, struct kernel_timer *t, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	struct cuda_timer *ct;
	cudaError_t e;
	int rc = cuda_enter(p, err);

	t->event = NULL;
	t->start_ns = kernel_monotonic_ns();
	if (rc)
		return rc;
	ct = (struct cuda_timer *)calloc(1, sizeof(*ct));
	if (!ct)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	e = cudaEventCreate(&ct->start);
	if (e == cudaSuccess) {
		e = cudaEventCreate(&ct->stop);
		if (e != cudaSuccess)
			(void)cudaEventDestroy(ct->start);
	}
	if (e != cudaSuccess) {
		free(ct);
		return cuda_fail(err, "cudaEventCreate", e);
	}
	e = cudaEventRecord(ct->start, p->stream);
	if (e != cudaSuccess) {
		(void)cudaEventDestroy(ct->start);
		(void)cudaEventDestroy(ct->stop);
		free(ct);
		return cuda_fail(err, "cudaEventRecord", e);
	}
	t->event = ct;
	return 0;
}

static int cuda_timer_end(void *priv, struct kernel_timer *t, int64_t *elapsed_ns,
			  struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	struct cuda_timer *ct = (struct cuda_timer *)t->event;
	const char *call = "cudaEventRecord";
	float ms = 0;
	cudaError_t e;
	int rc;

	*elapsed_ns = 0;
	if (!ct)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "cuda: timer_end without a successful timer_begin");
	rc = cuda_enter(p, err);
	e = cudaEventRecord(ct->stop, p->stream);
	if (e == cudaSuccess) {
		call = "cudaEventSynchronize";
		e = cudaEventSynchronize(ct->stop);
	}
	if (e == cudaSuccess) {
		call = "cudaEventElapsedTime";
		e = cudaEventElapsedTime(&ms, ct->start, ct->stop);
	}
	(void)cudaEventDestroy(ct->start);
	(void)cudaEventDestroy(ct->stop);
	free(ct);
	t->event = NULL;
	if (rc)
		return rc;
	if (e != cudaSuccess)
		return cuda_fail(err, call, e);
	*elapsed_ns = ms > 0 ? (int64_t)((double)ms * 1e6) : 0;
	return fault_check(p, err);
}

/* ---- GEMM ---- */

/* Row-major y[m,n] = x[m,k] W[n,k]^T.  cuBLAS is column-major: a
 * row-major matrix with row stride ld is, read column-major, its transpose
 * with leading dimension ld.  So cuBLAS sees y^T (n x m, ldy), x^T (k x m,
 * ldx) and W^T (k x n, ldw), and y^T = W x^T = (W^T)^T x^T is
 * gemm(op(A) = T, op(B) = N, n, m, k) with A = W^T, B = x^T.  bf16 in and
 * out, fp32 accumulation (CUBLAS_COMPUTE_32F, float alpha and beta);
 * accumulate is beta = 1, the output rounded once. */
static int cuda_gemm(void *priv, const struct kernel_gemm_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const float alpha = 1.0f, beta = a->accumulate ? 1.0f : 0.0f;
	size_t ldw = row_ld(&a->w, a->n, a->k), ldx = row_ld(&a->x, a->m, a->k);
	size_t ldy = row_ld(&a->y, a->m, a->n);
	cublasStatus_t s;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	if (ldw > INT_MAX || ldx > INT_MAX || ldy > INT_MAX)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "gemm: a row stride beyond cuBLAS's int range");
	s = cublasGemmEx(p->blas, CUBLAS_OP_T, CUBLAS_OP_N, a->n, a->m, a->k, &alpha,
			 vbf(&a->w), CUDA_R_16BF, (int)ldw, vbf(&a->x), CUDA_R_16BF, (int)ldx,
			 &beta, vbf(&a->y), CUDA_R_16BF, (int)ldy, CUBLAS_COMPUTE_32F,
			 CUBLAS_GEMM_DEFAULT);
	if (s != CUBLAS_STATUS_SUCCESS)
		return cublas_fail(err, "cublasGemmEx", s);
	return 0;
}

/* ---- KV block copies ---- */

/* Device to device in one kernel launch (elementwise.cu); anything touching
 * pinned host memory (swap out, swap in) as cudaMemcpyAsync on the copy
 * engines, one per layer and K/V for each run of consecutive block ids on
 * both sides. */
static int cuda_kv_copy(void *priv, const struct kernel_kv_copy_args *a, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	const struct kernel_kv_cache *s = a->src, *d = a->dst;
	const size_t block = (size_t)s->block_size * kv_token_elems(s);   /* elements */
	const size_t s_layer = (size_t)s->num_blocks * block, d_layer = (size_t)d->num_blocks * block;
	const size_t es = kernel_kv_cache_is_fp8(s) ? sizeof(fp8) : sizeof(bf16);   /* bytes */
	const bool same = s->k == d->k;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	if (!is_host(s->k) && !is_host(d->k))
		return cuda_kv_copy_device(p, a, err);
	for (int i = 0, j; i < a->n; i = j) {
		size_t bytes;

		for (j = i + 1; j < a->n; j++)
			if (a->src_ids[j] != a->src_ids[j - 1] + 1 ||
			    a->dst_ids[j] != a->dst_ids[j - 1] + 1)
				break;
		if (same && a->src_ids[i] == a->dst_ids[i])
			continue;   /* a run onto itself */
		bytes = (size_t)(j - i) * block * es;
		for (int l = 0; l < s->layers; l++) {
			size_t from = (l * s_layer + (size_t)a->src_ids[i] * block) * es;
			size_t to = (l * d_layer + (size_t)a->dst_ids[i] * block) * es;
			cudaError_t e;

			e = cudaMemcpyAsync((char *)d->k + to, (const char *)s->k + from, bytes,
					    cudaMemcpyDefault, p->stream);
			if (e == cudaSuccess)
				e = cudaMemcpyAsync((char *)d->v + to, (const char *)s->v + from,
						    bytes, cudaMemcpyDefault, p->stream);
			if (e != cudaSuccess)
				return cuda_fail(err, "cudaMemcpyAsync (kv_copy)", e);
		}
	}
	return 0;
}

/* ---- graphs ---- */

int cuda_retire(struct cuda_priv *p, void *buf, struct ss_error *err)
{
	void **r;
	cudaError_t e;

	if (!p->graphs) {
		e = cudaFree(buf);
		return e == cudaSuccess ? 0 : cuda_fail(err, "cudaFree", e);
	}
	r = (void **)realloc(p->retired, (size_t)(p->n_retired + 1) * sizeof(*r));
	if (!r)   /* leak buf: freeing it would leave a graph reading freed memory */
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	r[p->n_retired++] = buf;
	p->retired = r;
	return 0;
}

/* Capture mode thread-local: operators the calling thread issues while it
 * records are checked (an upload from pageable memory, a synchronize, a
 * cudaMalloc fail with cudaErrorStreamCaptureUnsupported and spoil the
 * capture, so a step that uploads inside its capture is caught, not
 * silently baked in), while other threads, which may drive other backend
 * instances, are left alone (global mode would refuse their cudaMalloc for
 * the length of our capture; relaxed mode would let our own cudaMalloc
 * through, to be missing from every replay). */
static int cuda_graph_begin(void *priv, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	cudaError_t e;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	e = cudaStreamBeginCapture(p->stream, cudaStreamCaptureModeThreadLocal);
	return e == cudaSuccess ? 0 : cuda_fail(err, "cudaStreamBeginCapture", e);
}

static int cuda_graph_end(void *priv, void **graph, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	cudaError_t e;

	*graph = NULL;
	(void)cudaSetDevice(p->device);
	e = cudaStreamEndCapture(p->stream, &g);
	if (e != cudaSuccess) {
		if (g)
			(void)cudaGraphDestroy(g);
		return cuda_fail(err, "cudaStreamEndCapture", e);
	}
	/* The executable graph is a copy: the template can go at once. */
	e = cudaGraphInstantiate(&x, g, 0);
	(void)cudaGraphDestroy(g);
	if (e != cudaSuccess)
		return cuda_fail(err, "cudaGraphInstantiate", e);
	p->graphs++;
	*graph = x;
	return 0;
}

static int cuda_graph_launch(void *priv, void *graph, struct ss_error *err)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;
	cudaError_t e;
	int rc = cuda_enter(p, err);

	if (rc)
		return rc;
	e = cudaGraphLaunch((cudaGraphExec_t)graph, p->stream);
	return e == cudaSuccess ? 0 : cuda_fail(err, "cudaGraphLaunch", e);
}

static void cuda_graph_free(void *priv, void *graph)
{
	struct cuda_priv *p = (struct cuda_priv *)priv;

	if (!graph || cuda_enter(p, NULL))
		return;
	(void)cudaStreamSynchronize(p->stream);   /* a replay may still run */
	(void)cudaGraphExecDestroy((cudaGraphExec_t)graph);
	if (--p->graphs == 0) {
		for (int i = 0; i < p->n_retired; i++)
			(void)cudaFree(p->retired[i]);
		free(p->retired);
		p->retired = NULL;
		p->n_retired = 0;
	}
	(void)cudaGetLastError();
}

extern "C" const struct kernel_backend_ops kernel_cuda_ops = {
	.version = KERNEL_BACKEND_VERSION,
	.name = "cuda",
	.description = "CUDA: bf16, cuBLAS GEMM, servesim's attention kernels",
	.priv_size = sizeof(struct cuda_priv),
	.dtype = KERNEL_DTYPE_BF16,
	.init = cuda_init,
	.release = cuda_release,
	.device_name = cuda_device_name,
	.alloc = cuda_alloc,
	.free = cuda_free,
	.upload = cuda_upload,
	.download = cuda_download,
	.upload_f32 = cuda_upload_f32,
	.download_f32 = cuda_download_f32,
	.sync = cuda_sync,
	.timer_begin = cuda_timer_begin,
	.timer_end = cuda_timer_end,
	.gemm = cuda_gemm,
	.rmsnorm = cuda_rmsnorm,
	.rope = cuda_rope,
	.act = cuda_act,
	.kv_write = cuda_kv_write,
	.attn_prefill = cuda_attn_prefill,
	.attn_decode = cuda_attn_decode,
	.kv_copy = cuda_kv_copy,
	.gather = cuda_gather,
	.argmax = cuda_argmax,
	.device_pci_bus_id = cuda_device_pci_bus_id,
	.rope_kv_write = cuda_rope_kv_write,
	.fill_uniform = cuda_fill_uniform,
	.graph_begin = cuda_graph_begin,
	.graph_end = cuda_graph_end,
	.graph_launch = cuda_graph_launch,
	.graph_free = cuda_graph_free,
	.kv_fp8 = true,
	.lora = NULL,   /* the shared default: two cuBLAS GEMMs per segment */
};
