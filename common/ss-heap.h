/* servesim — an indexed binary min-heap, typed by a macro (header only).
 *
 * The heap holds pointers to caller-owned entries; each entry stores its
 * index in the heap in a uint32_t member (SS_HEAP_NONE when it is in no
 * heap), so that remove and fix (re-key) of any entry are O(log n), as
 * libuv's timers keep their heap node in the timer.  SS_HEAP_DEFINE
 * generates static functions over one entry type, its position member and
 * a comparator, so the comparator is inlined into the sifts:
 *
 *     struct job { int64_t due; uint32_t hpos; };
 *     static bool job_before(const void *ctx, const struct job *a, const struct job *b)
 *     { return a->due < b->due; }
 *     SS_HEAP_STRUCT(jobheap, struct job);
 *     SS_HEAP_DEFINE(jobheap, struct job, hpos, job_before);
 *
 *     struct jobheap h;  jobheap_init(&h, NULL);  jobheap_push(&h, &j); ...
 *
 * before(ctx, a, b) is a strict weak order; ctx is the heap's (set at
 * init) and lets a comparator read state beside the entries (a tenant's
 * key, say).  Entries that compare equal come out in an order that
 * depends on the heap's history: a caller wanting a replayable order makes
 * the order total (a sequence number as the last key).
 *
 * Removal (pop, remove) is Floyd's bottom-up deletion: the hole moves down
 * to a leaf along the earlier child (one comparison per level instead of
 * two), and the last entry is sifted up from there; the last entry of a
 * heap is usually late, so it rarely climbs.
 *
 * Rejected alternatives: libuv's pointer-linked heap (a node of three
 * pointers per entry, and pointer chasing on every sift); a generic heap
 * over void * with a comparator pointer (an indirect call per comparison
 * on the simulator's hottest path); one hand-written heap per use (the
 * engine had four, each with its own sifts).
 */
#ifndef SS_HEAP_H
#define SS_HEAP_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "ss-grow.h"

/* The position of an entry that is in no heap. */
#define SS_HEAP_NONE UINT32_MAX

/* The heap of T entries: a[0 .. n) is the heap, room for cap.  Apart from
 * SS_HEAP_DEFINE so that a header can embed the heap and keep its
 * comparator private. */
#define SS_HEAP_STRUCT(name, T)                                                          \
	struct name {                                                                    \
		T **a;                                                                   \
		uint32_t n, cap;                                                         \
		const void *ctx;  /* the comparator's */                                 \
	}

/* The functions over a struct name of SS_HEAP_STRUCT (all static, unused ones cost nothing):
 *   name_init(h, ctx) / name_release(h)     empty heap; release frees a[]
 *   name_reserve(h, need)                   room for need entries: 0 or -ENOMEM
 *   name_push(h, x)                         0 or -ENOMEM; O(log n)
 *   name_top(h)                             the first entry, NULL when empty
 *   name_pop(h)                             take out the first entry (NULL when empty)
 *   name_remove(h, x)                       take out x, which is in h; O(log n)
 *   name_fix(h, x)                          x's key changed: put it in its place
 *   name_contains(h, x)                     whether x is in h
 *   name_at(h, i)                           the entry at heap index i (i < n)
 *   name_walk(h, within, arg, out)          the entries x with within(arg, x), in
 *                                           pre-order, to out[]; within must be
 *                                           monotone (false at x implies false at
 *                                           every entry below x): O(entries found)
 *   name_clear(h)                           take out every entry: O(n)
 *   name_append(h, x) + name_build(h)       bulk load: append without order,
 *                                           then heapify in O(n) (an array in
 *                                           order is left as it is)
 */
