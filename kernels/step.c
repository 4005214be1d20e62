/* servesim — the synthetic transformer step (step.h, docs/kernels.md). */
#include "step.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels-int.h"
#include "rng.h"

#define ROPE_THETA 10000.0f
#define NORM_EPS 1e-5f

/* Where each weight lives in the one weights buffer (element offsets). */
struct weight_map {
	size_t embed;           /* [vocab, hidden] */
	size_t layer0;          /* first layer's first weight */
	size_t layer_stride;    /* elements per layer */
	/* inside a layer: */
	size_t attn_norm;       /* [hidden] */
	size_t qkv;             /* [q_w + 2 kv_w, hidden] */
	size_t o;               /* [hidden, q_w] */
	size_t mlp_norm;        /* [hidden] */
	size_t up;              /* [up_w, hidden]: gate rows then up rows when gated */
	size_t down;            /* [hidden, intermediate] */
	size_t final_norm;      /* [hidden] */
	size_t lm_head;         /* [vocab, hidden] */
	size_t total;
};

/* Step workspace on the backend, grown geometrically. */
struct workspace {
	void *h, *xn, *qkv, *attn, *up, *act;   /* per token rows */
	int cap_tokens;
	void *hs, *logits, *sampled;            /* per emitted row */
	int cap_emit;
	void *meta;                             /* int32 step metadata */
	size_t cap_meta;                        /* int32 elements */
};

/* Offsets (int32 elements) of the step metadata inside ws.meta. */
struct meta_map {
	size_t ids, pos, slots;                 /* [tokens] each */
	size_t dec_len, dec_bt;                 /* [nd], [nd, maxb] */
	size_t pre_start, pre_ctx, pre_bt;      /* [np + 1], [np], [np, maxb] */
	size_t emit;                            /* [n_emit] */
	size_t total;
};

/* A captured decode-only step of `size` rows (docs/kernels.md, "Graphs"). */
struct step_graph {
	int size;
	void *exec;                             /* backend graph; NULL until captured */
};

struct synth_model {
	struct kernel_backend *kb;              /* (transfer none) */
	struct synth_shape shape;
	uint64_t seed;
	int q_w, kv_w, qkv_w, up_w;             /* row widths, elements */
	struct weight_map wm;
	void *weights;
	struct kernel_kv_cache kv;
	struct workspace ws;
	int32_t *host_meta;                     /* staging for ws.meta */
	size_t host_cap;                        /* int32 elements */
	int n_emit;                             /* rows emitted by the last step */
	/* Graphs: the captured sizes (ascending), the block table width they
	 * read, their own workspace (never reallocated, so a graph's buffers
	 * stay valid) and metadata layout, shared by every size. */
	struct step_graph *graphs;
	int n_graphs;
	int graph_blocks;
	struct workspace gws;
	struct meta_map gmm;
	bool last_graph;                        /* the last step ran a graph (outputs in gws) */
	uint64_t graph_steps;
	struct lora_state *lora;                /* multi-LoRA (synth_model_set_lora), NULL: off */
};

/* Multi-LoRA's adapted modules, in the order of a slot's layout. */
enum { LM_Q, LM_K, LM_V, LM_O, LORA_MODS };

/* Multi-LoRA: slots on the backend, the host store, a step's segments.
 * A slot holds, per layer and module m, A [max_rank, d_in] then B
 * [d_out, max_rank] (an adapter of rank r uses the first r rows of A and
 * d_out x r elements of B, struct kernel_lora_args); the store holds each
 * staged adapter the same way at its own rank, packed, so a load is two
 * contiguous copies per layer and module. */
struct lora_state {
	int slots, max_rank;
	int d_in[LORA_MODS], d_out[LORA_MODS];
	size_t mod_off[LORA_MODS];              /* module m's A within a layer's part of a slot */
	size_t layer_elems, slot_elems;         /* elements per layer of a slot, per slot */
	void *w;                                /* slots x slot_elems on the backend */
	int32_t *slot_adapter, *slot_rank;      /* per slot: its adapter (-1: empty) and rank */
	float **store;                          /* host store by adapter id (NULL: not staged) */
	int32_t *store_rank;
	size_t n_store;                         /* entries of store and store_rank */
	void *tmp;                              /* [cap_tmp, max_rank] shrink results */
	int cap_tmp;
	int32_t *seg_start, *seg_slot, *seg_rank; /* this step's segments (host) */
	int n_segs, cap_segs;
	int64_t ns;                             /* the last step's kernel_lora time, ns */
};

int synth_shape_check(const struct synth_shape *s, struct ss_error *err)
{
	const char *bad = NULL;

	if (s->layers < 1)
		bad = "layers must be >= 1";
	else if (s->hidden < 1 || s->intermediate < 1 || s->vocab < 1)
		bad = "hidden, intermediate and vocab must be >= 1";
	else if (s->heads < 1 || s->kv_heads < 1 || s->heads % s->kv_heads)
		bad = "heads and kv_heads must be >= 1 with kv_heads dividing heads";
	else if (s->head_dim < 2 || s->head_dim % 2 || s->head_dim > KERNEL_MAX_HEAD_DIM)
		bad = "head_dim must be even and 2..256";
	if (bad)
		return ss_error_set(err, -EINVAL, NULL, 0, "synthetic model shape: %s", bad);
	return 0;
}

static int round8(long x)
{
	return (int)((x + 7) / 8 * 8);
}

int synth_shape_scale(struct synth_shape *s, int width_div, int layers, struct ss_error *err)
{
	int rc = synth_shape_check(s, err), ratio;

	if (rc)
		return rc;
	if (width_div < 1 || layers < 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "synthetic model scaling: width divisor %d (>= 1) and layers %d "
				    "(>= 0)", width_div, layers);
	if (layers)
		s->layers = layers;
	if (width_div == 1)
		return 0;
	ratio = s->heads / s->kv_heads;
	s->kv_heads = s->kv_heads / width_div > 1 ? s->kv_heads / width_div : 1;
	s->heads = s->kv_heads * ratio;
	s->hidden = round8((s->hidden + width_div - 1) / width_div);
	s->intermediate = round8((s->intermediate + width_div - 1) / width_div);
	s->vocab = round8((s->vocab + width_div - 1) / width_div);
	if (s->vocab < 256)
		s->vocab = 256;
	return 0;
}

static void weight_map_init(struct weight_map *w, const struct synth_shape *s, int qkv_w,
			    int q_w, int up_w)
{
	size_t h = (size_t)s->hidden, at = 0;

	w->embed = 0;
	w->layer0 = (size_t)s->vocab * h;
	w->attn_norm = at;
	at += h;
	w->qkv = at;
	at += (size_t)qkv_w * h;
	w->o = at;
	at += h * (size_t)q_w;
	w->mlp_norm = at;
	at += h;
	w->up = at;
	at += (size_t)up_w * h;
	w->down = at;
	at += h * (size_t)s->intermediate;
	w->layer_stride = at;
	w->final_norm = w->layer0 + (size_t)s->layers * at;
	w->lm_head = w->final_norm + h;
	w->total = w->lm_head + (size_t)s->vocab * h;
}

