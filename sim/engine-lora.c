/* servesim — the engine's side of multi-LoRA serving (lora.h): which
 * waiting requests a batch policy sees, and what a step's adapters cost.
 * Called only when engine_config.lora is set; a run without it never
 * enters this file. */
#include "engine-int.h"

#include <errno.h>

#include "sstime.h"

static int32_t view_adapter(const void *v)
{
	return request_of(v)->adapter;
}

int eng_lora_view(struct engine *e, struct instance *in)
{
	uint32_t n = in->view.n_waiting;
	struct lora_wait *w = lora_inst_wait(in->lora);

	(void)e;
	if (w) {
		const void *const *v;

		/* the index keeps the view between steps (lora-wait.h) */
		in->view.n_waiting = lora_wait_view(w, &v);
		in->view.waiting = (const struct req_view *const *)v;
		return 0;
	}
	if (n == 0)
		return 0;
	if (eng_grow((void **)&in->lora_view, &in->cap_lora_view, n, sizeof(*in->lora_view)))
		return -ENOMEM;
	in->view.n_waiting = lora_filter(in->lora, (const void *const *)in->view.waiting, n,
					 in->lora_view, view_adapter);
	in->view.waiting = (const struct req_view *const *)in->lora_view;
	return 0;
}

int eng_lora_price(struct instance *in, struct exec_result *xr, struct ss_error *err)
{
	uint32_t n = in->n_fl;
	int64_t load, gemm, dur = xr->duration_ns;
	int rc;

	if (eng_grow((void **)&in->lora_ad, &in->cap_lora_ad, n, sizeof(*in->lora_ad)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (uint32_t k = 0; k < n; k++)
		in->lora_ad[k] = in->fl_req[k]->adapter;
	rc = lora_step(in->lora, in->lora_ad, in->fl_tokens, n, &load, &gemm, err);
	if (rc)
		return rc;
	/* an engine that prefetches adapters (lora_load_overlap: S-LoRA
	 * loads the next batch's adapters on a side stream while the GPU
	 * computes) hides a load behind the step's own kernels; the step
	 * waits only for what is left, and that is what the statistics
	 * count as waiting for loads */
	if (load > 0 && in->pl->engine && in->pl->engine->lora_load_overlap) {
		int64_t hidden = load < dur + gemm ? load : dur + gemm;

		load -= hidden;
		in->st->lora.load_ns -= hidden;
	}
	/* the GEMMs draw the step's average power; the loads run over PCIe
	 * before the step's kernels, the GPUs idle (as swaps: kvm_price) */
	if (gemm > 0 && dur > 0)
		xr->energy_j += xr->energy_j * (double)gemm / (double)dur;
	xr->energy_j += in->pl->gpu->idle_w * in->pl->tp * (double)load / 1e9;
	xr->op_ns[COST_OP_LORA] += gemm;
	if (!ss_time_add(xr->duration_ns, gemm, &xr->duration_ns) ||
	    !ss_time_add(xr->duration_ns, load, &xr->duration_ns))
		return eng_time_error(err, (double)(gemm + load) / 1e9,
				      "a step's adapters on instance %u", in->idx);
	return 0;
}
