/* servesim — the discrete-event engine: the loop and its events (see
 * engine.h; the units and their shared state: engine-int.h).
 *
 * Owns: the event loop (engine_run), which pops events in (time, kind,
 * seq) order and dispatches each to its handler; the arrival event (one
 * request at a time, in workload order: it is rejected, or routed over the
 * first pool and appended to an instance's waiting queue); a session's
 * later steps, sent by the session when its previous step is over ("sessions"
 * below); in a closed loop
 * (engine_config.concurrency) the clients' send events, which arrive the
 * same way, each queued when a request leaves the run; the sampling
 * event; the results handed to analysis/ (engine_results); and the small
 * helpers the other units share (eng_refresh_view, eng_reject,
 * eng_push_schedule, eng_time_error).
 *
 * Invariants: time never goes back (simulation checks it; a live clock
 * is clamped); every event time is an int64 ns sum checked where it is
 * computed (ss_time_add), so a duration past the range is an error the run
 * returns; at most one arrival event is queued, for the next request (a
 * closed loop: at most one per client, and never more than the requests
 * left to send; with sessions, besides, at most one per session, for its
 * next step);
 * every request ends finished or rejected, which engine_run checks (unless
 * engine_config.stop ended the run early).
 * Cost: O(log E) per event for the queue of E pending events, plus the
 * handler; routing is the router's cost (O(instances) for most); sampling
 * is O(instances) per sample.
 */
#include "engine-int.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>

#include "rng.h"
#include "step-int.h"
#include "sstime.h"

/* ---- the policies' view ------------------------------------------------- */

void eng_refresh_view(struct instance *in)
{
	in->view.free_blocks = kvm_free_blocks(in->kv);
	in->view.busy = in->busy;
	in->view.running = (const struct req_view *const *)in->running;
	in->view.n_running = in->n_running;
	in->view.n_inflight = 0;
	/* NULL before the first request arrives (waitq_items) */
	in->view.waiting = (const struct req_view *const *)waitq_items(&in->wq);
	in->view.n_waiting = waitq_len(&in->wq);
}

/* ---- request lifecycle -------------------------------------------------- */

void eng_reject(struct engine *e, struct request *r, const char *reason)
{
	r->v.state = REQ_REJECTED;
	r->reject_reason = reason;
	e->n_done++;
	eng_retire(e, r);
}

struct request *eng_req_at(struct engine *e, uint32_t slot)
{
	assert(slot / ENG_SLAB < e->n_slabs);
	return &e->slabs[slot / ENG_SLAB][slot % ENG_SLAB];
}

/* A struct for workload request i, from the free list or a new slab;
 * NULL when out of memory. */
static struct request *req_get(struct engine *e, uint64_t i)
{
	const struct req_record *q = &e->rec[i];
	struct request *r = e->free_req;
	uint32_t slot;

	if (!r) {
		struct request *slab;

		if (SS_GROW(&e->slabs, &e->cap_slabs, e->n_slabs + 1))
			return NULL;
		slab = calloc(ENG_SLAB, sizeof(*slab));
		if (!slab)
			return NULL;
		for (uint32_t k = ENG_SLAB; k-- > 0;) {
			slab[k].slot = e->n_slabs * ENG_SLAB + k;
			slab[k].next_free = e->free_req;
			e->free_req = &slab[k];
		}
		e->slabs[e->n_slabs++] = slab;
		r = e->free_req;
	}
	e->free_req = r->next_free;
	slot = r->slot;
	*r = (struct request){
		.v = {
			.id = q->id, .tenant = q->tenant, .priority = q->priority,
			.arrival_ns = q->arrival_ns, .prompt_tokens = q->prompt_tokens,
			.predicted_output = -1, .state = REQ_PENDING,
		},
		.output_tokens = q->output_tokens, .instance = -1, .tenant_id = q->tenant_id,
		.prefill_instance = -1, .kv_xfer_ns = -1, .first_sched_ns = -1,
		.first_token_ns = -1, .last_token_ns = -1, .finish_ns = -1,
		.adapter = q->adapter, .flags = RF_INUSE, .slot = slot,
	};
	event_init(&r->ev_xfer, EV_XFER_DONE, EV_XFER_DONE, slot);
	if (e->pred_on) {
		double v = e->pred_sigma > 0 ?
			   r->output_tokens * exp(gsl_ran_gaussian(e->pred_rng, e->pred_sigma)) :
			   r->output_tokens;

		r->v.predicted_output = v < 1 ? 1 : v > 1e9 ? 1000000000 : (int32_t)lround(v);
	}
	return r;
}

