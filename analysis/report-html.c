/* servesim — a run's report.html (docs/outputs.md): the headline figures of
 * summary.txt as tables, the plots embedded, the configuration, and the
 * text summary as printed.  Built from the summary in memory, written by
 * report_write_dir() once the PNGs exist and before summary.json. */
#include "html.h"
#include "report-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *orq(const char *s)
{
	return s && s[0] ? s : "-";
}

/* The latency table: the rows, the columns and the format of summary.txt,
 * with a row "lo" and a row "hi" under each distribution that has an
 * interval (docs/metrics.md "Intervals"). */
static void latency_table(FILE *f, struct html_cells *cs, const struct summary *s)
{
	static const char *const head[] = { "ms", "mean", "p50", "p90", "p99", "max", "n" };
	const char *cells[REPORT_LATENCY_ROWS * 3 * 7];
	int n_rows = 0;

	for (int i = 0; i < REPORT_LATENCY_ROWS; i++) {
		const struct dist *d = (const struct dist *)((const char *)s +
							     report_latency_rows[i].dist);
		const double v[5] = { d->mean, d->p50, d->p90, d->p99, d->max };
		int m = metric_field_interval(report_latency_rows[i].dist);
		const char **row = &cells[n_rows++ * 7];
		bool e = d->n == 0;

		row[0] = report_latency_rows[i].name;
		for (int k = 0; k < 5; k++)
			row[1 + k] = e ? "-" : html_cellf(cs, "%.3f", v[k]);
		row[6] = html_cellf(cs, "%" PRIu64, d->n);
		if (e || m < 0 || !(s->interval.lo[m] > 0))
			continue;
		for (int end = 0; end < 2; end++) {
			row = &cells[n_rows++ * 7];
			row[0] = end ? "hi" : "lo";
			for (int k = 0; k < 5; k++) {
				double lo, hi;

				summary_interval_of(s, m, v[k], &lo, &hi);
				row[1 + k] = html_cellf(cs, "%.3f", end ? hi : lo);
			}
			row[6] = "";
		}
	}
	html_table(f, &(struct html_table){ .caption = "Latency (ms)", .n_cols = 7,
					    .n_rows = n_rows, .head = head, .cells = cells });
	if (s->interval.entry)
		html_para(f, "lo and hi: the interval on each predicted figure, from the "
			  "leave-one-source-out bounds of %s%s%s (docs/metrics.md \"Intervals\"); queue time has none.",
			  strcmp(s->interval.entry, "prior") && strcmp(s->interval.entry, "none") ?
			  "engine profile " : "the entry ", s->interval.entry,
			  s->interval.widen > 1 ? ", widened for the busy time priced outside the measured grid" : "");
}

static const char *slo_text(struct html_cells *cs, const struct summary *s)
{
	char buf[HTML_CELL] = "";
	size_t at = 0;

	if (s->slo.ttft_ms > 0)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "TTFT <= %g ms", s->slo.ttft_ms);
	if (s->slo.tpot_ms > 0 && at < sizeof(buf))
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%sTPOT <= %g ms", at ? ", " : "",
				       s->slo.tpot_ms);
	if (s->slo.e2e_ms > 0 && at < sizeof(buf))
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%sE2E <= %g ms", at ? ", " : "",
				       s->slo.e2e_ms);
	if (s->slo.tbt_ms > 0 && at < sizeof(buf))
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%severy token gap <= %g ms",
				       at ? ", " : "", s->slo.tbt_ms);
	return html_cellf(cs, "%s", at ? buf : "none set (every completed request counts)");
}

