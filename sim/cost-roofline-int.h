/* servesim — the roofline cost model's step in two halves, for the
 * measured models (table) that price a step's unmeasured operators, its
 * energy and compute-bound share from a roofline of the same step and
 * already pass over its items: they sum the items once for both. */
#ifndef SS_COST_ROOFLINE_INT_H
#define SS_COST_ROOFLINE_INT_H

#include "costmodel.h"

#include <assert.h>
#include <math.h>

/* The sums over a step's items that the roofline prices it from. */
struct cost_roofline_sums {
	double tok;           /* tokens of the items with tokens > 0 */
	double pf_pos;        /* prefill chunks' causal key positions, sum of c p + c (c + 1) / 2 */
	double pf_kv;         /* prefill chunks' keys, sum of p + c */
	double pf_tok;        /* prefill chunks' tokens */
	double dec_kv;        /* decodes' keys, sum of p + 1 */
	double n_dec;         /* items with tokens == 1 */
	uint32_t n_pf;        /* items with tokens > 1 */
	/* Local-attention layers' share (cost_roofline_sum_local; 0 unless
	 * the model has local layers): the same three sums over the keys a
	 * sliding window of W or an attention chunk of C keeps. */
	double loc_pf_pos;    /* prefill chunks' kept causal key positions */
	double loc_pf_kv;     /* prefill chunks' kept keys */
	double loc_dec_kv;    /* decodes' kept keys */
	/* Of the prefill sums above, the items that verify drafts (2 ..
	 * cost_step.spec_q tokens; all 0 without): MLA prices them as
	 * decodes (attn_special) */
	double vq_pos, vq_kv, vq_tok;
	uint32_t n_vq;
};

/* Up to this many items the integer sums are summed in int64 (exact, and
 * equal to the double sums: every partial sum is below 2^53). */
#define COST_ROOFLINE_INT_ITEMS (1u << 21)

static inline void cost_roofline_sum(const struct cost_step *step, struct cost_roofline_sums *s)
{
	double tok = 0.0, pf_pos = 0.0, pf_kv = 0.0, pf_tok = 0.0, dec_kv = 0.0, n_dec = 0.0;
	uint32_t n_pf = 0;

	if (step->n_items <= COST_ROOFLINE_INT_ITEMS) {
		/* The decode and token sums in integers: every term is an
		 * integer below 2^31 + 1 and there are at most 2^21 of them,
		 * so every partial sum is an integer below 2^53, which the
		 * double sums of the loop below hold exactly too. */
		int64_t ipf_tok = 0, idec_kv = 0, in_dec = 0;
		int32_t ctx_or = 0;   /* or of the contexts: negative if one is */

		for (uint32_t i = 0; i < step->n_items; i++) {
			int32_t ci = step->items[i].tokens, pi = step->items[i].context;

			ctx_or |= pi;
			if (ci == 1) {
				idec_kv += (int64_t)pi + 1;
				in_dec++;
			} else if (ci > 1) {
				double c = ci, p = pi;

				/* causal chunk: query j sees p + j keys, j = 1..c */
				pf_pos += c * p + 0.5 * c * (c + 1.0);
				pf_kv += p + c;
				ipf_tok += ci;
				n_pf++;
			}
		}
		assert(ctx_or >= 0);
		pf_tok = (double)ipf_tok;
		tok = (double)(ipf_tok + in_dec);
		dec_kv = (double)idec_kv;
		n_dec = (double)in_dec;
	} else {
		for (uint32_t i = 0; i < step->n_items; i++) {
			double c = step->items[i].tokens, p = step->items[i].context;

			assert(p >= 0.0);
			if (c > 1.0) {
				pf_pos += c * p + 0.5 * c * (c + 1.0);
				pf_kv += p + c;
				pf_tok += c;
				n_pf++;
			} else if (c == 1.0) {
				dec_kv += p + 1.0;
				n_dec += 1.0;
			}
			tok += c > 0.0 ? c : 0.0;
		}
	}
	s->tok = tok;
	s->pf_pos = pf_pos;
	s->pf_kv = pf_kv;
	s->pf_tok = pf_tok;
	s->dec_kv = dec_kv;
	s->n_dec = n_dec;
	s->n_pf = n_pf;
	s->loc_pf_pos = s->loc_pf_kv = s->loc_dec_kv = 0.0;
	s->vq_pos = s->vq_kv = s->vq_tok = 0.0;
	s->n_vq = 0;
	for (uint32_t i = 0; step->spec_q > 1 && i < step->n_items; i++) {
		double c = step->items[i].tokens, p = step->items[i].context;

		if (c > 1.0 && c <= step->spec_q) {
			s->vq_pos += c * p + 0.5 * c * (c + 1.0);
			s->vq_kv += p + c;
			s->vq_tok += c;
			s->n_vq++;
		}
	}
}

