/* Cost models: the constant model's exact arithmetic, the roofline's
 * structure (monotone, per-request KV lengths, tensor parallelism, breakdown
 * sums to the duration), its sanity figures against published measurements,
 * and spec errors.  Figures and tolerances: docs/cost-models.md. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "check-main.h"
#include "config.h"
#include "costmodel.h"
#include "engine-profile.h"

static struct catalog cat;

static void setup(void)
{
	struct ss_error err = { 0 };
	const char *d = getenv("SERVESIM_DATA");
	int rc;

	catalog_init(&cat);
	rc = catalog_load_dir(&cat, d && *d ? d : SERVESIM_SRC_DATADIR, &err);
	ck_assert_msg(rc == 0, "%s:%ld: %s", err.file, err.line, err.msg);
}

static void teardown(void)
{
	catalog_release(&cat);
}

static struct cost_model *make(const char *spec, const char *model, const char *gpu, int tp)
{
	struct cost_config cfg = {
		.model = model ? catalog_model(&cat, model) : NULL,
		.gpu = gpu ? catalog_gpu(&cat, gpu) : NULL,
		.tp = tp,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;
	int rc = cost_model_new(&cm, spec, &cfg, &err);

	ck_assert_msg(rc == 0, "%s: %s", spec, err.msg);
	return cm;
}

/* Run one step; n_emit = every decode plus every prefill item (each chunk
 * is taken to be a prompt's last). */
static struct cost_result run(struct cost_model *cm, const struct cost_item *it, uint32_t n)
{
	struct cost_step s = { .items = it, .n_items = n };
	struct cost_result r;
	int64_t sum = 0;

	for (uint32_t i = 0; i < n; i++) {
		s.total_tokens += it[i].tokens;
		s.n_prefill += it[i].tokens > 1;
		s.n_emit++;
	}
	memset(&r, 0xa5, sizeof(r));
	cost_model_step(cm, &s, &r);
	for (int op = 0; op < COST_OP_COUNT; op++) {
		ck_assert_int_ge(r.op_ns[op], 0);
		sum += r.op_ns[op];
	}
	ck_assert_int_eq(sum, r.duration_ns);
	ck_assert_int_ge(r.duration_ns, 1);
	return r;
}

/* n decodes at the same context */
static struct cost_result decodes(struct cost_model *cm, uint32_t n, int32_t ctx)
{
	struct cost_item it[256];

	ck_assert_uint_le(n, 256);
	for (uint32_t i = 0; i < n; i++)
		it[i] = (struct cost_item){ .tokens = 1, .context = ctx };
	return run(cm, it, n);
}

static struct cost_result prefill(struct cost_model *cm, int32_t tokens, int32_t ctx)
{
	struct cost_item it = { .tokens = tokens, .context = ctx };

	return run(cm, &it, 1);
}

static double ms(int64_t ns)
{
	return (double)ns * 1e-6;
}

START_TEST(registry_and_names)
{
	size_t n;
	const struct cost_model_ops *const *reg = cost_model_registry(&n);

	ck_assert_uint_eq(n, 6);   /* constant, roofline, table, scaled, fit, distserve */
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(reg[i]->version, COST_MODEL_VERSION);
		ck_assert_ptr_eq(cost_model_find(reg[i]->name), reg[i]);
		ck_assert_ptr_nonnull(reg[i]->description);
	}
	ck_assert_ptr_eq(cost_model_find("roofline"), &cost_roofline_ops);
	ck_assert_ptr_null(cost_model_find("psychic"));
	ck_assert_str_eq(cost_op_name(COST_OP_GEMM), "gemm");
	ck_assert_str_eq(cost_op_name(COST_OP_HOST), "host");
	for (int op = 0; op < COST_OP_COUNT; op++)
		ck_assert_str_ne(cost_op_name(op), "?");
}
END_TEST

