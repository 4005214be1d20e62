/* servesim — writing a file atomically and safely.
 *
 * Every file servesim writes (result files, comparisons, exported and
 * imported calibration stores, catalogs) is written under a fresh
 * temporary name in the directory of its final name and renamed into place
 * once complete:
 *   - the temporary file is created with open(O_CREAT | O_EXCL |
 *     O_NOFOLLOW), so a file or symbolic link planted at any name is never
 *     opened, truncated or written through; a name that exists is skipped
 *     and another is tried;
 *   - the final name is replaced by rename(), which replaces a symbolic
 *     link at that name instead of following it;
 *   - rename() within one directory is atomic, so a reader (or a run that
 *     was killed) never sees a half-written file under the final name.
 * A name that is a character device or a pipe (/dev/null, /dev/stdout, a
 * FIFO; itself, or through a link owned by us or root) is written in place
 * instead: renaming over it would destroy it.  A directory, block device or
 * socket is refused.  ss_file_create(), whose writers need a real file,
 * refuses devices and pipes too.
 * Durability across a power cut (fsync) is not attempted: results can be
 * recomputed; the guarantee is only that a file that exists is complete.
 * The file gets mode 0666 less the umask, as fopen() would give it.
 */
#ifndef SS_FILE_H
#define SS_FILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ss-error.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* One file being written. */
struct ss_file {
	char path[PATH_MAX];     /* the final name */
	char tmp[PATH_MAX];      /* DIR/.BASE.XXXXXXXX.tmp, created by us, "" when released */
	FILE *f;                 /* stdio stream on tmp; NULL for ss_file_create() */
	bool stream;             /* writing to path itself (a device or a pipe) */
	char *buf;               /* stdio buffer, owned */
};

/* Create the temporary file for path (exclusively, see above) and close it:
 * for writers that open the file by name themselves (SQLite opens the
 * empty file as a new database; gnuplot writes a PNG to it). */
int ss_file_create(struct ss_file *sf, const char *path, struct ss_error *err);

/* Create the temporary file for path and open a stdio stream on it with a
 * buffer of bufsize bytes (0 = stdio's default). */
int ss_file_open(struct ss_file *sf, const char *path, size_t bufsize, struct ss_error *err);

/* Close the stream (if any), checking for write errors, and rename the
 * temporary file to the final name.  On failure the temporary file is
 * removed.  Either way sf is released. */
int ss_file_commit(struct ss_file *sf, struct ss_error *err);

/* Give up: close the stream, remove the temporary file.  Accepts a
 * released or zeroed ss_file. */
void ss_file_abort(struct ss_file *sf);

/* Open a new scratch file beside path (named like the temporary file of
 * ss_file_create(), read-write, O_CLOEXEC) and return its descriptor, or a
 * negative errno; its name goes to name[len].  The caller unlinks it. */
int ss_file_scratch(const char *path, char *name, size_t len, struct ss_error *err);

/* One writer per result directory (docs/outputs.md, "One writer per
 * directory"): an exclusive advisory lock (flock) on DIR/.servesim.lock,
 * created if missing, held until ss_dir_unlock() or the process ends (a
 * killed writer leaves no stale lock).  Returns the descriptor holding it,
 * or -EBUSY when another process holds it (err says so in one line), or
 * another negative errno.  DIR must exist. */
#define SS_DIR_LOCK_NAME ".servesim.lock"
int ss_dir_lock(const char *dir, struct ss_error *err);
/* Release the lock of ss_dir_lock (fd < 0: nothing). */
void ss_dir_unlock(int fd);

#endif
