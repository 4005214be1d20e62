/* The "table" cost model and the interpolation under it: grids reproduce
 * every measured point and bridge holes; the step reproduces measured
 * operator times at measured points (to the nanosecond it rounds to),
 * interpolates monotonically between them, prices a mixed-length decode
 * batch as the average of per-length times (which differs from the mean
 * length where the table is non-linear), maps a prefill chunk with prior
 * context to its equivalent prompt, counts and fit-prices every query
 * outside the grid, and names the backend of each operator.  The measured
 * data is a small synthetic store built here (docs/cost-models.md). */
#define _GNU_SOURCE                    /* memmem */
#include <check.h>
#include <glob.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <gsl/gsl_errno.h>

#include "catalog.h"
#include "check-main.h"
#include "config.h"
#include "costmodel.h"
#include "grid.h"
#include "lora-kernel.h"
#include "lora.h"
#include "op-plan.h"
#include "store-cache.h"
#include "store.h"

/* ---- the synthetic store ------------------------------------------------- */

#define DEV "h100-sxm"
#define MODEL "llama-3.2-1b"   /* 16 layers, d 2048, 32/8 heads of 64, ff 8192 */
#define LAYERS 16.0

static struct catalog cat;
static char dir[256], store_path[512], store_path2[512], store_path3[512], store_path4[512];
static const char *stores[1] = { store_path };

/* Synthetic latencies, ms: smooth, monotone, not power laws. */
static double t_gemm(double m, double n, double k)
{
	double tc = 2.0 * m * n * k / 5e14, tm = 2.0 * (n * k + m * k + m * n) / 2.5e12;

	return 0.004 + 1e3 * (tc > tm ? tc : tm);
}

static double t_pf(double b, double s)
{
	return 0.010 + b * s * s * 1e-8 + b * s * 1e-6;
}

/* A floor at short lengths: the table is non-linear there. */
static double t_dec(double b, double l)
{
	double mem = 6e-7 * b * l;

	return (mem > 0.012 ? mem : 0.012) + 0.0005 * b;
}

static double t_norm(double tokens, double width)
{
	return 0.003 + tokens * width * 4e-9;
}

static const double gemm_n[] = { 1024, 2048, 3072, 16384, 65536 };
static const double gemm_k[] = { 1024, 2048, 8192 };
static const double pf_b[] = { 1, 2, 4, 8 };
static const double pf_s[] = { 1, 16, 64, 256, 1024, 4096 };

/* Measured power of the synthetic kernels, W (0 = none recorded): GEMM rows
 * carry power_w, decode rows energy_j (the two ways a store holds it). */
static double gemm_power_w, dec_power_w;

static void insert(struct cal_store *s, struct cal_meas *m, double ms)
{
	struct ss_error err = { 0 };

	if (m->op == CAL_GEMM && gemm_power_w > 0)
		m->power_w = gemm_power_w;
	if (m->op == CAL_ATTN_DECODE && dec_power_w > 0)
		m->energy_j = dec_power_w * ms * 1e-3;
	m->mean_ms = ms;
	m->count = 6;
	snprintf(m->device, sizeof(m->device), DEV);
	snprintf(m->source, sizeof(m->source), "synthetic/test.csv");
	ck_assert_msg(cal_store_insert(s, m, &err) == 0, "%s", err.msg);
}

/* The GEMM grid of build_store in one dtype, latencies scaled by f, from
 * m = m0 (a power of two). */
static void insert_gemm_grid(struct cal_store *s, const char *dtype, double f, double m0)
{
	struct cal_meas m;

	for (double mm = m0; mm <= 4096; mm *= 2)
		for (size_t i = 0; i < 5; i++)
			for (size_t j = 0; j < 3; j++) {
				cal_meas_init(&m, CAL_GEMM);
				snprintf(m.dtype, sizeof(m.dtype), "%s", dtype);
				snprintf(m.variant, sizeof(m.variant), "synthetic_linear");
				m.m = (int64_t)mm;
				m.n = (int64_t)gemm_n[i];
				m.k = (int64_t)gemm_k[j];
				insert(s, &m, f * t_gemm(mm, gemm_n[i], gemm_k[j]));
			}
}

/* GEMMs in bf16, fp8 (per-tensor scales) at half and fp8_block at 0.8 x
 * the bf16 latency: --weight-dtype fp8 must take the "fp8" grid. */
