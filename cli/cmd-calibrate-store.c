/* servesim calibrate import | list | export — the calibration store.
 *
 * import writes one store in one transaction: any bad row in any file and
 * the store is left as it was (a store the command creates is built under
 * a temporary name and renamed only when every file imported).  list and
 * export read the shipped store unless --store names another.
 */
/* renameat2 and RENAME_NOREPLACE (glibc 2.28; Linux 3.15) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "import.h"
#include "options.h"
#include "params.h"
#include "ss-file.h"
#include "store.h"

#define DEFAULT_STORE "calibration.db"

/* Their options are in cli/options.c. */

static void import_epilogue(FILE *f)
{
	fprintf(f, "importers (--kind NAME; recognized from each file's header by default):\n");
	for (int k = CAL_IMPORT_AUTO + 1; k < CAL_IMPORT_KIND_COUNT; k++)
		fprintf(f, "  %s\n", cal_import_kind_name((enum cal_import_kind)k));
	fprintf(f, "See docs/calibration.md.\n\n");
}

static void see_calibration(FILE *f)
{
	fprintf(f, "See docs/calibration.md.\n\n");
}

const struct cli_command cli_cmd_cal_import = {
	.name = "calibrate import", .id = CLI_CAL_IMPORT,
	.operands = "PATH...",
	.failure = "failed write",
	.epilogue = import_epilogue,
	.description =
		"Import third-party GPU profile tables into a calibration store.  PATH is a\n"
		"profile CSV or a directory searched recursively for them; each file's table is\n"
		"recognized from its header (the importers are listed below).\n"
		"All files are one transaction: on any error nothing is imported.\n",
};

const struct cli_command cli_cmd_cal_list = {
	.name = "calibrate list", .id = CLI_CAL_LIST,
	.usage = "calibrate list [--store FILE]",
	.failure = "failed write",
	.epilogue = see_calibration,
	.description =
		"Count a store's measurements by device, operator, dtype, variant and source.\n",
};

const struct cli_command cli_cmd_cal_export = {
	.name = "calibrate export", .id = CLI_CAL_EXPORT,
	.usage = "calibrate export [--store FILE] [--out FILE.csv]",
	.failure = "failed write",
	.epilogue = see_calibration,
	.description =
		"Write every measurement of a store as CSV, one column per field, with a header.\n",
};

/* Parse argv for cmd into cfg: 0, or an exit status to return (help shown:
 * SS_EXIT_OK; a bad command line: the error printed, SS_EXIT_USAGE). */
static int parse(const struct cli_command *cmd, int argc, char **argv, struct cli_config *cfg)
{
	struct ss_error err = { 0 };
	int rc = cli_parse(cmd, argc, argv, cfg, true, &err);

	if (rc == CLI_HELP_SHOWN)
		return SS_EXIT_OK;
	if (rc) {
		cli_error(&err);
		return SS_EXIT_USAGE;
	}
	return -1;
}

/* ---- import ------------------------------------------------------------- */

struct import_cli {
	bool progress;
	const char *store;
};

static void print_stats(FILE *f, const struct cal_import_stats *st)
{
	fprintf(f, "%lld measurements from %lld lines", (long long)st->imported,
		(long long)st->lines);
	if (st->filtered)
		fprintf(f, ", %lld lines filtered", (long long)st->filtered);
	if (st->skipped)
		fprintf(f, ", %lld lines skipped (not modeled)", (long long)st->skipped);
}

static void on_file(void *ctx, const char *path, enum cal_import_kind kind,
		    const struct cal_import_stats *st)
{
	struct import_cli *c = ctx;

	if (!c->progress)
		return;
	fprintf(stderr, "%s (%s): ", path, cal_import_kind_name(kind));
	print_stats(stderr, st);
	fputc('\n', stderr);
}

/* Move the new store tmp to path unless path exists (then -1, errno
 * EEXIST): renameat2's RENAME_NOREPLACE, or link + unlink where the file
 * system has no such rename.  0 or -1 with errno. */
static int publish_store(const char *tmp, const char *path)
{
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (link(tmp, path) != 0)
		return -1;
	unlink(tmp);
	return 0;
}

/* Remove a store file and its journal (a failed import into a new store). */
static void remove_store(const char *path)
{
	size_t len = strlen(path) + sizeof("-journal");
	char *journal = malloc(len);

	if (journal) {
		snprintf(journal, len, "%s-journal", path);
		unlink(journal);
		free(journal);
	}
	unlink(path);
}

