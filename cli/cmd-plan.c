/* servesim plan — capacity planning over a space of deployments
 * (docs/plan.md).
 *
 * Parse the options (one table, as `servesim run` does), load the catalogs
 * and the workload once, enumerate the configurations, skip those the
 * database already holds, evaluate the rest (in this process, in -j
 * workers, or over MPI ranks), then write plan.json, plan.csv and the
 * plots and print the table.  Every option is checked before anything
 * runs; errors are one line; no output file exists until the plan is
 * complete.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "config.h"
#include "engine.h"
#include "metrics.h"
#include "params.h"
#include "plan-run.h"
#include "plan.h"
#include "workload.h"

enum {
	O_TRACE = 256, O_FORMAT, O_ARRIVAL, O_LENGTHS, O_NUM_REQUESTS, O_DURATION,
	O_RATE_SCALE, O_SEED, O_TENANTS, O_MODEL, O_GPUS, O_TP, O_INSTANCES, O_MAX_GPUS,
	O_MODES, O_PD_RATIOS, O_MIXED_POOLS, O_POLICIES, O_CHUNK, O_MAX_BATCH, O_ROUTER, O_PAIRING,
	O_KV_OVERLAP, O_ORDER, O_PREEMPTION, O_PREFIX_CACHE, O_COST_MODEL, O_CALIBRATION,
	O_MODEL_CATALOG, O_GPU_CATALOG, O_GPU_MEM_UTIL, O_BLOCK_SIZE, O_SLO, O_TARGET,
	O_BUDGET, O_TOLERANCE, O_MAX_PROBES, O_MIN_SPAN, O_JOBS, O_OUT, O_DB, O_TOP, O_PARETO_COST,
	O_PARETO_LATENCY, O_DRY_RUN, O_JSON, O_QUIET, O_HELP,
};

struct opt_doc {
	const char *name;
	int id;
	const char *arg;     /* NULL for flags */
	const char *help;
};