size_t synth_shape_params(const struct synth_shape *s)
{
	struct weight_map w;
	int q_w = s->heads * s->head_dim, kv_w = s->kv_heads * s->head_dim;

	weight_map_init(&w, s, q_w + 2 * kv_w, q_w, s->gated ? 2 * s->intermediate : s->intermediate);
	return w.total;
}

/* Fill weights[off .. off+n) uniform in [bias - scale, bias + scale) on the
 * backend (kernel_fill_uniform): element i of the tensor is a pure function
 * of (seed, off, i), the draw the host made and uploaded before the
 * operator existed, so a seed gives the same weights as it always has. */
static int fill(struct synth_model *sm, size_t off, size_t n, float scale, float bias,
		struct ss_error *err)
{
	return kernel_fill_uniform(sm->kb, &(struct kernel_fill_uniform_args){
		.n = n, .key = ss_splitmix64(sm->seed ^ ss_splitmix64(off + 1)), .scale = scale,
		.bias = bias, .x = { .buf = sm->weights, .off = off } }, err);
}

/* Weights of variance 1/fan_in (uniform of half-width sqrt(3/fan_in)), so
 * activations stay O(1) through the layers; norm weights near 1.  One fill
 * per tensor, drawn on the backend: 6 per layer and 3 more, 195 calls for
 * Llama-3.1-8B, where the host's uploads of 64 Ki elements were ~123,000. */
static int init_weights(struct synth_model *sm, struct ss_error *err)
{
	const struct synth_shape *s = &sm->shape;
	const struct weight_map *w = &sm->wm;
	size_t h = (size_t)s->hidden;
	int rc;

	rc = fill(sm, w->embed, (size_t)s->vocab * h, 1.0f, 0, err);
	for (int l = 0; l < s->layers && !rc; l++) {
		size_t base = w->layer0 + (size_t)l * w->layer_stride;

		rc = fill(sm, base + w->attn_norm, h, 0.1f, 1.0f, err);
		if (!rc)
			rc = fill(sm, base + w->qkv, (size_t)sm->qkv_w * h, sqrtf(3.0f / s->hidden), 0,
				  err);
		if (!rc)
			rc = fill(sm, base + w->o, h * sm->q_w, sqrtf(3.0f / sm->q_w), 0, err);
		if (!rc)
			rc = fill(sm, base + w->mlp_norm, h, 0.1f, 1.0f, err);
		if (!rc)
			rc = fill(sm, base + w->up, (size_t)sm->up_w * h, sqrtf(3.0f / s->hidden), 0,
				  err);
		if (!rc)
			rc = fill(sm, base + w->down, h * s->intermediate,
				  sqrtf(3.0f / s->intermediate), 0, err);
	}
	if (!rc)
		rc = fill(sm, w->final_norm, h, 0.1f, 1.0f, err);
	if (!rc)
		rc = fill(sm, w->lm_head, (size_t)s->vocab * h, sqrtf(3.0f / s->hidden), 0, err);
	return rc;
}

int synth_model_new(struct synth_model **out, struct kernel_backend *kb,
		    const struct synth_shape *shape, int num_blocks, int block_size,
		    uint64_t seed, struct ss_error *err)
{
	struct synth_model *sm;
	int rc;

	*out = NULL;
	rc = synth_shape_check(shape, err);
	if (rc)
		return rc;
	if (num_blocks < 1 || block_size < 1 || block_size > KERNEL_MAX_BLOCK_SIZE)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "synthetic model: %d KV blocks (>= 1) of %d tokens (1..%d)",
				    num_blocks, block_size, KERNEL_MAX_BLOCK_SIZE);
	sm = calloc(1, sizeof(*sm));
	if (!sm)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	sm->kb = kb;
	sm->shape = *shape;
	sm->seed = seed;
	sm->q_w = shape->heads * shape->head_dim;
	sm->kv_w = shape->kv_heads * shape->head_dim;
	sm->qkv_w = sm->q_w + 2 * sm->kv_w;
	sm->up_w = shape->gated ? 2 * shape->intermediate : shape->intermediate;
	weight_map_init(&sm->wm, shape, sm->qkv_w, sm->q_w, sm->up_w);
	sm->kv = (struct kernel_kv_cache){
		.layers = shape->layers,
		.num_blocks = num_blocks,
		.block_size = block_size,
		.kv_heads = shape->kv_heads,
		.head_dim = shape->head_dim,
		.dtype = shape->kv_dtype,
	};
	rc = kernel_buf_alloc(kb, &sm->weights, sm->wm.total * kernel_backend_elem_size(kb),
			      KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = kernel_kv_cache_alloc(kb, &sm->kv, KERNEL_MEM_DEVICE, err);
	if (!rc)
		rc = init_weights(sm, err);
	if (rc) {
		synth_model_free(sm);
		return rc;
	}
	*out = sm;
	return 0;
}

static void ws_free_rows(struct synth_model *sm)
{
	struct workspace *ws = &sm->ws;
	void **bufs[] = { &ws->h, &ws->xn, &ws->qkv, &ws->attn, &ws->up, &ws->act };

	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) {
		kernel_buf_free(sm->kb, *bufs[i]);
		*bufs[i] = NULL;
	}
	ws->cap_tokens = 0;
}

static void ws_free_emit(struct synth_model *sm)
{
	struct workspace *ws = &sm->ws;

	kernel_buf_free(sm->kb, ws->hs);
	kernel_buf_free(sm->kb, ws->logits);
	kernel_buf_free(sm->kb, ws->sampled);
	ws->hs = ws->logits = ws->sampled = NULL;
	ws->cap_emit = 0;
}

static void graphs_free(struct synth_model *sm);
static void lora_free(struct synth_model *sm);

void synth_model_free(struct synth_model *sm)
{
	if (!sm)
		return;
	lora_free(sm);
	graphs_free(sm);
	ws_free_rows(sm);
	ws_free_emit(sm);
	kernel_buf_free(sm->kb, sm->ws.meta);
	kernel_kv_cache_free(sm->kb, &sm->kv);
	kernel_buf_free(sm->kb, sm->weights);
	free(sm->host_meta);
	free(sm);
}

/* Capacity for need, at least doubling the old one. */
static size_t grow(size_t old, size_t need)
{
	return need > 2 * old ? need : 2 * old;
}

static int ws_reserve(struct synth_model *sm, int tokens, int emit, size_t meta,
		      struct ss_error *err)
{
	struct workspace *ws = &sm->ws;
	size_t es = kernel_backend_elem_size(sm->kb);
	int rc = 0;

