/* servesim — the discrete-event engine (see engine.h).
 *
 * Event kinds, in the order they fire at equal times:
 *   STEP_DONE  an instance's step completes: tokens are emitted, requests
 *              finish and release their KV blocks;
 *   ARRIVAL    the next request of the workload arrives and is routed;
 *   SCHEDULE   an idle instance asks its batch policy for the next step
 *              (after every completion and arrival at that instant, so
 *              simultaneous arrivals are batched together);
 *   SAMPLE     the time series is sampled.
 * Events are pre-allocated (one arrival, one sample, and one step and one
 * schedule event per instance), so the loop never allocates per event.
 */
#include "engine.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "evq.h"
#include "executor.h"
#include "kvpool.h"
#include "rng.h"

enum ev_kind {
	EV_STEP_DONE = 0,
	EV_ARRIVAL = 1,
	EV_SCHEDULE = 2,
	EV_SAMPLE = 3,
};

/* request.flags bits */
#define RF_PICKED 1u     /* taken from the waiting queue by the current plan */
#define RF_REMOVE 2u     /* leaving the running set */

struct instance {
	uint32_t idx;
	struct kvpool pool;
	/* Running set in admission order. */
	struct req_view **running;
	uint32_t n_running, cap_running;
	/* Waiting queue: wait[head .. head + n_wait). Room before head makes
	 * putting preempted requests back at the front O(1). */
	struct req_view **wait;
	uint32_t wait_head, n_wait, cap_wait;
	struct inst_view view;
	struct event ev_step, ev_sched;
	bool busy;
	void *batch_priv;
	/* plan buffers */
	struct step_plan plan;
	/* the step in flight */
	struct request **fl_req;
	int32_t *fl_tokens;
	struct cost_item *fl_items;
	uint32_t n_fl, cap_fl_req, cap_fl_tokens, cap_fl_items;
	int64_t kv_mark_ns;       /* last time kv_block_ns was brought up to date */
	double step_power_w;      /* power of the step in flight, all tp GPUs, W */
	struct instance_stats *st;  /* = &engine.stats[idx] */
};

struct engine {
	struct engine_config cfg;
	const struct workload *wl;
	struct request *req;
	uint64_t n_req;
	uint64_t next_arrival;
	uint64_t n_done;          /* finished + rejected */
	int64_t now;
	struct evq q;
	struct event ev_arrival, ev_sample;

	struct instance *inst;
	struct instance_stats *stats;
	uint32_t n_inst;
	const struct inst_view **views;
	int32_t kv_blocks;
	double kv_bytes_per_block;
	int32_t max_model_len;

	const struct batch_policy_ops *bops;
	const struct router_ops *rops;
	void *router_priv;
	struct cost_model *cm;
	const struct executor_ops *xops;
	void *xpriv;
	bool xpriv_owned;
	gsl_rng *policy_rng;
	struct policy_host host;

	struct ss_hist itl;
	struct ts_sample *samples;
	uint64_t n_samples, cap_samples;

	engine_progress_fn progress;
	void *progress_ctx;
};

void engine_config_defaults(struct engine_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->tp = 1;
	cfg->n_instances = 1;
	cfg->block_size = 16;
	cfg->gpu_mem_util = 0.9;
	cfg->activation_reserve_bytes = -1;
	cfg->policy = "vllm";
	cfg->router = "rr";
	cfg->cost_model = "auto";
}

static double host_uniform(void *ctx)
{
	return gsl_rng_uniform(ctx);
}

/* ---- array helpers ------------------------------------------------------ */

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t c = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*arr, elem * c);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

static void refresh_view(struct instance *in)
{
	in->view.free_blocks = in->pool.n_free;
	in->view.busy = in->busy;
	in->view.running = (const struct req_view *const *)in->running;
	in->view.n_running = in->n_running;
	in->view.waiting = (const struct req_view *const *)(in->wait + in->wait_head);
	in->view.n_waiting = in->n_wait;
}

