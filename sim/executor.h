/* servesim — executors: what gives a step its duration.
 *
 * The engine forms a step (through the batch policy) and hands it to the
 * executor.  The model-driven executor asks the cost model for a predicted
 * duration; the live executor (executor-live.c) runs the step's kernels and
 * measures it.  Either way the engine receives a duration and an energy and
 * schedules the step's completion; nothing else in the engine depends on
 * the mode.  An executor sees a view of each request (struct exec_req), not
 * the engine's struct request, and says how its results are labelled
 * (identity), so no caller patches the results afterwards.
 */
#ifndef SS_EXECUTOR_H
#define SS_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "costmodel.h"
#include "ss-error.h"

/* Version 2: exec_step.reqs is a view (struct exec_req), not the engine's
 * struct request; the optional identity method.  Version 3: runs_lora.
 * The engine runs tables of versions 1..EXECUTOR_VERSION and reads a
 * member added in version N only from tables with version >= N. */
#define EXECUTOR_VERSION 3

/* What an executor sees of one request of a step: enough to run it on a
 * paged KV cache, nothing of the engine's bookkeeping. */
struct exec_req {
	const int32_t *block_table;        /* (transfer none) the request's KV block ids in
					    * order, covering context + tokens positions;
					    * valid during run_step */
	int32_t n_blocks;                  /* entries in block_table */
	bool emit;                         /* all its known tokens are processed after this
					    * step: it produces an output token */
	int32_t emit_rows;                 /* with emit, rows scored by the LM head: a verify
					    * of drafts (spec.h) each of its tokens; 0 = its
					    * last row only */
	/* Multi-LoRA (lora.h), filled for an executor that runs adapters
	 * (runs_lora) in a run with --lora; false / 0 otherwise. */
	bool lora;                         /* the request names an adapter */
	int32_t adapter;                   /* with lora: its id, >= 0 */
	int32_t lora_slot;                 /* ... the GPU slot it is in, 0 .. max_loras - 1 */
	int32_t lora_rank;                 /* ... its rank */
	bool lora_load;                    /* load the adapter into lora_slot before the
					    * step (set on the step's first item of each
					    * adapter the step misses) */
};

/* One step as the executor sees it. */
struct exec_step {
	int32_t instance;
	uint32_t n_items;
	const struct cost_item *items;     /* tokens and context per request */
	const struct exec_req *reqs;       /* same order as items */
	uint32_t n_prefill, n_emit;
	int64_t total_tokens;
	int64_t start_ns;                  /* engine time the step starts */
	/* A step of a multi-step burst: see struct cost_step (0 and 0 for a
	 * step of its own).  A live step ignores them (the host work it has
	 * is measured with it). */
	unsigned engine_part;
	uint32_t n_out;
	/* Data-parallel attention: the MoE tokens of the step's lock-step
	 * group, all ranks together (struct cost_step); 0 otherwise. */
	int64_t group_tokens;
	/* Speculative decoding: struct cost_step's spec_q (0 = none). */
	int32_t spec_q;
};

struct exec_result {
	int64_t duration_ns;               /* > 0 */
	double energy_j;
	int64_t op_ns[COST_OP_COUNT];
	uint32_t out_of_grid;              /* see struct cost_result */
	int64_t out_of_grid_ns;
	/* An executor that runs adapters (runs_lora): the time the step spent
	 * loading adapters into slots and in the adapters' kernels, ns, both
	 * inside duration_ns (measured, not added), and the bytes it loaded. */
	int64_t lora_load_ns, lora_gemm_ns;
	double lora_load_bytes;
};

/* How a run's step times are labelled in its results (engine_results). */
struct exec_identity {
	const char *cost_model_name;       /* what timed the steps: a cost model's name, "live" */
	const char *op_backend[COST_OP_COUNT]; /* what timed each operator */
	double idle_power_w;               /* instance power between steps, W (all tp GPUs) */
};

struct executor_ops {
	int version;
	const char *name;
	size_t priv_size;
	int (*init)(void *priv, struct cost_model *cm, struct ss_error *err);
	int (*run_step)(void *priv, const struct exec_step *step, struct exec_result *out,
			struct ss_error *err);
	void (*release)(void *priv);       /* optional */
	/* Version 2, optional (default: the cost model's name and operator
	 * backends, the GPU's idle power x tp, which *out holds on entry):
	 * this executor's identity after a run in which its instance was idle
	 * for idle_ns.  Called by engine_results. */
	void (*identity)(const void *priv, int64_t idle_ns, struct exec_identity *out);
	/* Version 3: the executor runs a step's adapters itself (their loads
	 * and GEMMs are in its duration): the engine fills exec_req's lora
	 * fields and prices none of it (docs/lora.md, "Live").  false: the
	 * engine prices them (lora.h) on top of the executor's duration, and
	 * a live executor that does not run them is refused with --lora. */
	bool runs_lora;
};

/* The model-driven executor: duration and energy from the cost model. */
extern const struct executor_ops executor_model_ops;

#endif
