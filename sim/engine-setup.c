/* servesim — constructing, validating and freeing an engine (see
 * engine-int.h, engine.h).
 *
 * Owns: the configuration defaults; checking the configuration; parsing
 * the option specs the engine interprets itself (--prefix-cache,
 * --preemption, --predictor); the pools (colocated, disaggregated or
 * semi-PD) and their KV capacity from GPU memory; instantiating the
 * policies (batch policy, order and their per-instance state, routers,
 * victim order, admission); output-length predictions from their own
 * random stream; tenants as dense indices; cost models and executors; the
 * services lent to policies (struct policy_host); and engine_free.
 *
 * Invariants: engine_new either returns a complete engine or frees
 * everything it made (engine_free accepts a half-built engine); the
 * predictor draws from its own seeded stream, so predictions do not
 * perturb any other random choice.
 * Cost: O(requests log requests) (tenant mapping), O(instances x blocks)
 * for the KV pools.
 */
#include "engine-int.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "bigmem.h"
#include "rng.h"
#include "step-int.h"
#include "sstime.h"

void engine_config_defaults(struct engine_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->tp = 1;
	cfg->n_instances = 1;
	/* block_size, gpu_mem_util and kv_free_fraction stay 0: the engine
	 * profile's, else vLLM's (engine_block_size, engine_kv_rule_of) */
	cfg->activation_reserve_bytes = -1;
	cfg->policy = "vllm";
	cfg->router = "rr";
	cfg->order = "fcfs";
	cfg->victim = "newest";
	cfg->admission = "none";
	cfg->preemption = "recompute";
	cfg->prefix_cache = "off";
	cfg->cost_model = "auto";
}

const char *engine_pool_name(enum engine_pool_id pool)
{
	return pool == ENGINE_POOL_DECODE ? "decode" : "prefill";
}

const char *engine_pool_option(int pool, const char *opt, char *buf, size_t len)
{
	snprintf(buf, len, "--%s%s%s", pool < 0 ? "" : engine_pool_name(pool), pool < 0 ? "" : "-",
		 opt);
	return buf;
}

bool engine_config_disaggregated(const struct engine_config *c)
{
	return c->pools[ENGINE_POOL_PREFILL].n > 0 && c->pools[ENGINE_POOL_DECODE].n > 0;
}

/* Per kind of engine-pool.def field: is it set, are two equal, its text. */
#define POOL_SET_INT(v) ((v) > 0)
#define POOL_SET_GPU(v) ((v) != NULL)
#define POOL_SET_STR(v) ((v) != NULL)
#define POOL_EQ_INT(a, b) ((a) == (b))
#define POOL_EQ_GPU(a, b) ((a) == (b))   /* catalog entries: one per name */
#define POOL_EQ_STR(a, b) (!strcmp((a) ? (a) : "", (b) ? (b) : ""))
#define POOL_FMT_INT "%d"
#define POOL_FMT_GPU "%s"
#define POOL_FMT_STR "%s"
#define POOL_ARG_INT(v) (v)
#define POOL_ARG_GPU(v) ((v) ? (v)->name : "-")
#define POOL_ARG_STR(v) ((v) ? (v) : "-")

struct engine_pool_config engine_pool_resolve(const struct engine_config *c,
					      enum engine_pool_id pool)
{
	const struct engine_pool_config *own = &c->pools[pool];
	struct engine_pool_config p = { .n = own->n };
	bool dis = engine_config_disaggregated(c);

#define ENGINE_POOL_FIELD(kind, type, name, ...) \
	p.name = dis && POOL_SET_##kind(own->name) ? own->name : c->name;
#include "engine-pool.def"
#undef ENGINE_POOL_FIELD
	return p;
}

bool engine_pool_config_set(const struct engine_pool_config *p)
{
	bool set = p->n > 0;

#define ENGINE_POOL_FIELD(kind, type, name, ...) set = set || POOL_SET_##kind(p->name);
#include "engine-pool.def"
#undef ENGINE_POOL_FIELD
	return set;
}

bool engine_pool_config_equal(const struct engine_pool_config *a,
			      const struct engine_pool_config *b)
{
	bool eq = a->n == b->n;

#define ENGINE_POOL_FIELD(kind, type, name, ...) eq = eq && POOL_EQ_##kind(a->name, b->name);
#include "engine-pool.def"
#undef ENGINE_POOL_FIELD
	return eq;
}

