/* Engine profiles (sim/engine-profile.h, docs/engines.md): the catalog
 * reader, the composition of a step from its kernels and the engine's
 * host work, graph padding through the cost model, and the serving-stack
 * latency the engine adds to every request. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "catalog.h"
#include "check-main.h"
#include "costmodel.h"
#include "engine-fixture.h"
#include "engine-profile.h"

#include <jansson.h>

static const char *data_dir(void)
{
	const char *d = getenv("SERVESIM_DATA");

	return d && *d ? d : SERVESIM_SRC_DATADIR;
}

/* A kernels-only result: 10 ms of GEMMs, 1 ms of all-reduce, 0.5 ms of the
 * backend's own host estimate, 2 J. */
static struct cost_result kernels(void)
{
	struct cost_result r = { 0 };

	r.op_ns[COST_OP_GEMM] = 10000000;
	r.op_ns[COST_OP_ALLREDUCE] = 1000000;
	r.op_ns[COST_OP_HOST] = 500000;
	r.duration_ns = 11500000;
	r.energy_j = 2.0;
	return r;
}

static const struct engine_step_ctx ctx1 = { .n_layers = 10, .tp = 1, .gap_power_w = 100.0 };

START_TEST(host_terms_replace_the_backends_host_estimate)
{
	struct engine_profile p = { .name = "t", .sched_us = 100, .sched_us_per_seq = 10,
				    .sched_us_per_token = 1, .prep_us = 50, .prep_us_per_token = 2,
				    .output_us = 30, .output_us_per_seq = 5 };
	struct cost_result r = kernels();
	struct ss_error err = { 0 };

	/* 4 sequences, 1 prefilling, 3 emitting, 100 tokens:
	 * serial = 100 + 40 + 100 + 50 + 200 = 490 us; output = 30 + 15 = 45 us */
	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 4, 1, 3, 100, &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 535000);
	ck_assert_int_eq(r.duration_ns, 11000000 + 535000);
	ck_assert_int_eq(r.op_ns[COST_OP_GEMM], 10000000);
	/* the added time (535 - 500 us) is charged at the gap power */
	ck_assert_double_eq_tol(r.energy_j, 2.0 + 100.0 * 35e-6, 1e-12);
}
END_TEST

START_TEST(async_output_hides_behind_the_gpu_work)
{
	struct engine_profile p = { .name = "t", .output_us = 3000, .async_output = true };
	struct cost_result r = kernels();
	struct ss_error err = { 0 };

	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 1, 0, 1, 1, &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 0);      /* 3 ms < 11 ms of kernels */
	ck_assert_int_eq(r.duration_ns, 11000000);
	p.output_us = 15000;                              /* 4 ms more than the kernels */
	r = kernels();
	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 1, 0, 1, 1, &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 4000000);
	p.async_output = false;                           /* all of it, serially */
	r = kernels();
	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 1, 0, 1, 1, &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 15000000);
}
END_TEST

START_TEST(an_eager_step_waits_for_its_launches)
{
	/* 10 layers x 2 ms of launches = 20 ms > 11 ms of kernels */
	struct engine_profile p = { .name = "t", .launch_us_per_layer = 2000 };
	struct cost_result r = kernels();
	struct ss_error err = { 0 };

	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 1, 0, 1, 1, &r, &err), 0);
	ck_assert_int_eq(r.duration_ns, 20000000);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 9000000);
	/* kernels longer than the launches: no stall */
	p.launch_us_per_layer = 500;
	r = kernels();
	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 1, 0, 1, 1, &r, &err), 0);
	ck_assert_int_eq(r.duration_ns, 11000000);
	/* a per-step launch cost, half hidden: 11 + (12 - 0.5 x 11) = 17.5 ms */
	p.launch_us_per_layer = 0;
	p.launch_us = 12000;
	p.launch_overlap = 0.5;
	r = kernels();
	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 1, 0, 1, 1, &r, &err), 0);
	ck_assert_int_eq(r.duration_ns, 17500000);
}
END_TEST

START_TEST(a_graphed_decode_step_is_one_launch)
{
	struct engine_profile p = { .name = "t", .launch_us_per_layer = 2000,
				    .graph_sizes = { 1, 2, 4, 8 }, .n_graph_sizes = 4,
				    .graph_launch_us = 20 };
	struct cost_result r = kernels();
	struct ss_error err = { 0 };

	ck_assert_int_eq(engine_profile_graph_size(&p, 3), 4);
	ck_assert_int_eq(engine_profile_graph_size(&p, 8), 8);
	ck_assert_int_eq(engine_profile_graph_size(&p, 9), 0);
	ck_assert(engine_profile_graphed(&p, 3, 0, 3));
	ck_assert(!engine_profile_graphed(&p, 9, 0, 9));     /* above the largest size */
	ck_assert(!engine_profile_graphed(&p, 3, 1, 130));   /* a prefill: eager */
	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 3, 0, 3, 3, &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 20000);
	ck_assert_int_eq(r.duration_ns, 11020000);
	/* with graph_mixed a small prefill is captured too */
	p.graph_mixed = true;
	ck_assert(engine_profile_graphed(&p, 2, 1, 8));
	ck_assert(!engine_profile_graphed(&p, 2, 1, 9));
}
END_TEST

START_TEST(the_allreduce_floor_applies_under_tensor_parallelism_only)
{
	struct engine_profile p = { .name = "t", .allreduce_floor_us = 100 };
	struct engine_step_ctx tp4 = { .n_layers = 10, .tp = 4, .gap_power_w = 0 };
	struct cost_result r = kernels();
	struct ss_error err = { 0 };

	/* 2 calls x 10 layers x 100 us = 2 ms > the backend's 1 ms */
	ck_assert_int_eq(engine_profile_step(&p, &tp4, 1, 0, 1, 1, &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_ALLREDUCE], 2000000);
	ck_assert_int_eq(r.duration_ns, 12000000);
	r = kernels();
	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 1, 0, 1, 1, &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_ALLREDUCE], 1000000);
}
END_TEST

/* Dispatching a step to tensor-parallel worker processes costs host time
 * per worker before the kernels start: tp x dispatch_us_per_worker at
 * tp > 1, nothing at tp 1 (in process); a description names it only when
 * set, so other profiles describe themselves as before. */
