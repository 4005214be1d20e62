/* servesim — step shapes: how an instance runs the steps its scheduler
 * forms (not installed; the scheduler's units only).
 *
 * The scheduler (engine-sched.c) forms a step from the batch policy's plan
 * or the steady-decode path, in instance.fl_*.  What happens to it then
 * depends on the instance's shape, chosen once at setup (step_shape_init)
 * from its pool and the engine profile, as the kernel's sched_class is
 * chosen per task:
 *   step_plain     one step at a time: priced, accounted, completed;
 *   step_burst     multi-step scheduling (engine profile scheduler_steps
 *                  k > 1): a decode step runs as a burst of up to k steps
 *                  (step-burst.c);
 *   step_pipeline  pipeline parallelism (pool.pp > 1): up to pp batches in
 *                  flight through the stages (step-pp.c);
 *   step_dp_group  data-parallel attention (pool.dp > 1): the instance is
 *                  one attention rank of a group that steps in lock step
 *                  (step-dp.c).
 * Setup refuses the combinations (engine-setup.c make_pools: pipelines
 * with bursts or DP attention, bursts with DP attention), so one shape is all an instance needs.  Each
 * shape owns its state (priv_size bytes, allocated zeroed by
 * step_shape_init and reached as instance.shape_priv); every method is set
 * (shapes that need no special case point at the step_default_* ones), so
 * the scheduler calls them without checks.
 */
#ifndef SS_STEP_INT_H
#define SS_STEP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine-int.h"

struct engine;
struct instance;
struct request;
struct exec_step;
struct exec_result;
struct ss_error;

/* request.flags bit (engine-int.h has the others): in a batch in an
 * instance's pipeline (step_pipeline), which the batch policy must not plan
 * again until it leaves */
#define RF_INFLIGHT 256u

struct step_shape {
	int version;              /* 1 */
	const char *name;
	size_t priv_size;         /* bytes of state per instance (0: none) */
	/* The batch policy's plans are steady for the steady-decode path
	 * (instance.steady.max may be set); false where the policy sees only
	 * part of the running set (a pipeline). */
	bool steady;
	/* Set up in's state priv (priv_size bytes, zeroed): 0 or -ENOMEM. */
	int (*init)(struct engine *e, struct instance *in, void *priv);
	/* Free what init and the run allocated in priv (not priv itself). */
	void (*release)(struct instance *in, void *priv);
	/* Whether in may take a new step, and from when (*at_ns >= now): a
	 * plain instance when it is idle; a pipeline when fewer than pp
	 * batches are in flight, once its first stage is free. */
	bool (*next)(const struct engine *e, const struct instance *in, int64_t *at_ns);
	/* EV_SCHEDULE of in (when next allowed it): form and start steps. */
	int (*schedule)(struct engine *e, struct instance *in, struct ss_error *err);
	/* Before the batch policy plans: adjust in.view (a pipeline hides the
	 * requests in flight); 0 or -ENOMEM. */
	int (*view)(struct instance *in);
	/* The step in in.fl_*[0 .. n_fl), summed up in xs and prefill_tokens
	 * (its prefill tokens), starts now. */
	int (*launch)(struct engine *e, struct instance *in, struct exec_step *xs,
		      int64_t prefill_tokens, struct ss_error *err);
	/* EV_STEP_DONE: the step that completed goes to in.fl_* and its items
	 * advance and emit their tokens (eng_step_emit). */
	int (*emit)(struct engine *e, struct instance *in, struct ss_error *err);
	/* After emission: set in.busy (a pipeline stays busy while batches
	 * are in flight) and queue its next completion, if any; 0 or an
	 * error. */
	int (*done)(struct engine *e, struct instance *in, struct ss_error *err);
	/* The instance's power now, all its GPUs, W (the time series). */
	double (*power_w)(const struct instance *in);
};

extern const struct step_shape step_plain, step_burst, step_pipeline, step_dp_group;

/* Choose in's shape (pool, engine profile), allocate and set up its state:
 * 0 or -ENOMEM (err set). */
int step_shape_init(struct engine *e, struct instance *in, struct ss_error *err);
/* Free in's shape state; accepts an instance never set up. */
void step_shape_release(struct instance *in);

/* ---- the shared defaults (step.c) ----------------------------------------- */

int step_default_init(struct engine *e, struct instance *in, void *priv);
void step_default_release(struct instance *in, void *priv);
bool step_default_next(const struct engine *e, const struct instance *in, int64_t *at_ns);
int step_default_view(struct instance *in);
/* Price the step, account it, queue its completion (a plain step). */
int step_default_launch(struct engine *e, struct instance *in, struct exec_step *xs,
			int64_t prefill_tokens, struct ss_error *err);
int step_default_done(struct engine *e, struct instance *in, struct ss_error *err);
/* in's step completes at end (its start now): busy, the view, the event. */
int eng_step_queue(struct engine *e, struct instance *in, int64_t end, struct ss_error *err);
double step_default_power_w(const struct instance *in);

/* ---- what the scheduler offers the shapes (engine-sched.c) ---------------- */

