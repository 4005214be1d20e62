/* servesim — the CUDA backend's host logic that depends on the device,
 * run through the CPU emulation with two devices of 2 SMs
 * (SERVESIM_CUDA_EMU_DEVICES=2, SERVESIM_CUDA_EMU_SMS=2).
 *
 * Device switching (cuda_enter): an instance on device 0 and one on device
 * 1 used in turn from one thread and from a second thread give the right
 * results, and cudaSetDevice is called only when the calling thread's
 * current device is not the instance's.
 * The emulation keeps the current device per thread (a thread starts on
 * device 0), fails work issued on a stream of a device that is not
 * current, as the runtime does, and counts cudaSetDevice calls
 * (emu_set_device_calls in its servesim-cuda.so).  So a backend that never
 * switches fails here on wrong results, one that switches on every call on
 * the count.
 *
 * Grids capped by the SM count: a fill_uniform of 150,000 elements is 2.3
 * rounds of its grid-stride loop on 2 SMs (16 blocks of 256 threads per
 * SM, 8 elements a thread), which on the 132 SMs the emulated devices
 * report otherwise takes 4.3 M elements and 540,000 emulated threads.
 *
 * Exit 77 (skipped) where the loaded module is not the emulation or finds
 * no second device. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define N 1000          /* elements per fill of the switching checks */
#define N_LONG 150000   /* the long fill: > 2 SMs x 16 blocks x 256 threads x 8 */

static struct kernel_backend *dev[2], *ref;
static unsigned long *set_calls;   /* the emulation's cudaSetDevice count */
static int failures;

static float bf16_round(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	u += 0x7fffu + ((u >> 16) & 1);
	u &= 0xffff0000u;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Fill n elements of a new buffer on kb with key, download, free: the
 * same values as the reference backend's fill rounded to bf16.  0 or -1. */
static int fill_and_check(struct kernel_backend *kb, uint64_t key, size_t n)
{
	struct kernel_fill_uniform_args a = { .n = n, .key = key, .scale = 0.75f, .bias = 0.25f };
	struct ss_error err = { 0 };
	float *got = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
	void *b = NULL, *rb = NULL;
	int rc = got && want ? 0 : -1;

	if (!rc)
		rc = kernel_buf_alloc(kb, &b, n * kernel_backend_elem_size(kb), KERNEL_MEM_DEVICE,
				      &err);
	a.x.buf = b;
	if (!rc)
		rc = kernel_fill_uniform(kb, &a, &err);
	if (!rc)
		rc = kernel_buf_download_f32(kb, got, b, 0, n, &err);
	kernel_buf_free(kb, b);
	if (!rc)
		rc = kernel_buf_alloc(ref, &rb, n * sizeof(float), KERNEL_MEM_DEVICE, &err);
	a.x.buf = rb;
	if (!rc)
		rc = kernel_fill_uniform(ref, &a, &err);
	if (!rc)
		rc = kernel_buf_download_f32(ref, want, rb, 0, n, &err);
	kernel_buf_free(ref, rb);
	if (rc)
		fprintf(stderr, "FAIL device %d: %s\n", kb->cfg.device, err.msg);
	for (size_t i = 0; i < n && !rc; i++)
		if (got[i] != bf16_round(want[i])) {
			fprintf(stderr, "FAIL device %d: element %zu of %zu is %g, expected %g\n",
				kb->cfg.device, i, n, got[i], bf16_round(want[i]));
			rc = -1;
		}
	free(got);
	free(want);
	return rc ? -1 : 0;
}

/* Work on instance d (its alloc, fill, download and free, each an entry
 * point), expecting `switches` cudaSetDevice calls. */
static void step(const char *where, int d, unsigned long switches)
{
	unsigned long before = *set_calls;

	if (fill_and_check(dev[d], 0x5eed0000ULL + (uint64_t)d, N) != 0) {
		failures++;
		return;
	}
	if (*set_calls - before != switches) {
		fprintf(stderr, "FAIL %s, device %d: %lu cudaSetDevice calls, expected %lu\n", where,
			d, *set_calls - before, switches);
		failures++;
	}
}

/* A second thread starts on device 0, whatever the first one set. */
static void *other_thread(void *arg)
{
	(void)arg;
	step("new thread", 1, 1);
	step("new thread", 1, 0);
	step("new thread", 0, 1);
	return NULL;
}

int main(void)
{
	const char *dir = getenv("SERVESIM_MODULE_DIR");
	struct ss_error err = { 0 };
	char path[4096];
	void *module;
	pthread_t th;
	int rc;

	setenv("SERVESIM_CUDA_EMU_DEVICES", "2", 0);
	setenv("SERVESIM_CUDA_EMU_SMS", "2", 0);
	for (int d = 0; d < 2; d++) {
		rc = kernel_backend_new(&dev[d], "cuda", &(struct kernel_backend_config){
			.device = d, .module_dir = dir }, &err);
		if (rc == -ENODEV) {
			fprintf(stderr, "%s: skipped\n", err.msg);
			return 77;
		}
		if (rc) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
	}
	if (kernel_backend_new(&ref, "ref", NULL, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/servesim-cuda.so", dir ? dir : ".");
	module = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	set_calls = module ? dlsym(module, "emu_set_device_calls") : NULL;
	if (!set_calls) {
		fprintf(stderr, "%s is not the CUDA emulation: skipped\n", path);
		return 77;
	}
	/* device 1's init made device 1 current on this thread */
	step("first use", 1, 0);
	step("switch", 0, 1);
	step("same device", 0, 0);
	step("switch back", 1, 1);
	if (pthread_create(&th, NULL, other_thread, NULL) != 0 || pthread_join(th, NULL) != 0) {
		fprintf(stderr, "pthread failed\n");
		return 1;
	}
	/* this thread's current device is still its own: 1 */
	step("after the other thread", 1, 0);
	/* a fill past one round of the grid */
	if (fill_and_check(dev[1], 0x10e6ULL, N_LONG) != 0)
		failures++;
	dlclose(module);
	kernel_backend_free(dev[0]);
	kernel_backend_free(dev[1]);
	kernel_backend_free(ref);
	printf("device switching and SM-capped grids: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
