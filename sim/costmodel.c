/* servesim — cost model registry and instances (docs/cost-models.md). */
#include "costmodel.h"

#include "cost-roofline-int.h"
#include "sstime.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Static registry, looked up by name: sim/costmodels.def, one line a
 * backend. */
static const struct cost_model_ops *const registry[] = {
#define COST_MODEL(ident) &cost_##ident##_ops,
#include "costmodels.def"
#undef COST_MODEL
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
	[COST_OP_LORA] = "lora",
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

static int dvfs_check(const struct cost_config *cfg, struct ss_error *err)
{
	if (cfg->clock_frac != 0 && !(cfg->clock_frac >= CLOCK_FRAC_MIN && cfg->clock_frac <= 1))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--gpu-clock: expected a fraction of the maximum clock in [%g, 1], got %g",
				    CLOCK_FRAC_MIN, cfg->clock_frac);
	if (cfg->power_cap_w != 0 && cfg->gpu && !(cfg->power_cap_w > cfg->gpu->idle_w))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--power-cap: expected more than %s's idle power %g W, got %g W",
				    cfg->gpu->name, cfg->gpu->idle_w, cfg->power_cap_w);
	return 0;
}

bool cost_model_auto_covers(const struct cost_model *cm)
{
	static const enum cost_op needed[] = {
		COST_OP_GEMM, COST_OP_ATTN_PREFILL, COST_OP_ATTN_DECODE,
	};
	const struct cost_config *cfg = &cm->cfg;

	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
		/* the table leaves to its roofline what the dtypes change
		 * (cost-table.c, table_precision): covered still, when the
		 * 16-bit operators are measured */
		bool quant = needed[i] == COST_OP_GEMM ?
			     ss_dtype_bytes(cfg->weight_dtype, cfg->model) !=
			     (double)cfg->model->dtype_bytes :
			     needed[i] == COST_OP_ATTN_DECODE &&
			     ss_dtype_bytes(cfg->kv_dtype, cfg->model) !=
			     (double)cfg->model->dtype_bytes;

		if (!quant && strcmp(cost_model_op_backend(cm, needed[i]), "table") != 0)
			return false;
	}
	return true;
}

/* "auto": the measured table when the stores cover this GPU and model (its
 * GEMMs, prefill and decode attention all come from measurements), else
 * the closest measured GPU of its family's table scaled by the roofline
 * ("scaled", when cfg names the GPUs to look among), else the roofline.
 * The table is built once and kept when it qualifies.
 *
 * Only a store that opens and reads fine but lacks this (GPU, model, tp)
 * falls back: a store that cannot be opened or read (a mistyped path, a
 * directory, a foreign or corrupt database, another schema version, a
 * lock held by another process) is the user's error, reported as it is,
 * since the roofline in its place would answer a different question. */
static int auto_new(struct cost_model **out, const struct cost_config *cfg,
		    struct ss_error *err)
{
	const struct gpu_spec *ref = NULL;
	struct cost_model *cm = NULL;
	bool covered = false;
	int rc;

	/* The table opens every store it has no valid cache for (the cache
	 * is keyed on each store's identity and change counter), and returns
	 * the store's own error when one cannot be opened or read: no store
	 * is opened twice, and none when the cache is valid. */
	for (int i = 0; i < cfg->n_stores; i++)
		covered |= cfg->stores[i] != NULL;
	if (covered) {
		rc = cost_model_new(&cm, "table", cfg, err);
		if (rc)
			return rc;
		if (cost_model_auto_covers(cm)) {
			*out = cm;
			return 0;
		}
		cost_model_free(cm);
		rc = cost_scaled_reference(cfg, &ref, err);
		if (rc)
			return rc;
		if (ref) {
			char spec[96];

			snprintf(spec, sizeof(spec), "scaled:from=%s", ref->name);
			return cost_model_new(out, spec, cfg, err);
		}
	}
	return cost_model_new(out, "roofline", cfg, err);
}