/* duration = a x prefill tokens + b (if any decode) + step_ms, exactly. */
START_TEST(constant_exact)
{
	struct cost_model *cm = make("constant:prefill_ms_per_token=0.5,decode_ms_per_step=20,"
				     "step_ms=1,power_w=100", NULL, NULL, 1);
	struct cost_item mixed[] = { { 100, 0 }, { 1, 50 }, { 1, 700 }, { 37, 10 } };
	struct cost_result r;

	r = run(cm, mixed, 4);
	ck_assert_int_eq(r.duration_ns, 50000000 + 18500000 + 20000000 + 1000000);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 1000000);
	ck_assert_double_eq_tol(r.energy_j, 100.0 * 0.0895, 1e-12);
	r = run(cm, mixed, 1);                          /* prefill only: no decode term */
	ck_assert_int_eq(r.duration_ns, 51000000);
	r = run(cm, mixed + 1, 2);                      /* decodes only: one term per step */
	ck_assert_int_eq(r.duration_ns, 21000000);
	r = decodes(cm, 200, 5000);                     /* independent of batch and context */
	ck_assert_int_eq(r.duration_ns, 21000000);
	cost_model_free(cm);
}
END_TEST

START_TEST(constant_zero_and_defaults)
{
	struct cost_model *cm;
	struct cost_result r;

	/* both terms may be 0; the step still takes 1 ns */
	cm = make("constant:prefill_ms_per_token=0,decode_ms_per_step=0", NULL, NULL, 1);
	r = prefill(cm, 1000, 0);
	ck_assert_int_eq(r.duration_ns, 1);
	r = decodes(cm, 3, 10);
	ck_assert_int_eq(r.duration_ns, 1);
	cost_model_free(cm);

	/* a 1-token item is a decode even with no context */
	cm = make("constant:prefill_ms_per_token=1,decode_ms_per_step=3", NULL, NULL, 1);
	ck_assert_int_eq(prefill(cm, 1, 0).duration_ns, 3000000);
	ck_assert_int_eq(prefill(cm, 2, 0).duration_ns, 2000000);
	cost_model_free(cm);

	/* defaults: 0.05 ms per prefill token, 10 ms per decode step,
	 * power = TDP x tp */
	cm = make("constant", "llama-3.1-8b", "h100-sxm", 2);
	r = prefill(cm, 100, 0);
	ck_assert_int_eq(r.duration_ns, 5000000);
	ck_assert_double_eq_tol(r.energy_j, 1400.0 * 0.005, 1e-9);
	ck_assert_int_eq(decodes(cm, 4, 100).duration_ns, 10000000);
	cost_model_free(cm);
}
END_TEST

START_TEST(roofline_monotone_in_tokens)
{
	struct cost_model *cm = make("roofline", "llama-3.1-8b", "h100-sxm", 1);
	int64_t prev = 0;

	for (int32_t c = 2; c <= 16384; c *= 2) {
		int64_t d = prefill(cm, c, 0).duration_ns;

		ck_assert_msg(d > prev, "chunk %d: %lld <= %lld", c, (long long)d, (long long)prev);
		prev = d;
	}
	prev = 0;
	for (uint32_t b = 1; b <= 256; b *= 2) {
		int64_t d = decodes(cm, b, 512).duration_ns;

		ck_assert_msg(d > prev, "batch %u", b);
		prev = d;
	}
	cost_model_free(cm);
}
END_TEST

START_TEST(roofline_monotone_in_context)
{
	struct cost_model *cm = make("roofline", "llama-3.1-8b", "h100-sxm", 1);
	struct cost_result r, prev_r = { 0 };

	for (int32_t ctx = 0; ctx <= 65536; ctx = ctx ? ctx * 4 : 16) {
		r = decodes(cm, 8, ctx);
		ck_assert(r.duration_ns > prev_r.duration_ns);
		ck_assert(r.op_ns[COST_OP_ATTN_DECODE] > prev_r.op_ns[COST_OP_ATTN_DECODE]);
		ck_assert_int_eq(r.op_ns[COST_OP_ATTN_PREFILL], 0);
		prev_r = r;
	}
	memset(&prev_r, 0, sizeof(prev_r));
	for (int32_t ctx = 0; ctx <= 65536; ctx = ctx ? ctx * 4 : 16) {
		r = prefill(cm, 512, ctx);                  /* chunked prefill, later chunks */
		ck_assert(r.op_ns[COST_OP_ATTN_PREFILL] > prev_r.op_ns[COST_OP_ATTN_PREFILL]);
		ck_assert_int_eq(r.op_ns[COST_OP_ATTN_DECODE], 0);
		prev_r = r;
	}
	cost_model_free(cm);
}
END_TEST

/* Decode attention reads each request's own KV: the time is that of the
 * summed lengths, so raising one request's length raises it, and two
 * batches with the same total length cost the same. */
