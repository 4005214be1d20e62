/* Graphs of decode-only steps (kernels/step.c, docs/kernels.md "Graphs"):
 * the backend's graph ops and the synthetic step run through them.
 *
 *   test-graph               the host backends have no graphs: -ENOTSUP from
 *                            every graph call and from synth_model_set_graphs,
 *                            and a model without graphs runs as before
 *   test-graph cuda [exact]  the graph path on the CUDA backend (exit 77,
 *                            skipped, where it is not built or finds no GPU):
 *                            decode steps through graphs against the same
 *                            steps run eagerly by a twin model, below, at
 *                            and above the captured sizes, contexts
 *                            growing, the KV caches compared afterwards;
 *                            an upload while capturing fails.  With exact
 *                            (the CPU emulation, tests/meson.build) graph
 *                            and eager outputs and caches must be equal bit
 *                            for bit: every operator computes a row the same
 *                            whatever the rows around it, the emulated GEMM
 *                            included, and the decode split below is the
 *                            same for both (partitions of 256 keys).  On a
 *                            GPU cuBLAS may choose another kernel for the
 *                            padded row count, so there logits must agree
 *                            within the step tolerance and tokens unless the
 *                            eager logits nearly tie.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "step.h"

static const char *backend_name;   /* NULL: the host tests */
static bool exact;

static const struct synth_shape tiny = {
	.layers = 2, .hidden = 64, .heads = 8, .kv_heads = 2, .head_dim = 16,
	.intermediate = 88, .vocab = 301, .gated = true,
};

#define BS 4              /* tokens per KV block */
#define STEP_TOL 6e-2     /* bf16 step tolerance relative to max|ref| (test-kernels.c) */

static struct kernel_backend *open_backend(const char *name)
{
	struct kernel_backend_config cfg = {
		.threads = 1, .module_dir = getenv("SERVESIM_MODULE_DIR"),
	};
	struct kernel_backend *kb = NULL;
	struct ss_error err = { 0 };
	int rc = kernel_backend_new(&kb, name, &cfg, &err);

	ck_assert_msg(rc == 0, "%s: %s", name, err.msg);
	return kb;
}

