/* servesim — serving results in CSV: llm-d per-request files, Splitwise's
 * static-batch table, aiconfigurator's silicon table.
 *
 * libcsv splits the (already in memory) file into records; a table keeps the
 * header and every record's fields with the 1-based line it starts on (the
 * parser runs with CSV_REPALL_NL and counts line ends as traces/readers.c
 * does).  Each format then maps named columns, in any order, extra columns
 * ignored, to runs.
 */
#include "serving-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <csv.h>

#include "params.h"
#include "sstime.h"

struct tab {
	char **hdr;            /* ncols header names */
	size_t ncols;
	long header_line;
	char **cell;           /* nrows x ncols fields */
	long *line;            /* nrows start lines */
	size_t nrows, cap;
	/* parser state */
	char **cur;            /* fields of the record being read */
	size_t nf, cap_cur;
	long at;               /* line where the current record starts */
	long extra_nl;         /* LFs inside quoted fields of the current record */
	bool after_cr;
	int rc;
	const char *path;
	struct ss_error *err;
};

static void tab_free(struct tab *t)
{
	for (size_t i = 0; i < t->ncols; i++)
		free(t->hdr[i]);
	free(t->hdr);
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cell[i]);
	free(t->cell);
	free(t->line);
	for (size_t i = 0; i < t->nf; i++)
		free(t->cur[i]);
	free(t->cur);
}

static void on_field(void *s, size_t len, void *data)
{
	struct tab *t = data;
	const char *f = s ? s : "";
	char *copy;

	for (size_t i = 0; i < len; i++)
		t->extra_nl += f[i] == '\n';
	if (t->rc)
		return;
	if (t->nf == t->cap_cur) {
		size_t nc = t->cap_cur ? 2 * t->cap_cur : 16;
		char **n;

		if (nc > 4096) {
			t->rc = ss_error_set(t->err, -EINVAL, t->path, t->at,
					     "more than 4096 fields (expected a table)");
			return;
		}
		n = realloc(t->cur, nc * sizeof(*n));
		if (!n) {
			t->rc = ss_error_set(t->err, -ENOMEM, t->path, t->at, "out of memory");
			return;
		}
		t->cur = n;
		t->cap_cur = nc;
	}
	copy = malloc(len + 1);
	if (!copy) {
		t->rc = ss_error_set(t->err, -ENOMEM, t->path, t->at, "out of memory");
		return;
	}
	memcpy(copy, f, len);
	copy[len] = '\0';
	t->cur[t->nf++] = copy;
}

static void drop_cur(struct tab *t)
{
	for (size_t i = 0; i < t->nf; i++)
		free(t->cur[i]);
	t->nf = 0;
}

static void on_record(int c, void *data)
{
	struct tab *t = data;
	size_t nf = t->nf;
	long line = t->at;

	if (c == '\n' && t->after_cr && nf == 0) {
		t->after_cr = false;    /* the LF of a CRLF */
		return;
	}
	t->after_cr = c == '\r';
	t->at += 1 + t->extra_nl;
	t->extra_nl = 0;
	if (nf == 0 || t->rc) {
		drop_cur(t);
		return;
	}
	if (!t->hdr) {
		t->hdr = t->cur;
		t->ncols = nf;
		t->header_line = line;
		t->cur = NULL;
		t->nf = t->cap_cur = 0;
		return;
	}
	if (nf != t->ncols) {
		t->rc = ss_error_set(t->err, -EINVAL, t->path, line,
				     "expected %zu fields as in the header, got %zu", t->ncols, nf);
		drop_cur(t);
		return;
	}
	if (t->nrows == t->cap) {
		size_t nc = t->cap ? 2 * t->cap : 64;
		char **ncell = realloc(t->cell, nc * t->ncols * sizeof(*ncell));
		long *nline;

		if (ncell)
			t->cell = ncell;
		nline = ncell ? realloc(t->line, nc * sizeof(*nline)) : NULL;
		if (!nline) {
			t->rc = ss_error_set(t->err, -ENOMEM, t->path, line, "out of memory");
			drop_cur(t);
			return;
		}
		t->line = nline;
		t->cap = nc;
	}
	memcpy(t->cell + t->nrows * t->ncols, t->cur, nf * sizeof(*t->cur));
	t->line[t->nrows++] = line;
	t->nf = 0;
}

