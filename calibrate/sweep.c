#define _GNU_SOURCE                    /* RUSAGE_THREAD */
#include "sweep.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "meter.h"

/* One sweep's working state. */
struct sweep {
	const struct sweep_config *c;
	struct kernel_backend *kb;
	struct cal_store *st;
	struct meter meter;
	struct sweep_stats *stats;
	int64_t done, total;
	/* points already in the store for this device and variant: a sorted
	 * array of shape keys */
	struct key { int op; int64_t a, b, c, d, e; } *have;
	size_t n_have, cap_have;
	char variant[64];
	char host_variant[64];        /* host overhead rows: "total:MODEL" */
	char step_variant[64];        /* whole-step rows: "step:MODEL" */
	char step1_variant[64];       /* one-layer whole steps: "step1:MODEL" */
	double *samples;              /* repeats */
};

static int cmp_key(const void *pa, const void *pb)
{
	const struct key *a = pa, *b = pb;

	if (a->op != b->op)
		return a->op < b->op ? -1 : 1;
	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	if (a->b != b->b)
		return a->b < b->b ? -1 : 1;
	if (a->c != b->c)
		return a->c < b->c ? -1 : 1;
	if (a->d != b->d)
		return a->d < b->d ? -1 : 1;
	return (a->e > b->e) - (a->e < b->e);
}

/* The shape numbers that identify a point of each operator. */
static struct key key_of(const struct cal_meas *m)
{
	switch (m->op) {
	case CAL_GEMM:
		return (struct key){ m->op, m->m, m->n, m->k, 0, 0 };
	case CAL_ATTN_PREFILL:
	case CAL_ATTN_DECODE:
		return (struct key){ m->op, m->batch, m->q_len, m->kv_len, 0, 0 };
	case CAL_HOST_OVERHEAD:
		/* whole steps (variant "step:..." and the one-layer
		 * "step1:...") apart from the residuals and each other */
		if (!strncmp(m->variant, "step:", 5))
			return (struct key){ CAL_OP_COUNT + 1, m->batch, m->q_len, m->kv_len, 0, 0 };
		if (!strncmp(m->variant, "step1:", 6))
			return (struct key){ CAL_OP_COUNT + 2, m->batch, m->q_len, m->kv_len, 0, 0 };
		return (struct key){ m->op, m->batch, 0, 0, 0, 0 };
	case CAL_LORA:
		return (struct key){ m->op, m->m, m->n, m->k, m->batch, m->width };
	default:
		return (struct key){ m->op, m->tokens, m->width, 0, 0, 0 };
	}
}

