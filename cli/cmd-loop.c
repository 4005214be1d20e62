/* servesim loop — calibrate, run live, simulate, compare, in one command
 * (docs/loop.md).
 *
 * Each step is the command itself, called as a function with the argv a
 * user would type (cal_cli_run, cmd_live, cmd_run, cmd_compare), so loop
 * takes exactly their options and validation; loop's own options are
 * taken out of argv first and every other one goes to `live` (and, less
 * the live-only ones, to the simulation).  The steps' text output goes to
 * files in DIR; their progress lines stay on stderr.  Then the noise
 * check: the live step runs --repeats times, and the simulation's error
 * on each headline figure is set against the repeat-to-repeat difference
 * of that figure.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_cdf.h>

#include <jansson.h>

#include "cli.h"
#include "compare.h"
#include "config.h"
#include "options.h"
#include "params.h"
#include "ss-file.h"
#include "store.h"

/* The simulation's error on a figure is told apart from the live runs'
 * noise only when it is more than NOISE_FACTOR times that noise: the
 * error is one live run against the model, so it carries one run's noise
 * itself, and the spread of a few repeats underestimates the noise
 * (docs/loop.md). */
#define NOISE_FACTOR 2.0
/* Without --num-requests or --duration the live step replays this many
 * requests: a live run takes the trace's wall time, and the shipped
 * trace's 2,000 requests would take most of an hour. */
#define DEFAULT_REQUESTS "40"
/* The loop's default scenario on the CPU (docs/loop.md, "The default
 * scenario"; bench/cpu-loop.sh runs it): the model, without --model and
 * --model-config, its scale, without --width-div and --layers, and the
 * workload, without any workload option.  Llama-3.2-1B at width/4 with 8
 * of its 16 layers: a decode step takes tens of milliseconds on one core
 * (23-28 ms at batch 1-4, a 64-token prefill 63 ms, measured whole by its
 * calibration: 47M weights streamed per step), well above the core's
 * scheduling noise; at width/16 with 2 layers a step took under 1 ms, the
 * size of that noise, and at width/8 with 16 layers 8-12 ms
 * (docs/validation.md, "The live loop above its noise").  One request a
 * second keeps the core about half busy, so that queueing does not
 * multiply the steps' noise. */
#define CPU_MODEL "llama-3.2-1b"
#define CPU_WIDTH_DIV "4"
#define CPU_LAYERS "8"
#define CPU_ARRIVAL "poisson:rate=1"
#define CPU_LENGTHS "lognormal:prompt_mean=64,prompt_cv=0.5,output_mean=32,output_cv=0.5"
#define CPU_REQUESTS "30"
#define CPU_SEED "3"
/* The two-sided level of the live runs' interval of their median. */
#define INTERVAL_LEVEL 0.95

/* loop's own options are in cli/options.c's table (CLI_LOOP); every other
 * option is live's, given to the live runs and the simulation. */
const struct cli_command cli_cmd_loop = {
	.name = "loop", .id = CLI_LOOP, .through = &cli_cmd_live,
	.usage = "loop --out DIR [options] [live options]",
	.description =
		"Calibrate, run live, simulate and compare, in one command: (1) `calibrate run`\n"
		"into DIR/calibration.db with the catalogs of the scaled model in DIR/catalog\n"
		"(or --calibration STORE, measuring nothing), (2) `live` into DIR/live, R times\n"
		"(DIR/live-2 ... DIR/live-R), (3) `run` of the same workload and stack with that\n"
		"calibration (cost model table, engine profile servesim-BACKEND) into DIR/sim,\n"
		"(4) `compare` into DIR/compare, and a verdict: the simulation's error on TTFT\n"
		"and TPOT p50 and p90 against the live runs' repeat-to-repeat noise, with a\n"
		"warning where the noise is too large for the error to mean anything\n"
		"(DIR/loop.json).  Every option of `servesim live` (workload, model, stack,\n"
		"backend) is taken, and given to both the live run and the simulation.\n",
	.more =
		"The default scenario on the CPU: without --model and --model-config, the model is\n"
		CPU_MODEL "; without --width-div and --layers, it is scaled by " CPU_WIDTH_DIV " with " CPU_LAYERS "\n"
		"layers; without a workload option (--trace, --arrival, --lengths, --workload,\n"
		"--sessions, --rate-curve, --concurrency, --num-requests, --duration), the live\n"
		"runs replay --arrival " CPU_ARRIVAL "\n"
		"--lengths " CPU_LENGTHS "\n"
		"--num-requests " CPU_REQUESTS " --seed " CPU_SEED " (bench/cpu-loop.sh runs it).\n"
		"Otherwise, without --num-requests or --duration, the live runs replay " DEFAULT_REQUESTS "\n"
		"requests.\n"
		"See `servesim live --help` for the other options.\n\n",
	.failure = "failed step",
	.exit_more = "\n  130 / 143: stopped by SIGINT / SIGTERM (the steps done are in DIR)\n",
};