static struct synth_model *model(struct kernel_backend *kb, int nb, uint64_t seed)
{
	struct synth_model *sm = NULL;
	struct ss_error err = { 0 };
	int rc = synth_model_new(&sm, kb, &tiny, nb, BS, seed, &err);

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

/* ---- host backends ---- */

static void host_has_no_graphs(const char *name)
{
	struct kernel_backend *kb = open_backend(name);
	struct synth_model *sm = model(kb, 16, 3);
	static const int32_t sizes[] = { 1, 2, 4 };
	static const int32_t table[] = { 5, 6 };
	struct ss_error err = { 0 };
	void *g = (void *)&err;

	ck_assert(!kernel_backend_has_graphs(kb));
	ck_assert_int_eq(kernel_graph_begin(kb, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, name));
	ck_assert_int_eq(kernel_graph_end(kb, &g, &err), -ENOTSUP);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(kernel_graph_launch(kb, &err, &err), -ENOTSUP);
	kernel_graph_free(kb, NULL);
	ck_assert_int_eq(synth_model_set_graphs(sm, sizes, 3, 64, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, "no graphs"));
	ck_assert_int_eq(synth_model_set_graphs(sm, NULL, 0, 0, &err), 0);   /* off: fine */
	/* a decode-only step still runs, eagerly */
	step(sm, &(struct synth_item){ .tokens = 5, .block_table = table, .n_blocks = 2 }, 1);
	step(sm, &(struct synth_item){ .tokens = 1, .context = 5, .block_table = table,
				       .n_blocks = 2, .emit = true }, 1);
	ck_assert_int_eq(synth_model_n_emit(sm), 1);
	ck_assert_uint_eq(synth_model_graph_steps(sm), 0);
	synth_model_free(sm);
	kernel_backend_free(kb);
}

START_TEST(host_backends_have_no_graphs)
{
	host_has_no_graphs("ref");
	host_has_no_graphs("cpu");
}
END_TEST

/* ---- the CUDA backend ---- */

#define MAX_REQ 12
#define MAX_BLOCKS 96

/* Requests decoding side by side on a graph model (a) and an eager twin (b). */
struct twin {
	struct kernel_backend *kb;
	struct synth_model *a, *b;
	int nb;
	int n_req;
	int32_t tables[MAX_REQ][MAX_BLOCKS];
	int n_blocks[MAX_REQ];
	int32_t context[MAX_REQ];
	bool *owned;              /* [nb]: a request's block */
	int next;                 /* the next block twin_add hands out */
};

/* Request r gets blocks blocks: block 0 goes to request 0 first, so a
 * padding row that wrote slot 0 would clobber a live request's position 0;
 * the rest in a scattered order (stride 7, coprime with nb). */
static void twin_add(struct twin *t, int blocks)
{
	int r = t->n_req++;

	ck_assert_int_le(blocks, MAX_BLOCKS);
	for (int b = 0; b < blocks; b++) {
		int id = t->next;

		t->next = (t->next + 7) % t->nb;
		ck_assert(!t->owned[id]);
		t->owned[id] = true;
		t->tables[r][b] = id;
	}
	t->n_blocks[r] = blocks;
}

static void twin_open(struct twin *t, int nb, const int32_t *sizes, int n_sizes, int max_kv_len,
		      bool up_front)
{
	struct ss_error err = { 0 };
	int rc;

	memset(t, 0, sizeof(*t));
	t->kb = open_backend(backend_name);
	t->nb = nb;
	t->a = model(t->kb, nb, 11);
	t->b = model(t->kb, nb, 11);
	t->owned = calloc((size_t)nb, sizeof(bool));
	rc = synth_model_set_graphs(t->a, sizes, n_sizes, max_kv_len, &err);
	ck_assert_msg(rc == 0, "%s", err.msg);
	if (up_front) {
		rc = synth_model_capture_graphs(t->a, &err);
		ck_assert_msg(rc == 0, "%s", err.msg);
	}
}

static void twin_close(struct twin *t)
{
	synth_model_free(t->a);
	synth_model_free(t->b);
	kernel_backend_free(t->kb);
	free(t->owned);
}

static float max_abs(const float *x, size_t n)
{
	float m = 0;

	for (size_t i = 0; i < n; i++)
		m = fmaxf(m, fabsf(x[i]));
	return m;
}

/* The last step's outputs of a and b agree (bit for bit when exact). */
static void twin_compare(struct twin *t, const char *what)
{
	int e = synth_model_n_emit(t->a);
	size_t nh = (size_t)e * tiny.hidden, nl = (size_t)e * tiny.vocab;
	float *h[2], *l[2];
	int32_t *ids[2];
	struct ss_error err = { 0 };

	ck_assert_int_eq(e, synth_model_n_emit(t->b));
	ck_assert_int_gt(e, 0);
	for (int m = 0; m < 2; m++) {
		h[m] = malloc(nh * sizeof(float));
		l[m] = malloc(nl * sizeof(float));
		ids[m] = malloc((size_t)e * sizeof(int32_t));
		ck_assert_int_eq(synth_model_outputs(m ? t->b : t->a, h[m], l[m], ids[m], &err), 0);
	}
	for (int r = 0; r < e; r++) {
		const float *lr = l[1] + (size_t)r * tiny.vocab;

		/* on a GPU a near tie may break the other way */
		ck_assert_msg(ids[0][r] == ids[1][r] ||
			      (!exact && lr[ids[1][r]] - lr[ids[0][r]] <=
					 STEP_TOL * max_abs(lr, tiny.vocab)),
			      "%s: row %d: the graph samples %d, eager %d", what, r, ids[0][r],
			      ids[1][r]);
	}
	if (exact) {
		ck_assert_msg(memcmp(h[0], h[1], nh * sizeof(float)) == 0,
			      "%s: hidden states differ", what);
		ck_assert_msg(memcmp(l[0], l[1], nl * sizeof(float)) == 0, "%s: logits differ",
			      what);
	} else {
		float s = max_abs(l[1], nl);

		for (size_t i = 0; i < nl; i++)
			ck_assert_msg(fabsf(l[0][i] - l[1][i]) <= STEP_TOL * s,
				      "%s: logit %zu: %g against %g", what, i, l[0][i], l[1][i]);
	}
	for (int m = 0; m < 2; m++) {
		free(h[m]);
		free(l[m]);
		free(ids[m]);
	}
}

/* Prefill request r's prompt of len tokens in both models (eager in both). */
static void twin_prefill(struct twin *t, int r, int len)
{
	struct synth_item it = { .tokens = len, .block_table = t->tables[r],
				 .n_blocks = t->n_blocks[r], .emit = true };

	step(t->a, &it, 1);
	step(t->b, &it, 1);
	twin_compare(t, "prefill");
	t->context[r] = len;
}

/* One decode step of requests first..first+n-1 in both models: a graph
 * step on a when graphed, eager on b. */
static void twin_decode(struct twin *t, int first, int n, bool graphed)
{
	struct synth_item items[MAX_REQ];
	uint64_t before = synth_model_graph_steps(t->a);
	char what[64];

	for (int i = 0; i < n; i++) {
		int r = first + i;

		items[i] = (struct synth_item){ .tokens = 1, .context = t->context[r],
						.block_table = t->tables[r],
						.n_blocks = t->n_blocks[r], .emit = true };
	}
	step(t->a, items, n);
	step(t->b, items, n);
	ck_assert_uint_eq(synth_model_graph_steps(t->a), before + (graphed ? 1 : 0));
	ck_assert_uint_eq(synth_model_graph_steps(t->b), 0);
	snprintf(what, sizeof(what), "decode of %d from %d%s", n, first, graphed ? " (graph)" : "");
	twin_compare(t, what);
	for (int i = 0; i < n; i++)
		t->context[first + i]++;
}

/* The caches of a and b, K and V of every layer, equal (exact) or, on a
 * GPU, equal where no request owns the block (still zero: padding wrote
 * nothing there). */
static void twin_compare_kv(struct twin *t)
{
	const struct kernel_kv_cache *ca = synth_model_kv(t->a), *cb = synth_model_kv(t->b);
	size_t n = kernel_kv_cache_elems(ca), block = (size_t)BS * tiny.kv_heads * tiny.head_dim;
	float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
	struct ss_error err = { 0 };

	for (int kv = 0; kv < 2; kv++) {
		void *xa = kv ? ca->v : ca->k, *yb = kv ? cb->v : cb->k;

		ck_assert_int_eq(kernel_buf_download_f32(t->kb, x, xa, 0, n, &err), 0);
		ck_assert_int_eq(kernel_buf_download_f32(t->kb, y, yb, 0, n, &err), 0);
		if (exact)
			ck_assert_msg(memcmp(x, y, n * sizeof(float)) == 0,
				      "the graph model's %s cache differs from the eager one's",
				      kv ? "V" : "K");
		for (size_t i = 0; i < n; i++)
			if (!t->owned[i / block % (size_t)t->nb])
				ck_assert_msg(x[i] == 0, "%s element %zu of an unowned block is %g",
					      kv ? "V" : "K", i, x[i]);
	}
	free(x);
	free(y);
}

/* Sizes 1, 2, 4, 8 captured up front; steps of 1 (a size), 3 (padded to
 * 4), 4 (a size), 5 (padded to 8) and 10 (above: eager), contexts growing
 * across block boundaries; then the caches. */
START_TEST(graph_steps_equal_eager_steps)
{
	static const int32_t sizes[] = { 1, 2, 4, 8 };
	static const int prompts[10] = { 3, 9, 4, 14, 1, 7, 12, 2, 5, 10 };
	static const int order[][2] = {   /* first request, count */
		{ 0, 1 }, { 0, 3 }, { 2, 4 }, { 1, 5 }, { 0, 10 }, { 4, 1 }, { 3, 3 }, { 0, 8 },
		{ 0, 10 }, { 5, 5 }, { 0, 4 },
	};
	struct twin t;

	twin_open(&t, 64, sizes, 4, 64, true);
	for (int r = 0; r < 10; r++) {
		twin_add(&t, 6);   /* 24 positions: room for the prompt and the decodes */
		twin_prefill(&t, r, prompts[r]);
	}
	for (size_t s = 0; s < sizeof(order) / sizeof(order[0]); s++)
		twin_decode(&t, order[s][0], order[s][1], order[s][1] <= 8);
	twin_compare_kv(&t);
	twin_close(&t);
}
END_TEST

/* Graphs captured for KV lengths up to 1024 launch decode attention with
 * four partitions of 256 keys; each sequence reads only the partitions its
 * kv_len reaches (the rest return at once, and the reduce combines its own
 * count), so a 300-key context (two partitions) and short ones beside it
 * come out as the eager step's, which splits at 301 keys into the same
 * two.  Captured lazily, on first use. */
START_TEST(graph_decode_reads_only_its_partitions)
{
	static const int32_t sizes[] = { 2, 4 };
	struct twin t;

	twin_open(&t, 320, sizes, 2, 1024, false);
	twin_add(&t, 80);
	twin_prefill(&t, 0, 300);
	twin_add(&t, 2);
	twin_prefill(&t, 1, 5);
	twin_add(&t, 2);
	twin_prefill(&t, 2, 1);
	twin_decode(&t, 0, 1, true);      /* 1 padded to 2, split */
	twin_decode(&t, 0, 3, true);      /* 3 padded to 4 */
	twin_decode(&t, 1, 2, true);      /* short ones only */
	twin_compare_kv(&t);
	twin_close(&t);
}
END_TEST

/* Steps that cannot use the graphs run eagerly: prefills, a mixed step, a
 * decode whose block table is wider than the graphs read. */
START_TEST(steps_outside_the_graphs_run_eagerly)
{
	static const int32_t sizes[] = { 4 };
	struct synth_item mixed[2];
	struct twin t;

	twin_open(&t, 64, sizes, 1, 8, false);   /* tables of 2 blocks of 4 tokens */
	twin_add(&t, 3);
	twin_prefill(&t, 0, 8);
	twin_add(&t, 2);
	twin_prefill(&t, 1, 3);
	twin_add(&t, 2);
	ck_assert_uint_eq(synth_model_graph_steps(t.a), 0);
	twin_decode(&t, 0, 1, false);            /* 9 keys > the graphs' 8: eager */
	twin_decode(&t, 1, 1, true);             /* 4 keys: graphed */
	mixed[0] = (struct synth_item){ .tokens = 1, .context = t.context[1],
					.block_table = t.tables[1], .n_blocks = 2, .emit = true };
	mixed[1] = (struct synth_item){ .tokens = 3, .block_table = t.tables[2], .n_blocks = 2,
					.emit = true };
	step(t.a, mixed, 2);                     /* a decode and a prefill: eager */
	step(t.b, mixed, 2);
	twin_compare(&t, "mixed");
	ck_assert_uint_eq(synth_model_graph_steps(t.a), 1);
	twin_compare_kv(&t);
	twin_close(&t);
}
END_TEST

/* What CUDA refuses under capture fails here too: an upload (a copy from
 * pageable memory) returns the capture error and spoils the capture, whose
 * end then fails; the backend works on afterwards.  An empty capture gives
 * a graph that launches.  Bad sizes are refused. */
START_TEST(upload_during_capture_fails)
{
	struct kernel_backend *kb = open_backend(backend_name);
	struct synth_model *sm = model(kb, 16, 5);
	static const int32_t down[] = { 4, 2 };
	int32_t host[4] = { 1, 2, 3, 4 }, back[4] = { 0 };
	struct ss_error err = { 0 };
	void *buf = NULL, *g = NULL;

	ck_assert(kernel_backend_has_graphs(kb));
	ck_assert_int_eq(kernel_buf_alloc(kb, &buf, sizeof(host), KERNEL_MEM_DEVICE, &err), 0);
	ck_assert_int_eq(kernel_graph_begin(kb, &err), 0);
	ck_assert_int_eq(kernel_buf_upload(kb, buf, 0, host, sizeof(host), &err), -EIO);
	ck_assert_msg(strstr(err.msg, "cudaMemcpyAsync (upload)") && strstr(err.msg, "capturing"), "%s",
		      err.msg);
	ck_assert_int_eq(kernel_graph_end(kb, &g, &err), -EIO);
	ck_assert_msg(strstr(err.msg, "cudaStreamEndCapture"), "%s", err.msg);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(kernel_buf_upload(kb, buf, 0, host, sizeof(host), &err), 0);
	ck_assert_int_eq(kernel_buf_download(kb, back, buf, 0, sizeof(back), &err), 0);
	ck_assert_int_eq(back[3], 4);
	ck_assert_int_eq(kernel_graph_begin(kb, &err), 0);
	ck_assert_int_eq(kernel_graph_end(kb, &g, &err), 0);
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(kernel_graph_launch(kb, g, &err), 0);
	ck_assert_int_eq(kernel_backend_sync(kb, &err), 0);
	kernel_graph_free(kb, g);
	ck_assert_int_eq(kernel_graph_launch(kb, NULL, &err), -EINVAL);
	ck_assert_int_eq(synth_model_set_graphs(sm, down, 2, 64, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "ascending"));
	ck_assert_int_eq(synth_model_set_graphs(sm, down, 1, 0, &err), -EINVAL);
	kernel_buf_free(kb, buf);
	synth_model_free(sm);
	kernel_backend_free(kb);
}
END_TEST

/* A split decode needs its partials buffer; growing it is a cudaMalloc,
 * which capture refuses: the first decode of that size fails under
 * capture (so does the capture), and once an eager run has grown the
 * buffer the same decode captures, and its replay writes what the eager
 * run wrote.  (graph_capture in step.c runs each graph eagerly first for
 * this reason.) */
START_TEST(decode_partials_grow_only_outside_capture)
{
	struct kernel_backend *kb = open_backend(backend_name);
	struct kernel_kv_cache c = { .layers = 1, .num_blocks = 8, .block_size = 128,
				     .kv_heads = 1, .head_dim = 16 };
	const int32_t len[1] = { 600 }, table[8] = { 7, 6, 5, 4, 3, 2, 1, 0 };
	float q[16], eager[16], replay[16];
	float *kv = malloc(kernel_kv_cache_elems(&c) * sizeof(float));
	void *qb, *ob, *lb, *tb, *g = NULL;
	struct ss_error err = { 0 };
	struct kernel_attn_decode_args a;

	ck_assert_int_eq(kernel_kv_cache_alloc(kb, &c, KERNEL_MEM_DEVICE, &err), 0);
	for (size_t i = 0; i < kernel_kv_cache_elems(&c); i++)
		kv[i] = (float)((i * 37 % 101) / 50.0 - 1.0);
	ck_assert_int_eq(kernel_buf_upload_f32(kb, c.k, 0, kv, kernel_kv_cache_elems(&c), &err), 0);
	ck_assert_int_eq(kernel_buf_upload_f32(kb, c.v, 0, kv, kernel_kv_cache_elems(&c), &err), 0);
	for (int i = 0; i < 16; i++)
		q[i] = (float)(i % 5) / 4.0f;
	ck_assert_int_eq(kernel_buf_alloc(kb, &qb, 16 * 2, KERNEL_MEM_DEVICE, &err), 0);
	ck_assert_int_eq(kernel_buf_alloc(kb, &ob, 16 * 2, KERNEL_MEM_DEVICE, &err), 0);
	ck_assert_int_eq(kernel_buf_alloc(kb, &lb, sizeof(len), KERNEL_MEM_DEVICE, &err), 0);
	ck_assert_int_eq(kernel_buf_alloc(kb, &tb, sizeof(table), KERNEL_MEM_DEVICE, &err), 0);
	ck_assert_int_eq(kernel_buf_upload_f32(kb, qb, 0, q, 16, &err), 0);
	ck_assert_int_eq(kernel_buf_upload(kb, lb, 0, len, sizeof(len), &err), 0);
	ck_assert_int_eq(kernel_buf_upload(kb, tb, 0, table, sizeof(table), &err), 0);
	/* 1024 keys, one sequence of one KV head on 132 SMs: four partitions */
	a = (struct kernel_attn_decode_args){
		.n_seqs = 1, .heads = 1, .layer = 0, .max_kv_len = 1024, .scale = 0.25f,
		.q = { qb, 0, 16 }, .out = { ob, 0, 16 }, .kv_len = { lb, 0, 1 },
		.block_tables = { tb, 0, 8 }, .cache = &c,
	};
	ck_assert_int_eq(kernel_graph_begin(kb, &err), 0);
	ck_assert_int_eq(kernel_attn_decode(kb, &a, &err), -EIO);
	ck_assert_msg(strstr(err.msg, "decode partials") && strstr(err.msg, "capturing"), "%s",
		      err.msg);
	ck_assert_int_eq(kernel_graph_end(kb, &g, &err), -EIO);
	ck_assert_int_eq(kernel_attn_decode(kb, &a, &err), 0);   /* eager: grows the buffer */
	ck_assert_int_eq(kernel_buf_download_f32(kb, eager, ob, 0, 16, &err), 0);
	ck_assert_int_eq(kernel_graph_begin(kb, &err), 0);
	ck_assert_int_eq(kernel_attn_decode(kb, &a, &err), 0);
	ck_assert_int_eq(kernel_graph_end(kb, &g, &err), 0);
	ck_assert_int_eq(kernel_buf_upload_f32(kb, ob, 0, q, 16, &err), 0);   /* clobber */
	ck_assert_int_eq(kernel_graph_launch(kb, g, &err), 0);
	ck_assert_int_eq(kernel_buf_download_f32(kb, replay, ob, 0, 16, &err), 0);
	ck_assert_msg(memcmp(eager, replay, sizeof(eager)) == 0, "the replay wrote other values");
	ck_assert(eager[0] == eager[0]);   /* not NaN: the partials were combined */
	kernel_graph_free(kb, g);
	kernel_buf_free(kb, qb);
	kernel_buf_free(kb, ob);
	kernel_buf_free(kb, lb);
	kernel_buf_free(kb, tb);
	kernel_kv_cache_free(kb, &c);
	kernel_backend_free(kb);
	free(kv);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("graph");
	TCase *tc = tcase_create("graph");

	tcase_set_timeout(tc, 120);
	if (!backend_name) {
		tcase_add_test(tc, host_backends_have_no_graphs);
	} else {
		tcase_add_test(tc, graph_steps_equal_eager_steps);
		tcase_add_test(tc, graph_decode_reads_only_its_partitions);
		tcase_add_test(tc, steps_outside_the_graphs_run_eagerly);
		tcase_add_test(tc, upload_during_capture_fails);
		tcase_add_test(tc, decode_partials_grow_only_outside_capture);
	}
	suite_add_tcase(s, tc);
	return s;
}

/* `test-graph [cuda [exact]]`: see the top; exit 77 without the backend. */
int main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	if (argc > 1) {
		struct kernel_backend_config cfg = { .module_dir = getenv("SERVESIM_MODULE_DIR") };
		struct kernel_backend *kb = NULL;
		struct ss_error err = { 0 };

		backend_name = argv[1];
		exact = argc > 2 && !strcmp(argv[2], "exact");
		if (kernel_backend_new(&kb, backend_name, &cfg, &err)) {
			fprintf(stderr, "%s: skipped\n", err.msg);
			return 77;
		}
		kernel_backend_free(kb);
	}
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
