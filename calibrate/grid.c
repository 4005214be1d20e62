/* servesim — interpolation over measured operator grids (grid.h). */
#include "grid.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"        /* cal_dtype_bytes */
#include "lora-kernel.h"

/* ---- 1. grids ---------------------------------------------------------- */

#define NODE_EPS 1e-9                  /* coordinates closer than this are one node */
#define MAX_CELLS ((size_t)1 << 26)    /* refuse absurd grids (64 Mi cells) */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Index of the largest node <= t + eps, or -1. */
static int floor_node(const double *ax, int n, double t)
{
	int lo = 0, hi = n - 1, r = -1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;

		if (ax[mid] <= t + NODE_EPS) {
			r = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return r;
}

int cal_grid_build(struct cal_grid *g, int ndim, const double *t, const double *v, size_t n,
		   struct ss_error *err)
{
	double *tmp = NULL, *sum = NULL;
	unsigned *cnt = NULL;
	int rc = 0;

	memset(g, 0, sizeof(*g));
	if (ndim < 1 || ndim > CAL_GRID_MAX_DIM)
		return ss_error_set(err, -EINVAL, NULL, 0, "grid: %d dimensions, expected 1..%d",
				    ndim, CAL_GRID_MAX_DIM);
	if (n == 0)
		return ss_error_set(err, -EINVAL, NULL, 0, "grid: no points");
	g->ndim = ndim;
	tmp = malloc(n * sizeof(*tmp));
	if (!tmp)
		goto nomem;
	g->cells = 1;
	for (int d = 0; d < ndim; d++) {
		int k = 0;

		for (size_t i = 0; i < n; i++)
			tmp[i] = t[i * ndim + d];
		qsort(tmp, n, sizeof(*tmp), cmp_double);
		for (size_t i = 0; i < n; i++)
			if (k == 0 || tmp[i] > tmp[k - 1] + NODE_EPS)
				tmp[k++] = tmp[i];
		g->axis[d] = malloc(k * sizeof(double));
		if (!g->axis[d])
			goto nomem;
		memcpy(g->axis[d], tmp, k * sizeof(double));
		g->n[d] = k;
		if (g->cells > MAX_CELLS / (size_t)k) {
			rc = ss_error_set(err, -E2BIG, NULL, 0,
					  "grid: more than %zu cells", MAX_CELLS);
			goto fail;
		}
		g->cells *= (size_t)k;
	}
	g->v = malloc(g->cells * sizeof(double));
	sum = calloc(g->cells, sizeof(double));
	cnt = calloc(g->cells, sizeof(unsigned));
	if (!g->v || !sum || !cnt)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		size_t off = 0;

		for (int d = 0; d < ndim; d++)
			off = off * g->n[d] + (size_t)floor_node(g->axis[d], g->n[d], t[i * ndim + d]);
		sum[off] += v[i];
		cnt[off]++;
	}
	for (size_t c = 0; c < g->cells; c++)
		g->v[c] = cnt[c] ? sum[c] / cnt[c] : NAN;
	free(tmp);
	free(sum);
	free(cnt);
	return 0;
nomem:
	rc = ss_error_set(err, -ENOMEM, NULL, 0, "grid: out of memory");
fail:
	free(tmp);
	free(sum);
	free(cnt);
	cal_grid_release(g);
	return rc;
}

void cal_grid_release(struct cal_grid *g)
{
	if (!g)
		return;
	for (int d = 0; d < CAL_GRID_MAX_DIM; d++)
		free(g->axis[d]);
	free(g->v);
	memset(g, 0, sizeof(*g));
}

static bool eval_axis(const struct cal_grid *g, int d, size_t off, const double *t, double *v)
{
	const double *ax;
	double vlo = 0.0, vhi = 0.0, w;
	int n, i, lo, hi;

	if (d == g->ndim) {
		if (isnan(g->v[off]))
			return false;
		*v = g->v[off];
		return true;
	}
	ax = g->axis[d];
	n = g->n[d];
	if (t[d] < ax[0] - NODE_EPS || t[d] > ax[n - 1] + NODE_EPS)
		return false;
	i = floor_node(ax, n, t[d]);
	if (fabs(t[d] - ax[i]) <= NODE_EPS) {
		if (eval_axis(g, d + 1, off * n + i, t, v))
			return true;
		lo = i - 1;     /* a hole at the node: bridge it */
		hi = i + 1;
	} else {
		lo = i;
		hi = i + 1;
	}
	for (; lo >= 0; lo--)
		if (eval_axis(g, d + 1, off * n + lo, t, &vlo))
			break;
	if (lo < 0)
		return false;
	for (; hi < n; hi++)
		if (eval_axis(g, d + 1, off * n + hi, t, &vhi))
			break;
	if (hi >= n)
		return false;
	w = (t[d] - ax[lo]) / (ax[hi] - ax[lo]);
	*v = (1.0 - w) * vlo + w * vhi;
	return true;
}

