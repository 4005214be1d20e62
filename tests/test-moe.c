/* Mixture of experts under tensor parallelism (docs/cost-models.md
 * "Mixture of experts"): the expected distinct experts a step touches, a
 * hand-computed Qwen3-30B-A3B decode step on an H100 against the
 * roofline's GEMM operator, FLOPs = 2 x active parameters, weight memory
 * (bf16 and fp8) and KV capacity by hand, the table leaving an MoE
 * model's GEMMs to its roofline, and the MoE models still refused. */
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
#include "engine.h"
#include "precision.h"

#include "catalog-fixture.h"

static struct cost_model *make(const char *spec, const char *model, enum ss_dtype w)
{
	struct cost_config cfg = {
		.model = catalog_model(&cat, model), .gpu = catalog_gpu(&cat, "h100-sxm"), .tp = 1,
		.weight_dtype = w, .kv_dtype = SS_DTYPE_MODEL,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	ck_assert_ptr_nonnull(cfg.model);
	ck_assert_msg(cost_model_new(&cm, spec, &cfg, &err) == 0, "%s: %s", spec, err.msg);
	return cm;
}

/* A step of n items of `tokens` tokens at context ctx each. */
static struct cost_result step(struct cost_model *cm, int n, int32_t tokens, int32_t ctx)
{
	struct cost_item it[64];
	struct cost_step s = { .items = it, .n_items = (uint32_t)n, .n_emit = (uint32_t)n };
	struct cost_result r;
	struct ss_error err = { 0 };

