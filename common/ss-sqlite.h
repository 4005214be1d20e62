/* servesim — one way to open a SQLite database that is data, not code.
 *
 * Every database servesim reads or writes goes through ss_db_open(): a run's
 * results.db (written by `run --out`, read by compare), sweep.db, the plan
 * database and the calibration store (which also holds fitted engine
 * profiles).  Each of them may be a file a user was handed, so a connection
 * is opened the way SQLite's "defense against the dark arts" page advises:
 *
 *  - SQLITE_DBCONFIG_DEFENSIVE: no writable_schema, no writes to the
 *    shadow tables, nothing that corrupts the file by other means than SQL;
 *  - SQLITE_DBCONFIG_TRUSTED_SCHEMA off: functions and virtual tables named
 *    in the schema (a view's, a trigger's) do not run with our privileges;
 *  - an instruction budget (sqlite3_progress_handler): a statement over a
 *    database that is not what it claims (a recursive view, a trigger that
 *    never returns) stops with an error naming the file instead of running
 *    forever.  The budget is a fixed part plus a part proportional to the
 *    file's size (as it is when the budget is reset: a journal such as
 *    sweep.db grows); the owner decides when it is spent afresh
 *    (ss_db_budget_reset(): per statement, per API call, per load);
 *  - a busy timeout: a lock held by another process is waited for briefly,
 *    then reported as "locked by another process", never waited out in
 *    silence;
 *  - a read-only handle also runs PRAGMA query_only.
 *
 * Errors become a negative errno (SQLITE_BUSY -EBUSY, SQLITE_READONLY
 * -EROFS, SQLITE_FULL -ENOSPC, ...) and one ss_error line naming the file.
 * A connection belongs to one thread at a time (SQLITE_OPEN_NOMUTEX).
 *
 * The file is checked before SQLite sees it: SQLite would block on a FIFO
 * and create its journal beside a device (as root, /dev/null-journal), so
 * anything but a regular file (or, for SS_DB_CREATE, a missing one) is
 * refused.
 */
#ifndef SS_SQLITE_H
#define SS_SQLITE_H

#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

#include "ss-error.h"

enum ss_db_mode {
	SS_DB_READ,      /* read-only (query_only); the file must exist */
	SS_DB_WRITE,     /* read-write; the file must exist */
	SS_DB_CREATE,    /* read-write; created when missing */
};

/* How to open one kind of database; static storage in its module. */
struct ss_db_kind {
	/* Noun for messages: "calibration store", "plan database". */
	const char *noun;
	/* What the user should have given, for messages: "a plan database or
	 * a new file for --db". */
	const char *expect;
	/* How long a lock held by another process is waited for, ms (0: not
	 * at all). */
	int busy_ms;
	/* A file this process has just created and only writes (results.db,
	 * under its temporary name): it holds nothing to defend against, so
	 * no instruction budget (it would only bound the size of the output)
	 * and no defensive mode (which refuses PRAGMA journal_mode = OFF). */
	bool own_file;
	/* Refuse a symbolic link in place of the file (SQLITE_OPEN_NOFOLLOW). */
	bool nofollow;
};

/* Budget granularity, SQLite VM instructions per progress-handler call, and
 * the budget of one reset: a fixed part plus a part per byte of the file.
 * Our statements read each row a bounded number of times, about one
 * instruction per byte; 100 per byte is a 100-fold margin that still stops
 * within seconds on a file that is not what it claims to be. */
#define SS_DB_PROGRESS_OPS 1000
#define SS_DB_BUDGET_BASE 100000000.0      /* instructions */
#define SS_DB_BUDGET_PER_BYTE 100.0        /* instructions per byte of the file */

/* One open database; embedded in its owner (plan_db, sweep_db, cal_store). */
struct ss_db {
	sqlite3 *db;                  /* NULL when not open */
	const struct ss_db_kind *kind;
	char path[1024];              /* the name messages give */
	char file[1024];              /* the file opened (path, or its temporary name) */
	int64_t ticks;                /* progress-handler calls since the last reset */
	int64_t max_ticks;            /* calls allowed per reset */
	bool gave_up;                 /* the budget stopped a statement */
};

/* Open file as a database of this kind, mode as above; messages name label
 * (file when NULL: results.db is written under a temporary name and named
 * by its final one).  The budget starts full.  On failure d is closed and
 * the error names the file. */
int ss_db_open(struct ss_db *d, const char *file, const char *label, enum ss_db_mode mode,
	       const struct ss_db_kind *kind, struct ss_error *err);

/* Close (finalize statements first: an unfinalized one makes this fail with
 * SQLITE_BUSY, a bug).  Accepts a closed or zeroed ss_db. */
int ss_db_close(struct ss_db *d, struct ss_error *err);

/* Spend the budget afresh, sized by the file as it is now. */
void ss_db_budget_reset(struct ss_db *d);

/* The error of a failed SQLite call whose result code was rc: "PATH: WHAT:
 * SQLite's message", or what a lock or the budget means for the user; the
 * code is a negative errno.  Always returns a negative errno. */
int ss_db_fail(struct ss_db *d, int rc, const char *what, struct ss_error *err);

/* The same with the connection's last result code (sqlite3_extended_errcode). */
int ss_db_fail_last(struct ss_db *d, const char *what, struct ss_error *err);

/* Run one or more SQL statements without results.  what names them in an
 * error (NULL: SQLite's message alone). */
int ss_db_exec(struct ss_db *d, const char *sql, const char *what, struct ss_error *err);

/* The integer in the first column of the first row of sql (a PRAGMA, a
 * count); *out is left alone when there is no row. */
int ss_db_query_int(struct ss_db *d, const char *sql, int64_t *out, struct ss_error *err);

/* Prepare sql into *st; what names it in an error. */
int ss_db_prepare(struct ss_db *d, const char *sql, sqlite3_stmt **st, const char *what,
		  struct ss_error *err);

/* SQLite result code (primary or extended) as a negative errno. */
int ss_db_errno(int rc);

#endif
