/* servesim — trace readers: Azure, Vidur, native and lengths-only CSV
 * (libcsv), Mooncake JSON lines (jansson), and format detection.
 *
 * Every CSV format is read by one state machine driven by libcsv's field and
 * record callbacks; a format is just a layout naming the header columns it
 * needs and how its time column is written.  Columns are found by header
 * name, so column order does not matter and extra columns are ignored.
 *
 * Line numbers: libcsv does not report positions, so the parser runs with
 * CSV_REPALL_NL, which calls the record callback once for every unquoted CR
 * and LF.  Counting those (a CR followed directly by an LF is one line end)
 * plus the LFs inside quoted fields gives the 1-based line of every record.
 */
#define _GNU_SOURCE     /* memmem */
#include "workload-int.h"
#include "serving-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <csv.h>
#include <jansson.h>

#include "params.h"
#include "rng.h"

/* Largest |time| a reader accepts, relative to the first row (ns): half of
 * INT64_MAX, so that differences between any two rows still fit (~146 y). */
#define TIME_MAX_NS 4.6e18

/* ---- numbers and timestamps ------------------------------------------- */

enum num_status { NUM_OK, NUM_BAD, NUM_FRACTION, NUM_NEGATIVE, NUM_RANGE };

/* A token count (or tenant/priority): an integer, or a float that is
 * integral ("374.0", as some exports write them), within int32. */
static enum num_status parse_count(const char *s, bool allow_negative, int32_t *out)
{
	int64_t v;
	double d;

	if (!ss_parse_int64(s, &v)) {
		if (!ss_parse_double(s, &d))
			return NUM_BAD;
		if (d != floor(d))
			return NUM_FRACTION;
		if (d < -2147483648.0 || d > 2147483647.0)
			return d < 0 && !allow_negative ? NUM_NEGATIVE : NUM_RANGE;
		v = (int64_t)d;
	}
	if (v < 0 && !allow_negative)
		return NUM_NEGATIVE;
	if (v < INT32_MIN || v > INT32_MAX)
		return NUM_RANGE;
	*out = (int32_t)v;
	return NUM_OK;
}

/* One-line error for a bad count in column col. */
static int count_error(struct ss_error *err, const char *path, long line,
		       const char *col, const char *s, enum num_status st, int min)
{
	switch (st) {
	case NUM_FRACTION:
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: expected an integer, got '%s' (not a whole number)", col, s);
	case NUM_NEGATIVE:
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: negative value '%s' (expected an integer >= %d)", col, s,
				    min);
	case NUM_RANGE:
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: value '%s' out of range (expected %d..%d)", col, s,
				    min, INT32_MAX);
	default:
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: expected an integer, got '%s' (non-numeric)", col, s);
	}
}

/* Read prompt and output counts and check both are >= 1. */
static int parse_lengths(const char *path, long line, const char *pcol,
			 const char *ps, const char *ocol, const char *os,
			 struct wl_request *r, struct ss_error *err)
{
	enum num_status st;