/* What a unit's schedule formed (eng_unit_plan). */
enum unit_form {
	UNIT_NONE = 0,            /* nothing to run (or in is not ready) */
	UNIT_PLAN = 1,            /* the batch policy's plan, in instance.plan */
	UNIT_STEADY = 2,          /* a steady-decode step */
};

/* Prepare in's queues and decide its next step: a unit_form (>= 0), or a
 * negative errno (err set).  Starts nothing. */
int eng_unit_plan(struct engine *e, struct instance *in, struct ss_error *err);
/* Form the step eng_unit_plan decided (form) in in.fl_* and hand it to
 * in's shape's launch. */
int eng_unit_start(struct engine *e, struct instance *in, enum unit_form form,
		   struct ss_error *err);
/* The step in in.fl_*[0 .. n_fl), summed up in xs (its tokens, emitting
 * and prefilling items) and prefill_tokens, goes to in's shape to start. */
int eng_step_launch(struct engine *e, struct instance *in, struct exec_step *xs,
		    int64_t prefill_tokens, struct ss_error *err);
/* The default schedule: eng_unit_plan, then eng_unit_start. */
int eng_unit_schedule(struct engine *e, struct instance *in, struct ss_error *err);
/* The step in in.fl_*[0 .. n_fl) summed up in xs, priced by the executor
 * into *xr, with the KV transfers it waits for (kvm_price). */
int eng_step_price(struct instance *in, const struct exec_step *xs, struct exec_result *xr,
		   struct ss_error *err);
/* Speculative decoding (engine-spec.c, spec.h), only with a pool's
 * draft_cm / spec set: the drafter's passes after step xs, added to *xr;
 * and r's verify at the step's end (computed_tokens advanced by its
 * tokens, which a token budget may have cut short): the rejected drafts
 * taken back, the tokens it emits returned (1 + accepted); token_j: the
 * step's energy per token, which puts energy on the rejected drafts.
 * Inline: it runs once per sequence and step of a speculative run. */
int eng_spec_draft(struct instance *in, const struct exec_step *xs, struct exec_result *xr,
		   struct ss_error *err);
static inline int32_t eng_spec_verify(struct engine *e, struct instance *in,
				      struct request *r, double token_j);
/* Account a priced step: its energy to its requests and to prefill and
 * decode work, the instance's step statistics. */
void eng_step_account(struct instance *in, const struct exec_step *xs,
		      const struct exec_result *xr, int64_t prefill_tokens);
/* The energy part of eng_step_account alone (an idle batch's). */
void eng_step_energy(struct instance *in, const struct exec_result *xr, int64_t prefill_tokens,
		     int64_t total_tokens);

/* The default emit: each item of in.fl_* advances by its tokens; one
 * that has computed all its known tokens emits one, and finishes or (on a
 * prefill instance) is handed off. */
int eng_step_emit(struct engine *e, struct instance *in, struct ss_error *err);

/* Token gaps for engine.itl, counted in runs of equal gaps. */
struct itl_run {
	int64_t gap;              /* ns; ITL_RUN_NONE before the first */
	uint64_t n;
};
/* A run's start: a gap no token has (gaps are >= 0), so that the first
 * eng_itl_add starts a run and every later one has n >= 1 behind it. */
#define ITL_RUN_NONE INT64_MIN
#define ITL_RUN_INIT { ITL_RUN_NONE, 0 }
/* Inline: it runs for every token.  n >= 1. */
static inline void eng_itl_add(struct engine *e, struct itl_run *run, int64_t gap, uint64_t n)
{
	if (gap != run->gap) {
		if (run->n)
			ss_hist_add_n(&e->itl, run->gap, run->n);
		run->gap = gap;
		run->n = 0;
	}
	run->n += n;
}
/* By value: a caller's run, whose address is never taken, stays in
 * registers through its loop of eng_itl_add. */
void eng_itl_flush(struct engine *e, struct itl_run run);
/* r has emitted its last token: it leaves the running set (at the next
 * compaction) and gives back its blocks. */
void eng_finish(struct engine *e, struct instance *in, struct request *r);

static inline int32_t eng_spec_verify(struct engine *e, struct instance *in,
				      struct request *r, double token_j)
{
	const struct spec_config *c = in->pl->spec;
	struct spec_stats *st = &in->st->spec;
	int32_t drafted = r->v.computed_tokens - req_total_tokens(&r->v);
	int32_t accepted;

	r->v.spec_tokens = 0;
	if (drafted <= 0)
		return 1;
	/* a tree's candidates hold paths of at most k tokens */
	accepted = spec_accept_count(spec_accept_of(c, r->tenant_id), e->cfg.seed, r->v.id,
				     r->v.generated_tokens,
				     drafted < c->k ? drafted : c->k);
	r->v.computed_tokens -= drafted - accepted;
	r->spec_verifies++;
	r->spec_accepted += (uint32_t)accepted;
	st->verifies++;
	st->drafted += (uint64_t)drafted;
	st->accepted += (uint64_t)accepted;
	st->spec_emitted += (uint64_t)accepted + 1;
	st->rejected_energy_j += token_j * (drafted - accepted);
	return 1 + accepted;
}

#endif
