/* servesim — the "table" cost model: measured per-operator latencies from
 * calibration stores, interpolated (docs/design.md section 4, docs/cost-models.md).
 *
 * init() reads the GPU's measurements (calibrate/op-plan.h: cal_plan_load),
 * picks the series that fit the model's shapes, and samples everything the
 * step needs into piecewise-linear tables (cal_ptab) over the one quantity
 * each operator depends on in a step (kept in a cache file beside the
 * stores, so a later run of the same configuration reads them instead:
 * "the table cache" below):
 *
 *   gemm         layers x (QKV + O + up + down) at m = step tokens
 *   lm_head      LM-head GEMM at n_emit rows + final norm at m tokens
 *   attn_decode  one table over KV length per measured batch size; a step
 *                averages the per-request times at its effective batch,
 *                (1/B) sum_i T(B, L_i), taken at the two measured batch
 *                sizes that bracket B and interpolated in log B
 *   attn_prefill the same over the equivalent prompt length of each chunk
 *                (the prompt whose causal attention has the chunk's key
 *                positions c p + c (c + 1) / 2)
 *   elementwise  layers x (2 norms, RoPE, activation, 2 residual adds) +
 *                the embedding, each from the nearest measured width at the
 *                equivalent token count (tokens x width / measured width)
 *   allreduce    (2 layers + 1) all-reduces of m x hidden x dtype bytes
 *                (vLLM custom all-reduce up to 8 MiB, else NCCL) and the
 *                logits all-gather at n_emit rows
 *   host         per-step CPU overhead at n_items requests
 *
 * A query outside a table is priced by the operator's regression fit
 * (calibrate/fitting.h), and counted in out_of_grid / out_of_grid_ns.
 * Operators without measurements come from an internal roofline instance,
 * whose power model also gives the energy: the roofline's average power for
 * the step times the table's duration.  step() is one pass over the items
 * plus a constant number of table lookups; it never allocates.
 */
#include "costmodel.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost-cache-int.h"
#include "cost-roofline-int.h"
#include "grid.h"
#include "lora-kernel.h"
#include "op-plan.h"
#include "store-cache.h"
#include "sstime.h"

#define CUSTOM_AR_MAX_BYTES (8.0 * 1024.0 * 1024.0)  /* vLLM CustomAllreduce max_size */

/* An attention operator over (batch, length). */
struct bank {
	bool ok;
	double f;                   /* model batch x f = measured batch (heads mapping) */
	double mult;                /* layers */
	struct cal_ptab rows;       /* one row per measured batch size, x = length */
	int bmax;                   /* largest measured batch size */
	int *r0, *r1;               /* per effective batch 1..bmax: bracketing rows (-1: none) */
	double *w;                  /* log-batch weight of r1 */
	struct cal_fit fit;         /* out of grid (cal_decode_fit / cal_prefill_fit) */
};

/* Memo of the table lookups that depend on one step quantity alone: the
 * token-level operators on the step's tokens, the LM head and logits
 * gather on its emitted rows, the host overhead on its request count.
 * Direct-mapped on the quantity's low bits, tagged with the quantity
 * itself (a step quantity is >= 1, so a tag of 0 is an empty entry).
 * Consecutive steps of an instance mostly share their batch size, so most
 * steps price these operators with one probe each instead of a table
 * search; the values and the order in which out-of-grid times are summed
 * are those of the lookups themselves, so results are bit-for-bit. */
#define MEMO_N 256u                 /* entries per memo, a power of two */
enum { MT_GEMM, MT_EW, MT_FNORM, MT_AR, MT_COUNT };   /* memo_tok.y */
enum { ME_LM, ME_AG, ME_COUNT };                      /* memo_emit.y */
struct memo_tok {
	double tok;                 /* tag: the step's tokens, 0 = empty */
	double y[MT_COUNT];         /* ms; 0 where that operator is not priced */
	uint8_t oog;                /* bit per y: priced by the fit, out of grid */
};
struct memo_emit {
	double emit;                /* tag: rows through the LM head */
	double y[ME_COUNT];         /* ms */
	uint8_t oog;
};
struct memo_host {
	double n;                   /* tag: requests in the step (at least 1) */
	double y;                   /* ms */
	bool oog;
};

/* Memo of everything of a step but its attention, on (tokens, emitted
 * rows, requests): the operators' times (ms) the step sums from the three
 * memos above, the out-of-grid count and time they add before the
 * attention and the host's after it, and the measured ones rounded to ns.
 * Direct-mapped on the tokens' low bits, tagged with all three (n_items +
 * 1, so 0 is an empty entry).  Filled by the very statements the step ran
 * before, in the same order, so results are bit-for-bit the same. */
struct memo_fixed {
	double tok, emit;           /* tags */
	uint64_t items1;            /* tag: n_items + 1, 0 = empty */
	double ms[COST_OP_COUNT];   /* 0 for the attention operators */
	uint32_t oog_n;             /* out of grid before the attention */
	double oog_ms;
	bool host_oog;              /* the host time is out of grid (added after) */
	/* ns[op] = (int64)(ms[op] x 1e6 + 0.5) of the measured operators but
	 * the attention (0 for the others) and ns_sum their sum, valid when
	 * ns_ok: each fits and so does the sum */
	bool ns_ok;
	int64_t ns[COST_OP_COUNT];
	int64_t ns_sum;
};

/* Memo of the decode bank's per-request terms at whole KV lengths: for
 * each row, v[L] is the term bacc_in_bucket adds for a request of length
 * L, y[2k] + y[2k + 1] (L - x[k]) of the row's segment k.  A decode's
 * length is the whole ctx + 1, and a run's requests come back to the same
 * lengths step after step, so a step adds two loads per request instead
 * of a bucket search and two interpolations: the same terms, summed in
 * the same order, so results are bit-for-bit those of the search.  A row
 * computes its terms in order of length, from its first whole length up
 * to the longest a step has asked for (rounded up to TERM_CHUNK), so one
 * comparison per request says whether its term is there; lengths above
 * TERM_MAX take the search.  Allocated after init (calloc: pages no length
 * reaches are never touched); built on lengths, not on the table cache's
 * contents, so the cache does not hold it. */
#define TERM_MAX 131072u            /* longest length memoised, tokens */
#define TERM_CHUNK 256u             /* lengths computed at a time */
struct term_row {
	double *v;                  /* ms (the rows' unit), over lengths 0 .. top */
	uint64_t done;              /* v[first .. done] computed; first - 1: none */
	uint64_t top;               /* longest length held: min(floor(hi), TERM_MAX) */
};
struct term_memo {
	double *term;               /* every row's v */
	struct term_row *row;       /* per row of the bank */
};

/* One attention bank at a step's batch size n: the bracketing measured
 * batch sizes' rows and their common length range (bacc_init; kept per
 * bank for the last n, which consecutive steps mostly share) ... */
struct bacc {
	const struct bank *b;
	const double *y0, *y1;      /* rows r0 and r1 of b->rows.yb */
	double beff, w, lo, hi;
	int r0, r1;
	uint32_t n;                 /* 0: not set */
	/* rows r0 and r1 of the term memo (NULL: none); a length L is
	 * within both rows' and inside [lo, hi] when L - vlo < vn */
	struct term_row *t0, *t1;
	uint64_t vlo, vn;
};

/* ... and the step's sums over the requests inside that range (s0, s1)
 * and the fit's over those outside (sout). */
struct bsum {
	double s0, s1, sout;
	uint32_t nin, nout;
};

/* Everything init sets here but rl and the memos is also written to and
 * read from the table cache (table_io below): a new field set by init
 * belongs there too, or a run from the cache would miss it. */
struct table {
	void *rl;                   /* roofline instance: fallback operators and power */
	bool measured[COST_OP_COUNT];
	double power_w[COST_OP_COUNT]; /* measured average power per operator, 0 = none */
	double layers;

	struct cal_ptab gemm;       /* all layers' GEMMs at m tokens, ms */
	double gemm_a, gemm_b;      /* fit: a + b m, ms */
	struct cal_ptab lm;         /* LM-head GEMM at n_emit rows */
	double lm_a, lm_b;
	struct cal_ptab fnorm;      /* final norm at m tokens */
	double fnorm_a, fnorm_b;
	struct bank pf, dec;
	struct cal_ptab ew;         /* all element-wise kernels of a step at m tokens */
	double ew_a, ew_b;
	bool tp_active;
	struct cal_ptab ar;         /* all all-reduces of a step at m tokens */
	double ar_bytes_per_tok;    /* hidden x dtype */
	double ar_n;                /* all-reduces per step */
	double ar_switch;           /* bytes: custom all-reduce at or below, NCCL above */
	double ar_a[2], ar_b[2];    /* fit per byte for one all-reduce: [custom, nccl] */
	struct cal_ptab ag;         /* logits all-gather at n_emit rows */
	double ag_bytes_per_emit;
	double ag_a, ag_b;          /* fit per byte */
	bool ag_ok;
	struct cal_ptab host;       /* host overhead at n_items */
	double host_a, host_b;
	/* the adapter kernels' fit (cal_plan.lora: ms a call, a segment, an
	 * MB of adapters, an MB of activations, a GFLOP), for the LoRA component; lora_ok false: not measured */
	double lora_c[CAL_LORA_TERMS];
	bool lora_ok;

