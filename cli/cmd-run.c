/* servesim run and servesim live — one scenario, simulated or live.
 *
 * The options are the shared table's (cli/options.c): parsed and validated
 * there before anything runs.  No output is written unless the whole run
 * succeeds (a live run that fails keeps its results, marked failed; a run
 * stopped by SIGINT or SIGTERM keeps its results, marked interrupted, and
 * exits 130 or 143: docs/servesim.1.md "SIGNALS").
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "backend.h"
#include "cli.h"
#include "config.h"
#include "engine.h"
#include "executor-live.h"
#include "html.h"
#include "metrics.h"
#include "options.h"
#include "progress.h"
#include "report.h"
#include "sessions.h"
#include "sstime.h"
#include "workload.h"

/* The engine's progress callback: ctx is the run's struct cli_progress. */
static void progress(void *ctx, uint64_t done, uint64_t total)
{
	cli_progress_update(ctx, done, total);
}

static json_t *config_json(const struct cli_config *o, const struct workload *wl,
			   const struct engine_config *ec, const struct slo_config *slo)
{
	char engine[2048] = "none";
	struct engine_kv_rule kv;
	json_t *j;

	/* the profile with every parameter, so a result says what it assumed */
	if (ec->engine)
		engine_profile_describe(ec->engine, engine, sizeof(engine));
	engine_kv_rule_of(ec, &kv);
	j = json_pack("{s:s, s:s?, s:s?, s:s?, s:I, s:f, s:f, s:s, s:s, s:i, s:i, s:s, s:s, s:s,"
			 " s:s, s:{s:f, s:f, s:f, s:f}, s:I, s:i, s:f, s:I, s:f, s:I,"
			 " s:s, s:s, s:s, s:s, s:s, s:s?, s:s?, s:s*, s:s*, s:s*}",
			 "workload", wl->source, "trace", o->trace, "arrival", o->arrival,
			 "lengths", o->lengths, "num_requests", (json_int_t)o->num_requests,
			 "duration_s", o->duration_ns / SS_NS_PER_S, "rate_scale", o->rate_scale,
			 "model", ec->model->name, "gpu", ec->gpu->name, "tp", ec->tp,
			 "instances", (int)ec->n_instances, "policy", ec->policy,
			 "router", ec->router, "cost_model", ec->cost_model, "engine", engine,
			 "slo", "ttft_ms", slo->ttft_ms, "tpot_ms", slo->tpot_ms, "e2e_ms", slo->e2e_ms,
			 "tbt_ms", slo->tbt_ms,
			 "seed", (json_int_t)ec->seed, "block_size", engine_block_size(ec),
			 "gpu_memory_utilization", kv.memory == ENGINE_KV_TOTAL ? kv.fraction : 0.0,
			 "kv_blocks_override", (json_int_t)o->kv_blocks,
			 "sample_interval_s", o->sample_interval_ns / SS_NS_PER_S,
			 "requests", (json_int_t)wl->n,
			 "order", ec->order, "victim", ec->victim, "preemption", ec->preemption,
			 "prefix_cache", ec->prefix_cache, "admission", ec->admission,
			 "predictor", ec->predictor, "tenants", o->tenants,
			 /* only when given (s*: no key for NULL), so earlier summaries stay byte for byte */
			 "weight_dtype", ec->weight_dtype ? ss_dtype_name(ec->weight_dtype) : NULL,
			 "kv_dtype", ec->kv_dtype ? ss_dtype_name(ec->kv_dtype) : NULL,
			 "kv_remote", ec->kv_remote);
	/* TensorRT-LLM's rule sized the KV cache: its fraction, in place of
	 * gpu_memory_utilization (0 then); vLLM's rule adds no key, so such
	 * summaries stay byte for byte */
	if (j && kv.memory == ENGINE_KV_FREE)
		json_object_set_new(j, "kv_free_fraction", json_real(kv.fraction));
	/* --workload (docs/workloads.md, "Workload models"): only when given */
	if (j && o->workload)
		json_object_set_new(j, "workload_model",
				    json_pack("{s:s, s:f, s:f, s:f}", "file", o->workload,
					      "rate_req_s", o->trace_rate, "prompt_scale",
					      o->prompt_scale ? o->prompt_scale : 1.0, "output_scale",
					      o->output_scale ? o->output_scale : 1.0));
	/* the serving stack (stack-profile.h) with every term, beside the
	 * engine: a run without one (live, --engine none) has no key, so its
	 * summary is byte for byte what it was before stacks */
	if (j && ec->stack && (o->stack || !stack_profile_empty(ec->stack))) {
		json_t *st = catalog_entry_json(stack_profile_fields, stack_profile_n_fields,
						ec->stack, CATALOG_JSON_EVERY);

		json_object_del(st, "source");
		json_object_set_new(j, "serving_stack", st);
	}
	/* --kv-offload: only when given, for the same reason */
	if (j && ec->kv_offload && strcmp(ec->kv_offload, "off") != 0)
		json_object_set_new(j, "kv_offload", json_string(ec->kv_offload));
	return j;
}

/* Is option F, the colocated one (o->F) or a pool's own, above 1? */
#define ANY_ABOVE_1(o, F) ((o)->F > 1 || (o)->pools[0].F > 1 || (o)->pools[1].F > 1)

/* Expert parallelism and DP attention of each pool, or "" when none has
 * either (the colocated one, or prefill and decode). */
static void describe_layout(const struct engine_config *ec, char *buf, size_t len)
{
	bool dis = engine_config_disaggregated(ec);

	buf[0] = 0;
	for (int k = 0; k < (dis ? ENGINE_POOLS : 1); k++) {
		struct engine_pool_config p = engine_pool_resolve(ec, k);
		int e = p.ep > 1 ? p.ep : 1, d = p.dp_attention > 1 ? p.dp_attention : 1;

		if (e == 1 && d == 1)
			continue;
		snprintf(buf + strlen(buf), len - strlen(buf),
			 "%s%s%sexpert parallelism %d, data-parallel attention %d: %d attention rank%s of %d GPU%s per instance",
			 buf[0] ? "; " : "", dis ? engine_pool_name(k) : "", dis ? ": " : "", e, d, d,
			 d == 1 ? "" : "s", p.tp / d, p.tp / d == 1 ? "" : "s");
	}
}

