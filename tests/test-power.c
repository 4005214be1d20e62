/* The power model's regimes (docs/energy.md): decode power rises with the
 * batch and saturates below TDP, prefill runs near TDP, host time draws the
 * host-gap power, the fitted constants are physical, durations do not
 * depend on power.  `test-power real` refits on ../shared/data and checks
 * the hold-out error bands (skipped, 77, without the data). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "catalog.h"
#include "config.h"
#include "costmodel.h"
#include "power-fit.h"

static struct catalog cat;

static void setup(void)
{
	struct ss_error err = { 0 };
	const char *d = getenv("SERVESIM_DATA");
	int rc;

	gsl_set_error_handler_off();
	catalog_init(&cat);
	rc = catalog_load_dir(&cat, d && *d ? d : SERVESIM_SRC_DATADIR, &err);
	ck_assert_msg(rc == 0, "%s:%ld: %s", err.file, err.line, err.msg);
}

static void teardown(void)
{
	catalog_release(&cat);
}

/* One step of n requests, each `tokens` tokens at `context`, on the
 * roofline for (model, g, tp): its result. */
static struct cost_result step_on(const char *spec, const char *model, const struct gpu_spec *g,
				  int tp, int n, int tokens, int context)
{
	struct cost_config cfg = { .model = catalog_model(&cat, model), .gpu = g, .tp = tp };
	struct cost_item *it = calloc((size_t)n, sizeof(*it));
	struct cost_step s = { .items = it, .n_items = (uint32_t)n, .n_emit = (uint32_t)n };
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;
	struct cost_result r;

	ck_assert_ptr_nonnull(it);
	ck_assert_ptr_nonnull(cfg.model);
	for (int i = 0; i < n; i++)
		it[i] = (struct cost_item){ .tokens = tokens, .context = context };
	s.total_tokens = (int64_t)n * tokens;
	s.n_prefill = tokens > 1 ? (uint32_t)n : 0;
	ck_assert_msg(cost_model_new(&cm, spec, &cfg, &err) == 0, "%s", err.msg);
	ck_assert_msg(cost_model_predict(cm, &s, &r, &err) == 0, "%s", err.msg);
	cost_model_free(cm);
	free(it);
	return r;
}

/* Mean power per GPU of a step, W. */
static double watts(const struct cost_result *r, int tp)
{
	return r->energy_j / ((double)r->duration_ns * 1e-9) / tp;
}

START_TEST(decode_power_rises_with_batch_and_saturates_below_tdp)
{
	static const char *const gpus[] = { "h100-sxm", "a100-40gb-sxm", "a100-80gb-sxm" };
	static const int batch[] = { 1, 4, 16, 64, 256, 1024 };

	for (size_t gi = 0; gi < sizeof(gpus) / sizeof(gpus[0]); gi++) {
		const struct gpu_spec *g = catalog_gpu(&cat, gpus[gi]);
		double prev = 0.0, w1 = 0.0, w = 0.0;

		ck_assert_ptr_nonnull(g);
		for (size_t b = 0; b < sizeof(batch) / sizeof(batch[0]); b++) {
			struct cost_result r = step_on("roofline", "llama-3.1-8b", g, 1, batch[b], 1, 1024);
			double host_s = (double)r.op_ns[COST_OP_HOST] * 1e-9;

			/* the kernels' power: the step without its host
			 * operator (per-request host time at host-gap power
			 * grows with the batch and, past ~64 requests on the
			 * H100, outweighs the memory-bound curve's last rise) */
			w = (r.energy_j - host_s * cost_host_gap_power_w(g)) /
			    ((double)r.duration_ns * 1e-9 - host_s);
			if (b == 0)
				w1 = w;
			ck_assert_msg(w > prev, "%s: decode at batch %d draws %g W, not more than "
				      "%g W at the batch before", gpus[gi], batch[b], w, prev);
			ck_assert_msg(w < g->tdp_w, "%s: decode at batch %d draws %g W >= TDP",
				      gpus[gi], batch[b], w);
			prev = w;
		}
		/* the rise is real (batch 1 to 1024: more than 20% of the
		 * dynamic range) and the last step (256 -> 1024) is small
		 * beside the first ones: it saturates */
		ck_assert_msg(w - w1 > 0.2 * (g->tdp_w - g->idle_w), "%s: %g -> %g W", gpus[gi], w1, w);
		/* memory-bound share itself: increasing, bounded by hi */
		ck_assert(cost_mem_power_frac(g, 1) < cost_mem_power_frac(g, 64));
		ck_assert(cost_mem_power_frac(g, 64) < cost_mem_power_frac(g, 1e6));
		ck_assert(cost_mem_power_frac(g, 1e6) <= g->mem_power_hi + 1e-12);
		ck_assert_double_eq_tol(cost_mem_power_frac(g, 1), g->mem_power_lo, 1e-12);
		ck_assert_double_eq_tol(cost_mem_power_frac(g, 1 + g->mem_power_batch),
					0.5 * (g->mem_power_lo + g->mem_power_hi), 1e-12);
	}
}
END_TEST

