/* servesim — kernel backend registry, instances, argument checks and the
 * shared defaults of optional methods (docs/kernels.md). */
#include "backend.h"

#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "kernels-int.h"

/* Static registry of the backends built into every binary, looked up by
 * name.  Only the reference: it needs nothing but libc and libm. */
static const struct kernel_backend_ops *const registry[] = {
	&kernel_ref_ops,
};

#define N_REGISTRY (sizeof(registry) / sizeof(registry[0]))

/* Backends that live in loadable modules.  kernel_backend_new dlopens the
 * module only when the backend is asked for, so a process that never runs
 * it never maps its libraries, whose start-up a simulation must not pay:
 * the CUDA runtime and cuBLAS cost about 0.2 s and 200 MB, OpenBLAS (with
 * libgfortran and its thread pool) and the OpenMP runtime about 9 ms, more
 * than half of a simulation's start-up.  A module is looked up in
 * cfg->module_dir, then in the installed SERVESIM_MODULEDIR
 * (libdir/servesim); it exports its ops table under `symbol`. */
struct backend_module {
	const char *name;           /* backend name */
	const char *file;           /* module file name */
	const char *symbol;         /* its const struct kernel_backend_ops */
	const char *description;    /* one line for listings, which load no module */
	const char *built_when;     /* why it may be missing, for the error */
};

static const struct backend_module modules[] = {
	{ "cpu", "servesim-cpu.so", "kernel_cpu_ops",
	  "CPU: fp32, OpenBLAS GEMM, OpenMP kernels",
	  "it is built with servesim, from kernels/cpu/; reinstall servesim or run it from its build directory" },
	{ "cuda", "servesim-cuda.so", "kernel_cuda_ops",
	  "CUDA: bf16, cuBLAS GEMM, servesim's attention kernels",
	  "it is built when meson finds the CUDA toolkit; -Dcuda=enabled requires it" },
};

#define N_MODULES (sizeof(modules) / sizeof(modules[0]))

size_t kernel_dtype_size(enum kernel_dtype dtype)
{
	switch (dtype) {
	case KERNEL_DTYPE_F32:
		return 4;
	case KERNEL_DTYPE_BF16:
		return 2;
	case KERNEL_DTYPE_FP8_E4M3:
		return 1;
	}
	return 0;
}

const char *kernel_dtype_name(enum kernel_dtype dtype)
{
	switch (dtype) {
	case KERNEL_DTYPE_F32:
		return "f32";
	case KERNEL_DTYPE_BF16:
		return "bf16";
	case KERNEL_DTYPE_FP8_E4M3:
		return "fp8_e4m3";
	}
	return "?";
}

size_t kernel_kv_cache_elems(const struct kernel_kv_cache *c)
{
	return (size_t)c->layers * (size_t)c->num_blocks * (size_t)c->block_size *
	       (size_t)c->kv_heads * (size_t)c->head_dim;
}

const struct kernel_backend_ops *kernel_backend_find(const char *name)
{
	for (size_t i = 0; i < N_REGISTRY; i++)
		if (strcmp(registry[i]->name, name) == 0)
			return registry[i];
	return NULL;
}

const struct kernel_backend_ops *const *kernel_backend_registry(size_t *n)
{
	*n = N_REGISTRY;
	return registry;
}

size_t kernel_backend_list(struct kernel_backend_info *info, size_t cap)
{
	for (size_t i = 0; i < N_REGISTRY + N_MODULES && i < cap; i++) {
		if (i < N_REGISTRY) {
			info[i] = (struct kernel_backend_info){
				.name = registry[i]->name, .description = registry[i]->description,
			};
		} else {
			const struct backend_module *m = &modules[i - N_REGISTRY];

			info[i] = (struct kernel_backend_info){
				.name = m->name, .description = m->description, .module = m->file,
			};
		}
	}
	return N_REGISTRY + N_MODULES;
}

/* Where mod's file is: path (len bytes), looked for in dir, then in
 * SERVESIM_MODULEDIR; -ENODEV naming the directories tried. */
static int module_find(const struct backend_module *mod, const char *dir, char *path, size_t len,
		       struct ss_error *err)
{
	const char *dirs[2] = { dir && *dir ? dir : NULL, SERVESIM_MODULEDIR };
	char tried[2 * 4096 + 8] = "";

