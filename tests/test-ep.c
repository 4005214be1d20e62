/* Expert parallelism and data-parallel attention (docs/cost-models.md
 * "Expert parallelism and data-parallel attention"): a hand-computed
 * Qwen3-30B-A3B decode step on 8 H100s at EP 8 with 8 attention ranks
 * (all-to-all bytes and time, the experts' GEMMs), the same step at a
 * lock-step group's MoE tokens, EP without DP priced as TP, the
 * imbalance factor, weight memory and KV capacity per attention rank by
 * hand, the GPUs and cost an engine with DP attention counts, the
 * attention ranks in lock-step (a hand-timed two-rank run through a
 * recording executor), and the layouts refused. */
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
#include "engine-profile.h"
#include "executor.h"
#include "precision.h"
#include "workload.h"

#include "catalog-fixture.h"

static struct cost_model *make(const char *spec, int tp, int ep, int dp)
{
	struct cost_config cfg = {
		.model = catalog_model(&cat, "qwen3-30b-a3b"), .gpu = catalog_gpu(&cat, "h100-sxm"),
		.tp = tp, .ep = ep, .dp_attention = dp,
	};
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL;

	ck_assert_ptr_nonnull(cfg.model);
	ck_assert_msg(cost_model_new(&cm, spec, &cfg, &err) == 0, "%s: %s", spec, err.msg);
	return cm;
}

/* A step of n decodes at context ctx each, whose lock-step group's MoE
 * layers carry group tokens (0: not given, symmetric load). */
static struct cost_result decode_group(struct cost_model *cm, int n, int32_t ctx, int64_t group)
{
	struct cost_item it[64];
	struct cost_step s = { .items = it, .n_items = (uint32_t)n, .n_emit = (uint32_t)n,
			       .group_tokens = group };
	struct cost_result r;
	struct ss_error err = { 0 };

	ck_assert_int_le(n, 64);
	for (int i = 0; i < n; i++)
		it[i] = (struct cost_item){ .tokens = 1, .context = ctx };
	s.total_tokens = n;
	ck_assert_msg(cost_model_predict(cm, &s, &r, &err) == 0, "%s", err.msg);
	return r;
}

static struct cost_result decode(struct cost_model *cm, int n, int32_t ctx)
{
	return decode_group(cm, n, ctx, 0);
}

/* Qwen3-30B-A3B (hidden 2048, 48 layers all MoE, 128 experts of width
 * 768, k = 8, 32 heads / 4 KV heads of 128) on H100s, one attention rank
 * of 1 GPU (tp 8, dp 8: A = 1), EP 8 (16 experts per GPU, whole):
 *   GEMMs per layer at the rank's T tokens, as on one GPU (test-moe.c):
 *     QKV 10,485,760 params, O 8,388,608, router 262,144;
 *   the MoE layers see D T = 8 T tokens: 8 T x 8 / 8 = 8 T assignments on
 *     this GPU and U = 128 (1 - (15/16)^(8T)) / 8 distinct experts read,
 *     each 6,291,456 B (gate_up) + 3,145,728 B (down);
 *   all-to-all: rows 8 x 8 / 8 = 8 per rank token, (8 - 1) / 8 of them
 *     off the GPU, 2048 x 2 B each, both ways: 8 x 7/8 x 4096 x 2 =
 *     57,344 B per token per layer, over NVLink (450e9 x 0.6 B/s);
 *     96 collectives (dispatch, combine per layer) + the LM head's 1,
 *     5 us each; no all-reduce (one GPU per rank). */
