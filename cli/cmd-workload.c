/* servesim workload — workload models (docs/workloads.md, "Workload
 * models"): `fit` a trace into a small JSON model that `run --workload`
 * generates from. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "ss-file.h"
#include "workload-model.h"
#include "workload.h"

/* Its options are in cli/options.c. */
const struct cli_command cli_cmd_workload_fit = {
	.name = "workload fit", .id = CLI_WORKLOAD_FIT,
	.operands = "TRACE",
	.usage = "workload fit TRACE [--format NAME] [--out MODEL.json] [--json] [-q | -v]",
	.failure = "failed write",
	.description =
		"Fit a workload model to a trace: the mean arrival rate, the burstiness of the\n"
		"gaps (coefficient of variation; index of dispersion of counts at 1 s to 1 h\n"
		"windows) and a process reproducing them (gamma renewal or two-state MMPP),\n"
		"batches of requests sharing a time stamp, an hourly rate curve when the\n"
		"trace spans 2 h or more, the prompt and output length quantiles and their\n"
		"rank correlation, prefix sharing where the trace has prefix hashes, and LoRA adapter\n"
		"popularity where it has an adapter column.\n"
		"A session trace is fitted as sessions: the process and lengths above are\n"
		"of session starts and first calls, and the model adds turns a session,\n"
		"fan-out, think time and the new and output tokens of later calls.\n"
		"`servesim run --workload MODEL.json` generates requests from it (with --rate\n"
		"or --rate-scale, --prompt-scale, --output-scale).  Prints a summary.\n",
};

static void usage(FILE *f)
{
	fprintf(f, "usage: servesim workload <subcommand> [options]\n\nsubcommands:\n"
		   "  fit        fit a workload model (JSON) to a trace, for run --workload\n"
		   "\nSee `servesim workload fit --help` and docs/workloads.md, \"Workload models\".\n");
}

/* The length at probability p of a model's quantile grid (exact grid
 * points: the summary's percentiles are on it). */
static double at_p(const struct wlmodel *m, const double *q, double p)
{
	for (size_t k = 0; k < m->n_q; k++)
		if (m->q_p[k] >= p - 1e-12)
			return q[k];
	return q[m->n_q - 1];
}

/* The turn count at probability p of m's distribution of turns. */
static double turns_at(const struct wlmodel *m, double p)
{
	double c = 0;

	for (size_t k = 0; k < m->n_turns; k++) {
		c += m->turns_p[k];
		if (c >= p - 1e-9)
			return m->turns_v[k];
	}
	return m->turns_v[m->n_turns - 1];
}

/* What a sessions model adds: its sessions, and the shape of a session. */
static void summary_sessions(FILE *f, const struct wlmodel *m)
{
	double fan = 0;

	for (size_t k = 0; k < m->n_fanout; k++)
		fan += m->fanout_p[k] * m->fanout_v[k];
	fprintf(f, "workload model of %s (%s): %llu sessions, %llu calls over %.6g s; "
		   "%.4g session starts/s\n", m->source, m->format,
		(unsigned long long)m->requests, (unsigned long long)m->calls, m->duration_s,
		m->rate_rps);
	fprintf(f, "turns a session: mean %.3g, p50 %.0f, p90 %.0f, max %.0f; calls a later step: "
		   "mean %.3g (max %.0f)\n", m->turns_mean, turns_at(m, 0.5), turns_at(m, 0.9),
		m->turns_v[m->n_turns - 1], fan, m->fanout_v[m->n_fanout - 1]);
	fprintf(f, "think time before a later step: p50 %.3g s, p90 %.3g s, max %.3g s\n",
		at_p(m, m->q_think_s, 0.5), at_p(m, m->q_think_s, 0.9), m->q_think_s[m->n_q - 1]);
	fprintf(f, "later calls: new tokens p50 %.0f, p90 %.0f, max %.0f; output tokens p50 %.0f, "
		   "p90 %.0f, max %.0f; rank correlation %.3f\n", at_p(m, m->q_new, 0.5),
		at_p(m, m->q_new, 0.9), m->q_new[m->n_q - 1], at_p(m, m->q_out_later, 0.5),
		at_p(m, m->q_out_later, 0.9), m->q_out_later[m->n_q - 1], m->spearman_later);
	fprintf(f, "session starts and first calls:\n");
}

