/* servesim — command-line internals shared by the subcommands. */
#ifndef SS_CLI_H
#define SS_CLI_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "catalog.h"
#include "ss-error.h"

/* Exit codes (docs/servesim.1.md). */
enum {
	SS_EXIT_OK = 0,
	SS_EXIT_FAILURE = 1,   /* bad input data, failed run or failed write */
	SS_EXIT_USAGE = 2,     /* bad command line */
};

/* The exit status of a failed engine_new(): a configuration it refuses
 * without naming a file (an unknown policy, a parameter out of range, a
 * model that does not fit) came from the command line. */
static inline int cli_engine_status(const struct ss_error *err)
{
	return err->code == -EINVAL && !err->file[0] ? SS_EXIT_USAGE : SS_EXIT_FAILURE;
}

/* SIGINT and SIGTERM (cli/interrupt.c, docs/servesim.1.md "SIGNALS"):
 * cli_interrupt_install() makes the first of them set cli_interrupted to
 * its number (and restores the default action, so a second one kills); a
 * long command polls the flag at its safe points, writes what it has,
 * prints one line naming cli_interrupt_name() and exits
 * cli_interrupt_status() (130 for SIGINT, 143 for SIGTERM).
 * cli_interrupt_install returns 0 or a negative errno. */
extern volatile sig_atomic_t cli_interrupted;
int cli_interrupt_install(void);
const char *cli_interrupt_name(int sig);
int cli_interrupt_status(int sig);
/* Hold SIGINT and SIGTERM back (old gets the mask before) while a command
 * without a handler writes its results, then let a held one act (its
 * default action: the process ends after the files are complete, with no
 * temporary file left).  `plan` does, around its output directory. */
void cli_interrupt_defer(sigset_t *old);
void cli_interrupt_resume(const sigset_t *old);

