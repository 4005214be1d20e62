/* largest — preempt the running request that holds the most KV blocks
 * first, so one preemption frees as much memory as possible; ties go to the
 * latest arrival.  Swapped-out blocks (host_blocks) do not count: they are
 * not in the GPU pool.  A simple heuristic, not taken from one particular
 * system: it needs the fewest preemptions to free a given number of blocks but
 * throws away the most computed KV (recompute) and can evict the same long
 * request again and again. */
#include "policy.h"

static int victim_largest_compare(const struct req_view *a, const struct req_view *b)
{
	if (a->kv_blocks != b->kv_blocks)
		return a->kv_blocks < b->kv_blocks ? -1 : 1;
	if (a->arrival_ns != b->arrival_ns)
		return a->arrival_ns < b->arrival_ns ? -1 : 1;
	return 0;
}

const struct victim_ops victim_largest_ops = {
	.version = POLICY_VERSION,
	.name = "largest",
	.description = "preempt the request holding the most KV blocks, then the latest arrival",
	.compare = victim_largest_compare,
};
