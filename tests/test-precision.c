/* Precision (sim/precision.h): --weight-dtype and --kv-dtype.  Weight
 * memory and KV capacity hand-checked for Qwen3-32B in fp8 on an H100, the
 * roofline's GEMM and decode-attention times at fp8 against bf16, the GPUs
 * that refuse fp4, the table model leaving quantised operators to its
 * roofline, and the model's own dtype priced bit for bit as before. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "check-main.h"
#include "config.h"
#include "costmodel.h"
#include "engine.h"
#include "precision.h"

#include "catalog-fixture.h"

static struct cost_model *make(const char *spec, const char *gpu, const char *model,
			       enum ss_dtype w, enum ss_dtype kv)
{
	struct cost_config cfg = {
		.model = catalog_model(&cat, model), .gpu = catalog_gpu(&cat, gpu), .tp = 1,
		.weight_dtype = w, .kv_dtype = kv,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	ck_assert_msg(cost_model_new(&cm, spec, &cfg, &err) == 0, "%s: %s", spec, err.msg);
	return cm;
}

static struct cost_result step(struct cost_model *cm, const struct cost_item *it, uint32_t n)
{
	struct cost_step s = { .items = it, .n_items = n };
	struct cost_result r;
	struct ss_error err = { 0 };

	for (uint32_t i = 0; i < n; i++) {
		s.total_tokens += it[i].tokens;
		s.n_prefill += it[i].tokens > 1;
	}
	s.n_emit = n;
	ck_assert_msg(cost_model_predict(cm, &s, &r, &err) == 0, "%s", err.msg);
	return r;
}

START_TEST(parse_and_names)
{
	enum ss_dtype d;

	ck_assert_int_eq(ss_dtype_parse("fp8", &d), 0);
	ck_assert_int_eq(d, SS_DTYPE_FP8);
	ck_assert_int_eq(ss_dtype_parse("NVFP4", &d), 0);
	ck_assert_int_eq(d, SS_DTYPE_FP4);
	ck_assert_int_eq(ss_dtype_parse("bfloat16", &d), 0);
	ck_assert_int_eq(d, SS_DTYPE_BF16);
	ck_assert_int_eq(ss_dtype_parse("int4", &d), -EINVAL);
	ck_assert_int_eq(ss_dtype_parse(NULL, &d), -EINVAL);
	ck_assert_str_eq(ss_dtype_name(SS_DTYPE_FP8), "fp8");
	ck_assert_str_eq(ss_dtype_name(SS_DTYPE_MODEL), "model");
}
END_TEST

/* Qwen3-32B (d 5120, 64 query / 8 KV heads of 128, MLP 25600, 64 layers,
 * vocabulary 151936, untied): per layer QKV 80 x 128 x 5120 = 52,428,800,
 * O 64 x 128 x 5120 = 41,943,040, MLP 3 x 5120 x 25600 = 393,216,000:
 * 487,587,840, x 64 = 31,205,621,760 linear parameters; the rest
 * (2 x 151936 x 5120 embeddings and LM head + 129 x 5120 norms) is
 * 1,556,485,120 and stays 2 bytes. */
START_TEST(weight_bytes_hand_checked)
{
	const struct model_spec *m = catalog_model(&cat, "qwen3-32b");

	ck_assert_double_eq(model_linear_params(m), 31205621760.0);
	ck_assert_double_eq(model_params(m) - model_linear_params(m), 1556485120.0);
	/* fp8: 31,205,621,760 x 1 + 1,556,485,120 x 2 */
	ck_assert_double_eq(model_weight_bytes_as(m, SS_DTYPE_FP8), 34318592000.0);
	/* NVFP4: 4 bits + an 8-bit scale per 16 values = 0.5625 bytes */
	ck_assert_double_eq(model_weight_bytes_as(m, SS_DTYPE_FP4),
			    31205621760.0 * 0.5625 + 1556485120.0 * 2);
	/* the model's own dtype: the very same value as before */
	ck_assert_double_eq(model_weight_bytes_as(m, SS_DTYPE_MODEL), model_weight_bytes(m));
	ck_assert_double_eq(model_weight_bytes_as(m, SS_DTYPE_BF16), model_weight_bytes(m));
	/* KV per token: 2 x 64 layers x 8 heads x 128 x bytes */
	ck_assert_double_eq(model_kv_bytes_per_token_as(m, SS_DTYPE_FP8), 131072.0);
	ck_assert_double_eq(model_kv_bytes_per_token_as(m, SS_DTYPE_MODEL), 262144.0);
}
END_TEST