static double hand_gemm_group_s(double T, double G)
{
	const double sf = 1.0 / (989.4e12 * 0.8), sb = 1.0 / (3.35e12 * 0.8);
	double u = 128.0 * (1.0 - pow(15.0 / 16.0, G)) / 8.0, a = G;
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

/* The rank's T tokens under symmetric load: the MoE layers see 8 T. */
static double hand_gemm_s(double T)
{
	return hand_gemm_group_s(T, 8.0 * T);
}

START_TEST(ep_dp_decode_step_hand_computed)
{
	struct cost_model *cm = make("roofline:kernel_us=0", 8, 8, 8);
	struct cost_result r4 = decode(cm, 4, 1000), r32 = decode(cm, 32, 1000);
	double a2a_bytes_per_tok = 48.0 * 2.0 * 8.0 * 7.0 / 8.0 * 2048.0 * 2.0;

	ck_assert_double_eq(a2a_bytes_per_tok, 2752512.0);
	/* 4 tokens: 11,010,048 B over 270 GB/s = 40.78 us, + 97 x 5 us */
	ck_assert_double_eq_tol((double)r4.op_ns[COST_OP_ALLREDUCE],
				(4.0 * a2a_bytes_per_tok / (450e9 * 0.6) + 97.0 * 5e-6) * 1e9, 1.0);
	ck_assert_double_eq_tol((double)r32.op_ns[COST_OP_ALLREDUCE],
				(32.0 * a2a_bytes_per_tok / (450e9 * 0.6) + 97.0 * 5e-6) * 1e9, 1.0);
	ck_assert_double_eq_tol((double)r4.op_ns[COST_OP_GEMM], hand_gemm_s(4) * 1e9, 1.0);
	ck_assert_double_eq_tol((double)r32.op_ns[COST_OP_GEMM], hand_gemm_s(32) * 1e9, 1.0);
	cost_model_free(cm);
}
END_TEST

/* The same rank's 4 decodes in a lock-step group whose 8 ranks carry 12
 * tokens in all (cost_step.group_tokens; the engine sums them): the
 * rank's own GEMMs (QKV, O, router) stay at T = 4, the experts' at G = 12
 * assignments on this GPU (12 x 8 / 8) and 128 (1 - (15/16)^12) / 8
 * distinct experts; the all-to-all moves 12 x 344,064 B (a MoE token's
 * 48 x 2 x 8 / 8 x 7/8 x 4096 B); a group of 8 x 4 tokens is the
 * symmetric load, the price without group_tokens. */
START_TEST(dp_group_tokens_price_the_moe_layers)
{
	struct cost_model *cm = make("roofline:kernel_us=0", 8, 8, 8);
	struct cost_result g12 = decode_group(cm, 4, 1000, 12), sym = decode(cm, 4, 1000);
	struct cost_result g32 = decode_group(cm, 4, 1000, 32);

	ck_assert_double_eq_tol((double)g12.op_ns[COST_OP_ALLREDUCE],
				(12.0 * 344064.0 / (450e9 * 0.6) + 97.0 * 5e-6) * 1e9, 1.0);
	ck_assert_double_eq_tol((double)g12.op_ns[COST_OP_GEMM], hand_gemm_group_s(4, 12) * 1e9, 1.0);
	ck_assert_int_lt(g12.duration_ns, sym.duration_ns);
	/* the attention is the rank's alone */
	ck_assert_int_eq(g12.op_ns[COST_OP_ATTN_DECODE], sym.op_ns[COST_OP_ATTN_DECODE]);
	for (int op = 0; op < COST_OP_COUNT; op++)
		ck_assert_double_eq_tol((double)g32.op_ns[op], (double)sym.op_ns[op], 1.0);
	cost_model_free(cm);
}
END_TEST

/* EP without DP attention: every GPU holds every token, so a GPU computes
 * its 16 experts' share of the assignments and one all-reduce sums them,
 * as under TP: the same weight bytes and FLOPs per GPU when balanced.  An
 * imbalance of 1.5 (the busiest GPU's load over the mean) makes the
 * expert GEMMs slower. */
START_TEST(ep_alone_is_tp_when_balanced)
{
	struct cost_model *tp = make("roofline", 8, 1, 1);
	struct cost_model *ep = make("roofline", 8, 8, 1);
	struct cost_model *skew = make("roofline:expert_imbalance=1.5", 8, 8, 1);

	for (int n = 1; n <= 64; n *= 4) {
		struct cost_result a = decode(tp, n, 500), b = decode(ep, n, 500);
		struct cost_result c = decode(skew, n, 500);

		ck_assert_int_eq(a.op_ns[COST_OP_ALLREDUCE], b.op_ns[COST_OP_ALLREDUCE]);
		ck_assert_int_eq(a.op_ns[COST_OP_ATTN_DECODE], b.op_ns[COST_OP_ATTN_DECODE]);
		/* the same weight bytes and FLOPs; EP reads fewer activation (2% at 64)
		 * rows (its k / 8 assignments at full width, not k at 1/8) */
		ck_assert_int_le(b.op_ns[COST_OP_GEMM], a.op_ns[COST_OP_GEMM]);
		ck_assert_double_eq_tol((double)a.op_ns[COST_OP_GEMM], (double)b.op_ns[COST_OP_GEMM],
					0.05 * (double)a.op_ns[COST_OP_GEMM]);
		ck_assert_int_gt(c.op_ns[COST_OP_GEMM], b.op_ns[COST_OP_GEMM]);
	}
	cost_model_free(tp);
	cost_model_free(ep);
	cost_model_free(skew);
}
END_TEST

/* DP attention's energy is one rank's GPUs': a step's idle share is
 * idle_w x tp / D. */
START_TEST(dp_rank_energy_is_its_gpus)
{
	struct cost_model *cm = make("roofline", 8, 8, 8);
	const struct gpu_spec *g = catalog_gpu(&cat, "h100-sxm");
	struct cost_result r = decode(cm, 8, 100);
	double idle = g->idle_w * 1.0 * (double)r.duration_ns * 1e-9;
	double full = g->tdp_w * 1.0 * (double)r.duration_ns * 1e-9;

	ck_assert_msg(r.energy_j > idle && r.energy_j < full, "energy %g J not within one GPU's %g..%g",
		      r.energy_j, idle, full);
	cost_model_free(cm);
}
END_TEST

/* Qwen3-30B-A3B bf16 on 8 H100s, 0.9 of 85,520,809,984 B = 76,968,728,985.6
 * B usable, 4 GiB reserved.  Weights 61,064,245,248 B, of which routed
 * experts 48 x 128 x 3 x 2048 x 768 x 2 = 57,982,058,496 B.
 *   TP 8 (any EP): 61,064,245,248 / 8 = 7,633,030,656 B per GPU; 4 KV heads
 *     on 8 GPUs: one replicated per GPU, 2 x 48 x 128 x 2 = 24,576 B per
 *     token, 393,216 per block: (76,968,728,985.6 - 7,633,030,656 -
 *     4,294,967,296) / 393,216 = 165,407.13 -> 165,407 blocks per instance.
 *   TP 8, EP 8, DP 8 (ranks of 1 GPU): 3,082,186,752 B of attention,
 *     router, embeddings and LM head whole on each GPU + 57,982,058,496 / 8
 *     = 7,247,757,312 B of experts = 10,329,944,064 B; all 4 KV heads:
 *     98,304 B per token, 1,572,864 per block: (76,968,728,985.6 -
 *     10,329,944,064 - 4,294,967,296) / 1,572,864 = 39,637.13 -> 39,637
 *     blocks per rank, 8 ranks: 317,096 blocks (x 16 tokens) per instance,
 *     1.92x TP 8's, which stores every KV head twice. */
START_TEST(memory_and_kv_per_rank_hand_checked)
{
	struct engine_config c;
	struct ss_error err = { 0 };
	int32_t blocks;

	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "qwen3-30b-a3b");
	c.gpu = catalog_gpu(&cat, "h100-sxm");
	c.activation_reserve_bytes = 4294967296.0;
	c.tp = 8;
	ck_assert_double_eq(engine_weight_bytes_per_gpu(&c), 7633030656.0);
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 165407);
	c.ep = 8;
	ck_assert_double_eq(engine_weight_bytes_per_gpu(&c), 7633030656.0);
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 165407);
	c.dp_attention = 8;
	ck_assert_double_eq(engine_weight_bytes_per_gpu(&c), 10329944064.0);
	ck_assert_int_eq(engine_kv_capacity(&c, &blocks, &err), 0);
	ck_assert_int_eq(blocks, 39637);
}
END_TEST