	struct memo_tok mtok[MEMO_N];
	struct memo_emit memit[MEMO_N];
	struct memo_host mhost[MEMO_N];
	struct memo_fixed mfix[MEMO_N];
	/* The operators with power_w > 0, ascending: what
	 * cost_result_from_measured sums measured energy over (set after
	 * init, from power_w, whether built or read from the cache). */
	int powered[COST_OP_COUNT];
	uint32_t n_powered;
	/* The operators not measured, ascending: their times are the
	 * roofline's (set with powered). */
	int rl_ops[COST_OP_COUNT];
	uint32_t n_rl_ops;
	/* each bank at the last batch size a step priced it at (n = 0:
	 * none yet) */
	struct bacc pf_at, dec_at;
	struct term_memo dec_terms; /* the decode bank's (term NULL: none) */
};

/* Weight dtype of the measured layer GEMMs for cfg's weight dtype: NULL for
 * the model's own (16-bit) weights; "fp8" for --weight-dtype fp8 of a
 * dense model.  aiconfigurator's H100 tables have "fp8" (per-tensor
 * scales, W8A8: what vLLM runs for a per-tensor or per-channel fp8
 * checkpoint and TensorRT-LLM's gemm_quant_mode fp8, the mode of every FP8
 * dense row of the silicon set) and "fp8_block" (128 x 128 weight blocks,
 * DeepSeek-style checkpoints, the only fp8 GEMMs of AITER's MI300X
 * tables); both are fp8 weights, the per-tensor grid preferred where a
 * device has both (cal_gemm_dtype_for_weights, the plan's one choice;
 * sim/precision.h).  fp4 and MoE models have no measured layer GEMMs
 * (table_precision). */
static const char *table_gemm_dtype(const struct cost_config *cfg)
{
	const struct model_spec *m = cfg->model;

	if (cfg->weight_dtype == SS_DTYPE_FP8 && m->n_experts == 0 &&
	    ss_dtype_bytes(SS_DTYPE_FP8, m) != (double)m->dtype_bytes)
		return "fp8";
	return NULL;
}

static void model_shape(const struct cost_config *cfg, struct cal_shape *sh)
{
	const struct model_spec *m = cfg->model;
	int tp = cfg->tp;

	memset(sh, 0, sizeof(*sh));
	sh->layers = m->n_layers;
	sh->hidden = m->hidden;
	sh->heads = m->n_heads / tp;
	sh->kv_heads = m->n_kv_heads >= tp ? m->n_kv_heads / tp : 1;
	sh->head_dim = m->head_dim;
	sh->ff = m->intermediate / tp;
	sh->gated = m->mlp == MLP_GATED;
	sh->rope = m->pos_embeddings == 0;
	sh->layernorm = m->norm == NORM_LAYER;
	sh->vocab = m->vocab;
	sh->tp = tp;
	sh->dtype_bytes = m->dtype_bytes;
	sh->model_id = m->hf_id;
	sh->gemm_dtype = table_gemm_dtype(cfg);
}

/* ---- building tables ---------------------------------------------------- */

struct gemm_ctx {
	const struct cal_plan *p;
	int first, last;            /* GEMM ids summed */
	double mult;
};

static bool gemm_fn(void *ctx, int row, double m, double *y)
{
	const struct gemm_ctx *c = ctx;
	double sum = 0.0, v;

	(void)row;
	for (int g = c->first; g <= c->last; g++) {
		if (!cal_plan_gemm_eval(c->p, g, m, &v))
			return false;
		sum += v;
	}
	*y = c->mult * sum;
	return true;
}

/* m nodes of the GEMM series used by ids first..last, and their common
 * range. */
static size_t gemm_nodes(const struct cal_plan *p, int first, int last, double *nodes,
			 size_t max, double *lo, double *hi)
{
	size_t n = 0;

	*lo = 1.0;
	*hi = INFINITY;
	for (int g = first; g <= last; g++) {
		double l, h;

		cal_series_range(p->gemm[g].s, 0, &l, &h);
		if (l > *lo)
			*lo = l;
		if (h < *hi)
			*hi = h;
		n += cal_interp_nodes(p->gemm[g].ip, 0, nodes + n, max - n);
		if (n > max)
			n = max;
	}
	return n;
}

static int build_gemm(struct table *t, const struct cal_plan *p, int first, int last,
		      double mult, struct cal_ptab *tab, double *a, double *b,
		      struct ss_error *err)
{
	struct gemm_ctx c = { p, first, last, mult };
	double nodes[1024], lo, hi;
	size_t n = gemm_nodes(p, first, last, nodes, 1024, &lo, &hi);

	(void)t;
	*a = *b = 0.0;
	for (int g = first; g <= last; g++) {
		double ga, gb;

		cal_plan_gemm_linear(p, g, &ga, &gb);
		*a += mult * ga;
		*b += mult * gb;
	}
	return cal_ptab_build(tab, 1, lo, hi, nodes, n, gemm_fn, &c, err);
}

struct bank_ctx {
	const struct cal_plan_op *o;
	const double *bnode;
	bool prefill;
};

static bool bank_fn(void *ctx, int row, double len, double *y)
{
	const struct bank_ctx *c = ctx;
	double x[3];

	if (c->prefill) {
		x[0] = 0.0;
		x[1] = len;
		x[2] = c->bnode[row];
	} else {
		x[0] = c->bnode[row];
		x[1] = len;
	}
	return cal_interp_eval(&c->o->ip, x, y);
}

static void bank_release(struct bank *b)
{
	cal_ptab_release(&b->rows);
	free(b->r0);
	free(b->r1);
	free(b->w);
	memset(b, 0, sizeof(*b));
}

static int build_bank(struct bank *b, const struct cal_plan_op *o, bool prefill,
		      struct ss_error *err)
{
	int bd = prefill ? 2 : 0, ld = 1;   /* batch and length axes */
	double bnode[64], lnode[256], llo, lhi;
	struct bank_ctx c = { o, bnode, prefill };
	size_t nb, nl;
	int rc, j = 0;

	nb = cal_interp_nodes(&o->ip, bd, bnode, 64);
	nl = cal_interp_nodes(&o->ip, ld, lnode, 256);
	if (nb > 64 || nl > 256 || nb == 0)
		return ss_error_set(err, -E2BIG, NULL, 0,
				    "table: %zu batch sizes and %zu lengths in one attention series, "
				    "expected at most 64 and 256", nb, nl);
	cal_series_range(o->s, ld, &llo, &lhi);
	if (llo < 1.0)
		llo = 1.0;
	rc = cal_ptab_build(&b->rows, (int)nb, llo, lhi, lnode, nl, bank_fn, &c, err);
	if (rc)
		return rc;
	b->bmax = (int)llround(bnode[nb - 1]);
	b->r0 = malloc((b->bmax + 1) * sizeof(int));
	b->r1 = malloc((b->bmax + 1) * sizeof(int));
	b->w = malloc((b->bmax + 1) * sizeof(double));
	if (!b->r0 || !b->r1 || !b->w) {
		bank_release(b);
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	}
	for (int B = 0; B <= b->bmax; B++) {
		while (j + 1 < (int)nb && bnode[j + 1] <= B)
			j++;
		if (B < bnode[0]) {
			b->r0[B] = b->r1[B] = -1;
			b->w[B] = 0.0;
		} else if (B == bnode[j] || j + 1 >= (int)nb) {
			b->r0[B] = b->r1[B] = j;
			b->w[B] = 0.0;
		} else {
			b->r0[B] = j;
			b->r1[B] = j + 1;
			b->w[B] = (log(B) - log(bnode[j])) / (log(bnode[j + 1]) - log(bnode[j]));
		}
	}
	b->ok = true;
	b->f = o->f;
	b->mult = o->mult;
	b->fit = o->ip.fit;
	return 0;
}

struct ew_ctx {
	const struct cal_plan *p;
	bool final_norm;
};

static bool ew_fn(void *ctx, int row, double m, double *y)
{
	const struct ew_ctx *c = ctx;
	double sum = 0.0;

	(void)row;
	for (int e = 0; e < CAL_EW_COUNT; e++) {
		const struct cal_plan_op *o = c->final_norm ? &c->p->fnorm : &c->p->ew[e];
		double x = m * o->f, v;

		if (o->s) {
			if (!cal_interp_eval(&o->ip, &x, &v))
				return false;
			sum += o->mult * v;
		}
		if (c->final_norm)
			break;
	}
	*y = sum;
	return true;
}

