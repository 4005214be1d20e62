/* queue — bounded waiting queue: an arriving request is rejected ("queue
 * full") when its instance already has `max` requests waiting; requests in
 * the running set do not count.  The bounded request queue of production
 * servers (e.g. Triton's dynamic-batcher max_queue_size), per instance.
 *
 * Parameters:
 *   max=N   waiting requests an instance holds, N >= 0 (required; 0 admits
 *           nothing)
 */
#include <errno.h>

#include "policy.h"

struct queue {
	uint32_t max;              /* waiting requests */
};

static int queue_init(void *priv, struct ss_params *params, struct ss_error *err)
{
	struct queue *p = priv;
	int64_t max;
	int rc;

	if (!ss_params_has(params, "max"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--admission queue: expected max=N (waiting requests per instance)");
	rc = ss_params_int(params, "max", 0, &max, err);
	if (rc)
		return rc;
	if (max < 0 || max > UINT32_MAX)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--admission queue: expected 0 <= max <= %u, got %lld",
				    UINT32_MAX, (long long)max);
	p->max = (uint32_t)max;
	return 0;
}

static bool queue_admit(const void *priv, const struct req_view *req, const struct inst_view *inst,
			int64_t now, const struct policy_host *host, const char **reason)
{
	const struct queue *p = priv;

	(void)req;
	(void)now;
	(void)host;
	if (inst->n_waiting >= p->max) {
		*reason = "queue full";
		return false;
	}
	return true;
}

const struct admission_ops admission_queue_ops = {
	.version = POLICY_VERSION,
	.name = "queue",
	.description = "reject arrivals when the instance already has max requests waiting",
	.params = "max=N (required)",
	.priv_size = sizeof(struct queue),
	.init = queue_init,
	.admit = queue_admit,
};