	for (size_t i = 0; i < 2; i++) {
		size_t used = strlen(tried);
		int w;

		if (!dirs[i])
			continue;
		w = snprintf(path, len, "%s/%s", dirs[i], mod->file);
		if (w >= 0 && (size_t)w < len && access(path, F_OK) == 0)
			return 0;
		snprintf(tried + used, sizeof(tried) - used, "%s%s", used ? ", " : "", dirs[i]);
	}
	if (len)
		path[0] = '\0';
	return ss_error_set(err, -ENODEV, NULL, 0,
			    "kernel backend \"%s\" is not installed: no %s in %s (%s)", mod->name,
			    mod->file, tried, mod->built_when);
}

int kernel_backend_module_path(const char *name, const char *module_dir, char *path, size_t len,
			       struct ss_error *err)
{
	for (size_t i = 0; i < N_MODULES; i++)
		if (strcmp(modules[i].name, name) == 0)
			return module_find(&modules[i], module_dir, path, len, err);
	return ss_error_set(err, -ENOENT, NULL, 0, "kernel backend \"%s\" is not a module", name);
}

/* Load the module of backend mod: *handle and *ops, or an error naming the
 * paths tried and dlerror()'s message.  RTLD_NODELETE: a GPU runtime is not
 * safe to unmap while the process lives (its exit handlers point into it),
 * nor are OpenBLAS's and OpenMP's threads, so dlclose only drops our
 * reference. */
static int module_load(const struct backend_module *mod, const char *dir, void **handle,
		       const struct kernel_backend_ops **ops, struct ss_error *err)
{
	char path[4096];
	void *h;
	int rc;

	*handle = NULL;
	*ops = NULL;
	rc = module_find(mod, dir, path, sizeof(path), err);
	if (rc)
		return rc;
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		const char *why = dlerror();

		return ss_error_set(err, -ENODEV, NULL, 0, "kernel backend \"%s\": cannot load %s: %s",
				    mod->name, path, why ? why : "unknown dlopen error");
	}
	dlerror();
	*ops = dlsym(h, mod->symbol);
	if (!*ops) {
		const char *why = dlerror();

		dlclose(h);
		return ss_error_set(err, -ENODEV, NULL, 0,
				    "kernel backend \"%s\": %s has no %s: %s", mod->name, path,
				    mod->symbol, why ? why : "NULL symbol");
	}
	*handle = h;
	return 0;
}

int kernel_backend_new(struct kernel_backend **out, const char *name,
		       const struct kernel_backend_config *cfg, struct ss_error *err)
{
	const struct kernel_backend_ops *ops = kernel_backend_find(name);
	struct kernel_backend *kb = NULL;
	void *module = NULL;
	int rc;

	*out = NULL;
	for (size_t i = 0; !ops && i < N_MODULES; i++) {
		if (strcmp(modules[i].name, name) != 0)
			continue;
		rc = module_load(&modules[i], cfg ? cfg->module_dir : NULL, &module, &ops, err);
		if (rc)
			return rc;
	}
	if (!ops) {
		char known[256] = "";

		for (size_t i = 0; i < N_REGISTRY + N_MODULES; i++) {
			size_t used = strlen(known);

			snprintf(known + used, sizeof(known) - used, "%s%s", used ? ", " : "",
				 i < N_REGISTRY ? registry[i]->name : modules[i - N_REGISTRY].name);
		}
		return ss_error_set(err, -ENOENT, NULL, 0,
				    "unknown kernel backend \"%s\" (known: %s)", name, known);
	}
	/* A module from another build may carry an older table: refuse it
	 * rather than call past its end. */
	if (ops->version < KERNEL_BACKEND_VERSION || strcmp(ops->name, name) != 0) {
		rc = ss_error_set(err, -ENOTSUP, NULL, 0,
				  "kernel backend \"%s\": ops table version %d (\"%s\"), expected >= %d",
				  name, ops->version, ops->name ? ops->name : "?",
				  KERNEL_BACKEND_VERSION);
		goto fail;
	}
	kb = calloc(1, sizeof(*kb));
	if (!kb) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto fail;
	}
	kb->ops = ops;
	kb->module = module;
	module = NULL;
	if (cfg)
		kb->cfg = *cfg;
	kb->cfg.module_dir = NULL;   /* (transfer none): not kept past this call */
	if (kb->cfg.threads <= 0)
		kb->cfg.threads = 1;
	if (ops->priv_size) {
		kb->priv = calloc(1, ops->priv_size);
		if (!kb->priv) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto fail;
		}
	}
	rc = ops->init(kb->priv, &kb->cfg, err);
	if (rc)
		goto fail;
	*out = kb;
	return 0;
