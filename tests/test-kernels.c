/* Kernel backends: every operator of a backend against the reference
 * backend ("ref": naive loops, double accumulation) on small shapes, the
 * paged KV cache (write, read back, copy) through shuffled block tables,
 * and the synthetic transformer step (deterministic, chunking-invariant,
 * decode = prefill, agreeing with the reference end to end).
 *
 *   test-kernels         the conformance suite on the "cpu" backend (the
 *                        module servesim-cpu.so in SERVESIM_MODULE_DIR)
 *   test-kernels cuda    the same suite on "cuda"; exits 77 (skipped) where
 *                        it is not built or finds no GPU
 *
 * Tolerances (docs/kernels.md, "Tolerances").  u is the unit roundoff of the
 * storage type: 2^-24 = 6.0e-8 for fp32, 2^-8 = 3.9e-3 for bf16.  Inputs
 * are rounded to the storage type on the host before both backends see
 * them, so only the backend's own arithmetic and output rounding count.
 *
 *  - GEMM: |y - y_ref| <= tol x sum_l |x_il||w_jl| (+|y_old| when
 *    accumulating), the scale of the classic bound gamma_k = k u / (1 - k u)
 *    (Higham, Accuracy and Stability, 3.5).  That worst case is attained
 *    only by adversarial rounding; blocked FMA sums as OpenBLAS and cuBLAS
 *    compute them err like sqrt(k) u (Higham & Mary 2019, probabilistic
 *    error analysis): 1.4e-6 at k = 512.  fp32: tol 1e-5, 7x above that
 *    for every k <= 512 used here.  bf16 (fp32 accumulation, one rounding
 *    of the output, |y| <= the scale): tol 2^-7 = 2u.
 *  - Row-wise element ops (RMSNorm, SiLU-and-multiply, ReLU): a handful of
 *    roundings and one expf/sqrt, relative to |ref| (plus 1e-6 x max|ref|
 *    for values near 0).  fp32: 1e-5 (~170 u); bf16: 2^-7 = 2u.
 *  - RoPE: x1 cos - x2 sin cancels, so error is relative to the inputs'
 *    magnitude (max|x| = 1 here).  The CPU computes angles in double; a GPU
 *    in fp32 loses pos x 2^-24 rad, 3e-4 at position 5000.  fp32: 1e-5;
 *    bf16: 3u = 0x1.8p-7.  The test rotates in place twice (two thetas) and
 *    bf16 storage rounds after each pass: a pair's error vector grows by at
 *    most u x its norm (<= sqrt 2) per pass and rotation keeps it, so
 *    |error| <= 2 sqrt(2) u = 2.8u (2u, one pass's bound, measured 0.93
 *    of itself in the CPU emulation of the CUDA backend).
 *  - Attention: the output is a convex combination of V rows, so error is
 *    relative to max|V| (1 here).  Scores carry ~sqrt(d) u error, the
 *    online softmax a few u per tile.  fp32: 1e-5; bf16 (P rounded to bf16
 *    before P.V, then the output rounded): 2^-6 = 4u.
 *  - Copies (kv_write, kv_copy, gather) and argmax are exact on every
 *    backend.
 *  - The synthetic step chains ~10 operators per layer, and the residual
 *    stream carries each layer's error on: fp32 1e-4, bf16 6e-2, relative
 *    to max|ref| of the final-normed hidden state or logits.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "step.h"

/* The backend under test: "cpu", or "cuda" with argument `cuda`. */
static const char *backend_name = "cpu";

struct tolerances {
	double gemm, elem, rope, attn, step;
};

static const struct tolerances tol_f32 = {
	.gemm = 1e-5, .elem = 1e-5, .rope = 1e-5, .attn = 1e-5, .step = 1e-4,
};
static const struct tolerances tol_bf16 = {
	.gemm = 0x1p-7, .elem = 0x1p-7, .rope = 0x1.8p-7, .attn = 0x1p-6, .step = 6e-2,
};

/* ---- harness: the backend under test and the reference side by side ---- */

struct rig {
	struct kernel_backend *kb[2];   /* [0] under test, [1] reference */
	bool bf16;                      /* inputs rounded to bf16 first */
	const struct tolerances *tol;
	uint64_t rng;
};

/* A buffer holding the same data on both backends. */
struct pbuf {
	void *b[2];
	size_t n;                       /* elements */
	bool i32;
};

struct pcache {
	struct kernel_kv_cache c[2];
};

static void rig_open_threads(struct rig *r, uint64_t seed, int threads)
{
	struct kernel_backend_config cfg = {
		.threads = threads, .module_dir = getenv("SERVESIM_MODULE_DIR"),
	};
	struct ss_error err = { 0 };
	int rc;

	memset(r, 0, sizeof(*r));
	rc = kernel_backend_new(&r->kb[0], backend_name, &cfg, &err);
	ck_assert_msg(rc == 0, "%s: %s", backend_name, err.msg);
	rc = kernel_backend_new(&r->kb[1], "ref", &cfg, &err);
	ck_assert_msg(rc == 0, "ref: %s", err.msg);
	r->bf16 = kernel_backend_dtype(r->kb[0]) == KERNEL_DTYPE_BF16;
	r->tol = r->bf16 ? &tol_bf16 : &tol_f32;
	r->rng = seed;
}

static void rig_open(struct rig *r, uint64_t seed)
{
	/* One thread: OpenMP's worker threads upset ASan/LSan; the result
	 * does not depend on the thread count (see threads_do_not_change_results). */
	rig_open_threads(r, seed, 1);
}

static void rig_close(struct rig *r)
{
	kernel_backend_free(r->kb[0]);
	kernel_backend_free(r->kb[1]);
}

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static float bf16_round(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7f800000u) != 0x7f800000u) {
		u += 0x7fffu + ((u >> 16) & 1);   /* round to nearest even */
		u &= 0xffff0000u;
	}
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* n values uniform in [-1, 1), in the storage precision (caller frees). */
static float *rig_rand(struct rig *r, size_t n)
{
	float *x = malloc((n ? n : 1) * sizeof(*x));

	ck_assert_ptr_nonnull(x);
	for (size_t i = 0; i < n; i++) {
		x[i] = (float)((double)(next(&r->rng) >> 40) * (2.0 / 16777216.0) - 1.0);
		if (r->bf16)
			x[i] = bf16_round(x[i]);
	}
	return x;
}

static int rig_int(struct rig *r, int lo, int hi)
{
	return lo + (int)(next(&r->rng) % (uint64_t)(hi - lo + 1));
}

static void shuffle(struct rig *r, int32_t *a, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = rig_int(r, 0, i);
		int32_t t = a[i];

		a[i] = a[j];
		a[j] = t;
	}
}

static struct pbuf pb_f32(struct rig *r, const float *x, size_t n)
{
	struct pbuf p = { .n = n };
	struct ss_error err = { 0 };

	for (int s = 0; s < 2; s++) {
		size_t es = kernel_backend_elem_size(r->kb[s]);

		ck_assert_int_eq(kernel_buf_alloc(r->kb[s], &p.b[s], (n ? n : 1) * es,
						  KERNEL_MEM_DEVICE, &err), 0);
		if (x)
			ck_assert_int_eq(kernel_buf_upload_f32(r->kb[s], p.b[s], 0, x, n, &err), 0);
	}
	return p;
}

static struct pbuf pb_i32(struct rig *r, const int32_t *x, size_t n)
{
	struct pbuf p = { .n = n, .i32 = true };
	struct ss_error err = { 0 };

	for (int s = 0; s < 2; s++) {
		ck_assert_int_eq(kernel_buf_alloc(r->kb[s], &p.b[s], (n ? n : 1) * sizeof(int32_t),
						  KERNEL_MEM_DEVICE, &err), 0);
		if (x)
			ck_assert_int_eq(kernel_buf_upload(r->kb[s], p.b[s], 0, x,
							   n * sizeof(int32_t), &err), 0);
	}
	return p;
}

static void pb_free(struct rig *r, struct pbuf *p)
{
	for (int s = 0; s < 2; s++)
		kernel_buf_free(r->kb[s], p->b[s]);
	memset(p, 0, sizeof(*p));
}

/* Side s's contents as floats (caller frees). */
static float *pb_fetch(struct rig *r, const struct pbuf *p, int s)
{
	struct ss_error err = { 0 };
	float *x = malloc((p->n ? p->n : 1) * sizeof(*x));

	ck_assert_ptr_nonnull(x);
	ck_assert_int_eq(kernel_buf_download_f32(r->kb[s], x, p->b[s], 0, p->n, &err), 0);
	return x;
}

static struct kernel_view pv(const struct pbuf *p, int s, size_t off, size_t ld)
{
	return (struct kernel_view){ .buf = p->b[s], .off = off, .ld = ld };
}

/* Allocate a cache on both sides and fill every slot with the same random
 * K and V. */
static void pc_open(struct rig *r, struct pcache *pc, struct kernel_kv_cache geo, bool fill)
{
	struct ss_error err = { 0 };
	size_t n = kernel_kv_cache_elems(&geo);
	float *k = fill ? rig_rand(r, n) : NULL, *v = fill ? rig_rand(r, n) : NULL;

	for (int s = 0; s < 2; s++) {
		pc->c[s] = geo;
		ck_assert_int_eq(kernel_kv_cache_alloc(r->kb[s], &pc->c[s], KERNEL_MEM_DEVICE, &err),
				 0);
		if (fill) {
			ck_assert_int_eq(kernel_buf_upload_f32(r->kb[s], pc->c[s].k, 0, k, n, &err), 0);
			ck_assert_int_eq(kernel_buf_upload_f32(r->kb[s], pc->c[s].v, 0, v, n, &err), 0);
		}
	}
	free(k);
	free(v);
}

static void pc_close(struct rig *r, struct pcache *pc)
{
	for (int s = 0; s < 2; s++)
		kernel_kv_cache_free(r->kb[s], &pc->c[s]);
}

/* With KERNELS_TEST_VERBOSE set, print each comparison's worst error as a
 * share of its tolerance (the margin a backend has). */
static void report(const char *what, double used)
{
	const char *v = getenv("KERNELS_TEST_VERBOSE");

	if (v && *v)
		fprintf(stderr, "%-28s worst error = %.3g of the tolerance\n", what, used);
}

/* |got - ref| <= tol x (abs_scale + (rel ? |ref| : 0)) for every element. */
static void check_close(const char *what, const float *got, const float *ref, size_t n,
			double tol, double abs_scale, bool rel)
{
	double used = 0;

	for (size_t i = 0; i < n; i++) {
		double bound = tol * (abs_scale + (rel ? fabs(ref[i]) : 0));
		double diff = fabs((double)got[i] - ref[i]);

		ck_assert_msg(diff <= bound,
			      "%s: element %zu is %.9g, reference %.9g (|diff| %.3g > %.3g)",
			      what, i, got[i], ref[i], diff, bound);
		if (bound > 0 && diff / bound > used)
			used = diff / bound;
	}
	if (tol > 0)
		report(what, used);
}

static double max_abs(const float *x, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		if (fabs(x[i]) > m)
			m = fabs(x[i]);
	return m;
}

/* Compare side 0 with side 1 of p. */
static void compare(struct rig *r, const char *what, const struct pbuf *p, double tol,
		    double abs_scale, bool rel)
{
	float *got = pb_fetch(r, p, 0), *ref = pb_fetch(r, p, 1);

	check_close(what, got, ref, p->n, tol, abs_scale, rel);
	free(got);
	free(ref);
}

static void compare_exact(struct rig *r, const char *what, const struct pbuf *p)
{
	compare(r, what, p, 0, 0, false);
}

#define OK(call)                                                                \
	do {                                                                    \
		struct ss_error e_ = { 0 };                                     \
		int rc_ = (call);                                               \
		(void)e_;                                                       \
		ck_assert_msg(rc_ == 0, "%s -> %d", #call, rc_);                \
	} while (0)

/* Run one operator on both sides: body uses `s` (side) and `kb`. */
#define BOTH(body)                                                              \
	for (int s = 0; s < 2; s++) {                                           \
		struct kernel_backend *kb = r.kb[s];                            \
		struct ss_error err = { 0 };                                    \
		int rc;                                                         \
		body;                                                           \
		ck_assert_msg(rc == 0, "side %d: %s", s, err.msg);              \
	}

/* ---- registry ---- */

START_TEST(registry_finds_backends_by_name)
{
	struct kernel_backend_config mcfg = { .module_dir = getenv("SERVESIM_MODULE_DIR") };
	struct kernel_backend *kb = NULL;
	struct ss_error err = { 0 };
	size_t n;
	char name[256];
	int rc;

	/* ref is built in; cpu and cuda are modules, not in the registry */
	ck_assert_ptr_nonnull(kernel_backend_find("ref"));
	ck_assert_ptr_null(kernel_backend_find("cpu"));
	ck_assert_ptr_null(kernel_backend_find("tpu"));
	ck_assert_ptr_nonnull(kernel_backend_registry(&n));
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(kernel_dtype_size(KERNEL_DTYPE_F32), 4);
	ck_assert_uint_eq(kernel_dtype_size(KERNEL_DTYPE_BF16), 2);
	ck_assert_str_eq(kernel_dtype_name(KERNEL_DTYPE_BF16), "bf16");

	ck_assert_int_eq(kernel_backend_new(&kb, "tpu", NULL, &err), -ENOENT);
	ck_assert_ptr_null(kb);
	ck_assert_ptr_nonnull(strstr(err.msg, "\"tpu\""));
	ck_assert_msg(strstr(err.msg, "known: ref, cpu, cuda"), "%s", err.msg);

	/* cuda: a module, loaded when asked for; present and working, or
	 * -ENODEV saying why (no module, a module that fails to load, no GPU) */
	ck_assert_ptr_null(kernel_backend_find("cuda"));
	rc = kernel_backend_new(&kb, "cuda", &mcfg, &err);
	if (rc == 0) {
		struct kernel_backend_info info[3];

		ck_assert_str_eq(kb->ops->name, "cuda");
		ck_assert_ptr_nonnull(kb->module);
		/* the listing's description is the module's own */
		ck_assert_uint_eq(kernel_backend_list(info, 3), 3);
		ck_assert_str_eq(kb->ops->description, info[2].description);
		kernel_backend_free(kb);
		/* a device this machine does not have */
		rc = kernel_backend_new(&kb, "cuda", &(struct kernel_backend_config){
			.module_dir = mcfg.module_dir, .device = 99 }, &err);
		ck_assert_int_eq(rc, -ENODEV);
		ck_assert_msg(strstr(err.msg, "no CUDA device 99"), "%s", err.msg);
	} else {
		ck_assert_int_eq(rc, -ENODEV);
		ck_assert_ptr_nonnull(strstr(err.msg, "cuda"));
	}
	/* a module file that does not load: -ENODEV with dlerror()'s reason */
	{
		char dir[] = "/tmp/ss-kmod-XXXXXX", path[64];
		FILE *f;

		ck_assert_ptr_nonnull(mkdtemp(dir));
		snprintf(path, sizeof(path), "%s/servesim-cuda.so", dir);
		f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		fputs("not an ELF file\n", f);
		fclose(f);
		rc = kernel_backend_new(&kb, "cuda", &(struct kernel_backend_config){
			.module_dir = dir }, &err);
		unlink(path);
		rmdir(dir);
		ck_assert_int_eq(rc, -ENODEV);
		ck_assert_ptr_null(kb);
		ck_assert_msg(strstr(err.msg, "cannot load") && strstr(err.msg, path), "%s", err.msg);
	}
	/* a directory without the module: says which file it looked for where */
	rc = kernel_backend_new(&kb, "cuda", &(struct kernel_backend_config){
		.module_dir = "/nonexistent-servesim-modules" }, &err);
	if (rc) {
		ck_assert_int_eq(rc, -ENODEV);
		ck_assert_ptr_nonnull(strstr(err.msg, "servesim-cuda.so"));
	} else {
		kernel_backend_free(kb);   /* installed in SERVESIM_MODULEDIR */
	}

	/* cpu without its module: the same clear -ENODEV as cuda's */
	rc = kernel_backend_new(&kb, "cpu", &(struct kernel_backend_config){
		.module_dir = "/nonexistent-servesim-modules" }, &err);
	if (rc) {
		ck_assert_int_eq(rc, -ENODEV);
		ck_assert_ptr_null(kb);
		ck_assert_msg(strstr(err.msg, "kernel backend \"cpu\" is not installed") &&
			      strstr(err.msg, "servesim-cpu.so") &&
			      strstr(err.msg, "/nonexistent-servesim-modules"), "%s", err.msg);
	} else {
		kernel_backend_free(kb);   /* installed in SERVESIM_MODULEDIR */
	}

	/* the listing: ref built in, then the modules, found without loading */
	{
		struct kernel_backend_info info[8];
		char path[4096];

		ck_assert_uint_eq(kernel_backend_list(NULL, 0), 3);
		ck_assert_uint_eq(kernel_backend_list(info, 8), 3);
		ck_assert_str_eq(info[0].name, "ref");
		ck_assert_ptr_null(info[0].module);
		ck_assert_str_eq(info[1].name, "cpu");
		ck_assert_str_eq(info[1].module, "servesim-cpu.so");
		ck_assert_str_eq(info[2].name, "cuda");
		ck_assert_str_eq(info[2].module, "servesim-cuda.so");
		ck_assert_int_eq(kernel_backend_module_path("ref", mcfg.module_dir, path,
							    sizeof(path), &err), -ENOENT);
		/* The cuda run is the GPU check's, from the bundle, which ships no
		 * CPU backend (scripts/gpu-bundle.sh: OpenBLAS alone is 36 MB);
		 * the cpu run tests the cpu module. */
		if (strcmp(backend_name, "cuda") == 0)
			return;
		rc = kernel_backend_module_path("cpu", mcfg.module_dir, path, sizeof(path), &err);
		ck_assert_msg(rc == 0, "%s", err.msg);
		ck_assert_msg(strstr(path, "/servesim-cpu.so"), "%s", path);
		/* the listing's description is the module's own */
		rc = kernel_backend_new(&kb, "cpu", &mcfg, &err);
		ck_assert_msg(rc == 0, "cpu: %s", err.msg);
		ck_assert_str_eq(kb->ops->description, info[1].description);
		kernel_backend_free(kb);
	}

	/* cpu: the module next to the test programs (SERVESIM_MODULE_DIR) */
	rc = kernel_backend_new(&kb, "cpu", &mcfg, &err);
	ck_assert_msg(rc == 0, "cpu: %s", err.msg);
	ck_assert_ptr_nonnull(kb->module);
	ck_assert_str_eq(kb->ops->name, "cpu");
	ck_assert_int_eq(kb->ops->dtype, KERNEL_DTYPE_F32);
	ck_assert_int_eq(kb->cfg.threads, 1);   /* default */
	kernel_backend_device_name(kb, name, sizeof(name));
	ck_assert_ptr_nonnull(strstr(name, "CPU"));
	ck_assert_ptr_nonnull(strstr(name, "1 thread"));
	/* the GEMM is OpenBLAS's, not another BLAS linked first (GSL's
	 * reference CBLAS, netlib's libblas) */
	ck_assert_msg(!strstr(name, "gslcblas") && !strstr(name, "(libblas"),
		      "GEMM resolved to another BLAS: %s", name);
	kernel_backend_free(kb);
	kernel_backend_free(NULL);
}
END_TEST

/* ---- GEMM ---- */

START_TEST(gemm_matches_reference)
{
	/* m, n, k, extra row stride */
	static const int shapes[][4] = {
		{ 1, 1, 1, 0 },    { 3, 5, 7, 0 },     { 1, 300, 512, 0 }, { 17, 33, 65, 3 },
		{ 64, 48, 32, 0 }, { 33, 129, 100, 5 }, { 9, 7, 511, 1 },  { 128, 96, 256, 0 },
	};
	struct rig r;

	rig_open(&r, 1);
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
		int m = shapes[c][0], n = shapes[c][1], k = shapes[c][2], pad = shapes[c][3];
		int ldx = k + pad, ldw = k + 2 * pad, ldy = n + pad;
		float *x = rig_rand(&r, (size_t)m * ldx), *w = rig_rand(&r, (size_t)n * ldw);
		float *y0 = rig_rand(&r, (size_t)m * ldy);

		for (int acc = 0; acc < 2; acc++) {
			struct pbuf X = pb_f32(&r, x, (size_t)m * ldx), W = pb_f32(&r, w, (size_t)n * ldw);
			struct pbuf Y = pb_f32(&r, y0, (size_t)m * ldy);
			float *got, *ref;
			double used = 0;

			BOTH(rc = kernel_gemm(kb, &(struct kernel_gemm_args){
				.m = m, .n = n, .k = k, .x = pv(&X, s, 0, ldx), .w = pv(&W, s, 0, ldw),
				.y = pv(&Y, s, 0, ldy), .accumulate = acc }, &err));
			got = pb_fetch(&r, &Y, 0);
			ref = pb_fetch(&r, &Y, 1);
			for (int i = 0; i < m; i++)
				for (int j = 0; j < ldy; j++) {
					size_t e = (size_t)i * ldy + j;
					double sum = acc ? fabs(y0[e]) : 0;

					if (j >= n) {   /* padding between rows is untouched */
						ck_assert_float_eq(got[e], y0[e]);
						continue;
					}
					for (int l = 0; l < k; l++)
						sum += fabs(x[i * ldx + l]) * fabs(w[j * ldw + l]);
					ck_assert_msg(fabs((double)got[e] - ref[e]) <= r.tol->gemm * sum,
						      "gemm %dx%dx%d acc %d: y[%d,%d] = %.9g, ref %.9g, "
						      "scale %.4g", m, n, k, acc, i, j, got[e], ref[e], sum);
					if (fabs((double)got[e] - ref[e]) / (r.tol->gemm * sum) > used)
						used = fabs((double)got[e] - ref[e]) / (r.tol->gemm * sum);
				}
			report("gemm", used);
			free(got);
			free(ref);
			pb_free(&r, &X);
			pb_free(&r, &W);
			pb_free(&r, &Y);
		}
		free(x);
		free(w);
		free(y0);
	}
	rig_close(&r);
}
END_TEST

