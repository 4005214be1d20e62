/* servesim — writing a file atomically and safely (see ss-file.h). */
#include "ss-file.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Names tried before giving up: each clash means another file already has
 * the name, which only happens if someone plants files on purpose. */
#define TRIES 100

/* A 64-bit mix (splitmix64's finaliser) of the process id, the clock, the
 * caller's buffer address and the attempt, so names differ between
 * processes, threads and calls without any shared state.  Not a secret:
 * safety comes from O_EXCL | O_NOFOLLOW, not from guessing. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Open DIR/.BASE.XXXXXXXX.tmp for path exclusively; name gets the name. */
static int open_tmp(const char *path, int flags, char *name, size_t len, struct ss_error *err)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	int dirlen = slash ? (int)(slash - path + 1) : 0;
	struct timespec ts;
	uint64_t seed;
	int e = EEXIST;

	if (!*base)
		return ss_error_set(err, -EISDIR, path, 0, "expected a file name, not a directory");
	clock_gettime(CLOCK_REALTIME, &ts);
	seed = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
	       mix((uint64_t)(uintptr_t)name);
	for (int i = 0; i < TRIES; i++) {
		uint64_t r = mix(seed + (uint64_t)i);
		int n = snprintf(name, len, "%.*s.%s.%08x.tmp", dirlen, path, base,
				 (unsigned)(r & 0xffffffffu));
		int fd;

		if (n < 0 || (size_t)n >= len) {
			name[0] = '\0';
			return ss_error_set(err, -ENAMETOOLONG, path, 0, "path too long");
		}
		fd = open(name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd >= 0)
			return fd;
		e = errno;
		if (e != EEXIST)
			break;
	}
	ss_error_set(err, -e, path, 0, "cannot create a temporary file %s: %s", name, strerror(e));
	name[0] = '\0';
	return -e;
}

/* What stands at the final name (see ss-file.h). */
enum target {
	T_REPLACE,    /* nothing, a regular file, or a link: renamed over */
	T_STREAM,     /* a character device or a pipe: written in place */
	T_REFUSE,     /* a directory, a block device, a socket: an error */
};

static enum target classify(const char *path, const char **what)
{
	struct stat sb;
	bool link;

	*what = NULL;
	if (lstat(path, &sb) != 0)
		return T_REPLACE;
	link = S_ISLNK(sb.st_mode);
	/* Through a link only when we or root own it (/dev/stdout is root's):
	 * a link someone else planted is replaced, never followed. */
	if (link && ((sb.st_uid != geteuid() && sb.st_uid != 0) || stat(path, &sb) != 0))
		return T_REPLACE;
	if (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode))
		return T_REPLACE;
	if (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode))
		return T_STREAM;
	*what = S_ISDIR(sb.st_mode) ? "a directory" : S_ISBLK(sb.st_mode) ? "a block device" :
		S_ISSOCK(sb.st_mode) ? "a socket" : "not a regular file";
	return T_REFUSE;
}

static int start(struct ss_file *sf, const char *path, bool stream_ok, struct ss_error *err)
{
	size_t n = strlen(path);
	const char *what;
	struct stat sb;
	int fd;

	memset(sf, 0, sizeof(*sf));
	if (n >= sizeof(sf->path))
		return ss_error_set(err, -ENAMETOOLONG, NULL, 0, "path too long: %.200s...", path);
	memcpy(sf->path, path, n + 1);
	switch (classify(path, &what)) {
	case T_REPLACE:
		return open_tmp(path, O_WRONLY, sf->tmp, sizeof(sf->tmp), err);
	case T_REFUSE:
		return ss_error_set(err, strcmp(what, "a directory") ? -EINVAL : -EISDIR, path, 0,
				    "is %s; expected a file name", what);
	case T_STREAM:
		break;
	}
	if (!stream_ok)
		return ss_error_set(err, -EINVAL, path, 0,
				    "is a device or a pipe; expected a regular file (this output is"
				    " written by name and cannot go to a stream)");
	/* Renaming over a device would destroy it (as root, `--out /dev/null`
	 * made the system's /dev/null a file): write to it instead.  Not
	 * atomic, as a stream cannot be. */
	fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return ss_error_set(err, -errno, path, 0, "cannot open: %s", strerror(errno));
	if (fstat(fd, &sb) != 0 || !(S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode))) {
		close(fd);
		return ss_error_set(err, -EINVAL, path, 0, "changed while being opened; expected a"
				    " device or a pipe");
	}
	sf->stream = true;
	return fd;
}

