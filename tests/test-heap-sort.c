/* The indexed heap (common/ss-heap.h) and the stable sort (common/ss-sort.h)
 * through their headers: every operation at arbitrary positions against a
 * brute-force model, and the sort's stability. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "ss-heap.h"
#include "ss-sort.h"

struct item {
	int key;        /* few distinct values: many ties */
	uint32_t id;    /* the tie-break, and the item's identity */
	uint32_t hpos;
};

/* (key, id): a total order, so the heap's first entry is unique. */
static inline bool item_before(const void *ctx, const struct item *a, const struct item *b)
{
	(void)ctx;
	if (a->key != b->key)
		return a->key < b->key;
	return a->id < b->id;
}

SS_HEAP_STRUCT(iheap, struct item);
SS_HEAP_DEFINE(iheap, struct item, hpos, item_before);

static uint64_t rng = 88172645463325252ULL;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* The model: the set of items in the heap, as flags. */
static const struct item *model_min(const struct item *it, const bool *in, uint32_t n)
{
	const struct item *m = NULL;

	for (uint32_t i = 0; i < n; i++)
		if (in[i] && (!m || item_before(NULL, &it[i], m)))
			m = &it[i];
	return m;
}

/* The heap's shape: each entry at its recorded position, no child before
 * its parent. */
static void check_shape(const struct iheap *h)
{
	for (uint32_t i = 0; i < h->n; i++) {
		ck_assert_uint_eq(h->a[i]->hpos, i);
		if (i > 0)
			ck_assert(!item_before(NULL, h->a[i], h->a[(i - 1) / 2]));
	}
}

START_TEST(heap_matches_brute_force_model)
{
	enum { N = 300, OPS = 20000 };
	struct item it[N];
	bool in[N] = { false };
	uint32_t n_in = 0;
	struct iheap h;

	iheap_init(&h, NULL);
	for (uint32_t i = 0; i < N; i++)
		it[i] = (struct item){ .key = (int)rnd(20), .id = i, .hpos = SS_HEAP_NONE };
	for (int op = 0; op < OPS; op++) {
		uint32_t i = rnd(N), what = rnd(5);

		if (!in[i] && what < 2) {                 /* push */
			ck_assert_int_eq(iheap_push(&h, &it[i]), 0);
			in[i] = true;
			n_in++;
		} else if (in[i] && what == 2) {          /* remove at any position */
			iheap_remove(&h, &it[i]);
			ck_assert_uint_eq(it[i].hpos, SS_HEAP_NONE);
			in[i] = false;
			n_in--;
		} else if (in[i] && what == 3) {          /* re-key up or down */
			it[i].key = (int)rnd(20) - 5;
			iheap_fix(&h, &it[i]);
		} else if (what == 4 && n_in > 0) {       /* pop */
			const struct item *m = model_min(it, in, N);
			struct item *p = iheap_pop(&h);

			ck_assert_ptr_eq(p, m);
			in[p->id] = false;
			n_in--;
		}
		ck_assert_uint_eq(h.n, n_in);
		ck_assert_ptr_eq(iheap_top(&h), n_in ? model_min(it, in, N) : NULL);
		ck_assert(iheap_contains(&h, &it[i]) == in[i]);
		if (op % 97 == 0)
			check_shape(&h);
	}
	/* draining pops everything in the model's order */
	while (n_in > 0) {
		const struct item *m = model_min(it, in, N);

		ck_assert_ptr_eq(iheap_pop(&h), m);
		in[m->id] = false;
		n_in--;
	}
	ck_assert_ptr_null(iheap_pop(&h));
	iheap_release(&h);
}
END_TEST

static bool key_at_most(const void *arg, const struct item *x)
{
	return x->key <= *(const int *)arg;
}

START_TEST(heap_walk_finds_exactly_the_entries_within)
{
	enum { N = 500 };
	struct item it[N], *out[N];
	struct iheap h;

	iheap_init(&h, NULL);
	for (uint32_t i = 0; i < N; i++) {
		it[i] = (struct item){ .key = (int)rnd(100), .id = i };
		ck_assert_int_eq(iheap_push(&h, &it[i]), 0);
	}
	for (int lim = -1; lim <= 100; lim += 7) {
		uint32_t n = iheap_walk(&h, key_at_most, &lim, out), want = 0;
		bool seen[N] = { false };

		for (uint32_t i = 0; i < N; i++)
			want += it[i].key <= lim;
		ck_assert_uint_eq(n, want);
		for (uint32_t k = 0; k < n; k++) {
			ck_assert_int_le(out[k]->key, lim);
			ck_assert(!seen[out[k]->id]);
			seen[out[k]->id] = true;
		}
		/* pre-order: the first is the heap's top */
		if (n)
			ck_assert_ptr_eq(out[0], iheap_top(&h));
	}
	iheap_release(&h);
}
END_TEST

