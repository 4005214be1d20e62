/* servesim — cost models' state kept in the caches beside the calibration
 * stores (calibrate/store-cache.h, cal_cache; docs/calibration.md, "The caches
 * beside the stores").  Private to sim/.
 *
 * A cost model whose init derives its state from the stores alone (the
 * "table" and "fit" models) describes that state once, as a function run
 * both ways over a struct tio: writing the state out and reading it back
 * byte for byte, so a run from the cache prices every step bit for bit as
 * a run that built it.  Reads check every size against the bytes left;
 * checking indices and completeness is the model's part. */
#ifndef SERVESIM_COST_CACHE_INT_H
#define SERVESIM_COST_CACHE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "costmodel.h"
#include "grid.h"
#include "op-plan.h"
#include "store-cache.h"

struct tio {
	bool reading;
	bool failed;                /* a read ran short or found nonsense */
	unsigned char *out;         /* writing: the buffer, NULL to count bytes */
	const unsigned char *in;    /* reading: the next byte */
	size_t n;                   /* writing: bytes so far */
	size_t left;                /* reading: bytes left */
};

/* The model's state, both ways (state is its private struct). */
typedef void (*cost_io_fn)(struct tio *tio, void *state);

/* n bytes at v, out or in. */
void cost_io(struct tio *tio, void *v, size_t n);
#define COST_IO(tio, field) cost_io((tio), &(field), sizeof(field))
/* A bool as one byte; anything but 0 or 1 fails a read. */
void cost_io_bool(struct tio *tio, bool *b);
/* *pp: n elements of size sz, allocated when reading (NULL when n is 0). */
void cost_io_array(struct tio *tio, void **pp, size_t n, size_t sz);
/* A fit, field by field (no padding bytes in the file). */
void cost_io_fit(struct tio *tio, struct cal_fit *f);
/* A piecewise-linear table, its arrays allocated when reading; its sizes
 * and bucket indices checked. */
void cost_io_ptab(struct tio *tio, struct cal_ptab *p);

/* The cache for a model of kind (its name and state format version, e.g.
 * "table 1") built for cfg: keyed on the stores, the GPU's name, every
 * field of the model's shape sh, custom_allreduce_max_mb and the build.
 * False when no cache applies. */
bool cost_cache_key(struct cal_cache *c, const char *kind, const struct cost_config *cfg,
		    const struct cal_shape *sh, double ar_max_mb);
/* Read state from c; false when there is no file or it does not parse to
 * its end (arrays read so far stay in state: the caller releases them). */
bool cost_cache_load(const struct cal_cache *c, cost_io_fn io, void *state);
/* Write state to c; failures are silent (the cache is an optimisation). */
void cost_cache_save(const struct cal_cache *c, cost_io_fn io, void *state);

#endif