/* Options of live the simulation does not take (the backend's), each with
 * a value; and live's options loop sets itself. */
static const char *const live_only[] = { "backend", "threads", "width-div", "layers", "graphs",
					 "model-config" };
static const char *const refused[] = { "model-catalog", "gpu-catalog", "cost-model" };

/* The headline figures: (metric, percentile index of cmp_metric.err_pct). */
static const struct {
	const char *name;
	int metric, pct;
} figures[] = {
	{ "TTFT p50", CMP_TTFT, 0 }, { "TTFT p90", CMP_TTFT, 1 },
	{ "TPOT p50", CMP_TPOT, 0 }, { "TPOT p90", CMP_TPOT, 1 },
};
#define N_FIG (sizeof(figures) / sizeof(figures[0]))
enum { FIG_TTFT_P50 = 0, FIG_TPOT_P50 = 2 };   /* their indices in figures[] */

struct loop {
	const char *out, *calibration;
	int64_t repeats, max_tokens, max_kv, cal_repeats, cal_warmup;
	double threshold_pct;
	bool json, quiet;
	char **fwd;                  /* live's argv: "live" and the options not loop's */
	int n_fwd;
	bool default_requests;       /* no --num-requests / --duration: DEFAULT_REQUESTS */
	struct cli_config o;         /* fwd as live parsed it */
	char store[1100], catalog[1100], scaled[96], gpu[64], engine[32];
	int64_t kv_blocks;           /* the live run's pool, blocks */
	/* the outcome */
	double live_ms[N_FIG], sim_ms[N_FIG], err_pct[N_FIG], noise_pct[N_FIG];
	/* the R live runs of each figure, ms, and their median with its
	 * INTERVAL_LEVEL interval (NAN with one run; see interval()) */
	double *runs_ms[N_FIG];
	double med_ms[N_FIG], lo_ms[N_FIG], hi_ms[N_FIG], err_med_pct[N_FIG];
	/* per live run: involuntary context switches of the process during it
	 * (another process took the core), and the 1-minute load average at
	 * its start (-1: unknown) */
	long *ivcsw;
	double *load1;
	double cal_spread_pct;       /* median relative std of the store's points, NAN if none */
	size_t cal_points;
	char warning[1024];          /* "" = none */
};

static bool cpu_backend(const struct loop *l)
{
	return !l->o.backend || !strcmp(l->o.backend, "cpu");
}

/* "--NAME" or "--NAME=VALUE" of one of names[]: its index, else -1; *val
 * points at VALUE or is NULL. */
static int match(const char *tok, const char *const *names, size_t n, const char **val)
{
	size_t len;

	*val = NULL;
	if (strncmp(tok, "--", 2))
		return -1;
	tok += 2;
	len = strcspn(tok, "=");
	for (size_t i = 0; i < n; i++)
		if (strlen(names[i]) == len && !strncmp(tok, names[i], len)) {
			if (tok[len] == '=')
				*val = tok + len + 1;
			return (int)i;
		}
	return -1;
}

/* loop's options into l, live's into l->fwd (checked by live's parse, with
 * live's messages).  Returns an exit status, or -1 after --help. */
