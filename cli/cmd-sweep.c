/* servesim sweep — a grid over run options, each point run over several
 * seeds, reported as means with 95% confidence intervals (docs/sweep.md).
 *
 * Every (point, seed) is a `servesim run`: its command line is the options
 * given (sweep's own taken out), the point's --KEY VALUE for each axis, and
 * --seed; it goes through run's own code (cli_run_collect), so a sweep's
 * figures are those `servesim run` prints for the same options.  Before
 * anything runs, every point is parsed and checked as far as creating its
 * engine, so a typo in the tenth value fails at once, naming the point.
 * With --out, each run is committed to DIR/sweep.db as it finishes, and the
 * same command run again does only what is missing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "config.h"
#include "options.h"
#include "params.h"
#include "plan-run.h"
#include "plan.h"
#include "report.h"
#include "sweep-run.h"
#include "html.h"
#include "sweep-grid.h"

/* sweep's own options are in cli/options.c's table (CLI_SWEEP); every
 * other option is run's, handed through to each run. */
const struct cli_command cli_cmd_sweep = {
	.name = "sweep", .id = CLI_SWEEP, .through = &cli_cmd_run,
	.usage = "sweep --sweep KEY=VALUES [--sweep ...] [--seeds N] [options] [run options]",
	.description =
		"Run a grid of `servesim run` configurations, each over N seeds, and report per\n"
		"point the mean and the 95% confidence interval (Student t) over the seeds of\n"
		"TTFT, TPOT, ITL and E2E p50/p90/p99, throughput, SLO attainment, goodput and\n"
		"energy per output token.  Every option of `servesim run` not swept applies to\n"
		"every run (see `servesim run --help`).  Under `mpirun -n N`, runs are shared\n"
		"over N ranks.  The grid is the cross product of the --sweep axes; a range's STOP\n"
		"is included; V1;V2 separates values that hold commas (policy parameters).  The\n"
		"keys chunk and max-batch set the batch policy's token budget and running-set\n"
		"limit (plan's axes), in the policy of --policy or --sweep policy=...\n",
	.more =
		"example:\n"
		"  servesim sweep --sweep policy=vllm,sarathi --sweep rate-scale=1:4:0.5 --seeds 5 \\\n"
		"      --arrival poisson:rate=4 --lengths empirical:data/traces/azure_conv_2000.csv \\\n"
		"      --num-requests 500 -j 4 --out sweep-out\n\n",
	.exit_more = " (also a\n"
		     "  --out holding a sweep of other options)\n"
		     "  130 / 143: stopped by SIGINT / SIGTERM, the finished runs kept in DIR/sweep.db\n",
};

_Static_assert(CLI_MAX_SWEEPS == SWEEP_MAX_AXES, "--sweep's limit is the grid's");

/* `servesim help --man sweep` (docs/servesim.1.md) */
void cli_sweep_help(FILE *f)
{
	cli_help(f, &cli_cmd_sweep, true);
}

struct sweep {
	int out_lock;                /* --out's writer lock (report_lock_dir), -1: none */
	/* options */
	struct sweep_axis axes[SWEEP_MAX_AXES];
	size_t n_axes;
	int arity[SWEEP_MAX_AXES];   /* 1: the key takes a value; 0: a flag (on/off) */
	char key_opt[SWEEP_MAX_AXES][68];   /* "--KEY" */
	/* run's options as given (pointers into argv): "--name", "--name=value"
	 * or "--name" and its value (val NULL when in tok or a flag) */
	struct cli_arg *base;
	int n_base;
	/* the axes chunk and max-batch (-1: none): the batch policy's token
	 * budget and running-set limit, as plan's --chunk and --max-batch */
	int chunk_axis, batch_axis, policy_axis;
	const char *base_policy;     /* --policy as given, or NULL */
	const char *out;
	bool json, quiet, keep_runs;
	int64_t seed0, n_seeds, jobs;
	/* the grid and its results */
	size_t n_points, n_runs;
	double *values;              /* n_runs x SWM_COUNT */
	bool *done;                  /* n_runs */
	struct sweep_table t;
	char *description;
	char *command_line;          /* as typed, for report.html */
	struct sweep_db *db;
	/* MPI */
	bool mpi;
	int rank, size;
	/* progress and outcome */
	size_t n_done, n_resumed;
	struct timespec t0;
	bool failed;
	char fail_msg[1400];
	int fail_status;
	int stopped;                 /* the signal that stopped a run */
};

/* Under mpirun every rank parses the same command line: rank 0 speaks. */
static int this_rank;

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage(const char *fmt, ...)
{
	va_list ap;

	if (this_rank != 0)
		return SS_EXIT_USAGE;
	va_start(ap, fmt);
	cli_vmessage(fmt, ap);
	va_end(ap);
	return SS_EXIT_USAGE;
}

/* --sweep KEY=...: the key is a run option, not one of sweep's, not swept
 * twice; a flag's values are on and off. */
