/* servesim calibrate import | list | export — the calibration store.
 *
 * import writes one store in one transaction: any bad row in any file and
 * the store is left as it was (a store the command creates is built under
 * a temporary name and renamed only when every file imported).  list and
 * export read the shipped store unless --store names another.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "import.h"
#include "params.h"
#include "ss-file.h"
#include "store.h"

#define DEFAULT_STORE "calibration.db"

struct opt_doc {
	const char *name;
	int id;
	const char *arg;     /* NULL for flags */
	const char *help;
};

enum {
	O_STORE = 256, O_DEVICE, O_KIND, O_DTYPE, O_WINDOW, O_AR_BACKEND, O_PER_OCTAVE,
	O_COMPACT, O_VERBOSE, O_QUIET, O_OUT, O_HELP,
};

static const struct opt_doc import_opts[] = {
	{ "store", O_STORE, "FILE", "store to add to (default ./" DEFAULT_STORE ", created when missing)" },
	{ "device", O_DEVICE, "NAME", "catalog GPU name for every row (default: from the source)" },
	{ "kind", O_KIND, "NAME", "importer to use instead of detecting it from the header" },
	{ "dtype", O_DTYPE, "LIST", "keep rows whose dtype is in LIST, e.g. bf16,fp16 (rows without a dtype pass)" },
	{ "window", O_WINDOW, "N", "aiconfigurator attention: keep window_size N only (0 = full attention)" },
	{ "ar-backend", O_AR_BACKEND, "NAME", "aiconfigurator custom all-reduce: keep this backend only (vllm_graph, vllm_eager)" },
	{ "per-octave", O_PER_OCTAVE, "N", "Vidur grids: keep N points per octave of num_tokens and message size" },
	{ "compact", O_COMPACT, NULL, "the shipped store's filters: --dtype bf16,fp16 --window 0 --ar-backend vllm_graph --per-octave 8" },
	{ "verbose", O_VERBOSE, NULL, "print what each file gave on stderr (default: only on a terminal)" },
	{ "quiet", O_QUIET, NULL, "print nothing on success" },
	{ "help", O_HELP, NULL, "show this help" },
};

static const struct opt_doc list_opts[] = {
	{ "store", O_STORE, "FILE", "store to read (default: the shipped data/" DEFAULT_STORE ")" },
	{ "help", O_HELP, NULL, "show this help" },
};