/* ---- LoRA (SGMV) ---- */

/* Segments with heterogeneous ranks, a slot serving two segments, rows in
 * no segment and padded row strides, against y + (x A^T) B^T computed here
 * in double per row; both the backend under test (its GEMMs per segment)
 * and the reference (its own loop) must match it, and rows outside the
 * segments and the padding must be left as they were. */
START_TEST(lora_sgmv_matches_host_reference)
{
	enum { T = 23, DIN = 48, DOUT = 40, SLOTS = 3, MAXR = 16, PAD = 3 };
	/* rows 0-2 slot 1 rank 8; row 3 none; 4-8 slot 0 rank 16; 9 slot 2
	 * rank 1; 10-14 slot 1 rank 8 again; 15-22 none */
	int32_t seg_start[] = { 0, 3, 4, 9, 10, 15 }, seg_slot[] = { 1, -1, 0, 2, 1 },
		seg_rank[] = { 8, 0, 16, 1, 8 };
	const int ldx = DIN + PAD, ldy = DOUT + PAD, lda = DIN + 1;
	const size_t a_slot = (size_t)MAXR * lda, b_slot = (size_t)DOUT * MAXR;
	struct rig r;
	float *x, *y0, *A, *B, *got[2];
	const int n = 5;

	rig_open(&r, 33);
	x = rig_rand(&r, (size_t)T * ldx);
	y0 = rig_rand(&r, (size_t)T * ldy);
	A = rig_rand(&r, SLOTS * a_slot);
	B = rig_rand(&r, SLOTS * b_slot);
	{
		struct pbuf X = pb_f32(&r, x, (size_t)T * ldx), Y = pb_f32(&r, y0, (size_t)T * ldy);
		struct pbuf PA = pb_f32(&r, A, SLOTS * a_slot), PB = pb_f32(&r, B, SLOTS * b_slot);
		struct pbuf TMP = pb_f32(&r, NULL, (size_t)T * MAXR);
		double used = 0;

		BOTH(rc = kernel_lora(kb, &(struct kernel_lora_args){
			.tokens = T, .d_in = DIN, .d_out = DOUT, .max_rank = MAXR, .n_slots = SLOTS,
			.n_segs = n, .seg_start = seg_start, .seg_slot = seg_slot,
			.seg_rank = seg_rank, .x = pv(&X, s, 0, ldx), .a = pv(&PA, s, 0, lda),
			.a_slot = a_slot, .b = pv(&PB, s, 0, 0), .b_slot = b_slot,
			.tmp = pv(&TMP, s, 0, MAXR), .y = pv(&Y, s, 0, ldy) }, &err));
		got[0] = pb_fetch(&r, &Y, 0);
		got[1] = pb_fetch(&r, &Y, 1);
		for (int i = 0; i < T; i++) {
			int sg = -1;

			for (int k = 0; k < n; k++)
				if (i >= seg_start[k] && i < seg_start[k + 1] && seg_slot[k] >= 0)
					sg = k;
			for (int o = 0; o < ldy; o++) {
				size_t e = (size_t)i * ldy + o;
				double want = y0[e], scale = fabs(y0[e]);

				if (sg >= 0 && o < DOUT) {
					const float *As = A + (size_t)seg_slot[sg] * a_slot;
					const float *Bs = B + (size_t)seg_slot[sg] * b_slot;

					for (int j = 0; j < seg_rank[sg]; j++) {
						double t = 0, ts = 0;

						for (int l = 0; l < DIN; l++) {
							t += (double)x[i * ldx + l] * As[j * lda + l];
							ts += fabs(x[i * ldx + l]) * fabs(As[j * lda + l]);
						}
						want += t * Bs[o * seg_rank[sg] + j];
						scale += ts * fabs(Bs[o * seg_rank[sg] + j]);
					}
				}
				for (int side = 0; side < 2; side++) {
					double diff = fabs((double)got[side][e] - want);

					if (sg < 0 || o >= DOUT) {   /* untouched, bit for bit */
						ck_assert_float_eq(got[side][e], y0[e]);
						continue;
					}
					ck_assert_msg(diff <= 2 * r.tol->gemm * scale,
						      "lora side %d: y[%d,%d] = %.9g, want %.9g (scale %.4g)",
						      side, i, o, got[side][e], want, scale);
					if (diff / (2 * r.tol->gemm * scale) > used)
						used = diff / (2 * r.tol->gemm * scale);
				}
			}
		}
		report("lora", used);
		/* bad segments are refused before anything runs */
		{
			struct ss_error err = { 0 };
			int32_t bad_start[] = { 0, 5, 5 }, bad_slot[] = { 0, 0 }, bad_rank[] = { 4, 4 };
			struct kernel_lora_args a = {
				.tokens = T, .d_in = DIN, .d_out = DOUT, .max_rank = MAXR,
				.n_slots = SLOTS, .n_segs = 2, .seg_start = bad_start,
				.seg_slot = bad_slot, .seg_rank = bad_rank, .x = pv(&X, 0, 0, ldx),
				.a = pv(&PA, 0, 0, lda), .a_slot = a_slot, .b = pv(&PB, 0, 0, 0),
				.b_slot = b_slot, .tmp = pv(&TMP, 0, 0, MAXR), .y = pv(&Y, 0, 0, ldy),
			};

			ck_assert_int_eq(kernel_lora(r.kb[0], &a, &err), -EINVAL);
			ck_assert_ptr_nonnull(strstr(err.msg, "segment 1"));
			bad_start[2] = 7;
			bad_rank[1] = MAXR + 1;
			ck_assert_int_eq(kernel_lora(r.kb[0], &a, &err), -EINVAL);
			bad_rank[1] = 4;
			bad_slot[0] = SLOTS;
			ck_assert_int_eq(kernel_lora(r.kb[0], &a, &err), -EINVAL);
		}
		free(got[0]);
		free(got[1]);
		pb_free(&r, &X);
		pb_free(&r, &Y);
		pb_free(&r, &PA);
		pb_free(&r, &PB);
		pb_free(&r, &TMP);
	}
	free(x);
	free(y0);
	free(A);
	free(B);
	rig_close(&r);
}
END_TEST

/* ---- element-wise ---- */

START_TEST(rmsnorm_matches_reference)
{
	static const int shapes[][2] = { { 1, 8 }, { 7, 100 }, { 5, 513 }, { 3, 1 } };
	struct rig r;

	rig_open(&r, 2);
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
		int rows = shapes[c][0], cols = shapes[c][1];
		float *x = rig_rand(&r, (size_t)rows * cols), *w = rig_rand(&r, cols);
		struct pbuf X = pb_f32(&r, x, (size_t)rows * cols), Wt = pb_f32(&r, w, cols);
		struct pbuf O = pb_f32(&r, NULL, (size_t)rows * cols);
		float *ref;

		BOTH(rc = kernel_rmsnorm(kb, &(struct kernel_rmsnorm_args){
			.rows = rows, .cols = cols, .eps = 1e-5f, .x = pv(&X, s, 0, cols),
			.weight = pv(&Wt, s, 0, 0), .out = pv(&O, s, 0, cols) }, &err));
		ref = pb_fetch(&r, &O, 1);
		compare(&r, "rmsnorm", &O, r.tol->elem, 1e-6 * max_abs(ref, O.n), true);
		/* in place gives the same */
		BOTH(rc = kernel_rmsnorm(kb, &(struct kernel_rmsnorm_args){
			.rows = rows, .cols = cols, .eps = 1e-5f, .x = pv(&X, s, 0, cols),
			.weight = pv(&Wt, s, 0, 0), .out = pv(&X, s, 0, cols) }, &err));
		compare(&r, "rmsnorm in place", &X, r.tol->elem, 1e-6 * max_abs(ref, O.n), true);
		free(ref);
		pb_free(&r, &X);
		pb_free(&r, &Wt);
		pb_free(&r, &O);
		free(x);
		free(w);
	}
	rig_close(&r);
}
END_TEST

START_TEST(rope_matches_reference_in_fused_qkv_rows)
{
	/* tokens, heads, kv_heads, head_dim */
	static const int shapes[][4] = { { 5, 4, 1, 64 }, { 3, 2, 2, 8 }, { 4, 8, 2, 128 },
					 { 1, 1, 1, 2 } };
	struct rig r;

	rig_open(&r, 3);
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
		int T = shapes[c][0], H = shapes[c][1], KV = shapes[c][2], d = shapes[c][3];
		int ld = (H + 2 * KV) * d;   /* a fused QKV row */
		float *x = rig_rand(&r, (size_t)T * ld);
		int32_t pos[8];
		struct pbuf X, P;
		float *orig;

		for (int t = 0; t < T; t++)
			pos[t] = t == 0 ? 0 : rig_int(&r, 1, 5000);
		X = pb_f32(&r, x, (size_t)T * ld);
		P = pb_i32(&r, pos, T);
		for (float theta = 10000; theta <= 500000; theta *= 50)
			BOTH(rc = kernel_rope(kb, &(struct kernel_rope_args){
				.tokens = T, .heads = H, .kv_heads = KV, .head_dim = d,
				.theta = theta, .q = pv(&X, s, 0, ld), .k = pv(&X, s, (size_t)H * d, ld),
				.pos = pv(&P, s, 0, 0) }, &err));
		compare(&r, "rope", &X, r.tol->rope, 1.0, false);
		/* position 0 is the identity and V (after Q and K) is untouched */
		orig = pb_fetch(&r, &X, 0);
		for (int e = 0; e < (H + KV) * d; e++)
			ck_assert_float_eq_tol(orig[e], x[e], r.tol->rope);
		for (int t = 0; t < T; t++)
			for (int e = (H + KV) * d; e < ld; e++)
				ck_assert_float_eq(orig[(size_t)t * ld + e], x[(size_t)t * ld + e]);
		free(orig);
		pb_free(&r, &X);
		pb_free(&r, &P);
		free(x);
	}
	rig_close(&r);
}
END_TEST

/* The cache's K and V of side s as floats (caller frees both). */
static void pc_fetch(struct rig *r, const struct pcache *pc, int s, float **k, float **v)
{
	struct ss_error err = { 0 };
	size_t n = kernel_kv_cache_elems(&pc->c[s]);

	*k = malloc(n * sizeof(float));
	*v = malloc(n * sizeof(float));
	ck_assert(*k && *v);
	ck_assert_int_eq(kernel_buf_download_f32(r->kb[s], *k, pc->c[s].k, 0, n, &err), 0);
	ck_assert_int_eq(kernel_buf_download_f32(r->kb[s], *v, pc->c[s].v, 0, n, &err), 0);
}

/* got against want, n elements: the same bits (tol 0) or within tol (of
 * the inputs' magnitude, 1: RoPE's check). */
static void same_or_close(const char *what, const float *got, const float *want, size_t n,
			  double tol)
{
	if (tol == 0)
		ck_assert_msg(memcmp(got, want, n * sizeof(float)) == 0, "%s: not the same bits",
			      what);
	else
		check_close(what, got, want, n, tol, 1.0, false);
}

/* rope_kv_write equals rope then kv_write: on every side the fused op and
 * the two operators are run on the same fused QKV rows and two zeroed
 * caches.  Host backends give the same bits (the same code); the CUDA
 * backend's fused kernel is compared with its own two kernels and with the
 * reference at RoPE's tolerance (one pass: 2u, the suite's 3u).  Head dims
 * 64, 128, 256 (16-byte paths) and 8 (element paths), GQA 1, 4 and 8, no
 * query heads, a view offset of 3 elements (element paths), a padding
 * token (slot -1: rotated, not cached), shuffled slots over blocks of 4 and
 * 16, layer 1 of 2. */
START_TEST(rope_kv_write_equals_rope_then_kv_write)
{
	/* tokens, heads, kv_heads, head_dim, block_size, offset */
	static const int shapes[][6] = {
		{ 5, 4, 1, 64, 4, 0 },  { 4, 8, 1, 128, 16, 0 }, { 3, 2, 2, 256, 4, 0 },
		{ 6, 4, 4, 8, 4, 0 },   { 3, 4, 1, 64, 4, 3 },   { 2, 0, 2, 16, 4, 0 },
	};
	struct rig r;

	rig_open(&r, 31);
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
		const int T = shapes[c][0], H = shapes[c][1], KV = shapes[c][2], d = shapes[c][3];
		const int off = shapes[c][5], ld = (H + 2 * KV) * d;
		const struct kernel_kv_cache geo = {
			.layers = 2, .num_blocks = 5, .block_size = shapes[c][4], .kv_heads = KV,
			.head_dim = d,
		};
		const size_t nx = (size_t)off + (size_t)T * ld, nc = kernel_kv_cache_elems(&geo);
		int32_t pos[8], slots[8], pool[80];
		float *x, *got[2][2], *ck[2][2], *cv[2][2];   /* [side][unfused, fused] */
		struct pbuf X[2], P, S;
		struct pcache pc[2];

		for (int i = 0; i < geo.num_blocks * geo.block_size; i++)
			pool[i] = i;
		shuffle(&r, pool, geo.num_blocks * geo.block_size);
		for (int t = 0; t < T; t++) {
			pos[t] = t == 0 ? 0 : rig_int(&r, 1, 5000);
			slots[t] = t == T - 1 ? -1 : pool[t];
		}
		x = rig_rand(&r, nx);
		P = pb_i32(&r, pos, T);
		S = pb_i32(&r, slots, T);
		for (int f = 0; f < 2; f++) {
			X[f] = pb_f32(&r, x, nx);
			pc_open(&r, &pc[f], geo, false);
		}
		BOTH(rc = kernel_rope(kb, &(struct kernel_rope_args){
			.tokens = T, .heads = H, .kv_heads = KV, .head_dim = d, .theta = 5e5f,
			.q = pv(&X[0], s, off, ld), .k = pv(&X[0], s, off + (size_t)H * d, ld),
			.pos = pv(&P, s, 0, 0) }, &err);
		     if (!rc)
			     rc = kernel_kv_write(kb, &(struct kernel_kv_write_args){
				     .tokens = T, .layer = 1, .k = pv(&X[0], s, off + (size_t)H * d, ld),
				     .v = pv(&X[0], s, off + (size_t)(H + KV) * d, ld),
				     .slots = pv(&S, s, 0, 0), .cache = &pc[0].c[s] }, &err));
		BOTH(rc = kernel_rope_kv_write(kb, &(struct kernel_rope_kv_write_args){
			.tokens = T, .heads = H, .layer = 1, .theta = 5e5f,
			.q = pv(&X[1], s, off, ld), .k = pv(&X[1], s, off + (size_t)H * d, ld),
			.v = pv(&X[1], s, off + (size_t)(H + KV) * d, ld), .pos = pv(&P, s, 0, 0),
			.slots = pv(&S, s, 0, 0), .cache = &pc[1].c[s] }, &err));
		for (int s = 0; s < 2; s++)
			for (int f = 0; f < 2; f++) {
				got[s][f] = pb_fetch(&r, &X[f], s);
				pc_fetch(&r, &pc[f], s, &ck[s][f], &cv[s][f]);
			}
		/* fused = unfused on each side: the same bits on fp32 backends */
		for (int s = 0; s < 2; s++) {
			double tol = s == 0 && r.bf16 ? r.tol->rope : 0;

			same_or_close("rope_kv_write vs rope: q, k, v rows", got[s][1], got[s][0], nx,
				      tol);
			same_or_close("rope_kv_write vs kv_write: cached k", ck[s][1], ck[s][0], nc,
				      tol);
			same_or_close("rope_kv_write vs kv_write: cached v", cv[s][1], cv[s][0], nc, 0);
		}
		/* and the backend's fused op against the reference's */
		check_close("rope_kv_write vs ref: rows", got[0][1], got[1][1], nx, r.tol->rope, 1.0,
			    false);
		check_close("rope_kv_write vs ref: cached k", ck[0][1], ck[1][1], nc, r.tol->rope,
			    1.0, false);
		same_or_close("rope_kv_write vs ref: cached v", cv[0][1], cv[1][1], nc, 0);
		/* by hand: the padding token's V reached no slot, its K was rotated
		 * (position > 0), and every other token's V is in its slot */
		for (int t = 0; t < T; t++) {
			const float *vrow = x + off + (size_t)t * ld + (size_t)(H + KV) * d;
			size_t at = nc / 2 + (size_t)slots[t] * KV * d;

			if (slots[t] < 0)
				continue;
			ck_assert_mem_eq(cv[0][1] + at, vrow, (size_t)KV * d * sizeof(float));
		}
		{
			const float *k0 = x + off + (size_t)(T - 1) * ld + (size_t)H * d;
			const float *k1 = got[0][1] + off + (size_t)(T - 1) * ld + (size_t)H * d;

			ck_assert(memcmp(k0, k1, (size_t)KV * d * sizeof(float)) != 0);
		}
		for (int s = 0; s < 2; s++)
			for (int f = 0; f < 2; f++) {
				free(got[s][f]);
				free(ck[s][f]);
				free(cv[s][f]);
			}
		for (int f = 0; f < 2; f++) {
			pb_free(&r, &X[f]);
			pc_close(&r, &pc[f]);
		}
		pb_free(&r, &P);
		pb_free(&r, &S);
		free(x);
	}
	rig_close(&r);
}
END_TEST

