/* servesim — the CUDA backend against the reference backend at shapes the
 * conformance suite does not reach: head_dim 128 and 256 (the kernels'
 * larger template instances), odd and non-multiple-of-8 head sizes (the
 * scalar load paths), unaligned views, prefill chunks spanning several row
 * and key tiles, GQA ratios 4 and 12, block size 16 as vLLM uses it, and
 * a 128256-column argmax; block tables with free blocks between the used
 * ones, poisoned padding and shared prefix blocks.  With --full, the sizes
 * engines run (full_sizes(): contexts to 32K, batch 256, head_dim 64/128/256,
 * GQA 1/4/8, a KV cache over 2^31 elements), as scripts/gpu-check.sh asks.
 * Cases marked fp8 use an fp8 E4M3 KV cache (the same bytes on both sides).
 * --backend NAME checks another backend (cpu) the same way.  Run by
 * kernels/cuda/test/emu-run.sh through the CPU emulation, and built by meson
 * as tests/test-kernel-shapes for a real GPU (the bundle carries it).
 * Tolerances as tests/test-kernels.c's bf16 ones.  Exit 0 when all agree. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static struct kernel_backend *kb[2];   /* [0] cuda, [1] ref */
static uint64_t rng = 42;
static int failures, checks;

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
	checks++;
	free(a);
	free(b);
}

/* Geometry flags of attention(). */
enum {
	SHARE = 1,   /* prefix reuse: each sequence's full context blocks are sequence 0's */
	BIG = 2,     /* one layer whose used blocks lie past element 2^31 of the cache */
	FP8 = 4,     /* an fp8 E4M3 cache (docs/kernels.md, "fp8 KV cache") */
	SHARP = 8,   /* Q x 8: peaked softmax, so one key wrongly let in or out shows */
};

/* n K or V values at element off of a cache buffer on side x: converted by
 * the backend for a cache of its dtype, or rounded to E4M3 here and
 * uploaded as bytes for an fp8 cache (elements are bytes), so both sides
 * hold the same bits. */
static void put_kv(int x, void *dst, size_t off, const float *vals, size_t n, bool fp8)
{
	struct ss_error err = { 0 };
	uint8_t *b;

	if (!fp8) {
		ok(kernel_buf_upload_f32(kb[x], dst, off, vals, n, &err), &err, "kv");
		return;
	}
	b = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++)
		b[i] = kernel_fp8_e4m3_from_f32(vals[i]);
	ok(kernel_buf_upload(kb[x], dst, off, b, n, &err), &err, "kv");
	free(b);
}

/* Prefill of chunks after contexts, then decode of every sequence at its
 * full length, for one geometry; q rows at offset qoff inside rows of ldq.
 * Block tables as an engine's: ids scattered over a cache about twice the
 * size needed (free blocks between used ones), rows padded past each
 * sequence's last block with a poison block (K 0, V 1000: any read of it
 * shows in the output), and with SHARE blocks shared between sequences. */
