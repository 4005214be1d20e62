/* servesim — interpolation over measured operator grids (grid.h). */
#define _GNU_SOURCE                    /* dl_iterate_phdr: the build-id of cache keys */
#include "grid.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif
#include <gsl/gsl_version.h>
#include <link.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- 4. plans ------------------------------------------------------------ */

/* Were device's GEMMs measured by servesim's own sweeps? */
static bool servesim_swept(const struct cal_data *d, const char *device)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->s[i].op == CAL_GEMM && !strcmp(d->s[i].device, device) &&
		    !strncmp(d->s[i].variant, "servesim-", 9))
			return true;
	return false;
}

const char *const cal_host_parts[CAL_HOST_PARTS] = {
	"schedule", "prepare_inputs_e2e", "sampler_e2e", "process_model_outputs",
};

static void why_add(struct cal_plan *p, const char *fmt, const char *what)
{
	size_t len = strlen(p->why);

	snprintf(p->why + len, sizeof(p->why) - len, "%s", len ? "; " : "");
	len = strlen(p->why);
	snprintf(p->why + len, sizeof(p->why) - len, fmt, what);
}

struct box {
	double n0, n1, k0, k1;     /* bracketing nodes of the block's n and k */
};

static bool in_box(void *ctx, const double *x)
{
	const struct box *b = ctx;

	return (fabs(x[1] - b->n0) <= 1e-9 * b->n0 || fabs(x[1] - b->n1) <= 1e-9 * b->n1) &&
	       (fabs(x[2] - b->k0) <= 1e-9 * b->k0 || fabs(x[2] - b->k1) <= 1e-9 * b->k1);
}

/* Nodes of a sorted list bracketing v (equal nodes when v is one). */
static void bracket(const double *nodes, size_t n, double v, double *lo, double *hi)
{
	*lo = nodes[0];
	*hi = nodes[n - 1];
	for (size_t i = 0; i < n; i++) {
		if (nodes[i] <= v)
			*lo = nodes[i];
		if (nodes[i] >= v) {
			*hi = nodes[i];
			break;
		}
	}
}

/* GEMM g of shape (n, k) from grid (interpolator gip), else, when lines
 * is set, from a 16-bit line measured at exactly (n, k). */
static int plan_gemm(struct cal_plan *p, const struct cal_data *d, const char *device,
		     const struct cal_series *grid, struct cal_interp *gip, bool lines, int g,
		     double n, double k, struct ss_error *err)
{
	struct cal_plan_gemm *pg = &p->gemm[g];
	const struct cal_series *line;
	int rc;

	pg->mult = 1.0;
	pg->n = n;
	pg->k = k;
	if (grid) {
		double nlo, nhi, klo, khi, mlo, mhi, y, x[3];
		double qn = 1.0, qk = 1.0;

		cal_series_range(grid, 1, &nlo, &nhi);
		cal_series_range(grid, 2, &klo, &khi);
		cal_series_range(grid, 0, &mlo, &mhi);
		if (n > nhi)
			qn = ceil(n / nhi);
		if (k > khi)
			qk = ceil(k / khi);
		x[0] = mlo;
		x[1] = n / qn;
		x[2] = k / qk;
		if (cal_interp_eval(gip, x, &y)) {
			double nodes[256];
			size_t nn;
			struct box b;
			struct ss_error ferr = { 0 };

			pg->s = grid;
			pg->ip = gip;
			pg->n = x[1];
			pg->k = x[2];
			pg->mult = qn * qk;
			nn = cal_interp_nodes(gip, 1, nodes, 256);
			bracket(nodes, nn < 256 ? nn : 256, pg->n, &b.n0, &b.n1);
			nn = cal_interp_nodes(gip, 2, nodes, 256);
			bracket(nodes, nn < 256 ? nn : 256, pg->k, &b.k0, &b.k1);
			/* The local fit prices m beyond the grid; fall back on the
			 * grid's global fit if the box cannot be fitted. */
			if (cal_series_fit(grid, in_box, &b, &pg->fit, &ferr))
				pg->fit = gip->fit;
			return 0;
		}
	}
	line = lines ? cal_data_gemm_line(d, device, llround(n), llround(k)) : NULL;
	if (line) {
		rc = cal_interp_build(&p->line_ip[g], line, NULL, err);
		if (rc)
			return rc;
		pg->s = line;
		pg->ip = &p->line_ip[g];
		pg->fit = p->line_ip[g].fit;
	}
	return 0;
}