/* KV blocks on one H100 (85,520,809,984 bytes), 0.9 of it, 4 GiB reserved,
 * blocks of 16 tokens:
 *   fp8 weights and KV: (76,968,728,985.6 - 34,318,592,000 - 4,294,967,296)
 *                       / (131,072 x 16) = 18289.17 -> 18289
 *   bf16:               (76,968,728,985.6 - 65,524,213,760 - 4,294,967,296)
 *                       / (262,144 x 16) = 1704.59 -> 1704 */
START_TEST(kv_capacity_hand_checked)
{
	struct engine_config c;
	struct ss_error err = { 0 };
	int32_t blocks;

	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "qwen3-32b");
	c.gpu = catalog_gpu(&cat, "h100-sxm");
	c.activation_reserve_bytes = 4294967296.0;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 1704);
	c.weight_dtype = SS_DTYPE_FP8;
	c.kv_dtype = SS_DTYPE_FP8;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 18289);
}
END_TEST

/* The roofline on an H100 without launch overhead: a prefill of 8192
 * tokens is compute-bound in every layer GEMM, so fp8 takes
 * (989.4 x gemm_eff 0.8) / (1978.9 x gemm_fp8_eff 0.5) of the bf16 time
 * (0.5 with gemm_fp8_eff=0.8: the FLOP/s ratio alone); one decode is
 * weight-bound, so fp8 reads half the weight bytes (plus the same bf16
 * activations). */
START_TEST(roofline_gemm_fp8_over_bf16_h100)
{
	struct cost_model *b = make("roofline:kernel_us=0", "h100-sxm", "qwen3-32b",
				    SS_DTYPE_MODEL, SS_DTYPE_MODEL);
	struct cost_model *f = make("roofline:kernel_us=0", "h100-sxm", "qwen3-32b",
				    SS_DTYPE_FP8, SS_DTYPE_MODEL);
	struct cost_item pf = { .tokens = 8192, .context = 0 }, dec = { .tokens = 1, .context = 1000 };
	double rp = (double)step(f, &pf, 1).op_ns[COST_OP_GEMM] / step(b, &pf, 1).op_ns[COST_OP_GEMM];
	double rd = (double)step(f, &dec, 1).op_ns[COST_OP_GEMM] / step(b, &dec, 1).op_ns[COST_OP_GEMM];
	struct cost_result lb = step(b, &pf, 1), lf = step(f, &pf, 1);

	ck_assert_msg(fabs(rp - 989.4 * 0.8 / (1978.9 * 0.5)) < 1e-6, "prefill GEMM fp8/bf16 %.9f", rp);
	ck_assert_msg(rd > 0.5 && rd < 0.501, "decode GEMM fp8/bf16 %.6f", rd);
	/* the LM head stays bf16 in quantised checkpoints */
	ck_assert_int_eq(lf.op_ns[COST_OP_LM_HEAD], lb.op_ns[COST_OP_LM_HEAD]);
	cost_model_free(f);
	f = make("roofline:kernel_us=0,gemm_fp8_eff=0.8", "h100-sxm", "qwen3-32b",
		 SS_DTYPE_FP8, SS_DTYPE_MODEL);
	rp = (double)step(f, &pf, 1).op_ns[COST_OP_GEMM] / step(b, &pf, 1).op_ns[COST_OP_GEMM];
	ck_assert_msg(fabs(rp - 989.4 / 1978.9) < 1e-6, "prefill GEMM fp8/bf16 at one eff %.9f", rp);
	cost_model_free(b);
	cost_model_free(f);
}
END_TEST

/* No fp8 tensor cores (A100): an fp8 checkpoint runs W8A16 (Marlin), the
 * GEMMs at the bf16 rate: a compute-bound prefill takes as long. */
START_TEST(roofline_fp8_on_a100_is_w8a16)
{
	struct cost_model *b = make("roofline:kernel_us=0", "a100-80gb-sxm", "llama-3.1-8b",
				    SS_DTYPE_MODEL, SS_DTYPE_MODEL);
	struct cost_model *f = make("roofline:kernel_us=0", "a100-80gb-sxm", "llama-3.1-8b",
				    SS_DTYPE_FP8, SS_DTYPE_MODEL);
	struct cost_item pf = { .tokens = 8192, .context = 0 }, dec = { .tokens = 1, .context = 10 };

	ck_assert_int_eq(step(f, &pf, 1).op_ns[COST_OP_GEMM], step(b, &pf, 1).op_ns[COST_OP_GEMM]);
	ck_assert_int_lt(step(f, &dec, 1).op_ns[COST_OP_GEMM], step(b, &dec, 1).op_ns[COST_OP_GEMM]);
	cost_model_free(b);
	cost_model_free(f);
}
END_TEST