static int wait_push_back(struct instance *in, struct req_view *v)
{
	if (in->wait_head + in->n_wait == in->cap_wait) {
		if (in->wait_head > in->cap_wait / 2) {
			memmove(in->wait, in->wait + in->wait_head, sizeof(*in->wait) * in->n_wait);
			in->wait_head = 0;
		} else if (grow((void **)&in->wait, &in->cap_wait, in->cap_wait + 1,
				sizeof(*in->wait))) {
			return -ENOMEM;
		}
	}
	in->wait[in->wait_head + in->n_wait++] = v;
	return 0;
}

static int wait_push_front(struct instance *in, struct req_view *v)
{
	if (in->wait_head == 0) {
		uint32_t gap = in->n_wait / 2 + 16;

		if (grow((void **)&in->wait, &in->cap_wait, in->n_wait + gap, sizeof(*in->wait)))
			return -ENOMEM;
		memmove(in->wait + gap, in->wait, sizeof(*in->wait) * in->n_wait);
		in->wait_head = gap;
	}
	in->wait[--in->wait_head] = v;
	in->n_wait++;
	return 0;
}

/* Remove the requests flagged RF_PICKED from the waiting queue.  Plans take
 * mostly from the front, so scan only until all n_picked are found and
 * advance the head past a picked prefix without moving anything. */
static void wait_remove_picked(struct instance *in, uint32_t n_picked)
{
	struct req_view **w = in->wait + in->wait_head;
	uint32_t rd = 0, wr, found = 0;

	while (rd < in->n_wait && found < n_picked && (request_of(w[rd])->flags & RF_PICKED)) {
		request_of(w[rd])->flags &= ~RF_PICKED;
		rd++;
		found++;
	}
	in->wait_head += rd;
	in->n_wait -= rd;
	w += rd;
	if (found == n_picked)
		return;
	for (rd = 0, wr = 0; rd < in->n_wait; rd++) {
		struct request *r = request_of(w[rd]);

		if (found < n_picked && (r->flags & RF_PICKED)) {
			r->flags &= ~RF_PICKED;
			found++;
			continue;
		}
		w[wr++] = w[rd];
	}
	in->n_wait = wr;
}

