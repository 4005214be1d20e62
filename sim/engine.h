/* servesim — the discrete-event engine.
 *
 * One engine runs one scenario: a workload replayed against `n_instances`
 * identical instances (one model on `tp` GPUs of one type) behind a router.
 * The engine owns all state; routing and batch formation are delegated to
 * policies (policies/policy.h); a step's duration comes from the executor
 * (sim/executor.h).  There are no globals: many engines can run in one
 * process.  The same seed and inputs give bit-identical results.
 */
#ifndef SS_ENGINE_H
#define SS_ENGINE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "costmodel.h"
#include "precision.h"
#include "hist.h"
#include "request.h"
#include "lora.h"
#include "spec.h"
#include "ss-error.h"
#include "workload.h"

struct engine;

/* The clock events run on.  Simulation uses none (virtual time jumps from
 * event to event); live runs pass a wall clock, so arrivals are released at
 * their real times and a step's start is when it really starts.  Times are
 * ns since the run began. */
struct engine_clock {
	int64_t (*now)(void *ctx);
	void (*sleep_until)(void *ctx, int64_t t_ns);
	void *ctx;
};

/* The pools of a disaggregated cluster, numbered as the engine numbers
 * them: arrivals go to pool 0, the KV moves on to pool 1. */
enum engine_pool_id {
	ENGINE_POOL_PREFILL = 0,
	ENGINE_POOL_DECODE = 1,
	ENGINE_POOLS = 2,
};

/* What one pool of a disaggregated cluster sets for itself: its instance
 * count and the fields of sim/engine-pool.def, each 0 / NULL = the
 * colocated field of the same name (engine_pool_resolve). */
struct engine_pool_config {
	uint32_t n;                  /* instances in the pool, 0 = not disaggregated */
#define ENGINE_POOL_FIELD(kind, type, name, ...) type name;
#include "engine-pool.def"
#undef ENGINE_POOL_FIELD
};

