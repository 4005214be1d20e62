/* The KV block pool hands out each block once, refuses what it does not
 * have, and catches double frees. */
#include <check.h>
#include <errno.h>
#include <signal.h>

#include "check-main.h"
#include "kvpool.h"

START_TEST(alloc_free_accounting)
{
	struct kvpool p;
	int32_t a[6], b[4];

	ck_assert_int_eq(kvpool_init(&p, 10, 16), 0);
	ck_assert_int_eq(kvpool_alloc(&p, 6, a), 0);
	ck_assert_int_eq(kvpool_used(&p), 6);
	ck_assert_int_eq(kvpool_alloc(&p, 5, b), -ENOSPC);
	ck_assert_int_eq(kvpool_used(&p), 6);   /* nothing taken on failure */
	ck_assert_int_eq(kvpool_alloc(&p, 4, b), 0);
	ck_assert_int_eq(p.n_free, 0);
	/* every id distinct */
	for (int i = 0; i < 6; i++)
		for (int j = 0; j < 4; j++)
			ck_assert_int_ne(a[i], b[j]);
	kvpool_free(&p, a, 6);
	kvpool_free(&p, b, 4);
	ck_assert_int_eq(p.n_free, 10);
	kvpool_release(&p);
}
END_TEST

START_TEST(blocks_for_rounds_up)
{
	struct kvpool p;

	kvpool_init(&p, 1, 16);
	ck_assert_int_eq(kvpool_blocks_for(&p, 0), 0);
	ck_assert_int_eq(kvpool_blocks_for(&p, 1), 1);
	ck_assert_int_eq(kvpool_blocks_for(&p, 16), 1);
	ck_assert_int_eq(kvpool_blocks_for(&p, 17), 2);
	kvpool_release(&p);
}
END_TEST

START_TEST(double_free_aborts)
{
	struct kvpool p;
	int32_t a[2];

	kvpool_init(&p, 4, 16);
	kvpool_alloc(&p, 2, a);
	kvpool_free(&p, a, 2);
	kvpool_free(&p, a, 1);   /* must assert */
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("kvpool");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, alloc_free_accounting);
	tcase_add_test(tc, blocks_for_rounds_up);
	tcase_add_test_raise_signal(tc, double_free_aborts, SIGABRT);
	suite_add_tcase(s, tc);
	return s;
}