/* What cost_roofline_sum gives a step of n_items <= COST_ROOFLINE_INT_ITEMS
 * decodes (every item's tokens 1) whose keys, the sum of context + 1 over
 * the items, are dec_kv: for a caller that sums them in its own pass. */
static inline void cost_roofline_sum_decodes(uint32_t n_items, int64_t dec_kv,
					     struct cost_roofline_sums *s)
{
	*s = (struct cost_roofline_sums){
		.tok = (double)n_items, .dec_kv = (double)dec_kv, .n_dec = (double)n_items,
	};
}

/* Sum over the queries at 0-based positions p .. p + c - 1 of the keys
 * each attends to in a local layer: a sliding window of w tokens keeps
 * min(q + 1, w) keys, an attention chunk of ch tokens (q mod ch) + 1
 * (Llama 4: a query sees the keys of its own chunk up to itself); w or
 * ch is 0.  Closed forms, O(1). */
static inline double cost_local_pos(double p, double c, double w, double ch)
{
	if (w > 0.0) {
		double e = p + c;   /* last query sees e keys if e <= w */

		if (e <= w)
			return c * p + 0.5 * c * (c + 1.0);
		if (p >= w)
			return c * w;
		/* queries p+1 .. w (1-based key counts) then e - w at w */
		return 0.5 * w * (w + 1.0) - 0.5 * p * (p + 1.0) + (e - w) * w;
	} else {
		/* S(n) = sum_{q < n} ((q mod ch) + 1) */
		double n0 = p, n1 = p + c, f0 = floor(n0 / ch), f1 = floor(n1 / ch);
		double r0 = n0 - f0 * ch, r1 = n1 - f1 * ch;
		double s0 = f0 * 0.5 * ch * (ch + 1.0) + 0.5 * r0 * (r0 + 1.0);
		double s1 = f1 * 0.5 * ch * (ch + 1.0) + 0.5 * r1 * (r1 + 1.0);

		return s1 - s0;
	}
}

/* Keys the queries at p .. p + c - 1 read in a local layer: the window's
 * min(p + c, w + c - 1), or the chunk's from the start of the chunk
 * holding p, p + c - floor(p / ch) ch. */
static inline double cost_local_keys(double p, double c, double w, double ch)
{
	if (w > 0.0)
		return p + c < w + c - 1.0 ? p + c : w + c - 1.0;
	return p + c - floor(p / ch) * ch;
}

/* The local layers' sums of a step (loc_* of s), for a window of w or a
 * chunk of ch tokens (the other 0).  One more pass over the items, made
 * only for models with local layers, so dense steps are unchanged. */
static inline void cost_roofline_sum_local(const struct cost_step *step, double w, double ch,
					   struct cost_roofline_sums *s)
{
	double pos = 0.0, kv = 0.0, dec = 0.0;

	for (uint32_t i = 0; i < step->n_items; i++) {
		double c = step->items[i].tokens, p = step->items[i].context;

		if (c == 1.0) {
			dec += cost_local_pos(p, 1.0, w, ch);
		} else if (c > 1.0) {
			pos += cost_local_pos(p, c, w, ch);
			kv += cost_local_keys(p, c, w, ch);
		}
	}
	s->loc_pf_pos = pos;
	s->loc_pf_kv = kv;
	s->loc_dec_kv = dec;
}

/* cost_roofline_ops.step of a step whose sums are s (cost_roofline_sum). */
int cost_roofline_step_sums(void *priv, const struct cost_step *step,
			    const struct cost_roofline_sums *s, struct cost_result *out,
			    struct ss_error *err);

/* cost_roofline_ops.step of the decode step s padded to g > s->n_items
 * rows with rows of one token and no context (a CUDA graph's captured
 * size, costmodel.c's kernel_step), without the rows: the padding adds
 * g - n_items to the sums' tokens, decode keys and decodes, exactly (the
 * sums are of integers below 2^53), so the result is the padded step's
 * bit for bit.  Returns 1, having done nothing, when the sums need the
 * rows themselves (a model with local layers; more rows than
 * COST_ROOFLINE_INT_ITEMS): the caller then pads them. */
int cost_roofline_step_padded(void *priv, const struct cost_step *s, uint32_t g,
			      struct cost_result *out, struct ss_error *err);

#endif