/* x[i] = bias + scale * u(key, i) as backend.h defines it, computed here
 * from the definition (SplitMix64 is next() from state key + i), rounded to
 * bf16 on a bf16 backend. */
static float uniform_draw(uint64_t key, uint64_t i, float scale, float bias, bool bf16)
{
	uint64_t st = key + i;
	float u = (float)((double)(next(&st) >> 40) * (2.0 / 16777216.0) - 1.0);
	float su = scale * u, x = bias + su;

	return bf16 ? bf16_round(x) : x;
}

/* fill_uniform writes exactly [off, off + n) with the documented draw, on
 * every backend the same bits (after bf16 rounding), and a fill split in
 * two at any point gives the same elements.  (A fill longer than the CUDA
 * kernel's grid covers at once is kernels/cuda/test/devices.c's, on an
 * emulated device of 2 SMs: here it would take 540,000 emulated threads.) */
START_TEST(fill_uniform_draws_the_documented_values)
{
	/* n, off, scale, bias */
	static const struct {
		size_t n, off;
		float scale, bias;
	} cases[] = {
		{ 1, 0, 1.0f, 0 }, { 1500, 37, 0.216506f, 0 }, { 300, 5, 0.1f, 1.0f },
		{ 5000, 8, 0.0625f, -0.5f },
	};
	const uint64_t key = 0x0123456789abcdefULL;
	struct rig r;

	rig_open(&r, 32);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const size_t n = cases[c].n, off = cases[c].off, total = off + n + 9;
		const size_t cut = n / 3;
		const float sc = cases[c].scale, bi = cases[c].bias;
		struct pbuf A = pb_f32(&r, NULL, total), B = pb_f32(&r, NULL, total);

		BOTH(rc = kernel_fill_uniform(kb, &(struct kernel_fill_uniform_args){
			.n = n, .key = key, .scale = sc, .bias = bi, .x = pv(&A, s, off, 0) }, &err));
		/* B in two calls: [off, off + cut) and [off + cut, off + n) */
		BOTH(rc = cut ? kernel_fill_uniform(kb, &(struct kernel_fill_uniform_args){
			.n = cut, .key = key, .scale = sc, .bias = bi, .x = pv(&B, s, off, 0) }, &err)
			      : 0;
		     if (!rc)
			     rc = kernel_fill_uniform(kb, &(struct kernel_fill_uniform_args){
				     .n = n - cut, .key = key + cut, .scale = sc, .bias = bi,
				     .x = pv(&B, s, off + cut, 0) }, &err));
		for (int s = 0; s < 2; s++) {
			float *a = pb_fetch(&r, &A, s), *b = pb_fetch(&r, &B, s);
			bool bf = kernel_backend_dtype(r.kb[s]) == KERNEL_DTYPE_BF16;

			for (size_t e = 0; e < total; e++) {
				float want = e >= off && e < off + n ?
					     uniform_draw(key, e - off, sc, bi, bf) : 0.0f;

				ck_assert_msg(memcmp(&a[e], &want, sizeof(float)) == 0,
					      "%s: fill of %zu from %zu: element %zu is %.9g, expected "
					      "%.9g", r.kb[s]->ops->name, n, off, e, a[e], want);
			}
			ck_assert_msg(memcmp(a, b, total * sizeof(float)) == 0,
				      "%s: a fill split at %zu differs", r.kb[s]->ops->name, cut);
			free(a);
			free(b);
		}
		pb_free(&r, &A);
		pb_free(&r, &B);
	}
	rig_close(&r);
}
END_TEST

START_TEST(activations_match_reference)
{
	static const int shapes[][2] = { { 1, 1 }, { 5, 13 }, { 9, 64 }, { 2, 1000 } };
	struct rig r;

	rig_open(&r, 4);
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
		int T = shapes[c][0], w = shapes[c][1];
		float *x = rig_rand(&r, (size_t)T * 2 * w);
		struct pbuf X, O;
		float *ref;

		for (size_t i = 0; i < (size_t)T * 2 * w; i++)
			x[i] *= 8;   /* exercise silu's tails: gates in [-8, 8) */
		X = pb_f32(&r, x, (size_t)T * 2 * w);
		O = pb_f32(&r, NULL, (size_t)T * w);
		BOTH(rc = kernel_act(kb, &(struct kernel_act_args){
			.act = KERNEL_ACT_SILU_MUL, .tokens = T, .width = w,
			.in = pv(&X, s, 0, 2 * w), .out = pv(&O, s, 0, w) }, &err));
		ref = pb_fetch(&r, &O, 1);
		compare(&r, "silu_mul", &O, r.tol->elem, 1e-6 * max_abs(ref, O.n), true);
		free(ref);
		/* ReLU reads the first w of each row (stride 2w) */
		BOTH(rc = kernel_act(kb, &(struct kernel_act_args){
			.act = KERNEL_ACT_RELU, .tokens = T, .width = w,
			.in = pv(&X, s, 0, 2 * w), .out = pv(&O, s, 0, w) }, &err));
		compare_exact(&r, "relu", &O);
		pb_free(&r, &X);
		pb_free(&r, &O);
		free(x);
	}
	rig_close(&r);
}
END_TEST

START_TEST(gather_and_argmax_are_exact)
{
	struct rig r;
	float *src;
	int32_t idx[6] = { 4, 0, 9, 4, 1, 7 }, got[6], want[6];
	struct pbuf S, I, O, A;
	struct ss_error err = { 0 };

	rig_open(&r, 5);
	src = rig_rand(&r, 10 * 37);
	src[3 * 37 + 36] = 5;       /* row 3's maximum in its last column */
	src[5 * 37 + 2] = 5;        /* row 5: a tie, the first column wins */
	src[5 * 37 + 20] = 5;
	S = pb_f32(&r, src, 10 * 37);
	I = pb_i32(&r, idx, 6);
	O = pb_f32(&r, NULL, 6 * 37);
	A = pb_i32(&r, NULL, 10);
	BOTH(rc = kernel_gather(kb, &(struct kernel_gather_args){
		.rows = 6, .cols = 37, .src_rows = 10, .src = pv(&S, s, 0, 37),
		.idx = pv(&I, s, 0, 0), .out = pv(&O, s, 0, 37) }, &err));
	compare_exact(&r, "gather", &O);
	BOTH(rc = kernel_argmax(kb, &(struct kernel_argmax_args){
		.rows = 10, .cols = 37, .x = pv(&S, s, 0, 37), .out = pv(&A, s, 0, 0) }, &err));
	for (int s = 0; s < 2; s++) {
		int32_t all[10];

		ck_assert_int_eq(kernel_buf_download(r.kb[s], all, A.b[s], 0, sizeof(all), &err), 0);
		ck_assert_int_eq(all[3], 36);
		ck_assert_int_eq(all[5], 2);
		memcpy(s ? want : got, all, sizeof(got));
	}
	ck_assert_mem_eq(got, want, sizeof(got));
	pb_free(&r, &S);
	pb_free(&r, &I);
	pb_free(&r, &O);
	pb_free(&r, &A);
	free(src);
	rig_close(&r);
}
END_TEST

/* ---- paged KV cache ---- */

/* A block table of `need` distinct blocks, in shuffled order, drawn from
 * the pool's ids [0, num_blocks) after `taken` of a shuffled pool. */
static void take_blocks(struct rig *r, int32_t *pool, int num_blocks, int *taken, int32_t *bt,
			int need)
{
	ck_assert_int_le(*taken + need, num_blocks);
	(void)r;
	for (int i = 0; i < need; i++)
		bt[i] = pool[(*taken)++];
}

START_TEST(kv_write_round_trips_through_shuffled_tables)
{
	const struct kernel_kv_cache geo = {
		.layers = 2, .num_blocks = 13, .block_size = 4, .kv_heads = 2, .head_dim = 8,
	};
	const int kvw = geo.kv_heads * geo.head_dim, qkv_w = 3 * kvw;  /* q, k, v of one head group */
	/* three requests: context before, tokens now */
	const int ctx[3] = { 0, 6, 3 }, len[3] = { 9, 1, 5 };
	int32_t pool[13], bt[3][8] = { { 0 } }, slots[16];
	int taken = 0, T = 0;
	struct rig r;
	struct pcache pc;
	struct pbuf X, S;
	struct ss_error err = { 0 };
	float *x, *host_k, *host_v;
	size_t n = kernel_kv_cache_elems(&geo);

	rig_open(&r, 6);
	for (int i = 0; i < 13; i++)
		pool[i] = i;
	shuffle(&r, pool, 13);
	for (int q = 0; q < 3; q++) {
		int need = (ctx[q] + len[q] + geo.block_size - 1) / geo.block_size;

		take_blocks(&r, pool, 13, &taken, bt[q], need);
		for (int t = 0; t < len[q]; t++, T++) {
			int p = ctx[q] + t;

			slots[T] = bt[q][p / geo.block_size] * geo.block_size + p % geo.block_size;
		}
	}
	slots[T++] = -1;   /* a padding token: skipped */
	x = rig_rand(&r, (size_t)T * qkv_w);
	X = pb_f32(&r, x, (size_t)T * qkv_w);
	S = pb_i32(&r, slots, T);
	pc_open(&r, &pc, geo, false);
	BOTH(rc = kernel_kv_write(kb, &(struct kernel_kv_write_args){
		.tokens = T, .layer = 1, .k = pv(&X, s, kvw, qkv_w), .v = pv(&X, s, 2 * kvw, qkv_w),
		.slots = pv(&S, s, 0, 0), .cache = &pc.c[s] }, &err));

	/* The backend's cache holds each token at its slot of layer 1, and
	 * nothing anywhere else. */
	host_k = malloc(n * sizeof(float));
	host_v = malloc(n * sizeof(float));
	ck_assert_int_eq(kernel_buf_download_f32(r.kb[0], host_k, pc.c[0].k, 0, n, &err), 0);
	ck_assert_int_eq(kernel_buf_download_f32(r.kb[0], host_v, pc.c[0].v, 0, n, &err), 0);
	for (size_t e = 0; e < n; e++) {
		size_t layer = e / (n / 2), slot = e % (n / 2) / kvw, c = e % kvw;
		float wk = 0, wv = 0;

		for (int t = 0; t < T; t++)
			if (layer == 1 && slots[t] == (int)slot) {
				wk = x[(size_t)t * qkv_w + kvw + c];
				wv = x[(size_t)t * qkv_w + 2 * kvw + c];
			}
		ck_assert_msg(host_k[e] == wk && host_v[e] == wv,
			      "cache element %zu (layer %zu slot %zu): %g/%g, expected %g/%g",
			      e, layer, slot, host_k[e], host_v[e], wk, wv);
	}

	/* Read back through the block tables: decode attention of each request
	 * over its positions (the context it did not write is zero on both
	 * sides) agrees with the reference reading the same cache. */
	{
		int32_t lens[3], tables[3 * 8];
		float *q = rig_rand(&r, 3 * 4 * geo.head_dim);
		struct pbuf Q, O, L, B;

		for (int i = 0; i < 3; i++) {
			lens[i] = ctx[i] + len[i];
			memcpy(tables + i * 8, bt[i], sizeof(bt[i]));
		}
		Q = pb_f32(&r, q, 3 * 4 * geo.head_dim);
		O = pb_f32(&r, NULL, 3 * 4 * geo.head_dim);
		L = pb_i32(&r, lens, 3);
		B = pb_i32(&r, tables, 3 * 8);
		BOTH(rc = kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
			.n_seqs = 3, .heads = 4, .layer = 1, .max_kv_len = 12,
			.scale = 0.35f, .q = pv(&Q, s, 0, 4 * geo.head_dim),
			.out = pv(&O, s, 0, 4 * geo.head_dim), .kv_len = pv(&L, s, 0, 0),
			.block_tables = pv(&B, s, 0, 8), .cache = &pc.c[s] }, &err));
		compare(&r, "decode after kv_write", &O, r.tol->attn, 1.0, false);
		pb_free(&r, &Q);
		pb_free(&r, &O);
		pb_free(&r, &L);
		pb_free(&r, &B);
		free(q);
	}
	pc_close(&r, &pc);
	pb_free(&r, &X);
	pb_free(&r, &S);
	free(x);
	free(host_k);
	free(host_v);
	rig_close(&r);
}
END_TEST

/* Prefill attention: every combination of prior context {0, 5, 40} and chunk
 * {1, 7, 33} as the sequences of one call, for GQA ratios 1, 4 and 12
 * (more heads per KV head than the CPU's group tile), block sizes 16 and 6,
 * through shuffled (non-contiguous) block tables. */
START_TEST(prefill_attention_matches_reference)
{
	static const int ctxs[] = { 0, 5, 40 }, chunks[] = { 1, 7, 33 };
	static const int gqa[][2] = { { 4, 4 }, { 8, 2 }, { 12, 1 } };   /* heads, kv_heads */
	static const int block_sizes[] = { 16, 6 };
	const int d = 32, n_seqs = 9;
	struct rig r;

	rig_open(&r, 7);
	for (size_t g = 0; g < 3; g++)
		for (size_t b = 0; b < 2; b++) {
			const int H = gqa[g][0], KV = gqa[g][1], bs = block_sizes[b];
			const int maxb = (40 + 33 + bs - 1) / bs;
			const struct kernel_kv_cache geo = {
				.layers = 2, .num_blocks = n_seqs * maxb + 3, .block_size = bs,
				.kv_heads = KV, .head_dim = d,
			};
			int32_t *pool = malloc(geo.num_blocks * sizeof(int32_t));
			int32_t *tables = calloc((size_t)n_seqs * maxb, sizeof(int32_t));
			int32_t q_start[10], ctx[9];
			int taken = 0, T = 0, max_q = 0, max_kv = 0;
			struct pcache pc;
			struct pbuf Q, O, QS, C, B;
			float *q;

			for (int i = 0; i < geo.num_blocks; i++)
				pool[i] = i;
			shuffle(&r, pool, geo.num_blocks);
			for (int s = 0; s < n_seqs; s++) {
				int c = ctxs[s / 3], len = chunks[s % 3];

				q_start[s] = T;
				ctx[s] = c;
				T += len;
				take_blocks(&r, pool, geo.num_blocks, &taken, tables + s * maxb,
					    (c + len + bs - 1) / bs);
				if (len > max_q)
					max_q = len;
				if (c + len > max_kv)
					max_kv = c + len;
			}
			q_start[n_seqs] = T;
			pc_open(&r, &pc, geo, true);
			q = rig_rand(&r, (size_t)T * H * d);
			Q = pb_f32(&r, q, (size_t)T * H * d);
			O = pb_f32(&r, NULL, (size_t)T * H * d);
			QS = pb_i32(&r, q_start, n_seqs + 1);
			C = pb_i32(&r, ctx, n_seqs);
			B = pb_i32(&r, tables, (size_t)n_seqs * maxb);
			BOTH(rc = kernel_attn_prefill(kb, &(struct kernel_attn_prefill_args){
				.n_seqs = n_seqs, .tokens = T, .heads = H, .layer = 1,
				.max_q_len = max_q, .max_kv_len = max_kv,
				.scale = 1 / sqrtf((float)d), .q = pv(&Q, s, 0, (size_t)H * d),
				.out = pv(&O, s, 0, (size_t)H * d), .q_start = pv(&QS, s, 0, 0),
				.context = pv(&C, s, 0, 0), .block_tables = pv(&B, s, 0, maxb),
				.cache = &pc.c[s] }, &err));
			compare(&r, "attn_prefill", &O, r.tol->attn, 1.0, false);
			pc_close(&r, &pc);
			pb_free(&r, &Q);
			pb_free(&r, &O);
			pb_free(&r, &QS);
			pb_free(&r, &C);
			pb_free(&r, &B);
			free(q);
			free(pool);
			free(tables);
		}
	rig_close(&r);
}
END_TEST

/* Decode attention with KV lengths on both sides of block boundaries,
 * shuffled tables, GQA ratios 1, 4 and 12; also a long context (many score
 * tiles) and scores large enough that an unstabilized softmax overflows. */
