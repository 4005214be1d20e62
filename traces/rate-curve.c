/* servesim — --rate-curve: a request rate over time read from a CSV file of
 * time_s,rate rows (libcsv), and its inversion for a non-homogeneous
 * Poisson process (docs/workloads.md, "Rate curves").
 *
 * The rate is linear between rows and the curve repeats with the period
 * of its last row's time.  An NHPP with cumulative rate L(t) is a unit-rate
 * Poisson process on the L axis mapped back through L^-1, so arrivals are
 * drawn as exponential(1) steps of L and inverted here, segment by segment
 * (L is quadratic within a segment): exact, with no rejected draws.
 */
#include "workload-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <csv.h>

#include "params.h"

/* Most rows a curve may have (a year of minutes is 525,600). */
#define CURVE_ROWS_MAX 10000000u

struct curve_state {
	struct rate_curve *c;
	const char *path;
	struct ss_error *err;
	char field[2][64];
	size_t nf;              /* fields of the current record so far */
	bool too_long;          /* a field longer than field[] */
	size_t nul_field;       /* 1-based field of the record holding a NUL byte, 0: none */
	bool header_done;
	int col_t, col_r;       /* header order of time_s and rate */
	size_t line;            /* 1-based line of the current record */
	size_t last_line;       /* line of the last record (header or row) */
	size_t cap;
	int rc;
};

static void on_field(void *s, size_t len, void *data)
{
	struct curve_state *st = data;

	/* C strings would silently cut the field at the NUL (as the trace
	 * readers, traces/readers.c): the first such field is said */
	if (!st->nul_field && memchr(s, '\0', len))
		st->nul_field = st->nf + 1;
	if (st->nf < 2) {
		if (len >= sizeof(st->field[0]))
			st->too_long = true;
		else
			snprintf(st->field[st->nf], sizeof(st->field[0]), "%.*s", (int)len,
				 (const char *)s);
	}
	st->nf++;
}

static int row_error(struct curve_state *st, const char *fmt, const char *col, const char *val)
{
	return st->rc = ss_error_set(st->err, -EINVAL, st->path, (long)st->line, fmt, col, val);
}

static void on_record(int ch, void *data)
{
	struct curve_state *st = data;
	struct rate_curve *c = st->c;
	const char *ft, *fr;
	double t, r;
	size_t nf = st->nf;

	(void)ch;
	st->nf = 0;
	if (!st->rc && st->nul_field) {
		st->rc = ss_error_set(st->err, -EINVAL, st->path, (long)st->line,
				      "NUL byte in field %zu (expected text; is this a binary file?)",
				      st->nul_field);
		return;
	}
	if (st->rc || nf == 0 || (nf == 1 && !st->field[0][0]))
		return;                 /* after an error, or a blank line */
	st->last_line = st->line;
	if (!st->header_done) {
		for (int j = 0; j < 2 && nf == 2; j++) {
			if (!strcmp(st->field[j], "time_s"))
				st->col_t = j;
			else if (!strcmp(st->field[j], "rate"))
				st->col_r = j;
		}
		if (nf != 2 || st->too_long || st->col_t < 0 || st->col_r < 0 ||
		    st->col_t == st->col_r) {
			st->rc = ss_error_set(st->err, -EINVAL, st->path, (long)st->line,
					      "expected the header time_s,rate (a rate curve: time in s, "
					      "rate in req/s), got %zu field%s starting '%.40s'",
					      nf, nf == 1 ? "" : "s", st->field[0]);
			return;
		}
		st->header_done = true;
		return;
	}
	if (nf != 2 || st->too_long) {
		st->rc = ss_error_set(st->err, -EINVAL, st->path, (long)st->line,
				      "expected 2 fields (time_s,rate), got %zu%s", nf,
				      st->too_long ? " (or a field over 63 bytes)" : "");
		return;
	}
	ft = st->field[st->col_t];
	fr = st->field[st->col_r];
	if (!ss_parse_double(ft, &t) || t < 0 || t > RATE_CURVE_TIME_MAX) {
		row_error(st, "%s: expected a time from 0 to 1e9 s, got '%s'", "time_s", ft);
		return;
	}
	if (!ss_parse_double(fr, &r) || r < 0 || r > 1e9) {
		row_error(st, "%s: expected a rate from 0 to 1e9 req/s, got '%s'", "rate", fr);
		return;
	}
	if (c->n == 0 && t != 0) {
		row_error(st, "%s: expected the first row at time 0, got '%s'", "time_s", ft);
		return;
	}
	if (c->n > 0 && !(t > c->t[c->n - 1])) {
		row_error(st, "%s: expected times increasing row by row, got '%s' after an equal or "
			  "later one", "time_s", ft);
		return;
	}
	if (c->n == CURVE_ROWS_MAX) {
		st->rc = ss_error_set(st->err, -E2BIG, st->path, (long)st->line,
				      "more than %u rows", CURVE_ROWS_MAX);
		return;
	}
	if (c->n == st->cap) {
		size_t cap = st->cap ? 2 * st->cap : 64;
		double *nt = realloc(c->t, cap * sizeof(*nt)), *nr;

		if (nt)
			c->t = nt;
		nr = nt ? realloc(c->r, cap * sizeof(*nr)) : NULL;
		if (!nr) {
			st->rc = ss_error_set(st->err, -ENOMEM, st->path, 0, "out of memory");
			return;
		}
		c->r = nr;
		st->cap = cap;
	}
	c->t[c->n] = t;
	c->r[c->n++] = r;
}

