/* servesim — fitting an engine profile to measured runs (engine-fit.h).
 *
 * The fitter owns one working profile; every run's cost model is built
 * once with a pointer to it (cost_config.engine), so an evaluation only
 * rewrites the free parameters and re-runs the engines.
 *
 * A simulated percentile is a rugged function of the parameters: a small
 * change reorders steps and batches, and the p50 request changes.  A
 * gradient method alone stalls in the first dip it finds, so the fit runs
 * in two phases: GSL's Nelder-Mead simplex (derivative-free) minimises the
 * Cauchy loss from the starting profile, then trust-region
 * Levenberg-Marquardt with the Cauchy weights polishes the optimum and
 * gives the Jacobian the intervals come from; the better of the two
 * optima is kept.  The Jacobian is taken by forward differences of 5% in
 * log space, wide enough to see through the ruggedness (GSL's default
 * step of sqrt(machine epsilon) would see a flat function).
 */
#include "engine-fit.h"
#include "metrics.h"
#include "sstime.h"
#include "hist.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_multimin.h>
#include <gsl/gsl_vector.h>

#define CAUCHY_SCALE 0.1     /* residuals (log ratios) beyond ~10% are down-weighted */
#define IRLS_ROUNDS 3
#define FD_STEP 0.05         /* log-space finite-difference step */
#define SIMPLEX_STEP 0.7     /* initial simplex size in log space: a factor of 2 */
#define SIMPLEX_ITERS 400

/* Each metric's name and where a summary holds it: a struct dist (at
 * dist, in ms) and its statistic (at stat), or the output rate. */
static const struct {
	const char *name;
	size_t dist, stat;
} metrics[EFIT_METRIC_COUNT] = {
#define M(e, n, d, st) [e] = { n, offsetof(struct summary, d), offsetof(struct dist, st) }
	M(EFIT_TTFT_MEAN, "ttft_mean", ttft_ms, mean), M(EFIT_TTFT_P50, "ttft_p50", ttft_ms, p50),
	M(EFIT_TTFT_P90, "ttft_p90", ttft_ms, p90), M(EFIT_TTFT_P95, "ttft_p95", ttft_ms, p95),
	M(EFIT_TTFT_P99, "ttft_p99", ttft_ms, p99),
	M(EFIT_TPOT_MEAN, "tpot_mean", tpot_ms, mean), M(EFIT_TPOT_P50, "tpot_p50", tpot_ms, p50),
	M(EFIT_TPOT_P95, "tpot_p95", tpot_ms, p95), M(EFIT_TPOT_P99, "tpot_p99", tpot_ms, p99),
	M(EFIT_ITL_MEAN, "itl_mean", itl_ms, mean), M(EFIT_ITL_P50, "itl_p50", itl_ms, p50),
	M(EFIT_ITL_P99, "itl_p99", itl_ms, p99),
	M(EFIT_E2E_MEAN, "e2e_mean", e2e_ms, mean), M(EFIT_E2E_P50, "e2e_p50", e2e_ms, p50),
	M(EFIT_E2E_P95, "e2e_p95", e2e_ms, p95),
#undef M
	[EFIT_OUTPUT_TPS] = { "output_tps", 0, 0 },
};

const char *efit_metric_name(enum efit_metric m)
{
	return (unsigned)m < EFIT_METRIC_COUNT ? metrics[m].name : "?";
}

static double metric_of(const struct summary *s, enum efit_metric m)
{
	if (m == EFIT_OUTPUT_TPS)
		return s->output_tokens_per_s;
	if ((unsigned)m >= EFIT_METRIC_COUNT)
		return NAN;
	return *(const double *)((const char *)s + metrics[m].dist + metrics[m].stat);
}