fail:
	if (kb) {
		module = kb->module;
		free(kb->priv);
		free(kb);
	}
	if (module)
		dlclose(module);
	return rc;
}

void kernel_backend_free(struct kernel_backend *kb)
{
	if (!kb)
		return;
	if (kb->ops->release)
		kb->ops->release(kb->priv);
	free(kb->priv);
	if (kb->module)
		dlclose(kb->module);
	free(kb);
}

enum kernel_dtype kernel_backend_dtype(const struct kernel_backend *kb)
{
	return kb->ops->dtype;
}

size_t kernel_backend_elem_size(const struct kernel_backend *kb)
{
	return kernel_dtype_size(kb->ops->dtype);
}

enum kernel_dtype kernel_kv_cache_dtype(const struct kernel_backend *kb,
					const struct kernel_kv_cache *c)
{
	return c->dtype ? c->dtype : kb->ops->dtype;
}

int kernel_kv_dtype_check(const struct kernel_backend *kb, enum kernel_dtype dtype,
			  struct ss_error *err)
{
	/* kv_fp8 is a version-3 member: an older table has none */
	bool fp8 = kb->ops->version >= 3 && kb->ops->kv_fp8;

	if (dtype == 0 || dtype == kb->ops->dtype || (dtype == KERNEL_DTYPE_FP8_E4M3 && fp8))
		return 0;
	return ss_error_set(err, -ENOTSUP, NULL, 0,
			    "kernel backend \"%s\" cannot hold a %s KV cache (it stores %s%s)",
			    kb->ops->name, kernel_dtype_name(dtype),
			    kernel_dtype_name(kb->ops->dtype), fp8 ? " or fp8_e4m3" : "");
}

void kernel_backend_device_name(struct kernel_backend *kb, char *buf, size_t len)
{
	if (!len)
		return;
	if (kb->ops->device_name)
		kb->ops->device_name(kb->priv, buf, len);
	else
		snprintf(buf, len, "%s", kb->ops->name);
}

bool kernel_backend_pci_bus_id(struct kernel_backend *kb, char *buf, size_t len)
{
	if (!len)
		return false;
	buf[0] = 0;
	return kb->ops->device_pci_bus_id && kb->ops->device_pci_bus_id(kb->priv, buf, len);
}

int kernel_backend_sync(struct kernel_backend *kb, struct ss_error *err)
{
	return kb->ops->sync ? kb->ops->sync(kb->priv, err) : 0;
}

/* ---- graphs ---- */

bool kernel_backend_has_graphs(const struct kernel_backend *kb)
{
	const struct kernel_backend_ops *o = kb->ops;

	return o->graph_begin && o->graph_end && o->graph_launch && o->graph_free;
}

static int no_graphs(const struct kernel_backend *kb, struct ss_error *err)
{
	return ss_error_set(err, -ENOTSUP, NULL, 0,
			    "kernel backend \"%s\" has no graphs (CUDA graphs are a GPU backend's)",
			    kb->ops->name);
}

int kernel_graph_begin(struct kernel_backend *kb, struct ss_error *err)
{
	return kernel_backend_has_graphs(kb) ? kb->ops->graph_begin(kb->priv, err)
					     : no_graphs(kb, err);
}

int kernel_graph_end(struct kernel_backend *kb, void **graph, struct ss_error *err)
{
	*graph = NULL;
	return kernel_backend_has_graphs(kb) ? kb->ops->graph_end(kb->priv, graph, err)
					     : no_graphs(kb, err);
}

int kernel_graph_launch(struct kernel_backend *kb, void *graph, struct ss_error *err)
{
	if (!kernel_backend_has_graphs(kb))
		return no_graphs(kb, err);
	if (!graph)
		return ss_error_set(err, -EINVAL, NULL, 0, "graph_launch: no graph");
	return kb->ops->graph_launch(kb->priv, graph, err);
}

void kernel_graph_free(struct kernel_backend *kb, void *graph)
{
	if (graph && kernel_backend_has_graphs(kb))
		kb->ops->graph_free(kb->priv, graph);
}