static int plan_op(struct cal_plan_op *o, const struct cal_series *s, double mult, double f,
		   struct ss_error *err)
{
	o->mult = mult;
	o->f = f;
	if (!s)
		return 0;
	o->s = s;
	return cal_interp_build(&o->ip, s, NULL, err);
}

/* Host-overhead series for one part: the model's own rows first, then rows
 * measured at the model's tp, then at tp 1; the device's own rows before
 * other devices'; then the most points and the first model name. */
static const struct cal_series *host_series(const struct cal_data *h, const char *device,
					    const char *part, const char *model_id, int tp)
{
	const struct cal_series *best = NULL;
	size_t plen = strlen(part);
	int best_rank = 0;

	for (size_t i = 0; i < h->n; i++) {
		const struct cal_series *s = &h->s[i];
		const char *model = s->variant + plen;
		int rank;

		if (s->op != CAL_HOST_OVERHEAD || strncmp(s->variant, part, plen) ||
		    (*model && *model != ':'))
			continue;
		if (*model == ':')
			model++;
		rank = (model_id && *model && !strcmp(model, model_id) ? 8 : 0) +
		       (s->key[0] == tp ? 4 : s->key[0] == 1 ? 2 : 0) +
		       (strcmp(s->device, device) ? 0 : 1);
		if (best && (s->store > best->store ||
			     (s->store == best->store &&
			      (rank < best_rank ||
			       (rank == best_rank &&
				(s->n < best->n ||
				 (s->n == best->n && strcmp(s->variant, best->variant) >= 0)))))))
			continue;
		best = s;
		best_rank = rank;
	}
	return best;
}

