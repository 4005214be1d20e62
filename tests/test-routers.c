/* Routers: round-robin cycles; least-outstanding-tokens and -requests pick
 * the least loaded instance, lowest index on ties; random and p2c draw from
 * host->uniform; prefix follows the longest cached prefix unless the load is
 * imbalanced by both of its thresholds. */
#include <check.h>
#include <string.h>

#include "check-main.h"
#include "policy.h"

/* A fake host: uniform() replays u[] cyclically; prefix_hit() answers
 * hit[inst]. */
struct fake {
	double u[8];
	int n_u, next;
	int32_t hit[8];
	int res[8];                /* adapter_resident() answers, per instance */
	int calls;                 /* uniform() draws so far */
};

static int fake_adapter_resident(void *ctx, int32_t inst, const struct req_view *req)
{
	struct fake *f = ctx;

	(void)req;
	return f->res[inst];
}

static double fake_uniform(void *ctx)
{
	struct fake *f = ctx;
	double x = f->u[f->next];

	f->next = (f->next + 1) % f->n_u;
	f->calls++;
	return x;
}

static int32_t fake_prefix_hit(void *ctx, int32_t inst, const struct req_view *req)
{
	struct fake *f = ctx;

	(void)req;
	return f->hit[inst];
}

/* Resolve ops, parse spec and init it into priv (at most 256 bytes), as
 * the engine does; returns init's rc. */
static int router_setup(const struct router_ops *ops, const char *spec, void *priv,
			uint32_t n, struct ss_error *err)
{
	struct router_ops r;
	struct ss_params p;
	int rc;

	ck_assert_ptr_nonnull(ops);
	ck_assert_int_eq(router_resolve("--router", ops, &r, err), 0);
	ck_assert_uint_le(r.priv_size, 256);
	memset(priv, 0, 256);
	rc = ss_params_parse(&p, "--router", spec, true, err);
	ck_assert_int_eq(rc, 0);
	rc = r.init(priv, &p, n, err);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	return rc;
}

START_TEST(rr_cycles)
{
	const struct router_ops *rr = router_find("rr");
	struct inst_view v[3] = { 0 };
	const struct inst_view *pv[3] = { &v[0], &v[1], &v[2] };
	struct req_view r = { 0 };
	char priv[64] = { 0 };   /* zeroed private state, as the engine allocates it */

	ck_assert_ptr_nonnull(rr);
	for (int i = 0; i < 7; i++)
		ck_assert_uint_eq(rr->route(priv, &r, pv, 3, 0, NULL), (uint32_t)(i % 3));
}
END_TEST

START_TEST(lot_picks_least_outstanding)
{
	const struct router_ops *lot = router_find("lot");
	struct inst_view v[3] = { { .outstanding_tokens = 500 }, { .outstanding_tokens = 200 },
				  { .outstanding_tokens = 200 } };
	const struct inst_view *pv[3] = { &v[0], &v[1], &v[2] };
	struct req_view r = { 0 };

	ck_assert_ptr_nonnull(lot);
	ck_assert_uint_eq(lot->route(NULL, &r, pv, 3, 0, NULL), 1);
	v[2].outstanding_tokens = 10;
	ck_assert_uint_eq(lot->route(NULL, &r, pv, 3, 0, NULL), 2);
}
END_TEST

START_TEST(lor_picks_fewest_requests)
{
	const struct router_ops *lor = router_find("lor");
	struct inst_view v[3] = { { .outstanding_requests = 4, .outstanding_tokens = 10 },
				  { .outstanding_requests = 2, .outstanding_tokens = 9000 },
				  { .outstanding_requests = 2, .outstanding_tokens = 10 } };
	const struct inst_view *pv[3] = { &v[0], &v[1], &v[2] };
	struct req_view r = { 0 };

	ck_assert_ptr_nonnull(lor);
	/* Tokens do not matter; the tie between 1 and 2 goes to the lower index. */
	ck_assert_uint_eq(lor->route(NULL, &r, pv, 3, 0, NULL), 1);
	v[0].outstanding_requests = 0;
	ck_assert_uint_eq(lor->route(NULL, &r, pv, 3, 0, NULL), 0);
}
END_TEST

