/* servesim — the KV manager: every tier of a run's KV cache behind one
 * narrow interface (docs/kv-cache.md), as vLLM v1's KVCacheManager stands
 * beside its Scheduler.
 *
 * One struct kvm per engine owns:
 *   - each instance's GPU block pool (sim/kvpool.h) and the KV-time
 *     integral and peak of its use;
 *   - the prefix cache: the chained hash of each block from the workload's
 *     prefix hashes, lookup of a waiting request's longest cached prefix
 *     (pinning the GPU blocks found), registration of blocks as they fill;
 *   - swap preemption (--preemption swap): preempted KV goes to the
 *     instance's host memory over PCIe and comes back when it resumes;
 *   - the host tier (--kv-offload, kvm-host.c): cached blocks the GPU
 *     evicts are kept in host memory and loaded back on a hit;
 *   - the remote store shared by all instances (--kv-remote, kvm-remote.c);
 *   - the price of the transfers a step waits for, under the engine
 *     profile's kv_load rule.
 * The engine gives it what it needs to know through struct kvm_config and
 * struct kvm_inst_config (block size, bytes per block, links, its clock,
 * its counters); it never reads the engine's state.  The scheduler calls
 * it with a request at each point of the request's life: lookup while
 * waiting, enter when a step takes it, grow, register when a step ends,
 * preempt, finish or drop.
 *
 * A request carries its part of the manager, struct kvm_req (request.h:
 * its block table and prefix-cache chain), beside v.kv_blocks,
 * v.host_blocks and the RF_LOOKED bit below; only the manager writes them
 * (the disaggregation unit moves a table between instances with
 * kvm_xfer_reserve and kvm_xfer_arrive) and frees them (kvm_req_release).
 */
#ifndef SS_KVM_H
#define SS_KVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "ss-error.h"
#include "executor.h"
#include "request.h"

struct kvpool;

struct kvm;
struct kvm_inst;

/* request.flags bit the manager owns: a waiting request holding the blocks
 * its prefix-cache lookup found (kvm_lookup .. kvm_enter or kvm_unpin). */
#define RF_LOOKED 4u

/* What the KV options say (--prefix-cache, --preemption, --kv-offload),
 * parsed once, before any instance exists. */
struct kvm_opts {
	bool prefix_cache;        /* the prefix cache is on (or --kv-offload turned it on) */
	int32_t cache_cap;        /* evictable cached blocks kept per instance, 0 = the pool */
	bool swap;                /* preempted KV is swapped to host memory */
	bool offload;             /* a host tier keeps evicted cached blocks */
	double host_gb;           /* host memory per GPU for swap and the tier, GB */
	double link_gbps;         /* PCIe per GPU, GB/s; 0 = the catalog's */
};

/* Parse cfg's prefix_cache, preemption and kv_offload into *o, in that
 * order; 0 or -EINVAL (err says which option and why). */
int kvm_opts_parse(struct kvm_opts *o, const struct engine_config *cfg, struct ss_error *err);

/* The engine facts the manager works with. */
struct kvm_config {
	const struct workload *wl;  /* prefix hashes of the requests (transfer none) */
	const int64_t *now;         /* the engine's clock, ns (transfer none) */
	uint32_t n_inst;            /* instances */
	int32_t block_size;         /* tokens per KV block, >= 1 */
	int32_t n_layers;           /* the model's layers (pricing a layerwise load) */
	int kv_load;                /* enum engine_kv_load: how a step waits for loaded KV */
	const char *kv_remote;      /* --kv-remote, NULL = no remote store */
	double remote_block_bytes;  /* a whole-model block's bytes, for the store's capacity */
};

/* One instance's facts. */
struct kvm_inst_config {
	int32_t blocks;             /* GPU KV blocks */
	double block_bytes;         /* bytes of one block on the whole instance */
	int tp, pp;                 /* GPUs per pipeline stage, stages (>= 1) */
	const struct gpu_spec *gpu; /* PCIe, RDMA NIC, idle power (transfer none) */
	struct instance_stats *st;  /* its counters, which the manager adds to (transfer none) */
};

/* A manager of c->n_inst instances, none set up yet; parses c->kv_remote.
 * 0, -EINVAL (err: a bad --kv-remote) or -ENOMEM. */
int kvm_new(struct kvm **out, const struct kvm_config *c, const struct kvm_opts *o,
	    struct ss_error *err);
/* Set up instance i (once each, i < n_inst): its pool, its host space and
 * tier; *out its part of the manager (transfer none).  0 or -ENOMEM. */
int kvm_inst_init(struct kvm *m, uint32_t i, const struct kvm_inst_config *ic,
		  struct kvm_inst **out, struct ss_error *err);
/* Accepts NULL. */
void kvm_free(struct kvm *m);
/* Bytes of one instance's part, besides its pool's arrays (the engine's
 * memory estimate). */
size_t kvm_inst_bytes(void);

