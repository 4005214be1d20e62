/* servesim — a plan's report.html (docs/plan.md): the plan's two tables
 * (the top configurations by goodput per GPU, the Pareto frontier) with
 * the figures and formats of the text table, the plots embedded, the
 * configuration, and the text as printed.  Built from the plan_report in
 * memory by plan_write_dir(), after the plots and before plan.json. */
#include "html.h"
#include "plan.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A figure as the text table prints it, "-" when unknown. */
static const char *num(struct html_cells *cs, const char *fmt, double v)
{
	return isfinite(v) ? html_cellf(cs, fmt, v) : "-";
}

static const char *latency_label(enum plan_latency l)
{
	return l == PLAN_LAT_TPOT ? "p99 TPOT ms" : l == PLAN_LAT_E2E ? "p99 E2E ms" : "p99 TTFT ms";
}

static double probe_latency(const struct plan_probe *p, enum plan_latency l)
{
	return l == PLAN_LAT_TPOT ? p->tpot_p99_ms : l == PLAN_LAT_E2E ? p->e2e_p99_ms : p->ttft_p99_ms;
}

/* As plan-out.c's dtype_label(): "bf16" for the model's own 2-byte dtype. */
static const char *dtype_label(const struct plan_report *rep, enum ss_dtype d)
{
	if (d == SS_DTYPE_MODEL)
		return rep->pe->base->model && rep->pe->base->model->dtype_bytes == 2 ? "bf16" : "model";
	return ss_dtype_name(d);
}

#define MAX_COLS 16

static int columns(const struct plan_report *rep, const char *latency, const char **head)
{
	static const char *const fixed[] = { "#", "mode", "gpu", "tp", "inst", "policy chunk/batch",
					     "GPUs", "$/h", "max req/s", "goodput req/s",
					     "goodput /GPU", "goodput /($/h)" };
	int n = 0;

	for (size_t k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++)
		head[n++] = fixed[k];
	head[n++] = latency;
	if (rep->n > 0 && rep->cfg[0].dtype_axis)
		head[n++] = "weights/KV";
	if (rep->priced_by) {
		head[n++] = "priced by";
		head[n++] = "outside grids";
	}
	return n;
}

/* "! roofline" where the roofline priced some operator (plan-out.c's
 * marker), else what priced the row. */
static const char *priced(struct html_cells *cs, const struct plan_report *rep, size_t i)
{
	return html_cellf(cs, "%s%s", rep->roofline[i] ? "! " : "", rep->priced_by[i]);
}

/* The share of the simulated time outside measured grids, of probe g. */
static const char *outside(struct html_cells *cs, const struct plan_probe *g)
{
	return g ? num(cs, "%.1f%%", 100 * g->outside_grid) : "-";
}

/* The cells every table's row starts with, as the text tables have them:
 * #, mode, gpu, tp, inst, policy chunk/batch, GPUs, $/h.  Returns 8. */
static int config_cells(struct html_cells *cs, const struct plan_config *c, const char **out)
{
	char buf[160];
	int k = 0;

	out[k++] = html_cellf(cs, "%u", c->index);
	out[k++] = c->mode == PLAN_DISAGGREGATED ? "disagg" : "coloc";
	plan_config_gpu_label(c, buf, sizeof(buf));
	out[k++] = html_cellf(cs, "%s", buf);
	plan_config_tp_label(c, buf, sizeof(buf));
	out[k++] = html_cellf(cs, "%s", buf);
	plan_config_inst_label(c, buf, sizeof(buf));
	out[k++] = html_cellf(cs, "%s", buf);
	plan_config_policy_label(c, buf, sizeof(buf));
	out[k++] = html_cellf(cs, "%s", buf);
	out[k++] = html_cellf(cs, "%d", c->gpus);
	out[k++] = num(cs, "%.2f", c->usd_per_hour > 0 ? c->usd_per_hour : NAN);
	return k;
}

