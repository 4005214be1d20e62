/* servesim — capacity planning: which deployments serve a workload within
 * its SLOs, how much traffic each one takes, and at what cost
 * (`servesim plan`, docs/plan.md).
 *
 * A plan enumerates configurations (colocated or prefill/decode
 * disaggregated, GPU type, tensor parallelism, instance counts, batch
 * policy, chunk size, maximum batch), and for each one finds the largest
 * rate scale at which the share of requests meeting every SLO is at least
 * the target: a bracketing search in log space followed by bisection, each
 * probe one simulation of the workload with its arrival times divided by
 * the scale.  Everything here is a pure function of its inputs: the same
 * configuration evaluates to bit-identical results in any process, which is
 * what lets `-j N` workers, MPI ranks and a resumed database agree.
 */
#ifndef SS_PLAN_H
#define SS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "engine.h"
#include "metrics.h"
#include "ss-error.h"

/* Longest list one search dimension takes (--gpus, --tp, --chunk, ...). */
#define PLAN_MAX_LIST 32
/* Longest --spec list (off and METHOD:k=K items). */
#define PLAN_MAX_SPECS 8
/* Most instance counts one (GPU, tp) takes without --instances. */
#define PLAN_MAX_COUNTS 1024
/* Most simulations one configuration's rate search runs. */
#define PLAN_MAX_PROBES 24

enum plan_mode {
	PLAN_COLOCATED = 0,      /* every instance prefills and decodes */
	PLAN_DISAGGREGATED = 1,  /* a prefill pool and a decode pool */
};
const char *plan_mode_name(enum plan_mode m);

/* A batch policy the plan can sweep, and the policy parameters its chunk and
 * maximum-batch dimensions set. */
struct plan_policy {
	const char *name;        /* as in --policy */
	const char *chunk_key;   /* tokens per step; NULL: the policy has no token budget */
	const char *batch_key;   /* running-set limit */
	bool batch_within_chunk; /* the policy requires max batch <= token budget */
	const char *spec;        /* the --policy spec it stands for, when not name
				  * (vllm-v0: "vllm:v0=on") */
};
/* NULL when name is not a policy the plan can sweep. */
const struct plan_policy *plan_policy_find(const char *name);
/* "vllm, sarathi, ..." for error messages. */
const char *plan_policy_names(void);

/* A prefill:decode instance ratio, both >= 1. */
struct plan_ratio {
	int prefill, decode;
};

/* The search space.  Lists are in the order the user gave them; the
 * enumeration order (and so every configuration's index) follows them. */
/* An axis item's C type, by its kind (plan-axes.def). */
#define PLAN_AXIS_TYPE_GPU const struct gpu_spec *   /* (transfer none) the catalog's */
#define PLAN_AXIS_TYPE_INT int
#define PLAN_AXIS_TYPE_U32 uint32_t
#define PLAN_AXIS_TYPE_POLICY const struct plan_policy *

struct plan_space {
	const struct model_spec *model;
	/* Each list axis of plan-axes.def: LIST[PLAN_MAX_LIST] and n_LIST.
	 * n_instances == 0: every count 1, 2, 3, ... up to max_gpus / tp (at
	 * most PLAN_MAX_COUNTS of them); n_chunks / n_max_batch == 0: the
	 * policy's default only; n_ep / n_dp_attention / n_pp == 0: 1 only.
	 * tp is GPUs per pipeline stage, chunks tokens per step, max_batch
	 * requests.  The MoE layouts (ep, dp_attention) combine with every
	 * tp (docs/cost-models.md "Expert parallelism"), combinations the
	 * model cannot run (not dividing tp, a dense model) skipped; pp too,
	 * an instance having tp x pp GPUs.  Mixed pools (--mixed-pools) take
	 * ep, dp_attention and pp 1 only. */
#define PLAN_AXIS(kind, list, cfg, opt, cli, dflt, lo, hi, group, engine, check, names, help) \
	PLAN_AXIS_TYPE_##kind list[PLAN_MAX_LIST];                                             \
	int n_##list;
#include "plan-axes.def"
#undef PLAN_AXIS
	int max_gpus;                        /* largest cluster, GPUs, >= 1 */
	bool colocated, disaggregated;
	/* Disaggregated splits: n_ratios == 0 takes every split 1:(n-1) ..
	 * (n-1):1; otherwise each ratio p:d gives round(n p / (p + d))
	 * prefill instances, clamped to 1..n-1, duplicates dropped. */
	struct plan_ratio ratios[PLAN_MAX_LIST];
	int n_ratios;
	int budget_gpus;                     /* GPUs, 0 = no limit */
	double budget_usd_per_hour;          /* USD/h, 0 = no limit */
	/* Disaggregated: also every ordered pair of different (GPU, tp) pools,
	 * prefill and decode, from gpus x tp (--mixed-pools), enumerated after
	 * every same-pool configuration. */
	bool mixed_pools;
	/* Precision axes (--weight-dtype / --kv-dtype lists): the whole space
	 * above once per weight x KV dtype pair, weight dtype outermost, the
	 * base engine configuration's dtype standing in for an axis without
	 * a list.  Both 0: no axes (the base's dtypes, keys as before).  A
	 * pair a GPU cannot run (precision_check: fp4 without fp4 tensor
	 * cores) is left out with what does not fit in memory. */
	enum ss_dtype weight_dtypes[4];
	int n_weight_dtypes;
	enum ss_dtype kv_dtypes[4];
	int n_kv_dtypes;
	/* Speculative decoding axis (--spec LIST or auto; docs/speculation.md
	 * "Planning"): the whole space above once per item, outermost, NULL
	 * = off; (transfer none) the caller's.  0: no axis (the base's
	 * engine_config.spec, keys as before). */
	const struct spec_config *specs[PLAN_MAX_SPECS];
	int n_specs;
};