/* ---- what the engine reads ------------------------------------------------ */

bool kvm_caching(const struct kvm *m);   /* the prefix cache is on */
bool kvm_swapping(const struct kvm *m);  /* preemption swaps */
/* The remote store's counters; NULL without one. */
const struct kv_remote_stats *kvm_remote_stats(const struct kvm *m);
/* Instance i's part (transfer none). */
struct kvm_inst *kvm_inst(struct kvm *m, uint32_t i);

int32_t kvm_free_blocks(const struct kvm_inst *ki);  /* free + evictable cached */
int32_t kvm_total_blocks(const struct kvm_inst *ki);
int32_t kvm_used_blocks(const struct kvm_inst *ki);
/* Blocks that hold tokens tokens. */
int32_t kvm_blocks_for(const struct kvm_inst *ki, int64_t tokens);
/* Whether swaps wait to be priced into the next step. */
bool kvm_swap_pending(const struct kvm_inst *ki);
/* Blocks swapped out to ki's host memory, and its host space, blocks. */
int64_t kvm_swapped_blocks(const struct kvm_inst *ki);
int64_t kvm_host_capacity(const struct kvm_inst *ki);
/* Whether instance inst's host tier holds block h. */
bool kvm_host_holds(const struct kvm *m, uint32_t inst, uint64_t h);
/* The counters ki adds to (kvm_inst_config.st). */
const struct instance_stats *kvm_inst_stats(const struct kvm_inst *ki);
/* ki's GPU pool (transfer none): tests watch its evictions. */
struct kvpool *kvm_inst_pool(struct kvm_inst *ki);

/* The router's view (policy_host.prefix_hit): tokens of r's prompt cached
 * for instance inst: blocks on its GPU or host in full, blocks only in the
 * remote store half.  Touches nothing (no LRU order moves). */
int32_t kvm_prefix_hit(const struct kvm *m, uint32_t inst, const struct request *r);

/* ---- a request's KV through its life -------------------------------------- */

/* The end of a run: the integral up to now, the pool's eviction count. */
void kvm_inst_flush(struct kvm_inst *ki);

/* Waiting r, holding nothing, takes its longest cached prefix: GPU blocks
 * are pinned now; blocks further on in host memory and the remote store
 * count as computed and are taken when it enters a step.  0 or -ENOMEM. */
int kvm_lookup(struct kvm_inst *ki, struct request *r);
/* Give back the blocks a waiting request's lookup pinned (its computed
 * tokens go back to 0); whether it held any lookup. */
bool kvm_unpin(struct kvm_inst *ki, struct request *r);
/* r enters a step for tokens more tokens: its host hits are loaded, its
 * table grows to hold them, its swapped-out KV comes back, its lookup's
 * hits are counted and its remote blocks fetched (the transfers are priced
 * by kvm_price).  0, -ENOMEM or -ENOSPC (fewer blocks free than needed). */
int kvm_enter(struct kvm_inst *ki, struct request *r, int32_t tokens, bool from_wait);
/* Allocate need more blocks for r: 0, -ENOMEM or -ENOSPC. */
int kvm_grow(struct kvm_inst *ki, struct request *r, int32_t need);
/* Register r's blocks that have become full of computed tokens (nothing
 * without the prefix cache). */
void kvm_register(struct kvm_inst *ki, struct request *r);
/* Running r is preempted: its KV is swapped out when there is room on
 * host, else dropped (computed_tokens 0: recompute); its blocks go back. */
void kvm_preempt(struct kvm_inst *ki, struct request *r);
/* r has finished: its blocks go back and its table is freed. */
void kvm_finish(struct kvm_inst *ki, struct request *r);
/* Waiting r leaves the run: its pinned, held and swapped blocks go back. */
void kvm_drop(struct kvm_inst *ki, struct request *r);

/* Free a request's tables (a request leaving the run, or the engine
 * freed with requests in flight); accepts a zeroed one. */
void kvm_req_release(struct kvm_req *q);

/* The transfers of the step priced into *xr (duration_ns, energy_j): swaps
 * and host loads before the kernels (or, for loads, under them, as the
 * profile's kv_load says), stores by what outlasts the step, the remote
 * fetch; they are then cleared.  0, -ERANGE (a time past the range) or
 * -ENOMEM (a tier could not grow since the last step). */
int kvm_price(struct kvm_inst *ki, struct exec_result *xr, struct ss_error *err);

/* ---- disaggregation: KV that moves between instances ----------------------- */

/* need blocks on ki for r's KV on its way (r->kv.xfer).  0, -ENOMEM or
 * -ENOSPC (fewer than need free). */
int kvm_xfer_reserve(struct kvm_inst *ki, struct request *r, int32_t need);
/* r's KV has arrived: it gives back its blocks on the instance it came
 * from (from) and holds those kvm_xfer_reserve took. */
void kvm_xfer_arrive(struct kvm_inst *from, struct request *r);

#endif