bool cal_grid_eval(const struct cal_grid *g, const double *t, double *v)
{
	if (!g->v)
		return false;
	return eval_axis(g, 0, 0, t, v);
}

/* ---- 2. series ----------------------------------------------------------- */

void cal_data_init(struct cal_data *d)
{
	memset(d, 0, sizeof(*d));
}

void cal_data_release(struct cal_data *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++) {
		free(d->s[i].x);
		free(d->s[i].y);
	}
	free(d->s);
	memset(d, 0, sizeof(*d));
}

static bool is_elementwise(enum cal_op op)
{
	return op == CAL_RMSNORM || op == CAL_LAYERNORM || op == CAL_ROPE ||
	       op == CAL_ACTIVATION || op == CAL_RESIDUAL_ADD || op == CAL_EMBEDDING;
}

/* GEMMs measured at one model's shapes (Vidur's tables, servesim's own
 * sweeps) are lines over m at fixed (n, k), not a grid over all three. */
static bool is_vidur_line(const struct cal_meas *m)
{
	return !strncmp(m->variant, "vidur", 5) || !strncmp(m->variant, "servesim-", 9);
}

static void family_of(const struct cal_meas *m, char *out, size_t len)
{
	const char *colon = strchr(m->variant, ':');
	const char *slash;

	if (strstr(m->source, "vidur") || !strncmp(m->variant, "vidur", 5)) {
		snprintf(out, len, "vidur");
	} else if (strstr(m->source, "aiconfigurator")) {
		snprintf(out, len, "aiconfigurator");
	} else if (colon) {
		snprintf(out, len, "%.*s", (int)(colon - m->variant), m->variant);
	} else if ((slash = strchr(m->source, '/')) != NULL) {
		snprintf(out, len, "%.*s", (int)(slash - m->source), m->source);
	} else {
		out[0] = '\0';
	}
}

const char *cal_variant_part(const char *variant)
{
	const char *c = strrchr(variant, ':');

	return c ? c + 1 : variant;
}

/* The series key and coordinates of a row; false if it cannot be placed. */
static bool classify(const struct cal_meas *m, int64_t key[3], double *x, int *ndim)
{
	key[0] = key[1] = key[2] = CAL_NA;
	switch (m->op) {
	case CAL_GEMM:
		if (m->m < 1 || m->n < 1 || m->k < 1)
			return false;
		if (is_vidur_line(m)) {
			key[0] = m->n;
			key[1] = m->k;
			x[0] = (double)m->m;
			*ndim = 1;
		} else {
			x[0] = (double)m->m;
			x[1] = (double)m->n;
			x[2] = (double)m->k;
			*ndim = 3;
		}
		return true;
	case CAL_ATTN_PREFILL:
		if (m->q_len < 1 || m->heads < 1 || m->head_dim < 1)
			return false;
		key[0] = m->heads;
		key[1] = m->kv_heads >= 1 ? m->kv_heads : m->heads;
		key[2] = m->head_dim;
		x[0] = m->kv_len >= 0 ? (double)m->kv_len : 0.0;
		x[1] = (double)m->q_len;
		x[2] = m->batch >= 1 ? (double)m->batch : 1.0;
		*ndim = 3;
		return true;
	case CAL_ATTN_DECODE:
		if (m->kv_len < 1 || m->heads < 1 || m->head_dim < 1)
			return false;
		key[0] = m->heads;
		key[1] = m->kv_heads >= 1 ? m->kv_heads : m->heads;
		key[2] = m->head_dim;
		x[0] = m->batch >= 1 ? (double)m->batch : 1.0;
		x[1] = (double)m->kv_len;
		*ndim = 2;
		return true;
	case CAL_ALL_REDUCE:
	case CAL_ALL_GATHER:
	case CAL_SEND_RECV:
	case CAL_KV_COPY:
		if (m->bytes < 1)
			return false;
		key[0] = m->num_gpus;
		x[0] = (double)m->bytes;
		*ndim = 1;
		return true;
	case CAL_LORA:
		/* one series per module shape and rank; tokens and adapters vary */
		if (m->m < 1 || m->n < 1 || m->k < 1 || m->batch < 1 || m->width < 1 ||
		    m->batch > m->m)
			return false;
		key[0] = m->n;
		key[1] = m->k;
		key[2] = m->width;
		x[0] = (double)m->m;
		x[1] = (double)m->batch;
		*ndim = 2;
		return true;
	case CAL_HOST_OVERHEAD:
		if (m->batch < 1)
			return false;
		key[0] = m->tp;
		x[0] = (double)m->batch;
		*ndim = 1;
		return true;
	default:
		if (!is_elementwise(m->op) || m->tokens < 1 || m->width < 1)
			return false;
		key[0] = m->width;
		x[0] = (double)m->tokens;
		*ndim = 1;
		return true;
	}
}