/* The wall clock of a live run: ns since the run started. */
struct wall {
	struct timespec t0;
};

static int64_t wall_now(void *ctx)
{
	struct wall *w = ctx;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)(ts.tv_sec - w->t0.tv_sec) * 1000000000LL + (ts.tv_nsec - w->t0.tv_nsec);
}

static void wall_sleep_until(void *ctx, int64_t t_ns)
{
	struct wall *w = ctx;
	struct timespec ts = w->t0;

	ts.tv_sec += t_ns / 1000000000LL;
	ts.tv_nsec += t_ns % 1000000000LL;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	/* a signal ends the wait: the engine then reads its stop flag */
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR &&
	       !cli_interrupted)
		;
}

/* Live runs: defaults, checks and the executor (docs/live.md). */
/* The batch sizes live captures as CUDA graphs: those of engine profile
 * --graphs (default run's default engine, the deployment a live run is
 * compared with), none for "none" or a profile without graphs. */
static int live_graphs(const struct cli_config *o, const struct catalog *cat,
		       const struct engine_profile **out, struct ss_error *err)
{
	return cli_engine_named(cat, o->graphs ? o->graphs : CLI_DEFAULT_ENGINE,
				"--graphs: unknown engine profile", out, err);
}

/* --backend names a registered kernel backend (built in or a module, which
 * may still be missing: that is a failed run, exit 1, not a bad name). */
static int live_backend_check(const char *name, struct ss_error *err)
{
	struct kernel_backend_info info[16];
	size_t n = kernel_backend_list(info, 16);
	char known[256] = "";

	for (size_t i = 0; i < n && i < 16; i++) {
		if (!strcmp(info[i].name, name))
			return 0;
		snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", i ? ", " : "",
			 info[i].name);
	}
	return ss_error_set(err, -EINVAL, NULL, 0, "--backend: unknown kernel backend '%s' (known: %s)",
			    name, known);
}

static int live_setup(const struct cli_config *o, const struct engine_profile *graphs,
		      struct engine_config *ec, struct live_exec **lx, struct live_exec **dlx,
		      struct model_spec *draft, struct ss_error *err)
{
	bool cpu = !o->backend || !strcmp(o->backend, "cpu");
	/* Test hooks from the environment (docs/live.md): only cli/ reads it. */
	const char *fail_at = getenv("SERVESIM_LIVE_FAIL_AT_STEP");
	struct live_config lc = {
		.model = ec->model, .backend = o->backend ? o->backend : "cpu",
		.threads = o->threads ? (int)o->threads : 1,
		.width_div = o->width_div ? (int)o->width_div : (cpu ? 8 : 1),
		.layers = o->layers ? (int)o->layers : (cpu ? 4 : 0),
		.block_size = engine_block_size(ec), .seed = (uint64_t)o->seed,
		.module_dir = cli_module_dir(),
		.powercap_root = getenv("SERVESIM_POWERCAP_ROOT"),
		.fail_at_step = fail_at ? strtoull(fail_at, NULL, 10) : 0,
		/* --lora: the synthetic model's adapter slots, as the
		 * simulation's GPU holds them (docs/lora.md, "Live") */
		.lora_slots = ec->lora ? ec->lora->max_loras : 0,
		.lora_max_rank = ec->lora ? ec->lora->max_rank : 0,
	};
	int32_t blocks;
	int rc;

	/* Decode-only steps as CUDA graphs at the sizes the engine profile
	 * captures (a backend without graphs ignores them; docs/live.md). */
	if (graphs && graphs->n_graph_sizes > 0) {
		lc.graph_sizes = graphs->graph_sizes;
		lc.n_graph_sizes = graphs->n_graph_sizes;
		lc.max_kv_len = ec->model->max_context;
	}
	if (ec->n_instances != 1 || ec->tp != 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "live runs use one instance on one device: expected --instances 1 --tp 1");
	if (strncmp(o->preemption, "recompute", 9) != 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--preemption %s: live runs preempt by recompute only (the synthetic model has no host KV copy path wired)",
				    o->preemption);
	if (o->power_cap_w > 0 || o->clock_frac > 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--power-cap and --gpu-clock are simulation options; a live run uses the device as it is");
	/* --kv-dtype fp8: the kernels' fp8 E4M3 cache (docs/kernels.md), so
	 * the pool engine_kv_capacity sizes at one byte per element is the
	 * cache the kernels read; quantised weights have no kernels */
	if (ec->weight_dtype > SS_DTYPE_BF16)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--weight-dtype %s: live runs compute with bf16 weights only (the live kernels have no fp8 or fp4 GEMM)",
				    ss_dtype_name(ec->weight_dtype));
	lc.kv_fp8 = ec->kv_dtype == SS_DTYPE_FP8;
	/* The synthetic cache holds the engine's whole KV pool.  On the CPU,
	 * where the pool sized for the GPU would be gigabytes, 4096 blocks
	 * unless --kv-blocks says otherwise. */
	rc = engine_kv_capacity(ec, &blocks, err);
	if (rc)
		return rc;
	if (cpu && o->kv_blocks == 0 && blocks > 4096)
		blocks = 4096;
	ec->kv_blocks_override = blocks;
	lc.kv_blocks = blocks;
	rc = live_exec_new(lx, &lc, err);
	if (rc)
		return rc;
	ec->executor = &executor_live_ops;
	ec->exec_priv = *lx;
	if (ec->spec && ec->spec->draft_priced) {
		/* the drafter runs its own kernels (docs/speculation.md "Live"):
		 * the draft model, scaled as the target is, or the target's one
		 * layer; its cache has the target's blocks, so it writes
		 * through the same block tables */
		*draft = ec->spec->draft;
		/* EAGLE-3's draft vocabulary (32,000 tokens) is a size of the
		 * real model, as the simulation of the scaled model (servesim
		 * loop) applies it: the scaled drafter keeps 32,000 */
		if (ec->spec->method == SPEC_EAGLE3 && lc.width_div > 1)
			draft->vocab = ec->model->vocab < 32000 * lc.width_div ?
				       ec->model->vocab : 32000 * lc.width_div;
		lc.model = draft;
		lc.layers = lc.layers && lc.layers < draft->n_layers ? lc.layers : 0;
		lc.seed = (uint64_t)o->seed + 1;
		lc.fail_at_step = 0;
		lc.powercap_root = NULL;
		rc = live_exec_new(dlx, &lc, err);
		if (rc)
			return rc;
		ec->draft_executor = &executor_live_ops;
		ec->draft_exec_priv = *dlx;
	}
	return 0;
}

