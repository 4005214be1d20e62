/* servesim — the "fit" cost model: every measured operator priced by its
 * regression fit on the calibration store's measurements (calibrate/
 * fitting.h; docs/cost-models.md), inside the measured grid and beyond it.
 *
 * The fits are linear in their features, so each operator of a step is an
 * affine function of a few step sums, precomputed in init():
 *
 *   gemm, elementwise  a + b m            (m = step tokens)
 *   lm_head            GEMM a + b n_emit, final norm a + b m
 *   attn_decode        [1, B, sum KV] of the decode batch at its effective
 *                      batch B (heads mapping as in "table")
 *   attn_prefill       [1, tokens, causal positions] summed over the chunks
 *   allreduce          a + b bytes per all-reduce (custom all-reduce up to
 *                      8 MiB, NCCL above) and the logits all-gather
 *   host               a + b n_items
 *
 * Because the features are linear, averaging the per-request times of a
 * mixed decode batch equals the time at the mean length: the fit cannot
 * express the short-length floors the table captures.  Queries outside the
 * measured ranges are still counted in out_of_grid / out_of_grid_ns (one
 * per operator and step, and per attention request, as in "table").
 * Operators without measurements come from the roofline, whose power model
 * also gives the energy.
 */
#include "costmodel.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost-cache-int.h"
#include "grid.h"
#include "lora-kernel.h"
#include "op-plan.h"
#include "store-cache.h"

/* An affine function of one step quantity and the range it was fitted on. */
struct lin {
	double a, b;                /* ms = a + b x */
	double lo, hi;              /* measured range of x; outside: counted */
};

struct attn_fit {
	struct cal_fit fit;
	double f;                   /* batch factor */
	double mult;                /* layers */
	double bmax;                /* largest measured (effective) batch */
	double lmin, lmax;          /* measured length range (decode: KV; prefill: query tokens) */
};

/* Everything init sets here but rl is also kept in the cache beside the
 * stores (fit_io below): a new field set by init belongs there too. */
struct fitm {
	void *rl;
	bool measured[COST_OP_COUNT];
	double power_w[COST_OP_COUNT]; /* measured average power per operator, 0 = none */
	struct lin gemm, lm, fnorm, ew, host;
	struct attn_fit pf, dec;
	bool tp_active;
	double ar_bytes_per_tok, ar_n, ar_switch;
	struct lin ar[2];           /* per byte: [custom, nccl] */
	double ag_bytes_per_emit;
	struct lin ag;
	/* the adapter kernels' fit (cal_plan.lora: ms a call, a segment, an
	 * MB of adapters, an MB of activations, a GFLOP), for the LoRA component; lora_ok false: not measured */
	double lora_c[CAL_LORA_TERMS];
	bool lora_ok;
};

static void fit_shape(const struct cost_config *cfg, struct cal_shape *sh)
{
	const struct model_spec *m = cfg->model;
	int tp = cfg->tp;

	memset(sh, 0, sizeof(*sh));
	sh->layers = m->n_layers;
	sh->hidden = m->hidden;
	sh->heads = m->n_heads / tp;
	sh->kv_heads = m->n_kv_heads >= tp ? m->n_kv_heads / tp : 1;
	sh->head_dim = m->head_dim;
	sh->ff = m->intermediate / tp;
	sh->gated = m->mlp == MLP_GATED;
	sh->rope = m->pos_embeddings == 0;
	sh->layernorm = m->norm == NORM_LAYER;
	sh->vocab = m->vocab;
	sh->tp = tp;
	sh->dtype_bytes = m->dtype_bytes;
	sh->model_id = m->hf_id;
}

static void range_of(const struct cal_series *s, int d, double scale, double *lo, double *hi)
{
	double l, h;

	cal_series_range(s, d, &l, &h);
	if (l * scale > *lo)
		*lo = l * scale;
	if (h * scale < *hi)
		*hi = h * scale;
}

