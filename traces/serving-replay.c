/* servesim — a per-request serving result as a trace: `run --trace RESULT`
 * replays its requests at their recorded issue times with their recorded
 * lengths (readers.c registers one trace reader per format that calls
 * serving_to_workload). */
#include "workload-int.h"
#include "serving-int.h"

#include <errno.h>
#include <math.h>

int serving_to_workload(struct workload *wl, FILE *f, const char *path,
			enum serving_format fmt, struct ss_error *err)
{
	struct serving_set set;
	const struct serving_run *r;
	bool timed = true;
	int rc;

	serving_set_init(&set);
	rc = serving_read_stream(&set, f, path, fmt, err);
	if (rc)
		return rc;
	if (set.n != 1) {
		rc = ss_error_set(err, -EINVAL, path, set.run[1].line,
				  "%zu benchmark results in one file (expected one to replay; keep one line, e.g. sed -n %ldp)",
				  set.n, set.run[0].line);
		goto out;
	}
	r = &set.run[0];
	if (r->n_req == 0) {
		rc = ss_error_set(err, -EINVAL, path, r->line,
				  "no per-request records (expected input_lens, output_lens and ttfts: "
				  "save the result with per-request detail)");
		goto out;
	}
	for (size_t i = 0; i < r->n_req; i++)
		if (r->req[i].ok && r->req[i].issue_ns == SERVING_NONE)
			timed = false;
	for (size_t i = 0; i < r->n_req; i++) {
		const struct serving_request *q = &r->req[i];
		struct wl_request *w;

		if (!q->ok)
			continue;       /* the engine never served it */
		if (q->prompt_tokens < 1 || q->output_tokens < 1) {
			rc = ss_error_set(err, -EINVAL, path, r->line,
					  "request %zu: prompt of %d and output of %d tokens (expected both >= 1 to replay)",
					  i, q->prompt_tokens, q->output_tokens);
			goto out;
		}
		w = wl_append(wl);
		if (!w) {
			rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
			goto out;
		}
		w->arrival_ns = timed ? q->issue_ns : 0;
		w->prompt_tokens = q->prompt_tokens;
		w->output_tokens = q->output_tokens;
	}
	if (wl->n == 0) {
		rc = ss_error_set(err, -EINVAL, path, r->line,
				  "all %zu requests failed (expected at least one that was served)", r->n_req);
		goto out;
	}
	wl->has_arrivals = timed;
	wl->closed_loop_clients = r->load == SERVING_LOAD_CLOSED && r->concurrency > 0
				  ? (uint32_t)r->concurrency : 0;
	wl->source_rate = isnan(r->request_rate) ? 0 : r->request_rate;
	wl->failed_skipped = r->n_failed;
out:
	serving_set_release(&set);
	return rc;
}