static int collect_have(void *ctx, const struct cal_meas *m)
{
	struct sweep *s = ctx;

	if (strcmp(m->variant, m->op == CAL_HOST_OVERHEAD ? s->host_variant : s->variant) &&
	    (m->op != CAL_HOST_OVERHEAD || (strcmp(m->variant, s->step_variant) &&
					      strcmp(m->variant, s->step1_variant))))
		return 0;
	if (s->n_have == s->cap_have) {
		size_t cap = s->cap_have ? 2 * s->cap_have : 256;
		struct key *p = realloc(s->have, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->have = p;
		s->cap_have = cap;
	}
	s->have[s->n_have++] = key_of(m);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Store one timed point: m holds the shape; the samples are in s->samples. */
static int store_point(struct sweep *s, struct cal_meas *m, double energy_j, struct ss_error *err)
{
	int n = s->c->repeats;
	double sum = 0, sq = 0;

	qsort(s->samples, (size_t)n, sizeof(double), cmp_double);
	for (int i = 0; i < n; i++)
		sum += s->samples[i];
	m->mean_ms = sum / n;
	for (int i = 0; i < n; i++)
		sq += (s->samples[i] - m->mean_ms) * (s->samples[i] - m->mean_ms);
	m->std_ms = n > 1 ? sqrt(sq / (n - 1)) : 0;
	m->median_ms = n % 2 ? s->samples[n / 2] : 0.5 * (s->samples[n / 2 - 1] + s->samples[n / 2]);
	m->min_ms = s->samples[0];
	m->max_ms = s->samples[n - 1];
	m->count = n;
	if (isfinite(energy_j) && energy_j > 0) {
		m->energy_j = energy_j / n;
		m->power_w = m->energy_j / (m->mean_ms * 1e-3);
	}
	snprintf(m->device, sizeof(m->device), "%s", s->c->device);
	snprintf(m->device_raw, sizeof(m->device_raw), "%.95s", s->stats->device_desc);
	snprintf(m->dtype, sizeof(m->dtype), "%s",
		 kernel_backend_dtype(s->kb) == KERNEL_DTYPE_F32 ? "fp32" : "bf16");
	if (!m->variant[0])   /* whole steps bring their own */
		snprintf(m->variant, sizeof(m->variant), "%s",
			 m->op == CAL_HOST_OVERHEAD ? s->host_variant : s->variant);
	snprintf(m->source, sizeof(m->source), "servesim calibrate run --backend %s --model %s",
		 s->c->backend, s->c->model);
	m->source_line = ++s->stats->measured;
	return cal_store_insert(s->st, m, err);
}

/* Is this point in the store already?  Then count it and skip. */
static bool have(struct sweep *s, const struct cal_meas *m)
{
	struct key k = key_of(m);

	if (s->n_have && bsearch(&k, s->have, s->n_have, sizeof(k), cmp_key)) {
		s->stats->skipped++;
		return true;
	}
	return false;
}

static void tick(struct sweep *s, const char *op)
{
	s->done++;
	if (s->c->progress)
		s->c->progress(s->c->progress_ctx, op, s->done, s->total);
}

/* Involuntary context switches of the calling thread so far: a sample
 * during which the scheduler gave the core to another process measured
 * that process's time slice, not the kernel.  On a shared machine (2
 * cores, other jobs) such samples were 2-5x their neighbours and pulled
 * the means used by the table model far off (docs/calibration.md). */
static long ivcsw(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) ? -1 : ru.ru_nivcsw;
}

#define RETIME_MAX 20   /* attempts per sample before an interrupted one is kept */

/* Time fn(arg) warmup + repeats times on the backend's timer; energy over
 * the repeats from the meter (NAN when absent). */
typedef int (*op_fn)(struct sweep *s, void *arg, struct ss_error *err);

static int time_op(struct sweep *s, op_fn fn, void *arg, double *energy_j, struct ss_error *err)
{
	double e0 = 0, e1 = 0;
	bool metered;
	int rc;

	if (s->c->stop && *s->c->stop)
		return ss_error_set(err, -EINTR, NULL, 0, "interrupted");
	for (int i = 0; i < s->c->warmup; i++) {
		rc = fn(s, arg, err);
		if (rc)
			return rc;
	}
	rc = kernel_backend_sync(s->kb, err);
	if (rc)
		return rc;
	metered = meter_read(&s->meter, &e0);
	for (int i = 0; i < s->c->repeats; i++) {
		for (int attempt = 0;; attempt++) {
			struct kernel_timer t;
			long cs0 = ivcsw();
			int64_t ns;

			rc = kernel_timer_begin(s->kb, &t, err);
			if (!rc)
				rc = fn(s, arg, err);
			if (!rc)
				rc = kernel_timer_end(s->kb, &t, &ns, err);
			if (rc)
				return rc;
			s->samples[i] = (double)ns * 1e-6;
			if (ivcsw() == cs0 || attempt == RETIME_MAX)
				break;
			s->stats->retimed++;
		}
	}
	*energy_j = metered && meter_read(&s->meter, &e1) ? meter_delta(&s->meter, e0, e1) : NAN;
	return 0;
}

/* ---- operators -------------------------------------------------------------- */

struct gemm_ctx {
	struct kernel_gemm_args a;
};

static int do_gemm(struct sweep *s, void *arg, struct ss_error *err)
{
	return kernel_gemm(s->kb, &((struct gemm_ctx *)arg)->a, err);
}

static int sweep_gemm(struct sweep *s, struct ss_error *err)
{
	const struct synth_shape *sh = &s->c->shape;
	const int shapes[5][2] = {
		{ (sh->heads + 2 * sh->kv_heads) * sh->head_dim, sh->hidden },
		{ sh->hidden, sh->heads * sh->head_dim },
		{ (sh->gated ? 2 : 1) * sh->intermediate, sh->hidden },
		{ sh->hidden, sh->intermediate },
		{ sh->vocab, sh->hidden },
	};
	size_t es = kernel_backend_elem_size(s->kb);
	int rc = 0;

	for (int g = 0; g < 5 && !rc; g++) {
		int n = shapes[g][0], k = shapes[g][1], M = s->c->max_tokens;
		void *x = NULL, *w = NULL, *y = NULL;

		rc = kernel_buf_alloc(s->kb, &x, (size_t)M * k * es, KERNEL_MEM_DEVICE, err);
		if (!rc)
			rc = kernel_buf_alloc(s->kb, &w, (size_t)n * k * es, KERNEL_MEM_DEVICE, err);
		if (!rc)
			rc = kernel_buf_alloc(s->kb, &y, (size_t)M * n * es, KERNEL_MEM_DEVICE, err);
		for (int m = 1; m <= M && !rc; m *= 2) {
			struct gemm_ctx g_ctx = { .a = { .m = m, .n = n, .k = k,
				.x = { x, 0, (size_t)k }, .w = { w, 0, (size_t)k }, .y = { y, 0, (size_t)n } } };
			struct cal_meas cm;
			double e;

			cal_meas_init(&cm, CAL_GEMM);
			cm.m = m;
			cm.n = n;
			cm.k = k;
			if (!have(s, &cm)) {
				rc = time_op(s, do_gemm, &g_ctx, &e, err);
				if (!rc)
					rc = store_point(s, &cm, e, err);
			}
			tick(s, "gemm");
		}
		kernel_buf_free(s->kb, x);
		kernel_buf_free(s->kb, w);
		kernel_buf_free(s->kb, y);
	}
	return rc;
}

/* Attention points run against a scratch KV cache of one layer. */
/* Attention is timed with the write of the step's K/V into the paged
 * cache that precedes it (vLLM's reshape_and_cache; Vidur's
 * attn_kv_cache_save), as the synthetic step runs them. */
struct attn_ctx {
	struct kernel_kv_cache cache;
	void *q, *out, *meta;         /* meta: int32 q_start / context / kv_len / block tables */
	void *slots;                  /* int32 cache slots of the step's new tokens */
	struct kernel_kv_write_args kvw;
	struct kernel_attn_prefill_args pf;
	struct kernel_attn_decode_args dec;
};

static int do_prefill(struct sweep *s, void *arg, struct ss_error *err)
{
	struct attn_ctx *a = arg;
	int rc = kernel_kv_write(s->kb, &a->kvw, err);

	return rc ? rc : kernel_attn_prefill(s->kb, &a->pf, err);
}

static int do_decode(struct sweep *s, void *arg, struct ss_error *err)
{
	struct attn_ctx *a = arg;
	int rc = kernel_kv_write(s->kb, &a->kvw, err);

	return rc ? rc : kernel_attn_decode(s->kb, &a->dec, err);
}

/* Slots start, start + stride, ... (n of them) into a->slots, and the
 * kv_write of n tokens whose K and V rows are read from q and out. */
static int setup_kvw(struct sweep *s, struct attn_ctx *a, int n, int start, int stride,
		     struct ss_error *err)
{
	size_t kvw = (size_t)a->cache.kv_heads * a->cache.head_dim;
	int32_t *v = malloc((size_t)n * sizeof(*v));
	int rc;

	if (!v)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (int i = 0; i < n; i++)
		v[i] = start + i * stride;
	rc = kernel_buf_upload(s->kb, a->slots, 0, v, (size_t)n * sizeof(*v), err);
	free(v);
	a->kvw = (struct kernel_kv_write_args){ .tokens = n, .layer = 0,
		.k = { a->q, 0, kvw }, .v = { a->out, 0, kvw }, .slots = { a->slots, 0, 1 },
		.cache = &a->cache };
	return rc;
}

/* Block tables for `batch` sequences of `blocks_each` blocks, consecutive ids. */
static int upload_ids(struct sweep *s, void *buf, size_t off, int n, int start,
		      struct ss_error *err)
{
	int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof(*ids));
	int rc;

	if (!ids)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (int i = 0; i < n; i++)
		ids[i] = start + i;
	rc = kernel_buf_upload(s->kb, buf, off, ids, (size_t)n * sizeof(*ids), err);
	free(ids);
	return rc;
}