	st = parse_count(ps, false, &r->prompt_tokens);
	if (st != NUM_OK)
		return count_error(err, path, line, pcol, ps, st, 1);
	st = parse_count(os, false, &r->output_tokens);
	if (st != NUM_OK)
		return count_error(err, path, line, ocol, os, st, 1);
	if (r->prompt_tokens < 1)
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: prompt of %d tokens (expected prompt >= 1)",
				    pcol, r->prompt_tokens);
	if (r->output_tokens < 1)
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: output of %d tokens (expected output >= 1)",
				    ocol, r->output_tokens);
	return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil): exact for any year, no timegm(), TZ or locale. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static bool digits(const char **p, int n, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return false;
		v = v * 10 + (unsigned)((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return true;
}

/* "YYYY-MM-DD HH:MM:SS[.f{0,9}][Z|+HH:MM|-HH:MM|+HHMM]" ('T' may replace the
 * space) to seconds and nanoseconds since the Unix epoch, UTC.  Without an
 * offset the time is taken as UTC; only differences matter. */
static bool parse_datetime(const char *s, int64_t *sec, int32_t *nsec)
{
	static const unsigned char mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	unsigned y, mo, d, h, mi, se, oh, om, ns = 0;
	int64_t off = 0;
	bool leap;
	int nd;

	while (*s == ' ')
		s++;
	if (!digits(&s, 4, &y) || *s++ != '-' || !digits(&s, 2, &mo) || *s++ != '-' ||
	    !digits(&s, 2, &d) || (*s != ' ' && *s != 'T'))
		return false;
	s++;
	if (!digits(&s, 2, &h) || *s++ != ':' || !digits(&s, 2, &mi) || *s++ != ':' ||
	    !digits(&s, 2, &se))
		return false;
	if (*s == '.') {
		s++;
		for (nd = 0; *s >= '0' && *s <= '9'; nd++, s++) {
			if (nd == 9)
				return false;
			ns = ns * 10 + (unsigned)(*s - '0');
		}
		for (int i = nd; i < 9; i++)
			ns *= 10;
	}
	if (*s == 'Z') {
		s++;
	} else if (*s == '+' || *s == '-') {
		int sign = *s++ == '-' ? -1 : 1;

		if (!digits(&s, 2, &oh))
			return false;
		if (*s == ':')
			s++;
		if (!digits(&s, 2, &om) || oh > 23 || om > 59)
			return false;
		off = sign * (int64_t)(oh * 3600 + om * 60);
	}
	while (*s == ' ' || *s == '\r')
		s++;
	if (*s)
		return false;
	leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
	    (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || se > 60)
		return false;
	*sec = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - off;
	*nsec = (int32_t)ns;
	return true;
}

/* A non-negative time in seconds (scale 1e9) or ms (scale 1e6) to ns. */
static int parse_time_float(const char *path, long line, const char *col,
			    const char *s, double scale, int64_t *out,
			    struct ss_error *err)
{
	double v;

	if (!ss_parse_double(s, &v))
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: expected a number, got '%s' (non-numeric)", col, s);
	if (v < 0)
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: negative value '%s' (expected a time >= 0)", col, s);
	if (v * scale > TIME_MAX_NS)
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: time '%s' out of range", col, s);
	*out = llround(v * scale);
	return 0;
}

/* ---- CSV formats ------------------------------------------------------- */

enum role {
	R_TIME, R_PROMPT, R_OUTPUT, R_TENANT, R_PRIORITY, R_PREFIX_ID, R_PREFIX_TOKENS, R_ADAPTER, R_N
};

enum time_kind {
	T_NONE,      /* lengths only */
	T_DATETIME,  /* Azure TIMESTAMP */
	T_SECONDS,   /* float seconds */
	T_MS,        /* float milliseconds */
};

struct csv_layout {
	const char *name;         /* format name, for errors */
	const char *col[R_N];     /* header name per role; NULL = not read */
	bool optional[R_N];       /* column may be absent */
	enum time_kind time;
	const char *expect;       /* required header, for errors */
};

static const struct csv_layout layout_azure = {
	.name = "azure",
	.col = { "TIMESTAMP", "ContextTokens", "GeneratedTokens" },
	.time = T_DATETIME,
	.expect = "TIMESTAMP,ContextTokens,GeneratedTokens",
};

static const struct csv_layout layout_vidur = {
	.name = "vidur",
	.col = { "arrived_at", "num_prefill_tokens", "num_decode_tokens" },
	.time = T_SECONDS,
	.expect = "arrived_at,num_prefill_tokens,num_decode_tokens",
};

static const struct csv_layout layout_native = {
	.name = "native",
	.col = { "arrival_ms", "prompt_tokens", "output_tokens", "tenant", "priority",
		 "prefix_id", "prefix_tokens", "adapter" },
	.optional = { [R_TENANT] = true, [R_PRIORITY] = true,
		      [R_PREFIX_ID] = true, [R_PREFIX_TOKENS] = true, [R_ADAPTER] = true },
	.time = T_MS,
	.expect = "arrival_ms,prompt_tokens,output_tokens[,tenant,priority][,prefix_id,prefix_tokens][,adapter]",
};

static const struct csv_layout layout_lengths = {
	.name = "lengths",
	.col = { NULL, "num_prefill_tokens", "num_decode_tokens" },
	.time = T_NONE,
	.expect = "num_prefill_tokens,num_decode_tokens",
};

#define FIELD_MAX 96   /* bytes kept of a field we read; longer ones are bad anyway */
#define CHUNK (64 * 1024)

/* Where the hashes of a declared prefix (native prefix_id) already are in
 * wl->hashes.  A prefix's hash sequence depends only on its id, so every
 * request with that id points into one slice (the longest written so far)
 * instead of copying it: a 2,000-token system prompt on a million requests
 * costs 500 bytes, not 500 MB.  Open addressing with linear probing keyed by
 * id, grown at half load; id -1 marks an empty slot. */
struct prefix_slot {
	int64_t id;      /* prefix_id >= 0, or -1 when the slot is empty */
	uint32_t off;    /* first hash in wl->hashes */
	uint32_t n;      /* hashes in the slice */
};

struct csv_state {
	struct csv_parser p;
	const struct csv_layout *lay;
	struct workload *wl;
	const char *path;
	struct ss_error *err;
	int rc;                /* first error, 0 while all is well */
	long line;             /* 1-based line where the current record starts */
	long extra_nl;         /* LFs inside quoted fields of the current record */
	bool after_cr;         /* the previous record ended with CR */
	bool header_done;
	long header_line;
	size_t ncols;          /* fields in the header */
	size_t nf;             /* fields seen so far in the current record */
	int role_col[R_N];     /* column index of each role, -1 when absent */
	char fld[R_N][FIELD_MAX];
	long short_line;       /* a row with too few fields, 0 = none */
	size_t short_got;
	bool have_base;        /* first row's time seen */
	int64_t base_sec;      /* first row: seconds (datetime) or ns (floats) */
	int32_t base_nsec;
	struct prefix_slot *pfx;  /* prefix_id -> slice; NULL until the first prefix */
	size_t pfx_cap, pfx_n;    /* slots (a power of two) and slots in use */
	size_t adapter_cap;       /* room in wl->adapter (native adapter column) */
	char buf[CHUNK];
};

static void short_error(struct csv_state *st, bool last)
{
	st->rc = ss_error_set(st->err, -EINVAL, st->path, st->short_line,
			      "%sexpected %zu fields as in the header, got %zu",
			      last ? "truncated last line: " : "", st->ncols, st->short_got);
}

static void on_field(void *field, size_t len, void *data)
{
	struct csv_state *st = data;
	const char *s = field ? field : "";
	size_t col = st->nf++;
	const char *nl = s;

	while ((nl = memchr(nl, '\n', len - (size_t)(nl - s)))) {
		st->extra_nl++;
		nl++;
	}
	if (st->rc)
		return;
	if (memchr(s, '\0', len)) {
		/* C strings would silently cut the field at the NUL */
		st->rc = ss_error_set(st->err, -EINVAL, st->path, st->line,
				      "NUL byte in field %zu (expected text; is this a binary file?)",
				      col + 1);
		return;
	}
	if (!st->header_done) {
		for (int r = 0; r < R_N; r++)
			if (st->lay->col[r] && st->role_col[r] < 0 &&
			    !strcasecmp(s, st->lay->col[r]))
				st->role_col[r] = (int)col;
		return;
	}
	for (int r = 0; r < R_N; r++) {
		if (st->role_col[r] == (int)col) {
			if (len >= FIELD_MAX) {
				memcpy(st->fld[r], s, FIELD_MAX - 4);
				memcpy(st->fld[r] + FIELD_MAX - 4, "...", 4);
			} else {
				memcpy(st->fld[r], s, len);
				st->fld[r][len] = '\0';
			}
		}
	}
}

static void header_end(struct csv_state *st, long line, size_t nf)
{
	st->header_done = true;
	st->header_line = line;
	st->ncols = nf;
	for (int r = 0; r < R_N; r++) {
		if (st->lay->col[r] && !st->lay->optional[r] && st->role_col[r] < 0) {
			st->rc = ss_error_set(st->err, -EINVAL, st->path, line,
					      "missing required column '%s' (%s format expects header %s)",
					      st->lay->col[r], st->lay->name, st->lay->expect);
			return;
		}
	}
	if ((st->role_col[R_PREFIX_ID] < 0) != (st->role_col[R_PREFIX_TOKENS] < 0)) {
		int has = st->role_col[R_PREFIX_ID] >= 0 ? R_PREFIX_ID : R_PREFIX_TOKENS;

		st->rc = ss_error_set(st->err, -EINVAL, st->path, line,
				      "column '%s' without '%s' (%s format expects both or neither: %s)",
				      st->lay->col[has], st->lay->col[R_PREFIX_ID + R_PREFIX_TOKENS - has],
				      st->lay->name, st->lay->expect);
	}
}

/* ---- declared prefixes (native prefix_id, prefix_tokens) ---------------- */

/* Hash of block j (0-based) of declared prefix id: the upper 32 bits of
 * splitmix64(splitmix64(id) ^ j).  Equal ids give equal sequences; two
 * different (id, j) pairs collide with probability about 2^-32.  The formula
 * is in docs/workloads.md so that other tools can produce the same hashes. */
static uint32_t prefix_hash(int64_t id, uint32_t j)
{
	return (uint32_t)(ss_splitmix64(ss_splitmix64((uint64_t)id) ^ j) >> 32);
}

/* The slot of id, inserted (n = 0) when new; NULL when out of memory. */
static struct prefix_slot *prefix_slot(struct csv_state *st, int64_t id)
{
	size_t mask, i;

	if (st->pfx_n * 2 >= st->pfx_cap) {
		size_t cap = st->pfx_cap ? st->pfx_cap * 2 : 64;
		struct prefix_slot *t = malloc(cap * sizeof(*t));

		if (!t)
			return NULL;
		for (i = 0; i < cap; i++)
			t[i].id = -1;
		for (size_t k = 0; k < st->pfx_cap; k++) {
			if (st->pfx[k].id < 0)
				continue;
			for (i = ss_splitmix64((uint64_t)st->pfx[k].id) & (cap - 1); t[i].id >= 0;
			     i = (i + 1) & (cap - 1))
				;
			t[i] = st->pfx[k];
		}
		free(st->pfx);
		st->pfx = t;
		st->pfx_cap = cap;
	}
	mask = st->pfx_cap - 1;
	for (i = ss_splitmix64((uint64_t)id) & mask; st->pfx[i].id != id; i = (i + 1) & mask) {
		if (st->pfx[i].id < 0) {
			st->pfx[i] = (struct prefix_slot){ .id = id };
			st->pfx_n++;
			break;
		}
	}
	return &st->pfx[i];
}

static bool blank_field(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return !*s;
}

/* A native row's prefix_id (empty or -1: none) and prefix_tokens
 * (0..prompt_tokens; empty = 0 when there is no prefix_id): point r at the
 * first prefix_tokens / NATIVE_BLOCK_TOKENS hashes of the prefix. */
static int row_prefix(struct csv_state *st, long line, struct wl_request *r)
{
	const char *idcol = st->lay->col[R_PREFIX_ID], *ids = st->fld[R_PREFIX_ID];
	const char *tcol = st->lay->col[R_PREFIX_TOKENS], *ts = st->fld[R_PREFIX_TOKENS];
	struct workload *wl = st->wl;
	struct prefix_slot *slot;
	enum num_status ns;
	int32_t tokens = 0;
	int64_t id = -1;
	uint32_t n;
	double d;

	if (!blank_field(ids)) {
		if (!ss_parse_int64(ids, &id)) {
			if (!ss_parse_double(ids, &d) || d != floor(d) || d < -1 || d > 9.2e18)
				id = -2;
			else
				id = (int64_t)d;
		}
		if (id < -1)
			return ss_error_set(st->err, -EINVAL, st->path, line,
					    "%s: expected an integer >= 0 (or -1 or empty for none), got '%s'",
					    idcol, ids);
	}
	if (!blank_field(ts)) {
		ns = parse_count(ts, false, &tokens);
		if (ns != NUM_OK)
			return count_error(st->err, st->path, line, tcol, ts, ns, 0);
		if (tokens > r->prompt_tokens)
			return ss_error_set(st->err, -EINVAL, st->path, line,
					    "%s: %d tokens, more than the prompt's %d (expected 0..prompt_tokens)",
					    tcol, tokens, r->prompt_tokens);
	} else if (id >= 0) {
		return ss_error_set(st->err, -EINVAL, st->path, line,
				    "%s: empty for %s %lld (expected 0..%d tokens)",
				    tcol, idcol, (long long)id, r->prompt_tokens);
	}
	if (id < 0) {
		if (tokens > 0)
			return ss_error_set(st->err, -EINVAL, st->path, line,
					    "%s: %d tokens but no %s (expected a %s >= 0, or %s 0 or empty)",
					    tcol, tokens, idcol, idcol, tcol);
		return 0;
	}
	n = (uint32_t)tokens / NATIVE_BLOCK_TOKENS;
	if (n == 0)
		return 0;
	slot = prefix_slot(st, id);
	if (!slot)
		return ss_error_set(st->err, -ENOMEM, st->path, line, "out of memory");
	if (slot->n < n) {
		if (wl->n_hashes + n > UINT32_MAX)
			return ss_error_set(st->err, -E2BIG, st->path, line,
					    "%s: more than 2^32 prefix block hashes in all", idcol);
		if (wl_reserve_hashes(wl, wl->n_hashes + n))
			return ss_error_set(st->err, -ENOMEM, st->path, line, "out of memory");
		for (uint32_t j = 0; j < n; j++)
			wl->hashes[wl->n_hashes + j] = prefix_hash(id, j);
		slot->off = (uint32_t)wl->n_hashes;
		slot->n = n;
		wl->n_hashes += n;
	}
	r->prefix_off = slot->off;
	r->prefix_n = n;
	return 0;
}

static void data_row(struct csv_state *st, long line, size_t nf)
{
	const struct csv_layout *lay = st->lay;
	struct wl_request r = { 0 };
	enum num_status ns;
	int64_t t = 0, sec;
	int32_t nsec;

	if (nf > st->ncols) {
		st->rc = ss_error_set(st->err, -EINVAL, st->path, line,
				      "expected %zu fields as in the header, got %zu",
				      st->ncols, nf);
		return;
	}
	if (nf < st->ncols) {
		/* an error either way; which message depends on whether more
		 * rows follow (see on_record and csv_read) */
		st->short_line = line;
		st->short_got = nf;
		return;
	}
	switch (lay->time) {
	case T_NONE:
		break;
	case T_DATETIME:
		if (!parse_datetime(st->fld[R_TIME], &sec, &nsec)) {
			st->rc = ss_error_set(st->err, -EINVAL, st->path, line,
					      "%s: bad timestamp '%s' (expected YYYY-MM-DD HH:MM:SS[.fffffffff][+HH:MM])",
					      lay->col[R_TIME], st->fld[R_TIME]);
			return;
		}
		if (!st->have_base) {
			st->have_base = true;
			st->base_sec = sec;
			st->base_nsec = nsec;
		}
		if (llabs(sec - st->base_sec) > (int64_t)(TIME_MAX_NS / 1e9) - 1) {
			st->rc = ss_error_set(st->err, -EINVAL, st->path, line,
					      "%s: timestamp '%s' is more than 146 years from the first row",
					      lay->col[R_TIME], st->fld[R_TIME]);
			return;
		}
		t = (sec - st->base_sec) * 1000000000 + (nsec - st->base_nsec);
		break;
	case T_SECONDS:
	case T_MS:
		st->rc = parse_time_float(st->path, line, lay->col[R_TIME], st->fld[R_TIME],
					  lay->time == T_SECONDS ? 1e9 : 1e6, &t, st->err);
		if (st->rc)
			return;
		if (!st->have_base) {
			st->have_base = true;
			st->base_sec = t;
		}
		t -= st->base_sec;
		break;
	}
	r.arrival_ns = t;
	st->rc = parse_lengths(st->path, line, lay->col[R_PROMPT], st->fld[R_PROMPT],
			       lay->col[R_OUTPUT], st->fld[R_OUTPUT], &r, st->err);
	if (st->rc)
		return;
	if (st->role_col[R_TENANT] >= 0) {
		ns = parse_count(st->fld[R_TENANT], false, &r.tenant);
		if (ns != NUM_OK) {
			st->rc = count_error(st->err, st->path, line, lay->col[R_TENANT],
					     st->fld[R_TENANT], ns, 0);
			return;
		}
	}
	if (st->role_col[R_PRIORITY] >= 0) {
		ns = parse_count(st->fld[R_PRIORITY], true, &r.priority);
		if (ns != NUM_OK) {
			st->rc = count_error(st->err, st->path, line, lay->col[R_PRIORITY],
					     st->fld[R_PRIORITY], ns, INT32_MIN);
			return;
		}
	}
	if (st->role_col[R_PREFIX_ID] >= 0) {   /* header_end: both or neither */
		st->rc = row_prefix(st, line, &r);
		if (st->rc)
			return;
	}
	if (st->wl->n >= WL_MAX_REQUESTS) {
		st->rc = ss_error_set(st->err, -E2BIG, st->path, line,
				      "more than %u requests", WL_MAX_REQUESTS);
		return;
	}
	if (st->wl->n == st->wl->cap && wl_reserve(st->wl, st->wl->n + 1)) {
		st->rc = ss_error_set(st->err, -ENOMEM, st->path, line, "out of memory");
		return;
	}
	if (st->role_col[R_ADAPTER] >= 0) {
		/* the adapter a request names (sim/lora.h): empty or -1 = none */
		int32_t a = -1;
		const char *s = st->fld[R_ADAPTER];

		ns = s[0] ? parse_count(s, true, &a) : NUM_OK;
		if (ns != NUM_OK || a < -1 || a >= 1000000) {
			st->rc = ss_error_set(st->err, -EINVAL, st->path, line,
					      "%s: expected an adapter id 0..999999, or -1 or empty for none, got '%s'",
					      lay->col[R_ADAPTER], s);
			return;
		}
		if (st->wl->n >= st->adapter_cap) {
			size_t cap = st->wl->cap > st->wl->n ? st->wl->cap : st->wl->n + 1;
			int32_t *t = realloc(st->wl->adapter, cap * sizeof(*t));

			if (!t) {
				st->rc = ss_error_set(st->err, -ENOMEM, st->path, line, "out of memory");
				return;
			}
			st->wl->adapter = t;
			st->adapter_cap = cap;
		}
		st->wl->adapter[st->wl->n] = a;
	}
	st->wl->req[st->wl->n++] = r;
}

static void on_record(int c, void *data)
{
	struct csv_state *st = data;
	size_t nf = st->nf;
	long line = st->line;

	st->nf = 0;
	if (c == '\n' && st->after_cr && nf == 0) {
		st->after_cr = false;   /* the LF of a CRLF */
		return;
	}
	st->after_cr = c == '\r';
	st->line += 1 + st->extra_nl;
	st->extra_nl = 0;
	if (nf == 0 || st->rc)
		return;                 /* blank line, or already failed */
	if (st->short_line) {
		short_error(st, false); /* the short row was not the last */
		return;
	}
	if (!st->header_done)
		header_end(st, line, nf);
	else
		data_row(st, line, nf);
}

static int csv_read(struct workload *wl, FILE *f, const char *path,
		    struct csv_state *st, const struct csv_layout *lay,
		    struct ss_error *err)
{
	const unsigned char opts = CSV_STRICT | CSV_STRICT_FINI | CSV_REPALL_NL | CSV_APPEND_NULL;
	bool first = true, failed = false;
	size_t n, off, ok, run = 0;  /* run: bytes of the current line so far */

	st->lay = lay;
	st->wl = wl;
	st->path = path;
	st->err = err;
	st->line = 1;
	for (int r = 0; r < R_N; r++)
		st->role_col[r] = -1;
	if (csv_init(&st->p, opts))
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	/* libcsv grows a field's buffer by this much at a time (128 bytes by
	 * default): a field up to SS_LINE_MAX long then takes a few dozen
	 * reallocations, not thousands */
	csv_set_blk_size(&st->p, 1u << 16);
	while (!st->rc && (n = fread(st->buf, 1, sizeof(st->buf), f)) > 0) {
		off = 0;
		if (first && n >= 3 && !memcmp(st->buf, "\xef\xbb\xbf", 3))
			off = 3;        /* UTF-8 byte order mark */
		first = false;
		ok = ss_line_bounded(st->buf + off, n - off, &run, SS_LINE_MAX);
		if (ok < n - off) {
			/* parse up to the long line to know its number */
			csv_parse(&st->p, st->buf + off, ok, on_field, on_record, st);
			if (!st->rc)
				st->rc = ss_error_set(err, -EINVAL, path, st->line + st->extra_nl,
						      "line longer than %u bytes (expected one record per line; is this a CSV file?)",
						      SS_LINE_MAX);
			break;
		}
		if (csv_parse(&st->p, st->buf + off, n - off, on_field, on_record, st) != n - off) {
			if (!st->rc)
				st->rc = ss_error_set(err, csv_error(&st->p) == CSV_ENOMEM ? -ENOMEM : -EINVAL,
						      path, st->line,
						      "malformed CSV: %s (expected comma-separated fields, quotes only around whole fields)",
						      csv_strerror(csv_error(&st->p)));
			failed = true;
		}
	}
	if (!st->rc && ferror(f)) {
		st->rc = -errno;
		if (!st->rc)
			st->rc = -EIO;
		ss_error_set(err, st->rc, path, 0, "read error: %s", strerror(-st->rc));
	}
	if (!st->rc && !failed && csv_fini(&st->p, on_field, on_record, st) && !st->rc)
		st->rc = ss_error_set(err, -EINVAL, path, st->line,
				      "truncated last line: unterminated quoted field");
	csv_free(&st->p);
	free(st->pfx);
	st->pfx = NULL;
	if (st->rc)
		return st->rc;
	if (!st->header_done)
		return ss_error_set(err, -EINVAL, path, 0, "empty file: expected a header line (%s)",
				    lay->expect);
	if (st->short_line) {
		short_error(st, true);
		return st->rc;
	}
	if (wl->n == 0)
		return ss_error_set(err, -EINVAL, path, st->header_line,
				    "header only: expected at least one request row after the header");
	wl->has_arrivals = lay->time != T_NONE;
	wl->hash_block_tokens = wl->n_hashes ? NATIVE_BLOCK_TOKENS : 0;
	return 0;
}

static int read_azure(struct workload *wl, FILE *f, const char *path, void *priv,
		      struct ss_error *err)
{
	return csv_read(wl, f, path, priv, &layout_azure, err);
}

static int read_vidur(struct workload *wl, FILE *f, const char *path, void *priv,
		      struct ss_error *err)
{
	return csv_read(wl, f, path, priv, &layout_vidur, err);
}

static int read_native(struct workload *wl, FILE *f, const char *path, void *priv,
		       struct ss_error *err)
{
	return csv_read(wl, f, path, priv, &layout_native, err);
}

static int read_lengths(struct workload *wl, FILE *f, const char *path, void *priv,
			struct ss_error *err)
{
	return csv_read(wl, f, path, priv, &layout_lengths, err);
}

/* ---- Mooncake JSON lines ----------------------------------------------- */

static bool blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

/* A JSON count: an integer, or a real that is integral. */
static int json_count(const char *path, long line, json_t *obj, const char *key,
		      int32_t *out, struct ss_error *err)
{
	json_t *v = json_object_get(obj, key);
	char txt[64];
	enum num_status st;

	if (!v)
		return ss_error_set(err, -EINVAL, path, line,
				    "missing key '%s' (expected timestamp, input_length, output_length[, hash_ids])",
				    key);
	if (json_is_integer(v))
		snprintf(txt, sizeof(txt), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(txt, sizeof(txt), "%.17g", json_real_value(v));
	else
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: expected an integer, got a JSON %s (non-numeric)", key,
				    json_is_string(v) ? "string" : json_is_array(v) ? "array" :
				    json_is_object(v) ? "object" : "literal");
	st = parse_count(txt, false, out);
	if (st != NUM_OK)
		return count_error(err, path, line, key, txt, st, 1);
	return 0;
}

static int mooncake_row(struct workload *wl, const char *path, long line,
			json_t *obj, struct ss_error *err)
{
	struct wl_request r = { 0 };
	json_t *ts, *ids;
	int64_t t;
	double v;
	size_t nid;
	int rc;

	if (!json_is_object(obj))
		return ss_error_set(err, -EINVAL, path, line,
				    "expected a JSON object with timestamp, input_length, output_length");
	ts = json_object_get(obj, "timestamp");
	if (!ts)
		return ss_error_set(err, -EINVAL, path, line,
				    "missing key 'timestamp' (expected timestamp, input_length, output_length[, hash_ids])");
	if (!json_is_number(ts))
		return ss_error_set(err, -EINVAL, path, line,
				    "timestamp: expected a number of ms (non-numeric)");
	v = json_number_value(ts);
	if (v < 0)
		return ss_error_set(err, -EINVAL, path, line,
				    "timestamp: negative value %g (expected ms >= 0)", v);
	if (v * 1e6 > TIME_MAX_NS)
		return ss_error_set(err, -EINVAL, path, line, "timestamp: %g ms out of range", v);
	t = llround(v * 1e6);
	rc = json_count(path, line, obj, "input_length", &r.prompt_tokens, err);
	if (!rc)
		rc = json_count(path, line, obj, "output_length", &r.output_tokens, err);
	if (rc)
		return rc;
	if (r.prompt_tokens < 1)
		return ss_error_set(err, -EINVAL, path, line,
				    "input_length: prompt of %d tokens (expected prompt >= 1)",
				    r.prompt_tokens);
	if (r.output_tokens < 1)
		return ss_error_set(err, -EINVAL, path, line,
				    "output_length: output of %d tokens (expected output >= 1)",
				    r.output_tokens);
	ids = json_object_get(obj, "hash_ids");
	if (ids && !json_is_array(ids))
		return ss_error_set(err, -EINVAL, path, line,
				    "hash_ids: expected an array of block hashes");
	nid = ids ? json_array_size(ids) : 0;
	if (nid) {
		if (wl->n_hashes + nid > UINT32_MAX)
			return ss_error_set(err, -E2BIG, path, line, "hash_ids: more than 2^32 in all");
		if (wl_reserve_hashes(wl, wl->n_hashes + nid))
			return ss_error_set(err, -ENOMEM, path, line, "out of memory");
		r.prefix_off = (uint32_t)wl->n_hashes;
		r.prefix_n = (uint32_t)nid;
		for (size_t i = 0; i < nid; i++) {
			json_t *h = json_array_get(ids, i);

			if (!json_is_integer(h) || json_integer_value(h) < 0 ||
			    json_integer_value(h) > UINT32_MAX)
				return ss_error_set(err, -EINVAL, path, line,
						    "hash_ids[%zu]: expected an integer in 0..4294967295",
						    i);
			wl->hashes[wl->n_hashes + i] = (uint32_t)json_integer_value(h);
		}
		wl->n_hashes += nid;
	}
	if (wl->n >= WL_MAX_REQUESTS)
		return ss_error_set(err, -E2BIG, path, line, "more than %u requests",
				    WL_MAX_REQUESTS);
	if (wl->n == 0)
		wl->has_arrivals = true;
	r.arrival_ns = t;
	if (wl->n == wl->cap && wl_reserve(wl, wl->n + 1))
		return ss_error_set(err, -ENOMEM, path, line, "out of memory");
	wl->req[wl->n++] = r;
	return 0;
}

/* getline() with a bound: the next line of f, with its LF, into *buf (NUL
 * bytes kept; *len counts them).  Returns 1 with a line, 0 at the end of
 * the stream (or a read error: check ferror), -E2BIG when the line is longer
 * than max bytes, -ENOMEM. */
static int bounded_line(FILE *f, size_t max, char **buf, size_t *cap, size_t *len)
{
	size_t n = 0;
	int c;

	while ((c = getc(f)) != EOF) {
		if (n + 2 > *cap) {
			size_t nc = *cap ? 2 * *cap : 4096;
			char *nb = realloc(*buf, nc);

			if (!nb)
				return -ENOMEM;
			*buf = nb;
			*cap = nc;
		}
		(*buf)[n++] = (char)c;
		if (c == '\n')
			break;
		if (n > max)
			return -E2BIG;
	}
	if (n)
		(*buf)[n] = '\0';
	*len = n;
	return n > 0;
}

static int read_mooncake(struct workload *wl, FILE *f, const char *path, void *priv,
			 struct ss_error *err)
{
	char *buf = NULL, *s;
	size_t cap = 0, len;
	long line = 0;
	int64_t base = 0;
	int rc = 0, got;

	(void)priv;
	while ((got = bounded_line(f, SS_LINE_MAX, &buf, &cap, &len)) > 0) {
		bool last = buf[len - 1] != '\n';
		json_error_t jerr;
		json_t *obj;

		line++;
		s = buf;
		if (line == 1 && len >= 3 && !memcmp(s, "\xef\xbb\xbf", 3)) {
			s += 3;         /* UTF-8 byte order mark */
			len -= 3;
		}
		if (blank(s, len))
			continue;
		obj = json_loadb(s, len, 0, &jerr);
		if (!obj) {
			rc = ss_error_set(err, -EINVAL, path, line,
					  "%sinvalid JSON: %s (expected one JSON object per line)",
					  last ? "truncated last line: " : "", jerr.text);
			goto out;
		}
		rc = mooncake_row(wl, path, line, obj, err);
		json_decref(obj);
		if (rc)
			goto out;
		if (wl->n == 1)
			base = wl->req[0].arrival_ns;
		wl->req[wl->n - 1].arrival_ns -= base;
	}
	if (got == -E2BIG) {
		rc = ss_error_set(err, -EINVAL, path, line + 1,
				  "line longer than %u bytes (expected one JSON object per line)",
				  SS_LINE_MAX);
		goto out;
	}
	if (got < 0) {
		rc = ss_error_set(err, got, path, line + 1, "out of memory");
		goto out;
	}
	if (ferror(f)) {
		rc = -errno;
		if (!rc)
			rc = -EIO;
		ss_error_set(err, rc, path, 0, "read error: %s", strerror(-rc));
		goto out;
	}
	if (line == 0) {
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "empty file: expected a JSON object per line");
		goto out;
	}
	if (wl->n == 0) {
		rc = ss_error_set(err, -EINVAL, path, line,
				  "no requests: expected a JSON object per line");
		goto out;
	}
	wl->has_arrivals = true;
	wl->hash_block_tokens = wl->n_hashes ? MOONCAKE_BLOCK_TOKENS : 0;
out:
	free(buf);
	return rc;
}

/* ---- the readers' tables (registered in registry.def) ------------------- */

static bool has_layout(const struct trace_header *h, const struct csv_layout *lay);

static bool detect_azure(const struct trace_sniff *sn)
{
	return sn->h && has_layout(sn->h, &layout_azure);
}

static bool detect_vidur(const struct trace_sniff *sn)
{
	return sn->h && has_layout(sn->h, &layout_vidur);
}

static bool detect_native(const struct trace_sniff *sn)
{
	return sn->h && has_layout(sn->h, &layout_native);
}

static bool detect_lengths(const struct trace_sniff *sn)
{
	return sn->h && has_layout(sn->h, &layout_lengths);
}

/* Any JSON object per line that a more specific JSON reader before it in
 * the registry did not claim. */
static bool detect_mooncake(const struct trace_sniff *sn)
{
	return sn->json && sn->s[0] == '{';
}

const struct trace_reader reader_azure = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_AZURE, "azure",
		  "Azure LLM inference CSV: TIMESTAMP,ContextTokens,GeneratedTokens (2023 and 2024)" },
	.priv_size = sizeof(struct csv_state),
	.expect = "TIMESTAMP,ContextTokens,GeneratedTokens",
	.detect = detect_azure,
	.read = read_azure,
};

