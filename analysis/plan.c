/* servesim — capacity planning: enumeration, rate search, evaluation,
 * Pareto frontier (see plan.h and docs/plan.md). */
#include "plan.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- names --------------------------------------------------------------- */

const char *plan_mode_name(enum plan_mode m)
{
	return m == PLAN_DISAGGREGATED ? "disaggregated" : "colocated";
}

static const char *const status_names[] = {
	[PLAN_OK] = "ok", [PLAN_CAPPED] = "capped", [PLAN_NONE] = "none", [PLAN_FAILED] = "failed",
	[PLAN_BELOW] = "below_rate", [PLAN_SKIPPED] = "skipped",
};

const char *plan_status_name(enum plan_status s)
{
	return (unsigned)s < sizeof(status_names) / sizeof(status_names[0]) ? status_names[s] : "?";
}

int plan_status_from_name(const char *name, enum plan_status *s)
{
	for (size_t i = 0; i < sizeof(status_names) / sizeof(status_names[0]); i++)
		if (!strcmp(name, status_names[i])) {
			*s = (enum plan_status)i;
			return 0;
		}
	return -EINVAL;
}

/* The policies' own parameter names (policies/batch-*.c). */
/* The policies plan sweeps come from the policy registry: every batch
 * policy that names its --max-batch parameter (batch_policy_ops
 * .plan_batch_key), in registry order, then the aliases below (a policy
 * with fixed parameters, swept under its own name).  Built once, on first
 * use; plan evaluates in one thread per process. */
static const struct {
	const char *name, *base, *spec;
} aliases[] = {
	{ "vllm-v0", "vllm", "vllm:v0=on" },
};

#define PLAN_POLICIES_MAX 64

static struct plan_policy policy_table[PLAN_POLICIES_MAX];
static size_t n_policy_table;
static char policy_names_buf[1024];

static void policy_table_add(const char *name, const struct batch_policy_ops *ops,
			     const char *spec)
{
	size_t used = strlen(policy_names_buf);

	if (!ops || !ops->plan_batch_key || n_policy_table == PLAN_POLICIES_MAX)
		return;
	policy_table[n_policy_table++] = (struct plan_policy){
		.name = name,
		.chunk_key = ops->plan_chunk_key,
		.batch_key = ops->plan_batch_key,
		.batch_within_chunk = ops->plan_batch_within_chunk,
		.spec = spec,
	};
	snprintf(policy_names_buf + used, sizeof(policy_names_buf) - used, "%s%s",
		 used ? ", " : "", name);
}

static void policy_table_fill(void)
{
	struct policy_info info[256];
	size_t n;

	if (n_policy_table)
		return;
	n = policy_list(info, sizeof(info) / sizeof(info[0]));
	for (size_t i = 0; i < n && i < sizeof(info) / sizeof(info[0]); i++)
		if (info[i].kind == POLICY_BATCH && info[i].version >= 2)
			policy_table_add(info[i].name, batch_policy_find(info[i].name), NULL);
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		policy_table_add(aliases[i].name, batch_policy_find(aliases[i].base), aliases[i].spec);
}

const struct plan_policy *plan_policy_find(const char *name)
{
	policy_table_fill();
	for (size_t i = 0; i < n_policy_table; i++)
		if (!strcmp(name, policy_table[i].name))
			return &policy_table[i];
	return NULL;
}

const char *plan_policy_names(void)
{
	policy_table_fill();
	return policy_names_buf;
}

/* ---- enumeration --------------------------------------------------------- */

const struct gpu_spec *plan_config_decode_gpu(const struct plan_config *c)
{
	return c->decode_gpu ? c->decode_gpu : c->gpu;
}

int plan_config_decode_tp(const struct plan_config *c)
{
	return c->decode_tp > 0 ? c->decode_tp : c->tp;
}

bool plan_config_mixed(const struct plan_config *c)
{
	const struct gpu_spec *d = plan_config_decode_gpu(c);

	return c->mode == PLAN_DISAGGREGATED &&
	       (plan_config_decode_tp(c) != c->tp || (d != c->gpu && strcmp(d->name, c->gpu->name)));
}

void plan_config_gpu_label(const struct plan_config *c, char *buf, size_t len)
{
	if (plan_config_mixed(c))
		snprintf(buf, len, "%s/%s", c->gpu->name, plan_config_decode_gpu(c)->name);
	else
		snprintf(buf, len, "%s", c->gpu->name);
}

void plan_config_tp_label(const struct plan_config *c, char *buf, size_t len)
{
	int w;

	if (plan_config_mixed(c))
		w = snprintf(buf, len, "%d/%d", c->tp, plan_config_decode_tp(c));
	else if (c->pp > 1)
		w = snprintf(buf, len, "%d pp%d", c->tp, c->pp);
	else
		w = snprintf(buf, len, "%d", c->tp);
	if (w > 0 && (size_t)w < len && c->ep > 1)
		w += snprintf(buf + w, len - (size_t)w, ",ep%d", c->ep);
	if (w > 0 && (size_t)w < len && c->dp_attention > 1)
		snprintf(buf + w, len - (size_t)w, ",dp%d", c->dp_attention);
}

void plan_config_inst_label(const struct plan_config *c, char *buf, size_t len)
{
	if (c->mode == PLAN_DISAGGREGATED)
		snprintf(buf, len, "%uP+%uD", c->n_prefill, c->n_decode);
	else
		snprintf(buf, len, "%u", c->instances);
}

void plan_config_policy_label(const struct plan_config *c, char *buf, size_t len)
{
	char a[16] = "-", b[16] = "-";
	size_t k;

	if (c->chunk <= 0 && c->max_batch <= 0) {
		snprintf(buf, len, "%s", c->policy->name);
	} else {
		if (c->chunk > 0)
			snprintf(a, sizeof(a), "%d", c->chunk);
		if (c->max_batch > 0)
			snprintf(b, sizeof(b), "%d", c->max_batch);
		snprintf(buf, len, "%s %s/%s", c->policy->name, a, b);
	}
	/* the speculation it runs with, on a plan with that axis */
	k = strlen(buf);
	if (c->spec_axis && k < len)
		snprintf(buf + k, len - k, " %s", c->spec ? c->spec->text : "spec=off");
}

/* ---- axes combined generically (plan-axes.def's OUTER) -------------------- */

/* Only integer axes can be OUTER: OUTER_KIND_GPU and the like are not
 * defined, so another kind fails to compile. */
#define OUTER_KIND_INT
#define OUTER_LAYOUT(kind, list, cfg, opt)
#define OUTER_BATCH(kind, list, cfg, opt)
#define OUTER_OUTER(kind, list, cfg, opt)                                                     \
	OUTER_KIND_##kind { opt, #cfg, offsetof(struct plan_space, list),                     \
			    offsetof(struct plan_space, n_##list), offsetof(struct plan_config, cfg), \
			    offsetof(struct engine_config, cfg) },
static const struct plan_outer_axis outer_axes[] = {
#define PLAN_AXIS(kind, list, cfg, opt, cli, dflt, lo, hi, group, engine, check, names, help) \
	OUTER_##group(kind, list, cfg, opt)
#include "plan-axes.def"
#undef PLAN_AXIS
	{ NULL, NULL, 0, 0, 0, 0 },   /* ends it: there may be no OUTER axis */
};

const struct plan_outer_axis *plan_outer_axes(size_t *n)
{
	*n = sizeof(outer_axes) / sizeof(outer_axes[0]) - 1;
	return outer_axes;
}

/* The int at byte offset off of the struct at p (an axis's member). */
static int *int_at(void *p, size_t off)
{
	return (int *)((char *)p + off);
}

static const int *cint_at(const void *p, size_t off)
{
	return (const int *)((const char *)p + off);
}

int plan_config_outer(const struct plan_config *c, const struct plan_outer_axis *a)
{
	return *cint_at(c, a->cfg);
}

void plan_outer_label(const struct plan_config *c, char *buf, size_t len)
{
	for (const struct plan_outer_axis *a = outer_axes; a->opt; a++) {
		size_t k = strlen(buf);

		if (plan_config_outer(c, a) && k < len)
			snprintf(buf + k, len - k, " %s=%d", a->opt, plan_config_outer(c, a));
	}
}

