#include "executor-live.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "meter.h"
#include "sstime.h"
#include "step.h"

struct live_exec {
	struct kernel_backend *kb;
	struct synth_model *sm;
	struct synth_item *items;     /* per step, grown geometrically */
	uint32_t cap_items;
	uint64_t steps;
	uint64_t fail_at;             /* fault injection for tests: fail this step (1-based), 0 = never */
	/* Energy: the backend's meter (NVML on CUDA, RAPL on the CPU), read
	 * around every step; what it counts between steps is idle energy. */
	struct meter meter;
	bool metered;
	double meter_last_j;          /* reading at the end of the last step */
	double idle_j;
	char what[512];
	/* For the summary's header: the backend and its device, and the model
	 * as run (scaled or not) */
	char device[320];
	char model_run[160];
	bool host;                    /* a host backend (cpu): no GPU is priced */
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int live_exec_new(struct live_exec **out, const struct live_config *cfg, struct ss_error *err)
{
	const struct model_spec *m = cfg->model;
	struct kernel_backend_config kc = {
		.threads = cfg->threads > 0 ? cfg->threads : 1, .module_dir = cfg->module_dir,
	};
	struct synth_shape sh = {
		.layers = m->n_layers, .hidden = m->hidden, .heads = m->n_heads,
		.kv_heads = m->n_kv_heads, .head_dim = m->head_dim,
		.intermediate = m->intermediate, .vocab = m->vocab,
		.gated = m->mlp == MLP_GATED,
		.kv_dtype = cfg->kv_fp8 ? KERNEL_DTYPE_FP8_E4M3 : 0,
	};
	struct live_exec *lx;
	char dev[160], bus[32], graphs[96] = "", adapters[96] = "";
	int rc;

	*out = NULL;
	/* the synthetic model is dense: an MoE model would run as another */
	if (m->n_experts > 0)
		return ss_error_set(err, -ENOTSUP, NULL, 0,
				    "%s: live runs execute dense models only; mixture-of-experts is not modelled by the live executor",
				    m->name);
	if (model_attn_special(m))
		return ss_error_set(err, -ENOTSUP, NULL, 0,
				    "%s: live runs execute full-attention models only; %s is not modelled by the live executor",
				    m->name, model_attn_special(m));
	lx = calloc(1, sizeof(*lx));
	if (!lx)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	rc = kernel_backend_new(&lx->kb, cfg->backend, &kc, err);
	if (!rc && (cfg->width_div > 1 || cfg->layers > 0))
		rc = synth_shape_scale(&sh, cfg->width_div > 1 ? cfg->width_div : 1, cfg->layers, err);
	if (!rc)
		rc = synth_model_new(&lx->sm, lx->kb, &sh, cfg->kv_blocks, cfg->block_size, cfg->seed,
				     err);
	if (!rc && cfg->lora_slots > 0)
		rc = synth_model_set_lora(lx->sm, cfg->lora_slots, cfg->lora_max_rank, err);
	if (rc) {
		live_exec_free(lx);
		return rc;
	}
	lx->fail_at = cfg->fail_at_step;
	/* Warm-up: a prefill chunk and a decode step, untimed and before the
	 * meter's first read, so the trace's first step does not pay the
	 * backend's first calls (CUDA's lazy loading of each kernel, cuBLAS's
	 * first-call setup, the step workspace's growth); calibrate run warms
	 * each point the same way (--warmup).  They write block 0, whose
	 * contents the next owner overwrites before it reads them. */
	{
		static const int32_t block0[1] = { 0 };
		int32_t t = cfg->block_size > 1 ? cfg->block_size - 1 : 1;
		int64_t ns;

		rc = synth_model_step(lx->sm, &(struct synth_item){ .tokens = t, .block_table = block0,
				      .n_blocks = 1, .emit = true }, 1, &ns, err);
		if (!rc && t < cfg->block_size)
			rc = synth_model_step(lx->sm, &(struct synth_item){ .tokens = 1, .context = t,
					      .block_table = block0, .n_blocks = 1, .emit = true },
					      1, &ns, err);
		if (rc) {
			live_exec_free(lx);
			return rc;
		}
	}
	/* Graphs, all captured now, as vLLM does at start-up: untimed and
	 * before the meter's first read (capturing runs each graph's step
	 * once on padding rows, which write no KV). */
	if (cfg->n_graph_sizes > 0 && kernel_backend_has_graphs(lx->kb)) {
		rc = synth_model_set_graphs(lx->sm, cfg->graph_sizes, cfg->n_graph_sizes,
					    cfg->max_kv_len, err);
		if (!rc)
			rc = synth_model_capture_graphs(lx->sm, err);
		if (rc) {
			live_exec_free(lx);
			return rc;
		}
		snprintf(graphs, sizeof(graphs), "; decode CUDA graphs at %d batch sizes up to %d",
			 cfg->n_graph_sizes, cfg->graph_sizes[cfg->n_graph_sizes - 1]);
	}
	kernel_backend_pci_bus_id(lx->kb, bus, sizeof(bus));
	meter_open(&lx->meter, cfg->backend, bus, cfg->powercap_root);
	lx->metered = meter_read(&lx->meter, &lx->meter_last_j);
	kernel_backend_device_name(lx->kb, dev, sizeof(dev));
	if (cfg->lora_slots > 0)
		snprintf(adapters, sizeof(adapters),
			 "; LoRA on q, k, v, o: %d slots of rank %d (synthetic adapters)",
			 cfg->lora_slots, cfg->lora_max_rank);
	snprintf(lx->what, sizeof(lx->what),
		 "%s; synthetic %s: %d layers, width %d, %d/%d heads of %d, ffn %d, vocab %d%s%s%s",
		 dev, m->name, sh.layers, sh.hidden, sh.heads, sh.kv_heads, sh.head_dim,
		 sh.intermediate, sh.vocab, cfg->kv_fp8 ? ", fp8 KV" : "", graphs, adapters);
	snprintf(lx->device, sizeof(lx->device), "%s (%s)", cfg->backend, dev);
	/* a scaled model is not the model named: say how it was cut down */
	if (sh.hidden != m->hidden || sh.layers != m->n_layers) {
		char width[32] = "";

		if (sh.hidden != m->hidden)
			snprintf(width, sizeof(width), "width/%d, ", cfg->width_div);
		snprintf(lx->model_run, sizeof(lx->model_run),
			 "%s scaled: %s%d layer%s instead of %d (synthetic weights)", m->name, width,
			 sh.layers, sh.layers == 1 ? "" : "s", m->n_layers);
	} else
		snprintf(lx->model_run, sizeof(lx->model_run), "%s (synthetic weights)", m->name);
	lx->host = !strcmp(cfg->backend, "cpu");
	*out = lx;
	return 0;
}

void live_exec_free(struct live_exec *lx)
{
	if (!lx)
		return;
	synth_model_free(lx->sm);
	kernel_backend_free(lx->kb);
	meter_close(&lx->meter);
	free(lx->items);
	free(lx);
}

const char *live_exec_describe(const struct live_exec *lx)
{
	return lx->what;
}

const char *live_exec_device(const struct live_exec *lx)
{
	return lx->device;
}

const char *live_exec_model(const struct live_exec *lx)
{
	return lx->model_run;
}

bool live_exec_host(const struct live_exec *lx)
{
	return lx->host;
}

bool live_exec_energy(const struct live_exec *lx, double *idle_j, const char **meter)
{
	*idle_j = lx->metered ? lx->idle_j : 0;
	*meter = lx->meter.what;
	return lx->metered;
}

static int live_run_step(void *priv, const struct exec_step *step, struct exec_result *out,
			 struct ss_error *err)
{
	struct live_exec *lx = priv;
	int64_t t0, kernel_ns = 0, load_ns;
	double load_bytes = 0;
	double e0 = 0, e1 = 0;
	int rc;