START_TEST(decode_attention_matches_reference)
{
	static const int lens[] = { 1, 15, 16, 17, 32, 33, 100, 250, 1000 };
	static const int gqa[][2] = { { 4, 4 }, { 8, 2 }, { 12, 1 } };
	const int n_seqs = 9, bs = 16, d = 64, maxb = 1000 / 16 + 1;
	struct rig r;

	rig_open(&r, 8);
	for (size_t g = 0; g < 3; g++)
		for (int big = 0; big < 2; big++) {
			const int H = gqa[g][0], KV = gqa[g][1];
			const struct kernel_kv_cache geo = {
				.layers = 1, .num_blocks = 120, .block_size = bs, .kv_heads = KV,
				.head_dim = d,
			};
			int32_t tables[9 * 64], kv_len[9], pool[120];
			int taken = 0;
			struct pcache pc;
			struct pbuf Q, O, L, B;
			float *q;

			for (int i = 0; i < 120; i++)
				pool[i] = i;
			shuffle(&r, pool, 120);
			memset(tables, 0, sizeof(tables));
			for (int s = 0; s < n_seqs; s++) {
				kv_len[s] = lens[s];
				take_blocks(&r, pool, 120, &taken, tables + s * maxb,
					    (lens[s] + bs - 1) / bs);
			}
			pc_open(&r, &pc, geo, true);
			q = rig_rand(&r, (size_t)n_seqs * H * d);
			Q = pb_f32(&r, q, (size_t)n_seqs * H * d);
			O = pb_f32(&r, NULL, (size_t)n_seqs * H * d);
			L = pb_i32(&r, kv_len, n_seqs);
			B = pb_i32(&r, tables, (size_t)n_seqs * maxb);
			BOTH(rc = kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
				.n_seqs = n_seqs, .heads = H, .layer = 0, .max_kv_len = 1000,
				/* big: scores up to ~d x 20 = 1280, far beyond expf's range */
				.scale = big ? 20.0f : 1 / sqrtf((float)d),
				.q = pv(&Q, s, 0, (size_t)H * d), .out = pv(&O, s, 0, (size_t)H * d),
				.kv_len = pv(&L, s, 0, 0), .block_tables = pv(&B, s, 0, maxb),
				.cache = &pc.c[s] }, &err));
			/* With scale 20 the softmax is nearly one-hot and a score's
			 * rounding error (fp32: ~20 x sqrt(d) x u x |q||k| ~ 1e-5)
			 * moves its weight by as much relatively: 1e-4 for fp32.
			 * bf16 backends score in fp32 too: their usual bound. */
			compare(&r, big ? "attn_decode (sharp)" : "attn_decode", &O,
				big ? fmax(r.tol->attn, 1e-4) : r.tol->attn, 1.0, false);
			pc_close(&r, &pc);
			pb_free(&r, &Q);
			pb_free(&r, &O);
			pb_free(&r, &L);
			pb_free(&r, &B);
			free(q);
		}
	rig_close(&r);
}
END_TEST

/* Decode attention over long contexts, where a backend may split a
 * sequence's keys into partitions and combine them (the CUDA backend does
 * from 257 keys at these batch sizes: docs/kernels.md, "The CUDA backend"):
 * one call holds a context of 7 partitions beside shorter ones (exactly
 * one partition of 256, 513, a single key), with max_kv_len above them all,
 * for head_dim 64, 128 and 256 and GQA ratios 1, 4 and 8.  The tables have
 * holes (entries past a sequence's blocks are -1, unused blocks are left in
 * the cache) and reuse (sequence 1 shares sequence 0's first 20 blocks, as a
 * cached prefix does); with a sharp softmax too, where the partitions'
 * maxima differ by hundreds. */
START_TEST(decode_attention_splits_long_contexts)
{
	static const int lens[] = { 1600, 700, 256, 1, 513 };
	static const int gqa[][2] = { { 4, 4 }, { 8, 2 }, { 8, 1 } };   /* heads, kv_heads */
	static const int dims[] = { 64, 128, 256 };
	const int n_seqs = 5, bs = 16, maxb = 2000 / 16 + 1, shared = 20, num_blocks = 200;
	struct rig r;

	rig_open(&r, 20);
	for (int t = 0; t < 18; t++) {   /* head_dim x GQA ratio x sharpness */
		const int d = dims[t / 6], H = gqa[t / 2 % 3][0], KV = gqa[t / 2 % 3][1];
		const int big = t % 2;
		const struct kernel_kv_cache geo = {
			.layers = 1, .num_blocks = num_blocks, .block_size = bs,
			.kv_heads = KV, .head_dim = d,
		};
		int32_t tables[5 * 126], kv_len[5], pool[200];
		int taken = 0;
		struct pcache pc;
		struct pbuf Q, O, L, B;
		float *q;

		for (int i = 0; i < num_blocks; i++)
			pool[i] = i;
		shuffle(&r, pool, num_blocks);
		for (int i = 0; i < n_seqs * maxb; i++)
			tables[i] = -1;
		for (int s = 0; s < n_seqs; s++) {
			const int need = (lens[s] + bs - 1) / bs, own = s == 1 ? shared : 0;

			kv_len[s] = lens[s];
			memcpy(tables + s * maxb, tables, own * sizeof(int32_t));
			take_blocks(&r, pool, num_blocks, &taken, tables + s * maxb + own,
				    need - own);
		}
		ck_assert_int_lt(taken, num_blocks);   /* some blocks unused */
		pc_open(&r, &pc, geo, true);
		q = rig_rand(&r, (size_t)n_seqs * H * d);
		Q = pb_f32(&r, q, (size_t)n_seqs * H * d);
		O = pb_f32(&r, NULL, (size_t)n_seqs * H * d);
		L = pb_i32(&r, kv_len, n_seqs);
		B = pb_i32(&r, tables, (size_t)n_seqs * maxb);
		BOTH(rc = kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
			.n_seqs = n_seqs, .heads = H, .layer = 0, .max_kv_len = 2000,
			.scale = big ? 20.0f : 1 / sqrtf((float)d),
			.q = pv(&Q, s, 0, (size_t)H * d),
			.out = pv(&O, s, 0, (size_t)H * d), .kv_len = pv(&L, s, 0, 0),
			.block_tables = pv(&B, s, 0, maxb), .cache = &pc.c[s] }, &err));
		/* the sharp bound as in decode_attention_matches_reference */
		compare(&r, big ? "attn_decode split (sharp)" : "attn_decode split", &O,
			big ? fmax(r.tol->attn, 1e-4) : r.tol->attn, 1.0, false);
		pc_close(&r, &pc);
		pb_free(&r, &Q);
		pb_free(&r, &O);
		pb_free(&r, &L);
		pb_free(&r, &B);
		free(q);
	}
	rig_close(&r);
}
END_TEST

/* A chunk of 1 in prefill is a decode: both operators agree. */
START_TEST(prefill_of_one_token_equals_decode)
{
	const struct kernel_kv_cache geo = {
		.layers = 1, .num_blocks = 8, .block_size = 5, .kv_heads = 2, .head_dim = 16,
	};
	int32_t bt[8] = { 7, 2, 5, 0, 3, 6, 1, 4 }, q_start[2] = { 0, 1 }, ctx[1] = { 22 };
	int32_t kv_len[1] = { 23 };
	struct rig r;
	struct pcache pc;
	struct pbuf Q, O1, O2, B, QS, C, L;
	float *a, *b, *q;

	rig_open(&r, 9);
	pc_open(&r, &pc, geo, true);
	q = rig_rand(&r, 8 * 16);
	Q = pb_f32(&r, q, 8 * 16);
	O1 = pb_f32(&r, NULL, 8 * 16);
	O2 = pb_f32(&r, NULL, 8 * 16);
	B = pb_i32(&r, bt, 8);
	QS = pb_i32(&r, q_start, 2);
	C = pb_i32(&r, ctx, 1);
	L = pb_i32(&r, kv_len, 1);
	BOTH(rc = kernel_attn_prefill(kb, &(struct kernel_attn_prefill_args){
		.n_seqs = 1, .tokens = 1, .heads = 8, .layer = 0, .max_q_len = 1,
		.max_kv_len = 23, .scale = 0.25f, .q = pv(&Q, s, 0, 128), .out = pv(&O1, s, 0, 128),
		.q_start = pv(&QS, s, 0, 0), .context = pv(&C, s, 0, 0),
		.block_tables = pv(&B, s, 0, 8), .cache = &pc.c[s] }, &err));
	BOTH(rc = kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
		.n_seqs = 1, .heads = 8, .layer = 0, .max_kv_len = 23, .scale = 0.25f,
		.q = pv(&Q, s, 0, 128), .out = pv(&O2, s, 0, 128), .kv_len = pv(&L, s, 0, 0),
		.block_tables = pv(&B, s, 0, 8), .cache = &pc.c[s] }, &err));
	a = pb_fetch(&r, &O1, 0);
	b = pb_fetch(&r, &O2, 0);
	check_close("prefill(1) vs decode", a, b, 128, r.tol->attn, 1.0, false);
	compare(&r, "prefill(1)", &O1, r.tol->attn, 1.0, false);
	free(a);
	free(b);
	free(q);
	pb_free(&r, &Q);
	pb_free(&r, &O1);
	pb_free(&r, &O2);
	pb_free(&r, &B);
	pb_free(&r, &QS);
	pb_free(&r, &C);
	pb_free(&r, &L);
	pc_close(&r, &pc);
	rig_close(&r);
}
END_TEST

START_TEST(kv_copy_moves_whole_blocks)
{
	const struct kernel_kv_cache geo = {
		.layers = 3, .num_blocks = 10, .block_size = 4, .kv_heads = 2, .head_dim = 4,
	};
	struct kernel_kv_cache host = geo;
	const int32_t out_src[3] = { 7, 2, 9 }, out_dst[3] = { 0, 1, 2 };   /* swap out */
	const int32_t in_src[3] = { 0, 1, 2 }, in_dst[3] = { 3, 8, 5 };     /* swap in */
	/* defrag: 4->0, 6->1, and 2 onto itself (nothing to move) */
	const int32_t mv_src[3] = { 4, 6, 2 }, mv_dst[3] = { 0, 1, 2 };
	size_t n = kernel_kv_cache_elems(&geo), bl = 4 * 2 * 4, ln = n / 3;
	struct rig r;
	struct ss_error err = { 0 };
	struct kernel_backend *kb;
	float *k0, *v0, *k, *v, *want_k, *want_v;

	rig_open(&r, 10);
	kb = r.kb[0];
	host.num_blocks = 3;
	k0 = rig_rand(&r, n);
	v0 = rig_rand(&r, n);
	{
		struct kernel_kv_cache dev = geo;

		ck_assert_int_eq(kernel_kv_cache_alloc(kb, &dev, KERNEL_MEM_DEVICE, &err), 0);
		ck_assert_int_eq(kernel_kv_cache_alloc(kb, &host, KERNEL_MEM_HOST, &err), 0);
		ck_assert_int_eq(kernel_buf_upload_f32(kb, dev.k, 0, k0, n, &err), 0);
		ck_assert_int_eq(kernel_buf_upload_f32(kb, dev.v, 0, v0, n, &err), 0);
		OK(kernel_kv_copy(kb, &(struct kernel_kv_copy_args){
			.n = 3, .src_ids = out_src, .dst_ids = out_dst, .src = &dev, .dst = &host },
			&e_));
		OK(kernel_kv_copy(kb, &(struct kernel_kv_copy_args){
			.n = 3, .src_ids = in_src, .dst_ids = in_dst, .src = &host, .dst = &dev },
			&e_));
		OK(kernel_kv_copy(kb, &(struct kernel_kv_copy_args){
			.n = 3, .src_ids = mv_src, .dst_ids = mv_dst, .src = &dev, .dst = &dev }, &e_));
		/* a host block onto itself */
		OK(kernel_kv_copy(kb, &(struct kernel_kv_copy_args){
			.n = 1, .src_ids = in_src + 1, .dst_ids = in_src + 1, .src = &host,
			.dst = &host }, &e_));
		OK(kernel_kv_copy(kb, &(struct kernel_kv_copy_args){ .n = 0, .src = &dev,
								      .dst = &dev }, &e_));
		/* an id outside a cache is refused before anything moves */
		ck_assert_int_eq(kernel_kv_copy(kb, &(struct kernel_kv_copy_args){
			.n = 1, .src_ids = out_src, .dst_ids = in_dst, .src = &dev, .dst = &host },
			&err), -EINVAL);
		k = malloc(n * sizeof(float));
		v = malloc(n * sizeof(float));
		ck_assert_int_eq(kernel_buf_download_f32(kb, k, dev.k, 0, n, &err), 0);
		ck_assert_int_eq(kernel_buf_download_f32(kb, v, dev.v, 0, n, &err), 0);
		kernel_kv_cache_free(kb, &dev);
		kernel_kv_cache_free(kb, &host);
	}
	/* expected: blocks 7, 2, 9 land in 3, 8, 5; then 4 -> 0 and 6 -> 1 */
	want_k = malloc(n * sizeof(float));
	want_v = malloc(n * sizeof(float));
	memcpy(want_k, k0, n * sizeof(float));
	memcpy(want_v, v0, n * sizeof(float));
	for (size_t l = 0; l < 3; l++) {
		for (int i = 0; i < 3; i++) {
			memcpy(want_k + l * ln + in_dst[i] * bl, k0 + l * ln + out_src[i] * bl,
			       bl * sizeof(float));
			memcpy(want_v + l * ln + in_dst[i] * bl, v0 + l * ln + out_src[i] * bl,
			       bl * sizeof(float));
		}
		for (int i = 0; i < 3; i++) {
			memcpy(want_k + l * ln + mv_dst[i] * bl, want_k + l * ln + mv_src[i] * bl,
			       bl * sizeof(float));
			memcpy(want_v + l * ln + mv_dst[i] * bl, want_v + l * ln + mv_src[i] * bl,
			       bl * sizeof(float));
		}
	}
	ck_assert_mem_eq(k, want_k, n * sizeof(float));
	ck_assert_mem_eq(v, want_v, n * sizeof(float));
	free(k0);
	free(v0);
	free(k);
	free(v);
	free(want_k);
	free(want_v);
	rig_close(&r);
}
END_TEST

/* ---- argument and data checks ---- */

START_TEST(bad_arguments_are_einval)
{
	struct rig r;
	struct ss_error err = { 0 };
	struct pbuf X, I;
	int32_t bad_bt[2] = { 0, 99 }, len[1] = { 8 };
	const struct kernel_kv_cache geo = {
		.layers = 1, .num_blocks = 4, .block_size = 4, .kv_heads = 2, .head_dim = 8,
	};
	struct pcache pc;
	struct kernel_backend *kb;
	bool host = strcmp(backend_name, "cuda") != 0;

	rig_open(&r, 11);
	kb = r.kb[0];
	X = pb_f32(&r, NULL, 256);
	I = pb_i32(&r, bad_bt, 2);
	pc_open(&r, &pc, geo, true);
	ck_assert_int_eq(kernel_gemm(kb, &(struct kernel_gemm_args){
		.m = 0, .n = 4, .k = 4, .x = pv(&X, 0, 0, 4), .w = pv(&X, 0, 0, 4),
		.y = pv(&X, 0, 0, 4) }, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "gemm"));
	ck_assert_int_eq(kernel_gemm(kb, &(struct kernel_gemm_args){
		.m = 2, .n = 4, .k = 4, .x = pv(&X, 0, 0, 3), .w = pv(&X, 0, 0, 4),
		.y = pv(&X, 0, 0, 4) }, &err), -EINVAL);
	ck_assert_int_eq(kernel_rope(kb, &(struct kernel_rope_args){
		.tokens = 1, .heads = 1, .head_dim = 7, .theta = 1e4f, .q = pv(&X, 0, 0, 7),
		.pos = pv(&I, 0, 0, 0) }, &err), -EINVAL);
	ck_assert_int_eq(kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
		.n_seqs = 1, .heads = 3, .layer = 0, .max_kv_len = 8, .scale = 1,
		.q = pv(&X, 0, 0, 24), .out = pv(&X, 0, 0, 24), .kv_len = pv(&I, 0, 0, 0),
		.block_tables = pv(&I, 0, 0, 2), .cache = &pc.c[0] }, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "kv_heads"));
	ck_assert_int_eq(kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
		.n_seqs = 1, .heads = 2, .layer = 1, .max_kv_len = 8, .scale = 1,
		.q = pv(&X, 0, 0, 16), .out = pv(&X, 0, 128, 16), .kv_len = pv(&I, 0, 0, 0),
		.block_tables = pv(&I, 0, 0, 2), .cache = &pc.c[0] }, &err), -EINVAL);
	/* rope_kv_write: a layer past the cache, theta <= 1, negative heads,
	 * no v; fill_uniform: no element, a range past SIZE_MAX bytes, a NaN */
	{
		struct kernel_rope_kv_write_args ok = {
			.tokens = 1, .heads = 1, .layer = 0, .theta = 1e4f, .q = pv(&X, 0, 0, 8),
			.k = pv(&X, 0, 8, 16), .v = pv(&X, 0, 24, 16), .pos = pv(&I, 0, 0, 0),
			.slots = pv(&I, 0, 0, 0), .cache = &pc.c[0],
		};
		struct kernel_rope_kv_write_args a = ok;

		a.layer = 1;
		ck_assert_int_eq(kernel_rope_kv_write(kb, &a, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, "rope_kv_write") && strstr(err.msg, "layer"), "%s",
			      err.msg);
		a = ok;
		a.theta = 1;
		ck_assert_int_eq(kernel_rope_kv_write(kb, &a, &err), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err.msg, "theta"));
		a = ok;
		a.heads = -1;
		ck_assert_int_eq(kernel_rope_kv_write(kb, &a, &err), -EINVAL);
		a = ok;
		a.v.buf = NULL;
		ck_assert_int_eq(kernel_rope_kv_write(kb, &a, &err), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err.msg, "v,"));
		ck_assert_int_eq(kernel_fill_uniform(kb, &(struct kernel_fill_uniform_args){
			.n = 0, .scale = 1, .x = pv(&X, 0, 0, 0) }, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, "fill_uniform") && strstr(err.msg, "range"), "%s",
			      err.msg);
		ck_assert_int_eq(kernel_fill_uniform(kb, &(struct kernel_fill_uniform_args){
			.n = 4, .scale = 1, .x = pv(&X, 0, SIZE_MAX / 2 - 2, 0) }, &err), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err.msg, "range"));
		ck_assert_int_eq(kernel_fill_uniform(kb, &(struct kernel_fill_uniform_args){
			.n = 4, .scale = NAN, .x = pv(&X, 0, 0, 0) }, &err), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err.msg, "finite"));
	}
	if (host) {
		/* host backends check block ids and lengths in their buffers */
		struct pbuf L = pb_i32(&r, len, 1);

		for (int s = 0; s < 2; s++) {
			ck_assert_int_eq(kernel_attn_decode(r.kb[s], &(struct kernel_attn_decode_args){
				.n_seqs = 1, .heads = 2, .layer = 0, .max_kv_len = 8, .scale = 1,
				.q = pv(&X, s, 0, 16), .out = pv(&X, s, 128, 16),
				.kv_len = pv(&L, s, 0, 0), .block_tables = pv(&I, s, 0, 2),
				.cache = &pc.c[s] }, &err), -EINVAL);
			ck_assert_ptr_nonnull(strstr(err.msg, "99"));
		}
		pb_free(&r, &L);
	}
	pc_close(&r, &pc);
	pb_free(&r, &X);
	pb_free(&r, &I);
	rig_close(&r);
}
END_TEST