/* Configuration i as a row of the text table (plan-out.c's text_row()). */
static void row(struct html_cells *cs, const struct plan_report *rep, size_t i, double latency,
		const char **out, int n_cols)
{
	const struct plan_config *c = &rep->cfg[i];
	const struct plan_result *r = &rep->res[i];
	struct plan_figures fg;
	int k;

	plan_figures(c, r, &rep->pe->search, &fg);
	k = config_cells(cs, c, out);
	/* ">=": met even at the largest scale tried; "*": limited by the workload */
	if (r->status == PLAN_BELOW) {
		/* stopped early below --rate: not a maximum (as the text) */
		out[k++] = html_cellf(cs, "< %.3f", rep->rate_rps);
		out[k++] = "-";
		out[k++] = "-";
		out[k++] = "-";
	} else {
		out[k++] = isfinite(fg.max_rate_rps) ?
			   html_cellf(cs, "%s%.3f", r->status == PLAN_CAPPED ? ">= " :
				 r->workload_limited ? "* " : "", fg.max_rate_rps) : "-";
		out[k++] = num(cs, "%.3f", fg.goodput_rps);
		out[k++] = num(cs, "%.3f", fg.goodput_per_gpu);
		out[k++] = num(cs, "%.3f", fg.goodput_per_usd_hour);
	}
	out[k++] = num(cs, "%.1f", latency);
	if (c->dtype_axis)
		out[k++] = html_cellf(cs, "%s/%s", dtype_label(rep, c->weight_dtype),
				 dtype_label(rep, c->kv_dtype));
	if (rep->priced_by && k + 2 <= n_cols) {
		out[k++] = priced(cs, rep, i);
		out[k++] = outside(cs, plan_result_best(r));
	}
}

#define RATE_COLS 15

/* --rate: the deployments sustaining R, best first by the objective, as
 * plan-out.c's text_rate() lists them; returns the rows written. */
static size_t rate_rows(struct html_cells *cs, const struct plan_report *rep, size_t *order,
			const char **cells, size_t top)
{
	size_t nr = plan_rate_order(rep, order), rows = 0;

	for (size_t k = 0; k < nr && rows < top; k++, rows++) {
		size_t i = order[k];
		const struct plan_config *c = &rep->cfg[i];
		const char **out = &cells[rows * RATE_COLS];
		struct plan_rate_figures rf;
		int j;

		plan_rate_figures(rep, i, &rf);
		j = config_cells(cs, c, out);
		out[j++] = num(cs, "%.3f", rf.headroom * rep->rate_rps);
		out[j++] = num(cs, "%.2f", rf.headroom);
		out[j++] = num(cs, "%.3f", rf.usd_per_m_tokens);
		out[j++] = isfinite(rf.j_per_token) ?
			   html_cellf(cs, "%.3f%s", rf.j_per_token, rf.at_rate ? "" : "^") : "-";
		out[j++] = num(cs, "%.1f", rf.ttft_p99_ms);
		out[j++] = rep->priced_by ? priced(cs, rep, i) : "-";
		out[j++] = outside(cs, rf.probe);
	}
	return rows;
}

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

struct text_ctx {
	const struct plan_report *rep;
};

static void plan_text_cb(FILE *f, const void *ctx)
{
	plan_text(f, ((const struct text_ctx *)ctx)->rep);
}

