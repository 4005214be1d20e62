/* servesim — what the affinity routers share (prefix, lora): an affinity
 * per instance, bounded by load balance, after SGLang's cache-aware router.
 *
 * The system is imbalanced when, over all instances, the most and the least
 * outstanding requests differ by more than balance_abs AND the most exceeds
 * balance_rel times the least; then a request goes to the least loaded
 * instance (fewest outstanding requests, lowest index on ties).  Otherwise
 * it goes to the instance of the highest affinity (ties to the less
 * loaded, then the lower index), or to the least loaded when no affinity
 * is above 0.
 */
#ifndef SS_ROUTER_INT_H
#define SS_ROUTER_INT_H

#include <errno.h>
#include <math.h>

#include "policy.h"

struct router_balance {
	int64_t balance_abs;       /* requests, >= 0 */
	double balance_rel;        /* ratio, >= 1 */
};

/* balance_abs=N (default 32) and balance_rel=X (default 1.5) of router
 * `name`'s parameters; -EINVAL naming the router when out of range. */
static inline int router_balance_init(struct router_balance *b, struct ss_params *params,
				      const char *name, struct ss_error *err)
{
	int rc = ss_params_int(params, "balance_abs", 32, &b->balance_abs, err);

	if (!rc)
		rc = ss_params_double(params, "balance_rel", 1.5, &b->balance_rel, err);
	if (rc)
		return rc;
	if (b->balance_abs < 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--router %s: expected balance_abs >= 0 (requests), got %lld",
				    name, (long long)b->balance_abs);
	if (!isfinite(b->balance_rel) || b->balance_rel < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--router %s: expected balance_rel >= 1, got %g", name,
				    b->balance_rel);
	return 0;
}

/* The instance for req: affinity(host, inst id, req) per instance, as above. */
typedef int64_t (*router_affinity_fn)(const struct policy_host *host, int32_t inst,
				       const struct req_view *req);

static inline uint32_t router_balance_route(const struct router_balance *b,
					    const struct req_view *req,
					    const struct inst_view *const *insts, uint32_t n,
					    const struct policy_host *host,
					    router_affinity_fn affinity)
{
	uint32_t least = 0, best = 0;
	uint32_t min_load, max_load = 0;
	int64_t best_aff = INT64_MIN;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t load = insts[i]->outstanding_requests;
		int64_t aff = affinity(host, insts[i]->id, req);

		if (load < insts[least]->outstanding_requests)
			least = i;
		if (load > max_load)
			max_load = load;
		if (aff > best_aff ||
		    (aff == best_aff && load < insts[best]->outstanding_requests)) {
			best_aff = aff;
			best = i;
		}
	}
	min_load = insts[least]->outstanding_requests;
	if ((int64_t)max_load - min_load > b->balance_abs &&
	    (double)max_load > b->balance_rel * min_load)
		return least;
	return best_aff > 0 ? best : least;
}

#endif