static const struct opt_doc export_opts[] = {
	{ "store", O_STORE, "FILE", "store to read (default: the shipped data/" DEFAULT_STORE ")" },
	{ "out", O_OUT, "FILE", "write the CSV to FILE (default: standard output)" },
	{ "help", O_HELP, NULL, "show this help" },
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void print_opts(FILE *f, const struct opt_doc *o, size_t n)
{
	fprintf(f, "\noptions:\n");
	for (size_t i = 0; i < n; i++) {
		char left[64];

		snprintf(left, sizeof(left), "--%s%s%s", o[i].name, o[i].arg ? " " : "",
			 o[i].arg ? o[i].arg : "");
		fprintf(f, "  %-20s %s\n", left, o[i].help);
	}
	fprintf(f, "\nexit status: 0 success, 1 bad input or failed write, 2 bad command line\n"
		   "See docs/calibration.md.\n");
}

static void import_help(FILE *f)
{
	fprintf(f, "usage: servesim calibrate import [options] PATH...\n\n"
		   "Import third-party GPU profile tables into a calibration store.  PATH is a\n"
		   "profile CSV or a directory searched recursively for them; each file's table is\n"
		   "recognized from its header:\n");
	for (int k = CAL_IMPORT_AUTO + 1; k < CAL_IMPORT_KIND_COUNT; k++)
		fprintf(f, "  %s\n", cal_import_kind_name((enum cal_import_kind)k));
	fprintf(f, "All files are one transaction: on any error nothing is imported.\n");
	print_opts(f, import_opts, N_OF(import_opts));
}

static void list_help(FILE *f)
{
	fprintf(f, "usage: servesim calibrate list [--store FILE]\n\n"
		   "Count a store's measurements by device, operator, dtype, variant and source.\n");
	print_opts(f, list_opts, N_OF(list_opts));
}

static void export_help(FILE *f)
{
	fprintf(f, "usage: servesim calibrate export [--store FILE] [--out FILE.csv]\n\n"
		   "Write every measurement of a store as CSV, one column per field, with a header.\n");
	print_opts(f, export_opts, N_OF(export_opts));
}

/* getopt_long over a table: opt_next returns the next option's id, -1 at
 * the end, or OPT_ERROR after printing what was wrong. */
#define OPT_ERROR 1000

struct opt_parser {
	struct option longopts[16];
	const char *cmd;
};

static void opt_parser_init(struct opt_parser *p, const char *cmd, const struct opt_doc *o,
			    size_t n)
{
	memset(p, 0, sizeof(*p));
	p->cmd = cmd;
	for (size_t i = 0; i < n && i < N_OF(p->longopts) - 1; i++)
		p->longopts[i] = (struct option){ o[i].name, o[i].arg ? required_argument : no_argument,
						  NULL, o[i].id };
	opterr = 0;
	optind = 1;
}

static int opt_next(struct opt_parser *p, int argc, char **argv)
{
	int c = cli_getopt_long(argc, argv, ":", p->longopts);

	if (c == CLI_OPT_REFUSED)
		return OPT_ERROR;
	if (c == ':') {
		cli_errorf("%s: expected a value (see `servesim calibrate %s --help`)",
			   argv[optind - 1], p->cmd);
		return OPT_ERROR;
	}
	if (c == '?') {
		cli_errorf("calibrate %s: unknown option '%s' (see `servesim calibrate %s --help`)",
			   p->cmd, argv[optind - 1], p->cmd);
		return OPT_ERROR;
	}
	return c;
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

static int parse_nonneg(const char *opt, const char *s, int max, int *out)
{
	int64_t v;

	if (!ss_parse_int64(s, &v) || v < 0 || v > max) {
		cli_errorf("--%s: expected an integer in 0..%d, got '%s'", opt, max, s);
		return -1;
	}
	*out = (int)v;
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
	struct cal_import_opts o, given;
	struct cal_import_stats st = { 0 };
	struct import_cli cli = { .store = DEFAULT_STORE };
	enum cal_import_kind kind = CAL_IMPORT_AUTO;
	struct ss_error err = { 0 };
	struct opt_parser p;
	struct cal_store *s = NULL;
	bool compact = false, verbose = false, quiet = false, created;
	bool set_dtype = false, set_window = false, set_backend = false, set_octave = false;
	char tmp[4200] = "";
	struct stat sb;
	int c, rc;

	cal_import_opts_init(&given);
	opt_parser_init(&p, "import", import_opts, N_OF(import_opts));
	while ((c = opt_next(&p, argc, argv)) != -1) {
		switch (c) {
		case O_STORE: cli.store = optarg; break;
		case O_DEVICE:
			if (!*optarg) {
				cli_errorf("--device: expected a GPU name");
				return SS_EXIT_USAGE;
			}
			given.device = optarg;
			break;
		case O_KIND:
			if (cal_import_kind_from_name(optarg, &kind)) {
				cli_errorf("--kind: unknown importer '%s' (see `servesim calibrate import --help`)",
					   optarg);
				return SS_EXIT_USAGE;
			}
			break;
		case O_DTYPE: given.dtypes = optarg; set_dtype = true; break;
		case O_WINDOW:
			if (parse_nonneg("window", optarg, 1 << 30, &given.window))
				return SS_EXIT_USAGE;
			set_window = true;
			break;
		case O_AR_BACKEND: given.ar_backend = optarg; set_backend = true; break;
		case O_PER_OCTAVE:
			if (parse_nonneg("per-octave", optarg, 1024, &given.per_octave))
				return SS_EXIT_USAGE;
			set_octave = true;
			break;
		case O_COMPACT: compact = true; break;
		case O_VERBOSE: verbose = true; break;
		case O_QUIET: quiet = true; break;
		case O_HELP:
			import_help(stdout);
			return SS_EXIT_OK;
		default:
			return SS_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		cli_errorf("calibrate import: expected at least one PATH (see `servesim calibrate import --help`)");
		return SS_EXIT_USAGE;
	}
	if (quiet && verbose) {
		cli_errorf("-q and -v: expected one of them (--quiet prints nothing, --verbose more)");
		return SS_EXIT_USAGE;
	}
	/* the preset first, then what was given explicitly */
	if (compact)
		cal_import_opts_compact(&o);
	else
		cal_import_opts_init(&o);
	o.device = given.device;
	if (set_dtype)
		o.dtypes = given.dtypes;
	if (set_window)
		o.window = given.window;
	if (set_backend)
		o.ar_backend = given.ar_backend;
	if (set_octave)
		o.per_octave = given.per_octave;
	cli.progress = !quiet && (verbose || isatty(STDERR_FILENO));
	o.on_file = on_file;
	o.ctx = &cli;

	created = stat(cli.store, &sb) != 0;
	if (created) {
		/* a fresh, exclusively created file beside the store (SQLite
		 * makes the empty file a database), renamed once complete */
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
	for (int i = optind; i < argc && !rc; i++)
		rc = cal_import_path(s, argv[i], kind, &o, &st, &err);
	if (!rc)
		rc = cal_store_commit(s, &err);
	if (!rc && created)
		rc = cal_store_vacuum(s, &err);
	cal_store_close(s);       /* rolls back whatever is still open */
	if (!rc && created && rename(tmp, cli.store) != 0) {
		rc = -errno;
		ss_error_set(&err, rc, cli.store, 0, "cannot rename %s: %s", tmp, strerror(-rc));
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
	struct opt_parser p;
	struct cal_store *s;
	const char *store = NULL;
	char buf[4096];
	int c, rc;

	opt_parser_init(&p, "list", list_opts, N_OF(list_opts));
	while ((c = opt_next(&p, argc, argv)) != -1) {
		switch (c) {
		case O_STORE: store = optarg; break;
		case O_HELP:
			list_help(stdout);
			return SS_EXIT_OK;
		default:
			return SS_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_errorf("calibrate list: unexpected argument '%s' (use --store FILE)", argv[optind]);
		return SS_EXIT_USAGE;
	}
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
	struct opt_parser p;
	struct cal_store *s = NULL;
	const char *store = NULL, *out = NULL;
	char buf[4096];
	struct ss_file sf;
	FILE *f = stdout;
	int c, rc;

	opt_parser_init(&p, "export", export_opts, N_OF(export_opts));
	while ((c = opt_next(&p, argc, argv)) != -1) {
		switch (c) {
		case O_STORE: store = optarg; break;
		case O_OUT: out = optarg; break;
		case O_HELP:
			export_help(stdout);
			return SS_EXIT_OK;
		default:
			return SS_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_errorf("calibrate export: unexpected argument '%s' (use --store FILE, --out FILE)",
			   argv[optind]);
		return SS_EXIT_USAGE;
	}
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