	if (tokens > ws->cap_tokens) {
		size_t cap = grow((size_t)ws->cap_tokens, (size_t)tokens);
		const int widths[] = { sm->shape.hidden, sm->shape.hidden, sm->qkv_w, sm->q_w,
				       sm->up_w, sm->shape.intermediate };
		void **bufs[] = { &ws->h, &ws->xn, &ws->qkv, &ws->attn, &ws->up, &ws->act };

		ws_free_rows(sm);
		for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]) && !rc; i++)
			rc = kernel_buf_alloc(sm->kb, bufs[i], cap * (size_t)widths[i] * es,
					      KERNEL_MEM_DEVICE, err);
		if (rc) {
			ws_free_rows(sm);
			return rc;
		}
		ws->cap_tokens = (int)cap;
	}
	if (emit > ws->cap_emit) {
		size_t cap = grow((size_t)ws->cap_emit, (size_t)emit);

		ws_free_emit(sm);
		rc = kernel_buf_alloc(sm->kb, &ws->hs, cap * sm->shape.hidden * es,
				      KERNEL_MEM_DEVICE, err);
		if (!rc)
			rc = kernel_buf_alloc(sm->kb, &ws->logits, cap * sm->shape.vocab * es,
					      KERNEL_MEM_DEVICE, err);
		if (!rc)
			rc = kernel_buf_alloc(sm->kb, &ws->sampled, cap * sizeof(int32_t),
					      KERNEL_MEM_DEVICE, err);
		if (rc) {
			ws_free_emit(sm);
			return rc;
		}
		ws->cap_emit = (int)cap;
	}
	if (meta > ws->cap_meta) {
		size_t cap = grow(ws->cap_meta, meta);

		/* the host staging serves both workspaces (graphs' too): never shrink it */
		if (cap > sm->host_cap) {
			int32_t *host = realloc(sm->host_meta, cap * sizeof(int32_t));

			if (!host)
				return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			sm->host_meta = host;
			sm->host_cap = cap;
		}
		kernel_buf_free(sm->kb, ws->meta);
		ws->meta = NULL;
		ws->cap_meta = 0;
		rc = kernel_buf_alloc(sm->kb, &ws->meta, cap * sizeof(int32_t), KERNEL_MEM_DEVICE,
				      err);
		if (rc)
			return rc;
		ws->cap_meta = cap;
	}
	return 0;
}

/* What a step holds, from validating its items. */
struct step_plan {
	int tokens, n_dec, n_pre, n_emit;
	int n_lora;           /* items through an adapter */
	int maxb;             /* block table row width: blocks of the longest request */
	int dec_max_kv;       /* longest decode KV length */
	int pre_max_kv, pre_max_q;
	struct meta_map mm;
};

static int plan_step(const struct synth_model *sm, const struct synth_item *items, int n,
		     struct step_plan *p, struct ss_error *err)
{
	const int bs = sm->kv.block_size;

	memset(p, 0, sizeof(*p));
	if (n < 1 || !items)
		return ss_error_set(err, -EINVAL, NULL, 0, "synthetic step: no items");
	for (int i = 0; i < n; i++) {
		const struct synth_item *it = &items[i];
		long kv_len = (long)it->context + it->tokens;
		long need = (kv_len + bs - 1) / bs;

		if (it->tokens < 1 || it->context < 0 || kv_len > INT32_MAX / 2)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "synthetic step: item %d has %d tokens after %d "
					    "(expected >= 1 after >= 0)", i, it->tokens, it->context);
		if (kv_len > (long)sm->kv.num_blocks * bs)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "synthetic step: item %d reaches position %ld, beyond the "
					    "cache's %d blocks of %d tokens", i, kv_len - 1,
					    sm->kv.num_blocks, bs);
		if (!it->block_table || it->n_blocks < need)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "synthetic step: item %d needs %ld blocks of %d tokens for "
					    "%ld positions, its block table has %d", i, need, bs,
					    kv_len, it->block_table ? it->n_blocks : 0);
		for (long b = 0; b < need; b++)
			if (it->block_table[b] < 0 || it->block_table[b] >= sm->kv.num_blocks)
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "synthetic step: item %d's block table entry %ld "
						    "is %d, outside the cache (%d blocks)", i, b,
						    it->block_table[b], sm->kv.num_blocks);
		if (it->token_ids)
			for (int t = 0; t < it->tokens; t++)
				if (it->token_ids[t] < 0 || it->token_ids[t] >= sm->shape.vocab)
					return ss_error_set(err, -EINVAL, NULL, 0,
							    "synthetic step: item %d's token %d "
							    "is %d, outside the vocabulary (%d)",
							    i, t, it->token_ids[t],
							    sm->shape.vocab);
		if (it->lora) {
			if (!sm->lora || it->lora_slot < 0 || it->lora_slot >= sm->lora->slots ||
			    sm->lora->slot_adapter[it->lora_slot] < 0)
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "synthetic step: item %d names adapter slot %d, "
						    "expected a loaded one of %d", i, it->lora_slot,
						    sm->lora ? sm->lora->slots : 0);
			p->n_lora++;
		}
		if (p->tokens > INT32_MAX / 2 - it->tokens)
			return ss_error_set(err, -EINVAL, NULL, 0, "synthetic step: too many tokens");
		p->tokens += it->tokens;
		if (it->emit_rows < 0 || it->emit_rows > it->tokens)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "synthetic step: item %d's emit_rows %d, expected 0..%d",
					    i, it->emit_rows, it->tokens);
		p->n_emit += it->emit ? (it->emit_rows > 1 ? it->emit_rows : 1) : 0;
		if (need > p->maxb)
			p->maxb = (int)need;
		if (it->tokens == 1) {
			p->n_dec++;
			if (kv_len > p->dec_max_kv)
				p->dec_max_kv = (int)kv_len;
		} else {
			p->n_pre++;
			if (kv_len > p->pre_max_kv)
				p->pre_max_kv = (int)kv_len;
			if (it->tokens > p->pre_max_q)
				p->pre_max_q = it->tokens;
		}
	}
	p->mm.ids = 0;
	p->mm.pos = p->mm.ids + p->tokens;
	p->mm.slots = p->mm.pos + p->tokens;
	p->mm.dec_len = p->mm.slots + p->tokens;
	p->mm.dec_bt = p->mm.dec_len + p->n_dec;
	p->mm.pre_start = p->mm.dec_bt + (size_t)p->n_dec * p->maxb;
	p->mm.pre_ctx = p->mm.pre_start + p->n_pre + 1;
	p->mm.pre_bt = p->mm.pre_ctx + p->n_pre;
	p->mm.emit = p->mm.pre_bt + (size_t)p->n_pre * p->maxb;
	p->mm.total = p->mm.emit + p->n_emit;
	return 0;
}

/* The synthetic input id at position pos. */
static int32_t token_at(const struct synth_model *sm, int64_t pos)
{
	return (int32_t)(ss_splitmix64(sm->seed ^ 0x746f6b656e73ULL ^ ss_splitmix64((uint64_t)pos)) %
			 (uint64_t)sm->shape.vocab);
}

