/* servesim — the import driver: detects a profile table's kind from its
 * header, reads it with libcsv, maps devices to catalog names, walks
 * directories, and feeds the importers of import-aiconfigurator.c and
 * import-vidur.c, each file in one transaction (import.h). */
#include "import-int.h"
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <csv.h>

#include "params.h"

/* ==== import driver (import.h, import-int.h) ==== */

/* In detection order: calibrate/importers.def. */
static const struct cal_importer *const importers[] = {
#define IMPORTER(ident) &cal_importer_##ident,
#include "importers.def"
#undef IMPORTER
};

#define N_IMPORTERS (sizeof(importers) / sizeof(importers[0]))

const char *cal_import_kind_name(enum cal_import_kind kind)
{
	if (kind == CAL_IMPORT_AUTO)
		return "auto";
	for (size_t i = 0; i < N_IMPORTERS; i++)
		if (importers[i]->kind == kind)
			return importers[i]->name;
	return "?";
}

int cal_import_kind_from_name(const char *name, enum cal_import_kind *kind)
{
	if (!strcmp(name, "auto")) {
		*kind = CAL_IMPORT_AUTO;
		return 0;
	}
	for (size_t i = 0; i < N_IMPORTERS; i++) {
		if (!strcmp(importers[i]->name, name)) {
			*kind = importers[i]->kind;
			return 0;
		}
	}
	return -EINVAL;
}

static const struct cal_importer *importer_of(enum cal_import_kind kind)
{
	for (size_t i = 0; i < N_IMPORTERS; i++)
		if (importers[i]->kind == kind)
			return importers[i];
	return NULL;
}

static const struct cal_importer *importer_for_header(const char *const *cols, size_t n)
{
	for (size_t i = 0; i < N_IMPORTERS; i++)
		if (importers[i]->match(cols, n))
			return importers[i];
	return NULL;
}

void cal_import_opts_init(struct cal_import_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->window = -1;
}

void cal_import_opts_compact(struct cal_import_opts *o)
{
	cal_import_opts_init(o);
	o->dtypes = "bf16,fp16";
	o->window = 0;
	o->ar_backend = "vllm_graph";
	o->per_octave = 8;
}

/* ---- GPU names ---------------------------------------------------------- */

/* Source names of GPUs -> catalog names (data/gpus.json and the names the
 * docs reserve for GPUs the catalog does not carry yet).  aiconfigurator
 * stores torch.cuda.get_device_name(); Vidur names directories. */
static const struct {
	const char *raw;
	const char *name;
} gpu_names[] = {
	{ "NVIDIA H100 80GB HBM3", "h100-sxm" },
	{ "NVIDIA H100-SXM5-80GB", "h100-sxm" },
	{ "NVIDIA H100 PCIe", "h100-pcie" },
	{ "NVIDIA H100 NVL", "h100-nvl" },
	{ "NVIDIA H200", "h200-sxm" },
	{ "NVIDIA A100-SXM4-80GB", "a100-80gb-sxm" },
	{ "NVIDIA A100-SXM4-40GB", "a100-40gb-sxm" },
	{ "NVIDIA A100 80GB PCIe", "a100-80gb-pcie" },
	{ "NVIDIA L40S", "l40s" },
	{ "NVIDIA A40", "a40" },
	/* Vidur profiling/compute/<gpu> directories; Vidur's A100 is 80GB */
	{ "h100", "h100-sxm" },
	{ "a100", "a100-80gb-sxm" },
	{ "a40", "a40" },
	/* Vidur profiling/network/<node> directories */
	{ "h100_dgx", "h100-sxm" },
	{ "a100_dgx", "a100-80gb-sxm" },
	{ "h100_pairwise_nvlink", "h100-nvl" },
	{ "a100_pairwise_nvlink", "a100-80gb-pcie" },   /* Azure NC96ads_A100_v4 */
	{ "a40_pairwise_nvlink", "a40" },
};

const char *cal_import_gpu_name(const char *raw)
{
	for (size_t i = 0; i < sizeof(gpu_names) / sizeof(gpu_names[0]); i++)
		if (!strcmp(gpu_names[i].raw, raw))
			return gpu_names[i].name;
	return NULL;
}

int imp_device(const struct imp_file *f, const char *raw, long line, char *out, size_t len,
	       struct ss_error *err)
{
	const char *name = f->opts->device ? f->opts->device : cal_import_gpu_name(raw);