START_TEST(prefill_runs_near_tdp)
{
	static const char *const gpus[] = { "h100-sxm", "a100-40gb-sxm" };

	for (size_t gi = 0; gi < 2; gi++) {
		const struct gpu_spec *g = catalog_gpu(&cat, gpus[gi]);
		struct cost_result r = step_on("roofline", "llama-3.1-8b", g, 1, 1, 4096, 0);
		double w = watts(&r, 1);

		/* compute-bound kernels draw TDP; the step's host time and
		 * kernel overheads pull the mean a little below it */
		ck_assert_msg(w >= 0.9 * g->tdp_w && w <= g->tdp_w, "%s: 4096-token prefill %g W",
			      gpus[gi], w);
	}
}
END_TEST

START_TEST(host_time_draws_host_gap_power)
{
	const struct gpu_spec *h = catalog_gpu(&cat, "h100-sxm");
	struct gpu_spec g = *h, g2 = *h;
	struct cost_result r1, r2;

	/* the API the engine uses: the catalog's figure, within idle..TDP */
	ck_assert_double_eq(cost_host_gap_power_w(h), h->host_gap_w);
	ck_assert(h->host_gap_w > h->idle_w && h->host_gap_w < h->tdp_w);
	/* absent: idle power */
	g.host_gap_w = 0;
	ck_assert_double_eq(cost_host_gap_power_w(&g), g.idle_w);
	/* an engine's span of host time: tp x host-gap power x time */
	ck_assert_double_eq_tol(cost_host_gap_energy_j(h, 4, 2500000000), 4 * h->host_gap_w * 2.5,
				1e-9);
	/* a step's host operator is charged at it: two GPUs differing only
	 * in host_gap_w differ by exactly (difference x tp x host time) */
	g.host_gap_w = h->idle_w + 10;
	g2.host_gap_w = h->idle_w + 110;
	r1 = step_on("roofline", "llama-3.1-70b", &g, 4, 32, 1, 512);
	r2 = step_on("roofline", "llama-3.1-70b", &g2, 4, 32, 1, 512);
	ck_assert_int_eq(r1.duration_ns, r2.duration_ns);
	ck_assert_int_gt(r1.op_ns[COST_OP_HOST], 0);
	ck_assert_double_eq_tol(r2.energy_j - r1.energy_j,
				100.0 * 4 * (double)r1.op_ns[COST_OP_HOST] * 1e-9, 1e-9);
}
END_TEST

START_TEST(durations_do_not_depend_on_power)
{
	const struct gpu_spec *h = catalog_gpu(&cat, "h100-sxm");
	struct gpu_spec bare = *h;
	static const int shapes[][3] = { { 1, 1, 100 }, { 64, 1, 2000 }, { 4, 512, 0 },
					 { 300, 1, 700 } };

	bare.host_gap_w = bare.mem_power_lo = bare.mem_power_hi = bare.mem_power_batch = 0;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		for (int tp = 1; tp <= 2; tp++) {
			struct cost_result a = step_on("roofline", "llama-3.1-8b", h, tp, shapes[i][0],
						       shapes[i][1], shapes[i][2]);
			struct cost_result b = step_on("roofline", "llama-3.1-8b", &bare, tp,
						       shapes[i][0], shapes[i][1], shapes[i][2]);

			ck_assert_int_eq(a.duration_ns, b.duration_ns);
			ck_assert_int_eq(a.compute_ns, b.compute_ns);
			for (int op = 0; op < COST_OP_COUNT; op++)
				ck_assert_int_eq(a.op_ns[op], b.op_ns[op]);
			ck_assert(a.energy_j != b.energy_j);
		}
}
END_TEST

