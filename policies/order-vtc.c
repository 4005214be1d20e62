/* vtc — the Virtual Token Counter fair scheduler (Sheng et al., "Fairness in
 * Serving Large Language Models", OSDI'24).
 *
 * Each tenant has a counter of the service it has received: every step
 * charges it wp per prompt token and wq per output token of its requests
 * (the paper's linear cost, w_p = 1, w_q = 2 by default).  The waiting queue
 * is ordered by the tenant's counter, so the least-served tenant's requests
 * go first, FCFS within a tenant (the engine breaks ties by arrival).
 *
 * Counter lift: when a request arrives from a tenant with nothing queued or
 * running on this instance, its counter is raised to the smallest counter
 * among the tenants that do have work here, so a tenant cannot bank credit
 * while idle.  When no tenant has work, it is raised to the counter of the
 * tenant charged last (the paper lifts to "the last client to leave";
 * the tenant served by the last step before the instance emptied is that
 * client, up to ties within that step).
 *
 * Parameters:
 *   wp=X   cost per prompt token, X >= 0 (default 1)
 *   wq=X   cost per output token, X >= 0 (default 2); wp + wq > 0
 *
 * Simplifications: the paper's "active" set is the waiting queue; here a
 * tenant is active while it has a request queued or running, so a tenant
 * whose requests are all decoding is not lifted again.  Counters are per
 * serving instance (the paper has one server; fairness across a cluster
 * also depends on the router).  Prefill is charged as it is computed (per
 * chunk with chunked prefill) rather than whole at admission; the totals
 * are the same.  No per-tenant weights and no profiled cost function.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>

#include "policy.h"

/* The framework gives a fixed priv_size, so counters live in a fixed array. */
#define VTC_MAX_TENANTS 4096

struct vtc {
	double wp, wq;             /* cost per prompt / output token */
	int32_t last;              /* tenant charged last, -1 before any charge */
	uint32_t n_tenants;
	double counter[VTC_MAX_TENANTS];  /* service received, in cost units */
};

static int vtc_init(void *priv, struct ss_params *params, uint32_t n_tenants,
		    struct ss_error *err)
{
	struct vtc *p = priv;
	int rc;

	rc = ss_params_double(params, "wp", 1.0, &p->wp, err);
	if (!rc)
		rc = ss_params_double(params, "wq", 2.0, &p->wq, err);
	if (rc)
		return rc;
	if (!isfinite(p->wp) || !isfinite(p->wq) || p->wp < 0 || p->wq < 0 ||
	    p->wp + p->wq <= 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--order vtc: expected wp >= 0 and wq >= 0, not both 0, got wp=%g wq=%g",
				    p->wp, p->wq);
	if (n_tenants > VTC_MAX_TENANTS)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--order vtc: at most %d tenants supported, the workload has %u",
				    VTC_MAX_TENANTS, n_tenants);
	p->last = -1;
	p->n_tenants = n_tenants;
	return 0;
}

static inline bool tenant_ok(int32_t t)
{
	return t >= 0 && t < VTC_MAX_TENANTS;
}

static double vtc_key(const void *priv, const struct req_view *req, int64_t now)
{
	const struct vtc *p = priv;

	(void)now;
	assert(tenant_ok(req->tenant));
	return p->counter[req->tenant];
}

/* O(tenants): inst->tenant_active says which tenants have work here. */
static void vtc_enqueued(void *priv, const struct req_view *req, const struct inst_view *inst)
{
	struct vtc *p = priv;
	int32_t u = req->tenant;
	double min = 0, lift;
	bool found = false;

	assert(tenant_ok(u) && (uint32_t)u < p->n_tenants);
	if (inst->tenant_active[u] > 0)
		return;         /* already active: no lift */
	for (uint32_t t = 0; t < p->n_tenants; t++)
		if (inst->tenant_active[t] > 0 && (!found || p->counter[t] < min)) {
			min = p->counter[t];
			found = true;
		}
	if (found)
		lift = min;
	else if (p->last >= 0)
		lift = p->counter[p->last];
	else
		return;
	if (p->counter[u] < lift)
		p->counter[u] = lift;
}

static void vtc_served(void *priv, const struct req_view *req, int32_t prefill, int32_t decode)
{
	struct vtc *p = priv;

	assert(tenant_ok(req->tenant));
	p->counter[req->tenant] += p->wp * prefill + p->wq * decode;
	p->last = req->tenant;
}

/* The key is the tenant's counter, which only enqueued() (the lift) and
 * served() change, each for the passed request's tenant. */
static bool vtc_key_tenant(const void *priv)
{
	(void)priv;
	return true;
}

const struct order_ops order_vtc_ops = {
	.version = POLICY_VERSION,
	.name = "vtc",
	.description = "Virtual Token Counter fairness: least-served tenant first (Sheng et al., OSDI'24)",
	.params = "wp=X (1, per prompt token), wq=X (2, per output token)",
	.priv_size = sizeof(struct vtc),
	.init = vtc_init,
	.key = vtc_key,
	.enqueued = vtc_enqueued,
	.served = vtc_served,
	.key_tenant = vtc_key_tenant,
};
