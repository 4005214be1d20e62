/* servesim calibrate check — hold-out error of the measured cost models
 * (calibrate/check.h, docs/cost-models.md).
 *
 *   servesim calibrate check [--store FILE] [--device NAME] [--folds K]
 *                            [--json[=FILE]] [--cross-source | --gemm-classes | --cross-gpu FROM:TO]
 *                            [-q | -v]
 *
 * Prints one line per (GPU, operator): points scored, held-out points
 * outside the remaining grid, MAPE and p90 absolute percentage error of the
 * interpolated tables, and the same for the regression fits.  With
 * --cross-source it runs the cross-source check instead; with
 * --gemm-classes, leave one GEMM shape class out (medians and p90s); with
 * --cross-gpu FROM:TO, GPU TO's GEMMs predicted from GPU FROM's grids
 * scaled by the roofline (fidelity.h, cal_check_cross_gpu).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "fidelity.h"
#include "cli.h"
#include "options.h"
#include "costmodel.h"
#include "params.h"
#include "store.h"

#define DEFAULT_STORE "calibration.db"

static void epilogue(FILE *f)
{
	fprintf(f, "See docs/cost-models.md.\n\n");
}

/* Its options are in cli/options.c. */
const struct cli_command cli_cmd_cal_check = {
	.name = "calibrate check", .id = CLI_CAL_CHECK,
	.failure = "failed write",
	.epilogue = epilogue,
	.description =
		"k-fold hold-out error of the table (interpolated) and fit (regression) cost\n"
		"models, per GPU and operator: each measurement series is split into K folds;\n"
		"each fold is predicted from the others.  MAPE and p90 are absolute percentage\n"
		"errors; 'outside' counts held-out points beyond the remaining grid (not scored).\n",
};

static void print_num(double v)
{
	if (isfinite(v))
		printf(" %9.2f", v);
	else
		printf(" %9s", "-");
}

/* --gemm-classes: medians and p90s, table and fit. */
static void print_classes(const struct cal_check_report *rep)
{
	printf("%-14s %-36s %7s %7s %9s %9s %9s %9s\n", "gpu", "held-out class", "n", "outside",
	       "median %", "p90 %", "fit med", "fit p90");
	for (size_t i = 0; i < rep->n; i++) {
		const struct cal_check_row *r = &rep->rows[i];

		printf("%-14s %-36s %7zu %7zu", r->device, r->op, r->n, r->n_outside);
		print_num(r->median_ape_pct);
		print_num(r->p90_ape_pct);
		print_num(r->fit_median_ape_pct);
		print_num(r->fit_p90_ape_pct);
		printf("\n");
	}
}

/* --cross-gpu: the scaled table on the points in FROM's grid, the
 * roofline alone on the same points, FROM's fit scaled and the roofline
 * on every point. */
static void print_cross_gpu(const struct cal_check_report *rep)
{
	printf("%-8s %-28s %-10s %6s %7s %8s %8s %9s %8s %8s %8s %8s %8s %8s\n", "gpu",
	       "class", "from", "n", "outside", "median %", "p90 %", "pred/meas", "rl med",
	       "rl p90", "fit med", "fit p90", "rl-all m", "rl-all 90");
	for (size_t i = 0; i < rep->n; i++) {
		const struct cal_check_row *r = &rep->rows[i];

		printf("%-8s %-28s %-10s %6zu %7zu", r->device, r->op,
		       r->from_dtype[0] ? r->from_dtype : "-", r->n, r->n_outside);
		{
			const double v[] = {
				r->median_ape_pct, r->p90_ape_pct, r->median_ratio,
				r->rl_median_ape_pct, r->rl_p90_ape_pct, r->fit_median_ape_pct,
				r->fit_p90_ape_pct, r->rl_all_median_ape_pct, r->rl_all_p90_ape_pct,
			};

			for (size_t j = 0; j < sizeof(v) / sizeof(v[0]); j++) {
				if (isfinite(v[j]))
					printf(j == 2 ? " %9.3f" : " %8.1f", v[j]);
				else
					printf(j == 2 ? " %9s" : " %8s", "-");
			}
		}
		printf("\n");
	}
}

/* The roofline's GEMMs of both GPUs of --cross-gpu, by weight dtype. */
struct xg_roofline {
	const struct gpu_spec *gpu[2];           /* FROM, TO */
	struct cost_gemm_roofline rl[2][2];      /* [gpu][0: 16-bit, 1: 8-bit weights] */
};

/* The roofline's weight dtype of a store dtype: 16-bit as bf16; fp8,
 * fp8_block and int8 as fp8 (one byte a weight, at fp8_flops: gfx942 and
 * Hopper reach the same peak in int8 OPS as in fp8 FLOPS, and the
 * catalog has no int8 figure).  -ENOTSUP for the rest. */