/* One configuration of the plan. */
struct plan_config {
	uint32_t index;                      /* position in the enumeration */
	enum plan_mode mode;
	/* One item of each list axis (plan-axes.def), its `cfg` member:
	 *   gpu           disaggregated: the prefill pool's
	 *   tp            GPUs per instance (of the prefill pool; per stage)
	 *   ep            expert parallelism, both pools alike; 0 or 1 = off
	 *   dp_attention  attention ranks per instance, likewise
	 *                 (keys and labels name ep and dp_attention only when > 1)
	 *   pp            pipeline stages per instance, both pools; 0 or 1 = none
	 *   instances     colocated: replicas; disaggregated: n_prefill + n_decode
	 *   policy, chunk (tokens per step), max_batch (requests); chunk and
	 *                 max_batch 0 = the policy's default */
#define PLAN_AXIS(kind, list, cfg, opt, cli, dflt, lo, hi, group, engine, check, names, help) \
	PLAN_AXIS_TYPE_##kind cfg;
#include "plan-axes.def"
#undef PLAN_AXIS
	/* Disaggregated: the decode pool's GPU and tp; NULL / 0 = gpu / tp.
	 * A configuration is mixed when they differ (plan_config_mixed()). */
	const struct gpu_spec *decode_gpu;   /* (transfer none) */
	int decode_tp;
	uint32_t n_prefill, n_decode;        /* 0 when colocated */
	int gpus;                            /* instances x tp; mixed: n_prefill x tp + n_decode x decode_tp */
	/* USD/h: gpus x the GPU's cost_per_hour, each pool at its own price;
	 * 0 = unknown (a GPU without a price) */
	double usd_per_hour;
	char policy_spec[128];               /* "vllm:max_num_batched_tokens=512,max_num_seqs=128" */
	char key[384];                       /* canonical string, plan_config_key() */
	/* Set by a plan with dtype axes (plan_space.n_weight_dtypes or
	 * n_kv_dtypes): the weights' and KV cache's dtypes of this
	 * configuration, in its key (" weight=fp8 kv=bf16") and its engine
	 * configuration.  false: the base's, not in the key. */
	bool dtype_axis;
	enum ss_dtype weight_dtype, kv_dtype;
	/* Set by a plan with a speculation axis (plan_space.n_specs): this
	 * configuration's speculative decoding, NULL = off, in its key
	 * (" spec=eagle3:k=3", " spec=off") and its engine configuration. */
	bool spec_axis;
	const struct spec_config *spec;
};

/* Configurations the space held but the plan left out, by reason. */
struct plan_excluded {
	uint32_t budget;     /* over --budget (GPUs or USD/h) */
	uint32_t unpriced;   /* a USD budget was given and the GPU's price is unknown */
	uint32_t memory;     /* the model does not fit on tp GPUs of the type (mixed: either pool's) */
	uint32_t policy;     /* max batch > chunk for a policy that forbids it */
};

/* A list axis that plan_enumerate() combines with the rest generically
 * (plan-axes.def's group OUTER): integers, a member of the same name in
 * plan_config and engine_config.  The whole space once per item, the
 * axes nested in plan-axes.def's order inside the dtype pairs; a
 * configuration's item is in its key (" OPT=N" after everything else),
 * plan.json ("NAME": N) and plan.csv (a NAME column, only in a plan that
 * searches the axis).  0 = not searched (the base's value). */
struct plan_outer_axis {
	const char *opt;             /* the option, without "--"; the key's name */
	const char *name;            /* the member; plan.json's and plan.csv's name */
	size_t list, n;              /* offsets of its array and count in struct plan_space */
	size_t cfg, engine;          /* offsets of its int in plan_config and engine_config */
};
/* The OUTER axes (*n of them, maybe 0), in plan-axes.def's order. */
const struct plan_outer_axis *plan_outer_axes(size_t *n);
/* c's item on axis a (0: not searched). */
int plan_config_outer(const struct plan_config *c, const struct plan_outer_axis *a);
/* Append " OPT=N" for each OUTER axis c has an item of to the string in
 * buf (the labels of the text table and report.html). */