int cost_layout_check(const struct model_spec *m, int tp, int ep, int dp,
		      const char *tp_opt, const char *ep_opt, const char *dp_opt,
		      struct ss_error *err)
{
	if (ep > 1) {
		if (tp % ep)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s %d: expected a divisor of %s %d", ep_opt, ep, tp_opt, tp);
		if (m->n_experts <= 0)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s %d: expert parallelism needs a mixture-of-experts model; %s is dense",
					    ep_opt, ep, m->name);
		if (ep > m->n_experts || m->n_experts % ep)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s %d: expected a divisor of the %d experts of %s",
					    ep_opt, ep, m->n_experts, m->name);
	}
	if (dp > 1) {
		if (tp % dp)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s %d: expected a divisor of %s %d", dp_opt, dp, tp_opt, tp);
		if (m->n_experts <= 0)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s %d: data-parallel attention is modelled for mixture-of-experts models only (SGLang offers it for MoE/MLA models); %s is dense",
					    dp_opt, dp, m->name);
	}
	return 0;
}

static int cost_model_make(struct cost_model **out, const char *spec,
			   const struct cost_config *cfg, struct ss_error *err);

/* Every cost model prices the weights the run has: --weight-dtype, else
 * the model's checkpoint's (model_weights_dtype). */
int cost_model_new(struct cost_model **out, const char *spec,
		   const struct cost_config *cfg, struct ss_error *err)
{
	struct cost_config c = *cfg;

	c.weight_dtype = model_weights_dtype(cfg->model, cfg->weight_dtype);
	return cost_model_make(out, spec, &c, err);
}

static int cost_model_make(struct cost_model **out, const char *spec,
			   const struct cost_config *cfg, struct ss_error *err)
{
	const struct cost_model_ops *ops;
	struct cost_model *cm = NULL;
	struct ss_params p;
	int rc;

	*out = NULL;
	/* Every deployment (run, live, plan, calibrate) builds its cost model
	 * here: a model whose architecture no cost model prices yet is refused
	 * rather than priced as a dense one (issue 12). */
	if (cfg->model && (rc = model_check_priced(cfg->model, err)))
		return rc;
	rc = ss_params_parse(&p, "--cost-model", spec, true, err);
	if (rc)
		return rc;
	if (!strcmp(p.name, "auto")) {
		if (p.n > 0)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--cost-model auto: takes no parameters (name the model to set them)");
		return auto_new(out, cfg, err);
	}
	ops = cost_model_find(p.name);
	if (!ops) {
		char known[128] = "";

		for (size_t i = 0; i < N_REGISTRY; i++)
			snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
				 i ? ", " : "", registry[i]->name);
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model: unknown cost model '%s' (known: auto, %s)", p.name, known);
	}
	if (cfg->tp < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model %s: tensor-parallel degree %d, expected >= 1",
				    p.name, cfg->tp);
	if (cfg->model && (rc = cost_layout_check(cfg->model, cfg->tp, cfg->ep, cfg->dp_attention,
						  "--tp", "--ep", "--dp-attention", err)))
		return rc;
	/* expert parallelism and DP attention are priced by the roofline and
	 * the table model (which takes them from its roofline); the fitted
	 * models know tensor parallelism only (constant prices nothing) */
	if ((cfg->ep > 1 || cfg->dp_attention > 1) && ops != &cost_roofline_ops &&
	    ops != &cost_table_ops && ops != &cost_scaled_ops && ops != &cost_constant_ops)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model %s: expert parallelism and data-parallel attention are priced by the roofline, table and scaled models only",
				    p.name);

	cm = calloc(1, sizeof(*cm));
	if (!cm)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	cm->ops = ops;
	cm->cfg = *cfg;
	if (cfg->engine && cfg->engine->n_graph_sizes) {
		cm->n_pad = (uint32_t)cfg->engine->graph_sizes[cfg->engine->n_graph_sizes - 1];
		cm->pad = calloc(cm->n_pad, sizeof(*cm->pad));
		cm->graph_of = calloc((size_t)cm->n_pad + 1, sizeof(*cm->graph_of));
		if (!cm->pad || !cm->graph_of) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto fail;
		}
		for (uint32_t i = 0; i < cm->n_pad; i++)
			cm->pad[i] = (struct cost_item){ .tokens = 1, .context = 0 };
		for (uint32_t n = 0; n <= cm->n_pad; n++)
			cm->graph_of[n] = engine_profile_graph_size(cfg->engine, n);
	}
	cm->priv = calloc(1, ops->priv_size ? ops->priv_size : 1);
	if (!cm->priv) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto fail;
	}
	rc = ops->init(cm->priv, &cm->cfg, &p, err);
	if (rc)
		goto fail;
	rc = ss_params_check_unused(&p, err);
	if (!rc)
		rc = dvfs_check(cfg, err);
	if (!rc && (cfg->power_cap_w > 0 || cfg->clock_frac > 0) && ops != &cost_roofline_ops) {
		struct cost_config rc_cfg = *cfg;

		rc_cfg.power_cap_w = 0;
		rc_cfg.clock_frac = 0;
		rc_cfg.engine = NULL;
		rc = cost_model_new(&cm->shadow, "roofline", &rc_cfg, err);
	}
	if (!rc && !(cm->spec = strdup(spec)))
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	if (rc) {
		if (ops->release)
			ops->release(cm->priv);
		cost_model_free(cm->shadow);
		goto fail;
	}
	*out = cm;
	return 0;

