/* servesim — the work of one multi-LoRA kernel call (SGMV-style shrink and
 * expand of one module over a step's segments; kernels/backend.h,
 * struct kernel_lora_args), as both sides count it: `calibrate run`'s
 * `lora` rows are fitted on these counts (calibrate/op-plan.c), and the
 * simulator prices a step's adapter GEMMs with the same counts
 * (sim/lora.c).  One definition, so the fit and the price cannot drift.
 *
 * A call over T token rows of a module d_in -> d_out, each row at its
 * adapter's rank, S segments (distinct adapters) of ranks r_s:
 *   shrink  tmp = x A^T: 2 r d_in FLOPs a row; reads x (T x d_in) and each
 *           segment's A (r_s x d_in), writes tmp (T x r);
 *   expand  y += tmp B^T: 2 r d_out FLOPs a row; reads tmp and each
 *           segment's B (d_out x r_s), reads and writes y (T x d_out).
 * With tok_rank = sum over rows of their rank and seg_rank = sum over
 * segments of theirs, in elements of e bytes:
 *   FLOPs          = 2 tok_rank (d_in + d_out)
 *   adapter bytes  = e seg_rank (d_in + d_out)        (A and B, once each)
 *   activation bytes = e (2 tok_rank + T (d_in + 2 d_out))  (x, tmp, y)
 * The two kinds of bytes come from different places: an adapter's
 * matrices from memory (a step reads them once, after the base model's
 * weights and KV have passed through the caches), the activations from
 * the cache the kernels before left them in.
 *
 * A measured device's call costs (cal_plan.lora, fitted to its rows with
 * every term >= 0, weights 1/t^2):
 *   t = c0 + c1 S + c2 adapter MB + c3 activation MB + c4 GFLOP
 * c0 per call (the kernel's launch and fixed work), c1 per segment (the
 * CPU and CUDA backends issue two GEMMs per segment: a launch each), c2
 * and c3 the inverses of the bandwidths reached for the adapters' and the
 * activations' bytes, c4 the inverse of the FLOP rate: measured
 * efficiencies in place of the roofline's priors.  docs/lora.md,
 * docs/calibration.md. */
#ifndef SS_CAL_LORA_KERNEL_H
#define SS_CAL_LORA_KERNEL_H

static inline void cal_lora_work(double e, double d_in, double d_out, double tokens,
				 double tok_rank, double seg_rank, double *flops,
				 double *adapter_bytes, double *act_bytes)
{
	*flops = 2.0 * tok_rank * (d_in + d_out);
	*adapter_bytes = e * seg_rank * (d_in + d_out);
	*act_bytes = e * (2.0 * tok_rank + tokens * (d_in + 2.0 * d_out));
}

/* cal_plan.lora's features, in order (cal_series_features for CAL_LORA) */
enum { CAL_LORA_CALL = 0, CAL_LORA_SEG, CAL_LORA_ADAPTER_MB, CAL_LORA_ACT_MB, CAL_LORA_GFLOP,
       CAL_LORA_TERMS };

#endif
