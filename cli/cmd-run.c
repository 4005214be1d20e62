/* servesim run — simulate one scenario.
 *
 * Options come from one table; --help prints it (docs/servesim.1.md shows the
 * same synopsis).  Every value is validated before anything runs, and no
 * output is written unless the whole run succeeds.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "config.h"
#include "engine.h"
#include "executor-live.h"
#include "metrics.h"
#include "params.h"
#include "report.h"
#include "workload.h"

enum {
	O_TRACE = 256, O_FORMAT, O_ARRIVAL, O_LENGTHS, O_NUM_REQUESTS, O_DURATION,
	O_RATE_SCALE, O_MODEL, O_GPU, O_TP, O_INSTANCES, O_POLICY, O_ROUTER,
	O_COST_MODEL, O_SLO, O_SEED, O_OUT, O_BLOCK_SIZE, O_GPU_MEM_UTIL,
	O_KV_BLOCKS, O_SAMPLE_INTERVAL, O_MODEL_CATALOG, O_GPU_CATALOG, O_POWER_CAP,
	O_GPU_CLOCK, O_CALIBRATION, O_BACKEND, O_THREADS, O_WIDTH_DIV, O_LAYERS, O_JSON,
	O_QUIET, O_HELP, O_ORDER, O_VICTIM, O_PREEMPTION, O_PREFIX_CACHE, O_ADMISSION,
	O_PREDICTOR, O_TENANTS, O_PREFILL_INST, O_DECODE_INST, O_PREFILL_GPU, O_DECODE_GPU,
	O_PREFILL_TP, O_DECODE_TP, O_PAIRING, O_KV_OVERLAP, O_GPUS_PER_NODE, O_SEMI_PD,
};

struct opt_doc {
	const char *name;
	int id;
	const char *arg;     /* NULL for flags */
	const char *help;
	bool live_only;      /* an option of `servesim live` only */
};

