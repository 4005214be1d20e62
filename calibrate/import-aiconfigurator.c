/* servesim — aiconfigurator's kernel tables into the calibration store.
 *
 * NVIDIA's aiconfigurator (ai-dynamo/aiconfigurator, Apache-2.0) times each
 * kernel in isolation on one GPU with CUDA events; `latency` is the mean time
 * of one call in ms, which the store keeps as mean_ms unchanged (the other
 * statistics and count are unknown: NAN and 0).  Attention rows cover one
 * layer and their head counts are already per GPU.  The columns and units
 * are in ../shared/data/profiles/PROVENANCE.md §1; the mapping below is in
 * docs/calibration.md.
 *
 *   *_gemm_perf.csv               -> gemm (m, n, k), dtype from gemm_dtype
 *   *_context_attention_perf.csv  -> attn_prefill (batch, q_len = isl, kv_len = step = 0)
 *   *_generation_attention_perf.csv -> attn_decode (batch, q_len = isl = 1,
 *                                    kv_len = step + isl: step counts the
 *                                    tokens already cached)
 *   nccl*_perf.csv                -> all_reduce / all_gather, bytes = elements x
 *                                    element size; alltoall and reduce_scatter
 *                                    are skipped (counted)
 *   *_custom_allreduce_perf.csv   -> all_reduce, bytes = elements x 2 (bf16)
 */
#include "import-int.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Column indices shared by the four tables, and a cache of the last device
 * string mapped to its catalog name (it is the same on every row). */
struct aic {
	int device, kernel, latency;
	char raw[96];
	char dev[64];
};

static int aic_begin(struct imp_file *f, const struct cal_importer *imp, struct aic *a,
		     struct ss_error *err)
{
	int rc = imp_col_req(f, imp, "device", &a->device, err);

	if (!rc)
		rc = imp_col_req(f, imp, "kernel_source", &a->kernel, err);
	if (!rc)
		rc = imp_col_req(f, imp, "latency", &a->latency, err);
	return rc;
}

/* Device, latency and kernel name of a row into m. */
static int aic_fill(struct imp_file *f, struct aic *a, const struct imp_row *r,
		    struct cal_meas *m, struct ss_error *err)
{
	const char *raw = r->f[a->device];
	int rc;

	if (!*raw)
		return imp_field_error(err, f, r, a->device, "empty (expected the GPU name)");
	if (strcmp(raw, a->raw)) {
		rc = imp_device(f, raw, r->line, a->dev, sizeof(a->dev), err);
		if (rc)
			return rc;
		snprintf(a->raw, sizeof(a->raw), "%s", raw);
	}
	snprintf(m->device, sizeof(m->device), "%s", a->dev);
	snprintf(m->device_raw, sizeof(m->device_raw), "%s", raw);
	snprintf(m->variant, sizeof(m->variant), "%s", r->f[a->kernel]);
	return imp_ms(f, r, a->latency, false, &m->mean_ms, err);
}

/* ---- GEMM --------------------------------------------------------------- */

struct gemm_state {
	struct aic a;
	int dtype, m, n, k;
};

static bool gemm_match(const char *const *cols, size_t n)
{
	return imp_has_col(cols, n, "gemm_dtype") && imp_has_col(cols, n, "latency");
}

static int gemm_begin(struct imp_file *f, struct ss_error *err)
{
	struct gemm_state *g = f->priv;
	const struct cal_importer *imp = &cal_importer_aic_gemm;
	int rc = aic_begin(f, imp, &g->a, err);

	if (!rc)
		rc = imp_col_req(f, imp, "gemm_dtype", &g->dtype, err);
	if (!rc)
		rc = imp_col_req(f, imp, "m", &g->m, err);
	if (!rc)
		rc = imp_col_req(f, imp, "n", &g->n, err);
	if (!rc)
		rc = imp_col_req(f, imp, "k", &g->k, err);
	return rc;
}