static int tab_read(struct tab *t, const char *buf, size_t len, const char *path,
		    struct ss_error *err)
{
	struct csv_parser p;
	size_t run = 0;

	t->path = path;
	t->err = err;
	t->at = 1;
	if (ss_line_bounded(buf, len, &run, SS_LINE_MAX) < len)
		return ss_error_set(err, -EINVAL, path, 0,
				    "a line longer than %u bytes (expected one record per line)", SS_LINE_MAX);
	if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_REPALL_NL | CSV_APPEND_NULL))
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	if (csv_parse(&p, buf, len, on_field, on_record, t) != len && !t->rc)
		t->rc = ss_error_set(err, -EINVAL, path, t->at,
				     "malformed CSV: %s (expected comma-separated fields, quotes only around whole fields)",
				     csv_strerror(csv_error(&p)));
	if (!t->rc && csv_fini(&p, on_field, on_record, t) && !t->rc)
		t->rc = ss_error_set(err, -EINVAL, path, t->at,
				     "truncated last line: unterminated quoted field");
	csv_free(&p);
	if (t->rc)
		return t->rc;
	if (!t->hdr)
		return ss_error_set(err, -EINVAL, path, 0, "empty file: expected a header line");
	if (t->nrows == 0)
		return ss_error_set(err, -EINVAL, path, t->header_line,
				    "header only: expected at least one row after the header");
	return 0;
}

static int col(const struct tab *t, const char *name)
{
	for (size_t i = 0; i < t->ncols; i++)
		if (!strcasecmp(t->hdr[i], name))
			return (int)i;
	return -1;
}

/* Resolve required columns (names NULL-terminated) into idx[]. */
static int need(const struct tab *t, const char *const *names, int *idx, const char *what,
		struct ss_error *err)
{
	for (int i = 0; names[i]; i++) {
		idx[i] = col(t, names[i]);
		if (idx[i] < 0)
			return ss_error_set(err, -EINVAL, t->path, t->header_line,
					    "missing required column '%s' (%s)", names[i], what);
	}
	return 0;
}

static const char *cell(const struct tab *t, size_t row, int c)
{
	return c < 0 ? "" : t->cell[row * t->ncols + (size_t)c];
}

static bool empty(const char *s)
{
	while (*s == ' ' || *s == '\r')
		s++;
	return !*s;
}

/* Up to 40 bytes of s for an error message, control characters as '?' so
 * the message stays one line. */
static const char *shown(const char *s, char buf[48])
{
	size_t i;

	for (i = 0; s[i] && i < 40; i++)
		buf[i] = (unsigned char)s[i] < ' ' || s[i] == 127 ? '?' : s[i];
	if (s[i])
		buf[i++] = '.', buf[i++] = '.', buf[i++] = '.';
	buf[i] = '\0';
	return buf;
}

/* A finite number in [min, max]; an empty field is an error unless
 * empty_ok (then *out is left). */
static int fnum(const struct tab *t, size_t row, int c, double min, double max, bool empty_ok,
		double *out, struct ss_error *err)
{
	const char *s = cell(t, row, c);
	char b[48], h[48];
	double v;

	if (c < 0 || (empty_ok && empty(s)))
		return 0;
	if (!ss_parse_double(s, &v))
		return ss_error_set(err, -EINVAL, t->path, t->line[row],
				    "%s: expected a number, got '%s'", shown(t->hdr[c], h), shown(s, b));
	if (!(v >= min && v <= max))
		return ss_error_set(err, -EINVAL, t->path, t->line[row],
				    "%s: expected a number from %g to %g, got '%s'", shown(t->hdr[c], h),
				    min, max, shown(s, b));
	*out = v;
	return 0;
}

/* A whole number ("76" or "76.0") in [min, INT32_MAX]. */
static int fint(const struct tab *t, size_t row, int c, int32_t min, bool empty_ok,
		int32_t *out, struct ss_error *err)
{
	double v = NAN;
	char b[48], h[48];
	int rc = fnum(t, row, c, min, INT32_MAX, empty_ok, &v, err);

	if (rc || isnan(v))
		return rc;
	if (v != floor(v))
		return ss_error_set(err, -EINVAL, t->path, t->line[row],
				    "%s: expected a whole number, got '%s'", shown(t->hdr[c], h),
				    shown(cell(t, row, c), b));
	*out = (int32_t)v;
	return 0;
}

