/* servesim — opening a SQLite database that is data, not code (ss-sqlite.h). */
#include "ss-sqlite.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int ss_db_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_NOMEM: return -ENOMEM;
	case SQLITE_READONLY: return -EROFS;
	case SQLITE_BUSY:
	case SQLITE_LOCKED: return -EBUSY;
	case SQLITE_FULL: return -ENOSPC;
	case SQLITE_CANTOPEN: return -ENOENT;
	case SQLITE_PERM: return -EACCES;
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH: return -EINVAL;
	default: return -EIO;
	}
}

int ss_db_fail(struct ss_db *d, int rc, const char *what, struct ss_error *err)
{
	const struct ss_db_kind *k = d->kind;

	if (!d->db || (rc & 0xff) == SQLITE_NOMEM)
		return ss_error_set(err, -ENOMEM, d->path, 0, "%s: out of memory", what);
	if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
		return ss_error_set(err, -EBUSY, d->path, 0,
				    "%s: the %s is locked by another process (waited %.1f s)", what,
				    k->noun, k->busy_ms / 1000.0);
	if ((rc & 0xff) == SQLITE_INTERRUPT && d->gave_up)
		return ss_error_set(err, -EIO, d->path, 0,
				    "%s: gave up after %.0f million SQLite instructions (a corrupt or"
				    " hostile %s?); expected %s",
				    what, (double)d->max_ticks * SS_DB_PROGRESS_OPS / 1e6, k->noun,
				    k->expect);
	return ss_error_set(err, ss_db_errno(rc), d->path, 0, "%s: %s", what, sqlite3_errmsg(d->db));
}

int ss_db_fail_last(struct ss_db *d, const char *what, struct ss_error *err)
{
	return ss_db_fail(d, d->db ? sqlite3_extended_errcode(d->db) : SQLITE_NOMEM, what, err);
}

static int progress(void *ctx)
{
	struct ss_db *d = ctx;

	if (++d->ticks <= d->max_ticks)
		return 0;
	d->gave_up = true;
	return 1;
}

static void budget_size(struct ss_db *d, double size)
{
	d->max_ticks = (int64_t)((SS_DB_BUDGET_BASE + SS_DB_BUDGET_PER_BYTE * size) /
				 SS_DB_PROGRESS_OPS);
}

void ss_db_budget_reset(struct ss_db *d)
{
	struct stat sb;

	d->ticks = 0;
	d->gave_up = false;
	if (d->db && !d->kind->own_file && stat(d->file, &sb) == 0)
		budget_size(d, (double)sb.st_size);
}

/* Refuse what SQLite should not open; the file's size, bytes, for the budget. */
static int check_file(const char *file, const char *label, enum ss_db_mode mode,
		      const struct ss_db_kind *k, double *size, struct ss_error *err)
{
	struct stat sb;
	int e;

	*size = 0.0;
	if (stat(file, &sb) != 0) {
		e = errno;
		if (e == ENOENT && mode == SS_DB_CREATE)
			return 0;
		return ss_error_set(err, -e, label, 0, "cannot open %s: %s", k->noun, strerror(e));
	}
	if (S_ISDIR(sb.st_mode))
		return ss_error_set(err, -EISDIR, label, 0, "is a directory; expected %s", k->expect);
	if (!S_ISREG(sb.st_mode))
		return ss_error_set(err, -EINVAL, label, 0, "is not a regular file; expected %s",
				    k->expect);
	*size = (double)sb.st_size;
	return 0;
}

int ss_db_open(struct ss_db *d, const char *file, const char *label, enum ss_db_mode mode,
	       const struct ss_db_kind *k, struct ss_error *err)
{
	int flags = SQLITE_OPEN_NOMUTEX, rc;
	double size;

	memset(d, 0, sizeof(*d));
	d->kind = k;
	if (!label)
		label = file;
	snprintf(d->path, sizeof(d->path), "%s", label);
	snprintf(d->file, sizeof(d->file), "%s", file);
	rc = check_file(file, label, mode, k, &size, err);
	if (rc)
		return rc;
	flags |= mode == SS_DB_READ ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
	if (mode == SS_DB_CREATE)
		flags |= SQLITE_OPEN_CREATE;
	if (k->nofollow)
		flags |= SQLITE_OPEN_NOFOLLOW;
	rc = sqlite3_open_v2(file, &d->db, flags, NULL);
	if (rc != SQLITE_OK) {
		rc = d->db ? ss_error_set(err, ss_db_errno(rc), d->path, 0, "cannot open %s: %s",
					  k->noun, sqlite3_errmsg(d->db))
			   : ss_error_set(err, -ENOMEM, d->path, 0, "out of memory");
		goto fail;
	}
	rc = sqlite3_extended_result_codes(d->db, 1);
	if (rc == SQLITE_OK && k->busy_ms > 0)
		rc = sqlite3_busy_timeout(d->db, k->busy_ms);
	if (rc == SQLITE_OK && !k->own_file)
		rc = sqlite3_db_config(d->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_db_config(d->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
	if (rc == SQLITE_OK && mode == SS_DB_READ)
		rc = sqlite3_exec(d->db, "PRAGMA query_only = 1", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		rc = ss_db_fail(d, rc, "cannot configure the database connection", err);
		goto fail;
	}
	if (!k->own_file) {
		budget_size(d, size);
		sqlite3_progress_handler(d->db, SS_DB_PROGRESS_OPS, progress, d);
	}
	return 0;
fail:
	sqlite3_close(d->db);
	d->db = NULL;
	return rc;
}

int ss_db_close(struct ss_db *d, struct ss_error *err)
{
	int rc;

	if (!d || !d->db)
		return 0;
	rc = sqlite3_close(d->db);
	if (rc != SQLITE_OK)
		return ss_db_fail(d, rc, "sqlite3_close", err);
	d->db = NULL;
	return 0;
}

int ss_db_exec(struct ss_db *d, const char *sql, const char *what, struct ss_error *err)
{
	char *msg = NULL;
	int rc = sqlite3_exec(d->db, sql, NULL, NULL, &msg);

	if (rc == SQLITE_OK)
		return 0;
	if (!what && msg && (rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED &&
	    !((rc & 0xff) == SQLITE_INTERRUPT && d->gave_up))
		rc = ss_error_set(err, ss_db_errno(rc), d->path, 0, "%s", msg);
	else
		rc = ss_db_fail(d, rc, what ? what : "SQL", err);
	sqlite3_free(msg);
	return rc;
}

int ss_db_query_int(struct ss_db *d, const char *sql, int64_t *out, struct ss_error *err)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(d->db, sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
		return ss_db_fail(d, rc, "sqlite3_prepare_v2", err);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(st, 0);
		rc = SQLITE_DONE;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : ss_db_fail(d, rc, "sqlite3_step", err);
}

int ss_db_prepare(struct ss_db *d, const char *sql, sqlite3_stmt **st, const char *what,
		  struct ss_error *err)
{
	int rc = sqlite3_prepare_v2(d->db, sql, -1, st, NULL);

	return rc == SQLITE_OK ? 0 : ss_db_fail(d, rc, what, err);
}