int plan_html_write(const char *dir, const struct plan_report *rep, bool plots_skipped,
		    const char *const *plots, int n_plots, struct ss_error *err)
{
	const struct plan_eval *pe = rep->pe;
	size_t n = rep->n, nrow = 0, nf = 0;
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	bool *on = calloc(n ? n : 1, sizeof(*on));
	struct fpoint *fp = malloc((n ? n : 1) * sizeof(*fp));
	const char **cells = calloc((n ? n : 1) * MAX_COLS, sizeof(*cells));
	const char *head[MAX_COLS], *kv[2 * 16];
	enum plan_cost_axis axis = plan_cost_axis(rep);
	struct html_cells cs = { 0 };
	size_t counts[4] = { 0 };
	char title[256], sub[512], slo[256] = "", lat[64];
	struct ss_file of;
	char *text = NULL;
	FILE *f;
	int ncol, nkv = 0, ret;

	/* the arena: the header's cells, then at most MAX_COLS + 3 per row of
	 * the top table and of the frontier */
	if (on) {
		size_t top = (size_t)(rep->top > 0 ? rep->top : 10), n_on = 0;

		plan_frontier(rep, on);
		for (size_t i = 0; i < n; i++)
			n_on += on[i];
		cs.cap = 64 + ((top < n ? top : n) * 2 + n_on + rep->n_verified) * (MAX_COLS + 3);
		cs.c = calloc(cs.cap, HTML_CELL);
	}
	text = html_capture(plan_text_cb, &(struct text_ctx){ rep });
	if (!order || !on || !fp || !cells || !cs.c || !text) {
		ret = ss_error_set(err, -ENOMEM, dir, 0, HTML_REPORT_NAME ": out of memory");
		goto out;
	}
	snprintf(title, sizeof(title), "servesim plan: %s, %zu configuration%s", rep->model, n,
		 n == 1 ? "" : "s");
	snprintf(sub, sizeof(sub), "engine %s; servesim %s; fingerprint %s",
		 pe->base->engine ? pe->base->engine->name : "none", rep->version, rep->fingerprint);
	ret = html_file_open(&of, dir, title, sub, err);
	if (ret < 0)
		goto out;
	f = of.f;
	fputs("<nav><a href=\"#results\">Results</a>", f);
	if (rep->rate_rps > 0)
		fputs("<a href=\"#rate\">Target rate</a>", f);
	fputs("<a href=\"#top\">Top configurations</a>"
	      "<a href=\"#frontier\">Pareto frontier</a><a href=\"#plots\">Plots</a>"
	      "<a href=\"#configuration\">Configuration</a><a href=\"#text\">Text</a></nav>\n", f);
	if (rep->verified)
		fputs("<nav><a href=\"#verified\">Verified on the whole workload</a></nav>\n", f);

	/* what was planned: the text's header lines */
	{
		static const char *const names[] = { "TTFT", "TPOT", "E2E", "TBT" };
		const double v[] = { pe->slo.ttft_ms, pe->slo.tpot_ms, pe->slo.e2e_ms, pe->slo.tbt_ms };
		size_t at = 0;

		for (int k = 0; k < 4; k++)
			if (v[k] > 0 && at < sizeof(slo))
				at += (size_t)snprintf(slo + at, sizeof(slo) - at, "%s%s <= %g ms",
						       at ? ", " : "", names[k], v[k]);
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned)rep->res[i].status < 4)
			counts[rep->res[i].status]++;
