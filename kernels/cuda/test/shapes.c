/* servesim — the CUDA backend against the reference backend at shapes the
 * conformance suite does not reach: head_dim 128 and 256 (the kernels'
 * larger template instances), odd and non-multiple-of-8 head sizes (the
 * scalar load paths), unaligned views, prefill chunks spanning several row
 * and key tiles, GQA ratios 4 and 12, block size 16 as vLLM uses it, and
 * a 128256-column argmax.  Run by kernels/cuda/test/emu-run.sh through the CPU
 * emulation, or against a real GPU by linking with the CUDA build.
 * Tolerances as tests/test-kernels.c's bf16 ones.  Exit 0 when all agree. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static struct kernel_backend *kb[2];   /* [0] cuda, [1] ref */
static uint64_t rng = 42;
static int failures;

static float bf16_round(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	u += 0x7fffu + ((u >> 16) & 1);
	u &= 0xffff0000u;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static float urand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return bf16_round((float)((double)(rng >> 40) / 16777216.0 * 2 - 1));
}

static void *buf(int s, const float *x, size_t n)
{
	struct ss_error err = { 0 };
	void *b;

	if (kernel_buf_alloc(kb[s], &b, (n ? n : 1) * kernel_backend_elem_size(kb[s]),
			     KERNEL_MEM_DEVICE, &err) ||
	    (x && kernel_buf_upload_f32(kb[s], b, 0, x, n, &err))) {
		fprintf(stderr, "buffer: %s\n", err.msg);
		exit(2);
	}
	return b;
}

static void *ibuf(int s, const int32_t *x, size_t n)
{
	struct ss_error err = { 0 };
	void *b;

	if (kernel_buf_alloc(kb[s], &b, (n ? n : 1) * 4, KERNEL_MEM_DEVICE, &err) ||
	    kernel_buf_upload(kb[s], b, 0, x, n * 4, &err)) {
		fprintf(stderr, "buffer: %s\n", err.msg);
		exit(2);
	}
	return b;
}

static float *fetch(int s, void *b, size_t n)
{
	struct ss_error err = { 0 };
	float *x = malloc(n * sizeof(*x));

	if (kernel_buf_download_f32(kb[s], x, b, 0, n, &err)) {
		fprintf(stderr, "download: %s\n", err.msg);
		exit(2);
	}
	return x;
}

static void ok(int rc, const struct ss_error *err, const char *what)
{
	if (rc) {
		fprintf(stderr, "%s: %s\n", what, err->msg);
		exit(2);
	}
}

/* |a - b| <= tol x scale elementwise over the first n of each row of
 * width w (ld apart). */
static void check(const char *what, void *b0, void *b1, size_t rows, size_t w, size_t ld,
		  double tol, double scale)
{
	float *a = fetch(0, b0, rows * ld), *b = fetch(1, b1, rows * ld);
	double worst = 0;

	for (size_t r = 0; r < rows; r++)
		for (size_t c = 0; c < w; c++) {
			double diff = fabs((double)a[r * ld + c] - b[r * ld + c]);
			double d = tol > 0 ? diff / (tol * scale) : diff > 0 ? INFINITY : 0;

			if (!(d <= worst))
				worst = d;
		}
	printf("%-44s worst error %.3g of the tolerance%s\n", what, worst,
	       worst <= 1 ? "" : "  FAIL");
	failures += !(worst <= 1);
	free(a);
	free(b);
}

/* Prefill of chunks after contexts, then decode of every sequence at its
 * full length, for one geometry; q rows at offset qoff inside rows of ldq. */