START_TEST(random_maps_uniform_to_instances)
{
	const struct router_ops *rnd = router_find("random");
	struct fake f = { .u = { 0.0, 0.24, 0.25, 0.5, 0.999999 }, .n_u = 5 };
	struct policy_host host = { .ctx = &f, .uniform = fake_uniform };
	struct inst_view v[4] = { 0 };
	const struct inst_view *pv[4] = { &v[0], &v[1], &v[2], &v[3] };
	struct req_view r = { 0 };
	const uint32_t want[5] = { 0, 0, 1, 2, 3 };
	char priv[256];
	struct ss_error err = { 0 };

	ck_assert_int_eq(router_setup(rnd, "random", priv, 4, &err), 0);
	for (int i = 0; i < 5; i++)
		ck_assert_uint_eq(rnd->route(priv, &r, pv, 4, 0, &host), want[i]);
	ck_assert_int_eq(f.calls, 5);
}
END_TEST

START_TEST(p2c_picks_less_loaded_of_two_distinct)
{
	const struct router_ops *p2c = router_find("p2c");
	/* Draws (0.0, 0.0): first 0, second 0 of the other three, i.e. 1.
	 * Draws (0.9, 0.9): first 3, second 2 of {0, 1, 2}, i.e. 2. */
	struct fake f = { .u = { 0.0, 0.0, 0.9, 0.9 }, .n_u = 4 };
	struct policy_host host = { .ctx = &f, .uniform = fake_uniform };
	struct inst_view v[4] = { { .outstanding_requests = 5, .outstanding_tokens = 100 },
				  { .outstanding_requests = 3, .outstanding_tokens = 900 },
				  { .outstanding_requests = 7, .outstanding_tokens = 50 },
				  { .outstanding_requests = 1, .outstanding_tokens = 800 } };
	const struct inst_view *pv[4] = { &v[0], &v[1], &v[2], &v[3] };
	struct req_view r = { 0 };
	char priv[256];
	struct ss_error err = { 0 };

	ck_assert_int_eq(router_setup(p2c, "p2c", priv, 4, &err), 0);
	ck_assert_uint_eq(p2c->route(priv, &r, pv, 4, 0, &host), 1);  /* 3 < 5 */
	ck_assert_uint_eq(p2c->route(priv, &r, pv, 4, 0, &host), 3);  /* 1 < 7 */

	ck_assert_int_eq(router_setup(p2c, "p2c:load=tokens", priv, 4, &err), 0);
	ck_assert_uint_eq(p2c->route(priv, &r, pv, 4, 0, &host), 0);  /* 100 < 900 */
	ck_assert_uint_eq(p2c->route(priv, &r, pv, 4, 0, &host), 2);  /* 50 < 800 */

	/* A tie keeps the first drawn. */
	v[1].outstanding_tokens = 100;
	ck_assert_uint_eq(p2c->route(priv, &r, pv, 4, 0, &host), 0);

	/* With one instance it is that one, without a draw. */
	f.calls = 0;
	ck_assert_uint_eq(p2c->route(priv, &r, pv, 1, 0, &host), 0);
	ck_assert_int_eq(f.calls, 0);
}
END_TEST

START_TEST(p2c_draws_are_always_distinct)
{
	const struct router_ops *p2c = router_find("p2c");
	struct fake f = { .n_u = 1 };
	struct policy_host host = { .ctx = &f, .uniform = fake_uniform };
	/* Instance 1 is the least loaded: whenever it is one of the two drawn
	 * it wins, so with both draws equal to u, the pick tells which pair. */
	struct inst_view v[2] = { { .outstanding_requests = 9 }, { .outstanding_requests = 0 } };
	const struct inst_view *pv[2] = { &v[0], &v[1] };
	struct req_view r = { 0 };
	char priv[256];
	struct ss_error err = { 0 };

	ck_assert_int_eq(router_setup(p2c, "p2c", priv, 2, &err), 0);
	for (int k = 0; k < 10; k++) {
		f.u[0] = k / 10.0;
		ck_assert_uint_eq(p2c->route(priv, &r, pv, 2, 0, &host), 1);
	}
}
END_TEST

START_TEST(p2c_rejects_bad_load)
{
	char priv[256];
	struct ss_error err = { 0 };

	ck_assert_int_lt(router_setup(router_find("p2c"), "p2c:load=blocks", priv, 2, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "load=requests or load=tokens"));
}
END_TEST

