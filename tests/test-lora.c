/* Multi-LoRA serving (sim/lora.h, docs/lora.md): --lora's parser and its
 * one-line errors, adapter sizes, the GPU cache's LRU order, the
 * max_loras rule of a step and of the policy's view, load times, the KV
 * capacity the adapter slots take, and whole runs that keep the rule. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "engine-fixture.h"
#include "lora.h"

static struct lora_config parse_ok(const char *arg)
{
	struct lora_config c;
	struct ss_error err = { 0 };

	if (lora_config_parse(&c, arg, &err))
		ck_abort_msg("--lora %s: %s", arg, err.msg);
	return c;
}

START_TEST(parse_defaults_and_keys)
{
	struct lora_config c = parse_ok("adapters=100");

	ck_assert_uint_eq(c.n_adapters, 100);
	ck_assert_int_eq(c.n_ranks, 1);
	ck_assert_int_eq(c.rank[0], 16);
	ck_assert_int_eq(c.max_loras, 1);          /* vLLM's default */
	ck_assert_int_eq(c.popularity, LORA_POP_UNIFORM);
	ck_assert(!c.from_trace);
	c = parse_ok("adapters=8,mix=8:2/64:1/16:1,popularity=zipf:1.5,max_loras=4,max_cpu_loras=6,targets=all");
	ck_assert_int_eq(c.n_ranks, 3);
	ck_assert_int_eq(c.max_rank, 64);
	ck_assert_double_eq_tol(c.share[0], 0.5, 1e-12);
	ck_assert_double_eq_tol(c.share[1] + c.share[2], 0.5, 1e-12);
	ck_assert_int_eq(c.popularity, LORA_POP_ZIPF);
	ck_assert_double_eq_tol(c.zipf_s, 1.5, 1e-12);
	ck_assert_int_eq(c.max_loras, 4);
	ck_assert_uint_eq(c.max_cpu_loras, 6);
	ck_assert_int_eq(c.targets, LORA_TARGET_ALL);
	c = parse_ok("rank=8");
	ck_assert(c.from_trace);
}
END_TEST

/* Every bad spec is refused with one line that names --lora and what was
 * expected. */
