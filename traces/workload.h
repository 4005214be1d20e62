/* servesim — workloads: the requests a run replays.
 *
 * A workload is an array of request specifications sorted by arrival time
 * (stable: ties keep file order), built either by reading a trace file or by
 * a generator (arrival process x length distribution).  The engine takes a
 * workload read-only; request i of the run is wl->req[i].
 *
 * Times are int64 nanoseconds from the first arrival (which is 0).
 */
#ifndef SS_WORKLOAD_H
#define SS_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "ss-error.h"

enum trace_format {
	TRACE_AUTO = 0,  /* detect from the header / first line */
	TRACE_AZURE,     /* TIMESTAMP,ContextTokens,GeneratedTokens */
	TRACE_MOONCAKE,  /* JSONL: timestamp (ms), input_length, output_length, hash_ids */
	TRACE_VIDUR,     /* arrived_at (s), num_prefill_tokens, num_decode_tokens */
	TRACE_NATIVE,    /* arrival_ms, prompt_tokens, output_tokens
			  * [,tenant,priority][,prefix_id,prefix_tokens] */
	TRACE_LENGTHS,   /* num_prefill_tokens, num_decode_tokens: lengths only, no times */
	/* per-request serving benchmark results (serving.h), replayed */
	TRACE_BENCH,     /* vllm bench serve --save-result JSON / SGLang bench_serving JSONL */
	TRACE_LLMD,      /* llm-d per-request CSV */
	TRACE_DISTSERVE, /* DistServe .exp (results and workload files) */
	TRACE_LLMSERVINGSIM, /* LLMServingSim requests.jsonl */
	/* session workloads (traces/sessions.c, docs/workloads.md) */
	TRACE_SESSIONS,  /* session,call,new_tokens,output_tokens,think_ms,arrival_ms */
	TRACE_EXGENTIC,  /* benchmark,session,call,completed_at_s,prompt_tokens,
			  * completion_tokens (agent calls, ../shared/data) */
};
#define TRACE_FORMAT_LAST TRACE_EXGENTIC

struct wl_request {
	int64_t arrival_ns;     /* >= 0, non-decreasing over the array */
	int32_t prompt_tokens;  /* >= 1 */
	int32_t output_tokens;  /* >= 1; the truth, never shown to policies */
	int32_t tenant;         /* 0 when the source has none */
	int32_t priority;       /* 0 when the source has none; larger = more important */
	uint32_t prefix_off;    /* first prefix block hash in workload.hashes; requests
				 * may share a slice (a native trace's prefix_id) */
	uint32_t prefix_n;      /* number of prefix block hashes (0 = none) */
};

/* One call of a session workload (traces/sessions.c; docs/workloads.md,
 * "Sessions and agents"): workload.sess[i] describes req[i].  A session is
 * a run of consecutive requests, step by step; the calls of one step (its
 * fan-out) are consecutive too.  Step 0 arrives at req[i].arrival_ns; a
 * later step is sent think_ns after every call of the step before has
 * completed (its req arrival_ns is then only the session's start, a lower
 * bound that keeps the array sorted). */
struct wl_call {
	uint32_t session;    /* 0 .. n_sessions - 1, in order of start */
	uint32_t step;       /* 0: the first step, sent at its arrival_ns */
	uint32_t step_first; /* index in req of the first call of this step */
	uint32_t step_n;     /* calls in this step (its fan-out), >= 1 */
	int64_t think_ns;    /* step > 0: the pause after the previous step, ns */
};

struct workload {
	struct wl_request *req;   /* n entries, sorted by arrival_ns */
	size_t n, cap;
	uint32_t *hashes;         /* prefix block hashes: Mooncake hash_ids, or hashes
				   * of a native trace's (prefix_id, block) */
	size_t n_hashes, cap_hashes;
	uint32_t hash_block_tokens; /* tokens per prefix hash block: 512 (mooncake),
				     * 16 (native); 0 when no hashes */
	bool has_arrivals;        /* false for lengths-only sources */
	enum trace_format format; /* source format, TRACE_AUTO for generators */
	/* what a serving benchmark result says about how it was measured
	 * (0 for other sources): */
	uint32_t closed_loop_clients; /* measured closed loop with this many clients
				       * (vLLM --max-concurrency); the replay is open
				       * loop at the recorded issue times */
	double source_rate;       /* req/s it was offered at, INFINITY all at once,
				   * 0 unknown */
	size_t failed_skipped;    /* requests the client recorded as failed, left out */
	char source_model[128];   /* the model a serving result names ("" unknown) */
	char source[256];         /* file name or generator description */
	/* A trace replayed and cut by --num-requests or --duration: the
	 * requests it held before the cut (> n), the cut-off ones kept,
	 * read-only, in req[n .. n_source - 1] (after --rate-scale, as the
	 * kept ones).  0 when nothing was cut, or the workload was generated
	 * (workload_slice_compare). */
	size_t n_source;
	/* Sessions: n entries alongside req, or NULL for a workload without
	 * sessions (nothing else changes then). */
	struct wl_call *sess;
	size_t n_sessions;
	/* The prefix hashes of a request may go past its prompt, over its
	 * output (a session's call, whose output the next call re-sends): the
	 * engine then registers the KV blocks of generated tokens too. */
	bool hashes_cover_output;
	/* Multi-LoRA (sim/lora.h): the adapter each request names, n entries
	 * alongside req (-1: none), from a trace's adapter column; NULL when
	 * the source has none. */
	int32_t *adapter;
};