static void running_compact(struct instance *in)
{
	uint32_t wr = 0;

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

/* ---- KV accounting ------------------------------------------------------ */

static void kv_mark(struct engine *e, struct instance *in)
{
	in->st->kv_block_ns += (double)kvpool_used(&in->pool) * (double)(e->now - in->kv_mark_ns);
	in->kv_mark_ns = e->now;
}

static void kv_release(struct engine *e, struct instance *in, struct request *r)
{
	kv_mark(e, in);
	kvpool_free(&in->pool, r->blocks, r->v.kv_blocks);
	r->v.kv_blocks = 0;
}

static int kv_grow(struct engine *e, struct instance *in, struct request *r, int32_t need)
{
	int32_t want = r->v.kv_blocks + need;

	if (need == 0)
		return 0;
	if (want > r->blocks_cap) {
		/* Sized once for the request's whole life (prompt + output);
		 * the loop covers a policy that over-reserves. */
		int32_t cap = kvpool_blocks_for(&in->pool,
						(int64_t)r->v.prompt_tokens + r->output_tokens);
		int32_t *b;

		while (cap < want)
			cap *= 2;
		b = realloc(r->blocks, sizeof(*b) * (size_t)cap);
		if (!b)
			return -ENOMEM;
		r->blocks = b;
		r->blocks_cap = cap;
	}
	kv_mark(e, in);
	if (kvpool_alloc(&in->pool, need, r->blocks + r->v.kv_blocks))
		return -ENOSPC;
	r->v.kv_blocks = want;
	if (kvpool_used(&in->pool) > in->st->peak_used_blocks)
		in->st->peak_used_blocks = kvpool_used(&in->pool);
	return 0;
}

/* ---- request lifecycle -------------------------------------------------- */

static void reject(struct engine *e, struct request *r, const char *reason)
{
	r->v.state = REQ_REJECTED;
	r->reject_reason = reason;
	e->n_done++;
}

static void finish(struct engine *e, struct instance *in, struct request *r)
{
	r->finish_ns = e->now;
	r->v.state = REQ_FINISHED;
	kv_release(e, in, r);
	free(r->blocks);
	r->blocks = NULL;
	r->blocks_cap = 0;
	r->flags |= RF_REMOVE;
	in->view.outstanding_tokens -= req_total_tokens(&r->v);
	in->view.outstanding_requests--;
	e->n_done++;
}

static int push_schedule(struct engine *e, struct instance *in)
{
	if (in->busy || event_queued(&in->ev_sched))
		return 0;
	return evq_push(&e->q, &in->ev_sched, e->now);
}

static int arm_arrival(struct engine *e)
{
	if (e->next_arrival >= e->n_req)
		return 0;
	return evq_push(&e->q, &e->ev_arrival, e->req[e->next_arrival].v.arrival_ns);
}

static int on_arrival(struct engine *e, struct ss_error *err)
{
	struct request *r = &e->req[e->next_arrival++];
	const char *reason = NULL;
	struct instance *in;
	uint32_t pick;
	int rc;

	r->v.state = REQ_QUEUED;
	if ((int64_t)r->v.prompt_tokens + r->output_tokens > e->max_model_len) {
		reject(e, r, "prompt + output longer than the model's context length");
		return arm_arrival(e);
	}
	pick = e->rops->route(e->router_priv, &r->v, e->views, e->n_inst, e->now, &e->host);
	if (pick >= e->n_inst)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "router %s returned instance %u of %u",
				    e->rops->name, pick, e->n_inst);
	in = &e->inst[pick];
	r->instance = (int32_t)pick;
	/* The KV of the last output token is never written, hence -1. */
	if (kvpool_blocks_for(&in->pool, (int64_t)r->v.prompt_tokens + r->output_tokens - 1) >
	    in->pool.total) {
		reject(e, r, "needs more KV blocks than the instance has");
		return arm_arrival(e);
	}
	if (e->bops->admissible && !e->bops->admissible(in->batch_priv, &r->v, &in->view, &reason)) {
		reject(e, r, reason ? reason : "not admissible under the batch policy");
		return arm_arrival(e);
	}
	rc = wait_push_back(in, &r->v);
	if (rc)
		return ss_error_set(err, rc, NULL, 0, "out of memory queueing a request");
	in->view.outstanding_tokens += r->v.prompt_tokens;
	in->view.outstanding_requests++;
	refresh_view(in);
	rc = push_schedule(e, in);
	if (!rc)
		rc = arm_arrival(e);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
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
		kv_release(e, in, r);
		r->v.computed_tokens = 0;
		r->v.state = REQ_QUEUED;
		r->v.preemptions++;
		r->flags |= RF_REMOVE;
		in->st->preemptions++;
	}
	running_compact(in);
	for (uint32_t k = 0; k < p->n_preempt; k++)
		if (wait_push_front(in, (struct req_view *)p->preempt[k]))
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