static void fit_release(void *priv)
{
	struct fitm *t = priv;

	if (t->rl && cost_roofline_ops.release)
		cost_roofline_ops.release(t->rl);
	free(t->rl);
	memset(t, 0, sizeof(*t));
}

static void attn_from(struct attn_fit *a, const struct cal_plan_op *o, bool prefill)
{
	double lo;

	a->fit = o->ip.fit;
	a->f = o->f;
	a->mult = o->mult;
	cal_series_range(o->s, prefill ? 2 : 0, &lo, &a->bmax);
	cal_series_range(o->s, 1, &a->lmin, &a->lmax);
}

/* The fit model's state, both ways, for the cache beside the stores
 * (cost-cache-int.h; as the table model's): a run from the cache skips
 * reading the measurements and the least-squares fits.  Every field init
 * sets but rl must pass through here. */
static void io_attn(struct tio *tio, struct attn_fit *a)
{
	cost_io_fit(tio, &a->fit);
	COST_IO(tio, a->f);
	COST_IO(tio, a->mult);
	COST_IO(tio, a->bmax);
	COST_IO(tio, a->lmin);
	COST_IO(tio, a->lmax);
}

static void fit_io(struct tio *tio, void *state)
{
	struct fitm *t = state;

	for (int op = 0; op < COST_OP_COUNT; op++)
		cost_io_bool(tio, &t->measured[op]);
	COST_IO(tio, t->power_w);
	COST_IO(tio, t->gemm);
	COST_IO(tio, t->lm);
	COST_IO(tio, t->fnorm);
	COST_IO(tio, t->ew);
	COST_IO(tio, t->host);
	io_attn(tio, &t->pf);
	io_attn(tio, &t->dec);
	cost_io_bool(tio, &t->tp_active);
	COST_IO(tio, t->ar_bytes_per_tok);
	COST_IO(tio, t->ar_n);
	COST_IO(tio, t->ar_switch);
	COST_IO(tio, t->ar);
	COST_IO(tio, t->ag_bytes_per_emit);
	COST_IO(tio, t->ag);
	COST_IO(tio, t->lora_c);
	cost_io_bool(tio, &t->lora_ok);
}

static int fit_init(void *priv, const struct cost_config *cfg, struct ss_params *params,
		    struct ss_error *err)
{
	struct fitm *t = priv;
	struct ss_params rp;
	struct cal_cache c;
	struct cal_plan p;
	struct cal_shape sh;
	bool cacheable;
	double ar_max_mb;
	int rc;

