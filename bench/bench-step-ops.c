/* servesim: a whole synthetic step against its operators (measured, never
 * pass/fail; docs/validation.md, "The live loop on the CPU").
 *
 * Why does a whole live step take longer than the sum of its calibrated
 * operators?  This bench runs the scaled Llama-3.2-1B of bench/cpu-loop.sh
 * (width / 16, 2 layers) on the CPU backend at a few step shapes and
 * reports, for the fastest of REPEATS steps:
 *
 *   wall       the whole step (CLOCK_MONOTONIC around synth_model_step,
 *              as the live executor times it);
 *   in-step    the sum of every kernel call timed where it runs, inside
 *              the step; wall - in-step is the host work between kernels;
 *   isolated   each of those calls repeated at once on the same data
 *              (fastest of 5), as `calibrate run` times operators: warm
 *              caches, weights and activations already in the core's L2.
 *
 * Per kernel kind it prints in-step / isolated.  The kernel calls are
 * intercepted with the linker's --wrap (bench/meson.build), so the step
 * itself runs unchanged.  The bench's state is file-static: it is a
 * program, not library code.
 *
 *   bench-step-ops        (pin it: taskset -c 1 build/bench/bench-step-ops)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "step.h"

#define REPEATS 12
#define ISO_REPEATS 5

enum { K_GEMM, K_NORM, K_ROPE, K_ACT, K_KVW, K_PF, K_DEC, K_GATH, K_ARGMAX, K_N };
static const char *const kind_name[K_N] = {
	"gemm", "rmsnorm", "rope", "act", "kv_write", "attn_pf", "attn_dec", "gather", "argmax",
};
static double in_step_ns[K_N], iso_ns[K_N];   /* this step's sums, ns */
static int isolate;                            /* also time each call repeated */

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

#define WRAP(name, kind, T)                                                                   \
	int __real_##name(struct kernel_backend *, const T *, struct ss_error *);               \
	int __wrap_##name(struct kernel_backend *kb, const T *a, struct ss_error *e);           \
	int __wrap_##name(struct kernel_backend *kb, const T *a, struct ss_error *e)            \
	{                                                                                     \
		int64_t t0 = now_ns(), best = INT64_MAX;                                      \
		int rc = __real_##name(kb, a, e);                                             \
                                                                                              \
		in_step_ns[kind] += (double)(now_ns() - t0);                                  \
		for (int r = 0; isolate && !rc && r < ISO_REPEATS; r++) {                     \
			int64_t s = now_ns(), d;                                              \
                                                                                              \
			rc = __real_##name(kb, a, e);                                         \
			d = now_ns() - s;                                                     \
			best = d < best ? d : best;                                           \
		}                                                                             \
		if (isolate)                                                                  \
			iso_ns[kind] += (double)best;                                         \
		return rc;                                                                    \
	}
WRAP(kernel_gemm, K_GEMM, struct kernel_gemm_args)
WRAP(kernel_rmsnorm, K_NORM, struct kernel_rmsnorm_args)
WRAP(kernel_rope, K_ROPE, struct kernel_rope_args)
WRAP(kernel_act, K_ACT, struct kernel_act_args)
WRAP(kernel_kv_write, K_KVW, struct kernel_kv_write_args)
WRAP(kernel_attn_prefill, K_PF, struct kernel_attn_prefill_args)
WRAP(kernel_attn_decode, K_DEC, struct kernel_attn_decode_args)
WRAP(kernel_gather, K_GATH, struct kernel_gather_args)
WRAP(kernel_argmax, K_ARGMAX, struct kernel_argmax_args)

static double sum(const double *v)
{
	double s = 0;

	for (int k = 0; k < K_N; k++)
		s += v[k];
	return s;
}

int main(void)
{
	static const int shapes[][3] = {   /* decodes, their KV length, one prefill chunk */
		{ 1, 64, 0 }, { 16, 64, 0 }, { 64, 64, 0 }, { 0, 0, 64 }, { 0, 0, 256 },
		{ 16, 64, 128 },
	};
	static int32_t table[4096];
	struct kernel_backend_config kc = { .threads = 1, .module_dir = SERVESIM_BUILD_MODULE_DIR };
	struct synth_shape sh = { .layers = 16, .hidden = 2048, .heads = 32, .kv_heads = 8,
				  .head_dim = 64, .intermediate = 8192, .vocab = 128256,
				  .gated = true };
	struct kernel_backend *kb = NULL;
	struct synth_model *sm = NULL;
	struct ss_error err = { 0 };
	struct timespec settle = { 0, 200000000 };   /* OpenBLAS's workers spin ~0.1 s at load */

	if (getenv("SERVESIM_MODULE_DIR"))
		kc.module_dir = getenv("SERVESIM_MODULE_DIR");
	if (kernel_backend_new(&kb, "cpu", &kc, &err) || synth_shape_scale(&sh, 16, 2, &err) ||
	    synth_model_new(&sm, kb, &sh, 4096, 16, 1, &err)) {
		fprintf(stderr, "bench-step-ops: %s\n", err.msg);
		return 1;
	}
	for (int i = 0; i < 4096; i++)
		table[i] = i;
	nanosleep(&settle, NULL);
	printf("step (decodes x KV + chunk)   wall us  in-step us  isolated us  wall/isolated\n");
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
		struct synth_item it[65];
		double best_wall = 1e30, best_in = 0, kin[K_N] = { 0 }, kiso[K_N] = { 0 }, best_iso = 1e30;
		int n = 0;

		for (int d = 0; d < shapes[c][0]; d++)
			it[n++] = (struct synth_item){ .tokens = 1, .context = shapes[c][1] - 1,
				.block_table = table + d * 17, .n_blocks = 17, .emit = true };
		if (shapes[c][2])
			it[n++] = (struct synth_item){ .tokens = shapes[c][2], .context = 0,
				.block_table = table + 2048, .n_blocks = 64, .emit = true };
		for (int r = 0; r < REPEATS; r++) {
			int64_t t0;
			double wall;

			memset(in_step_ns, 0, sizeof(in_step_ns));
			isolate = 0;
			t0 = now_ns();
			if (synth_model_step(sm, it, n, NULL, &err))
				goto fail;
			wall = (double)(now_ns() - t0);
			if (wall < best_wall) {
				best_wall = wall;
				best_in = sum(in_step_ns);
				memcpy(kin, in_step_ns, sizeof(kin));
			}
		}
		for (int r = 0; r < 3; r++) {
			memset(in_step_ns, 0, sizeof(in_step_ns));
			memset(iso_ns, 0, sizeof(iso_ns));
			isolate = 1;
			if (synth_model_step(sm, it, n, NULL, &err))
				goto fail;
			if (sum(iso_ns) < best_iso) {
				best_iso = sum(iso_ns);
				memcpy(kiso, iso_ns, sizeof(kiso));
			}
		}
		printf("%3d x %-4d + %-4d            %8.0f  %10.0f  %11.0f  %13.2f\n", shapes[c][0],
		       shapes[c][1], shapes[c][2], best_wall * 1e-3, best_in * 1e-3, best_iso * 1e-3,
		       best_wall / best_iso);
		printf("   in-step / isolated:");
		for (int k = 0; k < K_N; k++)
			if (kiso[k] > 0)
				printf(" %s %.2f", kind_name[k], kin[k] / kiso[k]);
		printf("\n");
	}
	synth_model_free(sm);
	kernel_backend_free(kb);
	return 0;
fail:
	fprintf(stderr, "bench-step-ops: %s\n", err.msg);
	return 1;
}