static bool same_series(const struct cal_series *s, int store, const struct cal_meas *m,
			const char *family, const int64_t key[3], int ndim)
{
	return s->op == m->op && s->store == store && s->ndim == ndim && s->key[0] == key[0] &&
	       s->key[1] == key[1] && s->key[2] == key[2] && !strcmp(s->device, m->device) &&
	       !strcmp(s->variant, m->variant) && !strcmp(s->dtype, m->dtype) &&
	       !strcmp(s->family, family);
}

int cal_data_add(struct cal_data *d, int store_idx, const struct cal_meas *m,
		 struct ss_error *err)
{
	double x[CAL_SERIES_MAX_DIM], y;
	char family[32];
	int64_t key[3];
	struct cal_series *s = NULL;
	int ndim;

	y = isfinite(m->mean_ms) ? m->mean_ms : m->median_ms;
	if (!(y > 0.0) || !isfinite(y))
		return 0;
	if ((unsigned)m->op < CAL_OP_COUNT) {
		double e = isfinite(m->energy_j) && m->energy_j > 0.0 ? m->energy_j :
			   isfinite(m->power_w) && m->power_w > 0.0 ? m->power_w * y * 1e-3 : 0.0;

		if (e > 0.0) {
			d->energy_j[m->op] += e;
			d->energy_ms[m->op] += y;
		}
	}
	if (!classify(m, key, x, &ndim))
		return 0;
	if (strcmp(d->last_source, m->source) || strcmp(d->last_variant, m->variant)) {
		family_of(m, d->last_family, sizeof(d->last_family));
		snprintf(d->last_source, sizeof(d->last_source), "%s", m->source);
		snprintf(d->last_variant, sizeof(d->last_variant), "%s", m->variant);
	}
	memcpy(family, d->last_family, sizeof(family));
	if ((unsigned)m->op >= CAL_OP_COUNT)
		return 0;
	if (d->last[m->op] < d->n &&
	    same_series(&d->s[d->last[m->op]], store_idx, m, family, key, ndim)) {
		s = &d->s[d->last[m->op]];
	} else {
		for (size_t i = d->n; i-- > 0;)
			if (same_series(&d->s[i], store_idx, m, family, key, ndim)) {
				s = &d->s[i];
				d->last[m->op] = i;
				break;
			}
	}
	if (!s) {
		if (d->n == d->cap) {
			size_t cap = d->cap ? 2 * d->cap : 16;
			struct cal_series *ns = realloc(d->s, cap * sizeof(*ns));

			if (!ns)
				return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			d->s = ns;
			d->cap = cap;
		}
		s = &d->s[d->n];
		memset(s, 0, sizeof(*s));
		s->op = m->op;
		s->store = store_idx;
		snprintf(s->device, sizeof(s->device), "%s", m->device);
		snprintf(s->family, sizeof(s->family), "%s", family);
		snprintf(s->variant, sizeof(s->variant), "%s", m->variant);
		snprintf(s->dtype, sizeof(s->dtype), "%s", m->dtype);
		memcpy(s->key, key, sizeof(s->key));
		s->ndim = ndim;
		d->last[m->op] = d->n++;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		double *nx = realloc(s->x, cap * s->ndim * sizeof(double));
		double *ny;

		if (!nx)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		s->x = nx;
		ny = realloc(s->y, cap * sizeof(double));
		if (!ny)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		s->y = ny;
		s->cap = cap;
	}
	memcpy(s->x + s->n * s->ndim, x, s->ndim * sizeof(double));
	s->y[s->n++] = y;
	return 0;
}

struct load_ctx {
	struct cal_data *d;
	int store_idx;
	unsigned op_mask;
	cal_row_filter filt;
	void *ctx;
	struct ss_error *err;
};

static int load_row(void *ctx, const struct cal_meas *m)
{
	struct load_ctx *c = ctx;

	if ((unsigned)m->op >= 32 || !(c->op_mask & (1u << m->op)))
		return 0;
	if (c->filt && !c->filt(c->ctx, m))
		return 0;
	return cal_data_add(c->d, c->store_idx, m, c->err);
}

int cal_data_load_store(struct cal_data *d, struct cal_store *st, int store_idx,
			const char *device, unsigned op_mask, cal_row_filter filt, void *ctx,
			struct ss_error *err)
{
	struct load_ctx c = { d, store_idx, op_mask, filt, ctx, err };
	int rc = 0;

	/* One query per operator: through the store's series index each reads
	 * only its own rows, and only that operator's shape columns. */
	for (int op = 0; op < CAL_OP_COUNT && !rc; op++)
		if (op_mask & (1u << op))
			rc = cal_store_query_lean(st, device, op, d->head_dim_only, load_row, &c, err);
	return rc;
}

int cal_data_load(struct cal_data *d, const char *const *stores, int n_stores,
		  const char *device, unsigned op_mask, cal_row_filter filt, void *ctx,
		  struct ss_error *err)
{
	for (int i = 0; i < n_stores; i++) {
		struct cal_store *st = NULL;
		int rc;

		if (!stores[i])
			continue;
		rc = cal_store_open(&st, stores[i], CAL_OPEN_READONLY, err);
		if (rc)
			return rc;
		rc = cal_data_load_store(d, st, i, device, op_mask, filt, ctx, err);
		cal_store_close(st);
		if (rc)
			return rc;
	}
	return 0;
}