void engine_pool_config_describe(const struct engine_pool_config *p, char *buf, size_t len)
{
	size_t at = 0;
	int w = snprintf(buf, len, "n %u", p->n);

#define ENGINE_POOL_FIELD(kind, type, name, ...) \
	if (w >= 0 && (at += (size_t)w) < len) \
		w = snprintf(buf + at, len - at, " " #name " " POOL_FMT_##kind, \
			     POOL_ARG_##kind(p->name));
#include "engine-pool.def"
#undef ENGINE_POOL_FIELD
}

/* ---- services lent to policies (struct policy_host) --------------------- */

static double host_uniform(void *ctx)
{
	struct engine *e = ctx;

	return gsl_rng_uniform(e->policy_rng);
}

/* policy_host.prefix_hit: tokens of req's prompt cached for instance
 * inst, as the KV manager sees them without touching anything. */
static int32_t host_prefix_hit(void *ctx, int32_t inst, const struct req_view *req)
{
	struct engine *e = ctx;

	return kvm_prefix_hit(e->kv, (uint32_t)inst, request_of(req));
}

/* policy_host.adapter_resident: where req's adapter is on instance inst
 * (lora.h's caches, looked at, not touched). */
static int host_adapter_resident(void *ctx, int32_t inst, const struct req_view *req)
{
	struct engine *e = ctx;
	const struct lora_inst *li;
	int32_t a = request_of(req)->adapter;

	if (!e->lora || a < 0 || inst < 0 || (uint32_t)inst >= e->n_inst ||
	    !(li = e->inst[inst].lora))
		return -1;
	return lora_gpu_resident(li, a) ? 2 : lora_host_resident(li, a) ? 1 : 0;
}

/* policy_host.prefill_ns: an estimate, which cannot fail.  A prefill the
 * cost model cannot time in int64 ns reads as SS_TIME_MAX_NS ("never
 * finishes": an SLO admission rejects the request).  Policies only compare
 * the estimate (admission-slo.c, in double), so no event time derives from
 * it; a step that really does not fit fails the run in start_step. */
static int64_t host_prefill_ns(void *ctx, int32_t tokens)
{
	struct engine *e = ctx;
	struct cost_item it = { .tokens = tokens > 0 ? tokens : 1, .context = 0 };
	struct cost_step st = { .items = &it, .n_items = 1, .n_prefill = 1, .n_emit = 1,
				.total_tokens = it.tokens };
	struct cost_result res;

	if (cost_model_predict(e->pools[0].cm, &st, &res, NULL))
		return SS_TIME_MAX_NS;
	return res.duration_ns;
}

/* ---- set-up ------------------------------------------------------------- */

/* The step the activation reserve is sized for: an 8192-token step of 256
 * sequences (the vllm policy's defaults), or, under an engine profile with
 * kv_profile_step, the batch policy's own: the values its spec gives for
 * its token budget and sequence limit (the keys servesim plan sweeps,
 * batch_policy_ops.plan_chunk_key and plan_batch_key), the fixed step's
 * where the spec leaves one out or the policy has none.  vLLM's profiling
 * run is a forward pass of max_num_batched_tokens tokens in max_num_seqs
 * sequences (worker.determine_num_available_blocks), so with chunked
 * prefill off (V0: max_num_batched_tokens = max_model_len) a long context
 * costs the cache that step's activations. */
#define RESERVE_STEP_TOKENS 8192
#define RESERVE_STEP_SEQS 256

static void reserve_step(const struct engine_config *c, double *tokens, double *seqs)
{
	struct batch_policy_ops ops;
	struct ss_params p;
	struct ss_error ignored;
	const char *keys[2];
	double *out[2] = { tokens, seqs };

	*tokens = RESERVE_STEP_TOKENS;
	*seqs = RESERVE_STEP_SEQS;
	if (!c->engine || !c->engine->kv_profile_step || !c->policy ||
	    ss_params_parse(&p, "--policy", c->policy, true, &ignored) ||
	    batch_policy_lookup("--policy", p.name, &ops, &ignored))
		return;   /* a bad spec is reported where the policy is made */
	keys[0] = ops.plan_chunk_key;
	keys[1] = ops.plan_batch_key;
	for (int k = 0; k < 2; k++) {
		int64_t v;

		if (keys[k] && ss_params_has(&p, keys[k]) &&
		    !ss_params_int(&p, keys[k], 0, &v, &ignored) && v > 0)
			*out[k] = (double)v;
	}
}

/* Per-GPU memory held back from the KV cache for activations, CUDA graphs,
 * the CUDA context and NCCL buffers (docs/kv-cache.md): 1 GiB fixed plus the
 * activations of a step of `tokens` tokens and the fp32 logits of `seqs`
 * sequences (reserve_step). */
static double estimate_reserve(const struct model_spec *m, int tp, double tokens, double seqs)
{
	double act = tokens * (4.0 * m->hidden + 2.0 * m->intermediate / tp) * m->dtype_bytes;
	double logits = seqs * m->vocab / tp * 4.0;

	return 1024.0 * 1024 * 1024 + act + logits;
}

/* The routed experts' weight bytes (all MoE layers, every expert): their
 * linear weights at weight dtype w, biases at the model's dtype. */
static double routed_expert_bytes(const struct model_spec *m, enum ss_dtype w)
{
	double d = m->hidden, ff = m->moe_intermediate;
	double mats = m->mlp == MLP_GATED ? 3.0 : 2.0;
	double bias = m->linear_bias ? (mats - 1.0) * ff + d : 0.0;

	return (double)model_moe_layers(m) * m->n_experts *
	       (mats * d * ff * ss_dtype_bytes(model_weights_dtype(m, w), m) +
		bias * m->dtype_bytes);
}

/* Weight bytes one GPU holds (docs/kv-cache.md).  Tensor parallelism: a
 * tp-th of everything.  With data-parallel attention D (attention ranks of
 * A = tp / D GPUs): everything but the routed experts -- attention, dense
 * MLPs, router, shared experts, embeddings, LM head -- is replicated in
 * each rank and sharded A ways (vLLM's DP + EP placement, SGLang's with
 * --enable-dp-lm-head), and the routed experts are spread over all tp
 * GPUs (n_experts / E experts per GPU group, each sharded tp / E ways:
 * routed / tp either way).  Expert parallelism alone changes nothing per
 * GPU: routed / tp as under TP. */
double engine_weight_bytes_per_gpu(const struct engine_config *c)
{
	const struct model_spec *m = c->model;
	double all = model_weight_bytes_as(m, c->weight_dtype), routed;
	/* the drafter's own weights (speculative decoding), sharded like the target's */
	double draft = c->spec ? spec_draft_weight_bytes(c->spec, c->weight_dtype) / c->tp : 0.0;

	/* multi-LoRA: the GPU adapter slots (lora_gpu_bytes), beside the
	 * weights, out of what the KV cache gets */
	if (c->lora)
		draft += lora_gpu_bytes(c->lora, m, c->tp);

	if (c->dp_attention <= 1 || m->n_experts <= 0)
		return all / c->tp + draft;
	routed = routed_expert_bytes(m, c->weight_dtype);
	return (all - routed) / (c->tp / c->dp_attention) + routed / c->tp + draft;
}

void engine_kv_rule_of(const struct engine_config *c, struct engine_kv_rule *r)
{
	const struct engine_profile *p = c->engine;

	if (c->gpu_mem_util > 0)
		*r = (struct engine_kv_rule){ ENGINE_KV_TOTAL, c->gpu_mem_util,
					      "--gpu-memory-utilization" };
	else if (c->kv_free_fraction > 0)
		*r = (struct engine_kv_rule){ ENGINE_KV_FREE, c->kv_free_fraction,
					      "--kv-free-fraction" };
	else if (p && (p->kv_memory != ENGINE_KV_TOTAL || p->kv_fraction > 0))
		*r = (struct engine_kv_rule){ p->kv_memory, p->kv_fraction > 0 ? p->kv_fraction
									 : ENGINE_KV_FRACTION_DEFAULT,
					      p->name };
	else
		*r = (struct engine_kv_rule){ ENGINE_KV_TOTAL, ENGINE_KV_FRACTION_DEFAULT, "default" };
}

void engine_kv_rule_describe(const struct engine_config *c, char *buf, size_t len)
{
	struct engine_kv_rule r;

	engine_kv_rule_of(c, &r);
	snprintf(buf, len, "%g of %s (%s, %s%s)", r.fraction,
		 r.memory == ENGINE_KV_FREE ? "the memory free after weights and activations"
					    : "GPU memory for weights, activations and KV",
		 r.memory == ENGINE_KV_FREE ? "TensorRT-LLM's free_gpu_memory_fraction"
					    : "vLLM's gpu_memory_utilization",
		 r.from[0] == '-' || !strcmp(r.from, "default") ? "" : "engine ", r.from);
}

int32_t engine_max_context(const struct engine_config *c)
{
	return c->max_context > 0 ? c->max_context : c->model->max_context;
}

int engine_block_size(const struct engine_config *c)
{
	if (c->block_size > 0)
		return c->block_size;
	if (c->engine && c->engine->kv_block_size > 0)
		return c->engine->kv_block_size;
	return ENGINE_BLOCK_SIZE_DEFAULT;
}

/* KV bytes per GPU the rule leaves of hbm bytes after w bytes of weights
 * and the reserve (engine-profile.h, enum engine_kv_memory); <= 0 when
 * nothing is left. */
static double kv_bytes(const struct engine_kv_rule *r, double hbm, double w, double reserve)
{
	if (r->memory == ENGINE_KV_FREE)
		return r->fraction * (hbm - w - reserve);
	return r->fraction * hbm - w - reserve;
}

/* What a model that does not fit ran into under rule r, with w bytes of
 * weights and the reserve on a GPU of hbm bytes: "exceeding 90% of 80.0
 * GiB (gpu_memory_utilization, from default)" or "leaving 0.2 GiB of 80.0
 * GiB free, 90% of which (kv_free_fraction, from engine trtllm) holds less
 * than one KV block". */
static void kv_shortfall(const struct engine_kv_rule *r, double hbm, double w, double reserve,
			 char *buf, size_t len)
{
	const char *eng = r->from[0] == '-' || !strcmp(r->from, "default") ? "" : "engine ";
	double left = hbm - w - reserve;

	if (r->memory == ENGINE_KV_FREE && left > 0)
		snprintf(buf, len, "leaving %.1f GiB of %.1f GiB free, %.0f%% of which (kv_free_fraction, from %s%s) holds less than one KV block",
			 left / 1073741824.0, hbm / 1073741824.0, r->fraction * 100, eng, r->from);
	else if (r->memory == ENGINE_KV_FREE)
		snprintf(buf, len, "exceeding the GPU's %.1f GiB (kv_free_fraction %g of what they leave, from %s%s)",
			 hbm / 1073741824.0, r->fraction, eng, r->from);
	else
		snprintf(buf, len, "exceeding %.0f%% of %.1f GiB (gpu_memory_utilization, from %s%s)",
			 r->fraction * 100, hbm / 1073741824.0, eng, r->from);
}

/* (engine.h) Each stage's tp GPUs hold the weights of its layers
 * (the embedding on the first stage, the LM head -- the embedding again
 * when tied, as vLLM loads it there -- and the final norm on the last)
 * and the KV of its layers.  Expert parallelism within the stage changes
 * nothing per GPU (engine_weight_bytes_per_gpu).  A model whose layers
 * are alike prorates both by layer count; one whose are not (dense and
 * MoE, local and full attention) counts the stage's own layers, from its
 * slice (model_slice): MoE layers' experts, local layers' KV as
 * engine_kv_token_bytes_gpu charges them. */
void engine_pp_stage_bytes(const struct engine_config *c, int s, double *weights,
			   double *kv_token)
{
	const struct model_spec *m = c->model;
	double d = m->hidden;
	double emb = ((double)m->vocab * d + (double)m->pos_embeddings * d) * m->dtype_bytes;
	double head = (double)m->vocab * d * m->dtype_bytes;
	double total = model_weight_bytes_as(m, c->weight_dtype);
	int ls = cost_pp_stage_layers(m->n_layers, c->pp, s);
	struct model_spec slice, none;
	struct engine_config sc = *c;

	if (model_layers_alike(m)) {
		/* the layers' weights (and the final norm, kept with them);
		 * one layer's share of a token's KV bytes per GPU (MLA's
		 * latent and local layers' window as
		 * engine_kv_token_bytes_gpu charges them) */
		double layers = total - emb - (m->tied_embeddings ? 0.0 : head);

		*weights = (layers * ls / m->n_layers + (s == 0 ? emb : 0.0) +
			    (s == c->pp - 1 ? head : 0.0)) / c->tp;
		*kv_token = engine_kv_token_bytes_gpu(c) / m->n_layers * ls;
		return;
	}
	model_slice(m, cost_pp_stage_first(m->n_layers, c->pp, s), ls, &slice);
	model_slice(m, 0, 0, &none);   /* embeddings, final norm, LM head */
	{
		double rest = model_weight_bytes_as(&none, c->weight_dtype);
		double w = model_weight_bytes_as(&slice, c->weight_dtype) - rest;

		if (s == 0)
			w += emb;
		if (s == c->pp - 1)   /* the final norm and the LM head */
			w += rest - emb + (m->tied_embeddings ? head : 0.0);
		*weights = w / c->tp;
	}
	sc.model = &slice;
	*kv_token = engine_kv_token_bytes_gpu(&sc);
}

/* KV blocks an instance of pp > 1 stages holds: a block spans every
 * stage, so the instance has the blocks of the stage with the least room
 * (engine_pp_stage_bytes).  *blocks < 1 when one does not fit (then *worst is
 * that stage). */
static double pp_kv_blocks(const struct engine_config *c, const struct engine_kv_rule *rule,
			   double reserve, int *worst, double *worst_weights)
{
	double best = -1.0;

	for (int s = 0; s < c->pp; s++) {
		double w, kv, b;

		engine_pp_stage_bytes(c, s, &w, &kv);
		b = floor(kv_bytes(rule, c->gpu->hbm_bytes, w, reserve) /
			  (kv * engine_block_size(c)));
		if (best < 0 || b < best) {
			best = b;
			*worst = s;
			*worst_weights = w;
		}
	}
	return best;
}

static double kv_token_bytes_gpu(const struct engine_config *c);

/* With speculative decoding, a token also holds the drafter's KV (a draft
 * model's, an EAGLE head's or MTP layer's one layer), sharded likewise. */
double engine_kv_token_bytes_gpu(const struct engine_config *c)
{
	double b = kv_token_bytes_gpu(c);

	if (c->spec && spec_draft_kv_bytes_per_token(c->spec, c->kv_dtype) > 0) {
		struct engine_config d = *c;

		d.model = &c->spec->draft;
		d.spec = NULL;
		b += kv_token_bytes_gpu(&d);
	}
	return b;
}

static double kv_token_bytes_gpu(const struct engine_config *c)
{
	const struct model_spec *m = c->model;
	/* KV heads are split across the GPUs of one attention rank (tp, or
	 * tp / dp_attention), replicated when fewer than that. */
	int ta = c->dp_attention > 1 ? c->tp / c->dp_attention : c->tp;
	int kv_heads_per_gpu = m->n_kv_heads >= ta ? m->n_kv_heads / ta : 1;
	double kb = ss_dtype_bytes(c->kv_dtype, m);
	int local = model_local_layers(m);

	/* MLA: every GPU holds the whole latent and RoPE key of each token
	 * and layer (vLLM and SGLang replicate it across TP ranks: all heads
	 * read the one latent), so it is not divided by tp */
	if (m->kv_lora_rank > 0)
		return m->n_layers * ((double)m->kv_lora_rank + m->qk_rope_head_dim) * kb;
	if (local > 0) {
		/* vLLM's hybrid allocator frees a local layer's blocks once
		 * they fall out of the window: a request of L tokens holds L
		 * tokens in each full layer and min(L, W + block) (sliding)
		 * or min(L, C) (chunked) in each local one.  The pool is in
		 * blocks of every layer, so a token is charged the bytes of a
		 * request of the reference length, divided by that length */
		double L = c->kv_ref_tokens > 0 ? c->kv_ref_tokens : engine_max_context(c);
		double keep = m->sliding_window > 0 ? (double)m->sliding_window + engine_block_size(c)
						      : (double)m->attn_chunk;
		double layer = 2.0 * kv_heads_per_gpu * m->head_dim * kb;

		if (keep > L)
			keep = L;
		return layer * ((double)(m->n_layers - local) * L + (double)local * keep) / L;
	}
	return 2.0 * m->n_layers * kv_heads_per_gpu * m->head_dim * kb;
}

int engine_kv_capacity(const struct engine_config *c, int32_t *blocks_out, struct ss_error *err)
{
	const struct model_spec *m = c->model;
	/* GPUs sharing one KV cache and one batch: an attention rank's */
	int ta = c->dp_attention > 1 ? c->tp / c->dp_attention : c->tp;
	double step_tokens, step_seqs, reserve, weights = engine_weight_bytes_per_gpu(c);
	double per_token_gpu = engine_kv_token_bytes_gpu(c);
	struct engine_kv_rule rule;
	char why[320];
	double blocks;

	if (c->kv_blocks_override > 0) {
		*blocks_out = (int32_t)c->kv_blocks_override;
		return 0;
	}
	reserve_step(c, &step_tokens, &step_seqs);
	reserve = c->activation_reserve_bytes >= 0 ? c->activation_reserve_bytes
						   : estimate_reserve(m, ta, step_tokens, step_seqs);
	engine_kv_rule_of(c, &rule);
	if (c->pp > 1) {
		int worst = 0;

		blocks = pp_kv_blocks(c, &rule, reserve, &worst, &weights);
		if (blocks < 1) {
			kv_shortfall(&rule, c->gpu->hbm_bytes, weights, reserve, why, sizeof(why));
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s does not fit on %d x %d x %s: stage %d has %.1f GiB of weights and %.1f GiB reserved per GPU, %s; use more --tp or --pp or a larger GPU",
					    m->name, c->tp, c->pp, c->gpu->name, worst,
					    weights / 1073741824.0, reserve / 1073741824.0, why);
		}
		*blocks_out = blocks > INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)blocks;
		return 0;
	}
	blocks = floor(kv_bytes(&rule, c->gpu->hbm_bytes, weights, reserve) /
		       (per_token_gpu * engine_block_size(c)));
	if (blocks < 1) {
		kv_shortfall(&rule, c->gpu->hbm_bytes, weights, reserve, why, sizeof(why));
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "%s does not fit on %d x %s: %.1f GiB of weights and %.1f GiB reserved per GPU, %s; use more --tp or a larger GPU",
				    m->name, c->tp, c->gpu->name, weights / 1073741824.0,
				    reserve / 1073741824.0, why);
	}
	*blocks_out = blocks > INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)blocks;
	return 0;
}

