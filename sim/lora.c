/* servesim — multi-LoRA serving: --lora, the adapters of a run, each
 * instance's adapter caches and the price of a step's adapters (lora.h,
 * docs/lora.md). */
#include "lora.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel.h"
#include "lora-kernel.h"
#include "params.h"
#include "rng.h"

/* ---- --lora ---------------------------------------------------------------- */

/* The keys of --lora KEY=VALUE,...: the parser below, its errors and the
 * help and docs read this one list. */
enum lora_key {
	LK_ADAPTERS, LK_RANK, LK_MIX, LK_POPULARITY, LK_MAX_LORAS, LK_MAX_CPU_LORAS, LK_TARGETS,
	LK_DISK, LK_PAGING, LK_RANK_ORDER, LK_N
};

const struct lora_key_doc lora_keys[] = {
	[LK_ADAPTERS] = { "adapters", "N", "adapters served, 1..1000000 (default: the trace's "
			  "adapter column's largest id + 1)" },
	[LK_RANK] = { "rank", "R", "every adapter's rank, 1..1024 (default 16)" },
	[LK_MIX] = { "mix", "R:W/R:W...", "ranks drawn per adapter: rank R with weight W, up to 8 "
		     "(instead of rank=)" },
	[LK_POPULARITY] = { "popularity", "zipf:S|uniform", "which adapter a request names: "
			    "adapter i with weight 1/(i+1)^S, or all alike (default uniform)" },
	[LK_MAX_LORAS] = { "max_loras", "N", "GPU adapter slots: most distinct adapters in one "
			   "step (vLLM's --max-loras; default 1, as vLLM's)" },
	[LK_MAX_CPU_LORAS] = { "max_cpu_loras", "N", "adapters host memory holds, >= max_loras "
			       "(vLLM's --max-cpu-loras; default all of them, as S-LoRA)" },
	[LK_TARGETS] = { "targets", "qkvo|all", "modules adapted: the attention projections, or "
			 "also the MLP's (default qkvo)" },
	[LK_DISK] = { "disk_gbps", "B", "storage read bandwidth of a host miss, GB/s "
		      "(default 2)" },
	[LK_PAGING] = { "paging", "slots|unified", "GPU adapter memory: max_loras fixed slots, or "
			"S-LoRA's unified paging, adapters in pages of the KV pool with no slot limit "
			"(default slots)" },
	[LK_RANK_ORDER] = { "rank_order", "drawn|cycle", "how adapters get mix='s ranks: each "
			    "drawn with the weights, or adapter i the (i mod n)-th rank of the mix "
			    "in its order, as S-LoRA's benchmark assigns them (default drawn)" },
	{ NULL, NULL, NULL },
};

static int bad(struct ss_error *err, const char *what)
{
	return ss_error_set(err, -EINVAL, NULL, 0, "--lora: %s", what);
}

/* mix=R:W/R:W...: c's rank classes, shares normalised. */
static int parse_mix(struct lora_config *c, char *v)
{
	char *save = NULL;
	double sum = 0;

	c->n_ranks = 0;
	for (char *it = strtok_r(v, "/", &save); it; it = strtok_r(NULL, "/", &save)) {
		char *colon = strchr(it, ':');
		long r;
		double w;

		if (!colon || c->n_ranks == LORA_MAX_RANKS)
			return -1;
		*colon = '\0';
		if (ss_parse_long_in(it, 1, LORA_MAX_RANK, &r) || ss_parse_double_in(colon + 1, 0, 1e9, &w))
			return -1;
		for (int i = 0; i < c->n_ranks; i++)
			if (c->rank[i] == r)
				return -1;
		c->rank[c->n_ranks] = (int32_t)r;
		c->share[c->n_ranks++] = w;
		sum += w;
	}
	if (c->n_ranks == 0)
		return -1;
	for (int i = 0; i < c->n_ranks; i++)
		c->share[i] /= sum;
	return 0;
}

static int parse_popularity(struct lora_config *c, const char *v)
{
	if (!strcmp(v, "uniform")) {
		c->popularity = LORA_POP_UNIFORM;
		return 0;
	}
	if (!strncmp(v, "zipf:", 5) && !ss_parse_double_in(v + 5, 0, 100, &c->zipf_s)) {
		c->popularity = LORA_POP_ZIPF;
		return 0;
	}
	return -1;
}

