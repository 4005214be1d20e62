/* servesim — end-to-end serving benchmark results, read into one form.
 *
 * A result file holds one or more measured runs of a real serving engine:
 * per-request records (vLLM `vllm bench serve --save-result` JSON, SGLang
 * `bench_serving` JSONL, llm-d per-request CSV, DistServe `.exp` lists,
 * LLMServingSim `requests.jsonl`) or one aggregate row per run (Splitwise's
 * static-batch table, aiconfigurator's closed-loop silicon table).  Every
 * reader fills the same struct serving_run, so the engine-profile fitting
 * (calibrate fit-engine), replay (`run --trace RESULT`) and compare read one
 * form.  docs/serving-results.md describes each format and what is taken
 * from it.
 *
 * Durations and times are int64 nanoseconds; SERVING_NONE (-1) marks a value
 * the source does not record.  Token counts are >= 0.
 */
#ifndef SS_SERVING_H
#define SS_SERVING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ss-error.h"
#include "workload.h"

/* A time or duration the source does not record. */
#define SERVING_NONE ((int64_t)-1)

/* Largest result file read (bytes): JSON results are read whole. */
#define SERVING_MAX_BYTES (1u << 30)

/* The result formats, declared once: X(ENUM, name, per_request, what).
 * It expands into enum serving_format, serving.c's name table and
 * fit-engine's --format help (SERVING_FORMAT_NAMES). */
#define SERVING_FORMATS(X)                                                                 \
	X(SERVING_BENCH, "bench", true,                                                    \
	  "vllm bench serve --save-result JSON, SGLang bench_serving JSONL")               \
	X(SERVING_LLMD, "llm-d", true, "llm-d per-request CSV")                            \
	X(SERVING_DISTSERVE, "distserve", true,                                            \
	  "DistServe .exp (Python-literal list of dicts)")                                 \
	X(SERVING_LLMSERVINGSIM, "llmservingsim", true,                                    \
	  "LLMServingSim requests.jsonl (+ meta.json beside it)")                          \
	X(SERVING_SPLITWISE, "splitwise", false, "Splitwise static-batch perf_model CSV")  \
	X(SERVING_SILICON, "silicon", false, "aiconfigurator silicon closed-loop CSV")     \
	X(SERVING_NIM, "nim", false,                                                       \
	  "NVIDIA NIM GenAI-Perf sweep CSV (closed loop, avg and p95)")                    \
	X(SERVING_GPUSTACK, "gpustack", false,                                             \
	  "GPUStack performance-lab `vllm bench serve` rows CSV")                          \
	X(SERVING_TRTLLM_STATIC, "trtllm-static", false,                                   \
	  "TensorRT-LLM 0.9 static-batch benchmark table CSV")

#define SERVING_FORMAT_ENUM_(e, name, per_request, what) e,
enum serving_format {
	SERVING_AUTO = 0,       /* detect from the first bytes */
	SERVING_FORMATS(SERVING_FORMAT_ENUM_)
};
#undef SERVING_FORMAT_ENUM_

/* ", bench, llm-d, ...": every format's name, a string literal. */
#define SERVING_FORMAT_NAME_(e, name, per_request, what) ", " name
#define SERVING_FORMAT_NAMES SERVING_FORMATS(SERVING_FORMAT_NAME_)

/* How the run's load was offered. */
enum serving_load {
	SERVING_LOAD_UNKNOWN = 0,
	SERVING_LOAD_OPEN,      /* arrivals at request_rate (INFINITY: all at once) */
	SERVING_LOAD_CLOSED,    /* `concurrency` clients, each sends when its last finished */
	SERVING_LOAD_STATIC,    /* one static batch of `concurrency` requests */
};

/* One measured request. */
struct serving_request {
	int64_t issue_ns;       /* client send time from the run's earliest, or SERVING_NONE */
	int32_t prompt_tokens;  /* >= 0 */
	int32_t output_tokens;  /* >= 0 */
	int64_t ttft_ns;        /* send to first token, or SERVING_NONE */
	int64_t tpot_ns;        /* (last token - first token) / (output - 1), or SERVING_NONE
				 * (also when output_tokens <= 1) */
	int64_t e2e_ns;         /* send to last token, or SERVING_NONE */
	uint32_t itl_off;       /* first inter-token gap in serving_run.itl_ns */
	uint32_t itl_n;         /* gaps recorded (0 when the source has none) */
	bool ok;                /* false: the client recorded an error for it */
};

/* One measured run: metadata, per-request records, and the aggregates a
 * table reports.  Strings are "" and numbers 0 / NAN / SERVING_NONE when the
 * source does not say. */
