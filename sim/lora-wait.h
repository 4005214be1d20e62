/* servesim — multi-LoRA: one instance's waiting requests indexed by
 * adapter, so that the batch policy's view under max_loras (lora.h, hook 1)
 * costs what changed since the last step, not the waiting queue's length.
 *
 * The view: of the waiting requests in queue order, those whose adapter is
 * the base model (-1), one the running set uses, or one of NEW: the first
 * max_loras - (adapters running) distinct other adapters, in the order of
 * their first waiting request.  That is lora_filter's rule (the reference,
 * which scans the queue); the index gives the same entries, the first
 * `len` of them (the most waiting requests a batch policy reads,
 * policy.h), for a first-come-first-served queue: requests join at the
 * back, preempted ones at the front, and leave from anywhere.
 *
 * Data structure (the decision, and what was rejected):
 *   - per adapter, its waiting requests as a list in queue order (a node
 *     embedded in the request, request.lw, as the waiting queue's own
 *     node is): joins at either end and leaves are O(1);
 *   - the adapters that are not running and have requests waiting, in an
 *     indexed heap by their first waiting request's place: NEW is its
 *     first few, O(max_loras log A) to read;
 *   - the view itself, kept between steps: an array of the first `len`
 *     eligible requests, and per eligible adapter a cursor (its last
 *     request in the view), so requests a step took are dropped from the
 *     front and the view is refilled from the cursors by a merge of at
 *     most max_loras + 1 lists: O((taken + refilled) log max_loras) a step.
 *     It is rebuilt (O(len log max_loras)) only when the eligible set may
 *     have changed: an adapter left the running set, a request was
 *     preempted (back at the front) or left rejected or expired, or a new
 *     adapter's request arrived while NEW had room.
 *   Rejected: scanning the queue every step (lora_filter: O(queue) a step,
 *   82% of an overloaded run's time with 1,000 adapters and 4 slots);
 *   per-adapter lists merged afresh every step (O(len log max_loras) a
 *   step, where the policy reads a few); a balanced tree of adapters by
 *   first request (the heap reads NEW as fast and is already in common/).
 *   Other queue orders keep the whole queue sorted (waitq_use_sorting) and
 *   use lora_filter.
 * Everything is allocated when the index is made (about 56 bytes per
 * adapter, 32 per view entry): the hooks never allocate nor fail. */
#ifndef SS_LORA_WAIT_H
#define SS_LORA_WAIT_H

#include <stdbool.h>
#include <stdint.h>

/* A waiting request's place in its instance's adapter index
 * (request.lw); owned by lora-wait.c. */
struct lora_wnode {
	struct lora_wnode *prev, *next;    /* its adapter's waiting list, queue order */
	const void *view;                  /* what the view hands the batch policy */
	int64_t seq;                       /* its place in the queue: smaller is earlier */
	int32_t slot;                      /* its adapter's index (the base model: the last) */
	bool in_view;                      /* among the view's entries */
};

struct lora_wait;

/* An index of n_adapters adapters, at most max_loras in a step, a view of
 * at most len entries (>= 1).  -ENOMEM. */
int lora_wait_new(struct lora_wait **out, uint32_t n_adapters, uint32_t max_loras, uint32_t len);
void lora_wait_free(struct lora_wait *w);

/* A request of adapter a (-1: the base model) joins the queue: at the back,
 * or (front: preempted) at the front.  view is what the view will hold. */
void lora_wait_push(struct lora_wait *w, struct lora_wnode *node, const void *view, int32_t a,
		    bool front);
/* node leaves the queue: taken (a step picked it from the view, after
 * lora_wait_run(.., true) for its adapter) or rejected or expired. */
void lora_wait_leave(struct lora_wait *w, struct lora_wnode *node, bool taken);
/* Adapter a's first request joined the running set (running) or its last
 * left it. */
void lora_wait_run(struct lora_wait *w, int32_t a, bool running);
/* The view, in queue order: *out (valid until the next call on w) and
 * the count, at most len. */
uint32_t lora_wait_view(struct lora_wait *w, const void *const **out);

#endif