const struct trace_reader reader_mooncake = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_MOONCAKE, "mooncake",
		  "Mooncake JSONL: timestamp (ms), input_length, output_length, hash_ids (512-token blocks)" },
	.detect = detect_mooncake,
	.read = read_mooncake,
};

const struct trace_reader reader_vidur = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_VIDUR, "vidur",
		  "Vidur CSV: arrived_at (s), num_prefill_tokens, num_decode_tokens" },
	.priv_size = sizeof(struct csv_state),
	.expect = "arrived_at,num_prefill_tokens,num_decode_tokens",
	.detect = detect_vidur,
	.read = read_vidur,
};

const struct trace_reader reader_native = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_NATIVE, "native",
		  "servesim CSV: arrival_ms, prompt_tokens, output_tokens [, tenant, priority] [, prefix_id, prefix_tokens]" },
	.priv_size = sizeof(struct csv_state),
	.expect = "arrival_ms,prompt_tokens,output_tokens",
	.detect = detect_native,
	.read = read_native,
};

const struct trace_reader reader_lengths = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_LENGTHS, "lengths",
		  "lengths-only CSV: num_prefill_tokens, num_decode_tokens (no arrival times)" },
	.priv_size = sizeof(struct csv_state),
	.expect = "num_prefill_tokens,num_decode_tokens",
	.detect = detect_lengths,
	.read = read_lengths,
};