static int roofline_dtype(const char *dtype, int *w)
{
	static const char *const b16[] = { "bf16", "fp16" };
	static const char *const b8[] = { "fp8", "fp8_block", "int8" };

	for (size_t i = 0; i < 2; i++)
		if (!strcmp(dtype, b16[i])) {
			*w = 0;
			return 0;
		}
	for (size_t i = 0; i < 3; i++)
		if (!strcmp(dtype, b8[i])) {
			*w = 1;
			return 0;
		}
	return -ENOTSUP;
}

static int xg_roofline_ms(void *ctx, const char *gpu, const char *dtype, double m, double n,
			  double k, double *ms, struct ss_error *err)
{
	const struct xg_roofline *x = ctx;
	int gi = strcmp(gpu, x->gpu[0]->name) ? 1 : 0, w;

	(void)err;
	if (roofline_dtype(dtype, &w))
		return -ENOTSUP;
	*ms = cost_gemm_roofline_s(&x->rl[gi][w], m, n, k) * 1e3;
	return 0;
}

/* --cross-gpu FROM:TO: both GPUs of the catalog, different, into x;
 * -EINVAL (exit 2) otherwise. */
static int xg_setup(const char *spec, struct catalog *cat, struct xg_roofline *x,
		    struct ss_error *err)
{
	const char *colon = strchr(spec, ':');
	char name[2][64], hint[256];
	int rc;

	if (!colon || colon == spec || !colon[1] || strchr(colon + 1, ':') ||
	    (size_t)(colon - spec) >= sizeof(name[0]) || strlen(colon + 1) >= sizeof(name[1]))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cross-gpu: expected FROM:TO, two GPUs of the catalog, got '%s'",
				    spec);
	snprintf(name[0], sizeof(name[0]), "%.*s", (int)(colon - spec), spec);
	snprintf(name[1], sizeof(name[1]), "%s", colon + 1);
	rc = cli_load_catalog(cat, NULL, NULL, NULL, err);
	for (int i = 0; i < 2 && !rc; i++) {
		x->gpu[i] = catalog_gpu_find(cat, name[i], hint, sizeof(hint));
		if (!x->gpu[i])
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--cross-gpu %s: no GPU named '%s' in the catalog%s%s", spec,
					    name[i], hint[0] ? "; " : " (see `servesim list gpus`)",
					    hint);
	}
	if (!rc && x->gpu[0] == x->gpu[1])
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--cross-gpu %s: expected two different GPUs", spec);
	for (int i = 0; i < 2 && !rc; i++)
		for (int w = 0; w < 2 && !rc; w++)
			rc = cost_gemm_roofline_init(&x->rl[i][w], x->gpu[i],
						     w ? SS_DTYPE_FP8 : SS_DTYPE_BF16, 2.0, NULL,
						     err);
	return rc;
}

static void print_report(const struct cal_check_report *rep, bool cross)
{
	if (cross)
		printf("%-14s %-40s %7s %9s %9s %9s\n", "gpu", "operator", "n", "MAPE %", "p90 %",
		       "pred/meas");
	else
		printf("%-14s %-28s %7s %7s %9s %9s %9s %9s\n", "gpu", "operator", "n", "outside",
		       "MAPE %", "p90 %", "fit MAPE", "fit p90");
	for (size_t i = 0; i < rep->n; i++) {
		const struct cal_check_row *r = &rep->rows[i];

		if (cross) {
			printf("%-14s %-40s %7zu", r->device, r->op, r->n);
			print_num(r->mape_pct);
			print_num(r->p90_ape_pct);
			print_num(r->median_ratio);
		} else {
			printf("%-14s %-28s %7zu %7zu", r->device, r->op, r->n, r->n_outside);
			print_num(r->mape_pct);
			print_num(r->p90_ape_pct);
			print_num(r->fit_mape_pct);
			print_num(r->fit_p90_ape_pct);
		}
		printf("\n");
	}
}

/* Llama-2-7B and -70B shapes from the catalog. */
static int cross_models(struct cal_check_model *out, size_t *n, struct ss_error *err)
{
	static const char *const names[] = { "llama-2-7b", "llama-2-70b" };
	struct catalog cat;
	int rc;

	*n = 0;
	catalog_init(&cat);
	rc = cli_load_catalog(&cat, NULL, NULL, NULL, err);
	for (size_t i = 0; i < 2 && !rc; i++) {
		const struct model_spec *m = catalog_model(&cat, names[i]);

		if (!m) {
			rc = ss_error_set(err, -ENOENT, NULL, 0, "model '%s' is not in the catalog",
					  names[i]);
			break;
		}
		out[*n] = (struct cal_check_model){
			.hidden = m->hidden, .heads = m->n_heads, .kv_heads = m->n_kv_heads,
			.head_dim = m->head_dim, .ff = m->intermediate, .gated = m->mlp == MLP_GATED,
		};
		snprintf(out[*n].name, sizeof(out[*n].name), "%s", m->name);
		(*n)++;
	}
	catalog_release(&cat);
	return rc;
}

