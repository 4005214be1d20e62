/* vllm — continuous batching as vLLM's scheduler does it (V1 engine).
 *
 * Each step first serves the running set in admission order: every running
 * request gets its pending tokens (1 for a decode; the rest of its prompt, in
 * chunks when chunked prefill is on) within the step's token budget.  When
 * the KV pool cannot hold a running request's next tokens, the newest
 * running request is preempted (recompute: it loses its KV and goes back to
 * the front of the waiting queue), repeatedly, possibly the request itself.
 * Then, if nobody was preempted, waiting requests are admitted in queue
 * order while the sequence limit, the token budget and the free blocks
 * allow; the first one that does not fit stops admission (no overtaking, as
 * in vLLM's FCFS scheduler).  Running decodes are therefore never starved by
 * new prefills.
 *
 * Parameters:
 *   max_num_seqs=N            running-set limit (default 256)
 *   max_num_batched_tokens=N  token budget per step (default 8192)
 *   chunked=on|off            chunked prefill (default on, as vLLM V1);
 *                             off: a prompt is prefilled whole, so a prompt
 *                             longer than the budget can never run and is
 *                             rejected on arrival
 *   v0=on|off                 vLLM V0's default scheduler (implies chunked
 *                             off): prefills first -- a step admits waiting
 *                             requests' whole prompts while they fit, and
 *                             runs only them; only a step that admits
 *                             nobody decodes the running requests (with the
 *                             same preemption).  Decodes stall while
 *                             prompts arrive: the baseline Sarathi-Serve
 *                             and DistServe compare against.
 *   admission=greedy|no_evict greedy (default): admit by the blocks a
 *                             request needs now and preempt when the pool
 *                             runs out, as vLLM.  no_evict: TensorRT-LLM's
 *                             default capacity scheduler,
 *                             GUARANTEED_NO_EVICT: a waiting request is
 *                             admitted only when the blocks for its whole
 *                             prompt plus its maximum output fit in the
 *                             free blocks less what every running (and
 *                             already admitted) request still needs to
 *                             reach its own maximum output; nobody is then
 *                             preempted.  A request's maximum output is its
 *                             predicted output (req_view.predicted_output:
 *                             the policy asks for predictions, so a run
 *                             without --predictor gets the oracle, the
 *                             trace's output length, which a replay's
 *                             max_tokens equals with ignore_eos), or, with
 *                             --predictor none, the rest of the model's
 *                             context.  Only a request that outgrows its
 *                             reservation (a noisy prediction below the
 *                             truth) can still be preempted, as in greedy
 *                             mode, so that the run always progresses.
 */
#include <errno.h>
#include <string.h>

#include "policy.h"

struct vllm {
	int32_t max_seqs;
	int32_t max_tokens;
	bool chunked;
	bool v0;
	bool no_evict;   /* admission=no_evict */
};

static int vllm_init(void *priv, struct ss_params *params, struct ss_error *err)
{
	struct vllm *p = priv;
	int64_t seqs, tokens;
	const char *adm;
	int rc;

	rc = ss_params_int(params, "max_num_seqs", 256, &seqs, err);
	if (!rc)
		rc = ss_params_int(params, "max_num_batched_tokens", 8192, &tokens, err);
	if (!rc)
		rc = ss_params_bool(params, "chunked", true, &p->chunked, err);
	if (!rc)
		rc = ss_params_bool(params, "v0", false, &p->v0, err);
	if (rc)
		return rc;
	adm = ss_params_str(params, "admission", "greedy");
	if (strcmp(adm, "greedy") && strcmp(adm, "no_evict"))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy vllm: expected admission=greedy or admission=no_evict, got '%s'",
				    adm);
	p->no_evict = !strcmp(adm, "no_evict");
	if (p->v0)
		p->chunked = false;
	if (seqs < 1 || seqs > 1 << 20)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy vllm: expected 1 <= max_num_seqs <= 1048576, got %lld",
				    (long long)seqs);
	if (tokens < 1 || tokens > 1 << 24)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy vllm: expected 1 <= max_num_batched_tokens <= 16777216, got %lld",
				    (long long)tokens);
	p->max_seqs = (int32_t)seqs;
	p->max_tokens = (int32_t)tokens;
	return 0;
}