struct engine_config {
	const struct model_spec *model;
	const struct gpu_spec *gpu;
	int tp;                      /* GPUs per instance, >= 1 */
	uint32_t n_instances;        /* >= 1 */
	/* tokens per KV block; 0 (the default) = the engine profile's
	 * kv_block_size, else 16 (engine_block_size) */
	int block_size;
	/* KV capacity (docs/kv-cache.md, "Engine rules"): at most one of
	 * these is given (> 0); neither (0, the default) = the engine
	 * profile's rule, else vLLM's 0.9 of total memory (engine_kv_rule_of).
	 * gpu_mem_util: vLLM's rule, the fraction of HBM for weights +
	 * activations + KV; kv_free_fraction: TensorRT-LLM's, the fraction of
	 * the memory left after weights and the activation reserve. */
	double gpu_mem_util;
	double kv_free_fraction;
	double activation_reserve_bytes; /* per GPU; < 0 = estimate (docs/kv-cache.md) */
	int64_t kv_blocks_override;  /* > 0 forces the KV pool size (tests); 0 = derive */
	const char *policy;          /* "vllm[:key=value,...]" */
	const char *router;          /* "rr" (default; NULL too) | "lot" | ... [:key=value] */
	const char *order;           /* waiting-queue order, "fcfs" | "sjf" | ... */
	const char *victim;          /* preemption victim order, "newest" | ... */
	const char *admission;       /* "none" | "queue:max=N" | ... */
	const char *preemption;      /* "recompute" | "swap[:host_gb=G,pcie_gbps=B]" */
	const char *prefix_cache;    /* "off" | "on" | "blocks=N" */
	/* A KV store shared by every instance (docs/kv-cache.md "Remote
	 * tier"): "gb=G[,bw_gbps=B,latency_us=L]"; NULL = none. */
	const char *kv_remote;
	/* KV offload to host memory: "host_gb=G[,bw_gbps=B]"; NULL or "off"
	 * = none (docs/kv-cache.md, "Offload to host memory") */
	const char *kv_offload;
	const char *predictor;       /* output-length predictor: "none" | "oracle" |
				      * "noisy:sigma=S"; NULL = none, or oracle for --order sjf
				      * and a batch policy that reads predictions */
	int64_t slo_ttft_ns;         /* the run's TTFT SLO for policies, 0 = none */
	/* Prefill/decode disaggregation (docs/disaggregation.md): with
	 * pools[ENGINE_POOL_PREFILL].n > 0 and pools[ENGINE_POOL_DECODE].n > 0
	 * the cluster is two pools, and n_instances/gpu/tp are not used for
	 * serving (gpu, tp, ... stay the defaults of the pools' own:
	 * engine_pool_resolve).  Arrivals are routed over the prefill pool;
	 * after its prefill a request's KV moves to the decode instance the
	 * pairing router picks. */
	struct engine_pool_config pools[ENGINE_POOLS];
	const char *pairing;         /* a router over the decode pool, default "lor" */
	bool kv_overlap;             /* overlap the KV transfer with prefill, layer by layer */
	int gpus_per_node;           /* placement for the link model, default 8 */
	/* Semi-PD (docs/disaggregation.md): > 0 splits each of the
	 * n_instances GPUs into a prefill and a decode instance with these
	 * shares of its compute and memory bandwidth (semi_pd_sm) and of its
	 * KV blocks (semi_pd_kv); KV moves between them without a copy. */
	double semi_pd_sm, semi_pd_kv;
	const char *cost_model;      /* "auto" | "roofline" | "table" | "fit" | "constant:..." */
	/* Optional, borrowed: cost models already built for pool 0 (the
	 * colocated or prefill pool) and pool 1 (decode), which must match
	 * the pools' GPU and tp; NULL = build from cost_model.  Lets a caller
	 * running many engines (servesim plan) load a calibration once. */
	struct cost_model *cost_models[2];
	const char *const *stores;   /* calibration stores for table/fit, preferred first */
	int n_stores;
	/* (transfer none) cost_config.ref_gpus: the GPUs whose tables may
	 * price another of their family ("scaled"); NULL = none */
	const struct gpu_spec *ref_gpus;
	size_t n_ref_gpus;
	double power_cap_w;          /* per-GPU power cap, W; 0 = none */
	double clock_frac;           /* locked SM clock, fraction of max; 0 = not locked */
	const char *shared_data;     /* cost_config.shared_data; NULL = none */
	/* (transfer none) The serving engine (engine-profile.h): its host
	 * work goes into every step's price (cost_config.engine); a legacy
	 * profile's api_* keys become the stack below when none is given.
	 * NULL = kernels only ("none"). */
	const struct engine_profile *engine;
	/* (transfer none) The serving stack (stack-profile.h, resolved):
	 * its latency goes into every request's way in and every token's way
	 * out (TTFT, E2E).  NULL = none: the engine's own clocks. */
	const struct stack_profile *stack;
	/* (transfer none) Speculative decoding (spec.h, spec_config_parse):
	 * NULL = off. */
	const struct spec_config *spec;
	/* (transfer none) Multi-LoRA serving (lora.h, lora_config_parse):
	 * NULL = off. */
	const struct lora_config *lora;
	uint64_t seed;
	int64_t sample_interval_ns;  /* time-series sampling period, 0 = off */
	const struct engine_clock *clock;   /* NULL = simulated time */
	/* Executor: NULL = the model-driven one (cost model).  A live run
	 * passes its own; exec_priv is its state (transfer none). */
	const struct executor_ops *executor;
	void *exec_priv;
	/* Speculative decoding's drafter with a caller's executor (live): an
	 * executor of the drafter's model (spec.draft) and its state, which
	 * runs each draft pass; NULL = the model-driven one over the
	 * drafter's cost model.  A live run that drafts must set it. */
	const struct executor_ops *draft_executor;
	void *draft_exec_priv;
	/* Memory this run may use, bytes (the machine's, or its cgroup's or
	 * rlimit's, as the caller found it); engine_new refuses a
	 * configuration whose engine_memory_estimate is larger.  0 = no
	 * limit. */
	uint64_t memory_limit_bytes;
	/* Closed-loop load (docs/workloads.md): > 0 = this many clients,
	 * each sending the workload's next request (workload order) when its
	 * previous one has left the run -- last token delivered, or rejected
	 * -- plus a think time.  All clients send their first request at 0
	 * (or client k at k x ramp_ns / concurrency), with no think time
	 * before it.  The workload's arrival times are
	 * ignored (workload_spec.closed builds them as 0); a request's arrival
	 * is when it is sent.  0 = open loop (the workload's times). */
	uint32_t concurrency;
	const char *think_time;      /* think_time_parse() spec; NULL = none */
	/* Closed loop: no request is sent at or after this time, ns (those
	 * in the run finish); 0 = until the workload is used up.  The
	 * results then hold the requests sent (engine_results.n_req). */
	int64_t send_until_ns;
	/* Closed loop: the clients start evenly over this long, ns (client k
	 * of N at k x ramp_ns / N); 0 = all at 0. */
	int64_t ramp_ns;
	/* Form every step with the batch policy's pick_step, never by the
	 * steady-decode path (steady.c); results are the same either
	 * way (test-engine proves it), so this is for that proof. */
	bool steady_off;
	/* Precision (precision.h, docs/cost-models.md): the linear layers'
	 * weights and the KV cache; SS_DTYPE_MODEL (0) = the model's own
	 * dtype_bytes, every pool alike. */
	enum ss_dtype weight_dtype, kv_dtype;
	/* Expert parallelism and data-parallel attention (docs/cost-models.md
	 * "Expert parallelism"), SGLang's convention: ep spreads a MoE model's
	 * routed experts over ep of the tp GPUs (ep divides tp); dp_attention
	 * splits an instance's tp GPUs into that many attention ranks of
	 * tp / dp_attention GPUs, each with its own scheduler, batch and KV
	 * cache (dp_attention divides tp), stepping together (a rank with
	 * nothing to run joins with an idle batch).  0 or 1 = off.  A
	 * disaggregated pool may set its own (pools[]). */
	int ep, dp_attention;
	/* Pipeline parallelism (docs/cost-models.md "Pipeline parallelism"):
	 * each instance is pp stages of tp GPUs, up to pp batches in flight;
	 * 0 or 1 = none.  A disaggregated pool may set its own (pools[]). */
	int pp;
	/* Local-attention models (sliding window, chunks): the sequence
	 * length, tokens, at which the KV pool's per-token bytes are taken
	 * (engine_kv_capacity, docs/kv-cache.md "Local attention"); 0 = the
	 * model's max_context.  Unused for other models. */
	int32_t kv_ref_tokens;
	/* The context a request may fill, prompt + output, tokens; 0 = the
	 * model's max_context (--max-context: a model override, as rope
	 * scaling or vLLM's --max-model-len make one). */
	int32_t max_context;
	/* Cancellation (docs/servesim.1.md "SIGNALS"): when non-NULL,
	 * engine_run reads *stop before each event (and after a live
	 * clock's wait) and, once it is non-zero, ends the run there: the
	 * event is not handled, requests still in the run are recorded as
	 * they stand (unfinished) and engine_run returns -EINTR.  The library
	 * installs no signal handler; a caller's handler sets the flag. */
	const volatile sig_atomic_t *stop;
};

