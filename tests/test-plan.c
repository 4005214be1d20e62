/* Behaviours of analysis/plan: enumeration and budgets, canonical strings,
 * the rate search on fake attainment curves, the Pareto frontier, ranking,
 * the database round trip, and one real evaluation with the engine. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "engine-fixture.h"
#include "plan.h"

#include "check-main.h"

static const struct gpu_spec gpu_a = {
	.name = "gpu-a", .bf16_flops = 100e12, .hbm_bytes = 16e9, .hbm_bw = 1e12,
	.nvlink_bw = 100e9, .pcie_bw = 16e9, .tdp_w = 300, .idle_w = 50, .cost_per_hour = 2.5,
};
static const struct gpu_spec gpu_b = {    /* no price */
	.name = "gpu-b", .bf16_flops = 200e12, .hbm_bytes = 32e9, .hbm_bw = 2e12,
	.nvlink_bw = 100e9, .pcie_bw = 16e9, .tdp_w = 500, .idle_w = 60,
};
static const struct gpu_spec gpu_tiny_mem = {    /* holds no model */
	.name = "gpu-small", .bf16_flops = 100e12, .hbm_bytes = 1e6, .hbm_bw = 1e12,
	.nvlink_bw = 100e9, .pcie_bw = 16e9, .tdp_w = 300, .idle_w = 50, .cost_per_hour = 1,
};
static const struct gpu_spec gpu_c = {    /* cheaper, slower */
	.name = "gpu-c", .bf16_flops = 50e12, .hbm_bytes = 16e9, .hbm_bw = 0.5e12,
	.nvlink_bw = 100e9, .pcie_bw = 16e9, .tdp_w = 250, .idle_w = 40, .cost_per_hour = 1,
};

/* One GPU, tp {1, 2}, up to 4 GPUs, vllm with two chunks and two batches. */
static void base_space(struct plan_space *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->model = &tiny_model;
	sp->gpus[0] = &gpu_a;
	sp->n_gpus = 1;
	sp->tp[0] = 1;
	sp->tp[1] = 2;
	sp->n_tp = 2;
	sp->max_gpus = 4;
	sp->policies[0] = plan_policy_find("vllm");
	sp->n_policies = 1;
	sp->chunks[0] = 512;
	sp->chunks[1] = 2048;
	sp->n_chunks = 2;
	sp->max_batch[0] = 128;
	sp->max_batch[1] = 256;
	sp->n_max_batch = 2;
	sp->colocated = true;
}

static size_t enumerate(const struct plan_space *sp, const struct engine_config *base,
			struct plan_config **cfg, struct plan_excluded *ex)
{
	struct ss_error err = { 0 };
	size_t n = 0;

	ck_assert_msg(plan_enumerate(sp, base, cfg, &n, ex, &err) == 0, "%s", err.msg);
	return n;
}

/* Colocated shapes: every instance count, tp 1 x {1, 2, 3, 4}, tp 2 x
 * {1, 2}: 6 shapes x 2 chunks x 2 batches. */
START_TEST(enumerate_colocated)
{
	struct plan_space sp;
	struct plan_config *cfg;
	struct plan_excluded ex;
	size_t n;

	base_space(&sp);
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 24);
	ck_assert_uint_eq(ex.budget + ex.unpriced + ex.memory + ex.policy, 0);
	for (size_t i = 0; i < n; i++) {
		ck_assert_uint_eq(cfg[i].index, i);
		ck_assert_int_eq(cfg[i].gpus, (int)cfg[i].instances * cfg[i].tp);
		ck_assert_int_le(cfg[i].gpus, 4);
		ck_assert(fabs(cfg[i].usd_per_hour - 2.5 * cfg[i].gpus) < 1e-12);
		for (size_t j = 0; j < i; j++)
			ck_assert_str_ne(cfg[i].key, cfg[j].key);
	}
	/* enumeration order: tp, instances, policy, chunk, batch */
	ck_assert_str_eq(cfg[0].key,
			 "colocated gpu=gpu-a tp=1 instances=1 policy=vllm:max_num_batched_tokens=512,max_num_seqs=128");
	ck_assert_str_eq(cfg[3].key,
			 "colocated gpu=gpu-a tp=1 instances=1 policy=vllm:max_num_batched_tokens=2048,max_num_seqs=256");
	ck_assert_uint_eq(cfg[4].instances, 2);
	ck_assert_uint_eq(cfg[8].instances, 3);   /* not a power of two */
	ck_assert_int_eq(cfg[16].tp, 2);
	free(cfg);

	/* max_gpus 6 at tp 1: 1, 2, 3, 4, 5 and 6 instances */
	sp.tp[0] = 1;
	sp.n_tp = 1;
	sp.max_gpus = 6;
	sp.n_chunks = sp.n_max_batch = 0;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 6);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(cfg[i].instances, i + 1);
	ck_assert_str_eq(cfg[5].key, "colocated gpu=gpu-a tp=1 instances=6 policy=vllm");
	free(cfg);

	/* an explicit instance list */
	sp.instances[0] = 3;
	sp.instances[1] = 5;
	sp.n_instances = 2;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(cfg[1].instances, 5);
	free(cfg);
}
END_TEST

/* An integer axis split generically (plan_enumerate_axis, what an OUTER
 * axis of plan-axes.def gets): the space once per item, the axis
 * outermost, each configuration carrying its item, what the budget left
 * out counted per item.  The axis here is ep (any int member of
 * plan_space, plan_config and engine_config will do). */
START_TEST(enumerate_generic_axis)
{
	const struct plan_outer_axis ep = {
		.opt = "ep", .name = "ep", .list = offsetof(struct plan_space, ep),
		.n = offsetof(struct plan_space, n_ep), .cfg = offsetof(struct plan_config, ep),
		.engine = offsetof(struct engine_config, ep),
	};
	struct plan_space sp;
	struct plan_config *cfg, *one;
	struct plan_excluded ex, ex1;
	struct ss_error err = { 0 };
	size_t n, n1;

	base_space(&sp);
	sp.budget_gpus = 3;   /* leaves out 4 GPUs: some configurations per item */
	n1 = enumerate(&sp, NULL, &one, &ex1);
	ck_assert_uint_gt(ex1.budget, 0);
	sp.ep[0] = 2;
	sp.ep[1] = 4;
	sp.n_ep = 2;
	ck_assert_msg(plan_enumerate_axis(&sp, &ep, NULL, &cfg, &n, &ex, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 2 * n1);
	ck_assert_uint_eq(ex.budget, 2 * ex1.budget);
	for (size_t i = 0; i < n; i++) {
		const struct plan_config *c = &cfg[i], *o = &one[i % n1];

		ck_assert_uint_eq(c->index, i);
		ck_assert_int_eq(c->ep, i < n1 ? 2 : 4);
		/* the rest of the configuration is the space's without the axis */
		ck_assert_int_eq(c->tp, o->tp);
		ck_assert_uint_eq(c->instances, o->instances);
		ck_assert_int_eq(c->chunk, o->chunk);
		ck_assert_int_eq(c->max_batch, o->max_batch);
		for (size_t j = 0; j < i; j++)
			ck_assert_str_ne(c->key, cfg[j].key);
	}
	ck_assert_str_eq(cfg[0].key,
			 "colocated gpu=gpu-a tp=1 ep=2 instances=1 policy=vllm:max_num_batched_tokens=512,max_num_seqs=128");
	free(cfg);
	free(one);
}
END_TEST

/* sarathi forbids max batch > token budget: those combinations are left
 * out and counted; orca has no token budget, so chunks collapse. */
START_TEST(enumerate_policies)
{
	struct plan_space sp;
	struct plan_config *cfg;
	struct plan_excluded ex;
	size_t n;

	base_space(&sp);
	sp.tp[0] = 1;
	sp.n_tp = 1;
	sp.max_gpus = 1;
	sp.policies[0] = plan_policy_find("sarathi");
	sp.policies[1] = plan_policy_find("orca");
	sp.n_policies = 2;
	sp.chunks[0] = 128;
	sp.chunks[1] = 512;
	sp.max_batch[0] = 256;
	sp.n_max_batch = 1;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(ex.policy, 1);
	ck_assert_str_eq(cfg[0].policy_spec, "sarathi:token_budget=512,max_num_seqs=256");
	ck_assert_str_eq(cfg[1].policy_spec, "orca:max_batch=256");
	ck_assert_ptr_null(plan_policy_find("nope"));
	free(cfg);
}
END_TEST

/* Disaggregated: every split of 2, 3 and 4 instances at tp 1 (1 + 2 + 3)
 * and of 2 at tp 2 (1); with ratios 1:1 and 1:3, 2 instances give one
 * split (1P+1D), 3 give 2P+1D (1.5 rounds to 2) and 1P+2D, 4 give 2P+2D
 * and 1P+3D. */
START_TEST(enumerate_disaggregated)
{
	struct plan_space sp;
	struct plan_config *cfg;
	struct plan_excluded ex;
	size_t n;

	base_space(&sp);
	sp.colocated = false;
	sp.disaggregated = true;
	sp.n_chunks = sp.n_max_batch = 0;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 7);
	ck_assert_str_eq(cfg[0].key, "disaggregated gpu=gpu-a tp=1 prefill=1 decode=1 policy=vllm");
	ck_assert_uint_eq(cfg[1].n_prefill, 1);
	ck_assert_uint_eq(cfg[1].n_decode, 2);
	ck_assert_uint_eq(cfg[3].n_prefill, 1);
	ck_assert_uint_eq(cfg[3].n_decode, 3);
	ck_assert_uint_eq(cfg[5].n_prefill, 3);
	ck_assert_uint_eq(cfg[5].n_decode, 1);
	ck_assert_int_eq(cfg[6].tp, 2);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(cfg[i].n_prefill + cfg[i].n_decode, cfg[i].instances);
	free(cfg);

	sp.ratios[0] = (struct plan_ratio){ 1, 1 };
	sp.ratios[1] = (struct plan_ratio){ 1, 3 };
	sp.n_ratios = 2;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 6);
	ck_assert_uint_eq(cfg[1].n_prefill, 2);
	ck_assert_uint_eq(cfg[1].n_decode, 1);
	ck_assert_uint_eq(cfg[2].n_prefill, 1);
	ck_assert_uint_eq(cfg[2].n_decode, 2);
	ck_assert_uint_eq(cfg[3].n_prefill, 2);
	ck_assert_uint_eq(cfg[4].n_prefill, 1);
	ck_assert_uint_eq(cfg[4].n_decode, 3);
	free(cfg);

	/* both modes: colocated first */
	sp.colocated = true;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 6 + 6);
	ck_assert_int_eq(cfg[0].mode, PLAN_COLOCATED);
	ck_assert_int_eq(cfg[5].mode, PLAN_COLOCATED);
	ck_assert_int_eq(cfg[6].mode, PLAN_DISAGGREGATED);
	free(cfg);
}
END_TEST

