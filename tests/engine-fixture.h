/* Helpers for tests that run the engine on hand-built workloads with a small
 * made-up model and the constant cost model, so every time is exact. */
#ifndef SS_ENGINE_FIXTURE_H
#define SS_ENGINE_FIXTURE_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "metrics.h"

/* 2 layers, 4 KV heads of 64: 2*2*4*64*2 = 2 KiB of KV per token. */
static const struct model_spec tiny_model = {
	.name = "tiny", .n_layers = 2, .hidden = 256, .n_heads = 4, .n_kv_heads = 4,
	.head_dim = 64, .intermediate = 512, .vocab = 1000, .max_context = 4096,
	.mlp = MLP_GATED, .dtype_bytes = 2,
};

static const struct gpu_spec tiny_gpu = {
	.name = "test-gpu", .bf16_flops = 100e12, .hbm_bytes = 16e9, .hbm_bw = 1e12,
	.nvlink_bw = 100e9, .pcie_bw = 16e9, .tdp_w = 300, .idle_w = 50,
};

static inline void wl_fill(struct workload *wl, struct wl_request *reqs, size_t n)
{
	workload_init(wl);
	wl->req = reqs;
	wl->n = n;
	wl->has_arrivals = true;
}

static inline void cfg_tiny(struct engine_config *c, const char *cost, const char *policy,
			    int64_t kv_blocks)
{
	engine_config_defaults(c);
	c->model = &tiny_model;
	c->gpu = &tiny_gpu;
	c->cost_model = cost;
	c->policy = policy;
	c->kv_blocks_override = kv_blocks;
}

/* Run and return the engine (caller frees); fails the test on error. */
static inline struct engine *run_ok(const struct engine_config *c, const struct workload *wl)
{
	struct ss_error err = { 0 };
	struct engine *e = NULL;

	if (engine_new(&e, c, wl, &err) || engine_run(e, &err))
		ck_abort_msg("engine failed: %s", err.msg);
	return e;
}

#endif