START_TEST(decode_attention_sums_lengths)
{
	struct cost_model *cm = make("roofline", "llama-3.1-8b", "h100-sxm", 1);
	const struct model_spec *m = catalog_model(&cat, "llama-3.1-8b");
	const struct gpu_spec *g = catalog_gpu(&cat, "h100-sxm");
	struct cost_item a[] = { { 1, 1000 }, { 1, 3000 }, { 1, 200 }, { 1, 7000 } };
	struct cost_item same_sum[] = { { 1, 2800 }, { 1, 2800 }, { 1, 2800 }, { 1, 2800 } };
	struct cost_item one_doubled[] = { { 1, 1000 }, { 1, 6000 }, { 1, 200 }, { 1, 7000 } };
	double kv = 0, bytes, expect_ns;
	int64_t t_a, t_same, t_doubled;

	t_a = run(cm, a, 4).op_ns[COST_OP_ATTN_DECODE];
	t_same = run(cm, same_sum, 4).op_ns[COST_OP_ATTN_DECODE];
	t_doubled = run(cm, one_doubled, 4).op_ns[COST_OP_ATTN_DECODE];
	ck_assert_int_eq(t_a, t_same);
	ck_assert_int_gt(t_doubled, t_a);

	/* exact: per layer, K and V of every request's context + 1 tokens plus Q
	 * and O, at hbm_bw x attn_decode_mem_eff (0.7), + 3 us kernel overhead */
	for (int i = 0; i < 4; i++)
		kv += a[i].context + 1;
	bytes = kv * 2.0 * m->n_kv_heads * m->head_dim * 2 + 4 * 2.0 * m->n_heads * m->head_dim * 2;
	expect_ns = m->n_layers * (bytes / (g->hbm_bw * 0.7) + 3e-6) * 1e9;
	ck_assert_double_eq_tol((double)t_a, expect_ns, 2.0);
	cost_model_free(cm);
}
END_TEST

START_TEST(tensor_parallel)
{
	struct cost_model *tp1 = make("roofline", "llama-3.1-8b", "h100-sxm", 1);
	struct cost_model *tp2 = make("roofline", "llama-3.1-8b", "h100-sxm", 2);
	struct cost_model *l40 = make("roofline", "llama-3.1-8b", "l40s", 2);
	struct cost_result r1, r2;

	/* decode: weight reads halve (+ kernel overheads that do not) */
	r1 = decodes(tp1, 1, 1024);
	r2 = decodes(tp2, 1, 1024);
	ck_assert_int_lt(r2.op_ns[COST_OP_GEMM], r1.op_ns[COST_OP_GEMM] * 0.6);
	ck_assert_int_eq(r1.op_ns[COST_OP_ALLREDUCE], 0);
	ck_assert_int_gt(r2.op_ns[COST_OP_ALLREDUCE], 0);
	ck_assert(r2.duration_ns < r1.duration_ns);
	/* prefill: FLOPs halve */
	r1 = prefill(tp1, 2048, 0);
	r2 = prefill(tp2, 2048, 0);
	ck_assert_int_lt(r2.op_ns[COST_OP_GEMM], r1.op_ns[COST_OP_GEMM] * 0.55);
	ck_assert_int_gt(r2.op_ns[COST_OP_ALLREDUCE], 0);
	/* no NVLink: the all-reduce goes over PCIe and costs more */
	ck_assert_int_gt(prefill(l40, 2048, 0).op_ns[COST_OP_ALLREDUCE],
			 r2.op_ns[COST_OP_ALLREDUCE] * 5);
	cost_model_free(tp1);
	cost_model_free(tp2);
	cost_model_free(l40);
}
END_TEST

/* A fully connected mesh (link_peers, AMD's xGMI): a GPU of a group of n
 * drives only its n - 1 direct links, each nvlink_bw / link_peers, so the
 * all-reduce's bandwidth term is link_peers / (n - 1) times a switch's with
 * the same nvlink_bw; at n - 1 = link_peers (the MI300X's eight GPUs) the
 * two are one.  allreduce_latency_us=0 leaves the bandwidth term alone. */
