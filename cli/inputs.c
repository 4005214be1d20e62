/* servesim — checks of what run, live and plan load (cli.h): prices given
 * on the command line, and a slice of a trace compared with the whole.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "cli.h"
#include "options.h"
#include "params.h"
#include "workload.h"

int cli_apply_prices(const struct cli_config *o, struct catalog *cat, struct ss_error *err)
{
	/* the GPUs priced so far and at what: a GPU priced twice is refused,
	 * not the later one silently taken (issue 34 §5) */
	const struct gpu_spec **done = NULL;
	double *at = NULL;
	size_t n_done = 0, cap = 0;
	int rc = 0;

	for (int k = 0; k < o->n_prices && !rc; k++) {
		const char *p = o->prices[k];

		for (;;) {
			size_t len = strcspn(p, ","), name = strcspn(p, "=");
			struct gpu_spec *g = NULL;
			char gpu[64];
			double v;

			/* the parser checked NAME=NUMBER (parse_price) */
			snprintf(gpu, sizeof(gpu), "%.*s", (int)(name < sizeof(gpu) ? name : sizeof(gpu) - 1), p);
			for (size_t i = 0; i < cat->n_gpus && !g; i++)
				if (!strcmp(cat->gpus[i].name, gpu))
					g = &cat->gpus[i];
			if (!g || name >= sizeof(gpu)) {
				rc = ss_error_set(err, -EINVAL, NULL, 0,
						  "--price: unknown GPU '%.*s' (see `servesim list gpus`)",
						  (int)name, p);
				goto out;
			}
			{
				char num[64];

				snprintf(num, sizeof(num), "%.*s", (int)(len - name - 1), p + name + 1);
				if (!ss_parse_double(num, &v)) {
					rc = ss_error_set(err, -EINVAL, NULL, 0,
							  "--price: expected a number for '%s', got '%s'", gpu, num);
					goto out;
				}
			}
			for (size_t i = 0; i < n_done; i++)
				if (done[i] == g) {
					rc = ss_error_set(err, -EINVAL, NULL, 0,
							  "--price: %s given twice (%g and %g); expected one price per GPU",
							  gpu, at[i], v);
					goto out;
				}
			if (n_done == cap) {
				size_t c = cap ? 2 * cap : 8;
				const struct gpu_spec **d = realloc(done, c * sizeof(*d));
				double *a = d ? realloc(at, c * sizeof(*a)) : NULL;

				if (d)
					done = d;
				if (!a) {
					rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
					goto out;
				}
				at = a;
				cap = c;
			}
			done[n_done] = g;
			at[n_done++] = v;
			g->cost_per_hour = v;
			if (!p[len])
				break;
			p += len + 1;
		}
	}
out:
	free(done);
	free(at);
	return rc;
}

bool cli_slice_check(const struct cli_config *o, const struct workload *wl, bool quiet,
		     struct wl_slice *s)
{
	char what[1024];

	if (!workload_slice_compare(wl, s))
		return false;
	if (s->any && !quiet) {
		workload_slice_text(s, what, sizeof(what));
		cli_errorf("warning: %s keeps %zu of the %zu requests of %s, and they differ from the whole trace (slice vs whole, beyond %.0f%% for the rate, %.0f%% for a length percentile): %s%s",
			   o->num_requests && o->duration_ns ? "--num-requests with --duration" :
			   o->num_requests ? "--num-requests" : "--duration",
			   s->n[0], s->n[1], wl->source, 100 * WL_SLICE_RATE_TOL, 100 * WL_SLICE_LEN_TOL,
			   what, o->cmd == CLI_PLAN ? "; --verify N re-runs the best on the whole trace" : "");
	}
	return true;
}

int cli_context_apply(const struct cli_config *o, int32_t context, struct workload *wl,
		      struct wl_context *c, struct ss_error *err)
{
	bool truncate = o->overlong == 1;

