/* A temporary file for the Check test programs (one helper, not a copy per
 * test): text written to a fresh file under $TMPDIR (else /tmp) named
 * ss-STEM-XXXXXX; path receives its name.  The caller unlinks it. */
#ifndef SS_CHECK_TMP_H
#define SS_CHECK_TMP_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void check_write_tmp(char *path, size_t len, const char *stem, const char *text)
{
	const char *tmp = getenv("TMPDIR");
	FILE *f;
	int fd;

	snprintf(path, len, "%s/ss-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", stem);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

#endif
