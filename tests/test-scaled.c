/* The "scaled" cost model (docs/cost-models.md "scaled"): a GPU without
 * measured tables priced from its family's measured GPU, each operator
 * scaled by the roofline.  On the shipped store (H100 and A100-80GB
 * tables): every operator of an H200 step is the H100 table's time times
 * the ratio of the two GPUs' rooflines for that operator (to the
 * nanosecond the scaled model rounds to), an operator the reference's
 * table leaves to its roofline is the H200's roofline, the energy is the
 * H200 roofline's power over the scaled time; "auto" picks the scaled
 * model for an H200 and an A100-40GB, keeps the table for the H100, the
 * roofline for a GPU whose family has no tables (B200, MI300X) and for
 * any GPU when no catalog is given (as before the scaled model); bad
 * references are one-line errors. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "check-main.h"
#include "config.h"
#include "costmodel.h"
#include "precision.h"

#include "catalog-fixture.h"

static char store[600];
static const char *stores[1] = { store };

static struct cost_config config(const char *model, const char *gpu, int tp, enum ss_dtype w)
{
	struct cost_config c = {
		.model = catalog_model(&cat, model), .gpu = catalog_gpu(&cat, gpu), .tp = tp,
		.stores = stores, .n_stores = 1, .weight_dtype = w,
		.ref_gpus = cat.gpus, .n_ref_gpus = cat.n_gpus,
	};

	snprintf(store, sizeof(store), "%s/calibration.db", data_dir());
	ck_assert_ptr_nonnull(c.model);
	ck_assert_ptr_nonnull(c.gpu);
	return c;
}

static struct cost_model *make(const char *spec, const struct cost_config *c)
{
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	ck_assert_msg(cost_model_new(&cm, spec, c, &err) == 0, "%s on %s: %s", spec, c->gpu->name,
		      err.msg);
	return cm;
}

/* A step of n items of `tokens` tokens at context ctx each. */
static struct cost_result step(struct cost_model *cm, int n, int32_t tokens, int32_t ctx)
{
	struct cost_item it[128];
	struct cost_step s = { .items = it, .n_items = (uint32_t)n };
	struct cost_result r;
	struct ss_error err = { 0 };

	ck_assert_int_le(n, 128);
	for (int i = 0; i < n; i++) {
		it[i] = (struct cost_item){ .tokens = tokens, .context = ctx };
		s.total_tokens += tokens;
		s.n_prefill += tokens > 1;
	}
	s.n_emit = (uint32_t)n;
	ck_assert_msg(cost_model_predict(cm, &s, &r, &err) == 0, "%s", err.msg);
	return r;
}

/* The scaled model's every operator against t_ref x roofline_gpu /
 * roofline_ref, computed here from three models of our own. */
static void check_scaled(const char *model, const char *gpu, const char *ref, int tp,
			 enum ss_dtype w)
{
	struct cost_config cg = config(model, gpu, tp, w), cr = config(model, ref, tp, w);
	struct cost_model *sc = make("scaled", &cg), *tab = make("table", &cr);
	struct cost_model *rr = make("roofline", &cr), *rg = make("roofline", &cg);
	static const int shapes[][3] = {
		{ 1, 1, 500 }, { 64, 1, 2000 }, { 1, 2048, 0 }, { 4, 512, 1024 }, { 128, 1, 100 },
	};

	ck_assert_str_eq(cost_model_reference(sc), ref);
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		struct cost_result s = step(sc, shapes[k][0], shapes[k][1], shapes[k][2]);
		struct cost_result t = step(tab, shapes[k][0], shapes[k][1], shapes[k][2]);
		struct cost_result a = step(rr, shapes[k][0], shapes[k][1], shapes[k][2]);
		struct cost_result b = step(rg, shapes[k][0], shapes[k][1], shapes[k][2]);
		int64_t sum = 0;
		bool moved = false;

