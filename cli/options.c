/* servesim — the option table of every command with options, its parser
 * and its help (cli/options.h says how they fit together).
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "engine-fit.h"
#include "engine-obs.h"
#include "options.h"
#include "store.h"
#include "params.h"
#include "plan.h"
#include "policy.h"
#include "serving.h"
#include "sstime.h"

#define CLI_SIM (CLI_RUN | CLI_LIVE)
#define CLI_ALL (CLI_RUN | CLI_LIVE | CLI_PLAN)
/* calibrate's subcommands that read or write a store */
#define CLI_CAL_STORES (CLI_FIT_ENGINE | CLI_CAL_RUN | CLI_CAL_CHECK | CLI_CAL_IMPORT | \
			CLI_CAL_LIST | CLI_CAL_EXPORT)
/* the commands that take -q and -v as options (calibrate list, export and
 * fit-engine have them taken out by cmd-calibrate.c) */
#define CLI_QV (CLI_ALL | CLI_CAL_RUN | CLI_CAL_CHECK | CLI_CAL_IMPORT | CLI_COMPARE | \
		CLI_WORKLOAD_FIT)

enum opt_type {
	T_FLAG,      /* int field set to 1 */
	T_STR,       /* const char * field: the argument, checked by its consumer */
	T_INT,       /* int64_t field in [imin, imax] */
	T_REAL,      /* double field in [dmin, dmax] ((dmin, dmax] when open_min) */
	T_SECONDS,   /* int64_t field, ns: seconds in [dmin, dmax], at least 1 ns */
	T_CHOICE,    /* int field: the index of the argument in choices[] */
	T_FN,        /* parse() checks and stores the argument */
	T_OPT_STR,   /* const char * field: "--NAME=ARG" gives ARG, a bare "--NAME" "-" */
	T_HELP,      /* --help */
};

/* An option's help for some commands when it says something else there. */
struct opt_help {
	unsigned cmds;               /* enum cli_cmd mask; 0 ends a list */
	const char *help;
};

struct opt {
	const char *name;            /* long name, without "--" */
	char short_name;             /* 0 = none */
	const char *arg;             /* NULL for flags */
	enum opt_type type;
	unsigned cmds;               /* enum cli_cmd mask */
	size_t off;                  /* field of struct cli_config */
	const char *help;
	const char *plan_help;       /* plan's help when it says more, else NULL */
	const char *fit_help;        /* calibrate fit-engine's, likewise */
	const struct opt_help *more; /* other commands' (HELPS()), else NULL */
	const char *expected;        /* "--NAME: expected EXPECTED, got 'ARG'" */
	bool show_max;               /* T_INT: a value over imax is told imax (expected has no range) */
	int64_t imin, imax;
	double dmin, dmax;
	bool open_min;
	const char *const *choices;  /* T_CHOICE, NULL-terminated */
	int (*parse)(struct cli_config *cfg, const char *arg, struct ss_error *err);
	/* 1 + the enum policy_kind whose registered names cli_help() puts in
	 * place of the "{}" of the help text, joined by " | ", so that a policy
	 * added to policies/registry.def shows in --help and the man page
	 * with no other edit; 0 = none. */
	int kind;
	/* Or a list of names from elsewhere for the "{}" (plan's policies). */
	const char *(*names)(void);
};

/* ---- values that need more than a range ----------------------------------- */

static int parse_slo(struct cli_config *cfg, const char *spec, struct ss_error *err)
{
	static const char *const keys[] = { "ttft_ms", "tpot_ms", "e2e_ms", "tbt_ms" };
	struct slo_config s = { 0 };
	double *v[] = { &s.ttft_ms, &s.tpot_ms, &s.e2e_ms, &s.tbt_ms };
	int64_t ns[4];
	struct ss_params p;
	char what[32];
	int rc;

	rc = ss_params_parse(&p, "--slo", spec, false, err);
	for (int i = 0; i < 4 && !rc; i++)
		rc = ss_params_double(&p, keys[i], 0, v[i], err);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	if (rc)
		return rc;
	if (p.name[0])
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--slo: expected ttft_ms=X,tpot_ms=Y[,e2e_ms=Z,tbt_ms=W], got '%s'", spec);
	for (int i = 0; i < 4; i++) {
		if (*v[i] < 0)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--slo: expected targets >= 0 ms, got '%s'", spec);
		/* every target must be a time the engine can hold */
		snprintf(what, sizeof(what), "--slo %s", keys[i]);
		rc = ss_time_parse_ms(*v[i], what, &ns[i], err);
		if (rc)
			return -EINVAL;
	}
	/* a plan searches for the rate that meets a target: it needs one */
	if (cfg->cmd == CLI_PLAN && !(ns[0] > 0 || ns[1] > 0 || ns[2] > 0 || ns[3] > 0))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--slo: expected at least one target > 0 ms, got '%s'", spec);
	cfg->slo = s;
	cfg->slo_ttft_ns = ns[0];
	return 0;
}

static int parse_semi_pd(struct cli_config *cfg, const char *spec, struct ss_error *err)
{
	struct ss_params p;
	double sm, kv;

	if (ss_params_parse(&p, "--semi-pd", spec, false, err) ||
	    ss_params_double(&p, "sm", 0.5, &sm, err) ||
	    ss_params_double(&p, "kv", 0.25, &kv, err) || ss_params_check_unused(&p, err))
		return -EINVAL;
	if (p.name[0] || !(sm > 0 && sm < 1) || !(kv > 0 && kv < 1))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--semi-pd: expected sm=F[,kv=G] with 0 < F, G < 1, got '%s'", spec);
	cfg->semi_pd_sm = sm;
	cfg->semi_pd_kv = kv;
	return 0;
}

/* An attainment: a fraction in (0, 1] or a percentage such as 90%. */
static int parse_target(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	char buf[64];
	size_t len = strlen(arg);
	bool pct = len > 1 && len < sizeof(buf) && arg[len - 1] == '%';
	double v;

	snprintf(buf, sizeof(buf), "%.*s", (int)(pct ? len - 1 : len), arg);
	if (!ss_parse_double(buf, &v) || (pct && (v /= 100, false)) || !(v > 0) || v > 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--target: expected an attainment in (0, 1] or a percentage such as 90%%, got '%s'",
				    arg);
	cfg->target = v;
	return 0;
}

/* plan's --weight-dtype / --kv-dtype list: every item a dtype (not fp4
 * for KV), none twice, at most 4. */
static int dtype_list(const char *opt, const char *arg, bool kv, struct ss_error *err)
{
	enum ss_dtype seen[4];
	int n = 0;

	for (const char *p = arg;; p++) {
		size_t len = strcspn(p, ",");
		char item[16];
		enum ss_dtype d;

		snprintf(item, sizeof(item), "%.*s", (int)(len < sizeof(item) ? len : sizeof(item) - 1), p);
		if (len >= sizeof(item) || ss_dtype_parse(item, &d) || (kv && d == SS_DTYPE_FP4))
			return ss_error_set(err, -EINVAL, NULL, 0, "%s: expected a list of %s, got '%.*s'",
					    opt, kv ? "bf16 and fp8" : "bf16, fp8 and fp4", (int)len, p);
		for (int i = 0; i < n; i++)
			if (seen[i] == d)
				return ss_error_set(err, -EINVAL, NULL, 0, "%s: '%s' appears twice", opt,
						    item);
		if (n == 4)
			return ss_error_set(err, -EINVAL, NULL, 0, "%s: at most 4 dtypes, got '%s'", opt,
					    arg);
		seen[n++] = d;
		p += len;
		if (!*p)
			return 0;
	}
}

/* --weight-dtype bf16|fp8|fp4, --kv-dtype bf16|fp8 (precision.h); plan
 * takes a comma-separated list, a search axis. */
static int parse_weight_dtype(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	enum ss_dtype d;

	cfg->weight_dtypes = NULL;
	if (cfg->cmd == CLI_PLAN && strchr(arg, ',')) {
		cfg->weight_dtype = 0;
		cfg->weight_dtypes = arg;
		return dtype_list("--weight-dtype", arg, false, err);
	}
	if (ss_dtype_parse(arg, &d))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--weight-dtype: expected bf16, fp8 or fp4, got '%s'", arg);
	cfg->weight_dtype = (int)d;
	return 0;
}

static int parse_kv_dtype(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	enum ss_dtype d;

	cfg->kv_dtypes = NULL;
	if (cfg->cmd == CLI_PLAN && strchr(arg, ',')) {
		cfg->kv_dtype = 0;
		cfg->kv_dtypes = arg;
		return dtype_list("--kv-dtype", arg, true, err);
	}
	if (ss_dtype_parse(arg, &d) || d == SS_DTYPE_FP4)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--kv-dtype: expected bf16 or fp8, got '%s'", arg);
	cfg->kv_dtype = (int)d;
	return 0;
}

/* Checked here (exit 2) with the parser the engine uses. */
static int parse_think_time(struct cli_config *cfg, const char *spec, struct ss_error *err)
{
	struct think_time tt;

	if (think_time_parse(spec, &tt, err))
		return -EINVAL;
	cfg->think_time = spec;
	return 0;
}

/* --rate-scale X: as a REAL option, and remembered as given, so that run's
 * --rate (which sets the scale from a target rate) can refuse it even at
 * its default value 1. */
static int parse_rate_scale(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	double v;

	if (!ss_parse_double(arg, &v) || !(v >= 1e-6 && v <= 1e6))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate-scale: expected a factor in [1e-6, 1e6], got '%s'", arg);
	cfg->rate_scale = v;
	cfg->rate_scale_given = true;
	return 0;
}

/* --price GPU=USD[,GPU=USD...]: repeatable, so each occurrence is kept;
 * the syntax and numbers are checked here, the GPU names against the
 * catalog by cli_apply_prices. */
static int parse_price(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	const char *p = arg;

	if (cfg->n_prices == CLI_MAX_PRICES)
		return ss_error_set(err, -EINVAL, NULL, 0, "--price: given more than %d times",
				    CLI_MAX_PRICES);
	for (;;) {
		size_t len = strcspn(p, ","), name = strcspn(p, "=");
		char num[64];
		double v;

		if (name == 0 || name >= len || len - name - 1 >= sizeof(num))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--price: expected GPU=USD_PER_HOUR[,GPU=USD_PER_HOUR...], got '%s'",
					    arg);
		snprintf(num, sizeof(num), "%.*s", (int)(len - name - 1), p + name + 1);
		/* the catalog's range for cost_per_hour: 0 (unknown) or 1e-6..1e6 */
		if (!ss_parse_double(num, &v) || !(v == 0 || (v >= 1e-6 && v <= 1e6)))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--price: expected a price in USD per GPU-hour, 0 or 1e-6..1e6, for '%.*s', got '%s'",
					    (int)name, p, num);
		if (!p[len])
			break;
		p += len + 1;
	}
	cfg->prices[cfg->n_prices++] = arg;
	return 0;
}

/* calibrate fit-engine's own values */

/* --select KEY=VALUE, repeatable: every one must hold. */
/* --stack's items after the name: each KEY=VALUE a number-valued key of
 * stack_profile_fields in its range, set on s.  -EINVAL (err: the item
 * and what was expected) otherwise. */
static int stack_apply(struct stack_profile *s, const char *spec, bool named,
		       struct ss_error *err)
{
	char buf[512], keys[256] = "";
	char *save = NULL, *item;
	bool first = true;
	int rc = 0;

