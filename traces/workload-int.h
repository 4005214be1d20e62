/* servesim — traces/ internals shared by workload.c, readers.c, generators.c. */
#ifndef SS_WORKLOAD_INT_H
#define SS_WORKLOAD_INT_H

#include <stdio.h>

#include <gsl/gsl_rng.h>

#include "workload.h"

/* WL_MAX_REQUESTS: workload.h */

/* Tokens per Mooncake hash_ids block (FAST'25 release README). */
#define MOONCAKE_BLOCK_TOKENS 512u

/* Tokens per block of a native trace's declared prefix (prefix_id,
 * prefix_tokens): a prefix of T tokens has T / 16 block hashes. */
#define NATIVE_BLOCK_TOKENS 16u

#define TRACE_READER_VERSION 1

/* What detection shows each reader's detect() of a file's first non-blank
 * line (trace_peek_detect): the line without its BOM, leading blanks and
 * line end; whether it opens a JSON value ('{' or '['); and for any other
 * line its CSV column names (trace_sniff_col).  sn->len == 1 with json: a
 * lone '{' (an indented JSON document's first line). */
struct trace_header;
struct trace_sniff {
	const char *s;
	size_t len;
	bool json;
	const struct trace_header *h;   /* CSV columns; NULL when json */
};
/* The CSV line has a column named name (case-insensitive). */
bool trace_sniff_col(const struct trace_sniff *sn, const char *name);
/* The line contains text (a JSON key with its quotes: "\"ttfts\""). */
bool trace_sniff_has(const struct trace_sniff *sn, const char *text);

/* One trace format's reader: registered by a line of traces/registry.def,
 * which orders detection and the format list (traces/registry.c).
 * detect() says whether a file whose first non-blank line is sn is in this
 * format; read() appends the file's rows to wl in file order with
 * arrival_ns relative to the first row (which may leave some negative when
 * rows are out of order) and sets has_arrivals and the hash fields; the
 * framework sorts, normalizes, and empties wl on error.  f is open at the
 * start of the file; priv is priv_size zeroed bytes owned by the
 * framework. */
struct trace_reader {
	unsigned version;       /* TRACE_READER_VERSION */
	struct trace_format_info info;   /* fmt, name, description */
	size_t priv_size;       /* bytes of per-read state */
	/* CSV formats: the header it needs, for the error on a header no
	 * reader detects; NULL for JSON formats */
	const char *expect;
	bool (*detect)(const struct trace_sniff *sn);
	int (*read)(struct workload *wl, FILE *f, const char *path, void *priv,
		    struct ss_error *err);
};

/* The registered readers (traces/registry.def), defined in readers.c and
 * sessions.c. */
#define TRACE_READER(FMT, ident) extern const struct trace_reader reader_##ident;
#include "registry.def"
#undef TRACE_READER

/* The reader of fmt (not TRACE_AUTO), NULL for an unknown value. */
const struct trace_reader *trace_reader_for(enum trace_format fmt);
/* The first reader in registry order whose detect() accepts sn, or NULL. */
const struct trace_reader *trace_reader_detect(const struct trace_sniff *sn);
/* The CSV formats' expected headers, "H (name), H (name), ..." in registry
 * order, for the error on an unrecognized header. */
void trace_readers_expected(char *buf, size_t len);

/* Grow wl->req to hold at least n entries (geometric); 0 or -ENOMEM. */
int wl_reserve(struct workload *wl, size_t n);
/* Grow wl->hashes to hold at least n entries (geometric); 0 or -ENOMEM. */
int wl_reserve_hashes(struct workload *wl, size_t n);

/* Append one zeroed request; NULL when out of memory. */
static inline struct wl_request *wl_append(struct workload *wl)
{
	struct wl_request *r;

	if (wl->n == wl->cap && wl_reserve(wl, wl->n + 1))
		return NULL;
	r = &wl->req[wl->n++];
	*r = (struct wl_request){ 0 };
	return r;
}

/* trace_read() with a choice: sort = false keeps file order (arrival times
 * are still shifted so that the smallest is 0).  workload_build() uses it to
 * take a trace's lengths in file order under synthetic arrivals. */