void plan_config_key(struct plan_config *c)
{
	const struct plan_policy *p = c->policy;
	char *s = c->policy_spec;
	size_t len = sizeof(c->policy_spec);
	int w = snprintf(s, len, "%s", p->spec ? p->spec : p->name);
	char sep = p->spec && strchr(p->spec, ':') ? ',' : ':';

	if (p->chunk_key && c->chunk > 0) {
		w += snprintf(s + w, len - (size_t)w, "%c%s=%d", sep, p->chunk_key, c->chunk);
		sep = ',';
	}
	if (p->batch_key && c->max_batch > 0)
		snprintf(s + w, len - (size_t)w, "%c%s=%d", sep, p->batch_key, c->max_batch);
	/* "tp=8 ep=8 dp-attention=8": the MoE layout after the tp it splits
	 * (and its pipeline stages, "tp=4 pp=2 ep=4"), only when used, so
	 * every other key stays as it was */
	if (c->ep > 1 || c->dp_attention > 1) {
		char tp[64];

		snprintf(tp, sizeof(tp), "%d%s%.0d%s%.0d%s%.0d", c->tp, c->pp > 1 ? " pp=" : "",
			 c->pp > 1 ? c->pp : 0, c->ep > 1 ? " ep=" : "", c->ep > 1 ? c->ep : 0,
			 c->dp_attention > 1 ? " dp-attention=" : "",
			 c->dp_attention > 1 ? c->dp_attention : 0);
		if (c->mode == PLAN_DISAGGREGATED)
			snprintf(c->key, sizeof(c->key),
				 "disaggregated gpu=%s tp=%s prefill=%u decode=%u policy=%s",
				 c->gpu->name, tp, c->n_prefill, c->n_decode, c->policy_spec);
		else
			snprintf(c->key, sizeof(c->key), "colocated gpu=%s tp=%s instances=%u policy=%s",
				 c->gpu->name, tp, c->instances, c->policy_spec);
		goto dtypes;
	}
	if (plan_config_mixed(c))
		snprintf(c->key, sizeof(c->key),
			 "disaggregated prefill=%u gpu=%s tp=%d decode=%u gpu=%s tp=%d policy=%s",
			 c->n_prefill, c->gpu->name, c->tp, c->n_decode, plan_config_decode_gpu(c)->name,
			 plan_config_decode_tp(c), c->policy_spec);
	else if (c->mode == PLAN_DISAGGREGATED && c->pp > 1)
		snprintf(c->key, sizeof(c->key), "disaggregated gpu=%s tp=%d pp=%d prefill=%u decode=%u policy=%s",
			 c->gpu->name, c->tp, c->pp, c->n_prefill, c->n_decode, c->policy_spec);
	else if (c->mode == PLAN_DISAGGREGATED)
		snprintf(c->key, sizeof(c->key), "disaggregated gpu=%s tp=%d prefill=%u decode=%u policy=%s",
			 c->gpu->name, c->tp, c->n_prefill, c->n_decode, c->policy_spec);
	else if (c->pp > 1)
		snprintf(c->key, sizeof(c->key), "colocated gpu=%s tp=%d pp=%d instances=%u policy=%s",
			 c->gpu->name, c->tp, c->pp, c->instances, c->policy_spec);
	else
		snprintf(c->key, sizeof(c->key), "colocated gpu=%s tp=%d instances=%u policy=%s",
			 c->gpu->name, c->tp, c->instances, c->policy_spec);
dtypes:
	if (c->dtype_axis) {
		size_t k = strlen(c->key);

		snprintf(c->key + k, sizeof(c->key) - k, " weight=%s kv=%s",
			 ss_dtype_name(c->weight_dtype), ss_dtype_name(c->kv_dtype));
	}
	if (c->spec_axis) {
		size_t k = strlen(c->key);

		snprintf(c->key + k, sizeof(c->key) - k, " spec=%s", c->spec ? c->spec->text : "off");
	}
	plan_outer_label(c, c->key, sizeof(c->key));
}

/* Growing array of configurations. */
struct cfgvec {
	struct plan_config *v;
	size_t n, cap;
};

static int push(struct cfgvec *cv, const struct plan_config *c, struct ss_error *err)
{
	if (cv->n == cv->cap) {
		size_t cap = cv->cap ? cv->cap * 2 : 64;
		struct plan_config *v = realloc(cv->v, cap * sizeof(*v));

		if (!v)
			return ss_error_set(err, -ENOMEM, NULL, 0, "plan: out of memory");
		cv->v = v;
		cv->cap = cap;
	}
	cv->v[cv->n] = *c;
	cv->v[cv->n].index = (uint32_t)cv->n;
	plan_config_key(&cv->v[cv->n]);
	cv->n++;
	return 0;
}

/* Instance counts: the given list, or every count 1..most (at most
 * PLAN_MAX_COUNTS; the answer to "how many" is often not a power of two).
 * Returns how many. */
static int instance_counts(const struct plan_space *sp, uint32_t most, uint32_t *out)
{
	int n = 0;

	if (sp->n_instances > 0) {
		for (int i = 0; i < sp->n_instances; i++)
			out[n++] = sp->instances[i];
		return n;
	}
	for (uint32_t k = 1; k <= most && n < PLAN_MAX_COUNTS; k++)
		out[n++] = k;
	return n;
}

/* Prefill instance counts of the splits of n instances; returns how many. */
static int splits(const struct plan_space *sp, uint32_t n, uint32_t *out)
{
	int k = 0;

	if (n < 2)
		return 0;
	if (sp->n_ratios == 0) {
		for (uint32_t p = 1; p < n && k < PLAN_MAX_LIST; p++)
			out[k++] = p;
		return k;
	}
	for (int i = 0; i < sp->n_ratios; i++) {
		const struct plan_ratio *r = &sp->ratios[i];
		double x = (double)n * r->prefill / (double)(r->prefill + r->decode);
		uint32_t p = (uint32_t)llround(x);
		bool dup = false;

		if (p < 1)
			p = 1;
		if (p > n - 1)
			p = n - 1;
		for (int j = 0; j < k; j++)
			dup |= out[j] == p;
		if (!dup)
			out[k++] = p;
	}
	return k;
}

/* Does the model fit on tp (x pp) GPUs of this type (and can they run
 * its weight dtype)?  Memoized per (gpu, tp, pp). */
struct fitcache {
	const struct gpu_spec *gpu;
	int tp;
	bool fits;
	int pp, ep, dp;
};

static bool fits(const struct engine_config *base, const struct model_spec *model,
		 const struct gpu_spec *gpu, int tp, int pp, int ep, int dp, struct fitcache *fc,
		 int *n_fc)
{
	struct engine_config ec;
	int32_t blocks = 0;
	bool ok;

	if (!base)
		return true;
	for (int i = 0; i < *n_fc; i++)
		if (fc[i].gpu == gpu && fc[i].tp == tp && fc[i].pp == pp && fc[i].ep == ep &&
		    fc[i].dp == dp)
			return fc[i].fits;
	ec = *base;
	ec.model = model;
	ec.gpu = gpu;
	ec.tp = tp;
	ec.pp = pp;
	ec.ep = ep;
	ec.dp_attention = dp;
	ec.kv_blocks_override = base->kv_blocks_override;
	/* a GPU that cannot run the weight dtype (fp4 without fp4 tensor
	 * cores) is left out with those the model does not fit */
	ok = precision_check(gpu, ec.weight_dtype, ec.kv_dtype, NULL) == 0 &&
	     engine_kv_capacity(&ec, &blocks, NULL) == 0 && blocks >= 1;
	if (*n_fc < PLAN_MAX_LIST * PLAN_MAX_LIST * PLAN_MAX_LIST)
		fc[(*n_fc)++] = (struct fitcache){ gpu, tp, ok, pp, ep, dp };
	return ok;
}

/* Budget and price: true when c stays in; counts what it excludes. */
static bool within_budget(const struct plan_space *sp, const struct plan_config *c,
			  struct plan_excluded *ex)
{
	if (sp->budget_gpus > 0 && c->gpus > sp->budget_gpus) {
		ex->budget++;
		return false;
	}
	if (sp->budget_usd_per_hour > 0) {
		if (!(c->usd_per_hour > 0)) {
			ex->unpriced++;
			return false;
		}
		if (c->usd_per_hour > sp->budget_usd_per_hour) {
			ex->budget++;
			return false;
		}
	}
	return true;
}

/* Every policy x chunk x max-batch variant of c (whose shape is set). */
static int push_policies(const struct plan_space *sp, struct plan_config *c,
			 struct cfgvec *cv, struct plan_excluded *ex, struct ss_error *err)
{
	static const int dflt[1] = { 0 };

	for (int p = 0; p < sp->n_policies; p++) {
		const struct plan_policy *pol = sp->policies[p];
		const int *ch = pol->chunk_key && sp->n_chunks ? sp->chunks : dflt;
		int nch = pol->chunk_key && sp->n_chunks ? sp->n_chunks : 1;
		const int *mb = pol->batch_key && sp->n_max_batch ? sp->max_batch : dflt;
		int nmb = pol->batch_key && sp->n_max_batch ? sp->n_max_batch : 1;

		for (int i = 0; i < nch; i++)
			for (int j = 0; j < nmb; j++) {
				int rc;

				c->policy = pol;
				c->chunk = ch[i];
				c->max_batch = mb[j];
				if (pol->batch_within_chunk && c->chunk > 0 && c->max_batch > c->chunk) {
					ex->policy++;
					continue;
				}
				if (!within_budget(sp, c, ex))
					continue;
				rc = push(cv, c, err);
				if (rc)
					return rc;
			}
	}
	return 0;
}

/* Mixed pools: the most instances one of their splits fits in max_gpus,
 * every other instance on the cheaper pool (0 when not even 1 + 1 fits).
 * With equal tp this is max_gpus / tp, the same-pool rule. */
static uint32_t mixed_most(const struct plan_space *sp, int tp_p, int tp_d)
{
	int lo = tp_p < tp_d ? tp_p : tp_d, hi = tp_p < tp_d ? tp_d : tp_p;

	return sp->max_gpus < tp_p + tp_d ? 0 : (uint32_t)((sp->max_gpus - hi) / lo + 1);
}

/* Every ordered pair of different pools (prefill GPU, prefill tp) and
 * (decode GPU, decode tp), in list order: prefill GPU, prefill tp, decode
 * GPU, decode tp; then instance count, split and policy as for one pool.
 * Splits whose GPUs exceed max_gpus are not part of the space; the model
 * must fit on both pools. */