START_TEST(constant_share_without_a_curve_or_when_forced)
{
	const struct gpu_spec *h = catalog_gpu(&cat, "h100-sxm");
	struct gpu_spec bare = *h;
	struct cost_result a, b;

	bare.mem_power_lo = bare.mem_power_hi = bare.mem_power_batch = 0;
	/* the model before the fit: 0.5 at every batch */
	ck_assert_double_eq(cost_mem_power_frac(&bare, 1), 0.5);
	ck_assert_double_eq(cost_mem_power_frac(&bare, 500), 0.5);
	/* mem_power_frac=X forces a constant share over the catalog's curve */
	a = step_on("roofline:mem_power_frac=0.5", "llama-3.1-8b", h, 1, 64, 1, 1000);
	b = step_on("roofline", "llama-3.1-8b", &bare, 1, 64, 1, 1000);
	bare.host_gap_w = 0;
	ck_assert_double_eq_tol(a.energy_j - (h->host_gap_w - h->idle_w) *
				(double)a.op_ns[COST_OP_HOST] * 1e-9,
				b.energy_j - (h->host_gap_w - h->idle_w) *
				(double)b.op_ns[COST_OP_HOST] * 1e-9, 1e-9);
}
END_TEST

START_TEST(shipped_constants_are_physical)
{
	for (size_t i = 0; i < cat.n_gpus; i++) {
		const struct gpu_spec *g = &cat.gpus[i];

		/* every shipped GPU carries the power model */
		ck_assert_msg(g->mem_power_hi > 0 && g->host_gap_w > 0, "%s", g->name);
		ck_assert(g->mem_power_lo > 0 && g->mem_power_lo <= g->mem_power_hi &&
			  g->mem_power_hi <= 1.0);
		/* half-way between 1 and 1,000 requests: the range batches take */
		ck_assert(g->mem_power_batch >= 1 && g->mem_power_batch <= 1000);
		ck_assert(g->host_gap_w >= g->idle_w && g->host_gap_w <= g->tdp_w);
		/* a GPU waiting on its host with clocks up draws well under
		 * half its dynamic range */
		ck_assert(g->host_gap_w <= g->idle_w + 0.5 * (g->tdp_w - g->idle_w));
	}
}
END_TEST

/* Memory-bound power is energy per byte times the bytes streamed: the fit
 * is in J/B and a GPU's catalog fractions follow its datasheet bandwidth,
 * clamped at TDP (docs/energy.md). */
START_TEST(memory_bound_power_follows_hbm_bandwidth)
{
	const struct gpu_spec *a40 = catalog_gpu(&cat, "a100-40gb-sxm");
	const struct gpu_spec *a80 = catalog_gpu(&cat, "a100-80gb-sxm");
	struct power_params p = power_params_start;
	struct gpu_spec g40 = *a40, g80 = *a80;
	struct cost_result r40, r80;

	ck_assert_ptr_nonnull(a40);
	ck_assert_ptr_nonnull(a80);
	ck_assert(p.per_byte);
	power_params_apply(&p, &g40);
	power_params_apply(&p, &g80);
	/* the same chip and board limit: the 80 GB part's HBM2e streams
	 * 2,039 GB/s against 1,555, and draws that much more */
	ck_assert_double_eq_tol(g40.mem_power_lo, p.mem_lo * a40->hbm_bw /
				(a40->tdp_w - a40->idle_w), 1e-12);
	ck_assert_double_eq_tol(g80.mem_power_lo / g40.mem_power_lo, a80->hbm_bw / a40->hbm_bw,
				1e-9);
	/* no memory-bound kernel draws above the board limit */
	p.mem_hi = POWER_MAX_J_PER_BYTE;
	power_params_apply(&p, &g80);
	ck_assert_double_eq(g80.mem_power_hi, 1.0);
	/* fractions (the model before the fit) are taken as they are */
	p = (struct power_params){ .mem_lo = 0.5, .mem_hi = 0.5, .mem_batch = 1 };
	power_params_apply(&p, &g80);
	ck_assert_double_eq(g80.mem_power_lo, 0.5);
	/* the shipped catalog carries it: batch-1 decode of one model at the
	 * same context draws more on the A100-80GB than on the 40 GB part */
	ck_assert(a80->mem_power_lo > a40->mem_power_lo);
	r40 = step_on("roofline", "llama-3.1-8b", a40, 1, 1, 1, 1024);
	r80 = step_on("roofline", "llama-3.1-8b", a80, 1, 1, 1, 1024);
	ck_assert_msg(watts(&r80, 1) > watts(&r40, 1) + 20, "%g vs %g W", watts(&r80, 1),
		      watts(&r40, 1));
}
END_TEST

