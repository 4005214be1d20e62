/* servesim — requests longer than the model's context (workload.h).
 *
 * A request whose prompt and output together exceed the context a
 * deployment serves can never complete there: a real engine refuses it
 * (vLLM answers 400 "maximum context length"), or, asked to, truncates its
 * prompt.  How many such requests a workload holds bounds the attainment
 * any deployment of that model can reach, whatever its size, so run, sweep
 * and plan say it before they simulate (docs/workloads.md, "Requests longer
 * than the context").
 *
 * Truncation follows vLLM's truncate_prompt_tokens and TGI's truncate: the
 * prompt keeps its last tokens, so much that prompt + output fits; the
 * output, what the client asked for and measured, is kept, and cut to the
 * context less one prompt token only when it alone does not fit.  A
 * prompt cut at its start shares no prefix block with any other request
 * any more (every block's content shifts), so its prefix hashes are
 * dropped.
 */
#include "workload.h"

void workload_context_check(struct workload *wl, int32_t context, bool truncate,
			    struct wl_context *c)
{
	*c = (struct wl_context){ .context = context, .requests = wl->n };
	if (context < 2)
		return;
	for (size_t i = 0; i < wl->n; i++) {
		struct wl_request *q = &wl->req[i];
		int64_t total = (int64_t)q->prompt_tokens + q->output_tokens;

		if (total <= context)
			continue;
		c->over++;
		if (q->prompt_tokens >= context)
			c->prompt_over++;
		if (total - context > c->max_excess)
			c->max_excess = total - context;
		if (!truncate)
			continue;
		if (q->output_tokens >= context)
			q->output_tokens = context - 1;
		q->prompt_tokens = context - q->output_tokens;
		q->prefix_n = 0;
		c->truncated++;
	}
}