static int add_axis(struct sweep *s, const char *spec)
{
	struct ss_error err = { 0 };
	struct sweep_axis *ax;
	int arity;

	if (s->n_axes == SWEEP_MAX_AXES)
		return usage("--sweep: at most %d axes", SWEEP_MAX_AXES);
	ax = &s->axes[s->n_axes];
	if (sweep_axis_parse(ax, spec, &err)) {
		sweep_axis_release(ax);   /* what was parsed before the error */
		cli_error(&err);
		return SS_EXIT_USAGE;
	}
	s->n_axes++;
	if (!strcmp(ax->key, "seed"))
		return usage("--sweep seed: the seeds are --seed S --seeds N (every point runs each)");
	for (size_t a = 0; a + 1 < s->n_axes; a++)
		if (!strcmp(s->axes[a].key, ax->key))
			return usage("--sweep %s: given twice; expected each key once", ax->key);
	if (!strcmp(ax->key, "chunk") || !strcmp(ax->key, "max-batch")) {
		/* plan's axes: a parameter of the batch policy (policy_spec) */
		for (size_t i = 0; i < ax->n; i++) {
			int64_t v;

			if (!ss_parse_int64(ax->values[i], &v) || v < 1 || v > 16777216)
				return usage("--sweep %s: expected integers in 1..16777216, got '%s'", ax->key,
					     ax->values[i]);
		}
		*(!strcmp(ax->key, "chunk") ? &s->chunk_axis : &s->batch_axis) = (int)s->n_axes - 1;
		s->arity[s->n_axes - 1] = 1;
		s->key_opt[s->n_axes - 1][0] = '\0';   /* not a run option */
		return 0;
	}
	arity = cli_option_arity(&cli_cmd_run, ax->key);
	if (arity < 0 || !strcmp(ax->key, "out") || !strcmp(ax->key, "json") ||
	    !strcmp(ax->key, "quiet") || !strcmp(ax->key, "help"))
		return usage("--sweep %s: expected a `servesim run` option as KEY (see `servesim run --help`)",
			     ax->key);
	if (!strcmp(ax->key, "policy"))
		s->policy_axis = (int)s->n_axes - 1;
	if (arity == 0)
		for (size_t i = 0; i < ax->n; i++)
			if (strcmp(ax->values[i], "on") && strcmp(ax->values[i], "off"))
				return usage("--sweep %s: a flag; expected on and off, got '%s'", ax->key,
					     ax->values[i]);
	s->arity[s->n_axes - 1] = arity;
	/* "--KEY" (the key is shorter than sweep_axis.key, 64) */
	memcpy(s->key_opt[s->n_axes - 1], "--", 2);
	memcpy(s->key_opt[s->n_axes - 1] + 2, ax->key, strlen(ax->key) + 1);
	return 0;
}

/* sweep's options (the table's CLI_SWEEP entries) into s; the rest are
 * run's, kept in s->base (checked there by name and arity; their values by
 * each point's parse). */
static int parse_args(struct sweep *s, int argc, char **argv)
{
	struct cli_config c;
	struct ss_error err = { 0 };
	int st;

	s->chunk_axis = s->batch_axis = s->policy_axis = -1;
	st = cli_parse(&cli_cmd_sweep, argc, argv, &c, true, &err);
	s->base = c.through;
	s->n_base = c.n_through;
	if (st == CLI_HELP_SHOWN)
		return st;
	if (st) {
		if (this_rank == 0)
			cli_error(&err);
		return SS_EXIT_USAGE;
	}
	s->seed0 = c.seed;
	s->n_seeds = c.seeds;
	s->jobs = c.jobs;
	s->json = c.json;
	s->keep_runs = c.keep_runs;
	s->out = c.out;
	if (s->out && !s->out[0])
		return usage("--out: expected a directory, got ''");
	for (int k = 0; k < c.n_sweeps; k++)
		if ((st = add_axis(s, c.sweeps[k])))
			return st;
	if (s->keep_runs && !s->out)
		return usage("--keep-runs: expected --out DIR (where the runs go)");
	for (int b = 0; b < s->n_base; b++)
		if (!strcmp(s->base[b].tok, "--policy"))
			s->base_policy = s->base[b].val;
		else if (!strncmp(s->base[b].tok, "--policy=", 9))
			s->base_policy = s->base[b].tok + 9;
	/* the engine profile's own policy is not known here: a budget or a
	 * limit needs the policy it belongs to */
	if ((s->chunk_axis >= 0 || s->batch_axis >= 0) && s->policy_axis < 0 && !s->base_policy)
		return usage("--sweep %s: expected --policy or --sweep policy=... (the batch policy whose parameter it sets)",
			     s->chunk_axis >= 0 ? "chunk" : "max-batch");
	/* a swept key given as a run option too */
	for (size_t a = 0; a < s->n_axes; a++)
		for (int b = 0; b < s->n_base; b++) {
			const char *t = s->base[b].tok;
			size_t len = strlen(s->key_opt[a]);

			if (!strncmp(t, s->key_opt[a], len) && (t[len] == '\0' || t[len] == '='))
				return usage("--sweep %s: also given as %s; expected one of them",
					     s->axes[a].key, s->key_opt[a]);
		}
	return 0;
}

/* The sweep as stored in sweep.db: version, run options (sorted by name,
 * so their order does not matter; one name given twice keeps its order, as
 * the last one wins) and the grid (in order: it orders the points). */
