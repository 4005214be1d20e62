/* servesim calibrate run — time servesim's own kernels into a store. */
#include <errno.h>
#include <sys/stat.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "cli.h"
#include "costmodel.h"
#include "host-fit.h"
#include "lora-kernel.h"
#include "op-plan.h"
#include "options.h"
#include "params.h"
#include "progress.h"
#include "ss-file.h"
#include "store.h"
#include "sweep.h"

/* Its options are in cli/options.c. */
const struct cli_command cli_cmd_cal_run = {
	.name = "calibrate run", .id = CLI_CAL_RUN,
	.failure = "failed measurement",
	.description =
		"Time each operator of a model's step on a kernel backend over a shape grid\n"
		"(warm-up and repeats; energy where NVML or RAPL is readable) and write the\n"
		"measurements to a calibration store, for the table and fit cost models.\n"
		"Resumable: points already in the store are skipped.\n",
};

/* The sweep's progress callback: ctx is a struct cli_progress. */
static void progress(void *ctx, const char *op, int64_t done, int64_t total)
{
	(void)op;
	cli_progress_update(ctx, (uint64_t)done, (uint64_t)total);
}

/* The swept (scaled) model and a "cpu" device as catalog entries.  The
 * model's dtype_bytes is what the backend stored its weights in (4: fp32 on
 * the CPU, 2: bf16 on CUDA), so the simulator sizes weights and KV as the
 * sweep ran them.  The cpu figures are placeholders: with a calibration
 * store covering the model they only price the operators the sweep does
 * not measure. */
static int write_catalogs(const char *dir, const struct model_spec *m,
			  const struct synth_shape *sh, int width_div, int layers,
			  int dtype_bytes, struct ss_error *err)
{
	char path[1200], name[96];
	json_t *models, *gpus;
	int rc = 0;

	snprintf(name, sizeof(name), "%s-w%d-l%d", m->name, width_div, layers ? layers : m->n_layers);
	models = json_pack("{s:[{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:b, s:b,"
			   " s:i, s:s, s:b, s:i, s:s}]}", "models",
			   "name", name, "hf_id", "synthetic", "n_layers", sh->layers,
			   "hidden", sh->hidden, "n_heads", sh->heads, "n_kv_heads", sh->kv_heads,
			   "head_dim", sh->head_dim, "intermediate", sh->intermediate,
			   "vocab", sh->vocab, "max_context", m->max_context,
			   "mlp", sh->gated ? "gated" : "plain", "tied_embeddings", 0, "qkv_bias", 0,
			   "dtype_bytes", dtype_bytes, "norm", "rmsnorm", "linear_bias", 0, "pos_embeddings", 0,
			   "source", "servesim calibrate run: the synthetic model it swept");
	gpus = json_pack("{s:[{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:s}]}", "gpus",
			 "name", "cpu", "bf16_flops", 1e11, "hbm_bytes", 16e9, "hbm_bw", 2e10,
			 "nvlink_bw", 0.0, "pcie_bw", 1e10, "tdp_w", 100.0, "idle_w", 20.0,
			 "cost_per_hour", 0.0,
			 "source", "placeholder for CPU runs: figures unused where the store covers the model");
	if (!models || !gpus || (mkdir(dir, 0777) < 0 && errno != EEXIST)) {
		rc = ss_error_set(err, -errno ? -errno : -ENOMEM, dir, 0, "cannot create catalog directory");
		goto out;
	}
	for (int k = 0; k < 2 && !rc; k++) {
		snprintf(path, sizeof(path), "%s/%s", dir, k ? "gpus.json" : "models.json");
		struct ss_file sf;

		rc = ss_file_open(&sf, path, 0, err);
		if (rc)
			break;
		if (json_dumpf(k ? gpus : models, sf.f, JSON_INDENT(2))) {
			ss_file_abort(&sf);
			rc = ss_error_set(err, -EIO, path, 0, "cannot write the catalog");
		} else {
			rc = ss_file_commit(&sf, err);
		}
	}
out:
	json_decref(models);
	json_decref(gpus);
	return rc;
}


/* The whole steps the sweep stored for this device and model: the
 * model's ("step:MODEL") and its one-layer slice's ("step1:MODEL"). */