START_TEST(mesh_collectives)
{
	const struct gpu_spec *mi = catalog_gpu(&cat, "mi300x");
	struct gpu_spec sw;
	static const int tps[] = { 2, 4, 8 };

	ck_assert_ptr_nonnull(mi);
	ck_assert_int_eq(mi->link_peers, 7);
	sw = *mi;
	sw.link_peers = 0;
	ck_assert_double_eq(gpu_link_share(&sw, 2), 1.0);
	ck_assert_double_eq(gpu_link_share(mi, 1), 1.0);
	ck_assert_double_eq_tol(gpu_link_share(mi, 2), 1.0 / 7.0, 1e-15);
	ck_assert_double_eq_tol(gpu_link_share(mi, 4), 3.0 / 7.0, 1e-15);
	ck_assert_double_eq(gpu_link_share(mi, 8), 1.0);
	for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++) {
		struct cost_config cm_cfg = { .model = catalog_model(&cat, "llama-3.1-70b"),
					      .gpu = mi, .tp = tps[i] };
		struct cost_config sw_cfg = cm_cfg;
		struct ss_error err = { 0 };
		struct cost_model *m = NULL, *w = NULL;
		double ratio;

		sw_cfg.gpu = &sw;
		ck_assert_int_eq(cost_model_new(&m, "roofline:allreduce_latency_us=0", &cm_cfg, &err), 0);
		ck_assert_int_eq(cost_model_new(&w, "roofline:allreduce_latency_us=0", &sw_cfg, &err), 0);
		ratio = (double)prefill(m, 2048, 0).op_ns[COST_OP_ALLREDUCE] /
			(double)prefill(w, 2048, 0).op_ns[COST_OP_ALLREDUCE];
		ck_assert_msg(fabs(ratio - 7.0 / (tps[i] - 1)) < 1e-6, "tp %d: ratio %g", tps[i], ratio);
		/* the GEMMs do not move */
		ck_assert_int_eq(prefill(m, 2048, 0).op_ns[COST_OP_GEMM],
				 prefill(w, 2048, 0).op_ns[COST_OP_GEMM]);
		cost_model_free(m);
		cost_model_free(w);
	}
}
END_TEST

/* Random mixed steps: the breakdown sums to the duration (checked in run()),
 * and energy lies between idle and TDP power over the step. */
START_TEST(breakdown_and_energy_bounds)
{
	static const char *const models[] = { "llama-3.1-8b", "opt-13b", "qwen2.5-72b" };
	const struct gpu_spec *g = catalog_gpu(&cat, "a100-80gb-sxm");
	uint64_t x = 88172645463325252ull;
	struct cost_item it[64];

	for (int mi = 0; mi < 3; mi++) {
		int tp = mi == 2 ? 8 : 1;
		struct cost_model *cm = make("roofline", models[mi], "a100-80gb-sxm", tp);

		for (int k = 0; k < 200; k++) {
			uint32_t n;
			struct cost_result r;
			double secs;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			n = 1 + x % 64;
			for (uint32_t i = 0; i < n; i++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				it[i].tokens = (x & 3) ? 1 : 1 + (int32_t)((x >> 8) % 2048);
				it[i].context = (int32_t)((x >> 24) % 2048);
			}
			r = run(cm, it, n);
			secs = r.duration_ns * 1e-9;
			ck_assert(r.energy_j >= g->idle_w * tp * secs * 0.999999);
			ck_assert(r.energy_j <= g->tdp_w * tp * secs * 1.000001);
		}
		cost_model_free(cm);
	}
}
END_TEST

START_TEST(energy_prefill_hotter_than_decode)
{
	struct cost_model *cm = make("roofline", "llama-3.1-8b", "h100-sxm", 1);
	struct cost_result p = prefill(cm, 4096, 0), d = decodes(cm, 1, 1024);
	double pw = p.energy_j / (p.duration_ns * 1e-9), dw = d.energy_j / (d.duration_ns * 1e-9);

	/* compute-bound prefill runs near TDP (Splitwise: prompt power = TDP);
	 * memory-bound decode well below it (Splitwise: 380 W on an H100) */
	ck_assert_msg(pw > 600 && pw <= 700, "prefill %.0f W", pw);
	ck_assert_msg(dw > 200 && dw < 450, "decode %.0f W", dw);
	cost_model_free(cm);
}
END_TEST

/* Sanity figures (docs/cost-models.md).  The ranges are wide on purpose: a
 * roofline with spec-sheet efficiencies should land within ~30% of vLLM's
 * measured step times, not match them. */
