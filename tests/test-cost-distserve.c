/* The "distserve" cost model (docs/cost-models.md): DistServe's fitted
 * formulas on hand-checked inputs, the small/large decode batch switch, how
 * chunks and mixed steps are priced, energy from the roofline's power, and
 * one-line errors for a missing file, model, TP or field.
 *
 * `test-cost-distserve` runs on a profile file it writes itself (made-up
 * round coefficients, so every expected time is exact); `test-cost-distserve
 * real` checks the shipped DistServe files in SERVESIM_SHARED_DATA and runs
 * the engine with them, and exits 77 (skipped) without them. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "check-tmp.h"
#include "config.h"
#include "costmodel.h"
#include "engine.h"
#include "metrics.h"

#define MS 1000000LL

static struct catalog cat;
static char fits_path[4096];   /* the made-up profile file */
static const char *shared;     /* SERVESIM_SHARED_DATA */

/* opt-13b at tp 1 and 2 with round coefficients (ms); threshold 4. */
static const char *fits_json =
	"{\"facebook/opt-13b\": {\n"
	"  \"1\": {\"decoding_large_small_bs_threshold\": 4,\n"
	"         \"prefill\": [10, 0.1, 0.0001],\n"
	"         \"decoding_smallbs\": [20, 0.001, 0.5],\n"
	"         \"decoding_largebs\": [5, 0.002, 2]},\n"
	"  \"2\": {\"decoding_large_small_bs_threshold\": 95,\n"
	"         \"prefill\": [1, 0, 0], \"decoding_smallbs\": [1, 0, 0],\n"
	"         \"decoding_largebs\": [1, 0, 0]}}}\n";

static void setup(void)
{
	struct ss_error err = { 0 };
	const char *d = getenv("SERVESIM_DATA");
	int rc;

	catalog_init(&cat);
	rc = catalog_load_dir(&cat, d && *d ? d : SERVESIM_SRC_DATADIR, &err);
	ck_assert_msg(rc == 0, "%s:%ld: %s", err.file, err.line, err.msg);
	check_write_tmp(fits_path, sizeof(fits_path), "distserve", fits_json);
}

static void teardown(void)
{
	unlink(fits_path);
	catalog_release(&cat);
}

static int try_make(struct cost_model **cm, const char *spec, const char *model,
		    const char *gpu, int tp, struct ss_error *err)
{
	struct cost_config cfg = {
		.model = catalog_model(&cat, model),
		.gpu = catalog_gpu(&cat, gpu),
		.tp = tp,
		.shared_data = shared,
	};

	ck_assert_ptr_nonnull(cfg.model);
	ck_assert_ptr_nonnull(cfg.gpu);
	return cost_model_new(cm, spec, &cfg, err);
}

static struct cost_model *make(const char *spec, const char *model, const char *gpu, int tp)
{
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	ck_assert_msg(try_make(&cm, spec, model, gpu, tp, &err) == 0, "%s: %s:%ld: %s",
		      spec, err.file, err.line, err.msg);
	return cm;
}

/* "distserve:file=<made-up file>" plus extra ",key=value" text. */
static struct cost_model *made_up(const char *extra, int tp)
{
	char spec[4400];

	snprintf(spec, sizeof(spec), "distserve:file=%s%s", fits_path, extra);
	return make(spec, "opt-13b", "a100-80gb-sxm", tp);
}

/* One step; checks the invariants every cost model keeps. */
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
	cost_model_step(cm, &s, &r);
	ck_assert_int_ge(r.duration_ns, 1);
	for (int op = 0; op < COST_OP_COUNT; op++)
		sum += r.op_ns[op];
	ck_assert_int_eq(sum, r.duration_ns);
	/* the fits have no operator split: all of it is booked to gemm */
	if (!strcmp(cm->ops->name, "distserve"))
		ck_assert_int_eq(r.op_ns[COST_OP_GEMM], r.duration_ns);
	return r;
}

