/* lor — least outstanding requests: the instance with the fewest unfinished
 * requests routed to it (queued or running); ties go to the lowest index,
 * so routing is deterministic.  The classic join-the-shortest-queue
 * balancer (SGLang's cache-aware router falls back to it under imbalance);
 * it ignores request sizes (see "lot" for a token-weighted count). */
#include "policy.h"

static uint32_t lor_route(void *priv, const struct req_view *req,
			  const struct inst_view *const *insts, uint32_t n, int64_t now,
			  const struct policy_host *host)
{
	uint32_t best = 0;

	(void)priv;
	(void)req;
	(void)now;
	(void)host;
	for (uint32_t i = 1; i < n; i++)
		if (insts[i]->outstanding_requests < insts[best]->outstanding_requests)
			best = i;
	return best;
}

const struct router_ops router_lor_ops = {
	.version = POLICY_VERSION,
	.name = "lor",
	.description = "least outstanding requests (queued + running)",
	.route = lor_route,
};
