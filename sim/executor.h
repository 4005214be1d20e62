/* servesim — executors: what gives a step its duration.
 *
 * The engine forms a step (through the batch policy) and hands it to the
 * executor.  The model-driven executor asks the cost model for a predicted
 * duration; the live executor (later) runs the step's kernels and measures
 * it.  Either way the engine receives a duration and an energy and schedules
 * the step's completion; nothing else in the engine depends on the mode.
 */
#ifndef SS_EXECUTOR_H
#define SS_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include "costmodel.h"
#include "request.h"
#include "ss-error.h"

#define EXECUTOR_VERSION 1

/* One step as the executor sees it. */
struct exec_step {
	int32_t instance;
	uint32_t n_items;
	const struct cost_item *items;     /* tokens and context per request */
	const struct request *const *reqs; /* same order; block tables for live use */
	uint32_t n_prefill, n_emit;
	int64_t total_tokens;
	int64_t start_ns;                  /* engine time the step starts */
};

struct exec_result {
	int64_t duration_ns;               /* > 0 */
	double energy_j;
	int64_t op_ns[COST_OP_COUNT];
	uint32_t out_of_grid;              /* see struct cost_result */
	int64_t out_of_grid_ns;
};

struct executor_ops {
	int version;
	const char *name;
	size_t priv_size;
	int (*init)(void *priv, struct cost_model *cm, struct ss_error *err);
	int (*run_step)(void *priv, const struct exec_step *step, struct exec_result *out,
			struct ss_error *err);
	void (*release)(void *priv);       /* optional */
};

/* The model-driven executor: duration and energy from the cost model. */
extern const struct executor_ops executor_model_ops;

#endif