static int build_ew(struct cal_ptab *tab, const struct cal_plan *p, bool final_norm,
		    struct ss_error *err)
{
	struct ew_ctx c = { p, final_norm };
	double nodes[2048], lo = 1.0, hi = INFINITY;
	size_t n = 0;

	for (int e = 0; e < CAL_EW_COUNT; e++) {
		const struct cal_plan_op *o = final_norm ? &p->fnorm : &p->ew[e];
		double l, h, tmp[512];
		size_t k;

		if (o->s) {
			cal_series_range(o->s, 0, &l, &h);
			if (l / o->f > lo)
				lo = l / o->f;
			if (h / o->f < hi)
				hi = h / o->f;
			k = cal_interp_nodes(&o->ip, 0, tmp, 512);
			for (size_t i = 0; i < k && i < 512 && n < 2048; i++)
				nodes[n++] = tmp[i] / o->f;
		}
		if (final_norm)
			break;
	}
	if (!(hi >= lo))
		return ss_error_set(err, -EDOM, NULL, 0,
				    "table: element-wise measurements share no token range");
	return cal_ptab_build(tab, 1, lo, hi, nodes, n, ew_fn, &c, err);
}

struct coll_ctx {
	const struct cal_plan *p;
	double bytes_per_x;         /* message bytes per unit of x */
	double mult;                /* collectives per step */
	double switch_bytes;
	bool gather;
};

/* One all-reduce of `bytes`: custom all-reduce up to the switch size when
 * measured there, else NCCL, else any other measured all-reduce. */
static bool allreduce_at(const struct cal_plan *p, double bytes, double switch_bytes, double *y)
{
	if (bytes <= switch_bytes && p->ar[CAL_COLL_CUSTOM].s &&
	    cal_interp_eval(&p->ar[CAL_COLL_CUSTOM].ip, &bytes, y))
		return true;
	if (p->ar[CAL_COLL_NCCL].s && cal_interp_eval(&p->ar[CAL_COLL_NCCL].ip, &bytes, y))
		return true;
	return p->ar[CAL_COLL_OTHER].s && cal_interp_eval(&p->ar[CAL_COLL_OTHER].ip, &bytes, y);
}

static bool coll_fn(void *ctx, int row, double x, double *y)
{
	const struct coll_ctx *c = ctx;
	double bytes = x * c->bytes_per_x, v;

	(void)row;
	if (c->gather) {
		if (c->p->ag.s) {
			if (!cal_interp_eval(&c->p->ag.ip, &bytes, &v))
				return false;
		} else if (!allreduce_at(c->p, 0.5 * bytes, c->switch_bytes, &v)) {
			/* no all-gather measured: an all-gather moves half an
			 * all-reduce's data */
			return false;
		}
	} else if (!allreduce_at(c->p, bytes, c->switch_bytes, &v)) {
		return false;
	}
	*y = c->mult * v;
	return true;
}

static int build_coll(struct cal_ptab *tab, const struct cal_plan *p, bool gather,
		      double bytes_per_x, double mult, double switch_bytes, struct ss_error *err)
{
	struct coll_ctx c = { p, bytes_per_x, mult, switch_bytes, gather };
	double nodes[1024], lo = INFINITY, hi = 0.0;
	size_t n = 0;

	for (int k = 0; k < 4; k++) {
		const struct cal_plan_op *o = k < 3 ? &p->ar[k] : &p->ag;
		double l, h, tmp[256], scale = gather && k < 3 ? 2.0 : 1.0;
		size_t m;

		if (!o->s || (gather && k < 3 && p->ag.s) || (!gather && k == 3))
			continue;
		cal_series_range(o->s, 0, &l, &h);
		if (l * scale / bytes_per_x < lo)
			lo = l * scale / bytes_per_x;
		if (h * scale / bytes_per_x > hi)
			hi = h * scale / bytes_per_x;
		m = cal_interp_nodes(&o->ip, 0, tmp, 256);
		for (size_t i = 0; i < m && i < 256 && n < 1023; i++)
			nodes[n++] = tmp[i] * scale / bytes_per_x;
	}
	nodes[n++] = switch_bytes / bytes_per_x * (gather ? 2.0 : 1.0);
	if (lo < 1.0)
		lo = 1.0;
	if (!(hi >= lo))
		return ss_error_set(err, -EDOM, NULL, 0, "table: collective sizes out of range");
	return cal_ptab_build(tab, 1, lo, hi, nodes, n, coll_fn, &c, err);
}

struct host_ctx {
	const struct cal_plan *p;
};

static bool host_fn(void *ctx, int row, double n, double *y)
{
	const struct host_ctx *c = ctx;
	double sum = 0.0, v;

	(void)row;
	for (int i = 0; i < CAL_HOST_PARTS; i++) {
		if (!c->p->host[i].s)
			continue;   /* a plan priced from one total has no other parts */
		if (!cal_interp_eval(&c->p->host[i].ip, &n, &v))
			return false;
		sum += v;
	}
	*y = sum;
	return true;
}

static int build_host(struct cal_ptab *tab, const struct cal_plan *p, struct ss_error *err)
{
	struct host_ctx c = { p };
	double nodes[1024], lo = 1.0, hi = INFINITY;
	size_t n = 0;

	for (int i = 0; i < CAL_HOST_PARTS; i++) {
		double l, h;

		if (!p->host[i].s)
			continue;
		cal_series_range(p->host[i].s, 0, &l, &h);
		if (l > lo)
			lo = l;
		if (h < hi)
			hi = h;
		n += cal_interp_nodes(&p->host[i].ip, 0, nodes + n, 256);
	}
	if (!(hi >= lo))
		return ss_error_set(err, -EDOM, NULL, 0, "table: host overheads share no batch range");
	return cal_ptab_build(tab, 1, lo, hi, nodes, n, host_fn, &c, err);
}

/* Everything init built but the roofline; t is zeroed but for t->rl. */
static void tables_release(struct table *t)
{
	void *rl = t->rl;

	cal_ptab_release(&t->gemm);
	cal_ptab_release(&t->lm);
	cal_ptab_release(&t->fnorm);
	bank_release(&t->pf);
	bank_release(&t->dec);
	cal_ptab_release(&t->ew);
	cal_ptab_release(&t->ar);
	cal_ptab_release(&t->ag);
	cal_ptab_release(&t->host);
	free(t->dec_terms.term);
	free(t->dec_terms.row);
	memset(t, 0, sizeof(*t));
	t->rl = rl;
}

static void table_release(void *priv)
{
	struct table *t = priv;

	if (t->rl && cost_roofline_ops.release)
		cost_roofline_ops.release(t->rl);
	free(t->rl);
	tables_release(t);
	t->rl = NULL;
}

/* ---- the table cache --------------------------------------------------------
 *
 * Building the tables (cal_plan_load's interpolation grids and fits, then
 * sampling them into cal_ptabs) was most of a run's start-up: callgrind,
 * a 2-request peer run, 58 of 79 million instructions.  A finished table
 * depends only on the stores, the GPU, the model's shape, tp and
 * custom_allreduce_max_mb, and on the code that built it, so it is kept in
 * a cache file beside the stores (calibrate/store-cache.h, cal_cache: keyed on all
 * of these and on this build) and read back byte for byte: a run from the
 * cache prices every step exactly (bit for bit) as a run that built it.
 *
 * table_io is the one description of the file, run both ways: writing a
 * table out and reading one in (cost-cache-int.h).  Every field init sets
 * must pass through it (the memos start empty and the roofline is built per
 * run).  Sizes and indices read are checked before use: a file that does
 * not parse is ignored and rebuilt. */

static void io_bank(struct tio *tio, struct bank *b)
{
	size_t n;

	cost_io_bool(tio, &b->ok);
	COST_IO(tio, b->f);
	COST_IO(tio, b->mult);
	cost_io_ptab(tio, &b->rows);
	COST_IO(tio, b->bmax);
	cost_io_fit(tio, &b->fit);
	if (tio->failed)
		return;
	if (tio->reading && (b->bmax < 0 || (size_t)b->bmax >= tio->left / 4)) {
		tio->failed = true;
		return;
	}
	n = b->ok ? (size_t)b->bmax + 1 : 0;
	cost_io_array(tio, (void **)&b->r0, n, sizeof(int));
	cost_io_array(tio, (void **)&b->r1, n, sizeof(int));
	cost_io_array(tio, (void **)&b->w, n, sizeof(double));
	if (tio->reading && !tio->failed)
		for (size_t i = 0; i < n; i++)
			if (b->r0[i] < -1 || b->r0[i] >= b->rows.nrows || b->r1[i] < -1 ||
			    b->r1[i] >= b->rows.nrows)
				tio->failed = true;
}