/* The pools: one colocated pool, or a prefill and a decode pool placed one
 * after the other on nodes of gpus_per_node GPUs; each sized for its GPU
 * and tp. */
static int make_pools(struct engine *e, struct ss_error *err)
{
	const struct engine_config *c = &e->cfg;
	uint32_t gpu = 0, inst = 0;
	const struct gpu_spec *gpus[3] = { c->gpu, c->pools[0].gpu, c->pools[1].gpu };

	for (int k = 0; k < 3; k++)
		if (gpus[k] && precision_check(gpus[k], c->weight_dtype, c->kv_dtype, err))
			return -EINVAL;
	if (c->semi_pd_sm > 0) {
		/* Semi-PD: each GPU's compute (SMs), power and price split
		 * between its prefill and its decode instance; both see the
		 * whole memory bandwidth (contention between them is not
		 * modelled: optimistic when both are memory-bound at once). */
		double f[2] = { c->semi_pd_sm, 1 - c->semi_pd_sm };
		double kv = c->semi_pd_kv > 0 ? c->semi_pd_kv : 0.25;
		int32_t blocks;
		int rc;

		if (c->pp > 1 || c->pools[0].pp > 1 || c->pools[1].pp > 1)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--semi-pd with --pp: not modelled (a semi-PD instance is one GPU's share)");
		if (!(c->semi_pd_sm < 1) || !(kv < 1) || c->pools[0].n || c->pools[1].n)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--semi-pd: expected 0 < sm < 1 and 0 < kv < 1, without --prefill-instances/--decode-instances");
		if (c->ep > 1 || c->dp_attention > 1)
			return ss_error_set(err, -ENOTSUP, NULL, 0,
					    "--semi-pd: not modelled with --ep or --dp-attention");
		rc = engine_kv_capacity(c, &blocks, err);
		if (rc)
			return rc;
		for (int k = 0; k < 2; k++) {
			struct gpu_spec *g = &e->semi_gpu[k];

			*g = *c->gpu;
			snprintf(g->name, sizeof(g->name), "%.40s/%s", c->gpu->name,
				 k ? "decode" : "prefill");
			g->bf16_flops *= f[k];
			g->fp8_flops *= f[k];
			g->fp4_flops *= f[k];
			g->tdp_w *= f[k];
			g->idle_w *= f[k];
			g->host_gap_w *= f[k];   /* stays within idle..tdp */
			g->cost_per_hour *= f[k];
			/* a share of a GPU is no GPU of its family: "auto"
			 * prices it by the roofline, as before the scaled
			 * model (scaling its GPU's tables to a share of the
			 * SMs is not validated) */
			g->family[0] = '\0';
			e->pools[k] = (struct pool){ .role = k ? POOL_DECODE : POOL_PREFILL,
						     .n = c->n_instances, .gpu = g, .tp = c->tp,
						     .first = k ? c->n_instances : 0, .pp = 1 };
			e->pools[k].kv_blocks = (int32_t)(blocks * (k ? 1 - kv : kv));
			e->pools[k].kv_bytes_per_block =
				model_kv_bytes_per_token_as(c->model, c->kv_dtype) * engine_block_size(c);
			if (e->pools[k].kv_blocks < 1)
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "--semi-pd: kv=%g leaves a pool without KV blocks", kv);
		}
		e->semi_pd = true;
		e->n_pools = 2;
		e->n_inst = 2 * c->n_instances;
		return 0;
	}
	if (engine_config_disaggregated(c)) {
		e->n_pools = 2;
		for (int k = 0; k < ENGINE_POOLS; k++) {
			struct engine_pool_config p = engine_pool_resolve(c, k);

			e->pools[k] = (struct pool){ .role = k ? POOL_DECODE : POOL_PREFILL, .n = p.n,
						     .gpu = p.gpu, .tp = p.tp, .ep = p.ep,
						     .dp = p.dp_attention, .pp = p.pp };
		}
	} else if (c->pools[0].n > 0 || c->pools[1].n > 0) {
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--prefill-instances and --decode-instances: expected both (disaggregated) or neither, got %u and %u",
				    c->pools[0].n, c->pools[1].n);
	} else {
		e->n_pools = 1;
		e->pools[0] = (struct pool){ .role = POOL_MIXED, .n = c->n_instances,
					     .gpu = c->gpu, .tp = c->tp, .ep = c->ep,
					     .dp = c->dp_attention, .pp = c->pp };
	}
	for (uint32_t k = 0; k < e->n_pools; k++) {
		struct pool *pl = &e->pools[k];
		struct engine_config pc = *c;
		/* the options that set this pool's tp, ep, dp_attention and pp,
		 * as errors name them */
		int id = pl->role == POOL_MIXED ? -1 : pl->role == POOL_DECODE ? ENGINE_POOL_DECODE :
			 ENGINE_POOL_PREFILL;
		char tp_opt[32], ep_opt[32], dp_opt[32], pp_opt[32];
		int rc;

		engine_pool_option(id, "tp", tp_opt, sizeof(tp_opt));
		engine_pool_option(id, "ep", ep_opt, sizeof(ep_opt));
		engine_pool_option(id, "dp-attention", dp_opt, sizeof(dp_opt));
		engine_pool_option(id, "pp", pp_opt, sizeof(pp_opt));
		if (pl->tp < 1 || pl->tp > 64)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: expected 1..64 GPUs per instance, got %d", tp_opt, pl->tp);
		if (pl->pp == 0)
			pl->pp = 1;
		if (pl->pp < 1 || pl->pp > 64 || pl->pp > c->model->n_layers)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s: expected 1..%d pipeline stages (at most 64 and %s's %d layers), got %d",
					    pp_opt, c->model->n_layers < 64 ? c->model->n_layers : 64,
					    c->model->name, c->model->n_layers, pl->pp);
		if (pl->pp > 1 && c->executor)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--pp with a live executor: not supported (the pipeline is simulated)");
		if (pl->pp > 1 && engine_profile_burst(c->engine) > 1)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--pp with engine %s's multi-step scheduling (scheduler_steps=%u): not modelled",
					    c->engine->name, engine_profile_burst(c->engine));
		if (pl->n < 1 || pl->n > 100000)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "expected 1..100000 instances per pool, got %u", pl->n);
		rc = cost_layout_check(c->model, pl->tp, pl->ep, pl->dp, tp_opt, ep_opt, dp_opt, err);
		if (rc)
			return rc;
		pc.gpu = pl->gpu;
		pc.tp = pl->tp;
		pc.ep = pl->ep;
		pc.dp_attention = pl->dp;
		pc.pp = pl->pp;
		if (pl->pp > 1 && pl->dp > 1)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "%s with %s: not modelled yet (pipelines of attention ranks that run their MoE layers together)",
					    pp_opt, dp_opt);
		if (pl->dp > 1) {
			/* the pool's units are attention ranks: dp per instance,
			 * each of tp / dp GPUs (engine-int.h), stepping in
			 * lock-step one step at a time (step-dp.c) */
			if (engine_profile_burst(c->engine) > 1)
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "%s with engine %s's multi-step scheduling (scheduler_steps=%u): not modelled",
						    dp_opt, c->engine->name,
						    engine_profile_burst(c->engine));
			if (pl->pp > 1)
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "%s with --pp: not modelled (lock-step ranks run one stage)",
						    dp_opt);
			if (pl->n > 100000 / (uint32_t)pl->dp)
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "expected 1..100000 attention ranks per pool, got %u instances x %d",
						    pl->n, pl->dp);
			pl->n *= (uint32_t)pl->dp;
			pl->tp /= pl->dp;
		}
		pl->first = inst;
		pl->first_gpu = gpu;
		inst += pl->n;
		gpu += pl->n * (uint32_t)pl->tp * (uint32_t)pl->pp;
		pl->kv_bytes_per_block = model_kv_bytes_per_token_as(c->model, c->kv_dtype) *
					 engine_block_size(c);
		/* a disaggregated pool's own policy limits set its step */
		if (id >= 0 && c->pools[id].policy)
			pc.policy = c->pools[id].policy;
		rc = engine_kv_capacity(&pc, &pl->kv_blocks, err);
		if (rc)
			return rc;
	}
	e->n_inst = inst;
	return 0;
}

