/* servesim — fidelity of the measured cost models, measured
 * (`servesim calibrate check`, docs/cost-models.md).
 *
 * k-fold hold-out: every series of a store (grid.h) has its points split
 * into k folds by a hash of the series and the point's coordinates (so the
 * assignment does not depend on row order); for each fold the interpolator
 * (fit prior + grid) is rebuilt from the other k - 1 folds and predicts the
 * held-out points that lie inside the remaining grid (a held-out node is
 * bridged by its nearest remaining neighbours: the honest measure of how
 * well the grid interpolates between its nodes).  Points outside the
 * remaining grid (grid edges, the edge of a triangular batch x length
 * table) are counted, not scored.  The same folds score the regression fit
 * on every held-out point.
 *
 * Cross-source: the aiconfigurator-family measurements of a GPU (every
 * series whose source family is not "vidur") predict Vidur's measurements
 * of the same GPU: per-layer GEMMs of given model shapes at given TP,
 * element-wise kernels (by width scaling from the nearest other measured
 * width: Vidur's own rows, leave one width out), legacy prefill attention
 * with prior context (the equivalent-prompt method), legacy decode
 * attention, and single-node all-reduce.
 *
 * Errors are absolute percentage errors |predicted - measured| / measured;
 * MAPE is their mean, p90 their 90th percentile (nearest rank).
 *
 * (Implemented in check.c; the header is not called check.h because that
 * name would shadow the Check unit-test framework's <check.h> in every
 * test that has this directory on its include path.)
 */
#ifndef SS_CAL_FIDELITY_H
#define SS_CAL_FIDELITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ss-error.h"
#include "store.h"

struct cal_check_opts {
	int folds;                 /* k >= 2 (5 by default) */
	const char *device;        /* only this device; NULL = every device */
};

struct cal_check_row {
	char device[64];
	char op[64];               /* operator; "op.family" for a secondary source
				    * family of the same operator (e.g. "gemm.vidur") */
	size_t n;                  /* points scored */
	size_t n_outside;          /* held-out points outside the remaining grid */
	double mape_pct, p90_ape_pct;
	size_t fit_n;              /* points scored for the fit (k-fold: all held out) */
	double fit_mape_pct, fit_p90_ape_pct;   /* NAN when not applicable */
	double median_ratio;       /* cross-source: median predicted / measured; NAN otherwise */
	/* Shape-class hold-out: median absolute percentage error of the
	 * table and of the fit, %; NAN otherwise. */
	double median_ape_pct, fit_median_ape_pct;
};

struct cal_check_report {
	struct cal_check_row *rows;
	size_t n, cap;
};

void cal_check_report_init(struct cal_check_report *rep);
void cal_check_report_release(struct cal_check_report *rep);

/* k-fold hold-out error per (device, operator, source family). */
int cal_check_kfold(struct cal_store *st, const struct cal_check_opts *o,
		    struct cal_check_report *rep, struct ss_error *err);

/* Leave one GEMM shape class out (issue 33, docs/validation.md "AMD
 * Instinct"): a GEMM's class is its (n, k) pair's aspect -- wide (n >= 2k:
 * up projections), narrow (2n <= k: down projections), square between --
 * by its weight size n x k: s (< 2^22 elements), m (< 2^25), l.  Every 3-D
 * GEMM series has each class it holds predicted in turn by the
 * interpolator (fit prior + grid) rebuilt from its other classes; rows
 * "gemm.FAMILY.DTYPE:CLASS" and "gemm.FAMILY.DTYPE:all", with medians. */
#define CAL_GEMM_CLASS_COUNT 9
int cal_gemm_class_of(int64_t n, int64_t k);
/* "wide-s" .. "narrow-l"; "?" out of range. */
const char *cal_gemm_class_name(int c);
int cal_check_gemm_classes(struct cal_store *st, const struct cal_check_opts *o,
			   struct cal_check_report *rep, struct ss_error *err);

/* A model whose per-layer shapes the cross-source check predicts. */
struct cal_check_model {
	char name[64];
	int hidden, heads, kv_heads, head_dim, ff;
	bool gated;
};

/* Cross-source check for the models at each tp (o->device limits the
 * devices; folds is unused). */
int cal_check_cross_source(struct cal_store *st, const struct cal_check_opts *o,
			   const struct cal_check_model *models, size_t n_models,
			   const int *tps, size_t n_tps, struct cal_check_report *rep,
			   struct ss_error *err);

/* The report as {device: {operator: {mape_pct, p90_ape_pct, n, ...}}}
 * (transfer full; NULL when out of memory). */
typedef struct json_t json_t;
json_t *cal_check_report_json(const struct cal_check_report *rep);
/* The same, written to a temporary file and renamed over path. */
int cal_check_write_json(const struct cal_check_report *rep, const char *path,
			 struct ss_error *err);

#endif
