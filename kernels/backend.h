/* servesim — kernel backends: the operators one transformer step is made of.
 *
 * One interface (a const ops table, struct kernel_backend_ops), several
 * implementations chosen at run time by name (docs/kernels.md):
 *
 *   "cpu"   fp32; GEMM through OpenBLAS, every other operator plain C with
 *           OpenMP loops over rows / heads; cfg->threads threads
 *           (kernels/cpu/, the loadable module servesim-cpu.so, so that
 *           only a process that asks for "cpu" maps OpenBLAS and OpenMP).
 *   "ref"   fp32; naive loops with double accumulation.  The conformance
 *           suite's reference: slow, never for timing.
 *   "cuda"  bf16 storage with fp32 accumulation (kernels/cuda/, built only
 *           when meson finds the CUDA toolkit, as the loadable module
 *           servesim-cuda.so: kernel_backend_new dlopens it when "cuda" is
 *           asked for, so no other run maps the CUDA libraries; where it is
 *           missing or fails to load, -ENODEV with the reason).
 *
 * Memory.  Every tensor lives in a backend buffer: an opaque handle (void *)
 * that only the backend allocates, frees and dereferences (host memory on the
 * CPU, device memory on a GPU).  Data crosses between the host and a buffer
 * only through the explicit upload/download calls.  A tensor argument is a
 * struct kernel_view: a buffer, an offset and a row stride, so an operator
 * can read Q, K and V out of one fused QKV row without pointer arithmetic on
 * a handle.  Offsets and strides count elements: elements of the backend's
 * dtype for activations, weights and the KV cache; int32 elements for
 * metadata (token ids, positions, slots, block tables, lengths), which also
 * lives in backend buffers so a GPU reads it where it runs.
 *
 * Element type.  The backend stores activations, weights and the KV cache in
 * one dtype (kernel_backend_dtype(): fp32 on the CPU, bf16 on CUDA) and
 * accumulates in at least fp32.  Callers stay generic by sizing buffers with
 * kernel_backend_elem_size() and moving numbers with the _f32 transfers,
 * which convert between host float and the storage dtype.  A KV cache may
 * instead hold fp8 E4M3 (struct kernel_kv_cache's dtype, on backends whose
 * ops table sets kv_fp8).
 *
 * Ordering.  Operators are issued in order on one stream; on a GPU they may
 * run asynchronously.  kernel_buf_download*, kernel_backend_sync and
 * kernel_timer_end wait for everything issued before them.  An operator's
 * return value reports bad arguments and launch failures; a failure while
 * running on a GPU is reported by the next call that waits.
 *
 * Timing.  kernel_timer_begin/_end bracket work on the backend's own
 * timeline: CLOCK_MONOTONIC on the CPU, CUDA events on a GPU.
 *
 * Paged KV cache (the simulator's KV block manager, sim/kvpool.h).  The
 * cache is cut into blocks of block_size tokens; a request owns a block
 * table, the int32 ids of its blocks in order, so token position p of a
 * request lives in block table[p / block_size] at offset p % block_size.
 * K and V are separate buffers, each laid out
 *     [layers][num_blocks][block_size][kv_heads][head_dim]
 * (vLLM's "NHD" flash layout, one slab per layer).  A token's slot is
 * block_id * block_size + offset; kv_write scatters new tokens to their
 * slots, attention reads through the block tables.
 *
 * Grouped-query attention: query head h uses KV head h / (heads / kv_heads)
 * (Hugging Face's repeat_kv order).  RoPE is the neox (rotate-half) form.
 *
 * Every call returns 0 or a negative errno and fills err (may be NULL).
 * Backends never print and never exit; a CUDA failure becomes -EIO carrying
 * CUDA's message.  One instance is used by one thread at a time.
 */
#ifndef SS_KERNELS_BACKEND_H
#define SS_KERNELS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ss-error.h"

#define KERNEL_BACKEND_VERSION 4   /* 2: device_pci_bus_id; 3: rope_kv_write, fill_uniform,
				    * graph_*, kv_fp8; 4: lora */

/* Limits every backend supports (the CPU attention keeps a per-thread
 * accumulator of KERNEL_MAX_HEAD_DIM floats per head on the stack). */