	if (!name)
		return ss_error_set(err, -EINVAL, f->path, line,
				    "unknown GPU '%s' (no catalog name for it; pass --device NAME)",
				    raw);
	snprintf(out, len, "%s", name);
	return 0;
}

bool imp_component_after(const char *path, const char *dir, char *out, size_t len)
{
	size_t n = strlen(dir);
	const char *hit = NULL, *end;

	for (const char *p = path; *p; p++)
		if ((p == path || p[-1] == '/') && !strncmp(p, dir, n) && p[n] == '/')
			hit = p + n + 1;
	if (!hit || !*hit)
		return false;
	end = strchr(hit, '/');
	if (!end)
		return false;   /* the file itself, not a directory */
	snprintf(out, len, "%.*s", (int)(end - hit), hit);
	return true;
}

void imp_basename_prefix(const char *path, char *out, size_t len)
{
	const char *b = strrchr(path, '/');
	size_t n;

	b = b ? b + 1 : path;
	n = strcspn(b, "_.");
	snprintf(out, len, "%.*s", (int)n, b);
}

/* Provenance: the path from its last component named "aiconfigurator" or
 * "vidur" (the profiles root's children) or "amd" (../shared/data/amd), so
 * the same file gives the same source wherever the data tree lives;
 * otherwise the path as given. */
static void source_of(const char *path, char *out, size_t len)
{
	static const char *const roots[] = { "aiconfigurator", "vidur", "amd" };
	const char *best = NULL;
	size_t n;

	for (const char *p = path; *p; p++) {
		if (p != path && p[-1] != '/')
			continue;
		for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
			n = strlen(roots[i]);
			if (!strncmp(p, roots[i], n) && p[n] == '/')
				best = p;
		}
	}
	if (!best) {
		best = path;
		while (best[0] == '.' && best[1] == '/')
			best += 2;
	}
	n = strlen(best);
	if (n < len)
		snprintf(out, len, "%s", best);
	else   /* keep the informative end */
		snprintf(out, len, "...%s", best + n - (len - 4));
}

/* ---- row helpers -------------------------------------------------------- */

bool imp_has_col(const char *const *cols, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(cols[i], name))
			return true;
	return false;
}

int imp_col(const struct imp_file *f, const char *name)
{
	for (size_t i = 0; i < f->ncols; i++)
		if (!strcmp(f->cols[i], name))
			return (int)i;
	return -1;
}

int imp_col_req(struct imp_file *f, const struct cal_importer *imp, const char *name,
		int *col, struct ss_error *err)
{
	*col = imp_col(f, name);
	if (*col < 0)
		return ss_error_set(err, -EINVAL, f->path, f->header_line,
				    "missing column '%s' (%s table, header with %s)", name,
				    imp->name, imp->expect);
	return 0;
}

int imp_field_error(struct ss_error *err, const struct imp_file *f, const struct imp_row *r,
		    int col, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ss_error_set(err, -EINVAL, f->path, r->line, "%s: %s", f->cols[col], msg);
}

/* A field for an error message: at most 40 characters. */
#define SHOW(s) (int)(strlen(s) > 40 ? 40 : strlen(s)), (s)

int imp_int(const struct imp_file *f, const struct imp_row *r, int col, int64_t min,
	    int64_t *out, struct ss_error *err)
{
	const char *s = r->f[col];
	double d;

	if (!ss_parse_int64(s, out)) {
		if (!ss_parse_double(s, &d))
			return imp_field_error(err, f, r, col, "expected an integer, got '%.*s'%s",
					       SHOW(s), *s ? " (non-numeric)" : " (empty)");
		if (d != floor(d) || fabs(d) > 9.0e15)
			return imp_field_error(err, f, r, col,
					       "expected an integer, got '%.*s' (not a whole number)",
					       SHOW(s));
		*out = (int64_t)d;
	}
	if (*out < min)
		return imp_field_error(err, f, r, col, "%s value '%.*s' (expected >= %lld)",
				       *out < 0 ? "negative" : "out-of-range", SHOW(s),
				       (long long)min);
	return 0;
}