void cal_series_range(const struct cal_series *s, int d, double *lo, double *hi)
{
	*lo = INFINITY;
	*hi = -INFINITY;
	for (size_t i = 0; i < s->n; i++) {
		double v = s->x[i * s->ndim + d];

		if (v < *lo)
			*lo = v;
		if (v > *hi)
			*hi = v;
	}
}

size_t cal_series_nodes(const struct cal_series *s, int d, double *out, size_t max)
{
	double *tmp = malloc(s->n * sizeof(double));
	size_t k = 0;

	if (!tmp)
		return 0;
	for (size_t i = 0; i < s->n; i++)
		tmp[i] = s->x[i * s->ndim + d];
	qsort(tmp, s->n, sizeof(double), cmp_double);
	for (size_t i = 0; i < s->n; i++)
		if (k == 0 || tmp[i] != tmp[k - 1])
			tmp[k++] = tmp[i];
	for (size_t i = 0; i < k && i < max; i++)
		out[i] = tmp[i];
	free(tmp);
	return k;
}

double cal_series_tx(const struct cal_series *s, int d, double x)
{
	if (s->op == CAL_ATTN_PREFILL && d == 0)
		return log1p(x);
	return log(x);
}

int cal_series_features(const struct cal_series *s, const double *x, double *f)
{
	f[0] = 1.0;
	switch (s->op) {
	case CAL_GEMM: {
		double m = x[0];
		double n = s->ndim == 1 ? (double)s->key[0] : x[1];
		double k = s->ndim == 1 ? (double)s->key[1] : x[2];

		f[1] = 2.0 * m * n * k * 1e-9;                 /* GFLOP */
		f[2] = 2.0 * (n * k + m * k + m * n) * 1e-6;   /* MB at 2 bytes per element */
		return 3;
	}
	case CAL_ATTN_PREFILL: {
		double p = x[0], c = x[1], b = x[2];

		f[1] = b * c * 1e-3;                            /* k query tokens */
		f[2] = b * (c * p + 0.5 * c * (c + 1.0)) * 1e-6; /* M causal positions */
		return 3;
	}
	case CAL_ATTN_DECODE:
		f[1] = x[0];                                    /* requests */
		f[2] = x[0] * x[1] * 1e-3;                      /* k KV tokens read */
		return 3;
	case CAL_HOST_OVERHEAD:
		f[1] = x[0];                                    /* requests */
		return 2;
	case CAL_LORA: {
		double fl, wa, wx;

		cal_lora_work((double)cal_dtype_bytes(s->dtype), (double)s->key[1],
			      (double)s->key[0], x[0], x[0] * (double)s->key[2],
			      x[1] * (double)s->key[2], &fl, &wa, &wx);
		f[CAL_LORA_SEG] = x[1];                         /* segments (adapters) */
		f[CAL_LORA_ADAPTER_MB] = wa * 1e-6;             /* MB of adapter matrices */
		f[CAL_LORA_ACT_MB] = wx * 1e-6;                 /* MB of activations */
		f[CAL_LORA_GFLOP] = fl * 1e-9;
		return CAL_LORA_TERMS;
	}
	case CAL_ALL_REDUCE:
	case CAL_ALL_GATHER:
	case CAL_SEND_RECV:
	case CAL_KV_COPY:
		f[1] = x[0] * 1e-6;                             /* MB */
		return 2;
	default:
		f[1] = x[0] * (double)s->key[0] * 1e-6;         /* M elements */
		return 2;
	}
}

bool cal_series_is_16bit(const struct cal_series *s)
{
	/* fp32: servesim's own CPU sweeps, which time an fp32 model; a device
	 * is measured in one dtype in practice. */
	static const char *const ok[] = { "bf16", "fp16", "bfloat16", "float16", "half", "fp32", "" };

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(s->dtype, ok[i]))
			return true;
	return false;
}

/* ---- interpolators ---------------------------------------------------- */