#define KV(k, v) (kv[2 * nkv] = (k), kv[2 * nkv + 1] = (v), nkv++)
	KV("model", rep->model);
	KV("configurations", html_cellf(&cs, "%zu (%zu from the database); left out: %u over budget, %u unpriced, %u not fitting in memory, %u max batch > chunk",
				   n, rep->resumed, rep->excluded.budget, rep->excluded.unpriced,
				   rep->excluded.memory, rep->excluded.policy));
	KV("workload", pe->base->concurrency ?
	   html_cellf(&cs, "%s, %llu requests, closed loop of %u clients at scale 1 (think time %s)",
		 rep->workload, (unsigned long long)rep->n_requests, pe->base->concurrency,
		 pe->base->think_time ? pe->base->think_time : "none") :
	   html_cellf(&cs, "%s, %llu requests at %.3f req/s", rep->workload,
		 (unsigned long long)rep->n_requests, pe->rate_rps));
	KV("SLOs", slo[0] ? slo : "none");
	KV("target", html_cellf(&cs, "%g%% of requests%s", pe->search.target * 100,
			   pe->search.each_slo ? " for each SLO on its own" : ""));
	KV("results", html_cellf(&cs, "%zu with a maximum rate, %zu meeting the target at the largest scale tried (>=), %zu missing it at the smallest, %zu failed",
			    counts[PLAN_OK], counts[PLAN_CAPPED], counts[PLAN_NONE],
			    counts[PLAN_FAILED]));
	html_heading(f, 2, "Results", "results");
	html_kv(f, "The plan", kv, nkv);

	if (rep->slice && rep->slice->any) {
		char why[1024];

		workload_slice_text(rep->slice, why, sizeof(why));
		html_note(f, "The workload is a cut of a trace that differs from the whole trace (slice vs whole): %s. --verify N re-runs the best on the whole trace.",
			  why);
	}
	if (rep->priced_by) {
		size_t k = 0;

		for (size_t i = 0; i < n; i++)
			k += rep->roofline[i];
		if (k)
			html_note(f, "! %zu configuration%s %s.", k, k == 1 ? "" : "s",
				  "priced by the roofline for some operators: no measurement behind them; calibrate this GPU (docs/calibration.md) before comparing it with measured rows");
	}

	/* --rate: the deployments sustaining R */
	if (rep->rate_rps > 0) {
		static const char *const rhead[RATE_COLS] = {
			"#", "mode", "gpu", "tp", "inst", "policy chunk/batch", "GPUs", "$/h", "max req/s",
			"headroom", "$/M output tokens", "J/output token", "p99 TTFT ms",
			"priced by", "outside grids" };
		size_t top = (size_t)(rep->top > 0 ? rep->top : 10);
		const char **rc = calloc(top * RATE_COLS, sizeof(*rc));
		enum plan_objective obj = plan_objective_used(rep);
		size_t nr;

		if (!rc) {
			ss_file_abort(&of);
			ret = ss_error_set(err, -ENOMEM, dir, 0, HTML_REPORT_NAME ": out of memory");
			goto out;
		}
		nr = rate_rows(&cs, rep, order, rc, top);
		html_heading(f, 3, html_cellf(&cs, "Deployments sustaining %g req/s, by %s", rep->rate_rps,
					 plan_objective_name(obj)), "rate");
		html_para(f, "%g req/s is %.4g x the workload's %.4g req/s at scale 1.%s Headroom: max req/s / %g; $/M output tokens: $/h / output tokens per hour at %g req/s (%.1f per request); ^: J/token from the closest probe above the rate that met the target.",
			  rep->rate_rps, rep->rate_rps / pe->rate_rps, pe->rate_rps,
			  obj != rep->objective ? " Ordered by GPUs, not cost: a GPU has no price in the catalog." : "",
			  rep->rate_rps, rep->rate_rps, rep->mean_output_tokens);
		if (nr)
			html_table(f, &(struct html_table){ .n_cols = RATE_COLS, .n_rows = (int)nr,
							    .head = rhead, .cells = rc });
		else
			html_note(f, "No configuration sustains %g req/s.", rep->rate_rps);
		free(rc);
	}

	/* the top configurations by goodput per GPU at their maximum rate */
	ncol = columns(rep, "p99 TTFT ms", head);
	plan_rank(rep->cfg, rep->res, n, &pe->search, order);
	for (size_t k = 0; k < n && nrow < (size_t)(rep->top > 0 ? rep->top : 10); k++) {
		const struct plan_result *r = &rep->res[order[k]];
		const struct plan_probe *b = plan_result_best(r);

		if (!b || r->status == PLAN_FAILED)
			continue;
		row(&cs, rep, order[k], b->ttft_p99_ms, &cells[nrow * (size_t)ncol], ncol);
		nrow++;
	}
	html_heading(f, 3, "Top configurations by goodput per GPU at their maximum rate", "top");
	if (nrow)
		html_table(f, &(struct html_table){ .n_cols = ncol, .n_rows = (int)nrow, .head = head,
						    .cells = cells });
	else
		html_note(f, "None meets the target at any rate tried.");
	{
		size_t limited = 0, capped = 0;

		for (size_t i = 0; i < n; i++) {
			limited += rep->res[i].workload_limited != 0;
			capped += rep->res[i].status == PLAN_CAPPED;
		}
		if (capped)
			html_para(f, ">= : the configuration met the target even at the largest rate tried, so its maximum is a lower bound.");
		if (limited)
			html_para(f, "* : %zu configuration%s met the attainment target at a higher rate, but there the workload's arrivals spanned less than %g x the mean E2E latency (a burst, not a sustained rate): more --num-requests may raise their maximum.",
				  limited, limited == 1 ? "" : "s", pe->search.min_span);
	}

	/* the Pareto frontier at scale 1, in cost order */
	snprintf(lat, sizeof(lat), "%s", latency_label(rep->latency));
	ncol = columns(rep, lat, head);
	for (size_t i = 0; i < n; i++)
		if (on[i])
			fp[nf++] = (struct fpoint){
				i, axis == PLAN_COST_USD ? rep->cfg[i].usd_per_hour : rep->cfg[i].gpus,
				probe_latency(&rep->res[i].probes[0], rep->latency) };
	qsort(fp, nf, sizeof(*fp), fpoint_cmp);
	for (size_t k = 0; k < nf; k++)
		row(&cs, rep, fp[k].i, fp[k].latency, &cells[k * (size_t)ncol], ncol);
	html_heading(f, 3, "Pareto frontier", "frontier");
	html_para(f, "Cost (%s) against %s at the workload's own rate (scale 1), among the configurations that meet the target there:",
		  axis == PLAN_COST_USD ? "USD/h" : "GPUs", lat);
	if (nf)
		html_table(f, &(struct html_table){ .n_cols = ncol, .n_rows = (int)nf, .head = head,
						    .cells = cells });
	else
		html_note(f, "No configuration meets the target at scale 1.");
	{
		size_t below = 0;

		for (size_t k = 0; k < nf; k++)
			below += rep->res[fp[k].i].status == PLAN_BELOW;
		if (below)
			html_para(f, "< : %zu row%s stopped %s rate search below the target rate (--rate): the maximum is below %g req/s, not measured.",
				  below, below == 1 ? "" : "s", below == 1 ? "its" : "their", rep->rate_rps);
	}

	if (rep->verified) {
		static const char *const vhead[] = { "#", "configuration", "req/s", "planned attainment",
						     "whole-workload attainment", "p99 TTFT ms", "" };
		const char **vc = calloc((rep->n_verified ? rep->n_verified : 1) * 7, sizeof(*vc));

		if (!vc) {
			ss_file_abort(&of);
			ret = ss_error_set(err, -ENOMEM, dir, 0, HTML_REPORT_NAME ": out of memory");
			goto out;
		}
		for (size_t k = 0; k < rep->n_verified; k++) {
			const struct plan_verified *v = &rep->verified[k];
			const char **o = &vc[k * 7];

			o[0] = html_cellf(&cs, "%u", v->index);
			o[1] = html_cellf(&cs, "%s", rep->cfg[v->index].key);
			o[2] = num(&cs, "%.3f", v->probe.rate_rps);
			o[3] = num(&cs, "%.4f", v->predicted_attainment);
			o[4] = num(&cs, "%.4f", v->probe.attainment);
			o[5] = num(&cs, "%.1f", v->probe.ttft_p99_ms);
			o[6] = v->meets ? "" : "MISSES the target";
		}
		html_heading(f, 3, "Verified on the whole workload", "verified");
		html_para(f, "%llu requests at %.3f req/s, each at %s.",
			  (unsigned long long)rep->verify_requests, rep->verify_rate_rps,
			  rep->rate_rps > 0 ? "the target rate" : "the maximum rate the plan found");
		if (rep->n_verified)
			html_table(f, &(struct html_table){ .n_cols = 7, .n_rows = (int)rep->n_verified,
							    .head = vhead, .cells = vc });
		else
			html_note(f, "No configuration has a maximum rate to verify.");
		free(vc);
	}

	html_plots(f, dir, plots, n_plots, plots_skipped,
		   plots_skipped ? "gnuplot was not found, so no plots were made (their scripts, .gp, and data, .dat, are in the output directory)." :
		   n_plots == 0 ? "No plots: no configuration has a result to plot." : NULL);

	html_heading(f, 2, "Configuration", "configuration");
	if (rep->command_line) {
		html_heading(f, 3, "Command line", NULL);
		html_pre(f, rep->command_line);
	}
	nkv = 0;
	KV("engine", pe->base->engine ? pe->base->engine->name : "none");
	KV("serving stack", pe->base->stack ? pe->base->stack->name : "none");
	KV("rate search", html_cellf(&cs, "scales %g to %g, step %g, tolerance %g, at most %d probes per configuration, sustained over %g x the mean E2E",
				pe->search.min_scale, pe->search.max_scale, pe->search.step,
				pe->search.tolerance, pe->search.max_probes, pe->search.min_span));
	KV("frontier", html_cellf(&cs, "cost in %s against %s at scale 1",
			     axis == PLAN_COST_USD ? "USD/h" : "GPUs", lat));
	KV("fingerprint", rep->fingerprint);
	KV("servesim", rep->version);
#undef KV
	html_kv(f, "Search", kv, nkv);

	html_heading(f, 2, "Text", "text");
	html_para(f, "The plan as printed:");
	html_pre(f, text);
	ret = html_file_commit(&of, err);
out:
	free(text);
	free(cs.c);
	free(cells);
	free(fp);
	free(on);
	free(order);
	return ret;
}