void plan_outer_label(const struct plan_config *c, char *buf, size_t len);

/* The canonical string of a configuration: fixed field order, decimal
 * integers, e.g.
 *   colocated gpu=h100-sxm tp=1 instances=2 policy=vllm:max_num_batched_tokens=512,max_num_seqs=128
 *   disaggregated gpu=h100-sxm tp=2 prefill=1 decode=3 policy=sarathi
 *   disaggregated prefill=1 gpu=h100-sxm tp=2 decode=3 gpu=a100-80gb-sxm tp=1 policy=sarathi
 * (the last a mixed one); with pp > 1, " pp=N" follows "tp=N"; OUTER axes
 * (plan_outer_axes) end it.  Fills c->policy_spec and c->key from the other
 * fields. */
void plan_config_key(struct plan_config *c);

/* The decode pool's GPU and tp: decode_gpu / decode_tp when set, else gpu
 * / tp (colocated configurations included). */
const struct gpu_spec *plan_config_decode_gpu(const struct plan_config *c);
int plan_config_decode_tp(const struct plan_config *c);
/* Disaggregated, with a decode pool of another GPU type or tp. */
bool plan_config_mixed(const struct plan_config *c);
/* "h100-sxm" or, mixed, "h100-sxm/a100-80gb-sxm" (prefill/decode). */
void plan_config_gpu_label(const struct plan_config *c, char *buf, size_t len);
/* "2" or, mixed, "2/1"; with pipeline stages "2 pp4". */
void plan_config_tp_label(const struct plan_config *c, char *buf, size_t len);
/* "5" instances or, disaggregated, "3P+1D". */
void plan_config_inst_label(const struct plan_config *c, char *buf, size_t len);
/* "vllm" or, with a token budget or running-set limit, "vllm 2048/-"
 * (chunk/max batch, "-" where unset). */
void plan_config_policy_label(const struct plan_config *c, char *buf, size_t len);

/* Enumerate sp into *out (n entries, transfer full: free()).  base, when
 * not NULL, is the engine configuration every run starts from; it is used
 * to leave out configurations whose KV pool would be empty (the model does
 * not fit).  ex counts what was left out.  Fails (-EINVAL) on an empty or
 * malformed space, not on a space that budgets exclude entirely. */
int plan_enumerate(const struct plan_space *sp, const struct engine_config *base,
		   struct plan_config **out, size_t *n, struct plan_excluded *ex,
		   struct ss_error *err);

/* sp split on the integer axis a (plan_outer_axes(), or a descriptor of
 * the caller's): the space without it (n = 0) once per item of it, in
 * list order, each under base with the item in a's engine member and
 * with the item in each configuration's a member; indices 0..n-1, keys
 * (plan_config_key) as for plan_enumerate, which calls this for the OUTER
 * axes. */
int plan_enumerate_axis(const struct plan_space *sp, const struct plan_outer_axis *a,
			const struct engine_config *base, struct plan_config **out, size_t *n,
			struct plan_excluded *ex, struct ss_error *err);

/* The engine configuration of c: base (the options every configuration
 * shares) with c's GPUs, tp, instances, pools and policy; no time series.
 * The one mapping from a plan configuration to an engine's, used by the
 * evaluation and by `servesim plan`'s checks alike. */
void plan_config_engine(const struct plan_config *c, const struct engine_config *base,
			struct engine_config *ec);

/* ---- the rate search ---------------------------------------------------- */

struct plan_search {
	double target;       /* attainment to meet, (0, 1] */
	double tolerance;    /* stop bisecting when hi / lo <= 1 + tolerance, > 0 */
	double step;         /* bracketing factor, > 1 */
	double min_scale;    /* smallest rate scale tried, > 0 */
	double max_scale;    /* largest rate scale tried, >= 1 */
	int max_probes;      /* simulations per configuration, 2..PLAN_MAX_PROBES */
	/* A probe counts as meeting the target only if its arrivals span at
	 * least min_span x its mean E2E latency: by Little's law at most
	 * N / min_span of its N requests are then in flight at once, so the
	 * figure is a sustained rate, not a burst the cluster absorbed.
	 * 0 = no such check. */
	double min_span;
	/* false: a probe's attainment is the share of requests meeting every
	 * SLO (DistServe's paper's goodput).  true: the smallest of the
	 * shares meeting each SLO on its own, so the target holds when every
	 * metric's target-percentile meets its SLO (DistServe's simulator,
	 * simdistserve: P90 TTFT and P90 TPOT each). */
	bool each_slo;
	/* --rate: the scale of the target rate (R / the workload's rate at
	 * scale 1); 0 = none.  A probe that misses the target at a scale <=
	 * need_scale proves (attainment falling with the rate) that the
	 * configuration cannot sustain R: the search stops there with
	 * PLAN_BELOW.  A configuration that can is searched exactly as
	 * without it, so its result is the same bytes. */
	double need_scale;
};
/* target 0.9, tolerance 0.05, step 4, scales 1/1024 .. 1024, 12 probes,
 * min_span 4, every SLO per request. */