/* admission=no_evict: the tokens request r may reach, its prompt plus its
 * maximum output (the prediction; without one the model's context), never
 * more than the model's context. */
static int64_t no_evict_tokens(const struct req_view *r, const struct inst_view *inst)
{
	int64_t n = r->predicted_output >= 0 ? (int64_t)r->prompt_tokens + r->predicted_output :
		    inst->max_model_len > 0 ? inst->max_model_len :
		    (int64_t)req_total_tokens(r) + 1;

	if (inst->max_model_len > 0 && n > inst->max_model_len)
		n = inst->max_model_len;
	return n;
}

/* Blocks r still needs to reach no_evict_tokens, beyond those it holds (0
 * once it has outgrown its reservation). */
static int64_t no_evict_remaining(const struct req_view *r, const struct inst_view *inst)
{
	int64_t need = (no_evict_tokens(r, inst) + inst->block_size - 1) / inst->block_size;

	return need > r->kv_blocks ? need - r->kv_blocks : 0;
}

/* admission=no_evict: the free blocks left once every running request has
 * reached its maximum output (negative when the reservations exceed them:
 * a request that outgrew its prediction). */
static int64_t no_evict_available(const struct inst_view *inst)
{
	int64_t avail = inst->free_blocks;

	for (uint32_t i = 0; i < inst->n_running; i++)
		avail -= no_evict_remaining(inst->running[i], inst);
	return avail;
}

static bool vllm_admissible(const void *priv, const struct req_view *req,
			    const struct inst_view *inst, const char **reason)
{
	const struct vllm *p = priv;

	if (!p->chunked && req->prompt_tokens > p->max_tokens) {
		*reason = "prompt longer than max_num_batched_tokens with chunked prefill off";
		return false;
	}
	if (p->no_evict && inst->total_blocks > 0 &&
	    no_evict_remaining(req, inst) > inst->total_blocks) {
		*reason = "prompt plus maximum output larger than the KV cache (admission=no_evict)";
		return false;
	}
	return true;
}

/* vLLM V0: a prefill-only step when any waiting prompt fits, else a
 * decode-only step. */
static void v0_pick_step(const struct vllm *p, const struct inst_view *inst,
			 struct step_plan *plan)
{
	int32_t budget = p->max_tokens;
	int32_t free_blocks = inst->free_blocks;
	uint32_t end = inst->n_running;
	int64_t avail = p->no_evict && inst->n_waiting > 0 ? no_evict_available(inst) : 0;
	uint32_t i;

	for (i = 0; i < inst->n_waiting; i++) {
		const struct req_view *w = inst->waiting[i];
		int32_t n = req_pending_tokens(w), need;

		if ((int32_t)(inst->n_running + inst->n_inflight + i) >= p->max_seqs || n > budget)
			break;
		need = req_blocks_needed(w, n, inst->block_size);
		if (need > free_blocks)
			break;
		if (p->no_evict) {
			int64_t full = no_evict_remaining(w, inst);

			if (full > avail)
				break;
			avail -= full;
		}
		plan->items[plan->n_items++] = (struct step_item){ .req = w, .tokens = n };
		budget -= n;
		free_blocks -= need;
	}
	if (plan->n_items > 0)
		return;
	for (i = 0; i < end; i++) {
		const struct req_view *r = inst->running[i];
		int32_t n = req_pending_tokens(r);
		int32_t need = req_blocks_needed(r, n, inst->block_size);

		while (need > free_blocks && end > i) {
			const struct req_view *victim = inst->running[--end];

			plan->preempt[plan->n_preempt++] = victim;
			free_blocks += victim->kv_blocks;
		}
		if (end == i)
			break;
		plan->items[plan->n_items++] = (struct step_item){ .req = r, .tokens = n };
		free_blocks -= need;
	}
}