struct step_rows {
	const char *variant, *variant1;
	struct cal_meas *m;
	size_t n, cap;
};

static int collect_steps(void *ctx, const struct cal_meas *m)
{
	struct step_rows *r = ctx;

	if (strcmp(m->variant, r->variant) && strcmp(m->variant, r->variant1))
		return 0;
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 32;
		struct cal_meas *p = realloc(r->m, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		r->m = p;
		r->cap = cap;
	}
	r->m[r->n++] = *m;
	return 0;
}

/* Fit the host terms (host-fit.h) to the store's whole steps, each priced
 * by the table model from the same store (a one-layer step by the table
 * model of the one-layer slice), and write them as the engine profile
 * "servesim-BACKEND" to DIR/engines.json, so that `servesim run --engine
 * servesim-cpu --engine-catalog DIR/engines.json` adds to the operators
 * what the whole steps measured beyond them. */
/* The adapter kernels' fit to the store's lora rows of device, as the
 * table model makes it (cal_lora_fit), in one line; nothing without
 * rows. */
static int print_lora_fit(struct cal_store *st, const char *device, struct ss_error *err)
{
	struct cal_data d;
	struct cal_fit f;
	double rms;
	size_t n;
	int rc;

	cal_data_init(&d);
	rc = cal_data_load_store(&d, st, 0, device, 1u << CAL_LORA, NULL, NULL, err);
	if (!rc)
		rc = cal_lora_fit(&d, device, &f, &rms, &n, err);
	if (!rc && n > 0)
		printf("  lora kernels (the table model's fit to %zu rows): %.2f us a call + %.2f us an "
		       "adapter, adapters read at %.2f GB/s, activations at %.2f GB/s, %.2f GFLOP/s; "
		       "RMS error %.1f%%\n", n, 1e3 * f.c[CAL_LORA_CALL], 1e3 * f.c[CAL_LORA_SEG],
		       f.c[CAL_LORA_ADAPTER_MB] > 0 ? 1.0 / f.c[CAL_LORA_ADAPTER_MB] : INFINITY,
		       f.c[CAL_LORA_ACT_MB] > 0 ? 1.0 / f.c[CAL_LORA_ACT_MB] : INFINITY,
		       f.c[CAL_LORA_GFLOP] > 0 ? 1e3 / f.c[CAL_LORA_GFLOP] : INFINITY, 100 * rms);
	cal_data_release(&d);
	return rc;
}

static int write_engine(const char *dir, const char *store_path, struct cal_store *st,
			const struct sweep_config *sc, const char *scaled_name, struct host_fit *fit,
			struct ss_error *err)
{
	char models[1200], gpus[1200], path[1200], variant[96], variant1[96], src[1024];
	const char *stores[1] = { store_path };
	struct step_rows rows = { .variant = variant, .variant1 = variant1 };
	struct host_step_obs *obs = NULL;
	struct cost_model *cm = NULL, *cm1 = NULL;
	struct model_spec one;
	struct catalog cat;
	json_t *root = NULL;
	int rc;

