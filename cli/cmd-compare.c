/* servesim compare — errors of one run against another of the same trace. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "compare.h"

static void help(FILE *f)
{
	fprintf(f, "usage: servesim compare [options] REFERENCE OTHER\n\n"
		   "Compare two runs of the same trace, given as their --out directories\n"
		   "(typically REFERENCE = a live run, OTHER = its simulation): per-request and\n"
		   "percentile errors of TTFT, TPOT and E2E, ITL percentiles and throughput,\n"
		   "all as OTHER relative to REFERENCE.\n\noptions:\n"
		   "  --json FILE    also write the comparison as JSON\n"
		   "  --plot DIR     write CDF overlays of TTFT and TPOT (PNG through gnuplot)\n"
		   "  --help         show this help\n");
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
	bool skipped = false;

	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j': json_path = optarg; break;
		case 'p': plot_dir = optarg; break;
		case 'h':
			help(stdout);
			return SS_EXIT_OK;
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
	if (run_data_load(&ref, argv[optind], &err) || run_data_load(&other, argv[optind + 1], &err) ||
	    compare_runs(&ref, &other, &c, &err))
		goto fail;
	if (json_path) {
		json_t *j = compare_json(&ref, &other, &c);
		char tmp[1100];

		snprintf(tmp, sizeof(tmp), "%s.tmp", json_path);
		if (!j || json_dump_file(j, tmp, JSON_INDENT(2) | JSON_SORT_KEYS |
						      JSON_REAL_PRECISION(10)) ||
		    rename(tmp, json_path)) {
			json_decref(j);
			remove(tmp);
			cli_errorf("%s: cannot write the comparison", json_path);
			goto out;
		}
		json_decref(j);
	}
	if (plot_dir && compare_plots(plot_dir, &ref, &other, &skipped, &err))
		goto fail;
	if (skipped)
		cli_errorf("warning: gnuplot not found; wrote the plot scripts (.gp) and data (.dat) to %s",
			   plot_dir);
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