int cal_interp_build(struct cal_interp *ip, const struct cal_series *s,
		     const unsigned char *skip, struct ss_error *err)
{
	double *X = NULL, *y = NULL, *t = NULL, *v = NULL;
	double f[CAL_FIT_MAX_P];
	size_t n = 0;
	int p = 0, rc = 0;

	memset(ip, 0, sizeof(*ip));
	ip->s = s;
	X = malloc(s->n * CAL_FIT_MAX_P * sizeof(double));
	y = malloc(s->n * sizeof(double));
	t = malloc(s->n * s->ndim * sizeof(double));
	v = malloc(s->n * sizeof(double));
	if (!X || !y || !t || !v) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < s->n; i++) {
		if (skip && skip[i])
			continue;
		p = cal_series_features(s, s->x + i * s->ndim, X + n * p);
		/* p is the same for every point of a series */
		y[n++] = s->y[i];
	}
	if (n == 0) {
		rc = ss_error_set(err, -EINVAL, NULL, 0, "interpolator: no points");
		goto out;
	}
	/* The fit is the prior and the out-of-grid model; a series too small
	 * to fit (or degenerate) interpolates raw latency instead. */
	if (n > (size_t)p + 1) {
		struct ss_error ferr = { 0 };

		if (cal_fit_wls(&ip->fit, X, y, n, p, &ferr))
			memset(&ip->fit, 0, sizeof(ip->fit));
	}
	ip->prior = ip->fit.p > 0;
	n = 0;
	for (size_t i = 0; i < s->n; i++) {
		const double *xi = s->x + i * s->ndim;
		double prior = 1.0;

		if (skip && skip[i])
			continue;
		if (ip->fit.p > 0) {
			cal_series_features(s, xi, f);
			prior = cal_fit_eval(&ip->fit, f);
			if (!(prior > 0.0))
				ip->prior = false;
		}
		for (int d = 0; d < s->ndim; d++)
			t[n * s->ndim + d] = cal_series_tx(s, d, xi[d]);
		v[n] = prior;   /* filled below once we know whether the prior holds */
		n++;
	}
	n = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (skip && skip[i])
			continue;
		v[n] = ip->prior ? log(s->y[i] / v[n]) : log(s->y[i]);
		n++;
	}
	rc = cal_grid_build(&ip->grid, s->ndim, t, v, n, err);
	for (int d = 0; d < s->ndim && !rc; d++) {
		ip->nat[d] = malloc(ip->grid.n[d] * sizeof(double));
		if (!ip->nat[d])
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		else
			cal_interp_nodes(ip, d, ip->nat[d], (size_t)ip->grid.n[d]);
	}
out:
	free(X);
	free(y);
	free(t);
	free(v);
	if (rc)
		cal_interp_release(ip);
	return rc;
}

void cal_interp_release(struct cal_interp *ip)
{
	if (!ip)
		return;
	cal_grid_release(&ip->grid);
	for (int d = 0; d < CAL_GRID_MAX_DIM; d++)
		free(ip->nat[d]);
	memset(ip, 0, sizeof(*ip));
}

double cal_interp_fit(const struct cal_interp *ip, const double *x)
{
	double f[CAL_FIT_MAX_P];

	if (ip->fit.p == 0)
		return NAN;
	cal_series_features(ip->s, x, f);
	return cal_fit_eval(&ip->fit, f);
}

size_t cal_interp_nodes(const struct cal_interp *ip, int d, double *out, size_t max)
{
	const struct cal_grid *g = &ip->grid;

	for (int i = 0; i < g->n[d] && (size_t)i < max; i++) {
		double v = ip->s->op == CAL_ATTN_PREFILL && d == 0 ? expm1(g->axis[d][i])
								   : exp(g->axis[d][i]);
		double r = nearbyint(v);

		/* store coordinates are integers: undo the log's rounding */
		out[i] = fabs(v - r) <= 1e-9 * fmax(1.0, v) ? r : v;
	}
	return (size_t)g->n[d];
}

/* Latency at xs (natural units; xs[0..d-1] are node values chosen by the
 * levels above, xs[d..] the query's).  Like the grid's evaluation, axis by
 * axis with holes bridged, but each step along an axis interpolates
 * log(y / prior) and then clamps y between the two neighbours' values:
 * between two nodes the result never leaves their range, so a table whose
 * measurements rise (or fall) along an axis is monotone there too. */
