/* servesim — the steady-decode path: steps the scheduler forms without
 * asking the batch policy (not installed; steady.c says when and why).
 *
 * The scheduler (engine-sched.c) remembers each plan the policy makes
 * (steady_arm); before the next it asks whether the step is one the policy
 * promised (steady_ready) and, if so, forms it itself (steady_start).
 * Results are bit-for-bit the same as asking the policy.
 */
#ifndef SS_STEADY_H
#define SS_STEADY_H

#include <stdbool.h>
#include <stdint.h>

#include "policy.h"

struct engine;
struct instance;
struct ss_error;

/* An instance's state of the path (embedded in struct instance). */
struct steady {
	/* batch_policy_ops.steady_decode of the instance's policy: the most
	 * tokens the path may step, one a decode (with speculation 1 + its
	 * drafts; 0: never; steady_off, or a step shape whose policy sees
	 * part of the running set) */
	uint32_t max;
	/* the last plan, when it was steady: the running requests it
	 * stepped (0: it was not), the waiting request it saw first, and the
	 * free blocks it left after the decodes (blocks) */
	uint32_t n;
	int64_t tokens;           /* the tokens it stepped (n without speculation) */
	struct steady_head {
		uint32_t id;          /* UINT32_MAX: nobody waited */
		int32_t computed, kv_blocks;  /* tokens; blocks */
	} head;
	int64_t left;
	uint64_t steps;           /* steps formed by the path (tests, benchmarks) */
	/* What the emission of the step that just completed found of the
	 * running set it leaves (eng_step_emit): steady_need's value, blocks
	 * (-1: not all pure decodes), so that steady_ready need not walk the
	 * set again.  pre is set only from that emission to the end of the
	 * step's completion (eng_on_step_done), while nothing else changes the
	 * running requests. */
	bool pre;
	int64_t pre_need;
	/* The step in flight was formed by this path (fl_steady): fl_req
	 * and fl_tokens are the running set at one token each, and fl_xreq
	 * each one's block table as it stands, to be emitted.  When that step
	 * completes with nobody leaving (pre_formed, set with pre),
	 * steady_start may keep them and write only what moved: each
	 * context, and the tables of requests that take a block (steady_ready
	 * hands it on, formed, when it uses pre). */
	bool fl_steady, pre_formed, formed;
	/* What that emission already wrote for steady_start (with
	 * pre_formed): each fl_items context is the request's computed
	 * tokens, and grow lists the positions in fl_* of the requests that
	 * take a block (steady_decode_need > 0), n_grow of them, in order;
	 * cap_grow >= the formed step's n (steady_start grows it). */
	uint32_t *grow, n_grow, cap_grow;
};

/* A running request is a pure decode: its pending tokens are the last
 * token of its output (and, with speculation, its drafts: req_decoding),
 * not swapped out. */
static inline bool steady_decodes(const struct req_view *v)
{
	return req_decoding(v) && !v->host_blocks;
}

/* req_blocks_needed(v, pending, bs) without a division when v's blocks
 * already hold its pending tokens (most steps). */
static inline int32_t steady_decode_need(const struct req_view *v, int32_t bs)
{
	int32_t n = req_pending_tokens(v);

	return (int64_t)v->computed_tokens + n <= (int64_t)v->kv_blocks * bs ? 0
	       : req_blocks_needed(v, n, bs);
}

/* After a plan from pick_step: remember it if it is the steady shape.
 * O(running). */
void steady_arm(struct instance *in);
/* Whether in's next step is one its policy promised, its queues prepared
 * (then the blocks it leaves free are remembered).  O(running). */
bool steady_ready(const struct engine *e, struct instance *in);
/* Form the step steady_ready found in in.fl_*: what start_step does with
 * the plan the policy promised, every running request for one token; and
 * launch it (in's step shape). */
int steady_start(struct engine *e, struct instance *in, struct ss_error *err);

#endif
