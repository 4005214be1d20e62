/* servesim — caches beside the calibration stores (store-cache.h). */
#define _GNU_SOURCE                    /* dl_iterate_phdr: the build-id of cache keys */
#include "store-cache.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif
#include <gsl/gsl_version.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "bigmem.h"

/* ---- caches beside the stores --------------------------------------------
 *
 * Reading a device's rows from SQLite, and then building interpolation
 * tables and fits from them, is most of a simulation's start-up.  What is
 * derived from the stores alone is kept in compact binary files beside the
 * first store, ".NAME.HASH.cache", read back byte for byte by the next run
 * with the same inputs, so every result is identical (bit for bit):
 *
 *   rows     cal_plan_load: the device's series (their doubles, as read)
 *   table    sim/cost-table.c: the finished cost tables of one (GPU,
 *            model shape, tp, options), computed by this build's code
 *
 * A file is keyed by the format version, the schema version, each store's
 * path, device, inode, size, modification time (ns) and SQLite's file
 * change counter, the caller's dependencies (device, head_dim, model shape
 * ...) and, for contents computed rather than read, this program's build
 * (its GNU build-id, the C library's and GSL's versions), so that changed
 * code never reads an older build's tables.  The whole key is stored in
 * the file and compared; the HASH in its name spreads keys and leaves the
 * build out, so a new build replaces its predecessor's file rather than
 * adding one.  A store with a write-ahead log or journal beside it may be
 * changing: no cache then.  Written to a mkstemp file in the same directory
 * and renamed into place, so readers see a whole file or none; where the
 * directory is not writable there is simply no cache.  A file that does not
 * parse (or whose checksum fails) is ignored and rewritten; it is never
 * trusted for sizes before they are checked against its length.
 *
 * File: magic (8 bytes, the last the format version), key length (uint64),
 * key, payload, checksum of everything before it (uint64).
 *
 * Rejected: memory-mapping the file in place (the owners realloc and free
 * their arrays; copying a few hundred KB costs well under a millisecond);
 * one file holding every configuration (concurrent runs would rewrite each
 * other's entries; one file per key is replaced atomically). */

#define CACHE_MAGIC "SSCALC\0\005"     /* 8 bytes; the last is the format version (5: lora rows and fits) */
#define CACHE_MAX_BYTES (512u << 20)

static uint64_t fnv1a(const void *buf, size_t n, uint64_t h)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The file's checksum: FNV-1a's step over 64-bit words (then the tail
 * bytes), eight times fewer steps than bytewise; it guards against damage,
 * not against an adversary (who could as well edit the store). */
static uint64_t checksum(const unsigned char *p, size_t n, uint64_t h)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		h ^= w;
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return fnv1a(p + i, n - i, h);
}

#define FNV_SEED 0xcbf29ce484222325ull

/* SQLite's file change counter (header bytes 24..27), or 0. */
static uint32_t change_counter(int fd)
{
	unsigned char b[4];

	if (pread(fd, b, 4, 24) != 4)
		return 0;
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static bool side_file(const char *store, const char *suffix)
{
	char path[4200];
	struct stat sb;

	snprintf(path, sizeof(path), "%s%s", store, suffix);
	return stat(path, &sb) == 0 && sb.st_size > 0;
}

struct build_id {
	const void *addr;           /* an address inside the object wanted */
	char hex[2 * 64 + 1];       /* its build-id, "" when it has none */
};

/* dl_iterate_phdr callback: the GNU build-id note of the object holding
 * b->addr. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct build_id *b = ctx;
	uintptr_t a = (uintptr_t)b->addr;
	bool inside = false;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum && !inside; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		inside = ph->p_type == PT_LOAD && a >= lo && a - lo < ph->p_memsz;
	}
	if (!inside)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
		size_t left = ph->p_memsz;

		if (ph->p_type != PT_NOTE)
			continue;
		/* notes: namesz, descsz, type (4 bytes each), name, desc, each
		 * padded to 4 bytes */
		while (left >= 12) {
			uint32_t nsz, dsz, type;
			size_t nlen, dlen;

			memcpy(&nsz, p, 4);
			memcpy(&dsz, p + 4, 4);
			memcpy(&type, p + 8, 4);
			nlen = ((size_t)nsz + 3) & ~(size_t)3;
			dlen = ((size_t)dsz + 3) & ~(size_t)3;
			if (nlen > left - 12 || dlen > left - 12 - nlen)
				break;
			if (type == NT_GNU_BUILD_ID && nsz == 4 && !memcmp(p + 12, "GNU", 4) &&
			    dsz > 0 && dsz <= 64) {
				for (uint32_t j = 0; j < dsz; j++)
					snprintf(b->hex + 2 * j, 3, "%02x", p[12 + nlen + j]);
				return 1;
			}
			p += 12 + nlen + dlen;
			left -= 12 + nlen + dlen;
		}
	}
	return 1;   /* the object, without a build-id */
}

