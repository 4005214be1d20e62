/* servesim — a model's operators priced from measured data (op-plan.h). */
#include "op-plan.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"
#include "lora-kernel.h"
#include "store-cache.h"

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

static const char *const gemm_names[CAL_G_COUNT] = { "QKV", "O", "up", "down", "LM head" };

/* A GEMM without a line of its own N takes the nearest within this
 * factor (cal_data_gemm_line_near). */
#define GEMM_NEAR_RATIO 1.25

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

/* Does (x[1], x[2]) interpolate in gip at some m?  x[0] is set to the first
 * m that does, trying the grid's smallest m (x[0] on entry) and then its m
 * nodes upwards: a full grid (aiconfigurator's) covers an (n, k) from its
 * smallest m, while AITER's tuned tables measure each (n, k) at m values of
 * their own (from 1 on some shapes, from 16 on others).  O(m nodes) evals
 * at worst, once per GEMM of a plan. */
static bool gemm_covered(const struct cal_interp *gip, double *x, double *y)
{
	double m0 = x[0];

	if (cal_interp_eval(gip, x, y))
		return true;
	for (int i = 0; i < gip->grid.n[0]; i++) {
		if (gip->nat[0][i] <= m0)
			continue;
		x[0] = gip->nat[0][i];
		if (cal_interp_eval(gip, x, y))
			return true;
	}
	x[0] = m0;
	return false;
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
		if (gemm_covered(gip, x, &y)) {
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
	/* else the nearest line of the same K within 25% in N, scaled by
	 * the ratio of N (linear in N at fixed m and k: FLOPs and weight
	 * bytes alike; said in the plan's why) */
	if (lines && !line) {
		line = cal_data_gemm_line_near(d, device, llround(n), llround(k), GEMM_NEAR_RATIO);
		if (line) {
			pg->mult = n / (double)line->key[0];
			pg->n = (double)line->key[0];
			why_add(p, "%s GEMM priced from the measured line of the nearest N, scaled",
				gemm_names[g]);
		}
	}
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

int cal_lora_fit(const struct cal_data *d, const char *device, struct cal_fit *out,
		 double *rms_rel, size_t *n_rows, struct ss_error *err)
{
	double *X = NULL, *y = NULL, sq = 0.0;
	size_t n = 0, k = 0;
	int store = -1, rc;

	memset(out, 0, sizeof(*out));
	*rms_rel = NAN;
	*n_rows = 0;
	/* the preferred store's rows, of a dtype of one element size */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < d->n; i++) {
			const struct cal_series *s = &d->s[i];

			if (s->op != CAL_LORA || strcmp(s->device, device) ||
			    cal_dtype_bytes(s->dtype) <= 0)
				continue;
			if (pass == 0 && (store < 0 || s->store < store))
				store = s->store;
			else if (pass == 1 && s->store == store)
				n += s->n;
		}
	if (n == 0)
		return 0;
	X = malloc(n * CAL_LORA_TERMS * sizeof(*X));
	y = malloc(n * sizeof(*y));
	if (!X || !y) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < d->n; i++) {
		const struct cal_series *s = &d->s[i];

		if (s->op != CAL_LORA || strcmp(s->device, device) || cal_dtype_bytes(s->dtype) <= 0 ||
		    s->store != store)
			continue;
		for (size_t j = 0; j < s->n && k < n; j++, k++) {
			cal_series_features(s, &s->x[j * (size_t)s->ndim], &X[k * CAL_LORA_TERMS]);
			y[k] = s->y[j];
		}
	}
	rc = cal_fit_nnls(out, X, y, k, CAL_LORA_TERMS, err);
	if (rc)
		goto out;
	for (size_t i = 0; i < k; i++) {
		double r = (cal_fit_eval(out, &X[i * CAL_LORA_TERMS]) - y[i]) / y[i];

		sq += r * r;
	}
	*rms_rel = sqrt(sq / (double)k);
	*n_rows = k;
out:
	free(X);
	free(y);
	return rc;
}

/* The adapter kernels' fit (cal_lora_fit): none without rows; rows that
 * give no fit (too few, or no non-negative one) leave it empty too, and
 * why says so, as for every operator the plan cannot price. */
static int plan_lora(struct cal_plan *p, const struct cal_data *d, const char *device,
		     struct ss_error *err)
{
	struct ss_error e2;
	size_t n;
	int rc = cal_lora_fit(d, device, &p->lora, &p->lora_rms_rel, &n, &e2);

	if (rc == -ENOMEM)
		return ss_error_set(err, rc, NULL, 0, "out of memory");
	if (rc) {
		memset(&p->lora, 0, sizeof(p->lora));
		why_add(p, "the lora rows give no fit (%s)", e2.msg);
	}
	return 0;
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
	/* the first store dtype, in preference order, that device has a grid of */
	qgrid = NULL;
	if (sh->gemm_dtype) {
		const char *dt;
		size_t pos = 0;

		while (!qgrid && (dt = cal_gemm_dtype_for_weights(sh->gemm_dtype, &pos)))
			qgrid = cal_data_gemm_grid_dtype(d, device, dt);
	}
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

		p->gemm_ok = true;
		for (int g = 0; g < CAL_G_COUNT; g++) {
			bool q = sh->gemm_dtype && g != CAL_G_LM;

			rc = plan_gemm(p, d, device, q ? qgrid : grid, q ? &p->qgrid_ip : &p->grid_ip,
				       !q, g, shapes[g][0], shapes[g][1], err);
			if (rc)
				goto fail;
			if (!p->gemm[g].s) {
				why_add(p, "no GEMM measurement covers the %s shape", gemm_names[g]);
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

	rc = plan_lora(p, d, device, err);
	if (rc)
		goto fail;

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
