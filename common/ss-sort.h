/* servesim — a stable merge sort, typed by a macro (header only).
 *
 * SS_SORT_DEFINE(name, T, before) generates, over entries of type T (held
 * by value: pointers, small structs or whole records) and a comparator
 * before(ctx, a, b) (a strict weak order, inlined):
 *
 *   void name(T *a, T *tmp, size_t n, const void *ctx)
 *       sort a[0 .. n) stably (entries that compare equal keep their order)
 *       with tmp[0 .. n) as scratch: a bottom-up merge sort, O(n log n)
 *       comparisons, no allocation, no recursion; the result is in a;
 *   void name##_merge(const T *a, size_t na, const T *b, size_t nb, T *out,
 *                     const void *ctx)
 *       merge sorted a and b into out (which overlaps neither), a's entry
 *       first on ties: how a sorted run and a newly sorted tail are joined.
 *
 * Rejected alternatives: qsort (not stable; an index as the last key
 * costs an array beside the entries, and the comparator is an indirect
 * call); a natural merge sort (the engine's callers know where their
 * sorted run ends, and merge it themselves).
 */
#ifndef SS_SORT_H
#define SS_SORT_H

#include <stddef.h>
#include <string.h>

#define SS_SORT_DEFINE(name, T, before)                                                  \
	typedef T name##_elem; /* T may be a pointer type: const applies to it */        \
                                                                                         \
	static inline void name##_merge(const name##_elem *a, size_t na, const name##_elem *b, size_t nb,    \
					name##_elem *out, const void *ctx)                         \
	{                                                                                \
		size_t i = 0, j = 0, k = 0;                                              \
                                                                                         \
		(void)ctx;                                                               \
		while (i < na && j < nb)                                                 \
			out[k++] = before(ctx, &b[j], &a[i]) ? b[j++] : a[i++];          \
		while (i < na)                                                           \
			out[k++] = a[i++];                                               \
		while (j < nb)                                                           \
			out[k++] = b[j++];                                               \
	}                                                                                \
                                                                                         \
	static inline void name(name##_elem *a, name##_elem *tmp, size_t n, const void *ctx)                 \
	{                                                                                \
		name##_elem *src = a, *dst = tmp;                                                  \
                                                                                         \
		for (size_t w = 1; w < n; w *= 2) {                                      \
			name##_elem *t;                                                            \
                                                                                         \
			for (size_t lo = 0; lo < n; lo += 2 * w) {                       \
				size_t mid = lo + w < n ? lo + w : n;                    \
				size_t hi = lo + 2 * w < n ? lo + 2 * w : n;             \
                                                                                         \
				name##_merge(src + lo, mid - lo, src + mid, hi - mid,    \
					     dst + lo, ctx);                             \
			}                                                                \
			t = src;                                                         \
			src = dst;                                                       \
			dst = t;                                                         \
		}                                                                        \
		if (src != a)                                                            \
			memcpy(a, src, sizeof(*a) * n);                                  \
	}                                                                                \
	struct name##_semicolon /* so a use ends with ';' */

#endif