static int upload_i32(struct sweep *s, void *buf, size_t off, const int32_t *v, int n,
		      struct ss_error *err)
{
	return kernel_buf_upload(s->kb, buf, off, v, (size_t)n * sizeof(*v), err);
}

static int sweep_attention(struct sweep *s, struct ss_error *err)
{
	const struct synth_shape *sh = &s->c->shape;
	const int bs = 16, max_kv = s->c->max_kv, max_tok = s->c->max_tokens;
	const int max_batch = 64;
	/* the cache holds the largest point: max_batch x max_kv tokens, or one
	 * sequence of max_tokens chunk after max_kv context */
	int blocks = (max_batch * max_kv > max_tok + max_kv ? max_batch * max_kv : max_tok + max_kv) /
		     bs + max_batch;
	size_t es = kernel_backend_elem_size(s->kb), row = (size_t)sh->heads * sh->head_dim;
	struct attn_ctx a = { .cache = { .layers = 1, .num_blocks = blocks, .block_size = bs,
					 .kv_heads = sh->kv_heads, .head_dim = sh->head_dim } };
	size_t meta_ints = (size_t)blocks + 4 * max_batch + 8;
	int rc;

	rc = kernel_kv_cache_alloc(s->kb, &a.cache, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, &a.q, (size_t)(max_tok > max_batch ? max_tok : max_batch) *
				      row * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, &a.out, (size_t)(max_tok > max_batch ? max_tok : max_batch) *
				      row * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, &a.meta, meta_ints * sizeof(int32_t), KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, &a.slots, (size_t)(max_tok > max_batch ? max_tok : max_batch) *
				      sizeof(int32_t), KERNEL_MEM_DEVICE, err);

	/* prefill: one sequence, chunk q after kv cached tokens */
	for (int q = 16; q <= max_tok && !rc; q *= 4)
		for (int kv = 0; kv <= max_kv && !rc; kv = kv ? kv * 4 : 256) {
			int nb = (q + kv + bs - 1) / bs;
			int32_t qs[2] = { 0, q }, ctx = kv;
			struct cal_meas cm;
			double e;

			cal_meas_init(&cm, CAL_ATTN_PREFILL);
			cm.batch = 1;
			cm.q_len = q;
			cm.kv_len = kv;
			cm.heads = sh->heads;
			cm.kv_heads = sh->kv_heads;
			cm.head_dim = sh->head_dim;
			if (!have(s, &cm)) {
				/* meta: [0..2) q_start, [2] context, [8..) block table */
				rc = upload_i32(s, a.meta, 0, qs, 2, err);
				if (!rc)
					rc = upload_i32(s, a.meta, 2 * sizeof(int32_t), &ctx, 1, err);
				if (!rc)
					rc = upload_ids(s, a.meta, 8 * sizeof(int32_t), nb, 0, err);
				a.pf = (struct kernel_attn_prefill_args){
					.n_seqs = 1, .tokens = q, .heads = sh->heads, .layer = 0,
					.max_q_len = q, .max_kv_len = q + kv,
					.scale = 1.0f / sqrtf((float)sh->head_dim),
					.q = { a.q, 0, row }, .out = { a.out, 0, row },
					.q_start = { a.meta, 0, 1 }, .context = { a.meta, 2, 1 },
					.block_tables = { a.meta, 8, (size_t)nb }, .cache = &a.cache,
				};
				/* the chunk's tokens go to positions kv .. kv + q - 1 */
				if (!rc)
					rc = setup_kvw(s, &a, q, kv, 1, err);
				if (!rc)
					rc = time_op(s, do_prefill, &a, &e, err);
				if (!rc)
					rc = store_point(s, &cm, e, err);
			}
			tick(s, "attn_prefill");
		}

	/* decode: batch sequences of kv tokens each (the new one included) */
	for (int b = 1; b <= max_batch && !rc; b *= 4)
		for (int kv = 16; kv <= max_kv && !rc; kv *= 4) {
			int nb = (kv + bs - 1) / bs;
			int32_t *lens = malloc((size_t)b * sizeof(*lens));
			struct cal_meas cm;
			double e;

			if (!lens) {
				rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
				break;
			}
			for (int i = 0; i < b; i++)
				lens[i] = kv;
			cal_meas_init(&cm, CAL_ATTN_DECODE);
			cm.batch = b;
			cm.q_len = 1;
			cm.kv_len = kv;
			cm.heads = sh->heads;
			cm.kv_heads = sh->kv_heads;
			cm.head_dim = sh->head_dim;
			if (!have(s, &cm)) {
				/* meta: [0..b) kv_len, [b..) block tables, nb per sequence */
				rc = upload_i32(s, a.meta, 0, lens, b, err);
				if (!rc)
					rc = upload_ids(s, a.meta, (size_t)b * sizeof(int32_t), b * nb, 0,
							err);
				a.dec = (struct kernel_attn_decode_args){
					.n_seqs = b, .heads = sh->heads, .layer = 0, .max_kv_len = kv,
					.scale = 1.0f / sqrtf((float)sh->head_dim),
					.q = { a.q, 0, row }, .out = { a.out, 0, row },
					.kv_len = { a.meta, 0, 1 },
					.block_tables = { a.meta, (size_t)b, (size_t)nb }, .cache = &a.cache,
				};
				/* each sequence's new token: position kv - 1 of its blocks */
				if (!rc)
					rc = setup_kvw(s, &a, b, kv - 1, nb * bs, err);
				if (!rc)
					rc = time_op(s, do_decode, &a, &e, err);
				if (!rc)
					rc = store_point(s, &cm, e, err);
			}
			free(lens);
			tick(s, "attn_decode");
		}
	kernel_kv_cache_free(s->kb, &a.cache);
	kernel_buf_free(s->kb, a.q);
	kernel_buf_free(s->kb, a.out);
	kernel_buf_free(s->kb, a.meta);
	kernel_buf_free(s->kb, a.slots);
	return rc;
}

struct ew_ctx {
	int op;
	struct kernel_rmsnorm_args norm;
	struct kernel_act_args act;
	struct kernel_rope_args rope;
	struct kernel_gather_args gather;
};