START_TEST(heap_build_and_clear)
{
	enum { N = 257 };
	struct item it[N];
	struct iheap h;

	iheap_init(&h, NULL);
	ck_assert_int_eq(iheap_reserve(&h, N), 0);
	/* a sorted array is left as it is */
	for (uint32_t i = 0; i < N; i++) {
		it[i] = (struct item){ .key = (int)i / 3, .id = i };
		iheap_append(&h, &it[i]);
	}
	iheap_build(&h);
	for (uint32_t i = 0; i < N; i++)
		ck_assert_ptr_eq(h.a[i], &it[i]);
	iheap_clear(&h);
	ck_assert_uint_eq(h.n, 0);
	for (uint32_t i = 0; i < N; i++)
		ck_assert_uint_eq(it[i].hpos, SS_HEAP_NONE);
	/* an arbitrary one pops in order */
	for (uint32_t i = 0; i < N; i++) {
		it[i].key = (int)rnd(30);
		iheap_append(&h, &it[i]);
	}
	iheap_build(&h);
	check_shape(&h);
	for (struct item *p = iheap_pop(&h), *q; p; p = q) {
		q = iheap_pop(&h);
		if (q)
			ck_assert(item_before(NULL, p, q));
	}
	iheap_release(&h);
}
END_TEST

struct rec {
	int key;
	uint32_t seq;   /* input position */
};

static inline bool rec_before(const void *ctx, const struct rec *a, const struct rec *b)
{
	const int *mod = ctx;

	return a->key % *mod < b->key % *mod;
}

SS_SORT_DEFINE(rec_sort, struct rec, rec_before);

START_TEST(sort_is_stable_and_sorted)
{
	enum { MAX = 700 };
	static struct rec a[MAX], ref[MAX], tmp[MAX];

	for (uint32_t n = 0; n < MAX; n += 1 + n / 3) {
		int mod = 1 + (int)rnd(9);

		for (uint32_t i = 0; i < n; i++)
			a[i] = ref[i] = (struct rec){ (int)rnd(1000), i };
		rec_sort(a, tmp, n, &mod);
		/* the reference: a stable insertion sort */
		for (uint32_t i = 1; i < n; i++) {
			struct rec x = ref[i];
			uint32_t j = i;

			while (j > 0 && rec_before(&mod, &x, &ref[j - 1])) {
				ref[j] = ref[j - 1];
				j--;
			}
			ref[j] = x;
		}
		for (uint32_t i = 0; i < n; i++) {
			ck_assert_int_eq(a[i].key, ref[i].key);
			ck_assert_uint_eq(a[i].seq, ref[i].seq);
			if (i > 0 && a[i].key % mod == a[i - 1].key % mod)
				ck_assert_uint_gt(a[i].seq, a[i - 1].seq);   /* stable */
		}
	}
}
END_TEST

START_TEST(merge_puts_the_first_run_first_on_ties)
{
	struct rec a[] = { { 1, 0 }, { 2, 1 }, { 2, 2 }, { 5, 3 } };
	struct rec b[] = { { 0, 4 }, { 2, 5 }, { 6, 6 } };
	struct rec out[7];
	const uint32_t want[] = { 4, 0, 1, 2, 5, 3, 6 };
	int mod = 100;

	rec_sort_merge(a, 4, b, 3, out, &mod);
	for (int i = 0; i < 7; i++)
		ck_assert_uint_eq(out[i].seq, want[i]);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("heap-sort");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, heap_matches_brute_force_model);
	tcase_add_test(tc, heap_walk_finds_exactly_the_entries_within);
	tcase_add_test(tc, heap_build_and_clear);
	tcase_add_test(tc, sort_is_stable_and_sorted);
	tcase_add_test(tc, merge_puts_the_first_run_first_on_ties);
	suite_add_tcase(s, tc);
	return s;
}
