/* Attention kinds beyond full GQA (docs/cost-models.md "Local attention"
 * and "Multi-head latent attention", docs/kv-cache.md "Local attention"):
 * the local layers' key counts in closed form, a sliding-window decode
 * step by hand below and beyond the window, a chunked decode step, an MLA
 * decode step's latent bytes by hand, KV bytes per GPU (MLA not divided
 * by tp) and KV capacity hand-checked for DeepSeek-V3, gpt-oss-120b,
 * Llama-4-Scout and Gemma-3-27B, the table model's store check, and what
 * stays refused. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "check-main.h"
#include "config.h"
#include "cost-roofline-int.h"
#include "costmodel.h"
#include "engine.h"
#include "precision.h"

#include "catalog-fixture.h"

/* The hand computations price 16-bit weights: bf16 is asked for, as
 * DeepSeek-V3's and gpt-oss's checkpoints would otherwise be priced at
 * their FP8 and FP4 (model_weights_dtype; tests/test-precision.c). */
static struct cost_model *make(const char *model, const char *gpu, int tp)
{
	struct cost_config cfg = {
		.model = catalog_model(&cat, model), .gpu = catalog_gpu(&cat, gpu), .tp = tp,
		.weight_dtype = SS_DTYPE_BF16,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	ck_assert_ptr_nonnull(cfg.model);
	ck_assert_msg(cost_model_new(&cm, "roofline:kernel_us=0", &cfg, &err) == 0, "%s", err.msg);
	return cm;
}

/* One decode item at context ctx. */
static int64_t decode_ns(struct cost_model *cm, int32_t ctx)
{
	struct cost_item it = { .tokens = 1, .context = ctx };
	struct cost_step st = { .items = &it, .n_items = 1, .n_emit = 1, .total_tokens = 1 };
	struct cost_result r;
	struct ss_error err = { 0 };

	ck_assert_msg(cost_model_predict(cm, &st, &r, &err) == 0, "%s", err.msg);
	return r.op_ns[COST_OP_ATTN_DECODE];
}

/* Keys the local layers keep, closed forms against sums by hand. */
START_TEST(local_key_counts)
{
	/* window 1024, a 2000-token prompt from 0: queries 1..1024 see
	 * 1..1024 keys, the other 976 see 1024: 1024 x 1025 / 2 + 976 x
	 * 1024 = 524,800 + 999,424 = 1,524,224; keys read min(2000, 1024 +
	 * 2000 - 1) = 2000 */
	ck_assert_double_eq(cost_local_pos(0, 2000, 1024, 0), 1524224.0);
	ck_assert_double_eq(cost_local_keys(0, 2000, 1024, 0), 2000.0);
	/* the same chunk after 5000 tokens: every query sees 1024 keys, reads
	 * 1024 + 1999 */
	ck_assert_double_eq(cost_local_pos(5000, 2000, 1024, 0), 2000.0 * 1024);
	ck_assert_double_eq(cost_local_keys(5000, 2000, 1024, 0), 3023.0);
	/* inside the window: the causal sum c p + c (c + 1) / 2 */
	ck_assert_double_eq(cost_local_pos(100, 10, 1024, 0), 10.0 * 100 + 55);
	/* one decode past the window keeps W; before it p + 1 */
	ck_assert_double_eq(cost_local_pos(4000, 1, 1024, 0), 1024.0);
	ck_assert_double_eq(cost_local_pos(500, 1, 1024, 0), 501.0);
	/* chunks of 8192: queries 8000..8399 see 8001..8192 keys (192 of
	 * them: (8001 + 8192) x 192 / 2 = 1,554,528) then 1..208 (208 x 209
	 * / 2 = 21,736): 1,576,264; keys read from 0 (the chunk holding 8000)
	 * to 8399: 8400 */
	ck_assert_double_eq(cost_local_pos(8000, 400, 0, 8192), 1576264.0);
	ck_assert_double_eq(cost_local_keys(8000, 400, 0, 8192), 8400.0);
	/* a decode at 10000: (10000 mod 8192) + 1 = 1809 keys */
	ck_assert_double_eq(cost_local_pos(10000, 1, 0, 8192), 1809.0);
	ck_assert_double_eq(cost_local_keys(10000, 1, 0, 8192), 1809.0);
}
END_TEST

/* Gemma-3-27B on one H100, kernel_us 0: per layer and key 2 x 16 x 128 x
 * 2 = 8192 bytes of K and V, Q read + O written 2 x 32 x 128 x 2 = 16384
 * bytes, memory-bound (4 x 32 x 128 FLOP a key at half of 989.4 TFLOP/s
 * is 33 fs, 8192 B at 0.7 x 3.35 TB/s 3.5 ns).  Decode at context p:
 *   p = 500  (p + 1 <= 1024): 62 layers x (8192 x 501 + 16384) B
 *   p = 4000 (beyond):        10 x (8192 x 4001 + 16384) + 52 x (8192 x 1024 + 16384) B
 * over 0.7 x hbm_bw; 1 ns of rounding. */
START_TEST(sliding_decode_hand_computed)
{
	struct cost_model *cm = make("gemma-3-27b", "h100-sxm", 1);
	const struct gpu_spec *g = catalog_gpu(&cat, "h100-sxm");
	double bw = g->hbm_bw * 0.7;
	double below = 62.0 * (8192.0 * 501 + 16384) / bw;
	double beyond = (10.0 * (8192.0 * 4001 + 16384) + 52.0 * (8192.0 * 1024 + 16384)) / bw;

	ck_assert_int_le(llabs(decode_ns(cm, 500) - llround(below * 1e9)), 1);
	ck_assert_int_le(llabs(decode_ns(cm, 4000) - llround(beyond * 1e9)), 1);
	/* beyond the window the local layers cost the same at any context */
	ck_assert_int_le(llabs((decode_ns(cm, 8000) - decode_ns(cm, 4000)) -
			       llround(10.0 * 8192 * 4000 / bw * 1e9)), 2);
	cost_model_free(cm);
}
END_TEST

/* Llama-4-Scout at tp 4 on H100: 2 KV heads a GPU, 2 x 2 x 128 x 2 =
 * 1024 B a key, Q + O 2 x 10 x 128 x 2 = 5120 B; a decode at 10000
 * reads 10001 keys in the 12 full layers and 1809 in the 36 chunked ones. */
START_TEST(chunked_decode_hand_computed)
{
	struct cost_model *cm = make("llama-4-scout", "h100-sxm", 4);
	const struct gpu_spec *g = catalog_gpu(&cat, "h100-sxm");
	double bw = g->hbm_bw * 0.7;
	double want = (12.0 * (1024.0 * 10001 + 5120) + 36.0 * (1024.0 * 1809 + 5120)) / bw;

	ck_assert_int_le(llabs(decode_ns(cm, 10000) - llround(want * 1e9)), 1);
	cost_model_free(cm);
}
END_TEST

/* DeepSeek-V3 at tp 8 on H100: 16 heads a GPU; the latent is whole on
 * every GPU.  A decode at context 4095 (4096 keys), per layer:
 *   W_UK absorb: 16 x 512 x 128 x 2 = 2,097,152 B of weights + 16 x
 *     (128 + 512) x 2 = 20,480 B of rows, at 0.8 x hbm_bw
 *   attention:   (512 + 64) x 2 = 1152 B of latent a key: 4,718,592 B,
 *     + the absorbed Q read and latent O written, 16 x (576 + 512) x 2 =
 *     34,816 B, at 0.7 x hbm_bw (16 x (2 x 576 + 2 x 512) x 4096 =
 *     142.6 MFLOP at half of 989.4 TFLOP/s: 0.29 us, memory-bound)
 *   W_UV:        as W_UK (v_head_dim 128 = qk_nope_head_dim)
 * times 61 layers; 1 ns of rounding. */
START_TEST(mla_decode_hand_computed)
{
	struct cost_model *cm = make("deepseek-v3", "h100-sxm", 8);
	const struct gpu_spec *g = catalog_gpu(&cat, "h100-sxm");
	double bmm = (2097152.0 + 20480.0) / (g->hbm_bw * 0.8);
	double att = (4718592.0 + 34816.0) / (g->hbm_bw * 0.7);
	double want = 61.0 * (bmm + att + bmm);
	struct engine_config c;

	ck_assert_int_le(llabs(decode_ns(cm, 4095) - llround(want * 1e9)), 1);
	cost_model_free(cm);
	/* KV bytes a token on one GPU: 61 x 576 x 2 = 70,272 at any tp */
	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "deepseek-v3");
	c.tp = 1;
	ck_assert_double_eq(engine_kv_token_bytes_gpu(&c), 70272.0);
	c.tp = 8;
	ck_assert_double_eq(engine_kv_token_bytes_gpu(&c), 70272.0);
	c.kv_dtype = SS_DTYPE_FP8;
	ck_assert_double_eq(engine_kv_token_bytes_gpu(&c), 35136.0);
}
END_TEST