static int validate(const struct engine_config *c, struct ss_error *err)
{
	int rc;

	if (!c->model || !c->gpu)
		return ss_error_set(err, -EINVAL, NULL, 0, "a model and a GPU are required");
	if (model_check_priced(c->model, err))
		return -ENOTSUP;       /* before the memory check: not "does not fit" */
	if (c->tp < 1 || c->tp > 64)
		return ss_error_set(err, -EINVAL, NULL, 0, "--tp: expected 1..64, got %d", c->tp);
	if (c->n_instances < 1 || c->n_instances > 100000)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--instances: expected 1..100000, got %u", c->n_instances);
	if (c->block_size < 0 || c->block_size > 4096)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--block-size: expected 1..4096 tokens, got %d", c->block_size);
	if (!(c->gpu_mem_util >= 0 && c->gpu_mem_util <= 1))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--gpu-memory-utilization: expected a fraction in (0, 1], got %g",
				    c->gpu_mem_util);
	if (!(c->kv_free_fraction >= 0 && c->kv_free_fraction <= 1))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--kv-free-fraction: expected a fraction in (0, 1], got %g",
				    c->kv_free_fraction);
	if (c->gpu_mem_util > 0 && c->kv_free_fraction > 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--gpu-memory-utilization and --kv-free-fraction: expected one of them (two rules for one KV cache)");
	if (c->sample_interval_ns < 0)
		return ss_error_set(err, -EINVAL, NULL, 0, "sample interval must be >= 0");
	rc = engine_spec_check(c, err);
	return rc ? rc : engine_lora_check(c, err);
}

int engine_lora_check(const struct engine_config *c, struct ss_error *err)
{
	const char *why = NULL;

	if (!c->lora)
		return 0;
	/* A live executor runs the adapters (executor.h's runs_lora) with the
	 * same component deciding residency; what it cannot run is refused:
	 * storage reads of adapters host memory does not hold, and adapters
	 * on the MLP (the synthetic model adapts q, k, v and o). */
	if (c->executor && !(c->executor->version >= 3 && c->executor->runs_lora))
		why = "an executor that does not run adapters";
	else if (c->executor && c->lora->max_cpu_loras &&
		 (c->lora->from_trace || c->lora->max_cpu_loras < c->lora->n_adapters))
		why = "a live executor and max_cpu_loras below the adapters: reading adapters from storage is not modelled live (every adapter is held in host memory)";
	else if (c->executor && c->lora->unified)
		why = "a live executor and paging=unified: the synthetic model holds adapters in slots";
	else if (c->executor && c->lora->targets != LORA_TARGET_QKVO)
		why = "a live executor and targets=all: the live model adapts q, k, v and o only";
	else if (engine_config_disaggregated(c))
		why = "disaggregated pools: not modelled yet";
	else if (c->pp > 1)
		why = "--pp: not modelled yet";
	else if (c->dp_attention > 1)
		why = "--dp-attention: not modelled yet";
	else if (c->semi_pd_sm > 0)
		why = "--semi-pd: not modelled yet";
	else if (c->spec)
		why = "--spec: not modelled yet";
	else if (engine_profile_burst(c->engine) > 1)
		why = "multi-step scheduling (the engine profile's scheduler_steps > 1): not modelled yet";
	if (why)
		return ss_error_set(err, -ENOTSUP, NULL, 0, "--lora with %s", why);
	return lora_model_check(c->lora, c->model, err);
}