static int start_step(struct engine *e, struct instance *in, struct ss_error *err)
{
	const struct step_plan *p = &in->plan;
	struct exec_step xs = { .instance = (int32_t)in->idx, .start_ns = e->now };
	struct exec_result xr = { 0 };
	uint32_t n_picked = 0;
	int64_t prefill_tokens = 0;
	int rc;

	if (grow((void **)&in->fl_req, &in->cap_fl_req, p->n_items, sizeof(*in->fl_req)) ||
	    grow((void **)&in->fl_tokens, &in->cap_fl_tokens, p->n_items, sizeof(*in->fl_tokens)) ||
	    grow((void **)&in->fl_items, &in->cap_fl_items, p->n_items, sizeof(*in->fl_items)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");

	for (uint32_t k = 0; k < p->n_items; k++) {
		struct request *r = request_of(p->items[k].req);
		int32_t tokens = p->items[k].tokens;
		bool from_wait = r->v.state == REQ_QUEUED;

		if (r->instance != (int32_t)in->idx || (!from_wait && r->v.state != REQ_RUNNING) ||
		    (r->flags & RF_PICKED) || tokens < 1 || tokens > req_pending_tokens(&r->v))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "batch policy %s planned an invalid item (request %u, %d tokens)",
					    e->bops->name, r->v.id, tokens);
		rc = kv_grow(e, in, r, req_blocks_needed(&r->v, tokens, in->pool.block_size));
		if (rc)
			return ss_error_set(err, rc, NULL, 0,
					    "batch policy %s planned more KV blocks than free on instance %u",
					    e->bops->name, in->idx);
		if (from_wait) {
			r->flags |= RF_PICKED;
			n_picked++;
			r->v.state = REQ_RUNNING;
			if (grow((void **)&in->running, &in->cap_running, in->n_running + 1,
				 sizeof(*in->running)))
				return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			in->running[in->n_running++] = &r->v;
			if (r->first_sched_ns < 0)
				r->first_sched_ns = e->now;
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
	if (n_picked)
		wait_remove_picked(in, n_picked);
	in->n_fl = p->n_items;

	xs.n_items = p->n_items;
	xs.items = in->fl_items;
	xs.reqs = (const struct request *const *)in->fl_req;
	rc = e->xops->run_step(e->xpriv, &xs, &xr, err);
	if (rc)
		return rc;
	assert(xr.duration_ns > 0);

	for (uint32_t k = 0; k < in->n_fl; k++)
		in->fl_req[k]->energy_j += xr.energy_j * (double)in->fl_tokens[k] /
					   (double)xs.total_tokens;
	account_energy(in, &xr, prefill_tokens, xs.total_tokens);
	in->st->steps++;
	in->st->busy_ns += xr.duration_ns;
	in->st->busy_energy_j += xr.energy_j;
	in->st->out_of_grid += xr.out_of_grid;
	in->st->out_of_grid_ns += xr.out_of_grid_ns;
	for (int op = 0; op < COST_OP_COUNT; op++)
		in->st->op_ns[op] += xr.op_ns[op];
	ss_hist_add(&in->st->batch_seqs, in->n_fl);
	ss_hist_add(&in->st->batch_tokens, xs.total_tokens);
	in->busy = true;
	refresh_view(in);
	rc = evq_push(&e->q, &in->ev_step, e->now + xr.duration_ns);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

static int ensure_plan_room(struct instance *in, uint32_t max_items)
{
	uint32_t cap;

	cap = in->plan.cap_items;
	if (grow((void **)&in->plan.items, &cap, in->n_running + max_items,
		 sizeof(*in->plan.items)))
		return -ENOMEM;
	in->plan.cap_items = cap;
	cap = in->plan.cap_preempt;
	if (grow((void **)&in->plan.preempt, &cap, in->n_running + 1, sizeof(*in->plan.preempt)))
		return -ENOMEM;
	in->plan.cap_preempt = cap;
	return 0;
}

static int on_schedule(struct engine *e, struct instance *in, struct ss_error *err)
{
	uint32_t max_items = e->bops->max_items(in->batch_priv);
	int rc;

	if (in->busy)
		return 0;
	for (;;) {
		if (ensure_plan_room(in, max_items))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		in->plan.n_items = 0;
		in->plan.n_preempt = 0;
		refresh_view(in);
		e->bops->pick_step(in->batch_priv, &in->view, e->now, &e->host, &in->plan);
		assert(in->plan.n_items <= in->plan.cap_items);
		assert(in->plan.n_preempt <= in->plan.cap_preempt);
		if (in->plan.n_preempt) {
			rc = apply_preemptions(e, in, err);
			if (rc)
				return rc;
		}
		if (in->plan.n_items)
			return start_step(e, in, err);
		if (in->plan.n_preempt)
			continue;
		if (in->n_running == 0 && in->n_wait > 0) {
			/* An idle, empty instance that cannot start its head
			 * request never will: reject it rather than hang. */
			struct request *r = request_of(in->wait[in->wait_head]);

			in->wait_head++;
			in->n_wait--;
			in->view.outstanding_tokens -= req_total_tokens(&r->v);
			in->view.outstanding_requests--;
			reject(e, r, "could not be scheduled on an idle instance");
			continue;
		}
		refresh_view(in);
		return 0;
	}
}

static int on_step_done(struct engine *e, struct instance *in)
{
	for (uint32_t k = 0; k < in->n_fl; k++) {
		struct request *r = in->fl_req[k];

		r->v.computed_tokens += in->fl_tokens[k];
		if (r->v.computed_tokens < req_total_tokens(&r->v))
			continue;
		/* All known tokens are in the KV cache: one output token. */
		r->v.generated_tokens++;
		in->view.outstanding_tokens++;
		if (r->first_token_ns < 0)
			r->first_token_ns = e->now;
		else
			ss_hist_add(&e->itl, e->now - r->last_token_ns);
		r->last_token_ns = e->now;
		if (r->v.generated_tokens >= r->output_tokens)
			finish(e, in, r);
	}
	in->n_fl = 0;
	running_compact(in);
	in->busy = false;
	refresh_view(in);
	return push_schedule(e, in);
}

static int on_sample(struct engine *e)
{
	if (e->n_samples + e->n_inst > e->cap_samples) {
		uint64_t cap = e->cap_samples ? e->cap_samples * 2 : 1024;
		struct ts_sample *s;

		while (cap < e->n_samples + e->n_inst)
			cap *= 2;
		s = realloc(e->samples, sizeof(*s) * cap);
		if (!s)
			return -ENOMEM;
		e->samples = s;
		e->cap_samples = cap;
	}
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct instance *in = &e->inst[i];

		e->samples[e->n_samples++] = (struct ts_sample){
			.t_ns = e->now,
			.instance = (int32_t)i,
			.queued = (int32_t)in->n_wait,
			.running = (int32_t)in->n_running,
			.kv_used_blocks = kvpool_used(&in->pool),
			.power_w = in->busy ? in->step_power_w : e->cfg.gpu->idle_w * e->cfg.tp,
		};
	}
	if (e->n_done < e->n_req)
		return evq_push(&e->q, &e->ev_sample, e->now + e->cfg.sample_interval_ns);
	return 0;
}

/* ---- set-up ------------------------------------------------------------- */

/* Per-GPU memory held back from the KV cache for activations, CUDA graphs,
 * the CUDA context and NCCL buffers (docs/kv-cache.md): 1 GiB fixed plus the
 * activations of an 8192-token step and the fp32 logits of 256 sequences. */
static double estimate_reserve(const struct model_spec *m, int tp)
{
	double act = 8192.0 * (4.0 * m->hidden + 2.0 * m->intermediate / tp) * m->dtype_bytes;
	double logits = 256.0 * m->vocab / tp * 4.0;

	return 1024.0 * 1024 * 1024 + act + logits;
}

int engine_kv_capacity(const struct engine_config *c, int32_t *blocks_out, struct ss_error *err)
{
	const struct model_spec *m = c->model;
	double reserve = c->activation_reserve_bytes >= 0 ? c->activation_reserve_bytes
							   : estimate_reserve(m, c->tp);
	double weights = model_weight_bytes(m) / c->tp;
	double avail = c->gpu->hbm_bytes * c->gpu_mem_util - weights - reserve;
	/* KV heads are split across the tp GPUs, replicated when fewer than tp. */
	int kv_heads_per_gpu = m->n_kv_heads >= c->tp ? m->n_kv_heads / c->tp : 1;
	double per_token_gpu = 2.0 * m->n_layers * kv_heads_per_gpu * m->head_dim * m->dtype_bytes;
	double blocks;

	if (c->kv_blocks_override > 0) {
		*blocks_out = (int32_t)c->kv_blocks_override;
		return 0;
	}
	blocks = floor(avail / (per_token_gpu * c->block_size));
	if (blocks < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s does not fit on %d x %s: %.1f GiB of weights and %.1f GiB reserved per GPU exceed %.0f%% of %.1f GiB; use more --tp or a larger GPU",
				    m->name, c->tp, c->gpu->name, weights / 1073741824.0,
				    reserve / 1073741824.0, c->gpu_mem_util * 100,
				    c->gpu->hbm_bytes / 1073741824.0);
	*blocks_out = blocks > INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)blocks;
	return 0;
}

static int size_kv(struct engine *e, struct ss_error *err)
{
	e->kv_bytes_per_block = model_kv_bytes_per_token(e->cfg.model) * e->cfg.block_size;
	return engine_kv_capacity(&e->cfg, &e->kv_blocks, err);
}

static int validate(const struct engine_config *c, struct ss_error *err)
{
	if (!c->model || !c->gpu)
		return ss_error_set(err, -EINVAL, NULL, 0, "a model and a GPU are required");
	if (c->tp < 1 || c->tp > 64)
		return ss_error_set(err, -EINVAL, NULL, 0, "--tp: expected 1..64, got %d", c->tp);
	if (c->n_instances < 1 || c->n_instances > 100000)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--instances: expected 1..100000, got %u", c->n_instances);
	if (c->block_size < 1 || c->block_size > 4096)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--block-size: expected 1..4096 tokens, got %d", c->block_size);
	if (!(c->gpu_mem_util > 0 && c->gpu_mem_util <= 1))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--gpu-memory-utilization: expected a fraction in (0, 1], got %g",
				    c->gpu_mem_util);
	if (c->sample_interval_ns < 0)
		return ss_error_set(err, -EINVAL, NULL, 0, "sample interval must be >= 0");
	return 0;
}

static int make_policies(struct engine *e, struct ss_error *err)
{
	struct ss_params p;
	int rc;

	rc = ss_params_parse(&p, "--policy", e->cfg.policy, true, err);
	if (rc)
		return rc;
	e->bops = batch_policy_find(p.name);
	if (!e->bops)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--policy: unknown batch policy '%s' (see `servesim list policies`)",
				    p.name);
	assert(e->bops->version == POLICY_VERSION && e->bops->pick_step && e->bops->max_items);
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct ss_params pi = p;

		e->inst[i].batch_priv = calloc(1, e->bops->priv_size ? e->bops->priv_size : 1);
		if (!e->inst[i].batch_priv)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		rc = e->bops->init ? e->bops->init(e->inst[i].batch_priv, &pi, err) : 0;
		if (!rc)
			rc = ss_params_check_unused(&pi, err);
		if (rc)
			return rc;
	}

	rc = ss_params_parse(&p, "--router", e->cfg.router, true, err);
	if (rc)
		return rc;
	e->rops = router_find(p.name);
	if (!e->rops)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--router: unknown router '%s' (see `servesim list policies`)",
				    p.name);
	assert(e->rops->version == POLICY_VERSION && e->rops->route);
	e->router_priv = calloc(1, e->rops->priv_size ? e->rops->priv_size : 1);
	if (!e->router_priv)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	rc = e->rops->init ? e->rops->init(e->router_priv, &p, e->n_inst, err) : 0;
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	return rc;
}