/* DeepSeek-V3 at tp 8 on H100, a 1024-token prefill from 0, per layer:
 *   kv_b up-projection of the 1024 keys' latent: 2 x 16 x (128 + 128) x
 *     512 x 1024 = 4,294,967,296 FLOP at 0.8 x bf16; weights 16 x 256 x
 *     512 x 2 = 4,194,304 B + 1024 x (16 x 256 + 512) x 2 = 9,437,184 B
 *     of rows at 0.8 x hbm_bw
 *   attention, head dims 128 + 64 (Q/K) and 128 (V): 1024 x 1025 / 2 =
 *     524,800 key positions x 2 x 16 x 320 = 5,373,952,000 FLOP at 0.5 x
 *     bf16; 1024 x 16 x 320 x 2 B of K and V and as much of Q and O at
 *     0.8 x hbm_bw
 * each max(compute, memory), times 61 layers. */
START_TEST(mla_prefill_hand_computed)
{
	struct cost_model *cm = make("deepseek-v3", "h100-sxm", 8);
	const struct gpu_spec *g = catalog_gpu(&cat, "h100-sxm");
	struct cost_item it = { .tokens = 1024, .context = 0 };
	struct cost_step st = { .items = &it, .n_items = 1, .n_prefill = 1, .n_emit = 1,
				.total_tokens = 1024 };
	struct cost_result r;
	struct ss_error err = { 0 };
	double up = fmax(4294967296.0 / (g->bf16_flops * 0.8),
			 (4194304.0 + 9437184.0) / (g->hbm_bw * 0.8));
	double att = fmax(5373952000.0 / (g->bf16_flops * 0.5),
			  2.0 * 1024 * 16 * 320 * 2 / (g->hbm_bw * 0.8));

	ck_assert_msg(cost_model_predict(cm, &st, &r, &err) == 0, "%s", err.msg);
	ck_assert_int_le(llabs(r.op_ns[COST_OP_ATTN_PREFILL] - llround(61.0 * (up + att) * 1e9)), 1);
	cost_model_free(cm);
}
END_TEST

