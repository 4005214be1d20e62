/* servesim — calibration sweeps: time (and meter) servesim's own kernels.
 *
 * `servesim calibrate run` times each operator of a model's step over a
 * shape grid on a kernel backend — GEMMs at the model's shapes over token
 * counts, prefill attention over chunk and prior-context lengths, decode
 * attention over batch and KV length, RMSNorm, RoPE and the activation over
 * token counts, and the per-step host overhead of the synthetic step by
 * batch size — with warm-up and repeats, meters energy where a meter exists
 * (calibrate/meter.h), and writes each point to the calibration store with
 * its spread, device and provenance, so the table and fit cost models use it
 * unchanged.  Each operator's points are committed together, and points the
 * store already holds for this device and variant are skipped, so a killed
 * sweep keeps what it finished and a rerun resumes.  docs/calibration.md.
 */
#ifndef SS_SWEEP_H
#define SS_SWEEP_H

#include <signal.h>
#include <stdint.h>

#include "backend.h"
#include "step.h"
#include "store.h"

struct sweep_config {
	const char *backend;          /* "cpu" | "cuda" */
	int threads;                  /* CPU threads */
	struct synth_shape shape;     /* the (possibly scaled) model shapes swept */
	const char *model;            /* catalog name, for the variant and provenance */
	const char *device;           /* store device name, e.g. "cpu" or "h100-sxm" */
	int warmup, repeats;          /* per point, >= 0 and >= 1 */
	int max_tokens;               /* largest token count of a GEMM / chunk */
	int max_kv;                   /* largest KV length of decode attention */
	/* Where the kernel backend's module is looked up first
	 * (kernel_backend_config.module_dir); NULL: the installed one. */
	const char *module_dir;
	/* Root of the powercap tree for RAPL energy; NULL: /sys/class/powercap. */
	const char *powercap_root;
	/* Progress: called after each point (may be NULL). */
	void (*progress)(void *ctx, const char *op, int64_t done, int64_t total);
	void *progress_ctx;
	/* Cancellation (docs/calibration.md): when non-NULL and non-zero
	 * before a point is timed, the sweep stops there, commits the points
	 * it stored and returns -EINTR; a rerun resumes.  The caller's signal
	 * handler sets it (libraries install none). */
	const volatile sig_atomic_t *stop;
};

struct sweep_stats {
	int64_t measured;             /* points timed and stored */
	int64_t skipped;              /* points already in the store */
	/* samples timed again because the thread was switched out during
	 * them (an involuntary context switch: another process had the core) */
	int64_t retimed;
	char meter[320];              /* which energy meter, or why none */
	char device_desc[256];        /* what ran the kernels */
};

/* 0, -EINTR when cfg->stop stopped it (the points so far committed), or
 * another negative errno with err set. */
int sweep_run(struct cal_store *st, const struct sweep_config *cfg, struct sweep_stats *stats,
	      struct ss_error *err);

#endif