fail:
	free(cm->pad);
	free(cm->graph_of);
	free(cm->priv);
	free(cm);
	return rc;
}

void cost_model_free(struct cost_model *cm)
{
	if (!cm)
		return;
	cost_model_free(cm->shadow);
	if (cm->ops->release)
		cm->ops->release(cm->priv);
	free(cm->pad);
	free(cm->graph_of);
	free(cm->priv);
	free(cm->spec);
	free(cm);
}

int cost_model_new_like(struct cost_model **out, const struct cost_model *like,
			const struct cost_config *cfg, struct ss_error *err)
{
	if (!like->spec)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "a cost model built without a spec cannot be rebuilt for another configuration");
	return cost_model_new(out, like->spec, cfg, err);
}

const char *cost_model_op_backend(const struct cost_model *cm, enum cost_op op)
{
	if (cm->ops->op_backend)
		return cm->ops->op_backend(cm->priv, op);
	return cm->ops->name;
}

void cost_lora_kernel_from_ms(const double c[5], struct cost_lora_kernel *out)
{
	out->call_s = c[0] * 1e-3;
	out->seg_s = c[1] * 1e-3;
	out->s_per_adapter_byte = c[2] * 1e-3 / 1e6;
	out->s_per_act_byte = c[3] * 1e-3 / 1e6;
	out->s_per_flop = c[4] * 1e-3 / 1e9;
}

int cost_model_lora_kernel(const struct cost_model *cm, struct cost_lora_kernel *out)
{
	if (cm->ops->version >= 3 && cm->ops->lora_kernel)
		return cm->ops->lora_kernel(cm->priv, out);
	return -ENOENT;
}

const char *cost_model_reference(const struct cost_model *cm)
{
	return cm->ops->reference ? cm->ops->reference(cm->priv) : NULL;
}

/* ---- the power model's regimes (docs/energy.md) ----------------------- */

double cost_mem_power_frac(const struct gpu_spec *g, double batch)
{
	double lo = g->mem_power_lo, hi = g->mem_power_hi, h = g->mem_power_batch;

	if (!(hi > 0.0))
		return 0.5;   /* no fitted curve: the constant of the first model */
	if (!(lo > 0.0) || lo > hi)
		lo = hi;
	if (!(batch > 1.0))
		batch = 1.0;
	if (!(h > 0.0))
		return hi;
	return hi - (hi - lo) * h / (h + batch - 1.0);
}