/* "prefill" or "decode". */
const char *engine_pool_name(enum engine_pool_id pool);

/* The option that sets OPT ("tp", "dp-attention") of a pool, as messages
 * name it, into buf (len bytes): "--prefill-OPT" or "--decode-OPT", or, for
 * pool < 0 (colocated), "--OPT".  Returns buf. */
const char *engine_pool_option(int pool, const char *opt, char *buf, size_t len);

/* Is c disaggregated: both pools with instances? */
bool engine_config_disaggregated(const struct engine_config *c);

/* Pool `pool` of c as it serves: where c is disaggregated, each field of
 * the pool's own that is set, else (and for every field of a colocated or
 * semi-PD c) the colocated field of the same name; n is the pool's own
 * count, as given.  The one place the fallback is written. */
struct engine_pool_config engine_pool_resolve(const struct engine_config *c,
					      enum engine_pool_id pool);

/* Does p set anything (an instance count or a field of its own)? */
bool engine_pool_config_set(const struct engine_pool_config *p);
/* Are a and b the same pool as given (unresolved: a field not set differs
 * from one set to the colocated value)?  GPUs compare by catalog entry;
 * a NULL spec equals "".  The run-equality check of fit-engine's
 * observations (engine-obs.c). */
bool engine_pool_config_equal(const struct engine_pool_config *a,
			      const struct engine_pool_config *b);