	ck_assert_int_le(n, 64);
	for (int i = 0; i < n; i++) {
		it[i] = (struct cost_item){ .tokens = tokens, .context = ctx };
		s.total_tokens += tokens;
		s.n_prefill += tokens > 1;
	}
	ck_assert_msg(cost_model_predict(cm, &s, &r, &err) == 0, "%s", err.msg);
	return r;
}

START_TEST(distinct_experts_edges)
{
	/* one token touches exactly its k experts */
	ck_assert_double_eq_tol(model_distinct_experts(128, 8, 1), 8.0, 1e-12);
	ck_assert_double_eq_tol(model_distinct_experts(8, 2, 1), 2.0, 1e-12);
	/* two tokens: 128 (1 - (15/16)^2) = 15.5 */
	ck_assert_double_eq_tol(model_distinct_experts(128, 8, 2), 15.5, 1e-12);
	/* many tokens: every expert */
	ck_assert_double_eq_tol(model_distinct_experts(128, 8, 4096), 128.0, 1e-9);
	ck_assert_double_eq_tol(model_distinct_experts(8, 2, 200), 8.0, 1e-12);
	/* k = E: all of them from the first token */
	ck_assert_double_eq_tol(model_distinct_experts(8, 8, 1), 8.0, 1e-12);
	/* no tokens, no experts */
	ck_assert_double_eq(model_distinct_experts(128, 8, 0), 0.0);
	ck_assert_double_eq(model_distinct_experts(0, 0, 5), 0.0);
	/* monotone and below both B k and E */
	for (int b = 1; b < 300; b++) {
		double u = model_distinct_experts(128, 8, b);

		ck_assert(u <= 8.0 * b + 1e-9 && u <= 128.0);
		ck_assert(u > model_distinct_experts(128, 8, b - 1));
	}
}
END_TEST

/* Qwen3-30B-A3B (d 2048, 32 query / 4 KV heads of 128, 48 MoE layers of
 * 128 experts of width 768, 8 per token, no shared experts, bf16) on one
 * H100 SXM (989.4 TFLOP/s, 3.35 TB/s; gemm_eff 0.8, mem_eff 0.8, no
 * launch overhead).  Per layer, per GEMM: weight bytes, activation bytes
 * per row (x read + y written), FLOPs per row:
 *   QKV     (32 + 8) 128 x 2048: 20,971,520 B; (5120 + 2048) x 2 = 14,336 B; 2 x 10,485,760
 *   O       2048 x 4096:         16,777,216 B; (2048 + 4096) x 2 = 12,288 B; 2 x 8,388,608
 *   router  128 x 2048:             524,288 B; (128 + 2048) x 2  =  4,352 B; 2 x 262,144
 *   experts' gate_up 1536 x 2048, one expert 6,291,456 B; per assignment (1536 + 2048) x 2
 *           = 7,168 B; 2 x 3,145,728 FLOP
 *   experts' down 2048 x 768,    one expert 3,145,728 B; per assignment (2048 + 768) x 2
 *           = 5,632 B; 2 x 1,572,864 FLOP
 * a step of T tokens makes 8 T assignments and reads the weights of
 * U(T) = 128 (1 - (15/16)^T) distinct experts; each GEMM costs
 * max(FLOPs / (989.4e12 x 0.8), bytes / (3.35e12 x 0.8)), x 48 layers. */
static double hand_gemm_s(double T)
{
	const double sf = 1.0 / (989.4e12 * 0.8), sb = 1.0 / (3.35e12 * 0.8);
	double u = 128.0 * (1.0 - pow(15.0 / 16.0, T)), a = 8.0 * T;
	double tc[5] = {
		2.0 * 10485760.0 * T * sf, 2.0 * 8388608.0 * T * sf, 2.0 * 262144.0 * T * sf,
		2.0 * 3145728.0 * a * sf, 2.0 * 1572864.0 * a * sf,
	};
	double tm[5] = {
		(20971520.0 + 14336.0 * T) * sb, (16777216.0 + 12288.0 * T) * sb,
		(524288.0 + 4352.0 * T) * sb,
		(6291456.0 * u + 7168.0 * a) * sb, (3145728.0 * u + 5632.0 * a) * sb,
	};
	double t = 0.0;

	for (int g = 0; g < 5; g++)
		t += tc[g] > tm[g] ? tc[g] : tm[g];
	return 48.0 * t;
}

START_TEST(decode_step_hand_computed)
{
	struct cost_model *cm = make("roofline:kernel_us=0", "qwen3-30b-a3b", SS_DTYPE_MODEL);
	/* batch 1: 8 experts; weights 48 x (37,748,736 + 524,288 + 8 x
	 * 9,437,184) = 5,460,983,808 B plus activations, all memory-bound */
	double b1 = (double)step(cm, 1, 1, 1000).op_ns[COST_OP_GEMM];
	double b64 = (double)step(cm, 64, 1, 1000).op_ns[COST_OP_GEMM];
	double pf = (double)step(cm, 1, 16384, 0).op_ns[COST_OP_GEMM];

	ck_assert_double_eq_tol(b1, hand_gemm_s(1) * 1e9, 1.0);
	ck_assert_double_eq_tol(hand_gemm_s(1),
				(5460983808.0 + 48.0 * (14336 + 12288 + 4352 + 8 * (7168 + 5632))) /
				(3.35e12 * 0.8), 1e-12);
	/* batch 64: 125.94 of the 128 experts read, about 10.8x the bytes of
	 * batch 1 (not 16x: the attention weights are read once either way) */
	ck_assert_double_eq_tol(b64, hand_gemm_s(64) * 1e9, 1.0);
	ck_assert_msg(b64 > 10.5 * b1 && b64 < 11.1 * b1, "b64/b1 %.3f", b64 / b1);
	/* 16384 prefill tokens: compute-bound but for the router */
	ck_assert_double_eq_tol(pf, hand_gemm_s(16384) * 1e9, 1.0);
	cost_model_free(cm);
}
END_TEST

/* FLOPs = 2 x active parameters per token: the layers' active linear
 * weights (attention, router, 8 experts) are the active parameters less
 * embeddings, LM head and norms (2 x 151936 x 2048 + 48 x 4352 + 2048);
 * at 16384 tokens every GEMM but the router is compute-bound, so the
 * GEMM operator is 2 T x those weights at the FLOP rate plus the
 * router's memory time. */
START_TEST(flops_are_twice_active_params)
{
	const struct model_spec *m = catalog_model(&cat, "qwen3-30b-a3b");
	struct cost_model *cm = make("roofline:kernel_us=0", "qwen3-30b-a3b", SS_DTYPE_MODEL);
	double T = 16384.0;
	double lin = model_active_params(m) - (2.0 * 151936 * 2048 + 48.0 * 4352 + 2048);
	double router_w = 48.0 * 262144;
	double want = 2.0 * T * (lin - router_w) / (989.4e12 * 0.8) +
		      48.0 * (524288.0 + 4352.0 * T) / (3.35e12 * 0.8);

	ck_assert_double_eq(lin, 48.0 * (10485760.0 + 8388608.0 + 262144.0 + 8.0 * 4718592.0));
	ck_assert_double_eq_tol((double)step(cm, 1, 16384, 0).op_ns[COST_OP_GEMM], want * 1e9, 1.0);
	cost_model_free(cm);
}
END_TEST

/* Weights 30,532,122,624 x 2 = 61,064,245,248 B; fp8: the linear weights
 * (48 x (18,874,368 attention + 262,144 router + 128 x 4,718,592
 * experts) = 29,909,581,824) at one byte, the other 622,540,800 at two:
 * 31,154,663,424 B.  KV per token 2 x 48 x 4 x 128 x 2 = 98,304 B,
 * 1,572,864 per 16-token block.  One H100 (85,520,809,984 B), 0.9 of it,
 * 4 GiB reserved:
 *   bf16: (76,968,728,985.6 - 61,064,245,248 - 4,294,967,296) / 1,572,864 = 7381.13 -> 7381
 *   fp8 weights and KV: (76,968,728,985.6 - 31,154,663,424 - 4,294,967,296)
 *                       / 786,432 = 52794.26 -> 52794 */
START_TEST(memory_and_kv_capacity_hand_checked)
{
	const struct model_spec *m = catalog_model(&cat, "qwen3-30b-a3b");
	struct engine_config c;
	struct ss_error err = { 0 };
	int32_t blocks;

	ck_assert_double_eq(model_weight_bytes(m), 61064245248.0);
	ck_assert_double_eq(model_linear_params(m), 29909581824.0);
	ck_assert_double_eq(model_weight_bytes_as(m, SS_DTYPE_FP8), 31154663424.0);
	engine_config_defaults(&c);
	c.model = m;
	c.gpu = catalog_gpu(&cat, "h100-sxm");
	c.activation_reserve_bytes = 4294967296.0;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 7381);
	c.weight_dtype = SS_DTYPE_FP8;
	c.kv_dtype = SS_DTYPE_FP8;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 52794);
}
END_TEST