/* Per-request serving benchmark results (serving.c), replayed. */
static int read_bench(struct workload *wl, FILE *f, const char *path, void *priv,
		      struct ss_error *err)
{
	(void)priv;
	return serving_to_workload(wl, f, path, SERVING_BENCH, err);
}

static int read_llmd(struct workload *wl, FILE *f, const char *path, void *priv,
		     struct ss_error *err)
{
	(void)priv;
	return serving_to_workload(wl, f, path, SERVING_LLMD, err);
}

static int read_distserve(struct workload *wl, FILE *f, const char *path, void *priv,
			  struct ss_error *err)
{
	(void)priv;
	return serving_to_workload(wl, f, path, SERVING_DISTSERVE, err);
}

static int read_llmservingsim(struct workload *wl, FILE *f, const char *path, void *priv,
			      struct ss_error *err)
{
	(void)priv;
	return serving_to_workload(wl, f, path, SERVING_LLMSERVINGSIM, err);
}

/* A vLLM or SGLang result: one of their keys, or a lone '{' opening an
 * indented vLLM result (Mooncake's one object per line never is). */
static bool detect_bench(const struct trace_sniff *sn)
{
	return sn->json && sn->s[0] == '{' &&
	       (sn->len == 1 || trace_sniff_has(sn, "\"input_lens\"") ||
		trace_sniff_has(sn, "\"ttfts\"") || trace_sniff_has(sn, "\"num_prompts\"") ||
		trace_sniff_has(sn, "\"request_rate\"") ||
		trace_sniff_has(sn, "\"max_concurrency\""));
}

