/* servesim — serving results in CSV: llm-d per-request files, Splitwise's
 * static-batch table, aiconfigurator's silicon table, NVIDIA NIM's
 * GenAI-Perf sweep, GPUStack's performance-lab rows and TensorRT-LLM 0.9's
 * static-batch table.
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
#include <stddef.h>
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

/* ---- NVIDIA NIM GenAI-Perf sweep --------------------------------------- */

/* Nanoseconds per unit of a NIM `*-unit` column ("ns", "us", "ms", "s"), 0
 * when unknown. */
static double nim_unit(const char *u)
{
	static const struct { const char *name; double ns; } units[] = {
		{ "ns", 1 }, { "us", SS_NS_PER_US }, { "ms", SS_NS_PER_MS }, { "s", SS_NS_PER_S },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(u, units[i].name))
			return units[i].ns;
	return 0;
}

/* A NIM row's latency column base-avg / base-p95 in the unit its base-unit
 * column names. */
static int nim_latency(const struct tab *t, size_t row, const char *base, int64_t *avg,
		       int64_t *p95, struct ss_error *err)
{
	char name[64], b[48];
	int cu, ca, cp, rc;
	double ns;

	snprintf(name, sizeof(name), "%s-unit", base);
	cu = col(t, name);
	snprintf(name, sizeof(name), "%s-avg", base);
	ca = col(t, name);
	snprintf(name, sizeof(name), "%s-p95", base);
	cp = col(t, name);
	if (cu < 0 || ca < 0)
		return ss_error_set(err, -EINVAL, t->path, t->header_line,
				    "missing required column '%s-%s' (NIM GenAI-Perf CSV)", base,
				    cu < 0 ? "unit" : "avg");
	ns = nim_unit(cell(t, row, cu));
	if (ns <= 0)
		return ss_error_set(err, -EINVAL, t->path, t->line[row],
				    "%s-unit: expected ns, us, ms or s, got '%s'", base,
				    shown(cell(t, row, cu), b));
	rc = fdur(t, row, ca, ns, false, avg, err);
	return rc ? rc : fdur(t, row, cp, ns, true, p95, err);
}

/* One row per GenAI-Perf run of a NIM (TensorRT-LLM backend) profile:
 * task_inputs-n_gpus is the profile's TP, task_inputs-precision its weight
 * dtype (fp16 is bf16's size), the synthetic input mean (stddev 0) and the
 * requested output mean the fixed lengths, input_config-concurrency the
 * closed loop's clients.  GenAI-Perf's inter-token latency is per request,
 * (latency - TTFT) / (output tokens - 1): servesim's TPOT. */
static int read_nim(struct serving_set *set, const struct tab *t, struct ss_error *err)
{
	static const char *const names[] = { "task_inputs-model", "task_inputs-GPU",
					      "task_inputs-n_gpus", "task_inputs-precision",
					      "input_config-concurrency",
					      "input_config-synthetic_input_tokens_mean",
					      "input_config-output_tokens_mean", NULL };
	int c[7], rc;
	int sd = col(t, "input_config-synthetic_input_tokens_stddev");
	int ex = col(t, "task_inputs-execution_type");

	if ((rc = need(t, names, c, "NIM GenAI-Perf CSV", err)))
		return rc;
	for (size_t i = 0; i < t->nrows; i++) {
		struct serving_run *r = serving_run_append(set, SERVING_NIM, t->line[i]);
		double stddev = 0;

		if (!r)
			return ss_error_set(err, -ENOMEM, t->path, t->line[i], "out of memory");
		r->load = SERVING_LOAD_CLOSED;
		serving_copy_str(r->engine, sizeof(r->engine), "trtllm");
		serving_copy_str(r->engine_version, sizeof(r->engine_version), cell(t, i, ex));
		serving_copy_str(r->model, sizeof(r->model), cell(t, i, c[0]));
		serving_copy_str(r->gpu, sizeof(r->gpu), cell(t, i, c[1]));
		serving_copy_str(r->precision, sizeof(r->precision), cell(t, i, c[3]));
		snprintf(r->label, sizeof(r->label), "%s:%ld", serving_basename(t->path), t->line[i]);
		if (!r->model[0] || !r->gpu[0] || !r->precision[0])
			return ss_error_set(err, -EINVAL, t->path, t->line[i],
					    "expected task_inputs-model, task_inputs-GPU and "
					    "task_inputs-precision to be non-empty");
		if ((rc = fint(t, i, c[2], 1, false, &r->tp, err)) ||
		    (rc = fint(t, i, c[4], 1, false, &r->concurrency, err)) ||
		    (rc = fint(t, i, c[5], 1, false, &r->isl, err)) ||
		    (rc = fint(t, i, c[6], 1, false, &r->osl, err)) ||
		    (rc = fnum(t, i, sd, 0, 1e9, true, &stddev, err)) ||
		    (rc = nim_latency(t, i, "time_to_first_token", &r->mean_ttft_ns,
				      &r->p95_ttft_ns, err)) ||
		    (rc = nim_latency(t, i, "inter_token_latency", &r->mean_tpot_ns,
				      &r->p95_tpot_ns, err)) ||
		    (rc = nim_latency(t, i, "request_latency", &r->mean_e2e_ns, &r->p95_e2e_ns,
				      err)))
			return rc;
		if (stddev != 0)
			return ss_error_set(err, -EINVAL, t->path, t->line[i],
					    "input_config-synthetic_input_tokens_stddev: expected 0 "
					    "(fixed input lengths), got %g", stddev);
	}
	return 0;
}