struct serving_run {
	enum serving_format format;
	enum serving_load load;
	char engine[32];         /* "vllm", "sglang", "trtllm", "distserve", "" unknown */
	char engine_version[64];
	char model[128];         /* as the source names it (an HF id, "llama2-70b") */
	char gpu[64];            /* as the source names it ("a100-80gb", "h100_sxm") */
	char precision[32];
	char mode[16];           /* "agg" / "disagg" (silicon), placement (DistServe) */
	char label[160];         /* the source's id for the run: row id, file name */
	int32_t tp, pp;          /* parallelism, 0 unknown */
	/* Disaggregated runs (silicon mode=disagg): each pool as its
	 * prefill_* / decode_* columns give it, 0 where empty (and in other
	 * runs).  batch is the per-worker (per attention rank) max_batch_size
	 * it was launched with. */
	struct serving_pool {
		int32_t workers, batch, tp, pp, attn_dp, moe_tp, moe_ep;
	} prefill, decode;
	int32_t moe_ep, attn_dp; /* expert-parallel and attention data-parallel sizes (silicon), 0 unknown */
	int32_t moe_tp;          /* tensor parallelism inside each expert (silicon moe_tp_size), 0 unknown */
	double request_rate;     /* req/s for SERVING_LOAD_OPEN; INFINITY all at once; NAN unknown */
	int32_t concurrency;     /* clients (CLOSED) or batch size (STATIC); 0 none */
	int32_t isl, osl;        /* fixed prompt / output tokens of every request, 0 when not fixed */
	/* isl / osl are the run's mean tokens, not fixed lengths (a GPUStack
	 * ShareGPT row): replayed as fixed lengths at the means */
	bool mean_lengths;
	int32_t num_prompts;     /* requests an aggregate row's run sent (GPUStack n_ok), 0 unknown */
	int32_t dp;              /* data-parallel replicas the server ran (GPUStack serve_cmd), 0 unknown */
	bool speculative;        /* the server ran speculative decoding (GPUStack serve_cmd) */
	/* how the server was launched, as the source writes it (GPUStack's
	 * serve_cmd, then the label that overrides a flag), "" unknown */
	char launch[512];
	int64_t duration_ns;     /* the run's wall time as the source reports it, or SERVING_NONE */
	/* aggregates as reported by the source (means unless named), SERVING_NONE absent */
	int64_t mean_ttft_ns, median_ttft_ns, p99_ttft_ns;
	int64_t mean_tpot_ns, median_tpot_ns, p99_tpot_ns;
	int64_t mean_itl_ns;
	/* the further aggregates the NIM and GPUStack tables give */
	int64_t p95_ttft_ns, p95_tpot_ns;
	int64_t median_itl_ns, p99_itl_ns;
	int64_t mean_e2e_ns, p95_e2e_ns;  /* send to last token, over requests */
	int64_t prompt_ns;       /* static batch: whole-batch prefill */
	int64_t token_ns;        /* static batch: one decode iteration */
	int64_t e2e_ns;          /* static batch: whole batch, first to last token */
	double peak_power, avg_power;  /* fraction of the GPU's TDP; NAN absent */
	/* engine settings the source records (LLMServingSim meta.json), 0 unknown */
	int32_t max_num_seqs, max_num_batched_tokens, num_gpu_blocks, block_size;
	struct serving_request *req;   /* n_req records in the source's order */
	size_t n_req, cap_req;
	size_t n_failed;               /* records with ok == false */
	int64_t *itl_ns;               /* every request's gaps, sliced by itl_off/itl_n */
	size_t n_itl, cap_itl;
	long line;                     /* line of the source where the run starts */
};

/* What a planner reads of a run, computed from its per-request records
 * (served requests only) as servesim's own metrics are (analysis/metrics.c:
 * TPOT over requests with more than one output token; percentiles by linear
 * interpolation between ranks, ss_quantile_sorted(), as numpy and
 * `vllm bench serve` compute them).  Milliseconds; NAN where no request
 * defines the metric. */
enum { SERVING_MEAN = 0, SERVING_P50, SERVING_P90, SERVING_P99, SERVING_N_STATS };
struct serving_stats {
	size_t n;                        /* served requests */
	double ttft_ms[SERVING_N_STATS];
	double tpot_ms[SERVING_N_STATS];
	double itl_ms[SERVING_N_STATS];  /* over every recorded gap */
	double e2e_ms[SERVING_N_STATS];
	double duration_s;               /* duration_ns, else first send to last finish; NAN */
	double requests_per_s;          /* n / duration_s; NAN */
	double output_tokens_per_s;     /* served output tokens / duration_s; NAN */
};

/* Fill st from r's requests: 0, or -ENOMEM. */
int serving_run_stats(const struct serving_run *r, struct serving_stats *st);

/* The runs of one file. */
struct serving_set {
	struct serving_run *run;
	size_t n, cap;
	enum serving_format format;
	char source[256];
};

void serving_set_init(struct serving_set *set);
/* Frees everything and leaves set initialized; accepts NULL. */
void serving_set_release(struct serving_set *set);

/* "bench", "llm-d", "distserve", "llmservingsim", "splitwise", "silicon", "nim",
 * "gpustack", "trtllm-static", "auto". */
const char *serving_format_name(enum serving_format fmt);
int serving_format_from_name(const char *name, enum serving_format *fmt);
/* Does the format hold per-request records (true) or aggregate rows? */
bool serving_format_per_request(enum serving_format fmt);

/* The format of a result from its first bytes (at most len of them):
 * 0, or -EINVAL naming what was expected. */
int serving_detect_bytes(const char *path, const char *buf, size_t len,
			 enum serving_format *fmt, struct ss_error *err);

/* Read the result at path into set (initialized, empty).  Bad input: an
 * error naming path, its 1-based line (or the JSON path inside the line)
 * and what was expected; set is left empty. */
int serving_read(struct serving_set *set, const char *path, enum serving_format fmt,
		 struct ss_error *err);

/* The same from an open stream f (fmt not SERVING_AUTO); path names it in
 * errors and locates files beside it (LLMServingSim's meta.json). */
int serving_read_stream(struct serving_set *set, FILE *f, const char *path,
			enum serving_format fmt, struct ss_error *err);

/* r's served requests as a workload (wl initialized and empty), as
 * `run --trace` replays a result: sorted by send time (stable), the first at
 * 0; without send times, in the run's order with has_arrivals false.
 * Failed requests are left out (wl->failed_skipped counts them);
 * wl->closed_loop_clients and wl->source_rate say how the run was offered.
 * An error (naming r->label) when no request was served or one has a prompt
 * or output of 0 tokens; wl is then left empty. */
int serving_run_workload(struct workload *wl, const struct serving_run *r,
			 struct ss_error *err);

#endif
