#include "bigmem.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

void ss_advise_huge(void *p, size_t bytes)
{
	uintptr_t page, lo, hi;

	if (!p || bytes < SS_FILL_BYTES)
		return;
	page = (uintptr_t)sysconf(_SC_PAGESIZE);
	/* the whole pages inside the block: madvise takes page-aligned
	 * ranges, and a huge page needs an aligned 2 MiB inside them */
	lo = ((uintptr_t)p + page - 1) & ~(page - 1);
	hi = ((uintptr_t)p + bytes) & ~(page - 1);
	if (hi <= lo)
		return;
	/* advice: failure is harmless (an older kernel, THP off) */
	if (bytes >= SS_BIG_BYTES)
		(void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
	else
		(void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#endif
}

int ss_heap_prefault(size_t bytes)
{
#if defined(__GLIBC__) && defined(MADV_POPULATE_WRITE)
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo, hi;
	void *p;
	int rc = -ENOSYS;

	if (bytes > (size_t)INT32_MAX || !mallopt(M_TOP_PAD, (int)bytes))
		return -EINVAL;
	/* the heap as its first allocation leaves it: the block, then the
	 * top chunk up to the break (not under a malloc that is not glibc's
	 * heap, whose blocks lie elsewhere) */
	p = malloc(1);
	if (!p)
		return -ENOMEM;
	lo = ((uintptr_t)p + page - 1) & ~(page - 1);
	hi = (uintptr_t)sbrk(0) & ~(page - 1);
	if (hi > lo && hi - lo <= bytes + page)
		rc = madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) ? -errno : 0;
	free(p);
	return rc;
#else
	(void)bytes;
	return -ENOSYS;
#endif
}
