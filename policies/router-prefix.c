/* prefix — prefix-cache affinity bounded by load balance, after SGLang's
 * cache-aware router (sgl-router, policy cache_aware).
 *
 * The system is imbalanced when, over all instances, the most and the least
 * outstanding requests differ by more than balance_abs AND the most exceeds
 * balance_rel times the least; then the request goes to the least loaded
 * instance (fewest outstanding requests, lowest index on ties), as SGLang
 * does.  Otherwise it goes to the instance whose prefix cache holds the
 * longest prefix of its prompt (host->prefix_hit; ties to the less loaded,
 * then the lower index), or to the least loaded instance when no instance
 * holds any of it.
 *
 * Parameters:
 *   balance_abs=N   absolute threshold, requests, N >= 0 (default 32)
 *   balance_rel=X   relative threshold, X >= 1 (default 1.5)
 *
 * Simplifications: SGLang matches prompts against an approximate radix
 * tree per worker kept by the router; here the engine answers from each
 * instance's real prefix cache (exact, and evictions are seen at once).
 * SGLang also requires the match to cover cache_threshold of the prompt
 * and otherwise picks the worker with the smallest tree; here any hit
 * counts and no hit means least loaded.  Without host->prefix_hit (or with
 * prefix caching off) every hit is 0 and this is "lor".
 */
#include "router-int.h"

static int prefix_init(void *priv, struct ss_params *params, uint32_t n_instances,
		       struct ss_error *err)
{
	(void)n_instances;
	return router_balance_init(priv, params, "prefix", err);
}

/* The prompt tokens inst's prefix cache holds (0 without the service). */
static int64_t prefix_affinity(const struct policy_host *host, int32_t inst,
			       const struct req_view *req)
{
	return host && host->prefix_hit ? host->prefix_hit(host->ctx, inst, req) : 0;
}

static uint32_t prefix_route(void *priv, const struct req_view *req,
			     const struct inst_view *const *insts, uint32_t n, int64_t now,
			     const struct policy_host *host)
{
	(void)now;
	return router_balance_route(priv, req, insts, n, host, prefix_affinity);
}

const struct router_ops router_prefix_ops = {
	.version = POLICY_VERSION,
	.name = "prefix",
	.description = "longest cached prefix, least outstanding requests when imbalanced (SGLang cache-aware)",
	.params = "balance_abs=N (32), balance_rel=X (1.5)",
	.priv_size = sizeof(struct router_balance),
	.init = prefix_init,
	.route = prefix_route,
};
