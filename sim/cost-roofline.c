/* servesim — the "roofline" cost model: step time from the model's shapes and
 * the GPU's spec sheet, with efficiency factors (docs/design.md section 4,
 * docs/cost-models.md).
 *
 * Every kernel costs max(FLOPs / achievable FLOP/s, bytes / achievable B/s)
 * plus kernel_us of launch and tail overhead; kernels run one after another.
 * One layer's kernels are costed once and multiplied by n_layers (all layers
 * are identical).  Everything is per GPU: weights, heads and FLOPs are the
 * tensor-parallel shard.  The per-item loop only accumulates four sums, so a
 * step is O(n_items) with no allocation; all shape-dependent constants are
 * computed once in init().
 */
#include "costmodel.h"
#include "cost-roofline-int.h"
#include "sstime.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* A GEMM y[m, n] = x[m, k] W^T on one GPU, as a function of m. */
struct gemm {
	double flops_per_m;             /* 2 n k, FLOP per row */
	double bytes_fixed;             /* W (+ bias), bytes */
	double bytes_per_m;             /* x row read + y row written, bytes */
};

/* Memo of the parts of a step that depend on its tokens alone (token-level
 * GEMMs, element-wise kernels, the final norm, the all-reduce bytes) and
 * on its emitted rows alone (LM head, sampler, logits gather).
 * Direct-mapped on the quantity's low bits and tagged with it (a step
 * quantity is >= 1, so a tag of 0 is an empty entry).  Each entry holds
 * the very terms step() adds, computed by the same expressions, and step()
 * adds them in the same order, so results are bit-for-bit those of
 * computing them every step. */
#define MEMO_N 256u                     /* entries per memo, a power of two */
/* An MoE or MLA model's GEMM kinds: QKV (MLA: q_a, or q_proj when
 * q_lora_rank is 0), O (every layer), the dense MLP's two (dense layers),
 * router, shared experts' gate_up and down, routed experts' grouped
 * gate_up and down (MoE layers), and MLA's q_b and kv_a (every layer;
 * none without MLA). */
#define MOE_GEMMS 11
struct memo_tok {
	double tok;                     /* tag: the step's tokens */
	double mtok;                    /* tag: the tokens its MoE layers carry (moe_tokens()) */
	double gemm_t;                  /* all layers' GEMMs, s */
	double gemm_comp;               /* their compute-bound time x layers, s */
	double gemm_tc[4], gemm_tm[4];  /* one layer's GEMMs' compute and memory terms, s */
	/* MoE models: every GEMM kind's compute and memory terms in one
	 * layer of its kind and how many layers have it (moe_gemms()) */
	double moe_tc[MOE_GEMMS], moe_tm[MOE_GEMMS], moe_n[MOE_GEMMS];
	double ew_t;                    /* element-wise time, s */
	double ew_tm;                   /* element-wise memory time, all layers + embedding, s */
	double norm_tm;                 /* final norm's memory time, s */
	double ar_tl;                   /* all-reduce link time, s */
};
struct memo_emit {
	double emit;                    /* tag: rows through the LM head */
	double lm_t;                    /* LM-head GEMM kernel, s */
	double lm_tc, lm_tm;            /* its compute and memory terms, s */
	double lm_comp;                 /* its compute-bound time (0 if memory-bound), s */
	bool lm_compute;                /* compute-bound: lm_comp is added */
	double samp_t, samp_tm;         /* sampler time and memory time, s */
	double gather_tl;               /* logits gather link time, s */
};

/* Memo of everything of a step but its attention: the operators' times
 * that depend on (tokens, emitted rows, requests) alone, what each adds to
 * the busy and compute-bound sums (added by step() in the order the
 * unmemoised code adds them, around the attention terms), and those
 * operators' rounded nanoseconds.  Direct-mapped on the tokens' low bits,
 * tagged with all three quantities (n_items + 1, so 0 is an empty entry).
 * Every double here is computed by the expressions step() used before it
 * was memoised, so results are bit-for-bit the same. */
struct memo_fixed {
	double tok, mtok, emit;         /* tags */
	uint64_t items1;                /* tag: n_items + 1, 0 = empty */
	double fmem;                    /* mem_frac(n_items): memory-bound power share */
	double t[COST_OP_COUNT];        /* seconds; 0 for the attention operators */
	/* busy and compute-bound terms, +0.0 where the step adds none */
	double gemm_busy, gemm_comp;    /* added before the attention terms (tok > 0) */
	double ew_busy, norm_busy;      /* added after them (tok > 0) */
	double lm_busy, lm_comp, samp_busy; /* (emit > 0; lm_comp if compute-bound) */
	double ar_busy;                 /* (tp > 1 and tok > 0) */
	/* ns[op] = cost_ns_round(t[op] x 1e9) and ns_sum their sum, valid
	 * when ns_ok: every t[op] x 1e9 fits and so does the sum; else
	 * step() takes the operator-by-operator path, which reports. */
	bool ns_ok;
	int64_t ns[COST_OP_COUNT];
	int64_t ns_sum;
};

struct roofline {
	/* Achievable rates, inverted: seconds per FLOP / per byte. */
	double s_per_flop;              /* 1 / (bf16_flops x gemm_eff): LM head */
	double s_per_wflop;             /* 1 / (gemm_flops(weight dtype) x gemm_eff): layer GEMMs */
	double s_per_byte;              /* 1 / (hbm_bw x mem_eff) */
	double s_per_attn_flop;         /* 1 / (bf16_flops x attn_prefill_eff) */
	double s_per_kv_byte;           /* 1 / (hbm_bw x attn_decode_mem_eff) */
	double kernel_s;                /* per kernel, s */
	/* Dynamic power share of memory-bound work by batch (docs/energy.md):
	 * f(b) = mem_hi - (mem_hi - mem_lo) x mem_batch / (mem_batch + b - 1),
	 * from the GPU's catalog entry, or the constant mem_power_frac. */
	double mem_lo, mem_hi, mem_batch;

	double layers;                  /* n_layers */
	/* Mixture of experts (docs/cost-models.md "Mixture of experts"):
	 * the MoE layers price the router, the shared experts and the routed
	 * experts' grouped GEMMs instead of layer_gemm[2..3]. */
	bool moe;
	double dense_layers, moe_layers;
	double n_experts, experts_per_token;
	struct gemm router;             /* hidden x n_experts, replicated on every GPU */
	struct gemm shared_gemm[2];     /* shared experts' gate_up|fc1, down|fc2 (TP shard) */
	struct gemm expert_gemm[2];     /* ONE routed expert's gate_up, down (TP shard);
					 * per-m terms are per token-expert assignment */
	struct gemm layer_gemm[4];      /* QKV, O, gate_up|fc1, down|fc2 */
	/* generic: the GEMMs go through moe_gemms() (MoE or MLA models) */
	bool generic;
	/* Local attention (sliding window or chunks): the full and local
	 * layers' attention priced apart (cost_roofline_sum_local). */
	double full_layers, local_layers;
	double window, chunk;           /* tokens; one is > 0 when local_layers > 0 */
	/* Multi-head latent attention (docs/cost-models.md "MLA"), per GPU:
	 * q_b (0 when q_lora_rank is 0) and kv_a (replicated on every GPU)
	 * join the GEMM kinds; kv_b up-projects the latent of every key a
	 * prefill chunk attends to (the non-absorbed form); decode uses the
	 * absorbed form, W_UK into the query (uk) and W_UV into the output
	 * (uv), per-head BMMs over the decode tokens in bf16. */
	bool mla;
	struct gemm mla_gemm[2];        /* q_b, kv_a */
	struct gemm kv_b;               /* (hq (nope + v)) x kv_lora_rank */
	struct gemm uk, uv;             /* absorbed BMMs: per row = per decode token */
	double mla_pf_flops_per_pos;    /* 2 hq (nope + rope + v) FLOP */
	double mla_pf_kv_bytes;         /* up-projected K and V per key, bytes */
	double mla_pf_qo_bytes;         /* Q read + O written per query, bytes */
	double mla_dec_flops_per_pos;   /* hq (2 (kl + rope) + 2 kl) FLOP */
	double mla_dec_kv_bytes;        /* latent + RoPE key per key, (kl + rope) x kv dtype */
	double mla_dec_qo_bytes;        /* absorbed Q read + latent O written per query */
	struct gemm lm_head;            /* vocab shard x hidden */

