/* servesim — what a plan writes: plan.json, plan.csv, the text table and
 * the plots (attainment against rate, the Pareto frontier); docs/plan.md
 * lists every field.  Files go through outdir-int.h (temporary name, then
 * rename), plots through the gnuplot helpers of plots.c. */
#include "plan.h"
#include "outdir-int.h"
#include "report-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared helpers ------------------------------------------------------ */

enum plan_cost_axis plan_cost_axis(const struct plan_report *rep)
{
	if (rep->cost_axis != PLAN_COST_AUTO)
		return rep->cost_axis;
	for (size_t i = 0; i < rep->n; i++)
		if (!(rep->cfg[i].usd_per_hour > 0))
			return PLAN_COST_GPUS;
	return rep->n ? PLAN_COST_USD : PLAN_COST_GPUS;
}

static const char *cost_name(enum plan_cost_axis a)
{
	return a == PLAN_COST_USD ? "usd_per_hour" : "gpus";
}

static const char *latency_name(enum plan_latency l)
{
	return l == PLAN_LAT_TPOT ? "tpot_p99_ms" : l == PLAN_LAT_E2E ? "e2e_p99_ms" : "ttft_p99_ms";
}

static const char *latency_label(enum plan_latency l)
{
	return l == PLAN_LAT_TPOT ? "p99 TPOT" : l == PLAN_LAT_E2E ? "p99 E2E" : "p99 TTFT";
}

static double probe_latency(const struct plan_probe *p, enum plan_latency l)
{
	return l == PLAN_LAT_TPOT ? p->tpot_p99_ms : l == PLAN_LAT_E2E ? p->e2e_p99_ms : p->ttft_p99_ms;
}

/* The frontier is drawn at scale 1 (the workload as given): cost against
 * the latency there, among the configurations that meet the target at it. */
static void points(const struct plan_report *rep, struct plan_point *pts)
{
	enum plan_cost_axis axis = plan_cost_axis(rep);

	for (size_t i = 0; i < rep->n; i++) {
		const struct plan_config *c = &rep->cfg[i];
		const struct plan_result *r = &rep->res[i];
		bool ok = r->status != PLAN_FAILED && r->n_probes > 0 &&
			  plan_meets(&rep->pe->search, &r->probes[0]);
		double lat = ok ? probe_latency(&r->probes[0], rep->latency) : NAN;

		pts[i] = (struct plan_point){
			.cost = axis == PLAN_COST_USD ? c->usd_per_hour : (double)c->gpus,
			.latency = lat,
			.eligible = ok && isfinite(lat) &&
				    (axis == PLAN_COST_GPUS || c->usd_per_hour > 0),
		};
	}
}

void plan_frontier(const struct plan_report *rep, bool *on)
{
	struct plan_point *pts = malloc((rep->n ? rep->n : 1) * sizeof(*pts));

	if (!pts) {
		for (size_t i = 0; i < rep->n; i++)
			on[i] = false;
		return;
	}
	points(rep, pts);
	plan_pareto(pts, rep->n, on);
	free(pts);
}

/* Frontier members sorted by cost, then latency, then index. */
struct fpoint {
	size_t i;
	double cost, latency;
};

