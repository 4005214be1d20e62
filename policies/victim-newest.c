/* newest — preempt the most recently admitted running request first (vLLM):
 * the running set stays in admission order, newest last. */
#include "policy.h"

const struct victim_ops victim_newest_ops = {
	.version = POLICY_VERSION,
	.name = "newest",
	.description = "preempt the most recently admitted running request (vLLM)",
};