/* "n N gpu NAME tp T ep E dp_attention D pp P policy SPEC" ("-" = not
 * set) into buf (len bytes, truncated): a plan's fingerprint. */
void engine_pool_config_describe(const struct engine_pool_config *p, char *buf, size_t len);

/* 0, or -ENOTSUP when c->spec (speculative decoding) meets what it is not
 * modelled with yet (--pp, --dp-attention, --semi-pd, multi-step
 * scheduling, a live executor); err says which.  engine_new checks it. */
int engine_spec_check(const struct engine_config *c, struct ss_error *err);

/* 0, or -ENOTSUP when c->lora (multi-LoRA serving) meets what it is not
 * modelled with yet (disaggregation, --pp, --dp-attention, --semi-pd,
 * multi-step scheduling, --spec, a live executor), or -EINVAL when the
 * model cannot carry its adapters; err says which.  engine_new checks it. */
int engine_lora_check(const struct engine_config *c, struct ss_error *err);

/* Fill defaults (block 16, utilization 0.9, reserve estimated, vllm, rr,
 * auto cost model (roofline when no store is given), seed 0, no sampling). */
void engine_config_defaults(struct engine_config *cfg);

/* Time-series sample of one instance. */
struct ts_sample {
	int64_t t_ns;
	int32_t instance;
	int32_t queued;              /* waiting requests */
	int32_t running;             /* requests in the running set */
	int32_t kv_used_blocks;
	double power_w;              /* instance power (all tp GPUs) at t: the step's, or idle */
};

