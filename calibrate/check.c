/* servesim — k-fold and cross-source fidelity checks (fidelity.h). */
#include "fidelity.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "grid.h"
#include "import.h"

/* ---- reports ------------------------------------------------------------- */

void cal_check_report_init(struct cal_check_report *rep)
{
	memset(rep, 0, sizeof(*rep));
}

void cal_check_report_release(struct cal_check_report *rep)
{
	if (!rep)
		return;
	free(rep->rows);
	memset(rep, 0, sizeof(*rep));
}

/* Absolute percentage errors of one report row, growing. */
struct apes {
	double *v;
	size_t n, cap;
	double *ratio;             /* predicted / measured (cross-source) */
};

static int apes_add(struct apes *a, double pred, double meas, struct ss_error *err)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 256;
		double *v = realloc(a->v, cap * sizeof(double));
		double *r;

		if (!v)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		a->v = v;
		r = realloc(a->ratio, cap * sizeof(double));
		if (!r)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		a->ratio = r;
		a->cap = cap;
	}
	a->v[a->n] = 100.0 * fabs(pred - meas) / meas;
	a->ratio[a->n] = pred / meas;
	a->n++;
	return 0;
}

static void apes_free(struct apes *a)
{
	free(a->v);
	free(a->ratio);
	memset(a, 0, sizeof(*a));
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Mean and nearest-rank p90 of a (sorts it); NAN when empty. */
static void apes_stats(struct apes *a, double *mean, double *p90, double *median_ratio)
{
	double sum = 0.0;

	*mean = *p90 = NAN;
	if (median_ratio)
		*median_ratio = NAN;
	if (a->n == 0)
		return;
	qsort(a->v, a->n, sizeof(double), cmp_double);
	for (size_t i = 0; i < a->n; i++)
		sum += a->v[i];
	*mean = sum / (double)a->n;
	*p90 = a->v[(size_t)ceil(0.9 * (double)a->n) - 1];
	if (median_ratio) {
		qsort(a->ratio, a->n, sizeof(double), cmp_double);
		*median_ratio = a->ratio[(a->n - 1) / 2];
	}
}

static struct cal_check_row *row_get(struct cal_check_report *rep, const char *device,
				     const char *op, struct ss_error *err)
{
	struct cal_check_row *r;

	for (size_t i = 0; i < rep->n; i++)
		if (!strcmp(rep->rows[i].device, device) && !strcmp(rep->rows[i].op, op))
			return &rep->rows[i];
	if (rep->n == rep->cap) {
		size_t cap = rep->cap ? 2 * rep->cap : 32;
		struct cal_check_row *nr = realloc(rep->rows, cap * sizeof(*nr));

		if (!nr) {
			ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			return NULL;
		}
		rep->rows = nr;
		rep->cap = cap;
	}
	r = &rep->rows[rep->n++];
	memset(r, 0, sizeof(*r));
	snprintf(r->device, sizeof(r->device), "%s", device);
	snprintf(r->op, sizeof(r->op), "%s", op);
	r->mape_pct = r->p90_ape_pct = NAN;
	r->fit_mape_pct = r->fit_p90_ape_pct = NAN;
	r->median_ratio = NAN;
	r->median_ape_pct = r->fit_median_ape_pct = NAN;
	r->rl_median_ape_pct = r->rl_p90_ape_pct = NAN;
	r->rl_all_median_ape_pct = r->rl_all_p90_ape_pct = NAN;
	return r;
}

static int cmp_row(const void *a, const void *b)
{
	const struct cal_check_row *x = a, *y = b;
	int c = strcmp(x->device, y->device);

	return c ? c : strcmp(x->op, y->op);
}

/* ---- k-fold --------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = mix64(h ^ (unsigned char)*s);
	return h;
}

/* Fold of point i of s: a hash of the series identity and the point's
 * coordinates, independent of row order. */
static int fold_of(const struct cal_series *s, size_t i, int k)
{
	uint64_t h = hash_str(hash_str((uint64_t)s->op, s->device), s->variant);

	for (int j = 0; j < 3; j++)
		h = mix64(h ^ (uint64_t)s->key[j]);
	for (int d = 0; d < s->ndim; d++) {
		uint64_t bits;
		double x = s->x[i * s->ndim + d];

		memcpy(&bits, &x, sizeof(bits));
		h = mix64(h ^ bits);
	}
	return (int)(h % (uint64_t)k);
}

static bool is_vidur(const struct cal_series *s)
{
	return !strcmp(s->family, "vidur");
}

/* Report name of s: the operator, suffixed with the family when another,
 * preferred family (non-Vidur first, then the most points) measures the
 * same operator on the same device. */
static void op_label(const struct cal_data *d, const struct cal_series *s, char *out, size_t len)
{
	const char *best = NULL;
	size_t best_n = 0;
	bool best_vidur = true;

	/* points per family of this (device, op) */
	for (size_t i = 0; i < d->n; i++) {
		const struct cal_series *t = &d->s[i];
		size_t n = 0;
		bool v;

		if (t->op != s->op || strcmp(t->device, s->device))
			continue;
		for (size_t j = 0; j < d->n; j++)
			if (d->s[j].op == s->op && !strcmp(d->s[j].device, s->device) &&
			    !strcmp(d->s[j].family, t->family))
				n += d->s[j].n;
		v = is_vidur(t);
		if (!best || (best_vidur && !v) || (best_vidur == v && n > best_n)) {
			best = t->family;
			best_n = n;
			best_vidur = v;
		}
	}
	if (!best || !strcmp(best, s->family) || !s->family[0])
		snprintf(out, len, "%s", cal_op_name(s->op));
	else
		snprintf(out, len, "%s.%s", cal_op_name(s->op), s->family);
}

struct acc {
	char device[64], op[64];
	struct apes tab, fit;
	size_t outside;
};

static struct acc *acc_get(struct acc **accs, size_t *n, const char *device, const char *op,
			   struct ss_error *err)
{
	struct acc *a;

	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*accs)[i].device, device) && !strcmp((*accs)[i].op, op))
			return &(*accs)[i];
	a = realloc(*accs, (*n + 1) * sizeof(**accs));
	if (!a) {
		ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		return NULL;
	}
	*accs = a;
	a = &(*accs)[(*n)++];
	memset(a, 0, sizeof(*a));
	snprintf(a->device, sizeof(a->device), "%s", device);
	snprintf(a->op, sizeof(a->op), "%s", op);
	return a;
}