START_TEST(parse_errors_are_one_line)
{
	static const struct { const char *arg, *says; } bad[] = {
		{ "adapters=0", "adapters=0: expected N" },
		{ "adapters=x", "adapters=x: expected N" },
		{ "rank=0", "rank=0: expected R" },
		{ "rank=2000", "rank=2000" },
		{ "mix=8", "mix=8: expected R:W" },
		{ "mix=8:0.5/8:0.5", "mix=" },
		{ "rank=8,mix=8:1", "alternatives" },
		{ "popularity=pareto", "popularity=pareto: expected zipf:S|uniform" },
		{ "popularity=zipf:0", "popularity=zipf:0" },
		{ "max_loras=0", "max_loras=0" },
		{ "max_loras=4,max_cpu_loras=2", "max_cpu_loras=2: expected at least max_loras (4)" },
		{ "targets=mlp", "targets=mlp: expected qkvo|all" },
		{ "bogus=1", "'bogus': expected KEY=VALUE" },
		{ "adapters", "'adapters': expected KEY=VALUE" },
		{ "adapters=2,adapters=3", "adapters= given twice" },
		{ "rank_order=sorted", "rank_order=sorted: expected drawn|cycle" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lora_config c;
		struct ss_error err = { 0 };

		ck_assert_int_eq(lora_config_parse(&c, bad[i].arg, &err), -EINVAL);
		ck_assert_msg(!strncmp(err.msg, "--lora: ", 8), "%s: %s", bad[i].arg, err.msg);
		ck_assert_msg(strstr(err.msg, bad[i].says), "%s: '%s' lacks '%s'", bad[i].arg,
			      err.msg, bad[i].says);
		ck_assert_msg(!strchr(err.msg, '\n'), "%s: more than one line", bad[i].arg);
	}
}
END_TEST

/* An adapter's bytes: r x (d_in + d_out) per module and layer, in the
 * model's dtype; q, k, v, o for qkvo, the gated MLP's three with all. */
START_TEST(adapter_bytes_from_shapes)
{
	struct lora_config c = parse_ok("adapters=1,rank=8");
	const struct model_spec *m = &tiny_model;   /* hidden 256, 4 x 64 heads, ffn 512 */
	double qkvo = (256 + 256) * 4.0;
	double mlp = (256 + 512) * 3.0;

	ck_assert_double_eq_tol(lora_adapter_bytes(&c, m, 8), 8 * qkvo * 2 * 2, 1e-6);
	c.targets = LORA_TARGET_ALL;
	ck_assert_double_eq_tol(lora_adapter_bytes(&c, m, 8), 8 * (qkvo + mlp) * 2 * 2, 1e-6);
	/* slots: max_loras x max_rank; tp 2 halves the column modules' B and
	 * the row modules' A only */
	c = parse_ok("adapters=1,mix=8:1/32:1,max_loras=3");
	ck_assert_double_eq_tol(lora_gpu_bytes(&c, m, 1), 3 * 32 * qkvo * 2 * 2, 1e-6);
	ck_assert_double_eq_tol(lora_gpu_bytes(&c, m, 2),
				3 * 32 * (3 * (256 + 128) + (128 + 256)) * 2 * 2, 1e-6);
}
END_TEST

static struct lora *make_lora(const char *arg, struct lora_config *c)
{
	struct lora *l;
	struct ss_error err = { 0 };

	*c = parse_ok(arg);
	if (lora_new(&l, c, &tiny_model, 1, -1, &err))
		ck_abort_msg("lora_new: %s", err.msg);
	return l;
}

static int64_t step1(struct lora_inst *li, int32_t a, int64_t *gemm)
{
	int32_t tok = 1;
	int64_t load, g;
	struct ss_error err = { 0 };

	ck_assert_int_eq(lora_step(li, &a, &tok, 1, &load, &g, &err), 0);
	if (gemm)
		*gemm = g;
	return load;
}

/* The GPU slots evict the least recently used adapter that the step does
 * not use; a hit costs no load and moves the adapter to the front. */
START_TEST(gpu_cache_is_lru)
{
	struct lora_config c;
	struct lora *l = make_lora("adapters=10,rank=8,max_loras=2", &c);
	struct lora_stats st = { 0 };
	struct lora_inst *li;
	int32_t lru[4];

	ck_assert_int_eq(lora_inst_new(&li, l, &tiny_gpu, 1, &st), 0);
	ck_assert(step1(li, 0, NULL) > 0);          /* cold: loaded */
	ck_assert(step1(li, 1, NULL) > 0);
	ck_assert(step1(li, 0, NULL) == 0);         /* hit */
	ck_assert_uint_eq(lora_gpu_lru(li, lru), 2);
	ck_assert_int_eq(lru[0], 0);
	ck_assert_int_eq(lru[1], 1);
	ck_assert(step1(li, 2, NULL) > 0);          /* evicts 1, the least recent */
	ck_assert(lora_gpu_resident(li, 0));
	ck_assert(!lora_gpu_resident(li, 1));
	ck_assert(lora_gpu_resident(li, 2));
	ck_assert(lora_host_resident(li, 1));       /* still in host memory */
	ck_assert_uint_eq(st.hits, 1);
	ck_assert_uint_eq(st.misses, 3);
	ck_assert_uint_eq(st.evictions, 1);
	/* a step of 2 and 1: 1 is loaded by evicting 0 (least recent), never 2 */
	{
		int32_t a[2] = { 2, 1 }, tok[2] = { 1, 1 };
		int64_t load, gemm;
		struct ss_error err = { 0 };

		ck_assert_int_eq(lora_step(li, a, tok, 2, &load, &gemm, &err), 0);
		ck_assert(lora_gpu_resident(li, 2) && lora_gpu_resident(li, 1));
		ck_assert(!lora_gpu_resident(li, 0));
	}
	lora_inst_free(li);
	lora_free(l);
}
END_TEST

/* The slots a live executor is told (lora_slot, lora_step_loads): they
 * fill in order, a load takes its evicted adapter's slot, a resident
 * adapter keeps its slot; a residency-only step (no times asked) counts
 * hits and loads but prices nothing. */
START_TEST(slots_are_numbered_and_loads_listed)
{
	struct lora_config c;
	struct lora *l = make_lora("adapters=10,rank=8,max_loras=3", &c);
	struct lora_stats st = { 0 };
	struct lora_inst *li;
	struct ss_error err = { 0 };
	const int32_t *loads;
	int32_t tok[3] = { 4, 1, 1 };

	ck_assert_int_eq(lora_inst_new(&li, l, &tiny_gpu, 1, &st), 0);
	{
		int32_t a[3] = { 5, -1, 7 };

		ck_assert_int_eq(lora_step(li, a, tok, 3, NULL, NULL, &err), 0);
		ck_assert_uint_eq(lora_step_loads(li, &loads), 2);
		ck_assert_int_eq(loads[0], 5);
		ck_assert_int_eq(loads[1], 7);
		ck_assert_int_eq(lora_slot(li, 5), 0);
		ck_assert_int_eq(lora_slot(li, 7), 1);
		ck_assert_int_eq(lora_slot(li, -1), -1);
	}
	{
		int32_t a[3] = { 7, 2, 7 };   /* 2 takes the free slot 2 */

		ck_assert_int_eq(lora_step(li, a, tok, 3, NULL, NULL, &err), 0);
		ck_assert_uint_eq(lora_step_loads(li, &loads), 1);
		ck_assert_int_eq(loads[0], 2);
		ck_assert_int_eq(lora_slot(li, 2), 2);
		ck_assert_int_eq(lora_slot(li, 7), 1);
	}
	{
		int32_t a[2] = { 9, 7 };      /* 9 evicts 5 (least recent) and takes slot 0 */

		ck_assert_int_eq(lora_step(li, a, tok, 2, NULL, NULL, &err), 0);
		ck_assert_uint_eq(lora_step_loads(li, &loads), 1);
		ck_assert_int_eq(lora_slot(li, 9), 0);
		ck_assert_int_eq(lora_slot(li, 5), -1);
		ck_assert_int_eq(lora_slot(li, 7), 1);
		ck_assert_int_eq(lora_slot(li, 2), 2);
	}
	{
		int32_t a[1] = { 7 };         /* a hit loads nothing */

		ck_assert_int_eq(lora_step(li, a, tok, 1, NULL, NULL, &err), 0);
		ck_assert_uint_eq(lora_step_loads(li, &loads), 0);
	}
	ck_assert_uint_eq(st.misses, 4);
	ck_assert_uint_eq(st.hits, 3);
	ck_assert_uint_eq(st.evictions, 1);
	ck_assert_uint_eq(st.steps, 4);
	ck_assert_int_eq(st.load_ns, 0);
	ck_assert_int_eq(st.gemm_ns, 0);
	ck_assert(st.load_bytes == 0);
	lora_inst_free(li);
	lora_free(l);
}
END_TEST

static int32_t id_adapter(const void *v)
{
	return *(const int32_t *)v;
}

/* A step with more distinct adapters than max_loras is an error; the
 * policy's view keeps requests whose adapter the running set uses and new
 * adapters while slots are left, in queue order. */
START_TEST(max_loras_per_step_and_view)
{
	struct lora_config c;
	struct lora *l = make_lora("adapters=10,rank=8,max_loras=2", &c);
	struct lora_stats st = { 0 };
	struct lora_inst *li;
	int32_t a[3] = { 1, 2, 3 }, tok[3] = { 1, 1, 1 };
	int64_t load, gemm;
	struct ss_error err = { 0 };
	/* views are the adapter ids themselves, read through adapter_of */
	static const int32_t run_ad[] = { 5, 5 }, wait_ad[] = { 6, 7, 5, 8, -1, 6 };
	const void *waiting[6], *out[6];

	ck_assert_int_eq(lora_inst_new(&li, l, &tiny_gpu, 1, &st), 0);
	ck_assert_int_eq(lora_step(li, a, tok, 3, &load, &gemm, &err), -EPROTO);
	ck_assert(strstr(err.msg, "max_loras=2"));
	ck_assert_int_eq(lora_step(li, a, tok, 2, &load, &gemm, &err), 0);
	for (int k = 0; k < 6; k++)
		waiting[k] = &wait_ad[k];
	/* running uses 5: one slot left, taken by 6 (the first new one);
	 * 7 and 8 wait; 5, none (-1) and 6 again pass */
	lora_run_enter(li, run_ad[0]);
	lora_run_enter(li, run_ad[1]);
	ck_assert_uint_eq(lora_filter(li, waiting, 6, out, id_adapter), 4);
	ck_assert_ptr_eq(out[0], &wait_ad[0]);
	ck_assert_ptr_eq(out[1], &wait_ad[2]);
	ck_assert_ptr_eq(out[2], &wait_ad[4]);
	ck_assert_ptr_eq(out[3], &wait_ad[5]);
	/* one of the two leaves: still one slot taken */
	lora_run_leave(li, run_ad[0]);
	ck_assert_uint_eq(lora_filter(li, waiting, 6, out, id_adapter), 4);
	ck_assert_ptr_eq(out[1], &wait_ad[2]);
	/* an empty running set: the first two adapters in queue order */
	lora_run_leave(li, run_ad[1]);
	ck_assert_uint_eq(lora_filter(li, waiting, 6, out, id_adapter), 4);
	ck_assert_ptr_eq(out[0], &wait_ad[0]);
	ck_assert_ptr_eq(out[1], &wait_ad[1]);
	ck_assert_ptr_eq(out[2], &wait_ad[4]);
	ck_assert_ptr_eq(out[3], &wait_ad[5]);
	lora_inst_free(li);
	lora_free(l);
}
END_TEST

/* The indexed queue (lora-wait.h) gives the view lora_filter gives over
 * the same queue, cut at len, through random joins at the back, preempted
 * requests back at the front, steps taking the view's first entries,
 * finishes and rejections, many adapters and few slots and the reverse:
 * the reference scans the queue, the index keeps its view between steps. */
struct witem {
	int32_t adapter;            /* first: read by id_adapter */
	bool waiting, running;
	struct lora_wnode node;
};

START_TEST(indexed_view_matches_the_filter)
{
	enum { N = 400, LEN = 6 };
	static const char *specs[] = { "adapters=30,rank=8,max_loras=3",
				       "adapters=5,rank=8,max_loras=4",
				       "adapters=200,rank=8,max_loras=1" };
	static struct witem it[N];
	const void *queue[N], *ref[N];
	uint64_t rng = 12345;

	for (int sp = 0; sp < 3; sp++) {
		struct lora_config c;
		struct lora *l = make_lora(specs[sp], &c);
		struct lora_stats st = { 0 };
		struct lora_inst *li;
		uint32_t nq = 0, next = 0, checks = 0;

		ck_assert_int_eq(lora_inst_new(&li, l, &tiny_gpu, 1, &st), 0);
		ck_assert_int_eq(lora_inst_index_queue(li, LEN), 0);
		memset(it, 0, sizeof(it));
		for (int op = 0; op < 4000; op++) {
			const void *const *view;
			uint32_t nv, nr, r;

			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			r = (uint32_t)(rng >> 33);
			if (r % 10 < 4 && next < N) {             /* an arrival */
				struct witem *x = &it[next++];

				x->adapter = r % 13 == 0 ? -1 : (int32_t)((r >> 8) % c.n_adapters);
				x->waiting = true;
				lora_wait_push(lora_inst_wait(li), &x->node, x, x->adapter, false);
				queue[nq++] = x;
			} else if (r % 10 < 7) {                  /* a step takes 1..3 of the view */
				uint32_t take;

				nv = lora_wait_view(lora_inst_wait(li), &view);
				take = 1 + (r >> 8) % 3;
				take = take < nv ? take : nv;
				for (uint32_t k = 0; k < take; k++) {
					struct witem *x = (struct witem *)view[0];   /* the view moves */

					x->waiting = false;
					x->running = true;
					lora_run_enter(li, x->adapter);
					lora_wait_leave(lora_inst_wait(li), &x->node, true);
					for (uint32_t q = 0; q < nq; q++)
						if (queue[q] == x) {
							memmove(&queue[q], &queue[q + 1],
								(nq - q - 1) * sizeof(*queue));
							nq--;
							break;
						}
					nv = lora_wait_view(lora_inst_wait(li), &view);
				}
			} else if (r % 10 < 9 || nq == 0) {       /* one running finishes or is preempted */
				for (uint32_t k = 0; k < next; k++) {
					struct witem *x = &it[(k + (r >> 8)) % next];

					if (!x->running)
						continue;
					x->running = false;
					lora_run_leave(li, x->adapter);
					if (r % 10 == 8) {             /* preempted: back at the front */
						x->waiting = true;
						lora_wait_push(lora_inst_wait(li), &x->node, x, x->adapter,
							       true);
						memmove(&queue[1], &queue[0], nq * sizeof(*queue));
						queue[0] = x;
						nq++;
					}
					break;
				}
			} else {                                  /* a waiting one is rejected */
				uint32_t q = (r >> 8) % nq;
				struct witem *x = (struct witem *)queue[q];

				x->waiting = false;
				lora_wait_leave(lora_inst_wait(li), &x->node, false);
				memmove(&queue[q], &queue[q + 1], (nq - q - 1) * sizeof(*queue));
				nq--;
			}
			nv = lora_wait_view(lora_inst_wait(li), &view);
			nr = lora_filter(li, queue, nq, ref, id_adapter);
			ck_assert_uint_eq(nv, nr < LEN ? nr : LEN);
			for (uint32_t k = 0; k < nv; k++)
				ck_assert_ptr_eq(view[k], ref[k]);
			checks += nv;
		}
		ck_assert_uint_gt(checks, 300);   /* the views were not all empty */
		lora_inst_free(li);
		lora_free(l);
	}
}
END_TEST

/* A load moves the adapter's per-GPU bytes over the host link (PCIe);
 * one not in host memory is read from storage first. */
START_TEST(load_time_is_bytes_over_links)
{
	struct lora_config c;
	struct lora *l = make_lora("adapters=4,rank=8,max_loras=1,max_cpu_loras=2,disk_gbps=1", &c);
	struct lora_stats st = { 0 };
	struct lora_inst *li;
	double bytes = lora_adapter_bytes(&c, &tiny_model, 8);   /* tp 1: all on the GPU */

	ck_assert_int_eq(lora_inst_new(&li, l, &tiny_gpu, 1, &st), 0);
	/* host starts with the two most popular (0, 1) */
	ck_assert(lora_host_resident(li, 0) && lora_host_resident(li, 1));
	ck_assert(!lora_host_resident(li, 2));
	ck_assert_int_eq(step1(li, 0, NULL), llround(bytes / tiny_gpu.pcie_bw * 1e9));
	ck_assert_int_eq(step1(li, 2, NULL), llround((bytes / 1e9 + bytes / tiny_gpu.pcie_bw) * 1e9));
	ck_assert_uint_eq(st.host_misses, 1);
	/* host held 0 and 1; 2 came in and evicted the least recent (1) */
	ck_assert(!lora_host_resident(li, 1));
	ck_assert(lora_host_resident(li, 0) && lora_host_resident(li, 2));
	ck_assert_double_eq_tol(st.load_bytes, 2 * bytes, 1e-6);
	lora_inst_free(li);
	lora_free(l);
}
END_TEST

/* The adapters' GEMMs grow with the tokens and with the distinct
 * adapters' ranks, and cost at least two launches per kernel group and
 * layer; a step of base-model requests costs nothing. */
START_TEST(gemm_cost_grows_with_rank_and_tokens)
{
	struct lora_config c;
	struct lora *l = make_lora("adapters=4,mix=8:1/64:1,max_loras=4", &c);
	struct lora_stats st = { 0 };
	struct lora_inst *li;
	int32_t lo = -1, hi = -1, base = -1, tok1 = 1, tok512 = 512;
	int64_t g1, g2, g3, load;
	struct ss_error err = { 0 };

	for (int32_t a = 0; a < 4; a++) {
		if (lora_rank(l, a) == 8 && lo < 0)
			lo = a;
		if (lora_rank(l, a) == 64 && hi < 0)
			hi = a;
	}
	ck_assert(lo >= 0 && hi >= 0);
	ck_assert_int_eq(lora_inst_new(&li, l, &tiny_gpu, 1, &st), 0);
	step1(li, lo, &g1);
	step1(li, hi, &g2);
	ck_assert_int_ge(g1, llround(2 * tiny_model.n_layers * 2 * 3.0e3));   /* 2 groups x 2 kernels */
	ck_assert_int_le(g1, g2);
	ck_assert_int_eq(lora_step(li, &hi, &tok512, 1, &load, &g3, &err), 0);
	ck_assert_int_gt(g3, g2);
	ck_assert_int_eq(lora_step(li, &base, &tok1, 1, &load, &g3, &err), 0);
	ck_assert_int_eq(g3, 0);
	ck_assert_int_eq(load, 0);
	lora_inst_free(li);
	lora_free(l);
}
END_TEST

/* Draws are a function of the seed and the index; Zipf favours adapter 0;
 * a trace's id is kept. */
START_TEST(draws_are_seeded_and_skewed)
{
	struct lora_config c = parse_ok("adapters=50,popularity=zipf:1.2");
	struct lora *a, *b;
	struct ss_error err = { 0 };
	uint32_t count[50] = { 0 };

	ck_assert_int_eq(lora_new(&a, &c, &tiny_model, 7, -1, &err), 0);
	ck_assert_int_eq(lora_new(&b, &c, &tiny_model, 7, -1, &err), 0);
	for (uint64_t i = 0; i < 20000; i++) {
		int32_t x = lora_adapter_of(a, i, -1);

		ck_assert_int_eq(x, lora_adapter_of(b, i, -1));
		ck_assert(x >= 0 && x < 50);
		count[x]++;
	}
	/* P(0) = 1 / H(50, 1.2) = 0.30215; 20000 draws: sd 65 (5 sd: a
	 * wrong law or a biased draw fails, chance does not) */
	ck_assert_msg(fabs(count[0] - 0.30215 * 20000) < 5 * 65, "adapter 0 drawn %u times", count[0]);
	ck_assert_uint_gt(count[0], count[1]);
	ck_assert_uint_gt(count[1], count[9]);
	ck_assert_int_eq(lora_adapter_of(a, 3, 42), 42);
	lora_free(a);
	lora_free(b);
	/* a trace naming adapter 60 with adapters=50 */
	ck_assert_int_eq(lora_new(&a, &c, &tiny_model, 7, 60, &err), -EINVAL);
	ck_assert(strstr(err.msg, "adapter 60"));
}
END_TEST

/* rank_order=cycle: adapter i has the mix's (i mod n)-th rank, in the
 * mix's order (S-LoRA's benchmark); drawn: the weights decide, seeded. */
START_TEST(rank_order_cycles_or_draws)
{
	struct lora_config c = parse_ok("adapters=9,mix=64:1/32:1/16:1/8:1,rank_order=cycle");
	static const int32_t want[9] = { 64, 32, 16, 8, 64, 32, 16, 8, 64 };
	struct ss_error err = { 0 };
	struct lora *l;
	int count64 = 0;

	ck_assert_int_eq(lora_new(&l, &c, &tiny_model, 7, -1, &err), 0);
	for (int32_t a = 0; a < 9; a++)
		ck_assert_int_eq(lora_rank(l, a), want[a]);
	lora_free(l);
	/* drawn, with weights 0.9 / 0.1: most are 64 whatever their index */
	c = parse_ok("adapters=400,mix=64:9/8:1");
	ck_assert_int_eq(lora_new(&l, &c, &tiny_model, 7, -1, &err), 0);
	for (int32_t a = 0; a < 400; a++)
		count64 += lora_rank(l, a) == 64;
	/* 360 expected, sd 6: 5 sd */
	ck_assert_msg(abs(count64 - 360) < 30, "%d of 400 drawn rank 64", count64);
	lora_free(l);
}
END_TEST

/* The adapter slots come out of the KV cache as the engine sizes it. */
START_TEST(slots_reduce_kv_capacity)
{
	struct engine_config cfg;
	struct lora_config c = parse_ok("adapters=10,rank=64,max_loras=8");
	struct ss_error err = { 0 };
	int32_t without, with;
	double per_block;

	cfg_tiny(&cfg, "constant:step_ms=1", "vllm", 0);
	ck_assert_int_eq(engine_kv_capacity(&cfg, &without, &err), 0);
	cfg.lora = &c;
	ck_assert_int_eq(engine_kv_capacity(&cfg, &with, &err), 0);
	per_block = model_kv_bytes_per_token_as(&tiny_model, SS_DTYPE_MODEL) * engine_block_size(&cfg);
	ck_assert_int_lt(with, without);
	/* the blocks lost are the slots' bytes, to a block's rounding */
	ck_assert_msg(fabs((without - with) - lora_gpu_bytes(&c, &tiny_model, 1) / per_block) <= 1.0,
		      "lost %d blocks, slots are %.1f blocks", without - with,
		      lora_gpu_bytes(&c, &tiny_model, 1) / per_block);
}
END_TEST

/* Whole runs: no step ever holds more than max_loras adapters, every
 * request finishes, and one slot for many adapters serves them one at a
 * time (more steps) where four slots batch them. */
START_TEST(runs_keep_max_loras)
{
	enum { N = 200 };
	static struct wl_request reqs[N];
	struct workload wl;
	struct engine_config cfg;
	struct engine_results res;
	uint64_t steps[2];
	const char *specs[2] = { "adapters=20,rank=16,max_loras=1", "adapters=20,rank=16,max_loras=4" };

	for (int i = 0; i < N; i++)
		reqs[i] = (struct wl_request){ .arrival_ns = (int64_t)i * 1000000,
					       .prompt_tokens = 64, .output_tokens = 16 };
	wl_fill(&wl, reqs, N);
	for (int k = 0; k < 2; k++) {
		struct lora_config c = parse_ok(specs[k]);
		struct engine *e;
		uint32_t peak = 0;

		cfg_tiny(&cfg, "roofline", "vllm", 0);
		cfg.lora = &c;
		e = run_ok(&cfg, &wl);
		engine_results(e, &res);
		ck_assert_ptr_nonnull(res.lora);
		for (uint64_t i = 0; i < res.n_req; i++) {
			ck_assert_int_eq(res.req[i].state, REQ_FINISHED);
			ck_assert(res.req[i].adapter >= 0 && res.req[i].adapter < 20);
		}
		steps[k] = res.inst[0].steps;
		peak = res.inst[0].lora.peak_adapters;
		ck_assert_uint_le(peak, (uint32_t)c.max_loras);
		ck_assert_uint_eq(peak, (uint32_t)c.max_loras);   /* the load fills the slots */
		engine_free(e);
	}
	ck_assert_uint_gt(steps[0], steps[1]);
}
END_TEST

/* paging=unified (S-LoRA's unified paging): a resident adapter holds
 * blocks of the KV pool, as many as its bytes over a block's; when no
 * running request uses it its pages count as free and a KV allocation
 * short of blocks evicts it (least recently used first); any number of
 * adapters shares a step; the slots take no KV capacity. */
START_TEST(unified_paging_shares_the_kv_pool)
{
	struct lora_config c;
	struct lora *l = make_lora("adapters=10,rank=8,paging=unified", &c);
	struct lora_stats st = { 0 };
	struct lora_inst *li;
	struct kvpool pool;
	struct ss_error err = { 0 };
	int32_t ids[64], a[5] = { 0, 1, 2, 3, 4 }, tok[5] = { 1, 1, 1, 1, 1 }, five = 5;
	int64_t load, gemm;
	/* one block = one unit of rank: a rank-8 adapter takes 8 blocks */
	double unit = lora_adapter_bytes(&c, &tiny_model, 1);

	ck_assert_double_eq(lora_gpu_bytes(&c, &tiny_model, 1), 0);
	ck_assert_int_eq(kvpool_init(&pool, 64, 16), 0);
	ck_assert_int_eq(lora_inst_new(&li, l, &tiny_gpu, 1, &st), 0);
	ck_assert_int_eq(lora_inst_page(li, &pool, unit), 0);
	ck_assert_int_eq(lora_pages(li, 0), 8);
	/* five adapters in one step (no max_loras): 40 blocks taken, loaded */
	for (int k = 0; k < 5; k++)
		lora_run_enter(li, a[k]);
	ck_assert_int_eq(lora_step(li, a, tok, 5, &load, &gemm, &err), 0);
	ck_assert(load > 0);
	ck_assert_uint_eq(st.misses, 5);
	ck_assert_uint_eq(st.peak_adapters, 5);
	ck_assert_int_eq(pool.n_free, 64 - 40);
	ck_assert_int_eq(pool.n_reclaimable, 0);
	/* a hit loads nothing and takes no block */
	ck_assert_int_eq(lora_step(li, a, tok, 1, &load, &gemm, &err), 0);
	ck_assert_int_eq(load, 0);
	ck_assert_int_eq(pool.n_free, 24);
	/* 0 and 1 idle: their pages are lent (free to the scheduler), still
	 * resident; 1 is the less recently used (the hit touched 0) */
	lora_run_leave(li, 0);
	lora_run_leave(li, 1);
	ck_assert_int_eq(pool.n_reclaimable, 16);
	ck_assert(lora_gpu_resident(li, 0) && lora_gpu_resident(li, 1));
	/* KV needing 30 blocks with 24 free: one idle adapter goes */
	ck_assert_int_eq(kvpool_alloc(&pool, 30, ids), 0);
	ck_assert_uint_eq(st.evictions, 1);
	ck_assert(!lora_gpu_resident(li, 1));
	ck_assert(lora_gpu_resident(li, 0));
	ck_assert_int_eq(pool.n_reclaimable, 8);
	/* more than the pool holds with every idle adapter gone: refused */
	ck_assert_int_eq(kvpool_alloc(&pool, 20, ids + 30), -ENOSPC);
	ck_assert(!lora_gpu_resident(li, 0));
	ck_assert_uint_eq(st.evictions, 2);
	ck_assert_int_eq(pool.n_free, 10);
	/* adapters in use are never evicted: a load that does not fit fails */
	ck_assert_int_eq(kvpool_alloc(&pool, 5, ids + 30), 0);
	lora_run_enter(li, five);
	ck_assert_int_eq(lora_step(li, &five, tok, 1, &load, &gemm, &err), -ENOSPC);
	ck_assert(strstr(err.msg, "do not fit the KV pool"));
	ck_assert(lora_gpu_resident(li, 2));
	lora_inst_free(li);
	kvpool_release(&pool);
	lora_free(l);
}
END_TEST

/* paging=unified takes no max_loras (no slots); the mode's name is checked. */
START_TEST(unified_paging_errors)
{
	struct lora_config c;
	struct ss_error err = { 0 };

	ck_assert_int_eq(lora_config_parse(&c, "adapters=4,paging=unified,max_loras=2", &err), -EINVAL);
	ck_assert(strstr(err.msg, "paging=unified has no adapter slots"));
	ck_assert_int_eq(lora_config_parse(&c, "adapters=4,paging=pages", &err), -EINVAL);
	ck_assert(strstr(err.msg, "paging=pages: expected slots|unified"));
	ck_assert(!strchr(err.msg, '\n'));
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("lora");
	TCase *tc = tcase_create("lora");

	tcase_add_test(tc, parse_defaults_and_keys);
	tcase_add_test(tc, parse_errors_are_one_line);
	tcase_add_test(tc, adapter_bytes_from_shapes);
	tcase_add_test(tc, slots_are_numbered_and_loads_listed);
	tcase_add_test(tc, gpu_cache_is_lru);
	tcase_add_test(tc, max_loras_per_step_and_view);
	tcase_add_test(tc, indexed_view_matches_the_filter);
	tcase_add_test(tc, load_time_is_bytes_over_links);
	tcase_add_test(tc, gemm_cost_grows_with_rank_and_tokens);
	tcase_add_test(tc, draws_are_seeded_and_skewed);
	tcase_add_test(tc, rank_order_cycles_or_draws);
	tcase_add_test(tc, slots_reduce_kv_capacity);
	tcase_add_test(tc, runs_keep_max_loras);
	tcase_add_test(tc, unified_paging_shares_the_kv_pool);
	tcase_add_test(tc, unified_paging_errors);
	suite_add_tcase(s, tc);
	return s;
}
