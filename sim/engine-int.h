/* servesim — the engine's private state, shared by its units (not installed).
 *
 * The engine (public interface: engine.h) is four units over one struct
 * engine, beside the KV manager (kvm.h) that owns every tier of the KV
 * cache; docs/architecture.md walks a request through them:
 *   engine.c         the event loop and its events: arrival and routing,
 *                    sampling, the results; small shared helpers.
 *   engine-sched.c   instance scheduling: the running set, the batch
 *                    policy's plan, preemption, starting a step and
 *                    completing it; each instance's waiting queue is a
 *                    struct waitq (waitq.h), kept in its order's order.
 *   step*.c          step shapes (step-int.h), one per instance, chosen
 *                    at setup: plain steps, multi-step bursts, pipeline
 *                    stages, lock-step attention-DP ranks; each with
 *                    state of its own (instance.shape_priv).
 *   engine-disagg.c  prefill/decode disaggregation: pairing, the KV link
 *                    model (NVLink/RDMA) and transfers.
 *   engine-setup.c   construction and validation: option specs, pools and
 *                    KV capacity, policies, predictions, tenants, free.
 * The KV manager's units (kvm.c: pools, prefix cache, swap, pricing;
 * kvm-host.c: --kv-offload; kvm-remote.c: --kv-remote) share kvm-int.h and
 * never this header: the engine reaches them through kvm.h only.
 * Functions one unit offers another are declared here with the eng_ prefix;
 * everything else is static in its unit.  Nothing here allocates per event
 * except the growth of arrays, which is amortised O(1).
 */
#ifndef SS_ENGINE_INT_H
#define SS_ENGINE_INT_H

#ifdef SS_KVM_INT_H
#error "the engine reaches the KV manager through kvm.h, never kvm-int.h"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "engine.h"
#include "evq.h"
#include "executor.h"
#include "frontend.h"
#include "kvm.h"
#include "spec.h"
#include "ss-grow.h"
#include "steady.h"
#include "tseries.h"
#include "waitq.h"

/* Event kinds, in the order they fire at equal times (evq orders by
 * (time, priority, seq) and an event's priority is its kind):
 *   STEP_DONE  an instance's step completes: tokens are emitted, requests
 *              finish and release their KV blocks;
 *   ARRIVAL    the next request of the workload arrives and is routed
 *              (closed loop: a client sends it; target = the client's event);
 *   SCHEDULE   an idle instance asks its batch policy for the next step
 *              (after every completion and arrival at that instant, so
 *              simultaneous arrivals are batched together);
 *   SAMPLE     the time series is sampled;
 *   XFER_DONE  a request's KV has reached its decode instance.
 * Events are pre-allocated (one arrival, or one per closed-loop client, one
 * sample, one step and one schedule event per instance, one transfer event
 * per request), so the
 * loop never allocates per event. */
enum ev_kind {
	EV_STEP_DONE = 0,
	EV_ARRIVAL = 1,
	EV_SCHEDULE = 2,
	EV_SAMPLE = 3,
	EV_XFER_DONE = 4,     /* a request's KV has reached its decode instance */
};

/* Bytes the engine keeps per request for the whole run: the estimate's
 * per-request term (engine_memory_estimate). */
#define ENG_REQ_BYTES sizeof(struct req_record)

/* In-flight requests are carved from slabs of this many structs (64 x 296
 * bytes = 19 KB).  A new slab is threaded whole onto the free list, so
 * every page of it is written: 1024 structs (300 KB) cost a small run 74
 * page faults (~1 ms on our VMs) for the few requests it has in flight,
 * while a run with many in flight pays one calloc per 64. */
#define ENG_SLAB 64u

/* request.flags bits */
#define RF_PICKED 1u     /* taken from the waiting queue by the current plan */
#define RF_REMOVE 2u     /* leaving the running set */
/* 4u is RF_LOOKED, the KV manager's bit (kvm.h) */
#define RF_INUSE 8u      /* in the run: its record is written when it is retired */
/* 256u is RF_INFLIGHT, the pipeline's bit (step-int.h) */

