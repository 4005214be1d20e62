/* static — request-level (static) batching, as FasterTransformer serves.
 *
 * When nothing is running, a batch is formed from the front of the waiting
 * queue (FCFS, no overtaking): up to max_batch requests whose KV
 * reservations fit in the KV cache.  The first step prefills every prompt of
 * the batch whole (no chunking); then every member decodes one token per
 * step, together.  Members that finish leave, but nobody joins until the
 * whole batch has finished: that is the inefficiency Orca's iteration-level
 * scheduling removes (Yu et al., OSDI'22, section 2.2).
 *
 * Like FasterTransformer, which allocates its KV cache for the maximum
 * sequence length of the batch, each request reserves blocks for
 * min(max_len, max_model_len) tokens (more once it holds more), and the
 * batch is admitted only while the reservations fit in the pool.  The same
 * rule is Sarathi-Serve's FasterTransformer baseline
 * (sarathi/core/scheduler/faster_transformer_scheduler.py: running requests
 * only, else admit while max_model_len blocks can be allocated).
 *
 * Differs from FasterTransformer: a request is never cut at max_len (the
 * trace says how long it runs); one that outgrows its reservation takes
 * blocks from the free pool, and if the pool runs dry the batch's last
 * member is preempted (recompute) and waits for the next batch.  Prompts
 * are not padded: a step costs what its real tokens cost.
 *
 * Parameters:
 *   max_batch=N  requests per batch (default 16)
 *   max_len=N    tokens reserved per request (default 0: the model's context)
 */
#include <errno.h>

#include "batch-int.h"

struct static_batch {
	int32_t max_batch;
	int32_t max_len;   /* tokens; 0 = the model's context length */
};

static int static_init(void *priv, struct ss_params *params, struct ss_error *err)
{
	struct static_batch *p = priv;
	int64_t batch, len;
	int rc;

	rc = ss_params_int(params, "max_batch", 16, &batch, err);
	if (!rc)
		rc = ss_params_int(params, "max_len", 0, &len, err);
	if (rc)
		return rc;
	if (batch < 1 || batch > 1 << 20)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy static: expected 1 <= max_batch <= 1048576, got %lld",
				    (long long)batch);
	if (len < 0 || len > 1 << 30)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy static: expected 0 <= max_len <= 1073741824 (0: the model's context), got %lld",
				    (long long)len);
	p->max_batch = (int32_t)batch;
	p->max_len = (int32_t)len;
	return 0;
}

static bool static_admissible(const void *priv, const struct req_view *req,
			      const struct inst_view *inst, const char **reason)
{
	const struct static_batch *p = priv;
	int32_t len = max_len_tokens(p->max_len, inst);

	if (len > 0 && req->prompt_tokens >= len) {
		*reason = "prompt does not fit max_len (prompt_tokens >= max_len)";
		return false;
	}
	if (reserve_blocks(len, inst) > inst->total_blocks) {
		*reason = "the KV reservation for max_len tokens exceeds the KV cache; lower max_len";
		return false;
	}
	return true;
}

static void static_pick_step(void *priv, const struct inst_view *inst, int64_t now,
			     const struct policy_host *host, struct step_plan *plan)
{
	const struct static_batch *p = priv;
	int32_t reserve = reserve_blocks(max_len_tokens(p->max_len, inst), inst);
	int32_t free_blocks = inst->free_blocks;
	int64_t room = inst->total_blocks;
	uint32_t end = inst->n_running;
	uint32_t i;

	(void)now;
	(void)host;
	if (inst->n_running > 0) {
		/* The batch runs on, all together; nobody joins. */
		for (i = 0; i < end; i++) {
			const struct req_view *r = inst->running[i];
			int32_t n = req_pending_tokens(r);
			int32_t need = req_blocks_needed(r, n, inst->block_size);

			if (!plan_make_room(plan, inst, i, need, &free_blocks, &end))
				break;
			plan_add(plan, r, n);
			free_blocks -= need;
		}
		return;
	}

	for (i = 0; i < inst->n_waiting && (int32_t)i < p->max_batch; i++) {
		const struct req_view *w = inst->waiting[i];
		int32_t n = req_pending_tokens(w);
		int32_t need = req_blocks_needed(w, n, inst->block_size);
		int32_t held = w->kv_blocks + need;
		int32_t res = held > reserve ? held : reserve;

		if (res > room || need > free_blocks)
			break;
		plan_add(plan, w, n);
		room -= res;
		free_blocks -= need;
	}
}

static uint32_t static_max_items(const void *priv)
{
	const struct static_batch *p = priv;

	return (uint32_t)p->max_batch;
}

/* A running batch runs on, all together. */
static uint32_t static_steady_decode(const void *priv)
{
	(void)priv;
	return UINT32_MAX;
}

const struct batch_policy_ops batch_static_ops = {
	.version = POLICY_VERSION,
	.name = "static",
	.description = "static batching (FasterTransformer): a batch prefills whole, "
		       "decodes together and admits nobody until it has finished; "
		       "KV reserved for max_len per request",
	.params = "max_batch=N (16), max_len=TOKENS (0: the model's context)",
	.priv_size = sizeof(struct static_batch),
	.init = static_init,
	.admissible = static_admissible,
	.pick_step = static_pick_step,
	.max_items = static_max_items,
	.plan_batch_key = "max_batch",
	.steady_decode = static_steady_decode,
};