	catalog_init(&cat);
	snprintf(models, sizeof(models), "%s/models.json", dir);
	snprintf(gpus, sizeof(gpus), "%s/gpus.json", dir);
	snprintf(variant, sizeof(variant), "step:%s", sc->model);
	snprintf(variant1, sizeof(variant1), "step1:%s", sc->model);
	rc = cli_load_catalog(&cat, models, gpus, NULL, err);
	if (!rc) {
		struct cost_config cc = {
			.model = catalog_model(&cat, scaled_name), .gpu = catalog_gpu(&cat, sc->device),
			.tp = 1, .stores = stores, .n_stores = 1,
		};

		if (!cc.model || !cc.gpu) {
			rc = ss_error_set(err, -ENOENT, dir, 0, "catalog has no model %s or device %s",
					  scaled_name, sc->device);
		} else {
			rc = cost_model_new(&cm, "table", &cc, err);
			model_slice(cc.model, 0, 1, &one);
			cc.model = &one;
			if (!rc)
				rc = cost_model_new(&cm1, "table", &cc, err);
		}
	}
	if (!rc)
		rc = cal_store_query(st, sc->device, CAL_HOST_OVERHEAD, collect_steps, &rows, err);
	if (!rc && !(obs = calloc(rows.n ? rows.n : 1, sizeof(*obs))))
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	for (size_t i = 0; i < rows.n && !rc; i++) {
		const struct cal_meas *m = &rows.m[i];
		bool one_layer = !strcmp(m->variant, variant1);
		int n_dec = (int)m->batch - (m->q_len != CAL_NA), n = 0;
		struct cost_item *items = calloc((size_t)m->batch, sizeof(*items));
		struct cost_step step = { 0 };
		struct cost_result res;

		if (!items) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			break;
		}
		for (int d = 0; d < n_dec; d++)
			items[n++] = (struct cost_item){ .tokens = 1, .context = (int32_t)m->kv_len - 1 };
		if (m->q_len != CAL_NA)
			items[n++] = (struct cost_item){ .tokens = (int32_t)m->q_len, .context = 0 };
		step = (struct cost_step){ .items = items, .n_items = (uint32_t)n,
			.n_prefill = m->q_len != CAL_NA, .n_emit = (uint32_t)n,
			.total_tokens = m->tokens };
		rc = cost_model_predict(one_layer ? cm1 : cm, &step, &res, err);
		free(items);
		if (rc)
			break;
		obs[i] = (struct host_step_obs){ .tokens = (double)m->tokens, .n_emit = n,
			.layers = one_layer ? 1.0 : (double)catalog_model(&cat, scaled_name)->n_layers,
			.wall_ms = isfinite(m->median_ms) ? m->median_ms : m->mean_ms,
			.kernels_ms = (double)(res.duration_ns - res.op_ns[COST_OP_HOST]) * 1e-6 };
	}
	if (!rc)
		rc = host_fit_run(obs, rows.n, fit, err);
	if (!rc) {
		snprintf(path, sizeof(path), "%s/engines.json", dir);
		snprintf(src, sizeof(src),
			 "servesim calibrate run --backend %s --model %s: host terms fitted to %zu whole "
			 "steps of %s on %s (the residual of each step's median wall time over the table "
			 "model's price of its operators, weighted by 1/wall^2); RMS relative error of "
			 "the steps %.1f%% on operators alone, %.1f%% with these terms",
			 sc->backend, sc->model, fit->n, scaled_name, sc->device,
			 100 * fit->rms_rel_before, 100 * fit->rms_rel_after);
		root = json_pack("{s:[{s:s, s:s, s:f, s:f, s:f, s:f, s:b, s:s}]}", "engines",
				 "name", sc->backend && !strcmp(sc->backend, "cuda") ? "servesim-cuda" :
				 "servesim-cpu",
				 "versions", "servesim's live executor (sim/executor-live.c) on this machine",
				 "prep_us", fit->coef_us[HOST_FIT_STEP],
				 "prep_us_per_layer", fit->coef_us[HOST_FIT_LAYER],
				 "prep_us_per_token", fit->coef_us[HOST_FIT_TOKEN],
				 "output_us_per_seq", fit->coef_us[HOST_FIT_EMIT],
				 "async_output", 0, "source", src);
		if (!root) {
			rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		} else {
			struct ss_file sf;

			rc = ss_file_open(&sf, path, 0, err);
			if (!rc && json_dumpf(root, sf.f, JSON_INDENT(2) | JSON_REAL_PRECISION(6))) {
				ss_file_abort(&sf);
				rc = ss_error_set(err, -EIO, path, 0, "cannot write the engine profile");
			} else if (!rc) {
				rc = ss_file_commit(&sf, err);
			}
		}
	}
	json_decref(root);
	free(obs);
	free(rows.m);
	cost_model_free(cm1);
	cost_model_free(cm);
	catalog_release(&cat);
	return rc;
}