void rate_curve_free(struct rate_curve *c)
{
	free(c->t);
	free(c->r);
	free(c->cum);
	memset(c, 0, sizeof(*c));
}

int rate_curve_read(struct rate_curve *c, const char *path, struct ss_error *err)
{
	struct curve_state st = { .c = c, .path = path, .err = err, .col_t = -1, .col_r = -1,
				  .line = 1 };
	struct csv_parser p;
	char buf[8192];
	size_t len, off, chunk, run = 0;
	char *nl;
	FILE *f;

	memset(c, 0, sizeof(*c));
	f = fopen(path, "r");
	if (!f)
		return ss_error_set(err, -errno, path, 0, "cannot open rate curve: %s",
				    strerror(errno));
	if (csv_init(&p, CSV_STRICT | CSV_APPEND_NULL)) {
		fclose(f);
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	}
	/* fed a line at a time, so that a record's callback knows its line;
	 * a line is bounded, as a trace's is (libcsv would buffer a field of
	 * /dev/zero until memory runs out) */
	while (!st.rc && (len = fread(buf, 1, sizeof(buf), f)) > 0) {
		size_t ok = ss_line_bounded(buf, len, &run, SS_LINE_MAX), lines = st.line;

		if (ok < len) {
			for (size_t i = 0; i < ok; i++)
				lines += buf[i] == '\n';
			st.rc = ss_error_set(err, -EINVAL, path, (long)lines,
					     "line longer than %u bytes (expected time_s,rate rows)",
					     SS_LINE_MAX);
			break;
		}
		for (off = 0; !st.rc && off < len; off += chunk) {
			nl = memchr(buf + off, '\n', len - off);
			chunk = nl ? (size_t)(nl - (buf + off)) + 1 : len - off;
			if (csv_parse(&p, buf + off, chunk, on_field, on_record, &st) != chunk &&
			    !st.rc)
				st.rc = ss_error_set(err, -EINVAL, path, (long)st.line,
						     "malformed CSV: %s", csv_strerror(csv_error(&p)));
			if (nl)
				st.line++;
		}
	}
	if (!st.rc && ferror(f))
		st.rc = ss_error_set(err, -EIO, path, 0, "read error");
	if (!st.rc)
		csv_fini(&p, on_field, on_record, &st);
	csv_free(&p);
	fclose(f);
	if (!st.rc && !st.header_done)
		st.rc = ss_error_set(err, -EINVAL, path, 0,
				     "empty file: expected the header time_s,rate");
	if (!st.rc && c->n < 2)
		st.rc = ss_error_set(err, -EINVAL, path, (long)st.last_line,
				     "expected at least 2 rows (the curve from time 0 to its period), got %zu",
				     c->n);
	if (!st.rc) {
		c->cum = malloc(c->n * sizeof(*c->cum));
		if (!c->cum)
			st.rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	}
	if (!st.rc) {
		/* the integral of the linear pieces: trapezoids */
		c->cum[0] = 0;
		for (size_t i = 1; i < c->n; i++)
			c->cum[i] = c->cum[i - 1] + (c->t[i] - c->t[i - 1]) * (c->r[i] + c->r[i - 1]) / 2;
		c->period = c->t[c->n - 1];
		c->total = c->cum[c->n - 1];
		if (!(c->total >= 1e-3))
			st.rc = ss_error_set(err, -EINVAL, path, (long)st.last_line,
					     "the curve holds %g requests a period (expected at least 0.001: "
					     "a rate > 0 somewhere)", c->total);
	}
	if (st.rc)
		rate_curve_free(c);
	return st.rc;
}

double rate_curve_time(const struct rate_curve *c, double lam)
{
	double q = floor(lam / c->total), u = lam - q * c->total, v, k, x, d;
	size_t lo = 0, hi = c->n - 1;

	if (u >= c->total)          /* rounding at a period's end */
		u = c->total;
	/* the segment i with cum[i] <= u < cum[i + 1] (a segment of rate 0
	 * has cum[i] == cum[i + 1] and is never chosen) */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->cum[mid] <= u)
			lo = mid;
		else
			hi = mid;
	}
	d = c->t[lo + 1] - c->t[lo];
	k = (c->r[lo + 1] - c->r[lo]) / d;
	v = u - c->cum[lo];
	/* r x + k x^2 / 2 = v: the root that is 0 at v = 0, written without
	 * the cancellation of (-r + sqrt(r^2 + 2 k v)) / k; the discriminant
	 * is the squared rate at x, >= 0 within the segment */
	d = c->r[lo] * c->r[lo] + 2 * k * v;
	if (v <= 0)
		x = 0;
	else
		x = d > 0 ? 2 * v / (c->r[lo] + sqrt(d)) : c->t[lo + 1] - c->t[lo];
	if (!(x <= c->t[lo + 1] - c->t[lo]))
		x = c->t[lo + 1] - c->t[lo];
	return q * c->period + c->t[lo] + x;
}
