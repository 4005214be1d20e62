#include "ss-error.h"

#include <stdio.h>
#include <string.h>

int ss_error_set(struct ss_error *err, int code, const char *file, long line,
		 const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	snprintf(err->file, sizeof(err->file), "%s", file ? file : "");
	err->line = line;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

void ss_error_format(const struct ss_error *err, char *buf, unsigned long len)
{
	if (err->file[0] && err->line > 0)
		snprintf(buf, len, "%s:%ld: %s", err->file, err->line, err->msg);
	else if (err->file[0])
		snprintf(buf, len, "%s: %s", err->file, err->msg);
	else
		snprintf(buf, len, "%s", err->msg);
}