static void table_io(struct tio *tio, void *state)
{
	struct table *t = state;

	for (int op = 0; op < COST_OP_COUNT; op++)
		cost_io_bool(tio, &t->measured[op]);
	COST_IO(tio, t->power_w);
	COST_IO(tio, t->layers);
	cost_io_ptab(tio, &t->gemm);
	COST_IO(tio, t->gemm_a);
	COST_IO(tio, t->gemm_b);
	cost_io_ptab(tio, &t->lm);
	COST_IO(tio, t->lm_a);
	COST_IO(tio, t->lm_b);
	cost_io_ptab(tio, &t->fnorm);
	COST_IO(tio, t->fnorm_a);
	COST_IO(tio, t->fnorm_b);
	io_bank(tio, &t->pf);
	io_bank(tio, &t->dec);
	cost_io_ptab(tio, &t->ew);
	COST_IO(tio, t->ew_a);
	COST_IO(tio, t->ew_b);
	cost_io_bool(tio, &t->tp_active);
	cost_io_ptab(tio, &t->ar);
	COST_IO(tio, t->ar_bytes_per_tok);
	COST_IO(tio, t->ar_n);
	COST_IO(tio, t->ar_switch);
	COST_IO(tio, t->ar_a);
	COST_IO(tio, t->ar_b);
	cost_io_ptab(tio, &t->ag);
	COST_IO(tio, t->ag_bytes_per_emit);
	COST_IO(tio, t->ag_a);
	COST_IO(tio, t->ag_b);
	cost_io_bool(tio, &t->ag_ok);
	cost_io_ptab(tio, &t->host);
	COST_IO(tio, t->host_a);
	COST_IO(tio, t->host_b);
	COST_IO(tio, t->lora_c);
	cost_io_bool(tio, &t->lora_ok);
}

/* Does every operator marked measured have the tables step() reads? */
static bool tables_complete(const struct table *t)
{
	const bool *m = t->measured;

	return (!m[COST_OP_GEMM] || t->gemm.n) &&
	       (!m[COST_OP_LM_HEAD] || (t->lm.n && t->fnorm.n)) &&
	       (!m[COST_OP_ATTN_PREFILL] || (t->pf.ok && t->pf.rows.n)) &&
	       (!m[COST_OP_ATTN_DECODE] || (t->dec.ok && t->dec.rows.n)) &&
	       (!m[COST_OP_ELEMENTWISE] || t->ew.n) &&
	       (!m[COST_OP_ALLREDUCE] || !t->tp_active || (t->ar.n && t->ag.n)) &&
	       (!m[COST_OP_HOST] || t->host.n);
}

/* Fill t's tables from the cache; false (t's tables released) when there
 * is none or it does not parse. */
static bool table_cache_load(struct table *t, const struct cal_cache *c)
{
	if (cost_cache_load(c, table_io, t) && tables_complete(t))
		return true;
	tables_release(t);
	return false;
}

/* The roofline every measured model carries for fallback and power. */
static int roofline_new(void **out, const struct cost_config *cfg, const char *who,
			double imbalance, struct ss_error *err)
{
	struct ss_params p;
	char spec[64] = "roofline";
	void *rl;
	int rc;

	*out = NULL;
	/* the routed experts' imbalance (expert parallelism) is the
	 * roofline's: the table prices an MoE model's GEMMs with it */
	if (imbalance != 1.0)
		snprintf(spec, sizeof(spec), "roofline:expert_imbalance=%.17g", imbalance);
	rc = ss_params_parse(&p, "--cost-model", spec, true, err);
	if (rc)
		return rc;
	rl = calloc(1, cost_roofline_ops.priv_size);
	if (!rl)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	rc = cost_roofline_ops.init(rl, cfg, &p, err);
	if (rc) {
		free(rl);
		if (err && err->msg[0]) {
			char msg[sizeof(err->msg)];

			snprintf(msg, sizeof(msg), "%s", err->msg);
			/* say which model failed: the roofline's own message names itself */
			ss_error_set(err, rc, NULL, 0, "--cost-model %s: %s", who, msg);
		}
		return rc;
	}
	*out = rl;
	return 0;
}

/* The term memo of bank b: each row's array over whole lengths 0 .. top,
 * none computed.  -ENOMEM when it cannot be had. */
static int term_memo_init(struct term_memo *m, const struct bank *b, struct ss_error *err)
{
	const struct cal_ptab *rows = &b->rows;
	size_t n = 0;

	memset(m, 0, sizeof(*m));
	if (!b->ok || rows->nrows <= 0)
		return 0;
	m->row = calloc((size_t)rows->nrows, sizeof(*m->row));
	if (!m->row)
		goto nomem;
	for (int r = 0; r < rows->nrows; r++) {
		struct term_row *tr = &m->row[r];
		double hi = rows->hi[r] < TERM_MAX ? rows->hi[r] : TERM_MAX;
		double first = ceil(rows->lo[r]);

		if (first < 1.0)
			first = 1.0;
		/* an empty row (lo > hi, or no whole length in it) holds
		 * length 0 alone, which no request has */
		tr->top = rows->lo[r] <= rows->hi[r] && first <= hi ? (uint64_t)hi : 0;
		tr->done = tr->top ? (uint64_t)first - 1 : 0;
		n += tr->top + 1;
	}
	m->term = calloc(n, sizeof(*m->term));
	if (!m->term)
		goto nomem;
	n = 0;
	for (int r = 0; r < rows->nrows; r++) {
		m->row[r].v = m->term + n;
		n += m->row[r].top + 1;
	}
	return 0;
nomem:
	free(m->row);
	memset(m, 0, sizeof(*m));
	return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
}

static void table_powered(struct table *t)
{
	t->n_powered = t->n_rl_ops = 0;
	for (int op = 0; op < COST_OP_COUNT; op++) {
		if (t->power_w[op] > 0.0)
			t->powered[t->n_powered++] = op;
		if (!t->measured[op])
			t->rl_ops[t->n_rl_ops++] = op;
	}
}

/* Precision: the layers' GEMMs with fp8 weights come from the stores'
 * fp8 GEMM grid (table_gemm_dtype; the tables were built from it, and
 * measured[COST_OP_GEMM] is false when the store has none), any other
 * quantised weights (fp4) from the roofline; decode attention over a
 * quantised KV cache is the roofline's too (the stores' attention rows are
 * 16-bit KV).  The LM head (kept in bf16 by quantised checkpoints),
 * prefill attention (compute-bound, in bf16 math) and the rest stay
 * measured.  Applied after the table cache is read or written, so the
 * cache keeps the measured operators whatever the KV dtype. */
static void table_precision(struct table *t, const struct cost_config *cfg)
{
	const struct model_spec *m = cfg->model;

	if (ss_dtype_bytes(cfg->weight_dtype, m) != (double)m->dtype_bytes &&
	    !table_gemm_dtype(cfg))
		t->measured[COST_OP_GEMM] = false;
	if (ss_dtype_bytes(cfg->kv_dtype, m) != (double)m->dtype_bytes)
		t->measured[COST_OP_ATTN_DECODE] = false;
	/* Mixture of experts: the stores have no grouped-GEMM (MoE) rows, and
	 * the GEMM and element-wise operators are each one measured sum over
	 * a dense layer's shapes, so an MoE model's GEMMs (attention
	 * projections, router, shared and routed experts) and element-wise
	 * kernels (top-k, permute, combine) are the roofline's; attention,
	 * all-reduce and the LM head stay measured (docs/cost-models.md). */
	if (m->n_experts > 0) {
		t->measured[COST_OP_GEMM] = false;
		t->measured[COST_OP_ELEMENTWISE] = false;
	}
	/* MLA: the stores' attention rows are of GQA shapes (K and V per KV
	 * head), its projections (q_a, q_b, kv_a, kv_b, o) and latent norms
	 * are not the measured QKV/O and norms: attention, GEMMs and
	 * element-wise kernels are the roofline's.  Local attention (sliding
	 * window, chunks): the measured attention rows are full-attention
	 * ones, a per-request lookup by (batch, length) that cannot take two
	 * lengths per request, so attention is the roofline's, which prices
	 * the full and local layers apart (docs/cost-models.md). */
	if (m->kv_lora_rank > 0) {
		t->measured[COST_OP_GEMM] = false;
		t->measured[COST_OP_ELEMENTWISE] = false;
	}
	if (m->kv_lora_rank > 0 || model_local_layers(m) > 0) {
		t->measured[COST_OP_ATTN_PREFILL] = false;
		t->measured[COST_OP_ATTN_DECODE] = false;
	}
}

/* What init does last, to tables built or read from the cache: the
 * precision's and EP/DP attention's operators, the lists of powered and
 * roofline operators, the term memo.  On error t is released. */
static int table_ready(struct table *t, const struct cost_config *cfg, bool epdp,
		       struct ss_error *err)
{
	int rc;

	table_precision(t, cfg);
	if (epdp)
		t->measured[COST_OP_ALLREDUCE] = false;
	table_powered(t);
	rc = term_memo_init(&t->dec_terms, &t->dec, err);
	if (rc)
		table_release(t);
	return rc;
}