static int32_t capacity(const char *model, const char *gpu, int tp, enum ss_dtype w,
			int32_t ref)
{
	struct engine_config c;
	struct ss_error err = { 0 };
	int32_t blocks = 0;

	engine_config_defaults(&c);
	c.model = catalog_model(&cat, model);
	c.gpu = catalog_gpu(&cat, gpu);
	c.tp = tp;
	c.weight_dtype = w;
	c.kv_ref_tokens = ref;
	c.activation_reserve_bytes = 4294967296.0;
	ck_assert_msg(engine_kv_capacity(&c, &blocks, &err) == 0, "%s", err.msg);
	return blocks;
}

/* KV capacity, 0.9 of the GPU, 4 GiB reserved, 16-token blocks:
 *
 * DeepSeek-V3, 8 x B200 (192,265,846,784 B), fp8 weights: linear weights
 *   3 x (187,105,280 attention + 3 x 7168 x 18432) + 58 x (187,105,280 +
 *   7168 x 256 router + 257 x 3 x 7168 x 2048 experts) = 669,172,039,680
 *   at 1 B, the other 1,854,379,520 at 2: 672,880,798,720 B, 84,110,099,840
 *   a GPU; free 173,039,262,105.6 - 84,110,099,840 - 4,294,967,296 =
 *   84,634,194,969.6 B; a block 16 x 70,272 = 1,124,352 B: 75273.75 -> 75273.
 * gpt-oss-120b, 2 x H100, fp4 weights (0.5625 B): linear 36 x ((64 + 16) x
 *   64 x 2880 + 64 x 64 x 2880 + 2880 x 128 + 128 x 3 x 2880^2) =
 *   115,630,571,520 at 0.5625, the other 1,198,585,152 at 2:
 *   67,439,366,784 B, 33,719,683,392 a GPU; free 38,954,078,297.6 B.  KV:
 *   4 KV heads a GPU, 2 x 4 x 64 x 2 = 1024 B a layer; at the reference
 *   length 131,072 (max_context) a token costs 1024 x (18 x 131072 + 18 x
 *   min(131072, 128 + 16)) / 131072 = 18,452.25 B: 131942.17 -> 131942.
 * Llama-4-Scout, 4 x H100, bf16: 215,539,722,240 / 4 = 53,884,930,560 B;
 *   free 18,788,831,129.6; 1024 B a layer, 1024 x (12 + 36 x 8192 /
 *   10,485,760) = 12,316.8 B a token: 95341.48 -> 95341.
 * Gemma-3-27B, 1 x H100, bf16: 54,018,692,608 B; free 18,655,069,081.6;
 *   8192 B a layer; at reference 8192 tokens 10 x 8192 + 52 x 1040 =
 *   136,000 B a token: 8573.10 -> 8573; at 131,072: 8192 x (10 x 131072 +
 *   52 x 1040) / 131072 = 85,300 B: 13668.72 -> 13668; all 62 layers full
 *   would be 507,904 B: 2295. */
