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
 * for a plan, applies its preemptions and forms the step, which the
 * instance's step shape (step-int.h: one at a time, bursts, a pipeline, a
 * lock-step rank of data-parallel attention) starts; on_step_done has the
 * shape hand back the completed step, emits tokens and finishes requests
 * or hands prefilled ones to their decode instance.  No scheduling code
 * here tests which shape an instance has.
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
#include "step-int.h"

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
	if (in->lora && lora_inst_wait(in->lora))
		lora_wait_push(lora_inst_wait(in->lora), &r->lw, &r->v, r->adapter, false);
	return waitq_push(&in->wq, r, deadline, e->now);
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
			if (in->lora)   /* multi-LoRA: the running set's adapters */
				lora_run_leave(in->lora, r->adapter);
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
		r->v.spec_tokens = 0;     /* it drafts again once it decodes */
		r->v.state = REQ_QUEUED;
		r->v.preemptions++;
		r->flags |= RF_REMOVE;
		in->n_remove++;
		in->st->preemptions++;
	}
	running_compact(in);
	for (uint32_t k = 0; k < p->n_preempt; k++) {
		struct request *r = request_of(p->preempt[k]);

		if (in->lora && lora_inst_wait(in->lora))
			lora_wait_push(lora_inst_wait(in->lora), &r->lw, &r->v, r->adapter, true);
		if (waitq_push_front(&in->wq, r, e->now))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	}
	return 0;
}

/* Split a step's energy into prefill and decode work: prefill attention
 * to prefill, decode attention to decode, every other operator (GEMMs,
 * element-wise, LM head, collectives, host) by the two phases' shares of the
 * step's tokens; power is taken as uniform over the step.  Also tracks the
 * peak step power and the power the time series shows. */
void eng_step_energy(struct instance *in, const struct exec_result *xr, int64_t prefill_tokens,
		     int64_t total_tokens)
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

int eng_step_launch(struct engine *e, struct instance *in, struct exec_step *xs,
		    int64_t prefill_tokens, struct ss_error *err)
{
	xs->n_items = in->n_fl;
	xs->items = in->fl_items;
	xs->reqs = in->fl_xreq;
	return in->shape->launch(e, in, xs, prefill_tokens, err);
}

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
		bool from_wait = r->v.state == REQ_QUEUED, emit;

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
		/* (a decode that verifies drafts emits once its last token is
		 * in, however many drafts the budget let in: spec.h) */
		emit = r->v.computed_tokens + tokens >= req_total_tokens(&r->v);
		in->fl_xreq[k] = (struct exec_req){
			.block_table = r->kv.blocks,
			.n_blocks = r->v.kv_blocks,
			.emit = emit,
			.emit_rows = emit && r->v.spec_tokens ? tokens : 0,
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
			if (in->lora) {
				lora_run_enter(in->lora, r->adapter);
				if (lora_inst_wait(in->lora))
					lora_wait_leave(lora_inst_wait(in->lora), &r->lw, true);
			}
			if (r->first_sched_ns < 0)
				r->first_sched_ns = e->now;
			if (waitq_mark(&in->wq, r))
				return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		}
		in->fl_req[k] = r;
		in->fl_tokens[k] = tokens;
		in->fl_items[k] = (struct cost_item){ .tokens = tokens, .context = r->v.computed_tokens };
		xs.total_tokens += tokens;
		/* LM-head rows: a verify scores each of its tokens */
		if (emit)
			xs.n_emit += r->v.spec_tokens ? (uint32_t)tokens : 1;
		if ((tokens > 1 && !r->v.spec_tokens) || r->v.generated_tokens == 0) {
			xs.n_prefill++;
			prefill_tokens += tokens;
		}
	}
	if (in->pl->spec)
		xs.spec_q = 1 + in->pl->spec->tree;
	if (n_picked) {
		for (uint32_t k = 0; k < p->n_items; k++)
			request_of(p->items[k].req)->flags &= ~RF_PICKED;
		waitq_take_marked(&in->wq);
	}
	if (in->n_running > in->st->peak_running)
		in->st->peak_running = in->n_running;
	in->n_fl = p->n_items;
	in->steady.fl_steady = false;
	return eng_step_launch(e, in, &xs, prefill_tokens, err);
}

int eng_step_price(struct instance *in, const struct exec_step *xs, struct exec_result *xr,
		   struct ss_error *err)
{
	int rc;