/* Refuse a run whose estimate does not fit in ec->memory_limit_bytes, and
 * say what a large run will take before it starts.  Returns an exit status. */
static int check_memory(const struct cli_config *o, const struct engine_config *ec,
			uint64_t n_req, bool announce, struct ss_error *err)
{
	struct engine_memory m;
	char what[160];

	if (engine_memory_estimate(ec, n_req, &m, err))
		return cli_engine_status(err);   /* a configuration refused: exit 2 */
	if (engine_memory_refuse(&m, ec->memory_limit_bytes, err))
		return SS_EXIT_FAILURE;
	if (announce && !o->quiet && m.total_bytes > 1000000000ull) {
		engine_memory_describe(&m, what, sizeof(what));
		cli_errorf("this run needs %s", what);
	}
	return SS_EXIT_OK;
}

/* One run: what it reads, what it built, what it gave. */
struct run {
	struct cli_config o;
	bool live;
	struct catalog cat;
	struct workload wl;
	struct engine_config ec;
	struct live_exec *lx;
	struct live_exec *dlx;       /* live with --spec: the drafter's executor */
	struct model_spec draft_live;/* ... and the drafter's model it runs */
	struct wall wall;
	struct engine_clock clock;
	struct engine *eng;
	struct engine_results res;
	struct summary sum;
	bool failed;                 /* a live run stopped early (run_err says why) */
	int interrupted;             /* the signal that stopped the engine, 0 = none */
	struct cli_progress progress;   /* requests done of the workload's */
	struct ss_error run_err;
	const char *energy_meter;
	bool energy_metered;
	const struct engine_profile *graphs;   /* live: --graphs, NULL for none */
	char engine_policy_from[96];  /* "engine vllm's default": who chose ec->policy */
	struct stack_profile stack;   /* the serving stack (cli_resolve_stack); ec.stack points here */
	const char *stack_spec;       /* as the summary names it */
	struct spec_config spec;      /* --spec resolved; ec.spec points here when given */
	struct lora_config lora;      /* --lora resolved; ec.lora points here when given */
	struct wl_context context;    /* requests longer than the context (cli_context_apply) */
	int out_lock;                 /* --out's writer lock (report_lock_dir), -1: none */
	char notes[4][CLI_NOTE_LEN];  /* options without effect (cli_effect_notes) */
	size_t n_notes;
	char *command_line;          /* as typed, for report.html (html_command_line) */
};

/* Catalogs, workload and engine configuration from the options.  Returns
 * an exit status; err is set when it is not 0. */
