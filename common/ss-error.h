/* servesim — error reporting shared by every module.
 *
 * Functions that can fail return 0 or a negative errno and, when the caller
 * passes a non-NULL struct ss_error as their last argument, fill it with the
 * input that was wrong (file, line) and what was expected.  Only cli/ prints.
 */
#ifndef SS_ERROR_H
#define SS_ERROR_H

#include <stdarg.h>

struct ss_error {
	int code;        /* negative errno, 0 when no error was recorded */
	char file[256];  /* input file the error is about, "" when none */
	long line;       /* 1-based line in file, 0 when not applicable */
	char msg[512];   /* what was wrong and what was expected */
};

/* Record an error and return code (a negative errno) so callers can write
 * `return ss_error_set(err, -EINVAL, path, line, "...")`.  err may be NULL.
 * file may be NULL; line 0 means "no line". */
int ss_error_set(struct ss_error *err, int code, const char *file, long line,
		 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Format err as one line: "FILE:LINE: MSG", "FILE: MSG" or "MSG". */
void ss_error_format(const struct ss_error *err, char *buf, unsigned long len);

#endif