/* Bad values inside buffers (positions, slots, indices, block ids, chunk
 * bounds, lengths): a host backend rejects the call, the CUDA backend's
 * kernel skips the row and records a fault that the next call that waits
 * reports (docs/kernels.md, "The CUDA backend").  Either way -EINVAL naming
 * the value by the next sync, on every backend; then the backend works on. */
static void expect_fault(struct kernel_backend *kb, int rc, const struct ss_error *err,
			 const char *what)
{
	struct ss_error e2 = { 0 };

	if (rc == 0)
		rc = kernel_backend_sync(kb, &e2);
	else
		e2 = *err;
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_msg(strstr(e2.msg, what), "%s: \"%s\" not in \"%s\"", kb->ops->name, what,
		      e2.msg);
	ck_assert_int_eq(kernel_backend_sync(kb, &e2), 0);   /* reported once */
}

/* The same prefill faults at a head size of 16, which the CUDA backend
 * runs on its tensor-core kernel (head_dim 8 above takes the CUDA-core
 * one): a block id outside the cache and a chunk past max_kv_len. */
START_TEST(prefill_faults_at_head_dim_16)
{
	struct rig r;
	struct ss_error err = { 0 };
	const struct kernel_kv_cache geo = {
		.layers = 1, .num_blocks = 4, .block_size = 4, .kv_heads = 2, .head_dim = 16,
	};
	int32_t bt[2] = { 0, 99 }, qs[2] = { 0, 2 }, ctx[1] = { 5 }, long_ctx[1] = { 7 };
	struct pbuf X, B, Q, C, C2;
	struct pcache pc;

	rig_open(&r, 13);
	X = pb_f32(&r, NULL, 256);
	B = pb_i32(&r, bt, 2);
	Q = pb_i32(&r, qs, 2);
	C = pb_i32(&r, ctx, 1);
	C2 = pb_i32(&r, long_ctx, 1);
	pc_open(&r, &pc, geo, true);
	for (int s = 0; s < 2; s++) {
		struct kernel_backend *kb = r.kb[s];

		expect_fault(kb, kernel_attn_prefill(kb, &(struct kernel_attn_prefill_args){
			.n_seqs = 1, .tokens = 2, .heads = 2, .layer = 0, .max_q_len = 2,
			.max_kv_len = 8, .scale = 1, .q = pv(&X, s, 0, 32), .out = pv(&X, s, 128, 32),
			.q_start = pv(&Q, s, 0, 0), .context = pv(&C, s, 0, 0),
			.block_tables = pv(&B, s, 0, 2), .cache = &pc.c[s] }, &err), &err,
			"entry 1 is 99");
		expect_fault(kb, kernel_attn_prefill(kb, &(struct kernel_attn_prefill_args){
			.n_seqs = 1, .tokens = 2, .heads = 2, .layer = 0, .max_q_len = 2,
			.max_kv_len = 8, .scale = 1, .q = pv(&X, s, 0, 32), .out = pv(&X, s, 128, 32),
			.q_start = pv(&Q, s, 0, 0), .context = pv(&C2, s, 0, 0),
			.block_tables = pv(&B, s, 0, 2), .cache = &pc.c[s] }, &err), &err,
			"attn_prefill: sequence 0's chunk");
	}
	pc_close(&r, &pc);
	pb_free(&r, &X);
	pb_free(&r, &B);
	pb_free(&r, &Q);
	pb_free(&r, &C);
	pb_free(&r, &C2);
	rig_close(&r);
}
END_TEST

START_TEST(bad_values_in_buffers_are_einval_by_the_next_wait)
{
	struct rig r;
	struct ss_error err = { 0 };
	const struct kernel_kv_cache geo = {
		.layers = 1, .num_blocks = 4, .block_size = 4, .kv_heads = 2, .head_dim = 8,
	};
	/* positions, slots, indices, block tables, kv lengths, q_start, contexts */
	int32_t neg[1] = { -1 }, slot[1] = { 16 }, idx[1] = { 5 }, bt[2] = { 0, 99 },
		len[1] = { 9 }, qs[2] = { 0, 2 }, ctx[1] = { 5 }, long_ctx[1] = { 7 }, zero[1] = { 0 };
	struct pbuf X, P, S, G, B, L, Q, C, C2, Z;
	struct pcache pc;
	char name[256];

	rig_open(&r, 12);
	X = pb_f32(&r, NULL, 256);
	P = pb_i32(&r, neg, 1);
	S = pb_i32(&r, slot, 1);
	G = pb_i32(&r, idx, 1);
	B = pb_i32(&r, bt, 2);
	L = pb_i32(&r, len, 1);
	Q = pb_i32(&r, qs, 2);
	C = pb_i32(&r, ctx, 1);
	C2 = pb_i32(&r, long_ctx, 1);
	Z = pb_i32(&r, zero, 1);
	pc_open(&r, &pc, geo, true);
	for (int s = 0; s < 2; s++) {
		struct kernel_backend *kb = r.kb[s];

		kernel_backend_device_name(kb, name, sizeof(name));
		ck_assert_uint_gt(strlen(name), 0);
		expect_fault(kb, kernel_rope(kb, &(struct kernel_rope_args){
			.tokens = 1, .heads = 1, .head_dim = 8, .theta = 1e4f,
			.q = pv(&X, s, 0, 8), .pos = pv(&P, s, 0, 0) }, &err), &err, "position -1");
		expect_fault(kb, kernel_kv_write(kb, &(struct kernel_kv_write_args){
			.tokens = 1, .layer = 0, .k = pv(&X, s, 0, 16), .v = pv(&X, s, 16, 16),
			.slots = pv(&S, s, 0, 0), .cache = &pc.c[s] }, &err), &err, "slot 16");
		/* the fused op: the same checks, naming itself */
		expect_fault(kb, kernel_rope_kv_write(kb, &(struct kernel_rope_kv_write_args){
			.tokens = 1, .heads = 1, .layer = 0, .theta = 1e4f, .q = pv(&X, s, 0, 8),
			.k = pv(&X, s, 8, 16), .v = pv(&X, s, 24, 16), .pos = pv(&P, s, 0, 0),
			.slots = pv(&Z, s, 0, 0), .cache = &pc.c[s] }, &err), &err,
			"rope_kv_write: token 0 has position -1");
		expect_fault(kb, kernel_rope_kv_write(kb, &(struct kernel_rope_kv_write_args){
			.tokens = 1, .heads = 1, .layer = 0, .theta = 1e4f, .q = pv(&X, s, 0, 8),
			.k = pv(&X, s, 8, 16), .v = pv(&X, s, 24, 16), .pos = pv(&Z, s, 0, 0),
			.slots = pv(&S, s, 0, 0), .cache = &pc.c[s] }, &err), &err,
			"rope_kv_write: token 0's slot 16");
		expect_fault(kb, kernel_gather(kb, &(struct kernel_gather_args){
			.rows = 1, .cols = 4, .src_rows = 2, .src = pv(&X, s, 0, 4),
			.idx = pv(&G, s, 0, 0), .out = pv(&X, s, 128, 4) }, &err), &err, "index 5");
		/* decode over 8 keys: the second block is 99 */
		expect_fault(kb, kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
			.n_seqs = 1, .heads = 2, .layer = 0, .max_kv_len = 8, .scale = 1,
			.q = pv(&X, s, 0, 16), .out = pv(&X, s, 128, 16), .kv_len = pv(&L, s, 0, 0),
			.block_tables = pv(&B, s, 0, 2), .cache = &pc.c[s] }, &err), &err,
			"kv_len 9");
		len[0] = 8;
		ck_assert_int_eq(kernel_buf_upload(kb, L.b[s], 0, len, 4, &err), 0);
		expect_fault(kb, kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
			.n_seqs = 1, .heads = 2, .layer = 0, .max_kv_len = 8, .scale = 1,
			.q = pv(&X, s, 0, 16), .out = pv(&X, s, 128, 16), .kv_len = pv(&L, s, 0, 0),
			.block_tables = pv(&B, s, 0, 2), .cache = &pc.c[s] }, &err), &err,
			"entry 1 is 99");
		len[0] = 9;
		/* prefill of 2 tokens after 5: keys 0..6, the second block is 99 */
		expect_fault(kb, kernel_attn_prefill(kb, &(struct kernel_attn_prefill_args){
			.n_seqs = 1, .tokens = 2, .heads = 2, .layer = 0, .max_q_len = 2,
			.max_kv_len = 8, .scale = 1, .q = pv(&X, s, 0, 16), .out = pv(&X, s, 128, 16),
			.q_start = pv(&Q, s, 0, 0), .context = pv(&C, s, 0, 0),
			.block_tables = pv(&B, s, 0, 2), .cache = &pc.c[s] }, &err), &err,
			"entry 1 is 99");
		/* 2 tokens after 7 is 9 keys, over max_kv_len */
		expect_fault(kb, kernel_attn_prefill(kb, &(struct kernel_attn_prefill_args){
			.n_seqs = 1, .tokens = 2, .heads = 2, .layer = 0, .max_q_len = 2,
			.max_kv_len = 8, .scale = 1, .q = pv(&X, s, 0, 16), .out = pv(&X, s, 128, 16),
			.q_start = pv(&Q, s, 0, 0), .context = pv(&C2, s, 0, 0),
			.block_tables = pv(&B, s, 0, 2), .cache = &pc.c[s] }, &err), &err,
			"attn_prefill: sequence 0's chunk");
	}
	pc_close(&r, &pc);
	pb_free(&r, &X);
	pb_free(&r, &P);
	pb_free(&r, &S);
	pb_free(&r, &G);
	pb_free(&r, &B);
	pb_free(&r, &L);
	pb_free(&r, &Q);
	pb_free(&r, &C);
	pb_free(&r, &C2);
	pb_free(&r, &Z);
	rig_close(&r);
}
END_TEST

