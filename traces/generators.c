/* servesim — synthetic workloads and workload_build().
 *
 * A generated workload is an arrival process (gaps between requests) times a
 * length distribution (prompt and output tokens per request).  The two draw
 * from separate seeded streams, SS_RNG_ARRIVALS and SS_RNG_LENGTHS, so that
 * request i has the same lengths whatever the arrival process, and the same
 * arrival time whatever the lengths.  Request 0 arrives at time 0; request i
 * at the sum of i gaps.  --tenants draws from a third stream, SS_RNG_TENANTS,
 * once per request of the finished workload, in order.
 */
#include "workload-int.h"
#include "workload-model.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "params.h"
#include "rng.h"
#include "sstime.h"

/* Largest arrival time a generator or a rescaled trace may produce (ns):
 * about 292 years, INT64_MAX less headroom for rounding. */
#define ARRIVAL_MAX_NS 9.2e18

enum arrival_kind { ARR_POISSON, ARR_GAMMA, ARR_MMPP, ARR_CURVE };

/* Most states an mmpp spec may name. */
#define MMPP_STATES_MAX 16

struct arrival_gen {
	enum arrival_kind kind;
	double rate;    /* mean request rate (req/s), > 0; mmpp: the stationary
			 * mean sum(Rk Sk) / sum(Sk) */
	double shape;   /* gamma gap shape 1/cv^2 */
	double scale;   /* gamma gap scale cv^2/rate (s) */
	/* mmpp (on-off is its two-state case with rate 0 off): state k emits
	 * Poisson arrivals at mrate[k] req/s (>= 0) for an exponential time of
	 * mean msoj[k] s, then passes to state (k + 1) mod nstates */
	int nstates;
	double mrate[MMPP_STATES_MAX];
	double msoj[MMPP_STATES_MAX];
	const struct rate_curve *curve;   /* --rate-curve (owned by the caller) */
};

/* Where an mmpp is between draws: its state and the time left in it (s);
 * a rate curve: the requests expected by the last arrival and its time. */
struct arrival_state {
	int k;
	double left;
	double lam, t;
};

enum lengths_kind { LEN_FIXED, LEN_UNIFORM, LEN_LOGNORMAL, LEN_GEOMETRIC, LEN_EMPIRICAL };

struct lengths_gen {
	enum lengths_kind kind;
	int64_t prompt, output;          /* fixed; geometric uses prompt (tokens) */
	int64_t pmin, pmax, omin, omax;  /* uniform, inclusive (tokens) */
	double pmu, psigma, omu, osigma; /* lognormal parameters of ln(tokens) */
	int64_t pclamp, oclamp;          /* lognormal upper clamps (tokens) */
	double op;                       /* geometric success probability 1/mean */
	struct workload emp;             /* empirical: the rows to sample */
};

/* Most tenants --tenants may name (N, or the number of weights). */
#define TENANTS_MAX 4096

/* --tenants: tenant of each request, uniform on 0..n-1 (cum NULL) or tenant i
 * with probability w_i / sum (cum[i] = w_0 + ... + w_i, so cum[n-1] = sum). */
struct tenants_gen {
	size_t n;       /* tenants, 1..TENANTS_MAX; 0 = keep the source's */
	double *cum;    /* n cumulative weights (no unit), or NULL for uniform */
};

/* ---- spec parsing ------------------------------------------------------ */

/* Limits of the generator parameters (beyond them the sampled values stop
 * meaning anything: NaN lengths, gaps of 0 or infinity, wrapped counts). */
#define RATE_MAX 1e9            /* req/s: one request a nanosecond */
#define GAMMA_CV_MIN 1e-3       /* gamma gap cv: shape 1/cv^2 <= 1e6 */
#define GAMMA_CV_MAX 1e3        /* shape >= 1e-6 */
#define LOGN_CV_MAX 1e3         /* lognormal cv: sigma^2 = ln(1 + cv^2) <= 13.8 */
#define MEAN_MAX 2147483647.0   /* a mean token count must be one a request can have */

static int need_int(struct ss_params *p, const char *key, const char *usage,
		    int64_t min, int64_t *out, struct ss_error *err)
{
	int rc;

	if (!ss_params_has(p, key))
		return ss_error_set(err, -EINVAL, NULL, 0, "%s %s: missing '%s' (expected %s)",
				    p->what, p->name, key, usage);
	rc = ss_params_int(p, key, 0, out, err);
	if (rc)
		return rc;
	if (*out < min || *out > INT32_MAX)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s %s: expected %s >= %lld (and <= %d), got %lld",
				    p->what, p->name, key, (long long)min, INT32_MAX,
				    (long long)*out);
	return 0;
}

/* A required number > 0 (min_one: >= 1). */
static int need_pos(struct ss_params *p, const char *key, const char *usage,
		    bool min_one, double *out, struct ss_error *err)
{
	int rc;

	if (!ss_params_has(p, key))
		return ss_error_set(err, -EINVAL, NULL, 0, "%s %s: missing '%s' (expected %s)",
				    p->what, p->name, key, usage);
	rc = ss_params_double(p, key, 0, out, err);
	if (rc)
		return rc;
	if (min_one ? !(*out >= 1) : !(*out > 0))
		return ss_error_set(err, -EINVAL, NULL, 0, "%s %s: expected %s %s, got %g",
				    p->what, p->name, key, min_one ? ">= 1" : "> 0", *out);
	return 0;
}

/* A mean token count (lognormal, geometric): a number in 1..MEAN_MAX. */
static int need_mean(struct ss_params *p, const char *key, const char *usage,
		     double *out, struct ss_error *err)
{
	int rc = need_pos(p, key, usage, true, out, err);

	if (!rc && *out > MEAN_MAX)
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "%s %s: expected %s <= %.0f tokens, got %g",
				  p->what, p->name, key, MEAN_MAX, *out);
	return rc;
}