/* ---- GPUStack performance lab ------------------------------------------ */

/* The GPUStack `engine` column as servesim's engine name, or NULL. */
static const char *gpustack_engine(const char *s)
{
	static const struct { const char *src, *name; } engines[] = {
		{ "vLLM", "vllm" }, { "SGLang", "sglang" }, { "TensorRT-LLM", "trtllm" },
	};

	for (size_t i = 0; i < sizeof(engines) / sizeof(engines[0]); i++)
		if (!strcmp(s, engines[i].src))
			return engines[i].name;
	return NULL;
}

/* The version engine_versions_page gives the engine named src ("vLLM:
 * v0.11.0 ; SGLang: v0.5.5.post1" or "vLLM v0.17.1 ; SGLang v0.5.9") into
 * out; "" when the page does not name it. */
static void gpustack_version(const char *page, const char *src, char *out, size_t len)
{
	size_t n = strlen(src);
	const char *p = page;

	out[0] = '\0';
	while ((p = strstr(p, src))) {
		const char *v = p + n;

		p += n;
		if (*v != ':' && *v != ' ')
			continue;       /* "SGLang" inside a longer name */
		v += strspn(v, ": ");
		if (*v == 'v')
			v++;
		snprintf(out, len, "%.*s", (int)strcspn(v, " ;"), v);
		return;
	}
}

/* Parallelism and variants of a launch command (whitespace-separated
 * words, "--key value" or "--key=value"): tensor, data, pipeline and expert
 * parallel sizes in the spellings vllm serve, sglang.launch_server and
 * trtllm-serve accept, speculative decoding, and an FP8 or AWQ checkpoint
 * (a model path ending -FP8 / -AWQ).  Later words win, so a label that
 * overrides a flag is parsed after the command. */