int cal_cli_run(int argc, char **argv)
{
	struct cli_config cfg;
	const char *backend, *model_name, *store_path;
	const char *device, *catalog_out, *model_config;
	bool model_given, catalog_only, quiet;
	struct cli_progress prog;
	char config_name[64];
	int threads, width_div, layers, rc = 0;
	struct sweep_config sc = {
		.module_dir = cli_module_dir(),
		.powercap_root = getenv("SERVESIM_POWERCAP_ROOT"),   /* tests: a fake tree */
	};
	struct sweep_stats stats = { 0 };
	struct host_fit fit = { 0 };
	bool created = false;
	struct ss_error err = { 0 };
	struct catalog cat;
	const struct model_spec *m;
	struct cal_store *st = NULL;
	int status = SS_EXIT_FAILURE;
	bool cpu;

	rc = cli_parse(&cli_cmd_cal_run, argc, argv, &cfg, true, &err);
	if (rc == CLI_HELP_SHOWN)
		return SS_EXIT_OK;
	if (rc) {
		cli_error(&err);
		return SS_EXIT_USAGE;
	}
	backend = cfg.backend ? cfg.backend : "cpu";
	model_name = cfg.model;
	model_given = cfg.model != cli_default_model;
	model_config = cfg.model_config;
	store_path = cfg.store ? cfg.store : "calibration.db";
	device = cfg.device;
	catalog_out = cfg.catalog_out;
	catalog_only = cfg.catalog_only;
	quiet = cfg.quiet;
	threads = cfg.threads ? (int)cfg.threads : 1;
	width_div = (int)cfg.width_div;
	layers = (int)cfg.layers;
	sc.warmup = (int)cfg.warmup;
	sc.repeats = (int)cfg.repeats;
	sc.max_tokens = (int)cfg.max_tokens;
	sc.max_kv = (int)cfg.max_kv;
	if (catalog_only && !catalog_out) {
		cli_errorf("--catalog-only: expected --catalog-out DIR (the catalogs to write)");
		return SS_EXIT_USAGE;
	}
	cpu = !strcmp(backend, "cpu");
	if (!device && !cpu) {
		cli_errorf("calibrate run --backend %s: expected --device NAME (the catalog GPU it runs on)",
			   backend);
		return SS_EXIT_USAGE;
	}
	catalog_init(&cat);
	if (cli_load_catalog(&cat, NULL, NULL, NULL, &err))
		goto fail;
	if (model_config) {
		struct model_spec mc;

		if (model_from_hf_config(&mc, model_config, model_given ? model_name : NULL, &err) ||
		    catalog_add_model(&cat, &mc, &err))
			goto fail;
		snprintf(config_name, sizeof(config_name), "%s", mc.name);
		model_name = config_name;
	}
	m = catalog_model(&cat, model_name);
	if (!m) {
		cli_errorf("unknown model '%s' (see `servesim list models`)", model_name);
		status = SS_EXIT_USAGE;
		goto out;
	}
	/* before measuring: the synthetic model is dense, and the table it
	 * writes would be priced as one (issue 12) */
	if (model_check_priced(m, &err))
		goto fail;
	if (m->n_experts > 0) {
		ss_error_set(&err, -ENOTSUP, NULL, 0,
			     "%s: calibrate run measures dense models only (its synthetic model has no experts); mixture-of-experts GEMMs are priced by the roofline",
			     m->name);
		goto fail;
	}
	if (model_attn_special(m)) {
		ss_error_set(&err, -ENOTSUP, NULL, 0,
			     "%s: calibrate run measures full-attention models only; %s is priced by the roofline",
			     m->name, model_attn_special(m));
		goto fail;
	}
	sc.backend = backend;
	sc.threads = threads;
	sc.model = m->name;
	sc.device = device ? device : "cpu";
	sc.shape = (struct synth_shape){
		.layers = m->n_layers, .hidden = m->hidden, .heads = m->n_heads,
		.kv_heads = m->n_kv_heads, .head_dim = m->head_dim,
		.intermediate = m->intermediate, .vocab = m->vocab, .gated = m->mlp == MLP_GATED,
	};
	if (!width_div)
		width_div = cpu ? 8 : 1;
	if (!layers && cpu)
		layers = 4;
	if ((width_div > 1 || layers) && synth_shape_scale(&sc.shape, width_div, layers, &err))
		goto fail;
	/* points measured of the grid's (cli/progress.h) */
	cli_progress_start(&prog, "calibrate run", "points", 0, quiet || catalog_only);
	sc.progress = progress;
	sc.progress_ctx = &prog;
	if (catalog_only) {
		/* the store as it is: it must exist, and nothing is written to it */
		if (cal_store_open(&st, store_path, CAL_OPEN_READONLY, &err))
			goto fail;
		goto catalogs;
	}
	/* A store this run creates and then fails to put a single point in
	 * (the backend does not load, there is no device) is removed again:
	 * nothing half-made is left.  One with points stays: the run resumes. */
	created = access(store_path, F_OK) != 0;
	stats.measured = 0;
	if (cal_store_open(&st, store_path, CAL_OPEN_CREATE, &err))
		goto fail;
	/* SIGINT / SIGTERM stop the sweep before its next point, with the
	 * points so far committed (docs/calibration.md) */
	sc.stop = &cli_interrupted;
	if ((rc = cli_interrupt_install())) {
		ss_error_set(&err, rc, NULL, 0, "sigaction: %s", strerror(-rc));
		goto fail;
	}
	rc = sweep_run(st, &sc, &stats, &err);
	cli_progress_end(&prog);
	if (rc == -EINTR && cli_interrupted) {
		if (created && stats.measured == 0)   /* removed below */
			cli_errorf("interrupted by %s before a point was measured; %s removed",
				   cli_interrupt_name(cli_interrupted), store_path);
		else
			cli_errorf("interrupted by %s after %lld points measured (%lld already there); they are in %s, and a rerun resumes",
				   cli_interrupt_name(cli_interrupted), (long long)stats.measured,
				   (long long)stats.skipped, store_path);
		status = cli_interrupt_status(cli_interrupted);
		goto drop_empty;
	}
	if (rc)
		goto fail;
catalogs:
	if (catalog_out && write_catalogs(catalog_out, m, &sc.shape, width_div, layers,
					   cpu ? 4 : 2, &err))
		goto fail;
	if (catalog_out) {
		char scaled[96];

		snprintf(scaled, sizeof(scaled), "%s-w%d-l%d", m->name, width_div,
			 layers ? layers : m->n_layers);
		if (write_engine(catalog_out, store_path, st, &sc, scaled, &fit, &err))
			goto fail;
	}
	if (quiet || catalog_only)
		goto done;
	printf("calibrate run: %lld points measured, %lld already in %s\n"
	       "  samples timed again (the core was taken during them): %lld\n"
	       "  device %s: %s\n  energy: %s\n",
	       (long long)stats.measured, (long long)stats.skipped, store_path,
	       (long long)stats.retimed, sc.device,
	       stats.device_desc, stats.meter);
	if (catalog_out)
		printf("  host terms (engine servesim-%s in %s/engines.json): %.1f us per step + "
		       "%.1f us per layer + %.3f us per token + %.1f us per emitted row, from %zu "
		       "whole steps; their RMS "
		       "error %.1f%% on operators alone, %.1f%% with the terms (largest %.1f%%; "
		       "%.1f%% each step left out of the fit)\n",
		       cpu ? "cpu" : "cuda", catalog_out, fit.coef_us[HOST_FIT_STEP],
		       fit.coef_us[HOST_FIT_LAYER],
		       fit.coef_us[HOST_FIT_TOKEN], fit.coef_us[HOST_FIT_EMIT], fit.n,
		       100 * fit.rms_rel_before, 100 * fit.rms_rel_after, 100 * fit.max_rel_after,
		       100 * fit.rms_rel_loo);
	if (print_lora_fit(st, sc.device, &err))
		goto fail;
done:
	status = SS_EXIT_OK;
	goto out;
fail:
	cli_error(&err);
drop_empty:
	if (created && st && stats.measured == 0) {
		static const char *const side[] = { "", "-wal", "-shm", "-journal" };

		cal_store_close(st);
		st = NULL;
		for (size_t i = 0; i < sizeof(side) / sizeof(side[0]); i++) {
			char p[4200];

			snprintf(p, sizeof(p), "%s%s", store_path, side[i]);
			unlink(p);
		}
	}
out:
	cal_store_close(st);
	catalog_release(&cat);
	return status;
}