/* A duration: ns_per_unit nanoseconds a unit, finite, >= 0. */
static int fdur(const struct tab *t, size_t row, int c, double ns_per_unit, bool empty_ok,
		int64_t *out, struct ss_error *err)
{
	double v = NAN;
	int rc = fnum(t, row, c, 0, SERVING_TIME_MAX_NS / ns_per_unit, empty_ok, &v, err);

	if (rc || isnan(v))
		return rc;
	if (!ss_time_from_units(v, ns_per_unit, out)) {
		char h[48];

		return ss_error_set(err, -EINVAL, t->path, t->line[row], "%s: out of range",
				    shown(t->hdr[c], h));
	}
	return 0;
}

/* ---- llm-d ------------------------------------------------------------- */

/* QPS from "LMBench_sharegpt_output_<qps>.csv" / "LMBench_short_input_qps<qps>.csv". */
static double llmd_qps(const char *path)
{
	const char *b = serving_basename(path), *p;
	char num[32];
	double v;
	size_t n;

	p = strstr(b, "_qps");
	if (p)
		p += 4;
	else if ((p = strrchr(b, '_')))
		p++;
	else
		return NAN;
	n = strcspn(p, "c");    /* up to ".csv" */
	if (n < 2 || n >= sizeof(num) || strcmp(p + n - 1, ".csv"))
		return NAN;
	memcpy(num, p, n - 1);
	num[n - 1] = '\0';
	return ss_parse_double(num, &v) && v > 0 ? v : NAN;
}

static int read_llmd(struct serving_set *set, const struct tab *t, struct ss_error *err)
{
	static const char *const names[] = { "prompt_tokens", "generation_tokens", "ttft",
					      "generation_time", "launch_time", "finish_time", NULL };
	struct serving_run *r;
	double *raw;
	int c[6], rc;

	if ((rc = need(t, names, c, "llm-d per-request CSV", err)))
		return rc;
	if (t->nrows > SERVING_MAX_REQUESTS)
		return ss_error_set(err, -E2BIG, t->path, 0, "more than %u requests", SERVING_MAX_REQUESTS);
	r = serving_run_append(set, SERVING_LLMD, t->header_line);
	raw = malloc(t->nrows * sizeof(*raw));
	if (!r || !raw) {
		free(raw);
		return ss_error_set(err, -ENOMEM, t->path, 0, "out of memory");
	}
	serving_copy_str(r->label, sizeof(r->label), t->path);
	r->request_rate = llmd_qps(t->path);
	r->load = isnan(r->request_rate) ? SERVING_LOAD_UNKNOWN : SERVING_LOAD_OPEN;
	for (size_t i = 0; i < t->nrows && !rc; i++) {
		struct serving_request *q = serving_req_append(r);
		int64_t gen;
		double fin = 0;

		if (!q) {
			rc = ss_error_set(err, -ENOMEM, t->path, t->line[i], "out of memory");
			break;
		}
		if ((rc = fint(t, i, c[0], 0, false, &q->prompt_tokens, err)) ||
		    (rc = fint(t, i, c[1], 0, false, &q->output_tokens, err)) ||
		    (rc = fdur(t, i, c[2], SS_NS_PER_S, false, &q->ttft_ns, err)) ||
		    (rc = fdur(t, i, c[3], SS_NS_PER_S, false, &gen, err)) ||
		    (rc = fnum(t, i, c[4], 0, 1e13, false, &raw[i], err)) ||
		    (rc = fnum(t, i, c[5], 0, 1e13, false, &fin, err)))
			break;
		if (fin < raw[i]) {
			rc = ss_error_set(err, -EINVAL, t->path, t->line[i],
					  "finish_time %.17g before launch_time %.17g (expected finish >= launch)",
					  fin, raw[i]);
			break;
		}
		if (!ss_time_from_s(fin - raw[i], &q->e2e_ns)) {
			rc = ss_error_set(err, -EINVAL, t->path, t->line[i], "finish_time: out of range");
			break;
		}
		if (q->output_tokens > 1)
			q->tpot_ns = gen / (q->output_tokens - 1);
	}
	if (!rc)
		rc = serving_issue_from_s(r, raw, t->path, "launch_time", err);
	free(raw);
	return rc;
}

