/* servesim — instance scheduling: from the waiting queue to a step and
 * back (see engine-int.h).
 *
 * Owns, per instance: per tenant its requests waiting or running
 * (inst_view.tenant_active); the running set in admission order; the
 * batch policy's plan; the step in flight (fl_*); swap and energy
 * accounting of a step.  The waiting queue is a struct waitq (waitq.h),
 * which keeps it in the order's order.  on_schedule runs prepare_queues
 * (admission expiry, the queue order, the victim order of the running set,
 * prefix-cache lookups for the head of the queue), asks the batch policy
 * for a plan, applies its preemptions and starts the step (under
 * multi-step scheduling a decode step runs as a burst of steps: see
 * "bursts"); on_step_done emits tokens and finishes requests or hands
 * prefilled ones to their decode instance.
 *
 * Invariants: a request is in exactly one of waiting, running, in flight
 * between instances, finished or rejected; RF_PICKED and RF_REMOVE are
 * clear between events; an idle instance with requests running starts a
 * step, and one with only requests waiting starts one or rejects its head
 * request, unless KV leaving it for decode instances will free blocks; so
 * no instance hangs.  A decode instance whose head request must recompute
 * more than fits beside the received KV waiting behind it offers that KV's
 * requests to the policy first (offer_kv_first), so none livelocks either.
 * Cost per schedule: the waiting queue's (waitq.c says what each order
 * costs); the running set is insertion-sorted (nearly sorted between
 * steps); a step is O(items).
 */
#include "engine-int.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sstime.h"

/* r joins in's waiting queue (waitq_push), indexed by its deadline if it
 * may expire: never scheduled nor preempted, under an admission policy
 * that expires requests. */
int eng_wait_push_back(struct engine *e, struct instance *in, struct req_view *v)
{
	struct request *r = request_of(v);
	int64_t deadline = WAITQ_NEVER;

	if (e->aops->expire && r->first_sched_ns < 0 && r->v.preemptions == 0)
		deadline = e->aops->deadline(e->adm_priv, &r->v);
	in->tenant_active[v->tenant]++;
	return waitq_push(&in->wq, r, deadline, e->now);
}

void eng_tenant_rekey(struct engine *e, struct instance *in, const struct request *r)
{
	waitq_tenant_rekey(&in->wq, r, e->now);
}

static void running_compact(struct instance *in)
{
	uint32_t wr = 0;

	if (!in->n_remove)
		return;
	in->n_remove = 0;
	for (uint32_t rd = 0; rd < in->n_running; rd++) {
		struct request *r = request_of(in->running[rd]);

		if (r->flags & RF_REMOVE) {
			r->flags &= ~RF_REMOVE;
			continue;
		}
		in->running[wr++] = in->running[rd];
	}
	in->n_running = wr;
}

/* ---- steps ---------------------------------------------------------------- */

static int apply_preemptions(struct engine *e, struct instance *in, struct ss_error *err)
{
	const struct step_plan *p = &in->plan;

	for (uint32_t k = 0; k < p->n_preempt; k++) {
		struct request *r = request_of(p->preempt[k]);

		if (r->v.state != REQ_RUNNING || r->instance != (int32_t)in->idx || (r->flags & RF_REMOVE))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "batch policy %s preempted request %u which is not running on instance %u",
					    e->bops->name, r->v.id, in->idx);
		kvm_preempt(in->kv, r);   /* swapped out, or to recompute */
		r->v.state = REQ_QUEUED;
		r->v.preemptions++;
		r->flags |= RF_REMOVE;
		in->n_remove++;
		in->st->preemptions++;
	}
	running_compact(in);
	for (uint32_t k = 0; k < p->n_preempt; k++)
		if (waitq_push_front(&in->wq, request_of(p->preempt[k]), e->now))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	return 0;
}

/* Split a step's energy into prefill and decode work: prefill attention
 * to prefill, decode attention to decode, every other operator (GEMMs,
 * element-wise, LM head, collectives, host) by the two phases' shares of the
 * step's tokens; power is taken as uniform over the step.  Also tracks the
 * peak step power and the power the time series shows. */
static void account_energy(struct instance *in, const struct exec_result *xr,
			   int64_t prefill_tokens, int64_t total_tokens)
{
	double dur = (double)xr->duration_ns;
	double pf_time = (double)xr->op_ns[COST_OP_ATTN_PREFILL];
	double dec_time = (double)xr->op_ns[COST_OP_ATTN_DECODE];
	double shared = dur - pf_time - dec_time;
	double pf_share = total_tokens ? (double)prefill_tokens / (double)total_tokens : 0;
	double e_pf = xr->energy_j * (pf_time + shared * pf_share) / dur;

	in->st->prefill_energy_j += e_pf;
	in->st->decode_energy_j += xr->energy_j - e_pf;
	in->step_power_w = xr->energy_j / (dur / 1e9);
	if (in->step_power_w > in->st->peak_power_w)
		in->st->peak_power_w = in->step_power_w;
}

static int launch_step(struct engine *e, struct instance *in, struct exec_step *xs,
		       int64_t prefill_tokens, struct ss_error *err);
static int pp_launch(struct engine *e, struct instance *in, struct exec_step *xs,
		     int64_t prefill_tokens, struct ss_error *err);