static int gpustack_flags(const struct tab *t, size_t row, const char *cmd, struct serving_run *r,
			  bool *ep_all, struct ss_error *err)
{
	static const struct { const char *flag; int which; } flags[] = {
		{ "-tp", 0 }, { "--tensor-parallel-size", 0 }, { "--tp-size", 0 }, { "--tp", 0 },
		{ "--tp_size", 0 },
		{ "-dp", 1 }, { "--data-parallel-size", 1 }, { "--dp-size", 1 }, { "--dp", 1 },
		{ "-pp", 2 }, { "--pipeline-parallel-size", 2 }, { "--pp-size", 2 }, { "--pp_size", 2 },
		{ "--ep-size", 3 }, { "--ep_size", 3 }, { "--expert-parallel-size", 3 },
	};
	int32_t *field[] = { &r->tp, &r->dp, &r->pp, &r->moe_ep };
	char *copy = strdup(cmd), *save = NULL, *w;
	int rc = 0;

	if (!copy)
		return ss_error_set(err, -ENOMEM, t->path, t->line[row], "out of memory");
	for (w = strtok_r(copy, " \t\r\n", &save); w && !rc; w = strtok_r(NULL, " \t\r\n", &save)) {
		char *eq = strchr(w, '='), *val = NULL, b[48];
		size_t wl;
		double v;

		if (eq)
			*eq = '\0', val = eq + 1;
		wl = strlen(w);
		if (!strncmp(w, "--speculative", 13))
			r->speculative = true;
		if (!strcmp(w, "--enable-expert-parallel"))
			*ep_all = true;
		if (wl > 4 && !strcasecmp(w + wl - 4, "-FP8"))
			serving_copy_str(r->precision, sizeof(r->precision), "fp8");
		if (wl > 4 && !strcasecmp(w + wl - 4, "-AWQ"))
			serving_copy_str(r->precision, sizeof(r->precision), "awq");
		for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
			if (strcmp(w, flags[k].flag))
				continue;
			if (!val)
				val = strtok_r(NULL, " \t\r\n", &save);
			if (!val || !ss_parse_double(val, &v) || v < 1 || v > 1024 || v != floor(v)) {
				rc = ss_error_set(err, -EINVAL, t->path, t->line[row],
						  "serve_cmd: %s: expected a whole number from 1 to 1024, got '%s'",
						  flags[k].flag, shown(val ? val : "", b));
				break;
			}
			*field[flags[k].which] = (int32_t)v;
			break;
		}
	}
	free(copy);
	return rc;
}

/* The load column: "closed-loop, max concurrency C, N prompts" or
 * "open-loop burst: request rate inf (all N prompts sent at t=0)". */
static int gpustack_load(const struct tab *t, size_t row, int c, struct serving_run *r,
			 struct ss_error *err)
{
	const char *s = cell(t, row, c);
	int conc, n, end = 0;
	char b[48];

	if (sscanf(s, "closed-loop, max concurrency %d, %d prompts%n", &conc, &n, &end) == 2 &&
	    !s[end] && conc >= 1 && n >= 1) {
		r->load = SERVING_LOAD_CLOSED;
		r->concurrency = conc;
		r->num_prompts = n;
		return 0;
	}
	end = 0;
	if (sscanf(s, "open-loop burst: request rate inf (all %d prompts sent at t=0)%n", &n,
		   &end) == 1 && !s[end] && n >= 1) {
		r->load = SERVING_LOAD_OPEN;
		r->request_rate = INFINITY;
		r->num_prompts = n;
		return 0;
	}
	return ss_error_set(err, -EINVAL, t->path, t->line[row],
			    "load: expected 'closed-loop, max concurrency C, N prompts' or "
			    "'open-loop burst: request rate inf (all N prompts sent at t=0)', got '%s'",
			    shown(s, b));
}

/* One row per "Serving Benchmark Result" block of a GPUStack performance
 * lab page (../shared/data/serving/gpustack/PROVENANCE.md).  The GPU is
 * the page's `hardware`; pages that write "NVIDIA A100 SXM GPU" without the
 * memory are 80 GB ones (PROVENANCE: every page's hardware is "A100 SXM
 * 80GB or H100 SXM 80GB"), so the name gets "80GB" added.  The model is
 * the page's; lengths are the row's mean input and output tokens (fixed
 * for vLLM's random dataset, means of ShareGPT's distribution otherwise:
 * mean_lengths). */