int cal_plan_build(struct cal_plan *p, const struct cal_data *d, const struct cal_data *host,
		   const char *device, const struct cal_shape *sh, struct ss_error *err)
{
	const struct cal_series *grid, *qgrid, *s;
	double f, dm = sh->hidden, ff = sh->ff;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	p->shape = *sh;

	/* GEMMs */
	grid = cal_data_gemm_grid(d, device);
	if (grid) {
		rc = cal_interp_build(&p->grid_ip, grid, NULL, err);
		if (rc)
			goto fail;
	}
	qgrid = sh->gemm_dtype ? cal_data_gemm_grid_dtype(d, device, sh->gemm_dtype) : NULL;
	if (qgrid) {
		rc = cal_interp_build(&p->qgrid_ip, qgrid, NULL, err);
		if (rc)
			goto fail;
	}
	{
		const double shapes[CAL_G_COUNT][2] = {
			[CAL_G_QKV] = { (double)(sh->heads + 2 * sh->kv_heads) * sh->head_dim, dm },
			[CAL_G_O] = { dm, (double)sh->heads * sh->head_dim },
			[CAL_G_UP] = { sh->gated ? 2.0 * ff : ff, dm },
			[CAL_G_DOWN] = { dm, ff },
			[CAL_G_LM] = { ceil((double)sh->vocab / sh->tp), dm },
		};
		static const char *const names[CAL_G_COUNT] = { "QKV", "O", "up", "down", "LM head" };

		p->gemm_ok = true;
		for (int g = 0; g < CAL_G_COUNT; g++) {
			bool q = sh->gemm_dtype && g != CAL_G_LM;

			rc = plan_gemm(p, d, device, q ? qgrid : grid, q ? &p->qgrid_ip : &p->grid_ip,
				       !q, g, shapes[g][0], shapes[g][1], err);
			if (rc)
				goto fail;
			if (!p->gemm[g].s) {
				why_add(p, "no GEMM measurement covers the %s shape", names[g]);
				if (g != CAL_G_LM)
					p->gemm_ok = false;
			}
		}
	}

	/* attention */
	s = cal_data_attn(d, device, CAL_ATTN_PREFILL, sh->heads, sh->kv_heads, sh->head_dim, &f);
	rc = plan_op(&p->pf, s, sh->layers, f, err);
	if (rc)
		goto fail;
	p->pf_ok = s != NULL;
	if (!s)
		why_add(p, "%s", "no prefill attention measurements for these heads");
	s = cal_data_attn(d, device, CAL_ATTN_DECODE, sh->heads, sh->kv_heads, sh->head_dim, &f);
	rc = plan_op(&p->dec, s, sh->layers, f, err);
	if (rc)
		goto fail;
	p->dec_ok = s != NULL;
	if (!s)
		why_add(p, "%s", "no decode attention measurements for these heads");

	/* element-wise: width conventions of the store (docs/calibration.md) */
	{
		const struct { enum cal_op op; double width, mult; bool need; } kinds[CAL_EW_COUNT] = {
			[CAL_EW_NORM] = { sh->layernorm ? CAL_LAYERNORM : CAL_RMSNORM, dm,
					  2.0 * sh->layers, true },
			[CAL_EW_ROPE] = { CAL_ROPE, (double)(sh->heads + sh->kv_heads) * sh->head_dim,
					  sh->layers, sh->rope },
			[CAL_EW_ACT] = { CAL_ACTIVATION, ff, sh->layers, true },
			[CAL_EW_ADD] = { CAL_RESIDUAL_ADD, dm, 2.0 * sh->layers, true },
			[CAL_EW_EMBED] = { CAL_EMBEDDING, dm, 1.0, true },
		};

		p->ew_ok = true;
		for (int e = 0; e < CAL_EW_COUNT; e++) {
			if (!kinds[e].need)
				continue;
			/* servesim's synthetic step adds the residual in the GEMM
			 * epilogue (beta = 1): a device calibrated by servesim's
			 * own sweeps has no separate residual add to price */
			if (e == CAL_EW_ADD && servesim_swept(d, device))
				continue;
			s = cal_data_width(d, device, kinds[e].op, llround(kinds[e].width));
			rc = plan_op(&p->ew[e], s, kinds[e].mult,
				     s ? kinds[e].width / (double)s->key[0] : 1.0, err);
			if (rc)
				goto fail;
			if (!s) {
				p->ew_ok = false;
				why_add(p, "no %s measurements", cal_op_name(kinds[e].op));
			}
		}
		s = cal_data_width(d, device, kinds[CAL_EW_NORM].op, sh->hidden);
		rc = plan_op(&p->fnorm, s, 1.0, s ? dm / (double)s->key[0] : 1.0, err);
		if (rc)
			goto fail;
		p->lm_ok = p->gemm[CAL_G_LM].s && s;
	}

	/* collectives */
	if (sh->tp > 1) {
		for (int kind = 0; kind < 3; kind++) {
			s = cal_data_collective(d, device, CAL_ALL_REDUCE, sh->tp, kind);
			rc = plan_op(&p->ar[kind], s, 2.0 * sh->layers + 1.0, 1.0, err);
			if (rc)
				goto fail;
			p->ar_ok |= s != NULL;
		}
		s = cal_data_collective(d, device, CAL_ALL_GATHER, sh->tp, CAL_COLL_NCCL);
		if (!s)
			s = cal_data_collective(d, device, CAL_ALL_GATHER, sh->tp, CAL_COLL_OTHER);
		rc = plan_op(&p->ag, s, 1.0, 1.0, err);
		if (rc)
			goto fail;
		if (!p->ar_ok)
			why_add(p, "%s", "no all-reduce measurements for this GPU count");
	} else {
		p->ar_ok = true;
	}

	/* host overhead: the device's measured total (servesim's own sweeps
	 * measure it whole, variant "total:MODEL") or vLLM's parts */
	s = host ? host_series(host, device, "total", sh->model_id, sh->tp) : NULL;
	if (s && !strcmp(s->device, device)) {
		rc = plan_op(&p->host[0], s, 1.0, 1.0, err);
		if (rc)
			goto fail;
		p->host_ok = true;
		snprintf(p->host_device, sizeof(p->host_device), "%s", s->device);
		return 0;
	}
	p->host_ok = true;
	for (int i = 0; i < CAL_HOST_PARTS && host; i++) {
		s = host_series(host, device, cal_host_parts[i], sh->model_id, sh->tp);
		rc = plan_op(&p->host[i], s, 1.0, 1.0, err);
		if (rc)
			goto fail;
		if (!s)
			p->host_ok = false;
		else if (i == 0)
			snprintf(p->host_device, sizeof(p->host_device), "%s",
				 s->device[0] ? s->device : "(host)");
	}
	if (!host)
		p->host_ok = false;
	if (!p->host_ok)
		why_add(p, "%s", "no host overhead measurements");
	return 0;
fail:
	cal_plan_release(p);
	return rc;
}