#define SS_HEAP_DEFINE(name, T, pos, before)                                             \
	static inline void name##_place(struct name *h, uint32_t i, T *x)                \
	{                                                                                \
		h->a[i] = x;                                                             \
		x->pos = i;                                                              \
	}                                                                                \
                                                                                         \
	/* Put x at i or above it, moving later parents down. */                        \
	static inline void name##_up(struct name *h, uint32_t i, T *x)                   \
	{                                                                                \
		while (i > 0) {                                                          \
			uint32_t up = (i - 1) / 2;                                       \
                                                                                         \
			if (!before(h->ctx, x, h->a[up]))                                \
				break;                                                   \
			name##_place(h, i, h->a[up]);                                    \
			i = up;                                                          \
		}                                                                        \
		name##_place(h, i, x);                                                   \
	}                                                                                \
                                                                                         \
	/* Put x at i or below it, moving earlier children up. */                       \
	static inline void name##_down(struct name *h, uint32_t i, T *x)                 \
	{                                                                                \
		uint32_t n = h->n;                                                       \
                                                                                         \
		for (;;) {                                                               \
			uint32_t c = 2 * i + 1;                                          \
                                                                                         \
			if (c >= n)                                                      \
				break;                                                   \
			if (c + 1 < n && before(h->ctx, h->a[c + 1], h->a[c]))           \
				c++;                                                     \
			if (!before(h->ctx, h->a[c], x))                                 \
				break;                                                   \
			name##_place(h, i, h->a[c]);                                     \
			i = c;                                                           \
		}                                                                        \
		name##_place(h, i, x);                                                   \
	}                                                                                \
                                                                                         \
	static inline void name##_init(struct name *h, const void *ctx)                  \
	{                                                                                \
		h->a = NULL;                                                             \
		h->n = h->cap = 0;                                                       \
		h->ctx = ctx;                                                            \
	}                                                                                \
                                                                                         \
	static inline void name##_release(struct name *h)                                \
	{                                                                                \
		free(h->a);                                                              \
		h->a = NULL;                                                             \
		h->n = h->cap = 0;                                                       \
	}                                                                                \
                                                                                         \
	static inline int name##_reserve(struct name *h, uint32_t need)                  \
	{                                                                                \
		return SS_GROW(&h->a, &h->cap, need);                                    \
	}                                                                                \
                                                                                         \
	static inline int name##_push(struct name *h, T *x)                              \
	{                                                                                \
		if (h->n == h->cap && name##_reserve(h, h->n + 1))                       \
			return -ENOMEM;                                                  \
		name##_up(h, h->n++, x);                                                 \
		return 0;                                                                \
	}                                                                                \
                                                                                         \
	static inline T *name##_top(const struct name *h)                                \
	{                                                                                \
		return h->n ? h->a[0] : NULL;                                            \
	}                                                                                \
                                                                                         \
	static inline T *name##_at(const struct name *h, uint32_t i)                     \
	{                                                                                \
		return h->a[i];                                                          \
	}                                                                                \
                                                                                         \
	static inline bool name##_contains(const struct name *h, const T *x)             \
	{                                                                                \
		return x->pos < h->n && h->a[x->pos] == x;                               \
	}                                                                                \
                                                                                         \
	/* Take out the entry at i: Floyd's bottom-up deletion (above). */              \
	static inline void name##_remove_at(struct name *h, uint32_t i)                  \
	{                                                                                \
		uint32_t n;                                                              \
		T *last;                                                                 \
                                                                                         \
		h->a[i]->pos = SS_HEAP_NONE;                                             \
		n = --h->n;                                                              \
		if (n == i)                                                              \
			return;                                                          \
		last = h->a[n];                                                          \
		for (;;) {                                                               \
			uint32_t c = 2 * i + 1;                                          \
                                                                                         \
			if (c >= n)                                                      \
				break;                                                   \
			if (c + 1 < n && before(h->ctx, h->a[c + 1], h->a[c]))           \
				c++;                                                     \
			name##_place(h, i, h->a[c]);                                     \
			i = c;                                                           \
		}                                                                        \
		name##_up(h, i, last);                                                   \
	}                                                                                \
                                                                                         \
	static inline T *name##_pop(struct name *h)                                      \
	{                                                                                \
		T *x = h->n ? h->a[0] : NULL;                                            \
                                                                                         \
		if (x)                                                                   \
			name##_remove_at(h, 0);                                          \
		return x;                                                                \
	}                                                                                \
                                                                                         \
	static inline void name##_remove(struct name *h, T *x)                           \
	{                                                                                \
		name##_remove_at(h, x->pos);                                             \
	}                                                                                \
                                                                                         \
	static inline void name##_fix(struct name *h, T *x)                              \
	{                                                                                \
		uint32_t i = x->pos;                                                     \
                                                                                         \
		if (i > 0 && before(h->ctx, x, h->a[(i - 1) / 2]))                       \
			name##_up(h, i, x);                                              \
		else                                                                     \
			name##_down(h, i, x);                                            \
	}                                                                                \
                                                                                         \
	static inline uint32_t name##_walk_from(const struct name *h, uint32_t i,        \
						bool (*within)(const void *, const T *), \
						const void *arg, T **out, uint32_t k)    \
	{                                                                                \
		if (i >= h->n || !within(arg, h->a[i]))                                  \
			return k;                                                        \
		out[k++] = h->a[i];                                                      \
		k = name##_walk_from(h, 2 * i + 1, within, arg, out, k);                 \
		return name##_walk_from(h, 2 * i + 2, within, arg, out, k);              \
	}                                                                                \
                                                                                         \
	static inline uint32_t name##_walk(const struct name *h,                         \
					   bool (*within)(const void *, const T *),      \
					   const void *arg, T **out)                     \
	{                                                                                \
		return name##_walk_from(h, 0, within, arg, out, 0);                      \
	}                                                                                \
                                                                                         \
	static inline void name##_clear(struct name *h)                                  \
	{                                                                                \
		for (uint32_t i = 0; i < h->n; i++)                                      \
			h->a[i]->pos = SS_HEAP_NONE;                                     \
		h->n = 0;                                                                \
	}                                                                                \
                                                                                         \
	/* Bulk load: room must have been reserved (name_reserve). */                   \
	static inline void name##_append(struct name *h, T *x)                           \
	{                                                                                \
		name##_place(h, h->n++, x);                                              \
	}                                                                                \
                                                                                         \
	static inline void name##_build(struct name *h)                                  \
	{                                                                                \
		for (uint32_t i = h->n / 2; i-- > 0;)                                    \
			name##_down(h, i, h->a[i]);                                      \
	}                                                                                \
	struct name##_semicolon /* so a use ends with ';' */

#endif
