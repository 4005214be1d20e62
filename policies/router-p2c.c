/* p2c — power of two choices (Mitzenmacher, "The Power of Two Choices in
 * Randomized Load Balancing", 2001): draw two distinct instances uniformly
 * (host->uniform) and send the request to the less loaded one; on a tie,
 * the first drawn.  With one instance it is that one.  Needs no global
 * minimum, which is why real balancers (SGLang's power_of_two, Envoy's
 * least-request) use it; here every instance's load is visible anyway, so
 * it mainly models those balancers.
 *
 * Parameters:
 *   load=requests|tokens  what "less loaded" counts: outstanding requests
 *                         (default) or outstanding tokens (see struct
 *                         inst_view)
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "policy.h"

struct p2c {
	bool tokens;               /* compare outstanding_tokens, not requests */
};

static int p2c_init(void *priv, struct ss_params *params, uint32_t n_instances,
		    struct ss_error *err)
{
	struct p2c *p = priv;
	const char *load = ss_params_str(params, "load", "requests");

	(void)n_instances;
	if (!strcmp(load, "requests"))
		p->tokens = false;
	else if (!strcmp(load, "tokens"))
		p->tokens = true;
	else
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--router p2c: expected load=requests or load=tokens, got '%s'",
				    load);
	return 0;
}

static uint32_t draw(const struct policy_host *host, uint32_t n)
{
	uint32_t k = (uint32_t)(host->uniform(host->ctx) * n);

	return k < n ? k : n - 1;
}

static int64_t load_of(const struct p2c *p, const struct inst_view *v)
{
	return p->tokens ? v->outstanding_tokens : (int64_t)v->outstanding_requests;
}

static uint32_t p2c_route(void *priv, const struct req_view *req,
			  const struct inst_view *const *insts, uint32_t n, int64_t now,
			  const struct policy_host *host)
{
	const struct p2c *p = priv;
	uint32_t a, b;

	(void)req;
	(void)now;
	assert(n > 0);
	if (n == 1)
		return 0;
	assert(host && host->uniform);
	a = draw(host, n);
	b = draw(host, n - 1);     /* among the other n - 1 */
	if (b >= a)
		b++;
	return load_of(p, insts[b]) < load_of(p, insts[a]) ? b : a;
}

const struct router_ops router_p2c_ops = {
	.version = POLICY_VERSION,
	.name = "p2c",
	.description = "power of two choices: the less loaded of two random instances",
	.params = "load=requests|tokens (requests)",
	.priv_size = sizeof(struct p2c),
	.init = p2c_init,
	.route = p2c_route,
};