#define KERNEL_MAX_HEAD_DIM 256     /* elements per head */
#define KERNEL_MAX_BLOCK_SIZE 1024  /* tokens per KV block */

enum kernel_dtype {
	KERNEL_DTYPE_F32 = 0,       /* IEEE binary32, 4 bytes */
	KERNEL_DTYPE_BF16 = 1,      /* bfloat16 (8-bit exponent, 8-bit significand), 2 bytes */
	KERNEL_DTYPE_FP8_E4M3 = 2,  /* OCP fp8 E4M3 (E4M3FN: no infinities, max 448), 1 byte;
				     * KV caches only (struct kernel_kv_cache) */
};

/* Bytes per element of dtype. */
size_t kernel_dtype_size(enum kernel_dtype dtype);
/* "f32", "bf16", "fp8_e4m3". */
const char *kernel_dtype_name(enum kernel_dtype dtype);

/* fp8 E4M3 <-> fp32, the one conversion every backend's fp8 KV cache uses
 * (docs/kernels.md, "fp8 KV cache").  From fp32: round to nearest, ties to
 * even, subnormals kept (down to 2^-9), magnitudes of 448 and above
 * (infinities included) saturate to +-448 -- CUDA's __nv_cvt_float_to_fp8
 * with __NV_SATFINITE, the cast vLLM's fp8 cache writes with -- NaN becomes
 * 0x7f with x's sign, and -0 stays -0 (0x80).  To fp32: exact. */
uint8_t kernel_fp8_e4m3_from_f32(float x);
float kernel_fp8_e4m3_to_f32(uint8_t b);

/* Where kernel_buf_alloc places a buffer. */
enum kernel_mem {
	KERNEL_MEM_DEVICE = 0,      /* where the operators run (host memory on the CPU) */
	KERNEL_MEM_HOST = 1,        /* host memory the device copies to and from
				     * quickly (pinned on CUDA): swap space for
				     * kernel_kv_copy */
};

struct kernel_backend_config {
	int threads;                /* CPU threads for OpenMP and OpenBLAS; 0 = 1 */
	int device;                 /* GPU ordinal; ignored by host backends */
	/* Directory searched first for backend modules (servesim-cpu.so,
	 * servesim-cuda.so);
	 * NULL: only the installed one, SERVESIM_MODULEDIR (libdir/servesim).
	 * The CLI passes its own executable's directory, where the build tree
	 * puts the modules.  (transfer none; read only by kernel_backend_new) */
	const char *module_dir;
};

/* A 2-D row-major view of a backend buffer: row r starts at element
 * off + r * ld.  For 1-D arguments ld is unused. */
struct kernel_view {
	void *buf;                  /* backend buffer (transfer none) */
	size_t off;                 /* first element, elements from the start of buf */
	size_t ld;                  /* row stride, elements (>= the row's width) */
};

/* A paged KV cache (layout above).  k and v each hold
 * layers * num_blocks * block_size * kv_heads * head_dim elements of the
 * cache's dtype: 0 (what a zeroed struct holds) or the backend's own dtype
 * for the backend's storage type, KERNEL_DTYPE_FP8_E4M3 for an fp8 cache
 * (backends whose ops table sets kv_fp8): K and V rounded to E4M3 when
 * written (kernel_fp8_e4m3_from_f32, per-tensor scales of 1.0: vLLM's
 * --kv-cache-dtype fp8 without a calibrated checkpoint) and read back
 * exactly by attention, which accumulates in fp32 as for any cache. */
struct kernel_kv_cache {
	void *k, *v;                /* backend buffers (transfer none) */
	int layers;                 /* >= 1 */
	int num_blocks;             /* blocks per layer, >= 1 */
	int block_size;             /* tokens per block, 1..KERNEL_MAX_BLOCK_SIZE */
	int kv_heads;               /* >= 1 */
	int head_dim;               /* 1..KERNEL_MAX_HEAD_DIM, even (RoPE) */
	enum kernel_dtype dtype;    /* 0 / the backend's dtype, or KERNEL_DTYPE_FP8_E4M3 */
};