/* TensorRT-LLM's rule (docs/kv-cache.md, "Engine rules"): the KV gets a
 * fraction of what is free after the weights and the reserve.  The same
 * H100 and Qwen3-30B-A3B as above, 4 GiB reserved:
 *   bf16, 0.9 x (85,520,809,984 - 61,064,245,248 - 4,294,967,296) =
 *     18,145,437,696 B: / 1,572,864 = 11,536.6 -> 11,536 blocks of 16
 *     tokens (vLLM's rule: 7,381), / 3,145,728 = 5,768 of 32;
 *   fp8 weights and KV, 0.9 x (85,520,809,984 - 31,154,663,424 -
 *     4,294,967,296) / 786,432 = 57,301.2 -> 57,301;
 *   TP 8 / EP 8 / DP 8 ranks of 1 GPU (10,329,944,064 B of weights each,
 *     all 4 KV heads): 0.9 x (85,520,809,984 - 10,329,944,064 -
 *     4,294,967,296) / 1,572,864 = 40,566.1 -> 40,566 per rank.
 * A profile's rule applies unless an option says otherwise: an explicit
 * gpu_mem_util is vLLM's rule again (0.9: 7,381 x 16 tokens, 3,690 x 32);
 * an explicit block size replaces the profile's. */
START_TEST(kv_free_rule_hand_checked)
{
	struct engine_profile trt;
	struct engine_kv_rule rule;
	struct engine_config c;
	struct ss_error err = { 0 };
	int32_t blocks;

	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "qwen3-30b-a3b");
	c.gpu = catalog_gpu(&cat, "h100-sxm");
	c.activation_reserve_bytes = 4294967296.0;
	c.kv_free_fraction = 0.9;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 11536);
	c.weight_dtype = SS_DTYPE_FP8;
	c.kv_dtype = SS_DTYPE_FP8;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 57301);
	c.weight_dtype = SS_DTYPE_MODEL;
	c.kv_dtype = SS_DTYPE_MODEL;
	c.tp = 8;
	c.ep = 8;
	c.dp_attention = 8;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 40566);
	c.tp = 1;
	c.ep = 0;
	c.dp_attention = 0;

	/* the rule and the block size from a profile */
	memset(&trt, 0, sizeof(trt));
	snprintf(trt.name, sizeof(trt.name), "trt");
	trt.kv_memory = ENGINE_KV_FREE;
	trt.kv_block_size = 32;
	c.engine = &trt;
	c.kv_free_fraction = 0;
	engine_kv_rule_of(&c, &rule);
	ck_assert_int_eq(rule.memory, ENGINE_KV_FREE);
	ck_assert_double_eq(rule.fraction, 0.9);   /* kv_fraction absent: 0.9 */
	ck_assert_str_eq(rule.from, "trt");
	ck_assert_int_eq(engine_block_size(&c), 32);
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 5768);
	/* an explicit gpu_mem_util wins: vLLM's rule, the profile's blocks */
	c.gpu_mem_util = 0.9;
	engine_kv_rule_of(&c, &rule);
	ck_assert_int_eq(rule.memory, ENGINE_KV_TOTAL);
	ck_assert_str_eq(rule.from, "--gpu-memory-utilization");
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 3690);
	c.block_size = 16;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 7381);
	/* without a profile rule or an option: vLLM's at 0.9 */
	c.gpu_mem_util = 0;
	c.engine = NULL;
	engine_kv_rule_of(&c, &rule);
	ck_assert_int_eq(rule.memory, ENGINE_KV_TOTAL);
	ck_assert_double_eq(rule.fraction, 0.9);
	ck_assert_str_eq(rule.from, "default");
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 7381);

	/* a model that does not fit: the error names the rule that sized it */
	c.activation_reserve_bytes = 30e9;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "gpu_memory_utilization, from default"), "%s", err.msg);
	c.kv_free_fraction = 0.9;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "exceeding the GPU's 79.6 GiB (kv_free_fraction 0.9 of what they leave, from --kv-free-fraction)") &&
		      strstr(err.msg, "does not fit"), "%s", err.msg);
	/* 1 MB left, 0.9 MB of it for KV: less than one 1,572,864 B block */
	c.activation_reserve_bytes = 85520809984.0 - 61064245248.0 - 1e6;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "leaving 0.0 GiB of 79.6 GiB free, 90% of which (kv_free_fraction, from --kv-free-fraction) holds less than one KV block"),
		      "%s", err.msg);
	c.engine = &trt;
	c.kv_free_fraction = 0;
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "(kv_free_fraction, from engine trt)"), "%s", err.msg);
}
END_TEST

