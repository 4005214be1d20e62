/* servesim — kernels/ internals shared by the host backends (cpu, ref) and
 * the registry.  Not a public header. */
#ifndef SS_KERNELS_INT_H
#define SS_KERNELS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
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

/* Callable from host and device code (the CUDA backend includes this
 * header; under nvcc the mixer below is also a device function). */
#ifdef __CUDACC__
#define KERNEL_HOST_DEVICE __host__ __device__
#else
#define KERNEL_HOST_DEVICE
#endif

/* SplitMix64's output function (Steele, Lea & Flood 2014), the same as
 * common/rng.h's ss_splitmix64, which the modules do not link: the stream
 * of kernel_fill_uniform (backend.h). */
static inline KERNEL_HOST_DEVICE uint64_t kernel_splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* u(key, i) of kernel_fill_uniform: (splitmix64(key + i) >> 40) * 2^-23 - 1,
 * exact in double and in float (a 24-bit integer minus 2^23, times 2^-23). */
static inline KERNEL_HOST_DEVICE float kernel_uniform_u(uint64_t key, uint64_t i)
{
	return (float)((double)(kernel_splitmix64(key + i) >> 40) * (2.0 / 16777216.0) - 1.0);
}

/* bias + scale * u on the host: two fp32 operations, each rounded (C11 mode
 * does not contract them into an FMA, and fp32 arithmetic on x86-64 is SSE,
 * without excess precision). */
static inline float kernel_uniform_draw(uint64_t key, uint64_t i, float scale, float bias)
{
	float su = scale * kernel_uniform_u(key, i);

	return bias + su;
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

/* Bytes per element of a host cache: fp32, or one byte of fp8 E4M3 (the
 * host backends store an fp8 cache in 8 bits, as a GPU does, so its memory
 * and its block copies are what the simulator prices). */
static inline size_t kv_elem_bytes(const struct kernel_kv_cache *c)
{
	return kernel_kv_cache_is_fp8(c) ? 1 : sizeof(float);
}

/* First element of slot (block * block_size + offset) of layer in base
 * (c->k or c->v) of a host cache, of either dtype. */
static inline void *kv_slot_ptr(const struct kernel_kv_cache *c, void *base, int layer,
				size_t slot)
{
	size_t layer_elems = (size_t)c->num_blocks * (size_t)c->block_size * kv_token_elems(c);

	return (char *)base + ((size_t)layer * layer_elems + slot * kv_token_elems(c)) *
				      kv_elem_bytes(c);
}

/* The same for an fp32 cache. */
static inline float *kv_slot(const struct kernel_kv_cache *c, void *base, int layer, size_t slot)
{
	return (float *)kv_slot_ptr(c, base, layer, slot);
}

/* Row src of n floats into a cache row at dst of c's dtype: copied, or
 * rounded to fp8 E4M3 (kernel_fp8_e4m3_from_f32). */
static inline void kv_store_row(const struct kernel_kv_cache *c, void *dst, const float *src,
				size_t n)
{
	if (kernel_kv_cache_is_fp8(c)) {
		uint8_t *d = (uint8_t *)dst;

		for (size_t i = 0; i < n; i++)
			d[i] = kernel_fp8_e4m3_from_f32(src[i]);
	} else {
		memcpy(dst, src, n * sizeof(float));
	}
}

/* kernel_fp8_e4m3_to_f32, inline for ref's element reads (the CPU backend
 * decodes through a table made with it): the byte's sign at bit 31 and its
 * other 7 bits at bits 26..20 make an fp32 whose exponent and mantissa
 * fields are E4M3's (bias 7 against fp32's 127), worth the value times
 * 2^-120 -- E4M3's subnormals (exponent field 0, m x 2^-9) become fp32
 * subnormals -- so one exact multiply by 2^120 gives the value; S.1111.111
 * is NaN.  (The CUDA backend dequantises the same way before sm_89.) */
static inline float fp8_e4m3_to_f32_inline(uint8_t b)
{
	uint32_t u = (b & 0x7fu) == 0x7fu ? 0x7fc00000u
					  : (uint32_t)(b & 0x80u) << 24 | (uint32_t)(b & 0x7fu) << 20;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f * 0x1p120f;
}

/* Element e of a cache row of c's dtype, as fp32 (exact). */
static inline float kv_load(const struct kernel_kv_cache *c, const void *row, size_t e)
{
	return kernel_kv_cache_is_fp8(c) ? fp8_e4m3_to_f32_inline(((const uint8_t *)row)[e])
					 : ((const float *)row)[e];
}

#endif
