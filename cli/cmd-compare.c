/* servesim compare — runs side by side, or against a reference run. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "compare.h"
#include "html.h"
#include "options.h"
#include "report.h"
#include "ss-file.h"

/* Its options are in cli/options.c. */
const struct cli_command cli_cmd_compare = {
	.name = "compare", .id = CLI_COMPARE,
	.operands = "RUN RUN [RUN ...]",
	.failure = "failed write",
	.description =
		"Compare runs, given as their --out directories: TTFT, TPOT, ITL and E2E\n"
		"percentiles, throughput, SLO attainment and goodput, one column per run,\n"
		"each run named by its directory's base name (or --label).  With a\n"
		"reference run, every other run as a difference from it, and the\n"
		"per-request errors of runs of the same trace (typically REFERENCE = a live\n"
		"run, the other its simulation); without one, each figure's spread (max/min)\n"
		"and the best run.  Two runs: the first is the reference unless --reference\n"
		"says otherwise; more: none unless --reference names one.  A run may also be\n"
		"a measured serving benchmark result file (docs/serving-results.md) to\n"
		"compare with the simulation of its replay (run --trace RESULT).\n",
};

/* A run's --out directory, or a measured serving benchmark result file
 * (docs/serving-results.md) to compare a replay of it with. */
static int load(struct run_data *rd, const char *path, struct ss_error *err)
{
	struct stat sb;

	if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
		return run_data_load_result(rd, path, err);
	return run_data_load(rd, path, err);
}

/* A run's name: its directory's (or file's) base name, without trailing
 * slashes. */
static void base_name(const char *path, char *buf, size_t len)
{
	size_t n = strlen(path);
	const char *b;

	while (n > 1 && path[n - 1] == '/')
		n--;
	b = path + n;
	while (b > path && b[-1] != '/')
		b--;
	snprintf(buf, len, "%.*s", (int)(path + n - b), b);
}

/* --reference R: a run's name, else "none", else its position 1..n. */
static int find_reference(const char *r, int n, char (*names)[256], int *ref)
{
	char *end;
	long k;

	for (int i = 0; i < n; i++)
		if (!strcmp(r, names[i]))
			return *ref = i, 0;
	if (!strcmp(r, "none"))
		return *ref = -1, 0;
	errno = 0;
	k = strtol(r, &end, 10);
	if (!errno && end != r && !*end && k >= 1 && k <= n)
		return *ref = (int)k - 1, 0;
	cli_errorf("--reference '%s': expected a run's name, its position 1..%d, or none", r, n);
	return -1;
}

static int write_json(const char *path, const struct cmp_set *s, struct ss_error *err)
{
	/* through a fresh temporary file beside it, then renamed */
	json_t *j = cmp_set_json(s);
	struct ss_file sf;

	if (!j)
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	if (ss_file_open(&sf, path, 0, err)) {
		json_decref(j);
		return err->code;
	}
	if (json_dumpf(j, sf.f, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(10)))
		ss_error_set(err, -EIO, path, 0, "cannot write the comparison");
	json_decref(j);
	if (err->code) {
		ss_file_abort(&sf);
		return err->code;
	}
	return ss_file_commit(&sf, err);
}