	double attn_flops_per_pos;      /* 4 x heads x head_dim, per layer per GPU */
	double kv_bytes_per_tok;        /* K+V of one token, one layer, one GPU */
	double qo_bytes_per_tok;        /* Q read + O written, one layer, one GPU */
	double elem_bytes_per_tok;      /* norms+residuals, RoPE, activation, per layer */
	double elem_kernels;            /* element-wise kernels per layer */
	double embed_bytes_per_tok;     /* embedding lookup (+ learned positions) */
	double embed_kernels;
	double norm_bytes_per_tok;      /* final norm */
	double sample_bytes_per_emit;   /* fp32 logits passes of the sampler */
	double sample_kernels;

	bool tp_active;                 /* tp > 1: collectives happen */
	double ar_s_per_byte;           /* ring all-reduce: 2(tp-1)/tp / link */
	double gather_s_per_byte;       /* logits gather: (tp-1)/tp / link */
	double collective_s;            /* latency per collective, s */
	double ar_bytes_per_tok;        /* hidden x dtype */
	double n_allreduce;             /* 2 per layer + 1 for the embedding */
	double logit_bytes_per_emit;    /* vocab x dtype */

	double host_s;                  /* per step, s */
	double host_s_per_seq;          /* per item, s */

	/* Expert parallelism / data-parallel attention (cost_config ep,
	 * dp_attention; docs/cost-models.md "Expert parallelism"): set when
	 * either is > 1; the fields above are then a step GPU's (tp / D). */
	bool epdp;
	double dp;                      /* D (1 without DP attention) */
	double ep_rows_scale;           /* imbalance / E: a GPU's share of the assignments */
	double ep_experts_scale;        /* 1 / E: a GPU's share of the distinct experts */
	/* The collectives' link time, s: per token of the step (D = 1: all
	 * of them; D > 1: the attention rank's all-reduces) and, D > 1, per
	 * token the MoE layers carry (their all-gather / all-to-all) */
	double epdp_s_per_tok, epdp_s_per_mtok;
	/* D > 1: the element-wise bytes of the routed experts' activation per
	 * token the MoE layers carry, per layer on average (0 otherwise: in
	 * elem_bytes_per_tok) */
	double elem_bytes_per_mtok;

	double idle_w;                  /* whole instance (tp GPUs), W */
	double dynamic_w;               /* (tdp - idle) x tp, W */
	double gap_extra_w;             /* (host-gap power - idle) x tp, W: host time */

	struct memo_tok mtok[MEMO_N];
	struct memo_emit memit[MEMO_N];
	struct memo_fixed mfix[MEMO_N];
};

/* RDMA bandwidth between nodes where the GPU entry has none, bytes/s per
 * GPU, one direction: a 400 Gb/s NIC per GPU as in DGX H100 systems (the
 * engine's KV links take the same default, engine-disagg.c). */
#define EP_DEFAULT_RDMA_BW 50e9

/* The bandwidth of a ring over n GPUs, bytes/s one direction: link_bw
 * (NVLink) within a node of gpus_per_node (default 8), the inter-node
 * link beyond.  Within a node whose GPUs form a fully connected mesh
 * (link_peers > 0: AMD's xGMI, a direct link to each peer, no switch) a
 * GPU of n drives only the n - 1 links to the others, each nvlink_bw /
 * link_peers: RCCL's rings and vLLM's and AITER's one- and two-shot
 * all-reduces over xGMI move each GPU's share over its direct links
 * (gpu_link_share; docs/cost-models.md, "Collectives on a mesh"). */
static double ring_bw(const struct cost_config *cfg, int n, double link_bw)
{
	int gpn = cfg->gpus_per_node > 0 ? cfg->gpus_per_node : 8;

	if (n <= gpn)
		return cfg->gpu->nvlink_bw > 0 ? link_bw * gpu_link_share(cfg->gpu, n) : link_bw;
	return cfg->gpu->rdma_bw > 0 ? cfg->gpu->rdma_bw : EP_DEFAULT_RDMA_BW;
}

/* The collectives of a step under expert parallelism or DP attention
 * (docs/cost-models.md "Expert parallelism"), linear in the step's tokens
 * t and in the tokens T its MoE layers carry (D > 1: the lock-step
 * group's, all D ranks together, cost_step.group_tokens; D t when not
 * known), with A = tp / D GPUs per attention rank and link = nvlink_bw x
 * link_eff (within a rank):
 *   attention rank (A > 1): the O projection's all-reduce in every layer,
 *     the dense layers' MLP all-reduce and the embedding's, ring over A:
 *     2 (A - 1) / A x t x hidden x dtype bytes each;
 *   MoE layers over the instance's tp GPUs (NVLink when tp <= gpus_per_node,
 *     else RDMA: xlink):
 *     D = 1: every GPU holds every token, so EP needs no dispatch: each GPU
 *       computes its experts' share and one all-reduce over tp sums it, as
 *       under TP: 2 (tp - 1) / tp x t x hidden x dtype;
 *     D > 1, E = 1: all-gather then reduce-scatter of the T tokens over
 *       tp (SGLang's DP attention with TP experts): 2 x (tp - 1) / tp x
 *       T x hidden x dtype, two collectives;
 *     D > 1, E > 1: all-to-all dispatch and combine: a GPU receives (and
 *       sends back) the rows of its expert group, T k / E x imbalance,
 *       of which (E - 1) / E come from other groups: T k / E x imb x
 *       (E - 1) / E x hidden x dtype each way, two collectives; with
 *       tp / E > 1 GPUs per expert a reduce-scatter of those rows'
 *       partial sums inside the expert group, (tp/E - 1) / (tp/E) of them.
 * Every GPU of the group waits for the slowest at each collective: the
 * engine prices each rank with the group's T and takes the longest. */