static void copy_table(int32_t *dst, const struct synth_item *it, int need, int maxb)
{
	memcpy(dst, it->block_table, (size_t)need * sizeof(int32_t));
	for (int b = need; b < maxb; b++)
		dst[b] = 0;     /* never read: past the request's length */
}

/* Host metadata: decode rows first (item order), then prefill chunks. */
static void fill_meta(struct synth_model *sm, const struct synth_item *items, int n,
		      const struct step_plan *p)
{
	const struct meta_map *mm = &p->mm;
	const int bs = sm->kv.block_size;
	int32_t *m = sm->host_meta;
	int dec = 0, pre = 0, pre_row = p->n_dec, emit = 0;

	for (int i = 0; i < n; i++) {
		const struct synth_item *it = &items[i];
		int kv_len = it->context + it->tokens, need = (kv_len + bs - 1) / bs;
		int row;

		if (it->tokens == 1) {
			row = dec;
			m[mm->dec_len + dec] = kv_len;
			copy_table(m + mm->dec_bt + (size_t)dec * p->maxb, it, need, p->maxb);
			dec++;
		} else {
			row = pre_row;
			m[mm->pre_start + pre] = pre_row - p->n_dec;
			m[mm->pre_ctx + pre] = it->context;
			copy_table(m + mm->pre_bt + (size_t)pre * p->maxb, it, need, p->maxb);
			pre_row += it->tokens;
			pre++;
		}
		for (int t = 0; t < it->tokens; t++) {
			int pos = it->context + t;

			m[mm->ids + row + t] = it->token_ids ? it->token_ids[t] : token_at(sm, pos);
			m[mm->pos + row + t] = pos;
			m[mm->slots + row + t] = it->block_table[pos / bs] * bs + pos % bs;
		}
		if (it->emit)
			for (int e = it->emit_rows > 1 ? it->emit_rows : 1; e >= 1; e--)
				m[mm->emit + emit++] = row + it->tokens - e;
	}
	m[mm->pre_start + p->n_pre] = pre_row - p->n_dec;
}

static struct kernel_view wview(const struct synth_model *sm, size_t off, int ld)
{
	return (struct kernel_view){ .buf = sm->weights, .off = off, .ld = (size_t)ld };
}

static struct kernel_view mview(const struct synth_model *sm, size_t off, int ld)
{
	return (struct kernel_view){ .buf = sm->ws.meta, .off = off, .ld = (size_t)ld };
}

static struct kernel_view aview(void *buf, size_t row, int ld)
{
	return (struct kernel_view){ .buf = buf, .off = row * (size_t)ld, .ld = (size_t)ld };
}

/* y += the adapters' x A^T B^T for module m of layer l over the step's
 * segments (kernel_lora), timed into lora->ns. */
static int lora_apply(struct synth_model *sm, int l, int m, int T, struct kernel_view x,
		      struct kernel_view y, struct ss_error *err)
{
	struct lora_state *ls = sm->lora;
	size_t off = (size_t)l * ls->layer_elems + ls->mod_off[m];
	struct kernel_timer t;
	struct ss_error terr;
	int64_t ns = 0;
	int rc, trc;

	rc = kernel_timer_begin(sm->kb, &t, err);
	if (rc)
		return rc;
	rc = kernel_lora(sm->kb, &(struct kernel_lora_args){
		.tokens = T, .d_in = ls->d_in[m], .d_out = ls->d_out[m], .max_rank = ls->max_rank,
		.n_slots = ls->slots, .n_segs = ls->n_segs, .seg_start = ls->seg_start,
		.seg_slot = ls->seg_slot, .seg_rank = ls->seg_rank,
		.x = x, .a = { .buf = ls->w, .off = off, .ld = (size_t)ls->d_in[m] },
		.a_slot = ls->slot_elems,
		.b = { .buf = ls->w, .off = off + (size_t)ls->max_rank * ls->d_in[m] },
		.b_slot = ls->slot_elems,
		.tmp = { .buf = ls->tmp, .ld = (size_t)ls->max_rank }, .y = y }, err);
	trc = kernel_timer_end(sm->kb, &t, &ns, rc ? &terr : err);
	if (!rc)
		rc = trc;
	ls->ns += ns;
	return rc;
}

static int run_layer(struct synth_model *sm, int l, const struct step_plan *p,
		     struct ss_error *err)
{
	struct kernel_backend *kb = sm->kb;
	const struct synth_shape *s = &sm->shape;
	const struct weight_map *w = &sm->wm;
	const struct workspace *ws = &sm->ws;
	const struct meta_map *mm = &p->mm;
	size_t base = w->layer0 + (size_t)l * w->layer_stride;
	const int T = p->tokens, H = s->hidden;
	const float scale = 1.0f / sqrtf((float)s->head_dim);
	struct kernel_view q = aview(ws->qkv, 0, sm->qkv_w);
	struct kernel_view k = q, v = q;
	int rc;