		for (int op = 0; op < COST_OP_COUNT; op++) {
			const char *be = cost_model_op_backend(tab, (enum cost_op)op);
			double want;

			if (op == COST_OP_LORA)
				continue;
			if (!strcmp(be, "table")) {
				ck_assert_str_eq(cost_model_op_backend(sc, (enum cost_op)op), "scaled");
				want = a.op_ns[op] > 0 ? (double)t.op_ns[op] * (double)b.op_ns[op] /
							 (double)a.op_ns[op]
						       : (double)t.op_ns[op];
			} else {
				ck_assert_str_eq(cost_model_op_backend(sc, (enum cost_op)op), "roofline");
				want = (double)b.op_ns[op];
			}
			/* the model rounds its ms to the ns: +-1 ns */
			ck_assert_msg(fabs((double)s.op_ns[op] - want) <= 1.0,
				      "%s %s on %s, step %zu, %s: %lld ns, expected %.1f", model, gpu, ref,
				      k, cost_op_name((enum cost_op)op), (long long)s.op_ns[op], want);
			moved |= s.op_ns[op] != t.op_ns[op];
			sum += s.op_ns[op];
		}
		ck_assert_int_eq(sum + s.op_ns[COST_OP_LORA], s.duration_ns);
		/* the GPUs differ: some operator moves off the reference's time */
		ck_assert_msg(moved, "%s on %s: step %zu unchanged", gpu, ref, k);
		/* the GPU's roofline power over the scaled time */
		ck_assert_double_eq_tol(s.energy_j, b.energy_j / (double)b.duration_ns *
						    (double)s.duration_ns, 1e-9 * b.energy_j + 1e-12);
	}
	cost_model_free(sc);
	cost_model_free(tab);
	cost_model_free(rr);
	cost_model_free(rg);
}

START_TEST(scaled_is_reference_times_roofline_ratio)
{
	check_scaled("llama-3.1-8b", "h200-sxm", "h100-sxm", 1, SS_DTYPE_MODEL);
	check_scaled("llama-3.1-70b", "h200-sxm", "h100-sxm", 4, SS_DTYPE_MODEL);
	check_scaled("llama-3.1-8b", "a100-40gb-sxm", "a100-80gb-sxm", 1, SS_DTYPE_MODEL);
	/* an MoE model in fp8: the reference's GEMMs are its roofline's, so
	 * the H200's are the H200 roofline's */
	check_scaled("qwen3-30b-a3b", "h200-sxm", "h100-sxm", 2, SS_DTYPE_FP8);
}
END_TEST

/* Decode steps on an H200 read the same bytes 4.8 / 3.35 times as fast:
 * a memory-bound operator's scaled time is well below the H100's, a
 * compute-bound prefill's (equal bf16 peaks) about the same. */
START_TEST(memory_bound_scales_by_bandwidth)
{
	struct cost_config cg = config("llama-3.1-8b", "h200-sxm", 1, SS_DTYPE_MODEL);
	struct cost_config cr = config("llama-3.1-8b", "h100-sxm", 1, SS_DTYPE_MODEL);
	struct cost_model *sc = make("scaled", &cg), *tab = make("table", &cr);
	struct cost_result s = step(sc, 64, 1, 4000), t = step(tab, 64, 1, 4000);
	double r = (double)s.op_ns[COST_OP_ATTN_DECODE] / (double)t.op_ns[COST_OP_ATTN_DECODE];

	/* 3.35 / 4.8 = 0.698 on the bytes; the fixed kernel latency damps it */
	ck_assert_msg(r > 0.69 && r < 0.75, "decode attention ratio %g", r);
	s = step(sc, 1, 8192, 0);
	t = step(tab, 1, 8192, 0);
	r = (double)s.op_ns[COST_OP_GEMM] / (double)t.op_ns[COST_OP_GEMM];
	ck_assert_msg(r > 0.97 && r <= 1.0, "prefill GEMM ratio %g", r);
	cost_model_free(sc);
	cost_model_free(tab);
}
END_TEST