/* ---- formulas on the made-up file (exact) -------------------------------- */

START_TEST(prefill_quadratic_in_lengths)
{
	struct cost_model *cm = made_up("", 1);
	struct cost_item one[] = { { .tokens = 1000, .context = 0 } };
	struct cost_item two[] = { { .tokens = 300 }, { .tokens = 200 } };

	/* 10 + 0.1 x 1000 + 1e-4 x 1000² + 1 (DistServe's pp constant) = 211 ms */
	ck_assert_int_eq(run(cm, one, 1).duration_ns, 211 * MS);
	/* Σlen = 500, Σlen² = 130,000: 10 + 50 + 13 + 1 = 74 ms (not (Σlen)²) */
	ck_assert_int_eq(run(cm, two, 2).duration_ns, 74 * MS);
	cost_model_free(cm);

	cm = made_up(",prefill_extra_ms=0", 1);
	ck_assert_int_eq(run(cm, one, 1).duration_ns, 210 * MS);
	cost_model_free(cm);
}
END_TEST

START_TEST(chunk_len_is_the_chunk_not_the_context)
{
	struct cost_model *cm = made_up("", 1);
	struct cost_item fresh[] = { { .tokens = 500, .context = 0 } };
	struct cost_item later[] = { { .tokens = 500, .context = 3000 } };

	/* DistServe prices a chunk by current_prefill_lens only */
	ck_assert_int_eq(run(cm, fresh, 1).duration_ns, run(cm, later, 1).duration_ns);
	ck_assert_int_eq(run(cm, later, 1).duration_ns, (10 + 50 + 25 + 1) * MS);
	cost_model_free(cm);
}
END_TEST

START_TEST(decode_small_and_large_batch_sets)
{
	struct cost_model *cm = made_up("", 1);
	struct cost_item d[4];

	/* ctx = context + 1: three decodes with 999 + 1999 + 2999 cached tokens
	 * attend to 6000 positions; batch 3 < threshold 4: small set,
	 * 20 + 0.001 x 6000 + 0.5 x 3 = 27.5 ms */
	for (int i = 0; i < 3; i++)
		d[i] = (struct cost_item){ .tokens = 1, .context = 1000 * (i + 1) - 1 };
	ck_assert_int_eq(run(cm, d, 3).duration_ns, 27500000);
	/* batch 4 = threshold: large set, Σctx = 6000 + 1000,
	 * 5 + 0.002 x 7000 + 2 x 4 = 27 ms */
	d[3] = (struct cost_item){ .tokens = 1, .context = 999 };
	ck_assert_int_eq(run(cm, d, 4).duration_ns, 27 * MS);
	cost_model_free(cm);
}
END_TEST

START_TEST(decode_uses_the_sum_of_contexts)
{
	struct cost_model *cm = made_up("", 1);
	struct cost_item even[] = { { .tokens = 1, .context = 1000 }, { .tokens = 1, .context = 1000 } };
	struct cost_item skew[] = { { .tokens = 1, .context = 10 }, { .tokens = 1, .context = 1990 } };
	struct cost_item longer[] = { { .tokens = 1, .context = 10 }, { .tokens = 1, .context = 2990 } };

	ck_assert_int_eq(run(cm, even, 2).duration_ns, run(cm, skew, 2).duration_ns);
	ck_assert_int_gt(run(cm, longer, 2).duration_ns, run(cm, skew, 2).duration_ns);
	cost_model_free(cm);
}
END_TEST

START_TEST(mixed_steps)
{
	struct cost_item mix[] = {
		{ .tokens = 100, .context = 0 },
		{ .tokens = 1, .context = 499 },
		{ .tokens = 1, .context = 1499 },
	};
	struct cost_model *cm = made_up("", 1);

	/* DistServe's chunked-prefill batch: the prefill formula over the
	 * chunks only, decodes ride along: 10 + 10 + 1 + 1 = 22 ms */
	ck_assert_int_eq(run(cm, mix, 3).duration_ns, 22 * MS);
	cost_model_free(cm);
	/* mixed=sum adds the decodes' time: 22 + (20 + 0.001 x 2000 + 0.5 x 2) = 45 ms */
	cm = made_up(",mixed=sum", 1);
	ck_assert_int_eq(run(cm, mix, 3).duration_ns, 45 * MS);
	cost_model_free(cm);
}
END_TEST