START_TEST(timer_measures_work)
{
	struct rig r;
	struct kernel_timer t;
	struct ss_error err = { 0 };
	struct pbuf X;
	int64_t ns = -1;

	rig_open(&r, 12);
	X = pb_f32(&r, NULL, 3 * 256 * 256);
	ck_assert_int_eq(kernel_timer_begin(r.kb[0], &t, &err), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(kernel_gemm(r.kb[0], &(struct kernel_gemm_args){
			.m = 256, .n = 256, .k = 256, .x = pv(&X, 0, 0, 256),
			.w = pv(&X, 0, 65536, 256), .y = pv(&X, 0, 131072, 256) }, &err), 0);
	ck_assert_int_eq(kernel_timer_end(r.kb[0], &t, &ns, &err), 0);
	ck_assert_int_gt(ns, 0);
	ck_assert_int_lt(ns, 60LL * 1000000000);
	pb_free(&r, &X);
	rig_close(&r);
}
END_TEST

/* The CPU backend's attention gives the same bits at 1 and 2 threads:
 * every output element is computed by one thread in a fixed order.  The
 * GEMM's slices may take OpenBLAS's edge kernels at other columns, so it
 * agrees to rounding (same seed and thread count: same bits). */
START_TEST(threads_do_not_change_results)
{
	const struct kernel_kv_cache geo = {
		.layers = 1, .num_blocks = 24, .block_size = 8, .kv_heads = 2, .head_dim = 32,
	};
	int32_t bt[2 * 12], q_start[3] = { 0, 20, 37 }, ctx[2] = { 30, 3 };
	struct kernel_backend *kb[2];
	struct kernel_kv_cache c[2];
	struct ss_error err = { 0 };
	float *k, *v, *q, *w, *out[2], *gemm_out[2][2];
	void *Q[2], *O[2], *B[2], *QS[2], *C[2], *W[2];
	size_t n = kernel_kv_cache_elems(&geo);
	struct rig r;

	if (strcmp(backend_name, "cpu") != 0)
		return;
	rig_open(&r, 13);
	for (int i = 0; i < 24; i++)
		bt[i] = i;
	shuffle(&r, bt, 24);
	k = rig_rand(&r, n);
	v = rig_rand(&r, n);
	q = rig_rand(&r, 37 * 8 * 32);
	w = rig_rand(&r, 256 * 256);
	for (int t = 0; t < 2; t++) {
		struct kernel_backend_config cfg = {
			.threads = t + 1, .module_dir = getenv("SERVESIM_MODULE_DIR"),
		};

		ck_assert_int_eq(kernel_backend_new(&kb[t], "cpu", &cfg, &err), 0);
		c[t] = geo;
		ck_assert_int_eq(kernel_kv_cache_alloc(kb[t], &c[t], KERNEL_MEM_DEVICE, &err), 0);
		kernel_buf_upload_f32(kb[t], c[t].k, 0, k, n, &err);
		kernel_buf_upload_f32(kb[t], c[t].v, 0, v, n, &err);
		kernel_buf_alloc(kb[t], &Q[t], 37 * 8 * 32 * 4, KERNEL_MEM_DEVICE, &err);
		kernel_buf_alloc(kb[t], &O[t], 37 * 8 * 32 * 4, KERNEL_MEM_DEVICE, &err);
		kernel_buf_alloc(kb[t], &B[t], sizeof(bt), KERNEL_MEM_DEVICE, &err);
		kernel_buf_alloc(kb[t], &QS[t], sizeof(q_start), KERNEL_MEM_DEVICE, &err);
		kernel_buf_alloc(kb[t], &C[t], sizeof(ctx), KERNEL_MEM_DEVICE, &err);
		kernel_buf_upload_f32(kb[t], Q[t], 0, q, 37 * 8 * 32, &err);
		kernel_buf_alloc(kb[t], &W[t], 256 * 256 * 4, KERNEL_MEM_DEVICE, &err);
		kernel_buf_upload_f32(kb[t], W[t], 0, w, 256 * 256, &err);
		kernel_buf_upload(kb[t], B[t], 0, bt, sizeof(bt), &err);
		kernel_buf_upload(kb[t], QS[t], 0, q_start, sizeof(q_start), &err);
		kernel_buf_upload(kb[t], C[t], 0, ctx, sizeof(ctx), &err);
		ck_assert_int_eq(kernel_attn_prefill(kb[t], &(struct kernel_attn_prefill_args){
			.n_seqs = 2, .tokens = 37, .heads = 8, .layer = 0, .max_q_len = 20,
			.max_kv_len = 50, .scale = 0.2f, .q = { Q[t], 0, 256 }, .out = { O[t], 0, 256 },
			.q_start = { QS[t], 0, 0 }, .context = { C[t], 0, 0 },
			.block_tables = { B[t], 0, 12 }, .cache = &c[t] }, &err), 0);
		out[t] = malloc(37 * 8 * 32 * sizeof(float));
		kernel_buf_download_f32(kb[t], out[t], O[t], 0, 37 * 8 * 32, &err);
		/* GEMMs split by columns (n = 256) and by rows (n = 40) */
		for (int g = 0; g < 2; g++) {
			int n = g ? 40 : 256;

			ck_assert_int_eq(kernel_gemm(kb[t], &(struct kernel_gemm_args){
				.m = 37, .n = n, .k = 256, .x = { Q[t], 0, 256 }, .w = { W[t], 0, 256 },
				.y = { O[t], 0, 256 } }, &err), 0);
			gemm_out[t][g] = malloc(37 * 256 * sizeof(float));
			kernel_buf_download_f32(kb[t], gemm_out[t][g], O[t], 0, 37 * 256, &err);
		}
	}
	ck_assert_mem_eq(out[0], out[1], 37 * 8 * 32 * sizeof(float));
	for (int g = 0; g < 2; g++) {
		check_close("gemm at 2 threads", gemm_out[1][g], gemm_out[0][g], 37 * 256, 1e-5,
			    max_abs(gemm_out[0][g], 37 * 256), false);
		free(gemm_out[0][g]);
		free(gemm_out[1][g]);
	}
	for (int t = 0; t < 2; t++) {
		kernel_buf_free(kb[t], Q[t]);
		kernel_buf_free(kb[t], O[t]);
		kernel_buf_free(kb[t], B[t]);
		kernel_buf_free(kb[t], QS[t]);
		kernel_buf_free(kb[t], C[t]);
		kernel_buf_free(kb[t], W[t]);
		kernel_kv_cache_free(kb[t], &c[t]);
		kernel_backend_free(kb[t]);
		free(out[t]);
	}
	free(k);
	free(v);
	free(q);
	free(w);
	rig_close(&r);
}
END_TEST

/* ---- synthetic step ---- */

static const struct synth_shape tiny = {
	.layers = 2, .hidden = 64, .heads = 8, .kv_heads = 2, .head_dim = 16,
	.intermediate = 88, .vocab = 301, .gated = true,
};

#define NB 64   /* KV blocks in the synthetic tests' caches */
#define BS 4    /* tokens per block */

struct model_run {
	struct synth_model *sm;
	int32_t pool[NB];
	int taken;
};

static struct synth_model *model(struct kernel_backend *kb, const struct synth_shape *shape,
				 uint64_t seed)
{
	struct synth_model *sm = NULL;
	struct ss_error err = { 0 };
	int rc = synth_model_new(&sm, kb, shape, NB, BS, seed, &err);

	ck_assert_msg(rc == 0, "%s", err.msg);
	return sm;
}

static void step(struct synth_model *sm, const struct synth_item *items, int n)
{
	struct ss_error err = { 0 };
	int64_t ns = -1;
	int rc = synth_model_step(sm, items, n, &ns, &err);

	ck_assert_msg(rc == 0, "%s", err.msg);
	ck_assert_int_ge(ns, 0);
}

/* Emitted rows of the last step: hidden [e, hidden], logits [e, vocab]. */
static void outputs(struct synth_model *sm, float **hidden, float **logits, int32_t **ids)
{
	const struct synth_shape *s = synth_model_shape(sm);
	int e = synth_model_n_emit(sm);
	struct ss_error err = { 0 };

	*hidden = malloc((size_t)(e ? e : 1) * s->hidden * sizeof(float));
	*logits = malloc((size_t)(e ? e : 1) * s->vocab * sizeof(float));
	*ids = malloc((size_t)(e ? e : 1) * sizeof(int32_t));
	ck_assert_int_eq(synth_model_outputs(sm, *hidden, *logits, *ids, &err), 0);
}

static void shuffled_pool(uint64_t seed, int32_t *pool)
{
	uint64_t st = seed;

	for (int i = 0; i < NB; i++)
		pool[i] = i;
	for (int i = NB - 1; i > 0; i--) {
		int j = (int)(next(&st) % (uint64_t)(i + 1));
		int32_t t = pool[i];

		pool[i] = pool[j];
		pool[j] = t;
	}
}

START_TEST(shape_scaling_keeps_head_dim_and_gqa)
{
	struct synth_shape s = {
		.layers = 32, .hidden = 4096, .heads = 32, .kv_heads = 8, .head_dim = 128,
		.intermediate = 14336, .vocab = 128256, .gated = true,
	};
	struct ss_error err = { 0 };

	ck_assert_int_eq(synth_shape_scale(&s, 8, 4, &err), 0);
	ck_assert_int_eq(s.layers, 4);
	ck_assert_int_eq(s.hidden, 512);
	ck_assert_int_eq(s.kv_heads, 1);
	ck_assert_int_eq(s.heads, 4);
	ck_assert_int_eq(s.head_dim, 128);
	ck_assert_int_eq(s.intermediate, 1792);
	ck_assert_int_eq(s.vocab, 16032);
	ck_assert(s.gated);
	ck_assert_int_eq(synth_shape_scale(&s, 1, 0, &err), 0);   /* identity */
	ck_assert_int_eq(s.hidden, 512);
	ck_assert_int_eq(synth_shape_scale(&s, 0, 0, &err), -EINVAL);
	s.heads = 6;
	s.kv_heads = 4;
	ck_assert_int_eq(synth_shape_check(&s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "kv_heads"));
}
END_TEST

/* A mixed step (prefill chunks with and without prior context, decodes at
 * block boundaries) runs, emits in item order, and is deterministic. */
START_TEST(mixed_step_is_deterministic)
{
	struct rig r;
	int32_t pool[NB];
	int32_t *bt[5];
	float *h[3], *lg[3];
	int32_t *ids[3];
	struct synth_model *sm[3];
	/* tokens, context: prefill from scratch (emits), decode at a block
	 * boundary, chunk with prior context (does not emit), decode, decode */
	const int tok[5] = { 9, 1, 6, 1, 1 }, ctx[5] = { 0, 8, 5, 3, 12 };
	const bool emit[5] = { true, true, false, true, true };
	struct synth_item items[5];
	int taken = 0;

	rig_open(&r, 14);
	shuffled_pool(14, pool);
	for (int i = 0; i < 5; i++) {
		int need = (ctx[i] + tok[i] + BS - 1) / BS;

		bt[i] = pool + taken;
		taken += need;
		items[i] = (struct synth_item){ .tokens = tok[i], .context = ctx[i],
						.block_table = bt[i], .n_blocks = need,
						.emit = emit[i] };
	}
	for (int m = 0; m < 3; m++) {
		sm[m] = model(r.kb[0], &tiny, m == 2 ? 99 : 42);
		step(sm[m], items, 5);
		ck_assert_int_eq(synth_model_n_emit(sm[m]), 4);
		outputs(sm[m], &h[m], &lg[m], &ids[m]);
	}
	/* same seed: the same bits; another seed: other logits */
	ck_assert_mem_eq(lg[0], lg[1], 4 * tiny.vocab * sizeof(float));
	ck_assert_mem_eq(h[0], h[1], 4 * tiny.hidden * sizeof(float));
	ck_assert_mem_eq(ids[0], ids[1], 4 * sizeof(int32_t));
	ck_assert(memcmp(lg[0], lg[2], 4 * tiny.vocab * sizeof(float)) != 0);
	/* the sampled id is the argmax of the logits */
	for (int e = 0; e < 4; e++) {
		int best = 0;

		for (int v = 1; v < tiny.vocab; v++)
			if (lg[0][e * tiny.vocab + v] > lg[0][e * tiny.vocab + best])
				best = v;
		ck_assert_int_eq(ids[0][e], best);
	}
	/* and the hidden state is the final RMSNorm's output: O(1), finite */
	for (int i = 0; i < 4 * tiny.hidden; i++)
		ck_assert(isfinite(h[0][i]) && fabsf(h[0][i]) < 20);
	for (int m = 0; m < 3; m++) {
		free(h[m]);
		free(lg[m]);
		free(ids[m]);
		synth_model_free(sm[m]);
	}
	rig_close(&r);
}
END_TEST

/* One request's emitted row in a mixed step equals its row when it runs
 * alone: the step's internal reordering (decodes first) maps outputs back
 * to items, and requests do not see each other's KV. */
START_TEST(mixed_step_rows_equal_solo_rows)
{
	struct rig r;
	int32_t pool[NB];
	const int tok[4] = { 7, 1, 1, 5 }, ctx[4] = { 0, 10, 3, 4 };
	struct synth_item items[4];
	float *hm, *lm, *hs, *ls;
	int32_t *im, *is;
	struct synth_model *sm;
	int taken = 0, e = 0;

	rig_open(&r, 15);
	shuffled_pool(15, pool);
	for (int i = 0; i < 4; i++) {
		int need = (ctx[i] + tok[i] + BS - 1) / BS;

		items[i] = (struct synth_item){ .tokens = tok[i], .context = ctx[i],
						.block_table = pool + taken, .n_blocks = need,
						.emit = true };
		taken += need;
	}
	sm = model(r.kb[0], &tiny, 7);
	/* The solo runs first fill each request's context (a prefill of its
	 * context alone), then its step; the mixed run repeats the same with
	 * every request in one step. */
	for (int i = 0; i < 4; i++)
		if (ctx[i]) {
			struct synth_item pre = items[i];

			pre.tokens = ctx[i];
			pre.context = 0;
			pre.emit = false;
			step(sm, &pre, 1);
		}
	step(sm, items, 4);
	outputs(sm, &hm, &lm, &im);
	for (int i = 0; i < 4; i++) {
		step(sm, &items[i], 1);
		outputs(sm, &hs, &ls, &is);
		check_close("solo vs mixed hidden", hs, hm + e * tiny.hidden, tiny.hidden,
			    r.tol->step, max_abs(hm + e * tiny.hidden, tiny.hidden), false);
		check_close("solo vs mixed logits", ls, lm + e * tiny.vocab, tiny.vocab,
			    r.tol->step, max_abs(lm + e * tiny.vocab, tiny.vocab), false);
		e++;
		free(hs);
		free(ls);
		free(is);
	}
	free(hm);
	free(lm);
	free(im);
	synth_model_free(sm);
	rig_close(&r);
}
END_TEST

/* A 23-token prompt prefilled in one chunk, in two chunks (10 + 13) and in
 * a chunk of 22 then a decode, each through its own shuffled block table,
 * ends in the same hidden state: prior-context attention reads the cached
 * prefix through the paged cache exactly as the one-chunk attention sees
 * it.  Also with a plain (ReLU) MLP. */
START_TEST(chunked_prefill_equals_one_chunk)
{
	struct rig r;
	struct synth_shape plain = tiny;

	plain.gated = false;
	plain.heads = 4;
	plain.kv_heads = 4;
	rig_open(&r, 16);
	for (int variant = 0; variant < 2; variant++) {
		const struct synth_shape *shape = variant ? &plain : &tiny;
		struct synth_model *sm = model(r.kb[0], shape, 5);
		int32_t pool[3][NB];
		float *h[3], *lg[3];
		int32_t *ids[3];
		const int L = 23, need = (L + BS - 1) / BS;

		for (int c = 0; c < 3; c++)
			shuffled_pool(100 + c, pool[c]);
		/* one chunk */
		step(sm, &(struct synth_item){ .tokens = L, .block_table = pool[0],
					       .n_blocks = need, .emit = true }, 1);
		outputs(sm, &h[0], &lg[0], &ids[0]);
		/* 10 + 13 */
		step(sm, &(struct synth_item){ .tokens = 10, .block_table = pool[1],
					       .n_blocks = need }, 1);
		ck_assert_int_eq(synth_model_n_emit(sm), 0);
		step(sm, &(struct synth_item){ .tokens = 13, .context = 10, .block_table = pool[1],
					       .n_blocks = need, .emit = true }, 1);
		outputs(sm, &h[1], &lg[1], &ids[1]);
		/* 22 + a decode */
		step(sm, &(struct synth_item){ .tokens = 22, .block_table = pool[2],
					       .n_blocks = need }, 1);
		step(sm, &(struct synth_item){ .tokens = 1, .context = 22, .block_table = pool[2],
					       .n_blocks = need, .emit = true }, 1);
		outputs(sm, &h[2], &lg[2], &ids[2]);
		for (int c = 1; c < 3; c++) {
			check_close(c == 1 ? "two chunks: hidden" : "chunk + decode: hidden", h[c],
				    h[0], shape->hidden, r.tol->step, max_abs(h[0], shape->hidden),
				    false);
			check_close(c == 1 ? "two chunks: logits" : "chunk + decode: logits", lg[c],
				    lg[0], shape->vocab, r.tol->step, max_abs(lg[0], shape->vocab),
				    false);
		}
		for (int c = 0; c < 3; c++) {
			free(h[c]);
			free(lg[c]);
			free(ids[c]);
		}
		synth_model_free(sm);
	}
	rig_close(&r);
}
END_TEST

/* The model's weights, downloaded, are what the host drew and uploaded
 * before weights were drawn on the backend (kernels/step.c until ops table
 * version 3), computed here as it did: tensor by tensor in the order of
 * step.h, element i of the tensor at off being bias + scale * u with u from
 * SplitMix64 at splitmix64(seed ^ splitmix64(off + 1)) + i.  The same bits
 * on fp32 backends; on bf16 ones, those rounded to nearest even. */
START_TEST(step_weights_are_the_host_draw)
{
	const struct synth_shape *t = &tiny;
	const size_t h = (size_t)t->hidden, q_w = (size_t)t->heads * t->head_dim;
	const size_t qkv_w = q_w + 2 * (size_t)t->kv_heads * t->head_dim;
	const size_t up_w = (t->gated ? 2 : 1) * (size_t)t->intermediate;
	struct tensor { size_t n; float scale, bias; } tensors[3 + 6 * 2];
	const uint64_t seed = 77;
	struct rig r;
	int nt = 0;

	tensors[nt++] = (struct tensor){ (size_t)t->vocab * h, 1.0f, 0 };
	for (int l = 0; l < t->layers; l++) {
		tensors[nt++] = (struct tensor){ h, 0.1f, 1.0f };
		tensors[nt++] = (struct tensor){ qkv_w * h, sqrtf(3.0f / t->hidden), 0 };
		tensors[nt++] = (struct tensor){ h * q_w, sqrtf(3.0f / q_w), 0 };
		tensors[nt++] = (struct tensor){ h, 0.1f, 1.0f };
		tensors[nt++] = (struct tensor){ up_w * h, sqrtf(3.0f / t->hidden), 0 };
		tensors[nt++] = (struct tensor){ h * t->intermediate,
						     sqrtf(3.0f / t->intermediate), 0 };
	}
	tensors[nt++] = (struct tensor){ h, 0.1f, 1.0f };
	tensors[nt++] = (struct tensor){ (size_t)t->vocab * h, sqrtf(3.0f / t->hidden), 0 };
	rig_open(&r, 33);
	for (int s = 0; s < 2; s++) {
		struct synth_model *sm = model(r.kb[s], t, seed);
		bool bf = kernel_backend_dtype(r.kb[s]) == KERNEL_DTYPE_BF16;
		struct ss_error err = { 0 };
		size_t n, off = 0;
		const void *w = synth_model_weights(sm, &n);
		float *got;

		ck_assert_uint_eq(n, synth_shape_params(t));
		got = malloc(n * sizeof(float));
		ck_assert_ptr_nonnull(got);
		ck_assert_int_eq(kernel_buf_download_f32(r.kb[s], got, w, 0, n, &err), 0);
		for (int i = 0; i < nt; i++) {
			uint64_t a = off + 1, b;

			b = seed ^ next(&a);    /* next(&x) is splitmix64(x) of the old x */
			b = next(&b);
			for (size_t e = 0; e < tensors[i].n; e++)
				ck_assert_msg(got[off + e] == uniform_draw(b, e, tensors[i].scale,
									   tensors[i].bias, bf),
					      "%s: tensor %d element %zu is %.9g", r.kb[s]->ops->name,
					      i, e, got[off + e]);
			off += tensors[i].n;
		}
		ck_assert_uint_eq(off, n);
		free(got);
		synth_model_free(sm);
	}
	rig_close(&r);
}
END_TEST

/* The whole step on the backend under test agrees with the same model on
 * the reference backend (fp32 backends only: a bf16 backend's weights are
 * rounded, so it differs from an fp32 reference by more than its
 * arithmetic). */
START_TEST(step_matches_reference_backend)
{
	struct rig r;
	int32_t pool[NB];
	const int tok[3] = { 11, 1, 4 }, ctx[3] = { 0, 13, 6 };
	struct synth_item items[3];
	float *h[2], *lg[2];
	int32_t *ids[2];
	int taken = 0;

	rig_open(&r, 17);
	if (r.bf16) {
		rig_close(&r);
		return;
	}
	shuffled_pool(17, pool);
	for (int i = 0; i < 3; i++) {
		int need = (ctx[i] + tok[i] + BS - 1) / BS;

		items[i] = (struct synth_item){ .tokens = tok[i], .context = ctx[i],
						.block_table = pool + taken, .n_blocks = need,
						.emit = true };
		taken += need;
	}
	for (int s = 0; s < 2; s++) {
		struct synth_model *sm = model(r.kb[s], &tiny, 3);

		step(sm, items, 3);
		outputs(sm, &h[s], &lg[s], &ids[s]);
		synth_model_free(sm);
	}
	check_close("step vs ref: hidden", h[0], h[1], 3 * tiny.hidden, r.tol->step,
		    max_abs(h[1], 3 * tiny.hidden), false);
	check_close("step vs ref: logits", lg[0], lg[1], 3 * tiny.vocab, r.tol->step,
		    max_abs(lg[1], 3 * tiny.vocab), false);
	for (int s = 0; s < 2; s++) {
		free(h[s]);
		free(lg[s]);
		free(ids[s]);
	}
	rig_close(&r);
}
END_TEST

/* Adapters on q, k, v and o: a step's items that name a slot go through
 * their adapter, the others are the base model's; the backend under test
 * matches the reference with adapters; an adapter gives the same rows from
 * whichever slot it is loaded into. */
START_TEST(step_adapters_apply_to_their_items_only)
{
	enum { N = 4 };
	struct rig r;
	int32_t pool[NB];
	const int tok[N] = { 11, 1, 1, 5 }, ctx[N] = { 0, 13, 6, 0 };
	const int slot[N] = { 2, -1, 0, -1 };
	struct synth_item items[N];
	float *h[3], *lg[3];
	int32_t *ids;
	int taken = 0, H = tiny.hidden;
	struct ss_error err = { 0 };

	rig_open(&r, 23);
	if (r.bf16) {
		rig_close(&r);
		return;
	}
	shuffled_pool(23, pool);
	for (int i = 0; i < N; i++) {
		int need = (ctx[i] + tok[i] + BS - 1) / BS;

		items[i] = (struct synth_item){ .tokens = tok[i], .context = ctx[i],
						.block_table = pool + taken, .n_blocks = need,
						.emit = true, .lora = slot[i] >= 0,
						.lora_slot = slot[i] };
		taken += need;
	}
	for (int s = 0; s < 2; s++) {
		struct synth_model *sm = model(r.kb[s], &tiny, 3);

		ck_assert_int_eq(synth_model_set_lora(sm, 3, 8, &err), 0);
		ck_assert_int_eq(synth_model_lora_stage(sm, 5, 8, &err), 0);
		ck_assert_int_eq(synth_model_lora_stage(sm, 2, 4, &err), 0);
		ck_assert_int_eq(synth_model_lora_stage(sm, 2, 8, &err), -EINVAL);   /* its rank is 4 */
		ck_assert_int_eq(synth_model_lora_load(sm, 2, 5, &err), 0);
		ck_assert_int_eq(synth_model_lora_load(sm, 0, 2, &err), 0);
		/* rank x (d_in + d_out) per module and layer, fp32 */
		ck_assert_uint_eq(synth_model_lora_bytes(sm, 2),
				  2u * 4 * ((64 + 128) + 2 * (64 + 32) + (128 + 64)) * 4);
		step(sm, items, N);
		ck_assert_int_gt(synth_model_lora_ns(sm), 0);
		outputs(sm, &h[s], &lg[s], &ids);
		free(ids);
		if (s == 0) {
			/* adapter 5 from slot 1 instead of 2: the same rows */
			struct synth_item moved[N];
			float *h2, *l2;
			int32_t *i2;

			memcpy(moved, items, sizeof(moved));
			moved[0].lora_slot = 1;
			ck_assert_int_eq(synth_model_lora_load(sm, 1, 5, &err), 0);
			step(sm, moved, N);
			outputs(sm, &h2, &l2, &i2);
			free(l2);
			free(i2);
			check_close("adapter from another slot", h2, h[0], (size_t)N * H, 1e-6,
				    max_abs(h[0], (size_t)N * H), false);
			free(h2);
			/* a slot nothing was loaded into is refused */
			moved[0].lora_slot = 2;
			moved[2].lora_slot = 1;
			moved[3].lora = true;
			moved[3].lora_slot = 3;
			ck_assert_int_eq(synth_model_step(sm, moved, N, NULL, &err), -EINVAL);
		}
		synth_model_free(sm);
	}
	check_close("adapters vs ref: hidden", h[0], h[1], (size_t)N * H, r.tol->step,
		    max_abs(h[1], (size_t)N * H), false);
	check_close("adapters vs ref: logits", lg[0], lg[1], (size_t)N * tiny.vocab, r.tol->step,
		    max_abs(lg[1], (size_t)N * tiny.vocab), false);
	/* the same items without adapters */
	{
		struct synth_model *sm = model(r.kb[0], &tiny, 3);
		double d_base = 0, d_lora = 0, scale = max_abs(h[0], (size_t)N * H);

		for (int i = 0; i < N; i++)
			items[i].lora = false;
		step(sm, items, N);
		outputs(sm, &h[2], &lg[2], &ids);
		free(lg[2]);
		free(ids);
		synth_model_free(sm);
		for (int i = 0; i < N; i++)
			for (int c = 0; c < H; c++) {
				double d = fabs((double)h[2][i * H + c] - h[0][i * H + c]);

				if (slot[i] >= 0)
					d_lora = d > d_lora ? d : d_lora;
				else
					d_base = d > d_base ? d : d_base;
			}
		ck_assert_msg(d_base <= r.tol->step * scale, "base rows moved by %g", d_base);
		ck_assert_msg(d_lora > 100 * r.tol->step * scale,
			      "adapted rows moved by only %g (scale %g)", d_lora, scale);
		free(h[2]);
	}
	for (int s = 0; s < 2; s++) {
		free(h[s]);
		free(lg[s]);
	}
	rig_close(&r);
}
END_TEST

START_TEST(step_rejects_bad_items_and_reuses_workspace)
{
	struct rig r;
	struct synth_model *sm;
	struct ss_error err = { 0 };
	int32_t bt[4] = { 3, 1, 2, 0 }, bad[2] = { 1, NB };
	int32_t tokens[2] = { 5, 301 };
	size_t ws;

	rig_open(&r, 18);
	sm = model(r.kb[0], &tiny, 1);
	ck_assert_int_eq(synth_model_step(sm, NULL, 0, NULL, &err), -EINVAL);
	/* 9 positions need 3 blocks of 4 */
	ck_assert_int_eq(synth_model_step(sm, &(struct synth_item){
		.tokens = 9, .block_table = bt, .n_blocks = 2 }, 1, NULL, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "needs 3 blocks"));
	ck_assert_int_eq(synth_model_step(sm, &(struct synth_item){
		.tokens = 1, .context = 4, .block_table = bad, .n_blocks = 2 }, 1, NULL, &err),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "outside the cache"));
	ck_assert_int_eq(synth_model_step(sm, &(struct synth_item){
		.tokens = 2, .block_table = bt, .n_blocks = 4, .token_ids = tokens }, 1, NULL, &err),
		-EINVAL);
	ck_assert_int_eq(synth_model_step(sm, &(struct synth_item){
		.tokens = 0, .block_table = bt, .n_blocks = 4 }, 1, NULL, &err), -EINVAL);
	/* caller-given ids are accepted */
	tokens[1] = 300;
	step(sm, &(struct synth_item){ .tokens = 2, .block_table = bt, .n_blocks = 4,
				       .emit = true, .token_ids = tokens }, 1);
	/* a big step, then smaller ones: the workspace does not move */
	step(sm, &(struct synth_item){ .tokens = 16, .block_table = bt, .n_blocks = 4,
				       .emit = true }, 1);
	ws = synth_model_workspace_bytes(sm);
	ck_assert_uint_gt(ws, 0);
	for (int i = 0; i < 3; i++)
		step(sm, &(struct synth_item){ .tokens = 1 + i, .context = 5, .block_table = bt,
					       .n_blocks = 4, .emit = true }, 1);
	ck_assert_uint_eq(synth_model_workspace_bytes(sm), ws);
	ck_assert_uint_eq(synth_model_weight_bytes(sm),
			  synth_shape_params(&tiny) * kernel_backend_elem_size(r.kb[0]));
	ck_assert_uint_eq(synth_model_kv_bytes(sm), (size_t)2 * 2 * NB * BS * 2 * 16 *
			  kernel_backend_elem_size(r.kb[0]));
	synth_model_free(sm);
	synth_model_free(NULL);
	rig_close(&r);
}
END_TEST

