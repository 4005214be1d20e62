/* servesim — the burst step shape (step-int.h): multi-step scheduling.
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
#include "engine-int.h"
#include "step-int.h"

#include <errno.h>

#include "sstime.h"

/* The decode steps of the burst in flight (0 or 1: a step of its own);
 * during a burst fl_tokens[k] is the tokens item k computes over the whole
 * burst. */
struct burst {
	uint32_t n;
};

/* The steps the step in flight runs for: k for a decode-only step of a
 * profile with k > 1 scheduler steps (fewer when its blocks do not fit),
 * else 1.  (A prefill instance never has this shape.)  O(items),
 * O(items x k) when the burst is shortened. */
static uint32_t burst_len(const struct engine *e, const struct instance *in,
			  const struct exec_step *xs)
{
	uint32_t k = engine_profile_burst(e->cfg.engine);
	int32_t bs = e->cfg.block_size;

	/* every item decodes its one pending token (a 1-token chunk of a
	 * recompute has tokens 1 but emits nothing: not a decode) */
	if (k <= 1 || xs->n_prefill || xs->total_tokens != (int64_t)in->n_fl ||
	    xs->n_emit != in->n_fl)
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
		rc = eng_step_price(in, xs, &xr, err);
		if (rc)
			return rc;
		if (!ss_time_add(*dur, xr.duration_ns, dur))
			return eng_time_error(err, ((double)e->now + (double)*dur +
						    (double)xr.duration_ns) / 1e9,
					      "a burst of %u steps on instance %u", nb, in->idx);
		eng_step_account(in, xs, &xr, 0);
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

/* A decode step runs as a burst; any other step as a plain one. */
static int burst_launch(struct engine *e, struct instance *in, struct exec_step *xs,
			int64_t prefill_tokens, struct ss_error *err)
{
	struct burst *b = in->shape_priv;
	int64_t end, dur = 0;
	int rc;

	b->n = burst_len(e, in, xs);
	if (b->n <= 1)
		return step_default_launch(e, in, xs, prefill_tokens, err);
	rc = run_burst(e, in, xs, b->n, &dur, err);
	if (rc)
		return rc;
	if (!ss_time_add(e->now, dur, &end))
		return eng_time_error(err, ((double)e->now + (double)dur) / 1e9,
				      "a step on instance %u", in->idx);
	return eng_step_queue(e, in, end, err);
}

/* EV_STEP_DONE of a burst: each item's fl_tokens[k] tokens (docs/engines.md)
 * reach the client together, now, after the gap since its last one. */
static int burst_emit(struct engine *e, struct instance *in, struct ss_error *err)
{
	struct burst *b = in->shape_priv;
	struct itl_run run = ITL_RUN_INIT;
	bool fe = frontend_on(&in->fe);

	if (b->n <= 1)
		return eng_step_emit(e, in, err);
	for (uint32_t k = 0; k < in->n_fl; k++) {
		struct request *r = in->fl_req[k];
		/* when its first token leaves the front end (frontend.h): now
		 * without one */
		int64_t t = fe ? frontend_token(&in->fe, e->now) : e->now;
		int64_t gap = t - r->last_token_ns;

		r->last_step_ns = e->now - in->step_start_ns;
		r->v.computed_tokens += in->fl_tokens[k];
		kvm_register(in->kv, r);
		r->v.generated_tokens += in->fl_tokens[k];
		in->view.outstanding_tokens += in->fl_tokens[k];
		eng_itl_add(e, &run, gap, 1);
		if (in->fl_tokens[k] > 1 && !fe)
			eng_itl_add(e, &run, 0, (uint64_t)in->fl_tokens[k] - 1);
		/* with a front end, the burst's other tokens follow one by
		 * one, each its service after the last */
		for (int32_t j = 1; fe && j < in->fl_tokens[k]; j++) {
			int64_t u = frontend_token(&in->fe, e->now);

			eng_itl_add(e, &run, u - t, 1);
			t = u;
		}
		if (gap > r->max_gap_ns)
			r->max_gap_ns = gap;
		r->last_token_ns = t;
		if (r->v.generated_tokens >= r->output_tokens)
			eng_finish(e, in, r);
	}
	eng_itl_flush(e, run);
	b->n = 0;
	return 0;
}

const struct step_shape step_burst = {
	.version = 1,
	.name = "burst",
	.priv_size = sizeof(struct burst),
	.steady = true,
	.init = step_default_init,
	.release = step_default_release,
	.next = step_default_next,
	.schedule = eng_unit_schedule,
	.view = step_default_view,
	.launch = burst_launch,
	.emit = burst_emit,
	.done = step_default_done,
	.power_w = step_default_power_w,
};