START_TEST(enumerate_budgets)
{
	struct plan_space sp;
	struct plan_config *cfg;
	struct plan_excluded ex;
	struct engine_config base;
	size_t n;

	base_space(&sp);
	sp.n_chunks = sp.n_max_batch = 0;
	sp.budget_gpus = 2;                   /* drops tp1 x3, tp1 x4 and tp2 x2 */
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(ex.budget, 3);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_le(cfg[i].gpus, 2);
	free(cfg);

	/* $2.5/GPU-hour under $5/h: at most 2 GPUs; gpu-b has no price */
	sp.budget_gpus = 0;
	sp.budget_usd_per_hour = 5;
	sp.gpus[1] = &gpu_b;
	sp.n_gpus = 2;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(ex.budget, 3);
	ck_assert_uint_eq(ex.unpriced, 6);
	for (size_t i = 0; i < n; i++)
		ck_assert(cfg[i].usd_per_hour <= 5);
	free(cfg);

	/* the model does not fit on gpu-small: left out, counted */
	engine_config_defaults(&base);
	base.model = &tiny_model;
	sp.budget_usd_per_hour = 0;
	sp.gpus[1] = &gpu_tiny_mem;
	n = enumerate(&sp, &base, &cfg, &ex);
	ck_assert_uint_eq(n, 6);
	ck_assert_uint_eq(ex.memory, 6);
	for (size_t i = 0; i < n; i++)
		ck_assert_ptr_eq(cfg[i].gpu, &gpu_a);
	free(cfg);
}
END_TEST

/* --mixed-pools: gpu-a and gpu-c, tp {1, 2}, up to 4 GPUs, disaggregated.
 * Same-pool configurations first, as without the option (7 per GPU: tp 1
 * 1P+1D, 1P+2D, 2P+1D, 1P+3D, 2P+2D, 3P+1D; tp 2 1P+1D).  Then the 12
 * ordered pairs of different pools, every instance count up to the most a
 * split fits:
 *   tp 1/1 (a->c, c->a): 2, 3 and 4 instances, every split: 6 each  12
 *   tp 1/2 (4 pairs): 1P+1D (3 GPUs), 2P+1D (4): 2 each              8
 *   tp 2/1 (4 pairs): 1P+1D (3 GPUs), 1P+2D (4): 2 each              8
 *   tp 2/2 (a->c, c->a): 1P+1D (4 GPUs): 1 each                      2
 * 14 + 30 = 44. */
START_TEST(enumerate_mixed_pools)
{
	struct plan_space sp;
	struct plan_config *same, *cfg;
	struct plan_excluded ex;
	size_t n_same, n, n_mixed = 0;

	base_space(&sp);
	sp.gpus[1] = &gpu_c;
	sp.n_gpus = 2;
	sp.colocated = false;
	sp.disaggregated = true;
	sp.n_chunks = sp.n_max_batch = 0;
	n_same = enumerate(&sp, NULL, &same, &ex);
	ck_assert_uint_eq(n_same, 14);
	sp.mixed_pools = true;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 44);
	ck_assert_uint_eq(ex.budget + ex.unpriced + ex.memory + ex.policy, 0);
	/* same-pool configurations first, byte for byte as without the option */
	for (size_t i = 0; i < n_same; i++) {
		ck_assert_str_eq(cfg[i].key, same[i].key);
		ck_assert(!plan_config_mixed(&cfg[i]));
		ck_assert_ptr_eq(plan_config_decode_gpu(&cfg[i]), cfg[i].gpu);
		ck_assert_int_eq(plan_config_decode_tp(&cfg[i]), cfg[i].tp);
	}
	for (size_t i = n_same; i < n; i++) {
		const struct plan_config *c = &cfg[i];
		int dtp = plan_config_decode_tp(c);
		const struct gpu_spec *dg = plan_config_decode_gpu(c);

		ck_assert(plan_config_mixed(c));
		ck_assert_uint_eq(c->index, i);
		ck_assert(dg != c->gpu || dtp != c->tp);
		ck_assert_uint_eq(c->n_prefill + c->n_decode, c->instances);
		ck_assert_int_eq(c->gpus, (int)(c->n_prefill * c->tp + c->n_decode * dtp));
		ck_assert_int_le(c->gpus, 4);
		ck_assert(fabs(c->usd_per_hour - (c->n_prefill * c->tp * c->gpu->cost_per_hour +
						  c->n_decode * dtp * dg->cost_per_hour)) < 1e-12);
		for (size_t j = 0; j < i; j++)
			ck_assert_str_ne(c->key, cfg[j].key);
		n_mixed++;
	}
	ck_assert_uint_eq(n_mixed, 30);
	/* pairs in order: prefill GPU, prefill tp, decode GPU, decode tp */
	ck_assert_str_eq(cfg[14].key,
			 "disaggregated prefill=1 gpu=gpu-a tp=1 decode=1 gpu=gpu-a tp=2 policy=vllm");
	ck_assert_int_eq(cfg[14].gpus, 3);
	ck_assert(fabs(cfg[14].usd_per_hour - 7.5) < 1e-12);
	ck_assert_str_eq(cfg[15].key,
			 "disaggregated prefill=2 gpu=gpu-a tp=1 decode=1 gpu=gpu-a tp=2 policy=vllm");
	ck_assert_str_eq(cfg[16].key,
			 "disaggregated prefill=1 gpu=gpu-a tp=1 decode=1 gpu=gpu-c tp=1 policy=vllm");
	ck_assert(fabs(cfg[16].usd_per_hour - 3.5) < 1e-12);    /* 2.5 + 1 */
	ck_assert_uint_eq(cfg[17].n_prefill, 1);
	ck_assert_uint_eq(cfg[17].n_decode, 2);
	ck_assert_uint_eq(cfg[19].n_prefill, 1);
	ck_assert_uint_eq(cfg[19].n_decode, 3);
	ck_assert(fabs(cfg[19].usd_per_hour - 5.5) < 1e-12);    /* 2.5 + 3 x 1 */
	ck_assert_str_eq(cfg[n - 1].key,
			 "disaggregated prefill=1 gpu=gpu-c tp=2 decode=2 gpu=gpu-c tp=1 policy=vllm");
	free(cfg);

	/* mixed pools are disaggregated only */
	sp.colocated = true;
	sp.disaggregated = false;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 12);   /* 6 shapes (tp 1 x 1-4, tp 2 x 1-2) per GPU */
	free(cfg);

	/* the same with ratios: each total count's split as for one pool,
	 * then only those within max_gpus (1:1 of 2 at tp 2/1: 3 GPUs) */
	sp.colocated = false;
	sp.disaggregated = true;
	sp.ratios[0] = (struct plan_ratio){ 1, 1 };
	sp.n_ratios = 1;
	n = enumerate(&sp, NULL, &cfg, &ex);
	for (size_t i = 0; i < n; i++)
		if (plan_config_mixed(&cfg[i]))
			ck_assert_msg(cfg[i].n_prefill * 2 == cfg[i].instances ||
					      cfg[i].n_prefill * 2 + 1 == cfg[i].instances ||
					      cfg[i].n_prefill * 2 == cfg[i].instances + 1,
				      "%s", cfg[i].key);
	free(cfg);
	free(same);
}
END_TEST

