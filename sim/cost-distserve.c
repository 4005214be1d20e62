/* servesim — the "distserve" cost model: the step-latency fits of DistServe's
 * simulator (OSDI'24; repository LLMServe/DistServe, simdistserve/estimators/
 * time_estimator.py), read from its profile file (docs/cost-models.md).
 *
 * The file holds, per Hugging Face model id and tensor-parallel degree,
 * three coefficient triples fitted to A100-80GB measurements (all in ms):
 *
 *   prefill_ms = a + b Σ len + c Σ len²          over the batch's prompt chunks
 *   decode_ms  = a + b Σ ctx + c batch           decoding_smallbs when
 *                                                batch < threshold, else
 *                                                decoding_largebs
 *
 * where len is the number of prompt tokens the step processes for a request
 * (the chunk, not the prior context) and ctx is the KV length the decode
 * attends to (the cache plus its own new token).  A step with prefill
 * chunks is priced by the prefill formula alone, as DistServe's worker does
 * for a chunked-prefill batch with decodes riding along (mixed=distserve);
 * mixed=sum adds the decodes' own decode time.
 *
 * Two keys reproduce DistServe's simulator rather than its fits (both off by
 * default): step_extra_ms / step_extra_ms_per_token add its per-step Ray
 * overhead (2 ms + 1e-4 ms per context token there), and fit_tp=N prices
 * every instance with the TP-N fits, as its simulate_dist.py does for its
 * decode workers (docs/validation.md, "DistServe's simulator example").
 *
 * The fits give one time for the whole forward pass, with no per-operator
 * split: it is booked to the gemm operator.  Energy and the compute-bound
 * share come from the roofline's average power for the same step.
 */
#include "costmodel.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One fitted triple: t = a + b x + c y, ms. */
struct ds_coef {
	double a;                /* ms */
	double b;                /* ms per token (Σ len or Σ ctx) */
	double c;                /* ms per token² (prefill) or per request (decode) */
};

struct distserve {
	struct ds_coef prefill;
	struct ds_coef dec_small;        /* batch < threshold */
	struct ds_coef dec_large;        /* batch >= threshold */
	double threshold;                /* decode batch size (requests) */
	double prefill_extra_ms;         /* added to every prefill step, ms */
	/* DistServe's simulator's per-step driver (Ray) overhead, added to
	 * every step: step_extra_ms + step_extra_ms_per_token x the context
	 * length of every item (prompt for a prefill, prompt + generated
	 * before this step for a decode).  0 and 0 by default. */
	double step_extra_ms;            /* ms per step */
	double step_extra_ms_per_token;  /* ms per context token in the step */
	bool mixed_sum;                  /* mixed steps: prefill + decode time */
	void *rl;                        /* roofline instance, for power */
};

static void ds_release(void *priv)
{
	struct distserve *d = priv;

	if (d->rl && cost_roofline_ops.release)
		cost_roofline_ops.release(d->rl);
	free(d->rl);
	d->rl = NULL;
}

/* obj[key] as a triple of numbers; errors name the file and the path. */
static int read_coef(json_t *obj, const char *key, const char *path, const char *where,
		     struct ds_coef *out, struct ss_error *err)
{
	json_t *v = json_object_get(obj, key);
	double x[3];

	if (!v)
		return ss_error_set(err, -EINVAL, path, 0, "%s: missing \"%s\"", where, key);
	if (!json_is_array(v) || json_array_size(v) != 3)
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: \"%s\" must be an array of 3 numbers [a, b, c]", where, key);
	for (size_t i = 0; i < 3; i++) {
		json_t *e = json_array_get(v, i);

		if (!json_is_number(e))
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: \"%s\"[%zu] is not a number", where, key, i);
		x[i] = json_number_value(e);
		if (!isfinite(x[i]))
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: \"%s\"[%zu] is not finite", where, key, i);
	}
	*out = (struct ds_coef){ x[0], x[1], x[2] };
	return 0;
}

/* Comma-separated keys of a JSON object, for "has: ..." in errors. */
static void keys_of(json_t *obj, char *buf, size_t len)
{
	const char *k;
	json_t *v;
	size_t n = 0;

	buf[0] = '\0';
	json_object_foreach(obj, k, v) {
		(void)v;
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? ", " : "", k);
		if (n >= len)
			break;
	}
	if (!buf[0])
		snprintf(buf, len, "nothing");
}

