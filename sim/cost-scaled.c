/* servesim — the "scaled" cost model: a GPU without measured tables priced
 * from the tables of the closest measured GPU of its family, each operator
 * scaled by the roofline (docs/cost-models.md, "scaled").
 *
 * For one step and each operator class op,
 *
 *   t_gpu(op) = t_table,ref(op) x roofline_gpu(op) / roofline_ref(op)
 *
 * where both rooflines price the same step at the same shapes, so the
 * ratio is compute-bound work's peak FLOP/s of its dtype, memory-bound
 * work's HBM bandwidth and collectives' link bandwidth, whichever bound the
 * roofline finds at that operator's shape, the fixed kernel latencies
 * (equal on both) damping it for small kernels.  It is the GPU check's
 * kernel-class scaling (scripts/kernel-class.py) applied to a whole step.
 * An operator the reference's table prices by its own roofline (an MoE
 * model's GEMMs, MLA's attention) is the GPU's roofline, and says so.
 *
 * The reference is the GPU of the same `family` (the catalog's kernel
 * architecture) among cost_config.ref_gpus whose tables "auto" would use
 * for this model, tp and dtypes, nearest in log peak FLOP/s plus log HBM
 * bandwidth; `from=GPU` names it instead (any GPU the stores price).
 *
 * Energy: the reference's measured power is another GPU's, so the whole
 * step draws the GPU's roofline average power over the scaled time.
 */
#include "costmodel.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct scaled {
	struct cost_model *ref;      /* the reference GPU's table */
	struct cost_model *rl_ref;   /* the roofline on the reference GPU */
	struct cost_model *rl_gpu;   /* the roofline on this GPU */
	bool measured[COST_OP_COUNT];   /* ref's operator from its measurements */
	char ref_name[64];
};

/* How far apart two GPUs' rooflines are: |ln C1/C2| + |ln W1/W2| over the
 * bf16 peak FLOP/s C and the HBM bandwidth W (0: alike). */
static double gpu_distance(const struct gpu_spec *a, const struct gpu_spec *b)
{
	return fabs(log(a->bf16_flops / b->bf16_flops)) + fabs(log(a->hbm_bw / b->hbm_bw));
}

/* cfg for another GPU's bare kernels: no engine, power cap or clock (the
 * scaled model's own instance applies them once, to the scaled step). */
static struct cost_config bare_config(const struct cost_config *cfg, const struct gpu_spec *g)
{
	struct cost_config c = *cfg;

	c.gpu = g;
	c.engine = NULL;
	c.power_cap_w = 0;
	c.clock_frac = 0;
	return c;
}

int cost_scaled_reference(const struct cost_config *cfg, const struct gpu_spec **ref,
			  struct ss_error *err)
{
	const struct gpu_spec *g = cfg->gpu;
	bool tried[256] = { false };
	size_t n = cfg->n_ref_gpus < 256 ? cfg->n_ref_gpus : 256;
	bool any = false;

	*ref = NULL;
	for (int i = 0; i < cfg->n_stores; i++)
		any |= cfg->stores[i] != NULL;
	if (!any || !g || !cfg->model || !g->family[0] || !cfg->ref_gpus)
		return 0;
	/* candidates nearest first; a family holds a handful of GPUs, so a
	 * selection pass per candidate is cheap next to building a table */
	for (;;) {
		const struct gpu_spec *best = NULL;
		size_t bi = 0;
		struct cost_model *cm = NULL;
		struct cost_config c;
		bool ok;
		int rc;

		for (size_t i = 0; i < n; i++) {
			const struct gpu_spec *r = &cfg->ref_gpus[i];

			if (tried[i] || strcmp(r->family, g->family) || !strcmp(r->name, g->name))
				continue;
			if (!best || gpu_distance(r, g) < gpu_distance(best, g)) {
				best = r;
				bi = i;
			}
		}
		if (!best)
			return 0;
		tried[bi] = true;
		c = bare_config(cfg, best);
		rc = cost_model_new(&cm, "table", &c, err);
		if (rc)
			return rc;   /* a store that cannot be read: the user's error */
		ok = cost_model_auto_covers(cm);
		cost_model_free(cm);
		if (ok) {
			*ref = best;
			return 0;
		}
	}
}

static int scaled_init(void *priv, const struct cost_config *cfg, struct ss_params *params,
		       struct ss_error *err)
{
	struct scaled *s = priv;
	const char *from = ss_params_str(params, "from", NULL);
	const struct gpu_spec *ref = NULL;
	double imbalance, ar_max_mb;
	char spec[128];
	struct cost_config c;
	int rc;