static int describe(struct sweep *s)
{
	size_t len = 256, at = 0;
	int *idx = malloc(((size_t)s->n_base + 1) * sizeof(*idx));
	char *d;

	for (int b = 0; b < s->n_base; b++)
		len += strlen(s->base[b].tok) + (s->base[b].val ? strlen(s->base[b].val) : 0) + 2;
	for (size_t a = 0; a < s->n_axes; a++) {
		len += strlen(s->axes[a].key) + 4;
		for (size_t i = 0; i < s->axes[a].n; i++)
			len += strlen(s->axes[a].values[i]) + 1;
	}
	d = malloc(len);
	if (!d || !idx) {
		free(d);
		free(idx);
		return usage("out of memory");
	}
	/* insertion sort by name (stable; a few options) */
	for (int b = 0; b < s->n_base; b++) {
		int j = b;

		for (; j > 0 && strcmp(s->base[idx[j - 1]].tok, s->base[b].tok) > 0; j--)
			idx[j] = idx[j - 1];
		idx[j] = b;
	}
	at += (size_t)snprintf(d + at, len - at, "servesim %s; run options:", SERVESIM_VERSION);
	for (int i = 0; i < s->n_base; i++) {
		const struct cli_arg *o = &s->base[idx[i]];

		at += (size_t)snprintf(d + at, len - at, " %s%s%s", o->tok, o->val ? " " : "",
				       o->val ? o->val : "");
	}
	at += (size_t)snprintf(d + at, len - at, "; grid:");
	for (size_t a = 0; a < s->n_axes; a++) {
		at += (size_t)snprintf(d + at, len - at, " %s=", s->axes[a].key);
		for (size_t i = 0; i < s->axes[a].n; i++)
			at += (size_t)snprintf(d + at, len - at, "%s%s", i ? "|" : "", s->axes[a].values[i]);
	}
	free(idx);
	s->description = d;
	return 0;
}

/* What run_argv() writes into: the strings of a run's command line. */
struct run_bufs {
	char seed[32];
	char dir[4200];              /* --keep-runs */
	char policy[1024];           /* the policy with the point's chunk / max-batch */
	char why[512];               /* why run_argv() returned NULL */
};

/* Point p's policy spec with its chunk and max-batch values in place of the
 * spec's own (plan's parameter names: plan_policy_find()).  false with why
 * set for a policy without such a parameter. */
static bool policy_spec(const struct sweep *s, size_t p, struct run_bufs *rb)
{
	const char *spec = s->policy_axis >= 0 ?
		s->axes[s->policy_axis].values[sweep_point_value(&s->t, p, (size_t)s->policy_axis)] :
		s->base_policy;
	const int ax[2] = { s->chunk_axis, s->batch_axis };
	const char *colon = strchr(spec, ':');
	const char *params = colon ? colon + 1 : "";
	const struct plan_policy *pp;
	char name[64];
	size_t at;

	snprintf(name, sizeof(name), "%.*s", (int)(colon ? colon - spec : (long)strlen(spec)), spec);
	pp = plan_policy_find(name);
	if (!pp) {
		snprintf(rb->why, sizeof(rb->why),
			 "--sweep %s: expected a batch policy with a token budget or running-set limit (%s), got '%s'",
			 ax[0] >= 0 ? "chunk" : "max-batch", plan_policy_names(), name);
		return false;
	}
	at = (size_t)snprintf(rb->policy, sizeof(rb->policy), "%s", pp->spec ? pp->spec : pp->name);
	/* the spec's own parameters, less those the axes set */
	for (const char *q = params; *q;) {
		size_t len = strcspn(q, ",");
		bool drop = false;

		for (int k = 0; k < 2; k++) {
			const char *key = k ? pp->batch_key : pp->chunk_key;

			if (ax[k] >= 0 && key && !strncmp(q, key, strlen(key)) && q[strlen(key)] == '=')
				drop = true;
		}
		if (!drop && len)
			at += (size_t)snprintf(rb->policy + at, at < sizeof(rb->policy) ? sizeof(rb->policy) - at : 0,
					       "%c%.*s", strchr(rb->policy, ':') ? ',' : ':', (int)len, q);
		q += len + (q[len] == ',');
	}
	for (int k = 0; k < 2; k++) {
		const char *key = k ? pp->batch_key : pp->chunk_key;

		if (ax[k] < 0)
			continue;
		if (!key) {
			snprintf(rb->why, sizeof(rb->why), "--sweep %s: policy '%s' has no %s",
				 k ? "max-batch" : "chunk", name, k ? "running-set limit" : "token budget");
			return false;
		}
		at += (size_t)snprintf(rb->policy + at, at < sizeof(rb->policy) ? sizeof(rb->policy) - at : 0,
				       "%c%s=%s", strchr(rb->policy, ':') ? ',' : ':', key,
				       s->axes[ax[k]].values[sweep_point_value(&s->t, p, (size_t)ax[k])]);
	}
	if (at >= sizeof(rb->policy)) {
		snprintf(rb->why, sizeof(rb->why), "--sweep: a policy spec longer than %zu bytes",
			 sizeof(rb->policy) - 1);
		return false;
	}
	return true;
}

/* The command line of run r (transfer full: the array; its strings are
 * argv's, the axes' and rb's); NULL with rb->why set when it cannot be
 * made. */