START_TEST(sanity_llama8b_h100)
{
	struct cost_model *cm = make("roofline", "llama-3.1-8b", "h100-sxm", 1);
	double bs1 = ms(decodes(cm, 1, 1024).duration_ns);
	double bs64 = ms(decodes(cm, 64, 1024).duration_ns);
	double pf = ms(prefill(cm, 2048, 0).duration_ns);

	ck_assert_msg(bs1 >= 6.0 && bs1 <= 8.0, "decode bs1 %.2f ms", bs1);
	ck_assert_msg(bs64 >= 10.0 && bs64 <= 15.0, "decode bs64 %.2f ms", bs64);
	/* measured kernels (aiconfigurator, H100): ~46 ms of GEMM + attention */
	ck_assert_msg(pf >= 35.0 && pf <= 80.0, "prefill 2048 %.2f ms", pf);
	cost_model_free(cm);
}
END_TEST

START_TEST(sanity_llama70b_a100_tp4)
{
	struct cost_model *cm = make("roofline", "llama-2-70b", "a100-80gb-sxm", 4);
	double bs1 = ms(decodes(cm, 1, 1024).duration_ns);

	/* ~25 ms; older engines measured 30-40 ms (docs/cost-models.md) */
	ck_assert_msg(bs1 >= 20.0 && bs1 <= 45.0, "decode bs1 %.2f ms", bs1);
	cost_model_free(cm);
}
END_TEST

/* The roofline memoises the terms that depend on the step's tokens or its
 * emitted rows alone: a long-lived model gives every step the result a
 * fresh model gives it, bit for bit, including quantities that share a memo
 * entry (differ by a multiple of 256), at tp 1 and tp 4. */
START_TEST(roofline_memo_is_bit_for_bit)
{
	static const struct { int32_t chunk; uint32_t emit; } seq[] = {
		{ 8, 1 }, { 264, 1 }, { 8, 1 }, { 8, 257 }, { 4096, 3 }, { 4352, 259 },
		{ 4096, 3 }, { 1, 2 }, { 257, 258 }, { 1, 2 },
	};

	for (int tp = 1; tp <= 4; tp *= 4) {
		struct cost_model *cm = make("roofline", "llama-3.1-70b", "h100-sxm", tp);

		for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
			struct cost_model *fresh = make("roofline", "llama-3.1-70b", "h100-sxm", tp);
			struct cost_item it[2] = { { seq[i].chunk, 100 }, { 1, 3000 } };
			struct cost_step st = { .items = it, .n_items = 2, .n_prefill = seq[i].chunk > 1,
						.n_emit = seq[i].emit,
						.total_tokens = seq[i].chunk + 1 };
			struct cost_result a, b;

			memset(&a, 0, sizeof(a));
			memset(&b, 0, sizeof(b));
			cost_model_step(cm, &st, &a);
			cost_model_step(fresh, &st, &b);
			ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0, "tp %d step %zu differs", tp, i);
			cost_model_free(fresh);
		}
		cost_model_free(cm);
	}
}
END_TEST

/* A graphed decode step is priced as its padded size: on the roofline
 * at full clock the padding rows are added to its sums without being
 * written (cost_roofline_step_padded).  A power cap that never binds
 * takes the path that writes them; both give the same bytes, for a dense
 * model and for one with local layers (whose sums need the rows), at
 * sizes padded, captured and above every graph. */
START_TEST(roofline_graph_padding_is_bit_for_bit)
{
	static const char *const models[] = { "llama-3.1-8b", "gemma-3-27b" };
	struct engine_profile prof = { .name = "t", .graph_launch_us = 5,
				       .graph_sizes = { 1, 2, 4, 8, 16 }, .n_graph_sizes = 5,
				       .sched_us = 50, .output_us_per_seq = 2 };

	for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		struct cost_config cfg = {
			.model = catalog_model(&cat, models[m]),
			.gpu = catalog_gpu(&cat, "h100-sxm"), .tp = 1, .engine = &prof,
		};
		struct cost_config capped = cfg;
		struct cost_model *fast = NULL, *ref = NULL;
		struct ss_error err = { 0 };

		capped.power_cap_w = 1e9;   /* W: never binds, clock 1 */
		ck_assert_ptr_nonnull(cfg.model);
		ck_assert_int_eq(cost_model_new(&fast, "roofline", &cfg, &err), 0);
		ck_assert_int_eq(cost_model_new(&ref, "roofline", &capped, &err), 0);
		for (uint32_t n = 1; n <= 20; n++) {
			struct cost_item it[20];
			struct cost_step st = { .items = it, .n_items = n, .n_emit = n,
						.total_tokens = n };
			struct cost_result a, b;

			for (uint32_t i = 0; i < n; i++)
				it[i] = (struct cost_item){ .tokens = 1,
							    .context = (int32_t)(i * 977 % 9000) };
			memset(&a, 0, sizeof(a));
			memset(&b, 0, sizeof(b));
			ck_assert_int_eq(cost_model_predict(fast, &st, &a, &err), 0);
			ck_assert_int_eq(cost_model_predict(ref, &st, &b, &err), 0);
			ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0, "%s: %u decodes differ",
				      models[m], n);
		}
		cost_model_free(fast);
		cost_model_free(ref);
	}
}
END_TEST

