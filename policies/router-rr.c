/* rr — round-robin routing: request k goes to instance k mod n. */
#include "policy.h"

struct rr {
	uint32_t next;
};

static uint32_t rr_route(void *priv, const struct req_view *req,
			 const struct inst_view *const *insts, uint32_t n, int64_t now,
			 const struct policy_host *host)
{
	struct rr *p = priv;
	uint32_t pick = p->next;

	(void)req;
	(void)insts;
	(void)now;
	(void)host;
	p->next = (p->next + 1) % n;
	return pick;
}

const struct router_ops router_rr_ops = {
	.version = POLICY_VERSION,
	.name = "rr",
	.description = "round-robin over instances",
	.priv_size = sizeof(struct rr),
	.route = rr_route,
};
