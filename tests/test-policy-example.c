/* The example policy of docs/writing-a-policy.md, router "kvfree", on
 * hand-built instance views: the most free KV blocks wins; ties go to fewer
 * outstanding requests, then the lowest index; with min_free=N every
 * instance with at least N free blocks counts as having room (the least
 * loaded of them wins) and instances below N are avoided unless all are;
 * bad parameters fail init with one message. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "check-main.h"
#include "policy.h"

/* Private state as the engine gives it: priv_size zeroed bytes. */
static char priv[256];

/* Look kvfree up as the engine does, parse spec and init it into priv;
 * returns init's (or the unused-key check's) rc. */
static int setup(const char *spec, uint32_t n, struct ss_error *err)
{
	struct router_ops ops;
	struct ss_params p;
	int rc;

	memset(err, 0, sizeof(*err));
	ck_assert_int_eq(router_lookup("--router", "kvfree", &ops, err), 0);
	ck_assert_uint_le(ops.priv_size, sizeof(priv));
	memset(priv, 0, sizeof(priv));
	rc = ss_params_parse(&p, "--router", spec, true, err);
	ck_assert_int_eq(rc, 0);
	rc = ops.init(priv, &p, n, err);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	return rc;
}

static uint32_t route(struct inst_view *v, uint32_t n)
{
	const struct inst_view *pv[8];
	struct req_view r = { .prompt_tokens = 100 };

	ck_assert_uint_le(n, 8);
	for (uint32_t i = 0; i < n; i++)
		pv[i] = &v[i];
	/* No host: kvfree needs no service. */
	return router_find("kvfree")->route(priv, &r, pv, n, 0, NULL);
}

START_TEST(most_free_wins)
{
	struct inst_view v[4] = {
		{ .free_blocks = 100, .outstanding_requests = 0 },
		{ .free_blocks = 900, .outstanding_requests = 50 },
		{ .free_blocks = 300, .outstanding_requests = 1 },
		{ .free_blocks = 899, .outstanding_requests = 0 },
	};
	struct ss_error err;

	ck_assert_int_eq(setup("kvfree", 4, &err), 0);
	/* Load does not matter while free blocks differ. */
	ck_assert_uint_eq(route(v, 4), 1);
	v[3].free_blocks = 901;
	ck_assert_uint_eq(route(v, 4), 3);
	v[0].free_blocks = 5000;
	ck_assert_uint_eq(route(v, 4), 0);
	/* One instance: always it. */
	ck_assert_uint_eq(route(v + 2, 1), 0);
}
END_TEST

START_TEST(ties_to_fewer_outstanding_then_lowest_index)
{
	struct inst_view v[4] = {
		{ .free_blocks = 500, .outstanding_requests = 7 },
		{ .free_blocks = 500, .outstanding_requests = 3 },
		{ .free_blocks = 500, .outstanding_requests = 3 },
		{ .free_blocks = 400, .outstanding_requests = 0 },
	};
	struct ss_error err;

	ck_assert_int_eq(setup("kvfree", 4, &err), 0);
	ck_assert_uint_eq(route(v, 4), 1);     /* 1 and 2 tie on both: lower index */
	v[2].outstanding_requests = 2;
	ck_assert_uint_eq(route(v, 4), 2);
	v[0].outstanding_requests = 0;
	ck_assert_uint_eq(route(v, 4), 0);
	/* Outstanding tokens are not a tie-break. */
	v[0].outstanding_requests = v[1].outstanding_requests = v[2].outstanding_requests = 1;
	v[0].outstanding_tokens = 90000;
	ck_assert_uint_eq(route(v, 4), 0);
}
END_TEST

START_TEST(min_free_avoids_instances_short_of_room)
{
	struct inst_view v[3] = {
		{ .free_blocks = 5000, .outstanding_requests = 9 },
		{ .free_blocks = 200, .outstanding_requests = 1 },
		{ .free_blocks = 99, .outstanding_requests = 0 },
	};
	struct ss_error err;

	/* Without min_free the most free wins, however loaded. */
	ck_assert_int_eq(setup("kvfree", 3, &err), 0);
	ck_assert_uint_eq(route(v, 3), 0);
	/* With min_free=100, 0 and 1 both have room: the less loaded wins;
	 * 2 (99 free, idle) is avoided. */
	ck_assert_int_eq(setup("kvfree:min_free=100", 3, &err), 0);
	ck_assert_uint_eq(route(v, 3), 1);
	v[1].outstanding_requests = 9;
	ck_assert_uint_eq(route(v, 3), 0);     /* equal load: lower index */
	/* Exactly min_free free blocks is enough room. */
	v[1].outstanding_requests = 1;
	v[1].free_blocks = 100;
	ck_assert_uint_eq(route(v, 3), 1);
	/* Only one instance with room: it wins over idler ones. */
	v[1].free_blocks = 10;
	ck_assert_uint_eq(route(v, 3), 0);
}
END_TEST

START_TEST(all_below_min_free_take_the_most_free)
{
	struct inst_view v[3] = {
		{ .free_blocks = 40, .outstanding_requests = 0 },
		{ .free_blocks = 60, .outstanding_requests = 8 },
		{ .free_blocks = 60, .outstanding_requests = 5 },
	};
	struct ss_error err;

	ck_assert_int_eq(setup("kvfree:min_free=1000", 3, &err), 0);
	ck_assert_uint_eq(route(v, 3), 2);     /* most free; tie to fewer requests */
	v[0].free_blocks = 61;
	ck_assert_uint_eq(route(v, 3), 0);
	v[0].free_blocks = v[1].free_blocks = v[2].free_blocks = 0;
	ck_assert_uint_eq(route(v, 3), 0);     /* all full: least loaded */
}
END_TEST

START_TEST(bad_params_fail_init)
{
	static const char *const bad[] = {
		"kvfree:min_free=-1", "kvfree:min_free=0", "kvfree:min_free=3000000000",
		"kvfree:min_free=many", "kvfree:min_free=1.5", "kvfree:free=10",
	};
	struct ss_error err;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(setup(bad[i], 2, &err) < 0, "%s was accepted", bad[i]);
		ck_assert_int_lt(err.code, 0);
		ck_assert_msg(err.msg[0] && !strchr(err.msg, '\n'), "%s: message '%s'", bad[i],
			      err.msg);
	}
	ck_assert_int_eq(setup("kvfree:min_free=-1", 2, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--router kvfree: expected 1 <= min_free"));
	ck_assert_int_eq(setup("kvfree:min_free=1", 2, &err), 0);
	ck_assert_int_eq(setup("kvfree:min_free=2147483647", 2, &err), 0);
}
END_TEST

START_TEST(listed_as_a_router)
{
	struct policy_info info[64];
	size_t n = policy_list(info, 64);
	bool found = false;

	ck_assert_uint_le(n, 64);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(info[i].name, "kvfree") && info[i].kind == POLICY_ROUTER) {
			ck_assert_str_eq(info[i].option, "--router");
			found = true;
		}
	ck_assert(found);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("policy-example");
	TCase *tc = tcase_create("kvfree");

	tcase_add_test(tc, most_free_wins);
	tcase_add_test(tc, ties_to_fewer_outstanding_then_lowest_index);
	tcase_add_test(tc, min_free_avoids_instances_short_of_room);
	tcase_add_test(tc, all_below_min_free_take_the_most_free);
	tcase_add_test(tc, bad_params_fail_init);
	tcase_add_test(tc, listed_as_a_router);
	suite_add_tcase(s, tc);
	return s;
}