/* fp8 weights halve the expert bytes a decode step reads. */
START_TEST(fp8_experts)
{
	struct cost_model *b = make("roofline:kernel_us=0", "qwen3-30b-a3b", SS_DTYPE_MODEL);
	struct cost_model *f = make("roofline:kernel_us=0", "qwen3-30b-a3b", SS_DTYPE_FP8);
	double r = (double)step(f, 1, 1, 1000).op_ns[COST_OP_GEMM] /
		   step(b, 1, 1, 1000).op_ns[COST_OP_GEMM];

	ck_assert_msg(r > 0.5 && r < 0.502, "decode GEMM fp8/bf16 %.6f", r);
	cost_model_free(b);
	cost_model_free(f);
}
END_TEST

/* Mixtral-8x7B: 8 experts, 2 per token, no shared ones; at TP 2 a decode
 * of one token reads 2 experts' halves, of 64 nearly all 8. */
START_TEST(mixtral_tp2_distinct)
{
	struct cost_config cfg = {
		.model = catalog_model(&cat, "mixtral-8x7b"), .gpu = catalog_gpu(&cat, "h100-sxm"),
		.tp = 2,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;
	double b1, b64;

	ck_assert_int_eq(cost_model_new(&cm, "roofline:kernel_us=0", &cfg, &err), 0);
	b1 = (double)step(cm, 1, 1, 100).op_ns[COST_OP_GEMM];
	b64 = (double)step(cm, 64, 1, 100).op_ns[COST_OP_GEMM];
	/* expert weights dominate: 64 tokens read about 4x the expert bytes */
	ck_assert_msg(b64 / b1 > 2.5 && b64 / b1 < 4.0, "b64/b1 %.3f", b64 / b1);
	cost_model_free(cm);
}
END_TEST

/* The shipped store has no MoE rows: the table prices an MoE model's
 * GEMM and element-wise operators with its roofline. */
START_TEST(table_leaves_moe_gemms_to_roofline)
{
	char path[600];
	const char *st[1] = { path };
	struct cost_config cfg = {
		.model = catalog_model(&cat, "qwen3-30b-a3b"), .gpu = catalog_gpu(&cat, "h100-sxm"),
		.tp = 1, .stores = st, .n_stores = 1,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/calibration.db", data_dir());
	rc = cost_model_new(&cm, "table", &cfg, &err);
	if (rc == 0) {
		ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_GEMM), "roofline");
		ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_ELEMENTWISE), "roofline");
		cost_model_free(cm);
	} else {
		/* a store without this GPU's shapes refuses as for any model */
		ck_assert_msg(!strstr(err.msg, "mixture"), "%s", err.msg);
	}
	/* the fitted models refuse MoE */
	ck_assert_int_eq(cost_model_new(&cm, "fit", &cfg, &err), -ENOTSUP);
	ck_assert_msg(strstr(err.msg, "mixture-of-experts"), "%s", err.msg);
}
END_TEST

