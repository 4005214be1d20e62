/* servesim — writing result files atomically.
 *
 * Every result file is written under a fresh temporary name in DIR
 * (DIR/.NAME.XXXXXXXX.tmp, created with O_EXCL | O_NOFOLLOW so nothing
 * planted there is followed) and renamed to DIR/NAME once complete;
 * rename() within one directory is atomic, so a reader (or a run that was
 * killed) never sees a half-written NAME.  On failure the temporary file is
 * removed.  The mechanism is common/ss-file.h.
 */
#ifndef SS_OUTDIR_INT_H
#define SS_OUTDIR_INT_H

#include <limits.h>
#include <stdio.h>

#include "ss-error.h"
#include "ss-file.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* Create dir and any missing parents (mode 0777 less umask).  An existing
 * directory is fine; an existing non-directory is -ENOTDIR. */
int outdir_mkdirs(const char *dir, struct ss_error *err);

/* Create the temporary file for dir/name and close it (for writers that
 * open the file by name themselves: SQLite, gnuplot). */
int outfile_prepare(struct ss_file *of, const char *dir, const char *name,
		    struct ss_error *err);

/* Create the temporary file for dir/name and open a stdio stream on it
 * with a buffer of bufsize bytes (0 = stdio's default). */
int outfile_open(struct ss_file *of, const char *dir, const char *name, size_t bufsize,
		 struct ss_error *err);

/* ss_file_commit(): close, check, rename into place (ss-file.h). */
static inline int outfile_commit(struct ss_file *of, struct ss_error *err)
{
	return ss_file_commit(of, err);
}

/* ss_file_abort(): close and remove the temporary file. */
static inline void outfile_abort(struct ss_file *of)
{
	ss_file_abort(of);
}

/* Remove dir/name if it exists (ENOENT is not an error). */
int outdir_remove(const char *dir, const char *name, struct ss_error *err);

#endif