/* Budgets apply to the summed GPUs and dollars; a pool without a price
 * leaves a mixed configuration out of a dollar budget; the model must fit
 * on both pools. */
START_TEST(enumerate_mixed_budgets)
{
	struct plan_space sp;
	struct plan_config *cfg;
	struct plan_excluded ex;
	struct engine_config base;
	size_t n;

	base_space(&sp);
	sp.gpus[1] = &gpu_c;
	sp.n_gpus = 2;
	sp.colocated = false;
	sp.disaggregated = true;
	sp.mixed_pools = true;
	sp.n_chunks = sp.n_max_batch = 0;
	/* of the 44 above, 20 use at most 3 GPUs: at tp 1, 1P+1D, 1P+2D and
	 * 2P+1D of each GPU (6) and of a->c and c->a (6), and 1P+1D of the 8
	 * pairs with tp 1/2 or 2/1 */
	sp.budget_gpus = 3;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 20);
	ck_assert_uint_eq(ex.budget, 24);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_le(cfg[i].gpus, 3);
	free(cfg);

	/* $3.5/h: gpu-c 1P+1D ($2), 1P+2D and 2P+1D ($3), gpu-c 1P+3D,
	 * 2P+2D, 3P+1D ($4: out), a->c and c->a 1P+1D ($3.5; with 3
	 * instances $4.5 or more: out) */
	sp.budget_gpus = 0;
	sp.budget_usd_per_hour = 3.5;
	sp.tp[0] = 1;
	sp.n_tp = 1;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(cfg[0].key, "disaggregated gpu=gpu-c tp=1 prefill=1 decode=1 policy=vllm");
	ck_assert_str_eq(cfg[1].key, "disaggregated gpu=gpu-c tp=1 prefill=1 decode=2 policy=vllm");
	ck_assert_str_eq(cfg[2].key, "disaggregated gpu=gpu-c tp=1 prefill=2 decode=1 policy=vllm");
	ck_assert_str_eq(cfg[3].key,
			 "disaggregated prefill=1 gpu=gpu-a tp=1 decode=1 gpu=gpu-c tp=1 policy=vllm");
	ck_assert_str_eq(cfg[4].key,
			 "disaggregated prefill=1 gpu=gpu-c tp=1 decode=1 gpu=gpu-a tp=1 policy=vllm");
	free(cfg);

	/* gpu-b has no price: both its mixed pairs and its own are unpriced */
	sp.gpus[1] = &gpu_b;
	sp.max_gpus = 2;
	sp.budget_usd_per_hour = 100;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(ex.unpriced, 3);
	ck_assert_ptr_eq(cfg[0].gpu, &gpu_a);
	ck_assert(!plan_config_mixed(&cfg[0]));
	free(cfg);

	/* the model does not fit on gpu-small: nor any pair with it */
	engine_config_defaults(&base);
	base.model = &tiny_model;
	sp.budget_usd_per_hour = 0;
	sp.gpus[1] = &gpu_tiny_mem;
	n = enumerate(&sp, &base, &cfg, &ex);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(ex.memory, 3);
	free(cfg);
}
END_TEST

START_TEST(enumerate_bad_space)
{
	struct plan_space sp;
	struct plan_config *cfg = NULL;
	struct plan_excluded ex;
	struct ss_error err = { 0 };
	size_t n;

	base_space(&sp);
	sp.colocated = false;
	ck_assert_int_lt(plan_enumerate(&sp, NULL, &cfg, &n, &ex, &err), 0);
	ck_assert_ptr_null(cfg);
	ck_assert_ptr_nonnull(strstr(err.msg, "colocated"));

	/* items outside their axis's range (plan-axes.def), named */
	base_space(&sp);
	sp.tp[1] = 65;
	ck_assert_int_lt(plan_enumerate(&sp, NULL, &cfg, &n, &ex, &err), 0);
	ck_assert_str_eq(err.msg, "plan: expected tp in 1..64, got 65");
	base_space(&sp);
	sp.chunks[0] = 0;
	ck_assert_int_lt(plan_enumerate(&sp, NULL, &cfg, &n, &ex, &err), 0);
	ck_assert_str_eq(err.msg, "plan: expected chunk in 1..16777216, got 0");
	base_space(&sp);
	sp.instances[0] = 0;
	sp.n_instances = 1;
	ck_assert_int_lt(plan_enumerate(&sp, NULL, &cfg, &n, &ex, &err), 0);
	ck_assert_str_eq(err.msg, "plan: expected instances in 1..100000, got 0");
	ck_assert_ptr_null(cfg);
}
END_TEST

START_TEST(config_key_stable)
{
	struct plan_config c = {
		.mode = PLAN_DISAGGREGATED, .gpu = &gpu_b, .tp = 2, .instances = 5, .n_prefill = 2,
		.n_decode = 3, .policy = plan_policy_find("splitfuse"), .chunk = 1024,
	};
	char first[sizeof(c.key)];

	plan_config_key(&c);
	ck_assert_str_eq(c.key, "disaggregated gpu=gpu-b tp=2 prefill=2 decode=3 policy=splitfuse:token_budget=1024");
	snprintf(first, sizeof(first), "%s", c.key);
	plan_config_key(&c);
	ck_assert_str_eq(c.key, first);
	c.max_batch = 64;
	c.chunk = 0;
	plan_config_key(&c);
	ck_assert_str_eq(c.policy_spec, "splitfuse:max_num_seqs=64");

	/* a decode pool set to the prefill pool's is not mixed: same key, hash */
	c.decode_gpu = &gpu_b;
	c.decode_tp = 2;
	plan_config_key(&c);
	ck_assert_str_eq(c.key, "disaggregated gpu=gpu-b tp=2 prefill=2 decode=3 policy=splitfuse:max_num_seqs=64");
	ck_assert(plan_config_gpu_hash(&c) == plan_gpu_hash(&gpu_b));
	/* mixed: both pools in the key, both GPUs in the hash */
	c.decode_gpu = &gpu_a;
	c.decode_tp = 1;
	plan_config_key(&c);
	ck_assert_str_eq(c.key, "disaggregated prefill=2 gpu=gpu-b tp=2 decode=3 gpu=gpu-a tp=1 policy=splitfuse:max_num_seqs=64");
	ck_assert(plan_config_gpu_hash(&c) != plan_gpu_hash(&gpu_b));
	ck_assert(plan_config_gpu_hash(&c) != plan_gpu_hash(&gpu_a));
	{
		struct plan_config d = c;
		struct gpu_spec changed = gpu_a;
		char label[160];

		changed.hbm_bw *= 2;
		d.decode_gpu = &changed;
		ck_assert(plan_config_gpu_hash(&d) != plan_config_gpu_hash(&c));
		plan_config_gpu_label(&c, label, sizeof(label));
		ck_assert_str_eq(label, "gpu-b/gpu-a");
		plan_config_tp_label(&c, label, sizeof(label));
		ck_assert_str_eq(label, "2/1");
		/* only the tp differs: still mixed */
		d.decode_gpu = &gpu_b;
		d.decode_tp = 4;
		ck_assert(plan_config_mixed(&d));
		plan_config_gpu_label(&d, label, sizeof(label));
		ck_assert_str_eq(label, "gpu-b/gpu-b");
		/* colocated configurations are never mixed */
		d.mode = PLAN_COLOCATED;
		ck_assert(!plan_config_mixed(&d));
	}
}
END_TEST

