/* servesim calibrate fit-engine — fit an engine profile to measured serving
 * runs (analysis/engine-fit.h, docs/engines.md).
 *
 *   servesim calibrate fit-engine [options] RESULT...
 *
 * Reads every run of every RESULT (traces/serving.h), keeps those --select
 * admits, re-simulates each with the profile, fits the --free parameters,
 * prints them with their 95% intervals and the training error, then (unless
 * --no-holdout) refits without each --group-by group and prints each run's
 * measured, fitted and held-out figures.  --out writes the fitted profile
 * as an engines JSON file (--engine-catalog reads it back); --json writes
 * the whole report.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>
#include <jansson.h>

#include "cli.h"
#include "engine-fit.h"
#include "engine-obs.h"
#include "options.h"
#include "params.h"
#include "serving.h"
#include "ss-file.h"
#include "store.h"

enum { O_ENGINE = 256, O_ENGINE_CATALOG, O_FREE, O_FORMAT, O_MODEL, O_GPU, O_TP, O_POLICY,
       O_COST_MODEL, O_MEM_UTIL, O_KV_FREE, O_BLOCK_SIZE, O_GROUP_BY, O_NO_HOLDOUT, O_NAME, O_OUT, O_STORE, O_JSON, O_SELECT,
       O_CALIBRATION, O_PREFILL_INST, O_DECODE_INST, O_PREFILL_TP, O_DECODE_TP,
       O_JOBS, O_NO_FIT, O_CLOSED_START, O_CLOSED_MAX_SEQS, O_CLOSED_MAX_TOKENS,
       O_MODEL_CONFIG, O_WEIGHT_DTYPE, O_KV_DTYPE, O_GPUS_PER_NODE, O_HELP };

static const struct {
	const char *name;
	int id;
	const char *arg;
	const char *help;
} opts[] = {
	{ "engine", O_ENGINE, "NAME", "profile to start from (default vllm)" },
	{ "engine-catalog", O_ENGINE_CATALOG, "FILE", "extra engine profiles JSON" },
	{ "free", O_FREE, "KEY[:LO:HI],...", "parameters to fit, with bounds (default sched_us:1:1e5,api_in_ms:0.01:1e4)" },
	{ "format", O_FORMAT, "NAME", "result format: auto (default), bench, llm-d, distserve, llmservingsim, splitwise, silicon" },
	{ "select", O_SELECT, "KEY=VALUE", "keep runs whose engine, model, gpu, tp, mode or precision is VALUE (repeatable: all must hold)" },
	{ "model", O_MODEL, "NAME", "catalog model for runs that do not name one (or to override)" },
	{ "model-config", O_MODEL_CONFIG, "FILE", "a Hugging Face config.json: its model for every run (as --model; named by --model, else by the file)" },
	{ "gpu", O_GPU, "NAME", "catalog GPU for runs that do not name one (or to override)" },
	{ "tp", O_TP, "N", "tensor parallelism for runs that do not say (or to override)" },
	{ "policy", O_POLICY, "SPEC", "batch policy of open and closed runs (default vllm; static batches use static)" },
	{ "cost-model", O_COST_MODEL, "SPEC", "cost model (default auto)" },
	{ "calibration", O_CALIBRATION, "FILE", "a calibration store to prefer over the shipped one" },
	{ "gpu-memory-utilization", O_MEM_UTIL, "F", "size every run's KV cache by vLLM's rule: fraction F of GPU memory for weights, activations and KV (default: the profile's rule, else 0.9)" },
	{ "block-size", O_BLOCK_SIZE, "N", "KV block size of every run, tokens (default: the profile's, else 16)" },
	{ "kv-free-fraction", O_KV_FREE, "F", "size every run's KV cache by TensorRT-LLM's rule: fraction F of the memory left after weights and activations (not with --gpu-memory-utilization)" },
	{ "weight-dtype", O_WEIGHT_DTYPE, "T", "weights of runs without a precision: bf16 (default), fp8 or fp4 (a run's precision column wins)" },
	{ "kv-dtype", O_KV_DTYPE, "T", "KV cache of every run: bf16 (default) or fp8 (silicon rows do not record it)" },
	{ "prefill-instances", O_PREFILL_INST, "N", "disaggregate every run: N prefill instances (with --decode-instances)" },
	{ "decode-instances", O_DECODE_INST, "M", "disaggregate every run: M decode instances (with --prefill-instances)" },
	{ "prefill-tp", O_PREFILL_TP, "N", "GPUs per prefill instance (default --tp)" },
	{ "decode-tp", O_DECODE_TP, "N", "GPUs per decode instance (default --tp)" },
	{ "gpus-per-node", O_GPUS_PER_NODE, "N", "GPUs on one NVLink domain for the link model (default 8; a GB200 NVL72 rack: 72)" },
	{ "group-by", O_GROUP_BY, "UNIT", "leave-out unit: run, file (default), model, gpu, tp, model-tp, isl" },
	{ "no-holdout", O_NO_HOLDOUT, NULL, "skip the leave-group-out refits" },
	{ "closed-start", O_CLOSED_START, "spread|burst|drained", "closed-loop table rows: clients out of phase (default), all starting at once, or drained (the measured phase as perf_analyzer runs it: its first round all at once on an idle engine, the other nine out of phase)" },
	{ "closed-max-seqs", O_CLOSED_MAX_SEQS, "C|C-K", "closed-loop runs of C clients: the server admits at most C (or C - K) requests (a vllm policy's max_num_seqs)" },
	{ "closed-max-tokens", O_CLOSED_MAX_TOKENS, "C+ISL+K", "closed-loop table rows: the step token budget is C + ISL + K (a vllm policy's max_num_batched_tokens, replacing the policy's; TensorRT-LLM's benchmark launch: K = 1500)" },
	{ "no-fit", O_NO_FIT, NULL, "predict every run with the --engine profile as it is (no fit, no holdout)" },
	{ "jobs", O_JOBS, "N", "simulate N runs at once on threads (default 1; results do not depend on N)" },
	{ "name", O_NAME, "NAME", "name of the fitted profile (default: the starting one's)" },
	{ "out", O_OUT, "FILE", "write the fitted profile as an engines JSON file" },
	{ "store", O_STORE, "FILE", "keep the fitted profile in a calibration store (made if missing; run --engine-store reads it)" },
	{ "json", O_JSON, "[=FILE]", "print the report (parameters, runs, errors) as JSON on stdout instead of the table; =FILE: write it to FILE as well as the table" },
	{ "help", O_HELP, NULL, "show this help" },
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))
#define MAX_SELECT 8

static void help(FILE *f)
{
	fprintf(f, "usage: servesim calibrate fit-engine [options] RESULT...\n\n"
		   "Fit an engine profile's parameters to measured serving runs: every run is\n"
		   "re-simulated (its lengths, arrivals, batch or concurrency, model, GPU, TP) and\n"
		   "the --free parameters move to bring its TTFT and TPOT to the measured ones\n"
		   "(docs/engines.md).  Prints each parameter with its 95%% interval, the training\n"
		   "error, and each run's figure predicted by a fit made without its group.\n\n"
		   "options:\n");
	for (size_t i = 0; i < N_OPTS; i++) {
		char left[64];

		snprintf(left, sizeof(left), "--%s%s%s", opts[i].name,
			 opts[i].arg && opts[i].arg[0] != '[' ? " " : "", opts[i].arg ? opts[i].arg : "");
		fprintf(f, "  %-24s %s\n", left, opts[i].help);
	}
	fprintf(f, "\nexit status: 0 success, 1 bad input or failed fit, 2 bad command line\n");
}

/* "KEY[:LO:HI],..." into p[]; default bounds 1e-3 .. 1e6. */
static int parse_free(char *spec, struct efit_param *p, int *n)
{
	char *save = NULL;

	*n = 0;
	for (char *t = strtok_r(spec, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *lo = strchr(t, ':'), *hi = NULL;
		struct engine_profile probe = { 0 };

		if (*n == EFIT_MAX_PARAMS) {
			cli_errorf("--free: at most %d parameters", EFIT_MAX_PARAMS);
			return -1;
		}
		p[*n] = (struct efit_param){ .key = t, .lo = 1e-3, .hi = 1e6 };
		if (lo) {
			*lo++ = '\0';
			hi = strchr(lo, ':');
			if (!hi) {
				cli_errorf("--free %s: expected KEY or KEY:LO:HI", t);
				return -1;
			}
			*hi++ = '\0';
			if (!ss_parse_double(lo, &p[*n].lo) || !ss_parse_double(hi, &p[*n].hi) ||
			    !(p[*n].lo > 0) || !(p[*n].hi >= p[*n].lo) || !isfinite(p[*n].hi)) {
				cli_errorf("--free %s: expected bounds 0 < LO <= HI, got '%s:%s'", t, lo, hi);
				return -1;
			}
		}
		if (!engine_profile_param(&probe, t)) {
			cli_errorf("--free: '%s' is not a numeric engine parameter (docs/engines.md)", t);
			return -1;
		}
		(*n)++;
	}
	if (!*n) {
		cli_errorf("--free: expected at least one parameter");
		return -1;
	}
	return 0;
}

/* Runs left out, one line per reason: a table of a few hundred rows of
 * models or precisions servesim cannot replay would otherwise bury the
 * fit's own output under a line per row. */
#define SKIP_REASONS 16

struct skips {
	struct {
		char why[512];
		char first[160];
		size_t n;
	} r[SKIP_REASONS];
	int n;
};

/* msg is "LABEL: why" (engine-obs.c); a reason not seen before is printed
 * at once when the table is full. */
static void skip_note(struct skips *sk, const char *label, const char *msg)
{
	size_t ll = strlen(label);
	const char *why = msg;

	if (ll && !strncmp(msg, label, ll) && !strncmp(msg + ll, ": ", 2))
		why = msg + ll + 2;
	for (int i = 0; i < sk->n; i++) {
		if (!strcmp(sk->r[i].why, why)) {
			sk->r[i].n++;
			return;
		}
	}
	if (sk->n == SKIP_REASONS) {
		fprintf(stderr, "servesim: skipped %s\n", msg);
		return;
	}
	snprintf(sk->r[sk->n].why, sizeof(sk->r[0].why), "%s", why);
	snprintf(sk->r[sk->n].first, sizeof(sk->r[0].first), "%s", label);
	sk->r[sk->n++].n = 1;
}

static void skip_report(const struct skips *sk)
{
	for (int i = 0; i < sk->n; i++) {
		if (sk->r[i].n == 1)
			fprintf(stderr, "servesim: skipped %s: %s\n", sk->r[i].first, sk->r[i].why);
		else
			fprintf(stderr, "servesim: skipped %zu runs (%s and %zu more): %s\n",
				sk->r[i].n, sk->r[i].first, sk->r[i].n - 1, sk->r[i].why);
	}
}

static bool selected(const struct serving_run *r, char *const *sel, int n_sel)
{
	for (int i = 0; i < n_sel; i++) {
		const char *eq = strchr(sel[i], '=');
		size_t k = (size_t)(eq - sel[i]);
		const char *v = eq + 1;
		char tp[16];

		snprintf(tp, sizeof(tp), "%d", (int)r->tp);
		if ((!strncmp(sel[i], "engine", k) && k == 6 && strcmp(r->engine, v)) ||
		    (!strncmp(sel[i], "model", k) && k == 5 && strcmp(r->model, v)) ||
		    (!strncmp(sel[i], "gpu", k) && k == 3 && strcmp(r->gpu, v)) ||
		    (!strncmp(sel[i], "tp", k) && k == 2 && strcmp(tp, v)) ||
		    (!strncmp(sel[i], "mode", k) && k == 4 && strcmp(r->mode, v)) ||
		    (!strncmp(sel[i], "precision", k) && k == 9 && strcmp(r->precision, v)))
			return false;
	}
	return true;
}

/* Everything one invocation holds, released in one place. */
struct fe {
	struct catalog cat;
	struct serving_set *sets;
	size_t n_sets;
	struct efit_obs *obs;
	struct workload *wl;
	char (*names)[512];   /* the name, then the policy specs it needs */
	char (*groups)[512];
	size_t n_obs, n_built;          /* runs fitted; workloads built (released) */
	double *pred, *fitted;
};

static void fe_release(struct fe *x)
{
	for (size_t i = 0; i < x->n_sets; i++)
		serving_set_release(&x->sets[i]);
	for (size_t i = 0; i < x->n_built; i++)
		workload_release(&x->wl[i]);
	free(x->sets);
	free(x->obs);
	free(x->wl);
	free(x->names);
	free(x->groups);
	free(x->pred);
	free(x->fitted);
	catalog_release(&x->cat);
}

/* root as JSON to path, atomically (ss-file.h); takes root's reference. */
static int write_json(const char *path, json_t *root, struct ss_error *err)
{
	struct ss_file sf;
	int rc = ss_file_open(&sf, path, 0, err);

	if (!rc && json_dumpf(root, sf.f, JSON_INDENT(2) | JSON_REAL_PRECISION(8))) {
		ss_file_abort(&sf);
		rc = ss_error_set(err, -EIO, path, 0, "cannot write");
	} else if (!rc) {
		fputc('\n', sf.f);
		rc = ss_file_commit(&sf, err);
	}
	json_decref(root);
	return rc;
}

/* root as JSON on fd (the stdout kept aside by --json), closing fd; takes
 * root's reference. */
static int write_json_fd(int fd, json_t *root, struct ss_error *err)
{
	FILE *f = fdopen(fd, "w");
	int rc = 0;

	if (!f || json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(8)) ||
	    fputc('\n', f) == EOF)
		rc = ss_error_set(err, -EIO, NULL, 0, "cannot write the JSON to standard output");
	if (f ? fclose(f) : close(fd))
		rc = rc ? rc : ss_error_set(err, -EIO, NULL, 0, "cannot write the JSON to standard output");
	json_decref(root);
	return rc;
}

