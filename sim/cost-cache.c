/* servesim — cost models' state in the caches beside the calibration
 * stores (cost-cache-int.h). */
#include "cost-cache-int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cost_io(struct tio *io, void *v, size_t n)
{
	if (io->failed || n == 0)
		return;
	if (io->reading) {
		if (n > io->left) {
			io->failed = true;
			return;
		}
		memcpy(v, io->in, n);
		io->in += n;
		io->left -= n;
	} else {
		if (io->out)
			memcpy(io->out + io->n, v, n);
		io->n += n;
	}
}

void cost_io_bool(struct tio *tio, bool *b)
{
	unsigned char v = *b;

	cost_io(tio, &v, 1);
	if (tio->reading && !tio->failed) {
		if (v > 1)
			tio->failed = true;
		*b = v;
	}
}

void cost_io_array(struct tio *tio, void **pp, size_t n, size_t sz)
{
	if (tio->failed || n == 0)
		return;
	if (tio->reading) {
		if (n > tio->left / sz) {
			tio->failed = true;
			return;
		}
		*pp = malloc(n * sz);
		if (!*pp) {
			tio->failed = true;
			return;
		}
	}
	cost_io(tio, *pp, n * sz);
}

void cost_io_fit(struct tio *tio, struct cal_fit *f)
{
	uint64_t n = f->n;

	COST_IO(tio, f->p);
	COST_IO(tio, f->c);
	COST_IO(tio, f->cov);
	COST_IO(tio, f->s2);
	COST_IO(tio, f->tq);
	COST_IO(tio, n);
	f->n = (size_t)n;
	if (tio->reading && (f->p < 0 || f->p > CAL_FIT_MAX_P))
		tio->failed = true;
}

void cost_io_ptab(struct tio *tio, struct cal_ptab *p)
{
	COST_IO(tio, p->nrows);
	COST_IO(tio, p->n);
	cost_io_bool(tio, &p->direct);
	COST_IO(tio, p->bucket);
	if (tio->failed)
		return;
	if (tio->reading) {
		if (p->nrows < 0 || (p->n == 0) != (p->nrows == 0) ||
		    p->n > tio->left / 8 || (size_t)p->nrows > tio->left / 8) {
			tio->failed = true;
			return;
		}
		for (unsigned b = 0; b < CAL_PTAB_NBUCKET; b++)
			if (p->n && p->bucket[b] >= p->n)
				tio->failed = true;
	}
	cost_io_array(tio, (void **)&p->x, p->n, sizeof(double));
	cost_io_array(tio, (void **)&p->yb, (size_t)p->nrows * p->n * 2, sizeof(double));
	cost_io_array(tio, (void **)&p->lo, (size_t)p->nrows, sizeof(double));
	cost_io_array(tio, (void **)&p->hi, (size_t)p->nrows, sizeof(double));
}

bool cost_cache_key(struct cal_cache *c, const char *kind, const struct cost_config *cfg,
		    const struct cal_shape *sh, double ar_max_mb)
{
	char deps[1024];

	if ((size_t)snprintf(deps, sizeof(deps),
			     "%s device %s layers %d hidden %d heads %d kv_heads %d "
			     "head_dim %d ff %d gated %d rope %d layernorm %d vocab %d tp %d "
			     "dtype_bytes %d model_id %s custom_allreduce_max_mb %a",
			     kind, cfg->gpu->name, sh->layers, sh->hidden, sh->heads, sh->kv_heads,
			     sh->head_dim, sh->ff, sh->gated, sh->rope, sh->layernorm, sh->vocab,
			     sh->tp, sh->dtype_bytes, sh->model_id ? sh->model_id : "(none)",
			     ar_max_mb) >= sizeof(deps))
		return false;
	return cal_cache_init(c, cfg->stores, cfg->n_stores, deps, true);
}

bool cost_cache_load(const struct cal_cache *c, cost_io_fn io, void *state)
{
	struct tio tio = { .reading = true };
	const unsigned char *payload;
	void *buf;

	if (!cal_cache_read(c, &buf, &payload, &tio.left))
		return false;
	tio.in = payload;
	io(&tio, state);
	free(buf);
	return !tio.failed && tio.left == 0;
}

void cost_cache_save(const struct cal_cache *c, cost_io_fn io, void *state)
{
	struct tio tio = { .reading = false };

	io(&tio, state);   /* count */
	tio.out = malloc(tio.n ? tio.n : 1);
	if (!tio.out)
		return;
	tio.n = 0;
	io(&tio, state);
	cal_cache_write(c, tio.out, tio.n);
	free(tio.out);
}
