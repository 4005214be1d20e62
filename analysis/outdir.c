/* servesim — atomic result files (see outdir-int.h). */
#include "outdir-int.h"

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

int outfile_prepare(struct outfile *of, const char *dir, const char *name,
		    struct ss_error *err)
{
	int n1, n2, e;

	memset(of, 0, sizeof(*of));
	n1 = snprintf(of->path, sizeof(of->path), "%s/%s", dir, name);
	n2 = snprintf(of->tmp, sizeof(of->tmp), "%s/.%s.tmp", dir, name);
	if (n1 < 0 || n2 < 0 || (size_t)n1 >= sizeof(of->path) ||
	    (size_t)n2 >= sizeof(of->tmp))
		return ss_error_set(err, -ENAMETOOLONG, dir, 0, "%s: path too long", name);
	if (unlink(of->tmp) < 0 && errno != ENOENT) {
		e = errno;
		return ss_error_set(err, -e, of->tmp, 0, "unlink: %s", strerror(e));
	}
	return 0;
}

int outfile_open(struct outfile *of, const char *dir, const char *name, size_t bufsize,
		 struct ss_error *err)
{
	int ret, e;

	ret = outfile_prepare(of, dir, name, err);
	if (ret < 0)
		return ret;
	of->f = fopen(of->tmp, "w");
	if (!of->f) {
		e = errno;
		return ss_error_set(err, -e, of->tmp, 0, "fopen: %s", strerror(e));
	}
	if (bufsize > 0) {
		of->buf = malloc(bufsize);
		if (!of->buf) {
			outfile_abort(of);
			return ss_error_set(err, -ENOMEM, of->tmp, 0, "out of memory for buffer");
		}
		if (setvbuf(of->f, of->buf, _IOFBF, bufsize) != 0) {
			outfile_abort(of);
			return ss_error_set(err, -EIO, of->tmp, 0, "setvbuf failed");
		}
	}
	return 0;
}

static void release(struct outfile *of)
{
	free(of->buf);
	of->buf = NULL;
	of->f = NULL;
	of->tmp[0] = '\0';
}

int outfile_commit(struct outfile *of, struct ss_error *err)
{
	int ret = 0, e;

	if (of->f) {
		/* ferror covers a failed earlier write; fclose flushes the rest */
		bool failed = ferror(of->f) != 0;

		e = failed ? EIO : 0;
		if (fclose(of->f) != 0 && !failed) {
			failed = true;
			e = errno;
		}
		of->f = NULL;
		if (failed) {
			ret = ss_error_set(err, -e, of->tmp, 0, "write: %s", strerror(e));
			goto fail;
		}
	}
	if (rename(of->tmp, of->path) < 0) {
		e = errno;
		ret = ss_error_set(err, -e, of->path, 0, "rename from %s: %s", of->tmp,
				   strerror(e));
		goto fail;
	}
	release(of);
	return 0;
fail:
	outfile_abort(of);
	return ret;
}

void outfile_abort(struct outfile *of)
{
	if (of->f)
		fclose(of->f);
	if (of->tmp[0])
		unlink(of->tmp);
	release(of);
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