	for (size_t i = 0; i < stack_profile_n_fields; i++)
		if (stack_profile_fields[i].kind == CF_NONNEG)
			snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys), "%s%s",
				 keys[0] ? ", " : "", stack_profile_fields[i].key);
	if ((size_t)snprintf(buf, sizeof(buf), "%s", spec) >= sizeof(buf))
		return ss_error_set(err, -EINVAL, NULL, 0, "--stack: longer than %zu characters",
				    sizeof(buf) - 1);
	for (item = strtok_r(buf, ",", &save); item && !rc; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (first && named) {
			first = false;
			continue;   /* the name, looked up by the caller */
		}
		first = false;
		if (!eq)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--stack: '%s': expected a stack name first (`servesim list stacks`), then KEY=VALUE items (KEY one of %s)",
					    item, keys);
		*eq = '\0';
		rc = catalog_field_set_text(stack_profile_fields, stack_profile_n_fields, s, item,
					    eq + 1, "--stack", err);
		if (rc == -ENOENT)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--stack: unknown key '%s' (expected one of %s)", item, keys);
	}
	if (!rc && first)
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "--stack: empty, expected NAME, KEY=VALUE,... or NAME,KEY=VALUE,...");
	return rc;
}

/* Whether --stack's first item is a name (has no '='). */
static bool stack_named(const char *spec)
{
	size_t n = strcspn(spec, ",");

	return n > 0 && !memchr(spec, '=', n);
}

/* Checked here (exit 2): the items' shape, keys and values; the name is
 * looked up once the catalog is loaded (cli_resolve_stack). */
static int parse_stack(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	struct stack_profile scratch = { 0 };
	int rc = stack_apply(&scratch, arg, stack_named(arg), err);

	if (!rc)
		cfg->stack = arg;
	return rc;
}

static int parse_select(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	static const char *const keys[] = { "engine=", "model=", "gpu=", "tp=", "mode=", "precision=" };
	bool known = false;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && !known; i++)
		known = !strncmp(arg, keys[i], strlen(keys[i]));
	if (cfg->n_select == CLI_MAX_SELECT || !known)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--select: expected engine=, model=, gpu=, tp=, mode= or precision=VALUE (at most %d), got '%s'",
				    CLI_MAX_SELECT, arg);
	cfg->select[cfg->n_select++] = arg;
	return 0;
}

static int parse_result_format(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	enum serving_format f;

	if (serving_format_from_name(arg, &f))
		return ss_error_set(err, -EINVAL, NULL, 0, "--format: unknown result format '%s'", arg);
	cfg->result_format = (int)f;
	return 0;
}

static int parse_group_by(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	enum efit_group_by g;

	if (efit_group_by_from_name(arg, &g))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--group-by: expected run, file, model, gpu, tp, model-tp, isl or source, got '%s'",
				    arg);
	cfg->group_by = (int)g;
	return 0;
}

/* "C" or "C-K": a closed-loop row's C clients, or K fewer. */
static int parse_closed_max_seqs(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	int64_t k = 0;

	if (arg[0] != 'C' || (arg[1] && (arg[1] != '-' || !ss_parse_int64(arg + 2, &k) ||
					 k < 0 || k > 1000000)))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--closed-max-seqs: expected C or C-K (K an integer 0..1000000), got '%s'",
				    arg);
	cfg->closed_seqs_set = 1;
	cfg->closed_seqs_short = k;
	return 0;
}

/* "C+ISL+K": a closed-loop row's clients plus its prompt plus K. */
static int parse_closed_max_tokens(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	int64_t k;

	if (strncmp(arg, "C+ISL+", 6) || !ss_parse_int64(arg + 6, &k) || k < 0 || k > 1000000)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--closed-max-tokens: expected C+ISL+K (K an integer 0..1000000), got '%s'",
				    arg);
	cfg->closed_tokens_set = 1;
	cfg->closed_tokens_extra = k;
	return 0;
}

/* compare --label NAME, repeatable: each kept, in order, in a growing
 * array the caller frees. */
static int parse_label(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	const char **p = realloc(cfg->labels, ((size_t)cfg->n_labels + 1) * sizeof(*p));

	if (!p)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	p[cfg->n_labels++] = arg;
	cfg->labels = p;
	return 0;
}

/* sweep --sweep KEY=VALUES: kept in order; sweep checks each axis */
static int parse_sweep(struct cli_config *cfg, const char *arg, struct ss_error *err)
{
	if (cfg->n_sweeps == CLI_MAX_SWEEPS)
		return ss_error_set(err, -EINVAL, NULL, 0, "--sweep: at most %d axes", CLI_MAX_SWEEPS);
	cfg->sweeps[cfg->n_sweeps++] = arg;
	return 0;
}

static const char *const closed_starts[] = { "spread", "burst", "drained", NULL };

static const char *const pareto_costs[] = { "auto", "gpus", "usd", NULL };       /* enum plan_cost_axis */
static const char *const pareto_latencies[] = { "ttft", "tpot", "e2e", NULL };  /* enum plan_latency */
static const char *const attainment_modes[] = { "all", "each", NULL };   /* plan_search.each_slo */
static const char *const overlong_modes[] = { "reject", "truncate", NULL };   /* cli_config.overlong */
static const char *const objectives[] = { "cost", "gpus", "energy", "ttft_p99", NULL }; /* enum plan_objective */

/* ---- the table ------------------------------------------------------------ */

#define F(field) offsetof(struct cli_config, field)
/* Each ends with .type, so that the positional initializers after it go
 * on with .cmds, .off, .help and .plan_help. */
#define INT(lo, hi, exp) .imin = (lo), .imax = (hi), .expected = (exp), .type = T_INT
#define REAL(lo, hi, exp) .dmin = (lo), .dmax = (hi), .expected = (exp), .type = T_REAL
#define REAL_GT(lo, hi, exp) .dmin = (lo), .dmax = (hi), .expected = (exp), .open_min = true, \
	.type = T_REAL
#define STR .type = T_STR
#define FLAG .type = T_FLAG
#define KIND(k) .kind = 1 + (k)
/* other commands' help: HELPS({ CLI_X, "..." }, ...) */
#define HELPS(...) .more = (const struct opt_help[]){ __VA_ARGS__, { 0, NULL } }
/* bounds two options share: calibrate run's --warmup and --repeats are
 * loop's --cal-warmup and --cal-repeats */
#define WARMUP_RUNS INT(0, 1000, "an integer in 0..1000")
#define TIMED_RUNS INT(1, 10000, "an integer in 1..10000")