static const struct opt_doc opts[] = {
	{ "trace", O_TRACE, "FILE", "replay a trace (as `servesim run`; default: the shipped Azure 2023 sample)" },
	{ "format", O_FORMAT, "NAME", "trace format instead of detecting it" },
	{ "arrival", O_ARRIVAL, "SPEC", "poisson:rate=R | gamma:rate=R,cv=C (requests/s)" },
	{ "lengths", O_LENGTHS, "SPEC", "fixed:... | uniform:... | lognormal:... | geometric:... | empirical:FILE" },
	{ "num-requests", O_NUM_REQUESTS, "N", "keep the first N requests (every probe replays the same N)" },
	{ "duration", O_DURATION, "S", "keep requests arriving in the first S seconds (before any scaling)" },
	{ "rate-scale", O_RATE_SCALE, "X", "scale the workload's rate by X first: scale 1 of the plan (default 1)" },
	{ "seed", O_SEED, "N", "seed for every random stream (default 0)" },
	{ "tenants", O_TENANTS, "SPEC", "assign tenants: N or weights W0,W1,... (as `servesim run`)" },
	{ "model", O_MODEL, "NAME", "model from the catalog (default llama-3.1-8b)" },
	{ "gpus", O_GPUS, "LIST", "candidate GPU types, e.g. h100-sxm,a100-80gb-sxm (default h100-sxm)" },
	{ "tp", O_TP, "LIST", "tensor-parallel sizes to try, e.g. 1,2,4 (default 1)" },
	{ "instances", O_INSTANCES, "LIST", "instance counts to try (default 1,2,4,... up to --max-gpus / tp)" },
	{ "max-gpus", O_MAX_GPUS, "N", "largest cluster in GPUs (default 8, the --budget GPUs, or what --instances needs)" },
	{ "modes", O_MODES, "LIST", "colocated and/or disaggregated (default colocated,disaggregated)" },
	{ "pd-ratios", O_PD_RATIOS, "LIST", "disaggregated prefill:decode ratios, e.g. 1:1,1:3 (default every split)" },
	{ "mixed-pools", O_MIXED_POOLS, NULL, "disaggregated: also prefill and decode pools of different GPU types or tp" },
	{ "policies", O_POLICIES, "LIST", "batch policies: vllm, vllm-v0, sarathi, splitfuse, orca, static (default vllm)" },
	{ "chunk", O_CHUNK, "LIST", "token budgets per step (vllm max_num_batched_tokens, sarathi token_budget)" },
	{ "max-batch", O_MAX_BATCH, "LIST", "running-set limits (max_num_seqs; orca/static max_batch)" },
	{ "router", O_ROUTER, "SPEC", "router over (prefill) instances, as `servesim run` (default rr)" },
	{ "pairing", O_PAIRING, "SPEC", "disaggregated: router over the decode pool (default: the engine's)" },
	{ "kv-overlap", O_KV_OVERLAP, NULL, "disaggregated: overlap the KV transfer with prefill" },
	{ "order", O_ORDER, "SPEC", "waiting-queue order (default fcfs)" },
	{ "preemption", O_PREEMPTION, "SPEC", "recompute (default) | swap[:...]" },
	{ "prefix-cache", O_PREFIX_CACHE, "SPEC", "off (default) | on | blocks=N" },
	{ "cost-model", O_COST_MODEL, "SPEC", "auto (default) | table | fit | roofline | constant:..." },
	{ "calibration", O_CALIBRATION, "FILE", "a calibration store to prefer over the shipped one" },
	{ "model-catalog", O_MODEL_CATALOG, "FILE", "extra models JSON" },
	{ "gpu-catalog", O_GPU_CATALOG, "FILE", "extra GPUs JSON (cost_per_hour gives per-dollar figures)" },
	{ "gpu-memory-utilization", O_GPU_MEM_UTIL, "F", "fraction of GPU memory for weights, activations and KV (default 0.9)" },
	{ "block-size", O_BLOCK_SIZE, "N", "KV block size in tokens (default 16)" },
	{ "slo", O_SLO, "SPEC", "ttft_ms=X,tpot_ms=Y[,e2e_ms=Z,tbt_ms=W] (default ttft_ms=2000,tpot_ms=100)" },
	{ "target", O_TARGET, "F", "SLO attainment to meet, 0..1 or a percentage such as 90% (default 0.9)" },
	{ "budget", O_BUDGET, "SPEC", "gpus=N and/or usd_per_hour=X: leave out larger configurations" },
	{ "tolerance", O_TOLERANCE, "F", "relative precision of each maximum rate (default 0.05)" },
	{ "max-probes", O_MAX_PROBES, "N", "simulations per configuration, 2..24 (default 12)" },
	{ "min-span", O_MIN_SPAN, "F", "a rate counts only if its arrivals span >= F x the mean E2E latency (default 4; 0 = off)" },
	{ "jobs", O_JOBS, "N", "run N configurations at a time in worker processes (-j N; default 1)" },
	{ "out", O_OUT, "DIR", "write plan.json, plan.csv, plan.db and plots to DIR" },
	{ "db", O_DB, "FILE", "the plan database (default DIR/plan.db with --out): resume from it" },
	{ "top", O_TOP, "N", "configurations in the printed table (default 10)" },
	{ "pareto-cost", O_PARETO_COST, "AXIS", "frontier cost: auto (USD/h when every GPU has a price) | gpus | usd" },
	{ "pareto-latency", O_PARETO_LATENCY, "NAME", "frontier latency at scale 1: ttft (default) | tpot | e2e, p99" },
	{ "dry-run", O_DRY_RUN, NULL, "print the configurations the plan would evaluate, and stop" },
	{ "json", O_JSON, NULL, "print plan.json on stdout instead of the table" },
	{ "quiet", O_QUIET, NULL, "print nothing on success" },
	{ "help", O_HELP, NULL, "show this help" },
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

struct plan_opts {
	const char *trace, *format, *arrival, *lengths, *tenants;
	uint64_t num_requests;
	double duration_s, rate_scale;
	uint64_t seed;
	const char *model, *gpus, *tp, *instances, *modes, *pd_ratios, *policies, *chunk,
		*max_batch;
	int max_gpus;
	const char *router, *pairing, *order, *preemption, *prefix_cache, *cost_model,
		*calibration, *model_catalog, *gpu_catalog;
	int kv_overlap, mixed_pools;
	double gpu_mem_util;
	int block_size;
	const char *slo, *budget;
	double target, tolerance, min_span;
	int max_probes, jobs, top;
	const char *out, *db;
	enum plan_cost_axis pareto_cost;
	enum plan_latency pareto_latency;
	int json, quiet, dry_run;
	char default_trace[1024];
};

/* Where this process stands: MPI rank and size, and the error to print. */
struct pctx {
	int rank, size;
	bool mpi;
	char msg[1200];
};

static int failf(struct pctx *x, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int failf(struct pctx *x, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
	va_end(ap);
	return status;
}

static int fail_err(struct pctx *x, int status, const struct ss_error *err)
{
	ss_error_format(err, x->msg, sizeof(x->msg));
	return status;
}

static void help(FILE *f)
{
	fprintf(f, "usage: servesim plan [options]\n\n"
		   "Search deployments of a model for a workload: colocated and disaggregated\n"
		   "configurations over GPU types, tensor parallelism, instance counts, batch\n"
		   "policies, chunk sizes and batch limits.  For each, find the highest request\n"
		   "rate at which the SLO attainment target is met (a search over rate scales),\n"
		   "and report goodput per GPU and per dollar and the Pareto frontier of cost\n"
		   "against latency.  Under `mpirun -n N`, configurations are shared over ranks.\n\n"
		   "options:\n");
	for (size_t i = 0; i < N_OPTS; i++) {
		char left[64];

		snprintf(left, sizeof(left), "%s--%s%s%s", opts[i].id == O_JOBS ? "-j, " : "",
			 opts[i].name, opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
		fprintf(f, "  %-32s %s\n", left, opts[i].help);
	}
	fprintf(f, "\nMPI: %s\n", plan_mpi_available() ?
		   "compiled in (mpirun -n N servesim plan ... shares configurations over N ranks)" :
		   "not compiled in (servesim plan refuses to run under mpirun)");
	fprintf(f, "exit status: 0 success, 1 bad input or failed run, 2 bad command line\n");
}

static int bad_value(struct pctx *x, const char *opt, const char *expected, const char *got)
{
	return failf(x, SS_EXIT_USAGE, "--%s: expected %s, got '%s'", opt, expected, got);
}

static int parse_args(struct pctx *x, int argc, char **argv, struct plan_opts *o)
{
	struct option longopts[N_OPTS + 1];
	int c, idx;

	memset(longopts, 0, sizeof(longopts));
	for (size_t i = 0; i < N_OPTS; i++)
		longopts[i] = (struct option){ opts[i].name,
					       opts[i].arg ? required_argument : no_argument,
					       NULL, opts[i].id };
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":j:", longopts, &idx)) != -1) {
		const char *name = c >= 256 ? longopts[idx].name : "jobs";
		int64_t iv;
		double dv;

		switch (c) {
		case O_TRACE: o->trace = optarg; break;
		case O_FORMAT: o->format = optarg; break;
		case O_ARRIVAL: o->arrival = optarg; break;
		case O_LENGTHS: o->lengths = optarg; break;
		case O_TENANTS: o->tenants = optarg; break;
		case O_NUM_REQUESTS:
			if (!ss_parse_int64(optarg, &iv) || iv < 2)
				return bad_value(x, name, "an integer >= 2", optarg);
			o->num_requests = (uint64_t)iv;
			break;
		case O_DURATION:
			/* at least 1 ns: a shorter one would be 0, "no limit" */
			if (!ss_parse_double(optarg, &dv) || !(dv >= 1e-9) || dv > 1e9)
				return bad_value(x, name, "seconds from 1e-9 to 1e9", optarg);
			o->duration_s = dv;
			break;
		case O_RATE_SCALE:
			if (!ss_parse_double(optarg, &dv) || dv <= 0 || dv > 1e6)
				return bad_value(x, name, "a factor > 0", optarg);
			o->rate_scale = dv;
			break;
		case O_SEED:
			if (!ss_parse_int64(optarg, &iv) || iv < 0)
				return bad_value(x, name, "a non-negative integer", optarg);
			o->seed = (uint64_t)iv;
			break;
		case O_MODEL: o->model = optarg; break;
		case O_GPUS: o->gpus = optarg; break;
		case O_TP: o->tp = optarg; break;
		case O_INSTANCES: o->instances = optarg; break;
		case O_MAX_GPUS:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 100000)
				return bad_value(x, name, "an integer in 1..100000", optarg);
			o->max_gpus = (int)iv;
			break;
		case O_MODES: o->modes = optarg; break;
		case O_PD_RATIOS: o->pd_ratios = optarg; break;
		case O_MIXED_POOLS: o->mixed_pools = 1; break;
		case O_POLICIES: o->policies = optarg; break;
		case O_CHUNK: o->chunk = optarg; break;
		case O_MAX_BATCH: o->max_batch = optarg; break;
		case O_ROUTER: o->router = optarg; break;
		case O_PAIRING: o->pairing = optarg; break;
		case O_KV_OVERLAP: o->kv_overlap = 1; break;
		case O_ORDER: o->order = optarg; break;
		case O_PREEMPTION: o->preemption = optarg; break;
		case O_PREFIX_CACHE: o->prefix_cache = optarg; break;
		case O_COST_MODEL: o->cost_model = optarg; break;
		case O_CALIBRATION: o->calibration = optarg; break;
		case O_MODEL_CATALOG: o->model_catalog = optarg; break;
		case O_GPU_CATALOG: o->gpu_catalog = optarg; break;
		case O_GPU_MEM_UTIL:
			if (!ss_parse_double(optarg, &dv) || dv <= 0 || dv > 1)
				return bad_value(x, name, "a fraction in (0, 1]", optarg);
			o->gpu_mem_util = dv;
			break;
		case O_BLOCK_SIZE:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 4096)
				return bad_value(x, name, "an integer in 1..4096", optarg);
			o->block_size = (int)iv;
			break;
		case O_SLO: o->slo = optarg; break;
		case O_TARGET: {
			char buf[64];
			size_t len = strlen(optarg);
			bool pct = len > 1 && len < sizeof(buf) && optarg[len - 1] == '%';

			snprintf(buf, sizeof(buf), "%.*s", (int)(pct ? len - 1 : len), optarg);
			if (!ss_parse_double(buf, &dv) || (pct && (dv /= 100, false)) || !(dv > 0) ||
			    dv > 1)
				return bad_value(x, name, "an attainment in (0, 1] or a percentage such as 90%",
						 optarg);
			o->target = dv;
			break;
		}
		case O_BUDGET: o->budget = optarg; break;
		case O_TOLERANCE:
			if (!ss_parse_double(optarg, &dv) || !(dv >= 0.001) || dv > 1)
				return bad_value(x, name, "a fraction in [0.001, 1]", optarg);
			o->tolerance = dv;
			break;
		case O_MAX_PROBES:
			if (!ss_parse_int64(optarg, &iv) || iv < 2 || iv > PLAN_MAX_PROBES)
				return bad_value(x, name, "an integer in 2..24", optarg);
			o->max_probes = (int)iv;
			break;
		case O_MIN_SPAN:
			if (!ss_parse_double(optarg, &dv) || dv < 0 || dv > 1000)
				return bad_value(x, name, "a factor in [0, 1000]", optarg);
			o->min_span = dv;
			break;
		case 'j':
		case O_JOBS:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 1024)
				return bad_value(x, name, "an integer in 1..1024", optarg);
			o->jobs = (int)iv;
			break;
		case O_OUT: o->out = optarg; break;
		case O_DB: o->db = optarg; break;
		case O_TOP:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 100000)
				return bad_value(x, name, "an integer >= 1", optarg);
			o->top = (int)iv;
			break;
		case O_PARETO_COST:
			if (!strcmp(optarg, "auto"))
				o->pareto_cost = PLAN_COST_AUTO;
			else if (!strcmp(optarg, "gpus"))
				o->pareto_cost = PLAN_COST_GPUS;
			else if (!strcmp(optarg, "usd"))
				o->pareto_cost = PLAN_COST_USD;
			else
				return bad_value(x, name, "auto, gpus or usd", optarg);
			break;
		case O_PARETO_LATENCY:
			if (!strcmp(optarg, "ttft"))
				o->pareto_latency = PLAN_LAT_TTFT;
			else if (!strcmp(optarg, "tpot"))
				o->pareto_latency = PLAN_LAT_TPOT;
			else if (!strcmp(optarg, "e2e"))
				o->pareto_latency = PLAN_LAT_E2E;
			else
				return bad_value(x, name, "ttft, tpot or e2e", optarg);
			break;
		case O_DRY_RUN: o->dry_run = 1; break;
		case O_JSON: o->json = 1; break;
		case O_QUIET: o->quiet = 1; break;
		case O_HELP:
			if (x->rank == 0)
				help(stdout);
			return -1;
		case ':':
			return failf(x, SS_EXIT_USAGE, "%s: expected a value (see `servesim plan --help`)",
				     argv[optind - 1]);
		default:
			return failf(x, SS_EXIT_USAGE, "unknown option '%s' (see `servesim plan --help`)",
				     argv[optind - 1]);
		}
	}
	if (optind < argc)
		return failf(x, SS_EXIT_USAGE, "unexpected argument '%s' (see `servesim plan --help`)",
			     argv[optind]);
	return 0;
}