static const struct opt_doc opts[] = {
	{ "trace", O_TRACE, "FILE", "replay a trace (Azure, Mooncake, Vidur, native CSV; see `servesim list formats`)", false },
	{ "format", O_FORMAT, "NAME", "trace format instead of detecting it (auto)", false },
	{ "arrival", O_ARRIVAL, "SPEC", "poisson:rate=R | gamma:rate=R,cv=C (requests/s)", false },
	{ "lengths", O_LENGTHS, "SPEC", "fixed:prompt=P,output=O | uniform:... | lognormal:... | geometric:... | empirical:FILE", false },
	{ "num-requests", O_NUM_REQUESTS, "N", "keep the first N requests", false },
	{ "duration", O_DURATION, "S", "keep requests arriving in the first S seconds", false },
	{ "rate-scale", O_RATE_SCALE, "X", "multiply the request rate by X (divides arrival times; default 1)", false },
	{ "model", O_MODEL, "NAME", "model from the catalog (default llama-3.1-8b)", false },
	{ "gpu", O_GPU, "NAME", "GPU type from the catalog (default h100-sxm)", false },
	{ "tp", O_TP, "N", "tensor-parallel GPUs per instance (default 1)", false },
	{ "instances", O_INSTANCES, "N", "identical instances behind the router (default 1)", false },
	{ "policy", O_POLICY, "SPEC", "batch policy, e.g. vllm:max_num_seqs=256,max_num_batched_tokens=8192,chunked=on", false },
	{ "router", O_ROUTER, "SPEC", "router over instances: random | rr | lor | lot | p2c | prefix | kvfree (default rr)", false },
	{ "prefill-instances", O_PREFILL_INST, "N", "disaggregate: N prefill instances (with --decode-instances)", false },
	{ "decode-instances", O_DECODE_INST, "M", "disaggregate: M decode instances (with --prefill-instances)", false },
	{ "prefill-gpu", O_PREFILL_GPU, "NAME", "GPU type of the prefill pool (default --gpu)", false },
	{ "decode-gpu", O_DECODE_GPU, "NAME", "GPU type of the decode pool (default --gpu)", false },
	{ "prefill-tp", O_PREFILL_TP, "N", "GPUs per prefill instance (default --tp)", false },
	{ "decode-tp", O_DECODE_TP, "N", "GPUs per decode instance (default --tp)", false },
	{ "pairing", O_PAIRING, "SPEC", "router that picks the decode instance: lor (default), kvfree, lot, ...", false },
	{ "kv-overlap", O_KV_OVERLAP, NULL, "overlap the KV transfer with the prefill, layer by layer", false },
	{ "semi-pd", O_SEMI_PD, "SPEC", "sm=F[,kv=G]: split each GPU into a prefill and a decode instance (approximation, docs/disaggregation.md)", false },
	{ "gpus-per-node", O_GPUS_PER_NODE, "N", "GPUs per node for KV links: NVLink within, RDMA across (default 8)", false },
	{ "order", O_ORDER, "SPEC", "waiting-queue order: fcfs | spf | sjf | priority[:aging=A] | vtc (default fcfs)", false },
	{ "preemption", O_PREEMPTION, "SPEC", "recompute (default) | swap[:host_gb=G,pcie_gbps=B]", false },
	{ "victim", O_VICTIM, "NAME", "preempt first: newest (default) | priority | largest", false },
	{ "prefix-cache", O_PREFIX_CACHE, "SPEC", "off (default) | on | blocks=N (cache at most N unreferenced blocks)", false },
	{ "admission", O_ADMISSION, "SPEC", "none (default) | queue:max=N | timeout:ms=T | slo[:ttft_ms=X]", false },
	{ "predictor", O_PREDICTOR, "SPEC", "output-length predictor: none | oracle | noisy:sigma=S (default none; oracle for --order sjf)", false },
	{ "tenants", O_TENANTS, "SPEC", "assign tenants: N (uniform) or weights W0,W1,... (default: the trace's)", false },
	{ "cost-model", O_COST_MODEL, "SPEC", "auto (default: table where calibrated, else roofline) | table | fit | roofline | constant:...", false },
	{ "slo", O_SLO, "SPEC", "ttft_ms=X,tpot_ms=Y[,e2e_ms=Z,tbt_ms=W] (default ttft_ms=2000,tpot_ms=100; tbt_ms: longest token gap)", false },
	{ "seed", O_SEED, "N", "seed for every random stream (default 0)", false },
	{ "out", O_OUT, "DIR", "write summary.json, summary.txt, requests.csv, results.db and plots to DIR", false },
	{ "block-size", O_BLOCK_SIZE, "N", "KV block size in tokens (default 16)", false },
	{ "gpu-memory-utilization", O_GPU_MEM_UTIL, "F", "fraction of GPU memory for weights, activations and KV (default 0.9)", false },
	{ "kv-blocks", O_KV_BLOCKS, "N", "force the KV pool size per instance (default: derived from memory)", false },
	{ "sample-interval", O_SAMPLE_INTERVAL, "S", "time-series sampling period in seconds with --out (default 1)", false },
	{ "model-catalog", O_MODEL_CATALOG, "FILE", "extra models JSON (adds to or overrides data/models.json)", false },
	{ "gpu-catalog", O_GPU_CATALOG, "FILE", "extra GPUs JSON (adds to or overrides data/gpus.json)", false },
	{ "power-cap", O_POWER_CAP, "W", "per-GPU power cap; steps above it run at a lower clock (docs/energy.md)", false },
	{ "gpu-clock", O_GPU_CLOCK, "F", "lock the SM clock at fraction F of its maximum, 0.2..1", false },
	{ "calibration", O_CALIBRATION, "FILE", "a calibration store to prefer over the shipped one (table/fit cost models)", false },
	{ "backend", O_BACKEND, "NAME", "live: kernel backend, cpu | cuda (default cpu)", true },
	{ "threads", O_THREADS, "N", "live: CPU threads for the kernels (default 1)", true },
	{ "width-div", O_WIDTH_DIV, "N", "live: divide the model's widths by N (default 8 on cpu, 1 on cuda)", true },
	{ "layers", O_LAYERS, "N", "live: run N decoder layers (default 4 on cpu, all on cuda)", true },
	{ "json", O_JSON, NULL, "print summary.json on stdout instead of the text summary", false },
	{ "quiet", O_QUIET, NULL, "print nothing on success (no summary, no progress)", false },
	{ "help", O_HELP, NULL, "show this help", false },
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

struct run_opts {
	const char *trace, *format, *arrival, *lengths;
	uint64_t num_requests;
	double duration_s;
	double rate_scale;
	const char *model, *gpu;
	int tp;
	uint32_t instances;
	const char *policy, *router, *cost_model, *slo;
	const char *order, *victim, *preemption, *prefix_cache, *admission, *predictor, *tenants;
	uint32_t prefill_inst, decode_inst;
	const char *prefill_gpu, *decode_gpu, *pairing;
	int prefill_tp, decode_tp, kv_overlap, gpus_per_node;
	const char *semi_pd;
	uint64_t seed;
	const char *out;
	int block_size;
	double gpu_mem_util;
	int64_t kv_blocks;
	double sample_interval_s;
	const char *model_catalog, *gpu_catalog;
	double power_cap_w, clock_frac;
	const char *calibration;
	const char *backend;
	int threads, width_div, layers;
	int json, quiet;
	char default_trace[1024];
};

static void help(FILE *f, bool live)
{
	if (live)
		fprintf(f, "usage: servesim live [options]\n\n"
			   "Run a scenario live: arrivals are released at their wall-clock times and every\n"
			   "step the policy forms runs on a kernel backend (a synthetic transformer of the\n"
			   "model's shapes, random weights), with the same engine and policies as `run`.\n"
			   "Writes the same results, marked live.  One instance on one device.\n\noptions:\n");
	else
		fprintf(f, "usage: servesim run [options]\n\n"
			   "Simulate LLM serving of a workload and report TTFT, TPOT, ITL, E2E, throughput,\n"
			   "SLO attainment, goodput and energy.  With no workload option, replays the shipped\n"
			   "sample of the Azure LLM 2023 conversation trace (2,000 requests).\n\noptions:\n");
	for (size_t i = 0; i < N_OPTS; i++) {
		char left[64];

		if (opts[i].live_only && !live)
			continue;
		snprintf(left, sizeof(left), "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
			 opts[i].arg ? opts[i].arg : "");
		fprintf(f, "  %-32s %s\n", left, opts[i].help);
	}
	fprintf(f, "\nexit status: 0 success, 1 bad input or failed run, 2 bad command line\n");
}

static int bad_value(const char *opt, const char *expected, const char *got)
{
	cli_errorf("--%s: expected %s, got '%s'", opt, expected, got);
	return SS_EXIT_USAGE;
}

static int parse_args(int argc, char **argv, struct run_opts *o, bool live)
{
	struct option longopts[N_OPTS + 1];
	size_t n = 0;
	int c, idx;

	memset(longopts, 0, sizeof(longopts));
	for (size_t i = 0; i < N_OPTS; i++)
		if (live || !opts[i].live_only)
			longopts[n++] = (struct option){ opts[i].name,
							 opts[i].arg ? required_argument : no_argument,
							 NULL, opts[i].id };
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":", longopts, &idx)) != -1) {
		const char *name = c >= 256 ? longopts[idx].name : "";
		int64_t iv;
		double dv;

		switch (c) {
		case O_TRACE: o->trace = optarg; break;
		case O_FORMAT: o->format = optarg; break;
		case O_ARRIVAL: o->arrival = optarg; break;
		case O_LENGTHS: o->lengths = optarg; break;
		case O_NUM_REQUESTS:
			if (!ss_parse_int64(optarg, &iv) || iv < 1)
				return bad_value(name, "a positive integer", optarg);
			o->num_requests = (uint64_t)iv;
			break;
		case O_DURATION:
			/* at least 1 ns: a shorter one would be 0, "no limit" */
			if (!ss_parse_double(optarg, &dv) || !(dv >= 1e-9) || dv > 1e9)
				return bad_value(name, "seconds from 1e-9 to 1e9", optarg);
			o->duration_s = dv;
			break;
		case O_RATE_SCALE:
			if (!ss_parse_double(optarg, &dv) || dv <= 0 || dv > 1e6)
				return bad_value(name, "a factor > 0", optarg);
			o->rate_scale = dv;
			break;
		case O_MODEL: o->model = optarg; break;
		case O_GPU: o->gpu = optarg; break;
		case O_TP:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 64)
				return bad_value(name, "an integer in 1..64", optarg);
			o->tp = (int)iv;
			break;
		case O_INSTANCES:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 100000)
				return bad_value(name, "an integer in 1..100000", optarg);
			o->instances = (uint32_t)iv;
			break;
		case O_POLICY: o->policy = optarg; break;
		case O_ROUTER: o->router = optarg; break;
		case O_ORDER: o->order = optarg; break;
		case O_VICTIM: o->victim = optarg; break;
		case O_PREEMPTION: o->preemption = optarg; break;
		case O_PREFIX_CACHE: o->prefix_cache = optarg; break;
		case O_ADMISSION: o->admission = optarg; break;
		case O_PREDICTOR: o->predictor = optarg; break;
		case O_TENANTS: o->tenants = optarg; break;
		case O_PREFILL_INST:
		case O_DECODE_INST:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 100000)
				return bad_value(name, "an integer in 1..100000", optarg);
			*(c == O_PREFILL_INST ? &o->prefill_inst : &o->decode_inst) = (uint32_t)iv;
			break;
		case O_PREFILL_GPU: o->prefill_gpu = optarg; break;
		case O_DECODE_GPU: o->decode_gpu = optarg; break;
		case O_PREFILL_TP:
		case O_DECODE_TP:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 64)
				return bad_value(name, "an integer in 1..64", optarg);
			*(c == O_PREFILL_TP ? &o->prefill_tp : &o->decode_tp) = (int)iv;
			break;
		case O_PAIRING: o->pairing = optarg; break;
		case O_SEMI_PD: o->semi_pd = optarg; break;
		case O_KV_OVERLAP: o->kv_overlap = 1; break;
		case O_GPUS_PER_NODE:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 1024)
				return bad_value(name, "an integer in 1..1024", optarg);
			o->gpus_per_node = (int)iv;
			break;
		case O_COST_MODEL: o->cost_model = optarg; break;
		case O_SLO: o->slo = optarg; break;
		case O_SEED:
			if (!ss_parse_int64(optarg, &iv) || iv < 0)
				return bad_value(name, "a non-negative integer", optarg);
			o->seed = (uint64_t)iv;
			break;
		case O_OUT: o->out = optarg; break;
		case O_BLOCK_SIZE:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 4096)
				return bad_value(name, "an integer in 1..4096", optarg);
			o->block_size = (int)iv;
			break;
		case O_GPU_MEM_UTIL:
			if (!ss_parse_double(optarg, &dv) || dv <= 0 || dv > 1)
				return bad_value(name, "a fraction in (0, 1]", optarg);
			o->gpu_mem_util = dv;
			break;
		case O_KV_BLOCKS:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > (1 << 30))
				return bad_value(name, "a positive integer", optarg);
			o->kv_blocks = iv;
			break;
		case O_SAMPLE_INTERVAL:
			if (!ss_parse_double(optarg, &dv) || dv <= 0 || dv > 1e6)
				return bad_value(name, "seconds > 0", optarg);
			o->sample_interval_s = dv;
			break;
		case O_MODEL_CATALOG: o->model_catalog = optarg; break;
		case O_GPU_CATALOG: o->gpu_catalog = optarg; break;
		case O_POWER_CAP:
			if (!ss_parse_double(optarg, &dv) || dv <= 0 || dv > 1e5)
				return bad_value(name, "watts > 0", optarg);
			o->power_cap_w = dv;
			break;
		case O_GPU_CLOCK:
			if (!ss_parse_double(optarg, &dv) || dv < 0.2 || dv > 1)
				return bad_value(name, "a fraction in [0.2, 1]", optarg);
			o->clock_frac = dv;
			break;
		case O_CALIBRATION: o->calibration = optarg; break;
		case O_JSON: o->json = 1; break;
		case O_QUIET: o->quiet = 1; break;
		case O_BACKEND: o->backend = optarg; break;
		case O_THREADS:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 1024)
				return bad_value(name, "an integer in 1..1024", optarg);
			o->threads = (int)iv;
			break;
		case O_WIDTH_DIV:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 1024)
				return bad_value(name, "an integer in 1..1024", optarg);
			o->width_div = (int)iv;
			break;
		case O_LAYERS:
			if (!ss_parse_int64(optarg, &iv) || iv < 1 || iv > 1024)
				return bad_value(name, "an integer in 1..1024", optarg);
			o->layers = (int)iv;
			break;
		case O_HELP:
			help(stdout, live);
			return -1;
		case ':':
			cli_errorf("%s: expected a value (see `servesim %s --help`)", argv[optind - 1],
				   live ? "live" : "run");
			return SS_EXIT_USAGE;
		default:
			cli_errorf("unknown option '%s' (see `servesim %s --help`)", argv[optind - 1],
				   live ? "live" : "run");
			return SS_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_errorf("unexpected argument '%s' (see `servesim %s --help`)", argv[optind],
			   live ? "live" : "run");
		return SS_EXIT_USAGE;
	}
	return 0;
}