int cal_cli_import(int argc, char **argv)
{
	struct cal_import_opts o;
	struct cal_import_stats st = { 0 };
	struct import_cli cli = { .store = DEFAULT_STORE };
	enum cal_import_kind kind = CAL_IMPORT_AUTO;
	struct ss_error err = { 0 };
	struct cli_config cfg;
	struct cal_store *s = NULL;
	char tmp[4200] = "";
	struct stat sb;
	bool created;
	int rc;

	if ((rc = parse(&cli_cmd_cal_import, argc, argv, &cfg)) >= 0)
		return rc;
	if (cfg.store)
		cli.store = cfg.store;
	if (cfg.device && !*cfg.device) {
		cli_errorf("--device: expected a GPU name");
		return SS_EXIT_USAGE;
	}
	if (cfg.kind && cal_import_kind_from_name(cfg.kind, &kind)) {
		cli_errorf("--kind: unknown importer '%s' (see `servesim calibrate import --help`)",
			   cfg.kind);
		return SS_EXIT_USAGE;
	}
	if (cfg.operand0 >= argc) {
		cli_errorf("calibrate import: expected at least one PATH (see `servesim calibrate import --help`)");
		return SS_EXIT_USAGE;
	}
	/* the preset first, then what was given explicitly */
	if (cfg.compact)
		cal_import_opts_compact(&o);
	else
		cal_import_opts_init(&o);
	o.device = cfg.device;
	if (cfg.dtype_filter)
		o.dtypes = cfg.dtype_filter;
	if (cfg.window >= 0)
		o.window = (int)cfg.window;
	if (cfg.ar_backend)
		o.ar_backend = cfg.ar_backend;
	if (cfg.per_octave >= 0)
		o.per_octave = (int)cfg.per_octave;
	cli.progress = !cfg.quiet && (cfg.verbose || isatty(STDERR_FILENO));
	o.on_file = on_file;
	o.ctx = &cli;

	/* A new store is built under a temporary name and published only if
	 * no store appeared meanwhile (renameat2 RENAME_NOREPLACE); when
	 * another import created it first, this one is imported into that
	 * store instead, so neither's rows are lost (issue 34 §5: two imports
	 * creating one store both exited 0, one's rows gone). */
	for (int attempt = 0;; attempt++) {
		created = stat(cli.store, &sb) != 0;
		tmp[0] = '\0';
		st = (struct cal_import_stats){ 0 };
		if (created) {
			/* a fresh, exclusively created file beside the store
			 * (SQLite makes the empty file a database) */
			struct ss_file sf;

			rc = ss_file_create(&sf, cli.store, &err);
			if (!rc) {
				snprintf(tmp, sizeof(tmp), "%s", sf.tmp);
				rc = cal_store_open(&s, tmp, CAL_OPEN_CREATE, &err);
			}
			if (rc)
				snprintf(err.file, sizeof(err.file), "%s", cli.store);
		} else {
			rc = cal_store_open(&s, cli.store, CAL_OPEN_WRITE, &err);
		}
		if (!rc)
			rc = cal_store_begin(s, &err);
		for (int i = cfg.operand0; i < argc && !rc; i++)
			rc = cal_import_path(s, argv[i], kind, &o, &st, &err);
		if (!rc)
			rc = cal_store_commit(s, &err);
		if (!rc && created)
			rc = cal_store_vacuum(s, &err);
		cal_store_close(s);       /* rolls back whatever is still open */
		s = NULL;
		if (!rc && created && publish_store(tmp, cli.store) != 0) {
			rc = -errno;
			if (rc == -EEXIST && attempt == 0) {
				/* another import created it first: into that one */
				remove_store(tmp);
				continue;
			}
			ss_error_set(&err, rc, cli.store, 0, "cannot rename %s: %s", tmp, strerror(-rc));
		}
		break;
	}
	if (rc) {
		if (created && tmp[0])
			remove_store(tmp);
		cli_error(&err);
		return SS_EXIT_FAILURE;
	}
	if (cli.progress) {
		fprintf(stderr, "%s: %lld files: ", cli.store, (long long)st.files);
		print_stats(stderr, &st);
		if (st.files_ignored)
			fprintf(stderr, "; %lld other CSV files ignored", (long long)st.files_ignored);
		fputc('\n', stderr);
	}
	return SS_EXIT_OK;
}

/* ---- list and export ---------------------------------------------------- */

static const char *shipped_store(char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", cli_data_dir(), DEFAULT_STORE);
	return buf;
}

int cal_cli_list(int argc, char **argv)
{
	struct ss_error err = { 0 };
	struct cli_config cfg;
	struct cal_store *s;
	const char *store;
	char buf[4096];
	int rc;

	if ((rc = parse(&cli_cmd_cal_list, argc, argv, &cfg)) >= 0)
		return rc;
	store = cfg.store;
	if (!store)
		store = shipped_store(buf, sizeof(buf));
	rc = cal_store_open(&s, store, CAL_OPEN_READONLY, &err);
	if (!rc) {
		rc = cal_store_list(s, stdout, &err);
		cal_store_close(s);
	}
	if (!rc && fflush(stdout) != 0)
		rc = ss_error_set(&err, -EIO, NULL, 0, "write error on standard output");
	if (rc) {
		cli_error(&err);
		return SS_EXIT_FAILURE;
	}
	return SS_EXIT_OK;
}

int cal_cli_export(int argc, char **argv)
{
	struct ss_error err = { 0 };
	struct cli_config cfg;
	struct cal_store *s = NULL;
	const char *store, *out;
	char buf[4096];
	struct ss_file sf;
	FILE *f = stdout;
	int rc;

	if ((rc = parse(&cli_cmd_cal_export, argc, argv, &cfg)) >= 0)
		return rc;
	store = cfg.store;
	out = cfg.out_file;
	if (!store)
		store = shipped_store(buf, sizeof(buf));
	rc = cal_store_open(&s, store, CAL_OPEN_READONLY, &err);
	if (rc)
		goto out;
	if (out) {
		/* a fresh temporary file beside FILE, renamed over it when complete */
		rc = ss_file_open(&sf, out, 1u << 16, &err);
		if (rc)
			goto out;
		f = sf.f;
	}
	rc = cal_store_export_csv(s, f, &err);
	if (out) {
		if (rc)
			ss_file_abort(&sf);
		else
			rc = ss_file_commit(&sf, &err);
	} else if (!rc && fflush(stdout) != 0) {
		rc = ss_error_set(&err, -EIO, NULL, 0, "write error on standard output");
	}
	if (rc && out && !err.file[0])
		snprintf(err.file, sizeof(err.file), "%s", out);
out:
	cal_store_close(s);
	if (rc) {
		cli_error(&err);
		return SS_EXIT_FAILURE;
	}
	return SS_EXIT_OK;
}
