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
	/* the text goes inside a gnuplot string */
	for (char *p = buf; *p; p++)
		if (*p == '"' || *p == '\\')
			*p = '_';
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *jreal(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *config_json(const struct plan_report *rep, size_t i, bool frontier)
{
	const struct plan_config *c = &rep->cfg[i];
	const struct plan_result *r = &rep->res[i];
	const struct plan_probe *b = r->status == PLAN_FAILED ? NULL : plan_result_best(r);
	const struct plan_probe *p1 = r->status != PLAN_FAILED && r->n_probes ? &r->probes[0] : NULL;
	struct plan_figures f;
	json_t *o, *probes;

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
	/* MoE layouts, only when used (other configurations' JSON as before) */
	if (c->ep > 1)
		json_object_set_new(o, "ep", json_integer(c->ep));
	if (c->dp_attention > 1)
		json_object_set_new(o, "dp_attention", json_integer(c->dp_attention));
	if (b) {
		json_object_set_new(o, "ttft_ms", json_pack("{s:o, s:o}", "p50", jreal(b->ttft_p50_ms),
							    "p99", jreal(b->ttft_p99_ms)));
		json_object_set_new(o, "tpot_ms", json_pack("{s:o, s:o}", "p50", jreal(b->tpot_p50_ms),
							    "p99", jreal(b->tpot_p99_ms)));
		json_object_set_new(o, "e2e_p99_ms", jreal(b->e2e_p99_ms));
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
	return o;
}

/* The engine profile's name ("none": kernels only). */
static const char *engine_name(const struct plan_eval *pe)
{
	return pe->base->engine ? pe->base->engine->name : "none";
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
	}
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

void plan_csv(FILE *f, const struct plan_report *rep)
{
	bool *on = calloc(rep->n ? rep->n : 1, sizeof(*on));

	if (on)
		plan_frontier(rep, on);
	fputs("index,config,mode,gpu,tp,instances,prefill_instances,decode_instances,policy,"
	      "chunk,max_batch,gpus,usd_per_hour,status,max_rate_scale,max_rate_rps,attainment,"
	      "goodput_rps,goodput_rps_per_gpu,goodput_rps_per_usd_hour,run_goodput_rps,ttft_p50_ms,ttft_p99_ms,"
	      "tpot_p50_ms,tpot_p99_ms,e2e_p99_ms,attainment_at_1,ttft_p99_ms_at_1,"
	      "tpot_p99_ms_at_1,e2e_p99_ms_at_1,frontier,workload_limited,probes,decode_gpu,"
	      "decode_tp", f);
	fputs(dtype_axes(rep) ? ",weight_dtype,kv_dtype\n" : "\n", f);   /* dtype axes only */
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

static void text_row(FILE *f, const struct plan_report *rep, size_t i, double latency,
		     struct text_widths w)
{
	const struct plan_config *c = &rep->cfg[i];
	const struct plan_result *r = &rep->res[i];
	struct plan_figures fg;
	char inst[32], pol[96], gpu[160], tp[32];

	plan_figures(c, r, &rep->pe->search, &fg);
	if (c->mode == PLAN_DISAGGREGATED)
		snprintf(inst, sizeof(inst), "%uP+%uD", c->n_prefill, c->n_decode);
	else
		snprintf(inst, sizeof(inst), "%u", c->instances);
	snprintf(pol, sizeof(pol), "%s", c->policy->name);
	if (c->chunk > 0 || c->max_batch > 0) {
		char a[16] = "-", b[16] = "-";

		if (c->chunk > 0)
			snprintf(a, sizeof(a), "%d", c->chunk);
		if (c->max_batch > 0)
			snprintf(b, sizeof(b), "%d", c->max_batch);
		snprintf(pol, sizeof(pol), "%s %s/%s", c->policy->name, a, b);
	}
	plan_config_gpu_label(c, gpu, sizeof(gpu));
	plan_config_tp_label(c, tp, sizeof(tp));
	fprintf(f, "  %4u  %-6s %-*s %*s %6s  %-18s %4d", c->index,
		c->mode == PLAN_DISAGGREGATED ? "disagg" : "coloc", w.gpu, gpu, w.tp, tp, inst, pol,
		c->gpus);
	text_num(f, 8, "%*.2f", c->usd_per_hour > 0 ? c->usd_per_hour : NAN);
	fprintf(f, " %s", r->status == PLAN_CAPPED ? ">=" : r->workload_limited ? " *" : "  ");
	text_num(f, 8, "%*.3f", fg.max_rate_rps);
	text_num(f, 9, "%*.3f", fg.goodput_rps);
	text_num(f, 8, "%*.3f", fg.goodput_per_gpu);
	text_num(f, 8, "%*.3f", fg.goodput_per_usd_hour);
	text_num(f, 10, "%*.1f", latency);
	if (w.dtypes)
		fprintf(f, "  %s/%s", dtype_label(rep, c, false), dtype_label(rep, c, true));
	fputc('\n', f);
}

static void text_header(FILE *f, const char *latency, struct text_widths w)
{
	fprintf(f, "  %4s  %-6s %-*s %*s %6s  %-18s %4s %8s %10s %9s %8s %8s %10s", "#", "mode",
		w.gpu, "gpu", w.tp, "tp", "inst", "policy chunk/batch", "GPUs", "$/h", "max req/s",
		"goodput", "/GPU", "/($/h)", latency);
	fputs(w.dtypes ? "  weights/KV\n" : "\n", f);
}

void plan_text(FILE *f, const struct plan_report *rep)
{
	const struct plan_eval *pe = rep->pe;
	size_t n = rep->n, nf = 0, shown = 0, limited = 0;
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	struct fpoint *fp = frontier_sorted(rep, &nf);
	enum plan_cost_axis axis = plan_cost_axis(rep);
	size_t counts[4] = { 0 };
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
		if ((unsigned)rep->res[i].status < 4)
			counts[rep->res[i].status]++;
	fprintf(f, "results: %zu with a maximum rate, %zu meeting the target at the largest scale tried (>=), "
		   "%zu missing it at the smallest, %zu failed\n",
		counts[PLAN_OK], counts[PLAN_CAPPED], counts[PLAN_NONE], counts[PLAN_FAILED]);
	if (!order) {
		free(fp);
		return;
	}
	plan_rank(rep->cfg, rep->res, n, &pe->search, order);
	fprintf(f, "\ntop configurations by goodput per GPU at their maximum rate:\n");
	text_header(f, "p99 TTFT", w);
	for (size_t k = 0; k < n && shown < (size_t)(rep->top > 0 ? rep->top : 10); k++) {
		const struct plan_result *r = &rep->res[order[k]];
		const struct plan_probe *b = plan_result_best(r);

		if (!b || r->status == PLAN_FAILED)
			continue;
		text_row(f, rep, order[k], b->ttft_p99_ms, w);
		shown++;
	}
	if (!shown)
		fprintf(f, "  (none meets the target at any rate tried)\n");
	for (size_t i = 0; i < n; i++)
		limited += rep->res[i].workload_limited != 0;
	if (limited)
		fprintf(f, "  * %zu configuration%s met the attainment target at a higher rate, but there the\n"
			   "    workload's arrivals spanned less than %g x the mean E2E latency (a burst, not\n"
			   "    a sustained rate): more --num-requests may raise their maximum\n",
			limited, limited == 1 ? "" : "s", pe->search.min_span);
	snprintf(lat, sizeof(lat), "%s", latency_label(rep->latency));
	fprintf(f, "\nPareto frontier: cost (%s) against %s at the workload's own rate (scale 1),\n"
		   "among the configurations that meet the target there:\n",
		axis == PLAN_COST_USD ? "USD/h" : "GPUs", lat);
	text_header(f, lat, w);
	for (size_t k = 0; fp && k < nf; k++)
		text_row(f, rep, fp[k].i, fp[k].latency, w);
	if (!nf)
		fprintf(f, "  (no configuration meets the target at scale 1)\n");
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

/* attainment.dat: one block per plotted configuration (rate_rps attainment,
 * by rate), blocks separated by two blank lines (gnuplot's index). */
static int attainment_plot(const char *dir, const struct plan_report *rep, const char **names,
			   int *n_names, struct ss_error *err)
{
	size_t n = rep->n, *order = malloc((n ? n : 1) * sizeof(*order)), *pick = NULL;
	size_t k = 0, want = (size_t)(rep->plot_top > 0 ? rep->plot_top : 5);
	struct ss_file of;
	int ret = 0;

	pick = malloc((want ? want : 1) * sizeof(*pick));
	if (!order || !pick) {
		ret = ss_error_set(err, -ENOMEM, dir, 0, "plots: out of memory");
		goto out;
	}
	plan_rank(rep->cfg, rep->res, n, &rep->pe->search, order);
	for (size_t j = 0; j < n && k < want; j++)
		if (rep->res[order[j]].status != PLAN_FAILED && rep->res[order[j]].n_probes > 0 &&
		    plan_result_best(&rep->res[order[j]]))
			pick[k++] = order[j];
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
		fprintf(of.f, "%s# %s\n# rate_rps attainment\n", j ? "\n\n" : "", d);
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
	fprintf(of.f, "set title \"SLO attainment against request rate (top %zu by goodput per GPU)\"\n", k);
	fprintf(of.f, "set xlabel \"request rate (req/s), log scale\"\nset ylabel \"SLO attainment\"\n");
	fprintf(of.f, "set logscale x\nset yrange [0:1.05]\nset key bottom left\n");
	fprintf(of.f, "plot");
	for (size_t j = 0; j < k; j++) {
		char d[512];

		short_desc(&rep->cfg[pick[j]], d, sizeof(d));
		fprintf(of.f, "%s datadir.\"/attainment.dat\" index %zu using 1:2 with linespoints linewidth 2 title \"%s\" noenhanced",
			j ? ", \\\n    " : "", j, d);
	}
	fprintf(of.f, ", \\\n    %.9g with lines dashtype 2 linecolor rgb \"black\" title \"target\"\n",
		rep->pe->search.target);
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
	fprintf(of.f, "\n\n# the Pareto frontier, by cost: %s %s index\n", cost_name(axis),
		latency_name(rep->latency));
	for (size_t k = 0; k < nf; k++)
		fprintf(of.f, "%.9g %.9g %zu\n", fp[k].cost, fp[k].latency, fp[k].i);
	ret = outfile_commit(&of, err);
	if (ret < 0)
		goto out;
	ret = outfile_open(&of, dir, "pareto.gp", 0, err);
	if (ret < 0)
		goto out;
	plots_gp_prologue(of.f, "pareto", "the Pareto frontier of cost against latency", 600);
	fprintf(of.f, "set title \"Cost against %s at the workload's rate (%zu configurations meeting the target)\"\n",
		latency_label(rep->latency), ne);
	fprintf(of.f, "set xlabel \"%s\"\nset ylabel \"%s (ms)\"\n",
		axis == PLAN_COST_USD ? "cost (USD per hour)" : "GPUs", latency_label(rep->latency));
	fprintf(of.f, "set key top right\nset offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05\n");
	fprintf(of.f, "plot datadir.\"/pareto.dat\" index 0 using 1:2 with points pointtype 6 title \"configurations\", \\\n"
		      "    datadir.\"/pareto.dat\" index 1 using 1:2 with linespoints linewidth 2 pointtype 7 title \"frontier\", \\\n"
		      "    datadir.\"/pareto.dat\" index 1 using 1:2:(sprintf(\"#%%d\", $3)) with labels offset 1,1 notitle\n");
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
