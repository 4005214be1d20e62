/* servesim calibrate — the calibration store's subcommands, from a table. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
	bool own_quiet;   /* -q and -v are its options */
} subcommands[] = {
	{ "run", cal_cli_run, "time servesim's own kernels (cpu, cuda) into a store", true },
	{ "import", cal_cli_import, "import third-party profile tables into a store", true },
	{ "list", cal_cli_list, "count a store's measurements by device, operator and source", false },
	{ "export", cal_cli_export, "write a store's measurements as CSV", false },
	{ "check", cal_cli_check, "k-fold hold-out error of the table and fit models, per operator", true },
	{ "fit-engine", cal_cli_fit_engine, "fit an engine profile to measured serving runs (docs/engines.md)", false },
};

#define N_SUB (sizeof(subcommands) / sizeof(subcommands[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: servesim calibrate <subcommand> [options]\n\nsubcommands:\n");
	for (size_t i = 0; i < N_SUB; i++)
		fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\nSee `servesim calibrate <subcommand> --help` and docs/calibration.md.\n");
}

int cmd_calibrate(int argc, char **argv)
{
	if (argc < 2) {
		cli_errorf("calibrate: expected a subcommand: run, import, list, export, check or fit-engine (see `servesim calibrate --help`)");
		return SS_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return SS_EXIT_OK;
	}
	for (size_t i = 0; i < N_SUB; i++) {
		bool quiet = false;
		int n;

		if (strcmp(subcommands[i].name, argv[1]))
			continue;
		/* run, check and import take -q and -v as options (cli/options.c);
		 * for the others -q is nothing on stdout (errors still on stderr) */
		if (subcommands[i].own_quiet)
			return subcommands[i].fn(argc - 1, argv + 1);
		n = cli_take_quiet_verbose(argc - 1, argv + 1, &quiet);
		if (n < 0)
			return SS_EXIT_USAGE;
		if (quiet && !freopen("/dev/null", "w", stdout)) {
			cli_errorf("-q: cannot open /dev/null");
			return SS_EXIT_FAILURE;
		}
		return subcommands[i].fn(n, argv + 1);
	}
	cli_errorf("calibrate: unknown subcommand '%s' (see `servesim calibrate --help`)", argv[1]);
	return SS_EXIT_USAGE;
}