static int do_ew(struct sweep *s, void *arg, struct ss_error *err)
{
	struct ew_ctx *c = arg;

	switch (c->op) {
	case CAL_RMSNORM:
		return kernel_rmsnorm(s->kb, &c->norm, err);
	case CAL_ROPE:
		return kernel_rope(s->kb, &c->rope, err);
	case CAL_EMBEDDING:
		return kernel_gather(s->kb, &c->gather, err);
	default:
		return kernel_act(s->kb, &c->act, err);
	}
}

/* The element-wise kinds a servesim step runs, set up for t tokens on
 * buffers x, y (big enough for [t, 2 x max(ff, hidden, qkv)]), the norm
 * weight / embedding table w ([vocab, hidden]) and int32 ids (positions
 * and token ids, [t]).  Kind k: 0 RMSNorm, 1 activation, 2 RoPE, 3
 * embedding gather. */
static void ew_setup(const struct synth_shape *sh, int k, int t, void *x, void *y, void *w,
		     void *ids, struct ew_ctx *c)
{
	static const int ops[4] = { CAL_RMSNORM, CAL_ACTIVATION, CAL_ROPE, CAL_EMBEDDING };
	size_t q = (size_t)sh->heads * sh->head_dim, kvw = (size_t)sh->kv_heads * sh->head_dim;

	memset(c, 0, sizeof(*c));
	c->op = ops[k];
	c->norm = (struct kernel_rmsnorm_args){ .rows = t, .cols = sh->hidden, .eps = 1e-5f,
		.x = { x, 0, (size_t)sh->hidden }, .weight = { w, 0, 0 },
		.out = { y, 0, (size_t)sh->hidden } };
	c->act = (struct kernel_act_args){ .act = sh->gated ? KERNEL_ACT_SILU_MUL : KERNEL_ACT_RELU,
		.tokens = t, .width = sh->intermediate,
		.in = { x, 0, (size_t)(sh->gated ? 2 : 1) * sh->intermediate },
		.out = { y, 0, (size_t)sh->intermediate } };
	/* Q and K of a fused QKV row, in place */
	c->rope = (struct kernel_rope_args){ .tokens = t, .heads = sh->heads,
		.kv_heads = sh->kv_heads, .head_dim = sh->head_dim, .theta = 10000.0f,
		.q = { x, 0, q + 2 * kvw }, .k = { x, q, q + 2 * kvw }, .pos = { ids, 0, 1 } };
	c->gather = (struct kernel_gather_args){ .rows = t, .cols = sh->hidden,
		.src_rows = sh->vocab, .src = { w, 0, (size_t)sh->hidden },
		.idx = { ids, 0, 1 }, .out = { y, 0, (size_t)sh->hidden } };
}

/* Width each kind is stored under (docs/calibration.md conventions). */
static int64_t ew_width(const struct synth_shape *sh, int op)
{
	switch (op) {
	case CAL_ACTIVATION:
		return sh->intermediate;
	case CAL_ROPE:
		return (int64_t)(sh->heads + sh->kv_heads) * sh->head_dim;
	default:
		return sh->hidden;
	}
}

/* Allocate the element-wise scratch for up to M tokens; ids hold 0..M-1
 * (valid positions and token ids). */
static int ew_alloc(struct sweep *s, int M, void **x, void **y, void **w, void **ids,
		    struct ss_error *err)
{
	const struct synth_shape *sh = &s->c->shape;
	size_t es = kernel_backend_elem_size(s->kb);
	size_t qkv = (size_t)(sh->heads + 2 * sh->kv_heads) * sh->head_dim;
	size_t wide = 2 * (size_t)(sh->intermediate > sh->hidden ? sh->intermediate : sh->hidden);
	int32_t *v;
	int rc;

	if (qkv > wide)
		wide = qkv;
	rc = kernel_buf_alloc(s->kb, x, (size_t)M * wide * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, y, (size_t)M * wide * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, w, (size_t)sh->vocab * sh->hidden * es,
				      KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, ids, (size_t)M * sizeof(int32_t), KERNEL_MEM_DEVICE, err);
	if (rc)
		return rc;
	v = malloc((size_t)M * sizeof(*v));
	if (!v)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (int i = 0; i < M; i++)
		v[i] = i % sh->vocab;
	rc = kernel_buf_upload(s->kb, *ids, 0, v, (size_t)M * sizeof(*v), err);
	free(v);
	return rc;
}

static int sweep_elementwise(struct sweep *s, struct ss_error *err)
{
	const struct synth_shape *sh = &s->c->shape;
	int M = s->c->max_tokens;
	void *x = NULL, *y = NULL, *w = NULL, *ids = NULL;
	int rc = ew_alloc(s, M, &x, &y, &w, &ids, err);

	for (int t = 1; t <= M && !rc; t *= 2)
		for (int k = 0; k < 4 && !rc; k++) {
			struct ew_ctx c;
			struct cal_meas cm;
			double e;

			ew_setup(sh, k, t, x, y, w, ids, &c);
			cal_meas_init(&cm, (enum cal_op)c.op);
			cm.tokens = t;
			cm.width = ew_width(sh, c.op);
			if (!have(s, &cm)) {
				rc = time_op(s, do_ew, &c, &e, err);
				if (!rc)
					rc = store_point(s, &cm, e, err);
			}
			tick(s, cal_op_name((enum cal_op)c.op));
		}
	kernel_buf_free(s->kb, x);
	kernel_buf_free(s->kb, y);
	kernel_buf_free(s->kb, w);
	kernel_buf_free(s->kb, ids);
	return rc;
}

/* The adapter (LoRA) kernels: kernel_lora, the shrink and expand of one
 * module over a step's segments, SGMV-style (kernels/backend.h; the CPU
 * and CUDA backends run it as two GEMMs a segment), at the model's two
 * module groups as the simulator prices them (q, k and v packed, vLLM's
 * qkv_proj; o), over tokens 1, 4, 16, 64, 256 (within --max-tokens),
 * ranks 8, 16 and 64, and 1, 4 or 16 adapters (segments of equal rows, at
 * most one a token) of one rank each.  The simulator prices a step of
 * mixed ranks from these by its bytes and FLOPs (calibrate/lora-kernel.h),
 * so a point need not mix them.  Stored as op lora: m tokens, k = d_in,
 * n = d_out, batch = adapters, width = rank.
 *
 * The adapters' matrices are read from memory, not from the core's (or the
 * GPU's L2) cache: inside a step an adapter's A and B of one module and
 * layer are read once, and the base model's weights and KV stream through
 * the caches between one step's read and the next.  A sweep that repeated
 * one call on the same slots would time them cache-resident.  So each call
 * takes the next slots of a pool of at least LORA_SWEEP_POOL_BYTES of
 * adapters, more than a last-level cache (an H100's L2 is 50 MB), and a
 * slot comes back only after the whole pool has passed.  x and y stay
 * cache-resident, as the kernels before and after the adapter's leave
 * them in a step.  (On the 2-core development machine at w/4, the fit's
 * RMS error over its rows went from 18.7% with cache-resident adapters to
 * 6.1% and 10.7% (two sweeps) this way, adapters read at 11.5 and 9.6
 * GB/s against activations at 79 and 70 GB/s.) */