int engine_spec_check(const struct engine_config *c, struct ss_error *err)
{
	if (c->spec) {
		const char *why = NULL;

		if (c->executor && c->spec->draft_priced && !c->draft_executor)
			why = "a live executor and no executor for the drafter";
		else if (c->pp > 1 || c->pools[0].pp > 1 || c->pools[1].pp > 1)
			why = "--pp: not modelled yet";
		else if (c->dp_attention > 1 || c->pools[0].dp_attention > 1 ||
			 c->pools[1].dp_attention > 1)
			why = "--dp-attention: not modelled yet";
		else if (c->semi_pd_sm > 0)
			why = "--semi-pd: not modelled yet";
		else if (engine_profile_burst(c->engine) > 1)
			why = "multi-step scheduling (the engine profile's scheduler_steps > 1): vLLM never combined them";
		if (why)
			return ss_error_set(err, -ENOTSUP, NULL, 0, "--spec with %s", why);
	}
	return 0;
}

static int make_policies(struct engine *e, struct ss_error *err)
{
	struct ss_params p;
	int rc;

	rc = ss_params_parse(&p, "--policy", e->cfg.policy, true, err);
	if (rc)
		return rc;
	rc = batch_policy_lookup("--policy", p.name, &e->bops_r, err);
	if (rc)
		return rc;
	e->bops = &e->bops_r;
	for (uint32_t i = 0; i < e->n_inst; i++) {
		enum pool_role role = e->inst[i].pl->role;
		/* a disaggregated pool's own spec (pools 0 and 1 are
		 * engine_config.pools[0] and [1]) */
		const char *own = e->semi_pd || role == POOL_MIXED ? NULL :
				  e->cfg.pools[e->inst[i].pl - e->pools].policy;
		struct ss_params pi = p;

		if (own) {
			/* a pool's own limits: parsed per instance, as the
			 * shared spec's copy is */
			rc = ss_params_parse(&pi, "--policy", own, true, err);
			if (rc)
				return rc;
			if (strcmp(pi.name, p.name))
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "the %s pool's policy '%s': expected policy %s as the other pool's",
						    role == POOL_PREFILL ? "prefill" : "decode", own, p.name);
		}
		e->inst[i].batch_priv = calloc(1, e->bops->priv_size);
		if (!e->inst[i].batch_priv)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		rc = e->bops->init(e->inst[i].batch_priv, &pi, err);
		if (!rc)
			rc = ss_params_check_unused(&pi, err);
		if (rc)
			return rc;
		/* the steady-decode path steps the whole running set; a
		 * pipeline steps the requests in no batch in flight */
		e->inst[i].steady.max = e->cfg.steady_off ||
					!e->inst[i].shape->steady ? 0 :
					e->bops->steady_decode(e->inst[i].batch_priv);
	}

	for (uint32_t k = 0; k < e->n_pools; k++) {
		struct pool *pl = &e->pools[k];
		const char *opt = pl->role == POOL_DECODE ? "--pairing" : "--router";
		const char *spec = pl->role == POOL_DECODE ? e->cfg.pairing : e->cfg.router;

		rc = ss_params_parse(&p, opt, spec ? spec : pl->role == POOL_DECODE ? "lor" : "rr", true, err);
		if (rc)
			return rc;
		rc = router_lookup(opt, p.name, &pl->rops_r, err);
		if (rc)
			return rc;
		pl->rops = &pl->rops_r;
		pl->router_priv = calloc(1, pl->rops->priv_size);
		if (!pl->router_priv)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		rc = pl->rops->init(pl->router_priv, &p, pl->n, err);
		if (!rc)
			rc = ss_params_check_unused(&p, err);
		if (rc)
			return rc;
	}

	rc = ss_params_parse(&p, "--order", e->cfg.order, true, err);
	if (rc)
		return rc;
	rc = order_lookup("--order", p.name, &e->oops_r, err);
	if (rc)
		return rc;
	e->oops = &e->oops_r;
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct ss_params pi = p;

		e->inst[i].order_priv = calloc(1, e->oops->priv_size);
		if (!e->inst[i].order_priv)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		rc = e->oops->init(e->inst[i].order_priv, &pi, e->n_tenants, err);
		if (!rc)
			rc = ss_params_check_unused(&pi, err);
		if (rc)
			return rc;
	}

	rc = ss_params_parse(&p, "--victim", e->cfg.victim, true, err);
	if (rc)
		return rc;
	rc = victim_lookup("--victim", p.name, &e->vops_r, err);
	if (rc)
		return rc;
	e->vops = &e->vops_r;
	rc = ss_params_check_unused(&p, err);
	if (rc)
		return rc;

	rc = ss_params_parse(&p, "--admission", e->cfg.admission, true, err);
	if (rc)
		return rc;
	rc = admission_lookup("--admission", p.name, &e->aops_r, err);
	if (rc)
		return rc;
	e->aops = &e->aops_r;
	e->adm_priv = calloc(1, e->aops->priv_size);
	if (!e->adm_priv)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	rc = e->aops->init(e->adm_priv, &p, err);
	if (!rc)
		rc = ss_params_check_unused(&p, err);
	return rc;
}

bool engine_uses_predictions(const struct engine *e)
{
	return e->oops->uses_predictions ||
	       (e->n_inst > 0 && e->bops->uses_predictions(e->inst[0].batch_priv));
}

/* Output-length predictions (req_view.predicted_output) from their own
 * random stream: the truth, or the truth times exp(N(0, sigma^2)).
 * Without --predictor: the oracle when the order or the batch policy reads
 * predictions (every instance's batch policy has the same parameters). */
static int make_predictions(struct engine *e, struct ss_error *err)
{
	const char *spec = e->cfg.predictor;
	struct ss_params p;
	double sigma = 0;
	int rc;

	if (!spec)
		spec = engine_uses_predictions(e) ? "oracle" : "none";
	rc = ss_params_parse(&p, "--predictor", spec, true, err);
	if (rc)
		return rc;
	if (!strcmp(p.name, "none") || !strcmp(p.name, "oracle")) {
		rc = ss_params_check_unused(&p, err);
	} else if (!strcmp(p.name, "noisy")) {
		rc = ss_params_double(&p, "sigma", 0.5, &sigma, err);
		if (!rc)
			rc = ss_params_check_unused(&p, err);
		if (!rc && !(sigma >= 0 && sigma <= 10))
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "--predictor noisy: expected 0 <= sigma <= 10, got %g", sigma);
	} else {
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "--predictor: expected none, oracle or noisy[:sigma=S], got '%s'",
				  p.name);
	}
	if (rc)
		return rc;
	if (!strcmp(p.name, "noisy"))
		snprintf(e->predictor, sizeof(e->predictor), "noisy:sigma=%g", sigma);
	else
		snprintf(e->predictor, sizeof(e->predictor), "%s", p.name);
	if (!strcmp(p.name, "none"))
		return 0;
	/* drawn at each arrival, in workload order (engine.c) */
	e->pred_rng = ss_rng_new(e->cfg.seed, SS_RNG_PREDICTOR);
	if (!e->pred_rng)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	e->pred_on = true;
	e->pred_sigma = sigma;
	return 0;
}

/* Closed loop (engine_config.concurrency): the clients' send events and
 * think-time stream.  All free until run_loop sends the first requests. */