enum pool_role { POOL_MIXED, POOL_PREFILL, POOL_DECODE };

/* Instances of one GPU type and tp, sized alike, sharing a cost model. */
struct pool {
	enum pool_role role;
	const struct gpu_spec *gpu;
	int tp;
	uint32_t first, n;        /* instances first .. first + n - 1 */
	uint32_t first_gpu;       /* placement: global index of its first GPU */
	int32_t kv_blocks;        /* per instance */
	double kv_bytes_per_block;/* whole instance */
	struct cost_model *cm;
	bool cm_borrowed;
	const struct executor_ops *xops;
	void *xpriv;
	bool xpriv_owned;
	/* the router over this pool: --router for arrivals, --pairing for
	 * the decode pool */
	const struct router_ops *rops;   /* = &rops_r */
	struct router_ops rops_r;        /* resolved: optional methods filled in */
	void *router_priv;
	/* Expert parallelism and data-parallel attention (engine.h): with
	 * dp > 1 the pool's units are attention ranks, dp of them per
	 * instance; tp above is then a rank's GPUs and n counts ranks; the
	 * instance's tensor parallelism is tp x dp.  ep: routed experts'
	 * spread.  0 or 1 = off (units are instances). */
	int ep, dp;
	int pp;                   /* pipeline stages of tp GPUs each, >= 1 (1: none) */
	/* pp > 1 and a model whose layers are not all alike
	 * (model_layers_alike): stage s's slice of the model (model_slice)
	 * and its cost model (cm's backend and parameters), which prices
	 * stage s's share of each step (cost_pp_split_sliced); stages of the
	 * same layer types and count share one.  NULL otherwise. */
	struct model_spec *stage_model;
	struct cost_model **stage_cm;
	/* Speculative decoding (spec.h): the drafter's cost model (the
	 * pool's backend for the draft model or head, no engine host work);
	 * NULL without drafting; spec: engine_config.spec (NULL = off). */
	struct cost_model *draft_cm;
	const struct executor_ops *draft_xops;  /* runs the draft passes; NULL without */
	void *draft_xpriv;
	bool draft_xpriv_owned;
	const struct spec_config *spec;
	const struct engine_profile *engine;   /* the run's engine profile, NULL = none
						 * (the drafter's passes, adapter loads) */
};

struct instance {
	uint32_t idx;
	struct pool *pl;
	/* KV transfers: requests paired here waiting for blocks (FIFO), and
	 * when this instance's link is next free in each direction */
	struct request **incoming;
	uint32_t in_head, n_incoming, cap_incoming;
	int64_t link_free_in, link_free_out;
	uint32_t n_migrating;     /* prefilled requests still holding blocks here */
	struct kvm_inst *kv;      /* its part of the KV manager (engine.kv) */
	/* Running set in admission order. */
	struct req_view **running;
	uint32_t n_running, cap_running;
	uint32_t n_remove;        /* of them marked RF_REMOVE, for running_compact */
	/* The waiting queue, in the order's order (waitq.h). */
	struct waitq wq;
	/* Per tenant: its requests waiting or running here (view.tenant_active). */
	uint32_t *tenant_active;
	struct inst_view view;
	struct event ev_step, ev_sched;
	bool busy;
	void *batch_priv;
	struct steady steady;     /* the steady-decode path's (steady.h) */
	void *order_priv;
	/* plan buffers */
	struct step_plan plan;
	/* the step in flight */
	struct request **fl_req;
	int32_t *fl_tokens;
	struct cost_item *fl_items;
	struct exec_req *fl_xreq;  /* what the executor sees of each item */
	uint32_t n_fl, cap_fl_req, cap_fl_tokens, cap_fl_items, cap_fl_xreq;
	/* speculative decoding: the drafter's items of a pass (eng_spec_draft) */
	struct cost_item *draft_items;
	struct exec_req *draft_reqs;
	uint32_t cap_draft_items, cap_draft_reqs;
	/* multi-LoRA serving (lora.h): its adapter caches (NULL = off), the
	 * policy's filtered view of the waiting queue, a step's adapters */
	struct lora_inst *lora;
	const void **lora_view;
	int32_t *lora_ad;
	uint32_t cap_lora_view, cap_lora_ad;
	int64_t lora_load_ns, lora_gemm_ns;   /* the step in flight's, priced (eng_lora_admit) */
	/* How its steps run (step-int.h: one at a time, bursts, a pipeline, a
	 * lock-step rank), chosen at setup, and that shape's state. */
	const struct step_shape *shape;
	void *shape_priv;
	int64_t step_start_ns;    /* when the step in flight started */
	double step_power_w;      /* power of the step in flight, all tp GPUs, W */
	struct instance_stats *st;  /* = &engine.stats[idx] */
	/* its output front end (frontend.h; off without the profile's keys):
	 * a token's recorded time is when it leaves it */
	struct frontend fe;
};

