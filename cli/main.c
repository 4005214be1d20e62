/* servesim — entry point: a table of subcommands (git's commands[]). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "bigmem.h"
#include "cli.h"
#include "config.h"
#include "options.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static int cmd_help(int argc, char **argv);
int cli_load_model_config(struct cli_config *o, struct catalog *cat, struct ss_error *err)
{
	struct model_spec m;
	int rc;

	if (!o->model_config)
		return 0;
	/* no --model (fit-engine's default: NULL): the file names the model */
	bool named = o->model && o->model != cli_default_model;

	rc = model_from_hf_config(&m, o->model_config, named ? o->model : NULL, err);
	if (!rc)
		rc = catalog_add_model(cat, &m, err);
	if (!rc && !named) {
		snprintf(o->model_config_name, sizeof(o->model_config_name), "%s", m.name);
		o->model = o->model_config_name;
	}
	return rc;
}

static int cmd_version(int argc, char **argv);

static const struct command commands[] = {
	{ "run", cmd_run, "simulate a scenario and report latency, throughput, SLO and energy figures" },
	{ "live", cmd_live, "run a scenario live on a kernel backend (same engine and policies)" },
	{ "plan", cmd_plan, "capacity planning: the highest rate each deployment serves within SLOs, cost, frontier" },
	{ "sweep", cmd_sweep, "a grid over run options, each point over seeds: means and 95% confidence intervals" },
	{ "loop", cmd_loop, "calibrate, run live, simulate and compare in one command, with a noise check" },
	{ "workload", cmd_workload, "workload models: fit a trace into a model for run --workload" },
	{ "compare", cmd_compare, "compare two runs of the same trace (e.g. simulated vs live)" },
	{ "calibrate", cmd_calibrate, "calibration stores: run (own kernels), import, list, export, check" },
	{ "list", cmd_list, "list catalog entries: models, gpus, engines, stacks, policies, cost-models, formats, backends" },
	{ "help", cmd_help, "show help for servesim or a subcommand" },
	{ "version", cmd_version, "print the version" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: servesim [--help] [--version] [--data-dir DIR] <command> [<args>]\n\n"
		   "servesim simulates LLM inference serving: arrivals, continuous batching,\n"
		   "paged KV cache, preemption and routing, with calibrated cost models.\n\n"
		   "commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nWith no command, `servesim` is `servesim run` on the default scenario.\n"
		   "See `servesim help run` for the run options and docs/ for the manual.\n"
		   "\n--data-dir DIR: read the catalogs, calibration store and sample trace from DIR\n"
		   "(default $SERVESIM_DATA, else the data of this build or installation).\n"
		   "Every command takes -q (quiet), -v (verbose, on stderr) and --json where it\n"
		   "has a result; exit status: 0 success, 1 bad input or failed run, 2 bad command line.\n");
}

void cli_fputs_safe(const char *s, FILE *f)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

void cli_vmessage(const char *fmt, va_list ap)
{
	char buf[2048], *big = NULL;
	va_list aq;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(buf, sizeof(buf), fmt, aq);
	va_end(aq);
	if (n >= (int)sizeof(buf) && (big = malloc((size_t)n + 1)))
		vsnprintf(big, (size_t)n + 1, fmt, ap);
	fputs("servesim: ", stderr);
	cli_fputs_safe(big ? big : buf, stderr);
	fputc('\n', stderr);
	free(big);
}

void cli_error(const struct ss_error *err)
{
	char buf[1024];

	ss_error_format(err, buf, sizeof(buf));
	fputs("servesim: ", stderr);
	cli_fputs_safe(buf, stderr);
	fputc('\n', stderr);
}

void cli_errorf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_vmessage(fmt, ap);
	va_end(ap);
}

/* Read one number of bytes from a cgroup file ("max" = none); 0 when
 * there is no such file or no limit. */
static uint64_t cgroup_bytes(const char *path)
{
	char buf[64] = "";
	FILE *f = fopen(path, "r");
	uint64_t v = 0;

	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && buf[0] >= '0' && buf[0] <= '9')
		v = strtoull(buf, NULL, 10);
	fclose(f);
	return v;
}