static int build(struct run *r, struct ss_error *err)
{
	struct cli_config *o = &r->o;
	struct engine_config *ec = &r->ec;
	struct workload_spec ws;
	uint64_t n_req;
	int status;

	if (cli_load_catalog(&r->cat, o->model_catalog, o->gpu_catalog, o->engine_catalog, err) ||
	    cli_load_model_config(o, &r->cat, err) ||
	    (o->engine_store && cli_load_engine_store(o->engine_store, &r->cat, err)) ||
	    (o->interval_catalog && catalog_load_intervals(&r->cat, o->interval_catalog, err)))
		return SS_EXIT_FAILURE;
	if (cli_apply_prices(o, &r->cat, err))
		return SS_EXIT_USAGE;
	cli_engine_config(o, ec);
	/* "auto" prices a GPU without tables from its family's ("scaled") */
	ec->ref_gpus = r->cat.gpus;
	ec->n_ref_gpus = r->cat.n_gpus;
	{
		char hint[256];

		/* names as typed (--gpu H100, --model meta-llama/Llama-3.1-70B-Instruct):
		 * the catalog's entry, whose own name is used from here on */
		ec->model = catalog_model_find(&r->cat, o->model, hint, sizeof(hint));
		if (ec->model)
			ec->gpu = catalog_gpu_find(&r->cat, o->gpu, hint, sizeof(hint));
		if (!ec->model || !ec->gpu) {
			ss_error_set(err, -EINVAL, NULL, 0, "unknown %s '%s' (%s%ssee `servesim list %s`)",
				     ec->model ? "GPU" : "model", ec->model ? o->gpu : o->model,
				     hint, hint[0] ? " " : "", ec->model ? "gpus" : "models");
			return SS_EXIT_USAGE;
		}
		o->model = ec->model->name;
		o->gpu = ec->gpu->name;
	}
	if (cli_resolve_engine(o, &r->cat, &ec->engine, err))
		return SS_EXIT_USAGE;
	if (!r->live) {
		status = cli_resolve_stack(o, &r->cat, ec->engine, &r->stack, &r->stack_spec, err);
		if (status)
			return status;
		ec->stack = &r->stack;
	}
	if (o->spec && strcmp(o->spec, "off") != 0) {
		if (spec_config_parse(&r->spec, o->spec, &r->cat, ec->model, err))
			return SS_EXIT_USAGE;
		ec->spec = &r->spec;
	}
	if (o->lora && strcmp(o->lora, "off") != 0) {
		if (lora_config_parse(&r->lora, o->lora, err) ||
		    lora_model_check(&r->lora, ec->model, err))
			return SS_EXIT_USAGE;
		ec->lora = &r->lora;
	}
	if (r->live && live_graphs(o, &r->cat, &r->graphs, err))
		return SS_EXIT_USAGE;
	if (r->live && o->backend && live_backend_check(o->backend, err))
		return SS_EXIT_USAGE;
	{
		/* a stage holds at least one layer (docs/cost-models.md) */
		char opt[32];

		for (int k = -1; k < ENGINE_POOLS; k++) {
			int64_t pp = k < 0 ? o->pp : o->pools[k].pp;

			if (pp > ec->model->n_layers) {
				ss_error_set(err, -EINVAL, NULL, 0,
					     "%s: expected at most %s's %d layers as pipeline stages, got %" PRId64,
					     engine_pool_option(k, "pp", opt, sizeof(opt)), ec->model->name,
					     ec->model->n_layers, pp);
				return SS_EXIT_USAGE;
			}
		}
		if (ANY_ABOVE_1(o, pp) && ANY_ABOVE_1(o, dp_attention)) {
			ss_error_set(err, -EINVAL, NULL, 0,
				     "--pp with --dp-attention: not modelled yet (pipelines of attention ranks that run their MoE layers together)");
			return SS_EXIT_USAGE;
		}
		if (o->semi_pd_sm > 0 && ANY_ABOVE_1(o, pp)) {
			ss_error_set(err, -EINVAL, NULL, 0,
				     "--semi-pd with --pp: not modelled (a semi-PD instance is one GPU's share)");
			return SS_EXIT_USAGE;
		}
	}
	{
		/* the engine's own batching rules, unless --policy was given */
		struct engine_config d;

		engine_config_defaults(&d);
		if (ec->engine && ec->engine->policy[0] && o->policy == d.policy) {
			ec->policy = ec->engine->policy;
			snprintf(r->engine_policy_from, sizeof(r->engine_policy_from),
				 "engine %s's default", ec->engine->name);
		}
	}
	if (cli_workload_spec(o, &ws, err))
		return SS_EXIT_USAGE;
	for (int k = 0; k < ENGINE_POOLS; k++)
		if (o->pools[k].gpu && !(ec->pools[k].gpu = catalog_gpu(&r->cat, o->pools[k].gpu))) {
			ss_error_set(err, -EINVAL, NULL, 0,
				     "--%s-gpu: unknown GPU '%s' (see `servesim list gpus`)",
				     engine_pool_name(k), o->pools[k].gpu);
			return SS_EXIT_USAGE;
		}
	/* the layouts (--ep, --dp-attention, per pool) are command-line
	 * choices: a bad one is a usage error (exit 2) */
	if (cost_layout_check(ec->model, ec->tp, ec->ep, ec->dp_attention, "--tp", "--ep",
			      "--dp-attention", err))
		return SS_EXIT_USAGE;
	for (int k = 0; k < ENGINE_POOLS && engine_config_disaggregated(ec); k++) {
		const struct engine_pool_config *own = &ec->pools[k];
		struct engine_pool_config p = engine_pool_resolve(ec, k);
		char opt[3][32];

		if (cost_layout_check(ec->model, p.tp, p.ep, p.dp_attention,
				      engine_pool_option(own->tp ? k : -1, "tp", opt[0], sizeof(opt[0])),
				      engine_pool_option(own->ep ? k : -1, "ep", opt[1], sizeof(opt[1])),
				      engine_pool_option(own->dp_attention ? k : -1, "dp-attention",
							 opt[2], sizeof(opt[2])), err))
			return SS_EXIT_USAGE;
	}
	/* attention ranks step in lock-step, one step at a time
	 * (engine-sched.c): a multi-step profile is refused with them */
	if (engine_profile_burst(ec->engine) > 1 && ANY_ABOVE_1(o, dp_attention)) {
		char opt[32];

		ss_error_set(err, -EINVAL, NULL, 0,
			     "%s with engine %s's multi-step scheduling (scheduler_steps=%u): not modelled",
			     engine_pool_option(o->dp_attention > 1 ? -1 :
						o->pools[0].dp_attention > 1 ? 0 : 1, "dp-attention",
						opt, sizeof(opt)),
			     ec->engine->name, engine_profile_burst(ec->engine));
		return SS_EXIT_USAGE;
	}
	/* speculative decoding with what it is not modelled with yet */
	if (engine_spec_check(ec, err) || engine_lora_check(ec, err))
		return SS_EXIT_USAGE;
	/* Memory: refuse before generating or reading a workload that would
	 * not fit, and again once its size is known. */
	ec->memory_limit_bytes = cli_memory_limit();
	if (workload_spec_requests(&ws, &n_req, err))
		return SS_EXIT_USAGE;
	if (n_req > 0 && (status = check_memory(o, ec, n_req, false, err)))
		return status;
	/* a bad file is named in err (exit 1); a bad --arrival, --lengths or
	 * --tenants is not (exit 2) */
	if (workload_build(&r->wl, &ws, err))
		return cli_engine_status(err);
	if (cli_context_apply(o, engine_max_context(ec), &r->wl, &r->context, err))
		return SS_EXIT_USAGE;
	/* a serving benchmark result replayed (docs/workloads.md) */
	if (!o->quiet && r->wl.closed_loop_clients && !ec->concurrency)
		cli_errorf("note: %s was measured closed loop with %u clients (max_concurrency); "
			   "its requests are replayed open loop at their recorded send times "
			   "(--concurrency %u replays the closed loop)",
			   r->wl.source, r->wl.closed_loop_clients, r->wl.closed_loop_clients);
	cli_source_model_note(o, &r->cat, &r->wl, ec->model);
	if (!o->quiet && r->wl.failed_skipped)
		cli_errorf("note: %zu requests that failed in %s are left out",
			   r->wl.failed_skipped, r->wl.source);
	if ((status = check_memory(o, ec, r->wl.n, true, err)))
		return status;
	if (r->live) {
		/* what --lora cannot do live is a bad command line, refused
		 * before the kernels load (live_setup sets the executor again) */
		ec->executor = &executor_live_ops;
		if (engine_lora_check(ec, err))
			return SS_EXIT_USAGE;
		ec->executor = NULL;
		/* Steps are timed, not predicted; the cost model still gives the
		 * policies their prefill_ns estimates, the same as a simulated
		 * run of this configuration gets. */
		if (live_setup(o, r->graphs, ec, &r->lx, &r->dlx, &r->draft_live, err))
			return SS_EXIT_FAILURE;
		r->clock = (struct engine_clock){ wall_now, wall_sleep_until, &r->wall };
		ec->clock = &r->clock;
	}
	return SS_EXIT_OK;
}

