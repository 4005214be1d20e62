/* servesim — the CPU backend's internals (kernels/cpu/). */
#ifndef SS_KERNELS_CPU_INT_H
#define SS_KERNELS_CPU_INT_H

#include "kernels-int.h"

struct cpu_priv {
	int threads;    /* OpenMP threads per parallel loop, and OpenBLAS threads, >= 1 */
	float fp8_lut[256];   /* kernel_fp8_e4m3_to_f32 of every code: fp8 caches' tiles */
};

/* The module's one export (servesim-cpu.map), found with dlsym. */
extern const struct kernel_backend_ops kernel_cpu_ops;

int cpu_attn_prefill(void *priv, const struct kernel_attn_prefill_args *a, struct ss_error *err);
int cpu_attn_decode(void *priv, const struct kernel_attn_decode_args *a, struct ss_error *err);

#endif
