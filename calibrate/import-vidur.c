/* servesim — Vidur's profiling tables into the calibration store.
 *
 * Vidur (microsoft/vidur, MIT) profiles one transformer layer's operators
 * with fp16 weights (its profilers cast the model to torch.float16), each
 * with min/max/mean/median/std in ms.  The shapes below follow Vidur's
 * profiling code (vidur/profiling/mlp/mlp_impl.py: ColumnParallelLinear
 * splits its output features over the TP workers, RowParallelLinear its
 * input features); docs/calibration.md derives every one and checks them
 * against aiconfigurator's GEMM times for the same (m, n, k).
 *
 *   compute/<gpu>/<org>/<model>/mlp.csv  (one line: one layer at num_tokens, TP)
 *     attn_pre_proj  -> gemm m = tokens, n = (H + 2 KV) hd / tp, k = E
 *     attn_post_proj -> gemm m = tokens, n = E, k = H hd / tp
 *     mlp_up_proj    -> gemm m = tokens, n = (gated ? 2 : 1) F / tp, k = E
 *     mlp_down_proj  -> gemm m = tokens, n = E, k = F / tp
 *     input_layernorm, post_attention_layernorm -> rmsnorm (layernorm for the
 *                       non-gated phi-2), tokens, width = E
 *     attn_rope      -> rope, tokens, heads H/tp, kv_heads KV/tp, head_dim hd,
 *                       width = (H + KV) hd / tp
 *     mlp_act        -> activation, tokens, width = F / tp (output width)
 *     add            -> residual_add, tokens, width = E
 *     emb            -> embedding, tokens, width = E
 *   network/<node>/{all_reduce,send_recv}.csv
 *     -> all_reduce / send_recv, num_gpus = num_workers, bytes = size: the
 *        profiler writes size = 2 x fp16 elements, i.e. bytes already;
 *        lines with the same (collective, num_workers, devices_per_node,
 *        size) merge into one measurement
 *   legacy_attention/<gpu>_attention_*.csv (or attention.csv)
 *     -> attn_prefill (batch, q_len = prefill_chunk_size, kv_len = kv_cache_size)
 *        attn_decode  (batch, q_len = 1, kv_len = kv_cache_size + 1);
 *        heads = n_q_head / tp (the file has the model's head counts)
 *   legacy_cpu_overheads/<gpu>_cpu_overheads.csv
 *     -> host_overhead, variant "<part>:<model>", batch, tp
 */
#include "import-int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { S_MEAN, S_MEDIAN, S_MIN, S_MAX, S_STD, S_N };
static const char *const stat_names[S_N] = { "mean", "median", "min", "max", "std" };

/* Resolve time_stats.<name>.{mean,median,min,max,std}; col[0] = -1 when
 * the operation is absent.  All five or none. */
static int stat_cols(struct imp_file *f, const struct cal_importer *imp, const char *name,
		     int col[S_N], struct ss_error *err)
{
	char buf[96];
	int rc = 0;

	snprintf(buf, sizeof(buf), "time_stats.%s.mean", name);
	col[0] = imp_col(f, buf);
	if (col[0] < 0)
		return 0;
	for (int i = 1; i < S_N && !rc; i++) {
		snprintf(buf, sizeof(buf), "time_stats.%s.%s", name, stat_names[i]);
		rc = imp_col_req(f, imp, buf, &col[i], err);
	}
	return rc;
}

static int read_stats(const struct imp_file *f, const struct imp_row *r, const int col[S_N],
		      double st[S_N], struct ss_error *err)
{
	int rc = 0;

	for (int i = 0; i < S_N && !rc; i++)
		rc = imp_ms(f, r, col[i], false, &st[i], err);
	return rc;
}

static void put_stats(struct cal_meas *m, const double st[S_N])
{
	m->mean_ms = st[S_MEAN];
	m->median_ms = st[S_MEDIAN];
	m->min_ms = st[S_MIN];
	m->max_ms = st[S_MAX];
	m->std_ms = st[S_STD];
}

/* The GPU of a Vidur file: the directory after `dir` in its path (when dir
 * is not NULL), else the file name's prefix ("a100" in
 * "a100_cpu_overheads.csv"); --device overrides the catalog name. */