static void epdp_init(struct roofline *r, const struct cost_config *cfg, double link_bw,
		      double link_eff, double imbalance)
{
	const struct model_spec *m = cfg->model;
	double tp = cfg->tp, D = cfg->dp_attention > 1 ? cfg->dp_attention : 1.0;
	double E = cfg->ep > 1 ? cfg->ep : 1.0, A = tp / D, te = tp / E;
	double row = (double)m->hidden * m->dtype_bytes;   /* one token's hidden state, bytes */
	double link = ring_bw(cfg, (int)A, link_bw) * link_eff;
	double xlink = ring_bw(cfg, cfg->tp, link_bw) * link_eff;
	double n_coll = 0.0, s_tok = 0.0, s_mtok = 0.0;

	r->epdp = true;
	r->dp = D;
	r->ep_rows_scale = E > 1.0 ? imbalance / E : 1.0;
	r->ep_experts_scale = 1.0 / E;
	if (A > 1.0) {
		double n = r->layers + r->dense_layers + 1.0;

		n_coll += n;
		s_tok += n * row * 2.0 * (A - 1.0) / A / link;
	}
	if (r->moe_layers > 0.0 && tp > 1.0) {
		if (D == 1.0) {
			n_coll += r->moe_layers;
			s_tok += r->moe_layers * row * 2.0 * (tp - 1.0) / tp / xlink;
		} else if (E == 1.0) {
			n_coll += 2.0 * r->moe_layers;
			s_mtok += r->moe_layers * 2.0 * (tp - 1.0) / tp * row / xlink;
		} else {
			double rows = m->experts_per_token / E * imbalance;

			n_coll += 2.0 * r->moe_layers;
			s_mtok += r->moe_layers * 2.0 * rows * (E - 1.0) / E * row / xlink;
			if (te > 1.0) {
				n_coll += r->moe_layers;
				s_mtok += r->moe_layers * rows * (te - 1.0) / te * row / xlink;
			}
		}
	}
	r->n_allreduce = n_coll;
	r->epdp_s_per_tok = s_tok;
	r->epdp_s_per_mtok = s_mtok;
	r->tp_active = n_coll > 0.0;
}

/* The roofline's parameters (docs/cost-models.md, "roofline"), declared
 * once here for the step model and for one GEMM (cost_gemm_roofline_init). */
struct rl_params {
	double gemm_eff, gemm_fp8_eff, mem_eff, attn_pf_eff, attn_dec_eff, link_eff;
	double ar_lat_us, kernel_us, host_ms, host_us_per_seq;
	double mem_power_frac;   /* -1: the GPU's fitted curve */
	double imbalance;
};

/* Read params into *p; ep is the expert-parallel degree (bounds
 * expert_imbalance). */
static int read_params(struct ss_params *params, int ep, struct rl_params *p,
		       struct ss_error *err)
{
	int rc;

	p->imbalance = 1.0;
	rc = cost_param(params, "gemm_eff", 0.8, 1e-3, 1.0, &p->gemm_eff, err);
	if (!rc)
		rc = cost_param(params, "gemm_fp8_eff", 0.5, 1e-3, 1.0, &p->gemm_fp8_eff, err);
	if (!rc)
		rc = cost_param(params, "mem_eff", 0.8, 1e-3, 1.0, &p->mem_eff, err);
	if (!rc)
		rc = cost_param(params, "attn_prefill_eff", 0.5, 1e-3, 1.0, &p->attn_pf_eff, err);
	if (!rc)
		rc = cost_param(params, "attn_decode_mem_eff", 0.7, 1e-3, 1.0, &p->attn_dec_eff, err);
	if (!rc)
		rc = cost_param(params, "link_eff", 0.6, 1e-3, 1.0, &p->link_eff, err);
	if (!rc)
		rc = cost_param(params, "allreduce_latency_us", 5.0, 0.0, 1e6, &p->ar_lat_us, err);
	if (!rc)
		rc = cost_param(params, "kernel_us", 3.0, 0.0, 1e6, &p->kernel_us, err);
	if (!rc)
		rc = cost_param(params, "host_ms", 0.8, 0.0, 1e6, &p->host_ms, err);
	if (!rc)
		rc = cost_param(params, "host_us_per_seq", 40.0, 0.0, 1e6, &p->host_us_per_seq, err);
	if (!rc && ss_params_has(params, "mem_power_frac"))
		rc = cost_param(params, "mem_power_frac", 0.5, 0.0, 1.0, &p->mem_power_frac, err);
	else
		p->mem_power_frac = -1.0;   /* the GPU's fitted curve */
	/* max over GPUs of the routed assignments a GPU computes, over the
	 * mean (1 = balanced, at most E: one GPU takes them all); without
	 * expert parallelism every GPU computes every expert: 1 only */
	if (!rc)
		rc = cost_param(params, "expert_imbalance", 1.0, 1.0,
				ep > 1 ? (double)ep : 1.0, &p->imbalance, err);
	return rc;
}

/* Seconds per FLOP of layer GEMMs with weights at w on g: fp8 GEMMs on
 * fp8 tensor cores reach a lower share of their peak than bf16 ones
 * (gemm_fp8_eff, docs/cost-models.md). */
static double s_per_wflop(const struct gpu_spec *g, enum ss_dtype w, const struct rl_params *p)
{
	return 1.0 / (gpu_gemm_flops(g, w) *
		      (w == SS_DTYPE_FP8 && g->fp8_flops > 0.0 ? p->gemm_fp8_eff : p->gemm_eff));
}

/* A GEMM of n x k weights (n_, k_), with a bias of n or not, its weights
 * at w_ x dt bytes an element: w_ is the weight matrix's bytes per
 * element over dt, the activations' bytes (wq for the layers' linear
 * weights, 1 for the LM head, which quantised checkpoints keep in the
 * model's dtype).  Activations stay at dt: the per-token fp8 quantisation
 * of x is fused into the norm before it in vLLM and TensorRT-LLM, and y is
 * written in bf16.  dt is the caller's. */
#define GEMM(n_, k_, bias_, w_) ((struct gemm){ \
		.flops_per_m = 2.0 * (n_) * (k_), \
		.bytes_fixed = ((n_) * (k_) * (w_) + ((bias_) ? (n_) : 0.0)) * dt, \
		.bytes_per_m = ((n_) + (k_)) * dt })

/* The compute and memory terms of GEMM w at m rows, s. */
static inline void gemm_terms(const struct gemm *w, double m, double s_per_flop,
			      double s_per_byte, double *tc, double *tm)
{
	*tc = w->flops_per_m * m * s_per_flop;
	*tm = (w->bytes_fixed + w->bytes_per_m * m) * s_per_byte;
}

static int roofline_init(void *priv, const struct cost_config *cfg,
			 struct ss_params *params, struct ss_error *err)
{
	struct roofline *r = priv;
	const struct model_spec *m = cfg->model;
	const struct gpu_spec *g = cfg->gpu;
	struct rl_params p;
	double gemm_eff, mem_eff, attn_pf_eff, attn_dec_eff, link_eff;
	double ar_lat_us, kernel_us, host_ms, host_us_per_seq, mem_power_frac, imbalance;
	double tp = cfg->tp, dt, wq, kt, d, hd, hq, hkv, ff, link_bw;
	/* GPUs of a step's attention and dense parts (tp / D) and of one
	 * routed expert's tensor parallelism (tp / E); both tp without EP/DP,
	 * so every expression below is the tensor-parallel one bit for bit */
	int ita = cost_config_step_gpus(cfg);
	double ta = ita, te = cfg->ep > 1 ? tp / cfg->ep : tp;
	bool epdp = cfg->ep > 1 || cfg->dp_attention > 1;
	int rc;

