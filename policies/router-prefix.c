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
#include <errno.h>
#include <math.h>

#include "policy.h"

struct prefix {
	int64_t balance_abs;       /* requests, >= 0 */
	double balance_rel;        /* ratio, >= 1 */
};

static int prefix_init(void *priv, struct ss_params *params, uint32_t n_instances,
		       struct ss_error *err)
{
	struct prefix *p = priv;
	int rc;

	(void)n_instances;
	rc = ss_params_int(params, "balance_abs", 32, &p->balance_abs, err);
	if (!rc)
		rc = ss_params_double(params, "balance_rel", 1.5, &p->balance_rel, err);
	if (rc)
		return rc;
	if (p->balance_abs < 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--router prefix: expected balance_abs >= 0 (requests), got %lld",
				    (long long)p->balance_abs);
	if (!isfinite(p->balance_rel) || p->balance_rel < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--router prefix: expected balance_rel >= 1, got %g",
				    p->balance_rel);
	return 0;
}

static uint32_t prefix_route(void *priv, const struct req_view *req,
			     const struct inst_view *const *insts, uint32_t n, int64_t now,
			     const struct policy_host *host)
{
	const struct prefix *p = priv;
	uint32_t least = 0, best = 0;
	uint32_t min_load, max_load = 0;
	int32_t best_hit = -1;

	(void)now;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t load = insts[i]->outstanding_requests;
		int32_t hit = host && host->prefix_hit ? host->prefix_hit(host->ctx, insts[i]->id, req)
						       : 0;

		if (load < insts[least]->outstanding_requests)
			least = i;
		if (load > max_load)
			max_load = load;
		if (hit > best_hit ||
		    (hit == best_hit && load < insts[best]->outstanding_requests)) {
			best_hit = hit;
			best = i;
		}
	}
	min_load = insts[least]->outstanding_requests;
	if ((int64_t)max_load - min_load > p->balance_abs &&
	    (double)max_load > p->balance_rel * min_load)
		return least;
	return best_hit > 0 ? best : least;
}

const struct router_ops router_prefix_ops = {
	.version = POLICY_VERSION,
	.name = "prefix",
	.description = "longest cached prefix, least outstanding requests when imbalanced (SGLang cache-aware)",
	.params = "balance_abs=N (32), balance_rel=X (1.5)",
	.priv_size = sizeof(struct prefix),
	.init = prefix_init,
	.route = prefix_route,
};
