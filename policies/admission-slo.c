/* slo — reject on arrival a request whose predicted time to first token
 * exceeds the TTFT SLO ("predicted TTFT over the SLO"), instead of letting
 * it wait only to miss the SLO anyway: SLO-aware load shedding in its
 * simplest form, not taken from one particular system.
 *
 * The prediction is the cost model's estimate of the prefill work ahead of
 * the request and its own:
 *
 *     TTFT ~ (now - arrival) + margin * (prefill_ns(W + P) + busy * prefill_ns(1))
 *
 * where W is the sum of req_pending_tokens over the instance's waiting
 * queue, P is the request's own pending tokens (its prompt, less any KV
 * already computed), and, when a step is in flight, prefill_ns(1) stands
 * for the rest of that step.  This is a coarse estimate: it prices all of
 * the queued prefill as one batched step (no token budget, so it can
 * under-estimate long queues split into many steps), ignores the decode
 * work of running requests that shares those steps, assumes the request
 * is served after everything already waiting (a sorting --order may serve
 * it sooner), and prices the in-flight step as a one-token step whatever it
 * holds.  margin scales it to taste.
 *
 * Parameters:
 *   ttft_ms=X  the SLO, ms, X >= 0 (default 0: the run's TTFT SLO,
 *              host->slo_ttft_ns; when the run has none either, nothing
 *              is rejected)
 *   margin=X   factor on the prediction, X > 0 (default 1.0)
 * Without host->prefill_ns nothing can be predicted and nothing is rejected.
 */
#include <errno.h>
#include <math.h>

#include "policy.h"

struct slo {
	int64_t ttft_ns;           /* SLO, ns; 0 = use the run's */
	double margin;             /* > 0 */
};

static int slo_init(void *priv, struct ss_params *params, struct ss_error *err)
{
	struct slo *p = priv;
	double ms;
	int rc;

	rc = ss_params_double(params, "ttft_ms", 0, &ms, err);
	if (!rc)
		rc = ss_params_double(params, "margin", 1.0, &p->margin, err);
	if (rc)
		return rc;
	if (!isfinite(ms) || ms < 0 || ms > 1e12)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--admission slo: expected 0 <= ttft_ms <= 1e12 (0 = the run's SLO), got %g",
				    ms);
	if (!isfinite(p->margin) || p->margin <= 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--admission slo: expected margin > 0, got %g", p->margin);
	p->ttft_ns = (int64_t)llround(ms * 1e6);
	return 0;
}

static bool slo_admit(const void *priv, const struct req_view *req, const struct inst_view *inst,
		      int64_t now, const struct policy_host *host, const char **reason)
{
	const struct slo *p = priv;
	int64_t slo = p->ttft_ns ? p->ttft_ns : host ? host->slo_ttft_ns : 0;
	int64_t tokens = req_pending_tokens(req);
	double predicted;

	if (slo <= 0 || !host || !host->prefill_ns)
		return true;
	for (uint32_t i = 0; i < inst->n_waiting; i++)
		tokens += req_pending_tokens(inst->waiting[i]);
	if (tokens > INT32_MAX)
		tokens = INT32_MAX;
	predicted = (double)host->prefill_ns(host->ctx, (int32_t)tokens);
	if (inst->busy)
		predicted += (double)host->prefill_ns(host->ctx, 1);
	predicted = (double)(now - req->arrival_ns) + p->margin * predicted;
	if (predicted > (double)slo) {
		*reason = "predicted TTFT over the SLO";
		return false;
	}
	return true;
}

const struct admission_ops admission_slo_ops = {
	.version = POLICY_VERSION,
	.name = "slo",
	.description = "reject arrivals whose predicted TTFT (queued prefill work) exceeds the SLO",
	.params = "ttft_ms=X (0: the run's --slo ttft_ms), margin=X (1)",
	.priv_size = sizeof(struct slo),
	.init = slo_init,
	.admit = slo_admit,
};
