/* servesim — the sweep database, sweep.db (sweep-grid.h; schema in docs/sweep.md).
 *
 * Like plan.db, and unlike a run's results.db, it is the sweep's journal:
 * each (point, seed) run is committed as it finishes (one INSERT, one
 * transaction; WAL, synchronous NORMAL: a commit survives the process being
 * killed), so a sweep that is stopped and started again over the same
 * directory runs only what is missing.  One writer: the sweep's parent
 * process (or MPI rank 0).
 *
 * Tables: sweep (key, value: the description the sweep was started with,
 * its keys and the servesim version), points (point, one column per swept
 * key), runs (point, seed, one REAL column per metric, wall_s) and
 * aggregates (point, the keys, seeds, NAME_mean and NAME_ci95), rewritten
 * whole after each sweep from the runs of its seeds; the view
 * runs_by_point joins points and runs for queries.  A key's column is its
 * name with '-' as '_' ("rate_scale"); a value that is a number is stored
 * as one.  A run is keyed by its point and its seed value, so a rerun with
 * more --seeds reuses the runs it shares with the first.
 */
#include "sweep-grid.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ss-sqlite.h"

#include "params.h"

#define SWEEP_DB_APP_ID 0x73737377    /* "sssw" */
/* 2: the runs and aggregates tables gained the interval columns
 * (NAME_lo, NAME_hi; analysis/sweep-grid.h) */
#define SWEEP_DB_VERSION 2

/* Each entry point spends the instruction budget afresh (ss-sqlite.h). */
struct sweep_db {
	struct ss_db s;
	sqlite3_stmt *insert;
};

static const struct ss_db_kind sweep_db_kind = {
	.noun = "sweep database",
	.expect = "a sweep database",
	.busy_ms = 10000,
};

static int db_fail(struct sweep_db *d, struct ss_error *err, const char *call)
{
	return ss_db_fail_last(&d->s, call, err);
}

static int exec(struct sweep_db *d, const char *sql, struct ss_error *err)
{
	return ss_db_exec(&d->s, sql, NULL, err);
}

static int query_int(struct sweep_db *d, const char *sql, int64_t *out, struct ss_error *err)
{
	return ss_db_query_int(&d->s, sql, out, err);
}

/* A growing SQL string. */
struct sql {
	char *s;
	size_t len, cap;
	bool oom;
};

static void add(struct sql *q, const char *text)
{
	size_t n = strlen(text);

	if (q->oom)
		return;
	if (q->len + n + 1 > q->cap) {
		size_t cap = (q->cap ? q->cap * 2 : 1024) + n;
		char *s = realloc(q->s, cap);

		if (!s) {
			q->oom = true;
			return;
		}
		q->s = s;
		q->cap = cap;
	}
	memcpy(q->s + q->len, text, n + 1);
	q->len += n;
}

/* A key's column name, quoted: "rate_scale". */
static void add_key(struct sql *q, const char *key)
{
	char col[80];
	size_t n = 0;

	col[n++] = '"';
	for (const char *k = key; *k && n < sizeof(col) - 2; k++)
		col[n++] = *k == '-' ? '_' : *k == '"' ? '_' : *k;
	col[n++] = '"';
	col[n] = '\0';
	add(q, col);
}

static int check_kind(struct sweep_db *d, struct ss_error *err)
{
	int64_t app = 0, ver = 0, tables = 0;
	int rc = query_int(d, "PRAGMA application_id", &app, err);

	if (!rc)
		rc = query_int(d, "PRAGMA user_version", &ver, err);
	if (!rc)
		rc = query_int(d, "SELECT count(*) FROM sqlite_master", &tables, err);
	if (rc)
		return rc;
	if (app != SWEEP_DB_APP_ID && (app != 0 || tables > 0))
		return ss_error_set(err, -EINVAL, d->s.path, 0,
				    "not a servesim sweep database; expected one or a new --out");
	if (app == SWEEP_DB_APP_ID && ver != SWEEP_DB_VERSION)
		return ss_error_set(err, -EINVAL, d->s.path, 0,
				    "sweep database version %lld; expected version %d (a new --out)",
				    (long long)ver, SWEEP_DB_VERSION);
	return 0;
}

