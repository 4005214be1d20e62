/* servesim — the options of every command with options (`run`, `live`,
 * `plan`, `sweep` and `loop` (their own, and run's and live's through),
 * `calibrate run`,
 * `check`, `import`, `list`, `export` and `fit-engine`, `compare`,
 * `workload fit`), declared once.
 *
 * Every option is one entry of one table (cli/options.c), as in git's
 * parse-options: its long and short names, argument, type, the commands
 * that take it, its help text, its validation and the field of struct
 * cli_config it lands in.  From that table cli_parse() builds the
 * getopt_long table of a command, parses and validates each value (exit 2
 * for a bad one), and cli_help() prints `servesim CMD --help`; the option
 * lists of docs/servesim.1.md are `servesim help --man CMD`
 * (scripts/update-man-help.sh; tests/cli-run.sh fails when they differ).
 *
 * After parsing, cli_workload_spec() and cli_engine_config() map the one
 * configuration to what the libraries take, for every command alike.
 */
#ifndef SS_CLI_OPTIONS_H
#define SS_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "metrics.h"
#include "ss-error.h"
#include "workload.h"

/* The commands an option belongs to (a mask; `sweep` and `loop` hand
 * run's and live's options through). */
enum cli_cmd {
	CLI_RUN = 1u << 0,
	CLI_LIVE = 1u << 1,
	CLI_PLAN = 1u << 2,
	CLI_FIT_ENGINE = 1u << 3,    /* calibrate fit-engine: run's model, engine and KV options, and its own */
	CLI_CAL_RUN = 1u << 4,       /* calibrate run (cmd-calibrate-run.c) */
	CLI_CAL_CHECK = 1u << 5,     /* calibrate check */
	CLI_CAL_IMPORT = 1u << 6,    /* calibrate import (cmd-calibrate-store.c) */
	CLI_CAL_LIST = 1u << 7,      /* calibrate list */
	CLI_CAL_EXPORT = 1u << 8,    /* calibrate export */
	CLI_COMPARE = 1u << 9,       /* compare */
	CLI_WORKLOAD_FIT = 1u << 10, /* workload fit */
	CLI_SWEEP = 1u << 11,        /* sweep's own options (cmd-sweep.c); run's go through */
	CLI_LOOP = 1u << 12,         /* loop's own options (cmd-loop.c); live's go through */
	/* What one source of `calibrate fit-engine --sources` may set: how
	 * its runs were deployed and how its results read (not a command of
	 * its own: fit-engine's --sources entries) */
	CLI_FIT_SOURCE = 1u << 13,
};

/* A command as the option machinery sees it. */
struct cli_command {
	const char *name;            /* "run", "calibrate check" */
	unsigned id;                 /* one enum cli_cmd bit */
	const char *description;     /* the paragraph under the usage line, ending in "\n" */
	/* Lines printed by --help after the options, or NULL; build-dependent
	 * text goes here, since the man page leaves it out. */
	void (*epilogue)(FILE *f);
	/* The operands after the options in the usage line ("RESULT..."), or
	 * NULL: the command takes none (cli_parse refuses one). */
	const char *operands;
	const char *failure;         /* "1 bad input or FAILURE" in --help; NULL: "failed run" */
	/* The usage line after "usage: servesim ", or NULL: "NAME [options]
	 * OPERANDS". */
	const char *usage;
	/* The command whose options this one hands through (sweep: run's,
	 * loop: live's), or NULL.  cli_parse() then takes the command's own
	 * options from the table and keeps every other option of `through`,
	 * with its value, in cli_config.through, in order; an option of
	 * neither is unknown, and the command takes no operands. */
	const struct cli_command *through;
	/* Text after the options in --help and the man page ("example: ..."),
	 * or NULL. */
	const char *more;
	/* What follows "2 bad command line" in the exit status lines, or
	 * NULL: "\n". */
	const char *exit_more;
};

extern const struct cli_command cli_cmd_run, cli_cmd_live, cli_cmd_plan, cli_cmd_fit_engine;
/* in cmd-sweep.c and cmd-loop.c */
extern const struct cli_command cli_cmd_sweep, cli_cmd_loop;
/* calibrate's subcommands (in their cmd-calibrate-*.c), compare, workload fit */
extern const struct cli_command cli_cmd_cal_run, cli_cmd_cal_check, cli_cmd_cal_import,
	cli_cmd_cal_list, cli_cmd_cal_export, cli_cmd_compare, cli_cmd_workload_fit;

/* The engine profile run and plan use without --engine (data/engines.json;
 * docs/engines.md).  "none" (kernels only) stays available for comparisons
 * with kernel-level simulators. */