static int push_mixed(const struct plan_space *sp, const struct engine_config *base,
		      struct cfgvec *cv, struct plan_excluded *ex, struct fitcache *fc, int *n_fc,
		      struct ss_error *err)
{
	for (int gp = 0; gp < sp->n_gpus; gp++)
		for (int tp = 0; tp < sp->n_tp; tp++)
			for (int gd = 0; gd < sp->n_gpus; gd++)
				for (int td = 0; td < sp->n_tp; td++) {
					const struct gpu_spec *pg = sp->gpus[gp], *dg = sp->gpus[gd];
					int ptp = sp->tp[tp], dtp = sp->tp[td];
					uint32_t counts[PLAN_MAX_COUNTS];   /* 4 KiB */
					int nc, rc;
					size_t start = cv->n;
					bool any = false;

					if (gp == gd && tp == td)
						continue;
					nc = instance_counts(sp, mixed_most(sp, ptp, dtp), counts);
					for (int k = 0; k < nc; k++) {
						uint32_t inst = counts[k], pre[PLAN_MAX_LIST];
						int np = splits(sp, inst, pre);

						for (int s = 0; s < np; s++) {
							uint64_t gp_n = (uint64_t)pre[s] * (uint64_t)ptp;
							uint64_t gd_n = (uint64_t)(inst - pre[s]) * (uint64_t)dtp;
							struct plan_config c = {
								.mode = PLAN_DISAGGREGATED, .gpu = pg, .tp = ptp,
								.decode_gpu = dg, .decode_tp = dtp,
								.instances = inst, .n_prefill = pre[s],
								.n_decode = inst - pre[s],
							};

							if (gp_n + gd_n > (uint64_t)sp->max_gpus)
								continue;
							any = true;
							c.gpus = (int)(gp_n + gd_n);
							c.usd_per_hour = pg->cost_per_hour > 0 && dg->cost_per_hour > 0 ?
								pg->cost_per_hour * (double)gp_n +
									dg->cost_per_hour * (double)gd_n : 0;
							rc = push_policies(sp, &c, cv, ex, err);
							if (rc)
								return rc;
						}
					}
					if (any && (!fits(base, sp->model, pg, ptp, 1, 0, 0, fc, n_fc) ||
						    !fits(base, sp->model, dg, dtp, 1, 0, 0, fc, n_fc))) {
						ex->memory += (uint32_t)(cv->n - start);
						cv->n = start;
					}
				}
	return 0;
}

/* The integer axes' items within their ranges (plan-axes.def's lo..hi),
 * OUTER axes included: checked before the space is split on any axis. */
static int check_axes(const struct plan_space *sp, struct ss_error *err)
{
#define RANGE_GPU(list, opt, lo, hi)
#define RANGE_POLICY(list, opt, lo, hi)
#define RANGE_INT(list, opt, lo, hi)                                                               \
	for (int i = 0; i < sp->n_##list; i++)                                                     \
		if ((int64_t)sp->list[i] < (lo) || (int64_t)sp->list[i] > (hi))                      \
			return ss_error_set(err, -EINVAL, NULL, 0,                                  \
					    "plan: expected %s in %lld..%lld, got %lld", opt,       \
					    (long long)(lo), (long long)(hi), (long long)sp->list[i]);
#define RANGE_U32 RANGE_INT
#define PLAN_AXIS(kind, list, cfg, opt, cli, dflt, lo, hi, group, engine, check, names, help) \
	RANGE_##kind(list, opt, lo, hi)
#include "plan-axes.def"
#undef PLAN_AXIS
#undef RANGE_GPU
#undef RANGE_POLICY
#undef RANGE_INT
#undef RANGE_U32
	return 0;
}

static int check_space(const struct plan_space *sp, struct ss_error *err)
{
	if (!sp->model)
		return ss_error_set(err, -EINVAL, NULL, 0, "plan: no model");
	if (sp->n_gpus < 1 || sp->n_tp < 1 || sp->n_policies < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "plan: expected at least one GPU type, tp and policy");
	if (!sp->colocated && !sp->disaggregated)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "plan: expected colocated and/or disaggregated configurations");
	if (sp->max_gpus < 1)
		return ss_error_set(err, -EINVAL, NULL, 0, "plan: expected --max-gpus >= 1, got %d",
				    sp->max_gpus);
	for (int i = 0; i < sp->n_pp; i++)
		if (sp->pp[i] > sp->model->n_layers)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "plan: expected pp in 1..64 and at most %s's %d layers, got %d",
					    sp->model->name, sp->model->n_layers, sp->pp[i]);
	for (int i = 0; i < sp->n_ratios; i++)
		if (sp->ratios[i].prefill < 1 || sp->ratios[i].decode < 1)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "plan: expected prefill:decode ratios of integers >= 1");
	return 0;
}

/* Enumerate one under base (NULL: no memory check), adding what it left
 * out to *ex: a slice of a space split on an axis. */
static int enumerate_slice(const struct plan_space *one, const struct engine_config *base,
			   struct plan_config **v, size_t *m, struct plan_excluded *ex,
			   struct ss_error *err)
{
	struct plan_excluded e;
	int rc = plan_enumerate(one, base, v, m, &e, err);

	ex->budget += e.budget;
	ex->unpriced += e.unpriced;
	ex->memory += e.memory;
	ex->policy += e.policy;
	return rc;
}

/* Hand cv to the caller (rc 0) or free it. */
static int cfgvec_finish(struct cfgvec *cv, int rc, struct plan_config **out, size_t *n)
{
	if (rc) {
		free(cv->v);
		return rc;
	}
	*out = cv->v;
	*n = cv->n;
	return 0;
}

/* The dtype axes (plan_space.n_weight_dtypes, n_kv_dtypes): the space
 * without them once per (weight, KV) pair, under a base with that pair
 * (the memory and precision checks are per pair), concatenated. */
static int enumerate_dtypes(const struct plan_space *sp, const struct engine_config *base,
			    struct plan_config **out, size_t *n, struct plan_excluded *ex,
			    struct ss_error *err)
{
	struct plan_space one = *sp;
	enum ss_dtype ws[4], ks[4];
	int nw = sp->n_weight_dtypes, nk = sp->n_kv_dtypes, rc = 0;
	struct cfgvec cv = { 0 };

	one.n_weight_dtypes = one.n_kv_dtypes = 0;
	if (nw > 4 || nk > 4)
		return ss_error_set(err, -EINVAL, NULL, 0, "plan: at most 4 weight and 4 KV dtypes");
	for (int i = 0; i < nw; i++)
		ws[i] = sp->weight_dtypes[i];
	for (int i = 0; i < nk; i++)
		ks[i] = sp->kv_dtypes[i];
	if (!nw)
		ws[nw++] = base ? base->weight_dtype : SS_DTYPE_MODEL;
	if (!nk)
		ks[nk++] = base ? base->kv_dtype : SS_DTYPE_MODEL;
	for (int a = 0; a < nw && !rc; a++)
		for (int b = 0; b < nk && !rc; b++) {
			struct engine_config ec;
			struct plan_config *v = NULL;
			size_t m = 0;

			if (base) {
				ec = *base;
				ec.weight_dtype = ws[a];
				ec.kv_dtype = ks[b];
			}
			rc = enumerate_slice(&one, base ? &ec : NULL, &v, &m, ex, err);
			for (size_t i = 0; i < m && !rc; i++) {
				v[i].dtype_axis = true;
				v[i].weight_dtype = ws[a];
				v[i].kv_dtype = ks[b];
				rc = push(&cv, &v[i], err);   /* index and key */
			}
			free(v);
		}
	return cfgvec_finish(&cv, rc, out, n);
}

int plan_enumerate_axis(const struct plan_space *sp, const struct plan_outer_axis *a,
			const struct engine_config *base, struct plan_config **out, size_t *n,
			struct plan_excluded *ex, struct ss_error *err)
{
	struct plan_space one = *sp;
	const int *items = cint_at(sp, a->list);
	int n_items = *cint_at(sp, a->n), rc = 0;
	struct cfgvec cv = { 0 };

	*out = NULL;
	*n = 0;
	memset(ex, 0, sizeof(*ex));
	*int_at(&one, a->n) = 0;
	for (int k = 0; k < n_items && !rc; k++) {
		struct engine_config ec;
		struct plan_config *v = NULL;
		size_t m = 0;

		if (base) {
			ec = *base;
			*int_at(&ec, a->engine) = items[k];
		}
		rc = enumerate_slice(&one, base ? &ec : NULL, &v, &m, ex, err);
		for (size_t i = 0; i < m && !rc; i++) {
			*int_at(&v[i], a->cfg) = items[k];
			rc = push(&cv, &v[i], err);   /* index and key */
		}
		free(v);
	}
	return cfgvec_finish(&cv, rc, out, n);
}

/* The speculation axis (plan_space.n_specs): the space without it once per
 * item, under a base that speculates so (the drafter's memory is in the
 * memory check), concatenated. */
static int enumerate_specs(const struct plan_space *sp, const struct engine_config *base,
			   struct plan_config **out, size_t *n, struct plan_excluded *ex,
			   struct ss_error *err)
{
	struct plan_space one = *sp;
	struct cfgvec cv = { 0 };
	int rc = 0;