struct engine {
	struct engine_config cfg;
	const struct workload *wl;
	struct req_record *rec;   /* n_req, workload order: what analysis reads */
	uint64_t n_req;
	/* In-flight requests (request.h): slabs of ENG_SLAB structs that
	 * never move (queues hold pointers to them), a free list, and the
	 * requests that left during the current event, retired (recorded,
	 * their block tables freed, put on the free list) after it.  Memory
	 * is O(requests in flight), not O(workload). */
	struct request **slabs;
	uint32_t n_slabs, cap_slabs;
	struct request *free_req, *retired;
	/* output-length predictions, drawn at arrival in workload order */
	bool pred_on;
	double pred_sigma;
	gsl_rng *pred_rng;
	uint64_t next_arrival;
	/* Serving-stack latency (engine_config.stack): a request
	 * reaches the engine's queue api_in after its arrival, in arrival
	 * order (the front end is a FIFO), and the client sees each token
	 * api_out after the engine emits it.  Draws are a hash of the seed
	 * and the request id, so they need no per-request state. */
	bool api_on;
	/* the stack of a profile with the legacy api_* keys, where the
	 * caller gave none (engine_config.stack NULL): cfg.stack points here */
	struct stack_profile legacy_stack;
	int64_t api_last_ns;      /* when the previous request reached the queue */
	uint64_t n_done;          /* finished + rejected */
	/* Closed loop (engine_config.concurrency > 0, engine.c): one send
	 * event (EV_ARRIVAL, target = its index) per client thinking, taken
	 * from a stack of free ones; clients are alike, so which event a
	 * client uses does not matter.  freed[0 .. n_freed) are the ids of the
	 * requests that left the run during the current event, in the order
	 * they left: each one's client draws a think time after the event.
	 * Memory O(clients), nothing per request. */
	bool closed;
	uint32_t n_clients;       /* min(concurrency, requests) */
	struct event *ev_send;    /* n_clients */
	/* when each client sent the request its event carries: the event
	 * is later by a serving stack's api_in (engine_config.stack) */
	int64_t *send_at;         /* n_clients */
	uint64_t n_sends;         /* sends so far: the serving-stack draws' key */
	uint32_t *send_free, n_send_free;
	uint32_t *freed, n_freed;  /* at most n_clients: one per request in the run */
	struct think_time think;
	gsl_rng *think_rng;       /* SS_RNG_THINK */
	int64_t now;
	struct evq q;
	struct event ev_arrival, ev_sample;
	/* Sessions (workload.sess, engine.c "sessions"): per session, the
	 * event that sends its next step (EV_ARRIVAL, target = the session),
	 * when it was due, the calls of its current step still in the run,
	 * the latest of their completions, and whether one was rejected.
	 * NULL without sessions. */
	struct eng_session {
		struct event ev;
		int64_t send_ns;      /* the step's send time (its calls' arrival) */
		int64_t done_ns;      /* latest completion in the step, client's clock */
		uint32_t step_first;  /* first call of the current step */
		uint32_t pending;     /* its calls not yet left the run */
		bool failed;          /* one of its calls was rejected */
	} *sess;

