/* lot — least outstanding tokens: the instance with the fewest tokens in
 * flight (prompt plus generated tokens of its unfinished requests, see
 * struct inst_view); ties go to the lowest index, so routing is
 * deterministic. */
#include "policy.h"

static uint32_t lot_route(void *priv, const struct req_view *req,
			  const struct inst_view *const *insts, uint32_t n, int64_t now,
			  const struct policy_host *host)
{
	uint32_t best = 0;

	(void)priv;
	(void)req;
	(void)now;
	(void)host;
	for (uint32_t i = 1; i < n; i++)
		if (insts[i]->outstanding_tokens < insts[best]->outstanding_tokens)
			best = i;
	return best;
}

const struct router_ops router_lot_ops = {
	.version = POLICY_VERSION,
	.name = "lot",
	.description = "least outstanding tokens (prompt + generated of unfinished requests)",
	.priv_size = 0,
	.route = lot_route,
};