int imp_ms(const struct imp_file *f, const struct imp_row *r, int col, bool empty_ok,
	   double *out, struct ss_error *err)
{
	const char *s = r->f[col];

	if (!*s) {
		if (empty_ok) {
			*out = NAN;
			return 0;
		}
		return imp_field_error(err, f, r, col, "empty (expected a time in ms)");
	}
	if (!ss_parse_double(s, out))
		return imp_field_error(err, f, r, col,
				       "expected a time in ms, got '%.*s' (non-numeric)", SHOW(s));
	if (*out < 0)
		return imp_field_error(err, f, r, col,
				       "negative latency '%.*s' (expected a time in ms >= 0)", SHOW(s));
	return 0;
}

int imp_bool(const struct imp_file *f, const struct imp_row *r, int col, bool *out,
	     struct ss_error *err)
{
	const char *s = r->f[col];

	if (!strcmp(s, "True") || !strcmp(s, "true") || !strcmp(s, "1"))
		*out = true;
	else if (!strcmp(s, "False") || !strcmp(s, "false") || !strcmp(s, "0"))
		*out = false;
	else
		return imp_field_error(err, f, r, col, "expected True or False, got '%.*s'",
				       SHOW(s));
	return 0;
}

/* The store's dtype names, each with the source spellings that map to it.
 * `weights` is the weight dtype (sim/precision.h's names) whose layer GEMMs
 * a GEMM grid of that store dtype prices, NULL where none: per-tensor "fp8"
 * (W8A8, vLLM's and TensorRT-LLM's fp8 checkpoints) and "fp8_block"
 * (128 x 128 block-scaled weights, DeepSeek-style checkpoints: what vLLM
 * and SGLang run on MI300X through AITER) are both fp8 weights.  Rows of
 * one `weights` are in order of preference (cal_gemm_dtype_for_weights). */
static const struct {
	const char *src;
	const char *name;
	int bytes;     /* element size; 0 when not one fixed size */
	const char *weights;
} dtypes[] = {
	{ "bfloat16", "bf16", 2, NULL }, { "bf16", "bf16", 2, NULL },
	{ "float16", "fp16", 2, NULL }, { "half", "fp16", 2, NULL }, { "fp16", "fp16", 2, NULL },
	{ "float32", "fp32", 4, NULL }, { "float", "fp32", 4, NULL }, { "fp32", "fp32", 4, NULL },
	{ "fp8", "fp8", 1, "fp8" }, { "float8_e4m3fn", "fp8", 1, "fp8" },
	{ "fp8_block", "fp8_block", 0, "fp8" },
	{ "int8", "int8", 1, NULL },
	{ "int4_wo", "int4_wo", 0, NULL },
};

const char *cal_gemm_dtype_for_weights(const char *weights, size_t *pos)
{
	const char *prev = NULL;

	if (*pos > 0)
		prev = dtypes[*pos - 1].name;
	for (size_t i = *pos; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		if (!dtypes[i].weights || strcmp(dtypes[i].weights, weights))
			continue;
		/* several source spellings of one store name: name it once */
		if (prev && !strcmp(prev, dtypes[i].name))
			continue;
		*pos = i + 1;
		return dtypes[i].name;
	}
	*pos = sizeof(dtypes) / sizeof(dtypes[0]);
	return NULL;
}

int cal_dtype_bytes(const char *name)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (!strcmp(dtypes[i].name, name))
			return dtypes[i].bytes;
	return 0;
}

const char *cal_gemm_dtype_weights(const char *dtype)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (!strcmp(dtypes[i].name, dtype))
			return dtypes[i].weights;
	return NULL;
}

int imp_dtype(const struct imp_file *f, const struct imp_row *r, int col,
	      const char **dtype, int *elem_bytes, struct ss_error *err)
{
	const char *s = r->f[col];

	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		if (!strcmp(dtypes[i].src, s)) {
			*dtype = dtypes[i].name;
			if (elem_bytes)
				*elem_bytes = dtypes[i].bytes;
			return 0;
		}
	}
	return imp_field_error(err, f, r, col,
			       "unknown dtype '%.*s' (expected bfloat16, float16/half, float32, fp8, fp8_block or int8)",
			       SHOW(s));
}

bool imp_keep_dtype(const struct imp_file *f, const char *dtype)
{
	const char *p = f->opts->dtypes;
	size_t n = strlen(dtype);

	if (!p || !*dtype)
		return true;
	while (*p) {
		size_t len = strcspn(p, ",");

		if (len == n && !strncmp(p, dtype, n))
			return true;
		p += len;
		if (*p == ',')
			p++;
	}
	return false;
}

