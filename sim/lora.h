/* servesim — multi-LoRA serving: one base model, many low-rank adapters
 * (issue 33 §1, docs/lora.md).
 *
 * The component owns everything adapters add to a run:
 *   - the catalog: how many adapters, each one's rank (rank=R, or a mix of
 *     ranks drawn per adapter), its bytes from the model's shapes and the
 *     target modules (A is d_in x r, B is r x d_out per module and layer);
 *   - the draws: which adapter each request names (a trace's adapter
 *     column, else a seeded draw from the popularity law), a hash of the
 *     run's seed and the request's index, so independent of the batch and
 *     of every other random stream;
 *   - per instance: the GPU adapter cache (max_loras slots, LRU), host
 *     residency (max_cpu_loras, LRU; a host miss is read from storage), and
 *     the loads a step waits for (PCIe time from the GPU catalog's host
 *     link bandwidth, blocking: vLLM activates a step's adapters before its
 *     forward);
 *   - the adapters' GEMMs of a step (shrink x A, expand x B per target
 *     module and layer, SGMV-style: each distinct adapter's A and B read
 *     once, each token's rows at its adapter's rank), priced from the GPU's
 *     roofline with a launch per kernel, or from the device's measured
 *     adapter kernels where the cost model has them (lora_inst_set_kernel),
 *     as an operator of their own (COST_OP_LORA).
 *
 * How the engine asks it (three hooks, nothing in the batch policies):
 *   1. lora_filter(), before the batch policy plans: the waiting requests
 *      the policy may see are those whose adapter the running set already
 *      uses, or, while the running set and the admissions before them in
 *      queue order name fewer than max_loras adapters, a new one.  So no
 *      step can hold more than max_loras distinct adapters (vLLM's rule:
 *      its scheduler skips a waiting request whose adapter would be one
 *      too many) and every policy respects it unchanged.
 *   2. lora_step(), when a step is priced: its distinct adapters are made
 *      resident (loads, LRU evictions) and its load and GEMM times added.
 *   3. lora_adapter_of(), at arrival: the request's adapter.
 *
 * Decision: a view filter rather than a policy parameter or a check in
 * each policy: the rule is the engine's (an adapter that is not in a GPU
 * slot cannot run), and policies never learn about adapters, as they never
 * learn about the KV manager's tiers.  Rejected: counting adapters in
 * pick_step (a branch in every policy), and refusing a plan after the fact
 * (a policy would plan the same step again).  The filter reserves a slot
 * for a waiting request's adapter in queue order even if the policy then
 * does not pick that request (its budget ran out); vLLM adds an adapter
 * only when it schedules the request, which for a FCFS queue that stops
 * at the first request that does not fit is the same set.
 */
#ifndef SS_LORA_H
#define SS_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"
#include "kvpool.h"
#include "lora-wait.h"
#include "precision.h"
#include "ss-error.h"

#define LORA_MAX_RANKS 8               /* classes of a rank mix */
#define LORA_MAX_ADAPTERS 1000000u
#define LORA_MAX_RANK 1024

enum lora_popularity {
	LORA_POP_UNIFORM,                  /* every adapter alike */
	LORA_POP_ZIPF,                     /* adapter i (0-based) with weight 1 / (i + 1)^s */
};

enum lora_targets {
	LORA_TARGET_QKVO,                  /* q, k, v, o projections (S-LoRA's, PEFT's usual) */
	LORA_TARGET_ALL,                   /* and the MLP's gate, up and down (dense models) */
};

/* A resolved --lora: immutable during a run (engine_config.lora). */
struct lora_config {
	uint32_t n_adapters;               /* 1 .. LORA_MAX_ADAPTERS */
	int n_ranks;                       /* 1 .. LORA_MAX_RANKS classes */
	int32_t rank[LORA_MAX_RANKS];      /* 1 .. LORA_MAX_RANK */
	double share[LORA_MAX_RANKS];      /* of the adapters, summing to 1 */
	int32_t max_rank;                  /* largest of rank[]: a GPU slot's size */
	enum lora_popularity popularity;
	double zipf_s;                     /* Zipf exponent, > 0 */
	int32_t max_loras;                 /* GPU slots: most distinct adapters in a step */
	uint32_t max_cpu_loras;            /* adapters host memory holds, >= max_loras */
	enum lora_targets targets;
	double disk_bw;                    /* a host miss reads the adapter at this, bytes/s */
	bool from_trace;                   /* adapters= not given: the trace's column sets them */
	bool unified;                      /* paging=unified: adapters take pages of the KV pool
					    * (S-LoRA's unified paging), no slots, no max_loras */
	bool rank_cycle;                   /* rank_order=cycle: adapter i has rank[i mod n_ranks] */
	char text[256];                    /* the --lora text, for summaries */
};