/* Elements in each of k and v. */
size_t kernel_kv_cache_elems(const struct kernel_kv_cache *c);
/* True when c is an fp8 E4M3 cache (otherwise it holds the backend's dtype). */
static inline bool kernel_kv_cache_is_fp8(const struct kernel_kv_cache *c)
{
	return c->dtype == KERNEL_DTYPE_FP8_E4M3;
}

/* y[m, n] = x[m, k] . w[n, k]^T  (+ y when accumulate: the residual add). */
struct kernel_gemm_args {
	int m, n, k;                /* >= 1 */
	struct kernel_view x;       /* [m, k] */
	struct kernel_view w;       /* [n, k]: a weight stored out-features first */
	struct kernel_view y;       /* [m, n]; must not overlap x or w */
	bool accumulate;
};

/* out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight[:]; out may be x. */
struct kernel_rmsnorm_args {
	int rows, cols;             /* >= 1 */
	float eps;                  /* > 0, e.g. 1e-5 */
	struct kernel_view x;       /* [rows, cols] */
	struct kernel_view weight;  /* [cols] */
	struct kernel_view out;     /* [rows, cols] */
};

/* Neox RoPE in place: in each head, element i < d/2 and element i + d/2
 * rotate by angle pos * theta^(-2i/d), d = head_dim. */
struct kernel_rope_args {
	int tokens;                 /* >= 1 */
	int heads, kv_heads;        /* heads of q and of k per token row, >= 0 */
	int head_dim;               /* even, <= KERNEL_MAX_HEAD_DIM */
	float theta;                /* base, e.g. 10000 (Llama 2) or 500000 (Llama 3) */
	struct kernel_view q;       /* [tokens, heads * head_dim] */
	struct kernel_view k;       /* [tokens, kv_heads * head_dim] */
	struct kernel_view pos;     /* int32 [tokens]: absolute position of each token, >= 0 */
};

enum kernel_act {
	KERNEL_ACT_SILU_MUL = 0,    /* out = silu(in[:, :w]) * in[:, w:2w] (SwiGLU; gate first) */
	KERNEL_ACT_RELU = 1,        /* out = max(in[:, :w], 0) (plain MLP, OPT) */
};

struct kernel_act_args {
	enum kernel_act act;
	int tokens, width;          /* >= 1; width = w, the output width */
	struct kernel_view in;      /* [tokens, 2w] for SILU_MUL, [tokens, w] for RELU */
	struct kernel_view out;     /* [tokens, w]; may be in for RELU only */
};

/* Write new tokens' K and V into their cache slots (vLLM's
 * reshape_and_cache).  Token t goes to slot slots[t] = block * block_size +
 * offset of layer `layer`; a negative slot skips the token (padding). */
struct kernel_kv_write_args {
	int tokens;                 /* >= 1 */
	int layer;
	struct kernel_view k;       /* [tokens, kv_heads * head_dim] */
	struct kernel_view v;       /* [tokens, kv_heads * head_dim] */
	struct kernel_view slots;   /* int32 [tokens], < num_blocks * block_size */
	const struct kernel_kv_cache *cache;
};

/* RoPE then the KV write in one operator (what vLLM, SGLang and
 * TensorRT-LLM fuse): q and k rotated in place exactly as kernel_rope does
 * (neox, position pos[t]), then token t's rotated k row and its v row
 * written to slot slots[t] of layer `layer` exactly as kernel_kv_write does;
 * a negative slot skips the token's cache write (its q and k are still
 * rotated).  kv_heads and head_dim are the cache's (head_dim even). */
struct kernel_rope_kv_write_args {
	int tokens;                 /* >= 1 */
	int heads;                  /* query heads per q row, >= 0 */
	int layer;
	float theta;                /* RoPE base, > 1 */
	struct kernel_view q;       /* [tokens, heads * head_dim], rotated in place */
	struct kernel_view k;       /* [tokens, kv_heads * head_dim], rotated in place */
	struct kernel_view v;       /* [tokens, kv_heads * head_dim] */
	struct kernel_view pos;     /* int32 [tokens], >= 0 */
	struct kernel_view slots;   /* int32 [tokens], < num_blocks * block_size */
	const struct kernel_kv_cache *cache;
};

