/* servesim — the policy interface.
 *
 * Policies decide; the engine owns state and applies decisions; executors
 * give steps a duration.  A policy sees only the read-only views defined here
 * and the current time `now` passed as an argument.  It never reads a clock,
 * does I/O or allocates: host services (random numbers) come through
 * struct policy_host.  Because nothing here knows whether time is simulated or
 * wall-clock, the same policy objects run in simulation and live.
 *
 * Each kind of policy is a versioned const ops table {version, name,
 * priv_size, ...} in a static registry, selected by "name:key=value,...".
 * The framework allocates priv_size zeroed bytes for each instance of a
 * policy and passes them to every method.
 */
#ifndef SS_POLICY_H
#define SS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "params.h"
#include "ss-error.h"

#define POLICY_VERSION 1

enum req_state {
	REQ_PENDING = 0,  /* not yet arrived */
	REQ_QUEUED,       /* waiting on an instance (new, or preempted) */
	REQ_RUNNING,      /* in an instance's running set (prefilling or decoding) */
	REQ_MIGRATING,    /* prefilled; its KV on the way to a decode instance */
	REQ_FINISHED,
	REQ_REJECTED,
};

/* What a policy may know about a request. */
struct req_view {
	uint32_t id;
	int32_t tenant;
	int32_t priority;          /* larger = more important */
	int64_t arrival_ns;
	int32_t prompt_tokens;
	int32_t generated_tokens;  /* output tokens emitted so far */
	int32_t computed_tokens;   /* tokens whose KV is in the cache */
	int32_t predicted_output;  /* predicted output length; -1 when no predictor */
	int32_t kv_blocks;         /* KV blocks held */
	int32_t preemptions;       /* times preempted so far */
	int32_t cached_tokens;     /* prompt tokens found in the prefix cache at the last lookup */
	int32_t host_blocks;       /* KV blocks swapped out to host memory (then kv_blocks is 0
				    * and computed_tokens is kept: it resumes without recompute) */
	enum req_state state;
};

/* Tokens known so far (prompt plus emitted outputs). */
static inline int32_t req_total_tokens(const struct req_view *r)
{
	return r->prompt_tokens + r->generated_tokens;
}

/* Tokens still to be fed to the model before the next output token. */
static inline int32_t req_pending_tokens(const struct req_view *r)
{
	return req_total_tokens(r) - r->computed_tokens;
}

/* What a policy may know about an instance. */
struct inst_view {
	int32_t id;
	int32_t block_size;        /* tokens per KV block */
	int32_t total_blocks;
	int32_t free_blocks;
	int32_t max_model_len;     /* tokens */
	bool busy;                 /* a step is in flight */
	/* Running set, oldest admission first. */
	const struct req_view *const *running;
	uint32_t n_running;
	/* Waiting queue in service order (preempted requests first). */
	const struct req_view *const *waiting;
	uint32_t n_waiting;
	/* Sum over unfinished requests routed here of prompt + generated tokens. */
	int64_t outstanding_tokens;
	uint32_t outstanding_requests;
};

/* KV blocks a request needs in addition to those it holds to process
 * `tokens` more tokens. */
static inline int32_t req_blocks_needed(const struct req_view *r, int32_t tokens,
					int32_t block_size)
{
	int32_t need = (r->computed_tokens + tokens + block_size - 1) / block_size;

	return need > r->kv_blocks ? need - r->kv_blocks : 0;
}

/* Services the engine lends to policies.  Any member may be used by any
 * policy kind; tests may pass a host with only some of them set. */
struct policy_host {
	void *ctx;
	/* Uniform double in [0, 1) from the policies' own seeded stream. */
	double (*uniform)(void *ctx);
	/* Prompt tokens of req that instance `inst` holds in its prefix cache
	 * right now (whole blocks, at most prompt_tokens - 1); 0 when prefix
	 * caching is off.  Looks only: nothing is reserved. */
	int32_t (*prefix_hit)(void *ctx, int32_t inst, const struct req_view *req);
	/* The run's cost model's estimate of a step that prefills `tokens`
	 * new prompt tokens on one instance, ns. */
	int64_t (*prefill_ns)(void *ctx, int32_t tokens);
	int64_t slo_ttft_ns;       /* the run's TTFT SLO, 0 = none */
	uint32_t n_tenants;        /* tenant indices are 0 .. n_tenants-1 */
};

/* ---- batch formation -------------------------------------------------- */

struct step_item {
	const struct req_view *req;
	int32_t tokens;            /* > 0 */
};

/* A step plan, filled by pick_step into engine-owned buffers.  Preemptions
 * are applied first: each victim, in the order listed, loses its KV
 * (recompute) and is put at the front of the waiting queue, so the last one
 * listed is served first (list victims newest first to restore admission
 * order, as vLLM does).  Then every item is scheduled.  The plan must stay
 * within the instance's free blocks (after the preemptions), hold at most
 * cap_items items and cap_preempt victims, name each request at most once,
 * and give every item 1 <= tokens <= req_pending_tokens(). */
struct step_plan {
	struct step_item *items;   /* capacity cap_items */
	uint32_t n_items, cap_items;
	const struct req_view **preempt;  /* capacity cap_preempt */
	uint32_t n_preempt, cap_preempt;
};