/* A lognormal cv: a number in (0, LOGN_CV_MAX]. */
static int need_cv(struct ss_params *p, const char *key, const char *usage,
		   double *out, struct ss_error *err)
{
	int rc = need_pos(p, key, usage, false, out, err);

	if (!rc && *out > LOGN_CV_MAX)
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "%s %s: expected %s <= %g, got %g",
				  p->what, p->name, key, LOGN_CV_MAX, *out);
	return rc;
}

/* mmpp and on-off limits: a mean time in a state up to 1e9 s (31 years),
 * and a cycle through the states holding on average at least
 * MMPP_CYCLE_MIN arrivals (sum Rk Sk), so that drawing a gap never walks
 * through more than about a thousand state changes per request. */
#define MMPP_SOJ_MAX 1e9
#define MMPP_CYCLE_MIN 1e-3

static const char usage_mmpp[] =
	"mmpp:rates=R1,R2[,...],switch_s=S1,S2[,...] with Rk in req/s and Sk in s";
static const char usage_onoff[] = "onoff:rate=R,on_s=A,off_s=B with R in req/s, A and B in s";

/* Check an mmpp's states (rates and mean sojourns already in a) and set
 * its stationary mean rate.  what names the process in errors. */
static int mmpp_finish(struct arrival_gen *a, const char *what, struct ss_error *err)
{
	double rs = 0, ss = 0;

	for (int k = 0; k < a->nstates; k++) {
		if (!(a->mrate[k] >= 0) || a->mrate[k] > RATE_MAX)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--arrival %s: expected rates from 0 to %g req/s, got %g",
					    what, RATE_MAX, a->mrate[k]);
		if (!(a->msoj[k] > 0) || a->msoj[k] > MMPP_SOJ_MAX)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--arrival %s: expected mean times in a state > 0 and <= %g s, got %g",
					    what, MMPP_SOJ_MAX, a->msoj[k]);
		rs += a->mrate[k] * a->msoj[k];
		ss += a->msoj[k];
	}
	if (!(rs >= MMPP_CYCLE_MIN))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--arrival %s: expected a cycle of the states to hold at least %g "
				    "arrivals on average (sum of rate x time), got %g",
				    what, MMPP_CYCLE_MIN, rs);
	a->kind = ARR_MMPP;
	a->rate = rs / ss;
	return 0;
}

/* "rates=R1,R2,...,switch_s=S1,S2,..." (after "mmpp:"): the generic
 * ss_params syntax cannot carry lists, since ',' separates its keys, so a
 * bare number here continues the list of the key before it. */
static int mmpp_parse(const char *body, struct arrival_gen *a, struct ss_error *err)
{
	char item[64];
	double *list = NULL, v;
	int *count = NULL, nr = 0, ns = 0;
	bool seen_r = false, seen_s = false;
	const char *p = body, *val;
	size_t len;

	for (;;) {
		len = strcspn(p, ",");
		if (len == 0 || len >= sizeof(item))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--arrival mmpp: malformed parameter '%.*s' (expected %s)",
					    (int)(len > 40 ? 40 : len), p, usage_mmpp);
		memcpy(item, p, len);
		item[len] = '\0';
		val = strchr(item, '=');
		if (val) {
			val++;
			if (!strncmp(item, "rates=", 6) && !seen_r) {
				list = a->mrate, count = &nr, seen_r = true;
			} else if (!strncmp(item, "switch_s=", 9) && !seen_s) {
				list = a->msoj, count = &ns, seen_s = true;
			} else {
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "--arrival mmpp: unknown or repeated parameter '%.*s' (expected %s)",
						    (int)(val - item - 1), item, usage_mmpp);
			}
		} else {
			val = item;
			if (!list)
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "--arrival mmpp: '%s' before any key (expected %s)",
						    item, usage_mmpp);
		}
		if (*count == MMPP_STATES_MAX)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--arrival mmpp: more than %d states", MMPP_STATES_MAX);
		if (!ss_parse_double(val, &v))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--arrival mmpp: expected a number, got '%s' (expected %s)",
					    val, usage_mmpp);
		list[(*count)++] = v;
		p += len;
		if (!*p)
			break;
		p++;
	}
	if (!seen_r || !seen_s)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--arrival mmpp: missing '%s' (expected %s)",
				    seen_r ? "switch_s" : "rates", usage_mmpp);
	if (nr != ns || nr < 2)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--arrival mmpp: expected as many rates as switch_s, at least 2, "
				    "got %d and %d (expected %s)", nr, ns, usage_mmpp);
	a->nstates = nr;
	return mmpp_finish(a, "mmpp", err);
}

static int arrival_parse(const char *spec, struct arrival_gen *a, struct ss_error *err)
{
	static const char usage_p[] = "poisson:rate=R with R in req/s";
	static const char usage_g[] = "gamma:rate=R,cv=C with R in req/s";
	struct ss_params p;
	double cv;
	int rc;

	*a = (struct arrival_gen){ 0 };
	if (!strncmp(spec, "mmpp:", 5))
		return mmpp_parse(spec + 5, a, err);
	rc = ss_params_parse(&p, "--arrival", spec, true, err);
	if (rc)
		return rc;
	if (!strcmp(p.name, "poisson")) {
		a->kind = ARR_POISSON;
		rc = need_pos(&p, "rate", usage_p, false, &a->rate, err);
	} else if (!strcmp(p.name, "gamma")) {
		a->kind = ARR_GAMMA;
		rc = need_pos(&p, "rate", usage_g, false, &a->rate, err);
		if (!rc)
			rc = need_pos(&p, "cv", usage_g, false, &cv, err);
		/* shape 1/cv^2 and scale cv^2/rate must stay finite and > 0 */
		if (!rc && (cv < GAMMA_CV_MIN || cv > GAMMA_CV_MAX))
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "--arrival gamma: expected cv from %g to %g, got %g",
					  GAMMA_CV_MIN, GAMMA_CV_MAX, cv);
		if (!rc) {
			a->shape = 1 / (cv * cv);
			a->scale = cv * cv / a->rate;
		}
	} else if (!strcmp(p.name, "onoff")) {
		/* a two-state mmpp whose second state emits nothing */
		a->nstates = 2;
		rc = need_pos(&p, "rate", usage_onoff, false, &a->mrate[0], err);
		if (!rc)
			rc = need_pos(&p, "on_s", usage_onoff, false, &a->msoj[0], err);
		if (!rc)
			rc = need_pos(&p, "off_s", usage_onoff, false, &a->msoj[1], err);
		if (!rc)
			rc = mmpp_finish(a, "onoff", err);
	} else {
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--arrival: unknown process '%s' (expected %s, %s, %s or %s)",
				    p.name, usage_p, usage_g, usage_mmpp, usage_onoff);
	}
	if (!rc && a->rate > RATE_MAX)
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "--arrival %s: expected rate <= %g req/s (one request a nanosecond), got %g",
				  p.name, RATE_MAX, a->rate);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	return rc;
}

