/* servesim — the policy registry: lookup by name, version checks, shared
 * defaults for optional methods, and the listings the CLI shows.
 *
 * The registry itself is policies/registry.def, one POLICY(kind, name) line
 * per policy; this file declares and lists the tables from it, so a new
 * policy is one .c file plus that one line (docs/writing-a-policy.md).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"

/* The table type of each kind, named after the kind as registry.def spells
 * it, so that POLICY(kind, name) can declare kind_name_ops. */
typedef struct batch_policy_ops batch_table;
typedef struct order_ops order_table;
typedef struct victim_ops victim_table;
typedef struct router_ops router_table;
typedef struct admission_ops admission_table;

#define POLICY(kind, name) extern const kind##_table kind##_##name##_ops;
#include "registry.def"
#undef POLICY

/* One registered table.  A union of typed pointers rather than a common
 * header cast, so that every member is read through its own type. */
struct entry {
	enum policy_kind kind;
	union {
		const struct batch_policy_ops *batch;
		const struct order_ops *order;
		const struct victim_ops *victim;
		const struct router_ops *router;
		const struct admission_ops *admission;
	} ops;
};

#define KIND_batch POLICY_BATCH
#define KIND_order POLICY_ORDER
#define KIND_victim POLICY_VICTIM
#define KIND_router POLICY_ROUTER
#define KIND_admission POLICY_ADMISSION