static int parse(struct loop *l, int argc, char **argv)
{
	struct cli_config c;
	struct ss_error err = { 0 };
	const char *v;
	int rc;

	rc = cli_parse(&cli_cmd_loop, argc, argv, &c, true, &err);
	if (rc) {
		free(c.through);
		if (rc == CLI_HELP_SHOWN)
			return -1;
		cli_error(&err);
		return SS_EXIT_USAGE;
	}
	l->out = c.out;
	l->calibration = c.calibration;
	l->repeats = c.live_repeats;
	l->threshold_pct = c.noise_pct;
	l->max_tokens = c.max_tokens;
	l->max_kv = c.max_kv;
	l->cal_repeats = c.repeats;
	l->cal_warmup = c.warmup;
	l->json = c.json;
	/* "live", the options and their values, and the CPU defaults below */
	l->fwd = calloc(2 * (size_t)c.n_through + 16, sizeof(*l->fwd));
	if (!l->fwd) {
		free(c.through);
		cli_errorf("out of memory");
		return SS_EXIT_FAILURE;
	}
	l->fwd[l->n_fwd++] = "live";
	for (int i = 0; i < c.n_through; i++) {
		if (match(c.through[i].tok, refused, sizeof(refused) / sizeof(refused[0]), &v) >= 0) {
			cli_errorf("%s: not a loop option: the simulation uses the calibration's own catalogs and its table cost model (docs/loop.md)",
				   c.through[i].tok);
			free(c.through);
			return SS_EXIT_USAGE;
		}
		l->fwd[l->n_fwd++] = (char *)c.through[i].tok;
		if (c.through[i].val)
			l->fwd[l->n_fwd++] = (char *)c.through[i].val;
	}
	free(c.through);
	if (!l->out) {
		cli_errorf("loop: expected --out DIR (where the steps' results go)");
		return SS_EXIT_USAGE;
	}
	/* live's own checks, with live's messages (exit 2) */
	if (cli_parse(&cli_cmd_live, l->n_fwd, l->fwd, &l->o, false, &err)) {
		cli_error(&err);
		return SS_EXIT_USAGE;
	}
	/* on the CPU, the default scenario where not given: the model, its
	 * scale and the workload, each as a whole */
	if (cpu_backend(l) && l->o.model == cli_default_model && !l->o.model_config) {
		l->fwd[l->n_fwd++] = "--model";
		l->fwd[l->n_fwd++] = CPU_MODEL;
	}
	if (cpu_backend(l) && !l->o.width_div) {
		l->fwd[l->n_fwd++] = "--width-div";
		l->fwd[l->n_fwd++] = CPU_WIDTH_DIV;
	}
	if (cpu_backend(l) && !l->o.layers) {
		l->fwd[l->n_fwd++] = "--layers";
		l->fwd[l->n_fwd++] = CPU_LAYERS;
	}
	if (cpu_backend(l) && !l->o.trace && !l->o.arrival && !l->o.lengths && !l->o.workload &&
	    !l->o.sessions && !l->o.rate_curve && !l->o.concurrency && !l->o.num_requests &&
	    !l->o.duration_ns) {
		static const char *const wl[] = { "--arrival", CPU_ARRIVAL, "--lengths", CPU_LENGTHS,
						  "--num-requests", CPU_REQUESTS };
		static const char *const seed[] = { "seed" };
		bool seeded = false;

		for (size_t i = 0; i < sizeof(wl) / sizeof(wl[0]); i++)
			l->fwd[l->n_fwd++] = (char *)wl[i];
		/* a --seed given stays */
		for (int i = 1; i < l->n_fwd; i++)
			seeded |= match(l->fwd[i], seed, 1, &v) >= 0;
		if (!seeded) {
			l->fwd[l->n_fwd++] = "--seed";
			l->fwd[l->n_fwd++] = CPU_SEED;
		}
	}
	/* live's view of the whole argv, defaults included */
	if (cli_parse(&cli_cmd_live, l->n_fwd, l->fwd, &l->o, false, &err)) {
		cli_error(&err);
		return SS_EXIT_USAGE;
	}
	l->default_requests = !l->o.num_requests && !l->o.duration_ns;
	return SS_EXIT_OK;
}

/* Run fn(argc, argv) with its standard output going to path (NULL:
 * /dev/null), as `cmd >path` would: the steps' text summaries are files,
 * their progress lines and errors stay on stderr. */
static int call(int (*fn)(int, char **), int argc, char **argv, const char *path)
{
	int saved, fd, status;

	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	fd = open(path ? path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0666);
	if (saved < 0 || fd < 0 || dup2(fd, STDOUT_FILENO) < 0) {
		cli_errorf("%s: %s", path ? path : "/dev/null", strerror(errno));
		if (fd >= 0)
			close(fd);
		if (saved >= 0)
			close(saved);
		return SS_EXIT_FAILURE;
	}
	close(fd);
	status = fn(argc, argv);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	return status;
}

/* A growing argv of strings the loop owns (each copied). */
struct args {
	char *v[128];
	int n;
};

/* A copy of s at the end; past the capacity, or out of memory, args_ok()
 * says so afterwards. */
static void add(struct args *a, const char *s)
{
	if (a->n + 1 >= (int)(sizeof(a->v) / sizeof(a->v[0]))) {
		a->n = (int)(sizeof(a->v) / sizeof(a->v[0])) - 1;
		return;
	}
	a->v[a->n++] = strdup(s);
	a->v[a->n] = NULL;
}

static void addi(struct args *a, int64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", (long long)v);
	add(a, buf);
}

static void args_free(struct args *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->v[i]);
	a->n = 0;
}

static bool args_ok(const struct args *a)
{
	for (int i = 0; i < a->n; i++)
		if (!a->v[i])
			return false;
	return a->n + 1 < (int)(sizeof(a->v) / sizeof(a->v[0]));
}

/* Step 1: the calibration store and DIR/catalog (scaled model, device,
 * engine profile servesim-BACKEND). */