static int gemm_row(struct imp_file *f, const struct imp_row *r, struct ss_error *err)
{
	struct gemm_state *g = f->priv;
	struct cal_meas m;
	const char *dtype;
	int rc;

	cal_meas_init(&m, CAL_GEMM);
	rc = aic_fill(f, &g->a, r, &m, err);
	if (!rc)
		rc = imp_dtype(f, r, g->dtype, &dtype, NULL, err);
	if (!rc)
		rc = imp_int(f, r, g->m, 1, &m.m, err);
	if (!rc)
		rc = imp_int(f, r, g->n, 1, &m.n, err);
	if (!rc)
		rc = imp_int(f, r, g->k, 1, &m.k, err);
	if (rc)
		return rc;
	if (!imp_keep_dtype(f, dtype)) {
		f->st.filtered++;
		return 0;
	}
	snprintf(m.dtype, sizeof(m.dtype), "%s", dtype);
	return imp_insert(f, &m, r->line, err);
}

const struct cal_importer cal_importer_aic_gemm = {
	.version = CAL_IMPORTER_VERSION,
	.name = "aic-gemm",
	.kind = CAL_IMPORT_AIC_GEMM,
	.priv_size = sizeof(struct gemm_state),
	.expect = "gemm_dtype, m, n, k, latency",
	.match = gemm_match,
	.begin = gemm_begin,
	.row = gemm_row,
};

/* ---- context and generation attention ------------------------------------ */

struct attn_state {
	struct aic a;
	int op, batch, isl, heads, kv_heads, head_dim, beam, kv_dtype, step;
	int window;     /* -1: no window_size column (A100 tables): full attention */
};

static bool attn_match(const char *const *cols, size_t n)
{
	return imp_has_col(cols, n, "kv_cache_dtype") && imp_has_col(cols, n, "isl") &&
	       imp_has_col(cols, n, "num_key_value_heads");
}

static int attn_begin(struct imp_file *f, struct ss_error *err)
{
	const struct cal_importer *imp = &cal_importer_aic_attention;
	struct attn_state *t = f->priv;
	static const struct {
		const char *name;
		size_t off;
	} cols[] = {
		{ "op_name", offsetof(struct attn_state, op) },
		{ "batch_size", offsetof(struct attn_state, batch) },
		{ "isl", offsetof(struct attn_state, isl) },
		{ "num_heads", offsetof(struct attn_state, heads) },
		{ "num_key_value_heads", offsetof(struct attn_state, kv_heads) },
		{ "head_dim", offsetof(struct attn_state, head_dim) },
		{ "beam_width", offsetof(struct attn_state, beam) },
		{ "kv_cache_dtype", offsetof(struct attn_state, kv_dtype) },
		{ "step", offsetof(struct attn_state, step) },
	};
	int rc = aic_begin(f, imp, &t->a, err);

	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]) && !rc; i++)
		rc = imp_col_req(f, imp, cols[i].name, (int *)((char *)t + cols[i].off), err);
	t->window = imp_col(f, "window_size");
	return rc;
}

static int attn_row(struct imp_file *f, const struct imp_row *r, struct ss_error *err)
{
	struct attn_state *t = f->priv;
	const char *op = r->f[t->op], *dtype;
	int64_t isl, step, beam, window = 0;
	struct cal_meas m;
	int rc;

	if (!strcmp(op, "context_attention"))
		cal_meas_init(&m, CAL_ATTN_PREFILL);
	else if (!strcmp(op, "generation_attention"))
		cal_meas_init(&m, CAL_ATTN_DECODE);
	else
		return imp_field_error(err, f, r, t->op,
				       "'%s' (expected context_attention or generation_attention)",
				       op);
	rc = aic_fill(f, &t->a, r, &m, err);
	if (!rc)
		rc = imp_dtype(f, r, t->kv_dtype, &dtype, NULL, err);
	if (!rc)
		rc = imp_int(f, r, t->batch, 1, &m.batch, err);
	if (!rc)
		rc = imp_int(f, r, t->isl, 1, &isl, err);
	if (!rc)
		rc = imp_int(f, r, t->heads, 1, &m.heads, err);
	if (!rc)
		rc = imp_int(f, r, t->kv_heads, 1, &m.kv_heads, err);
	if (!rc)
		rc = imp_int(f, r, t->head_dim, 1, &m.head_dim, err);
	if (!rc)
		rc = imp_int(f, r, t->beam, 1, &beam, err);
	if (!rc)
		rc = imp_int(f, r, t->step, 0, &step, err);
	if (!rc && t->window >= 0)
		rc = imp_int(f, r, t->window, 0, &window, err);
	if (rc)
		return rc;
	if (beam != 1) {
		f->st.skipped++;        /* beam search is not modeled */
		return 0;
	}
	if (!imp_keep_dtype(f, dtype) ||
	    (f->opts->window >= 0 && window != f->opts->window)) {
		f->st.filtered++;
		return 0;
	}
	snprintf(m.dtype, sizeof(m.dtype), "%s", dtype);
	if (window) {
		size_t n = strlen(m.variant);

		snprintf(m.variant + n, sizeof(m.variant) - n, ":window=%lld", (long long)window);
	}
	m.q_len = isl;
	if (m.op == CAL_ATTN_PREFILL)
		m.kv_len = step;        /* no prior context: step is 0 */
	else
		m.kv_len = step + isl;  /* step tokens cached, plus the new one */
	return imp_insert(f, &m, r->line, err);
}