	memset(t, 0, sizeof(*t));
	if (!cfg->model || !cfg->gpu)
		return ss_error_set(err, -EINVAL, NULL, 0, "--cost-model fit: needs a model and a GPU");
	if (ss_dtype_bytes(cfg->weight_dtype, cfg->model) != (double)cfg->model->dtype_bytes ||
	    ss_dtype_bytes(cfg->kv_dtype, cfg->model) != (double)cfg->model->dtype_bytes)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model fit: weights or KV in another dtype than the model's are not modelled yet (its fits are of 16-bit runs); use --cost-model table or roofline");
	if (cfg->model->n_experts > 0)
		return ss_error_set(err, -ENOTSUP, NULL, 0,
				    "--cost-model fit: %s: mixture-of-experts is not modelled by this cost model yet (its fits are of dense models); use --cost-model table or roofline",
				    cfg->model->name);
	if (model_attn_special(cfg->model))
		return ss_error_set(err, -ENOTSUP, NULL, 0,
				    "--cost-model fit: %s: %s is not modelled by this cost model yet (its fits are of full-attention models); use --cost-model table or roofline",
				    cfg->model->name, model_attn_special(cfg->model));
	{
		bool any = false;

		for (int i = 0; i < cfg->n_stores; i++)
			any |= cfg->stores[i] != NULL;
		if (!any)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--cost-model fit: needs a calibration store (none given)");
	}
	rc = cost_param(params, "custom_allreduce_max_mb", 8.0, 0.0, 1e6, &ar_max_mb, err);
	if (!rc)
		rc = ss_params_parse(&rp, "--cost-model", "roofline", true, err);
	if (rc)
		return rc;
	t->rl = calloc(1, cost_roofline_ops.priv_size);
	if (!t->rl)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	rc = cost_roofline_ops.init(t->rl, cfg, &rp, err);
	if (rc) {
		fit_release(t);
		return rc;
	}
	fit_shape(cfg, &sh);
	cacheable = cost_cache_key(&c, "fit 2", cfg, &sh, ar_max_mb);
	if (cacheable) {
		void *rl = t->rl;

		if (cost_cache_load(&c, fit_io, t))
			return 0;
		/* no arrays to free: back to the state before the read */
		memset(t, 0, sizeof(*t));
		t->rl = rl;
	}
	rc = cal_plan_load(&p, cfg->stores, cfg->n_stores, cfg->gpu->name, &sh, err);
	if (rc) {
		fit_release(t);
		return rc;
	}
	cost_measured_power(&p.data, cfg->tp, t->power_w);
	if (p.gemm_ok) {
		t->gemm = (struct lin){ 0.0, 0.0, 1.0, INFINITY };
		for (int g = CAL_G_QKV; g <= CAL_G_DOWN; g++) {
			double a, b;

			cal_plan_gemm_linear(&p, g, &a, &b);
			t->gemm.a += sh.layers * a;
			t->gemm.b += sh.layers * b;
			range_of(p.gemm[g].s, 0, 1.0, &t->gemm.lo, &t->gemm.hi);
		}
		t->measured[COST_OP_GEMM] = true;
	}
	if (p.lm_ok) {
		t->lm = (struct lin){ 0.0, 0.0, 1.0, INFINITY };
		cal_plan_gemm_linear(&p, CAL_G_LM, &t->lm.a, &t->lm.b);
		range_of(p.gemm[CAL_G_LM].s, 0, 1.0, &t->lm.lo, &t->lm.hi);
		t->fnorm = (struct lin){ 0.0, 0.0, 1.0, INFINITY };
		cal_plan_fnorm_linear(&p, &t->fnorm.a, &t->fnorm.b);
		range_of(p.fnorm.s, 0, 1.0 / p.fnorm.f, &t->fnorm.lo, &t->fnorm.hi);
		t->measured[COST_OP_LM_HEAD] = true;
	}
	if (p.pf_ok && p.pf.ip.fit.p == 3) {
		attn_from(&t->pf, &p.pf, true);
		t->measured[COST_OP_ATTN_PREFILL] = true;
	}
	if (p.dec_ok && p.dec.ip.fit.p == 3) {
		attn_from(&t->dec, &p.dec, false);
		t->measured[COST_OP_ATTN_DECODE] = true;
	}
	if (p.ew_ok) {
		t->ew = (struct lin){ 0.0, 0.0, 1.0, INFINITY };
		cal_plan_ew_linear(&p, &t->ew.a, &t->ew.b);
		for (int e = 0; e < CAL_EW_COUNT; e++)
			if (p.ew[e].s)
				range_of(p.ew[e].s, 0, 1.0 / p.ew[e].f, &t->ew.lo, &t->ew.hi);
		t->measured[COST_OP_ELEMENTWISE] = true;
	}
	t->tp_active = cfg->tp > 1;
	if (t->tp_active && p.ar_ok) {
		t->ar_bytes_per_tok = (double)sh.hidden * sh.dtype_bytes;
		t->ar_n = 2.0 * sh.layers + 1.0;
		t->ar_switch = ar_max_mb * 1024.0 * 1024.0;
		for (int k = 0; k < 2; k++) {
			int kind = k == 0 && p.ar[CAL_COLL_CUSTOM].s ? CAL_COLL_CUSTOM :
				   p.ar[CAL_COLL_NCCL].s ? CAL_COLL_NCCL :
				   p.ar[CAL_COLL_CUSTOM].s ? CAL_COLL_CUSTOM : CAL_COLL_OTHER;

			t->ar[k] = (struct lin){ 0.0, 0.0, 1.0, INFINITY };
			cal_plan_coll_linear(&p, kind, &t->ar[k].a, &t->ar[k].b);
			range_of(p.ar[kind].s, 0, 1.0, &t->ar[k].lo, &t->ar[k].hi);
		}
		t->ag_bytes_per_emit = (double)sh.vocab * sh.dtype_bytes;
		t->ag = (struct lin){ 0.0, 0.0, 1.0, INFINITY };
		if (p.ag.s) {
			cal_plan_coll_linear(&p, -1, &t->ag.a, &t->ag.b);
			range_of(p.ag.s, 0, 1.0, &t->ag.lo, &t->ag.hi);
		} else {
			t->ag = t->ar[1];
			t->ag.b *= 0.5;
		}
		t->measured[COST_OP_ALLREDUCE] = true;
	} else if (!t->tp_active) {
		t->measured[COST_OP_ALLREDUCE] = true;
	}
	if (p.host_ok) {
		t->host = (struct lin){ 0.0, 0.0, 1.0, INFINITY };
		cal_plan_host_linear(&p, &t->host.a, &t->host.b);
		for (int i = 0; i < CAL_HOST_PARTS; i++)
			range_of(p.host[i].s, 0, 1.0, &t->host.lo, &t->host.hi);
		t->measured[COST_OP_HOST] = true;
	}
	if (p.lora.p == CAL_LORA_TERMS) {
		memcpy(t->lora_c, p.lora.c, sizeof(t->lora_c));
		t->lora_ok = true;
	}
	cal_plan_release(&p);
	if (cacheable)
		cost_cache_save(&c, fit_io, t);
	return 0;
}