/* Serving-stack latency of request id, ns: into the engine (dir 0: the
 * stack's way in for a prompt of workload request prompt_of's length) or
 * back to the client (dir 1: its way out per token; prompt_of unused).
 * A log-normal draw with the stack's mean and coefficient of variation,
 * from a hash of the seed, the id and the direction (no state per
 * request, the same draw in any event order), capped at 100 x the
 * mean. */
static int64_t api_ns(const struct engine *e, uint32_t id, unsigned dir, uint64_t prompt_of)
{
	const struct stack_profile *p = e->cfg.stack;
	double mean, d;
	int64_t ns = 0;

	if (dir)
		mean = p->out_ms;
	else
		mean = stack_profile_in_ms(p, prompt_of < e->n_req ?
					   (double)e->rec[prompt_of].prompt_tokens : 0.0);
	d = mean;
	if (!(mean > 0.0))
		return 0;
	if (p->cv > 0.0) {
		uint64_t h = ss_splitmix64(e->cfg.seed ^ (0x9e3779b97f4a7c15ull * (SS_RNG_API + 1)) ^
					   ((uint64_t)id << 1 | dir));
		double u = ((double)(h >> 11) + 0.5) * 0x1p-53;   /* (0, 1) */
		double s2 = log1p(p->cv * p->cv);

		d = mean * exp(sqrt(s2) * gsl_cdf_ugaussian_Pinv(u) - 0.5 * s2);
		if (d > 100.0 * mean)
			d = 100.0 * mean;
	}
	/* mean <= 3e6 ms + 1e3 ms per prompt token (the catalog's ranges):
	 * fits for any prompt the engine takes */
	ss_time_from_units(d, SS_NS_PER_MS, &ns);
	return ns;
}

/* Write what analysis reads of r into its record.  Token times are the
 * client's: the engine's plus the serving stack's way back. */
static void record(struct engine *e, const struct request *r)
{
	struct req_record *q = &e->rec[r->v.id];
	int64_t out = e->api_on ? api_ns(e, r->v.id, 1, 0) : 0;

	q->first_sched_ns = r->first_sched_ns;
	q->first_token_ns = r->first_token_ns >= 0 ? ss_time_add_sat(r->first_token_ns, out) : -1;
	q->finish_ns = r->finish_ns >= 0 ? ss_time_add_sat(r->finish_ns, out) : -1;
	q->max_gap_ns = r->max_gap_ns;
	q->kv_xfer_ns = r->kv_xfer_ns;
	q->energy_j = r->energy_j;
	q->reject_reason = r->reject_reason;
	q->instance = r->instance;
	q->prefill_instance = r->prefill_instance;
	q->generated_tokens = r->v.generated_tokens;
	q->preemptions = r->v.preemptions;
	q->cached_tokens = r->v.cached_tokens;
	q->spec_verifies = r->spec_verifies;
	q->spec_accepted = r->spec_accepted;
	q->state = r->v.state;
}

void eng_retire(struct engine *e, struct request *r)
{
	assert(r->flags & RF_INUSE);
	if (e->closed) {
		assert(e->n_freed < e->n_clients);
		e->freed[e->n_freed++] = r->v.id;
	}
	r->next_free = e->retired;
	e->retired = r;
}

/* ---- sessions (traces/workload.h struct wl_call) -------------------------
 *
 * A session's first step arrives as any request does (the cursor over the
 * workload skips the later steps); when the last call of a step has left
 * the run, the next step is sent think_ns after the latest completion of
 * the step, as the client saw it (with a serving stack's way back), by the
 * session's own event.  A step's calls all arrive then: that time is their
 * recorded arrival, so TTFT runs from when a call was sent.  A call that is
 * rejected (refused at arrival, or expired waiting) ends its session once
 * its step is over: the client stops, and the calls it would have sent are
 * recorded rejected ("session abandoned ..."), never sent.  Memory: one
 * struct eng_session per session; nothing per event. */

