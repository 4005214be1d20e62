/* servesim — host memory for the host backends (cpu, ref), their KV block
 * copies, and the fp8 E4M3 conversion every fp8 KV cache uses. */
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
	size_t bytes = bs * kv_token_elems(s) * kv_elem_bytes(s);

	(void)priv;
	(void)err;
	for (int l = 0; l < s->layers; l++)
		for (int i = 0; i < a->n; i++) {
			size_t from = (size_t)a->src_ids[i] * bs, to = (size_t)a->dst_ids[i] * bs;

			if (s->k == d->k && from == to)
				continue;
			memcpy(kv_slot_ptr(d, d->k, l, to), kv_slot_ptr(s, s->k, l, from), bytes);
			memcpy(kv_slot_ptr(d, d->v, l, to), kv_slot_ptr(s, s->v, l, from), bytes);
		}
	return 0;
}

/* E4M3 (OCP "E4M3FN"): sign, 4 exponent bits of bias 7, 3 mantissa bits;
 * exponent field 0 is subnormal (m x 2^-9), S.1111.111 is NaN and there
 * are no infinities, so the largest finite magnitude is 1.75 x 2^8 = 448.
 * Bit arithmetic on the fp32 pattern, so the result does not depend on the
 * FPU's rounding mode. */
uint8_t kernel_fp8_e4m3_from_f32(float x)
{
	uint32_t u, a, m, q;
	uint8_t sign;

	memcpy(&u, &x, sizeof(u));
	sign = (uint8_t)(u >> 24 & 0x80);
	a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return sign | 0x7f;             /* NaN */
	if (a >= 0x43e80000u)
		return sign | 0x7e;             /* >= 464 (and inf): saturate to 448 */
	if (a >= 0x3c800000u) {                 /* >= 2^-6: a normal E4M3 */
		m = a & 0x7fffffu;
		/* exponent field (e - 127 + 7) and the top 3 mantissa bits; a
		 * carry out of the mantissa moves to the next binade, as it should */
		q = ((a >> 23) - 120) << 3 | m >> 20;
		m &= 0xfffffu;                  /* the 20 bits rounded off */
		if (m > 0x80000u || (m == 0x80000u && (q & 1)))
			q++;
		return sign | (uint8_t)(q > 0x7e ? 0x7e : q);   /* [448, 464) rounds to 448 */
	}
	/* subnormal: k x 2^-9, k = x x 2^9 rounded to nearest even (0..8; 8
	 * is 2^-6, the smallest normal, whose encoding 0x08 is k as well) */
	if (a <= 0x3a800000u)                   /* <= 2^-10, half of 2^-9: the tie goes to even 0 */
		return sign;
	{
		uint32_t e = a >> 23, sig = (a & 0x7fffffu) | 0x800000u;
		/* |x| = sig x 2^(e - 150); k = |x| x 2^9 = sig >> (141 - e), a
		 * shift of 21..24 since 2^-10 < |x| < 2^-6 */
		uint32_t sh = 141 - e, k = sig >> sh;
		uint32_t rem = sig & ((1u << sh) - 1), half = 1u << (sh - 1);

		if (rem > half || (rem == half && (k & 1)))
			k++;
		return sign | (uint8_t)k;
	}
}

float kernel_fp8_e4m3_to_f32(uint8_t b)
{
	return fp8_e4m3_to_f32_inline(b);
}