/* ---- memory ---- */

int kernel_buf_alloc(struct kernel_backend *kb, void **buf, size_t bytes, enum kernel_mem mem,
		     struct ss_error *err)
{
	*buf = NULL;
	if (!bytes)
		return ss_error_set(err, -EINVAL, NULL, 0, "kernel buffer of 0 bytes");
	return kb->ops->alloc(kb->priv, buf, bytes, mem, err);
}

void kernel_buf_free(struct kernel_backend *kb, void *buf)
{
	if (buf)
		kb->ops->free(kb->priv, buf);
}

int kernel_buf_upload(struct kernel_backend *kb, void *dst, size_t off, const void *src,
		      size_t bytes, struct ss_error *err)
{
	if (!bytes)
		return 0;
	return kb->ops->upload(kb->priv, dst, off, src, bytes, err);
}

int kernel_buf_download(struct kernel_backend *kb, void *dst, const void *src, size_t off,
			size_t bytes, struct ss_error *err)
{
	if (!bytes)
		return 0;
	return kb->ops->download(kb->priv, dst, src, off, bytes, err);
}

int kernel_buf_upload_f32(struct kernel_backend *kb, void *dst, size_t off, const float *src,
			  size_t n, struct ss_error *err)
{
	if (!n)
		return 0;
	if (kb->ops->upload_f32)
		return kb->ops->upload_f32(kb->priv, dst, off, src, n, err);
	assert(kb->ops->dtype == KERNEL_DTYPE_F32);
	return kb->ops->upload(kb->priv, dst, off * sizeof(float), src, n * sizeof(float), err);
}

int kernel_buf_download_f32(struct kernel_backend *kb, float *dst, const void *src, size_t off,
			    size_t n, struct ss_error *err)
{
	if (!n)
		return 0;
	if (kb->ops->download_f32)
		return kb->ops->download_f32(kb->priv, dst, src, off, n, err);
	assert(kb->ops->dtype == KERNEL_DTYPE_F32);
	return kb->ops->download(kb->priv, dst, src, off * sizeof(float), n * sizeof(float), err);
}

static int kv_geometry_ok(const struct kernel_kv_cache *c, const char *op, struct ss_error *err)
{
	if (!c || c->layers < 1 || c->num_blocks < 1 || c->block_size < 1 ||
	    c->block_size > KERNEL_MAX_BLOCK_SIZE || c->kv_heads < 1 || c->head_dim < 1 ||
	    c->head_dim > KERNEL_MAX_HEAD_DIM)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s: bad KV cache geometry (layers %d, blocks %d, block size %d "
				    "(1..%d), kv heads %d, head dim %d (1..%d))", op,
				    c ? c->layers : 0, c ? c->num_blocks : 0, c ? c->block_size : 0,
				    KERNEL_MAX_BLOCK_SIZE, c ? c->kv_heads : 0, c ? c->head_dim : 0,
				    KERNEL_MAX_HEAD_DIM);
	return 0;
}

int kernel_kv_cache_alloc(struct kernel_backend *kb, struct kernel_kv_cache *c,
			  enum kernel_mem mem, struct ss_error *err)
{
	size_t bytes;
	int rc;

	c->k = c->v = NULL;
	rc = kv_geometry_ok(c, "KV cache", err);
	if (!rc)
		rc = kernel_kv_dtype_check(kb, c->dtype, err);
	if (rc)
		return rc;
	bytes = kernel_kv_cache_elems(c) * kernel_dtype_size(kernel_kv_cache_dtype(kb, c));
	rc = kernel_buf_alloc(kb, &c->k, bytes, mem, err);
	if (!rc)
		rc = kernel_buf_alloc(kb, &c->v, bytes, mem, err);
	if (rc)
		kernel_kv_cache_free(kb, c);
	return rc;
}

void kernel_kv_cache_free(struct kernel_backend *kb, struct kernel_kv_cache *c)
{
	if (!c)
		return;
	kernel_buf_free(kb, c->k);
	kernel_buf_free(kb, c->v);
	c->k = c->v = NULL;
}

/* ---- timing ---- */

int kernel_timer_begin(struct kernel_backend *kb, struct kernel_timer *t, struct ss_error *err)
{
	int rc;

	if (kb->ops->timer_begin)
		return kb->ops->timer_begin(kb->priv, t, err);
	rc = kernel_backend_sync(kb, err);
	t->event = NULL;
	t->start_ns = kernel_monotonic_ns();
	return rc;
}

