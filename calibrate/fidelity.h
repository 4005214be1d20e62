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
	/* Cross-GPU (cal_check_cross_gpu): the reference's store dtype
	 * whose grid predicted the row ("" when the reference has none), and
	 * the roofline alone on the GPU: on the points the scaled table
	 * scored (rl_n of them) and on every point (rl_all_n); NAN
	 * otherwise. */
	char from_dtype[16];
	size_t rl_n, rl_all_n;
	double rl_median_ape_pct, rl_p90_ape_pct;
	double rl_all_median_ape_pct, rl_all_p90_ape_pct;
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

/* Cross-GPU within one architecture family (issue 33, docs/validation.md
 * "AMD Instinct"): every 3-D GEMM measurement of device `to` predicted from
 * the GEMM grid of device `from` the table model would take for it (the
 * same store dtype; else, for quantised weights, the first of
 * cal_gemm_dtype_for_weights's order `from` has, as for --weight-dtype
 * fp8: fp8 from fp8_block; else a 16-bit one for a 16-bit series), through
 * the interpolator (fit prior + grid) of all of from's points, times the
 * ratio of the roofline's time for that GEMM on `to` and on `from` -- the
 * scaled cost model's scaling of a GEMM (sim/cost-scaled.c).  Points
 * outside from's grid are counted, not scored; from's fit, scaled the
 * same way, is scored on every point, and so is the roofline on `to`
 * alone (and on the scored points apart).  Rows by the classes of
 * cal_gemm_class_of: "gemm.FAMILY.DTYPE:CLASS" and ":all", device `to`.
 *
 * roofline() gives the roofline's time, ms, of one GEMM of store dtype
 * dtype, m rows of an n x k weight, on GPU gpu (from or to): 0, -ENOTSUP
 * when it cannot price that dtype (the series is then counted outside,
 * unscored), or another negative errno with err set (which ends the
 * check).  The caller supplies it so that calibrate/ need not link the
 * cost models. */
typedef int (*cal_gemm_roofline_fn)(void *ctx, const char *gpu, const char *dtype, double m,
				    double n, double k, double *ms, struct ss_error *err);

struct cal_cross_gpu {
	const char *from, *to;     /* device names of the store, different */
	cal_gemm_roofline_fn roofline;
	void *ctx;
};

/* -ENOENT with err set when either device has no 3-D GEMM measurements in
 * the store. */
int cal_check_cross_gpu(struct cal_store *st, const struct cal_cross_gpu *x,
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