void workload_init(struct workload *wl);
void workload_release(struct workload *wl);

const char *trace_format_name(enum trace_format fmt);
int trace_format_from_name(const char *name, enum trace_format *fmt);

/* What `servesim list formats` shows of a format. */
struct trace_format_info {
	enum trace_format fmt;
	const char *name;         /* as --format takes it */
	const char *description;  /* one line */
};
/* The formats in the registry's order (traces/registry.def: the order
 * detection tries them), i = 0, 1, ...; NULL past the last. */
const struct trace_format_info *trace_format_at(size_t i);

/* Detect the format of path from its first line. */
int trace_detect(const char *path, enum trace_format *fmt, struct ss_error *err);

/* Read a whole trace into wl (which must be initialized and empty).
 * Every malformed row is an error naming path and its 1-based line.
 * On error wl is left empty.  path "-" reads standard input once, as a
 * stream (detection peeks at its start, nothing is rewound or copied to
 * a file), and names it TRACE_STDIN_NAME in errors and wl->source. */
#define TRACE_STDIN_NAME "<stdin>"
int trace_read(struct workload *wl, const char *path, enum trace_format fmt,
	       struct ss_error *err);

/* Most requests one workload may hold: 32 B each, so 3.2 GB at the limit.
 * A generator asked for more (a high rate times a long --duration) fails
 * with -E2BIG instead of exhausting memory; `--num-requests` above it is a
 * bad command line. */
#define WL_MAX_REQUESTS 100000000u

/* What to build: either a trace (optionally with synthetic arrivals
 * replacing its times) or a generator. */
struct workload_spec {
	const char *trace;       /* path or NULL */
	enum trace_format format;/* TRACE_AUTO to detect */
	const char *arrival;     /* "poisson:rate=R" | "gamma:rate=R,cv=C" |
				  * "mmpp:rates=...,switch_s=..." | "onoff:..." or NULL */
	const char *rate_curve;  /* --rate-curve FILE (time_s,rate rows) instead of
				  * arrival, or NULL */
	const char *lengths;     /* "fixed:..." | "uniform:..." | "lognormal:..." |
				  * "geometric:..." | "empirical:FILE" or NULL */
	const char *tenants;     /* NULL: keep the source's tenants; "N": uniform on
				  * 0..N-1 (N in 1..4096); "W0,W1,...": tenant i with
				  * probability Wi / sum (>= 2 positive weights) */
	uint64_t num_requests;   /* keep the first N (0 = no limit) */
	int64_t duration_ns;     /* keep arrivals before this time (0 = no limit) */
	double rate_scale;       /* > 0; arrival times are divided by it */
	double target_rate;      /* > 0 (a trace replayed with its own times only):
				  * divide its times by the factor that makes its
				  * mean rate this, req/s (--rate of run); 0 = off,
				  * and rate_scale must then be 0 or 1 */
	uint64_t seed;
	/* --sessions SPEC: a session generator ("rate=R,turns=T,think_s=S,...")
	 * or, with a session trace, its options ("think=...,max_turns=N");
	 * NULL: none.  num_requests and duration_ns then count sessions. */
	const char *sessions;
	/* Closed loop (engine_config.concurrency > 0): the workload gives
	 * lengths only, in order, and every arrival_ns is 0 (the engine
	 * sends request i when a client is free).  A trace is read in file
	 * order and its timestamps are ignored; a generator (lengths) needs
	 * num_requests; arrival must be NULL, rate_scale 1 (or 0), and
	 * duration_ns is not applied here (the engine stops sending at it). */
	bool closed;
	/* A workload model (`servesim workload fit`; traces/workload-model.h)
	 * to generate from instead of a trace or generator, or NULL: with
	 * num_requests, duration_ns, rate_scale or target_rate (its mean
	 * rate), seed and tenants as above; nothing else may be set. */
	const char *model;
	double prompt_scale;     /* model: multiply prompt lengths (0 = 1) */
	double output_scale;     /* model: multiply output lengths (0 = 1) */
};

