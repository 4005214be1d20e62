/* servesim — measured serving runs as engine-fit observations.
 *
 * A run read by traces/serving.h becomes one efit_obs: the deployment it
 * names (model and GPU resolved in the catalog, TP), a workload that
 * replays it exactly, and the measured figures to fit:
 *
 *   static batch (Splitwise): B requests of isl / osl tokens at t = 0 under
 *     the static batch policy; prompt_time -> TTFT mean, token_time -> TPOT
 *     mean;
 *   closed loop (aiconfigurator silicon): `concurrency` (C) clients
 *     sending fixed isl / osl requests, as aiconfigurator's benchmark does
 *     (genai-perf --concurrency C --warmup-request-count 2C --request-count
 *     10C): 12C requests, the first 2C a warm-up left out of the means;
 *     (--closed-start drained: perf_analyzer drains its warm-up, so the
 *     measured phase starts from idle; efit_obs.drained) or
 *     the clients out of phase (efit_obs.spread: a long-running closed
 *     loop's clients do not stay in lock-step, and a real one's TTFT
 *     shows it: at C = 32 it is a few prefills, not a burst of 32); mean
 *     TTFT and TPOT of the 10C measured requests.  Fewer requests do not
 *     give the same means: the last round runs while the load drains, and
 *     the rounds between settle slowly (docs/validation.md);
 *     A disaggregated row (mode=disagg) runs on its own two pools (each
 *     pool's workers, GPUs, EP and attention DP from its prefill_ /
 *     decode_ columns) with each pool's recorded max_batch_size as its
 *     limit (engine_config.pools[].policy);
 *   per-request runs (llm-d, DistServe, vLLM/SGLang bench): the requests at
 *     their send times with their lengths; TTFT p50 and p90 and TPOT p50
 *     of the requests that succeeded (closed-loop bench runs re-run with
 *     their concurrency).
 *
 * Engine settings the result records (LLMServingSim's meta.json: the KV
 * blocks vLLM allocated, its block size, max_num_seqs and
 * max_num_batched_tokens) are re-simulated as measured: the KV pool is
 * forced to the recorded blocks and a vllm batch policy gets the limits
 * unless its spec sets them.
 */
#ifndef SS_ENGINE_OBS_H
#define SS_ENGINE_OBS_H

#include "catalog.h"
#include "engine-fit.h"
#include "serving.h"

/* Measured and warm-up requests per client of a simulated closed-loop
 * table row (above). */
#define EFIT_CLOSED_REQUESTS_PER_CLIENT 10
#define EFIT_CLOSED_WARMUP_PER_CLIENT 2

enum efit_group_by {
	EFIT_GROUP_RUN = 0,          /* every run its own group */
	EFIT_GROUP_FILE,             /* the result file */
	EFIT_GROUP_MODEL,
	EFIT_GROUP_GPU,
	EFIT_GROUP_TP,
	EFIT_GROUP_MODEL_TP,         /* model and TP together (Splitwise's configurations) */
	EFIT_GROUP_ISL,              /* the prompt length of fixed-length runs */
	/* the source (deployment) of `fit-engine --sources`: its caller
	 * names the group (efit_obs_from_run writes the file's) */
	EFIT_GROUP_SOURCE,
};
int efit_group_by_from_name(const char *name, enum efit_group_by *out);

struct efit_source_opts {
	const char *model, *gpu;     /* catalog names when the result does not say, or to override */
	int tp;                      /* > 0 overrides the result's */
	const char *policy;          /* batch policy for open and closed runs (default vllm) */
	enum efit_group_by group_by;
	/* Closed-loop table rows: all clients start together (a burst, as a
	 * benchmark's measured phase starts after a drained warm-up) rather
	 * than out of phase (efit_obs.spread, the default). */
	bool closed_burst;
	/* Closed-loop table rows: the measured phase as perf_analyzer runs
	 * it (efit_obs.drained): its first round a burst on an idle engine,
	 * the rest out of phase. */
	bool closed_drained;
	/* Closed-loop runs of C clients that record no running-set limit: the
	 * server admits at most C - closed_seqs_short requests (max_num_seqs
	 * of a vllm batch policy; at least 1), as aiconfigurator launched
	 * TensorRT-LLM with max_batch_size = C and the server then held one
	 * request fewer (docs/validation.md, aiconfigurator silicon).  Off
	 * unless closed_seqs_set. */
	bool closed_seqs_set;
	int closed_seqs_short;
	/* Closed-loop table rows (fixed isl): the per-step token budget
	 * (max_num_batched_tokens of a vllm batch policy, replacing the
	 * policy's) is C + isl + closed_tokens_extra, aiconfigurator's
	 * benchmark rule for an aggregated TensorRT-LLM worker (max_num_tokens
	 * = max_batch_size + isl + 1500, max_batch_size = C;
	 * docs/validation.md, FP8 dense rows).  Off unless closed_tokens_set. */
	bool closed_tokens_set;
	int closed_tokens_extra;
	/* Keep the figures a run reports beside its fitted ones
	 * (efit_target.report: TTFT p99, E2E p50, NIM's p95s, ...); without
	 * it the run has only the figures it is fitted on, as before they
	 * were added. */
	bool reported;
};

/* Build obs (and wl, which obs->wl points to; initialized, empty) from
 * run, read from file.  base supplies everything a result does not name
 * (cost model, stores, seed, ...).  name and group are written into the
 * caller's buffers (name_len, group_len bytes), which obs points to.
 * Returns 0; -ENOENT with err saying why the run cannot be replayed here
 * (a model or GPU the catalog lacks, no measured figures): skip it;
 * -ENOMEM. */
int efit_obs_from_run(const struct serving_run *run, const char *file,
		      const struct catalog *cat, const struct engine_config *base,
		      const struct efit_source_opts *o, struct efit_obs *obs,
		      struct workload *wl, char *name, size_t name_len, char *group,
		      size_t group_len, struct ss_error *err);

/* Merge repeated measurements: runs of obs[0..n) with the same
 * deployment, workload and metrics become one whose targets are the
 * medians of theirs (repeats says how many; the others stay at the end
 * of obs, their workloads still the caller's to release).  Keeps the
 * order of first appearance; scratch holds n doubles.  Returns the runs
 * kept. */
size_t efit_obs_merge_repeats(struct efit_obs *obs, size_t n, double *scratch);

/* The catalog entry a result's model or GPU name stands for ("llama2-70b",
 * "meta-llama/Llama-3.1-70B-Instruct"; "a100-80gb", "h100_sxm",
 * "A100-SXM4-80GB"), or NULL. */
const struct model_spec *efit_match_model(const struct catalog *cat, const char *name);
const struct gpu_spec *efit_match_gpu(const struct catalog *cat, const char *name);

#endif