/* --think-time (workload.h): the existing spec syntax (ss_params) and
 * checks (need_pos, the gamma cv range of --arrival); times in ms as
 * --slo gives them. */
int think_time_parse(const char *spec, struct think_time *tt, struct ss_error *err)
{
	static const char usage[] =
		"none, constant:ms=T, exponential:mean_ms=T or gamma:mean_ms=T,cv=C (T in ms)";
	struct ss_params p;
	double mean = 0, cv = 1;
	int rc;

	*tt = (struct think_time){ .kind = THINK_NONE };
	if (!spec)
		return 0;
	rc = ss_params_parse(&p, "--think-time", spec, true, err);
	if (rc)
		return rc;
	if (!strcmp(p.name, "none")) {
		rc = 0;
	} else if (!strcmp(p.name, "constant")) {
		tt->kind = THINK_CONSTANT;
		if (!ss_params_has(&p, "ms"))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--think-time constant: missing 'ms' (expected constant:ms=T, T in ms)");
		rc = ss_params_double(&p, "ms", 0, &mean, err);
		if (!rc && !(mean >= 0))
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "--think-time constant: expected ms >= 0, got %g", mean);
	} else if (!strcmp(p.name, "exponential")) {
		tt->kind = THINK_EXPONENTIAL;
		rc = need_pos(&p, "mean_ms", "exponential:mean_ms=T with T in ms", false, &mean, err);
	} else if (!strcmp(p.name, "gamma")) {
		tt->kind = THINK_GAMMA;
		rc = need_pos(&p, "mean_ms", "gamma:mean_ms=T,cv=C with T in ms", false, &mean, err);
		if (!rc)
			rc = need_pos(&p, "cv", "gamma:mean_ms=T,cv=C with T in ms", false, &cv, err);
		if (!rc && (cv < GAMMA_CV_MIN || cv > GAMMA_CV_MAX))
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "--think-time gamma: expected cv from %g to %g, got %g",
					  GAMMA_CV_MIN, GAMMA_CV_MAX, cv);
	} else {
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--think-time: unknown distribution '%s' (expected %s)", p.name, usage);
	}
	if (!rc && mean > THINK_MEAN_MAX_MS)
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "--think-time %s: expected a mean <= %g ms (1000 hours), got %g",
				  p.name, THINK_MEAN_MAX_MS, mean);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	if (rc)
		return rc;
	tt->mean_s = mean / 1e3;
	if (tt->kind == THINK_GAMMA) {
		tt->shape = 1 / (cv * cv);
		tt->scale = tt->mean_s * cv * cv;
	}
	return 0;
}

bool think_time_draw(const struct think_time *tt, gsl_rng *r, int64_t *ns)
{
	double s;

	switch (tt->kind) {
	case THINK_NONE:
		*ns = 0;
		return true;
	case THINK_CONSTANT:
		s = tt->mean_s;
		break;
	case THINK_EXPONENTIAL:
		s = gsl_ran_exponential(r, tt->mean_s);
		break;
	case THINK_GAMMA:
	default:
		s = gsl_ran_gamma(r, tt->shape, tt->scale);
		break;
	}
	return ss_time_from_s(s, ns);
}

void think_time_describe(const struct think_time *tt, char *buf, size_t len)
{
	switch (tt->kind) {
	case THINK_NONE:
		snprintf(buf, len, "none");
		break;
	case THINK_CONSTANT:
		snprintf(buf, len, "constant %g ms", tt->mean_s * 1e3);
		break;
	case THINK_EXPONENTIAL:
		snprintf(buf, len, "exponential mean %g ms", tt->mean_s * 1e3);
		break;
	case THINK_GAMMA:
		snprintf(buf, len, "gamma mean %g ms cv %g", tt->mean_s * 1e3, sqrt(1 / tt->shape));
		break;
	}
}

/* Lognormal with the given mean and coefficient of variation:
 * sigma^2 = ln(1 + cv^2), mu = ln(mean) - sigma^2 / 2. */
static void lognormal_params(double mean, double cv, double *mu, double *sigma)
{
	double s2 = log1p(cv * cv);

	*sigma = sqrt(s2);
	*mu = log(mean) - s2 / 2;
}

