/* servesim — the CPU backend ("cpu"): fp32 everywhere.
 *
 * Built as the loadable module servesim-cpu.so (kernels/meson.build), which
 * the registry dlopens with RTLD_LOCAL only when "cpu" is asked for: the
 * module alone links OpenBLAS and the OpenMP runtime, so a simulation maps
 * neither.
 *
 * GEMM is OpenBLAS's sgemm (y = x W^T, with beta = 1 for the residual
 * accumulate).  It is called through OpenBLAS's Fortran-interface symbol
 * sgemm_ rather than cblas_sgemm: the program that loads the module links
 * GSL's own reference CBLAS (libgslcblas), which also defines cblas_sgemm.
 * The dynamic linker resolves a module's symbols in the global scope (the
 * program and its libraries) before the module's own libraries, RTLD_LOCAL
 * or not, so cblas_sgemm would bind to that naive triple loop (measured 30x
 * slower); sgemm_ (and openblas_*) exist only in OpenBLAS.  device_name()
 * names the library the GEMM resolved to, so a calibration records it, and
 * the conformance suite checks it is not GSL's.
 *
 * Every other operator is plain C: an OpenMP loop over rows (tokens,
 * sequences or heads) whose body the compiler vectorizes (`omp simd` marks
 * the reductions it may reorder).
 *
 * Threads: one runtime, OpenMP, with cfg->threads threads per parallel
 * loop (num_threads clause, no process-wide setting).  The GEMM is split
 * too: each OpenMP thread calls a single-threaded sgemm on its slice of the
 * output columns (or rows, when the output is narrow).  OpenBLAS's own
 * thread pool (the Debian default build uses pthreads) stays idle: its
 * workers spin for a long while after each call, and next to OpenMP's
 * threads they fought for the cores (32 decodes took 3x longer at 2
 * threads than at 1).  So the backend sets OpenBLAS to one thread, which
 * is process-wide: another OpenBLAS user in the process gets one thread.
 * Buffers are host memory (kernels/host.c); timing is CLOCK_MONOTONIC (the
 * framework default).  An fp8 KV cache is one E4M3 byte per element:
 * kv_write rounds (kernel_fp8_e4m3_from_f32), attention decodes each tile
 * of keys to fp32 before using it (kernels/cpu/attention.c).
 */
#define _GNU_SOURCE   /* dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>
#include <f77blas.h>

#include "cpu-int.h"

static int cpu_init(void *priv, const struct kernel_backend_config *cfg, struct ss_error *err)
{
	struct cpu_priv *p = priv;

	(void)err;
	p->threads = cfg->threads > 0 ? cfg->threads : 1;
	for (int b = 0; b < 256; b++)
		p->fp8_lut[b] = kernel_fp8_e4m3_to_f32((uint8_t)b);
	openblas_set_num_threads(1);
	return 0;
}

/* The "model name" line of /proc/cpuinfo, or "unknown CPU". */
static void cpu_model(char *buf, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(buf, len, "unknown CPU");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && colon) {
			colon += 1 + (colon[1] == ' ');
			colon[strcspn(colon, "\n")] = '\0';
			snprintf(buf, len, "%s", colon);
			break;
		}
	}
	fclose(f);
}

/* The file name of the shared library sgemm_ resolved to. */
static const char *gemm_library(void)
{
	Dl_info info;
	const char *slash;

	if (!dladdr((void *)sgemm_, &info) || !info.dli_fname)
		return "?";
	slash = strrchr(info.dli_fname, '/');
	return slash ? slash + 1 : info.dli_fname;
}

static void cpu_device_name(void *priv, char *buf, size_t len)
{
	const struct cpu_priv *p = priv;
	char model[256];

	cpu_model(model, sizeof(model));
	snprintf(buf, len, "CPU: %s, %d thread%s, OpenBLAS %s (%s)", model, p->threads,
		 p->threads == 1 ? "" : "s", openblas_get_corename(), gemm_library());
}

/* BLAS wants a leading dimension >= the row width even for one row. */
static blasint ld_of(const struct kernel_view *v, int cols)
{
	return v->ld >= (size_t)cols ? (blasint)v->ld : cols;
}

/* y[i0:i1, j0:j1] of a.  Row-major y[m,n] = x[m,k] W[n,k]^T is, read
 * column-major, y^T = W x^T: sgemm("T", "N", n, m, k) with W first. */
