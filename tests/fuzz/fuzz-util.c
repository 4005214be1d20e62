/* servesim — scratch files for the fuzz targets (see fuzz.h). */
#include "fuzz.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

static char dir[256];

/* Remove the scratch directory and what the targets left in it (one level
 * of subdirectories, as fuzz-import makes). */
static void rm_tree(const char *path, int depth)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char sub[1024];

	if (!d) {
		unlink(path);
		return;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		if (depth < 8)
			rm_tree(sub, depth + 1);
	}
	closedir(d);
	rmdir(path);
}

static void cleanup(void)
{
	if (dir[0])
		rm_tree(dir, 0);
}

const char *fuzz_dir(void)
{
	const char *tmp;

	if (dir[0])
		return dir;
	/* the library's GSL calls must report errors, not abort */
	gsl_set_error_handler_off();
	tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/servesim-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("fuzz: mkdtemp");
		abort();
	}
	atexit(cleanup);
	return dir;
}

const char *fuzz_file(const char *name, const uint8_t *data, size_t size)
{
	static char path[1024];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fuzz_dir(), name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror(path);
		abort();
	}
	for (size_t off = 0; off < size;) {
		ssize_t w = write(fd, data + off, size - off);

		if (w <= 0) {
			perror(path);
			abort();
		}
		off += (size_t)w;
	}
	close(fd);
	return path;
}

void fuzz_check_error(int rc, const struct ss_error *err)
{
	if (rc == 0)
		return;
	if (rc > 0 || err->code != rc || !err->msg[0]) {
		fprintf(stderr, "fuzz: error %d without a matching message (code %d, '%s')\n",
			rc, err->code, err->msg);
		abort();
	}
}