START_TEST(tp_selects_its_own_fits)
{
	struct cost_model *cm = made_up("", 2);
	struct cost_item one[] = { { .tokens = 1000 } };
	struct cost_item dec[] = { { .tokens = 1, .context = 100 } };

	ck_assert_int_eq(run(cm, one, 1).duration_ns, 2 * MS);   /* 1 + extra 1 */
	ck_assert_int_eq(run(cm, dec, 1).duration_ns, 1 * MS);
	cost_model_free(cm);
}
END_TEST

/* fit_tp=2 on a tp 1 instance reads the "2" entry: DistServe's
 * simulate_dist.py prices its decode workers with the prefill's TP. */
START_TEST(fit_tp_selects_another_entry)
{
	struct cost_model *cm = made_up(",fit_tp=2", 1);
	struct cost_item one[] = { { .tokens = 1000 } };
	struct cost_item dec[] = { { .tokens = 1, .context = 100 } };

	ck_assert_int_eq(run(cm, one, 1).duration_ns, 2 * MS);
	ck_assert_int_eq(run(cm, dec, 1).duration_ns, 1 * MS);
	cost_model_free(cm);
	/* fit_tp=0 is the instance's own tp: bit-for-bit the default */
	cm = made_up(",fit_tp=0", 1);
	ck_assert_int_eq(run(cm, one, 1).duration_ns, 211 * MS);
	cost_model_free(cm);
}
END_TEST

/* DistServe's simulator adds its Ray driver overhead to every step:
 * 2 ms + 1e-4 ms per context token (prompt for a prefill, prompt + tokens
 * generated before the step for a decode). */
START_TEST(step_extra_per_step_and_per_context_token)
{
	struct cost_model *cm = made_up(",step_extra_ms=2,step_extra_ms_per_token=0.001", 1);
	struct cost_item one[] = { { .tokens = 1000, .context = 0 } };
	struct cost_item dec[] = { { .tokens = 1, .context = 999 }, { .tokens = 1, .context = 1999 } };
	struct cost_item chunk[] = { { .tokens = 500, .context = 500 } };

	/* 211 + 2 + 0.001 x 1000 = 214 ms */
	ck_assert_int_eq(run(cm, one, 1).duration_ns, 214 * MS);
	/* 20 + 0.001 x 3000 + 0.5 x 2 = 24, + 2 + 0.001 x 2998 = 28.998 ms */
	ck_assert_int_eq(run(cm, dec, 2).duration_ns, 28998000);
	/* a later chunk counts the prompt so far, 1000 tokens: 10 + 50 + 25 + 1 + 2 + 1 */
	ck_assert_int_eq(run(cm, chunk, 1).duration_ns, 89 * MS);
	cost_model_free(cm);
}
END_TEST