static void expect_error(const char *spec, const char *model, int tp, const char *want)
{
	struct cost_config cfg = {
		.model = model ? catalog_model(&cat, model) : NULL,
		.gpu = catalog_gpu(&cat, "h100-sxm"),
		.tp = tp,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = (void *)1;

	ck_assert_int_eq(cost_model_new(&cm, spec, &cfg, &err), -EINVAL);
	ck_assert_ptr_null(cm);
	ck_assert_msg(strstr(err.msg, want), "'%s' not in '%s'", want, err.msg);
}

START_TEST(spec_errors)
{
	expect_error("psychic", "llama-3.1-8b", 1, "unknown cost model 'psychic'");
	expect_error("roofline:gemm_eff=0.5,bogus=1", "llama-3.1-8b", 1, "bogus");
	expect_error("constant:prefill_ms=1", NULL, 1, "prefill_ms");
	expect_error("roofline:gemm_eff=1.5", "llama-3.1-8b", 1, "gemm_eff");
	expect_error("roofline:mem_eff=fast", "llama-3.1-8b", 1, "mem_eff");
	expect_error("constant:decode_ms_per_step=-1", NULL, 1, "decode_ms_per_step");
	expect_error("roofline", NULL, 1, "needs a model");
	expect_error("roofline", "qwen2.5-7b", 8, "does not divide");
	expect_error("roofline", "llama-3.1-8b", 0, "tensor-parallel");
	cost_model_free(NULL);
}
END_TEST

START_TEST(roofline_params_take_effect)
{
	struct cost_model *a = make("roofline", "llama-3.1-8b", "h100-sxm", 1);
	struct cost_model *b = make("roofline:host_ms=0,host_us_per_seq=0,kernel_us=0",
				    "llama-3.1-8b", "h100-sxm", 1);
	struct cost_model *c = make("roofline:gemm_eff=0.4", "llama-3.1-8b", "h100-sxm", 1);
	struct cost_result ra = decodes(a, 10, 100), rb = decodes(b, 10, 100);

	ck_assert_int_eq(ra.op_ns[COST_OP_HOST], 1200000);    /* 0.8 ms + 10 x 40 us */
	ck_assert_int_eq(rb.op_ns[COST_OP_HOST], 0);
	ck_assert_int_lt(rb.op_ns[COST_OP_GEMM], ra.op_ns[COST_OP_GEMM]);
	/* compute-bound prefill GEMMs take twice as long at half the efficiency */
	ck_assert_double_eq_tol((double)prefill(c, 8192, 0).op_ns[COST_OP_GEMM] /
				prefill(a, 8192, 0).op_ns[COST_OP_GEMM], 2.0, 0.02);
	cost_model_free(a);
	cost_model_free(b);
	cost_model_free(c);
}
END_TEST

/* A GPU far outside physical range (built here directly: the catalog
 * refuses such values) gives steps beyond int64 nanoseconds: an error
 * naming the model and the operator, never a wrapped or clamped time.
 * The same through a clock setting that stretches a step past the limit. */
START_TEST(step_beyond_int64_ns_is_an_error)
{
	struct gpu_spec g = *catalog_gpu(&cat, "h100-sxm");
	struct cost_config cfg = { .model = catalog_model(&cat, "llama-3.1-8b"), .gpu = &g, .tp = 1 };
	struct cost_item it = { .tokens = 512, .context = 0 };
	struct cost_step st = { .items = &it, .n_items = 1, .n_prefill = 1, .n_emit = 1,
				.total_tokens = 512 };
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;
	struct cost_result r;

	g.hbm_bw = 1e-300;
	ck_assert_int_eq(cost_model_new(&cm, "roofline", &cfg, &err), 0);
	ck_assert_int_eq(cost_model_predict(cm, &st, &r, &err), -ERANGE);
	ck_assert_msg(strstr(err.msg, "cost model roofline: a step of 1 request (512 tokens) would take") &&
		      strstr(err.msg, "not a duration"), "%s", err.msg);
	/* the deprecated form saturates instead: "never finishes" */
	cost_model_step(cm, &st, &r);
	ck_assert_int_eq(r.duration_ns, INT64_MAX);
	cost_model_free(cm);

	/* 4e18 ns at full clock, most of it compute: x5 at the lowest clock */
	g = *catalog_gpu(&cat, "h100-sxm");
	cfg.clock_frac = CLOCK_FRAC_MIN;
	ck_assert_int_eq(cost_model_new(&cm, "constant:prefill_ms_per_token=1e6", &cfg, &err), 0);
	it.tokens = 4000000;
	st.total_tokens = it.tokens;
	ck_assert_int_eq(cost_model_predict(cm, &st, &r, &err), -ERANGE);
	ck_assert_msg(strstr(err.msg, "cost model constant:") &&
		      strstr(err.msg, "the step at the lowered clock"), "%s", err.msg);
	cost_model_free(cm);
}
END_TEST

/* A random step for the memo tests: mostly decodes with growing contexts,
 * some prefill chunks, an idle item now and then; n_emit up to n_items. */
static uint64_t rnd_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static uint32_t random_step(uint64_t *x, struct cost_item *it, uint32_t max, struct cost_step *s)
{
	uint32_t n = (uint32_t)(rnd_next(x) % max), kind = (uint32_t)(rnd_next(x) % 4);

	memset(s, 0, sizeof(*s));
	/* repeat small batch sizes often, so memo entries are hit, and reach
	 * a second entry of the same slot (n + 256) */
	if (kind == 0)
		n = 1 + (uint32_t)(rnd_next(x) % 4);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t r = rnd_next(x) % 100;

		it[i].context = (int32_t)(rnd_next(x) % 20000);
		it[i].tokens = r < 80 ? 1 : r < 95 ? 1 + (int32_t)(rnd_next(x) % 4096) : 0;
		s->total_tokens += it[i].tokens;
		s->n_prefill += it[i].tokens > 1;
	}
	s->items = it;
	s->n_items = n;
	s->n_emit = n ? (uint32_t)(rnd_next(x) % (n + 1)) : 0;
	return n;
}