int cmd_compare(int argc, char **argv)
{
	const char *json_path, *plot_dir, *ref_arg;
	const char **labels;
	char (*names)[256] = NULL;
	const char **name_ptr = NULL;
	struct run_data *runs = NULL;
	struct cmp_set set = { 0 };
	struct ss_error err = { 0 };
	int n = 0, n_labels, first, ref, rc, status = SS_EXIT_USAGE;
	bool json_stdout, quiet;
	struct plot_outcome plots = { 0 };
	struct cli_config cfg;
	char warn[700];
	/* before the options are parsed: getopt permutes argv */
	char *command_line = html_command_line("servesim compare", argc, argv);

	rc = cli_parse(&cli_cmd_compare, argc, argv, &cfg, true, &err);
	labels = cfg.labels;
	if (rc) {
		if (rc == CLI_HELP_SHOWN)
			status = SS_EXIT_OK;
		else
			cli_error(&err);
		goto out;
	}
	n_labels = cfg.n_labels;
	ref_arg = cfg.reference;
	plot_dir = cfg.out;
	/* --json: stdout, as every command's; --json=FILE: a file */
	json_stdout = cfg.json_to && !strcmp(cfg.json_to, "-");
	json_path = json_stdout ? NULL : cfg.json_to;
	quiet = cfg.quiet;
	first = cfg.operand0;
	n = argc - first;
	if (n < 2) {
		cli_errorf("compare: expected two or more result directories, got %d", n);
		goto out;
	}
	if (n_labels && n_labels != n) {
		cli_errorf("--label: given %d times for %d runs: expected one name per run, in order",
			   n_labels, n);
		goto out;
	}
	names = calloc((size_t)n, sizeof(*names));
	name_ptr = calloc((size_t)n, sizeof(*name_ptr));
	runs = calloc((size_t)n, sizeof(*runs));
	if (!names || !name_ptr || !runs) {
		cli_errorf("out of memory");
		status = SS_EXIT_FAILURE;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		if (n_labels)
			snprintf(names[i], sizeof(names[i]), "%s", labels[i]);
		else
			base_name(argv[first + i], names[i], sizeof(names[i]));
		name_ptr[i] = names[i];
		if (!names[i][0]) {
			cli_errorf("--label: an empty name for run %d: expected a name", i + 1);
			goto out;
		}
		/* a newline or tab would break the table's columns */
		for (const char *c = names[i]; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f) {
				cli_errorf("--label: run %d's name has a control character: expected printable text",
					   i + 1);
				goto out;
			}
		/* two runs of one name could not be told apart in the table */
		for (int j = 0; j < i; j++)
			if (!strcmp(names[i], names[j])) {
				cli_errorf("compare: runs %d and %d (%s, %s) are both named '%s':"
					   " name them with --label", j + 1, i + 1,
					   argv[first + j], argv[first + i], names[i]);
				goto out;
			}
	}
	ref = n == 2 ? 0 : -1;
	if (ref_arg && find_reference(ref_arg, n, names, &ref))
		goto out;
	status = SS_EXIT_FAILURE;
	for (int i = 0; i < n; i++)
		run_data_init(&runs[i]);
	for (int i = 0; i < n; i++) {
		if (load(&runs[i], argv[first + i], &err))
			goto fail;
		cli_verbosef("run %d: %s, named '%s'", i + 1, argv[first + i], names[i]);
	}
	if (cmp_set_build(&set, n, runs, name_ptr, ref, &err))
		goto fail;
	if (json_path && write_json(json_path, &set, &err))
		goto fail;
	if (plot_dir && cmp_set_plots(plot_dir, &set, &plots, &err))
		goto fail;
	if (plot_dir && cmp_set_html(plot_dir, &set, &plots, command_line, &err))
		goto fail;
	if (plot_dir && plot_outcome_warning(&plots, plot_dir, warn, sizeof(warn)))
		cli_errorf("%s", warn);
	if (json_stdout) {
		json_t *j = cmp_set_json(&set);

		if (!j || json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS |
				     JSON_REAL_PRECISION(10)) || puts("") == EOF) {
			json_decref(j);
			ss_error_set(&err, -EIO, NULL, 0, "compare: cannot write the JSON to standard output");
			goto fail;
		}
		json_decref(j);
	} else if (!quiet) {
		cmp_set_print(stdout, &set);
	}
	status = SS_EXIT_OK;
	goto out;
fail:
	cli_error(&err);
out:
	cmp_set_release(&set);
	for (int i = 0; runs && i < n; i++)
		run_data_release(&runs[i]);
	free(runs);
	free(names);
	free(name_ptr);
	free(labels);
	free(command_line);
	return status;
}