int lora_config_parse(struct lora_config *c, const char *arg, struct ss_error *err)
{
	char buf[256], msg[512], *save = NULL;
	bool seen[LK_N] = { false };
	long v;

	memset(c, 0, sizeof(*c));
	if (strlen(arg) >= sizeof(buf))
		return bad(err, "too long (at most 255 characters)");
	snprintf(c->text, sizeof(c->text), "%s", arg);
	snprintf(buf, sizeof(buf), "%s", arg);
	c->n_ranks = 1;
	c->rank[0] = 16;
	c->share[0] = 1;
	c->max_loras = 1;
	c->disk_bw = 2e9;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const char *val;
		int key = ss_keyval_take(tok, lora_keys, sizeof(*lora_keys), LK_N, seen, &val, msg,
					 sizeof(msg));
		int rc = 0;

		if (key < 0)
			return bad(err, msg);
		switch ((enum lora_key)key) {
		case LK_ADAPTERS:
			rc = ss_parse_long_in(val, 1, LORA_MAX_ADAPTERS, &v);
			c->n_adapters = (uint32_t)v;
			break;
		case LK_RANK:
			rc = ss_parse_long_in(val, 1, LORA_MAX_RANK, &v);
			c->rank[0] = (int32_t)v;
			break;
		case LK_MIX: {
			char mix[256];

			snprintf(mix, sizeof(mix), "%s", val);
			rc = parse_mix(c, mix);
			break;
		}
		case LK_POPULARITY: rc = parse_popularity(c, val); break;
		case LK_MAX_LORAS:
			rc = ss_parse_long_in(val, 1, 65536, &v);
			c->max_loras = (int32_t)v;
			break;
		case LK_MAX_CPU_LORAS:
			rc = ss_parse_long_in(val, 1, LORA_MAX_ADAPTERS, &v);
			c->max_cpu_loras = (uint32_t)v;
			break;
		case LK_TARGETS:
			if (!strcmp(val, "qkvo"))
				c->targets = LORA_TARGET_QKVO;
			else if (!strcmp(val, "all"))
				c->targets = LORA_TARGET_ALL;
			else
				rc = -1;
			break;
		case LK_DISK:
			rc = ss_parse_double_in(val, 0, 1e6, &c->disk_bw);
			c->disk_bw *= 1e9;
			break;
		case LK_PAGING:
			if (!strcmp(val, "slots"))
				c->unified = false;
			else if (!strcmp(val, "unified"))
				c->unified = true;
			else
				rc = -1;
			break;
		case LK_RANK_ORDER:
			if (!strcmp(val, "drawn"))
				c->rank_cycle = false;
			else if (!strcmp(val, "cycle"))
				c->rank_cycle = true;
			else
				rc = -1;
			break;
		case LK_N: break;
		}
		if (rc) {
			snprintf(msg, sizeof(msg), "%s=%.64s: expected %s, %s", tok, val,
				 lora_keys[key].arg, lora_keys[key].help);
			return bad(err, msg);
		}
	}
	if (seen[LK_RANK] && seen[LK_MIX])
		return bad(err, "rank= and mix= are alternatives; give one");
	if (c->unified && seen[LK_MAX_LORAS])
		return bad(err, "max_loras=: paging=unified has no adapter slots (a step holds any number of adapters)");
	c->from_trace = !seen[LK_ADAPTERS];
	c->max_rank = 0;
	for (int i = 0; i < c->n_ranks; i++)
		if (c->rank[i] > c->max_rank)
			c->max_rank = c->rank[i];
	if (c->max_cpu_loras && c->max_cpu_loras < (uint32_t)c->max_loras) {
		snprintf(msg, sizeof(msg), "max_cpu_loras=%u: expected at least max_loras (%d)",
			 c->max_cpu_loras, c->max_loras);
		return bad(err, msg);
	}
	return 0;
}

/* ---- shapes ---------------------------------------------------------------- */

/* One adapted module of a layer: y[., d_out] += x[., d_in] A B, A d_in x r,
 * B r x d_out.  Column-parallel modules (q, k, v, gate, up) shard d_out
 * over tp: each GPU holds all of A and its share of B, shrinks the whole
 * row and expands its columns.  Row-parallel ones (o, down) shard d_in:
 * A's rows and the shrink are split, B is whole, and the partial sums
 * ride the layer's own all-reduce (vLLM's RowParallelLinearWithLoRA).
 * group: modules one kernel serves (vLLM packs q, k, v and gate, up). */
struct lora_module {
	double d_in, d_out;
	bool column;
	int group;
};

#define LORA_MODULES 7
#define LORA_GROUPS 4

static int modules_of(const struct lora_config *c, const struct model_spec *m,
		      struct lora_module *mod)
{
	double q = (double)m->n_heads * m->head_dim, kv = (double)m->n_kv_heads * m->head_dim;
	double h = m->hidden, f = m->intermediate;
	int n = 0;