#define LORA_SWEEP_MAX_ADAPTERS 16
#define LORA_SWEEP_POOL_BYTES ((size_t)128 << 20)
#define LORA_SWEEP_MAX_RANK 64
static const int lora_ranks[] = { 8, 16, LORA_SWEEP_MAX_RANK };
static const int lora_adapters[] = { 1, 4, LORA_SWEEP_MAX_ADAPTERS };

struct lora_ctx {
	struct kernel_lora_args a;
	int32_t next;                 /* the pool's next slot */
	int32_t start[LORA_SWEEP_MAX_ADAPTERS + 1], slot[LORA_SWEEP_MAX_ADAPTERS],
		rank[LORA_SWEEP_MAX_ADAPTERS];
};

/* One call on the pool's next a.n_segs slots (see above). */
static int do_lora(struct sweep *s, void *arg, struct ss_error *err)
{
	struct lora_ctx *c = arg;

	if (c->next + c->a.n_segs > c->a.n_slots)
		c->next = 0;
	for (int k = 0; k < c->a.n_segs; k++)
		c->slot[k] = c->next + k;
	c->next += c->a.n_segs;
	return kernel_lora(s->kb, &c->a, err);
}

static int lora_tokens_max(const struct sweep_config *c)
{
	return c->max_tokens < 256 ? c->max_tokens : 256;
}

/* Points of the lora grid, for progress. */
static int64_t lora_points(const struct sweep_config *c)
{
	int64_t n = 0;

	for (int t = 1; t <= lora_tokens_max(c); t *= 4)
		for (size_t j = 0; j < sizeof(lora_adapters) / sizeof(lora_adapters[0]); j++)
			n += lora_adapters[j] <= t;
	return 2 * n * (int64_t)(sizeof(lora_ranks) / sizeof(lora_ranks[0]));
}

static int lora_fill(struct sweep *s, void *buf, size_t n, uint64_t key, struct ss_error *err)
{
	return kernel_fill_uniform(s->kb, &(struct kernel_fill_uniform_args){
		.n = n, .key = key, .scale = 0.1f, .bias = -0.05f, .x = { .buf = buf } }, err);
}

static int sweep_lora(struct sweep *s, struct ss_error *err)
{
	const struct synth_shape *sh = &s->c->shape;
	const int mods[2][2] = {   /* d_in, d_out */
		{ sh->hidden, (sh->heads + 2 * sh->kv_heads) * sh->head_dim },
		{ sh->heads * sh->head_dim, sh->hidden },
	};
	size_t es = kernel_backend_elem_size(s->kb);
	int M = lora_tokens_max(s->c), rc = 0;

	for (int g = 0; g < 2 && !rc; g++) {
		int din = mods[g][0], dout = mods[g][1];
		size_t a_slot = (size_t)LORA_SWEEP_MAX_RANK * din, b_slot = (size_t)dout * LORA_SWEEP_MAX_RANK;
		size_t pool = LORA_SWEEP_POOL_BYTES / ((a_slot + b_slot) * es) + 1;
		int32_t next = 0;
		void *x = NULL, *y = NULL, *tmp = NULL, *A = NULL, *B = NULL;

		rc = kernel_buf_alloc(s->kb, &x, (size_t)M * din * es, KERNEL_MEM_DEVICE, err);
		if (!rc)
			rc = kernel_buf_alloc(s->kb, &y, (size_t)M * dout * es, KERNEL_MEM_DEVICE, err);
		if (!rc)
			rc = kernel_buf_alloc(s->kb, &tmp, (size_t)M * LORA_SWEEP_MAX_RANK * es,
					      KERNEL_MEM_DEVICE, err);
		if (!rc)
			rc = kernel_buf_alloc(s->kb, &A, pool * a_slot * es,
					      KERNEL_MEM_DEVICE, err);
		if (!rc)
			rc = kernel_buf_alloc(s->kb, &B, pool * b_slot * es,
					      KERNEL_MEM_DEVICE, err);
		/* finite small values: uninitialised memory may hold NaNs or
		 * denormals, which time differently */
		if (!rc)
			rc = lora_fill(s, x, (size_t)M * din, 1, err);
		if (!rc)
			rc = lora_fill(s, y, (size_t)M * dout, 2, err);
		if (!rc)
			rc = lora_fill(s, A, pool * a_slot, 3, err);
		if (!rc)
			rc = lora_fill(s, B, pool * b_slot, 4, err);
		for (size_t ri = 0; ri < sizeof(lora_ranks) / sizeof(lora_ranks[0]) && !rc; ri++)
			for (int t = 1; t <= M && !rc; t *= 4)
				for (size_t j = 0; j < sizeof(lora_adapters) / sizeof(lora_adapters[0]) && !rc; j++) {
					int na = lora_adapters[j], r = lora_ranks[ri];
					struct lora_ctx c;
					struct cal_meas cm;
					double e;

					if (na > t)
						continue;
					for (int k = 0; k < na; k++) {
						c.start[k] = (int32_t)((int64_t)t * k / na);
						c.slot[k] = k;
						c.rank[k] = r;
					}
					c.start[na] = t;
					c.a = (struct kernel_lora_args){
						.tokens = t, .d_in = din, .d_out = dout,
						.max_rank = LORA_SWEEP_MAX_RANK,
						.n_slots = (int)pool, .n_segs = na,
						.seg_start = c.start, .seg_slot = c.slot, .seg_rank = c.rank,
						.x = { x, 0, (size_t)din },
						.a = { A, 0, (size_t)din }, .a_slot = a_slot,
						.b = { B, 0, 0 }, .b_slot = b_slot,
						.tmp = { tmp, 0, LORA_SWEEP_MAX_RANK }, .y = { y, 0, (size_t)dout },
					};
					cal_meas_init(&cm, CAL_LORA);
					cm.m = t;
					cm.n = dout;
					cm.k = din;
					cm.batch = na;
					cm.width = r;
					c.next = next;
					if (!have(s, &cm)) {
						rc = time_op(s, do_lora, &c, &e, err);
						if (!rc)
							rc = store_point(s, &cm, e, err);
					}
					next = c.next;
					tick(s, "lora");
				}
		kernel_buf_free(s->kb, x);
		kernel_buf_free(s->kb, y);
		kernel_buf_free(s->kb, tmp);
		kernel_buf_free(s->kb, A);
		kernel_buf_free(s->kb, B);
	}
	return rc;
}

