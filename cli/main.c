/* servesim — entry point: a table of subcommands (git's commands[]). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "backend.h"
#include "cli.h"
#include "config.h"
#include "options.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const struct command commands[] = {
	{ "run", cmd_run, "simulate a scenario and report latency, throughput, SLO and energy figures" },
	{ "live", cmd_live, "run a scenario live on a kernel backend (same engine and policies)" },
	{ "plan", cmd_plan, "capacity planning: the highest rate each deployment serves within SLOs, cost, frontier" },
	{ "compare", cmd_compare, "compare two runs of the same trace (e.g. simulated vs live)" },
	{ "calibrate", cmd_calibrate, "calibration stores: run (own kernels), import, list, export, check" },
	{ "list", cmd_list, "list catalog entries: models, gpus, policies, cost-models, formats" },
	{ "help", cmd_help, "show help for servesim or a subcommand" },
	{ "version", cmd_version, "print the version" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: servesim [--help] [--version] <command> [<args>]\n\n"
		   "servesim simulates LLM inference serving: arrivals, continuous batching,\n"
		   "paged KV cache, preemption and routing, with calibrated cost models.\n\n"
		   "commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nWith no command, `servesim` is `servesim run` on the default scenario.\n"
		   "See `servesim help run` for the run options and docs/ for the manual.\n");
}

void cli_error(const struct ss_error *err)
{
	char buf[1024];

	ss_error_format(err, buf, sizeof(buf));
	fprintf(stderr, "servesim: %s\n", buf);
}

void cli_errorf(const char *fmt, ...)
{
	va_list ap;

	fputs("servesim: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *cli_data_dir(void)
{
	const char *env = getenv("SERVESIM_DATA");
	struct stat st;

	if (env && *env)
		return env;
	if (stat(SERVESIM_SRC_DATADIR "/models.json", &st) == 0)
		return SERVESIM_SRC_DATADIR;
	return SERVESIM_DATADIR;
}

const char *cli_module_dir(void)
{
	static char dir[4096];
	ssize_t n;
	char *slash;

	if (dir[0])
		return dir;
	n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	if (n <= 0) {
		dir[0] = '\0';
		return NULL;
	}
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (!slash) {
		dir[0] = '\0';
		return NULL;
	}
	if (slash == dir)
		slash[1] = '\0';   /* "/servesim": the root */
	else
		*slash = '\0';
	return dir;
}

int cli_load_catalog(struct catalog *cat, const char *models_file, const char *gpus_file,
		     struct ss_error *err)
{
	int rc = catalog_load_dir(cat, cli_data_dir(), err);

	if (!rc && models_file)
		rc = catalog_load_models(cat, models_file, err);
	if (!rc && gpus_file)
		rc = catalog_load_gpus(cat, gpus_file, err);
	return rc;
}

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("servesim %s\n", SERVESIM_VERSION);
	return SS_EXIT_OK;
}

/* `servesim help --man CMD` (not listed): CMD's --help as
 * docs/servesim.1.md shows it, without build-dependent lines
 * (scripts/update-man-help.sh writes it there). */
static int man_help(const char *name)
{
	static const struct cli_command *const with_options[] = {
		&cli_cmd_run, &cli_cmd_live, &cli_cmd_plan,
	};

	for (size_t i = 0; i < sizeof(with_options) / sizeof(with_options[0]); i++)
		if (name && !strcmp(name, with_options[i]->name)) {
			cli_help(stdout, with_options[i], true);
			return SS_EXIT_OK;
		}
	cli_errorf("help --man: expected run, live or plan, got '%s'", name ? name : "");
	return SS_EXIT_USAGE;
}

static int cmd_help(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--man"))
		return man_help(argc > 2 ? argv[2] : NULL);
	if (argc > 1) {
		char *sub[] = { argv[1], "--help", NULL };

		for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
			if (strcmp(commands[i].name, argv[1]) == 0 && commands[i].fn != cmd_help)
				return commands[i].fn(2, sub);
		cli_errorf("no such command '%s' (see `servesim --help`)", argv[1]);
		return SS_EXIT_USAGE;
	}
	usage(stdout);
	return SS_EXIT_OK;
}

int main(int argc, char **argv)
{
	/* Library code checks GSL's return codes; never let GSL abort. */
	gsl_set_error_handler_off();
	kernel_blas_single_thread();

	if (argc < 2 || argv[1][0] == '-') {
		if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
			usage(stdout);
			return SS_EXIT_OK;
		}
		if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")))
			return cmd_version(0, NULL);
		/* `servesim [run options]` runs; argv[0] stands in for "run". */
		return cmd_run(argc, argv);
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, argv[1]) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	cli_errorf("unknown command '%s' (see `servesim --help`)", argv[1]);
	return SS_EXIT_USAGE;
}