static int read_gpustack(struct serving_set *set, const struct tab *t, struct ss_error *err)
{
	static const char *const names[] = { "engine", "engine_versions_page", "hardware",
					      "model_page", "serve_cmd", "load", "dataset",
					      "mean_in_tokens", "mean_out_tokens", NULL };
	static const struct { const char *col; size_t off; } stats[] = {
		{ "ttft_mean_ms", offsetof(struct serving_run, mean_ttft_ns) },
		{ "ttft_p50_ms", offsetof(struct serving_run, median_ttft_ns) },
		{ "ttft_p99_ms", offsetof(struct serving_run, p99_ttft_ns) },
		{ "tpot_mean_ms", offsetof(struct serving_run, mean_tpot_ns) },
		{ "tpot_p50_ms", offsetof(struct serving_run, median_tpot_ns) },
		{ "tpot_p99_ms", offsetof(struct serving_run, p99_tpot_ns) },
		{ "itl_mean_ms", offsetof(struct serving_run, mean_itl_ns) },
		{ "itl_p50_ms", offsetof(struct serving_run, median_itl_ns) },
		{ "itl_p99_ms", offsetof(struct serving_run, p99_itl_ns) },
		{ "e2e_mean_ms", offsetof(struct serving_run, mean_e2e_ns) },
		{ "duration_s", offsetof(struct serving_run, duration_ns) },
	};
	int c[9], rc;
	int lab = col(t, "label"), ovr = col(t, "label_overrides_flag"), page = col(t, "source_page");
	int fail = col(t, "n_failed");

	if ((rc = need(t, names, c, "GPUStack performance-lab CSV", err)))
		return rc;
	for (size_t i = 0; i < t->nrows; i++) {
		struct serving_run *r = serving_run_append(set, SERVING_GPUSTACK, t->line[i]);
		const char *eng = gpustack_engine(cell(t, i, c[0]));
		const char *hw = cell(t, i, c[2]);
		double in = 0, out = 0;
		int32_t failed = 0;
		bool ep_all = false;
		char b[48];

		if (!r)
			return ss_error_set(err, -ENOMEM, t->path, t->line[i], "out of memory");
		if (!eng)
			return ss_error_set(err, -EINVAL, t->path, t->line[i],
					    "engine: expected vLLM, SGLang or TensorRT-LLM, got '%s'",
					    shown(cell(t, i, c[0]), b));
		serving_copy_str(r->engine, sizeof(r->engine), eng);
		gpustack_version(cell(t, i, c[1]), cell(t, i, c[0]), r->engine_version,
				 sizeof(r->engine_version));
		serving_copy_str(r->model, sizeof(r->model), cell(t, i, c[3]));
		if (strstr(hw, "A100") && !strstr(hw, "80GB") && !strstr(hw, "40GB"))
			snprintf(r->gpu, sizeof(r->gpu), "A100 SXM 80GB");
		else
			serving_copy_str(r->gpu, sizeof(r->gpu), hw);
		snprintf(r->label, sizeof(r->label), "%s:%ld %s", serving_basename(t->path),
			 t->line[i], cell(t, i, page));
		if (!r->model[0] || !hw[0])
			return ss_error_set(err, -EINVAL, t->path, t->line[i],
					    "expected model_page and hardware to be non-empty");
		snprintf(r->launch, sizeof(r->launch), "%s%s%s", cell(t, i, c[4]),
			 strcmp(cell(t, i, ovr), "yes") ? "" : " # ",
			 strcmp(cell(t, i, ovr), "yes") ? "" : cell(t, i, lab));
		if ((rc = gpustack_flags(t, i, cell(t, i, c[4]), r, &ep_all, err)) ||
		    (!strcmp(cell(t, i, ovr), "yes") &&
		     (rc = gpustack_flags(t, i, cell(t, i, lab), r, &ep_all, err))) ||
		    (rc = gpustack_load(t, i, c[5], r, err)) ||
		    (rc = fnum(t, i, c[7], 1, 1e7, false, &in, err)) ||
		    (rc = fnum(t, i, c[8], 1, 1e7, false, &out, err)) ||
		    (rc = fint(t, i, fail, 0, true, &failed, err)))
			return rc;
		for (size_t k = 0; k < sizeof(stats) / sizeof(stats[0]); k++) {
			int sc = col(t, stats[k].col);

			rc = fdur(t, i, sc, strcmp(stats[k].col, "duration_s") ? SS_NS_PER_MS : SS_NS_PER_S,
				  true, (int64_t *)((char *)r + stats[k].off), err);
			if (rc)
				return rc;
		}
		if (r->tp < 1)
			r->tp = 1;
		if (ep_all)
			r->moe_ep = r->tp * (r->dp > 0 ? r->dp : 1);
		r->n_failed = (size_t)failed;
		r->isl = (int32_t)lround(in);
		r->osl = (int32_t)lround(out);
		r->mean_lengths = !strstr(cell(t, i, c[6]), "random");
	}
	return 0;
}

/* ---- TensorRT-LLM 0.9 static-batch table ------------------------------ */