/* fp8 KV: decode attention reads half the K and V bytes (Q and O stay
 * bf16), so 32 decodes over 8000 tokens take just over half as long. */
START_TEST(roofline_fp8_kv_halves_decode_attention)
{
	struct cost_model *b = make("roofline:kernel_us=0", "h100-sxm", "qwen3-32b",
				    SS_DTYPE_MODEL, SS_DTYPE_MODEL);
	struct cost_model *f = make("roofline:kernel_us=0", "h100-sxm", "qwen3-32b",
				    SS_DTYPE_MODEL, SS_DTYPE_FP8);
	struct cost_item it[32];
	double r;

	for (int i = 0; i < 32; i++)
		it[i] = (struct cost_item){ .tokens = 1, .context = 8000 };
	r = (double)step(f, it, 32).op_ns[COST_OP_ATTN_DECODE] /
	    step(b, it, 32).op_ns[COST_OP_ATTN_DECODE];
	ck_assert_msg(r > 0.5 && r < 0.501, "decode attention fp8/bf16 KV %.6f", r);
	ck_assert_int_eq(step(f, it, 32).op_ns[COST_OP_GEMM], step(b, it, 32).op_ns[COST_OP_GEMM]);
	cost_model_free(b);
	cost_model_free(f);
}
END_TEST

/* bf16 named explicitly prices every operator as the model's own dtype. */
START_TEST(bf16_bit_for_bit)
{
	struct cost_model *a = make("roofline", "h100-sxm", "llama-3.1-70b",
				    SS_DTYPE_MODEL, SS_DTYPE_MODEL);
	struct cost_model *b = make("roofline", "h100-sxm", "llama-3.1-70b",
				    SS_DTYPE_BF16, SS_DTYPE_BF16);
	struct cost_item it[5] = { { 700, 0 }, { 1, 90 }, { 1, 4000 }, { 256, 512 }, { 1, 1 } };

	for (uint32_t n = 1; n <= 5; n++) {
		struct cost_result x = step(a, it, n), y = step(b, it, n);

		ck_assert_int_eq(x.duration_ns, y.duration_ns);
		ck_assert(x.energy_j == y.energy_j);
		ck_assert(memcmp(x.op_ns, y.op_ns, sizeof(x.op_ns)) == 0);
	}
	cost_model_free(a);
	cost_model_free(b);
}
END_TEST

/* fp4 weights on a GPU without fp4 tensor cores (H100) run weight-only,
 * W4A16 as vLLM's Marlin MXFP4/NVFP4 kernels do: GEMMs at the bf16 rate,
 * weights read at 0.5625 bytes; a prefill-sized step (compute-bound) costs
 * the same GEMM time as bf16, a batch-1 decode step (memory-bound) less. */
START_TEST(fp4_weight_only_without_fp4_cores)
{
	struct cost_config cfg = {
		.model = catalog_model(&cat, "llama-3.1-70b"), .gpu = catalog_gpu(&cat, "h100-sxm"),
		.tp = 8, .weight_dtype = SS_DTYPE_FP4,
	};
	struct cost_config bf = cfg;
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL, *cb = NULL;
	struct cost_item dec = { .tokens = 1, .context = 1000 }, pf = { .tokens = 8192, .context = 0 };
	struct cost_step sd = { .items = &dec, .n_items = 1, .n_emit = 1, .total_tokens = 1 };
	struct cost_step sp = { .items = &pf, .n_items = 1, .n_prefill = 1, .n_emit = 1,
				.total_tokens = 8192 };
	struct cost_result r4, r16;

	ck_assert_int_eq(precision_check(cfg.gpu, SS_DTYPE_FP4, SS_DTYPE_MODEL, &err), 0);
	ck_assert_double_eq(gpu_gemm_flops(cfg.gpu, SS_DTYPE_FP4), cfg.gpu->bf16_flops);
	bf.weight_dtype = SS_DTYPE_BF16;
	ck_assert_int_eq(cost_model_new(&cm, "roofline", &cfg, &err), 0);
	ck_assert_int_eq(cost_model_new(&cb, "roofline", &bf, &err), 0);
	ck_assert_int_eq(cost_model_predict(cm, &sd, &r4, &err), 0);
	ck_assert_int_eq(cost_model_predict(cb, &sd, &r16, &err), 0);
	/* decode: 70B/8 of bf16 weights is ~17.6 GB -> ~5 GB at fp4 (3.6x
	 * fewer bytes; the per-kernel overhead keeps it above 2x) */
	ck_assert_int_lt(r4.op_ns[COST_OP_GEMM] * 2, r16.op_ns[COST_OP_GEMM]);
	ck_assert_int_eq(cost_model_predict(cm, &sp, &r4, &err), 0);
	ck_assert_int_eq(cost_model_predict(cb, &sp, &r16, &err), 0);
	/* prefill of 8192 tokens: compute-bound at the same bf16 rate */
	ck_assert_int_eq(r4.op_ns[COST_OP_GEMM], r16.op_ns[COST_OP_GEMM]);
	cost_model_free(cm);
	cost_model_free(cb);
	cm = NULL;
	ck_assert_int_eq(precision_check(catalog_gpu(&cat, "a100-80gb-sxm"), SS_DTYPE_FP8,
					 SS_DTYPE_FP8, NULL), 0);
	cfg.gpu = catalog_gpu(&cat, "b200");
	ck_assert_int_eq(cost_model_new(&cm, "roofline", &cfg, &err), 0);
	cost_model_free(cm);
	/* B200's fp4 GEMMs at 9 PFLOP/s */
	ck_assert_double_eq(gpu_gemm_flops(cfg.gpu, SS_DTYPE_FP4), 9000e12);
	ck_assert_double_eq(gpu_gemm_flops(cfg.gpu, SS_DTYPE_MODEL), 2250e12);
}
END_TEST