int imp_insert(struct imp_file *f, struct cal_meas *m, long line, struct ss_error *err)
{
	int rc;

	memcpy(m->source, f->source, sizeof(m->source));
	m->source_line = line;
	rc = cal_store_insert(f->store, m, err);
	if (rc) {
		/* name the file as the user gave it */
		if (err) {
			snprintf(err->file, sizeof(err->file), "%s", f->path);
			err->line = line;
		}
		return rc;
	}
	f->st.imported++;
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* Bucket of v: floor(per_octave * log2 v), exact at powers of two. */
static int64_t octave_bucket(int64_t v, int per_octave)
{
	return (int64_t)floor(per_octave * log2((double)v) + 1e-9);
}

int imp_thin(const int64_t *vals, size_t n, int per_octave, bool *keep)
{
	int64_t *u, last_bucket = INT64_MIN;
	size_t nu = 0, nk = 0;

	if (per_octave <= 0 || n == 0) {
		for (size_t i = 0; i < n; i++)
			keep[i] = true;
		return 0;
	}
	u = malloc(n * sizeof(*u));
	if (!u)
		return -ENOMEM;
	memcpy(u, vals, n * sizeof(*u));
	qsort(u, n, sizeof(*u), cmp_i64);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || u[i] != u[i - 1])
			u[nu++] = u[i];
	/* u[0..nk): the kept values, ascending */
	for (size_t i = 0; i < nu; i++) {
		int64_t b = octave_bucket(u[i] < 1 ? 1 : u[i], per_octave);

		if (b != last_bucket || i == nu - 1) {
			u[nk++] = u[i];
			last_bucket = b;
		}
	}
	for (size_t i = 0; i < n; i++)
		keep[i] = bsearch(&vals[i], u, nk, sizeof(*u), cmp_i64) != NULL;
	free(u);
	return 0;
}

/* ---- the CSV driver ----------------------------------------------------- */

/* Line numbers as in traces/readers.c: libcsv runs with CSV_REPALL_NL, so
 * the record callback fires for every unquoted CR and LF; counting those
 * (CRLF is one line end) plus LFs inside quoted fields gives each record's
 * 1-based line.  Fields are copied into an arena because libcsv's buffer
 * only lives for the callback. */

#define CHUNK (64 * 1024)

struct csv_run {
	struct csv_parser p;
	struct imp_file *f;
	const struct cal_importer *imp;
	enum cal_import_kind want;      /* AUTO, or the kind the caller asked for */
	bool header_only;               /* detection: stop after the header */
	struct ss_error *err;
	int rc;                         /* first error; 1 = stop (detection done) */
	long line, extra_nl;
	bool after_cr, header_done, began;
	size_t ncols;
	char *arena;                    /* current record's fields, NUL-separated */
	size_t alen, acap;
	size_t *off;                    /* field offsets into arena */
	size_t nf, ocap;
	char **hdr;                     /* header names (owned) */
	const char **fp;                /* field pointers for the row callback */
	long short_line;                /* a record with too few fields; 0 = none */
	size_t short_got;
	char buf[CHUNK];
};

static void short_error(struct csv_run *c, bool last)
{
	c->rc = ss_error_set(c->err, -EINVAL, c->f->path, c->short_line,
			     "%sexpected %zu fields as in the header, got %zu",
			     last ? "truncated last line: " : "", c->ncols, c->short_got);
}

static void on_field(void *field, size_t len, void *data)
{
	struct csv_run *c = data;
	const char *s = field ? field : "";
	const char *nl = s;

	while ((nl = memchr(nl, '\n', len - (size_t)(nl - s)))) {
		c->extra_nl++;
		nl++;
	}
	if (c->rc)
		return;
	if (memchr(s, '\0', len)) {
		/* fields are C strings: a NUL would silently cut this one */
		c->rc = ss_error_set(c->err, -EINVAL, c->f->path, c->line,
				     "NUL byte in field %zu (expected text; is this a binary file?)",
				     c->nf + 1);
		return;
	}
	if (c->nf == c->ocap) {
		size_t cap = c->ocap ? 2 * c->ocap : 64;
		size_t *no = realloc(c->off, cap * sizeof(*no));

		if (!no)
			goto nomem;
		c->off = no;
		c->ocap = cap;
	}
	if (c->alen + len + 1 > c->acap) {
		size_t cap = c->acap ? c->acap : 4096;
		char *na;

		while (c->alen + len + 1 > cap)
			cap *= 2;
		na = realloc(c->arena, cap);
		if (!na)
			goto nomem;
		c->arena = na;
		c->acap = cap;
	}
	c->off[c->nf++] = c->alen;
	memcpy(c->arena + c->alen, s, len);
	c->arena[c->alen + len] = '\0';
	c->alen += len + 1;
	return;
nomem:
	c->rc = ss_error_set(c->err, -ENOMEM, c->f->path, c->line, "out of memory");
}

