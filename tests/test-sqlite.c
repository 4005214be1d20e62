/* Behaviours of the SQLite connection helper (common/ss-sqlite.h) that every
 * database of servesim is opened with: a runaway query is stopped by the
 * instruction budget, a file that is not a database (or not a file) is one
 * clear error naming it, defensive mode refuses writable_schema tricks, and
 * a lock held elsewhere is reported as such. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss-sqlite.h"

static const struct ss_db_kind kind = {
	.noun = "test database",
	.expect = "a test database",
	.busy_ms = 100,
};

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ss-sqlite-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A database made with a plain connection (no guards), holding sql. */
static void make_db(const char *path, const char *sql)
{
	sqlite3 *db = NULL;

	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

START_TEST(budget_stops_a_query_that_would_run_forever)
{
	struct ss_db d;
	struct ss_error err = { 0 };
	char path[128];
	int64_t v = -1;

	snprintf(path, sizeof(path), "%s/forever.db", dir);
	/* a recursive view without an end: SELECT from it never returns */
	make_db(path, "CREATE VIEW forever AS WITH RECURSIVE c(x) AS"
		      " (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c;");
	ck_assert_int_eq(ss_db_open(&d, path, NULL, SS_DB_READ, &kind, &err), 0);
	/* that it returns at all is the point: 10^8 instructions take about
	 * a second (two minutes under valgrind; the test case's timeout) */
	ck_assert_int_eq(ss_db_query_int(&d, "SELECT * FROM forever", &v, &err), -EIO);
	ck_assert_int_eq(v, -1);
	ck_assert_str_eq(err.file, path);
	/* 10^8 plus 100 per byte of a one- or two-page file */
	ck_assert_msg(strstr(err.msg, "gave up after 10") &&
		      strstr(err.msg, " million SQLite instructions (a corrupt or hostile test"
				      " database?)"), "%s", err.msg);
	ck_assert_msg(strstr(err.msg, "expected a test database"), "%s", err.msg);
	/* a reset budget serves the next, legitimate query */
	ss_db_budget_reset(&d);
	ck_assert_int_eq(ss_db_query_int(&d, "SELECT count(*) FROM sqlite_master", &v, &err), 0);
	ck_assert_int_eq(v, 1);
	ck_assert_int_eq(ss_db_close(&d, &err), 0);
	ck_assert_ptr_null(d.db);
}
END_TEST

START_TEST(not_a_database_is_a_clear_error)
{
	struct ss_db d;
	struct ss_error err = { 0 };
	char path[128];
	int64_t v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/text.db", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 200; i++)
		fputs("this is a CSV file, not SQLite\n", f);
	ck_assert_int_eq(fclose(f), 0);
	/* SQLite reads the header lazily: the first statement fails */
	if (ss_db_open(&d, path, NULL, SS_DB_READ, &kind, &err) == 0) {
		ck_assert_int_lt(ss_db_query_int(&d, "PRAGMA application_id", &v, &err), 0);
		ss_db_close(&d, NULL);
	}
	ck_assert_int_lt(err.code, 0);
	ck_assert_str_eq(err.file, path);
	ck_assert_msg(strstr(err.msg, "file is not a database"), "%s", err.msg);
}
END_TEST

START_TEST(what_is_not_a_file_is_refused_before_sqlite_sees_it)
{
	struct ss_db d;
	struct ss_error err = { 0 };
	char path[128];

	/* a directory */
	ck_assert_int_eq(ss_db_open(&d, dir, NULL, SS_DB_CREATE, &kind, &err), -EISDIR);
	ck_assert_str_eq(err.file, dir);
	ck_assert_msg(strstr(err.msg, "is a directory; expected a test database"), "%s", err.msg);
	ck_assert_ptr_null(d.db);
	/* a FIFO: SQLite would block on it */
	snprintf(path, sizeof(path), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	ck_assert_int_eq(ss_db_open(&d, path, NULL, SS_DB_CREATE, &kind, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "is not a regular file; expected a test database"), "%s",
		      err.msg);
	/* missing: an error unless created, messages naming the label */
	snprintf(path, sizeof(path), "%s/missing.db", dir);
	ck_assert_int_eq(ss_db_open(&d, path, "final.db", SS_DB_READ, &kind, &err), -ENOENT);
	ck_assert_str_eq(err.file, "final.db");
	ck_assert_msg(strstr(err.msg, "cannot open test database: No such file"), "%s", err.msg);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(ss_db_open(&d, path, NULL, SS_DB_CREATE, &kind, &err), 0);
	ck_assert_int_eq(ss_db_exec(&d, "CREATE TABLE t (x)", "create", &err), 0);
	ck_assert_int_eq(ss_db_close(&d, &err), 0);
	ck_assert_int_eq(access(path, F_OK), 0);
}
END_TEST

START_TEST(defensive_mode_refuses_writable_schema)
{
	static const char trick[] =
		"PRAGMA writable_schema = ON;"
		"UPDATE sqlite_master SET sql = 'CREATE TABLE t (x, y)' WHERE name = 't';";
	struct ss_db d;
	struct ss_error err = { 0 };
	char path[128], ctl[128];
	sqlite3 *raw = NULL;
	sqlite3_stmt *st = NULL;

	snprintf(path, sizeof(path), "%s/t.db", dir);
	make_db(path, "CREATE TABLE t (x);");
	ck_assert_int_eq(ss_db_open(&d, path, NULL, SS_DB_WRITE, &kind, &err), 0);
	ck_assert_int_lt(ss_db_exec(&d, trick, "rewrite the schema", &err), 0);
	ck_assert_str_eq(err.file, path);
	ck_assert_int_eq(ss_db_close(&d, &err), 0);
	/* the schema is as it was */
	ck_assert_int_eq(sqlite3_open(path, &raw), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "SELECT sql FROM sqlite_master WHERE name = 't'",
					    -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "CREATE TABLE t (x)");
	sqlite3_finalize(st);
	ck_assert_int_eq(sqlite3_close(raw), SQLITE_OK);
	/* the control: the same trick works on an unguarded connection, so
	 * the refusal above is the helper's doing */
	snprintf(ctl, sizeof(ctl), "%s/control.db", dir);
	make_db(ctl, "CREATE TABLE t (x);");
	ck_assert_int_eq(sqlite3_open(ctl, &raw), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(raw, trick, NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_close(raw), SQLITE_OK);
}
END_TEST

START_TEST(read_only_handle_refuses_writes)
{
	struct ss_db d;
	struct ss_error err = { 0 };
	char path[128];

	snprintf(path, sizeof(path), "%s/ro.db", dir);
	make_db(path, "CREATE TABLE t (x);");
	ck_assert_int_eq(ss_db_open(&d, path, NULL, SS_DB_READ, &kind, &err), 0);
	ck_assert_int_lt(ss_db_exec(&d, "INSERT INTO t VALUES (1)", "insert", &err), 0);
	ck_assert_msg(strstr(err.msg, "insert: "), "%s", err.msg);
	ss_db_close(&d, NULL);
}
END_TEST

START_TEST(a_lock_held_elsewhere_is_reported)
{
	struct ss_db d;
	struct ss_error err = { 0 };
	char path[128];
	sqlite3 *other = NULL;

	snprintf(path, sizeof(path), "%s/locked.db", dir);
	make_db(path, "CREATE TABLE t (x);");
	ck_assert_int_eq(sqlite3_open(path, &other), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(ss_db_open(&d, path, NULL, SS_DB_WRITE, &kind, &err), 0);
	ck_assert_int_eq(ss_db_exec(&d, "INSERT INTO t VALUES (1)", "insert", &err), -EBUSY);
	ck_assert_msg(strstr(err.msg, "insert: the test database is locked by another process"
				      " (waited 0.1 s)"), "%s", err.msg);
	ss_db_close(&d, NULL);
	sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(other);
}
END_TEST

START_TEST(errors_map_to_errno)
{
	ck_assert_int_eq(ss_db_errno(SQLITE_BUSY), -EBUSY);
	ck_assert_int_eq(ss_db_errno(SQLITE_BUSY_SNAPSHOT), -EBUSY);
	ck_assert_int_eq(ss_db_errno(SQLITE_READONLY), -EROFS);
	ck_assert_int_eq(ss_db_errno(SQLITE_FULL), -ENOSPC);
	ck_assert_int_eq(ss_db_errno(SQLITE_NOMEM), -ENOMEM);
	ck_assert_int_eq(ss_db_errno(SQLITE_CONSTRAINT_UNIQUE), -EINVAL);
	ck_assert_int_eq(ss_db_errno(SQLITE_CORRUPT), -EIO);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sqlite");
	TCase *budget = tcase_create("budget");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	/* valgrind runs the 10^8 instructions about 100 times slower */
	tcase_set_timeout(budget, 600);
	tcase_add_checked_fixture(budget, setup, teardown);
	tcase_add_test(budget, budget_stops_a_query_that_would_run_forever);
	suite_add_tcase(s, budget);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, not_a_database_is_a_clear_error);
	tcase_add_test(tc, what_is_not_a_file_is_refused_before_sqlite_sees_it);
	tcase_add_test(tc, defensive_mode_refuses_writable_schema);
	tcase_add_test(tc, read_only_handle_refuses_writes);
	tcase_add_test(tc, a_lock_held_elsewhere_is_reported);
	tcase_add_test(tc, errors_map_to_errno);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