static void attention(int H, int KV, int d, int bs, int n, const int *ctx, const int *len,
		      size_t qoff, size_t ldq_pad)
{
	const size_t w = (size_t)H * d, ldq = w + qoff + ldq_pad;
	int T = 0, maxq = 0, maxkv = 0, nb = 0, maxb = 0;
	int32_t *qs = calloc(n + 1, 4), *cx = calloc(n, 4), *kl = calloc(n, 4), *bt;
	struct kernel_kv_cache geo = { .layers = 2, .block_size = bs, .kv_heads = KV, .head_dim = d };
	struct kernel_kv_cache c[2];
	float *q, *k, *v;
	size_t ne;
	char what[128];

	for (int s = 0; s < n; s++) {
		int b = (ctx[s] + len[s] + bs - 1) / bs;

		qs[s] = T;
		cx[s] = ctx[s];
		kl[s] = ctx[s] + len[s];
		T += len[s];
		nb += b;
		maxb = b > maxb ? b : maxb;
		maxq = len[s] > maxq ? len[s] : maxq;
		maxkv = kl[s] > maxkv ? kl[s] : maxkv;
	}
	qs[n] = T;
	geo.num_blocks = nb + 5;
	bt = calloc((size_t)n * maxb, 4);
	/* blocks handed out in a scrambled order: id = (i * 7 + 3) % num_blocks */
	for (int s = 0, i = 0; s < n; s++)
		for (int b = 0; b < (kl[s] + bs - 1) / bs; b++, i++)
			bt[s * maxb + b] = (i * 7 + 3) % geo.num_blocks;
	ne = kernel_kv_cache_elems(&geo);
	k = malloc(ne * 4);
	v = malloc(ne * 4);
	for (size_t i = 0; i < ne; i++) {
		k[i] = urand();
		v[i] = urand();
	}
	q = malloc((size_t)T * ldq * 4);
	for (size_t i = 0; i < (size_t)T * ldq; i++)
		q[i] = urand();
	{
		void *Q[2], *O[2], *D[2], *QS[2], *C[2], *L[2], *B[2];

		for (int s = 0; s < 2; s++) {
			struct ss_error err = { 0 };

			c[s] = geo;
			ok(kernel_kv_cache_alloc(kb[s], &c[s], KERNEL_MEM_DEVICE, &err), &err, "cache");
			ok(kernel_buf_upload_f32(kb[s], c[s].k, 0, k, ne, &err), &err, "k");
			ok(kernel_buf_upload_f32(kb[s], c[s].v, 0, v, ne, &err), &err, "v");
			Q[s] = buf(s, q, (size_t)T * ldq);
			O[s] = buf(s, NULL, (size_t)T * w);
			D[s] = buf(s, NULL, (size_t)n * w);
			QS[s] = ibuf(s, qs, n + 1);
			C[s] = ibuf(s, cx, n);
			L[s] = ibuf(s, kl, n);
			B[s] = ibuf(s, bt, (size_t)n * maxb);
			ok(kernel_attn_prefill(kb[s], &(struct kernel_attn_prefill_args){
				.n_seqs = n, .tokens = T, .heads = H, .layer = 1, .max_q_len = maxq,
				.max_kv_len = maxkv, .scale = 1 / sqrtf((float)d),
				.q = { Q[s], qoff, ldq }, .out = { O[s], 0, w }, .q_start = { QS[s], 0, 0 },
				.context = { C[s], 0, 0 }, .block_tables = { B[s], 0, (size_t)maxb },
				.cache = &c[s] }, &err), &err, "attn_prefill");
			/* decode: each sequence's first query row, over its whole length */
			ok(kernel_attn_decode(kb[s], &(struct kernel_attn_decode_args){
				.n_seqs = n, .heads = H, .layer = 1, .max_kv_len = maxkv,
				.scale = 1 / sqrtf((float)d), .q = { Q[s], qoff, ldq },
				.out = { D[s], 0, w }, .kv_len = { L[s], 0, 0 },
				.block_tables = { B[s], 0, (size_t)maxb }, .cache = &c[s] }, &err),
			   &err, "attn_decode");
		}
		snprintf(what, sizeof(what), "prefill H%d KV%d d%d bs%d q+%zu", H, KV, d, bs, qoff);
		check(what, O[0], O[1], (size_t)T, w, w, 0x1p-6, 1.0);
		snprintf(what, sizeof(what), "decode  H%d KV%d d%d bs%d q+%zu", H, KV, d, bs, qoff);
		check(what, D[0], D[1], (size_t)n, w, w, 0x1p-6, 1.0);
		for (int s = 0; s < 2; s++) {
			kernel_buf_free(kb[s], Q[s]);
			kernel_buf_free(kb[s], O[s]);
			kernel_buf_free(kb[s], D[s]);
			kernel_buf_free(kb[s], QS[s]);
			kernel_buf_free(kb[s], C[s]);
			kernel_buf_free(kb[s], L[s]);
			kernel_buf_free(kb[s], B[s]);
			kernel_kv_cache_free(kb[s], &c[s]);
		}
	}
	free(q);
	free(k);
	free(v);
	free(qs);
	free(cx);
	free(kl);
	free(bt);
}