/* Per-instance statistics, accumulated in streaming form. */
struct instance_stats {
	int32_t total_blocks;
	int32_t peak_used_blocks;
	double kv_block_ns;          /* integral of used blocks over time, block*ns */
	uint64_t steps;
	/* Data-parallel attention: steps this attention rank ran an idle
	 * batch to join its instance's MoE layers (not in steps) */
	uint64_t idle_steps;
	int64_t busy_ns;             /* time with a step in flight */
	double busy_energy_j;        /* energy of steps (all tp GPUs) */
	double prefill_energy_j;     /* share of busy energy spent on prefill work */
	double decode_energy_j;      /* share of busy energy spent on decode work */
	double peak_power_w;         /* highest step power, all tp GPUs, W */
	uint64_t out_of_grid;        /* cost-model predictions outside the measured grid */
	int64_t out_of_grid_ns;      /* step time those predictions cover */
	uint64_t preemptions;        /* recompute and swap */
	uint64_t swap_outs, swap_ins;/* preemptions by swapping, and the swaps back */
	int64_t swap_ns;             /* PCIe transfer time added to steps */
	uint64_t prefix_lookup_tokens; /* prompt tokens of admissions that looked up the cache */
	uint64_t prefix_hit_tokens;  /* of those, tokens found cached */
	uint64_t prefix_evictions;   /* cached blocks evicted */
	/* KV offload to host memory (--kv-offload; all 0 without it) */
	int64_t host_cap_blocks;     /* host KV space, blocks; 0 = no offload */
	uint64_t host_hit_tokens;    /* of prefix_hit_tokens, those loaded from host */
	uint64_t remote_hit_tokens;  /* of prefix_hit_tokens, those read from the remote store */
	uint64_t offload_blocks;     /* cached blocks copied to host as the GPU evicted them */
	uint64_t offload_kept_blocks;/* evicted blocks host already held (no copy) */
	uint64_t offload_dropped_blocks; /* evicted blocks host had no room for */
	uint64_t load_blocks;        /* blocks copied back from host by lookups */
	uint64_t host_evictions;     /* cached blocks host dropped (LRU, or room for swapped KV) */
	int64_t host_cached_blocks;  /* cached blocks host holds (at the end of a run) */
	int64_t host_peak_blocks;    /* most host blocks in use: cached + swapped KV */
	double offload_bytes, load_bytes; /* PCIe bytes of those stores (D2H) and loads (H2D) */
	int32_t gpus;                /* GPUs of the instance (its tp) */
	double idle_power_w;         /* the instance's idle power, all its GPUs */
	const char *role;            /* "mixed", "prefill" or "decode" */
	double cost_per_hour;        /* USD per hour for its GPUs (catalog), 0 = unknown */
	uint64_t kv_transfers_out;   /* KV caches sent to decode instances */
	/* Largest running set, requests: its size after a step's admissions,
	 * the figure a batch policy's running-set limit (max_num_seqs,
	 * max_batch) is compared with.  A run whose peak stayed below the
	 * limit L never met it (servesim plan reuses such probes for larger
	 * limits, analysis/plan.c).  Not printed in summaries. */
	uint32_t peak_running;
	int64_t op_ns[COST_OP_COUNT];/* time by operator, summed over steps */
	struct spec_stats spec;      /* speculative decoding (spec.h); all 0 without */
	struct lora_stats lora;      /* multi-LoRA serving (lora.h); all 0 without */
	/* A pipeline (pp > 1 stages): the time each stage ran batches, ns,
	 * stage_busy_ns[0 .. pp); NULL and 0 otherwise. */
	int64_t *stage_busy_ns;
	int32_t pp;
	struct ss_hist batch_seqs;   /* requests per step */
	struct ss_hist batch_tokens; /* tokens per step */
};

/* The shared remote KV tier's counters (--kv-remote, sim/kvm-remote.c). */
struct kv_remote_stats {
	int64_t capacity_blocks;     /* blocks the store holds at most */
	double block_bytes;          /* KV bytes of one block, whole model */
	uint64_t hit_tokens;         /* prompt tokens of admissions fetched from it */
	uint64_t blocks_fetched;     /* blocks read into GPU memory */
	double bytes;                /* bytes read, blocks_fetched x block_bytes */
	uint64_t fetches;            /* fetch batches (steps that read from it) */
	int64_t fetch_ns;            /* time the fetches added to steps */
	uint64_t puts;               /* blocks newly stored (write-through) */
	uint64_t evictions;          /* blocks dropped to make room (LRU) */
};