#define CLI_DEFAULT_ENGINE "vllm"

/* Everything the command line of run, live or plan sets.  Strings point
 * into argv (or are static defaults); NULL means "not given". */
/* A disaggregated pool's options, --prefill-* or --decode-*: its instances
 * and the fields of sim/engine-pool.def that have an option; 0 / NULL = not
 * given (the colocated option's value).  cli_engine_pools copies them. */
struct cli_pool_options {
	int64_t inst;                /* --prefill-instances / --decode-instances */
#define CLI_POOL_INT(name) int64_t name;
#define CLI_POOL_GPU(name) const char *name;   /* a catalog name */
#define CLI_POOL_STR(name)                      /* no option */
#define ENGINE_POOL_FIELD(kind, type, name, ...) CLI_POOL_##kind(name)
#include "engine-pool.def"
#undef ENGINE_POOL_FIELD
#undef CLI_POOL_INT
#undef CLI_POOL_GPU
#undef CLI_POOL_STR
};

struct cli_config {
	unsigned cmd;                /* enum cli_cmd of the command parsed */
	/* the workload */
	const char *trace, *format, *arrival, *lengths, *tenants;
	const char *rate_curve;      /* --rate-curve FILE: time_s,rate rows */
	const char *sessions;        /* --sessions SPEC (traces/sessions.c) */
	const char *workload;        /* --workload MODEL.json (servesim workload fit) */
	double prompt_scale, output_scale;  /* --workload's length factors, 0 = 1 */
	int64_t num_requests;        /* 0 = all */
	int64_t duration_ns;         /* keep arrivals before this, ns; 0 = no limit */
	double rate_scale;           /* > 0 */
	bool rate_scale_given;       /* --rate-scale was on the command line */
	double trace_rate;           /* run's --rate: a trace's target mean, req/s; 0 = none */
	int64_t seed;
	/* closed loop: clients (0 = open loop) and their think time spec */
	int64_t concurrency;
	const char *think_time;
	int64_t ramp_ns;             /* start the clients over this long, ns; 0 = all at 0 */
	/* model, hardware and engine */
	const char *model, *gpu;
	int64_t tp, instances;       /* run/live: GPUs per instance, instances */
	const char *kv_remote;       /* --kv-remote spec, NULL = none (docs/kv-cache.md) */
	const char *policy, *router, *pairing, *order, *victim, *preemption, *prefix_cache,
		*admission, *predictor, *cost_model, *calibration, *model_catalog, *gpu_catalog;
	const char *kv_offload;      /* --kv-offload spec, NULL = off */
	const char *spec;            /* --spec (sim/spec.h), NULL = off */
	const char *lora;            /* --lora (sim/lora.h), NULL = off */
	const char *model_config;    /* a Hugging Face config.json (--model-config), or NULL */
	char model_config_name[64];  /* its model's name when --model is not given */
	const char *engine;          /* engine profile name, "none" = kernels only;
	                              * CLI_DEFAULT_ENGINE for run and plan */
	const char *engine_catalog;  /* extra engines JSON */
	const char *engine_store;    /* a calibration store's engine profiles */
	const char *interval_catalog; /* extra intervals JSON (docs/metrics.md "Intervals") */
	const char *stack;           /* --stack NAME|key=value,...|NAME,key=value,..., NULL = the engine's */
	const char *stack_catalog;   /* extra stacks JSON */
	/* the disaggregated pools' options, by enum engine_pool_id */
	struct cli_pool_options pools[ENGINE_POOLS];
	int64_t gpus_per_node;
	int kv_overlap;
	double semi_pd_sm, semi_pd_kv;   /* --semi-pd shares, 0 = off */
	int64_t block_size;          /* tokens; 0 = the engine profile's, else 16 */
	int64_t kv_blocks;           /* per instance, 0 = derived from memory */
	int64_t kv_ref_tokens;       /* local-attention models' KV sizing length, tokens; 0 = context */
	int64_t max_context;         /* tokens, 0 = the model's */
	int overlong;                /* index in overlong_modes: 0 reject, 1 truncate */
	/* the KV rules' fractions, (0, 1]; 0 = not given (the engine
	 * profile's rule); at most one of them */
	double gpu_mem_util, kv_free_fraction;
	double power_cap_w;          /* W per GPU, 0 = none */
	double clock_frac;           /* fraction of the maximum SM clock, 0 = not locked */
	/* --weight-dtype, --kv-dtype (enum ss_dtype; 0 = the model's own) */
	int weight_dtype, kv_dtype;
	int64_t sample_interval_ns;  /* time-series period with --out, ns */
	struct slo_config slo;       /* --slo, ms */
	int64_t slo_ttft_ns;         /* slo.ttft_ms in ns, for policies */
	/* live */
	const char *backend;
	int64_t threads, width_div, layers;   /* 0 = the backend's default */
	const char *graphs;          /* --graphs: the profile whose graph sizes live captures */
	/* plan */
	/* each list axis as typed (analysis/plan-axes.def's `cli`) */
#define PLAN_AXIS(kind, list, cfg, opt, cli, dflt, lo, hi, group, engine, check, names, help) \
	const char *cli;
#include "plan-axes.def"
#undef PLAN_AXIS
	const char *modes, *pd_ratios, *budget, *db;
	int64_t max_gpus, max_probes, jobs, top;
	int mixed_pools, dry_run, stats;
	double target, tolerance, min_span;
	int attainment;              /* 0: every SLO per request (all); 1: each SLO on its own */
	int pareto_cost;             /* enum plan_cost_axis */
	int pareto_latency;          /* enum plan_latency */
	double plan_rate;            /* --rate: target req/s; 0 = none */
	int objective;               /* --objective: enum plan_objective */
	/* output */
	const char *out;
	int json, quiet;
	int verbose;                 /* -v: cli_verbosef() says what was resolved */
	/* filled by cli_workload_spec() and cli_engine_config() */
	char default_trace[1024];
	char shipped_store[1100];
	const char *stores[2];
	/* plan: --weight-dtype / --kv-dtype given as a list ("bf16,fp8"),
	 * each item checked; NULL: one dtype (weight_dtype, kv_dtype) */
	const char *weight_dtypes, *kv_dtypes;
	/* --ep, --dp-attention (0 = off); plan: their lists (above) */
	int64_t ep, dp_attention;
	/* pipeline parallelism (--pp; 0 = none); plan: its list of stage
	 * counts (above) */
	int64_t pp;
	/* --price GPU=USD[,GPU=USD...], each occurrence as given (checked by
	 * the parser; the GPU names by cli_apply_prices once the catalog is
	 * loaded) */
#define CLI_MAX_PRICES 32
	const char *prices[CLI_MAX_PRICES];
	int n_prices;
	/* plan --verify N: re-run the best N on the whole workload (0 = no) */
	int64_t verify;
	int conservative;            /* plan --conservative (plan_eval.conservative) */
	int like_for_like;           /* plan --like-for-like (docs/plan.md "Like for like") */
	/* calibrate fit-engine (cmd-calibrate-fit-engine.c) */
	const char *fit_sources;     /* --sources FILE: fit-engine's deployments (cmd-calibrate-fit-engine.c) */
	const char *fit_free;        /* --free KEY[:LO:HI],..., checked against the profile's keys */
#define CLI_MAX_SELECT 8
	const char *select[CLI_MAX_SELECT];   /* --select KEY=VALUE, each checked */
	int n_select;
	int result_format;           /* --format: enum serving_format */
	int group_by;                /* --group-by: enum efit_group_by */
	int closed_start;            /* --closed-start: 0 spread, 1 burst, 2 drained */
	int closed_seqs_set, closed_tokens_set;
	int64_t closed_seqs_short, closed_tokens_extra;   /* --closed-max-seqs C-K, --closed-max-tokens C+ISL+K: K */
	int no_holdout, no_fit;
	int reported;                /* --reported: a fit also shows the figures it does not fit */
	int64_t fit_jobs;            /* threads, 1..EFIT_MAX_JOBS */
	const char *fit_name;
	const char *out_file;        /* --out FILE of fit-engine, calibrate export, workload fit */
	const char *store;           /* --store FILE of calibrate's subcommands; NULL: theirs */
	const char *json_to;         /* --json[=FILE]: "-" stdout, else FILE; NULL: none */
	/* calibrate run (cmd-calibrate-run.c; also --backend, --model,
	 * --model-config, --threads, --width-div, --layers) */
	const char *device;          /* --device NAME (run, check, import) */
	const char *catalog_out;     /* --catalog-out DIR */
	int catalog_only;
	int64_t warmup, repeats;     /* runs per point: untimed, timed */
	int64_t max_tokens, max_kv;  /* the grid's largest token count and KV length, tokens */
	/* calibrate check */
	int64_t folds;               /* 2..100 */
	int cross_source;
	int gemm_classes;           /* calibrate check --gemm-classes */
	const char *cross_gpu;      /* calibrate check --cross-gpu FROM:TO */
	/* calibrate import; window, per_octave: -1 = not given */
	const char *kind, *dtype_filter, *ar_backend;
	int64_t window, per_octave;
	int compact;
	/* compare: --label, each occurrence (transfer full: the caller frees
	 * labels, also after a failed parse), --reference, --plot / --out */
	const char **labels;
	int n_labels;
	const char *reference;
	/* sweep: --sweep KEY=VALUES, each occurrence as given (checked by
	 * cmd-sweep.c), --seeds, --keep-runs; the first seed is seed, --jobs
	 * jobs, --out out */
#define CLI_MAX_SWEEPS 16
	const char *sweeps[CLI_MAX_SWEEPS];
	int n_sweeps;
	int64_t seeds;               /* 1..10000 */
	int keep_runs;
	/* loop: --repeats (live runs, 1..100), --noise-threshold (%, 0..1000);
	 * its calibration's --max-tokens, --max-kv, --cal-repeats and
	 * --cal-warmup are max_tokens, max_kv, repeats and warmup, its store
	 * calibration, --out out */
	int64_t live_repeats;
	double noise_pct;
	/* a command with cmd->through: the other command's options, in order
	 * (transfer full: the caller frees through, also after a failed
	 * parse) */
	struct cli_arg {
		const char *tok;     /* "--name" or "--name=value" (or "-c"), from argv */
		const char *val;     /* its value when it was the next argument, else NULL */
	} *through;
	int n_through;
	/* operands after the options (cmd->operands): argv[operand0 ..] */
	int operand0;
};

