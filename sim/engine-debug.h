/* servesim — what tests may look at and change inside an engine (not
 * installed; tests only).
 *
 * The engine's state is private to its units (engine-int.h); a test that
 * checks how the engine keeps it, not only what it computes, reaches it
 * through these few accessors, as SQLite's test-only sqlite3_test_control
 * does, rather than through the private header.
 */
#ifndef SS_ENGINE_DEBUG_H
#define SS_ENGINE_DEBUG_H

#include <stdint.h>

#include "engine.h"
#include "waitq.h"

/* Instances of the engine (attention ranks count one each), from
 * engine_new. */
uint32_t engine_debug_instances(const struct engine *e);
/* Slabs of in-flight request structs allocated so far (memory follows the
 * requests in flight), and *per_slab the structs in each. */
uint32_t engine_debug_slabs(const struct engine *e, uint32_t *per_slab);
/* Steps of instance i formed by the steady-decode path (docs/
 * architecture.md: they must be the ones the policy would have planned). */
uint64_t engine_debug_steady_steps(const struct engine *e, uint32_t i);
/* Instance i's waiting queue (transfer none): its kind, or to put it on
 * the reference path (waitq_use_sorting) before engine_run. */
struct waitq *engine_debug_waitq(struct engine *e, uint32_t i);
/* Replace the admission policy's deadline method (before engine_run): the
 * reference that asks expire about every waiting request at every step. */
void engine_debug_set_deadline(struct engine *e,
			       int64_t (*deadline)(const void *priv, const struct req_view *req));

#endif
