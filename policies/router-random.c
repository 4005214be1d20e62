/* random — uniform random routing: each request goes to an instance drawn
 * uniformly from the policies' seeded stream (host->uniform), so runs with
 * the same seed route identically.  The baseline every load-aware router
 * should beat. */
#include <assert.h>

#include "policy.h"

static uint32_t random_route(void *priv, const struct req_view *req,
			     const struct inst_view *const *insts, uint32_t n, int64_t now,
			     const struct policy_host *host)
{
	uint32_t pick;

	(void)priv;
	(void)req;
	(void)insts;
	(void)now;
	assert(n > 0 && host && host->uniform);
	pick = (uint32_t)(host->uniform(host->ctx) * n);
	return pick < n ? pick : n - 1;
}

const struct router_ops router_random_ops = {
	.version = POLICY_VERSION,
	.name = "random",
	.description = "uniform random over instances (seeded)",
	.route = random_route,
};