static int kfold_series(const struct cal_series *s, int k, struct acc *a, struct ss_error *err)
{
	unsigned char *skip = malloc(s->n);
	int *fold = malloc(s->n * sizeof(int));
	int rc = 0;

	if (!skip || !fold) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < s->n; i++)
		fold[i] = fold_of(s, i, k);
	for (int f = 0; f < k && !rc; f++) {
		struct cal_interp ip;
		size_t held = 0;
		struct ss_error ierr = { 0 };

		for (size_t i = 0; i < s->n; i++) {
			skip[i] = fold[i] == f;
			held += skip[i];
		}
		if (held == 0)
			continue;
		if (held == s->n) {
			a->outside += held;
			continue;
		}
		if (cal_interp_build(&ip, s, skip, &ierr)) {
			if (ierr.code == -ENOMEM) {
				rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
				break;
			}
			a->outside += held;
			continue;
		}
		for (size_t i = 0; i < s->n && !rc; i++) {
			const double *x = s->x + i * s->ndim;
			double y;

			if (!skip[i])
				continue;
			if (cal_interp_eval(&ip, x, &y))
				rc = apes_add(&a->tab, y, s->y[i], err);
			else
				a->outside++;
			if (!rc && ip.fit.p > 0)
				rc = apes_add(&a->fit, cal_interp_fit(&ip, x), s->y[i], err);
		}
		cal_interp_release(&ip);
	}
out:
	free(skip);
	free(fold);
	return rc;
}

/* Nearest-rank median of a sorted a (apes_stats sorts); NAN when empty. */
static double apes_median(const struct apes *a)
{
	return a->n ? a->v[(a->n - 1) / 2] : NAN;
}

/* Rows of the report from accs; with_median also sets the medians. */
static int acc_finish_rows(struct acc *accs, size_t n, struct cal_check_report *rep,
			   bool with_median, struct ss_error *err)
{
	for (size_t i = 0; i < n; i++) {
		struct cal_check_row *r = row_get(rep, accs[i].device, accs[i].op, err);

		if (!r)
			return -ENOMEM;
		r->n = accs[i].tab.n;
		r->n_outside = accs[i].outside;
		apes_stats(&accs[i].tab, &r->mape_pct, &r->p90_ape_pct, NULL);
		r->fit_n = accs[i].fit.n;
		apes_stats(&accs[i].fit, &r->fit_mape_pct, &r->fit_p90_ape_pct, NULL);
		if (with_median) {
			r->median_ape_pct = apes_median(&accs[i].tab);
			r->fit_median_ape_pct = apes_median(&accs[i].fit);
		}
	}
	if (rep->n)
		qsort(rep->rows, rep->n, sizeof(*rep->rows), cmp_row);
	return 0;
}

static int acc_finish(struct acc *accs, size_t n, struct cal_check_report *rep,
		      struct ss_error *err)
{
	return acc_finish_rows(accs, n, rep, false, err);
}

static void accs_free(struct acc *accs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		apes_free(&accs[i].tab);
		apes_free(&accs[i].fit);
	}
	free(accs);
}

int cal_check_kfold(struct cal_store *st, const struct cal_check_opts *o,
		    struct cal_check_report *rep, struct ss_error *err)
{
	struct cal_data d;
	struct acc *accs = NULL;
	size_t n_acc = 0;
	int k = o && o->folds ? o->folds : 5, rc;

	if (k < 2)
		return ss_error_set(err, -EINVAL, NULL, 0, "check: %d folds, expected at least 2", k);
	cal_data_init(&d);
	rc = cal_data_load_store(&d, st, 0, o ? o->device : NULL, ~0u, NULL, NULL, err);
	for (size_t i = 0; i < d.n && !rc; i++) {
		char label[64];
		struct acc *a;

		op_label(&d, &d.s[i], label, sizeof(label));
		a = acc_get(&accs, &n_acc, d.s[i].device, label, err);
		if (!a) {
			rc = -ENOMEM;
			break;
		}
		rc = kfold_series(&d.s[i], k, a, err);
	}
	if (!rc)
		rc = acc_finish(accs, n_acc, rep, err);
	accs_free(accs, n_acc);
	cal_data_release(&d);
	return rc;
}

