/* servesim — regression models of operator latency (GSL least squares).
 *
 * Each operator's latency is modelled as a linear function of a few
 * physically meaningful features (cal_features()), fitted by weighted least
 * squares with weights 1/y^2, i.e. minimising the *relative* error, which
 * keeps microsecond kernels and 100 ms kernels on an equal footing:
 *
 *   gemm          [1, GFLOP, MB moved]              GFLOP = 2mnk/1e9, MB = 2(nk + mk + mn)/1e6
 *   attn_prefill  [1, k-tokens, M causal positions] per request c query tokens after p cached:
 *                                                   tokens = B c, positions = B (c p + c(c+1)/2)
 *   attn_decode   [1, batch, k KV tokens read]      KV tokens = B L
 *   element-wise  [1, M elements]                   tokens x width
 *   collectives   [1, MB]                           message bytes
 *   host overhead [1, batch]
 *
 * A fit gives a prediction and a 95% prediction interval: the standard error
 * of the fitted value (gsl_multifit_linear_est with the parameter covariance
 * scaled by the residual variance) combined with the residual scatter of a
 * new measurement (relative, so it scales with the prediction), times the
 * Student t quantile for the fit's degrees of freedom.
 *
 * Library code: never prints; GSL's error handler must be off (the CLI and
 * the tests turn it off); every GSL status is checked.
 */
#ifndef SS_CAL_FITTING_H
#define SS_CAL_FITTING_H

#include <stdbool.h>
#include <stddef.h>

#include "ss-error.h"

#define CAL_FIT_MAX_P 5

struct cal_fit {
	int p;                          /* features, 0 = no fit */
	double c[CAL_FIT_MAX_P];        /* coefficients, ms per feature unit */
	double cov[CAL_FIT_MAX_P * CAL_FIT_MAX_P]; /* parameter covariance, ms^2 (scaled by s2) */
	double s2;                      /* residual variance of the relative error (dimensionless) */
	double tq;                      /* Student t 0.975 quantile at the fit's dof */
	size_t n;                       /* points fitted */
};

/* Weighted (1/y^2) least squares of y on the n x p row-major design X.
 * Needs n > p and y > 0.  (Rank-deficient designs are solved by GSL's SVD
 * with the dependent directions dropped.) */
int cal_fit_wls(struct cal_fit *f, const double *X, const double *y, size_t n, int p,
		struct ss_error *err);

/* The same with every coefficient >= 0 (a cost term of physical meaning
 * cannot be negative): every subset of free features is fitted by
 * cal_fit_wls and the feasible fit of least weighted squared error kept,
 * the others held at 0 (exact for p <= CAL_FIT_MAX_P: 2^p - 1 fits).  f's
 * covariance is the kept subset's (0 for held features).  -EDOM when no
 * subset gives a feasible fit with n > its features. */
int cal_fit_nnls(struct cal_fit *f, const double *X, const double *y, size_t n, int p,
		 struct ss_error *err);

/* The fitted value at features x (ms); cheap, for hot paths. */
static inline double cal_fit_eval(const struct cal_fit *f, const double *x)
{
	double y = 0.0;

	for (int i = 0; i < f->p; i++)
		y += f->c[i] * x[i];
	return y;
}

/* Prediction at x with its 95% prediction interval [*lo, *hi] (ms). */
void cal_fit_predict(const struct cal_fit *f, const double *x, double *y, double *lo,
		     double *hi);

/* Sum of two fits over the same features (coefficients add; the interval
 * of a sum is not tracked). */
void cal_fit_add(struct cal_fit *acc, const struct cal_fit *f, double scale);

#endif