/* --out: its writer's lock, taken before the run (a second run on the
 * same directory is refused now, not after its simulation) and held until
 * the files are written (docs/outputs.md, "One writer per directory"). */
static int lock_out(struct run *r, struct ss_error *err)
{
	if (!r->o.out)
		return SS_EXIT_OK;
	r->out_lock = report_lock_dir(r->o.out, err);
	return r->out_lock < 0 ? SS_EXIT_FAILURE : SS_EXIT_OK;
}

/* Run the engine and summarise.  A live run that fails (a kernel error)
 * keeps what it recorded: its results are summarised, marked failed; a
 * simulation that fails is a bug and summarises nothing. */
static int simulate(struct run *r, struct ss_error *err)
{
	int rc;

	/* SIGINT / SIGTERM from here on stop the engine at its next event
	 * (before, nothing has been written: the default action is fine) */
	r->ec.stop = &cli_interrupted;
	if (engine_new(&r->eng, &r->ec, &r->wl, err))
		return cli_engine_status(err);
	/* on a terminal a line with an ETA, in a log a status line now and
	 * then (cli/progress.h); a closed loop's total is what it sends */
	cli_progress_start(&r->progress, r->live ? "live" : "run", "requests", r->wl.n, r->o.quiet);
	if (r->progress.on)
		engine_set_progress(r->eng, progress, &r->progress);
	if ((rc = cli_interrupt_install())) {
		ss_error_set(err, rc, NULL, 0, "sigaction: %s", strerror(-rc));
		return SS_EXIT_FAILURE;
	}
	clock_gettime(CLOCK_MONOTONIC, &r->wall.t0);
	rc = engine_run(r->eng, &r->run_err);
	cli_progress_end(&r->progress);
	if (rc) {
		if (rc == -EINTR && cli_interrupted) {
			r->interrupted = cli_interrupted;
		} else if (!r->live) {
			*err = r->run_err;
			return SS_EXIT_FAILURE;
		} else {
			r->failed = true;
		}
	}
	engine_results(r->eng, &r->res);
	r->energy_metered = true;
	if (r->live) {
		/* Live steps' energy is metered where the backend has a meter
		 * (docs/live.md); the results' cost model, operator backends
		 * and idle power come from the live executor (its identity). */
		double idle_j;

		r->energy_metered = live_exec_energy(r->lx, &idle_j, &r->energy_meter);
	}
	if (summary_compute(&r->sum, &r->res, &r->o.slo, r->ec.tp, err))
		return SS_EXIT_FAILURE;
	/* a simulated run's figures are predictions: their interval
	 * (docs/metrics.md "Intervals"); a live run's are measured */
	if (!r->live)
		summary_interval_set(&r->sum, &r->cat,
				     r->ec.engine && catalog_engine_shipped(&r->cat, r->ec.engine->name),
				     r->sum.cost_model ? r->sum.cost_model : r->ec.cost_model);
	/* steps that ran on the host used no GPU: --gpu's price is not theirs
	 * (cost 0 = none: null in summary.json, no cost line) */
	if (r->lx && live_exec_host(r->lx)) {
		r->sum.cost_usd_per_hour = 0;
		r->sum.cost_usd = 0;
		r->sum.usd_per_million_output_tokens = 0;
	}
	return SS_EXIT_OK;
}

static void describe_pools(const struct engine_config *ec, char *buf, size_t len)
{
	if (ec->semi_pd_sm > 0)
		snprintf(buf, len, "semi-PD on %u x %d %s, %.0f%% of compute and %.0f%% of KV to prefill",
			 ec->n_instances, ec->tp, ec->gpu->name, 100 * ec->semi_pd_sm, 100 * ec->semi_pd_kv);
	else if (engine_config_disaggregated(ec)) {
		struct engine_pool_config p[ENGINE_POOLS];
		char pps[ENGINE_POOLS][24] = { "", "" };

		for (int k = 0; k < ENGINE_POOLS; k++) {
			p[k] = engine_pool_resolve(ec, k);
			if (p[k].pp > 1)
				snprintf(pps[k], sizeof(pps[k]), " x pp %d", p[k].pp);
		}
		snprintf(buf, len, "%u prefill x %d %s%s + %u decode x %d %s%s, pairing %s%s",
			 p[0].n, p[0].tp, p[0].gpu->name, pps[0], p[1].n, p[1].tp, p[1].gpu->name,
			 pps[1], ec->pairing ? ec->pairing : "lor",
			 ec->kv_overlap ? ", layer-wise overlap" : "");
	}
}

/* Whether the summary names the run's serving stack: given by --stack,
 * or one that adds latency (not none behind --engine none, nor live's). */
static bool run_has_stack(const struct run *r)
{
	return r->ec.stack && (r->o.stack || !stack_profile_empty(r->ec.stack));
}

/* The serving stack as the summary names it (struct stack_item): each
 * choice as it would be given on the command line, and "default" (or what
 * else chose it) where the user did not give it.  Defaults are told by
 * address: an option not given still points at engine_config_defaults()'s
 * string (cli/options.c, set_defaults). */