/* The figures under the latency table in summary.txt, one row each. */
static void figures_table(FILE *f, struct html_cells *cs, const struct summary *s,
			  const struct run_info *ri)
{
	const char *kv[2 * 16];
	char m[3][48];               /* the metric catalog's figures */
	int n = 0;

#define KV(k, v) (kv[2 * n] = (k), kv[2 * n + 1] = (v), n++)
	KV("requests", html_cellf(cs, "%" PRIu64 " total, %" PRIu64 " completed, %" PRIu64
			     " rejected, %" PRIu64 " unfinished", s->requests, s->completed,
			     s->rejected, s->unfinished));
	KV("throughput", html_cellf(cs, "%s req/s, %s input tok/s, %s output tok/s over %.3f s",
			       report_metric_text(m[0], sizeof(m[0]), s, METRIC_REQ_S),
			       report_metric_text(m[1], sizeof(m[1]), s, METRIC_IN_TOK_S),
			       report_metric_text(m[2], sizeof(m[2]), s, METRIC_OUT_TOK_S),
			       s->duration_s));
	KV("SLOs", slo_text(cs, s));
	KV("SLO attainment", html_cellf(cs, "%s%% of all requests",
				   report_metric_text(m[0], sizeof(m[0]), s, METRIC_SLO)));
	KV("goodput", html_cellf(cs, "%s req/s, %.4f req/s per GPU",
			    report_metric_text(m[0], sizeof(m[0]), s, METRIC_GOODPUT),
			    s->goodput_rps_per_gpu));
	KV("KV cache", html_cellf(cs, "%" PRId64 " blocks per instance, utilization mean %.1f%%, peak %.1f%%",
			     s->kv_blocks_per_instance, 100.0 * s->kv_util_mean,
			     100.0 * s->kv_util_peak));
	KV("preemptions", html_cellf(cs, "%" PRIu64, s->preemptions));
	if (s->disaggregated)
		KV("KV transfers", html_cellf(cs, "%" PRIu64 ", mean %.3f ms, p50 %.3f, p99 %.3f",
					 s->kv_transfers, s->kv_transfer_ms.mean,
					 s->kv_transfer_ms.p50, s->kv_transfer_ms.p99));
	if (s->cost_usd_per_hour > 0)
		KV("cost", html_cellf(cs, "$%.2f per hour, $%.4f for the run, $%.4f per million output tokens",
				 s->cost_usd_per_hour, s->cost_usd, s->usd_per_million_output_tokens));
	if (s->prefix_cache)
		KV("prefix cache", html_cellf(cs, "hit rate %.1f%% (%" PRIu64 " of %" PRIu64 " prompt tokens)",
					 100.0 * s->prefix_hit_rate, s->prefix_hit_tokens,
					 s->prefix_lookup_tokens));
	if (s->spec)
		KV("speculation", html_cellf(cs, "%s, acceptance %s: %.2f tokens per verify (%.1f%% of "
					 "drafts accepted); drafting %.1f%% of busy time",
					 s->spec->text, s->spec->accept.name,
					 s->spec_acceptance_length, 100.0 * s->spec_accept_rate,
					 100.0 * s->spec_draft_share));
	KV("batch per step", html_cellf(cs, "%.1f seqs, %.0f tokens (mean); %" PRIu64 " steps",
				   s->batch_seqs.mean, s->batch_tokens.mean, s->steps));
	if (run_info_unmetered(ri)) {
		KV("energy", html_cellf(cs, "not metered (%s)", ri->energy_meter));
	} else {
		KV("energy", html_cellf(cs, "%.3f kJ (prefill %.3f, decode %.3f, idle %.3f)%s%s",
				   s->energy_j / 1e3, s->energy_prefill_j / 1e3,
				   s->energy_decode_j / 1e3, s->energy_idle_j / 1e3,
				   ri->energy_meter ? "; metered by " : "",
				   ri->energy_meter ? ri->energy_meter : ""));
		KV("energy per request", html_cellf(cs, "%.3f J/request, %.4f J/output token",
					       s->j_per_request, s->j_per_output_token));
		KV("power per GPU", html_cellf(cs, "%.1f W average, %.1f W peak", s->avg_power_w_per_gpu,
					  s->peak_power_w_per_gpu));
	}
#undef KV
	html_kv(f, "Throughput, SLOs, memory and energy", kv, n);
}

static void tenant_table(FILE *f, struct html_cells *cs, const struct summary *s)
{
	static const char *const head[] = { "tenant", "requests", "TTFT p50 ms", "TTFT p99 ms",
					    "attainment %", "service tok/s" };
	uint32_t nt = s->n_tenants < SUMMARY_MAX_TENANTS ? s->n_tenants : SUMMARY_MAX_TENANTS;
	const char **cells = calloc((size_t)nt * 6, sizeof(*cells));

	if (!cells)
		return;
	for (uint32_t i = 0; i < nt; i++) {
		const struct tenant_summary *ts = &s->tenants[i];
		const char **row = &cells[i * 6];

		row[0] = html_cellf(cs, "%d", ts->tenant);
		row[1] = html_cellf(cs, "%" PRIu64, ts->requests);
		row[2] = html_cellf(cs, "%.3f", ts->ttft_ms.p50);
		row[3] = html_cellf(cs, "%.3f", ts->ttft_ms.p99);
		row[4] = html_cellf(cs, "%.1f", 100.0 * ts->slo_attainment);
		row[5] = html_cellf(cs, "%.1f", ts->service_tokens_per_s);
	}
	html_table(f, &(struct html_table){
		.caption = html_cellf(cs, "Tenants (%u; Jain's fairness of service %.3f)", s->n_tenants,
				 s->fairness_jain),
		.n_cols = 6, .n_rows = (int)nt, .head = head, .cells = cells });
	free(cells);
}