static int header_end(struct csv_run *c, long line)
{
	struct imp_file *f = c->f;
	const struct cal_importer *imp;

	c->hdr = calloc(c->nf ? c->nf : 1, sizeof(*c->hdr));
	c->fp = calloc(c->nf ? c->nf : 1, sizeof(*c->fp));
	if (!c->hdr || !c->fp)
		return ss_error_set(c->err, -ENOMEM, f->path, line, "out of memory");
	for (size_t i = 0; i < c->nf; i++) {
		c->hdr[i] = strdup(c->arena + c->off[i]);
		if (!c->hdr[i])
			return ss_error_set(c->err, -ENOMEM, f->path, line, "out of memory");
	}
	c->ncols = c->nf;
	c->header_done = true;
	f->cols = (const char *const *)c->hdr;
	f->ncols = c->ncols;
	f->header_line = line;
	imp = importer_for_header(f->cols, f->ncols);
	if (c->want != CAL_IMPORT_AUTO) {
		const struct cal_importer *w = importer_of(c->want);

		if (imp != w)
			return ss_error_set(c->err, -EINVAL, f->path, line,
					    "not a %s table: expected a header with %s", w->name,
					    w->expect);
	}
	c->imp = imp;
	if (c->header_only)
		return 1;
	if (!imp)
		return ss_error_set(c->err, -EINVAL, f->path, line,
				    "unrecognized header: not a profile table servesim imports (expected an aiconfigurator or Vidur table; docs/calibration.md lists them)");
	if (imp->priv_size) {
		f->priv = calloc(1, imp->priv_size);
		if (!f->priv)
			return ss_error_set(c->err, -ENOMEM, f->path, line, "out of memory");
	}
	c->began = true;
	return imp->begin(f, c->err);
}

static void on_record(int ch, void *data)
{
	struct csv_run *c = data;
	size_t nf = c->nf;
	long line = c->line;

	c->nf = 0;
	c->alen = 0;
	if (ch == '\n' && c->after_cr && nf == 0) {
		c->after_cr = false;    /* the LF of a CRLF */
		return;
	}
	c->after_cr = ch == '\r';
	c->line += 1 + c->extra_nl;
	c->extra_nl = 0;
	if (nf == 0 || c->rc)
		return;                 /* blank line, or already stopped */
	if (c->short_line) {
		short_error(c, false);  /* the short record was not the last */
		return;
	}
	if (!c->header_done) {
		c->nf = nf;
		c->rc = header_end(c, line);
		c->nf = 0;
		return;
	}
	if (nf > c->ncols) {
		c->rc = ss_error_set(c->err, -EINVAL, c->f->path, line,
				     "expected %zu fields as in the header, got %zu", c->ncols, nf);
		return;
	}
	if (nf < c->ncols) {
		/* an error either way; which one depends on whether more
		 * records follow (see above and csv_run_file) */
		c->short_line = line;
		c->short_got = nf;
		return;
	}
	for (size_t i = 0; i < nf; i++)
		c->fp[i] = c->arena + c->off[i];
	c->f->st.lines++;
	c->rc = c->imp->row(c->f, &(struct imp_row){ .f = c->fp, .line = line }, c->err);
}