static void describe_stack(const struct run *r, struct run_info *ri)
{
	const struct cli_config *o = &r->o;
	const struct engine_config *ec = &r->ec;
	struct engine_config d;
	const char *def = "default";
	const char *engine = ec->engine ? ec->engine->name : "none";
	bool offload = ec->kv_offload && strcmp(ec->kv_offload, "off") != 0;
	int n = 0;

	engine_config_defaults(&d);
#define ITEM(k, l, sp, fr) \
	(ri->stack[n++] = (struct stack_item){ .key = (k), .label = (l), .spec = (sp), \
					       .from = (fr) })
	/* the policy the engine profile brings, unless --policy was given (build) */
	ITEM("policy", "policy", ec->policy,
	     o->policy != d.policy ? NULL : ec->policy != d.policy ? r->engine_policy_from : def);
	/* disaggregated pools launched with their own limits (engine-obs.c) */
	for (int k = 0; k < ENGINE_POOLS; k++)
		if (engine_config_disaggregated(ec) && ec->pools[k].policy)
			ITEM(k ? "decode_policy" : "prefill_policy", k ? "decode policy" : "prefill policy",
			     ec->pools[k].policy, NULL);
	ITEM("order", "order", ec->order, o->order == d.order ? def : NULL);
	/* without --predictor the engine picks: the oracle where the order or
	 * the batch policy reads predictions (engine-setup.c) */
	ITEM("predictor", "predictor", r->sum.predictor ? r->sum.predictor : "none",
	     o->predictor ? NULL : r->sum.predictor && strcmp(r->sum.predictor, "none") ?
	     "default where the order or policy reads predictions" : def);
	ITEM("victim", "victim", ec->victim, o->victim == d.victim ? def : NULL);
	ITEM("preemption", "preemption", offload && o->preemption == d.preemption ? "swap" :
	     ec->preemption, o->preemption == d.preemption ? offload ? "--kv-offload" : def : NULL);
	ITEM("admission", "admission", ec->admission, o->admission == d.admission ? def : NULL);
	ITEM("router", "router", ec->router, o->router == d.router ? def : NULL);
	if (engine_config_disaggregated(ec))
		ITEM("pairing", "pairing", ec->pairing ? ec->pairing : "lor",
		     o->pairing ? NULL : def);
	/* --kv-offload turns the prefix cache and swapping on (sim/kvm-host.c) */
	ITEM("prefix_cache", "prefix cache", offload && o->prefix_cache == d.prefix_cache ?
	     "on" : ec->prefix_cache,
	     o->prefix_cache == d.prefix_cache ? offload ? "--kv-offload" : def : NULL);
	if (offload)
		ITEM("kv_offload", "KV offload", ec->kv_offload, NULL);
	/* run's default profile is vllm, live's none (its loop is the engine) */
	ITEM("engine", "engine", engine,
	     !strcmp(engine, r->live ? "none" : CLI_DEFAULT_ENGINE) ? def : NULL);
	/* the serving stack: the engine profile's unless --stack was given;
	 * said where it adds something or was given, so that a run without
	 * one (--engine none) reads as before stacks */
	if (run_has_stack(r))
		ITEM("serving_stack", "serving stack", r->stack_spec, o->stack ? NULL :
		     r->stack.legacy ? "the engine profile's api_in_ms, api_out_ms and api_cv" : def);
#undef ITEM
	ri->n_stack = n;
}