	if (in->lora) {
		rc = eng_lora_admit(in, err);
		if (rc)
			return rc;
	}
	rc = in->pl->xops->run_step(in->pl->xpriv, xs, xr, err);
	if (rc)
		return rc;
	if (in->pl->spec) {
		rc = eng_spec_draft(in, xs, xr, err);
		if (rc)
			return rc;
	}
	if (in->lora) {
		rc = eng_lora_price(in, xr, err);
		if (rc)
			return rc;
	}
	if (xr->duration_ns <= 0)   /* a live step can measure 0 on a coarse clock */
		return ss_error_set(err, -ERANGE, NULL, 0,
				    "the %s executor gave a step on instance %u a duration of %" PRId64
				    " ns; expected > 0",
				    in->pl->xops->name, in->idx, xr->duration_ns);
	return kvm_price(in->kv, xr, err);
}

/* Its energy goes to its requests by their tokens in it (xs's items). */
void eng_step_account(struct instance *in, const struct exec_step *xs,
		      const struct exec_result *xr, int64_t prefill_tokens)
{
	if (xs->total_tokens == in->n_fl) {
		/* one token each (x * 1.0 is x: the same share as below) */
		double share = xr->energy_j / (double)xs->total_tokens;
		struct request *const *fl = in->fl_req;   /* read once */

		for (uint32_t k = 0, n = in->n_fl; k < n; k++)
			fl[k]->energy_j += share;
	} else {
		for (uint32_t k = 0; k < in->n_fl; k++)
			in->fl_req[k]->energy_j += xr->energy_j * (double)in->fl_tokens[k] /
						   (double)xs->total_tokens;
	}
	eng_step_energy(in, xr, prefill_tokens, xs->total_tokens);
	in->st->steps++;
	/* A pipeline's stages (tp GPUs each) run the step's layers one after
	 * the other: its tp x pp GPUs are busy duration / pp on average, the
	 * instance's busy time (idle energy is charged on the rest; pp is 1
	 * without a pipeline). */
	in->st->busy_ns = ss_time_add_sat(in->st->busy_ns, xr->duration_ns / in->pl->pp);
	in->st->busy_energy_j += xr->energy_j;
	in->st->out_of_grid += xr->out_of_grid;
	in->st->out_of_grid_ns += xr->out_of_grid_ns;
	for (int op = 0; op < COST_OP_COUNT; op++)
		in->st->op_ns[op] += xr->op_ns[op];
	ss_hist_add(&in->st->batch_seqs, in->n_fl);
	ss_hist_add(&in->st->batch_tokens, xs->total_tokens);
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
	cap = in->plan.cap_scratch;
	if (eng_grow((void **)&in->plan.scratch, &cap, in->n_running + max_items,
		 sizeof(*in->plan.scratch)))
		return -ENOMEM;
	in->plan.cap_scratch = cap;
	return 0;
}