static int lengths_parse(const char *spec, struct lengths_gen *lg, struct ss_error *err)
{
	static const char u_fixed[] = "fixed:prompt=P,output=O";
	static const char u_uni[] =
		"uniform:prompt_min=,prompt_max=,output_min=,output_max=";
	static const char u_logn[] =
		"lognormal:prompt_mean=,prompt_cv=,output_mean=,output_cv=[,prompt_max=,output_max=]";
	static const char u_geo[] = "geometric:prompt=P,output_mean=M";
	static const char u_emp[] = "empirical:FILE";
	struct ss_params p;
	double pm, pcv, om, ocv, m;
	const char *file;
	int rc;

	rc = ss_params_parse(&p, "--lengths", spec, true, err);
	if (rc)
		return rc;
	if (!strcmp(p.name, "fixed")) {
		lg->kind = LEN_FIXED;
		if ((rc = need_int(&p, "prompt", u_fixed, 1, &lg->prompt, err)) ||
		    (rc = need_int(&p, "output", u_fixed, 1, &lg->output, err)))
			return rc;
	} else if (!strcmp(p.name, "uniform")) {
		lg->kind = LEN_UNIFORM;
		if ((rc = need_int(&p, "prompt_min", u_uni, 1, &lg->pmin, err)) ||
		    (rc = need_int(&p, "prompt_max", u_uni, 1, &lg->pmax, err)) ||
		    (rc = need_int(&p, "output_min", u_uni, 1, &lg->omin, err)) ||
		    (rc = need_int(&p, "output_max", u_uni, 1, &lg->omax, err)))
			return rc;
		if (lg->pmin > lg->pmax)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--lengths uniform: expected prompt_min <= prompt_max, got %lld > %lld",
					    (long long)lg->pmin, (long long)lg->pmax);
		if (lg->omin > lg->omax)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--lengths uniform: expected output_min <= output_max, got %lld > %lld",
					    (long long)lg->omin, (long long)lg->omax);
	} else if (!strcmp(p.name, "lognormal")) {
		lg->kind = LEN_LOGNORMAL;
		if ((rc = need_mean(&p, "prompt_mean", u_logn, &pm, err)) ||
		    (rc = need_cv(&p, "prompt_cv", u_logn, &pcv, err)) ||
		    (rc = need_mean(&p, "output_mean", u_logn, &om, err)) ||
		    (rc = need_cv(&p, "output_cv", u_logn, &ocv, err)))
			return rc;
		lg->pclamp = lg->oclamp = INT32_MAX;
		if ((ss_params_has(&p, "prompt_max") &&
		     (rc = need_int(&p, "prompt_max", u_logn, 1, &lg->pclamp, err))) ||
		    (ss_params_has(&p, "output_max") &&
		     (rc = need_int(&p, "output_max", u_logn, 1, &lg->oclamp, err))))
			return rc;
		lognormal_params(pm, pcv, &lg->pmu, &lg->psigma);
		lognormal_params(om, ocv, &lg->omu, &lg->osigma);
	} else if (!strcmp(p.name, "geometric")) {
		lg->kind = LEN_GEOMETRIC;
		if ((rc = need_int(&p, "prompt", u_geo, 1, &lg->prompt, err)) ||
		    (rc = need_mean(&p, "output_mean", u_geo, &m, err)))
			return rc;
		lg->op = 1 / m;
	} else if (!strcmp(p.name, "empirical")) {
		lg->kind = LEN_EMPIRICAL;
		file = ss_params_str(&p, "_", NULL);
		if (!file)
			file = ss_params_str(&p, "file", NULL);
		if (!file || !*file)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--lengths empirical: missing trace file (expected %s)", u_emp);
		rc = ss_params_check_unused(&p, err);
		if (rc)
			return rc;
		return trace_read(&lg->emp, file, TRACE_AUTO, err);
	} else {
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--lengths: unknown distribution '%s' (expected %s, %s, %s, %s or %s)",
				    p.name, u_fixed, u_uni, u_logn, u_geo, u_emp);
	}
	return ss_params_check_unused(&p, err);
}

static int tenants_bad(const char *spec, const char *why, struct ss_error *err)
{
	return ss_error_set(err, -EINVAL, NULL, 0,
			    "--tenants: expected N (1..%d) or comma-separated positive weights, got '%.200s'%s",
			    TENANTS_MAX, spec, why);
}

/* "N" or "W0,W1,...,Wk" (at least two weights > 0) into tg; on success the
 * caller owns tg->cum. */
static int tenants_parse(const char *spec, struct tenants_gen *tg, struct ss_error *err)
{
	char item[64], why[128];
	const char *p = spec;
	size_t n = 1, len;
	double w, sum = 0;
	int64_t v;

	if (!strchr(spec, ',')) {
		if (!ss_parse_int64(spec, &v) || v < 1 || v > TENANTS_MAX)
			return tenants_bad(spec, "", err);
		tg->n = (size_t)v;
		return 0;
	}
	for (p = spec; *p; p++)
		n += *p == ',';
	if (n > TENANTS_MAX) {
		snprintf(why, sizeof(why), " (%zu weights, more than %d)", n, TENANTS_MAX);
		return tenants_bad(spec, why, err);
	}
	tg->cum = malloc(n * sizeof(*tg->cum));
	if (!tg->cum)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (size_t i = 0, p0 = 0; i < n; i++) {
		len = strcspn(spec + p0, ",");
		snprintf(item, sizeof(item), "%.*s", (int)len, spec + p0);
		if (len >= sizeof(item) || !ss_parse_double(item, &w) || !(w > 0)) {
			snprintf(why, sizeof(why), " (weight %zu is '%.40s', expected a number > 0)",
				 i + 1, item);
			goto bad;
		}
		sum += w;
		tg->cum[i] = sum;
		p0 += len + 1;
	}
	if (!isfinite(sum)) {
		snprintf(why, sizeof(why), " (the weights add up to more than %g)", DBL_MAX);
		goto bad;
	}
	tg->n = n;
	return 0;
bad:
	free(tg->cum);
	tg->cum = NULL;
	return tenants_bad(spec, why, err);
}

/* ---- sampling ---------------------------------------------------------- */

/* An mmpp's state at request 0, which arrives at time 0: state k with the
 * probability that an arrival finds it there, Rk Sk / sum(Rj Sj) (so an
 * on-off process starts on), and an exponential time left in it (a state's
 * sojourn is memoryless).  Poisson and gamma draw nothing here, so their
 * workloads do not depend on this. */
static void arrival_start(const struct arrival_gen *a, struct arrival_state *st, gsl_rng *r)
{
	double u, sum = 0;

	*st = (struct arrival_state){ 0 };
	if (a->kind != ARR_MMPP)
		return;
	for (int k = 0; k < a->nstates; k++)
		sum += a->mrate[k] * a->msoj[k];
	u = gsl_rng_uniform(r) * sum;
	for (st->k = 0; st->k < a->nstates - 1; st->k++) {
		u -= a->mrate[st->k] * a->msoj[st->k];
		if (u < 0)
			break;
	}
	st->left = gsl_ran_exponential(r, a->msoj[st->k]);
}