int kernel_timer_end(struct kernel_backend *kb, struct kernel_timer *t, int64_t *elapsed_ns,
		     struct ss_error *err)
{
	int rc;

	if (kb->ops->timer_end)
		return kb->ops->timer_end(kb->priv, t, elapsed_ns, err);
	rc = kernel_backend_sync(kb, err);
	*elapsed_ns = kernel_monotonic_ns() - t->start_ns;
	if (*elapsed_ns < 0)
		*elapsed_ns = 0;
	return rc;
}

/* ---- argument checks ---- */

static int bad(struct ss_error *err, const char *op, const char *what)
{
	return ss_error_set(err, -EINVAL, NULL, 0, "%s: %s", op, what);
}

/* A view of rows x cols needs a buffer and a row stride of at least cols
 * (rows > 1 only). */
static bool view_ok(const struct kernel_view *v, int rows, long cols)
{
	return v->buf && (rows <= 1 || v->ld >= (size_t)cols);
}

int kernel_gemm(struct kernel_backend *kb, const struct kernel_gemm_args *a, struct ss_error *err)
{
	static const char op[] = "gemm";

	if (a->m < 1 || a->n < 1 || a->k < 1)
		return bad(err, op, "m, n and k must be >= 1");
	if (!view_ok(&a->x, a->m, a->k) || !view_ok(&a->w, a->n, a->k) ||
	    !view_ok(&a->y, a->m, a->n))
		return bad(err, op, "x, w and y need buffers and row strides >= their widths");
	return kb->ops->gemm(kb->priv, a, err);
}

int kernel_rmsnorm(struct kernel_backend *kb, const struct kernel_rmsnorm_args *a,
		   struct ss_error *err)
{
	static const char op[] = "rmsnorm";

	if (a->rows < 1 || a->cols < 1 || !(a->eps > 0))
		return bad(err, op, "rows and cols must be >= 1 and eps > 0");
	if (!view_ok(&a->x, a->rows, a->cols) || !a->weight.buf ||
	    !view_ok(&a->out, a->rows, a->cols))
		return bad(err, op, "x, weight and out need buffers and row strides >= cols");
	return kb->ops->rmsnorm(kb->priv, a, err);
}

int kernel_rope(struct kernel_backend *kb, const struct kernel_rope_args *a, struct ss_error *err)
{
	static const char op[] = "rope";

	if (a->tokens < 1 || a->heads < 0 || a->kv_heads < 0 || a->heads + a->kv_heads < 1)
		return bad(err, op, "tokens must be >= 1 and heads + kv_heads >= 1");
	if (a->head_dim < 2 || a->head_dim % 2 || a->head_dim > KERNEL_MAX_HEAD_DIM ||
	    !(a->theta > 1))
		return bad(err, op, "head_dim must be even, 2..256, and theta > 1");
	if ((a->heads && !view_ok(&a->q, a->tokens, (long)a->heads * a->head_dim)) ||
	    (a->kv_heads && !view_ok(&a->k, a->tokens, (long)a->kv_heads * a->head_dim)) ||
	    !a->pos.buf)
		return bad(err, op, "q, k and pos need buffers and row strides >= their widths");
	return kb->ops->rope(kb->priv, a, err);
}

int kernel_act(struct kernel_backend *kb, const struct kernel_act_args *a, struct ss_error *err)
{
	static const char op[] = "act";
	long in_w;

	if (a->act != KERNEL_ACT_SILU_MUL && a->act != KERNEL_ACT_RELU)
		return bad(err, op, "unknown activation");
	if (a->tokens < 1 || a->width < 1)
		return bad(err, op, "tokens and width must be >= 1");
	in_w = a->act == KERNEL_ACT_SILU_MUL ? 2L * a->width : a->width;
	if (!view_ok(&a->in, a->tokens, in_w) || !view_ok(&a->out, a->tokens, a->width))
		return bad(err, op, "in and out need buffers and row strides >= their widths");
	return kb->ops->act(kb->priv, a, err);
}

int kernel_kv_write(struct kernel_backend *kb, const struct kernel_kv_write_args *a,
		    struct ss_error *err)
{
	static const char op[] = "kv_write";
	int rc = kv_geometry_ok(a->cache, op, err);
	long w;