	one.n_specs = 0;
	for (int a = 0; a < sp->n_specs && !rc; a++) {
		struct engine_config ec;
		struct plan_excluded e;
		struct plan_config *v = NULL;
		size_t m = 0;

		if (base) {
			ec = *base;
			ec.spec = sp->specs[a];
		}
		rc = plan_enumerate(&one, base ? &ec : NULL, &v, &m, &e, err);
		ex->budget += e.budget;
		ex->unpriced += e.unpriced;
		ex->memory += e.memory;
		ex->policy += e.policy;
		for (size_t i = 0; i < m && !rc; i++) {
			v[i].spec_axis = true;
			v[i].spec = sp->specs[a];
			rc = push(&cv, &v[i], err);   /* index and key */
		}
		free(v);
	}
	return cfgvec_finish(&cv, rc, out, n);
}

int plan_enumerate(const struct plan_space *sp, const struct engine_config *base,
		   struct plan_config **out, size_t *n, struct plan_excluded *ex,
		   struct ss_error *err)
{
	struct cfgvec cv = { 0 };
	struct fitcache *fc = NULL;
	int n_fc = 0, rc;
	int n_pp = sp->n_pp ? sp->n_pp : 1;
	int n_ep = sp->n_ep ? sp->n_ep : 1, n_dp = sp->n_dp_attention ? sp->n_dp_attention : 1;

	*out = NULL;
	*n = 0;
	memset(ex, 0, sizeof(*ex));
	rc = check_axes(sp, err);
	if (rc)
		return rc;
	if (sp->n_specs > 0)
		return enumerate_specs(sp, base, out, n, ex, err);
	if (sp->n_weight_dtypes > 0 || sp->n_kv_dtypes > 0)
		return enumerate_dtypes(sp, base, out, n, ex, err);
	for (const struct plan_outer_axis *a = outer_axes; a->opt; a++)
		if (*cint_at(sp, a->n) > 0)
			return plan_enumerate_axis(sp, a, base, out, n, ex, err);
	rc = check_space(sp, err);
	if (rc)
		return rc;
	/* (gpu, tp, pp) triples: --pp multiplies the tp list */
	fc = calloc(PLAN_MAX_LIST * PLAN_MAX_LIST * PLAN_MAX_LIST, sizeof(*fc));
	if (!fc)
		return ss_error_set(err, -ENOMEM, NULL, 0, "plan: out of memory");
	for (int mode = 0; mode < 2; mode++) {
		if ((mode == PLAN_COLOCATED && !sp->colocated) ||
		    (mode == PLAN_DISAGGREGATED && !sp->disaggregated))
			continue;
		for (int g = 0; g < sp->n_gpus; g++)
			/* tp, then pp, each expert-parallel size and attention
			 * ranks (1 only without --pp / --ep / --dp-attention
			 * lists) */
			for (int tx = 0; tx < sp->n_tp * n_pp * n_ep * n_dp; tx++) {
				const struct gpu_spec *gpu = sp->gpus[g];
				int t = tx / (n_pp * n_ep * n_dp);
				int pp = sp->n_pp ? sp->pp[tx / (n_ep * n_dp) % n_pp] : 1;
				int tp = sp->tp[t] * pp;   /* GPUs per instance until fits */
				int ep = sp->n_ep ? sp->ep[tx / n_dp % n_ep] : 0;
				int dp = sp->n_dp_attention ? sp->dp_attention[tx % n_dp] : 0;
				uint32_t counts[PLAN_MAX_COUNTS];   /* 4 KiB */
				int nc = instance_counts(sp, (uint32_t)(sp->max_gpus / tp), counts);
				uint32_t sizes = 0;
				size_t start = cv.n;

				/* layouts the model cannot run (ep and dp
				 * within each stage's tp GPUs); pipelines of
				 * attention ranks are not modelled */
				if ((ep > 1 || dp > 1) &&
				    ((pp > 1 && dp > 1) ||
				     cost_layout_check(sp->model, tp / pp, ep, dp, "--tp", "--ep",
						       "--dp-attention", NULL)))
					continue;
				for (int k = 0; k < nc; k++) {
					uint32_t inst = counts[k], pre[PLAN_MAX_LIST];
					int np = mode == PLAN_DISAGGREGATED ? splits(sp, inst, pre) : 1;

					if ((uint64_t)inst * (uint64_t)tp > (uint64_t)sp->max_gpus || np == 0)
						continue;
					sizes++;
					for (int s = 0; s < np; s++) {
						struct plan_config c = {
							.mode = (enum plan_mode)mode, .gpu = gpu, .tp = tp / pp,
							.instances = inst, .gpus = (int)inst * tp,
							.ep = ep, .dp_attention = dp,
							.pp = pp > 1 ? pp : 0,
						};

						if (mode == PLAN_DISAGGREGATED) {
							c.n_prefill = pre[s];
							c.n_decode = inst - pre[s];
						}
						c.usd_per_hour = gpu->cost_per_hour > 0 ?
							gpu->cost_per_hour * c.gpus : 0;
						rc = push_policies(sp, &c, &cv, ex, err);
						if (rc)
							goto fail;
					}
				}
				/* Memory is checked once per (gpu, tp): the
				 * configurations just pushed are removed whole. */
				if (sizes && !fits(base, sp->model, gpu, tp / pp, pp, ep, dp, fc, &n_fc)) {
					ex->memory += (uint32_t)(cv.n - start);
					cv.n = start;
				}
			}
	}
	if (sp->disaggregated && sp->mixed_pools) {
		rc = push_mixed(sp, base, &cv, ex, fc, &n_fc, err);
		if (rc)
			goto fail;
	}
	/* indices and keys after the removals */
	for (size_t i = 0; i < cv.n; i++)
		cv.v[i].index = (uint32_t)i;
	free(fc);
	*out = cv.v;
	*n = cv.n;
	return 0;
fail:
	free(fc);
	free(cv.v);
	return rc;
}

/* ---- the rate search ----------------------------------------------------- */

void plan_search_defaults(struct plan_search *s)
{
	*s = (struct plan_search){
		.target = 0.9, .tolerance = 0.05, .step = 4, .min_scale = 1.0 / 1024,
		.max_scale = 1024, .max_probes = 12, .min_span = 4, .each_slo = false,
	};
}

static bool attains(const struct plan_search *s, const struct plan_probe *p)
{
	return p->attainment >= s->target - 1e-9;
}

bool plan_probe_interval(const struct plan_eval *pe, const struct plan_probe *p, int m, double v,
			 double *lo, double *hi)
{
	double w = 1.0 + (p->outside_grid > 0 ? p->outside_grid : 0);

	*lo = *hi = NAN;
	if (!pe->iv_entry || m < 0 || m >= INTERVAL_METRICS || !(pe->iv_lo[m] > 0) ||
	    !isfinite(v))
		return false;
	*lo = v * pow(pe->iv_lo[m], w);
	*hi = v * pow(pe->iv_hi[m], w);
	return true;
}

bool plan_meets_nominal(const struct plan_search *s, const struct plan_probe *p)
{
	struct plan_probe q = *p;

	if (isfinite(p->attainment_nominal))
		q.attainment = p->attainment_nominal;
	return plan_meets(s, &q);
}

bool plan_meets(const struct plan_search *s, const struct plan_probe *p)
{
	return attains(s, p) &&
	       !(s->min_span > 0 && p->span_s < s->min_span * p->e2e_mean_ms / 1000);
}

const struct plan_probe *plan_result_best(const struct plan_result *r)
{
	return r->best >= 0 && r->best < r->n_probes ? &r->probes[r->best] : NULL;
}

/* Run probe k at scale; sets *pass. */
static int probe(const struct plan_search *s, plan_probe_fn fn, void *ctx,
		 struct plan_result *r, double scale, bool *pass, struct ss_error *err)
{
	struct plan_probe *p = &r->probes[r->n_probes];
	int rc;

	memset(p, 0, sizeof(*p));
	rc = fn(ctx, scale, p, err);
	if (rc)
		return rc;
	p->scale = scale;
	r->n_probes++;
	*pass = plan_meets(s, p);
	return 0;
}

/* --rate: a miss at or below the target rate's scale settles the
 * configuration (to rounding: the probe at exactly R counts). */
static bool below_rate(const struct plan_search *s, double scale, bool pass)
{
	return s->need_scale > 0 && !pass && scale <= s->need_scale * (1 + 1e-12);
}

int plan_search_rate(const struct plan_search *s, plan_probe_fn fn, void *ctx,
		     struct plan_result *r, struct ss_error *err)
{
	int max = s->max_probes < PLAN_MAX_PROBES ? s->max_probes : PLAN_MAX_PROBES;
	double lo = 0, hi = 0;   /* highest passing and lowest failing scale */
	int lo_k = -1;
	bool pass;
	int rc;