/* The shipped store's A100 measurements are 16-bit: the table leaves fp8
 * GEMMs and fp8 decode attention to its roofline, the rest measured; the
 * fit and distserve models refuse.  Its H100 fp8 GEMMs are measured. */
START_TEST(table_leaves_quantised_ops_to_roofline)
{
	char path[600];
	const char *st[1] = { path };
	struct cost_config cfg = {
		.model = catalog_model(&cat, "llama-2-70b"), .gpu = catalog_gpu(&cat, "a100-80gb-sxm"),
		.tp = 2, .stores = st, .n_stores = 1,
		.weight_dtype = SS_DTYPE_FP8, .kv_dtype = SS_DTYPE_FP8,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	snprintf(path, sizeof(path), "%s/calibration.db", data_dir());
	ck_assert_msg(cost_model_new(&cm, "table", &cfg, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_GEMM), "roofline");
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_ATTN_DECODE), "roofline");
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_ATTN_PREFILL), "table");
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_LM_HEAD), "table");
	cost_model_free(cm);
	/* auto still takes the table: its 16-bit operators are measured */
	ck_assert_msg(cost_model_new(&cm, "auto", &cfg, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_ATTN_PREFILL), "table");
	cost_model_free(cm);
	cfg.kv_dtype = SS_DTYPE_MODEL;
	cfg.weight_dtype = SS_DTYPE_MODEL;
	ck_assert_msg(cost_model_new(&cm, "table", &cfg, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_GEMM), "table");
	cost_model_free(cm);
	cfg.weight_dtype = SS_DTYPE_FP8;
	ck_assert_int_eq(cost_model_new(&cm, "fit", &cfg, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "not modelled yet"), "%s", err.msg);
	/* the H100's measured per-tensor fp8 GEMMs (the shipped store has
	 * aiconfigurator's): the table prices fp8 layer GEMMs */
	cfg.gpu = catalog_gpu(&cat, "h100-sxm");
	cfg.model = catalog_model(&cat, "qwen3-32b");
	ck_assert_msg(cost_model_new(&cm, "table", &cfg, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_GEMM), "table");
	cost_model_free(cm);
}
END_TEST