int engine_new(struct engine **out, const struct engine_config *cfg,
	       const struct workload *wl, struct ss_error *err)
{
	struct cost_config cc = {
		.model = cfg->model, .gpu = cfg->gpu, .tp = cfg->tp,
		.stores = cfg->stores, .n_stores = cfg->n_stores,
		.power_cap_w = cfg->power_cap_w, .clock_frac = cfg->clock_frac,
	};
	struct engine *e;
	int rc;

	*out = NULL;
	rc = validate(cfg, err);
	if (rc)
		return rc;
	e = calloc(1, sizeof(*e));
	if (!e)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	e->cfg = *cfg;
	e->wl = wl;
	e->n_inst = cfg->n_instances;
	e->max_model_len = cfg->model->max_context;
	ss_hist_init(&e->itl);
	event_init(&e->ev_arrival, EV_ARRIVAL, EV_ARRIVAL, 0);
	event_init(&e->ev_sample, EV_SAMPLE, EV_SAMPLE, 0);

	rc = size_kv(e, err);
	if (rc)
		goto fail;
	for (size_t i = 1; i < wl->n; i++)
		if (wl->req[i].arrival_ns < wl->req[i - 1].arrival_ns) {
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "workload request %zu arrives before request %zu: expected arrivals in time order",
					  i, i - 1);
			goto fail;
		}
	rc = -ENOMEM;
	e->n_req = wl->n;
	e->req = calloc(e->n_req ? e->n_req : 1, sizeof(*e->req));
	e->inst = calloc(e->n_inst, sizeof(*e->inst));
	e->views = calloc(e->n_inst, sizeof(*e->views));
	e->stats = calloc(e->n_inst, sizeof(*e->stats));
	e->policy_rng = ss_rng_new(cfg->seed, SS_RNG_POLICY);
	if (!e->req || !e->inst || !e->views || !e->stats || !e->policy_rng ||
	    evq_init(&e->q, 2 * e->n_inst + 4)) {
		ss_error_set(err, rc, NULL, 0, "out of memory");
		goto fail;
	}
	e->host = (struct policy_host){ .ctx = e->policy_rng, .uniform = host_uniform };
	for (uint64_t i = 0; i < e->n_req; i++) {
		const struct wl_request *w = &wl->req[i];
		struct request *r = &e->req[i];

		r->v = (struct req_view){
			.id = (uint32_t)i,
			.tenant = w->tenant,
			.priority = w->priority,
			.arrival_ns = w->arrival_ns,
			.prompt_tokens = w->prompt_tokens,
			.predicted_output = -1,
			.state = REQ_PENDING,
		};
		r->output_tokens = w->output_tokens;
		r->instance = -1;
		r->first_sched_ns = r->first_token_ns = r->last_token_ns = r->finish_ns = -1;
	}
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct instance *in = &e->inst[i];

		in->idx = i;
		in->st = &e->stats[i];
		if (kvpool_init(&in->pool, e->kv_blocks, cfg->block_size)) {
			ss_error_set(err, rc, NULL, 0, "out of memory for %d KV blocks", e->kv_blocks);
			goto fail;
		}
		event_init(&in->ev_step, EV_STEP_DONE, EV_STEP_DONE, i);
		event_init(&in->ev_sched, EV_SCHEDULE, EV_SCHEDULE, i);
		in->view.id = (int32_t)i;
		in->view.block_size = cfg->block_size;
		in->view.total_blocks = e->kv_blocks;
		in->view.max_model_len = e->max_model_len;
		in->st->total_blocks = e->kv_blocks;
		ss_hist_init(&in->st->batch_seqs);
		ss_hist_init(&in->st->batch_tokens);
		refresh_view(in);
		e->views[i] = &in->view;
	}
	rc = make_policies(e, err);
	if (rc)
		goto fail;
	rc = cost_model_new(&e->cm, cfg->cost_model, &cc, err);
	if (rc)
		goto fail;
	if (cfg->executor) {
		/* the caller's executor (live): its state is the caller's */
		e->xops = cfg->executor;
		e->xpriv = cfg->exec_priv;
		e->xpriv_owned = false;
	} else {
		e->xops = &executor_model_ops;
		e->xpriv = calloc(1, e->xops->priv_size);
		e->xpriv_owned = true;
		if (!e->xpriv) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto fail;
		}
		rc = e->xops->init(e->xpriv, e->cm, err);
		if (rc)
			goto fail;
	}
	*out = e;
	return 0;