void cal_plan_release(struct cal_plan *p)
{
	if (!p)
		return;
	cal_interp_release(&p->grid_ip);
	cal_interp_release(&p->qgrid_ip);
	for (int g = 0; g < CAL_G_COUNT; g++)
		cal_interp_release(&p->line_ip[g]);
	cal_interp_release(&p->pf.ip);
	cal_interp_release(&p->dec.ip);
	for (int e = 0; e < CAL_EW_COUNT; e++)
		cal_interp_release(&p->ew[e].ip);
	cal_interp_release(&p->fnorm.ip);
	for (int k = 0; k < 3; k++)
		cal_interp_release(&p->ar[k].ip);
	cal_interp_release(&p->ag.ip);
	for (int i = 0; i < CAL_HOST_PARTS; i++)
		cal_interp_release(&p->host[i].ip);
	cal_data_release(&p->data);
	memset(p, 0, sizeof(*p));
}

static void gemm_x(const struct cal_plan_gemm *pg, double m, double *x)
{
	x[0] = m;
	x[1] = pg->n;
	x[2] = pg->k;
}

bool cal_plan_gemm_eval(const struct cal_plan *p, int g, double m, double *y)
{
	const struct cal_plan_gemm *pg = &p->gemm[g];
	double x[3];

	if (!pg->s)
		return false;
	gemm_x(pg, m, x);
	if (!cal_interp_eval(pg->ip, x, y))
		return false;
	*y *= pg->mult;
	return true;
}

double cal_plan_gemm_fit(const struct cal_plan *p, int g, double m)
{
	const struct cal_plan_gemm *pg = &p->gemm[g];
	double x[3], f[CAL_FIT_MAX_P];

	if (!pg->s || pg->fit.p == 0)
		return NAN;
	gemm_x(pg, m, x);
	cal_series_features(pg->s, x, f);
	return pg->mult * cal_fit_eval(&pg->fit, f);
}

void cal_plan_gemm_linear(const struct cal_plan *p, int g, double *a, double *b)
{
	double y0 = cal_plan_gemm_fit(p, g, 0.0), y1 = cal_plan_gemm_fit(p, g, 1.0);

	/* the GEMM features are affine in m */
	*a = y0;
	*b = y1 - y0;
}

/* Does d hold every host-overhead part (of any model and tp)? */
static bool host_complete(const struct cal_data *d)
{
	for (size_t j = 0; j < d->n; j++)
		if (d->s[j].op == CAL_HOST_OVERHEAD && !strncmp(d->s[j].variant, "total:", 6))
			return true;
	for (int i = 0; i < CAL_HOST_PARTS; i++) {
		size_t len = strlen(cal_host_parts[i]);
		bool found = false;

		for (size_t j = 0; j < d->n && !found; j++)
			found = d->s[j].op == CAL_HOST_OVERHEAD &&
				!strncmp(d->s[j].variant, cal_host_parts[i], len) &&
				(d->s[j].variant[len] == ':' || !d->s[j].variant[len]);
		if (!found)
			return false;
	}
	return true;
}

struct other_dev {
	const char *device;
};

static bool other_device(void *ctx, const struct cal_meas *m)
{
	const struct other_dev *o = ctx;

	return strcmp(m->device, o->device) != 0;
}

/* ---- caches beside the stores --------------------------------------------
 *
 * Reading a device's rows from SQLite, and then building interpolation
 * tables and fits from them, is most of a simulation's start-up.  What is
 * derived from the stores alone is kept in compact binary files beside the
 * first store, ".NAME.HASH.cache", read back byte for byte by the next run
 * with the same inputs, so every result is identical (bit for bit):
 *
 *   rows     cal_plan_load: the device's series (their doubles, as read)
 *   table    sim/cost-table.c: the finished cost tables of one (GPU,
 *            model shape, tp, options), computed by this build's code
 *
 * A file is keyed by the format version, the schema version, each store's
 * path, device, inode, size, modification time (ns) and SQLite's file
 * change counter, the caller's dependencies (device, head_dim, model shape
 * ...) and, for contents computed rather than read, this program's build
 * (its GNU build-id, the C library's and GSL's versions), so that changed
 * code never reads an older build's tables.  The whole key is stored in
 * the file and compared; the HASH in its name spreads keys and leaves the
 * build out, so a new build replaces its predecessor's file rather than
 * adding one.  A store with a write-ahead log or journal beside it may be
 * changing: no cache then.  Written to a mkstemp file in the same directory
 * and renamed into place, so readers see a whole file or none; where the
 * directory is not writable there is simply no cache.  A file that does not
 * parse (or whose checksum fails) is ignored and rewritten; it is never
 * trusted for sizes before they are checked against its length.
 *
 * File: magic (8 bytes, the last the format version), key length (uint64),
 * key, payload, checksum of everything before it (uint64).
 *
 * Rejected: memory-mapping the file in place (the owners realloc and free
 * their arrays; copying a few hundred KB costs well under a millisecond);
 * one file holding every configuration (concurrent runs would rewrite each
 * other's entries; one file per key is replaced atomically). */