static int make_clients(struct engine *e, struct ss_error *err)
{
	uint32_t n;
	int rc;

	if (e->cfg.concurrency == 0) {
		if (e->cfg.think_time || e->cfg.send_until_ns || e->cfg.ramp_ns)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "a think time, ramp or send limit needs a closed loop: expected --concurrency N");
		return 0;
	}
	if (e->cfg.ramp_ns < 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--ramp-up: expected a time >= 0 s, got %g s",
				    (double)e->cfg.ramp_ns * 1e-9);
	if (e->cfg.send_until_ns < 0)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--duration: expected a time > 0 s, got %g s",
				    (double)e->cfg.send_until_ns * 1e-9);
	rc = think_time_parse(e->cfg.think_time, &e->think, err);
	if (rc)
		return rc;
	e->closed = true;
	n = e->n_req < e->cfg.concurrency ? (uint32_t)e->n_req : e->cfg.concurrency;
	e->n_clients = n;
	e->ev_send = calloc(n ? n : 1, sizeof(*e->ev_send));
	e->send_free = calloc(n ? n : 1, sizeof(*e->send_free));
	e->send_at = calloc(n ? n : 1, sizeof(*e->send_at));
	e->freed = calloc(n ? n : 1, sizeof(*e->freed));
	e->think_rng = ss_rng_new(e->cfg.seed, SS_RNG_THINK);
	if (!e->ev_send || !e->send_free || !e->send_at || !e->freed || !e->think_rng)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory for %u clients", n);
	/* popped from the top: client 0's event first */
	for (uint32_t k = 0; k < n; k++) {
		event_init(&e->ev_send[k], EV_ARRIVAL, EV_ARRIVAL, k);
		e->send_free[k] = n - 1 - k;
	}
	e->n_send_free = n;
	return 0;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Tenants as dense indices 0..n-1 in order of their source ids. */
static int map_tenants(struct engine *e, struct ss_error *err)
{
	int32_t *ids = malloc(sizeof(*ids) * (e->n_req ? e->n_req : 1));
	uint32_t n = 0;

	if (!ids)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (uint64_t i = 0; i < e->n_req; i++)
		ids[i] = e->wl->req[i].tenant;
	qsort(ids, e->n_req, sizeof(*ids), cmp_i32);
	for (uint64_t i = 0; i < e->n_req; i++)
		if (n == 0 || ids[i] != ids[n - 1])
			ids[n++] = ids[i];
	if (n == 0)
		ids[n++] = 0;
	/* keep n ids, not one per request, for the run */
	e->tenant_ids = realloc(ids, n * sizeof(*ids));
	if (!e->tenant_ids)
		e->tenant_ids = ids;
	ids = e->tenant_ids;
	e->n_tenants = n;
	e->tenant_service = calloc(n, sizeof(*e->tenant_service));
	if (!e->tenant_service)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (uint64_t i = 0; i < e->n_req; i++) {
		int32_t *t = bsearch(&e->wl->req[i].tenant, ids, n, sizeof(*ids), cmp_i32);

		e->rec[i].tenant = (int32_t)(t - ids);
		e->rec[i].tenant_id = *t;
	}
	if (e->n_req > 0)
		e->service_window_ns = e->wl->req[e->n_req - 1].arrival_ns - e->wl->req[0].arrival_ns;
	return 0;
}

/* ---- memory estimate ---------------------------------------------------- */

/* Bytes of one instance's KV pool of `blocks` blocks (kvpool.c): the free
 * stack and reference counts; with the prefix cache, hashes, the LRU links
 * and the open-addressing table (a power of two >= 2 x blocks, >= 16 slots);
 * and the block tables of the requests holding the blocks, at most one
 * entry per block, twice that for the arrays' doubling growth. */
static uint64_t kv_pool_bytes(int64_t blocks, bool cache)
{
	uint64_t n = blocks > 0 ? (uint64_t)blocks : 1;
	uint64_t bytes = n * (sizeof(int32_t) + sizeof(uint32_t)) + 2 * n * sizeof(int32_t);

	if (cache) {
		uint64_t slots = 16;

		while (slots < 2 * n)
			slots *= 2;
		bytes += n * (sizeof(uint64_t) + 2 * sizeof(int32_t)) + slots * sizeof(int32_t);
	}
	return bytes;
}

/* The process's own needs besides the engine (code, catalogs, a cost
 * model's tables, output buffers), bytes: a round figure above what a
 * 1-request run peaks at. */
#define ENG_BASE_BYTES (64ull << 20)

int engine_memory_estimate(const struct engine_config *cfg, uint64_t n_req,
			   struct engine_memory *out, struct ss_error *err)
{
	struct kvm_opts ko;
	struct engine *e;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = validate(cfg, err);
	if (rc)
		return rc;
	/* Sizing the pools needs only the configuration: make_pools on a
	 * scratch engine and kvm_opts_parse allocate nothing. */
	e = calloc(1, sizeof(*e));
	if (!e)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	e->cfg = *cfg;
	e->cfg.block_size = engine_block_size(cfg);   /* as engine_new resolves it */
	e->cfg.weight_dtype = model_weights_dtype(cfg->model, cfg->weight_dtype);
	rc = make_pools(e, err);
	if (!rc)
		rc = kvm_opts_parse(&ko, &e->cfg, err);
	if (rc)
		goto out;
	out->n_instances = e->n_inst;
	out->n_req = n_req;
	for (uint32_t k = 0; k < e->n_pools; k++) {
		const struct pool *pl = &e->pools[k];

		out->kv_blocks += (int64_t)pl->n * pl->kv_blocks;
		if (pl->kv_blocks > out->max_blocks)
			out->max_blocks = pl->kv_blocks;
		out->kv_bytes += pl->n * kv_pool_bytes(pl->kv_blocks, ko.prefix_cache);
	}
	/* the instance, its statistics and two histograms' buckets (mapped:
	 * an upper bound), its view pointer, its part of the KV manager and
	 * its two events' heap slots */
	out->instance_bytes = (uint64_t)e->n_inst *
			      (sizeof(struct instance) + sizeof(struct instance_stats) +
			       2 * SS_HIST_BUCKET_BYTES +
			       sizeof(void *) + kvm_inst_bytes() + 2 * sizeof(struct event *));
	/* the workload entry, the record, and the tenant mapping's scratch
	 * id (map_tenants: freed before the run, but part of the peak) */
	out->request_bytes = n_req * (sizeof(struct wl_request) + ENG_REQ_BYTES + sizeof(int32_t));
	/* closed loop: a send event, a free-stack slot and a freed slot per client */
	out->request_bytes += (uint64_t)(cfg->concurrency < n_req ? cfg->concurrency : n_req) *
			      (sizeof(struct event) + 2 * sizeof(uint32_t));
	out->total_bytes = ENG_BASE_BYTES + out->kv_bytes + out->instance_bytes +
			   out->request_bytes;
out:
	free(e);
	return rc;
}

/* bytes in GB (10^9) from 1 GB, in MB (10^6) below */
static void fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	if (bytes >= 1000000000ull)
		snprintf(buf, len, "%.1f GB", bytes / 1e9);
	else
		snprintf(buf, len, "%.0f MB", bytes / 1e6);
}

void engine_memory_describe(const struct engine_memory *m, char *buf, size_t len)
{
	char total[32];

	fmt_bytes(m->total_bytes, total, sizeof(total));
	snprintf(buf, len, "about %s (%u instance%s x %lld KV blocks%s, %llu requests)",
		 total, m->n_instances, m->n_instances == 1 ? "" : "s",
		 (long long)m->max_blocks, m->n_instances > 1 ? " at most" : "",
		 (unsigned long long)m->n_req);
}

bool engine_memory_refuse(const struct engine_memory *m, uint64_t limit_bytes,
			  struct ss_error *err)
{
	char what[160], has[32];

	if (!limit_bytes || m->total_bytes <= limit_bytes)
		return false;
	engine_memory_describe(m, what, sizeof(what));
	fmt_bytes(limit_bytes, has, sizeof(has));
	ss_error_set(err, -ENOMEM, NULL, 0, "this run needs %s; the machine has %s", what, has);
	return true;
}

/* A pipeline of a model whose layers are not all alike (dense and MoE,
 * local and full attention): each stage's slice of the model with its
 * own cost model (pl->cm's backend and parameters, configuration cc
 * otherwise), so that a step's time is cut into stages by the work each
 * holds (step-pp.c pp_launch, cost_pp_split_sliced).  Stages of
 * the same layer count and types share one. */