struct engine_results {
	const struct req_record *req; /* workload order; n_req entries */
	uint64_t n_req;              /* the workload's, or in a closed loop those sent */
	uint32_t n_instances;        /* scheduling units: instances, or attention-DP ranks */
	const struct instance_stats *inst;
	/* Instances as deployed (each attention-DP group of ranks one), and
	 * the first pool's ranks per instance (1 without DP attention); 0 in
	 * results built by hand: n_instances then counts both. */
	uint32_t n_deployed;
	int attention_dp;
	const struct ss_hist *itl;   /* every inter-token gap, ns */
	const struct ts_sample *samples;
	uint64_t n_samples;
	int64_t end_ns;              /* time of the last event */
	int64_t kv_blocks_per_instance;
	double kv_bytes_per_block;   /* whole instance (all tp GPUs) */
	double idle_power_w;         /* per instance (all tp GPUs) */
	/* From the executor (executor_ops.identity; by default the cost
	 * model's): what timed the steps. */
	const char *executor_name;   /* "model", "live" */
	const char *cost_model_name;
	const char *op_backend[COST_OP_COUNT]; /* backend that produced each operator's times */
	/* the GPU whose measured tables priced the first pool's ("scaled":
	 * cost_model_reference), NULL = its own or none */
	const char *cost_reference;
	int tp;
	bool prefix_cache;           /* caching was on */
	const struct spec_config *spec;  /* speculative decoding, NULL = off (engine_config's) */
	/* multi-LoRA serving, NULL = off: engine_config's, with the adapter
	 * count and host cache resolved (lora_new) */
	const struct lora_config *lora;
	const struct kv_remote_stats *kv_remote;  /* NULL = no remote tier */
	bool disaggregated;          /* prefill and decode pools */
	bool swap;                   /* preemption by swapping */
	/* Tenants: dense index t (req_view.tenant) is source tenant tenant_ids[t].
	 * tenant_service[t]: prompt + output tokens computed for t while
	 * requests were still arriving (the contention window, service_window_ns
	 * long: from the first arrival to the last). */
	uint32_t n_tenants;
	const int32_t *tenant_ids;
	const double *tenant_service;
	int64_t service_window_ns;
	const char *predictor;       /* "none", "oracle" or "noisy:sigma=S" */
	const char *engine_name;     /* the engine profile's name, "none" without one */
	/* Time series: the interval asked for (0 = off) and the one samples
	 * ended up at, ns; larger when the series was coarsened to stay
	 * within its bounds (tseries.h); 0 when nothing was sampled. */
	int64_t sample_requested_ns;
	int64_t sample_interval_ns;
};

/* Called with the requests finished (done) of total: every 65,536 events
 * in simulation, every event on a wall clock (engine_config.clock), and
 * once at the end.  The callback may read a clock; the engine does not. */