static char **run_argv(const struct sweep *s, size_t r, struct run_bufs *rb, int *argc)
{
	char **a;
	size_t p = r / (size_t)s->n_seeds;
	int n = 0;

	rb->why[0] = '\0';
	if ((s->chunk_axis >= 0 || s->batch_axis >= 0) && !policy_spec(s, p, rb))
		return NULL;
	a = calloc(2 * (size_t)s->n_base + 2 * s->n_axes + 10, sizeof(*a));
	if (!a) {
		snprintf(rb->why, sizeof(rb->why), "out of memory");
		return NULL;
	}
	a[n++] = "run";
	for (int b = 0; b < s->n_base; b++) {
		a[n++] = (char *)s->base[b].tok;
		if (s->base[b].val)
			a[n++] = (char *)s->base[b].val;
	}
	for (size_t x = 0; x < s->n_axes; x++) {
		const char *v = s->axes[x].values[sweep_point_value(&s->t, p, x)];

		if (!s->key_opt[x][0])
			continue;   /* chunk, max-batch: in the policy */
		if (s->arity[x] == 0) {
			if (!strcmp(v, "on"))
				a[n++] = (char *)s->key_opt[x];
			continue;
		}
		a[n++] = (char *)s->key_opt[x];
		a[n++] = (char *)v;
	}
	if (s->chunk_axis >= 0 || s->batch_axis >= 0) {
		/* after the given one: the last --policy is the one run takes */
		a[n++] = "--policy";
		a[n++] = rb->policy;
	}
	snprintf(rb->seed, sizeof(rb->seed), "%" PRId64, s->seed0 + (int64_t)(r % (size_t)s->n_seeds));
	a[n++] = "--seed";
	a[n++] = rb->seed;
	a[n++] = "--quiet";
	if (s->keep_runs) {
		snprintf(rb->dir, sizeof(rb->dir), "%s/runs/p%zu-s%s", s->out, p, rb->seed);
		a[n++] = "--out";
		a[n++] = rb->dir;
	}
	*argc = n;
	return a;
}

/* "policy=vllm, rate-scale=2" */
static void point_label(const struct sweep *s, size_t p, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t a = 0; a < s->n_axes && at < len; a++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s=%s", a ? ", " : "", s->axes[a].key,
				       s->axes[a].values[sweep_point_value(&s->t, p, a)]);
	if (!s->n_axes)
		snprintf(buf, len, "the run options");
}

static void take_values(void *ctx, const struct summary *sum)
{
	sweep_values_from_summary(sum, ctx);
}