static void gemm_part(const struct kernel_gemm_args *a, int i0, int i1, int j0, int j1)
{
	char ta = 'T', tb = 'N';
	blasint m = j1 - j0, n = i1 - i0, k = a->k;
	blasint lda = ld_of(&a->w, a->k), ldb = ld_of(&a->x, a->k), ldc = ld_of(&a->y, a->n);
	float alpha = 1.0f, beta = a->accumulate ? 1.0f : 0.0f;

	sgemm_(&ta, &tb, &m, &n, &k, &alpha, view_f32(&a->w) + (size_t)j0 * lda, &lda,
	       view_f32(&a->x) + (size_t)i0 * ldb, &ldb, &beta,
	       view_f32(&a->y) + (size_t)i0 * ldc + j0, &ldc);
}

#define GEMM_SPLIT_MIN (1L << 18)   /* m x n x k below which one thread does it all */
#define GEMM_COL_ALIGN 32           /* column slices in multiples of this */

static int cpu_gemm(void *priv, const struct kernel_gemm_args *a, struct ss_error *err)
{
	const struct cpu_priv *p = priv;
	const int nt = p->threads;
	bool by_cols;
	int parts, step;

	(void)err;
	if (nt == 1 || (long)a->m * a->n * a->k < GEMM_SPLIT_MIN) {
		gemm_part(a, 0, a->m, 0, a->n);
		return 0;
	}
	/* Slices of W's rows (output columns) when there are enough of them:
	 * every thread then reads only its share of the weights, which is
	 * what bounds a decode step.  Otherwise slices of x's rows. */
	by_cols = a->n >= nt * GEMM_COL_ALIGN;
	if (by_cols) {
		step = (a->n + nt - 1) / nt;
		step = (step + GEMM_COL_ALIGN - 1) / GEMM_COL_ALIGN * GEMM_COL_ALIGN;
		parts = (a->n + step - 1) / step;
	} else {
		step = (a->m + nt - 1) / nt;
		parts = (a->m + step - 1) / step;
	}
#pragma omp parallel for num_threads(nt) schedule(static)
	for (int c = 0; c < parts; c++) {
		int lo = c * step;

		if (by_cols)
			gemm_part(a, 0, a->m, lo, lo + step < a->n ? lo + step : a->n);
		else
			gemm_part(a, lo, lo + step < a->m ? lo + step : a->m, 0, a->n);
	}
	return 0;
}

static int cpu_rmsnorm(void *priv, const struct kernel_rmsnorm_args *a, struct ss_error *err)
{
	const struct cpu_priv *p = priv;
	const float *w = view_f32(&a->weight);
	const int cols = a->cols;

	(void)err;
#pragma omp parallel for num_threads(p->threads) if (p->threads > 1) schedule(static)
	for (int r = 0; r < a->rows; r++) {
		const float *x = view_f32(&a->x) + r * a->x.ld;
		float *out = view_f32(&a->out) + r * a->out.ld;
		double ss = 0;
		float inv;

#pragma omp simd reduction(+ : ss)
		for (int c = 0; c < cols; c++)
			ss += (double)x[c] * x[c];
		inv = (float)(1 / sqrt(ss / cols + a->eps));
#pragma omp simd
		for (int c = 0; c < cols; c++)
			out[c] = x[c] * inv * w[c];
	}
	return 0;
}

static void rotate(float *x, int half, const float *cs, const float *sn)
{
#pragma omp simd
	for (int i = 0; i < half; i++) {
		float x1 = x[i], x2 = x[i + half];

		x[i] = x1 * cs[i] - x2 * sn[i];
		x[i + half] = x2 * cs[i] + x1 * sn[i];
	}
}