/* fp8_flops and fp4_flops: optional, 0 when absent, bounded like bf16_flops. */
START_TEST(catalog_fields)
{
	const struct gpu_spec *h = catalog_gpu(&cat, "h100-sxm");
	const char *tmp = getenv("TMPDIR");
	char path[512];
	struct ss_error err = { 0 };
	FILE *f;
	int fd;

	ck_assert_double_eq(h->fp8_flops, 1978.9e12);
	ck_assert_double_eq(h->fp4_flops, 0.0);
	ck_assert_double_eq(catalog_gpu(&cat, "a100-80gb-sxm")->fp8_flops, 0.0);
	ck_assert_double_eq(gpu_gemm_flops(h, SS_DTYPE_FP8), 1978.9e12);
	ck_assert_double_eq(gpu_gemm_flops(catalog_gpu(&cat, "a100-80gb-sxm"), SS_DTYPE_FP8), 312e12);
	snprintf(path, sizeof(path), "%s/ss-precision-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	fputs("{\"gpus\": [{\"name\": \"g\", \"bf16_flops\": 1e15, \"hbm_bytes\": 8e10,"
	      " \"hbm_bw\": 3e12, \"nvlink_bw\": 0, \"pcie_bw\": 6.4e10, \"tdp_w\": 700,"
	      " \"idle_w\": 80, \"cost_per_hour\": 0, \"fp8_flops\": 1e300, \"source\": \"x\"}]}", f);
	fclose(f);
	ck_assert_int_eq(catalog_load_gpus(&cat, path, &err), -EINVAL);
	unlink(path);
	ck_assert_msg(strstr(err.msg, "field \"fp8_flops\" is 1e+300 FLOP/s"), "%s", err.msg);
}
END_TEST

/* A model whose checkpoint is not 16-bit (models.json "weight_dtype":
 * gpt-oss's MXFP4, DeepSeek-V3's FP8): a run without --weight-dtype
 * prices the checkpoint's weights, in memory and in the cost model, as
 * --weight-dtype would; an explicit dtype still wins. */
START_TEST(checkpoint_dtype_is_the_default)
{
	const struct model_spec *oss = catalog_model(&cat, "gpt-oss-120b");
	const struct model_spec *ds = catalog_model(&cat, "deepseek-v3");
	const struct model_spec *q = catalog_model(&cat, "qwen3-32b");
	const struct cost_item it[1] = { { .tokens = 1, .context = 512 } };
	struct cost_model *a, *b, *c;

	ck_assert_int_eq(oss->weight_dtype, SS_DTYPE_FP4);
	ck_assert_int_eq(ds->weight_dtype, SS_DTYPE_FP8);
	ck_assert_int_eq(q->weight_dtype, SS_DTYPE_MODEL);
	ck_assert_int_eq(model_weights_dtype(oss, SS_DTYPE_MODEL), SS_DTYPE_FP4);
	ck_assert_int_eq(model_weights_dtype(oss, SS_DTYPE_BF16), SS_DTYPE_BF16);
	ck_assert_int_eq(model_weights_dtype(q, SS_DTYPE_MODEL), SS_DTYPE_MODEL);
	ck_assert_double_eq(model_weight_bytes_as(oss, SS_DTYPE_MODEL),
			    model_weight_bytes_as(oss, SS_DTYPE_FP4));
	ck_assert_double_eq(model_weight_bytes_as(ds, SS_DTYPE_MODEL),
			    model_weight_bytes_as(ds, SS_DTYPE_FP8));
	/* bf16 asked for: twice the bytes of the linear layers, about */
	ck_assert(model_weight_bytes_as(ds, SS_DTYPE_BF16) >
		  1.9 * model_weight_bytes_as(ds, SS_DTYPE_MODEL));
	/* the roofline prices the default as fp4 (a decode step reads the
	 * weights: the same time), not as bf16 */
	a = make("roofline", "h100-sxm", "gpt-oss-120b", SS_DTYPE_MODEL, SS_DTYPE_MODEL);
	b = make("roofline", "h100-sxm", "gpt-oss-120b", SS_DTYPE_FP4, SS_DTYPE_MODEL);
	c = make("roofline", "h100-sxm", "gpt-oss-120b", SS_DTYPE_BF16, SS_DTYPE_MODEL);
	ck_assert_int_eq(step(a, it, 1).duration_ns, step(b, it, 1).duration_ns);
	ck_assert(step(c, it, 1).duration_ns > 1.5 * step(a, it, 1).duration_ns);
	cost_model_free(a);
	cost_model_free(b);
	cost_model_free(c);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("precision");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, parse_and_names);
	tcase_add_test(tc, weight_bytes_hand_checked);
	tcase_add_test(tc, kv_capacity_hand_checked);
	tcase_add_test(tc, roofline_gemm_fp8_over_bf16_h100);
	tcase_add_test(tc, roofline_fp8_on_a100_is_w8a16);
	tcase_add_test(tc, roofline_fp8_kv_halves_decode_attention);
	tcase_add_test(tc, bf16_bit_for_bit);
	tcase_add_test(tc, fp4_weight_only_without_fp4_cores);
	tcase_add_test(tc, table_leaves_quantised_ops_to_roofline);
	tcase_add_test(tc, catalog_fields);
	tcase_add_test(tc, checkpoint_dtype_is_the_default);
	suite_add_tcase(s, tc);
	return s;
}
