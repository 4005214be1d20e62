/* servesim — host terms from whole-step residuals (host-fit.h). */
#include "host-fit.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>

double host_fit_eval(const struct host_fit *f, double tokens, double n_emit, double layers)
{
	return f->coef_us[HOST_FIT_STEP] + f->coef_us[HOST_FIT_TOKEN] * tokens +
	       f->coef_us[HOST_FIT_EMIT] * n_emit + f->coef_us[HOST_FIT_LAYER] * layers;
}

static double regressor(const struct host_step_obs *o, int t)
{
	switch (t) {
	case HOST_FIT_STEP:
		return 1.0;
	case HOST_FIT_TOKEN:
		return o->tokens;
	case HOST_FIT_EMIT:
		return o->n_emit;
	default:
		return o->layers;
	}
}

/* Weighted least squares of the residuals (us) on the terms in mask;
 * the others held at 0.  -EDOM when singular. */
static int fit_subset(const struct host_step_obs *obs, size_t n, unsigned mask, double *coef,
		      double *chisq)
{
	int idx[HOST_FIT_TERMS], p = 0, rc = 0;
	gsl_matrix *X;
	gsl_vector *y, *w, *c;
	gsl_matrix *cov;
	gsl_multifit_linear_workspace *ws;

	memset(coef, 0, HOST_FIT_TERMS * sizeof(*coef));
	for (int t = 0; t < HOST_FIT_TERMS; t++)
		if (mask & (1u << t))
			idx[p++] = t;
	if (!p) {
		*chisq = 0.0;
		for (size_t i = 0; i < n; i++) {
			double r = (obs[i].wall_ms - obs[i].kernels_ms) * 1e3;

			*chisq += r * r / (obs[i].wall_ms * obs[i].wall_ms * 1e6);
		}
		return 0;
	}
	if ((size_t)p > n)
		return -EDOM;
	X = gsl_matrix_alloc(n, (size_t)p);
	y = gsl_vector_alloc(n);
	w = gsl_vector_alloc(n);
	c = gsl_vector_alloc((size_t)p);
	cov = gsl_matrix_alloc((size_t)p, (size_t)p);
	ws = gsl_multifit_linear_alloc(n, (size_t)p);
	if (!X || !y || !w || !c || !cov || !ws) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		double wall_us = obs[i].wall_ms * 1e3;

		for (int j = 0; j < p; j++)
			gsl_matrix_set(X, i, (size_t)j, regressor(&obs[i], idx[j]));
		gsl_vector_set(y, i, (obs[i].wall_ms - obs[i].kernels_ms) * 1e3);
		gsl_vector_set(w, i, 1.0 / (wall_us * wall_us));
	}
	{
		size_t rank;

		if (gsl_multifit_wlinear_tsvd(X, w, y, 1e-12, c, cov, chisq, &rank, ws) ||
		    rank < (size_t)p) {
			rc = -EDOM;
			goto out;
		}
	}
	for (int j = 0; j < p; j++)
		coef[idx[j]] = gsl_vector_get(c, (size_t)j);
out:
	gsl_multifit_linear_free(ws);
	gsl_matrix_free(cov);
	gsl_vector_free(c);
	gsl_vector_free(w);
	gsl_vector_free(y);
	gsl_matrix_free(X);
	return rc;
}

/* Non-negative least squares over the four terms: each subset of free
 * terms (the others held at 0), keep the feasible fit of least cost.  With
 * 16 subsets this is exact, and cheaper to read than an active-set
 * iteration.  -EDOM when no subset fits. */