/* p as an engines.json entry. (transfer full) */
static json_t *profile_json(const struct engine_profile *p, const char *src)
{
	json_t *e = json_object(), *sizes = json_array();

	json_object_set_new(e, "name", json_string(p->name));
	json_object_set_new(e, "versions", json_string(p->versions));
	if (p->policy[0])
		json_object_set_new(e, "policy", json_string(p->policy));
	{
		static const char *const keys[] = {
			"sched_us", "sched_us_per_seq", "sched_us_per_token", "prep_us",
			"prep_us_per_token", "output_us", "output_us_per_seq", "launch_us",
			"launch_us_per_layer", "launch_overlap", "graph_launch_us",
			"allreduce_floor_us", "api_in_ms", "api_out_ms", "api_cv",
			"dispatch_us_per_worker",
		};
		struct engine_profile q = *p;

		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			double v = *engine_profile_param(&q, keys[i]);

			if (v > 0)
				json_object_set_new(e, keys[i], json_real(v));
		}
	}
	json_object_set_new(e, "async_output", json_boolean(p->async_output));
	for (int32_t i = 0; i < p->n_graph_sizes; i++)
		json_array_append_new(sizes, json_integer(p->graph_sizes[i]));
	if (p->n_graph_sizes)
		json_object_set_new(e, "graph_sizes", sizes);
	else
		json_decref(sizes);
	if (p->n_graph_sizes)
		json_object_set_new(e, "graph_mixed", json_boolean(p->graph_mixed));
	json_object_set_new(e, "allreduce",
			    json_string(p->allreduce == ENGINE_AR_NCCL ? "nccl" : "custom"));
	if (engine_profile_burst(p) > 1)
		json_object_set_new(e, "scheduler_steps", json_integer(p->scheduler_steps));
	/* the KV rule is the starting profile's (never fitted): kept */
	if (p->kv_memory != ENGINE_KV_TOTAL)
		json_object_set_new(e, "kv_memory",
				    json_string(p->kv_memory == ENGINE_KV_FREE ? "free" : "total"));
	if (p->kv_fraction > 0)
		json_object_set_new(e, "kv_fraction", json_real(p->kv_fraction));
	if (p->kv_block_size > 0)
		json_object_set_new(e, "kv_block_size", json_integer(p->kv_block_size));
	if (p->adp_balance) {
		json_object_set_new(e, "attention_dp_balance", json_true());
		json_object_set_new(e, "attention_dp_timeout_iters",
				    json_integer(p->adp_timeout_iters));
		json_object_set_new(e, "attention_dp_batching_wait_iters",
				    json_integer(p->adp_batching_wait_iters));
	}
	json_object_set_new(e, "source", json_string(src));
	return e;
}