/* Read the model's fits at tp from path into d. */
static int load_fits(struct distserve *d, const char *path, const char *hf_id, int tp,
		     const char *servesim_name, struct ss_error *err)
{
	json_error_t jerr;
	json_t *root, *model, *fit, *thr;
	FILE *f;
	char tpkey[16], where[192], has[256];
	int rc = 0;

	f = fopen(path, "r");
	if (!f) {
		rc = errno ? -errno : -ENOENT;
		return ss_error_set(err, rc, path, 0, "cannot open the DistServe profile: %s",
				    strerror(-rc));
	}
	root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
	fclose(f);
	if (!root)
		return ss_error_set(err, -EINVAL, path, jerr.line > 0 ? jerr.line : 0,
				    "invalid JSON: %s", jerr.text);
	if (!json_is_object(root)) {
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "expected an object {model: {tp: {prefill, decoding_smallbs, ...}}}");
		goto out;
	}
	model = json_object_get(root, hf_id);
	if (!json_is_object(model)) {
		keys_of(root, has, sizeof(has));
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "no fits for model \"%s\" (--model %s); the file has: %s",
				  hf_id, servesim_name, has);
		goto out;
	}
	snprintf(tpkey, sizeof(tpkey), "%d", tp);
	fit = json_object_get(model, tpkey);
	if (!json_is_object(fit)) {
		keys_of(model, has, sizeof(has));
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "no fits for \"%s\" at tensor parallelism %d; it has tp %s",
				  hf_id, tp, has);
		goto out;
	}
	snprintf(where, sizeof(where), "\"%s\" tp %d", hf_id, tp);
	rc = read_coef(fit, "prefill", path, where, &d->prefill, err);
	if (!rc)
		rc = read_coef(fit, "decoding_smallbs", path, where, &d->dec_small, err);
	if (!rc)
		rc = read_coef(fit, "decoding_largebs", path, where, &d->dec_large, err);
	if (rc)
		goto out;
	thr = json_object_get(fit, "decoding_large_small_bs_threshold");
	if (!json_is_number(thr) || !(json_number_value(thr) >= 1)) {
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "%s: \"decoding_large_small_bs_threshold\" missing or not a number >= 1",
				  where);
		goto out;
	}
	d->threshold = json_number_value(thr);
out:
	json_decref(root);
	return rc;
}

static int ds_init(void *priv, const struct cost_config *cfg, struct ss_params *params,
		   struct ss_error *err)
{
	struct distserve *d = priv;
	const char *engine, *file, *fit_gpu, *mixed, *shared;
	char path[4096];
	struct ss_params rp;
	double fit_tp = 0.0;
	int rc;

	memset(d, 0, sizeof(*d));
	if (!cfg->model || !cfg->gpu)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model distserve: needs a model and a GPU");
	if (ss_dtype_bytes(cfg->weight_dtype, cfg->model) != (double)cfg->model->dtype_bytes ||
	    ss_dtype_bytes(cfg->kv_dtype, cfg->model) != (double)cfg->model->dtype_bytes)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model distserve: weights or KV in another dtype than the model's are not modelled yet (its fits are of 16-bit runs); use --cost-model table or roofline");
	if (cfg->model->n_experts > 0)
		return ss_error_set(err, -ENOTSUP, NULL, 0,
				    "--cost-model distserve: %s: mixture-of-experts is not modelled by this cost model yet (its fits are of dense models); use --cost-model table or roofline",
				    cfg->model->name);
	if (model_attn_special(cfg->model))
		return ss_error_set(err, -ENOTSUP, NULL, 0,
				    "--cost-model distserve: %s: %s is not modelled by this cost model yet (its fits are of full-attention models); use --cost-model table or roofline",
				    cfg->model->name, model_attn_special(cfg->model));
	engine = ss_params_str(params, "engine", "distserve");
	if (strcmp(engine, "distserve") && strcmp(engine, "vllm"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model distserve: 'engine' is '%s', expected distserve or vllm",
				    engine);
	mixed = ss_params_str(params, "mixed", "distserve");
	if (strcmp(mixed, "distserve") && strcmp(mixed, "sum"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model distserve: 'mixed' is '%s', expected distserve or sum",
				    mixed);
	d->mixed_sum = !strcmp(mixed, "sum");
	fit_gpu = ss_params_str(params, "gpu", "a100-80gb-sxm");
	if (strcmp(fit_gpu, cfg->gpu->name))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model distserve: the fits are measurements of %s, not %s "
				    "(give gpu=%s to use them anyway)",
				    fit_gpu, cfg->gpu->name, cfg->gpu->name);
	rc = cost_param(params, "prefill_extra_ms", 1.0, 0.0, 1e6, &d->prefill_extra_ms, err);
	if (!rc)
		rc = cost_param(params, "step_extra_ms", 0.0, 0.0, 1e6, &d->step_extra_ms, err);
	if (!rc)
		rc = cost_param(params, "step_extra_ms_per_token", 0.0, 0.0, 1e3,
				&d->step_extra_ms_per_token, err);
	/* fit_tp: price with the fits of this tensor parallelism instead of the
	 * instance's (0 = the instance's own). */
	if (!rc)
		rc = cost_param(params, "fit_tp", 0.0, 0.0, 64.0, &fit_tp, err);
	if (rc)
		return rc;
	if (fit_tp != floor(fit_tp))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model distserve: 'fit_tp' is %g, expected a whole number "
				    "of GPUs (0: the instance's tp)", fit_tp);

