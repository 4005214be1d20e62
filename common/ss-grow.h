/* servesim — growing an array by doubling (header only).
 *
 * One helper for the arrays the engine and the KV manager keep with a
 * uint32_t capacity beside them (the running set, a step's items, the
 * host tier's pending loads):
 *
 *     struct req **running;  uint32_t cap_running;
 *     if (SS_GROW(&running, &cap_running, n + 1)) return -ENOMEM;
 *
 * SS_GROW takes the element size from the array's own type, so a call
 * cannot pass another type's size.  Inline, because the step path checks
 * several arrays per step that are nearly always big enough already; the
 * growing itself (ss_grow_to) is the rare case.
 *
 * Rejected: a growable-array struct (kvec's, {ptr, n, cap}), which would
 * rewrite every struct that holds such an array and every loop over one;
 * growing by a factor other than 2 (the arrays are small and few).
 */
#ifndef SS_GROW_H
#define SS_GROW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Grow *arr, *cap elements of elem bytes, to hold at least need: the
 * capacity doubles from 8 (or becomes need where doubling would pass
 * UINT32_MAX).  0, or -ENOMEM with *arr and *cap unchanged. */
static inline int ss_grow_to(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t c = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c = c > UINT32_MAX / 2 ? need : c * 2;
	if (elem && c > SIZE_MAX / elem)
		return -ENOMEM;
	p = realloc(*arr, elem * c);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

/* ss_grow_to() for T **arr, its element size sizeof(T); the common case,
 * room already, without a call. */
#define SS_GROW(arr, cap, need)                                                      \
	((uint32_t)(need) <= *(cap) ? 0 :                                            \
	 ss_grow_to((void **)(arr), (cap), (uint32_t)(need), sizeof(**(arr))))

#endif