static void rows_ops(int rows, int cols, size_t off)
{
	const size_t ld = cols + off + 3;
	float *x = malloc((size_t)rows * ld * 4), *wt = malloc((size_t)cols * 4);
	int32_t *idx = malloc((size_t)rows * 4);
	void *X[2], *W[2], *Y[2], *Z[2], *I[2], *A[2];
	char what[96];

	for (size_t i = 0; i < (size_t)rows * ld; i++)
		x[i] = urand() * 4;
	for (int i = 0; i < cols; i++)
		wt[i] = urand();
	for (int r = 0; r < rows; r++)
		idx[r] = (r * 5 + 1) % rows;
	x[(rows - 1) * ld + off + cols - 1] = 9;   /* the last row's maximum at its last column */
	for (int s = 0; s < 2; s++) {
		struct ss_error err = { 0 };

		X[s] = buf(s, x, (size_t)rows * ld);
		W[s] = buf(s, wt, cols);
		Y[s] = buf(s, NULL, (size_t)rows * ld);
		Z[s] = buf(s, NULL, (size_t)rows * ld);
		I[s] = ibuf(s, idx, rows);
		A[s] = ibuf(s, idx, rows);
		ok(kernel_rmsnorm(kb[s], &(struct kernel_rmsnorm_args){ .rows = rows, .cols = cols,
			.eps = 1e-5f, .x = { X[s], off, ld }, .weight = { W[s], 0, 0 },
			.out = { Y[s], 0, ld } }, &err), &err, "rmsnorm");
	}
	snprintf(what, sizeof(what), "rmsnorm %dx%d +%zu", rows, cols, off);
	check(what, Y[0], Y[1], rows, cols, ld, 0x1p-7, 2.0);
	for (int s = 0; s < 2; s++) {
		struct ss_error err = { 0 };

		ok(kernel_gather(kb[s], &(struct kernel_gather_args){ .rows = rows, .cols = cols,
			.src_rows = rows, .src = { X[s], off, ld }, .idx = { I[s], 0, 0 },
			.out = { Z[s], 1, ld } }, &err), &err, "gather");
		ok(kernel_argmax(kb[s], &(struct kernel_argmax_args){ .rows = rows, .cols = cols,
			.x = { X[s], off, ld }, .out = { A[s], 0, 0 } }, &err), &err, "argmax");
	}
	snprintf(what, sizeof(what), "gather %dx%d +%zu", rows, cols, off);
	check(what, Z[0], Z[1], rows, ld, ld, 0, 1.0);
	{
		int32_t got[2][64];
		struct ss_error err = { 0 };
		int n = rows < 64 ? rows : 64, bad = 0;

		for (int s = 0; s < 2; s++)
			ok(kernel_buf_download(kb[s], got[s], A[s], 0, (size_t)n * 4, &err), &err, "argmax");
		for (int r = 0; r < n; r++)
			bad |= got[0][r] != got[1][r];
		if (n == rows && got[0][rows - 1] != cols - 1)
			bad = 1;
		snprintf(what, sizeof(what), "argmax %dx%d +%zu", rows, cols, off);
		printf("%-44s %s\n", what, bad ? "differs  FAIL" : "same");
		failures += bad;
	}
	for (int s = 0; s < 2; s++) {
		kernel_buf_free(kb[s], X[s]);
		kernel_buf_free(kb[s], W[s]);
		kernel_buf_free(kb[s], Y[s]);
		kernel_buf_free(kb[s], Z[s]);
		kernel_buf_free(kb[s], I[s]);
		kernel_buf_free(kb[s], A[s]);
	}
	free(x);
	free(wt);
	free(idx);
}

int main(void)
{
	struct ss_error err = { 0 };
	/* the module where meson builds it (SERVESIM_MODULE_DIR), else installed */
	struct kernel_backend_config cfg = { .module_dir = getenv("SERVESIM_MODULE_DIR") };
	int rc = kernel_backend_new(&kb[0], "cuda", &cfg, &err);

	if (rc == -ENODEV) {
		fprintf(stderr, "%s: skipped\n", err.msg);
		return 77;
	}
	ok(rc, &err, "cuda");
	ok(kernel_backend_new(&kb[1], "ref", NULL, &err), &err, "ref");
	{
		/* Llama-3-like: 32 heads on 8 KV heads of 128, blocks of 16; a chunk
		 * of 150 after 70 cached (several row and key tiles), a prompt of
		 * 90, a chunk of 1, one of 17 after 200 */
		const int ctx[4] = { 70, 0, 31, 200 }, len[4] = { 150, 90, 1, 17 };

		attention(32, 8, 128, 16, 4, ctx, len, 0, 0);
		attention(12, 1, 128, 16, 4, ctx, len, 8, 8);      /* GQA 12, Q at an offset */
	}
	{
		const int ctx[3] = { 5, 0, 66 }, len[3] = { 70, 9, 3 };

		attention(4, 2, 256, 16, 3, ctx, len, 0, 0);       /* the 256 instance */
		attention(6, 3, 6, 5, 3, ctx, len, 2, 1);          /* d % 8 != 0: scalar paths */
		attention(4, 2, 5, 7, 3, ctx, len, 1, 0);          /* odd d */
		attention(8, 8, 96, 32, 3, ctx, len, 0, 0);        /* MHA, d 96 */
	}
	rows_ops(37, 4096, 0);
	rows_ops(5, 1001, 3);
	rows_ops(3, 128256, 0);
	kernel_backend_free(kb[0]);
	kernel_backend_free(kb[1]);
	printf("%s\n", failures ? "FAILED" : "all agree");
	return failures ? 1 : 0;
}