static int table_init(void *priv, const struct cost_config *cfg, struct ss_params *params,
		      struct ss_error *err)
{
	struct table *t = priv;
	struct cal_cache c;
	struct cal_plan p;
	struct cal_shape sh;
	struct cost_config rank;     /* one attention rank's, with EP / DP attention */
	bool cacheable, epdp = false;
	double ar_max_mb, imbalance;
	int rc;

	memset(t, 0, sizeof(*t));
	if (!cfg->model || !cfg->gpu)
		return ss_error_set(err, -EINVAL, NULL, 0, "--cost-model table: needs a model and a GPU");
	{
		bool any = false;

		for (int i = 0; i < cfg->n_stores; i++)
			any |= cfg->stores[i] != NULL;
		if (!any)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--cost-model table: needs a calibration store (none given)");
	}
	rc = cost_param(params, "custom_allreduce_max_mb", 8.0, 0.0, 1e6, &ar_max_mb, err);
	if (!rc)
		rc = cost_param(params, "expert_imbalance", 1.0, 1.0,
				cfg->ep > 1 ? (double)cfg->ep : 1.0, &imbalance, err);
	if (rc)
		return rc;
	rc = roofline_new(&t->rl, cfg, "table", imbalance, err);
	if (rc)
		return rc;
	/* Expert parallelism / DP attention (costmodel.h): the measured
	 * operators are one attention rank's, at its tp / D GPUs (attention,
	 * LM head, host; an MoE model's GEMMs are the roofline's anyway), and
	 * the collectives (all-to-all, all-gather: the stores have no
	 * alltoall rows) the roofline's, which the roofline above prices
	 * for the whole layout. */
	if (cfg->ep > 1 || cfg->dp_attention > 1) {
		rank = *cfg;
		rank.tp = cost_config_step_gpus(cfg);
		rank.ep = rank.dp_attention = 0;
		cfg = &rank;
		epdp = true;
	}
	model_shape(cfg, &sh);
	/* the fp8 tables are another cache file: the bf16 one keeps its key */
	cacheable = cost_cache_key(&c, sh.gemm_dtype ? "table 2 gemm fp8" : "table 2", cfg, &sh,
				   ar_max_mb);
	if (cacheable && table_cache_load(t, &c))
		return table_ready(t, cfg, epdp, err);
	rc = cal_plan_load(&p, cfg->stores, cfg->n_stores, cfg->gpu->name, &sh, err);
	if (rc) {
		table_release(t);
		return rc;
	}
	t->layers = sh.layers;
	cost_measured_power(&p.data, cfg->tp, t->power_w);

	if (p.gemm_ok) {
		rc = build_gemm(t, &p, CAL_G_QKV, CAL_G_DOWN, sh.layers, &t->gemm, &t->gemm_a,
				&t->gemm_b, err);
		t->measured[COST_OP_GEMM] = !rc;
	}
	if (!rc && p.lm_ok) {
		rc = build_gemm(t, &p, CAL_G_LM, CAL_G_LM, 1.0, &t->lm, &t->lm_a, &t->lm_b, err);
		if (!rc)
			rc = build_ew(&t->fnorm, &p, true, err);
		cal_plan_fnorm_linear(&p, &t->fnorm_a, &t->fnorm_b);
		t->measured[COST_OP_LM_HEAD] = !rc;
	}
	if (!rc && p.pf_ok) {
		rc = build_bank(&t->pf, &p.pf, true, err);
		t->measured[COST_OP_ATTN_PREFILL] = !rc;
	}
	if (!rc && p.dec_ok) {
		rc = build_bank(&t->dec, &p.dec, false, err);
		t->measured[COST_OP_ATTN_DECODE] = !rc;
	}
	if (!rc && p.ew_ok) {
		rc = build_ew(&t->ew, &p, false, err);
		cal_plan_ew_linear(&p, &t->ew_a, &t->ew_b);
		t->measured[COST_OP_ELEMENTWISE] = !rc;
	}
	t->tp_active = cfg->tp > 1;
	if (!rc && t->tp_active && p.ar_ok) {
		t->ar_bytes_per_tok = (double)sh.hidden * sh.dtype_bytes;
		t->ar_n = 2.0 * sh.layers + 1.0;
		t->ar_switch = ar_max_mb * 1024.0 * 1024.0;
		rc = build_coll(&t->ar, &p, false, t->ar_bytes_per_tok, t->ar_n, t->ar_switch, err);
		for (int k = 0; k < 2 && !rc; k++) {
			int kind = k == 0 && p.ar[CAL_COLL_CUSTOM].s ? CAL_COLL_CUSTOM :
				   p.ar[CAL_COLL_NCCL].s ? CAL_COLL_NCCL :
				   p.ar[CAL_COLL_CUSTOM].s ? CAL_COLL_CUSTOM : CAL_COLL_OTHER;

			cal_plan_coll_linear(&p, kind, &t->ar_a[k], &t->ar_b[k]);
		}
		t->ag_bytes_per_emit = (double)sh.vocab * sh.dtype_bytes;
		if (!rc) {
			rc = build_coll(&t->ag, &p, true, t->ag_bytes_per_emit, 1.0, t->ar_switch, err);
			if (p.ag.s) {
				cal_plan_coll_linear(&p, -1, &t->ag_a, &t->ag_b);
			} else {
				/* half an all-reduce's bytes, as in the table */
				cal_plan_coll_linear(&p, p.ar[CAL_COLL_NCCL].s ? CAL_COLL_NCCL :
						     CAL_COLL_OTHER, &t->ag_a, &t->ag_b);
				t->ag_b *= 0.5;
			}
		}
		t->measured[COST_OP_ALLREDUCE] = !rc;
	} else if (!t->tp_active) {
		t->measured[COST_OP_ALLREDUCE] = true;   /* nothing to price */
	}
	if (!rc && p.host_ok) {
		rc = build_host(&t->host, &p, err);
		cal_plan_host_linear(&p, &t->host_a, &t->host_b);
		t->measured[COST_OP_HOST] = !rc;
	}
	if (p.lora.p == CAL_LORA_TERMS) {
		memcpy(t->lora_c, p.lora.c, sizeof(t->lora_c));
		t->lora_ok = true;
	}
	cal_plan_release(&p);
	if (rc)
		table_release(t);
	else if (cacheable)
		cost_cache_save(&c, table_io, t);
	if (!rc)
		rc = table_ready(t, cfg, epdp, err);
	return rc;
}

/* ---- the step ------------------------------------------------------------ */

/* ms -> whole ns, for the non-negative times of a step (llround is a
 * library call; this is on the hot path). */
struct oog {
	uint32_t n;
	double ms;
};

/* y(x) from the table, or from the fit a + b x (at least 0) outside it,
 * which sets *oog. */
static inline double lookup(const struct cal_ptab *tab, double x, double a, double b,
			    bool *oog)
{
	double y;

	*oog = false;
	if (cal_ptab_eval(tab, 0, x, &y))
		return y;
	y = a + b * x;
	if (y < 0.0)
		y = 0.0;
	*oog = true;
	return y;
}

/* Count y (ms) as priced out of grid when bit k of oog is set. */
static inline void oog_add(struct oog *o, unsigned oog, unsigned k, double y)
{
	if (oog & (1u << k)) {
		o->n++;
		o->ms += y;
	}
}

static inline uint8_t oog_bit(bool oog, unsigned k)
{
	return (uint8_t)((oog ? 1u : 0u) << k);
}

/* The token-level operators at tok > 0 step tokens. */
static const struct memo_tok *memo_tok(struct table *t, double tok)
{
	struct memo_tok *m = &t->mtok[(uint64_t)tok & (MEMO_N - 1)];
	bool oog;

	if (m->tok == tok)
		return m;
	memset(m, 0, sizeof(*m));
	if (t->measured[COST_OP_GEMM]) {
		m->y[MT_GEMM] = lookup(&t->gemm, tok, t->gemm_a, t->gemm_b, &oog);
		m->oog |= oog_bit(oog, MT_GEMM);
	}
	if (t->measured[COST_OP_ELEMENTWISE]) {
		m->y[MT_EW] = lookup(&t->ew, tok, t->ew_a, t->ew_b, &oog);
		m->oog |= oog_bit(oog, MT_EW);
	}
	if (t->measured[COST_OP_LM_HEAD]) {
		m->y[MT_FNORM] = lookup(&t->fnorm, tok, t->fnorm_a, t->fnorm_b, &oog);
		m->oog |= oog_bit(oog, MT_FNORM);
	}
	if (t->tp_active && t->measured[COST_OP_ALLREDUCE]) {
		double bytes = tok * t->ar_bytes_per_tok;
		int k = bytes <= t->ar_switch ? 0 : 1;

		m->y[MT_AR] = lookup(&t->ar, tok, t->ar_n * t->ar_a[k],
				     t->ar_n * t->ar_b[k] * t->ar_bytes_per_tok, &oog);
		m->oog |= oog_bit(oog, MT_AR);
	}
	m->tok = tok;
	return m;
}