START_TEST(kv_capacity_hand_checked)
{
	ck_assert_double_eq(model_linear_params(catalog_model(&cat, "deepseek-v3")),
			    669172039680.0);
	ck_assert_double_eq(model_weight_bytes_as(catalog_model(&cat, "deepseek-v3"),
						  SS_DTYPE_FP8), 672880798720.0);
	ck_assert_int_eq(capacity("deepseek-v3", "b200", 8, SS_DTYPE_FP8, 0), 75273);
	ck_assert_double_eq(model_weight_bytes_as(catalog_model(&cat, "gpt-oss-120b"),
						  SS_DTYPE_FP4), 67439366784.0);
	ck_assert_int_eq(capacity("gpt-oss-120b", "h100-sxm", 2, SS_DTYPE_FP4, 0), 131942);
	ck_assert_int_eq(capacity("llama-4-scout", "h100-sxm", 4, SS_DTYPE_MODEL, 0), 95341);
	ck_assert_int_eq(capacity("gemma-3-27b", "h100-sxm", 1, SS_DTYPE_MODEL, 8192), 8573);
	ck_assert_int_eq(capacity("gemma-3-27b", "h100-sxm", 1, SS_DTYPE_MODEL, 0), 13668);
	/* a reference inside the window charges every layer in full */
	ck_assert_int_eq(capacity("gemma-3-27b", "h100-sxm", 1, SS_DTYPE_MODEL, 1000), 2295);
}
END_TEST

/* Dense full-attention models are unchanged: their KV bytes a token are
 * K and V of every layer over the GPU's KV heads. */
START_TEST(dense_kv_unchanged)
{
	struct engine_config c;

	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "llama-3.1-70b");
	c.tp = 4;
	c.kv_ref_tokens = 100;   /* unused without local layers */
	/* 2 x 80 x 2 x 128 x 2 */
	ck_assert_double_eq(engine_kv_token_bytes_gpu(&c), 81920.0);
}
END_TEST

/* The table model's stores hold GQA attention only: covers says so. */
START_TEST(table_store_check)
{
	const char *stores[] = { "unused.db" };
	char why[256];

	ck_assert(!cost_store_covers(stores, 1, catalog_model(&cat, "gemma-3-27b"),
				     catalog_gpu(&cat, "h100-sxm"), 1, why, sizeof(why)));
	ck_assert_msg(strstr(why, "sliding-window attention has no measured rows"), "%s", why);
	ck_assert(!cost_store_covers(stores, 1, catalog_model(&cat, "deepseek-v3"),
				     catalog_gpu(&cat, "h100-sxm"), 8, why, sizeof(why)));
	ck_assert_msg(strstr(why, "multi-head latent attention has no measured rows"), "%s", why);
}
END_TEST

/* MLA with local layers stays refused by every deployment; the fitted
 * models refuse local attention and MLA. */
START_TEST(refusals)
{
	struct model_spec m = *catalog_model(&cat, "deepseek-v3");
	struct cost_config cfg = { .model = &m, .gpu = catalog_gpu(&cat, "h100-sxm"), .tp = 8 };
	struct engine_config c;
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;
	struct engine *e = NULL;

	m.sliding_window = 4096;
	ck_assert_int_eq(cost_model_new(&cm, "roofline", &cfg, &err), -ENOTSUP);
	ck_assert_str_eq(err.msg, "deepseek-v3: multi-head latent attention with local attention "
			 "cost is not modelled yet (issue 12)");
	engine_config_defaults(&c);
	c.model = &m;
	c.gpu = cfg.gpu;
	c.tp = 8;
	ck_assert_int_eq(engine_new(&e, &c, NULL, &err), -ENOTSUP);
	ck_assert_ptr_null(e);
	cfg.model = catalog_model(&cat, "gemma-3-27b");
	cfg.tp = 1;
	ck_assert_int_eq(cost_model_new(&cm, "fit", &cfg, &err), -ENOTSUP);
	ck_assert_msg(strstr(err.msg, "gemma-3-27b: sliding-window attention is not modelled by "
			     "this cost model"), "%s", err.msg);
	ck_assert_int_eq(cost_model_new(&cm, "distserve", &cfg, &err), -ENOTSUP);
	ck_assert_ptr_null(cm);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("attn");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, local_key_counts);
	tcase_add_test(tc, sliding_decode_hand_computed);
	tcase_add_test(tc, chunked_decode_hand_computed);
	tcase_add_test(tc, mla_decode_hand_computed);
	tcase_add_test(tc, mla_prefill_hand_computed);
	tcase_add_test(tc, kv_capacity_hand_checked);
	tcase_add_test(tc, dense_kv_unchanged);
	tcase_add_test(tc, table_store_check);
	tcase_add_test(tc, refusals);
	suite_add_tcase(s, tc);
	return s;
}
