/* servesim — engine profiles: what a serving engine adds to its kernels.
 *
 * A cost model prices a step's GPU kernels.  A real engine (vLLM, SGLang,
 * TensorRT-LLM, ...) also spends host time on every step (scheduling,
 * input preparation, sampling and output processing), cannot start a
 * kernel before the host has launched it (an eager step's launch floor; a
 * CUDA graph replays a captured batch size in one launch), pays a latency
 * floor on every tensor-parallel collective, and adds serving-stack latency
 * to every request (API server to engine queue, and the response back).
 * A profile holds those parameters for one engine; profiles are catalog
 * entries (data/engines.json, docs/engines.md), so fitted profiles are
 * data, not code.
 *
 * A profile acts through the cost model (engine_profile_step composes a
 * step's duration from its kernels' result; cost_model_predict calls it)
 * and through the engine (serving-stack latency per request), never
 * through policies: the same policy code runs under every engine.
 */
#ifndef SS_ENGINE_PROFILE_H
#define SS_ENGINE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog-field.h"
#include "ss-error.h"

#define ENGINE_GRAPH_SIZES_MAX 128

/* How an engine sizes its KV cache from GPU memory (docs/kv-cache.md,
 * "Engine rules"): per GPU, with M its memory, W the weights it holds and
 * R the activation reserve (CUDA context, activations, graphs),
 *   total: KV = f x M - W - R     (vLLM's gpu_memory_utilization)
 *   free:  KV = f x (M - W - R)   (TensorRT-LLM's free_gpu_memory_fraction:
 *                                  of the memory still free after the model
 *                                  is loaded and a warm-up forward ran) */
enum engine_kv_memory {
	ENGINE_KV_TOTAL = 0,
	ENGINE_KV_FREE = 1,
};

/* The fraction either rule takes when neither a profile nor an option
 * gives one: vLLM's gpu_memory_utilization and TensorRT-LLM's
 * free_gpu_memory_fraction both default to 0.9. */
#define ENGINE_KV_FRACTION_DEFAULT 0.9

/* The KV block size when neither a profile nor --block-size gives one,
 * tokens (vLLM's default on CUDA). */
#define ENGINE_BLOCK_SIZE_DEFAULT 16

/* How a step takes KV that a request's prefix lookup found in host memory
 * or a remote store (--kv-offload, --kv-remote; docs/kv-cache.md, "When a
 * load lands on the step"):
 *   blocking:  the whole copy runs before the step's kernels (vLLM's
 *              LMCache connector by default, TensorRT-LLM's onboarding);
 *   layerwise: layer l's KV is copied while layer l-1 computes, and a
 *              layer's attention waits for its own KV (SGLang's HiCache,
 *              the layer-wise mode of vLLM's connector API), so a step
 *              of S ns with a copy of latency A and X ns of bytes over
 *              L layers takes max(S + A + X/L, A + X + S/L). */
enum engine_kv_load {
	ENGINE_KV_LOAD_BLOCKING = 0,
	ENGINE_KV_LOAD_LAYERWISE = 1,
};

enum engine_allreduce {
	ENGINE_AR_CUSTOM = 0,     /* one-shot/two-shot custom all-reduce over NVLink (vLLM, SGLang, TRT-LLM) */
	ENGINE_AR_NCCL = 1,       /* NCCL ring/tree all-reduce */
};