static int calibrate(struct loop *l)
{
	struct args a = { 0 };
	char log[1200];
	int status;

	add(&a, "run");
	add(&a, "--store");
	add(&a, l->store);
	add(&a, "--catalog-out");
	add(&a, l->catalog);
	add(&a, "--backend");
	add(&a, cpu_backend(l) ? "cpu" : l->o.backend);
	if (l->o.model != cli_default_model || !l->o.model_config) {
		add(&a, "--model");
		add(&a, l->o.model);
	}
	if (l->o.model_config) {
		add(&a, "--model-config");
		add(&a, l->o.model_config);
	}
	if (!cpu_backend(l)) {
		add(&a, "--device");
		add(&a, l->o.gpu);
	}
	if (l->o.threads) {
		add(&a, "--threads");
		addi(&a, l->o.threads);
	}
	if (l->o.width_div) {
		add(&a, "--width-div");
		addi(&a, l->o.width_div);
	}
	if (l->o.layers) {
		add(&a, "--layers");
		addi(&a, l->o.layers);
	}
	if (l->calibration) {
		add(&a, "--catalog-only");
	} else {
		add(&a, "--max-tokens");
		addi(&a, l->max_tokens);
		add(&a, "--max-kv");
		addi(&a, l->max_kv);
		add(&a, "--repeats");
		addi(&a, l->cal_repeats);
		add(&a, "--warmup");
		addi(&a, l->cal_warmup);
	}
	if (l->quiet)
		add(&a, "--quiet");
	if (!args_ok(&a)) {
		args_free(&a);
		cli_errorf("out of memory");
		return SS_EXIT_FAILURE;
	}
	snprintf(log, sizeof(log), "%s/calibrate.txt", l->out);
	status = call(cal_cli_run, a.n, a.v, l->calibration ? NULL : log);
	args_free(&a);
	return status;
}

/* The first model's name in DIR/catalog/models.json: the scaled model
 * calibrate run wrote. */
static int scaled_name(struct loop *l)
{
	char path[1200];
	json_error_t je;
	json_t *root, *name;

	snprintf(path, sizeof(path), "%s/models.json", l->catalog);
	root = json_load_file(path, 0, &je);
	name = json_object_get(json_array_get(json_object_get(root, "models"), 0), "name");
	if (!json_is_string(name)) {
		cli_errorf("%s: expected the scaled model calibrate run writes (%s)", path,
			   root ? "no models[0].name" : je.text);
		json_decref(root);
		return SS_EXIT_FAILURE;
	}
	snprintf(l->scaled, sizeof(l->scaled), "%s", json_string_value(name));
	json_decref(root);
	return SS_EXIT_OK;
}

/* Run fn (live or run) on a, with the default request count and --quiet
 * where the loop has them; frees a. */
static int run_step(struct loop *l, struct args *a, int (*fn)(int, char **))
{
	int status;

	if (l->default_requests) {
		add(a, "--num-requests");
		add(a, DEFAULT_REQUESTS);
	}
	if (l->quiet)
		add(a, "--quiet");
	if (!args_ok(a)) {
		args_free(a);
		cli_errorf("loop: too many options");
		return SS_EXIT_USAGE;
	}
	status = call(fn, a->n, a->v, NULL);
	args_free(a);
	return status;
}

/* The live argv with --out DIR (and the default request count). */
static int live(struct loop *l, const char *dir)
{
	struct args a = { 0 };

	for (int i = 0; i < l->n_fwd; i++)
		add(&a, l->fwd[i]);
	add(&a, "--out");
	add(&a, dir);
	return run_step(l, &a, cmd_live);
}

/* Step 3: `run` of the live argv less the backend's options, on the
 * calibration: the scaled model, the device, the table cost model, the
 * engine profile of the live loop, and the live run's KV pool. */
static int simulate(struct loop *l)
{
	struct args a = { 0 };
	char path[1200];
	const size_t n_lo = sizeof(live_only) / sizeof(live_only[0]);

	add(&a, "run");
	for (int i = 1; i < l->n_fwd; i++) {
		const char *v;

		if (match(l->fwd[i], live_only, n_lo, &v) >= 0) {
			if (!v)
				i++;   /* its value (live's parse saw one) */
			continue;
		}
		add(&a, l->fwd[i]);
	}
	snprintf(path, sizeof(path), "%s/models.json", l->catalog);
	add(&a, "--model-catalog");
	add(&a, path);
	snprintf(path, sizeof(path), "%s/gpus.json", l->catalog);
	add(&a, "--gpu-catalog");
	add(&a, path);
	snprintf(path, sizeof(path), "%s/engines.json", l->catalog);
	add(&a, "--engine-catalog");
	add(&a, path);
	add(&a, "--model");
	add(&a, l->scaled);
	add(&a, "--gpu");
	add(&a, l->gpu);
	add(&a, "--engine");
	add(&a, l->engine);
	add(&a, "--cost-model");
	add(&a, "table");
	add(&a, "--calibration");
	add(&a, l->store);
	add(&a, "--kv-blocks");
	addi(&a, l->kv_blocks);
	snprintf(path, sizeof(path), "%s/sim", l->out);
	add(&a, "--out");
	add(&a, path);
	return run_step(l, &a, cmd_run);
}