/* Read path through libcsv, driving c->imp (or only the header). */
static int csv_run_file(struct csv_run *c, FILE *in)
{
	const unsigned char opts = CSV_STRICT | CSV_STRICT_FINI | CSV_REPALL_NL | CSV_APPEND_NULL;
	const char *path = c->f->path;
	bool first = true, failed = false;
	size_t n, off, ok, run = 0;  /* run: bytes of the current line so far */

	c->line = 1;
	if (csv_init(&c->p, opts))
		return ss_error_set(c->err, -ENOMEM, path, 0, "out of memory");
	csv_set_blk_size(&c->p, 1u << 16);   /* grow long fields in 64 KiB steps */
	while (!c->rc && (n = fread(c->buf, 1, sizeof(c->buf), in)) > 0) {
		off = 0;
		if (first && n >= 3 && !memcmp(c->buf, "\xef\xbb\xbf", 3))
			off = 3;        /* UTF-8 byte order mark */
		first = false;
		ok = ss_line_bounded(c->buf + off, n - off, &run, SS_LINE_MAX);
		if (ok < n - off) {
			/* parse up to the long line to know its number */
			csv_parse(&c->p, c->buf + off, ok, on_field, on_record, c);
			if (!c->rc)
				c->rc = ss_error_set(c->err, -EINVAL, path, c->line + c->extra_nl,
						     "line longer than %u bytes (expected one record per line; is this a CSV file?)",
						     SS_LINE_MAX);
			break;
		}
		if (csv_parse(&c->p, c->buf + off, n - off, on_field, on_record, c) != n - off) {
			if (!c->rc)
				c->rc = ss_error_set(c->err, csv_error(&c->p) == CSV_ENOMEM ? -ENOMEM : -EINVAL,
						     path, c->line,
						     "malformed CSV: %s (expected comma-separated fields, quotes only around whole fields)",
						     csv_strerror(csv_error(&c->p)));
			failed = true;
		}
	}
	if (!c->rc && ferror(in)) {
		c->rc = errno ? -errno : -EIO;
		ss_error_set(c->err, c->rc, path, 0, "read error: %s", strerror(-c->rc));
	}
	if (!c->rc && !failed && csv_fini(&c->p, on_field, on_record, c) && !c->rc)
		c->rc = ss_error_set(c->err, -EINVAL, path, c->line,
				     "truncated last line: unterminated quoted field");
	csv_free(&c->p);
	if (c->rc == 1)
		return 0;               /* detection stopped after the header */
	if (c->rc)
		return c->rc;
	if (!c->header_done) {
		if (c->header_only)
			return 0;
		return ss_error_set(c->err, -EINVAL, path, 0, "empty file: expected a header line");
	}
	if (c->short_line) {
		short_error(c, true);
		return c->rc;
	}
	if (c->header_only)
		return 0;
	if (c->f->st.lines == 0)
		return ss_error_set(c->err, -EINVAL, path, c->f->header_line,
				    "header only: expected at least one data row after the header");
	return c->imp->end ? c->imp->end(c->f, c->err) : 0;
}

static void csv_run_release(struct csv_run *c)
{
	if (c->began && c->imp->release)
		c->imp->release(c->f);
	free(c->f->priv);
	c->f->priv = NULL;
	if (c->hdr)
		for (size_t i = 0; i < c->ncols; i++)
			free(c->hdr[i]);
	free(c->hdr);
	free(c->fp);
	free(c->arena);
	free(c->off);
}

static FILE *open_csv(const char *path, struct ss_error *err, int *rc)
{
	FILE *in = fopen(path, "rb");

	*rc = 0;
	if (!in) {
		*rc = -errno;
		ss_error_set(err, *rc, path, 0, "cannot open: %s", strerror(-*rc));
	}
	return in;
}

/* The importer of path's header, or NULL when none matches (no error). */
static int detect(const char *path, const struct cal_importer **imp, struct ss_error *err)
{
	struct imp_file f = { .path = path };
	struct csv_run *c;
	FILE *in;
	int rc;

	*imp = NULL;
	in = open_csv(path, err, &rc);
	if (!in)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c) {
		fclose(in);
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	}
	c->f = &f;
	c->err = err;
	c->header_only = true;
	rc = csv_run_file(c, in);
	*imp = c->imp;
	csv_run_release(c);
	free(c);
	fclose(in);
	return rc;
}

int cal_import_detect(const char *path, enum cal_import_kind *kind, struct ss_error *err)
{
	const struct cal_importer *imp;
	int rc = detect(path, &imp, err);

	if (rc)
		return rc;
	if (!imp)
		return ss_error_set(err, -EINVAL, path, 0,
				    "not a profile table servesim imports (expected an aiconfigurator gemm, attention, nccl or custom_allreduce table, or a Vidur mlp, network, attention or cpu_overheads table)");
	*kind = imp->kind;
	return 0;
}

static void stats_add(struct cal_import_stats *to, const struct cal_import_stats *from)
{
	to->files += from->files;
	to->files_ignored += from->files_ignored;
	to->lines += from->lines;
	to->imported += from->imported;
	to->filtered += from->filtered;
	to->skipped += from->skipped;
}

