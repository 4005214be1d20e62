/* lora — adapter affinity bounded by load balance (multi-LoRA serving,
 * docs/lora.md), built as the prefix router is.
 *
 * The system is imbalanced when, over all instances, the most and the least
 * outstanding requests differ by more than balance_abs AND the most exceeds
 * balance_rel times the least; then the request goes to the least loaded
 * instance (fewest outstanding requests, lowest index on ties).  Otherwise
 * it goes where its adapter is resident: an instance holding it in a GPU
 * slot first, then one holding it in host memory (a PCIe copy away, not a
 * storage read), the less loaded among equals, then the lower index; or to
 * the least loaded instance when none holds it, or when the request names
 * no adapter (the base model).
 *
 * Parameters:
 *   balance_abs=N   absolute threshold, requests, N >= 0 (default 32)
 *   balance_rel=X   relative threshold, X >= 1 (default 1.5)
 *
 * Decision: residency, not the running set alone: an adapter whose
 * requests just finished still sits in its slot (LRU), and that is what
 * saves the load.  The engine answers from each instance's real caches
 * (policy_host.adapter_resident), as a router that tracks where it sent
 * each adapter would know them.  Without adapters (no --lora) every answer
 * is -1 and this is "lor".
 */
#include <errno.h>
#include <math.h>

#include "policy.h"

struct lora_router {
	int64_t balance_abs;       /* requests, >= 0 */
	double balance_rel;        /* ratio, >= 1 */
};

static int lora_router_init(void *priv, struct ss_params *params, uint32_t n_instances,
			    struct ss_error *err)
{
	struct lora_router *p = priv;
	int rc;

	(void)n_instances;
	rc = ss_params_int(params, "balance_abs", 32, &p->balance_abs, err);
	if (!rc)
		rc = ss_params_double(params, "balance_rel", 1.5, &p->balance_rel, err);
	if (rc)
		return rc;
	if (p->balance_abs < 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--router lora: expected balance_abs >= 0 (requests), got %lld",
				    (long long)p->balance_abs);
	if (!isfinite(p->balance_rel) || p->balance_rel < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--router lora: expected balance_rel >= 1, got %g",
				    p->balance_rel);
	return 0;
}

static uint32_t lora_router_route(void *priv, const struct req_view *req,
				  const struct inst_view *const *insts, uint32_t n, int64_t now,
				  const struct policy_host *host)
{
	const struct lora_router *p = priv;
	uint32_t least = 0, best = 0;
	uint32_t min_load, max_load = 0;
	int best_res = -1;

	(void)now;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t load = insts[i]->outstanding_requests;
		int res = host && host->adapter_resident ?
			  host->adapter_resident(host->ctx, insts[i]->id, req) : -1;

		if (load < insts[least]->outstanding_requests)
			least = i;
		if (load > max_load)
			max_load = load;
		if (res > best_res ||
		    (res == best_res && load < insts[best]->outstanding_requests)) {
			best_res = res;
			best = i;
		}
	}
	min_load = insts[least]->outstanding_requests;
	if ((int64_t)max_load - min_load > p->balance_abs &&
	    (double)max_load > p->balance_rel * min_load)
		return least;
	return best_res > 0 ? best : least;
}

const struct router_ops router_lora_ops = {
	.version = POLICY_VERSION,
	.name = "lora",
	.description = "where the request's LoRA adapter is resident (GPU slot, then host memory), "
		       "least outstanding requests when imbalanced",
	.params = "balance_abs=N (32), balance_rel=X (1.5)",
	.priv_size = sizeof(struct lora_router),
	.init = lora_router_init,
	.route = lora_router_route,
};