	k.off = (size_t)sm->q_w;
	v.off = (size_t)(sm->q_w + sm->kv_w);
	rc = kernel_rmsnorm(kb, &(struct kernel_rmsnorm_args){
		.rows = T, .cols = H, .eps = NORM_EPS, .x = aview(ws->h, 0, H),
		.weight = wview(sm, base + w->attn_norm, H), .out = aview(ws->xn, 0, H) }, err);
	if (!rc)
		rc = kernel_gemm(kb, &(struct kernel_gemm_args){
			.m = T, .n = sm->qkv_w, .k = H, .x = aview(ws->xn, 0, H),
			.w = wview(sm, base + w->qkv, H), .y = q }, err);
	/* the adapters' q, k and v, each into its columns of the fused row */
	if (!rc && p->n_lora)
		rc = lora_apply(sm, l, LM_Q, T, aview(ws->xn, 0, H), q, err);
	if (!rc && p->n_lora)
		rc = lora_apply(sm, l, LM_K, T, aview(ws->xn, 0, H), k, err);
	if (!rc && p->n_lora)
		rc = lora_apply(sm, l, LM_V, T, aview(ws->xn, 0, H), v, err);
	if (!rc)   /* RoPE and the KV write, one pass (rope then kv_write) */
		rc = kernel_rope_kv_write(kb, &(struct kernel_rope_kv_write_args){
			.tokens = T, .heads = s->heads, .layer = l, .theta = ROPE_THETA, .q = q,
			.k = k, .v = v, .pos = mview(sm, mm->pos, 0),
			.slots = mview(sm, mm->slots, 0), .cache = &sm->kv }, err);
	if (!rc && p->n_dec)
		rc = kernel_attn_decode(kb, &(struct kernel_attn_decode_args){
			.n_seqs = p->n_dec, .heads = s->heads, .layer = l,
			.max_kv_len = p->dec_max_kv, .scale = scale, .q = q,
			.out = aview(ws->attn, 0, sm->q_w), .kv_len = mview(sm, mm->dec_len, 0),
			.block_tables = mview(sm, mm->dec_bt, p->maxb), .cache = &sm->kv }, err);
	if (!rc && p->n_pre) {
		struct kernel_view pq = q;

		pq.off += (size_t)p->n_dec * sm->qkv_w;
		rc = kernel_attn_prefill(kb, &(struct kernel_attn_prefill_args){
			.n_seqs = p->n_pre, .tokens = T - p->n_dec, .heads = s->heads, .layer = l,
			.max_q_len = p->pre_max_q, .max_kv_len = p->pre_max_kv, .scale = scale,
			.q = pq, .out = aview(ws->attn, (size_t)p->n_dec, sm->q_w),
			.q_start = mview(sm, mm->pre_start, 0),
			.context = mview(sm, mm->pre_ctx, 0),
			.block_tables = mview(sm, mm->pre_bt, p->maxb), .cache = &sm->kv }, err);
	}
	if (!rc)
		rc = kernel_gemm(kb, &(struct kernel_gemm_args){
			.m = T, .n = H, .k = sm->q_w, .x = aview(ws->attn, 0, sm->q_w),
			.w = wview(sm, base + w->o, sm->q_w), .y = aview(ws->h, 0, H),
			.accumulate = true }, err);
	if (!rc && p->n_lora)   /* o's adapter, into the residual as o's own output */
		rc = lora_apply(sm, l, LM_O, T, aview(ws->attn, 0, sm->q_w), aview(ws->h, 0, H), err);
	if (!rc)
		rc = kernel_rmsnorm(kb, &(struct kernel_rmsnorm_args){
			.rows = T, .cols = H, .eps = NORM_EPS, .x = aview(ws->h, 0, H),
			.weight = wview(sm, base + w->mlp_norm, H), .out = aview(ws->xn, 0, H) },
			err);
	if (!rc)
		rc = kernel_gemm(kb, &(struct kernel_gemm_args){
			.m = T, .n = sm->up_w, .k = H, .x = aview(ws->xn, 0, H),
			.w = wview(sm, base + w->up, H), .y = aview(ws->up, 0, sm->up_w) }, err);
	if (!rc)
		rc = kernel_act(kb, &(struct kernel_act_args){
			.act = s->gated ? KERNEL_ACT_SILU_MUL : KERNEL_ACT_RELU, .tokens = T,
			.width = s->intermediate, .in = aview(ws->up, 0, sm->up_w),
			.out = aview(ws->act, 0, s->intermediate) }, err);
	if (!rc)
		rc = kernel_gemm(kb, &(struct kernel_gemm_args){
			.m = T, .n = H, .k = s->intermediate,
			.x = aview(ws->act, 0, s->intermediate),
			.w = wview(sm, base + w->down, s->intermediate), .y = aview(ws->h, 0, H),
			.accumulate = true }, err);
	return rc;
}

static int run_head(struct synth_model *sm, const struct step_plan *p, struct ss_error *err)
{
	struct kernel_backend *kb = sm->kb;
	const struct workspace *ws = &sm->ws;
	const int H = sm->shape.hidden, V = sm->shape.vocab, E = p->n_emit;
	int rc;

	rc = kernel_gather(kb, &(struct kernel_gather_args){
		.rows = E, .cols = H, .src_rows = p->tokens, .src = aview(ws->h, 0, H),
		.idx = mview(sm, p->mm.emit, 0), .out = aview(ws->hs, 0, H) }, err);
	if (!rc)
		rc = kernel_rmsnorm(kb, &(struct kernel_rmsnorm_args){
			.rows = E, .cols = H, .eps = NORM_EPS, .x = aview(ws->hs, 0, H),
			.weight = wview(sm, sm->wm.final_norm, H), .out = aview(ws->hs, 0, H) },
			err);
	if (!rc)
		rc = kernel_gemm(kb, &(struct kernel_gemm_args){
			.m = E, .n = V, .k = H, .x = aview(ws->hs, 0, H),
			.w = wview(sm, sm->wm.lm_head, H), .y = aview(ws->logits, 0, V) }, err);
	if (!rc)
		rc = kernel_argmax(kb, &(struct kernel_argmax_args){
			.rows = E, .cols = V, .x = aview(ws->logits, 0, V),
			.out = aview(ws->sampled, 0, 1) }, err);
	return rc;
}

/* Every operator of a step whose metadata is in place: embedding, layers,
 * head. */
static int run_body(struct synth_model *sm, const struct step_plan *p, struct ss_error *err)
{
	int rc;

	rc = kernel_gather(sm->kb, &(struct kernel_gather_args){
		.rows = p->tokens, .cols = sm->shape.hidden, .src_rows = sm->shape.vocab,
		.src = wview(sm, sm->wm.embed, sm->shape.hidden),
		.idx = mview(sm, p->mm.ids, 0),
		.out = aview(sm->ws.h, 0, sm->shape.hidden) }, err);
	for (int l = 0; l < sm->shape.layers && !rc; l++)
		rc = run_layer(sm, l, p, err);
	if (!rc && p->n_emit)
		rc = run_head(sm, p, err);
	return rc;
}

/* ---- graphs ---- */

/* The operators read sm->ws; a graph step swaps the graphs' workspace in
 * and back (run_layer and run_head stay the eager code, operator for
 * operator). */
static void swap_ws(struct synth_model *sm)
{
	struct workspace t = sm->ws;

	sm->ws = sm->gws;
	sm->gws = t;
}

static void graphs_free(struct synth_model *sm)
{
	for (int i = 0; i < sm->n_graphs; i++)
		kernel_graph_free(sm->kb, sm->graphs[i].exec);
	free(sm->graphs);
	sm->graphs = NULL;
	sm->n_graphs = 0;
	sm->graph_blocks = 0;
	swap_ws(sm);
	ws_free_rows(sm);
	ws_free_emit(sm);
	kernel_buf_free(sm->kb, sm->ws.meta);
	sm->ws.meta = NULL;
	sm->ws.cap_meta = 0;
	swap_ws(sm);
	sm->last_graph = false;
}

/* The plan of a graph of size rows: every row a decode that emits, the
 * graphs' block table width, attention sized for the longest KV length
 * that width holds. */
static struct step_plan graph_plan(const struct synth_model *sm, int size)
{
	return (struct step_plan){
		.tokens = size, .n_dec = size, .n_emit = size, .maxb = sm->graph_blocks,
		.dec_max_kv = sm->graph_blocks * sm->kv.block_size, .mm = sm->gmm,
	};
}

/* Rows from..size-1 of a graph step are padding: token 0 at position 0,
 * slot -1 (kv_write skips it), kv_len 1 (attention reads one key through
 * the row's block table, whose entries are valid block ids: zeros, or a
 * table an earlier graph step uploaded there; reading is harmless), and
 * the emit entries past the real ones name row 0.  Their outputs are never
 * read. */