#define CACHE_MAGIC "SSCALC\0\004"     /* 8 bytes; the last is the format version */
#define CACHE_MAX_BYTES (512u << 20)

static uint64_t fnv1a(const void *buf, size_t n, uint64_t h)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The file's checksum: FNV-1a's step over 64-bit words (then the tail
 * bytes), eight times fewer steps than bytewise; it guards against damage,
 * not against an adversary (who could as well edit the store). */
static uint64_t checksum(const unsigned char *p, size_t n, uint64_t h)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		h ^= w;
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return fnv1a(p + i, n - i, h);
}

#define FNV_SEED 0xcbf29ce484222325ull

/* SQLite's file change counter (header bytes 24..27), or 0. */
static uint32_t change_counter(int fd)
{
	unsigned char b[4];

	if (pread(fd, b, 4, 24) != 4)
		return 0;
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static bool side_file(const char *store, const char *suffix)
{
	char path[4200];
	struct stat sb;

	snprintf(path, sizeof(path), "%s%s", store, suffix);
	return stat(path, &sb) == 0 && sb.st_size > 0;
}

struct build_id {
	const void *addr;           /* an address inside the object wanted */
	char hex[2 * 64 + 1];       /* its build-id, "" when it has none */
};

/* dl_iterate_phdr callback: the GNU build-id note of the object holding
 * b->addr. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct build_id *b = ctx;
	uintptr_t a = (uintptr_t)b->addr;
	bool inside = false;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum && !inside; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		inside = ph->p_type == PT_LOAD && a >= lo && a - lo < ph->p_memsz;
	}
	if (!inside)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
		size_t left = ph->p_memsz;

		if (ph->p_type != PT_NOTE)
			continue;
		/* notes: namesz, descsz, type (4 bytes each), name, desc, each
		 * padded to 4 bytes */
		while (left >= 12) {
			uint32_t nsz, dsz, type;
			size_t nlen, dlen;

			memcpy(&nsz, p, 4);
			memcpy(&dsz, p + 4, 4);
			memcpy(&type, p + 8, 4);
			nlen = ((size_t)nsz + 3) & ~(size_t)3;
			dlen = ((size_t)dsz + 3) & ~(size_t)3;
			if (nlen > left - 12 || dlen > left - 12 - nlen)
				break;
			if (type == NT_GNU_BUILD_ID && nsz == 4 && !memcmp(p + 12, "GNU", 4) &&
			    dsz > 0 && dsz <= 64) {
				for (uint32_t j = 0; j < dsz; j++)
					snprintf(b->hex + 2 * j, 3, "%02x", p[12 + nlen + j]);
				return 1;
			}
			p += 12 + nlen + dlen;
			left -= 12 + nlen + dlen;
		}
	}
	return 1;   /* the object, without a build-id */
}

