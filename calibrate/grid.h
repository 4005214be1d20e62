/* servesim — interpolation over measured operator grids.
 *
 * Three layers, each usable alone:
 *
 * 1. struct cal_grid: an N-dimensional rectilinear grid of values with
 *    holes (cells nobody measured), interpolated multilinearly.  Callers pass
 *    coordinates and values already transformed (the interpolators below
 *    use log coordinates and log latency, i.e. piecewise power laws).  A
 *    query is evaluated axis by axis, last axis first: along each axis the
 *    two nearest nodes *that can themselves be evaluated* bracket the query,
 *    so a hole (a held-out point, a shape nobody measured) is bridged by its
 *    nearest measured neighbours along the last axis that has them, and a
 *    query outside the measured region (beyond an axis, or in the missing
 *    triangle of a batch x length table) is reported as outside.  On a
 *    complete grid this is exactly multilinear interpolation.
 *
 * 2. struct cal_series / cal_data / cal_interp: measurements from
 *    calibration stores grouped into series (rows of one operator that
 *    share everything but their grid coordinates), and the interpolator of
 *    one series: its regression fit (fitting.h) used as a prior, and the
 *    grid of log(measured / fit) over log coordinates.  Interpolating the
 *    ratio to a physical model rather than raw latency makes the
 *    interpolant follow the model's shape between nodes (see
 *    docs/cost-models.md for the hold-out errors with and without it).
 *
 * 3. struct cal_ptab: a fast piecewise-linear table of y(x) for hot paths,
 *    sampled from any evaluator at every measured node and at 16 points per
 *    octave, with a constant-time bucket index (no logarithms at query
 *    time).  It reproduces the evaluator exactly at the breakpoints and
 *    deviates from a power law between them by less than 0.1%.
 *
 * Built on them: a model's operators priced from measured series
 * (op-plan.h) and the caches beside the stores (store-cache.h).
 *
 * Library code: no printing, no globals; errors fill struct ss_error.
 */
#ifndef SS_CAL_GRID_H
#define SS_CAL_GRID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fitting.h"
#include "ss-error.h"
#include "store.h"

/* ---- 1. grids ---------------------------------------------------------- */

#define CAL_GRID_MAX_DIM 3

struct cal_grid {
	int ndim;
	int n[CAL_GRID_MAX_DIM];        /* nodes per axis */
	double *axis[CAL_GRID_MAX_DIM]; /* node coordinates (transformed), ascending */
	double *v;                      /* values at nodes, row-major (last axis fastest);
					 * NAN where nothing was measured */
	size_t cells;                   /* product of n[] */
};

/* Build from n points: t holds n x ndim coordinates, v n values (both
 * transformed).  Points at the same node are averaged. */
int cal_grid_build(struct cal_grid *g, int ndim, const double *t, const double *v, size_t n,
		   struct ss_error *err);
void cal_grid_release(struct cal_grid *g);
/* Interpolate at t; false when t is outside the measured region. */
bool cal_grid_eval(const struct cal_grid *g, const double *t, double *v);

/* ---- 2. measurement series and their interpolators ----------------------- */

/* Grid coordinates per operator, in natural units (axis order: the last
 * axis is the one holes are bridged along first):
 *   gemm (grid)         m, n, k           one series per variant and dtype
 *   gemm (vidur:* rows) m                 one series per (n, k): key[0..1]
 *   attn_prefill        kv_len, q_len, batch   key = heads, kv_heads, head_dim
 *                       (kv_len is transformed as log(1 + kv_len))
 *   attn_decode         batch, kv_len     key = heads, kv_heads, head_dim
 *   element-wise        tokens            key[0] = width
 *   collectives, kv_copy bytes            key[0] = num_gpus
 *   host_overhead       batch             key[0] = tp; variant = part
 *   lora                tokens, adapters  key = (d_out, d_in, rank) */
#define CAL_SERIES_MAX_DIM 3

struct cal_series {
	enum cal_op op;
	int store;                 /* index of the store in the caller's list (preference) */
	char device[64];
	char family[32];           /* source family: first component of the rows' source
				    * path ("aiconfigurator", "vidur"), or the variant's
				    * prefix before ':' ; "" when neither is known */
	char variant[64];
	char dtype[16];
	int64_t key[3];            /* see above; CAL_NA where unused */
	int ndim;
	size_t n, cap;
	double *x;                 /* n x ndim coordinates, natural units */
	double *y;                 /* latency of one call, ms */
};

struct cal_data {
	struct cal_series *s;
	size_t n, cap;
	size_t last[CAL_OP_COUNT]; /* per operator: series its previous row went to */
	/* The family of the previous row's source and variant: rows come
	 * series by series, so it rarely changes (saves two strstr a row). */
	char last_source[256], last_variant[64], last_family[32];
	int64_t head_dim_only;      /* > 0: load only attention rows of this head_dim */
	/* Per operator, over the rows that carry an energy (or a power):
	 * their energy, J, and their latency, ms; average power =
	 * energy_j / (energy_ms / 1000). */
	double energy_j[CAL_OP_COUNT], energy_ms[CAL_OP_COUNT];
};