START_TEST(prefix_follows_longest_hit)
{
	const struct router_ops *pre = router_find("prefix");
	struct fake f = { .hit = { 0, 256, 512, 512 } };
	struct policy_host host = { .ctx = &f, .prefix_hit = fake_prefix_hit };
	struct inst_view v[4] = { { .id = 0, .outstanding_requests = 0 },
				  { .id = 1, .outstanding_requests = 2 },
				  { .id = 2, .outstanding_requests = 6 },
				  { .id = 3, .outstanding_requests = 5 } };
	const struct inst_view *pv[4] = { &v[0], &v[1], &v[2], &v[3] };
	struct req_view r = { .prompt_tokens = 1000 };
	char priv[256];
	struct ss_error err = { 0 };

	ck_assert_int_eq(router_setup(pre, "prefix", priv, 4, &err), 0);
	/* 2 and 3 hold the longest prefix; 3 is less loaded. */
	ck_assert_uint_eq(pre->route(priv, &r, pv, 4, 0, &host), 3);
	/* No hit anywhere: the least loaded. */
	memset(f.hit, 0, sizeof(f.hit));
	ck_assert_uint_eq(pre->route(priv, &r, pv, 4, 0, &host), 0);
	/* No prefix_hit service: the same. */
	host.prefix_hit = NULL;
	ck_assert_uint_eq(pre->route(priv, &r, pv, 4, 0, &host), 0);
	ck_assert_uint_eq(pre->route(priv, &r, pv, 4, 0, NULL), 0);
}
END_TEST

START_TEST(prefix_balances_only_past_both_thresholds)
{
	const struct router_ops *pre = router_find("prefix");
	struct fake f = { .hit = { 0, 512 } };
	struct policy_host host = { .ctx = &f, .prefix_hit = fake_prefix_hit };
	struct inst_view v[2] = { { .id = 0 }, { .id = 1 } };
	const struct inst_view *pv[2] = { &v[0], &v[1] };
	struct req_view r = { .prompt_tokens = 1000 };
	char priv[256];
	struct ss_error err = { 0 };

	ck_assert_int_eq(router_setup(pre, "prefix", priv, 2, &err), 0);
	/* Difference 32 is not more than balance_abs=32: affinity holds. */
	v[0].outstanding_requests = 10;
	v[1].outstanding_requests = 42;
	ck_assert_uint_eq(pre->route(priv, &r, pv, 2, 0, &host), 1);
	/* 33 > 32 and 43 > 1.5 * 10: imbalanced, least loaded. */
	v[1].outstanding_requests = 43;
	ck_assert_uint_eq(pre->route(priv, &r, pv, 2, 0, &host), 0);
	/* 100 - 67 > 32 but 100 <= 1.5 * 67: the relative test holds it. */
	v[0].outstanding_requests = 67;
	v[1].outstanding_requests = 100;
	ck_assert_uint_eq(pre->route(priv, &r, pv, 2, 0, &host), 1);

	/* Tighter thresholds. */
	ck_assert_int_eq(router_setup(pre, "prefix:balance_abs=2,balance_rel=1.2", priv, 2,
				      &err), 0);
	v[0].outstanding_requests = 10;
	v[1].outstanding_requests = 12;
	ck_assert_uint_eq(pre->route(priv, &r, pv, 2, 0, &host), 1);
	v[1].outstanding_requests = 13;
	ck_assert_uint_eq(pre->route(priv, &r, pv, 2, 0, &host), 0);
}
END_TEST

START_TEST(prefix_rejects_bad_thresholds)
{
	const struct router_ops *pre = router_find("prefix");
	char priv[256];
	struct ss_error err = { 0 };

	ck_assert_int_lt(router_setup(pre, "prefix:balance_abs=-1", priv, 2, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "balance_abs"));
	ck_assert_int_lt(router_setup(pre, "prefix:balance_rel=0.5", priv, 2, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "balance_rel"));
	ck_assert_int_lt(router_setup(pre, "prefix:balance_rel=nan", priv, 2, &err), 0);
	ck_assert_int_lt(router_setup(pre, "prefix:imbalance=3", priv, 2, &err), 0);
}
END_TEST

/* lora: a GPU slot holding the adapter first, then host memory, the less
 * loaded among equals; none holding it (or no adapter, -1) the least
 * loaded; imbalance past both thresholds the least loaded. */
