/* orca — iteration-level scheduling with selective batching (Orca, Yu et
 * al., OSDI'22).
 *
 * The batch is chosen anew every iteration.  It holds every running
 * request, each fed what it still needs: one token for a decode, the whole
 * rest of its prompt for one still prefilling (Orca never chunks a prompt);
 * then waiting requests are added in queue order, each with its whole prompt,
 * while the batch has fewer than max_batch requests and the request's KV
 * reservation fits.  Selective batching is what lets prefills of any length
 * and decodes share one iteration; the cost model prices the mixed step.
 *
 * Orca has no paged KV cache: its scheduler (the paper's Algorithm 1)
 * reserves max_tokens KV slots for a request when it is first scheduled and
 * stops admitting, in arrival order with no overtaking, when the next
 * reservation would exceed n_slots.  Here each request reserves blocks for
 * min(max_len, max_model_len) tokens, and a waiting request is admitted only
 * while the reservations of the running set (each max(reserve, kv_blocks))
 * plus its own stay within the pool.  With every request within max_len,
 * no step ever needs a block that is not there, so orca never preempts;
 * Sarathi-Serve's Orca baseline (sarathi/core/scheduler/orca_scheduler.py)
 * does the same with max_model_len blocks per request.
 *
 * Differs from Orca: the reservation is per instance, not per pipeline stage,
 * and there is one batch in flight (no n_workers pipelining).  A request is
 * never cut at max_len: one that outgrows its reservation takes blocks from
 * the free pool, and if the pool runs dry the running request at the end of
 * the running set is preempted (recompute), with no admission in that step,
 * as vLLM does.
 *
 * Parameters:
 *   max_batch=N  requests per iteration, Orca's max_bs (default 256)
 *   max_len=N    tokens reserved per request (default 0: the model's context)
 */
#include <errno.h>

#include "batch-int.h"

struct orca {
	int32_t max_batch;
	int32_t max_len;   /* tokens; 0 = the model's context length */
};

static int orca_init(void *priv, struct ss_params *params, struct ss_error *err)
{
	struct orca *p = priv;
	int64_t batch, len;
	int rc;

	rc = ss_params_int(params, "max_batch", 256, &batch, err);
	if (!rc)
		rc = ss_params_int(params, "max_len", 0, &len, err);
	if (rc)
		return rc;
	if (batch < 1 || batch > 1 << 20)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy orca: expected 1 <= max_batch <= 1048576, got %lld",
				    (long long)batch);
	if (len < 0 || len > 1 << 30)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy orca: expected 0 <= max_len <= 1073741824 (0: the model's context), got %lld",
				    (long long)len);
	p->max_batch = (int32_t)batch;
	p->max_len = (int32_t)len;
	return 0;
}

static bool orca_admissible(const void *priv, const struct req_view *req,
			    const struct inst_view *inst, const char **reason)
{
	const struct orca *p = priv;
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

static void orca_pick_step(void *priv, const struct inst_view *inst, int64_t now,
			   const struct policy_host *host, struct step_plan *plan)
{
	const struct orca *p = priv;
	int32_t reserve = reserve_blocks(max_len_tokens(p->max_len, inst), inst);
	int32_t free_blocks = inst->free_blocks;
	int64_t room = inst->total_blocks - reserved_by_running(inst, reserve);
	uint32_t end = inst->n_running;  /* running[end..) have been preempted */
	uint32_t i;

	(void)now;
	(void)host;
	for (i = 0; i < end; i++) {
		const struct req_view *r = inst->running[i];
		int32_t n = req_pending_tokens(r);
		int32_t need = req_blocks_needed(r, n, inst->block_size);

		if (!plan_make_room(plan, inst, i, need, &free_blocks, &end))
			break;
		plan_add(plan, r, n);
		free_blocks -= need;
	}
	if (plan->n_preempt > 0)
		return;

	for (i = 0; i < inst->n_waiting && (int32_t)(end + inst->n_inflight + i) < p->max_batch;
	     i++) {
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

static uint32_t orca_max_items(const void *priv)
{
	const struct orca *p = priv;

	return (uint32_t)p->max_batch;
}

/* Every running request takes part in every iteration. */
static uint32_t orca_steady_decode(const void *priv)
{
	(void)priv;
	return UINT32_MAX;
}

const struct batch_policy_ops batch_orca_ops = {
	.version = POLICY_VERSION,
	.name = "orca",
	.description = "Orca iteration-level scheduling: every iteration all running requests "
		       "plus FCFS whole prefills up to max_batch; KV reserved for max_len per request",
	.params = "max_batch=N (256), max_len=TOKENS (0: the model's context)",
	.priv_size = sizeof(struct orca),
	.init = orca_init,
	.admissible = orca_admissible,
	.pick_step = orca_pick_step,
	.max_items = orca_max_items,
	.plan_batch_key = "max_batch",
	.steady_decode = orca_steady_decode,
};