/* Step 4: `compare DIR/live DIR/sim`, the table in DIR/compare/compare.txt. */
static int compare(struct loop *l)
{
	struct args a = { 0 };
	char path[1200];
	int status;

	snprintf(path, sizeof(path), "%s/compare", l->out);
	if (mkdir(path, 0777) < 0 && errno != EEXIST) {
		cli_errorf("%s: cannot create the directory: %s", path, strerror(errno));
		return SS_EXIT_FAILURE;
	}
	add(&a, "compare");
	add(&a, "--label");
	add(&a, "live");
	add(&a, "--label");
	add(&a, "sim");
	add(&a, "--out");
	add(&a, path);
	snprintf(path, sizeof(path), "%s/compare/compare.json", l->out);
	{
		char opt[sizeof(path) + 8];

		snprintf(opt, sizeof(opt), "--json=%s", path);
		add(&a, opt);
	}
	snprintf(path, sizeof(path), "%s/live", l->out);
	add(&a, path);
	snprintf(path, sizeof(path), "%s/sim", l->out);
	add(&a, path);
	if (!args_ok(&a)) {
		args_free(&a);
		cli_errorf("out of memory");
		return SS_EXIT_FAILURE;
	}
	snprintf(path, sizeof(path), "%s/compare/compare.txt", l->out);
	status = call(cmd_compare, a.n, a.v, path);
	args_free(&a);
	return status;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The store's own repeat spread: relative std of each point's timed runs. */
struct spread {
	double *v;
	size_t n, cap;
};

static int add_spread(void *ctx, const struct cal_meas *m)
{
	struct spread *s = ctx;

	if (m->count < 2 || !isfinite(m->std_ms) || !isfinite(m->mean_ms) || !(m->mean_ms > 0))
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		double *p = realloc(s->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->v = p;
		s->cap = cap;
	}
	s->v[s->n++] = 100 * m->std_ms / m->mean_ms;
	return 0;
}

static int calibration_spread(struct loop *l, struct ss_error *err)
{
	struct cal_store *st = NULL;
	struct spread s = { 0 };
	int rc = cal_store_open(&st, l->store, CAL_OPEN_READONLY, err);

	if (!rc)
		rc = cal_store_query(st, cpu_backend(l) ? "cpu" : l->o.gpu, -1, add_spread, &s, err);
	if (rc == -ENOMEM && !err->code)
		ss_error_set(err, rc, NULL, 0, "out of memory");
	l->cal_points = s.n;
	l->cal_spread_pct = NAN;
	if (!rc && s.n) {
		qsort(s.v, s.n, sizeof(*s.v), cmp_double);
		l->cal_spread_pct = s.n % 2 ? s.v[s.n / 2] : (s.v[s.n / 2 - 1] + s.v[s.n / 2]) / 2;
	}
	free(s.v);
	cal_store_close(st);
	return rc;
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of the figure over the R live runs, and an INTERVAL_LEVEL
 * interval of the live runs' central value: Student's t on the logs, a
 * run's figure taken as the central value times a log-normal noise
 * (so the interval is exp(mean ln v +- t(R - 1) s / sqrt R), s the
 * standard deviation of ln v).  The log-normal's median is its central
 * value: the interval is one of the median of the figure over many live
 * runs.  NAN bounds with one run or a run without the figure. */
static void interval(struct loop *l, size_t f)
{
	double *v = l->runs_ms[f], tmp[100], sum = 0, ss = 0, m, sd, half;
	int n = (int)l->repeats;

	l->med_ms[f] = l->lo_ms[f] = l->hi_ms[f] = l->err_med_pct[f] = NAN;
	for (int i = 0; i < n; i++)
		if (!(v[i] > 0) || !isfinite(v[i]))
			return;
	memcpy(tmp, v, (size_t)n * sizeof(*v));
	l->med_ms[f] = median(tmp, n);
	l->err_med_pct[f] = 100 * (l->sim_ms[f] / l->med_ms[f] - 1);
	if (n < 2)
		return;
	for (int i = 0; i < n; i++)
		sum += log(v[i]);
	m = sum / n;
	for (int i = 0; i < n; i++)
		ss += (log(v[i]) - m) * (log(v[i]) - m);
	sd = sqrt(ss / (n - 1));
	half = gsl_cdf_tdist_Pinv(0.5 + INTERVAL_LEVEL / 2, n - 1) * sd / sqrt(n);
	l->lo_ms[f] = exp(m - half);
	l->hi_ms[f] = exp(m + half);
}

/* The simulation inside the live runs' interval of their median. */
static bool in_interval(const struct loop *l, size_t f)
{
	return isfinite(l->lo_ms[f]) && l->sim_ms[f] >= l->lo_ms[f] && l->sim_ms[f] <= l->hi_ms[f];
}

/* The headline errors, the live runs' noise and the warning. */
static int judge(struct loop *l, const struct run_data *runs, const struct run_data *sim,
		 struct ss_error *err)
{
	struct cmp_result c;
	char what[768] = "";
	int n_within = 0, n_noisy = 0;

	if (compare_runs(&runs[0], sim, &c, err))
		return -1;
	for (size_t f = 0; f < N_FIG; f++) {
		const struct cmp_metric *m = &c.m[figures[f].metric];

		l->live_ms[f] = m->ref[figures[f].pct];
		l->sim_ms[f] = m->other[figures[f].pct];
		l->err_pct[f] = m->err_pct[figures[f].pct];
		l->noise_pct[f] = l->repeats > 1 ? 0 : NAN;
		l->runs_ms[f][0] = l->live_ms[f];
	}
	/* noise: the largest difference between two repeats, relative; and
	 * each run's figures (as the first one against the others, and the
	 * first one against the simulation) */
	for (int i = 0; i < l->repeats; i++)
		for (int j = i + 1; j < l->repeats; j++) {
			if (compare_runs(&runs[i], &runs[j], &c, err))
				return -1;
			for (size_t f = 0; i == 0 && f < N_FIG; f++)
				l->runs_ms[f][j] = c.m[figures[f].metric].other[figures[f].pct];
			for (size_t f = 0; f < N_FIG; f++) {
				double d = fabs(c.m[figures[f].metric].err_pct[figures[f].pct]);

				/* a figure a run does not define (NAN): noise unknown */
				if (!isfinite(d))
					l->noise_pct[f] = NAN;
				else if (d > l->noise_pct[f])   /* false for NAN */
					l->noise_pct[f] = d;
			}
		}
	for (size_t f = 0; f < N_FIG; f++)
		interval(l, f);
	if (l->repeats < 2) {
		snprintf(l->warning, sizeof(l->warning),
			 "the comparison cannot distinguish model error from noise: one live run "
			 "(--repeats 1) measures no noise");
		return 0;
	}
	for (size_t f = 0; f < N_FIG; f++) {
		bool noisy = !isfinite(l->noise_pct[f]) || l->noise_pct[f] >= l->threshold_pct;
		bool within = !noisy && !(fabs(l->err_pct[f]) > NOISE_FACTOR * l->noise_pct[f]);

		if (!noisy && !within)
			continue;
		n_noisy += noisy;
		n_within += within;
		snprintf(what + strlen(what), sizeof(what) - strlen(what),
			 "%s%s error %+.1f%%, noise %.1f%%", what[0] ? "; " : "", figures[f].name,
			 l->err_pct[f], l->noise_pct[f]);
	}
	if (n_noisy || n_within)
		snprintf(l->warning, sizeof(l->warning),
			 "the comparison cannot distinguish model error from noise (%s%s%s): %s",
			 n_noisy ? "live runs differ by the threshold or more" : "",
			 n_noisy && n_within ? "; " : "",
			 n_within ? "error within twice the noise" : "", what);
	else if (isfinite(l->cal_spread_pct) && l->cal_spread_pct >= l->threshold_pct)
		snprintf(l->warning, sizeof(l->warning),
			 "the calibration's points spread by %.1f%% (median relative std of %zu "
			 "points), at or above the %.1f%% threshold: the model is fitted to noise",
			 l->cal_spread_pct, l->cal_points, l->threshold_pct);
	return 0;
}

static json_t *jnum(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

/* DIR/loop.json (transfer full) */
static json_t *loop_json(const struct loop *l)
{
	json_t *figs = json_array(), *lives = json_array(), *runs = json_array(), *root;
	char path[1200];

	for (size_t f = 0; figs && f < N_FIG; f++) {
		json_t *runs_ms = json_array();

		for (int i = 0; runs_ms && i < l->repeats; i++)
			json_array_append_new(runs_ms, jnum(l->runs_ms[f][i]));
		json_array_append_new(figs, json_pack("{s:s, s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:o,"
						      " s:o, s:o, s:b}",
			"figure", figures[f].name, "live_ms", jnum(l->live_ms[f]),
			"sim_ms", jnum(l->sim_ms[f]), "err_pct", jnum(l->err_pct[f]),
			"noise_pct", jnum(l->noise_pct[f]),
			"resolved", isfinite(l->noise_pct[f]) &&
				    l->noise_pct[f] < l->threshold_pct &&
				    fabs(l->err_pct[f]) > NOISE_FACTOR * l->noise_pct[f],
			"live_runs_ms", runs_ms, "live_median_ms", jnum(l->med_ms[f]),
			"live_lo_ms", jnum(l->lo_ms[f]), "live_hi_ms", jnum(l->hi_ms[f]),
			"err_median_pct", jnum(l->err_med_pct[f]), "in_interval", in_interval(l, f)));
	}
	for (int i = 0; lives && runs && i < l->repeats; i++) {
		if (i)
			snprintf(path, sizeof(path), "%s/live-%d", l->out, i + 1);
		else
			snprintf(path, sizeof(path), "%s/live", l->out);
		json_array_append_new(lives, json_string(path));
		json_array_append_new(runs, json_pack("{s:s, s:o, s:o}", "dir", path,
			"involuntary_switches", l->ivcsw[i] >= 0 ? json_integer(l->ivcsw[i]) : json_null(),
			"load_1m", l->load1[i] >= 0 ? json_real(l->load1[i]) : json_null()));
	}
	root = json_pack("{s:s, s:{s:s, s:b, s:o, s:I, s:s}, s:o, s:s, s:s, s:s, s:I, s:f, s:f,"
			 " s:o, s:s?}",
			 "version", SERVESIM_VERSION,
			 "calibration", "store", l->store, "measured", !l->calibration,
			 "spread_pct", jnum(l->cal_spread_pct), "points_with_spread",
			 (json_int_t)l->cal_points, "catalog", l->catalog,
			 "live", lives, "sim", "sim", "compare", "compare/compare.json",
			 "model_run", l->scaled, "repeats", (json_int_t)l->repeats,
			 "noise_threshold_pct", l->threshold_pct, "noise_factor", NOISE_FACTOR,
			 "figures", figs, "warning", l->warning[0] ? l->warning : NULL);
	if (root && !l->warning[0])
		json_object_set_new(root, "warning", json_null());
	if (root) {
		json_object_set_new(root, "interval_level", json_real(INTERVAL_LEVEL));
		json_object_set_new(root, "live_runs", runs);
	} else {
		json_decref(runs);
	}
	return root;
}

static int write_json(const struct loop *l, json_t *j, struct ss_error *err)
{
	char path[1200];
	struct ss_file sf;

	snprintf(path, sizeof(path), "%s/loop.json", l->out);
	if (ss_file_open(&sf, path, 0, err))
		return err->code;
	if (json_dumpf(j, sf.f, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) || fputc('\n', sf.f) < 0) {
		ss_file_abort(&sf);
		return ss_error_set(err, -EIO, path, 0, "cannot write the loop's summary");
	}
	return ss_file_commit(&sf, err);
}

static void print_verdict(const struct loop *l)
{
	printf("loop: %s on %s, %d live run%s against the simulation (%s)\n", l->scaled,
	       cpu_backend(l) ? "cpu" : l->o.backend, (int)l->repeats, l->repeats == 1 ? "" : "s",
	       l->out);
	printf("  %-9s %11s %11s %9s %9s %11s %23s %10s\n", "figure", "live ms", "sim ms", "error",
	       "noise", "median ms", "interval ms", "vs median");
	for (size_t f = 0; f < N_FIG; f++) {
		char iv[48] = "-";

		printf("  %-9s %11.3f %11.3f %+8.1f%%", figures[f].name, l->live_ms[f], l->sim_ms[f],
		       l->err_pct[f]);
		if (isfinite(l->noise_pct[f]))
			printf(" %8.1f%%", l->noise_pct[f]);
		else
			printf(" %9s", "-");
		if (isfinite(l->lo_ms[f]))
			snprintf(iv, sizeof(iv), "%.3f..%.3f %s", l->lo_ms[f], l->hi_ms[f],
				 in_interval(l, f) ? "in " : "out");
		printf(" %11.3f %23s %+9.1f%%\n", l->med_ms[f], iv, l->err_med_pct[f]);
	}
	for (int i = 0; i < l->repeats; i++) {
		printf("  live run %d: TTFT p50 %.3f ms, TPOT p50 %.3f ms", i + 1,
		       l->runs_ms[FIG_TTFT_P50][i], l->runs_ms[FIG_TPOT_P50][i]);
		if (l->ivcsw[i] >= 0)
			printf(", %ld involuntary context switches", l->ivcsw[i]);
		if (l->load1[i] >= 0)
			printf(", load average %.2f at its start", l->load1[i]);
		printf("\n");
	}
	if (isfinite(l->cal_spread_pct))
		printf("  calibration: median spread of its points %.1f%% (relative std, %zu points)\n",
		       l->cal_spread_pct, l->cal_points);
	printf("  noise: the largest difference between two live runs; an error counts when it "
	       "is over %.0f x the noise and the noise under %.1f%%\n", NOISE_FACTOR,
	       l->threshold_pct);
	printf("  median, interval: of the %d live runs; the interval is a %.0f%% one of their "
	       "median (Student's t on the logs), \"vs median\" the simulation against it\n",
	       (int)l->repeats, 100 * INTERVAL_LEVEL);
	printf("  details: %s/compare/compare.txt, %s/loop.json\n", l->out, l->out);
}

/* Stop between steps on SIGINT / SIGTERM (a step itself says so when it
 * stopped; this is for a signal that came between two). */
static int interrupted(const struct loop *l, const char *next)
{
	if (!cli_interrupted)
		return 0;
	cli_errorf("interrupted by %s before %s; the steps done are in %s",
		   cli_interrupt_name(cli_interrupted), next, l->out);
	return cli_interrupt_status(cli_interrupted);
}

int cmd_loop(int argc, char **argv)
{
	struct loop *l = calloc(1, sizeof(*l));
	struct run_data *runs = NULL, sim;
	struct ss_error err = { 0 };
	char dir[1200];
	json_t *j = NULL;
	bool runs_ok = true;
	int status, rc;

	if (!l) {
		cli_errorf("out of memory");
		return SS_EXIT_FAILURE;
	}
	run_data_init(&sim);
	/* -q/--quiet and -v (docs/servesim.1.md, CONVENTIONS) */
	argc = cli_take_quiet_verbose(argc, argv, &l->quiet);
	status = argc < 0 ? SS_EXIT_USAGE : parse(l, argc, argv);
	if (status) {
		status = status < 0 ? SS_EXIT_OK : status;
		goto out;
	}
	status = SS_EXIT_FAILURE;
	if (mkdir(l->out, 0777) < 0 && errno != EEXIST) {
		cli_errorf("%s: cannot create the directory: %s", l->out, strerror(errno));
		goto out;
	}
	snprintf(l->store, sizeof(l->store), "%s",
		 l->calibration ? l->calibration : "");
	if (!l->calibration)
		snprintf(l->store, sizeof(l->store), "%s/calibration.db", l->out);
	snprintf(l->catalog, sizeof(l->catalog), "%s/catalog", l->out);
	snprintf(l->gpu, sizeof(l->gpu), "%s", cpu_backend(l) ? "cpu" : l->o.gpu);
	snprintf(l->engine, sizeof(l->engine), "servesim-%s", cpu_backend(l) ? "cpu" : "cuda");
	/* SIGINT / SIGTERM between the steps (each step installs it too) */
	if ((rc = cli_interrupt_install())) {
		cli_errorf("sigaction: %s", strerror(-rc));
		goto out;
	}
	if (!l->quiet && !l->json)
		printf("loop: 1/4 %s\n", l->calibration ? "catalogs from the calibration" :
			"calibrate run");
	if ((status = calibrate(l)) || (status = interrupted(l, "the live runs")) ||
	    (status = scaled_name(l)))
		goto out;
	runs = calloc((size_t)l->repeats, sizeof(*runs));
	if (!runs) {
		cli_errorf("out of memory");
		status = SS_EXIT_FAILURE;
		goto out;
	}
	for (int i = 0; i < l->repeats; i++)
		run_data_init(&runs[i]);
	l->ivcsw = calloc((size_t)l->repeats, sizeof(*l->ivcsw));
	l->load1 = calloc((size_t)l->repeats, sizeof(*l->load1));
	for (size_t f = 0; f < N_FIG; f++)
		if (!(l->runs_ms[f] = calloc((size_t)l->repeats, sizeof(*l->runs_ms[f]))))
			runs_ok = false;
	if (!runs_ok || !l->ivcsw || !l->load1) {
		cli_errorf("out of memory");
		status = SS_EXIT_FAILURE;
		goto out;
	}
	for (int i = 0; i < l->repeats; i++) {
		struct rusage ru0, ru1;
		bool ru = !getrusage(RUSAGE_SELF, &ru0);

		if (i)
			snprintf(dir, sizeof(dir), "%s/live-%d", l->out, i + 1);
		else
			snprintf(dir, sizeof(dir), "%s/live", l->out);
		if (!l->quiet && !l->json)
			printf("loop: 2/4 live run %d of %d\n", i + 1, (int)l->repeats);
		if (getloadavg(&l->load1[i], 1) != 1)
			l->load1[i] = -1;
		if ((status = live(l, dir)) || (status = interrupted(l, "the next step")))
			goto out;
		l->ivcsw[i] = ru && !getrusage(RUSAGE_SELF, &ru1) ? ru1.ru_nivcsw - ru0.ru_nivcsw : -1;
		status = SS_EXIT_FAILURE;
		if (run_data_load(&runs[i], dir, &err))
			goto fail;
	}
	/* the simulation's KV pool is the live run's (on the CPU, capped) */
	l->kv_blocks = json_integer_value(json_object_get(runs[0].summary, "kv_blocks_per_instance"));
	if (l->kv_blocks <= 0) {
		ss_error_set(&err, -EINVAL, l->out, 0, "live/summary.json: no kv_blocks_per_instance");
		goto fail;
	}
	if (!l->quiet && !l->json)
		printf("loop: 3/4 simulation\n");
	if ((status = simulate(l)) || (status = interrupted(l, "the comparison")))
		goto out;
	if (!l->quiet && !l->json)
		printf("loop: 4/4 compare\n");
	if ((status = compare(l)) || (status = interrupted(l, "the verdict")))
		goto out;
	status = SS_EXIT_FAILURE;
	snprintf(dir, sizeof(dir), "%s/sim", l->out);
	if (run_data_load(&sim, dir, &err) || calibration_spread(l, &err) ||
	    judge(l, runs, &sim, &err))
		goto fail;
	if (!(j = loop_json(l))) {
		cli_errorf("out of memory");
		goto out;
	}
	if (write_json(l, j, &err))
		goto fail;
	if (l->json) {
		json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
		fputc('\n', stdout);
	} else if (!l->quiet) {
		print_verdict(l);
	}
	if (l->warning[0])
		cli_errorf("warning: %s", l->warning);
	status = SS_EXIT_OK;
	goto out;
fail:
	cli_error(&err);
out:
	json_decref(j);
	run_data_release(&sim);
	for (int i = 0; runs && i < l->repeats; i++)
		run_data_release(&runs[i]);
	free(runs);
	for (size_t f = 0; f < N_FIG; f++)
		free(l->runs_ms[f]);
	free(l->ivcsw);
	free(l->load1);
	free(l->fwd);
	free(l);
	return status;
}
