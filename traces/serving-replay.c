/* servesim — a per-request serving result as a workload: `run --trace RESULT`
 * replays its requests at their recorded send times with their recorded
 * lengths (readers.c registers one trace reader per format that calls
 * serving_to_workload), and the engine fitting replays a run it holds in
 * memory (serving_run_workload). */
#include "workload-int.h"
#include "serving-int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Append r's served requests to wl (empty) in the run's order; whether they
 * all have send times goes to *timed.  Failed requests are left out. */
static int append_requests(struct workload *wl, const struct serving_run *r, const char *path,
			   bool *timed, struct ss_error *err)
{
	*timed = true;
	for (size_t i = 0; i < r->n_req; i++)
		if (r->req[i].ok && r->req[i].issue_ns == SERVING_NONE)
			*timed = false;
	for (size_t i = 0; i < r->n_req; i++) {
		const struct serving_request *q = &r->req[i];
		struct wl_request *w;

		if (!q->ok)
			continue;       /* the engine never served it */
		if (q->prompt_tokens < 1 || q->output_tokens < 1)
			return ss_error_set(err, -EINVAL, path, r->line,
					    "request %zu: prompt of %d and output of %d tokens (expected both >= 1 to replay)",
					    i, q->prompt_tokens, q->output_tokens);
		if (wl->n >= WL_MAX_REQUESTS)
			return ss_error_set(err, -E2BIG, path, r->line,
					    "more than %u requests", WL_MAX_REQUESTS);
		w = wl_append(wl);
		if (!w)
			return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
		w->arrival_ns = *timed ? q->issue_ns : 0;
		w->prompt_tokens = q->prompt_tokens;
		w->output_tokens = q->output_tokens;
	}
	if (r->n_req == 0)
		return ss_error_set(err, -EINVAL, path, r->line,
				    "no per-request records (expected input_lens, output_lens and ttfts: "
				    "save the result with per-request detail)");
	if (wl->n == 0)
		return ss_error_set(err, -EINVAL, path, r->line,
				    "all %zu requests failed (expected at least one that was served)",
				    r->n_req);
	wl->has_arrivals = *timed;
	wl->closed_loop_clients = r->load == SERVING_LOAD_CLOSED && r->concurrency > 0
				  ? (uint32_t)r->concurrency : 0;
	wl->source_rate = isnan(r->request_rate) ? 0 : r->request_rate;
	wl->failed_skipped = r->n_failed;
	snprintf(wl->source_model, sizeof(wl->source_model), "%s", r->model);
	return 0;
}

struct idx {
	int64_t t;
	size_t i;
};

static int by_time(const void *a, const void *b)
{
	const struct idx *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

int serving_run_workload(struct workload *wl, const struct serving_run *r,
			 struct ss_error *err)
{
	struct wl_request *sorted = NULL;
	struct idx *ix = NULL;
	bool timed;
	int rc;

	rc = append_requests(wl, r, r->label, &timed, err);
	if (rc || !timed)
		goto out;
	/* the trace contract: stable by arrival, the first at 0 (send times
	 * are already relative to the earliest request, which may have failed) */
	ix = malloc(wl->n * sizeof(*ix));
	sorted = malloc(wl->n * sizeof(*sorted));
	if (!ix || !sorted) {
		rc = ss_error_set(err, -ENOMEM, r->label, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < wl->n; i++)
		ix[i] = (struct idx){ wl->req[i].arrival_ns, i };
	qsort(ix, wl->n, sizeof(*ix), by_time);
	for (size_t i = 0; i < wl->n; i++) {
		sorted[i] = wl->req[ix[i].i];
		sorted[i].arrival_ns -= ix[0].t;
	}
	for (size_t i = 0; i < wl->n; i++)
		wl->req[i] = sorted[i];
out:
	free(ix);
	free(sorted);
	if (rc) {
		workload_release(wl);
		return rc;
	}
	switch (r->format) {
	case SERVING_BENCH: wl->format = TRACE_BENCH; break;
	case SERVING_LLMD: wl->format = TRACE_LLMD; break;
	case SERVING_DISTSERVE: wl->format = TRACE_DISTSERVE; break;
	case SERVING_LLMSERVINGSIM: wl->format = TRACE_LLMSERVINGSIM; break;
	default: wl->format = TRACE_AUTO; break;
	}
	snprintf(wl->source, sizeof(wl->source), "%s", r->label);
	return 0;
}

int serving_to_workload(struct workload *wl, FILE *f, const char *path,
			enum serving_format fmt, struct ss_error *err)
{
	struct serving_set set;
	bool timed;
	int rc;

	serving_set_init(&set);
	rc = serving_read_stream(&set, f, path, fmt, err);
	if (rc)
		return rc;
	if (set.n != 1)
		rc = ss_error_set(err, -EINVAL, path, set.run[1].line,
				  "%zu benchmark results in one file (expected one to replay; keep one line, e.g. sed -n %ldp)",
				  set.n, set.run[0].line);
	else
		rc = append_requests(wl, &set.run[0], path, &timed, err);
	serving_set_release(&set);
	return rc;
}
