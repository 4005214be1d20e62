/* timeout — queue timeout: a waiting request that has not started (never
 * preempted and no output yet) leaves the queue ("queue timeout") once it
 * has waited more than `ms` since arrival; every arrival is admitted.  As a
 * client or gateway that gives up on a request stuck in the queue; checked
 * whenever the instance forms a step, so a request expires at the first
 * step after its deadline, not at the deadline itself.  It states that
 * deadline (admission_ops.deadline), so a step looks only at the requests
 * whose time has come.
 *
 * Parameters:
 *   ms=X   queueing deadline, milliseconds, X > 0 (required)
 */
#include <errno.h>
#include <math.h>

#include "policy.h"

struct timeout {
	int64_t limit_ns;          /* longest wait in the queue, ns, > 0 */
};

static int timeout_init(void *priv, struct ss_params *params, struct ss_error *err)
{
	struct timeout *p = priv;
	double ms;
	int rc;

	if (!ss_params_has(params, "ms"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--admission timeout: expected ms=X (queueing deadline, ms)");
	rc = ss_params_double(params, "ms", 0, &ms, err);
	if (rc)
		return rc;
	/* 1e12 ms (~30 years) keeps limit_ns far inside int64_t. */
	if (!isfinite(ms) || ms <= 0 || ms > 1e12)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--admission timeout: expected 0 < ms <= 1e12, got %g", ms);
	p->limit_ns = (int64_t)llround(ms * 1e6);
	if (p->limit_ns < 1)
		p->limit_ns = 1;
	return 0;
}

static bool timeout_expire(const void *priv, const struct req_view *req, int64_t now,
			   const char **reason)
{
	const struct timeout *p = priv;

	if (req->preemptions > 0 || req->generated_tokens > 0)
		return false;      /* it has started: never expire it */
	if (now - req->arrival_ns > p->limit_ns) {
		*reason = "queue timeout";
		return true;
	}
	return false;
}

/* expire is true from the first now with now - arrival > limit, i.e.
 * from arrival + limit + 1 (INT64_MAX, never, past the clock's range). */
static int64_t timeout_deadline(const void *priv, const struct req_view *req)
{
	const struct timeout *p = priv;

	if (req->arrival_ns > INT64_MAX - 1 - p->limit_ns)
		return INT64_MAX;
	return req->arrival_ns + p->limit_ns + 1;
}

const struct admission_ops admission_timeout_ops = {
	.version = POLICY_VERSION,
	.name = "timeout",
	.description = "drop a request that has waited more than ms without starting",
	.params = "ms=X (required)",
	.priv_size = sizeof(struct timeout),
	.init = timeout_init,
	.expire = timeout_expire,
	.deadline = timeout_deadline,
};