int cmd_run(int argc, char **argv);
int cmd_live(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_workload(int argc, char **argv);   /* cli/cmd-workload.c */
/* `servesim sweep --help` (cmd-sweep.c), also `servesim help --man sweep`. */
void cli_sweep_help(FILE *f);

/* One `servesim run` for `servesim sweep` (cmd-run.c): argv (argv[0]
 * "run") parsed, built and simulated as run does, quietly (argv says
 * --quiet), its directory written when argv has --out; take() gets the
 * summary before it is freed.  check_only: stop after creating the engine
 * (a grid point's options checked before anything runs).  Returns an exit
 * status (err set when not 0); a run stopped by SIGINT or SIGTERM returns
 * cli_interrupt_status() and takes nothing.  note (len bytes, may be
 * NULL): check_only fills it with the note on requests longer than the
 * context (cli_context_text), "" when there is none. */
struct summary;
int cli_run_collect(int argc, char **argv, bool check_only,
		    void (*take)(void *ctx, const struct summary *s), void *ctx,
		    char *note, size_t note_len, struct ss_error *err);
int cmd_loop(int argc, char **argv);   /* cli/cmd-loop.c */

/* `servesim calibrate` subcommands (argv[0] is the subcommand name). */
int cal_cli_run(int argc, char **argv);
int cal_cli_import(int argc, char **argv);
int cal_cli_list(int argc, char **argv);
int cal_cli_export(int argc, char **argv);
int cal_cli_check(int argc, char **argv);
int cal_cli_fit_engine(int argc, char **argv);

/* Print "servesim: MESSAGE" for err on stderr, one line. */
void cli_error(const struct ss_error *err);
void cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "servesim: " and the message on stderr, one line: every control byte
 * (below 0x20, and 0x7f) written as \\xNN, so that text from an input
 * file (a name, a field) cannot move the cursor, recolour or retitle the
 * terminal, or start a new line (issue 34 §5).  cli_error, cli_errorf and
 * cli_verbosef print through it. */
void cli_vmessage(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
/* s on f with its control bytes escaped as cli_vmessage does. */
void cli_fputs_safe(const char *s, FILE *f);

/* The data directory: --data-dir (a global option, before the command),
 * else $SERVESIM_DATA, else the source tree's data/ when this binary runs
 * from its build directory (uninstalled), else the installed
 * DATADIR/servesim (docs/servesim.1.md, CONVENTIONS). */
const char *cli_data_dir(void);
/* -v: cli_verbosef() prints "servesim: MESSAGE" on stderr when
 * cli_verbose is set (what a command resolved: data directory, catalogs,
 * cost model, stack); nothing otherwise.  -q and -v together: exit 2. */
extern int cli_verbose;
void cli_verbosef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* -q/--quiet and -v/--verbose for the commands without option tables
 * (version, help, calibrate list, export, fit-engine): taken out of argv (up to a "--"),
 * cli_verbose and *quiet set.  Returns the new argc, or -1 after printing
 * the error when both were given (exit 2). */
int cli_take_quiet_verbose(int argc, char **argv, bool *quiet);
/* The directory of the running servesim executable (/proc/self/exe), where
 * the build tree keeps the loadable modules (servesim-cuda.so,
 * servesim-mpi.so), or its ../lib/servesim where that exists (a relocatable
 * tree: the GPU bundle, docs/kernels.md); NULL when it cannot be read.
 * Libraries get it through their configs (kernel_backend_config.module_dir)
 * and fall back to the installed module directory. */
const char *cli_module_dir(void);
/* The memory a run may use, bytes (docs/limits.md): physical memory,
 * lowered by RLIMIT_AS and the cgroup's memory.max (v2) or
 * memory.limit_in_bytes (v1); 0 when none is known.  SERVESIM_MEMORY_LIMIT
 * (bytes, with an optional K, M or G suffix, powers of 1024) replaces
 * them all: tests give a small machine, and a user who knows better can
 * lift the check with a large value.  Engines get it through
 * engine_config.memory_limit_bytes. */
uint64_t cli_memory_limit(void);
/* Load the shipped catalogs plus optional user files (NULL to skip). */
/* --model-config: read o->model_config (when set) into the catalog under
 * --model's name, or the file's, which o->model then names. */
struct cli_config;
int cli_load_model_config(struct cli_config *o, struct catalog *cat, struct ss_error *err);
extern const char cli_default_model[];
int cli_load_catalog(struct catalog *cat, const char *models_file, const char *gpus_file,
		     const char *engines_file, struct ss_error *err);

/* cli/inputs.c: checks of what run, live and plan load.
 * --price (o->prices, checked by the parser) applied to the catalog's
 * GPUs, after --gpu-catalog: 0, or -EINVAL (exit 2) naming a GPU the
 * catalog does not have. */
int cli_apply_prices(const struct cli_config *o, struct catalog *cat, struct ss_error *err);
/* When wl is a trace cut by --num-requests or --duration (workload.h
 * n_source), fill *s and return true; when the slice differs from the
 * whole trace (s->any), print one warning line on stderr unless quiet. */
struct workload;
struct wl_slice;
bool cli_slice_check(const struct cli_config *o, const struct workload *wl, bool quiet,
		     struct wl_slice *s);
/* Requests longer than the context (docs/workloads.md, "Requests longer
 * than the context"): count wl's into *c and, with --overlong truncate,
 * cut them to fit (workload_context_check).  -EINVAL (exit 2) for
 * truncate with a session workload. */
struct wl_context;
int cli_context_apply(const struct cli_config *o, int32_t context, struct workload *wl,
		      struct wl_context *c, struct ss_error *err);
/* The note on *c's requests longer than the context, on stderr, unless
 * there are none or --quiet: how many, what happens to them and, when
 * refused, the attainment reachable at most (and that target, a fraction,
 * cannot be met when it lies above; 0: no target). */
void cli_context_note(const struct cli_config *o, const char *model, const struct wl_context *c,
		      double target);
/* Options that can have no effect on this workload (issue 34 §2), as
 * notes (each one line, "note: ..."), at most max into out: --order
 * priority on a workload without priorities, --prefix-cache on one
 * without prefix content, and (predictions_used 0: neither the order nor
 * the batch policy reads predictions; 1: they do; -1: not known) a
 * --predictor nothing reads.  Returns how many. */
#define CLI_NOTE_LEN 384
size_t cli_effect_notes(const struct cli_config *o, const struct workload *wl, int predictions_used,
			char (*out)[CLI_NOTE_LEN], size_t max);
/* A serving result measured on another model than the one simulated
 * (workload.source_model, matched as --model is): one note on stderr,
 * unless --quiet.  Not refused: a what-if on another model is a fair
 * question. */
struct model_spec;
void cli_source_model_note(const struct cli_config *o, const struct catalog *cat,
			   const struct workload *wl, const struct model_spec *model);
/* The same note into buf (len bytes), whatever --quiet says; false (buf
 * untouched) when no request exceeds the context. */
bool cli_context_text(const struct cli_config *o, const char *model, const struct wl_context *c,
		      double target, char *buf, size_t len);

#endif