START_TEST(lora_follows_the_resident_adapter)
{
	const struct router_ops *lo = router_find("lora");
	struct fake f = { .res = { 0, 1, 2, 2 } };
	struct policy_host host = { .ctx = &f, .adapter_resident = fake_adapter_resident };
	struct inst_view v[4] = { { .id = 0, .outstanding_requests = 0 },
				  { .id = 1, .outstanding_requests = 2 },
				  { .id = 2, .outstanding_requests = 6 },
				  { .id = 3, .outstanding_requests = 5 } };
	const struct inst_view *pv[4] = { &v[0], &v[1], &v[2], &v[3] };
	struct req_view r = { .prompt_tokens = 100 };
	char priv[256];
	struct ss_error err = { 0 };

	ck_assert_ptr_nonnull(lo);
	ck_assert_int_eq(router_setup(lo, "lora", priv, 4, &err), 0);
	/* 2 and 3 hold it in a GPU slot; 3 is less loaded */
	ck_assert_uint_eq(lo->route(priv, &r, pv, 4, 0, &host), 3);
	/* only host memory at 1: 1, over the idle 0 */
	f.res[2] = f.res[3] = 0;
	ck_assert_uint_eq(lo->route(priv, &r, pv, 4, 0, &host), 1);
	/* nowhere, or the base model: the least loaded */
	memset(f.res, 0, sizeof(f.res));
	ck_assert_uint_eq(lo->route(priv, &r, pv, 4, 0, &host), 0);
	for (int i = 0; i < 4; i++)
		f.res[i] = -1;
	ck_assert_uint_eq(lo->route(priv, &r, pv, 4, 0, &host), 0);
	host.adapter_resident = NULL;
	ck_assert_uint_eq(lo->route(priv, &r, pv, 4, 0, &host), 0);
	ck_assert_uint_eq(lo->route(priv, &r, pv, 4, 0, NULL), 0);
	/* imbalanced (43 - 10 > 32, 43 > 1.5 x 10): the least loaded, though
	 * 1 holds the adapter */
	host.adapter_resident = fake_adapter_resident;
	f.res[1] = 2;
	v[0].outstanding_requests = 10;
	v[1].outstanding_requests = 43;
	v[2].outstanding_requests = v[3].outstanding_requests = 20;
	ck_assert_uint_eq(lo->route(priv, &r, pv, 4, 0, &host), 0);
	v[1].outstanding_requests = 42;
	ck_assert_uint_eq(lo->route(priv, &r, pv, 4, 0, &host), 1);
	ck_assert_int_lt(router_setup(lo, "lora:balance_abs=-1", priv, 4, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "--router lora: expected balance_abs"));
	ck_assert_int_lt(router_setup(lo, "lora:balance_rel=0.9", priv, 4, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "balance_rel"));
}
END_TEST

START_TEST(registry_lists_every_policy)
{
	struct policy_info info[64];
	size_t n = policy_list(info, 64);
	int batch = 0, router = 0;

	ck_assert_uint_le(n, 64);  /* grow info[] when this fails */
	ck_assert_uint_eq(policy_list(NULL, 0), n);
	for (size_t i = 0; i < n; i++) {
		ck_assert_ptr_nonnull(info[i].description);
		batch += info[i].kind == POLICY_BATCH;
		router += info[i].kind == POLICY_ROUTER;
	}
	ck_assert_int_ge(batch, 1);
	ck_assert_int_ge(router, 6);
	for (size_t i = 0; i < n; i++)
		if (info[i].kind == POLICY_ROUTER)
			ck_assert_ptr_nonnull(router_find(info[i].name));
	ck_assert_ptr_null(router_find("nope"));
	ck_assert_ptr_null(batch_policy_find("nope"));
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("routers");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, rr_cycles);
	tcase_add_test(tc, lot_picks_least_outstanding);
	tcase_add_test(tc, lor_picks_fewest_requests);
	tcase_add_test(tc, random_maps_uniform_to_instances);
	tcase_add_test(tc, p2c_picks_less_loaded_of_two_distinct);
	tcase_add_test(tc, p2c_draws_are_always_distinct);
	tcase_add_test(tc, p2c_rejects_bad_load);
	tcase_add_test(tc, prefix_follows_longest_hit);
	tcase_add_test(tc, prefix_balances_only_past_both_thresholds);
	tcase_add_test(tc, prefix_rejects_bad_thresholds);
	tcase_add_test(tc, lora_follows_the_resident_adapter);
	tcase_add_test(tc, registry_lists_every_policy);
	suite_add_tcase(s, tc);
	return s;
}