static bool detect_llmd(const struct trace_sniff *sn)
{
	return sn->h && trace_sniff_col(sn, "prompt_tokens") &&
	       trace_sniff_col(sn, "generation_tokens") && trace_sniff_col(sn, "launch_time");
}

/* A Python list of dicts. */
static bool detect_distserve(const struct trace_sniff *sn)
{
	return sn->json && sn->s[0] == '[';
}

static bool detect_llmservingsim(const struct trace_sniff *sn)
{
	return sn->json && sn->s[0] == '{' && trace_sniff_has(sn, "\"input_toks\"");
}

const struct trace_reader reader_bench = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_BENCH, "bench",
		  "vllm bench serve --save-result JSON / SGLang bench_serving JSONL: input_lens, output_lens[, start_times]" },
	.detect = detect_bench,
	.read = read_bench,
};

const struct trace_reader reader_llmd = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_LLMD, "llm-d",
		  "llm-d per-request CSV: prompt_tokens, generation_tokens, ttft, generation_time, launch_time (s), finish_time" },
	.expect = "prompt_tokens,generation_tokens,launch_time,...",
	.detect = detect_llmd,
	.read = read_llmd,
};

const struct trace_reader reader_distserve = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_DISTSERVE, "distserve",
		  "DistServe .exp: Python list of {prompt_len, output_len, issue_time (s) | start_time (s), ...}" },
	.detect = detect_distserve,
	.read = read_distserve,
};

