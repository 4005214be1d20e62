/* servesim — atomic result files (see outdir-int.h). */
#include "outdir-int.h"
#include "report.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int outdir_mkdirs(const char *dir, struct ss_error *err)
{
	char path[PATH_MAX];
	struct stat st;
	size_t len = strlen(dir);
	int e;

	if (len == 0)
		return ss_error_set(err, -EINVAL, NULL, 0, "output directory: empty name");
	if (len >= sizeof(path))
		return ss_error_set(err, -ENAMETOOLONG, dir, 0, "output directory: name too long");
	memcpy(path, dir, len + 1);
	/* every prefix ending before a '/', then the whole path */
	for (size_t i = 1; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		if (i < len && path[i - 1] == '/')
			continue;        /* "a//b" */
		path[i] = '\0';
		if (mkdir(path, 0777) < 0) {
			e = errno;
			if (e != EEXIST)
				return ss_error_set(err, -e, dir, 0, "mkdir %s: %s", path,
						    strerror(e));
			if (stat(path, &st) < 0) {
				e = errno;
				return ss_error_set(err, -e, dir, 0, "stat %s: %s", path,
						    strerror(e));
			}
			if (!S_ISDIR(st.st_mode))
				return ss_error_set(err, -ENOTDIR, dir, 0, "mkdir %s: %s", path,
						    strerror(ENOTDIR));
		}
		if (i < len)
			path[i] = '/';
	}
	return 0;
}

/* dir/name into buf[PATH_MAX]. */
static int join(char *buf, const char *dir, const char *name, struct ss_error *err)
{
	int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);

	if (n < 0 || n >= PATH_MAX)
		return ss_error_set(err, -ENAMETOOLONG, dir, 0, "%s: path too long", name);
	return 0;
}

int outfile_prepare(struct ss_file *of, const char *dir, const char *name,
		    struct ss_error *err)
{
	char path[PATH_MAX];
	int ret = join(path, dir, name, err);

	memset(of, 0, sizeof(*of));
	return ret < 0 ? ret : ss_file_create(of, path, err);
}

int outfile_open(struct ss_file *of, const char *dir, const char *name, size_t bufsize,
		 struct ss_error *err)
{
	char path[PATH_MAX];
	int ret = join(path, dir, name, err);

	memset(of, 0, sizeof(*of));
	return ret < 0 ? ret : ss_file_open(of, path, bufsize, err);
}

int outdir_remove(const char *dir, const char *name, struct ss_error *err)
{
	char path[PATH_MAX];
	int n, e;

	n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return ss_error_set(err, -ENAMETOOLONG, dir, 0, "%s: path too long", name);
	if (unlink(path) < 0 && errno != ENOENT) {
		e = errno;
		return ss_error_set(err, -e, path, 0, "unlink: %s", strerror(e));
	}
	return 0;
}

int report_lock_dir(const char *dir, struct ss_error *err)
{
	int rc = outdir_mkdirs(dir, err);

	return rc < 0 ? rc : ss_dir_lock(dir, err);
}