START_TEST(power_cap_stays_consistent)
{
	/* the DVFS path takes the new energies: a cap below a step's power
	 * lowers it to the cap and stretches only compute-bound time */
	const struct gpu_spec *h = catalog_gpu(&cat, "h100-sxm");
	struct cost_config cfg = { .model = catalog_model(&cat, "llama-3.1-8b"), .gpu = h, .tp = 1,
				   .power_cap_w = 400 };
	struct cost_item it[256];
	struct cost_step s = { .items = it, .n_items = 256, .n_emit = 256, .total_tokens = 256 };
	struct cost_result free_r, cap_r;
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	for (int i = 0; i < 256; i++)
		it[i] = (struct cost_item){ .tokens = 1, .context = 1000 };
	free_r = step_on("roofline", "llama-3.1-8b", h, 1, 256, 1, 1000);
	ck_assert(watts(&free_r, 1) > 400);
	ck_assert(cost_model_new(&cm, "roofline", &cfg, &err) == 0);
	ck_assert(cost_model_predict(cm, &s, &cap_r, &err) == 0);
	cost_model_free(cm);
	ck_assert(watts(&cap_r, 1) <= 400 + 1e-6);
	ck_assert(cap_r.duration_ns >= free_r.duration_ns);
}
END_TEST

/* ---- malformed measurement files ---------------------------------------- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(malformed_measurements_name_file_and_line)
{
	char dir[] = "/tmp/ss-power-XXXXXX", p[512];
	struct power_obs *obs = NULL;
	struct ss_error err = { 0 };
	size_t n;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	/* a missing file: -ENOENT (the tests and bench skip on it) */
	ck_assert_int_eq(power_obs_load(dir, &cat, &obs, &n, &err), -ENOENT);
	snprintf(p, sizeof(p), "%s/profiles", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/profiles/mlenergy_v2", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/profiles/mlenergy_v2/mlenergy_v2_llm_flat.csv", dir);
	write_file(p, "task,gpu,model,max_num_seqs,tp,pp,energy_per_request_J,avg_tpot_s,"
		   "token_throughput_tok_per_s,avg_output_tokens,avg_batch_size_reqs\n"
		   "chat,H100 80GB HBM3,meta-llama/Meta-Llama-3.1-8B-Instruct,64,1,1,100,0.03,"
		   "1800,300,64\n"
		   "chat,H100 80GB HBM3,meta-llama/Meta-Llama-3.1-8B-Instruct,64,1,1,abc,0.03,"
		   "1800,300,64\n");
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(power_obs_load(dir, &cat, &obs, &n, &err), -EINVAL);
	ck_assert_int_eq(err.line, 3);
	ck_assert_msg(strstr(err.msg, "energy_per_request_J") && strstr(err.file, "mlenergy"),
		      "%s: %s", err.file, err.msg);
	write_file(p, "task,gpu,model\nchat,x,y\n");
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(power_obs_load(dir, &cat, &obs, &n, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "max_num_seqs"), "%s", err.msg);
	unlink(p);
	snprintf(p, sizeof(p), "%s/profiles/mlenergy_v2", dir);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/profiles", dir);
	rmdir(p);
	rmdir(dir);
	ck_assert_ptr_null(obs);
}
END_TEST