/* r has left in's waiting queue rejected: give back what it holds. */
static void drop_account(struct engine *e, struct instance *in, struct request *r,
			 const char *reason)
{
	kvm_drop(in->kv, r);
	if (in->lora && lora_inst_wait(in->lora))
		lora_wait_leave(lora_inst_wait(in->lora), &r->lw, false);
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

	int rc = waitq_init(&in->wq, &c);

	if (rc || !in->lora)
		return rc;
	/* multi-LoRA: a first-come-first-served queue is indexed by adapter;
	 * under another order the whole queue is kept sorted, so that the
	 * view's filter (lora_filter) reads it in order beyond the head the
	 * incremental kinds keep */
	if (e->oops->key) {
		waitq_use_sorting(&in->wq);
		return 0;
	}
	return lora_inst_index_queue(in->lora, c.len);
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

/* KV blocks the plan's items need beyond those they hold: O(items). */
static int64_t plan_need(const struct instance *in)
{
	int64_t need = 0;

	for (uint32_t k = 0; k < in->plan.n_items; k++)
		need += req_blocks_needed(in->plan.items[k].req, in->plan.items[k].tokens,
					  in->view.block_size);
	return need;
}

/* Decide in's next step: the plan of its batch policy, or the steady
 * path; UNIT_NONE when in cannot take a step now (busy, or a pipeline
 * whose first stage frees later: then its schedule is queued for then). */
int eng_unit_plan(struct engine *e, struct instance *in, struct ss_error *err)
{
	uint32_t max_items = e->bops->max_items(in->batch_priv);
	uint32_t lookups = max_items;  /* waiting requests that look up the prefix cache */
	int64_t at;
	int rc;

	if (!in->shape->next(e, in, &at))
		return UNIT_NONE;     /* the step in flight asks again */
	if (at > e->now) {
		rc = eng_push_schedule(e, in);
		return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue")
			  : UNIT_NONE;
	}
	for (bool first = true;; first = false) {
		if (ensure_plan_room(in, max_items) || prepare_queues(e, in, lookups))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		if (first && steady_ready(e, in))
			return UNIT_STEADY;
		in->plan.n_items = 0;
		in->plan.n_preempt = 0;
		eng_refresh_view(in);
		if (offer_kv_first(e, in) || in->shape->view(in) ||
		    (e->lora && eng_lora_view(e, in)))
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
			return UNIT_PLAN;
		}
		if (in->plan.n_preempt)
			continue;
		if (in->busy) {
			/* steps in flight (a pipeline's): the next to leave asks again */
			eng_refresh_view(in);
			return UNIT_NONE;
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
			return eng_start_transfers(e, in, err);   /* 0: UNIT_NONE */
		return UNIT_NONE;
	}
}

int eng_unit_start(struct engine *e, struct instance *in, enum unit_form form,
		   struct ss_error *err)
{
	return form == UNIT_STEADY ? steady_start(e, in, err) :
	       form == UNIT_PLAN ? start_step(e, in, err) : 0;
}

int eng_unit_schedule(struct engine *e, struct instance *in, struct ss_error *err)
{
	int form = eng_unit_plan(e, in, err);

	return form <= 0 ? form : eng_unit_start(e, in, (enum unit_form)form, err);
}

int eng_on_schedule(struct engine *e, struct instance *in, struct ss_error *err)
{
	return in->shape->schedule(e, in, err);
}

void eng_finish(struct engine *e, struct instance *in, struct request *r)
{
	/* its last token, as it left the front end (frontend.h) */
	r->finish_ns = frontend_on(&in->fe) ? r->last_token_ns : e->now;
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

void eng_itl_flush(struct engine *e, struct itl_run run)
{
	if (run.n)
		ss_hist_add_n(&e->itl, run.gap, run.n);
}

/* eng_step_emit for the prefix cache on or off (caching) and a prefill
 * instance or not (prefill_pool): inlined twice, so that the common case's
 * loop is free of the calls it never makes and keeps its state in
 * registers. */
static inline __attribute__((always_inline)) int
emit_items(struct engine *e, struct instance *in, bool caching, bool prefill_pool,
	   struct ss_error *err)
{
	struct itl_run run = ITL_RUN_INIT;
	/* read once: the stores below go through pointers the compiler
	 * cannot tell from these */
	struct request *const *fl = in->fl_req;
	const int32_t *tokens = in->fl_tokens;
	struct req_view *const *running = in->running;
	uint32_t n = in->n_fl;
	int64_t now = e->now, step_ns = now - in->step_start_ns;
	/* steady_need of the running set this step leaves, summed here where
	 * each request is at hand (struct steady's pre): valid when the
	 * step's items were the running set, in its order */
	bool same = n == in->n_running, dec = true, kept = true;
	/* a step the steady path formed: the next may keep its fl_*, so its
	 * contexts and the requests that take a block are written here
	 * (struct steady's grow; used only with pre_formed) */
	struct cost_item *items = in->steady.fl_steady && n <= in->steady.cap_grow ?
				  in->fl_items : NULL;
	uint32_t *grow = in->steady.grow, ng = 0;
	int32_t bs = in->view.block_size;
	int64_t need = 0, emitted = 0;   /* blocks; tokens not yet in the view */
	bool fe = frontend_on(&in->fe);
	const struct spec_config *spec = in->pl->spec;
	double token_j = 0;           /* with speculation: the step's energy per token */
	int rc;

	if (spec) {
		int64_t step_tokens = 0;

		for (uint32_t k = 0; k < n; k++)
			step_tokens += tokens[k];
		if (step_tokens > 0)
			token_j = in->step_power_w * 1e-9 * (double)step_ns / (double)step_tokens;
	}

	/* a step the steady path formed is the running set, which cannot
	 * change while it runs (the instance plans only when idle; a
	 * pipeline, whose running set does, never takes that path) */
	for (uint32_t k = 0; same && !in->steady.fl_steady && k < n; k++)
		same = running[k] == &fl[k]->v;
	for (uint32_t k = 0; k < n; k++) {
		struct request *r = fl[k];

		int32_t out = 1;   /* tokens it emits: 1, or 1 + accepted drafts */

		r->last_step_ns = step_ns;
		r->v.computed_tokens += tokens[k];
		if (r->v.spec_tokens)   /* it verified drafts: the rejected go back */
			out = eng_spec_verify(e, in, r, token_j);
		if (caching)
			kvm_register(in->kv, r);
		if (r->v.computed_tokens >= req_total_tokens(&r->v)) {
			/* All known tokens are in the KV cache: one output token
			 * (with the drafts it accepted, as one chunk). */
			/* when the token leaves the front end: now without one */
			int64_t t = fe ? frontend_token(&in->fe, now) : now;

			if (out > 1) {
				int32_t left = r->output_tokens - r->v.generated_tokens - 1;

				out = out - 1 > left ? left + 1 : out;
				for (int32_t j = 1; fe && j < out; j++)
					t = frontend_token(&in->fe, now);
			}
			r->v.generated_tokens += out;
			emitted += out;
			if (r->first_token_ns < 0)
				r->first_token_ns = t;
			else {
				int64_t gap = t - r->last_token_ns;

				eng_itl_add(e, &run, gap, 1);
				if (gap > r->max_gap_ns)
					r->max_gap_ns = gap;
			}
			r->last_token_ns = t;
			if (r->v.generated_tokens >= r->output_tokens) {
				kept = false;
				in->view.outstanding_tokens += emitted;
				emitted = 0;
				eng_finish(e, in, r);
				continue;
			}
			if (prefill_pool) {
				same = false;
				in->view.outstanding_tokens += emitted;
				emitted = 0;
				rc = eng_handoff(e, in, r, err);
				if (rc)
					return rc;
				continue;
			}
			/* r stays running, one token of its output pending now
			 * (tokens <= pending: start_step): a decode.  (Not
			 * swapped out: only a plan's preemption swaps, and a
			 * request in a step has entered it, kvm_enter, since.)
			 * With speculation, its drafts for the next step. */
			if (spec)
				r->v.spec_tokens = spec_propose(spec, in->n_running);
		} else {
			dec &= steady_decodes(&r->v);
		}
		{
			int32_t nd = steady_decode_need(&r->v, bs);

			need += nd;
			if (items) {
				items[k].context = r->v.computed_tokens;
				if (nd)
					grow[ng++] = k;
			}
		}
	}
	in->steady.n_grow = ng;
	in->view.outstanding_tokens += emitted;
	eng_itl_flush(e, run);
	/* (not with speculation: the drafts just proposed change what each
	 * request needs, and steady_ready sums it itself) */
	in->steady.pre = same && !spec;
	in->steady.pre_need = dec ? need : -1;
	/* fl_* hold the running set as a steady step formed it (struct
	 * steady's pre_formed) */
	in->steady.pre_formed = same && kept && items && !spec;
	return 0;
}

int eng_step_emit(struct engine *e, struct instance *in, struct ss_error *err)
{
	bool caching = kvm_caching(e->kv), prefill_pool = in->pl->role == POOL_PREFILL;

	if (caching || prefill_pool)
		return emit_items(e, in, caching, prefill_pool, err);
	return emit_items(e, in, false, false, err);
}

int eng_on_step_done(struct engine *e, struct instance *in, struct ss_error *err)
{
	int rc;

	in->steady.pre = false;
	rc = in->shape->emit(e, in, err);
	if (rc)
		return rc;
	in->n_fl = 0;
	running_compact(in);
	rc = in->shape->done(e, in, err);
	if (rc)
		return rc;
	eng_refresh_view(in);
	if (in->pl->role == POOL_DECODE) {
		rc = eng_start_transfers(e, in, err);
		if (rc)
			return rc;
	}
	/* The schedule this asks for is the next event when nothing else is
	 * due before it at this instant: then it runs here, as the loop would
	 * run it next.  Live too (arrivals the wall clock has passed are due
	 * events, so they still go first): a closed-loop client freed by this
	 * step sends its next request after this event, so the step formed
	 * now goes without it in a simulation and a live run alike, as a real
	 * engine schedules its next step before any client can answer. */
	if (!event_queued(&in->ev_sched)) {
		const struct event *next = evq_peek(&e->q);

		if (!next || next->time_ns > e->now || next->prio > EV_SCHEDULE) {
			rc = eng_on_schedule(e, in, err);
			in->steady.pre = false;
			return rc;
		}
	}
	in->steady.pre = false;   /* other events may come first */
	rc = eng_push_schedule(e, in);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}