static void pad_meta(struct synth_model *sm, const struct step_plan *gp, int from, int emit_from)
{
	const struct meta_map *mm = &gp->mm;
	int32_t *m = sm->host_meta;

	for (int r = from; r < gp->tokens; r++) {
		m[mm->ids + r] = 0;
		m[mm->pos + r] = 0;
		m[mm->slots + r] = -1;
		m[mm->dec_len + r] = 1;
	}
	for (int e = emit_from; e < gp->n_emit; e++)
		m[mm->emit + e] = 0;
	m[mm->pre_start] = 0;
}

/* Capture graph g: upload all-padding metadata, run its operators once
 * eagerly (the backend's first-call setup and the decode partials' growth
 * happen there, not under capture, where allocating is refused), then
 * record them.  Padding writes no KV, so this changes no request's state. */
static int graph_capture(struct synth_model *sm, struct step_graph *g, struct ss_error *err)
{
	struct step_plan gp = graph_plan(sm, g->size);
	struct ss_error eerr;
	void *exec = NULL;
	int rc, erc;

	pad_meta(sm, &gp, 0, 0);
	for (size_t r = 0; r < (size_t)g->size * sm->graph_blocks; r++)
		sm->host_meta[gp.mm.dec_bt + r] = 0;
	swap_ws(sm);
	rc = kernel_buf_upload(sm->kb, sm->ws.meta, 0, sm->host_meta,
			       gp.mm.total * sizeof(int32_t), err);
	if (!rc)
		rc = run_body(sm, &gp, err);
	if (!rc)
		rc = kernel_backend_sync(sm->kb, err);
	if (!rc)
		rc = kernel_graph_begin(sm->kb, err);
	if (!rc) {
		rc = run_body(sm, &gp, err);
		/* always end the capture, which fails too when rc does */
		erc = kernel_graph_end(sm->kb, &exec, rc ? &eerr : err);
		if (!rc)
			rc = erc;
	}
	swap_ws(sm);
	if (rc) {
		kernel_graph_free(sm->kb, exec);
		return rc;
	}
	g->exec = exec;
	return 0;
}

int synth_model_set_graphs(struct synth_model *sm, const int32_t *sizes, int n, int max_kv_len,
			   struct ss_error *err)
{
	const int bs = sm->kv.block_size;
	long cache_tokens = (long)sm->kv.num_blocks * bs;
	struct meta_map *mm = &sm->gmm;
	size_t S;
	int rc;

	graphs_free(sm);
	if (n == 0)
		return 0;
	if (!kernel_backend_has_graphs(sm->kb))
		return kernel_graph_begin(sm->kb, err);   /* -ENOTSUP naming the backend */
	if (n < 0 || !sizes || max_kv_len < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "synthetic step graphs: %d sizes, longest KV length %d "
				    "(expected sizes and a length >= 1)", n, max_kv_len);
	for (int i = 0; i < n; i++)
		if (sizes[i] < 1 || (i && sizes[i] <= sizes[i - 1]))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "synthetic step graphs: size %d is %d (expected "
					    "ascending sizes >= 1)", i, sizes[i]);
	sm->graphs = calloc((size_t)n, sizeof(*sm->graphs));
	if (!sm->graphs)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	sm->n_graphs = n;
	for (int i = 0; i < n; i++)
		sm->graphs[i].size = sizes[i];
	if (max_kv_len > cache_tokens)
		max_kv_len = (int)cache_tokens;   /* no request outgrows the cache */
	sm->graph_blocks = (max_kv_len + bs - 1) / bs;
	/* One layout for every size, the largest's, so that a row's block
	 * table sits at the same place whichever graph runs and padding rows
	 * only ever find valid block ids there.  The tables come last: a step
	 * uploads those of its real rows only. */
	S = (size_t)sizes[n - 1];
	memset(mm, 0, sizeof(*mm));
	mm->ids = 0;
	mm->pos = S;
	mm->slots = 2 * S;
	mm->dec_len = 3 * S;
	mm->emit = 4 * S;
	mm->pre_start = 5 * S;          /* [1], 0: no prefill */
	mm->pre_ctx = mm->pre_bt = mm->dec_bt = 5 * S + 1;
	mm->total = mm->dec_bt + S * (size_t)sm->graph_blocks;
	swap_ws(sm);
	rc = ws_reserve(sm, (int)S, (int)S, mm->total, err);
	swap_ws(sm);
	if (rc)
		graphs_free(sm);
	return rc;
}

int synth_model_capture_graphs(struct synth_model *sm, struct ss_error *err)
{
	for (int i = 0; i < sm->n_graphs; i++)
		if (!sm->graphs[i].exec) {
			int rc = graph_capture(sm, &sm->graphs[i], err);

			if (rc)
				return rc;
		}
	return 0;
}

uint64_t synth_model_graph_steps(const struct synth_model *sm)
{
	return sm->graph_steps;
}

/* The graph a step of plan p runs through, or NULL: decode-only, no more
 * rows than the largest size, every block table within the graphs' width. */
static struct step_graph *graph_for(struct synth_model *sm, const struct step_plan *p)
{
	if (!sm->n_graphs || p->n_pre || p->n_lora || p->maxb > sm->graph_blocks)
		return NULL;
	for (int i = 0; i < sm->n_graphs; i++)
		if (sm->graphs[i].size >= p->n_dec)
			return &sm->graphs[i];
	return NULL;
}

/* A decode-only step through graph g: its metadata into the graphs' fixed
 * layout (real rows first, in item order, then padding), one upload of
 * everything but the padding rows' block tables, one launch. */
static int graph_step(struct synth_model *sm, struct step_graph *g, const struct synth_item *items,
		      int n, const struct step_plan *p, int64_t *elapsed_ns, struct ss_error *err)
{
	struct step_plan gp = graph_plan(sm, g->size);
	struct kernel_timer timer;
	struct ss_error terr;
	int64_t ns = 0;
	int rc, trc;

	/* captured before the step's timer starts (or up front,
	 * synth_model_capture_graphs) */
	if (!g->exec) {
		rc = graph_capture(sm, g, err);
		if (rc)
			return rc;
	}
	rc = kernel_timer_begin(sm->kb, &timer, err);
	if (rc)
		return rc;
	fill_meta(sm, items, n, &gp);
	pad_meta(sm, &gp, n, p->n_emit);
	rc = kernel_buf_upload(sm->kb, sm->gws.meta, 0, sm->host_meta,
			       (gp.mm.dec_bt + (size_t)n * gp.maxb) * sizeof(int32_t), err);
	if (!rc)
		rc = kernel_graph_launch(sm->kb, g->exec, err);
	trc = kernel_timer_end(sm->kb, &timer, &ns, rc ? &terr : err);
	if (!rc)
		rc = trc;
	if (rc)
		return rc;
	sm->n_emit = p->n_emit;
	sm->last_graph = true;
	sm->graph_steps++;
	if (elapsed_ns)
		*elapsed_ns = ns;
	return 0;
}