/* The stored description, or "" for a new database; (transfer full). */
static int stored_description(struct sweep_db *d, char **out, struct ss_error *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*out = NULL;
	if (sqlite3_prepare_v2(d->s.db, "SELECT value FROM sweep WHERE key = 'description'", -1, &st,
			       NULL) != SQLITE_OK)
		return db_fail(d, err, "select sweep");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *v = (const char *)sqlite3_column_text(st, 0);

		*out = strdup(v ? v : "");
	} else if (rc == SQLITE_DONE) {
		*out = strdup("");
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_fail(d, err, "select sweep");
	return *out ? 0 : ss_error_set(err, -ENOMEM, d->s.path, 0, "out of memory");
}

static int bind_value(sqlite3_stmt *st, int i, const char *v)
{
	double x;

	return ss_parse_double(v, &x) ? sqlite3_bind_double(st, i, x) :
					sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
}

/* A new database: the tables for t's keys, the description and the points. */
static int create(struct sweep_db *d, const struct sweep_table *t, const char *description,
		  struct ss_error *err)
{
	struct sql q = { 0 };
	sqlite3_stmt *st = NULL;
	char buf[160];
	int rc;

	add(&q, "CREATE TABLE sweep (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
		"CREATE TABLE points (point INTEGER PRIMARY KEY");
	for (size_t a = 0; a < t->n_axes; a++) {
		add(&q, ", ");
		add_key(&q, t->axes[a].key);
	}
	add(&q, ");CREATE TABLE runs (point INTEGER NOT NULL, seed INTEGER NOT NULL");
	for (int m = 0; m < SWM_COUNT; m++) {
		snprintf(buf, sizeof(buf), ", %s REAL", sweep_metric_name((enum sweep_metric)m));
		add(&q, buf);
	}
	add(&q, ", wall_s REAL, PRIMARY KEY (point, seed));"
		"CREATE TABLE aggregates (point INTEGER PRIMARY KEY");
	for (size_t a = 0; a < t->n_axes; a++) {
		add(&q, ", ");
		add_key(&q, t->axes[a].key);
	}
	add(&q, ", seeds INTEGER NOT NULL");
	for (int m = 0; m < SWM_COUNT; m++) {
		const char *n = sweep_metric_name((enum sweep_metric)m);

		snprintf(buf, sizeof(buf), ", %s_mean REAL, %s_ci95 REAL", n, n);
		add(&q, buf);
	}
	add(&q, ");CREATE VIEW runs_by_point AS SELECT * FROM points JOIN runs USING (point);");
	if (q.oom) {
		free(q.s);
		return ss_error_set(err, -ENOMEM, d->s.path, 0, "out of memory");
	}
	rc = exec(d, "BEGIN", err);
	if (!rc)
		rc = exec(d, q.s, err);
	free(q.s);
	if (rc)
		goto out;
	if (sqlite3_prepare_v2(d->s.db, "INSERT INTO sweep (key, value) VALUES"
			       " ('description', ?1), ('keys', ?2)", -1, &st, NULL) != SQLITE_OK) {
		rc = db_fail(d, err, "insert sweep");
		goto out;
	}
	{
		struct sql keys = { 0 };

		for (size_t a = 0; a < t->n_axes; a++) {
			add(&keys, a ? "," : "");
			add(&keys, t->axes[a].key);
		}
		if (keys.oom || !keys.s)
			add(&keys, "");
		if (keys.oom) {
			free(keys.s);
			rc = ss_error_set(err, -ENOMEM, d->s.path, 0, "out of memory");
			goto out;
		}
		if (sqlite3_bind_text(st, 1, description, -1, SQLITE_STATIC) != SQLITE_OK ||
		    sqlite3_bind_text(st, 2, keys.s, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
		    sqlite3_step(st) != SQLITE_DONE)
			rc = db_fail(d, err, "insert sweep");
		free(keys.s);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc)
		goto out;
	/* the points */
	q = (struct sql){ 0 };
	add(&q, "INSERT INTO points VALUES (?1");
	for (size_t a = 0; a < t->n_axes; a++) {
		snprintf(buf, sizeof(buf), ", ?%zu", a + 2);
		add(&q, buf);
	}
	add(&q, ")");
	if (q.oom || sqlite3_prepare_v2(d->s.db, q.s, -1, &st, NULL) != SQLITE_OK) {
		free(q.s);
		rc = q.oom ? ss_error_set(err, -ENOMEM, d->s.path, 0, "out of memory") :
			     db_fail(d, err, "insert points");
		goto out;
	}
	free(q.s);
	for (size_t p = 0; p < t->n_points && !rc; p++) {
		int b = sqlite3_bind_int64(st, 1, (sqlite3_int64)p);

		for (size_t a = 0; a < t->n_axes; a++)
			b |= bind_value(st, (int)a + 2, t->axes[a].values[sweep_point_value(t, p, a)]);
		if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
			rc = db_fail(d, err, "insert points");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (!rc)
		rc = exec(d, "COMMIT", err);
out:
	sqlite3_finalize(st);
	if (rc)
		sqlite3_exec(d->s.db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

int sweep_db_open(struct sweep_db **out, const char *path, const struct sweep_table *t,
		  const char *description, struct ss_error *err)
{
	struct sweep_db *d = calloc(1, sizeof(*d));
	struct sql q = { 0 };
	char *stored = NULL, sql[128], buf[32];
	int rc;

	*out = NULL;
	if (!d)
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	rc = ss_db_open(&d->s, path, NULL, SS_DB_CREATE, &sweep_db_kind, err);
	if (rc)
		goto fail;
	rc = check_kind(d, err);
	if (rc)
		goto fail;
	snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; PRAGMA user_version = %d;",
		 SWEEP_DB_APP_ID, SWEEP_DB_VERSION);
	rc = exec(d, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;", err);
	if (!rc)
		rc = exec(d, sql, err);
	if (!rc)
		rc = exec(d, "CREATE TABLE IF NOT EXISTS sweep (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
			  err);
	if (!rc)
		rc = stored_description(d, &stored, err);
	if (rc)
		goto fail;
	if (!stored[0]) {
		/* the empty sweep table goes: create() makes every table at once */
		rc = exec(d, "DROP TABLE sweep", err);
		if (!rc)
			rc = create(d, t, description, err);
	} else if (strcmp(stored, description)) {
		rc = ss_error_set(err, -ESTALE, path, 0,
				  "holds a sweep of other options (%s); expected the same grid and run options (%s), or another --out",
				  stored, description);
	}
	if (rc)
		goto fail;
	add(&q, "INSERT OR REPLACE INTO runs VALUES (?1, ?2");
	for (int m = 0; m < SWM_COUNT + 1; m++) {
		snprintf(buf, sizeof(buf), ", ?%d", m + 3);
		add(&q, buf);
	}
	add(&q, ")");
	if (q.oom || sqlite3_prepare_v2(d->s.db, q.s, -1, &d->insert, NULL) != SQLITE_OK) {
		rc = q.oom ? ss_error_set(err, -ENOMEM, path, 0, "out of memory") :
			     db_fail(d, err, "sqlite3_prepare_v2 (runs)");
		goto fail;
	}
	free(q.s);
	free(stored);
	*out = d;
	return 0;
fail:
	free(q.s);
	free(stored);
	sweep_db_close(d);
	return rc;
}

void sweep_db_close(struct sweep_db *d)
{
	if (!d)
		return;
	sqlite3_finalize(d->insert);
	ss_db_close(&d->s, NULL);
	free(d);
}

int sweep_db_load(struct sweep_db *d, const struct sweep_table *t, double *values, bool *done,
		  size_t *n_done, struct ss_error *err)
{
	struct sql q = { 0 };
	sqlite3_stmt *st = NULL;
	int rc = 0, s;

	ss_db_budget_reset(&d->s);
	*n_done = 0;
	add(&q, "SELECT point, seed");
	for (int m = 0; m < SWM_COUNT; m++) {
		add(&q, ", ");
		add(&q, sweep_metric_name((enum sweep_metric)m));
	}
	add(&q, " FROM runs WHERE seed >= ?1 AND seed < ?2");
	if (q.oom) {
		free(q.s);
		return ss_error_set(err, -ENOMEM, d->s.path, 0, "out of memory");
	}
	if (sqlite3_prepare_v2(d->s.db, q.s, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 1, t->seed0) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 2, t->seed0 + (int64_t)t->n_seeds) != SQLITE_OK) {
		rc = db_fail(d, err, "select runs");
		goto out;
	}
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t p = sqlite3_column_int64(st, 0), seed = sqlite3_column_int64(st, 1);
		size_t r;

		/* a text or blob read as a number is 0: a tampered file would
		 * be aggregated as zeros (issue 34 §5) */
		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER ||
		    sqlite3_column_type(st, 1) != SQLITE_INTEGER) {
			rc = ss_error_set(err, -EINVAL, d->s.path, 0,
					  "runs: point '%.40s', seed '%.40s': expected integers",
					  (const char *)sqlite3_column_text(st, 0),
					  (const char *)sqlite3_column_text(st, 1));
			goto out;
		}
		for (int m = 0; m < SWM_COUNT; m++) {
			int ty = sqlite3_column_type(st, m + 2);

			if (ty != SQLITE_NULL && ty != SQLITE_FLOAT && ty != SQLITE_INTEGER) {
				rc = ss_error_set(err, -EINVAL, d->s.path, 0,
						  "runs: point %lld, seed %lld: %s is '%.40s', expected a number or NULL",
						  (long long)p, (long long)seed,
						  sweep_metric_name((enum sweep_metric)m),
						  (const char *)sqlite3_column_text(st, m + 2));
				goto out;
			}
		}
		if (p < 0 || (uint64_t)p >= t->n_points) {
			rc = ss_error_set(err, -EINVAL, d->s.path, 0,
					  "runs: point %lld; expected 0..%zu", (long long)p,
					  t->n_points - 1);
			goto out;
		}
		r = (size_t)p * t->n_seeds + (size_t)(seed - t->seed0);
		for (int m = 0; m < SWM_COUNT; m++)
			values[r * SWM_COUNT + (size_t)m] =
				sqlite3_column_type(st, m + 2) == SQLITE_NULL ?
					NAN : sqlite3_column_double(st, m + 2);
		if (!done[r])
			(*n_done)++;
		done[r] = true;
	}
	if (s != SQLITE_DONE)
		rc = db_fail(d, err, "select runs");
out:
	free(q.s);
	sqlite3_finalize(st);
	return rc;
}

static int bind_real(sqlite3_stmt *st, int i, double v)
{
	return isfinite(v) ? sqlite3_bind_double(st, i, v) : sqlite3_bind_null(st, i);
}

int sweep_db_store(struct sweep_db *d, const struct sweep_table *t, size_t point, int64_t seed,
		   const double v[SWM_COUNT], double wall_s, struct ss_error *err)
{
	sqlite3_stmt *st = d->insert;
	int rc = SQLITE_OK, ret = 0;

	(void)t;
	ss_db_budget_reset(&d->s);
	rc |= sqlite3_bind_int64(st, 1, (sqlite3_int64)point);
	rc |= sqlite3_bind_int64(st, 2, seed);
	for (int m = 0; m < SWM_COUNT; m++)
		rc |= bind_real(st, m + 3, v[m]);
	rc |= bind_real(st, SWM_COUNT + 3, wall_s);
	if (rc != SQLITE_OK)
		ret = db_fail(d, err, "sqlite3_bind (runs)");
	else if (sqlite3_step(st) != SQLITE_DONE)
		ret = db_fail(d, err, "insert runs");
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

int sweep_db_aggregate(struct sweep_db *d, const struct sweep_table *t, struct ss_error *err)
{
	struct sql q = { 0 };
	sqlite3_stmt *st = NULL;
	char buf[32];
	int rc, col;

	ss_db_budget_reset(&d->s);
	add(&q, "INSERT INTO aggregates VALUES (?1");
	for (size_t i = 0; i < t->n_axes + 1 + 2 * SWM_COUNT; i++) {
		snprintf(buf, sizeof(buf), ", ?%zu", i + 2);
		add(&q, buf);
	}
	add(&q, ")");
	if (q.oom) {
		free(q.s);
		return ss_error_set(err, -ENOMEM, d->s.path, 0, "out of memory");
	}
	rc = exec(d, "BEGIN; DELETE FROM aggregates;", err);
	if (!rc && sqlite3_prepare_v2(d->s.db, q.s, -1, &st, NULL) != SQLITE_OK)
		rc = db_fail(d, err, "insert aggregates");
	for (size_t p = 0; p < t->n_points && !rc; p++) {
		struct sweep_stat s[SWM_COUNT];
		uint32_t n = sweep_point_stats(t, p, s);
		int b;

		if (!n)
			continue;
		b = sqlite3_bind_int64(st, 1, (sqlite3_int64)p);
		col = 2;
		for (size_t a = 0; a < t->n_axes; a++)
			b |= bind_value(st, col++, t->axes[a].values[sweep_point_value(t, p, a)]);
		b |= sqlite3_bind_int(st, col++, (int)n);
		for (int m = 0; m < SWM_COUNT; m++) {
			b |= bind_real(st, col++, s[m].mean);
			b |= bind_real(st, col++, s[m].ci95);
		}
		if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
			rc = db_fail(d, err, "insert aggregates");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	free(q.s);
	if (!rc)
		rc = exec(d, "COMMIT", err);
	else
		sqlite3_exec(d->s.db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}