/* The LM head GEMM and the logits all-gather at emit > 0 rows. */
static const struct memo_emit *memo_emit(struct table *t, double emit)
{
	struct memo_emit *m = &t->memit[(uint64_t)emit & (MEMO_N - 1)];
	bool oog;

	if (m->emit == emit)
		return m;
	memset(m, 0, sizeof(*m));
	if (t->measured[COST_OP_LM_HEAD]) {
		m->y[ME_LM] = lookup(&t->lm, emit, t->lm_a, t->lm_b, &oog);
		m->oog |= oog_bit(oog, ME_LM);
	}
	if (t->tp_active && t->measured[COST_OP_ALLREDUCE]) {
		m->y[ME_AG] = lookup(&t->ag, emit, t->ag_a, t->ag_b * t->ag_bytes_per_emit, &oog);
		m->oog |= oog_bit(oog, ME_AG);
	}
	m->emit = emit;
	return m;
}

/* The host overhead at n >= 1 requests. */
static const struct memo_host *memo_host(struct table *t, double n)
{
	struct memo_host *m = &t->mhost[(uint64_t)n & (MEMO_N - 1)];

	if (m->n == n)
		return m;
	m->y = lookup(&t->host, n, t->host_a, t->host_b, &m->oog);
	m->n = n;
	return m;
}

/* a is bank b at batch size n; m is b's term memo (NULL: none). */
static inline void bacc_init(struct bacc *a, const struct bank *b, const struct term_memo *m,
			     uint32_t n)
{
	int B;

	a->b = b;
	a->n = n;
	a->beff = b->f * n;
	a->w = 0.0;
	a->lo = INFINITY;
	a->hi = -INFINITY;
	a->r0 = a->r1 = -1;
	a->y0 = a->y1 = NULL;
	a->t0 = a->t1 = NULL;
	a->vlo = 1;
	a->vn = 0;
	if (!b->ok || n == 0)
		return;
	/* llround(beff), inline (beff > 0; cost_ns_round is exact for it);
	 * at or above bmax + 1 it is out of the bank anyway */
	B = a->beff < b->bmax + 1.0 ? (int)cost_ns_round(a->beff) : b->bmax + 1;
	if (B >= 1 && B <= b->bmax && b->r0[B] >= 0) {
		double lo0 = b->rows.lo[a->r0 = b->r0[B]], hi0 = b->rows.hi[a->r0];
		double lo1 = b->rows.lo[a->r1 = b->r1[B]], hi1 = b->rows.hi[a->r1];

		a->w = b->w[B];
		a->y0 = b->rows.yb + 2 * (size_t)a->r0 * b->rows.n;
		a->y1 = b->rows.yb + 2 * (size_t)a->r1 * b->rows.n;
		/* fmax and fmin of bounds that are never NaN (grid.h) */
		a->lo = lo0 > lo1 ? lo0 : lo1;
		a->hi = hi0 < hi1 ? hi0 : hi1;
		/* the whole lengths in [lo, hi] that both rows memoise (lo >= 1:
		 * the rows start at 1 at least) */
		if (m && m->term && a->lo <= a->hi) {
			struct term_row *t0 = &m->row[a->r0], *t1 = &m->row[a->r1];
			uint64_t top = t0->top < t1->top ? t0->top : t1->top;
			double vlo = ceil(a->lo);

			if (a->hi < (double)top)
				top = (uint64_t)a->hi;
			if (vlo >= 1.0 && vlo <= (double)top) {
				a->vlo = (uint64_t)vlo;
				a->vn = top - a->vlo + 1;
				a->t0 = t0;
				a->t1 = t1;
			}
		}
	}
}

/* Bank b (term memo m, or NULL) at batch size n > 0: *at, set first
 * unless it holds n already. */
static inline const struct bacc *bacc_at(struct bacc *at, const struct bank *b,
					 const struct term_memo *m, uint32_t n)
{
	if (at->n != n)
		bacc_init(at, b, m, n);
	return at;
}

/* One request at length x (in the table's units) in bucket bk of the
 * rows (cal_ptab_bucket), x within [a->lo, a->hi]. */
static inline void bacc_in_bucket(const struct bacc *a, struct bsum *s, double x, unsigned bk)
{
	const struct cal_ptab *rows = &a->b->rows;
	uint32_t k = cal_ptab_index_in(rows, bk, x);
	/* cal_ptab_at(rows, a->r0 | a->r1, k, x), its expression */
	double dx = x - rows->x[k];

	s->s0 += a->y0[2 * k] + a->y0[2 * k + 1] * dx;
	s->s1 += a->y1[2 * k] + a->y1[2 * k + 1] * dx;
	s->nin++;
}

/* A request at length x: true when inside the range and summed; false
 * otherwise, and the caller adds the fit's time of the batch made of
 * copies of it (bacc_out). */
static inline bool bacc_in(const struct bacc *a, struct bsum *s, double x)
{
	if (!(x >= a->lo && x <= a->hi))
		return false;
	bacc_in_bucket(a, s, x, cal_ptab_bucket(x));
	return true;
}

/* Row tr (its values y in rows) with its terms computed up to length L
 * at least (L <= tr->top). */
static void term_row_fill(struct term_row *tr, const struct cal_ptab *rows, const double *y,
			  uint64_t L)
{
	uint64_t to = L | (TERM_CHUNK - 1);

	if (to > tr->top)
		to = tr->top;
	for (uint64_t l = tr->done + 1; l <= to; l++) {
		/* bacc_in_bucket's expression at x = l */
		double x = (double)l;
		uint32_t k = cal_ptab_index_in(rows, cal_ptab_bucket_int(l), x);
		double dx = x - rows->x[k];

		tr->v[l] = y[2 * k] + y[2 * k + 1] * dx;
	}
	if (to > tr->done)
		tr->done = to;
}

/* Both of a's rows' terms up to length L in the memo at least; the
 * length both hold terms up to. */
static __attribute__((noinline)) uint64_t bacc_fill(const struct bacc *a, uint64_t L)
{
	term_row_fill(a->t0, &a->b->rows, a->y0, L);
	term_row_fill(a->t1, &a->b->rows, a->y1, L);
	return a->t0->done < a->t1->done ? a->t0->done : a->t1->done;
}

/* The same at an integer length L >= 1 (x = L exactly). */
static inline bool bacc_in_int(const struct bacc *a, struct bsum *s, double x, uint64_t L)
{
	if (!(x >= a->lo && x <= a->hi))
		return false;
	bacc_in_bucket(a, s, x, cal_ptab_bucket_int(L));
	return true;
}

static inline void bacc_out(struct bsum *s, double fit_y)
{
	s->sout += fit_y > 0.0 ? fit_y : 0.0;
	s->nout++;
}

/* How many lengths from vlo on a memo of vn lengths holds computed when
 * its rows are computed up to done: L - vlo < term_have(...) says that L
 * is one of them. */
static inline uint64_t term_have(uint64_t vlo, uint64_t vn, uint64_t done)
{
	if (done < vlo)
		return 0;
	return done - vlo + 1 < vn ? done - vlo + 1 : vn;
}

/* A decode at length x = L = ctx + 1 the memo does not hold: as bacc_in_int
 * and bacc_out. */
static void bacc_dec_search(const struct bacc *a, struct bsum *s, const struct cal_fit *fit,
			    int32_t ctx, uint64_t L)
{
	/* x = ctx + 1 exactly */
	double x = (double)ctx + 1.0;

	if (!bacc_in_int(a, s, x, L))
		bacc_out(s, cal_decode_fit(fit, a->beff, a->beff * x));
}

/* The sums of a step's decodes (items of one token) in bank a: each at
 * length L = ctx + 1 from the term memo when it holds L, else as
 * bacc_dec_search, in item order.  With all, every item must be a decode
 * (false, s to be discarded, at the first that is not), and *kv is the
 * sum of their L (cost_roofline_sum's, in int64: exact). */