	if (!m || !g)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model roofline: needs a model and a GPU");
	rc = read_params(params, cfg->ep, &p, err);
	if (rc)
		return rc;
	gemm_eff = p.gemm_eff;
	mem_eff = p.mem_eff;
	attn_pf_eff = p.attn_pf_eff;
	attn_dec_eff = p.attn_dec_eff;
	link_eff = p.link_eff;
	ar_lat_us = p.ar_lat_us;
	kernel_us = p.kernel_us;
	host_ms = p.host_ms;
	host_us_per_seq = p.host_us_per_seq;
	mem_power_frac = p.mem_power_frac;
	imbalance = p.imbalance;
	if (m->n_heads % ita)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model roofline: tp %d does not divide the %d heads of %s",
				    ita, m->n_heads, m->name);
	if (m->n_kv_heads % ita && ita % m->n_kv_heads)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cost-model roofline: tp %d and the %d KV heads of %s "
				    "do not divide one another", ita, m->n_kv_heads, m->name);

	if ((rc = precision_check(g, cfg->weight_dtype, cfg->kv_dtype, err)))
		return rc;

	memset(r, 0, sizeof(*r));
	r->dp = 1.0;   /* epdp_init sets D */
	dt = m->dtype_bytes;
	/* Precision: a layer weight's bytes as a share of dt (1.0 at the
	 * model's dtype, so the bf16 expressions are unchanged bit for bit),
	 * and the KV cache's element bytes. */
	wq = ss_dtype_bytes(cfg->weight_dtype, m) / dt;
	kt = ss_dtype_bytes(cfg->kv_dtype, m);
	d = m->hidden;
	hd = m->head_dim;
	hq = m->n_heads / ta;
	/* KV heads are split when there are at least tp of them, else replicated. */
	hkv = m->n_kv_heads >= ita ? m->n_kv_heads / ta : 1.0;
	ff = m->intermediate / ta;

	r->s_per_flop = 1.0 / (g->bf16_flops * gemm_eff);
	r->s_per_wflop = s_per_wflop(g, cfg->weight_dtype, &p);
	r->s_per_byte = 1.0 / (g->hbm_bw * mem_eff);
	r->s_per_attn_flop = 1.0 / (g->bf16_flops * attn_pf_eff);
	r->s_per_kv_byte = 1.0 / (g->hbm_bw * attn_dec_eff);
	r->kernel_s = kernel_us * 1e-6;
	if (mem_power_frac >= 0.0) {
		r->mem_lo = r->mem_hi = mem_power_frac;
		r->mem_batch = 1.0;
	} else {
		/* three points of the catalog's curve give its three constants */
		r->mem_lo = cost_mem_power_frac(g, 1.0);
		r->mem_hi = g->mem_power_hi > 0.0 ? cost_mem_power_frac(g, INFINITY) : r->mem_lo;
		r->mem_batch = g->mem_power_batch > 0.0 ? g->mem_power_batch : 1.0;
		if (!(r->mem_hi > 0.0))
			r->mem_hi = r->mem_lo;
	}
	r->layers = m->n_layers;

	r->layer_gemm[0] = GEMM((hq + 2.0 * hkv) * hd, d, m->qkv_bias, wq);
	r->layer_gemm[1] = GEMM(d, hq * hd, m->linear_bias, wq);
	if (m->mlp == MLP_GATED) {
		r->layer_gemm[2] = GEMM(2.0 * ff, d, m->linear_bias, wq);
		r->layer_gemm[3] = GEMM(d, ff, m->linear_bias, wq);
	} else {
		r->layer_gemm[2] = GEMM(ff, d, m->linear_bias, wq);
		r->layer_gemm[3] = GEMM(d, ff, m->linear_bias, wq);
	}
	r->lm_head = GEMM(m->vocab / ta, d, false, 1.0);
	if (m->kv_lora_rank > 0) {
		double kl = m->kv_lora_rank, ql = m->q_lora_rank, rope = m->qk_rope_head_dim;
		double nope = m->qk_nope_head_dim, v = m->v_head_dim;

		r->mla = r->generic = true;
		/* q_a (replicated: every GPU projects all of d to the Q
		 * latent) then q_b (column-parallel), or q_proj */
		if (ql > 0) {
			r->layer_gemm[0] = GEMM(ql, d, false, wq);
			r->mla_gemm[0] = GEMM(hq * (nope + rope), ql, false, wq);
		} else {
			r->layer_gemm[0] = GEMM(hq * (nope + rope), d, false, wq);
		}
		r->mla_gemm[1] = GEMM(kl + rope, d, false, wq);   /* kv_a, replicated */
		r->layer_gemm[1] = GEMM(d, hq * v, false, wq);    /* o_proj, row-parallel */
		r->kv_b = GEMM(hq * (nope + v), kl, false, wq);
		/* absorbed: W_UK and W_UV dequantised to bf16 at load */
		r->uk = GEMM(hq * kl, nope, false, 1.0);
		r->uk.bytes_per_m = hq * (nope + kl) * dt;
		r->uv = GEMM(hq * v, kl, false, 1.0);
		r->uv.bytes_per_m = hq * (kl + v) * dt;
		r->mla_pf_flops_per_pos = 2.0 * hq * (nope + rope + v);
		r->mla_pf_kv_bytes = hq * (nope + rope + v) * dt;
		r->mla_pf_qo_bytes = hq * (nope + rope + v) * dt;
		r->mla_dec_flops_per_pos = hq * (2.0 * (kl + rope) + 2.0 * kl);
		r->mla_dec_kv_bytes = (kl + rope) * kt;
		r->mla_dec_qo_bytes = hq * (kl + rope + kl) * dt;
	}
	if (model_local_layers(m) > 0) {
		r->local_layers = model_local_layers(m);
		r->full_layers = m->n_layers - r->local_layers;
		r->window = m->sliding_window > 0 ? m->sliding_window : 0.0;
		r->chunk = m->sliding_window > 0 ? 0.0 : m->attn_chunk;
	}
	if (m->n_experts > 0) {
		double mats = m->mlp == MLP_GATED ? 2.0 : 1.0;   /* up (+ gate) */
		double ef = m->moe_intermediate / te;
		double sf = (m->shared_intermediate > 0 ? m->shared_intermediate
							: m->moe_intermediate) *
			    (double)m->n_shared_experts / ta;

		r->moe = r->generic = true;
		r->moe_layers = model_moe_layers(m);
		r->dense_layers = m->n_layers - r->moe_layers;
		r->n_experts = m->n_experts;
		r->experts_per_token = m->experts_per_token;
		r->router = GEMM((double)m->n_experts, d, m->router_bias, wq);
		r->shared_gemm[0] = GEMM(mats * sf, d, m->linear_bias, wq);
		r->shared_gemm[1] = GEMM(d, sf, m->linear_bias, wq);
		r->expert_gemm[0] = GEMM(mats * ef, d, m->linear_bias, wq);
		r->expert_gemm[1] = GEMM(d, ef, m->linear_bias, wq);
	} else if (r->mla) {
		r->moe_layers = 0.0;
		r->dense_layers = m->n_layers;
	}
	r->attn_flops_per_pos = 4.0 * hq * hd;
	/* fp8 KV: K and V are stored (and read by decode attention) at one
	 * byte, dequantised in the kernel; the attention math stays bf16. */
	r->kv_bytes_per_tok = 2.0 * hkv * hd * kt;
	r->qo_bytes_per_tok = 2.0 * hq * hd * dt;
	/* Two fused residual-add + norm kernels (read x and residual, write
	 * both: 4 d each), RoPE on Q and K in place (read + write), and the
	 * activation (gated: read gate and up, write one; plain: read, write). */
	r->elem_bytes_per_tok = 8.0 * d * dt;
	r->elem_kernels = 3.0;
	if (r->mla) {
		/* RoPE on the queries' and the key's rope dims; RMSNorm of the
		 * KV latent and (q_lora_rank > 0) of the Q latent */
		double ql = m->q_lora_rank, kl = m->kv_lora_rank;

		r->elem_bytes_per_tok += 2.0 * (hq + 1.0) * m->qk_rope_head_dim * dt +
					 2.0 * (kl + ql) * dt;
		r->elem_kernels += 2.0 + (ql > 0 ? 1.0 : 0.0);
	} else if (m->pos_embeddings == 0) {
		r->elem_bytes_per_tok += 2.0 * (hq + hkv) * hd * dt;
		r->elem_kernels += 1.0;
	}
	if (!r->moe) {
		r->elem_bytes_per_tok += (m->mlp == MLP_GATED ? 3.0 : 2.0) * ff * dt;
	} else {
		/* per layer on average: the dense layers' activation; the MoE
		 * layers' top-k over the router logits, the activation of the
		 * k routed and the shared experts' rows, the permute (gather
		 * k rows of x) and the weighted combine (read k rows, write
		 * one), as two more kernels */
		double act = m->mlp == MLP_GATED ? 3.0 : 2.0;
		double sf = (m->shared_intermediate > 0 ? m->shared_intermediate
							: m->moe_intermediate) *
			    (double)m->n_shared_experts / ta;
		/* the routed experts' activation rows on one GPU: k rows of
		 * width moe_intermediate / tp per token the MoE layers carry,
		 * with DP attention all ranks' (elem_bytes_per_mtok) */
		double kact = (double)m->experts_per_token * m->moe_intermediate / tp;
		double moe_b;

		if (cfg->dp_attention > 1) {
			moe_b = ((double)m->n_experts + act * sf +
				 (2.0 * m->experts_per_token + 1.0) * d) * dt;
			r->elem_bytes_per_mtok = r->moe_layers * act * kact * dt / r->layers;
		} else {
			moe_b = ((double)m->n_experts + act * (kact + sf) +
				 (2.0 * m->experts_per_token + 1.0) * d) * dt;
		}
		r->elem_bytes_per_tok += (r->dense_layers * act * ff * dt + r->moe_layers * moe_b) /
					 r->layers;
		r->elem_kernels += 2.0 * r->moe_layers / r->layers;
	}
	r->embed_bytes_per_tok = 2.0 * d * dt;
	r->embed_kernels = 1.0;
	if (m->pos_embeddings > 0) {
		r->embed_bytes_per_tok += 2.0 * d * dt;
		r->embed_kernels += 1.0;
	}
	r->norm_bytes_per_tok = 2.0 * d * dt;
	/* Sampler: three passes over fp32 logits (scale, softmax, sample). */
	r->sample_bytes_per_emit = 3.0 * m->vocab * 4.0;
	r->sample_kernels = 3.0;

	r->tp_active = cfg->tp > 1;
	link_bw = g->nvlink_bw > 0 ? g->nvlink_bw : g->pcie_bw;
	/* a ring over more GPUs than a node (--gpus-per-node) crosses the
	 * inter-node link, one NIC per GPU: its slowest hop sets the ring's
	 * rate (NCCL's rings span the nodes) */
	r->ar_s_per_byte = 2.0 * (tp - 1.0) / tp / (ring_bw(cfg, cfg->tp, link_bw) * link_eff);
	r->gather_s_per_byte = (ta - 1.0) / ta / (ring_bw(cfg, (int)ta, link_bw) * link_eff);
	r->collective_s = ar_lat_us * 1e-6;
	r->ar_bytes_per_tok = d * dt;
	r->n_allreduce = 2.0 * m->n_layers + 1.0;
	r->logit_bytes_per_emit = m->vocab * dt;
	if (epdp)
		epdp_init(r, cfg, link_bw, link_eff, imbalance);

	r->host_s = host_ms * 1e-3;
	r->host_s_per_seq = host_us_per_seq * 1e-6;

	r->idle_w = g->idle_w * ta;
	r->dynamic_w = (g->tdp_w - g->idle_w) * ta;
	r->gap_extra_w = (cost_host_gap_power_w(g) - g->idle_w) * ta;
	return 0;
}