const struct cal_importer cal_importer_aic_attention = {
	.version = CAL_IMPORTER_VERSION,
	.name = "aic-attention",
	.kind = CAL_IMPORT_AIC_ATTENTION,
	.priv_size = sizeof(struct attn_state),
	.expect = "op_name, batch_size, isl, num_heads, num_key_value_heads, head_dim, kv_cache_dtype, step, latency",
	.match = attn_match,
	.begin = attn_begin,
	.row = attn_row,
};

/* ---- NCCL collectives --------------------------------------------------- */

struct nccl_state {
	struct aic a;
	int op, dtype, gpus, size;
};

static bool nccl_match(const char *const *cols, size_t n)
{
	return imp_has_col(cols, n, "nccl_dtype") && imp_has_col(cols, n, "message_size");
}

static int nccl_begin(struct imp_file *f, struct ss_error *err)
{
	const struct cal_importer *imp = &cal_importer_aic_nccl;
	struct nccl_state *c = f->priv;
	int rc = aic_begin(f, imp, &c->a, err);

	if (!rc)
		rc = imp_col_req(f, imp, "op_name", &c->op, err);
	if (!rc)
		rc = imp_col_req(f, imp, "nccl_dtype", &c->dtype, err);
	if (!rc)
		rc = imp_col_req(f, imp, "num_gpus", &c->gpus, err);
	if (!rc)
		rc = imp_col_req(f, imp, "message_size", &c->size, err);
	return rc;
}

/* Element count x element size, checked for overflow. */
static int to_bytes(const struct imp_file *f, const struct imp_row *r, int col, int64_t elems,
		    int elem_bytes, int64_t *out, struct ss_error *err)
{
	if (elem_bytes <= 0)
		return imp_field_error(err, f, r, col,
				       "dtype without a fixed element size (cannot convert elements to bytes)");
	if (elems > INT64_MAX / elem_bytes)
		return imp_field_error(err, f, r, col, "%lld elements: too large",
				       (long long)elems);
	*out = elems * elem_bytes;
	return 0;
}

static int nccl_row(struct imp_file *f, const struct imp_row *r, struct ss_error *err)
{
	struct nccl_state *c = f->priv;
	const char *op = r->f[c->op], *dtype;
	bool modeled = true;
	int64_t elems;
	struct cal_meas m;
	int esize, rc;

	if (!strcmp(op, "all_reduce"))
		cal_meas_init(&m, CAL_ALL_REDUCE);
	else if (!strcmp(op, "all_gather"))
		cal_meas_init(&m, CAL_ALL_GATHER);
	else if (!strcmp(op, "alltoall") || !strcmp(op, "reduce_scatter"))
		modeled = false;
	else
		return imp_field_error(err, f, r, c->op,
				       "'%s' (expected all_reduce, all_gather, alltoall or reduce_scatter)",
				       op);
	if (!modeled)
		cal_meas_init(&m, CAL_ALL_REDUCE);   /* parsed for validation only */
	rc = aic_fill(f, &c->a, r, &m, err);
	if (!rc)
		rc = imp_dtype(f, r, c->dtype, &dtype, &esize, err);
	if (!rc)
		rc = imp_int(f, r, c->gpus, 1, &m.num_gpus, err);
	if (!rc)
		rc = imp_int(f, r, c->size, 1, &elems, err);
	if (!rc)
		rc = to_bytes(f, r, c->dtype, elems, esize, &m.bytes, err);
	if (rc)
		return rc;
	if (!modeled) {
		f->st.skipped++;
		return 0;
	}
	if (!imp_keep_dtype(f, dtype)) {
		f->st.filtered++;
		return 0;
	}
	snprintf(m.dtype, sizeof(m.dtype), "%s", dtype);
	snprintf(m.variant, sizeof(m.variant), "nccl");
	return imp_insert(f, &m, r->line, err);
}