static inline __attribute__((always_inline)) bool
bacc_decodes_in(const struct bacc *a, const struct cost_item *it, uint32_t n,
		const struct cal_fit *fit, struct bsum *s, bool all, int64_t *kv)
{
	const double *v0 = a->t0 ? a->t0->v : NULL, *v1 = a->t1 ? a->t1->v : NULL;
	uint64_t vlo = a->vlo, vn = a->vn;
	uint64_t done = a->t0 ? (a->t0->done < a->t1->done ? a->t0->done : a->t1->done) : 0;
	/* L - vlo < hn: L is in the memo and computed (one test for the two) */
	uint64_t hn = term_have(vlo, vn, done);
	double s0 = s->s0, s1 = s->s1;
	uint32_t nin = s->nin;
	int64_t ikv = 0;

	for (uint32_t i = 0; i < n; i++) {
		int32_t ctx = it[i].context;
		/* a negative ctx (asserted against) wraps to L >= 2^63 or is 0:
		 * outside the memo, and below the rows' lo >= 1 */
		uint64_t L = (uint64_t)ctx + 1;

		if (it[i].tokens != 1) {
			if (all)
				return false;
			continue;
		}
		if (all)
			ikv += (int64_t)ctx + 1;
		if (L - vlo < hn) {
			s0 += v0[L];
			s1 += v1[L];
			nin++;
		} else if (L - vlo < vn) {
			/* in the memo, not yet computed */
			done = bacc_fill(a, L);
			hn = term_have(vlo, vn, done);
			s0 += v0[L];
			s1 += v1[L];
			nin++;
		} else if (L - 1 < vlo - 1) {
			/* 1 <= L < vlo, so below lo (L is whole): the fit's,
			 * as bacc_dec_search; CUDA-graph padding (ctx 0) */
			bacc_out(s, cal_decode_fit(fit, a->beff, a->beff * (double)L));
		} else {
			/* (a negative ctx comes here: cost_roofline_sum's
			 * assertion, for the step it does not sum) */
			assert(!all || ctx >= 0);
			s->s0 = s0;
			s->s1 = s1;
			s->nin = nin;
			bacc_dec_search(a, s, fit, ctx, L);
			s0 = s->s0;
			s1 = s->s1;
			nin = s->nin;
		}
	}
	s->s0 = s0;
	s->s1 = s1;
	s->nin = nin;
	if (all)
		*kv = ikv;
	return true;
}

/* The decodes among a step's items (bacc_decodes_in). */
static void bacc_decodes(const struct bacc *a, const struct cost_item *it, uint32_t n,
			 const struct cal_fit *fit, struct bsum *s)
{
	bacc_decodes_in(a, it, n, fit, s, false, NULL);
}

/* A step whose items all decode (bacc_decodes_in with all). */
static bool bacc_decodes_all(const struct bacc *a, const struct cost_item *it, uint32_t n,
			     const struct cal_fit *fit, struct bsum *s, int64_t *kv)
{
	return bacc_decodes_in(a, it, n, fit, s, true, kv);
}

/* (1/n) sum_i T(B, x_i) over all layers, ms: the in-grid requests' mean is
 * taken at the two bracketing batch sizes and interpolated geometrically
 * in log batch. */
static inline double bacc_ms(const struct bacc *a, const struct bsum *s, struct oog *o)
{
	double t = s->sout;

	if (s->nin) {
		double m0 = s->s0 / s->nin;

		if (a->w != 0.0 && m0 > 0.0)
			m0 *= exp(a->w * log(s->s1 / s->s0));
		t += s->nin * m0;
	}
	o->n += s->nout;
	o->ms += a->b->mult * s->sout / a->n;
	return a->b->mult * t / a->n;
}

/* The memo_fixed entry of a step with these tokens, emitted rows and
 * requests. */
static const struct memo_fixed *memo_fixed(struct table *t, double tok, double emit,
					   uint32_t n_items)
{
	struct memo_fixed *f = &t->mfix[(uint64_t)tok & (MEMO_N - 1)];
	double *ms = f->ms;
	struct oog o = { 0, 0.0 };

	if (f->items1 == (uint64_t)n_items + 1 && f->tok == tok && f->emit == emit)
		return f;
	memset(f, 0, sizeof(*f));
	/* the operators' times, and out-of-grid ones counted, in this order */
	if (tok > 0.0) {
		const struct memo_tok *m = memo_tok(t, tok);

		ms[COST_OP_GEMM] = m->y[MT_GEMM];
		oog_add(&o, m->oog, MT_GEMM, m->y[MT_GEMM]);
		ms[COST_OP_ELEMENTWISE] = m->y[MT_EW];
		oog_add(&o, m->oog, MT_EW, m->y[MT_EW]);
		ms[COST_OP_LM_HEAD] = m->y[MT_FNORM];
		oog_add(&o, m->oog, MT_FNORM, m->y[MT_FNORM]);
		ms[COST_OP_ALLREDUCE] = m->y[MT_AR];
		oog_add(&o, m->oog, MT_AR, m->y[MT_AR]);
	}
	if (emit > 0.0) {
		const struct memo_emit *m = memo_emit(t, emit);

		if (t->measured[COST_OP_LM_HEAD]) {
			ms[COST_OP_LM_HEAD] += m->y[ME_LM];
			oog_add(&o, m->oog, ME_LM, m->y[ME_LM]);
		}
		if (t->tp_active && t->measured[COST_OP_ALLREDUCE]) {
			ms[COST_OP_ALLREDUCE] += m->y[ME_AG];
			oog_add(&o, m->oog, ME_AG, m->y[ME_AG]);
		}
	}
	f->oog_n = o.n;
	f->oog_ms = o.ms;
	/* (the attention comes here in the step) */
	if (t->measured[COST_OP_HOST]) {
		const struct memo_host *m = memo_host(t, n_items > 0 ? n_items : 1);

		ms[COST_OP_HOST] = m->y;
		f->host_oog = m->oog;
	}
	/* as cost_result_from_measured rounds them */
	f->ns_ok = true;
	for (int op = 0; op < COST_OP_COUNT && f->ns_ok; op++) {
		if (op == COST_OP_ATTN_PREFILL || op == COST_OP_ATTN_DECODE || !t->measured[op])
			continue;
		f->ns_ok = cost_ns_fits(ms[op] * 1e6 + 0.5);
		if (f->ns_ok) {
			f->ns[op] = (int64_t)(ms[op] * 1e6 + 0.5);
			f->ns_ok = ss_time_add(f->ns_sum, f->ns[op], &f->ns_sum);
		}
	}
	f->tok = tok;
	f->emit = emit;
	f->items1 = (uint64_t)n_items + 1;
	return f;
}

/* cost_result_from_measured(out, ms, t->measured, t->power_w, rl, o.n,
 * o.ms, "table", step, err) for ms the memo's but for the attention
 * (ms_pf, ms_dec), with the memo's rounded operators.  The same integer
 * and floating-point operations in the same order; anything out of range
 * goes to cost_result_from_measured itself, which reports it. */
static inline int table_finish(const struct table *t, const struct memo_fixed *f,
			       double ms_pf, double ms_dec, const struct cost_result *rl,
			       struct oog o, const struct cost_step *step, struct cost_result *out,
			       struct ss_error *err)
{
	int64_t total = 0, t_measured = 0;
	double rl_power_w, e_measured = 0.0;
	bool ok = f->ns_ok;

	/* the memo's measured operators, the roofline's others, then the
	 * measured attention, summed in another order than operator order:
	 * all are >= 0, so the sum overflows if and only if a partial sum in
	 * operator order does, and otherwise is the same */
	memcpy(out->op_ns, f->ns, sizeof(out->op_ns));
	total = f->ns_sum;
	for (uint32_t k = 0; k < t->n_rl_ops; k++) {
		int op = t->rl_ops[k];

		out->op_ns[op] = rl->op_ns[op];
		ok &= ss_time_add(total, out->op_ns[op], &total);
	}
	if (t->measured[COST_OP_ATTN_PREFILL]) {
		ok = ok && cost_ns_fits(ms_pf * 1e6 + 0.5);
		out->op_ns[COST_OP_ATTN_PREFILL] = ok ? (int64_t)(ms_pf * 1e6 + 0.5) : 0;
		ok = ok && ss_time_add(total, out->op_ns[COST_OP_ATTN_PREFILL], &total);
	}
	if (t->measured[COST_OP_ATTN_DECODE]) {
		ok = ok && cost_ns_fits(ms_dec * 1e6 + 0.5);
		out->op_ns[COST_OP_ATTN_DECODE] = ok ? (int64_t)(ms_dec * 1e6 + 0.5) : 0;
		ok = ok && ss_time_add(total, out->op_ns[COST_OP_ATTN_DECODE], &total);
	}
	if (!ok) {
		double ms[COST_OP_COUNT];

		memcpy(ms, f->ms, sizeof(ms));
		ms[COST_OP_ATTN_PREFILL] = ms_pf;
		ms[COST_OP_ATTN_DECODE] = ms_dec;
		return cost_result_from_measured(out, ms, t->measured, t->power_w, rl, o.n, o.ms,
						 "table", step, err);
	}
	rl_power_w = rl->energy_j / ((double)rl->duration_ns * 1e-9);
	if (total <= 0) {
		out->op_ns[COST_OP_HOST] += 1 - total;
		total = 1;
	}
	out->duration_ns = total;
	for (uint32_t k = 0; k < t->n_powered; k++) {
		int op = t->powered[k];

		e_measured += t->power_w[op] * (double)out->op_ns[op] * 1e-9;
		t_measured += out->op_ns[op];
	}
	out->energy_j = e_measured + rl_power_w * (double)(total - t_measured) * 1e-9;
	out->compute_ns = cost_ns_round((double)rl->compute_ns * (double)total /
					(double)rl->duration_ns);
	out->out_of_grid = o.n;
	out->out_of_grid_ns = cost_ns_fits(o.ms * 1e6 + 0.5) ? (int64_t)(o.ms * 1e6 + 0.5) : total;
	return 0;
}

