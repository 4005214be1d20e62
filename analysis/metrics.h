/* servesim — run metrics (definitions: docs/design.md section 6, docs/metrics.md).
 *
 * summary_compute() turns an engine's results into the figures a capacity
 * planner reads.  Per-request metrics (TTFT, TPOT, E2E, queueing delay) are
 * exact: every request's value is kept and sorted.  ITL comes from the
 * engine's streaming histogram (quantiles within 0.2%).
 */
#ifndef SS_METRICS_H
#define SS_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "ss-error.h"

/* mean and percentiles of one metric, in ms; n = number of samples */
struct dist {
	uint64_t n;
	double mean, p50, p90, p95, p99, max;
};

/* SLO targets in ms; a value <= 0 means "not set". */
struct slo_config {
	double ttft_ms;
	double tpot_ms;
	double e2e_ms;
	/* every gap between two of a request's output tokens (TBT) at most
	 * this: no generation stall longer (Sarathi-Serve's concern) */
	double tbt_ms;
};

#define SUMMARY_MAX_REASONS 8
/* Tenants summarized one by one (all count towards fairness_jain). */
#define SUMMARY_MAX_TENANTS 64

struct tenant_summary {
	int32_t tenant;              /* the source's tenant id */
	uint64_t requests, completed, rejected;
	struct dist ttft_ms, tpot_ms;
	double slo_attainment;
	double service_tokens_per_s; /* prompt + output tokens computed for it while
				      * requests were arriving (docs/metrics.md) */
};

/* KV tiers of one instance or of the run (--kv-offload): hits by tier,
 * blocks moved between GPU and host memory, and the PCIe bytes. */
#define SUMMARY_MAX_TIER_INSTANCES 32
struct kv_tier_summary {
	uint64_t gpu_hit_tokens;     /* prompt tokens found in GPU memory */
	uint64_t host_hit_tokens;    /* prompt tokens loaded from host memory */
	uint64_t offloaded_blocks;   /* cached blocks copied to host as the GPU evicted them */
	uint64_t kept_blocks;        /* evicted blocks host already held (no copy) */
	uint64_t dropped_blocks;     /* evicted blocks host had no room for */
	uint64_t loaded_blocks;      /* blocks copied back to GPU by lookups */
	uint64_t host_evicted_blocks;/* cached blocks host dropped */
	int64_t host_held_blocks;    /* cached blocks host holds at the end */
	int64_t host_peak_blocks;    /* most host blocks in use, cached + swapped (per instance) */
	int64_t host_capacity_blocks;
	double d2h_bytes, h2d_bytes; /* PCIe bytes of the stores and loads */
};

struct summary {
	uint64_t requests;           /* in the workload */
	uint64_t completed;
	uint64_t rejected;
	uint64_t unfinished;         /* must be 0 after a full run */
	/* by reject_reason text (borrowed from the requests); reasons beyond
	 * the table share the last entry, "other" */
	struct { const char *reason; uint64_t count; } reject_reasons[SUMMARY_MAX_REASONS];
	int n_reject_reasons;

	struct dist ttft_ms, tpot_ms, itl_ms, e2e_ms, queue_ms;

	double duration_s;           /* first arrival to last finish */
	double requests_per_s;       /* completed / duration */
	double input_tokens_per_s;   /* prompt tokens of completed requests / duration */
	double output_tokens_per_s;

	struct slo_config slo;
	double slo_attainment;       /* share of all requests meeting every SLO (rejected miss) */
	double goodput_rps;          /* completed requests meeting every SLO / duration */
	double goodput_rps_per_gpu;