START_TEST(dispatch_to_tp_workers_costs_host_time_per_worker)
{
	struct engine_profile p = { .name = "t", .dispatch_us_per_worker = 250 };
	struct engine_step_ctx tp8 = { .n_layers = 10, .tp = 8, .gap_power_w = 100.0 };
	struct cost_result r = kernels();
	struct ss_error err = { 0 };
	char buf[2048];

	/* 8 workers x 250 us = 2 ms of host time, on a burst's middle step too */
	ck_assert_int_eq(engine_profile_step(&p, &tp8, 1, 0, 1, 1, &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 2000000);
	ck_assert_int_eq(r.duration_ns, 11000000 + 2000000);
	ck_assert_double_eq_tol(r.energy_j, 2.0 + 100.0 * 1.5e-3, 1e-12);
	r = kernels();
	ck_assert_int_eq(engine_profile_step_part(&p, &tp8, 1, 0, 1,
						  ENGINE_PART_NO_SCHED | ENGINE_PART_NO_OUTPUT, 0,
						  &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 2000000);
	r = kernels();
	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 1, 0, 1, 1, &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 0);
	engine_profile_describe(&p, buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, " dispatch_us_per_worker=250"));
	p.dispatch_us_per_worker = 0;
	engine_profile_describe(&p, buf, sizeof(buf));
	ck_assert_ptr_null(strstr(buf, "dispatch"));
	/* a fit can free it */
	ck_assert_ptr_nonnull(engine_profile_param(&p, "dispatch_us_per_worker"));
}
END_TEST

/* A multi-step burst pays scheduling and input preparation on its first
 * step, output processing (of every token of the burst) on its last,
 * launches on each; part 0 is a step of its own. */
START_TEST(a_burst_step_pays_its_share_of_the_host_terms)
{
	struct engine_profile p = { .name = "t", .sched_us = 100, .sched_us_per_seq = 10,
				    .prep_us = 50, .output_us = 30, .output_us_per_seq = 5,
				    .launch_us = 12000, .launch_overlap = 0.5, .scheduler_steps = 4 };
	struct cost_result a = kernels(), b = kernels(), r;
	struct ss_error err = { 0 };

	/* part 0 and n_out = n_emit is engine_profile_step, bit for bit */
	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 4, 0, 4, 4, &a, &err), 0);
	ck_assert_int_eq(engine_profile_step_part(&p, &ctx1, 4, 0, 4, 0, 4, &b, &err), 0);
	ck_assert_int_eq(a.duration_ns, b.duration_ns);
	ck_assert(a.energy_j == b.energy_j);
	/* 4 sequences; launch stall 12 - 0.5 x 11 = 6.5 ms on every step.
	 * First: serial = 100 + 40 + 50 = 190 us, no output */
	r = kernels();
	ck_assert_int_eq(engine_profile_step_part(&p, &ctx1, 4, 0, 4, ENGINE_PART_NO_OUTPUT, 16,
						  &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 6500000 + 190000);
	/* a middle step: the launch stall only */
	r = kernels();
	ck_assert_int_eq(engine_profile_step_part(&p, &ctx1, 4, 0, 4,
						  ENGINE_PART_NO_SCHED | ENGINE_PART_NO_OUTPUT, 16,
						  &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 6500000);
	/* the last: output processing of the burst's 16 tokens, 30 + 16 x 5 us */
	r = kernels();
	ck_assert_int_eq(engine_profile_step_part(&p, &ctx1, 4, 0, 4, ENGINE_PART_NO_SCHED, 16,
						  &r, &err), 0);
	ck_assert_int_eq(r.op_ns[COST_OP_HOST], 6500000 + 110000);
	ck_assert_uint_eq(engine_profile_burst(&p), 4);
	p.scheduler_steps = 0;   /* absent from the catalog: 1 */
	ck_assert_uint_eq(engine_profile_burst(&p), 1);
	ck_assert_uint_eq(engine_profile_burst(NULL), 1);
}
END_TEST

/* The description names scheduler_steps only when it is above 1, so a
 * profile without multi-step scheduling describes itself as before. */
START_TEST(the_description_names_scheduler_steps_when_set)
{
	struct engine_profile p = { .name = "t", .scheduler_steps = 1 };
	char buf[2048];

	engine_profile_describe(&p, buf, sizeof(buf));
	ck_assert_ptr_null(strstr(buf, "scheduler_steps"));
	p.scheduler_steps = 8;
	engine_profile_describe(&p, buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, " scheduler_steps=8"));
	/* the KV rule likewise: only a profile that sets one names it */
	ck_assert_ptr_null(strstr(buf, "kv_"));
	p.kv_memory = ENGINE_KV_FREE;
	p.kv_block_size = 32;
	engine_profile_describe(&p, buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, " kv_memory=free kv_fraction=0.90000000000000002 kv_block_size=32"));
}
END_TEST

/* A load of KV from host or a remote store: blocking puts all of it
 * before the kernels; layerwise hides it behind the layers' compute except
 * its first layer's share (compute-bound) or the compute of the last layer
 * (copy-bound). */
START_TEST(a_layerwise_load_hides_behind_the_step)
{
	struct engine_profile p = { .name = "t" };
	char buf[2048];

	/* blocking: latency + bytes, whatever the step */
	ck_assert_int_eq(engine_kv_load_added_ns(ENGINE_KV_LOAD_BLOCKING, 32, 100000, 20000, 20480),
			 40480);
	/* compute-bound, 2 layers: max(100000 + 20000 + 10240, 40480 + 50000) - 100000 */
	ck_assert_int_eq(engine_kv_load_added_ns(ENGINE_KV_LOAD_LAYERWISE, 2, 100000, 20000, 20480),
			 30240);
	/* copy-bound, 4 layers: max(1000 + 20000, 80000 + 250) - 1000 */
	ck_assert_int_eq(engine_kv_load_added_ns(ENGINE_KV_LOAD_LAYERWISE, 4, 1000, 0, 80000), 79250);
	/* one layer cannot pipeline: the same as blocking */
	ck_assert_int_eq(engine_kv_load_added_ns(ENGINE_KV_LOAD_LAYERWISE, 1, 5000, 300, 7000), 7300);
	/* never below the latency, never above blocking */
	for (int64_t step = 1; step <= 1000000000; step *= 10) {
		int64_t t = engine_kv_load_added_ns(ENGINE_KV_LOAD_LAYERWISE, 80, step, 5000, 3000000);

		ck_assert_int_ge(t, 5000);
		ck_assert_int_le(t, 3005000);
	}
	ck_assert_int_eq(engine_kv_load_added_ns(ENGINE_KV_LOAD_BLOCKING, 1, 1, INT64_MAX, 1),
			 INT64_MAX);
	/* the description names it only when set */
	engine_profile_describe(&p, buf, sizeof(buf));
	ck_assert_ptr_null(strstr(buf, "kv_load"));
	p.kv_load = ENGINE_KV_LOAD_LAYERWISE;
	engine_profile_describe(&p, buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, " kv_load=layerwise"));
}
END_TEST

START_TEST(host_time_beyond_int64_is_an_error)
{
	struct engine_profile p = { .name = "huge", .sched_us_per_token = 1e3 };
	struct cost_result r = kernels();
	struct ss_error err = { 0 };

	ck_assert_int_eq(engine_profile_step(&p, &ctx1, 1, 1, 1, INT64_MAX / 2, &r, &err), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "engine huge"));
}
END_TEST

/* ---- the catalog ----------------------------------------------------------- */

