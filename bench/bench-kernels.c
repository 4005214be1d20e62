/* servesim kernel benchmark (measured, never pass/fail):
 *
 *   (a) GEMM GFLOP/s of a backend (y = x W^T, fp32 on the CPU) at the
 *       scaled model's projection shapes and a few square ones;
 *   (b) prefill and decode attention on their own, same shapes;
 *   (c) the synthetic transformer step of Llama-3.1-8B scaled for the CPU
 *       (widths / 8, 4 layers: docs/kernels.md) at a few batch mixes:
 *       decodes alone, a prefill chunk alone, and chunked-prefill mixes.
 *
 *   bench-kernels [THREADS [BACKEND]]   (default: 1 cpu)
 *
 * Each figure is the median of REPEATS runs after WARMUP runs, timed with
 * the backend's timer (CLOCK_MONOTONIC on the CPU).  The bench waits 0.2 s
 * after creating the backend: Debian's OpenBLAS (pthreads build) starts
 * worker threads when it is loaded, which is when kernel_backend_new loads
 * the module servesim-cpu.so, and they busy-wait about 0.1 s before
 * sleeping, taking a core from the first measurements (the CPU backend
 * never wakes them: it runs OpenBLAS single-threaded inside its own OpenMP
 * threads).  Modules are looked up in $SERVESIM_MODULE_DIR, else in the
 * build tree this bench was built in, else where they are installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "step.h"

#define WARMUP 2
#define REPEATS 7
#define BLOCK 16

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int64_t median(int64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_i64);
	return v[n / 2];
}

static int bench_gemm(struct kernel_backend *kb, int m, int n, int k, struct ss_error *err)
{
	size_t es = kernel_backend_elem_size(kb);
	void *x = NULL, *w = NULL, *y = NULL;
	int64_t t[REPEATS];
	int rc;

	rc = kernel_buf_alloc(kb, &x, (size_t)m * k * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(kb, &w, (size_t)n * k * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(kb, &y, (size_t)m * n * es, KERNEL_MEM_DEVICE, err);
	for (int r = 0; r < WARMUP + REPEATS && !rc; r++) {
		struct kernel_timer tm;
		int64_t ns = 0;

		rc = kernel_timer_begin(kb, &tm, err);
		if (!rc)
			rc = kernel_gemm(kb, &(struct kernel_gemm_args){
				.m = m, .n = n, .k = k, .x = { x, 0, (size_t)k }, .w = { w, 0, (size_t)k },
				.y = { y, 0, (size_t)n } }, err);
		if (!rc)
			rc = kernel_timer_end(kb, &tm, &ns, err);
		if (r >= WARMUP)
			t[r - WARMUP] = ns;
	}
	if (!rc) {
		int64_t ns = median(t, REPEATS);

		printf("  gemm m=%-5d n=%-5d k=%-5d %9.1f us %8.2f GFLOP/s\n", m, n, k, ns / 1e3,
		       2.0 * m * n * k / (double)ns);
	}
	kernel_buf_free(kb, x);
	kernel_buf_free(kb, w);
	kernel_buf_free(kb, y);
	return rc;
}

/* Attention on its own: n_seqs sequences, each a chunk of q_len tokens
 * after ctx cached ones (q_len 1: decode attention), scattered blocks. */