	if (!rc)
		rc = kernel_kv_dtype_check(kb, a->cache->dtype, err);
	if (rc)
		return rc;
	w = (long)a->cache->kv_heads * a->cache->head_dim;
	if (a->tokens < 1 || a->layer < 0 || a->layer >= a->cache->layers)
		return bad(err, op, "tokens must be >= 1 and layer within the cache");
	if (!view_ok(&a->k, a->tokens, w) || !view_ok(&a->v, a->tokens, w) || !a->slots.buf ||
	    !a->cache->k || !a->cache->v)
		return bad(err, op, "k, v, slots and the cache need buffers; strides >= kv width");
	return kb->ops->kv_write(kb->priv, a, err);
}

int kernel_rope_kv_write(struct kernel_backend *kb, const struct kernel_rope_kv_write_args *a,
			 struct ss_error *err)
{
	static const char op[] = "rope_kv_write";
	int rc = kv_geometry_ok(a->cache, op, err);
	long w;

	if (!rc)
		rc = kernel_kv_dtype_check(kb, a->cache->dtype, err);
	if (rc)
		return rc;
	w = (long)a->cache->kv_heads * a->cache->head_dim;
	if (a->tokens < 1 || a->heads < 0 || a->layer < 0 || a->layer >= a->cache->layers)
		return bad(err, op, "tokens must be >= 1, heads >= 0 and layer within the cache");
	if (a->cache->head_dim % 2 || !(a->theta > 1))
		return bad(err, op, "the cache's head_dim must be even and theta > 1");
	if ((a->heads && !view_ok(&a->q, a->tokens, (long)a->heads * a->cache->head_dim)) ||
	    !view_ok(&a->k, a->tokens, w) || !view_ok(&a->v, a->tokens, w) || !a->pos.buf ||
	    !a->slots.buf || !a->cache->k || !a->cache->v)
		return bad(err, op, "q, k, v, pos, slots and the cache need buffers; strides >= "
			   "their widths");
	return kb->ops->rope_kv_write(kb->priv, a, err);
}

static int attn_common(const struct kernel_backend *kb, const char *op, int n_seqs, int heads,
		       int layer, int max_kv_len, float scale, const struct kernel_view *q,
		       const struct kernel_view *out, int q_rows, const struct kernel_view *bt,
		       const struct kernel_kv_cache *c, struct ss_error *err)
{
	int rc = kv_geometry_ok(c, op, err);
	long w;

	if (!rc)
		rc = kernel_kv_dtype_check(kb, c->dtype, err);
	if (rc)
		return rc;
	if (n_seqs < 1 || heads < 1 || heads % c->kv_heads)
		return bad(err, op, "n_seqs must be >= 1 and heads a multiple of kv_heads");
	if (layer < 0 || layer >= c->layers || max_kv_len < 1 || !(scale > 0))
		return bad(err, op, "layer within the cache, max_kv_len >= 1 and scale > 0");
	if ((long)max_kv_len > (long)c->num_blocks * c->block_size)
		return bad(err, op, "max_kv_len exceeds the cache");
	w = (long)heads * c->head_dim;
	if (!view_ok(q, q_rows, w) || !view_ok(out, q_rows, w) || !c->k || !c->v)
		return bad(err, op, "q, out and the cache need buffers; strides >= heads x head_dim");
	if (!bt->buf || (n_seqs > 1 &&
			 bt->ld < (size_t)((max_kv_len + c->block_size - 1) / c->block_size)))
		return bad(err, op, "block_tables needs a buffer and a row per sequence "
			   "covering max_kv_len");
	return 0;
}

int kernel_attn_prefill(struct kernel_backend *kb, const struct kernel_attn_prefill_args *a,
			struct ss_error *err)
{
	static const char op[] = "attn_prefill";
	int rc = attn_common(kb, op, a->n_seqs, a->heads, a->layer, a->max_kv_len, a->scale, &a->q,
			     &a->out, a->tokens, &a->block_tables, a->cache, err);

	if (rc)
		return rc;
	if (a->tokens < 1 || a->max_q_len < 1 || a->max_q_len > a->max_kv_len)
		return bad(err, op, "tokens >= 1 and 1 <= max_q_len <= max_kv_len");
	if (!a->q_start.buf || !a->context.buf)
		return bad(err, op, "q_start and context need buffers");
	return kb->ops->attn_prefill(kb->priv, a, err);
}