static int vidur_device(struct imp_file *f, const char *dir, char *raw, size_t rawlen,
			char *dev, size_t devlen, struct ss_error *err)
{
	if (!dir || !imp_component_after(f->path, dir, raw, rawlen))
		imp_basename_prefix(f->path, raw, rawlen);
	if (!f->opts->device && !cal_import_gpu_name(raw))
		return ss_error_set(err, -EINVAL, f->path, 0,
				    "cannot tell the GPU: '%s' (from the %s) is not a GPU servesim knows (expected %s); pass --device NAME",
				    raw, dir ? "path" : "file name",
				    dir && !strcmp(dir, "network")
				    ? ".../network/<node>/ with node h100_dgx, a100_dgx, h100_pairwise_nvlink, a100_pairwise_nvlink or a40_pairwise_nvlink"
				    : dir ? ".../compute/<gpu>/... with gpu h100, a100 or a40"
				    : "a file name starting with h100_, a100_ or a40_");
	return imp_device(f, raw, 0, dev, devlen, err);
}

/* A growable array of fixed-size records. */
struct vec {
	void *v;
	size_t n, cap, size;
};

static void *vec_push(struct vec *a)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 256;
		void *nv = realloc(a->v, cap * a->size);

		if (!nv)
			return NULL;
		a->v = nv;
		a->cap = cap;
	}
	return (char *)a->v + a->size * a->n++;
}

/* ---- compute/<gpu>/<org>/<model>/mlp.csv ------------------------------- */

enum mlp_op {
	MLP_EMB, MLP_INPUT_LN, MLP_PRE_PROJ, MLP_ROPE, MLP_POST_PROJ, MLP_POST_LN,
	MLP_UP_PROJ, MLP_ACT, MLP_DOWN_PROJ, MLP_ADD, MLP_N
};

static const char *const mlp_op_names[MLP_N] = {
	"emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
	"post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add",
};

enum { MC_H, MC_KV, MC_E, MC_F, MC_GATED, MC_TOKENS, MC_TP, MC_N };
static const char *const mlp_shape_cols[MC_N] = {
	"n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp", "num_tokens",
	"num_tensor_parallel_workers",
};

struct mlp_line {
	long line;
	int64_t h, kv, e, ff, tokens, tp;
	bool gated;
	bool keep;              /* survives thinning */
	double st[MLP_N][S_N];
};

struct mlp_state {
	int op[MLP_N][S_N];
	int shape[MC_N];
	char raw[96];
	char dev[64];
	struct vec lines;       /* struct mlp_line */
};

static bool mlp_match(const char *const *cols, size_t n)
{
	return imp_has_col(cols, n, "num_tensor_parallel_workers") &&
	       imp_has_col(cols, n, "n_expanded_embd") && imp_has_col(cols, n, "num_tokens");
}

static int mlp_begin(struct imp_file *f, struct ss_error *err)
{
	const struct cal_importer *imp = &cal_importer_vidur_mlp;
	struct mlp_state *s = f->priv;
	int rc = 0, n_ops = 0;

	s->lines.size = sizeof(struct mlp_line);
	for (int i = 0; i < MC_N && !rc; i++)
		rc = imp_col_req(f, imp, mlp_shape_cols[i], &s->shape[i], err);
	for (int i = 0; i < MLP_N && !rc; i++) {
		rc = stat_cols(f, imp, mlp_op_names[i], s->op[i], err);
		n_ops += s->op[i][0] >= 0;
	}
	if (!rc && n_ops == 0)
		rc = ss_error_set(err, -EINVAL, f->path, f->header_line,
				  "no time_stats.<op>.mean columns (expected e.g. time_stats.attn_pre_proj.mean)");
	if (!rc)
		rc = vidur_device(f, "compute", s->raw, sizeof(s->raw), s->dev, sizeof(s->dev), err);
	return rc;
}

/* a % b == 0, or an error about column col. */
static int divides(const struct imp_file *f, const struct imp_row *r, int col, int64_t a,
		   const char *what, int64_t b, struct ss_error *err)
{
	if (a % b)
		return imp_field_error(err, f, r, col, "%lld is not a multiple of %s (%lld)",
				       (long long)a, what, (long long)b);
	return 0;
}