static const struct opt opts[] = {
	/* the workload */
	{ "trace", 0, "FILE", STR, CLI_ALL, F(trace),
	  "replay a trace or a serving benchmark result (see `servesim list formats`)" },
	{ "format", 0, "NAME", STR, CLI_ALL | CLI_WORKLOAD_FIT, F(format),
	  "trace format instead of detecting it (auto)",
	  HELPS({ CLI_WORKLOAD_FIT, "trace format instead of detecting it (see `servesim list formats`)" }) },
	{ "arrival", 0, "SPEC", STR, CLI_ALL, F(arrival),
	  "poisson:rate=R | gamma:rate=R,cv=C | mmpp:rates=R1,R2,...,switch_s=S1,S2,... | "
	  "onoff:rate=R,on_s=A,off_s=B (requests/s, s)" },
	{ "rate-curve", 0, "FILE", STR, CLI_ALL, F(rate_curve),
	  "arrivals from a rate over time: CSV time_s,rate rows, linear between rows, repeating "
	  "(a non-homogeneous Poisson process; instead of --arrival)" },
	{ "sessions", 0, "SPEC", STR, CLI_SIM, F(sessions),
	  "multi-turn sessions / agent call chains: rate=R (sessions/s),turns=T (mean, geometric; "
	  "or fixed:N),think_s=S (mean, exponential; or think=fixed:S|none)"
	  "[,fanout=F][,max_turns=N]; "
	  "with a session --trace: think=net|gap|none[,remote_tps=T][,max_turns=N]. "
	  "--num-requests and --duration then count sessions (default 100)" },
	{ "workload", 0, "MODEL", STR, CLI_ALL, F(workload),
	  "generate from a workload model (JSON, `servesim workload fit`; instead of --trace, "
	  "--arrival, --lengths)" },
	{ "prompt-scale", 0, "X", REAL(1e-3, 1e3, "a factor in [0.001, 1000]"), CLI_ALL,
	  F(prompt_scale), "--workload: multiply prompt lengths by X (default 1)" },
	{ "output-scale", 0, "X", REAL(1e-3, 1e3, "a factor in [0.001, 1000]"), CLI_ALL,
	  F(output_scale), "--workload: multiply output lengths by X (default 1)" },
	{ "lengths", 0, "SPEC", STR, CLI_ALL, F(lengths),
	  "fixed:prompt=P,output=O | uniform:... | lognormal:... | geometric:... | empirical:FILE" },
	{ "num-requests", 0, "N", INT(1, WL_MAX_REQUESTS, "a positive integer"), CLI_ALL, F(num_requests),
	  "keep the first N requests", "keep the first N requests (every probe replays the same N)",
	  .show_max = true },
	{ "duration", 0, "S", .type = T_SECONDS, .dmin = 1e-9, .dmax = 1e9,
	  .expected = "seconds in [1e-9, 1e9]", .cmds = CLI_ALL, .off = F(duration_ns),
	  .help = "keep requests arriving in the first S seconds (closed loop: send for S seconds)",
	  .plan_help = "keep requests arriving in the first S seconds (before any scaling; "
		       "closed loop: send for S seconds)" },
	/* below 1e-6 a trace of an hour would arrive over centuries (int64 ns
	 * hold 292 years): refused here, not by the trace reader */
	{ "rate-scale", 0, "X", .type = T_FN, .parse = parse_rate_scale, .cmds = CLI_ALL,
	  .off = F(rate_scale),
	  "multiply the request rate by X, 1e-6..1e6 (divides arrival times; default 1)",
	  "scale the workload's rate by X, 1e-6..1e6, first: scale 1 of the plan (default 1)" },
	/* plan's --rate (below) is the planner's target; run's rescales a
	 * trace: the table holds one entry per command for a name */
	{ "rate", 0, "R", REAL_GT(0, 1e9, "a rate in req/s, > 0"), CLI_SIM, F(trace_rate),
	  "replay the trace with its times rescaled to a mean of R req/s (instead of --rate-scale)" },
	{ "concurrency", 0, "N", INT(1, 1000000000, "an integer in 1..1000000000"), CLI_ALL, F(concurrency),
	  "closed loop: N clients, each sending its next request when its last finishes (all start at 0)",
	  "closed loop: N clients at scale 1; a probe at scale x runs round(N x) clients" },
	{ "think-time", 0, "SPEC", .type = T_FN, .parse = parse_think_time, .cmds = CLI_ALL,
	  .off = F(think_time),
	  .help = "closed loop: pause before a client's next request: none (default) | constant:ms=T | "
		  "exponential:mean_ms=T | gamma:mean_ms=T,cv=C" },
	{ "ramp-up", 0, "S", .type = T_SECONDS, .dmin = 1e-9, .dmax = 1e9,
	  .expected = "seconds in [1e-9, 1e9]", .cmds = CLI_ALL, .off = F(ramp_ns),
	  .help = "closed loop: start the clients evenly over S seconds (client k of N at k S / N; default all at 0)" },
	{ "tenants", 0, "SPEC", STR, CLI_ALL, F(tenants),
	  "assign tenants: N (uniform) or weights W0,W1,... (default: the trace's)" },
	{ "seed", 0, "N", INT(0, INT64_MAX, "a non-negative integer"), CLI_ALL, F(seed),
	  "seed for every random stream (default 0)" },
	/* the model and the hardware */
	{ "model", 0, "NAME", STR, CLI_ALL | CLI_FIT_ENGINE | CLI_FIT_SOURCE | CLI_CAL_RUN, F(model), "model from the catalog (default llama-3.1-8b)",
	  .fit_help = "catalog model for runs that do not name one (or to override)" },
	{ "gpu", 0, "NAME", STR, CLI_SIM | CLI_FIT_ENGINE | CLI_FIT_SOURCE, F(gpu), "GPU type from the catalog (default h100-sxm)",
	  .fit_help = "catalog GPU for runs that do not name one (or to override)" },
	{ "tp", 0, "N", INT(1, 64, "an integer in 1..64"), CLI_SIM | CLI_FIT_ENGINE | CLI_FIT_SOURCE, F(tp),
	  "tensor-parallel GPUs per instance (default 1)",
	  .fit_help = "tensor parallelism for runs that do not say (or to override)" },
	{ "ep", 0, "E", INT(1, 64, "an integer in 1..64"), CLI_SIM, F(ep),
	  "MoE: spread the routed experts over E of the tp GPUs (E divides tp; default 1)" },
	{ "dp-attention", 0, "D", INT(1, 64, "an integer in 1..64"), CLI_SIM, F(dp_attention),
	  "MoE: split each instance's tp GPUs into D attention ranks of tp/D GPUs, each with its own batch and KV cache, stepping together (default 1)" },
	{ "pp", 0, "N", INT(1, 64, "an integer in 1..64"), CLI_SIM, F(pp),
	  "pipeline-parallel stages per instance, tp GPUs each (default 1)" },
	{ "instances", 0, "N", INT(1, 100000, "an integer in 1..100000"), CLI_SIM, F(instances),
	  "identical instances behind the router (default 1)" },
	/* plan's list axes (analysis/plan-axes.def), in their order */
#define OPT_LAYOUT(opt, cli, nm, help) \
	{ opt, 0, "LIST", STR, CLI_PLAN, F(cli), help, .names = nm },
#define OPT_BATCH(opt, cli, nm, help)
#define OPT_OUTER(opt, cli, nm, help)
#define PLAN_AXIS(kind, list, cfg, opt, cli, dflt, lo, hi, group, engine, check, names, help) \
	OPT_##group(opt, cli, names, help)
#include "plan-axes.def"
#undef OPT_LAYOUT
#undef OPT_BATCH
#undef OPT_OUTER
	{ "max-gpus", 0, "N", INT(1, 100000, "an integer in 1..100000"), CLI_PLAN, F(max_gpus),
	  "largest cluster in GPUs (default 8, the --budget GPUs, or what --instances needs)" },
	{ "modes", 0, "LIST", STR, CLI_PLAN, F(modes),
	  "colocated and/or disaggregated (default colocated,disaggregated; colocated with --lora)" },
	{ "pd-ratios", 0, "LIST", STR, CLI_PLAN, F(pd_ratios),
	  "disaggregated prefill:decode ratios, e.g. 1:1,1:3 (default every split)" },
	{ "mixed-pools", 0, NULL, FLAG, CLI_PLAN, F(mixed_pools),
	  "disaggregated: also prefill and decode pools of different GPU types or tp" },
	{ "policy", 0, "SPEC", STR, CLI_SIM | CLI_FIT_ENGINE | CLI_FIT_SOURCE, F(policy),
	  "batch policy NAME[:key=value,...]: {} (default vllm)", KIND(POLICY_BATCH),
	  .fit_help = "batch policy of open and closed runs: {} (default: the profile's, else vllm; static batches use static)" },
#define OPT_LAYOUT(opt, cli, nm, help)
#define OPT_BATCH(opt, cli, nm, help) \
	{ opt, 0, "LIST", STR, CLI_PLAN, F(cli), help, .names = nm },
#define OPT_OUTER OPT_BATCH
#include "plan-axes.def"
#undef OPT_LAYOUT
#undef OPT_BATCH
#undef OPT_OUTER
#undef PLAN_AXIS
	{ "router", 0, "SPEC", STR, CLI_ALL, F(router),
	  "router over (prefill) instances: {} (default rr)", KIND(POLICY_ROUTER) },
	/* disaggregation */
	{ "prefill-instances", 0, "N", INT(1, 100000, "an integer in 1..100000"), CLI_SIM | CLI_FIT_ENGINE | CLI_FIT_SOURCE,
	  F(pools[ENGINE_POOL_PREFILL].inst), "disaggregate: N prefill instances (with --decode-instances)",
	  .fit_help = "disaggregate every run: N prefill instances (with --decode-instances)" },
	{ "decode-instances", 0, "M", INT(1, 100000, "an integer in 1..100000"), CLI_SIM | CLI_FIT_ENGINE | CLI_FIT_SOURCE,
	  F(pools[ENGINE_POOL_DECODE].inst), "disaggregate: M decode instances (with --prefill-instances)",
	  .fit_help = "disaggregate every run: M decode instances (with --prefill-instances)" },
	/* --prefill-OPT and --decode-OPT of each field of sim/engine-pool.def
	 * that has an option */
#define POOL_OPT_INT(k, pool, name, opt, arg, fit, layout, pre, post) \
	{ pool "-" opt, 0, arg, INT(1, 64, "an integer in 1..64"), \
	  CLI_SIM | ((fit) ? CLI_FIT_ENGINE | CLI_FIT_SOURCE : 0), F(pools[k].name), pre pool post " (default --" opt ")" },
#define POOL_OPT_GPU(k, pool, name, opt, arg, fit, layout, pre, post) \
	{ pool "-" opt, 0, arg, STR, CLI_SIM | ((fit) ? CLI_FIT_ENGINE | CLI_FIT_SOURCE : 0), F(pools[k].name), \
	  pre pool post " (default --" opt ")" },
#define POOL_OPT_STR(...)
#define ENGINE_POOL_FIELD(kind, type, ...) \
	POOL_OPT_##kind(ENGINE_POOL_PREFILL, "prefill", __VA_ARGS__) \
	POOL_OPT_##kind(ENGINE_POOL_DECODE, "decode", __VA_ARGS__)
#include "engine-pool.def"
#undef ENGINE_POOL_FIELD
#undef POOL_OPT_INT
#undef POOL_OPT_GPU
#undef POOL_OPT_STR
	{ "pairing", 0, "SPEC", STR, CLI_ALL, F(pairing),
	  "router that picks the decode instance: {} (default lor)", KIND(POLICY_ROUTER) },
	{ "kv-overlap", 0, NULL, FLAG, CLI_ALL, F(kv_overlap),
	  "overlap the KV transfer with the prefill, layer by layer" },
	{ "semi-pd", 0, "SPEC", .type = T_FN, .parse = parse_semi_pd, .cmds = CLI_SIM, .off = F(semi_pd_sm),
	  .help = "sm=F[,kv=G]: split each GPU into a prefill and a decode instance (approximation, docs/disaggregation.md)" },
	{ "gpus-per-node", 0, "N", INT(1, 1024, "an integer in 1..1024"), CLI_SIM | CLI_FIT_ENGINE | CLI_FIT_SOURCE, F(gpus_per_node),
	  "GPUs per node for KV links: NVLink within, RDMA across (default 8)" },
	/* scheduling */
	{ "order", 0, "SPEC", STR, CLI_ALL, F(order),
	  "waiting-queue order: {} (default fcfs)", KIND(POLICY_ORDER) },
	{ "preemption", 0, "SPEC", STR, CLI_ALL, F(preemption), "recompute (default) | swap[:host_gb=G,pcie_gbps=B]" },
	{ "victim", 0, "NAME", STR, CLI_SIM, F(victim), "preempt first: {} (default newest)", KIND(POLICY_VICTIM) },
	{ "prefix-cache", 0, "SPEC", STR, CLI_ALL, F(prefix_cache),
	  "off (default) | on | blocks=N (cache at most N unreferenced blocks)" },
	{ "kv-remote", 0, "SPEC", STR, CLI_RUN, F(kv_remote),
	  "gb=G[,bw_gbps=B,latency_us=L]: a KV store of G GB shared by all instances (needs --prefix-cache)" },
	{ "kv-offload", 0, "SPEC", STR, CLI_SIM, F(kv_offload),
	  "host_gb=G[,bw_gbps=B]: keep KV the GPU evicts in G GB of host memory per GPU, "
	  "back over PCIe (B GB/s per GPU, default the catalog's); turns on --prefix-cache "
	  "and swap preemption (default off)" },
	{ "spec", 0, "SPEC", STR, CLI_RUN | CLI_LIVE | CLI_PLAN, F(spec),
	  "speculative decoding: off (default) | METHOD:k=K[,tree=N][,draft=MODEL]"
	  "[,accept=NAME|alpha=A[,decay=D]][,accept_tenant=T:NAME/...][,max_batch=N], METHOD one of draft, eagle, eagle3, "
	  "mtp, medusa, ngram; plan: a search axis, items separated by ';', or auto "
	  "(off and k = 1..4) (docs/speculation.md)" },
	{ "lora", 0, "SPEC", STR, CLI_RUN | CLI_LIVE | CLI_PLAN, F(lora),
	  "multi-LoRA serving: off (default) | adapters=N,rank=R|mix=R:W/R:W...[,popularity=zipf:S|uniform]"
	  "[,max_loras=N][,max_cpu_loras=N][,targets=qkvo|all][,disk_gbps=B][,paging=slots|unified][,rank_order=drawn|cycle]; a trace's adapter "
	  "column names each request's; live: synthetic adapters, real loads and GEMMs; plan: "
	  "every configuration serves them, colocated only (docs/lora.md)" },
	{ "admission", 0, "SPEC", STR, CLI_SIM, F(admission),
	  "admission control: {} (default none)", KIND(POLICY_ADMISSION) },
	{ "predictor", 0, "SPEC", STR, CLI_SIM, F(predictor),
	  "output-length predictor: none | oracle | noisy:sigma=S (default none; oracle for --order sjf and --policy vllm:admission=no_evict)" },
	/* costs and memory */
	{ "cost-model", 0, "SPEC", STR, CLI_ALL | CLI_FIT_ENGINE, F(cost_model),
	  "auto (default: table where calibrated, else roofline) | table | fit | roofline | constant:..." },
	{ "calibration", 0, "FILE", STR, CLI_ALL | CLI_FIT_ENGINE | CLI_LOOP, F(calibration),
	  "a calibration store to prefer over the shipped one (table/fit cost models)",
	  HELPS({ CLI_LOOP, "use this calibration store (measured with the same --model, --width-div and "
			    "--layers): no step 1" }) },
	{ "model-config", 0, "FILE", STR, CLI_ALL | CLI_FIT_ENGINE | CLI_CAL_RUN, F(model_config),
	  "a Hugging Face config.json: the model it describes (named by --model, else by the file)" },
	{ "model-catalog", 0, "FILE", STR, CLI_ALL | CLI_FIT_ENGINE, F(model_catalog),
	  "extra models JSON (adds to or overrides data/models.json)" },
	{ "gpu-catalog", 0, "FILE", STR, CLI_ALL | CLI_FIT_ENGINE, F(gpu_catalog),
	  "extra GPUs JSON: adds GPUs, or overrides some fields of one in data/gpus.json (docs/catalogs.md)" },
	{ "price", 0, "GPU=USD", .type = T_FN, .parse = parse_price, .cmds = CLI_ALL, .off = F(prices),
	  .help = "set a GPU's price in USD per GPU-hour, over the catalog's and --gpu-catalog's; repeatable or a list (h100-sxm=2.5,a100-80gb-sxm=1.2)" },
	{ "engine", 0, "NAME", STR, CLI_RUN | CLI_PLAN | CLI_FIT_ENGINE, F(engine),
	  "serving engine profile: one of `servesim list engines`, or none (kernels only, as kernel-level simulators) (default " CLI_DEFAULT_ENGINE ")",
	  .fit_help = "profile to start from: one of `servesim list engines`, or none (default " CLI_DEFAULT_ENGINE ")" },
	{ "engine-catalog", 0, "FILE", STR, CLI_RUN | CLI_PLAN | CLI_FIT_ENGINE, F(engine_catalog),
	  "extra engine profiles JSON (adds to or overrides data/engines.json)" },
	{ "engine-store", 0, "FILE", STR, CLI_RUN | CLI_PLAN | CLI_FIT_ENGINE, F(engine_store),
	  "engine profiles kept in a calibration store by `calibrate fit-engine --store` (add to or override)" },
	{ "interval-catalog", 0, "FILE", STR, CLI_RUN | CLI_PLAN, F(interval_catalog),
	  "extra interval bounds JSON (adds to or overrides data/intervals.json; docs/metrics.md \"Intervals\")" },
	{ "stack", 0, "SPEC", .type = T_FN, .parse = parse_stack, .cmds = CLI_RUN | CLI_PLAN | CLI_FIT_ENGINE | CLI_FIT_SOURCE,
	  .off = F(stack),
	  .help = "serving stack between the clients and the engine (docs/engines.md, \"The serving stack\"): NAME (one of `servesim list stacks`), KEY=VALUE,... over the engine's default stack, or NAME,KEY=VALUE,... (KEY: rtt_ms, gateway_ms, frontend_ms, tokenize_us_per_token, detok_us_per_token, cv) (default: the engine profile's stack; none with --engine none)",
	  .fit_help = "serving stack the runs were measured behind, as run's --stack (default: the engine profile's stack)" },
	{ "stack-catalog", 0, "FILE", STR, CLI_RUN | CLI_PLAN | CLI_FIT_ENGINE, F(stack_catalog),
	  "extra serving stacks JSON (adds to or overrides data/stacks.json)" },
	{ "block-size", 0, "N", INT(1, 4096, "an integer in 1..4096"), CLI_ALL | CLI_FIT_ENGINE | CLI_FIT_SOURCE, F(block_size),
	  "KV block size in tokens (default: the engine profile's, else 16)" },
	{ "gpu-memory-utilization", 0, "F", REAL_GT(0, 1, "a fraction in (0, 1]"), CLI_ALL | CLI_FIT_ENGINE | CLI_FIT_SOURCE, F(gpu_mem_util),
	  "size the KV cache by vLLM's rule: fraction F of GPU memory for weights, activations and KV (default: the engine profile's rule, else 0.9)" },
	{ "kv-free-fraction", 0, "F", REAL_GT(0, 1, "a fraction in (0, 1]"), CLI_ALL | CLI_FIT_ENGINE | CLI_FIT_SOURCE, F(kv_free_fraction),
	  "size the KV cache by TensorRT-LLM's rule: fraction F of the memory left after weights and activations (not with --gpu-memory-utilization)" },
	{ "weight-dtype", 0, "T", .type = T_FN, .parse = parse_weight_dtype, .cmds = CLI_ALL | CLI_FIT_ENGINE | CLI_FIT_SOURCE,
	  .off = F(weight_dtype),
	  .fit_help = "weights of runs without a precision: bf16 (default), fp8 or fp4 (a run's precision column wins)",
	  .help = "linear-layer weights: bf16 (default) | fp8 | fp4 (weight-only without fp4 tensor cores); embeddings and LM head stay bf16; plan: a list, e.g. bf16,fp8" },
	{ "kv-dtype", 0, "T", .type = T_FN, .parse = parse_kv_dtype, .cmds = CLI_ALL | CLI_FIT_ENGINE | CLI_FIT_SOURCE, .off = F(kv_dtype),
	  .fit_help = "KV cache of every run: bf16 (default) or fp8 (silicon rows do not record it)",
	  .help = "KV cache: bf16 (default) | fp8 (half the bytes per token); plan: a list, e.g. bf16,fp8" },
	{ "max-context", 0, "N", INT(2, 1 << 30, "an integer in 2..1073741824"), CLI_ALL, F(max_context),
	  "the context a request may fill, prompt + output, tokens: a model override, as rope scaling or vLLM's --max-model-len (default: the model's; docs/workloads.md)" },
	{ "overlong", 0, "MODE", .type = T_CHOICE, .choices = overlong_modes,
	  .expected = "reject or truncate", .cmds = CLI_ALL, .off = F(overlong),
	  .help = "requests longer than the context: reject (default: refused, as vLLM does) | truncate (the prompt keeps its last tokens, as vLLM's truncate_prompt_tokens)" },
	{ "kv-ref-tokens", 0, "N", INT(1, 1 << 30, "a positive integer"), CLI_SIM, F(kv_ref_tokens),
	  "local-attention models: size the KV pool for requests of N tokens (default: the model's context; docs/kv-cache.md)" },
	{ "kv-blocks", 0, "N", INT(1, 1 << 30, "a positive integer"), CLI_SIM, F(kv_blocks),
	  "force the KV pool size per instance (default: derived from memory)" },
	{ "power-cap", 0, "W", REAL_GT(0, 1e5, "watts > 0"), CLI_SIM, F(power_cap_w),
	  "per-GPU power cap; steps above it run at a lower clock (docs/energy.md)" },
	{ "gpu-clock", 0, "F", REAL(0.2, 1, "a fraction in [0.2, 1]"), CLI_SIM, F(clock_frac),
	  "lock the SM clock at fraction F of its maximum, 0.2..1" },
	/* the targets and the plan's search */
	{ "slo", 0, "SPEC", .type = T_FN, .parse = parse_slo, .cmds = CLI_ALL, .off = F(slo),
	  .help = "ttft_ms=X,tpot_ms=Y[,e2e_ms=Z,tbt_ms=W] (default ttft_ms=2000,tpot_ms=100; tbt_ms: longest token gap)" },
	{ "target", 0, "F", .type = T_FN, .parse = parse_target, .cmds = CLI_PLAN, .off = F(target),
	  .help = "SLO attainment to meet, 0..1 or a percentage such as 90% (default 0.9)" },
	{ "attainment", 0, "MODE", .type = T_CHOICE, .choices = attainment_modes,
	  .expected = "all or each", .cmds = CLI_PLAN, .off = F(attainment),
	  .help = "all: the share meeting every SLO (default); each: every SLO's own share (DistServe's simulator)" },
	{ "budget", 0, "SPEC", STR, CLI_PLAN, F(budget), "gpus=N and/or usd_per_hour=X: leave out larger configurations" },
	{ "tolerance", 0, "F", REAL(0.001, 1, "a fraction in [0.001, 1]"), CLI_PLAN, F(tolerance),
	  "relative precision of each maximum rate (default 0.05)" },
	{ "max-probes", 0, "N", INT(2, 24, "an integer in 2..24"), CLI_PLAN, F(max_probes),
	  "simulations per configuration, 2..24 (default 12)" },
	{ "min-span", 0, "F", REAL(0, 1000, "a factor in [0, 1000]"), CLI_PLAN, F(min_span),
	  "a rate counts only if its arrivals span >= F x the mean E2E latency (default 4; 0 = off)" },
	{ "conservative", 0, NULL, FLAG, CLI_PLAN, F(conservative),
	  "count SLO attainment on the pessimistic end of the latency interval (docs/metrics.md \"Intervals\"): every SLO divided by its metric's hi bound; the table marks the verdicts this changes" },
	{ "like-for-like", 0, NULL, FLAG, CLI_PLAN, F(like_for_like),
	  "price every GPU of the plan the same way: from its family's measured tables (scaled by the roofline) where every GPU has some, else by the roofline; say whether the winner changes against the default pricing (needs --cost-model auto; docs/plan.md)" },
	{ "verify", 0, "N", INT(0, 100, "an integer in 0..100"), CLI_PLAN, F(verify),
	  "re-run the best N configurations on the whole workload (no --num-requests/--duration cut) at their maximum rate, and report their attainment there (0 = no; docs/plan.md)" },
	/* sweep (its other options are run's) */
	{ "sweep", 0, "KEY=VALUES", .type = T_FN, .parse = parse_sweep, .cmds = CLI_SWEEP,
	  .off = F(sweeps),
	  .help = "an axis: KEY a `servesim run` option, VALUES V1,V2,... | V1;V2;... | START:STOP:STEP | on,off" },
	{ "seeds", 0, "N", INT(1, 10000, "an integer in 1..10000"), CLI_SWEEP, F(seeds),
	  "run every point with seeds S..S+N-1, N in 1..10000 (default 1)" },
	/* S..S+N-1 must fit, N up to 10000 */
	{ "seed", 0, "S", INT(0, INT64_MAX - 10000, "a non-negative integer"), CLI_SWEEP, F(seed),
	  "the first seed (default 0)" },
	{ "jobs", 'j', "N", INT(1, 1024, "an integer in 1..1024"), CLI_PLAN | CLI_SWEEP, F(jobs),
	  "run N configurations at a time in worker processes (default 1)",
	  HELPS({ CLI_SWEEP, "run N runs at a time in worker processes, 1..1024 (default 1)" }) },
	/* calibrate fit-engine: its results, the fit and what it writes */
	{ "free", 0, "KEY[:LO:HI],...", STR, CLI_FIT_ENGINE, F(fit_free),
	  "parameters to fit, with bounds: engine profile keys or serving-stack terms (frontend_ms, ...) (default sched_us:1:1e5,frontend_ms:0.01:1e4, api_in_ms for a profile with the legacy api_* keys; a key's bounds within its catalog range)" },
	{ "sources", 0, "FILE", STR, CLI_FIT_ENGINE, F(fit_sources),
	  "fit jointly on the deployments FILE lists instead of RESULTs (JSON: each source's name, result files and options; docs/engines.md): engine terms shared, serving-stack terms one per source, each source held out in turn" },
	{ "format", 0, "NAME", .type = T_FN, .parse = parse_result_format, .cmds = CLI_FIT_ENGINE | CLI_FIT_SOURCE,
	  .off = F(result_format),
	  .help = "result format: auto (default)" SERVING_FORMAT_NAMES },
	{ "select", 0, "KEY=VALUE", .type = T_FN, .parse = parse_select, .cmds = CLI_FIT_ENGINE | CLI_FIT_SOURCE,
	  .off = F(select),
	  .help = "keep runs whose engine, model, gpu, tp, mode or precision is VALUE (repeatable: all must hold)" },
	{ "group-by", 0, "UNIT", .type = T_FN, .parse = parse_group_by, .cmds = CLI_FIT_ENGINE,
	  .off = F(group_by), .help = "leave-out unit: run, file (default), model, gpu, tp, model-tp, isl, source (--sources' entries: its default)" },
	{ "no-holdout", 0, NULL, FLAG, CLI_FIT_ENGINE, F(no_holdout), "skip the leave-group-out refits" },
	{ "reported", 0, NULL, FLAG, CLI_FIT_ENGINE, F(reported),
	  "with a fit, also predict and show the figures a source gives that are not fitted (--no-fit always shows them)" },
	{ "closed-start", 0, "spread|burst|drained", .type = T_CHOICE, .choices = closed_starts,
	  .expected = "spread, burst or drained", .cmds = CLI_FIT_ENGINE | CLI_FIT_SOURCE, .off = F(closed_start),
	  .help = "closed-loop table rows: clients out of phase (default), all starting at once, or drained (the measured phase as perf_analyzer runs it: its first round all at once on an idle engine, the other nine out of phase)" },
	{ "closed-max-seqs", 0, "C|C-K", .type = T_FN, .parse = parse_closed_max_seqs,
	  .cmds = CLI_FIT_ENGINE | CLI_FIT_SOURCE, .off = F(closed_seqs_short),
	  .help = "closed-loop runs of C clients: the server admits at most C (or C - K) requests (a vllm policy's max_num_seqs)" },
	{ "closed-max-tokens", 0, "C+ISL+K", .type = T_FN, .parse = parse_closed_max_tokens,
	  .cmds = CLI_FIT_ENGINE | CLI_FIT_SOURCE, .off = F(closed_tokens_extra),
	  .help = "closed-loop table rows: the step token budget is C + ISL + K (a vllm policy's max_num_batched_tokens, replacing the policy's; TensorRT-LLM's benchmark launch: K = 1500)" },
	{ "no-fit", 0, NULL, FLAG, CLI_FIT_ENGINE, F(no_fit),
	  "predict every run with the --engine profile as it is (no fit, no holdout)" },
	{ "jobs", 0, "N", INT(1, EFIT_MAX_JOBS, "an integer in 1..64"), CLI_FIT_ENGINE, F(fit_jobs),
	  "simulate N runs at once on threads (default 1; results do not depend on N)" },
	{ "name", 0, "NAME", STR, CLI_FIT_ENGINE, F(fit_name),
	  "name of the fitted profile (default: the starting one's)" },
	{ "out", 0, "FILE", STR, CLI_FIT_ENGINE | CLI_CAL_EXPORT | CLI_WORKLOAD_FIT, F(out_file),
	  "write the fitted profile as an engines JSON file",
	  HELPS({ CLI_CAL_EXPORT, "write the CSV to FILE (default: standard output)" },
		{ CLI_WORKLOAD_FIT, "write the model (JSON) to FILE" }) },
	{ "store", 0, "FILE", STR, CLI_CAL_STORES, F(store),
	  "keep the fitted profile in a calibration store (made if missing; run --engine-store reads it)",
	  HELPS({ CLI_CAL_RUN, "calibration store to write (default ./calibration.db)" },
		{ CLI_CAL_CHECK, "store to check (default: the shipped data/calibration.db)" },
		{ CLI_CAL_IMPORT, "store to add to (default ./calibration.db, created when missing)" },
		{ CLI_CAL_LIST | CLI_CAL_EXPORT, "store to read (default: the shipped data/calibration.db)" }) },
	{ "json", 0, "[=FILE]", .type = T_OPT_STR, .cmds = CLI_FIT_ENGINE | CLI_CAL_CHECK | CLI_COMPARE,
	  .off = F(json_to),
	  .help = "print the report (parameters, runs, errors) as JSON on stdout instead of the table; =FILE: write it to FILE as well as the table",
	  HELPS({ CLI_CAL_CHECK, "print {gpu: {operator: {mape_pct, p90_ape_pct, n, ...}}} on stdout instead of the table; =FILE: also write it to FILE" },
		{ CLI_COMPARE, "print the comparison as JSON on stdout instead of the table; =FILE: also write it to FILE (with the table on stdout)" }) },
	/* calibrate run, check and import */
	{ "device", 0, "NAME", STR, CLI_CAL_RUN | CLI_CAL_CHECK | CLI_CAL_IMPORT, F(device),
	  "device name in the store (default: cpu for the cpu backend; the catalog GPU name, e.g. h100-sxm, for cuda)",
	  HELPS({ CLI_CAL_CHECK, "only this GPU (catalog name, e.g. h100-sxm)" },
		{ CLI_CAL_IMPORT, "catalog GPU name for every row (default: from the source)" }) },
	{ "warmup", 0, "N", WARMUP_RUNS, CLI_CAL_RUN, F(warmup),
	  "untimed runs per point (default 2)" },
	{ "repeats", 0, "N", TIMED_RUNS, CLI_CAL_RUN, F(repeats),
	  "timed runs per point (default 5)" },
	{ "max-tokens", 0, "N", INT(16, 1 << 20, "an integer in 16..1048576"), CLI_CAL_RUN | CLI_LOOP,
	  F(max_tokens), "largest token count of GEMMs and chunks (default 2048)",
	  HELPS({ CLI_LOOP, "calibration: largest GEMM token count (default 512)" }) },
	{ "max-kv", 0, "N", INT(16, 1 << 22, "an integer in 16..4194304"), CLI_CAL_RUN | CLI_LOOP,
	  F(max_kv), "largest KV length of attention (default 4096)",
	  HELPS({ CLI_LOOP, "calibration: largest KV length (default 1024)" }) },
	/* loop (its other options are live's) */
	{ "repeats", 0, "R", INT(1, 100, "an integer in 1..100"), CLI_LOOP, F(live_repeats),
	  "live runs, 1..100 (default 3; each takes the trace's wall time)" },
	{ "noise-threshold", 0, "PCT", REAL(0, 1000, "a percentage in [0, 1000]"), CLI_LOOP,
	  F(noise_pct),
	  "warn when the live runs differ by PCT% or more on a headline figure, 0..1000 (default 10)" },
	{ "cal-repeats", 0, "N", TIMED_RUNS, CLI_LOOP, F(repeats),
	  "calibration: timed runs per point (default 5)" },
	{ "cal-warmup", 0, "N", WARMUP_RUNS, CLI_LOOP, F(warmup),
	  "calibration: untimed runs per point (default 2)" },
	{ "catalog-out", 0, "DIR", STR, CLI_CAL_RUN, F(catalog_out),
	  "also write DIR/models.json (the swept model's scaled shape, named MODEL-wDIV-lLAYERS) and "
	  "DIR/gpus.json (a \"cpu\" entry) so `servesim run` can simulate exactly what was swept, and "
	  "DIR/engines.json: the engine profile servesim-BACKEND, host terms fitted to the whole steps "
	  "measured (per step, per token, per emitted row) over the table model's operators" },
	{ "catalog-only", 0, NULL, FLAG, CLI_CAL_RUN, F(catalog_only),
	  "with --catalog-out: write the catalogs from the store as it is (measured with the same "
	  "--model, --width-div and --layers), timing nothing" },
	{ "folds", 0, "K", INT(2, 100, "an integer 2..100"), CLI_CAL_CHECK, F(folds),
	  "hold-out folds, 2..100 (default 5)" },
	{ "cross-source", 0, NULL, FLAG, CLI_CAL_CHECK, F(cross_source),
	  "predict Vidur's measurements from the other sources instead (Llama-2-7B and -70B at TP 1, 2, 4)" },
	{ "gemm-classes", 0, NULL, FLAG, CLI_CAL_CHECK, F(gemm_classes),
	  "leave one GEMM shape class out instead: (n, k) by aspect (wide, square, narrow) and weight "
	  "size (s, m, l); median and p90 error per class (docs/validation.md, AMD Instinct)" },
	{ "cross-gpu", 0, "FROM:TO", STR, CLI_CAL_CHECK, F(cross_gpu),
	  "predict GPU TO's GEMM measurements from GPU FROM's instead, scaled by the roofline as "
	  "--cost-model scaled scales them; median and p90 error per shape class, and the roofline "
	  "alone's (docs/validation.md, AMD Instinct)" },
	{ "kind", 0, "NAME", STR, CLI_CAL_IMPORT, F(kind),
	  "importer to use instead of detecting it from the header" },
	{ "dtype", 0, "LIST", STR, CLI_CAL_IMPORT, F(dtype_filter),
	  "keep rows whose dtype is in LIST, e.g. bf16,fp16 (rows without a dtype pass)" },
	{ "window", 0, "N", INT(0, 1 << 30, "an integer in 0..1073741824"), CLI_CAL_IMPORT, F(window),
	  "aiconfigurator attention: keep window_size N only (0 = full attention)" },
	{ "ar-backend", 0, "NAME", STR, CLI_CAL_IMPORT, F(ar_backend),
	  "aiconfigurator custom all-reduce: keep this backend only (vllm_graph, vllm_eager)" },
	{ "per-octave", 0, "N", INT(0, 1024, "an integer in 0..1024"), CLI_CAL_IMPORT, F(per_octave),
	  "Vidur grids: keep N points per octave of num_tokens and message size" },
	{ "compact", 0, NULL, FLAG, CLI_CAL_IMPORT, F(compact),
	  "the shipped store's filters: --dtype bf16,fp16 --window 0 --ar-backend vllm_graph --per-octave 8" },
	/* compare */
	{ "label", 0, "NAME", .type = T_FN, .parse = parse_label, .cmds = CLI_COMPARE, .off = F(labels),
	  .help = "name the runs, once per run in order" },
	{ "reference", 0, "R", STR, CLI_COMPARE, F(reference),
	  "the reference run: its name or its position (1..N); none for no reference" },
	{ "plot", 0, "DIR", STR, CLI_COMPARE, F(out), "the same as --out" },
	/* live */
	{ "backend", 0, "NAME", STR, CLI_LIVE | CLI_CAL_RUN, F(backend),
	  "live: kernel backend, cpu | cuda (default cpu)",
	  HELPS({ CLI_CAL_RUN, "cpu | cuda (default cpu)" }) },
	{ "threads", 0, "N", INT(1, 1024, "an integer in 1..1024"), CLI_LIVE | CLI_CAL_RUN, F(threads),
	  "live: CPU threads for the kernels (default 1)", HELPS({ CLI_CAL_RUN, "CPU threads (default 1)" }) },
	{ "width-div", 0, "N", INT(1, 1024, "an integer in 1..1024"), CLI_LIVE | CLI_CAL_RUN, F(width_div),
	  "live: divide the model's widths by N (default 8 on cpu, 1 on cuda)",
	  HELPS({ CLI_CAL_RUN, "divide the model's widths by N (default 8 on cpu, 1 on cuda)" }) },
	{ "layers", 0, "N", INT(1, 1024, "an integer in 1..1024"), CLI_LIVE | CLI_CAL_RUN, F(layers),
	  "live: run N decoder layers (default 4 on cpu, all on cuda)",
	  HELPS({ CLI_CAL_RUN, "layers of the synthetic model for host overhead (default 4 on cpu)" }) },
	{ "graphs", 0, "NAME", STR, CLI_LIVE, F(graphs),
	  "live: on cuda, run decode-only steps as CUDA graphs at the batch sizes engine profile NAME captures, or none (default " CLI_DEFAULT_ENGINE ")" },
	/* outputs */
	{ "out", 0, "DIR", STR, CLI_ALL | CLI_COMPARE | CLI_SWEEP | CLI_LOOP, F(out),
	  "write summary.json, summary.txt, requests.csv, results.db, plots and report.html to DIR",
	  "write plan.json, plan.csv, plan.db, plots and report.html to DIR",
	  HELPS({ CLI_COMPARE, "write CDFs of TTFT, TPOT and E2E of all runs (PNG through gnuplot) and report.html" },
		{ CLI_SWEEP, "write sweep.csv, sweep.db and report.html to DIR; the same command again resumes" },
		{ CLI_LOOP, "where everything goes (required)" }) },
	{ "keep-runs", 0, NULL, FLAG, CLI_SWEEP, F(keep_runs),
	  "with --out, also write each run's own results to DIR/runs/pPOINT-sSEED" },
	{ "sample-interval", 0, "S", .type = T_SECONDS, .dmin = 1e-9, .dmax = 1e6,
	  .expected = "seconds in [1e-9, 1e6]", .cmds = CLI_SIM, .off = F(sample_interval_ns),
	  .help = "time-series sampling period in seconds with --out (default 1)" },
	{ "db", 0, "FILE", STR, CLI_PLAN, F(db), "the plan database (default DIR/plan.db with --out): resume from it" },
	{ "top", 0, "N", INT(1, 100000, "an integer >= 1"), CLI_PLAN, F(top),
	  "configurations in the printed table (default 10)" },
	{ "pareto-cost", 0, "AXIS", .type = T_CHOICE, .choices = pareto_costs, .expected = "auto, gpus or usd",
	  .cmds = CLI_PLAN, .off = F(pareto_cost),
	  .help = "frontier cost: auto (USD/h when every GPU has a price) | gpus | usd" },
	{ "pareto-latency", 0, "NAME", .type = T_CHOICE, .choices = pareto_latencies,
	  .expected = "ttft, tpot or e2e", .cmds = CLI_PLAN, .off = F(pareto_latency),
	  .help = "frontier latency at scale 1: ttft (default) | tpot | e2e, p99" },
	{ "rate", 0, "R", REAL_GT(0, 1e9, "a rate in req/s, > 0"), CLI_PLAN, F(plan_rate),
	  "list only deployments sustaining R req/s within the SLOs (open-loop workloads), best first" },
	{ "objective", 0, "NAME", .type = T_CHOICE, .choices = objectives,
	  .expected = "cost, gpus, energy or ttft_p99", .cmds = CLI_PLAN, .off = F(objective),
	  .help = "order of the --rate table: cost (default; GPUs when a price is missing) | gpus | energy | ttft_p99" },
	{ "dry-run", 0, NULL, FLAG, CLI_PLAN, F(dry_run), "print the configurations the plan would evaluate, and stop" },
	{ "stats", 0, NULL, FLAG, CLI_PLAN, F(stats),
	  "print on stderr how many probes were simulated and how many reused (even with --quiet)" },
	{ "json", 0, NULL, FLAG, CLI_ALL | CLI_WORKLOAD_FIT | CLI_SWEEP | CLI_LOOP, F(json),
	  "print summary.json on stdout instead of the text summary",
	  "print plan.json on stdout instead of the table",
	  HELPS({ CLI_WORKLOAD_FIT, "print the model (JSON) on stdout instead of the summary" },
		{ CLI_SWEEP, "print the aggregates as JSON on stdout instead of the table" },
		{ CLI_LOOP, "print DIR/loop.json on stdout instead of the verdict" }) },
	/* sweep and loop: -q taken out before parsing (cli_take_quiet_verbose) */
	{ "quiet", 'q', NULL, FLAG, CLI_QV | CLI_SWEEP | CLI_LOOP, F(quiet),
	  "print nothing on success (no summary, no progress)",
	  HELPS({ CLI_SWEEP, "print nothing on success (no table, no progress)" },
		{ CLI_LOOP, "print nothing on success but warnings (no progress)" },
		{ CLI_CAL_CHECK, "print nothing on success (JSON only where asked)" },
		{ CLI_COMPARE, "print nothing on success (the table or JSON only where asked)" },
		{ CLI_CAL_IMPORT | CLI_WORKLOAD_FIT, "print nothing on success" }) },
	{ "verbose", 'v', NULL, FLAG, CLI_QV, F(verbose),
	  "say on stderr what was resolved: data directory, catalogs, engine profile, cost model per GPU",
	  HELPS({ CLI_CAL_RUN, "say on stderr what was resolved: data directory, catalogs" },
		{ CLI_CAL_CHECK, "say on stderr which store was read" },
		{ CLI_CAL_IMPORT, "print what each file gave on stderr (default: only on a terminal)" },
		{ CLI_COMPARE | CLI_WORKLOAD_FIT, "say on stderr what was read" }) },
	{ "help", 0, NULL, .type = T_HELP, .cmds = ~(unsigned)CLI_WORKLOAD_FIT, .help = "show this help" },
	/* workload fit has always taken -h too */
	{ "help", 'h', NULL, .type = T_HELP, .cmds = CLI_WORKLOAD_FIT, .help = "show this help" },
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

_Static_assert(EFIT_MAX_JOBS == 64, "fit-engine's --jobs says 1..64");

/* ---- commands ------------------------------------------------------------- */

const struct cli_command cli_cmd_run = {
	.name = "run", .id = CLI_RUN,
	.description =
		"Simulate LLM serving of a workload and report TTFT, TPOT, ITL, E2E, throughput,\n"
		"SLO attainment, goodput and energy.  With no workload option, replays the shipped\n"
		"sample of the Azure LLM 2023 conversation trace (2,000 requests).\n",
};

const struct cli_command cli_cmd_live = {
	.name = "live", .id = CLI_LIVE,
	.description =
		"Run a scenario live: arrivals are released at their wall-clock times and every\n"
		"step the policy forms runs on a kernel backend (a synthetic transformer of the\n"
		"model's shapes, random weights), with the same engine and policies as `run`.\n"
		"Writes the same results, marked live.  One instance on one device.\n",
};

/* cli_cmd_plan is in cmd-plan.c: its epilogue says whether MPI is built in. */

/* The default --model; compared by address to tell whether --model was given. */
const char cli_default_model[] = "llama-3.1-8b";

static void set_defaults(struct cli_config *c, unsigned cmd)
{
	struct engine_config d;

	/* the engine's own defaults, written once (engine_config_defaults) */
	engine_config_defaults(&d);
	memset(c, 0, sizeof(*c));
	c->cmd = cmd;
	c->rate_scale = 1.0;
	c->model = cli_default_model;
	c->gpu = "h100-sxm";
	c->tp = d.tp;
	c->instances = d.n_instances;
	c->policy = d.policy;
	c->router = d.router;
	c->order = d.order;
	c->victim = d.victim;
	c->preemption = d.preemption;
	c->prefix_cache = d.prefix_cache;
	c->admission = d.admission;
	c->cost_model = d.cost_model;
	/* run and plan model a serving engine (docs/engines.md): vLLM V1, the
	 * engine most deployments run; live runs the real loop, which is its
	 * own engine, so it takes no profile. */
	c->engine = cmd == CLI_LIVE ? "none" : CLI_DEFAULT_ENGINE;
	c->block_size = d.block_size;   /* 0: the profile's, else 16 */
	c->gpu_mem_util = d.gpu_mem_util;   /* 0: the profile's rule */
	c->sample_interval_ns = 1000000000;
	/* MLPerf Inference server scenario targets for Llama-3.1-8B */
	c->slo = (struct slo_config){ .ttft_ms = 2000, .tpot_ms = 100 };
	c->slo_ttft_ns = 2000000000;
	/* plan */
#define PLAN_AXIS(kind, list, cfg, opt, cli, dflt, lo, hi, group, engine, check, names, help) \
	c->cli = dflt;
#include "plan-axes.def"
#undef PLAN_AXIS
	c->modes = NULL;   /* colocated,disaggregated; colocated with --lora (cmd-plan.c) */
	c->target = 0.9;
	c->tolerance = 0.05;
	c->max_probes = 12;
	c->min_span = 4;
	c->jobs = 1;
	c->top = 10;
	/* calibrate fit-engine: a model, GPU, TP or policy given overrides
	 * what each run says, so none is given by default */
	if (cmd == CLI_FIT_ENGINE || cmd == CLI_FIT_SOURCE) {
		c->model = c->gpu = c->policy = NULL;
		c->tp = 0;
	}
	c->fit_jobs = 1;
	c->group_by = -1;   /* file, or source with --sources (fit-engine decides) */
	c->result_format = SERVING_AUTO;
	/* calibrate run, check, import */
	c->warmup = 2;
	c->repeats = 5;
	c->max_tokens = 2048;
	c->max_kv = 4096;
	c->folds = 5;
	c->window = c->per_octave = -1;
	/* sweep */
	c->seeds = 1;
	/* loop: a small calibration (its own --max-tokens and --max-kv) */
	c->live_repeats = 3;
	c->noise_pct = 10;
	if (cmd == CLI_LOOP) {
		c->max_tokens = 512;
		c->max_kv = 1024;
	}
}

static const char *opt_help(const struct opt *o, unsigned cmd)
{
	for (const struct opt_help *h = o->more; h && h->cmds; h++)
		if (h->cmds & cmd)
			return h->help;
	if (cmd == CLI_FIT_ENGINE && o->fit_help)
		return o->fit_help;
	return cmd == CLI_PLAN && o->plan_help ? o->plan_help : o->help;
}

/* The help text of o for cmd and its newline, with o's policy names in
 * place of "{}". */
static void help_text(FILE *f, const struct opt *o, unsigned cmd)
{
	const char *h = opt_help(o, cmd), *at = o->kind || o->names ? strstr(h, "{}") : NULL;
	char names[512];

	assert(!(o->kind || o->names) || at);   /* the entry says where its names go */
	if (!at) {
		fprintf(f, "%s\n", h);
		return;
	}
	if (o->names)
		snprintf(names, sizeof(names), "%s", o->names());
	else
		policy_names((enum policy_kind)(o->kind - 1), " | ", names, sizeof(names));
	fprintf(f, "%.*s%s%s\n", (int)(at - h), h, names, at + 2);
}

void cli_help(FILE *f, const struct cli_command *cmd, bool man)
{
	bool has_kind = false;

	if (cmd->usage)
		fprintf(f, "usage: servesim %s\n\n%s\noptions:\n", cmd->usage, cmd->description);
	else
		fprintf(f, "usage: servesim %s [options]%s%s\n\n%s\noptions:\n", cmd->name,
			cmd->operands ? " " : "", cmd->operands ? cmd->operands : "",
			cmd->description);
	for (size_t i = 0; i < N_OPTS; i++) {
		const struct opt *o = &opts[i];
		char left[64];

		if (!(o->cmds & cmd->id))
			continue;
		has_kind |= o->kind != 0;
		/* an optional argument reads "--json[=FILE]" */
		const char *sep = o->arg && o->type != T_OPT_STR ? " " : "";

		if (o->short_name)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", o->short_name, o->name,
				 sep, o->arg ? o->arg : "");
		else
			snprintf(left, sizeof(left), "--%s%s%s", o->name, sep, o->arg ? o->arg : "");
		fprintf(f, "  %-32s ", left);
		help_text(f, o, cmd->id);
	}
	fputc('\n', f);
	if (has_kind)
		fprintf(f, "policies and their parameters (NAME:key=value,...): `servesim list policies`\n\n");
	if (cmd->more)
		fputs(cmd->more, f);
	if (!man && cmd->epilogue)
		cmd->epilogue(f);
	fprintf(f, "exit status: 0 success, 1 bad input or %s, 2 bad command line%s",
		cmd->failure ? cmd->failure : "failed run", cmd->exit_more ? cmd->exit_more : "\n");
	if (cmd->id == CLI_RUN || cmd->id == CLI_LIVE)
		fprintf(f, "  130 / 143: stopped by SIGINT / SIGTERM, the results so far written, marked interrupted\n");
}