static void vllm_pick_step(void *priv, const struct inst_view *inst, int64_t now,
			   const struct policy_host *host, struct step_plan *plan)
{
	const struct vllm *p = priv;
	int32_t budget = p->max_tokens;
	int32_t free_blocks = inst->free_blocks;
	uint32_t end = inst->n_running;  /* running[end..) have been preempted */
	int64_t avail;                   /* admission=no_evict: blocks no reservation claims */
	uint32_t i;

	(void)now;
	(void)host;
	if (p->v0) {
		v0_pick_step(p, inst, plan);
		return;
	}
	for (i = 0; i < end && budget > 0; i++) {
		const struct req_view *r = inst->running[i];
		int32_t n = req_pending_tokens(r), need;

		if (n > budget) {
			if (!p->chunked)
				continue;
			n = budget;
		}
		need = req_blocks_needed(r, n, inst->block_size);
		while (need > free_blocks && end > i) {
			const struct req_view *victim = inst->running[--end];

			plan->preempt[plan->n_preempt++] = victim;
			free_blocks += victim->kv_blocks;
		}
		if (end == i)   /* r itself was the last victim */
			break;
		plan->items[plan->n_items++] = (struct step_item){ .req = r, .tokens = n };
		budget -= n;
		free_blocks -= need;
	}
	if (plan->n_preempt > 0)
		return;

	avail = p->no_evict && inst->n_waiting > 0 ? no_evict_available(inst) : 0;
	for (i = 0; i < inst->n_waiting && budget > 0; i++) {
		const struct req_view *w = inst->waiting[i];
		int32_t n = req_pending_tokens(w), need;

		if ((int32_t)(end + inst->n_inflight + i) >= p->max_seqs)
			break;
		if (n > budget) {
			if (!p->chunked)
				break;
			n = budget;
		}
		need = req_blocks_needed(w, n, inst->block_size);
		if (need > free_blocks)
			break;
		if (p->no_evict) {
			int64_t full = no_evict_remaining(w, inst);

			if (full > avail)
				break;
			avail -= full;
		}
		plan->items[plan->n_items++] = (struct step_item){ .req = w, .tokens = n };
		budget -= n;
		free_blocks -= need;
	}
}

static uint32_t vllm_max_items(const void *priv)
{
	const struct vllm *p = priv;

	return (uint32_t)p->max_seqs;
}

/* With nobody waiting, each running decode gets its token while the budget
 * lasts (V0: a decode-only step has no budget). */
static uint32_t vllm_steady_decode(const void *priv)
{
	const struct vllm *p = priv;

	return p->v0 ? UINT32_MAX : (uint32_t)p->max_tokens;
}

/* admission=no_evict reads each request's maximum output from its
 * prediction. */
static bool vllm_uses_predictions(const void *priv)
{
	const struct vllm *p = priv;

	return p->no_evict;
}

const struct batch_policy_ops batch_vllm_ops = {
	.version = POLICY_VERSION,
	.name = "vllm",
	.description = "continuous batching, decodes first then FCFS prefills, "
		       "optional chunked prefill, recompute preemption of the newest "
		       "or TensorRT-LLM's no-evict admission",
	.params = "max_num_seqs=N (256), max_num_batched_tokens=N (8192), chunked=on|off (on), "
		  "v0=on|off (off), admission=greedy|no_evict (greedy)",
	.priv_size = sizeof(struct vllm),
	.init = vllm_init,
	.admissible = vllm_admissible,
	.pick_step = vllm_pick_step,
	.max_items = vllm_max_items,
	.plan_batch_key = "max_num_seqs",
	.plan_chunk_key = "max_num_batched_tokens",
	.plan_batch_within_chunk = false,
	.steady_decode = vllm_steady_decode,
	.uses_predictions = vllm_uses_predictions,
};