typedef void (*engine_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* The rule that sizes cfg's KV cache: an explicit gpu_mem_util (vLLM's
 * rule), else an explicit kv_free_fraction (TensorRT-LLM's), else the
 * engine profile's kv_memory and kv_fraction, else vLLM's rule at 0.9. */
struct engine_kv_rule {
	int memory;                  /* enum engine_kv_memory */
	double fraction;             /* (0, 1] */
	/* where it came from: "--gpu-memory-utilization",
	 * "--kv-free-fraction", the profile's name or "default" */
	const char *from;
};
void engine_kv_rule_of(const struct engine_config *cfg, struct engine_kv_rule *rule);
/* The rule as a phrase for summaries ("0.9 of the memory free after
 * weights and activations (TensorRT-LLM's free_gpu_memory_fraction, from
 * engine trtllm)"), into buf (len bytes). */
void engine_kv_rule_describe(const struct engine_config *cfg, char *buf, size_t len);
/* Tokens per KV block of cfg: block_size, else the engine profile's
 * kv_block_size, else ENGINE_BLOCK_SIZE_DEFAULT. */
int engine_block_size(const struct engine_config *cfg);
/* The context a request of cfg may fill, tokens: max_context, else the
 * model's. */
int32_t engine_max_context(const struct engine_config *cfg);

/* KV blocks per instance that cfg gives (its override, or what the KV
 * rule leaves of GPU memory after weights and the activation reserve,
 * docs/kv-cache.md); per attention rank with dp_attention > 1.  Needs
 * model, gpu, tp and what engine_kv_rule_of and engine_block_size read. */
int engine_kv_capacity(const struct engine_config *cfg, int32_t *blocks, struct ss_error *err);
/* KV bytes per token on one GPU that engine_kv_capacity divides the free
 * memory by: K and V of the GPU's KV heads in every layer; MLA's latent
 * and RoPE key, whole on every GPU; local-attention models charged at a
 * request of kv_ref_tokens (docs/kv-cache.md "Local attention"). */
double engine_kv_token_bytes_gpu(const struct engine_config *cfg);
/* With cfg->pp > 1 stages: the weight bytes one GPU of stage s holds and
 * the KV bytes one token takes on it (its layers' share of
 * engine_kv_token_bytes_gpu), docs/kv-cache.md "Pipeline parallelism". */
void engine_pp_stage_bytes(const struct engine_config *cfg, int s, double *weights,
			   double *kv_token);

/* Weight bytes each GPU of an instance of cfg holds (model, tp, ep,
 * dp_attention, weight_dtype; docs/kv-cache.md): a tp-th of the model's,
 * or with data-parallel attention the non-expert weights over tp /
 * dp_attention GPUs and the routed experts over tp. */
double engine_weight_bytes_per_gpu(const struct engine_config *cfg);

/* What a run will hold in memory, estimated before anything is allocated
 * (docs/limits.md).  Bytes are upper bounds for the parts sized by the
 * configuration (KV pools with their block tables and prefix-cache tables,
 * per-instance state) and typical values for the parts that depend on the
 * load (requests: the workload's entry and what the engine keeps of each;
 * a backlog of waiting requests adds sizeof(struct request) each). */
struct engine_memory {
	uint32_t n_instances;        /* instances over all pools */
	int64_t kv_blocks;           /* KV blocks, all instances */
	int64_t max_blocks;          /* KV blocks of the largest instance */
	uint64_t n_req;              /* requests the estimate was made for */
	uint64_t kv_bytes;           /* KV pools, block tables, prefix-cache tables */
	uint64_t instance_bytes;     /* per-instance state and statistics */
	uint64_t request_bytes;      /* workload entries and per-request state */
	uint64_t total_bytes;        /* all of the above plus a fixed base */
};

/* Estimate the memory of cfg running n_req requests (which need not be
 * built yet).  Validates what it needs of cfg like engine_new: 0 or
 * -EINVAL with err set. */
int engine_memory_estimate(const struct engine_config *cfg, uint64_t n_req,
			   struct engine_memory *out, struct ss_error *err);

/* One line describing m, "about X GB (N instances x B KV blocks, R
 * requests)" (MB below 1 GB), into buf. */
void engine_memory_describe(const struct engine_memory *m, char *buf, size_t len);
/* True, with err set to "this run needs ...; the machine has ..." (-ENOMEM),
 * when m does not fit in limit_bytes (0 = no limit). */
bool engine_memory_refuse(const struct engine_memory *m, uint64_t limit_bytes,
			  struct ss_error *err);

/* Validate cfg, size the KV pools, instantiate policies and the cost model.
 * wl must outlive the engine. */
/* Whether e's queue order or batch policy reads output-length predictions
 * (a --predictor has an effect). */
bool engine_uses_predictions(const struct engine *e);
int engine_new(struct engine **out, const struct engine_config *cfg,
	       const struct workload *wl, struct ss_error *err);
void engine_free(struct engine *e);

void engine_set_progress(struct engine *e, engine_progress_fn fn, void *ctx);

/* Run to completion: every request finishes or is rejected.  Or, when
 * cfg.stop was set during the run, stop at the next event: -EINTR (err
 * says "interrupted"), the results hold the requests as they stood, those
 * in the run and those not yet arrived unfinished, the same as a live run
 * that failed keeps. */
int engine_run(struct engine *e, struct ss_error *err);

/* Free KV blocks of instance i now (tests check that runs leak none). */
int32_t engine_kv_free_blocks(const struct engine *e, uint32_t i);

/* The run's KV manager (sim/kvm.h; transfer none), from engine_new until
 * engine_free: tests read its tiers through its header. */
struct kvm *engine_kvm(struct engine *e);

/* Valid after engine_run until engine_free. */
void engine_results(const struct engine *e, struct engine_results *out);

#endif
