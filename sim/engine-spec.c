/* servesim — the engine's side of speculative decoding (spec.h): the
 * drafter's passes priced into a step, and a verify's outcome at its end.
 * Called only when engine_config.spec is set; a run without it never
 * enters this file. */
#include "engine-int.h"
#include "step-int.h"

#include <errno.h>

#include "engine-profile.h"

#include "sstime.h"

/* One draft pass over items[0 .. n) added to *xr. */
static int draft_pass(struct instance *in, const struct cost_item *items, uint32_t n,
		      uint32_t n_prefill, int64_t tokens, struct exec_result *xr,
		      struct ss_error *err)
{
	struct cost_step cs = {
		.items = items, .n_items = n, .n_prefill = n_prefill, .n_emit = n,
		.total_tokens = tokens,
	};
	struct cost_result cr;

	const struct engine_profile *p = in->pl->spec_engine;

	if (cost_model_predict(in->pl->draft_cm, &cs, &cr, err))
		return -ERANGE;
	if (p) {
		/* an engine replays its drafter's passes as CUDA graphs where it
		 * has them (vLLM, SGLang and TensorRT-LLM capture the drafter):
		 * a graph launch, not the backend's host estimate of a step */
		double launch = p->n_graph_sizes ? p->graph_launch_us :
				p->launch_us + p->launch_us_per_layer *
				in->pl->spec->draft.n_layers;

		cr.duration_ns += (int64_t)(launch * 1e3) - cr.op_ns[COST_OP_HOST];
		cr.op_ns[COST_OP_HOST] = (int64_t)(launch * 1e3);
	}
	if (cr.duration_ns < 1)
		cr.duration_ns = 1;
	xr->duration_ns = ss_time_add_sat(xr->duration_ns, cr.duration_ns);
	xr->energy_j += cr.energy_j;
	for (int op = 0; op < COST_OP_COUNT; op++)
		xr->op_ns[op] += cr.op_ns[op];
	in->st->spec.draft_ns = ss_time_add_sat(in->st->spec.draft_ns, cr.duration_ns);
	in->st->spec.draft_energy_j += cr.energy_j;
	in->st->spec.draft_passes++;
	return 0;
}

/* The drafter after the target's forward of step xs (whose time, when it
 * verifies drafts, is the verify time of spec_stats): its first pass
 * reads every token the step computed (an EAGLE head or MTP layer needs
 * the target's hidden states of each, a draft model its own KV of them),
 * then passes 2..P draft one token more for each sequence that emits,
 * at its grown context.  Nothing when no sequence will speculate next
 * (the dynamic rule) or on a prefill-only pool. */
int eng_spec_draft(struct instance *in, const struct exec_step *xs, struct exec_result *xr,
		   struct ss_error *err)
{
	const struct spec_config *c = in->pl->spec;
	struct cost_item *it;
	uint32_t n = 0;
	int rc;

	/* a step whose LM-head rows outnumber its emitting items verifies drafts */
	for (uint32_t k = 0; k < xs->n_items; k++)
		n += xs->reqs[k].emit;
	if (xs->n_emit > n)
		in->st->spec.verify_ns = ss_time_add_sat(in->st->spec.verify_ns, xr->duration_ns);
	n = 0;
	if (!in->pl->draft_cm || in->pl->role == POOL_PREFILL || xs->n_emit == 0 ||
	    spec_propose(c, in->n_running) == 0)
		return 0;
	if (eng_grow((void **)&in->draft_items, &in->cap_draft_items, xs->n_items,
		     sizeof(*in->draft_items)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	it = in->draft_items;
	if (c->method == SPEC_MEDUSA) {
		/* the heads read the last hidden state of each emitting sequence once */
		for (uint32_t k = 0; k < xs->n_items; k++)
			if (xs->reqs[k].emit)
				it[n++] = (struct cost_item){
					.tokens = 1,
					.context = xs->items[k].context + xs->items[k].tokens - 1,
				};
		return n ? draft_pass(in, it, n, 0, n, xr, err) : 0;
	}
	rc = draft_pass(in, xs->items, xs->n_items, xs->n_prefill, xs->total_tokens, xr, err);
	for (int pass = 1; !rc && pass < c->draft_passes; pass++) {
		n = 0;
		for (uint32_t k = 0; k < xs->n_items; k++)
			if (xs->reqs[k].emit)
				it[n++] = (struct cost_item){
					.tokens = 1,
					.context = xs->items[k].context + xs->items[k].tokens + pass - 1,
				};
		rc = n ? draft_pass(in, it, n, 0, n, xr, err) : 0;
	}
	return rc;
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

		accepted = spec_accept_count(c, e->cfg.seed, r->v.id, r->v.generated_tokens,
					     drafted);
		r->v.computed_tokens -= drafted - accepted;
		st->verifies++;
		st->drafted += (uint64_t)drafted;
		st->accepted += (uint64_t)accepted;
		st->spec_emitted += (uint64_t)accepted + 1;
		st->rejected_energy_j += in->step_power_w * 1e-9 * share * (drafted - accepted);
	}
	return 1 + accepted;
}