static int mlp_row(struct imp_file *f, const struct imp_row *r, struct ss_error *err)
{
	struct mlp_state *s = f->priv;
	struct mlp_line *l = vec_push(&s->lines);
	const int *c = s->shape;
	int rc;

	if (!l)
		return ss_error_set(err, -ENOMEM, f->path, r->line, "out of memory");
	l->line = r->line;
	rc = imp_int(f, r, c[MC_H], 1, &l->h, err);
	if (!rc)
		rc = imp_int(f, r, c[MC_KV], 1, &l->kv, err);
	if (!rc)
		rc = imp_int(f, r, c[MC_E], 1, &l->e, err);
	if (!rc)
		rc = imp_int(f, r, c[MC_F], 1, &l->ff, err);
	if (!rc)
		rc = imp_bool(f, r, c[MC_GATED], &l->gated, err);
	if (!rc)
		rc = imp_int(f, r, c[MC_TOKENS], 1, &l->tokens, err);
	if (!rc)
		rc = imp_int(f, r, c[MC_TP], 1, &l->tp, err);
	/* the divisions Vidur's profiler asserts */
	if (!rc)
		rc = divides(f, r, c[MC_E], l->e, "n_head", l->h, err);
	if (!rc)
		rc = divides(f, r, c[MC_H], l->h, "num_tensor_parallel_workers", l->tp, err);
	if (!rc)
		rc = divides(f, r, c[MC_KV], l->kv, "num_tensor_parallel_workers", l->tp, err);
	if (!rc)
		rc = divides(f, r, c[MC_F], l->ff, "num_tensor_parallel_workers", l->tp, err);
	for (int i = 0; i < MLP_N && !rc; i++)
		if (s->op[i][0] >= 0)
			rc = read_stats(f, r, s->op[i], l->st[i], err);
	return rc;
}

/* The measurement of operation i of line l. */
static void mlp_meas(const struct mlp_state *s, const struct mlp_line *l, int i,
		     struct cal_meas *m)
{
	int64_t hd = l->e / l->h, tp = l->tp;

	switch (i) {
	case MLP_EMB:
		cal_meas_init(m, CAL_EMBEDDING);
		m->tokens = l->tokens;
		m->width = l->e;
		break;
	case MLP_INPUT_LN:
	case MLP_POST_LN:
		/* Vidur's non-gated model (phi-2) uses LayerNorm, the gated
		 * ones RMSNorm; the CSV does not name the norm. */
		cal_meas_init(m, l->gated ? CAL_RMSNORM : CAL_LAYERNORM);
		m->tokens = l->tokens;
		m->width = l->e;
		break;
	case MLP_PRE_PROJ:
		cal_meas_init(m, CAL_GEMM);
		m->m = l->tokens;
		m->n = (l->h + 2 * l->kv) * hd / tp;
		m->k = l->e;
		break;
	case MLP_ROPE:
		cal_meas_init(m, CAL_ROPE);
		m->tokens = l->tokens;
		m->heads = l->h / tp;
		m->kv_heads = l->kv / tp;
		m->head_dim = hd;
		m->width = (l->h + l->kv) / tp * hd;
		break;
	case MLP_POST_PROJ:
		cal_meas_init(m, CAL_GEMM);
		m->m = l->tokens;
		m->n = l->e;
		m->k = l->h * hd / tp;
		break;
	case MLP_UP_PROJ:
		cal_meas_init(m, CAL_GEMM);
		m->m = l->tokens;
		m->n = (l->gated ? 2 : 1) * l->ff / tp;
		m->k = l->e;
		break;
	case MLP_ACT:
		cal_meas_init(m, CAL_ACTIVATION);
		m->tokens = l->tokens;
		m->width = l->ff / tp;
		break;
	case MLP_DOWN_PROJ:
		cal_meas_init(m, CAL_GEMM);
		m->m = l->tokens;
		m->n = l->e;
		m->k = l->ff / tp;
		break;
	default:   /* MLP_ADD */
		cal_meas_init(m, CAL_RESIDUAL_ADD);
		m->tokens = l->tokens;
		m->width = l->e;
		break;
	}
	m->tp = tp;
	put_stats(m, l->st[i]);
	snprintf(m->device, sizeof(m->device), "%s", s->dev);
	snprintf(m->device_raw, sizeof(m->device_raw), "%s", s->raw);
	snprintf(m->dtype, sizeof(m->dtype), "fp16");
	snprintf(m->variant, sizeof(m->variant), "vidur:%s", mlp_op_names[i]);
}

/* Order lines by model shape and TP degree, then num_tokens and line: one
 * run per grid to thin. */
static int mlp_cmp(const void *a, const void *b)
{
	const struct mlp_line *x = *(const struct mlp_line *const *)a;
	const struct mlp_line *y = *(const struct mlp_line *const *)b;
	const int64_t kx[] = { x->tp, x->e, x->h, x->kv, x->ff, x->gated, x->tokens, x->line };
	const int64_t ky[] = { y->tp, y->e, y->h, y->kv, y->ff, y->gated, y->tokens, y->line };

	for (size_t i = 0; i < sizeof(kx) / sizeof(kx[0]); i++)
		if (kx[i] != ky[i])
			return kx[i] < ky[i] ? -1 : 1;
	return 0;
}