/* The roofline memoises everything of a step but its attention on
 * (tokens, emitted rows, requests): over random steps a long-lived model
 * gives every step the result of a fresh model (every memo empty), bit
 * for bit, for gated and plain MLPs, RoPE and learned positions, with and
 * without tensor parallelism; and the same under a clock setting. */
START_TEST(roofline_memo_random_steps)
{
	static const struct { const char *model, *gpu; int tp; double clock; } cases[] = {
		{ "llama-2-70b", "a100-80gb-sxm", 2, 0 },
		{ "llama-3.1-8b", "h100-sxm", 1, 0 },
		{ "opt-13b", "a100-80gb-sxm", 4, 0 },
		{ "llama-2-7b", "l40s", 1, 0.6 },
	};
	static struct cost_item it[600];

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct cost_config cfg = {
			.model = catalog_model(&cat, cases[c].model),
			.gpu = catalog_gpu(&cat, cases[c].gpu), .tp = cases[c].tp,
			.clock_frac = cases[c].clock,
		};
		struct ss_error err = { 0 };
		struct cost_model *cm = NULL;
		uint64_t x = 0x9e3779b97f4a7c15ull + c;

		ck_assert_int_eq(cost_model_new(&cm, "roofline", &cfg, &err), 0);
		for (int k = 0; k < 3000; k++) {
			struct cost_model *fresh = NULL;
			struct cost_result a, b;
			struct cost_step s;

			random_step(&x, it, k % 10 == 9 ? 600 : 40, &s);
			ck_assert_int_eq(cost_model_new(&fresh, "roofline", &cfg, &err), 0);
			memset(&a, 0x5a, sizeof(a));
			memset(&b, 0x5a, sizeof(b));
			ck_assert_int_eq(cost_model_predict(cm, &s, &a, &err), 0);
			ck_assert_int_eq(cost_model_predict(fresh, &s, &b, &err), 0);
			ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0,
				      "%s case %zu step %d (%u items, %u emitted) differs", cases[c].model,
				      c, k, s.n_items, s.n_emit);
			cost_model_free(fresh);
		}
		cost_model_free(cm);
	}
}
END_TEST