	r->status = PLAN_FAILED;
	r->n_probes = 0;
	r->best = -1;
	r->max_scale = 0;
	r->error[0] = '\0';
	if (max < 2)
		max = 2;
	rc = probe(s, fn, ctx, r, 1.0, &pass, err);
	if (rc)
		goto fail;
	if (below_rate(s, 1.0, pass))
		goto below;
	if (pass) {
		lo = 1;
		lo_k = 0;
		while (r->n_probes < max) {
			double x = fmin(lo * s->step, s->max_scale);

			if (!(x > lo))
				break;
			rc = probe(s, fn, ctx, r, x, &pass, err);
			if (rc)
				goto fail;
			if (below_rate(s, x, pass))
				goto below;
			if (!pass) {
				hi = x;
				break;
			}
			lo = x;
			lo_k = r->n_probes - 1;
		}
		if (hi == 0) {
			/* never failed: at max_scale, or out of probes */
			r->status = lo >= s->max_scale ? PLAN_CAPPED : PLAN_OK;
			r->max_scale = lo;
			r->best = lo_k;
			goto done;
		}
	} else {
		hi = 1;
		while (r->n_probes < max) {
			double x = fmax(hi / s->step, s->min_scale);

			if (!(x < hi))
				break;
			rc = probe(s, fn, ctx, r, x, &pass, err);
			if (rc)
				goto fail;
			if (below_rate(s, x, pass))
				goto below;
			if (pass) {
				lo = x;
				lo_k = r->n_probes - 1;
				break;
			}
			hi = x;
		}
		if (lo_k < 0) {
			r->status = PLAN_NONE;
			goto done;
		}
	}
	while (hi / lo > 1 + s->tolerance && r->n_probes < max) {
		double x = sqrt(lo * hi);

		rc = probe(s, fn, ctx, r, x, &pass, err);
		if (rc)
			goto fail;
		if (below_rate(s, x, pass))
			goto below;
		if (pass) {
			lo = x;
			lo_k = r->n_probes - 1;
		} else {
			hi = x;
		}
	}
	r->status = PLAN_OK;
	r->max_scale = lo;
	r->best = lo_k;
	goto done;
below:
	/* what the search had found so far: a lower bound below R */
	r->status = PLAN_BELOW;
	r->max_scale = lo;
	r->best = lo_k;
	goto done;
fail:
	r->status = PLAN_FAILED;
	if (err)
		ss_error_format(err, r->error, sizeof(r->error));
	else
		snprintf(r->error, sizeof(r->error), "simulation failed (%d)", rc);
	return rc;
done:
	r->workload_limited = 0;
	for (int k = 0; k < r->n_probes; k++)
		if (r->probes[k].scale > r->max_scale && attains(s, &r->probes[k]) &&
		    !plan_meets(s, &r->probes[k]))
			r->workload_limited = 1;
	return 0;
}

/* ---- evaluation with the engine ------------------------------------------ */

double plan_workload_rate(const struct workload *wl)
{
	double span;

	if (wl->n < 2)
		return 0;
	span = (double)(wl->req[wl->n - 1].arrival_ns - wl->req[0].arrival_ns) / 1e9;
	return span > 0 ? (double)(wl->n - 1) / span : 0;
}

void plan_config_engine(const struct plan_config *c, const struct engine_config *base,
			struct engine_config *ec)
{
	*ec = *base;
	/* the axes engine_config has a member of the same name for
	 * (plan-axes.def's COPY); an OUTER axis the plan does not search
	 * (0) leaves the base's */
#define SEARCHED_LAYOUT(v) 1
#define SEARCHED_BATCH(v) 1
#define SEARCHED_OUTER(v) (v)
#define ENGINE_COPY(group, cfg)            \
	if (SEARCHED_##group(c->cfg))      \
		ec->cfg = c->cfg;
#define ENGINE_NONE(group, cfg)
#define PLAN_AXIS(kind, list, cfg, opt, cli, dflt, lo, hi, group, engine, check, names, help) \
	ENGINE_##engine(group, cfg)
#include "plan-axes.def"
#undef PLAN_AXIS
#undef ENGINE_COPY
#undef ENGINE_NONE
#undef SEARCHED_LAYOUT
#undef SEARCHED_BATCH
#undef SEARCHED_OUTER
	ec->policy = c->policy_spec;
	ec->n_instances = c->instances;
	if (c->mode == PLAN_DISAGGREGATED) {
		struct engine_pool_config *pp = &ec->pools[ENGINE_POOL_PREFILL];
		struct engine_pool_config *dp = &ec->pools[ENGINE_POOL_DECODE];

		pp->n = c->n_prefill;
		pp->gpu = c->gpu;
		pp->tp = c->tp;
		dp->n = c->n_decode;
		dp->gpu = plan_config_decode_gpu(c);
		dp->tp = plan_config_decode_tp(c);
	} else {
		ec->pools[ENGINE_POOL_PREFILL].n = ec->pools[ENGINE_POOL_DECODE].n = 0;
	}
	ec->sample_interval_ns = 0;
	if (c->dtype_axis) {
		ec->weight_dtype = c->weight_dtype;
		ec->kv_dtype = c->kv_dtype;
	}
	if (c->spec_axis)
		ec->spec = c->spec;
}

struct probe_ctx {
	const struct plan_eval *pe;
	const struct plan_config *c;
	struct wl_request *scaled;   /* wl->n entries */
	/* for every probe of the configuration: pool 0 (colocated or
	 * prefill) and pool 1 (decode; the same one unless mixed) */
	struct cost_model *cm[2];
	/* pe->probes when c's probes may be reused or kept, else NULL */
	struct plan_probe_cache *pc;
	int32_t reused;              /* probes copied from pc */
	/* engine_new accepted c once: a probe is copied only after that, so
	 * a configuration the engine refuses fails as without the copies */
	bool built;
};

/* ---- probes reused across running-set limits (plan.h) --------------------- */

void plan_probe_cache_release(struct plan_probe_cache *c)
{
	if (!c)
		return;
	free(c->e);
	memset(c, 0, sizeof(*c));
}

bool plan_probes_reusable(const struct engine_config *base)
{
	const char *pc = base->prefix_cache ? base->prefix_cache : "off";
	const char *order = base->order ? base->order : "fcfs";
	size_t len = strcspn(order, ":");
	char name[64];
	const struct order_ops *ops;

	if (strcmp(pc, "off") || len >= sizeof(name))
		return false;
	memcpy(name, order, len);
	name[len] = '\0';
	ops = order_find(name);
	/* an order with keys keeps only max_items waiting requests in order */
	return ops && !ops->key;
}

/* c's key without its limit (into base->key). */
static void key_base(const struct plan_config *c, struct plan_config *base)
{
	*base = *c;
	base->max_batch = 0;
	plan_config_key(base);
}

bool plan_config_same_but_limit(const struct plan_config *a, const struct plan_config *b)
{
	struct plan_config x, y;

	if (!a->policy->batch_key || !b->policy->batch_key || a->max_batch <= 0 || b->max_batch <= 0)
		return false;
	key_base(a, &x);
	key_base(b, &y);
	return !strcmp(x.key, y.key);
}

/* Point ctx->pc at pe->probes when c can use it: a limit of its own, the
 * options allow it; a configuration of another key_base empties it. */
static void probe_cache_select(struct probe_ctx *ctx)
{
	struct plan_probe_cache *pc = ctx->pe->probes;
	const struct plan_config *c = ctx->c;
	struct plan_config base;

	ctx->pc = NULL;
	if (!pc || !c->policy->batch_key || c->max_batch <= 0 || !plan_probes_reusable(ctx->pe->base))
		return;
	key_base(c, &base);
	if (strcmp(pc->key_base, base.key)) {
		snprintf(pc->key_base, sizeof(pc->key_base), "%s", base.key);
		pc->n = 0;
	}
	ctx->pc = pc;
}

/* The entry of pc at exactly this scale, NULL when none. */
static struct plan_probe_cache_entry *probe_cache_at(struct plan_probe_cache *pc, double scale)
{
	for (size_t k = 0; k < pc->n; k++)
		if (pc->e[k].scale == scale)
			return &pc->e[k];
	return NULL;
}

/* Keep a probe run at this scale and limit whose running sets peaked at
 * peak requests, when the limit never acted (peak < limit) and pc holds no
 * smaller limit at this scale.  Out of memory only forgets it. */
static void probe_cache_keep(struct plan_probe_cache *pc, double scale, int32_t limit,
			     uint32_t peak, const struct plan_probe *p)
{
	struct plan_probe_cache_entry *x;

	if ((int64_t)peak >= limit)
		return;
	x = probe_cache_at(pc, scale);
	if (x && x->limit <= limit)
		return;
	if (!x) {
		if (pc->n == pc->cap) {
			size_t cap = pc->cap ? 2 * pc->cap : 64;
			struct plan_probe_cache_entry *e = realloc(pc->e, cap * sizeof(*e));

			if (!e)
				return;
			pc->e = e;
			pc->cap = cap;
		}
		x = &pc->e[pc->n++];
	}
	*x = (struct plan_probe_cache_entry){ .scale = scale, .limit = limit, .probe = *p };
}

/* plan_search.each_slo: the smallest, over the SLOs set, of the share of
 * requests meeting that SLO alone (request_meets_slo's rules, rejected and
 * unfinished requests missing).  O(requests x SLOs set). */
static double each_slo_attainment(const struct engine_results *r, const struct slo_config *slo)
{
	const struct slo_config one[4] = {
		{ .ttft_ms = slo->ttft_ms }, { .tpot_ms = slo->tpot_ms },
		{ .e2e_ms = slo->e2e_ms }, { .tbt_ms = slo->tbt_ms },
	};
	const double set[4] = { slo->ttft_ms, slo->tpot_ms, slo->e2e_ms, slo->tbt_ms };
	double worst = INFINITY;

	if (r->n_req == 0)
		return 0;
	for (int k = 0; k < 4; k++) {
		uint64_t good = 0;

		if (!(set[k] > 0))
			continue;
		for (uint64_t i = 0; i < r->n_req; i++)
			good += request_meets_slo(&r->req[i], &one[k]);
		if ((double)good / (double)r->n_req < worst)
			worst = (double)good / (double)r->n_req;
	}
	if (isinf(worst)) {   /* no SLO: the share finished, as summary's */
		uint64_t good = 0;

		for (uint64_t i = 0; i < r->n_req; i++)
			good += request_meets_slo(&r->req[i], slo);
		worst = (double)good / (double)r->n_req;
	}
	return worst;
}

/* The probe's energy per output token and the share of its busy time
 * priced outside measured grids, as summary_compute() counts them
 * (energy: busy energy plus idle power over each instance's idle time). */
static void probe_energy_grid(const struct engine_results *res, const struct summary *sum,
			      struct plan_probe *p)
{
	double energy = 0, oog_ns = 0, busy_ns = 0;
	double out_tokens = sum->output_tokens_per_s * sum->duration_s;