/* An engine with 2 instances of TP 4 at DP attention 4 schedules 8 ranks
 * of 1 GPU: 8 GPUs, 8 x the GPU's price, and every rank takes arrivals
 * (the router spreads them). */
START_TEST(dp_counts_gpus_and_spreads_arrivals)
{
	struct engine_config c;
	struct workload wl;
	struct workload_spec ws;
	struct engine *e = NULL;
	struct engine_results res;
	struct ss_error err = { 0 };
	const struct gpu_spec *g = catalog_gpu(&cat, "h100-sxm");
	int gpus = 0;
	double usd = 0.0;

	memset(&ws, 0, sizeof(ws));
	ws.rate_scale = 1.0;
	ws.arrival = "poisson:rate=20";
	ws.lengths = "fixed:prompt=200,output=20";
	ws.num_requests = 64;
	workload_init(&wl);
	ck_assert_msg(workload_build(&wl, &ws, &err) == 0, "%s", err.msg);
	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "qwen3-30b-a3b");
	c.gpu = g;
	c.tp = 4;
	c.ep = 4;
	c.dp_attention = 4;
	c.n_instances = 2;
	c.cost_model = "roofline";
	ck_assert_msg(engine_new(&e, &c, &wl, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(engine_run(e, &err), 0);
	engine_results(e, &res);
	ck_assert_uint_eq(res.n_instances, 8);
	for (uint32_t i = 0; i < res.n_instances; i++) {
		gpus += res.inst[i].gpus;
		usd += res.inst[i].cost_per_hour;
		ck_assert_uint_gt(res.inst[i].steps, 0);
	}
	ck_assert_int_eq(gpus, 8);
	ck_assert_double_eq_tol(usd, 8.0 * g->cost_per_hour, 1e-9);
	engine_free(e);
	workload_release(&wl);
}
END_TEST

/* The table with EP 8 and 8 attention ranks of 1 GPU: its measured
 * decode attention is a 1-GPU instance's (tp 1 table, not tp 8's), and
 * the collectives are the roofline's (the stores have no all-to-all). */
START_TEST(table_prices_a_rank)
{
	char path[600];
	const char *st[1] = { path };
	struct cost_config cfg = {
		.model = catalog_model(&cat, "qwen3-30b-a3b"), .gpu = catalog_gpu(&cat, "h100-sxm"),
		.tp = 8, .ep = 8, .dp_attention = 8, .stores = st, .n_stores = 1,
	};
	struct cost_config one = cfg;
	struct ss_error err = { 0 };
	struct cost_model *cm = NULL, *c1 = NULL;

	snprintf(path, sizeof(path), "%s/calibration.db", data_dir());
	one.tp = 1;
	one.ep = one.dp_attention = 0;
	ck_assert_msg(cost_model_new(&cm, "table", &cfg, &err) == 0, "%s", err.msg);
	ck_assert_msg(cost_model_new(&c1, "table", &one, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_ALLREDUCE), "roofline");
	ck_assert_str_eq(cost_model_op_backend(cm, COST_OP_ATTN_DECODE), "table");
	ck_assert_int_eq(decode(cm, 16, 2000).op_ns[COST_OP_ATTN_DECODE],
			 decode(c1, 16, 2000).op_ns[COST_OP_ATTN_DECODE]);
	ck_assert_int_gt(decode(cm, 16, 2000).op_ns[COST_OP_ALLREDUCE], 0);
	/* the imbalance reaches the table's roofline: the busiest GPU's
	 * expert GEMMs and all-to-all grow */
	cost_model_free(c1);
	ck_assert_msg(cost_model_new(&c1, "table:expert_imbalance=2", &cfg, &err) == 0, "%s", err.msg);
	ck_assert_int_gt(decode(c1, 64, 2000).op_ns[COST_OP_GEMM],
			 decode(cm, 64, 2000).op_ns[COST_OP_GEMM]);
	ck_assert_int_gt(decode(c1, 64, 2000).op_ns[COST_OP_ALLREDUCE],
			 decode(cm, 64, 2000).op_ns[COST_OP_ALLREDUCE]);
	cost_model_free(cm);
	cost_model_free(c1);
	/* without expert parallelism there is no imbalance to set */
	cfg.ep = 1;
	ck_assert_int_eq(cost_model_new(&cm, "roofline:expert_imbalance=1.5", &cfg, &err), -EINVAL);
}
END_TEST

/* ---- attention ranks in lock-step (sim/step-dp.c) ----
 *
 * A recording executor times every step by hand: 1,000 ns per token of
 * the rank's own step, 10 ns per token its group's MoE layers carry
 * (exec_step.group_tokens), 100 ns a step; it draws 100 W. */
#define REC_MAX 128
struct rec_step {
	int32_t inst;
	int64_t tokens, group, start;
};
struct rec_exec {
	uint32_t n;
	struct rec_step s[REC_MAX];
};

static int rec_init(void *priv, struct cost_model *cm, struct ss_error *err)
{
	(void)priv, (void)cm, (void)err;
	return 0;
}

static int rec_run(void *priv, const struct exec_step *st, struct exec_result *out,
		   struct ss_error *err)
{
	struct rec_exec *x = priv;

	(void)err;
	ck_assert_uint_lt(x->n, REC_MAX);
	x->s[x->n++] = (struct rec_step){ st->instance, st->total_tokens, st->group_tokens,
					  st->start_ns };
	memset(out, 0, sizeof(*out));
	out->duration_ns = 1000 * st->total_tokens + 10 * st->group_tokens + 100;
	out->op_ns[COST_OP_GEMM] = out->duration_ns;
	out->energy_j = 100.0 * (double)out->duration_ns * 1e-9;
	return 0;
}

static const struct executor_ops rec_ops = {
	.version = EXECUTOR_VERSION, .name = "recording", .priv_size = sizeof(struct rec_exec),
	.init = rec_init, .run_step = rec_run,
};

/* 2 layers of 4 experts (2 active per token) on 50 W idle GPUs. */
static const struct model_spec tiny_moe = {
	.name = "tiny-moe", .n_layers = 2, .hidden = 256, .n_heads = 4, .n_kv_heads = 4,
	.head_dim = 64, .intermediate = 512, .vocab = 1000, .max_context = 4096,
	.mlp = MLP_GATED, .dtype_bytes = 2, .n_experts = 4, .experts_per_token = 2,
	.moe_intermediate = 128,
};
static const struct gpu_spec tiny_gpu = {
	.name = "test-gpu", .bf16_flops = 100e12, .hbm_bytes = 16e9, .hbm_bw = 1e12,
	.nvlink_bw = 100e9, .pcie_bw = 16e9, .tdp_w = 300, .idle_w = 50,
};

/* Run the n requests reqs (routed round robin: rank k % 2) on one
 * instance of 2 GPUs, EP 2, with dp attention ranks (0: none) and engine
 * profile p (NULL: none), through the recording executor. */
static struct engine *run_reqs(struct wl_request *reqs, size_t n, int dp,
			       const struct engine_profile *p, struct rec_exec *x)
{
	static struct workload wl;
	struct engine_config c;
	struct engine *e = NULL;
	struct ss_error err = { 0 };

	workload_init(&wl);
	wl.req = reqs;
	wl.n = n;
	wl.has_arrivals = true;
	engine_config_defaults(&c);
	c.model = &tiny_moe;
	c.gpu = &tiny_gpu;
	c.tp = 2;
	c.ep = 2;
	c.dp_attention = dp;
	c.cost_model = "constant";
	c.kv_blocks_override = 1000;
	c.executor = &rec_ops;
	c.exec_priv = x;
	c.engine = p;
	memset(x, 0, sizeof(*x));
	ck_assert_msg(engine_new(&e, &c, &wl, &err) == 0 && engine_run(e, &err) == 0, "%s",
		      err.msg);
	return e;
}

/* B (prompt 10, output 4, at 0: rank 0) and A (prompt 100, output 2, at
 * 5 us: rank 1). */
static struct engine *run_two(int dp, struct rec_exec *x)
{
	static struct wl_request reqs[2] = {
		{ .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 4 },
		{ .arrival_ns = 5000, .prompt_tokens = 100, .output_tokens = 2 },
	};

	return run_reqs(reqs, 2, dp, NULL, x);
}

/* Two ranks: B prefills alone (rank 1 has nothing: an idle batch of one
 * token joins), then A's 100-token prefill on rank 1 holds B's decode on
 * rank 0, then both decode, then B alone (rank 1 idle again):
 *   step 1 at 0:       rank 0 10 tokens, rank 1 idle 1, group 10:
 *                      10,200 and 1,200 ns -> 10,200 (B's first token);
 *   step 2 at 10,200:  rank 0 1, rank 1 100, group 101: 2,110 and
 *                      101,110 -> 101,110, ends 111,310 (A's first token,
 *                      TTFT 106,310; B's ITL 101,110, not 2,110);
 *   step 3 at 111,310: 1 and 1, group 2: 1,120 -> 112,430 (A finishes);
 *   step 4 at 112,430: rank 0 1, rank 1 idle 1, group 1: 1,110 ->
 *                      113,540 (B finishes).
 * Each rank's waits (rank 0: 99,000 ns in step 2; rank 1: 9,000 in step
 * 1) are all-reduce time at idle power, 50 W x 1 GPU. */
START_TEST(dp_ranks_step_in_lock_step)
{
	static const struct rec_step want[8] = {
		{ 0, 10, 10, 0 }, { 1, 1, 10, 0 },
		{ 0, 1, 101, 10200 }, { 1, 100, 101, 10200 },
		{ 0, 1, 2, 111310 }, { 1, 1, 2, 111310 },
		{ 0, 1, 1, 112430 }, { 1, 1, 1, 112430 },
	};
	struct rec_exec x;
	struct engine *e = run_two(2, &x);
	struct engine_results res;

	engine_results(e, &res);
	ck_assert_uint_eq(x.n, 8);
	for (uint32_t k = 0; k < 8; k++) {
		ck_assert_int_eq(x.s[k].inst, want[k].inst);
		ck_assert_int_eq(x.s[k].tokens, want[k].tokens);
		ck_assert_int_eq(x.s[k].group, want[k].group);
		ck_assert_int_eq(x.s[k].start, want[k].start);
	}
	ck_assert_int_eq(res.req[0].first_token_ns, 10200);
	ck_assert_int_eq(res.req[0].finish_ns, 113540);
	ck_assert_int_eq(res.req[0].max_gap_ns, 101110);
	ck_assert_int_eq(res.req[1].first_token_ns, 111310);
	ck_assert_int_eq(res.req[1].finish_ns, 112430);
	ck_assert_uint_eq(res.n_instances, 2);
	ck_assert_uint_eq(res.inst[0].steps, 4);
	ck_assert_uint_eq(res.inst[0].idle_steps, 0);
	ck_assert_uint_eq(res.inst[1].steps, 2);
	ck_assert_uint_eq(res.inst[1].idle_steps, 2);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(res.inst[i].busy_ns, 113540);
	ck_assert_int_eq(res.inst[0].op_ns[COST_OP_ALLREDUCE], 99000);
	ck_assert_int_eq(res.inst[1].op_ns[COST_OP_ALLREDUCE], 9000);
	ck_assert_double_eq_tol(res.inst[0].busy_energy_j, 14540e-7 + 99000 * 50e-9, 1e-12);
	ck_assert_double_eq_tol(res.inst[1].busy_energy_j, 104540e-7 + 9000 * 50e-9, 1e-12);
	/* the idle batches' energy is the rank's, no request's */
	ck_assert_double_eq_tol(res.req[1].energy_j,
				101110e-7 + 1120e-7, 1e-12);
	engine_free(e);
}
END_TEST

/* Without DP attention the instance steps alone: no group tokens, no
 * idle batches, and B and A share its steps (one instance of 2 GPUs). */
START_TEST(no_dp_no_group)
{
	struct rec_exec x;
	struct engine *e = run_two(0, &x);
	struct engine_results res;

	engine_results(e, &res);
	ck_assert_uint_eq(res.n_instances, 1);
	ck_assert_uint_gt(x.n, 0);
	for (uint32_t k = 0; k < x.n; k++) {
		ck_assert_int_eq(x.s[k].inst, 0);
		ck_assert_int_eq(x.s[k].group, 0);
	}
	ck_assert_uint_eq(res.inst[0].idle_steps, 0);
	ck_assert_uint_eq(res.inst[0].steps, x.n);
	ck_assert_int_eq(res.inst[0].op_ns[COST_OP_ALLREDUCE], 0);
	/* step 1: B's 10 tokens alone, 10,100 ns */
	ck_assert_int_eq(res.req[0].first_token_ns, 10100);
	engine_free(e);
}
END_TEST

/* TensorRT-LLM's attention-DP balancer (engine_profile.adp_balance,
 * timeout 3 group steps, batching wait 1).  B and C (prompt 10, output
 * 20) start at 0 on ranks 0 and 1: every rank has context work, nobody
 * decodes yet: no hold; step 1, 10 tokens each, group 20: 10,300 ns.
 * A (prompt 100, output 2) arrives at 1 ns on rank 0:
 *   - alone: rank 1 has no context work, so A is held while both decode
 *     (steps 2 and 3: 1,120 ns each, group 2) until the third such step
 *     reaches the timeout: step 4 at 12,540 runs B's decode and A's
 *     prefill (101 tokens, group 102: 102,120 ns), A's first token at
 *     114,660 (at 112,420 without the balancer: step 2);
 *   - with D (prompt 100, output 2, at 1 ns: rank 1): every rank has
 *     context work and every rank decodes, so both wait the one batching
 *     step (step 2), then prefill together: step 3 at 11,420, 101 tokens
 *     each, group 202: 103,120 ns; A's and D's first tokens at 114,540. */
START_TEST(adp_balancer_holds_context_work)
{
	static const struct engine_profile bal = {
		.name = "balanced", .adp_balance = true, .adp_timeout_iters = 3,
		.adp_batching_wait_iters = 1,
	};
	struct wl_request reqs[4] = {
		{ .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 20 },
		{ .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 20 },
		{ .arrival_ns = 1, .prompt_tokens = 100, .output_tokens = 2 },
		{ .arrival_ns = 1, .prompt_tokens = 100, .output_tokens = 2 },
	};
	static const int64_t alone[4] = { 20, 2, 2, 102 }, paired[3] = { 20, 2, 202 };
	struct rec_exec x;
	struct engine_results res;
	struct engine *e = run_reqs(reqs, 3, 2, &bal, &x);

	engine_results(e, &res);
	for (uint32_t k = 0; k < 8; k++)
		ck_assert_int_eq(x.s[k].group, alone[k / 2]);
	ck_assert_int_eq(x.s[6].start, 12540);
	ck_assert_int_eq(res.req[2].first_token_ns, 114660);
	engine_free(e);
	e = run_reqs(reqs, 3, 2, NULL, &x);
	engine_results(e, &res);
	ck_assert_int_eq(res.req[2].first_token_ns, 112420);
	engine_free(e);
	e = run_reqs(reqs, 4, 2, &bal, &x);
	engine_results(e, &res);
	for (uint32_t k = 0; k < 6; k++)
		ck_assert_int_eq(x.s[k].group, paired[k / 2]);
	ck_assert_int_eq(x.s[4].start, 11420);
	ck_assert_int_eq(res.req[2].first_token_ns, 114540);
	ck_assert_int_eq(res.req[3].first_token_ns, 114540);
	engine_free(e);
}
END_TEST

START_TEST(layouts_refused)
{
	const struct model_spec *moe = catalog_model(&cat, "qwen3-30b-a3b");
	const struct model_spec *dense = catalog_model(&cat, "llama-3.1-8b");
	struct ss_error err = { 0 };

	ck_assert_int_eq(cost_layout_check(moe, 8, 8, 8, "--tp", "--ep", "--dp-attention", &err), 0);
	ck_assert_int_eq(cost_layout_check(dense, 8, 1, 0, "--tp", "--ep", "--dp-attention", &err), 0);
	ck_assert_int_eq(cost_layout_check(moe, 8, 3, 1, "--tp", "--ep", "--dp-attention", &err),
			 -EINVAL);
	ck_assert_str_eq(err.msg, "--ep 3: expected a divisor of --tp 8");
	ck_assert_int_eq(cost_layout_check(moe, 16, 16, 1, "--tp", "--ep", "--dp-attention", &err), 0);
	ck_assert_int_eq(cost_layout_check(moe, 8, 2, 4, "--tp", "--decode-ep", "--dp-attention",
					   &err), 0);
	ck_assert_int_eq(cost_layout_check(moe, 8, 1, 3, "--tp", "--ep", "--decode-dp-attention",
					   &err), -EINVAL);
	ck_assert_str_eq(err.msg, "--decode-dp-attention 3: expected a divisor of --tp 8");
	ck_assert_int_eq(cost_layout_check(dense, 2, 2, 1, "--tp", "--ep", "--dp-attention", &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "needs a mixture-of-experts model"));
	ck_assert_int_eq(cost_layout_check(dense, 2, 1, 2, "--tp", "--ep", "--dp-attention", &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "mixture-of-experts models only"));
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("ep");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, ep_dp_decode_step_hand_computed);
	tcase_add_test(tc, dp_group_tokens_price_the_moe_layers);
	tcase_add_test(tc, dp_ranks_step_in_lock_step);
	tcase_add_test(tc, no_dp_no_group);
	tcase_add_test(tc, adp_balancer_holds_context_work);
	tcase_add_test(tc, ep_alone_is_tp_when_balanced);
	tcase_add_test(tc, dp_rank_energy_is_its_gpus);
	tcase_add_test(tc, memory_and_kv_per_rank_hand_checked);
	tcase_add_test(tc, dp_counts_gpus_and_spreads_arrivals);
	tcase_add_test(tc, table_prices_a_rank);
	tcase_add_test(tc, layouts_refused);
	suite_add_tcase(s, tc);
	return s;
}