struct engine_profile {
	char name[64];            /* catalog name: "vllm", "sglang", ... */
	char versions[128];       /* the engine versions the profile stands for */
	/* The engine's own batching rules as a batch-policy spec
	 * ("vllm:v0=on,chunked=off"), used when no --policy is given; "" =
	 * the default policy.  Policies stay shared: a profile only sets
	 * their parameters. */
	char policy[128];
	/* Per-step host time, us, on the step's critical path: scheduling
	 * (fixed, per sequence in the step, per token scheduled) and input
	 * preparation (fixed, per layer of the step's model, per token; the
	 * per-layer term is what `calibrate run` measures of a CPU's caches
	 * reloaded with each layer's weights once a step, and what tells a
	 * one-layer drafter's pass from a step: sim/engine-spec.c). */
	double sched_us, sched_us_per_seq, sched_us_per_token;
	double prep_us, prep_us_per_layer, prep_us_per_token;
	/* Multi-LoRA (lora.h): a step's adapter loads overlap its kernels
	 * (S-LoRA prefetches them on a side stream) instead of blocking
	 * before them (vLLM activates a step's adapters first); false: block. */
	bool lora_load_overlap;
	/* Sampling bookkeeping and output processing (detokenisation,
	 * stop checks, streaming), us: fixed and per sequence that emits a
	 * token.  With async_output it overlaps the next step's GPU work and
	 * only what exceeds that work is on the critical path. */
	double output_us, output_us_per_seq;
	bool async_output;
	/* Launch floor of an eager step: the host takes launch_us plus
	 * launch_us_per_layer per layer to launch the step's kernels, us.
	 * The GPU runs them as they come, hiding launch_overlap (0..1, 0 = 1:
	 * the default) of its kernel time's worth of launching: the step's
	 * kernels end no earlier than
	 *   kernels + max(0, launch - launch_overlap x kernels)
	 * (1: perfect pipelining, max(kernels, launch); less where the host
	 * waits on the GPU within a step: collectives, sampling). */
	double launch_us, launch_us_per_layer, launch_overlap;
	/* CUDA graphs: batch sizes captured, ascending (n_graph_sizes = 0:
	 * none).  A decode-only step of at most the largest size is padded up
	 * to the next captured size and replayed in one launch of
	 * graph_launch_us.  graph_mixed: steps with prefill tokens are
	 * captured too (piecewise graphs, vLLM V1), so they are not eager
	 * either (they are not padded: attention runs outside the graph). */
	int32_t graph_sizes[ENGINE_GRAPH_SIZES_MAX];
	int32_t n_graph_sizes;
	double graph_launch_us;
	bool graph_mixed;
	/* Tensor-parallel collectives: the implementation and its latency
	 * floor per all-reduce call, us (two calls per layer); a step's
	 * all-reduce time is at least 2 x n_layers x allreduce_floor_us. */
	int allreduce;            /* enum engine_allreduce */
	double allreduce_floor_us;
	/* Per-step dispatch to tensor-parallel workers, us per worker: an
	 * engine whose TP ranks are separate worker processes driven by one
	 * process (vLLM up to 0.2.4 ran each rank as a Ray actor and sent
	 * every step's inputs to each as a remote call, then waited on all)
	 * spends this much host time per worker before the step's kernels
	 * can start: tp x dispatch_us_per_worker at tp > 1, nothing at tp 1
	 * (the engine runs in process).  Paid on every step, bursts
	 * included.  0 (the default, an absent key): no such cost. */
	double dispatch_us_per_worker;
	/* Legacy serving-stack latency, ms: API arrival to the engine's
	 * queue (api_in_ms) and from the engine's token to the client
	 * (api_out_ms), means of log-normal draws with coefficient of
	 * variation api_cv (0 = constant).  The serving stack is its own
	 * schema now (stack-profile.h, the `stack` key below); these stay
	 * readable so that user catalogs and calibration stores that have
	 * them run as they did: without --stack they are the stack
	 * (stack_profile_from_legacy).  Shipped profiles leave them out. */
	double api_in_ms, api_out_ms, api_cv;
	/* Multi-step scheduling (vLLM 0.6's --num-scheduler-steps): a
	 * scheduling decision that forms a decode-only step runs it for this
	 * many consecutive decode steps (a burst) before the next decision;
	 * nobody is admitted or preempted within a burst and its tokens reach
	 * the client together at its end.  Scheduling and input preparation
	 * are paid once per burst, output processing once at its end (for
	 * every token of the burst), launches on every step.  1 (or 0, an
	 * absent key) = every step is a decision: the behaviour without it. */
	int scheduler_steps;
	/* KV capacity: the engine's rule (enum engine_kv_memory; absent =
	 * total), its fraction f (0, an absent key, =
	 * ENGINE_KV_FRACTION_DEFAULT) and its KV block size in tokens (0 =
	 * ENGINE_BLOCK_SIZE_DEFAULT).  Command-line options override them
	 * (engine_kv_rule_of, engine_block_size in engine.h). */
	int kv_memory;
	double kv_fraction;
	int32_t kv_block_size;
	/* The activation reserve is the forward pass of the batch policy's
	 * whole step (its token budget and sequence limit): vLLM sizes its
	 * cache after a profiling run of max_num_batched_tokens tokens in
	 * max_num_seqs sequences (worker.determine_num_available_blocks).
	 * false: the fixed estimate's 8192-token step of 256 sequences
	 * (docs/kv-cache.md "Capacity"). */
	bool kv_profile_step;
	/* TensorRT-LLM's attention-DP context balancing (its
	 * attention_dp_config: enable_balance, timeout_iters,
	 * batching_wait_iters; docs/cost-models.md "Expert parallelism and
	 * data-parallel attention"), for the attention ranks of a lock-step
	 * group: with adp_balance the group's new context (prefill) work is
	 * held back until every rank has some (at most adp_timeout_iters
	 * group steps, or at once when some rank has nothing to decode), then
	 * for adp_batching_wait_iters steps more while every rank decodes.
	 * Off (false) = each rank prefills as its policy plans. */
	bool adp_balance;
	int adp_timeout_iters, adp_batching_wait_iters;
	/* How loads of KV from host memory or a remote store meet the step
	 * (enum engine_kv_load; absent = blocking). */
	int kv_load;
	/* The serving stack the engine runs behind when no --stack is given:
	 * a stacks.json name ("local-vllm"); "" = none (the engine alone, or
	 * the legacy api_* keys above where set). */
	char stack[64];
	/* The engine's output front end (frontend.h): a serial server on
	 * every streamed token's way to the client, us per token and per
	 * step that emits tokens.  0 (absent) = none. */
	double frontend_us_per_token, frontend_us_per_step;
	char source[1024];        /* where each number came from (docs/engines.md has the detail) */
};