/* cmd's option of long name NAME, or (name NULL) of short name c; NULL
 * where cmd has none. */
static const struct opt *find_opt(const struct cli_command *cmd, const char *name, char c)
{
	for (size_t i = 0; i < N_OPTS; i++)
		if ((opts[i].cmds & cmd->id) &&
		    (name ? !strcmp(opts[i].name, name) : c && opts[i].short_name == c))
			return &opts[i];
	return NULL;
}

int cli_option_arity(const struct cli_command *cmd, const char *name)
{
	const struct opt *o = find_opt(cmd, name, 0);

	return o ? o->arg != NULL : -1;
}

/* ---- parsing -------------------------------------------------------------- */

/* as: the option as the command line spelt it ("-j"), or NULL: "--NAME" */
static int bad_value(const struct opt *o, const char *as, const char *expected, const char *arg,
		     struct ss_error *err)
{
	return ss_error_set(err, -EINVAL, NULL, 0, "%s%s: expected %s, got '%s'", as ? "" : "--",
			    as ? as : o->name, expected, arg);
}

/* Check arg against o and store it in cfg; as: how the command line spelt
 * o, for the message (NULL: "--NAME"). */
static int set_value(const struct opt *o, const char *as, struct cli_config *cfg, const char *arg,
		     struct ss_error *err)
{
	char *field = (char *)cfg + o->off;
	int64_t iv;
	double dv;