	if (truncate && wl->sess)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--overlong truncate with a session workload: not modelled (a call's prompt grows with its history as the run goes)");
	workload_context_check(wl, context, truncate, c);
	return 0;
}

bool cli_context_text(const struct cli_config *o, const char *model, const struct wl_context *c,
		      double target, char *buf, size_t len)
{
	double share = c->requests ? (double)c->over / (double)c->requests : 0.0;
	char whose[160], alone[96] = "", miss[64] = "";

	if (!c->over)
		return false;
	if (o->max_context)
		snprintf(whose, sizeof(whose), "the %d-token --max-context", (int)c->context);
	else
		snprintf(whose, sizeof(whose), "%s's %d-token context", model, (int)c->context);
	if (c->prompt_over)
		snprintf(alone, sizeof(alone), "; %zu by their prompt alone", c->prompt_over);
	if (c->truncated) {
		snprintf(buf, len, "note: %zu of %zu requests (%.1f%%) exceed %s (prompt + output%s, by up to %" PRId64
			 " tokens): --overlong truncate cut their prompts to fit, keeping their last tokens (docs/workloads.md)",
			 c->over, c->requests, 100 * share, whose, alone, c->max_excess);
		return true;
	}
	if (target > 1 - share)
		snprintf(miss, sizeof(miss), "; --target %g%% cannot be met", 100 * target);
	snprintf(buf, len, "note: %zu of %zu requests (%.1f%%) exceed %s (prompt + output%s, by up to %" PRId64
		 " tokens): they are refused, so at most %.1f%% attainment is reachable%s "
		 "(--max-context N raises the context; --overlong truncate serves them cut to fit)",
		 c->over, c->requests, 100 * share, whose, alone, c->max_excess, 100 * (1 - share), miss);
	return true;
}

void cli_context_note(const struct cli_config *o, const char *model, const struct wl_context *c,
		      double target)
{
	char text[1024];

	if (!o->quiet && cli_context_text(o, model, c, target, text, sizeof(text)))
		cli_errorf("%s", text);
}

void cli_source_model_note(const struct cli_config *o, const struct catalog *cat,
			   const struct workload *wl, const struct model_spec *model)
{
	char hint[256];
	const struct model_spec *sm;

	if (o->quiet || !wl->source_model[0])
		return;
	sm = catalog_model_find(cat, wl->source_model, hint, sizeof(hint));
	if (sm != model)
		cli_errorf("note: %s was measured with %s%s%s; this %s simulates %s (--model)",
			   wl->source, wl->source_model, sm ? ", servesim's " : "", sm ? sm->name : "",
			   o->cmd == CLI_PLAN ? "plan" : "run", model->name);
}

size_t cli_effect_notes(const struct cli_config *o, const struct workload *wl, int predictions_used,
			char (*out)[CLI_NOTE_LEN], size_t max)
{
	size_t n = 0;
	bool prio = false;

	for (size_t i = 0; i < wl->n && !prio; i++)
		prio = wl->req[i].priority != 0;
	if (n < max && o->order && !strncmp(o->order, "priority", 8) && !prio)
		snprintf(out[n++], CLI_NOTE_LEN,
			 "note: --order %s: no request of %s has a priority (all are 0), so the queue is first come, first served",
			 o->order, wl->source);
	if (n < max && o->prefix_cache && strcmp(o->prefix_cache, "off") && !o->kv_offload &&
	    wl->n_hashes == 0 && !wl->sess)
		snprintf(out[n++], CLI_NOTE_LEN,
			 "note: --prefix-cache %s: %s has no prefix content (no hash ids, prefix ids or sessions), so no request can share a cached block",
			 o->prefix_cache, wl->source);
	if (n < max && predictions_used == 0 && o->predictor && strcmp(o->predictor, "none"))
		snprintf(out[n++], CLI_NOTE_LEN,
			 "note: --predictor %s: neither the queue order nor the batch policy reads predicted output lengths, so it has no effect (--order sjf, --policy vllm:admission=no_evict read them)",
			 o->predictor);
	return n;
}