static int load_text(struct catalog *c, const char *text, struct ss_error *err)
{
	char path[] = "/tmp/ss-engines-XXXXXX";
	int fd = mkstemp(path), rc;
	FILE *f = fdopen(fd, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	rc = catalog_load_engines(c, path, err);
	unlink(path);
	return rc;
}

START_TEST(the_shipped_catalog_holds_the_issue_s_engines)
{
	static const char *names[] = { "vllm", "vllm-v0", "sglang", "trtllm", "distserve",
				       "splitwise-2023", "vllm-rocm", "sglang-rocm" };
	struct ss_error err = { 0 };
	struct catalog c;

	catalog_init(&c);
	ck_assert_int_eq(catalog_load_dir(&c, data_dir(), &err), 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct engine_profile *p = catalog_engine(&c, names[i]);

		ck_assert_msg(p != NULL, "no engine %s", names[i]);
		ck_assert(p->versions[0] && p->source[0]);
	}
	/* vLLM's V1 capture list ends at 512 and starts at 1 */
	ck_assert_int_eq(catalog_engine(&c, "vllm")->graph_sizes[0], 1);
	ck_assert_int_eq(catalog_engine(&c, "vllm")->
			 graph_sizes[catalog_engine(&c, "vllm")->n_graph_sizes - 1], 512);
	ck_assert_ptr_null(catalog_engine(&c, "none"));
	/* ROCm builds (issue 33): V0's hipGraphs for decode up to 256, SGLang's
	 * up to 512 on MI300-class GPUs; both pay vllm-rocm's fitted floor */
	ck_assert_int_eq(catalog_engine(&c, "vllm-rocm")->
			 graph_sizes[catalog_engine(&c, "vllm-rocm")->n_graph_sizes - 1], 256);
	ck_assert(!catalog_engine(&c, "vllm-rocm")->graph_mixed);
	ck_assert_int_eq(catalog_engine(&c, "sglang-rocm")->
			 graph_sizes[catalog_engine(&c, "sglang-rocm")->n_graph_sizes - 1], 512);
	ck_assert_double_eq(catalog_engine(&c, "vllm-rocm")->allreduce_floor_us, 28.0);
	ck_assert_double_eq(catalog_engine(&c, "sglang-rocm")->allreduce_floor_us,
			    catalog_engine(&c, "vllm-rocm")->allreduce_floor_us);
	/* TensorRT-LLM's KV rule (free_gpu_memory_fraction 0.9, tokens_per_block
	 * 32); the others keep vLLM's (absent keys) */
	ck_assert_int_eq(catalog_engine(&c, "trtllm")->kv_memory, ENGINE_KV_FREE);
	ck_assert_double_eq(catalog_engine(&c, "trtllm")->kv_fraction, 0.9);
	ck_assert_int_eq(catalog_engine(&c, "trtllm")->kv_block_size, 32);
	ck_assert_int_eq(catalog_engine(&c, "vllm")->kv_memory, ENGINE_KV_TOTAL);
	ck_assert_int_eq(catalog_engine(&c, "vllm")->kv_block_size, 0);
	/* SGLang's HiCache loads host KV layer by layer; vLLM's connectors
	 * by default before the step */
	ck_assert_int_eq(catalog_engine(&c, "sglang")->kv_load, ENGINE_KV_LOAD_LAYERWISE);
	ck_assert_int_eq(catalog_engine(&c, "vllm")->kv_load, ENGINE_KV_LOAD_BLOCKING);
	catalog_release(&c);
}
END_TEST

START_TEST(a_bad_engine_entry_is_one_clear_error)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"sched_us\": -1}]}",
		  "\"sched_us\" is -1, expected a number >= 0" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"graph_sizes\": [4, 2]}]}",
		  "graph_sizes must be ascending" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"graph_sizes\": [1, \"x\"]}]}",
		  "entry 1 is not an integer" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"graph_mixed\": true}]}",
		  "graph_mixed needs graph_sizes" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"shed_us\": 1}]}",
		  "unknown field \"shed_us\"" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"allreduce\": \"mpi\"}]}",
		  "expected \"custom\" or \"nccl\"" },
		{ "{\"engines\": [{\"name\": \"a\", \"source\": \"s\"}]}", "missing field \"versions\"" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"api_in_ms\": 1e300}]}",
		  "\"api_in_ms\" is 1e+300 ms" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"scheduler_steps\": 0}]}",
		  "\"scheduler_steps\" is 0, expected 1..1024" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"scheduler_steps\": 2.5}]}",
		  "\"scheduler_steps\" is a real number, expected an integer" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"kv_memory\": \"rest\"}]}",
		  "expected \"total\" or \"free\"" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"kv_fraction\": 1.5}]}",
		  "\"kv_fraction\" is 1.5 , expected 0.001 to 1" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"kv_block_size\": 0}]}",
		  "\"kv_block_size\" is 0, expected 1..4096" },
		{ "{\"engines\": [{\"name\": \"a\", \"versions\": \"v\", \"source\": \"s\", \"kv_load\": \"async\"}]}",
		  "expected \"blocking\" or \"layerwise\"" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ss_error err = { 0 };
		struct catalog c;

		catalog_init(&c);
		ck_assert_int_eq(load_text(&c, bad[i].text, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, bad[i].want), "case %zu: '%s' lacks '%s'", i, err.msg,
			      bad[i].want);
		ck_assert_uint_eq(c.n_engines, 0);   /* nothing half-loaded */
		catalog_release(&c);
	}
}
END_TEST

/* A user entry named like a shipped profile is merged into it (issue 34:
 * as GPU entries): the fields it gives replace, the others stay; graphs
 * off is an empty graph_sizes, with graph_mixed and graph_launch_us off. */
START_TEST(a_user_entry_merges_into_a_shipped_one)
{
	struct ss_error err = { 0 };
	struct catalog c;
	int32_t shipped;

	catalog_init(&c);
	ck_assert_int_eq(catalog_load_dir(&c, data_dir(), &err), 0);
	shipped = catalog_engine(&c, "vllm")->n_graph_sizes;
	ck_assert_int_gt(shipped, 0);
	ck_assert_int_eq(load_text(&c, "{\"engines\": [{\"name\": \"vllm\", \"versions\": \"mine\","
				   " \"source\": \"me\", \"sched_us\": 7}]}", &err), 0);
	ck_assert_str_eq(catalog_engine(&c, "vllm")->versions, "mine");
	ck_assert_double_eq(catalog_engine(&c, "vllm")->sched_us, 7);
	ck_assert_int_eq(catalog_engine(&c, "vllm")->n_graph_sizes, shipped);
	/* the merged entry is checked whole: graphs off needs their other
	 * keys off too */
	ck_assert_int_eq(load_text(&c, "{\"engines\": [{\"name\": \"vllm\", \"graph_sizes\": []}]}",
				   &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "needs graph_sizes"), "%s", err.msg);
	ck_assert_int_eq(load_text(&c, "{\"engines\": [{\"name\": \"vllm\", \"graph_sizes\": [],"
				   " \"graph_mixed\": false, \"graph_launch_us\": 0}]}", &err), 0);
	ck_assert_int_eq(catalog_engine(&c, "vllm")->n_graph_sizes, 0);
	ck_assert_double_eq(catalog_engine(&c, "vllm")->sched_us, 7);
	catalog_release(&c);
}
END_TEST

