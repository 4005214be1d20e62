/* servesim plan — capacity planning over a space of deployments
 * (docs/plan.md).
 *
 * Parse the options (the table run and live share, cli/options.c), load the catalogs
 * and the workload once, enumerate the configurations, skip those the
 * database already holds, evaluate the rest (in this process, in -j
 * workers, or over MPI ranks), then write plan.json, plan.csv and the
 * plots and print the table.  Every option is checked before anything
 * runs; errors are one line; no output file exists until the plan is
 * complete.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "config.h"
#include "engine.h"
#include "html.h"
#include "metrics.h"
#include "options.h"
#include "params.h"
#include "plan-run.h"
#include "plan.h"
#include "report.h"
#include "progress.h"
#include "workload.h"

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

static void plan_epilogue(FILE *f)
{
	fprintf(f, "MPI: %s\n", plan_mpi_available() ?
		   "compiled in (mpirun -n N servesim plan ... shares configurations over N ranks)" :
		   "not compiled in (servesim plan refuses to run under mpirun)");
}

const struct cli_command cli_cmd_plan = {
	.name = "plan", .id = CLI_PLAN,
	.description =
		"Search deployments of a model for a workload: colocated and disaggregated\n"
		"configurations over GPU types, tensor parallelism, instance counts, batch\n"
		"policies, chunk sizes and batch limits.  For each, find the highest request\n"
		"rate at which the SLO attainment target is met (a search over rate scales),\n"
		"and report goodput per GPU and per dollar and the Pareto frontier of cost\n"
		"against latency.  Under `mpirun -n N`, configurations are shared over ranks.\n",
	.epilogue = plan_epilogue,
};

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

/* ---- the list axes (analysis/plan-axes.def) -------------------------------- */

/* What each item of an axis is checked against besides its range. */
enum axis_check { CHECK_NONE, CHECK_LAYERS };

/* Integers in lo..hi, distinct; LAYERS: at most the model's layers (a
 * pipeline stage holds at least one). */
static int ints_parse(struct pctx *x, const char *opt, const char *list, int64_t lo, int64_t hi,
		      enum axis_check check, const struct plan_space *sp, int64_t *v, int *n)
{
	int rc = int_list(x, opt, list, lo, hi, v, n);

	for (int i = 0; !rc && check == CHECK_LAYERS && i < *n; i++)
		if (v[i] > sp->model->n_layers)
			rc = failf(x, SS_EXIT_USAGE,
				   "--%s: expected at most %s's %d layers as pipeline stages, got %" PRId64,
				   opt, sp->model->name, sp->model->n_layers, v[i]);
	return rc;
}

/* Each axis kind's parser: the list (NULL: not given, *n stays 0) into
 * out[] and *n. */
static int axis_INT(struct pctx *x, const char *opt, const char *list, int64_t lo, int64_t hi,
		    enum axis_check check, const struct catalog *cat, const struct plan_space *sp,
		    int *out, int *n)
{
	int64_t v[PLAN_MAX_LIST];
	int rc;

	(void)cat;
	if (!list)
		return 0;
	rc = ints_parse(x, opt, list, lo, hi, check, sp, v, n);
	for (int i = 0; !rc && i < *n; i++)
		out[i] = (int)v[i];
	return rc;
}

static int axis_U32(struct pctx *x, const char *opt, const char *list, int64_t lo, int64_t hi,
		    enum axis_check check, const struct catalog *cat, const struct plan_space *sp,
		    uint32_t *out, int *n)
{
	int64_t v[PLAN_MAX_LIST];
	int rc;

	(void)cat;
	if (!list)
		return 0;
	rc = ints_parse(x, opt, list, lo, hi, check, sp, v, n);
	for (int i = 0; !rc && i < *n; i++)
		out[i] = (uint32_t)v[i];
	return rc;
}

static int axis_GPU(struct pctx *x, const char *opt, const char *list, int64_t lo, int64_t hi,
		    enum axis_check check, const struct catalog *cat, const struct plan_space *sp,
		    const struct gpu_spec **out, int *n)
{
	char items[PLAN_MAX_LIST][64];
	int rc;

	(void)lo, (void)hi, (void)check, (void)sp;
	if (!list)
		return 0;
	rc = split(x, opt, "GPU names", list, items, n);
	for (int i = 0; !rc && i < *n; i++) {
		char hint[256];

		out[i] = catalog_gpu_find(cat, items[i], hint, sizeof(hint));
		if (!out[i])
			return failf(x, SS_EXIT_USAGE,
				     "--%s: unknown GPU '%s' (%s%ssee `servesim list gpus`)", opt,
				     items[i], hint, hint[0] ? " " : "");
		for (int j = 0; j < i; j++)
			if (out[j] == out[i])
				return failf(x, SS_EXIT_USAGE, "--%s: '%s' appears twice", opt, items[i]);
	}
	return rc;
}

static int axis_POLICY(struct pctx *x, const char *opt, const char *list, int64_t lo, int64_t hi,
		       enum axis_check check, const struct catalog *cat, const struct plan_space *sp,
		       const struct plan_policy **out, int *n)
{
	char items[PLAN_MAX_LIST][64];
	int rc;

	(void)lo, (void)hi, (void)check, (void)cat, (void)sp;
	if (!list)
		return 0;
	rc = split(x, opt, "policy names", list, items, n);
	for (int i = 0; !rc && i < *n; i++) {
		out[i] = plan_policy_find(items[i]);
		if (!out[i])
			return failf(x, SS_EXIT_USAGE, "--%s: expected names among %s, got '%s'", opt,
				     plan_policy_names(), items[i]);
		for (int j = 0; j < i; j++)
			if (out[j] == out[i])
				return failf(x, SS_EXIT_USAGE, "--%s: '%s' appears twice", opt, items[i]);
	}
	return rc;
}

enum axis_group { AXES_LAYOUT, AXES_BATCH, AXES_OUTER };

/* The list axes of one group, in plan-axes.def's order: the first error
 * stops it. */
static int axes_parse(struct pctx *x, const struct cli_config *o, const struct catalog *cat,
		      struct plan_space *sp, enum axis_group group)
{
	int rc = 0;

#define PLAN_AXIS(kind, list, cfg, opt, cli, dflt, lo, hi, group_, engine, check, names, help) \
	if (!rc && group == AXES_##group_)                                                    \
		rc = axis_##kind(x, opt, o->cli, lo, hi, CHECK_##check, cat, sp, sp->list,        \
				 &sp->n_##list);
#include "plan-axes.def"
#undef PLAN_AXIS
	return rc;
}

/* The search space from the options. */
static int build_space(struct pctx *x, const struct cli_config *o, const struct catalog *cat,
		       struct plan_space *sp)
{
	char items[PLAN_MAX_LIST][64];
	const char *modes;
	int n, rc;