/* Optional row filter for loading: return false to skip a row. */
typedef bool (*cal_row_filter)(void *ctx, const struct cal_meas *m);

void cal_data_init(struct cal_data *d);
void cal_data_release(struct cal_data *d);
/* Add one measurement (rows without a positive latency, or with shape fields
 * missing for their operator, are skipped: returns 0 either way). */
int cal_data_add(struct cal_data *d, int store_idx, const struct cal_meas *m,
		 struct ss_error *err);
/* Read every row of device (NULL = all) whose op bit is set in op_mask
 * (bit 1u << op; ~0u = all) from an open store, or from each store path in
 * order (store_idx = position in the list). */
int cal_data_load_store(struct cal_data *d, struct cal_store *st, int store_idx,
			const char *device, unsigned op_mask, cal_row_filter filt, void *ctx,
			struct ss_error *err);
int cal_data_load(struct cal_data *d, const char *const *stores, int n_stores,
		  const char *device, unsigned op_mask, cal_row_filter filt, void *ctx,
		  struct ss_error *err);

/* Range of coordinate d over the series' points (natural units). */
void cal_series_range(const struct cal_series *s, int d, double *lo, double *hi);
/* Distinct values of coordinate d, ascending, into out (at most max);
 * returns how many there are. */
size_t cal_series_nodes(const struct cal_series *s, int d, double *out, size_t max);
/* Regression features of the series' operator at natural coordinates x
 * (fitting.h lists them); returns the number of features. */
int cal_series_features(const struct cal_series *s, const double *x, double *f);
/* Transform of coordinate d into grid space (log, or log1p for kv_len). */
double cal_series_tx(const struct cal_series *s, int d, double x);
/* Source-family tests used by selection and the checks. */
bool cal_series_is_16bit(const struct cal_series *s);
/* "vidur:attn_pre_proj" -> "attn_pre_proj"; variant without ':' unchanged. */
const char *cal_variant_part(const char *variant);

/* Interpolator of one series: fit (prior) + grid of log(y / fit). */
struct cal_interp {
	const struct cal_series *s;    /* (transfer none) */
	struct cal_fit fit;            /* on the included points; p = 0 when too few */
	bool prior;                    /* grid holds log(y / fit) (fit positive at every node) */
	struct cal_grid grid;
	double *nat[CAL_GRID_MAX_DIM]; /* grid nodes per axis, natural units */
};

/* Build from the series' points, leaving out those with skip[i] != 0 (skip
 * may be NULL). */
int cal_interp_build(struct cal_interp *ip, const struct cal_series *s,
		     const unsigned char *skip, struct ss_error *err);
void cal_interp_release(struct cal_interp *ip);
/* Interpolated latency (ms) at natural coordinates x; false outside the
 * measured region.  Axis by axis, log(y / fit) is interpolated linearly in
 * the log coordinate and the result clamped between the two neighbouring
 * nodes' latencies, so it never leaves their range (monotone between nodes
 * where the measurements are). */
bool cal_interp_eval(const struct cal_interp *ip, const double *x, double *y);
/* The fit's latency (ms) at x (NAN without a fit). */
double cal_interp_fit(const struct cal_interp *ip, const double *x);
/* Grid nodes of axis d in natural units, ascending, into out (at most
 * max); returns how many the axis has. */
size_t cal_interp_nodes(const struct cal_interp *ip, int d, double *out, size_t max);

/* ---- selection of series for a model's shapes ----------------------------- */

/* The 3-D GEMM series (16-bit, not a vidur:* line) of device: the one from
 * the first store that has one, the largest there.  NULL if none. */
const struct cal_series *cal_data_gemm_grid(const struct cal_data *d, const char *device);
/* The 3-D GEMM series of device whose dtype is exactly dtype ("fp8",
 * "fp8_block"), chosen as cal_data_gemm_grid chooses.  NULL if none. */
const struct cal_series *cal_data_gemm_grid_dtype(const struct cal_data *d, const char *device,
						  const char *dtype);
/* A vidur:* GEMM line measured at exactly (n, k); NULL if none. */
const struct cal_series *cal_data_gemm_line(const struct cal_data *d, const char *device,
					    int64_t n, int64_t k);
/* The 16-bit line of the same k whose N is nearest n (in log N), within a
 * factor max_ratio (> 1) either way; NULL when none is.  For a GEMM one
 * line away from a measured one (a draft head's 32,000-row LM head beside
 * the target's 32,064), priced as that line scaled by n / N: at fixed m
 * and k both its FLOPs and its weight bytes are linear in N. */
const struct cal_series *cal_data_gemm_line_near(const struct cal_data *d, const char *device,
						 int64_t n, int64_t k, double max_ratio);
