/* servesim — the steady-decode path (steady.h).
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
 * The promise with requests waiting rests on the last plan: struct
 * steady's n is the size of the running set when the policy (or this path)
 * last planned exactly that set for one decode token each, admitting and
 * preempting nobody, with head the waiting request it saw first
 * (its id, computed tokens and blocks, which a prefix-cache lookup may
 * change) and left the free blocks it saw less those the decodes
 * needed; 0 after any other plan.
 */
#include "engine-int.h"
#include "step-int.h"

#include <errno.h>

/* Blocks the running requests need for their pending tokens, or -1 when
 * one of them is not a pure decode (a prompt still pending, no token
 * emitted yet, or swapped out); *tokens their pending tokens (one each
 * without speculation). */
static int64_t steady_need(const struct instance *in, int64_t *tokens)
{
	int64_t need = 0;

	*tokens = 0;
	for (uint32_t k = 0; k < in->n_running; k++) {
		const struct req_view *v = in->running[k];

		if (!steady_decodes(v))
			return -1;
		need += steady_decode_need(v, in->view.block_size);
		*tokens += req_pending_tokens(v);
	}
	return need;
}

void steady_arm(struct instance *in)
{
	const struct step_plan *p = &in->plan;
	int64_t need, tokens;

	in->steady.n = 0;
	if (!in->steady.max || p->n_preempt || p->n_items != in->n_running)
		return;
	for (uint32_t k = 0; k < p->n_items; k++)
		if (p->items[k].req != in->running[k] ||
		    p->items[k].tokens != req_pending_tokens(in->running[k]))
			return;
	need = steady_need(in, &tokens);
	if (need < 0)
		return;
	in->steady.n = in->n_running;
	in->steady.tokens = tokens;
	in->steady.head = (struct steady_head){ UINT32_MAX, 0, 0 };
	if (in->view.n_waiting)
		in->steady.head = (struct steady_head){ in->view.waiting[0]->id,
							in->view.waiting[0]->computed_tokens,
							in->view.waiting[0]->kv_blocks };
	in->steady.left = (int64_t)in->view.free_blocks - need;
}

/* 1 .. steady.max running requests, each with one pending token of its
 * output and not swapped out; no victim order re-sorting them; no swap
 * pending; the free blocks cover their next blocks; and either nobody
 * waits, or (not on a decode pool, whose view puts KV holders first) the
 * last plan was of this running set, the same request, unchanged, heads
 * the queue, and no more blocks are left after the decodes than then.
 * With multi-LoRA's indexed queue, "waits" and "heads" are of the view
 * under max_loras (the policy admits in view order and stops at the first
 * that does not fit, so with the same running set and head it would
 * admit nobody again). */
bool steady_ready(const struct engine *e, struct instance *in)
{
	const struct req_view *head;
	struct lora_wait *lw = in->lora ? lora_inst_wait(in->lora) : NULL;
	bool pre = in->steady.pre;   /* one use (never with speculation) */
	int64_t need, left, tokens = in->n_running;

	in->steady.pre = false;
	in->steady.formed = false;
	if (!in->n_running || in->n_running > in->steady.max || kvm_swap_pending(in->kv) ||
	    e->vops->compare)
		return false;
	need = pre ? in->steady.pre_need : steady_need(in, &tokens);
	if (need < 0 || need > kvm_free_blocks(in->kv) || tokens > in->steady.max)
		return false;
	left = (int64_t)kvm_free_blocks(in->kv) - need;
	if (lw) {
		/* multi-LoRA, an indexed queue: the head of the view the batch
		 * policy would see (lora-wait.h; O(what changed), and the same
		 * view the plan would read), not the queue's */
		const void *const *v;

		if (!lora_wait_view(lw, &v))
			goto yes;
		head = v[0];
	} else {
		if (!waitq_len(&in->wq))
			goto yes;
		head = waitq_items(&in->wq)[0];
	}
	/* (and no more of the step's token budget left than then: with
	 * speculation a step's tokens may change, its drafts with the
	 * dynamic rule) */
	if (in->pl->role == POOL_DECODE || in->steady.n != in->n_running ||
	    head->id != in->steady.head.id || head->computed_tokens != in->steady.head.computed ||
	    head->kv_blocks != in->steady.head.kv_blocks || left > in->steady.left ||
	    tokens < in->steady.tokens)
		return false;
	for (uint32_t k = 0; k < in->n_running; k++)
		if (in->running[k] != &in->fl_req[k]->v)
			return false;
yes:
	in->steady.left = left;
	in->steady.formed = pre && in->steady.pre_formed;
	return true;
}