static bool ip_axis(const struct cal_interp *ip, int d, size_t off, const double *t,
		    double *xs, const double *xq, double *y)
{
	const struct cal_grid *g = &ip->grid;
	const double *ax;
	double ylo = 0.0, yhi = 0.0, w, v, lo_v, hi_v;
	int n, i, lo, hi;

	if (d == g->ndim) {
		v = g->v[off];
		if (isnan(v))
			return false;
		if (ip->prior) {
			double p = cal_interp_fit(ip, xs);

			if (!(p > 0.0))
				return false;
			*y = exp(v) * p;
		} else {
			*y = exp(v);
		}
		return true;
	}
	ax = g->axis[d];
	n = g->n[d];
	if (t[d] < ax[0] - NODE_EPS || t[d] > ax[n - 1] + NODE_EPS)
		return false;
	i = floor_node(ax, n, t[d]);
	if (fabs(t[d] - ax[i]) <= NODE_EPS) {
		xs[d] = ip->nat[d][i];
		if (ip_axis(ip, d + 1, off * n + i, t, xs, xq, y)) {
			xs[d] = xq[d];
			return true;
		}
		lo = i - 1;
		hi = i + 1;
	} else {
		lo = i;
		hi = i + 1;
	}
	for (; lo >= 0; lo--) {
		xs[d] = ip->nat[d][lo];
		if (ip_axis(ip, d + 1, off * n + lo, t, xs, xq, &ylo))
			break;
	}
	for (; lo >= 0 && hi < n; hi++) {
		xs[d] = ip->nat[d][hi];
		if (ip_axis(ip, d + 1, off * n + hi, t, xs, xq, &yhi))
			break;
	}
	if (lo < 0 || hi >= n) {
		xs[d] = xq[d];
		return false;
	}
	w = (t[d] - ax[lo]) / (ax[hi] - ax[lo]);
	if (ip->prior) {
		double plo, phi, pq;

		xs[d] = ip->nat[d][lo];
		plo = cal_interp_fit(ip, xs);
		xs[d] = ip->nat[d][hi];
		phi = cal_interp_fit(ip, xs);
		xs[d] = xq[d];
		pq = cal_interp_fit(ip, xs);
		if (!(plo > 0.0 && phi > 0.0 && pq > 0.0))
			return false;
		v = (1.0 - w) * log(ylo / plo) + w * log(yhi / phi);
		*y = pq * exp(v);
	} else {
		xs[d] = xq[d];
		*y = exp((1.0 - w) * log(ylo) + w * log(yhi));
	}
	lo_v = ylo < yhi ? ylo : yhi;
	hi_v = ylo < yhi ? yhi : ylo;
	if (*y < lo_v)
		*y = lo_v;
	if (*y > hi_v)
		*y = hi_v;
	return true;
}

bool cal_interp_eval(const struct cal_interp *ip, const double *x, double *y)
{
	double t[CAL_SERIES_MAX_DIM], xs[CAL_SERIES_MAX_DIM];
	const struct cal_series *s = ip->s;

	if (!ip->grid.v)
		return false;
	for (int d = 0; d < s->ndim; d++) {
		if (!(x[d] >= 0.0))
			return false;
		t[d] = cal_series_tx(s, d, x[d]);
		xs[d] = x[d];
	}
	return ip_axis(ip, 0, 0, t, xs, x, y);
}

/* ---- selection ---------------------------------------------------------- */

static bool dev_ok(const struct cal_series *s, const char *device)
{
	return !device || !strcmp(s->device, device);
}