/* The smaller of two limits, 0 meaning none. */
static uint64_t min_limit(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

uint64_t cli_memory_limit(void)
{
	const char *env = getenv("SERVESIM_MEMORY_LIMIT");
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t lim = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
	struct rlimit rl;
	char line[512], path[600];
	FILE *f;

	if (env && *env) {
		char *end;
		double v = strtod(env, &end);

		if (*end == 'K' || *end == 'k')
			v *= 1024.0, end++;
		else if (*end == 'M' || *end == 'm')
			v *= 1048576.0, end++;
		else if (*end == 'G' || *end == 'g')
			v *= 1073741824.0, end++;
		if (*end == '\0' && v >= 1 && v < 1.8e19)
			return (uint64_t)v;
		cli_errorf("SERVESIM_MEMORY_LIMIT: expected bytes with an optional K, M or G suffix, got '%s'; ignored",
			   env);
	}
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		lim = min_limit(lim, (uint64_t)rl.rlim_cur);
	/* This process's groups, from /proc/self/cgroup: "0::/path" (v2) and
	 * "N:memory:/path" (v1, the controller possibly among others). */
	f = fopen("/proc/self/cgroup", "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *grp = ctl ? strchr(ctl + 1, ':') : NULL;

		if (!grp)
			continue;
		*grp++ = '\0';
		ctl++;
		grp[strcspn(grp, "\n")] = '\0';
		if (!strcmp(grp, "/"))
			grp[0] = '\0';
		if (strcmp(line, "0") == 0 && ctl[0] == '\0')
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", grp);
		else if (!strcmp(ctl, "memory") || strstr(ctl, ",memory") || !strncmp(ctl, "memory,", 7))
			snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", grp);
		else
			continue;
		lim = min_limit(lim, cgroup_bytes(path));
	}
	if (f)
		fclose(f);
	lim = min_limit(lim, cgroup_bytes("/sys/fs/cgroup/memory.max"));
	/* cgroup v1 reports "no limit" as a huge number: min_limit keeps the
	 * physical memory then */
	lim = min_limit(lim, cgroup_bytes("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
	return lim;
}

/* --data-dir DIR (a global option, before the command; NULL: not given)
 * and the rule cli_data_dir() followed, for -v. */
static const char *data_dir_opt;
static const char *data_dir_why;

int cli_verbose;

void cli_verbosef(const char *fmt, ...)
{
	va_list ap;

	if (!cli_verbose)
		return;
	va_start(ap, fmt);
	cli_vmessage(fmt, ap);
	va_end(ap);
}

int cli_take_quiet_verbose(int argc, char **argv, bool *quiet)
{
	int n = 1;
	bool q = false, v = false, end = false;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		end |= !strcmp(a, "--");
		if (!end && (!strcmp(a, "-q") || !strcmp(a, "--quiet")))
			q = true;
		else if (!end && (!strcmp(a, "-v") || !strcmp(a, "--verbose")))
			v = true;
		else
			argv[n++] = argv[i];
	}
	argv[n] = NULL;
	if (q && v) {
		cli_errorf("-q and -v: expected one of them (--quiet prints nothing, --verbose more)");
		return -1;
	}
	cli_verbose = v;
	*quiet = q;
	return n;
}

/* Whether this process's executable sits in the build directory it was
 * built in (an uninstalled build), by /proc/self/exe and realpath, so that
 * a symlinked build directory counts and a copy elsewhere does not. */
static bool running_from_build_dir(void)
{
	char exe[4096], *root, *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	bool same;

	if (n <= 0)
		return false;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return false;
	*slash = '\0';
	root = realpath(SERVESIM_BUILD_ROOT, NULL);
	same = root && !strcmp(root, exe[0] ? exe : "/");
	free(root);
	return same;
}

/* In this order: --data-dir, $SERVESIM_DATA, the source tree's data/ for
 * a binary running from its build directory, the installed datadir.  Never
 * a directory relative to the working directory, and never the source tree
 * for an installed binary (whose tree may still exist, older or newer). */
const char *cli_data_dir(void)
{
	static const char *dir;
	const char *env = getenv("SERVESIM_DATA");

	if (dir)
		return dir;
	if (data_dir_opt)
		dir = data_dir_opt, data_dir_why = "--data-dir";
	else if (env && *env)
		dir = env, data_dir_why = "$SERVESIM_DATA";
	else if (running_from_build_dir())
		dir = SERVESIM_SRC_DATADIR, data_dir_why = "the source tree of this uninstalled build";
	else
		dir = SERVESIM_DATADIR, data_dir_why = "installed";
	cli_verbosef("data directory %s (%s)", dir, data_dir_why);
	return dir;
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
	/* A relocatable tree such as the GPU bundle (scripts/gpu-bundle.sh):
	 * bin/servesim with its modules in lib/servesim beside bin/.  The
	 * build tree has no such directory, so there the modules stay the
	 * ones next to the binary. */
	{
		char rel[sizeof(dir)];
		struct stat st;
		int w = snprintf(rel, sizeof(rel), "%s/../lib/servesim", dir);

		if (w > 0 && (size_t)w < sizeof(rel) && stat(rel, &st) == 0 && S_ISDIR(st.st_mode))
			memcpy(dir, rel, (size_t)w + 1);
	}
	return dir;
}

int cli_load_catalog(struct catalog *cat, const char *models_file, const char *gpus_file,
		     const char *engines_file, struct ss_error *err)
{
	int rc = catalog_load_dir(cat, cli_data_dir(), err);

	if (!rc && models_file)
		rc = catalog_load_models(cat, models_file, err);
	if (!rc && gpus_file)
		rc = catalog_load_gpus(cat, gpus_file, err);
	if (!rc && engines_file)
		rc = catalog_load_engines(cat, engines_file, err);
	if (!rc)
		cli_verbosef("catalogs: %zu models, %zu GPUs, %zu engine profiles (%s/*.json%s%s%s%s%s%s)",
			     cat->n_models, cat->n_gpus, cat->n_engines, cli_data_dir(),
			     models_file ? ", " : "", models_file ? models_file : "",
			     gpus_file ? ", " : "", gpus_file ? gpus_file : "",
			     engines_file ? ", " : "", engines_file ? engines_file : "");
	return rc;
}

static int cmd_version(int argc, char **argv)
{
	bool quiet = false;

	if (argc > 1 && (argc = cli_take_quiet_verbose(argc, argv, &quiet)) < 0)
		return SS_EXIT_USAGE;
	if (argc > 1) {
		cli_errorf("version: unexpected argument '%s' (expected -q or -v)", argv[1]);
		return SS_EXIT_USAGE;
	}
	if (!quiet)
		printf("servesim %s\n", SERVESIM_VERSION);
	cli_data_dir();   /* -v: where the data is */
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

	if (name && !strcmp(name, "sweep")) {
		cli_sweep_help(stdout);
		return SS_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(with_options) / sizeof(with_options[0]); i++)
		if (name && !strcmp(name, with_options[i]->name)) {
			cli_help(stdout, with_options[i], true);
			return SS_EXIT_OK;
		}
	/* loop's own options and live's (cli/cmd-loop.c) */
	if (name && !strcmp(name, "loop")) {
		char *sub[] = { "loop", "--help", NULL };

		return cmd_loop(2, sub);
	}
	cli_errorf("help --man: expected run, live, plan, sweep or loop, got '%s'", name ? name : "");
	return SS_EXIT_USAGE;
}

static int cmd_help(int argc, char **argv)
{
	bool quiet = false;

	/* -v changes nothing here; -q prints nothing (the status says the
	 * command exists) */
	if ((argc = cli_take_quiet_verbose(argc, argv, &quiet)) < 0)
		return SS_EXIT_USAGE;
	if (quiet && !freopen("/dev/null", "w", stdout)) {
		cli_errorf("-q: cannot open /dev/null");
		return SS_EXIT_FAILURE;
	}
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
	/* Global options, before the command: --data-dir DIR (or =DIR). */
	while (argc >= 2 && !strncmp(argv[1], "--data-dir", 10) &&
	       (argv[1][10] == '\0' || argv[1][10] == '=')) {
		const char *dir = argv[1][10] == '=' ? argv[1] + 11 : argc >= 3 ? argv[2] : NULL;
		int used = argv[1][10] == '=' ? 1 : 2;
		struct stat st;

		if (!dir || !*dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
			cli_errorf("--data-dir: expected a directory, got '%s'", dir ? dir : "");
			return SS_EXIT_USAGE;
		}
		data_dir_opt = dir;
		argv[used] = argv[0];
		argv += used;
		argc -= used;
	}
	/* a run's start-up allocates about a MiB in small blocks: fault the
	 * heap in a MiB at once, not page by page (10 us a fault here).  Only
	 * for `run`, one simulation whose start-up is a share of its time: the
	 * padding it leaves on the heap (M_TOP_PAD) made a plan's thousands of
	 * simulations about 10% slower (docs/validation.md). */
	if (argc >= 2 && !strcmp(argv[1], "run"))
		(void)ss_heap_prefault((size_t)1 << 20);
	/* -q, -v (--quiet, --verbose) before a command are the command's:
	 * `servesim -v list gpus` is `servesim list -v gpus` */
	{
		int k = 1;

		while (k < argc && (!strcmp(argv[k], "-q") || !strcmp(argv[k], "-v") ||
				    !strcmp(argv[k], "--quiet") || !strcmp(argv[k], "--verbose")))
			k++;
		if (k > 1 && k < argc && argv[k][0] != '-') {
			char *cmd = argv[k];

			memmove(argv + 2, argv + 1, (size_t)(k - 1) * sizeof(*argv));
			argv[1] = cmd;
		}
	}
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