	uint64_t preemptions;
	uint64_t swap_outs, swap_ins;
	double swap_s;               /* PCIe time added to steps by swapping */
	bool swap;
	/* prefix cache */
	bool prefix_cache;
	uint64_t prefix_lookup_tokens, prefix_hit_tokens, prefix_evictions;
	double prefix_hit_rate;      /* hit / lookup tokens, 0 when no lookups */
	/* the shared remote KV tier (--kv-remote); kv_remote false = none */
	bool kv_remote;
	struct kv_remote_stats remote;
	/* KV tiers (--kv-offload; kv_offload false and the rest 0 without
	 * it): the whole run's, and the first SUMMARY_MAX_TIER_INSTANCES
	 * instances' (docs/outputs.md, kv_tiers) */
	bool kv_offload;
	struct kv_tier_summary kv_tiers;
	uint32_t n_tier_instances;
	struct kv_tier_summary tier_inst[SUMMARY_MAX_TIER_INSTANCES];
	/* tenants */
	uint32_t n_tenants;          /* all of them; tenants[] holds the first SUMMARY_MAX_TENANTS */
	struct tenant_summary tenants[SUMMARY_MAX_TENANTS];
	double fairness_jain;        /* Jain's index of service_tokens_per_s over all tenants */
	const char *predictor;
	/* Speculative decoding (sim/spec.h; spec NULL and the rest 0
	 * without): the run's --spec, what it did over all instances, and
	 * acceptance_length = tokens emitted per verify (the bonus token
	 * included), accept_rate = accepted / drafted, draft_share and
	 * verify_share = drafting time and the drafts' share of verify steps
	 * over busy time. */
	const struct spec_config *spec;
	struct spec_stats spec_st;
	double spec_acceptance_length, spec_accept_rate, spec_draft_share, spec_verify_share;
	/* Multi-LoRA serving (sim/lora.h; lora NULL and the rest 0 without):
	 * the run's --lora (resolved), what its adapters did over all
	 * instances, hit_rate = a step's adapters found in a GPU slot over
	 * all (hits + loads), load_share and gemm_share = time waiting for
	 * loads and the adapter GEMMs over busy time, adapters_per_step =
	 * distinct adapters per step that had any. */
	const struct lora_config *lora;
	struct lora_stats lora_st;
	double lora_hit_rate, lora_load_share, lora_gemm_share, lora_adapters_per_step;
	bool disaggregated;
	uint64_t kv_transfers;
	struct dist kv_transfer_ms;  /* prefill end to joining the decode queue */
	/* cost: GPUs x catalog price (0 when the catalog has no price) */
	double cost_usd_per_hour;
	double cost_usd;             /* over duration_s */
	double usd_per_million_output_tokens;
	double kv_util_mean;         /* time-weighted used/total blocks, over instances */
	double kv_util_peak;
	struct dist batch_seqs;      /* requests per step (not ms) */
	struct dist batch_tokens;    /* tokens per step (not ms) */
	uint64_t steps;

	double energy_j;             /* busy + idle, all GPUs */
	double energy_busy_j;
	double energy_idle_j;
	double j_per_request;        /* energy / completed */
	double j_per_output_token;
	double avg_power_w_per_gpu;
	double energy_prefill_j;     /* busy energy attributed to prefill work */
	double energy_decode_j;      /* busy energy attributed to decode work */
	double peak_power_w_per_gpu; /* highest step power, per GPU */

	uint64_t out_of_grid;        /* cost-model predictions outside the measured grid */
	double out_of_grid_share;    /* share of busy time those predictions cover */
	const char *op_backend[COST_OP_COUNT]; /* backend per operator (NULL = cost_model) */

	double op_share[COST_OP_COUNT]; /* share of busy time by operator */
	/* Pipelines (instances of pp > 1 stages; 0 stages when none): stage
	 * s's busy time as a share of the run, over the instances that have
	 * a stage s, and its bubble share, 1 - its busy time / the busiest
	 * stage's (the time it waits while the slowest stage works). */
	int pp_stages;
	double stage_busy_share[64], stage_bubble_share[64];

	int n_gpus;                  /* instances x tp */
	uint32_t n_instances;        /* as deployed (attention-DP ranks folded) */
	int attention_dp;            /* attention-DP ranks per instance (first pool), >= 1 */
	int64_t kv_blocks_per_instance; /* with attention DP: over the instance's ranks */
	const char *cost_model;
	/* the GPU whose measured tables the cost model scaled to this one
	 * ("scaled"), NULL = the GPU's own or none */
	const char *cost_reference;
	const char *engine;          /* engine profile name, "none" = kernels only */
	/* time series (--out): the sampling interval asked for and the one
	 * used, ns (larger when the series was coarsened to stay bounded,
	 * sim/tseries.h); 0 when sampling was off */
	int64_t sample_requested_ns, sample_interval_ns;
	uint64_t sampling_times;     /* sampling times kept */
	/* The interval on the predicted latency figures (summary_interval_set,
	 * docs/metrics.md "Intervals"); all zero: none. */
	struct summary_interval {
		/* the data/intervals.json entry whose bounds were taken: the
		 * engine profile's name, "prior" or "none"; NULL: no interval
		 * (the data folder has no intervals.json) */
		const char *entry;
		/* the cost model prices from specifications (roofline, constant),
		 * not measured kernels: bounds at least as wide as the prior's */
		bool spec_priced;
		/* exponent on the bounds for the share of busy time priced
		 * outside the measured grid: 1 + out_of_grid_share, >= 1 */
		double widen;
		/* the ratios (measured / predicted) applied to a predicted
		 * figure p: [p x lo, p x hi]; 0 where there is none */
		double lo[INTERVAL_METRICS], hi[INTERVAL_METRICS];
	} interval;
};

int summary_compute(struct summary *s, const struct engine_results *r,
		    const struct slo_config *slo, int tp, struct ss_error *err);

/* The part of summary_compute() that a capacity plan reads of each of its
 * probes, bit for bit what summary_compute() gives: requests, completed,
 * rejected (and reject_reasons), unfinished, duration_s, the three
 * throughputs, slo, slo_attainment, goodput_rps (and per GPU), n_gpus,
 * n_instances, kv_blocks_per_instance, cost_model, and the ttft_ms, tpot_ms
 * and e2e_ms distributions; every other field is zero.  The percentiles
 * come from selecting the ranks they read rather than sorting, and no
 * histogram is built: about a twentieth of summary_compute()'s
 * instructions on 2,000 requests. */
