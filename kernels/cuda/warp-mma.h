/* servesim — warp-level tensor-core and asynchronous-copy wrappers for the
 * CUDA kernels (attention.cu's prefill; docs/kernels.md, "The CUDA
 * backend").  Each is one PTX instruction (sm_80 and later).  Under the CPU
 * emulation (kernels/cuda/test/emu.h defines SS_CUDA_EMU) each has a body
 * with the same per-lane semantics, computed from the documented fragment
 * layouts, so a kernel that puts an element in the wrong register fails
 * the conformance suite there too.
 *
 * Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16" with
 * .bf16 inputs and .f32 accumulators).  In a warp, lane l has
 * g = l / 4 (its "groupID") and t = l % 4 ("threadID_in_group").  A 32-bit
 * register holds two bf16, the lower-indexed element in the low half.
 *   A (16 x 16, row-major), a[0..3]:
 *     a[0] = A[g][2t, 2t+1]        a[1] = A[g+8][2t, 2t+1]
 *     a[2] = A[g][2t+8, 2t+9]      a[3] = A[g+8][2t+8, 2t+9]
 *   B (16 x 8, "col": k down, n across), b[0..1]:
 *     b[0] = B[2t, 2t+1][g]        b[1] = B[2t+8, 2t+9][g]
 *   C and D (16 x 8, fp32), c[0..3]:
 *     c[0], c[1] = C[g][2t, 2t+1]  c[2], c[3] = C[g+8][2t, 2t+1]
 * So the accumulator of one m16n8 product, converted pairwise to bf16, is
 * half of an A fragment: c[0..1] of n-tile 2k and 2k+1 become a[0] and
 * a[2] of k-step k, c[2..3] a[1] and a[3] (how P = softmax(S) feeds P.V
 * without leaving registers).
 *
 * ldmatrix.m8n8.x4 (PTX ISA, "ldmatrix"): four 8 x 8 matrices of 16-bit
 * elements in shared memory, each row 16 contiguous bytes (16-byte
 * aligned); lane 8i + r gives the address of row r of matrix i.  Lane l
 * receives in r[i] matrix i's elements (row g, columns 2t, 2t+1); with
 * .trans, matrix i transposed: (rows 2t, 2t+1, column g).
 *
 * cp.async.cg (PTX ISA, "cp.async"): a 16-byte copy from global to shared
 * memory (both 16-byte aligned) that bypasses L1 and completes
 * asynchronously; src_bytes < 16 reads that many and zero-fills the rest
 * (0: no read at all, the row is zeros).  A thread's copies since its last
 * commit form a group; wait<N> blocks until at most N of the thread's
 * groups are pending.  Completion is per thread: other threads see the
 * data only after a __syncthreads() that follows their wait.
 */
#ifndef SS_KERNELS_CUDA_WARP_MMA_H
#define SS_KERNELS_CUDA_WARP_MMA_H

#include <stdint.h>

#include <cuda_bf16.h>

/* Two floats as a register of two bf16 (lo in the low half), rounded to
 * nearest even. */
static __device__ __forceinline__ uint32_t mma_pack_bf16(float lo, float hi)
{
	const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
	uint32_t u;

	memcpy(&u, &h, sizeof(u));
	return u;
}

#ifndef SS_CUDA_EMU

/* d = a b + c for a 16 x 16 bf16 A, a 16 x 8 bf16 B and 16 x 8 fp32 C, D
 * (layouts above); d may be c. */
static __device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4],
						      const uint32_t b[2], const float c[4])
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
		     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
		       "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/* Four 8 x 8 bf16 matrices from shared memory (row address from lane
 * 8i + r for row r of matrix i); r[i] as the layout above. */
static __device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *smem_row)
{
	const unsigned a = (unsigned)__cvta_generic_to_shared(smem_row);

	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(a)
		     : "memory");
}

/* The same, each matrix transposed. */
static __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *smem_row)
{
	const unsigned a = (unsigned)__cvta_generic_to_shared(smem_row);

	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(a)
		     : "memory");
}

/* 16 bytes from global src to shared dst, asynchronously; src_bytes (0 or
 * 16) are read, the rest of the 16 zero-filled. */
