/* servesim — measured serving runs as engine-fit observations.
 *
 * A run read by traces/serving.h becomes one efit_obs: the deployment it
 * names (model and GPU resolved in the catalog, TP), a workload that
 * replays it exactly, and the measured figures to fit:
 *
 *   static batch (Splitwise): B requests of isl / osl tokens at t = 0 under
 *     the static batch policy; prompt_time -> TTFT mean, token_time -> TPOT
 *     mean;
 *   closed loop (aiconfigurator silicon): `concurrency` clients sending
 *     fixed isl / osl requests, 4 x concurrency of them (at least 32);
 *     mean TTFT and TPOT;
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

enum efit_group_by {
	EFIT_GROUP_RUN = 0,          /* every run its own group */
	EFIT_GROUP_FILE,             /* the result file */
	EFIT_GROUP_MODEL,
	EFIT_GROUP_GPU,
	EFIT_GROUP_TP,
	EFIT_GROUP_MODEL_TP,         /* model and TP together (Splitwise's configurations) */
};
int efit_group_by_from_name(const char *name, enum efit_group_by *out);

struct efit_source_opts {
	const char *model, *gpu;     /* catalog names when the result does not say, or to override */
	int tp;                      /* > 0 overrides the result's */
	const char *policy;          /* batch policy for open and closed runs (default vllm) */
	enum efit_group_by group_by;
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