const struct trace_reader reader_llmservingsim = {
	.version = TRACE_READER_VERSION,
	.info = { TRACE_LLMSERVINGSIM, "llmservingsim",
		  "LLMServingSim requests.jsonl: input_toks, output_toks, arrival_time (s), engine time stamps" },
	.detect = detect_llmservingsim,
	.read = read_llmservingsim,
};

/* ---- detection --------------------------------------------------------- */

#define DETECT_COLS 64

struct trace_header {
	char name[DETECT_COLS][48];
	size_t n;
};

static void detect_field(void *s, size_t len, void *data)
{
	struct trace_header *h = data;

	if (h->n < DETECT_COLS)
		snprintf(h->name[h->n++], sizeof(h->name[0]), "%.*s", (int)len, (const char *)s);
}

static void detect_record(int c, void *data)
{
	(void)c;
	(void)data;
}

static bool has_col(const struct trace_header *h, const char *name)
{
	for (size_t i = 0; i < h->n; i++)
		if (!strcasecmp(h->name[i], name))
			return true;
	return false;
}

bool trace_sniff_col(const struct trace_sniff *sn, const char *name)
{
	return sn->h && has_col(sn->h, name);
}

bool trace_sniff_has(const struct trace_sniff *sn, const char *text)
{
	return memmem(sn->s, sn->len, text, strlen(text)) != NULL;
}