	for (uint32_t i = 0; i < res->n_instances; i++) {
		const struct instance_stats *st = &res->inst[i];
		int64_t idle_ns = res->end_ns - st->busy_ns;

		energy += st->busy_energy_j;
		if (idle_ns > 0)
			energy += (st->idle_power_w > 0 ? st->idle_power_w : res->idle_power_w) *
				  (double)idle_ns / 1e9;
		oog_ns += (double)st->out_of_grid_ns;
		busy_ns += (double)st->busy_ns;
	}
	p->j_per_output_token = out_tokens >= 0.5 ? energy / round(out_tokens) : NAN;
	p->outside_grid = busy_ns > 0 ? oog_ns / busy_ns : 0;
}

/* plan --conservative: p's attainment (and goodput) recounted with every
 * SLO divided by its metric's hi bound, widened for p's share of busy
 * time outside the measured grid as a run's interval is
 * (summary_interval_set); the nominal attainment kept beside it. */
static int conservative_attainment(const struct plan_eval *pe, const struct engine_results *res,
				   int tp, struct plan_probe *p, struct ss_error *err)
{
	struct slo_config slo = pe->slo;
	double w = 1.0 + p->outside_grid;
	struct {
		double *ms;
		int m;
	} t[] = {
		{ &slo.ttft_ms, INTERVAL_TTFT }, { &slo.tpot_ms, INTERVAL_TPOT },
		{ &slo.e2e_ms, INTERVAL_E2E }, { &slo.tbt_ms, INTERVAL_ITL },
	};
	struct summary sum;
	int rc;

	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++)
		if (*t[k].ms > 0 && pe->iv_hi[t[k].m] > 0)
			*t[k].ms /= pow(pe->iv_hi[t[k].m], w);
	p->attainment_nominal = p->attainment;
	if (pe->search.each_slo) {
		p->attainment = each_slo_attainment(res, &slo);
		return 0;
	}
	rc = summary_compute_slo(&sum, res, &slo, tp, err);
	if (!rc) {
		p->attainment = sum.slo_attainment;
		p->goodput_rps = sum.goodput_rps;
	}
	return rc;
}

static int run_probe(void *vctx, double scale, struct plan_probe *p, struct ss_error *err)
{
	struct probe_ctx *ctx = vctx;
	const struct plan_eval *pe = ctx->pe;
	const struct plan_config *c = ctx->c;
	struct workload wl = *pe->wl;
	struct engine_config ec;
	struct engine *e = NULL;
	struct engine_results res;
	struct summary sum;
	uint32_t peak = 0;
	int rc;

	const struct plan_probe_cache_entry *x = NULL;

	if (ctx->pc) {
		x = probe_cache_at(ctx->pc, scale);
		if (x && !(x->limit < c->max_batch))
			x = NULL;
	}
	if (x && ctx->built) {
		*p = x->probe;
		ctx->reused++;
		ctx->pc->reused++;
		return 0;
	}
	if (scale != 1 && !pe->base->concurrency) {
		for (size_t i = 0; i < wl.n; i++) {
			ctx->scaled[i] = pe->wl->req[i];
			ctx->scaled[i].arrival_ns = llround((double)pe->wl->req[i].arrival_ns / scale);
		}
		wl.req = ctx->scaled;
	}
	plan_config_engine(c, pe->base, &ec);
	if (ec.concurrency) {
		/* closed loop: the scale multiplies the clients, at least one */
		double n = round((double)pe->base->concurrency * scale);

		ec.concurrency = n < 1 ? 1 : n > 1e9 ? 1000000000u : (uint32_t)n;
	}
	ec.cost_models[0] = ctx->cm[0];
	ec.cost_models[1] = ctx->cm[1];
	rc = engine_new(&e, &ec, &wl, err);
	if (!rc)
		ctx->built = true;
	if (!rc && x) {
		/* the engine accepts this configuration as it accepted the
		 * smaller limit's (a limit its policy refuses fails here, as
		 * the simulation would): the probe is the copy */
		engine_free(e);
		*p = x->probe;
		ctx->reused++;
		ctx->pc->reused++;
		return 0;
	}
	if (!rc)
		rc = engine_run(e, err);
	if (!rc) {
		engine_results(e, &res);
		/* the figures a probe keeps, without the rest of a run's
		 * summary (histograms, energy, queueing and KV transfer
		 * distributions): the same values */
		rc = summary_compute_slo(&sum, &res, &pe->slo, c->tp, err);
		for (uint32_t i = 0; i < res.n_instances; i++)
			if (res.inst[i].peak_running > peak)
				peak = res.inst[i].peak_running;
	}
	if (!rc) {
		/* closed loop: the rate is what the clients achieved */
		p->rate_rps = ec.concurrency ? sum.requests_per_s : pe->rate_rps * scale;
		p->attainment = pe->search.each_slo ? each_slo_attainment(&res, &pe->slo)
						    : sum.slo_attainment;
		p->goodput_rps = sum.goodput_rps;
		p->throughput_rps = sum.requests_per_s;
		p->ttft_p50_ms = sum.ttft_ms.p50;
		p->ttft_p99_ms = sum.ttft_ms.p99;
		p->tpot_p50_ms = sum.tpot_ms.p50;
		p->tpot_p99_ms = sum.tpot_ms.p99;
		p->e2e_mean_ms = sum.e2e_ms.mean;
		p->e2e_p99_ms = sum.e2e_ms.p99;
		p->span_s = ec.concurrency ? (double)res.end_ns / 1e9 :
			    (double)(wl.req[wl.n - 1].arrival_ns - wl.req[0].arrival_ns) / 1e9;
		probe_energy_grid(&res, &sum, p);
		p->attainment_nominal = NAN;
		if (pe->conservative)
			rc = conservative_attainment(pe, &res, c->tp, p, err);
		p->scale = scale;   /* as plan_search_rate sets it */
		if (ctx->pc) {
			ctx->pc->simulated++;
			probe_cache_keep(ctx->pc, scale, c->max_batch, peak, p);
		}
	}
	engine_free(e);
	return rc;
}

/* The cost model of one pool, for every probe of a configuration. */
static int pool_cost_model(const struct plan_eval *pe, const struct gpu_spec *gpu, int tp,
			   enum ss_dtype w, enum ss_dtype kv, int ep, int dp,
			   struct cost_model **out, struct ss_error *err)
{
	struct cost_config cc = {
		.model = pe->base->model, .gpu = gpu, .tp = tp,
		.stores = pe->base->stores, .n_stores = pe->base->n_stores,
		.power_cap_w = pe->base->power_cap_w, .clock_frac = pe->base->clock_frac,
		.shared_data = pe->base->shared_data, .engine = pe->base->engine,
		.weight_dtype = w, .kv_dtype = kv,
		.ep = ep, .dp_attention = dp, .gpus_per_node = pe->base->gpus_per_node,
		.ref_gpus = pe->base->ref_gpus, .n_ref_gpus = pe->base->n_ref_gpus,
	};

	return cost_model_new(out, pe->base->cost_model ? pe->base->cost_model : "auto", &cc, err);
}

void plan_cm_cache_release(struct plan_cm_cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n; i++)
		cost_model_free(c->e[i].cm);
	memset(c, 0, sizeof(*c));
}

/* The cost model of a pool from pe->cms, built there on first use; *owned
 * is set when the caller must free it (no cache, or the cache is full). */
static int pool_cost_model_cached(const struct plan_eval *pe, const struct plan_config *cfg,
				  const struct gpu_spec *gpu, int tp, int ep, int dp,
				  struct cost_model **out, bool *owned, struct ss_error *err)
{
	struct plan_cm_cache *c = pe->cms;
	/* the configuration's dtypes (dtype axes), else the base's */
	enum ss_dtype w = cfg->dtype_axis ? cfg->weight_dtype : pe->base->weight_dtype;
	enum ss_dtype kv = cfg->dtype_axis ? cfg->kv_dtype : pe->base->kv_dtype;
	int rc;

	*owned = true;
	if (c)
		for (int i = 0; i < c->n; i++)
			if (c->e[i].gpu == gpu && c->e[i].tp == tp && c->e[i].weight_dtype == w &&
			    c->e[i].kv_dtype == kv && c->e[i].ep == ep &&
			    c->e[i].dp_attention == dp) {
				*out = c->e[i].cm;
				*owned = false;
				return 0;
			}
	rc = pool_cost_model(pe, gpu, tp, w, kv, ep, dp, out, err);
	if (!rc && c && c->n < PLAN_CM_CACHE_MAX) {
		c->e[c->n].weight_dtype = w;
		c->e[c->n].kv_dtype = kv;
		c->e[c->n].gpu = gpu;
		c->e[c->n].tp = tp;
		c->e[c->n].ep = ep;
		c->e[c->n].dp_attention = dp;
		c->e[c->n].cm = *out;
		c->n++;
		*owned = false;
	}
	return rc;
}