static int cpu_rope(void *priv, const struct kernel_rope_args *a, struct ss_error *err)
{
	const struct cpu_priv *p = priv;
	const int32_t *pos = view_i32(&a->pos);
	const int d = a->head_dim, half = d / 2;
	double inv_freq[KERNEL_MAX_HEAD_DIM / 2];

	for (int t = 0; t < a->tokens; t++)
		if (pos[t] < 0)
			return ss_error_set(err, -EINVAL, NULL, 0, "rope: token %d has position %d",
					    t, pos[t]);
	for (int i = 0; i < half; i++)
		inv_freq[i] = pow(a->theta, -2.0 * i / d);
	/* Angles in double: pos x inv_freq in fp32 would lose ~pos x 6e-8 rad. */
#pragma omp parallel for num_threads(p->threads) if (p->threads > 1) schedule(static)
	for (int t = 0; t < a->tokens; t++) {
		float cs[KERNEL_MAX_HEAD_DIM / 2], sn[KERNEL_MAX_HEAD_DIM / 2];

		for (int i = 0; i < half; i++) {
			double ang = (double)pos[t] * inv_freq[i];

			cs[i] = (float)cos(ang);
			sn[i] = (float)sin(ang);
		}
		for (int h = 0; h < a->heads; h++)
			rotate(view_f32(&a->q) + t * a->q.ld + (size_t)h * d, half, cs, sn);
		for (int h = 0; h < a->kv_heads; h++)
			rotate(view_f32(&a->k) + t * a->k.ld + (size_t)h * d, half, cs, sn);
	}
	return 0;
}

static int cpu_act(void *priv, const struct kernel_act_args *a, struct ss_error *err)
{
	const struct cpu_priv *p = priv;
	const int w = a->width;

	(void)err;
#pragma omp parallel for num_threads(p->threads) if (p->threads > 1) schedule(static)
	for (int t = 0; t < a->tokens; t++) {
		const float *in = view_f32(&a->in) + t * a->in.ld;
		float *out = view_f32(&a->out) + t * a->out.ld;

		if (a->act == KERNEL_ACT_SILU_MUL) {
			for (int i = 0; i < w; i++)
				out[i] = in[i] / (1.0f + expf(-in[i])) * in[w + i];
		} else {
#pragma omp simd
			for (int i = 0; i < w; i++)
				out[i] = in[i] > 0 ? in[i] : 0;
		}
	}
	return 0;
}

static int cpu_kv_write(void *priv, const struct kernel_kv_write_args *a, struct ss_error *err)
{
	const struct cpu_priv *p = priv;
	const struct kernel_kv_cache *c = a->cache;
	const int32_t *slots = view_i32(&a->slots);
	const size_t w = kv_token_elems(c);
	const long n_slots = (long)c->num_blocks * c->block_size;

	for (int t = 0; t < a->tokens; t++)
		if (slots[t] >= n_slots)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "kv_write: token %d's slot %d is outside the cache (%ld slots)",
					    t, slots[t], n_slots);
#pragma omp parallel for num_threads(p->threads) if (p->threads > 1) schedule(static)
	for (int t = 0; t < a->tokens; t++) {
		if (slots[t] < 0)
			continue;
		kv_store_row(c, kv_slot_ptr(c, c->k, a->layer, slots[t]),
			     view_f32(&a->k) + t * a->k.ld, w);
		kv_store_row(c, kv_slot_ptr(c, c->v, a->layer, slots[t]),
			     view_f32(&a->v) + t * a->v.ld, w);
	}
	return 0;
}

/* cpu_rope and cpu_kv_write in one pass over the tokens, through the same
 * code (the same bits): a token's rows are rotated and copied to its slot
 * while they are in cache.  Positions and slots are checked first. */
static int cpu_rope_kv_write(void *priv, const struct kernel_rope_kv_write_args *a,
			     struct ss_error *err)
{
	const struct cpu_priv *p = priv;
	const struct kernel_kv_cache *c = a->cache;
	const int32_t *pos = view_i32(&a->pos), *slots = view_i32(&a->slots);
	const int d = c->head_dim, half = d / 2;
	const size_t w = kv_token_elems(c);
	const long n_slots = (long)c->num_blocks * c->block_size;
	double inv_freq[KERNEL_MAX_HEAD_DIM / 2];

	for (int t = 0; t < a->tokens; t++) {
		if (pos[t] < 0)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "rope_kv_write: token %d has position %d", t, pos[t]);
		if (slots[t] >= n_slots)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "rope_kv_write: token %d's slot %d is outside the cache "
					    "(%ld slots)", t, slots[t], n_slots);
	}
	for (int i = 0; i < half; i++)
		inv_freq[i] = pow(a->theta, -2.0 * i / d);
