/* servesim — caches beside the calibration stores: compact binary files
 * holding what is derived from the stores alone (cal_plan_load's rows,
 * sim/cost-table.c's finished tables), keyed on the stores' identities and
 * read back byte for byte by a later run with the same inputs
 * (calibrate/store-cache.c says how the key and the file are made).
 */
#ifndef SS_CAL_STORE_CACHE_H
#define SS_CAL_STORE_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* A file beside the first store holding something derived from the stores,
 * read back byte for byte by a later run with the same inputs. */
struct cal_cache {
	char key[8192];            /* everything the contents depend on; stored in
				    * the file and compared whole */
	size_t klen;               /* bytes of key used */
	char path[4200];           /* ".STORE.HASH.cache" beside the first store */
};

/* Key a cache on the stores' identities, on deps (text naming everything
 * else the contents depend on, starting with what they are) and, when
 * per_build, on this program's build: contents computed by code, not just
 * read, are never shared between builds.  False when no cache applies (no
 * store, a store that cannot be opened or may be changing, no build-id). */
bool cal_cache_init(struct cal_cache *c, const char *const *stores, int n_stores,
		    const char *deps, bool per_build);
/* The file's payload when it exists, holds c's key and its checksum holds:
 * *payload points len bytes into *buf (transfer full: free it).  False
 * otherwise (*buf NULL). */
bool cal_cache_read(const struct cal_cache *c, void **buf, const unsigned char **payload,
		    size_t *len);
/* Replace the file with payload, atomically; failures (a read-only
 * directory, a full disk) leave no file and are not errors. */
void cal_cache_write(const struct cal_cache *c, const void *payload, size_t len);

#endif
