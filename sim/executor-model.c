#include "executor.h"

#include <errno.h>
#include <string.h>

struct model_exec {
	struct cost_model *cm;
};

static int model_init(void *priv, struct cost_model *cm, struct ss_error *err)
{
	struct model_exec *x = priv;

	(void)err;
	x->cm = cm;
	return 0;
}

static int model_run_step(void *priv, const struct exec_step *step,
			  struct exec_result *out, struct ss_error *err)
{
	struct model_exec *x = priv;
	struct cost_step cs = {
		.items = step->items,
		.n_items = step->n_items,
		.n_prefill = step->n_prefill,
		.n_emit = step->n_emit,
		.total_tokens = step->total_tokens,
		.engine_part = step->engine_part,
		.n_out = step->n_out,
		.group_tokens = step->group_tokens,
		.spec_q = step->spec_q,
	};
	/* not zeroed: cost_model_predict sets compute_ns and the
	 * out-of-grid fields and every step() the duration, the energy and
	 * each op_ns (costmodel.h), which is all that is read below */
	struct cost_result cr;

	if (cost_model_predict(x->cm, &cs, &cr, err))
		return -ERANGE;
	out->duration_ns = cr.duration_ns > 0 ? cr.duration_ns : 1;
	out->energy_j = cr.energy_j;
	memcpy(out->op_ns, cr.op_ns, sizeof(out->op_ns));
	out->out_of_grid = cr.out_of_grid;
	out->out_of_grid_ns = cr.out_of_grid_ns;
	return 0;
}

const struct executor_ops executor_model_ops = {
	.version = EXECUTOR_VERSION,
	.name = "model",
	.priv_size = sizeof(struct model_exec),
	.init = model_init,
	.run_step = model_run_step,
};