	struct instance *inst;
	struct instance_stats *stats;
	uint32_t n_inst;
	const struct inst_view **views;
	struct pool pools[2];     /* [0] mixed or prefill, [1] decode */
	uint32_t n_pools;
	bool semi_pd;             /* the two pools share GPUs (docs/disaggregation.md) */
	struct gpu_spec semi_gpu[2];
	int32_t max_model_len;

	/* The policies' resolved tables (policy.h *_lookup): every optional
	 * method is set, so calls need no NULL checks; key, compare and expire
	 * are capabilities and may be NULL.  The pointers point at them. */
	const struct batch_policy_ops *bops;
	const struct order_ops *oops;
	const struct victim_ops *vops;
	const struct admission_ops *aops;
	struct batch_policy_ops bops_r;
	struct order_ops oops_r;
	struct victim_ops vops_r;
	struct admission_ops aops_r;
	void *adm_priv;
	struct req_view **kvfirst; /* a decode queue's view, KV holders first (engine-sched.c) */
	uint32_t cap_kvfirst;
	/* the KV manager: GPU pools, prefix cache, swap, host and remote
	 * tiers (kvm.h) */
	struct kvm *kv;
	/* multi-LoRA serving: the run's adapters (lora.h), NULL = off */
	struct lora *lora;
	/* tenants */
	uint32_t n_tenants;
	int32_t *tenant_ids;
	double *tenant_service;
	int64_t service_window_ns;
	char predictor[64];
	gsl_rng *policy_rng;
	struct policy_host host;

	struct ss_hist itl;
	struct tseries ts;           /* bounded: coarsens itself (tseries.h) */

	engine_progress_fn progress;
	void *progress_ctx;
};

/* ---- engine.c: shared helpers and request lifecycle ---------------------- */

/* The engine's arrays grow with SS_GROW (common/ss-grow.h).  eng_grow is
 * its untyped form, left for the call sites of engine-sched.c and steady.c
 * while another change reworks their hot paths; they move to SS_GROW after
 * it and this goes. */
static inline int eng_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	return need <= *cap ? 0 : ss_grow_to(arr, cap, need, elem);
}
/* Bring in->view (what policies see) up to date with the instance. */
void eng_refresh_view(struct instance *in);
/* r leaves the run rejected; reason is a static string. */
void eng_reject(struct engine *e, struct request *r, const char *reason);
/* r has left the run (finished or rejected): it is recorded and its
 * struct reused after the current event; in a closed loop its client is
 * free to think and send again. */
void eng_retire(struct engine *e, struct request *r);
/* Whether anything is left to happen: a request in the run, or one still
 * to arrive (open loop) or a client thinking (closed loop). */
static inline bool eng_active(const struct engine *e)
{
	if (e->closed)
		return e->n_done < e->next_arrival || e->n_send_free < e->n_clients;
	return e->n_done < e->n_req;
}
/* The in-flight request in pool slot `slot`. */
struct request *eng_req_at(struct engine *e, uint32_t slot);
/* Queue in's schedule event at now unless it is busy or already queued. */
int eng_push_schedule(struct engine *e, struct instance *in);
/* Simulated time is int64 ns (common/sstime.h): a computed duration or an
 * event time that does not fit is bad data (an impossibly slow link or
 * device), an error the run returns, never a wrapped or clamped value.
 * Event times are sums checked with ss_time_add; on overflow this sets
 * -ERANGE in err saying that what (printf fmt: "a step on instance %u")
 * would end at end_s seconds, past the range, and returns it. */