/* One pool's part of plan_config_priced_by. */
static void pool_priced_by(const struct cost_model *cm, char *buf, size_t len, bool *roofline)
{
	static const enum cost_op ops[] = {
		COST_OP_GEMM, COST_OP_ATTN_PREFILL, COST_OP_ATTN_DECODE,
	};
	const char *seen[3];
	int n = 0;
	size_t at = strlen(buf);

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		const char *b = cost_model_op_backend(cm, ops[i]);
		bool dup = false;

		for (int k = 0; k < n; k++)
			dup |= !strcmp(seen[k], b);
		if (dup)
			continue;
		seen[n++] = b;
		*roofline |= !strcmp(b, "roofline");
		if (at < len)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", n > 1 ? "+" : "", b);
	}
}

int plan_config_priced_by(const struct plan_eval *pe, const struct plan_config *c, char *buf,
			  size_t len, bool *roofline, struct ss_error *err)
{
	struct cost_model *cm[2] = { NULL, NULL };
	bool owned[2] = { false, false };
	bool mixed = plan_config_mixed(c);
	int rc;

	assert(len > 0);
	buf[0] = '\0';
	*roofline = false;
	rc = pool_cost_model_cached(pe, c, c->gpu, c->tp, c->ep, c->dp_attention, &cm[0],
				    &owned[0], err);
	if (!rc && mixed)
		rc = pool_cost_model_cached(pe, c, plan_config_decode_gpu(c),
					    plan_config_decode_tp(c), c->ep, c->dp_attention, &cm[1],
					    &owned[1], err);
	if (!rc) {
		pool_priced_by(cm[0], buf, len, roofline);
		if (mixed) {
			size_t at = strlen(buf);

			if (at + 1 < len) {
				buf[at] = '/';
				buf[at + 1] = '\0';
			}
			pool_priced_by(cm[1], buf, len, roofline);
		}
	}
	if (owned[1])
		cost_model_free(cm[1]);
	if (owned[0])
		cost_model_free(cm[0]);
	return rc;
}

int plan_config_route(const struct plan_eval *pe, const struct plan_config *c, int pool,
		      enum plan_route *route, const char **ref, struct ss_error *err)
{
	static const enum cost_op ops[] = {
		COST_OP_GEMM, COST_OP_ATTN_PREFILL, COST_OP_ATTN_DECODE,
	};
	const struct gpu_spec *g = pool ? plan_config_decode_gpu(c) : c->gpu;
	int tp = pool ? plan_config_decode_tp(c) : c->tp;
	struct cost_model *cm = NULL;
	bool owned = false;
	int rc;

	*route = PLAN_ROUTE_MODEL;
	*ref = NULL;
	rc = pool_cost_model_cached(pe, c, g, tp, c->ep, c->dp_attention, &cm, &owned, err);
	if (rc)
		return rc;
	/* the reference's name outlives cm: it is a catalog GPU's */
	if (cost_model_reference(cm)) {
		*route = PLAN_ROUTE_SCALED;
		for (size_t i = 0; i < pe->base->n_ref_gpus; i++)
			if (!strcmp(pe->base->ref_gpus[i].name, cost_model_reference(cm)))
				*ref = pe->base->ref_gpus[i].name;
	} else {
		for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
			const char *b = cost_model_op_backend(cm, ops[i]);

			if (strcmp(b, "roofline") && strcmp(b, "constant"))
				*route = PLAN_ROUTE_OWN;
		}
	}
	if (owned)
		cost_model_free(cm);
	return 0;
}

int plan_evaluate(const struct plan_eval *pe, const struct plan_config *c,
		  struct plan_result *r, struct ss_error *err)
{
	bool owned[2] = { false, false };
	struct probe_ctx ctx = { pe, c, NULL, { NULL, NULL }, NULL, 0, false };
	bool mixed = plan_config_mixed(c);
	int rc;

	memset(r, 0, sizeof(*r));
	r->index = c->index;
	/* One cost model per pool for all the probes: building a measured
	 * one reads the calibration store, which costs more than a short
	 * simulation.  Pools of one GPU and tp share it. */
	rc = pool_cost_model_cached(pe, c, c->gpu, c->tp, c->ep, c->dp_attention, &ctx.cm[0],
				    &owned[0], err);
	if (!rc && mixed)
		rc = pool_cost_model_cached(pe, c, plan_config_decode_gpu(c), plan_config_decode_tp(c),
					    c->ep, c->dp_attention, &ctx.cm[1], &owned[1], err);
	if (rc) {
		r->status = PLAN_FAILED;
		snprintf(r->error, sizeof(r->error), "%.255s", err && err->msg[0] ? err->msg : "cost model");
		goto out;
	}
	if (!mixed)
		ctx.cm[1] = ctx.cm[0];
	ctx.scaled = malloc((pe->wl->n ? pe->wl->n : 1) * sizeof(*ctx.scaled));
	if (!ctx.scaled) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "plan: out of memory");
		r->status = PLAN_FAILED;
		snprintf(r->error, sizeof(r->error), "out of memory");
		goto out;
	}
	probe_cache_select(&ctx);
	rc = plan_search_rate(&pe->search, run_probe, &ctx, r, err);
	r->n_reused = ctx.reused;
out:
	free(ctx.scaled);
	if (ctx.cm[1] != ctx.cm[0] && owned[1])
		cost_model_free(ctx.cm[1]);
	if (owned[0])
		cost_model_free(ctx.cm[0]);
	return rc;
}

double plan_verify_scale(const struct plan_eval *pe, const struct plan_probe *b)
{
	if (pe->base->concurrency || !(pe->rate_rps > 0))
		return b->scale;
	return b->rate_rps / pe->rate_rps;
}

int plan_verify(const struct plan_eval *pe, const struct plan_config *c, double scale,
		struct plan_probe *p, struct ss_error *err)
{
	struct plan_eval one = *pe;
	bool owned[2] = { false, false };
	struct probe_ctx ctx = { &one, c, NULL, { NULL, NULL }, NULL, 0, false };
	bool mixed = plan_config_mixed(c);
	int rc;

	one.probes = NULL;   /* one probe, simulated: nothing to reuse */
	memset(p, 0, sizeof(*p));
	rc = pool_cost_model_cached(&one, c, c->gpu, c->tp, c->ep, c->dp_attention, &ctx.cm[0],
				    &owned[0], err);
	if (!rc && mixed)
		rc = pool_cost_model_cached(&one, c, plan_config_decode_gpu(c),
					    plan_config_decode_tp(c), c->ep, c->dp_attention, &ctx.cm[1],
					    &owned[1], err);
	if (!rc && !mixed)
		ctx.cm[1] = ctx.cm[0];
	if (!rc) {
		ctx.scaled = malloc((pe->wl->n ? pe->wl->n : 1) * sizeof(*ctx.scaled));
		rc = ctx.scaled ? run_probe(&ctx, scale, p, err) :
				  ss_error_set(err, -ENOMEM, NULL, 0, "plan: out of memory");
	}
	free(ctx.scaled);
	if (ctx.cm[1] && ctx.cm[1] != ctx.cm[0] && owned[1])
		cost_model_free(ctx.cm[1]);
	if (ctx.cm[0] && owned[0])
		cost_model_free(ctx.cm[0]);
	return rc;
}

/* ---- figures, frontier, ranking ------------------------------------------ */

void plan_figures(const struct plan_config *c, const struct plan_result *r,
		  const struct plan_search *s, struct plan_figures *f)
{
	const struct plan_probe *b = r->status == PLAN_FAILED ? NULL : plan_result_best(r);

	memset(f, 0, sizeof(*f));
	f->goodput_per_usd_hour = NAN;
	if (r->status != PLAN_FAILED && r->n_probes > 0)
		f->meets_at_scale_1 = plan_meets(s, &r->probes[0]);
	if (!b)
		return;
	f->max_rate_rps = b->rate_rps;
	/* Not the run's goodput, which divides by the run's duration, drain
	 * included: with a short workload that understates what the
	 * configuration sustains. */
	f->goodput_rps = b->rate_rps * b->attainment;
	f->goodput_per_gpu = c->gpus > 0 ? f->goodput_rps / c->gpus : 0;
	if (c->usd_per_hour > 0)
		f->goodput_per_usd_hour = f->goodput_rps / c->usd_per_hour;
}

void plan_pareto(const struct plan_point *pts, size_t n, bool *on)
{
	for (size_t i = 0; i < n; i++) {
		bool dominated = !pts[i].eligible;

		for (size_t j = 0; j < n && !dominated; j++) {
			if (j == i || !pts[j].eligible)
				continue;
			if (pts[j].cost <= pts[i].cost && pts[j].latency <= pts[i].latency &&
			    (pts[j].cost < pts[i].cost || pts[j].latency < pts[i].latency || j < i))
				dominated = true;
		}
		on[i] = !dominated;
	}
}

struct rank_item {
	size_t i;
	double key;
};