/* Causal attention of prefill chunks over their cached context.
 * Sequence s owns query rows q_start[s] .. q_start[s+1]-1 (its chunk); query
 * i of the chunk sits at absolute position context[s] + i and attends to the
 * positions 0 .. context[s] + i of its request, read from the cache through
 * its block table row: the cached prefix and itself causally.  The chunk's
 * own K/V must already be in the cache (kv_write first). */
struct kernel_attn_prefill_args {
	int n_seqs;                 /* >= 1 */
	int tokens;                 /* q_start[n_seqs] (host copy, for launch sizing) */
	int heads;                  /* query heads, a multiple of cache->kv_heads */
	int layer;
	int max_q_len;              /* >= every chunk length (host copy) */
	int max_kv_len;             /* >= every context + chunk length (host copy) */
	float scale;                /* softmax scale, usually 1 / sqrt(head_dim) */
	struct kernel_view q;       /* [tokens, heads * head_dim] */
	struct kernel_view out;     /* [tokens, heads * head_dim]; must not overlap q */
	struct kernel_view q_start; /* int32 [n_seqs + 1], q_start[0] = 0, nondecreasing */
	struct kernel_view context; /* int32 [n_seqs]: tokens cached before the chunk */
	struct kernel_view block_tables; /* int32 [n_seqs, ld]: block ids, in order */
	const struct kernel_kv_cache *cache;
};

/* Paged decode attention: one query row per sequence, attending to the
 * first kv_len[s] positions of its request (its new token included). */
struct kernel_attn_decode_args {
	int n_seqs;                 /* >= 1 */
	int heads;                  /* query heads, a multiple of cache->kv_heads */
	int layer;
	int max_kv_len;             /* >= every kv_len (host copy) */
	float scale;
	struct kernel_view q;       /* [n_seqs, heads * head_dim] */
	struct kernel_view out;     /* [n_seqs, heads * head_dim]; must not overlap q */
	struct kernel_view kv_len;  /* int32 [n_seqs], >= 1 */
	struct kernel_view block_tables; /* int32 [n_seqs, ld] */
	const struct kernel_kv_cache *cache;
};

/* Copy whole blocks (K and V, every layer) from src to dst: swap-out
 * (device -> host cache), swap-in (host -> device) or defragmentation
 * (src == dst).  src and dst agree on layers, block_size, kv_heads and
 * head_dim; their num_blocks may differ.  Block ids are host arrays (a swap
 * issues one copy per block); within one cache, no id may be both a source
 * and a destination. */
struct kernel_kv_copy_args {
	int n;                      /* blocks to copy, >= 0 */
	const int32_t *src_ids;     /* host [n], < src->num_blocks */
	const int32_t *dst_ids;     /* host [n], < dst->num_blocks */
	const struct kernel_kv_cache *src;
	const struct kernel_kv_cache *dst;
};

/* out[i, :] = src[idx[i], :]: embedding lookup, and picking the rows that
 * emit a token before the LM head. */
struct kernel_gather_args {
	int rows, cols;             /* rows of out, >= 1 */
	int src_rows;               /* rows of src; every idx < src_rows */
	struct kernel_view src;     /* [src_rows, cols] */
	struct kernel_view idx;     /* int32 [rows] */
	struct kernel_view out;     /* [rows, cols] */
};

/* out[r] = the first column holding the maximum of x[r, :] (greedy sampling). */
struct kernel_argmax_args {
	int rows, cols;             /* >= 1 */
	struct kernel_view x;       /* [rows, cols] */
	struct kernel_view out;     /* int32 [rows] */
};

/* x[i] = bias + scale * u(key, i) for i < n, elements x.off .. x.off + n - 1
 * of x.buf (x.ld unused), in the storage dtype (rounded to nearest even on a
 * bf16 backend): weights drawn where they live instead of uploaded.
 * u(key, i) = (splitmix64(key + i) >> 40) * 2^-23 - 1, uniform on [-1, 1)
 * in steps of 2^-23, exact in fp32; then scale * u and bias + that are each
 * one fp32 operation rounded to nearest (no fused multiply-add), so every
 * backend of one dtype gives the same bits, and the same bits as computing
 * it on the host and uploading (docs/kernels.md).  A pure function of
 * (key, i): a fill split in two (key, n1), (key + n1, n - n1) from off + n1
 * gives the same elements. */