void plan_search_defaults(struct plan_search *s);

/* What one simulation at one rate scale gave. */
struct plan_probe {
	double scale;            /* rate scale of the probe */
	double rate_rps;         /* offered request rate, req/s */
	double attainment;       /* share of requests meeting every SLO */
	double goodput_rps;      /* the run's: completed requests meeting every SLO / its
				  * duration (first arrival to last finish), req/s */
	double throughput_rps;   /* completed requests / duration, req/s */
	double ttft_p50_ms, ttft_p99_ms;
	double tpot_p50_ms, tpot_p99_ms;
	double e2e_mean_ms, e2e_p99_ms;
	double span_s;           /* first to last arrival at this scale, s */
	/* energy of the run (busy and idle, every GPU) / output tokens of
	 * the completed requests, J/token; NAN when none completed or the
	 * result predates the field */
	double j_per_output_token;
	/* share of the instances' busy time whose step cost was predicted
	 * outside a measured grid (engine instance_stats.out_of_grid_ns /
	 * busy_ns), 0..1; 0 for a cost model without grids */
	double outside_grid;
	/* plan --conservative: the attainment under the SLOs as given (the
	 * search's, attainment, is then the conservative one); NAN without */
	double attainment_nominal;
};

enum plan_status {
	PLAN_OK = 0,         /* max_scale found within the tolerance */
	PLAN_CAPPED = 1,     /* meets the target even at max_scale: a lower bound */
	PLAN_NONE = 2,       /* misses the target even at min_scale: max_scale = 0 */
	PLAN_FAILED = 3,     /* a simulation failed; error says why */
	/* --rate: missed the target at or below the target rate's scale, so
	 * stopped early (plan_search.need_scale); max_scale is what it had
	 * found, a lower bound, maybe 0.  Not stored in the database. */
	PLAN_BELOW = 4,
	/* --rate: not evaluated, the bisection on instance count showed a
	 * smaller count of the same configuration sustains the rate, or a
	 * larger one does not (cli/cmd-plan.c); n_probes 0 */
	PLAN_SKIPPED = 5,
};
#define PLAN_N_STATUS 6
const char *plan_status_name(enum plan_status s);
/* -EINVAL for an unknown name. */
int plan_status_from_name(const char *name, enum plan_status *s);

/* A configuration's result.  Fixed size and pointer-free, so it crosses
 * pipes and MPI messages as bytes (between processes of one build). */
struct plan_result {
	uint32_t index;          /* of the configuration */
	int32_t status;          /* enum plan_status */
	int32_t n_probes;
	int32_t best;            /* probe at max_scale, -1 when none */
	/* a larger scale met the attainment target but its workload was too
	 * short to call it sustained (min_span): more requests may raise
	 * max_scale */
	int32_t workload_limited;
	double max_scale;        /* largest scale meeting the target, 0 when none */
	/* of n_probes, how many were copied from the same configuration with a
	 * smaller running-set limit instead of simulated (plan_probe_cache);
	 * a statistic of the process that evaluated it: not stored, 0 for a
	 * result loaded from the database */
	int32_t n_reused;
	/* in the order they ran; probes[0] is at scale 1, the workload as given */
	struct plan_probe probes[PLAN_MAX_PROBES];
	char error[256];         /* PLAN_FAILED: the simulation's error */
};

/* Run one probe at scale: fill *p (scale and rate included).  0 or a
 * negative errno. */
typedef int (*plan_probe_fn)(void *ctx, double scale, struct plan_probe *p,
			     struct ss_error *err);

/* The search: probe scale 1; while it meets the target multiply the scale
 * by step (at most max_scale), else divide (at least min_scale), until the
 * threshold is bracketed; then bisect in log space until hi / lo <= 1 +
 * tolerance or max_probes ran.  Fills r (all but index).  A probe's error
 * is returned (r->status PLAN_FAILED, r->error set).  Assumes attainment
 * falls as the rate grows (docs/plan.md says what happens when it does
 * not). */
int plan_search_rate(const struct plan_search *s, plan_probe_fn fn, void *ctx,
		     struct plan_result *r, struct ss_error *err);

/* Does a probe meet the target?  Attainment >= target (to 1e-9), and the
 * arrivals span at least min_span x the mean E2E latency. */
bool plan_meets(const struct plan_search *s, const struct plan_probe *p);
/* plan_meets on the probe's nominal attainment (plan --conservative's
 * attainment_nominal); plan_meets where there is none. */