START_TEST(energy_is_the_roofline_power_over_the_fit_time)
{
	struct cost_model *cm = made_up("", 1);
	struct cost_model *rl = make("roofline", "opt-13b", "a100-80gb-sxm", 1);
	const struct gpu_spec *g = catalog_gpu(&cat, "a100-80gb-sxm");
	struct cost_item pf[] = { { .tokens = 2048 } };
	struct cost_item dec[8];
	struct cost_result a, b;

	for (int i = 0; i < 8; i++)
		dec[i] = (struct cost_item){ .tokens = 1, .context = 512 };
	for (int k = 0; k < 2; k++) {
		const struct cost_item *it = k ? dec : pf;
		uint32_t n = k ? 8 : 1;
		double p;

		a = run(cm, it, n);
		b = run(rl, it, n);
		p = a.energy_j / (a.duration_ns * 1e-9);
		/* same average power as the roofline's step, to rounding */
		ck_assert_double_eq_tol(p, b.energy_j / (b.duration_ns * 1e-9), 1e-6 * p);
		ck_assert(p >= g->idle_w && p <= g->tdp_w);
		ck_assert_int_ge(a.compute_ns, 0);
		ck_assert_int_le(a.compute_ns, a.duration_ns);
	}
	/* the prefill step is compute-bound, so it draws more than a decode */
	ck_assert_double_gt(run(cm, pf, 1).energy_j / run(cm, pf, 1).duration_ns,
			    run(cm, dec, 8).energy_j / run(cm, dec, 8).duration_ns);
	cost_model_free(rl);
	cost_model_free(cm);
}
END_TEST

/* ---- errors --------------------------------------------------------------- */

static void expect_error(const char *spec, const char *model, const char *gpu, int tp,
			 int code, const char *want1, const char *want2)
{
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;
	char line[1024];

	ck_assert_int_eq(try_make(&cm, spec, model, gpu, tp, &err), code);
	ck_assert_ptr_null(cm);
	ss_error_format(&err, line, sizeof(line));
	ck_assert_msg(strstr(line, want1), "'%s' lacks '%s'", line, want1);
	if (want2)
		ck_assert_msg(strstr(line, want2), "'%s' lacks '%s'", line, want2);
	ck_assert_ptr_null(strchr(line, '\n'));
}

START_TEST(errors_name_the_file_and_what_is_missing)
{
	char spec[4400], bad[4600];

	snprintf(spec, sizeof(spec), "distserve:file=%s", fits_path);
	/* model not in the file: names the file, the HF id and what it has */
	expect_error(spec, "llama-3.1-8b", "a100-80gb-sxm", 1, -EINVAL, fits_path,
		     "no fits for model \"meta-llama/Llama-3.1-8B-Instruct\"");
	expect_error(spec, "llama-3.1-8b", "a100-80gb-sxm", 1, -EINVAL,
		     "the file has: facebook/opt-13b", NULL);
	/* TP not in the file */
	expect_error(spec, "opt-13b", "a100-80gb-sxm", 4, -EINVAL, fits_path,
		     "at tensor parallelism 4; it has tp 1, 2");
	/* file missing */
	expect_error("distserve:file=/nonexistent/profiler.json", "opt-13b", "a100-80gb-sxm", 1,
		     -ENOENT, "/nonexistent/profiler.json: cannot open", "No such file");
	/* another GPU than the fits were measured on, unless asked for */
	expect_error(spec, "opt-13b", "h100-sxm", 1, -EINVAL, "measurements of a100-80gb-sxm",
		     "gpu=h100-sxm");
	/* fit_tp must be a whole number, and its entry must exist */
	snprintf(bad, sizeof(bad), "%s,fit_tp=1.5", spec);
	expect_error(bad, "opt-13b", "a100-80gb-sxm", 1, -EINVAL, "'fit_tp' is 1.5", NULL);
	snprintf(bad, sizeof(bad), "%s,fit_tp=4", spec);
	expect_error(bad, "opt-13b", "a100-80gb-sxm", 1, -EINVAL, "at tensor parallelism 4", NULL);
	snprintf(bad, sizeof(bad), "%s,step_extra_ms=-1", spec);
	expect_error(bad, "opt-13b", "a100-80gb-sxm", 1, -EINVAL, "step_extra_ms", NULL);
	{
		struct cost_model *cm;
		char s2[4500];

		snprintf(s2, sizeof(s2), "%s,gpu=h100-sxm", spec);
		cm = make(s2, "opt-13b", "h100-sxm", 1);
		cost_model_free(cm);
	}
	/* bad parameter values */
	snprintf(bad, sizeof(bad), "%s,engine=sglang", spec);
	expect_error(bad, "opt-13b", "a100-80gb-sxm", 1, -EINVAL, "'engine' is 'sglang'", NULL);
	snprintf(bad, sizeof(bad), "%s,mixed=max", spec);
	expect_error(bad, "opt-13b", "a100-80gb-sxm", 1, -EINVAL, "'mixed' is 'max'", NULL);
	snprintf(bad, sizeof(bad), "%s,prefil_extra_ms=0", spec);
	expect_error(bad, "opt-13b", "a100-80gb-sxm", 1, -EINVAL, "prefil_extra_ms", NULL);
}
END_TEST