fail:
	engine_free(e);
	return rc;
}

void engine_free(struct engine *e)
{
	if (!e)
		return;
	if (e->inst) {
		for (uint32_t i = 0; i < e->n_inst; i++) {
			struct instance *in = &e->inst[i];

			kvpool_release(&in->pool);
			free(in->running);
			free(in->wait);
			free(in->batch_priv);
			free(in->plan.items);
			free(in->plan.preempt);
			free(in->fl_req);
			free(in->fl_tokens);
			free(in->fl_items);
		}
	}
	for (uint64_t i = 0; e->req && i < e->n_req; i++)
		free(e->req[i].blocks);
	if (e->xpriv_owned) {
		if (e->xops && e->xops->release && e->xpriv)
			e->xops->release(e->xpriv);
		free(e->xpriv);
	}
	cost_model_free(e->cm);
	free(e->router_priv);
	if (e->policy_rng)
		gsl_rng_free(e->policy_rng);
	evq_release(&e->q);
	free(e->views);
	free(e->stats);
	free(e->inst);
	free(e->req);
	free(e->samples);
	free(e);
}

void engine_set_progress(struct engine *e, engine_progress_fn fn, void *ctx)
{
	e->progress = fn;
	e->progress_ctx = ctx;
}

int engine_run(struct engine *e, struct ss_error *err)
{
	struct event *ev;
	uint64_t n_events = 0;
	int rc = arm_arrival(e);

	if (!rc && e->cfg.sample_interval_ns > 0 && e->n_req > 0)
		rc = evq_push(&e->q, &e->ev_sample, 0);
	if (rc)
		return ss_error_set(err, rc, NULL, 0, "out of memory in the event queue");
	while ((ev = evq_pop(&e->q))) {
		if (e->cfg.clock) {
			/* Live: wait for the event's time; an event that came
			 * due while a step ran is handled now, late, in the
			 * same order as in simulation.  Time never goes back. */
			const struct engine_clock *c = e->cfg.clock;
			int64_t wall = c->now(c->ctx);

			if (wall < ev->time_ns) {
				c->sleep_until(c->ctx, ev->time_ns);
				wall = c->now(c->ctx);
			}
			if (wall > e->now)
				e->now = wall;
		} else {
			assert(ev->time_ns >= e->now);
			e->now = ev->time_ns;
		}
		switch (ev->kind) {
		case EV_STEP_DONE:
			rc = on_step_done(e, &e->inst[ev->target]);
			break;
		case EV_ARRIVAL:
			rc = on_arrival(e, err);
			break;
		case EV_SCHEDULE:
			rc = on_schedule(e, &e->inst[ev->target], err);
			break;
		case EV_SAMPLE:
			rc = on_sample(e);
			break;
		default:
			assert(!"unknown event kind");
		}
		if (rc)
			return err && err->code ? rc : ss_error_set(err, rc, NULL, 0, "out of memory");
		if (e->progress && (++n_events & 0xffff) == 0)
			e->progress(e->progress_ctx, e->n_done, e->n_req);
	}
	for (uint32_t i = 0; i < e->n_inst; i++)
		kv_mark(e, &e->inst[i]);
	if (e->progress)
		e->progress(e->progress_ctx, e->n_done, e->n_req);
	if (e->n_done != e->n_req)
		return ss_error_set(err, -EPROTO, NULL, 0,
				    "internal error: %llu of %llu requests neither finished nor rejected",
				    (unsigned long long)(e->n_req - e->n_done),
				    (unsigned long long)e->n_req);
	return 0;
}

int32_t engine_kv_free_blocks(const struct engine *e, uint32_t i)
{
	assert(i < e->n_inst);
	return e->inst[i].pool.n_free;
}

void engine_results(const struct engine *e, struct engine_results *out)
{
	memset(out, 0, sizeof(*out));
	out->req = e->req;
	out->n_req = e->n_req;
	out->n_instances = e->n_inst;
	out->itl = &e->itl;
	out->samples = e->samples;
	out->n_samples = e->n_samples;
	out->end_ns = e->now;
	out->kv_blocks_per_instance = e->kv_blocks;
	out->kv_bytes_per_block = e->kv_bytes_per_block;
	out->idle_power_w = e->cfg.gpu->idle_w * e->cfg.tp;
	out->cost_model_name = e->cm->ops->name;
	for (int op = 0; op < COST_OP_COUNT; op++)
		out->op_backend[op] = cost_model_op_backend(e->cm, (enum cost_op)op);
	out->tp = e->cfg.tp;
	out->inst = e->stats;
}