/* ---- through the cost model and the engine ----------------------------------- */

START_TEST(a_graphed_decode_step_is_priced_at_its_padded_size)
{
	struct engine_profile p = { .name = "t", .graph_sizes = { 1, 8 }, .n_graph_sizes = 2 };
	struct cost_config cfg = { .model = &tiny_model, .gpu = &tiny_gpu, .tp = 1 };
	struct cost_item items[8];
	struct cost_step s3 = { .items = items, .n_items = 3, .n_emit = 3, .total_tokens = 3 };
	struct cost_step s8 = { .items = items, .n_items = 8, .n_emit = 8, .total_tokens = 8 };
	struct cost_model *plain = NULL, *eng = NULL;
	struct cost_result a, b, c;
	struct ss_error err = { 0 };

	for (int i = 0; i < 8; i++)
		items[i] = (struct cost_item){ .tokens = 1, .context = i < 3 ? 100 : 0 };
	ck_assert_int_eq(cost_model_new(&plain, "roofline:host_ms=0,host_us_per_seq=0", &cfg, &err), 0);
	cfg.engine = &p;
	ck_assert_int_eq(cost_model_new(&eng, "roofline:host_ms=0,host_us_per_seq=0", &cfg, &err), 0);
	/* 3 decodes run as the graph of 8: 3 real rows and 5 empty ones */
	ck_assert_int_eq(cost_model_predict(eng, &s3, &a, &err), 0);
	ck_assert_int_eq(cost_model_predict(plain, &s8, &b, &err), 0);
	ck_assert_int_eq(cost_model_predict(plain, &s3, &c, &err), 0);
	ck_assert_int_eq(a.duration_ns, b.duration_ns);
	ck_assert_int_gt(a.duration_ns, c.duration_ns);
	cost_model_free(plain);
	cost_model_free(eng);
}
END_TEST

START_TEST(serving_stack_latency_adds_to_ttft_and_e2e_not_to_itl)
{
	struct engine_profile p = { .name = "t", .api_in_ms = 5, .api_out_ms = 2 };
	struct wl_request reqs[2] = {
		{ .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 4 },
		{ .arrival_ns = 1000000000, .prompt_tokens = 10, .output_tokens = 4 },
	};
	struct engine_results r0, r1;
	struct engine_config c;
	struct workload wl;
	struct engine *e0, *e1;

	wl_fill(&wl, reqs, 2);
	cfg_tiny(&c, "constant:prefill_ms_per_token=1,decode_ms_per_step=10", "vllm", 100);
	e0 = run_ok(&c, &wl);
	c.engine = &p;
	e1 = run_ok(&c, &wl);
	engine_results(e0, &r0);
	engine_results(e1, &r1);
	ck_assert_str_eq(r0.engine_name, "none");
	ck_assert_str_eq(r1.engine_name, "t");
	for (int i = 0; i < 2; i++) {
		/* the engine's times shift by api_in; the client sees api_out later */
		ck_assert_int_eq(r1.req[i].first_token_ns - r1.req[i].arrival_ns,
				 r0.req[i].first_token_ns - r0.req[i].arrival_ns + 7000000);
		ck_assert_int_eq(r1.req[i].finish_ns - r1.req[i].first_token_ns,
				 r0.req[i].finish_ns - r0.req[i].first_token_ns);
		ck_assert_int_eq(r1.req[i].max_gap_ns, r0.req[i].max_gap_ns);
	}
	engine_free(e0);
	engine_free(e1);
}
END_TEST

START_TEST(the_front_end_keeps_arrival_order_and_draws_are_seeded)
{
	struct engine_profile p = { .name = "t", .api_in_ms = 5, .api_cv = 2.0 };
	struct wl_request reqs[50];
	struct engine_results ra, rb;
	struct engine_config c;
	struct workload wl;
	struct engine *a, *b;
	int64_t prev = -1;
	bool varied = false;

	for (int i = 0; i < 50; i++)
		reqs[i] = (struct wl_request){ .arrival_ns = i * 100000,
					       .prompt_tokens = 10, .output_tokens = 2 };
	wl_fill(&wl, reqs, 50);
	cfg_tiny(&c, "constant:prefill_ms_per_token=0.001,decode_ms_per_step=0.01", "vllm", 1000);
	c.engine = &p;
	a = run_ok(&c, &wl);
	b = run_ok(&c, &wl);
	engine_results(a, &ra);
	engine_results(b, &rb);
	for (int i = 0; i < 50; i++) {
		ck_assert_int_eq(ra.req[i].first_token_ns, rb.req[i].first_token_ns);
		/* FIFO front end: scheduled no earlier than the request ahead */
		ck_assert_int_ge(ra.req[i].first_sched_ns, prev);
		prev = ra.req[i].first_sched_ns;
		if (i && ra.req[i].first_sched_ns - ra.req[i].arrival_ns !=
			 ra.req[0].first_sched_ns - ra.req[0].arrival_ns)
			varied = true;
	}
	ck_assert(varied);   /* cv 2: the draws differ */
	engine_free(a);
	engine_free(b);
}
END_TEST

START_TEST(a_closed_loop_client_waits_for_the_serving_stack_both_ways)
{
	struct engine_profile p = { .name = "t", .api_in_ms = 5, .api_out_ms = 2 };
	struct wl_request reqs[3];
	struct engine_results r0, r1;
	struct engine_config c;
	struct workload wl;
	struct engine *e0, *e1;

	for (int i = 0; i < 3; i++)
		reqs[i] = (struct wl_request){ .prompt_tokens = 10, .output_tokens = 4 };
	wl_fill(&wl, reqs, 3);
	cfg_tiny(&c, "constant:prefill_ms_per_token=1,decode_ms_per_step=10", "vllm", 100);
	c.concurrency = 1;
	e0 = run_ok(&c, &wl);
	c.engine = &p;
	e1 = run_ok(&c, &wl);
	engine_results(e0, &r0);
	engine_results(e1, &r1);
	for (int i = 0; i < 3; i++) {
		/* TTFT and E2E from the send, as the client measures them */
		ck_assert_int_eq(r1.req[i].first_token_ns - r1.req[i].arrival_ns,
				 r0.req[i].first_token_ns - r0.req[i].arrival_ns + 7000000);
		ck_assert_int_eq(r1.req[i].finish_ns - r1.req[i].arrival_ns,
				 r0.req[i].finish_ns - r0.req[i].arrival_ns + 7000000);
		/* the next send follows the last token as the client saw it */
		if (i)
			ck_assert_int_eq(r1.req[i].arrival_ns, r1.req[i - 1].finish_ns);
	}
	engine_free(e0);
	engine_free(e1);
}
END_TEST

/* ---- multi-step scheduling (docs/engines.md) --------------------------------- */