	switch (o->type) {
	case T_FLAG:
		*(int *)field = 1;
		return 0;
	case T_STR:
		*(const char **)field = arg;
		return 0;
	case T_INT:
		if (!ss_parse_int64(arg, &iv) && o->show_max && arg[0] &&
		    strspn(arg, "0123456789") == strlen(arg))
			iv = INT64_MAX;   /* digits beyond int64: over imax */
		else if (!ss_parse_int64(arg, &iv) || iv < o->imin)
			return bad_value(o, as, o->expected, arg, err);
		if (iv > o->imax && o->show_max) {
			char exp[96];

			snprintf(exp, sizeof(exp), "%s up to %lld", o->expected, (long long)o->imax);
			return bad_value(o, as, exp, arg, err);
		}
		if (iv > o->imax)
			return bad_value(o, as, o->expected, arg, err);
		*(int64_t *)field = iv;
		return 0;
	case T_REAL:
		if (!ss_parse_double(arg, &dv) || !(o->open_min ? dv > o->dmin : dv >= o->dmin) ||
		    !(dv <= o->dmax))
			return bad_value(o, as, o->expected, arg, err);
		*(double *)field = dv;
		return 0;
	case T_SECONDS:
		/* a duration the engine can hold, and not below its 1 ns tick */
		if (!ss_parse_double(arg, &dv) || !(dv >= o->dmin && dv <= o->dmax) ||
		    !ss_time_from_s(dv, &iv) || iv < 1)
			return bad_value(o, as, o->expected, arg, err);
		*(int64_t *)field = iv;
		return 0;
	case T_CHOICE:
		for (int k = 0; o->choices[k]; k++)
			if (!strcmp(arg, o->choices[k])) {
				*(int *)field = k;
				return 0;
			}
		return bad_value(o, as, o->expected, arg, err);
	case T_FN:
		return o->parse(cfg, arg, err) ? -EINVAL : 0;
	case T_OPT_STR:
		*(const char **)field = arg ? arg : "-";
		return 0;
	case T_HELP:
		break;
	}
	return 0;
}

