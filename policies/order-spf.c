/* spf — shortest prompt first: the waiting request with the fewest tokens
 * still to prefill goes first (req_pending_tokens: the prompt not yet in the
 * KV cache, plus, for a request preempted by recompute, the outputs it must
 * recompute).  Ties by arrival (the engine's tie-break).  No parameters.
 *
 * The classic shortest-job-first idea applied to the part of the job the
 * scheduler knows exactly.  It can starve long prompts under sustained load;
 * "priority" with aging, or "vtc", are the remedies.
 */
#include "policy.h"

static double spf_key(const void *priv, const struct req_view *req, int64_t now)
{
	(void)priv;
	(void)now;
	return (double)req_pending_tokens(req);
}

/* Pending tokens change while a request waits only when a prefix-cache
 * lookup finds (or gives back) computed tokens: with the prefix cache on
 * the engine takes the key again after each lookup of that request. */
static bool spf_key_static(const void *priv)
{
	(void)priv;
	return true;
}

const struct order_ops order_spf_ops = {
	.version = POLICY_VERSION,
	.name = "spf",
	.description = "shortest prompt first: fewest tokens still to prefill",
	.key = spf_key,
	.key_static = spf_key_static,
};
