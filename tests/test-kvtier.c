/* A KV tier holds at most its capacity, evicts the least recently used
 * block, and agrees with a plain array model of LRU over random use. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "kvtier.h"

START_TEST(lru_order_and_touch)
{
	struct kvtier t;

	ck_assert_int_eq(kvtier_init(&t, 3), 0);
	ck_assert_int_eq(kvtier_put(&t, 11), 1);
	ck_assert_int_eq(kvtier_put(&t, 12), 1);
	ck_assert_int_eq(kvtier_put(&t, 13), 1);
	ck_assert_int_eq(kvtier_put(&t, 12), 0);      /* held: touched, not stored again */
	ck_assert(kvtier_touch(&t, 11));              /* order now 13, 12, 11 */
	ck_assert_int_eq(kvtier_put(&t, 14), 1);      /* 13 is the least recently used */
	ck_assert(!kvtier_contains(&t, 13));
	ck_assert(kvtier_contains(&t, 11) && kvtier_contains(&t, 12) && kvtier_contains(&t, 14));
	ck_assert_int_eq(t.n, 3);
	ck_assert_uint_eq(t.evictions, 1);
	ck_assert_uint_eq(t.puts, 4);
	ck_assert(!kvtier_touch(&t, 99));
	ck_assert(kvtier_remove(&t, 12));
	ck_assert(!kvtier_remove(&t, 12));
	ck_assert_int_eq(t.n, 2);
	ck_assert_int_eq(kvtier_put(&t, 15), 1);      /* the freed slot is reused: no eviction */
	ck_assert_uint_eq(t.evictions, 1);
	kvtier_release(&t);
	kvtier_release(NULL);
}
END_TEST

START_TEST(zero_capacity_holds_nothing)
{
	struct kvtier t;

	kvtier_init(&t, 0);
	ck_assert_int_eq(kvtier_put(&t, 5), 0);
	ck_assert(!kvtier_contains(&t, 5));
	ck_assert_int_eq(t.n, 0);
	kvtier_release(&t);
}
END_TEST

/* Growing past many doublings keeps every held block findable. */
START_TEST(growth_keeps_the_newest)
{
	struct kvtier t;
	const int64_t cap = 10000;

	kvtier_init(&t, cap);
	for (uint64_t h = 1; h <= 2 * (uint64_t)cap; h++)
		ck_assert_int_eq(kvtier_put(&t, h * 0x9e3779b97f4a7c15ULL), 1);
	ck_assert_int_eq(t.n, cap);
	ck_assert_int_eq(t.n_slots, cap);
	ck_assert_uint_eq(t.evictions, (uint64_t)cap);
	for (uint64_t h = 1; h <= 2 * (uint64_t)cap; h++)
		ck_assert(kvtier_contains(&t, h * 0x9e3779b97f4a7c15ULL) == (h > (uint64_t)cap));
	kvtier_release(&t);
}
END_TEST

/* Random puts, touches and removes on few distinct hashes (so the table
 * sees many collisions and deletions) against an array kept in LRU order. */
START_TEST(matches_reference_lru)
{
	enum { CAP = 37, KEYS = 120, OPS = 200000 };
	struct kvtier t;
	uint64_t ref[CAP];
	int n = 0;

	srand(7);
	kvtier_init(&t, CAP);
	for (int op = 0; op < OPS; op++) {
		uint64_t h = (uint64_t)(rand() % KEYS + 1) << 40;   /* same low bits: collisions */
		int kind = rand() % 4, at = -1;

		for (int i = 0; i < n; i++)
			if (ref[i] == h)
				at = i;
		if (kind == 3) {                        /* remove */
			ck_assert(kvtier_remove(&t, h) == (at >= 0));
			if (at >= 0)
				memmove(ref + at, ref + at + 1, sizeof(*ref) * (size_t)(--n - at));
		} else if (kind == 2) {                 /* touch */
			ck_assert(kvtier_touch(&t, h) == (at >= 0));
			if (at >= 0) {
				memmove(ref + at, ref + at + 1, sizeof(*ref) * (size_t)(n - 1 - at));
				ref[n - 1] = h;
			}
		} else {                                /* put */
			ck_assert_int_eq(kvtier_put(&t, h), at < 0);
			if (at >= 0) {
				memmove(ref + at, ref + at + 1, sizeof(*ref) * (size_t)(n - 1 - at));
				ref[n - 1] = h;
			} else {
				if (n == CAP)
					memmove(ref, ref + 1, sizeof(*ref) * (size_t)--n);
				ref[n++] = h;
			}
		}
		ck_assert_int_eq(t.n, n);
	}
	/* same members, and the same order: walk the list from the oldest */
	for (int64_t id = t.head, i = 0; id >= 0; id = t.next[id], i++)
		ck_assert_uint_eq(t.hash[id], ref[i]);
	kvtier_release(&t);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("kvtier");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, lru_order_and_touch);
	tcase_add_test(tc, zero_capacity_holds_nothing);
	tcase_add_test(tc, growth_keeps_the_newest);
	tcase_add_test(tc, matches_reference_lru);
	suite_add_tcase(s, tc);
	return s;
}