static void do_run(void *ctx, uint32_t idx, struct sweep_msg *m)
{
	const struct sweep *s = ctx;
	struct ss_error err = { 0 };
	struct run_bufs *rb = malloc(sizeof(*rb));
	struct timespec a, b;
	int argc = 0;
	char **argv = rb ? run_argv(s, idx, rb, &argc) : NULL;

	memset(m, 0, sizeof(*m));
	m->run = idx;
	if (!argv) {
		m->status = SS_EXIT_FAILURE;
		snprintf(m->error, sizeof(m->error), "%s", rb ? rb->why : "out of memory");
		free(rb);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	m->status = cli_run_collect(argc, argv, false, take_values, m->v, NULL, 0, &err);
	clock_gettime(CLOCK_MONOTONIC, &b);
	m->wall_s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	if (m->status && err.msg[0])
		ss_error_format(&err, m->error, sizeof(m->error));
	free(argv);
	free(rb);
}

/* One line on stderr per point whose seeds are all done, with the runs
 * done and the ETA (linear, over the runs run now, not those resumed): the
 * sweep's progress, a result per line (rather than cli/progress.h's
 * rewritten line, which would hide the points' figures). */
static void progress_point(const struct sweep *s, size_t p)
{
	struct sweep_stat st[SWM_COUNT];
	struct timespec now;
	char label[512];
	double el, eta;
	size_t now_done;

	if (s->quiet)
		return;
	for (int64_t k = 0; k < s->n_seeds; k++)
		if (!s->done[p * (size_t)s->n_seeds + (size_t)k])
			return;
	sweep_point_stats(&s->t, p, st);
	point_label(s, p, label, sizeof(label));
	clock_gettime(CLOCK_MONOTONIC, &now);
	el = (double)(now.tv_sec - s->t0.tv_sec) + (double)(now.tv_nsec - s->t0.tv_nsec) / 1e9;
	now_done = s->n_done - s->n_resumed;
	eta = now_done ? el * (double)(s->n_runs - s->n_done) / (double)now_done : 0;
	fprintf(stderr, "sweep: point %zu/%zu (%s): ttft_p99 %.4g ms, goodput %.4g req/s [%zu/%zu runs, %.0f s, ETA %.0f s]\n",
		p + 1, s->n_points, label, st[SWM_TTFT_P99].mean, st[SWM_GOODPUT].mean,
		s->n_done, s->n_runs, el, eta);
}

static int on_result(void *ctx, const struct sweep_msg *m, struct ss_error *err)
{
	struct sweep *s = ctx;
	size_t p = m->run / (size_t)s->n_seeds;
	int64_t seed = s->seed0 + (int64_t)(m->run % (size_t)s->n_seeds);

	if (m->run >= s->n_runs)
		return ss_error_set(err, -EPROTO, NULL, 0, "sweep: an answer for run %u of %zu", m->run,
				    s->n_runs);
	if (m->status == SS_EXIT_OK) {
		memcpy(&s->values[(size_t)m->run * SWM_COUNT], m->v, sizeof(m->v));
		if (s->db && sweep_db_store(s->db, &s->t, p, seed, m->v, m->wall_s, err))
			return -EIO;
		if (!s->done[m->run])
			s->n_done++;
		s->done[m->run] = true;
		progress_point(s, p);
		return 0;
	}
	if (m->status == cli_interrupt_status(2) || m->status == cli_interrupt_status(15)) {
		if (!s->stopped)
			s->stopped = m->status - 128;
		return 1;
	}
	if (!s->failed) {
		char label[512];

		point_label(s, p, label, sizeof(label));
		s->failed = true;
		s->fail_status = m->status;
		snprintf(s->fail_msg, sizeof(s->fail_msg), "point %zu (%s), seed %" PRId64 ": %s", p + 1,
			 label, seed, m->error[0] ? m->error : "failed");
	}
	return 1;
}

/* The notes a sweep's check has printed, by a hash of their text: a note
 * shared by several points (their workload and model are the same) is
 * said once.  Beyond SWEEP_NOTES distinct notes, every further one is
 * said. */
#define SWEEP_NOTES 64

/* Whether note was said already; records it when not. */
static bool noted(uint64_t *said, size_t *n, const char *note)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */

	for (const char *c = note; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	for (size_t i = 0; i < *n; i++)
		if (said[i] == h)
			return true;
	if (*n < SWEEP_NOTES)
		said[(*n)++] = h;
	return false;
}

/* Every point's options parsed, then each point set up as far as creating
 * its engine, before anything runs: returns an exit status, the point named
 * in its one line.  The parse of all points comes first, so that a typo in
 * the last value fails before any workload is built. */
static int check_points(struct sweep *s)
{
	struct cli_config *cfg = malloc(sizeof(*cfg));
	struct run_bufs *rb = malloc(sizeof(*rb));
	char note[2048];
	bool seeds_noted = false;
	uint64_t said[SWEEP_NOTES];
	size_t n_said = 0;
	int st = 0;

	if (!cfg || !rb) {
		free(cfg);
		free(rb);
		return usage("out of memory");
	}
	for (int pass = 0; pass < 2 && !st; pass++)
		for (size_t p = 0; p < s->n_points && !st; p++) {
			struct ss_error err = { 0 };
			char label[512], msg[1024];
			int argc;
			char **argv = run_argv(s, p * (size_t)s->n_seeds, rb, &argc);

			if (!argv) {
				point_label(s, p, label, sizeof(label));
				st = usage("%s: %s", label, rb->why);
				break;
			}
			if (pass == 0) {
				st = cli_parse(&cli_cmd_run, argc, argv, cfg, false, &err) ?
					SS_EXIT_USAGE : 0;
				/* every point reads the trace anew: standard input
				 * can be read once (issue 34 §5) */
				if (!st && cfg->trace && !strcmp(cfg->trace, "-")) {
					free(argv);
					st = usage("--trace -: a sweep reads its trace once for every point; standard input can be read once, so give a file");
					break;
				}
				/* seeds over a replayed trace vary no request
				 * (issue 34 §2): said once */
				if (!st && !seeds_noted && s->n_seeds > 1 && !cfg->arrival && !cfg->sessions && !cfg->workload &&
				    !cfg->rate_curve && !s->quiet && s->rank == 0) {
					seeds_noted = true;
					cli_errorf("note: --seeds %d on a replayed trace (no --arrival): every seed replays the same requests at the same times, so the seeds vary only the simulation's own draws (serving-stack latency, noisy predictions, speculative acceptance, adapters), not the workload",
						   (int)s->n_seeds);
				}
			}
			else {
				st = cli_run_collect(argc, argv, true, NULL, NULL, note, sizeof(note), &err);
				/* requests longer than the context, options
				 * without effect: each line once for the points
				 * that share it */
				for (char *ln = note, *nl; !st && *ln && !s->quiet && s->rank == 0; ln = nl) {
					nl = ln + strcspn(ln, "\n");
					if (*nl)
						*nl++ = '\0';
					if (noted(said, &n_said, ln))
						continue;
					point_label(s, p, label, sizeof(label));
					cli_errorf("%s%s%s", s->n_axes ? label : "", s->n_axes ? ": " : "", ln);
				}
			}
			free(argv);
			if (!st)
				continue;
			ss_error_format(&err, msg, sizeof(msg));
			point_label(s, p, label, sizeof(label));
			if (s->rank == 0)
				cli_errorf("%s%s%s", s->n_axes ? label : "", s->n_axes ? ": " : "", msg);
		}
	free(cfg);
	free(rb);
	return st;
}

/* x to sig significant digits, without an exponent below 1e9 ("27010",
 * "0.2915"); the table is read, the CSV keeps 10 digits. */
static void fmt_sig(char *buf, size_t len, double x, int sig)
{
	double a = fabs(x);
	int mag = a > 0 ? (int)floor(log10(a)) : 0;
	int dec = sig - 1 - mag;

	if (a >= 1e9 || (a > 0 && a < 1e-4))
		snprintf(buf, len, "%.*g", sig, x);
	else
		snprintf(buf, len, "%.*f", dec > 0 ? dec : 0, x);
}

static void print_table(FILE *f, const struct sweep *s)
{
	static const enum sweep_metric head[] = { SWM_TTFT_P99, SWM_TPOT_P99, SWM_E2E_P99,
						  SWM_OUT_TOK_S, SWM_SLO, SWM_GOODPUT };
	int w[SWEEP_MAX_AXES];

	for (size_t a = 0; a < s->n_axes; a++) {
		w[a] = (int)strlen(s->axes[a].key);
		for (size_t i = 0; i < s->axes[a].n; i++)
			if ((int)strlen(s->axes[a].values[i]) > w[a])
				w[a] = (int)strlen(s->axes[a].values[i]);
	}
	fprintf(f, "sweep: %zu point%s x %" PRId64 " seed%s (%" PRId64 "..%" PRId64 "), mean ± 95%% CI%s\n\n",
	       s->n_points, s->n_points == 1 ? "" : "s", s->n_seeds, s->n_seeds == 1 ? "" : "s", s->seed0,
	       s->seed0 + s->n_seeds - 1, s->n_seeds == 1 ? " (one seed: no interval)" : "");
	for (size_t a = 0; a < s->n_axes; a++)
		fprintf(f, "%-*s  ", w[a], s->axes[a].key);
	fprintf(f, "%5s", "seeds");
	for (size_t h = 0; h < sizeof(head) / sizeof(head[0]); h++)
		fprintf(f, "  %20s", sweep_metric_name(head[h]));
	fputc('\n', f);
	for (size_t p = 0; p < s->n_points; p++) {
		struct sweep_stat st[SWM_COUNT];
		uint32_t n = sweep_point_stats(&s->t, p, st);

		if (!n)
			continue;
		for (size_t a = 0; a < s->n_axes; a++)
			fprintf(f, "%-*s  ", w[a], s->axes[a].values[sweep_point_value(&s->t, p, a)]);
		fprintf(f, "%5u", n);
		for (size_t h = 0; h < sizeof(head) / sizeof(head[0]); h++) {
			char cell[80], m[32], c[32];
			const struct sweep_stat *x = &st[head[h]];

			fmt_sig(m, sizeof(m), x->mean, 4);
			fmt_sig(c, sizeof(c), x->ci95, 2);
			if (!isfinite(x->mean))
				snprintf(cell, sizeof(cell), "-");
			else if (isfinite(x->ci95))
				snprintf(cell, sizeof(cell), "%s ± %s", m, c);
			else
				snprintf(cell, sizeof(cell), "%s", m);
			/* "±" is two bytes and one column */
			fprintf(f, "  %*s", strstr(cell, "±") ? 21 : 20, cell);
		}
		fputc('\n', f);
	}
}

/* Seeds that changed nothing: the workload has no randomness to vary (a
 * trace replayed as it is). */
static bool seeds_identical(const struct sweep *s)
{
	for (size_t r = 0; r < s->n_runs; r++) {
		size_t r0 = r - r % (size_t)s->n_seeds;

		if (!s->done[r] || !s->done[r0])
			continue;
		for (int m = 0; m < SWM_COUNT; m++) {
			double a = s->values[r * SWM_COUNT + (size_t)m];
			double b = s->values[r0 * SWM_COUNT + (size_t)m];

			if (a != b && !(isnan(a) && isnan(b)))
				return false;
		}
	}
	return true;
}

static void print_table_cb(FILE *f, const void *ctx)
{
	print_table(f, ctx);
}

/* One table of the page: for each point with results, the swept values,
 * the seeds and mean ± CI of the n_m metrics m[].  (transfer full) the
 * cells in *cells (n_cols x *n_rows); 0 or -ENOMEM. */
static int html_cells(const struct sweep *s, const enum sweep_metric *m, size_t n_m, char ***cells,
		      int *n_rows)
{
	size_t n_cols = s->n_axes + 1 + n_m, rows = 0;
	char **c = calloc(n_cols * (s->n_points ? s->n_points : 1), sizeof(*c));

	*cells = c;
	*n_rows = 0;
	if (!c)
		return -ENOMEM;
	for (size_t p = 0; p < s->n_points; p++) {
		struct sweep_stat st[SWM_COUNT];
		uint32_t n = sweep_point_stats(&s->t, p, st);
		char **row = &c[rows * n_cols], buf[96], mean[32], ci[32];

		if (!n)
			continue;
		for (size_t a = 0; a < s->n_axes; a++)
			row[a] = strdup(s->axes[a].values[sweep_point_value(&s->t, p, a)]);
		snprintf(buf, sizeof(buf), "%u", n);
		row[s->n_axes] = strdup(buf);
		for (size_t k = 0; k < n_m; k++) {
			fmt_sig(mean, sizeof(mean), st[m[k]].mean, 4);
			fmt_sig(ci, sizeof(ci), st[m[k]].ci95, 2);
			if (!isfinite(st[m[k]].mean))
				snprintf(buf, sizeof(buf), "-");
			else if (isfinite(st[m[k]].ci95))
				snprintf(buf, sizeof(buf), "%s ± %s", mean, ci);
			else
				snprintf(buf, sizeof(buf), "%s", mean);
			row[s->n_axes + 1 + k] = strdup(buf);
		}
		*n_rows = (int)++rows;
		for (size_t k = 0; k < n_cols; k++)
			if (!row[k])
				return -ENOMEM;
	}
	return 0;
}

/* DIR/report.html (docs/sweep.md): the headline metrics of every point as
 * the printed table has them, then every metric, each mean ± 95% CI; the
 * command line; the sweep as printed. */
static int write_html(const struct sweep *s, struct ss_error *err)
{
	static const enum sweep_metric head_m[] = { SWM_TTFT_P99, SWM_TPOT_P99, SWM_E2E_P99,
						    SWM_OUT_TOK_S, SWM_SLO, SWM_GOODPUT };
	enum sweep_metric all_m[SWM_COUNT];
	const enum sweep_metric *ms[2] = { head_m, all_m };
	size_t n_ms[2] = { sizeof(head_m) / sizeof(head_m[0]), SWM_COUNT };
	const char *caption[2] = { "headline figures: mean ± 95% confidence interval over seeds (Student t)",
				   "every metric, mean ± 95% confidence interval" };
	const char **head[2] = { NULL, NULL };
	char **cells[2] = { NULL, NULL }, *text = html_capture(print_table_cb, s), sub[160];
	struct html_table t[2];
	int rc = text ? 0 : -ENOMEM;

	for (int m = 0; m < SWM_COUNT; m++)
		all_m[m] = (enum sweep_metric)m;
	for (int k = 0; k < 2 && !rc; k++) {
		size_t n_cols = s->n_axes + 1 + n_ms[k];
		int n_rows;

		head[k] = calloc(n_cols, sizeof(*head[k]));
		rc = head[k] ? html_cells(s, ms[k], n_ms[k], &cells[k], &n_rows) : -ENOMEM;
		if (rc)
			break;
		for (size_t a = 0; a < s->n_axes; a++)
			head[k][a] = s->axes[a].key;
		head[k][s->n_axes] = "seeds";
		for (size_t i = 0; i < n_ms[k]; i++)
			head[k][s->n_axes + 1 + i] = sweep_metric_name(ms[k][i]);
		t[k] = (struct html_table){ .caption = caption[k], .n_cols = (int)n_cols,
					    .n_rows = n_rows, .head = head[k],
					    .cells = (const char *const *)cells[k] };
	}
	snprintf(sub, sizeof(sub), "%zu points x %" PRId64 " seeds (%" PRId64 "..%" PRId64 ")",
		 s->n_points, s->n_seeds, s->seed0, s->seed0 + s->n_seeds - 1);
	if (!rc)
		rc = html_page_write(s->out, &(struct html_page){
			.title = "servesim sweep", .subtitle = sub, .command_line = s->command_line,
			.tables = t, .n_tables = 2, .text = text, .text_title = "The sweep as printed",
		}, err);
	else
		ss_error_set(err, rc, NULL, 0, "report.html: out of memory");
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; cells[k] && i < (s->n_axes + 1 + n_ms[k]) * s->n_points; i++)
			free(cells[k][i]);
		free(cells[k]);
		free(head[k]);
	}
	free(text);
	return rc;
}