static void summary(FILE *f, const struct wlmodel *m)
{
	if (m->has_sessions)
		summary_sessions(f, m);
	else
		fprintf(f, "workload model of %s (%s): %llu requests over %.6g s\n", m->source,
			m->format, (unsigned long long)m->requests, m->duration_s);
	if (m->n_batch)
		fprintf(f, "arrivals: %.4g req/s in batches of requests with one arrival time, "
			   "%.3g requests a batch on average (%.0f to %.0f); gap cv between batches "
			   "%.3g\n", m->rate_rps, m->batch_mean, m->batch_size[0],
			m->batch_size[m->n_batch - 1], m->gap_cv);
	else
		fprintf(f, "arrivals: %.4g req/s, gap cv %.3g\n", m->rate_rps, m->gap_cv);
	fprintf(f, "index of dispersion of counts:");
	for (size_t k = 0; k < m->n_idc; k++)
		fprintf(f, "%s %.3g at %g s", k ? "," : "", m->idc[k], m->idc_window_s[k]);
	fprintf(f, "%s\n", m->n_idc ? "" : " none (the trace is shorter than 10 s)");
	if (m->process == WLM_MMPP)
		fprintf(f, "process%s: 2-state MMPP, %.4g %s/s for %.4g s, %.4g %s/s for %.4g s (mean)",
			m->n_batch ? " (of batches)" : "", m->mmpp_rps[0], m->n_batch ? "batches" : "req",
			m->mmpp_switch_s[0], m->mmpp_rps[1], m->n_batch ? "batches" : "req",
			m->mmpp_switch_s[1]);
	else
		fprintf(f, "process%s: gamma renewal, cv %.3g", m->n_batch ? " (of batches)" : "",
			m->gap_cv);
	if (m->fit_error[0] > 0 || m->fit_error[1] > 0)
		fprintf(f, "; misfit of generated IDC and cv (lower is better): gamma %.3g, mmpp %.3g",
			m->fit_error[0], m->fit_error[1]);
	fprintf(f, "\n");
	if (m->n_curve) {
		double lo = m->curve_rps[0], hi = lo;

		for (size_t k = 1; k < m->n_curve; k++) {
			lo = m->curve_rps[k] < lo ? m->curve_rps[k] : lo;
			hi = m->curve_rps[k] > hi ? m->curve_rps[k] : hi;
		}
		fprintf(f, "rate curve: %zu bins of %g s, %.4g to %.4g req/s\n", m->n_curve,
			m->curve_bin_s, lo, hi);
	} else {
		fprintf(f, "rate curve: none (the trace spans less than %g h)\n",
			WLM_CURVE_MIN_S / 3600);
	}
	fprintf(f, "prompt tokens: p50 %.0f, p90 %.0f, p99 %.0f, max %.0f\n",
		at_p(m, m->q_prompt, 0.5), at_p(m, m->q_prompt, 0.9), at_p(m, m->q_prompt, 0.99),
		m->q_prompt[m->n_q - 1]);
	fprintf(f, "output tokens: p50 %.0f, p90 %.0f, p99 %.0f, max %.0f\n",
		at_p(m, m->q_output, 0.5), at_p(m, m->q_output, 0.9), at_p(m, m->q_output, 0.99),
		m->q_output[m->n_q - 1]);
	fprintf(f, "prompt-output rank correlation (Spearman): %.3f\n", m->spearman);
	if (m->has_prefix)
		fprintf(f, "prefix sharing: %.1f%% of hashed prompt blocks (%u tokens) continue an "
			   "earlier request's prefix (measured, not generated)\n",
			100 * m->prefix_reused_share, m->prefix_block_tokens);
	if (m->has_adapters)
		fprintf(f, "LoRA adapters: %u named by %.1f%% of requests, the most popular by %.1f%% "
			   "of those, Zipf exponent %.3f by rank (measured, not generated: "
			   "--lora adapters=%u,popularity=zipf:%.3g)\n",
			m->adapters, 100 * (1 - m->adapter_base_share), 100 * m->adapter_top_share,
			m->adapter_zipf_s, m->adapters, m->adapter_zipf_s > 0 ? m->adapter_zipf_s : 1e-3);
}

static int fit(int argc, char **argv)
{
	enum trace_format fmt = TRACE_AUTO;
	const char *out, *trace;
	struct ss_error err = { 0 };
	struct ss_file sf = { 0 };
	struct cli_config cfg;
	struct workload wl;
	struct wlmodel m;
	bool json, quiet;
	char *text = NULL;
	int rc, status = SS_EXIT_FAILURE;

	rc = cli_parse(&cli_cmd_workload_fit, argc, argv, &cfg, true, &err);
	if (rc == CLI_HELP_SHOWN)
		return SS_EXIT_OK;
	if (rc) {
		cli_error(&err);
		return SS_EXIT_USAGE;
	}
	if (cfg.format && trace_format_from_name(cfg.format, &fmt)) {
		cli_errorf("workload fit: --format: unknown format '%s' (see `servesim "
			   "list formats`)", cfg.format);
		return SS_EXIT_USAGE;
	}
	out = cfg.out_file;
	json = cfg.json;
	quiet = cfg.quiet;
	if (cfg.operand0 != argc - 1) {
		cli_errorf("workload fit: expected one TRACE, got %d arguments (see `servesim workload "
			   "fit --help`)", argc - cfg.operand0);
		return SS_EXIT_USAGE;
	}
	trace = argv[cfg.operand0];
	workload_init(&wl);
	wlmodel_init(&m);
	if (trace_read(&wl, trace, fmt, &err) || wlmodel_fit(&m, &wl, &err)) {
		cli_error(&err);
		goto out;
	}
	cli_verbosef("workload fit: read %zu requests from %s (%s)", wl.n, trace,
		     trace_format_name(wl.format));
	text = wlmodel_to_json(&m);
	if (!text) {
		cli_errorf("workload fit: out of memory");
		goto out;
	}
	if (out) {
		if (ss_file_open(&sf, out, 0, &err)) {
			cli_error(&err);
			goto out;
		}
		fputs(text, sf.f);
		fputc('\n', sf.f);
		if (ss_file_commit(&sf, &err)) {
			cli_error(&err);
			goto out;
		}
	}
	if (json)
		printf("%s\n", text);
	else if (!quiet) {
		summary(stdout, &m);
		if (out)
			printf("wrote %s\n", out);
	}
	status = SS_EXIT_OK;
out:
	free(text);
	wlmodel_release(&m);
	workload_release(&wl);
	return status;
}

int cmd_workload(int argc, char **argv)
{
	if (argc < 2) {
		cli_errorf("workload: expected a subcommand: fit (see `servesim workload --help`)");
		return SS_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return SS_EXIT_OK;
	}
	if (!strcmp(argv[1], "fit"))
		return fit(argc - 1, argv + 1);
	cli_errorf("workload: unknown subcommand '%s' (expected fit; see `servesim workload --help`)",
		   argv[1]);
	return SS_EXIT_USAGE;
}