static int stage_cost_models(struct pool *pl, const struct engine_config *cfg,
			     const struct cost_config *cc, struct ss_error *err)
{
	const struct model_spec *m = cfg->model;

	/* (the constant model's times do not depend on the layers: its
	 * stages are cut by layer count) */
	if (pl->pp <= 1 || model_layers_alike(m) || cfg->executor ||
	    pl->cm->ops == &cost_constant_ops)
		return 0;
	pl->stage_model = calloc((size_t)pl->pp, sizeof(*pl->stage_model));
	pl->stage_cm = calloc((size_t)pl->pp, sizeof(*pl->stage_cm));
	if (!pl->stage_model || !pl->stage_cm)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (int s = 0; s < pl->pp; s++) {
		struct model_spec *sm = &pl->stage_model[s];
		struct cost_config sc = *cc;
		int rc;

		model_slice(m, cost_pp_stage_first(m->n_layers, pl->pp, s),
			    cost_pp_stage_layers(m->n_layers, pl->pp, s), sm);
		for (int j = 0; j < s && !pl->stage_cm[s]; j++) {
			const struct model_spec *o = &pl->stage_model[j];

			if (o->n_layers == sm->n_layers &&
			    model_moe_layers(o) == model_moe_layers(sm) &&
			    model_local_layers(o) == model_local_layers(sm))
				pl->stage_cm[s] = pl->stage_cm[j];
		}
		if (pl->stage_cm[s])
			continue;
		sc.model = sm;
		rc = cost_model_new_like(&pl->stage_cm[s], pl->cm, &sc, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* Speculative decoding: the pool's drafter priced by the pool's cost
 * model backend for the draft model or head (its kernels only: the
 * engine's host work is the step's, priced once), or by the roofline
 * where that backend has nothing for it (a table cost model has no
 * tables of a draft model). */
static int draft_cost_model(struct pool *pl, const struct engine_config *cfg,
			    const struct cost_config *cc, struct ss_error *err)
{
	struct cost_config dc = *cc;

	int rc;

	pl->spec = cfg->spec;
	if (!cfg->spec || !cfg->spec->draft_priced)
		return 0;
	if (cfg->draft_executor) {
		/* the caller's (live): its state is the caller's */
		pl->draft_xops = cfg->draft_executor;
		pl->draft_xpriv = cfg->draft_exec_priv;
		return 0;
	}
	dc.model = &cfg->spec->draft;
	dc.engine = NULL;
	if (cost_model_new_like(&pl->draft_cm, pl->cm, &dc, NULL) != 0) {
		rc = cost_model_new(&pl->draft_cm, "roofline", &dc, err);
		if (rc)
			return rc;
	}
	pl->draft_xops = &executor_model_ops;
	pl->draft_xpriv = calloc(1, executor_model_ops.priv_size);
	if (!pl->draft_xpriv)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	pl->draft_xpriv_owned = true;
	return executor_model_ops.init(pl->draft_xpriv, pl->draft_cm, err);
}

int engine_new(struct engine **out, const struct engine_config *cfg,
	       const struct workload *wl, struct ss_error *err)
{
	struct kvm_opts ko;
	struct engine *e;
	int rc;

	*out = NULL;
	rc = validate(cfg, err);
	if (rc)
		return rc;
	if (cfg->memory_limit_bytes > 0) {
		struct engine_memory m;

		rc = engine_memory_estimate(cfg, wl->n, &m, err);
		if (rc)
			return rc;
		if (engine_memory_refuse(&m, cfg->memory_limit_bytes, err))
			return -ENOMEM;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	e->cfg = *cfg;
	/* the engine reads its block size from here: resolved once; its
	 * weights likewise (no --weight-dtype: the model's checkpoint's) */
	e->cfg.block_size = engine_block_size(cfg);
	e->cfg.weight_dtype = model_weights_dtype(cfg->model, cfg->weight_dtype);
	e->wl = wl;
	e->max_model_len = engine_max_context(cfg);
	/* a profile with the legacy api_* keys and no stack given brings its
	 * own (stack-profile.h: its draws are those keys' to the bit) */
	if (!cfg->stack && cfg->engine && engine_profile_legacy_stack(cfg->engine)) {
		stack_profile_from_legacy(&e->legacy_stack, cfg->engine->name, cfg->engine->api_in_ms,
					  cfg->engine->api_out_ms, cfg->engine->api_cv);
		e->cfg.stack = &e->legacy_stack;
	}
	e->api_on = e->cfg.stack && !stack_profile_empty(e->cfg.stack);
	if (ss_hist_init(&e->itl)) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto fail;
	}
	event_init(&e->ev_arrival, EV_ARRIVAL, EV_ARRIVAL, 0);
	event_init(&e->ev_sample, EV_SAMPLE, EV_SAMPLE, 0);

	rc = make_pools(e, err);
	if (rc)
		goto fail;
	if (cfg->executor && e->n_pools > 1) {
		rc = ss_error_set(err, -EINVAL, NULL, 0,
				  "live runs use one instance: expected no --prefill-instances/--decode-instances");
		goto fail;
	}
	for (size_t i = 1; i < wl->n; i++)
		if (wl->req[i].arrival_ns < wl->req[i - 1].arrival_ns) {
			rc = ss_error_set(err, -EINVAL, NULL, 0,
					  "workload request %zu arrives before request %zu: expected arrivals in time order",
					  i, i - 1);
			goto fail;
		}
	rc = -ENOMEM;
	e->n_req = wl->n;
	e->rec = calloc(e->n_req ? e->n_req : 1, sizeof(*e->rec));
	ss_advise_huge(e->rec, e->n_req * sizeof(*e->rec));
	e->inst = calloc(e->n_inst, sizeof(*e->inst));
	e->views = calloc(e->n_inst, sizeof(*e->views));
	e->stats = calloc(e->n_inst, sizeof(*e->stats));
	e->policy_rng = ss_rng_new(cfg->seed, SS_RNG_POLICY);
	rc = make_clients(e, err);
	if (rc)
		goto fail;
	rc = -ENOMEM;
	if (!e->rec || !e->inst || !e->views || !e->stats || !e->policy_rng ||
	    evq_init(&e->q, 2 * e->n_inst + 4 + (e->n_pools > 1 ? 1024 : 0) + e->n_clients)) {
		ss_error_set(err, rc, NULL, 0, "out of memory");
		goto fail;
	}
	e->host = (struct policy_host){
		.ctx = e, .uniform = host_uniform, .prefix_hit = host_prefix_hit,
		.prefill_ns = host_prefill_ns, .slo_ttft_ns = cfg->slo_ttft_ns,
		.adapter_resident = host_adapter_resident,
	};
	rc = kvm_opts_parse(&ko, cfg, err);
	if (!rc) {
		struct kvm_config kc = {
			.wl = wl, .now = &e->now, .n_inst = e->n_inst,
			.block_size = e->cfg.block_size, .n_layers = cfg->model->n_layers,
			.kv_load = cfg->engine ? cfg->engine->kv_load : ENGINE_KV_LOAD_BLOCKING,
			.kv_remote = cfg->kv_remote,
			.remote_block_bytes = e->pools[0].kv_bytes_per_block,
		};

		rc = kvm_new(&e->kv, &kc, &ko, err);
	}
	if (!rc)
		rc = eng_sessions_setup(e, err);
	if (rc)
		goto fail;
	rc = -ENOMEM;
	for (uint64_t i = 0; i < e->n_req; i++) {
		const struct wl_request *w = &wl->req[i];

		e->rec[i] = (struct req_record){
			.id = (uint32_t)i, .tenant = w->tenant, .priority = w->priority,
			.arrival_ns = w->arrival_ns, .prompt_tokens = w->prompt_tokens,
			.output_tokens = w->output_tokens, .state = REQ_PENDING, .instance = -1,
			.prefill_instance = -1, .kv_xfer_ns = -1, .first_sched_ns = -1, .first_token_ns = -1,
			.finish_ns = -1, .adapter = -1,
		};
	}
	if (cfg->lora) {
		/* multi-LoRA: the run's adapters, and each request's, drawn
		 * now in workload order (a hash of the seed and the index) */
		int32_t trace_max = -1;

		for (uint64_t i = 0; wl->adapter && i < e->n_req; i++)
			if (wl->adapter[i] > trace_max)
				trace_max = wl->adapter[i];
		rc = lora_new(&e->lora, cfg->lora, cfg->model, cfg->seed, trace_max, err);
		if (rc)
			goto fail;
		for (uint64_t i = 0; i < e->n_req; i++)
			/* a trace's column as given (-1: the base model alone) */
			e->rec[i].adapter = wl->adapter ? wl->adapter[i] : lora_adapter_of(e->lora, i, -1);
		rc = -ENOMEM;
	}
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct instance *in = &e->inst[i];
		struct pool *pl = &e->pools[e->n_pools > 1 && i >= e->pools[1].first];

		in->idx = i;
		in->pl = pl;
		frontend_init(&in->fe, e->cfg.engine);
		in->st = &e->stats[i];
		rc = kvm_inst_init(e->kv, i, &(struct kvm_inst_config){
					   .blocks = pl->kv_blocks, .block_bytes = pl->kv_bytes_per_block,
					   .tp = pl->tp, .pp = pl->pp, .gpu = pl->gpu, .st = in->st,
				   }, &in->kv, err);
		if (rc)
			goto fail;
		rc = -ENOMEM;
		/* semi-PD: the prefill half counts the GPU, the decode half not */
		in->st->gpus = e->semi_pd && pl->role == POOL_DECODE ? 0 : pl->tp * pl->pp;
		in->st->idle_power_w = pl->gpu->idle_w * pl->tp * pl->pp;
		in->st->cost_per_hour = pl->gpu->cost_per_hour * pl->tp * pl->pp;
		if (pl->pp > 1) {
			in->st->stage_busy_ns = calloc((size_t)pl->pp, sizeof(*in->st->stage_busy_ns));
			in->st->pp = pl->pp;
			if (!in->st->stage_busy_ns) {
				ss_error_set(err, rc, NULL, 0, "out of memory");
				goto fail;
			}
		}
		rc = step_shape_init(e, in, err);
		if (rc)
			goto fail;
		rc = -ENOMEM;
		if (e->lora && (lora_inst_new(&in->lora, e->lora, pl->gpu, pl->tp, &in->st->lora) ||
				(cfg->lora->unified &&
				 lora_inst_page(in->lora, kvm_inst_pool(in->kv),
						pl->kv_bytes_per_block / pl->tp)))) {
			ss_error_set(err, rc, NULL, 0, "out of memory");
			goto fail;
		}
		in->st->role = pl->role == POOL_PREFILL ? "prefill" :
			       pl->role == POOL_DECODE ? "decode" : "mixed";
		event_init(&in->ev_step, EV_STEP_DONE, EV_STEP_DONE, i);
		event_init(&in->ev_sched, EV_SCHEDULE, EV_SCHEDULE, i);
		in->view.id = (int32_t)i;
		in->view.block_size = e->cfg.block_size;
		in->view.total_blocks = pl->kv_blocks;
		in->view.max_model_len = e->max_model_len;
		in->st->total_blocks = pl->kv_blocks;
		if (ss_hist_init(&in->st->batch_seqs) || ss_hist_init(&in->st->batch_tokens)) {
			ss_error_set(err, rc, NULL, 0, "out of memory");
			goto fail;
		}
		eng_refresh_view(in);
		e->views[i] = &in->view;
	}
	rc = map_tenants(e, err);
	if (rc)
		goto fail;
	e->host.n_tenants = e->n_tenants;
	rc = make_policies(e, err);
	if (!rc)
		rc = make_predictions(e, err);
	if (rc)
		goto fail;
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct instance *in = &e->inst[i];

		in->tenant_active = calloc(e->n_tenants, sizeof(*in->tenant_active));
		if (!in->tenant_active || eng_waitq_init(e, in)) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto fail;
		}
		in->view.tenant_active = in->tenant_active;
	}
	for (uint32_t k = 0; k < e->n_pools; k++) {
		struct pool *pl = &e->pools[k];
		struct cost_config cc = {
			.model = cfg->model, .gpu = pl->gpu,
			.tp = pl->tp * (pl->dp > 1 ? pl->dp : 1),
			.stores = cfg->stores, .n_stores = cfg->n_stores,
			.power_cap_w = cfg->power_cap_w, .clock_frac = cfg->clock_frac,
			.shared_data = cfg->shared_data, .engine = cfg->engine,
			.weight_dtype = cfg->weight_dtype, .kv_dtype = cfg->kv_dtype,
			.ep = pl->ep, .dp_attention = pl->dp, .gpus_per_node = cfg->gpus_per_node,
			.ref_gpus = cfg->ref_gpus, .n_ref_gpus = cfg->n_ref_gpus,
		};

		if (cfg->cost_models[k]) {
			pl->cm = cfg->cost_models[k];
			pl->cm_borrowed = true;
		} else {
			rc = cost_model_new(&pl->cm, cfg->cost_model, &cc, err);
			if (rc)
				goto fail;
		}
		rc = stage_cost_models(pl, cfg, &cc, err);
		if (rc)
			goto fail;
		pl->engine = cfg->engine;
		rc = draft_cost_model(pl, cfg, &cc, err);
		if (rc)
			goto fail;
		if (cfg->executor) {
			/* the caller's executor (live): its state is the caller's */
			if (cfg->executor->version < 1 || cfg->executor->version > EXECUTOR_VERSION) {
				rc = ss_error_set(err, -ENOTSUP, NULL, 0,
						  "executor %s: version %d, expected 1 to %d",
						  cfg->executor->name, cfg->executor->version,
						  EXECUTOR_VERSION);
				goto fail;
			}
			pl->xops = cfg->executor;
			pl->xpriv = cfg->exec_priv;
			pl->xpriv_owned = false;
			continue;
		}
		pl->xops = &executor_model_ops;
		pl->xpriv = calloc(1, pl->xops->priv_size);
		pl->xpriv_owned = true;
		if (!pl->xpriv) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			goto fail;
		}
		rc = pl->xops->init(pl->xpriv, pl->cm, err);
		if (rc)
			goto fail;
	}
	if (e->lora)
		eng_lora_setup(e);
	*out = e;
	return 0;
