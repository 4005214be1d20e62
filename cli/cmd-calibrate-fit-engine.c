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
 *
 * Its options are run's model, engine, KV and layout options and its own,
 * declared in cli/options.c's one table (CLI_FIT_ENGINE).  The command is
 * a list of phases (cal_cli_fit_engine), each a function of struct fe.
 */
#include <errno.h>
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

const struct cli_command cli_cmd_fit_engine = {
	.name = "calibrate fit-engine", .id = CLI_FIT_ENGINE,
	.operands = "RESULT...",
	.failure = "failed fit",
	.description =
		"Fit an engine profile's parameters to measured serving runs: every run is\n"
		"re-simulated (its lengths, arrivals, batch or concurrency, model, GPU, TP) and\n"
		"the --free parameters move to bring its TTFT and TPOT to the measured ones\n"
		"(docs/engines.md).  Prints each parameter with its 95% interval, the training\n"
		"error, and each run's figure predicted by a fit made without its group.\n",
};

#define FREE_DEFAULT "sched_us:1:1e5,frontend_ms:0.01:1e4"

/* The profile's or the serving stack's field of the fittable parameter
 * key, or NULL. */
static const struct catalog_field *fit_field(const char *key)
{
	for (size_t i = 0; i < engine_profile_n_fields; i++)
		if (engine_profile_fields[i].fit && !strcmp(engine_profile_fields[i].key, key))
			return &engine_profile_fields[i];
	for (size_t i = 0; i < stack_profile_n_fields; i++)
		if (stack_profile_fields[i].fit && !strcmp(stack_profile_fields[i].key, key))
			return &stack_profile_fields[i];
	return NULL;
}

/* One "KEY[:LO:HI]" of --free into p: bounds within the key's catalog
 * range (engine_profile_fields: what the profile written is read back
 * with), by default 1e-3 .. 1e6 within it.  0, or -1 (said). */
static int parse_free_one(char *t, struct efit_param *p)
{
	const struct catalog_field *f;
	char *lo = strchr(t, ':'), *hi = NULL, names[512];

	if (lo)
		*lo++ = '\0';
	f = fit_field(t);
	if (!f) {
		size_t at = engine_profile_fit_names(names, sizeof(names));

		for (size_t i = 0; i < stack_profile_n_fields && at < sizeof(names); i++)
			if (stack_profile_fields[i].fit)
				at += (size_t)snprintf(names + at, sizeof(names) - at, ", %s",
						       stack_profile_fields[i].key);
		cli_errorf("--free: '%s' is not a numeric engine parameter or serving-stack term (expected one of %s)",
			   t, names);
		return -1;
	}
	*p = (struct efit_param){ .key = t, .lo = fmax(1e-3, f->lo), .hi = fmin(1e6, f->hi) };
	if (!lo)
		return 0;
	hi = strchr(lo, ':');
	if (!hi) {
		cli_errorf("--free %s: expected KEY or KEY:LO:HI", t);
		return -1;
	}
	*hi++ = '\0';
	if (!ss_parse_double(lo, &p->lo) || !ss_parse_double(hi, &p->hi) || !(p->lo > 0) ||
	    !(p->hi >= p->lo) || !isfinite(p->hi)) {
		cli_errorf("--free %s: expected bounds 0 < LO <= HI, got '%s:%s'", t, lo, hi);
		return -1;
	}
	if (p->lo < f->lo || p->hi > f->hi) {
		cli_errorf("--free %s: expected bounds within %g..%g%s%s (the catalog's range), got '%s:%s'",
			   t, f->lo, f->hi, f->unit[0] ? " " : "", f->unit, lo, hi);
		return -1;
	}
	return 0;
}