/* The name of a long option token, "--NAME[=VALUE]", in buf ("" for anything
 * else). */
static void long_name(const char *tok, char *buf, size_t size)
{
	buf[0] = '\0';
	if (tok && tok[0] == '-' && tok[1] == '-')
		snprintf(buf, size, "%.*s", (int)strcspn(tok + 2, "="), tok + 2);
}

/* "unknown option 'TOK'", with the options of cmd that NAME abbreviates as
 * suggestions.  getopt_long would take a unique prefix for its option
 * (`run --gpus 8` for --gpus-per-node 8); with options this many and this
 * alike, a silent guess is a trap, so an option must be spelt whole. */
static int unknown_option(const struct cli_command *cmd, const char *tok, const char *name,
			  struct ss_error *err)
{
	/* a command's options and those it hands through */
	unsigned ids = cmd->id | (cmd->through ? cmd->through->id : 0);
	char hint[256] = "";
	size_t len = strlen(name), n = 0, k = 0;

	for (size_t i = 0; len && i < N_OPTS && k < 4; i++) {
		size_t j = 0;

		if (!(opts[i].cmds & ids) || strncmp(opts[i].name, name, len))
			continue;
		/* a name both commands have (sweep's --seed and run's) once */
		while (j < i && (!(opts[j].cmds & ids) || strcmp(opts[j].name, opts[i].name)))
			j++;
		if (j < i)
			continue;
		if (k++ == 3) {
			n += (size_t)snprintf(hint + n, n < sizeof(hint) ? sizeof(hint) - n : 0, ", ...");
			break;
		}
		n += (size_t)snprintf(hint + n, n < sizeof(hint) ? sizeof(hint) - n : 0, "%s--%s",
				      k > 1 ? ", " : "", opts[i].name);
	}
	if (k)
		return ss_error_set(err, -EINVAL, NULL, 0, "unknown option '--%s' (did you mean %s?)",
				    name, hint);
	if (cmd->through)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "unknown option '%s' (see `servesim %s --help` and `servesim %s --help`)",
				    tok, cmd->name, cmd->through->name);
	return ss_error_set(err, -EINVAL, NULL, 0, "unknown option '%s' (see `servesim %s --help`)",
			    tok, cmd->name);
}