START_TEST(errors_in_the_file)
{
	char path[4096], spec[4400];

	/* a missing coefficient set */
	check_write_tmp(path, sizeof(path), "distserve",
		   "{\"facebook/opt-13b\": {\"1\": {\"decoding_large_small_bs_threshold\": 95,\n"
		   " \"prefill\": [1, 2, 3], \"decoding_smallbs\": [1, 2, 3]}}}\n");
	snprintf(spec, sizeof(spec), "distserve:file=%s", path);
	expect_error(spec, "opt-13b", "a100-80gb-sxm", 1, -EINVAL,
		     "\"facebook/opt-13b\" tp 1: missing \"decoding_largebs\"", path);
	unlink(path);
	/* a triple that is not three numbers */
	check_write_tmp(path, sizeof(path), "distserve",
		   "{\"facebook/opt-13b\": {\"1\": {\"decoding_large_small_bs_threshold\": 95,\n"
		   " \"prefill\": [1, 2], \"decoding_smallbs\": [1, 2, 3],"
		   " \"decoding_largebs\": [1, 2, 3]}}}\n");
	snprintf(spec, sizeof(spec), "distserve:file=%s", path);
	expect_error(spec, "opt-13b", "a100-80gb-sxm", 1, -EINVAL,
		     "\"prefill\" must be an array of 3 numbers", NULL);
	unlink(path);
	/* no threshold */
	check_write_tmp(path, sizeof(path), "distserve",
		   "{\"facebook/opt-13b\": {\"1\": {\"prefill\": [1, 2, 3],"
		   " \"decoding_smallbs\": [1, 2, 3], \"decoding_largebs\": [1, 2, 3]}}}\n");
	snprintf(spec, sizeof(spec), "distserve:file=%s", path);
	expect_error(spec, "opt-13b", "a100-80gb-sxm", 1, -EINVAL,
		     "decoding_large_small_bs_threshold", NULL);
	unlink(path);
	/* JSON syntax: file and line */
	check_write_tmp(path, sizeof(path), "distserve", "{\"facebook/opt-13b\":\n  {\"1\": }\n}\n");
	snprintf(spec, sizeof(spec), "distserve:file=%s", path);
	{
		char want[4200];

		snprintf(want, sizeof(want), "%s:2: invalid JSON", path);
		expect_error(spec, "opt-13b", "a100-80gb-sxm", 1, -EINVAL, want, NULL);
	}
	unlink(path);
}
END_TEST

/* A fit whose prediction is not a duration (huge coefficients beyond int64
 * nanoseconds, or negative ones that win) is an error, not a wrapped value
 * or a step clamped to 1 ns. */