bool plan_meets_nominal(const struct plan_search *s, const struct plan_probe *p);

/* The best probe (at max_scale), NULL when there is none. */
const struct plan_probe *plan_result_best(const struct plan_result *r);

/* ---- evaluating a configuration ----------------------------------------- */

/* Everything a configuration's evaluation reads besides the configuration. */
/* Cost models kept across the configurations a process evaluates, one per
 * (GPU, tp): a measured one reads and interpolates the calibration store
 * (~10^8 instructions), as much as several probes of a short workload.
 * The cost models' results do not depend on what they priced before, so
 * sharing them changes no result.  Zero-initialise; plan_cm_cache_release
 * frees the models.  A cache is for one plan_eval (the models depend on
 * its base options) and one process (forked workers fill their own). */
#define PLAN_CM_CACHE_MAX 16
struct plan_cm_cache {
	int n;
	struct {
		const struct gpu_spec *gpu;
		int tp;
		struct cost_model *cm;
		enum ss_dtype weight_dtype, kv_dtype;   /* the cost model's precision */
		int ep, dp_attention;   /* the pool's layout (plan_config) */
	} e[PLAN_CM_CACHE_MAX];
};
void plan_cm_cache_release(struct plan_cm_cache *c);

/* Probes kept for the same configuration with a larger running-set limit
 * (--max-batch: max_num_seqs, max_batch).  A batch policy's running-set
 * limit L acts only where its admission loop stops because the running set
 * after the step's admissions would exceed L (every policy's `end + i >=
 * max_seqs` / `n_seqs < max_seqs` / `end + i < max_batch`), and then the
 * running set after that step holds L requests.  So in a probe whose
 * instances' running sets all stayed below L (engine instance_stats.
 * peak_running < L) the limit never acted, and the same probe with any
 * larger limit L' makes every decision the same and gives the same run,
 * bit for bit.  That holds only while the limit has no other effect: the
 * engine also sizes the plan buffers by it (no effect), looks up the prefix
 * cache for that many waiting requests, and keeps that many in order under
 * an order with keys (sjf, spf, priority, vtc; decode instances offer the
 * holders of received KV first among them) -- so probes are reused only
 * with the prefix cache off and an order without keys (fcfs):
 * plan_probes_reusable().  The probe's figures do not contain the limit,
 * so a reused probe is the simulated one's bytes.
 *
 * The cache holds the probes of one configuration-without-its-limit
 * (key_base) at a time, one entry per rate scale: the smallest limit whose
 * probe at that scale stayed below it.  A configuration with another
 * key_base empties it, so the configurations that differ only in their
 * limit must be evaluated one after the other, smaller limits first, in
 * one process (they are consecutive in the enumeration; the runners hand
 * them to one worker).  Zero-initialise; plan_probe_cache_release frees. */
struct plan_probe_cache {
	char key_base[384];      /* plan_config.key with max_batch 0 */
	struct plan_probe_cache_entry {
		double scale;
		int32_t limit;   /* requests; the probe's running sets stayed below it */
		struct plan_probe probe;
	} *e;
	size_t n, cap;
	/* probes of the configurations that used the cache, over every
	 * evaluation with it: run, and copied */
	uint64_t simulated, reused;
};
void plan_probe_cache_release(struct plan_probe_cache *c);

/* Can probes be reused across running-set limits under these fixed
 * options (prefix cache off, an order without keys)? */
bool plan_probes_reusable(const struct engine_config *base);
/* a and b differ at most in their running-set limit (max_batch), and both
 * have one (the policy names a batch key, max_batch > 0). */
bool plan_config_same_but_limit(const struct plan_config *a, const struct plan_config *b);

struct plan_eval {
	const struct engine_config *base;    /* fixed options: model, router, cost model, stores, seed... */
	const struct workload *wl;           /* the workload at scale 1 (n >= 1) */
	double rate_rps;                     /* wl's request rate, plan_workload_rate() */
	struct slo_config slo;
	struct plan_search search;
	struct plan_cm_cache *cms;           /* optional (NULL: a cost model per configuration) */
	/* optional (NULL: every probe simulated); one per process, like cms */
	struct plan_probe_cache *probes;
	/* The interval on the probes' latency figures (docs/metrics.md
	 * "Intervals"): interval_bounds() of the plan's engine profile, each
	 * raised to 1 + a probe's share outside the measured grid
	 * (plan_probe_interval); iv_entry NULL: none. */
	const char *iv_entry;
	double iv_lo[INTERVAL_METRICS], iv_hi[INTERVAL_METRICS];
	/* --conservative (docs/plan.md "Conservative plans"): a probe's
	 * attainment is counted on the pessimistic end of the interval, each
	 * SLO divided by its metric's widened hi bound; the attainment under
	 * the SLOs as given is kept beside it (plan_probe.attainment_nominal).
	 * false: none. */
	bool conservative;
};