/* Host overhead: what a whole step costs beyond its operators.  For a
 * decode step of `batch` requests, the synthetic step's wall time minus the
 * sum of the operators the simulator prices separately (per layer: two
 * RMSNorms, four GEMMs, the activation and decode attention; then the final
 * norm and the LM head), each timed alone at the same shapes.  What is left
 * — metadata preparation and upload, embedding gather, RoPE, KV writes,
 * residual adds, sampling, launch gaps — is the step's host overhead in the
 * simulator's decomposition, measured rather than assumed. */
static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static double mean_ms(const struct sweep *s)
{
	double sum = 0;

	for (int i = 0; i < s->c->repeats; i++)
		sum += s->samples[i];
	return sum / s->c->repeats;
}

/* Sum of the separately priced operators of a decode step of b requests
 * at KV length kv, ms. */
static int ops_of_decode_step(struct sweep *s, int b, int kv, double *total_ms,
			      struct ss_error *err)
{
	const struct synth_shape *sh = &s->c->shape;
	const int bs = 16, nb = (kv + bs - 1) / bs;
	const int gn[5] = { (sh->heads + 2 * sh->kv_heads) * sh->head_dim, sh->hidden,
			    (sh->gated ? 2 : 1) * sh->intermediate, sh->hidden, sh->vocab };
	const int gk[5] = { sh->hidden, sh->heads * sh->head_dim, sh->hidden, sh->intermediate,
			    sh->hidden };
	size_t es = kernel_backend_elem_size(s->kb), row = (size_t)sh->heads * sh->head_dim;
	int wide = sh->vocab > 2 * sh->intermediate ? sh->vocab : 2 * sh->intermediate;
	void *x = NULL, *w = NULL, *y = NULL, *meta = NULL;
	struct attn_ctx a = { .cache = { .layers = 1, .num_blocks = b * nb + 1, .block_size = bs,
					 .kv_heads = sh->kv_heads, .head_dim = sh->head_dim } };
	int32_t *lens = NULL;
	double e, sum = 0;
	int rc;