/* The quantity (TTFT, TPOT or E2E) a metric is a statistic of, or -1. */
static int metric_quantity(enum efit_metric m)
{
	switch (m) {
	case EFIT_TTFT_MEAN: case EFIT_TTFT_P50: case EFIT_TTFT_P90: case EFIT_TTFT_P95:
	case EFIT_TTFT_P99:
		return 0;
	case EFIT_TPOT_MEAN: case EFIT_TPOT_P50: case EFIT_TPOT_P95: case EFIT_TPOT_P99:
		return 1;
	case EFIT_E2E_MEAN: case EFIT_E2E_P50: case EFIT_E2E_P95:
		return 2;
	default:
		return -1;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Metric m (of TTFT, TPOT or E2E) over requests req[from..n) of a run, the
 * way summary_compute takes it (requests without the figure left out; the
 * percentiles by ss_quantile_sorted). */
static double window_stat(const struct engine_results *res, uint64_t from, enum efit_metric m)
{
	int q = metric_quantity(m);
	double sum = 0.0, *v, out;
	uint64_t n = 0;

	v = malloc((res->n_req > from ? res->n_req - from : 1) * sizeof(*v));
	if (!v)
		return NAN;
	for (uint64_t i = from; i < res->n_req; i++) {
		const struct req_record *r = &res->req[i];
		double x = q == 0 ? request_ttft_ms(r) : q == 1 ? request_tpot_ms(r) :
			   request_e2e_ms(r);

		if (isfinite(x)) {
			sum += x;
			v[n++] = x;
		}
	}
	if (!n)
		out = NAN;
	else if (m == EFIT_TTFT_MEAN || m == EFIT_TPOT_MEAN || m == EFIT_E2E_MEAN)
		out = sum / (double)n;
	else {
		double p = metrics[m].stat == offsetof(struct dist, p50) ? 0.50 :
			   metrics[m].stat == offsetof(struct dist, p90) ? 0.90 :
			   metrics[m].stat == offsetof(struct dist, p95) ? 0.95 : 0.99;

		qsort(v, n, sizeof(*v), cmp_double);
		out = ss_quantile_sorted(v, n, p);
	}
	free(v);
	return out;
}

/* One engine run of wl under ec into s (and *res, which points into e:
 * the caller frees e). */
static int run_engine(const struct engine_config *ec, const struct workload *wl,
		      struct engine **e, struct engine_results *res, struct summary *s,
		      struct ss_error *err)
{
	struct slo_config slo = { 0 };
	int rc = engine_new(e, ec, wl, err);

	if (!rc)
		rc = engine_run(*e, err);
	if (!rc) {
		engine_results(*e, res);
		rc = summary_compute(s, res, &slo, ec->tp, err);
	}
	if (!rc && s->completed < s->requests)
		rc = ss_error_set(err, -ECANCELED, NULL, 0,
				  "%llu of %llu requests did not complete (%s)",
				  (unsigned long long)(s->requests - s->completed),
				  (unsigned long long)s->requests,
				  s->n_reject_reasons ? s->reject_reasons[0].reason : "unfinished");
	return rc;
}

/* A closed loop whose clients are out of phase (efit_obs.spread): the
 * clients start evenly over one request's duration, as a server's E2E
 * latency in one round of all the clients at once from idle (their first
 * requests, simulated here) measures it. */
static int spread_clients(struct engine_config *ec, const struct workload *wl, struct summary *s,
			  double round_mean[3], struct ss_error *err)
{
	struct workload round = *wl;
	struct engine_results res;
	struct engine *e = NULL;
	int rc;

	round.n = ec->concurrency < wl->n ? ec->concurrency : wl->n;
	rc = run_engine(ec, &round, &e, &res, s, err);
	if (!rc) {
		round_mean[0] = s->ttft_ms.mean;
		round_mean[1] = s->tpot_ms.mean;
		round_mean[2] = s->e2e_ms.mean;
	}
	if (!rc && !ss_time_from_s(s->e2e_ms.mean / 1e3, &ec->ramp_ns))
		rc = ss_error_set(err, -ERANGE, NULL, 0, "E2E of one round out of range");
	engine_free(e);
	return rc;
}

/* Run o with its cost models cm[] (built for profile p) and read its
 * targets into sim[]. */
static int simulate(const struct engine_profile *p, const struct stack_profile *st,
		    const struct efit_obs *o, struct cost_model *const cm[2], double *sim,
		    struct ss_error *err)
{
	struct engine_config ec = o->ec;
	struct engine_results res;
	struct engine *e = NULL;
	struct summary *s;
	double round1[3] = { NAN, NAN, NAN };   /* the first round's TTFT, TPOT, E2E means */
	int rc = 0;

	s = calloc(1, sizeof(*s));
	if (!s)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	ec.engine = p;
	if (st)
		ec.stack = st;   /* the fit's stack, its free terms set */
	ec.cost_models[0] = cm[0];
	ec.cost_models[1] = cm[1];
	ec.sample_interval_ns = 0;
	if (o->spread && ec.concurrency > 0)
		rc = spread_clients(&ec, o->wl, s, round1, err);
	if (!rc)
		rc = run_engine(&ec, o->wl, &e, &res, s, err);
	for (int k = 0; !rc && k < o->n_targets; k++) {
		enum efit_metric m = o->targets[k].metric;

		bool mean = m == EFIT_TTFT_MEAN || m == EFIT_TPOT_MEAN || m == EFIT_E2E_MEAN;

		/* the figures of one quantity leave the warm-up out (the means
		 * always did; the percentiles only ever come from sources
		 * that report them, NIM's p95) */
		sim[k] = o->warmup && metric_quantity(m) >= 0 ? window_stat(&res, o->warmup, m) :
			 metric_of(s, m);
		if (o->drained > 1 && o->spread && mean) {
			double r1 = round1[m == EFIT_TTFT_MEAN ? 0 : m == EFIT_TPOT_MEAN ? 1 : 2];

			if (isfinite(r1))
				sim[k] = (r1 + (o->drained - 1) * sim[k]) / o->drained;
		}
	}
	if (rc && err && o->name) {
		char why[sizeof(err->msg)];

		snprintf(why, sizeof(why), "%s", err->msg);
		ss_error_set(err, rc, NULL, 0, "%s: %s", o->name, why);
	}
	engine_free(e);
	free(s);
	return rc;
}

/* The pools' cost models of o, built for profile p (which they keep a
 * pointer to). */
static int build_models(const struct engine_profile *p, const struct efit_obs *o,
			struct cost_model *cm[2], struct ss_error *err)
{
	const struct engine_config *ec = &o->ec;
	bool pd = engine_config_disaggregated(ec);
	int rc = 0;

	cm[0] = cm[1] = NULL;
	for (int k = 0; k < (pd ? 2 : 1) && !rc; k++) {
		struct engine_pool_config pl = engine_pool_resolve(ec, k);
		struct cost_config cc = {
			.model = ec->model, .gpu = pl.gpu, .tp = pl.tp, .stores = ec->stores,
			.n_stores = ec->n_stores, .power_cap_w = ec->power_cap_w,
			.clock_frac = ec->clock_frac, .shared_data = ec->shared_data, .engine = p,
			.weight_dtype = ec->weight_dtype, .kv_dtype = ec->kv_dtype,
			.ep = pl.ep, .dp_attention = pl.dp_attention,
			.gpus_per_node = ec->gpus_per_node,
		};

		rc = cost_model_new(&cm[k], ec->cost_model ? ec->cost_model : "auto", &cc, err);
	}
	if (rc) {
		cost_model_free(cm[0]);
		cm[0] = NULL;
	}
	return rc;
}

int efit_predict(const struct engine_profile *p, const struct efit_obs *o, double *sim,
		 struct ss_error *err)
{
	struct cost_model *cm[2];
	int rc = build_models(p, o, cm, err);

	if (!rc)
		rc = simulate(p, NULL, o, cm, sim, err);
	cost_model_free(cm[0]);
	cost_model_free(cm[1]);
	return rc;
}

/* ---- the fit --------------------------------------------------------------- */

struct fit {
	struct engine_profile work;        /* the models point here */
	/* The runs' stacks, when a stack term is free: stacks[s] is the
	 * fitted copy of the runs' stack_of[s]; obs_stack[i] run i's, -1 for
	 * a run that keeps its own (stack known, or no stack term free). */
	struct stack_profile stacks[EFIT_MAX_STACKS];
	const struct stack_profile *stack_of[EFIT_MAX_STACKS];
	int n_stacks;
	int *obs_stack;
	bool stack_free;
	double *slot[EFIT_MAX_VALUES];     /* the free values inside work and stacks[] */
	double lo[EFIT_MAX_VALUES], hi[EFIT_MAX_VALUES];
	const char *key[EFIT_MAX_VALUES];  /* each value's free key */
	int stack_index[EFIT_MAX_VALUES];  /* its stack, -1 an engine key */
	int n_free;                        /* values fitted */
	const struct efit_obs *obs;
	size_t n_obs;
	struct cost_model *(*cm)[2];       /* n_obs pairs */
	double *w;                         /* IRLS weight per residual */
	double *sim;                       /* EFIT_MAX_TARGETS per run, n_obs runs */
	int *rc;                           /* each run's simulation status */
	struct ss_error *errs;             /* each run's error (jobs > 1) */
	int jobs;                          /* threads simulating runs at once, >= 1 */
	size_t n_res;
	int evaluations;
	int status;                        /* first simulation error */
	struct ss_error *err;
};

static void set_params(struct fit *f, const gsl_vector *theta)
{
	for (int j = 0; j < f->n_free; j++) {
		double x = exp(gsl_vector_get(theta, j));

		*f->slot[j] = x < f->lo[j] ? f->lo[j] : x > f->hi[j] ? f->hi[j] : x;
	}
	for (int s = 0; f->stack_free && s < f->n_stacks; s++)
		stack_profile_resolve(&f->stacks[s]);   /* the means follow the terms */
}

/* One thread's share of an evaluation: runs first, first + stride, ...
 * Each run has its own cost models, engine and output slots, and the
 * profile is only read, so runs simulate independently; which thread ran
 * one changes nothing in its result. */
struct slice {
	struct fit *f;
	size_t first, stride;
};

static void *run_slice(void *arg)
{
	const struct slice *sl = arg;
	struct fit *f = sl->f;

	for (size_t i = sl->first; i < f->n_obs; i += sl->stride)
		f->rc[i] = simulate(&f->work, f->obs_stack[i] >= 0 ? &f->stacks[f->obs_stack[i]] : NULL,
				    &f->obs[i], f->cm[i],
				    &f->sim[i * EFIT_MAX_TARGETS],
				    f->jobs > 1 ? &f->errs[i] : f->err);
	return NULL;
}

/* Simulate every run at the current parameters, on f->jobs threads.  The
 * status is the first failing run's in run order (its error copied to
 * f->err), so it does not depend on the number of threads either. */
static int simulate_all(struct fit *f)
{
	struct slice sl[EFIT_MAX_JOBS];
	pthread_t th[EFIT_MAX_JOBS];
	size_t jobs = (size_t)f->jobs < f->n_obs ? (size_t)f->jobs : f->n_obs;
	size_t started = 1;

	if (jobs < 1)
		jobs = 1;
	for (size_t t = 0; t < jobs; t++)
		sl[t] = (struct slice){ .f = f, .first = t, .stride = jobs };
	for (; started < jobs; started++)
		if (pthread_create(&th[started], NULL, run_slice, &sl[started]))
			break;
	/* this thread runs slice 0, and any slice a thread could not start */
	run_slice(&sl[0]);
	for (size_t t = started; t < jobs; t++)
		run_slice(&sl[t]);
	for (size_t t = 1; t < started; t++)
		pthread_join(th[t], NULL);
	for (size_t i = 0; i < f->n_obs; i++)
		if (f->rc[i]) {
			if (f->jobs > 1 && f->err)
				*f->err = f->errs[i];
			return f->rc[i];
		}
	return 0;
}

/* Unweighted log residuals of every target at the current parameters. */
static int residuals(struct fit *f, double *r)
{
	size_t at = 0;
	int rc;

	f->evaluations++;
	rc = simulate_all(f);
	if (rc)
		return rc;
	for (size_t i = 0; i < f->n_obs; i++) {
		const struct efit_obs *o = &f->obs[i];
		const double *sim = &f->sim[i * EFIT_MAX_TARGETS];

		for (int k = 0; k < o->n_targets; k++) {
			double v = sim[k] > 0 ? sim[k] : 1e-9;

			if (!o->targets[k].report)
				r[at++] = log(v / o->targets[k].value);
		}
	}
	return 0;
}

static int f_cb(const gsl_vector *theta, void *ctx, gsl_vector *out)
{
	struct fit *f = ctx;
	int rc;

	set_params(f, theta);
	rc = residuals(f, out->data);
	if (rc) {
		if (!f->status)
			f->status = rc;
		return GSL_EDOM;
	}
	for (size_t i = 0; i < f->n_res; i++)
		out->data[i] *= f->w[i];
	return GSL_SUCCESS;
}

static int df_cb(const gsl_vector *theta, void *ctx, gsl_matrix *J)
{
	struct fit *f = ctx;
	gsl_vector *t = gsl_vector_alloc(theta->size);
	gsl_vector *r0 = gsl_vector_alloc(f->n_res), *r1 = gsl_vector_alloc(f->n_res);
	int rc = GSL_SUCCESS;

	if (!t || !r0 || !r1) {
		rc = GSL_ENOMEM;
		goto out;
	}
	gsl_vector_memcpy(t, theta);
	if (f_cb(t, f, r0) != GSL_SUCCESS) {
		rc = GSL_EDOM;
		goto out;
	}
	for (int j = 0; j < f->n_free; j++) {
		double x = gsl_vector_get(theta, j), h = FD_STEP;

		/* step inward at the upper bound, where a step out would be clamped */
		if (exp(x + h) > f->hi[j])
			h = -h;
		gsl_vector_set(t, j, x + h);
		if (f_cb(t, f, r1) != GSL_SUCCESS) {
			rc = GSL_EDOM;
			goto out;
		}
		for (size_t i = 0; i < f->n_res; i++)
			gsl_matrix_set(J, i, j, (r1->data[i] - r0->data[i]) / h);
		gsl_vector_set(t, j, x);
	}
out:
	set_params(f, theta);
	gsl_vector_free(t);
	gsl_vector_free(r0);
	gsl_vector_free(r1);
	return rc;
}

/* The Cauchy loss at theta, for the simplex; a failed simulation is a
 * wall (and its error is kept). */
static double loss_cb(const gsl_vector *theta, void *ctx)
{
	struct fit *f = ctx;
	double *r = f->w;     /* the weights are not used in this phase */
	double sum = 0.0;
	int rc;

	set_params(f, theta);
	rc = residuals(f, r);
	if (rc) {
		if (!f->status)
			f->status = rc;
		return GSL_POSINF;
	}
	for (size_t i = 0; i < f->n_res; i++) {
		double z = r[i] / CAUCHY_SCALE;

		sum += log1p(z * z);
	}
	return sum;
}

/* Phase 1: Nelder-Mead from theta; theta holds the best point found. */
static int simplex(struct fit *f, gsl_vector *theta, double *best)
{
	gsl_multimin_fminimizer *m = gsl_multimin_fminimizer_alloc(gsl_multimin_fminimizer_nmsimplex2,
								   (size_t)f->n_free);
	gsl_vector *step = gsl_vector_alloc((size_t)f->n_free);
	gsl_multimin_function fn = { .f = loss_cb, .n = (size_t)f->n_free, .params = f };
	int rc = 0;

	if (!m || !step) {
		rc = -ENOMEM;
		goto out;
	}
	gsl_vector_set_all(step, SIMPLEX_STEP);
	if (gsl_multimin_fminimizer_set(m, &fn, theta, step) != GSL_SUCCESS) {
		rc = f->status ? f->status : -ERANGE;
		goto out;
	}
	for (int it = 0; it < SIMPLEX_ITERS; it++) {
		if (gsl_multimin_fminimizer_iterate(m) != GSL_SUCCESS)
			break;
		if (gsl_multimin_test_size(gsl_multimin_fminimizer_size(m), 1e-3) == GSL_SUCCESS)
			break;
	}
	if (f->status) {
		rc = f->status;
		goto out;
	}
	gsl_vector_memcpy(theta, gsl_multimin_fminimizer_x(m));
	*best = gsl_multimin_fminimizer_minimum(m);
out:
	gsl_multimin_fminimizer_free(m);
	gsl_vector_free(step);
	return rc;
}

static void release_models(struct cost_model *(*cm)[2], size_t n)
{
	for (size_t i = 0; cm && i < n; i++) {
		cost_model_free(cm[i][0]);
		cost_model_free(cm[i][1]);
	}
	free(cm);
}

/* Is key a serving-stack term (and not an engine key)? */
static bool stack_key(const struct engine_profile *start, const char *key)
{
	struct engine_profile p = *start;
	struct stack_profile probe = { 0 };

	return !engine_profile_param(&p, key) && stack_profile_param(&probe, key);
}

/* The stacks the runs have (f->stacks, f->obs_stack), where a stack term
 * is free: one per distinct ec.stack of the runs whose stack is not
 * known, an empty one named "fitted" for runs without a stack. */
static int find_stacks(struct fit *f, const char *key, struct ss_error *err)
{
	for (size_t i = 0; i < f->n_obs; i++) {
		const struct stack_profile *st = f->obs[i].ec.stack;
		int s = 0;

		if (f->obs[i].stack_known)
			continue;
		while (s < f->n_stacks && f->stack_of[s] != st)
			s++;
		if (s == f->n_stacks) {
			if (s == EFIT_MAX_STACKS)
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "fit-engine: the runs have more than %d serving stacks to fit",
						    EFIT_MAX_STACKS);
			if (st)
				f->stacks[s] = *st;
			else
				snprintf(f->stacks[s].name, sizeof(f->stacks[s].name), "fitted");
			f->stack_of[s] = st;
			f->n_stacks++;
		}
		f->obs_stack[i] = s;
	}
	if (!f->n_stacks)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "fit-engine: '%s' is a serving-stack term, and every run's stack is known (engine-side clocks): nothing to fit it to",
				    key);
	return 0;
}

