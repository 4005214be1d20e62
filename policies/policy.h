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
 * description, priv_size, ...} listed by one line in policies/registry.def
 * and selected by "name:key=value,...".  The table carries everything said
 * about the policy elsewhere: `servesim list policies` and the CLI's help
 * are generated from its name, description and params.  The framework
 * allocates priv_size zeroed bytes for each instance of a policy and passes
 * them to every method.
 *
 * Callers get a table through *_lookup (or *_resolve), which checks its
 * version and required methods and returns a copy with a shared default in
 * every optional method left NULL, so that call sites never test for NULL.
 */
#ifndef SS_POLICY_H
#define SS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "params.h"
#include "ss-error.h"

/* The policy interface's version.  A table sets .version to the
 * POLICY_VERSION it was written for; *_lookup runs tables with
 * POLICY_VERSION_MIN <= version <= POLICY_VERSION and refuses any other with
 * -ENOTSUP (0 is a table that forgot its version; a larger one was written
 * for a newer servesim).  Tables only grow at their end, as SQLite's
 * sqlite3_vfs does: a member added in version N is read only from tables
 * with version >= N, so a table written for an older version keeps running.
 *   1  the first tables
 *   2  .params, the parameter summary of `servesim list policies`;
 *      order_ops.uses_predictions; admission_ops.deadline
 *   3  batch_policy_ops.steady_decode
 *   4  batch_policy_ops.uses_predictions
 */
#define POLICY_VERSION_MIN 1
#define POLICY_VERSION 4

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
	int32_t spec_tokens;       /* speculative decoding (sim/spec.h): draft tokens awaiting
				    * verification after its last token; 0 without */
	enum req_state state;
};

/* Tokens known so far (prompt plus emitted outputs). */
static inline int32_t req_total_tokens(const struct req_view *r)
{
	return r->prompt_tokens + r->generated_tokens;
}

/* Tokens still to be fed to the model before the next output token: with
 * speculative decoding, a decode's last token and its drafts to verify. */
static inline int32_t req_pending_tokens(const struct req_view *r)
{
	return req_total_tokens(r) + r->spec_tokens - r->computed_tokens;
}

/* Is r decoding: every token but its last output token in the KV cache
 * (its pending tokens are that token, and its drafts with speculation)? */