static bool mlp_same_grid(const struct mlp_line *x, const struct mlp_line *y)
{
	return x->tp == y->tp && x->e == y->e && x->h == y->h && x->kv == y->kv &&
	       x->ff == y->ff && x->gated == y->gated;
}

static int mlp_end(struct imp_file *f, struct ss_error *err)
{
	struct mlp_state *s = f->priv;
	struct mlp_line *v = s->lines.v;
	size_t n = s->lines.n, m1 = n ? n : 1;
	struct mlp_line **ord = malloc(m1 * sizeof(*ord));
	int64_t *vals = malloc(m1 * sizeof(*vals));
	bool *keep = malloc(m1 * sizeof(*keep));
	int rc = 0;

	if (!ord || !vals || !keep) {
		rc = ss_error_set(err, -ENOMEM, f->path, 0, "out of memory");
		goto out;
	}
	/* thin num_tokens within each TP degree (and model shape, should a
	 * file ever mix two) */
	for (size_t i = 0; i < n; i++)
		ord[i] = &v[i];
	qsort(ord, n, sizeof(*ord), mlp_cmp);
	for (size_t i = 0, j; i < n && !rc; i = j) {
		for (j = i; j < n && mlp_same_grid(ord[i], ord[j]); j++)
			vals[j - i] = ord[j]->tokens;
		if (imp_thin(vals, j - i, f->opts->per_octave, keep))
			rc = ss_error_set(err, -ENOMEM, f->path, 0, "out of memory");
		for (size_t k = i; k < j && !rc; k++)
			ord[k]->keep = keep[k - i];
	}
	for (size_t i = 0; i < n && !rc; i++) {
		if (!v[i].keep || !imp_keep_dtype(f, "fp16")) {
			f->st.filtered++;
			continue;
		}
		for (int op = 0; op < MLP_N && !rc; op++) {
			struct cal_meas m;

			if (s->op[op][0] < 0)
				continue;
			mlp_meas(s, &v[i], op, &m);
			rc = imp_insert(f, &m, v[i].line, err);
		}
	}
out:
	free(ord);
	free(vals);
	free(keep);
	return rc;
}

static void mlp_release(struct imp_file *f)
{
	struct mlp_state *s = f->priv;

	free(s->lines.v);
}

const struct cal_importer cal_importer_vidur_mlp = {
	.version = CAL_IMPORTER_VERSION,
	.name = "vidur-mlp",
	.kind = CAL_IMPORT_VIDUR_MLP,
	.priv_size = sizeof(struct mlp_state),
	.expect = "time_stats.<op>.{min,max,mean,median,std}, n_head, n_kv_head, n_embd, n_expanded_embd, use_gated_mlp, num_tokens, num_tensor_parallel_workers",
	.match = mlp_match,
	.begin = mlp_begin,
	.row = mlp_row,
	.end = mlp_end,
	.release = mlp_release,
};

/* ---- network/<node>/{all_reduce,send_recv}.csv -------------------------- */

enum net_coll { NET_ALL_REDUCE, NET_ALL_GATHER, NET_SEND_RECV, NET_N };
static const char *const net_names[NET_N] = { "all_reduce", "all_gather", "send_recv" };
static const enum cal_op net_ops[NET_N] = { CAL_ALL_REDUCE, CAL_ALL_GATHER, CAL_SEND_RECV };

struct net_line {
	long line;
	int coll;
	int64_t workers, per_node, size;
	double st[S_N];
};

struct net_state {
	int st[NET_N][S_N];
	int coll, workers, per_node, size;
	char raw[96];
	char dev[64];
	char topo[96];
	struct vec lines;       /* struct net_line */
};

static bool net_match(const char *const *cols, size_t n)
{
	return imp_has_col(cols, n, "collective") && imp_has_col(cols, n, "num_workers") &&
	       imp_has_col(cols, n, "size");
}

