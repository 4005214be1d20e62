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
 *   admission=greedy|no_evict|peak  greedy (default): admit by the blocks a
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
 *                             peak: S-LoRA's and LightLLM's router rule
 *                             (ReqQueue._can_add_new_req): only the peak
 *                             over time of the pool's use must fit, not
 *                             every request's final size at once.  Each
 *                             running request and the candidate (and those
 *                             admitted before it) is (c, r): the tokens it
 *                             holds once its next step is in, c = prompt +
 *                             max(generated, 1), and the tokens it still
 *                             grows by, r = its maximum output as above
 *                             less what c holds of it.  Sorted by r,
 *                             largest first, the pool is at its fullest
 *                             when one of them finishes: the i-th (0-based)
 *                             finishes when the first i + 1 hold their c
 *                             plus r_i each and the others have left, so
 *                             the peak is max over i of sum_{j<=i} c_j +
 *                             (i + 1) r_i, in blocks (each c and r_i
 *                             rounded up to whole blocks: exact at
 *                             --block-size 1, an upper bound above it).  A
 *                             waiting request is admitted while that peak
 *                             fits the free blocks plus those the running
 *                             requests hold (what else the pool holds,
 *                             e.g. adapters' pages, stays out).  Like
 *                             no_evict it reads predictions and never
 *                             preempts a request that keeps to its
 *                             reservation; it makes no steady-decode
 *                             promise (the peak of a waiting head changes
 *                             as the running requests decode).
 *   admit_wait=N              decode steps after a step that admitted
 *                             requests before the queue is looked at again
 *                             while any request runs (default 0: every
 *                             step).  S-LoRA's and LightLLM's router
 *                             (RouterManager._step) decodes
 *                             max_wait_tokens = 10 steps after each prefill
 *                             before it tries a new batch, and then tries
 *                             on every step until one is admitted; an idle
 *                             instance admits at once.  The count is of the
 *                             plans this policy returned, so it is state
 *                             pick_step changes: no steady-decode promise.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "policy.h"

/* admission=: the names the parser, its error and the help read. */
enum vllm_admission { ADM_GREEDY, ADM_NO_EVICT, ADM_PEAK, ADM_N };
static const char *const admission_names[ADM_N] = {
	[ADM_GREEDY] = "greedy", [ADM_NO_EVICT] = "no_evict", [ADM_PEAK] = "peak",
};

struct vllm {
	int32_t max_seqs;
	int32_t max_tokens;
	bool chunked;
	bool v0;
	bool no_evict;   /* admission=no_evict or peak: reservations, no preemption */
	bool peak;       /* admission=peak */
	int32_t admit_wait;  /* steps: decode steps between admissions, 0 = none */
	int32_t waited;      /* steps: decode-only plans since the last admitting one */
};

static int vllm_init(void *priv, struct ss_params *params, struct ss_error *err)
{
	struct vllm *p = priv;
	int64_t seqs, tokens, wait;
	const char *adm;
	int rc;

	rc = ss_params_int(params, "max_num_seqs", 256, &seqs, err);
	if (!rc)
		rc = ss_params_int(params, "max_num_batched_tokens", 8192, &tokens, err);
	if (!rc)
		rc = ss_params_bool(params, "chunked", true, &p->chunked, err);
	if (!rc)
		rc = ss_params_bool(params, "v0", false, &p->v0, err);
	if (!rc)
		rc = ss_params_int(params, "admit_wait", 0, &wait, err);
	if (rc)
		return rc;
	adm = ss_params_str(params, "admission", admission_names[ADM_GREEDY]);
	{
		int a = 0;

		while (a < ADM_N && strcmp(adm, admission_names[a]))
			a++;
		if (a == ADM_N)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--policy vllm: expected admission=%s, %s or %s, got '%s'",
					    admission_names[ADM_GREEDY], admission_names[ADM_NO_EVICT],
					    admission_names[ADM_PEAK], adm);
		p->no_evict = a != ADM_GREEDY;
		p->peak = a == ADM_PEAK;
	}
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
	if (wait < 0 || wait > 1 << 20)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy vllm: expected 0 <= admit_wait <= 1048576, got %lld",
				    (long long)wait);
	p->max_seqs = (int32_t)seqs;
	p->max_tokens = (int32_t)tokens;
	p->admit_wait = (int32_t)wait;
	p->waited = p->admit_wait;
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