bool cal_cache_init(struct cal_cache *c, const char *const *stores, int n_stores,
		    const char *deps, bool per_build)
{
	const char *first = NULL, *slash, *base;
	size_t o = 0, klen = sizeof(c->key);
	char *key = c->key;
	uint64_t name_hash;

	c->klen = 0;
	o += (size_t)snprintf(key, klen, "servesim calibration cache %d schema %d\n",
			      (int)(unsigned char)CACHE_MAGIC[7], CAL_SCHEMA_VERSION);
	for (int i = 0; i < n_stores; i++) {
		struct stat sb;
		uint32_t cc;
		int fd;

		if (!stores[i])
			continue;
		if (!first)
			first = stores[i];
		if (side_file(stores[i], "-wal") || side_file(stores[i], "-journal"))
			return false;
		fd = open(stores[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* a FIFO must not block */
		if (fd < 0)
			return false;
		if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			close(fd);
			return false;
		}
		cc = change_counter(fd);
		close(fd);
		o += (size_t)snprintf(key + o, o < klen ? klen - o : 0,
				      "%d %s %llu %llu %lld %lld.%09ld %u\n", i, stores[i],
				      (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino,
				      (long long)sb.st_size, (long long)sb.st_mtim.tv_sec,
				      sb.st_mtim.tv_nsec, cc);
	}
	o += (size_t)snprintf(key + o, o < klen ? klen - o : 0, "%s\n", deps);
	if (!first || o >= klen)
		return false;
	name_hash = fnv1a(key, o, FNV_SEED);
	if (per_build) {
		struct build_id b = { (const void *)cal_cache_init, "" };
		const char *libc = "?";

		dl_iterate_phdr(find_build_id, &b);
		if (!b.hex[0])
			return false;   /* no way to tell builds apart: no cache */
#ifdef __GLIBC__
		libc = gnu_get_libc_version();
#endif
		o += (size_t)snprintf(key + o, o < klen ? klen - o : 0, "build %s gsl %s libc %s\n",
				      b.hex, gsl_version, libc);
		if (o >= klen)
			return false;
	}
	slash = strrchr(first, '/');
	base = slash ? slash + 1 : first;
	if ((size_t)snprintf(c->path, sizeof(c->path), "%.*s.%s.%016llx.cache",
			     slash ? (int)(slash - first + 1) : 0, first, base,
			     (unsigned long long)name_hash) >= sizeof(c->path))
		return false;
	c->klen = o;
	return true;
}

bool cal_cache_read(const struct cal_cache *c, void **buf_out, const unsigned char **payload,
		    size_t *len)
{
	unsigned char *buf = NULL;
	struct stat sb;
	uint64_t sum, klen;
	bool ok = false;
	size_t size;
	int fd = open(c->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	*buf_out = NULL;
	if (fd < 0)
		return false;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 24 ||
	    (uint64_t)sb.st_size > CACHE_MAX_BYTES)
		goto out;
	size = (size_t)sb.st_size;
	buf = malloc(size);
	if (!buf)
		goto out;
	ss_advise_huge(buf, size);   /* (its pages at once: read fills it whole) */
	for (size_t got = 0; got < size;) {
		ssize_t k = read(fd, buf + got, size - got);

		if (k <= 0)
			goto out;
		got += (size_t)k;
	}
	/* the last 8 bytes: the checksum of everything before them */
	memcpy(&sum, buf + size - 8, 8);
	memcpy(&klen, buf + 8, 8);
	if (sum != checksum(buf, size - 8, FNV_SEED) || memcmp(buf, CACHE_MAGIC, 8) ||
	    klen != c->klen || klen > size - 24 || memcmp(buf + 16, c->key, c->klen))
		goto out;
	*payload = buf + 16 + klen;
	*len = size - 24 - klen;
	*buf_out = buf;
	buf = NULL;
	ok = true;
out:
	free(buf);
	close(fd);
	return ok;
}

void cal_cache_write(const struct cal_cache *c, const void *payload, size_t len)
{
	char tmp[4300];
	unsigned char *buf;
	uint64_t v = c->klen;
	size_t n = 24 + c->klen + len, done = 0;
	int fd;

	if (n > CACHE_MAX_BYTES || (size_t)snprintf(tmp, sizeof(tmp), "%s.XXXXXX", c->path) >=
	    sizeof(tmp))
		return;
	buf = malloc(n);
	if (!buf)
		return;
	memcpy(buf, CACHE_MAGIC, 8);
	memcpy(buf + 8, &v, 8);
	memcpy(buf + 16, c->key, c->klen);
	if (len)
		memcpy(buf + 16 + c->klen, payload, len);
	v = checksum(buf, n - 8, FNV_SEED);
	memcpy(buf + n - 8, &v, 8);
	fd = mkstemp(tmp);
	if (fd < 0)
		goto out;   /* read-only directory, or full: no cache */
	while (done < n) {
		ssize_t k = write(fd, buf + done, n - done);

		if (k <= 0)
			break;
		done += (size_t)k;
	}
	if (fchmod(fd, 0644) != 0)
		done = 0;
	if (close(fd) != 0 || done < n || rename(tmp, c->path) != 0)
		unlink(tmp);
out:
	free(buf);
}
