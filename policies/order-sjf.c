/* sjf — shortest (predicted) job first: the waiting request with the fewest
 * predicted output tokens still to generate goes first, i.e.
 * predicted_output - generated_tokens, clamped at 0 for a request that has
 * already outrun its prediction.  Ties by arrival (the engine's tie-break).
 * No parameters.
 *
 * The engine fills predicted_output from an oracle (the trace's true length)
 * or a noisy predictor, as in length-predicting schedulers (e.g. Qiu et al.,
 * "Efficient Interactive LLM Serving with Proxy Model-based Sequence Length
 * Prediction", and Fu et al., "Efficient LLM Scheduling by Learning to
 * Rank").  Without a predictor (predicted_output < 0) the key falls back to
 * the prompt length, so sjf degrades to a shortest-prompt order.  Like every
 * SJF it can starve long jobs.
 */
#include "policy.h"

static double sjf_key(const void *priv, const struct req_view *req, int64_t now)
{
	int32_t left;

	(void)priv;
	(void)now;
	if (req->predicted_output < 0)
		return (double)req->prompt_tokens;
	left = req->predicted_output - req->generated_tokens;
	return left > 0 ? (double)left : 0.0;
}

/* generated_tokens changes only while the request runs. */
static bool sjf_key_static(const void *priv)
{
	(void)priv;
	return true;
}

const struct order_ops order_sjf_ops = {
	.version = POLICY_VERSION,
	.name = "sjf",
	.description = "shortest predicted job first: fewest predicted output tokens left "
		       "(prompt length without a predictor)",
	.key = sjf_key,
	.uses_predictions = true,  /* --predictor defaults to oracle */
	.key_static = sjf_key_static,
};
