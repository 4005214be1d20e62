/* kvfree — route to the instance with the most free KV blocks; ties go to
 * the fewer outstanding requests, then the lowest index, so routing is
 * deterministic.  Free blocks count what is free now: requests already
 * queued there have not taken theirs yet.  The worked example of
 * docs/writing-a-policy.md.
 *
 * Parameters:
 *   min_free=N  blocks that count as enough room, N >= 1 (default: no
 *               limit).  An instance with fewer free blocks than N is
 *               avoided unless all are below N; every instance with at
 *               least N ties on free blocks, so the least loaded wins.
 */
#include <errno.h>

#include "policy.h"

struct kvfree {
	int64_t min_free;          /* blocks; free blocks above it all count as it */
};

static int kvfree_init(void *priv, struct ss_params *params, uint32_t n_instances,
		       struct ss_error *err)
{
	struct kvfree *p = priv;
	int rc;

	(void)n_instances;
	rc = ss_params_int(params, "min_free", INT32_MAX, &p->min_free, err);
	if (rc)
		return rc;
	if (p->min_free < 1 || p->min_free > INT32_MAX)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--router kvfree: expected 1 <= min_free <= %d (blocks), got %lld",
				    INT32_MAX, (long long)p->min_free);
	return 0;
}

static uint32_t kvfree_route(void *priv, const struct req_view *req,
			     const struct inst_view *const *insts, uint32_t n, int64_t now,
			     const struct policy_host *host)
{
	const struct kvfree *p = priv;
	uint32_t best = 0;
	int64_t best_room = -1;

	(void)req;
	(void)now;
	(void)host;
	for (uint32_t i = 0; i < n; i++) {
		const struct inst_view *v = insts[i];
		int64_t room = v->free_blocks < p->min_free ? v->free_blocks : p->min_free;

		if (room > best_room ||
		    (room == best_room && v->outstanding_requests < insts[best]->outstanding_requests)) {
			best = i;
			best_room = room;
		}
	}
	return best;
}

const struct router_ops router_kvfree_ops = {
	.version = POLICY_VERSION,
	.name = "kvfree",
	.description = "most free KV blocks, then fewest outstanding requests",
	.params = "min_free=BLOCKS (none)",
	.priv_size = sizeof(struct kvfree),
	.init = kvfree_init,
	.route = kvfree_route,
};