/* ---- leave one GEMM shape class out (issue 33) ------------------------------ */

/* Aspect (wide: n >= 2k, narrow: 2n <= k, square between) by weight size
 * (n x k elements: s < 2^22, m < 2^25, l the rest), in enum order. */
static const char *const gemm_class_names[CAL_GEMM_CLASS_COUNT] = {
	"wide-s", "wide-m", "wide-l", "square-s", "square-m", "square-l",
	"narrow-s", "narrow-m", "narrow-l",
};

int cal_gemm_class_of(int64_t n, int64_t k)
{
	int aspect = n >= 2 * k ? 0 : 2 * n <= k ? 2 : 1;
	double w = (double)n * (double)k;
	int size = w < 4194304.0 ? 0 : w < 33554432.0 ? 1 : 2;

	return 3 * aspect + size;
}

const char *cal_gemm_class_name(int c)
{
	return c >= 0 && c < CAL_GEMM_CLASS_COUNT ? gemm_class_names[c] : "?";
}

/* Index of the accumulator named device / label, created when missing
 * (indices, not pointers: acc_get may move the array); -1 when out of
 * memory. */
static ptrdiff_t acc_index(struct acc **accs, size_t *n, const char *device, const char *label,
			   struct ss_error *err)
{
	struct acc *a = acc_get(accs, n, device, label, err);

	return a ? a - *accs : -1;
}

/* One 3-D GEMM series: each class present in it is held out in turn, the
 * interpolator rebuilt from the other classes' points predicts it.  Scored
 * under "gemm.FAMILY.DTYPE:CLASS" and "gemm.FAMILY.DTYPE:all". */
static int classes_series(const struct cal_series *s, struct acc **accs, size_t *n_acc,
			  struct ss_error *err)
{
	unsigned char *skip = malloc(s->n);
	int *cls = malloc(s->n * sizeof(int));
	int rc = 0;

	if (!skip || !cls) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < s->n; i++)
		cls[i] = cal_gemm_class_of((int64_t)s->x[i * 3 + 1], (int64_t)s->x[i * 3 + 2]);
	for (int c = 0; c < CAL_GEMM_CLASS_COUNT && !rc; c++) {
		char label[64];
		struct cal_interp ip;
		struct ss_error ierr = { 0 };
		ptrdiff_t ai, aall;
		size_t held = 0;

		for (size_t i = 0; i < s->n; i++) {
			skip[i] = cls[i] == c;
			held += skip[i];
		}
		if (held == 0)
			continue;
		snprintf(label, sizeof(label), "gemm.%s.%s:%s", s->family[0] ? s->family : "-",
			 s->dtype[0] ? s->dtype : "-", cal_gemm_class_name(c));
		ai = acc_index(accs, n_acc, s->device, label, err);
		snprintf(label, sizeof(label), "gemm.%s.%s:all", s->family[0] ? s->family : "-",
			 s->dtype[0] ? s->dtype : "-");
		aall = ai < 0 ? -1 : acc_index(accs, n_acc, s->device, label, err);
		if (ai < 0 || aall < 0) {
			rc = -ENOMEM;
			break;
		}
		if (held == s->n || cal_interp_build(&ip, s, skip, &ierr)) {
			if (ierr.code == -ENOMEM) {
				rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
				break;
			}
			(*accs)[ai].outside += held;
			(*accs)[aall].outside += held;
			continue;
		}
		for (size_t i = 0; i < s->n && !rc; i++) {
			const double *x = s->x + i * s->ndim;
			double y;

			if (!skip[i])
				continue;
			if (cal_interp_eval(&ip, x, &y)) {
				rc = apes_add(&(*accs)[ai].tab, y, s->y[i], err);
				if (!rc)
					rc = apes_add(&(*accs)[aall].tab, y, s->y[i], err);
			} else {
				(*accs)[ai].outside++;
				(*accs)[aall].outside++;
			}
			if (!rc && ip.fit.p > 0) {
				double f = cal_interp_fit(&ip, x);

				rc = apes_add(&(*accs)[ai].fit, f, s->y[i], err);
				if (!rc)
					rc = apes_add(&(*accs)[aall].fit, f, s->y[i], err);
			}
		}
		cal_interp_release(&ip);
	}
out:
	free(skip);
	free(cls);
	return rc;
}

int cal_check_gemm_classes(struct cal_store *st, const struct cal_check_opts *o,
			   struct cal_check_report *rep, struct ss_error *err)
{
	struct cal_data d;
	struct acc *accs = NULL;
	size_t n_acc = 0;
	int rc;

	cal_data_init(&d);
	rc = cal_data_load_store(&d, st, 0, o ? o->device : NULL, 1u << CAL_GEMM, NULL, NULL,
				 err);
	for (size_t i = 0; i < d.n && !rc; i++)
		if (d.s[i].op == CAL_GEMM && d.s[i].ndim == 3)
			rc = classes_series(&d.s[i], &accs, &n_acc, err);
	if (!rc)
		rc = acc_finish_rows(accs, n_acc, rep, true, err);
	accs_free(accs, n_acc);
	cal_data_release(&d);
	return rc;
}

/* ---- cross-GPU: another GPU's GEMM grid scaled by the roofline ------------- */

