/* servesim — the attention-DP group step shape (step-int.h): lock-step ranks
 * of data-parallel attention.
 *
 * With dp_attention D > 1 an instance's D attention ranks (pool units
 * first + g D .. first + g D + D - 1, engine-int.h) each plan their own
 * batch with their own policy, queues and KV cache, but step together,
 * as SGLang and TensorRT-LLM run them: every MoE layer's all-to-all (or
 * all-gather and reduce-scatter) takes every rank's tokens, so no rank
 * starts a step before all have finished the last one (docs/cost-models.md
 * "Expert parallelism"):
 *   - the group schedules when none of its ranks is busy: each rank
 *     plans (eng_unit_plan decides its plan or steady step: form),
 *     the engine profile's attention-DP balancer (adp_balance) may hold
 *     the ranks' context work back, then each rank forms its step
 *     (its launch leaves it: ready); when none has anything to run
 *     the group stays idle;
 *   - a rank with nothing to run joins with an idle batch, one dummy
 *     decode token that emits nothing (TensorRT-LLM's attention-DP dummy
 *     request, _pad_attention_dp_dummy_request; SGLang's IDLE batch,
 *     prepare_mlp_sync_batch);
 *   - every rank is priced with the group's MoE tokens (exec_step.
 *     group_tokens: the ranks' real tokens summed), and the step lasts
 *     the longest rank's time: a shorter rank waits in the collectives
 *     (its wait is counted as all-reduce time, at idle power);
 *   - all ranks' completions fall at that one time, in rank order.
 * Multi-step bursts and pipeline stages are refused with DP attention at
 * setup.  O(D) per group step, on top of each rank's own work. */
#include "engine-int.h"
#include "step-int.h"

#include "sstime.h"

/* A rank: what its schedule decided (form), the step it then formed (its
 * items in fl_*, summed up in xs), waiting for the group's launch
 * (ready), and its price at the group's MoE tokens; on a group's first
 * rank, the attention-DP balancer's counters (group steps,
 * engine_profile.adp_balance). */
struct dp_rank {
	enum unit_form form;
	bool ready;
	struct exec_step xs;
	int64_t prefill;          /* its prefill tokens (eng_step_account) */
	struct exec_result xr;
	uint32_t adp_wait, adp_batch;
};

static inline struct dp_rank *rank(struct instance *in)
{
	return in->shape_priv;
}

static inline const struct dp_rank *rank_c(const struct instance *in)
{
	return in->shape_priv;
}

/* The first rank of in's lock-step group. */
static struct instance *group_of(struct engine *e, const struct instance *in)
{
	const struct pool *pl = in->pl;

	return &e->inst[pl->first + (in->idx - pl->first) / (uint32_t)pl->dp * (uint32_t)pl->dp];
}

/* The idle batch a rank with nothing to run joins a group step with. */
static const struct cost_item idle_item = { .tokens = 1, .context = 0 };
static const struct exec_req idle_req = { .block_table = NULL, .n_blocks = 0, .emit = false };

/* Launch the group step of rk[0 .. D) whose ready ranks formed
 * a step (at least one): price each (the rest an idle batch), and start
 * all of them for the longest one's duration. */