int ss_file_create(struct ss_file *sf, const char *path, struct ss_error *err)
{
	int fd = start(sf, path, false, err);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int ss_file_open(struct ss_file *sf, const char *path, size_t bufsize, struct ss_error *err)
{
	int fd = start(sf, path, true, err), e;

	if (fd < 0)
		return fd;
	sf->f = fdopen(fd, "w");
	if (!sf->f) {
		e = errno;
		close(fd);
		ss_file_abort(sf);
		return ss_error_set(err, -e, path, 0, "fdopen: %s", strerror(e));
	}
	if (bufsize > 0) {
		sf->buf = malloc(bufsize);
		if (!sf->buf) {
			ss_file_abort(sf);
			return ss_error_set(err, -ENOMEM, path, 0, "out of memory for a buffer");
		}
		if (setvbuf(sf->f, sf->buf, _IOFBF, bufsize) != 0) {
			ss_file_abort(sf);
			return ss_error_set(err, -EIO, path, 0, "setvbuf failed");
		}
	}
	return 0;
}

static void release(struct ss_file *sf)
{
	free(sf->buf);
	sf->buf = NULL;
	sf->f = NULL;
	sf->tmp[0] = '\0';
	sf->stream = false;
}

int ss_file_commit(struct ss_file *sf, struct ss_error *err)
{
	int ret = 0, e;

	if (sf->f) {
		/* ferror covers a failed earlier write; fclose flushes the rest */
		bool failed = ferror(sf->f) != 0;

		e = failed ? EIO : 0;
		if (fclose(sf->f) != 0 && !failed) {
			failed = true;
			e = errno;
		}
		sf->f = NULL;
		if (failed) {
			ret = ss_error_set(err, -e, sf->path, 0, "write: %s", strerror(e));
			goto fail;
		}
	}
	if (!sf->stream && rename(sf->tmp, sf->path) < 0) {
		e = errno;
		ret = ss_error_set(err, -e, sf->path, 0, "rename from %s: %s", sf->tmp, strerror(e));
		goto fail;
	}
	release(sf);
	return 0;
fail:
	ss_file_abort(sf);
	return ret;
}

void ss_file_abort(struct ss_file *sf)
{
	if (sf->f)
		fclose(sf->f);
	if (sf->tmp[0])
		unlink(sf->tmp);
	release(sf);
}

int ss_file_scratch(const char *path, char *name, size_t len, struct ss_error *err)
{
	return open_tmp(path, O_RDWR, name, len, err);
}

int ss_dir_lock(const char *dir, struct ss_error *err)
{
	char path[4096];
	int fd, n = snprintf(path, sizeof(path), "%s/%s", dir, SS_DIR_LOCK_NAME);

	if (n < 0 || (size_t)n >= sizeof(path))
		return ss_error_set(err, -ENAMETOOLONG, dir, 0, "directory name too long");
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0)
		return ss_error_set(err, -errno, dir, 0, "cannot create the lock %s: %s",
				    SS_DIR_LOCK_NAME, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		close(fd);
		if (e == EWOULDBLOCK)
			return ss_error_set(err, -EBUSY, dir, 0,
					    "another servesim is writing its results here (%s is locked): expected one writer per --out directory",
					    SS_DIR_LOCK_NAME);
		return ss_error_set(err, -e, dir, 0, "cannot lock %s: %s", SS_DIR_LOCK_NAME,
				    strerror(e));
	}
	return fd;
}

void ss_dir_unlock(int fd)
{
	if (fd >= 0)
		close(fd);   /* the lock goes with the last descriptor */
}
