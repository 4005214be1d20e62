/* The policy registry: policies/registry.def is the only list of policies.
 * Every line of it is a registered table in the same order; every
 * registered table resolves; `servesim list policies` and docs/policies.md
 * show every one, so adding a policy needs nothing but its file and its
 * line.  Tables of a version outside POLICY_VERSION_MIN .. POLICY_VERSION
 * are refused with -ENOTSUP and a message naming the policy and both
 * versions, a missing required method with -EINVAL; optional methods left
 * NULL get shared defaults that callers call without checking. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "policy.h"

#define MAX_POLICIES 256

static size_t registered(struct policy_info *info)
{
	size_t n = policy_list(info, MAX_POLICIES);

	ck_assert_uint_le(n, MAX_POLICIES);
	ck_assert_uint_eq(policy_list(NULL, 0), n);
	return n;
}

/* The source tree, from SERVESIM_DATA (its data/ folder). */
static char *read_source(const char *rel)
{
	const char *data = getenv("SERVESIM_DATA");
	char path[4096];
	FILE *f;
	char *buf;
	long len;

	ck_assert_msg(data != NULL, "SERVESIM_DATA is not set");
	snprintf(path, sizeof(path), "%s/../%s", data, rel);
	f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	ck_assert_int_ge(len, 0);
	rewind(f);
	buf = malloc((size_t)len + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

START_TEST(registry_def_is_the_registry)
{
	struct policy_info info[MAX_POLICIES];
	size_t n = registered(info), k = 0;
	char *def = read_source("policies/registry.def");

	/* Each POLICY(kind, name) line, in order, is the k-th table. */
	for (char *line = strtok(def, "\n"); line; line = strtok(NULL, "\n")) {
		char kind[32], name[64];

		if (strncmp(line, "POLICY(", 7))
			continue;
		ck_assert_int_eq(sscanf(line, "POLICY(%31[a-z], %63[a-z0-9])", kind, name), 2);
		ck_assert_uint_lt(k, n);
		ck_assert_str_eq(info[k].kind_name, kind);
		ck_assert_str_eq(info[k].name, name);
		k++;
	}
	ck_assert_uint_eq(k, n);
	ck_assert_uint_ge(n, 24);  /* what shipped when this test was written */
	free(def);
}
END_TEST

/* No second list to keep in step: the build and registry.c name no policy
 * file or table themselves, they take both from registry.def. */
START_TEST(no_other_list_names_a_policy)
{
	struct policy_info info[MAX_POLICIES];
	size_t n = registered(info);
	char *build = read_source("policies/meson.build");
	char *reg = read_source("policies/registry.c");

	for (size_t i = 0; i < n; i++) {
		char file[96], table[96];

		snprintf(file, sizeof(file), "%s-%s.c", info[i].kind_name, info[i].name);
		snprintf(table, sizeof(table), "%s_%s_ops", info[i].kind_name, info[i].name);
		ck_assert_msg(!strstr(build, file), "policies/meson.build lists %s by hand", file);
		ck_assert_msg(!strstr(reg, table), "policies/registry.c names %s by hand", table);
	}
	free(build);
	free(reg);
}
END_TEST

START_TEST(every_registered_policy_resolves)
{
	struct policy_info info[MAX_POLICIES];
	size_t n = registered(info);
	struct ss_error err = { 0 };

	for (size_t i = 0; i < n; i++) {
		const struct policy_info *p = &info[i];
		int rc = -1;

		ck_assert_int_ge(p->version, POLICY_VERSION_MIN);
		ck_assert_int_le(p->version, POLICY_VERSION);
		ck_assert_msg(*p->description && !strchr(p->description, '\n'),
			      "%s %s: the description must be one non-empty line", p->option, p->name);
		ck_assert_msg(!strchr(p->params, '\n'), "%s %s: params must be one line",
			      p->option, p->name);
		ck_assert_str_eq(p->option, policy_kind_option(p->kind));
		for (size_t j = 0; j < i; j++)
			ck_assert_msg(info[j].kind != p->kind || strcmp(info[j].name, p->name),
				      "%s %s is registered twice", p->option, p->name);
		switch (p->kind) {
		case POLICY_BATCH: {
			struct batch_policy_ops o;

			rc = batch_policy_lookup(p->option, p->name, &o, &err);
			ck_assert(rc || (o.init && o.admissible && o.pick_step && o.max_items &&
					 o.priv_size >= 1 && o.params == p->params));
			break;
		}
		case POLICY_ORDER: {
			struct order_ops o;

			rc = order_lookup(p->option, p->name, &o, &err);
			ck_assert(rc || (o.init && o.enqueued && o.served && o.priv_size >= 1));
			break;
		}
		case POLICY_VICTIM: {
			struct victim_ops o;

			rc = victim_lookup(p->option, p->name, &o, &err);
			ck_assert(rc || o.params);
			break;
		}
		case POLICY_ROUTER: {
			struct router_ops o;

			rc = router_lookup(p->option, p->name, &o, &err);
			ck_assert(rc || (o.init && o.route && o.priv_size >= 1));
			break;
		}
		case POLICY_ADMISSION: {
			struct admission_ops o;

			rc = admission_lookup(p->option, p->name, &o, &err);
			ck_assert(rc || (o.init && o.admit && o.priv_size >= 1));
			break;
		}
		case POLICY_KIND_COUNT:
			break;
		}
		ck_assert_msg(rc == 0, "%s %s: %s", p->option, p->name, err.msg);
	}
}
END_TEST

START_TEST(unknown_names_are_errors)
{
	struct ss_error err = { 0 };
	struct router_ops r;
	struct batch_policy_ops b;
	struct order_ops o;
	struct victim_ops v;
	struct admission_ops a;

	ck_assert_int_eq(router_lookup("--pairing", "nope", &r, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "--pairing: unknown router 'nope' (see `servesim list policies`)");
	ck_assert_int_eq(batch_policy_lookup("--policy", "nope", &b, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown batch policy 'nope'"));
	ck_assert_int_eq(order_lookup("--order", "nope", &o, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown queue order 'nope'"));
	ck_assert_int_eq(victim_lookup("--victim", "nope", &v, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown victim order 'nope'"));
	ck_assert_int_eq(admission_lookup("--admission", "nope", &a, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown admission policy 'nope'"));
	/* A kind's names are its own: a router is not a batch policy. */
	ck_assert_int_eq(batch_policy_lookup("--policy", "kvfree", &b, &err), -EINVAL);
}
END_TEST

/* ---- test tables ---------------------------------------------------------- */

static int n_picks;

static void pick_nothing(void *priv, const struct inst_view *inst, int64_t now,
			 const struct policy_host *host, struct step_plan *plan)
{
	(void)priv;
	(void)inst;
	(void)now;
	(void)host;
	(void)plan;
	n_picks++;
}

static uint32_t one_item(const void *priv)
{
	(void)priv;
	return 1;
}

static uint32_t route_last(void *priv, const struct req_view *req,
			   const struct inst_view *const *insts, uint32_t n, int64_t now,
			   const struct policy_host *host)
{
	(void)priv;
	(void)req;
	(void)insts;
	(void)now;
	(void)host;
	return n - 1;
}

static int keep_order(const struct req_view *a, const struct req_view *b)
{
	(void)a;
	(void)b;
	return 0;
}

/* Only the required methods: everything optional comes from the defaults. */
static const struct batch_policy_ops bare_batch = {
	.version = POLICY_VERSION, .name = "bare", .description = "required methods only",
	.pick_step = pick_nothing, .max_items = one_item,
};
static const struct router_ops bare_router = {
	.version = POLICY_VERSION, .name = "bare", .route = route_last,
};
static const struct order_ops bare_order = { .version = POLICY_VERSION, .name = "bare" };
static const struct victim_ops bare_victim = { .version = POLICY_VERSION, .name = "bare" };
static const struct admission_ops bare_admission = { .version = POLICY_VERSION, .name = "bare" };

START_TEST(null_optional_methods_work_through_defaults)
{
	struct ss_error err = { 0 };
	struct ss_params p;
	struct batch_policy_ops b;
	struct router_ops r;
	struct order_ops o;
	struct victim_ops v;
	struct admission_ops a;
	struct req_view req = { .id = 7, .prompt_tokens = 100 };
	struct inst_view iv = { .block_size = 16, .total_blocks = 10, .free_blocks = 10 };
	const struct inst_view *insts[3] = { &iv, &iv, &iv };
	struct step_plan plan = { 0 };
	const char *reason = NULL;
	void *priv;

	ck_assert_int_eq(batch_policy_resolve("--policy", &bare_batch, &b, &err), 0);
	ck_assert_int_eq(router_resolve("--router", &bare_router, &r, &err), 0);
	ck_assert_int_eq(order_resolve("--order", &bare_order, &o, &err), 0);
	ck_assert_int_eq(victim_resolve("--victim", &bare_victim, &v, &err), 0);
	ck_assert_int_eq(admission_resolve("--admission", &bare_admission, &a, &err), 0);

	/* Used as the engine uses them, with no NULL checks: */
	priv = calloc(1, b.priv_size);
	ck_assert_ptr_nonnull(priv);
	ck_assert_int_eq(ss_params_parse(&p, "--policy", "bare", true, &err), 0);
	ck_assert_int_eq(b.init(priv, &p, &err), 0);
	ck_assert_int_eq(ss_params_check_unused(&p, &err), 0);
	ck_assert(b.admissible(priv, &req, &iv, &reason));
	ck_assert_ptr_null(reason);
	n_picks = 0;
	b.pick_step(priv, &iv, 0, NULL, &plan);
	ck_assert_int_eq(n_picks, 1);
	ck_assert_uint_eq(b.max_items(priv), 1);
	free(priv);

	/* The default init takes no parameters, so a key given is one the
	 * caller's unused-key check rejects, naming it. */
	priv = calloc(1, r.priv_size);
	ck_assert_ptr_nonnull(priv);
	ck_assert_int_eq(ss_params_parse(&p, "--router", "bare:depth=3", true, &err), 0);
	ck_assert_int_eq(r.init(priv, &p, 3, &err), 0);
	ck_assert_int_lt(ss_params_check_unused(&p, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "depth"));
	ck_assert_uint_eq(r.route(priv, &req, insts, 3, 0, NULL), 2);
	free(priv);

	priv = calloc(1, o.priv_size);
	ck_assert_ptr_nonnull(priv);
	ck_assert_int_eq(ss_params_parse(&p, "--order", "bare", true, &err), 0);
	ck_assert_int_eq(o.init(priv, &p, 2, &err), 0);
	o.enqueued(priv, &req, &iv);
	o.served(priv, &req, 16, 0);
	ck_assert_ptr_null(o.key);  /* a capability: the engine keeps its own order */
	free(priv);

	ck_assert_ptr_null(v.compare);  /* a capability: admission order */

	priv = calloc(1, a.priv_size);
	ck_assert_ptr_nonnull(priv);
	ck_assert_int_eq(ss_params_parse(&p, "--admission", "bare", true, &err), 0);
	ck_assert_int_eq(a.init(priv, &p, &err), 0);
	ck_assert(a.admit(priv, &req, &iv, 0, NULL, &reason));
	ck_assert_ptr_null(a.expire);  /* a capability: nothing expires */
	/* no deadline known: an expire would be asked at every step */
	ck_assert_int_eq(a.deadline(priv, &req), INT64_MIN);
	free(priv);

	/* Descriptions and parameter summaries are never NULL once resolved. */
	ck_assert_str_eq(r.description, "");
	ck_assert_str_eq(r.params, "");
	ck_assert_str_eq(b.description, "required methods only");
}
END_TEST

START_TEST(defaults_never_replace_given_methods)
{
	struct ss_error err = { 0 };
	struct victim_ops v;
	struct victim_ops given = { .version = POLICY_VERSION, .name = "keep",
				    .compare = keep_order };
	struct batch_policy_ops b;

	ck_assert_int_eq(victim_resolve("--victim", &given, &v, &err), 0);
	ck_assert_ptr_eq(v.compare, keep_order);
	ck_assert_int_eq(batch_policy_lookup("--policy", "vllm", &b, &err), 0);
	ck_assert_ptr_eq(b.init, batch_policy_find("vllm")->init);
	ck_assert_ptr_eq(b.admissible, batch_policy_find("vllm")->admissible);
	ck_assert_ptr_eq(b.pick_step, batch_policy_find("vllm")->pick_step);
}
END_TEST

START_TEST(versions_too_old_or_too_new_are_refused)
{
	static const int bad[] = { POLICY_VERSION_MIN - 1, -1, POLICY_VERSION + 1, 1000 };
	struct ss_error err = { 0 };
	char want[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ver = bad[i];
		bool old = ver < POLICY_VERSION_MIN;
		struct batch_policy_ops b = bare_batch, bo;
		struct router_ops r = bare_router, ro;
		struct order_ops o = bare_order, oo;
		struct victim_ops v = bare_victim, vo;
		struct admission_ops a = bare_admission, ao;

		b.version = r.version = o.version = v.version = a.version = ver;
		snprintf(want, sizeof(want), "has version %d, %s", ver, old ? "older" : "newer");

		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(batch_policy_resolve("--policy", &b, &bo, &err), -ENOTSUP);
		ck_assert_int_eq(err.code, -ENOTSUP);
		ck_assert_msg(strstr(err.msg, "--policy bare: the batch policy's table") &&
				      strstr(err.msg, want),
			      "%s", err.msg);
		snprintf(want, sizeof(want), "(%d)", old ? POLICY_VERSION_MIN : POLICY_VERSION);
		ck_assert_msg(strstr(err.msg, want), "%s", err.msg);

		ck_assert_int_eq(router_resolve("--router", &r, &ro, &err), -ENOTSUP);
		ck_assert_ptr_nonnull(strstr(err.msg, "--router bare: the router policy's table"));
		ck_assert_int_eq(order_resolve("--order", &o, &oo, &err), -ENOTSUP);
		ck_assert_ptr_nonnull(strstr(err.msg, "--order bare"));
		ck_assert_int_eq(victim_resolve("--victim", &v, &vo, &err), -ENOTSUP);
		ck_assert_ptr_nonnull(strstr(err.msg, "--victim bare"));
		ck_assert_int_eq(admission_resolve("--admission", &a, &ao, &err), -ENOTSUP);
		ck_assert_ptr_nonnull(strstr(err.msg, "--admission bare"));
	}
}
END_TEST

/* Additive versions: a version-1 table still runs, and members added in
 * version 2 are not read from it. */
START_TEST(older_supported_version_runs_without_newer_members)
{
	struct ss_error err = { 0 };
	struct router_ops v1 = bare_router, out;

	v1.version = 1;
	v1.params = "depth=N (3)";  /* a v1 table has no such member: ignored */
	ck_assert_int_eq(router_resolve("--router", &v1, &out, &err), 0);
	ck_assert_str_eq(out.params, "");
	ck_assert_ptr_eq(out.route, route_last);
	v1.version = 2;
	ck_assert_int_eq(router_resolve("--router", &v1, &out, &err), 0);
	ck_assert_str_eq(out.params, "depth=N (3)");
}
END_TEST

/* Which orders the engine may keep without re-sorting: key_static,
 * key_tenant and key_aging are said by the tables (defaulted to "no"), and
 * a table without a key has none of them. */
START_TEST(orders_say_how_their_keys_change)
{
	struct ss_error err = { 0 };
	struct ss_params p;
	struct order_ops o, bare = bare_order;
	void *priv = calloc(1, 4096 * sizeof(double) + 64);

	ck_assert_ptr_nonnull(priv);
	ck_assert_int_eq(order_lookup("--order", "vtc", &o, &err), 0);
	ck_assert_int_eq(ss_params_parse(&p, "--order", "vtc", true, &err), 0);
	ck_assert_int_eq(o.init(priv, &p, 2, &err), 0);
	ck_assert(o.key_tenant(priv) && !o.key_static(priv) && o.key_aging(priv) == 0);
	ck_assert_int_eq(order_lookup("--order", "priority", &o, &err), 0);
	ck_assert_int_eq(ss_params_parse(&p, "--order", "priority:aging=2.5", true, &err), 0);
	ck_assert_int_eq(o.init(priv, &p, 2, &err), 0);
	ck_assert(!o.key_tenant(priv) && !o.key_static(priv));
	ck_assert_double_eq(o.key_aging(priv), 2.5);
	ck_assert_int_eq(order_lookup("--order", "sjf", &o, &err), 0);
	ck_assert(!o.key_tenant(priv) && o.key_aging(priv) == 0);
	/* version 1 tables have none of the members; no key, no capability */
	bare.version = 1;
	bare.key_tenant = o.key_static;
	ck_assert_int_eq(order_resolve("--order", &bare, &o, &err), 0);
	ck_assert(!o.key_tenant(priv) && o.key_aging(priv) == 0);
	free(priv);
}
END_TEST

/* Whether an order reads predictions is said by its table, not by the
 * engine knowing its name. */
START_TEST(orders_say_whether_they_use_predictions)
{
	struct ss_error err = { 0 };
	struct order_ops o, v1 = bare_order;

	ck_assert_int_eq(order_lookup("--order", "sjf", &o, &err), 0);
	ck_assert(o.uses_predictions);
	ck_assert_int_eq(order_lookup("--order", "fcfs", &o, &err), 0);
	ck_assert(!o.uses_predictions);
	ck_assert_int_eq(order_lookup("--order", "spf", &o, &err), 0);
	ck_assert(!o.uses_predictions);
	/* A version-1 table has no such member. */
	v1.version = 1;
	v1.uses_predictions = true;
	ck_assert_int_eq(order_resolve("--order", &v1, &o, &err), 0);
	ck_assert(!o.uses_predictions);
}
END_TEST

START_TEST(missing_required_methods_are_errors)
{
	struct ss_error err = { 0 };
	struct batch_policy_ops b = bare_batch, bo;
	struct router_ops r = bare_router, ro;

	b.pick_step = NULL;
	ck_assert_int_eq(batch_policy_resolve("--policy", &b, &bo, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "--policy bare: the batch policy's table has no pick_step method");
	b = bare_batch;
	b.max_items = NULL;
	ck_assert_int_eq(batch_policy_resolve("--policy", &b, &bo, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "max_items"));
	r.route = NULL;
	ck_assert_int_eq(router_resolve("--pairing", &r, &ro, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--pairing bare: the router policy's table has no route"));
	r = bare_router;
	r.name = NULL;
	ck_assert_int_eq(router_resolve("--router", &r, &ro, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "has no name"));
}
END_TEST

/* ---- what users read is derived from the registry --------------------------- */

START_TEST(list_policies_shows_every_registered_policy)
{
	struct policy_info info[MAX_POLICIES];
	size_t n = registered(info);
	const char *bin = getenv("SERVESIM_BIN");
	char cmd[4200], line[1024], prev[1024] = "";
	FILE *f;
	bool *seen = calloc(n, sizeof(bool));
	size_t n_lines = 0;

	ck_assert_msg(bin != NULL, "SERVESIM_BIN is not set");
	ck_assert_ptr_nonnull(seen);
	snprintf(cmd, sizeof(cmd), "'%s' list policies", bin);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		for (size_t i = 0; i < n; i++) {
			char want[1024];

			/* kind, option, name and description on one line, and
			 * the parameters, if any, on the next. */
			snprintf(want, sizeof(want), "%-9s %-11s %-10s %s", info[i].kind_name,
				 info[i].option, info[i].name, info[i].description);
			if (!*info[i].params && !strcmp(line, want))
				seen[i] = true;
			if (*info[i].params && !strcmp(prev, want)) {
				snprintf(want, sizeof(want), "%33s%s", "", info[i].params);
				if (!strcmp(line, want))
					seen[i] = true;
			}
		}
		snprintf(prev, sizeof(prev), "%s", line);
		n_lines++;
	}
	ck_assert_int_eq(pclose(f), 0);
	ck_assert_uint_gt(n_lines, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(seen[i], "`servesim list policies` lacks %s %s (or its params)",
			      info[i].option, info[i].name);
	free(seen);
}
END_TEST

/* docs/policies.md has a table row "| `NAME` |" for every policy, in the
 * section of its kind, whose heading names the option: "(`--router`)". */
START_TEST(docs_describe_every_registered_policy)
{
	struct policy_info info[MAX_POLICIES];
	size_t n = registered(info);
	char *doc = read_source("docs/policies.md");

	for (size_t i = 0; i < n; i++) {
		char heading[64], row[128];
		const char *sec, *end, *hit;

		snprintf(heading, sizeof(heading), "(`%s`)\n", info[i].option);
		sec = strstr(doc, heading);
		ck_assert_msg(sec != NULL, "docs/policies.md has no section for %s", info[i].option);
		end = strstr(sec, "\n## ");
		snprintf(row, sizeof(row), "\n| `%s` |", info[i].name);
		hit = strstr(sec, row);
		ck_assert_msg(hit && (!end || hit < end),
			      "docs/policies.md: the %s section has no row \"| `%s` |\"",
			      info[i].option, info[i].name);
	}
	free(doc);
}
END_TEST

START_TEST(names_for_help_come_from_the_registry)
{
	struct policy_info info[MAX_POLICIES];
	size_t n = registered(info);
	char buf[1024], want[1024] = "", tiny[8];
	size_t len, count;

	for (int k = 0; k < POLICY_KIND_COUNT; k++) {
		want[0] = '\0';
		for (size_t i = 0; i < n; i++)
			if ((int)info[i].kind == k) {
				if (want[0])
					strcat(want, " | ");
				strcat(want, info[i].name);
			}
		len = policy_names((enum policy_kind)k, " | ", buf, sizeof(buf));
		ck_assert_str_eq(buf, want);
		ck_assert_uint_eq(len, strlen(want));
		/* Truncated as snprintf truncates, still reporting the full length. */
		ck_assert_uint_eq(policy_names((enum policy_kind)k, " | ", tiny, sizeof(tiny)), len);
		ck_assert_uint_eq(strlen(tiny), len < sizeof(tiny) ? len : sizeof(tiny) - 1);
		ck_assert(!strncmp(tiny, want, strlen(tiny)));
		/* Measuring only, with another separator: one byte less per gap. */
		count = 0;
		for (size_t i = 0; i < n; i++)
			count += (int)info[i].kind == k;
		ck_assert_uint_eq(policy_names((enum policy_kind)k, ", ", NULL, 0),
				  count ? len - (count - 1) : 0);
	}
	ck_assert_str_eq(policy_kind_option(POLICY_ROUTER), "--router");
	ck_assert_ptr_null(policy_kind_option(POLICY_KIND_COUNT));
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("policy-registry");
	TCase *tc = tcase_create("registry");

	tcase_add_test(tc, registry_def_is_the_registry);
	tcase_add_test(tc, no_other_list_names_a_policy);
	tcase_add_test(tc, every_registered_policy_resolves);
	tcase_add_test(tc, unknown_names_are_errors);
	tcase_add_test(tc, null_optional_methods_work_through_defaults);
	tcase_add_test(tc, defaults_never_replace_given_methods);
	tcase_add_test(tc, versions_too_old_or_too_new_are_refused);
	tcase_add_test(tc, older_supported_version_runs_without_newer_members);
	tcase_add_test(tc, orders_say_whether_they_use_predictions);
	tcase_add_test(tc, orders_say_how_their_keys_change);
	tcase_add_test(tc, missing_required_methods_are_errors);
	tcase_add_test(tc, list_policies_shows_every_registered_policy);
	tcase_add_test(tc, docs_describe_every_registered_policy);
	tcase_add_test(tc, names_for_help_come_from_the_registry);
	suite_add_tcase(s, tc);
	return s;
}