/* ---- multi-LoRA ---- */

static void lora_free(struct synth_model *sm)
{
	struct lora_state *ls = sm->lora;

	if (!ls)
		return;
	kernel_buf_free(sm->kb, ls->w);
	kernel_buf_free(sm->kb, ls->tmp);
	for (size_t a = 0; a < ls->n_store; a++)
		free(ls->store[a]);
	free(ls->store);
	free(ls->store_rank);
	free(ls->slot_adapter);
	free(ls->slot_rank);
	free(ls->seg_start);
	free(ls->seg_slot);
	free(ls->seg_rank);
	free(ls);
	sm->lora = NULL;
}

int synth_model_set_lora(struct synth_model *sm, int slots, int max_rank, struct ss_error *err)
{
	const int H = sm->shape.hidden;
	struct lora_state *ls;
	size_t at = 0;
	int rc;

	if (sm->lora)
		return ss_error_set(err, -EINVAL, NULL, 0, "synthetic model: adapters set twice");
	if (slots < 1 || slots > 4096 || max_rank < 1 || max_rank > 1024)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "synthetic model adapters: %d slots (1..4096) of rank %d (1..1024)",
				    slots, max_rank);
	ls = calloc(1, sizeof(*ls));
	if (!ls)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	sm->lora = ls;
	ls->slots = slots;
	ls->max_rank = max_rank;
	ls->d_in[LM_Q] = ls->d_in[LM_K] = ls->d_in[LM_V] = H;
	ls->d_out[LM_Q] = sm->q_w;
	ls->d_out[LM_K] = ls->d_out[LM_V] = sm->kv_w;
	ls->d_in[LM_O] = sm->q_w;
	ls->d_out[LM_O] = H;
	for (int m = 0; m < LORA_MODS; m++) {
		ls->mod_off[m] = at;
		at += (size_t)max_rank * ((size_t)ls->d_in[m] + ls->d_out[m]);
	}
	ls->layer_elems = at;
	ls->slot_elems = at * (size_t)sm->shape.layers;
	ls->slot_adapter = malloc((size_t)slots * sizeof(*ls->slot_adapter));
	ls->slot_rank = calloc((size_t)slots, sizeof(*ls->slot_rank));
	if (!ls->slot_adapter || !ls->slot_rank) {
		lora_free(sm);
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	}
	for (int i = 0; i < slots; i++)
		ls->slot_adapter[i] = -1;
	rc = kernel_buf_alloc(sm->kb, &ls->w, ls->slot_elems * slots * kernel_backend_elem_size(sm->kb),
			      KERNEL_MEM_DEVICE, err);
	if (rc)
		lora_free(sm);
	return rc;
}

/* Elements of adapter of rank r in the store: per layer and module, A and B. */
static size_t lora_adapter_elems(const struct lora_state *ls, int layers, int r)
{
	size_t per = 0;

	for (int m = 0; m < LORA_MODS; m++)
		per += (size_t)r * ((size_t)ls->d_in[m] + ls->d_out[m]);
	return per * (size_t)layers;
}

int synth_model_lora_stage(struct synth_model *sm, int32_t a, int rank, struct ss_error *err)
{
	struct lora_state *ls = sm->lora;
	uint64_t base;
	size_t at = 0;
	float *w;

	if (!ls || a < 0 || rank < 1 || rank > ls->max_rank)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "synthetic model: adapter %d of rank %d (expected an id >= 0 and a "
				    "rank of 1..%d, after synth_model_set_lora)", a, rank,
				    ls ? ls->max_rank : 0);
	if ((size_t)a < ls->n_store && ls->store[a]) {
		if (ls->store_rank[a] != rank)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "synthetic model: adapter %d staged at rank %d, now %d", a,
					    ls->store_rank[a], rank);
		return 0;
	}
	if ((size_t)a >= ls->n_store) {
		size_t cap = grow(ls->n_store, (size_t)a + 1);
		float **st = realloc(ls->store, cap * sizeof(*st));
		int32_t *sr;

		if (!st)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		ls->store = st;
		sr = realloc(ls->store_rank, cap * sizeof(*sr));
		if (!sr)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		ls->store_rank = sr;
		for (size_t i = ls->n_store; i < cap; i++) {
			ls->store[i] = NULL;
			ls->store_rank[i] = 0;
		}
		ls->n_store = cap;
	}
	w = malloc(lora_adapter_elems(ls, sm->shape.layers, rank) * sizeof(*w));
	if (!w)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory for adapter %d", a);
	/* A of variance 1/d_in, B a tenth of 1/rank's (a delta small beside
	 * the base weights, as trained adapters are): one stream per tensor */
	base = ss_splitmix64(sm->seed ^ 0x6c6f7261ULL ^ ss_splitmix64((uint64_t)a + 1));
	for (int l = 0; l < sm->shape.layers; l++)
		for (int m = 0; m < LORA_MODS; m++) {
			size_t na = (size_t)rank * ls->d_in[m], nb = (size_t)ls->d_out[m] * rank;
			uint64_t key = ss_splitmix64(base + (uint64_t)(l * LORA_MODS + m));
			float sa = sqrtf(3.0f / ls->d_in[m]), sb = 0.1f * sqrtf(3.0f / rank);

			for (size_t i = 0; i < na; i++)
				w[at + i] = kernel_uniform_draw(key, i, sa, 0);
			for (size_t i = 0; i < nb; i++)
				w[at + na + i] = kernel_uniform_draw(key, na + i, sb, 0);
			at += na + nb;
		}
	ls->store[a] = w;
	ls->store_rank[a] = rank;
	return 0;
}

int synth_model_lora_load(struct synth_model *sm, int slot, int32_t a, struct ss_error *err)
{
	struct lora_state *ls = sm->lora;
	const float *src;
	size_t at = 0;
	int r, rc = 0;

	if (!ls || slot < 0 || slot >= ls->slots || a < 0 || (size_t)a >= ls->n_store ||
	    !ls->store[a])
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "synthetic model: load of adapter %d into slot %d (expected a "
				    "staged adapter and a slot of 0..%d)", a, slot,
				    ls ? ls->slots - 1 : -1);
	src = ls->store[a];
	r = ls->store_rank[a];
	for (int l = 0; l < sm->shape.layers && !rc; l++)
		for (int m = 0; m < LORA_MODS && !rc; m++) {
			size_t dst = (size_t)slot * ls->slot_elems + (size_t)l * ls->layer_elems +
				     ls->mod_off[m];
			size_t na = (size_t)r * ls->d_in[m], nb = (size_t)ls->d_out[m] * r;

			rc = kernel_buf_upload_f32(sm->kb, ls->w, dst, src + at, na, err);
			if (!rc)
				rc = kernel_buf_upload_f32(sm->kb, ls->w,
							   dst + (size_t)ls->max_rank * ls->d_in[m],
							   src + at + na, nb, err);
			at += na + nb;
		}
	if (rc)
		return rc;
	ls->slot_adapter[slot] = a;
	ls->slot_rank[slot] = r;
	return 0;
}