/* ms -> whole ns, for the non-negative times of a step (llround is a
 * library call; this is on the hot path). */
struct oog {
	uint32_t n;
	double ms;
};

/* l at x (scale: x units per feature unit), counted when x is outside. */
static inline double lin_at(const struct lin *l, double x, double scale, struct oog *o)
{
	double y = l->a + l->b * x * scale;

	if (y < 0.0)
		y = 0.0;
	if (!(x * scale >= l->lo && x * scale <= l->hi)) {
		o->n++;
		o->ms += y;
	}
	return y;
}

static int fit_step(void *priv, const struct cost_step *step, struct cost_result *out,
		    struct ss_error *err)
{
	const struct fitm *t = priv;
	struct cost_result rl;
	double ms[COST_OP_COUNT] = { 0 }, tok = 0.0, emit = step->n_emit;
	double dec_kv = 0.0, pf_tok = 0.0, pf_pos = 0.0;
	uint32_t n_pf = 0, n_dec = 0, dec_out = 0, pf_out = 0;
	struct oog o = { 0, 0.0 };

	if (cost_roofline_ops.step(t->rl, step, &rl, err))
		return -ERANGE;
	for (uint32_t i = 0; i < step->n_items; i++) {
		double c = step->items[i].tokens, p = step->items[i].context;

		if (c > 1.0) {
			pf_tok += c;
			pf_pos += c * p + 0.5 * c * (c + 1.0);
			n_pf++;
			{
				/* measured range: the equivalent prompt, as in "table" */
				double pos = c * p + 0.5 * c * (c + 1.0);
				double se = 0.5 * (sqrt(8.0 * pos + 1.0) - 1.0);

				pf_out += !(se >= t->pf.lmin && se <= t->pf.lmax);
			}
		} else if (c == 1.0) {
			dec_kv += p + 1.0;
			n_dec++;
			dec_out += !(p + 1.0 >= t->dec.lmin && p + 1.0 <= t->dec.lmax);
		}
		tok += c > 0.0 ? c : 0.0;
	}
	if (tok > 0.0) {
		if (t->measured[COST_OP_GEMM])
			ms[COST_OP_GEMM] = lin_at(&t->gemm, tok, 1.0, &o);
		if (t->measured[COST_OP_ELEMENTWISE])
			ms[COST_OP_ELEMENTWISE] = lin_at(&t->ew, tok, 1.0, &o);
		if (t->measured[COST_OP_LM_HEAD])
			ms[COST_OP_LM_HEAD] = lin_at(&t->fnorm, tok, 1.0, &o);
		if (t->tp_active && t->measured[COST_OP_ALLREDUCE]) {
			int k = tok * t->ar_bytes_per_tok <= t->ar_switch ? 0 : 1;
			struct oog o1 = { 0, 0.0 };

			ms[COST_OP_ALLREDUCE] = t->ar_n * lin_at(&t->ar[k], tok, t->ar_bytes_per_tok, &o1);
			o.n += o1.n;
			o.ms += t->ar_n * o1.ms;
		}
	}
	if (emit > 0.0) {
		if (t->measured[COST_OP_LM_HEAD])
			ms[COST_OP_LM_HEAD] += lin_at(&t->lm, emit, 1.0, &o);
		if (t->tp_active && t->measured[COST_OP_ALLREDUCE])
			ms[COST_OP_ALLREDUCE] += lin_at(&t->ag, emit, t->ag_bytes_per_emit, &o);
	}
	if (n_pf && t->measured[COST_OP_ATTN_PREFILL]) {
		/* (1/n) sum_i fit(B, B c_i, B pos_i) = fit(B, B mean c, B mean pos) */
		double beff = t->pf.f * n_pf;
		double y = cal_prefill_fit(&t->pf.fit, beff * pf_tok / n_pf, beff * pf_pos / n_pf);

		ms[COST_OP_ATTN_PREFILL] = t->pf.mult * (y > 0.0 ? y : 0.0);
		if (beff > t->pf.bmax)
			pf_out = n_pf;
		o.n += pf_out;
		o.ms += ms[COST_OP_ATTN_PREFILL] * pf_out / n_pf;
	}
	if (n_dec && t->measured[COST_OP_ATTN_DECODE]) {
		double beff = t->dec.f * n_dec;
		double y = cal_decode_fit(&t->dec.fit, beff, beff * dec_kv / n_dec);

		ms[COST_OP_ATTN_DECODE] = t->dec.mult * (y > 0.0 ? y : 0.0);
		if (beff > t->dec.bmax)
			dec_out = n_dec;
		o.n += dec_out;
		o.ms += ms[COST_OP_ATTN_DECODE] * dec_out / n_dec;
	}
	if (t->measured[COST_OP_HOST])
		ms[COST_OP_HOST] = lin_at(&t->host, step->n_items > 0 ? step->n_items : 1, 1.0, &o);

	return cost_result_from_measured(out, ms, t->measured, t->power_w, &rl, o.n, o.ms, "fit",
					 step, err);
}

static const char *fit_op_backend(const void *priv, enum cost_op op)
{
	const struct fitm *t = priv;

	if ((unsigned)op >= COST_OP_COUNT)
		return "?";
	return t->measured[op] ? "fit" : "roofline";
}

static int fit_lora_kernel(const void *priv, struct cost_lora_kernel *out)
{
	const struct fitm *t = priv;

	if (!t->lora_ok)
		return -ENOENT;
	cost_lora_kernel_from_ms(t->lora_c, out);
	return 0;
}

const struct cost_model_ops cost_fit_ops = {
	.version = COST_MODEL_VERSION,
	.name = "fit",
	.description = "regression fits (GSL) on calibration-store measurements, everywhere",
	.priv_size = sizeof(struct fitm),
	.init = fit_init,
	.step = fit_step,
	.release = fit_release,
	.op_backend = fit_op_backend,
	.lora_kernel = fit_lora_kernel,
};