int cost_gemm_roofline_init(struct cost_gemm_roofline *rg, const struct gpu_spec *g,
			    enum ss_dtype w, double act_bytes, struct ss_params *params,
			    struct ss_error *err)
{
	struct ss_params none;
	struct rl_params p;
	int rc;

	assert(act_bytes > 0.0 && w != SS_DTYPE_MODEL);
	memset(rg, 0, sizeof(*rg));
	if (!params) {
		memset(&none, 0, sizeof(none));
		snprintf(none.what, sizeof(none.what), "--cost-model");
		snprintf(none.name, sizeof(none.name), "roofline");
		params = &none;
	}
	rc = read_params(params, 1, &p, err);
	if (!rc)
		rc = ss_params_check_unused(params, err);
	if (rc)
		return rc;
	rg->s_per_wflop = s_per_wflop(g, w, &p);
	rg->s_per_byte = 1.0 / (g->hbm_bw * p.mem_eff);
	rg->kernel_s = p.kernel_us * 1e-6;
	rg->act_bytes = act_bytes;
	rg->wq = ss_dtype_bytes(w, NULL) / act_bytes;
	return 0;
}

double cost_gemm_roofline_s(const struct cost_gemm_roofline *rg, double m, double n, double k)
{
	double dt = rg->act_bytes, tc, tm;
	struct gemm w = GEMM(n, k, false, rg->wq);

	/* kernel()'s time of one layer GEMM */
	gemm_terms(&w, m, rg->s_per_wflop, rg->s_per_byte, &tc, &tm);
	return (tc > tm ? tc : tm) + rg->kernel_s;
}
#undef GEMM

/* The memory-bound power share of a step of n requests. */
static double mem_frac(const struct roofline *r, double n)
{
	if (r->mem_hi == r->mem_lo)
		return r->mem_hi;
	if (n < 1.0)
		n = 1.0;
	return r->mem_hi - (r->mem_hi - r->mem_lo) * r->mem_batch / (r->mem_batch + n - 1.0);
}

/* One roofline kernel: adds its time to *t and its power-weighted busy
 * time (compute-bound at full weight, memory-bound at the step's share f)
 * to *busy. */
struct acc {
	double busy;   /* power-weighted busy time, s */
	double comp;   /* time of compute-bound kernels, s (for DVFS, costmodel.h) */
};

static inline void kernel(const struct roofline *r, double tc, double tm, double f,
			  double *t, struct acc *a)
{
	double wm = f * tm;

	*t += (tc > tm ? tc : tm) + r->kernel_s;
	a->busy += tc > wm ? tc : wm;
	if (tc > tm)
		a->comp += tc;
}

/* Add one layer's accumulations, n_layers times. */
static inline void add_layers(const struct roofline *r, struct acc *a, const struct acc *la)
{
	a->busy += la->busy * r->layers;
	a->comp += la->comp * r->layers;
}

/* An MoE model's GEMMs at tok step tokens: each kind priced as one
 * kernel of one layer, times the layers that have it.  The routed
 * experts run as grouped GEMMs over tok x k token-expert assignments
 * (balanced: compute is the same however they spread) and read the
 * weights of the distinct experts the step touches,
 * model_distinct_experts(): E (1 - (1 - k/E)^tok).  Under EP / DP
 * attention the routed experts' GEMMs take mtok, the tokens the MoE
 * layers carry (moe_tokens()), the rest tok. */