	memset(s, 0, sizeof(*s));
	if (!cfg->model || !cfg->gpu)
		return ss_error_set(err, -EINVAL, NULL, 0, "--cost-model scaled: needs a model and a GPU");
	rc = cost_param(params, "custom_allreduce_max_mb", 8.0, 0.0, 1e6, &ar_max_mb, err);
	if (!rc)
		rc = cost_param(params, "expert_imbalance", 1.0, 1.0,
				cfg->ep > 1 ? (double)cfg->ep : 1.0, &imbalance, err);
	/* a mistyped key before the search for a reference, which would
	 * otherwise be the error the user sees */
	if (!rc)
		rc = ss_params_check_unused(params, err);
	if (rc)
		return rc;
	if (from) {
		for (size_t i = 0; i < cfg->n_ref_gpus && !ref; i++)
			if (!strcmp(cfg->ref_gpus[i].name, from))
				ref = &cfg->ref_gpus[i];
		if (!ref)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--cost-model scaled: from=%s: expected a GPU of the catalog (see `servesim list gpus`)",
					    from);
	} else {
		rc = cost_scaled_reference(cfg, &ref, err);
		if (rc)
			return rc;
		if (!ref)
			return ss_error_set(err, -ENOENT, NULL, 0,
					    "--cost-model scaled: no GPU of %s's family (%s) has measured tables for %s at tp %d in the calibration stores (name one with scaled:from=GPU)",
					    cfg->gpu->name, cfg->gpu->family[0] ? cfg->gpu->family : "none",
					    cfg->model->name, cfg->tp);
	}
	snprintf(s->ref_name, sizeof(s->ref_name), "%s", ref->name);
	c = bare_config(cfg, ref);
	snprintf(spec, sizeof(spec), "table:custom_allreduce_max_mb=%.17g,expert_imbalance=%.17g",
		 ar_max_mb, imbalance);
	rc = cost_model_new(&s->ref, spec, &c, err);
	if (!rc && from && !cost_model_auto_covers(s->ref))
		rc = ss_error_set(err, -ENOENT, NULL, 0,
				  "--cost-model scaled: from=%s: the calibration stores do not price %s's GEMMs and attention on %s at tp %d",
				  from, cfg->model->name, from, cfg->tp);
	snprintf(spec, sizeof(spec), "roofline:expert_imbalance=%.17g", imbalance);
	if (!rc)
		rc = cost_model_new(&s->rl_ref, spec, &c, err);
	c = bare_config(cfg, cfg->gpu);
	if (!rc)
		rc = cost_model_new(&s->rl_gpu, spec, &c, err);
	if (rc) {
		cost_model_free(s->ref);
		cost_model_free(s->rl_ref);
		cost_model_free(s->rl_gpu);
		memset(s, 0, sizeof(*s));
		return rc;
	}
	for (int op = 0; op < COST_OP_COUNT; op++)
		s->measured[op] = op != COST_OP_LORA &&
				  !strcmp(cost_model_op_backend(s->ref, (enum cost_op)op), "table");
	return 0;
}

static int scaled_step(void *priv, const struct cost_step *step, struct cost_result *out,
		       struct ss_error *err)
{
	struct scaled *s = priv;
	struct cost_result t, a, b;
	double ms[COST_OP_COUNT] = { 0 }, total = 0.0;
	int rc;

	rc = cost_model_predict(s->ref, step, &t, err);
	if (!rc)
		rc = cost_model_predict(s->rl_ref, step, &a, err);
	if (!rc)
		rc = cost_model_predict(s->rl_gpu, step, &b, err);
	if (rc)
		return rc;
	for (int op = 0; op < COST_OP_COUNT; op++) {
		if (!s->measured[op])
			continue;
		/* an operator the roofline gives no time (tp 1's all-reduce)
		 * has nothing to scale by: the reference's time as it is */
		ms[op] = a.op_ns[op] > 0 ? (double)t.op_ns[op] * ((double)b.op_ns[op] /
								  (double)a.op_ns[op]) * 1e-6
					 : (double)t.op_ns[op] * 1e-6;
		total += ms[op];
	}
	/* the out-of-grid time in the proportion the step scaled */
	{
		double rest = 0.0, oog_ms;

		for (int op = 0; op < COST_OP_COUNT; op++)
			if (!s->measured[op])
				rest += (double)b.op_ns[op] * 1e-6;
		oog_ms = t.duration_ns > 0 ? (double)t.out_of_grid_ns * 1e-6 *
					     (total + rest) / ((double)t.duration_ns * 1e-6)
					   : 0.0;
		return cost_result_from_measured(out, ms, s->measured, NULL, &b, t.out_of_grid,
						 oog_ms, "scaled", step, err);
	}
}

static void scaled_release(void *priv)
{
	struct scaled *s = priv;

	cost_model_free(s->ref);
	cost_model_free(s->rl_ref);
	cost_model_free(s->rl_gpu);
}

static const char *scaled_op_backend(const void *priv, enum cost_op op)
{
	const struct scaled *s = priv;

	if ((unsigned)op >= COST_OP_COUNT)
		return "?";
	return s->measured[op] ? "scaled" : "roofline";
}

static const char *scaled_reference(const void *priv)
{
	const struct scaled *s = priv;

	return s->ref_name;
}

const struct cost_model_ops cost_scaled_ops = {
	.version = COST_MODEL_VERSION,
	.name = "scaled",
	.description = "a GPU without tables: the closest measured GPU of its family's tables, each operator scaled by the roofline",
	.priv_size = sizeof(struct scaled),
	.init = scaled_init,
	.step = scaled_step,
	.release = scaled_release,
	.op_backend = scaled_op_backend,
	.reference = scaled_reference,
};
