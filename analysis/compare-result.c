/* servesim — a measured serving benchmark result as the reference side of
 * `servesim compare RESULT SIM_DIR` (docs/compare.md): its served requests in
 * the order a replay of it (`run --trace RESULT`) numbers them, with their
 * measured TTFT, TPOT and E2E, and a summary holding the ITL percentiles and
 * throughput computed from the result. */
#include "compare.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "serving.h"

struct order {
	int64_t t;      /* issue_ns */
	size_t i;       /* index in the result */
};

/* Stable by issue time, as trace_read sorts a replay. */
static int by_issue(const void *a, const void *b)
{
	const struct order *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static double ms(int64_t ns)
{
	return ns == SERVING_NONE ? NAN : (double)ns / 1e6;
}

int run_data_load_result(struct run_data *rd, const char *path, struct ss_error *err)
{
	struct serving_set set;
	const struct serving_run *r;
	struct serving_stats stats;
	struct order *ord = NULL;
	size_t n = 0;
	bool timed = true;
	int rc;

	run_data_release(rd);
	snprintf(rd->dir, sizeof(rd->dir), "%s", path);
	snprintf(rd->mode, sizeof(rd->mode), "measured");
	serving_set_init(&set);
	rc = serving_read(&set, path, SERVING_AUTO, err);
	if (rc)
		return rc;
	if (set.n != 1) {
		rc = ss_error_set(err, -EINVAL, path, set.run[1].line,
				  "%zu benchmark results in one file (expected one run with per-request records)",
				  set.n);
		goto out;
	}
	if (set.run[0].n_req == 0) {
		rc = ss_error_set(err, -EINVAL, path, set.run[0].line,
				  "no per-request records (expected a result with per-request data to compare)");
		goto out;
	}
	r = &set.run[0];
	ord = malloc(r->n_req * sizeof(*ord));
	if (!ord) {
		rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < r->n_req; i++) {
		if (!r->req[i].ok)
			continue;
		if (r->req[i].issue_ns == SERVING_NONE)
			timed = false;
		ord[n++] = (struct order){ r->req[i].issue_ns, i };
	}
	if (timed)
		qsort(ord, n, sizeof(*ord), by_issue);
	rd->n = n;
	rd->prompt = malloc((n ? n : 1) * sizeof(*rd->prompt));
	rd->output = malloc((n ? n : 1) * sizeof(*rd->output));
	rd->finished = malloc((n ? n : 1) * sizeof(*rd->finished));
	rd->ttft_ms = malloc((n ? n : 1) * sizeof(*rd->ttft_ms));
	rd->tpot_ms = malloc((n ? n : 1) * sizeof(*rd->tpot_ms));
	rd->e2e_ms = malloc((n ? n : 1) * sizeof(*rd->e2e_ms));
	if (!rd->prompt || !rd->output || !rd->finished || !rd->ttft_ms || !rd->tpot_ms ||
	    !rd->e2e_ms || serving_run_stats(r, &stats)) {
		rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		const struct serving_request *q = &r->req[ord[k].i];

		rd->prompt[k] = q->prompt_tokens;
		rd->output[k] = q->output_tokens;
		rd->finished[k] = true;
		rd->ttft_ms[k] = ms(q->ttft_ns);
		rd->tpot_ms[k] = q->output_tokens > 1 ? ms(q->tpot_ns) : NAN;
		rd->e2e_ms[k] = ms(q->e2e_ns);
	}
	/* the figures compare reads of a summary, at the catalog's places;
	 * NaN (none measured): absent */
	const struct { enum metric_id id; double v; } figs[] = {
		{ METRIC_ITL_P50, stats.itl_ms[SERVING_P50] },
		{ METRIC_ITL_P90, stats.itl_ms[SERVING_P90] },
		{ METRIC_ITL_P99, stats.itl_ms[SERVING_P99] },
		{ METRIC_REQ_S, stats.requests_per_s },
		{ METRIC_OUT_TOK_S, stats.output_tokens_per_s },
	};
	rd->summary = json_object();
	rc = rd->summary ? 0 : -ENOMEM;
	for (size_t i = 0; i < sizeof(figs) / sizeof(figs[0]) && rc == 0; i++)
		if (!isnan(figs[i].v))
			rc = metric_json_set(rd->summary, figs[i].id, json_real(figs[i].v));
	if (rc)
		rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
out:
	free(ord);
	serving_set_release(&set);
	if (rc)
		run_data_release(rd);
	return rc;
}
