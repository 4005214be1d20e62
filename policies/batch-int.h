/* servesim — helpers shared by the batch policies (private to policies/).
 *
 * Plan building and recompute preemption are the same in every policy that
 * serves a running set in order and takes victims from its end, and the
 * max_len reservation is the same in the two policies that reserve KV per
 * request as FasterTransformer and Orca do.  Each helper only reads views and
 * writes the engine's plan buffers, so the policies stay free of allocation.
 */
#ifndef SS_BATCH_INT_H
#define SS_BATCH_INT_H

#include <assert.h>

#include "policy.h"

/* Is r a decode for the stall-free policies (decodes before prefills):
 * one token pending, or decoding with drafts to verify (req_decoding). */
static inline bool batch_decode(const struct req_view *r)
{
	return req_pending_tokens(r) <= 1 || req_decoding(r);
}

/* Schedule n tokens of r in this step. */
static inline void plan_add(struct step_plan *plan, const struct req_view *r, int32_t n)
{
	assert(plan->n_items < plan->cap_items);
	assert(n >= 1 && n <= req_pending_tokens(r));
	plan->items[plan->n_items++] = (struct step_item){ .req = r, .tokens = n };
}

/* Make room for `need` new blocks for inst->running[i]: while they exceed
 * *free_blocks, preempt the running request at the end of the running set
 * (running[*end - 1]; the engine puts the preferred victim last), possibly
 * running[i] itself, and give its blocks back to *free_blocks.  Returns
 * false when running[i] was preempted. */
static inline bool plan_make_room(struct step_plan *plan, const struct inst_view *inst,
				  uint32_t i, int32_t need, int32_t *free_blocks, uint32_t *end)
{
	while (need > *free_blocks && *end > i) {
		const struct req_view *victim = inst->running[--*end];

		assert(plan->n_preempt < plan->cap_preempt);
		plan->preempt[plan->n_preempt++] = victim;
		*free_blocks += victim->kv_blocks;
	}
	return *end > i;
}

/* The largest m <= n such that m more tokens of r fit in the blocks it holds
 * plus free_blocks (req_blocks_needed(r, m) <= free_blocks); 0 when none. */
static inline int32_t fit_tokens(const struct req_view *r, int32_t n, int32_t free_blocks,
				 int32_t block_size)
{
	int64_t room = ((int64_t)r->kv_blocks + free_blocks) * block_size - r->computed_tokens;

	if (room < n)
		n = room > 0 ? (int32_t)room : 0;
	return n;
}

/* The context a request may reach under a max_len parameter: max_len,
 * where 0 means the model's, never more than the model's context. */
static inline int32_t max_len_tokens(int32_t max_len, const struct inst_view *inst)
{
	if (max_len > 0 && (inst->max_model_len <= 0 || max_len < inst->max_model_len))
		return max_len;
	return inst->max_model_len;
}

/* Blocks reserved for a request that may reach `tokens` tokens. */
static inline int32_t reserve_blocks(int32_t tokens, const struct inst_view *inst)
{
	return tokens > 0 ? (tokens + inst->block_size - 1) / inst->block_size : 0;
}

/* Blocks the running set has reserved: each request holds at least its
 * reservation, more once it has outgrown it. */
static inline int64_t reserved_by_running(const struct inst_view *inst, int32_t reserve)
{
	int64_t sum = 0;

	for (uint32_t i = 0; i < inst->n_running; i++) {
		int32_t held = inst->running[i]->kv_blocks;

		sum += held > reserve ? held : reserve;
	}
	return sum;
}

#endif