/* The engine's marks of a step of decodes alone: no prefill and a token
 * per item (what kernel_step pads too).  The items are still checked. */
static inline bool decodes_only(const struct cost_step *step)
{
	return step->n_prefill == 0 && step->n_items > 0 &&
	       step->n_items <= COST_ROOFLINE_INT_ITEMS &&
	       step->total_tokens == (int64_t)step->n_items;
}

static int table_step(void *priv, const struct cost_step *step, struct cost_result *out,
		      struct ss_error *err)
{
	struct table *t = priv;
	struct cost_roofline_sums rs;
	struct cost_result rl;
	const struct memo_fixed *f;
	double ms_pf = 0.0, ms_dec = 0.0, emit = step->n_emit;
	/* the banks at the step's batch sizes, NULL for one without items */
	const struct bacc *pf = NULL, *dec = NULL;
	const struct cost_item *it = step->items;
	struct bsum ps = { 0 }, ds = { 0 };
	bool summed = false;
	struct oog o;

	/* Most steps decode alone: one pass over the items sums the
	 * decode bank's terms and the roofline's (cost_roofline_sum_decodes,
	 * what cost_roofline_sum gives such a step), at the batch size the
	 * marks say; a step whose items say otherwise takes the two passes
	 * below. */
	if (decodes_only(step) && t->measured[COST_OP_ATTN_DECODE]) {
		int64_t kv;

		dec = bacc_at(&t->dec_at, &t->dec, &t->dec_terms, step->n_items);
		summed = bacc_decodes_all(dec, it, step->n_items, &t->dec.fit, &ds, &kv);
		if (summed) {
			cost_roofline_sum_decodes(step->n_items, kv, &rs);
		} else {
			dec = NULL;
			ds = (struct bsum){ 0 };
		}
	}
	if (!summed) {
		/* one pass over the items for the roofline and the operator
		 * counts: rs.n_pf counts the items with tokens > 1, rs.n_dec
		 * (an integer, at most n_items) those with 1, and rs.tok sums
		 * tokens > 0 as the table always did; then one for each bank */
		cost_roofline_sum(step, &rs);
		if (rs.n_pf && t->measured[COST_OP_ATTN_PREFILL])
			pf = bacc_at(&t->pf_at, &t->pf, NULL, rs.n_pf);
		if (rs.n_dec > 0.0 && t->measured[COST_OP_ATTN_DECODE])
			dec = bacc_at(&t->dec_at, &t->dec, &t->dec_terms, (uint32_t)rs.n_dec);
		if (dec)
			bacc_decodes(dec, it, step->n_items, &t->dec.fit, &ds);
		for (uint32_t i = 0; pf && i < step->n_items; i++) {
			if (it[i].tokens > 1) {
				double c = it[i].tokens, p = it[i].context;
				/* the equivalent prompt: s (s + 1) / 2 = c p + c (c + 1) / 2 */
				double pos = c * p + 0.5 * c * (c + 1.0);
				double se = 0.5 * (sqrt(8.0 * pos + 1.0) - 1.0);

				if (!bacc_in(pf, &ps, se))
					bacc_out(&ps, cal_prefill_fit(&t->pf.fit, pf->beff * c, pf->beff * pos));
			}
		}
	}
	if (cost_roofline_step_sums(t->rl, step, &rs, &rl, err))
		return -ERANGE;
	f = memo_fixed(t, rs.tok, emit, step->n_items);
	o.n = f->oog_n;
	o.ms = f->oog_ms;
	if (pf)
		ms_pf = bacc_ms(pf, &ps, &o);
	if (dec)
		ms_dec = bacc_ms(dec, &ds, &o);
	if (t->measured[COST_OP_HOST])
		oog_add(&o, f->host_oog, 0, f->ms[COST_OP_HOST]);

	return table_finish(t, f, ms_pf, ms_dec, &rl, o, step, out, err);
}

static const char *table_op_backend(const void *priv, enum cost_op op)
{
	const struct table *t = priv;

	if ((unsigned)op >= COST_OP_COUNT)
		return "?";
	return t->measured[op] ? "table" : "roofline";
}

static int table_lora_kernel(const void *priv, struct cost_lora_kernel *out)
{
	const struct table *t = priv;

	if (!t->lora_ok)
		return -ENOENT;
	cost_lora_kernel_from_ms(t->lora_c, out);
	return 0;
}

const struct cost_model_ops cost_table_ops = {
	.version = COST_MODEL_VERSION,
	.name = "table",
	.description = "measured operator tables from calibration stores, interpolated; fit beyond them",
	.priv_size = sizeof(struct table),
	.init = table_init,
	.step = table_step,
	.release = table_release,
	.op_backend = table_op_backend,
	.lora_kernel = table_lora_kernel,
};

/* ---- measured power -------------------------------------------------------- */

void cost_measured_power(const struct cal_data *d, int tp, double out[COST_OP_COUNT])
{
	static const struct {
		enum cost_op op;
		unsigned cal_ops;
	} map[] = {
		{ COST_OP_GEMM, 1u << CAL_GEMM },
		{ COST_OP_LM_HEAD, 1u << CAL_GEMM },
		{ COST_OP_ATTN_PREFILL, 1u << CAL_ATTN_PREFILL },
		{ COST_OP_ATTN_DECODE, 1u << CAL_ATTN_DECODE },
		{ COST_OP_ELEMENTWISE, (1u << CAL_RMSNORM) | (1u << CAL_LAYERNORM) | (1u << CAL_ROPE) |
				       (1u << CAL_ACTIVATION) | (1u << CAL_RESIDUAL_ADD) |
				       (1u << CAL_EMBEDDING) },
		{ COST_OP_ALLREDUCE, (1u << CAL_ALL_REDUCE) | (1u << CAL_ALL_GATHER) },
	};

	for (int op = 0; op < COST_OP_COUNT; op++)
		out[op] = 0.0;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		double j = 0.0, ms = 0.0;

		for (int c = 0; c < CAL_OP_COUNT; c++)
			if (map[i].cal_ops & (1u << c)) {
				j += d->energy_j[c];
				ms += d->energy_ms[c];
			}
		/* measurements are of one GPU's kernel: the instance has tp */
		if (j > 0.0 && ms > 0.0)
			out[map[i].op] = tp * j / (ms * 1e-3);
	}
}

/* ---- selection ------------------------------------------------------------ */

bool cost_store_covers(const char *const *stores, int n, const struct model_spec *m,
		       const struct gpu_spec *g, int tp, char *why, size_t len)
{
	struct cost_config cfg = { .model = m, .gpu = g, .tp = tp, .stores = stores,
				   .n_stores = n };
	struct ss_error err = { 0 };
	struct cal_shape sh;
	struct cal_plan p;
	struct cal_data d;
	bool ok, any = false;

	if (why && len)
		why[0] = '\0';
	if (!m || !g || tp < 1 || m->n_heads % tp) {
		if (why && len)
			snprintf(why, len, "no model, GPU or valid tensor-parallel degree");
		return false;
	}
	for (int i = 0; i < n; i++)
		any |= stores[i] != NULL;
	if (!any) {
		if (why && len)
			snprintf(why, len, "no calibration store");
		return false;
	}
	/* the table model prices their attention by the roofline whatever
	 * the stores hold (table_precision) */
	if (m->kv_lora_rank > 0 || model_local_layers(m) > 0) {
		if (why && len)
			snprintf(why, len, "%s: %s attention has no measured rows (GQA shapes only); "
				 "the table model prices it by the roofline", m->name,
				 m->kv_lora_rank > 0 ? "multi-head latent" :
				 m->sliding_window > 0 ? "sliding-window" : "chunked");
		return false;
	}
	model_shape(&cfg, &sh);
	cal_data_init(&d);
	if (cal_data_load(&d, stores, n, g->name, (1u << CAL_GEMM) | (1u << CAL_ATTN_PREFILL) |
			  (1u << CAL_ATTN_DECODE), NULL, NULL, &err) ||
	    cal_plan_build(&p, &d, NULL, g->name, &sh, &err)) {
		if (why && len)
			snprintf(why, len, "%s", err.msg);
		cal_data_release(&d);
		return false;
	}
	ok = p.gemm_ok && p.pf_ok && p.dec_ok;
	if (!ok && why && len) {
		if (!d.n)
			snprintf(why, len, "no GEMM or attention measurements for %s", g->name);
		else
			snprintf(why, len, "%s on %s at tp %d:%s%s%s", m->name, g->name, tp,
				 p.gemm_ok ? "" : " GEMM shapes not covered;",
				 p.pf_ok ? "" : " no prefill attention for its heads;",
				 p.dec_ok ? "" : " no decode attention for its heads;");
	}
	cal_plan_release(&p);
	cal_data_release(&d);
	return ok;
}
