/* Routers: round-robin cycles; least-outstanding-tokens picks the least
 * loaded instance, lowest index on ties. */
#include <check.h>

#include "check-main.h"
#include "policy.h"

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

START_TEST(registry_lists_every_policy)
{
	struct policy_info info[16];
	size_t n = policy_list(info, 16);
	int batch = 0, router = 0;

	for (size_t i = 0; i < n; i++) {
		ck_assert_ptr_nonnull(info[i].description);
		batch += info[i].kind == POLICY_BATCH;
		router += info[i].kind == POLICY_ROUTER;
	}
	ck_assert_int_ge(batch, 1);
	ck_assert_int_ge(router, 2);
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
	tcase_add_test(tc, registry_lists_every_policy);
	suite_add_tcase(s, tc);
	return s;
}