/* The interval [*lo, *hi] on figure v of interval metric m (enum
 * interval_metric) of probe p: v x pe's bounds, raised to 1 + p's share
 * outside the measured grid; false (NaN) when there is none. */
bool plan_probe_interval(const struct plan_eval *pe, const struct plan_probe *p, int m, double v,
			 double *lo, double *hi);

/* Request rate of a workload: (n - 1) / (last - first arrival), req/s;
 * 0 when n < 2 or all requests arrive at once. */
double plan_workload_rate(const struct workload *wl);

/* Evaluate c: plan_search_rate() with one engine run per probe, the
 * workload's arrival times divided by the probe's scale (rounded to the
 * ns, as `servesim run --rate-scale` does).  r->index = c->index.  With
 * pe->probes, a probe the cache holds for c with a smaller limit is copied
 * instead of run (r->n_reused counts them); the result is the same bytes
 * but for n_reused. */
int plan_evaluate(const struct plan_eval *pe, const struct plan_config *c,
		  struct plan_result *r, struct ss_error *err);

/* One simulation of c on pe->wl at rate scale `scale` (arrival times
 * divided by it; closed loop: clients multiplied), with pe->rate_rps the
 * rate of pe->wl at scale 1: the probe a search would run there.  `plan
 * --verify` runs the best configurations on the whole workload with it
 * (docs/plan.md, "Verifying on the whole workload"). */
int plan_verify(const struct plan_eval *pe, const struct plan_config *c, double scale,
		struct plan_probe *p, struct ss_error *err);

/* The scale of pe->wl at which plan_verify runs at the rate of probe b
 * (found on another cut of the workload): b->rate_rps / pe->rate_rps, so
 * the same requests per second; closed loop: b->scale, the same clients
 * per client of the workload. */
double plan_verify_scale(const struct plan_eval *pe, const struct plan_probe *b);

/* A configuration re-run on the whole workload (--verify). */
struct plan_verified {
	uint32_t index;              /* of the configuration */
	double scale;                /* of the whole workload */
	double predicted_attainment; /* the plan's at its maximum rate */
	struct plan_probe probe;     /* the run on the whole workload */
	bool meets;                  /* plan_meets(probe): the target holds on the whole */
};
/* What prices c's steps: per pool, the backend of its GEMM, prefill- and
 * decode-attention times (cost_model_op_backend: "table", "fit",
 * "roofline", "constant", ...), one name when they agree, else the
 * distinct ones joined by '+' ("table+roofline"); mixed pools
 * "prefill/decode" ("table/roofline").  *roofline: one of those operators
 * of either pool comes from the roofline (no measurement behind it).
 * Takes the pools' cost models from pe->cms (building them there, as
 * plan_evaluate does).  0 or a negative errno. */
#define PLAN_PRICED_BY_LEN 64
int plan_config_priced_by(const struct plan_eval *pe, const struct plan_config *c, char *buf,
			  size_t len, bool *roofline, struct ss_error *err);

/* How one pool of a configuration is priced (docs/plan.md "Like for
 * like"): from its GPU's own measurements (table, fit, distserve), from
 * another GPU's measured tables scaled by the roofline ("scaled"), or from
 * specifications alone (roofline, constant: no measurement behind its
 * GEMMs and attention). */
enum plan_route { PLAN_ROUTE_OWN = 0, PLAN_ROUTE_SCALED, PLAN_ROUTE_MODEL };
/* The route of c's pool (0: colocated or prefill; 1: decode) and, for
 * PLAN_ROUTE_SCALED, the reference GPU's name in *ref (transfer none; NULL
 * otherwise), from the pool's cost model in pe->cms (built there, as
 * plan_evaluate does).  0 or a negative errno. */
int plan_config_route(const struct plan_eval *pe, const struct plan_config *c, int pool,
		      enum plan_route *route, const char **ref, struct ss_error *err);

/* ---- what the plan reports ---------------------------------------------- */

/* A configuration's headline figures (from its best probe; zeros when it
 * has none).  Per-dollar figures are NAN when the price is unknown. */
struct plan_figures {
	double max_rate_rps;             /* the largest rate meeting the target (DistServe's goodput) */
	double goodput_rps;              /* max_rate_rps x attainment there: requests meeting
					  * every SLO per second in steady state, req/s */
	double goodput_per_gpu;          /* req/s per GPU */
	double goodput_per_usd_hour;     /* req/s per USD/h (x 3600 = requests per USD) */
	bool meets_at_scale_1;           /* the workload as given meets the target */
};
void plan_figures(const struct plan_config *c, const struct plan_result *r,
		  const struct plan_search *s, struct plan_figures *f);

