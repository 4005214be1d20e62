/* priority — preempt the lowest-priority running request first and, among
 * equal priorities, the latest arrival, as vLLM's priority scheduling does
 * (it preempts max(running, key=(priority, arrival_time)), where vLLM's
 * smaller priority value means more important; here larger is more
 * important).  The running set is sorted most important first, so the
 * victim is last. */
#include "policy.h"

static int victim_priority_compare(const struct req_view *a, const struct req_view *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->arrival_ns != b->arrival_ns)
		return a->arrival_ns < b->arrival_ns ? -1 : 1;
	return 0;
}

const struct victim_ops victim_priority_ops = {
	.version = POLICY_VERSION,
	.name = "priority",
	.description = "preempt the lowest priority first, then the latest arrival (vLLM priority)",
	.compare = victim_priority_compare,
};