int summary_compute_slo(struct summary *s, const struct engine_results *r,
			const struct slo_config *slo, int tp, struct ss_error *err);

/* Fill s->interval (docs/metrics.md "Intervals"), after summary_compute():
 * the bounds of cat's data/intervals.json entry for s->engine when
 * `shipped` (the profile is the data folder's own; a user's --engine-catalog
 * or --engine-store profile is not), "none" for --engine none, else
 * "prior"; a metric the entry has no bounds for takes ITL's from its TPOT,
 * then the prior's; a cost model named cost_model that prices from
 * specifications takes at least the prior's width; every bound is raised
 * to the power 1 + s->out_of_grid_share.  No intervals.json: nothing. */
void summary_interval_set(struct summary *s, const struct catalog *cat, bool shipped,
			  const char *cost_model);
/* The bounds summary_interval_set() starts from, before widening: of
 * engine profile `engine` (NULL or "none": --engine none), shipped or
 * not, priced by cost model cost_model, in lo[] and hi[] (0 where none);
 * *spec_priced says whether the prior's width was imposed.  Returns the
 * entry's name ("prior" for the prior's), NULL when cat has no intervals. */
const char *interval_bounds(const struct catalog *cat, const char *engine, bool shipped,
			    const char *cost_model, bool *spec_priced, double lo[INTERVAL_METRICS],
			    double hi[INTERVAL_METRICS]);
/* The interval [*lo, *hi] on a predicted figure v of interval metric m of
 * s; false (and NaN) when there is none or v is not finite. */
bool summary_interval_of(const struct summary *s, int m, double v, double *lo, double *hi);

/* The metric catalog (analysis/metrics.def): the figures of a run compared
 * across runs (sweep columns, compare rows), each declared once, and where
 * summary.json, summary.txt and results.db hold them. */
enum metric_id {
#define DIST(ID, ...) METRIC_##ID,
#define VALUE(ID, ...) METRIC_##ID,
#include "metrics.def"
#undef DIST
#undef VALUE
	METRIC_COUNT
};

struct metric_desc {
	const char *name;          /* "ttft_p99_ms": sweep column, compare key */
	const char *label;         /* "TTFT p99 ms": tables */
	const char *json, *sub;    /* where summary.json holds it: json.sub (sub NULL: json) */
	bool dist;                 /* a percentile of a distribution (DIST) */
	bool higher_better;
	bool slo;                  /* depends on the SLOs (comparable under equal SLOs only) */
	bool energy;               /* an energy figure: summary.json's null when nothing metered it */
	/* enum interval_metric: the bounds that put an interval on a DIST's
	 * figures; INTERVAL_NONE for a VALUE */
	int interval;
	double scale;              /* a table shows scale x value ... */
	int decimals;              /* ... with this many decimals */
	/* byte offsets in struct summary: DIST, of its struct dist (and of
	 * the statistic in it, stat); VALUE, of its double (stat 0) */
	size_t field, stat;
	/* the value of a summary (summary_compute()) to compare; NaN where it
	 * has none */
	double (*get)(const struct summary *s);
};

/* The entry of id (< METRIC_COUNT). */
const struct metric_desc *metric_desc(enum metric_id id);
/* The id named name, or -1. */
int metric_find(const char *name);
/* The figure of d in s as the outputs write it: a DIST's statistic (NaN
 * for an empty distribution), a VALUE's field whatever `defined` says. */
double metric_value(const struct metric_desc *d, const struct summary *s);
/* The interval metric (enum interval_metric) of the catalogued
 * distribution at byte offset field of struct summary (ttft_ms ...), or
 * INTERVAL_NONE for one the catalog gives no interval (queue_ms). */
int metric_field_interval(size_t field);
/* A DIST's distribution in s. */
const struct dist *metric_dist(const struct metric_desc *d, const struct summary *s);

/* summary.json's figure of id (a parsed summary.json, or what a reader
 * built in its shape): the number at the catalog's place, NaN where it is
 * absent, null or not a number. */
struct json_t;
double metric_json_get(const struct json_t *summary, enum metric_id id);
/* Put v (transfer full, also on failure) at id's place in summary, making
 * the object json of a json.sub place where summary has none: 0, -ENOMEM,
 * or -EINVAL where json is there but not an object. */
int metric_json_set(struct json_t *summary, enum metric_id id, struct json_t *v);

/* Does request r meet every SLO in slo?  (TPOT is met trivially by requests
 * with one output token; rejected and unfinished requests never meet.) */
bool request_meets_slo(const struct req_record *r, const struct slo_config *slo);

/* Per-request derived values in ms; NAN where undefined. */
double request_ttft_ms(const struct req_record *r);
double request_tpot_ms(const struct req_record *r);
double request_e2e_ms(const struct req_record *r);
double request_queue_ms(const struct req_record *r);

#endif