struct batch_policy_ops {
	int version;
	const char *name;
	const char *description;
	size_t priv_size;
	/* Optional: read params, prepare priv. */
	int (*init)(void *priv, struct ss_params *params, struct ss_error *err);
	/* Optional: can this request ever be served by this policy on inst?
	 * Return false and set *reason (a static string) to reject it. */
	bool (*admissible)(const void *priv, const struct req_view *req,
			   const struct inst_view *inst, const char **reason);
	/* Form the next step.  An empty plan means "nothing to do now". */
	void (*pick_step)(void *priv, const struct inst_view *inst, int64_t now,
			  const struct policy_host *host, struct step_plan *plan);
	/* Largest number of items / preemptions a plan can hold. */
	uint32_t (*max_items)(const void *priv);
};

/* ---- routing ------------------------------------------------------------ */

struct router_ops {
	int version;
	const char *name;
	const char *description;
	size_t priv_size;
	/* Optional: read params, prepare priv. */
	int (*init)(void *priv, struct ss_params *params, uint32_t n_instances,
		    struct ss_error *err);
	/* Pick an instance index for req among insts[0..n). */
	uint32_t (*route)(void *priv, const struct req_view *req,
			  const struct inst_view *const *insts, uint32_t n, int64_t now,
			  const struct policy_host *host);
};

/* ---- queue order -------------------------------------------------------- */

/* The order of an instance's waiting queue (--order).  One instance of the
 * policy per serving instance.  Before every step is formed the engine
 * sorts the waiting queue by key (smaller first; ties by arrival time, then
 * id), so batch policies, which admit from the front, serve it in that
 * order.  key == NULL keeps the queue as the engine builds it: arrival
 * order with preempted requests put back at the front (fcfs, as vLLM).
 * With key_static (below) the engine keeps the same order incrementally and
 * only the first max_items waiting requests are in order. */
struct order_ops {
	int version;
	const char *name;
	const char *description;
	size_t priv_size;
	/* Optional: read params, prepare priv; n_tenants as in policy_host. */
	int (*init)(void *priv, struct ss_params *params, uint32_t n_tenants,
		    struct ss_error *err);
	double (*key)(const void *priv, const struct req_view *req, int64_t now);
	/* Optional: req joins this instance's queue (on arrival); inst is the
	 * view before it joins. */
	void (*enqueued)(void *priv, const struct req_view *req, const struct inst_view *inst);
	/* Optional: a step starts that feeds `prefill` prompt tokens and
	 * `decode` output tokens of req to the model. */
	void (*served)(void *priv, const struct req_view *req, int32_t prefill, int32_t decode);
	/* Optional: true when key() depends only on the request's own fields
	 * that do not change while it waits (not on now, other requests or
	 * state served() updates).  The engine then computes a key once, when
	 * the request joins the queue, and keeps the queue ordered in O(log n)
	 * per change instead of sorting it before every step; the first
	 * max_items waiting requests are in order, the others are not (batch
	 * policies read only those).  NULL = false. */
	bool (*key_static)(const void *priv);
};

/* ---- preemption victims ------------------------------------------------- */

/* Which running request loses its KV first (--victim).  Batch policies
 * preempt from the end of inst_view.running; the engine presents the
 * running set sorted by compare (stable; negative = a stays before b, so b
 * is preempted first).  compare == NULL keeps admission order, so the
 * newest is preempted first (vLLM). */
struct victim_ops {
	int version;
	const char *name;
	const char *description;
	int (*compare)(const struct req_view *a, const struct req_view *b);
};

/* ---- admission ---------------------------------------------------------- */

/* Which arriving requests an instance accepts (--admission).  One instance
 * of the policy for the run.  Rejected requests are counted and reported
 * with the reason, never dropped silently. */
struct admission_ops {
	int version;
	const char *name;
	const char *description;
	size_t priv_size;
	/* Optional: read params, prepare priv. */
	int (*init)(void *priv, struct ss_params *params, struct ss_error *err);
	/* Optional: req has arrived and been routed to inst (the view before
	 * it joins).  false and *reason (a static string) reject it. */
	bool (*admit)(const void *priv, const struct req_view *req, const struct inst_view *inst,
		      int64_t now, const struct policy_host *host, const char **reason);
	/* Optional: should a waiting request that has never been scheduled
	 * leave the queue now?  Checked whenever its instance forms a step. */
	bool (*expire)(const void *priv, const struct req_view *req, int64_t now,
		       const char **reason);
};

/* ---- registry ----------------------------------------------------------- */

enum policy_kind {
	POLICY_BATCH = 0,
	POLICY_ORDER,
	POLICY_VICTIM,
	POLICY_ROUTER,
	POLICY_ADMISSION,
	POLICY_KIND_COUNT
};

struct policy_info {
	enum policy_kind kind;
	const char *kind_name;     /* "batch", "order", "victim", "router", "admission" */
	const char *option;        /* CLI option that selects it */
	const char *name;
	const char *description;
};

const struct batch_policy_ops *batch_policy_find(const char *name);
const struct router_ops *router_find(const char *name);
const struct order_ops *order_find(const char *name);
const struct victim_ops *victim_find(const char *name);
const struct admission_ops *admission_find(const char *name);
/* Every policy of every kind, for `servesim list policies`: fills
 * out[0..min(n, cap)) and returns the total number n. */
size_t policy_list(struct policy_info *out, size_t cap);

#endif
