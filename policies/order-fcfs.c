/* fcfs — first come, first served: the queue as the engine builds it, in
 * arrival order with preempted requests put back at the front so that they
 * resume first (as vLLM does).  No key, so the engine never sorts. */
#include "policy.h"

const struct order_ops order_fcfs_ops = {
	.version = POLICY_VERSION,
	.name = "fcfs",
	.description = "first come, first served; preempted requests resume first (vLLM)",
};
