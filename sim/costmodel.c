/* servesim — cost model registry and instances (docs/cost-models.md). */
#include "costmodel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Static registry, looked up by name; a new backend is one line here. */
static const struct cost_model_ops *const registry[] = {
	&cost_constant_ops,
	&cost_roofline_ops,
};

#define N_REGISTRY (sizeof(registry) / sizeof(registry[0]))

static const char *const op_names[COST_OP_COUNT] = {
	[COST_OP_GEMM] = "gemm",
	[COST_OP_ATTN_PREFILL] = "attn_prefill",
	[COST_OP_ATTN_DECODE] = "attn_decode",
	[COST_OP_ELEMENTWISE] = "elementwise",
	[COST_OP_LM_HEAD] = "lm_head",
	[COST_OP_ALLREDUCE] = "allreduce",
	[COST_OP_HOST] = "host",
};

const char *cost_op_name(enum cost_op op)
{
	if ((unsigned)op >= COST_OP_COUNT)
		return "?";
	return op_names[op];
}

const struct cost_model_ops *cost_model_find(const char *name)
{
	for (size_t i = 0; i < N_REGISTRY; i++)
		if (strcmp(registry[i]->name, name) == 0)
			return registry[i];
	return NULL;
}

const struct cost_model_ops *const *cost_model_registry(size_t *n)
{
	*n = N_REGISTRY;
	return registry;
}

int cost_param(struct ss_params *params, const char *key, double def,
	       double min, double max, double *out, struct ss_error *err)
{
	int rc = ss_params_double(params, key, def, out, err);

	if (rc)
		return rc;
	if (!(*out >= min && *out <= max))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s %s: '%s' is %g, expected %g..%g",
				    params->what, params->name, key, *out, min, max);
	return 0;
}

int cost_model_new(struct cost_model **out, const char *spec,
		   const struct cost_config *cfg, struct ss_error *err)
{
	const struct cost_model_ops *ops;
	struct cost_model *cm = NULL;
	struct ss_params p;
	int rc;

	*out = NULL;
	rc = ss_params_parse(&p, "--cost-model", spec, true, err);
	if (rc)
		return rc;
	ops = cost_model_find(p.name);
	if (!ops)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model: unknown cost model '%s' (known: constant, roofline)",
				    p.name);
	if (cfg->tp < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model %s: tensor-parallel degree %d, expected >= 1",
				    p.name, cfg->tp);

	cm = calloc(1, sizeof(*cm));
	if (!cm)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	cm->ops = ops;
	cm->cfg = *cfg;
	cm->priv = calloc(1, ops->priv_size ? ops->priv_size : 1);
	if (!cm->priv) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto fail;
	}
	rc = ops->init(cm->priv, &cm->cfg, &p, err);
	if (rc)
		goto fail;
	rc = ss_params_check_unused(&p, err);
	if (rc) {
		if (ops->release)
			ops->release(cm->priv);
		goto fail;
	}
	*out = cm;
	return 0;

fail:
	free(cm->priv);
	free(cm);
	return rc;
}

void cost_model_free(struct cost_model *cm)
{
	if (!cm)
		return;
	if (cm->ops->release)
		cm->ops->release(cm->priv);
	free(cm->priv);
	free(cm);
}

const char *cost_model_op_backend(const struct cost_model *cm, enum cost_op op)
{
	if (cm->ops->op_backend)
		return cm->ops->op_backend(cm->priv, op);
	return cm->ops->name;
}