/* Accumulators of one cross-GPU row. */
struct xg_acc {
	char op[64];
	char from_dtype[16];
	struct apes tab;           /* scaled table, in from's grid */
	struct apes fit;           /* from's fit scaled, every point */
	struct apes rl;            /* roofline on to, the points tab scored */
	struct apes rl_all;        /* roofline on to, every point */
	size_t outside;
};

static ptrdiff_t xg_index(struct xg_acc **accs, size_t *n, const char *op, const char *from_dtype,
			  struct ss_error *err)
{
	struct xg_acc *a;

	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*accs)[i].op, op))
			return (ptrdiff_t)i;
	a = realloc(*accs, (*n + 1) * sizeof(**accs));
	if (!a) {
		ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		return -1;
	}
	*accs = a;
	a = &(*accs)[*n];
	memset(a, 0, sizeof(*a));
	snprintf(a->op, sizeof(a->op), "%s", op);
	snprintf(a->from_dtype, sizeof(a->from_dtype), "%s", from_dtype);
	return (ptrdiff_t)(*n)++;
}

/* The grid of device from the table model would price series t's GEMMs
 * with (fidelity.h, cal_check_cross_gpu); NULL when from has none. */
static const struct cal_series *xg_from_grid(const struct cal_data *d, const char *from,
					     const struct cal_series *t)
{
	const struct cal_series *f = cal_data_gemm_grid_dtype(d, from, t->dtype);
	const char *w = cal_gemm_dtype_weights(t->dtype), *dt;
	size_t pos = 0;

	while (!f && w && (dt = cal_gemm_dtype_for_weights(w, &pos)))
		f = cal_data_gemm_grid_dtype(d, from, dt);
	if (!f && cal_series_is_16bit(t))
		f = cal_data_gemm_grid(d, from);
	return f;
}

static bool is_grid_gemm(const struct cal_series *s)
{
	return s->op == CAL_GEMM && s->ndim == 3;
}

/* Rows of one device pair's points from `from` and `to` only. */
static bool xg_row_filter(void *ctx, const struct cal_meas *m)
{
	const struct cal_cross_gpu *x = ctx;

	return !strcmp(m->device, x->from) || !strcmp(m->device, x->to);
}

/* Series t of x->to: each point predicted from f (NULL: none) and by the
 * roofline, into the class row and the series' ":all" row. */
static int xg_series(const struct cal_cross_gpu *x, const struct cal_series *t,
		     const struct cal_series *f, struct xg_acc **accs, size_t *n_acc,
		     struct ss_error *err)
{
	char label[64];
	const char *fam = t->family[0] ? t->family : "-", *dt = t->dtype[0] ? t->dtype : "-";
	const char *fdt = f ? f->dtype : "";
	struct cal_interp ip;
	bool have_ip = false;
	ptrdiff_t aall;
	int rc = 0;

	snprintf(label, sizeof(label), "gemm.%s.%s:all", fam, dt);
	aall = xg_index(accs, n_acc, label, fdt, err);
	if (aall < 0)
		return -ENOMEM;
	if (f) {
		rc = cal_interp_build(&ip, f, NULL, err);
		if (rc)
			return rc;
		have_ip = true;
	}
	for (size_t i = 0; i < t->n && !rc; i++) {
		const double *p = t->x + i * 3;
		double meas = t->y[i], rl_to, rl_from = NAN, y;
		ptrdiff_t ai;
		struct xg_acc *a[2];

		snprintf(label, sizeof(label), "gemm.%s.%s:%s", fam, dt,
			 cal_gemm_class_name(cal_gemm_class_of((int64_t)p[1], (int64_t)p[2])));
		ai = xg_index(accs, n_acc, label, fdt, err);
		if (ai < 0) {
			rc = -ENOMEM;
			break;
		}
		a[0] = &(*accs)[ai];
		a[1] = &(*accs)[aall];
		rc = x->roofline(x->ctx, x->to, t->dtype, p[0], p[1], p[2], &rl_to, err);
		if (!rc && have_ip)
			rc = x->roofline(x->ctx, x->from, t->dtype, p[0], p[1], p[2], &rl_from, err);
		if (rc == -ENOTSUP) {
			/* a dtype the roofline cannot price: nothing to scale by */
			rc = 0;
			a[0]->outside++;
			a[1]->outside++;
			continue;
		}
		for (int j = 0; j < 2 && !rc; j++)
			rc = apes_add(&a[j]->rl_all, rl_to, meas, err);
		if (!rc && have_ip && ip.fit.p > 0) {
			double fp = cal_interp_fit(&ip, p) * (rl_to / rl_from);

			for (int j = 0; j < 2 && !rc; j++)
				rc = apes_add(&a[j]->fit, fp, meas, err);
		}
		if (rc)
			break;
		if (!have_ip || !cal_interp_eval(&ip, p, &y)) {
			a[0]->outside++;
			a[1]->outside++;
			continue;
		}
		/* the scaled model's GEMM: the reference's time x roofline_to /
		 * roofline_from (cost-scaled.c) */
		y *= rl_to / rl_from;
		for (int j = 0; j < 2 && !rc; j++) {
			rc = apes_add(&a[j]->tab, y, meas, err);
			if (!rc)
				rc = apes_add(&a[j]->rl, rl_to, meas, err);
		}
	}
	if (have_ip)
		cal_interp_release(&ip);
	return rc;
}

