/* servesim — advice for arrays of millions of elements.
 *
 * On our VMs the first touch of a fresh 4 KiB page costs about 14 us, so a
 * run of 1,000,000 requests spent about 0.6 s of its 6.8 s faulting in the
 * per-request arrays it allocates (66,000 minor faults: the workload, the
 * engine's records, the metrics' sort buffers).  ss_advise_huge() asks the
 * kernel to back such an array with transparent huge pages (madvise
 * MADV_HUGEPAGE; Debian's default THP mode is "madvise", so without the
 * advice it never does), one fault per 2 MiB.  Call it on a block from
 * malloc, calloc or realloc before the block is filled; it changes no byte
 * of it and allocation and free stay as they are.  Below SS_BIG_BYTES,
 * from SS_FILL_BYTES up, it has the kernel fault the block's pages in at
 * once instead (madvise MADV_POPULATE_WRITE, Linux 5.14): 0.5 to 2 us a
 * page here against 10 us a fault, and the block is about to be filled
 * anyway.  Below SS_FILL_BYTES it does nothing; where the kernel refuses
 * (THP off, an older kernel, another OS) the array is simply faulted in
 * page by page, as before.
 */
#ifndef SS_BIGMEM_H
#define SS_BIGMEM_H

#include <stddef.h>

/* 4 MiB: an array smaller than two huge pages gains little */
#define SS_BIG_BYTES ((size_t)4 << 20)
/* 64 KiB: sixteen pages, below which one call saves little */
#define SS_FILL_BYTES ((size_t)64 << 10)

void ss_advise_huge(void *p, size_t bytes);

/* For a program's entry point, before it allocates: have malloc's heap
 * grow by bytes more than it needs whenever it grows (glibc's M_TOP_PAD)
 * and fault its first such stretch in at once (MADV_POPULATE_WRITE), so
 * that a short run's many small allocations (catalogs, engine, cost
 * model) do not fault page by page.  Elsewhere (another libc, an older
 * kernel, a malloc replaced by a tool) it does nothing that matters. */
/* 0, or a negative errno where it did not fault anything in (-ENOSYS:
 * no such libc or kernel feature; -ENOMEM; madvise's error). */
int ss_heap_prefault(size_t bytes);

#endif
