/* servesim — the pipeline step shape (step-int.h): pipeline parallelism
 * (docs/cost-models.md, "Pipeline parallelism").
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
 * per instance serves the oldest batch, ring slot head. */
#include "engine-int.h"
#include "step-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sstime.h"

/* A batch in the pipeline: its requests and the tokens each computes, as
 * instance.fl_req / fl_tokens hold them for the step in flight. */
struct pp_batch {
	struct request **req;
	int32_t *tokens;
	uint32_t n, cap_req, cap_tokens;
	int64_t start_ns, end_ns; /* entered stage 1; leaves the last stage */
};

/* An instance's pipeline: when each of the pp stages is next free, ns;
 * the batches in flight, a ring of pp, oldest at head; the running
 * requests in none of them (what the batch policy sees). */
struct pipeline {
	int64_t *stage_free;
	struct pp_batch *ppb;
	uint32_t head, n;
	struct req_view **vis;
	uint32_t cap_vis;
};

/* Hide the running requests in flight from the batch policy's view. */
static int pp_view(struct instance *in)
{
	struct pipeline *p = in->shape_priv;
	uint32_t m = 0;

	if (!p->n)
		return 0;
	if (SS_GROW(&p->vis, &p->cap_vis, in->n_running))
		return -ENOMEM;
	for (uint32_t k = 0; k < in->n_running; k++)
		if (!(request_of(in->running[k])->flags & RF_INFLIGHT))
			p->vis[m++] = in->running[k];
	in->view.running = (const struct req_view *const *)p->vis;
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

/* The batch in in.fl_*[0 .. n_fl) (xs, prefill_tokens as step_shape.launch
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
	struct pipeline *p = in->shape_priv;
	struct pp_batch *b;
	int rc;

	rc = eng_step_price(in, xs, &xr, err);
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
		int64_t start = t > p->stage_free[s] ? t : p->stage_free[s];

		if (!ss_time_add(start, stage_ns[s], &end))
			return eng_time_error(err, ((double)start + (double)stage_ns[s]) / 1e9,
					      "stage %d of a step on instance %u", s, in->idx);
		p->stage_free[s] = end;
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
	eng_step_account(in, xs, &xr, prefill_tokens);
	/* step_power_w is now one stage's power while it runs this batch
	 * (tp GPUs); each batch in flight keeps about one stage busy, the
	 * other stages' GPUs idle: the instance's power with p->n + 1 in
	 * flight (the time series scales it the same way, engine.c) */
	{
		double w = in->step_power_w * (p->n + 1) +
			   in->pl->gpu->idle_w * in->pl->tp * (pp - 1 - (int)p->n);

		if (w > in->st->peak_power_w)
			in->st->peak_power_w = w;
	}
	b = &p->ppb[(p->head + p->n) % (uint32_t)pp];
	pp_swap(in, b);
	b->n = in->n_fl;
	b->start_ns = e->now;
	b->end_ns = end;
	for (uint32_t k = 0; k < b->n; k++)
		b->req[k]->flags |= RF_INFLIGHT;
	in->n_fl = 0;
	p->n++;
	in->busy = true;
	in->step_start_ns = e->now;
	eng_refresh_view(in);
	rc = p->n == 1 ? evq_push(&e->q, &in->ev_step, end) : 0;
	if (!rc)
		rc = eng_push_schedule(e, in);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

/* EV_STEP_DONE on a pipeline: the oldest batch leaves the last stage; its
 * requests and tokens go back to in.fl_* and emit their tokens. */
static int pp_emit(struct engine *e, struct instance *in, struct ss_error *err)
{
	struct pipeline *p = in->shape_priv;
	struct pp_batch *b = &p->ppb[p->head];

	pp_swap(in, b);
	in->n_fl = b->n;
	b->n = 0;
	in->step_start_ns = b->start_ns;
	p->head = (p->head + 1) % (uint32_t)in->pl->pp;
	p->n--;
	for (uint32_t k = 0; k < in->n_fl; k++)
		in->fl_req[k]->flags &= ~RF_INFLIGHT;
	return eng_step_emit(e, in, err);
}

/* After it: busy while batches are in flight, the next one's completion
 * queued. */
static int pp_done(struct engine *e, struct instance *in, struct ss_error *err)
{
	struct pipeline *p = in->shape_priv;
	int rc;

	in->busy = p->n > 0;
	if (!p->n)
		return 0;
	rc = evq_push(&e->q, &in->ev_step, p->ppb[p->head].end_ns);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

/* A new batch enters when fewer than pp are in flight, once stage 1 is
 * free. */
static bool pp_next(const struct engine *e, const struct instance *in, int64_t *at_ns)
{
	const struct pipeline *p = in->shape_priv;

	*at_ns = p->stage_free[0] > e->now ? p->stage_free[0] : e->now;
	return p->n < (uint32_t)in->pl->pp;
}

/* Each batch in flight keeps about one stage busy at the last batch's
 * stage power, the other stages' GPUs idle. */
static double pp_power_w(const struct instance *in)
{
	const struct pipeline *p = in->shape_priv;
	uint32_t n = p->n < (uint32_t)in->pl->pp ? p->n : (uint32_t)in->pl->pp;

	return (p->n ? in->step_power_w * n : 0.0) +
	       in->pl->gpu->idle_w * in->pl->tp * (double)((uint32_t)in->pl->pp - n);
}

static int pp_init(struct engine *e, struct instance *in, void *priv)
{
	struct pipeline *p = priv;

	(void)e;
	p->stage_free = calloc((size_t)in->pl->pp, sizeof(*p->stage_free));
	p->ppb = calloc((size_t)in->pl->pp, sizeof(*p->ppb));
	return p->stage_free && p->ppb ? 0 : -ENOMEM;
}

static void pp_release(struct instance *in, void *priv)
{
	struct pipeline *p = priv;

	for (int k = 0; p->ppb && k < in->pl->pp; k++) {
		free(p->ppb[k].req);
		free(p->ppb[k].tokens);
	}
	free(p->ppb);
	free(p->stage_free);
	free(p->vis);
}

const struct step_shape step_pipeline = {
	.version = 1,
	.name = "pipeline",
	.priv_size = sizeof(struct pipeline),
	.steady = false,   /* the policy sees the requests in no batch in flight */
	.init = pp_init,
	.release = pp_release,
	.next = pp_next,
	.schedule = eng_unit_schedule,
	.view = pp_view,
	.launch = pp_launch,
	.emit = pp_emit,
	.done = pp_done,
	.power_w = pp_power_w,
};