	mod[n++] = (struct lora_module){ h, q, true, 0 };
	mod[n++] = (struct lora_module){ h, kv, true, 0 };
	mod[n++] = (struct lora_module){ h, kv, true, 0 };
	mod[n++] = (struct lora_module){ q, h, false, 1 };
	if (c->targets == LORA_TARGET_ALL) {
		if (m->mlp == MLP_GATED)
			mod[n++] = (struct lora_module){ h, f, true, 2 };
		mod[n++] = (struct lora_module){ h, f, true, 2 };
		mod[n++] = (struct lora_module){ f, h, false, 3 };
	}
	return n;
}

int lora_model_check(const struct lora_config *c, const struct model_spec *m,
		     struct ss_error *err)
{
	char msg[256];

	if (m->kv_lora_rank > 0) {
		snprintf(msg, sizeof(msg), "%s has latent attention (MLA): adapters on its projections are not modelled",
			 m->name);
		return bad(err, msg);
	}
	if (c->targets == LORA_TARGET_ALL && m->n_experts > 0) {
		snprintf(msg, sizeof(msg), "targets=all on %s, a mixture of experts: adapters on experts are not modelled (targets=qkvo)",
			 m->name);
		return bad(err, msg);
	}
	return 0;
}

/* Bytes per unit of rank, whole model and per GPU of a tp-way instance. */
static void unit_bytes(const struct lora_config *c, const struct model_spec *m, int tp,
		       double *whole, double *gpu)
{
	struct lora_module mod[LORA_MODULES];
	int n = modules_of(c, m, mod);
	double w = 0, g = 0;

	for (int i = 0; i < n; i++) {
		w += mod[i].d_in + mod[i].d_out;
		g += mod[i].column ? mod[i].d_in + mod[i].d_out / tp : mod[i].d_in / tp + mod[i].d_out;
	}
	*whole = w * m->n_layers * m->dtype_bytes;
	*gpu = g * m->n_layers * m->dtype_bytes;
}

double lora_adapter_bytes(const struct lora_config *c, const struct model_spec *m, int32_t r)
{
	double whole, gpu;

	unit_bytes(c, m, 1, &whole, &gpu);
	return whole * r;
}

double lora_gpu_bytes(const struct lora_config *c, const struct model_spec *m, int tp)
{
	double whole, gpu;

	if (c->unified)
		return 0;   /* pages of the KV pool, not memory beside it */
	unit_bytes(c, m, tp, &whole, &gpu);
	return gpu * c->max_rank * c->max_loras;
}

/* ---- the run's adapters -------------------------------------------------- */

struct lora {
	struct lora_config c;
	const struct model_spec *m;
	uint32_t n;
	int32_t *rank;              /* per adapter */
	double *cdf;                /* Zipf: cumulative weight of adapters 0..i, last 1; NULL uniform */
	double unit_whole;          /* bytes per unit of rank, whole model */
	uint64_t seed;
};

/* A uniform in [0, 1) from (seed, salt, key): one splitmix64 round, as
 * spec_accept_count draws. */
static double hash_uniform(uint64_t seed, uint64_t salt, uint64_t key)
{
	uint64_t h = ss_splitmix64((seed - 1) * 0x9e3779b97f4a7c15ULL ^ (salt << 56) ^ key);

	return (double)(h >> 11) * 0x1.0p-53;
}

#define SALT_RANK 1u
#define SALT_ADAPTER 2u