static const struct entry registry[] = {
#define POLICY(kind, name) { KIND_##kind, { .kind = &kind##_##name##_ops } },
#include "registry.def"
#undef POLICY
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Per kind: its name in messages and listings, and the option selecting it. */
static const struct {
	const char *name, *option;
} kinds[POLICY_KIND_COUNT] = {
	[POLICY_BATCH] = { "batch", "--policy" },
	[POLICY_ORDER] = { "order", "--order" },
	[POLICY_VICTIM] = { "victim", "--victim" },
	[POLICY_ROUTER] = { "router", "--router" },
	[POLICY_ADMISSION] = { "admission", "--admission" },
};

/* What every table says about itself, read through its own type.  Members
 * added in version N are read only from tables with version >= N. */
static struct policy_info info_of(const struct entry *e)
{
	struct policy_info in = { .kind = e->kind, .kind_name = kinds[e->kind].name,
				  .option = kinds[e->kind].option };
	const char *params = NULL;

#define HEAD(t)                                       \
	do {                                          \
		in.version = (t)->version;            \
		in.name = (t)->name;                  \
		in.description = (t)->description;    \
		params = (t)->params;                 \
	} while (0)
	switch (e->kind) {
	case POLICY_BATCH: HEAD(e->ops.batch); break;
	case POLICY_ORDER: HEAD(e->ops.order); break;
	case POLICY_VICTIM: HEAD(e->ops.victim); break;
	case POLICY_ROUTER: HEAD(e->ops.router); break;
	case POLICY_ADMISSION: HEAD(e->ops.admission); break;
	case POLICY_KIND_COUNT: break;
	}
#undef HEAD
	if (!in.description)
		in.description = "";
	in.params = in.version >= 2 && params ? params : "";
	return in;
}

static const struct entry *find(enum policy_kind kind, const char *name)
{
	for (size_t i = 0; i < N_OF(registry); i++) {
		struct policy_info in = info_of(&registry[i]);

		if (registry[i].kind == kind && in.name && strcmp(in.name, name) == 0)
			return &registry[i];
	}
	return NULL;
}

const struct batch_policy_ops *batch_policy_find(const char *name)
{
	const struct entry *e = find(POLICY_BATCH, name);

	return e ? e->ops.batch : NULL;
}

const struct order_ops *order_find(const char *name)
{
	const struct entry *e = find(POLICY_ORDER, name);

	return e ? e->ops.order : NULL;
}

const struct victim_ops *victim_find(const char *name)
{
	const struct entry *e = find(POLICY_VICTIM, name);

	return e ? e->ops.victim : NULL;
}

const struct router_ops *router_find(const char *name)
{
	const struct entry *e = find(POLICY_ROUTER, name);

	return e ? e->ops.router : NULL;
}

const struct admission_ops *admission_find(const char *name)
{
	const struct entry *e = find(POLICY_ADMISSION, name);

	return e ? e->ops.admission : NULL;
}

/* ---- checks and shared defaults ----------------------------------------- */

/* The checks every kind shares: a name and a version this servesim runs. */
static int check_head(const char *option, enum policy_kind kind, const char *name, int version,
		      struct ss_error *err)
{
	if (!name || !*name)
		return ss_error_set(err, -EINVAL, NULL, 0, "%s: a %s policy's table has no name",
				    option, kinds[kind].name);
	if (version < POLICY_VERSION_MIN)
		return ss_error_set(err, -ENOTSUP, NULL, 0,
				    "%s %s: the %s policy's table has version %d, older than the "
				    "oldest this servesim runs (%d)",
				    option, name, kinds[kind].name, version, POLICY_VERSION_MIN);
	if (version > POLICY_VERSION)
		return ss_error_set(err, -ENOTSUP, NULL, 0,
				    "%s %s: the %s policy's table has version %d, newer than this "
				    "servesim's policy interface (%d)",
				    option, name, kinds[kind].name, version, POLICY_VERSION);
	return 0;
}

static int missing(const char *option, enum policy_kind kind, const char *name,
		   const char *method, struct ss_error *err)
{
	return ss_error_set(err, -EINVAL, NULL, 0, "%s %s: the %s policy's table has no %s method",
			    option, name, kinds[kind].name, method);
}

/* The members every kind shares, made safe to use without checks. */
#define RESOLVE_HEAD(out)                                             \
	do {                                                          \
		if (!(out)->description)                              \
			(out)->description = "";                      \
		if ((out)->version < 2 || !(out)->params)             \
			(out)->params = "";                           \
	} while (0)

/* Defaults.  init: the policy takes no parameters (the caller's
 * ss_params_check_unused then rejects any it was given). */
static int default_init(void *priv, struct ss_params *params, struct ss_error *err)
{
	(void)priv;
	(void)params;
	(void)err;
	return 0;
}

static int default_init_n(void *priv, struct ss_params *params, uint32_t n, struct ss_error *err)
{
	(void)priv;
	(void)params;
	(void)n;
	(void)err;
	return 0;
}

/* admissible: every request the engine's own checks let through. */
static bool default_admissible(const void *priv, const struct req_view *req,
			       const struct inst_view *inst, const char **reason)
{
	(void)priv;
	(void)req;
	(void)inst;
	(void)reason;
	return true;
}

/* admit: every arrival. */
static bool default_admit(const void *priv, const struct req_view *req,
			  const struct inst_view *inst, int64_t now, const struct policy_host *host,
			  const char **reason)
{
	(void)priv;
	(void)req;
	(void)inst;
	(void)now;
	(void)host;
	(void)reason;
	return true;
}

/* deadline: none known, so expire is asked about every waiting request at
 * every step (O(n) per step). */
static int64_t default_deadline(const void *priv, const struct req_view *req)
{
	(void)priv;
	(void)req;
	return INT64_MIN;
}

/* enqueued, served: the order keeps no state about them. */
static void default_enqueued(void *priv, const struct req_view *req, const struct inst_view *inst)
{
	(void)priv;
	(void)req;
	(void)inst;
}

static void default_served(void *priv, const struct req_view *req, int32_t prefill,
			   int32_t decode)
{
	(void)priv;
	(void)req;
	(void)prefill;
	(void)decode;
}

bool order_serves(const struct order_ops *o)
{
	return o->served != default_served;
}

/* steady_decode: no promise. */
static uint32_t default_steady_decode(const void *priv)
{
	(void)priv;
	return 0;
}

/* uses_predictions: reads no predictions. */
static bool default_uses_predictions(const void *priv)
{
	(void)priv;
	return false;
}

/* key_static and key_tenant: the key may change while a request waits, in
 * any way (the safe answer). */
static bool default_key_static(const void *priv)
{
	(void)priv;
	return false;
}

/* key_aging: the key does not age linearly. */
static double default_key_aging(const void *priv)
{
	(void)priv;
	return 0;
}

int batch_policy_resolve(const char *option, const struct batch_policy_ops *ops,
			 struct batch_policy_ops *out, struct ss_error *err)
{
	int rc = check_head(option, POLICY_BATCH, ops->name, ops->version, err);

	if (rc)
		return rc;
	if (!ops->pick_step)
		return missing(option, POLICY_BATCH, ops->name, "pick_step", err);
	if (!ops->max_items)
		return missing(option, POLICY_BATCH, ops->name, "max_items", err);
	*out = *ops;
	RESOLVE_HEAD(out);
	if (!out->priv_size)
		out->priv_size = 1;
	if (!out->init)
		out->init = default_init;
	if (!out->admissible)
		out->admissible = default_admissible;
	if (out->version < 3 || !out->steady_decode)
		out->steady_decode = default_steady_decode;
	if (out->version < 4 || !out->uses_predictions)
		out->uses_predictions = default_uses_predictions;
	return 0;
}

int router_resolve(const char *option, const struct router_ops *ops, struct router_ops *out,
		   struct ss_error *err)
{
	int rc = check_head(option, POLICY_ROUTER, ops->name, ops->version, err);

	if (rc)
		return rc;
	if (!ops->route)
		return missing(option, POLICY_ROUTER, ops->name, "route", err);
	*out = *ops;
	RESOLVE_HEAD(out);
	if (!out->priv_size)
		out->priv_size = 1;
	if (!out->init)
		out->init = default_init_n;
	return 0;
}

int order_resolve(const char *option, const struct order_ops *ops, struct order_ops *out,
		  struct ss_error *err)
{
	int rc = check_head(option, POLICY_ORDER, ops->name, ops->version, err);

	if (rc)
		return rc;
	*out = *ops;
	RESOLVE_HEAD(out);
	if (!out->priv_size)
		out->priv_size = 1;
	if (!out->init)
		out->init = default_init_n;
	if (!out->enqueued)
		out->enqueued = default_enqueued;
	if (!out->served)
		out->served = default_served;
	if (out->version < 2) {
		out->uses_predictions = false;
		out->key_static = NULL;
		out->key_tenant = NULL;
		out->key_aging = NULL;
	}
	if (!out->key_static || !out->key)
		out->key_static = default_key_static;
	if (!out->key_tenant || !out->key)
		out->key_tenant = default_key_static;
	if (!out->key_aging || !out->key)
		out->key_aging = default_key_aging;
	/* key stays as it is: NULL is the capability "keep the engine's order". */
	return 0;
}

int victim_resolve(const char *option, const struct victim_ops *ops, struct victim_ops *out,
		   struct ss_error *err)
{
	int rc = check_head(option, POLICY_VICTIM, ops->name, ops->version, err);

	if (rc)
		return rc;
	*out = *ops;
	RESOLVE_HEAD(out);
	/* compare stays as it is: NULL is the capability "admission order". */
	return 0;
}

int admission_resolve(const char *option, const struct admission_ops *ops,
		      struct admission_ops *out, struct ss_error *err)
{
	int rc = check_head(option, POLICY_ADMISSION, ops->name, ops->version, err);

	if (rc)
		return rc;
	*out = *ops;
	RESOLVE_HEAD(out);
	if (!out->priv_size)
		out->priv_size = 1;
	if (!out->init)
		out->init = default_init;
	if (!out->admit)
		out->admit = default_admit;
	/* expire stays as it is: NULL is the capability "nothing expires". */
	if (out->version < 2 || !out->deadline)
		out->deadline = default_deadline;
	return 0;
}

static int unknown(const char *option, enum policy_kind kind, const char *name,
		   struct ss_error *err)
{
	static const char *const what[POLICY_KIND_COUNT] = {
		[POLICY_BATCH] = "batch policy",
		[POLICY_ORDER] = "queue order",
		[POLICY_VICTIM] = "victim order",
		[POLICY_ROUTER] = "router",
		[POLICY_ADMISSION] = "admission policy",
	};

	return ss_error_set(err, -EINVAL, NULL, 0,
			    "%s: unknown %s '%s' (see `servesim list policies`)", option,
			    what[kind], name);
}

int batch_policy_lookup(const char *option, const char *name, struct batch_policy_ops *out,
			struct ss_error *err)
{
	const struct batch_policy_ops *ops = batch_policy_find(name);

	return ops ? batch_policy_resolve(option, ops, out, err)
		   : unknown(option, POLICY_BATCH, name, err);
}

int router_lookup(const char *option, const char *name, struct router_ops *out,
		  struct ss_error *err)
{
	const struct router_ops *ops = router_find(name);

	return ops ? router_resolve(option, ops, out, err) : unknown(option, POLICY_ROUTER, name, err);
}

int order_lookup(const char *option, const char *name, struct order_ops *out,
		 struct ss_error *err)
{
	const struct order_ops *ops = order_find(name);

	return ops ? order_resolve(option, ops, out, err) : unknown(option, POLICY_ORDER, name, err);
}

int victim_lookup(const char *option, const char *name, struct victim_ops *out,
		  struct ss_error *err)
{
	const struct victim_ops *ops = victim_find(name);

	return ops ? victim_resolve(option, ops, out, err) : unknown(option, POLICY_VICTIM, name, err);
}

int admission_lookup(const char *option, const char *name, struct admission_ops *out,
		     struct ss_error *err)
{
	const struct admission_ops *ops = admission_find(name);

	return ops ? admission_resolve(option, ops, out, err)
		   : unknown(option, POLICY_ADMISSION, name, err);
}

/* ---- listings ------------------------------------------------------------ */

size_t policy_list(struct policy_info *out, size_t cap)
{
	for (size_t i = 0; i < N_OF(registry) && i < cap; i++)
		out[i] = info_of(&registry[i]);
	return N_OF(registry);
}

const char *policy_kind_option(enum policy_kind kind)
{
	return kind < POLICY_KIND_COUNT ? kinds[kind].option : NULL;
}

size_t policy_names(enum policy_kind kind, const char *sep, char *buf, size_t size)
{
	size_t len = 0;

	if (size)
		buf[0] = '\0';
	for (size_t i = 0; i < N_OF(registry); i++) {
		struct policy_info in;
		int n;

		if (registry[i].kind != kind)
			continue;
		in = info_of(&registry[i]);
		n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "%s%s",
			     len ? sep : "", in.name);
		if (n > 0)
			len += (size_t)n;
	}
	return len;
}
