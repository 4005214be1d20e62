/* servesim — kernels/ internals shared by the host backends (cpu, ref) and
 * the registry.  Not a public header. */
#ifndef SS_KERNELS_INT_H
#define SS_KERNELS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "backend.h"

/* CLOCK_MONOTONIC, ns.  Inline so that a backend module (kernels/cuda/,
 * loaded with dlopen) has it without linking the registry. */
static inline int64_t kernel_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Host-memory buffers for host backends (fp32 storage): 64-byte aligned,
 * zero-filled; mem is ignored (host memory is all there is). */
int kernel_host_alloc(void *priv, void **buf, size_t bytes, enum kernel_mem mem,
		      struct ss_error *err);
void kernel_host_free(void *priv, void *buf);
int kernel_host_upload(void *priv, void *dst, size_t off, const void *src, size_t bytes,
		       struct ss_error *err);
int kernel_host_download(void *priv, void *dst, const void *src, size_t off, size_t bytes,
			 struct ss_error *err);
/* Block copies between host caches (memcpy per block and layer). */
int kernel_host_kv_copy(void *priv, const struct kernel_kv_copy_args *a, struct ss_error *err);

/* Typed element pointers of a view on a host backend. */
static inline float *view_f32(const struct kernel_view *v)
{
	return (float *)v->buf + v->off;
}

static inline int32_t *view_i32(const struct kernel_view *v)
{
	return (int32_t *)v->buf + v->off;
}

/* Elements of one token in one layer's cache (kv_heads x head_dim). */
static inline size_t kv_token_elems(const struct kernel_kv_cache *c)
{
	return (size_t)c->kv_heads * (size_t)c->head_dim;
}

/* First element of slot (block * block_size + offset) of layer in base
 * (c->k or c->v) of a host cache. */
static inline float *kv_slot(const struct kernel_kv_cache *c, void *base, int layer, size_t slot)
{
	size_t layer_elems = (size_t)c->num_blocks * (size_t)c->block_size * kv_token_elems(c);

	return (float *)base + (size_t)layer * layer_elems + slot * kv_token_elems(c);
}

#endif