int kernel_attn_decode(struct kernel_backend *kb, const struct kernel_attn_decode_args *a,
		       struct ss_error *err)
{
	static const char op[] = "attn_decode";
	int rc = attn_common(kb, op, a->n_seqs, a->heads, a->layer, a->max_kv_len, a->scale, &a->q,
			     &a->out, a->n_seqs, &a->block_tables, a->cache, err);

	if (rc)
		return rc;
	if (!a->kv_len.buf)
		return bad(err, op, "kv_len needs a buffer");
	return kb->ops->attn_decode(kb->priv, a, err);
}

int kernel_kv_copy(struct kernel_backend *kb, const struct kernel_kv_copy_args *a,
		   struct ss_error *err)
{
	static const char op[] = "kv_copy";
	int rc = kv_geometry_ok(a->src, op, err);

	if (!rc)
		rc = kv_geometry_ok(a->dst, op, err);
	if (!rc)
		rc = kernel_kv_dtype_check(kb, a->src->dtype, err);
	if (!rc)
		rc = kernel_kv_dtype_check(kb, a->dst->dtype, err);
	if (rc)
		return rc;
	if (a->src->layers != a->dst->layers || a->src->block_size != a->dst->block_size ||
	    a->src->kv_heads != a->dst->kv_heads || a->src->head_dim != a->dst->head_dim)
		return bad(err, op, "source and destination caches differ in geometry");
	if (kernel_kv_cache_dtype(kb, a->src) != kernel_kv_cache_dtype(kb, a->dst))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s: source and destination caches differ in dtype (%s, %s)",
				    op, kernel_dtype_name(kernel_kv_cache_dtype(kb, a->src)),
				    kernel_dtype_name(kernel_kv_cache_dtype(kb, a->dst)));
	if (a->n < 0 || (a->n > 0 && (!a->src_ids || !a->dst_ids)))
		return bad(err, op, "n must be >= 0 with n source and destination ids");
	for (int i = 0; i < a->n; i++)
		if (a->src_ids[i] < 0 || a->src_ids[i] >= a->src->num_blocks ||
		    a->dst_ids[i] < 0 || a->dst_ids[i] >= a->dst->num_blocks)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: pair %d (%d -> %d) outside the caches (%d, %d blocks)",
					    op, i, a->src_ids[i], a->dst_ids[i],
					    a->src->num_blocks, a->dst->num_blocks);
	if (!a->n)
		return 0;
	return kb->ops->kv_copy(kb->priv, a, err);
}

int kernel_gather(struct kernel_backend *kb, const struct kernel_gather_args *a,
		  struct ss_error *err)
{
	static const char op[] = "gather";

	if (a->rows < 1 || a->cols < 1 || a->src_rows < 1)
		return bad(err, op, "rows, cols and src_rows must be >= 1");
	if (!view_ok(&a->src, a->src_rows, a->cols) || !view_ok(&a->out, a->rows, a->cols) ||
	    !a->idx.buf)
		return bad(err, op, "src, idx and out need buffers and row strides >= cols");
	return kb->ops->gather(kb->priv, a, err);
}

int kernel_argmax(struct kernel_backend *kb, const struct kernel_argmax_args *a,
		  struct ss_error *err)
{
	static const char op[] = "argmax";

	if (a->rows < 1 || a->cols < 1)
		return bad(err, op, "rows and cols must be >= 1");
	if (!view_ok(&a->x, a->rows, a->cols) || !a->out.buf)
		return bad(err, op, "x and out need buffers; x's row stride >= cols");
	return kb->ops->argmax(kb->priv, a, err);
}

int kernel_fill_uniform(struct kernel_backend *kb, const struct kernel_fill_uniform_args *a,
			struct ss_error *err)
{
	static const char op[] = "fill_uniform";
	size_t es = kernel_backend_elem_size(kb);

	if (!a->x.buf)
		return bad(err, op, "x needs a buffer");
	/* The buffer's size is the backend's secret; what the framework can
	 * refuse is a range no buffer can have. */
	if (a->n < 1 || a->n > SIZE_MAX / es || a->x.off > SIZE_MAX / es - a->n)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s: %zu elements from element %zu is not a range of a buffer "
				    "(n >= 1, end within SIZE_MAX bytes)", op, a->n, a->x.off);
	if (!isfinite(a->scale) || !isfinite(a->bias))
		return bad(err, op, "scale and bias must be finite");
	return kb->ops->fill_uniform(kb->priv, a, err);
}