#define MS_NS 1000000
/* prefill 0.1 ms per token, 10 ms per decode step, whatever the batch */
#define CONST_COST "constant:prefill_ms_per_token=0.1,decode_ms_per_step=10"

static struct engine *run_steps(struct engine_config *c, const struct workload *wl,
				const struct engine_profile *p, struct engine_results *r)
{
	struct engine *e;

	c->engine = p;
	e = run_ok(c, wl);
	engine_results(e, r);
	/* every block back in the pool */
	ck_assert_int_eq(engine_kv_free_blocks(e, 0), (int32_t)r->kv_blocks_per_instance);
	return e;
}

/* Zero gaps in an ITL histogram (exact: values below 256 ns are). */
static uint64_t itl_zeros(const struct ss_hist *h)
{
	return h->used[0] ? h->group[0].n[0] : 0;
}

/* k = 4, no host terms: 4 requests decode 8 tokens each in 2 bursts of 4
 * steps.  Each burst's tokens reach the client at its end: of each
 * request's 8 gaps, 6 are 0 and 2 are 40 ms; TPOT and the mean ITL are
 * the k = 1 run's, exactly (the bursts line up with the outputs). */
START_TEST(a_burst_delivers_its_tokens_together)
{
	struct engine_profile p1 = { .name = "k1" }, p4 = { .name = "k4", .scheduler_steps = 4 };
	struct wl_request reqs[4];
	struct engine_results r1, r4;
	struct engine_config c;
	struct workload wl;
	struct engine *e1, *e4;

	for (int i = 0; i < 4; i++)
		reqs[i] = (struct wl_request){ .prompt_tokens = 10, .output_tokens = 9 };
	wl_fill(&wl, reqs, 4);
	cfg_tiny(&c, CONST_COST, "vllm", 100);
	e1 = run_steps(&c, &wl, &p1, &r1);
	e4 = run_steps(&c, &wl, &p4, &r4);
	for (int i = 0; i < 4; i++) {
		/* a prefill step of 40 tokens (4 ms), then 8 decode steps */
		ck_assert_int_eq(r4.req[i].first_token_ns, 4 * MS_NS);
		ck_assert_int_eq(r4.req[i].finish_ns, 84 * MS_NS);
		ck_assert_int_eq(r1.req[i].finish_ns, r4.req[i].finish_ns);
		ck_assert_int_eq(r1.req[i].max_gap_ns, 10 * MS_NS);
		ck_assert_int_eq(r4.req[i].max_gap_ns, 40 * MS_NS);
	}
	ck_assert_uint_eq(r1.itl->count, 32);
	ck_assert_uint_eq(r4.itl->count, 32);
	ck_assert_uint_eq(itl_zeros(r1.itl), 0);
	ck_assert_uint_eq(itl_zeros(r4.itl), 24);        /* 3 of every 4 gaps */
	ck_assert(ss_hist_mean(r1.itl) == ss_hist_mean(r4.itl));
	ck_assert_uint_eq(r4.inst[0].steps, r1.inst[0].steps);   /* 1 + 8 GPU steps */
	engine_free(e1);
	engine_free(e4);
}
END_TEST

/* The engine's scheduling and output processing are paid once per burst:
 * 2 ms of scheduling and 1 ms + 0.1 ms per token of output processing on
 * a 10 ms decode make a token every 13.1 ms at k = 1 and 43.4 ms per 4
 * tokens at k = 4. */
START_TEST(a_burst_amortises_the_host_terms)
{
	struct engine_profile p1 = { .name = "k1", .sched_us = 2000, .output_us = 1000,
				     .output_us_per_seq = 100 };
	struct engine_profile p4 = p1;
	struct wl_request req = { .prompt_tokens = 10, .output_tokens = 9 };
	struct engine_results r1, r4;
	struct engine_config c;
	struct workload wl;
	struct engine *e1, *e4;

	p4.scheduler_steps = 4;
	wl_fill(&wl, &req, 1);
	cfg_tiny(&c, CONST_COST, "vllm", 100);
	e1 = run_steps(&c, &wl, &p1, &r1);
	e4 = run_steps(&c, &wl, &p4, &r4);
	/* the prefill step is a step of its own either way: 1 + 2 + 1.1 ms */
	ck_assert_int_eq(r1.req[0].first_token_ns, 4100000);
	ck_assert_int_eq(r4.req[0].first_token_ns, 4100000);
	ck_assert_int_eq(r1.req[0].finish_ns - r1.req[0].first_token_ns, 8 * 13100000);
	ck_assert_int_eq(r4.req[0].finish_ns - r4.req[0].first_token_ns, 2 * 43400000);
	engine_free(e1);
	engine_free(e4);
}
END_TEST

/* A request arriving during a burst is admitted at its end: A's first
 * burst runs 1 .. 41 ms; B arrives at 2 ms and is first scheduled at 41
 * ms (at 11 ms with k = 1), so its queueing time covers the rest of the
 * burst. */
START_TEST(an_arrival_waits_for_the_burst_to_end)
{
	struct engine_profile p1 = { .name = "k1" }, p4 = { .name = "k4", .scheduler_steps = 4 };
	struct wl_request reqs[2] = {
		{ .arrival_ns = 0, .prompt_tokens = 10, .output_tokens = 100 },
		{ .arrival_ns = 2 * MS_NS, .prompt_tokens = 10, .output_tokens = 5 },
	};
	struct engine_results r1, r4;
	struct engine_config c;
	struct workload wl;
	struct engine *e1, *e4;

	wl_fill(&wl, reqs, 2);
	cfg_tiny(&c, CONST_COST, "vllm", 100);
	e1 = run_steps(&c, &wl, &p1, &r1);
	e4 = run_steps(&c, &wl, &p4, &r4);
	ck_assert_int_eq(r1.req[1].first_sched_ns, 11 * MS_NS);
	ck_assert_int_eq(r4.req[1].first_sched_ns, 41 * MS_NS);
	ck_assert_int_ge(r4.req[1].first_sched_ns - r4.req[1].arrival_ns, 41 * MS_NS - 2 * MS_NS);
	/* its prefill joins A's decode in a step of its own (1 + 10 ms):
	 * prompt steps are never bursts */
	ck_assert_int_eq(r4.req[1].first_token_ns, 52 * MS_NS);
	engine_free(e1);
	engine_free(e4);
}
END_TEST

/* A request that emits its last token mid-burst idles in its slot until
 * the burst ends: A (2 decode tokens) finishes with the burst at 42 ms,
 * not at 22 ms, and the burst's 4 steps all hold 2 requests. */
