/* servesim — weighted least-squares fits of operator latency (fitting.h). */
#include "fitting.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>

int cal_fit_wls(struct cal_fit *f, const double *X, const double *y, size_t n, int p,
		struct ss_error *err)
{
	gsl_multifit_linear_workspace *ws = NULL;
	gsl_matrix *mx = NULL, *cov = NULL;
	gsl_vector *vy = NULL, *w = NULL, *c = NULL;
	double chisq = 0.0;
	size_t rank = 0;
	int rc = 0, st;

	memset(f, 0, sizeof(*f));
	if (p < 1 || p > CAL_FIT_MAX_P)
		return ss_error_set(err, -EINVAL, NULL, 0, "fit: %d features, expected 1..%d",
				    p, CAL_FIT_MAX_P);
	if (n <= (size_t)p)
		return ss_error_set(err, -EDOM, NULL, 0,
				    "fit: %zu points for %d features, need more points", n, p);
	mx = gsl_matrix_alloc(n, p);
	vy = gsl_vector_alloc(n);
	w = gsl_vector_alloc(n);
	c = gsl_vector_alloc(p);
	cov = gsl_matrix_alloc(p, p);
	ws = gsl_multifit_linear_alloc(n, p);
	if (!mx || !vy || !w || !c || !cov || !ws) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "fit: out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!(y[i] > 0.0) || !isfinite(y[i])) {
			rc = ss_error_set(err, -EDOM, NULL, 0,
					  "fit: latency %g at point %zu, expected > 0", y[i], i);
			goto out;
		}
		for (int j = 0; j < p; j++)
			gsl_matrix_set(mx, i, j, X[i * p + j]);
		gsl_vector_set(vy, i, y[i]);
		gsl_vector_set(w, i, 1.0 / (y[i] * y[i]));
	}
	/* Truncated SVD: directions with singular values below 1e-12 of the
	 * largest (collinear features, e.g. FLOPs and bytes along one GEMM
	 * line) are dropped instead of blowing up. */
	st = gsl_multifit_wlinear_tsvd(mx, w, vy, 1e-12, c, cov, &chisq, &rank, ws);
	if (st) {
		rc = ss_error_set(err, -EDOM, NULL, 0, "fit: %s", gsl_strerror(st));
		goto out;
	}
	f->p = p;
	f->n = n;
	/* chisq is the sum of squared relative residuals; its mean square
	 * estimates the relative variance of one measurement. */
	f->s2 = n > rank ? chisq / (double)(n - rank) : 0.0;
	f->tq = n > rank ? gsl_cdf_tdist_Pinv(0.975, (double)(n - rank)) : 0.0;
	if (!isfinite(f->tq))
		f->tq = 1.96;
	for (int i = 0; i < p; i++) {
		f->c[i] = gsl_vector_get(c, i);
		/* cov = (X^T W X)^-1 assumes unit relative variance; scale it. */
		for (int j = 0; j < p; j++)
			f->cov[i * p + j] = gsl_matrix_get(cov, i, j) * f->s2;
	}
out:
	gsl_multifit_linear_free(ws);
	gsl_matrix_free(mx);
	gsl_matrix_free(cov);
	gsl_vector_free(vy);
	gsl_vector_free(w);
	gsl_vector_free(c);
	return rc;
}

int cal_fit_nnls(struct cal_fit *f, const double *X, const double *y, size_t n, int p,
		 struct ss_error *err)
{
	double *sub = NULL, best = INFINITY;
	int rc = 0;

	memset(f, 0, sizeof(*f));
	if (p < 1 || p > CAL_FIT_MAX_P)
		return ss_error_set(err, -EINVAL, NULL, 0, "fit: %d features, expected 1..%d",
				    p, CAL_FIT_MAX_P);
	sub = malloc(n * (size_t)p * sizeof(*sub));
	if (!sub)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (unsigned mask = 1; mask < (1u << p); mask++) {
		int col[CAL_FIT_MAX_P], q = 0;
		struct cal_fit g;
		struct ss_error e2;
		double sse = 0.0;
		bool ok = true;

		for (int j = 0; j < p; j++)
			if (mask & (1u << j))
				col[q++] = j;
		if (n <= (size_t)q)
			continue;
		for (size_t i = 0; i < n; i++)
			for (int j = 0; j < q; j++)
				sub[i * (size_t)q + (size_t)j] = X[i * (size_t)p + (size_t)col[j]];
		if (cal_fit_wls(&g, sub, y, n, q, &e2))
			continue;
		for (int j = 0; j < q; j++)
			ok &= g.c[j] >= 0.0;
		if (!ok)
			continue;
		for (size_t i = 0; i < n; i++) {
			double r = (cal_fit_eval(&g, &sub[i * (size_t)q]) - y[i]) / y[i];

			sse += r * r;
		}
		if (!(sse < best))
			continue;
		best = sse;
		memset(f, 0, sizeof(*f));
		f->p = p;
		f->s2 = g.s2;
		f->tq = g.tq;
		f->n = g.n;
		for (int j = 0; j < q; j++) {
			f->c[col[j]] = g.c[j];
			for (int k = 0; k < q; k++)
				f->cov[col[j] * p + col[k]] = g.cov[j * q + k];
		}
	}
	free(sub);
	if (!isfinite(best))
		rc = ss_error_set(err, -EDOM, NULL, 0,
				  "fit: no non-negative fit of %d features to %zu points", p, n);
	return rc;
}

void cal_fit_predict(const struct cal_fit *f, const double *x, double *y, double *lo,
		     double *hi)
{
	double yy = 0.0, se2 = 0.0, half;

	if (f->p == 0) {
		*y = *lo = *hi = NAN;
		return;
	}
	{
		gsl_vector_const_view vx = gsl_vector_const_view_array(x, f->p);
		gsl_vector_const_view vc = gsl_vector_const_view_array(f->c, f->p);
		gsl_matrix_const_view vcov = gsl_matrix_const_view_array(f->cov, f->p, f->p);
		double yerr = 0.0;

		if (gsl_multifit_linear_est(&vx.vector, &vc.vector, &vcov.matrix, &yy, &yerr)) {
			yy = cal_fit_eval(f, x);
			yerr = 0.0;
		}
		se2 = yerr * yerr;
	}
	/* A new measurement scatters by s2 relative to the true value. */
	half = f->tq * sqrt(se2 + f->s2 * yy * yy);
	*y = yy;
	*lo = yy - half;
	*hi = yy + half;
}

void cal_fit_add(struct cal_fit *acc, const struct cal_fit *f, double scale)
{
	if (f->p == 0)
		return;
	if (acc->p == 0) {
		memset(acc, 0, sizeof(*acc));
		acc->p = f->p;
	}
	for (int i = 0; i < f->p && i < acc->p; i++)
		acc->c[i] += scale * f->c[i];
	acc->n += f->n;
}
