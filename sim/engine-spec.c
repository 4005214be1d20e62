/* servesim — the engine's side of speculative decoding (spec.h): the
 * drafter's passes priced into a step, and a verify's outcome at its end.
 * Called only when engine_config.spec is set; a run without it never
 * enters this file. */
#include "engine-int.h"
#include "step-int.h"

#include <errno.h>

#include "engine-profile.h"

#include "sstime.h"

/* One draft pass over items[0 .. n) (reqs: their block tables) added to
 * *xr, run by the pool's drafter executor (the model-driven one prices it
 * with the drafter's cost model; a live one runs the drafter's kernels). */
static int draft_pass(struct instance *in, const struct cost_item *items,
		      const struct exec_req *reqs, uint32_t n, uint32_t n_prefill, int64_t tokens,
		      int times, struct exec_result *xr, struct ss_error *err)
{
	const struct engine_profile *p = in->pl->engine;
	struct exec_step xs = {
		.instance = (int32_t)in->idx, .n_items = n, .items = items, .reqs = reqs,
		.n_prefill = n_prefill, .n_emit = n, .total_tokens = tokens,
		.spec_q = 1 + in->pl->spec->tree,
	};
	struct exec_result dr;
	int rc;

	rc = in->pl->draft_xops->run_step(in->pl->draft_xpriv, &xs, &dr, err);
	if (rc)
		return rc;
	if (p && in->pl->draft_xops == &executor_model_ops) {
		/* an engine replays its drafter's passes as CUDA graphs where it
		 * has them (vLLM, SGLang and TensorRT-LLM capture the drafter):
		 * a graph launch, not the backend's host estimate of a step.
		 * Without graphs a pass is launched eagerly and prepares its
		 * inputs as a step does, less scheduling: the fixed and
		 * per-token terms and the per-layer one at the drafter's depth
		 * (for servesim's own executor `calibrate run` measures the two
		 * apart; a profile without prep_us_per_layer charges its whole
		 * prep_us a pass) */
		int layers = in->pl->spec->draft.n_layers;
		double host = p->n_graph_sizes ? p->graph_launch_us :
			      p->launch_us + p->launch_us_per_layer * layers + p->prep_us +
			      p->prep_us_per_layer * layers + p->prep_us_per_token * (double)tokens;

		dr.duration_ns += (int64_t)(host * 1e3) - dr.op_ns[COST_OP_HOST];
		dr.op_ns[COST_OP_HOST] = (int64_t)(host * 1e3);
		if (dr.duration_ns < 1)
			dr.duration_ns = 1;
	}
	if (times > 1) {
		dr.duration_ns = ss_time_mul_sat(dr.duration_ns, times);
		dr.energy_j *= times;
		for (int op = 0; op < COST_OP_COUNT; op++)
			dr.op_ns[op] = ss_time_mul_sat(dr.op_ns[op], times);
	}
	xr->duration_ns = ss_time_add_sat(xr->duration_ns, dr.duration_ns);
	xr->energy_j += dr.energy_j;
	for (int op = 0; op < COST_OP_COUNT; op++)
		xr->op_ns[op] += dr.op_ns[op];
	in->st->spec.draft_ns = ss_time_add_sat(in->st->spec.draft_ns, dr.duration_ns);
	in->st->spec.draft_energy_j += dr.energy_j;
	in->st->spec.draft_passes += (uint64_t)times;
	return 0;
}

/* The drafter after the target's forward of step xs (whose time, when it
 * verifies drafts, is the verify time of spec_stats): its first pass
 * reads every token the step computed (an EAGLE head or MTP layer needs
 * the target's hidden states of each, a draft model its own KV of them),
 * then passes 2..P draft one tree level more (one token for a chain) for
 * each sequence that emits, at its grown context (kept within the blocks
 * the request holds: the engine allocated its drafts' slots with its
 * verify, as vLLM allocates lookahead slots).  Nothing when no sequence
 * will speculate next (the dynamic rule) or on a prefill-only pool. */