static __device__ __forceinline__ void cp_async_16(void *smem_dst, const void *src, int src_bytes)
{
	const unsigned a = (unsigned)__cvta_generic_to_shared(smem_dst);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
		     :
		     : "r"(a), "l"(src), "r"(src_bytes)
		     : "memory");
}

/* Close this thread's group of cp.async copies. */
static __device__ __forceinline__ void cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Wait until at most N of this thread's committed groups are pending. */
template <int N> static __device__ __forceinline__ void cp_async_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#else /* SS_CUDA_EMU: the same per-lane semantics on the CPU */

/* bf16 element e (0 low, 1 high) of a register, as a float. */
static inline float mma_emu_half(uint32_t r, int e)
{
	const uint32_t u = (e ? r >> 16 : r & 0xffffu) << 16;   /* bf16 is fp32's high half */
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Every lane's fragments are gathered (a warp barrier, as mma.sync is),
 * and each lane computes its own four outputs by the layout above: A[r][k]
 * lives in lane (r % 8) * 4 + (k % 8) / 2, register r / 8 + 2 (k / 8),
 * half k % 2; B[k][n] in lane n * 4 + (k % 8) / 2, register k / 8, half
 * k % 2.  fp32 products summed in k order. */
static inline void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2],
				  const float c[4])
{
	struct frag {
		uint32_t a[4], b[2];
	} mine = { { a[0], a[1], a[2], a[3] }, { b[0], b[1] } }, all[32];
	const int lane = emu::current_thread() % 32, g = lane / 4, t = lane % 4;
	float out[4];

	emu_warp_gather(mine, all);
	for (int i = 0; i < 4; i++) {
		const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
		float s = c[i];

		for (int k = 0; k < 16; k++) {
			const float x = mma_emu_half(all[(row % 8) * 4 + (k % 8) / 2]
							     .a[row / 8 + 2 * (k / 8)], k % 2);
			const float y = mma_emu_half(all[col * 4 + (k % 8) / 2].b[k / 8], k % 2);

			s += x * y;
		}
		out[i] = s;
	}
	for (int i = 0; i < 4; i++)
		d[i] = out[i];
}

/* Every lane's row address is gathered; lane l reads, for matrix i, the
 * two elements at columns 2t, 2t+1 of row g (the row lane 8i + g
 * addressed), or with trans column g of rows 2t and 2t+1 (the rows lanes
 * 8i + 2t and 8i + 2t + 1 addressed). */
static inline void mma_emu_ldmatrix(uint32_t r[4], const void *smem_row, bool trans)
{
	const unsigned char *mine = (const unsigned char *)smem_row, *all[32];
	const int lane = emu::current_thread() % 32, g = lane / 4, t = lane % 4;

	emu_warp_gather(mine, all);
	for (int i = 0; i < 4; i++) {
		uint16_t lo, hi;

		if (!trans) {
			memcpy(&lo, all[8 * i + g] + 4 * t, 2);
			memcpy(&hi, all[8 * i + g] + 4 * t + 2, 2);
		} else {
			memcpy(&lo, all[8 * i + 2 * t] + 2 * g, 2);
			memcpy(&hi, all[8 * i + 2 * t + 1] + 2 * g, 2);
		}
		r[i] = lo | (uint32_t)hi << 16;
	}
}

static inline void ldmatrix_x4(uint32_t r[4], const void *smem_row)
{
	mma_emu_ldmatrix(r, smem_row, false);
}

static inline void ldmatrix_x4_trans(uint32_t r[4], const void *smem_row)
{
	mma_emu_ldmatrix(r, smem_row, true);
}

/* The copy happens at once (the emulation cannot show a missing wait). */
static inline void cp_async_16(void *smem_dst, const void *src, int src_bytes)
{
	memset(smem_dst, 0, 16);
	memcpy(smem_dst, src, (size_t)src_bytes);
}

static inline void cp_async_commit(void)
{
}

template <int N> static inline void cp_async_wait(void)
{
}

#endif /* SS_CUDA_EMU */

#endif