/* ---- Splitwise static-batch table -------------------------------------- */

static int read_splitwise(struct serving_set *set, const struct tab *t, struct ss_error *err)
{
	static const char *const names[] = { "model", "hardware", "prompt_size", "batch_size",
					      "token_size", "prompt_time", "token_time",
					      "tensor_parallel", NULL };
	int c[8], e2e = col(t, "e2e_time"), pk = col(t, "peak_power"), avg = col(t, "average_power");
	int rc;

	if ((rc = need(t, names, c, "Splitwise perf_model CSV", err)))
		return rc;
	for (size_t i = 0; i < t->nrows; i++) {
		struct serving_run *r = serving_run_append(set, SERVING_SPLITWISE, t->line[i]);

		if (!r)
			return ss_error_set(err, -ENOMEM, t->path, t->line[i], "out of memory");
		r->load = SERVING_LOAD_STATIC;
		serving_copy_str(r->engine, sizeof(r->engine), "splitwise-2023");
		serving_copy_str(r->model, sizeof(r->model), cell(t, i, c[0]));
		serving_copy_str(r->gpu, sizeof(r->gpu), cell(t, i, c[1]));
		snprintf(r->label, sizeof(r->label), "%s:%ld", serving_basename(t->path), t->line[i]);
		if ((rc = fint(t, i, c[2], 1, false, &r->isl, err)) ||
		    (rc = fint(t, i, c[3], 1, false, &r->concurrency, err)) ||
		    (rc = fint(t, i, c[4], 1, false, &r->osl, err)) ||
		    (rc = fdur(t, i, c[5], SS_NS_PER_MS, false, &r->prompt_ns, err)) ||
		    (rc = fdur(t, i, c[6], SS_NS_PER_MS, false, &r->token_ns, err)) ||
		    (rc = fint(t, i, c[7], 1, false, &r->tp, err)) ||
		    (rc = fdur(t, i, e2e, SS_NS_PER_MS, true, &r->e2e_ns, err)) ||
		    (rc = fnum(t, i, pk, 0, 100, true, &r->peak_power, err)) ||
		    (rc = fnum(t, i, avg, 0, 100, true, &r->avg_power, err)))
			return rc;
	}
	return 0;
}

/* ---- aiconfigurator silicon table -------------------------------------- */

/* A disaggregated pool's columns (pre "prefill_" or "decode_" and
 * num_workers, batch_size, tp_size, pp_size, attention_dp_size,
 * moe_tp_size, moe_ep_size), each absent or empty = 0.  The MoE and
 * attention-DP sizes may be 0 (the vLLM rows write 0 for "not set"). */
static int pool_cols(const struct tab *t, size_t row, const char *pre, struct serving_pool *p,
		     struct ss_error *err)
{
	static const char *const names[] = { "num_workers", "batch_size", "tp_size", "pp_size",
					      "attention_dp_size", "moe_tp_size", "moe_ep_size" };
	int32_t *field[] = { &p->workers, &p->batch, &p->tp, &p->pp, &p->attn_dp, &p->moe_tp,
			     &p->moe_ep };
	char name[48];
	int rc = 0;

	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]) && !rc; k++) {
		snprintf(name, sizeof(name), "%s%s", pre, names[k]);
		rc = fint(t, row, col(t, name), k < 4 ? 1 : 0, true, field[k], err);
	}
	return rc;
}