#define SESSION_ABANDONED "session abandoned: an earlier call was rejected"

int eng_sessions_setup(struct engine *e, struct ss_error *err)
{
	const struct workload *wl = e->wl;

	if (!wl->sess)
		return 0;
	if (e->closed)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "a session workload cannot run closed loop (--concurrency): "
				    "its sessions send their own calls");
	e->sess = calloc(wl->n_sessions ? wl->n_sessions : 1, sizeof(*e->sess));
	if (!e->sess)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory for %zu sessions",
				    wl->n_sessions);
	for (size_t i = 0; i < wl->n; i++) {
		const struct wl_call *c = &wl->sess[i];

		if (c->session >= wl->n_sessions)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "workload request %zu: session %u of %zu", i,
					    c->session, wl->n_sessions);
		if (c->step == 0 && c->step_first == i) {
			struct eng_session *s = &e->sess[c->session];

			event_init(&s->ev, EV_ARRIVAL, EV_ARRIVAL, c->session);
			s->step_first = (uint32_t)i;
			s->pending = c->step_n;
		}
	}
	return 0;
}

/* Call id of a session has left the run (its record is written). */
static int session_left(struct engine *e, uint32_t id)
{
	const struct wl_call *c = &e->wl->sess[id];
	const struct req_record *q = &e->rec[id];
	struct eng_session *s = &e->sess[c->session];
	uint64_t next = (uint64_t)c->step_first + c->step_n;
	int64_t t;

	if (q->state != REQ_FINISHED)
		s->failed = true;
	else if (q->finish_ns > s->done_ns)
		s->done_ns = q->finish_ns;
	assert(s->pending > 0);
	if (--s->pending > 0 || next >= e->n_req || e->wl->sess[next].session != c->session)
		return 0;
	if (s->failed) {
		/* the client stops: the rest of the session is never sent */
		for (uint64_t k = next; k < e->n_req && e->wl->sess[k].session == c->session; k++) {
			e->rec[k].state = REQ_REJECTED;
			e->rec[k].reject_reason = SESSION_ABANDONED;
			e->rec[k].arrival_ns = e->now;
			e->n_done++;
		}
		return 0;
	}
	s->step_first = (uint32_t)next;
	s->pending = e->wl->sess[next].step_n;
	if (!ss_time_add(s->done_ns, e->wl->sess[next].think_ns, &s->send_ns) ||
	    !ss_time_add(s->send_ns, e->api_on ? api_ns(e, (uint32_t)next, 0, next) : 0, &t))
		return -ERANGE;
	s->done_ns = 0;
	return evq_push(&e->q, &s->ev, t < e->now ? e->now : t);
}

/* Record and free the requests retired during the last event; with
 * sessions, send the steps that are due.  0, -ENOMEM or -ERANGE (a send
 * time past the int64 ns range). */
static int retire_all(struct engine *e)
{
	int rc = 0;

	while (e->retired) {
		struct request *r = e->retired;

		e->retired = r->next_free;
		record(e, r);
		if (e->sess && !rc)
			rc = session_left(e, r->v.id);
		kvm_req_release(&r->kv);
		r->flags = 0;
		r->next_free = e->free_req;
		e->free_req = r;
	}
	return rc;
}

int eng_push_schedule(struct engine *e, struct instance *in)
{
	int64_t at;

	/* when its shape may take a step (a pipeline: once its first stage
	 * is free and fewer than pp batches are in flight; step-int.h) */
	if (event_queued(&in->ev_sched) || !in->shape->next(e, in, &at))
		return 0;
	return evq_push(&e->q, &in->ev_sched, at);
}