static void build_quant_store(const char *path)
{
	struct ss_error err = { 0 };
	struct cal_store *s;

	ck_assert_msg(cal_store_open(&s, path, CAL_OPEN_CREATE, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	insert_gemm_grid(s, "bf16", 1.0, 1);
	insert_gemm_grid(s, "fp8_block", 0.8, 1);
	insert_gemm_grid(s, "fp8", 0.5, 1);
	ck_assert_int_eq(cal_store_commit(s, &err), 0);
	cal_store_close(s);
}

/* with_attention false: GEMMs only (attention falls back to the roofline) */
static void build_store(const char *path, bool with_attention)
{
	struct ss_error err = { 0 };
	struct cal_store *s;
	struct cal_meas m;

	ck_assert_msg(cal_store_open(&s, path, CAL_OPEN_CREATE, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	for (double mm = 1; mm <= 4096; mm *= 2)
		for (size_t i = 0; i < 5; i++)
			for (size_t j = 0; j < 3; j++) {
				cal_meas_init(&m, CAL_GEMM);
				snprintf(m.dtype, sizeof(m.dtype), "bf16");
				snprintf(m.variant, sizeof(m.variant), "synthetic_linear");
				m.m = (int64_t)mm;
				m.n = (int64_t)gemm_n[i];
				m.k = (int64_t)gemm_k[j];
				insert(s, &m, t_gemm(mm, gemm_n[i], gemm_k[j]));
			}
	if (with_attention) {
		for (size_t i = 0; i < 4; i++)
			for (size_t j = 0; j < 6; j++) {
				cal_meas_init(&m, CAL_ATTN_PREFILL);
				snprintf(m.dtype, sizeof(m.dtype), "bf16");
				snprintf(m.variant, sizeof(m.variant), "synthetic_fa");
				m.batch = (int64_t)pf_b[i];
				m.q_len = (int64_t)pf_s[j];
				m.kv_len = 0;
				m.heads = 32;
				m.kv_heads = 8;
				m.head_dim = 64;
				insert(s, &m, t_pf(pf_b[i], pf_s[j]));
			}
		/* a triangular batch x length table: B L <= 2^17 */
		for (int64_t b = 1; b <= 64; b *= 2)
			for (int64_t l = 2; l <= 16384 && b * l <= (1 << 17); l *= 2) {
				cal_meas_init(&m, CAL_ATTN_DECODE);
				snprintf(m.dtype, sizeof(m.dtype), "bf16");
				snprintf(m.variant, sizeof(m.variant), "synthetic_fa");
				m.batch = b;
				m.q_len = 1;
				m.kv_len = l;
				m.heads = 32;
				m.kv_heads = 8;
				m.head_dim = 64;
				insert(s, &m, t_dec((double)b, (double)l));
			}
		/* RMSNorm at half the model's width: scaled by width */
		for (int64_t t = 1; t <= 8192; t *= 2) {
			cal_meas_init(&m, CAL_RMSNORM);
			snprintf(m.dtype, sizeof(m.dtype), "fp16");
			snprintf(m.variant, sizeof(m.variant), "vidur:input_layernorm");
			m.tokens = t;
			m.width = 1024;
			insert(s, &m, t_norm((double)t, 1024));
		}
	}
	ck_assert_int_eq(cal_store_commit(s, &err), 0);
	cal_store_close(s);
}

static void setup(void)
{
	struct ss_error err = { 0 };
	const char *d = getenv("SERVESIM_DATA");

	gsl_set_error_handler_off();
	catalog_init(&cat);
	ck_assert_msg(catalog_load_dir(&cat, d && *d ? d : SERVESIM_SRC_DATADIR, &err) == 0, "%s",
		      err.msg);
	snprintf(dir, sizeof(dir), "/tmp/ss-table-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(store_path, sizeof(store_path), "%s/synthetic.db", dir);
	snprintf(store_path2, sizeof(store_path2), "%s/gemm-only.db", dir);
	snprintf(store_path3, sizeof(store_path3), "%s/with-energy.db", dir);
	build_store(store_path, true);
	build_store(store_path2, false);
	gemm_power_w = 500.0;
	dec_power_w = 250.0;
	build_store(store_path3, true);
	gemm_power_w = dec_power_w = 0.0;
	snprintf(store_path4, sizeof(store_path4), "%s/quant.db", dir);
	build_quant_store(store_path4);
}

/* The load caches cal_plan_load leaves beside the stores. */
static size_t cache_files(char paths[][600], size_t max)
{
	char pat[600];
	glob_t g;
	size_t n;

	snprintf(pat, sizeof(pat), "%s/.*.cache", dir);
	if (glob(pat, 0, NULL, &g) != 0)
		return 0;
	n = g.gl_pathc;
	for (size_t i = 0; i < n && i < max; i++)
		snprintf(paths[i], 600, "%s", g.gl_pathv[i]);
	globfree(&g);
	return n;
}

static void teardown(void)
{
	char paths[16][600];
	size_t n = cache_files(paths, 16);

	for (size_t i = 0; i < n && i < 16; i++)
		unlink(paths[i]);
	unlink(store_path);
	unlink(store_path2);
	unlink(store_path3);
	unlink(store_path4);
	rmdir(dir);
	catalog_release(&cat);
}

static struct cost_model *make_on(const char *spec, const char *model, const char *gpu,
				  const char *path)
{
	const char *st[1] = { path };
	struct cost_config cfg = {
		.model = catalog_model(&cat, model), .gpu = catalog_gpu(&cat, gpu), .tp = 1,
		.stores = st, .n_stores = 1,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	ck_assert_msg(cost_model_new(&cm, spec, &cfg, &err) == 0, "%s: %s", spec, err.msg);
	return cm;
}

static struct cost_model *make(const char *spec)
{
	return make_on(spec, MODEL, DEV, store_path);
}

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
	ck_assert_int_ge(r.out_of_grid_ns, 0);
	ck_assert_int_le(r.out_of_grid_ns, r.duration_ns);
	return r;
}

/* n decodes, each with KV length (context + 1) lens[i % n_lens] */
static struct cost_result decodes(struct cost_model *cm, uint32_t n, const int32_t *lens,
				  uint32_t n_lens)
{
	struct cost_item it[256];

	ck_assert_uint_le(n, 256);
	for (uint32_t i = 0; i < n; i++)
		it[i] = (struct cost_item){ 1, lens[i % n_lens] - 1 };
	return run(cm, it, n);
}

/* An operator time (ns, as rounded by the model) equals want_ms: the model
 * rounds each operator to whole nanoseconds, so 1 ns is the resolution. */
#define ck_assert_ns(got_ns, want_ms) \
	ck_assert_msg(llabs((got_ns) - llround((want_ms) * 1e6)) <= 1, \
		      "%s: %lld ns, expected %.3f ns", #got_ns, (long long)(got_ns), (want_ms) * 1e6)

/* ---- grids ------------------------------------------------------------- */

START_TEST(grid_holes_and_outside)
{
	/* 3 x 3 grid, value = x + 10 y (linear: interpolation is exact),
	 * with the centre missing and the corner (2, 2) missing */
	double t[9 * 2], v[9], y;
	struct cal_grid g;
	struct ss_error err = { 0 };
	size_t n = 0;

	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++) {
			if ((i == 1 && j == 1) || (i == 2 && j == 2))
				continue;
			t[2 * n] = i;
			t[2 * n + 1] = j;
			v[n++] = i + 10.0 * j;
		}
	ck_assert_int_eq(cal_grid_build(&g, 2, t, v, n, &err), 0);
	for (size_t p = 0; p < n; p++) {
		ck_assert(cal_grid_eval(&g, &t[2 * p], &y));
		ck_assert_double_eq_tol(y, v[p], 1e-12);
	}
	/* the hole is bridged by its neighbours along the last axis */
	ck_assert(cal_grid_eval(&g, (double[]){ 1, 1 }, &y));
	ck_assert_double_eq_tol(y, 11.0, 1e-12);
	ck_assert(cal_grid_eval(&g, (double[]){ 0.5, 0.25 }, &y));
	ck_assert_double_eq_tol(y, 3.0, 1e-12);
	/* beyond an axis, and in the missing corner's cell */
	ck_assert(!cal_grid_eval(&g, (double[]){ -0.1, 1 }, &y));
	ck_assert(!cal_grid_eval(&g, (double[]){ 1, 2.5 }, &y));
	ck_assert(!cal_grid_eval(&g, (double[]){ 2, 2 }, &y));
	ck_assert(!cal_grid_eval(&g, (double[]){ 1.5, 1.5 }, &y));
	cal_grid_release(&g);
}
END_TEST

/* Every measured point comes back exactly (1e-9 relative) from its series'
 * interpolator, and the fast tables reproduce the interpolator at their
 * breakpoints and stay within 0.2% of it between them. */
START_TEST(interp_reproduces_measurements)
{
	struct cal_data d;
	struct ss_error err = { 0 };
	size_t checked = 0;

	cal_data_init(&d);
	ck_assert_int_eq(cal_data_load(&d, stores, 1, DEV, ~0u, NULL, NULL, &err), 0);
	ck_assert_uint_eq(d.n, 4);
	for (size_t i = 0; i < d.n; i++) {
		struct cal_interp ip;

		ck_assert_msg(cal_interp_build(&ip, &d.s[i], NULL, &err) == 0, "%s", err.msg);
		ck_assert(ip.prior);
		for (size_t p = 0; p < d.s[i].n; p++) {
			double y;

			ck_assert(cal_interp_eval(&ip, d.s[i].x + p * d.s[i].ndim, &y));
			ck_assert_msg(fabs(y / d.s[i].y[p] - 1.0) <= 1e-9, "%s point %zu: %.12g vs %.12g",
				      cal_op_name(d.s[i].op), p, y, d.s[i].y[p]);
			checked++;
		}
		cal_interp_release(&ip);
	}
	/* GEMM 13 x 15, prefill 4 x 6, decode triangle 4 x 14 + 13 + 12 + 11, norm 14 */
	ck_assert_uint_eq(checked, 13 * 15 + 24 + 4 * 14 + 13 + 12 + 11 + 14);
	cal_data_release(&d);
}
END_TEST

struct fn_ctx {
	struct cal_interp *ip;
};

static bool dec_row_fn(void *ctx, int row, double x, double *y)
{
	struct fn_ctx *c = ctx;
	double xx[2] = { row == 0 ? 4.0 : 8.0, x };

	return cal_interp_eval(c->ip, xx, y);
}

START_TEST(ptab_tracks_interpolator)
{
	struct cal_data d;
	struct ss_error err = { 0 };
	struct cal_interp ip;
	struct cal_ptab p;
	struct fn_ctx c = { &ip };
	const struct cal_series *s;
	double f, y, yi, nodes[14];
	size_t nn;

	cal_data_init(&d);
	ck_assert_int_eq(cal_data_load(&d, stores, 1, DEV, 1u << CAL_ATTN_DECODE, NULL, NULL, &err), 0);
	s = cal_data_attn(&d, DEV, CAL_ATTN_DECODE, 32, 8, 64, &f);
	ck_assert_ptr_nonnull(s);
	ck_assert_double_eq(f, 1.0);
	ck_assert_int_eq(cal_interp_build(&ip, s, NULL, &err), 0);
	nn = cal_interp_nodes(&ip, 1, nodes, 14);
	ck_assert_uint_eq(nn, 14);
	ck_assert_double_eq(nodes[0], 2.0);
	ck_assert_int_eq(cal_ptab_build(&p, 2, 2.0, 16384.0, nodes, nn, dec_row_fn, &c, &err), 0);
	/* row ranges follow the triangle: batch 8 stops at 2^14 */
	ck_assert_double_eq(p.lo[0], 2.0);
	ck_assert_double_eq(p.hi[0], 16384.0);
	ck_assert_double_eq(p.hi[1], 16384.0);
	for (size_t i = 0; i < nn; i++) {
		ck_assert(cal_ptab_eval(&p, 1, nodes[i], &y));
		ck_assert_double_eq_tol(y / t_dec(8, nodes[i]), 1.0, 1e-9);
	}
	for (double x = 2.0; x <= 16384.0; x *= 1.037) {
		double xx[2] = { 4.0, x };

		ck_assert(cal_ptab_eval(&p, 0, x, &y));
		ck_assert(cal_interp_eval(&ip, xx, &yi));
		ck_assert_msg(fabs(y / yi - 1.0) < 2e-3, "L %g: table %g, interpolator %g", x, y, yi);
	}
	ck_assert(!cal_ptab_eval(&p, 0, 16385.0, &y));
	ck_assert(!cal_ptab_eval(&p, 0, 1.5, &y));
	cal_ptab_release(&p);
	cal_interp_release(&ip);
	cal_data_release(&d);
}
END_TEST

/* ---- the cost model ---------------------------------------------------- */

static double gemm_layer(double m)
{
	return t_gemm(m, 3072, 2048) + t_gemm(m, 2048, 2048) + t_gemm(m, 16384, 2048) +
	       t_gemm(m, 2048, 8192);
}

START_TEST(exact_at_measured_points)
{
	struct cost_model *cm = make("table");
	struct cost_result r;
	struct cost_item it;

	/* uniform decode batch at measured (batch, length) nodes */
	for (uint32_t b = 1; b <= 64; b *= 2)
		for (int32_t l = 2; l <= 16384 && (int64_t)b * l <= (1 << 17); l *= 4) {
			r = decodes(cm, b, &l, 1);
			ck_assert_ns(r.op_ns[COST_OP_ATTN_DECODE], LAYERS * t_dec(b, l));
			ck_assert_ns(r.op_ns[COST_OP_GEMM], LAYERS * gemm_layer(b));
			ck_assert_int_eq(r.out_of_grid, 0);
			ck_assert_int_eq(r.out_of_grid_ns, 0);
		}
	/* a whole prompt at a measured length */
	for (size_t j = 1; j < 6; j++) {
		it = (struct cost_item){ (int32_t)pf_s[j], 0 };
		r = run(cm, &it, 1);
		ck_assert_ns(r.op_ns[COST_OP_ATTN_PREFILL], LAYERS * t_pf(1, pf_s[j]));
		ck_assert_ns(r.op_ns[COST_OP_GEMM], LAYERS * gemm_layer(pf_s[j]));
	}
	/* LM head: final norm at the width-scaled token count, LM-head GEMM
	 * (vocab 128256 > 65536: two column blocks of 64128) */
	it = (struct cost_item){ 1024, 0 };
	r = run(cm, &it, 1);
	ck_assert_int_gt(r.op_ns[COST_OP_LM_HEAD], llround(1e6 * t_norm(2048, 1024)));
	cost_model_free(cm);
}
END_TEST

/* A GEMM whose N has no line of its own (servesim's calibrate run measures
 * the model's shapes only: a draft head's 32,000-row LM head beside the
 * target's 32,064) is priced from the nearest line of the same K within
 * 25% in N, scaled by the ratio of N, and the plan says so; beyond 25%
 * nothing covers it. */
START_TEST(gemm_from_the_nearest_line)
{
	static const double ns[2] = { 4096, 32064 }, ms[4] = { 1, 4, 16, 64 };
	char path[600];
	struct ss_error err = { 0 };
	struct cal_store *st;
	struct cal_meas m;
	const char *sts[1] = { path };
	struct cal_shape sh = { .layers = 8, .hidden = 512, .heads = 8, .kv_heads = 2,
				.head_dim = 64, .ff = 2048, .gated = true, .rope = true,
				.vocab = 32000, .tp = 1, .dtype_bytes = 2 };
	struct cal_plan p;
	double y;

	snprintf(path, sizeof(path), "%s/lines.db", dir);
	ck_assert_msg(cal_store_open(&st, path, CAL_OPEN_CREATE, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(cal_store_begin(st, &err), 0);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 4; j++) {
			cal_meas_init(&m, CAL_GEMM);
			snprintf(m.dtype, sizeof(m.dtype), "bf16");
			snprintf(m.variant, sizeof(m.variant), "servesim-cpu:test");
			m.m = (int64_t)ms[j];
			m.n = (int64_t)ns[i];
			m.k = 512;
			insert(st, &m, t_gemm(ms[j], ns[i], 512));
		}
	ck_assert_int_eq(cal_store_commit(st, &err), 0);
	cal_store_close(st);

	ck_assert_msg(cal_plan_load(&p, sts, 1, DEV, &sh, &err) == 0, "%s", err.msg);
	ck_assert_ptr_nonnull(p.gemm[CAL_G_LM].s);
	ck_assert(cal_plan_gemm_eval(&p, CAL_G_LM, 4, &y));
	ck_assert_double_eq_tol(y, t_gemm(4, 32064, 512) * 32000.0 / 32064.0, 1e-9);
	ck_assert_ptr_nonnull(strstr(p.why, "LM head GEMM priced from the measured line of the nearest N"));
	cal_plan_release(&p);
	/* exactly measured: the line itself, nothing said */
	sh.vocab = 32064;
	ck_assert_msg(cal_plan_load(&p, sts, 1, DEV, &sh, &err) == 0, "%s", err.msg);
	ck_assert(cal_plan_gemm_eval(&p, CAL_G_LM, 4, &y));
	ck_assert_double_eq_tol(y, t_gemm(4, 32064, 512), 1e-12);
	ck_assert_ptr_null(strstr(p.why, "nearest N"));
	cal_plan_release(&p);
	/* 26% away: not covered */
	sh.vocab = 40400;
	ck_assert_msg(cal_plan_load(&p, sts, 1, DEV, &sh, &err) == 0, "%s", err.msg);
	ck_assert_ptr_null(p.gemm[CAL_G_LM].s);
	cal_plan_release(&p);
	unlink(path);
}
END_TEST

/* --weight-dtype fp8: the layer GEMMs come from the store's per-tensor fp8
 * grid ("fp8", not "fp8_block"), at the measured points exactly; the LM
 * head stays on the bf16 grid; a store without fp8 GEMMs leaves them to
 * the roofline; bf16 weights are unchanged by the fp8 rows. */
START_TEST(fp8_gemms_from_the_fp8_grid)
{
	const char *st[1] = { store_path4 };
	struct cost_config cfg = {
		.model = catalog_model(&cat, MODEL), .gpu = catalog_gpu(&cat, DEV), .tp = 1,
		.stores = st, .n_stores = 1, .weight_dtype = SS_DTYPE_FP8,
	};
	struct ss_error err = { 0 };
	struct cost_model *q = NULL, *b = NULL, *b16;
	struct cost_result rq, rb, r16;
	struct cost_item it;

	ck_assert_msg(cost_model_new(&q, "table", &cfg, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(cost_model_op_backend(q, COST_OP_GEMM), "table");
	cfg.weight_dtype = SS_DTYPE_BF16;
	ck_assert_msg(cost_model_new(&b, "table", &cfg, &err) == 0, "%s", err.msg);
	b16 = make_on("table", MODEL, DEV, store_path2);   /* the same bf16 grid alone */
	for (double m = 1; m <= 4096; m *= 4) {
		it = (struct cost_item){ (int32_t)m, 0 };
		rq = run(q, &it, 1);
		rb = run(b, &it, 1);
		r16 = run(b16, &it, 1);
		ck_assert_ns(rq.op_ns[COST_OP_GEMM], LAYERS * 0.5 * gemm_layer(m));
		ck_assert_ns(rb.op_ns[COST_OP_GEMM], LAYERS * gemm_layer(m));
		ck_assert_int_eq(rb.op_ns[COST_OP_GEMM], r16.op_ns[COST_OP_GEMM]);
		ck_assert_int_eq(rq.op_ns[COST_OP_LM_HEAD], rb.op_ns[COST_OP_LM_HEAD]);
		ck_assert_int_eq(rb.op_ns[COST_OP_LM_HEAD], r16.op_ns[COST_OP_LM_HEAD]);
	}
	cost_model_free(q);
	cost_model_free(b);
	cost_model_free(b16);
	/* no fp8 rows: the roofline */
	st[0] = store_path2;
	cfg.weight_dtype = SS_DTYPE_FP8;
	ck_assert_msg(cost_model_new(&q, "table", &cfg, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(cost_model_op_backend(q, COST_OP_GEMM), "roofline");
	cost_model_free(q);
}
END_TEST

/* A device whose only fp8 GEMMs are block-scaled (AITER's MI300X tables):
 * --weight-dtype fp8 takes its layer GEMMs from the "fp8_block" grid.  The
 * grid starts at m = 16 but for one point at m = 1 of another (n, k), as
 * AITER's tables do, so the model's shapes are covered from m = 16 on. */
START_TEST(fp8_block_grid_when_no_fp8_grid)
{
	char path[600];
	const char *st[1] = { path };
	struct cost_config cfg = {
		.model = catalog_model(&cat, MODEL), .gpu = catalog_gpu(&cat, DEV), .tp = 1,
		.stores = st, .n_stores = 1, .weight_dtype = SS_DTYPE_FP8,
	};
	struct ss_error err = { 0 };
	struct cal_store *s;
	struct cal_meas m;
	struct cost_model *q = NULL;

	snprintf(path, sizeof(path), "%s/block.db", dir);
	ck_assert_msg(cal_store_open(&s, path, CAL_OPEN_CREATE, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	insert_gemm_grid(s, "bf16", 1.0, 1);
	insert_gemm_grid(s, "fp8_block", 0.8, 16);
	cal_meas_init(&m, CAL_GEMM);
	snprintf(m.dtype, sizeof(m.dtype), "fp8_block");
	snprintf(m.variant, sizeof(m.variant), "synthetic_linear");
	m.m = 1;
	m.n = 64;
	m.k = 64;
	insert(s, &m, 0.001);
	ck_assert_int_eq(cal_store_commit(s, &err), 0);
	cal_store_close(s);

	ck_assert_msg(cost_model_new(&q, "table", &cfg, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(cost_model_op_backend(q, COST_OP_GEMM), "table");
	for (double mm = 16; mm <= 4096; mm *= 4) {
		struct cost_item it = { (int32_t)mm, 0 };
		struct cost_result r = run(q, &it, 1);

		ck_assert_ns(r.op_ns[COST_OP_GEMM], LAYERS * 0.8 * gemm_layer(mm));
	}
	cost_model_free(q);
	unlink(path);
}
END_TEST

/* A chunk of c tokens after p cached ones costs the prompt with the same
 * causal key positions: 41 tokens after 12,779 have 1024 x 1025 / 2. */
START_TEST(prefill_prior_context)
{
	struct cost_model *cm = make("table");
	struct cost_item it = { 41, 12779 }, pair[2] = { { 41, 12779 }, { 256, 0 } };
	struct cost_result r = run(cm, &it, 1);
	double w = log(2.0) / log(2.0);

	ck_assert_ns(r.op_ns[COST_OP_ATTN_PREFILL], LAYERS * t_pf(1, 1024));
	ck_assert_int_eq(r.out_of_grid, 0);
	/* two chunks: the mean of their times at batch 2 */
	r = run(cm, pair, 2);
	(void)w;
	ck_assert_ns(r.op_ns[COST_OP_ATTN_PREFILL], LAYERS * 0.5 * (t_pf(2, 1024) + t_pf(2, 256)));
	/* more prior context costs more */
	for (int32_t p = 0, prev = 0; p <= 3000; p += 250) {
		it = (struct cost_item){ 64, p };
		r = run(cm, &it, 1);
		ck_assert_int_gt(r.op_ns[COST_OP_ATTN_PREFILL], prev);
		prev = (int32_t)r.op_ns[COST_OP_ATTN_PREFILL];
	}
	cost_model_free(cm);
}
END_TEST

START_TEST(monotone_between_points)
{
	struct cost_model *cm = make("table");
	int64_t prev = 0;

	/* GEMM time over every token count up to the grid's end */
	for (int32_t m = 1; m <= 4096; m += m < 64 ? 1 : 7) {
		struct cost_item it = { m, 0 };
		struct cost_result r = run(cm, &it, 1);
		int64_t lo_node = llround(LAYERS * 1e6 * gemm_layer(exp2(floor(log2(m)))));
		int64_t hi_node = llround(LAYERS * 1e6 * gemm_layer(exp2(ceil(log2(m)))));

		ck_assert_int_ge(r.op_ns[COST_OP_GEMM], prev);
		ck_assert_int_ge(r.op_ns[COST_OP_GEMM], lo_node - 1);
		ck_assert_int_le(r.op_ns[COST_OP_GEMM], hi_node + 1);
		prev = r.op_ns[COST_OP_GEMM];
	}
	/* decode attention over KV length between nodes, batch 16 */
	prev = 0;
	for (int32_t l = 2; l <= 8192; l += l < 100 ? 1 : 37) {
		struct cost_result r = decodes(cm, 16, &l, 1);
		double lo = exp2(floor(log2(l))), hi = exp2(ceil(log2(l)));

		ck_assert_int_ge(r.op_ns[COST_OP_ATTN_DECODE], prev);
		ck_assert_int_ge(r.op_ns[COST_OP_ATTN_DECODE], llround(LAYERS * 1e6 * t_dec(16, lo)) - 1);
		ck_assert_int_le(r.op_ns[COST_OP_ATTN_DECODE], llround(LAYERS * 1e6 * t_dec(16, hi)) + 1);
		prev = r.op_ns[COST_OP_ATTN_DECODE];
	}
	cost_model_free(cm);
}
END_TEST

/* Mixed KV lengths: (1/B) sum_i T(B, L_i).  Uniform lengths reproduce the
 * table; a mix of short (on the floor) and long requests differs from the
 * mean length; a batch between measured sizes interpolates geometrically
 * in log batch. */
START_TEST(decode_mixed_lengths)
{
	struct cost_model *cm = make("table");
	const int32_t mix[2] = { 16, 8192 }, mean = (16 + 8192) / 2, l1024 = 1024;
	struct cost_result r, rm;
	double want, w;

	r = decodes(cm, 8, mix, 2);
	want = LAYERS * 0.5 * (t_dec(8, 16) + t_dec(8, 8192));
	ck_assert_ns(r.op_ns[COST_OP_ATTN_DECODE], want);
	rm = decodes(cm, 8, &mean, 1);
	ck_assert_msg(r.op_ns[COST_OP_ATTN_DECODE] > 1.2 * rm.op_ns[COST_OP_ATTN_DECODE],
		      "average %lld ns vs mean length %lld ns", (long long)r.op_ns[COST_OP_ATTN_DECODE],
		      (long long)rm.op_ns[COST_OP_ATTN_DECODE]);
	/* where T is linear in L (above the floor) the two agree */
	r = decodes(cm, 8, (const int32_t[]){ 4096, 16384 }, 2);
	rm = decodes(cm, 8, (const int32_t[]){ 10240 }, 1);
	ck_assert_double_eq_tol((double)r.op_ns[COST_OP_ATTN_DECODE] / rm.op_ns[COST_OP_ATTN_DECODE],
				1.0, 0.02);
	/* batch 6, between the measured 4 and 8 */
	w = log(6.0 / 4.0) / log(2.0);
	r = decodes(cm, 6, &l1024, 1);
	want = LAYERS * pow(t_dec(4, 1024), 1.0 - w) * pow(t_dec(8, 1024), w);
	ck_assert_ns(r.op_ns[COST_OP_ATTN_DECODE], want);
	cost_model_free(cm);
}
END_TEST

/* Queries outside the grid are priced by the fit and counted. */
START_TEST(out_of_grid_counted)
{
	struct cost_model *cm = make("table");
	struct cal_plan p;
	struct cal_shape sh = { .layers = 16, .hidden = 2048, .heads = 32, .kv_heads = 8,
				.head_dim = 64, .ff = 8192, .gated = true, .rope = true,
				.vocab = 128256, .tp = 1, .dtype_bytes = 2 };
	struct ss_error err = { 0 };
	const int32_t l4096 = 4096, mixed[2] = { 1024, 8192 };
	struct cost_result r;
	struct cost_item it;
	double want, a, b;

	ck_assert_int_eq(cal_plan_load(&p, stores, 1, DEV, &sh, &err), 0);
	/* batch 64 at KV 4096 is beyond the triangle (64 x 4096 > 2^17) */
	r = decodes(cm, 64, &l4096, 1);
	want = LAYERS * cal_decode_fit(&p.dec.ip.fit, 64, 64 * 4096.0);
	ck_assert_ns(r.op_ns[COST_OP_ATTN_DECODE], want);
	ck_assert_int_eq(r.out_of_grid, 64);
	ck_assert_int_eq(r.out_of_grid_ns, r.op_ns[COST_OP_ATTN_DECODE]);
	/* half of a batch of 32 outside (32 x 8192 > 2^17): only those count */
	r = decodes(cm, 32, mixed, 2);
	ck_assert_int_eq(r.out_of_grid, 16);
	want = LAYERS * 0.5 * cal_decode_fit(&p.dec.ip.fit, 32, 32 * 8192.0);
	ck_assert_msg(llabs(r.out_of_grid_ns - llround(want * 1e6)) <= 1, "%lld vs %g",
		      (long long)r.out_of_grid_ns, want * 1e6);
	/* 5000 tokens: GEMM, prefill attention and final norm beyond the grid */
	it = (struct cost_item){ 5000, 0 };
	r = run(cm, &it, 1);
	want = 0.0;
	for (int g = CAL_G_QKV; g <= CAL_G_DOWN; g++) {
		cal_plan_gemm_linear(&p, g, &a, &b);
		want += LAYERS * (a + b * 5000.0);
	}
	ck_assert_ns(r.op_ns[COST_OP_GEMM], want);
	ck_assert_ns(r.op_ns[COST_OP_ATTN_PREFILL],
		     LAYERS * cal_prefill_fit(&p.pf.ip.fit, 5000.0, 5000.0 * 5001.0 / 2.0));
	ck_assert_int_eq(r.out_of_grid, 3);
	ck_assert_int_ge(r.out_of_grid_ns, r.op_ns[COST_OP_GEMM] + r.op_ns[COST_OP_ATTN_PREFILL]);
	/* inside the grid nothing is counted */
	it = (struct cost_item){ 4096, 0 };
	r = run(cm, &it, 1);
	ck_assert_int_eq(r.out_of_grid, 0);
	cal_plan_release(&p);
	cost_model_free(cm);
}
END_TEST

/* The model memoises the operators that depend on the step's tokens,
 * emitted rows or request count alone: a long-lived model gives every step
 * the result a fresh model gives it, bit for bit, whatever came before,
 * including steps whose quantities share a memo entry (differ by a multiple
 * of 256) and out-of-grid steps counted again on every repeat. */
START_TEST(memo_is_bit_for_bit)
{
	static const int32_t toks[] = { 8, 264, 8, 5000, 4096, 5000, 5256, 4352, 4096, 1, 257, 1 };
	struct cost_model *cm = make("table");

	for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++) {
		struct cost_model *fresh = make("table");
		struct cost_item it[3] = { { toks[i], 0 }, { 1, 700 }, { 1, 90 } };
		uint32_t n = 1 + (uint32_t)(i % 3);
		struct cost_result a = run(cm, it, n), b = run(fresh, it, n);

		ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0, "step %zu (%d tokens) differs", i,
			      toks[i]);
		if (toks[i] >= 5000)
			ck_assert_uint_ge(a.out_of_grid, 1);
		cost_model_free(fresh);
	}
	cost_model_free(cm);
}
END_TEST

static uint64_t rnd_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* The step-level memos (the operators but the attention, on tokens,
 * emitted rows and requests; each bank's start of the last batch size):
 * over random steps, mostly decodes at growing and scattered KV lengths,
 * some prefill chunks and idle items, in and out of the grid, a
 * long-lived model gives every step the result of a fresh one, bit for
 * bit, with and without measured power. */
START_TEST(memo_random_steps)
{
	static struct cost_item it[300];
	const char *paths[2] = { store_path, store_path3 };

	for (int c = 0; c < 2; c++) {
		struct cost_model *cm = make_on("table", MODEL, DEV, paths[c]);
		uint64_t x = 0x2545f4914f6cdd1dull + (uint64_t)c;
		uint32_t oog_steps = 0;

		for (int k = 0; k < 400; k++) {
			struct cost_model *fresh = make_on("table", MODEL, DEV, paths[c]);
			struct cost_step s = { .items = it };
			struct cost_result a, b;
			struct ss_error err = { 0 };
			uint64_t kind = rnd_next(&x) % 4;

			s.n_items = kind == 0 ? 1 + (uint32_t)(rnd_next(&x) % 4) :
				    kind == 3 ? (uint32_t)(rnd_next(&x) % 300) :
				    (uint32_t)(rnd_next(&x) % 40);
			for (uint32_t i = 0; i < s.n_items; i++) {
				uint64_t r = rnd_next(&x) % 100;

				it[i].context = (int32_t)(rnd_next(&x) % (r < 50 ? 2000 : 12000));
				it[i].tokens = r < 80 ? 1 : r < 95 ? 1 + (int32_t)(rnd_next(&x) % 6000) : 0;
				s.total_tokens += it[i].tokens;
				s.n_prefill += it[i].tokens > 1;
			}
			s.n_emit = (uint32_t)(rnd_next(&x) % (s.n_items + 1));
			memset(&a, 0x5a, sizeof(a));
			memset(&b, 0x5a, sizeof(b));
			ck_assert_msg(cost_model_predict(cm, &s, &a, &err) == 0, "%s", err.msg);
			ck_assert_msg(cost_model_predict(fresh, &s, &b, &err) == 0, "%s", err.msg);
			ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0,
				      "store %d step %d (%u items, %u emitted) differs", c, k,
				      s.n_items, s.n_emit);
			oog_steps += a.out_of_grid > 0;
			cost_model_free(fresh);
		}
		/* both in and out of the grid were exercised */
		ck_assert_uint_gt(oog_steps, 10);
		ck_assert_uint_lt(oog_steps, 390);
		cost_model_free(cm);
	}
}
END_TEST

/* The same on the shipped store at tp 2 (llama-2-70b on an A100, as the
 * peer-workload runs): there the host overhead and the collectives are
 * measured too, so the memo's request-count and emitted-row parts are
 * exercised. */
START_TEST(memo_random_steps_shipped)
{
	static struct cost_item it[300];
	char path[600];
	const char *st[1] = { path };
	const char *d = getenv("SERVESIM_DATA");
	struct cost_config cfg = {
		.model = catalog_model(&cat, "llama-2-70b"), .gpu = catalog_gpu(&cat, "a100-80gb-sxm"),
		.tp = 2, .stores = st, .n_stores = 1,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;
	uint64_t x = 0x5851f42d4c957f2dull;

	snprintf(path, sizeof(path), "%s/calibration.db", d && *d ? d : SERVESIM_SRC_DATADIR);
	ck_assert_msg(cost_model_new(&cm, "table", &cfg, &err) == 0, "%s", err.msg);
	/* the cost model's operators (lora is the adapter component's, lora.h) */
	for (int op = 0; op < COST_OP_LORA; op++)
		ck_assert_str_eq(cost_model_op_backend(cm, (enum cost_op)op), "table");
	for (int k = 0; k < 300; k++) {
		struct cost_model *fresh = NULL;
		struct cost_step s = { .items = it };
		struct cost_result a, b;
		uint64_t kind = rnd_next(&x) % 4;

		ck_assert_msg(cost_model_new(&fresh, "table", &cfg, &err) == 0, "%s", err.msg);
		s.n_items = kind == 0 ? 1 + (uint32_t)(rnd_next(&x) % 4) :
			    kind == 3 ? (uint32_t)(rnd_next(&x) % 300) : (uint32_t)(rnd_next(&x) % 40);
		for (uint32_t i = 0; i < s.n_items; i++) {
			uint64_t r = rnd_next(&x) % 100;

			it[i].context = (int32_t)(rnd_next(&x) % 4000);
			it[i].tokens = r < 80 ? 1 : r < 95 ? 1 + (int32_t)(rnd_next(&x) % 4096) : 0;
			s.total_tokens += it[i].tokens;
			s.n_prefill += it[i].tokens > 1;
		}
		s.n_emit = (uint32_t)(rnd_next(&x) % (s.n_items + 1));
		/* the same bytes where a step sets nothing (padding) */
		memset(&a, 0x5a, sizeof(a));
		memset(&b, 0x5a, sizeof(b));
		ck_assert_msg(cost_model_predict(cm, &s, &a, &err) == 0, "%s", err.msg);
		ck_assert_msg(cost_model_predict(fresh, &s, &b, &err) == 0, "%s", err.msg);
		ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0, "step %d (%u items, %u emitted) differs",
			      k, s.n_items, s.n_emit);
		cost_model_free(fresh);
	}
	cost_model_free(cm);
}
END_TEST

/* A step of decodes alone is priced in one pass over its items (its marks:
 * no prefill, a token per item); the same items marked otherwise take the
 * general passes: both give the same result, bit for bit, with lengths in
 * the decode rows (memoised terms), below them (ctx 0, as CUDA-graph
 * padding) and above them (the fit), on a long-lived model whose term
 * memo grows as the steps come. */
START_TEST(decode_pass_matches_general)
{
	static struct cost_item it[300];
	char path[600];
	const char *st[1] = { path };
	const char *d = getenv("SERVESIM_DATA");
	struct cost_config cfg = {
		.model = catalog_model(&cat, "llama-2-70b"), .gpu = catalog_gpu(&cat, "a100-80gb-sxm"),
		.tp = 2, .stores = st, .n_stores = 1,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint32_t oog_steps = 0;

	snprintf(path, sizeof(path), "%s/calibration.db", d && *d ? d : SERVESIM_SRC_DATADIR);
	ck_assert_msg(cost_model_new(&cm, "table", &cfg, &err) == 0, "%s", err.msg);
	for (int k = 0; k < 300; k++) {
		struct cost_step s = { .items = it };
		struct cost_result a, b;

		s.n_items = 1 + (uint32_t)(rnd_next(&x) % 300);
		for (uint32_t i = 0; i < s.n_items; i++) {
			uint64_t r = rnd_next(&x) % 100;

			it[i].tokens = 1;
			it[i].context = r < 10 ? 0 : (int32_t)(rnd_next(&x) % (r < 95 ? 5000 : 40000));
		}
		s.total_tokens = s.n_items;
		s.n_emit = s.n_items;
		memset(&a, 0x5a, sizeof(a));
		memset(&b, 0x5a, sizeof(b));
		ck_assert_msg(cost_model_predict(cm, &s, &a, &err) == 0, "%s", err.msg);
		s.n_prefill = 1;   /* not so: the general passes */
		ck_assert_msg(cost_model_predict(cm, &s, &b, &err) == 0, "%s", err.msg);
		ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0, "step %d (%u decodes) differs", k,
			      s.n_items);
		oog_steps += a.out_of_grid > 0;
	}
	ck_assert_uint_gt(oog_steps, 10);   /* the fit's lengths were exercised */
	cost_model_free(cm);
}
END_TEST

START_TEST(backend_names_and_fallback)
{
	struct cost_model *cm = make("table"), *rl = make("roofline"), *g = NULL;
	struct cost_item it[3] = { { 300, 0 }, { 1, 500 }, { 1, 70 } };
	struct cost_result r, rr;
	static const char *const want[COST_OP_COUNT] = {
		[COST_OP_GEMM] = "table", [COST_OP_ATTN_PREFILL] = "table",
		[COST_OP_ATTN_DECODE] = "table", [COST_OP_ELEMENTWISE] = "roofline",
		[COST_OP_LM_HEAD] = "table", [COST_OP_ALLREDUCE] = "table",
		[COST_OP_HOST] = "roofline",
	};

	for (int op = 0; op < COST_OP_LORA; op++)   /* lora: the adapter component's */
		ck_assert_str_eq(cost_model_op_backend(cm, op), want[op]);
	/* unmeasured operators are the roofline's, and the energy is the
	 * roofline's average power over the table's duration */
	r = run(cm, it, 3);
	rr = run(rl, it, 3);
	ck_assert_int_eq(r.op_ns[COST_OP_ELEMENTWISE], rr.op_ns[COST_OP_ELEMENTWISE]);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], rr.op_ns[COST_OP_HOST]);
	ck_assert_double_eq_tol(r.energy_j / r.duration_ns, rr.energy_j / rr.duration_ns,
				1e-12 * rr.energy_j / rr.duration_ns);
	cost_model_free(cm);
	/* a store without attention: attention from the roofline */
	g = make_on("table", MODEL, DEV, store_path2);
	ck_assert_str_eq(cost_model_op_backend(g, COST_OP_GEMM), "table");
	ck_assert_str_eq(cost_model_op_backend(g, COST_OP_ATTN_DECODE), "roofline");
	ck_assert_str_eq(cost_model_op_backend(g, COST_OP_LM_HEAD), "roofline");
	r = run(g, it, 3);
	ck_assert_int_eq(r.op_ns[COST_OP_ATTN_DECODE], rr.op_ns[COST_OP_ATTN_DECODE]);
	ck_assert_int_eq(r.op_ns[COST_OP_ATTN_PREFILL], rr.op_ns[COST_OP_ATTN_PREFILL]);
	cost_model_free(g);
	cost_model_free(rl);
}
END_TEST

START_TEST(selection_helper)
{
	char why[512];

	ck_assert(cost_store_covers(stores, 1, catalog_model(&cat, MODEL), catalog_gpu(&cat, DEV), 1,
				    why, sizeof(why)));
	ck_assert_str_eq(why, "");
	/* no measurements of that GPU */
	ck_assert(!cost_store_covers(stores, 1, catalog_model(&cat, MODEL),
				     catalog_gpu(&cat, "l40s"), 1, why, sizeof(why)));
	ck_assert_msg(strstr(why, "l40s") != NULL, "%s", why);
	/* head_dim 128: no attention measured for those heads */
	ck_assert(!cost_store_covers(stores, 1, catalog_model(&cat, "llama-3.1-8b"),
				     catalog_gpu(&cat, DEV), 1, why, sizeof(why)));
	ck_assert_msg(strstr(why, "attention") != NULL, "%s", why);
	/* GEMMs only */
	{
		const char *st2[1] = { store_path2 };

		ck_assert(!cost_store_covers(st2, 1, catalog_model(&cat, MODEL), catalog_gpu(&cat, DEV),
					     1, NULL, 0));
	}
	/* no store at all */
	ck_assert(!cost_store_covers(NULL, 0, catalog_model(&cat, MODEL), catalog_gpu(&cat, DEV), 1,
				     why, sizeof(why)));
}
END_TEST

/* Where measurements carry energy, an operator draws its measured average
 * power over its time; the rest of the step keeps the roofline's power. */
START_TEST(measured_power_prices_energy)
{
	struct cost_model *plain = make("table");
	struct cost_model *metered = make_on("table", MODEL, DEV, store_path3);
	struct cost_item it[8];
	struct cost_result a, b;
	double p_rl, t_gemm_s, t_dec_s, t_s, want;

	for (int i = 0; i < 8; i++)
		it[i] = (struct cost_item){ 1, 300 + 100 * i };
	a = run(plain, it, 8);
	b = run(metered, it, 8);
	/* same times: energy does not change the latency model */
	ck_assert_int_eq(a.duration_ns, b.duration_ns);
	for (int op = 0; op < COST_OP_COUNT; op++)
		ck_assert_int_eq(a.op_ns[op], b.op_ns[op]);
	t_s = a.duration_ns * 1e-9;
	t_gemm_s = (a.op_ns[COST_OP_GEMM] + a.op_ns[COST_OP_LM_HEAD]) * 1e-9;
	t_dec_s = a.op_ns[COST_OP_ATTN_DECODE] * 1e-9;
	p_rl = a.energy_j / t_s;   /* the roofline's average power for this step */
	want = 500.0 * t_gemm_s + 250.0 * t_dec_s + p_rl * (t_s - t_gemm_s - t_dec_s);
	ck_assert_double_eq_tol(b.energy_j, want, 1e-9 * want);
	ck_assert_double_ne(b.energy_j, a.energy_j);
	cost_model_free(plain);
	cost_model_free(metered);
}
END_TEST

START_TEST(errors)
{
	const char *missing[1] = { "/nonexistent/servesim/calibration.db" };
	struct cost_config cfg = {
		.model = catalog_model(&cat, MODEL), .gpu = catalog_gpu(&cat, DEV), .tp = 1,
		.stores = missing, .n_stores = 1,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	ck_assert_int_ne(cost_model_new(&cm, "table", &cfg, &err), 0);
	ck_assert_ptr_null(cm);
	ck_assert_msg(strstr(err.msg, "calibration.db") || strstr(err.file, "calibration.db"),
		      "%s: %s", err.file, err.msg);
	memset(&err, 0, sizeof(err));
	cfg.stores = stores;
	ck_assert_int_ne(cost_model_new(&cm, "table:custom_allreduce_max_mb=-1", &cfg, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "custom_allreduce_max_mb"));
	ck_assert_int_ne(cost_model_new(&cm, "table:bogus=1", &cfg, &err), 0);
	cfg.n_stores = 0;
	ck_assert_int_eq(cost_model_new(&cm, "table", &cfg, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "calibration store"));
	cfg.n_stores = 1;
	cfg.model = NULL;
	ck_assert_int_ne(cost_model_new(&cm, "table", &cfg, &err), 0);
}
END_TEST

/* Predictions over a spread of steps (prefill, decode, mixed, beyond the
 * grid), for bit-for-bit comparisons. */
static void predict_many(struct cost_model *cm, struct cost_result *out, size_t n_out)
{
	for (size_t i = 0; i < n_out; i++) {
		struct cost_item it[3] = {
			{ .tokens = (int32_t)(1 + 37 * i), .context = (int32_t)(13 * i) },
			{ .tokens = 1, .context = (int32_t)(100 + 211 * i) },
			{ .tokens = 1, .context = (int32_t)(7 * i) },
		};

		memset(&out[i], 0, sizeof(out[i]));
		out[i] = run(cm, it, 1 + i % 3);
	}
}

/* The cache file of one kind ("rows": cal_plan_load's series, "table": a
 * finished table) among the caches beside the stores: its index in paths,
 * or -1.  The kind is the first word of the key's dependencies line. */
static int cache_of(char paths[][600], size_t n, const char *kind, const char *model)
{
	char want[128];
	int found = -1;

	snprintf(want, sizeof(want), "\n%s ", kind);
	for (size_t i = 0; i < n; i++) {
		static char buf[1 << 20];
		FILE *f = fopen(paths[i], "rb");
		size_t len;

		ck_assert_ptr_nonnull(f);
		len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		/* the key is text near the start, before any binary payload */
		if (len > 16 && memmem(buf, len < 8192 ? len : 8192, want, strlen(want)) &&
		    (!model || memmem(buf, len < 8192 ? len : 8192, model, strlen(model)))) {
			ck_assert_msg(found < 0, "two %s caches", kind);
			found = (int)i;
		}
	}
	return found;
}

static ino_t inode_of(const char *path)
{
	struct stat sb;

	ck_assert_int_eq(stat(path, &sb), 0);
	return sb.st_ino;
}

static void damage(const char *path)
{
	FILE *f = fopen(path, "r+b");
	long mid;
	int c;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	mid = ftell(f) / 2;
	fseek(f, mid, SEEK_SET);
	c = fgetc(f);
	ck_assert_int_ne(c, EOF);
	fseek(f, mid, SEEK_SET);   /* between a read and a write */
	fputc(0x5a ^ c, f);
	ck_assert_int_eq(fclose(f), 0);
}

/* A model built on a store leaves two caches beside it: the rows it read
 * and the finished table.  The next model of the same configuration reads
 * the table cache (neither file is rewritten) and predicts exactly (bit for
 * bit) what the first, built from SQLite, did; without the table cache it
 * builds the table from the rows cache; a damaged or truncated cache is
 * ignored and rewritten; a changed store gets new caches. */
START_TEST(load_cache_is_bit_for_bit_and_follows_the_store)
{
	struct cost_result a[24], b[24];
	char paths[8][600];
	struct cost_model *cm;
	struct ss_error err = { 0 };
	struct cal_store *st;
	struct cal_meas m;
	ino_t ino_rows, ino_table;
	int rows, table;

	ck_assert_uint_eq(cache_files(paths, 8), 0);
	cm = make("table");
	predict_many(cm, a, 24);
	cost_model_free(cm);
	ck_assert_uint_eq(cache_files(paths, 8), 2);
	rows = cache_of(paths, 2, "rows", NULL);
	table = cache_of(paths, 2, "table", NULL);
	ck_assert_int_ge(rows, 0);
	ck_assert_int_ge(table, 0);
	/* computed tables are keyed on the build as well, rows read are not */
	ck_assert_int_eq(cache_of(paths, 2, "build", NULL), table);
	ino_rows = inode_of(paths[rows]);
	ino_table = inode_of(paths[table]);

	cm = make("table");   /* from the table cache */
	predict_many(cm, b, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
	ck_assert(inode_of(paths[rows]) == ino_rows);
	ck_assert(inode_of(paths[table]) == ino_table);

	/* no table cache: built from the rows cache (not rewritten) */
	ck_assert_int_eq(unlink(paths[table]), 0);
	cm = make("table");
	predict_many(cm, b, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
	ck_assert(inode_of(paths[rows]) == ino_rows);
	ino_table = inode_of(paths[table]);

	/* flip a byte in the middle of each: the checksum fails, the file is
	 * rebuilt (from SQLite for the rows) and rewritten (the rows are read
	 * only without a table cache) */
	for (int k = 0; k < 2; k++) {
		int i = k ? rows : table;
		ino_t before = inode_of(paths[i]);

		damage(paths[i]);
		if (k)
			ck_assert_int_eq(unlink(paths[table]), 0);
		cm = make("table");
		predict_many(cm, b, 24);
		cost_model_free(cm);
		ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
		ck_assert(inode_of(paths[i]) != before);
	}
	/* and truncated ones */
	ck_assert_int_eq(truncate(paths[table], 100), 0);
	ck_assert_int_eq(truncate(paths[rows], 100), 0);
	ino_rows = inode_of(paths[rows]);
	cm = make("table");
	predict_many(cm, b, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
	ck_assert_uint_eq(cache_files(paths, 8), 2);
	ck_assert(inode_of(paths[rows]) != ino_rows);
	cm = make("table");   /* from the rewritten cache */
	predict_many(cm, b, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);

	/* a new measurement: the store changed, so new keys and new files */
	ck_assert_msg(cal_store_open(&st, store_path, CAL_OPEN_WRITE, &err) == 0, "%s", err.msg);
	cal_meas_init(&m, CAL_GEMM);
	snprintf(m.device, sizeof(m.device), "%s", DEV);
	snprintf(m.dtype, sizeof(m.dtype), "bf16");
	m.m = 3;
	m.n = 4096;
	m.k = 4096;
	m.mean_ms = 5.0;
	m.count = 1;
	snprintf(m.source, sizeof(m.source), "test");
	ck_assert_msg(cal_store_insert(st, &m, &err) == 0, "%s", err.msg);
	cal_store_close(st);
	cm = make("table");
	cost_model_free(cm);
	ck_assert_uint_eq(cache_files(paths, 8), 4);
}
END_TEST

/* The table cache is per configuration: another model (or option) on the
 * same store gets its own file and its own tables, each read back bit for
 * bit; a cache file holding another configuration's tables (copied over
 * this one's) is ignored and rewritten. */
START_TEST(table_cache_follows_the_configuration)
{
	static const char *other = "llama-3.1-8b";   /* head_dim 128: attention by roofline */
	struct cost_result a[24], b[24], c[24];
	char paths[8][600], more[8][600], bytes[1 << 16];
	struct cost_model *cm;
	size_t n, len;
	int ta, tb;
	FILE *f;

	cm = make("table");
	predict_many(cm, a, 24);
	cost_model_free(cm);
	cm = make_on("table", other, DEV, store_path);
	predict_many(cm, b, 24);
	cost_model_free(cm);
	ck_assert_int_ne(memcmp(a, b, sizeof(a)), 0);
	/* rows per head size, tables per model: 2 + 2 */
	n = cache_files(paths, 8);
	ck_assert_uint_eq(n, 4);
	ta = cache_of(paths, n, "table", "layers 16 ");
	tb = cache_of(paths, n, "table", "layers 32 ");
	ck_assert_int_ge(ta, 0);
	ck_assert_int_ge(tb, 0);

	cm = make_on("table", other, DEV, store_path);   /* from its cache */
	predict_many(cm, c, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(b, c, sizeof(b)), 0);
	cm = make("table");
	predict_many(cm, c, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(a, c, sizeof(a)), 0);

	/* an option the tables depend on: its own file */
	cm = make("table:custom_allreduce_max_mb=1");
	cost_model_free(cm);
	ck_assert_uint_eq(cache_files(more, 8), 5);   /* (paths keeps its order) */

	/* model b's tables in model a's file */
	f = fopen(paths[tb], "rb");
	ck_assert_ptr_nonnull(f);
	len = fread(bytes, 1, sizeof(bytes), f);
	fclose(f);
	ck_assert_uint_lt(len, sizeof(bytes));
	f = fopen(paths[ta], "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
	fclose(f);
	cm = make("table");
	predict_many(cm, c, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(a, c, sizeof(a)), 0);
	cm = make("table");   /* from the rewritten file */
	predict_many(cm, c, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(a, c, sizeof(a)), 0);
}
END_TEST

/* A table cache whose checksum holds but whose contents were altered
 * (bytes changed among the sizes, indices and flags at its start or
 * anywhere, or cut short) never crashes or fails a run: it is refused and
 * rebuilt, or read as numbers that the step prices (or reports as out of
 * range).  Seeded, so the same 150 variants every time; run it under
 * valgrind or ASan to see reads out of bounds. */
START_TEST(table_cache_survives_altered_contents)
{
	static unsigned char file[1 << 20], alt[1 << 20];
	char paths[8][600];
	struct cal_cache c;
	struct cost_model *cm;
	uint64_t klen;
	uint32_t seed = 12345;
	size_t n, len, off, plen;
	int table, accepted = 0, refused = 0;
	ino_t written;
	FILE *f;

	cm = make("table");
	cost_model_free(cm);
	n = cache_files(paths, 8);
	table = cache_of(paths, n, "table", NULL);
	ck_assert_int_ge(table, 0);
	f = fopen(paths[table], "rb");
	ck_assert_ptr_nonnull(f);
	len = fread(file, 1, sizeof(file), f);
	fclose(f);
	ck_assert_uint_lt(len, sizeof(file));
	memcpy(&klen, file + 8, 8);
	ck_assert_uint_lt(klen, sizeof(c.key));
	memset(&c, 0, sizeof(c));
	memcpy(c.key, file + 16, klen);
	c.klen = klen;
	snprintf(c.path, sizeof(c.path), "%s", paths[table]);
	off = 16 + klen;
	plen = len - off - 8;   /* the payload, between the key and the checksum */

	for (int i = 0; i < 150; i++) {
		size_t m = plen;

		memcpy(alt, file + off, plen);
		seed = seed * 1103515245u + 12345u;
		if (i % 3 == 0) {
			m = (seed >> 8) % plen;
		} else {
			for (int k = 0; k < 1 + i % 4; k++) {
				size_t span = i % 3 == 1 ? (plen < 8192 ? plen : 8192) : plen;

				seed = seed * 1103515245u + 12345u;
				alt[(seed >> 8) % span] ^= (unsigned char)(1u + (seed >> 24) % 255u);
			}
		}
		cal_cache_write(&c, alt, m);
		written = inode_of(c.path);
		cm = make("table");
		if (inode_of(c.path) == written)
			accepted++;
		else
			refused++;
		for (int k = 0; k < 24; k++) {
			struct cost_item it[2] = {
				{ .tokens = 1 + 97 * k, .context = 13 * k },
				{ .tokens = 1, .context = 100 + 311 * k },
			};
			struct cost_step st = { .items = it, .n_items = 2,
						.total_tokens = it[0].tokens + 1,
						.n_prefill = it[0].tokens > 1, .n_emit = 2 };
			struct cost_result r;

			cost_model_step(cm, &st, &r);
		}
		cost_model_free(cm);
	}
	/* both ways exercised: altered numbers read, altered sizes refused */
	ck_assert_msg(accepted > 10 && refused > 50, "accepted %d, refused %d", accepted, refused);
}
END_TEST

/* The fit model keeps its fits in a cache of its own beside the store and
 * predicts from it exactly what it predicted when it fitted them; a
 * damaged file is ignored and rewritten. */
START_TEST(fit_cache_is_bit_for_bit)
{
	struct cost_result a[24], b[24];
	char paths[8][600];
	struct cost_model *cm;
	ino_t ino;
	size_t n;
	int fit;

	cm = make("fit");
	predict_many(cm, a, 24);
	cost_model_free(cm);
	n = cache_files(paths, 8);
	ck_assert_uint_eq(n, 2);   /* the rows and the fits */
	fit = cache_of(paths, n, "fit", NULL);
	ck_assert_int_ge(fit, 0);
	ino = inode_of(paths[fit]);

	cm = make("fit");   /* from the cache, not rewritten */
	predict_many(cm, b, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
	ck_assert(inode_of(paths[fit]) == ino);

	damage(paths[fit]);
	cm = make("fit");
	predict_many(cm, b, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
	ck_assert(inode_of(paths[fit]) != ino);
	cm = make("fit");
	predict_many(cm, b, 24);
	cost_model_free(cm);
	ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
}
END_TEST

/* ---- the adapter (LoRA) kernels ---------------------------------------------
 *
 * A store's lora rows (what `calibrate run` times) are fitted as
 * t = call + adapter x S + adapter MB / bandwidth + activation MB /
 * bandwidth + GFLOP / rate, and the adapter
 * component prices a step's adapter GEMMs from that fit.  The synthetic
 * rows follow such a law exactly (coefficients below, ms), so the fit must
 * give it back; the price must follow the rows (doubling them doubles it)
 * and fall back to the roofline's priors where there are none or they give
 * no fit. */
static const double lora_law[CAL_LORA_TERMS] = { 0.004, 0.0015, 0.0025, 0.0004, 0.02 };

static double lora_row_ms(double din, double dout, double t, double r, double na, double scale)
{
	double fl, ba, bx;

	cal_lora_work(2.0, din, dout, t, t * r, na * r, &fl, &ba, &bx);
	return scale * (lora_law[0] + lora_law[1] * na + lora_law[2] * ba * 1e-6 +
			lora_law[3] * bx * 1e-6 + lora_law[4] * fl * 1e-9);
}

/* n_rows 0: the whole grid; else only the first n_rows points */
static void build_lora_store(const char *path, double scale, int n_rows)
{
	static const double mods[2][2] = { { 2048, 3072 }, { 2048, 2048 } };
	static const double ranks[] = { 8, 16, 64 }, tokens[] = { 1, 4, 16, 64, 256 },
			    adapters[] = { 1, 4, 16 };
	struct ss_error err = { 0 };
	struct cal_store *s;
	struct cal_meas m;
	int n = 0;

	unlink(path);
	ck_assert_msg(cal_store_open(&s, path, CAL_OPEN_CREATE, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	insert_gemm_grid(s, "bf16", 1.0, 1);
	for (int g = 0; g < 2; g++)
		for (int ri = 0; ri < 3; ri++)
			for (int ti = 0; ti < 5; ti++)
				for (int ai = 0; ai < 3; ai++) {
					if (adapters[ai] > tokens[ti] || (n_rows && n >= n_rows))
						continue;
					cal_meas_init(&m, CAL_LORA);
					snprintf(m.dtype, sizeof(m.dtype), "bf16");
					snprintf(m.variant, sizeof(m.variant), "servesim-cuda:" MODEL);
					m.k = (int64_t)mods[g][0];
					m.n = (int64_t)mods[g][1];
					m.m = (int64_t)tokens[ti];
					m.batch = (int64_t)adapters[ai];
					m.width = (int64_t)ranks[ri];
					insert(s, &m, lora_row_ms(mods[g][0], mods[g][1], tokens[ti],
								  ranks[ri], adapters[ai], scale));
					n++;
				}
	ck_assert_int_eq(cal_store_commit(s, &err), 0);
	cal_store_close(s);
}

/* A step of three requests (adapters 0, 1 and 0 of rank 16: two distinct,
 * 64 + 1 + 1 tokens) on MODEL, its adapter GEMMs priced from cm's
 * measurements (or the priors when it has none): ns. */
static int64_t lora_step_gemm_ns(struct cost_model *cm, bool *measured)
{
	const struct model_spec *mod = catalog_model(&cat, MODEL);
	struct lora_config c;
	struct lora *l = NULL;
	struct lora_inst *li = NULL;
	struct lora_stats st = { 0 };
	struct cost_lora_kernel k;
	struct ss_error err = { 0 };
	const int32_t ad[3] = { 0, 1, 0 }, tok[3] = { 64, 1, 1 };
	int64_t load, gemm;

	ck_assert_msg(lora_config_parse(&c, "adapters=4,rank=16,max_loras=4", &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(lora_new(&l, &c, mod, 1, -1, &err), 0);
	ck_assert_int_eq(lora_inst_new(&li, l, catalog_gpu(&cat, DEV), 1, &st), 0);
	*measured = cost_model_lora_kernel(cm, &k) == 0;
	if (*measured)
		lora_inst_set_kernel(li, &k);
	ck_assert(lora_inst_measured(li) == *measured);
	ck_assert_msg(lora_step(li, ad, tok, 3, &load, &gemm, &err) == 0, "%s", err.msg);
	lora_inst_free(li);
	lora_free(l);
	return gemm;
}

START_TEST(lora_kernels_from_the_store)
{
	const struct model_spec *mod = catalog_model(&cat, MODEL);
	char p1[600], p2[600], p3[600];
	struct cost_lora_kernel k;
	struct cost_model *cm;
	int64_t g1, g2, g0;
	double want = 0.0, hd = mod->head_dim, d = mod->hidden;
	bool measured;

	snprintf(p1, sizeof(p1), "%s/lora.db", dir);
	snprintf(p2, sizeof(p2), "%s/lora-x2.db", dir);
	snprintf(p3, sizeof(p3), "%s/lora-one-row.db", dir);
	build_lora_store(p1, 1.0, 0);
	build_lora_store(p2, 2.0, 0);
	build_lora_store(p3, 1.0, 1);

	/* the fit gives the law back, in seconds */
	cm = make_on("table", MODEL, DEV, p1);
	ck_assert_int_eq(cost_model_lora_kernel(cm, &k), 0);
	ck_assert_double_eq_tol(k.call_s, lora_law[0] * 1e-3, 1e-6 * lora_law[0] * 1e-3);
	ck_assert_double_eq_tol(k.seg_s, lora_law[1] * 1e-3, 1e-6 * lora_law[1] * 1e-3);
	ck_assert_double_eq_tol(k.s_per_adapter_byte, lora_law[2] * 1e-9, 1e-6 * lora_law[2] * 1e-9);
	ck_assert_double_eq_tol(k.s_per_act_byte, lora_law[3] * 1e-9, 1e-6 * lora_law[3] * 1e-9);
	ck_assert_double_eq_tol(k.s_per_flop, lora_law[4] * 1e-12, 1e-6 * lora_law[4] * 1e-12);
	/* the step: per layer two calls (q, k, v packed into one, as vLLM
	 * does, and o), each a call's and two adapters' terms, and the bytes
	 * and FLOPs of the four modules (q: d -> heads hd, k and v: d -> kv
	 * hd, o: heads hd -> d) over 66 rows of rank 16, 2 adapters, model
	 * dtype 2 bytes */
	{
		const double mods[4][2] = {
			{ d, mod->n_heads * hd }, { d, mod->n_kv_heads * hd },
			{ d, mod->n_kv_heads * hd }, { mod->n_heads * hd, d } };

		want = 2.0 * (lora_law[0] + 2.0 * lora_law[1]);
		for (int g = 0; g < 4; g++)
			want += lora_row_ms(mods[g][0], mods[g][1], 66, 16, 2, 1.0) -
				(lora_law[0] + 2.0 * lora_law[1]);
		want *= 1e6 * mod->n_layers;
	}
	g1 = lora_step_gemm_ns(cm, &measured);
	ck_assert(measured);
	ck_assert_double_eq_tol((double)g1, want, 1e-6 * want + 1);
	cost_model_free(cm);
	/* rows twice as slow: a price twice as high */
	cm = make_on("table", MODEL, DEV, p2);
	g2 = lora_step_gemm_ns(cm, &measured);
	ck_assert(measured);
	ck_assert_double_eq_tol((double)g2, 2.0 * (double)g1, 1e-6 * (double)g1 + 2);
	cost_model_free(cm);
	/* the fit model reads the same rows */
	cm = make_on("fit", MODEL, DEV, p1);
	ck_assert_int_eq(lora_step_gemm_ns(cm, &measured), g1);
	cost_model_free(cm);
	/* no lora rows, or one row (no fit): the roofline's priors, as
	 * without a store; the rest of the table is unaffected */
	cm = make("roofline");
	g0 = lora_step_gemm_ns(cm, &measured);
	ck_assert(!measured);
	cost_model_free(cm);
	cm = make_on("table", MODEL, DEV, store_path);
	ck_assert_int_eq(cost_model_lora_kernel(cm, &k), -ENOENT);
	ck_assert_int_eq(lora_step_gemm_ns(cm, &measured), g0);
	cost_model_free(cm);
	cm = make_on("table", MODEL, DEV, p3);
	ck_assert_int_eq(cost_model_lora_kernel(cm, &k), -ENOENT);
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_GEMM), "table");
	ck_assert_int_eq(lora_step_gemm_ns(cm, &measured), g0);
	cost_model_free(cm);
	/* and from the table cache the same (the second open reads it) */
	cm = make_on("table", MODEL, DEV, p1);
	ck_assert_int_eq(lora_step_gemm_ns(cm, &measured), g1);
	cost_model_free(cm);

	{
		char paths[16][600];
		size_t n = cache_files(paths, 16);

		for (size_t i = 0; i < n && i < 16; i++)
			unlink(paths[i]);
	}
	unlink(p1);
	unlink(p2);
	unlink(p3);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("table");
	TCase *tc = tcase_create("grid");

	tcase_add_test(tc, grid_holes_and_outside);
	suite_add_tcase(s, tc);
	tc = tcase_create("table");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, interp_reproduces_measurements);
	tcase_add_test(tc, ptab_tracks_interpolator);
	tcase_add_test(tc, exact_at_measured_points);
	tcase_add_test(tc, gemm_from_the_nearest_line);
	tcase_add_test(tc, fp8_gemms_from_the_fp8_grid);
	tcase_add_test(tc, fp8_block_grid_when_no_fp8_grid);
	tcase_add_test(tc, prefill_prior_context);
	tcase_add_test(tc, monotone_between_points);
	tcase_add_test(tc, decode_mixed_lengths);
	tcase_add_test(tc, out_of_grid_counted);
	tcase_add_test(tc, memo_is_bit_for_bit);
	tcase_add_test(tc, memo_random_steps);
	tcase_add_test(tc, memo_random_steps_shipped);
	tcase_add_test(tc, decode_pass_matches_general);
	tcase_add_test(tc, backend_names_and_fallback);
	tcase_add_test(tc, selection_helper);
	tcase_add_test(tc, errors);
	tcase_add_test(tc, measured_power_prices_energy);
	tcase_add_test(tc, load_cache_is_bit_for_bit_and_follows_the_store);
	tcase_add_test(tc, table_cache_follows_the_configuration);
	tcase_add_test(tc, fit_cache_is_bit_for_bit);
	tcase_add_test(tc, table_cache_survives_altered_contents);
	tcase_add_test(tc, lora_kernels_from_the_store);
	suite_add_tcase(s, tc);
	return s;
}