/* Seconds until the next request. */
static double arrival_gap(const struct arrival_gen *a, struct arrival_state *st, gsl_rng *r)
{
	double gap = 0, g;

	if (a->kind == ARR_POISSON)
		return gsl_ran_exponential(r, 1 / a->rate);
	if (a->kind == ARR_GAMMA)
		return gsl_ran_gamma(r, a->shape, a->scale);
	if (a->kind == ARR_CURVE) {
		/* a unit-rate Poisson step of the expected count, mapped to
		 * time through the curve (traces/rate-curve.c) */
		st->lam += gsl_ran_exponential(r, 1);
		g = rate_curve_time(a->curve, st->lam);
		gap = g - st->t;
		st->t = g;
		return gap;
	}
	/* mmpp: an exponential gap at the state's rate if it ends before the
	 * state does; else move to the next state and draw again (both
	 * exponentials are memoryless, so this is exact) */
	for (;;) {
		g = a->mrate[st->k] > 0 ? gsl_ran_exponential(r, 1 / a->mrate[st->k]) : INFINITY;
		if (g < st->left) {
			st->left -= g;
			return gap + g;
		}
		gap += st->left;
		st->k = (st->k + 1) % a->nstates;
		st->left = gsl_ran_exponential(r, a->msoj[st->k]);
	}
}

static int32_t lognormal_tokens(gsl_rng *r, double mu, double sigma, int64_t clamp)
{
	double v = round(gsl_ran_lognormal(r, mu, sigma));

	if (!(v >= 1))          /* NaN too, though the limits above exclude it */
		return 1;
	if (v > (double)clamp)
		return (int32_t)clamp;
	return (int32_t)v;
}

/* gsl_ran_geometric(r, p) drawn the same way (so the same seed gives the
 * same lengths), but clamped to INT32_MAX in double: GSL converts to
 * unsigned int, which wraps (or is undefined) for a draw above 2^32 -- with
 * a mean near 2^31 one draw in eight. */
static int32_t geometric_tokens(gsl_rng *r, double p)
{
	double u = gsl_rng_uniform_pos(r), k;

	if (p == 1)
		return 1;
	k = log(u) / log(1 - p) + 1;
	return k >= INT32_MAX ? INT32_MAX : (int32_t)k;
}

static void lengths_sample(const struct lengths_gen *lg, gsl_rng *r, struct wl_request *q)
{
	const struct wl_request *e;

	switch (lg->kind) {
	case LEN_FIXED:
		q->prompt_tokens = (int32_t)lg->prompt;
		q->output_tokens = (int32_t)lg->output;
		break;
	case LEN_UNIFORM:
		q->prompt_tokens = (int32_t)(lg->pmin +
			(int64_t)gsl_rng_uniform_int(r, (unsigned long)(lg->pmax - lg->pmin + 1)));
		q->output_tokens = (int32_t)(lg->omin +
			(int64_t)gsl_rng_uniform_int(r, (unsigned long)(lg->omax - lg->omin + 1)));
		break;
	case LEN_LOGNORMAL:
		q->prompt_tokens = lognormal_tokens(r, lg->pmu, lg->psigma, lg->pclamp);
		q->output_tokens = lognormal_tokens(r, lg->omu, lg->osigma, lg->oclamp);
		break;
	case LEN_GEOMETRIC:
		q->prompt_tokens = (int32_t)lg->prompt;
		q->output_tokens = geometric_tokens(r, lg->op);
		break;
	case LEN_EMPIRICAL:
		e = &lg->emp.req[gsl_rng_uniform_int(r, (unsigned long)lg->emp.n)];
		q->prompt_tokens = e->prompt_tokens;
		q->output_tokens = e->output_tokens;
		break;
	}
}

int wl_lengths_new(const char *spec, struct lengths_gen **out, struct ss_error *err)
{
	struct lengths_gen *lg = calloc(1, sizeof(*lg));
	int rc;

	*out = NULL;
	if (!lg)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	workload_init(&lg->emp);
	rc = lengths_parse(spec, lg, err);
	if (rc) {
		wl_lengths_free(lg);
		return rc;
	}
	*out = lg;
	return 0;
}

void wl_lengths_draw(const struct lengths_gen *lg, gsl_rng *r, int32_t *prompt, int32_t *output)
{
	struct wl_request q = { 0 };

	lengths_sample(lg, r, &q);
	*prompt = q.prompt_tokens;
	*output = q.output_tokens;
}

void wl_lengths_free(struct lengths_gen *lg)
{
	if (!lg)
		return;
	workload_release(&lg->emp);
	free(lg);
}

/* Arrival time of a request t seconds into the unscaled process. */
static int scaled_ns(double t, double scale, int64_t *out, struct ss_error *err)
{
	double ns = t * 1e9 / scale;

	if (!(ns <= ARRIVAL_MAX_NS))
		return ss_error_set(err, -ERANGE, NULL, 0,
				    "--arrival: arrival times beyond 292 years; lower --num-requests or --duration");
	*out = llround(ns);
	return 0;
}

/* Fill wl with synthetic requests, or (lg NULL) give wl's existing requests,
 * in order, synthetic arrival times; either way stop at max_n requests
 * (0 = no limit) or at the first arrival >= dur (0 = no limit). */