/* Write --out and print the summary.  Returns an exit status. */
static int report(struct run *r, struct ss_error *err)
{
	const struct cli_config *o = &r->o;
	const struct engine_config *ec = &r->ec;
	struct plot_outcome plots = { 0 };
	char warn[700];
	char pools[256];
	char layout[320];
	char think[96] = "none";
	char precision[192];
	char kv_rule[320];
	struct engine_kv_rule kv;
	struct run_info ri;
	struct session_summary sessions;
	json_t *cfg = config_json(o, &r->wl, ec, &o->slo), *notes = NULL;

	/* requests longer than the context, or a context given: only then,
	 * so that other summaries stay byte for byte */
	if (cfg && (r->context.over || o->max_context))
		json_object_set_new(cfg, "context", report_context_json(&r->context));
	int status = SS_EXIT_FAILURE;

	if (r->lx)
		json_object_set_new(cfg, "live_executor", json_string(live_exec_describe(r->lx)));
	if (o->concurrency) {
		struct think_time tt;

		/* parsed when the options were (cli_parse): cannot fail here */
		if (think_time_parse(o->think_time, &tt, err))
			goto out;
		think_time_describe(&tt, think, sizeof(think));
		json_object_set_new(cfg, "concurrency", json_integer(o->concurrency));
		json_object_set_new(cfg, "think_time", json_string(o->think_time ? o->think_time : "none"));
		json_object_set_new(cfg, "ramp_up_s", json_real((double)o->ramp_ns / 1e9));
	}
	describe_pools(ec, pools, sizeof(pools));
	describe_layout(ec, layout, sizeof(layout));
	/* the KV rule, said unless it is vLLM's default one (0.9 of GPU
	 * memory, blocks of 16 tokens) */
	engine_kv_rule_of(ec, &kv);
	{
		char rule[256];

		engine_kv_rule_describe(ec, rule, sizeof(rule));
		snprintf(kv_rule, sizeof(kv_rule), "KV cache sized by %s, blocks of %d tokens", rule,
			 engine_block_size(ec));
	}
	if (layout[0]) {
		char key[64];

		json_object_set_new(cfg, "ep", json_integer(ec->ep > 1 ? ec->ep : 1));
		json_object_set_new(cfg, "dp_attention",
				    json_integer(ec->dp_attention > 1 ? ec->dp_attention : 1));
		/* each pool's own layout fields (sim/engine-pool.def), as
		 * given (0 = the colocated option's) */
#define LAYOUT_INT(name, layout) \
	for (int k = 0; layout && k < ENGINE_POOLS && engine_config_disaggregated(ec); k++) { \
		snprintf(key, sizeof(key), "%s_" #name, engine_pool_name(k)); \
		json_object_set_new(cfg, key, json_integer(ec->pools[k].name)); \
	}
#define LAYOUT_GPU(name, layout)
#define LAYOUT_STR(name, layout)
#define ENGINE_POOL_FIELD(kind, type, name, opt, arg, fit, layout, ...) LAYOUT_##kind(name, layout)
#include "engine-pool.def"
#undef ENGINE_POOL_FIELD
#undef LAYOUT_INT
#undef LAYOUT_GPU
#undef LAYOUT_STR
	}
	ri = (struct run_info){
		.version = SERVESIM_VERSION, .mode = r->live ? "live" : "sim", .seed = (uint64_t)o->seed,
		.model = ec->model->name, .gpu = ec->gpu->name, .tp = ec->tp,
		.n_instances = ec->n_instances, .policy = ec->policy, .router = ec->router,
		.cost_model = r->live ? "live" : ec->cost_model, .workload = r->wl.source, .config = cfg,
		.concurrency = (uint32_t)o->concurrency, .think_time = think, .ramp_ns = o->ramp_ns,
		.status = r->failed ? r->run_err.msg : NULL,
		.energy_meter = r->energy_meter, .energy_metered = r->energy_metered,
		.pools = engine_config_disaggregated(ec) || ec->semi_pd_sm > 0 ? pools : NULL,
		.precision = model_weights_dtype(ec->model, ec->weight_dtype) || ec->kv_dtype ?
			     precision : NULL,
		.layout = layout[0] ? layout : NULL,
		.kv_rule = strcmp(kv.from, "default") ||
			   engine_block_size(ec) != ENGINE_BLOCK_SIZE_DEFAULT ? kv_rule : NULL,
		.pp = ec->pp,
		.backend = r->lx ? live_exec_device(r->lx) : NULL,
		.model_run = r->lx ? live_exec_model(r->lx) : NULL,
		.interrupted = r->interrupted ? cli_interrupt_name(r->interrupted) : NULL,
		.command_line = r->command_line,
	};
	describe_stack(r, &ri);
	/* options that had no effect on this workload: summary.json's notes,
	 * and stderr after the run (run_main) */
	r->n_notes = cli_effect_notes(o, &r->wl, engine_uses_predictions(r->eng), r->notes, 4);
	if (r->n_notes && (notes = json_array()))
		for (size_t k = 0; k < r->n_notes; k++)
			json_array_append_new(notes, json_string(r->notes[k] + strlen("note: ")));
	ri.notes = notes;
	if (r->wl.sess) {
		if (session_summary_compute(&sessions, &r->wl, r->res.req, r->res.n_req)) {
			ss_error_set(err, -ENOMEM, NULL, 0,
				     "out of memory for the session metrics");
			goto out;
		}
		ri.sessions = &sessions;
		ri.session_calls = r->wl.sess;
		if (o->sessions)
			json_object_set_new(cfg, "sessions", json_string(o->sessions));
	}
	if (cli_verbose) {
		/* -v: what was resolved (docs/servesim.1.md, CONVENTIONS) */
		cli_verbosef("workload %s (%s): %zu requests", r->wl.source,
			     o->trace ? trace_format_name(r->wl.format) : "generated", r->wl.n);
		cli_verbosef("model %s; GPU %s, tp %d, %u instance%s%s%s", ec->model->name, ec->gpu->name,
			     ec->tp, ec->n_instances, ec->n_instances == 1 ? "" : "s",
			     engine_config_disaggregated(ec) ? "; pools " : "",
			     engine_config_disaggregated(ec) ? pools : "");
		cli_verbosef("cost model %s for %s (--cost-model %s%s%s%s)",
			     r->sum.cost_model ? r->sum.cost_model : "?", ec->gpu->name, ec->cost_model,
			     r->sum.cost_reference ? "; " : "",
			     r->sum.cost_reference ? r->sum.cost_reference : "",
			     r->sum.cost_reference ? "'s tables x the roofline" : "");
		/* the operators timed by another backend than the cost model's */
		for (int op = 0; op < (ec->lora ? COST_OP_COUNT : COST_OP_LORA); op++)
			if (r->sum.op_backend[op] && r->sum.cost_model &&
			    strcmp(r->sum.op_backend[op], r->sum.cost_model))
				cli_verbosef("  %s: %s", cost_op_name((enum cost_op)op),
					     r->sum.op_backend[op]);
		for (int k = 0; k < ri.n_stack; k++)
			cli_verbosef("stack %s: %s (%s)", ri.stack[k].label, ri.stack[k].spec,
				     ri.stack[k].from ? ri.stack[k].from : "given");
	}
	{
		/* a GPU without fp8 / fp4 tensor cores runs the weights
		 * weight-only (precision.h): say so, naming the GPU */
		const struct gpu_spec *gs[3] = { ec->gpu, ec->pools[0].gpu, ec->pools[1].gpu };
		const struct gpu_spec *wo = NULL;
		/* no --weight-dtype: the model's checkpoint's, said so */
		enum ss_dtype wd = model_weights_dtype(ec->model, ec->weight_dtype);

		for (int k = 0; k < 3 && !wo; k++)
			if (gs[k] && gpu_weight_only(gs[k], wd))
				wo = gs[k];
		bool ckpt = wd && !ec->weight_dtype;

		snprintf(precision, sizeof(precision), "weights %s%s%s%s%s%s%s, KV %s",
			 wd ? ss_dtype_name(wd) : "in the model's dtype",
			 ckpt || wo ? " (" : "", ckpt ? "the model's checkpoint" : "",
			 ckpt && wo ? "; " : "",
			 wo ? (wd == SS_DTYPE_FP8 ? "weight-only W8A16 on " : "weight-only W4A16 on ") : "",
			 wo ? wo->name : "", ckpt || wo ? ")" : "",
			 ec->kv_dtype ? ss_dtype_name(ec->kv_dtype) : "in the model's dtype");
	}
	if (o->out && report_write_dir(o->out, &r->sum, &ri, &r->res, &plots, err))
		goto out;   /* run_main prints err */
	if (plot_outcome_warning(&plots, o->out, warn, sizeof(warn)))
		cli_errorf("%s", warn);
	if (o->json) {
		json_t *j = report_summary_json(&r->sum, &ri);

		if (!j || json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS |
					       JSON_REAL_PRECISION(10))) {
			json_decref(j);
			cli_errorf("could not write the JSON summary");
			goto out;
		}
		fputc('\n', stdout);
		json_decref(j);
	} else if (!o->quiet) {
		report_summary_text(stdout, &r->sum, &ri);
		if (o->out)
			printf("\nresults written to %s/\n", o->out);
	}
	if (r->failed) {
		char msg[1024];

		ss_error_format(&r->run_err, msg, sizeof(msg));
		cli_errorf("%s; the live run stopped early, results so far %s%s", msg,
			   o->out ? "written (marked failed) to " : "printed above", o->out ? o->out : "");
		goto out;
	}
	status = SS_EXIT_OK;
	/* stopped by a signal, or one came while the results were written
	 * (they are complete then): say so, and exit as the signal asked */
	if (cli_interrupted) {
		const char *sig = cli_interrupt_name(cli_interrupted);
		const char *where = o->out ? o->out : o->json ? "on standard output" :
				    o->quiet ? "not kept (no --out)" : "printed above";

		if (r->interrupted)
			cli_errorf("interrupted by %s after %" PRIu64 " of %zu requests; results so far %s%s",
				   sig, r->sum.requests - r->sum.unfinished, r->wl.n,
				   o->out ? "in " : "", where);
		else
			cli_errorf("interrupted by %s after the run completed (all %zu requests); results %s%s",
				   sig, r->wl.n, o->out ? "in " : "", where);
		status = cli_interrupt_status(cli_interrupted);
	}
out:
	json_decref(notes);
	json_decref(cfg);
	return status;
}