static void moe_gemms(const struct roofline *r, struct memo_tok *m, double tok, double mtok)
{
	const struct gemm *w[MOE_GEMMS] = {
		&r->layer_gemm[0], &r->layer_gemm[1], &r->layer_gemm[2], &r->layer_gemm[3],
		&r->router, &r->shared_gemm[0], &r->shared_gemm[1],
		&r->expert_gemm[0], &r->expert_gemm[1], &r->mla_gemm[0], &r->mla_gemm[1],
	};
	double rows = tok * r->experts_per_token;
	double used = model_distinct_experts(r->n_experts, r->experts_per_token, tok);
	double t_all = 0.0, comp = 0.0;

	if (r->epdp) {
		/* the MoE layers carry mtok tokens (with DP attention all
		 * ranks'); a GPU computes its E-th of their assignments (x
		 * imbalance) and reads its E-th of the distinct experts */
		rows = mtok * r->experts_per_token * r->ep_rows_scale;
		used = model_distinct_experts(r->n_experts, r->experts_per_token, mtok) *
		       r->ep_experts_scale;
	}

	for (int g = 0; g < MOE_GEMMS; g++) {
		struct acc la = { 0 };
		double t = 0.0;

		m->moe_n[g] = g < 2 || g >= 9 ? r->layers : g < 4 ? r->dense_layers :
			      r->moe_layers;
		if (w[g]->flops_per_m == 0.0)
			m->moe_n[g] = 0.0;   /* no shared experts */
		if (g == 7 || g == 8) {
			m->moe_tc[g] = w[g]->flops_per_m * rows * r->s_per_wflop;
			m->moe_tm[g] = (w[g]->bytes_fixed * used + w[g]->bytes_per_m * rows) *
				       r->s_per_byte;
		} else {
			m->moe_tc[g] = w[g]->flops_per_m * tok * r->s_per_wflop;
			m->moe_tm[g] = (w[g]->bytes_fixed + w[g]->bytes_per_m * tok) * r->s_per_byte;
		}
		if (m->moe_n[g] == 0.0)
			continue;
		kernel(r, m->moe_tc[g], m->moe_tm[g], 0.0, &t, &la);
		t_all += t * m->moe_n[g];
		comp += la.comp * m->moe_n[g];
	}
	m->gemm_t = t_all;
	m->gemm_comp = comp;
}

/* The token-only terms at tok > 0 step tokens, of which the MoE layers
 * carry mtok (moe_tokens()). */
static const struct memo_tok *memo_tok(struct roofline *r, double tok, double mtok)
{
	struct memo_tok *m = &r->mtok[(uint64_t)tok & (MEMO_N - 1)];
	struct acc la = { 0 };
	double t = 0.0, tm, te;

	if (m->tok == tok && m->mtok == mtok)
		return m;
	if (r->generic) {
		moe_gemms(r, m, tok, mtok);
		goto ew;
	}
	for (int g = 0; g < 4; g++) {
		const struct gemm *w = &r->layer_gemm[g];

		gemm_terms(w, tok, r->s_per_wflop, r->s_per_byte, &m->gemm_tc[g], &m->gemm_tm[g]);
		kernel(r, m->gemm_tc[g], m->gemm_tm[g], 0.0, &t, &la);
	}
	m->gemm_t = t * r->layers;
	m->gemm_comp = la.comp * r->layers;
ew:
	if (r->dp > 1.0)
		tm = (r->elem_bytes_per_tok * tok + r->elem_bytes_per_mtok * mtok) * r->s_per_byte;
	else
		tm = r->elem_bytes_per_tok * tok * r->s_per_byte;
	te = r->embed_bytes_per_tok * tok * r->s_per_byte;
	m->ew_t = r->layers * (tm + r->elem_kernels * r->kernel_s) +
		  te + r->embed_kernels * r->kernel_s;
	m->ew_tm = r->layers * tm + te;
	m->norm_tm = r->norm_bytes_per_tok * tok * r->s_per_byte;
	if (r->dp > 1.0)
		m->ar_tl = r->epdp_s_per_tok * tok + r->epdp_s_per_mtok * mtok;
	else
		m->ar_tl = r->epdp ? r->epdp_s_per_tok * tok :
			   r->n_allreduce * r->ar_bytes_per_tok * tok * r->ar_s_per_byte;
	m->tok = tok;
	m->mtok = mtok;
	return m;
}

/* The emitted-row terms at emit > 0 rows: what kernel() would add for the
 * LM head, then the sampler. */
static const struct memo_emit *memo_emit(struct roofline *r, double emit)
{
	struct memo_emit *m = &r->memit[(uint64_t)emit & (MEMO_N - 1)];
	const struct gemm *g = &r->lm_head;
	double tc, tm;

	if (m->emit == emit)
		return m;
	tc = g->flops_per_m * emit * r->s_per_flop;
	tm = (g->bytes_fixed + g->bytes_per_m * emit) * r->s_per_byte;
	m->lm_t = (tc > tm ? tc : tm) + r->kernel_s;
	m->lm_tc = tc;
	m->lm_tm = tm;
	m->lm_compute = tc > tm;
	m->lm_comp = tc;
	tm = r->sample_bytes_per_emit * emit * r->s_per_byte;
	m->samp_t = tm + r->sample_kernels * r->kernel_s;
	m->samp_tm = tm;
	m->gather_tl = r->logit_bytes_per_emit * emit * r->gather_s_per_byte;
	m->emit = emit;
	return m;
}

/* Fill f, the memo_fixed entry of a step with these tokens (its MoE
 * layers carrying mtok), emitted rows and requests, on a miss: the terms
 * the step adds outside its attention, computed by the same expressions,
 * in the same order, as always. */
static __attribute__((noinline)) const struct memo_fixed *
memo_fixed_fill(struct roofline *r, struct memo_fixed *f, double tok, double mtok, double emit,
		uint32_t n_items)
{
	const struct memo_tok *mt = NULL;
	const struct memo_emit *me = NULL;
	double *t = f->t;
	struct acc a = { 0 };
	int64_t total = 0;

	double fm;

	memset(f, 0, sizeof(*f));
	f->fmem = fm = mem_frac(r, n_items);
	if (tok > 0.0) {
		double lb = 0.0;

		mt = memo_tok(r, tok, mtok);
		t[COST_OP_GEMM] = mt->gemm_t;
		if (r->generic) {
			for (int g = 0; g < MOE_GEMMS; g++) {
				double wm = fm * mt->moe_tm[g];

				lb += (mt->moe_tc[g] > wm ? mt->moe_tc[g] : wm) * mt->moe_n[g];
			}
			f->gemm_busy = lb;
		} else {
			for (int g = 0; g < 4; g++) {
				double wm = fm * mt->gemm_tm[g];

				lb += mt->gemm_tc[g] > wm ? mt->gemm_tc[g] : wm;
			}
			f->gemm_busy = lb * r->layers;
		}
		f->gemm_comp = mt->gemm_comp;
	}
	if (emit > 0.0)
		me = memo_emit(r, emit);
	if (tok > 0.0) {
		t[COST_OP_ELEMENTWISE] = mt->ew_t;
		f->ew_busy = fm * mt->ew_tm;
		/* the final norm: a memory-bound kernel (no compute-bound time) */
		kernel(r, 0.0, mt->norm_tm, fm, &t[COST_OP_LM_HEAD], &a);
		f->norm_busy = a.busy;
	}
	if (emit > 0.0) {
		double wm = fm * me->lm_tm;

		/* the LM-head GEMM, then the sampler */
		t[COST_OP_LM_HEAD] += me->lm_t;
		f->lm_busy = me->lm_tc > wm ? me->lm_tc : wm;
		f->lm_comp = me->lm_compute ? me->lm_comp : 0.0;
		t[COST_OP_LM_HEAD] += me->samp_t;
		f->samp_busy = fm * me->samp_tm;
	}
	if (r->tp_active && tok > 0.0) {
		double tl = mt->ar_tl;

		if (emit > 0.0)
			tl += me->gather_tl;
		t[COST_OP_ALLREDUCE] = tl + (r->n_allreduce + (emit > 0.0)) * r->collective_s;
		f->ar_busy = fm * tl;
	}
	t[COST_OP_HOST] = r->host_s + r->host_s_per_seq * n_items;

	f->ns_ok = true;
	for (int op = 0; op < COST_OP_COUNT && f->ns_ok; op++) {
		if (op == COST_OP_ATTN_PREFILL || op == COST_OP_ATTN_DECODE)
			continue;
		f->ns_ok = cost_ns_fits(t[op] * 1e9);
		if (f->ns_ok) {
			f->ns[op] = cost_ns_round(t[op] * 1e9);
			f->ns_ok = ss_time_add(total, f->ns[op], &total);
		}
	}
	f->ns_sum = total;
	f->tok = tok;
	f->mtok = mtok;
	f->emit = emit;
	f->items1 = (uint64_t)n_items + 1;
	return f;
}