static int generate(struct workload *wl, const struct arrival_gen *a,
		    const struct lengths_gen *lg, uint64_t max_n, int64_t dur,
		    double scale, uint64_t seed, struct ss_error *err)
{
	gsl_rng *ra = ss_rng_new(seed, SS_RNG_ARRIVALS);
	gsl_rng *rl = lg ? ss_rng_new(seed, SS_RNG_LENGTHS) : NULL;
	struct arrival_state st;
	size_t limit = lg ? WL_MAX_REQUESTS : wl->n;
	double t = 0;     /* unscaled time of request i (s) */
	int64_t at = 0;
	size_t i;
	int rc = 0;

	if (!ra || (lg && !rl)) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	if (max_n && max_n < limit)
		limit = (size_t)max_n;
	if (lg && max_n && !dur) {   /* exact size known: one allocation */
		rc = wl_reserve(wl, limit);
		if (rc) {
			ss_error_set(err, rc, NULL, 0, "out of memory for %zu requests", limit);
			goto out;
		}
	}
	arrival_start(a, &st, ra);
	for (i = 0; i < limit; i++) {
		if (i > 0)
			t += arrival_gap(a, &st, ra);
		rc = scaled_ns(t, scale, &at, err);
		if (rc)
			goto out;
		if (dur && at >= dur)
			break;
		if (lg) {
			struct wl_request *q = wl_append(wl);

			if (!q) {
				rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
				goto out;
			}
			lengths_sample(lg, rl, q);
			q->arrival_ns = at;
		} else {
			wl->req[i].arrival_ns = at;
		}
	}
	if (lg && i == limit && (!max_n || max_n > WL_MAX_REQUESTS))
		rc = ss_error_set(err, -E2BIG, NULL, 0,
				  "more than %u requests; expected a smaller --num-requests, --duration or rate",
				  WL_MAX_REQUESTS);
	wl->n = i;
	wl->has_arrivals = true;
out:
	gsl_rng_free(ra);
	gsl_rng_free(rl);
	return rc;
}

/* Give request i of wl the i-th tenant drawn from SS_RNG_TENANTS, so a
 * request's tenant depends only on the seed, the spec and its index. */
static int tenants_assign(struct workload *wl, const struct tenants_gen *tg,
			  uint64_t seed, struct ss_error *err)
{
	gsl_rng *r = ss_rng_new(seed, SS_RNG_TENANTS);
	double u;
	size_t lo, hi;

	if (!r)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	/* the cut-off requests of a trace too (n_source), drawn after the
	 * kept ones, so that the whole trace has the tenants its slice has */
	for (size_t i = 0; i < (wl->n_source > wl->n ? wl->n_source : wl->n); i++) {
		if (!tg->cum) {
			wl->req[i].tenant = (int32_t)gsl_rng_uniform_int(r, (unsigned long)tg->n);
			continue;
		}
		/* first tenant whose cumulative weight exceeds u in [0, sum) */
		u = gsl_rng_uniform(r) * tg->cum[tg->n - 1];
		lo = 0;
		hi = tg->n - 1;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (tg->cum[mid] > u)
				hi = mid;
			else
				lo = mid + 1;
		}
		wl->req[i].tenant = (int32_t)lo;
	}
	gsl_rng_free(r);
	return 0;
}

/* ---- workload_build ---------------------------------------------------- */

/* Trace replay: divide arrival times by scale, then cut at dur and max_n. */
static int replay(struct workload *wl, uint64_t max_n, int64_t dur, double scale,
		  struct ss_error *err)
{
	size_t n = wl->n;

	if (scale != 1) {
		for (size_t i = 0; i < n; i++) {
			double ns = (double)wl->req[i].arrival_ns / scale;

			if (!(ns <= ARRIVAL_MAX_NS))
				return ss_error_set(err, -ERANGE, wl->source, 0,
						    "--rate-scale %g: arrival times beyond 292 years",
						    scale);
			wl->req[i].arrival_ns = llround(ns);
		}
	}
	if (dur) {
		size_t lo = 0, hi = n;   /* first arrival >= dur, by bisection */

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (wl->req[mid].arrival_ns < dur)
				lo = mid + 1;
			else
				hi = mid;
		}
		n = lo;
	}
	if (max_n && max_n < n)
		n = (size_t)max_n;
	/* the cut-off requests stay where they are, for workload_slice_compare */
	wl->n_source = n < wl->n ? wl->n : 0;
	wl->n = n;
	return 0;
}

/* --rate R on a trace: the factor that brings the mean rate of the
 * requests replayed -- the first --num-requests of them, or all -- to R:
 * (n - 1) / (last - first arrival), as plan and the slice check measure a
 * trace's rate.  --duration cuts after the scaling, as it does after
 * --rate-scale, so it does not enter the measure. */
static int target_scale(const struct workload *wl, const struct workload_spec *spec,
			double *scale, struct ss_error *err)
{
	size_t n = wl->n;
	double span, rate;

	if (spec->num_requests && spec->num_requests < n)
		n = (size_t)spec->num_requests;
	span = n >= 2 ? (double)(wl->req[n - 1].arrival_ns - wl->req[0].arrival_ns) * 1e-9 : 0;
	if (!(span > 0))
		return ss_error_set(err, -EINVAL, spec->trace, 0,
				    "--rate %g: the trace's %zu request%s arrive%s at one instant "
				    "(expected at least 2 over a time span, to have a rate to scale)",
				    spec->target_rate, n, n == 1 ? "" : "s", n == 1 ? "s" : "");
	rate = (double)(n - 1) / span;
	*scale = spec->target_rate / rate;
	return 0;
}

int workload_spec_requests(const struct workload_spec *spec, uint64_t *n,
			   struct ss_error *err)
{
	double scale = spec->rate_scale > 0 ? spec->rate_scale : 1;
	struct arrival_gen a;
	double mean;
	int rc;

	*n = spec->num_requests;
	/* a rate curve's count is known once its file is read (a bad file
	 * is reported by workload_build, as a bad trace is) */
	if (!spec->arrival || spec->rate_curve || spec->duration_ns <= 0)
		return 0;
	rc = arrival_parse(spec->arrival, &a, err);
	if (rc)
		return rc;
	mean = a.rate * scale * ((double)spec->duration_ns / 1e9);
	if (!(mean < 1e18))
		mean = 1e18;
	if (!*n || mean < (double)*n)
		*n = (uint64_t)ceil(mean);
	return 0;
}