size_t synth_model_lora_bytes(const struct synth_model *sm, int32_t a)
{
	const struct lora_state *ls = sm->lora;

	if (!ls || a < 0 || (size_t)a >= ls->n_store || !ls->store[a])
		return 0;
	return lora_adapter_elems(ls, sm->shape.layers, ls->store_rank[a]) *
	       kernel_backend_elem_size(sm->kb);
}

int64_t synth_model_lora_ns(const struct synth_model *sm)
{
	return sm->lora ? sm->lora->ns : 0;
}

/* This step's segments over its rows (decodes first, then the prefill
 * chunks, each in item order: fill_meta's layout): runs of consecutive
 * rows of one slot, -1 for the base model's; and room for the shrink. */
static int lora_segments(struct synth_model *sm, const struct synth_item *items, int n,
			 const struct step_plan *p, struct ss_error *err)
{
	struct lora_state *ls = sm->lora;
	int row = 0, ns = 0;

	ls->n_segs = 0;
	if (!p->n_lora)
		return 0;
	if (n + 1 > ls->cap_segs) {
		int cap = (int)grow((size_t)ls->cap_segs, (size_t)n + 1);
		int32_t *a = realloc(ls->seg_start, (size_t)cap * sizeof(*a));

		if (!a)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		ls->seg_start = a;
		a = realloc(ls->seg_slot, (size_t)cap * sizeof(*a));
		if (!a)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		ls->seg_slot = a;
		a = realloc(ls->seg_rank, (size_t)cap * sizeof(*a));
		if (!a)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		ls->seg_rank = a;
		ls->cap_segs = cap;
	}
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			const struct synth_item *it = &items[i];
			int32_t slot = it->lora ? it->lora_slot : -1;

			if ((it->tokens == 1) != (pass == 0))
				continue;
			if (!ns || ls->seg_slot[ns - 1] != slot) {
				ls->seg_start[ns] = row;
				ls->seg_slot[ns] = slot;
				ls->seg_rank[ns] = slot >= 0 ? ls->slot_rank[slot] : 0;
				ns++;
			}
			row += it->tokens;
		}
	ls->seg_start[ns] = row;
	ls->n_segs = ns;
	if (p->tokens > ls->cap_tmp) {
		int cap = (int)grow((size_t)ls->cap_tmp, (size_t)p->tokens);
		int rc;

		kernel_buf_free(sm->kb, ls->tmp);
		ls->tmp = NULL;
		ls->cap_tmp = 0;
		rc = kernel_buf_alloc(sm->kb, &ls->tmp, (size_t)cap * ls->max_rank *
				      kernel_backend_elem_size(sm->kb), KERNEL_MEM_DEVICE, err);
		if (rc)
			return rc;
		ls->cap_tmp = cap;
	}
	return 0;
}

int synth_model_step(struct synth_model *sm, const struct synth_item *items, int n,
		     int64_t *elapsed_ns, struct ss_error *err)
{
	struct kernel_timer timer;
	struct step_plan p;
	struct step_graph *g;
	int64_t ns = 0;
	int rc;

	sm->n_emit = 0;
	sm->last_graph = false;
	if (sm->lora)
		sm->lora->ns = 0;
	rc = plan_step(sm, items, n, &p, err);
	if (rc)
		return rc;
	g = graph_for(sm, &p);
	if (g)
		return graph_step(sm, g, items, n, &p, elapsed_ns, err);
	rc = kernel_timer_begin(sm->kb, &timer, err);
	if (rc)
		return rc;
	rc = ws_reserve(sm, p.tokens, p.n_emit, p.mm.total, err);
	if (!rc && sm->lora)
		rc = lora_segments(sm, items, n, &p, err);
	if (!rc) {
		fill_meta(sm, items, n, &p);
		rc = kernel_buf_upload(sm->kb, sm->ws.meta, 0, sm->host_meta,
				       p.mm.total * sizeof(int32_t), err);
	}
	if (!rc)
		rc = run_body(sm, &p, err);
	/* Always close the timer (a GPU backend releases its events there). */
	{
		struct ss_error terr;
		int trc = kernel_timer_end(sm->kb, &timer, &ns, rc ? &terr : err);

		if (!rc)
			rc = trc;
	}
	if (rc)
		return rc;
	sm->n_emit = p.n_emit;
	if (elapsed_ns)
		*elapsed_ns = ns;
	return 0;
}

int synth_model_n_emit(const struct synth_model *sm)
{
	return sm->n_emit;
}

int synth_model_outputs(struct synth_model *sm, float *hidden, float *logits, int32_t *tokens,
			struct ss_error *err)
{
	size_t e = (size_t)sm->n_emit;
	const struct workspace *ws = sm->last_graph ? &sm->gws : &sm->ws;
	int rc = 0;

	if (!e)
		return 0;
	if (hidden)
		rc = kernel_buf_download_f32(sm->kb, hidden, ws->hs, 0, e * sm->shape.hidden, err);
	if (!rc && logits)
		rc = kernel_buf_download_f32(sm->kb, logits, ws->logits, 0, e * sm->shape.vocab,
					     err);
	if (!rc && tokens)
		rc = kernel_buf_download(sm->kb, tokens, ws->sampled, 0, e * sizeof(int32_t), err);
	return rc;
}

const struct synth_shape *synth_model_shape(const struct synth_model *sm)
{
	return &sm->shape;
}

const void *synth_model_weights(const struct synth_model *sm, size_t *n)
{
	*n = sm->wm.total;
	return sm->weights;
}

const struct kernel_kv_cache *synth_model_kv(const struct synth_model *sm)
{
	return &sm->kv;
}

size_t synth_model_weight_bytes(const struct synth_model *sm)
{
	return sm->wm.total * kernel_backend_elem_size(sm->kb);
}

size_t synth_model_kv_bytes(const struct synth_model *sm)
{
	return 2 * kernel_kv_cache_elems(&sm->kv) *
	       kernel_dtype_size(kernel_kv_cache_dtype(sm->kb, &sm->kv));
}

static size_t ws_bytes(const struct synth_model *sm, const struct workspace *ws)
{
	size_t es = kernel_backend_elem_size(sm->kb);
	size_t row = (size_t)2 * sm->shape.hidden + sm->qkv_w + sm->q_w + sm->up_w +
		     sm->shape.intermediate;

	return (size_t)ws->cap_tokens * row * es +
	       (size_t)ws->cap_emit * ((sm->shape.hidden + (size_t)sm->shape.vocab) * es +
				       sizeof(int32_t)) +
	       ws->cap_meta * sizeof(int32_t);
}

size_t synth_model_workspace_bytes(const struct synth_model *sm)
{
	return ws_bytes(sm, &sm->ws) + ws_bytes(sm, &sm->gws);
}