	if (step->n_items > lx->cap_items) {
		uint32_t cap = lx->cap_items ? lx->cap_items : 64;
		struct synth_item *p;

		while (cap < step->n_items)
			cap *= 2;
		p = realloc(lx->items, sizeof(*p) * cap);
		if (!p)
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		lx->items = p;
		lx->cap_items = cap;
	}
	for (uint32_t k = 0; k < step->n_items; k++) {
		const struct exec_req *r = &step->reqs[k];

		lx->items[k] = (struct synth_item){
			.tokens = step->items[k].tokens,
			.context = step->items[k].context,
			.block_table = r->block_table,
			.n_blocks = r->n_blocks,
			.emit = r->emit,
			.emit_rows = r->emit_rows,
			.lora = r->lora,
			.lora_slot = r->lora_slot,
		};
		/* an adapter's synthetic weights into the host store the first
		 * time it loads: host memory the run starts with, untimed */
		if (r->lora && r->lora_load) {
			int rc2 = synth_model_lora_stage(lx->sm, r->adapter, r->lora_rank, err);

			if (rc2)
				return rc2;
		}
	}
	if (++lx->steps == lx->fail_at)
		return ss_error_set(err, -EIO, NULL, 0,
				    "kernel failure injected at step %llu (SERVESIM_LIVE_FAIL_AT_STEP)",
				    (unsigned long long)lx->steps);
	if (lx->metered && !meter_read(&lx->meter, &e0))
		lx->metered = false;
	t0 = mono_ns();
	/* the step's adapter loads, before its kernels (the step waits for
	 * them, as the simulation prices them): host-to-device copies */
	for (uint32_t k = 0; k < step->n_items; k++) {
		const struct exec_req *r = &step->reqs[k];

		if (r->lora && r->lora_load) {
			rc = synth_model_lora_load(lx->sm, r->lora_slot, r->adapter, err);
			if (rc)
				return rc;
			load_bytes += (double)synth_model_lora_bytes(lx->sm, r->adapter);
		}
	}
	load_ns = mono_ns() - t0;
	rc = synth_model_step(lx->sm, lx->items, (int)step->n_items, &kernel_ns, err);
	if (rc)
		return rc;
	/* The step's wall time: the backend's timed work plus the host work
	 * around it.  Steps are not timed per operator here (op_ns stays 0;
	 * docs/live.md). */
	memset(out, 0, sizeof(*out));
	if (lx->metered && meter_read(&lx->meter, &e1)) {
		lx->idle_j += meter_delta(&lx->meter, lx->meter_last_j, e0);
		out->energy_j = meter_delta(&lx->meter, e0, e1);
		lx->meter_last_j = e1;
	} else {
		lx->metered = false;
	}
	out->duration_ns = mono_ns() - t0;
	if (out->duration_ns < kernel_ns + load_ns)
		out->duration_ns = kernel_ns + load_ns;
	out->lora_load_ns = load_ns;
	out->lora_load_bytes = load_bytes;
	out->lora_gemm_ns = synth_model_lora_ns(lx->sm);
	if (out->duration_ns < 1)
		out->duration_ns = 1;
	return 0;
}

/* Live steps are measured, not predicted: every operator reads "live".
 * Idle power is what the meter counted between steps over the idle time
 * (0 without a meter; docs/live.md). */
static void live_identity(const void *priv, int64_t idle_ns, struct exec_identity *out)
{
	const struct live_exec *lx = priv;

	out->cost_model_name = "live";
	for (int op = 0; op < COST_OP_COUNT; op++)
		out->op_backend[op] = "live";
	out->idle_power_w = lx->metered && idle_ns > 0 ? lx->idle_j / (idle_ns / SS_NS_PER_S) : 0;
}

const struct executor_ops executor_live_ops = {
	.version = EXECUTOR_VERSION,
	.name = "live",
	.priv_size = 0,   /* the caller owns the struct live_exec */
	.run_step = live_run_step,
	.identity = live_identity,
	.runs_lora = true,
};
