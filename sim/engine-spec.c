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
		      struct exec_result *xr, struct ss_error *err)
{
	const struct engine_profile *p = in->pl->spec_engine;
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
		 * a graph launch, not the backend's host estimate of a step */
		double launch = p->n_graph_sizes ? p->graph_launch_us :
				p->launch_us + p->launch_us_per_layer * in->pl->spec->draft.n_layers;

		dr.duration_ns += (int64_t)(launch * 1e3) - dr.op_ns[COST_OP_HOST];
		dr.op_ns[COST_OP_HOST] = (int64_t)(launch * 1e3);
		if (dr.duration_ns < 1)
			dr.duration_ns = 1;
	}
	xr->duration_ns = ss_time_add_sat(xr->duration_ns, dr.duration_ns);
	xr->energy_j += dr.energy_j;
	for (int op = 0; op < COST_OP_COUNT; op++)
		xr->op_ns[op] += dr.op_ns[op];
	in->st->spec.draft_ns = ss_time_add_sat(in->st->spec.draft_ns, dr.duration_ns);
	in->st->spec.draft_energy_j += dr.energy_j;
	in->st->spec.draft_passes++;
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
		rc = draft_pass(in, xs->items, xs->reqs, xs->n_items, xs->n_prefill,
				xs->total_tokens, xr, err);
		if (rc)
			return rc;
	}
	/* medusa: its heads read each emitting sequence's last hidden state
	 * once (one pass); others: a tree level (w tokens) per pass */
	for (int pass = c->method == SPEC_MEDUSA ? 0 : 1; pass < c->draft_passes; pass++) {
		int32_t w = c->method == SPEC_MEDUSA ? 1 : (c->tree + c->k - 1) / c->k;

		n = 0;
		for (uint32_t k = 0; k < xs->n_items; k++) {
			int32_t ctx, room;

			if (!xs->reqs[k].emit)
				continue;
			ctx = c->method == SPEC_MEDUSA ?
			      xs->items[k].context + xs->items[k].tokens - 1 :
			      xs->items[k].context + xs->items[k].tokens + (pass - 1) * w;
			room = xs->reqs[k].n_blocks * bs - w;
			it[n] = (struct cost_item){ .tokens = w, .context = ctx < room ? ctx : room };
			rq[n] = (struct exec_req){ .block_table = xs->reqs[k].block_table,
						   .n_blocks = xs->reqs[k].n_blocks, .emit = true,
						   .emit_rows = w };
			n++;
		}
		rc = n ? draft_pass(in, it, rq, n, w > 1 ? n : 0, (int64_t)n * w, xr, err) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

/* r's step verified its drafts: computed_tokens has been advanced by the
 * step's tokens (its last token and the drafts scheduled, which a token
 * budget may have cut short).  Takes the rejected drafts back and returns
 * the tokens r emits now, 1 + accepted.  step_ns and step_tokens: the
 * step's duration and its tokens, whose share puts energy on the
 * rejected drafts. */
int32_t eng_spec_verify(struct engine *e, struct instance *in, struct request *r,
			int64_t step_ns, int64_t step_tokens)
{
	const struct spec_config *c = in->pl->spec;
	struct spec_stats *st = &in->st->spec;
	int32_t drafted = r->v.computed_tokens - req_total_tokens(&r->v);
	int32_t accepted = 0;

	r->v.spec_tokens = 0;
	if (drafted > 0) {
		double share = (double)step_ns / (double)step_tokens;

		/* a tree's candidates hold paths of at most k tokens */
		accepted = spec_accept_count(c, e->cfg.seed, r->v.id, r->v.generated_tokens,
					     drafted < c->k ? drafted : c->k);
		r->v.computed_tokens -= drafted - accepted;
		r->spec_verifies++;
		r->spec_accepted += (uint32_t)accepted;
		st->verifies++;
		st->drafted += (uint64_t)drafted;
		st->accepted += (uint64_t)accepted;
		st->spec_emitted += (uint64_t)accepted + 1;
		st->rejected_energy_j += in->step_power_w * 1e-9 * share * (drafted - accepted);
	}
	return 1 + accepted;
}
