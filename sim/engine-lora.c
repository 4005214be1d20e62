/* servesim — the engine's side of multi-LoRA serving (lora.h): which
 * waiting requests a batch policy sees, and what a step's adapters cost.
 * Called only when engine_config.lora is set; a run without it never
 * enters this file. */
#include "engine-int.h"

#include <errno.h>

#include "sstime.h"

const char *eng_lora_backend(const struct pool *pl)
{
	struct cost_lora_kernel k;

	return cost_model_lora_kernel(pl->cm, &k) == 0 ? pl->cm->ops->name : "roofline";
}

void eng_lora_setup(struct engine *e)
{
	for (uint32_t i = 0; i < e->n_inst; i++) {
		struct instance *in = &e->inst[i];
		struct cost_lora_kernel k;

		if (in->lora && cost_model_lora_kernel(in->pl->cm, &k) == 0)
			lora_inst_set_kernel(in->lora, &k);
	}
}

static int32_t view_adapter(const void *v)
{
	return request_of(v)->adapter;
}

/* The blocks a waiting request's next step takes: all it has pending (an
 * upper bound where a token budget cuts its prompt). */
static int32_t view_blocks(const void *v, int32_t block_size)
{
	const struct req_view *r = v;

	return req_blocks_needed(r, req_pending_tokens(r), block_size);
}

int eng_lora_view(struct engine *e, struct instance *in)
{
	uint32_t n = in->view.n_waiting;
	struct lora_wait *w = lora_inst_wait(in->lora);

	(void)e;
	if (lora_config_of(lora_inst_catalog(in->lora))->unified) {
		/* no slot limit; hold back the pages the view's new adapters
		 * will take (lora_page_reserve) */
		int64_t hold = lora_page_reserve(in->lora, (const void *const *)in->view.waiting, n,
						 in->view.free_blocks, in->view.block_size, view_adapter,
						 view_blocks);

		in->view.free_blocks = hold < in->view.free_blocks ? in->view.free_blocks - (int32_t)hold : 0;
		return 0;
	}
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

static bool runs_lora(const struct instance *in)
{
	return in->pl->xops->version >= 3 && in->pl->xops->runs_lora;
}

int eng_lora_admit(struct instance *in, struct ss_error *err)
{
	uint32_t n = in->n_fl, nl;
	const int32_t *loads;
	bool live = runs_lora(in);
	int rc;

	if (eng_grow((void **)&in->lora_ad, &in->cap_lora_ad, n, sizeof(*in->lora_ad)))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (uint32_t k = 0; k < n; k++)
		in->lora_ad[k] = in->fl_req[k]->adapter;
	rc = lora_step(in->lora, in->lora_ad, in->fl_tokens, n, live ? NULL : &in->lora_load_ns,
		       live ? NULL : &in->lora_gemm_ns, err);
	if (rc || !live)
		return rc;
	/* what the executor runs: each item's slot, and each load once, on
	 * the first item of its adapter (O(n x loads), loads <= max_loras) */
	for (uint32_t k = 0; k < n; k++) {
		struct exec_req *x = &in->fl_xreq[k];
		int32_t a = in->lora_ad[k];

		x->lora = a >= 0;
		x->adapter = a;
		x->lora_slot = lora_slot(in->lora, a);
		x->lora_rank = a >= 0 ? lora_rank(lora_inst_catalog(in->lora), a) : 0;
		x->lora_load = false;
	}
	nl = lora_step_loads(in->lora, &loads);
	for (uint32_t j = 0; j < nl; j++)
		for (uint32_t k = 0; k < n; k++)
			if (in->lora_ad[k] == loads[j]) {
				in->fl_xreq[k].lora_load = true;
				break;
			}
	return 0;
}

int eng_lora_price(struct instance *in, struct exec_result *xr, struct ss_error *err)
{
	int64_t load = in->lora_load_ns, gemm = in->lora_gemm_ns, dur = xr->duration_ns;

	if (runs_lora(in)) {
		/* measured, inside the step's duration and metered energy */
		in->st->lora.load_ns += xr->lora_load_ns;
		in->st->lora.gemm_ns += xr->lora_gemm_ns;
		in->st->lora.load_bytes += xr->lora_load_bytes;
		return 0;
	}
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