static int write_profile(const char *path, const struct engine_profile *p, const char *src,
			 struct ss_error *err)
{
	json_t *root = json_object(), *arr = json_array();

	json_array_append_new(arr, profile_json(p, src));
	json_object_set_new(root, "engines", arr);
	return write_json(path, root, err);
}

/* Keep p in the calibration store at path (made if missing). */
static int store_profile(const char *path, const struct engine_profile *p, const char *src,
			 struct ss_error *err)
{
	json_t *e = profile_json(p, src);
	char *text = json_dumps(e, JSON_COMPACT | JSON_REAL_PRECISION(17));
	struct cal_store *st = NULL;
	int rc;

	json_decref(e);
	if (!text)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	rc = cal_store_open(&st, path, CAL_OPEN_CREATE, err);
	if (!rc)
		rc = cal_store_put_engine(st, p->name, text, src, err);
	cal_store_close(st);
	free(text);
	return rc;
}

int cal_cli_fit_engine(int argc, char **argv)
{
	struct option longopts[N_OPTS + 1];
	struct efit_source_opts so = { .group_by = EFIT_GROUP_FILE };
	struct efit_param free_p[EFIT_MAX_PARAMS];
	enum serving_format fmt = SERVING_AUTO;
	const char *engine = "vllm", *engine_catalog = NULL, *name = NULL, *out = NULL, *store = NULL;
	const char *json = NULL, *cost_model = "auto", *calibration = NULL, *model_config = NULL;
	int json_fd = -1;            /* --json: the real stdout, kept aside */
	char config_name[64];
	char default_free[] = "sched_us:1:1e5,api_in_ms:0.01:1e4", *free_spec = default_free;
	char *sel[MAX_SELECT];
	char shipped[4096];
	const char *stores[2];
	int n_sel = 0, n_free = 0, c, status = SS_EXIT_FAILURE, jobs = 1, gpus_per_node = 0;
	/* 0: not given, the profile's KV rule (engine_kv_rule_of) */
	double mem_util = 0, kv_free = 0;
	int block_size = 0;   /* 0: the profile's, else 16 (engine_block_size) */
	enum ss_dtype weight_dtype = SS_DTYPE_MODEL, kv_dtype = SS_DTYPE_MODEL;
	int64_t layout[4] = { 0, 0, 0, 0 };   /* prefill, decode instances; prefill, decode TP */
	bool holdout = true, fit = true;
	struct engine_profile start;
	struct engine_config base;
	struct efit_result res;
	struct ss_error err = { 0 };
	struct fe x = { 0 };
	struct skips skipped = { .n = 0 };
	int64_t v;

	memset(longopts, 0, sizeof(longopts));
	for (size_t i = 0; i < N_OPTS; i++)
		longopts[i] = (struct option){ opts[i].name,
					       !opts[i].arg ? no_argument : opts[i].arg[0] == '[' ?
					       optional_argument : required_argument, NULL,
					       opts[i].id };
	opterr = 0;
	optind = 1;
	while ((c = cli_getopt_long(argc, argv, ":", longopts)) != -1) {
		switch (c) {
		case O_ENGINE: engine = optarg; break;
		case O_ENGINE_CATALOG: engine_catalog = optarg; break;
		case O_FREE: free_spec = optarg; break;
		case O_FORMAT:
			if (serving_format_from_name(optarg, &fmt)) {
				cli_errorf("--format: unknown result format '%s'", optarg);
				return SS_EXIT_USAGE;
			}
			break;
		case O_SELECT:
			if (n_sel == MAX_SELECT || !strchr(optarg, '=') ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyz") != (size_t)(strchr(optarg, '=') - optarg) ||
			    (strncmp(optarg, "engine=", 7) && strncmp(optarg, "model=", 6) &&
			     strncmp(optarg, "gpu=", 4) && strncmp(optarg, "tp=", 3) &&
			     strncmp(optarg, "mode=", 5) && strncmp(optarg, "precision=", 10))) {
				cli_errorf("--select: expected engine=, model=, gpu=, tp=, mode= or precision=VALUE (at most %d), got '%s'",
					   MAX_SELECT, optarg);
				return SS_EXIT_USAGE;
			}
			sel[n_sel++] = optarg;
			break;
		case O_MODEL: so.model = optarg; break;
		case O_MODEL_CONFIG: model_config = optarg; break;
		case O_GPU: so.gpu = optarg; break;
		case O_TP:
			if (!ss_parse_int64(optarg, &v) || v < 1 || v > 1024) {
				cli_errorf("--tp: expected an integer 1..1024, got '%s'", optarg);
				return SS_EXIT_USAGE;
			}
			so.tp = (int)v;
			break;
		case O_POLICY: so.policy = optarg; break;
		case O_COST_MODEL: cost_model = optarg; break;
		case O_CALIBRATION: calibration = optarg; break;
		case O_MEM_UTIL:
			if (!ss_parse_double(optarg, &mem_util) || !(mem_util > 0) || mem_util > 1) {
				cli_errorf("--gpu-memory-utilization: expected a fraction in (0, 1], got '%s'",
					   optarg);
				return SS_EXIT_USAGE;
			}
			break;
		case O_BLOCK_SIZE:
			if (!ss_parse_int64(optarg, &v) || v < 1 || v > 4096) {
				cli_errorf("--block-size: expected an integer in 1..4096, got '%s'", optarg);
				return SS_EXIT_USAGE;
			}
			block_size = (int)v;
			break;
		case O_KV_FREE:
			if (!ss_parse_double(optarg, &kv_free) || !(kv_free > 0) || kv_free > 1) {
				cli_errorf("--kv-free-fraction: expected a fraction in (0, 1], got '%s'",
					   optarg);
				return SS_EXIT_USAGE;
			}
			break;
		case O_WEIGHT_DTYPE:
			if (ss_dtype_parse(optarg, &weight_dtype)) {
				cli_errorf("--weight-dtype: expected bf16, fp8 or fp4, got '%s'", optarg);
				return SS_EXIT_USAGE;
			}
			break;
		case O_KV_DTYPE:
			if (ss_dtype_parse(optarg, &kv_dtype) || kv_dtype == SS_DTYPE_FP4) {
				cli_errorf("--kv-dtype: expected bf16 or fp8, got '%s'", optarg);
				return SS_EXIT_USAGE;
			}
			break;
		case O_PREFILL_INST:
		case O_DECODE_INST:
		case O_PREFILL_TP:
		case O_DECODE_TP:
			if (!ss_parse_int64(optarg, &v) || v < 1 || v > (c <= O_DECODE_INST ? 100000 : 64)) {
				static const char *const what[] = { "--prefill-instances",
					"--decode-instances", "--prefill-tp", "--decode-tp" };

				cli_errorf("%s: expected an integer 1..%d, got '%s'", what[c - O_PREFILL_INST],
					   c <= O_DECODE_INST ? 100000 : 64, optarg);
				return SS_EXIT_USAGE;
			}
			layout[c - O_PREFILL_INST] = v;
			break;
		case O_GPUS_PER_NODE:
			if (!ss_parse_int64(optarg, &v) || v < 1 || v > 1024) {
				cli_errorf("--gpus-per-node: expected an integer 1..1024, got '%s'", optarg);
				return SS_EXIT_USAGE;
			}
			gpus_per_node = (int)v;
			break;
		case O_GROUP_BY:
			if (efit_group_by_from_name(optarg, &so.group_by)) {
				cli_errorf("--group-by: expected run, file, model, gpu, tp, model-tp or isl, got '%s'",
					   optarg);
				return SS_EXIT_USAGE;
			}
			break;
		case O_NO_HOLDOUT: holdout = false; break;
		case O_NO_FIT: fit = false; holdout = false; break;
		case O_CLOSED_START:
			if (strcmp(optarg, "spread") && strcmp(optarg, "burst") &&
			    strcmp(optarg, "drained")) {
				cli_errorf("--closed-start: expected spread, burst or drained, got '%s'",
					   optarg);
				return SS_EXIT_USAGE;
			}
			so.closed_burst = !strcmp(optarg, "burst");
			so.closed_drained = !strcmp(optarg, "drained");
			break;
		case O_CLOSED_MAX_SEQS:
			/* "C" or "C-K": the row's concurrency, or K fewer */
			if (optarg[0] != 'C' || (optarg[1] && (optarg[1] != '-' ||
			    !ss_parse_int64(optarg + 2, &v) || v < 0 || v > 1000000))) {
				cli_errorf("--closed-max-seqs: expected C or C-K (K an integer 0..1000000), got '%s'",
					   optarg);
				return SS_EXIT_USAGE;
			}
			so.closed_seqs_set = true;
			so.closed_seqs_short = optarg[1] ? (int)v : 0;
			break;
		case O_CLOSED_MAX_TOKENS:
			/* "C+ISL+K": the row's clients plus its prompt plus K */
			if (strncmp(optarg, "C+ISL+", 6) || !ss_parse_int64(optarg + 6, &v) ||
			    v < 0 || v > 1000000) {
				cli_errorf("--closed-max-tokens: expected C+ISL+K (K an integer 0..1000000), got '%s'",
					   optarg);
				return SS_EXIT_USAGE;
			}
			so.closed_tokens_set = true;
			so.closed_tokens_extra = (int)v;
			break;
		case O_JOBS:
			if (!ss_parse_int64(optarg, &v) || v < 1 || v > EFIT_MAX_JOBS) {
				cli_errorf("--jobs: expected an integer 1..%d, got '%s'", EFIT_MAX_JOBS, optarg);
				return SS_EXIT_USAGE;
			}
			jobs = (int)v;
			break;
		case O_NAME: name = optarg; break;
		case O_OUT: out = optarg; break;
		case O_STORE: store = optarg; break;
		case O_JSON:
			/* --json: stdout, as every command's; --json=FILE: a file */
			json = optarg ? optarg : "-";
			break;
		case O_HELP:
			help(stdout);
			return SS_EXIT_OK;
		case CLI_OPT_REFUSED:
			return SS_EXIT_USAGE;
		case ':':
			cli_errorf("%s: expected a value (see `servesim calibrate fit-engine --help`)",
				   argv[optind - 1]);
			return SS_EXIT_USAGE;
		default:
			cli_errorf("calibrate fit-engine: unknown option '%s' (see `servesim calibrate fit-engine --help`)",
				   argv[optind - 1]);
			return SS_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		cli_errorf("calibrate fit-engine: expected at least one RESULT file");
		return SS_EXIT_USAGE;
	}
	/* --json (bare): the JSON alone on stdout, so the table goes to
	 * /dev/null and the JSON to the stdout kept aside */
	if (json && !strcmp(json, "-")) {
		fflush(stdout);
		json_fd = dup(STDOUT_FILENO);
		if (json_fd < 0 || !freopen("/dev/null", "w", stdout)) {
			cli_errorf("--json: cannot set standard output aside: %s", strerror(errno));
			return SS_EXIT_FAILURE;
		}
	}
	if (parse_free(free_spec, free_p, &n_free))
		return SS_EXIT_USAGE;
	if ((layout[0] > 0) != (layout[1] > 0) || ((layout[2] || layout[3]) && !layout[0])) {
		cli_errorf("calibrate fit-engine: --prefill-instances and --decode-instances go together (--prefill-tp and --decode-tp need them)");
		return SS_EXIT_USAGE;
	}
	gsl_set_error_handler_off();

	catalog_init(&x.cat);
	if (cli_load_catalog(&x.cat, NULL, NULL, engine_catalog, &err)) {
		cli_error(&err);
		goto out;
	}
	if (model_config) {
		struct model_spec mc;

		if (model_from_hf_config(&mc, model_config, so.model, &err) ||
		    catalog_add_model(&x.cat, &mc, &err)) {
			cli_error(&err);
			goto out;
		}
		snprintf(config_name, sizeof(config_name), "%s", mc.name);
		so.model = config_name;
	}
	if (!strcmp(engine, "none")) {
		memset(&start, 0, sizeof(start));
		snprintf(start.name, sizeof(start.name), "fitted");
	} else if (catalog_engine(&x.cat, engine)) {
		start = *catalog_engine(&x.cat, engine);
	} else {
		cli_errorf("--engine: unknown engine '%s' (see `servesim list engines`)", engine);
		status = SS_EXIT_USAGE;
		goto out;
	}
	if (name)
		snprintf(start.name, sizeof(start.name), "%s", name);
	if (!so.policy && start.policy[0])
		so.policy = start.policy;   /* the engine's own batching rules */
	if (so.closed_seqs_set && so.policy && (strncmp(so.policy, "vllm", 4) ||
						(so.policy[4] && so.policy[4] != ':') ||
						strstr(so.policy, "max_num_seqs"))) {
		cli_errorf("--closed-max-seqs: needs a vllm batch policy that does not set max_num_seqs (policy '%s')",
			   so.policy);
		status = SS_EXIT_USAGE;
		goto out;
	}
	if (so.closed_tokens_set && so.policy && (strncmp(so.policy, "vllm", 4) ||
						  (so.policy[4] && so.policy[4] != ':'))) {
		cli_errorf("--closed-max-tokens: needs a vllm batch policy (policy '%s')", so.policy);
		status = SS_EXIT_USAGE;
		goto out;
	}
	if ((so.model && !catalog_model(&x.cat, so.model)) || (so.gpu && !catalog_gpu(&x.cat, so.gpu))) {
		cli_errorf("%s: unknown %s '%s'", so.model && !catalog_model(&x.cat, so.model) ?
			   "--model" : "--gpu", so.model && !catalog_model(&x.cat, so.model) ?
			   "model" : "GPU", so.model && !catalog_model(&x.cat, so.model) ? so.model : so.gpu);
		status = SS_EXIT_USAGE;
		goto out;
	}
	if (mem_util > 0 && kv_free > 0) {
		cli_errorf("--gpu-memory-utilization and --kv-free-fraction: expected one of them (each is a rule for the whole KV cache)");
		status = SS_EXIT_USAGE;
		goto out;
	}
	engine_config_defaults(&base);
	base.cost_model = cost_model;
	base.gpu_mem_util = mem_util;
	base.kv_free_fraction = kv_free;
	base.block_size = block_size;
	/* the starting profile, so a run's checks before it is simulated
	 * (a static batch that must fit the KV cache) size the KV by its rule;
	 * each evaluation sets the profile it evaluates (engine-fit.c) */
	base.engine = &start;
	base.weight_dtype = weight_dtype;
	base.kv_dtype = kv_dtype;
	/* every run replayed on this disaggregated layout (DistServe's own
	 * runs: the layout is in its launch scripts, not in the result) */
	base.n_prefill = (uint32_t)layout[0];
	base.n_decode = (uint32_t)layout[1];
	base.prefill_tp = (int)layout[2];
	base.decode_tp = (int)layout[3];
	if (gpus_per_node > 0)
		base.gpus_per_node = gpus_per_node;
	snprintf(shipped, sizeof(shipped), "%s/calibration.db", cli_data_dir());
	stores[0] = calibration;
	stores[1] = shipped;
	base.stores = stores;
	base.n_stores = 2;
	base.shared_data = getenv("SERVESIM_SHARED_DATA");

	x.sets = calloc((size_t)(argc - optind), sizeof(*x.sets));
	if (!x.sets) {
		cli_errorf("out of memory");
		goto out;
	}
	/* read every file first: the observations point into arrays sized
	 * once, which never move */
	{
		size_t n = 0;

		for (int a = optind; a < argc; a++) {
			struct serving_set *set = &x.sets[x.n_sets++];

			serving_set_init(set);
			if (serving_read(set, argv[a], fmt, &err)) {
				cli_error(&err);
				goto out;
			}
			for (size_t r = 0; r < set->n; r++)
				n += selected(&set->run[r], sel, n_sel);
		}
		x.obs = calloc(n ? n : 1, sizeof(*x.obs));
		x.wl = calloc(n ? n : 1, sizeof(*x.wl));
		x.names = calloc(n ? n : 1, sizeof(*x.names));
		x.groups = calloc(n ? n : 1, sizeof(*x.groups));
		if (!x.obs || !x.wl || !x.names || !x.groups) {
			cli_errorf("out of memory");
			goto out;
		}
	}
	for (size_t s_i = 0; s_i < x.n_sets; s_i++) {
		const struct serving_set *set = &x.sets[s_i];
		int a = optind + (int)s_i;

		for (size_t r = 0; r < set->n; r++) {
			const struct serving_run *run = &set->run[r];
			int rc;

			if (!selected(run, sel, n_sel))
				continue;
			workload_init(&x.wl[x.n_obs]);
			rc = efit_obs_from_run(run, argv[a], &x.cat, &base, &so, &x.obs[x.n_obs],
					       &x.wl[x.n_obs], x.names[x.n_obs], sizeof(x.names[0]),
					       x.groups[x.n_obs], sizeof(x.groups[0]), &err);
			if (rc == -ENOENT) {
				workload_release(&x.wl[x.n_obs]);
				skip_note(&skipped, run->label[0] ? run->label : "run", err.msg);
				continue;
			}
			if (rc) {
				workload_release(&x.wl[x.n_obs]);
				cli_error(&err);
				goto out;
			}
			x.n_obs++;
		}
	}
	x.n_built = x.n_obs;
	/* repeated measurements of one configuration: one run, medians */
	{
		double *scratch = malloc((x.n_obs ? x.n_obs : 1) * sizeof(*scratch));

		if (!scratch) {
			cli_errorf("out of memory");
			goto out;
		}
		x.n_obs = efit_obs_merge_repeats(x.obs, x.n_obs, scratch);
		free(scratch);
	}
	/* Each configuration once under the starting profile: one whose
	 * replay leaves requests that never complete (-ECANCELED, e.g. a
	 * preempted re-prefill above max_num_batched_tokens with chunked
	 * prefill off: rejected as unschedulable) is skipped with that
	 * reason, as an unknown model is, not the whole command.  With
	 * --no-fit these are the predictions (the profile is the start). */
	x.pred = malloc((x.n_obs ? x.n_obs : 1) * EFIT_MAX_TARGETS * sizeof(*x.pred));
	x.fitted = malloc((x.n_obs ? x.n_obs : 1) * EFIT_MAX_TARGETS * sizeof(*x.fitted));
	if (!x.pred || !x.fitted) {
		cli_errorf("out of memory");
		goto out;
	}
	{
		size_t kept = 0;

		for (size_t i = 0; i < x.n_obs; i++) {
			int rc = efit_predict(&start, &x.obs[i], &x.fitted[kept * EFIT_MAX_TARGETS],
					      &err);

			if (rc == -ECANCELED) {
				/* one reason for all such rows: the counts of
				 * requests differ row by row, the cause not */
				const char *why = strrchr(err.msg, '(');
				char msg[sizeof(err.msg) + 256];

				snprintf(msg, sizeof(msg), "%s: its replay leaves requests that never complete %s",
					 x.obs[i].name, why ? why : "(unfinished)");
				skip_note(&skipped, x.obs[i].name, msg);
				continue;
			}
			if (rc) {
				cli_error(&err);
				goto out;
			}
			x.obs[kept++] = x.obs[i];
		}
		x.n_obs = kept;
	}
	skip_report(&skipped);
	if (!x.n_obs) {
		cli_errorf("calibrate fit-engine: no run to fit (check --select, --model, --gpu)");
		goto out;
	}
	if (fit) {
		printf("fitting %s to %zu configuration%s of %zu run%s (free: ", start.name, x.n_obs,
		       x.n_obs == 1 ? "" : "s", x.n_built, x.n_built == 1 ? "" : "s");
		for (int j = 0; j < n_free; j++)
			printf("%s%s", j ? ", " : "", free_p[j].key);
		printf(")\n");
	} else {
		printf("predicting %zu configuration%s of %zu run%s with %s as it is (no fit)\n",
		       x.n_obs, x.n_obs == 1 ? "" : "s", x.n_built, x.n_built == 1 ? "" : "s",
		       start.name);
	}
	fflush(stdout);
	if (!fit) {
		/* --no-fit: the profile as it is; "fitted" below is its prediction */
		memset(&res, 0, sizeof(res));
		res.profile = start;
	} else if (efit_fit(&start, free_p, n_free, x.obs, x.n_obs, jobs, &res, &err)) {
		cli_error(&err);
		goto out;
	}
	if (fit) {
		printf("\n%-22s %12s %12s %12s\n", "parameter", "value", "95% low", "95% high");
		for (int j = 0; j < n_free; j++)
			printf("%-22s %12.4g %12.4g %12.4g\n", free_p[j].key, res.value[j],
			       res.ci_lo[j], res.ci_hi[j]);
		printf("training: MAPE %.1f%%, RMS log error %.3f, %d iterations, %d evaluations\n",
		       100 * res.mape, res.rms_log, res.iterations, res.evaluations);
	}

	for (size_t i = 0; fit && i < x.n_obs; i++)
		if (efit_predict(&res.profile, &x.obs[i], &x.fitted[i * EFIT_MAX_TARGETS], &err)) {
			cli_error(&err);
			goto out;
		}
	if (holdout && efit_leave_group_out(&start, free_p, n_free, x.obs, x.n_obs, jobs, x.pred, &err)) {
		cli_error(&err);
		goto out;
	}
	{
		double sum[EFIT_METRIC_COUNT] = { 0 }, sum_fit[EFIT_METRIC_COUNT] = { 0 };
		int cnt[EFIT_METRIC_COUNT] = { 0 };
		/* columns as wide as the longest run and group name (a
		 * disaggregated layout names both pools), within bounds */
		int wr = 50, wg = 36;

		for (size_t i = 0; i < x.n_obs; i++) {
			int lr = (int)strlen(x.obs[i].name), lg = (int)strlen(x.obs[i].group);

			wr = lr > wr ? (lr < 100 ? lr : 100) : wr;
			wg = lg > wg ? (lg < 80 ? lg : 80) : wg;
		}

		/* the error column is the held-out prediction's where groups
		 * were held out, else that of the fitted (or given) profile */
		printf("\n%-*s %-10s %10s %10s %10s %8s\n", wr, "run", "metric", "measured",
		       fit ? "fitted" : "predicted", holdout ? "held out" : "", "error");
		for (size_t i = 0; i < x.n_obs; i++)
			for (int k = 0; k < x.obs[i].n_targets; k++) {
				const struct efit_target *t = &x.obs[i].targets[k];
				double f = x.fitted[i * EFIT_MAX_TARGETS + k];
				double p = holdout ? x.pred[i * EFIT_MAX_TARGETS + k] : NAN;
				double e = (holdout ? p : f) / t->value - 1;

				if (holdout)
					printf("%-*.*s %-10s %10.2f %10.2f %10.2f %+7.1f%%\n", wr, wr, x.obs[i].name,
					       efit_metric_name(t->metric), t->value, f, p, 100 * e);
				else
					printf("%-*.*s %-10s %10.2f %10.2f %10s %+7.1f%%\n", wr, wr, x.obs[i].name,
					       efit_metric_name(t->metric), t->value, f, "", 100 * e);
				sum[t->metric] += fabs(e);
				sum_fit[t->metric] += fabs(f / t->value - 1);
				cnt[t->metric]++;
			}
		{
			/* MAPE by group and metric: held out, each group
			 * predicted by a fit that never saw it; with
			 * --no-holdout or --no-fit, of the fitted (or given)
			 * profile */
			const double *by = holdout ? x.pred : x.fitted;

			printf("\n%-*s %-10s %5s %14s\n", wg, holdout ? "held-out group" : "group", "metric",
			       "runs", holdout ? "held-out MAPE" : fit ? "fitted MAPE" : "MAPE");
			for (size_t g = 0; g < x.n_obs; g++) {
				bool first = true;

				for (size_t h = 0; h < g && first; h++)
					first = strcmp(x.obs[h].group, x.obs[g].group) != 0;
				if (!first)
					continue;
				for (int m = 0; m < EFIT_METRIC_COUNT; m++) {
					double sg = 0;
					int ng = 0;

					for (size_t i = g; i < x.n_obs; i++) {
						if (strcmp(x.obs[i].group, x.obs[g].group))
							continue;
						for (int k = 0; k < x.obs[i].n_targets; k++)
							if (x.obs[i].targets[k].metric == (enum efit_metric)m) {
								sg += fabs(by[i * EFIT_MAX_TARGETS + k] /
									   x.obs[i].targets[k].value - 1);
								ng++;
							}
					}
					if (ng)
						printf("%-*.*s %-10s %5d %13.1f%%\n", wg, wg, x.obs[g].group,
						       efit_metric_name((enum efit_metric)m), ng,
						       100 * sg / ng);
				}
			}
		}
		printf("\n%-10s %6s %14s %14s\n", "metric", "runs", fit ? "fitted MAPE" : "MAPE",
		       "held-out MAPE");
		for (int m = 0; m < EFIT_METRIC_COUNT; m++) {
			if (!cnt[m])
				continue;
			printf("%-10s %6d %13.1f%%", efit_metric_name((enum efit_metric)m), cnt[m],
			       100 * sum_fit[m] / cnt[m]);
			if (holdout)
				printf(" %13.1f%%\n", 100 * sum[m] / cnt[m]);
			else
				printf(" %14s\n", "-");   /* nothing was held out */
		}
	}
	if (out) {
		char src[512];

		snprintf(src, sizeof(src), "fitted by servesim calibrate fit-engine to %zu run%s from %s%s (training MAPE %.1f%%)",
			 x.n_obs, x.n_obs == 1 ? "" : "s", argv[optind], argc - optind > 1 ? " and others" : "",
			 100 * res.mape);
		if (write_profile(out, &res.profile, src, &err)) {
			cli_error(&err);
			goto out;
		}
	}
	if (store) {
		char src[512];

		snprintf(src, sizeof(src), "fitted by servesim calibrate fit-engine to %zu run%s from %s%s (training MAPE %.1f%%)",
			 x.n_obs, x.n_obs == 1 ? "" : "s", argv[optind], argc - optind > 1 ? " and others" : "",
			 100 * res.mape);
		if (store_profile(store, &res.profile, src, &err)) {
			cli_error(&err);
			goto out;
		}
	}
	if (json) {
		json_t *root = json_object(), *params = json_object(), *runs = json_array();

		for (int j = 0; j < n_free; j++)
			json_object_set_new(params, free_p[j].key,
					    json_pack("{s:f, s:f, s:f}", "value", res.value[j], "ci_lo",
						      res.ci_lo[j], "ci_hi",
						      isfinite(res.ci_hi[j]) ? res.ci_hi[j] : -1.0));
		for (size_t i = 0; i < x.n_obs; i++)
			for (int k = 0; k < x.obs[i].n_targets; k++) {
				double p = holdout ? x.pred[i * EFIT_MAX_TARGETS + k] : NAN;

				json_array_append_new(runs, json_pack("{s:s, s:s, s:s, s:f, s:f, s:o}",
					"run", x.obs[i].name, "group", x.obs[i].group,
					"metric", efit_metric_name(x.obs[i].targets[k].metric),
					"measured", x.obs[i].targets[k].value,
					"fitted", x.fitted[i * EFIT_MAX_TARGETS + k],
					"held_out", isfinite(p) ? json_real(p) : json_null()));
			}
		json_object_set_new(root, "engine", json_string(res.profile.name));
		json_object_set_new(root, "parameters", params);
		json_object_set_new(root, "training_mape", json_real(res.mape));
		json_object_set_new(root, "runs", runs);
		int fd = json_fd;

		json_fd = -1;   /* write_json_fd closes it */
		if (fd >= 0 ? write_json_fd(fd, root, &err) : write_json(json, root, &err)) {
			cli_error(&err);
			goto out;
		}
	}
	status = SS_EXIT_OK;
out:
	if (json_fd >= 0)
		close(json_fd);
	fe_release(&x);
	return status;
}