static void attention(int H, int KV, int d, int bs, int n, const int *ctx, const int *len,
		      size_t qoff, size_t ldq_pad, int flags)
{
	const size_t w = (size_t)H * d, ldq = w + qoff + ldq_pad, be = (size_t)bs * KV * d;
	const int layer = flags & BIG ? 0 : 1;
	int T = 0, maxq = 0, maxkv = 0, nb = 0, maxb = 0, M, base, poison, ld;
	int32_t *qs = calloc(n + 1, 4), *cx = calloc(n, 4), *kl = calloc(n, 4), *bt;
	struct kernel_kv_cache geo = { .layers = flags & BIG ? 1 : 2, .block_size = bs,
				       .kv_heads = KV, .head_dim = d,
				       .dtype = flags & FP8 ? KERNEL_DTYPE_FP8_E4M3 : 0 };
	struct kernel_kv_cache c[2];
	float *q, *k = malloc(be * 4), *v = malloc(be * 4);
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
	/* ids base + (i * 7 + 3) % M over M ~ 2 nb blocks (M not a multiple of
	 * 7, so distinct), past element 2^31 with BIG; the poison block after */
	for (M = 2 * nb + 1; M % 7 == 0; M++)
		;
	base = flags & BIG ? (int)(((size_t)1 << 31) / be) + 1 : 0;
	poison = base + M;
	geo.num_blocks = poison + 1;
	ld = maxb + 2;
	bt = malloc((size_t)n * ld * 4);
	for (int s = 0, i = 0; s < n; s++) {
		int b = 0, sh = flags & SHARE && s > 0 ? ctx[s] / bs : 0;

		if (sh > (kl[0] + bs - 1) / bs)
			sh = (kl[0] + bs - 1) / bs;
		for (; b < sh; b++)
			bt[s * ld + b] = bt[b];
		for (; b < (kl[s] + bs - 1) / bs; b++, i++)
			bt[s * ld + b] = base + (i * 7 + 3) % M;
		for (; b < ld; b++)
			bt[s * ld + b] = poison;
	}
	q = malloc((size_t)T * ldq * 4);
	for (size_t i = 0; i < (size_t)T * ldq; i++)
		q[i] = urand() * (flags & SHARP ? 8 : 1);   /* exact in bf16 */
	for (int s = 0; s < 2; s++) {
		struct ss_error err = { 0 };

		c[s] = geo;
		ok(kernel_kv_cache_alloc(kb[s], &c[s], KERNEL_MEM_DEVICE, &err), &err, "cache");
	}
	/* random K and V in every used block (the same in both caches), the
	 * poison in its own; the rest stays as allocated (zeros) */
	for (int s = 0; s < n; s++)
		for (int b = 0; b < ld; b++) {
			int id = bt[s * ld + b];
			size_t off = ((size_t)layer * geo.num_blocks + id) * be;

			if (id == poison || (flags & SHARE && s > 0 && b < ld && id == bt[b]))
				continue;
			for (size_t i = 0; i < be; i++) {
				k[i] = urand();
				v[i] = urand();
			}
			for (int x = 0; x < 2; x++) {
				put_kv(x, c[x].k, off, k, be, flags & FP8);
				put_kv(x, c[x].v, off, v, be, flags & FP8);
			}
		}
	for (size_t i = 0; i < be; i++) {
		k[i] = 0;
		v[i] = 1000;
	}
	for (int x = 0; x < 2; x++) {   /* (1000 saturates to 448 in fp8: still shows) */
		size_t off = ((size_t)layer * geo.num_blocks + poison) * be;

		put_kv(x, c[x].k, off, k, be, flags & FP8);
		put_kv(x, c[x].v, off, v, be, flags & FP8);
	}
	{
		void *Q[2], *O[2], *D[2], *QS[2], *C[2], *L[2], *B[2];

		for (int s = 0; s < 2; s++) {
			struct ss_error err = { 0 };

			Q[s] = buf(s, q, (size_t)T * ldq);
			O[s] = buf(s, NULL, (size_t)T * w);
			D[s] = buf(s, NULL, (size_t)n * w);
			QS[s] = ibuf(s, qs, n + 1);
			C[s] = ibuf(s, cx, n);
			L[s] = ibuf(s, kl, n);
			B[s] = ibuf(s, bt, (size_t)n * ld);
			ok(kernel_attn_prefill(kb[s], &(struct kernel_attn_prefill_args){
				.n_seqs = n, .tokens = T, .heads = H, .layer = layer, .max_q_len = maxq,
				.max_kv_len = maxkv, .scale = 1 / sqrtf((float)d),
				.q = { Q[s], qoff, ldq }, .out = { O[s], 0, w }, .q_start = { QS[s], 0, 0 },
				.context = { C[s], 0, 0 }, .block_tables = { B[s], 0, (size_t)ld },
				.cache = &c[s] }, &err), &err, "attn_prefill");
			/* decode: each sequence's first query row, over its whole length */
			ok(kernel_attn_decode(kb[s], &(struct kernel_attn_decode_args){
				.n_seqs = n, .heads = H, .layer = layer, .max_kv_len = maxkv,
				.scale = 1 / sqrtf((float)d), .q = { Q[s], qoff, ldq },
				.out = { D[s], 0, w }, .kv_len = { L[s], 0, 0 },
				.block_tables = { B[s], 0, (size_t)ld }, .cache = &c[s] }, &err),
			   &err, "attn_decode");
		}
		snprintf(what, sizeof(what), "prefill H%d KV%d d%d bs%d n%d kv%d q+%zu%s%s%s%s", H,
			 KV, d, bs, n, maxkv, qoff, flags & SHARE ? " shared" : "",
			 flags & BIG ? " >2^31" : "", flags & FP8 ? " fp8" : "",
			 flags & SHARP ? " sharp" : "");
		check(what, O[0], O[1], (size_t)T, w, w, 0x1p-6, 1.0);
		memcpy(what, "decode ", 7);
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
		checks++;
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

/* Sequence lengths for n sequences: contexts spread over 0..maxctx by a
 * fixed stride, chunks of len (len 1: decode-like rows). */
static void spread(int n, int maxctx, int len, int *ctx, int *lens)
{
	for (int s = 0; s < n; s++) {
		ctx[s] = (int)((long)s * 7919 % (maxctx + 1));
		lens[s] = len;
	}
}

/* At the sizes engines run (--full; seconds on a GPU, the reference's
 * minutes of CPU kept under a minute by few heads where contexts are long):
 * batch 256 at head_dim 128 and GQA 4 with shared prefixes, a 32K context
 * at GQA 8, head_dim 64 without GQA, head_dim 256 at GQA 8, a KV cache of
 * over 2^31 elements. */
static void full_sizes(void)
{
	static int ctx[256], len[256];

	spread(256, 512, 1, ctx, len);
	attention(32, 8, 128, 16, 256, ctx, len, 0, 0, SHARE);
	{
		const int lc[2] = { 32752, 2000 }, ll[2] = { 16, 100 };

		attention(8, 1, 128, 16, 2, lc, ll, 0, 0, 0);
	}
	spread(64, 2048, 4, ctx, len);
	attention(16, 16, 64, 16, 64, ctx, len, 0, 0, SHARE);
	spread(4, 4096, 32, ctx, len);
	attention(16, 2, 256, 16, 4, ctx, len, 0, 0, 0);
	spread(8, 2048, 32, ctx, len);
	attention(8, 8, 128, 16, 8, ctx, len, 0, 0, BIG | SHARE);
	/* fp8 caches: the 32K context, and over 2^31 elements (bytes) */
	{
		const int lc[2] = { 32752, 2000 }, ll[2] = { 16, 100 };

		attention(8, 1, 128, 16, 2, lc, ll, 0, 0, FP8);
	}
	attention(8, 8, 128, 16, 8, ctx, len, 0, 0, BIG | SHARE | FP8);
}

/* `test-kernel-shapes [--backend NAME] [--full]`: NAME (default cuda)
 * against the reference; --full adds full_sizes().  Exit 77 where the
 * backend finds no device, 1 on any disagreement, 2 on a usage or
 * backend error. */
int main(int argc, char **argv)
{
	struct ss_error err = { 0 };
	const char *name = "cuda";
	bool full = false;
	/* the module where meson builds it (SERVESIM_MODULE_DIR), else installed */
	struct kernel_backend_config cfg = { .module_dir = getenv("SERVESIM_MODULE_DIR") };
	char dev[256];
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--full")) {
			full = true;
		} else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
			name = argv[++i];
		} else {
			fprintf(stderr, "usage: test-kernel-shapes [--backend NAME] [--full]\n");
			return 2;
		}
	}
	rc = kernel_backend_new(&kb[0], name, &cfg, &err);
	if (rc == -ENODEV) {
		fprintf(stderr, "%s: skipped\n", err.msg);
		return 77;
	}
	ok(rc, &err, name);
	ok(kernel_backend_new(&kb[1], "ref", NULL, &err), &err, "ref");
	kernel_backend_device_name(kb[0], dev, sizeof(dev));
	printf("device: %s\n", dev);
	if (kernel_backend_pci_bus_id(kb[0], dev, sizeof(dev)))
		printf("pci bus id: %s\n", dev);   /* what NVML meters (calibrate/meter.c) */
	{
		/* Llama-3-like: 32 heads on 8 KV heads of 128, blocks of 16; a chunk
		 * of 150 after 70 cached (several row and key tiles), a prompt of
		 * 90, a chunk of 1, one of 17 after 200 */
		const int ctx[4] = { 70, 0, 31, 200 }, len[4] = { 150, 90, 1, 17 };

		attention(32, 8, 128, 16, 4, ctx, len, 0, 0, 0);
		attention(32, 8, 128, 16, 4, ctx, len, 0, 0, SHARE);
		attention(12, 1, 128, 16, 4, ctx, len, 8, 8, 0);   /* GQA 12, Q at an offset */
		attention(16, 2, 64, 16, 4, ctx, len, 0, 0, 0);    /* GQA 8, d 64 */
		attention(4, 4, 64, 16, 4, ctx, len, 0, 0, SHARE); /* MHA, d 64 */
		attention(32, 8, 128, 16, 4, ctx, len, 0, 0, SHARE | FP8);
	}
	{
		const int ctx[3] = { 5, 0, 66 }, len[3] = { 70, 9, 3 };

		attention(4, 2, 256, 16, 3, ctx, len, 0, 0, 0);    /* the 256 instance */
		attention(6, 3, 6, 5, 3, ctx, len, 2, 1, 0);       /* d % 8 != 0: scalar paths */
		attention(4, 2, 5, 7, 3, ctx, len, 1, 0, 0);       /* odd d */
		attention(8, 8, 96, 32, 3, ctx, len, 0, 0, 0);     /* MHA, d 96 */
		attention(4, 2, 256, 16, 3, ctx, len, 0, 0, FP8);
		attention(6, 3, 6, 5, 3, ctx, len, 2, 1, FP8);     /* fp8 element loads */
		attention(8, 2, 24, 16, 3, ctx, len, 0, 0, FP8);   /* d % 16: K element loads */
		/* what the tensor-core prefill leaves to prefill_kernel's 128 and
		 * 256 instances: d % 16 != 0, a Q view unaligned for 16-byte copies */
		attention(8, 2, 64, 16, 3, ctx, len, 3, 0, 0);     /* d 64, Q unaligned */
		attention(4, 2, 120, 16, 3, ctx, len, 0, 0, 0);    /* d 120 */
		attention(4, 2, 256, 16, 3, ctx, len, 4, 0, 0);    /* d 256, Q unaligned */
	}
	{
		/* The tensor-core prefill's tiles (64 query rows, 64 keys): contexts
		 * and chunks on, just off and across tile boundaries, so the causal
		 * diagonal falls at many offsets of a key tile and whole tiles lie
		 * below it (contexts 30 and 62 put a warp's first row on key 62 of
		 * a tile: masking that starts one key late lets key 63 in); block
		 * sizes of 1 (a block per key), 16, and 128 and 96 (larger than a
		 * key tile, not dividing it); d 32, 160 (instances larger than d). */
		const int ctx[4] = { 64, 30, 62, 129 }, len[4] = { 65, 128, 1, 62 };
		const int ctx2[2] = { 1, 62 }, len2[2] = { 127, 3 };

		attention(4, 4, 64, 1, 4, ctx, len, 0, 0, SHARP);      /* MHA, a block per key */
		attention(8, 2, 128, 128, 4, ctx, len, 0, 0, SHARP);   /* GQA 4, blocks of 128 */
		attention(8, 1, 32, 96, 2, ctx2, len2, 0, 0, SHARP);   /* GQA 8, blocks of 96 */
		attention(2, 2, 256, 16, 2, ctx2, len2, 0, 0, SHARE | SHARP);
		attention(2, 1, 160, 16, 2, ctx2, len2, 0, 0, SHARP);
	}
	rows_ops(37, 4096, 0);
	rows_ops(5, 1001, 3);
	rows_ops(3, 128256, 0);
	if (full)
		full_sizes();
	kernel_backend_free(kb[0]);
	kernel_backend_free(kb[1]);
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