int steady_start(struct engine *e, struct instance *in, struct ss_error *err)
{
	struct exec_step xs = { .instance = (int32_t)in->idx, .start_ns = e->now };
	uint32_t n = in->n_running;
	/* the per-token calls that may do nothing, decided once: the order's
	 * served, a tenant-key queue's rekey, the service count while
	 * requests still arrive (one tenant: n whole tokens at once, the same
	 * double) */
	bool serve = order_serves(e->oops), rekey = in->wq.kind == WAITQ_TENANT;
	bool count = e->next_arrival < e->n_req, per_tenant = count && e->n_tenants > 1;
	int32_t bs = e->cfg.block_size;
	struct req_view *const *running;
	struct request **fl;
	int32_t *tokens;
	struct cost_item *items;
	struct exec_req *xreq;
	int rc;

	if (eng_grow((void **)&in->fl_req, &in->cap_fl_req, n, sizeof(*in->fl_req)) ||
	    eng_grow((void **)&in->fl_tokens, &in->cap_fl_tokens, n, sizeof(*in->fl_tokens)) ||
	    eng_grow((void **)&in->fl_items, &in->cap_fl_items, n, sizeof(*in->fl_items)) ||
	    eng_grow((void **)&in->fl_xreq, &in->cap_fl_xreq, n, sizeof(*in->fl_xreq)) ||
	    eng_grow((void **)&in->steady.grow, &in->steady.cap_grow, n, sizeof(*in->steady.grow)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	/* (read once: the stores below go through pointers the compiler
	 * cannot tell from these) */
	running = in->running;
	fl = in->fl_req;
	tokens = in->fl_tokens;
	items = in->fl_items;
	xreq = in->fl_xreq;
	if (in->steady.formed) {
		/* fl_* hold this step, its contexts written by the emission
		 * before; only the requests it listed take a block (struct
		 * steady's grow).  O(those), not O(running). */
		const uint32_t *grow = in->steady.grow;

		in->steady.formed = false;
		for (uint32_t j = 0, ng = in->steady.n_grow; j < ng; j++) {
			uint32_t k = grow[j];
			struct request *r = fl[k];

			rc = kvm_grow(in->kv, r, steady_decode_need(&r->v, bs));
			if (rc)
				return ss_error_set(err, rc, NULL, 0,
						    "out of memory for a block table");
			xreq[k] = (struct exec_req){
				.block_table = r->kv.blocks,
				.n_blocks = r->v.kv_blocks,
				.emit = true,
			};
		}
		goto formed;
	}
	if (in->pl->spec) {
		/* a decode and its drafts: 1 + spec_tokens tokens, each through
		 * the LM head when it verifies (start_step's items) */
		int64_t total = 0;
		uint32_t rows = 0;

		for (uint32_t k = 0; k < n; k++) {
			struct request *r = request_of(running[k]);
			int32_t need = steady_decode_need(&r->v, bs), t = req_pending_tokens(&r->v);

			if (need && (rc = kvm_grow(in->kv, r, need)))
				return ss_error_set(err, rc, NULL, 0, "out of memory for a block table");
			xreq[k] = (struct exec_req){
				.block_table = r->kv.blocks,
				.n_blocks = r->v.kv_blocks,
				.emit = true,
				.emit_rows = r->v.spec_tokens ? t : 0,
			};
			fl[k] = r;
			tokens[k] = t;
			items[k] = (struct cost_item){ .tokens = t, .context = r->v.computed_tokens };
			total += t;
			rows += r->v.spec_tokens ? (uint32_t)t : 1;
			if (serve)
				e->oops->served(in->order_priv, &r->v, 0, t);
			if (rekey)
				waitq_tenant_rekey(&in->wq, r, e->now);
			if (count)
				e->tenant_service[r->v.tenant] += t;
		}
		xs.total_tokens = total;
		xs.n_emit = rows;
		xs.spec_q = 1 + in->pl->spec->tree;
		goto launch;
	}
	for (uint32_t k = 0; k < n; k++) {
		struct request *r = request_of(running[k]);
		int32_t need = steady_decode_need(&r->v, bs);

		/* steady_ready counted these blocks free: only -ENOMEM */
		if (need && (rc = kvm_grow(in->kv, r, need)))
			return ss_error_set(err, rc, NULL, 0, "out of memory for a block table");
		xreq[k] = (struct exec_req){
			.block_table = r->kv.blocks,
			.n_blocks = r->v.kv_blocks,
			.emit = true,
		};
		fl[k] = r;
		tokens[k] = 1;
		items[k] = (struct cost_item){ .tokens = 1, .context = r->v.computed_tokens };
	}
formed:
	/* each request's own state is final above: the calls see what they
	 * saw between the grows */
	for (uint32_t k = 0; (serve || rekey || per_tenant) && k < n; k++) {
		struct request *r = fl[k];

		if (serve)
			e->oops->served(in->order_priv, &r->v, 0, 1);
		if (rekey)
			waitq_tenant_rekey(&in->wq, r, e->now);
		if (per_tenant)
			e->tenant_service[r->v.tenant] += 1;
	}
	if (count && !per_tenant)
		e->tenant_service[0] += n;
	xs.total_tokens = n;
	xs.n_emit = n;
launch:
	in->n_fl = n;
	in->steady.fl_steady = true;
	in->steady.steps++;
	return eng_step_launch(e, in, &xs, 0, err);
}