START_TEST(predictions_that_are_not_durations_are_errors)
{
	static const char *const fits[] = {
		"[1e300, 0, 0]",       /* 1e300 ms: beyond int64 ns */
		"[-100, 0, 0]",        /* negative */
		"[1, 1e15, 0]",        /* 1e15 ms per token x 1000 tokens */
	};

	for (size_t i = 0; i < sizeof(fits) / sizeof(fits[0]); i++) {
		struct cost_item it = { .tokens = 1000, .context = 0 };
		struct cost_step st = { .items = &it, .n_items = 1, .n_prefill = 1, .n_emit = 1,
					.total_tokens = 1000 };
		struct ss_error err = { 0 };
		struct cost_result r;
		struct cost_model *cm;
		char path[4096], spec[4400], text[512];

		snprintf(text, sizeof(text),
			 "{\"facebook/opt-13b\": {\"1\": {\"decoding_large_small_bs_threshold\": 95,"
			 " \"prefill\": %s, \"decoding_smallbs\": [1, 0, 0],"
			 " \"decoding_largebs\": [1, 0, 0]}}}\n", fits[i]);
		check_write_tmp(path, sizeof(path), "distserve", text);
		snprintf(spec, sizeof(spec), "distserve:file=%s", path);
		cm = make(spec, "opt-13b", "a100-80gb-sxm", 1);
		ck_assert_int_eq(cost_model_predict(cm, &st, &r, &err), -ERANGE);
		ck_assert_msg(strstr(err.msg, "cost model distserve: a step of 1 request (1000 tokens)") &&
			      strstr(err.msg, "not a duration"), "%s: %s", fits[i], err.msg);
		cost_model_free(cm);
		unlink(path);
	}
}
END_TEST

/* The default file comes from cost_config.shared_data (the CLI's
 * SERVESIM_SHARED_DATA), never from the environment: the library reads
 * none, so setting the variable here changes nothing. */
START_TEST(no_file_and_no_shared_data)
{
	const char *old = shared;

	setenv("SERVESIM_SHARED_DATA", "/from-the-environment", 1);
	shared = NULL;
	expect_error("distserve", "opt-13b", "a100-80gb-sxm", 1, -EINVAL, "give file=PATH",
		     "SERVESIM_SHARED_DATA");
	shared = "";
	expect_error("distserve", "opt-13b", "a100-80gb-sxm", 1, -EINVAL, "give file=PATH", NULL);
	/* the default file lives under shared_data */
	shared = "/nonexistent-shared";
	expect_error("distserve:engine=vllm", "opt-13b", "a100-80gb-sxm", 1, -ENOENT,
		     "/nonexistent-shared/profiles/distserve/profiler-a100-80g.vllm.json", NULL);
	shared = old;
}
END_TEST

/* ---- the shipped DistServe files (test-cost-distserve real) -------------- */

/* Coefficients of OPT-13B at TP 1 in profiler-a100-80g.distserve.json
 * (DistServe commit 82831f1), copied by hand: the test checks the reader
 * against them. */
static const double ds13_prefill[3] = { 18.10254647486372, 0.1019122572698738,
					7.122264314252114e-06 };
static const double ds13_small[3] = { 19.934702624895458, 0.0006269356524350583,
				      0.03850697740828398 };
static const double ds13_large[3] = { 7.1661889468253595, 0.0005798000403396046,
				      0.15831096191764046 };

static int64_t ns_of(double ms)
{
	return llround(ms * 1e6);
}

START_TEST(real_opt13b_formulas)
{
	struct cost_model *cm = make("distserve", "opt-13b", "a100-80gb-sxm", 1);
	struct cost_item pf[] = { { .tokens = 2048 } };
	struct cost_item two[] = { { .tokens = 512 }, { .tokens = 1024 } };
	struct cost_item dec[128];
	double want;

	/* 2048-token prompt: 18.10 + 208.72 + 29.87 + 1 = 257.69 ms */
	want = ds13_prefill[0] + ds13_prefill[1] * 2048 + ds13_prefill[2] * 2048.0 * 2048 + 1;
	ck_assert_int_eq(run(cm, pf, 1).duration_ns, ns_of(want));
	ck_assert_double_eq_tol(want, 257.69, 0.01);
	want = ds13_prefill[0] + ds13_prefill[1] * 1536 +
	       ds13_prefill[2] * (512.0 * 512 + 1024.0 * 1024) + 1;
	ck_assert_int_eq(run(cm, two, 2).duration_ns, ns_of(want));

	/* decode batch 1 with 1024 cached tokens (ctx 1025): 20.61 ms */
	dec[0] = (struct cost_item){ .tokens = 1, .context = 1024 };
	want = ds13_small[0] + ds13_small[1] * 1025 + ds13_small[2];
	ck_assert_int_eq(run(cm, dec, 1).duration_ns, ns_of(want));
	ck_assert_double_eq_tol(want, 20.616, 0.001);
	/* batch 94 is below the threshold 95, batch 95 is not */
	for (int i = 0; i < 128; i++)
		dec[i] = (struct cost_item){ .tokens = 1, .context = 511 };
	want = ds13_small[0] + ds13_small[1] * 94 * 512 + ds13_small[2] * 94;
	ck_assert_int_eq(run(cm, dec, 94).duration_ns, ns_of(want));
	want = ds13_large[0] + ds13_large[1] * 95 * 512 + ds13_large[2] * 95;
	ck_assert_int_eq(run(cm, dec, 95).duration_ns, ns_of(want));
	cost_model_free(cm);
}
END_TEST