/* The --lora keys (KEY=ARG: help), for the parser, help and docs; ends
 * with a NULL key. */
struct lora_key_doc {
	const char *key, *arg, *help;
};
extern const struct lora_key_doc lora_keys[];

/* Parse --lora (docs/lora.md):
 *   adapters=N,rank=R|mix=R:W/R:W...[,popularity=zipf:S|uniform]
 *   [,max_loras=N][,max_cpu_loras=N][,targets=qkvo|all][,disk_gbps=B]
 * 0, or -EINVAL with one line naming the key and what was expected. */
int lora_config_parse(struct lora_config *c, const char *arg, struct ss_error *err);

/* Bytes of one adapter of rank r on model m (A and B of every target
 * module of every layer, in the model's dtype_bytes: adapters are not
 * quantised with --weight-dtype), whole model. */
double lora_adapter_bytes(const struct lora_config *c, const struct model_spec *m, int32_t r);

/* GPU memory the adapter slots take per GPU of a tp-way instance, bytes:
 * max_loras slots of max_rank (vLLM preallocates its LoRA stacks at
 * max_lora_rank), sharded tp ways. */
double lora_gpu_bytes(const struct lora_config *c, const struct model_spec *m, int tp);

/* 0, or -EINVAL with one line when model m cannot carry c's adapters
 * (MLA attention; targets=all on a MoE model). */
int lora_model_check(const struct lora_config *c, const struct model_spec *m,
		     struct ss_error *err);

/* ---- a run's adapters --------------------------------------------------- */

struct lora;        /* the catalog and draws of one run */
struct lora_inst;   /* one instance's caches */

/* The run's adapters: each one's rank (drawn from the mix with the seed),
 * and the popularity law's table.  trace_max: the largest adapter id a
 * trace names (-1: none); with adapters= not given it sets the count.
 * -EINVAL (err: a trace id beyond adapters=) or -ENOMEM. */
int lora_new(struct lora **out, const struct lora_config *c, const struct model_spec *m,
	     uint64_t seed, int32_t trace_max, struct ss_error *err);
void lora_free(struct lora *l);

const struct lora_config *lora_config_of(const struct lora *l);
uint32_t lora_count(const struct lora *l);
int32_t lora_rank(const struct lora *l, int32_t adapter);
/* Bytes of adapter a, whole model. */
double lora_bytes(const struct lora *l, int32_t adapter);

/* The adapter of the workload's request `index`: trace_adapter when the
 * trace names one (>= 0), else a draw from the popularity law (a hash of
 * the seed and the index). */
int32_t lora_adapter_of(const struct lora *l, uint64_t index, int32_t trace_adapter);

/* What one instance's adapters did (instance_stats.lora). */
struct lora_stats {
	uint64_t steps;                    /* steps with adapters */
	uint64_t adapter_steps;            /* sum over steps of distinct adapters */
	uint64_t hits, misses;             /* a step's adapter found in / loaded to a GPU slot */
	uint64_t host_misses;              /* ... of the misses, read from storage first */
	uint64_t evictions;                /* GPU slots given to another adapter */
	double load_bytes;                 /* host to GPU, bytes */
	int64_t load_ns;                   /* step time spent waiting for loads, ns */
	int64_t gemm_ns;                   /* the adapters' GEMMs (COST_OP_LORA), ns */
	uint32_t peak_adapters;            /* most distinct adapters in one step */
};

void lora_stats_add(struct lora_stats *a, const struct lora_stats *b);

/* An instance's caches, empty; gpu: its type (host link, FLOP/s, memory
 * bandwidth), tp: its GPUs.  -ENOMEM. */
int lora_inst_new(struct lora_inst **out, const struct lora *l, const struct gpu_spec *gpu,
		  int tp, struct lora_stats *st);
void lora_inst_free(struct lora_inst *li);
/* Price li's adapter GEMMs from measurements k (costmodel.h: the cost
 * model's fit of `calibrate run`'s lora rows) instead of the roofline's
 * priors: a module group's call (shrink and expand) costs k's per-call and
 * per-adapter terms plus its bytes and FLOPs at k's measured rates. */
struct cost_lora_kernel;
void lora_inst_set_kernel(struct lora_inst *li, const struct cost_lora_kernel *k);
/* Were li's GEMMs priced from measurements (lora_inst_set_kernel)? */
bool lora_inst_measured(const struct lora_inst *li);
/* The run's adapters li serves (transfer none). */
const struct lora *lora_inst_catalog(const struct lora_inst *li);