/* parse -> build -> run -> report */
static int run_main(int argc, char **argv, const struct cli_command *cmd)
{
	struct run *r = calloc(1, sizeof(*r));
	struct ss_error err = { 0 };
	int status;

	if (!r) {
		cli_errorf("out of memory");
		return SS_EXIT_FAILURE;
	}
	r->live = cmd->id == CLI_LIVE;
	r->out_lock = -1;
	/* before cli_parse(): getopt permutes argv */
	r->command_line = html_command_line(r->live ? "servesim live" : "servesim run", argc, argv);
	catalog_init(&r->cat);
	workload_init(&r->wl);
	status = cli_parse(cmd, argc, argv, &r->o, true, &err);
	if (status == CLI_HELP_SHOWN)
		status = SS_EXIT_OK;
	else if (status)
		status = SS_EXIT_USAGE;
	else if (!(status = build(r, &err)) && !(status = lock_out(r, &err)) &&
		 !(status = simulate(r, &err)))
		status = report(r, &err);
	if (status == SS_EXIT_OK) {
		/* a slice of a trace unlike the whole: a warning after a run
		 * that succeeded, so a failure stays one line (docs/workloads.md) */
		struct wl_slice sl;

		cli_slice_check(&r->o, &r->wl, r->o.quiet, &sl);
		/* not after --help: nothing was built */
		if (r->ec.model)
			cli_context_note(&r->o, r->ec.model->name, &r->context, 0);
		for (size_t k = 0; k < r->n_notes && !r->o.quiet; k++)
			cli_errorf("%s", r->notes[k]);
	}
	if (status && err.msg[0])
		cli_error(&err);
	ss_dir_unlock(r->out_lock);
	engine_free(r->eng);
	live_exec_free(r->lx);
	live_exec_free(r->dlx);
	workload_release(&r->wl);
	catalog_release(&r->cat);
	free(r->command_line);
	free(r);
	return status;
}

int cmd_run(int argc, char **argv)
{
	return run_main(argc, argv, &cli_cmd_run);
}

int cmd_live(int argc, char **argv)
{
	return run_main(argc, argv, &cli_cmd_live);
}

int cli_run_collect(int argc, char **argv, bool check_only,
		    void (*take)(void *ctx, const struct summary *s), void *ctx,
		    char *note, size_t note_len, struct ss_error *err)
{
	struct run *r = calloc(1, sizeof(*r));
	int status;

	if (!r) {
		ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		return SS_EXIT_FAILURE;
	}
	catalog_init(&r->cat);
	workload_init(&r->wl);
	status = cli_parse(&cli_cmd_run, argc, argv, &r->o, false, err);
	if (status == CLI_HELP_SHOWN) {
		ss_error_set(err, -EINVAL, NULL, 0, "--help: not an option of a run");
		status = SS_EXIT_USAGE;
	} else if (status) {
		status = SS_EXIT_USAGE;
	} else if (!(status = build(r, err))) {
		if (check_only) {
			/* what engine_new() refuses (an unknown policy, a
			 * parameter out of range) is refused now, not later */
			if (engine_new(&r->eng, &r->ec, &r->wl, err))
				status = cli_engine_status(err);
			if (note && note_len && !cli_context_text(&r->o, r->ec.model->name, &r->context,
								  0, note, note_len))
				note[0] = '\0';
			/* and the options without effect, a line each */
			if (!status && note && note_len) {
				char fx[4][CLI_NOTE_LEN];
				size_t n = cli_effect_notes(&r->o, &r->wl, engine_uses_predictions(r->eng),
							    fx, 4);

				for (size_t k = 0; k < n; k++)
					snprintf(note + strlen(note), note_len - strlen(note), "%s%s",
						 note[0] ? "\n" : "", fx[k]);
			}
		} else if (!(status = simulate(r, err))) {
			if (r->interrupted)
				status = cli_interrupt_status(r->interrupted);
			else if (r->o.out)
				status = report(r, err);
			if (!status && take)
				take(ctx, &r->sum);
		}
	}
	engine_free(r->eng);
	live_exec_free(r->lx);
	live_exec_free(r->dlx);
	workload_release(&r->wl);
	catalog_release(&r->cat);
	free(r);
	return status;
}
