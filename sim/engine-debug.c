/* servesim — the tests' accessors (engine-debug.h). */
#include "engine-int.h"
#include "engine-debug.h"

uint32_t engine_debug_instances(const struct engine *e)
{
	return e->n_inst;
}

uint32_t engine_debug_slabs(const struct engine *e, uint32_t *per_slab)
{
	*per_slab = ENG_SLAB;
	return e->n_slabs;
}

uint64_t engine_debug_steady_steps(const struct engine *e, uint32_t i)
{
	return e->inst[i].steady.steps;
}

struct waitq *engine_debug_waitq(struct engine *e, uint32_t i)
{
	return &e->inst[i].wq;
}

void engine_debug_set_deadline(struct engine *e,
			       int64_t (*deadline)(const void *priv, const struct req_view *req))
{
	e->aops_r.deadline = deadline;
}