	rc = axes_parse(x, o, cat, sp, AXES_LAYOUT);
	if (rc)
		return rc;
	/* --lora runs colocated only (engine_lora_check): its default */
	modes = o->modes ? o->modes : o->lora && strcmp(o->lora, "off") != 0 ? "colocated" :
		"colocated,disaggregated";
	rc = split(x, "modes", "colocated or disaggregated", modes, items, &n);
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
	/* --weight-dtype / --kv-dtype lists: search axes (checked by the
	 * option parser; a single dtype stays in the base configuration) */
	for (int k = 0; k < 2; k++) {
		const char *list = k ? o->kv_dtypes : o->weight_dtypes;
		enum ss_dtype *d = k ? sp->kv_dtypes : sp->weight_dtypes;
		int *nd = k ? &sp->n_kv_dtypes : &sp->n_weight_dtypes;

		rc = list ? split(x, k ? "kv-dtype" : "weight-dtype", "dtypes", list, items, &n) : 0;
		if (rc)
			return rc;
		for (int i = 0; list && i < n && i < 4; i++)
			if (ss_dtype_parse(items[i], &d[i]) == 0)
				*nd = i + 1;
	}
	if (sp->mixed_pools && !sp->disaggregated)
		return failf(x, SS_EXIT_USAGE,
			     "--mixed-pools: expected --modes to include disaggregated, got '%s'", modes);
	rc = axes_parse(x, o, cat, sp, AXES_BATCH);
	if (!rc)
		rc = axes_parse(x, o, cat, sp, AXES_OUTER);
	if (rc)
		return rc;
	rc = parse_budget(x, o->budget, sp);
	if (rc)
		return rc;
	/* the largest cluster: as given; else the budget's; else what the
	 * explicit instance counts need; else 8 */
	sp->max_gpus = o->max_gpus ? (int)o->max_gpus : sp->budget_gpus ? sp->budget_gpus : 8;
	if (!o->max_gpus && !sp->budget_gpus && sp->n_instances) {
		int most = 1;

		int pp_most = 1;

		for (int q = 0; q < sp->n_pp; q++)
			pp_most = sp->pp[q] > pp_most ? sp->pp[q] : pp_most;
		for (int i = 0; i < sp->n_instances; i++)
			for (int t = 0; t < sp->n_tp; t++) {
				int64_t g = (int64_t)sp->instances[i] * sp->tp[t] * pp_most;

				if (g > most)
					most = (int)(g > 100000 ? 100000 : g);
			}
		sp->max_gpus = most;
	}
	return 0;
}

/* ---- running ------------------------------------------------------------- */

struct plan_state {
	struct plan_db *db;
	const struct plan_config *cfg;
	const char (*priced_by)[PLAN_PRICED_BY_LEN];   /* n entries */
	size_t done, total;
	size_t done_before;          /* resumed from the database, not run now */
	/* configurations run now of those pending (cli/progress.h) */
	struct cli_progress progress;
	/* probes of the results evaluated now (not resumed), and of those
	 * the ones copied from a smaller running-set limit (--stats) */
	uint64_t probes, reused;
};

static int on_result(void *ctx, const struct plan_result *r, struct ss_error *err)
{
	struct plan_state *s = ctx;
	int rc = 0;

	if (s->db && r->status != PLAN_FAILED)
		rc = plan_db_store_priced(s->db, &s->cfg[r->index], r, s->priced_by[r->index], err);
	s->done++;
	if (r->n_probes > 0) {
		s->probes += (uint64_t)r->n_probes;
		s->reused += (uint64_t)(r->n_reused > 0 ? r->n_reused : 0);
	}
	cli_progress_update(&s->progress, s->done - s->done_before, s->total - s->done_before);
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
		struct engine_config ec;
		struct ss_error err = { 0 };
		struct engine *e = NULL;
		bool seen = false;

		for (size_t j = 0; j < i && !seen; j++)
			seen = cfg[j].mode == c->mode && cfg[j].gpu == c->gpu && cfg[j].tp == c->tp &&
			       cfg[j].pp == c->pp &&
			       plan_config_decode_gpu(&cfg[j]) == plan_config_decode_gpu(c) &&
			       plan_config_decode_tp(&cfg[j]) == plan_config_decode_tp(c) &&
			       cfg[j].policy == c->policy && cfg[j].ep == c->ep &&
			       cfg[j].dp_attention == c->dp_attention;
		if (seen)
			continue;
		plan_config_engine(c, base, &ec);
		if (engine_new(&e, &ec, wl, &err)) {
			char msg[700];

			ss_error_format(&err, msg, sizeof(msg));
			return failf(x, cli_engine_status(&err), "configuration '%s': %s", c->key, msg);
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

/* One plan: its options, its inputs and what it found. */
struct plan {
	struct pctx *x;
	struct cli_config o;
	struct catalog cat;
	struct stack_profile stack;  /* the serving stack (cli_resolve_stack); ec.stack points here */
	struct workload wl;
	struct engine_config ec;     /* the options every configuration shares */
	struct plan_space sp;
	struct spec_config specs[PLAN_MAX_SPECS];   /* sp.specs point here (--spec) */
	struct lora_config lora;     /* --lora; ec.lora points here when given */
	struct plan_excluded ex;
	struct plan_eval pe;
	struct plan_cm_cache cms;    /* pe's cost models, kept across configurations */
	struct plan_probe_cache probes; /* pe's probes, kept across running-set limits */
	struct plan_config *cfg;     /* n configurations */
	size_t n;
	struct plan_result *res;     /* n */
	bool *done;                  /* n: res[i] came from the database */
	uint32_t *pending;           /* the indices left to evaluate, ascending */
	size_t n_done, n_pending;
	struct plan_db *db;          /* rank 0, with --db or --out */
	char fp_hex[17];
	char *fp_desc;
	/* the workload a trace cut by --num-requests / --duration (sliced) */
	bool sliced;
	struct wl_slice slice;
	struct wl_context context;   /* requests longer than the context (cli_context_apply) */
	int out_lock;                /* --out's writer lock (report_lock_dir), -1: none */
	/* --verify: the re-runs on the whole workload */
	struct plan_verified *verified;
	size_t n_verified;
	uint64_t verify_requests;
	double verify_rate_rps;
	/* what priced each configuration (plan_config_priced_by), n entries */
	char (*priced_by)[PLAN_PRICED_BY_LEN];
	bool *roofline;
	/* --rate without --instances: colocated configurations in families
	 * that differ only in their instance count, whose counts are
	 * bisected (bisect_next); family[i] = -1 outside one */
	bool bisect;
	int32_t *family;
	size_t n_families;
	double mean_output_tokens;   /* of the workload, per request */
	void *scratch;               /* n size_t: a family's members (next_pending) */
	char *command_line;          /* as typed, for report.html (html_command_line) */
	/* How the GPUs are priced (pricing_routes, docs/plan.md "Like for
	 * like"): the one line when they differ ("" when alike); with
	 * --like-for-like, the pricing every GPU got ("tables" or
	 * "roofline"), whether that is not the default pricing (then the
	 * evaluation ran under "roofline" and compare_default re-ran the
	 * configurations it moved under default_cost_model, into
	 * default_res), and which configurations it moved (needs_default) */
	char pricing_note[1024];
	const char *like_pricing;
	bool like_switched;
	const char *default_cost_model;
	bool *needs_default;
	struct plan_result *default_res;
};

/* Do a and b price their pools with the same cost models? */
static bool same_pools(const struct plan_config *a, const struct plan_config *b)
{
	return a->gpu == b->gpu && a->tp == b->tp && a->ep == b->ep &&
	       a->dp_attention == b->dp_attention && a->dtype_axis == b->dtype_axis &&
	       (!a->dtype_axis ||
		(a->weight_dtype == b->weight_dtype && a->kv_dtype == b->kv_dtype)) &&
	       plan_config_mixed(a) == plan_config_mixed(b) &&
	       plan_config_decode_gpu(a) == plan_config_decode_gpu(b) &&
	       plan_config_decode_tp(a) == plan_config_decode_tp(b);
}

/* What priced each configuration, once per distinct pair of pools (the
 * cost models are kept in p->cms, where the evaluation finds them). */
static int price_all(struct plan *p)
{
	struct ss_error err = { 0 };
	size_t *seen = malloc((p->n ? p->n : 1) * sizeof(*seen)), n_seen = 0;

	p->priced_by = calloc(p->n ? p->n : 1, sizeof(*p->priced_by));
	p->roofline = calloc(p->n ? p->n : 1, sizeof(*p->roofline));
	if (!seen || !p->priced_by || !p->roofline) {
		free(seen);
		return failf(p->x, SS_EXIT_FAILURE, "plan: out of memory");
	}
	for (size_t i = 0; i < p->n; i++) {
		size_t k = 0;

		while (k < n_seen && !same_pools(&p->cfg[seen[k]], &p->cfg[i]))
			k++;
		if (k < n_seen) {
			memcpy(p->priced_by[i], p->priced_by[seen[k]], sizeof(p->priced_by[i]));
			p->roofline[i] = p->roofline[seen[k]];
			continue;
		}
		if (plan_config_priced_by(&p->pe, &p->cfg[i], p->priced_by[i],
					  sizeof(p->priced_by[i]), &p->roofline[i], &err)) {
			free(seen);
			return failf(p->x, SS_EXIT_FAILURE, "configuration '%s': %s", p->cfg[i].key,
				     err.msg);
		}
		seen[n_seen++] = i;
	}
	free(seen);
	return SS_EXIT_OK;
}

/* --rate without --instances: the colocated configurations that differ
 * only in their instance count form a family, whose members come in
 * ascending count (the enumeration's order).  The mean output tokens per
 * request (cost per token) are set here too. */
static int make_families(struct plan *p)
{
	char (*keys)[384] = malloc((p->n ? p->n : 1) * sizeof(*keys));
	size_t *rep = malloc((p->n ? p->n : 1) * sizeof(*rep));

	p->family = malloc((p->n ? p->n : 1) * sizeof(*p->family));
	if (!keys || !rep || !p->family) {
		free(keys);
		free(rep);
		return failf(p->x, SS_EXIT_FAILURE, "plan: out of memory");
	}
	p->bisect = true;
	p->n_families = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct plan_config c = p->cfg[i];
		size_t f = 0;

		p->family[i] = -1;
		if (c.mode != PLAN_COLOCATED)
			continue;
		c.instances = 0;
		plan_config_key(&c);
		memcpy(keys[i], c.key, sizeof(keys[i]));
		while (f < p->n_families && strcmp(keys[rep[f]], keys[i]))
			f++;
		if (f == p->n_families)
			rep[p->n_families++] = i;
		p->family[i] = (int32_t)f;
	}
	free(keys);
	free(rep);
	return SS_EXIT_OK;
}

/* How each GPU of the plan is priced under the default pricing (the plan's
 * cost model, per GPU type: docs/plan.md "Like for like"): its own
 * measured tables, another family member's scaled by the roofline, or
 * the roofline alone.  When they differ, p->pricing_note says so in one
 * line.  With --like-for-like, where some GPU is priced by the roofline
 * and another from measurements, every GPU is priced by the roofline
 * instead (p->ec.cost_model), and p->needs_default marks the
 * configurations whose default pricing is not that (compare_default
 * re-runs them); otherwise every GPU is already priced from its family's
 * measured tables (or every one by the roofline) and nothing moves. */
struct gpu_route {
	const struct gpu_spec *g;
	const char *ref;             /* the reference of its scaled pools */
	unsigned routes;             /* a bit per enum plan_route seen */
};

static int pricing_routes(struct plan *p)
{
	struct gpu_route gpus[2 * PLAN_MAX_LIST];
	int ng = 0;
	unsigned all = 0;
	size_t at = 0;
	char *note = p->pricing_note;
	size_t len = sizeof(p->pricing_note);

	p->needs_default = calloc(p->n ? p->n : 1, sizeof(*p->needs_default));
	if (!p->needs_default)
		return failf(p->x, SS_EXIT_FAILURE, "plan: out of memory");
	for (size_t i = 0; i < p->n; i++)
		for (int k = 0; k < (plan_config_mixed(&p->cfg[i]) ? 2 : 1); k++) {
			const struct plan_config *c = &p->cfg[i];
			const struct gpu_spec *g = k ? plan_config_decode_gpu(c) : c->gpu;
			struct ss_error err = { 0 };
			enum plan_route r;
			const char *ref;
			int j = 0;

			if (plan_config_route(&p->pe, c, k, &r, &ref, &err))
				return failf(p->x, SS_EXIT_FAILURE, "configuration '%s': %s", c->key,
					     err.msg);
			p->needs_default[i] |= r != PLAN_ROUTE_MODEL;
			while (j < ng && gpus[j].g != g)
				j++;
			if (j == ng && ng < (int)(sizeof(gpus) / sizeof(gpus[0])))
				gpus[ng++] = (struct gpu_route){ .g = g };
			if (j < ng) {
				gpus[j].routes |= 1u << r;
				if (ref)
					gpus[j].ref = ref;
			}
			all |= 1u << r;
		}
	p->like_pricing = all & (1u << PLAN_ROUTE_MODEL) ? "roofline" : "tables";
	if (all & (all - 1)) {
		/* more than one route: say how each GPU is priced */
		for (int j = 0; j < ng && at < len; j++) {
			unsigned r = gpus[j].routes;
			const char *fam = gpus[j].g->family;

			at += (size_t)snprintf(note + at, len - at, "%s%s ", j ? "; " : "",
					       gpus[j].g->name);
			if (at >= len)
				break;
			if (r & (r - 1))
				at += (size_t)snprintf(note + at, len - at,
						       "by different routes at different layouts");
			else if (r & (1u << PLAN_ROUTE_OWN))
				at += (size_t)snprintf(note + at, len - at, "from its measured tables");
			else if (r & (1u << PLAN_ROUTE_SCALED))
				at += (size_t)snprintf(note + at, len - at,
						       "from %s's tables x the roofline",
						       gpus[j].ref ? gpus[j].ref : "?");
			else
				at += (size_t)snprintf(note + at, len - at,
						       "by the roofline (no measured GPU of its family%s%s)",
						       fam[0] ? " " : "", fam);
		}
		if (at < len && (all & (1u << PLAN_ROUTE_MODEL)))
			snprintf(note + at, len - at,
				 "; measured and modelled rows differ by more than the GPUs: --like-for-like%s prices every GPU by the roofline",
				 strcmp(p->o.cost_model, "auto") ? " (with --cost-model auto)" : "");
		else if (at < len)
			snprintf(note + at, len - at,
				 "; like for like: every GPU from its family's measured tables");
	}
	if (!p->o.like_for_like)
		return SS_EXIT_OK;
	p->default_cost_model = p->ec.cost_model;
	if ((all & (1u << PLAN_ROUTE_MODEL)) && (all & ~(1u << PLAN_ROUTE_MODEL))) {
		/* the cost models built so far are the default pricing's */
		plan_cm_cache_release(&p->cms);
		p->ec.cost_model = "roofline";
		p->like_switched = true;
	}
	return SS_EXIT_OK;
}

/* --like-for-like: the configurations the like-for-like pricing moved,
 * evaluated again under the default pricing (as evaluate() does: workers,
 * MPI ranks, the bisection on instance counts), the others' results
 * copied (their pricing is the same); into p->default_res, for the
 * winners' comparison.  Nothing is stored in the database, whose
 * fingerprint is the like-for-like pricing's. */
static int evaluate(struct plan *p);
static int compare_default(struct plan *p)
{
	struct engine_config ec = p->ec;
	struct plan_cm_cache cms = { 0 };
	struct plan_probe_cache probes = { 0 };
	struct plan_eval pe = p->pe, pe0 = p->pe;
	struct plan_result *res0 = p->res;
	bool *done0 = p->done;
	size_t n_done0 = p->n_done;
	struct plan_db *db0 = p->db;
	struct plan_result *res = calloc(p->n ? p->n : 1, sizeof(*res));
	bool *done = calloc(p->n ? p->n : 1, sizeof(*done));
	size_t n_done = 0;
	int rc;

	if (!res || !done) {
		free(res);
		free(done);
		return failf(p->x, SS_EXIT_FAILURE, "plan: out of memory");
	}
	ec.cost_model = p->default_cost_model;
	pe.base = &ec;
	pe.cms = &cms;
	pe.probes = &probes;
	for (size_t i = 0; i < p->n; i++) {
		if (!p->needs_default[i]) {
			res[i] = res0[i];
			done[i] = true;
			n_done++;
		} else {
			res[i] = (struct plan_result){ .index = (uint32_t)i, .status = PLAN_FAILED,
						       .n_probes = -1, .best = -1 };
		}
	}
	p->pe = pe;
	p->res = res;
	p->done = done;
	p->n_done = n_done;
	p->db = NULL;
	rc = evaluate(p);
	p->pe = pe0;
	p->res = res0;
	p->done = done0;
	p->n_done = n_done0;
	p->db = db0;
	free(done);
	plan_cm_cache_release(&cms);
	plan_probe_cache_release(&probes);
	if (rc)
		free(res);
	else
		p->default_res = res;
	return rc;
}

/* setup() and the phases after it return this when the plan is over and
 * succeeded early (--help, --dry-run). */
#define PLAN_FINISHED (-1)

/* Options, catalogs, workload, the space and its configurations, each
 * checked by the engine.  Returns an exit status or PLAN_FINISHED; on
 * failure x->msg says why. */

/* --spec: a speculation axis (plan_space.specs), items separated by ';'
 * (an item holds commas): off or METHOD:k=K,... (run's --spec); auto is
 * off and the model's method at k = 1..4 (mtp where the model ships MTP
 * layers, else eagle3) with the method's median acceptance. */
static int parse_specs(struct plan *p, struct ss_error *err)
{
	const char *list = p->o.spec;
	char items[PLAN_MAX_SPECS][256];
	int n = 0;

	if (!list)
		return 0;
	if (!strcmp(list, "auto")) {
		const char *method = p->sp.model->mtp_layers > 0 ? "mtp" : "eagle3";

		snprintf(items[n++], sizeof(items[0]), "off");
		for (int k = 1; k <= 4; k++)
			snprintf(items[n++], sizeof(items[0]), "%s:k=%d", method, k);
	} else {
		for (const char *q = list;;) {
			size_t len = strcspn(q, ";");

			if (len == 0 || len >= sizeof(items[0]) || n >= PLAN_MAX_SPECS)
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "--spec: expected auto or at most %d items (off, METHOD:k=K,...) separated by ';', got '%s'",
						    PLAN_MAX_SPECS, list);
			memcpy(items[n], q, len);
			items[n++][len] = '\0';
			if (!q[len])
				break;
			q += len + 1;
		}
	}
	for (int i = 0; i < n; i++) {
		if (!strcmp(items[i], "off")) {
			p->sp.specs[i] = NULL;
			continue;
		}
		if (spec_config_parse(&p->specs[i], items[i], &p->cat, p->sp.model, err))
			return -EINVAL;
		p->sp.specs[i] = &p->specs[i];
	}
	p->sp.n_specs = n;
	return 0;
}

static int setup(struct plan *p, int argc, char **argv)
{
	struct pctx *x = p->x;
	struct cli_config *o = &p->o;
	struct ss_error err = { 0 };
	struct workload_spec ws;
	int rc;

	/* before cli_parse(): getopt permutes argv */
	p->command_line = html_command_line("servesim plan", argc, argv);
	rc = cli_parse(&cli_cmd_plan, argc, argv, o, x->rank == 0, &err);
	if (rc == CLI_HELP_SHOWN)
		return PLAN_FINISHED;
	if (rc)
		return fail_err(x, SS_EXIT_USAGE, &err);
	if (o->num_requests == 1)
		return failf(x, SS_EXIT_USAGE, "--num-requests: expected an integer >= 2, got '1'");
	if (o->like_for_like && strcmp(o->cost_model, "auto"))
		return failf(x, SS_EXIT_USAGE,
			     "--like-for-like: chooses each GPU's pricing itself; expected --cost-model auto (the default), got '%s'",
			     o->cost_model);
	if (o->plan_rate > 0 && o->concurrency)
		return failf(x, SS_EXIT_USAGE,
			     "--rate: expected an open-loop workload; a closed loop (--concurrency) has no arrival rate to reach");
	if (x->mpi && o->jobs > 1)
		return failf(x, SS_EXIT_USAGE,
			     "-j %d under mpirun: run one rank per core instead (mpirun -n CORES)",
			     (int)o->jobs);
	if (cli_load_catalog(&p->cat, o->model_catalog, o->gpu_catalog, o->engine_catalog, &err) ||
	    cli_load_model_config(o, &p->cat, &err) ||
	    (o->engine_store && cli_load_engine_store(o->engine_store, &p->cat, &err)) ||
	    (o->interval_catalog && catalog_load_intervals(&p->cat, o->interval_catalog, &err)))
		return fail_err(x, SS_EXIT_FAILURE, &err);
	if (cli_apply_prices(o, &p->cat, &err))
		return fail_err(x, SS_EXIT_USAGE, &err);
	{
		char hint[256];

		p->sp.model = catalog_model_find(&p->cat, o->model, hint, sizeof(hint));
		if (!p->sp.model)
			return failf(x, SS_EXIT_USAGE,
				     "--model: unknown model '%s' (%s%ssee `servesim list models`)",
				     o->model, hint, hint[0] ? " " : "");
		o->model = p->sp.model->name;
	}
	if (model_check_priced(p->sp.model, &err))
		return fail_err(x, SS_EXIT_FAILURE, &err);
	rc = build_space(x, o, &p->cat, &p->sp);
	if (rc)
		return rc;
	if (parse_specs(p, &err))
		return fail_err(x, SS_EXIT_USAGE, &err);
	/* the workload, once, at the plan's scale 1 */
	if (cli_workload_spec(o, &ws, &err))
		return fail_err(x, SS_EXIT_USAGE, &err);
	if (workload_build(&p->wl, &ws, &err))   /* a bad file: 1; a bad --arrival: 2 */
		return fail_err(x, cli_engine_status(&err), &err);
	if (x->rank == 0)
		cli_source_model_note(o, &p->cat, &p->wl, p->sp.model);
	/* requests longer than the context: the same in every configuration */
	if (cli_context_apply(o, o->max_context ? (int32_t)o->max_context : p->sp.model->max_context,
			      &p->wl, &p->context, &err))
		return fail_err(x, SS_EXIT_USAGE, &err);
	cli_verbosef("workload %s (%s): %zu requests; model %s; GPUs %s; cost model %s", p->wl.source,
		     o->trace ? trace_format_name(p->wl.format) : "generated", p->wl.n,
		     p->sp.model->name, o->gpus, o->cost_model);
	/* a closed loop scales its clients, not a rate (plan_evaluate) */
	if (!o->concurrency && !(plan_workload_rate(&p->wl) > 0))
		return failf(x, SS_EXIT_FAILURE,
			     "workload %s: expected at least 2 requests arriving over a time span (a rate to scale), got %zu",
			     p->wl.source, p->wl.n);
	if (o->plan_rate > 0) {
		/* R is a scale of the workload: the search reaches 1/1024..1024 */
		struct plan_search d;
		double w = plan_workload_rate(&p->wl), sc = o->plan_rate / w;

		plan_search_defaults(&d);
		if (sc > d.max_scale || sc < d.min_scale)
			return failf(x, SS_EXIT_USAGE,
				     "--rate: expected a rate within %g..%g x the workload's %.6g req/s, got %g",
				     d.min_scale, d.max_scale, w, o->plan_rate);
	}
	cli_engine_config(o, &p->ec);
	/* "auto" prices a GPU without tables from its family's ("scaled") */
	p->ec.ref_gpus = p->cat.gpus;
	p->ec.n_ref_gpus = p->cat.n_gpus;
	if (cli_resolve_engine(o, &p->cat, &p->ec.engine, &err))
		return fail_err(x, SS_EXIT_USAGE, &err);
	{
		const char *spec;

		rc = cli_resolve_stack(o, &p->cat, p->ec.engine, &p->stack, &spec, &err);
		if (rc)
			return fail_err(x, rc, &err);
		p->ec.stack = &p->stack;
	}
	p->ec.memory_limit_bytes = cli_memory_limit();
	p->ec.model = p->sp.model;
	p->ec.sample_interval_ns = 0;   /* probes keep no time series */
	/* --lora: a property of the workload every configuration serves;
	 * the layouts the engine does not model with adapters are refused
	 * here, once, rather than as each configuration's failure */
	if (o->lora && strcmp(o->lora, "off") != 0) {
		const char *why = p->sp.disaggregated ? "--modes disaggregated" :
				  p->sp.n_pp > 1 || (p->sp.n_pp == 1 && p->sp.pp[0] > 1) ? "--pp" :
				  p->sp.n_dp_attention > 1 ||
				  (p->sp.n_dp_attention == 1 && p->sp.dp_attention[0] > 1) ?
				  "--dp-attention" : p->sp.n_specs ? "--spec" : NULL;

		if (why)
			return failf(x, SS_EXIT_USAGE, "--lora with %s: not modelled yet (plan colocated configurations)",
				     why);
		if (lora_config_parse(&p->lora, o->lora, &err) ||
		    lora_model_check(&p->lora, p->sp.model, &err))
			return fail_err(x, SS_EXIT_USAGE, &err);
		p->ec.lora = &p->lora;
	}
	if (plan_enumerate(&p->sp, &p->ec, &p->cfg, &p->n, &p->ex, &err))
		return fail_err(x, SS_EXIT_USAGE, &err);
	if (p->n == 0)
		return failf(x, SS_EXIT_FAILURE,
			     "no configuration to plan: %u over budget, %u without a price for --budget usd_per_hour, %u not fitting %s in memory, %u with max batch > chunk",
			     p->ex.budget, p->ex.unpriced, p->ex.memory, p->sp.model->name, p->ex.policy);
	/* from here on the output directory is ours: an earlier plan's
	 * plan.json goes, so a failure never leaves one that looks current */
	if (x->rank == 0 && o->out && !o->dry_run &&
	    ((p->out_lock = report_lock_dir(o->out, &err)) < 0 || plan_prepare_dir(o->out, &err)))
		return fail_err(x, SS_EXIT_FAILURE, &err);
	rc = validate(x, &p->ec, &p->wl, p->cfg, p->n);
	if (rc)
		return rc;
	if (o->dry_run) {
		if (x->rank == 0) {
			printf("%zu configurations (left out: %u over budget, %u unpriced, %u not fitting in memory, %u max batch > chunk)\n",
			       p->n, p->ex.budget, p->ex.unpriced, p->ex.memory, p->ex.policy);
			for (size_t i = 0; i < p->n; i++)
				printf("%zu %s\n", i, p->cfg[i].key);
		}
		return PLAN_FINISHED;
	}
	plan_search_defaults(&p->pe.search);
	p->pe.slo = o->slo;
	p->pe.search.target = o->target;
	p->pe.search.each_slo = o->attainment == 1;
	p->pe.search.tolerance = o->tolerance;
	p->pe.search.max_probes = (int)o->max_probes;
	p->pe.search.min_span = o->min_span;
	p->pe.base = &p->ec;
	p->pe.cms = &p->cms;
	p->pe.probes = &p->probes;
	p->pe.wl = &p->wl;
	p->pe.rate_rps = plan_workload_rate(&p->wl);
	{
		double out = 0;

		for (size_t i = 0; i < p->wl.n; i++)
			out += p->wl.req[i].output_tokens;
		p->mean_output_tokens = p->wl.n ? out / (double)p->wl.n : 0;
	}
	if (o->plan_rate > 0)
		p->pe.search.need_scale = o->plan_rate / p->pe.rate_rps;
	/* how each GPU is priced, and --like-for-like's pricing, before the
	 * interval's bounds, which depend on the cost model */
	rc = pricing_routes(p);
	if (rc)
		return rc;
	/* the interval's bounds for the plan's engine profile (docs/metrics.md
	 * "Intervals"), before each probe widens them for its share outside
	 * the measured grid */
	{
		bool spec;

		p->pe.iv_entry = interval_bounds(&p->cat, p->ec.engine ? p->ec.engine->name : NULL,
						 p->ec.engine &&
						 catalog_engine_shipped(&p->cat, p->ec.engine->name),
						 p->ec.cost_model, &spec, p->pe.iv_lo, p->pe.iv_hi);
	}
	p->pe.conservative = o->conservative;
	if (o->conservative && !p->pe.iv_entry)
		return failf(x, SS_EXIT_FAILURE,
			     "--conservative: no interval bounds (expected %s/intervals.json or --interval-catalog FILE)",
			     cli_data_dir());
	rc = price_all(p);
	if (!rc && o->plan_rate > 0 && !o->instances_list)
		rc = make_families(p);
	return rc;
}

/* The results so far: the fingerprint (the same on every rank) and, on
 * rank 0, what the database holds. */
static int open_results(struct plan *p)
{
	struct pctx *x = p->x;
	struct ss_error err = { 0 };
	char db_path[4200];

	p->res = calloc(p->n, sizeof(*p->res));
	p->done = calloc(p->n, sizeof(*p->done));
	p->pending = calloc(p->n, sizeof(*p->pending));
	p->fp_desc = malloc(4096);
	if (!p->res || !p->done || !p->pending || !p->fp_desc)
		return failf(x, SS_EXIT_FAILURE, "plan: out of memory");
	plan_fingerprint(&p->pe, SERVESIM_VERSION, p->fp_desc, 4096, p->fp_hex);
	for (size_t i = 0; i < p->n; i++)
		p->res[i] = (struct plan_result){ .index = (uint32_t)i, .status = PLAN_FAILED,
						  .n_probes = -1, .best = -1 };
	if (x->mpi) {
		/* every rank must plan the same thing */
		char fp0[17];

		memcpy(fp0, p->fp_hex, sizeof(fp0));
		plan_mpi_bcast(fp0, sizeof(fp0));
		if (memcmp(fp0, p->fp_hex, sizeof(fp0)) != 0)
			return failf(x, SS_EXIT_FAILURE,
				     "MPI rank %d: the plan's inputs differ from rank 0's (fingerprint %s, rank 0 %s): same files and options on every machine?",
				     x->rank, p->fp_hex, fp0);
	}
	if (x->rank != 0 || (!p->o.db && !p->o.out))
		return SS_EXIT_OK;
	if (p->o.db)
		snprintf(db_path, sizeof(db_path), "%s", p->o.db);
	else
		snprintf(db_path, sizeof(db_path), "%s/plan.db", p->o.out);
	if (plan_db_open(&p->db, db_path, p->fp_hex, p->fp_desc, &err) ||
	    plan_db_load(p->db, p->cfg, p->n, p->res, p->done, &p->n_done, &err))
		return fail_err(x, SS_EXIT_FAILURE, &err);
	return SS_EXIT_OK;
}

/* Does configuration i's result settle whether it sustains the target
 * rate: *yes when its highest sustained rate is at least R. */
static bool sustains(const struct plan *p, size_t i)
{
	const struct plan_result *r = &p->res[i];
	const struct plan_probe *b = plan_result_best(r);

	return (r->status == PLAN_OK || r->status == PLAN_CAPPED) && b &&
	       b->rate_rps >= p->o.plan_rate * (1 - 1e-9);
}

/* The configurations of the next round, into p->pending (ascending).
 * Without bisection: everything the database does not hold, in one round.
 * With it (--rate, no --instances), per family of colocated
 * configurations differing only in their count (ascending): the smallest
 * count that sustains R, by bisection -- the sustained rate does not fall
 * as instances are added (docs/plan.md, "The target rate") -- so a round
 * holds each unsettled family's middle member; members with results (the
 * database's, or an earlier round's) settle without a round.  Other
 * configurations go in round 0.  Every member the bisection did not need
 * is PLAN_SKIPPED once no family is left. */
static void next_pending(struct plan *p, int round, bool *evaluated)
{
	p->n_pending = 0;
	if (!p->bisect) {
		for (size_t i = 0; round == 0 && i < p->n; i++)
			if (!p->done[i])
				p->pending[p->n_pending++] = (uint32_t)i;
		return;
	}
	for (size_t i = 0; round == 0 && i < p->n; i++)
		if (p->family[i] < 0 && !p->done[i])
			p->pending[p->n_pending++] = (uint32_t)i;
	for (size_t f = 0; f < p->n_families; f++) {
		/* the family's members, ascending count: the answer is in
		 * (lo, hi]; lo fails (or -1), hi sustains (or m: none does) */
		size_t *mem = (size_t *)p->scratch, m = 0;
		ptrdiff_t lo = -1, hi, k;

		for (size_t i = 0; i < p->n; i++)
			if (p->family[i] == (int32_t)f)
				mem[m++] = i;
		hi = (ptrdiff_t)m;
		/* the members already settled narrow the range */
		for (k = lo + 1; k < hi; k++) {
			if (!p->done[mem[k]] && !evaluated[mem[k]])
				continue;
			if (sustains(p, mem[k]))
				hi = k;
			else
				lo = k;
			k = lo;   /* the loop goes on at lo + 1 */
		}
		if (lo + 1 < hi)
			p->pending[p->n_pending++] = (uint32_t)mem[lo + 1 + (hi - lo - 1) / 2];
	}
	/* families are interleaved in the enumeration: ascending again */
	for (size_t a = 1; a < p->n_pending; a++)
		for (size_t b = a; b > 0 && p->pending[b - 1] > p->pending[b]; b--) {
			uint32_t t = p->pending[b];

			p->pending[b] = p->pending[b - 1];
			p->pending[b - 1] = t;
		}
}

/* Evaluate what the database does not hold (or, bisecting, what the
 * bisection needs), here, in -j workers or over the MPI ranks, round by
 * round.  On rank 0, fails with the lowest failed configuration. */
static int evaluate(struct plan *p)
{
	struct pctx *x = p->x;
	struct ss_error err = { 0 };
	struct plan_state st = { 0 };
	struct plan_run pr;
	bool *evaluated = calloc(p->n ? p->n : 1, sizeof(*evaluated));
	size_t skipped = 0;
	bool failed = false;
	int rc = 0;

	free(p->scratch);   /* --like-for-like evaluates twice */
	p->scratch = malloc((p->n ? p->n : 1) * sizeof(size_t));
	if (!evaluated || !p->scratch) {
		free(evaluated);
		return failf(x, SS_EXIT_FAILURE, "plan: out of memory");
	}
	st = (struct plan_state){
		.db = p->db, .cfg = p->cfg, .total = p->n, .done = p->n_done,
		.done_before = p->n_done,
		.priced_by = (const char (*)[PLAN_PRICED_BY_LEN])p->priced_by,
	};
	/* rank 0 speaks; the ETA counts what is left to run, not what was
	 * resumed (bisecting: every count, an upper bound) */
	cli_progress_start(&st.progress, "plan", "configurations", p->n - p->n_done,
			   x->rank != 0 || p->o.quiet || p->o.json || p->n == p->n_done);
	for (int round = 0;; round++) {
		/* what is left to run: rank 0 decides */
		if (x->rank == 0 && !failed)
			next_pending(p, round, evaluated);
		else if (x->rank == 0)
			p->n_pending = 0;
		if (x->mpi) {
			uint64_t np = p->n_pending;

			plan_mpi_bcast(&np, sizeof(np));
			p->n_pending = (size_t)np;
			plan_mpi_bcast(p->pending, p->n_pending * sizeof(*p->pending));
		}
		if (round > 0 && p->n_pending == 0)
			break;
		pr = (struct plan_run){
			.pe = &p->pe, .cfg = p->cfg, .n = p->n, .pending = p->pending,
			.n_pending = p->n_pending, .res = p->res, .jobs = (int)p->o.jobs,
			.on_result = on_result, .ctx = &st,
		};
		if (x->mpi)
			rc = plan_run_mpi(&pr, x->rank, x->size, &err);
		else
			rc = plan_run_local(&pr, &err);
		/* every rank goes on to the next round, or none */
		if ((x->mpi ? plan_mpi_max(rc != 0) : rc != 0) || !p->bisect)
			break;
		if (x->rank != 0)
			continue;
		/* a failed configuration ends the rounds (reported below) */
		for (size_t k = 0; k < p->n_pending; k++) {
			evaluated[p->pending[k]] = true;
			failed |= p->res[p->pending[k]].status == PLAN_FAILED;
		}
	}
	for (size_t i = 0; x->rank == 0 && !rc && p->bisect && i < p->n; i++)
		if (!p->done[i] && !evaluated[i]) {
			p->res[i] = (struct plan_result){ .index = (uint32_t)i, .status = PLAN_SKIPPED,
							  .best = -1 };
			skipped++;
		}
	free(evaluated);
	cli_progress_update(&st.progress, st.done + skipped - st.done_before,
			    st.total - st.done_before);
	cli_progress_end(&st.progress);
	if (x->rank != 0)
		return SS_EXIT_OK;
	if (p->o.stats)
		fprintf(stderr, "plan: %zu configurations evaluated, %llu probes: %llu simulated, %llu reused from a smaller max batch\n",
			st.done - p->n_done, (unsigned long long)st.probes,
			(unsigned long long)(st.probes - st.reused), (unsigned long long)st.reused);
	if (rc)
		return fail_err(x, SS_EXIT_FAILURE, &err);
	/* the lowest failed configuration (those never started still have
	 * n_probes -1) */
	for (size_t i = 0; i < p->n; i++) {
		const struct plan_result *r = &p->res[i];

		if (p->done[i] || r->status != PLAN_FAILED || r->n_probes < 0)
			continue;
		return failf(x, SS_EXIT_FAILURE, "configuration %zu '%s': %s%s", i, p->cfg[i].key,
			     r->error[0] ? r->error : "failed",
			     p->db ? " (the finished configurations are in the database)" : "");
	}
	return SS_EXIT_OK;
}

/* --verify N: the best N configurations (the table's order) re-run on the
 * whole workload -- the trace before --num-requests / --duration cut it,
 * else the plan's own -- at the request rate the plan found for each
 * (closed loop: at its client scale).  Rank 0, after the search. */
static int verify(struct plan *p)
{
	struct pctx *x = p->x;
	struct ss_error err = { 0 };
	struct workload whole = p->wl;   /* shares p->wl's requests, never released */
	struct plan_eval pe = p->pe;
	size_t *order, want = (size_t)p->o.verify, n_order = p->n;
	bool progress = !p->o.quiet && !p->o.json && isatty(STDERR_FILENO);
	/* what the --rate table is made from */
	struct plan_report rep = {
		.pe = &p->pe, .cfg = p->cfg, .res = p->res, .n = p->n,
		.priced_by = (const char (*)[PLAN_PRICED_BY_LEN])p->priced_by,
		.roofline = p->roofline, .rate_rps = p->o.plan_rate,
		.objective = (enum plan_objective)p->o.objective,
		.mean_output_tokens = p->mean_output_tokens,
	};

	if (want == 0)
		return SS_EXIT_OK;
	if (p->wl.n_source > p->wl.n)
		whole.n = p->wl.n_source;
	pe.wl = &whole;
	pe.rate_rps = plan_workload_rate(&whole);
	p->verify_requests = whole.n;
	p->verify_rate_rps = pe.rate_rps;
	order = malloc((p->n ? p->n : 1) * sizeof(*order));
	p->verified = calloc(want, sizeof(*p->verified));
	if (!order || !p->verified) {
		free(order);
		return failf(x, SS_EXIT_FAILURE, "plan: out of memory");
	}
	if (p->o.plan_rate > 0) {
		/* --rate: the table's rows, best first by the objective */
		n_order = plan_rate_order(&rep, order);
	} else {
		plan_rank(p->cfg, p->res, p->n, &p->pe.search, order);
	}
	for (size_t k = 0; k < n_order && p->n_verified < want; k++) {
		const struct plan_result *r = &p->res[order[k]];
		const struct plan_probe *b = plan_result_best(r);
		struct plan_verified *v = &p->verified[p->n_verified];

		if (!b || r->status == PLAN_FAILED)
			continue;
		v->index = (uint32_t)order[k];
		v->predicted_attainment = b->attainment;
		v->scale = plan_verify_scale(&pe, b);
		if (p->o.plan_rate > 0) {
			/* at R itself (the rate the table answers for), against
			 * the plan's probe there (or the closest above) */
			struct plan_rate_figures rf;

			plan_rate_figures(&rep, order[k], &rf);
			if (rf.probe)
				v->predicted_attainment = rf.probe->attainment;
			v->scale = p->o.plan_rate / pe.rate_rps;
		}
		if (progress)
			fprintf(stderr, "\rplan: verifying %zu/%zu on the whole workload", p->n_verified + 1,
				want);
		if (plan_verify(&pe, &p->cfg[order[k]], v->scale, &v->probe, &err)) {
			size_t i = order[k];

			free(order);
			if (progress)
				fputc('\n', stderr);
			return failf(x, SS_EXIT_FAILURE, "--verify: configuration %zu '%s': %s", i,
				     p->cfg[i].key, err.msg);
		}
		v->meets = plan_meets(&pe.search, &v->probe);
		p->n_verified++;
	}
	if (progress && p->n_verified)
		fputc('\n', stderr);
	free(order);
	return SS_EXIT_OK;
}

/* plan.json, plan.csv and plots with --out; the table or JSON on stdout. */
static int publish(struct plan *p)
{
	const struct cli_config *o = &p->o;
	struct ss_error err = { 0 };
	struct plan_report rep = {
		.version = SERVESIM_VERSION, .fingerprint = p->fp_hex, .workload = p->wl.source,
		.n_requests = p->wl.n, .model = p->sp.model->name, .pe = &p->pe, .cfg = p->cfg,
		.res = p->res, .n = p->n, .resumed = p->n_done, .excluded = p->ex,
		.cost_axis = (enum plan_cost_axis)o->pareto_cost,
		.latency = (enum plan_latency)o->pareto_latency, .top = (int)o->top, .plot_top = 5,
		.slice = p->sliced ? &p->slice : NULL,
		.context = &p->context,
		.verified = p->verified, .n_verified = p->n_verified,
		.verify_requests = p->verify_requests, .verify_rate_rps = p->verify_rate_rps,
		.priced_by = (const char (*)[PLAN_PRICED_BY_LEN])p->priced_by, .roofline = p->roofline,
		.rate_rps = o->plan_rate, .objective = (enum plan_objective)o->objective,
		.mean_output_tokens = p->mean_output_tokens, .bisected = p->bisect,
		.command_line = p->command_line,
		.pricing_note = p->pricing_note[0] ? p->pricing_note : NULL,
		.like_for_like = o->like_for_like, .like_pricing = p->like_pricing,
		.default_res = p->default_res,
	};
	bool skipped = false;
	sigset_t mask;
	int rc = 0;

	/* a signal while the files are written acts once they are complete
	 * (docs/servesim.1.md "SIGNALS"): no temporary file is left */
	if (o->out) {
		cli_interrupt_defer(&mask);
		rc = plan_write_dir(o->out, &rep, &skipped, &err);
		cli_interrupt_resume(&mask);
	}
	if (rc)
		return fail_err(p->x, SS_EXIT_FAILURE, &err);
	if (skipped && !o->quiet)
		cli_errorf("warning: gnuplot not found; wrote the plot scripts (.gp) and data (.dat) to %s",
			   o->out);
	/* after the files, so that a plan that fails says one line */
	if (p->sliced && !o->quiet)
		cli_slice_check(o, &p->wl, false, &p->slice);
	if (o->json && print_json(&rep))
		return failf(p->x, SS_EXIT_FAILURE, "could not write the JSON plan");
	if (!o->json && !o->quiet) {
		plan_text(stdout, &rep);
		if (o->out)
			printf("\nplan written to %s/\n", o->out);
	}
	return SS_EXIT_OK;
}

/* parse and set up -> open the results -> evaluate -> publish.  Set-up
 * errors are agreed over the MPI ranks (report_setup); later ones are rank
 * 0's, and every rank leaves with rank 0's status. */
static int plan_main(struct pctx *x, int argc, char **argv)
{
	struct plan *p = calloc(1, sizeof(*p));
	int status;

	if (!p) {
		cli_errorf("plan: out of memory");
		return SS_EXIT_FAILURE;
	}
	p->x = x;
	p->out_lock = -1;
	catalog_init(&p->cat);
	workload_init(&p->wl);
	status = setup(p, argc, argv);
	if (status == SS_EXIT_OK)
		status = open_results(p);
	if (status != PLAN_FINISHED)
		status = report_setup(x, status);
	if (status == SS_EXIT_OK) {
		/* a slice unlike its trace: kept for plan.json, warned by
		 * publish() (rank 0) */
		if (x->rank == 0)
			p->sliced = cli_slice_check(&p->o, &p->wl, true, &p->slice);
		/* before the search: a target it cannot meet is known now, and
		 * options that cannot act on this workload */
		if (x->rank == 0) {
			char fx[4][CLI_NOTE_LEN];
			size_t n = cli_effect_notes(&p->o, &p->wl, -1, fx, 4);

			cli_context_note(&p->o, p->sp.model->name, &p->context, p->o.target);
			for (size_t k = 0; k < n && !p->o.quiet; k++)
				cli_errorf("%s", fx[k]);
		}
		status = evaluate(p);
		if (status == SS_EXIT_OK && p->like_switched)
			status = compare_default(p);
		if (status == SS_EXIT_OK && x->rank == 0)
			status = verify(p);
		if (status == SS_EXIT_OK && x->rank == 0)
			status = publish(p);
		if (status != SS_EXIT_OK)
			cli_errorf("%s", x->msg);
	}
	if (status == PLAN_FINISHED)
		status = SS_EXIT_OK;
	if (x->mpi) {
		/* every rank leaves with rank 0's status */
		int s0 = status;

		plan_mpi_bcast(&s0, sizeof(s0));
		if (x->rank != 0)
			status = s0;
	}
	plan_db_close(p->db);
	free(p->fp_desc);
	free(p->verified);
	free(p->scratch);
	free(p->family);
	free(p->priced_by);
	free(p->roofline);
	free(p->needs_default);
	free(p->default_res);
	free(p->command_line);
	free(p->pending);
	free(p->done);
	free(p->res);
	free(p->cfg);
	plan_cm_cache_release(&p->cms);
	plan_probe_cache_release(&p->probes);
	workload_release(&p->wl);
	catalog_release(&p->cat);
	ss_dir_unlock(p->out_lock);
	free(p);
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