/* A point for the Pareto frontier: lower cost and lower latency are better. */
struct plan_point {
	double cost;
	double latency;
	bool eligible;           /* only eligible points can be on the frontier */
};

/* on[i] = point i is on the frontier: eligible, and no other eligible point
 * has cost <= and latency <= with one of them smaller; of points equal in
 * both, only the first is on it. */
void plan_pareto(const struct plan_point *pts, size_t n, bool *on);

/* Indices 0..n-1 ordered by goodput per GPU, highest first; ties (and
 * configurations without a result) by index. */
void plan_rank(const struct plan_config *cfg, const struct plan_result *res, size_t n,
	       const struct plan_search *s, size_t *order);

/* ---- fingerprints -------------------------------------------------------- */

/* 64-bit FNV-1a of n bytes, continuing from h (start: PLAN_FNV_INIT). */
#define PLAN_FNV_INIT 0xcbf29ce484222325ULL
uint64_t plan_fnv1a(uint64_t h, const void *p, size_t n);
/* Of the workload's content: arrivals, lengths, tenants, priorities, prefixes. */
uint64_t plan_workload_hash(const struct workload *wl);
/* Of the GPU fields that change a simulation (not its price). */
uint64_t plan_gpu_hash(const struct gpu_spec *g);
/* Of a configuration's GPUs: plan_gpu_hash(c->gpu), or, mixed, that
 * continued with the decode GPU's figures. */
uint64_t plan_config_gpu_hash(const struct plan_config *c);

/* The plan's fingerprint: what every stored result depends on besides its
 * configuration (servesim version, workload content, model, SLOs, target,
 * search parameters, fixed engine options, calibration stores by path and
 * size).  desc gets the readable text (may be NULL), hex the 16-digit
 * hash of it. */
void plan_fingerprint(const struct plan_eval *pe, const char *version, char *desc,
		      size_t desc_len, char hex[17]);

/* ---- outputs (analysis/plan-out.c) -------------------------------------- */

enum plan_cost_axis { PLAN_COST_AUTO = 0, PLAN_COST_GPUS, PLAN_COST_USD };
/* --objective: the order of the --rate table (docs/plan.md). */
enum plan_objective { PLAN_OBJ_COST = 0, PLAN_OBJ_GPUS, PLAN_OBJ_ENERGY, PLAN_OBJ_TTFT };
const char *plan_objective_name(enum plan_objective o);
enum plan_latency { PLAN_LAT_TTFT = 0, PLAN_LAT_TPOT, PLAN_LAT_E2E };

/* A finished plan, as the writers see it. */
struct plan_report {
	const char *version;
	const char *fingerprint;
	const char *workload;                /* source: trace path or generator */
	uint64_t n_requests;
	const char *model;
	const struct plan_eval *pe;
	const struct plan_config *cfg;       /* n configurations, in index order */
	const struct plan_result *res;       /* res[i] for cfg[i] */
	size_t n;
	size_t resumed;                      /* results taken from the database */
	struct plan_excluded excluded;
	enum plan_cost_axis cost_axis;       /* AUTO: USD when every configuration has a price */
	enum plan_latency latency;           /* the frontier's latency: its p99 at scale 1 */
	int top;                             /* configurations in the text table */
	int plot_top;                        /* configurations in the attainment plot */
	/* the workload a trace cut by --num-requests / --duration, compared
	 * with the whole trace; NULL when not a cut trace */
	const struct wl_slice *slice;
	/* the workload's requests longer than the context (workload.h), or
	 * NULL */
	const struct wl_context *context;
	/* --verify (verified not NULL): n_verified re-runs on the whole
	 * workload of verify_requests requests at verify_rate_rps (scale 1) */
	const struct plan_verified *verified;
	size_t n_verified;
	uint64_t verify_requests;
	double verify_rate_rps;
	/* What priced each configuration (plan_config_priced_by), n entries
	 * each, and whether the roofline priced some of its operators; NULL:
	 * not known (then no provenance is written). */
	const char (*priced_by)[PLAN_PRICED_BY_LEN];
	const bool *roofline;
	/* --rate: the target rate, req/s (0: none), the objective and the
	 * workload's mean output tokens per request (cost per token) */
	double rate_rps;
	enum plan_objective objective;
	double mean_output_tokens;
	/* the instance counts of colocated configurations were bisected
	 * (cli/cmd-plan.c): PLAN_SKIPPED results are those it did not need */
	bool bisected;
	const char *command_line;            /* as typed, for report.html; NULL: left out */
	/* How the plan priced its GPUs (docs/plan.md "Like for like"): one
	 * line naming each GPU's route when they differ (some from their own
	 * measurements, some scaled, some by the roofline); NULL: alike. */
	const char *pricing_note;
	/* --like-for-like: every GPU priced one way, like_pricing ("tables":
	 * each from its family's measured tables, scaled by the roofline
	 * where not its own; "roofline"), and default_res (n entries; NULL
	 * when the default pricing is that already) the results under the
	 * default pricing, whose winner (plan_winner) is compared. */
	bool like_for_like;
	const char *like_pricing;
	const struct plan_result *default_res;
};