/* A closed loop's workload (workload_spec.closed): lengths in order, every
 * arrival 0.  A generator's request i has the lengths it has in an open
 * loop of the same seed (the same SS_RNG_LENGTHS draws); a trace's rows
 * are taken in file order, its timestamps (if any) ignored. */
static int closed_build(struct workload *wl, const struct workload_spec *spec,
			struct ss_error *err)
{
	struct tenants_gen tg = { 0 };
	struct lengths_gen *lg = NULL;
	gsl_rng *rl = NULL;
	int rc = 0;

	if (spec->arrival || spec->rate_curve)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s cannot be combined with --concurrency (closed-loop clients "
				    "send when their previous request finishes); expected one of them",
				    spec->arrival ? "--arrival" : "--rate-curve");
	if (spec->rate_scale != 0 && spec->rate_scale != 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate-scale cannot be combined with --concurrency (there are no "
				    "arrival times to scale); expected --concurrency N alone");
	if (spec->trace && spec->lengths)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--lengths cannot be combined with --trace (the trace gives the lengths); "
				    "expected --trace or --lengths with --concurrency");
	if (!spec->trace && !spec->lengths)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--concurrency needs lengths: expected --trace FILE or --lengths SPEC");
	if (!spec->trace && !spec->num_requests)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--concurrency with --lengths needs --num-requests N (the requests the "
				    "clients send in all)");
	if (spec->num_requests > WL_MAX_REQUESTS)
		return ss_error_set(err, -E2BIG, NULL, 0,
				    "more than %u requests; expected a smaller --num-requests",
				    WL_MAX_REQUESTS);
	if (spec->tenants) {
		rc = tenants_parse(spec->tenants, &tg, err);
		if (rc)
			return rc;
	}
	if (spec->trace) {
		rc = trace_read_ordered(wl, spec->trace, spec->format, false, err);
		if (rc)
			goto out;
		if (wl->sess) {
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "a session trace cannot be replayed closed loop "
					  "(--concurrency): its sessions send their own calls");
			goto out;
		}
		if (spec->num_requests && spec->num_requests < wl->n)
			wl->n = (size_t)spec->num_requests;
		snprintf(wl->source, sizeof(wl->source), "%s", spec->trace);
	} else {
		lg = calloc(1, sizeof(*lg));
		rl = ss_rng_new(spec->seed, SS_RNG_LENGTHS);
		if (!lg || !rl) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto out;
		}
		workload_init(&lg->emp);
		rc = lengths_parse(spec->lengths, lg, err);
		if (rc)
			goto out;
		rc = wl_reserve(wl, (size_t)spec->num_requests);
		if (rc) {
			ss_error_set(err, rc, NULL, 0, "out of memory for %llu requests",
				     (unsigned long long)spec->num_requests);
			goto out;
		}
		for (uint64_t i = 0; i < spec->num_requests; i++)
			lengths_sample(lg, rl, wl_append(wl));
		wl->format = TRACE_AUTO;
		snprintf(wl->source, sizeof(wl->source), "%s", spec->lengths);
	}
	for (size_t i = 0; i < wl->n; i++)
		wl->req[i].arrival_ns = 0;
	wl->has_arrivals = false;
	if (tg.n)
		rc = tenants_assign(wl, &tg, spec->seed, err);
out:
	gsl_rng_free(rl);
	free(tg.cum);
	if (lg)
		workload_release(&lg->emp);
	free(lg);
	if (rc)
		workload_release(wl);
	return rc;
}

int workload_build(struct workload *wl, const struct workload_spec *spec,
		   struct ss_error *err)
{
	struct tenants_gen tg = { 0 };
	struct lengths_gen *lg = NULL;
	struct rate_curve curve = { 0 };
	struct arrival_gen a;
	/* what times the requests, in wl->source: ARRIVAL or rate-curve:FILE */
	const char *tpre = spec->rate_curve ? "rate-curve:" : "";
	const char *timing = spec->rate_curve ? spec->rate_curve : spec->arrival;
	bool timed = spec->arrival || spec->rate_curve;
	double scale = spec->rate_scale == 0 ? 1 : spec->rate_scale;
	int rc;