/* The values free_p[0..n_free) stand for (f->slot, bounds): an engine key
 * once, a stack term once per stack the runs have. */
static int free_values(struct fit *f, const struct engine_profile *start,
		       const struct efit_param *free_p, int n_free, struct ss_error *err)
{
	const struct efit_obs *obs = f->obs;
	size_t n_obs = f->n_obs;
	int rc = 0;

	f->obs_stack = malloc((n_obs ? n_obs : 1) * sizeof(*f->obs_stack));
	if (!f->obs_stack)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (size_t i = 0; i < n_obs; i++)
		f->obs_stack[i] = -1;
	for (int j = 0; j < n_free && !rc; j++) {
		const char *k = free_p[j].key;
		bool st = stack_key(start, k);

		/* the legacy keys act only where they are the runs' stack */
		if (!strncmp(k, "api_", 4) && n_obs && obs[0].ec.stack)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "fit-engine: '%s' is a legacy serving-stack key, and the runs have stack %s: free its terms (frontend_ms, ...) instead",
					    k, obs[0].ec.stack->name);
		if (st && !(n_obs && obs[0].ec.stack) && engine_profile_legacy_stack(start))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "fit-engine: '%s' is a serving-stack term, and profile %s's stack is its legacy api_in_ms/api_out_ms/api_cv: free those, or give --stack",
					    k, start->name);
		if ((!st && !engine_profile_param(&f->work, k)) || !(free_p[j].lo > 0) ||
		    !(free_p[j].hi >= free_p[j].lo) || !isfinite(free_p[j].hi))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "fit-engine: '%s' is not a numeric engine or serving-stack parameter with"
					    " bounds 0 < lo <= hi", k);
		if (st && !f->stack_free) {
			rc = find_stacks(f, k, err);
			f->stack_free = true;
		}
	}
	for (int j = 0; j < n_free && !rc; j++) {
		const char *k = free_p[j].key;
		bool st = stack_key(start, k);

		for (int s = 0; s < (st ? f->n_stacks : 1); s++) {
			int v = f->n_free++;

			f->slot[v] = st ? stack_profile_param(&f->stacks[s], k) :
				     engine_profile_param(&f->work, k);
			f->key[v] = k;
			f->stack_index[v] = st ? s : -1;
			f->lo[v] = free_p[j].lo;
			f->hi[v] = free_p[j].hi;
		}
	}
	return rc;
}