/* One static batch per row of TensorRT-LLM 0.9.0's benchmark table
 * (../shared/data/serving/trtllm_tables, PROVENANCE.md): like Splitwise's,
 * prompt_ns = `1st Token Latency (ms)` (the whole batch's prefill),
 * token_ns = `Token-to-token Latency (ms)` (one decode step), e2e_ns =
 * `Latency (ms)`; ISL and OSL from `Input/Output Lengths` ("128,2048").
 * The latencies may be empty (518 of the shipped rows, runs that recorded
 * none): absent, and fit-engine skips such a row as having no figure.
 * Precision "Mixed" is TensorRT-LLM's perf-overview name for 16-bit
 * weights and activations (recorded as fp16); "FP8" as fp8. */
static int read_trtllm_static(struct serving_set *set, const struct tab *t, struct ss_error *err)
{
	static const char *const names[] = { "Model", "GPU", "Batch Size", "Input/Output Lengths",
					      "Tensor Model Parallel Size", "Precision",
					      "1st Token Latency (ms)", "Token-to-token Latency (ms)",
					      NULL };
	int c[8], rc;
	int pp = col(t, "Pipeline Model Parallel Size"), lat = col(t, "Latency (ms)");

	if ((rc = need(t, names, c, "TensorRT-LLM static-batch CSV", err)))
		return rc;
	for (size_t i = 0; i < t->nrows; i++) {
		struct serving_run *r = serving_run_append(set, SERVING_TRTLLM_STATIC, t->line[i]);
		const char *io = cell(t, i, c[3]), *prec = cell(t, i, c[5]);
		int isl, osl, end = 0;
		char b[48];

		if (!r)
			return ss_error_set(err, -ENOMEM, t->path, t->line[i], "out of memory");
		r->load = SERVING_LOAD_STATIC;
		serving_copy_str(r->engine, sizeof(r->engine), "trtllm");
		serving_copy_str(r->engine_version, sizeof(r->engine_version), "0.9.0");
		serving_copy_str(r->model, sizeof(r->model), cell(t, i, c[0]));
		serving_copy_str(r->gpu, sizeof(r->gpu), cell(t, i, c[1]));
		snprintf(r->label, sizeof(r->label), "%s:%ld", serving_basename(t->path), t->line[i]);
		if (!strcmp(prec, "Mixed"))
			serving_copy_str(r->precision, sizeof(r->precision), "fp16");
		else if (!strcmp(prec, "FP8"))
			serving_copy_str(r->precision, sizeof(r->precision), "fp8");
		else
			return ss_error_set(err, -EINVAL, t->path, t->line[i],
					    "Precision: expected FP8 or Mixed, got '%s'", shown(prec, b));
		if (!r->model[0] || !r->gpu[0])
			return ss_error_set(err, -EINVAL, t->path, t->line[i],
					    "expected Model and GPU to be non-empty");
		if (sscanf(io, "%d,%d%n", &isl, &osl, &end) != 2 || io[end] || isl < 1 || osl < 1)
			return ss_error_set(err, -EINVAL, t->path, t->line[i],
					    "Input/Output Lengths: expected \"ISL,OSL\" (two whole numbers from 1), got '%s'",
					    shown(io, b));
		r->isl = isl;
		r->osl = osl;
		if ((rc = fint(t, i, c[2], 1, false, &r->concurrency, err)) ||
		    (rc = fint(t, i, c[4], 1, false, &r->tp, err)) ||
		    (rc = fint(t, i, pp, 1, true, &r->pp, err)) ||
		    (rc = fdur(t, i, c[6], SS_NS_PER_MS, true, &r->prompt_ns, err)) ||
		    (rc = fdur(t, i, c[7], SS_NS_PER_MS, true, &r->token_ns, err)) ||
		    (rc = fdur(t, i, lat, SS_NS_PER_MS, true, &r->e2e_ns, err)))
			return rc;
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
		else if (fmt == SERVING_NIM)
			rc = read_nim(set, &t, err);
		else if (fmt == SERVING_GPUSTACK)
			rc = read_gpustack(set, &t, err);
		else if (fmt == SERVING_TRTLLM_STATIC)
			rc = read_trtllm_static(set, &t, err);
		else
			rc = read_silicon(set, &t, err);
	}
	tab_free(&t);
	return rc;
}