int cal_check_cross_gpu(struct cal_store *st, const struct cal_cross_gpu *x,
			struct cal_check_report *rep, struct ss_error *err)
{
	struct cal_data d;
	struct xg_acc *accs = NULL;
	size_t n_acc = 0;
	bool have_from = false, have_to = false;
	int rc;

	cal_data_init(&d);
	rc = cal_data_load_store(&d, st, 0, NULL, 1u << CAL_GEMM, xg_row_filter, (void *)x, err);
	for (size_t i = 0; i < d.n && !rc; i++) {
		have_from |= is_grid_gemm(&d.s[i]) && !strcmp(d.s[i].device, x->from);
		have_to |= is_grid_gemm(&d.s[i]) && !strcmp(d.s[i].device, x->to);
	}
	if (!rc && (!have_from || !have_to))
		rc = ss_error_set(err, -ENOENT, NULL, 0,
				  "--cross-gpu %s:%s: the store has no GEMM grid measurements of %s",
				  x->from, x->to, have_from ? x->to : x->from);
	for (size_t i = 0; i < d.n && !rc; i++)
		if (is_grid_gemm(&d.s[i]) && !strcmp(d.s[i].device, x->to))
			rc = xg_series(x, &d.s[i], xg_from_grid(&d, x->from, &d.s[i]), &accs, &n_acc,
				       err);
	for (size_t i = 0; i < n_acc && !rc; i++) {
		struct xg_acc *a = &accs[i];
		struct cal_check_row *r = row_get(rep, x->to, a->op, err);
		double mean;

		if (!r) {
			rc = -ENOMEM;
			break;
		}
		snprintf(r->from_dtype, sizeof(r->from_dtype), "%s", a->from_dtype);
		r->n = a->tab.n;
		r->n_outside = a->outside;
		apes_stats(&a->tab, &r->mape_pct, &r->p90_ape_pct, &r->median_ratio);
		r->median_ape_pct = apes_median(&a->tab);
		r->fit_n = a->fit.n;
		apes_stats(&a->fit, &r->fit_mape_pct, &r->fit_p90_ape_pct, NULL);
		r->fit_median_ape_pct = apes_median(&a->fit);
		r->rl_n = a->rl.n;
		apes_stats(&a->rl, &mean, &r->rl_p90_ape_pct, NULL);
		r->rl_median_ape_pct = apes_median(&a->rl);
		r->rl_all_n = a->rl_all.n;
		apes_stats(&a->rl_all, &mean, &r->rl_all_p90_ape_pct, NULL);
		r->rl_all_median_ape_pct = apes_median(&a->rl_all);
	}
	if (!rc && rep->n)
		qsort(rep->rows, rep->n, sizeof(*rep->rows), cmp_row);
	for (size_t i = 0; i < n_acc; i++) {
		apes_free(&accs[i].tab);
		apes_free(&accs[i].fit);
		apes_free(&accs[i].rl);
		apes_free(&accs[i].rl_all);
	}
	free(accs);
	cal_data_release(&d);
	return rc;
}

/* ---- cross-source ----------------------------------------------------------- */

static bool not_vidur(void *ctx, const struct cal_meas *m)
{
	(void)ctx;
	return !(strstr(m->source, "vidur") || !strncmp(m->variant, "vidur", 5));
}

static bool only_vidur(void *ctx, const struct cal_meas *m)
{
	return !not_vidur(ctx, m);
}

/* Devices that have Vidur rows (at most 16). */
static size_t vidur_devices(const struct cal_data *v, char dev[][64], size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < v->n; i++) {
		size_t j;

		for (j = 0; j < n; j++)
			if (!strcmp(dev[j], v->s[i].device))
				break;
		if (j == n && n < max)
			snprintf(dev[n++], 64, "%s", v->s[i].device);
	}
	return n;
}

static const char *const gemm_ops[4] = {
	"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj",
};

/* (n, k) of Vidur's GEMM op g for model m at tp. */
static void vidur_gemm_shape(const struct cal_check_model *m, int tp, int g, int64_t *n,
			     int64_t *k)
{
	int64_t e = m->hidden, hd = m->head_dim, f = m->ff;

	switch (g) {
	case 0:
		*n = (m->heads + 2LL * m->kv_heads) * hd / tp;
		*k = e;
		break;
	case 1:
		*n = e;
		*k = (int64_t)m->heads * hd / tp;
		break;
	case 2:
		*n = (m->gated ? 2 : 1) * f / tp;
		*k = e;
		break;
	default:
		*n = e;
		*k = f / tp;
		break;
	}
}

struct xacc {
	struct apes a;
	char op[64];
};

static int xs_row(struct cal_check_report *rep, const char *device, struct xacc *x,
		  struct ss_error *err)
{
	struct cal_check_row *r;

	if (x->a.n == 0)
		return 0;
	r = row_get(rep, device, x->op, err);
	if (!r)
		return -ENOMEM;
	r->n = x->a.n;
	apes_stats(&x->a, &r->mape_pct, &r->p90_ape_pct, &r->median_ratio);
	return 0;
}