/* Which values the runs do not pin down (efit_result.flat, confounded):
 * from the weighted Jacobian J at the optimum and the covariance cov. */
static void identifiability(const struct fit *f, const gsl_matrix *J, const gsl_matrix *cov,
			    struct efit_result *out)
{
	double norm[EFIT_MAX_VALUES];

	for (int j = 0; j < f->n_free; j++) {
		gsl_vector_const_view c = gsl_matrix_const_column(J, (size_t)j);

		norm[j] = gsl_blas_dnrm2(&c.vector);
		/* a log-space change of the value that moves the log residuals
		 * by less than 1e-3 in all: nothing measured sees it */
		out->flat[j] = !(norm[j] >= 1e-3);
		out->confounded[j] = -1;
		out->correlation[j] = 0.0;
	}
	for (int j = 0; j < f->n_free; j++) {
		double best = 0.0;

		for (int k = 0; k < f->n_free && !out->flat[j]; k++) {
			double c;

			if (k == j || out->flat[k])
				continue;
			c = gsl_matrix_get(cov, (size_t)j, (size_t)k) /
			    sqrt(gsl_matrix_get(cov, (size_t)j, (size_t)j) *
				 gsl_matrix_get(cov, (size_t)k, (size_t)k));
			if (isfinite(c) && fabs(c) > fabs(best)) {
				best = c;
				if (fabs(c) >= EFIT_CONFOUNDED)
					out->confounded[j] = k;
			}
		}
		if (out->confounded[j] >= 0)
			out->correlation[j] = best;
	}
}

