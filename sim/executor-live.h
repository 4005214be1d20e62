/* servesim — the live executor: steps run on a kernel backend.
 *
 * Each step the batch policy forms is executed by a synthetic transformer of
 * the model's shapes (random weights; scaled down on the CPU) through the
 * kernel backend, reading and writing its paged KV cache through the very
 * block tables the engine's KV block manager assigned.  The step's duration
 * is the wall time the executor took, so host work (input preparation,
 * sampling) is included; with the engine's wall clock (struct engine_clock)
 * this is a live run of the same engine and policies as a simulation.
 */
#ifndef SS_EXECUTOR_LIVE_H
#define SS_EXECUTOR_LIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"
#include "executor.h"
#include "ss-error.h"

struct live_config {
	const struct model_spec *model;
	const char *backend;     /* "cpu" | "cuda" */
	int threads;             /* CPU threads, >= 1 */
	int width_div;           /* divide model widths by this (docs/kernels.md) */
	int layers;              /* decoder layers to run, 0 = the model's */
	int32_t kv_blocks;       /* KV blocks of the synthetic cache = the engine's pool */
	int block_size;          /* tokens per block = the engine's */
	uint64_t seed;           /* weights */
	/* An fp8 E4M3 KV cache (--kv-dtype fp8: vLLM's --kv-cache-dtype fp8,
	 * scales 1.0) instead of one of the backend's dtype. */
	bool kv_fp8;
	/* Where the kernel backend's module is looked up first
	 * (kernel_backend_config.module_dir); NULL: the installed one. */
	const char *module_dir;
	/* Root of the powercap tree read for RAPL energy; NULL:
	 * /sys/class/powercap.  Tests point it at a fake tree. */
	const char *powercap_root;
	/* A test hook: step number n (1-based) fails as a kernel error would,
	 * so the failure path is tested without a broken device; 0: never.
	 * The CLI sets it from SERVESIM_LIVE_FAIL_AT_STEP. */
	uint64_t fail_at_step;
	/* CUDA graphs (docs/live.md): on a backend that has graphs, decode-only
	 * steps of up to graph_sizes[n_graph_sizes - 1] sequences are padded to
	 * the smallest of these batch sizes (ascending: the engine profile's
	 * graph_sizes) and replayed as graphs captured before the run; other
	 * steps, and every step on a host backend, run eagerly.  max_kv_len:
	 * the longest KV length a graphed decode may have (the model's context;
	 * longer ones run eagerly).  n_graph_sizes 0: no graphs. */
	const int32_t *graph_sizes;   /* (transfer none) */
	int n_graph_sizes;
	int max_kv_len;
	/* Multi-LoRA (docs/lora.md, "Live"): the synthetic model's adapter
	 * slots (max_loras) and their rank (the largest of the run's);
	 * lora_slots 0: no adapters.  The engine says, per step, each item's
	 * slot and which adapters to load (exec_req's lora fields). */
	int lora_slots;
	int lora_max_rank;
};

struct live_exec;

int live_exec_new(struct live_exec **out, const struct live_config *cfg, struct ss_error *err);
void live_exec_free(struct live_exec *lx);
/* What runs the steps, for the run's record ("cpu: ..."). */
const char *live_exec_describe(const struct live_exec *lx);
/* The backend and its device, "cpu (CPU: ..., 1 thread, OpenBLAS ...)". */
const char *live_exec_device(const struct live_exec *lx);
/* The model as run: "llama-3.2-1b scaled: width/8, 4 of 16 layers
 * (synthetic weights)", or "llama-3.2-1b (synthetic weights)" at full size. */
const char *live_exec_model(const struct live_exec *lx);
/* Whether the steps ran on the host (the cpu backend): no GPU was used, so
 * none is priced. */
bool live_exec_host(const struct live_exec *lx);

/* Energy metered over the run: false when the backend has no readable meter
 * (or a read failed), with *meter saying which meter or why none.  Step
 * energy goes to the engine with each step; *idle_j is what the meter
 * counted between steps. */
bool live_exec_energy(const struct live_exec *lx, double *idle_j, const char **meter);

/* The executor; its priv is the struct live_exec * (engine_config.exec_priv). */
extern const struct executor_ops executor_live_ops;

#endif