/* ---- the shipped data (test-power real) --------------------------------- */

static struct power_obs *robs;
static size_t rn;

static void real_setup(void)
{
	struct ss_error err = { 0 };
	const char *d = getenv("SERVESIM_SHARED_DATA");

	setup();
	ck_assert_msg(power_obs_load(d, &cat, &robs, &rn, &err) == 0, "%s:%ld: %s", err.file,
		      err.line, err.msg);
}

static void real_teardown(void)
{
	free(robs);
	robs = NULL;
	teardown();
}

static void sel(bool *use, enum power_source src, const char *gpu, const char *model,
		const char *skip)
{
	for (size_t i = 0; i < rn; i++)
		use[i] = robs[i].src == src && (!gpu || !strcmp(robs[i].gpu, gpu)) &&
			 (!model || !strcmp(robs[i].model, model)) &&
			 (!skip || strcmp(robs[i].model, skip));
}

/* the shipped procedure (docs/energy.md) without model skip (NULL: all),
 * host gap on gpu */
static struct power_params fit_for(const char *gpu, const char *skip)
{
	bool *curve = calloc(rn, sizeof(bool)), *gap = calloc(rn, sizeof(bool));
	struct ss_error err = { 0 };
	struct power_params p;

	ck_assert(curve && gap);
	sel(curve, POWER_SRC_MLENERGY, NULL, NULL, skip);
	for (size_t i = 0; i < rn; i++)
		curve[i] |= robs[i].src == POWER_SRC_ANL;
	sel(gap, POWER_SRC_MLENERGY, gpu, NULL, skip);
	ck_assert_msg(power_fit_two_stage(robs, rn, curve, gap, &cat, &p, &err) == 0, "%s",
		      err.msg);
	free(curve);
	free(gap);
	return p;
}

static double mape_of(const struct power_params *p, const bool *use)
{
	struct ss_error err = { 0 };
	double mape, bias;
	size_t k;

	ck_assert(power_error(robs, rn, use, &cat, p, &mape, &bias, &k, &err) == 0);
	ck_assert(k > 0);
	return mape;
}

START_TEST(real_sources_load)
{
	size_t k[POWER_SRC_COUNT] = { 0 };

	for (size_t i = 0; i < rn; i++)
		k[robs[i].src]++;
	/* 45 ML.ENERGY chat runs of the three catalog models; 30 Splitwise
	 * configurations (the 8,192-token prompts left out); 24 A100 rows */
	ck_assert_uint_eq(k[POWER_SRC_MLENERGY], 45);
	ck_assert_uint_eq(k[POWER_SRC_SPLITWISE], 30);
	ck_assert_uint_eq(k[POWER_SRC_ANL], 24);
}
END_TEST

START_TEST(real_shipped_constants_are_the_fit)
{
	/* each GPU and the fit (host gap) it takes: the two fitted GPUs, the
	 * A100-80GB through the A100's fit and the H200 through the H100's,
	 * each at its own bandwidth */
	static const char *const gpus[][2] = { { "h100-sxm", "h100-sxm" },
					       { "a100-40gb-sxm", "a100-40gb-sxm" },
					       { "a100-80gb-sxm", "a100-40gb-sxm" },
					       { "h200-sxm", "h100-sxm" } };

	for (int g = 0; g < 4; g++) {
		const struct gpu_spec *gs = catalog_gpu(&cat, gpus[g][0]);
		struct power_params p = fit_for(gpus[g][1], NULL);
		struct gpu_spec f = *gs;

		ck_assert(p.per_byte);
		power_params_apply(&p, &f);
		/* the catalog rounds the fit to 2 decimals, whole requests
		 * and whole watts */
		ck_assert_msg(fabs(gs->mem_power_lo - f.mem_power_lo) <= 0.006, "%s lo %g, fit %g",
			      gs->name, gs->mem_power_lo, f.mem_power_lo);
		ck_assert_msg(fabs(gs->mem_power_hi - f.mem_power_hi) <= 0.006, "%s hi %g, fit %g",
			      gs->name, gs->mem_power_hi, f.mem_power_hi);
		ck_assert_double_eq_tol(gs->mem_power_batch, f.mem_power_batch, 0.6);
		ck_assert_double_eq_tol(gs->host_gap_w, f.host_gap_w, 0.6);
	}
}
END_TEST