int efit_fit(const struct engine_profile *start, const struct efit_param *free_p, int n_free,
	     const struct efit_obs *obs, size_t n_obs, int jobs, struct efit_result *out,
	     struct ss_error *err)
{
	gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
	gsl_multifit_nlinear_workspace *ws = NULL;
	gsl_multifit_nlinear_fdf fdf = { 0 };
	gsl_matrix *cov = NULL;
	gsl_vector *theta = NULL, *simplex_theta = NULL;
	double simplex_loss = GSL_POSINF;
	struct fit *f;
	double *r = NULL, ss = 0.0, ape = 0.0;
	int rc = 0, info = 0;
	size_t iter = 0;

	memset(out, 0, sizeof(*out));
	if (n_free < 1 || n_free > EFIT_MAX_PARAMS)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "fit-engine: expected 1 to %d free parameters, got %d",
				    EFIT_MAX_PARAMS, n_free);
	f = calloc(1, sizeof(*f));
	if (!f)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	f->work = *start;
	f->obs = obs;
	f->n_obs = n_obs;
	f->err = err;
	f->jobs = jobs < 1 ? 1 : jobs > EFIT_MAX_JOBS ? EFIT_MAX_JOBS : jobs;
	rc = free_values(f, start, free_p, n_free, err);
	if (rc)
		goto out;
	for (size_t i = 0; i < n_obs; i++)
		for (int k = 0; k < obs[i].n_targets; k++)
			f->n_res += !obs[i].targets[k].report;
	if (f->n_res < (size_t)f->n_free) {
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "fit-engine: %zu measured figures cannot fit %d parameters",
				  f->n_res, f->n_free);
		goto out;
	}
	f->cm = calloc(n_obs, sizeof(*f->cm));
	f->w = malloc(f->n_res * sizeof(*f->w));
	f->sim = malloc((n_obs ? n_obs : 1) * EFIT_MAX_TARGETS * sizeof(*f->sim));
	f->rc = calloc(n_obs ? n_obs : 1, sizeof(*f->rc));
	f->errs = calloc(n_obs ? n_obs : 1, sizeof(*f->errs));
	r = malloc(f->n_res * sizeof(*r));
	theta = gsl_vector_alloc((size_t)f->n_free);
	simplex_theta = gsl_vector_alloc((size_t)f->n_free);
	if (!f->cm || !f->w || !f->sim || !f->rc || !f->errs || !r || !theta || !simplex_theta) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n_obs && !rc; i++)
		rc = build_models(&f->work, &obs[i], f->cm[i], err);
	if (rc)
		goto out;
	for (int j = 0; j < f->n_free; j++) {
		double x = *f->slot[j];

		x = x < f->lo[j] ? f->lo[j] : x > f->hi[j] ? f->hi[j] : x;
		gsl_vector_set(theta, j, log(x));
	}
	/* the simplex, restarted from its optimum while that still improves
	 * (a collapsed simplex stops in any dip; a fresh one can step out) */
	for (int restart = 0; restart < 4; restart++) {
		double best = GSL_POSINF;

		rc = simplex(f, theta, &best);
		if (rc == -ENOMEM)
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		if (rc)
			goto out;
		if (!(best < simplex_loss - 1e-9))
			break;
		simplex_loss = best;
		gsl_vector_memcpy(simplex_theta, theta);
	}
	gsl_vector_memcpy(theta, simplex_theta);
	set_params(f, theta);
	rc = residuals(f, r);
	if (rc)
		goto out;
	for (size_t i = 0; i < f->n_res; i++) {
		double z = r[i] / CAUCHY_SCALE;

		f->w[i] = 1.0 / sqrt(1.0 + z * z);
	}

	fdf.f = f_cb;
	fdf.df = df_cb;
	fdf.n = f->n_res;
	fdf.p = (size_t)f->n_free;
	fdf.params = f;
	ws = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, f->n_res, (size_t)f->n_free);
	if (!ws) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	for (int round = 0; round < IRLS_ROUNDS; round++) {
		int st = gsl_multifit_nlinear_init(theta, &fdf, ws);

		if (st == GSL_SUCCESS)
			st = gsl_multifit_nlinear_driver(60, 1e-5, 1e-8, 1e-8, NULL, NULL, &info, ws);
		if (f->status) {
			rc = f->status;
			goto out;
		}
		if (st != GSL_SUCCESS && st != GSL_EMAXITER && st != GSL_ENOPROG) {
			rc = ss_error_set(err, -ERANGE, NULL, 0, "fit-engine: the fit failed: %s",
					  gsl_strerror(st));
			goto out;
		}
		iter += gsl_multifit_nlinear_niter(ws);
		gsl_vector_memcpy(theta, gsl_multifit_nlinear_position(ws));
		set_params(f, theta);
		rc = residuals(f, r);
		if (rc)
			goto out;
		for (size_t i = 0; i < f->n_res; i++) {
			double z = r[i] / CAUCHY_SCALE;

			f->w[i] = 1.0 / sqrt(1.0 + z * z);
		}
	}
	{
		/* keep the simplex's optimum if the polish made the loss worse */
		double loss = 0.0;

		for (size_t i = 0; i < f->n_res; i++)
			loss += log1p((r[i] / CAUCHY_SCALE) * (r[i] / CAUCHY_SCALE));
		if (loss > simplex_loss) {
			gsl_vector_memcpy(theta, simplex_theta);
			set_params(f, theta);
			rc = residuals(f, r);
			if (rc)
				goto out;
		}
	}
	/* the covariance of theta at the optimum, from the weighted Jacobian */
	cov = gsl_matrix_alloc((size_t)f->n_free, (size_t)f->n_free);
	if (!cov) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	gsl_multifit_nlinear_covar(gsl_multifit_nlinear_jac(ws), 0.0, cov);
	for (size_t i = 0; i < f->n_res; i++) {
		ss += r[i] * r[i];
		ape += fabs(expm1(r[i]));
	}
	out->profile = f->work;
	if (f->n_stacks)
		out->stack = f->stacks[0];
	else if (n_obs && obs[0].ec.stack)
		out->stack = *obs[0].ec.stack;
	else
		snprintf(out->stack.name, sizeof(out->stack.name), "fitted");
	out->has_stack = f->stack_free;
	out->n_stacks = f->n_stacks;
	for (int s = 0; s < f->n_stacks; s++) {
		out->stacks[s] = f->stacks[s];
		out->stack_of[s] = f->stack_of[s];
	}
	out->n_params = f->n_free;
	identifiability(f, gsl_multifit_nlinear_jac(ws), cov, out);
	out->rms_log = sqrt(ss / (double)f->n_res);
	out->mape = ape / (double)f->n_res;
	out->iterations = (int)iter;
	out->evaluations = f->evaluations;
	{
		/* residual variance of the weighted fit, at least one dof */
		double s2 = 0.0;
		size_t dof = f->n_res > (size_t)f->n_free ? f->n_res - (size_t)f->n_free : 1;

		for (size_t i = 0; i < f->n_res; i++)
			s2 += f->w[i] * f->w[i] * r[i] * r[i];
		s2 /= (double)dof;
		for (int j = 0; j < f->n_free; j++) {
			double sd = sqrt(s2 * gsl_matrix_get(cov, j, j));

			out->key[j] = f->key[j];
			out->stack_index[j] = f->stack_index[j];
			out->value[j] = *f->slot[j];
			out->ci_lo[j] = isfinite(sd) ? out->value[j] * exp(-1.96 * sd) : 0.0;
			out->ci_hi[j] = isfinite(sd) ? out->value[j] * exp(1.96 * sd) : INFINITY;
			/* moved by the figures, but too little to be told: its
			 * interval spans more than EFIT_LOG_SD_MAX in log space */
			if (!(sd <= EFIT_LOG_SD_MAX))
				out->flat[j] = true;
		}
	}