/* ---- fp8 E4M3 KV caches (docs/kernels.md, "fp8 KV cache") ---- */

/* The one conversion every backend's fp8 cache uses, against values worked
 * out by hand.  E4M3: bias 7, 3 mantissa bits, exponent field 0 subnormal
 * (m x 2^-9), S.1111.111 NaN, largest finite 1.75 x 2^8 = 448. */
START_TEST(fp8_e4m3_conversion_matches_hand_values)
{
	static const struct {
		float x;
		uint8_t bits;
		float back;
	} t[] = {
		{ 0.0f, 0x00, 0.0f },
		{ 1.0f, 0x38, 1.0f },                   /* 0.0111.000 */
		{ -2.5f, 0xc2, -2.5f },                 /* 1.1000.010: 1.25 x 2 */
		{ 0.1f, 0x1d, 0.1015625f },             /* 1.6 x 2^-4: mantissa 4.8/8 -> 5/8 */
		{ 240.0f, 0x77, 240.0f },               /* 1.875 x 2^7 */
		{ 448.0f, 0x7e, 448.0f },               /* the largest finite */
		{ 450.0f, 0x7e, 448.0f },               /* within half an ulp (16) of 448 */
		{ 500.0f, 0x7e, 448.0f },               /* saturates (__NV_SATFINITE) */
		{ -1e6f, 0xfe, -448.0f },
		{ INFINITY, 0x7e, 448.0f },
		{ -INFINITY, 0xfe, -448.0f },
		{ 0x1p-6f, 0x08, 0x1p-6f },             /* the smallest normal */
		{ 1e-3f, 0x01, 0x1p-9f },               /* subnormal: 0.512 x 2^-9 -> 2^-9 */
		{ 0x1p-9f, 0x01, 0x1p-9f },             /* the smallest subnormal */
		{ 0x1.cp-7f, 0x07, 0x1.cp-7f },         /* 7 x 2^-9, the largest subnormal */
		{ 0x1p-10f, 0x00, 0.0f },               /* half of 2^-9: ties to even 0 */
		{ 0x1.2p-10f, 0x01, 0x1p-9f },          /* just above half */
		{ 0x1.8p-9f, 0x02, 0x1p-8f },           /* 1.5 x 2^-9: tie, to even 2 */
		{ 0x1.4p-8f, 0x02, 0x1p-8f },           /* 2.5 x 2^-9: tie, to even 2 */
		{ 1.0625f, 0x38, 1.0f },                /* halfway 1 .. 1.125: to even (1.0) */
		{ 1.1875f, 0x3a, 1.25f },               /* halfway 1.125 .. 1.25: to even (1.25) */
		{ 1.0626f, 0x39, 1.125f },              /* just past the tie: up */
		{ 15.5f, 0x58, 16.0f },                 /* 1.111|1 x 2^3: tie, up to even, carry to 2^4 */
		{ -1e-9f, 0x80, -0.0f },                /* underflow keeps the sign */
	};
	uint8_t b;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		b = kernel_fp8_e4m3_from_f32(t[i].x);
		ck_assert_msg(b == t[i].bits, "%a -> 0x%02x, expected 0x%02x", t[i].x, b, t[i].bits);
		ck_assert_msg(kernel_fp8_e4m3_to_f32(b) == t[i].back &&
			      signbit(kernel_fp8_e4m3_to_f32(b)) == signbit(t[i].back),
			      "0x%02x -> %a, expected %a", b, kernel_fp8_e4m3_to_f32(b), t[i].back);
	}
	ck_assert_int_eq(kernel_fp8_e4m3_from_f32(-0.0f), 0x80);
	ck_assert(signbit(kernel_fp8_e4m3_to_f32(0x80)));
	ck_assert_int_eq(kernel_fp8_e4m3_from_f32(NAN), 0x7f);
	ck_assert(isnan(kernel_fp8_e4m3_to_f32(0x7f)) && isnan(kernel_fp8_e4m3_to_f32(0xff)));
	/* every finite code converts back to itself, and codes grow with values */
	for (int c = 0; c < 256; c++) {
		float f = kernel_fp8_e4m3_to_f32((uint8_t)c);

		if ((c & 0x7f) == 0x7f)
			continue;
		ck_assert_int_eq(kernel_fp8_e4m3_from_f32(f), c);
		if (c > 0 && c < 0x7f)
			ck_assert(f > kernel_fp8_e4m3_to_f32((uint8_t)(c - 1)));
	}
	ck_assert_int_eq(kernel_dtype_size(KERNEL_DTYPE_FP8_E4M3), 1);
	ck_assert_str_eq(kernel_dtype_name(KERNEL_DTYPE_FP8_E4M3), "fp8_e4m3");
}
END_TEST

/* An fp8 cache on both sides holding the same random E4M3 bytes (values in
 * [-2, 2]), uploaded raw so that both backends read identical bits. */
static void pc_open_fp8(struct rig *r, struct pcache *pc, struct kernel_kv_cache geo)
{
	struct ss_error err = { 0 };
	size_t n = kernel_kv_cache_elems(&geo);
	uint8_t *kv[2] = { malloc(n), malloc(n) };
	float *x = rig_rand(r, 2 * n);

	ck_assert(kv[0] && kv[1]);
	for (size_t i = 0; i < n; i++) {
		kv[0][i] = kernel_fp8_e4m3_from_f32(2 * x[i]);
		kv[1][i] = kernel_fp8_e4m3_from_f32(2 * x[n + i]);
	}
	geo.dtype = KERNEL_DTYPE_FP8_E4M3;
	for (int s = 0; s < 2; s++) {
		pc->c[s] = geo;
		ck_assert_int_eq(kernel_kv_cache_alloc(r->kb[s], &pc->c[s], KERNEL_MEM_DEVICE, &err),
				 0);
		ck_assert_int_eq(kernel_buf_upload(r->kb[s], pc->c[s].k, 0, kv[0], n, &err), 0);
		ck_assert_int_eq(kernel_buf_upload(r->kb[s], pc->c[s].v, 0, kv[1], n, &err), 0);
	}
	free(kv[0]);
	free(kv[1]);
	free(x);
}

/* kv_write into an fp8 cache stores kernel_fp8_e4m3_from_f32 of each value,
 * bit for bit on every backend (the CUDA backend converts on the device),
 * including values that saturate, subnormals and exact ties (which a
 * conversion rounding the wrong way, or truncating, gets wrong); then decode
 * attention over what was written agrees with the reference. */
START_TEST(fp8_kv_write_stores_e4m3_bits)
{
	/* head_dim 16: rows take the vector paths; 6: the element paths */
	static const int dims[] = { 16, 6 };
	static const float special[] = {
		0.1f, 448.0f, 500.0f, -1000.0f, 1e-3f, 0x1.8p-9f, 0x1p-10f, 1.0625f, 1.1875f,
		-0.0f, 15.5f, -0x1.4p-8f, 240.0f, 2.0f, -1.0625f,
	};
	const int ns = (int)(sizeof(special) / sizeof(special[0]));

	for (int di = 0; di < 2; di++) {
		const int d = dims[di];
		const struct kernel_kv_cache geo = {
			.layers = 2, .num_blocks = 6, .block_size = 4, .kv_heads = 2, .head_dim = d,
			.dtype = KERNEL_DTYPE_FP8_E4M3,
		};
		const int kvw = 2 * d, T = 9, qkv_w = 3 * kvw;
		int32_t slots[9] = { 5, 0, 22, 7, 13, -1, 1, 2, 3 };
		int32_t bt[1] = { 0 }, lens[1] = { 4 };
		size_t n = kernel_kv_cache_elems(&geo), layer = n / 2;
		uint8_t *got = malloc(n);
		struct rig r;
		struct pcache pc;
		struct pbuf X, S, Q, O, L, B;
		struct ss_error err = { 0 };
		float *x, *q;

		rig_open(&r, 30 + di);
		x = rig_rand(&r, (size_t)T * qkv_w);
		for (int i = 0; i < T * qkv_w; i++)
			if (i % 3 == 0)
				x[i] = special[i / 3 % ns];   /* every one exact in bf16 too */
		X = pb_f32(&r, x, (size_t)T * qkv_w);
		S = pb_i32(&r, slots, T);
		for (int s = 0; s < 2; s++) {
			pc.c[s] = geo;
			ck_assert_int_eq(kernel_kv_cache_alloc(r.kb[s], &pc.c[s], KERNEL_MEM_DEVICE,
							       &err), 0);
		}
		BOTH(rc = kernel_kv_write(kb, &(struct kernel_kv_write_args){
			.tokens = T, .layer = 1, .k = pv(&X, s, kvw, qkv_w),
			.v = pv(&X, s, 2 * kvw, qkv_w), .slots = pv(&S, s, 0, 0),
			.cache = &pc.c[s] }, &err));
		for (int s = 0; s < 2; s++)
			for (int kv = 0; kv < 2; kv++) {
				ck_assert_int_eq(kernel_buf_download(r.kb[s], got,
								     kv ? pc.c[s].v : pc.c[s].k, 0, n,
								     &err), 0);
				for (size_t e = 0; e < n; e++) {
					size_t slot = e % layer / kvw, c = e % kvw;
					uint8_t want = 0;

					for (int t = 0; t < T; t++)
						if (e >= layer && slots[t] == (int)slot)
							want = kernel_fp8_e4m3_from_f32(
								x[(size_t)t * qkv_w + (1 + kv) * kvw + c]);
					ck_assert_msg(got[e] == want,
						      "side %d %c element %zu: 0x%02x, expected 0x%02x",
						      s, kv ? 'V' : 'K', e, got[e], want);
				}
			}
		/* the fused RoPE + KV write stores the same bytes: at position 0
		 * the rotation is the identity (cos 0 = 1, sin 0 = 0, exactly) */
		{
			int32_t zeros[9] = { 0 };
			uint8_t *fused = malloc(n);
			struct pcache pf;
			struct pbuf X2 = pb_f32(&r, x, (size_t)T * qkv_w), P = pb_i32(&r, zeros, T);

			for (int s = 0; s < 2; s++) {
				pf.c[s] = geo;
				ck_assert_int_eq(kernel_kv_cache_alloc(r.kb[s], &pf.c[s],
								       KERNEL_MEM_DEVICE, &err), 0);
			}
			BOTH(rc = kernel_rope_kv_write(kb, &(struct kernel_rope_kv_write_args){
				.tokens = T, .heads = 0, .layer = 1, .theta = 1e4f,
				.k = pv(&X2, s, kvw, qkv_w), .v = pv(&X2, s, 2 * kvw, qkv_w),
				.pos = pv(&P, s, 0, 0), .slots = pv(&S, s, 0, 0),
				.cache = &pf.c[s] }, &err));
			for (int s = 0; s < 2; s++)
				for (int kv = 0; kv < 2; kv++) {
					ck_assert_int_eq(kernel_buf_download(r.kb[s], got,
									     kv ? pc.c[s].v : pc.c[s].k,
									     0, n, &err), 0);
					ck_assert_int_eq(kernel_buf_download(r.kb[s], fused,
									     kv ? pf.c[s].v : pf.c[s].k,
									     0, n, &err), 0);
					ck_assert_msg(memcmp(got, fused, n) == 0,
						      "side %d: rope_kv_write's fp8 %c bytes differ from "
						      "kv_write's", s, kv ? 'V' : 'K');
				}
			free(fused);
			pc_close(&r, &pf);
			pb_free(&r, &X2);
			pb_free(&r, &P);
		}
		/* sequence = slots 0..3 (block 0): decode reads the E4M3 values */
		q = rig_rand(&r, 4 * d);
		Q = pb_f32(&r, q, 4 * d);
		O = pb_f32(&r, NULL, 4 * d);
		L = pb_i32(&r, lens, 1);
		B = pb_i32(&r, bt, 1);
		BOTH(rc = kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
			.n_seqs = 1, .heads = 4, .layer = 1, .max_kv_len = 4, .scale = 0.01f,
			.q = pv(&Q, s, 0, 4 * d), .out = pv(&O, s, 0, 4 * d),
			.kv_len = pv(&L, s, 0, 0), .block_tables = pv(&B, s, 0, 1),
			.cache = &pc.c[s] }, &err));
		/* |V| reaches 448 (saturated): the bound scales with it */
		compare(&r, "fp8: decode after kv_write", &O, r.tol->attn, 448, false);
		pc_close(&r, &pc);
		pb_free(&r, &X);
		pb_free(&r, &S);
		pb_free(&r, &Q);
		pb_free(&r, &O);
		pb_free(&r, &L);
		pb_free(&r, &B);
		free(x);
		free(q);
		free(got);
		rig_close(&r);
	}
}
END_TEST

/* Prefill and decode attention over fp8 caches against the reference, which
 * reads the same E4M3 bytes: only the accumulation order differs, so the
 * tolerances of the backend's own dtype hold.  head_dim 32, 64, 128 and 256
 * (the vector loads), 24 (16-byte K loads impossible, 8-element V loads
 * kept) and 6 (element loads); GQA 1, 4 and 8; prior contexts and chunks as
 * in prefill_attention_matches_reference; decode lengths beside a context
 * long enough for the CUDA backend to split it (1600 keys). */
