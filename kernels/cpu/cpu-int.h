/* servesim — the CPU backend's internals (kernels/cpu/). */
#ifndef SS_KERNELS_CPU_INT_H
#define SS_KERNELS_CPU_INT_H

#include "kernels-int.h"

struct cpu_priv {
	int threads;    /* OpenMP threads per parallel loop, and OpenBLAS threads, >= 1 */
};

int cpu_attn_prefill(void *priv, const struct kernel_attn_prefill_args *a, struct ss_error *err);
int cpu_attn_decode(void *priv, const struct kernel_attn_decode_args *a, struct ss_error *err);

#endif