static int fpoint_cmp(const void *a, const void *b)
{
	const struct fpoint *x = a, *y = b;

	if (x->cost != y->cost)
		return x->cost < y->cost ? -1 : 1;
	if (x->latency != y->latency)
		return x->latency < y->latency ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* (transfer full) the frontier in cost order; *n_out members. */
static struct fpoint *frontier_sorted(const struct plan_report *rep, size_t *n_out)
{
	struct plan_point *pts = malloc((rep->n ? rep->n : 1) * sizeof(*pts));
	bool *on = malloc((rep->n ? rep->n : 1) * sizeof(*on));
	struct fpoint *fp = malloc((rep->n ? rep->n : 1) * sizeof(*fp));
	size_t k = 0;

	*n_out = 0;
	if (!pts || !on || !fp) {
		free(pts);
		free(on);
		free(fp);
		return NULL;
	}
	points(rep, pts);
	plan_pareto(pts, rep->n, on);
	for (size_t i = 0; i < rep->n; i++)
		if (on[i])
			fp[k++] = (struct fpoint){ i, pts[i].cost, pts[i].latency };
	qsort(fp, k, sizeof(*fp), fpoint_cmp);
	free(pts);
	free(on);
	*n_out = k;
	return fp;
}

/* ---- the target rate (--rate) ------------------------------------------- */

const char *plan_objective_name(enum plan_objective o)
{
	static const char *const names[] = {
		[PLAN_OBJ_COST] = "cost", [PLAN_OBJ_GPUS] = "gpus", [PLAN_OBJ_ENERGY] = "energy",
		[PLAN_OBJ_TTFT] = "ttft_p99",
	};

	return (unsigned)o < sizeof(names) / sizeof(names[0]) ? names[o] : "?";
}

/* rate >= R, to rounding: the probe at R's own scale counts */
static bool at_least(double rate, double target)
{
	return rate >= target * (1 - 1e-9);
}

void plan_rate_figures(const struct plan_report *rep, size_t i, struct plan_rate_figures *f)
{
	const struct plan_config *c = &rep->cfg[i];
	const struct plan_result *r = &rep->res[i];
	const struct plan_probe *b = plan_result_best(r), *q = NULL;
	double R = rep->rate_rps;

	*f = (struct plan_rate_figures){
		.headroom = NAN, .usd_per_m_tokens = NAN, .j_per_token = NAN, .ttft_p99_ms = NAN,
	};
	if (!(R > 0) || (r->status != PLAN_OK && r->status != PLAN_CAPPED) || !b ||
	    !at_least(b->rate_rps, R))
		return;
	f->sustains = true;
	f->headroom = b->rate_rps / R;
	if (c->usd_per_hour > 0 && rep->mean_output_tokens > 0)
		f->usd_per_m_tokens = c->usd_per_hour / (R * rep->mean_output_tokens * 3600) * 1e6;
	/* the probe closest to R from above among those meeting the target:
	 * the best one at the latest */
	for (int k = 0; k < r->n_probes; k++) {
		const struct plan_probe *p = &r->probes[k];

		if (plan_meets(&rep->pe->search, p) && at_least(p->rate_rps, R) &&
		    (!q || p->rate_rps < q->rate_rps))
			q = p;
	}
	f->probe = q;
	f->at_rate = q && fabs(q->rate_rps - R) <= 1e-9 * R;
	f->j_per_token = q ? q->j_per_output_token : NAN;
	f->ttft_p99_ms = q ? q->ttft_p99_ms : NAN;
	f->outside_grid = q ? q->outside_grid : 0;
}

enum plan_objective plan_objective_used(const struct plan_report *rep)
{
	if (rep->objective != PLAN_OBJ_COST)
		return rep->objective;
	for (size_t i = 0; i < rep->n; i++)
		if (!(rep->cfg[i].usd_per_hour > 0))
			return PLAN_OBJ_GPUS;
	return PLAN_OBJ_COST;
}

struct rate_item {
	size_t i;
	double key, cost;
	int gpus;
};

/* by key (NAN last), then cost (unpriced last), GPUs, index */
static int rate_cmp(const void *a, const void *b)
{
	const struct rate_item *x = a, *y = b;

	if (isnan(x->key) != isnan(y->key))
		return isnan(x->key) ? 1 : -1;
	if (x->key != y->key && !isnan(x->key))
		return x->key < y->key ? -1 : 1;
	if (x->cost != y->cost)
		return x->cost < y->cost ? -1 : 1;
	if (x->gpus != y->gpus)
		return x->gpus < y->gpus ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

size_t plan_rate_order(const struct plan_report *rep, size_t *order)
{
	enum plan_objective obj = plan_objective_used(rep);
	struct rate_item *it = malloc((rep->n ? rep->n : 1) * sizeof(*it));
	size_t k = 0;

	if (!it)
		return 0;
	for (size_t i = 0; i < rep->n; i++) {
		const struct plan_config *c = &rep->cfg[i];
		struct plan_rate_figures f;
		double key;

		plan_rate_figures(rep, i, &f);
		if (!f.sustains)
			continue;
		key = obj == PLAN_OBJ_COST ? c->usd_per_hour :
		      obj == PLAN_OBJ_GPUS ? (double)c->gpus :
		      obj == PLAN_OBJ_ENERGY ? f.j_per_token : f.ttft_p99_ms;
		it[k++] = (struct rate_item){
			i, key, c->usd_per_hour > 0 ? c->usd_per_hour : INFINITY, c->gpus,
		};
	}
	qsort(it, k, sizeof(*it), rate_cmp);
	for (size_t j = 0; j < k; j++)
		order[j] = it[j].i;
	free(it);
	return k;
}

/* The warning a configuration priced by the roofline carries. */
static const char roofline_warning[] =
	"priced by the roofline for some operators: no measurement behind them; "
	"calibrate this GPU (docs/calibration.md) before comparing it with measured rows";

/* ---- dtype axes (plan_space.n_weight_dtypes / n_kv_dtypes) --------------- */

/* Does the plan search dtypes (its configurations carry them)? */
static bool dtype_axes(const struct plan_report *rep)
{
	return rep->n > 0 && rep->cfg[0].dtype_axis;
}

/* A configuration's weight (kv false) or KV dtype as a name: its own
 * under dtype axes, else the base's; the model's own dtype is "bf16" for
 * a 2-byte model (every catalog entry), else "model". */
static const char *dtype_label(const struct plan_report *rep, const struct plan_config *c, bool kv)
{
	enum ss_dtype d = c->dtype_axis ? (kv ? c->kv_dtype : c->weight_dtype) :
			  kv ? rep->pe->base->kv_dtype : rep->pe->base->weight_dtype;

	if (d == SS_DTYPE_MODEL)
		return rep->pe->base->model && rep->pe->base->model->dtype_bytes == 2 ? "bf16" : "model";
	return ss_dtype_name(d);
}

/* A short description: "colocated h100-sxm tp=1 x2 vllm:...", mixed
 * pools "disaggregated h100-sxm/a100-80gb-sxm tp=2/1 1P+3D ..." */
static void short_desc(const struct plan_config *c, char *buf, size_t len)
{
	char gpu[160], tp[32];

	plan_config_gpu_label(c, gpu, sizeof(gpu));
	plan_config_tp_label(c, tp, sizeof(tp));
	if (c->mode == PLAN_DISAGGREGATED)
		snprintf(buf, len, "#%u disaggregated %s tp=%s %uP+%uD %s", c->index, gpu, tp,
			 c->n_prefill, c->n_decode, c->policy_spec);
	else
		snprintf(buf, len, "#%u colocated %s tp=%s x%u %s", c->index, c->gpu->name, tp,
			 c->instances, c->policy_spec);
	if (c->dtype_axis) {
		size_t k = strlen(buf);

		snprintf(buf + k, len - k, " %s/%s", ss_dtype_name(c->weight_dtype),
			 ss_dtype_name(c->kv_dtype));
	}
	if (c->spec_axis) {
		size_t k = strlen(buf);

		snprintf(buf + k, len - k, " %s", c->spec ? c->spec->text : "spec=off");
	}
	plan_outer_label(c, buf, len);
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *jreal(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

/* What priced configuration i, the share outside the measured grids (of
 * the probe at the target rate with --rate, else of the best probe), the
 * roofline's warning, and the figures at the target rate. */
static void provenance_json(const struct plan_report *rep, size_t i, json_t *o)
{
	const struct plan_result *r = &rep->res[i];
	const struct plan_probe *b = r->status == PLAN_FAILED ? NULL : plan_result_best(r);
	struct plan_rate_figures f;

	plan_rate_figures(rep, i, &f);
	if (f.probe)
		b = f.probe;
	if (rep->priced_by) {
		json_object_set_new(o, "priced_by", json_string(rep->priced_by[i]));
		if (rep->roofline[i])
			json_object_set_new(o, "warning", json_string(roofline_warning));
	}
	json_object_set_new(o, "outside_grid", b ? jreal(b->outside_grid) : json_null());
	if (!(rep->rate_rps > 0))
		return;
	json_object_set_new(o, "at_rate",
			    json_pack("{s:b, s:o, s:o, s:o, s:s?, s:o}",
				      "sustains", f.sustains, "headroom", jreal(f.headroom),
				      "usd_per_million_output_tokens", jreal(f.usd_per_m_tokens),
				      "j_per_output_token", jreal(f.j_per_token),
				      "energy_from", !f.probe ? NULL : f.at_rate ? "probe at the rate" :
							 "closest probe above the rate",
				      "ttft_p99_ms", jreal(f.ttft_p99_ms)));
}

/* o's KEY_lo and KEY_hi: the interval on figure v (interval metric m)
 * of probe p; nothing where the plan has none. */
static void put_interval(const struct plan_report *rep, const struct plan_probe *p, json_t *o,
			 int m, const char *key, double v)
{
	char k[64];
	double lo, hi;

	if (!o || !plan_probe_interval(rep->pe, p, m, v, &lo, &hi))
		return;
	snprintf(k, sizeof(k), "%s_lo", key);
	json_object_set_new(o, k, jreal(lo));
	snprintf(k, sizeof(k), "%s_hi", key);
	json_object_set_new(o, k, jreal(hi));
}

/* plan --conservative: whether configuration i's verdict at the
 * workload's own rate (scale 1) differs from the one under the SLOs as
 * given. */
static bool verdict_changed(const struct plan_report *rep, size_t i)
{
	const struct plan_result *r = &rep->res[i];
	const struct plan_probe *p1 = r->status != PLAN_FAILED && r->n_probes ? &r->probes[0] : NULL;

	return rep->pe->conservative && p1 &&
	       plan_meets(&rep->pe->search, p1) != plan_meets_nominal(&rep->pe->search, p1);
}

static json_t *config_json(const struct plan_report *rep, size_t i, bool frontier)
{
	const struct plan_config *c = &rep->cfg[i];
	const struct plan_result *r = &rep->res[i];
	const struct plan_probe *b = r->status == PLAN_FAILED ? NULL : plan_result_best(r);
	const struct plan_probe *p1 = r->status != PLAN_FAILED && r->n_probes ? &r->probes[0] : NULL;
	struct plan_figures f;
	json_t *o, *probes;
	size_t n_outer;
	const struct plan_outer_axis *outer = plan_outer_axes(&n_outer);

	plan_figures(c, r, &rep->pe->search, &f);
	o = json_pack("{s:I, s:s, s:s, s:s, s:i, s:I, s:I, s:I, s:s, s:o, s:o, s:i, s:o, s:s,"
		      " s:f, s:o, s:o, s:o, s:o, s:o, s:b, s:b}",
		      "index", (json_int_t)c->index, "config", c->key,
		      "mode", plan_mode_name(c->mode), "gpu", c->gpu->name, "tp", c->tp,
		      "instances", (json_int_t)c->instances,
		      "prefill_instances", (json_int_t)c->n_prefill,
		      "decode_instances", (json_int_t)c->n_decode,
		      "policy", c->policy_spec,
		      "chunk", c->chunk > 0 ? json_integer(c->chunk) : json_null(),
		      "max_batch", c->max_batch > 0 ? json_integer(c->max_batch) : json_null(),
		      "gpus", c->gpus,
		      "usd_per_hour", c->usd_per_hour > 0 ? json_real(c->usd_per_hour) : json_null(),
		      "status", plan_status_name((enum plan_status)r->status),
		      "max_rate_scale", r->max_scale,
		      "max_rate_rps", b ? jreal(f.max_rate_rps) : json_null(),
		      "attainment", b ? jreal(b->attainment) : json_null(),
		      "goodput_rps", b ? jreal(f.goodput_rps) : json_null(),
		      "goodput_rps_per_gpu", b ? jreal(f.goodput_per_gpu) : json_null(),
		      "goodput_rps_per_usd_hour", b ? jreal(f.goodput_per_usd_hour) : json_null(),
		      "frontier", frontier, "workload_limited", r->workload_limited != 0);
	if (!o)
		return NULL;
	json_object_set_new(o, "decode_gpu", json_string(plan_config_decode_gpu(c)->name));
	json_object_set_new(o, "decode_tp", json_integer(plan_config_decode_tp(c)));
	json_object_set_new(o, "weight_dtype", json_string(dtype_label(rep, c, false)));
	json_object_set_new(o, "kv_dtype", json_string(dtype_label(rep, c, true)));
	/* speculative decoding, only on a plan that searches it */
	if (c->spec_axis)
		json_object_set_new(o, "spec", json_string(c->spec ? c->spec->text : "off"));
	/* MoE layouts, only when used (other configurations' JSON as before) */
	if (c->ep > 1)
		json_object_set_new(o, "ep", json_integer(c->ep));
	if (c->dp_attention > 1)
		json_object_set_new(o, "dp_attention", json_integer(c->dp_attention));
	/* OUTER axes (plan_outer_axes), only when searched */
	for (size_t k = 0; k < n_outer; k++)
		if (plan_config_outer(c, &outer[k]))
			json_object_set_new(o, outer[k].name,
					    json_integer(plan_config_outer(c, &outer[k])));
	if (b) {
		json_t *ttft = json_pack("{s:o, s:o}", "p50", jreal(b->ttft_p50_ms),
					 "p99", jreal(b->ttft_p99_ms));
		json_t *tpot = json_pack("{s:o, s:o}", "p50", jreal(b->tpot_p50_ms),
					 "p99", jreal(b->tpot_p99_ms));

		/* their intervals beside them (docs/metrics.md "Intervals") */
		put_interval(rep, b, ttft, INTERVAL_TTFT, "p50", b->ttft_p50_ms);
		put_interval(rep, b, ttft, INTERVAL_TTFT, "p99", b->ttft_p99_ms);
		put_interval(rep, b, tpot, INTERVAL_TPOT, "p50", b->tpot_p50_ms);
		put_interval(rep, b, tpot, INTERVAL_TPOT, "p99", b->tpot_p99_ms);
		json_object_set_new(o, "ttft_ms", ttft);
		json_object_set_new(o, "tpot_ms", tpot);
		json_object_set_new(o, "e2e_p99_ms", jreal(b->e2e_p99_ms));
		put_interval(rep, b, o, INTERVAL_E2E, "e2e_p99_ms", b->e2e_p99_ms);
		json_object_set_new(o, "run_goodput_rps", jreal(b->goodput_rps));
	}
	if (p1)
		json_object_set_new(o, "at_scale_1",
				    json_pack("{s:o, s:b, s:o, s:o, s:o, s:o}",
					      "attainment", jreal(p1->attainment),
					      "meets_target", f.meets_at_scale_1,
					      "rate_rps", jreal(p1->rate_rps),
					      "ttft_p99_ms", jreal(p1->ttft_p99_ms),
					      "tpot_p99_ms", jreal(p1->tpot_p99_ms),
					      "e2e_p99_ms", jreal(p1->e2e_p99_ms)));
	if (p1 && rep->pe->conservative) {
		/* --conservative: the verdict under the SLOs as given beside */
		json_t *a = json_object_get(o, "at_scale_1");

		json_object_set_new(a, "attainment_nominal", jreal(p1->attainment_nominal));
		json_object_set_new(a, "meets_target_nominal",
				    json_boolean(plan_meets_nominal(&rep->pe->search, p1)));
		json_object_set_new(a, "verdict_changed", json_boolean(verdict_changed(rep, i)));
	}
	if (r->status == PLAN_FAILED)
		json_object_set_new(o, "error", json_string(r->error));
	probes = json_array();
	for (int k = 0; probes && k < r->n_probes; k++) {
		const struct plan_probe *p = &r->probes[k];

		json_array_append_new(probes,
				      json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
						"scale", jreal(p->scale), "rate_rps", jreal(p->rate_rps),
						"attainment", jreal(p->attainment),
						"run_goodput_rps", jreal(p->goodput_rps),
						"throughput_rps", jreal(p->throughput_rps),
						"ttft_p99_ms", jreal(p->ttft_p99_ms),
						"tpot_p99_ms", jreal(p->tpot_p99_ms)));
	}
	json_object_set_new(o, "probes", probes ? probes : json_null());
	if (o && c->pp > 1)
		json_object_set_new(o, "pp", json_integer(c->pp));
	if (o)
		provenance_json(rep, i, o);
	return o;
}

/* ---- the slice and --verify ------------------------------------------------ */

/* {requests, rate_rps, prompt_tokens {p50, p90, p99}, output_tokens {...}}
 * of the slice (w 0) or the whole trace (w 1). */
static json_t *slice_side(const struct wl_slice *s, int w)
{
	return json_pack("{s:I, s:o, s:{s:f, s:f, s:f}, s:{s:f, s:f, s:f}}",
			 "requests", (json_int_t)s->n[w], "rate_rps", jreal(s->rate_rps[w] > 0 ? s->rate_rps[w] : NAN),
			 "prompt_tokens", "p50", s->prompt[w][0], "p90", s->prompt[w][1], "p99", s->prompt[w][2],
			 "output_tokens", "p50", s->output[w][0], "p90", s->output[w][1], "p99", s->output[w][2]);
}

static json_t *slice_json(const struct wl_slice *s)
{
	static const char *const names[7] = { "rate", "prompt_p50", "prompt_p90", "prompt_p99",
					      "output_p50", "output_p90", "output_p99" };
	json_t *d = json_array();

	for (int k = 0; d && k < 7; k++)
		if (s->differs[k])
			json_array_append_new(d, json_string(names[k]));
	return json_pack("{s:o, s:o, s:{s:f, s:f}, s:o}", "slice", slice_side(s, 0),
			 "whole", slice_side(s, 1), "tolerance", "rate", WL_SLICE_RATE_TOL,
			 "length_percentile", WL_SLICE_LEN_TOL, "differs", d ? d : json_null());
}

/* The figures that differ, as the warning names them. */
static const char *slice_warning(const struct wl_slice *s, char *buf, size_t len)
{
	workload_slice_text(s, buf, len);
	return buf;
}

static json_t *verified_json(const struct plan_report *rep)
{
	json_t *a = json_array();

	for (size_t k = 0; a && k < rep->n_verified; k++) {
		const struct plan_verified *v = &rep->verified[k];

		json_array_append_new(a, json_pack("{s:I, s:s, s:f, s:o, s:o, s:o, s:b, s:o, s:o}",
						   "index", (json_int_t)v->index,
						   "config", rep->cfg[v->index].key, "scale", v->scale,
						   "rate_rps", jreal(v->probe.rate_rps),
						   "predicted_attainment", jreal(v->predicted_attainment),
						   "attainment", jreal(v->probe.attainment),
						   "meets_target", v->meets,
						   "ttft_p99_ms", jreal(v->probe.ttft_p99_ms),
						   "tpot_p99_ms", jreal(v->probe.tpot_p99_ms)));
	}
	return json_pack("{s:I, s:o, s:o}", "requests", (json_int_t)rep->verify_requests,
			 "rate_rps", jreal(rep->verify_rate_rps), "configurations", a ? a : json_null());
}

/* The verified figures of configuration i, NULL when it was not verified. */
static const struct plan_verified *verified_of(const struct plan_report *rep, size_t i)
{
	for (size_t k = 0; k < rep->n_verified; k++)
		if (rep->verified[k].index == i)
			return &rep->verified[k];
	return NULL;
}

/* The engine profile's name ("none": kernels only). */
static const char *engine_name(const struct plan_eval *pe)
{
	return pe->base->engine ? pe->base->engine->name : "none";
}

long plan_winner(const struct plan_report *rep, const struct plan_result *res)
{
	struct plan_report r = *rep;
	size_t *order = malloc((rep->n ? rep->n : 1) * sizeof(*order)), n;
	long w = -1;

	if (!order)
		return -1;
	if (res)
		r.res = res;
	if (r.rate_rps > 0) {
		n = plan_rate_order(&r, order);
		if (n > 0)
			w = (long)order[0];
	} else {
		plan_rank(r.cfg, r.res, r.n, &r.pe->search, order);
		for (size_t k = 0; k < r.n && w < 0; k++)
			if (plan_result_best(&r.res[order[k]]) && r.res[order[k]].status != PLAN_FAILED)
				w = (long)order[k];
	}
	free(order);
	return w;
}

/* "#5 coloc h200-sxm tp 1 x 2" for the like-for-like line; "none" */
static void winner_label(const struct plan_report *rep, long i, char *buf, size_t len)
{
	char gpu[140], tp[48], inst[48];

	if (i < 0) {
		snprintf(buf, len, "none");
		return;
	}
	plan_config_gpu_label(&rep->cfg[i], gpu, sizeof(gpu));
	plan_config_tp_label(&rep->cfg[i], tp, sizeof(tp));
	plan_config_inst_label(&rep->cfg[i], inst, sizeof(inst));
	snprintf(buf, len, "#%ld %s %s, tp %s, %s instance%s", i,
		 rep->cfg[i].mode == PLAN_COLOCATED ? "colocated" : "disaggregated", gpu, tp, inst,
		 strcmp(inst, "1") ? "s" : "");
}

/* The pricing lines of the text (docs/plan.md "Like for like"). */
static void text_pricing(FILE *f, const struct plan_report *rep)
{
	long w, d;
	char a[400], b[400];

	if (rep->pricing_note)
		fprintf(f, "pricing: %s\n", rep->pricing_note);
	if (!rep->like_for_like)
		return;
	w = plan_winner(rep, NULL);
	d = rep->default_res ? plan_winner(rep, rep->default_res) : w;
	winner_label(rep, w, a, sizeof(a));
	winner_label(rep, d, b, sizeof(b));
	fprintf(f, "like for like: every GPU priced %s; ",
		!strcmp(rep->like_pricing, "roofline") ? "by the roofline" :
		"from its family's measured tables (scaled by the roofline where not its own)");
	if (!rep->default_res)
		fprintf(f, "so is the default pricing: the winner is the same, %s\n", a);
	else if (w == d)
		fprintf(f, "the winner does not change against the default pricing: %s\n", a);
	else
		fprintf(f, "the winner changes: %s under the default pricing, %s like for like\n", b, a);
}

json_t *plan_json(const struct plan_report *rep)
{
	const struct plan_eval *pe = rep->pe;
	const struct plan_search *s = &pe->search;
	enum plan_cost_axis axis = plan_cost_axis(rep);
	size_t n = rep->n, nf = 0;
	bool *on = calloc(n ? n : 1, sizeof(*on));
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	struct fpoint *fp = frontier_sorted(rep, &nf);
	json_t *doc = NULL, *cfgs, *fr, *top;
	char latency[64];

	if (!on || !order || !fp)
		goto out;
	plan_frontier(rep, on);
	plan_rank(rep->cfg, rep->res, n, s, order);
	snprintf(latency, sizeof(latency), "%s at rate scale 1", latency_name(rep->latency));
	doc = json_pack("{s:s, s:s, s:s, s:{s:s, s:I, s:f}, s:{s:f, s:f, s:f, s:f}, s:f,"
			" s:{s:f, s:f, s:f, s:f, s:i}, s:I, s:I, s:{s:I, s:I, s:I, s:I}}",
			"servesim_version", rep->version, "fingerprint", rep->fingerprint,
			"model", rep->model,
			"workload", "source", rep->workload, "requests", (json_int_t)rep->n_requests,
			"rate_rps", pe->rate_rps,
			"slo", "ttft_ms", pe->slo.ttft_ms, "tpot_ms", pe->slo.tpot_ms,
			"e2e_ms", pe->slo.e2e_ms, "tbt_ms", pe->slo.tbt_ms,
			"target", s->target,
			"search", "tolerance", s->tolerance, "step", s->step,
			"min_scale", s->min_scale, "max_scale", s->max_scale,
			"max_probes", s->max_probes,
			"configurations_total", (json_int_t)n, "resumed", (json_int_t)rep->resumed,
			"excluded", "budget", (json_int_t)rep->excluded.budget,
			"unpriced", (json_int_t)rep->excluded.unpriced,
			"memory", (json_int_t)rep->excluded.memory,
			"policy", (json_int_t)rep->excluded.policy);
	if (!doc)
		goto out;
	/* the engine profile every configuration ran under, as a run's summary.json names it */
	json_object_set_new(doc, "engine", json_string(engine_name(pe)));
	/* only when the GPUs are priced differently or --like-for-like, so
	 * every other plan.json stays as it was */
	if (rep->pricing_note)
		json_object_set_new(doc, "pricing_note", json_string(rep->pricing_note));
	if (rep->like_for_like) {
		long w = plan_winner(rep, NULL);
		long d = rep->default_res ? plan_winner(rep, rep->default_res) : w;

		json_object_set_new(doc, "like_for_like",
				    json_pack("{s:s, s:o, s:o, s:b, s:b}", "pricing", rep->like_pricing,
					      "winner", w < 0 ? json_null() : json_integer(w),
					      "default_winner", d < 0 ? json_null() : json_integer(d),
					      "default_pricing_differs", rep->default_res != NULL,
					      "winner_changes", w != d));
	}
	/* the load, as a run's summary.json states it */
	{
		json_t *load = json_object(), *w = json_object_get(doc, "workload");

		json_object_set_new(load, "mode", json_string(pe->base->concurrency ? "closed" : "open"));
		if (pe->base->concurrency) {
			json_object_set_new(load, "concurrency", json_integer(pe->base->concurrency));
			json_object_set_new(load, "think_time",
					    json_string(pe->base->think_time ? pe->base->think_time : "none"));
			json_object_set_new(load, "ramp_up_s", json_real((double)pe->base->ramp_ns / 1e9));
		}
		json_object_set_new(w, "load", load);
		/* multi-LoRA: the adapters every configuration served (null: none) */
		json_object_set_new(w, "lora", pe->base->lora ? json_string(pe->base->lora->text) :
					       json_null());
		/* requests longer than the context: only when there are some,
		 * so every other plan.json stays as it was */
		if (rep->context && rep->context->over)
			json_object_set_new(w, "context", report_context_json(rep->context));
	}
	if (rep->slice) {
		/* the workload a cut of a trace: against the whole (docs/plan.md) */
		json_t *w = json_object_get(doc, "workload");
		char warn[1024];

		json_object_set_new(w, "slice", slice_json(rep->slice));
		json_object_set_new(w, "warning", rep->slice->any ?
				    json_string(slice_warning(rep->slice, warn, sizeof(warn))) : json_null());
	}
	if (rep->verified)
		json_object_set_new(doc, "verified", verified_json(rep));
	fr = json_array();
	for (size_t k = 0; fr && k < nf; k++)
		json_array_append_new(fr, json_integer((json_int_t)fp[k].i));
	json_object_set_new(doc, "frontier",
			    json_pack("{s:s, s:s, s:o}", "cost", cost_name(axis), "latency", latency,
				      "configurations", fr ? fr : json_null()));
	top = json_array();
	for (size_t k = 0; top && k < n && k < (size_t)(rep->top > 0 ? rep->top : 10); k++)
		if (plan_result_best(&rep->res[order[k]]) && rep->res[order[k]].status != PLAN_FAILED)
			json_array_append_new(top, json_integer((json_int_t)order[k]));
	json_object_set_new(doc, "top_goodput_per_gpu", top ? top : json_null());
	if (rep->rate_rps > 0) {
		size_t *ro = malloc((n ? n : 1) * sizeof(*ro));
		size_t nr = ro ? plan_rate_order(rep, ro) : 0;
		json_t *listed = json_array(), *rate;
		size_t below = 0, skipped = 0;

		for (size_t i = 0; i < n; i++) {
			struct plan_rate_figures f;

			plan_rate_figures(rep, i, &f);
			below += !f.sustains && rep->res[i].status != PLAN_SKIPPED;
			skipped += rep->res[i].status == PLAN_SKIPPED;
		}
		for (size_t k = 0; listed && k < nr; k++)
			json_array_append_new(listed, json_integer((json_int_t)ro[k]));
		rate = json_pack("{s:f, s:f, s:s, s:s, s:o, s:I, s:I, s:b}",
				 "target_rps", rep->rate_rps,
				 "scale", rep->rate_rps / pe->rate_rps,
				 "objective", plan_objective_name(rep->objective),
				 "objective_used", plan_objective_name(plan_objective_used(rep)),
				 "configurations", listed ? listed : json_null(),
				 "below_rate", (json_int_t)below, "skipped", (json_int_t)skipped,
				 "instances_bisected", rep->bisected);
		json_object_set_new(doc, "rate", rate);
		free(ro);
	}
	cfgs = json_array();
	for (size_t i = 0; cfgs && i < n; i++) {
		json_t *c = config_json(rep, i, on[i]);

		if (!c || json_array_append_new(cfgs, c)) {
			json_decref(cfgs);
			cfgs = NULL;
		}
	}
	if (!cfgs) {
		json_decref(doc);
		doc = NULL;
		goto out;
	}
	json_object_set_new(doc, "configurations", cfgs);
out:
	free(on);
	free(order);
	free(fp);
	return doc;
}

/* ---- CSV ----------------------------------------------------------------- */

static void csv_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, ",%.10g", v);
	else
		fputs(",", f);
}

/* Does the plan search OUTER axis a (a configuration has an item of it)? */
static bool outer_searched(const struct plan_report *rep, const struct plan_outer_axis *a)
{
	for (size_t i = 0; i < rep->n; i++)
		if (plan_config_outer(&rep->cfg[i], a))
			return true;
	return false;
}

void plan_csv(FILE *f, const struct plan_report *rep)
{
	bool *on = calloc(rep->n ? rep->n : 1, sizeof(*on));
	size_t n_outer;
	const struct plan_outer_axis *outer = plan_outer_axes(&n_outer);

	if (on)
		plan_frontier(rep, on);
	fputs("index,config,mode,gpu,tp,instances,prefill_instances,decode_instances,policy,"
	      "chunk,max_batch,gpus,usd_per_hour,status,max_rate_scale,max_rate_rps,attainment,"
	      "goodput_rps,goodput_rps_per_gpu,goodput_rps_per_usd_hour,run_goodput_rps,ttft_p50_ms,ttft_p99_ms,"
	      "tpot_p50_ms,tpot_p99_ms,e2e_p99_ms,attainment_at_1,ttft_p99_ms_at_1,"
	      "tpot_p99_ms_at_1,e2e_p99_ms_at_1,frontier,workload_limited,probes,decode_gpu,"
	      "decode_tp", f);
	fputs(dtype_axes(rep) ? ",weight_dtype,kv_dtype" : "", f);   /* dtype axes only */
	fputs(rep->n > 0 && rep->cfg[0].spec_axis ? ",spec" : "", f);  /* a spec axis only */
	for (size_t k = 0; k < n_outer; k++)   /* OUTER axes searched only */
		if (outer_searched(rep, &outer[k]))
			fprintf(f, ",%s", outer[k].name);
	/* provenance and the figures at --rate, then --verify's (only with
	 * it, so the CSV of a plan without it is unchanged) */
	fputs(",priced_by,roofline,outside_grid,headroom,usd_per_million_output_tokens,"
	      "j_per_output_token", f);
	/* the intervals of the p99 figures (docs/metrics.md "Intervals"),
	 * where the plan has them; --conservative's verdicts, only with it */
	if (rep->pe->iv_entry)
		fputs(",ttft_p99_ms_lo,ttft_p99_ms_hi,tpot_p99_ms_lo,tpot_p99_ms_hi,e2e_p99_ms_lo,"
		      "e2e_p99_ms_hi", f);
	if (rep->pe->conservative)
		fputs(",attainment_nominal_at_1,meets_target_nominal_at_1,meets_target_at_1,"
		      "verdict_changed", f);
	fputs(rep->verified ? ",verified_rate_rps,verified_attainment,verified_meets_target\n" : "\n", f);
	for (size_t i = 0; i < rep->n; i++) {
		const struct plan_config *c = &rep->cfg[i];
		const struct plan_result *r = &rep->res[i];
		const struct plan_probe *b = r->status == PLAN_FAILED ? NULL : plan_result_best(r);
		const struct plan_probe *p1 = r->status != PLAN_FAILED && r->n_probes ?
						      &r->probes[0] : NULL;
		struct plan_figures fg;

		plan_figures(c, r, &rep->pe->search, &fg);
		fprintf(f, "%u,\"%s\",%s,%s,%d,%u,%u,%u,\"%s\",", c->index, c->key,
			plan_mode_name(c->mode), c->gpu->name, c->tp, c->instances, c->n_prefill,
			c->n_decode, c->policy_spec);
		if (c->chunk > 0)
			fprintf(f, "%d", c->chunk);
		fputc(',', f);
		if (c->max_batch > 0)
			fprintf(f, "%d", c->max_batch);
		fprintf(f, ",%d", c->gpus);
		csv_num(f, c->usd_per_hour > 0 ? c->usd_per_hour : NAN);
		fprintf(f, ",%s", plan_status_name((enum plan_status)r->status));
		csv_num(f, r->max_scale);
		csv_num(f, b ? fg.max_rate_rps : NAN);
		csv_num(f, b ? b->attainment : NAN);
		csv_num(f, b ? fg.goodput_rps : NAN);
		csv_num(f, b ? fg.goodput_per_gpu : NAN);
		csv_num(f, b ? fg.goodput_per_usd_hour : NAN);
		csv_num(f, b ? b->goodput_rps : NAN);
		csv_num(f, b ? b->ttft_p50_ms : NAN);
		csv_num(f, b ? b->ttft_p99_ms : NAN);
		csv_num(f, b ? b->tpot_p50_ms : NAN);
		csv_num(f, b ? b->tpot_p99_ms : NAN);
		csv_num(f, b ? b->e2e_p99_ms : NAN);
		csv_num(f, p1 ? p1->attainment : NAN);
		csv_num(f, p1 ? p1->ttft_p99_ms : NAN);
		csv_num(f, p1 ? p1->tpot_p99_ms : NAN);
		csv_num(f, p1 ? p1->e2e_p99_ms : NAN);
		fprintf(f, ",%d,%d,%d,%s,%d", on ? (int)on[i] : 0, r->workload_limited != 0,
			r->n_probes, plan_config_decode_gpu(c)->name, plan_config_decode_tp(c));
		if (dtype_axes(rep))
			fprintf(f, ",%s,%s", dtype_label(rep, c, false), dtype_label(rep, c, true));
		if (c->spec_axis)   /* (its text holds commas: quoted) */
			fprintf(f, ",\"%s\"", c->spec ? c->spec->text : "off");
		for (size_t k = 0; k < n_outer; k++)
			if (outer_searched(rep, &outer[k]))
				fprintf(f, ",%d", plan_config_outer(c, &outer[k]));
		{
			struct plan_rate_figures rf;
			const struct plan_probe *g;

			plan_rate_figures(rep, i, &rf);
			g = rf.probe ? rf.probe : b;
			fprintf(f, ",%s,%d", rep->priced_by ? rep->priced_by[i] : "",
				rep->priced_by ? (int)rep->roofline[i] : 0);
			csv_num(f, g ? g->outside_grid : NAN);
			csv_num(f, rf.headroom);
			csv_num(f, rf.usd_per_m_tokens);
			csv_num(f, rf.j_per_token);
		}
		if (rep->pe->iv_entry) {
			const struct { int m; double v; } fig[3] = {
				{ INTERVAL_TTFT, b ? b->ttft_p99_ms : NAN },
				{ INTERVAL_TPOT, b ? b->tpot_p99_ms : NAN },
				{ INTERVAL_E2E, b ? b->e2e_p99_ms : NAN },
			};

			for (int k = 0; k < 3; k++) {
				double lo = NAN, hi = NAN;

				if (b)
					plan_probe_interval(rep->pe, b, fig[k].m, fig[k].v, &lo, &hi);
				csv_num(f, lo);
				csv_num(f, hi);
			}
		}
		if (rep->pe->conservative) {
			csv_num(f, p1 ? p1->attainment_nominal : NAN);
			fprintf(f, ",%s,%s,%d",
				p1 ? plan_meets_nominal(&rep->pe->search, p1) ? "1" : "0" : "",
				p1 ? plan_meets(&rep->pe->search, p1) ? "1" : "0" : "",
				(int)verdict_changed(rep, i));
		}
		if (rep->verified) {
			const struct plan_verified *v = verified_of(rep, i);

			csv_num(f, v ? v->probe.rate_rps : NAN);
			csv_num(f, v ? v->probe.attainment : NAN);
			fprintf(f, ",%s", v ? (v->meets ? "1" : "0") : "");
		}
		fputc('\n', f);
	}
	free(on);
}

/* ---- text ---------------------------------------------------------------- */

static void text_num(FILE *f, int width, const char *fmt, double v)
{
	if (isfinite(v))
		fprintf(f, fmt, width, v);
	else
		fprintf(f, "%*s", width, "-");
}

/* Widths of the gpu and tp columns: 14 and 2, wider for mixed pools
 * ("h100-sxm/a100-80gb-sxm", "2/1") when the plan has any. */
struct text_widths {
	int gpu, tp;
	bool dtypes;        /* a last column "w/kv" of the dtypes (dtype axes) */
};

static struct text_widths text_widths(const struct plan_report *rep)
{
	struct text_widths w = { 14, 2, dtype_axes(rep) };
	bool mixed = false;

	for (size_t i = 0; i < rep->n && !mixed; i++)
		mixed = plan_config_mixed(&rep->cfg[i]);
	for (size_t i = 0; mixed && i < rep->n; i++) {
		char b[160];
		int len;

		plan_config_gpu_label(&rep->cfg[i], b, sizeof(b));
		len = (int)strlen(b);
		w.gpu = len > w.gpu ? len : w.gpu;
		plan_config_tp_label(&rep->cfg[i], b, sizeof(b));
		len = (int)strlen(b);
		w.tp = len > w.tp ? len : w.tp;
	}
	/* MoE layouts widen the tp column ("8,ep8,dp8") */
	for (size_t i = 0; i < rep->n; i++) {
		char b[160];
		int len;

		if (rep->cfg[i].ep <= 1 && rep->cfg[i].dp_attention <= 1)
			continue;
		plan_config_tp_label(&rep->cfg[i], b, sizeof(b));
		len = (int)strlen(b);
		w.tp = len > w.tp ? len : w.tp;
	}
	return w;
}


/* What every row of the text tables starts with: #, mode, gpu, tp, inst,
 * policy chunk/batch, GPUs, $/h. */
static void text_row_head(FILE *f, const struct plan_config *c, struct text_widths w)
{
	char inst[32], pol[96], gpu[160], tp[32];

	plan_config_inst_label(c, inst, sizeof(inst));
	plan_config_policy_label(c, pol, sizeof(pol));
	plan_config_gpu_label(c, gpu, sizeof(gpu));
	plan_config_tp_label(c, tp, sizeof(tp));
	fprintf(f, "  %4u  %-6s %-*s %*s %6s  %-18s %4d", c->index,
		c->mode == PLAN_DISAGGREGATED ? "disagg" : "coloc", w.gpu, gpu, w.tp, tp, inst, pol,
		c->gpus);
	text_num(f, 8, "%*.2f", c->usd_per_hour > 0 ? c->usd_per_hour : NAN);
}
/* The last columns of a row: "!" for a configuration the roofline priced
 * in part, what priced it and the share of the probe's busy time outside
 * measured grids. */
static void text_priced(FILE *f, const struct plan_report *rep, size_t i,
			const struct plan_probe *p)
{
	if (!rep->priced_by)
		return;
	fprintf(f, "  %s %-14s", rep->roofline[i] ? "!" : " ", rep->priced_by[i]);
	if (p)
		fprintf(f, " %5.1f%%", 100 * p->outside_grid);
	else
		fprintf(f, " %6s", "-");
}

static void text_row(FILE *f, const struct plan_report *rep, size_t i, double latency,
		     struct text_widths w)
{
	const struct plan_config *c = &rep->cfg[i];
	const struct plan_result *r = &rep->res[i];
	struct plan_figures fg;

	plan_figures(c, r, &rep->pe->search, &fg);
	text_row_head(f, c, w);
	if (r->status == PLAN_BELOW) {
		/* stopped early: below the target rate, not a maximum */
		fprintf(f, "  <");
		text_num(f, 8, "%*.3f", rep->rate_rps);
		fprintf(f, "%9s %8s %8s", "-", "-", "-");
		goto latency;
	}
	fprintf(f, " %s", r->status == PLAN_CAPPED ? ">=" : r->workload_limited ? " *" : "  ");
	text_num(f, 8, "%*.3f", fg.max_rate_rps);
	text_num(f, 9, "%*.3f", fg.goodput_rps);
	text_num(f, 8, "%*.3f", fg.goodput_per_gpu);
	text_num(f, 8, "%*.3f", fg.goodput_per_usd_hour);
latency:
	text_num(f, 10, "%*.1f", latency);
	text_priced(f, rep, i, plan_result_best(r));
	if (w.dtypes)   /* last, as before the provenance columns */
		fprintf(f, "  %s/%s", dtype_label(rep, c, false), dtype_label(rep, c, true));
	fputc('\n', f);
}

static void text_header(FILE *f, const char *latency, struct text_widths w, bool priced)
{
	fprintf(f, "  %4s  %-6s %-*s %*s %6s  %-18s %4s %8s %10s %9s %8s %8s %10s", "#", "mode",
		w.gpu, "gpu", w.tp, "tp", "inst", "policy chunk/batch", "GPUs", "$/h", "max req/s",
		"goodput", "/GPU", "/($/h)", latency);
	fputs(priced ? "    priced by      outside" : "", f);
	fputs(w.dtypes ? "  weights/KV\n" : "\n", f);
}

/* The --verify section: each re-run's attainment on the whole workload
 * next to the plan's, those missing the target flagged. */
static void text_verified(FILE *f, const struct plan_report *rep)
{
	size_t missed = 0;

	fprintf(f, "\nverified on the whole workload (%llu requests at %.3f req/s), each at ",
		(unsigned long long)rep->verify_requests, rep->verify_rate_rps);
	if (rep->rate_rps > 0)
		fprintf(f, "the target rate, %g req/s:\n", rep->rate_rps);
	else
		fprintf(f, "the maximum rate the plan found:\n");
	fprintf(f, "  %4s  %-52s %10s %10s %10s %10s\n", "#", "configuration", "req/s", "planned",
		"whole", "p99 TTFT");
	for (size_t k = 0; k < rep->n_verified; k++) {
		const struct plan_verified *v = &rep->verified[k];
		char d[512];

		short_desc(&rep->cfg[v->index], d, sizeof(d));
		/* short_desc starts with "#N " */
		fprintf(f, "  %4u  %-52.52s", v->index, strchr(d, ' ') ? strchr(d, ' ') + 1 : d);
		text_num(f, 11, "%*.3f", v->probe.rate_rps);
		text_num(f, 11, "%*.4f", v->predicted_attainment);
		text_num(f, 11, "%*.4f", v->probe.attainment);
		text_num(f, 11, "%*.1f", v->probe.ttft_p99_ms);
		fprintf(f, "%s\n", v->meets ? "" : "  MISSES the target");
		missed += !v->meets;
	}
	if (!rep->n_verified)
		fprintf(f, "  (no configuration has a maximum rate to verify)\n");
	if (missed)
		fprintf(f, "  %zu of %zu miss the %g%% target on the whole workload: the plan's cut of it is not representative there\n",
			missed, rep->n_verified, rep->pe->search.target * 100);
}

/* The footer of the roofline's warning, when a listed row carries it. */
static void text_roofline_footer(FILE *f, const struct plan_report *rep, const size_t *rows,
				 size_t n)
{
	size_t k = 0;

	for (size_t j = 0; rep->priced_by && j < n; j++)
		k += rep->roofline[rows[j]];
	if (k)
		fprintf(f, "  ! %zu row%s %s\n", k, k == 1 ? "" : "s", roofline_warning);
}

/* --rate: the deployments sustaining R, best first by the objective. */
static void text_rate(FILE *f, const struct plan_report *rep, struct text_widths w)
{
	const struct plan_eval *pe = rep->pe;
	enum plan_objective obj = plan_objective_used(rep);
	size_t n = rep->n, *order = malloc((n ? n : 1) * sizeof(*order)), nr, shown = 0;
	size_t below = 0, early = 0, skipped = 0, best = SIZE_MAX;
	double best_rate = 0;
	bool limited = false;

	if (!order)
		return;
	nr = plan_rate_order(rep, order);
	for (size_t i = 0; i < n; i++) {
		const struct plan_result *r = &rep->res[i];
		const struct plan_probe *b = plan_result_best(r);
		struct plan_rate_figures rf;

		plan_rate_figures(rep, i, &rf);
		skipped += r->status == PLAN_SKIPPED;
		below += !rf.sustains && r->status != PLAN_SKIPPED;
		early += r->status == PLAN_BELOW;
		if (b && r->status != PLAN_FAILED && b->rate_rps > best_rate) {
			best_rate = b->rate_rps;
			best = i;
		}
	}
	fprintf(f, "\ndeployments sustaining %g req/s (%.4g x the workload's %.4g req/s at scale 1), by %s",
		rep->rate_rps, rep->rate_rps / pe->rate_rps, pe->rate_rps, plan_objective_name(obj));
	if (obj != rep->objective)
		fprintf(f, " (cost asked for: a GPU has no price in the catalog)");
	fprintf(f, ":\n  %4s  %-6s %-*s %*s %6s  %-18s %4s %8s %10s %8s %8s %8s %10s    priced by      outside\n",
		"#", "mode", w.gpu, "gpu", w.tp, "tp", "inst", "policy chunk/batch", "GPUs", "$/h",
		"max req/s", "headroom", "$/Mtok", "J/tok", "p99 TTFT");
	for (size_t k = 0; k < nr && shown < (size_t)(rep->top > 0 ? rep->top : 10); k++, shown++) {
		size_t i = order[k];
		const struct plan_config *c = &rep->cfg[i];
		struct plan_rate_figures rf;

		plan_rate_figures(rep, i, &rf);
		text_row_head(f, c, w);
		fprintf(f, " %s", rep->res[i].status == PLAN_CAPPED ? ">=" :
				  rep->res[i].workload_limited ? " *" : "  ");
		limited |= rep->res[i].workload_limited != 0;
		text_num(f, 8, "%*.3f", rf.headroom * rep->rate_rps);
		text_num(f, 9, "%*.2f", rf.headroom);
		text_num(f, 9, "%*.3f", rf.usd_per_m_tokens);
		text_num(f, 9, "%*.3f", rf.j_per_token);
		fputs(rf.probe && !rf.at_rate ? "^" : " ", f);
		text_num(f, 9, "%*.1f", rf.ttft_p99_ms);
		text_priced(f, rep, i, rf.probe);
		fputc('\n', f);
	}
	if (!nr) {
		fprintf(f, "  (none: no configuration sustains %g req/s within the SLOs at the %g%% target",
			rep->rate_rps, pe->search.target * 100);
		if (best != SIZE_MAX)
			fprintf(f, "; the highest sustained rate found is %.3f req/s, #%zu", best_rate, best);
		/* the cause no deployment can remove: requests refused for
		 * their length (cli_context_note says the same up front) */
		if (rep->context && rep->context->over && !rep->context->truncated &&
		    pe->search.target > 1.0 - (double)rep->context->over / (double)rep->context->requests)
			fprintf(f, "; %zu of the %zu requests exceed the %d-token context, so at most %.1f%% can meet the SLOs",
				rep->context->over, rep->context->requests, (int)rep->context->context,
				100.0 * (1.0 - (double)rep->context->over / (double)rep->context->requests));
		fprintf(f, ")\n");
	}
	fprintf(f, "  %zu configuration%s sustain%s %g req/s (%zu shown); %zu cannot (%zu of them stopped "
		   "their search early)", nr, nr == 1 ? "" : "s", nr == 1 ? "s" : "", rep->rate_rps,
		shown, below, early);
	if (rep->bisected)
		fprintf(f, "; %zu not evaluated (bisection on the instance count)", skipped);
	fputc('\n', f);
	if (limited)
		fprintf(f, "  *: met the target at a higher rate where the workload was a burst, not a"
			   " sustained rate: more --num-requests may raise max req/s\n");
	fprintf(f, "  headroom: max req/s / %g; $/Mtok: $/h / output tokens per hour at %g req/s"
		   " (%.1f per request); ^: J/tok from the\n  closest probe above the rate that met the"
		   " target, not one at it; p99 TTFT from the same probe\n",
		rep->rate_rps, rep->rate_rps, rep->mean_output_tokens);
	text_roofline_footer(f, rep, order, shown);
	free(order);
}

/* A plan with a speculation axis: each item's acceptance assumption. */
static void text_speculation(FILE *f, const struct plan_report *rep)
{
	const struct spec_config *seen[PLAN_MAX_SPECS];
	int n = 0;

	if (rep->n == 0 || !rep->cfg[0].spec_axis)
		return;
	fprintf(f, "  speculation (docs/speculation.md), the acceptance each assumes:\n");
	for (size_t i = 0; i < rep->n; i++) {
		const struct spec_config *c = rep->cfg[i].spec;
		int j;

		for (j = 0; j < n && seen[j] != c; j++)
			;
		if (!c || j < n || n == PLAN_MAX_SPECS)
			continue;
		seen[n++] = c;
		fprintf(f, "    %s: %s, alpha %.4g decay %.4g, %.2f tokens per verify expected\n",
			c->text, c->accept.name, c->accept.alpha, c->accept.decay,
			spec_accept_length(&c->accept, c->k));
	}
}

/* The interval on the tables' latency columns: the bounds' factors. */
static void text_interval(FILE *f, const struct plan_report *rep)
{
	const struct plan_eval *pe = rep->pe;
	static const char *const names[] = { "TTFT", "TPOT", "E2E" };
	const int ms[] = { INTERVAL_TTFT, INTERVAL_TPOT, INTERVAL_E2E };
	const char *sep = "";

	if (!pe->iv_entry)
		return;
	fprintf(f, "  interval on the latency columns (%s%s's bounds, docs/metrics.md \"Intervals\"):\n  ",
		strcmp(pe->iv_entry, "prior") && strcmp(pe->iv_entry, "none") ? "engine " : "",
		pe->iv_entry);
	for (int k = 0; k < 3; k++)
		if (pe->iv_lo[ms[k]] > 0) {
			fprintf(f, "%s%s x%.3f to x%.3f", sep, names[k], pe->iv_lo[ms[k]],
				pe->iv_hi[ms[k]]);
			sep = ", ";
		}
	fprintf(f, ";\n  wider by the power 1 + a row's share outside the measured grid; plan.json and\n"
		   "  plan.csv give each figure's *_lo and *_hi\n");
}

/* plan --conservative: the rows whose verdict at the workload's own rate
 * the pessimistic end changed, marked "~", with both attainments. */
static void text_conservative(FILE *f, const struct plan_report *rep, struct text_widths w)
{
	const struct plan_eval *pe = rep->pe;
	size_t changed = 0;

	fprintf(f, "\nconservative (--conservative): attainment counted with every SLO divided by its\n"
		   "metric's hi bound (TTFT x%.3f, TPOT x%.3f, E2E x%.3f, TBT x%.3f, before widening);\n"
		   "verdicts at the workload's own rate (scale 1) that it changes:\n",
		pe->iv_hi[INTERVAL_TTFT], pe->iv_hi[INTERVAL_TPOT], pe->iv_hi[INTERVAL_E2E],
		pe->iv_hi[INTERVAL_ITL]);
	for (size_t i = 0; i < rep->n; i++) {
		const struct plan_probe *p1 = &rep->res[i].probes[0];

		if (!verdict_changed(rep, i))
			continue;
		if (!changed++)
			fprintf(f, "     %4s  %-6s %-*s %*s %6s  %-18s %4s %8s %11s %12s\n", "#", "mode",
				w.gpu, "gpu", w.tp, "tp", "inst", "policy chunk/batch", "GPUs", "$/h",
				"nominal", "conservative");
		fputs("  ~", f);
		text_row_head(f, &rep->cfg[i], w);
		fprintf(f, " %5.1f%% %-4s %5.1f%% %s\n", 100 * p1->attainment_nominal,
			plan_meets_nominal(&pe->search, p1) ? "met" : "miss", 100 * p1->attainment,
			plan_meets(&pe->search, p1) ? "met" : "miss");
	}
	if (changed)
		fprintf(f, "  ~ %zu configuration%s meet%s the %g%% target under the SLOs as given but not on the\n"
			   "    interval's pessimistic end (or the reverse): left out of the tables above\n",
			changed, changed == 1 ? "" : "s", changed == 1 ? "s" : "", pe->search.target * 100);
	else
		fprintf(f, "  (none: every verdict at scale 1 is the same on the pessimistic end)\n");
}

void plan_text(FILE *f, const struct plan_report *rep)
{
	const struct plan_eval *pe = rep->pe;
	size_t n = rep->n, nf = 0, shown = 0, limited = 0;
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	struct fpoint *fp = frontier_sorted(rep, &nf);
	enum plan_cost_axis axis = plan_cost_axis(rep);
	size_t counts[PLAN_N_STATUS] = { 0 };
	struct text_widths w = text_widths(rep);
	char lat[48];

	fprintf(f, "plan: %zu configuration%s of %s (%zu from the database), engine %s", n,
		n == 1 ? "" : "s", rep->model, rep->resumed, engine_name(pe));
	if (rep->excluded.budget || rep->excluded.unpriced || rep->excluded.memory ||
	    rep->excluded.policy)
		fprintf(f, "; left out: %u over budget, %u unpriced, %u not fitting in memory, %u max batch > chunk",
			rep->excluded.budget, rep->excluded.unpriced, rep->excluded.memory,
			rep->excluded.policy);
	if (pe->base->concurrency)
		fprintf(f, "\nworkload: %s, %llu requests, closed loop of %u clients at scale 1 "
			"(think time %s)\n", rep->workload, (unsigned long long)rep->n_requests,
			pe->base->concurrency, pe->base->think_time ? pe->base->think_time : "none");
	else
		fprintf(f, "\nworkload: %s, %llu requests at %.3f req/s\n", rep->workload,
			(unsigned long long)rep->n_requests, pe->rate_rps);
	if (pe->base->lora)
		fprintf(f, "LoRA adapters: %s (every configuration; docs/lora.md)\n",
			pe->base->lora->text);
	{
		static const char *const names[] = { "TTFT", "TPOT", "E2E", "TBT" };
		const double v[] = { pe->slo.ttft_ms, pe->slo.tpot_ms, pe->slo.e2e_ms, pe->slo.tbt_ms };
		const char *sep = " ";

		fprintf(f, "SLOs:");
		for (int k = 0; k < 4; k++)
			if (v[k] > 0) {
				fprintf(f, "%s%s <= %g ms", sep, names[k], v[k]);
				sep = ", ";
			}
	}
	fprintf(f, "; target %g%% of requests%s\n", pe->search.target * 100,
		pe->search.each_slo ? " for each SLO on its own" : "");
	for (size_t i = 0; i < n; i++)
		if ((unsigned)rep->res[i].status < PLAN_N_STATUS)
			counts[rep->res[i].status]++;
	fprintf(f, "results: %zu with a maximum rate, %zu meeting the target at the largest scale tried (>=), "
		   "%zu missing it at the smallest, %zu failed\n",
		counts[PLAN_OK], counts[PLAN_CAPPED], counts[PLAN_NONE], counts[PLAN_FAILED]);
	if (counts[PLAN_BELOW] || counts[PLAN_SKIPPED])
		fprintf(f, "         %zu stopped early below the target rate, %zu not evaluated (bisection on the instance count)\n",
			counts[PLAN_BELOW], counts[PLAN_SKIPPED]);
	text_pricing(f, rep);
	if (!order) {
		free(fp);
		return;
	}
	plan_rank(rep->cfg, rep->res, n, &pe->search, order);
	if (rep->rate_rps > 0) {
		text_rate(f, rep, w);
		goto frontier;
	}
	fprintf(f, "\ntop configurations by goodput per GPU at their maximum rate:\n");
	text_header(f, "p99 TTFT", w, rep->priced_by != NULL);
	for (size_t k = 0; k < n && shown < (size_t)(rep->top > 0 ? rep->top : 10); k++) {
		const struct plan_result *r = &rep->res[order[k]];
		const struct plan_probe *b = plan_result_best(r);

		if (!b || r->status == PLAN_FAILED)
			continue;
		text_row(f, rep, order[k], b->ttft_p99_ms, w);
		order[shown++] = order[k];   /* the rows shown, for the footer */
	}
	if (!shown)
		fprintf(f, "  (none meets the target at any rate tried)\n");
	text_roofline_footer(f, rep, order, shown);
	for (size_t i = 0; i < n; i++)
		limited += rep->res[i].workload_limited != 0;
	if (limited)
		fprintf(f, "  * %zu configuration%s met the attainment target at a higher rate, but there the\n"
			   "    workload's arrivals spanned less than %g x the mean E2E latency (a burst, not\n"
			   "    a sustained rate): more --num-requests may raise their maximum\n",
			limited, limited == 1 ? "" : "s", pe->search.min_span);
frontier:
	snprintf(lat, sizeof(lat), "%s", latency_label(rep->latency));
	fprintf(f, "\nPareto frontier: cost (%s) against %s at the workload's own rate (scale 1),\n"
		   "among the configurations that meet the target there:\n",
		axis == PLAN_COST_USD ? "USD/h" : "GPUs", lat);
	text_header(f, lat, w, rep->priced_by != NULL);
	for (size_t k = 0; fp && k < nf; k++) {
		text_row(f, rep, fp[k].i, fp[k].latency, w);
		order[k] = fp[k].i;
	}
	text_roofline_footer(f, rep, order, nf);
	{
		size_t below = 0;

		for (size_t k = 0; k < nf; k++)
			below += rep->res[order[k]].status == PLAN_BELOW;
		if (below)
			fprintf(f, "  < %zu row%s stopped %s rate search below the target rate (--rate): the maximum is below %g req/s, not measured\n",
				below, below == 1 ? "" : "s", below == 1 ? "its" : "their", rep->rate_rps);
	}
	if (!nf)
		fprintf(f, "  (no configuration meets the target at scale 1)\n");
	text_interval(f, rep);
	text_speculation(f, rep);
	if (pe->conservative)
		text_conservative(f, rep, w);
	if (rep->verified)
		text_verified(f, rep);
	free(order);
	free(fp);
}

/* ---- plots --------------------------------------------------------------- */

struct pp {
	double x, y;
};

static int pp_cmp(const void *a, const void *b)
{
	const struct pp *p = a, *q = b;

	return p->x < q->x ? -1 : p->x > q->x;
}

/* The scenario every plot's title names, for a gnuplot string: "llama-3.1-8b,
 * azure_conv_2000.csv: 500 requests at 3.87 req/s; TTFT <= 2000 ms, TPOT
 * <= 100 ms, target 90%". */
static void scenario(const struct plan_report *rep, char *buf, size_t len)
{
	static const char *const names[] = { "TTFT", "TPOT", "E2E", "TBT" };
	const struct plan_eval *pe = rep->pe;
	const double v[] = { pe->slo.ttft_ms, pe->slo.tpot_ms, pe->slo.e2e_ms, pe->slo.tbt_ms };
	const char *wl = strrchr(rep->workload, '/') ? strrchr(rep->workload, '/') + 1 : rep->workload;
	size_t at;

	if (pe->base->concurrency)
		snprintf(buf, len, "%s, %s: %llu requests, %u clients", rep->model, wl,
			 (unsigned long long)rep->n_requests, pe->base->concurrency);
	else
		snprintf(buf, len, "%s, %s: %llu requests at %.3g req/s", rep->model, wl,
			 (unsigned long long)rep->n_requests, pe->rate_rps);
	for (int k = 0, first = 1; k < 4; k++)
		if (v[k] > 0) {
			at = strlen(buf);
			snprintf(buf + at, len - at, "%s%s <= %g ms", first ? "; " : ", ", names[k], v[k]);
			first = 0;
		}
	at = strlen(buf);
	snprintf(buf + at, len - at, ", target %g%%%s", pe->search.target * 100,
		 pe->search.each_slo ? " (each SLO)" : "");
}

/* A deployment as the Pareto plot labels it: "2x h100-sxm tp1 vllm",
 * "1P+3D h100-sxm tp2 sarathi", mixed "1P+1D h100-sxm/a100-80gb-sxm tp2/1 vllm". */
static void deploy_label(const struct plan_config *c, char *buf, size_t len)
{
	char gpu[160], tp[32];

	plan_config_gpu_label(c, gpu, sizeof(gpu));
	plan_config_tp_label(c, tp, sizeof(tp));
	if (c->mode == PLAN_DISAGGREGATED)
		snprintf(buf, len, "%uP+%uD %s tp%s %s", c->n_prefill, c->n_decode, gpu, tp,
			 c->policy->name);
	else
		snprintf(buf, len, "%ux %s tp%s %s", c->instances, gpu, tp, c->policy->name);
	for (char *p = buf; *p; p++)
		if (*p == '"' || *p == '\\')
			*p = '_';
}

/* Curves of the attainment plot: one per GPU type (mixed pools: per
 * prefill/decode pair), at most this many. */
#define ATTAINMENT_CURVES_MAX 8

/* attainment.dat: one block per plotted configuration (rate_rps attainment,
 * by rate), blocks separated by two blank lines (gnuplot's index).  The
 * configurations: the best by goodput per GPU of each GPU type, in that
 * order. */
static int attainment_plot(const char *dir, const struct plan_report *rep, const char **names,
			   int *n_names, struct ss_error *err)
{
	size_t n = rep->n, *order = malloc((n ? n : 1) * sizeof(*order)), *pick = NULL;
	size_t k = 0, types = 0, want = ATTAINMENT_CURVES_MAX;
	double lo = rep->pe->search.target - 0.1;
	char scn[600];
	struct ss_file of;
	int ret = 0;

	pick = malloc((want ? want : 1) * sizeof(*pick));
	if (!order || !pick) {
		ret = ss_error_set(err, -ENOMEM, dir, 0, "plots: out of memory");
		goto out;
	}
	plan_rank(rep->cfg, rep->res, n, &rep->pe->search, order);
	/* the first (best) of each GPU type in the ranking */
	for (size_t j = 0; j < n; j++) {
		char a[160], b[160];
		bool seen = false;

		if (rep->res[order[j]].status == PLAN_FAILED || rep->res[order[j]].n_probes <= 0 ||
		    !plan_result_best(&rep->res[order[j]]))
			continue;
		plan_config_gpu_label(&rep->cfg[order[j]], a, sizeof(a));
		for (size_t q = 0; q < j && !seen; q++) {
			if (rep->res[order[q]].status == PLAN_FAILED || rep->res[order[q]].n_probes <= 0 ||
			    !plan_result_best(&rep->res[order[q]]))
				continue;
			plan_config_gpu_label(&rep->cfg[order[q]], b, sizeof(b));
			seen = !strcmp(a, b);
		}
		if (seen)
			continue;
		types++;
		if (k < want)
			pick[k++] = order[j];
	}
	if (k == 0)
		goto out;
	ret = outfile_open(&of, dir, "attainment.dat", 0, err);
	if (ret < 0)
		goto out;
	fprintf(of.f, "# SLO attainment against the offered request rate, one block per configuration\n");
	for (size_t j = 0; j < k; j++) {
		const struct plan_result *r = &rep->res[pick[j]];
		struct pp pts[PLAN_MAX_PROBES];
		char d[512];

		for (int q = 0; q < r->n_probes; q++)
			pts[q] = (struct pp){ r->probes[q].rate_rps, r->probes[q].attainment };
		qsort(pts, (size_t)r->n_probes, sizeof(pts[0]), pp_cmp);
		short_desc(&rep->cfg[pick[j]], d, sizeof(d));
		fprintf(of.f, "%s# ", j ? "\n\n" : "");
		plots_dat_text(of.f, d);
		fprintf(of.f, "\n# rate_rps attainment\n");
		for (int q = 0; q < r->n_probes; q++)
			fprintf(of.f, "%.9g %.9g\n", pts[q].x, pts[q].y);
	}
	ret = outfile_commit(&of, err);
	if (ret < 0)
		goto out;
	ret = outfile_open(&of, dir, "attainment.gp", 0, err);
	if (ret < 0)
		goto out;
	plots_gp_prologue(of.f, "attainment", "SLO attainment against request rate", 600);
	scenario(rep, scn, sizeof(scn));
	fprintf(of.f, "set title \"SLO attainment against request rate: the best deployment by goodput per GPU of each GPU type%s\\n\".",
		types > k ? " (the first 8)" : "");
	plots_gp_string(of.f, scn);
	fprintf(of.f, " noenhanced\n");
	/* zoomed on the target: what matters is where each curve crosses it;
	 * probes below the range leave the plot (clip two keeps their lines) */
	if (lo < 0)
		lo = 0;
	fprintf(of.f, "set xlabel \"request rate (req/s), log scale\"\nset ylabel \"SLO attainment (%.2f to 1 shown)\"\n",
		lo);
	fprintf(of.f, "set logscale x\nset yrange [%.9g:1.01]\nset clip two\nset key bottom left\n", lo);
	fprintf(of.f, "plot");
	for (size_t j = 0; j < k; j++) {
		char d[512];

		short_desc(&rep->cfg[pick[j]], d, sizeof(d));
		if (rep->roofline && rep->roofline[pick[j]])   /* the table's "!" */
			strncat(d, " [! roofline]", sizeof(d) - strlen(d) - 1);
		fprintf(of.f, "%s datadir.\"/attainment.dat\" index %zu using 1:2 with linespoints linewidth 2 title ",
			j ? ", \\\n    " : "", j);
		plots_gp_string(of.f, d);
		fprintf(of.f, " noenhanced");
	}
	fprintf(of.f, ", \\\n    %.9g with lines dashtype 2 linewidth 2 linecolor rgb \"black\" title \"target %g%%\"\n",
		rep->pe->search.target, rep->pe->search.target * 100);
	ret = outfile_commit(&of, err);
	if (ret < 0)
		goto out;
	names[(*n_names)++] = "attainment";
out:
	free(order);
	free(pick);
	return ret;
}

/* pareto.dat: block 0 every eligible configuration (cost latency index),
 * block 1 the frontier in cost order. */
static int pareto_plot(const char *dir, const struct plan_report *rep, const char **names,
		       int *n_names, struct ss_error *err)
{
	struct plan_point *pts = malloc((rep->n ? rep->n : 1) * sizeof(*pts));
	enum plan_cost_axis axis = plan_cost_axis(rep);
	struct fpoint *fp = NULL;
	size_t nf = 0, ne = 0;
	char scn[600];
	struct ss_file of;
	int ret = 0;

	fp = frontier_sorted(rep, &nf);
	if (!pts || !fp) {
		ret = ss_error_set(err, -ENOMEM, dir, 0, "plots: out of memory");
		goto out;
	}
	points(rep, pts);
	for (size_t i = 0; i < rep->n; i++)
		ne += pts[i].eligible;
	if (ne == 0)
		goto out;
	ret = outfile_open(&of, dir, "pareto.dat", 0, err);
	if (ret < 0)
		goto out;
	fprintf(of.f, "# configurations meeting the target at rate scale 1: %s %s index\n",
		cost_name(axis), latency_name(rep->latency));
	for (size_t i = 0; i < rep->n; i++)
		if (pts[i].eligible)
			fprintf(of.f, "%.9g %.9g %zu\n", pts[i].cost, pts[i].latency, i);
	fprintf(of.f, "\n\n# the Pareto frontier, by cost: %s %s index deployment\n", cost_name(axis),
		latency_name(rep->latency));
	for (size_t k = 0; k < nf; k++) {
		char d[256];

		/* the deployment, quoted: gnuplot's fourth column, the label */
		deploy_label(&rep->cfg[fp[k].i], d, sizeof(d));
		fprintf(of.f, "%.9g %.9g %zu \"", fp[k].cost, fp[k].latency, fp[k].i);
		plots_dat_text(of.f, d);
		fprintf(of.f, "\"\n");
	}
	ret = outfile_commit(&of, err);
	if (ret < 0)
		goto out;
	ret = outfile_open(&of, dir, "pareto.gp", 0, err);
	if (ret < 0)
		goto out;
	plots_gp_prologue(of.f, "pareto", "the Pareto frontier of cost against latency", 600);
	scenario(rep, scn, sizeof(scn));
	fprintf(of.f, "set title \"Cost against %s at the workload's rate (%zu configurations meeting the target)\\n\".",
		latency_label(rep->latency), ne);
	plots_gp_string(of.f, scn);
	fprintf(of.f, " noenhanced\n");
	fprintf(of.f, "set xlabel \"%s\"\nset ylabel \"%s (ms)\"\n",
		axis == PLAN_COST_USD ? "cost (USD per hour)" : "GPUs", latency_label(rep->latency));
	/* room on the right for the labels of the frontier's last points */
	fprintf(of.f, "set key top right\nset offsets graph 0.05, graph 0.3, graph 0.08, graph 0.05\n");
	fprintf(of.f, "plot datadir.\"/pareto.dat\" index 0 using 1:2 with points pointtype 6 title \"configurations\", \\\n"
		      "    datadir.\"/pareto.dat\" index 1 using 1:2 with linespoints linewidth 2 pointtype 7 title \"frontier\", \\\n"
		      "    datadir.\"/pareto.dat\" index 1 using 1:2:4 with labels left offset 1,0.8 noenhanced notitle\n");
	ret = outfile_commit(&of, err);
	if (ret < 0)
		goto out;
	names[(*n_names)++] = "pareto";
out:
	free(pts);
	free(fp);
	return ret;
}

int plan_prepare_dir(const char *dir, struct ss_error *err)
{
	int ret = outdir_mkdirs(dir, err);

	if (!ret)
		ret = outdir_remove(dir, "plan.json", err);

	if (!ret)
		ret = outdir_remove(dir, "plan.csv", err);
	return ret;
}

int plan_write_dir(const char *dir, const struct plan_report *rep, bool *plots_skipped,
		   struct ss_error *err)
{
	const char *names[2];
	int n_names = 0, ret;
	struct ss_file of;
	struct plot_outcome po;
	json_t *doc;

	*plots_skipped = false;
	ret = plan_prepare_dir(dir, err);
	if (ret < 0)
		return ret;
	ret = attainment_plot(dir, rep, names, &n_names, err);
	if (ret < 0)
		return ret;
	ret = pareto_plot(dir, rep, names, &n_names, err);
	if (ret < 0)
		return ret;
	ret = plots_render(dir, names, n_names, 0, &po, err);
	if (ret < 0)
		return ret;
	*plots_skipped = po.skipped;
	if (po.warning.code)   /* a hung gnuplot: this API has no warning to give */
		return ss_error_set(err, po.warning.code, dir, 0, "%s", po.warning.msg);
	ret = outfile_open(&of, dir, "plan.csv", 1u << 16, err);
	if (ret < 0)
		return ret;
	plan_csv(of.f, rep);
	ret = outfile_commit(&of, err);
	if (ret < 0)
		return ret;
	ret = plan_html_write(dir, rep, po.skipped, names, n_names, err);
	if (ret < 0)
		return ret;
	/* plan.json last: its presence says the plan is complete */
	doc = plan_json(rep);
	if (!doc)
		return ss_error_set(err, -ENOMEM, dir, 0, "plan.json: out of memory");
	ret = outfile_open(&of, dir, "plan.json", 1u << 16, err);
	if (ret < 0) {
		json_decref(doc);
		return ret;
	}
	if (json_dumpf(doc, of.f, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(10))) {
		outfile_abort(&of);
		json_decref(doc);
		return ss_error_set(err, -EIO, dir, 0, "plan.json: write failed");
	}
	fputc('\n', of.f);
	json_decref(doc);
	return outfile_commit(&of, err);
}
