/* servesim — host memory for the host backends (cpu, ref). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kernels-int.h"

#define HOST_ALIGN 64   /* bytes: a cache line, and any SIMD width in use */

int kernel_host_alloc(void *priv, void **buf, size_t bytes, enum kernel_mem mem,
		      struct ss_error *err)
{
	size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;

	(void)priv;
	(void)mem;
	*buf = aligned_alloc(HOST_ALIGN, rounded);
	if (!*buf)
		return ss_error_set(err, -ENOMEM, NULL, 0,
				    "out of memory allocating a %zu-byte kernel buffer", bytes);
	memset(*buf, 0, rounded);
	return 0;
}

void kernel_host_free(void *priv, void *buf)
{
	(void)priv;
	free(buf);
}

int kernel_host_upload(void *priv, void *dst, size_t off, const void *src, size_t bytes,
		       struct ss_error *err)
{
	(void)priv;
	(void)err;
	memcpy((char *)dst + off, src, bytes);
	return 0;
}

int kernel_host_download(void *priv, void *dst, const void *src, size_t off, size_t bytes,
			 struct ss_error *err)
{
	(void)priv;
	(void)err;
	memcpy(dst, (const char *)src + off, bytes);
	return 0;
}

int kernel_host_kv_copy(void *priv, const struct kernel_kv_copy_args *a, struct ss_error *err)
{
	const struct kernel_kv_cache *s = a->src, *d = a->dst;
	size_t bs = (size_t)s->block_size;
	size_t bytes = bs * kv_token_elems(s) * sizeof(float);

	(void)priv;
	(void)err;
	for (int l = 0; l < s->layers; l++)
		for (int i = 0; i < a->n; i++) {
			size_t from = (size_t)a->src_ids[i] * bs, to = (size_t)a->dst_ids[i] * bs;

			if (s->k == d->k && from == to)
				continue;
			memcpy(kv_slot(d, d->k, l, to), kv_slot(s, s->k, l, from), bytes);
			memcpy(kv_slot(d, d->v, l, to), kv_slot(s, s->v, l, from), bytes);
		}
	return 0;
}
