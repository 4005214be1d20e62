/* servesim — a request's life in the engine.
 *
 * struct request embeds the policy-visible struct req_view as its first
 * member; the engine hands policies pointers to that view only.  Everything
 * after it is engine state.  A struct request exists only while its request
 * is in the run (from its arrival until it finishes or is rejected; the
 * engine reuses them), so memory follows the requests in flight, not the
 * workload.  What analysis/ reads after a run is struct req_record, one per
 * workload request, written when the request leaves.  All times are int64
 * ns from the first arrival; a time that did not happen is -1.
 */
#ifndef SS_REQUEST_H
#define SS_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "evq.h"
#include "lora-wait.h"
#include "policy.h"
#include "waitq.h"

/* A request's KV state, which only the KV manager (kvm.h) writes and
 * frees (kvm_req_release): its block table, blocks[0 .. v.kv_blocks) block
 * ids in its instance's pool (room for cap); its prefix-cache chain, the
 * first hashed blocks registered (or found) in the cache under chained
 * hashes ending in hash_last; and, disaggregated, its decode instance's
 * blocks xfer[0 .. xfer_n) while the KV is on its way. */
struct kvm_req {
	int32_t *blocks;
	int32_t cap;
	int32_t hashed;
	uint64_t hash_last;
	int32_t *xfer;
	int32_t xfer_n;
};

struct request {
	struct req_view v;          /* must stay first */
	int32_t output_tokens;      /* the truth from the workload */
	int32_t instance;           /* index of the instance it was routed to, -1 before */
	int32_t tenant_id;          /* the source's tenant id (v.tenant is a dense index) */
	/* Disaggregation: where it was prefilled; from its prefill's end
	 * (handoff) to joining its decode instance's queue. */
	int32_t prefill_instance;
	int64_t handoff_ns, kv_xfer_ns;
	int64_t last_step_ns;       /* duration of the last step it was in */
	struct event ev_xfer;
	int64_t first_sched_ns;     /* first time any of its tokens entered a step */
	int64_t first_token_ns;     /* first output token emitted */
	int64_t last_token_ns;      /* latest output token emitted */
	int64_t finish_ns;          /* last output token emitted (= finish) */
	int64_t max_gap_ns;         /* longest gap between two of its output tokens */
	double energy_j;            /* share of step energy, by tokens in each step */
	const char *reject_reason;  /* static string when state is REQ_REJECTED */
	uint32_t spec_verifies;     /* speculative decoding: its steps that verified drafts */
	uint32_t spec_accepted;     /* ... and the drafts they accepted */
	struct kvm_req kv;          /* its KV (the KV manager's: kvm.h) */
	uint32_t flags;             /* engine-private bits */
	int32_t adapter;            /* multi-LoRA (lora.h): its adapter, -1 = the base model
				     * (beside flags: the struct's padding holds it) */
	struct waitq_node wq;       /* its place in a waiting queue (waitq.h) */
	struct lora_wnode lw;       /* multi-LoRA: its place in the queue's adapter index */
	uint32_t slot;              /* its place in the engine's pool of in-flight requests */
	struct request *next_free;  /* the pool's free list, or the retired list */
};

/* What a run keeps of each request (engine_results.req, workload order):
 * the fields the metrics, outputs and tests read: 120 bytes, against
 * the in-flight struct request's 304. */
struct req_record {
	int64_t arrival_ns;
	int64_t first_sched_ns;     /* first time any of its tokens entered a step */
	int64_t first_token_ns;     /* first output token emitted */
	int64_t finish_ns;          /* last output token emitted */
	int64_t max_gap_ns;         /* longest gap between two of its output tokens */
	int64_t kv_xfer_ns;         /* disaggregation: handoff to decode queue, -1 = none */
	double energy_j;            /* share of step energy, by tokens in each step */
	const char *reject_reason;  /* static string when state is REQ_REJECTED */
	uint32_t id;                /* index in the workload */
	int32_t tenant;             /* dense tenant index (engine_results.tenant_ids) */
	int32_t tenant_id;          /* the source's tenant id */
	int32_t priority;           /* larger = more important */
	int32_t instance;           /* instance it was routed to, -1 = none */
	int32_t prefill_instance;   /* disaggregation: where it was prefilled, -1 = none */
	int32_t prompt_tokens;
	int32_t output_tokens;      /* the truth from the workload */
	int32_t generated_tokens;   /* output tokens emitted */
	int32_t preemptions;
	int32_t cached_tokens;      /* prompt tokens found in the prefix cache at its last lookup */
	uint32_t spec_verifies;     /* speculative decoding: steps that verified its drafts */
	uint32_t spec_accepted;     /* ... and the drafts they accepted */
	int32_t adapter;            /* multi-LoRA (lora.h): its adapter, -1 = none */
	enum req_state state;       /* REQ_FINISHED or REQ_REJECTED after a complete run */
};

static inline struct request *request_of(const struct req_view *v)
{
	return (struct request *)((char *)v - offsetof(struct request, v));
}

#endif