int cal_import_file(struct cal_store *s, const char *path, enum cal_import_kind kind,
		    const struct cal_import_opts *opts, struct cal_import_stats *st,
		    struct ss_error *err)
{
	struct cal_import_opts defaults;
	struct imp_file f = { .store = s, .path = path };
	struct csv_run *c = NULL;
	FILE *in;
	int rc;

	if (kind != CAL_IMPORT_AUTO && !importer_of(kind))
		return ss_error_set(err, -EINVAL, path, 0, "unknown importer kind %d", (int)kind);
	if (!opts) {
		cal_import_opts_init(&defaults);
		opts = &defaults;
	}
	f.opts = opts;
	source_of(path, f.source, sizeof(f.source));
	in = open_csv(path, err, &rc);
	if (!in)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c) {
		fclose(in);
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	}
	c->f = &f;
	c->want = kind;
	c->err = err;
	rc = cal_store_begin(s, err);
	if (rc)
		goto out;
	rc = csv_run_file(c, in);
	if (!rc)
		rc = cal_store_commit(s, err);
	if (rc)
		cal_store_rollback(s);
out:
	if (!rc) {
		f.st.files = 1;
		if (opts->on_file)
			opts->on_file(opts->ctx, path, c->imp->kind, &f.st);
		if (st)
			stats_add(st, &f.st);
	}
	csv_run_release(c);
	free(c);
	fclose(in);
	return rc;
}

static bool is_csv_name(const char *name)
{
	size_t n = strlen(name);

	return n > 4 && !strcmp(name + n - 4, ".csv");
}

static int walk(struct cal_store *s, const char *dir, int depth, enum cal_import_kind kind,
		const struct cal_import_opts *opts, struct cal_import_stats *st,
		struct ss_error *err)
{
	struct dirent **ents = NULL;
	int n, rc = 0;

	if (depth > 32)
		return ss_error_set(err, -ELOOP, dir, 0, "directories nested too deeply");
	n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0) {
		rc = -errno;
		return ss_error_set(err, rc, dir, 0, "cannot read directory: %s", strerror(-rc));
	}
	for (int i = 0; i < n && !rc; i++) {
		const char *name = ents[i]->d_name;
		const struct cal_importer *imp;
		struct stat sb;
		char *path;
		size_t len;

		if (name[0] == '.')
			continue;       /* ., .., hidden files */
		len = strlen(dir) + strlen(name) + 2;
		path = malloc(len);
		if (!path) {
			rc = ss_error_set(err, -ENOMEM, dir, 0, "out of memory");
			break;
		}
		snprintf(path, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
		if (stat(path, &sb) != 0) {
			rc = -errno;
			ss_error_set(err, rc, path, 0, "cannot stat: %s", strerror(-rc));
		} else if (S_ISDIR(sb.st_mode)) {
			rc = walk(s, path, depth + 1, kind, opts, st, err);
		} else if (S_ISREG(sb.st_mode) && is_csv_name(name)) {
			/* with a forced kind, other tables are ignored too */
			rc = detect(path, &imp, err);
			if (!rc && (!imp || (kind != CAL_IMPORT_AUTO && imp->kind != kind)))
				st->files_ignored++;
			else if (!rc)
				rc = cal_import_file(s, path, imp->kind, opts, st, err);
		}
		free(path);
	}
	for (int i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	return rc;
}

int cal_import_path(struct cal_store *s, const char *path, enum cal_import_kind kind,
		    const struct cal_import_opts *opts, struct cal_import_stats *st,
		    struct ss_error *err)
{
	struct cal_import_stats local = { 0 };
	struct stat sb;
	int rc;

	if (stat(path, &sb) != 0) {
		rc = -errno;
		return ss_error_set(err, rc, path, 0, "cannot open: %s", strerror(-rc));
	}
	if (!S_ISDIR(sb.st_mode))
		return cal_import_file(s, path, kind, opts, st, err);
	rc = cal_store_begin(s, err);
	if (rc)
		return rc;
	rc = walk(s, path, 0, kind, opts, &local, err);
	if (!rc)
		rc = cal_store_commit(s, err);
	if (rc) {
		cal_store_rollback(s);
		return rc;
	}
	if (st)
		stats_add(st, &local);
	return 0;
}