int trace_read_ordered(struct workload *wl, const char *path,
		       enum trace_format fmt, bool sort, struct ss_error *err);

/* The bytes format detection read from a stream, up to and including the
 * first non-blank line: replayed to the reader so that detection works on
 * a pipe (--trace /dev/stdin) as well as on a file. */
struct trace_peek {
	char *buf;      /* (owned) bytes read, not NUL-terminated */
	size_t len, cap;
};

/* Read f up to its first non-blank line (at most SS_LINE_MAX bytes a line)
 * into *pk and detect the format from that line.  The caller frees pk->buf
 * whatever the result. */
int trace_peek_detect(FILE *f, const char *path, struct trace_peek *pk,
		      enum trace_format *fmt, struct ss_error *err);

/* A rate curve (--rate-curve, traces/rate-curve.c): rate r[i] req/s at
 * time t[i] s, linear between rows, t[0] = 0 < t[1] < ... < t[n-1], which
 * is the period after which the curve repeats. */
#define RATE_CURVE_TIME_MAX 1e9
struct rate_curve {
	size_t n;               /* rows, >= 2 */
	double *t, *r;          /* row times (s) and rates (req/s, >= 0) */
	double *cum;            /* requests expected from 0 to t[i] (integral) */
	double period;          /* t[n-1], s */
	double total;           /* cum[n-1]: requests a period, >= 0.001 */
};

/* Read path into *c (zeroed first): 0, or an error naming path and the
 * 1-based line (-EINVAL, -E2BIG) or the open failure (-errno), c empty. */
int rate_curve_read(struct rate_curve *c, const char *path, struct ss_error *err);
void rate_curve_free(struct rate_curve *c);
/* The time (s) by which lam requests are expected: L^-1(lam), lam >= 0,
 * across periods. */
double rate_curve_time(const struct rate_curve *c, double lam);

/* A --lengths distribution for other generators (generators.c): parse
 * spec (errors name --lengths), draw a prompt and an output length from r,
 * free. */
struct lengths_gen;
int wl_lengths_new(const char *spec, struct lengths_gen **lg, struct ss_error *err);
void wl_lengths_draw(const struct lengths_gen *lg, gsl_rng *r, int32_t *prompt,
		     int32_t *output);
void wl_lengths_free(struct lengths_gen *lg);

/* ---- sessions (traces/sessions.c) ---------------------------------------- */

/* --sessions without a trace: the session generator. */
int sessions_generate(struct workload *wl, const struct workload_spec *spec,
		      struct ss_error *err);
/* What a session generator draws (sessions_generate_from): turns of a
 * session (>= 1, before max_turns), think time before a later step (s,
 * >= 0) and its calls (fan-out, >= 1) from the shape stream, then each
 * call's new and output tokens (>= 1) from the lengths stream. */
struct sess_draw {
	void *ctx;
	uint32_t (*turns)(void *ctx, gsl_rng *r);
	double (*think_s)(void *ctx, gsl_rng *r);
	uint32_t (*fanout)(void *ctx, gsl_rng *r);
	void (*lengths)(void *ctx, gsl_rng *r, size_t session, uint32_t step, uint32_t branch,
			int32_t *new_tokens, int32_t *output_tokens);
	uint32_t max_turns;      /* steps kept per session, 0 = all */
};
/* n sessions starting at start[] (ns, non-decreasing), shaped by d from
 * seed's SS_RNG_SESSION_SHAPE and SS_RNG_SESSION_LENGTHS streams: the
 * generator behind --sessions and session workload models. */
int sessions_generate_from(struct workload *wl, size_t n, const int64_t *start,
			   const struct sess_draw *d, uint64_t seed, struct ss_error *err);
/* A session trace read with --sessions options (spec->sessions, spec->trace). */
int sessions_trace_read(struct workload *wl, const struct workload_spec *spec,
			struct ss_error *err);
/* A session workload replayed: --rate-scale divides the sessions' start
 * times (not think times), --duration keeps the sessions starting before
 * it, --num-requests the first N sessions; whole sessions only. */
int sessions_replay(struct workload *wl, const struct workload_spec *spec,
		    struct ss_error *err);

#endif