static int publish(struct sweep *s)
{
	struct ss_error err = { 0 };
	sigset_t mask;
	int rc = 0;

	if (s->db) {
		/* a signal while the files are written acts once they are complete */
		cli_interrupt_defer(&mask);
		rc = sweep_db_aggregate(s->db, &s->t, &err);
		if (!rc)
			rc = sweep_write_dir_csv(s->out, &s->t, true, &err);
		if (!rc)
			rc = write_html(s, &err);
		cli_interrupt_resume(&mask);
		if (rc) {
			cli_error(&err);
			return SS_EXIT_FAILURE;
		}
	}
	if (s->json) {
		json_t *j = sweep_json(&s->t, SERVESIM_VERSION, s->description);

		if (!j || json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10))) {
			json_decref(j);
			cli_errorf("could not write the JSON aggregates");
			return SS_EXIT_FAILURE;
		}
		fputc('\n', stdout);
		json_decref(j);
	} else if (!s->quiet) {
		print_table(stdout, s);
		if (s->out)
			printf("\nsweep written to %s/ (sweep.csv, sweep.db, report.html)\n", s->out);
	}
	if (!s->quiet && s->n_seeds > 1 && seeds_identical(s))
		cli_errorf("note: every seed gave the same figures: nothing in these runs draws from "
			   "the seed (a trace replayed with --engine none); --arrival and --lengths do");
	return SS_EXIT_OK;
}