START_TEST(real_engines_and_models)
{
	struct cost_model *ds = make("distserve", "opt-66b", "a100-80gb-sxm", 4);
	struct cost_model *vl = make("distserve:engine=vllm", "opt-66b", "a100-80gb-sxm", 4);
	struct cost_item dec[] = { { .tokens = 1, .context = 1024 } };
	struct cost_item pf[] = { { .tokens = 2048 } };

	/* OPT-66B TP 4, decode at batch 1: DistServe 31.29 ms, vLLM (2023) 40.43 ms */
	ck_assert_int_eq(run(ds, dec, 1).duration_ns,
			 ns_of(30.760284619429587 + 0.000451947603788462 * 1025 + 0.063284195750671));
	ck_assert_int_eq(run(vl, dec, 1).duration_ns,
			 ns_of(39.58178936012414 + 0.0006945721692406896 * 1025 +
			       0.13580868185596764));
	/* DistServe's own engine is faster than the vLLM it was compared with */
	ck_assert_int_lt(run(ds, pf, 1).duration_ns, run(vl, pf, 1).duration_ns);
	cost_model_free(vl);
	cost_model_free(ds);

	/* the files hold OPT-13B at TP 1, 2, 4 and OPT-66B at TP 2, 3, 4, 8 */
	expect_error("distserve", "opt-13b", "a100-80gb-sxm", 8, -EINVAL,
		     "profiler-a100-80g.distserve.json", "it has tp 1, 2, 4");
	expect_error("distserve", "opt-66b", "a100-80gb-sxm", 1, -EINVAL,
		     "it has tp 2, 3, 4, 8", NULL);
	expect_error("distserve:engine=vllm", "llama-2-13b", "a100-80gb-sxm", 1, -EINVAL,
		     "profiler-a100-80g.vllm.json", "no fits for model \"meta-llama/Llama-2-13b-hf\"");
}
END_TEST