START_TEST(finishing_mid_burst_idles_the_slot_until_the_boundary)
{
	struct engine_profile p1 = { .name = "k1" }, p4 = { .name = "k4", .scheduler_steps = 4 };
	struct wl_request reqs[2] = {
		{ .prompt_tokens = 10, .output_tokens = 3 },
		{ .prompt_tokens = 10, .output_tokens = 9 },
	};
	struct engine_results r1, r4;
	struct engine_config c;
	struct workload wl;
	struct engine *e1, *e4;

	wl_fill(&wl, reqs, 2);
	cfg_tiny(&c, CONST_COST, "vllm", 100);
	e1 = run_steps(&c, &wl, &p1, &r1);
	e4 = run_steps(&c, &wl, &p4, &r4);
	ck_assert_int_eq(r1.req[0].finish_ns, 22 * MS_NS);
	ck_assert_int_eq(r4.req[0].finish_ns, 42 * MS_NS);
	ck_assert_int_eq(r4.req[0].generated_tokens, 3);
	ck_assert_int_eq(r4.req[1].finish_ns, 82 * MS_NS);
	/* steps of 2 requests: the prefill and the whole first burst; the
	 * second burst holds B alone */
	ck_assert_uint_eq(r1.inst[0].batch_seqs.group[0].n[2], 3);
	ck_assert_uint_eq(r4.inst[0].batch_seqs.group[0].n[2], 5);
	ck_assert_uint_eq(r4.inst[0].batch_seqs.group[0].n[1], 4);
	engine_free(e1);
	engine_free(e4);
}
END_TEST

/* Requests of random lengths arriving over time, on the roofline with no
 * host terms: TPOT's mean at k = 4 is the k = 1 run's within 3% -- a
 * request's last burst runs up to 3 steps past its last token (3 steps
 * over its 100-300 output tokens: at most 3%, about 1% on average), and
 * idle slots and waiting for the boundary move steps by less than that --
 * while 3/4 of the gaps are 0 (each burst of 4 tokens has 3 of them, less
 * the bursts cut short by a request's end: within 5%).  KV blocks come
 * back and a second run is the same to the nanosecond. */
START_TEST(tpot_keeps_its_mean_and_runs_repeat)
{
	enum { N = 64 };
	struct engine_profile p1 = { .name = "k1" }, p4 = { .name = "k4", .scheduler_steps = 4 };
	struct wl_request reqs[N];
	struct engine_results r1, r4, r4b;
	struct engine_config c;
	struct workload wl;
	struct engine *e1, *e4, *e4b;
	double t1 = 0, t4 = 0;
	uint64_t x = 12345;

	for (int i = 0; i < N; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		reqs[i] = (struct wl_request){ .arrival_ns = (int64_t)i * 2 * MS_NS,
					       .prompt_tokens = 16 + (int32_t)((x >> 40) % 64),
					       .output_tokens = 100 + (int32_t)((x >> 20) % 201) };
	}
	wl_fill(&wl, reqs, N);
	cfg_tiny(&c, "roofline", "vllm", 2000);
	e1 = run_steps(&c, &wl, &p1, &r1);
	e4 = run_steps(&c, &wl, &p4, &r4);
	e4b = run_steps(&c, &wl, &p4, &r4b);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(r4.req[i].state, REQ_FINISHED);
		t1 += (double)(r1.req[i].finish_ns - r1.req[i].first_token_ns) /
		      (reqs[i].output_tokens - 1) / N;
		t4 += (double)(r4.req[i].finish_ns - r4.req[i].first_token_ns) /
		      (reqs[i].output_tokens - 1) / N;
		ck_assert_int_eq(r4.req[i].first_token_ns, r4b.req[i].first_token_ns);
		ck_assert_int_eq(r4.req[i].finish_ns, r4b.req[i].finish_ns);
		ck_assert(r4.req[i].energy_j == r4b.req[i].energy_j);
	}
	ck_assert_msg(fabs(t4 / t1 - 1) < 0.03, "TPOT mean %g ns at k = 4, %g at k = 1", t4, t1);
	ck_assert_uint_eq(r4.itl->count, r1.itl->count);
	ck_assert_msg(fabs((double)itl_zeros(r4.itl) / (double)r4.itl->count - 0.75) < 0.05,
		      "%llu of %llu gaps 0", (unsigned long long)itl_zeros(r4.itl),
		      (unsigned long long)r4.itl->count);
	ck_assert_uint_eq(itl_zeros(r1.itl), 0);
	engine_free(e1);
	engine_free(e4);
	engine_free(e4b);
}
END_TEST

/* With KV scarce, a burst whose blocks do not all fit is shortened (the
 * policy planned one step; it does not know k), requests are preempted
 * only at decisions, every request finishes and every block comes back;
 * the steady-decode path gives the same run as the policy. */
START_TEST(scarce_kv_shortens_bursts_and_leaks_nothing)
{
	enum { N = 6 };
	struct engine_profile p4 = { .name = "k4", .scheduler_steps = 4 };
	struct wl_request reqs[N];
	struct engine_results a, b;
	struct engine_config c;
	struct workload wl;
	struct engine *on, *off;
	uint64_t steps = 0, preempted = 0;

	for (int i = 0; i < N; i++)
		reqs[i] = (struct wl_request){ .arrival_ns = (int64_t)i * MS_NS,
					       .prompt_tokens = 15 + 7 * i, .output_tokens = 30 + 11 * i };
	wl_fill(&wl, reqs, N);
	cfg_tiny(&c, CONST_COST, "vllm", 12);
	on = run_steps(&c, &wl, &p4, &a);
	c.steady_off = true;
	off = run_steps(&c, &wl, &p4, &b);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(a.req[i].state, REQ_FINISHED);
		ck_assert_int_eq(a.req[i].generated_tokens, reqs[i].output_tokens);
		ck_assert_int_eq(a.req[i].finish_ns, b.req[i].finish_ns);
		ck_assert_int_eq(a.req[i].first_token_ns, b.req[i].first_token_ns);
		ck_assert_int_eq(a.req[i].preemptions, b.req[i].preemptions);
		preempted += (uint64_t)a.req[i].preemptions;
	}
	steps = a.inst[0].steps;
	ck_assert_uint_eq(steps, b.inst[0].steps);
	ck_assert_msg(preempted > 0, "KV was not scarce");
	engine_free(on);
	engine_free(off);
}
END_TEST

/* Every field of a and b equal, bit for bit where it is a number; names
 * the first that differs. */
static void assert_same_profile(const struct engine_profile *a, const struct engine_profile *b)
{
	for (size_t i = 0; i < engine_profile_n_fields; i++) {
		const struct catalog_field *f = &engine_profile_fields[i];
		const char *x = (const char *)a + f->off, *y = (const char *)b + f->off;
		size_t size = f->kind == CF_STR ? strlen(x) + 1 :
			      f->kind == CF_INTS ? (size_t)a->n_graph_sizes * sizeof(int32_t) :
			      f->kind == CF_BOOL ? sizeof(bool) :
			      f->kind == CF_POS || f->kind == CF_NONNEG ? sizeof(double) : sizeof(int);

		ck_assert_msg(catalog_field_number(f, a) == catalog_field_number(f, b) &&
			      !memcmp(x, y, size), "%s: %s differs after a round trip", a->name, f->key);
	}
}

/* fit-engine writes what it fitted with every other key of the profile it
 * started from (the review found kv_load dropped: a fitted sglang lost
 * its layer-wise loads); reading the entry back gives that profile. */