/* ---- lists ---------------------------------------------------------------- */

/* Split a comma-separated list into items (no empty ones, at most
 * PLAN_MAX_LIST, each shorter than 64 characters). */
static int split(struct pctx *x, const char *opt, const char *what, const char *list,
		 char items[][64], int *n)
{
	const char *p = list;

	*n = 0;
	for (;;) {
		size_t len = strcspn(p, ",");

		if (len == 0 || len >= 64 || *n >= PLAN_MAX_LIST)
			return failf(x, SS_EXIT_USAGE, "--%s: expected %s separated by commas (at most %d), got '%s'",
				     opt, what, PLAN_MAX_LIST, list);
		memcpy(items[*n], p, len);
		items[*n][len] = '\0';
		(*n)++;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

static int int_list(struct pctx *x, const char *opt, const char *list, int64_t lo, int64_t hi,
		    int64_t *out, int *n)
{
	char items[PLAN_MAX_LIST][64], what[96];
	int rc;

	snprintf(what, sizeof(what), "integers in %lld..%lld", (long long)lo, (long long)hi);
	rc = split(x, opt, what, list, items, n);
	if (rc)
		return rc;
	for (int i = 0; i < *n; i++) {
		if (!ss_parse_int64(items[i], &out[i]) || out[i] < lo || out[i] > hi)
			return failf(x, SS_EXIT_USAGE, "--%s: expected %s separated by commas, got '%s'",
				     opt, what, items[i]);
		for (int j = 0; j < i; j++)
			if (out[j] == out[i])
				return failf(x, SS_EXIT_USAGE, "--%s: '%s' appears twice", opt, items[i]);
	}
	return 0;
}

static int parse_slo(struct pctx *x, const char *spec, struct slo_config *slo)
{
	struct ss_error err = { 0 };
	struct ss_params p;
	int rc;

	if (!spec) {
		/* the defaults of `servesim run` */
		*slo = (struct slo_config){ .ttft_ms = 2000, .tpot_ms = 100 };
		return 0;
	}
	rc = ss_params_parse(&p, "--slo", spec, false, &err);
	if (!rc)
		rc = ss_params_double(&p, "ttft_ms", 0, &slo->ttft_ms, &err);
	if (!rc)
		rc = ss_params_double(&p, "tpot_ms", 0, &slo->tpot_ms, &err);
	if (!rc)
		rc = ss_params_double(&p, "e2e_ms", 0, &slo->e2e_ms, &err);
	if (!rc)
		rc = ss_params_double(&p, "tbt_ms", 0, &slo->tbt_ms, &err);
	if (!rc)
		rc = ss_params_check_unused(&p, &err);
	if (!rc && p.name[0])
		return failf(x, SS_EXIT_USAGE,
			     "--slo: expected ttft_ms=X,tpot_ms=Y[,e2e_ms=Z,tbt_ms=W], got '%s'", spec);
	if (!rc && (slo->ttft_ms < 0 || slo->tpot_ms < 0 || slo->e2e_ms < 0 || slo->tbt_ms < 0))
		return failf(x, SS_EXIT_USAGE, "--slo: expected targets >= 0 ms, got '%s'", spec);
	if (!rc && !(slo->ttft_ms > 0 || slo->tpot_ms > 0 || slo->e2e_ms > 0 || slo->tbt_ms > 0))
		return failf(x, SS_EXIT_USAGE, "--slo: expected at least one target > 0 ms, got '%s'",
			     spec);
	return rc ? fail_err(x, SS_EXIT_USAGE, &err) : 0;
}

static int parse_budget(struct pctx *x, const char *spec, struct plan_space *sp)
{
	struct ss_error err = { 0 };
	struct ss_params p;
	int64_t gpus = 0;
	double usd = 0;
	int rc;

	if (!spec)
		return 0;
	rc = ss_params_parse(&p, "--budget", spec, false, &err);
	if (!rc)
		rc = ss_params_int(&p, "gpus", 0, &gpus, &err);
	if (!rc)
		rc = ss_params_double(&p, "usd_per_hour", 0, &usd, &err);
	if (!rc)
		rc = ss_params_check_unused(&p, &err);
	if (rc)
		return fail_err(x, SS_EXIT_USAGE, &err);
	if (p.name[0] || gpus < 0 || gpus > 100000 || usd < 0 || !(gpus > 0 || usd > 0))
		return failf(x, SS_EXIT_USAGE,
			     "--budget: expected gpus=N and/or usd_per_hour=X (positive), got '%s'", spec);
	sp->budget_gpus = (int)gpus;
	sp->budget_usd_per_hour = usd;
	return 0;
}

/* The search space from the options. */
static int build_space(struct pctx *x, const struct plan_opts *o, const struct catalog *cat,
		       struct plan_space *sp)
{
	char items[PLAN_MAX_LIST][64];
	int64_t v[PLAN_MAX_LIST];
	int n, rc;

	rc = split(x, "gpus", "GPU names", o->gpus, items, &n);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		sp->gpus[i] = catalog_gpu(cat, items[i]);
		if (!sp->gpus[i])
			return failf(x, SS_EXIT_USAGE, "--gpus: unknown GPU '%s' (see `servesim list gpus`)",
				     items[i]);
		for (int j = 0; j < i; j++)
			if (sp->gpus[j] == sp->gpus[i])
				return failf(x, SS_EXIT_USAGE, "--gpus: '%s' appears twice", items[i]);
	}
	sp->n_gpus = n;
	rc = int_list(x, "tp", o->tp, 1, 64, v, &n);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		sp->tp[i] = (int)v[i];
	sp->n_tp = n;
	if (o->instances) {
		rc = int_list(x, "instances", o->instances, 1, 100000, v, &n);
		if (rc)
			return rc;
		for (int i = 0; i < n; i++)
			sp->instances[i] = (uint32_t)v[i];
		sp->n_instances = n;
	}
	rc = split(x, "modes", "colocated or disaggregated", o->modes, items, &n);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		if (!strcmp(items[i], "colocated"))
			sp->colocated = true;
		else if (!strcmp(items[i], "disaggregated"))
			sp->disaggregated = true;
		else
			return failf(x, SS_EXIT_USAGE, "--modes: expected colocated and/or disaggregated, got '%s'",
				     items[i]);
	}
	if (o->pd_ratios) {
		rc = split(x, "pd-ratios", "ratios P:D", o->pd_ratios, items, &n);
		if (rc)
			return rc;
		for (int i = 0; i < n; i++) {
			char *colon = strchr(items[i], ':');
			int64_t a, b;

			if (!colon)
				return failf(x, SS_EXIT_USAGE, "--pd-ratios: expected P:D with integers >= 1, got '%s'",
					     items[i]);
			*colon = '\0';
			if (!ss_parse_int64(items[i], &a) || !ss_parse_int64(colon + 1, &b) || a < 1 ||
			    b < 1 || a > 1000 || b > 1000) {
				*colon = ':';
				return failf(x, SS_EXIT_USAGE, "--pd-ratios: expected P:D with integers in 1..1000, got '%s'",
					     items[i]);
			}
			sp->ratios[i] = (struct plan_ratio){ (int)a, (int)b };
		}
		sp->n_ratios = n;
	}
	sp->mixed_pools = o->mixed_pools != 0;
	if (sp->mixed_pools && !sp->disaggregated)
		return failf(x, SS_EXIT_USAGE,
			     "--mixed-pools: expected --modes to include disaggregated, got '%s'", o->modes);
	rc = split(x, "policies", "policy names", o->policies, items, &n);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		sp->policies[i] = plan_policy_find(items[i]);
		if (!sp->policies[i])
			return failf(x, SS_EXIT_USAGE, "--policies: expected names among %s, got '%s'",
				     plan_policy_names(), items[i]);
		for (int j = 0; j < i; j++)
			if (sp->policies[j] == sp->policies[i])
				return failf(x, SS_EXIT_USAGE, "--policies: '%s' appears twice", items[i]);
	}
	sp->n_policies = n;
	if (o->chunk) {
		rc = int_list(x, "chunk", o->chunk, 1, 16777216, v, &n);
		if (rc)
			return rc;
		for (int i = 0; i < n; i++)
			sp->chunks[i] = (int)v[i];
		sp->n_chunks = n;
	}
	if (o->max_batch) {
		rc = int_list(x, "max-batch", o->max_batch, 1, 1048576, v, &n);
		if (rc)
			return rc;
		for (int i = 0; i < n; i++)
			sp->max_batch[i] = (int)v[i];
		sp->n_max_batch = n;
	}
	rc = parse_budget(x, o->budget, sp);
	if (rc)
		return rc;
	/* the largest cluster: as given; else the budget's; else what the
	 * explicit instance counts need; else 8 */
	sp->max_gpus = o->max_gpus ? o->max_gpus : sp->budget_gpus ? sp->budget_gpus : 8;
	if (!o->max_gpus && !sp->budget_gpus && sp->n_instances) {
		int most = 1;

		for (int i = 0; i < sp->n_instances; i++)
			for (int t = 0; t < sp->n_tp; t++)
				if ((int64_t)sp->instances[i] * sp->tp[t] > most)
					most = (int)((int64_t)sp->instances[i] * sp->tp[t] > 100000 ?
						     100000 : (int64_t)sp->instances[i] * sp->tp[t]);
		sp->max_gpus = most;
	}
	return 0;
}