fail:
	engine_free(e);
	return rc;
}

void engine_free(struct engine *e)
{
	if (!e)
		return;
	kvm_free(e->kv);
	if (e->inst) {
		for (uint32_t i = 0; i < e->n_inst; i++) {
			struct instance *in = &e->inst[i];

			free(in->running);
			waitq_release(&in->wq);
			free(in->tenant_active);
			free(in->batch_priv);
			free(in->order_priv);
			free(in->plan.items);
			free(in->plan.preempt);
			free(in->plan.scratch);
			free(in->fl_req);
			free(in->fl_tokens);
			free(in->fl_items);
			free(in->fl_xreq);
			free(in->draft_items);
			free(in->draft_reqs);
			lora_inst_free(in->lora);
			free(in->lora_view);
			free(in->lora_ad);
			free(in->steady.grow);
			free(in->incoming);
			step_shape_release(in);
		}
	}
	for (uint32_t k = 0; k < e->n_slabs; k++) {
		for (uint32_t j = 0; j < ENG_SLAB; j++)
			kvm_req_release(&e->slabs[k][j].kv);
		free(e->slabs[k]);
	}
	free(e->slabs);
	if (e->pred_rng)
		gsl_rng_free(e->pred_rng);
	if (e->think_rng)
		gsl_rng_free(e->think_rng);
	free(e->ev_send);
	free(e->send_free);
	free(e->sess);
	free(e->send_at);
	free(e->freed);
	for (uint32_t k = 0; k < e->n_pools; k++) {
		struct pool *pl = &e->pools[k];

		if (pl->xpriv_owned) {
			if (pl->xops && pl->xops->release && pl->xpriv)
				pl->xops->release(pl->xpriv);
			free(pl->xpriv);
		}
		if (!pl->cm_borrowed)
			cost_model_free(pl->cm);
		for (int st = 0; pl->stage_cm && st < pl->pp; st++) {
			bool first = true;   /* stages share a cost model: free it once */

			for (int j = 0; j < st; j++)
				first &= pl->stage_cm[j] != pl->stage_cm[st];
			if (first)
				cost_model_free(pl->stage_cm[st]);
		}
		free(pl->stage_cm);
		free(pl->stage_model);
		if (pl->draft_xpriv_owned)
			free(pl->draft_xpriv);
		cost_model_free(pl->draft_cm);
		free(pl->router_priv);
	}
	free(e->adm_priv);
	free(e->kvfirst);
	free(e->tenant_ids);
	free(e->tenant_service);
	if (e->policy_rng)
		gsl_rng_free(e->policy_rng);
	evq_release(&e->q);
	free(e->views);
	if (e->stats)
		for (uint32_t i = 0; i < e->n_inst; i++) {
			ss_hist_release(&e->stats[i].batch_seqs);
			ss_hist_release(&e->stats[i].batch_tokens);
		}
	for (uint32_t i = 0; e->stats && i < e->n_inst; i++)
		free(e->stats[i].stage_busy_ns);
	free(e->stats);
	ss_hist_release(&e->itl);
	free(e->inst);
	free(e->rec);
	lora_free(e->lora);
	tseries_release(&e->ts);
	free(e);
}