struct kernel_fill_uniform_args {
	size_t n;                   /* elements, >= 1 */
	uint64_t key;               /* the draw's stream */
	float scale, bias;          /* finite */
	struct kernel_view x;       /* the first element written: x.buf + x.off */
};

/* Multi-LoRA, SGMV-style (Punica's segmented gather matrix-vector, as vLLM
 * and S-LoRA run it; docs/kernels.md, "LoRA"): the token rows of x and y
 * are cut into segments of consecutive rows that use one adapter, and for
 * every row t of segment s
 *     y[t, :] += (x[t, :] . A_s^T) . B_s^T
 * with A_s the adapter's [r_s, d_in] down-projection (PEFT's lora_A
 * weight; the "shrink" to the rank) and B_s its [d_out, r_s]
 * up-projection (lora_B; the "expand", added into the module's output).
 * Ranks differ between segments (heterogeneous ranks in one call); rows of
 * a segment of slot -1 (the base model alone) and rows after the last
 * segment are left as they are.  Adapters live
 * in slots of a slot buffer, each slot sized for the largest rank: slot i's
 * A is the r x d_in row-major matrix at a.off + i * a_slot (row stride
 * a.ld >= d_in), its B the d_out x r row-major matrix at b.off + i * b_slot,
 * row stride r (an adapter of rank r uses the first d_out * r elements of
 * its slot's B, so a slot is loaded with one contiguous copy per matrix).
 * Any scaling (alpha / r) is folded into B.  Segments are host arrays, as
 * the GEMMs are issued per segment from the host; one slot may serve
 * several segments (its rows need not be contiguous).  tmp holds the
 * shrink's [tokens, max_rank] result; it must not overlap x, y or the
 * slots.  The shared default (a backend's optional method) issues, per
 * segment, two of the backend's own GEMMs on views of x, tmp and y: on the
 * CPU OpenBLAS's sgemm, on CUDA cuBLAS. */
struct kernel_lora_args {
	int tokens;                 /* rows of x, y and tmp, >= 1 */
	int d_in, d_out;            /* >= 1 */
	int max_rank;               /* >= every r_s; tmp's width */
	int n_slots;                /* slots in the slot buffers, >= 1 */
	int n_segs;                 /* >= 0 (0: nothing to do) */
	const int32_t *seg_start;   /* host [n_segs + 1]: segment s is rows seg_start[s] ..
				     * seg_start[s + 1] - 1; strictly ascending from >= 0 to
				     * <= tokens */
	const int32_t *seg_slot;    /* host [n_segs]: the slot of segment s, < n_slots; -1:
				     * no adapter (skipped) */
	const int32_t *seg_rank;    /* host [n_segs]: its adapter's rank, 1..max_rank
				     * (unread for slot -1) */
	struct kernel_view x;       /* [tokens, d_in] */
	struct kernel_view a;       /* slot 0's A (see above; ld >= d_in) */
	size_t a_slot;              /* elements from one slot's A to the next's, >= max_rank * a.ld */
	struct kernel_view b;       /* slot 0's B (ld unused: r_s) */
	size_t b_slot;              /* elements from one slot's B to the next's, >= d_out * max_rank */
	struct kernel_view tmp;     /* [tokens, max_rank] scratch (ld >= max_rank) */
	struct kernel_view y;       /* [tokens, d_out], accumulated into */
};

/* Stamped by kernel_timer_begin, read by kernel_timer_end. */
struct kernel_timer {
	int64_t start_ns;           /* host backends: CLOCK_MONOTONIC at begin, ns */
	void *event;                /* GPU backends: their event pair (backend-owned) */
};

/* A backend.  Methods receive the instance's private state (priv_size
 * bytes, zeroed, allocated by the framework).  Methods marked optional may
 * be NULL and get the shared default named beside them.  The framework
 * checks arguments (shapes, strides, ranges of host values) before calling
 * an operator, so backends only check what lives in their buffers. */
struct kernel_backend_ops {
	int version;                /* KERNEL_BACKEND_VERSION */
	const char *name;
	const char *description;    /* one line, for listings */
	size_t priv_size;
	enum kernel_dtype dtype;    /* storage of activations, weights and KV */