int lora_new(struct lora **out, const struct lora_config *c, const struct model_spec *m,
	     uint64_t seed, int32_t trace_max, struct ss_error *err)
{
	struct lora *l;
	double gpu;
	char msg[256];

	*out = NULL;
	if (lora_model_check(c, m, err))
		return -EINVAL;
	if (c->from_trace && trace_max < 0)
		return bad(err, "adapters=N is required unless the trace has an adapter column");
	if (!c->from_trace && trace_max >= (int64_t)c->n_adapters) {
		snprintf(msg, sizeof(msg), "the trace names adapter %d, expected ids below adapters=%u",
			 trace_max, c->n_adapters);
		return bad(err, msg);
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	l->c = *c;
	l->m = m;
	l->seed = seed;
	l->n = c->from_trace ? (uint32_t)trace_max + 1 : c->n_adapters;
	l->c.n_adapters = l->n;
	if (c->unified)
		l->c.max_loras = (int32_t)l->n;   /* no slot limit: every adapter may share a step */
	if (!l->c.max_cpu_loras || l->c.max_cpu_loras > l->n)
		l->c.max_cpu_loras = l->n > (uint32_t)c->max_loras ? l->n : (uint32_t)c->max_loras;
	l->rank = malloc(l->n * sizeof(*l->rank));
	if (!l->rank)
		goto nomem;
	for (uint32_t a = 0; a < l->n; a++) {
		double u = hash_uniform(seed, SALT_RANK, a), acc = 0;
		int k = 0;

		if (c->rank_cycle) {
			l->rank[a] = c->rank[a % (uint32_t)c->n_ranks];
			continue;
		}
		for (; k < c->n_ranks - 1; k++) {
			acc += c->share[k];
			if (u < acc)
				break;
		}
		l->rank[a] = c->rank[k];
	}
	if (c->popularity == LORA_POP_ZIPF) {
		double sum = 0;

		l->cdf = malloc(l->n * sizeof(*l->cdf));
		if (!l->cdf)
			goto nomem;
		for (uint32_t a = 0; a < l->n; a++) {
			sum += pow((double)a + 1.0, -c->zipf_s);
			l->cdf[a] = sum;
		}
		for (uint32_t a = 0; a < l->n; a++)
			l->cdf[a] /= sum;
		l->cdf[l->n - 1] = 1.0;
	}
	unit_bytes(c, m, 1, &l->unit_whole, &gpu);
	*out = l;
	return 0;
nomem:
	lora_free(l);
	return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory for %u adapters", c->n_adapters);
}

void lora_free(struct lora *l)
{
	if (!l)
		return;
	free(l->rank);
	free(l->cdf);
	free(l);
}

const struct lora_config *lora_config_of(const struct lora *l)
{
	return &l->c;
}

uint32_t lora_count(const struct lora *l)
{
	return l->n;
}

int32_t lora_rank(const struct lora *l, int32_t a)
{
	return a >= 0 && (uint32_t)a < l->n ? l->rank[a] : 0;
}

double lora_bytes(const struct lora *l, int32_t a)
{
	return l->unit_whole * lora_rank(l, a);
}

int32_t lora_adapter_of(const struct lora *l, uint64_t index, int32_t trace_adapter)
{
	double u;
	uint32_t lo = 0, hi;

	if (trace_adapter >= 0)
		return trace_adapter;
	u = hash_uniform(l->seed, SALT_ADAPTER, index);
	if (!l->cdf) {
		uint32_t a = (uint32_t)(u * l->n);

		return (int32_t)(a < l->n ? a : l->n - 1);
	}
	/* the first adapter whose cumulative weight exceeds u: O(log n) */
	hi = l->n - 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (l->cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (int32_t)lo;
}

void lora_stats_add(struct lora_stats *a, const struct lora_stats *b)
{
	a->steps += b->steps;
	a->adapter_steps += b->adapter_steps;
	a->hits += b->hits;
	a->misses += b->misses;
	a->host_misses += b->host_misses;
	a->evictions += b->evictions;
	a->load_bytes += b->load_bytes;
	a->load_ns += b->load_ns;
	a->gemm_ns += b->gemm_ns;
	if (b->peak_adapters > a->peak_adapters)
		a->peak_adapters = b->peak_adapters;
}

/* ---- an instance's caches ------------------------------------------------ */

/* An LRU list over adapter ids: prev/next links in arrays indexed by the
 * adapter (-1 ends), most recent at head.  Touch, insert, remove and
 * taking the tail are O(1); memory 8 bytes per adapter per list.
 * Rejected: a hash map of the resident ones (the ids are dense, so arrays
 * are smaller and need no hashing). */
struct lru {
	int32_t *prev, *next;
	int32_t head, tail;
	uint32_t n, cap;
};

static int lru_init(struct lru *q, uint32_t n_ids, uint32_t cap)
{
	q->prev = malloc(n_ids * sizeof(*q->prev));
	q->next = malloc(n_ids * sizeof(*q->next));
	q->head = q->tail = -1;
	q->n = 0;
	q->cap = cap;
	return q->prev && q->next ? 0 : -ENOMEM;
}

static void lru_release(struct lru *q)
{
	free(q->prev);
	free(q->next);
}

static void lru_unlink(struct lru *q, int32_t a)
{
	if (q->prev[a] >= 0)
		q->next[q->prev[a]] = q->next[a];
	else
		q->head = q->next[a];
	if (q->next[a] >= 0)
		q->prev[q->next[a]] = q->prev[a];
	else
		q->tail = q->prev[a];
	q->n--;
}

static void lru_push(struct lru *q, int32_t a)
{
	q->prev[a] = -1;
	q->next[a] = q->head;
	if (q->head >= 0)
		q->prev[q->head] = a;
	else
		q->tail = a;
	q->head = a;
	q->n++;
}

#define IN_GPU 1u
#define IN_HOST 2u

struct lora_inst {
	const struct lora *l;
	struct lora_stats *st;
	struct lru gpu, host;
	uint8_t *where;             /* IN_GPU | IN_HOST per adapter */
	uint32_t *stamp;            /* per adapter: the mark of the last filter or step that saw it */
	uint32_t *run_count;        /* per adapter: its requests in the running set */
	uint32_t run_distinct;      /* adapters with run_count > 0 */
	uint32_t mark;
	int32_t *distinct;          /* a step's distinct adapters (max_loras + 1) */
	int32_t *miss;              /* ... of them to load */
	uint32_t n_miss;            /* ... of the last step */
	int32_t *slot;              /* per adapter: its GPU slot, -1: none */
	double unit_gpu;            /* bytes per unit of rank per GPU */
	double pcie_bw;             /* bytes/s, one GPU's host link */
	/* The adapters' GEMMs on one GPU: per kernel group, FLOPs and bytes
	 * per unit of rank of (tokens x rank) and of (distinct adapters'
	 * rank), and bytes per adapted token; s per FLOP and per byte. */
	int n_groups;
	double g_flop_rt[LORA_GROUPS], g_byte_rt[LORA_GROUPS], g_byte_rd[LORA_GROUPS],
	       g_byte_t[LORA_GROUPS];
	double s_per_flop, s_per_byte, kernel_s;
	/* measured (lora_inst_set_kernel): a group's call costs call_s +
	 * seg_s x distinct adapters + bytes x s_per_byte + FLOPs x
	 * s_per_flop, summed, instead of the roofline's max and launches */
	bool measured;
	double call_s, seg_s, s_per_act_byte;   /* (s_per_byte: the adapters' bytes) */
	int layers;
	struct lora_wait *wait;     /* the waiting queue by adapter (lora-wait.h), NULL: not indexed */
	/* paging=unified: the pool adapters take pages of, NULL otherwise */
	struct kvpool *pool;
	double block_bytes;         /* one KV block on one GPU, bytes */
	int32_t **page_ids;         /* per adapter: its blocks while resident, else NULL */
};

/* The adapters' kernels are skinny GEMMs (an inner or outer dimension of
 * the rank, 8..128) that reach a fraction of the tensor cores' peak and of
 * the memory bandwidth: without measurements, the roofline's own priors
 * for such kernels (cost-roofline.c: attn_prefill_eff 0.5 for compute,
 * mem_eff 0.8 for bytes, kernel_us 3 a launch).  A cost model that has
 * `calibrate run`'s lora rows of the device replaces them with what they
 * measured (lora_inst_set_kernel; docs/lora.md). */
#define LORA_COMPUTE_EFF 0.5
#define LORA_MEM_EFF 0.8
#define LORA_KERNEL_US 3.0

int lora_inst_new(struct lora_inst **out, const struct lora *l, const struct gpu_spec *gpu,
		  int tp, struct lora_stats *st)
{
	const struct model_spec *m = l->m;
	struct lora_module mod[LORA_MODULES];
	struct lora_inst *li;
	double whole;
	int n;

	*out = NULL;
	li = calloc(1, sizeof(*li));
	if (!li)
		return -ENOMEM;
	li->l = l;
	li->st = st;
	li->where = calloc(l->n, 1);
	li->stamp = calloc(l->n, sizeof(*li->stamp));
	li->run_count = calloc(l->n, sizeof(*li->run_count));
	li->distinct = malloc(((size_t)l->c.max_loras + 1) * sizeof(*li->distinct));
	li->miss = malloc(((size_t)l->c.max_loras + 1) * sizeof(*li->miss));
	li->slot = malloc(l->n * sizeof(*li->slot));
	if (!li->where || !li->stamp || !li->run_count || !li->distinct || !li->miss || !li->slot ||
	    lru_init(&li->gpu, l->n, (uint32_t)l->c.max_loras) ||
	    lru_init(&li->host, l->n, l->c.max_cpu_loras)) {
		lora_inst_free(li);
		return -ENOMEM;
	}
	for (uint32_t a = 0; a < l->n; a++)
		li->slot[a] = -1;
	/* host memory starts holding the most popular max_cpu_loras adapters
	 * (S-LoRA loads every adapter before it serves; a warm vLLM server's
	 * CPU cache is full); the GPU slots start empty */
	for (uint32_t a = li->host.cap; a-- > 0;) {
		lru_push(&li->host, (int32_t)a);
		li->where[a] |= IN_HOST;
	}
	unit_bytes(&l->c, m, tp, &whole, &li->unit_gpu);
	li->pcie_bw = gpu->pcie_bw;
	n = modules_of(&l->c, m, mod);
	for (int i = 0; i < n; i++) {
		int g = mod[i].group;
		double din = mod[i].column ? mod[i].d_in : mod[i].d_in / tp;
		double dout = mod[i].column ? mod[i].d_out / tp : mod[i].d_out;
		double e = m->dtype_bytes;

		if (g + 1 > li->n_groups)
			li->n_groups = g + 1;
		double fl, ba, bx;

		/* the counts of calibrate/lora-kernel.h (which the measured
		 * fit uses too), per unit of rows x rank, of distinct
		 * adapters' rank and of rows: they are linear in each (the
		 * adapters' bytes go with the distinct adapters' rank, the
		 * activations' with the rows and rows x rank) */
		cal_lora_work(e, din, dout, 0.0, 1.0, 0.0, &fl, &ba, &bx);
		li->g_flop_rt[g] += fl;
		li->g_byte_rt[g] += bx;
		cal_lora_work(e, din, dout, 0.0, 0.0, 1.0, &fl, &ba, &bx);
		li->g_byte_rd[g] += ba;
		cal_lora_work(e, din, dout, 1.0, 0.0, 0.0, &fl, &ba, &bx);
		li->g_byte_t[g] += bx;
	}
	li->s_per_flop = 1.0 / (gpu->bf16_flops * LORA_COMPUTE_EFF);
	li->s_per_byte = 1.0 / (gpu->hbm_bw * LORA_MEM_EFF);
	li->kernel_s = LORA_KERNEL_US * 1e-6;
	li->layers = m->n_layers;
	*out = li;
	return 0;
}

void lora_inst_set_kernel(struct lora_inst *li, const struct cost_lora_kernel *k)
{
	li->measured = true;
	li->call_s = k->call_s;
	li->seg_s = k->seg_s;
	li->s_per_byte = k->s_per_adapter_byte;
	li->s_per_act_byte = k->s_per_act_byte;
	li->s_per_flop = k->s_per_flop;
}

bool lora_inst_measured(const struct lora_inst *li)
{
	return li->measured;
}

void lora_inst_free(struct lora_inst *li)
{
	if (!li)
		return;
	lora_wait_free(li->wait);
	if (li->page_ids)
		for (uint32_t a = 0; a < li->l->n; a++)
			free(li->page_ids[a]);
	free(li->page_ids);
	lru_release(&li->gpu);
	lru_release(&li->host);
	free(li->where);
	free(li->stamp);
	free(li->run_count);
	free(li->distinct);
	free(li->miss);
	free(li->slot);
	free(li);
}

/* A fresh mark: stamps older than it read as unseen. */
static uint32_t next_mark(struct lora_inst *li)
{
	if (++li->mark == 0) {
		memset(li->stamp, 0, li->l->n * sizeof(*li->stamp));
		li->mark = 1;
	}
	return li->mark;
}

void lora_run_enter(struct lora_inst *li, int32_t a)
{
	if (a >= 0 && li->run_count[a]++ == 0) {
		li->run_distinct++;
		if (li->pool && (li->where[a] & IN_GPU))
			li->pool->n_reclaimable -= lora_pages(li, a);   /* in use again */
		if (li->wait)
			lora_wait_run(li->wait, a, true);
	}
}

void lora_run_leave(struct lora_inst *li, int32_t a)
{
	if (a >= 0 && --li->run_count[a] == 0) {
		li->run_distinct--;
		if (li->pool && (li->where[a] & IN_GPU))
			li->pool->n_reclaimable += lora_pages(li, a);   /* lent to the pool */
		if (li->wait)
			lora_wait_run(li->wait, a, false);
	}
}

int lora_inst_index_queue(struct lora_inst *li, uint32_t len)
{
	assert(!li->wait && li->run_distinct == 0);
	if (li->l->c.unified)
		return 0;   /* no slot limit: the view is the queue */
	return lora_wait_new(&li->wait, li->l->n, (uint32_t)li->l->c.max_loras, len);
}

struct lora_wait *lora_inst_wait(const struct lora_inst *li)
{
	return li->wait;
}

uint32_t lora_filter(struct lora_inst *li, const void *const *waiting, uint32_t n,
		     const void **out, lora_adapter_fn adapter_of)
{
	uint32_t mark = 0, used = li->run_distinct, m = 0;
	uint32_t slots = (uint32_t)li->l->c.max_loras;

	for (uint32_t k = 0; k < n; k++) {
		int32_t a = adapter_of(waiting[k]);

		if (a >= 0 && !li->run_count[a]) {
			if (!mark)
				mark = next_mark(li);   /* only once a new adapter is seen */
			if (li->stamp[a] != mark) {
				if (used >= slots)
					continue;   /* one adapter too many: it waits */
				li->stamp[a] = mark;
				used++;
			}
		}
		out[m++] = waiting[k];
	}
	return m;
}

/* ---- paging=unified --------------------------------------------------------- */

int32_t lora_pages(const struct lora_inst *li, int32_t a)
{
	if (!li->pool || a < 0)
		return 0;
	return (int32_t)ceil(li->unit_gpu * li->l->rank[a] / li->block_bytes - 1e-9);
}

/* Evict resident adapter v (no running request uses it): its pages go
 * back to the pool. */
static void page_out(struct lora_inst *li, int32_t v)
{
	int32_t n = lora_pages(li, v);

	assert(li->run_count[v] == 0 && (li->where[v] & IN_GPU));
	lru_unlink(&li->gpu, v);
	li->where[v] &= (uint8_t)~IN_GPU;
	li->pool->n_reclaimable -= n;
	kvpool_free(li->pool, li->page_ids[v], n);
	free(li->page_ids[v]);
	li->page_ids[v] = NULL;
	li->st->evictions++;
}

/* kvpool.reclaim: evict idle adapters, least recently used first, until
 * short_by blocks are free or none is left.  O(resident adapters). */
static void page_reclaim(void *ctx, int32_t short_by)
{
	struct lora_inst *li = ctx;
	int32_t v = li->gpu.tail;

	while (short_by > 0 && v >= 0) {
		int32_t prev = li->gpu.prev[v];

		if (li->run_count[v] == 0) {
			short_by -= lora_pages(li, v);
			page_out(li, v);
		}
		v = prev;
	}
}

/* Load adapter a's pages (a miss of a step): -ENOSPC when the pool, with
 * every idle adapter evicted, cannot hold them. */
static int page_in(struct lora_inst *li, int32_t a)
{
	int32_t n = lora_pages(li, a);

	li->page_ids[a] = malloc((size_t)(n > 0 ? n : 1) * sizeof(**li->page_ids));
	if (!li->page_ids[a])
		return -ENOMEM;
	if (kvpool_alloc(li->pool, n, li->page_ids[a])) {
		free(li->page_ids[a]);
		li->page_ids[a] = NULL;
		return -ENOSPC;
	}
	return 0;
}

int lora_inst_page(struct lora_inst *li, struct kvpool *pool, double block_bytes)
{
	assert(li->l->c.unified && !li->pool && block_bytes > 0);
	li->page_ids = calloc(li->l->n, sizeof(*li->page_ids));
	if (!li->page_ids)
		return -ENOMEM;
	li->pool = pool;
	li->block_bytes = block_bytes;
	pool->reclaim = page_reclaim;
	pool->reclaim_ctx = li;
	return 0;
}

int64_t lora_page_reserve(struct lora_inst *li, const void *const *waiting, uint32_t n,
			  int64_t free_blocks, int32_t block_size, lora_adapter_fn adapter_of,
			  lora_blocks_fn blocks_of)
{
	uint32_t mark = next_mark(li);
	int64_t used = 0, reserve = 0;

	for (uint32_t k = 0; k < n; k++) {
		int32_t a = adapter_of(waiting[k]);

		used += blocks_of(waiting[k], block_size);
		if (a >= 0 && !li->run_count[a] && li->stamp[a] != mark) {
			li->stamp[a] = mark;
			used += lora_pages(li, a);
			reserve += lora_pages(li, a);
		}
		if (used >= free_blocks)
			break;   /* the policy can admit none after this one */
	}
	return reserve;
}

int lora_step(struct lora_inst *li, const int32_t *adapters, const int32_t *tokens, uint32_t n,
	      int64_t *load_ns, int64_t *gemm_ns, struct ss_error *err)
{
	const struct lora *l = li->l;
	uint32_t mark = next_mark(li), nd = 0, nm = 0;
	uint32_t slots = (uint32_t)l->c.max_loras;
	double rt = 0, rd = 0, t = 0, load = 0, gemm = 0;

	if (load_ns)
		*load_ns = 0;
	if (gemm_ns)
		*gemm_ns = 0;
	li->n_miss = 0;
	/* its distinct adapters; the resident ones to the front of the GPU
	 * list, so that the tail holds none of them when misses evict */
	for (uint32_t k = 0; k < n; k++) {
		int32_t a = adapters[k];

		if (a < 0)
			continue;
		t += tokens[k];
		rt += (double)tokens[k] * l->rank[a];
		if (li->stamp[a] == mark)
			continue;
		li->stamp[a] = mark;
		if (nd == slots)
			return ss_error_set(err, -EPROTO, NULL, 0,
					    "a step holds more than max_loras=%u distinct adapters",
					    slots);
		li->distinct[nd++] = a;
		rd += l->rank[a];
		if (li->where[a] & IN_GPU) {
			lru_unlink(&li->gpu, a);
			lru_push(&li->gpu, a);
			li->st->hits++;
		} else {
			li->miss[nm++] = a;
		}
	}
	if (nd == 0)
		return 0;
	li->n_miss = nm;
	for (uint32_t k = 0; k < nm; k++) {
		int32_t a = li->miss[k];
		double gpu_bytes = li->unit_gpu * l->rank[a];

		if (li->pool) {
			int rc = page_in(li, a);

			if (rc)
				return ss_error_set(err, rc, NULL, 0,
						    rc == -ENOMEM ? "out of memory" :
						    "adapter %d's %d pages do not fit the KV pool (paging=unified)",
						    a, lora_pages(li, a));
		} else if (li->gpu.n == li->gpu.cap) {
			int32_t v = li->gpu.tail;

			lru_unlink(&li->gpu, v);
			li->where[v] &= (uint8_t)~IN_GPU;
			li->slot[a] = li->slot[v];
			li->slot[v] = -1;
			li->st->evictions++;
		} else {
			li->slot[a] = (int32_t)li->gpu.n;   /* the slots fill in order */
		}
		if (li->where[a] & IN_HOST) {
			lru_unlink(&li->host, a);
		} else {
			/* read from storage into host memory first */
			load += lora_bytes(l, a) / l->c.disk_bw;
			li->st->host_misses++;
			if (li->host.n == li->host.cap) {
				int32_t v = li->host.tail;

				lru_unlink(&li->host, v);
				li->where[v] &= (uint8_t)~IN_HOST;
			}
			li->where[a] |= IN_HOST;
		}
		lru_push(&li->host, a);
		lru_push(&li->gpu, a);
		li->where[a] |= IN_GPU;
		/* each GPU copies its shard over its own host link */
		load += gpu_bytes / li->pcie_bw;
		if (load_ns)   /* (else the executor says what it copied) */
			li->st->load_bytes += gpu_bytes;
		li->st->misses++;
	}
	li->st->steps++;
	li->st->adapter_steps += nd;
	if (nd > li->st->peak_adapters)
		li->st->peak_adapters = nd;
	if (!load_ns || !gemm_ns)
		return 0;   /* measured by the executor */
	for (int g = 0; g < li->n_groups; g++) {
		double shrink_expand = li->g_flop_rt[g] * rt * li->s_per_flop;
		double bytes = (li->g_byte_rt[g] * rt + li->g_byte_rd[g] * rd + li->g_byte_t[g] * t) *
			       li->s_per_byte;

		if (li->g_flop_rt[g] == 0)
			continue;
		if (li->measured)   /* one call a group, as calibrate run timed it */
			gemm += li->call_s + li->seg_s * nd + li->g_byte_rd[g] * rd * li->s_per_byte +
				(li->g_byte_rt[g] * rt + li->g_byte_t[g] * t) * li->s_per_act_byte +
				shrink_expand;
		else   /* two kernels a group (shrink, expand), each at least its launch */
			gemm += (shrink_expand > bytes ? shrink_expand : bytes) + 2.0 * li->kernel_s;
	}
	gemm *= li->layers;
	if (!cost_ns_fits(load * 1e9) || !cost_ns_fits(gemm * 1e9))
		return ss_error_set(err, -ERANGE, NULL, 0,
				    "a step's adapter loads (%g s) or GEMMs (%g s) do not fit in int64 ns",
				    load, gemm);
	*load_ns = cost_ns_round(load * 1e9);
	*gemm_ns = cost_ns_round(gemm * 1e9);
	li->st->load_ns += *load_ns;
	li->st->gemm_ns += *gemm_ns;
	return 0;
}

const struct lora *lora_inst_catalog(const struct lora_inst *li)
{
	return li->l;
}

uint32_t lora_step_loads(const struct lora_inst *li, const int32_t **out)
{
	*out = li->miss;
	return li->n_miss;
}

int32_t lora_slot(const struct lora_inst *li, int32_t a)
{
	return a >= 0 && (uint32_t)a < li->l->n ? li->slot[a] : -1;
}

bool lora_gpu_resident(const struct lora_inst *li, int32_t a)
{
	return a >= 0 && (uint32_t)a < li->l->n && (li->where[a] & IN_GPU);
}

bool lora_host_resident(const struct lora_inst *li, int32_t a)
{
	return a >= 0 && (uint32_t)a < li->l->n && (li->where[a] & IN_HOST);
}

uint32_t lora_gpu_lru(const struct lora_inst *li, int32_t *out)
{
	uint32_t n = 0;

	for (int32_t a = li->gpu.head; a >= 0; a = li->gpu.next[a])
		out[n++] = a;
	return n;
}
