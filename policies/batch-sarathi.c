/* sarathi — stall-free batching with chunked prefills (Sarathi-Serve,
 * Agrawal et al., OSDI'24).
 *
 * Each step is built within a token budget (the paper's chunk size, the
 * tokens of one forward pass) in three phases, as Sarathi-Serve's scheduler
 * does (sarathi/core/scheduler/sarathi_scheduler.py):
 *   1. every running decode, one token each, in running order, so that no
 *      decode ever stalls behind a prefill;
 *   2. the prefills already under way, in admission order, each a chunk of
 *      min(rest of its prompt, budget left);
 *   3. new requests from the front of the waiting queue, in queue order,
 *      each a chunk of min(its prompt, budget left), while the running set
 *      stays within max_num_seqs and the whole prompt's KV blocks can be
 *      found; the first that does not fit stops admission.
 * So a step is filled to the budget whenever enough prompt tokens wait, and
 * a long prompt is spread over several steps whose decodes keep flowing.
 *
 * KV cache: Sarathi-Serve allocates a prompt's blocks when it admits the
 * request (vLLM's block manager), so a prefill under way never waits for
 * memory and only decodes can run out.  Here the blocks a prefill under way
 * still needs are treated as pledged: decodes and new admissions use only
 * the free blocks not pledged, and a prompt is admitted only when all of its
 * blocks are free and unpledged.  When a decode cannot get its block, the
 * request at the end of the running set is preempted (recompute; the engine
 * puts the preferred victim last), repeatedly, possibly the decode itself,
 * and a victim still prefilling gives back its pledge too.
 *
 * Differs from Sarathi-Serve: blocks are taken step by step from the free
 * pool (the pledge stands in for the up-front allocation), no 1% watermark
 * is kept free, and no request is admitted in a step that preempted (vLLM's
 * rule; Sarathi-Serve's code still tries to).  The dynamic chunk-size
 * schedule (enable_dynamic_chunking_schedule) is not modelled.  As in
 * vLLM, max_num_seqs may not exceed token_budget, so the decodes of a full
 * running set always fit in the budget.
 *
 * Parameters:
 *   token_budget=N  tokens per step, Sarathi's chunk_size (default 512)
 *   max_num_seqs=N  running-set limit (default 256)
 */
#include <errno.h>

#include "batch-int.h"

struct sarathi {
	int32_t budget;    /* tokens per step */
	int32_t max_seqs;
};

static int sarathi_init(void *priv, struct ss_params *params, struct ss_error *err)
{
	struct sarathi *p = priv;
	int64_t budget, seqs;
	int rc;

	rc = ss_params_int(params, "token_budget", 512, &budget, err);
	if (!rc)
		rc = ss_params_int(params, "max_num_seqs", 256, &seqs, err);
	if (rc)
		return rc;
	if (budget < 1 || budget > 1 << 24)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy sarathi: expected 1 <= token_budget <= 16777216, got %lld",
				    (long long)budget);
	if (seqs < 1 || seqs > budget)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy sarathi: expected 1 <= max_num_seqs <= token_budget (%lld), got %lld",
				    (long long)budget, (long long)seqs);
	p->budget = (int32_t)budget;
	p->max_seqs = (int32_t)seqs;
	return 0;
}

/* Blocks a running request still prefilling will need for the rest of its
 * prompt (Sarathi-Serve holds them from admission); 0 for a decode. */
static int32_t pledge(const struct req_view *r, int32_t block_size)
{
	return batch_decode(r) ? 0 : req_blocks_needed(r, req_pending_tokens(r), block_size);
}

static void sarathi_pick_step(void *priv, const struct inst_view *inst, int64_t now,
			      const struct policy_host *host, struct step_plan *plan)
{
	const struct sarathi *p = priv;
	int32_t bs = inst->block_size;
	int32_t budget = p->budget;
	int32_t free_blocks = inst->free_blocks;  /* free blocks left */
	int64_t avail;                            /* ... of which not pledged */
	uint32_t end = inst->n_running;           /* running[end..) have been preempted */
	uint32_t i, n_seqs;

	(void)now;
	(void)host;
	avail = free_blocks;
	for (i = 0; i < end; i++)
		avail -= pledge(inst->running[i], bs);

	/* 1. Decodes, preempting from the end when a block is missing. */
	for (i = 0; i < end && budget > 0; i++) {
		const struct req_view *r = inst->running[i];
		int32_t n, need;

		if (!batch_decode(r))
			continue;
		/* its token, and its drafts to verify as the budget allows */
		n = req_pending_tokens(r) < budget ? req_pending_tokens(r) : budget;
		need = req_blocks_needed(r, n, bs);
		while (need > avail && end > i) {
			const struct req_view *victim = inst->running[--end];

			assert(plan->n_preempt < plan->cap_preempt);
			plan->preempt[plan->n_preempt++] = victim;
			free_blocks += victim->kv_blocks;
			avail += victim->kv_blocks + pledge(victim, bs);
		}
		if (end == i)   /* r itself was the last victim */
			break;
		plan_add(plan, r, n);
		budget -= n;
		avail -= need;
		free_blocks -= need;
	}

	/* 2. Prefills under way, in admission order, as chunks.  Their blocks
	 * are pledged, so a chunk shrinks only if the pool holds fewer free
	 * blocks than were pledged (blocks held outside the running set). */
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

	/* 3. New requests in queue order, as chunks, if all their blocks fit. */
	n_seqs = end + inst->n_inflight;
	for (i = 0; i < inst->n_waiting && budget > 0 && n_seqs < (uint32_t)p->max_seqs;
	     i++, n_seqs++) {
		const struct req_view *w = inst->waiting[i];
		int32_t rest = req_pending_tokens(w);
		int32_t whole = req_blocks_needed(w, rest, bs);
		int32_t n = rest < budget ? rest : budget;
		int32_t need = req_blocks_needed(w, n, bs);

		if (whole > avail || need > free_blocks)
			break;
		plan_add(plan, w, n);
		budget -= n;
		avail -= whole;
		free_blocks -= need;
	}
}

static uint32_t sarathi_max_items(const void *priv)
{
	const struct sarathi *p = priv;

	return (uint32_t)p->max_seqs;
}

/* With nobody waiting and nothing prefilling (no pledges), the decodes fill
 * the budget first. */
static uint32_t sarathi_steady_decode(const void *priv)
{
	const struct sarathi *p = priv;

	return (uint32_t)p->budget;
}

const struct batch_policy_ops batch_sarathi_ops = {
	.version = POLICY_VERSION,
	.name = "sarathi",
	.description = "Sarathi-Serve stall-free batching: all decodes, then prefill chunks "
		       "(under way, then FCFS new) to a token budget; recompute preemption from the end",
	.params = "token_budget=TOKENS (512), max_num_seqs=N (256, at most token_budget)",
	.priv_size = sizeof(struct sarathi),
	.init = sarathi_init,
	.pick_step = sarathi_pick_step,
	.max_items = sarathi_max_items,
	.plan_batch_key = "max_num_seqs",
	.plan_chunk_key = "token_budget",
	.plan_batch_within_chunk = true,
	.steady_decode = sarathi_steady_decode,
};