static int bench_attn(struct kernel_backend *kb, const struct synth_shape *sh, int n_seqs,
		      int q_len, int ctx, struct ss_error *err)
{
	const int d = sh->head_dim, qw = sh->heads * d, kv_len = ctx + q_len;
	const int maxb = (kv_len + BLOCK - 1) / BLOCK;
	struct kernel_kv_cache c = {
		.layers = 1, .num_blocks = n_seqs * maxb, .block_size = BLOCK,
		.kv_heads = sh->kv_heads, .head_dim = d, .dtype = sh->kv_dtype,
	};
	size_t es = kernel_backend_elem_size(kb), T = (size_t)n_seqs * q_len;
	int32_t *meta = malloc(((size_t)n_seqs * (maxb + 3) + 1) * sizeof(int32_t));
	int32_t *bt = meta, *q_start = bt + (size_t)n_seqs * maxb, *ctxs = q_start + n_seqs + 1;
	int32_t *lens = ctxs + n_seqs;
	void *q = NULL, *o = NULL, *m = NULL;
	int64_t t[REPEATS];
	double flops = 0;
	int rc;

	if (!meta)
		return 1;
	for (int i = 0; i < n_seqs * maxb; i++)
		bt[i] = (int32_t)((i * 7919L) % (n_seqs * maxb));
	for (int s = 0; s <= n_seqs; s++)
		q_start[s] = s * q_len;
	for (int s = 0; s < n_seqs; s++) {
		ctxs[s] = ctx;
		lens[s] = kv_len;
	}
	for (int i = 0; i < q_len; i++)   /* QK^T and PV: 4 d flops per head and key */
		flops += 4.0 * d * sh->heads * (ctx + i + 1) * n_seqs;
	rc = kernel_kv_cache_alloc(kb, &c, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(kb, &q, T * qw * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(kb, &o, T * qw * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(kb, &m, ((size_t)n_seqs * (maxb + 3) + 1) * sizeof(int32_t),
				      KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_upload(kb, m, 0, meta,
				       ((size_t)n_seqs * (maxb + 3) + 1) * sizeof(int32_t), err);
	for (int r = 0; r < WARMUP + REPEATS && !rc; r++) {
		struct kernel_view bts = { m, 0, (size_t)maxb };
		struct kernel_timer tm;
		int64_t ns = 0;

		rc = kernel_timer_begin(kb, &tm, err);
		if (!rc && q_len == 1)
			rc = kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
				.n_seqs = n_seqs, .heads = sh->heads, .max_kv_len = kv_len,
				.scale = 0.088f, .q = { q, 0, (size_t)qw }, .out = { o, 0, (size_t)qw },
				.kv_len = { m, (size_t)(lens - meta), 0 }, .block_tables = bts,
				.cache = &c }, err);
		else if (!rc)
			rc = kernel_attn_prefill(kb, &(struct kernel_attn_prefill_args){
				.n_seqs = n_seqs, .tokens = (int)T, .heads = sh->heads,
				.max_q_len = q_len, .max_kv_len = kv_len, .scale = 0.088f,
				.q = { q, 0, (size_t)qw }, .out = { o, 0, (size_t)qw },
				.q_start = { m, (size_t)(q_start - meta), 0 },
				.context = { m, (size_t)(ctxs - meta), 0 }, .block_tables = bts,
				.cache = &c }, err);
		if (!rc)
			rc = kernel_timer_end(kb, &tm, &ns, err);
		if (r >= WARMUP)
			t[r - WARMUP] = ns;
	}
	if (!rc) {
		int64_t ns = median(t, REPEATS);

		printf("  %-7s %3d x (%4d after %4d)%s %9.1f us %8.2f GFLOP/s\n",
		       q_len == 1 ? "decode" : "prefill", n_seqs, q_len, ctx,
		       sh->kv_dtype ? " fp8 KV" : "", ns / 1e3, flops / ns);
	}
	kernel_kv_cache_free(kb, &c);
	kernel_buf_free(kb, q);
	kernel_buf_free(kb, o);
	kernel_buf_free(kb, m);
	free(meta);
	return rc;
}

struct mix {
	const char *name;
	int prefill_tokens;     /* one chunk of this many tokens, 0 = none */
	int prefill_context;    /* its cached context */
	int decodes;            /* decode requests */
	int decode_context;     /* each decode's context */
};

static int bench_step(struct synth_model *sm, const struct mix *mx, int32_t *pool, int pool_n,
		      struct ss_error *err)
{
	struct synth_item items[257];
	int64_t t[REPEATS];
	int n = 0, taken = 0, tokens = 0, rc = 0;

	if (mx->prefill_tokens) {
		int need = (mx->prefill_context + mx->prefill_tokens + BLOCK - 1) / BLOCK;

		items[n++] = (struct synth_item){ .tokens = mx->prefill_tokens,
						  .context = mx->prefill_context,
						  .block_table = pool + taken, .n_blocks = need,
						  .emit = true };
		taken += need;
		tokens += mx->prefill_tokens;
	}
	for (int d = 0; d < mx->decodes && d < 256; d++) {
		int need = (mx->decode_context + 1 + BLOCK - 1) / BLOCK;

		items[n++] = (struct synth_item){ .tokens = 1, .context = mx->decode_context,
						  .block_table = pool + taken, .n_blocks = need,
						  .emit = true };
		taken += need;
		tokens++;
	}
	if (taken > pool_n) {
		fprintf(stderr, "bench-kernels: mix %s needs %d blocks, have %d\n", mx->name, taken,
			pool_n);
		return 1;
	}
	for (int r = 0; r < WARMUP + REPEATS && !rc; r++) {
		int64_t ns = 0;

		rc = synth_model_step(sm, items, n, &ns, err);
		if (r >= WARMUP)
			t[r - WARMUP] = ns;
	}
	if (!rc) {
		int64_t ns = median(t, REPEATS);

		printf("  %-34s %5d tokens %9.2f ms %9.0f tokens/s\n", mx->name, tokens, ns / 1e6,
		       tokens / (ns / 1e9));
	}
	return rc;
}

int main(int argc, char **argv)
{
	const char *module_dir = getenv("SERVESIM_MODULE_DIR");
	struct kernel_backend_config cfg = {
		.threads = argc > 1 ? atoi(argv[1]) : 1,
		.module_dir = module_dir && *module_dir ? module_dir : SERVESIM_BUILD_MODULE_DIR,
	};
	const char *backend = argc > 2 ? argv[2] : "cpu";
	/* Llama-3.1-8B (data/models.json) */
	struct synth_shape shape = {
		.layers = 32, .hidden = 4096, .heads = 32, .kv_heads = 8, .head_dim = 128,
		.intermediate = 14336, .vocab = 128256, .gated = true,
	};
	static const struct mix mixes[] = {
		{ "1 decode (ctx 512)", 0, 0, 1, 512 },
		{ "32 decodes (ctx 512)", 0, 0, 32, 512 },
		{ "128 decodes (ctx 512)", 0, 0, 128, 512 },
		{ "prefill 512 (ctx 0)", 512, 0, 0, 0 },
		{ "prefill 2048 (ctx 0)", 2048, 0, 0, 0 },
		{ "chunk 256 (ctx 1024) + 16 decodes", 256, 1024, 16, 1024 },
		{ "chunk 512 (ctx 0) + 64 decodes", 512, 0, 64, 512 },
	};
	const int num_blocks = 4400;
	struct ss_error err = { 0 };
	struct kernel_backend *kb = NULL;
	struct synth_model *sm = NULL;
	int32_t *pool = NULL;
	char dev[256];
	int rc;

	rc = kernel_backend_new(&kb, backend, &cfg, &err);
	if (rc)
		goto out;
	nanosleep(&(struct timespec){ .tv_nsec = 200000000 }, NULL);
	kernel_backend_device_name(kb, dev, sizeof(dev));
	rc = synth_shape_scale(&shape, 8, 4, &err);
	if (rc)
		goto out;
	printf("backend %s (%s, %s)\n", backend, dev, kernel_dtype_name(kernel_backend_dtype(kb)));
	printf("(a) GEMM, median of %d after %d warm-up\n", REPEATS, WARMUP);
	{
		const int qkv = (shape.heads + 2 * shape.kv_heads) * shape.head_dim;
		const int shapes[][3] = {
			{ 1, qkv, shape.hidden },           { 32, qkv, shape.hidden },
			{ 512, qkv, shape.hidden },         { 512, 2 * shape.intermediate, shape.hidden },
			{ 512, shape.hidden, shape.intermediate }, { 16, shape.vocab, shape.hidden },
			{ 256, 256, 256 },                 { 1024, 1024, 1024 },
			{ 2048, 2048, 2048 },
		};

		for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]) && !rc; i++)
			rc = bench_gemm(kb, shapes[i][0], shapes[i][1], shapes[i][2], &err);
	}
	if (rc)
		goto out;
	printf("(b) attention, %d heads on %d KV heads x %d, blocks of %d\n", shape.heads,
	       shape.kv_heads, shape.head_dim, BLOCK);
	{
		const int cases[][3] = {   /* sequences, chunk, context */
			{ 1, 512, 0 }, { 1, 512, 1536 }, { 1, 2048, 0 }, { 32, 1, 512 },
			{ 128, 1, 2048 },
		};

		struct synth_shape fp8 = shape;

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]) && !rc; i++)
			rc = bench_attn(kb, &shape, cases[i][0], cases[i][1], cases[i][2], &err);
		/* the same over an fp8 E4M3 cache (docs/kernels.md, "fp8 KV cache") */
		fp8.kv_dtype = KERNEL_DTYPE_FP8_E4M3;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]) && !rc; i++)
			rc = bench_attn(kb, &fp8, cases[i][0], cases[i][1], cases[i][2], &err);
	}
	if (rc)
		goto out;
	{
		/* the model's creation, weights drawn on the backend, until they are there */
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		rc = synth_model_new(&sm, kb, &shape, num_blocks, BLOCK, 1, &err);
		if (!rc)
			rc = kernel_backend_sync(kb, &err);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (rc)
			goto out;
		printf("(c) synthetic step, Llama-3.1-8B / 8 width, %d layers: hidden %d, heads "
		       "%d/%d x %d, ffn %d, vocab %d; weights %.0f MiB (made in %.3f s), KV %.0f MiB "
		       "(%d blocks of %d)\n", shape.layers, shape.hidden, shape.heads,
		       shape.kv_heads, shape.head_dim, shape.intermediate, shape.vocab,
		       synth_model_weight_bytes(sm) / 1048576.0,
		       (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9,
		       synth_model_kv_bytes(sm) / 1048576.0, num_blocks, BLOCK);
	}
	pool = malloc(num_blocks * sizeof(*pool));
	if (!pool) {
		rc = 1;
		goto out;
	}
	for (int i = 0; i < num_blocks; i++)
		pool[i] = (int32_t)((i * 7919L) % num_blocks);   /* scattered, like a used pool */
	for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]) && !rc; i++)
		rc = bench_step(sm, &mixes[i], pool, num_blocks, &err);
	if (!rc)
		printf("  step workspace %.1f MiB\n", synth_model_workspace_bytes(sm) / 1048576.0);
out:
	if (rc && err.msg[0])
		fprintf(stderr, "bench-kernels: %s\n", err.msg);
	free(pool);
	synth_model_free(sm);
	kernel_backend_free(kb);
	return rc ? 1 : 0;
}
