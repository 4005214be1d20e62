/* servesim — the static policy registries.  A new policy is one .c file
 * plus one line here (docs/writing-a-policy.md). */
#include <string.h>

#include "policy.h"

extern const struct batch_policy_ops batch_vllm_ops;
extern const struct router_ops router_rr_ops;
extern const struct router_ops router_lot_ops;

static const struct batch_policy_ops *const batch_policies[] = {
	&batch_vllm_ops,
};

static const struct router_ops *const routers[] = {
	&router_rr_ops,
	&router_lot_ops,
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

const struct batch_policy_ops *batch_policy_find(const char *name)
{
	for (size_t i = 0; i < N_OF(batch_policies); i++)
		if (strcmp(batch_policies[i]->name, name) == 0)
			return batch_policies[i];
	return NULL;
}

const struct router_ops *router_find(const char *name)
{
	for (size_t i = 0; i < N_OF(routers); i++)
		if (strcmp(routers[i]->name, name) == 0)
			return routers[i];
	return NULL;
}

size_t policy_list(struct policy_info *out, size_t cap)
{
	size_t k = 0;

	for (size_t i = 0; i < N_OF(batch_policies); i++, k++)
		if (k < cap)
			out[k] = (struct policy_info){ POLICY_BATCH, "batch", "--policy",
						       batch_policies[i]->name,
						       batch_policies[i]->description };
	for (size_t i = 0; i < N_OF(routers); i++, k++)
		if (k < cap)
			out[k] = (struct policy_info){ POLICY_ROUTER, "router", "--router",
						       routers[i]->name, routers[i]->description };
	return k;
}