	rc = kernel_buf_alloc(s->kb, &x, (size_t)b * wide * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, &y, (size_t)b * wide * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, &w, (size_t)wide * (sh->hidden > sh->intermediate ?
					sh->hidden : sh->intermediate) * es, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_kv_cache_alloc(s->kb, &a.cache, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, &meta, ((size_t)b + (size_t)b * nb) * sizeof(int32_t),
				      KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_buf_alloc(s->kb, &a.slots, (size_t)b * sizeof(int32_t), KERNEL_MEM_DEVICE,
				      err);
	lens = malloc((size_t)b * sizeof(*lens));
	if (!rc && !lens)
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	/* GEMMs: four per layer, the LM head once */
	for (int g = 0; g < 5 && !rc; g++) {
		struct gemm_ctx gc = { .a = { .m = b, .n = gn[g], .k = gk[g], .x = { x, 0, (size_t)gk[g] },
					      .w = { w, 0, (size_t)gk[g] }, .y = { y, 0, (size_t)gn[g] } } };

		rc = time_op(s, do_gemm, &gc, &e, err);
		sum += mean_ms(s) * (g < 4 ? sh->layers : 1);
	}
	/* element-wise: RMSNorm twice per layer and once at the end, the
	 * activation and RoPE once per layer, the embedding gather once */
	if (!rc) {
		void *ex = NULL, *ey = NULL, *ew = NULL, *eids = NULL;
		static const double per_layer[4] = { 2.0, 1.0, 1.0, 0.0 };
		static const double once[4] = { 1.0, 0.0, 0.0, 1.0 };

		rc = ew_alloc(s, b, &ex, &ey, &ew, &eids, err);
		for (int k = 0; k < 4 && !rc; k++) {
			struct ew_ctx c;

			ew_setup(sh, k, b, ex, ey, ew, eids, &c);
			rc = time_op(s, do_ew, &c, &e, err);
			sum += mean_ms(s) * (per_layer[k] * sh->layers + once[k]);
		}
		kernel_buf_free(s->kb, ex);
		kernel_buf_free(s->kb, ey);
		kernel_buf_free(s->kb, ew);
		kernel_buf_free(s->kb, eids);
	}
	/* decode attention per layer */
	if (!rc) {
		for (int i = 0; i < b; i++)
			lens[i] = kv;
		rc = upload_i32(s, meta, 0, lens, b, err);
		if (!rc)
			rc = upload_ids(s, meta, (size_t)b * sizeof(int32_t), b * nb, 0, err);
		a.dec = (struct kernel_attn_decode_args){
			.n_seqs = b, .heads = sh->heads, .layer = 0, .max_kv_len = kv,
			.scale = 1.0f / sqrtf((float)sh->head_dim),
			.q = { x, 0, row }, .out = { y, 0, row }, .kv_len = { meta, 0, 1 },
			.block_tables = { meta, (size_t)b, (size_t)nb }, .cache = &a.cache,
		};
		a.q = x;
		a.out = y;
		if (!rc)
			rc = setup_kvw(s, &a, b, kv - 1, nb * bs, err);
		if (!rc)
			rc = time_op(s, do_decode, &a, &e, err);
		sum += mean_ms(s) * sh->layers;
	}
	*total_ms = sum;
	free(lens);
	kernel_buf_free(s->kb, a.slots);
	kernel_kv_cache_free(s->kb, &a.cache);
	kernel_buf_free(s->kb, x);
	kernel_buf_free(s->kb, w);
	kernel_buf_free(s->kb, y);
	kernel_buf_free(s->kb, meta);
	return rc;
}

static int sweep_host(struct sweep *s, struct ss_error *err)
{
	const int bs = 16, ctx = 64, max_batch = 64, per = ctx / bs + 1;
	struct synth_model *sm = NULL;
	struct synth_item *items = NULL;
	int32_t *tables = NULL;
	double *walls = NULL;
	int rc;

	rc = synth_model_new(&sm, s->kb, &s->c->shape, max_batch * per, bs, 1, err);
	items = calloc(max_batch, sizeof(*items));
	tables = calloc((size_t)max_batch * per, sizeof(*tables));
	walls = calloc((size_t)s->c->repeats, sizeof(*walls));
	if (!rc && (!items || !tables || !walls))
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (int i = 0; !rc && i < max_batch * per; i++)
		tables[i] = i;
	for (int b = 1; b <= max_batch && !rc; b *= 2) {
		struct cal_meas cm;
		double ops_ms = 0;

		cal_meas_init(&cm, CAL_HOST_OVERHEAD);
		cm.batch = b;
		cm.tp = 1;
		if (!have(s, &cm)) {
			for (int i = 0; i < b; i++)
				items[i] = (struct synth_item){ .tokens = 1, .context = ctx - 1,
					.block_table = tables + (size_t)i * per, .n_blocks = per,
					.emit = true };
			/* the decode step's wall time (KV length ctx) */
			for (int r = 0, attempt = 0; r < s->c->warmup + s->c->repeats && !rc;) {
				long cs0 = ivcsw();
				int64_t t0 = mono_ns(), kns = 0;

				rc = synth_model_step(sm, items, b, &kns, err);
				if (r >= s->c->warmup)
					walls[r - s->c->warmup] = (double)(mono_ns() - t0) * 1e-6;
				if (r >= s->c->warmup && ivcsw() != cs0 && attempt++ < RETIME_MAX) {
					s->stats->retimed++;
					continue;
				}
				attempt = 0;
				r++;
			}
			if (!rc)
				rc = ops_of_decode_step(s, b, ctx, &ops_ms, err);
			for (int r = 0; r < s->c->repeats && !rc; r++)
				s->samples[r] = walls[r] > ops_ms ? walls[r] - ops_ms : 0.0;
			if (!rc)
				rc = store_point(s, &cm, NAN, err);
		}
		tick(s, "host_overhead");
	}
	free(walls);
	free(items);
	free(tables);
	synth_model_free(sm);
	return rc;
}


/* Whole steps (docs/calibration.md, "Whole steps"): the synthetic step's
 * wall time, measured as the live executor measures it (CLOCK_MONOTONIC
 * around synth_model_step), at shapes that span what a serving run forms:
 * decode batches at two KV lengths, single prefill chunks, and a chunk
 * mixed with decodes.  Stored whole (op host_overhead, variant
 * "step:MODEL"; batch = requests in the step, q_len = the prefill chunk's
 * tokens or NA, kv_len = the decodes' KV length or NA, tokens = the
 * step's tokens); `calibrate run --catalog-out` fits the host terms to
 * them (host-fit.h). */
struct step_shape {
	int n_dec, dec_kv;            /* decodes and their KV length (new token included) */
	int chunk;                    /* one prefill chunk's tokens after 0 context; 0 = none */
};

/* The grid (at most cap shapes into out, which may be NULL); returns how
 * many there are. */
static size_t step_grid(const struct sweep_config *c, struct step_shape *out, size_t cap)
{
	static const int dec_n[] = { 1, 4, 16, 64 }, dec_kv[] = { 64, 256 };
	size_t n = 0;

#define ADD(...) do { if (out && n < cap) out[n] = (struct step_shape){ __VA_ARGS__ }; n++; } while (0)
	for (size_t k = 0; k < sizeof(dec_kv) / sizeof(*dec_kv); k++)
		for (size_t i = 0; i < sizeof(dec_n) / sizeof(*dec_n); i++)
			if (dec_kv[k] <= c->max_kv)
				ADD(.n_dec = dec_n[i], .dec_kv = dec_kv[k]);
	for (int q = 16; q <= c->max_tokens && q <= 1024; q *= 4)
		ADD(.chunk = q);
	if (c->max_tokens >= 128)
		for (int d = 4; d <= 16; d *= 4)
			ADD(.n_dec = d, .dec_kv = 64, .chunk = 128);
#undef ADD
	return n;
}

enum { STEP_MAX_SHAPES = 32, STEP_MAX_DEC = 64, STEP_BS = 16 };

/* Time the grid's steps g[0 .. ng) on a synthetic model of shape sh (only
 * its decode batches when decodes_only), stored as `variant`. */
static int time_steps(struct sweep *s, const struct synth_shape *shape,
		      const struct step_shape *g, size_t ng, bool decodes_only,
		      const char *variant, struct ss_error *err)
{
	const int bs = STEP_BS;
	int per_dec = 256 / bs + 1, per_pre = 1024 / bs + 1;
	struct synth_model *sm = NULL;
	struct synth_item items[STEP_MAX_DEC + 1];
	int32_t *tables = NULL;
	int rc;

	rc = synth_model_new(&sm, s->kb, shape, STEP_MAX_DEC * per_dec + per_pre, bs, 1, err);
	tables = calloc((size_t)STEP_MAX_DEC * per_dec + per_pre, sizeof(*tables));
	if (!rc && !tables)
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (int i = 0; !rc && i < STEP_MAX_DEC * per_dec + per_pre; i++)
		tables[i] = i;
	for (size_t k = 0; k < ng && !rc; k++) {
		const struct step_shape *sh = &g[k];
		int n = 0;
		struct cal_meas cm;

		if (decodes_only && sh->chunk)
			continue;
		cal_meas_init(&cm, CAL_HOST_OVERHEAD);
		snprintf(cm.variant, sizeof(cm.variant), "%s", variant);
		cm.batch = sh->n_dec + (sh->chunk > 0);
		cm.q_len = sh->chunk ? sh->chunk : CAL_NA;
		cm.kv_len = sh->n_dec ? sh->dec_kv : CAL_NA;
		cm.tokens = sh->n_dec + sh->chunk;
		cm.tp = 1;
		if (!have(s, &cm)) {
			for (int i = 0; i < sh->n_dec; i++)
				items[n++] = (struct synth_item){ .tokens = 1, .context = sh->dec_kv - 1,
					.block_table = tables + (size_t)i * per_dec, .n_blocks = per_dec,
					.emit = true };
			if (sh->chunk)
				items[n++] = (struct synth_item){ .tokens = sh->chunk, .context = 0,
					.block_table = tables + (size_t)STEP_MAX_DEC * per_dec,
					.n_blocks = per_pre, .emit = true };
			for (int r = 0, attempt = 0; r < s->c->warmup + s->c->repeats && !rc;) {
				long cs0 = ivcsw();
				int64_t t0 = mono_ns();

				rc = synth_model_step(sm, items, n, NULL, err);
				if (r >= s->c->warmup)
					s->samples[r - s->c->warmup] = (double)(mono_ns() - t0) * 1e-6;
				if (r >= s->c->warmup && ivcsw() != cs0 && attempt++ < RETIME_MAX) {
					s->stats->retimed++;
					continue;
				}
				attempt = 0;
				r++;
			}
			if (!rc)
				rc = store_point(s, &cm, NAN, err);
		}
		tick(s, "whole steps");
	}
	free(tables);
	synth_model_free(sm);
	return rc;
}

/* The model's whole steps, then (a model of more than one layer) the
 * decode batches of its one-layer slice, the same widths and LM head: what
 * a step's host time owes to each layer (its weights reloaded into the
 * core's caches once a step) and what it owes to the step itself
 * (metadata, embedding and LM head), which a one-layer drafter's pass
 * (speculative decoding) pays in part; host-fit.h fits the two apart. */
static int sweep_steps(struct sweep *s, struct ss_error *err)
{
	struct step_shape g[STEP_MAX_SHAPES];
	size_t ng = step_grid(s->c, g, STEP_MAX_SHAPES);
	struct synth_shape one = s->c->shape;
	int rc;

	rc = time_steps(s, &s->c->shape, g, ng, false, s->step_variant, err);
	one.layers = 1;
	if (!rc && s->c->shape.layers > 1)
		rc = time_steps(s, &one, g, ng, true, s->step1_variant, err);
	return rc;
}

/* ---- driver ----------------------------------------------------------------- */

int sweep_run(struct cal_store *st, const struct sweep_config *cfg, struct sweep_stats *stats,
	      struct ss_error *err)
{
	static int (*const phases[])(struct sweep *, struct ss_error *) = {
		sweep_gemm, sweep_attention, sweep_elementwise, sweep_host, sweep_steps, sweep_lora,
	};
	struct kernel_backend_config kc = {
		.threads = cfg->threads > 0 ? cfg->threads : 1, .module_dir = cfg->module_dir,
	};
	struct sweep s = { .c = cfg, .st = st, .stats = stats };
	char bus[32];
	int rc;

	memset(stats, 0, sizeof(*stats));
	if (cfg->repeats < 1 || cfg->warmup < 0 || cfg->max_tokens < 16 || cfg->max_kv < 16)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "calibrate run: expected repeats >= 1, warmup >= 0, max tokens and KV >= 16");
	rc = synth_shape_check(&cfg->shape, err);
	if (rc)
		return rc;
	rc = kernel_backend_new(&s.kb, cfg->backend, &kc, err);
	if (rc)
		return rc;
	kernel_backend_device_name(s.kb, stats->device_desc, sizeof(stats->device_desc));
	kernel_backend_pci_bus_id(s.kb, bus, sizeof(bus));
	meter_open(&s.meter, cfg->backend, bus, cfg->powercap_root);
	snprintf(stats->meter, sizeof(stats->meter), "%s", s.meter.what);
	snprintf(s.variant, sizeof(s.variant), "servesim-%s:%s", cfg->backend, cfg->model);
	snprintf(s.host_variant, sizeof(s.host_variant), "total:%s", cfg->model);
	snprintf(s.step_variant, sizeof(s.step_variant), "step:%s", cfg->model);
	snprintf(s.step1_variant, sizeof(s.step1_variant), "step1:%s", cfg->model);
	s.samples = malloc((size_t)cfg->repeats * sizeof(double));
	if (!s.samples) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	rc = cal_store_query(st, cfg->device, -1, collect_have, &s, err);
	if (rc)
		goto out;
	if (s.n_have)
		qsort(s.have, s.n_have, sizeof(*s.have), cmp_key);
	/* points in the grid, for progress */
	for (int m = 1; m <= cfg->max_tokens; m *= 2)
		s.total += 5 + 4;   /* five GEMMs and four element-wise kinds */
	for (int q = 16; q <= cfg->max_tokens; q *= 4)
		for (int kv = 0; kv <= cfg->max_kv; kv = kv ? kv * 4 : 256)
			s.total++;
	for (int b = 1; b <= 64; b *= 4)
		for (int kv = 16; kv <= cfg->max_kv; kv *= 4)
			s.total++;
	s.total += 7;   /* host overhead at batch 1..64 */
	s.total += lora_points(cfg);
	s.total += (int64_t)step_grid(cfg, NULL, 0);
	if (cfg->shape.layers > 1) {   /* the one-layer slice's decode batches */
		struct step_shape g[STEP_MAX_SHAPES];
		size_t ng = step_grid(cfg, g, STEP_MAX_SHAPES);

		for (size_t k = 0; k < ng; k++)
			s.total += !g[k].chunk;
	}

	/* Each phase is one transaction: a killed sweep keeps the phases it
	 * finished, and a rerun skips their points.  One stopped (cfg->stop)
	 * keeps the points of its phase stored so far, each complete. */
	for (size_t p = 0; p < sizeof(phases) / sizeof(phases[0]) && !rc; p++) {
		rc = cal_store_begin(st, err);
		if (rc)
			break;
		rc = phases[p](&s, err);
		if (rc == -EINTR) {
			int crc = cal_store_commit(st, err);

			rc = crc ? crc : rc;
			break;
		}
		if (rc) {
			cal_store_rollback(st);
			break;
		}
		rc = cal_store_commit(st, err);
	}
out:
	free(s.samples);
	free(s.have);
	meter_close(&s.meter);
	kernel_backend_free(s.kb);
	return rc;
}
