/* servesim — the KV manager's private state, shared by its units (not
 * installed; the public interface is kvm.h):
 *   kvm.c         options, setup, the GPU pools, the prefix cache, swap,
 *                 a request's KV through its life, pricing a step's loads;
 *   kvm-host.c    the host tier of cached blocks (--kv-offload);
 *   kvm-remote.c  the remote store shared by all instances (--kv-remote).
 * Functions one unit offers another carry the kvm_ prefix and are declared
 * here.  Nothing here includes the engine's private header: what the
 * manager knows of the engine came through struct kvm_config and struct
 * kvm_inst_config.
 */
#ifndef SS_KVM_INT_H
#define SS_KVM_INT_H

#ifdef SS_ENGINE_INT_H
#error "the KV manager's units see the engine through their config structs, never engine-int.h"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "costmodel.h"
#include "kvm.h"
#include "kvpool.h"
#include "kvtier.h"

/* Fixed cost of one PCIe transfer of KV (a batch of cudaMemcpyAsync calls:
 * a swap, or a request's loads from host memory), ns. */
#define SWAP_LATENCY_NS 20000

/* One instance's part of the manager. */
struct kvm_inst {
	struct kvm *m;
	uint32_t idx;             /* the instance's index */
	struct kvpool pool;       /* GPU blocks */
	struct instance_stats *st;
	double block_bytes;       /* bytes of one block, whole instance */
	int tp;                   /* GPUs per pipeline stage */
	int stage_layers;         /* layers of one pipeline stage (kv_load pricing) */
	const struct gpu_spec *gpu;
	int64_t mark_ns;          /* last time st->kv_block_ns was brought up to date */
	/* Host memory (swap and the host tier share it) and its PCIe link. */
	int64_t host_cap;         /* blocks, 0 without swap */
	double pcie_bw;           /* bytes/s, whole instance */
	int64_t swapped;          /* blocks of swapped-out KV held there */
	double xfer_bytes;        /* swaps (out and in) to charge to the next step, bytes */
	uint32_t n_xfers;         /* and their transfers */
	/* The host tier (--kv-offload, kvm-host.c). */
	struct kvtier tier;       /* cached blocks held in host memory */
	double store_bytes;       /* D2H stores since the last priced step, bytes */
	double load_bytes;        /* H2D loads for the next step, bytes */
	uint32_t n_loads;         /* and their transfers (one per request) */
	/* The remote store (kvm-remote.c): bytes its next step fetches first. */
	double remote_pending;
};

/* The remote KV tier shared by every instance (--kv-remote, kvm-remote.c):
 * which blocks it holds (LRU, whole-model blocks), its link to each
 * instance, and its counters. */
struct kv_remote {
	struct kvtier tier;
	double bw_gpu;            /* bytes/s per GPU (each GPU's NIC); x tp per instance; 0 = catalog */
	int64_t latency_ns;       /* per fetch batch; -1 = catalog */
	struct kv_remote_stats st;
};

struct kvm {
	struct kvm_config c;
	struct kvm_opts o;
	struct kvm_inst *inst;    /* c.n_inst */
	/* The host tier's lookups, per in-flight request slot (request.slot):
	 * the blocks its lookup found past its GPU blocks (on host, or on the
	 * GPU past a block the GPU lost), counted as computed but taken only
	 * when it enters a step (kvm_host_load); whose they are (request id);
	 * the chain hash of the block before them. */
	int32_t *pend_n;
	uint32_t *pend_owner;
	uint64_t *pend_prev;
	uint32_t cap_pend, cap_owner, cap_prev;
	int host_err;             /* sticky -ENOMEM from a tier or array that could not grow */
	struct kv_remote *remote; /* NULL = none */
};

/* ---- kvm.c: helpers the units share -------------------------------------- */

/* ns (a computed duration in nanoseconds) truncated to int64; false when
 * it is NaN, negative or does not fit. */
static inline bool kvm_ns_trunc(double ns, int64_t *out)
{
	if (!cost_ns_fits(ns))
		return false;
	*out = (int64_t)ns;
	return true;
}
/* -ERANGE in err: what (printf fmt) would end at end_s seconds, past the
 * simulator's time range (the engine's wording). */