	file = ss_params_str(params, "file", NULL);
	if (file && !file[0])
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model distserve: 'file' is empty, expected a path");
	if (!file) {
		shared = cfg->shared_data;
		if (!shared || !shared[0])
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--cost-model distserve: give file=PATH (DistServe's "
					    "profiler-a100-80g.%s.json) or the shared data folder "
					    "(SERVESIM_SHARED_DATA)", engine);
		snprintf(path, sizeof(path), "%s/profiles/distserve/profiler-a100-80g.%s.json",
			 shared, engine);
		file = path;
	}
	rc = load_fits(d, file, cfg->model->hf_id, fit_tp ? (int)fit_tp : cfg->tp,
		       cfg->model->name, err);
	if (rc)
		return rc;

	rc = ss_params_parse(&rp, "--cost-model", "roofline", true, err);
	if (rc)
		return rc;
	d->rl = calloc(1, cost_roofline_ops.priv_size);
	if (!d->rl)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	rc = cost_roofline_ops.init(d->rl, cfg, &rp, err);
	if (rc)
		ds_release(d);
	return rc;
}

static int ds_step(void *priv, const struct cost_step *step, struct cost_result *out,
		   struct ss_error *err)
{
	const struct distserve *d = priv;
	double pf_sum = 0.0, pf_sq = 0.0, dec_ctx = 0.0, n_dec = 0.0, ms = 0.0, ctx = 0.0;
	uint32_t n_pf = 0;
	struct cost_result rl;
	int64_t total;

	for (uint32_t i = 0; i < step->n_items; i++) {
		double t = step->items[i].tokens;

		if (t >= 1.0)
			ctx += (double)step->items[i].context + (t > 1.0 ? t : 0.0);
		if (t > 1.0) {
			pf_sum += t;
			pf_sq += t * t;
			n_pf++;
		} else if (t == 1.0) {
			/* DistServe's ctx: prompt + tokens generated so far + 1 */
			dec_ctx += (double)step->items[i].context + 1.0;
			n_dec += 1.0;
		}
	}
	if (n_pf)
		ms += d->prefill.a + d->prefill.b * pf_sum + d->prefill.c * pf_sq +
		      d->prefill_extra_ms;
	if (n_dec > 0.0 && (!n_pf || d->mixed_sum)) {
		const struct ds_coef *k = n_dec < d->threshold ? &d->dec_small : &d->dec_large;

		ms += k->a + k->b * dec_ctx + k->c * n_dec;
	}
	if (d->step_extra_ms > 0.0 || d->step_extra_ms_per_token > 0.0)
		ms += d->step_extra_ms + d->step_extra_ms_per_token * ctx;

	/* A fit used far beyond its domain (huge or negative coefficients, a
	 * quadratic term that wins) predicts no duration at all: an error,
	 * not a clamp.  A prediction between 0 and 1 ns is still 1 ns. */
	if (!cost_ns_fits(ms * 1e6))
		return cost_step_range_error(err, "distserve", "its fitted latency", ms * 1e6, step);
	memset(out->op_ns, 0, sizeof(out->op_ns));
	total = llround(ms * 1e6);
	if (total < 1)
		total = 1;
	out->op_ns[COST_OP_GEMM] = total;
	out->duration_ns = total;

	/* the roofline's average power and compute-bound share, same step */
	if (cost_roofline_ops.step(d->rl, step, &rl, err))
		return -ERANGE;
	out->energy_j = rl.energy_j / (double)rl.duration_ns * (double)total;
	out->compute_ns = llround((double)rl.compute_ns * (double)total / (double)rl.duration_ns);
	if (out->compute_ns > total)
		out->compute_ns = total;
	out->out_of_grid = 0;
	out->out_of_grid_ns = 0;
	return 0;
}

const struct cost_model_ops cost_distserve_ops = {
	.version = COST_MODEL_VERSION,
	.name = "distserve",
	.description = "DistServe's fitted A100-80GB step latencies (OPT-13B/66B; file=, engine=)",
	.priv_size = sizeof(struct distserve),
	.init = ds_init,
	.step = ds_step,
	.release = ds_release,
};
