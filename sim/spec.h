/* servesim — speculative decoding in the engine: what drafts, how many
 * tokens, what a step of it costs and what it emits (issue 32,
 * docs/speculation.md).
 *
 * The engine's side of one speculative decode step for a sequence:
 *   1. after a step emits its token, the sequence carries spec_tokens = k
 *      draft tokens (req_view.spec_tokens): its pending tokens are then its
 *      last token plus the drafts, which the batch policy schedules like any
 *      other tokens (they count against the step's token budget, as vLLM's
 *      scheduler counts num_scheduled_spec_tokens);
 *   2. the step verifies them: one target forward over 1 + k query tokens
 *      at the sequence's context (the cost model prices the item as it
 *      prices any q > 1 item: attention and GEMM rows at the larger count),
 *      or 1 + tree tokens when a tree of candidates is verified;
 *   3. it emits 1 + A tokens at once, A accepted drafts (spec_accept_draw
 *      from a uniform that is a hash of the run's seed, the request and its
 *      output position: deterministic, independent of the batch), and the
 *      k - A rejected positions are taken back from computed_tokens (their
 *      KV slots are written over by the next step; the blocks stay the
 *      request's, as vLLM keeps them);
 *   4. the drafter runs for the next step: k sequential passes of the draft
 *      (the draft model; the target's one-layer slice for eagle, eagle3 and
 *      mtp; one pass for medusa's heads; none for ngram), priced by a cost
 *      model of the draft at the step's batch and added to the step's time.
 *
 * Decision: speculation is a request's pending tokens plus one hook at
 * each end of a step (spec_item_verify, spec_draft_cost), not a step kind
 * of its own, so every batch policy that schedules pending tokens
 * schedules verification as engines do, and chunked prefill and
 * speculation share one step.  Rejected: a separate verify phase in the
 * scheduler (a branch in every policy).
 */
#ifndef SS_SPEC_H
#define SS_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"
#include "precision.h"
#include "spec-accept.h"
#include "ss-error.h"

enum spec_method {
	SPEC_DRAFT,      /* a separate (smaller) model, its own weights and KV */
	SPEC_EAGLE,      /* a one-layer head on the target's hidden states */
	SPEC_EAGLE3,
	SPEC_MTP,        /* the model's own multi-token-prediction layer(s) */
	SPEC_MEDUSA,     /* parallel heads: one pass drafts all k */
	SPEC_NGRAM,      /* prompt lookup: no draft compute */
	SPEC_METHODS
};

#define SPEC_MAX_CLASSES 8   /* most acceptance classes (tenants) of one --spec */

/* A resolved --spec: immutable during a run (engine_config.spec). */
struct spec_config {
	enum spec_method method;
	int k;                       /* draft tokens per step, 1..SPEC_MAX_K */
	int tree;                    /* candidate tokens verified per sequence, k.. (k: a chain) */
	int max_batch;               /* no drafts in a step of more running sequences; 0 = no limit */
	struct spec_accept accept;   /* the acceptance model */
	double p[SPEC_MAX_K];        /* its cumulative per-position acceptance at k */
	/* Acceptance classes (accept_tenant=T:NAME/...): the requests of
	 * source tenant class_tenant[i] accept by class_accept[i] (cumulative
	 * class_p[i]); every other request by accept above. */
	int n_classes;
	int32_t class_tenant[SPEC_MAX_CLASSES];
	struct spec_accept class_accept[SPEC_MAX_CLASSES];
	double class_p[SPEC_MAX_CLASSES][SPEC_MAX_K];
	/* What drafts: the draft model (SPEC_DRAFT) or the target's slice
	 * of one layer (eagle, eagle3, mtp, medusa); unused for ngram. */
	struct model_spec draft;
	bool draft_priced;           /* draft passes cost time (all but ngram) */
	int draft_passes;            /* sequential draft passes per step: k, 1 for medusa */
	char text[256];              /* the --spec text, for summaries */
};

/* Parse --spec (docs/speculation.md):
 *   METHOD:k=K[,tree=N][,draft=MODEL][,accept=NAME|alpha=A[,decay=D]]
 *         [,accept_tenant=T:NAME/T:NAME...][,max_batch=N]
 * target: the served model; cat: models for draft=, acceptance entries
 * for accept=.  The acceptance default is the catalog entry for this
 * method and target when there is one, else the method's median
 * (spec_config_parse says which in *c's accept.name).  0, or -EINVAL
 * with one line naming the key and what was expected. */
int spec_config_parse(struct spec_config *c, const char *arg, const struct catalog *cat,
		      const struct model_spec *target, struct ss_error *err);

/* "method" names, SPEC_METHODS of them. */
const char *spec_method_name(enum spec_method m);

/* The --spec keys (KEY=ARG: help), for the parser, help and docs; ends
 * with a NULL key. */
struct spec_key_doc {
	const char *key, *arg, *help;
};
extern const struct spec_key_doc spec_keys[];

/* The cumulative acceptance a request of source tenant `tenant` draws
 * from: its class's, else the --spec's. */
static inline const double *spec_accept_of(const struct spec_config *c, int32_t tenant)
{
	for (int i = 0; i < c->n_classes; i++)
		if (c->class_tenant[i] == tenant)
			return c->class_p[i];
	return c->p;
}

/* Accepted drafts of one verify of `drafted` tokens (<= c->k) for the
 * request `id` at output position `pos`, from the run's seed and the
 * cumulative acceptance p (spec_accept_of): 0..drafted. */
int spec_accept_count(const double *p, uint64_t seed, uint32_t id, int32_t pos, int drafted);

/* Draft tokens a sequence proposes for its next step when `running`
 * sequences are in its instance (the dynamic rule, max_batch): its
 * candidates (tree; k for a chain) or 0. */
static inline int32_t spec_propose(const struct spec_config *c, uint32_t running)
{
	return c->max_batch > 0 && running > (uint32_t)c->max_batch ? 0 : c->tree;
}

/* Weights the drafter adds to each GPU of a tp-way instance, bytes (the
 * draft model's, or the slice's layer; shared embeddings and LM head
 * are the target's), and the KV bytes per token it keeps, all layers,
 * before tp. */
double spec_draft_weight_bytes(const struct spec_config *c, enum ss_dtype weight_dtype);
double spec_draft_kv_bytes_per_token(const struct spec_config *c, enum ss_dtype kv_dtype);

/* What speculation did on one instance (instance_stats.spec). */
struct spec_stats {
	uint64_t verifies;           /* sequence-steps that verified drafts */
	uint64_t drafted;            /* draft tokens verified */
	uint64_t accepted;           /* ... of them accepted */
	uint64_t spec_emitted;       /* tokens emitted by verifies (accepted + the target's own) */
	uint64_t draft_passes;       /* draft forward passes run */
	int64_t draft_ns;            /* step time spent drafting, ns */
	double draft_energy_j;
	int64_t verify_ns;           /* the target's time in steps that verified drafts, ns */
	double rejected_energy_j;    /* step energy of the rejected draft positions (by token share), J */
};

/* Sum b into a. */
void spec_stats_add(struct spec_stats *a, const struct spec_stats *b);

#endif