/* The hit, inline in every step; the miss (memo_fixed_fill) out of line,
 * so that a hit saves no registers for it. */
static inline const struct memo_fixed *memo_fixed(struct roofline *r, double tok, double mtok,
						  double emit, uint32_t n_items)
{
	struct memo_fixed *f = &r->mfix[(uint64_t)tok & (MEMO_N - 1)];

	if (f->items1 == (uint64_t)n_items + 1 && f->tok == tok && f->mtok == mtok &&
	    f->emit == emit)
		return f;
	return memo_fixed_fill(r, f, tok, mtok, emit, n_items);
}

/* One kernel in each of n layers (kernel() n times, summed at once). */
static inline void kernel_n(const struct roofline *r, double tc, double tm, double f, double n,
			    double *t, struct acc *a)
{
	struct acc la = { 0 };
	double lt = 0.0;

	kernel(r, tc, tm, f, &lt, &la);
	*t += lt * n;
	a->busy += la.busy * n;
	a->comp += la.comp * n;
}

/* The attention of a model with local layers or MLA, into *t_pf and
 * *t_dec (s) and *a (docs/cost-models.md "Local attention", "MLA").
 * Local: the full layers over every key (the dense sums), the local
 * layers over the keys their window or chunk keeps (s->loc_*), same
 * per-key FLOPs and bytes.  MLA prefill: kv_b up-projects the latent of
 * every key of each chunk (pf_kv rows), then attention with Q/K head dim
 * nope + rope and V head dim v over the up-projected K and V; MLA
 * decode: W_UK absorbed into the query, attention over the latent
 * (scores over kl + rope, values over kl, the latent read once per key
 * for all heads), W_UV out of the latent. */
static void attn_special(const struct roofline *r, const struct cost_roofline_sums *s,
			 double fm, double *t_pf, double *t_dec, struct acc *a)
{
	if (r->mla) {
		/* verify items (sums.vq_*, exact integers like the sums they
		 * are part of) leave the prefill path for the decode one: the
		 * absorbed query over the latent, each key read once for the
		 * item's q queries (q x the key positions' FLOPs) */
		double pf_kv = s->pf_kv - s->vq_kv, pf_pos = s->pf_pos - s->vq_pos;
		double pf_tok = s->pf_tok - s->vq_tok, n_dec = s->n_dec + s->vq_tok;

		if (s->n_pf > s->n_vq) {
			kernel_n(r, r->kv_b.flops_per_m * pf_kv * r->s_per_wflop,
				 (r->kv_b.bytes_fixed + r->kv_b.bytes_per_m * pf_kv) *
				 r->s_per_byte, fm, r->layers, t_pf, a);
			kernel_n(r, r->mla_pf_flops_per_pos * pf_pos * r->s_per_attn_flop,
				 (r->mla_pf_kv_bytes * pf_kv + r->mla_pf_qo_bytes * pf_tok) *
				 r->s_per_byte, fm, r->layers, t_pf, a);
		}
		if (n_dec > 0.0) {
			kernel_n(r, r->uk.flops_per_m * n_dec * r->s_per_flop,
				 (r->uk.bytes_fixed + r->uk.bytes_per_m * n_dec) * r->s_per_byte,
				 fm, r->layers, t_dec, a);
			kernel_n(r, r->mla_dec_flops_per_pos * (s->dec_kv + s->vq_pos) *
				 r->s_per_attn_flop,
				 (r->mla_dec_kv_bytes * (s->dec_kv + s->vq_kv) +
				  r->mla_dec_qo_bytes * n_dec) *
				 r->s_per_kv_byte, fm, r->layers, t_dec, a);
			kernel_n(r, r->uv.flops_per_m * n_dec * r->s_per_flop,
				 (r->uv.bytes_fixed + r->uv.bytes_per_m * n_dec) * r->s_per_byte,
				 fm, r->layers, t_dec, a);
		}
		return;
	}
	if (s->n_pf) {
		kernel_n(r, r->attn_flops_per_pos * s->pf_pos * r->s_per_attn_flop,
			 (r->kv_bytes_per_tok * s->pf_kv + r->qo_bytes_per_tok * s->pf_tok) *
			 r->s_per_byte, fm, r->full_layers, t_pf, a);
		kernel_n(r, r->attn_flops_per_pos * s->loc_pf_pos * r->s_per_attn_flop,
			 (r->kv_bytes_per_tok * s->loc_pf_kv + r->qo_bytes_per_tok * s->pf_tok) *
			 r->s_per_byte, fm, r->local_layers, t_pf, a);
	}
	if (s->n_dec > 0.0) {
		kernel_n(r, r->attn_flops_per_pos * s->dec_kv * r->s_per_attn_flop,
			 (r->kv_bytes_per_tok * s->dec_kv + r->qo_bytes_per_tok * s->n_dec) *
			 r->s_per_kv_byte, fm, r->full_layers, t_dec, a);
		kernel_n(r, r->attn_flops_per_pos * s->loc_dec_kv * r->s_per_attn_flop,
			 (r->kv_bytes_per_tok * s->loc_dec_kv + r->qo_bytes_per_tok * s->n_dec) *
			 r->s_per_kv_byte, fm, r->local_layers, t_dec, a);
	}
}

/* The tokens a step's MoE layers carry: with DP attention the lock-step
 * group's (cost_step.group_tokens), or D x the step's tok when not given
 * (symmetric load); else the step's own. */
static inline double moe_tokens(const struct roofline *r, const struct cost_step *step,
				double tok)
{
	if (r->dp > 1.0 && step->group_tokens > 0)
		return (double)step->group_tokens;
	return tok * r->dp;
}

static inline __attribute__((always_inline)) int step_sums(struct roofline *r, const struct cost_step *step,
			    const struct cost_roofline_sums *s, struct cost_result *out,
			    struct ss_error *err)
{
	const struct memo_fixed *f;
	double t_pf = 0.0, t_dec = 0.0;    /* attention, s */
	struct acc a = { 0 }, la;
	double tok = s->tok, emit = step->n_emit;
	int64_t total = 0;