/* ---- admission=peak ------------------------------------------------------ */

/* Tokens r holds once its next step is in (prompt + max(generated, 1)),
 * and tokens it may still grow by to reach no_evict_tokens. */
static int64_t peak_now(const struct req_view *r, const struct inst_view *inst)
{
	int64_t c = (int64_t)r->prompt_tokens + (r->generated_tokens > 0 ? r->generated_tokens : 1);
	int64_t fin = no_evict_tokens(r, inst);

	return c < fin ? c : fin;
}

static int64_t peak_rest(const struct req_view *r, const struct inst_view *inst)
{
	return no_evict_tokens(r, inst) - peak_now(r, inst);
}

static int64_t blocks_of(int64_t tokens, const struct inst_view *inst)
{
	return (tokens + inst->block_size - 1) / inst->block_size;
}

/* One plan's working list: the running requests and those admitted so
 * far, by peak_rest, largest first, in the plan's scratch (policy.h). */
struct peak {
	const struct req_view **r;
	uint32_t n;
	int64_t cap;     /* blocks: the free ones plus those the running requests hold */
};

/* Insert r at its place, after those with the same rest; its index.  O(n). */
static uint32_t peak_insert(struct peak *pk, const struct req_view *r, const struct inst_view *inst)
{
	int64_t rest = peak_rest(r, inst);
	uint32_t at = pk->n;

	while (at > 0 && peak_rest(pk->r[at - 1], inst) < rest)
		at--;
	memmove(pk->r + at + 1, pk->r + at, (pk->n - at) * sizeof(*pk->r));
	pk->r[at] = r;
	pk->n++;
	return at;
}

/* The running requests sorted: O(n^2) moves at worst, memmove's. */
static void peak_start(struct peak *pk, const struct inst_view *inst, const struct step_plan *plan)
{
	pk->r = plan->scratch;
	pk->n = 0;
	pk->cap = inst->free_blocks;
	for (uint32_t i = 0; i < inst->n_running; i++) {
		pk->cap += inst->running[i]->kv_blocks;
		peak_insert(pk, inst->running[i], inst);
	}
}

/* Admit w when the peak with it fits pk->cap; else leave the list as it
 * was.  O(n). */