static void scenario_table(FILE *f, struct html_cells *cs, const struct summary *s,
			   const struct run_info *ri)
{
	const char *kv[2 * 20];
	int n = 0;

#define KV(k, v) (kv[2 * n] = (k), kv[2 * n + 1] = (v), n++)
	KV("model", orq(ri->model));
	if (ri->model_run)
		KV("model as run", ri->model_run);
	if (ri->backend)
		KV("backend", ri->backend);
	KV("GPU", html_cellf(cs, "%s, tp %d%s", orq(ri->gpu), ri->tp,
			ri->pp > 1 ? html_cellf(cs, ", pp %d", ri->pp) : ""));
	if (ri->pools)
		KV("pools", ri->pools);
	else
		KV("instances", html_cellf(cs, "%" PRIu32, ri->n_instances));
	KV("GPUs", html_cellf(cs, "%d", s->n_gpus));
	{
		char label[512];

		/* what priced each operator, not only the model's name */
		KV("cost model", html_cellf(cs, "%s", report_cost_label(label, sizeof(label), s, ri)));
	}
	KV("engine", orq(s->engine));
	if (ri->precision)
		KV("precision", ri->precision);
	if (ri->layout)
		KV("layout", ri->layout);
	if (ri->kv_rule)
		KV("KV cache rule", ri->kv_rule);
	KV("workload", orq(ri->workload));
	if (ri->concurrency)
		KV("load", html_cellf(cs, "closed loop, %" PRIu32 " client%s, think time %s",
				 ri->concurrency, ri->concurrency == 1 ? "" : "s",
				 orq(ri->think_time ? ri->think_time : "none")));
	else
		KV("load", "open loop (arrival times of the workload)");
	KV("seed", html_cellf(cs, "%" PRIu64, ri->seed));
	KV("servesim", html_cellf(cs, "%s (%s)", orq(ri->version), orq(ri->mode)));
#undef KV
	html_kv(f, "Scenario", kv, n);
}

static void stack_table(FILE *f, const struct run_info *ri)
{
	static const char *const head[] = { "choice", "setting", "chosen by" };
	const char *cells[3 * REPORT_STACK_MAX];

	if (ri->n_stack == 0)
		return;
	for (int i = 0; i < ri->n_stack; i++) {
		cells[3 * i] = ri->stack[i].label;
		cells[3 * i + 1] = orq(ri->stack[i].spec);
		cells[3 * i + 2] = ri->stack[i].from ? ri->stack[i].from : "command line";
	}
	html_table(f, &(struct html_table){ .caption = "Serving stack", .n_cols = 3,
					    .n_rows = ri->n_stack, .head = head, .cells = cells });
}

/* Every option as given or defaulted (summary.json's "config"). */
static void config_table(FILE *f, json_t *config)
{
	static const char *const head[] = { "option", "value" };
	size_t n = json_object_size(config), i = 0;
	const char **cells = calloc(2 * (n ? n : 1), sizeof(*cells));
	char **owned = calloc(n ? n : 1, sizeof(*owned));
	const char *key;
	json_t *v;

	if (!cells || !owned)
		goto out;
	json_object_foreach(config, key, v) {
		cells[2 * i] = key;
		if (json_is_string(v))
			cells[2 * i + 1] = json_string_value(v);
		else
			cells[2 * i + 1] = owned[i] = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT |
								 JSON_REAL_PRECISION(10));
		i++;
	}
	html_table(f, &(struct html_table){ .caption = "Every option, as given or defaulted",
					    .n_cols = 2, .n_rows = (int)i, .head = head,
					    .cells = cells, .wrap = true });