static int net_begin(struct imp_file *f, struct ss_error *err)
{
	const struct cal_importer *imp = &cal_importer_vidur_network;
	struct net_state *s = f->priv;
	const char *us;
	int rc;

	s->lines.size = sizeof(struct net_line);
	rc = imp_col_req(f, imp, "collective", &s->coll, err);
	if (!rc)
		rc = imp_col_req(f, imp, "num_workers", &s->workers, err);
	if (!rc)
		rc = imp_col_req(f, imp, "devices_per_node", &s->per_node, err);
	if (!rc)
		rc = imp_col_req(f, imp, "size", &s->size, err);
	for (int i = 0; i < NET_N && !rc; i++)
		rc = stat_cols(f, imp, net_names[i], s->st[i], err);
	if (!rc)
		rc = vidur_device(f, "network", s->raw, sizeof(s->raw), s->dev, sizeof(s->dev), err);
	/* "h100_dgx" -> "dgx", "a100_pairwise_nvlink" -> "pairwise_nvlink" */
	us = strchr(s->raw, '_');
	snprintf(s->topo, sizeof(s->topo), "%s", us ? us + 1 : s->raw);
	return rc;
}

static int net_row(struct imp_file *f, const struct imp_row *r, struct ss_error *err)
{
	struct net_state *s = f->priv;
	const char *coll = r->f[s->coll];
	struct net_line *l;
	int c, rc;

	for (c = 0; c < NET_N; c++)
		if (!strcmp(coll, net_names[c]))
			break;
	if (c == NET_N) {
		if (!strcmp(coll, "broadcast") || !strcmp(coll, "reduce_scatter")) {
			f->st.skipped++;
			return 0;
		}
		return imp_field_error(err, f, r, s->coll,
				       "'%s' (expected all_reduce, send_recv or all_gather)", coll);
	}
	if (s->st[c][0] < 0)
		return imp_field_error(err, f, r, s->coll,
				       "%s, but the header has no time_stats.%s.mean column", coll,
				       coll);
	l = vec_push(&s->lines);
	if (!l)
		return ss_error_set(err, -ENOMEM, f->path, r->line, "out of memory");
	l->line = r->line;
	l->coll = c;
	rc = imp_int(f, r, s->workers, 1, &l->workers, err);
	if (!rc)
		rc = imp_int(f, r, s->per_node, 1, &l->per_node, err);
	if (!rc)
		rc = imp_int(f, r, s->size, 1, &l->size, err);
	if (!rc && (l->per_node > l->workers || l->workers % l->per_node))
		rc = imp_field_error(err, f, r, s->per_node,
				     "%lld devices per node for %lld workers (expected a divisor)",
				     (long long)l->per_node, (long long)l->workers);
	if (!rc)
		rc = read_stats(f, r, s->st[c], l->st, err);
	return rc;
}