	f = memo_fixed(r, tok, moe_tokens(r, step, tok), emit, step->n_items);

	/* The busy and compute-bound terms in the order they were always
	 * added, unconditionally: where one does not apply (no tokens, no
	 * emitted rows, tp 1, a memory-bound LM head) the memo holds +0.0,
	 * and adding +0.0 to a sum that starts at +0.0 and only grows
	 * changes nothing.  Token-level GEMMs first. */
	a.busy += f->gemm_busy;
	a.comp += f->gemm_comp;

	if (r->mla || r->local_layers > 0) {
		attn_special(r, s, f->fmem, &t_pf, &t_dec, &a);
		goto attn_done;
	}
	if (s->n_pf) {
		la = (struct acc){ 0 };
		kernel(r, r->attn_flops_per_pos * s->pf_pos * r->s_per_attn_flop,
		       (r->kv_bytes_per_tok * s->pf_kv + r->qo_bytes_per_tok * s->pf_tok) *
		       r->s_per_byte, f->fmem, &t_pf, &la);
		t_pf *= r->layers;
		add_layers(r, &a, &la);
	}
	if (s->n_dec > 0.0) {
		la = (struct acc){ 0 };
		kernel(r, r->attn_flops_per_pos * s->dec_kv * r->s_per_attn_flop,
		       (r->kv_bytes_per_tok * s->dec_kv + r->qo_bytes_per_tok * s->n_dec) *
		       r->s_per_kv_byte, f->fmem, &t_dec, &la);
		t_dec *= r->layers;
		add_layers(r, &a, &la);
	}
attn_done:
	a.busy += f->ew_busy;
	a.busy += f->norm_busy;
	a.busy += f->lm_busy;
	a.comp += f->lm_comp;
	a.busy += f->samp_busy;
	a.busy += f->ar_busy;

	/* The rounded operators, their sum checked as it grows: the other
	 * operators' from the memo, with the attention added; all are >= 0,
	 * so their sum fits if and only if every partial sum in operator
	 * order does.  Anything out of range takes the operator-by-operator
	 * loop, which names the first operator that does not fit. */
	if (f->ns_ok && cost_ns_fits(t_pf * 1e9) && cost_ns_fits(t_dec * 1e9)) {
		memcpy(out->op_ns, f->ns, sizeof(out->op_ns));
		/* (0 in most steps, which have no prefill) */
		out->op_ns[COST_OP_ATTN_PREFILL] = t_pf != 0.0 ? cost_ns_round(t_pf * 1e9) : 0;
		out->op_ns[COST_OP_ATTN_DECODE] = cost_ns_round(t_dec * 1e9);
		if (!ss_time_add(f->ns_sum, out->op_ns[COST_OP_ATTN_PREFILL], &total) ||
		    !ss_time_add(total, out->op_ns[COST_OP_ATTN_DECODE], &total))
			goto each;
	} else {
each:
		total = 0;
		for (int op = 0; op < COST_OP_COUNT; op++) {
			double t = op == COST_OP_ATTN_PREFILL ? t_pf :
				   op == COST_OP_ATTN_DECODE ? t_dec : f->t[op];

			if (!cost_ns_fits(t * 1e9))
				return cost_step_range_error(err, "roofline", cost_op_name(op),
							     t * 1e9, step);
			out->op_ns[op] = cost_ns_round(t * 1e9);
			if (!ss_time_add(total, out->op_ns[op], &total))
				return cost_step_range_error(err, "roofline",
							     "all operators together",
							     (double)total + (double)out->op_ns[op],
							     step);
		}
	}
	if (total <= 0) {
		out->op_ns[COST_OP_HOST] += 1 - total;
		total = 1;
	}
	out->duration_ns = total;
	/* idle power throughout, the dynamic range over the busy time, and
	 * the host operator at host-gap power (docs/energy.md) */
	out->energy_j = r->idle_w * (double)total * 1e-9 + r->dynamic_w * a.busy +
			r->gap_extra_w * (double)out->op_ns[COST_OP_HOST] * 1e-9;
	out->compute_ns = cost_ns_fits(a.comp * 1e9) ? cost_ns_round(a.comp * 1e9) : total;
	if (out->compute_ns > total)
		out->compute_ns = total;
	return 0;
}

int cost_roofline_step_sums(void *priv, const struct cost_step *step,
			    const struct cost_roofline_sums *s, struct cost_result *out,
			    struct ss_error *err)
{
	const struct roofline *r = priv;

	if (r->local_layers > 0) {
		struct cost_roofline_sums ls = *s;

		cost_roofline_sum_local(step, r->window, r->chunk, &ls);
		return step_sums(priv, step, &ls, out, err);
	}
	return step_sums(priv, step, s, out, err);
}

/* cost_roofline_sum, with a pass of its own for a step of decodes alone
 * (most steps: every item's tokens 1), which adds only the contexts:
 * cost_roofline_sum_decodes of n_items and their keys gives the same
 * doubles (integers below 2^53) that the general loop does.  The first
 * item that is not a decode sends the step to the general loop. */
static inline void sum_step(const struct cost_step *step, struct cost_roofline_sums *s)
{
	const struct cost_item *it = step->items;
	uint32_t n = step->n_items;
	int64_t ctx = 0;
	int32_t ctx_or = 0;   /* or of the contexts: negative if one is */

	if (n > COST_ROOFLINE_INT_ITEMS)
		goto general;
	for (uint32_t i = 0; i < n; i++) {
		if (it[i].tokens != 1)
			goto general;
		ctx_or |= it[i].context;
		ctx += it[i].context;
	}
	if (ctx_or >= 0) {
		cost_roofline_sum_decodes(n, ctx + n, s);
		return;
	}
general:
	cost_roofline_sum(step, s);
}

int cost_roofline_step_padded(void *priv, const struct cost_step *s, uint32_t g,
			      struct cost_result *out, struct ss_error *err)
{
	const struct roofline *r = priv;
	const double pad = (double)(g - s->n_items);
	struct cost_roofline_sums sums;
	/* as kernel_step builds it, less the rows, which step_sums does not read */
	const struct cost_step padded = {
		.items = NULL, .n_items = g, .n_emit = s->n_emit + (g - s->n_items),
		.total_tokens = g, .group_tokens = s->group_tokens,
	};

	assert(g > s->n_items);
	if (r->local_layers > 0 || g > COST_ROOFLINE_INT_ITEMS)
		return 1;
	sum_step(s, &sums);
	sums.tok += pad;
	sums.dec_kv += pad;
	sums.n_dec += pad;
	return step_sums(priv, &padded, &sums, out, err);
}

static int roofline_step(void *priv, const struct cost_step *step, struct cost_result *out,
			 struct ss_error *err)
{
	const struct roofline *r = priv;
	struct cost_roofline_sums s;

	sum_step(step, &s);
	if (r->local_layers > 0)
		cost_roofline_sum_local(step, r->window, r->chunk, &s);
	return step_sums(priv, step, &s, out, err);
}

const struct cost_model_ops cost_roofline_ops = {
	.version = COST_MODEL_VERSION,
	.name = "roofline",
	.description = "analytic: model shapes x GPU spec sheet with efficiency factors",
	.priv_size = sizeof(struct roofline),
	.init = roofline_init,
	.step = roofline_step,
};