static int xs_gemm(const struct cal_data *aic, const struct cal_data *vid, const char *dev,
		   const struct cal_check_model *models, size_t n_models, const int *tps,
		   size_t n_tps, struct cal_check_report *rep, struct ss_error *err)
{
	const struct cal_series *grid = cal_data_gemm_grid(aic, dev);
	struct xacc acc[5];
	struct cal_interp ip;
	int rc;

	if (!grid)
		return 0;
	memset(acc, 0, sizeof(acc));
	for (int g = 0; g < 4; g++)
		snprintf(acc[g].op, sizeof(acc[g].op), "gemm:%s", gemm_ops[g]);
	snprintf(acc[4].op, sizeof(acc[4].op), "gemm");
	rc = cal_interp_build(&ip, grid, NULL, err);
	if (rc)
		return rc;
	for (size_t mi = 0; mi < n_models && !rc; mi++)
		for (size_t ti = 0; ti < n_tps && !rc; ti++)
			for (int g = 0; g < 4 && !rc; g++) {
				char variant[64];
				int64_t n, k;

				vidur_gemm_shape(&models[mi], tps[ti], g, &n, &k);
				snprintf(variant, sizeof(variant), "vidur:%s", gemm_ops[g]);
				for (size_t si = 0; si < vid->n && !rc; si++) {
					const struct cal_series *s = &vid->s[si];

					if (s->op != CAL_GEMM || s->ndim != 1 || strcmp(s->device, dev) ||
					    strcmp(s->variant, variant) || s->key[0] != n || s->key[1] != k)
						continue;
					for (size_t i = 0; i < s->n && !rc; i++) {
						double x[3] = { s->x[i], (double)n, (double)k }, y;

						if (!cal_interp_eval(&ip, x, &y))
							continue;
						rc = apes_add(&acc[g].a, y, s->y[i], err);
						if (!rc)
							rc = apes_add(&acc[4].a, y, s->y[i], err);
					}
				}
			}
	cal_interp_release(&ip);
	for (int g = 0; g < 5; g++) {
		if (!rc)
			rc = xs_row(rep, dev, &acc[g], err);
		apes_free(&acc[g].a);
	}
	return rc;
}

/* Element-wise: each model width's Vidur series predicted from the nearest
 * other measured width of the same kind, at equivalent tokens. */
static int xs_elementwise(const struct cal_data *vid, const char *dev,
			  const struct cal_check_model *models, size_t n_models, const int *tps,
			  size_t n_tps, struct cal_check_report *rep, struct ss_error *err)
{
	static const enum cal_op kinds[] = {
		CAL_RMSNORM, CAL_ROPE, CAL_ACTIVATION, CAL_RESIDUAL_ADD, CAL_EMBEDDING,
	};
	int rc = 0;

	for (size_t ki = 0; ki < sizeof(kinds) / sizeof(kinds[0]) && !rc; ki++) {
		struct xacc acc;
		int64_t done[64];
		size_t n_done = 0;

		memset(&acc, 0, sizeof(acc));
		snprintf(acc.op, sizeof(acc.op), "%s", cal_op_name(kinds[ki]));
		for (size_t mi = 0; mi < n_models && !rc; mi++)
			for (size_t ti = 0; ti < n_tps && !rc; ti++) {
				const struct cal_check_model *m = &models[mi];
				int tp = tps[ti];
				int64_t w;
				const struct cal_series *s = NULL, *near = NULL;
				double best = INFINITY;
				struct cal_interp ip;
				bool seen = false;

				switch (kinds[ki]) {
				case CAL_ROPE:
					w = (int64_t)(m->heads + m->kv_heads) / tp * m->head_dim;
					break;
				case CAL_ACTIVATION:
					w = m->ff / tp;
					break;
				default:
					w = m->hidden;
					break;
				}
				for (size_t j = 0; j < n_done; j++)
					seen |= done[j] == w;
				if (seen || n_done == 64)
					continue;
				done[n_done++] = w;
				for (size_t si = 0; si < vid->n; si++) {
					const struct cal_series *t = &vid->s[si];
					double dist;

					if (t->op != kinds[ki] || strcmp(t->device, dev))
						continue;
					if (t->key[0] == w) {
						s = t;
						continue;
					}
					dist = fabs(log((double)t->key[0] / (double)w));
					if (dist < best) {
						best = dist;
						near = t;
					}
				}
				if (!s || !near)
					continue;
				rc = cal_interp_build(&ip, near, NULL, err);
				for (size_t i = 0; i < s->n && !rc; i++) {
					double x = s->x[i] * (double)w / (double)near->key[0], y;

					if (cal_interp_eval(&ip, &x, &y))
						rc = apes_add(&acc.a, y, s->y[i], err);
				}
				if (!rc)
					cal_interp_release(&ip);
			}
		if (!rc)
			rc = xs_row(rep, dev, &acc, err);
		apes_free(&acc.a);
	}
	return rc;
}

/* Legacy attention with prior context and decode: aiconfigurator's tables
 * for the same per-GPU heads predict Vidur's rows. */
static int xs_attention(const struct cal_data *aic, const struct cal_data *vid, const char *dev,
			struct cal_check_report *rep, struct ss_error *err)
{
	struct xacc acc[6];
	int rc = 0;