START_TEST(auto_scales_a_gpu_without_tables)
{
	static const struct {
		const char *gpu, *name, *ref;
	} want[] = {
		{ "h100-sxm", "table", NULL },
		{ "h200-sxm", "scaled", "h100-sxm" },
		{ "a100-80gb-sxm", "table", NULL },
		{ "a100-40gb-sxm", "scaled", "a100-80gb-sxm" },
		{ "b200", "roofline", NULL },     /* sm100: no tables in the family */
		{ "mi300x", "roofline", NULL },   /* gfx942: likewise */
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct cost_config c = config("llama-3.1-8b", want[i].gpu, 1, SS_DTYPE_MODEL);
		struct cost_model *cm = make("auto", &c);
		const char *ref = cost_model_reference(cm);

		ck_assert_msg(!strcmp(cm->ops->name, want[i].name), "%s: %s, expected %s",
			      want[i].gpu, cm->ops->name, want[i].name);
		ck_assert_msg(want[i].ref ? ref && !strcmp(ref, want[i].ref) : !ref, "%s: reference %s",
			      want[i].gpu, ref ? ref : "none");
		if (want[i].ref) {
			char spec[96];

			/* the spec a pipeline stage's slice is rebuilt from */
			snprintf(spec, sizeof(spec), "scaled:from=%s", want[i].ref);
			ck_assert_str_eq(cm->spec, spec);
		}
		cost_model_free(cm);
		/* without the catalog's GPUs: the table or the roofline, as
		 * before the scaled model */
		c.ref_gpus = NULL;
		c.n_ref_gpus = 0;
		cm = make("auto", &c);
		ck_assert_str_eq(cm->ops->name, strcmp(want[i].name, "scaled") ? want[i].name :
						"roofline");
		cost_model_free(cm);
	}
}
END_TEST

/* A family member whose tables do not price the model is passed over:
 * Qwen2.5-7B's 28/4 heads have no attention rows, so the H100's table does
 * not qualify and the H200 falls back to the roofline, as the H100 does. */
START_TEST(reference_must_qualify)
{
	struct cost_config c = config("qwen2.5-7b", "h200-sxm", 1, SS_DTYPE_MODEL);
	struct cost_model *cm = make("auto", &c);
	struct ss_error err = { 0 };

	ck_assert_str_eq(cm->ops->name, "roofline");
	cost_model_free(cm);
	cm = NULL;
	ck_assert_int_eq(cost_model_new(&cm, "scaled", &c, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "--cost-model scaled: no GPU of h200-sxm's family (sm90)"),
		      "%s", err.msg);
	ck_assert_int_eq(cost_model_new(&cm, "scaled:from=h100-sxm", &c, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "from=h100-sxm: the calibration stores do not price"), "%s",
		      err.msg);
	ck_assert_ptr_null(cm);
}
END_TEST

START_TEST(bad_references)
{
	struct cost_config c = config("llama-3.1-8b", "b200", 1, SS_DTYPE_MODEL);
	struct cost_model *cm = NULL;
	struct ss_error err = { 0 };

	ck_assert_int_eq(cost_model_new(&cm, "scaled", &c, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "no GPU of b200's family (sm100) has measured tables"), "%s",
		      err.msg);
	ck_assert_int_eq(cost_model_new(&cm, "scaled:from=h900", &c, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "from=h900: expected a GPU of the catalog"), "%s", err.msg);
	ck_assert_int_eq(cost_model_new(&cm, "scaled:fromm=h100-sxm", &c, &err), -EINVAL);
	ck_assert_ptr_null(cm);
	/* across families on request: the GPU check's kernel-class scaling */
	cm = make("scaled:from=h100-sxm", &c);
	ck_assert_str_eq(cost_model_reference(cm), "h100-sxm");
	cost_model_free(cm);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("scaled");
	TCase *tc = tcase_create("scaled");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, scaled_is_reference_times_roofline_ratio);
	tcase_add_test(tc, memory_bound_scales_by_bandwidth);
	tcase_add_test(tc, auto_scales_a_gpu_without_tables);
	tcase_add_test(tc, reference_must_qualify);
	tcase_add_test(tc, bad_references);
	suite_add_tcase(s, tc);
	return s;
}