const struct cal_importer cal_importer_aic_nccl = {
	.version = CAL_IMPORTER_VERSION,
	.name = "aic-nccl",
	.kind = CAL_IMPORT_AIC_NCCL,
	.priv_size = sizeof(struct nccl_state),
	.expect = "op_name, nccl_dtype, num_gpus, message_size, latency",
	.match = nccl_match,
	.begin = nccl_begin,
	.row = nccl_row,
};

/* ---- vLLM custom all-reduce --------------------------------------------- */

struct car_state {
	struct aic a;
	int dtype, gpus, size, backend;
};

static bool car_match(const char *const *cols, size_t n)
{
	return imp_has_col(cols, n, "allreduce_dtype") && imp_has_col(cols, n, "message_size");
}

static int car_begin(struct imp_file *f, struct ss_error *err)
{
	const struct cal_importer *imp = &cal_importer_aic_custom_ar;
	struct car_state *c = f->priv;
	int rc = aic_begin(f, imp, &c->a, err);

	if (!rc)
		rc = imp_col_req(f, imp, "allreduce_dtype", &c->dtype, err);
	if (!rc)
		rc = imp_col_req(f, imp, "num_gpus", &c->gpus, err);
	if (!rc)
		rc = imp_col_req(f, imp, "message_size", &c->size, err);
	if (!rc)
		rc = imp_col_req(f, imp, "backend", &c->backend, err);
	return rc;
}

static int car_row(struct imp_file *f, const struct imp_row *r, struct ss_error *err)
{
	struct car_state *c = f->priv;
	const char *dtype, *backend = r->f[c->backend];
	struct cal_meas m;
	int64_t elems;
	int esize, rc;

	cal_meas_init(&m, CAL_ALL_REDUCE);
	rc = aic_fill(f, &c->a, r, &m, err);
	if (!rc)
		rc = imp_dtype(f, r, c->dtype, &dtype, &esize, err);
	if (!rc)
		rc = imp_int(f, r, c->gpus, 1, &m.num_gpus, err);
	if (!rc)
		rc = imp_int(f, r, c->size, 1, &elems, err);
	if (!rc)
		rc = to_bytes(f, r, c->dtype, elems, esize, &m.bytes, err);
	if (!rc && !*backend)
		rc = imp_field_error(err, f, r, c->backend,
				     "empty (expected vllm_graph or vllm_eager)");
	if (rc)
		return rc;
	if (!imp_keep_dtype(f, dtype) ||
	    (f->opts->ar_backend && strcmp(f->opts->ar_backend, backend))) {
		f->st.filtered++;
		return 0;
	}
	snprintf(m.dtype, sizeof(m.dtype), "%s", dtype);
	snprintf(m.variant, sizeof(m.variant), "%s", backend);
	return imp_insert(f, &m, r->line, err);
}

const struct cal_importer cal_importer_aic_custom_ar = {
	.version = CAL_IMPORTER_VERSION,
	.name = "aic-custom-allreduce",
	.kind = CAL_IMPORT_AIC_CUSTOM_AR,
	.priv_size = sizeof(struct car_state),
	.expect = "allreduce_dtype, num_gpus, message_size, latency, backend",
	.match = car_match,
	.begin = car_begin,
	.row = car_row,
};