int eng_spec_draft(struct instance *in, const struct exec_step *xs, struct exec_result *xr,
		   struct ss_error *err)
{
	const struct spec_config *c = in->pl->spec;
	int32_t bs = in->view.block_size;
	struct cost_item *it;
	struct exec_req *rq;
	uint32_t n = 0;
	int rc;

	/* a step whose LM-head rows outnumber its emitting items verifies drafts */
	for (uint32_t k = 0; k < xs->n_items; k++)
		n += xs->reqs[k].emit;
	if (xs->n_emit > n)
		in->st->spec.verify_ns = ss_time_add_sat(in->st->spec.verify_ns, xr->duration_ns);
	n = 0;
	if (!in->pl->draft_xops || in->pl->role == POOL_PREFILL || xs->n_emit == 0 ||
	    spec_propose(c, in->n_running) == 0)
		return 0;
	if (eng_grow((void **)&in->draft_items, &in->cap_draft_items, xs->n_items,
		     sizeof(*in->draft_items)) ||
	    eng_grow((void **)&in->draft_reqs, &in->cap_draft_reqs, xs->n_items,
		     sizeof(*in->draft_reqs)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	it = in->draft_items;
	rq = in->draft_reqs;
	if (c->method != SPEC_MEDUSA) {
		/* the LM head scores one row a sequence: the last accepted
		 * position's, from which the first draft is sampled (vLLM's
		 * EAGLE proposer computes logits at last_token_indices only),
		 * not every verified row as the target's did */
		for (uint32_t k = 0; k < xs->n_items; k++) {
			rq[k] = xs->reqs[k];
			rq[k].emit_rows = 0;
		}
		rc = draft_pass(in, xs->items, rq, xs->n_items, xs->n_prefill,
				xs->total_tokens, 1, xr, err);
		if (rc)
			return rc;
	}
	/* medusa: its heads read each emitting sequence's last hidden state
	 * once (one pass); others: a tree level (w tokens) per pass.
	 * Decision: priced (not live), passes 2..P are alike but for their
	 * contexts, which grow by w a pass, and a pass's time is linear in
	 * its contexts (the attention's keys; the GEMMs do not see them), so
	 * they are P - 1 passes at their mean context: one cost-model call
	 * for all of them (the simulator's speed, bench/bench-spec.sh).  A
	 * live drafter runs each. */
	int times = in->pl->draft_xops == &executor_model_ops && c->draft_passes > 2 ?
		    c->draft_passes - 1 : 1;

	for (int pass = c->method == SPEC_MEDUSA ? 0 : 1; pass < c->draft_passes;
	     pass += times) {
		int32_t w = c->method == SPEC_MEDUSA ? 1 : (c->tree + c->k - 1) / c->k;
		/* the passes' mean context offset: (pass - 1 + (times - 1) / 2) w */
		int32_t off = (int32_t)(((2 * (pass - 1) + times - 1) * w) / 2);

		n = 0;
		for (uint32_t k = 0; k < xs->n_items; k++) {
			int32_t ctx, room;

			if (!xs->reqs[k].emit)
				continue;
			ctx = c->method == SPEC_MEDUSA ?
			      xs->items[k].context + xs->items[k].tokens - 1 :
			      xs->items[k].context + xs->items[k].tokens + off;
			room = xs->reqs[k].n_blocks * bs - w;
			it[n] = (struct cost_item){ .tokens = w, .context = ctx < room ? ctx : room };
			rq[n] = (struct exec_req){ .block_table = xs->reqs[k].block_table,
						   .n_blocks = xs->reqs[k].n_blocks, .emit = true,
						   .emit_rows = w };
			n++;
		}
		rc = n ? draft_pass(in, it, rq, n, w > 1 ? n : 0, (int64_t)n * w, times, xr, err) : 0;
		if (rc)
			return rc;
	}
	return 0;
}