/* Out of range through the memo: where every other operator fits, a
 * decode attention beyond int64 ns is named, on a first step and on a
 * step whose other operators come from the memo; and where each operator
 * fits but their sum does not, the error says so. */
START_TEST(roofline_memo_range_errors)
{
	struct gpu_spec g = *catalog_gpu(&cat, "h100-sxm");
	struct cost_config cfg = { .model = catalog_model(&cat, "llama-3.1-8b"), .gpu = &g, .tp = 1 };
	struct cost_item it = { .tokens = 1, .context = 1000 };
	struct cost_step st = { .items = &it, .n_items = 1, .n_emit = 1, .total_tokens = 1 };
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;
	struct cost_result r;
	double gemm_ns, dec_ns_per_ctx;

	/* everything memory-bound and slow: times scale as 1 / hbm_bw */
	g.hbm_bw = 1e3;
	ck_assert_int_eq(cost_model_new(&cm, "roofline", &cfg, &err), 0);
	ck_assert_int_eq(cost_model_predict(cm, &st, &r, &err), 0);
	gemm_ns = (double)r.op_ns[COST_OP_GEMM];
	dec_ns_per_ctx = (double)r.op_ns[COST_OP_ATTN_DECODE] / 1001.0;
	ck_assert_double_gt(gemm_ns, 1e12);
	ck_assert_double_lt(gemm_ns, 1e17);
	/* a context whose attention alone is beyond 2^63 ns */
	it.context = (int32_t)(2e19 / dec_ns_per_ctx);
	ck_assert_int_gt(it.context, 0);
	ck_assert_int_eq(cost_model_predict(cm, &st, &r, &err), -ERANGE);
	ck_assert_msg(strstr(err.msg, "of attn_decode"), "%s", err.msg);
	cost_model_free(cm);
	ck_assert_int_eq(cost_model_new(&cm, "roofline", &cfg, &err), 0);
	ck_assert_int_eq(cost_model_predict(cm, &st, &r, &err), -ERANGE);
	ck_assert_msg(strstr(err.msg, "of attn_decode"), "%s", err.msg);
	cost_model_free(cm);

	/* GEMM about 5e18 ns and the attention about 6e18 ns: each fits,
	 * their sum does not */
	g.hbm_bw = 1e3 * gemm_ns / 5e18;
	ck_assert_int_eq(cost_model_new(&cm, "roofline", &cfg, &err), 0);
	it.context = 0;
	ck_assert_int_eq(cost_model_predict(cm, &st, &r, &err), 0);   /* fills the memo */
	dec_ns_per_ctx = (double)r.op_ns[COST_OP_ATTN_DECODE];
	it.context = 1000;
	ck_assert_int_eq(cost_model_predict(cm, &st, &r, &err), 0);
	dec_ns_per_ctx = ((double)r.op_ns[COST_OP_ATTN_DECODE] - dec_ns_per_ctx) / 1000.0;
	it.context = (int32_t)(6e18 / dec_ns_per_ctx);
	ck_assert_int_gt(it.context, 0);
	ck_assert_int_eq(cost_model_predict(cm, &st, &r, &err), -ERANGE);
	ck_assert_msg(strstr(err.msg, "of all operators together"), "%s", err.msg);
	cost_model_free(cm);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("costmodel");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, registry_and_names);
	tcase_add_test(tc, roofline_memo_random_steps);
	tcase_add_test(tc, roofline_memo_range_errors);
	tcase_add_test(tc, constant_exact);
	tcase_add_test(tc, constant_zero_and_defaults);
	tcase_add_test(tc, roofline_monotone_in_tokens);
	tcase_add_test(tc, roofline_monotone_in_context);
	tcase_add_test(tc, decode_attention_sums_lengths);
	tcase_add_test(tc, tensor_parallel);
	tcase_add_test(tc, mesh_collectives);
	tcase_add_test(tc, breakdown_and_energy_bounds);
	tcase_add_test(tc, energy_prefill_hotter_than_decode);
	tcase_add_test(tc, sanity_llama8b_h100);
	tcase_add_test(tc, sanity_llama70b_a100_tp4);
	tcase_add_test(tc, spec_errors);
	tcase_add_test(tc, roofline_params_take_effect);
	tcase_add_test(tc, roofline_memo_is_bit_for_bit);
	tcase_add_test(tc, roofline_graph_padding_is_bit_for_bit);
	tcase_add_test(tc, step_beyond_int64_ns_is_an_error);
	suite_add_tcase(s, tc);
	return s;
}