/* Which of a profile's per-step host terms a step of a multi-step burst
 * leaves out (engine_profile_step_part); 0: a step of its own pays them
 * all. */
enum engine_step_part {
	ENGINE_PART_NO_SCHED = 1,   /* a later step of a burst: no scheduling or input preparation */
	ENGINE_PART_NO_OUTPUT = 2,  /* not a burst's last step: no output processing */
};

/* Steps per scheduling decision of p (NULL: no profile): >= 1. */
static inline uint32_t engine_profile_burst(const struct engine_profile *p)
{
	return p && p->scheduler_steps > 1 ? (uint32_t)p->scheduler_steps : 1;
}

/* What composing a step needs to know of the instance. */
struct engine_step_ctx {
	int n_layers;
	int tp;
	double gap_power_w;       /* instance power while the GPUs wait on the host, W (all tp GPUs) */
};

/* The captured size a decode-only step of n sequences replays, or 0 when
 * it runs eager (no graphs, or n above the largest captured size). */
int32_t engine_profile_graph_size(const struct engine_profile *p, uint32_t n);

/* True when a step with these counts runs as a graph (decode-only within
 * the captured sizes, or any step under graph_mixed within them by
 * tokens). */
bool engine_profile_graphed(const struct engine_profile *p, uint32_t n_items, uint32_t n_prefill,
			    int64_t total_tokens);

/* Compose a step: *r holds the cost model's result for the step's kernels
 * (its op_ns[COST_OP_HOST] is the backend's own host estimate, which the
 * profile replaces).  Rewrites r: the all-reduce floor raises
 * op_ns[COST_OP_ALLREDUCE]; the host time on the critical path
 * (scheduling, preparation, launch stalls, output processing not hidden)
 * becomes op_ns[COST_OP_HOST]; duration_ns is their sum with the kernels;
 * energy adds ctx->gap_power_w over the added time.  n_items, n_emit and
 * total_tokens are the real step's (not the padded one's).  Returns 0 or
 * -ERANGE (err set) when the step's time does not fit int64 ns. */
struct cost_result;
int engine_profile_step(const struct engine_profile *p, const struct engine_step_ctx *ctx,
			uint32_t n_items, uint32_t n_prefill, uint32_t n_emit, int64_t total_tokens,
			struct cost_result *r, struct ss_error *err);
/* The same for one step of a multi-step burst: part (enum
 * engine_step_part bits) leaves out scheduling and input preparation
 * and/or output processing; n_out is the output tokens whose processing
 * the step pays (a burst's last step: every token of the burst).
 * engine_profile_step is this with part 0 and n_out = n_emit (the
 * sequences that emit a token in the step). */
int engine_profile_step_part(const struct engine_profile *p, const struct engine_step_ctx *ctx,
			     uint32_t n_items, uint32_t n_prefill, int64_t total_tokens,
			     unsigned part, uint32_t n_out,
			     struct cost_result *r, struct ss_error *err);

/* The time a KV load adds to a step of step_ns (> 0) under kv_load (enum
 * engine_kv_load), for a copy that starts lat_ns after the step's start
 * and then moves its bytes in xfer_ns, over n_layers layers: lat + xfer
 * when blocking; max(step + lat + xfer/L, lat + xfer + step/L) - step when
 * layerwise.  Saturates at INT64_MAX. */
int64_t engine_kv_load_added_ns(int kv_load, int n_layers, int64_t step_ns, int64_t lat_ns,
				int64_t xfer_ns);

/* The profile's keys (engines.json's), one entry each: type, unit, bounds,
 * offset in struct engine_profile, whether fit-engine may fit it, help
 * text and how it reads in the description (catalog-field.h).  The
 * catalog's reader, catalog_entry_json, `list engines`, the parameters
 * below and engine_profile_describe all read this table. */
extern const struct catalog_field engine_profile_fields[];
extern const size_t engine_profile_n_fields;

/* The fittable parameter named key (engines.json's name: "sched_us",
 * "api_in_ms", ...; a field flagged fit) of p, or NULL when p has no such
 * parameter. */
double *engine_profile_param(struct engine_profile *p, const char *key);

/* The fittable parameters' names, ", "-separated, into buf (len bytes);
 * returns the length as snprintf does. */
size_t engine_profile_fit_names(char *buf, size_t len);

/* Every described field of p (engine_profile_fields' show), "name: key=value
 * ...", into buf (len bytes): what a plan's fingerprint and a summary
 * record of the profile used. */
void engine_profile_describe(const struct engine_profile *p, char *buf, size_t len);

/* True when p has the legacy serving-stack keys (api_in_ms, api_out_ms
 * or api_cv set). */
bool engine_profile_legacy_stack(const struct engine_profile *p);

/* The catalog check of one entry (cross-field rules): 0 or -EINVAL with
 * err naming path and where. */
int engine_profile_validate(const struct engine_profile *p, const char *path, const char *where,
			    struct ss_error *err);

#endif