/* ---- running ------------------------------------------------------------- */

struct plan_state {
	struct plan_db *db;
	const struct plan_config *cfg;
	size_t done, total;
	bool progress;
};

static void show_progress(const struct plan_state *s)
{
	fprintf(stderr, "\rplan: %zu/%zu configurations", s->done, s->total);
	if (s->done == s->total)
		fputc('\n', stderr);
	fflush(stderr);
}

static int on_result(void *ctx, const struct plan_result *r, struct ss_error *err)
{
	struct plan_state *s = ctx;
	int rc = 0;

	if (s->db && r->status != PLAN_FAILED)
		rc = plan_db_store(s->db, &s->cfg[r->index], r, err);
	s->done++;
	if (s->progress)
		show_progress(s);
	return rc;
}

/* Check once per (mode, GPUs, tps, policy) that the engine accepts the
 * configuration (cost model for the GPU, router, order, ...), so that a
 * bad option fails before any simulation. */
static int validate(struct pctx *x, const struct engine_config *base, const struct workload *wl,
		    const struct plan_config *cfg, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct plan_config *c = &cfg[i];
		struct engine_config ec = *base;
		struct ss_error err = { 0 };
		struct engine *e = NULL;
		bool seen = false;

		for (size_t j = 0; j < i && !seen; j++)
			seen = cfg[j].mode == c->mode && cfg[j].gpu == c->gpu && cfg[j].tp == c->tp &&
			       plan_config_decode_gpu(&cfg[j]) == plan_config_decode_gpu(c) &&
			       plan_config_decode_tp(&cfg[j]) == plan_config_decode_tp(c) &&
			       cfg[j].policy == c->policy;
		if (seen)
			continue;
		ec.gpu = c->gpu;
		ec.tp = c->tp;
		ec.policy = c->policy_spec;
		ec.n_instances = c->instances;
		if (c->mode == PLAN_DISAGGREGATED) {
			ec.n_prefill = c->n_prefill;
			ec.n_decode = c->n_decode;
			ec.prefill_gpu = c->gpu;
			ec.prefill_tp = c->tp;
			ec.decode_gpu = plan_config_decode_gpu(c);
			ec.decode_tp = plan_config_decode_tp(c);
		}
		if (engine_new(&e, &ec, wl, &err)) {
			char msg[700];

			ss_error_format(&err, msg, sizeof(msg));
			return failf(x, SS_EXIT_FAILURE, "configuration '%s': %s", c->key, msg);
		}
		engine_free(e);
	}
	return 0;
}