	memset(acc, 0, sizeof(acc));
	snprintf(acc[0].op, sizeof(acc[0].op), "attn_prefill:no_context");
	snprintf(acc[1].op, sizeof(acc[1].op), "attn_prefill:prior_context");
	snprintf(acc[2].op, sizeof(acc[2].op), "attn_prefill:prior_context,own_p0");
	snprintf(acc[3].op, sizeof(acc[3].op), "attn_prefill:prior_context,alt_share");
	snprintf(acc[4].op, sizeof(acc[4].op), "attn_decode");
	for (size_t si = 0; si < vid->n && !rc; si++) {
		const struct cal_series *s = &vid->s[si];
		const struct cal_series *a;
		struct cal_interp ip, own;
		double f;

		if ((s->op != CAL_ATTN_PREFILL && s->op != CAL_ATTN_DECODE) || strcmp(s->device, dev))
			continue;
		a = cal_data_attn(aic, dev, s->op, (int)s->key[0], (int)s->key[1], (int)s->key[2], &f);
		if (!a)
			continue;
		rc = cal_interp_build(&ip, a, NULL, err);
		if (rc)
			break;
		if (s->op == CAL_ATTN_DECODE) {
			for (size_t i = 0; i < s->n && !rc; i++) {
				double x[2] = { f * s->x[i * 2], s->x[i * 2 + 1] }, y;

				if (cal_interp_eval(&ip, x, &y))
					rc = apes_add(&acc[4].a, y, s->y[i], err);
			}
			cal_interp_release(&ip);
			continue;
		}
		rc = cal_interp_build(&own, s, NULL, err);
		if (rc) {
			cal_interp_release(&ip);
			break;
		}
		for (size_t i = 0; i < s->n && !rc; i++) {
			double p = s->x[i * 3], c = s->x[i * 3 + 1], b = f * s->x[i * 3 + 2];
			double pos = c * p + 0.5 * c * (c + 1.0);
			double se = 0.5 * (sqrt(8.0 * pos + 1.0) - 1.0), L = p + c;
			double x[3] = { 0.0, se, b }, x0[3] = { 0.0, c, b }, xf[3] = { 0.0, L, b };
			double xo[3] = { 0.0, c, s->x[i * 3 + 2] };
			double y, y0, yf, yo;

			if (!cal_interp_eval(&ip, x, &y))
				continue;
			if (p == 0.0) {
				rc = apes_add(&acc[0].a, y, s->y[i], err);
				continue;
			}
			rc = apes_add(&acc[1].a, y, s->y[i], err);
			/* the method alone: scaled by this setup's own no-context time
			 * of the same chunk */
			if (!rc && cal_interp_eval(&ip, x0, &y0) && cal_interp_eval(&own, xo, &yo))
				rc = apes_add(&acc[2].a, y / y0 * yo, s->y[i], err);
			/* alternative: the chunk's share of the whole prompt's time */
			if (!rc && cal_interp_eval(&ip, xf, &yf))
				rc = apes_add(&acc[3].a, yf * pos / (0.5 * L * (L + 1.0)), s->y[i], err);
		}
		cal_interp_release(&own);
		cal_interp_release(&ip);
	}
	for (int i = 0; i < 5; i++) {
		if (!rc)
			rc = xs_row(rep, dev, &acc[i], err);
		apes_free(&acc[i].a);
	}
	return rc;
}

/* Single-node all-reduce: custom all-reduce up to 8 MiB, else NCCL, as
 * the table picks it ("all_reduce"), and NCCL alone ("all_reduce:nccl"). */
static int xs_allreduce(const struct cal_data *aic, const struct cal_data *vid, const char *dev,
			struct cal_check_report *rep, struct ss_error *err)
{
	struct xacc acc, accn;
	int rc = 0;

	memset(&acc, 0, sizeof(acc));
	memset(&accn, 0, sizeof(accn));
	snprintf(acc.op, sizeof(acc.op), "all_reduce");
	snprintf(accn.op, sizeof(accn.op), "all_reduce:nccl");
	for (size_t si = 0; si < vid->n && !rc; si++) {
		const struct cal_series *s = &vid->s[si], *cu, *nc;
		struct cal_interp icu, inc;
		bool have_cu = false, have_nc = false;

		if (s->op != CAL_ALL_REDUCE || strcmp(s->device, dev) ||
		    cal_coll_kind_of(s) != CAL_COLL_OTHER)
			continue;
		cu = cal_data_collective(aic, dev, CAL_ALL_REDUCE, s->key[0], CAL_COLL_CUSTOM);
		nc = cal_data_collective(aic, dev, CAL_ALL_REDUCE, s->key[0], CAL_COLL_NCCL);
		if (cu) {
			rc = cal_interp_build(&icu, cu, NULL, err);
			have_cu = !rc;
		}
		if (nc && !rc) {
			rc = cal_interp_build(&inc, nc, NULL, err);
			have_nc = !rc;
		}
		for (size_t i = 0; i < s->n && !rc; i++) {
			double b = s->x[i], y;
			bool ok = false;

			if (have_nc && cal_interp_eval(&inc, &b, &y))
				rc = apes_add(&accn.a, y, s->y[i], err);
			if (have_cu && b <= 8.0 * 1024 * 1024)
				ok = cal_interp_eval(&icu, &b, &y);
			if (!ok && have_nc)
				ok = cal_interp_eval(&inc, &b, &y);
			if (ok && !rc)
				rc = apes_add(&acc.a, y, s->y[i], err);
		}
		if (have_cu)
			cal_interp_release(&icu);
		if (have_nc)
			cal_interp_release(&inc);
	}
	if (!rc)
		rc = xs_row(rep, dev, &acc, err);
	if (!rc)
		rc = xs_row(rep, dev, &accn, err);
	apes_free(&acc.a);
	apes_free(&accn.a);
	return rc;
}