/* The plan's winner: with --rate its first row (the cheapest sustaining
 * deployment by the objective), else its first row by goodput per GPU;
 * res (n entries, rep->res when NULL) the results ranked; -1 when no
 * configuration qualifies. */
long plan_winner(const struct plan_report *rep, const struct plan_result *res);

/* A configuration's figures at the target rate R (rep->rate_rps > 0). */
struct plan_rate_figures {
	bool sustains;           /* its highest sustained rate >= R */
	double headroom;         /* highest sustained rate / R */
	/* USD per million output tokens at R: usd_per_hour / (R x mean output
	 * tokens x 3600) x 1e6; NAN when unpriced */
	double usd_per_m_tokens;
	/* J per output token from the probe at R, or the closest probe at or
	 * above R that met the target (at_rate false); NAN when unknown */
	double j_per_token;
	bool at_rate;
	double ttft_p99_ms;      /* of that probe */
	double outside_grid;     /* of that probe, 0..1 */
	const struct plan_probe *probe;   /* (transfer none) that probe, NULL when none */
};
/* Fill *f for configuration i (all zeros / NAN when it does not sustain R). */
void plan_rate_figures(const struct plan_report *rep, size_t i, struct plan_rate_figures *f);
/* The objective actually used: cost falls back to gpus when a listed
 * configuration has no price (as --pareto-cost auto does). */
enum plan_objective plan_objective_used(const struct plan_report *rep);
/* The configurations sustaining R, best first by the objective (ties: by
 * cost, then GPUs, then index); returns how many (order has rep->n room). */
size_t plan_rate_order(const struct plan_report *rep, size_t *order);

/* Resolve AUTO to GPUS or USD. */
enum plan_cost_axis plan_cost_axis(const struct plan_report *rep);
/* on[i] for every configuration (n entries). */
void plan_frontier(const struct plan_report *rep, bool *on);

/* plan.json document (transfer full); NULL when out of memory. */
json_t *plan_json(const struct plan_report *rep);
/* plan.csv, one row per configuration in index order. */
void plan_csv(FILE *f, const struct plan_report *rep);
/* The text table: the top configurations by goodput per GPU, the frontier. */
void plan_text(FILE *f, const struct plan_report *rep);
/* Write plan.json, plan.csv, the plots (attainment.*, pareto.*) and
 * report.html into dir, each under a temporary name; *plots_skipped when
 * gnuplot is missing. */
int plan_write_dir(const char *dir, const struct plan_report *rep, bool *plots_skipped,
		   struct ss_error *err);
/* dir/report.html (plan-html.c): the text's tables, the PNGs of plots[]
 * (file stems) embedded, or a note that gnuplot was missing. */
int plan_html_write(const char *dir, const struct plan_report *rep, bool plots_skipped,
		    const char *const *plots, int n_plots, struct ss_error *err);
/* Create dir (and its parents) and remove the plan.json and plan.csv an
 * earlier plan left there, so a plan that fails or is interrupted never
 * leaves a directory that looks complete. */
int plan_prepare_dir(const char *dir, struct ss_error *err);

/* ---- the results database (analysis/plan-db.c) -------------------------- */

struct plan_db;

/* Open (creating if missing) the plan database at path: WAL journal, a busy
 * timeout, one transaction per stored result.  A file that is another
 * kind of database is an error naming it. */
int plan_db_open(struct plan_db **out, const char *path, const char *fingerprint,
		 const char *description, struct ss_error *err);
void plan_db_close(struct plan_db *db);

/* For each configuration with a stored result under this fingerprint (and
 * the same GPU specification), fill res[i] and set done[i]; *n_done counts
 * them.  res[i].index = cfg[i].index. */
int plan_db_load(struct plan_db *db, const struct plan_config *cfg, size_t n,
		 struct plan_result *res, bool *done, size_t *n_done, struct ss_error *err);

/* Store (or replace) one result; PLAN_FAILED results are not stored. */
int plan_db_store(struct plan_db *db, const struct plan_config *c,
		  const struct plan_result *r, struct ss_error *err);

/* The same, with what priced the configuration (plan_config_priced_by;
 * NULL: unknown) in the priced_by column and its best probe's share
 * outside the measured grids in outside_grid.  PLAN_BELOW and
 * PLAN_SKIPPED results are not stored either (they depend on --rate). */
int plan_db_store_priced(struct plan_db *db, const struct plan_config *c,
			 const struct plan_result *r, const char *priced_by, struct ss_error *err);

/* Rows under this fingerprint (tests). */
int plan_db_count(struct plan_db *db, int64_t *n, struct ss_error *err);

#endif