static int parse_slo(const char *spec, struct slo_config *slo, struct ss_error *err)
{
	struct ss_params p;
	int rc;

	if (!spec) {
		/* MLPerf Inference server scenario targets for Llama-3.1-8B. */
		*slo = (struct slo_config){ .ttft_ms = 2000, .tpot_ms = 100 };
		return 0;
	}
	rc = ss_params_parse(&p, "--slo", spec, false, err);
	if (!rc)
		rc = ss_params_double(&p, "ttft_ms", 0, &slo->ttft_ms, err);
	if (!rc)
		rc = ss_params_double(&p, "tpot_ms", 0, &slo->tpot_ms, err);
	if (!rc)
		rc = ss_params_double(&p, "e2e_ms", 0, &slo->e2e_ms, err);
	if (!rc)
		rc = ss_params_double(&p, "tbt_ms", 0, &slo->tbt_ms, err);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	if (!rc && (slo->ttft_ms < 0 || slo->tpot_ms < 0 || slo->e2e_ms < 0 || slo->tbt_ms < 0))
		rc = ss_error_set(err, -EINVAL, NULL, 0, "--slo: expected targets >= 0 ms");
	if (!rc && p.name[0])
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "--slo: expected ttft_ms=X,tpot_ms=Y[,e2e_ms=Z,tbt_ms=W], got '%s'", spec);
	return rc;
}