START_TEST(fp8_kv_attention_matches_reference)
{
	static const struct {
		int d, heads, kv_heads, bs;
	} cases[] = {
		{ 32, 4, 4, 16 }, { 64, 8, 2, 6 }, { 128, 8, 1, 16 }, { 256, 4, 1, 16 },
		{ 24, 8, 2, 16 }, { 6, 4, 1, 5 },
	};
	static const int ctxs[] = { 0, 5, 40 }, chunks[] = { 1, 7, 33 };
	static const int dec_lens[] = { 1600, 17, 1, 256, 300 };
	struct rig r;

	rig_open(&r, 32);
	for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
		const int d = cases[ci].d, H = cases[ci].heads, bs = cases[ci].bs;
		const int maxb = (1600 + bs - 1) / bs, nb = 2 * maxb + 40;
		const struct kernel_kv_cache geo = {
			.layers = 2, .num_blocks = nb, .block_size = bs,
			.kv_heads = cases[ci].kv_heads, .head_dim = d,
		};
		int32_t *pool = malloc(nb * sizeof(int32_t));
		int32_t *tables = malloc((size_t)9 * maxb * sizeof(int32_t));
		int32_t q_start[10], ctx[9], lens[5];
		int T = 0, taken = 0;
		struct pcache pc;
		struct pbuf Q, O, QS, C, B, L;
		float *q;

		for (int i = 0; i < nb; i++)
			pool[i] = i;
		shuffle(&r, pool, nb);
		for (int i = 0; i < 9 * maxb; i++)
			tables[i] = -1;
		for (int s = 0; s < 9; s++) {
			int c = ctxs[s / 3], len = chunks[s % 3];

			q_start[s] = T;
			ctx[s] = c;
			T += len;
			take_blocks(&r, pool, nb, &taken, tables + s * maxb, (c + len + bs - 1) / bs);
		}
		q_start[9] = T;
		pc_open_fp8(&r, &pc, geo);
		q = rig_rand(&r, (size_t)T * H * d);
		Q = pb_f32(&r, q, (size_t)T * H * d);
		O = pb_f32(&r, NULL, (size_t)T * H * d);
		QS = pb_i32(&r, q_start, 10);
		C = pb_i32(&r, ctx, 9);
		B = pb_i32(&r, tables, (size_t)9 * maxb);
		BOTH(rc = kernel_attn_prefill(kb, &(struct kernel_attn_prefill_args){
			.n_seqs = 9, .tokens = T, .heads = H, .layer = 1, .max_q_len = 33,
			.max_kv_len = 73, .scale = 1 / sqrtf((float)d),
			.q = pv(&Q, s, 0, (size_t)H * d), .out = pv(&O, s, 0, (size_t)H * d),
			.q_start = pv(&QS, s, 0, 0), .context = pv(&C, s, 0, 0),
			.block_tables = pv(&B, s, 0, maxb), .cache = &pc.c[s] }, &err));
		compare(&r, "fp8: attn_prefill", &O, r.tol->attn, 2.0, false);   /* |V| <= 2 */
		pb_free(&r, &B);

		/* decode: new tables over the same cache, a prefix shared by 0 and 4 */
		shuffle(&r, pool, nb);
		taken = 0;
		for (int i = 0; i < 5 * maxb; i++)
			tables[i] = -1;
		for (int s = 0; s < 5; s++) {
			int need = (dec_lens[s] + bs - 1) / bs, own = s == 4 ? 10 : 0;

			lens[s] = dec_lens[s];
			memcpy(tables + s * maxb, tables, own * sizeof(int32_t));
			take_blocks(&r, pool, nb, &taken, tables + s * maxb + own, need - own);
		}
		L = pb_i32(&r, lens, 5);
		B = pb_i32(&r, tables, (size_t)5 * maxb);
		pb_free(&r, &O);
		O = pb_f32(&r, NULL, (size_t)5 * H * d);
		BOTH(rc = kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
			.n_seqs = 5, .heads = H, .layer = 0, .max_kv_len = 1600,
			.scale = 1 / sqrtf((float)d), .q = pv(&Q, s, 0, (size_t)H * d),
			.out = pv(&O, s, 0, (size_t)H * d), .kv_len = pv(&L, s, 0, 0),
			.block_tables = pv(&B, s, 0, maxb), .cache = &pc.c[s] }, &err));
		compare(&r, "fp8: attn_decode", &O, r.tol->attn, 2.0, false);
		pc_close(&r, &pc);
		pb_free(&r, &Q);
		pb_free(&r, &O);
		pb_free(&r, &QS);
		pb_free(&r, &C);
		pb_free(&r, &B);
		pb_free(&r, &L);
		free(q);
		free(pool);
		free(tables);
	}
	rig_close(&r);
}
END_TEST

/* Block copies of an fp8 cache move one byte per element: swap out to a
 * host cache, back in elsewhere, and within the device cache; the bytes
 * land where the ids say (block size 4 x 2 heads x 8: 64-byte blocks, and
 * head_dim 5: 40-byte blocks, the element-wise copy path). */
START_TEST(fp8_kv_copy_moves_bytes)
{
	static const int dims[] = { 8, 5 };
	const int32_t out_src[3] = { 7, 2, 9 }, out_dst[3] = { 0, 1, 2 };
	const int32_t in_src[3] = { 0, 1, 2 }, in_dst[3] = { 3, 8, 5 };
	const int32_t mv_src[2] = { 4, 6 }, mv_dst[2] = { 0, 1 };

	for (int di = 0; di < 2; di++) {
		const struct kernel_kv_cache geo = {
			.layers = 3, .num_blocks = 10, .block_size = 4, .kv_heads = 2,
			.head_dim = dims[di], .dtype = KERNEL_DTYPE_FP8_E4M3,
		};
		struct kernel_kv_cache dev = geo, host = geo;
		size_t n = kernel_kv_cache_elems(&geo), bl = 4 * 2 * (size_t)dims[di], ln = n / 3;
		uint8_t *k0 = malloc(n), *v0 = malloc(n), *k = malloc(n), *v = malloc(n);
		uint8_t *wk = malloc(n), *wv = malloc(n);
		struct rig r;
		struct ss_error err = { 0 };
		struct kernel_backend *kb;

		rig_open(&r, 33 + di);
		kb = r.kb[0];
		for (size_t i = 0; i < n; i++) {
			k0[i] = (uint8_t)(next(&r.rng) % 0x7f);   /* any finite code */
			v0[i] = (uint8_t)(0x80 | next(&r.rng) % 0x7f);
		}
		host.num_blocks = 3;
		ck_assert_int_eq(kernel_kv_cache_alloc(kb, &dev, KERNEL_MEM_DEVICE, &err), 0);
		ck_assert_int_eq(kernel_kv_cache_alloc(kb, &host, KERNEL_MEM_HOST, &err), 0);
		ck_assert_int_eq(kernel_buf_upload(kb, dev.k, 0, k0, n, &err), 0);
		ck_assert_int_eq(kernel_buf_upload(kb, dev.v, 0, v0, n, &err), 0);
		OK(kernel_kv_copy(kb, &(struct kernel_kv_copy_args){
			.n = 3, .src_ids = out_src, .dst_ids = out_dst, .src = &dev, .dst = &host },
			&e_));
		OK(kernel_kv_copy(kb, &(struct kernel_kv_copy_args){
			.n = 3, .src_ids = in_src, .dst_ids = in_dst, .src = &host, .dst = &dev },
			&e_));
		OK(kernel_kv_copy(kb, &(struct kernel_kv_copy_args){
			.n = 2, .src_ids = mv_src, .dst_ids = mv_dst, .src = &dev, .dst = &dev }, &e_));
		ck_assert_int_eq(kernel_buf_download(kb, k, dev.k, 0, n, &err), 0);
		ck_assert_int_eq(kernel_buf_download(kb, v, dev.v, 0, n, &err), 0);
		memcpy(wk, k0, n);
		memcpy(wv, v0, n);
		for (size_t l = 0; l < 3; l++) {
			for (int i = 0; i < 3; i++) {
				memcpy(wk + l * ln + in_dst[i] * bl, k0 + l * ln + out_src[i] * bl, bl);
				memcpy(wv + l * ln + in_dst[i] * bl, v0 + l * ln + out_src[i] * bl, bl);
			}
			for (int i = 0; i < 2; i++) {
				memcpy(wk + l * ln + mv_dst[i] * bl, wk + l * ln + mv_src[i] * bl, bl);
				memcpy(wv + l * ln + mv_dst[i] * bl, wv + l * ln + mv_src[i] * bl, bl);
			}
		}
		ck_assert_mem_eq(k, wk, n);
		ck_assert_mem_eq(v, wv, n);
		/* an fp8 cache and one of the backend's dtype do not mix */
		kernel_kv_cache_free(kb, &host);
		host = geo;
		host.dtype = 0;
		ck_assert_int_eq(kernel_kv_cache_alloc(kb, &host, KERNEL_MEM_HOST, &err), 0);
		ck_assert_int_eq(kernel_kv_copy(kb, &(struct kernel_kv_copy_args){
			.n = 1, .src_ids = out_src, .dst_ids = out_dst, .src = &dev, .dst = &host },
			&err), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err.msg, "dtype"));
		kernel_kv_cache_free(kb, &dev);
		kernel_kv_cache_free(kb, &host);
		free(k0);
		free(v0);
		free(k);
		free(v);
		free(wk);
		free(wv);
		rig_close(&r);
	}
}
END_TEST

/* A backend whose ops table does not set kv_fp8 is refused an fp8 cache
 * (-ENOTSUP naming both dtypes) at allocation and by every operator that
 * takes a cache; a dtype that is neither the backend's nor fp8 likewise. */
START_TEST(fp8_kv_refused_without_support)
{
	struct kernel_backend_ops ops = kernel_ref_ops;
	struct kernel_backend no_fp8 = { .ops = &ops };
	struct kernel_kv_cache c = {
		.layers = 1, .num_blocks = 2, .block_size = 4, .kv_heads = 1, .head_dim = 8,
		.dtype = KERNEL_DTYPE_FP8_E4M3,
	};
	struct kernel_kv_cache ok = c;
	struct ss_error err = { 0 };
	int32_t ids[1] = { 0 };
	struct kernel_backend *ref = NULL;
	void *buf = NULL;

	ops.kv_fp8 = false;
	ck_assert_int_eq(kernel_kv_cache_alloc(&no_fp8, &c, KERNEL_MEM_DEVICE, &err), -ENOTSUP);
	ck_assert_ptr_null(c.k);
	ck_assert_ptr_nonnull(strstr(err.msg, "fp8_e4m3"));
	ck_assert_ptr_nonnull(strstr(err.msg, "f32"));
	/* operators: a cache allocated elsewhere, handed to the backend */
	ck_assert_int_eq(kernel_backend_new(&ref, "ref", NULL, &err), 0);
	ck_assert_int_eq(kernel_kv_cache_alloc(ref, &ok, KERNEL_MEM_DEVICE, &err), 0);
	ck_assert_int_eq(kernel_buf_alloc(ref, &buf, 4096, KERNEL_MEM_DEVICE, &err), 0);
	ck_assert_int_eq(kernel_kv_write(&no_fp8, &(struct kernel_kv_write_args){
		.tokens = 1, .layer = 0, .k = { buf, 0, 8 }, .v = { buf, 0, 8 },
		.slots = { buf, 0, 0 }, .cache = &ok }, &err), -ENOTSUP);
	ck_assert_int_eq(kernel_attn_decode(&no_fp8, &(struct kernel_attn_decode_args){
		.n_seqs = 1, .heads = 1, .layer = 0, .max_kv_len = 4, .scale = 1,
		.q = { buf, 0, 8 }, .out = { buf, 64, 8 }, .kv_len = { buf, 0, 0 },
		.block_tables = { buf, 0, 1 }, .cache = &ok }, &err), -ENOTSUP);
	ck_assert_int_eq(kernel_attn_prefill(&no_fp8, &(struct kernel_attn_prefill_args){
		.n_seqs = 1, .tokens = 1, .heads = 1, .layer = 0, .max_q_len = 1,
		.max_kv_len = 4, .scale = 1, .q = { buf, 0, 8 }, .out = { buf, 64, 8 },
		.q_start = { buf, 0, 0 }, .context = { buf, 0, 0 },
		.block_tables = { buf, 0, 1 }, .cache = &ok }, &err), -ENOTSUP);
	ck_assert_int_eq(kernel_kv_copy(&no_fp8, &(struct kernel_kv_copy_args){
		.n = 1, .src_ids = ids, .dst_ids = ids, .src = &ok, .dst = &ok }, &err), -ENOTSUP);
	/* bf16 is not the reference backend's dtype */
	c.dtype = KERNEL_DTYPE_BF16;
	ck_assert_int_eq(kernel_kv_cache_alloc(ref, &c, KERNEL_MEM_DEVICE, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, "bf16"));
	kernel_buf_free(ref, buf);
	kernel_kv_cache_free(ref, &ok);
	kernel_backend_free(ref);
}
END_TEST

/* The synthetic step with an fp8 KV cache: its KV memory is one byte per
 * element, it agrees with the reference backend running the same fp8 model,
 * and it stays near the step with a cache of the backend's own dtype.
 * Bounds: both backends round K and V to E4M3, but a K or V element computed
 * a few ulps apart may land on either side of a rounding boundary and differ
 * by an E4M3 step (2^-3 relative) between them, which the bf16 step bound
 * (6e-2 of max|ref|) covers; against the wider cache, E4M3's own rounding
 * (2^-4 relative to each K/V element) moves the outputs by up to a few
 * percent: 0.25 of max|ref|, an order above what the step measures. */
START_TEST(fp8_kv_step_matches_reference_backend)
{
	struct rig r;
	int32_t pool[NB];
	const int tok[3] = { 11, 1, 4 }, ctx[3] = { 0, 13, 6 };
	struct synth_item items[3];
	struct synth_shape fp8 = tiny;
	float *h[3], *lg[3];
	int32_t *ids[3];
	int taken = 0;

	fp8.kv_dtype = KERNEL_DTYPE_FP8_E4M3;
	rig_open(&r, 34);
	shuffled_pool(34, pool);
	for (int i = 0; i < 3; i++) {
		int need = (ctx[i] + tok[i] + BS - 1) / BS;

		items[i] = (struct synth_item){ .tokens = tok[i], .context = ctx[i],
						.block_table = pool + taken, .n_blocks = need,
						.emit = true };
		taken += need;
	}
	for (int s = 0; s < 3; s++) {
		/* 0: the backend under test, fp8; 1: ref, fp8; 2: under test, its dtype */
		struct synth_model *sm = model(r.kb[s == 1], s == 2 ? &tiny : &fp8, 3);

		if (s < 2)
			ck_assert_uint_eq(synth_model_kv_bytes(sm),
					  2ul * tiny.layers * NB * BS * tiny.kv_heads * tiny.head_dim);
		ck_assert_int_eq(synth_model_kv(sm)->dtype, s < 2 ? KERNEL_DTYPE_FP8_E4M3 : 0);
		step(sm, items, 3);
		outputs(sm, &h[s], &lg[s], &ids[s]);
		synth_model_free(sm);
	}
	check_close("fp8 step vs ref: hidden", h[0], h[1], 3 * tiny.hidden, 6e-2,
		    max_abs(h[1], 3 * tiny.hidden), false);
	check_close("fp8 step vs ref: logits", lg[0], lg[1], 3 * tiny.vocab, 6e-2,
		    max_abs(lg[1], 3 * tiny.vocab), false);
	check_close("fp8 step vs wide KV: logits", lg[0], lg[2], 3 * tiny.vocab, 0.25,
		    max_abs(lg[2], 3 * tiny.vocab), false);
	for (int s = 0; s < 3; s++) {
		free(h[s]);
		free(lg[s]);
		free(ids[s]);
	}
	rig_close(&r);
}
END_TEST

static Suite *make_suite(void)
{
	Suite *s = suite_create("kernels");
	TCase *ops = tcase_create("operators");
	TCase *kv = tcase_create("paged-kv");
	TCase *st = tcase_create("synthetic-step");
	TCase *fp8 = tcase_create("fp8-kv");

	tcase_add_test(ops, registry_finds_backends_by_name);
	tcase_add_test(ops, gemm_matches_reference);
	tcase_add_test(ops, lora_sgmv_matches_host_reference);
	tcase_add_test(ops, rmsnorm_matches_reference);
	tcase_add_test(ops, rope_matches_reference_in_fused_qkv_rows);
	tcase_add_test(ops, fill_uniform_draws_the_documented_values);
	tcase_add_test(ops, activations_match_reference);
	tcase_add_test(ops, gather_and_argmax_are_exact);
	tcase_add_test(ops, bad_arguments_are_einval);
	tcase_add_test(ops, bad_values_in_buffers_are_einval_by_the_next_wait);
	tcase_add_test(ops, prefill_faults_at_head_dim_16);
	tcase_add_test(ops, timer_measures_work);
	tcase_add_test(ops, threads_do_not_change_results);
	suite_add_tcase(s, ops);
	tcase_add_test(kv, kv_write_round_trips_through_shuffled_tables);
	tcase_add_test(kv, rope_kv_write_equals_rope_then_kv_write);
	tcase_add_test(kv, prefill_attention_matches_reference);
	tcase_add_test(kv, decode_attention_matches_reference);
	tcase_add_test(kv, decode_attention_splits_long_contexts);
	tcase_add_test(kv, prefill_of_one_token_equals_decode);
	tcase_add_test(kv, kv_copy_moves_whole_blocks);
	suite_add_tcase(s, kv);
	tcase_add_test(st, shape_scaling_keeps_head_dim_and_gqa);
	tcase_add_test(st, mixed_step_is_deterministic);
	tcase_add_test(st, mixed_step_rows_equal_solo_rows);
	tcase_add_test(st, chunked_prefill_equals_one_chunk);
	tcase_add_test(st, step_weights_are_the_host_draw);
	tcase_add_test(st, step_matches_reference_backend);
	tcase_add_test(st, step_adapters_apply_to_their_items_only);
	tcase_add_test(st, step_rejects_bad_items_and_reuses_workspace);
	suite_add_tcase(s, st);
	tcase_add_test(fp8, fp8_e4m3_conversion_matches_hand_values);
	tcase_add_test(fp8, fp8_kv_write_stores_e4m3_bits);
	tcase_add_test(fp8, fp8_kv_attention_matches_reference);
	tcase_add_test(fp8, fp8_kv_copy_moves_bytes);
	tcase_add_test(fp8, fp8_kv_refused_without_support);
	tcase_add_test(fp8, fp8_kv_step_matches_reference_backend);
	tcase_set_timeout(fp8, 60);
	suite_add_tcase(s, fp8);
	return s;
}

/* `test-kernels [cpu|cuda]`: the suite on that backend; exit 77 (skipped)
 * when it is not built into this binary or finds no device. */
int main(int argc, char **argv)
{
	struct kernel_backend *kb = NULL;
	struct ss_error err = { 0 };
	SRunner *sr;
	int failed, rc;

	if (argc > 1)
		backend_name = argv[1];
	rc = kernel_backend_new(&kb, backend_name, &(struct kernel_backend_config){
		.module_dir = getenv("SERVESIM_MODULE_DIR") }, &err);
	/* No GPU or no CUDA module is a skip; servesim-cpu.so is always built,
	 * so its absence is a failure. */
	if (rc == -ENODEV && strcmp(backend_name, "cpu") != 0) {
		fprintf(stderr, "%s: skipped\n", err.msg);
		return 77;
	}
	if (rc) {
		fprintf(stderr, "%s\n", err.msg);
		return EXIT_FAILURE;
	}
	kernel_backend_free(kb);
	sr = srunner_create(make_suite());
	/* CUDA does not survive fork() once initialized (the probe above did):
	 * a forked test's first CUDA call would fail with "initialization
	 * error".  So the CUDA suite runs its tests in this process. */
	if (strcmp(backend_name, "cuda") == 0)
		srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
