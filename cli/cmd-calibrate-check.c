/* servesim calibrate check — hold-out error of the measured cost models
 * (calibrate/check.h, docs/cost-models.md).
 *
 *   servesim calibrate check [--store FILE] [--device NAME] [--folds K]
 *                            [--json[=FILE]] [--cross-source] [-q | -v]
 *
 * Prints one line per (GPU, operator): points scored, held-out points
 * outside the remaining grid, MAPE and p90 absolute percentage error of the
 * interpolated tables, and the same for the regression fits.  With
 * --cross-source it runs the cross-source check instead.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "fidelity.h"
#include "cli.h"
#include "params.h"
#include "store.h"

#define DEFAULT_STORE "calibration.db"

enum { O_STORE = 256, O_DEVICE, O_FOLDS, O_JSON, O_CROSS, O_HELP };

static const struct {
	const char *name;
	int id;
	const char *arg;
	const char *help;
} opts[] = {
	{ "store", O_STORE, "FILE", "store to check (default: the shipped data/" DEFAULT_STORE ")" },
	{ "device", O_DEVICE, "NAME", "only this GPU (catalog name, e.g. h100-sxm)" },
	{ "folds", O_FOLDS, "K", "hold-out folds, 2..100 (default 5)" },
	{ "json", O_JSON, "[=FILE]", "print {gpu: {operator: {mape_pct, p90_ape_pct, n, ...}}} on stdout instead of the table; =FILE: also write it to FILE" },
	{ "cross-source", O_CROSS, NULL, "predict Vidur's measurements from the other sources instead (Llama-2-7B and -70B at TP 1, 2, 4)" },
	{ "help", O_HELP, NULL, "show this help" },
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

static void help(FILE *f)
{
	fprintf(f, "usage: servesim calibrate check [options]\n\n"
		   "k-fold hold-out error of the table (interpolated) and fit (regression) cost\n"
		   "models, per GPU and operator: each measurement series is split into K folds;\n"
		   "each fold is predicted from the others.  MAPE and p90 are absolute percentage\n"
		   "errors; 'outside' counts held-out points beyond the remaining grid (not scored).\n\n"
		   "options:\n");
	for (size_t i = 0; i < N_OPTS; i++) {
		char left[64];

		snprintf(left, sizeof(left), "--%s%s%s", opts[i].name,
			 opts[i].arg && opts[i].arg[0] != '[' ? " " : "",
			 opts[i].arg ? opts[i].arg : "");
		fprintf(f, "  %-20s %s\n", left, opts[i].help);
	}
	fprintf(f, "  %-20s %s\n  %-20s %s\n", "-q, --quiet", "print nothing on success (JSON only where asked)",
		"-v, --verbose", "say on stderr which store was read");
	fprintf(f, "\nexit status: 0 success, 1 bad input or failed write, 2 bad command line\n"
		   "See docs/cost-models.md.\n");
}

static void print_num(double v)
{
	if (isfinite(v))
		printf(" %9.2f", v);
	else
		printf(" %9s", "-");
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
	struct option longopts[N_OPTS + 1];
	struct cal_check_opts o = { .folds = 5 };
	struct cal_check_report rep;
	struct cal_store *st = NULL;
	struct ss_error err = { 0 };
	const char *store = NULL, *json = NULL;
	char def[4096];
	bool cross = false, json_stdout = false, quiet = false;
	int c, rc;

	memset(longopts, 0, sizeof(longopts));
	for (size_t i = 0; i < N_OPTS; i++)
		longopts[i] = (struct option){ opts[i].name,
					       !opts[i].arg ? no_argument : opts[i].arg[0] == '[' ?
					       optional_argument : required_argument, NULL,
					       opts[i].id };
	opterr = 0;
	optind = 1;
	argc = cli_take_quiet_verbose(argc, argv, &quiet);
	if (argc < 0)
		return SS_EXIT_USAGE;
	while ((c = cli_getopt_long(argc, argv, ":", longopts)) != -1) {
		int64_t v;

		switch (c) {
		case O_STORE: store = optarg; break;
		case O_DEVICE: o.device = optarg; break;
		case O_JSON:
			/* --json: stdout, as every command's; --json=FILE: a file */
			json = optarg;
			json_stdout = !optarg;
			break;
		case O_CROSS: cross = true; break;
		case O_FOLDS:
			if (!ss_parse_int64(optarg, &v) || v < 2 || v > 100) {
				cli_errorf("--folds: expected an integer 2..100, got '%s'", optarg);
				return SS_EXIT_USAGE;
			}
			o.folds = (int)v;
			break;
		case O_HELP:
			help(stdout);
			return SS_EXIT_OK;
		case CLI_OPT_REFUSED:
			return SS_EXIT_USAGE;
		case ':':
			cli_errorf("%s: expected a value (see `servesim calibrate check --help`)",
				   argv[optind - 1]);
			return SS_EXIT_USAGE;
		default:
			cli_errorf("calibrate check: unknown option '%s' (see `servesim calibrate check --help`)",
				   argv[optind - 1]);
			return SS_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_errorf("calibrate check: unexpected argument '%s'", argv[optind]);
		return SS_EXIT_USAGE;
	}
	if (!store) {
		snprintf(def, sizeof(def), "%s/%s", cli_data_dir(), DEFAULT_STORE);
		store = def;
	}
	cal_check_report_init(&rep);
	rc = cal_store_open(&st, store, CAL_OPEN_READONLY, &err);
	if (!rc && cross) {
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
		if (!quiet)
			print_report(&rep, cross);
		if (json)
			rc = cal_check_write_json(&rep, json, &err);
	}
	cal_store_close(st);
	cal_check_report_release(&rep);
	if (rc) {
		cli_error(&err);
		return SS_EXIT_FAILURE;
	}
	return SS_EXIT_OK;
}