/* kernel_lora's shared default: per segment, the shrink tmp = x A^T and
 * the expand y += tmp B^T as two of the backend's own GEMMs on views (the
 * CPU's OpenBLAS sgemm, CUDA's cuBLAS).  Each segment reads its adapter's
 * A and B once; a slot serving several segments is read once per segment. */
static int lora_by_gemm(struct kernel_backend *kb, const struct kernel_lora_args *a,
			struct ss_error *err)
{
	int rc = 0;

	for (int s = 0; s < a->n_segs && !rc; s++) {
		int t0 = a->seg_start[s], m = a->seg_start[s + 1] - t0, r = a->seg_rank[s];
		size_t slot = (size_t)a->seg_slot[s];
		struct kernel_view x = a->x, tmp = a->tmp, y = a->y, A = a->a, B = a->b;

		if (a->seg_slot[s] < 0)
			continue;
		x.off += (size_t)t0 * x.ld;
		tmp.off += (size_t)t0 * tmp.ld;
		y.off += (size_t)t0 * y.ld;
		A.off += slot * a->a_slot;
		B.off += slot * a->b_slot;
		B.ld = (size_t)r;
		rc = kb->ops->gemm(kb->priv, &(struct kernel_gemm_args){
			.m = m, .n = r, .k = a->d_in, .x = x, .w = A, .y = tmp }, err);
		if (!rc)
			rc = kb->ops->gemm(kb->priv, &(struct kernel_gemm_args){
				.m = m, .n = a->d_out, .k = r, .x = tmp, .w = B, .y = y,
				.accumulate = true }, err);
	}
	return rc;
}

int kernel_lora(struct kernel_backend *kb, const struct kernel_lora_args *a, struct ss_error *err)
{
	static const char op[] = "lora";

	if (a->tokens < 1 || a->d_in < 1 || a->d_out < 1 || a->max_rank < 1 || a->n_slots < 1 ||
	    a->n_segs < 0)
		return bad(err, op, "tokens, d_in, d_out, max_rank and n_slots must be >= 1, n_segs >= 0");
	if (!view_ok(&a->x, a->tokens, a->d_in) || !view_ok(&a->y, a->tokens, a->d_out) ||
	    !view_ok(&a->tmp, a->tokens, a->max_rank) || !a->a.buf || !a->b.buf ||
	    a->a.ld < (size_t)a->d_in)
		return bad(err, op, "x, y, tmp and the slots need buffers and row strides >= their widths");
	if (a->n_slots > 1 && (a->a_slot < (size_t)a->max_rank * a->a.ld ||
			       a->b_slot < (size_t)a->d_out * (size_t)a->max_rank))
		return bad(err, op, "a slot's stride must hold max_rank rows of A and d_out x max_rank of B");
	if (a->n_segs == 0)
		return 0;
	if (!a->seg_start || !a->seg_slot || !a->seg_rank)
		return bad(err, op, "seg_start, seg_slot and seg_rank are required with segments");
	if (a->seg_start[0] < 0 || a->seg_start[a->n_segs] > a->tokens)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s: segments span rows %d .. %d, expected within 0 .. %d", op,
				    a->seg_start[0], a->seg_start[a->n_segs], a->tokens);
	for (int s = 0; s < a->n_segs; s++)
		if (a->seg_start[s + 1] <= a->seg_start[s] || a->seg_slot[s] < -1 ||
		    a->seg_slot[s] >= a->n_slots ||
		    (a->seg_slot[s] >= 0 && (a->seg_rank[s] < 1 || a->seg_rank[s] > a->max_rank)))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: segment %d (rows %d .. %d, slot %d, rank %d): expected "
					    "ascending starts, a slot of -1..%d and a rank of 1..%d", op, s,
					    a->seg_start[s], a->seg_start[s + 1] - 1, a->seg_slot[s],
					    a->seg_rank[s], a->n_slots - 1, a->max_rank);
	if (kb->ops->version >= 4 && kb->ops->lora)
		return kb->ops->lora(kb->priv, a, err);
	return lora_by_gemm(kb, a, err);
}