/* cost_host_gap_power_w, inline here: a global function is not inlined
 * in a position-independent build (it could be interposed), and
 * compose_engine reads it every step. */
static inline double host_gap_power_w(const struct gpu_spec *g)
{
	return g->host_gap_w > 0.0 ? g->host_gap_w : g->idle_w;
}

double cost_host_gap_power_w(const struct gpu_spec *g)
{
	return host_gap_power_w(g);
}

/* ---- power cap and clock (docs/energy.md) ---------------------------------
 *
 * A step predicted at full clock takes T with Tc of it in compute-bound
 * kernels and costs E, of which P0 T is idle power.  At SM clock ratio r the
 * compute-bound kernels take Tc / r while memory-bound ones are unchanged
 * (HBM has its own clock), and the dynamic energy E - P0 T scales with the
 * square of the voltage, which tracks the clock in the DVFS range: r^2.  So
 *   T(r) = Tc / r + (T - Tc),   E(r) = P0 T(r) + (E - P0 T) r^2,
 * and the step power E(r) / T(r) rises monotonically with r. */

int cost_result_at_clock(struct cost_result *res, double r, double idle_w)
{
	double t = (double)res->duration_ns, tc = res->compute_ns > 0 ? (double)res->compute_ns : 0;
	double e_dyn = res->energy_j - idle_w * t * 1e-9;
	double t_new = tc / r + (t - tc);
	int64_t total = 0;
	int big = 0;

	if (r >= 1.0)
		return 0;
	if (!cost_ns_fits(t_new))
		return -ERANGE;
	if (e_dyn < 0)
		e_dyn = 0;
	/* Spread the stretch over the operators in proportion to their time. */
	for (int op = 0; op < COST_OP_COUNT; op++) {
		res->op_ns[op] = llround((double)res->op_ns[op] * t_new / t);
		total += res->op_ns[op];
		if (res->op_ns[op] > res->op_ns[big])
			big = op;
	}
	res->op_ns[big] += llround(t_new) - total;
	res->duration_ns = llround(t_new);
	if (res->duration_ns < 1) {
		res->op_ns[big] += 1 - res->duration_ns;
		res->duration_ns = 1;
	}
	res->compute_ns = llround(tc / r);
	res->energy_j = idle_w * t_new * 1e-9 + e_dyn * r * r;
	return 0;
}

static double power_at(const struct cost_result *res, double r, double idle_w)
{
	struct cost_result x = *res;

	if (cost_result_at_clock(&x, r, idle_w))
		return INFINITY;   /* too slow to run at all: never under a cap */
	return x.energy_j / ((double)x.duration_ns * 1e-9);
}