/* MoE with MLA (DeepSeek-V3), sliding windows and sinks (gpt-oss) or
 * chunks (Llama 4) is priced by the roofline; the fitted models, whose
 * fits are of full-attention dense models, refuse it. */
START_TEST(still_refused)
{
	const char *names[] = { "deepseek-v3", "gpt-oss-120b", "gpt-oss-20b", "llama-4-scout" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct model_spec *m = catalog_model(&cat, names[i]);
		/* 16-bit weights: the fit refuses the architecture, not the
		 * checkpoint's FP8 / FP4 (which it refuses too) */
		struct cost_config cfg = { .model = m, .gpu = catalog_gpu(&cat, "h100-sxm"), .tp = 8,
					   .weight_dtype = SS_DTYPE_BF16 };
		struct ss_error err = { 0 };
		struct cost_model *cm = NULL;

		ck_assert_ptr_nonnull(m);
		ck_assert_int_eq(cost_model_new(&cm, "roofline", &cfg, &err), 0);
		cost_model_free(cm);
		cm = NULL;
		ck_assert_int_eq(cost_model_new(&cm, "fit", &cfg, &err), -ENOTSUP);
		ck_assert_ptr_null(cm);
	}
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("moe");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, distinct_experts_edges);
	tcase_add_test(tc, decode_step_hand_computed);
	tcase_add_test(tc, flops_are_twice_active_params);
	tcase_add_test(tc, memory_and_kv_capacity_hand_checked);
	tcase_add_test(tc, kv_free_rule_hand_checked);
	tcase_add_test(tc, fp8_experts);
	tcase_add_test(tc, mixtral_tp2_distinct);
	tcase_add_test(tc, table_leaves_moe_gemms_to_roofline);
	tcase_add_test(tc, still_refused);
	suite_add_tcase(s, tc);
	return s;
}