/* Sort key: (collective, workers, per node, size, line). */
static int net_cmp(const void *a, const void *b)
{
	const struct net_line *x = a, *y = b;

	if (x->coll != y->coll)
		return x->coll < y->coll ? -1 : 1;
	if (x->workers != y->workers)
		return x->workers < y->workers ? -1 : 1;
	if (x->per_node != y->per_node)
		return x->per_node < y->per_node ? -1 : 1;
	if (x->size != y->size)
		return x->size < y->size ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static bool net_same_point(const struct net_line *x, const struct net_line *y)
{
	return x->coll == y->coll && x->workers == y->workers && x->per_node == y->per_node &&
	       x->size == y->size;
}

static int line_cmp(const void *a, const void *b)
{
	const struct net_line *x = a, *y = b;

	return x->line < y->line ? -1 : x->line > y->line;
}

static int net_end(struct imp_file *f, struct ss_error *err)
{
	struct net_state *s = f->priv;
	struct net_line *v = s->lines.v, *out;
	size_t n = s->lines.n, nout = 0;
	int64_t *vals = malloc((n ? n : 1) * sizeof(*vals));
	bool *keep = malloc((n ? n : 1) * sizeof(*keep));
	int rc = 0;

	out = malloc((n ? n : 1) * sizeof(*out));
	if (!vals || !keep || !out) {
		rc = ss_error_set(err, -ENOMEM, f->path, 0, "out of memory");
		goto done;
	}
	qsort(v, n, sizeof(*v), net_cmp);
	/* thin message sizes within each (collective, workers, per node) */
	for (size_t i = 0, j; i < n && !rc; i = j) {
		for (j = i; j < n && v[j].coll == v[i].coll && v[j].workers == v[i].workers &&
			    v[j].per_node == v[i].per_node; j++)
			vals[j - i] = v[j].size;
		if (imp_thin(vals, j - i, f->opts->per_octave, keep + i))
			rc = ss_error_set(err, -ENOMEM, f->path, 0, "out of memory");
	}
	/* merge the lines of one (collective, workers, per node, size): mean
	 * and median averaged, min of mins, max of maxes, std pooled as if
	 * each line had the same number of samples */
	for (size_t i = 0, j; i < n && !rc; i = j) {
		double sum[S_N] = { 0 }, sq = 0, lo = INFINITY, hi = 0;
		struct net_line *o;
		size_t k;

		for (j = i; j < n && net_same_point(&v[i], &v[j]); j++)
			;
		if (!keep[i] || !imp_keep_dtype(f, "fp16")) {
			f->st.filtered += (int64_t)(j - i);
			continue;
		}
		for (k = i; k < j; k++) {
			sum[S_MEAN] += v[k].st[S_MEAN];
			sum[S_MEDIAN] += v[k].st[S_MEDIAN];
			sq += v[k].st[S_STD] * v[k].st[S_STD] + v[k].st[S_MEAN] * v[k].st[S_MEAN];
			lo = fmin(lo, v[k].st[S_MIN]);
			hi = fmax(hi, v[k].st[S_MAX]);
		}
		o = &out[nout++];
		*o = v[i];              /* the first line of the group */
		o->st[S_MEAN] = sum[S_MEAN] / (double)(j - i);
		o->st[S_MEDIAN] = sum[S_MEDIAN] / (double)(j - i);
		o->st[S_MIN] = lo;
		o->st[S_MAX] = hi;
		o->st[S_STD] = j - i == 1 ? v[i].st[S_STD]
			       : sqrt(fmax(0, sq / (double)(j - i) - o->st[S_MEAN] * o->st[S_MEAN]));
	}
	qsort(out, nout, sizeof(*out), line_cmp);
	for (size_t i = 0; i < nout && !rc; i++) {
		const struct net_line *l = &out[i];
		int64_t nodes = l->workers / l->per_node;
		struct cal_meas m;
		size_t len;

		cal_meas_init(&m, net_ops[l->coll]);
		snprintf(m.device, sizeof(m.device), "%s", s->dev);
		snprintf(m.device_raw, sizeof(m.device_raw), "%s", s->raw);
		snprintf(m.dtype, sizeof(m.dtype), "fp16");
		len = (size_t)snprintf(m.variant, sizeof(m.variant), "vidur:%s", s->topo);
		if (nodes > 1 && len < sizeof(m.variant))
			snprintf(m.variant + len, sizeof(m.variant) - len, ":nodes=%lld",
				 (long long)nodes);
		m.num_gpus = l->workers;
		m.bytes = l->size;      /* already bytes: 2 x fp16 elements */
		put_stats(&m, l->st);
		rc = imp_insert(f, &m, l->line, err);
	}
done:
	free(vals);
	free(keep);
	free(out);
	return rc;
}

static void net_release(struct imp_file *f)
{
	struct net_state *s = f->priv;

	free(s->lines.v);
}

const struct cal_importer cal_importer_vidur_network = {
	.version = CAL_IMPORTER_VERSION,
	.name = "vidur-network",
	.kind = CAL_IMPORT_VIDUR_NETWORK,
	.priv_size = sizeof(struct net_state),
	.expect = "time_stats.<collective>.{min,max,mean,median,std}, num_workers, devices_per_node, size, collective",
	.match = net_match,
	.begin = net_begin,
	.row = net_row,
	.end = net_end,
	.release = net_release,
};

/* ---- legacy attention --------------------------------------------------- */

enum { AC_E, AC_QH, AC_KVH, AC_TP, AC_BATCH, AC_CHUNK, AC_KV, AC_PREFILL, AC_N };
static const char *const attn_cols[AC_N] = {
	"n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "batch_size",
	"prefill_chunk_size", "kv_cache_size", "is_prefill",
};

struct vattn_state {
	int c[AC_N];
	int prefill[S_N], decode[S_N];
	int backend;            /* -1 when absent */
	char raw[96];
	char dev[64];
};

static bool vattn_match(const char *const *cols, size_t n)
{
	return imp_has_col(cols, n, "is_prefill") && imp_has_col(cols, n, "prefill_chunk_size") &&
	       imp_has_col(cols, n, "kv_cache_size");
}

static int vattn_begin(struct imp_file *f, struct ss_error *err)
{
	const struct cal_importer *imp = &cal_importer_vidur_attention;
	struct vattn_state *s = f->priv;
	int rc = 0;

	for (int i = 0; i < AC_N && !rc; i++)
		rc = imp_col_req(f, imp, attn_cols[i], &s->c[i], err);
	if (!rc)
		rc = stat_cols(f, imp, "attn_prefill", s->prefill, err);
	if (!rc)
		rc = stat_cols(f, imp, "attn_decode", s->decode, err);
	if (!rc && s->prefill[0] < 0 && s->decode[0] < 0)
		rc = ss_error_set(err, -EINVAL, f->path, f->header_line,
				  "missing column 'time_stats.attn_prefill.mean' and 'time_stats.attn_decode.mean'");
	s->backend = imp_col(f, "attention_backend");
	if (!rc)
		rc = vidur_device(f, "compute", s->raw, sizeof(s->raw), s->dev, sizeof(s->dev), err);
	return rc;
}

static int vattn_row(struct imp_file *f, const struct imp_row *r, struct ss_error *err)
{
	struct vattn_state *s = f->priv;
	int64_t e, qh, kvh, tp, chunk, kv;
	const char *backend;
	struct cal_meas m;
	double st[S_N];
	bool prefill;
	int rc;

	rc = imp_bool(f, r, s->c[AC_PREFILL], &prefill, err);
	if (rc)
		return rc;
	cal_meas_init(&m, prefill ? CAL_ATTN_PREFILL : CAL_ATTN_DECODE);
	rc = imp_int(f, r, s->c[AC_E], 1, &e, err);
	if (!rc)
		rc = imp_int(f, r, s->c[AC_QH], 1, &qh, err);
	if (!rc)
		rc = imp_int(f, r, s->c[AC_KVH], 1, &kvh, err);
	if (!rc)
		rc = imp_int(f, r, s->c[AC_TP], 1, &tp, err);
	if (!rc)
		rc = imp_int(f, r, s->c[AC_BATCH], 1, &m.batch, err);
	if (!rc)
		rc = imp_int(f, r, s->c[AC_CHUNK], prefill ? 1 : 0, &chunk, err);
	if (!rc)
		rc = imp_int(f, r, s->c[AC_KV], 0, &kv, err);
	if (!rc)
		rc = divides(f, r, s->c[AC_E], e, "n_q_head", qh, err);
	if (!rc)
		rc = divides(f, r, s->c[AC_QH], qh, "num_tensor_parallel_workers", tp, err);
	if (!rc)
		rc = divides(f, r, s->c[AC_KVH], kvh, "num_tensor_parallel_workers", tp, err);
	if (rc)
		return rc;
	if ((prefill ? s->prefill : s->decode)[0] < 0)
		return imp_field_error(err, f, r, s->c[AC_PREFILL],
				       "a %s row, but the header has no time_stats.attn_%s.mean column",
				       prefill ? "prefill" : "decode", prefill ? "prefill" : "decode");
	rc = read_stats(f, r, prefill ? s->prefill : s->decode, st, err);
	if (rc)
		return rc;
	if (!imp_keep_dtype(f, "fp16")) {
		f->st.filtered++;
		return 0;
	}
	m.heads = qh / tp;              /* the file has the model's head counts */
	m.kv_heads = kvh / tp;
	m.head_dim = e / qh;
	m.tp = tp;
	if (prefill) {
		m.q_len = chunk;
		m.kv_len = kv;          /* tokens before the chunk */
	} else {
		m.q_len = 1;
		m.kv_len = kv + 1;      /* cached tokens plus the new one */
	}
	put_stats(&m, st);
	snprintf(m.device, sizeof(m.device), "%s", s->dev);
	snprintf(m.device_raw, sizeof(m.device_raw), "%s", s->raw);
	snprintf(m.dtype, sizeof(m.dtype), "fp16");
	/* "AttentionBackend.FLASH_ATTENTION" -> "vidur:flash_attention" */
	backend = s->backend >= 0 ? r->f[s->backend] : "";
	if (strchr(backend, '.'))
		backend = strchr(backend, '.') + 1;
	snprintf(m.variant, sizeof(m.variant), "vidur%s%s", *backend ? ":" : "", backend);
	for (char *p = m.variant; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
	return imp_insert(f, &m, r->line, err);
}

const struct cal_importer cal_importer_vidur_attention = {
	.version = CAL_IMPORTER_VERSION,
	.name = "vidur-attention",
	.kind = CAL_IMPORT_VIDUR_ATTENTION,
	.priv_size = sizeof(struct vattn_state),
	.expect = "time_stats.attn_{prefill,decode}.{min,max,mean,median,std}, n_embd, n_q_head, n_kv_head, num_tensor_parallel_workers, batch_size, prefill_chunk_size, kv_cache_size, is_prefill",
	.match = vattn_match,
	.begin = vattn_begin,
	.row = vattn_row,
};

/* ---- legacy CPU overheads ----------------------------------------------- */

/* The parts of one vLLM/Sarathi iteration's CPU time, as Vidur names them.
 * "_launch" parts are included in the matching "_e2e" parts. */
static const char *const cpu_parts[] = {
	"schedule", "sampler_launch", "sampler_e2e", "prepare_inputs_launch",
	"prepare_inputs_e2e", "model_execution_launch", "model_execution_e2e",
	"process_model_outputs", "ray_comm_time",
};

#define N_CPU_PARTS (sizeof(cpu_parts) / sizeof(cpu_parts[0]))

struct cpu_state {
	int mean[N_CPU_PARTS], median[N_CPU_PARTS];
	int model, batch, tp;
	char raw[96];
	char dev[64];
};

static bool cpu_match(const char *const *cols, size_t n)
{
	return imp_has_col(cols, n, "schedule_mean") && imp_has_col(cols, n, "batch_size") &&
	       imp_has_col(cols, n, "tensor_parallel_degree");
}

static int cpu_begin(struct imp_file *f, struct ss_error *err)
{
	const struct cal_importer *imp = &cal_importer_vidur_cpu;
	struct cpu_state *s = f->priv;
	char buf[64];
	int rc;

	rc = imp_col_req(f, imp, "model_name", &s->model, err);
	if (!rc)
		rc = imp_col_req(f, imp, "batch_size", &s->batch, err);
	if (!rc)
		rc = imp_col_req(f, imp, "tensor_parallel_degree", &s->tp, err);
	for (size_t i = 0; i < N_CPU_PARTS; i++) {
		snprintf(buf, sizeof(buf), "%s_mean", cpu_parts[i]);
		s->mean[i] = imp_col(f, buf);
		snprintf(buf, sizeof(buf), "%s_median", cpu_parts[i]);
		s->median[i] = imp_col(f, buf);
	}
	if (!rc)
		rc = vidur_device(f, NULL, s->raw, sizeof(s->raw), s->dev, sizeof(s->dev), err);
	return rc;
}

static int cpu_row(struct imp_file *f, const struct imp_row *r, struct ss_error *err)
{
	struct cpu_state *s = f->priv;
	const char *model = r->f[s->model];
	struct cal_meas m[N_CPU_PARTS];
	int64_t batch, tp;
	size_t n = 0;
	int rc;

	if (!*model)
		return imp_field_error(err, f, r, s->model, "empty (expected the model name)");
	rc = imp_int(f, r, s->batch, 1, &batch, err);
	if (!rc)
		rc = imp_int(f, r, s->tp, 1, &tp, err);
	for (size_t i = 0; i < N_CPU_PARTS && !rc; i++) {
		struct cal_meas *p = &m[n];

		if (s->mean[i] < 0)
			continue;
		cal_meas_init(p, CAL_HOST_OVERHEAD);
		rc = imp_ms(f, r, s->mean[i], false, &p->mean_ms, err);
		if (!rc && s->median[i] >= 0)
			rc = imp_ms(f, r, s->median[i], false, &p->median_ms, err);
		if (!rc && strlen(cpu_parts[i]) + 1 + strlen(model) >= sizeof(p->variant))
			rc = imp_field_error(err, f, r, s->model,
					     "'%s' too long (at most %zu characters)", model,
					     sizeof(p->variant) - 2 - strlen(cpu_parts[i]));
		if (rc)
			break;
		snprintf(p->variant, sizeof(p->variant), "%s:%s", cpu_parts[i], model);
		p->batch = batch;
		p->tp = tp;
		snprintf(p->device, sizeof(p->device), "%s", s->dev);
		snprintf(p->device_raw, sizeof(p->device_raw), "%s", s->raw);
		n++;
	}
	for (size_t i = 0; i < n && !rc; i++)
		rc = imp_insert(f, &m[i], r->line, err);
	return rc;
}

const struct cal_importer cal_importer_vidur_cpu = {
	.version = CAL_IMPORTER_VERSION,
	.name = "vidur-cpu",
	.kind = CAL_IMPORT_VIDUR_CPU,
	.priv_size = sizeof(struct cpu_state),
	.expect = "<part>_mean, <part>_median, model_name, batch_size, tensor_parallel_degree",
	.match = cpu_match,
	.begin = cpu_begin,
	.row = cpu_row,
};