/* cli_parse() returns this when --help was given and printed. */
#define CLI_HELP_SHOWN 1

/* Set cfg to cmd's defaults and parse argv (argv[0] is the command name).
 * Returns 0, CLI_HELP_SHOWN (help printed on stdout when show_help), or
 * -EINVAL with err set to the one line to print (exit 2).  Long options
 * must be spelt whole: an abbreviation getopt_long would take ("--gpus" for
 * --gpus-per-node) is an unknown option, with the names it abbreviates. */
int cli_parse(const struct cli_command *cmd, int argc, char **argv, struct cli_config *cfg,
	      bool show_help, struct ss_error *err);

/* For `servesim sweep`, which hands run's options through to each run: 1
 * when cmd has a long option NAME (without "--") that takes a value, 0 when
 * it is a flag, -1 when cmd has no option of that name. */
int cli_option_arity(const struct cli_command *cmd, const char *name);

/* `servesim CMD --help`; man: without the epilogue, as docs/servesim.1.md
 * shows it. */
void cli_help(FILE *f, const struct cli_command *cmd, bool man);

/* The workload options as a workload_spec (the shipped sample trace when
 * no workload option was given).  -EINVAL for an unknown --format. */
int cli_workload_spec(struct cli_config *cfg, struct workload_spec *ws, struct ss_error *err);