static bool peak_admit(struct peak *pk, const struct req_view *w, const struct inst_view *inst)
{
	int64_t held = 0, need = 0;
	uint32_t at = peak_insert(pk, w, inst);

	for (uint32_t i = 0; i < pk->n; i++) {
		int64_t v;

		held += blocks_of(peak_now(pk->r[i], inst), inst);
		v = held + (int64_t)(i + 1) * blocks_of(peak_rest(pk->r[i], inst), inst);
		if (v > need)
			need = v;
	}
	if (need <= pk->cap)
		return true;
	memmove(pk->r + at, pk->r + at + 1, (pk->n - at - 1) * sizeof(*pk->r));
	pk->n--;
	return false;
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

/* Whether the admission rule lets waiting request w in (greedy: always;
 * the blocks its next step needs are checked by the caller), taking its
 * reservation (no_evict: from *avail) or its place in the peak list. */
static bool admit(const struct vllm *p, struct peak *pk, int64_t *avail, const struct req_view *w,
		  const struct inst_view *inst)
{
	if (p->peak)
		return peak_admit(pk, w, inst);
	if (p->no_evict) {
		int64_t full = no_evict_remaining(w, inst);

		if (full > *avail)
			return false;
		*avail -= full;
	}
	return true;
}

/* vLLM V0: a prefill-only step when any waiting prompt fits (and
 * may_admit), else a decode-only step.  Returns the items planned for
 * running requests (0 for a prefill-only plan). */
static uint32_t v0_pick_step(const struct vllm *p, const struct inst_view *inst, bool may_admit,
			 struct step_plan *plan)
{
	int32_t budget = p->max_tokens;
	int32_t free_blocks = inst->free_blocks;
	uint32_t end = inst->n_running;
	int64_t avail = p->no_evict && !p->peak && may_admit && inst->n_waiting > 0 ?
			no_evict_available(inst) : 0;
	uint32_t n_wait = may_admit ? inst->n_waiting : 0;
	struct peak pk = { 0 };
	uint32_t i;

	if (p->peak && n_wait > 0)
		peak_start(&pk, inst, plan);
	for (i = 0; i < n_wait; i++) {
		const struct req_view *w = inst->waiting[i];
		int32_t n = req_pending_tokens(w), need;

		if ((int32_t)(inst->n_running + inst->n_inflight + i) >= p->max_seqs || n > budget)
			break;
		need = req_blocks_needed(w, n, inst->block_size);
		if (need > free_blocks)
			break;
		if (!admit(p, &pk, &avail, w, inst))
			break;
		plan->items[plan->n_items++] = (struct step_item){ .req = w, .tokens = n };
		budget -= n;
		free_blocks -= need;
	}
	if (plan->n_items > 0)
		return 0;
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
	return plan->n_items;
}

/* admit_wait: whether this step may admit (nothing runs, or admit_wait
 * decode steps have passed since the last admission), and the count after
 * the plan: reset by a plan that admits, one more for any other plan. */
static bool wait_over(const struct vllm *p, const struct inst_view *inst)
{
	return p->waited >= p->admit_wait || inst->n_running + inst->n_inflight == 0;
}

static void wait_count(struct vllm *p, const struct step_plan *plan, uint32_t n_before)
{
	if (p->admit_wait == 0 || plan->n_items == 0)
		return;
	if (plan->n_items > n_before)
		p->waited = 0;
	else if (p->waited < p->admit_wait)
		p->waited++;
}

static void vllm_pick_step(void *priv, const struct inst_view *inst, int64_t now,
			   const struct policy_host *host, struct step_plan *plan)
{
	struct vllm *p = priv;
	int32_t budget = p->max_tokens;
	int32_t free_blocks = inst->free_blocks;
	uint32_t end = inst->n_running;  /* running[end..) have been preempted */
	uint32_t n_run;                  /* items planned for running requests */
	int64_t avail;                   /* admission=no_evict: blocks no reservation claims */
	struct peak pk = { 0 };          /* admission=peak: the working list */
	bool may_admit = wait_over(p, inst);
	uint32_t i;

	(void)now;
	(void)host;
	if (p->v0) {
		wait_count(p, plan, v0_pick_step(p, inst, may_admit, plan));
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
	n_run = plan->n_items;
	if (plan->n_preempt > 0 || !may_admit) {
		wait_count(p, plan, n_run);
		return;
	}

	avail = p->no_evict && !p->peak && inst->n_waiting > 0 ? no_evict_available(inst) : 0;
	if (p->peak && inst->n_waiting > 0)
		peak_start(&pk, inst, plan);
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
		if (!admit(p, &pk, &avail, w, inst))
			break;
		plan->items[plan->n_items++] = (struct step_item){ .req = w, .tokens = n };
		budget -= n;
		free_blocks -= need;
	}
	wait_count(p, plan, n_run);
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

	if (p->peak || p->admit_wait > 0)
		return 0;   /* no promise: a waiting head's peak moves as others decode;
			     * admit_wait counts plans */
	return p->v0 ? UINT32_MAX : (uint32_t)p->max_tokens;
}

/* admission=no_evict and peak read each request's maximum output from its
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
		       "TensorRT-LLM's no-evict admission or S-LoRA's peak admission",
	.params = "max_num_seqs=N (256), max_num_batched_tokens=N (8192), chunked=on|off (on), "
		  "v0=on|off (off), admission=greedy|no_evict|peak (greedy), admit_wait=N (0)",
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