#pragma omp parallel for num_threads(p->threads) if (p->threads > 1) schedule(static)
	for (int t = 0; t < a->tokens; t++) {
		float cs[KERNEL_MAX_HEAD_DIM / 2], sn[KERNEL_MAX_HEAD_DIM / 2];
		float *k = view_f32(&a->k) + t * a->k.ld;

		for (int i = 0; i < half; i++) {
			double ang = (double)pos[t] * inv_freq[i];

			cs[i] = (float)cos(ang);
			sn[i] = (float)sin(ang);
		}
		for (int h = 0; h < a->heads; h++)
			rotate(view_f32(&a->q) + t * a->q.ld + (size_t)h * d, half, cs, sn);
		for (int h = 0; h < c->kv_heads; h++)
			rotate(k + (size_t)h * d, half, cs, sn);
		if (slots[t] < 0)
			continue;
		kv_store_row(c, kv_slot_ptr(c, c->k, a->layer, slots[t]), k, w);
		kv_store_row(c, kv_slot_ptr(c, c->v, a->layer, slots[t]),
			     view_f32(&a->v) + t * a->v.ld, w);
	}
	return 0;
}

/* Chunks of FILL_CHUNK elements per OpenMP iteration: every element is a
 * pure function of (key, i), so the split changes nothing. */
#define FILL_CHUNK 4096

static int cpu_fill_uniform(void *priv, const struct kernel_fill_uniform_args *a,
			    struct ss_error *err)
{
	const struct cpu_priv *p = priv;
	float *x = view_f32(&a->x);
	const size_t n = a->n, chunks = (n + FILL_CHUNK - 1) / FILL_CHUNK;

	(void)err;
#pragma omp parallel for num_threads(p->threads) if (p->threads > 1 && chunks > 1) \
	schedule(static)
	for (size_t ch = 0; ch < chunks; ch++) {
		size_t end = (ch + 1) * FILL_CHUNK < n ? (ch + 1) * FILL_CHUNK : n;

		for (size_t i = ch * FILL_CHUNK; i < end; i++)
			x[i] = kernel_uniform_draw(a->key, i, a->scale, a->bias);
	}
	return 0;
}

static int cpu_gather(void *priv, const struct kernel_gather_args *a, struct ss_error *err)
{
	const struct cpu_priv *p = priv;
	const int32_t *idx = view_i32(&a->idx);

	for (int r = 0; r < a->rows; r++)
		if (idx[r] < 0 || idx[r] >= a->src_rows)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "gather: index %d of row %d is outside 0..%d",
					    idx[r], r, a->src_rows - 1);
#pragma omp parallel for num_threads(p->threads) if (p->threads > 1) schedule(static)
	for (int r = 0; r < a->rows; r++)
		memcpy(view_f32(&a->out) + r * a->out.ld, view_f32(&a->src) + idx[r] * a->src.ld,
		       (size_t)a->cols * sizeof(float));
	return 0;
}

static int cpu_argmax(void *priv, const struct kernel_argmax_args *a, struct ss_error *err)
{
	const struct cpu_priv *p = priv;

	(void)err;
#pragma omp parallel for num_threads(p->threads) if (p->threads > 1) schedule(static)
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

const struct kernel_backend_ops kernel_cpu_ops = {
	.version = KERNEL_BACKEND_VERSION,
	.name = "cpu",
	.description = "CPU: fp32, OpenBLAS GEMM, OpenMP kernels",
	.priv_size = sizeof(struct cpu_priv),
	.dtype = KERNEL_DTYPE_F32,
	.init = cpu_init,
	.device_name = cpu_device_name,
	.alloc = kernel_host_alloc,
	.free = kernel_host_free,
	.upload = kernel_host_upload,
	.download = kernel_host_download,
	.gemm = cpu_gemm,
	.rmsnorm = cpu_rmsnorm,
	.rope = cpu_rope,
	.act = cpu_act,
	.kv_write = cpu_kv_write,
	.attn_prefill = cpu_attn_prefill,
	.attn_decode = cpu_attn_decode,
	.kv_copy = kernel_host_kv_copy,
	.gather = cpu_gather,
	.argmax = cpu_argmax,
	.rope_kv_write = cpu_rope_kv_write,
	.fill_uniform = cpu_fill_uniform,
	.kv_fp8 = true,
};