START_TEST(every_shipped_profile_survives_a_write_and_a_read)
{
	struct ss_error err = { 0 };
	struct catalog c, back;
	bool layerwise = false, adp_iters = false;

	catalog_init(&c);
	ck_assert_int_eq(catalog_load_dir(&c, data_dir(), &err), 0);
	ck_assert_uint_gt(c.n_engines, 0);
	for (size_t i = 0; i < c.n_engines; i++) {
		struct engine_profile q = c.engines[i];
		char *text;
		json_t *e;

		*engine_profile_param(&q, "sched_us") = 123.25;   /* what a fit moved */
		for (unsigned flags = 0; flags <= CATALOG_JSON_EVERY; flags += CATALOG_JSON_EVERY) {
			e = catalog_entry_json(engine_profile_fields, engine_profile_n_fields, &q, flags);
			ck_assert_ptr_nonnull(e);
			text = json_dumps(e, JSON_COMPACT | JSON_REAL_PRECISION(17));
			json_decref(e);
			ck_assert_ptr_nonnull(text);
			catalog_init(&back);
			ck_assert_msg(catalog_add_engine_text(&back, text, "round trip", &err) == 0,
				      "%s: %s", q.name, err.msg);
			free(text);
			ck_assert_int_eq(back.n_engines, 1);
			assert_same_profile(&q, &back.engines[0]);
			catalog_release(&back);
		}
		layerwise |= q.kv_load == ENGINE_KV_LOAD_LAYERWISE;
		adp_iters |= !q.adp_balance && q.adp_timeout_iters > 0;
	}
	/* the keys the old writer dropped are among those checked */
	ck_assert(layerwise && adp_iters);
	catalog_release(&c);
}
END_TEST

/* The description is the one summary.json and a plan's fingerprint have
 * held since before the table: the shipped trtllm profile, byte for byte. */
START_TEST(the_description_reads_as_it_did)
{
	struct ss_error err = { 0 };
	struct catalog c;
	char buf[4096];

	catalog_init(&c);
	ck_assert_int_eq(catalog_load_dir(&c, data_dir(), &err), 0);
	engine_profile_describe(catalog_engine(&c, "trtllm"), buf, sizeof(buf));
	ck_assert_msg(!strncmp(buf, "trtllm: policy=", 15), "%s", buf);
	ck_assert_ptr_nonnull(strstr(buf, " graph_sizes=1,2,"));
	/* kv rule shown, balancing off so its iterations are not */
	ck_assert_ptr_nonnull(strstr(buf, " kv_memory=free kv_fraction=0.90000000000000002 kv_block_size=32"));
	ck_assert_ptr_null(strstr(buf, "timeout_iters"));
	engine_profile_describe(catalog_engine(&c, "sglang"), buf, sizeof(buf));
	ck_assert_msg(strlen(buf) > 37 && !strcmp(buf + strlen(buf) - 37,
						   " kv_load=layerwise stack=local-sglang"), "%s", buf);
	/* the stack key shows only where set: a profile without one reads
	 * as it did before the key existed */
	{
		struct engine_profile q = *catalog_engine(&c, "sglang");

		q.stack[0] = '\0';
		engine_profile_describe(&q, buf, sizeof(buf));
		ck_assert_msg(!strcmp(buf + strlen(buf) - 18, " kv_load=layerwise"), "%s", buf);
	}
	/* truncated as snprintf truncates: the prefix */
	{
		char small[24], whole[4096];

		engine_profile_describe(catalog_engine(&c, "vllm"), whole, sizeof(whole));
		engine_profile_describe(catalog_engine(&c, "vllm"), small, sizeof(small));
		ck_assert_int_eq(strncmp(small, whole, sizeof(small) - 1), 0);
		ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
	}
	catalog_release(&c);
}
END_TEST

/* ---- the output front end (sim/frontend.h, issue 31 §3) ------------------- */

/* 4 requests of 9 output tokens, prompts of 10: a prefill step of 4 ms
 * (40 tokens x 0.1 ms) emits their first tokens at 4 ms, then 8 decode
 * steps of 10 ms each emit a token of each.  The front end serves the
 * step's 4 tokens one by one at per_token_us each: below 2.5 ms per
 * token (4 x 2.5 = the step) it keeps up and each token is late by its
 * place in the step, so gaps stay 10 ms; above, it is the bottleneck and
 * every request's gap is 4 x per_token. */
static void frontend_run(double per_token_us, double per_step_us, struct engine_results *r,
			 struct engine **e)
{
	static struct wl_request reqs[4];
	static struct engine_profile p;
	struct engine_config c;
	static struct workload wl;

	for (int i = 0; i < 4; i++)
		reqs[i] = (struct wl_request){ .prompt_tokens = 10, .output_tokens = 9 };
	wl_fill(&wl, reqs, 4);
	cfg_tiny(&c, CONST_COST, "vllm", 100);
	p = (struct engine_profile){ .name = "fe", .frontend_us_per_token = per_token_us,
				     .frontend_us_per_step = per_step_us };
	*e = run_steps(&c, &wl, &p, r);
}

START_TEST(a_front_end_that_keeps_up_delays_tokens_not_gaps)
{
	struct engine_results r0, r1;
	struct engine *e0, *e1;

	frontend_run(0, 0, &r0, &e0);
	/* exactly at the step: 4 x 2.5 ms = 10 ms */
	frontend_run(2500, 0, &r1, &e1);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(r0.req[i].first_token_ns, 4 * MS_NS);
		ck_assert_int_eq(r0.req[i].finish_ns, 84 * MS_NS);
		/* the i-th token of each step leaves (i + 1) x 2.5 ms late */
		ck_assert_int_eq(r1.req[i].first_token_ns, 4 * MS_NS + (i + 1) * 2500000);
		ck_assert_int_eq(r1.req[i].finish_ns, 84 * MS_NS + (i + 1) * 2500000);
		ck_assert_int_eq(r1.req[i].max_gap_ns, 10 * MS_NS);
	}
	ck_assert(ss_hist_mean(r1.itl) == ss_hist_mean(r0.itl));
	ck_assert_uint_eq(r1.inst[0].steps, r0.inst[0].steps);   /* the engine is not slowed */
	engine_free(e0);
	engine_free(e1);
}
END_TEST

START_TEST(a_front_end_slower_than_the_steps_sets_the_token_rate)
{
	struct engine_results r;
	struct engine *e;

	/* 4 x 2.6 ms = 10.4 ms > 10 ms: the gaps are the front end's */
	frontend_run(2600, 0, &r, &e);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(r.req[i].first_token_ns, 4 * MS_NS + (i + 1) * 2600000);
		/* 8 more tokens, each 10.4 ms after the last: the server never
		 * idles after the first step */
		ck_assert_int_eq(r.req[i].finish_ns, r.req[i].first_token_ns + 8 * 10400000);
		ck_assert_int_eq(r.req[i].max_gap_ns, 10400000);
	}
	ck_assert_double_eq_tol(ss_hist_mean(r.itl), 10400000.0, 10400000.0 * 0.01);
	engine_free(e);
	/* a per-step cost counts once per step: 2 ms + 4 x 2.5 ms = 12 ms */
	frontend_run(2500, 2000, &r, &e);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(r.req[i].first_token_ns, 4 * MS_NS + 2 * MS_NS + (i + 1) * 2500000);
		ck_assert_int_eq(r.req[i].max_gap_ns, 12 * MS_NS);
	}
	engine_free(e);
}
END_TEST