double cost_clock_for_cap(const struct cost_result *res, double cap_w, double idle_w)
{
	double lo = CLOCK_FRAC_MIN, hi = 1.0;

	if (power_at(res, 1.0, idle_w) <= cap_w)
		return 1.0;
	if (power_at(res, lo, idle_w) >= cap_w)
		return lo;   /* cannot get under the cap: lowest clock */
	for (int i = 0; i < 40; i++) {
		double mid = 0.5 * (lo + hi);

		if (power_at(res, mid, idle_w) <= cap_w)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

int cost_step_range_error(struct ss_error *err, const char *model, const char *what,
			  double ns, const struct cost_step *s)
{
	return ss_error_set(err, -ERANGE, NULL, 0,
			    "cost model %s: a step of %u request%s (%lld tokens) would take %g s of %s,"
			    " not a duration (expected 0 to %.3g s; is the GPU, calibration store or"
			    " fit far outside physical range?)",
			    model, s->n_items, s->n_items == 1 ? "" : "s", (long long)s->total_tokens,
			    ns * 1e-9, what,
			    (double)SS_TIME_MAX_NS * 1e-9);
}

/* The rows a graphed decode step runs, padded to its captured size; 0
 * when the step is not padded (not graphed, not a pure decode, or of a
 * captured size already). */
static uint32_t kernel_rows(const struct cost_model *cm, const struct cost_step *s)
{
	const struct engine_profile *p = cm->cfg.engine;
	int32_t g;

	if (!p || !cm->pad || s->n_prefill || s->total_tokens != (int64_t)s->n_items)
		return 0;
	/* (above n_pad no captured size holds the step) */
	g = s->n_items <= cm->n_pad ? cm->graph_of[s->n_items] : 0;
	return g > (int32_t)s->n_items ? (uint32_t)g : 0;
}

/* The step the kernels run: a graphed decode step padded to its captured
 * size g = kernel_rows() (the padding rows decode one token with no
 * context), else s.  A lock-step group's MoE tokens (group_tokens) stay
 * the ranks' real ones: the other ranks' padding is not known here. */
static const struct cost_step *kernel_step(struct cost_model *cm, const struct cost_step *s,
					   uint32_t g, struct cost_step *padded)
{
	if (!g)
		return s;
	{
		/* (in locals: a store through pad could be to pad_dirty, an
		 * integer of the same width, for all the compiler knows) */
		struct cost_item *pad = cm->pad;
		uint32_t dirty = cm->pad_dirty, end = dirty < (uint32_t)g ? dirty : (uint32_t)g;

		memcpy(pad, s->items, s->n_items * sizeof(*s->items));
		for (uint32_t i = s->n_items; i < end; i++)
			pad[i] = (struct cost_item){ .tokens = 1, .context = 0 };
		if (dirty <= (uint32_t)g)
			cm->pad_dirty = s->n_items;
	}
	*padded = (struct cost_step){ .items = cm->pad, .n_items = (uint32_t)g,
				      .n_emit = s->n_emit + ((uint32_t)g - s->n_items),
				      .total_tokens = g, .group_tokens = s->group_tokens };
	return padded;
}

/* The engine's host work on top of the kernels' result. */
static int compose_engine(struct cost_model *cm, const struct cost_step *s, struct cost_result *out,
			  struct ss_error *err)
{
	const struct cost_config *c = &cm->cfg;
	struct engine_step_ctx ctx = {
		.n_layers = c->model->n_layers, .tp = c->tp,
		.gap_power_w = host_gap_power_w(c->gpu) * cost_config_step_gpus(c),
	};

	return engine_profile_step_part(c->engine, &ctx, s->n_items, s->n_prefill,
					s->total_tokens, s->engine_part,
					s->engine_part ? s->n_out : s->n_emit, out, err);
}

static int predict_kernels(struct cost_model *cm, const struct cost_step *s, struct cost_result *out,
			   struct ss_error *err);

int cost_model_predict(struct cost_model *cm, const struct cost_step *s, struct cost_result *out,
		       struct ss_error *err)
{
	struct cost_step padded;
	uint32_t g;
	int rc;

	if (!cm->cfg.engine)
		return predict_kernels(cm, s, out, err);
	g = kernel_rows(cm, s);
	/* A padded step on the roofline at full clock: its sums are the
	 * step's plus the padding rows', added without writing the rows
	 * (cost_roofline_step_padded; 1: the model needs the rows) */
	rc = 1;
	if (g && cm->ops == &cost_roofline_ops &&
	    !(cm->cfg.power_cap_w > 0 || cm->cfg.clock_frac > 0)) {
		out->compute_ns = -1;
		out->out_of_grid = 0;
		out->out_of_grid_ns = 0;
		rc = cost_roofline_step_padded(cm->priv, s, g, out, err);
	}
	if (rc > 0)
		rc = predict_kernels(cm, kernel_step(cm, s, g, &padded), out, err);
	if (!rc)
		rc = compose_engine(cm, s, out, err);
	return rc;
}

/* The backend's prediction, then the power cap and clock. */
static int predict_kernels(struct cost_model *cm, const struct cost_step *s, struct cost_result *out,
			   struct ss_error *err)
{
	const struct cost_config *c = &cm->cfg;
	double idle_w, r;
	int rc;

	out->compute_ns = -1;
	out->out_of_grid = 0;
	out->out_of_grid_ns = 0;
	rc = cm->ops->step(cm->priv, s, out, err);
	if (rc || !(c->power_cap_w > 0 || c->clock_frac > 0))
		return rc;
	if (out->compute_ns < 0) {
		/* Take the compute-bound share from the roofline of the same step. */
		struct cost_result ref;

		rc = predict_kernels(cm->shadow, s, &ref, err);
		if (rc)
			return rc;
		out->compute_ns = llround((double)out->duration_ns * (double)ref.compute_ns /
					  (double)ref.duration_ns);
	}
	idle_w = c->gpu->idle_w * cost_config_step_gpus(c);
	r = c->clock_frac > 0 ? c->clock_frac : 1.0;
	rc = cost_result_at_clock(out, r, idle_w);
	if (!rc && c->power_cap_w > 0) {
		r = cost_clock_for_cap(out, c->power_cap_w * cost_config_step_gpus(c), idle_w);
		rc = cost_result_at_clock(out, r, idle_w);
	}
	if (rc)
		return cost_step_range_error(err, cm->ops->name, "the step at the lowered clock",
					     (double)out->duration_ns / r, s);
	return 0;
}

void cost_model_step(struct cost_model *cm, const struct cost_step *s, struct cost_result *out)
{
	if (cost_model_predict(cm, s, out, NULL) == 0)
		return;
	memset(out, 0, sizeof(*out));
	out->duration_ns = SS_TIME_MAX_NS;
	out->op_ns[COST_OP_HOST] = SS_TIME_MAX_NS;
	out->compute_ns = -1;
}

int cost_result_from_measured(struct cost_result *out, const double ms[COST_OP_COUNT],
			      const bool measured[COST_OP_COUNT],
			      const double op_power_w[COST_OP_COUNT],
			      const struct cost_result *rl, uint32_t oog_n, double oog_ms,
			      const char *model, const struct cost_step *s, struct ss_error *err)
{
	double rl_power_w = rl->energy_j / ((double)rl->duration_ns * 1e-9);
	double e_measured = 0.0;
	int64_t total = 0, t_measured = 0;

	for (int op = 0; op < COST_OP_COUNT; op++) {
		if (measured[op]) {
			if (!cost_ns_fits(ms[op] * 1e6 + 0.5))
				return cost_step_range_error(err, model, cost_op_name(op),
							     ms[op] * 1e6, s);
			out->op_ns[op] = (int64_t)(ms[op] * 1e6 + 0.5);
		} else {
			out->op_ns[op] = rl->op_ns[op];
		}
		if (!ss_time_add(total, out->op_ns[op], &total))
			return cost_step_range_error(err, model, "all operators together",
						     (double)total + (double)out->op_ns[op], s);
	}
	if (total <= 0) {
		out->op_ns[COST_OP_HOST] += 1 - total;
		total = 1;
	}
	out->duration_ns = total;
	for (int op = 0; op < COST_OP_COUNT; op++)
		if (op_power_w && op_power_w[op] > 0.0) {
			e_measured += op_power_w[op] * (double)out->op_ns[op] * 1e-9;
			t_measured += out->op_ns[op];
		}
	/* measured power where known, the roofline's average power elsewhere */
	out->energy_j = e_measured + rl_power_w * (double)(total - t_measured) * 1e-9;
	/* and its compute-bound share, for power caps and clock settings */
	/* 0 <= compute_ns <= duration_ns, so the product is in range */
	out->compute_ns = cost_ns_round((double)rl->compute_ns * (double)total /
					(double)rl->duration_ns);
	out->out_of_grid = oog_n;
	/* a part of the duration, which fits */
	out->out_of_grid_ns = cost_ns_fits(oog_ms * 1e6 + 0.5) ? (int64_t)(oog_ms * 1e6 + 0.5) : total;
	return 0;
}

/* ---- pipeline parallelism -------------------------------------------------- */

int cost_pp_stage_layers(int n_layers, int pp, int s)
{
	int base = n_layers / pp, rem = n_layers % pp;

	/* vLLM's get_pp_indices: partitions[-i] += 1 for i in 2 .. rem + 1,
	 * i.e. stages pp - 1 - rem .. pp - 2 take one layer more */
	return base + (s >= pp - 1 - rem && s <= pp - 2 ? 1 : 0);
}

int cost_pp_stage_first(int n_layers, int pp, int s)
{
	int first = 0;

	for (int k = 0; k < s; k++)
		first += cost_pp_stage_layers(n_layers, pp, k);
	return first;
}

void cost_pp_split(const int64_t op_ns[COST_OP_COUNT], int64_t duration_ns, int n_layers, int pp,
		   int64_t *stage_ns)
{
	/* per-layer operators: every layer's kernels and all-reduces */
	double layer_ns = (double)op_ns[COST_OP_GEMM] +
			  (double)op_ns[COST_OP_ATTN_PREFILL] +
			  (double)op_ns[COST_OP_ATTN_DECODE] +
			  (double)op_ns[COST_OP_ELEMENTWISE] +
			  (double)op_ns[COST_OP_ALLREDUCE];
	int64_t sum = 0;

	for (int s = 0; s < pp - 1; s++) {
		double t = layer_ns * cost_pp_stage_layers(n_layers, pp, s) / n_layers;

		if (s == 0)
			t += (double)op_ns[COST_OP_HOST];
		stage_ns[s] = (int64_t)(t + 0.5);
		if (stage_ns[s] < 1)
			stage_ns[s] = 1;
		sum += stage_ns[s];
	}
	/* the last stage: its layers, LM head and sampler, and the rounding */
	stage_ns[pp - 1] = duration_ns - sum;
	if (stage_ns[pp - 1] < 1)
		stage_ns[pp - 1] = 1;
}

void cost_pp_split_sliced(const int64_t op_ns[COST_OP_COUNT], int64_t duration_ns, int n_layers,
			  int pp, const int64_t (*stage_op)[COST_OP_COUNT], int64_t *stage_ns)
{
	static const enum cost_op per_layer[] = {
		COST_OP_GEMM, COST_OP_ATTN_PREFILL, COST_OP_ATTN_DECODE, COST_OP_ELEMENTWISE,
		COST_OP_ALLREDUCE,
	};
	double all[COST_OP_COUNT] = { 0 };
	int64_t sum = 0;

	for (int s = 0; s < pp; s++)
		for (size_t k = 0; k < sizeof(per_layer) / sizeof(per_layer[0]); k++)
			all[per_layer[k]] += (double)stage_op[s][per_layer[k]];
	for (int s = 0; s < pp - 1; s++) {
		double t = 0.0;

		for (size_t k = 0; k < sizeof(per_layer) / sizeof(per_layer[0]); k++) {
			enum cost_op op = per_layer[k];
			double share = all[op] > 0.0 ? (double)stage_op[s][op] / all[op] :
				       (double)cost_pp_stage_layers(n_layers, pp, s) / n_layers;

			t += (double)op_ns[op] * share;
		}
		if (s == 0)
			t += (double)op_ns[COST_OP_HOST];
		stage_ns[s] = (int64_t)(t + 0.5);
		if (stage_ns[s] < 1)
			stage_ns[s] = 1;
		sum += stage_ns[s];
	}
	stage_ns[pp - 1] = duration_ns - sum;
	if (stage_ns[pp - 1] < 1)
		stage_ns[pp - 1] = 1;
}