static int sweep_main(struct sweep *s, int argc, char **argv)
{
	struct ss_error err = { 0 };
	struct sweep_runner sr;
	uint32_t *pending = NULL;
	size_t n_pending = 0;
	int st, rc;

	st = parse_args(s, argc, argv);
	if (st == CLI_HELP_SHOWN)
		return SS_EXIT_OK;
	if (st)
		return st;
	if (s->mpi && s->jobs > 1)
		return usage("-j %" PRId64 " under mpirun: run one rank per core instead (mpirun -n CORES)",
			     s->jobs);
	s->n_points = 1;
	for (size_t a = 0; a < s->n_axes; a++) {
		if (s->n_points > SWEEP_MAX_RUNS / s->axes[a].n)
			return usage("--sweep: more than %d points", SWEEP_MAX_RUNS);
		s->n_points *= s->axes[a].n;
	}
	if (s->n_points > SWEEP_MAX_RUNS / (size_t)s->n_seeds)
		return usage("--seeds %" PRId64 ": %zu points x %" PRId64 " seeds is more than %d runs",
			     s->n_seeds, s->n_points, s->n_seeds, SWEEP_MAX_RUNS);
	s->n_runs = s->n_points * (size_t)s->n_seeds;
	s->values = calloc(s->n_runs * SWM_COUNT, sizeof(*s->values));
	s->done = calloc(s->n_runs, sizeof(*s->done));
	pending = calloc(s->n_runs, sizeof(*pending));
	if (!s->values || !s->done || !pending) {
		free(pending);
		return usage("out of memory");
	}
	s->t = (struct sweep_table){ .axes = s->axes, .n_axes = s->n_axes, .n_points = s->n_points,
				     .seed0 = s->seed0, .n_seeds = (uint32_t)s->n_seeds,
				     .values = s->values, .done = s->done };
	if ((st = describe(s)) || (st = check_points(s)))
		goto out;
	if ((rc = cli_interrupt_install())) {
		cli_errorf("sigaction: %s", strerror(-rc));
		st = SS_EXIT_FAILURE;
		goto out;
	}
	if (s->out && s->rank == 0) {
		char path[4200];

		snprintf(path, sizeof(path), "%s/sweep.db", s->out);
		s->out_lock = report_lock_dir(s->out, &err);
		rc = s->out_lock < 0 ? s->out_lock : sweep_prepare_dir(s->out, &err);
		if (!rc)
			rc = sweep_db_open(&s->db, path, &s->t, s->description, &err);
		if (!rc)
			rc = sweep_db_load(s->db, &s->t, s->values, s->done, &s->n_resumed, &err);
		if (rc) {
			cli_error(&err);
			st = rc == -ESTALE ? SS_EXIT_USAGE : SS_EXIT_FAILURE;
		}
		/* no sweep.csv until this sweep is complete */
		if (!st && sweep_write_dir_csv(s->out, &s->t, false, &err)) {
			cli_error(&err);
			st = SS_EXIT_FAILURE;
		}
	}
	if (s->mpi) {
		/* rank 0's set-up decides; then what is left to run */
		int st0 = st;
		uint64_t np;

		plan_mpi_bcast(&st0, sizeof(st0));
		st = st0;
		if (st)
			goto out;
		plan_mpi_bcast(s->done, s->n_runs * sizeof(*s->done));
		for (size_t r = 0; r < s->n_runs; r++)
			if (!s->done[r])
				pending[n_pending++] = (uint32_t)r;
		np = n_pending;
		plan_mpi_bcast(&np, sizeof(np));
	} else if (st) {
		goto out;
	} else {
		for (size_t r = 0; r < s->n_runs; r++)
			if (!s->done[r])
				pending[n_pending++] = (uint32_t)r;
	}
	s->n_done = s->n_resumed;
	if (!s->quiet && s->rank == 0 && s->n_resumed)
		fprintf(stderr, "sweep: %zu of %zu runs already in %s/sweep.db; running the other %zu\n",
			s->n_resumed, s->n_runs, s->out, n_pending);
	clock_gettime(CLOCK_MONOTONIC, &s->t0);
	sr = (struct sweep_runner){ .pending = pending, .n_pending = n_pending, .jobs = (int)s->jobs,
				    .run = do_run, .on_result = on_result, .ctx = s };
	rc = s->mpi ? sweep_run_mpi(&sr, s->rank, s->size, &err) : sweep_run_local(&sr, &err);
	if (s->rank != 0) {
		st = SS_EXIT_OK;
		goto out;
	}
	if (rc) {
		cli_error(&err);
		st = SS_EXIT_FAILURE;
	} else if (s->failed) {
		cli_errorf("%s%s%s%s", s->fail_msg, s->db ? " (the finished runs are in " : "",
			   s->db ? s->out : "", s->db ? "/sweep.db)" : "");
		st = s->fail_status == SS_EXIT_USAGE ? SS_EXIT_USAGE : SS_EXIT_FAILURE;
	} else if (s->stopped || cli_interrupted) {
		int sig = s->stopped ? s->stopped : cli_interrupted;

		cli_errorf("interrupted by %s after %zu of %zu runs%s%s%s", cli_interrupt_name(sig),
			   s->n_done, s->n_runs, s->db ? "; the finished ones are in " : " (no --out: none kept)",
			   s->db ? s->out : "", s->db ? "/sweep.db (the same command resumes)" : "");
		st = cli_interrupt_status(sig);
	} else {
		st = publish(s);
	}
out:
	ss_dir_unlock(s->out_lock);
	s->out_lock = -1;
	free(pending);
	return st;
}