/* cli_parse() of a command with cmd->through (sweep, loop): its own options
 * into cfg, every option of cmd->through kept with its value in
 * cfg->through.  A scan of its own rather than getopt_long, which would
 * permute argv and could not tell which tokens are values of options it
 * does not know. */
static int parse_through(const struct cli_command *cmd, int argc, char **argv,
			 struct cli_config *cfg, bool show_help, struct ss_error *err)
{
	cfg->through = calloc((size_t)argc + 1, sizeof(*cfg->through));
	if (!cfg->through)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (int i = 1; i < argc; i++) {
		const char *tok = argv[i], *val = NULL;
		const struct opt *o, *other;
		char name[128], as[132];

		if (tok[0] != '-' || !tok[1] || !strcmp(tok, "--"))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "unexpected argument '%s' (see `servesim %s --help`)", tok,
					    cmd->name);
		if (tok[1] == '-') {
			long_name(tok, name, sizeof(name));
			val = tok[2 + strlen(name)] == '=' ? tok + 3 + strlen(name) : NULL;
			snprintf(as, sizeof(as), "--%s", name);
			o = find_opt(cmd, name, 0);
			other = o ? NULL : find_opt(cmd->through, name, 0);
		} else {
			/* -c, or -cVALUE */
			snprintf(name, sizeof(name), "%c", tok[1]);
			val = tok[2] ? tok + 2 : NULL;
			snprintf(as, sizeof(as), "-%c", tok[1]);
			o = find_opt(cmd, NULL, tok[1]);
			other = o ? NULL : find_opt(cmd->through, NULL, tok[1]);
		}
		if (!o && !other)
			return unknown_option(cmd, tok, tok[1] == '-' ? name : "", err);
		if ((o ? o : other)->arg && !val && i + 1 >= argc)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: expected a value (see `servesim %s --help`)", as,
					    cmd->name);
		if (!(o ? o : other)->arg && val)
			return ss_error_set(err, -EINVAL, NULL, 0, "%s: takes no value, got '%s'", as,
					    val);
		if (other) {
			cfg->through[cfg->n_through++] = (struct cli_arg){
				tok, other->arg && !val ? argv[++i] : NULL };
			continue;
		}
		if (o->type == T_HELP) {
			if (show_help)
				cli_help(stdout, cmd, false);
			return CLI_HELP_SHOWN;
		}
		if (o->arg && !val)
			val = argv[++i];
		if (set_value(o, as, cfg, val, err))
			return -EINVAL;
	}
	cfg->operand0 = argc;
	return 0;
}

int cli_parse(const struct cli_command *cmd, int argc, char **argv, struct cli_config *cfg,
	      bool show_help, struct ss_error *err)
{
	struct option longopts[N_OPTS + 1];
	char shorts[2 * N_OPTS + 2] = ":";
	size_t n = 0, ns = 1;
	int c, idx;

	set_defaults(cfg, cmd->id);
	if (cmd->through)
		return parse_through(cmd, argc, argv, cfg, show_help, err);
	memset(longopts, 0, sizeof(longopts));
	for (size_t i = 0; i < N_OPTS; i++) {
		if (!(opts[i].cmds & cmd->id))
			continue;
		/* a name means one option per command (tp: a number for run, a
		 * list for plan) */
		for (size_t j = 0; j < n; j++)
			assert(strcmp(longopts[j].name, opts[i].name) != 0);
		/* val: 256 + the entry, above every short option */
		longopts[n++] = (struct option){ opts[i].name,
						 opts[i].type == T_OPT_STR ? optional_argument :
						 opts[i].arg ? required_argument : no_argument, NULL,
						 256 + (int)i };
		if (opts[i].short_name) {
			shorts[ns++] = opts[i].short_name;
			if (opts[i].arg)
				shorts[ns++] = ':';
		}
	}
	shorts[ns] = '\0';
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, shorts, longopts, &idx)) != -1) {
		const struct opt *o = NULL;
		/* the token getopt_long read: "--name value" ends with the value */
		const char *tok = argv[optind - 1];
		char name[128];

		if (c >= 256) {
			o = &opts[c - 256];
			if (o->arg && o->type != T_OPT_STR && optarg == tok && optind >= 2)
				tok = argv[optind - 2];
			long_name(tok, name, sizeof(name));
			if (strcmp(name, o->name))
				return unknown_option(cmd, tok, name, err);
		} else if (c != ':' && c != '?') {
			for (size_t i = 0; i < N_OPTS && !o; i++)
				if (opts[i].short_name == c && (opts[i].cmds & cmd->id))
					o = &opts[i];
		}
		if (c == ':')
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: expected a value (see `servesim %s --help`)",
					    argv[optind - 1], cmd->name);
		if (!o) {
			long_name(argv[optind - 1], name, sizeof(name));
			return unknown_option(cmd, argv[optind - 1], name, err);
		}
		if (o->type == T_HELP) {
			if (show_help)
				cli_help(stdout, cmd, false);
			return CLI_HELP_SHOWN;
		}
		if (set_value(o, NULL, cfg, optarg, err))
			return -EINVAL;
	}
	cfg->operand0 = optind;
	if (optind < argc && !cmd->operands)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "unexpected argument '%s' (see `servesim %s --help`)", argv[optind],
				    cmd->name);
	if (cfg->quiet && cfg->verbose)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "-q and -v: expected one of them (--quiet prints nothing, --verbose more)");
	/* calibrate list, export and fit-engine have -v taken out before
	 * (cli_take_quiet_verbose): theirs stands */
	if (cmd->id & CLI_QV)
		cli_verbose = cfg->verbose;
	if (cfg->gpu_mem_util > 0 && cfg->kv_free_fraction > 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--gpu-memory-utilization and --kv-free-fraction: expected one of them (each is a rule for the whole KV cache)");
	return 0;
}