static int nnls(const struct host_step_obs *obs, size_t n, double *best_coef, unsigned *best_mask)
{
	double best_chisq = INFINITY;
	bool found = false;

	for (unsigned mask = 0; mask < (1u << HOST_FIT_TERMS); mask++) {
		double coef[HOST_FIT_TERMS], chisq;
		bool feasible = true;

		if (fit_subset(obs, n, mask, coef, &chisq))
			continue;
		for (int t = 0; t < HOST_FIT_TERMS; t++)
			feasible &= coef[t] >= 0.0;
		/* a strict decrease: a term that does not lower the cost
		 * stays out (lower masks are tried first) */
		if (feasible && chisq < best_chisq * (1.0 - 1e-12)) {
			best_chisq = chisq;
			memcpy(best_coef, coef, sizeof(coef));
			*best_mask = mask;
			found = true;
		}
	}
	return found ? 0 : -EDOM;
}

int host_fit_run(const struct host_step_obs *obs, size_t n, struct host_fit *out,
		 struct ss_error *err)
{
	struct host_step_obs *rest = NULL;
	double loo = 0;

	memset(out, 0, sizeof(*out));
	/* three: the per-layer term needs steps of two depths, not a
	 * fourth step shape of its own */
	if (n < 3)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "host fit: %zu whole steps measured, expected at least 3", n);
	for (size_t i = 0; i < n; i++) {
		const struct host_step_obs *o = &obs[i];

		if (!(isfinite(o->tokens) && o->tokens >= 1 && isfinite(o->n_emit) && o->n_emit >= 0 &&
		      isfinite(o->layers) && o->layers >= 0 &&
		      isfinite(o->wall_ms) && o->wall_ms > 0 && isfinite(o->kernels_ms) &&
		      o->kernels_ms >= 0))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "host fit: step %zu: expected tokens >= 1, emitted rows >= 0, "
					    "layers >= 0, wall time > 0 and kernel time >= 0 (got %g, %g, "
					    "%g, %g ms, %g ms)", i, o->tokens, o->n_emit, o->layers,
					    o->wall_ms, o->kernels_ms);
	}
	{
		bool all_same = true;

		for (size_t i = 1; i < n; i++)
			all_same &= obs[i].tokens == obs[0].tokens && obs[i].n_emit == obs[0].n_emit;
		if (all_same)
			return ss_error_set(err, -EDOM, NULL, 0,
					    "host fit: every step has the same tokens and emitted rows; "
					    "expected several step shapes");
	}
	if (nnls(obs, n, out->coef_us, &out->free_mask))
		return ss_error_set(err, -EDOM, NULL, 0, "host fit: no fit of the steps");
	out->n = n;
	{
		double sb = 0, sa = 0, mx = 0;

		for (size_t i = 0; i < n; i++) {
			const struct host_step_obs *o = &obs[i];
			double before = (o->kernels_ms - o->wall_ms) / o->wall_ms;
			double after = (o->kernels_ms +
					host_fit_eval(out, o->tokens, o->n_emit, o->layers) * 1e-3 -
					o->wall_ms) / o->wall_ms;

			sb += before * before;
			sa += after * after;
			if (fabs(after) > mx)
				mx = fabs(after);
		}
		out->rms_rel_before = sqrt(sb / n);
		out->rms_rel_after = sqrt(sa / n);
		out->max_rel_after = mx;
	}
	/* leave one step out: fit the others, predict it */
	rest = malloc((n - 1) * sizeof(*rest));
	if (!rest)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct host_fit f = { 0 };
		const struct host_step_obs *o = &obs[i];
		double e;

		memcpy(rest, obs, i * sizeof(*rest));
		memcpy(rest + i, obs + i + 1, (n - 1 - i) * sizeof(*rest));
		if (nnls(rest, n - 1, f.coef_us, &f.free_mask))
			memset(f.coef_us, 0, sizeof(f.coef_us));
		e = (o->kernels_ms + host_fit_eval(&f, o->tokens, o->n_emit, o->layers) * 1e-3 -
		     o->wall_ms) / o->wall_ms;
		loo += e * e;
	}
	out->rms_rel_loo = sqrt(loo / n);
	free(rest);
	return 0;
}