int cmd_sweep(int argc, char **argv)
{
	struct sweep *s = calloc(1, sizeof(*s));
	struct ss_error err = { 0 };
	bool mpi_init = false;
	int size = 0, st;

	if (!s) {
		cli_errorf("out of memory");
		return SS_EXIT_FAILURE;
	}
	s->size = 1;
	s->out_lock = -1;
	if (plan_mpi_launched(&size) && size != 1) {
		if (!plan_mpi_available()) {
			cli_errorf("sweep: started by an MPI launcher (%d processes) but servesim was built without MPI; "
				   "install libopenmpi-dev and rebuild (meson setup --reconfigure -Dmpi=enabled), or run without mpirun",
				   size);
			free(s);
			return SS_EXIT_FAILURE;
		}
		if (plan_mpi_init(&argc, &argv, &s->rank, &s->size, &err)) {
			cli_error(&err);
			free(s);
			return SS_EXIT_FAILURE;
		}
		mpi_init = true;
		s->mpi = s->size > 1;
		this_rank = s->rank;
	}
	s->command_line = html_command_line("servesim sweep", argc, argv);
	/* -q/--quiet and -v (docs/servesim.1.md, CONVENTIONS) */
	argc = cli_take_quiet_verbose(argc, argv, &s->quiet);
	st = argc < 0 ? SS_EXIT_USAGE : sweep_main(s, argc, argv);
	if (s->mpi) {
		/* every rank leaves with rank 0's status */
		int s0 = st;

		plan_mpi_bcast(&s0, sizeof(s0));
		st = s0;
	}
	if (mpi_init)
		plan_mpi_finalize();
	sweep_db_close(s->db);
	for (size_t a = 0; a < s->n_axes; a++)
		sweep_axis_release(&s->axes[a]);
	free(s->base);
	free(s->values);
	free(s->done);
	free(s->description);
	free(s->command_line);
	free(s);
	return st;
}
