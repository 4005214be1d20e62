/* splitfuse — Dynamic SplitFuse, DeepSpeed-FastGen's batch composition.
 *
 * FastGen runs every forward pass at one target size, a token budget (the
 * DeepSpeed-FastGen blog, blogs/deepspeed-fastgen in microsoft/DeepSpeed,
 * section 3B): "long prompts are decomposed into much smaller chunks and
 * scheduled across multiple forward passes ... with only the final pass
 * performing any generation", and "short prompts will be composed to
 * exactly fill a target token budget.  Even short prompts may be decomposed
 * to ensure the budget is precisely met".  Its scheduler (DeepSpeed-MII,
 * mii/batching/ragged_batching.py, schedule_requests) first schedules every
 * sequence that generates (one token each), then the prompts, the remainder
 * of a split prompt ahead of new ones, each cut to the budget left; the
 * budget is the ragged batch's max_ragged_batch_size, 768 tokens by default,
 * and at most max_ragged_sequence_count sequences (512 by default, never
 * more than the budget) take part (deepspeed/inference/v2/ragged/
 * manager_configs.py, DSStateManagerConfig).  So here each step is:
 *   1. every running decode, one token each;
 *   2. the prompts under way, in admission order, each a chunk of
 *      min(rest of its prompt, budget left);
 *   3. new requests in queue order, each a chunk of min(its prompt, budget
 *      left), while the running set stays within max_num_seqs;
 * and it is filled to exactly token_budget tokens whenever that many prompt
 * tokens wait.  Like MII, a new prompt is started only when the blocks for
 * all of it are free now (its guard against deadlock), not reserved ahead;
 * a chunk is cut to the blocks left, as MII's engine query cuts it.
 *
 * Differs from FastGen: when a decode cannot get a block, MII skips it and,
 * if nothing at all can run, flushes every KV cache and recomputes all;
 * here, as in vLLM, the request at the end of the running set is preempted
 * (recompute), repeatedly, possibly the decode itself, and no request is
 * admitted in a step that preempted.  MII's sequence limit counts the
 * sequences of one forward pass; here it bounds the running set.  FastGen's
 * blocked KV cache is the engine's paged pool.
 *
 * Parameters:
 *   token_budget=N  tokens per forward pass (default 768, FastGen's
 *                   max_ragged_batch_size)
 *   max_num_seqs=N  running-set limit, at most token_budget (default 512,
 *                   FastGen's max_ragged_sequence_count)
 */
#include <errno.h>

#include "batch-int.h"

struct splitfuse {
	int32_t budget;    /* tokens per forward pass */
	int32_t max_seqs;
};

static int splitfuse_init(void *priv, struct ss_params *params, struct ss_error *err)
{
	struct splitfuse *p = priv;
	int64_t budget, seqs;
	int rc;

	rc = ss_params_int(params, "token_budget", 768, &budget, err);
	if (!rc)
		rc = ss_params_int(params, "max_num_seqs", 512, &seqs, err);
	if (rc)
		return rc;
	if (budget < 1 || budget > 1 << 24)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy splitfuse: expected 1 <= token_budget <= 16777216, got %lld",
				    (long long)budget);
	if (seqs < 1 || seqs > budget)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy splitfuse: expected 1 <= max_num_seqs <= token_budget (%lld), got %lld",
				    (long long)budget, (long long)seqs);
	p->budget = (int32_t)budget;
	p->max_seqs = (int32_t)seqs;
	return 0;
}

static void splitfuse_pick_step(void *priv, const struct inst_view *inst, int64_t now,
				const struct policy_host *host, struct step_plan *plan)
{
	const struct splitfuse *p = priv;
	int32_t bs = inst->block_size;
	int32_t budget = p->budget;
	int32_t free_blocks = inst->free_blocks;
	uint32_t end = inst->n_running;  /* running[end..) have been preempted */
	uint32_t i, n_seqs;

	(void)now;
	(void)host;
	/* 1. Decodes first, preempting from the end when a block is missing. */
	for (i = 0; i < end && budget > 0; i++) {
		const struct req_view *r = inst->running[i];
		int32_t n, need;

		if (!batch_decode(r))
			continue;
		/* its token, and its drafts to verify as the budget allows */
		n = req_pending_tokens(r) < budget ? req_pending_tokens(r) : budget;
		need = req_blocks_needed(r, n, bs);
		if (!plan_make_room(plan, inst, i, need, &free_blocks, &end))
			break;
		plan_add(plan, r, n);
		budget -= n;
		free_blocks -= need;
	}

	/* 2. Split prompts under way, cut to the budget and the blocks left. */
	for (i = 0; i < end && budget > 0; i++) {
		const struct req_view *r = inst->running[i];
		int32_t n = req_pending_tokens(r);

		if (batch_decode(r))
			continue;
		n = fit_tokens(r, n < budget ? n : budget, free_blocks, bs);
		if (n == 0)
			continue;
		plan_add(plan, r, n);
		budget -= n;
		free_blocks -= req_blocks_needed(r, n, bs);
	}
	if (plan->n_preempt > 0)
		return;
	if (plan->n_items == 0 && end > 0) {
		/* Nothing running can move: free the last one's blocks. */
		assert(plan->n_preempt < plan->cap_preempt);
		plan->preempt[plan->n_preempt++] = inst->running[end - 1];
		return;
	}

	/* 3. New prompts fill the rest of the budget, the last one split. */
	n_seqs = end + inst->n_inflight;
	for (i = 0; i < inst->n_waiting && budget > 0 && n_seqs < (uint32_t)p->max_seqs;
	     i++, n_seqs++) {
		const struct req_view *w = inst->waiting[i];
		int32_t rest = req_pending_tokens(w);
		int32_t n = rest < budget ? rest : budget;

		if (req_blocks_needed(w, rest, bs) > free_blocks)
			break;
		plan_add(plan, w, n);
		budget -= n;
		free_blocks -= req_blocks_needed(w, n, bs);
	}
}

static uint32_t splitfuse_max_items(const void *priv)
{
	const struct splitfuse *p = priv;

	return (uint32_t)p->max_seqs;
}

/* With nobody waiting, the decodes fill the budget first. */
static uint32_t splitfuse_steady_decode(const void *priv)
{
	const struct splitfuse *p = priv;

	return (uint32_t)p->budget;
}

const struct batch_policy_ops batch_splitfuse_ops = {
	.version = POLICY_VERSION,
	.name = "splitfuse",
	.description = "DeepSpeed-FastGen Dynamic SplitFuse: decodes, then prompt chunks split "
		       "and fused to fill a fixed forward size; recompute preemption from the end",
	.params = "token_budget=TOKENS (768), max_num_seqs=N (512, at most token_budget)",
	.priv_size = sizeof(struct splitfuse),
	.init = splitfuse_init,
	.pick_step = splitfuse_pick_step,
	.max_items = splitfuse_max_items,
	.plan_batch_key = "max_num_seqs",
	.plan_chunk_key = "token_budget",
	.plan_batch_within_chunk = true,
	.steady_decode = splitfuse_steady_decode,
};