	workload_release(wl);
	if (spec->model)        /* traces/workload-model-gen.c */
		return wlmodel_build_spec(wl, spec, err);
	if (!(scale > 0) || !isfinite(scale))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate-scale: expected a number > 0, got %g", spec->rate_scale);
	if (spec->duration_ns < 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--duration: expected a time > 0 s, got %g s",
				    (double)spec->duration_ns * 1e-9);
	if (spec->trace && spec->lengths)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--lengths cannot be combined with --trace (the trace gives the lengths); "
				    "expected --trace [--arrival], or --arrival with --lengths");
	if (spec->target_rate != 0 && !(spec->target_rate > 0 && spec->target_rate <= RATE_MAX))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate: expected a rate in req/s, > 0 and <= %g, got %g",
				    RATE_MAX, spec->target_rate);
	if (spec->target_rate > 0 && spec->rate_scale != 0 && spec->rate_scale != 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate cannot be combined with --rate-scale (both set the trace's "
				    "rate); expected one of them");
	if (spec->target_rate > 0 && (!spec->trace || spec->arrival || spec->rate_curve ||
				      spec->closed))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate applies to a trace replayed at its own times (it rescales "
				    "them); expected --trace FILE without %s",
				    spec->closed ? "--concurrency" :
				    spec->rate_curve ? "--rate-curve" :
				    spec->arrival ? "--arrival (whose rate= sets the rate)" :
				    "--arrival or --rate-curve: a generator's rate is in its spec");
	if (spec->arrival && spec->rate_curve)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--rate-curve cannot be combined with --arrival (both give the arrival "
				    "times); expected one of them");
	if (spec->sessions && (spec->closed || timed || spec->target_rate > 0 || spec->tenants))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--sessions cannot be combined with %s (%s); expected "
				    "--sessions "
				    "alone, with --lengths, or with a session --trace",
				    spec->closed ? "--concurrency" :
				    spec->target_rate > 0 ? "--rate" : spec->tenants ? "--tenants" :
				    spec->arrival ? "--arrival" : "--rate-curve",
				    spec->closed ? "sessions send their own calls" :
				    spec->tenants ? "tenants of sessions are not modelled" :
				    "sessions start at rate= of --sessions; "
				    "--rate-scale scales it");
	if (spec->closed)
		return closed_build(wl, spec, err);
	if (spec->sessions && !spec->trace) {
		rc = sessions_generate(wl, spec, err);
		goto out;
	}
	if (spec->sessions) {
		if (spec->lengths) {
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "--lengths cannot be combined with a session --trace "
					  "(the trace gives the lengths)");
			goto out;
		}
		rc = sessions_trace_read(wl, spec, err);
		if (!rc)
			rc = sessions_replay(wl, spec, err);
		goto out;
	}
	if (!spec->trace && !timed && !spec->lengths)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "no workload: expected --trace FILE, or --arrival with --lengths");
	if (!spec->trace && !spec->lengths)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "expected --lengths (fixed, uniform, lognormal, geometric or empirical) "
				    "with --arrival, or a --trace to take lengths from");
	if (!spec->trace && !timed)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--lengths needs --arrival (poisson:rate=R, gamma:rate=R,cv=C, "
				    "mmpp:... or onoff:...) to give the requests arrival times");
	if (spec->tenants) {
		rc = tenants_parse(spec->tenants, &tg, err);
		if (rc)
			return rc;
	}

	if (spec->trace && !timed) {
		rc = trace_read(wl, spec->trace, spec->format, err);
		if (rc)
			goto out;
		if (wl->sess) {
			if (tg.n)
				rc = ss_error_set(err, -EINVAL, NULL, 0,
						  "--tenants with a session trace: tenants of "
						  "sessions are not modelled; expected no "
						  "--tenants");
			else
				rc = sessions_replay(wl, spec, err);
			goto out;
		}
		if (!wl->has_arrivals) {
			char how[192] = "";

			/* a serving result says how it was offered: the arrival
			 * that reproduces it (issue 34 §4) */
			if (wl->closed_loop_clients)
				snprintf(how, sizeof(how), " (it was measured closed loop with %u clients: --concurrency %u reproduces that)",
					 wl->closed_loop_clients, wl->closed_loop_clients);
			else if (isinf(wl->source_rate))
				snprintf(how, sizeof(how), " (its requests were sent all at once, request_rate inf: --concurrency %zu reproduces that)",
					 wl->n);
			else if (wl->source_rate > 0)
				snprintf(how, sizeof(how), " (it was measured at request_rate %g: --arrival poisson:rate=%g reproduces that)",
					 wl->source_rate, wl->source_rate);
			rc = ss_error_set(err, -EINVAL, spec->trace, 0,
					  "%s trace has no arrival times; expected --arrival to generate them%s",
					  trace_format_name(wl->format), how);
			goto out;
		}
		if (spec->target_rate > 0) {
			rc = target_scale(wl, spec, &scale, err);
			if (rc)
				goto out;
		}
		rc = replay(wl, spec->num_requests, spec->duration_ns, scale, err);
		goto out;
	}

	if (spec->rate_curve) {
		rc = rate_curve_read(&curve, spec->rate_curve, err);
		if (rc)
			goto out;
		a = (struct arrival_gen){ .kind = ARR_CURVE, .curve = &curve,
					  .rate = curve.total / curve.period };
	} else {
		rc = arrival_parse(spec->arrival, &a, err);
		if (rc)
			goto out;
	}
	if (spec->trace) {
		rc = trace_read_ordered(wl, spec->trace, spec->format, false, err);
		if (rc)
			goto out;
		if (wl->sess) {
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "%s cannot time a session trace (its later calls follow "
					  "their sessions); expected --rate-scale X to scale its "
					  "session starts",
					  spec->rate_curve ? "--rate-curve" : "--arrival");
			goto out;
		}
		rc = generate(wl, &a, NULL, spec->num_requests, spec->duration_ns, scale,
			      spec->seed, err);
		if (!rc)
			snprintf(wl->source, sizeof(wl->source), "%s%s x %s", tpre, timing,
				 spec->trace);
		goto out;
	}

	if (!spec->num_requests && !spec->duration_ns) {
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "a generated workload needs a size: expected --num-requests N or --duration T");
		goto out;
	}
	/* refuse at once what would only fail after 10^8 requests */
	if (spec->num_requests > WL_MAX_REQUESTS ||
	    (!spec->num_requests && (double)spec->duration_ns * 1e-9 * a.rate * scale >
	     1.1 * WL_MAX_REQUESTS)) {
		rc = ss_error_set(err, -E2BIG, NULL, 0,
				  "more than %u requests (%g expected); expected a smaller --num-requests, --duration or rate",
				  WL_MAX_REQUESTS, spec->num_requests ? (double)spec->num_requests
				  : (double)spec->duration_ns * 1e-9 * a.rate * scale);
		goto out;
	}
	lg = calloc(1, sizeof(*lg));
	if (!lg) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	workload_init(&lg->emp);
	rc = lengths_parse(spec->lengths, lg, err);
	if (rc)
		goto out;
	rc = generate(wl, &a, lg, spec->num_requests, spec->duration_ns, scale,
		      spec->seed, err);
	if (rc)
		goto out;
	wl->format = TRACE_AUTO;
	snprintf(wl->source, sizeof(wl->source), "%s%s x %s", tpre, timing, spec->lengths);
out:
	if (!rc && tg.n)
		rc = tenants_assign(wl, &tg, spec->seed, err);
	free(tg.cum);
	rate_curve_free(&curve);
	if (lg)
		workload_release(&lg->emp);
	free(lg);
	if (rc)
		workload_release(wl);
	return rc;
}