START_TEST(real_engine_run)
{
	/* One request alone: the prefill step's time is TTFT exactly, and each
	 * decode is the decode formula at batch 1 with ctx = prompt + tokens so
	 * far.  Then a busy workload runs to completion. */
	struct wl_request rq[] = { { .arrival_ns = 0, .prompt_tokens = 1000, .output_tokens = 3 } };
	struct wl_request many[64];
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct ss_error err = { 0 };
	struct engine *e = NULL;
	int64_t pf, d1, d2;

	workload_init(&wl);
	wl.req = rq;
	wl.n = 1;
	wl.has_arrivals = true;
	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "opt-13b");
	c.gpu = catalog_gpu(&cat, "a100-80gb-sxm");
	c.cost_model = "distserve";
	c.shared_data = shared;   /* the engine passes it to the cost model */
	c.policy = "vllm";
	ck_assert_msg(engine_new(&e, &c, &wl, &err) == 0 && engine_run(e, &err) == 0, "%s", err.msg);
	engine_results(e, &r);
	ck_assert_str_eq(r.cost_model_name, "distserve");
	pf = ns_of(ds13_prefill[0] + ds13_prefill[1] * 1000 + ds13_prefill[2] * 1e6 + 1);
	d1 = ns_of(ds13_small[0] + ds13_small[1] * 1001 + ds13_small[2]);
	d2 = ns_of(ds13_small[0] + ds13_small[1] * 1002 + ds13_small[2]);
	ck_assert_int_eq(r.req[0].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[0].first_token_ns, pf);
	ck_assert_int_eq(r.req[0].finish_ns, pf + d1 + d2);
	ck_assert_int_eq(r.inst[0].op_ns[COST_OP_GEMM], pf + d1 + d2);
	ck_assert_double_gt(r.inst[0].busy_energy_j, 0);
	engine_free(e);

	for (int i = 0; i < 64; i++)
		many[i] = (struct wl_request){ .arrival_ns = i * 50 * MS,
					       .prompt_tokens = 200 + 37 * i % 900,
					       .output_tokens = 20 + 13 * i % 200 };
	wl.req = many;
	wl.n = 64;
	e = NULL;
	ck_assert_msg(engine_new(&e, &c, &wl, &err) == 0 && engine_run(e, &err) == 0, "%s", err.msg);
	engine_results(e, &r);
	for (int i = 0; i < 64; i++) {
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		ck_assert_int_gt(r.req[i].first_token_ns, r.req[i].arrival_ns);
	}
	engine_free(e);
}
END_TEST

static bool shared_present(void)
{
	char path[4096];
	struct stat st;

	shared = getenv("SERVESIM_SHARED_DATA");
	if (!shared || !*shared)
		return false;
	snprintf(path, sizeof(path), "%s/profiles/distserve/profiler-a100-80g.distserve.json",
		 shared);
	return stat(path, &st) == 0;
}

static Suite *made_up_suite(void)
{
	Suite *s = suite_create("cost-distserve");
	TCase *tc = tcase_create("formulas");
	TCase *te = tcase_create("errors");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, prefill_quadratic_in_lengths);
	tcase_add_test(tc, chunk_len_is_the_chunk_not_the_context);
	tcase_add_test(tc, decode_small_and_large_batch_sets);
	tcase_add_test(tc, decode_uses_the_sum_of_contexts);
	tcase_add_test(tc, mixed_steps);
	tcase_add_test(tc, tp_selects_its_own_fits);
	tcase_add_test(tc, fit_tp_selects_another_entry);
	tcase_add_test(tc, step_extra_per_step_and_per_context_token);
	tcase_add_test(tc, energy_is_the_roofline_power_over_the_fit_time);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(te, setup, teardown);
	tcase_add_test(te, errors_name_the_file_and_what_is_missing);
	tcase_add_test(te, errors_in_the_file);
	tcase_add_test(te, predictions_that_are_not_durations_are_errors);
	tcase_add_test(te, no_file_and_no_shared_data);
	suite_add_tcase(s, te);
	return s;
}

static Suite *real_data_suite(void)
{
	Suite *s = suite_create("cost-distserve-real-data");
	TCase *tc = tcase_create("shipped-files");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, real_opt13b_formulas);
	tcase_add_test(tc, real_engines_and_models);
	tcase_add_test(tc, real_engine_run);
	suite_add_tcase(s, tc);
	return s;
}

/* `test-cost-distserve` runs on its own made-up file; `test-cost-distserve
 * real` checks the shipped files and exits 77 (skipped) without them. */
int main(int argc, char **argv)
{
	bool real = argc > 1 && strcmp(argv[1], "real") == 0;
	SRunner *sr;
	int failed;

	if (real && !shared_present()) {
		fprintf(stderr, "SERVESIM_SHARED_DATA does not hold profiles/distserve: skipped\n");
		return 77;
	}
	sr = srunner_create(real ? real_data_suite() : made_up_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