int kvm_time_error(struct ss_error *err, double end_s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The time a load (lat_ns to its first byte, then xfer_ns of bytes) adds
 * to ki's step of step_ns, as the engine profile's kv_load says
 * (engine_kv_load_added_ns over the layers of one pipeline stage). */
int64_t kvm_load_ns(const struct kvm_inst *ki, int64_t step_ns, int64_t lat_ns, int64_t xfer_ns);
/* Chained hash of r's KV block k given block k - 1's (0 for k = 0); never 0. */
uint64_t kvm_block_hash(const struct kvm *m, const struct request *r, int32_t k, uint64_t prev);
/* Most blocks of r a prefix lookup may find. */
int32_t kvm_max_hit_blocks(const struct kvm *m, const struct request *r);
/* The peak of ki's used blocks, after an allocation. */
void kvm_note_peak(struct kvm_inst *ki);
/* Bring ki's KV-time integral (instance_stats.kv_block_ns) up to now. */
void kvm_mark(struct kvm_inst *ki);
/* Give back all of r's blocks. */
void kvm_release(struct kvm_inst *ki, struct request *r);
/* r no longer holds registered or looked-up blocks. */
void kvm_forget(struct request *r);

/* ---- kvm-host.c: the host tier (--kv-offload) ----------------------------- */

/* Parse cfg->kv_offload into o (after --preemption: o->swap). */
int kvm_host_parse(struct kvm_opts *o, const struct engine_config *cfg, struct ss_error *err);
/* ki's tier, once its pool exists; 0 or -ENOMEM. */
int kvm_host_init(struct kvm_inst *ki);
void kvm_host_free(struct kvm *m);
/* Continue r's lookup from block k (chain hash *h of block k-1) up to
 * block n through host memory: returns the blocks found there (or on the
 * GPU past a block it lost), which count as computed but are taken, and
 * loaded, only when r enters a step (kvm_host_load); *h their last hash. */
int32_t kvm_host_lookup(struct kvm_inst *ki, struct request *r, int32_t k, int32_t n, uint64_t *h);
/* r, from the waiting queue, enters a step: take the blocks its lookup
 * found past its GPU blocks, loading those on host (H2D, charged to this
 * step); blocks lost since the lookup end its hit there. */
void kvm_host_load(struct kvm_inst *ki, struct request *r);
/* The router's view: blocks from k on (hash h of k-1) held on GPU or host. */
int32_t kvm_host_hit(const struct kvm_inst *ki, const struct request *r, int32_t k, int32_t n,
		     uint64_t h);
/* Make room for blocks of swapped-out KV by dropping cached host blocks. */
void kvm_host_room(struct kvm_inst *ki, int64_t blocks);
/* KV was swapped out to ki's host memory: its peak use. */
void kvm_host_swapped(struct kvm_inst *ki);
/* Price ki's pending loads and stores into its step *xr. */
int kvm_host_price(struct kvm_inst *ki, struct exec_result *xr, struct ss_error *err);

/* ---- kvm-remote.c: the shared remote store (--kv-remote) ------------------ */

/* Parse c.kv_remote into m->remote; nothing when it is NULL.  -EINVAL (err
 * says why) or -ENOMEM. */
int kvm_remote_setup(struct kvm *m, struct ss_error *err);
void kvm_remote_free(struct kvm *m);
/* How many of r's blocks from block k on (k blocks found before, the last
 * with hash h; 0 when k is 0) the store holds in one chain, at most
 * kvm_max_hit_blocks; touches them (LRU). */
int32_t kvm_remote_lookup(struct kvm *m, const struct request *r, int32_t k, uint64_t h);
/* The same chain without touching: the router's view. */
int32_t kvm_remote_peek(const struct kvm *m, const struct request *r, int32_t k, uint64_t h);
/* r, looked up and now admitted on ki, reads its remote blocks (those past
 * r->kv.hashed of its computed tokens): counted, and their bytes are
 * fetched before ki's step (kvm_remote_charge). */
void kvm_remote_fetch(struct kvm_inst *ki, const struct request *r);
/* Add ki's pending fetch time to a step of *ns (and the GPUs' idle energy
 * to *energy_j); 0, -ERANGE or -ENOMEM. */
int kvm_remote_charge(struct kvm_inst *ki, int64_t *ns, double *energy_j, struct ss_error *err);
/* Write-through: block h, just registered in a GPU cache, is stored. */
void kvm_remote_put(struct kvm *m, uint64_t h);

#endif