/* About how many requests spec will build, before building it, so a
 * caller can refuse a workload that would not fit in memory before
 * generating or reading it: --num-requests when given, else a generator's
 * rate x --duration (its mean count); 0 when only reading the trace would
 * tell.  Checks the arrival spec when it needs it: 0 or -EINVAL. */
int workload_spec_requests(const struct workload_spec *spec, uint64_t *n,
			   struct ss_error *err);

/* Build wl from spec; see docs/workloads.md for the rules. */
int workload_build(struct workload *wl, const struct workload_spec *spec,
		   struct ss_error *err);

/* ---- a slice of a trace against the whole (traces/workload-slice.c) ----- */

/* Requests longer than a context (traces/workload-context.c): of the
 * workload's n requests, those whose prompt + output exceeds it. */
struct wl_context {
	int32_t context;          /* tokens */
	size_t requests;          /* the workload's requests (n) */
	size_t over;              /* prompt + output > context */
	size_t prompt_over;       /* of those, the prompt alone >= context */
	size_t truncated;         /* of those, cut to fit (truncate) */
	int64_t max_excess;       /* the most tokens one request exceeds it by */
};

/* Count wl's requests longer than context tokens into *c; with truncate,
 * also cut each to fit: its prompt keeps its last context - output tokens
 * (the output is cut to context - 1 when it alone does not fit) and loses
 * its prefix hashes.  Requests of a session workload grow with their
 * history at run time: only their own tokens are counted here. */
void workload_context_check(struct workload *wl, int32_t context, bool truncate,
			    struct wl_context *c);

/* A slice differs from the whole when its mean arrival rate differs by more
 * than WL_SLICE_RATE_TOL, or one of the p50/p90/p99 of prompt or output
 * lengths by more than WL_SLICE_LEN_TOL, relative to the whole's figure
 * (docs/workloads.md, "A slice of a trace", says why these). */
#define WL_SLICE_RATE_TOL 0.10
#define WL_SLICE_LEN_TOL 0.15

/* The figures of the slice ([0]) and of the whole trace ([1]). */
struct wl_slice {
	size_t n[2];              /* requests */
	double rate_rps[2];       /* (n - 1) / (last - first arrival), 0 when undefined */
	double prompt[2][3];      /* p50, p90, p99 of prompt tokens */
	double output[2][3];      /* p50, p90, p99 of output tokens */
	/* which differ beyond their tolerance: rate, then prompt p50/p90/p99,
	 * then output p50/p90/p99 */
	bool differs[7];
	bool any;                 /* one of differs[] */
};

/* Compare the slice of wl (its n requests) with the whole trace it was cut
 * from (n_source requests).  Returns false, *s untouched, when wl is not a
 * cut trace (n_source == 0); -ENOMEM is reported as false too (the check is
 * advisory). */
bool workload_slice_compare(const struct workload *wl, struct wl_slice *s);

/* One line naming the figures that differ, slice against whole:
 * "rate 2.10 req/s vs 1.64 (+28%); prompt p99 3900 vs 4410 tokens (-12%)"
 * (without a trailing newline); "" when none differs. */
void workload_slice_text(const struct wl_slice *s, char *buf, size_t len);

/* A client's think time in a closed loop (docs/workloads.md): the pause
 * between one of its requests leaving the run and its next being sent.
 * Spec: none | constant:ms=T | exponential:mean_ms=T | gamma:mean_ms=T,cv=C. */
enum think_kind { THINK_NONE = 0, THINK_CONSTANT, THINK_EXPONENTIAL, THINK_GAMMA };

struct think_time {
	enum think_kind kind;
	double mean_s;           /* mean think time, s (>= 0; 0 for none) */
	double shape, scale;     /* gamma: shape 1/cv^2 and scale mean x cv^2 (s) */
};

/* Longest mean think time a spec may give, ms (1000 hours). */
#define THINK_MEAN_MAX_MS 3.6e9

/* Parse spec (NULL = none) into *tt: 0 or -EINVAL with err set to one line
 * naming --think-time and what was expected. */
int think_time_parse(const char *spec, struct think_time *tt, struct ss_error *err);

/* One think time drawn from r, into *ns (rounded to the ns); a constant or
 * none draws nothing, so a run's other streams never depend on it.  false
 * when the drawn value does not fit in int64 ns. */
bool think_time_draw(const struct think_time *tt, gsl_rng *r, int64_t *ns);

/* "none", "constant 50 ms", "exponential mean 50 ms", "gamma mean 50 ms
 * cv 2" into buf: how summaries name tt. */
void think_time_describe(const struct think_time *tt, char *buf, size_t len);

#endif
