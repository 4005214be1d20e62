/* servesim — the static policy registries.  A new policy is one .c file
 * plus one line here (docs/writing-a-policy.md). */
#include <string.h>

#include "policy.h"

extern const struct batch_policy_ops batch_vllm_ops;
extern const struct batch_policy_ops batch_static_ops;
extern const struct batch_policy_ops batch_orca_ops;
extern const struct batch_policy_ops batch_sarathi_ops;
extern const struct batch_policy_ops batch_splitfuse_ops;
extern const struct order_ops order_fcfs_ops;
extern const struct order_ops order_spf_ops;
extern const struct order_ops order_sjf_ops;
extern const struct order_ops order_priority_ops;
extern const struct order_ops order_vtc_ops;
extern const struct victim_ops victim_newest_ops;
extern const struct victim_ops victim_priority_ops;
extern const struct victim_ops victim_largest_ops;
extern const struct router_ops router_rr_ops;
extern const struct router_ops router_lot_ops;
extern const struct router_ops router_random_ops;
extern const struct router_ops router_lor_ops;
extern const struct router_ops router_p2c_ops;
extern const struct router_ops router_prefix_ops;
extern const struct router_ops router_kvfree_ops;
extern const struct admission_ops admission_none_ops;
extern const struct admission_ops admission_queue_ops;
extern const struct admission_ops admission_timeout_ops;
extern const struct admission_ops admission_slo_ops;

static const struct batch_policy_ops *const batch_policies[] = {
	&batch_vllm_ops,
	&batch_static_ops,
	&batch_orca_ops,
	&batch_sarathi_ops,
	&batch_splitfuse_ops,
};

static const struct order_ops *const orders[] = {
	&order_fcfs_ops,
	&order_spf_ops,
	&order_sjf_ops,
	&order_priority_ops,
	&order_vtc_ops,
};

static const struct victim_ops *const victims[] = {
	&victim_newest_ops,
	&victim_priority_ops,
	&victim_largest_ops,
};

static const struct router_ops *const routers[] = {
	&router_rr_ops,
	&router_lot_ops,
	&router_random_ops,
	&router_lor_ops,
	&router_p2c_ops,
	&router_prefix_ops,
	&router_kvfree_ops,
};

static const struct admission_ops *const admissions[] = {
	&admission_none_ops,
	&admission_queue_ops,
	&admission_timeout_ops,
	&admission_slo_ops,
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Every ops table starts {version, name, description, ...}. */
struct ops_head {
	int version;
	const char *name;
	const char *description;
};

static const struct {
	enum policy_kind kind;
	const char *kind_name, *option;
	const void *const *ops;
	size_t n;
} kinds[] = {
	{ POLICY_BATCH, "batch", "--policy", (const void *const *)batch_policies, N_OF(batch_policies) },
	{ POLICY_ORDER, "order", "--order", (const void *const *)orders, N_OF(orders) },
	{ POLICY_VICTIM, "victim", "--victim", (const void *const *)victims, N_OF(victims) },
	{ POLICY_ROUTER, "router", "--router", (const void *const *)routers, N_OF(routers) },
	{ POLICY_ADMISSION, "admission", "--admission", (const void *const *)admissions, N_OF(admissions) },
};

static const void *find(enum policy_kind kind, const char *name)
{
	for (size_t i = 0; i < kinds[kind].n; i++) {
		const struct ops_head *h = kinds[kind].ops[i];

		if (strcmp(h->name, name) == 0)
			return h;
	}
	return NULL;
}

const struct batch_policy_ops *batch_policy_find(const char *name)
{
	return find(POLICY_BATCH, name);
}

const struct order_ops *order_find(const char *name)
{
	return find(POLICY_ORDER, name);
}

const struct victim_ops *victim_find(const char *name)
{
	return find(POLICY_VICTIM, name);
}

const struct router_ops *router_find(const char *name)
{
	return find(POLICY_ROUTER, name);
}

const struct admission_ops *admission_find(const char *name)
{
	return find(POLICY_ADMISSION, name);
}

size_t policy_list(struct policy_info *out, size_t cap)
{
	size_t k = 0;

	for (size_t t = 0; t < N_OF(kinds); t++) {
		for (size_t i = 0; i < kinds[t].n; i++, k++) {
			const struct ops_head *h = kinds[t].ops[i];

			if (k < cap)
				out[k] = (struct policy_info){ kinds[t].kind, kinds[t].kind_name,
							       kinds[t].option, h->name,
							       h->description };
		}
	}
	return k;
}