static int read_silicon(struct serving_set *set, const struct tab *t, struct ss_error *err)
{
	static const char *const names[] = { "backend", "model_path", "system", "isl", "osl",
					      "batch_size", "silicon_ttft_ms", "silicon_tpot_ms", NULL };
	int c[8], rc;
	int id = col(t, "id"), ver = col(t, "backend_version"), prec = col(t, "precision");
	int mode = col(t, "mode"), tp = col(t, "tp_size"), pp = col(t, "pp_size");
	int src = col(t, "silicon_data_source");
	int mep = col(t, "moe_ep_size"), adp = col(t, "attention_dp_size");
	int mtp = col(t, "moe_tp_size");

	if ((rc = need(t, names, c, "aiconfigurator silicon CSV", err)))
		return rc;
	for (size_t i = 0; i < t->nrows; i++) {
		struct serving_run *r = serving_run_append(set, SERVING_SILICON, t->line[i]);

		if (!r)
			return ss_error_set(err, -ENOMEM, t->path, t->line[i], "out of memory");
		r->load = SERVING_LOAD_CLOSED;
		serving_copy_str(r->engine, sizeof(r->engine), cell(t, i, c[0]));
		serving_copy_str(r->model, sizeof(r->model), cell(t, i, c[1]));
		serving_copy_str(r->gpu, sizeof(r->gpu), cell(t, i, c[2]));
		serving_copy_str(r->engine_version, sizeof(r->engine_version), cell(t, i, ver));
		serving_copy_str(r->precision, sizeof(r->precision), cell(t, i, prec));
		serving_copy_str(r->mode, sizeof(r->mode), cell(t, i, mode));
		serving_copy_str(r->label, sizeof(r->label), cell(t, i, id));
		if (!r->engine[0] || !r->model[0] || !r->gpu[0])
			return ss_error_set(err, -EINVAL, t->path, t->line[i],
					    "expected backend, model_path and system to be non-empty");
		if ((rc = fint(t, i, c[3], 1, false, &r->isl, err)) ||
		    (rc = fint(t, i, c[4], 1, false, &r->osl, err)) ||
		    (rc = fint(t, i, c[5], 1, true, &r->concurrency, err)) ||
		    (rc = fdur(t, i, c[6], SS_NS_PER_MS, false, &r->mean_ttft_ns, err)) ||
		    (rc = fdur(t, i, c[7], SS_NS_PER_MS, false, &r->mean_tpot_ns, err)) ||
		    (rc = fint(t, i, tp, 1, true, &r->tp, err)) ||
		    (rc = fint(t, i, pp, 1, true, &r->pp, err)) ||
		    (rc = pool_cols(t, i, "prefill_", &r->prefill, err)) ||
		    (rc = pool_cols(t, i, "decode_", &r->decode, err)) ||
		    (rc = fint(t, i, mep, 0, true, &r->moe_ep, err)) ||
		    (rc = fint(t, i, adp, 0, true, &r->attn_dp, err)) ||
		    (rc = fint(t, i, mtp, 0, true, &r->moe_tp, err)))
			return rc;
		/* batch_size is per attention-DP rank (aiconfigurator's agg
		 * batch, the rank's max_batch_size): the clients are batch_size
		 * x attention_dp_size, as every such row's id says
		 * (..._c256_tp8_0_ep8_0_... with batch_size 32, attention_dp_size 8) */
		if (r->concurrency > 0 && r->attn_dp > 1) {
			if (r->concurrency > INT32_MAX / r->attn_dp)
				return ss_error_set(err, -EINVAL, t->path, t->line[i],
						    "expected batch_size x attention_dp_size below 2^31");
			r->concurrency *= r->attn_dp;
		}
		/* disaggregated rows leave batch_size empty; most name the client
		 * concurrency in the source column ("...; silicon_concurrency=4;
		 * ..."); the few that do not are kept with concurrency 0 and an
		 * unknown load */
		if (!r->concurrency) {
			const char *k = strstr(cell(t, i, src), "silicon_concurrency=");
			char num[16] = "";
			double v;

			if (k)
				sscanf(k + 20, "%15[0-9]", num);
			if (ss_parse_double(num, &v) && v >= 1 && v <= INT32_MAX)
				r->concurrency = (int32_t)v;
			else
				r->load = SERVING_LOAD_UNKNOWN;
		}
	}
	return 0;
}

int serving_read_csv(struct serving_set *set, const char *buf, size_t len, const char *path,
		     enum serving_format fmt, struct ss_error *err)
{
	struct tab t = { 0 };
	int rc = tab_read(&t, buf, len, path, err);

	if (!rc) {
		if (fmt == SERVING_LLMD)
			rc = read_llmd(set, &t, err);
		else if (fmt == SERVING_SPLITWISE)
			rc = read_splitwise(set, &t, err);
		else
			rc = read_silicon(set, &t, err);
	}
	tab_free(&t);
	return rc;
}