/* One client, one request in the engine at a time: a 15 ms front end on
 * 10 ms steps gives gaps of 15 ms, and the client sends its next request
 * when it has received the last token, not when the engine emitted it. */
START_TEST(a_closed_loop_client_waits_for_its_front_end)
{
	struct engine_profile p = { .name = "fe", .frontend_us_per_token = 15000 };
	struct wl_request reqs[3];
	struct engine_results r;
	struct engine_config c;
	struct workload wl;
	struct engine *e;

	for (int i = 0; i < 3; i++)
		reqs[i] = (struct wl_request){ .prompt_tokens = 10, .output_tokens = 4 };
	wl_fill(&wl, reqs, 3);
	cfg_tiny(&c, CONST_COST, "vllm", 100);
	c.concurrency = 1;
	e = run_steps(&c, &wl, &p, &r);
	for (int i = 0; i < 3; i++) {
		/* prefill 1 ms, then 3 decode steps: the tokens leave at
		 * 1 + 15, then 15 ms apart */
		ck_assert_int_eq(r.req[i].first_token_ns - r.req[i].arrival_ns, 16 * MS_NS);
		ck_assert_int_eq(r.req[i].finish_ns - r.req[i].arrival_ns, 61 * MS_NS);
		ck_assert_int_eq(r.req[i].max_gap_ns, 15 * MS_NS);
		if (i)
			ck_assert_int_eq(r.req[i].arrival_ns, r.req[i - 1].finish_ns);
	}
	engine_free(e);
}
END_TEST

/* A burst's tokens (k = 4) reach the front end together at its end and
 * leave one by one, each request's in a row: at 1 ms per token, request
 * i's first token leaves at 4 + (i + 1) ms, its last (the second burst
 * ends at 84 ms) at 84 + 4 (i + 1) ms, and no gap is 0 any more. */
START_TEST(a_front_end_serves_a_burst_token_by_token)
{
	struct engine_profile p = { .name = "fe4", .scheduler_steps = 4,
				    .frontend_us_per_token = 1000 };
	struct wl_request reqs[4];
	struct engine_results r;
	struct engine_config c;
	struct workload wl;
	struct engine *e;

	for (int i = 0; i < 4; i++)
		reqs[i] = (struct wl_request){ .prompt_tokens = 10, .output_tokens = 9 };
	wl_fill(&wl, reqs, 4);
	cfg_tiny(&c, CONST_COST, "vllm", 100);
	e = run_steps(&c, &wl, &p, &r);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(r.req[i].first_token_ns, (4 + i + 1) * MS_NS);
		ck_assert_int_eq(r.req[i].finish_ns, (84 + 4 * (i + 1)) * MS_NS);
	}
	ck_assert_uint_eq(r.itl->count, 32);
	ck_assert_uint_eq(itl_zeros(r.itl), 0);
	engine_free(e);
}
END_TEST

START_TEST(the_front_end_keys_are_described_only_when_set)
{
	struct engine_profile p = { .name = "t" };
	char buf[4096];

	engine_profile_describe(&p, buf, sizeof(buf));
	ck_assert_ptr_null(strstr(buf, "frontend"));
	p.frontend_us_per_token = 12.5;
	engine_profile_describe(&p, buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, " frontend_us_per_token=12.5"));
	ck_assert_ptr_null(strstr(buf, "frontend_us_per_step"));
	ck_assert_ptr_nonnull(engine_profile_param(&p, "frontend_us_per_token"));
	ck_assert_ptr_nonnull(engine_profile_param(&p, "frontend_us_per_step"));
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("engine-profile");
	TCase *t = tcase_create("step");

	tcase_add_test(t, host_terms_replace_the_backends_host_estimate);
	tcase_add_test(t, async_output_hides_behind_the_gpu_work);
	tcase_add_test(t, an_eager_step_waits_for_its_launches);
	tcase_add_test(t, a_graphed_decode_step_is_one_launch);
	tcase_add_test(t, the_allreduce_floor_applies_under_tensor_parallelism_only);
	tcase_add_test(t, host_time_beyond_int64_is_an_error);
	tcase_add_test(t, a_burst_step_pays_its_share_of_the_host_terms);
	tcase_add_test(t, the_description_names_scheduler_steps_when_set);
	tcase_add_test(t, dispatch_to_tp_workers_costs_host_time_per_worker);
	tcase_add_test(t, a_layerwise_load_hides_behind_the_step);
	suite_add_tcase(s, t);
	t = tcase_create("catalog");
	tcase_add_test(t, the_shipped_catalog_holds_the_issue_s_engines);
	tcase_add_test(t, a_bad_engine_entry_is_one_clear_error);
	tcase_add_test(t, a_user_entry_merges_into_a_shipped_one);
	tcase_add_test(t, every_shipped_profile_survives_a_write_and_a_read);
	tcase_add_test(t, the_description_reads_as_it_did);
	suite_add_tcase(s, t);
	t = tcase_create("engine");
	tcase_add_test(t, a_graphed_decode_step_is_priced_at_its_padded_size);
	tcase_add_test(t, serving_stack_latency_adds_to_ttft_and_e2e_not_to_itl);
	tcase_add_test(t, the_front_end_keeps_arrival_order_and_draws_are_seeded);
	tcase_add_test(t, a_closed_loop_client_waits_for_the_serving_stack_both_ways);
	suite_add_tcase(s, t);
	t = tcase_create("multi-step");
	tcase_add_test(t, a_burst_delivers_its_tokens_together);
	tcase_add_test(t, a_burst_amortises_the_host_terms);
	tcase_add_test(t, an_arrival_waits_for_the_burst_to_end);
	tcase_add_test(t, finishing_mid_burst_idles_the_slot_until_the_boundary);
	tcase_add_test(t, tpot_keeps_its_mean_and_runs_repeat);
	tcase_add_test(t, scarce_kv_shortens_bursts_and_leaks_nothing);
	suite_add_tcase(s, t);
	t = tcase_create("frontend");
	tcase_add_test(t, a_front_end_that_keeps_up_delays_tokens_not_gaps);
	tcase_add_test(t, a_front_end_slower_than_the_steps_sets_the_token_rate);
	tcase_add_test(t, a_closed_loop_client_waits_for_its_front_end);
	tcase_add_test(t, a_front_end_serves_a_burst_token_by_token);
	tcase_add_test(t, the_front_end_keys_are_described_only_when_set);
	suite_add_tcase(s, t);
	return s;
}