static int group_launch(struct engine *e, struct instance *rk, uint32_t D, struct ss_error *err)
{
	int64_t group_tokens = 0, dur = 0, end;
	int rc;

	for (uint32_t k = 0; k < D; k++)
		if (rank(&rk[k])->ready)
			group_tokens += rank(&rk[k])->xs.total_tokens;
	for (uint32_t k = 0; k < D; k++) {
		struct instance *in = &rk[k];
		struct dp_rank *r = rank(in);

		if (!r->ready) {
			in->n_fl = 0;
			r->xs = (struct exec_step){
				.instance = (int32_t)in->idx, .n_items = 1, .items = &idle_item,
				.reqs = &idle_req, .total_tokens = 1, .start_ns = e->now,
			};
			r->prefill = 0;
		}
		r->xs.group_tokens = group_tokens;
		rc = eng_step_price(in, &r->xs, &r->xr, err);
		if (rc)
			return rc;
		if (r->xr.duration_ns > dur)
			dur = r->xr.duration_ns;
	}
	if (!ss_time_add(e->now, dur, &end))
		return eng_time_error(err, ((double)e->now + (double)dur) / 1e9,
				      "a step on instance %u", rk[0].idx);
	for (uint32_t k = 0; k < D; k++) {
		struct instance *in = &rk[k];
		struct dp_rank *r = rank(in);
		struct exec_result *xr = &r->xr;
		int64_t wait = dur - xr->duration_ns;

		xr->energy_j += in->pl->gpu->idle_w * in->pl->tp * (double)wait * 1e-9;
		xr->op_ns[COST_OP_ALLREDUCE] += wait;
		xr->duration_ns = dur;
		if (r->ready) {
			eng_step_account(in, &r->xs, xr, r->prefill);
		} else {
			/* the idle batch: the rank's GPUs' time and energy,
			 * no request's (and not a step of the batch statistics) */
			eng_step_energy(in, xr, 0, 0);
			in->st->idle_steps++;
			in->st->busy_ns = ss_time_add_sat(in->st->busy_ns, dur);
			in->st->busy_energy_j += xr->energy_j;
			in->st->out_of_grid += xr->out_of_grid;
			in->st->out_of_grid_ns += xr->out_of_grid_ns;
			for (int op = 0; op < COST_OP_COUNT; op++)
				in->st->op_ns[op] += xr->op_ns[op];
		}
		r->ready = false;
		rc = eng_step_queue(e, in, end, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* An item of a plan that is context (prefill) work: more than one token,
 * or the first token of a prompt (start_step's n_prefill). */
static inline bool plan_item_ctx(const struct step_item *it)
{
	return it->tokens > 1 || it->req->generated_tokens == 0;
}

/* TensorRT-LLM's attention-DP balancer (engine_profile.adp_balance;
 * tensorrt_llm/_torch/pyexecutor/py_executor.py, _balance_adp_requests):
 * over the ranks' plans of this group step, whether every rank has
 * context work and room for it (fewer generation items than its policy's
 * most items) and generation work; the new context work of every rank is
 * held back (dropped from the plans: the requests stay queued) until all
 * ranks have some, for at most timeout_iters group steps, or at once when
 * some rank has nothing to decode; once all have some and all decode, it
 * waits batching_wait_iters steps more.  The counters are the group's
 * (TensorRT-LLM's ranks compute them alike from the gathered counts).
 * O(items of the plans). */
static void adp_balance(struct engine *e, struct instance *rk, uint32_t D)
{
	const struct engine_profile *p = e->cfg.engine;
	struct dp_rank *g = rank(rk);
	bool room = true, all_ctx = true, all_gen = true, hold = true;

	for (uint32_t k = 0; k < D; k++) {
		const struct instance *in = &rk[k];
		uint32_t ctx = 0, gen = 0;

		if (rank_c(in)->form == UNIT_STEADY) {
			gen = in->n_running;
		} else if (rank_c(in)->form == UNIT_PLAN) {
			for (uint32_t i = 0; i < in->plan.n_items; i++)
				ctx += plan_item_ctx(&in->plan.items[i]);
			gen = in->plan.n_items - ctx;
		}
		room &= gen < e->bops->max_items(in->batch_priv);
		all_ctx &= ctx > 0;
		all_gen &= gen > 0;
	}
	if (room && all_ctx) {
		g->adp_wait = 0;
		hold = false;
		if (all_gen) {
			hold = g->adp_batch < (uint32_t)p->adp_batching_wait_iters;
			g->adp_batch = hold ? g->adp_batch + 1 : 0;
		}
	} else if (++g->adp_wait >= (uint32_t)p->adp_timeout_iters || !all_gen) {
		g->adp_wait = 0;
		hold = false;
	}
	if (!hold)
		return;
	for (uint32_t k = 0; k < D; k++) {
		struct step_plan *pl = &rk[k].plan;
		uint32_t w = 0;

		if (rank(&rk[k])->form != UNIT_PLAN)
			continue;
		for (uint32_t i = 0; i < pl->n_items; i++)
			if (!plan_item_ctx(&pl->items[i]))
				pl->items[w++] = pl->items[i];
		pl->n_items = w;   /* >= 1: every rank decodes (all_gen) */
	}
}

/* EV_SCHEDULE of an attention rank: when no rank of its group is busy,
 * every rank forms its step (the engine profile's attention-DP balancer
 * may hold context work back) and the group launches them together. */
static int group_schedule(struct engine *e, struct instance *in, struct ss_error *err)
{
	struct instance *rk = group_of(e, in);
	uint32_t D = (uint32_t)in->pl->dp;
	bool any = false;
	int rc;

	for (uint32_t k = 0; k < D; k++)
		if (rk[k].busy)
			return 0;   /* the group's completion asks again */
	for (uint32_t k = 0; k < D; k++) {
		rc = eng_unit_plan(e, &rk[k], err);
		if (rc < 0)
			return rc;
		rank(&rk[k])->form = (enum unit_form)rc;
		any |= rc != UNIT_NONE;
	}
	if (!any)
		return 0;
	if (e->cfg.engine && e->cfg.engine->adp_balance)
		adp_balance(e, rk, D);
	for (uint32_t k = 0; k < D; k++) {
		struct dp_rank *r = rank(&rk[k]);

		rc = eng_unit_start(e, &rk[k], r->form, err);
		r->form = UNIT_NONE;
		if (rc)
			return rc;
	}
	return group_launch(e, rk, D, err);
}

/* A rank's launch: its group launches it (group_launch). */
static int rank_launch(struct engine *e, struct instance *in, struct exec_step *xs,
		       int64_t prefill_tokens, struct ss_error *err)
{
	struct dp_rank *r = rank(in);

	(void)e;
	(void)err;
	r->xs = *xs;
	r->prefill = prefill_tokens;
	r->ready = true;
	return 0;
}

const struct step_shape step_dp_group = {
	.version = 1,
	.name = "dp-group",
	.priv_size = sizeof(struct dp_rank),
	/* a rank's plan depends on its own state, not on when its group
	 * starts: the steady path stays on */
	.steady = true,
	.init = step_default_init,
	.release = step_default_release,
	.next = step_default_next,
	.schedule = group_schedule,
	.view = step_default_view,
	.launch = rank_launch,
	.emit = eng_step_emit,
	.done = step_default_done,
	.power_w = step_default_power_w,
};
