#include "bigmem.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

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