static bool has_layout(const struct trace_header *h, const struct csv_layout *lay)
{
	for (int r = 0; r < R_N; r++)
		if (lay->col[r] && !lay->optional[r] && !has_col(h, lay->col[r]))
			return false;
	return true;
}

/* The aggregate result table (calibrate fit-engine's, traces/serving.h)
 * a header names, or NULL: these hold no requests to replay. */
static const char *aggregate_table(const struct trace_sniff *sn)
{
	static const struct { const char *col, *col2, *name; } tables[] = {
		{ "silicon_ttft_ms", NULL, "aiconfigurator silicon" },
		{ "prompt_time", "token_time", "Splitwise static batch" },
		{ "task_inputs-model", "time_to_first_token-avg", "NVIDIA NIM GenAI-Perf" },
		{ "serve_cmd", "ttft_p50_ms", "GPUStack vllm bench serve" },
		{ "1st Token Latency (ms)", "Token-to-token Latency (ms)",
		  "TensorRT-LLM 0.9 static batch" },
	};

	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (trace_sniff_col(sn, tables[i].col) &&
		    (!tables[i].col2 || trace_sniff_col(sn, tables[i].col2)))
			return tables[i].name;
	return NULL;
}

/* The format of a first non-blank line s (len bytes, BOM and line end
 * included), found on line `line` of path: the first reader of the
 * registry that detects it. */
