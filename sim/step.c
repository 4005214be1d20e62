/* servesim — step shapes: the choice, the shared defaults and the plain
 * shape (step-int.h).  One step at a time: formed when the instance is idle,
 * priced by the executor, accounted, and completed at its end. */
#include "engine-int.h"
#include "step-int.h"

#include <errno.h>
#include <stdlib.h>

#include "sstime.h"

int step_shape_init(struct engine *e, struct instance *in, struct ss_error *err)
{
	const struct pool *pl = in->pl;
	const struct step_shape *s = &step_plain;
	int rc;

	/* setup refuses every combination of two (engine-setup.c make_pools) */
	if (pl->dp > 1)
		s = &step_dp_group;
	else if (pl->pp > 1)
		s = &step_pipeline;
	else if (engine_profile_burst(e->cfg.engine) > 1 && pl->role != POOL_PREFILL)
		s = &step_burst;     /* a prefill instance never decodes */
	in->shape = s;
	if (!s->priv_size)
		return 0;
	in->shape_priv = calloc(1, s->priv_size);
	rc = in->shape_priv ? s->init(e, in, in->shape_priv) : -ENOMEM;
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory") : 0;
}

void step_shape_release(struct instance *in)
{
	if (!in->shape_priv)
		return;
	in->shape->release(in, in->shape_priv);
	free(in->shape_priv);
	in->shape_priv = NULL;
}

int step_default_init(struct engine *e, struct instance *in, void *priv)
{
	(void)e;
	(void)in;
	(void)priv;
	return 0;
}

void step_default_release(struct instance *in, void *priv)
{
	(void)in;
	(void)priv;
}

bool step_default_next(const struct engine *e, const struct instance *in, int64_t *at_ns)
{
	*at_ns = e->now;
	return !in->busy;
}

int step_default_view(struct instance *in)
{
	(void)in;
	return 0;
}

int eng_step_queue(struct engine *e, struct instance *in, int64_t end, struct ss_error *err)
{
	int rc;

	in->busy = true;
	in->step_start_ns = e->now;
	eng_refresh_view(in);
	rc = evq_push(&e->q, &in->ev_step, end);
	return rc ? ss_error_set(err, rc, NULL, 0, "out of memory in the event queue") : 0;
}

int step_default_launch(struct engine *e, struct instance *in, struct exec_step *xs,
			int64_t prefill_tokens, struct ss_error *err)
{
	struct exec_result xr = { 0 };
	int64_t end;
	int rc;

	rc = eng_step_price(in, xs, &xr, err);
	if (rc)
		return rc;
	if (!ss_time_add(e->now, xr.duration_ns, &end))
		return eng_time_error(err, ((double)e->now + (double)xr.duration_ns) / 1e9,
				      "a step on instance %u", in->idx);
	eng_step_account(in, xs, &xr, prefill_tokens);
	return eng_step_queue(e, in, end, err);
}

int step_default_done(struct engine *e, struct instance *in, struct ss_error *err)
{
	(void)e;
	(void)err;
	in->busy = false;
	return 0;
}

double step_default_power_w(const struct instance *in)
{
	return in->busy ? in->step_power_w : in->pl->gpu->idle_w * in->pl->tp;
}

const struct step_shape step_plain = {
	.version = 1,
	.name = "plain",
	.steady = true,
	.init = step_default_init,
	.release = step_default_release,
	.next = step_default_next,
	.schedule = eng_unit_schedule,
	.view = step_default_view,
	.launch = step_default_launch,
	.emit = eng_step_emit,
	.done = step_default_done,
	.power_w = step_default_power_w,
};