/* "KEY[:LO:HI],..." into p[] (cutting spec). */
static int parse_free(char *spec, struct efit_param *p, int *n)
{
	char *save = NULL;

	*n = 0;
	for (char *t = strtok_r(spec, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (*n == EFIT_MAX_PARAMS) {
			cli_errorf("--free: at most %d parameters", EFIT_MAX_PARAMS);
			return -1;
		}
		if (parse_free_one(t, &p[*n]))
			return -1;
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
		cli_errorf("skipped %s", msg);
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
			cli_errorf("skipped %s: %s", sk->r[i].first, sk->r[i].why);
		else
			cli_errorf("skipped %zu runs (%s and %zu more): %s",
				   sk->r[i].n, sk->r[i].first, sk->r[i].n - 1, sk->r[i].why);
	}
}

static bool selected(const struct serving_run *r, const char *const *sel, int n_sel)
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

/* p as an engines.json entry, every key that differs from absent (the
 * KV rule, multi-step scheduling, KV loads: the starting profile's, never
 * fitted, kept) with src as its source.  (transfer full) */
static json_t *profile_json(const struct engine_profile *p, const char *src)
{
	struct engine_profile q = *p;

	snprintf(q.source, sizeof(q.source), "%s", src);
	return catalog_entry_json(engine_profile_fields, engine_profile_n_fields, &q, 0);
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

/* One deployment's runs (a --sources entry; without --sources, the
 * command line's RESULTs): the options they were run with, their serving
 * stack and the configuration every run of it starts from. */
struct fe_src {
	char name[64];                   /* --sources: the entry's; "" without */
	struct cli_config cfg;           /* the command line's options, then the entry's */
	const char **files;              /* its result files */
	int n_files;
	struct efit_source_opts so;
	struct stack_profile stack;      /* its runs' serving stack (cli_resolve_stack) */
	struct engine_config base;       /* what every run's configuration starts from */
	bool stack_known;                /* --sources, stack none: engine-side clocks, not fitted */
	char **argv;                     /* what cfg was parsed from (--sources; freed) */
	char **paths;                    /* files against the manifest's folder (--sources; freed) */
	bool own_model;                  /* the entry's options name a model */
};

/* Everything one invocation holds, released in one place. */
struct fe {
	struct cli_config cfg;           /* the command line's */
	char **argv;                     /* the command line, its options first (cli_parse) */
	bool joint;                      /* --sources */
	json_t *manifest;                /* --sources' file, read */
	struct fe_src *src;
	int n_src;
	char free_spec[1024];            /* --free, cut by parse_free */
	struct efit_param free_p[EFIT_MAX_PARAMS];
	int n_free;
	bool fit, holdout;
	int json_fd;                     /* --json: the real stdout, kept aside; -1: none */
	struct engine_profile start;     /* the profile fitted from */
	struct efit_result res;
	struct catalog cat;
	struct serving_set *sets;
	int *set_src;                    /* each set's source */
	const char **set_file;           /* and file */
	size_t n_sets;
	struct efit_obs *obs;
	struct workload *wl;
	char (*names)[512];              /* the name, then the policy specs it needs */
	char (*groups)[512];
	size_t n_obs, n_built;           /* runs fitted; workloads built (released) */
	double *pred, *fitted;           /* n_obs x EFIT_MAX_TARGETS: held out, fitted */
	struct skips skipped;
	struct ss_error err;
};

/* A phase's result: go on, or stop with this exit status. */
#define FE_NEXT (-1)

static void fe_release(struct fe *x)
{
	if (x->json_fd >= 0)
		close(x->json_fd);
	for (size_t i = 0; i < x->n_sets; i++)
		serving_set_release(&x->sets[i]);
	for (size_t i = 0; i < x->n_built; i++)
		workload_release(&x->wl[i]);
	for (int s = 0; s < x->n_src; s++) {
		for (int f = 0; x->src[s].paths && f < x->src[s].n_files; f++)
			free(x->src[s].paths[f]);
		free(x->src[s].paths);
		free(x->src[s].argv);
		if (x->joint)   /* else the command line's operands */
			free((void *)x->src[s].files);
	}
	free(x->src);
	json_decref(x->manifest);
	free(x->sets);
	free(x->set_src);
	free(x->set_file);
	free(x->obs);
	free(x->wl);
	free(x->names);
	free(x->groups);
	free(x->pred);
	free(x->fitted);
	catalog_release(&x->cat);
}

/* An error already in x->err: said, and the command fails. */
static int fe_fail(struct fe *x)
{
	cli_error(&x->err);
	return SS_EXIT_FAILURE;
}

static int fe_oom(void)
{
	cli_errorf("out of memory");
	return SS_EXIT_FAILURE;
}

/* The source whose stack st is (a fitted value's), by name. */
static const char *stack_source_name(const struct fe *x, const struct stack_profile *st)
{
	for (int s = 0; s < x->n_src; s++)
		if (st == &x->src[s].stack)
			return x->src[s].name[0] ? x->src[s].name : x->src[s].stack.name;
	return st ? st->name : "fitted";
}

/* ---- parse: the command line -------------------------------------------- */

/* --json (bare): the JSON alone on stdout, so the table goes to /dev/null
 * and the JSON to the stdout kept aside. */
static int set_stdout_aside(struct fe *x)
{
	if (!x->cfg.json_to || strcmp(x->cfg.json_to, "-"))
		return FE_NEXT;
	fflush(stdout);
	x->json_fd = dup(STDOUT_FILENO);
	if (x->json_fd < 0 || !freopen("/dev/null", "w", stdout)) {
		cli_errorf("--json: cannot set standard output aside: %s", strerror(errno));
		return SS_EXIT_FAILURE;
	}
	return FE_NEXT;
}

/* Source s's reading options (efit_source_opts) from its cfg; the leave-out
 * unit is the command line's.  -1 (said, prefixed with where) on a bad
 * combination. */
static int source_opts(struct fe *x, struct fe_src *s, const char *where)
{
	const struct cli_config *c = &s->cfg;

	if ((c->pools[0].inst > 0) != (c->pools[1].inst > 0) ||
	    ((c->pools[0].tp || c->pools[1].tp) && !c->pools[0].inst)) {
		cli_errorf("%scalibrate fit-engine: --prefill-instances and --decode-instances go together (--prefill-tp and --decode-tp need them)",
			   where);
		return -1;
	}
	s->so = (struct efit_source_opts){
		.model = c->model, .gpu = c->gpu, .tp = (int)c->tp, .policy = c->policy,
		.group_by = (enum efit_group_by)x->cfg.group_by,
		.closed_burst = c->closed_start == 1, .closed_drained = c->closed_start == 2,
		.closed_seqs_set = c->closed_seqs_set, .closed_seqs_short = (int)c->closed_seqs_short,
		.closed_tokens_set = c->closed_tokens_set,
		.closed_tokens_extra = (int)c->closed_tokens_extra,
		/* --no-fit shows every figure a source gives; a fit only
		 * those it fits unless --reported */
		.reported = !x->fit || x->cfg.reported,
	};
	return 0;
}

static int fe_parse(struct fe *x, int argc, char **argv)
{
	struct cli_config *c = &x->cfg;
	int rc = cli_parse(&cli_cmd_fit_engine, argc, argv, c, true, &x->err);

	if (rc == CLI_HELP_SHOWN)
		return SS_EXIT_OK;
	if (rc) {
		cli_error(&x->err);
		return SS_EXIT_USAGE;
	}
	x->argv = argv;
	x->joint = c->fit_sources != NULL;
	if (x->joint && c->operand0 < argc) {
		cli_errorf("calibrate fit-engine: --sources lists the result files: expected no RESULT operand, got '%s'",
			   argv[c->operand0]);
		return SS_EXIT_USAGE;
	}
	if (!x->joint && c->operand0 >= argc) {
		cli_errorf("calibrate fit-engine: expected at least one RESULT file (or --sources FILE)");
		return SS_EXIT_USAGE;
	}
	if ((size_t)snprintf(x->free_spec, sizeof(x->free_spec), "%s",
			     c->fit_free ? c->fit_free : FREE_DEFAULT) >= sizeof(x->free_spec)) {
		cli_errorf("--free: longer than %zu characters", sizeof(x->free_spec) - 1);
		return SS_EXIT_USAGE;
	}
	if (parse_free(x->free_spec, x->free_p, &x->n_free))
		return SS_EXIT_USAGE;
	x->fit = !c->no_fit;
	x->holdout = x->fit && !c->no_holdout;
	if (c->group_by < 0)
		c->group_by = x->joint ? EFIT_GROUP_SOURCE : EFIT_GROUP_FILE;
	if (c->group_by == EFIT_GROUP_SOURCE && !x->joint) {
		cli_errorf("--group-by source: needs --sources (a RESULT list is one source)");
		return SS_EXIT_USAGE;
	}
	if (!x->joint) {
		x->src = calloc(1, sizeof(*x->src));
		if (!x->src)
			return fe_oom();
		x->n_src = 1;
		x->src[0].cfg = *c;
		x->src[0].files = (const char **)(argv + c->operand0);
		x->src[0].n_files = argc - c->operand0;
		if (source_opts(x, &x->src[0], ""))
			return SS_EXIT_USAGE;
	}
	return set_stdout_aside(x);
}

/* ---- sources: --sources FILE's deployments ------------------------------ */

/* What a source may set, for checking its options: the options of its
 * runs' deployment and reading (options.c's CLI_FIT_SOURCE). */
static const struct cli_command fit_source_cmd = {
	.name = "calibrate fit-engine", .id = CLI_FIT_SOURCE,
};

/* A bad manifest: FILE: what, exit 1. */
static int manifest_fail(const struct fe *x, const char *fmt, const char *a, const char *b)
{
	char msg[768];

	snprintf(msg, sizeof(msg), fmt, a, b);
	cli_errorf("%s: %s", x->cfg.fit_sources, msg);
	return SS_EXIT_FAILURE;
}

/* Entry i of the manifest into source s: its name, files (against dir)
 * and options, parsed after the command line's. */
static int read_source(struct fe *x, json_t *e, size_t i, const char *dir, struct fe_src *s)
{
	json_t *name = json_object_get(e, "name"), *files = json_object_get(e, "files");
	json_t *opts = json_object_get(e, "options"), *v;
	struct cli_config check;
	char where[160], idx[32];
	size_t k, n_opts = opts ? json_array_size(opts) : 0;
	int n = 0;
	const char *key;

	snprintf(idx, sizeof(idx), "sources[%zu]", i);
	if (!json_is_object(e))
		return manifest_fail(x, "%s: expected an object {\"name\", \"files\", \"options\"}", idx, "");
	json_object_foreach(e, key, v)
		if (strcmp(key, "name") && strcmp(key, "files") && strcmp(key, "options") &&
		    key[0] != '_')
			return manifest_fail(x, "%s: unknown key '%s' (expected name, files, options or a _comment)",
					     idx, key);
	if (!json_is_string(name) || !json_string_length(name) || json_string_length(name) >= sizeof(s->name) ||
	    strspn(json_string_value(name), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
		    json_string_length(name))
		return manifest_fail(x, "%s: expected \"name\": 1 to 63 letters, digits, '.', '_' or '-'%s", idx, "");
	snprintf(s->name, sizeof(s->name), "%s", json_string_value(name));
	for (struct fe_src *o = x->src; o < s; o++)
		if (!strcmp(o->name, s->name))
			return manifest_fail(x, "%s: name '%s' is another source's (expected each once)", idx, s->name);
	if (!json_is_array(files) || !json_array_size(files))
		return manifest_fail(x, "source '%s': expected \"files\": a non-empty array of result file paths%s", s->name, "");
	if (opts && !json_is_array(opts))
		return manifest_fail(x, "source '%s': expected \"options\": an array of fit-engine options and values%s", s->name, "");
	s->n_files = (int)json_array_size(files);
	s->paths = calloc((size_t)s->n_files, sizeof(*s->paths));
	s->files = calloc((size_t)s->n_files, sizeof(*s->files));
	/* the command line's options (its operands none), then the entry's */
	s->argv = calloc((size_t)x->cfg.operand0 + n_opts + 2, sizeof(*s->argv));
	if (!s->paths || !s->files || !s->argv)
		return fe_oom();
	json_array_foreach(files, k, v) {
		const char *f = json_string_value(v);

		if (!f || !*f)
			return manifest_fail(x, "source '%s': expected \"files\" to hold paths (strings)%s", s->name, "");
		s->paths[k] = malloc(strlen(dir) + strlen(f) + 2);
		if (!s->paths[k])
			return fe_oom();
		if (f[0] == '/' || !*dir)
			strcpy(s->paths[k], f);
		else
			sprintf(s->paths[k], "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", f);
		s->files[k] = s->paths[k];
	}
	/* the entry's options alone first: only what one deployment may set */
	snprintf(where, sizeof(where), "%s: source '%s': ", x->cfg.fit_sources, s->name);
	s->argv[0] = x->argv[0];
	json_array_foreach(opts, k, v) {
		if (!json_is_string(v))
			return manifest_fail(x, "source '%s': expected \"options\" to hold strings (\"--tp\", \"4\", ...)%s", s->name, "");
		s->argv[1 + k] = (char *)json_string_value(v);
	}
	if (cli_parse(&fit_source_cmd, (int)n_opts + 1, s->argv, &check, false, &x->err)) {
		cli_errorf("%s%s%s", where, x->err.msg,
			   strstr(x->err.msg, "unknown option") ?
			   " (a source sets only its runs' deployment and reading: model, GPU, layout, policy, KV, stack, format, select, closed-loop rules)" : "");
		return SS_EXIT_FAILURE;
	}
	s->own_model = check.model != NULL;
	/* then the command line's options (no operands), the entry's after
	 * them, as fit-engine's own command line */
	s->argv[n++] = x->argv[0];
	for (int a = 1; a < x->cfg.operand0; a++) {
		/* --sources is the command line's alone */
		if (!strcmp(x->argv[a], "--sources")) {
			a++;
			continue;
		}
		if (strncmp(x->argv[a], "--sources=", 10))
			s->argv[n++] = x->argv[a];
	}
	json_array_foreach(opts, k, v)
		s->argv[n++] = (char *)json_string_value(v);
	if (cli_parse(&cli_cmd_fit_engine, n, s->argv, &s->cfg, false, &x->err)) {
		cli_errorf("%s%s", where, x->err.msg);
		return SS_EXIT_FAILURE;
	}
	if (s->cfg.fit_sources) {
		cli_errorf("--sources: give the option's full name (an abbreviation cannot be told from a source's options)");
		return SS_EXIT_USAGE;
	}
	return source_opts(x, s, where) ? SS_EXIT_FAILURE : FE_NEXT;
}

static int read_manifest(struct fe *x)
{
	const char *path = x->cfg.fit_sources, *slash = strrchr(path, '/');
	json_t *arr, *e;
	json_error_t je;
	char dir[4096] = "";
	size_t i;
	int rc = FE_NEXT;

	x->manifest = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!x->manifest) {
		cli_errorf("%s:%d: %s (expected a JSON object {\"sources\": [...]})", path, je.line, je.text);
		return SS_EXIT_FAILURE;
	}
	arr = json_object_get(x->manifest, "sources");
	if (!json_is_object(x->manifest) || !json_is_array(arr) || !json_array_size(arr))
		return manifest_fail(x, "expected an object with \"sources\": a non-empty array%s%s", "", "");
	if (json_array_size(arr) > EFIT_MAX_STACKS) {
		char n[32];

		snprintf(n, sizeof(n), "%d", EFIT_MAX_STACKS);
		return manifest_fail(x, "expected at most %s sources%s", n, "");
	}
	if (slash)
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	x->src = calloc(json_array_size(arr), sizeof(*x->src));
	if (!x->src)
		return fe_oom();
	json_array_foreach(arr, i, e) {
		if (rc != FE_NEXT)
			break;
		x->n_src++;
		rc = read_source(x, e, i, dir, &x->src[i]);
	}
	return rc;
}

/* ---- load: catalogs, the starting profile, each source's configuration -- */

/* The profile to start from (--engine, renamed by --name). */
static int load_start(struct fe *x)
{
	const char *engine = x->cfg.engine;

	if (!strcmp(engine, "none")) {
		memset(&x->start, 0, sizeof(x->start));
		snprintf(x->start.name, sizeof(x->start.name), "fitted");
	} else if (catalog_engine(&x->cat, engine)) {
		x->start = *catalog_engine(&x->cat, engine);
	} else {
		cli_errorf("--engine: unknown engine '%s' (see `servesim list engines`)", engine);
		return SS_EXIT_USAGE;
	}
	if (x->cfg.fit_name)
		snprintf(x->start.name, sizeof(x->start.name), "%s", x->cfg.fit_name);
	return FE_NEXT;
}

/* What needs the profile's policy or the catalog: a usage error (2) on the
 * command line, a bad input (1) in a source. */
static int check_against_catalog(struct fe *x, struct fe_src *s)
{
	const char *pol = s->so.policy;
	bool vllm = pol && !strncmp(pol, "vllm", 4) && (!pol[4] || pol[4] == ':');
	int bad = x->joint ? SS_EXIT_FAILURE : SS_EXIT_USAGE;
	char where[160] = "";

	if (x->joint)
		snprintf(where, sizeof(where), "%s: source '%s': ", x->cfg.fit_sources, s->name);
	if (s->so.closed_seqs_set && pol && (!vllm || strstr(pol, "max_num_seqs"))) {
		cli_errorf("%s--closed-max-seqs: needs a vllm batch policy that does not set max_num_seqs (policy '%s')",
			   where, pol);
		return bad;
	}
	if (s->so.closed_tokens_set && pol && !vllm) {
		cli_errorf("%s--closed-max-tokens: needs a vllm batch policy (policy '%s')", where, pol);
		return bad;
	}
	if (s->so.model && !catalog_model(&x->cat, s->so.model)) {
		cli_errorf("%s--model: unknown model '%s'", where, s->so.model);
		return bad;
	}
	if (s->so.gpu && !catalog_gpu(&x->cat, s->so.gpu)) {
		cli_errorf("%s--gpu: unknown GPU '%s'", where, s->so.gpu);
		return bad;
	}
	return FE_NEXT;
}

/* Every run's configuration before its result fills it in: the engine's
 * defaults and run's options that fit-engine takes; the starting profile
 * (so that a run's checks before it is simulated, a static batch that
 * must fit the KV cache, size the KV by its rule; each evaluation sets the
 * profile it evaluates, engine-fit.c); the disaggregated layout of every
 * run (DistServe's own runs: the layout is in its launch scripts, not in
 * the result). */
static void configure_base(struct fe *x, struct fe_src *s)
{
	struct cli_config *c = &s->cfg;
	struct engine_config *b = &s->base;

	engine_config_defaults(b);
	b->cost_model = c->cost_model;
	b->gpu_mem_util = c->gpu_mem_util;
	b->kv_free_fraction = c->kv_free_fraction;
	b->block_size = (int)c->block_size;
	b->engine = &x->start;
	/* a legacy profile's api_* are its stack: the engine makes it from
	 * the profile evaluated (engine-setup.c), so fitting them works */
	b->stack = s->stack.legacy ? NULL : &s->stack;
	b->weight_dtype = (enum ss_dtype)c->weight_dtype;
	b->kv_dtype = (enum ss_dtype)c->kv_dtype;
	cli_engine_pools(c, b);
	if (c->gpus_per_node > 0)
		b->gpus_per_node = (int)c->gpus_per_node;
	/* --calibration first (NULL is skipped), then the shipped store */
	snprintf(c->shipped_store, sizeof(c->shipped_store), "%s/calibration.db", cli_data_dir());
	c->stores[0] = c->calibration;
	c->stores[1] = c->shipped_store;
	b->stores = c->stores;
	b->n_stores = 2;
	b->shared_data = getenv("SERVESIM_SHARED_DATA");
}

/* Source s's stack, its checks against --free, its configuration. */
static int load_source(struct fe *x, struct fe_src *s)
{
	struct cli_config *c = &s->cfg;
	const char *spec;
	int rc;

	s->so.model = c->model;   /* --model-config names the model it added */
	if (!s->so.policy && x->start.policy[0])
		s->so.policy = x->start.policy;   /* the engine's own batching rules */
	rc = cli_resolve_stack(c, &x->cat, strcmp(x->cfg.engine, "none") ? &x->start : NULL,
			       &s->stack, &spec, &x->err);
	if (rc) {
		if (x->joint)
			cli_errorf("%s: source '%s': %s", x->cfg.fit_sources, s->name, x->err.msg);
		else
			cli_error(&x->err);
		return x->joint ? SS_EXIT_FAILURE : rc;
	}
	if (x->joint && s->stack.legacy) {
		cli_errorf("%s: source '%s': its stack is profile %s's legacy api_in_ms/api_out_ms/api_cv: give the source a --stack",
			   x->cfg.fit_sources, s->name, x->start.name);
		return SS_EXIT_FAILURE;
	}
	/* a source behind no stack (engine-side clocks) keeps it */
	s->stack_known = x->joint && !strcmp(s->stack.name, "none") && stack_profile_empty(&s->stack);
	/* --free against the stack the runs have (usage errors; the fit
	 * checks the same, for its library callers) */
	for (int j = 0; x->fit && j < x->n_free; j++) {
		const char *k = x->free_p[j].key;

		/* the default's front end is a legacy profile's api_in_ms */
		if (!x->cfg.fit_free && s->stack.legacy && !strcmp(k, "frontend_ms"))
			k = x->free_p[j].key = "api_in_ms";

		if (!strncmp(k, "api_", 4) && !s->stack.legacy) {
			cli_errorf("--free %s: a legacy serving-stack key, and the runs have stack %s: free its terms (frontend_ms, ...) instead",
				   k, s->stack.name);
			return SS_EXIT_USAGE;
		}
		if (s->stack.legacy && stack_profile_param(&s->stack, k)) {
			cli_errorf("--free %s: a serving-stack term, and profile %s's stack is its legacy api_in_ms/api_out_ms/api_cv: free those, or give --stack",
				   k, x->start.name);
			return SS_EXIT_USAGE;
		}
	}
	rc = check_against_catalog(x, s);
	if (rc == FE_NEXT)
		configure_base(x, s);
	return rc;
}

static int fe_load(struct fe *x)
{
	struct cli_config *c = &x->cfg;
	int rc;

	gsl_set_error_handler_off();
	catalog_init(&x->cat);
	if (cli_load_catalog(&x->cat, c->model_catalog, c->gpu_catalog, c->engine_catalog, &x->err) ||
	    (c->engine_store && cli_load_engine_store(c->engine_store, &x->cat, &x->err)) ||
	    cli_load_model_config(c, &x->cat, &x->err))
		return fe_fail(x);
	rc = load_start(x);
	if (rc == FE_NEXT && x->joint)
		rc = read_manifest(x);
	for (int s = 0; rc == FE_NEXT && s < x->n_src; s++) {
		/* --model-config names the model it added: the command line's
		 * model, where a source names none of its own */
		if (!x->src[s].own_model)
			x->src[s].cfg.model = c->model;
		rc = load_source(x, &x->src[s]);
	}
	return rc;
}

/* ---- read: every RESULT, and room for the runs --select keeps ---------- */

static int fe_read(struct fe *x)
{
	size_t n = 0, n_files = 0;

	for (int s = 0; s < x->n_src; s++)
		n_files += (size_t)x->src[s].n_files;
	x->sets = calloc(n_files, sizeof(*x->sets));
	x->set_src = calloc(n_files, sizeof(*x->set_src));
	x->set_file = calloc(n_files, sizeof(*x->set_file));
	if (!x->sets || !x->set_src || !x->set_file)
		return fe_oom();
	/* every file first: the observations point into arrays sized once,
	 * which never move */
	for (int s = 0; s < x->n_src; s++) {
		const struct cli_config *c = &x->src[s].cfg;

		for (int a = 0; a < x->src[s].n_files; a++) {
			struct serving_set *set = &x->sets[x->n_sets];

			x->set_src[x->n_sets] = s;
			x->set_file[x->n_sets++] = x->src[s].files[a];
			serving_set_init(set);
			if (serving_read(set, x->src[s].files[a], (enum serving_format)c->result_format,
					 &x->err))
				return fe_fail(x);
			for (size_t r = 0; r < set->n; r++)
				n += selected(&set->run[r], c->select, c->n_select);
		}
	}
	n = n ? n : 1;
	x->obs = calloc(n, sizeof(*x->obs));
	x->wl = calloc(n, sizeof(*x->wl));
	x->names = calloc(n, sizeof(*x->names));
	x->groups = calloc(n, sizeof(*x->groups));
	x->pred = malloc(n * EFIT_MAX_TARGETS * sizeof(*x->pred));
	x->fitted = malloc(n * EFIT_MAX_TARGETS * sizeof(*x->fitted));
	if (!x->obs || !x->wl || !x->names || !x->groups || !x->pred || !x->fitted)
		return fe_oom();
	return FE_NEXT;
}

/* ---- observations: a run to replay per selected result row -------------- */

/* Run r of set k as the next observation; a run servesim cannot replay
 * here (-ENOENT) is skipped with its reason. */
static int observe_run(struct fe *x, size_t k, const struct serving_run *run)
{
	const struct fe_src *s = &x->src[x->set_src[k]];
	size_t i = x->n_obs;
	int rc;

	workload_init(&x->wl[i]);
	rc = efit_obs_from_run(run, x->set_file[k], &x->cat, &s->base, &s->so, &x->obs[i],
			       &x->wl[i], x->names[i], sizeof(x->names[0]), x->groups[i],
			       sizeof(x->groups[0]), &x->err);
	if (!rc) {
		x->obs[i].stack_known = s->stack_known;
		if (s->so.group_by == EFIT_GROUP_SOURCE)
			snprintf(x->groups[i], sizeof(x->groups[0]), "%s", s->name);
	}
	if (rc) {
		workload_release(&x->wl[i]);
		if (rc != -ENOENT)
			return fe_fail(x);
		skip_note(&x->skipped, run->label[0] ? run->label : "run", x->err.msg);
		return FE_NEXT;
	}
	x->n_obs++;
	x->n_built = x->n_obs;
	return FE_NEXT;
}

/* Each configuration once under the starting profile: one whose replay
 * leaves requests that never complete (-ECANCELED, e.g. a preempted
 * re-prefill above max_num_batched_tokens with chunked prefill off:
 * rejected as unschedulable) is skipped with that reason, as an unknown
 * model is, not the whole command.  With --no-fit these are the
 * predictions (the profile is the start). */
static int keep_replayable(struct fe *x)
{
	size_t kept = 0;

	for (size_t i = 0; i < x->n_obs; i++) {
		int rc = efit_predict(&x->start, &x->obs[i], &x->fitted[kept * EFIT_MAX_TARGETS],
				      &x->err);
		const char *why;
		char msg[sizeof(x->err.msg) + 256];

		if (rc && rc != -ECANCELED)
			return fe_fail(x);
		if (!rc) {
			x->obs[kept++] = x->obs[i];
			continue;
		}
		/* one reason for all such rows: the counts of requests differ
		 * row by row, the cause not */
		why = strrchr(x->err.msg, '(');
		snprintf(msg, sizeof(msg), "%s: its replay leaves requests that never complete %s",
			 x->obs[i].name, why ? why : "(unfinished)");
		skip_note(&x->skipped, x->obs[i].name, msg);
	}
	x->n_obs = kept;
	return FE_NEXT;
}

static int fe_observe(struct fe *x)
{
	double *scratch;
	int rc = FE_NEXT;

	for (size_t k = 0; k < x->n_sets && rc == FE_NEXT; k++) {
		const struct cli_config *c = &x->src[x->set_src[k]].cfg;

		for (size_t r = 0; r < x->sets[k].n && rc == FE_NEXT; r++)
			if (selected(&x->sets[k].run[r], c->select, c->n_select))
				rc = observe_run(x, k, &x->sets[k].run[r]);
	}
	if (rc != FE_NEXT)
		return rc;
	/* repeated measurements of one configuration: one run, medians */
	scratch = malloc((x->n_obs ? x->n_obs : 1) * sizeof(*scratch));
	if (!scratch)
		return fe_oom();
	x->n_obs = efit_obs_merge_repeats(x->obs, x->n_obs, scratch);
	free(scratch);
	rc = keep_replayable(x);
	if (rc != FE_NEXT)
		return rc;
	skip_report(&x->skipped);
	if (!x->n_obs) {
		cli_errorf("calibrate fit-engine: no run to fit (check --select, --model, --gpu)");
		return SS_EXIT_FAILURE;
	}
	return FE_NEXT;
}

/* ---- fit ---------------------------------------------------------------- */

static void print_fit_header(const struct fe *x)
{
	size_t n = x->n_obs, b = x->n_built;

	if (!x->fit) {
		printf("predicting %zu configuration%s of %zu run%s with %s as it is (no fit)\n",
		       n, n == 1 ? "" : "s", b, b == 1 ? "" : "s", x->start.name);
		return;
	}
	printf("fitting %s to %zu configuration%s of %zu run%s (free: ", x->start.name, n,
	       n == 1 ? "" : "s", b, b == 1 ? "" : "s");
	for (int j = 0; j < x->n_free; j++)
		printf("%s%s", j ? ", " : "", x->free_p[j].key);
	printf(")\n");
}

/* Fitted value j's name: its key, and with several stacks the stack's
 * source ("frontend_ms[gpustack-sglang]"). */
static const char *value_name(const struct fe *x, int j, char *buf, size_t len)
{
	const struct efit_result *r = &x->res;
	int s = r->stack_index[j];

	if (s < 0 || r->n_stacks < 2) {
		snprintf(buf, len, "%s", r->key[j]);
		return buf;
	}
	snprintf(buf, len, "%s[%s]", r->key[j], stack_source_name(x, r->stack_of[s]));
	return buf;
}

/* What the runs cannot tell apart or do not see, as warnings: the
 * values are still printed, but the split is the starting point's or
 * arbitrary (docs/engines.md "Which data identifies which term"). */
static void warn_identifiability(const struct fe *x)
{
	const struct efit_result *r = &x->res;
	char a[160], b[160];

	for (int j = 0; j < r->n_params; j++) {
		int k = r->confounded[j];

		if (r->flat[j])
			cli_errorf("warning: %s is not identifiable from these runs: no fitted figure moves with it enough to tell it (its 95%% interval spans more than a factor of 90 each way); fix it, or add runs it moves",
				   value_name(x, j, a, sizeof(a)));
		else if (k > j)
			cli_errorf("warning: %s and %s are not separable by these runs (correlation %+.3f): their split is arbitrary; fix one, or add runs that move one without the other",
				   value_name(x, j, a, sizeof(a)), value_name(x, k, b, sizeof(b)),
				   r->correlation[j]);
	}
}

static void print_parameters(const struct fe *x)
{
	const struct efit_result *r = &x->res;
	char name[160];

	printf("\n%-22s %12s %12s %12s\n", "parameter", "value", "95% low", "95% high");
	for (int j = 0; j < r->n_params; j++)
		printf("%-22s %12.4g %12.4g %12.4g\n", value_name(x, j, name, sizeof(name)),
		       r->value[j], r->ci_lo[j], r->ci_hi[j]);
	printf("training: MAPE %.1f%%, RMS log error %.3f, %d iterations, %d evaluations\n",
	       100 * r->mape, r->rms_log, r->iterations, r->evaluations);
}

static int fe_fit(struct fe *x)
{
	int jobs = (int)x->cfg.fit_jobs;

	print_fit_header(x);
	fflush(stdout);
	if (!x->fit) {
		/* --no-fit: the profile as it is; "fitted" is its prediction */
		memset(&x->res, 0, sizeof(x->res));
		x->res.profile = x->start;
		return FE_NEXT;
	}
	if (efit_fit(&x->start, x->free_p, x->n_free, x->obs, x->n_obs, jobs, &x->res, &x->err))
		return fe_fail(x);
	print_parameters(x);
	warn_identifiability(x);
	/* each run under the fitted profile and its fitted stack */
	for (size_t i = 0; i < x->n_obs; i++)
		if (efit_predict_fitted(&x->res, &x->obs[i], &x->fitted[i * EFIT_MAX_TARGETS],
					&x->err))
			return fe_fail(x);
	if (x->holdout && efit_leave_group_out(&x->start, x->free_p, x->n_free, x->obs, x->n_obs,
						jobs, x->pred, &x->err))
		return fe_fail(x);
	return FE_NEXT;
}

/* ---- report: runs, groups, metrics -------------------------------------- */

/* The figure run i's target k is judged by: the held-out prediction's
 * where groups were held out, else that of the fitted (or given)
 * profile. */
static double judged(const struct fe *x, size_t i, int k)
{
	return (x->holdout ? x->pred : x->fitted)[i * EFIT_MAX_TARGETS + k];
}

/* Each run's targets: measured, fitted, held out and the error; sums the
 * errors by metric into err_sum, fit_sum and cnt. */
static void print_runs(const struct fe *x, double *err_sum, double *fit_sum, int *cnt)
{
	/* as wide as the longest run name, within bounds */
	int w = 50;

	for (size_t i = 0; i < x->n_obs; i++) {
		int l = (int)strlen(x->obs[i].name);

		w = l > w ? (l < 100 ? l : 100) : w;
	}
	printf("\n%-*s %-10s %10s %10s %10s %8s\n", w, "run", "metric", "measured",
	       x->fit ? "fitted" : "predicted", x->holdout ? "held out" : "", "error");
	for (size_t i = 0; i < x->n_obs; i++) {
		for (int k = 0; k < x->obs[i].n_targets; k++) {
			const struct efit_target *t = &x->obs[i].targets[k];
			double f = x->fitted[i * EFIT_MAX_TARGETS + k], e = judged(x, i, k) / t->value - 1;
			char held[32] = "";

			if (x->holdout)
				snprintf(held, sizeof(held), "%10.2f", judged(x, i, k));
			/* a figure outside the objective says so at the line's end,
			 * so the fitted lines read as they always did */
			printf("%-*.*s %-10s %10.2f %10.2f %10s %+7.1f%%%s\n", w, w, x->obs[i].name,
			       efit_metric_name(t->metric), t->value, f, held, 100 * e,
			       t->report ? "  (reported, not fitted)" : "");
			err_sum[t->metric] += fabs(e);
			fit_sum[t->metric] += fabs(f / t->value - 1);
			cnt[t->metric]++;
		}
	}
}

/* Group g's (the first run of its group) MAPE of metric m; *n its targets. */
static double group_mape(const struct fe *x, size_t g, int m, int *n)
{
	double sum = 0;

	*n = 0;
	for (size_t i = g; i < x->n_obs; i++) {
		if (strcmp(x->obs[i].group, x->obs[g].group))
			continue;
		for (int k = 0; k < x->obs[i].n_targets; k++) {
			if (x->obs[i].targets[k].metric != (enum efit_metric)m)
				continue;
			sum += fabs(judged(x, i, k) / x->obs[i].targets[k].value - 1);
			(*n)++;
		}
	}
	return *n ? sum / *n : 0;
}

/* MAPE by group and metric: held out, each group predicted by a fit
 * that never saw it; with --no-holdout or --no-fit, of the fitted (or
 * given) profile. */
static void print_groups(const struct fe *x)
{
	int w = 36;

	for (size_t i = 0; i < x->n_obs; i++) {
		int l = (int)strlen(x->obs[i].group);

		w = l > w ? (l < 80 ? l : 80) : w;
	}
	printf("\n%-*s %-10s %5s %14s\n", w, x->holdout ? "held-out group" : "group", "metric",
	       "runs", x->holdout ? "held-out MAPE" : x->fit ? "fitted MAPE" : "MAPE");
	for (size_t g = 0; g < x->n_obs; g++) {
		bool first = true;

		for (size_t h = 0; h < g && first; h++)
			first = strcmp(x->obs[h].group, x->obs[g].group) != 0;
		for (int m = 0; first && m < EFIT_METRIC_COUNT; m++) {
			int n;
			double mape = group_mape(x, g, m, &n);

			if (n)
				printf("%-*.*s %-10s %5d %13.1f%%\n", w, w, x->obs[g].group,
				       efit_metric_name((enum efit_metric)m), n, 100 * mape);
		}
	}
}

/* Is every target of metric m reported only (efit_target.report)? */
static bool reported_only(const struct fe *x, int m)
{
	for (size_t i = 0; i < x->n_obs; i++)
		for (int k = 0; k < x->obs[i].n_targets; k++)
			if (x->obs[i].targets[k].metric == (enum efit_metric)m &&
			    !x->obs[i].targets[k].report)
				return false;
	return true;
}

static int fe_report(struct fe *x)
{
	double err_sum[EFIT_METRIC_COUNT] = { 0 }, fit_sum[EFIT_METRIC_COUNT] = { 0 };
	int cnt[EFIT_METRIC_COUNT] = { 0 };

	print_runs(x, err_sum, fit_sum, cnt);
	print_groups(x);
	printf("\n%-10s %6s %14s %14s\n", "metric", "runs", x->fit ? "fitted MAPE" : "MAPE",
	       "held-out MAPE");
	for (int m = 0; m < EFIT_METRIC_COUNT; m++) {
		if (!cnt[m])
			continue;
		printf("%-10s %6d %13.1f%%", efit_metric_name((enum efit_metric)m), cnt[m],
		       100 * fit_sum[m] / cnt[m]);
		if (x->holdout)
			printf(" %13.1f%%", 100 * err_sum[m] / cnt[m]);
		else
			printf(" %14s", "-");   /* nothing was held out */
		printf("%s\n", reported_only(x, m) ? "  (reported, not fitted)" : "");
	}
	return FE_NEXT;
}

/* ---- write: --out, --store, --json -------------------------------------- */

/* The engines JSON file of the fitted profile; with fitted stack terms,
 * the file also holds the stacks under "stacks", so that one file is both
 * an --engine-catalog and a --stack-catalog: one deployment's as the
 * profile's stack ("NAME-stack", named by its "stack" key), each source's
 * of --sources as "NAME-SOURCE" (the profile keeps its starting stack: no
 * one deployment's is the engine's). */
static int write_profile(const struct fe *x, const char *path, const char *src,
			 struct ss_error *err)
{
	const struct efit_result *r = &x->res;
	json_t *root = json_object(), *arr = json_array();
	struct engine_profile q = r->profile;

	if (r->has_stack) {
		json_t *sa = json_array();

		for (int k = 0; k < (x->joint ? r->n_stacks : 1); k++) {
			struct stack_profile s = x->joint ? r->stacks[k] : r->stack;

			if (x->joint) {
				snprintf(s.name, sizeof(s.name), "%.28s-%.34s", q.name,
					 stack_source_name(x, r->stack_of[k]));
			} else {
				snprintf(s.name, sizeof(s.name), "%.57s-stack", q.name);
				snprintf(q.stack, sizeof(q.stack), "%s", s.name);
			}
			snprintf(s.source, sizeof(s.source), "%s", src);
			json_array_append_new(sa, catalog_entry_json(stack_profile_fields,
								     stack_profile_n_fields, &s, 0));
		}
		json_object_set_new(root, "stacks", sa);
	}
	json_array_append_new(arr, profile_json(&q, src));
	json_object_set_new(root, "engines", arr);
	return write_json(path, root, err);
}

/* The report: parameters, runs, errors.  (transfer full) */
static json_t *report_json(const struct fe *x)
{
	json_t *root = json_object(), *params = json_object(), *runs = json_array();

	for (int j = 0; j < x->res.n_params; j++) {
		char name[160], other[160];
		json_t *v = json_pack("{s:f, s:f, s:f}", "value", x->res.value[j], "ci_lo",
				      x->res.ci_lo[j], "ci_hi",
				      isfinite(x->res.ci_hi[j]) ? x->res.ci_hi[j] : -1.0);

		/* what the runs do not pin down (warn_identifiability) */
		if (x->res.flat[j])
			json_object_set_new(v, "identifiable", json_false());
		if (x->res.confounded[j] >= 0)
			json_object_set_new(v, "confounded_with",
					    json_string(value_name(x, x->res.confounded[j], other,
								   sizeof(other))));
		json_object_set_new(params, value_name(x, j, name, sizeof(name)), v);
	}
	for (size_t i = 0; i < x->n_obs; i++) {
		for (int k = 0; k < x->obs[i].n_targets; k++) {
			double p = x->holdout ? x->pred[i * EFIT_MAX_TARGETS + k] : NAN;
			json_t *e = json_pack("{s:s, s:s, s:s, s:f, s:f, s:o, s:b}",
				"run", x->obs[i].name, "group", x->obs[i].group,
				"metric", efit_metric_name(x->obs[i].targets[k].metric),
				"measured", x->obs[i].targets[k].value,
				"fitted", x->fitted[i * EFIT_MAX_TARGETS + k],
				"held_out", isfinite(p) ? json_real(p) : json_null(),
				"fit", !x->obs[i].targets[k].report);

			/* "fitted" is the prediction of the fitted (--no-fit: the
			 * given) profile; "fit" false: reported, not in the
			 * objective */
			if (x->obs[i].note)
				json_object_set_new(e, "note", json_string(x->obs[i].note));
			json_array_append_new(runs, e);
		}
	}
	json_object_set_new(root, "engine", json_string(x->res.profile.name));
	json_object_set_new(root, "parameters", params);
	json_object_set_new(root, "training_mape", json_real(x->res.mape));
	json_object_set_new(root, "runs", runs);
	return root;
}

static int fe_write(struct fe *x)
{
	const struct cli_config *c = &x->cfg;
	char src[512];
	int fd = x->json_fd;

	if (x->joint)
		snprintf(src, sizeof(src), "fitted by servesim calibrate fit-engine to %zu run%s of %d sources from %s (training MAPE %.1f%%)",
			 x->n_obs, x->n_obs == 1 ? "" : "s", x->n_src, c->fit_sources,
			 100 * x->res.mape);
	else
		snprintf(src, sizeof(src), "fitted by servesim calibrate fit-engine to %zu run%s from %s%s (training MAPE %.1f%%)",
			 x->n_obs, x->n_obs == 1 ? "" : "s", x->src[0].files[0],
			 x->src[0].n_files > 1 ? " and others" : "", 100 * x->res.mape);
	if (c->out_file && write_profile(x, c->out_file, src, &x->err))
		return fe_fail(x);
	if (c->store && x->res.has_stack)
		cli_errorf("warning: --store keeps the engine profile only: the fitted serving-stack terms are in the output above%s",
			c->out_file ? " and in --out's file" : " (--out writes them as a stack)");
	if (c->store && store_profile(c->store, &x->res.profile, src, &x->err))
		return fe_fail(x);
	if (!c->json_to)
		return FE_NEXT;
	x->json_fd = -1;   /* write_json_fd closes it */
	if (fd >= 0 ? write_json_fd(fd, report_json(x), &x->err) :
		      write_json(c->json_to, report_json(x), &x->err))
		return fe_fail(x);
	return FE_NEXT;
}

int cal_cli_fit_engine(int argc, char **argv)
{
	static int (*const phases[])(struct fe *) = {
		fe_load, fe_read, fe_observe, fe_fit, fe_report, fe_write,
	};
	struct fe *x = calloc(1, sizeof(*x));
	int status;

	if (!x)
		return fe_oom();
	x->json_fd = -1;
	status = fe_parse(x, argc, argv);
	for (size_t i = 0; status == FE_NEXT && i < sizeof(phases) / sizeof(phases[0]); i++)
		status = phases[i](x);
	fe_release(x);
	free(x);
	return status == FE_NEXT ? SS_EXIT_OK : status;
}