static int rank_cmp(const void *a, const void *b)
{
	const struct rank_item *x = a, *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

void plan_rank(const struct plan_config *cfg, const struct plan_result *res, size_t n,
	       const struct plan_search *s, size_t *order)
{
	struct rank_item *it = malloc((n ? n : 1) * sizeof(*it));

	if (!it) {
		for (size_t i = 0; i < n; i++)
			order[i] = i;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct plan_figures f;

		plan_figures(&cfg[i], &res[i], s, &f);
		it[i] = (struct rank_item){ i, plan_result_best(&res[i]) &&
						       res[i].status != PLAN_FAILED ?
						       f.goodput_per_gpu : -1 };
	}
	qsort(it, n, sizeof(*it), rank_cmp);
	for (size_t i = 0; i < n; i++)
		order[i] = it[i].i;
	free(it);
}

/* ---- fingerprints -------------------------------------------------------- */

uint64_t plan_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint64_t hash_i64(uint64_t h, int64_t v)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)v >> (8 * i));
	return plan_fnv1a(h, b, 8);
}

static uint64_t hash_f64(uint64_t h, double v)
{
	int64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	return hash_i64(h, bits);
}

uint64_t plan_workload_hash(const struct workload *wl)
{
	uint64_t h = hash_i64(PLAN_FNV_INIT, (int64_t)wl->n);

	for (size_t i = 0; i < wl->n; i++) {
		const struct wl_request *q = &wl->req[i];

		h = hash_i64(h, q->arrival_ns);
		h = hash_i64(h, ((int64_t)q->prompt_tokens << 32) | (uint32_t)q->output_tokens);
		h = hash_i64(h, ((int64_t)q->tenant << 32) | (uint32_t)q->priority);
		h = hash_i64(h, ((int64_t)q->prefix_off << 32) | q->prefix_n);
	}
	for (size_t i = 0; i < wl->n_hashes; i++)
		h = hash_i64(h, wl->hashes[i]);
	return hash_i64(h, wl->hash_block_tokens);
}

uint64_t plan_gpu_hash(const struct gpu_spec *g)
{
	uint64_t h = plan_fnv1a(PLAN_FNV_INIT, g->name, strlen(g->name));

	h = hash_f64(h, g->bf16_flops);
	h = hash_f64(h, g->hbm_bytes);
	h = hash_f64(h, g->hbm_bw);
	h = hash_f64(h, g->nvlink_bw);
	h = hash_f64(h, g->pcie_bw);
	h = hash_f64(h, g->tdp_w);
	h = hash_f64(h, g->idle_w);
	/* a mesh prices its collectives by its links (gpu_link_share); a
	 * switch's hash is what it was before the key existed */
	if (g->link_peers > 0)
		h = hash_i64(h, g->link_peers);
	/* a family lets --cost-model auto price a GPU without tables of its
	 * own from a measured sibling's (cost-scaled.c): results stored
	 * before the key existed, by the roofline, are not reused */
	if (g->family[0])
		h = plan_fnv1a(h, g->family, strlen(g->family));
	return h;
}

uint64_t plan_config_gpu_hash(const struct plan_config *c)
{
	uint64_t h = plan_gpu_hash(c->gpu);

	if (!plan_config_mixed(c))
		return h;    /* as before mixed pools: stored results stay valid */
	return hash_i64(h, (int64_t)plan_gpu_hash(plan_config_decode_gpu(c)));
}

/* Append to a bounded string. */
static void cat(char *buf, size_t len, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void cat(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (*at >= len)
		return;
	va_start(ap, fmt);
	w = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	if (w > 0)
		*at += (size_t)w;
	if (*at >= len)
		*at = len - 1;
}

static const char *str(const char *s)
{
	return s ? s : "-";
}

void plan_fingerprint(const struct plan_eval *pe, const char *version, char *desc,
		      size_t desc_len, char hex[17])
{
	const struct engine_config *b = pe->base;
	const struct model_spec *m = b->model;
	const struct plan_search *s = &pe->search;
	struct engine_kv_rule kv;
	char buf[4096];
	size_t at = 0;
	uint64_t h;

	cat(buf, sizeof(buf), &at, "servesim %s; workload %zu requests, content %016llx; ",
	    str(version), pe->wl->n, (unsigned long long)plan_workload_hash(pe->wl));
	cat(buf, sizeof(buf), &at,
	    "model %s (layers %d hidden %d heads %d/%d head_dim %d inter %d vocab %d dtype %d); ",
	    m->name, m->n_layers, m->hidden, m->n_heads, m->n_kv_heads, m->head_dim,
	    m->intermediate, m->vocab, m->dtype_bytes);
	if (m->weight_dtype)   /* only then: the fingerprints of earlier plans stay */
		cat(buf, sizeof(buf), &at, "checkpoint weights %s; ",
		    ss_dtype_name((enum ss_dtype)m->weight_dtype));
	cat(buf, sizeof(buf), &at, "slo ttft_ms=%.17g tpot_ms=%.17g e2e_ms=%.17g tbt_ms=%.17g; ",
	    pe->slo.ttft_ms, pe->slo.tpot_ms, pe->slo.e2e_ms, pe->slo.tbt_ms);
	cat(buf, sizeof(buf), &at,
	    "target %.17g tolerance %.17g step %.17g scales %.17g..%.17g probes %d min_span %.17g; ",
	    s->target, s->tolerance, s->step, s->min_scale, s->max_scale, s->max_probes,
	    s->min_span);
	if (s->each_slo)   /* only then: the fingerprints of earlier plans stay */
		cat(buf, sizeof(buf), &at, "attainment each; ");
	if (pe->conservative)   /* likewise */
		cat(buf, sizeof(buf), &at, "conservative hi ttft %.17g tpot %.17g itl %.17g e2e %.17g; ",
		    pe->iv_hi[INTERVAL_TTFT], pe->iv_hi[INTERVAL_TPOT], pe->iv_hi[INTERVAL_ITL],
		    pe->iv_hi[INTERVAL_E2E]);
	if (b->weight_dtype || b->kv_dtype)   /* likewise */
		cat(buf, sizeof(buf), &at, "weight_dtype %s kv_dtype %s; ",
		    ss_dtype_name(b->weight_dtype), ss_dtype_name(b->kv_dtype));
	if (b->max_context)   /* likewise */
		cat(buf, sizeof(buf), &at, "max_context %d; ", (int)b->max_context);
	if (b->lora)   /* likewise */
		cat(buf, sizeof(buf), &at, "lora %s; ", b->lora->text);
	/* a pool's own fields (sim/engine-pool.def), which a disaggregated
	 * configuration keeps where it does not set them (plan_config_engine);
	 * only when some are set, as the dtypes above */
	for (int k = 0; k < ENGINE_POOLS; k++)
		if (engine_pool_config_set(&b->pools[k])) {
			char pool[512];

			engine_pool_config_describe(&b->pools[k], pool, sizeof(pool));
			cat(buf, sizeof(buf), &at, "%s pool %s; ", engine_pool_name(k), pool);
		}
	cat(buf, sizeof(buf), &at,
	    "router %s pairing %s kv_overlap %d order %s victim %s preemption %s prefix_cache %s "
	    "admission %s predictor %s slo_ttft_ns %lld; ",
	    str(b->router), str(b->pairing), (int)b->kv_overlap, str(b->order), str(b->victim),
	    str(b->preemption), str(b->prefix_cache), str(b->admission), str(b->predictor),
	    (long long)b->slo_ttft_ns);
	/* the resolved KV rule and block size (engine_kv_rule_of): the
	 * fingerprint of a run under vLLM's default rule reads as before */
	engine_kv_rule_of(b, &kv);
	cat(buf, sizeof(buf), &at,
	    "block %d mem_util %.17g%s reserve %.17g kv_blocks %lld gpus_per_node %d cost_model %s "
	    "power_cap %.17g clock %.17g seed %llu; stores",
	    engine_block_size(b), kv.fraction, kv.memory == ENGINE_KV_FREE ? " of free" : "",
	    b->activation_reserve_bytes,
	    (long long)b->kv_blocks_override, b->gpus_per_node, str(b->cost_model), b->power_cap_w,
	    b->clock_frac, (unsigned long long)b->seed);
	if (b->engine) {
		char eng[2048];

		engine_profile_describe(b->engine, eng, sizeof(eng));
		cat(buf, sizeof(buf), &at, "engine %s; ", eng);
	}
	/* the serving stack where it says something the engine's description
	 * does not (a legacy profile's api_* are there already; an empty
	 * stack behind a profile without them is what a plan had before
	 * stacks), so that earlier plans' fingerprints stay */
	if (b->stack && !b->stack->legacy &&
	    (!stack_profile_empty(b->stack) || (b->engine && engine_profile_legacy_stack(b->engine)))) {
		char st[1536];

		stack_profile_describe(b->stack, st, sizeof(st));
		cat(buf, sizeof(buf), &at, "stack %s; ", st);
	}
	/* a closed loop's load; nothing for an open loop, whose fingerprint
	 * stays what it was */
	if (b->concurrency)
		cat(buf, sizeof(buf), &at, " closed concurrency %u think %s until %lld ramp %lld;",
		    b->concurrency, str(b->think_time), (long long)b->send_until_ns,
		    (long long)b->ramp_ns);
	for (int i = 0; i < b->n_stores; i++) {
		struct stat st;

		if (!b->stores[i])
			continue;
		if (stat(b->stores[i], &st) == 0)
			cat(buf, sizeof(buf), &at, " %s (%lld bytes)", b->stores[i],
			    (long long)st.st_size);
		else
			cat(buf, sizeof(buf), &at, " %s (missing)", b->stores[i]);
	}
	h = plan_fnv1a(PLAN_FNV_INIT, buf, strlen(buf));
	snprintf(hex, 17, "%016llx", (unsigned long long)h);
	if (desc && desc_len)
		snprintf(desc, desc_len, "%s", buf);
}