/* The running set's adapters, kept by the engine where a request joins
 * it (start_step) and where one leaves it (running_compact): a count per
 * adapter, so the filter below need not scan the running set.  a < 0
 * (the base model) is ignored. */
void lora_run_enter(struct lora_inst *li, int32_t a);
void lora_run_leave(struct lora_inst *li, int32_t a);

/* Hook 1, first-come-first-served: index li's waiting queue by adapter
 * (lora-wait.h), the engine telling the index of each join and leave, so
 * that the view costs what changed (lora_wait_view); len: the most waiting
 * requests the batch policy reads.  Before any request runs.  -ENOMEM. */
int lora_inst_index_queue(struct lora_inst *li, uint32_t len);
/* The index, NULL when li's queue is not indexed. */
struct lora_wait *lora_inst_wait(const struct lora_inst *li);

/* Hook 1, the reference (and any other queue order, the whole queue
 * sorted).  Of waiting[0 .. n) (the view's order), copy into out those the
 * batch policy may admit (see above), given the running set's adapters
 * (lora_run_enter); adapter_of maps a view to its adapter.  Returns how
 * many.  O(n). */
typedef int32_t (*lora_adapter_fn)(const void *view);
uint32_t lora_filter(struct lora_inst *li, const void *const *waiting, uint32_t n,
		     const void **out, lora_adapter_fn adapter_of);

/* Hook 2.  A step of n items, item k of tokens[k] tokens for adapter
 * adapters[k] (-1: the base model alone): make its distinct adapters
 * resident (LRU; each GPU-resident adapter holds one of the max_loras
 * slots, lora_slot), and say the time, ns, its loads block it (*load_ns)
 * and its adapter GEMMs take (*gemm_ns), added to the stats.  load_ns and
 * gemm_ns NULL: residency only, nothing priced (an executor that runs the
 * adapters measures them; the caller adds its times to the stats).
 * -EPROTO (err) when the step names more than max_loras adapters, -ERANGE
 * when a time does not fit. */
int lora_step(struct lora_inst *li, const int32_t *adapters, const int32_t *tokens, uint32_t n,
	      int64_t *load_ns, int64_t *gemm_ns, struct ss_error *err);
/* The adapters the last lora_step loaded into a GPU slot (its misses), in
 * load order, into *out (transfer none, valid until the next step);
 * returns how many. */
uint32_t lora_step_loads(const struct lora_inst *li, const int32_t **out);
/* The GPU slot adapter a is in, 0 .. max_loras - 1; -1 when none.  A slot
 * keeps its number while its adapter stays; a load takes a free slot (they
 * fill in order) or its evicted adapter's. */
int32_t lora_slot(const struct lora_inst *li, int32_t a);

/* paging=unified (S-LoRA's unified paging, docs/lora.md): li's adapters
 * live in pool, the instance's KV block pool, an adapter of per-GPU bytes
 * B taking ceil(B / block_bytes) blocks (block_bytes: one KV block's bytes
 * on one GPU) while it is resident.  The pages of an adapter no running
 * request uses are lent to the pool (kvpool.reclaim): they count as free,
 * and an allocation short of blocks evicts such adapters, least recently
 * used first.  Once, before any step.  -ENOMEM. */
int lora_inst_page(struct lora_inst *li, struct kvpool *pool, double block_bytes);
/* KV blocks adapter a takes under paging=unified (0 otherwise). */
int32_t lora_pages(const struct lora_inst *li, int32_t a);
/* Hook 1 under paging=unified: of the free blocks the scheduler sees
 * (free_blocks, with the lent pages), those to hold back for the adapters
 * of waiting[0 .. n) (the view's order) that no running request uses: the
 * pages of each distinct such adapter (resident and idle, or to be
 * loaded) named by the requests the free blocks could admit, walking in
 * order while their blocks (blocks_of: what a request's next step needs)
 * and those pages fit.  An upper bound on what the step's loads take for a
 * policy that admits in view order.  O(requests walked). */
typedef int32_t (*lora_blocks_fn)(const void *view, int32_t block_size);
int64_t lora_page_reserve(struct lora_inst *li, const void *const *waiting, uint32_t n,
			  int64_t free_blocks, int32_t block_size, lora_adapter_fn adapter_of,
			  lora_blocks_fn blocks_of);

/* For tests: is adapter a in a GPU slot / in host memory of li? */
bool lora_gpu_resident(const struct lora_inst *li, int32_t a);
bool lora_host_resident(const struct lora_inst *li, int32_t a);
/* The GPU slots' adapters, most recently used first, into out (room for
 * max_loras); returns how many. */
uint32_t lora_gpu_lru(const struct lora_inst *li, int32_t *out);

#endif