int cal_cli_check(int argc, char **argv)
{
	struct cli_config *cfg = malloc(sizeof(*cfg));
	struct cal_check_opts o = { .folds = 5 };
	struct cal_check_report rep;
	struct cal_store *st = NULL;
	struct ss_error err = { 0 };
	const char *store, *json, *cross_gpu;
	struct catalog cat;
	struct xg_roofline xg;
	char def[4096], xg_spec[256];
	bool cross, classes, json_stdout, quiet;
	int rc;

	if (!cfg) {
		cli_errorf("out of memory");
		return SS_EXIT_FAILURE;
	}
	rc = cli_parse(&cli_cmd_cal_check, argc, argv, cfg, true, &err);
	if (rc) {
		free(cfg);
		if (rc == CLI_HELP_SHOWN)
			return SS_EXIT_OK;
		cli_error(&err);
		return SS_EXIT_USAGE;
	}
	store = cfg->store;
	o.device = cfg->device;
	o.folds = (int)cfg->folds;
	/* --json: stdout, as every command's; --json=FILE: a file */
	json_stdout = cfg->json_to && !strcmp(cfg->json_to, "-");
	json = json_stdout ? NULL : cfg->json_to;
	cross = cfg->cross_source;
	classes = cfg->gemm_classes;
	cross_gpu = NULL;
	if (cfg->cross_gpu) {
		snprintf(xg_spec, sizeof(xg_spec), "%s", cfg->cross_gpu);
		cross_gpu = xg_spec;
	}
	quiet = cfg->quiet;
	free(cfg);
	if ((cross ? 1 : 0) + (classes ? 1 : 0) + (cross_gpu ? 1 : 0) > 1) {
		cli_errorf("--cross-source, --gemm-classes and --cross-gpu: expected one of them");
		return SS_EXIT_USAGE;
	}
	catalog_init(&cat);
	if (cross_gpu) {
		rc = xg_setup(cross_gpu, &cat, &xg, &err);
		if (rc) {
			catalog_release(&cat);
			cli_error(&err);
			return err.code == -EINVAL && !err.file[0] ? SS_EXIT_USAGE : SS_EXIT_FAILURE;
		}
	}
	if (!store) {
		snprintf(def, sizeof(def), "%s/%s", cli_data_dir(), DEFAULT_STORE);
		store = def;
	}
	cal_check_report_init(&rep);
	rc = cal_store_open(&st, store, CAL_OPEN_READONLY, &err);
	if (!rc && cross_gpu) {
		struct cal_cross_gpu x = {
			.from = xg.gpu[0]->name, .to = xg.gpu[1]->name,
			.roofline = xg_roofline_ms, .ctx = &xg,
		};

		rc = cal_check_cross_gpu(st, &x, &rep, &err);
		/* a pair the store cannot answer is a bad command line */
		if (rc == -ENOENT)
			err.code = -EINVAL;
	} else if (!rc && classes) {
		rc = cal_check_gemm_classes(st, &o, &rep, &err);
	} else if (!rc && cross) {
		static const int tps[] = { 1, 2, 4 };
		struct cal_check_model models[2];
		size_t n_models;

		rc = cross_models(models, &n_models, &err);
		if (!rc)
			rc = cal_check_cross_source(st, &o, models, n_models, tps, 3, &rep, &err);
	} else if (!rc) {
		rc = cal_check_kfold(st, &o, &rep, &err);
	}
	if (!rc && rep.n == 0)
		rc = ss_error_set(&err, -ENOENT, store, 0, "no measurements%s%s to check",
				  o.device ? " for " : "", o.device ? o.device : "");
	cli_verbosef("store %s: %zu rows checked, %d folds%s", store, rep.n, o.folds,
		     cross ? ", across sources" : "");
	if (!rc && json_stdout) {
		json_t *j = cal_check_report_json(&rep);

		if (!j || json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS |
				     JSON_REAL_PRECISION(6)) || puts("") == EOF)
			rc = ss_error_set(&err, -EIO, NULL, 0,
					  "calibrate check: cannot write the JSON to standard output");
		json_decref(j);
	} else if (!rc) {
		if (!quiet && cross_gpu)
			print_cross_gpu(&rep);
		else if (!quiet && classes)
			print_classes(&rep);
		else if (!quiet)
			print_report(&rep, cross);
		if (json)
			rc = cal_check_write_json(&rep, json, &err);
	}
	cal_store_close(st);
	cal_check_report_release(&rep);
	catalog_release(&cat);
	if (rc) {
		cli_error(&err);
		return err.code == -EINVAL && cross_gpu && !err.file[0] ? SS_EXIT_USAGE
								     : SS_EXIT_FAILURE;
	}
	return SS_EXIT_OK;
}
