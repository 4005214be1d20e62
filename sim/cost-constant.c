/* servesim — the "constant" cost model: fixed cost per prefill token and per
 * decode step, no hidden overheads.  Queueing-theory tests (M/D/1) rely on
 * the arithmetic being exactly
 *
 *   duration = round(prefill_ms_per_token x prefill tokens)
 *            + round(decode_ms_per_step)   if the step has a decode item
 *            + round(step_ms)
 *
 * (each term rounded to whole ns), lifted to 1 ns if it comes out 0.  An item
 * with tokens > 1 is a prefill chunk; an item with tokens == 1 is a decode.
 * See docs/cost-models.md.
 */
#include "costmodel.h"
#include "sstime.h"

#include <math.h>
#include <string.h>

struct constant {
	double prefill_ns_per_token;    /* ns per prefill token */
	int64_t decode_ns;              /* ns per step with >= 1 decode item */
	int64_t step_ns;                /* ns added to every step */
	double power_w;                 /* whole instance, W */
};

static int constant_init(void *priv, const struct cost_config *cfg,
			 struct ss_params *params, struct ss_error *err)
{
	struct constant *c = priv;
	double prefill_ms, decode_ms, step_ms, power_w;
	double def_power = cfg->gpu ? cfg->gpu->tdp_w * cfg->tp : 0.0;
	int rc;

	rc = cost_param(params, "prefill_ms_per_token", 0.05, 0.0, 1e6, &prefill_ms, err);
	if (!rc)
		rc = cost_param(params, "decode_ms_per_step", 10.0, 0.0, 1e9, &decode_ms, err);
	if (!rc)
		rc = cost_param(params, "step_ms", 0.0, 0.0, 1e9, &step_ms, err);
	if (!rc)
		rc = cost_param(params, "power_w", def_power, 0.0, 1e9, &power_w, err);
	if (rc)
		return rc;
	c->prefill_ns_per_token = prefill_ms * 1e6;
	c->decode_ns = llround(decode_ms * 1e6);
	c->step_ns = llround(step_ms * 1e6);
	c->power_w = power_w;
	return 0;
}

static int constant_step(void *priv, const struct cost_step *step, struct cost_result *out,
			 struct ss_error *err)
{
	const struct constant *c = priv;
	int64_t prefill_tokens = 0;
	bool any_decode = false;
	int64_t gemm;

	for (uint32_t i = 0; i < step->n_items; i++) {
		int32_t t = step->items[i].tokens;

		if (t > 1)
			prefill_tokens += t;
		else if (t == 1)
			any_decode = true;
	}
	if (!cost_ns_fits(c->prefill_ns_per_token * (double)prefill_tokens))
		return cost_step_range_error(err, "constant", "prefill",
					     c->prefill_ns_per_token * (double)prefill_tokens, step);
	gemm = llround(c->prefill_ns_per_token * (double)prefill_tokens);
	if (any_decode && !ss_time_add(gemm, c->decode_ns, &gemm))
		return cost_step_range_error(err, "constant", "prefill and decode",
					     (double)gemm + (double)c->decode_ns, step);
	if (!ss_time_add(gemm, c->step_ns, &(int64_t){ 0 }))
		return cost_step_range_error(err, "constant", "the step",
					     (double)gemm + (double)c->step_ns, step);

	memset(out->op_ns, 0, sizeof(out->op_ns));
	out->op_ns[COST_OP_GEMM] = gemm;
	out->op_ns[COST_OP_HOST] = c->step_ns;
	if (gemm + c->step_ns <= 0)
		out->op_ns[COST_OP_HOST] = 1;
	out->duration_ns = out->op_ns[COST_OP_GEMM] + out->op_ns[COST_OP_HOST];
	out->energy_j = c->power_w * (double)out->duration_ns * 1e-9;
	return 0;
}

const struct cost_model_ops cost_constant_ops = {
	.version = COST_MODEL_VERSION,
	.name = "constant",
	.description = "fixed ms per prefill token and per decode step (tests, queueing checks)",
	.priv_size = sizeof(struct constant),
	.init = constant_init,
	.step = constant_step,
};