/* Attention series for per-GPU heads (hq, hkv, hd).  Exact head counts
 * first; otherwise a series with the same head_dim and GQA group size
 * hq/hkv whose KV heads divide hkv, with *factor = hkv / its kv_heads (the
 * model's batch counts as factor x as many rows).  Among candidates: the
 * first store, then the widest measured domain (product of the log spans of
 * its axes).  Rows from fp8 / sliding-window / eager variants are never
 * chosen.  NULL if none. */
const struct cal_series *cal_data_attn(const struct cal_data *d, const char *device,
				       enum cal_op op, int hq, int hkv, int hd, double *factor);
/* Element-wise series of op whose width is nearest to width in log
 * distance (first store first).  NULL if none. */
const struct cal_series *cal_data_width(const struct cal_data *d, const char *device,
					enum cal_op op, int64_t width);

enum cal_coll_kind {
	CAL_COLL_CUSTOM = 0,    /* vLLM custom all-reduce, CUDA-graph mode */
	CAL_COLL_NCCL,          /* NCCL (nccl-tests) */
	CAL_COLL_OTHER,         /* any other single-node source (e.g. Vidur's network profiles) */
	CAL_COLL_UNUSED,        /* eager-mode custom all-reduce, multi-node: never chosen */
};
enum cal_coll_kind cal_coll_kind_of(const struct cal_series *s);
/* Collective series of op for num_gpus of the given kind; NULL if none. */
const struct cal_series *cal_data_collective(const struct cal_data *d, const char *device,
					     enum cal_op op, int64_t num_gpus,
					     enum cal_coll_kind kind);

/* Fit on the points of s with keep(ctx, x) true (keep NULL = all). */
int cal_series_fit(const struct cal_series *s, bool (*keep)(void *ctx, const double *x),
		   void *ctx, struct cal_fit *f, struct ss_error *err);

/* ---- 3. fast piecewise-linear tables ------------------------------------ */

/* Buckets: x < 32 one per integer; above, 16 per octave.  Covers x < 2^64. */
#define CAL_PTAB_NBUCKET (32 + 59 * 16)

struct cal_ptab {
	int nrows;                 /* tables sharing one set of breakpoints */
	uint32_t n;                /* breakpoints */
	double *x;                 /* breakpoints, ascending */
	double *yb;                /* nrows x n x {value, slope to the next breakpoint} */
	double *lo, *hi;           /* per row: valid range [lo, hi]; lo > hi when empty */
	bool direct;               /* every breakpoint is a bucket's lower bound: the
				    * bucket is the segment, no search */
	uint32_t bucket[CAL_PTAB_NBUCKET]; /* last breakpoint <= the bucket's lower bound */
};

/* Evaluator for building: y of row at x; false where it cannot say. */
typedef bool (*cal_ptab_fn)(void *ctx, int row, double x, double *y);

/* Sample fn over [xlo, xhi] (xlo >= 1) at 16 points per octave (every
 * integer below 32) and at the extra nodes.  Each row's valid range is the
 * contiguous run of breakpoints, from its first success, where fn succeeds. */
int cal_ptab_build(struct cal_ptab *p, int nrows, double xlo, double xhi, const double *nodes,
		   size_t n_nodes, cal_ptab_fn fn, void *ctx, struct ss_error *err);
void cal_ptab_release(struct cal_ptab *p);

/* Bucket of x >= 1 whose integer part is i (of x < 1: i = 0). */
static inline unsigned cal_ptab_bucket_int(uint64_t i)
{
	int e;

	if (i < 32)
		return (unsigned)i;
	e = 63 - __builtin_clzll(i);
	return 32u + (unsigned)(e - 5) * 16u + (unsigned)((i >> (e - 4)) - 16u);
}

static inline unsigned cal_ptab_bucket(double x)
{
	return cal_ptab_bucket_int(x >= 1.0 ? (uint64_t)x : 0);
}

/* Segment of x (x within the table's breakpoints) in its bucket b. */
static inline uint32_t cal_ptab_index_in(const struct cal_ptab *p, unsigned b, double x)
{
	uint32_t i = p->bucket[b];

	if (p->direct)
		return i;
	while (i + 1 < p->n && p->x[i + 1] <= x)
		i++;
	return i;
}

/* Segment of x (x within the table's breakpoints). */
static inline uint32_t cal_ptab_index(const struct cal_ptab *p, double x)
{
	return cal_ptab_index_in(p, cal_ptab_bucket(x), x);
}

static inline double cal_ptab_at(const struct cal_ptab *p, int row, uint32_t i, double x)
{
	const double *e = p->yb + 2 * ((size_t)row * p->n + i);

	return e[0] + e[1] * (x - p->x[i]);
}

/* y(x) of row; false outside the row's range. */
static inline bool cal_ptab_eval(const struct cal_ptab *p, int row, double x, double *y)
{
	if (!(x >= p->lo[row] && x <= p->hi[row]))
		return false;
	*y = cal_ptab_at(p, row, cal_ptab_index(p, x), x);
	return true;
}

#endif