/* ---- the rate search on fake curves -------------------------------------- */

struct fake {
	double threshold;     /* attainment 1 up to here, 0 above (step) */
	bool smooth;          /* 1 / (1 + (s / threshold)^4) instead */
	double span_at_1;     /* arrival span at scale 1, s */
	double e2e_ms;
	int calls;
	int fail_at;          /* fail the fail_at-th call (1-based), 0 = never */
};

static int fake_probe(void *ctx, double scale, struct plan_probe *p, struct ss_error *err)
{
	struct fake *f = ctx;

	if (++f->calls == f->fail_at)
		return ss_error_set(err, -EIO, NULL, 0, "probe %d failed", f->calls);
	p->attainment = f->smooth ? 1 / (1 + pow(scale / f->threshold, 4)) :
				    (scale <= f->threshold ? 1 : 0);
	p->rate_rps = 10 * scale;
	p->goodput_rps = p->attainment * p->rate_rps;
	p->span_s = f->span_at_1 / scale;
	p->e2e_mean_ms = f->e2e_ms;
	return 0;
}

static void search(struct fake *f, const struct plan_search *s, struct plan_result *r)
{
	struct ss_error err = { 0 };

	memset(r, 0, sizeof(*r));
	ck_assert_msg(plan_search_rate(s, fake_probe, f, r, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(f->calls, r->n_probes);
	ck_assert_int_le(r->n_probes, s->max_probes);
}

START_TEST(search_step_threshold)
{
	static const double thresholds[] = { 7.3, 1.0, 1.01, 0.37, 100, 0.0021 };
	struct plan_search s;
	struct plan_result r;

	plan_search_defaults(&s);
	s.min_span = 0;
	for (size_t i = 0; i < sizeof(thresholds) / sizeof(thresholds[0]); i++) {
		struct fake f = { .threshold = thresholds[i] };
		const struct plan_probe *b;

		search(&f, &s, &r);
		ck_assert_int_eq(r.status, PLAN_OK);
		/* the largest passing scale, within the tolerance of the threshold */
		ck_assert_msg(r.max_scale <= f.threshold && r.max_scale * (1 + s.tolerance) >= f.threshold,
			      "threshold %g: max_scale %g", f.threshold, r.max_scale);
		b = plan_result_best(&r);
		ck_assert_ptr_nonnull(b);
		ck_assert(b->scale == r.max_scale);
		ck_assert(plan_meets(&s, b));
		ck_assert(r.probes[0].scale == 1);
		ck_assert_int_eq(r.workload_limited, 0);
	}
}
END_TEST

/* --rate (need_scale): threshold 7.3.  Needing scale 20, the search
 * probes 1 (pass), 4 (pass), 16 (fail, <= 20): it cannot reach 20 and
 * stops there, 3 probes, below_rate, max_scale what it had (4).  Needing
 * 0.5, 2 or exactly 7.3 (a pass at 7.3 counts), no failing probe is at
 * or below the need: the result is the same bytes as without it. */
START_TEST(search_need_scale)
{
	static const double needs[] = { 0.5, 2, 7.3 };
	struct plan_search s;
	struct plan_result plain, r;
	struct fake f = { .threshold = 7.3 };

	plan_search_defaults(&s);
	s.min_span = 0;
	search(&f, &s, &plain);
	s.need_scale = 20;
	f.calls = 0;
	search(&f, &s, &r);
	ck_assert_int_eq(r.status, PLAN_BELOW);
	ck_assert_int_eq(r.n_probes, 3);
	ck_assert(r.probes[2].scale == 16);
	ck_assert(r.max_scale == 4);
	ck_assert_str_eq(plan_status_name(PLAN_BELOW), "below_rate");
	/* failing at scale 1 and needing 1: one probe */
	f = (struct fake){ .threshold = 0.3 };
	s.need_scale = 1;
	search(&f, &s, &r);
	ck_assert_int_eq(r.status, PLAN_BELOW);
	ck_assert_int_eq(r.n_probes, 1);
	for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++) {
		f = (struct fake){ .threshold = 7.3 };
		s.need_scale = needs[i];
		search(&f, &s, &r);
		ck_assert_msg(memcmp(&r, &plain, sizeof(r)) == 0, "need %g changed the result",
			      needs[i]);
	}
}
END_TEST

START_TEST(search_smooth_curve)
{
	struct plan_search s;
	struct plan_result r;
	struct fake f = { .threshold = 12, .smooth = true };
	/* 1 / (1 + x^4) = 0.9  <=>  x = (1/9)^(1/4) */
	double want = 12 * pow(1.0 / 9, 0.25);

	plan_search_defaults(&s);
	s.min_span = 0;
	s.tolerance = 0.01;
	s.max_probes = 20;
	search(&f, &s, &r);
	ck_assert_int_eq(r.status, PLAN_OK);
	ck_assert_msg(r.max_scale <= want && r.max_scale * 1.01 >= want, "%g vs %g", r.max_scale, want);
}
END_TEST

START_TEST(search_limits)
{
	struct plan_search s;
	struct plan_result r;
	struct fake above = { .threshold = 1e9 }, below = { .threshold = 1e-9 };
	struct fake failing = { .threshold = 5, .fail_at = 3 };
	struct ss_error err = { 0 };

	plan_search_defaults(&s);
	s.min_span = 0;
	search(&above, &s, &r);
	ck_assert_int_eq(r.status, PLAN_CAPPED);
	ck_assert(r.max_scale == s.max_scale);
	search(&below, &s, &r);
	ck_assert_int_eq(r.status, PLAN_NONE);
	ck_assert(r.max_scale == 0);
	ck_assert_ptr_null(plan_result_best(&r));

	/* few probes: the bracket is still a valid lower bound */
	s.max_probes = 3;
	{
		struct fake f = { .threshold = 7.3 };

		search(&f, &s, &r);
		ck_assert_int_eq(r.status, PLAN_OK);
		ck_assert(r.max_scale <= 7.3 && r.max_scale >= 4);
	}

	s.max_probes = 12;
	ck_assert_int_lt(plan_search_rate(&s, fake_probe, &failing, &r, &err), 0);
	ck_assert_int_eq(r.status, PLAN_FAILED);
	ck_assert_str_eq(r.error, "probe 3 failed");
}
END_TEST

/* Attainment 1 everywhere, but a workload spanning 100 s at scale 1 with
 * requests lasting 10 s: with min_span 4 the arrivals must span 40 s, so
 * the largest scale counted is 2.5, and the result says the workload
 * limited it. */
START_TEST(search_min_span)
{
	struct plan_search s;
	struct plan_result r;
	struct fake f = { .threshold = 1e9, .span_at_1 = 100, .e2e_ms = 10000 };

	plan_search_defaults(&s);
	ck_assert(s.min_span == 4);
	search(&f, &s, &r);
	ck_assert_int_eq(r.status, PLAN_OK);
	ck_assert_msg(r.max_scale <= 2.5 && r.max_scale * (1 + s.tolerance) >= 2.5, "%g",
		      r.max_scale);
	ck_assert_int_eq(r.workload_limited, 1);
}
END_TEST

/* ---- frontier and ranking ------------------------------------------------ */

START_TEST(pareto_hand_made)
{
	static const struct plan_point pts[] = {
		{ 1, 100, true },    /* 0 A: cheapest */
		{ 2, 80, true },     /* 1 B */
		{ 2, 90, true },     /* 2 dominated by B */
		{ 3, 80, true },     /* 3 dominated by B */
		{ 4, 50, true },     /* 4 E */
		{ 0.5, 200, false }, /* 5 not eligible */
		{ 4, 50, true },     /* 6 equal to E: only the first */
		{ 5, 60, true },     /* 7 dominated by E */
	};
	static const bool want[] = { true, true, false, false, true, false, false, false };
	bool on[8];

	plan_pareto(pts, 8, on);
	for (int i = 0; i < 8; i++)
		ck_assert_msg(on[i] == want[i], "point %d", i);
	plan_pareto(pts, 0, on);
}
END_TEST

START_TEST(rank_by_goodput_per_gpu)
{
	struct plan_config cfg[3] = { { .gpus = 1 }, { .gpus = 2 }, { .gpus = 4 } };
	struct plan_result res[3];
	struct plan_search s;
	size_t order[3];

	plan_search_defaults(&s);
	memset(res, 0, sizeof(res));
	for (int i = 0; i < 3; i++) {
		res[i].status = PLAN_OK;
		res[i].n_probes = 1;
		res[i].best = 0;
	}
	/* goodput = rate x attainment at the maximum */
	res[0].probes[0].rate_rps = 20;      /* 10 per GPU */
	res[0].probes[0].attainment = 0.5;
	res[1].probes[0].rate_rps = 30;      /* 15 per GPU */
	res[1].probes[0].attainment = 1;
	res[1].probes[0].goodput_rps = 1;    /* the run's figure does not rank */
	res[2].status = PLAN_NONE;           /* no result: last */
	res[2].best = -1;
	plan_rank(cfg, res, 3, &s, order);
	ck_assert_uint_eq(order[0], 1);
	ck_assert_uint_eq(order[1], 0);
	ck_assert_uint_eq(order[2], 2);
}
END_TEST

/* ---- the database -------------------------------------------------------- */

static void db_path(char *buf, size_t len)
{
	snprintf(buf, len, "/tmp/servesim-test-plan-%d.db", (int)getpid());
	unlink(buf);
	{
		char wal[300];

		snprintf(wal, sizeof(wal), "%s-wal", buf);
		unlink(wal);
		snprintf(wal, sizeof(wal), "%s-shm", buf);
		unlink(wal);
	}
}

START_TEST(db_round_trip)
{
	struct plan_space sp;
	struct plan_config *cfg;
	struct plan_excluded ex;
	struct plan_result res[4], got[4];
	struct ss_error err = { 0 };
	struct plan_db *db;
	bool done[4];
	size_t n, n_done;
	int64_t rows;
	char path[256];

	base_space(&sp);
	sp.n_tp = 1;
	sp.max_gpus = 2;
	sp.n_max_batch = 0;
	n = enumerate(&sp, NULL, &cfg, &ex);
	ck_assert_uint_eq(n, 4);
	memset(res, 0, sizeof(res));
	for (size_t i = 0; i < n; i++) {
		res[i].index = (uint32_t)i;
		res[i].status = i == 3 ? PLAN_NONE : PLAN_OK;
		res[i].n_probes = 3;
		res[i].best = i == 3 ? -1 : 1;
		res[i].max_scale = i == 3 ? 0 : 1.0 / 3 + (double)i;
		res[i].workload_limited = i == 1;
		for (int k = 0; k < 3; k++) {
			res[i].probes[k].scale = 1.0 / 7 * (k + 1);
			res[i].probes[k].attainment = 2.0 / 3;
			res[i].probes[k].ttft_p99_ms = 1e-300 * (k + 1);
			res[i].probes[k].e2e_mean_ms = NAN;    /* stored as null, read as NaN */
		}
	}
	db_path(path, sizeof(path));
	ck_assert_msg(plan_db_open(&db, path, "00000000000000aa", "test", &err) == 0, "%s", err.msg);
	for (size_t i = 0; i < 3; i++)     /* the last one "was not finished" */
		ck_assert_msg(plan_db_store(db, &cfg[i], &res[i], &err) == 0, "%s", err.msg);
	res[2].status = PLAN_FAILED;       /* failures are not stored... */
	ck_assert_int_eq(plan_db_store(db, &cfg[2], &res[2], &err), 0);
	res[2].status = PLAN_OK;           /* ...nor do they replace a result */
	ck_assert_int_eq(plan_db_count(db, &rows, &err), 0);
	ck_assert_int_eq(rows, 3);
	plan_db_close(db);

	ck_assert_int_eq(plan_db_open(&db, path, "00000000000000aa", "test", &err), 0);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(plan_db_load(db, cfg, n, got, done, &n_done, &err), 0);
	ck_assert_uint_eq(n_done, 3);
	ck_assert(done[0] && done[1] && done[2] && !done[3]);
	for (size_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(got[i].index, i);
		ck_assert_int_eq(got[i].status, res[i].status);
		ck_assert_int_eq(got[i].best, res[i].best);
		ck_assert_int_eq(got[i].n_probes, 3);
		ck_assert_int_eq(got[i].workload_limited, res[i].workload_limited);
		ck_assert(got[i].max_scale == res[i].max_scale);       /* exactly */
		for (int k = 0; k < 3; k++) {
			ck_assert(got[i].probes[k].scale == res[i].probes[k].scale);
			ck_assert(got[i].probes[k].attainment == res[i].probes[k].attainment);
			ck_assert(got[i].probes[k].ttft_p99_ms == res[i].probes[k].ttft_p99_ms);
			ck_assert(isnan(got[i].probes[k].e2e_mean_ms));
		}
	}
	plan_db_close(db);

	/* another fingerprint sees nothing */
	ck_assert_int_eq(plan_db_open(&db, path, "00000000000000bb", "other", &err), 0);
	ck_assert_int_eq(plan_db_load(db, cfg, n, got, done, &n_done, &err), 0);
	ck_assert_uint_eq(n_done, 0);
	plan_db_close(db);

	/* a mixed configuration: stored and read back under its own key; a
	 * change to its decode GPU alone recomputes it */
	{
		struct plan_config m = cfg[0];
		struct gpu_spec changed = gpu_c;
		struct plan_result mr;

		m.mode = PLAN_DISAGGREGATED;
		m.n_prefill = m.n_decode = 1;
		m.instances = 2;
		m.decode_gpu = &gpu_c;
		m.decode_tp = 2;
		plan_config_key(&m);
		ck_assert_int_eq(plan_db_open(&db, path, "00000000000000aa", "test", &err), 0);
		ck_assert_int_eq(plan_db_store(db, &m, &res[0], &err), 0);
		memset(&mr, 0, sizeof(mr));
		ck_assert_int_eq(plan_db_load(db, &m, 1, &mr, done, &n_done, &err), 0);
		ck_assert_uint_eq(n_done, 1);
		ck_assert(mr.max_scale == res[0].max_scale);
		ck_assert_int_eq(plan_db_count(db, &rows, &err), 0);
		ck_assert_int_eq(rows, 4);
		/* the same-pool configuration of its prefill pool is not it */
		{
			struct plan_config one = m;

			one.decode_gpu = NULL;
			one.decode_tp = 0;
			plan_config_key(&one);
			ck_assert_int_eq(plan_db_load(db, &one, 1, &mr, done, &n_done, &err), 0);
			ck_assert_uint_eq(n_done, 0);
		}
		changed.hbm_bw *= 2;
		m.decode_gpu = &changed;
		ck_assert_int_eq(plan_db_load(db, &m, 1, &mr, done, &n_done, &err), 0);
		ck_assert_uint_eq(n_done, 0);
		plan_db_close(db);
	}

	/* a GPU whose specification changed is recomputed */
	{
		struct gpu_spec changed = gpu_a;

		changed.hbm_bw *= 2;
		for (size_t i = 0; i < n; i++)
			cfg[i].gpu = &changed;
		ck_assert_int_eq(plan_db_open(&db, path, "00000000000000aa", "test", &err), 0);
		ck_assert_int_eq(plan_db_load(db, cfg, n, got, done, &n_done, &err), 0);
		ck_assert_uint_eq(n_done, 0);
		plan_db_close(db);
	}
	free(cfg);
	unlink(path);
}
END_TEST

START_TEST(db_refuses_other_files)
{
	struct ss_error err = { 0 };
	struct plan_db *db = NULL;
	sqlite3 *s;
	char path[256];

	db_path(path, sizeof(path));
	ck_assert_int_eq(sqlite3_open(path, &s), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(s, "CREATE TABLE runs (x INTEGER)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(s);
	ck_assert_int_lt(plan_db_open(&db, path, "00000000000000aa", "test", &err), 0);
	ck_assert_ptr_null(db);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a servesim plan database"));
	unlink(path);
}
END_TEST

/* ---- a real evaluation --------------------------------------------------- */

/* 200 requests of 100 prompt + 20 output tokens every 50 ms (20 req/s) on
 * the tiny model with the constant cost model: the search finds a maximum
 * rate, the probe above it misses the target, and evaluating again gives
 * the same bytes. */
START_TEST(evaluate_with_engine)
{
	struct wl_request reqs[200];
	struct workload wl;
	struct engine_config base;
	struct plan_eval pe;
	struct plan_config c = {
		.mode = PLAN_COLOCATED, .gpu = &tiny_gpu, .tp = 1, .instances = 1, .gpus = 1,
		.policy = plan_policy_find("vllm"), .max_batch = 16,
	};
	struct plan_result *r1 = calloc(1, sizeof(*r1)), *r2 = calloc(1, sizeof(*r2));
	struct ss_error err = { 0 };
	const struct plan_probe *b;
	char hex1[17], hex2[17];

	for (int i = 0; i < 200; i++)
		reqs[i] = (struct wl_request){ .arrival_ns = (int64_t)i * 50000000,
					       .prompt_tokens = 100, .output_tokens = 20 };
	wl_fill(&wl, reqs, 200);
	cfg_tiny(&base, "constant:prefill_ms_per_token=0.05,decode_ms_per_step=5", "vllm", 4096);
	memset(&pe, 0, sizeof(pe));
	pe.base = &base;
	pe.wl = &wl;
	pe.rate_rps = plan_workload_rate(&wl);
	ck_assert(fabs(pe.rate_rps - 20) < 1e-9);
	pe.slo = (struct slo_config){ .ttft_ms = 200, .tpot_ms = 10 };
	plan_search_defaults(&pe.search);
	plan_config_key(&c);

	ck_assert_msg(plan_evaluate(&pe, &c, r1, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(r1->status, PLAN_OK);
	b = plan_result_best(r1);
	ck_assert_ptr_nonnull(b);
	ck_assert(plan_meets(&pe.search, b));
	ck_assert(fabs(b->rate_rps - 20 * r1->max_scale) < 1e-9);
	ck_assert(b->goodput_rps > 0);
	/* the failing probe just above the maximum */
	for (int k = 0; k < r1->n_probes; k++)
		if (r1->probes[k].scale > r1->max_scale)
			ck_assert(!plan_meets(&pe.search, &r1->probes[k]));
	ck_assert_int_eq(plan_evaluate(&pe, &c, r2, &err), 0);
	ck_assert_mem_eq(r1, r2, sizeof(*r1));

	/* the fingerprint follows the SLO */
	plan_fingerprint(&pe, "t", NULL, 0, hex1);
	pe.slo.ttft_ms = 201;
	plan_fingerprint(&pe, "t", NULL, 0, hex2);
	ck_assert_str_ne(hex1, hex2);
	/* and a pool's own field of the base, which every disaggregated
	 * configuration keeps; unset, the fingerprint is what it was */
	base.pools[ENGINE_POOL_DECODE].ep = 2;
	plan_fingerprint(&pe, "t", NULL, 0, hex1);
	ck_assert_str_ne(hex1, hex2);
	base.pools[ENGINE_POOL_DECODE].ep = 0;
	plan_fingerprint(&pe, "t", NULL, 0, hex1);
	ck_assert_str_eq(hex1, hex2);
	free(r1);
	free(r2);
}
END_TEST

/* Cost models kept across configurations (plan_eval.cms): every
 * configuration gives the bytes it gives with a cost model of its own,
 * whatever was evaluated before, and configurations of one GPU and tp
 * share one model. */
START_TEST(evaluate_with_cost_model_cache)
{
	struct wl_request reqs[200];
	struct workload wl;
	struct engine_config base;
	struct plan_eval pe;
	struct plan_cm_cache cms = { 0 };
	struct plan_config c[3] = {
		{ .mode = PLAN_COLOCATED, .gpu = &tiny_gpu, .tp = 1, .instances = 1, .gpus = 1,
		  .policy = plan_policy_find("vllm"), .max_batch = 16 },
		{ .mode = PLAN_COLOCATED, .gpu = &tiny_gpu, .tp = 1, .instances = 2, .gpus = 2,
		  .policy = plan_policy_find("sarathi"), .max_batch = 8 },
		{ .mode = PLAN_COLOCATED, .gpu = &tiny_gpu, .tp = 1, .instances = 1, .gpus = 1,
		  .policy = plan_policy_find("vllm"), .max_batch = 16 },
	};
	struct plan_result *r1 = calloc(1, sizeof(*r1)), *r2 = calloc(1, sizeof(*r2));
	struct ss_error err = { 0 };

	for (int i = 0; i < 200; i++)
		reqs[i] = (struct wl_request){ .arrival_ns = (int64_t)i * 50000000,
					       .prompt_tokens = 100 + i % 7, .output_tokens = 20 };
	wl_fill(&wl, reqs, 200);
	cfg_tiny(&base, "roofline", "vllm", 4096);
	memset(&pe, 0, sizeof(pe));
	pe.base = &base;
	pe.wl = &wl;
	pe.rate_rps = plan_workload_rate(&wl);
	pe.slo = (struct slo_config){ .ttft_ms = 200, .tpot_ms = 10 };
	plan_search_defaults(&pe.search);
	for (int k = 0; k < 3; k++) {
		plan_config_key(&c[k]);
		pe.cms = NULL;
		memset(r1, 0, sizeof(*r1));
		ck_assert_msg(plan_evaluate(&pe, &c[k], r1, &err) == 0, "%s", err.msg);
		pe.cms = &cms;
		memset(r2, 0, sizeof(*r2));
		ck_assert_msg(plan_evaluate(&pe, &c[k], r2, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(r1->status, PLAN_OK);
		ck_assert_mem_eq(r1, r2, sizeof(*r1));
	}
	ck_assert_int_eq(cms.n, 1);
	plan_cm_cache_release(&cms);
	ck_assert_int_eq(cms.n, 0);
	free(r1);
	free(r2);
}
END_TEST

/* A mixed configuration evaluates with each pool's own cost model: its
 * probe at scale 1 is exactly `servesim run` of the two pools (the engine
 * building its own cost models), and differs from the same-pool one, whose
 * decode runs on the faster GPU. */
START_TEST(evaluate_mixed_pools)
{
	static const struct gpu_spec slow = {
		.name = "test-gpu-slow", .bf16_flops = 10e12, .hbm_bytes = 16e9, .hbm_bw = 0.02e12,
		.nvlink_bw = 100e9, .pcie_bw = 16e9, .tdp_w = 300, .idle_w = 50,
	};
	struct wl_request reqs[100];
	struct workload wl;
	struct engine_config base, ec;
	struct plan_eval pe;
	struct plan_config same = {
		.mode = PLAN_DISAGGREGATED, .gpu = &tiny_gpu, .tp = 1, .instances = 2,
		.n_prefill = 1, .n_decode = 1, .gpus = 2, .policy = plan_policy_find("vllm"),
	};
	struct plan_config mixed = same;
	struct plan_result *r1 = calloc(1, sizeof(*r1)), *r2 = calloc(1, sizeof(*r2));
	struct ss_error err = { 0 };
	struct engine *e;
	struct engine_results er;
	struct summary sum;

	for (int i = 0; i < 100; i++)
		reqs[i] = (struct wl_request){ .arrival_ns = (int64_t)i * 50000000,
					       .prompt_tokens = 100, .output_tokens = 20 };
	wl_fill(&wl, reqs, 100);
	cfg_tiny(&base, "roofline", "vllm", 4096);
	memset(&pe, 0, sizeof(pe));
	pe.base = &base;
	pe.wl = &wl;
	pe.rate_rps = plan_workload_rate(&wl);
	pe.slo = (struct slo_config){ .ttft_ms = 200, .tpot_ms = 10 };
	plan_search_defaults(&pe.search);
	mixed.decode_gpu = &slow;
	mixed.decode_tp = 2;
	mixed.gpus = 3;
	plan_config_key(&same);
	plan_config_key(&mixed);
	ck_assert(plan_config_mixed(&mixed));

	ck_assert_msg(plan_evaluate(&pe, &mixed, r1, &err) == 0, "%s", err.msg);
	ck_assert_int_ne(r1->status, PLAN_FAILED);
	ck_assert_msg(plan_evaluate(&pe, &same, r2, &err) == 0, "%s", err.msg);
	ck_assert(r1->probes[0].tpot_p99_ms != r2->probes[0].tpot_p99_ms);

	ec = base;
	ec.pools[ENGINE_POOL_PREFILL] = (struct engine_pool_config){ .n = 1, .gpu = &tiny_gpu, .tp = 1 };
	ec.pools[ENGINE_POOL_DECODE] = (struct engine_pool_config){ .n = 1, .gpu = &slow, .tp = 2 };
	ec.n_instances = 2;
	ec.policy = mixed.policy_spec;
	ec.sample_interval_ns = 0;
	e = run_ok(&ec, &wl);
	engine_results(e, &er);
	ck_assert_int_eq(summary_compute(&sum, &er, &pe.slo, 1, &err), 0);
	ck_assert(sum.slo_attainment == r1->probes[0].attainment);
	ck_assert(sum.ttft_ms.p99 == r1->probes[0].ttft_p99_ms);
	ck_assert(sum.tpot_ms.p99 == r1->probes[0].tpot_p99_ms);
	ck_assert(sum.e2e_ms.p99 == r1->probes[0].e2e_p99_ms);
	engine_free(e);

	/* and again, the same bytes */
	ck_assert_int_eq(plan_evaluate(&pe, &mixed, r2, &err), 0);
	ck_assert_mem_eq(r1, r2, sizeof(*r1));
	free(r1);
	free(r2);
}
END_TEST

/* ---- probes reused across running-set limits ------------------------------ */

/* Run wl on one instance of the tiny model under spec; the engine (caller
 * frees) and its results. */
static struct engine *run_spec(const char *spec, const struct workload *wl,
			       struct engine_results *er)
{
	struct engine_config c;
	struct engine *e;

	cfg_tiny(&c, "constant:prefill_ms_per_token=0.05,decode_ms_per_step=5", spec, 4096);
	c.sample_interval_ns = 0;
	e = run_ok(&c, wl);
	engine_results(e, er);
	return e;
}

/* Are two runs the same, field by field: every request's record (all
 * integers, doubles and a static string, no padding: 112 bytes) and every
 * instance's statistics, the histograms by their moments? */
static bool same_run(const struct engine_results *a, const struct engine_results *b)
{
	if (a->n_req != b->n_req || a->n_instances != b->n_instances || a->end_ns != b->end_ns ||
	    memcmp(a->req, b->req, a->n_req * sizeof(*a->req)) ||
	    a->itl->count != b->itl->count || a->itl->sum != b->itl->sum ||
	    a->itl->min != b->itl->min || a->itl->max != b->itl->max)
		return false;
	for (uint32_t i = 0; i < a->n_instances; i++) {
		const struct instance_stats *x = &a->inst[i], *y = &b->inst[i];

#define SAME(f) (x->f == y->f)
		if (!(SAME(total_blocks) && SAME(peak_used_blocks) && SAME(kv_block_ns) &&
		      SAME(steps) && SAME(busy_ns) && SAME(busy_energy_j) && SAME(prefill_energy_j) &&
		      SAME(decode_energy_j) && SAME(peak_power_w) && SAME(out_of_grid) &&
		      SAME(out_of_grid_ns) && SAME(preemptions) && SAME(swap_outs) &&
		      SAME(swap_ins) && SAME(swap_ns) && SAME(prefix_lookup_tokens) &&
		      SAME(prefix_hit_tokens) && SAME(prefix_evictions) && SAME(gpus) &&
		      SAME(kv_transfers_out) && SAME(peak_running) &&
		      SAME(batch_seqs.count) && SAME(batch_seqs.sum) && SAME(batch_seqs.max) &&
		      SAME(batch_tokens.count) && SAME(batch_tokens.sum) && SAME(batch_tokens.max) &&
		      !memcmp(x->op_ns, y->op_ns, sizeof(x->op_ns))))
			return false;
#undef SAME
	}
	return true;
}

/* instance_stats.peak_running is the largest running set after a step's
 * admissions; a run at limit L whose peak stayed below L is the run at 2L,
 * field by field, for every policy plan sweeps; a run whose peak reached L
 * is not (the limit held requests back). */
START_TEST(peak_below_limit_same_run)
{
	static const char *const below[][2] = {
		{ "vllm:max_num_seqs=8", "vllm:max_num_seqs=16" },
		{ "vllm:v0=on,max_num_seqs=8", "vllm:v0=on,max_num_seqs=16" },
		{ "sarathi:max_num_seqs=8", "sarathi:max_num_seqs=16" },
		{ "splitfuse:max_num_seqs=8", "splitfuse:max_num_seqs=16" },
		{ "orca:max_batch=8", "orca:max_batch=16" },
		{ "static:max_batch=8", "static:max_batch=16" },
	};
	static const char *const reached[][2] = {
		{ "vllm:max_num_seqs=4", "vllm:max_num_seqs=8" },
		{ "sarathi:max_num_seqs=4", "sarathi:max_num_seqs=8" },
		{ "orca:max_batch=4", "orca:max_batch=8" },
		{ "static:max_batch=4", "static:max_batch=8" },
	};
	struct wl_request reqs[60];
	struct workload wl;

	/* every 40 ms a request of 100 + 20 tokens (about 105 ms each) */
	for (int i = 0; i < 60; i++)
		reqs[i] = (struct wl_request){ .arrival_ns = (int64_t)i * 40000000,
					       .prompt_tokens = 100 + i % 5, .output_tokens = 20 };
	wl_fill(&wl, reqs, 60);
	for (size_t k = 0; k < sizeof(below) / sizeof(below[0]); k++) {
		struct engine_results a, b;
		struct engine *ea = run_spec(below[k][0], &wl, &a);
		struct engine *eb = run_spec(below[k][1], &wl, &b);

		ck_assert_msg(a.inst[0].peak_running >= 2 && a.inst[0].peak_running < 8,
			      "%s: peak %u", below[k][0], a.inst[0].peak_running);
		ck_assert_msg(same_run(&a, &b), "%s and %s differ", below[k][0], below[k][1]);
		engine_free(ea);
		engine_free(eb);
	}
	/* a burst of 12 at once: the limit holds requests back */
	for (int i = 0; i < 12; i++)
		reqs[i].arrival_ns = 0;
	for (size_t k = 0; k < sizeof(reached) / sizeof(reached[0]); k++) {
		struct engine_results a, b;
		struct engine *ea = run_spec(reached[k][0], &wl, &a);
		struct engine *eb = run_spec(reached[k][1], &wl, &b);

		ck_assert_uint_eq(a.inst[0].peak_running, 4);
		ck_assert_uint_gt(b.inst[0].peak_running, 4);
		ck_assert_msg(!same_run(&a, &b), "%s", reached[k][0]);
		engine_free(ea);
		engine_free(eb);
	}
}
END_TEST

/* The result of a configuration with the probe cache, against the same
 * configuration evaluated alone: the same bytes but n_reused. */
static void eval_both(const struct plan_eval *pe0, struct plan_probe_cache *pc,
		      const struct plan_config *c, struct plan_result *cached)
{
	struct plan_eval pe = *pe0;
	struct plan_result *alone = calloc(1, sizeof(*alone));
	struct ss_error err = { 0 };

	pe.probes = NULL;
	ck_assert_msg(plan_evaluate(&pe, c, alone, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(alone->n_reused, 0);
	pe.probes = pc;
	ck_assert_msg(plan_evaluate(&pe, c, cached, &err) == 0, "%s", err.msg);
	ck_assert_int_ne(cached->status, PLAN_FAILED);
	alone->n_reused = cached->n_reused;
	ck_assert_mem_eq(alone, cached, sizeof(*alone));
	free(alone);
}

/* plan_eval.probes: a configuration evaluated after the same one with a
 * smaller limit copies the probes whose running sets stayed below that
 * limit and gives the bytes it gives alone; where every probe reached the
 * smaller limit (limit 1: any step reaches it) nothing is copied; another
 * configuration, the prefix cache or a keyed order turn reuse off. */
START_TEST(evaluate_reuses_probes_below_limit)
{
	struct wl_request reqs[200];
	struct workload wl;
	struct engine_config base;
	struct plan_eval pe;
	struct plan_probe_cache pc = { 0 };
	struct plan_config c = {
		.mode = PLAN_COLOCATED, .gpu = &tiny_gpu, .tp = 1, .instances = 1, .gpus = 1,
		.policy = plan_policy_find("vllm"),
	};
	struct plan_result *r = calloc(1, sizeof(*r)), *r2 = calloc(1, sizeof(*r2));
	int32_t reused = 0;

	for (int i = 0; i < 200; i++)
		reqs[i] = (struct wl_request){ .arrival_ns = (int64_t)i * 50000000,
					       .prompt_tokens = 100 + i % 7, .output_tokens = 20 };
	wl_fill(&wl, reqs, 200);
	cfg_tiny(&base, "constant:prefill_ms_per_token=0.05,decode_ms_per_step=5", "vllm", 4096);
	memset(&pe, 0, sizeof(pe));
	pe.base = &base;
	pe.wl = &wl;
	pe.rate_rps = plan_workload_rate(&wl);
	pe.slo = (struct slo_config){ .ttft_ms = 200, .tpot_ms = 10 };
	plan_search_defaults(&pe.search);
	ck_assert(plan_probes_reusable(&base));

	/* limit 1 reaches its limit in every probe: limit 2 copies nothing */
	c.max_batch = 1;
	plan_config_key(&c);
	eval_both(&pe, &pc, &c, r);
	ck_assert_int_eq(r->n_reused, 0);
	ck_assert_uint_eq(pc.n, 0);
	c.max_batch = 2;
	plan_config_key(&c);
	eval_both(&pe, &pc, &c, r2);
	ck_assert_int_eq(r2->n_reused, 0);
	ck_assert(memcmp(r->probes, r2->probes, sizeof(r->probes)) != 0);

	/* 8, 16, 64, 256: the larger limits copy what stayed below a smaller one */
	for (int l = 8; l <= 256; l *= l == 16 ? 4 : 2) {
		if (l == 32 || l == 128)
			continue;
		c.max_batch = l;
		plan_config_key(&c);
		eval_both(&pe, &pc, &c, r);
		ck_assert_int_le(r->n_reused, r->n_probes);
		reused += r->n_reused;
	}
	ck_assert_int_gt(reused, 0);
	ck_assert_uint_eq(pc.reused, (uint64_t)reused);

	/* another configuration (2 instances) starts over */
	c.instances = c.gpus = 2;
	c.max_batch = 512;
	plan_config_key(&c);
	eval_both(&pe, &pc, &c, r);
	ck_assert_int_eq(r->n_reused, 0);
	c.instances = c.gpus = 1;
	ck_assert(!plan_config_same_but_limit(&c, &(struct plan_config){ .policy = c.policy,
		.mode = PLAN_COLOCATED, .gpu = &tiny_gpu, .tp = 1, .instances = 2, .gpus = 2,
		.max_batch = 8 }));

	/* a limit the policy refuses (sarathi: max_num_seqs <= its default
	 * token budget of 512) fails as it does alone, copies or not */
	c.policy = plan_policy_find("sarathi");
	c.max_batch = 256;
	plan_config_key(&c);
	eval_both(&pe, &pc, &c, r);
	ck_assert_int_gt(pc.n, 0);
	c.max_batch = 1024;
	plan_config_key(&c);
	{
		struct plan_eval pe1 = pe;
		struct ss_error e1 = { 0 }, e2 = { 0 };

		ck_assert_int_ne(plan_evaluate(&pe1, &c, r, &e1), 0);
		pe1.probes = &pc;
		ck_assert_int_ne(plan_evaluate(&pe1, &c, r2, &e2), 0);
		ck_assert_int_eq(r2->status, PLAN_FAILED);
		ck_assert_int_eq(r2->n_reused, 0);
		ck_assert_mem_eq(r, r2, sizeof(*r));
		ck_assert_ptr_nonnull(strstr(r2->error, "max_num_seqs"));
	}
	c.policy = plan_policy_find("vllm");

	/* options under which the limit does more than stop admissions */
	base.prefix_cache = "on";
	ck_assert(!plan_probes_reusable(&base));
	base.prefix_cache = "off";
	base.order = "sjf";
	ck_assert(!plan_probes_reusable(&base));
	base.order = "fcfs";
	ck_assert(plan_probes_reusable(&base));
	base.order = "sjf";
	c.max_batch = 8;
	plan_config_key(&c);
	eval_both(&pe, &pc, &c, r);
	c.max_batch = 16;
	plan_config_key(&c);
	eval_both(&pe, &pc, &c, r);
	ck_assert_int_eq(r->n_reused, 0);
	plan_probe_cache_release(&pc);
	ck_assert_ptr_null(pc.e);
	free(r);
	free(r2);
}
END_TEST

/* The policies plan sweeps come from the registry: every batch policy
 * that names its --max-batch parameter, with its keys, plus the vllm-v0
 * alias; no list in plan.c to keep in step. */
START_TEST(policies_come_from_the_registry)
{
	struct policy_info info[256];
	size_t n = policy_list(info, 256), swept = 0;
	const struct plan_policy *v0 = plan_policy_find("vllm-v0");

	for (size_t i = 0; i < n && i < 256; i++) {
		const struct batch_policy_ops *ops;
		const struct plan_policy *p;

		if (info[i].kind != POLICY_BATCH)
			continue;
		ops = batch_policy_find(info[i].name);
		p = plan_policy_find(info[i].name);
		if (!ops->plan_batch_key) {
			ck_assert_ptr_null(p);
			continue;
		}
		swept++;
		ck_assert_ptr_nonnull(p);
		ck_assert_str_eq(p->batch_key, ops->plan_batch_key);
		ck_assert(p->chunk_key == ops->plan_chunk_key);
		ck_assert(p->batch_within_chunk == ops->plan_batch_within_chunk);
		ck_assert_ptr_null(p->spec);
		ck_assert_ptr_nonnull(strstr(plan_policy_names(), info[i].name));
	}
	ck_assert_uint_ge(swept, 5);   /* vllm, static, orca, sarathi, splitfuse */
	ck_assert_ptr_nonnull(v0);
	ck_assert_str_eq(v0->spec, "vllm:v0=on");
	ck_assert_str_eq(v0->batch_key, "max_num_seqs");
	ck_assert_ptr_null(plan_policy_find("no-such-policy"));
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("plan");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, policies_come_from_the_registry);
	tcase_add_test(tc, enumerate_colocated);
	tcase_add_test(tc, enumerate_generic_axis);
	tcase_add_test(tc, enumerate_policies);
	tcase_add_test(tc, enumerate_disaggregated);
	tcase_add_test(tc, enumerate_budgets);
	tcase_add_test(tc, enumerate_mixed_pools);
	tcase_add_test(tc, enumerate_mixed_budgets);
	tcase_add_test(tc, enumerate_bad_space);
	tcase_add_test(tc, config_key_stable);
	tcase_add_test(tc, search_step_threshold);
	tcase_add_test(tc, search_smooth_curve);
	tcase_add_test(tc, search_need_scale);
	tcase_add_test(tc, search_limits);
	tcase_add_test(tc, search_min_span);
	tcase_add_test(tc, pareto_hand_made);
	tcase_add_test(tc, rank_by_goodput_per_gpu);
	tcase_add_test(tc, db_round_trip);
	tcase_add_test(tc, db_refuses_other_files);
	tcase_add_test(tc, evaluate_with_engine);
	tcase_add_test(tc, evaluate_with_cost_model_cache);
	tcase_add_test(tc, evaluate_mixed_pools);
	tcase_add_test(tc, peak_below_limit_same_run);
	tcase_add_test(tc, evaluate_reuses_probes_below_limit);
	suite_add_tcase(s, tc);
	return s;
}