int eng_time_error(struct ss_error *err, double end_s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* ns (a computed duration in nanoseconds, a double) truncated to int64 as
 * the engine has always truncated it; false when ns is NaN, negative or
 * does not fit (cost_ns_fits, the cost models' check). */
static inline bool eng_ns_trunc(double ns, int64_t *out)
{
	if (!cost_ns_fits(ns))
		return false;
	*out = (int64_t)ns;
	return true;
}

/* Sessions (engine.c): set up their state (nothing without sessions);
 * 0, -EINVAL (err set: a closed loop) or -ENOMEM. */
int eng_sessions_setup(struct engine *e, struct ss_error *err);

/* ---- engine-sched.c: instance scheduling -------------------------------- */

/* Set up in's waiting queue for the engine's order, batch policy,
 * admission policy and prefix cache (after the policies); 0 or -ENOMEM. */
int eng_waitq_init(struct engine *e, struct instance *in);
/* v joins in's waiting queue (waitq_push): 0 or -ENOMEM. */
int eng_wait_push_back(struct engine *e, struct instance *in, struct req_view *v);
/* The order key of r's tenant on in may have changed (enqueued() or
 * served() of r ran): waitq_tenant_rekey.  Inline: it runs for every
 * token, and only a tenant-key order has anything to do. */
static inline void eng_tenant_rekey(struct engine *e, struct instance *in,
				    const struct request *r)
{
	if (in->wq.kind == WAITQ_TENANT)
		waitq_tenant_rekey(&in->wq, r, e->now);
}
/* EV_SCHEDULE: form and start in's next step if it is idle. */
int eng_on_schedule(struct engine *e, struct instance *in, struct ss_error *err);
/* EV_STEP_DONE: account in's finished step, emit tokens, finish or hand
 * off requests, and ask for the next step. */
int eng_on_step_done(struct engine *e, struct instance *in, struct ss_error *err);

/* ---- engine-lora.c: multi-LoRA serving (lora.h) -------------------------- */

/* At setup, once the pools' cost models exist: each instance prices its
 * adapter GEMMs from its pool's cost model's measured adapter kernels
 * where it has them (cost_model_lora_kernel), else from the roofline's
 * priors.  Only with e->lora. */
void eng_lora_setup(struct engine *e);
/* Which backend prices a pool's adapter GEMMs: its cost model's name
 * where that measured them, else "roofline" (the run's op_backend). */
const char *eng_lora_backend(const struct pool *pl);
/* Hook 1: narrow in->view's waiting queue to the requests the batch
 * policy may admit under max_loras (after offer_kv_first and the shape's
 * view).  0 or -ENOMEM.  Only with e->lora. */
int eng_lora_view(struct engine *e, struct instance *in);
/* Hook 2, before the executor runs the step in flight (fl_*): its adapters
 * made resident (lora_step); for an executor that runs adapters
 * (runs_lora), each item's adapter, slot and loads in fl_xreq, else their
 * loads and GEMMs priced.  Only with in->lora. */
int eng_lora_admit(struct instance *in, struct ss_error *err);
/* ... and after: the priced loads (blocking, the GPU idle) and GEMMs
 * (COST_OP_LORA, at the step's power) added to xr; or, measured by the
 * executor, only to the stats. */
int eng_lora_price(struct instance *in, struct exec_result *xr, struct ss_error *err);

/* ---- engine-disagg.c: disaggregation ------------------------------------- */

/* Start the transfers queued for decode instance d while it has room. */
int eng_start_transfers(struct engine *e, struct instance *d, struct ss_error *err);
/* r finished its prefill on p: pair it with a decode instance. */
int eng_handoff(struct engine *e, struct instance *p, struct request *r, struct ss_error *err);
/* Pipeline parallelism: the time, ns, to move bytes of activations from
 * stage s to stage s + 1 of in (docs/cost-models.md): NVLink when both
 * stages' GPUs sit in one node of gpus_per_node, else the inter-node link
 * (gpu_spec.rdma_bw, RDMA latency), each of the tp GPUs of the stage
 * sending 1/tp of them (vLLM's send_tensor_dict with an all-gather group),
 * plus the link's latency.  -ERANGE when it does not fit. */
int eng_pp_link_ns(const struct engine *e, const struct instance *in, int s, double bytes,
		   int64_t *ns, struct ss_error *err);
/* EV_XFER_DONE: r's KV has arrived on its decode instance. */
int eng_on_xfer_done(struct engine *e, struct request *r, struct ss_error *err);

#endif