/* ---- from options to the libraries' configurations ------------------------ */

int cli_workload_spec(struct cli_config *cfg, struct workload_spec *ws, struct ss_error *err)
{
	memset(ws, 0, sizeof(*ws));
	if ((cfg->prompt_scale || cfg->output_scale) && !cfg->workload)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s needs --workload MODEL (it stretches a model's lengths)",
				    cfg->prompt_scale ? "--prompt-scale" : "--output-scale");
	if (cfg->workload && (cfg->trace || cfg->arrival || cfg->rate_curve || cfg->lengths ||
			      cfg->concurrency || cfg->sessions))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--workload cannot be combined with %s (the model gives the arrivals "
				    "and the lengths); expected one of them",
				    cfg->trace ? "--trace" : cfg->arrival ? "--arrival" :
				    cfg->rate_curve ? "--rate-curve" : cfg->lengths ? "--lengths" :
				    cfg->sessions ? "--sessions" : "--concurrency");
	ws->model = cfg->workload;
	ws->prompt_scale = cfg->prompt_scale;
	ws->output_scale = cfg->output_scale;
	if (!cfg->trace && !cfg->arrival && !cfg->rate_curve && !cfg->lengths && !cfg->workload &&
	    !cfg->sessions) {
		snprintf(cfg->default_trace, sizeof(cfg->default_trace), "%s/traces/azure_conv_2000.csv",
			 cli_data_dir());
		cfg->trace = cfg->default_trace;
	}
	ws->trace = cfg->trace;
	ws->format = TRACE_AUTO;
	if (cfg->format && trace_format_from_name(cfg->format, &ws->format))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--format: unknown format '%s' (see `servesim list formats`)",
				    cfg->format);
	/* Closed loop (docs/workloads.md): the clients time the requests, so
	 * nothing else may; --duration stops the sending (cli_engine_config). */
	if (cfg->think_time && !cfg->concurrency)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--think-time needs --concurrency N (a closed loop)");
	if (cfg->ramp_ns && !cfg->concurrency)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--ramp-up needs --concurrency N (a closed loop)");
	if (cfg->concurrency && (cfg->arrival || cfg->rate_curve))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s cannot be combined with --concurrency (closed-loop clients "
				    "send when their previous request finishes); expected one of them",
				    cfg->arrival ? "--arrival" : "--rate-curve");
	if (cfg->trace_rate > 0 && cfg->rate_scale_given)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate cannot be combined with --rate-scale (both set the trace's "
				    "rate); expected one of them");
	if (cfg->concurrency && cfg->rate_scale != 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate-scale cannot be combined with --concurrency (there are no "
				    "arrival times to scale)");
	if (cfg->concurrency && cfg->lengths && !cfg->num_requests)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--concurrency with --lengths needs --num-requests N (the requests the "
				    "clients send in all)");
	ws->closed = cfg->concurrency > 0;
	ws->arrival = cfg->arrival;
	ws->rate_curve = cfg->rate_curve;
	ws->lengths = cfg->lengths;
	ws->num_requests = (uint64_t)cfg->num_requests;
	ws->duration_ns = ws->closed ? 0 : cfg->duration_ns;
	ws->rate_scale = cfg->rate_scale;
	ws->target_rate = cfg->trace_rate;
	ws->seed = (uint64_t)cfg->seed;
	ws->tenants = cfg->tenants;
	ws->sessions = cfg->sessions;
	return 0;
}

struct engine_store_ctx {
	struct catalog *cat;
	const char *path;
};

static int add_stored_engine(void *ctx, const char *name, const char *json, struct ss_error *err)
{
	const struct engine_store_ctx *x = ctx;
	char origin[512];

	snprintf(origin, sizeof(origin), "%s: engine_profiles '%.64s'", x->path, name);
	return catalog_add_engine_text(x->cat, json, origin, err);
}

int cli_load_engine_store(const char *path, struct catalog *cat, struct ss_error *err)
{
	struct engine_store_ctx x = { .cat = cat, .path = path };
	struct cal_store *st = NULL;
	int rc = cal_store_open(&st, path, CAL_OPEN_READONLY, err);

	if (!rc)
		rc = cal_store_each_engine(st, add_stored_engine, &x, err);
	cal_store_close(st);
	return rc;
}

int cli_engine_named(const struct catalog *cat, const char *name, const char *what,
		     const struct engine_profile **out, struct ss_error *err)
{
	char known[512] = "none";
	size_t at = strlen(known), shown = 0;

	*out = NULL;
	if (!name || !strcmp(name, "none"))
		return 0;
	*out = catalog_engine(cat, name);
	if (*out)
		return 0;
	/* at most a dozen names: a user catalog of thousands would make the
	 * one line a page (issue 34 §5) */
	for (; shown < cat->n_engines && shown < 12; shown++)
		at += (size_t)snprintf(known + at, at < sizeof(known) ? sizeof(known) - at : 0, ", %s",
				       cat->engines[shown].name);
	if (shown < cat->n_engines)
		snprintf(known + at, at < sizeof(known) ? sizeof(known) - at : 0,
			 " and %zu more: `servesim list engines`", cat->n_engines - shown);
	return ss_error_set(err, -EINVAL, NULL, 0, "%s '%s' (known: %s)", what, name, known);
}

int cli_resolve_engine(const struct cli_config *cfg, const struct catalog *cat,
		       const struct engine_profile **out, struct ss_error *err)
{
	return cli_engine_named(cat, cfg->engine, "--engine: unknown engine", out, err);
}

/* "a, b, c" of the catalog's stacks into known (len bytes). */
static void stack_names(const struct catalog *cat, char *known, size_t len)
{
	known[0] = '\0';
	for (size_t i = 0; i < cat->n_stacks; i++)
		snprintf(known + strlen(known), len - strlen(known), "%s%s", i ? ", " : "",
			 cat->stacks[i].name);
}

int cli_resolve_stack(const struct cli_config *cfg, struct catalog *cat,
		      const struct engine_profile *engine, struct stack_profile *out,
		      const char **spec, struct ss_error *err)
{
	const struct stack_profile *base = NULL;
	char known[512], name[64];
	bool named = cfg->stack && stack_named(cfg->stack);

	if (cfg->stack_catalog && catalog_load_stacks(cat, cfg->stack_catalog, err))
		return SS_EXIT_FAILURE;
	stack_names(cat, known, sizeof(known));
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "none");
	if (named) {
		size_t n = strcspn(cfg->stack, ",");

		snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1),
			 cfg->stack);
		base = catalog_stack(cat, name);
		if (!base || n >= sizeof(name)) {
			ss_error_set(err, -EINVAL, NULL, 0, "--stack: unknown stack '%.*s' (known: %s)",
				     (int)n, cfg->stack, known);
			return SS_EXIT_USAGE;
		}
		*out = *base;
	} else if (engine && engine_profile_legacy_stack(engine)) {
		/* the profile's api_* keys are its stack (bit for bit) */
		snprintf(name, sizeof(name), "%.59s-api", engine->name);
		stack_profile_from_legacy(out, name, engine->api_in_ms, engine->api_out_ms,
					  engine->api_cv);
	} else if (engine && engine->stack[0]) {
		base = catalog_stack(cat, engine->stack);
		if (!base) {
			ss_error_set(err, -ENOENT, NULL, 0,
				     "engine %s: its stack '%s' is not in the stack catalog (known: %s)",
				     engine->name, engine->stack, known);
			return SS_EXIT_FAILURE;
		}
		*out = *base;
	}
	if (cfg->stack) {
		if (stack_apply(out, cfg->stack, named, err))
			return SS_EXIT_USAGE;
		/* overrides change the terms: the means follow them */
		if (strchr(cfg->stack, '='))
			stack_profile_resolve(out);
	}
	*spec = cfg->stack ? cfg->stack : out->name;
	return SS_EXIT_OK;
}

void cli_engine_pools(const struct cli_config *cfg, struct engine_config *ec)
{
	for (int k = 0; k < ENGINE_POOLS; k++) {
		ec->pools[k].n = (uint32_t)cfg->pools[k].inst;
#define POOL_COPY_INT(name) ec->pools[k].name = (int)cfg->pools[k].name;
#define POOL_COPY_GPU(name)
#define POOL_COPY_STR(name)
#define ENGINE_POOL_FIELD(kind, type, name, ...) POOL_COPY_##kind(name)
#include "engine-pool.def"
#undef ENGINE_POOL_FIELD
#undef POOL_COPY_INT
#undef POOL_COPY_GPU
#undef POOL_COPY_STR
	}
}

void cli_engine_config(struct cli_config *cfg, struct engine_config *ec)
{
	engine_config_defaults(ec);
	ec->tp = (int)cfg->tp;
	ec->n_instances = (uint32_t)cfg->instances;
	ec->block_size = (int)cfg->block_size;
	ec->gpu_mem_util = cfg->gpu_mem_util;
	ec->kv_free_fraction = cfg->kv_free_fraction;
	ec->kv_blocks_override = cfg->kv_blocks;
	ec->kv_ref_tokens = (int32_t)cfg->kv_ref_tokens;
	ec->max_context = (int32_t)cfg->max_context;
	ec->policy = cfg->policy;
	ec->router = cfg->router;
	ec->order = cfg->order;
	ec->victim = cfg->victim;
	ec->preemption = cfg->preemption;
	ec->prefix_cache = cfg->prefix_cache;
	ec->kv_remote = cfg->kv_remote;
	ec->kv_offload = cfg->kv_offload;
	ec->admission = cfg->admission;
	ec->predictor = cfg->predictor;
	cli_engine_pools(cfg, ec);
	ec->pp = (int)cfg->pp;
	ec->pairing = cfg->pairing;
	ec->kv_overlap = cfg->kv_overlap != 0;
	ec->gpus_per_node = (int)cfg->gpus_per_node;
	ec->semi_pd_sm = cfg->semi_pd_sm;
	ec->semi_pd_kv = cfg->semi_pd_kv;
	ec->slo_ttft_ns = cfg->slo_ttft_ns;
	ec->cost_model = cfg->cost_model;
	ec->seed = (uint64_t)cfg->seed;
	ec->concurrency = (uint32_t)cfg->concurrency;
	ec->think_time = cfg->think_time;
	ec->send_until_ns = cfg->concurrency ? cfg->duration_ns : 0;
	ec->ramp_ns = cfg->ramp_ns;
	/* --calibration first (NULL entries are skipped), then the shipped store */
	snprintf(cfg->shipped_store, sizeof(cfg->shipped_store), "%s/calibration.db", cli_data_dir());
	cfg->stores[0] = cfg->calibration;
	cfg->stores[1] = cfg->shipped_store;
	ec->stores = cfg->stores;
	ec->n_stores = 2;
	ec->power_cap_w = cfg->power_cap_w;
	ec->clock_frac = cfg->clock_frac;
	ec->weight_dtype = (enum ss_dtype)cfg->weight_dtype;
	ec->kv_dtype = (enum ss_dtype)cfg->kv_dtype;
	ec->ep = (int)cfg->ep;
	ec->dp_attention = (int)cfg->dp_attention;
	/* only cli/ reads the environment: DistServe's default fits */
	ec->shared_data = getenv("SERVESIM_SHARED_DATA");
	ec->sample_interval_ns = cfg->out ? cfg->sample_interval_ns : 0;
}