/* The target is 10% on ML.ENERGY v2 across its batch sizes.  In
 * sample, the H100 fit is at 4.4% and the A100 at 11.4% (its TP-8
 * Llama-3.1-70B runs read up to 26% high: their host gaps draw about idle
 * power, the TP-1 runs' about 50 W more); the bands leave about 3 points
 * for a changed roofline time before they fail.  Held out (a whole model
 * out of both stages) the errors are 5-17%, with the A100 Llama-3.1-70B at
 * 28% (the same runs); across GPUs 15% and 23%.  Splitwise's A100-80GB,
 * never fitted, is 12% low (24% before memory-bound power followed the
 * HBM bandwidth); its band leaves 4 points.  docs/energy.md has the
 * table. */
START_TEST(real_holdout_error_bands)
{
	static const char *const models[] = { "llama-3.1-8b", "mistral-7b", "llama-3.1-70b" };
	static const char *const gpus[] = { "h100-sxm", "a100-40gb-sxm" };
	bool *use = calloc(rn, sizeof(bool));
	struct power_params p;

	ck_assert_ptr_nonnull(use);
	for (int g = 0; g < 2; g++) {
		p = fit_for(gpus[g], NULL);
		sel(use, POWER_SRC_MLENERGY, gpus[g], NULL, NULL);
		ck_assert_double_le(mape_of(&p, use), g ? 0.14 : 0.08);
		if (g) {
			sel(use, POWER_SRC_ANL, NULL, NULL, NULL);
			ck_assert_double_le(mape_of(&p, use), 0.15);
			sel(use, POWER_SRC_SPLITWISE, NULL, NULL, NULL);
			ck_assert_double_le(mape_of(&p, use), 0.16);
		}
		for (size_t m = 0; m < 3; m++) {
			double e;

			p = fit_for(gpus[g], models[m]);
			sel(use, POWER_SRC_MLENERGY, gpus[g], models[m], NULL);
			e = mape_of(&p, use);
			ck_assert_msg(e <= (g && m == 2 ? 0.33 : 0.20), "%s %s held out: %g", gpus[g],
				      models[m], e);
		}
	}
	free(use);
}
END_TEST

static Suite *unit_suite(void)
{
	Suite *s = suite_create("power");
	TCase *tc = tcase_create("regimes");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, decode_power_rises_with_batch_and_saturates_below_tdp);
	tcase_add_test(tc, prefill_runs_near_tdp);
	tcase_add_test(tc, host_time_draws_host_gap_power);
	tcase_add_test(tc, durations_do_not_depend_on_power);
	tcase_add_test(tc, constant_share_without_a_curve_or_when_forced);
	tcase_add_test(tc, shipped_constants_are_physical);
	tcase_add_test(tc, memory_bound_power_follows_hbm_bandwidth);
	tcase_add_test(tc, power_cap_stays_consistent);
	tcase_add_test(tc, malformed_measurements_name_file_and_line);
	suite_add_tcase(s, tc);
	return s;
}

static Suite *real_suite(void)
{
	Suite *s = suite_create("power-real-data");
	TCase *tc = tcase_create("fit");

	tcase_add_checked_fixture(tc, real_setup, real_teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, real_sources_load);
	tcase_add_test(tc, real_shipped_constants_are_the_fit);
	tcase_add_test(tc, real_holdout_error_bands);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	bool real = argc > 1 && !strcmp(argv[1], "real");
	const char *d = getenv("SERVESIM_SHARED_DATA");
	char p[1024];
	SRunner *sr;
	int failed;

	if (real) {
		snprintf(p, sizeof(p), "%s/profiles/mlenergy_v2/mlenergy_v2_llm_flat.csv",
			 d ? d : "");
		if (!d || !*d || access(p, R_OK)) {
			fprintf(stderr, "no ML.ENERGY v2 data under SERVESIM_SHARED_DATA: skipped\n");
			return 77;
		}
	}
	sr = srunner_create(real ? real_suite() : unit_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