/* The engine configuration every run of cfg starts from: engine defaults,
 * then every engine option (the model and GPUs from the catalog are the
 * caller's).  Points ec->stores into cfg. */
/* The engine profile --engine names in cat (NULL for "none"), or -EINVAL
 * with err naming the known profiles. */
struct catalog;
/* Add the engine profiles kept in the calibration store at path to cat. */
int cli_load_engine_store(const char *path, struct catalog *cat, struct ss_error *err);
/* The engine profile name names in cat (NULL for NULL or "none"), or
 * -EINVAL with err "WHAT 'NAME' (known: none, ...)". */
int cli_engine_named(const struct catalog *cat, const char *name, const char *what,
		     const struct engine_profile **out, struct ss_error *err);
int cli_resolve_engine(const struct cli_config *cfg, const struct catalog *cat,
		       const struct engine_profile **out, struct ss_error *err);
void cli_engine_config(struct cli_config *cfg, struct engine_config *ec);
/* The serving stack a run of cfg with engine profile engine (NULL:
 * none) uses, into *out (stack-profile.h, resolved): --stack's NAME (from
 * cat, after --stack-catalog is added to it) or else the engine's default
 * (the profile's `stack` key; the stack its legacy api_* keys make; none
 * for --engine none or a profile with neither), then --stack's
 * key=value overrides.  *spec: the stack as the summary names it
 * (--stack's text, or the stack's name).  Returns an exit status: 0;
 * SS_EXIT_USAGE (2) for a bad --stack; SS_EXIT_FAILURE (1) for a stack
 * catalog that cannot be read or an engine profile naming a stack the
 * catalog lacks; err says which. */
int cli_resolve_stack(const struct cli_config *cfg, struct catalog *cat,
		      const struct engine_profile *engine, struct stack_profile *out,
		      const char **spec, struct ss_error *err);
/* The pools' instance counts and integer fields of cfg into ec->pools (a
 * pool's GPU is a catalog lookup: the caller's). */
void cli_engine_pools(const struct cli_config *cfg, struct engine_config *ec);

#endif