static void progress(void *ctx, uint64_t done, uint64_t total)
{
	int width = 40, fill = total ? (int)(width * done / total) : width;

	(void)ctx;
	fprintf(stderr, "\r[%.*s%*s] %3d%% %llu/%llu requests", fill,
		"########################################", width - fill, "",
		total ? (int)(100 * done / total) : 100, (unsigned long long)done,
		(unsigned long long)total);
	if (done == total)
		fputc('\n', stderr);
	fflush(stderr);
}

static json_t *config_json(const struct run_opts *o, const struct workload *wl,
			   const struct engine_config *ec, const struct slo_config *slo)
{
	return json_pack("{s:s, s:s?, s:s?, s:s?, s:I, s:f, s:f, s:s, s:s, s:i, s:i, s:s, s:s, s:s,"
			 " s:{s:f, s:f, s:f, s:f}, s:I, s:i, s:f, s:I, s:f, s:I,"
			 " s:s, s:s, s:s, s:s, s:s, s:s?, s:s?}",
			 "workload", wl->source, "trace", o->trace, "arrival", o->arrival,
			 "lengths", o->lengths, "num_requests", (json_int_t)o->num_requests,
			 "duration_s", o->duration_s, "rate_scale", o->rate_scale,
			 "model", ec->model->name, "gpu", ec->gpu->name, "tp", ec->tp,
			 "instances", (int)ec->n_instances, "policy", ec->policy,
			 "router", ec->router, "cost_model", ec->cost_model,
			 "slo", "ttft_ms", slo->ttft_ms, "tpot_ms", slo->tpot_ms, "e2e_ms", slo->e2e_ms,
			 "tbt_ms", slo->tbt_ms,
			 "seed", (json_int_t)ec->seed, "block_size", ec->block_size,
			 "gpu_memory_utilization", ec->gpu_mem_util,
			 "kv_blocks_override", (json_int_t)o->kv_blocks,
			 "sample_interval_s", o->sample_interval_s,
			 "requests", (json_int_t)wl->n,
			 "order", ec->order, "victim", ec->victim, "preemption", ec->preemption,
			 "prefix_cache", ec->prefix_cache, "admission", ec->admission,
			 "predictor", ec->predictor, "tenants", o->tenants);
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
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Live runs: defaults, checks and the executor (docs/live.md). */
static int live_setup(struct run_opts *o, struct engine_config *ec, struct live_exec **lx,
		      struct ss_error *err)
{
	bool cpu = !o->backend || !strcmp(o->backend, "cpu");
	struct live_config lc = {
		.model = ec->model, .backend = o->backend ? o->backend : "cpu",
		.threads = o->threads ? o->threads : 1,
		.width_div = o->width_div ? o->width_div : (cpu ? 8 : 1),
		.layers = o->layers ? o->layers : (cpu ? 4 : 0),
		.block_size = ec->block_size, .seed = o->seed,
	};
	int32_t blocks;
	int rc;

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
	return 0;
}

static int run_main(int argc, char **argv, bool live)
{
	struct run_opts o = {
		.rate_scale = 1.0, .model = "llama-3.1-8b", .gpu = "h100-sxm", .tp = 1,
		.instances = 1, .policy = "vllm", .router = "rr", .cost_model = "auto",
		.order = "fcfs", .victim = "newest", .preemption = "recompute",
		.prefix_cache = "off", .admission = "none", .block_size = 16, .gpu_mem_util = 0.9, .sample_interval_s = 1.0,
	};
	struct ss_error err = { 0 };
	struct catalog cat;
	struct workload wl;
	struct workload_spec ws = { 0 };
	struct engine_config ec;
	struct engine *eng = NULL;
	struct engine_results res;
	struct summary sum;
	struct slo_config slo = { 0 };
	struct run_info ri;
	json_t *cfg = NULL;
	const char *stores[2];
	char shipped_store[1100];
	int n_stores = 0;
	int rc, status = SS_EXIT_FAILURE;
	bool plots_skipped = false, run_failed = false;
	struct live_exec *lx = NULL;
	const char *energy_meter = NULL;
	char pools[256];
	bool energy_metered = true;
	struct wall wall;
	struct engine_clock clock = { wall_now, wall_sleep_until, &wall };
	struct ss_error run_err = { 0 };

	catalog_init(&cat);
	workload_init(&wl);
	rc = parse_args(argc, argv, &o, live);
	if (rc)
		return rc < 0 ? SS_EXIT_OK : rc;
	if (parse_slo(o.slo, &slo, &err)) {
		cli_error(&err);
		return SS_EXIT_USAGE;
	}
	if (cli_load_catalog(&cat, o.model_catalog, o.gpu_catalog, &err))
		goto fail;
	engine_config_defaults(&ec);
	ec.model = catalog_model(&cat, o.model);
	ec.gpu = catalog_gpu(&cat, o.gpu);
	if (!ec.model || !ec.gpu) {
		cli_errorf("unknown %s '%s' (see `servesim list %s`)", ec.model ? "GPU" : "model",
			   ec.model ? o.gpu : o.model, ec.model ? "gpus" : "models");
		status = SS_EXIT_USAGE;
		goto out;
	}

	if (!o.trace && !o.arrival && !o.lengths) {
		snprintf(o.default_trace, sizeof(o.default_trace), "%s/traces/azure_conv_2000.csv",
			 cli_data_dir());
		o.trace = o.default_trace;
	}
	ws.trace = o.trace;
	ws.format = TRACE_AUTO;
	if (o.format && trace_format_from_name(o.format, &ws.format)) {
		cli_errorf("--format: unknown format '%s' (see `servesim list formats`)", o.format);
		status = SS_EXIT_USAGE;
		goto out;
	}
	ws.arrival = o.arrival;
	ws.lengths = o.lengths;
	ws.num_requests = o.num_requests;
	ws.duration_ns = (int64_t)(o.duration_s * 1e9);
	ws.rate_scale = o.rate_scale;
	ws.seed = o.seed;
	ws.tenants = o.tenants;
	if (workload_build(&wl, &ws, &err))
		goto fail;

	ec.tp = o.tp;
	ec.n_instances = o.instances;
	ec.block_size = o.block_size;
	ec.gpu_mem_util = o.gpu_mem_util;
	ec.kv_blocks_override = o.kv_blocks;
	ec.policy = o.policy;
	ec.router = o.router;
	ec.order = o.order;
	ec.victim = o.victim;
	ec.preemption = o.preemption;
	ec.prefix_cache = o.prefix_cache;
	ec.admission = o.admission;
	ec.predictor = o.predictor;
	ec.n_prefill = o.prefill_inst;
	ec.n_decode = o.decode_inst;
	ec.prefill_tp = o.prefill_tp;
	ec.decode_tp = o.decode_tp;
	ec.pairing = o.pairing;
	ec.kv_overlap = o.kv_overlap;
	ec.gpus_per_node = o.gpus_per_node;
	if (o.semi_pd) {
		struct ss_params sp;

		if (ss_params_parse(&sp, "--semi-pd", o.semi_pd, false, &err) ||
		    ss_params_double(&sp, "sm", 0.5, &ec.semi_pd_sm, &err) ||
		    ss_params_double(&sp, "kv", 0.25, &ec.semi_pd_kv, &err) ||
		    ss_params_check_unused(&sp, &err))
			goto fail;
		if (sp.name[0] || !(ec.semi_pd_sm > 0 && ec.semi_pd_sm < 1) ||
		    !(ec.semi_pd_kv > 0 && ec.semi_pd_kv < 1)) {
			cli_errorf("--semi-pd: expected sm=F[,kv=G] with 0 < F, G < 1, got '%s'", o.semi_pd);
			status = SS_EXIT_USAGE;
			goto out;
		}
	}
	if ((o.prefill_gpu && !(ec.prefill_gpu = catalog_gpu(&cat, o.prefill_gpu))) ||
	    (o.decode_gpu && !(ec.decode_gpu = catalog_gpu(&cat, o.decode_gpu)))) {
		cli_errorf("%s: unknown GPU '%s' (see `servesim list gpus`)",
			   ec.prefill_gpu || !o.prefill_gpu ? "--decode-gpu" : "--prefill-gpu",
			   ec.prefill_gpu || !o.prefill_gpu ? o.decode_gpu : o.prefill_gpu);
		status = SS_EXIT_USAGE;
		goto out;
	}
	ec.slo_ttft_ns = (int64_t)(slo.ttft_ms * 1e6);
	ec.cost_model = o.cost_model;
	ec.seed = o.seed;
	stores[n_stores++] = o.calibration;   /* NULL entries are skipped */
	snprintf(shipped_store, sizeof(shipped_store), "%s/calibration.db", cli_data_dir());
	stores[n_stores++] = shipped_store;
	ec.stores = stores;
	ec.n_stores = n_stores;
	ec.power_cap_w = o.power_cap_w;
	ec.clock_frac = o.clock_frac;
	ec.sample_interval_ns = o.out ? (int64_t)(o.sample_interval_s * 1e9) : 0;
	if (live) {
		if (live_setup(&o, &ec, &lx, &err))
			goto fail;
		ec.clock = &clock;
		ec.cost_model = "roofline";   /* unused: steps are timed, not predicted */
	}
	if (engine_new(&eng, &ec, &wl, &err))
		goto fail;
	if (!o.quiet && isatty(STDERR_FILENO))
		engine_set_progress(eng, progress, NULL);
	clock_gettime(CLOCK_MONOTONIC, &wall.t0);
	if (engine_run(eng, &run_err)) {
		/* A live run that fails (a kernel error) keeps what it recorded:
		 * the results are written, marked failed; a simulation that
		 * fails is a bug and writes nothing. */
		if (!live) {
			err = run_err;
			goto fail;
		}
		run_failed = true;
	}
	engine_results(eng, &res);
	if (live) {
		/* Live steps are measured, not predicted; their energy is
		 * metered where the backend has a meter (docs/live.md), idle
		 * energy being what the meter counted between steps. */
		double idle_j;
		int64_t idle_ns = res.end_ns - res.inst[0].busy_ns;

		res.cost_model_name = "live";
		for (int op = 0; op < COST_OP_COUNT; op++)
			res.op_backend[op] = "live";
		energy_metered = live_exec_energy(lx, &idle_j, &energy_meter);
		res.idle_power_w = energy_metered && idle_ns > 0 ? idle_j / (idle_ns / 1e9) : 0;
	}
	if (summary_compute(&sum, &res, &slo, ec.tp, &err))
		goto fail;

	cfg = config_json(&o, &wl, &ec, &slo);
	if (lx)
		json_object_set_new(cfg, "live_executor", json_string(live_exec_describe(lx)));
	ri = (struct run_info){
		.version = SERVESIM_VERSION, .mode = live ? "live" : "sim", .seed = o.seed,
		.model = ec.model->name, .gpu = ec.gpu->name, .tp = ec.tp,
		.n_instances = ec.n_instances, .policy = ec.policy, .router = ec.router,
		.cost_model = live ? "live" : ec.cost_model, .workload = wl.source, .config = cfg,
		.status = run_failed ? run_err.msg : NULL,
		.energy_meter = energy_meter, .energy_metered = energy_metered,
		.pools = ec.n_prefill > 0 || ec.semi_pd_sm > 0 ? pools : NULL,
	};
	if (ec.semi_pd_sm > 0)
		snprintf(pools, sizeof(pools), "semi-PD on %u x %d %s, %.0f%% of compute and %.0f%% of KV to prefill",
			 ec.n_instances, ec.tp, ec.gpu->name, 100 * ec.semi_pd_sm, 100 * ec.semi_pd_kv);
	else if (ec.n_prefill > 0)
		snprintf(pools, sizeof(pools), "%u prefill x %d %s + %u decode x %d %s, pairing %s%s",
			 ec.n_prefill, ec.prefill_tp ? ec.prefill_tp : ec.tp,
			 (ec.prefill_gpu ? ec.prefill_gpu : ec.gpu)->name, ec.n_decode,
			 ec.decode_tp ? ec.decode_tp : ec.tp, (ec.decode_gpu ? ec.decode_gpu : ec.gpu)->name,
			 ec.pairing ? ec.pairing : "lor", ec.kv_overlap ? ", layer-wise overlap" : "");
	if (o.out && report_write_dir(o.out, &sum, &ri, &res, &plots_skipped, &err))
		goto fail;
	if (plots_skipped)
		cli_errorf("warning: gnuplot not found; wrote the plot scripts (.gp) and data (.dat) to %s",
			   o.out);
	if (o.json) {
		json_t *j = report_summary_json(&sum, &ri);

		if (!j || json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS |
					       JSON_REAL_PRECISION(10))) {
			json_decref(j);
			cli_errorf("could not write the JSON summary");
			goto out;
		}
		fputc('\n', stdout);
		json_decref(j);
	} else if (!o.quiet) {
		report_summary_text(stdout, &sum, &ri);
		if (o.out)
			printf("\nresults written to %s/\n", o.out);
	}
	if (run_failed) {
		char msg[1024];

		ss_error_format(&run_err, msg, sizeof(msg));
		cli_errorf("%s; the live run stopped early, results so far %s%s", msg,
			   o.out ? "written (marked failed) to " : "printed above", o.out ? o.out : "");
		goto out;
	}
	status = SS_EXIT_OK;
	goto out;
fail:
	cli_error(&err);
out:
	json_decref(cfg);
	engine_free(eng);
	live_exec_free(lx);
	workload_release(&wl);
	catalog_release(&cat);
	return status;
}

int cmd_run(int argc, char **argv)
{
	return run_main(argc, argv, false);
}

int cmd_live(int argc, char **argv)
{
	return run_main(argc, argv, true);
}