out:
	gsl_multifit_nlinear_free(ws);
	gsl_matrix_free(cov);
	gsl_vector_free(theta);
	gsl_vector_free(simplex_theta);
	release_models(f->cm, n_obs);
	free(f->w);
	free(f->sim);
	free(f->rc);
	free(f->errs);
	free(f->obs_stack);
	free(f);
	free(r);
	return rc;
}

int efit_predict_fitted(const struct efit_result *res, const struct efit_obs *o, double *sim,
			struct ss_error *err)
{
	const struct stack_profile *st = NULL;
	struct cost_model *cm[2];
	int rc;

	/* o's deployment's fitted stack; one the fit never saw keeps its own */
	for (int s = 0; res->has_stack && !o->stack_known && s < res->n_stacks && !st; s++)
		if (res->stack_of[s] == o->ec.stack)
			st = &res->stacks[s];
	rc = build_models(&res->profile, o, cm, err);
	if (!rc)
		rc = simulate(&res->profile, st, o, cm, sim, err);
	cost_model_free(cm[0]);
	cost_model_free(cm[1]);
	return rc;
}

int efit_leave_group_out(const struct engine_profile *start, const struct efit_param *free_p,
			 int n_free, const struct efit_obs *obs, size_t n_obs, int jobs, double *pred,
			 struct ss_error *err)
{
	struct efit_obs *rest = malloc(n_obs * sizeof(*rest));
	bool *done = calloc(n_obs, sizeof(*done));
	struct efit_result *res = malloc(sizeof(*res));
	int rc = 0;

	if (!rest || !done || !res) {
		free(rest);
		free(done);
		free(res);
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	}
	for (size_t g = 0; g < n_obs && !rc; g++) {
		const char *grp = obs[g].group ? obs[g].group : "";
		size_t n = 0;

		if (done[g])
			continue;
		for (size_t i = 0; i < n_obs; i++)
			if (strcmp(obs[i].group ? obs[i].group : "", grp))
				rest[n++] = obs[i];
		if (!n) {
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "fit-engine: every run is in group '%s': nothing to fit on"
					  " when it is left out", grp);
			break;
		}
		rc = efit_fit(start, free_p, n_free, rest, n, jobs, res, err);
		for (size_t i = 0; i < n_obs && !rc; i++) {
			if (strcmp(obs[i].group ? obs[i].group : "", grp))
				continue;
			done[i] = true;
			rc = efit_predict_fitted(res, &obs[i], &pred[i * EFIT_MAX_TARGETS], err);
		}
	}
	free(rest);
	free(done);
	free(res);
	return rc;
}
