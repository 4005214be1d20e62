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
#include "router-int.h"

static int lora_router_init(void *priv, struct ss_params *params, uint32_t n_instances,
			    struct ss_error *err)
{
	(void)n_instances;
	return router_balance_init(priv, params, "lora", err);
}

/* 2 in a GPU slot, 1 in host memory, 0 neither, -1 no adapter (or no
 * service). */
static int64_t lora_affinity(const struct policy_host *host, int32_t inst,
			     const struct req_view *req)
{
	return host && host->adapter_resident ? host->adapter_resident(host->ctx, inst, req) : -1;
}

static uint32_t lora_router_route(void *priv, const struct req_view *req,
				  const struct inst_view *const *insts, uint32_t n, int64_t now,
				  const struct policy_host *host)
{
	(void)now;
	return router_balance_route(priv, req, insts, n, host, lora_affinity);
}

const struct router_ops router_lora_ops = {
	.version = POLICY_VERSION,
	.name = "lora",
	.description = "where the request's LoRA adapter is resident (GPU slot, then host memory), "
		       "least outstanding requests when imbalanced",
	.params = "balance_abs=N (32), balance_rel=X (1.5)",
	.priv_size = sizeof(struct router_balance),
	.init = lora_router_init,
	.route = lora_router_route,
};
