/* priority — priority classes with optional aging: the waiting request with
 * the largest effective priority goes first, where
 *
 *     effective = priority + aging * (seconds since arrival)
 *
 * so with aging > 0 a low-priority request that has waited long enough
 * overtakes newer high-priority ones (no starvation).  Equal keys are
 * served in arrival order (the engine's tie-break).
 *
 * Parameters:
 *   aging=X   priority levels gained per second of waiting, X >= 0
 *             (default 0: strict priority classes, as vLLM's
 *             --scheduling-policy priority, which orders by (priority,
 *             arrival) without aging)
 *
 * Aging is the textbook remedy for priority starvation; the linear form is
 * a simplification (no cap, no reset on preemption: the wait counts from
 * arrival).
 */
#include <errno.h>
#include <math.h>

#include "policy.h"

struct prio {
	double aging;              /* priority levels per second of waiting, >= 0 */
};

static int prio_init(void *priv, struct ss_params *params, uint32_t n_tenants,
		     struct ss_error *err)
{
	struct prio *p = priv;
	int rc;

	(void)n_tenants;
	rc = ss_params_double(params, "aging", 0.0, &p->aging, err);
	if (rc)
		return rc;
	if (!isfinite(p->aging) || p->aging < 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--order priority: expected aging >= 0 (levels per second), got %g",
				    p->aging);
	return 0;
}

static double prio_key(const void *priv, const struct req_view *req, int64_t now)
{
	const struct prio *p = priv;
	double waited_s = (double)(now - req->arrival_ns) * 1e-9;

	if (waited_s < 0)
		waited_s = 0;
	return -((double)req->priority + p->aging * waited_s);
}

/* Without aging the key is -priority.  With aging it moves with now: the
 * equivalent static key (aging * arrival - priority) orders the same in
 * exact arithmetic but not always in floating point, so the engine uses it
 * only where the rounding margin allows (key_aging). */
static bool prio_key_static(const void *priv)
{
	const struct prio *p = priv;

	return p->aging == 0;
}

/* key = -(priority + aging * ((double)(now - arrival) * 1e-9)): at
 * arrival -priority (exact), then falling at `aging` per second; rounded
 * at the conversion, the constant 1e-9, two products and the sum. */
static double prio_key_aging(const void *priv)
{
	const struct prio *p = priv;

	return p->aging;
}

const struct order_ops order_priority_ops = {
	.version = POLICY_VERSION,
	.name = "priority",
	.description = "highest priority first, optional aging (levels per second waited)",
	.params = "aging=LEVELS_PER_S (0)",
	.priv_size = sizeof(struct prio),
	.init = prio_init,
	.key = prio_key,
	.key_static = prio_key_static,
	.key_aging = prio_key_aging,
};
