/* servesim — writing result files atomically.
 *
 * Every result file is written as DIR/.NAME.tmp and renamed to DIR/NAME
 * once complete; rename() within one directory is atomic, so a reader (or a
 * run that was killed) never sees a half-written NAME.  On failure the
 * temporary file is removed.  Durability across a power cut (fsync) is not
 * attempted: results can be recomputed, and the guarantee we give is only
 * that a file that exists is complete.
 */
#ifndef SS_OUTDIR_INT_H
#define SS_OUTDIR_INT_H

#include <limits.h>
#include <stdio.h>

#include "ss-error.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* Create dir and any missing parents (mode 0777 less umask).  An existing
 * directory is fine; an existing non-directory is -ENOTDIR. */
int outdir_mkdirs(const char *dir, struct ss_error *err);

/* One file being written. */
struct outfile {
	char path[PATH_MAX];     /* DIR/NAME, the final name */
	char tmp[PATH_MAX];      /* DIR/.NAME.tmp */
	FILE *f;                 /* stdio stream on tmp; NULL for outfile_prepare() */
	char *buf;               /* stdio buffer, owned */
};

/* Fill of's names and remove any stale temporary file; no stream is
 * opened (for writers that open the file themselves: SQLite, jansson). */
int outfile_prepare(struct outfile *of, const char *dir, const char *name,
		    struct ss_error *err);

/* outfile_prepare() and open a stdio stream on the temporary file with a
 * buffer of bufsize bytes (0 = stdio's default). */
int outfile_open(struct outfile *of, const char *dir, const char *name, size_t bufsize,
		 struct ss_error *err);

/* Close the stream (if any), checking for write errors, and rename the
 * temporary file into place.  On failure the temporary file is removed.
 * Either way of is released. */
int outfile_commit(struct outfile *of, struct ss_error *err);

/* Give up: close the stream, remove the temporary file.  Accepts a
 * released or zeroed outfile. */
void outfile_abort(struct outfile *of);

/* Remove dir/name if it exists (ENOENT is not an error). */
int outdir_remove(const char *dir, const char *name, struct ss_error *err);

#endif