	int (*init)(void *priv, const struct kernel_backend_config *cfg, struct ss_error *err);
	void (*release)(void *priv);                       /* optional: nothing */
	/* Optional (default: the backend's name): what runs the kernels, for
	 * calibration provenance, e.g. "CPU: AMD EPYC 9654, 2 threads, OpenBLAS
	 * 0.3.21 Haswell".  Fills buf (len bytes, NUL-terminated). */
	void (*device_name)(void *priv, char *buf, size_t len);

	/* Memory.  alloc returns a zero-filled buffer of bytes (> 0) bytes. */
	int (*alloc)(void *priv, void **buf, size_t bytes, enum kernel_mem mem,
		     struct ss_error *err);
	void (*free)(void *priv, void *buf);               /* buf may be NULL */
	/* Raw bytes, offsets in bytes.  upload returns once src may be
	 * reused; download returns once dst holds the data (it waits for the
	 * work issued before it). */
	int (*upload)(void *priv, void *dst, size_t off, const void *src, size_t bytes,
		      struct ss_error *err);
	int (*download)(void *priv, void *dst, const void *src, size_t off, size_t bytes,
			struct ss_error *err);
	/* Host float <-> storage dtype, offsets in elements.  Optional for
	 * fp32 backends (default: upload/download of n * 4 bytes). */
	int (*upload_f32)(void *priv, void *dst, size_t off, const float *src, size_t n,
			  struct ss_error *err);
	int (*download_f32)(void *priv, float *dst, const void *src, size_t off, size_t n,
			    struct ss_error *err);
	int (*sync)(void *priv, struct ss_error *err);     /* optional: nothing to wait for */

	/* Timing: optional (default: CLOCK_MONOTONIC after sync). */
	int (*timer_begin)(void *priv, struct kernel_timer *t, struct ss_error *err);
	int (*timer_end)(void *priv, struct kernel_timer *t, int64_t *elapsed_ns,
			 struct ss_error *err);

	/* Operators. */
	int (*gemm)(void *priv, const struct kernel_gemm_args *a, struct ss_error *err);
	int (*rmsnorm)(void *priv, const struct kernel_rmsnorm_args *a, struct ss_error *err);
	int (*rope)(void *priv, const struct kernel_rope_args *a, struct ss_error *err);
	int (*act)(void *priv, const struct kernel_act_args *a, struct ss_error *err);
	int (*kv_write)(void *priv, const struct kernel_kv_write_args *a, struct ss_error *err);
	int (*attn_prefill)(void *priv, const struct kernel_attn_prefill_args *a,
			    struct ss_error *err);
	int (*attn_decode)(void *priv, const struct kernel_attn_decode_args *a,
			   struct ss_error *err);
	int (*kv_copy)(void *priv, const struct kernel_kv_copy_args *a, struct ss_error *err);
	int (*gather)(void *priv, const struct kernel_gather_args *a, struct ss_error *err);
	int (*argmax)(void *priv, const struct kernel_argmax_args *a, struct ss_error *err);

	/* Optional (GPU backends): the PCI bus id of the device the kernels
	 * run on, "DDDD:BB:DD.F" as cudaDeviceGetPCIBusId writes it, so NVML
	 * meters that device and not its index 0 (CUDA and NVML number
	 * devices differently, and CUDA_VISIBLE_DEVICES renumbers CUDA's).
	 * Fills buf (len bytes); false where there is none. */
	bool (*device_pci_bus_id)(void *priv, char *buf, size_t len);

	/* Version 3. */
	int (*rope_kv_write)(void *priv, const struct kernel_rope_kv_write_args *a,
			     struct ss_error *err);
	int (*fill_uniform)(void *priv, const struct kernel_fill_uniform_args *a,
			    struct ss_error *err);

