/* servesim calibrate run — time servesim's own kernels into a store. */
#include <errno.h>
#include <getopt.h>
#include <sys/stat.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "params.h"
#include "ss-file.h"
#include "store.h"
#include "sweep.h"

static void help(FILE *f)
{
	fprintf(f, "usage: servesim calibrate run [options]\n\n"
		   "Time each operator of a model's step on a kernel backend over a shape grid\n"
		   "(warm-up and repeats; energy where NVML or RAPL is readable) and write the\n"
		   "measurements to a calibration store, for the table and fit cost models.\n"
		   "Resumable: points already in the store are skipped.\n\noptions:\n"
		   "  --backend NAME   cpu | cuda (default cpu)\n"
		   "  --model NAME     model from the catalog (default llama-3.1-8b)\n"
		   "  --store FILE     calibration store to write (default ./calibration.db)\n"
		   "  --device NAME    device name in the store (default: cpu for the cpu backend;\n"
		   "                   the catalog GPU name, e.g. h100-sxm, for cuda)\n"
		   "  --threads N      CPU threads (default 1)\n"
		   "  --width-div N    divide the model's widths by N (default 8 on cpu, 1 on cuda)\n"
		   "  --layers N       layers of the synthetic model for host overhead (default 4 on cpu)\n"
		   "  --warmup N       untimed runs per point (default 2)\n"
		   "  --repeats N      timed runs per point (default 5)\n"
		   "  --max-tokens N   largest token count of GEMMs and chunks (default 2048)\n"
		   "  --max-kv N       largest KV length of attention (default 4096)\n"
		   "  --catalog-out DIR  also write DIR/models.json (the swept model's scaled shape,\n"
		   "                   named MODEL-wDIV-lLAYERS) and DIR/gpus.json (a \"cpu\" entry) so\n"
		   "                   `servesim run` can simulate exactly what was swept\n"
		   "  --help           show this help\n");
}

static void progress(void *ctx, const char *op, int64_t done, int64_t total)
{
	(void)ctx;
	fprintf(stderr, "\r%-14s %5lld/%lld points", op, (long long)done, (long long)total);
	if (done == total)
		fputc('\n', stderr);
	fflush(stderr);
}

static int int_opt(const char *name, const char *v, int lo, int hi, int *out)
{
	int64_t x;

	if (!ss_parse_int64(v, &x) || x < lo || x > hi) {
		cli_errorf("--%s: expected an integer in %d..%d, got '%s'", name, lo, hi, v);
		return SS_EXIT_USAGE;
	}
	*out = (int)x;
	return 0;
}

/* The swept (scaled) model and a "cpu" device as catalog entries.  The cpu
 * figures are placeholders: with a calibration store covering the model
 * they only price the operators the sweep does not measure. */
static int write_catalogs(const char *dir, const struct model_spec *m,
			  const struct synth_shape *sh, int width_div, int layers,
			  struct ss_error *err)
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
			   "dtype_bytes", 4, "norm", "rmsnorm", "linear_bias", 0, "pos_embeddings", 0,
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

int cal_cli_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "backend", required_argument, NULL, 'b' }, { "model", required_argument, NULL, 'm' },
		{ "store", required_argument, NULL, 's' }, { "device", required_argument, NULL, 'd' },
		{ "threads", required_argument, NULL, 't' }, { "width-div", required_argument, NULL, 'w' },
		{ "layers", required_argument, NULL, 'l' }, { "warmup", required_argument, NULL, 'u' },
		{ "repeats", required_argument, NULL, 'r' }, { "max-tokens", required_argument, NULL, 'M' },
		{ "max-kv", required_argument, NULL, 'K' }, { "catalog-out", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *backend = "cpu", *model_name = "llama-3.1-8b", *store_path = "calibration.db";
	const char *device = NULL, *catalog_out = NULL;
	int threads = 1, width_div = 0, layers = 0, rc = 0, opt;
	struct sweep_config sc = {
		.warmup = 2, .repeats = 5, .max_tokens = 2048, .max_kv = 4096,
		.module_dir = cli_module_dir(),
		.powercap_root = getenv("SERVESIM_POWERCAP_ROOT"),   /* tests: a fake tree */
	};
	struct sweep_stats stats = { 0 };
	bool created = false;
	struct ss_error err = { 0 };
	struct catalog cat;
	const struct model_spec *m;
	struct cal_store *st = NULL;
	int status = SS_EXIT_FAILURE;
	bool cpu;

	opterr = 0;
	optind = 1;
	while ((opt = cli_getopt_long(argc, argv, ":", longopts)) != -1) {
		switch (opt) {
		case 'b': backend = optarg; break;
		case 'm': model_name = optarg; break;
		case 's': store_path = optarg; break;
		case 'd': device = optarg; break;
		case 't': rc = int_opt("threads", optarg, 1, 1024, &threads); break;
		case 'w': rc = int_opt("width-div", optarg, 1, 1024, &width_div); break;
		case 'l': rc = int_opt("layers", optarg, 1, 1024, &layers); break;
		case 'u': rc = int_opt("warmup", optarg, 0, 1000, &sc.warmup); break;
		case 'r': rc = int_opt("repeats", optarg, 1, 10000, &sc.repeats); break;
		case 'M': rc = int_opt("max-tokens", optarg, 16, 1 << 20, &sc.max_tokens); break;
		case 'K': rc = int_opt("max-kv", optarg, 16, 1 << 22, &sc.max_kv); break;
		case 'c': catalog_out = optarg; break;
		case 'h':
			help(stdout);
			return SS_EXIT_OK;
		case CLI_OPT_REFUSED:
			return SS_EXIT_USAGE;
		case ':':
			cli_errorf("%s: expected a value (see `servesim calibrate run --help`)",
				   argv[optind - 1]);
			return SS_EXIT_USAGE;
		default:
			cli_errorf("unknown option '%s' (see `servesim calibrate run --help`)",
				   argv[optind - 1]);
			return SS_EXIT_USAGE;
		}
		if (rc)
			return rc;
	}
	if (optind < argc) {
		cli_errorf("unexpected argument '%s' (see `servesim calibrate run --help`)", argv[optind]);
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
	m = catalog_model(&cat, model_name);
	if (!m) {
		cli_errorf("unknown model '%s' (see `servesim list models`)", model_name);
		status = SS_EXIT_USAGE;
		goto out;
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
	if (isatty(STDERR_FILENO)) {
		sc.progress = progress;
		sc.progress_ctx = NULL;
	}
	/* A store this run creates and then fails to put a single point in
	 * (the backend does not load, there is no device) is removed again:
	 * nothing half-made is left.  One with points stays: the run resumes. */
	created = access(store_path, F_OK) != 0;
	stats.measured = 0;
	if (cal_store_open(&st, store_path, CAL_OPEN_CREATE, &err) ||
	    sweep_run(st, &sc, &stats, &err))
		goto fail;
	if (catalog_out && write_catalogs(catalog_out, m, &sc.shape, width_div, layers, &err))
		goto fail;
	printf("calibrate run: %lld points measured, %lld already in %s\n"
	       "  device %s: %s\n  energy: %s\n",
	       (long long)stats.measured, (long long)stats.skipped, store_path, sc.device,
	       stats.device_desc, stats.meter);
	status = SS_EXIT_OK;
	goto out;
fail:
	cli_error(&err);
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