/* Variants never used for a 16-bit dense model's table. */
static bool variant_excluded(const struct cal_series *s)
{
	static const char *const bad[] = { "fp8", "int8", "window", "swa", "sliding", "eager" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (strstr(s->variant, bad[i]) || strstr(s->dtype, bad[i]))
			return true;
	return false;
}

/* Product of the log spans of the axes that have more than one node. */
static double log_volume(const struct cal_series *s)
{
	double vol = 1.0;

	for (int d = 0; d < s->ndim; d++) {
		double lo, hi, span;

		cal_series_range(s, d, &lo, &hi);
		span = cal_series_tx(s, d, hi) - cal_series_tx(s, d, lo);
		if (span > 0.0)
			vol *= span;
	}
	return vol;
}

/* Is a better than b?  Earlier store first, then the larger score. */
static bool better(const struct cal_series *a, double sa, const struct cal_series *b, double sb)
{
	if (!b)
		return true;
	if (a->store != b->store)
		return a->store < b->store;
	return sa > sb;
}

const struct cal_series *cal_data_gemm_grid(const struct cal_data *d, const char *device)
{
	const struct cal_series *best = NULL;

	for (size_t i = 0; i < d->n; i++) {
		const struct cal_series *s = &d->s[i];

		if (s->op != CAL_GEMM || s->ndim != 3 || !dev_ok(s, device) ||
		    !cal_series_is_16bit(s) || variant_excluded(s))
			continue;
		if (better(s, (double)s->n, best, best ? (double)best->n : 0.0))
			best = s;
	}
	return best;
}

const struct cal_series *cal_data_gemm_grid_dtype(const struct cal_data *d, const char *device,
						  const char *dtype)
{
	const struct cal_series *best = NULL;

	for (size_t i = 0; i < d->n; i++) {
		const struct cal_series *s = &d->s[i];

		if (s->op != CAL_GEMM || s->ndim != 3 || !dev_ok(s, device) ||
		    strcmp(s->dtype, dtype))
			continue;
		if (better(s, (double)s->n, best, best ? (double)best->n : 0.0))
			best = s;
	}
	return best;
}

const struct cal_series *cal_data_gemm_line(const struct cal_data *d, const char *device,
					    int64_t n, int64_t k)
{
	const struct cal_series *best = NULL;

	for (size_t i = 0; i < d->n; i++) {
		const struct cal_series *s = &d->s[i];

		if (s->op != CAL_GEMM || s->ndim != 1 || !dev_ok(s, device) ||
		    !cal_series_is_16bit(s) || s->key[0] != n || s->key[1] != k)
			continue;
		if (better(s, (double)s->n, best, best ? (double)best->n : 0.0))
			best = s;
	}
	return best;
}

const struct cal_series *cal_data_gemm_line_near(const struct cal_data *d, const char *device,
						 int64_t n, int64_t k, double max_ratio)
{
	const struct cal_series *best = NULL;
	double best_d = INFINITY;

	for (size_t i = 0; i < d->n; i++) {
		const struct cal_series *s = &d->s[i];
		double dist;

		if (s->op != CAL_GEMM || s->ndim != 1 || !dev_ok(s, device) ||
		    !cal_series_is_16bit(s) || s->key[1] != k || s->key[0] < 1)
			continue;
		dist = fabs(log((double)s->key[0] / (double)n));
		if (dist > log(max_ratio) + 1e-12)
			continue;
		/* the nearer N; at a tie the earlier store, then the more rows */
		if (!best || dist < best_d - 1e-12 ||
		    (dist <= best_d + 1e-12 && better(s, (double)s->n, best, (double)best->n))) {
			best = s;
			best_d = dist;
		}
	}
	return best;
}

/* Candidate order for attention: earlier store, exact head counts, more KV
 * heads (the smallest batch factor), wider measured domain. */
static bool attn_better(const struct cal_series *a, bool ea, double sa,
			const struct cal_series *b, bool eb, double sb)
{
	if (!b)
		return true;
	if (a->store != b->store)
		return a->store < b->store;
	if (ea != eb)
		return ea;
	if (a->key[1] != b->key[1])
		return a->key[1] > b->key[1];
	return sa > sb;
}

const struct cal_series *cal_data_attn(const struct cal_data *d, const char *device,
				       enum cal_op op, int hq, int hkv, int hd, double *factor)
{
	const struct cal_series *best = NULL;
	double best_score = 0.0;
	bool best_exact = false;

	for (size_t i = 0; i < d->n; i++) {
		const struct cal_series *s = &d->s[i];
		bool exact;
		double score;

		if (s->op != op || !dev_ok(s, device) || !cal_series_is_16bit(s) ||
		    variant_excluded(s) || s->key[2] != hd || s->key[1] < 1)
			continue;
		/* prefill series usable by the table need kv_len = 0 rows */
		if (op == CAL_ATTN_PREFILL) {
			double lo, hi;

			cal_series_range(s, 0, &lo, &hi);
			if (lo > 0.0)
				continue;
		}
		exact = s->key[0] == hq && s->key[1] == hkv;
		/* otherwise: the same GQA group size, KV heads dividing the model's */
		if (!exact && (hkv % s->key[1] || s->key[0] * hkv != (int64_t)hq * s->key[1]))
			continue;
		score = log_volume(s);
		if (!attn_better(s, exact, score, best, best_exact, best_score))
			continue;
		best = s;
		best_score = score;
		best_exact = exact;
	}
	if (factor)
		*factor = best ? (double)hkv / (double)best->key[1] : 1.0;
	return best;
}

const struct cal_series *cal_data_width(const struct cal_data *d, const char *device,
					enum cal_op op, int64_t width)
{
	const struct cal_series *best = NULL;
	double best_dist = 0.0;

	for (size_t i = 0; i < d->n; i++) {
		const struct cal_series *s = &d->s[i];
		double dist;

		if (s->op != op || !dev_ok(s, device) || !cal_series_is_16bit(s) || s->key[0] < 1)
			continue;
		dist = fabs(log((double)s->key[0] / (double)width));
		if (best) {
			if (s->store > best->store)
				continue;
			if (s->store == best->store &&
			    (dist > best_dist + 1e-12 ||
			     (fabs(dist - best_dist) <= 1e-12 && s->n <= best->n)))
				continue;
		}
		best = s;
		best_dist = dist;
	}
	return best;
}

enum cal_coll_kind cal_coll_kind_of(const struct cal_series *s)
{
	if (strstr(s->variant, "eager") || strstr(s->variant, "nodes="))
		return CAL_COLL_UNUSED;
	if (strstr(s->variant, "custom") || strstr(s->variant, "graph"))
		return CAL_COLL_CUSTOM;
	if (strstr(s->variant, "nccl") || strstr(s->variant, "NCCL"))
		return CAL_COLL_NCCL;
	return CAL_COLL_OTHER;
}

const struct cal_series *cal_data_collective(const struct cal_data *d, const char *device,
					     enum cal_op op, int64_t num_gpus,
					     enum cal_coll_kind kind)
{
	const struct cal_series *best = NULL;

	for (size_t i = 0; i < d->n; i++) {
		const struct cal_series *s = &d->s[i];

		if (s->op != op || !dev_ok(s, device) || s->key[0] != num_gpus ||
		    cal_coll_kind_of(s) != kind)
			continue;
		if (strstr(s->dtype, "int8") || strstr(s->dtype, "fp8"))
			continue;
		if (better(s, (double)s->n, best, best ? (double)best->n : 0.0))
			best = s;
	}
	return best;
}

/* ---- 3. piecewise-linear tables ---------------------------------------- */

static double bucket_lower(unsigned b)
{
	unsigned e, s;

	if (b < 32)
		return (double)b;
	e = 5 + (b - 32) / 16;
	s = (b - 32) % 16;
	return ldexp(16.0 + s, (int)e - 4);
}

void cal_ptab_release(struct cal_ptab *p)
{
	if (!p)
		return;
	free(p->x);
	free(p->yb);
	free(p->lo);
	free(p->hi);
	memset(p, 0, sizeof(*p));
}

int cal_ptab_build(struct cal_ptab *p, int nrows, double xlo, double xhi, const double *nodes,
		   size_t n_nodes, cal_ptab_fn fn, void *ctx, struct ss_error *err)
{
	size_t cap = CAL_PTAB_NBUCKET + n_nodes + 2, n = 0, k;
	double *y = NULL;
	bool *ok = NULL;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	if (!(xlo >= 1.0) || !(xhi >= xlo) || nrows < 1)
		return ss_error_set(err, -EINVAL, NULL, 0, "table: range [%g, %g], expected 1 <= lo <= hi",
				    xlo, xhi);
	p->nrows = nrows;
	p->x = malloc(cap * sizeof(double));
	if (!p->x)
		goto nomem;
	p->x[n++] = xlo;
	p->x[n++] = xhi;
	for (unsigned b = 1; b < CAL_PTAB_NBUCKET; b++) {
		double x = bucket_lower(b);

		if (x > xhi)
			break;
		if (x > xlo)
			p->x[n++] = x;
	}
	for (size_t i = 0; i < n_nodes; i++)
		if (nodes[i] > xlo && nodes[i] < xhi)
			p->x[n++] = nodes[i];
	qsort(p->x, n, sizeof(double), cmp_double);
	k = 0;
	for (size_t i = 0; i < n; i++)
		if (k == 0 || p->x[i] > p->x[k - 1])
			p->x[k++] = p->x[i];
	p->n = (uint32_t)k;
	p->yb = calloc((size_t)nrows * k * 2, sizeof(double));
	p->lo = malloc(nrows * sizeof(double));
	p->hi = malloc(nrows * sizeof(double));
	y = malloc(k * sizeof(double));
	ok = malloc(k * sizeof(bool));
	if (!p->yb || !p->lo || !p->hi || !y || !ok)
		goto nomem;
	for (int r = 0; r < nrows; r++) {
		size_t first = k, last = k;
		double *e = p->yb + 2 * (size_t)r * k;

		for (size_t i = 0; i < k; i++)
			ok[i] = fn(ctx, r, p->x[i], &y[i]) && isfinite(y[i]);
		for (size_t i = 0; i < k; i++)
			if (ok[i]) {
				first = i;
				break;
			}
		if (first < k) {
			last = first;
			while (last + 1 < k && ok[last + 1])
				last++;
			for (size_t i = first; i <= last; i++) {
				e[2 * i] = y[i];
				e[2 * i + 1] = i < last ? (y[i + 1] - y[i]) / (p->x[i + 1] - p->x[i]) : 0.0;
			}
			p->lo[r] = p->x[first];
			p->hi[r] = p->x[last];
		} else {
			p->lo[r] = INFINITY;
			p->hi[r] = -INFINITY;
		}
	}
	for (unsigned b = 0; b < CAL_PTAB_NBUCKET; b++) {
		double lb = bucket_lower(b);
		uint32_t i = b ? p->bucket[b - 1] : 0;

		while (i + 1 < p->n && p->x[i + 1] <= lb)
			i++;
		p->bucket[b] = i;
	}
	p->direct = true;
	for (uint32_t i = 0; i < p->n; i++)
		if (bucket_lower(cal_ptab_bucket(p->x[i])) != p->x[i])
			p->direct = false;
	free(y);
	free(ok);
	return 0;
nomem:
	rc = ss_error_set(err, -ENOMEM, NULL, 0, "table: out of memory");
	free(y);
	free(ok);
	cal_ptab_release(p);
	return rc;
}

/* ---- fits on subsets ---------------------------------------------------- */

int cal_series_fit(const struct cal_series *s, bool (*keep)(void *ctx, const double *x),
		   void *ctx, struct cal_fit *f, struct ss_error *err)
{
	double *X = malloc(s->n * CAL_FIT_MAX_P * sizeof(double));
	double *y = malloc(s->n * sizeof(double));
	size_t n = 0;
	int p = 0, rc;

	if (!X || !y) {
		free(X);
		free(y);
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	}
	for (size_t i = 0; i < s->n; i++) {
		const double *xi = s->x + i * s->ndim;

		if (keep && !keep(ctx, xi))
			continue;
		p = cal_series_features(s, xi, X + n * p);
		y[n++] = s->y[i];
	}
	if (n == 0) {
		memset(f, 0, sizeof(*f));
		rc = ss_error_set(err, -EDOM, NULL, 0, "fit: no points");
	} else {
		rc = cal_fit_wls(f, X, y, n, p, err);
	}
	free(X);
	free(y);
	return rc;
}