	/* Optional (GPU backends; host backends have none): graphs, a fixed
	 * sequence of operators recorded once and replayed in one launch (CUDA
	 * graphs).  graph_begin starts recording the instance's stream: the
	 * operators issued until graph_end are recorded, not run, with their
	 * arguments and buffers as they were (so a replay reads whatever those
	 * buffers hold then).  Calls that move data between the host and a
	 * buffer or wait (upload, download, the _f32 transfers, sync, alloc,
	 * free, timers) are not allowed while recording: they fail and spoil
	 * the recording, whose graph_end then fails too.  graph_end always
	 * ends the recording; on success *graph is a handle ready to launch.
	 * graph_launch enqueues a replay like an operator; graph_free (graph
	 * may be NULL) releases it.  Buffers a graph uses must outlive it. */
	int (*graph_begin)(void *priv, struct ss_error *err);
	int (*graph_end)(void *priv, void **graph, struct ss_error *err);
	int (*graph_launch)(void *priv, void *graph, struct ss_error *err);
	void (*graph_free)(void *priv, void *graph);

	/* The backend's kv_write, attention and kv_copy take fp8
	 * E4M3 caches (cache->dtype KERNEL_DTYPE_FP8_E4M3); false: the
	 * framework refuses them with -ENOTSUP. */
	bool kv_fp8;

	/* Version 4, optional (default: two of the backend's gemm per
	 * segment, struct kernel_lora_args). */
	int (*lora)(void *priv, const struct kernel_lora_args *a, struct ss_error *err);
};

/* The built-in backend (cpu and cuda are modules, see above). */
extern const struct kernel_backend_ops kernel_ref_ops;

/* The built-in backend called name, or NULL (unknown, or a module: "cpu",
 * "cuda"). */
const struct kernel_backend_ops *kernel_backend_find(const char *name);
/* Every backend built into this binary, "ref" (modules not included). */
const struct kernel_backend_ops *const *kernel_backend_registry(size_t *n);

/* One backend this build knows of, for listings. */
struct kernel_backend_info {
	const char *name;
	const char *description;    /* one line */
	const char *module;         /* its module's file name; NULL: built in */
};

/* Fill info[0 .. min(cap, total) - 1] with every backend, built in first,
 * then the modules (whether or not they are installed; nothing is loaded);
 * returns the total. */
size_t kernel_backend_list(struct kernel_backend_info *info, size_t cap);
/* Where kernel_backend_new would load module backend name from (module_dir
 * as in struct kernel_backend_config): 0 with path (len bytes) filled;
 * -ENODEV when it is in none of the directories, err naming them; -ENOENT
 * when name is not a module backend.  Loads nothing. */
int kernel_backend_module_path(const char *name, const char *module_dir, char *path, size_t len,
			       struct ss_error *err);

/* An instantiated backend. */
struct kernel_backend {
	const struct kernel_backend_ops *ops;
	void *priv;
	struct kernel_backend_config cfg;   /* module_dir is NULL here */
	void *module;               /* dlopen handle of the backend's module, or NULL */
};

/* Instantiate backend name with cfg (NULL: defaults), loading its module
 * first for a module backend.  -ENOENT for an unknown name, -ENODEV when
 * the module is missing or fails to load (dlerror()'s message) or the
 * backend finds no device, -ENOTSUP for a module with an older ops table;
 * err says which. */
int kernel_backend_new(struct kernel_backend **out, const char *name,
		       const struct kernel_backend_config *cfg, struct ss_error *err);
void kernel_backend_free(struct kernel_backend *kb);

enum kernel_dtype kernel_backend_dtype(const struct kernel_backend *kb);
size_t kernel_backend_elem_size(const struct kernel_backend *kb);
/* The element type of c on kb: c->dtype, with 0 meaning kb's dtype. */
enum kernel_dtype kernel_kv_cache_dtype(const struct kernel_backend *kb,
					const struct kernel_kv_cache *c);
/* 0 when kb can hold a KV cache of dtype (0, its own dtype, or fp8 E4M3
 * where its ops table sets kv_fp8); -ENOTSUP otherwise, err naming both. */
int kernel_kv_dtype_check(const struct kernel_backend *kb, enum kernel_dtype dtype,
			  struct ss_error *err);
void kernel_backend_device_name(struct kernel_backend *kb, char *buf, size_t len);
/* The device's PCI bus id (see device_pci_bus_id); false, buf "", for a
 * host backend. */
bool kernel_backend_pci_bus_id(struct kernel_backend *kb, char *buf, size_t len);
int kernel_backend_sync(struct kernel_backend *kb, struct ss_error *err);