static int print_json(const struct plan_report *rep)
{
	json_t *doc = plan_json(rep);
	int rc = 0;

	if (!doc || json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS |
						 JSON_REAL_PRECISION(10)))
		rc = -EIO;
	else
		fputc('\n', stdout);
	json_decref(doc);
	return rc;
}

/* Print this process's error, if it is the one to speak: rank 0, or under
 * MPI a rank whose failure rank 0 does not share. */
static int report_setup(struct pctx *x, int status)
{
	int st0 = status, any = status;

	if (x->mpi) {
		plan_mpi_bcast(&st0, sizeof(st0));
		any = plan_mpi_max(status);
	}
	if (status > 0 && x->rank == 0)
		cli_errorf("%s", x->msg);
	else if (status > 0 && st0 == 0)
		cli_errorf("MPI rank %d: %s", x->rank, x->msg);
	if (x->mpi && any > 0 && status == 0 && x->rank == 0)
		cli_errorf("plan: another MPI rank failed to set up (see its message)");
	return any;
}

static int plan_main(struct pctx *x, int argc, char **argv)
{
	struct plan_opts o = {
		.rate_scale = 1.0, .model = "llama-3.1-8b", .gpus = "h100-sxm", .tp = "1",
		.modes = "colocated,disaggregated", .policies = "vllm", .router = "rr",
		.order = "fcfs", .preemption = "recompute", .prefix_cache = "off",
		.cost_model = "auto", .gpu_mem_util = 0.9, .block_size = 16, .target = 0.9,
		.tolerance = 0.05, .max_probes = 12, .min_span = 4, .jobs = 1, .top = 10,
	};
	struct ss_error err = { 0 };
	struct catalog cat;
	struct workload wl;
	struct workload_spec ws = { 0 };
	struct engine_config ec;
	struct plan_space sp;
	struct plan_excluded ex = { 0 };
	struct plan_eval pe = { 0 };
	struct plan_config *cfg = NULL;
	struct plan_result *res = NULL;
	struct plan_state st = { 0 };
	struct plan_report rep;
	struct plan_db *db = NULL;
	uint32_t *pending = NULL;
	bool *done = NULL;
	size_t n = 0, n_done = 0, n_pending = 0;
	const char *stores[2];
	char shipped_store[1100], db_path[4200], fp_hex[17], *fp_desc = NULL;
	int status, rc;

	catalog_init(&cat);
	workload_init(&wl);
	memset(&sp, 0, sizeof(sp));
	rc = parse_args(x, argc, argv, &o);
	if (rc < 0) {
		status = SS_EXIT_OK;
		goto out;
	}
	status = rc;
	if (!status)
		status = parse_slo(x, o.slo, &pe.slo);
	if (!status && x->mpi && o.jobs > 1)
		status = failf(x, SS_EXIT_USAGE,
			       "-j %d under mpirun: run one rank per core instead (mpirun -n CORES)",
			       o.jobs);
	if (!status && cli_load_catalog(&cat, o.model_catalog, o.gpu_catalog, &err))
		status = fail_err(x, SS_EXIT_FAILURE, &err);
	if (!status) {
		sp.model = catalog_model(&cat, o.model);
		if (!sp.model)
			status = failf(x, SS_EXIT_USAGE, "--model: unknown model '%s' (see `servesim list models`)",
				       o.model);
	}
	if (!status)
		status = build_space(x, &o, &cat, &sp);

	/* the workload, once, at the plan's scale 1 */
	if (!status) {
		if (!o.trace && !o.arrival && !o.lengths) {
			snprintf(o.default_trace, sizeof(o.default_trace),
				 "%s/traces/azure_conv_2000.csv", cli_data_dir());
			o.trace = o.default_trace;
		}
		ws.trace = o.trace;
		ws.format = TRACE_AUTO;
		if (o.format && trace_format_from_name(o.format, &ws.format))
			status = failf(x, SS_EXIT_USAGE,
				       "--format: unknown format '%s' (see `servesim list formats`)",
				       o.format);
	}
	if (!status) {
		ws.arrival = o.arrival;
		ws.lengths = o.lengths;
		ws.num_requests = o.num_requests;
		ws.duration_ns = (int64_t)(o.duration_s * 1e9);
		ws.rate_scale = o.rate_scale;
		ws.seed = o.seed;
		ws.tenants = o.tenants;
		if (workload_build(&wl, &ws, &err))
			status = fail_err(x, SS_EXIT_FAILURE, &err);
	}
	if (!status && !(plan_workload_rate(&wl) > 0))
		status = failf(x, SS_EXIT_FAILURE,
			       "workload %s: expected at least 2 requests arriving over a time span (a rate to scale), got %zu",
			       wl.source, wl.n);

	/* the engine options every configuration shares */
	engine_config_defaults(&ec);
	ec.model = sp.model;
	ec.block_size = o.block_size;
	ec.gpu_mem_util = o.gpu_mem_util;
	ec.router = o.router;
	if (o.pairing)
		ec.pairing = o.pairing;
	ec.kv_overlap = o.kv_overlap;
	ec.order = o.order;
	ec.preemption = o.preemption;
	ec.prefix_cache = o.prefix_cache;
	ec.slo_ttft_ns = (int64_t)(pe.slo.ttft_ms * 1e6);
	ec.cost_model = o.cost_model;
	ec.seed = o.seed;
	stores[0] = o.calibration;
	snprintf(shipped_store, sizeof(shipped_store), "%s/calibration.db", cli_data_dir());
	stores[1] = shipped_store;
	ec.stores = stores;
	ec.n_stores = 2;
	ec.sample_interval_ns = 0;

	if (!status && plan_enumerate(&sp, &ec, &cfg, &n, &ex, &err))
		status = fail_err(x, SS_EXIT_USAGE, &err);
	if (!status && n == 0)
		status = failf(x, SS_EXIT_FAILURE,
			       "no configuration to plan: %u over budget, %u without a price for --budget usd_per_hour, %u not fitting %s in memory, %u with max batch > chunk",
			       ex.budget, ex.unpriced, ex.memory, sp.model->name, ex.policy);
	/* from here on the output directory is ours: an earlier plan's
	 * plan.json goes, so a failure never leaves one that looks current */
	if (!status && x->rank == 0 && o.out && !o.dry_run && plan_prepare_dir(o.out, &err))
		status = fail_err(x, SS_EXIT_FAILURE, &err);
	if (!status)
		status = validate(x, &ec, &wl, cfg, n);
	if (!status && o.dry_run) {
		if (x->rank == 0) {
			printf("%zu configurations (left out: %u over budget, %u unpriced, %u not fitting in memory, %u max batch > chunk)\n",
			       n, ex.budget, ex.unpriced, ex.memory, ex.policy);
			for (size_t i = 0; i < n; i++)
				printf("%zu %s\n", i, cfg[i].key);
		}
		goto out;
	}

	plan_search_defaults(&pe.search);
	pe.search.target = o.target;
	pe.search.tolerance = o.tolerance;
	pe.search.max_probes = o.max_probes;
	pe.search.min_span = o.min_span;
	pe.base = &ec;
	pe.wl = &wl;
	pe.rate_rps = status ? 0 : plan_workload_rate(&wl);

	if (!status) {
		res = calloc(n, sizeof(*res));
		done = calloc(n, sizeof(*done));
		pending = calloc(n, sizeof(*pending));
		fp_desc = malloc(4096);
		if (!res || !done || !pending || !fp_desc)
			status = failf(x, SS_EXIT_FAILURE, "plan: out of memory");
	}
	if (!status) {
		plan_fingerprint(&pe, SERVESIM_VERSION, fp_desc, 4096, fp_hex);
		for (size_t i = 0; i < n; i++)
			res[i] = (struct plan_result){ .index = (uint32_t)i, .status = PLAN_FAILED,
						       .n_probes = -1, .best = -1 };
	}
	if (x->mpi && !status) {
		/* every rank must plan the same thing */
		char fp0[17];

		memcpy(fp0, fp_hex, sizeof(fp0));
		plan_mpi_bcast(fp0, sizeof(fp0));
		if (memcmp(fp0, fp_hex, sizeof(fp0)) != 0)
			status = failf(x, SS_EXIT_FAILURE,
				       "MPI rank %d: the plan's inputs differ from rank 0's (fingerprint %s, rank 0 %s): same files and options on every machine?",
				       x->rank, fp_hex, fp0);
	}
	/* the database: rank 0 only */
	if (!status && x->rank == 0 && (o.db || o.out)) {
		if (o.db)
			snprintf(db_path, sizeof(db_path), "%s", o.db);
		else
			snprintf(db_path, sizeof(db_path), "%s/plan.db", o.out);
		if (plan_db_open(&db, db_path, fp_hex, fp_desc, &err) ||
		    plan_db_load(db, cfg, n, res, done, &n_done, &err))
			status = fail_err(x, SS_EXIT_FAILURE, &err);
	}
	status = report_setup(x, status);
	if (status)
		goto out;

	/* what is left to run: rank 0 decides */
	for (size_t i = 0; i < n; i++)
		if (!done[i])
			pending[n_pending++] = (uint32_t)i;
	if (x->mpi) {
		uint64_t np = n_pending;

		plan_mpi_bcast(&np, sizeof(np));
		n_pending = (size_t)np;
		plan_mpi_bcast(pending, n_pending * sizeof(*pending));
	}
	st.db = db;
	st.cfg = cfg;
	st.total = n;
	st.done = n_done;
	st.progress = x->rank == 0 && !o.quiet && !o.json && isatty(STDERR_FILENO) && n_pending > 0;
	{
		struct plan_run pr = {
			.pe = &pe, .cfg = cfg, .n = n, .pending = pending, .n_pending = n_pending,
			.res = res, .jobs = o.jobs, .on_result = on_result, .ctx = &st,
		};

		if (x->mpi)
			rc = plan_run_mpi(&pr, x->rank, x->size, &err);
		else
			rc = plan_run_local(&pr, &err);
	}
	if (x->rank != 0) {
		status = SS_EXIT_OK;
		goto out;
	}
	if (rc) {
		status = fail_err(x, SS_EXIT_FAILURE, &err);
		goto done;
	}
	/* the lowest failed configuration: pending is ascending, and those
	 * never started still have n_probes -1 */
	for (size_t k = 0; k < n_pending; k++) {
		const struct plan_result *r = &res[pending[k]];

		if (r->status != PLAN_FAILED || r->n_probes < 0)
			continue;
		status = failf(x, SS_EXIT_FAILURE, "configuration %u '%s': %s%s", pending[k],
			       cfg[pending[k]].key, r->error[0] ? r->error : "failed",
			       db ? " (the finished configurations are in the database)" : "");
		goto done;
	}

	rep = (struct plan_report){
		.version = SERVESIM_VERSION, .fingerprint = fp_hex, .workload = wl.source,
		.n_requests = wl.n, .model = sp.model->name, .pe = &pe, .cfg = cfg, .res = res,
		.n = n, .resumed = n_done, .excluded = ex, .cost_axis = o.pareto_cost,
		.latency = o.pareto_latency, .top = o.top, .plot_top = 5,
	};
	if (o.out) {
		bool skipped = false;

		if (plan_write_dir(o.out, &rep, &skipped, &err)) {
			status = fail_err(x, SS_EXIT_FAILURE, &err);
			goto done;
		}
		if (skipped && !o.quiet)
			cli_errorf("warning: gnuplot not found; wrote the plot scripts (.gp) and data (.dat) to %s",
				   o.out);
	}
	if (o.json) {
		if (print_json(&rep)) {
			status = failf(x, SS_EXIT_FAILURE, "could not write the JSON plan");
			goto done;
		}
	} else if (!o.quiet) {
		plan_text(stdout, &rep);
		if (o.out)
			printf("\nplan written to %s/\n", o.out);
	}
	status = SS_EXIT_OK;
done:
	if (status)
		cli_errorf("%s", x->msg);
out:
	if (x->mpi) {
		/* every rank leaves with rank 0's status */
		int s0 = status;

		plan_mpi_bcast(&s0, sizeof(s0));
		if (x->rank != 0)
			status = s0;
	}
	plan_db_close(db);
	free(fp_desc);
	free(pending);
	free(done);
	free(res);
	free(cfg);
	workload_release(&wl);
	catalog_release(&cat);
	return status;
}

int cmd_plan(int argc, char **argv)
{
	struct pctx x = { .rank = 0, .size = 1 };
	struct ss_error err = { 0 };
	bool mpi_init = false;
	int size = 0, status;

	if (plan_mpi_launched(&size) && size != 1) {
		if (!plan_mpi_available()) {
			cli_errorf("plan: started by an MPI launcher (%d processes) but servesim was built without MPI; "
				   "install libopenmpi-dev and rebuild (meson setup --reconfigure -Dmpi=enabled), or run without mpirun",
				   size);
			return SS_EXIT_FAILURE;
		}
		if (plan_mpi_init(&argc, &argv, &x.rank, &x.size, &err)) {
			cli_error(&err);
			return SS_EXIT_FAILURE;
		}
		mpi_init = true;
		x.mpi = x.size > 1;
	}
	status = plan_main(&x, argc, argv);
	if (mpi_init)
		plan_mpi_finalize();
	return status;
}