int eng_time_error(struct ss_error *err, double end_s, const char *fmt, ...)
{
	char what[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ss_time_range_error(err, end_s, what);
}

/* The next request reaches the engine at its arrival, or with a serving
 * stack api_in later but not before the one ahead of it (a FIFO front
 * end). */
static int arm_arrival(struct engine *e)
{
	int64_t t;

	if (e->closed)
		return 0;   /* the next send follows a retirement (send_next) */
	if (e->sess)   /* a session's later steps are sent by the session */
		while (e->next_arrival < e->n_req && e->wl->sess[e->next_arrival].step > 0)
			e->next_arrival++;
	if (e->next_arrival >= e->n_req)
		return 0;
	t = e->rec[e->next_arrival].arrival_ns;
	if (e->api_on) {
		t = ss_time_add_sat(t, api_ns(e, (uint32_t)e->next_arrival, 0, e->next_arrival));
		if (t < e->api_last_ns)
			t = e->api_last_ns;
		e->api_last_ns = t;
	}
	return evq_push(&e->q, &e->ev_arrival, t);
}

/* Closed loop: queue a free client's send at `at`, if a request is left
 * for it (those sent plus those about to be cover the workload, or not). */
static int client_send(struct engine *e, int64_t at)
{
	uint32_t k;

	if (e->next_arrival + (e->n_clients - e->n_send_free) >= e->n_req)
		return 0;
	if (e->cfg.send_until_ns > 0 && at >= e->cfg.send_until_ns)
		return 0;   /* the client stops */
	assert(e->n_send_free > 0);
	k = e->send_free[--e->n_send_free];
	e->send_at[k] = at;
	/* with a serving stack, the engine sees the request api_in later
	 * (no FIFO among clients: each has its own connection); which
	 * request the send carries is known when it fires, so the prompt
	 * that prices tokenisation is the workload's n_sends-th (the
	 * workload's lengths, in order) */
	if (e->api_on)
		at = ss_time_add_sat(at, api_ns(e, (uint32_t)(e->n_sends & UINT32_MAX), 0, e->n_sends));
	e->n_sends++;
	return evq_push(&e->q, &e->ev_send[k], at);
}

/* Closed loop: when the engine's side of request id ended for its client,
 * ns: now, or later when its last token left a front end after now
 * (frontend.h; the record holds that time plus the way back). */
static int64_t client_got(const struct engine *e, uint32_t id)
{
	const struct req_record *q = &e->rec[id];
	int64_t got;

	if (!frontend_profile_on(e->cfg.engine) || q->state != REQ_FINISHED)
		return e->now;
	got = q->finish_ns - (e->api_on ? api_ns(e, id, 1, 0) : 0);
	return got > e->now ? got : e->now;
}

/* Closed loop, after each event: every client freed during it thinks and
 * sends again, in the order their requests left (freed[]; the ids are
 * there for a delay that depends on the request, such as a serving
 * stack's way back to the client before it can think). */
static int send_next(struct engine *e, struct ss_error *err)
{
	for (uint32_t k = 0; k < e->n_freed; k++) {
		int64_t think, at;
		int rc;

		if (e->next_arrival + (e->n_clients - e->n_send_free) >= e->n_req)
			continue;   /* nothing left to send: no draw */
		/* the client sees its last token api_out after the engine
		 * (after its front end, frontend.h, where one is set) */
		if (!think_time_draw(&e->think, e->think_rng, &think) ||
		    !ss_time_add(client_got(e, e->freed[k]), think, &at) ||
		    !ss_time_add(at, e->api_on ? api_ns(e, e->freed[k], 1, 0) : 0, &at))
			return eng_time_error(err, (double)e->now / 1e9 + e->think.mean_s,
					      "a client's think time");
		rc = client_send(e, at);
		if (rc)
			return ss_error_set(err, rc, NULL, 0, "out of memory in the event queue");
	}
	e->n_freed = 0;
	return 0;
}

/* Workload request id arrives now: rejected, or routed and queued. */
static int admit(struct engine *e, uint64_t id, struct ss_error *err)
{
	const char *reason = NULL;
	struct request *r;
	struct instance *in;
	uint32_t pick;
	int rc;

	r = req_get(e, id);
	if (!r)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory for a request");
	r->v.state = REQ_QUEUED;
	if ((int64_t)r->v.prompt_tokens + r->output_tokens > e->max_model_len) {
		eng_reject(e, r, "prompt + output longer than the model's context length");
		return 0;
	}
	pick = e->pools[0].rops->route(e->pools[0].router_priv, &r->v, e->views, e->pools[0].n,
				       e->now, &e->host);
	if (pick >= e->pools[0].n)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "router %s returned instance %u of %u",
				    e->pools[0].rops->name, pick, e->pools[0].n);
	in = &e->inst[pick];
	r->instance = (int32_t)pick;
	/* The KV of the last output token is never written, hence -1.  A
	 * prefill instance holds the prompt's KV only. */
	if (kvm_blocks_for(in->kv, e->n_pools > 1 ? (int64_t)r->v.prompt_tokens :
			   (int64_t)r->v.prompt_tokens + r->output_tokens - 1) >
	    kvm_total_blocks(in->kv)) {
		eng_reject(e, r, "needs more KV blocks than the instance has");
		return 0;
	}
	if (e->n_pools > 1 && r->output_tokens > 1 &&
	    (int64_t)kvm_blocks_for(in->kv, (int64_t)r->v.prompt_tokens + r->output_tokens - 1) >
	    e->pools[1].kv_blocks) {
		eng_reject(e, r, "needs more KV blocks than a decode instance has");
		return 0;
	}
	if (!e->bops->admissible(in->batch_priv, &r->v, &in->view, &reason)) {
		eng_reject(e, r, reason ? reason : "not admissible under the batch policy");
		return 0;
	}
	if (!e->aops->admit(e->adm_priv, &r->v, &in->view, e->now, &e->host, &reason)) {
		eng_reject(e, r, reason ? reason : "not admitted");
		return 0;
	}
	e->oops->enqueued(in->order_priv, &r->v, &in->view);
	eng_tenant_rekey(e, in, r);
	rc = eng_wait_push_back(e, in, &r->v);
	if (rc)
		return ss_error_set(err, rc, NULL, 0, "out of memory queueing a request");
	in->view.outstanding_tokens += r->v.prompt_tokens;
	in->view.outstanding_requests++;
	eng_refresh_view(in);
	rc = eng_push_schedule(e, in);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

/* A session's event: its next step's calls arrive. */
static int on_release(struct engine *e, uint32_t sid, struct ss_error *err)
{
	struct eng_session *s = &e->sess[sid];
	uint32_t n = e->wl->sess[s->step_first].step_n;

	for (uint32_t k = 0; k < n; k++) {
		int rc;

		e->rec[s->step_first + k].arrival_ns = s->send_ns;
		rc = admit(e, s->step_first + k, err);
		if (rc)
			return rc;
	}
	return 0;
}

static int on_arrival(struct engine *e, const struct event *ev, struct ss_error *err)
{
	int rc;

	if (e->sess && ev != &e->ev_arrival)
		return on_release(e, ev->target, err);
	if (e->closed) {
		/* a client sends the workload's next request at the event's
		 * time: that is its arrival (live, a send handled late after a
		 * step keeps the time it was due, as an open loop's arrival
		 * keeps its trace time); its send event is free again */
		assert(e->next_arrival < e->n_req && e->n_send_free < e->n_clients);
		e->send_free[e->n_send_free++] = ev->target;
		e->rec[e->next_arrival].arrival_ns = e->send_at[ev->target];
		e->service_window_ns = ev->time_ns;
	}
	rc = admit(e, e->next_arrival++, err);
	if (rc)
		return rc;
	rc = arm_arrival(e);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

static int on_sample(struct engine *e, struct ss_error *err)
{
	struct ts_sample *slot;

	if (!e->ts.max_times)
		tseries_init(&e->ts, e->n_inst, e->cfg.sample_interval_ns, 0);
	slot = tseries_append(&e->ts);
	if (!slot)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct instance *in = &e->inst[i];

		slot[i] = (struct ts_sample){
			.t_ns = e->now,
			.instance = (int32_t)i,
			.queued = (int32_t)waitq_len(&in->wq),
			.running = (int32_t)in->n_running,
			.kv_used_blocks = kvm_used_blocks(in->kv),
			.power_w = in->shape->power_w(in),
		};
	}
	if (eng_active(e)) {
		int64_t at;

		if (!ss_time_add(e->now, e->ts.interval_ns, &at))
			return eng_time_error(err, ((double)e->now + (double)e->ts.interval_ns) / 1e9,
					      "the next time-series sample");
		return evq_push(&e->q, &e->ev_sample, at);
	}
	return 0;
}

void engine_set_progress(struct engine *e, engine_progress_fn fn, void *ctx)
{
	e->progress = fn;
	e->progress_ctx = ctx;
}

static int run_loop(struct engine *e, struct ss_error *err)
{
	const volatile sig_atomic_t *stop = e->cfg.stop;
	struct event *ev;
	uint64_t n_events = 0;
	const uint64_t progress_mask = e->cfg.clock ? 0 : 0xffff;
	int rc = arm_arrival(e);

	/* closed loop: every client sends its first request at 0, or client
	 * k of N at k x ramp / N (a fraction of ramp, so it fits) */
	for (uint32_t k = 0; !rc && e->closed && k < e->n_clients; k++)
		rc = client_send(e, (int64_t)((double)e->cfg.ramp_ns * k / e->cfg.concurrency));
	if (!rc && e->cfg.sample_interval_ns > 0 && e->n_req > 0)
		rc = evq_push(&e->q, &e->ev_sample, 0);
	if (rc)
		return ss_error_set(err, rc, NULL, 0, "out of memory in the event queue");
	while ((ev = evq_pop(&e->q))) {
		/* one load per event; the popped event is dropped, with
		 * everything else still queued (the engine runs no more) */
		if (stop && *stop)
			break;
		if (e->cfg.clock) {
			/* Live: wait for the event's time; an event that came
			 * due while a step ran is handled now, late, in the
			 * same order as in simulation.  Time never goes back. */
			const struct engine_clock *c = e->cfg.clock;
			int64_t wall = c->now(c->ctx);

			if (wall < ev->time_ns) {
				/* a clock's wait may end early to stop the run */
				c->sleep_until(c->ctx, ev->time_ns);
				if (stop && *stop)
					break;
				wall = c->now(c->ctx);
			}
			if (wall > e->now)
				e->now = wall;
		} else {
			/* Every event time is checked where it is computed;
			 * a trace's arrivals are sorted by its reader. */
			if (ev->time_ns < e->now)
				return ss_error_set(err, -EPROTO, NULL, 0,
						    "internal error: an event at %" PRId64
						    " ns is before the clock (%" PRId64 " ns)",
						    ev->time_ns, e->now);
			e->now = ev->time_ns;
		}
		switch (ev->kind) {
		case EV_STEP_DONE:
			rc = eng_on_step_done(e, &e->inst[ev->target], err);
			break;
		case EV_XFER_DONE:
			rc = eng_on_xfer_done(e, eng_req_at(e, ev->target), err);
			break;
		case EV_ARRIVAL:
			rc = on_arrival(e, ev, err);
			break;
		case EV_SCHEDULE:
			rc = eng_on_schedule(e, &e->inst[ev->target], err);
			break;
		case EV_SAMPLE:
			rc = on_sample(e, err);
			break;
		default:
			assert(!"unknown event kind");
		}
		if (rc)
			return err && err->code ? rc : ss_error_set(err, rc, NULL, 0, "out of memory");
		if ((rc = retire_all(e)))
			return rc == -ERANGE ?
			       eng_time_error(err, (double)e->now / 1e9, "a session's next call") :
			       ss_error_set(err, rc, NULL, 0, "out of memory in the event queue");
		if (e->closed && (rc = send_next(e, err)))
			return rc;
		/* simulated: every 65,536 events, so that the callback's
		 * clock read stays off the per-event path; live: every event
		 * (each reads the wall clock anyway, and a live run has few) */
		if (e->progress && (++n_events & progress_mask) == 0)
			e->progress(e->progress_ctx, e->n_done, e->n_req);
	}
	for (uint32_t i = 0; i < e->n_inst; i++)
		kvm_inst_flush(e->inst[i].kv);
	if (ev)   /* stopped by cfg.stop */
		return ss_error_set(err, -EINTR, NULL, 0, "interrupted after %llu of %llu requests",
				    (unsigned long long)e->n_done,
				    (unsigned long long)(e->closed ? e->next_arrival : e->n_req));
	if (e->progress)   /* a closed loop stopped early ends at what it sent */
		e->progress(e->progress_ctx, e->n_done, e->closed ? e->next_arrival : e->n_req);
	if (e->n_done != (e->closed ? e->next_arrival : e->n_req))
		return ss_error_set(err, -EPROTO, NULL, 0,
				    "internal error: %llu of %llu requests neither finished nor rejected",
				    (unsigned long long)((e->closed ? e->next_arrival : e->n_req) - e->n_done),
				    (unsigned long long)e->n_req);
	return 0;
}

int engine_run(struct engine *e, struct ss_error *err)
{
	int rc = run_loop(e, err);

	/* Requests still in the run (a failed live run keeps its results,
	 * and so does an interrupted one) are recorded as they stand. */
	(void)retire_all(e);
	for (uint32_t k = 0; k < e->n_slabs; k++)
		for (uint32_t j = 0; j < ENG_SLAB; j++)
			if (e->slabs[k][j].flags & RF_INUSE)
				record(e, &e->slabs[k][j]);
	return rc;
}

int32_t engine_kv_free_blocks(const struct engine *e, uint32_t i)
{
	assert(i < e->n_inst);
	return kvm_free_blocks(e->inst[i].kv);
}

struct kvm *engine_kvm(struct engine *e)
{
	return e->kv;
}

void engine_results(const struct engine *e, struct engine_results *out)
{
	memset(out, 0, sizeof(*out));
	out->req = e->rec;
	/* a closed loop stopped by send_until_ns sent the first next_arrival */
	out->n_req = e->closed ? e->next_arrival : e->n_req;
	out->n_instances = e->n_inst;
	out->itl = &e->itl;
	out->samples = e->ts.s;
	out->n_samples = e->ts.n;
	out->sample_interval_ns = e->ts.interval_ns;
	out->sample_requested_ns = e->cfg.sample_interval_ns;
	out->end_ns = e->now;
	out->engine_name = e->cfg.engine ? e->cfg.engine->name : "none";
	out->kv_blocks_per_instance = e->pools[0].kv_blocks;
	out->attention_dp = e->pools[0].dp > 1 ? e->pools[0].dp : 1;
	for (uint32_t p = 0; p < e->n_pools; p++)
		out->n_deployed += e->pools[p].dp > 1 ? e->pools[p].n / (uint32_t)e->pools[p].dp
						     : e->pools[p].n;
	out->kv_bytes_per_block = e->pools[0].kv_bytes_per_block;
	{
		const struct pool *pl = &e->pools[0];
		struct exec_identity id = {
			.cost_model_name = pl->cm->ops->name,
			.idle_power_w = pl->gpu->idle_w * pl->tp * pl->pp,
		};

		for (int op = 0; op < COST_OP_COUNT; op++)
			id.op_backend[op] = cost_model_op_backend(pl->cm, (enum cost_op)op);
		/* the adapters' GEMMs: the LoRA component's, from the cost
		 * model's measured adapter kernels or the roofline (lora.c) */
		id.op_backend[COST_OP_LORA] = eng_lora_backend(pl);
		if (pl->xops->version >= 2 && pl->xops->identity)
			pl->xops->identity(pl->xpriv, e->now - e->stats[0].busy_ns, &id);
		out->executor_name = pl->xops->name;
		out->idle_power_w = id.idle_power_w;
		out->cost_model_name = id.cost_model_name;
		memcpy(out->op_backend, id.op_backend, sizeof(out->op_backend));
		/* a live executor's identity names no cost model's reference */
		if (id.cost_model_name == pl->cm->ops->name)
			out->cost_reference = cost_model_reference(pl->cm);
	}
	out->tp = e->pools[0].tp;
	out->disaggregated = e->n_pools > 1;
	out->inst = e->stats;
	out->prefix_cache = kvm_caching(e->kv);
	out->spec = e->cfg.spec;
	out->lora = e->lora ? lora_config_of(e->lora) : NULL;
	out->kv_remote = kvm_remote_stats(e->kv);
	out->swap = kvm_swapping(e->kv);
	out->n_tenants = e->n_tenants;
	out->tenant_ids = e->tenant_ids;
	out->tenant_service = e->tenant_service;
	out->service_window_ns = e->service_window_ns;
	out->predictor = e->predictor;
}