static int detect_line(const char *path, long line, const char *s, size_t len,
		       enum trace_format *fmt, struct ss_error *err)
{
	struct trace_sniff sn = { 0 };
	const struct trace_reader *rd;
	struct trace_header *h = NULL;
	struct csv_parser p;
	const char *table;
	char expected[512];
	int rc = 0;

	if (line == 1 && len >= 3 && !memcmp(s, "\xef\xbb\xbf", 3)) {
		s += 3;
		len -= 3;
	}
	while (len > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	sn.json = len > 0 && (*s == '{' || *s == '[');
	if (sn.json) {
		while (len > 1 && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' ' ||
				   s[len - 1] == '\t'))
			len--;
	} else {
		h = calloc(1, sizeof(*h));
		if (!h || csv_init(&p, CSV_APPEND_NULL)) {
			free(h);
			return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
		}
		while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
			len--;
		csv_parse(&p, s, len, detect_field, detect_record, h);
		csv_fini(&p, detect_field, detect_record, h);
		csv_free(&p);
		sn.h = h;
	}
	sn.s = s;
	sn.len = len;
	rd = trace_reader_detect(&sn);
	if (rd) {
		*fmt = rd->info.fmt;
	} else if ((table = aggregate_table(&sn))) {
		rc = ss_error_set(err, -EINVAL, path, line,
				  "an aggregate benchmark table (%s): it has no requests to replay "
				  "(expected a per-request trace; tables are read by the engine fitting)",
				  table);
	} else {
		trace_readers_expected(expected, sizeof(expected));
		rc = ss_error_set(err, -EINVAL, path, line,
				  "unrecognized header '%.*s': expected %s, or one JSON object per line (mooncake)",
				  (int)(len > 120 ? 120 : len), s, expected);
	}
	free(h);
	return rc;
}

int trace_peek_detect(FILE *f, const char *path, struct trace_peek *pk,
		      enum trace_format *fmt, struct ss_error *err)
{
	size_t start = 0;   /* where the current line starts in pk->buf */
	long line = 1;
	bool blank_so_far = true;
	int c;

	*pk = (struct trace_peek){ 0 };
	for (;;) {
		c = getc(f);
		if (c == EOF)
			break;
		if (pk->len + 1 > pk->cap) {
			size_t nc = pk->cap ? 2 * pk->cap : 4096;
			char *nb = realloc(pk->buf, nc);

			if (!nb)
				return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
			pk->buf = nb;
			pk->cap = nc;
		}
		pk->buf[pk->len++] = (char)c;
		if (c == '\n') {
			if (!blank_so_far)
				break;
			start = pk->len;
			line++;
			continue;
		}
		if (c != ' ' && c != '\t' && c != '\r')
			blank_so_far = false;
		if (pk->len - start > SS_LINE_MAX) {
			/* a serving result is often one long JSON line: its
			 * first bytes tell the format */
			size_t i = start;

			while (i < pk->len && (pk->buf[i] == ' ' || pk->buf[i] == '\t' ||
					       pk->buf[i] == '\r'))
				i++;
			if (line == 1 && pk->len - start >= 3 && !memcmp(pk->buf + start, "\xef\xbb\xbf", 3))
				i = start + 3;
			if (i < pk->len && (pk->buf[i] == '{' || pk->buf[i] == '['))
				return detect_line(path, line, pk->buf + start, pk->len - start, fmt, err);
			return ss_error_set(err, -EINVAL, path, line,
					    "line longer than %u bytes (expected a header line or a JSON object)",
					    SS_LINE_MAX);
		}
	}
	if (ferror(f)) {
		int rc = errno ? -errno : -EIO;

		return ss_error_set(err, rc, path, 0, "read error: %s", strerror(-rc));
	}
	if (blank_so_far)
		return ss_error_set(err, -EINVAL, path, 0, "empty file: expected a header line");
	return detect_line(path, line, pk->buf + start, pk->len - start, fmt, err);
}

int trace_detect(const char *path, enum trace_format *fmt, struct ss_error *err)
{
	struct trace_peek pk;
	FILE *f;
	int rc;

	f = fopen(path, "rb");
	if (!f) {
		rc = -errno;
		return ss_error_set(err, rc, path, 0, "cannot open trace: %s", strerror(-rc));
	}
	rc = trace_peek_detect(f, path, &pk, fmt, err);
	free(pk.buf);
	fclose(f);
	return rc;
}