/* Graphs (see graph_begin in struct kernel_backend_ops).  Whether the
 * backend has them; the calls are -ENOTSUP, naming the backend, where it
 * does not. */
bool kernel_backend_has_graphs(const struct kernel_backend *kb);
int kernel_graph_begin(struct kernel_backend *kb, struct ss_error *err);
int kernel_graph_end(struct kernel_backend *kb, void **graph, struct ss_error *err);
int kernel_graph_launch(struct kernel_backend *kb, void *graph, struct ss_error *err);
void kernel_graph_free(struct kernel_backend *kb, void *graph);

/* Buffers: see struct kernel_backend_ops for the semantics. */
int kernel_buf_alloc(struct kernel_backend *kb, void **buf, size_t bytes, enum kernel_mem mem,
		     struct ss_error *err);
void kernel_buf_free(struct kernel_backend *kb, void *buf);
int kernel_buf_upload(struct kernel_backend *kb, void *dst, size_t off, const void *src,
		      size_t bytes, struct ss_error *err);
int kernel_buf_download(struct kernel_backend *kb, void *dst, const void *src, size_t off,
			size_t bytes, struct ss_error *err);
int kernel_buf_upload_f32(struct kernel_backend *kb, void *dst, size_t off, const float *src,
			  size_t n, struct ss_error *err);
int kernel_buf_download_f32(struct kernel_backend *kb, float *dst, const void *src, size_t off,
			    size_t n, struct ss_error *err);

/* Allocate a KV cache's k and v buffers for the geometry and dtype already
 * set in c (zero-filled; elements of kernel_kv_cache_dtype's size; -ENOTSUP
 * for a dtype kb cannot hold); kernel_kv_cache_free releases them (c may be
 * unallocated). */
int kernel_kv_cache_alloc(struct kernel_backend *kb, struct kernel_kv_cache *c,
			  enum kernel_mem mem, struct ss_error *err);
void kernel_kv_cache_free(struct kernel_backend *kb, struct kernel_kv_cache *c);

int kernel_timer_begin(struct kernel_backend *kb, struct kernel_timer *t, struct ss_error *err);
/* Waits for the work issued since begin; *elapsed_ns >= 0. */
int kernel_timer_end(struct kernel_backend *kb, struct kernel_timer *t, int64_t *elapsed_ns,
		     struct ss_error *err);

/* Operators: check the arguments (-EINVAL naming the operator and the
 * argument), then run on the backend. */
int kernel_gemm(struct kernel_backend *kb, const struct kernel_gemm_args *a, struct ss_error *err);
int kernel_rmsnorm(struct kernel_backend *kb, const struct kernel_rmsnorm_args *a,
		   struct ss_error *err);
int kernel_rope(struct kernel_backend *kb, const struct kernel_rope_args *a, struct ss_error *err);
int kernel_act(struct kernel_backend *kb, const struct kernel_act_args *a, struct ss_error *err);
int kernel_kv_write(struct kernel_backend *kb, const struct kernel_kv_write_args *a,
		    struct ss_error *err);
int kernel_rope_kv_write(struct kernel_backend *kb, const struct kernel_rope_kv_write_args *a,
			 struct ss_error *err);
int kernel_attn_prefill(struct kernel_backend *kb, const struct kernel_attn_prefill_args *a,
			struct ss_error *err);
int kernel_attn_decode(struct kernel_backend *kb, const struct kernel_attn_decode_args *a,
		       struct ss_error *err);
int kernel_kv_copy(struct kernel_backend *kb, const struct kernel_kv_copy_args *a,
		   struct ss_error *err);
int kernel_gather(struct kernel_backend *kb, const struct kernel_gather_args *a,
		  struct ss_error *err);
int kernel_argmax(struct kernel_backend *kb, const struct kernel_argmax_args *a,
		  struct ss_error *err);

int kernel_fill_uniform(struct kernel_backend *kb, const struct kernel_fill_uniform_args *a,
			struct ss_error *err);
/* Checks the segments too (ascending, inside tokens, slots and ranks in
 * range): -EINVAL naming the first bad one. */
int kernel_lora(struct kernel_backend *kb, const struct kernel_lora_args *a, struct ss_error *err);

#endif