int cal_check_cross_source(struct cal_store *st, const struct cal_check_opts *o,
			   const struct cal_check_model *models, size_t n_models,
			   const int *tps, size_t n_tps, struct cal_check_report *rep,
			   struct ss_error *err)
{
	struct cal_data aic, vid;
	char dev[16][64];
	size_t n_dev;
	int rc;

	cal_data_init(&aic);
	cal_data_init(&vid);
	rc = cal_data_load_store(&aic, st, 0, o ? o->device : NULL, ~0u, not_vidur, NULL, err);
	if (!rc)
		rc = cal_data_load_store(&vid, st, 0, o ? o->device : NULL, ~0u, only_vidur, NULL,
					 err);
	n_dev = rc ? 0 : vidur_devices(&vid, dev, 16);
	for (size_t i = 0; i < n_dev && !rc; i++) {
		rc = xs_gemm(&aic, &vid, dev[i], models, n_models, tps, n_tps, rep, err);
		if (!rc)
			rc = xs_elementwise(&vid, dev[i], models, n_models, tps, n_tps, rep, err);
		if (!rc)
			rc = xs_attention(&aic, &vid, dev[i], rep, err);
		if (!rc)
			rc = xs_allreduce(&aic, &vid, dev[i], rep, err);
	}
	if (!rc && rep->n)
		qsort(rep->rows, rep->n, sizeof(*rep->rows), cmp_row);
	cal_data_release(&aic);
	cal_data_release(&vid);
	return rc;
}

/* ---- JSON ------------------------------------------------------------------ */

static json_t *num_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

json_t *cal_check_report_json(const struct cal_check_report *rep)
{
	json_t *root = json_object();

	for (size_t i = 0; root && i < rep->n; i++) {
		const struct cal_check_row *r = &rep->rows[i];
		json_t *dev = json_object_get(root, r->device), *o = json_object();

		if (!dev) {
			dev = json_object();
			json_object_set_new(root, r->device, dev);
		}
		json_object_set_new(o, "mape_pct", num_or_null(r->mape_pct));
		json_object_set_new(o, "p90_ape_pct", num_or_null(r->p90_ape_pct));
		json_object_set_new(o, "n", json_integer((json_int_t)r->n));
		json_object_set_new(o, "n_outside", json_integer((json_int_t)r->n_outside));
		if (r->fit_n) {
			json_object_set_new(o, "fit_mape_pct", num_or_null(r->fit_mape_pct));
			json_object_set_new(o, "fit_p90_ape_pct", num_or_null(r->fit_p90_ape_pct));
			json_object_set_new(o, "fit_n", json_integer((json_int_t)r->fit_n));
		}
		if (isfinite(r->median_ratio))
			json_object_set_new(o, "median_ratio", json_real(r->median_ratio));
		if (isfinite(r->median_ape_pct))
			json_object_set_new(o, "median_ape_pct", json_real(r->median_ape_pct));
		if (isfinite(r->fit_median_ape_pct))
			json_object_set_new(o, "fit_median_ape_pct", json_real(r->fit_median_ape_pct));
		if (r->rl_all_n) {
			json_object_set_new(o, "from_dtype", json_string(r->from_dtype));
			json_object_set_new(o, "roofline_n", json_integer((json_int_t)r->rl_n));
			json_object_set_new(o, "roofline_median_ape_pct",
					    num_or_null(r->rl_median_ape_pct));
			json_object_set_new(o, "roofline_p90_ape_pct", num_or_null(r->rl_p90_ape_pct));
			json_object_set_new(o, "roofline_all_n", json_integer((json_int_t)r->rl_all_n));
			json_object_set_new(o, "roofline_all_median_ape_pct",
					    num_or_null(r->rl_all_median_ape_pct));
			json_object_set_new(o, "roofline_all_p90_ape_pct",
					    num_or_null(r->rl_all_p90_ape_pct));
		}
		json_object_set_new(dev, r->op, o);
	}
	return root;
}

int cal_check_write_json(const struct cal_check_report *rep, const char *path,
			 struct ss_error *err)
{
	json_t *root = cal_check_report_json(rep);
	char tmp[4096];
	int fd, rc = 0;

	if (!root)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= sizeof(tmp)) {
		json_decref(root);
		return ss_error_set(err, -ENAMETOOLONG, path, 0, "path too long");
	}
	fd = mkstemp(tmp);
	if (fd >= 0 && fchmod(fd, 0644)) {
		close(fd);
		unlink(tmp);
		fd = -1;
	}
	if (fd < 0) {
		rc = -errno;
		json_decref(root);
		return ss_error_set(err, rc, path, 0, "cannot create a temporary file: %s",
				    strerror(-rc));
	}
	if (json_dumpfd(root, fd, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(6)) ||
	    write(fd, "\n", 1) != 1 || fsync(fd)) {
		rc = ss_error_set(err, errno ? -errno : -EIO, tmp, 0, "write failed: %s",
				  strerror(errno ? errno : EIO));
		close(fd);
		unlink(tmp);
		json_decref(root);
		return rc;
	}
	json_decref(root);
	if (close(fd) || rename(tmp, path)) {
		rc = -errno;
		unlink(tmp);
		return ss_error_set(err, rc, path, 0, "cannot write: %s", strerror(-rc));
	}
	return 0;
}