static int start_step(struct engine *e, struct instance *in, struct ss_error *err)
{
	const struct step_plan *p = &in->plan;
	struct exec_step xs = { .instance = (int32_t)in->idx, .start_ns = e->now };
	uint32_t n_picked = 0;
	int64_t prefill_tokens = 0;
	int rc;

	if (eng_grow((void **)&in->fl_req, &in->cap_fl_req, p->n_items, sizeof(*in->fl_req)) ||
	    eng_grow((void **)&in->fl_tokens, &in->cap_fl_tokens, p->n_items, sizeof(*in->fl_tokens)) ||
	    eng_grow((void **)&in->fl_items, &in->cap_fl_items, p->n_items, sizeof(*in->fl_items)) ||
	    eng_grow((void **)&in->fl_xreq, &in->cap_fl_xreq, p->n_items, sizeof(*in->fl_xreq)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");

	for (uint32_t k = 0; k < p->n_items; k++) {
		struct request *r = request_of(p->items[k].req);
		int32_t tokens = p->items[k].tokens;
		bool from_wait = r->v.state == REQ_QUEUED;

		if (r->instance != (int32_t)in->idx || (!from_wait && r->v.state != REQ_RUNNING) ||
		    (r->flags & (RF_PICKED | RF_INFLIGHT)) || tokens < 1 ||
		    tokens > req_pending_tokens(&r->v))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "batch policy %s planned an invalid item (request %u, %d tokens)",
					    e->bops->name, r->v.id, tokens);
		/* its KV: host hits loaded, blocks for tokens, swapped KV back */
		rc = kvm_enter(in->kv, r, tokens, from_wait);
		if (rc)
			return ss_error_set(err, rc, NULL, 0,
					    "batch policy %s planned more KV blocks than free on instance %u",
					    e->bops->name, in->idx);
		in->fl_xreq[k] = (struct exec_req){
			.block_table = r->kv.blocks,
			.n_blocks = r->v.kv_blocks,
			.emit = r->v.computed_tokens + tokens == req_total_tokens(&r->v),
		};
		{
			int32_t pf = r->v.prompt_tokens - r->v.computed_tokens;

			pf = pf < 0 ? 0 : pf > tokens ? tokens : pf;
			e->oops->served(in->order_priv, &r->v, pf, tokens - pf);
			eng_tenant_rekey(e, in, r);
		}
		if (e->next_arrival < e->n_req)
			e->tenant_service[r->v.tenant] += tokens;
		if (from_wait) {
			r->flags |= RF_PICKED;
			n_picked++;
			r->v.state = REQ_RUNNING;
			if (eng_grow((void **)&in->running, &in->cap_running, in->n_running + 1,
				 sizeof(*in->running)))
				return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			in->running[in->n_running++] = &r->v;
			if (r->first_sched_ns < 0)
				r->first_sched_ns = e->now;
			if (waitq_mark(&in->wq, r))
				return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		}
		in->fl_req[k] = r;
		in->fl_tokens[k] = tokens;
		in->fl_items[k] = (struct cost_item){ .tokens = tokens, .context = r->v.computed_tokens };
		xs.total_tokens += tokens;
		if (r->v.computed_tokens + tokens == req_total_tokens(&r->v))
			xs.n_emit++;
		if (tokens > 1 || r->v.generated_tokens == 0) {
			xs.n_prefill++;
			prefill_tokens += tokens;
		}
	}
	if (n_picked) {
		for (uint32_t k = 0; k < p->n_items; k++)
			request_of(p->items[k].req)->flags &= ~RF_PICKED;
		waitq_take_marked(&in->wq);
	}
	if (in->n_running > in->st->peak_running)
		in->st->peak_running = in->n_running;
	in->n_fl = p->n_items;
	return launch_step(e, in, &xs, prefill_tokens, err);
}

/* The step whose items are in.fl_*[0 .. n_fl), summed up in xs, priced by
 * the executor into *xr, with the KV transfers it waits for (kvm_price,
 * which then clears them). */
static int price_step(struct instance *in, const struct exec_step *xs,
		      struct exec_result *xr, struct ss_error *err)
{
	int rc;

	rc = in->pl->xops->run_step(in->pl->xpriv, xs, xr, err);
	if (rc)
		return rc;
	if (xr->duration_ns <= 0)   /* a live step can measure 0 on a coarse clock */
		return ss_error_set(err, -ERANGE, NULL, 0,
				    "the %s executor gave a step on instance %u a duration of %" PRId64
				    " ns; expected > 0",
				    in->pl->xops->name, in->idx, xr->duration_ns);
	return kvm_price(in->kv, xr, err);
}

/* Account a priced step: its energy to its requests (by their tokens in
 * it, xs's items) and to prefill and decode work, and the instance's step
 * statistics. */
static void account_step(struct instance *in, const struct exec_step *xs,
			 const struct exec_result *xr, int64_t prefill_tokens)
{
	if (xs->total_tokens == in->n_fl) {
		/* one token each (x * 1.0 is x: the same share as below) */
		double share = xr->energy_j / (double)xs->total_tokens;

		for (uint32_t k = 0; k < in->n_fl; k++)
			in->fl_req[k]->energy_j += share;
	} else {
		for (uint32_t k = 0; k < in->n_fl; k++)
			in->fl_req[k]->energy_j += xr->energy_j * (double)in->fl_tokens[k] /
						   (double)xs->total_tokens;
	}
	account_energy(in, xr, prefill_tokens, xs->total_tokens);
	in->st->steps++;
	/* A pipeline's stages (tp GPUs each) run the step's layers one after
	 * the other: its tp x pp GPUs are busy duration / pp on average, the
	 * instance's busy time (idle energy is charged on the rest). */
	in->st->busy_ns = ss_time_add_sat(in->st->busy_ns, in->pl->pp > 1 ?
					  xr->duration_ns / in->pl->pp : xr->duration_ns);
	in->st->busy_energy_j += xr->energy_j;
	in->st->out_of_grid += xr->out_of_grid;
	in->st->out_of_grid_ns += xr->out_of_grid_ns;
	for (int op = 0; op < COST_OP_COUNT; op++)
		in->st->op_ns[op] += xr->op_ns[op];
	ss_hist_add(&in->st->batch_seqs, in->n_fl);
	ss_hist_add(&in->st->batch_tokens, xs->total_tokens);
}

/* ---- bursts (multi-step scheduling) ----------------------------------------
 *
 * With a profile's scheduler_steps k > 1 (vLLM 0.6's num_scheduler_steps;
 * docs/engines.md, "Multi-step scheduling"), a decision whose step decodes
 * one token of each of its requests (no prefill tokens: vLLM gives prompt
 * runs no lookahead slots) runs that batch for k decode steps, a burst:
 *   - the decision allocates each request's KV blocks for the tokens it
 *     computes in the burst, min(k, output tokens left), as vLLM reserves
 *     k - 1 lookahead slots; when they do not all fit, the burst is the
 *     longest whose blocks fit (at least the 1 step the policy planned: a
 *     policy does not know k);
 *   - every step is priced by the executor as a decode step of the grown
 *     contexts; the engine's scheduling and input preparation are paid by
 *     the first step only, output processing (of every token of the burst)
 *     by the last only, launches by each;
 *   - a request that has emitted its last token idles in its slot until
 *     the burst ends (the batch keeps its shape, as vLLM's does): its row
 *     is priced as a decode of its last position again, and its blocks
 *     are freed at the end;
 *   - nobody is admitted, preempted or expired within a burst (no
 *     decision is made), and the burst's tokens reach the client together
 *     at its end: k - 1 gaps of 0 and one of the whole burst in each
 *     request's ITL, its TPOT as before.
 * The burst is one completion event: within it the engine has nothing to
 * decide (an arrival queues; a schedule finds the instance busy). */

/* The steps the step in flight runs for: k for a decode-only step of a
 * profile with k > 1 scheduler steps on an instance that decodes (fewer
 * when its blocks do not fit), else 1.  O(items), O(items x k) when the
 * burst is shortened. */
static uint32_t burst_len(const struct engine *e, const struct instance *in,
			  const struct exec_step *xs)
{
	uint32_t k = engine_profile_burst(e->cfg.engine);
	int32_t bs = e->cfg.block_size;

	/* every item decodes its one pending token (a 1-token chunk of a
	 * recompute has tokens 1 but emits nothing: not a decode) */
	if (k <= 1 || xs->n_prefill || xs->total_tokens != (int64_t)in->n_fl ||
	    xs->n_emit != in->n_fl || in->pl->role == POOL_PREFILL)
		return 1;
	for (; k > 1; k--) {
		int64_t need = 0;

		for (uint32_t i = 0; i < in->n_fl; i++) {
			const struct request *r = in->fl_req[i];
			int32_t left = r->output_tokens - r->v.generated_tokens;

			need += req_blocks_needed(&r->v, left < (int32_t)k ? left : (int32_t)k, bs);
		}
		if (need <= kvm_free_blocks(in->kv))
			break;
	}
	return k;
}

/* Run the burst of nb > 1 steps formed at this decision (see "bursts"):
 * its blocks, the served tokens, each step priced and accounted; *dur its
 * duration.  xs is the first step as start_step formed it. */
static int run_burst(struct engine *e, struct instance *in, struct exec_step *xs, uint32_t nb,
		     int64_t *dur, struct ss_error *err)
{
	struct exec_result xr;
	uint32_t n_out = 0;
	double energy = 0.0;
	int rc;

	for (uint32_t k = 0; k < in->n_fl; k++) {
		struct request *r = in->fl_req[k];
		int32_t left = r->output_tokens - r->v.generated_tokens;
		int32_t bt = left < (int32_t)nb ? left : (int32_t)nb;

		/* burst_len counted these blocks free: only -ENOMEM */
		rc = kvm_grow(in->kv, r, req_blocks_needed(&r->v, bt, e->cfg.block_size));
		if (rc)
			return ss_error_set(err, rc, NULL, 0, "out of memory for a block table");
		in->fl_xreq[k].block_table = r->kv.blocks;
		in->fl_xreq[k].n_blocks = r->v.kv_blocks;
		if (bt > 1) {
			/* the first token was served by the decision */
			e->oops->served(in->order_priv, &r->v, 0, bt - 1);
			eng_tenant_rekey(e, in, r);
			if (e->next_arrival < e->n_req)
				e->tenant_service[r->v.tenant] += bt - 1;
		}
		in->fl_tokens[k] = 1;
		n_out += (uint32_t)bt;
	}
	xs->n_out = n_out;
	*dur = 0;
	for (uint32_t j = 0; j < nb; j++) {
		for (uint32_t k = 0; k < in->n_fl; k++) {
			const struct request *r = in->fl_req[k];
			int32_t left = r->output_tokens - r->v.generated_tokens;
			/* an idle slot decodes its last position again */
			int32_t at = (int32_t)j < left ? (int32_t)j : left - 1;

			in->fl_items[k].context = r->v.computed_tokens + at;
		}
		xs->engine_part = (j ? ENGINE_PART_NO_SCHED : 0u) |
				  (j + 1 < nb ? ENGINE_PART_NO_OUTPUT : 0u);
		xs->start_ns = ss_time_add_sat(e->now, *dur);
		rc = price_step(in, xs, &xr, err);
		if (rc)
			return rc;
		if (!ss_time_add(*dur, xr.duration_ns, dur))
			return eng_time_error(err, ((double)e->now + (double)*dur +
						    (double)xr.duration_ns) / 1e9,
					      "a burst of %u steps on instance %u", nb, in->idx);
		account_step(in, xs, &xr, 0);
		energy += xr.energy_j;
	}
	/* what the time series shows while the burst runs: its mean power */
	in->step_power_w = energy / ((double)*dur / 1e9);
	for (uint32_t k = 0; k < in->n_fl; k++) {
		const struct request *r = in->fl_req[k];
		int32_t left = r->output_tokens - r->v.generated_tokens;

		in->fl_tokens[k] = left < (int32_t)nb ? left : (int32_t)nb;
	}
	return 0;
}

/* ---- pipeline parallelism (docs/cost-models.md, "Pipeline parallelism") ---
 *
 * An instance of pp > 1 stages runs batches as vLLM V1
 * (--pipeline-parallel-size, its batch queue of pp) and SGLang do: a
 * new batch enters stage 1 when stage 1 is free and fewer than pp batches
 * are in flight; a request is in at most one batch in flight (the batch
 * policy sees only the running requests in none: RF_INFLIGHT); a batch's
 * tokens are emitted when it leaves the last stage.  The executor prices
 * the batch as one step of every layer; cost_pp_split cuts that into
 * stage times T_s, and between stages the activations move
 * (eng_pp_link_ns).  Formed at t, the batch occupies stage s from
 *   start_s = max(t_s, stage_free[s]),  t_0 = t,
 *   t_{s+1} = start_s + T_s + X_s  (X_s: the transfer after stage s)
 * to start_s + T_s, which becomes stage_free[s]; it completes at the end
 * of the last stage.  Alone, a batch takes sum T_s + sum X_s; with
 * enough requests to keep pp batches in flight, one leaves every max T_s
 * (plus transfer waits): bubbles appear when fewer are ready or the
 * stages differ.  Completions are in formation order (each batch starts
 * its last stage after the previous one left it), so one EV_STEP_DONE
 * per instance serves the oldest batch, ring slot pp_head. */

/* Hide the running requests in flight from the batch policy's view. */
static int pp_hide_inflight(struct instance *in)
{
	uint32_t m = 0;

	if (eng_grow((void **)&in->pp_vis, &in->cap_pp_vis, in->n_running, sizeof(*in->pp_vis)))
		return -ENOMEM;
	for (uint32_t k = 0; k < in->n_running; k++)
		if (!(request_of(in->running[k])->flags & RF_INFLIGHT))
			in->pp_vis[m++] = in->running[k];
	in->view.running = (const struct req_view *const *)in->pp_vis;
	in->view.n_running = m;
	in->view.n_inflight = in->n_running - m;
	return 0;
}

static void pp_swap(struct instance *in, struct pp_batch *b)
{
	struct request **rq = in->fl_req;
	int32_t *tk = in->fl_tokens;
	uint32_t cr = in->cap_fl_req, ct = in->cap_fl_tokens;

	in->fl_req = b->req;
	in->fl_tokens = b->tokens;
	in->cap_fl_req = b->cap_req;
	in->cap_fl_tokens = b->cap_tokens;
	b->req = rq;
	b->tokens = tk;
	b->cap_req = cr;
	b->cap_tokens = ct;
}

/* Stage times of a step xs (priced whole in xr) on a pipeline whose
 * stages differ in their layers' types (pool.stage_cm): each stage's
 * slice prices the same step, and the whole step's operators are shared
 * out as the slices' are (cost_pp_split_sliced). */
static int pp_stage_split(const struct instance *in, const struct exec_step *xs,
			  const struct exec_result *xr, int n_layers, int64_t *stage_ns,
			  struct ss_error *err)
{
	const struct pool *pl = in->pl;
	int64_t op[64][COST_OP_COUNT];
	struct cost_step cs = {
		.items = xs->items, .n_items = xs->n_items, .n_prefill = xs->n_prefill,
		.n_emit = xs->n_emit, .total_tokens = xs->total_tokens,
		.engine_part = xs->engine_part, .n_out = xs->n_out,
	};

	for (int s = 0; s < pl->pp; s++) {
		struct cost_result cr;

		int j = 0;

		while (j < s && pl->stage_cm[j] != pl->stage_cm[s])
			j++;
		if (j < s) {   /* a stage of the same layers: the same times */
			memcpy(op[s], op[j], sizeof(op[s]));
			continue;
		}
		if (cost_model_predict(pl->stage_cm[s], &cs, &cr, err))
			return -ERANGE;
		memcpy(op[s], cr.op_ns, sizeof(op[s]));
	}
	cost_pp_split_sliced(xr->op_ns, xr->duration_ns, n_layers, pl->pp,
			     (const int64_t (*)[COST_OP_COUNT])op, stage_ns);
	return 0;
}

/* The batch in in.fl_*[0 .. n_fl) (xs, prefill_tokens as launch_step
 * has them) enters the pipeline now. */
static int pp_launch(struct engine *e, struct instance *in, struct exec_step *xs,
		     int64_t prefill_tokens, struct ss_error *err)
{
	const struct model_spec *m = e->cfg.model;
	int pp = in->pl->pp;
	int64_t stage_ns[64], t = e->now, end = 0;
	/* hidden states and the residual, tokens x hidden each (vLLM's and
	 * SGLang's intermediate tensors), in the model's activation dtype */
	double bytes = 2.0 * (double)xs->total_tokens * m->hidden * m->dtype_bytes;
	struct exec_result xr = { 0 };
	struct pp_batch *b;
	int rc;

	in->burst_n = 1;
	rc = price_step(in, xs, &xr, err);
	if (rc)
		return rc;
	if (in->pl->stage_cm) {
		rc = pp_stage_split(in, xs, &xr, m->n_layers, stage_ns, err);
		if (rc)
			return rc;
	} else {
		cost_pp_split(xr.op_ns, xr.duration_ns, m->n_layers, pp, stage_ns);
	}
	for (int s = 0; s < pp; s++) {
		int64_t start = t > in->stage_free[s] ? t : in->stage_free[s];

		if (!ss_time_add(start, stage_ns[s], &end))
			return eng_time_error(err, ((double)start + (double)stage_ns[s]) / 1e9,
					      "stage %d of a step on instance %u", s, in->idx);
		in->stage_free[s] = end;
		in->st->stage_busy_ns[s] = ss_time_add_sat(in->st->stage_busy_ns[s], stage_ns[s]);
		if (s + 1 < pp) {
			int64_t x;

			rc = eng_pp_link_ns(e, in, s, bytes, &x, err);
			if (rc)
				return rc;
			if (!ss_time_add(end, x, &t))
				return eng_time_error(err, ((double)end + (double)x) / 1e9,
						      "a step on instance %u", in->idx);
		}
	}
	account_step(in, xs, &xr, prefill_tokens);
	/* step_power_w is now one stage's power while it runs this batch
	 * (tp GPUs); each batch in flight keeps about one stage busy, the
	 * other stages' GPUs idle: the instance's power with pp_n + 1 in
	 * flight (the time series scales it the same way, engine.c) */
	{
		double p = in->step_power_w * (in->pp_n + 1) +
			   in->pl->gpu->idle_w * in->pl->tp * (pp - 1 - (int)in->pp_n);

		if (p > in->st->peak_power_w)
			in->st->peak_power_w = p;
	}
	b = &in->ppb[(in->pp_head + in->pp_n) % (uint32_t)pp];
	pp_swap(in, b);
	b->n = in->n_fl;
	b->start_ns = e->now;
	b->end_ns = end;
	for (uint32_t k = 0; k < b->n; k++)
		b->req[k]->flags |= RF_INFLIGHT;
	in->n_fl = 0;
	in->burst_n = 0;
	in->pp_n++;
	in->busy = true;
	in->step_start_ns = e->now;
	eng_refresh_view(in);
	rc = in->pp_n == 1 ? evq_push(&e->q, &in->ev_step, end) : 0;
	if (!rc)
		rc = eng_push_schedule(e, in);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

/* EV_STEP_DONE on a pipeline: the oldest batch leaves the last stage; its
 * requests and tokens go back to in.fl_* for eng_on_step_done. */
static void pp_take_oldest(struct instance *in)
{
	struct pp_batch *b = &in->ppb[in->pp_head];

	pp_swap(in, b);
	in->n_fl = b->n;
	b->n = 0;
	in->step_start_ns = b->start_ns;
	in->pp_head = (in->pp_head + 1) % (uint32_t)in->pl->pp;
	in->pp_n--;
	for (uint32_t k = 0; k < in->n_fl; k++)
		in->fl_req[k]->flags &= ~RF_INFLIGHT;
}

/* The step whose items are in.fl_*[0 .. n_fl), summed up in xs (its
 * tokens, emitting and prefilling items) and prefill_tokens, starts now:
 * it is priced by the executor (a burst of steps under multi-step
 * scheduling), accounted, and its completion queued. */
static int launch_step(struct engine *e, struct instance *in, struct exec_step *xs,
		       int64_t prefill_tokens, struct ss_error *err)
{
	struct exec_result xr = { 0 };
	int64_t end, dur = 0;
	int rc;

	xs->n_items = in->n_fl;
	xs->items = in->fl_items;
	xs->reqs = in->fl_xreq;
	if (in->pl->dp > 1) {
		/* an attention rank: its group launches it (group_launch) */
		in->grp_xs = *xs;
		in->grp_prefill = prefill_tokens;
		in->grp_ready = true;
		return 0;
	}
	if (in->pl->pp > 1)
		return pp_launch(e, in, xs, prefill_tokens, err);
	in->burst_n = burst_len(e, in, xs);
	if (in->burst_n > 1) {
		rc = run_burst(e, in, xs, in->burst_n, &dur, err);
		if (rc)
			return rc;
	} else {
		rc = price_step(in, xs, &xr, err);
		if (rc)
			return rc;
		dur = xr.duration_ns;
	}
	if (!ss_time_add(e->now, dur, &end))
		return eng_time_error(err, ((double)e->now + (double)dur) / 1e9,
				      "a step on instance %u", in->idx);
	if (in->burst_n <= 1)
		account_step(in, xs, &xr, prefill_tokens);
	in->busy = true;
	in->step_start_ns = e->now;
	eng_refresh_view(in);
	rc = evq_push(&e->q, &in->ev_step, end);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

static int ensure_plan_room(struct instance *in, uint32_t max_items)
{
	uint32_t cap;

	cap = in->plan.cap_items;
	if (eng_grow((void **)&in->plan.items, &cap, in->n_running + max_items,
		 sizeof(*in->plan.items)))
		return -ENOMEM;
	in->plan.cap_items = cap;
	cap = in->plan.cap_preempt;
	if (eng_grow((void **)&in->plan.preempt, &cap, in->n_running + 1, sizeof(*in->plan.preempt)))
		return -ENOMEM;
	in->plan.cap_preempt = cap;
	return 0;
}


/* r has left in's waiting queue rejected: give back what it holds. */
static void drop_account(struct engine *e, struct instance *in, struct request *r,
			 const char *reason)
{
	kvm_drop(in->kv, r);
	in->tenant_active[r->v.tenant]--;
	in->view.outstanding_tokens -= req_total_tokens(&r->v);
	in->view.outstanding_requests--;
	eng_reject(e, r, reason);
}

/* A waiting request on a decode instance that holds its prompt's KV
 * (received from its prefill instance) only has to decode; one that was
 * preempted has to prefill its whole context again (recompute) or bring
 * it back from host memory (swap), into blocks of this pool.  When the
 * head of the queue is such a request and its context needs more blocks
 * than the pool has beside those the KV-holding waiting requests hold, it
 * can never run while they wait behind it: each step would grow it by a
 * chunk and then preempt it again (a livelock), since a policy only
 * preempts running requests.  Then offer the KV holders to the batch
 * policy first, in queue order, and the other waiting requests after them,
 * as vLLM V0 resumes swapped requests before recomputing preempted ones.
 * The queue itself keeps its order; only the policy's view changes, and
 * only in that case, so every other schedule is untouched.  Under a
 * static-key or tenant-key order the policy reads the ordered head only,
 * so the holders are taken from it.  Returns -ENOMEM or 0. */
static int offer_kv_first(struct engine *e, struct instance *in)
{
	/* only the ordered head is read by the policy under an incremental
	 * order (waitq_ordered) */
	uint32_t n = waitq_ordered(&in->wq);
	struct req_view **w = waitq_items(&in->wq);
	const struct req_view *head;
	int64_t held = 0, need;
	uint32_t k, m = 0;

	if (in->pl->role != POOL_DECODE || n < 2)
		return 0;
	head = w[0];
	if (head->kv_blocks > 0)
		return 0;
	for (k = 1; k < n; k++)
		if (w[k]->kv_blocks > 0 && w[k]->computed_tokens >= w[k]->prompt_tokens)
			held += w[k]->kv_blocks;
	need = kvm_blocks_for(in->kv, req_total_tokens(head));
	if (held == 0 || need <= (int64_t)kvm_total_blocks(in->kv) - held)
		return 0;
	if (eng_grow((void **)&e->kvfirst, &e->cap_kvfirst, n, sizeof(*e->kvfirst)))
		return -ENOMEM;
	for (k = 1; k < n; k++)
		if (w[k]->kv_blocks > 0 && w[k]->computed_tokens >= w[k]->prompt_tokens)
			e->kvfirst[m++] = w[k];
	for (k = 0; k < n; k++)
		if (k == 0 || !(w[k]->kv_blocks > 0 && w[k]->computed_tokens >= w[k]->prompt_tokens))
			e->kvfirst[m++] = w[k];
	assert(m == n);
	in->view.waiting = (const struct req_view *const *)e->kvfirst;
	in->view.n_waiting = n;
	return 0;
}

/* waitq_config.unpin: give back the blocks waiting request r's lookup
 * holds, if it holds any. */
static bool unpin_lookup(void *ctx, struct request *r)
{
	struct engine *e = ctx;

	return kvm_unpin(e->inst[r->instance].kv, r);
}

int eng_waitq_init(struct engine *e, struct instance *in)
{
	struct waitq_config c = {
		.order = e->oops, .order_priv = in->order_priv,
		.len = e->bops->max_items(in->batch_priv),
		.n_tenants = e->n_tenants, .instance = (int32_t)in->idx,
		.expire = e->aops->expire, .expire_priv = e->adm_priv,
		.unpin = kvm_caching(e->kv) ? unpin_lookup : NULL, .unpin_ctx = e,
	};

	return waitq_init(&in->wq, &c);
}

/* Expire, order and look up the waiting queue; order the running set. */
static int prepare_queues(struct engine *e, struct instance *in, uint32_t lookups)
{
	struct request **x;
	uint32_t m;

	if (waitq_expire(&in->wq, e->now, &x, &m))
		return -ENOMEM;
	for (uint32_t k = 0; k < m; k++)
		drop_account(e, in, x[k], x[k]->reject_reason);
	if (waitq_order(&in->wq, e->now))
		return -ENOMEM;
	if (e->vops->compare) {
		/* insertion sort: stable, and nearly sorted from step to step */
		for (uint32_t i = 1; i < in->n_running; i++) {
			struct req_view *v = in->running[i];
			uint32_t j = i;

			while (j > 0 && e->vops->compare(in->running[j - 1], v) > 0) {
				in->running[j] = in->running[j - 1];
				j--;
			}
			in->running[j] = v;
		}
	}
	if (kvm_caching(e->kv)) {
		struct req_view **w = waitq_items(&in->wq);
		uint32_t n = waitq_len(&in->wq), window = n < lookups ? n : lookups;

		for (uint32_t k = 0; k < window; k++)
			if (kvm_lookup(in->kv, request_of(w[k])))
				return -ENOMEM;
		/* An order can move requests out of the window: they let go. */
		if (waitq_window_done(&in->wq, window, e->now))
			return -ENOMEM;
	}
	return 0;
}

/* ---- the steady-decode path ------------------------------------------------
 *
 * Most steps of a run decode one token of each running request and admit
 * nobody: either nobody waits, or the head of the queue does not fit and
 * does not fit any better as the decodes take more blocks.  A batch policy
 * that promises what it plans then (batch_policy_ops.steady_decode) is not
 * asked: the engine forms the step itself, the same items in the same
 * order, with the same effects start_step has on the policy's plan, without
 * the view, pick_step or the plan's checks.  Every other step takes the
 * general path.  Results are bit-for-bit the same either way
 * (engine_config.steady_off; test-engine's steady_* tests).
 *
 * The promise with requests waiting rests on the last plan: instance.
 * steady_n is the size of the running set when the policy (or this path)
 * last planned exactly that set for one decode token each, admitting and
 * preempting nobody, with steady_head the waiting request it saw first
 * (its id, computed tokens and blocks, which a prefix-cache lookup may
 * change) and steady_left the free blocks it saw less those the decodes
 * needed; 0 after any other plan.
 */

/* req_blocks_needed(v, 1, bs) without a division when v's blocks already
 * hold one more token (most steps). */
static inline int32_t decode_need(const struct req_view *v, int32_t bs)
{
	return (int64_t)v->computed_tokens + 1 <= (int64_t)v->kv_blocks * bs ? 0
	       : req_blocks_needed(v, 1, bs);
}

/* Blocks the running requests need for one more token each, or -1 when
 * one of them is not a pure decode (more than one pending token, no
 * token emitted yet, or swapped out). */
static int64_t steady_need(const struct instance *in)
{
	int64_t need = 0;

	for (uint32_t k = 0; k < in->n_running; k++) {
		const struct req_view *v = in->running[k];

		if (req_pending_tokens(v) != 1 || v->generated_tokens == 0 || v->host_blocks)
			return -1;
		need += decode_need(v, in->view.block_size);
	}
	return need;
}

/* After a plan from pick_step: remember it if it is the steady shape. */
static void steady_arm(struct instance *in)
{
	const struct step_plan *p = &in->plan;
	int64_t need;

	in->steady_n = 0;
	if (!in->steady_max || p->n_preempt || p->n_items != in->n_running)
		return;
	for (uint32_t k = 0; k < p->n_items; k++)
		if (p->items[k].req != in->running[k] || p->items[k].tokens != 1)
			return;
	need = steady_need(in);
	if (need < 0)
		return;
	in->steady_n = in->n_running;
	in->steady_head = (struct steady_head){ UINT32_MAX, 0, 0 };
	if (in->view.n_waiting)
		in->steady_head = (struct steady_head){ in->view.waiting[0]->id,
							in->view.waiting[0]->computed_tokens,
							in->view.waiting[0]->kv_blocks };
	in->steady_left = (int64_t)in->view.free_blocks - need;
}

/* Whether in's next step is one its policy promised, its queues prepared:
 * 1 .. steady_max running requests, each with one pending token of its
 * output and not swapped out; no victim order re-sorting them; no swap
 * pending; the free blocks cover their next blocks; and either nobody
 * waits, or (not on a decode pool, whose view puts KV holders first) the
 * last plan was of this running set, the same request, unchanged, heads
 * the queue, and no more blocks are left after the decodes than then. */
static bool steady_ready(const struct engine *e, const struct instance *in, int64_t *left)
{
	const struct req_view *head;
	int64_t need;

	if (!in->n_running || in->n_running > in->steady_max || kvm_swap_pending(in->kv) ||
	    e->vops->compare)
		return false;
	need = steady_need(in);
	if (need < 0 || need > kvm_free_blocks(in->kv))
		return false;
	*left = (int64_t)kvm_free_blocks(in->kv) - need;
	if (!waitq_len(&in->wq))
		return true;
	head = waitq_items(&in->wq)[0];
	if (in->pl->role == POOL_DECODE || in->steady_n != in->n_running ||
	    head->id != in->steady_head.id || head->computed_tokens != in->steady_head.computed ||
	    head->kv_blocks != in->steady_head.kv_blocks || *left > in->steady_left)
		return false;
	for (uint32_t k = 0; k < in->n_running; k++)
		if (in->running[k] != &in->fl_req[k]->v)
			return false;
	return true;
}

/* Start the step steady_ready found: what start_step does with the plan
 * the policy promised, every running request for one token. */
static int steady_start(struct engine *e, struct instance *in, struct ss_error *err)
{
	struct exec_step xs = { .instance = (int32_t)in->idx, .start_ns = e->now };
	uint32_t n = in->n_running;
	int rc;

	if (eng_grow((void **)&in->fl_req, &in->cap_fl_req, n, sizeof(*in->fl_req)) ||
	    eng_grow((void **)&in->fl_tokens, &in->cap_fl_tokens, n, sizeof(*in->fl_tokens)) ||
	    eng_grow((void **)&in->fl_items, &in->cap_fl_items, n, sizeof(*in->fl_items)) ||
	    eng_grow((void **)&in->fl_xreq, &in->cap_fl_xreq, n, sizeof(*in->fl_xreq)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (uint32_t k = 0; k < n; k++) {
		struct request *r = request_of(in->running[k]);
		int32_t need = decode_need(&r->v, e->cfg.block_size);

		/* steady_ready counted these blocks free: only -ENOMEM */
		if (need && (rc = kvm_grow(in->kv, r, need)))
			return ss_error_set(err, rc, NULL, 0, "out of memory for a block table");
		in->fl_xreq[k] = (struct exec_req){
			.block_table = r->kv.blocks,
			.n_blocks = r->v.kv_blocks,
			.emit = true,
		};
		e->oops->served(in->order_priv, &r->v, 0, 1);
		eng_tenant_rekey(e, in, r);
		if (e->next_arrival < e->n_req)
			e->tenant_service[r->v.tenant] += 1;
		in->fl_req[k] = r;
		in->fl_tokens[k] = 1;
		in->fl_items[k] = (struct cost_item){ .tokens = 1, .context = r->v.computed_tokens };
	}
	xs.total_tokens = n;
	xs.n_emit = n;
	in->n_fl = n;
	in->steady_steps++;
	return launch_step(e, in, &xs, 0, err);
}

/* KV blocks the plan's items need beyond those they hold: O(items). */
static int64_t plan_need(const struct instance *in)
{
	int64_t need = 0;

	for (uint32_t k = 0; k < in->plan.n_items; k++)
		need += req_blocks_needed(in->plan.items[k].req, in->plan.items[k].tokens,
					  in->view.block_size);
	return need;
}

/* Form in's next step (the plan of its batch policy, or the steady path)
 * and start it, or, an attention rank, leave it for its group to start
 * (grp_form); nothing when in is busy. */
static int schedule_unit(struct engine *e, struct instance *in, struct ss_error *err)
{
	uint32_t max_items = e->bops->max_items(in->batch_priv);
	uint32_t lookups = max_items;  /* waiting requests that look up the prefix cache */
	int rc;

	if (in->pl->pp > 1) {
		if (in->pp_n >= (uint32_t)in->pl->pp)
			return 0;     /* the next batch to leave asks again */
		if (e->now < in->stage_free[0]) {
			rc = eng_push_schedule(e, in);   /* when stage 1 frees */
			return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue")
				  : 0;
		}
	} else if (in->busy) {
		return 0;
	}
	for (bool first = true;; first = false) {
		int64_t left;

		if (ensure_plan_room(in, max_items) || prepare_queues(e, in, lookups))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		if (first && in->steady_max && steady_ready(e, in, &left)) {
			in->steady_left = left;
			if (in->pl->dp > 1) {
				in->grp_form = GRP_STEADY;   /* its group starts it */
				return 0;
			}
			return steady_start(e, in, err);
		}
		in->plan.n_items = 0;
		in->plan.n_preempt = 0;
		eng_refresh_view(in);
		if (offer_kv_first(e, in) || (in->pp_n && pp_hide_inflight(in)))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		e->bops->pick_step(in->batch_priv, &in->view, e->now, &e->host, &in->plan);
		assert(in->plan.n_items <= in->plan.cap_items);
		assert(in->plan.n_preempt <= in->plan.cap_preempt);
		if (in->plan.n_preempt) {
			/* blocks free once the victims let go, as the view shows it */
			int64_t promised = in->view.free_blocks;

			for (uint32_t k = 0; k < in->plan.n_preempt; k++)
				promised += in->plan.preempt[k]->kv_blocks;
			rc = apply_preemptions(e, in, err);
			if (rc)
				return rc;
			/* A victim frees only the blocks no other request
			 * holds: with the prefix cache, blocks it shares with
			 * running requests or that waiting requests' lookups
			 * pinned stay held.  A plan that fits what the view
			 * promised but not the pool is made again on the pool
			 * as it is (the running set is smaller, so this ends);
			 * one that does not even fit the view is the policy's
			 * error (start_step reports it). */
			if (in->plan.n_items) {
				int64_t need = plan_need(in);

				if (need > kvm_free_blocks(in->kv) && need <= promised)
					continue;
			}
		}
		if (in->plan.n_items) {
			steady_arm(in);
			if (in->pl->dp > 1) {
				in->grp_form = GRP_PLAN;     /* its group starts it */
				return 0;
			}
			return start_step(e, in, err);
		}
		if (in->plan.n_preempt)
			continue;
		if (in->pp_n > 0) {
			/* a batch leaving the pipeline asks again */
			eng_refresh_view(in);
			return 0;
		}
		if (in->n_running > 0)
			/* nothing would ever wake this instance again */
			return ss_error_set(err, -EPROTO, NULL, 0,
					    "batch policy %s formed no step with %u requests running on instance %u",
					    e->bops->name, in->n_running, in->idx);
		if (waitq_len(&in->wq) > 0 && in->n_migrating == 0) {
			struct request *head = request_of(waitq_items(&in->wq)[0]);

			/* An idle, empty instance that cannot start its head
			 * request never will (unless KV on its way to decode
			 * instances will free blocks): reject it rather than hang --
			 * once the others have let go of the cached blocks
			 * they hold, which could be what is in its way. */
			rc = waitq_unpin_behind_head(&in->wq);
			if (rc < 0)
				return ss_error_set(err, rc, NULL, 0, "out of memory");
			if (rc) {
				lookups = 1;
				continue;
			}
			waitq_remove(&in->wq, head);
			drop_account(e, in, head, "could not be scheduled on an idle instance");
			lookups = max_items;
			continue;
		}
		eng_refresh_view(in);
		/* An idle decode instance: transfers paused for a waiting
		 * request that has since left may start now. */
		if (in->pl->role == POOL_DECODE && in->n_running == 0)
			return eng_start_transfers(e, in, err);
		return 0;
	}
}

/* ---- lock-step ranks (data-parallel attention) ----------------------------
 *
 * With dp_attention D > 1 an instance's D attention ranks (pool units
 * first + g D .. first + g D + D - 1, engine-int.h) each plan their own
 * batch with their own policy, queues and KV cache, but step together,
 * as SGLang and TensorRT-LLM run them: every MoE layer's all-to-all (or
 * all-gather and reduce-scatter) takes every rank's tokens, so no rank
 * starts a step before all have finished the last one (docs/cost-models.md
 * "Expert parallelism"):
 *   - the group schedules when none of its ranks is busy: each rank
 *     plans (schedule_unit leaves its plan or steady step: grp_form),
 *     the engine profile's attention-DP balancer (adp_balance) may hold
 *     the ranks' context work back, then each rank forms its step
 *     (launch_step leaves it: grp_ready); when none has anything to run
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

/* The first rank of in's lock-step group. */
static struct instance *group_of(struct engine *e, const struct instance *in)
{
	const struct pool *pl = in->pl;

	return &e->inst[pl->first + (in->idx - pl->first) / (uint32_t)pl->dp * (uint32_t)pl->dp];
}

/* The idle batch a rank with nothing to run joins a group step with. */
static const struct cost_item idle_item = { .tokens = 1, .context = 0 };
static const struct exec_req idle_req = { .block_table = NULL, .n_blocks = 0, .emit = false };

/* Launch the group step of rk[0 .. D) whose ranks with grp_ready formed
 * a step (at least one): price each (the rest an idle batch), and start
 * all of them for the longest one's duration. */
static int group_launch(struct engine *e, struct instance *rk, uint32_t D, struct ss_error *err)
{
	int64_t group_tokens = 0, dur = 0, end;
	int rc;

	for (uint32_t k = 0; k < D; k++)
		if (rk[k].grp_ready)
			group_tokens += rk[k].grp_xs.total_tokens;
	for (uint32_t k = 0; k < D; k++) {
		struct instance *in = &rk[k];

		if (!in->grp_ready) {
			in->n_fl = 0;
			in->grp_xs = (struct exec_step){
				.instance = (int32_t)in->idx, .n_items = 1, .items = &idle_item,
				.reqs = &idle_req, .total_tokens = 1, .start_ns = e->now,
			};
			in->grp_prefill = 0;
		}
		in->grp_xs.group_tokens = group_tokens;
		rc = price_step(in, &in->grp_xs, &in->grp_xr, err);
		if (rc)
			return rc;
		if (in->grp_xr.duration_ns > dur)
			dur = in->grp_xr.duration_ns;
	}
	if (!ss_time_add(e->now, dur, &end))
		return eng_time_error(err, ((double)e->now + (double)dur) / 1e9,
				      "a step on instance %u", rk[0].idx);
	for (uint32_t k = 0; k < D; k++) {
		struct instance *in = &rk[k];
		struct exec_result *xr = &in->grp_xr;
		int64_t wait = dur - xr->duration_ns;

		xr->energy_j += in->pl->gpu->idle_w * in->pl->tp * (double)wait * 1e-9;
		xr->op_ns[COST_OP_ALLREDUCE] += wait;
		xr->duration_ns = dur;
		if (in->grp_ready) {
			account_step(in, &in->grp_xs, xr, in->grp_prefill);
		} else {
			/* the idle batch: the rank's GPUs' time and energy,
			 * no request's (and not a step of the batch statistics) */
			account_energy(in, xr, 0, 0);
			in->st->idle_steps++;
			in->st->busy_ns = ss_time_add_sat(in->st->busy_ns, dur);
			in->st->busy_energy_j += xr->energy_j;
			in->st->out_of_grid += xr->out_of_grid;
			in->st->out_of_grid_ns += xr->out_of_grid_ns;
			for (int op = 0; op < COST_OP_COUNT; op++)
				in->st->op_ns[op] += xr->op_ns[op];
		}
		in->grp_ready = false;
		in->busy = true;
		in->step_start_ns = e->now;
		eng_refresh_view(in);
		rc = evq_push(&e->q, &in->ev_step, end);
		if (rc)
			return ss_error_set(err, rc, NULL, 0, "out of memory in the event queue");
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
	bool room = true, all_ctx = true, all_gen = true, hold = true;

	for (uint32_t k = 0; k < D; k++) {
		const struct instance *in = &rk[k];
		uint32_t ctx = 0, gen = 0;

		if (in->grp_form == GRP_STEADY) {
			gen = in->n_running;
		} else if (in->grp_form == GRP_PLAN) {
			for (uint32_t i = 0; i < in->plan.n_items; i++)
				ctx += plan_item_ctx(&in->plan.items[i]);
			gen = in->plan.n_items - ctx;
		}
		room &= gen < e->bops->max_items(in->batch_priv);
		all_ctx &= ctx > 0;
		all_gen &= gen > 0;
	}
	if (room && all_ctx) {
		rk->adp_wait = 0;
		hold = false;
		if (all_gen) {
			hold = rk->adp_batch < (uint32_t)p->adp_batching_wait_iters;
			rk->adp_batch = hold ? rk->adp_batch + 1 : 0;
		}
	} else if (++rk->adp_wait >= (uint32_t)p->adp_timeout_iters || !all_gen) {
		rk->adp_wait = 0;
		hold = false;
	}
	if (!hold)
		return;
	for (uint32_t k = 0; k < D; k++) {
		struct step_plan *pl = &rk[k].plan;
		uint32_t w = 0;

		if (rk[k].grp_form != GRP_PLAN)
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
		rc = schedule_unit(e, &rk[k], err);
		if (rc)
			return rc;
		any |= rk[k].grp_form != GRP_NONE;
	}
	if (!any)
		return 0;
	if (e->cfg.engine && e->cfg.engine->adp_balance)
		adp_balance(e, rk, D);
	for (uint32_t k = 0; k < D; k++) {
		struct instance *r = &rk[k];

		rc = r->grp_form == GRP_STEADY ? steady_start(e, r, err) :
		     r->grp_form == GRP_PLAN ? start_step(e, r, err) : 0;
		r->grp_form = GRP_NONE;
		if (rc)
			return rc;
	}
	return group_launch(e, rk, D, err);
}

int eng_on_schedule(struct engine *e, struct instance *in, struct ss_error *err)
{
	if (in->pl->dp > 1)
		return group_schedule(e, in, err);
	return schedule_unit(e, in, err);
}

/* r has emitted its last token: it leaves the running set (at the next
 * compaction) and gives back its blocks. */
static void finish(struct engine *e, struct instance *in, struct request *r)
{
	r->finish_ns = e->now;
	r->v.state = REQ_FINISHED;
	kvm_finish(in->kv, r);
	r->flags |= RF_REMOVE;
	in->n_remove++;
	in->view.outstanding_tokens -= req_total_tokens(&r->v);
	in->view.outstanding_requests--;
	in->tenant_active[r->v.tenant]--;
	e->n_done++;
	eng_retire(e, r);
}

/* Count n token gaps of gap ns into e->itl, in runs of equal gaps
 * (*gap_v, *gap_n: the run so far). */
static inline void itl_add(struct engine *e, int64_t *gap_v, uint64_t *gap_n, int64_t gap,
			   uint64_t n)
{
	if (gap != *gap_v || !*gap_n) {
		if (*gap_n)
			ss_hist_add_n(&e->itl, *gap_v, *gap_n);
		*gap_v = gap;
		*gap_n = 0;
	}
	*gap_n += n;
}

int eng_on_step_done(struct engine *e, struct instance *in, struct ss_error *err)
{
	/* token gaps for e->itl, counted in runs of equal gaps */
	int64_t gap_v = 0;
	uint64_t gap_n = 0;
	int rc;

	if (in->pl->pp > 1)
		pp_take_oldest(in);
	for (uint32_t k = 0; k < in->n_fl; k++) {
		struct request *r = in->fl_req[k];

		r->last_step_ns = e->now - in->step_start_ns;
		r->v.computed_tokens += in->fl_tokens[k];
		kvm_register(in->kv, r);
		if (in->burst_n > 1) {
			/* A burst's fl_tokens[k] tokens (docs/engines.md): they
			 * reach the client together, now, after the gap since
			 * its last one. */
			int64_t gap = e->now - r->last_token_ns;

			r->v.generated_tokens += in->fl_tokens[k];
			in->view.outstanding_tokens += in->fl_tokens[k];
			itl_add(e, &gap_v, &gap_n, gap, 1);
			if (in->fl_tokens[k] > 1)
				itl_add(e, &gap_v, &gap_n, 0, (uint64_t)in->fl_tokens[k] - 1);
			if (gap > r->max_gap_ns)
				r->max_gap_ns = gap;
			r->last_token_ns = e->now;
			if (r->v.generated_tokens >= r->output_tokens)
				finish(e, in, r);
			continue;
		}
		if (r->v.computed_tokens < req_total_tokens(&r->v))
			continue;
		/* All known tokens are in the KV cache: one output token. */
		r->v.generated_tokens++;
		in->view.outstanding_tokens++;
		if (r->first_token_ns < 0)
			r->first_token_ns = e->now;
		else {
			int64_t gap = e->now - r->last_token_ns;

			itl_add(e, &gap_v, &gap_n, gap, 1);
			if (gap > r->max_gap_ns)
				r->max_gap_ns = gap;
		}
		r->last_token_ns = e->now;
		if (r->v.generated_tokens >= r->output_tokens) {
			finish(e, in, r);
		} else if (in->pl->role == POOL_PREFILL) {
			rc = eng_handoff(e, in, r, err);
			if (rc)
				return rc;
		}
	}
	if (gap_n)
		ss_hist_add_n(&e->itl, gap_v, gap_n);
	in->n_fl = 0;
	in->burst_n = 0;
	running_compact(in);
	in->busy = in->pp_n > 0;
	if (in->pp_n > 0) {
		rc = evq_push(&e->q, &in->ev_step, in->ppb[in->pp_head].end_ns);
		if (rc)
			return ss_error_set(err, rc, NULL, 0, "out of memory in the event queue");
	}
	eng_refresh_view(in);
	if (in->pl->role == POOL_DECODE) {
		rc = eng_start_transfers(e, in, err);
		if (rc)
			return rc;
	}
	/* The schedule this asks for is the next event when nothing else is
	 * due before it at this instant: then it runs here, as the loop would
	 * run it next (not live, where the loop also reads the clock). */
	if (!e->cfg.clock && !event_queued(&in->ev_sched)) {
		const struct event *next = evq_peek(&e->q);

		if (!next || next->time_ns > e->now || next->prio > EV_SCHEDULE)
			return eng_on_schedule(e, in, err);
	}
	rc = eng_push_schedule(e, in);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}