static inline bool req_decoding(const struct req_view *r)
{
	return r->generated_tokens > 0 && r->computed_tokens + 1 == req_total_tokens(r);
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
	/* Per tenant (policy_host.n_tenants entries, indexed by
	 * req_view.tenant): requests of that tenant waiting or running here,
	 * i.e. in waiting or running above; kept by the engine so a policy
	 * need not scan the queue. */
	const uint32_t *tenant_active;
	/* Pipeline parallelism (--pp, docs/cost-models.md): running requests
	 * in a batch still in flight in the instance's pipeline.  They are
	 * not in running above (a request is in one batch at a time) but
	 * count toward a running-set limit, as vLLM V1's max_num_seqs counts
	 * every running request.  0 without a pipeline. */
	uint32_t n_inflight;
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
	/* Multi-LoRA serving (docs/lora.md): where req's adapter is on
	 * instance inst right now: 2 in one of its GPU adapter slots, 1 in its
	 * host memory only, 0 neither; -1 when req names no adapter (the base
	 * model) or the run serves none.  Looks only.  May be NULL (an older
	 * host): a policy then treats every answer as -1. */
	int (*adapter_resident)(void *ctx, int32_t inst, const struct req_view *req);
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
 * and give every item 1 <= tokens <= req_pending_tokens().  A policy may
 * count a victim's kv_blocks as freed; with the prefix cache, blocks the
 * victim shares with other requests stay held, so when the items then do
 * not fit the engine keeps the preemptions, drops the items and calls
 * pick_step again on the view as it is. */
struct step_plan {
	struct step_item *items;   /* capacity cap_items */
	uint32_t n_items, cap_items;
	const struct req_view **preempt;  /* capacity cap_preempt */
	uint32_t n_preempt, cap_preempt;
	/* Engine-owned room for a policy's working list of requests while it
	 * plans (policies allocate nothing): cap_scratch entries, at least
	 * the running requests plus max_items; contents undefined on entry,
	 * ignored after.  NULL with cap_scratch 0 where a caller lends none. */
	const struct req_view **scratch;
	uint32_t cap_scratch;
};

struct batch_policy_ops {
	int version;
	const char *name;
	const char *description;
	size_t priv_size;
	/* Optional (default: takes no parameters): read params, prepare priv. */
	int (*init)(void *priv, struct ss_params *params, struct ss_error *err);
	/* Optional (default: always true): can this request ever be served by
	 * this policy on inst?
	 * Return false and set *reason (a static string) to reject it. */
	bool (*admissible)(const void *priv, const struct req_view *req,
			   const struct inst_view *inst, const char **reason);
	/* Form the next step.  An empty plan means "nothing to do now". */
	void (*pick_step)(void *priv, const struct inst_view *inst, int64_t now,
			  const struct policy_host *host, struct step_plan *plan);
	/* Largest number of items / preemptions a plan can hold. */
	uint32_t (*max_items)(const void *priv);
	/* Version 2: its parameters with their defaults, one line, e.g.
	 * "max_batch=N (16), max_len=N (0: the model's context)"; NULL or ""
	 * for none. */
	const char *params;
	/* Version 2, optional, for `servesim plan` (docs/plan.md): the
	 * parameter --max-batch sets (the running-set limit; NULL: plan does
	 * not sweep this policy), the one --chunk sets (tokens per step; NULL:
	 * no token budget), and whether the policy requires max batch <= the
	 * token budget (plan leaves such pairs out). */
	const char *plan_batch_key;
	const char *plan_chunk_key;
	bool plan_batch_within_chunk;
	/* Version 3, optional (default: returns 0, no promise): the
	 * steady-decode promise, which lets the engine form most steps without
	 * calling pick_step (docs/writing-a-policy.md).  A policy returns N > 0
	 * when pick_step reads nothing but the view (not now, host, a random
	 * stream or state it changes) and:
	 * (a) for every view in which nobody waits, each of the n running
	 *     requests decodes (req_decoding: its pending tokens are its last
	 *     output token and, with speculative decoding, its drafts), their
	 *     pending tokens number at most N in all, and free_blocks covers
	 *     the blocks all n need for them, it plans exactly those n
	 *     requests for all their pending tokens, in running order, and
	 *     preempts nobody (without speculation: n <= N, one token each);
	 * (b) after it planned so (admitting and preempting nobody) for a
	 *     view in which requests waited, it plans the same for a view that
	 *     differs only in that every running request has computed its
	 *     tokens of that step, the free blocks left after their decodes
	 *     are no more than then (and still cover them), no fewer tokens
	 *     are pending than then, and more requests may wait behind the
	 *     same, unchanged, first waiting request.
	 * Called once, after init. */
	uint32_t (*steady_decode)(const void *priv);
	/* Version 4, optional (default: false): pick_step or admissible reads
	 * req_view.predicted_output, so a run that names no --predictor gets
	 * the oracle rather than none (as order_ops.uses_predictions; vllm's
	 * admission=no_evict).  Called once, after init. */
	bool (*uses_predictions)(const void *priv);
};

/* ---- routing ------------------------------------------------------------ */

struct router_ops {
	int version;
	const char *name;
	const char *description;
	size_t priv_size;
	/* Optional (default: takes no parameters): read params, prepare priv. */
	int (*init)(void *priv, struct ss_params *params, uint32_t n_instances,
		    struct ss_error *err);
	/* Pick an instance index for req among insts[0..n). */
	uint32_t (*route)(void *priv, const struct req_view *req,
			  const struct inst_view *const *insts, uint32_t n, int64_t now,
			  const struct policy_host *host);
	/* Version 2: parameter summary, as batch_policy_ops.params. */
	const char *params;
};

/* ---- queue order -------------------------------------------------------- */

/* The order of an instance's waiting queue (--order).  One instance of the
 * policy per serving instance.  Before every step is formed the engine
 * sorts the waiting queue by key (smaller first; ties by arrival time, then
 * id), so batch policies, which admit from the front, serve it in that
 * order.  key == NULL keeps the queue as the engine builds it: arrival
 * order with preempted requests put back at the front (fcfs, as vLLM).
 * key is a capability, not an optional method: no key function reproduces
 * the engine's own order, so a resolved table keeps key NULL and the engine
 * tests it to skip sorting.
 * With key_static (below) the engine keeps the same order incrementally and
 * only the first max_items waiting requests are in order. */
struct order_ops {
	int version;
	const char *name;
	const char *description;
	size_t priv_size;
	/* Optional (default: takes no parameters): read params, prepare priv;
	 * n_tenants as in policy_host. */
	int (*init)(void *priv, struct ss_params *params, uint32_t n_tenants,
		    struct ss_error *err);
	double (*key)(const void *priv, const struct req_view *req, int64_t now);
	/* Optional (default: nothing): req joins this instance's queue (on
	 * arrival); inst is the view before it joins. */
	void (*enqueued)(void *priv, const struct req_view *req, const struct inst_view *inst);
	/* Optional (default: nothing): a step starts that feeds `prefill`
	 * prompt tokens and `decode` output tokens of req to the model. */
	void (*served)(void *priv, const struct req_view *req, int32_t prefill, int32_t decode);
	/* Version 2: parameter summary, as batch_policy_ops.params. */
	const char *params;
	/* Version 2: the key reads req_view.predicted_output, so a run that
	 * names no --predictor gets the oracle rather than none. */
	bool uses_predictions;
	/* Version 2, optional (default: never static): true when key()
	 * depends only on the request's own fields that do not change while
	 * it waits (not on now, other requests or
	 * state served() updates), but for computed_tokens, which a prefix-cache
	 * lookup of that request may move.  The engine then computes a key
	 * when the request joins the queue (and again after such a lookup),
	 * and keeps the queue ordered in O(log n)
	 * per change instead of sorting it before every step; the first
	 * max_items waiting requests are in order, the others are not (batch
	 * policies read only those). */
	bool (*key_static)(const void *priv);
	/* Version 2, optional (default: no): true when key() depends only on
	 * req->tenant and on the policy's own state, that state changes only
	 * in enqueued() and served(), and each such call changes the key of
	 * the passed request's tenant only (not now, not other requests'
	 * fields).  The engine then keeps one key per tenant, re-evaluated
	 * after each of those calls, and each tenant's waiting requests in
	 * (arrival, id) order, so that ordering the queue costs nothing per
	 * waiting request (vtc).  Ignored when key_static() is true. */
	bool (*key_tenant)(const void *priv);
	/* Version 2, optional (default: 0): a rate r > 0 when the key ages --
	 * key(req, now) = key(req, req->arrival_ns) - r * (now - arrival_ns)
	 * * 1e-9 in exact arithmetic, the same r for every request, the key at
	 * arrival fixed as for key_static -- and key() is a function of the
	 * key at arrival and now - arrival_ns only, computed from
	 * (double)(now - arrival_ns), the constant 1e-9 and the key at arrival
	 * with at most 5 roundings (priority:aging).  The engine then orders
	 * by key at arrival + r * arrival_s, the same order in exact
	 * arithmetic, keeps the queue as for key_static, and before each step
	 * checks that no two requests at the head are within rounding of each
	 * other (else that step sorts by key at now, as without it): the
	 * queue order is bit-for-bit the same as sorting by key(req, now). */
	double (*key_aging)(const void *priv);
};

/* ---- preemption victims ------------------------------------------------- */

/* Which running request loses its KV first (--victim).  Batch policies
 * preempt from the end of inst_view.running; the engine presents the
 * running set sorted by compare (stable; negative = a stays before b, so b
 * is preempted first).  compare == NULL keeps admission order, so the
 * newest is preempted first (vLLM).  Like order_ops.key, compare is a
 * capability a resolved table keeps NULL: the engine tests it to skip a
 * pass over the running set on every step.  Victim orders are stateless
 * and take no parameters. */
struct victim_ops {
	int version;
	const char *name;
	const char *description;
	int (*compare)(const struct req_view *a, const struct req_view *b);
	/* Version 2: parameter summary; always empty today. */
	const char *params;
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
	/* Optional (default: takes no parameters): read params, prepare priv. */
	int (*init)(void *priv, struct ss_params *params, struct ss_error *err);
	/* Optional (default: admit): req has arrived and been routed to inst
	 * (the view before it joins).  false and *reason (a static string)
	 * reject it. */
	bool (*admit)(const void *priv, const struct req_view *req, const struct inst_view *inst,
		      int64_t now, const struct policy_host *host, const char **reason);
	/* Capability, kept NULL in a resolved table when absent: should a
	 * waiting request that has never been scheduled (nor preempted) leave
	 * the queue now?  Asked whenever its instance forms a step, about the
	 * waiting requests whose deadline (below) has come; the engine tests
	 * the capability to skip expiry altogether. */
	bool (*expire)(const void *priv, const struct req_view *req, int64_t now,
		       const char **reason);
	/* Version 2: parameter summary, as batch_policy_ops.params. */
	const char *params;
	/* Version 2, optional (default: INT64_MIN, "ask expire at every
	 * step"): the simulated time, ns, from which expire may return true
	 * for req, computed once when req joins a queue unscheduled (from
	 * fields that do not change while it waits: arrival, prompt, tenant,
	 * priority).  The engine indexes waiting requests by it (a min-heap per
	 * instance) and asks expire only about those whose deadline is <= now,
	 * at every step from then on while they wait, so a step costs
	 * O(k log n) for k due requests rather than O(n).  It must not be
	 * later than the first now at which expire would return true (that
	 * would change results); an earlier one only costs time.  Read only
	 * when expire is set. */
	int64_t (*deadline)(const void *priv, const struct req_view *req);
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
	const char *description;   /* one line; "" when the table has none */
	const char *params;        /* one line; "" for none or a version-1 table */
	int version;               /* the table's .version */
};

/* The registered table called name, unchecked and unresolved (transfer
 * none), or NULL.  For reading a table; to run a policy use *_lookup. */
const struct batch_policy_ops *batch_policy_find(const char *name);
const struct router_ops *router_find(const char *name);
const struct order_ops *order_find(const char *name);
const struct victim_ops *victim_find(const char *name);
const struct admission_ops *admission_find(const char *name);

/* Check a table and copy it into *out with every optional method that is
 * NULL replaced by its shared default (see each member), description and
 * params never NULL (params "" for a version-1 table), and priv_size at
 * least 1 (so calloc(1, priv_size) fails only for want of memory).  option
 * ("--policy", "--router", "--pairing", ...) names the caller in errors.
 * Returns 0; -ENOTSUP when the version is outside POLICY_VERSION_MIN ..
 * POLICY_VERSION; -EINVAL when a required method is missing; err says
 * which policy and which versions or method. */
int batch_policy_resolve(const char *option, const struct batch_policy_ops *ops,
			 struct batch_policy_ops *out, struct ss_error *err);
int router_resolve(const char *option, const struct router_ops *ops, struct router_ops *out,
		   struct ss_error *err);
int order_resolve(const char *option, const struct order_ops *ops, struct order_ops *out,
		  struct ss_error *err);
int victim_resolve(const char *option, const struct victim_ops *ops, struct victim_ops *out,
		   struct ss_error *err);
int admission_resolve(const char *option, const struct admission_ops *ops,
		      struct admission_ops *out, struct ss_error *err);

/* Whether o (resolved) has a served method of its own: false when served
 * is the shared default, which does nothing, so a caller on a per-token
 * path may skip the calls. */
bool order_serves(const struct order_ops *o);

/* Find name in the registry and resolve it into *out: what the engine calls
 * to instantiate a policy.  An unknown name is -EINVAL with "OPTION: unknown
 * KIND 'NAME' (see `servesim list policies`)"; otherwise as *_resolve. */
int batch_policy_lookup(const char *option, const char *name, struct batch_policy_ops *out,
			struct ss_error *err);
int router_lookup(const char *option, const char *name, struct router_ops *out,
		  struct ss_error *err);
int order_lookup(const char *option, const char *name, struct order_ops *out,
		 struct ss_error *err);
int victim_lookup(const char *option, const char *name, struct victim_ops *out,
		  struct ss_error *err);
int admission_lookup(const char *option, const char *name, struct admission_ops *out,
		     struct ss_error *err);

/* Every policy of every kind in registry order, for `servesim list
 * policies`: fills out[0..min(n, cap)) and returns the total number n. */
size_t policy_list(struct policy_info *out, size_t cap);

/* The CLI option that selects a kind ("--policy", "--order", ...). */
const char *policy_kind_option(enum policy_kind kind);

/* The names of every policy of a kind, joined by sep, into buf as snprintf
 * does (always terminated when size > 0), for help texts: e.g. "rr | lot |
 * random" for POLICY_ROUTER with sep " | ".  Returns the length the whole
 * list needs, excluding the terminator. */
size_t policy_names(enum policy_kind kind, const char *sep, char *buf, size_t size);

#endif