bool cal_cache_init(struct cal_cache *c, const char *const *stores, int n_stores,
		    const char *deps, bool per_build)
{
	const char *first = NULL, *slash, *base;
	size_t o = 0, klen = sizeof(c->key);
	char *key = c->key;
	uint64_t name_hash;

	c->klen = 0;
	o += (size_t)snprintf(key, klen, "servesim calibration cache %d schema %d\n",
			      (int)(unsigned char)CACHE_MAGIC[7], CAL_SCHEMA_VERSION);
	for (int i = 0; i < n_stores; i++) {
		struct stat sb;
		uint32_t cc;
		int fd;

		if (!stores[i])
			continue;
		if (!first)
			first = stores[i];
		if (side_file(stores[i], "-wal") || side_file(stores[i], "-journal"))
			return false;
		fd = open(stores[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* a FIFO must not block */
		if (fd < 0)
			return false;
		if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			close(fd);
			return false;
		}
		cc = change_counter(fd);
		close(fd);
		o += (size_t)snprintf(key + o, o < klen ? klen - o : 0,
				      "%d %s %llu %llu %lld %lld.%09ld %u\n", i, stores[i],
				      (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino,
				      (long long)sb.st_size, (long long)sb.st_mtim.tv_sec,
				      sb.st_mtim.tv_nsec, cc);
	}
	o += (size_t)snprintf(key + o, o < klen ? klen - o : 0, "%s\n", deps);
	if (!first || o >= klen)
		return false;
	name_hash = fnv1a(key, o, FNV_SEED);
	if (per_build) {
		struct build_id b = { (const void *)cal_cache_init, "" };
		const char *libc = "?";

		dl_iterate_phdr(find_build_id, &b);
		if (!b.hex[0])
			return false;   /* no way to tell builds apart: no cache */
#ifdef __GLIBC__
		libc = gnu_get_libc_version();
#endif
		o += (size_t)snprintf(key + o, o < klen ? klen - o : 0, "build %s gsl %s libc %s\n",
				      b.hex, gsl_version, libc);
		if (o >= klen)
			return false;
	}
	slash = strrchr(first, '/');
	base = slash ? slash + 1 : first;
	if ((size_t)snprintf(c->path, sizeof(c->path), "%.*s.%s.%016llx.cache",
			     slash ? (int)(slash - first + 1) : 0, first, base,
			     (unsigned long long)name_hash) >= sizeof(c->path))
		return false;
	c->klen = o;
	return true;
}

bool cal_cache_read(const struct cal_cache *c, void **buf_out, const unsigned char **payload,
		    size_t *len)
{
	unsigned char *buf = NULL;
	struct stat sb;
	uint64_t sum, klen;
	bool ok = false;
	size_t size;
	int fd = open(c->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	*buf_out = NULL;
	if (fd < 0)
		return false;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 24 ||
	    (uint64_t)sb.st_size > CACHE_MAX_BYTES)
		goto out;
	size = (size_t)sb.st_size;
	buf = malloc(size);
	if (!buf)
		goto out;
	for (size_t got = 0; got < size;) {
		ssize_t k = read(fd, buf + got, size - got);

		if (k <= 0)
			goto out;
		got += (size_t)k;
	}
	/* the last 8 bytes: the checksum of everything before them */
	memcpy(&sum, buf + size - 8, 8);
	memcpy(&klen, buf + 8, 8);
	if (sum != checksum(buf, size - 8, FNV_SEED) || memcmp(buf, CACHE_MAGIC, 8) ||
	    klen != c->klen || klen > size - 24 || memcmp(buf + 16, c->key, c->klen))
		goto out;
	*payload = buf + 16 + klen;
	*len = size - 24 - klen;
	*buf_out = buf;
	buf = NULL;
	ok = true;
out:
	free(buf);
	close(fd);
	return ok;
}

void cal_cache_write(const struct cal_cache *c, const void *payload, size_t len)
{
	char tmp[4300];
	unsigned char *buf;
	uint64_t v = c->klen;
	size_t n = 24 + c->klen + len, done = 0;
	int fd;

	if (n > CACHE_MAX_BYTES || (size_t)snprintf(tmp, sizeof(tmp), "%s.XXXXXX", c->path) >=
	    sizeof(tmp))
		return;
	buf = malloc(n);
	if (!buf)
		return;
	memcpy(buf, CACHE_MAGIC, 8);
	memcpy(buf + 8, &v, 8);
	memcpy(buf + 16, c->key, c->klen);
	if (len)
		memcpy(buf + 16 + c->klen, payload, len);
	v = checksum(buf, n - 8, FNV_SEED);
	memcpy(buf + n - 8, &v, 8);
	fd = mkstemp(tmp);
	if (fd < 0)
		goto out;   /* read-only directory, or full: no cache */
	while (done < n) {
		ssize_t k = write(fd, buf + done, n - done);

		if (k <= 0)
			break;
		done += (size_t)k;
	}
	if (fchmod(fd, 0644) != 0)
		done = 0;
	if (close(fd) != 0 || done < n || rename(tmp, c->path) != 0)
		unlink(tmp);
out:
	free(buf);
}

/* ---- the rows cache: cal_plan_load's series -------------------------------- */

struct rd {
	const unsigned char *p;
	size_t left;
};

static bool take(struct rd *r, void *dst, size_t n)
{
	if (n > r->left)
		return false;
	memcpy(dst, r->p, n);
	r->p += n;
	r->left -= n;
	return true;
}

static bool terminated(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}

/* Payload: energy_j, energy_ms, the number of series (uint64), then per
 * series op, store, ndim (int32 each), n (uint64), device, family, variant,
 * dtype (their full char arrays), key[3] (int64), then n x ndim coordinates
 * and n latencies (double). */
static bool rows_parse(struct cal_data *d, struct rd *r)
{
	uint64_t n_series;

	if (!take(r, d->energy_j, sizeof(d->energy_j)) ||
	    !take(r, d->energy_ms, sizeof(d->energy_ms)) || !take(r, &n_series, sizeof(n_series)) ||
	    n_series > r->left / 64)
		return false;
	d->s = calloc(n_series ? n_series : 1, sizeof(*d->s));
	if (!d->s)
		return false;
	d->cap = n_series;
	for (uint64_t i = 0; i < n_series; i++) {
		struct cal_series *s = &d->s[i];
		int32_t op, store, ndim;
		uint64_t n;

		if (!take(r, &op, 4) || !take(r, &store, 4) || !take(r, &ndim, 4) ||
		    !take(r, &n, 8) || !take(r, s->device, sizeof(s->device)) ||
		    !take(r, s->family, sizeof(s->family)) || !take(r, s->variant, sizeof(s->variant)) ||
		    !take(r, s->dtype, sizeof(s->dtype)) || !take(r, s->key, sizeof(s->key)))
			return false;
		if (op < 0 || op >= CAL_OP_COUNT || store < 0 || ndim < 1 ||
		    ndim > CAL_SERIES_MAX_DIM || n == 0 || n > r->left / (8u * (ndim + 1)) ||
		    !terminated(s->device, sizeof(s->device)) ||
		    !terminated(s->family, sizeof(s->family)) ||
		    !terminated(s->variant, sizeof(s->variant)) ||
		    !terminated(s->dtype, sizeof(s->dtype)))
			return false;
		s->op = (enum cal_op)op;
		s->store = store;
		s->ndim = ndim;
		s->x = malloc(n * ndim * sizeof(double));
		s->y = malloc(n * sizeof(double));
		d->n = i + 1;   /* owned from here: released on failure */
		if (!s->x || !s->y || !take(r, s->x, n * ndim * sizeof(double)) ||
		    !take(r, s->y, n * sizeof(double)))
			return false;
		s->n = s->cap = n;
	}
	return r->left == 0;
}

/* Load d from the rows cache; false (d released) when there is none or it
 * does not parse. */
static bool rows_load(struct cal_data *d, const struct cal_cache *c)
{
	const unsigned char *payload;
	void *buf;
	size_t len;
	struct rd r;
	bool ok;

	if (!cal_cache_read(c, &buf, &payload, &len))
		return false;
	r = (struct rd){ payload, len };
	ok = rows_parse(d, &r);
	if (!ok) {
		int64_t hd = d->head_dim_only;

		cal_data_release(d);
		d->head_dim_only = hd;
	}
	free(buf);
	return ok;
}

struct wr {
	unsigned char *buf;
	size_t n, cap;
	bool failed;
};

static void put(struct wr *w, const void *p, size_t n)
{
	if (w->failed)
		return;
	if (w->n + n > w->cap) {
		size_t cap = w->cap ? w->cap : 1 << 20;
		unsigned char *nb;

		while (cap < w->n + n)
			cap *= 2;
		nb = realloc(w->buf, cap);
		if (!nb) {
			w->failed = true;
			return;
		}
		w->buf = nb;
		w->cap = cap;
	}
	memcpy(w->buf + w->n, p, n);
	w->n += n;
}

/* Write d to the rows cache; failures leave no file and are not errors:
 * the cache is an optimisation. */
static void rows_save(const struct cal_data *d, const struct cal_cache *c)
{
	struct wr w = { NULL, 0, 0, false };
	uint64_t v;

	put(&w, d->energy_j, sizeof(d->energy_j));
	put(&w, d->energy_ms, sizeof(d->energy_ms));
	v = d->n;
	put(&w, &v, sizeof(v));
	for (size_t i = 0; i < d->n; i++) {
		const struct cal_series *s = &d->s[i];
		int32_t op = (int32_t)s->op, store = s->store, ndim = s->ndim;

		put(&w, &op, 4);
		put(&w, &store, 4);
		put(&w, &ndim, 4);
		v = s->n;
		put(&w, &v, 8);
		put(&w, s->device, sizeof(s->device));
		put(&w, s->family, sizeof(s->family));
		put(&w, s->variant, sizeof(s->variant));
		put(&w, s->dtype, sizeof(s->dtype));
		put(&w, s->key, sizeof(s->key));
		put(&w, s->x, s->n * s->ndim * sizeof(double));
		put(&w, s->y, s->n * sizeof(double));
	}
	if (!w.failed)
		cal_cache_write(c, w.buf, w.n);
	free(w.buf);
}

int cal_plan_load(struct cal_plan *p, const char *const *stores, int n_stores,
		  const char *device, const struct cal_shape *shape, struct ss_error *err)
{
	struct cal_data d;
	struct other_dev od = { device };
	struct cal_cache c;
	bool cacheable;
	char deps[256];
	int rc;

	cal_data_init(&d);
	/* Attention is priced only from tables of the model's own head size. */
	d.head_dim_only = shape->head_dim;
	cacheable = device &&
		    (size_t)snprintf(deps, sizeof(deps), "rows device %s head_dim %lld", device,
				     (long long)shape->head_dim) < sizeof(deps) &&
		    cal_cache_init(&c, stores, n_stores, deps, false);
	if (cacheable && rows_load(&d, &c)) {
		rc = 0;
	} else {
		/* The device's rows, host overheads included; other devices'
		 * host overheads only when the device has none of its own.
		 * (cal_cache_init opened every store: one that has become
		 * unreadable has no cache and fails here.) */
		rc = cal_data_load(&d, stores, n_stores, device, ~0u, NULL, NULL, err);
		if (!rc && !host_complete(&d))
			rc = cal_data_load(&d, stores, n_stores, NULL, 1u << CAL_HOST_OVERHEAD,
					   other_device, &od, err);
		if (!rc && cacheable)
			rows_save(&d, &c);
	}
	if (!rc)
		rc = cal_plan_build(p, &d, &d, device, shape, err);
	if (rc) {
		cal_data_release(&d);
		return rc;
	}
	p->data = d;
	return 0;
}

double cal_plan_op_fit(const struct cal_plan_op *o, const double *x)
{
	double f[CAL_FIT_MAX_P];

	if (!o->s || o->ip.fit.p == 0)
		return 0.0;
	cal_series_features(o->s, x, f);
	return cal_fit_eval(&o->ip.fit, f);
}

/* mult x fit of an element-wise kind at m model tokens (f = width ratio). */
static double ew_fit(const struct cal_plan_op *o, double m)
{
	double x = m * o->f;

	return o->s ? o->mult * cal_plan_op_fit(o, &x) : 0.0;
}

void cal_plan_ew_linear(const struct cal_plan *p, double *a, double *b)
{
	*a = *b = 0.0;
	for (int e = 0; e < CAL_EW_COUNT; e++) {
		double y0 = ew_fit(&p->ew[e], 0.0);

		*a += y0;
		*b += ew_fit(&p->ew[e], 1.0) - y0;
	}
}

void cal_plan_fnorm_linear(const struct cal_plan *p, double *a, double *b)
{
	*a = ew_fit(&p->fnorm, 0.0);
	*b = ew_fit(&p->fnorm, 1.0) - *a;
}

void cal_plan_host_linear(const struct cal_plan *p, double *a, double *b)
{
	*a = *b = 0.0;
	for (int i = 0; i < CAL_HOST_PARTS; i++) {
		double x0 = 0.0, x1 = 1.0, y0 = cal_plan_op_fit(&p->host[i], &x0);

		*a += y0;
		*b += cal_plan_op_fit(&p->host[i], &x1) - y0;
	}
}

void cal_plan_coll_linear(const struct cal_plan *p, int kind, double *a, double *b)
{
	const struct cal_plan_op *o = kind < 0 ? &p->ag : &p->ar[kind];
	double x0 = 0.0, x1 = 1.0;

	*a = cal_plan_op_fit(o, &x0);
	*b = cal_plan_op_fit(o, &x1) - *a;
}
