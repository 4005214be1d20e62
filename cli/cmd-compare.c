/* servesim compare — errors of one run against another of the same trace. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "compare.h"
#include "report.h"
#include "ss-file.h"

static void help(FILE *f)
{
	fprintf(f, "usage: servesim compare [options] REFERENCE OTHER\n\n"
		   "Compare two runs of the same trace, given as their --out directories\n"
		   "(typically REFERENCE = a live run, OTHER = its simulation): per-request and\n"
		   "percentile errors of TTFT, TPOT and E2E, ITL percentiles and throughput,\n"
		   "all as OTHER relative to REFERENCE.  Either may also be a measured serving\n"
		   "benchmark result file (docs/serving-results.md) to compare with the\n"
		   "simulation of its replay (run --trace RESULT).\n\noptions:\n"
		   "  --json FILE    also write the comparison as JSON\n"
		   "  --plot DIR     write CDF overlays of TTFT and TPOT (PNG through gnuplot)\n"
		   "  --help         show this help\n");
}

/* A run's --out directory, or a measured serving benchmark result file
 * (docs/serving-results.md) to compare a replay of it with. */
static int load(struct run_data *rd, const char *path, struct ss_error *err)
{
	struct stat sb;

	if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
		return run_data_load_result(rd, path, err);
	return run_data_load(rd, path, err);
}

int cmd_compare(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'j' },
		{ "plot", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *json_path = NULL, *plot_dir = NULL;
	struct run_data ref, other;
	struct cmp_result c;
	struct ss_error err = { 0 };
	int opt, status = SS_EXIT_FAILURE;
	struct plot_outcome plots = { 0 };
	char warn[700];

	opterr = 0;
	optind = 1;
	while ((opt = cli_getopt_long(argc, argv, ":", longopts)) != -1) {
		switch (opt) {
		case 'j': json_path = optarg; break;
		case 'p': plot_dir = optarg; break;
		case 'h':
			help(stdout);
			return SS_EXIT_OK;
		case CLI_OPT_REFUSED:
			return SS_EXIT_USAGE;
		case ':':
			cli_errorf("%s: expected a value (see `servesim compare --help`)", argv[optind - 1]);
			return SS_EXIT_USAGE;
		default:
			cli_errorf("unknown option '%s' (see `servesim compare --help`)", argv[optind - 1]);
			return SS_EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		cli_errorf("compare: expected two result directories, REFERENCE and OTHER");
		return SS_EXIT_USAGE;
	}
	run_data_init(&ref);
	run_data_init(&other);
	if (load(&ref, argv[optind], &err) || load(&other, argv[optind + 1], &err) ||
	    compare_runs(&ref, &other, &c, &err))
		goto fail;
	if (json_path) {
		/* through a fresh temporary file beside it, then renamed */
		json_t *j = compare_json(&ref, &other, &c);
		struct ss_file sf;

		if (!j) {
			ss_error_set(&err, -ENOMEM, json_path, 0, "out of memory");
			goto fail;
		}
		if (ss_file_open(&sf, json_path, 0, &err)) {
			json_decref(j);
			goto fail;
		}
		if (json_dumpf(j, sf.f, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(10)))
			ss_error_set(&err, -EIO, json_path, 0, "cannot write the comparison");
		json_decref(j);
		if (err.code) {
			ss_file_abort(&sf);
			goto fail;
		}
		if (ss_file_commit(&sf, &err))
			goto fail;
	}
	if (plot_dir && compare_plots(plot_dir, &ref, &other, &plots, &err))
		goto fail;
	if (plot_dir && plot_outcome_warning(&plots, plot_dir, warn, sizeof(warn)))
		cli_errorf("%s", warn);
	compare_print(stdout, &ref, &other, &c);
	status = SS_EXIT_OK;
	goto out;
fail:
	cli_error(&err);
out:
	run_data_release(&ref);
	run_data_release(&other);
	return status;
}