out:
	for (size_t k = 0; owned && k < i; k++)
		free(owned[k]);
	free(owned);
	free(cells);
}

struct text_ctx {
	const struct summary *s;
	const struct run_info *ri;
};

static void summary_text(FILE *f, const void *ctx)
{
	const struct text_ctx *t = ctx;

	report_summary_text(f, t->s, t->ri);
}

int report_html_write(const char *dir, const struct summary *s, const struct run_info *ri,
		      const struct plot_outcome *po, struct ss_error *err)
{
	/* latency 35, figures and scenario under 40, 6 per tenant and its caption */
	/* cells are formatted into one arena (html_cellf) */
	struct html_cells cs = { .cap = 96 + 6 * SUMMARY_MAX_TENANTS };
	struct ss_file of;
	char title[512], sub[512], note[700];
	const char *pnote = NULL;
	char *text;
	FILE *f;
	int ret;

	cs.c = calloc(cs.cap, HTML_CELL);
	text = html_capture(summary_text, &(struct text_ctx){ s, ri });
	if (!cs.c || !text) {
		ret = ss_error_set(err, -ENOMEM, dir, 0, HTML_REPORT_NAME ": out of memory");
		goto out;
	}
	if (ri->backend)
		/* live: the model ran on the backend; --gpu only sized the KV pool */
		snprintf(title, sizeof(title), "servesim live: %s on %s", orq(ri->model),
			 ri->backend);
	else if (ri->pools)
		snprintf(title, sizeof(title), "servesim %s: %s, %s", strcmp(orq(ri->mode), "live") ?
			 "run" : "live", orq(ri->model), ri->pools);
	else
		snprintf(title, sizeof(title), "servesim %s: %s, %" PRIu32 " instance%s of %d x %s",
			 strcmp(orq(ri->mode), "live") ? "run" : "live", orq(ri->model),
			 ri->n_instances, ri->n_instances == 1 ? "" : "s", ri->tp, orq(ri->gpu));
	{
		char label[512];

		snprintf(sub, sizeof(sub), "%s; policy %s, router %s, cost model %s, engine %s; servesim %s",
			 ri->status ? "failed" : ri->interrupted ? "interrupted" : "complete",
			 orq(ri->policy), orq(ri->router), report_cost_label(label, sizeof(label), s, ri),
			 orq(s->engine), orq(ri->version));
	}
	ret = html_file_open(&of, dir, title, sub, err);
	if (ret < 0)
		goto out;
	f = of.f;
	fputs("<nav><a href=\"#results\">Results</a><a href=\"#plots\">Plots</a>"
	      "<a href=\"#configuration\">Configuration</a><a href=\"#text\">Text summary</a></nav>\n",
	      f);
	if (ri->status)
		html_note(f, "The run failed: %s. The figures cover the requests so far.", ri->status);
	if (ri->interrupted)
		html_note(f, "Interrupted by %s: results so far, %" PRIu64 " of %" PRIu64
			  " requests finished or rejected, %" PRIu64 " unfinished.", ri->interrupted,
			  s->requests - s->unfinished, s->requests, s->unfinished);
	html_heading(f, 2, "Results", "results");
	latency_table(f, &cs, s);
	figures_table(f, &cs, s, ri);
	if (s->n_tenants > 1)
		tenant_table(f, &cs, s);

	if (po->warning.code) {
		snprintf(note, sizeof(note), "%s", po->warning.msg);
		pnote = note;
	} else if (po->skipped) {
		pnote = "gnuplot was not found, so no plots were made (their scripts, .gp, and data, .dat, are in the output directory).";
	} else if (po->n_names == 0) {
		pnote = "No plots: no request has a latency to plot.";
	}
	html_plots(f, dir, po->names, po->n_names, po->skipped, pnote);

	html_heading(f, 2, "Configuration", "configuration");
	if (ri->command_line) {
		html_heading(f, 3, "Command line", NULL);
		html_pre(f, ri->command_line);
	}
	scenario_table(f, &cs, s, ri);
	stack_table(f, ri);
	if (ri->config)
		config_table(f, ri->config);

	html_heading(f, 2, "Text summary", "text");
	html_para(f, "As printed, and as in summary.txt:");
	html_pre(f, text);
	ret = html_file_commit(&of, err);
out:
	free(text);
	free(cs.c);
	return ret;
}
