/* servesim — the calibration store (SQLite).
 *
 * Schema, version 1 (docs/calibration.md has the full description):
 *
 *   series (id, op, device, device_raw, dtype, variant, driver, source)
 *       one row per distinct set of labels, UNIQUE over all of them, with
 *       an index on (device, op);
 *   points (id, series_id, m .. tp, mean_ms .. std_ms, count, energy_j,
 *           power_w, clock_mhz, source_line)
 *       one row per measurement, numbers only; id is the insertion order;
 *       NULL stands for CAL_NA (shapes) and NAN (statistics);
 *   measurements
 *       a view joining the two: one column per struct cal_meas field.
 *
 * Why labels live apart from the numbers: an imported table repeats the
 * same op, device, dtype, kernel name and source file on every row.  In
 * one flat table those strings are ~70 of ~130 bytes per row and the
 * shipped store would be about twice as large (measured: 36 MB flat vs
 * 19 MB normalized for the same 233k rows).  A query reads the few
 * matching series into memory, then scans points in id order with
 * `series_id IN (...)`; a full scan of the points table costs less than
 * an index on series_id would (about 12 bytes per row) while the store
 * has a few hundred thousand rows.
 *
 * Transactions are savepoints, so they nest: an import opens one around
 * its file, and a caller importing many files opens one around them all.
 */
#include "store.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <csv.h>

#include "ss-sqlite.h"

/* ---- operators ---------------------------------------------------------- */

static const char *const op_names[CAL_OP_COUNT] = {
	[CAL_GEMM] = "gemm",
	[CAL_ATTN_PREFILL] = "attn_prefill",
	[CAL_ATTN_DECODE] = "attn_decode",
	[CAL_RMSNORM] = "rmsnorm",
	[CAL_LAYERNORM] = "layernorm",
	[CAL_ROPE] = "rope",
	[CAL_ACTIVATION] = "activation",
	[CAL_RESIDUAL_ADD] = "residual_add",
	[CAL_EMBEDDING] = "embedding",
	[CAL_ALL_REDUCE] = "all_reduce",
	[CAL_ALL_GATHER] = "all_gather",
	[CAL_SEND_RECV] = "send_recv",
	[CAL_HOST_OVERHEAD] = "host_overhead",
	[CAL_KV_COPY] = "kv_copy",
	[CAL_LORA] = "lora",
};

const char *cal_op_name(enum cal_op op)
{
	return (unsigned)op < CAL_OP_COUNT ? op_names[op] : "?";
}

int cal_op_from_name(const char *name, enum cal_op *op)
{
	for (int i = 0; i < CAL_OP_COUNT; i++) {
		if (!strcmp(name, op_names[i])) {
			*op = (enum cal_op)i;
			return 0;
		}
	}
	return -EINVAL;
}

void cal_meas_init(struct cal_meas *m, enum cal_op op)
{
	memset(m, 0, sizeof(*m));
	m->op = op;
	m->m = m->n = m->k = CAL_NA;
	m->batch = m->q_len = m->kv_len = CAL_NA;
	m->heads = m->kv_heads = m->head_dim = CAL_NA;
	m->tokens = m->width = CAL_NA;
	m->num_gpus = m->bytes = m->tp = CAL_NA;
	m->mean_ms = m->median_ms = m->min_ms = m->max_ms = m->std_ms = NAN;
	m->energy_j = m->power_w = m->clock_mhz = NAN;
}

/* ---- the numeric columns, in struct cal_meas order ---------------------- */

enum col_kind {
	COL_SHAPE,   /* int64, NULL <-> CAL_NA */
	COL_STAT,    /* double, NULL <-> NAN */
	COL_COUNT,   /* int64, NOT NULL */
};

static const struct point_col {
	const char *name;
	enum col_kind kind;
	size_t off;
} point_cols[] = {
#define SHAPE(f) { #f, COL_SHAPE, offsetof(struct cal_meas, f) }
#define STAT(f) { #f, COL_STAT, offsetof(struct cal_meas, f) }
	SHAPE(m), SHAPE(n), SHAPE(k), SHAPE(batch), SHAPE(q_len), SHAPE(kv_len),
	SHAPE(heads), SHAPE(kv_heads), SHAPE(head_dim), SHAPE(tokens), SHAPE(width),
	SHAPE(num_gpus), SHAPE(bytes), SHAPE(tp),
	STAT(mean_ms), STAT(median_ms), STAT(min_ms), STAT(max_ms), STAT(std_ms),
	{ "count", COL_COUNT, offsetof(struct cal_meas, count) },
	STAT(energy_j), STAT(power_w), STAT(clock_mhz),
#undef SHAPE
#undef STAT
};

#define N_POINT_COLS (sizeof(point_cols) / sizeof(point_cols[0]))

/* The label columns, in series table order. */
enum { L_OP, L_DEVICE, L_DEVICE_RAW, L_DTYPE, L_VARIANT, L_DRIVER, L_SOURCE, L_N };
static const char *const label_cols[L_N] = {
	"op", "device", "device_raw", "dtype", "variant", "driver", "source",
};

/* ---- the store ---------------------------------------------------------- */

/* Recently used series, most recent first: an import cycles through a few
 * (ten for a Vidur mlp.csv line), so a short move-to-front list finds
 * nearly every row's series without a query. */
#define SERIES_MRU 16

/* One series: the labels its measurements share. */
struct series {
	int64_t id;
	enum cal_op op;
	char device[64];
	char device_raw[96];
	char dtype[16];
	char variant[64];
	char driver[32];
	char source[256];
};

struct cal_store {
	/* The connection; each statement gets the whole instruction budget
	 * (reset by prepare()): a hostile store cannot make a query run
	 * forever. */
	struct ss_db sdb;
	bool writable;
	int depth;                      /* open savepoints */
	sqlite3_stmt *ins_point;
	sqlite3_stmt *find_series;
	sqlite3_stmt *ins_series;
	struct series mru[SERIES_MRU];
	int n_mru;
};

/* Readers wait this long for a writer (an import commits in well under a
 * second); writers wait longer for each other.  A lock held longer is
 * reported (ss_db_fail names it), never waited out in silence. */
static const struct ss_db_kind cal_store_kind_read = {
	.noun = "calibration store",
	.expect = "a calibration store file",
	.busy_ms = 1000,
};
static const struct ss_db_kind cal_store_kind_write = {
	.noun = "calibration store",
	.expect = "a calibration store file",
	.busy_ms = 5000,
};

/* Error "PATH: WHAT: sqlite's message", or what a lock or the work bound
 * means for the user. */
static int db_error(struct cal_store *s, int rc, struct ss_error *err, const char *what)
{
	return ss_db_fail(&s->sdb, rc, what, err);
}

static int exec(struct cal_store *s, const char *sql, struct ss_error *err, const char *what)
{
	int rc = sqlite3_exec(s->sdb.db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : db_error(s, rc, err, what);
}

/* An integer PRAGMA's value. */
static int pragma_int(struct cal_store *s, const char *sql, int64_t *out, int *sqlite_rc)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->sdb.db, sql, -1, &st, NULL);

	ss_db_budget_reset(&s->sdb);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			*out = sqlite3_column_int64(st, 0);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(st);
	*sqlite_rc = rc;
	return rc == SQLITE_OK ? 0 : -1;
}

static int prepare(struct cal_store *s, const char *sql, sqlite3_stmt **st, struct ss_error *err);

static int create_schema(struct cal_store *s, struct ss_error *err)
{
	char sql[4096];
	size_t o = 0;
	int rc;

#define ADD(...) (o += (size_t)snprintf(sql + o, sizeof(sql) - o, __VA_ARGS__))
	ADD("BEGIN;"
	    "CREATE TABLE series (id INTEGER PRIMARY KEY");
	for (int i = 0; i < L_N; i++)
		ADD(", %s TEXT NOT NULL", label_cols[i]);
	ADD(", UNIQUE (op, device, device_raw, dtype, variant, driver, source));"
	    "CREATE INDEX series_device_op ON series (device, op);"
	    "CREATE TABLE points (id INTEGER PRIMARY KEY,"
	    " series_id INTEGER NOT NULL REFERENCES series (id)");
	for (size_t i = 0; i < N_POINT_COLS; i++)
		ADD(", %s %s", point_cols[i].name,
		    point_cols[i].kind == COL_STAT ? "REAL" :
		    point_cols[i].kind == COL_COUNT ? "INTEGER NOT NULL" : "INTEGER");
	ADD(", source_line INTEGER NOT NULL);"
	    "CREATE INDEX points_series ON points (series_id);"
	    /* empty unless measurements carry energy: lean loads ask it
	     * whether to read the energy columns at all */
	    "CREATE INDEX points_energy ON points (series_id)"
	    " WHERE energy_j IS NOT NULL OR power_w IS NOT NULL;"
	    "CREATE VIEW measurements AS SELECT p.id AS id, s.op AS op, s.device AS device,"
	    " s.device_raw AS device_raw, s.dtype AS dtype, s.variant AS variant");
	for (size_t i = 0; i < N_POINT_COLS; i++)
		ADD(", p.%s AS %s", point_cols[i].name, point_cols[i].name);
	ADD(", s.driver AS driver, s.source AS source, p.source_line AS source_line"
	    " FROM points p JOIN series s ON s.id = p.series_id;"
	    "PRAGMA application_id = %d;"
	    "PRAGMA user_version = %d;"
	    "COMMIT;", CAL_APPLICATION_ID, CAL_SCHEMA_VERSION);
#undef ADD
	if (o >= sizeof(sql))
		return ss_error_set(err, -EOVERFLOW, s->sdb.path, 0, "schema text too long");
	rc = sqlite3_exec(s->sdb.db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		int ret = db_error(s, rc, err, "cannot create the calibration store schema");

		sqlite3_exec(s->sdb.db, "ROLLBACK", NULL, NULL, NULL);
		return ret;
	}
	return 0;
}

/* The objects this code reads must be what create_schema() made: plain
 * tables series and points with the columns we read.  A view in their
 * place (a recursive one reads forever), a virtual table or a missing
 * column is a store of another schema, refused before any query runs. */
static int check_schema(struct cal_store *s, struct ss_error *err)
{
	static const char *const tables[] = { "series", "points" };
	char sql[2048];
	size_t o = 0;
	sqlite3_stmt *st = NULL;
	int rc;

	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		const char *type, *text;

		rc = prepare(s, "SELECT type, sql FROM sqlite_master WHERE name = ?1 COLLATE NOCASE",
			     &st, err);
		if (rc)
			return rc;
		rc = sqlite3_bind_text(st, 1, tables[i], -1, SQLITE_STATIC);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		if (rc == SQLITE_DONE) {
			rc = ss_error_set(err, -EINVAL, s->sdb.path, 0,
					  "not a servesim calibration store of schema version %d: no table '%s'",
					  CAL_SCHEMA_VERSION, tables[i]);
			goto out;
		}
		if (rc != SQLITE_ROW) {
			rc = db_error(s, rc, err, "cannot read the schema");
			goto out;
		}
		type = (const char *)sqlite3_column_text(st, 0);
		text = (const char *)sqlite3_column_text(st, 1);
		if (!type || strcmp(type, "table") != 0 || !text ||
		    sqlite3_strnicmp(text, "CREATE TABLE", 12) != 0) {
			rc = ss_error_set(err, -EINVAL, s->sdb.path, 0,
					  "not a servesim calibration store of schema version %d: '%s' is %s %s, expected a table",
					  CAL_SCHEMA_VERSION, tables[i],
					  type && type[0] == 'i' ? "an" : "a",
					  type && strcmp(type, "table") ? type : "virtual table");
			goto out;
		}
		sqlite3_finalize(st);
		st = NULL;
	}
	/* Every column we read, without reading a row. */
	o += (size_t)snprintf(sql + o, sizeof(sql) - o, "SELECT s.id");
	for (int i = 0; i < L_N; i++)
		o += (size_t)snprintf(sql + o, sizeof(sql) - o, ", s.%s", label_cols[i]);
	o += (size_t)snprintf(sql + o, sizeof(sql) - o, ", p.id, p.series_id, p.source_line");
	for (size_t i = 0; i < N_POINT_COLS; i++)
		o += (size_t)snprintf(sql + o, sizeof(sql) - o, ", p.%s", point_cols[i].name);
	snprintf(sql + o, sizeof(sql) - o, " FROM series s, points p LIMIT 0");
	rc = sqlite3_prepare_v2(s->sdb.db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK) {
		rc = ss_error_set(err, -EINVAL, s->sdb.path, 0,
				  "not a servesim calibration store of schema version %d: %s",
				  CAL_SCHEMA_VERSION, sqlite3_errmsg(s->sdb.db));
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

/* Check the database is a servesim calibration store of our version, or an
 * empty database that CAL_OPEN_CREATE may initialize. */
static int check_identity(struct cal_store *s, int flags, struct ss_error *err)
{
	int64_t app_id = 0, version = 0, n_objects = 0;
	int rc;

	if (pragma_int(s, "PRAGMA application_id", &app_id, &rc)) {
		if ((rc & 0xff) == SQLITE_NOTADB)
			return ss_error_set(err, -EINVAL, s->sdb.path, 0,
					    "not a servesim calibration store: not an SQLite database (%s)",
					    sqlite3_errmsg(s->sdb.db));
		return db_error(s, rc, err, "cannot read the database header");
	}
	if (pragma_int(s, "PRAGMA user_version", &version, &rc) ||
	    pragma_int(s, "SELECT count(*) FROM sqlite_master", &n_objects, &rc))
		return db_error(s, rc, err, "cannot read the database header");
	if (app_id == 0 && n_objects == 0 && version == 0) {
		if (flags == CAL_OPEN_CREATE)
			return create_schema(s, err);
		return ss_error_set(err, -EINVAL, s->sdb.path, 0,
				    "not a servesim calibration store (an empty database; expected application_id 0x%08x)",
				    CAL_APPLICATION_ID);
	}
	if (app_id != CAL_APPLICATION_ID)
		return ss_error_set(err, -EINVAL, s->sdb.path, 0,
				    "not a servesim calibration store (application_id 0x%08x, expected 0x%08x)",
				    (unsigned)app_id, CAL_APPLICATION_ID);
	if (version != CAL_SCHEMA_VERSION)
		return ss_error_set(err, -EINVAL, s->sdb.path, 0,
				    "calibration store schema version %lld, this servesim reads version %d",
				    (long long)version, CAL_SCHEMA_VERSION);
	return check_schema(s, err);
}

static int prepare(struct cal_store *s, const char *sql, sqlite3_stmt **st, struct ss_error *err)
{
	int rc = sqlite3_prepare_v2(s->sdb.db, sql, -1, st, NULL);

	ss_db_budget_reset(&s->sdb);   /* each statement gets the whole work bound */

	return rc == SQLITE_OK ? 0 : db_error(s, rc, err, "cannot prepare a statement");
}

static int prepare_writes(struct cal_store *s, struct ss_error *err)
{
	char sql[2048];
	size_t o = 0;
	int rc;

	o += (size_t)snprintf(sql + o, sizeof(sql) - o, "INSERT INTO points (series_id");
	for (size_t i = 0; i < N_POINT_COLS; i++)
		o += (size_t)snprintf(sql + o, sizeof(sql) - o, ", %s", point_cols[i].name);
	o += (size_t)snprintf(sql + o, sizeof(sql) - o, ", source_line) VALUES (?");
	for (size_t i = 0; i <= N_POINT_COLS; i++)
		o += (size_t)snprintf(sql + o, sizeof(sql) - o, ", ?");
	snprintf(sql + o, sizeof(sql) - o, ")");
	rc = prepare(s, sql, &s->ins_point, err);
	if (!rc)
		rc = prepare(s, "SELECT id FROM series WHERE op = ?1 AND device = ?2 AND device_raw = ?3"
			     " AND dtype = ?4 AND variant = ?5 AND driver = ?6 AND source = ?7",
			     &s->find_series, err);
	if (!rc)
		rc = prepare(s, "INSERT INTO series (op, device, device_raw, dtype, variant, driver, source)"
			     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", &s->ins_series, err);
	return rc;
}

int cal_store_open(struct cal_store **out, const char *path, int flags, struct ss_error *err)
{
	struct cal_store *s;
	int rc;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	s->writable = flags != CAL_OPEN_READONLY;
	/* A store is data, not code (ss-sqlite.h): trusted_schema off,
	 * defensive, an instruction budget, and a read-only handle refuses
	 * every write (query_only).  The connection is NOMUTEX: a store
	 * handle belongs to one simulation, used by one thread at a time;
	 * without the per-call connection mutex, reading a device's ~80k rows
	 * takes about half the time. */
	rc = ss_db_open(&s->sdb, path, NULL,
			flags == CAL_OPEN_CREATE ? SS_DB_CREATE :
			s->writable		 ? SS_DB_WRITE : SS_DB_READ,
			s->writable ? &cal_store_kind_write : &cal_store_kind_read, err);
	if (rc)
		goto fail;
	/* Loading a device's tables reads most of the file: map it rather than
	 * copy it page by page (a hint; SQLite ignores it where unsupported). */
	rc = sqlite3_exec(s->sdb.db, "PRAGMA mmap_size = 268435456", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		rc = db_error(s, rc, err, "cannot configure the database connection");
		goto fail;
	}
	rc = check_identity(s, flags, err);
	if (!rc && s->writable)
		rc = prepare_writes(s, err);
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	cal_store_close(s);
	return rc;
}

void cal_store_close(struct cal_store *s)
{
	if (!s)
		return;
	if (s->depth > 0)
		sqlite3_exec(s->sdb.db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_finalize(s->ins_point);
	sqlite3_finalize(s->find_series);
	sqlite3_finalize(s->ins_series);
	ss_db_close(&s->sdb, NULL);
	free(s);
}

int cal_store_begin(struct cal_store *s, struct ss_error *err)
{
	/* The outermost level takes the write lock now (IMMEDIATE): a
	 * deferred transaction that reads first and then writes meets a
	 * concurrent writer with SQLITE_BUSY at once, without the busy
	 * timeout's wait (two imports into one store, issue 34 §5).  Inner
	 * levels are savepoints. */
	int rc = exec(s, s->depth ? "SAVEPOINT cal" : "BEGIN IMMEDIATE", err,
		      "cannot begin a transaction");

	if (!rc)
		s->depth++;
	return rc;
}

int cal_store_commit(struct cal_store *s, struct ss_error *err)
{
	int rc;

	if (s->depth == 0)
		return ss_error_set(err, -EINVAL, s->sdb.path, 0, "commit without a transaction");
	rc = exec(s, s->depth == 1 ? "COMMIT" : "RELEASE cal", err, "cannot commit");
	if (!rc)
		s->depth--;
	return rc;
}

void cal_store_rollback(struct cal_store *s)
{
	if (!s || s->depth == 0)
		return;
	/* The outermost level is a real ROLLBACK: ROLLBACK TO + RELEASE
	 * would commit an empty write transaction and bump the file's
	 * change counter, and a failed import must leave the file byte for
	 * byte as it was.  Inner levels: ROLLBACK TO keeps the savepoint
	 * open, RELEASE closes it.  (These do not fail short of a broken
	 * connection; cal_store_close still rolls back whatever is open.) */
	if (s->depth == 1) {
		sqlite3_exec(s->sdb.db, "ROLLBACK", NULL, NULL, NULL);
	} else {
		sqlite3_exec(s->sdb.db, "ROLLBACK TO cal", NULL, NULL, NULL);
		sqlite3_exec(s->sdb.db, "RELEASE cal", NULL, NULL, NULL);
	}
	s->depth--;
	/* Series created inside the savepoint are gone. */
	s->n_mru = 0;
}

int cal_store_vacuum(struct cal_store *s, struct ss_error *err)
{
	if (s->depth)
		return ss_error_set(err, -EBUSY, s->sdb.path, 0, "cannot vacuum inside a transaction");
	return exec(s, "VACUUM", err, "cannot vacuum");
}

const char *cal_store_path(const struct cal_store *s)
{
	return s->sdb.path;
}

/* ---- insert ------------------------------------------------------------- */

static bool key_eq(const struct series *k, const struct cal_meas *m)
{
	return k->op == m->op && !strcmp(k->variant, m->variant) &&
	       !strcmp(k->source, m->source) && !strcmp(k->device, m->device) &&
	       !strcmp(k->dtype, m->dtype) && !strcmp(k->device_raw, m->device_raw) &&
	       !strcmp(k->driver, m->driver);
}

static int bind_labels(sqlite3_stmt *st, const struct cal_meas *m)
{
	const char *v[L_N] = {
		[L_OP] = cal_op_name(m->op), [L_DEVICE] = m->device,
		[L_DEVICE_RAW] = m->device_raw, [L_DTYPE] = m->dtype,
		[L_VARIANT] = m->variant, [L_DRIVER] = m->driver, [L_SOURCE] = m->source,
	};
	int rc = SQLITE_OK;

	for (int i = 0; i < L_N && rc == SQLITE_OK; i++)
		rc = sqlite3_bind_text(st, i + 1, v[i], -1, SQLITE_STATIC);
	return rc;
}

static int series_id(struct cal_store *s, const struct cal_meas *m, int64_t *id,
		     struct ss_error *err)
{
	struct series k;
	int i, rc;

	for (i = 0; i < s->n_mru; i++)
		if (key_eq(&s->mru[i], m))
			break;
	if (i < s->n_mru) {
		k = s->mru[i];
	} else {
		sqlite3_reset(s->find_series);
		rc = bind_labels(s->find_series, m);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(s->find_series);
		if (rc == SQLITE_ROW) {
			k.id = sqlite3_column_int64(s->find_series, 0);
		} else if (rc == SQLITE_DONE) {
			sqlite3_reset(s->ins_series);
			rc = bind_labels(s->ins_series, m);
			if (rc == SQLITE_OK)
				rc = sqlite3_step(s->ins_series);
			if (rc != SQLITE_DONE)
				return db_error(s, rc, err, "cannot insert a series");
			k.id = sqlite3_last_insert_rowid(s->sdb.db);
		} else {
			return db_error(s, rc, err, "cannot look up a series");
		}
		sqlite3_reset(s->find_series);
		k.op = m->op;
		memcpy(k.device, m->device, sizeof(k.device));
		memcpy(k.device_raw, m->device_raw, sizeof(k.device_raw));
		memcpy(k.dtype, m->dtype, sizeof(k.dtype));
		memcpy(k.variant, m->variant, sizeof(k.variant));
		memcpy(k.driver, m->driver, sizeof(k.driver));
		memcpy(k.source, m->source, sizeof(k.source));
		if (s->n_mru < SERIES_MRU)
			s->n_mru++;
		i = s->n_mru - 1;
	}
	/* move to front */
	memmove(&s->mru[1], &s->mru[0], (size_t)i * sizeof(s->mru[0]));
	s->mru[0] = k;
	*id = k.id;
	return 0;
}

static bool terminated(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}

/* A measurement's mean latency: finite and > 0, but for the host
 * overhead, a step's wall time less its operators' (calibrate run),
 * which is >= 0 (clamped there: nothing left beyond the kernels). */
static bool latency_ok(const struct cal_meas *m)
{
	return isfinite(m->mean_ms) &&
	       (m->op == CAL_HOST_OVERHEAD ? m->mean_ms >= 0 : m->mean_ms > 0);
}

static int check_meas(struct cal_store *s, const struct cal_meas *m, struct ss_error *err)
{
	const char *file = m->source[0] && terminated(m->source, sizeof(m->source)) ? m->source : s->sdb.path;
	long line = m->source[0] ? (long)m->source_line : 0;

	if ((unsigned)m->op >= CAL_OP_COUNT)
		return ss_error_set(err, -EINVAL, file, line, "operator %d out of range", (int)m->op);
	if (!terminated(m->device, sizeof(m->device)) ||
	    !terminated(m->device_raw, sizeof(m->device_raw)) ||
	    !terminated(m->dtype, sizeof(m->dtype)) ||
	    !terminated(m->variant, sizeof(m->variant)) ||
	    !terminated(m->driver, sizeof(m->driver)) ||
	    !terminated(m->source, sizeof(m->source)))
		return ss_error_set(err, -EINVAL, file, line, "unterminated text field");
	for (size_t i = 0; i < N_POINT_COLS; i++) {
		const char *p = (const char *)m + point_cols[i].off;
		int64_t iv;
		double dv;

		switch (point_cols[i].kind) {
		case COL_SHAPE:
			memcpy(&iv, p, sizeof(iv));
			if (iv < 0 && iv != CAL_NA)
				return ss_error_set(err, -EINVAL, file, line,
						    "%s = %lld (expected >= 0, or CAL_NA)",
						    point_cols[i].name, (long long)iv);
			break;
		case COL_COUNT:
			memcpy(&iv, p, sizeof(iv));
			if (iv < 0)
				return ss_error_set(err, -EINVAL, file, line,
						    "%s = %lld (expected >= 0)",
						    point_cols[i].name, (long long)iv);
			break;
		case COL_STAT:
			memcpy(&dv, p, sizeof(dv));
			if (!isnan(dv) && (!isfinite(dv) || dv < 0))
				return ss_error_set(err, -EINVAL, file, line,
						    "%s = %g (expected a finite value >= 0, or NAN)",
						    point_cols[i].name, dv);
			break;
		}
	}
	if (isnan(m->mean_ms))
		return ss_error_set(err, -EINVAL, file, line,
				    "mean_ms missing (every measurement needs its mean latency)");
	if (!latency_ok(m))
		return ss_error_set(err, -EINVAL, file, line,
				    "mean_ms = %g (expected a latency > 0)", m->mean_ms);
	if (m->source_line < 0)
		return ss_error_set(err, -EINVAL, file, 0, "source_line %lld (expected >= 0)",
				    (long long)m->source_line);
	return 0;
}

int cal_store_insert(struct cal_store *s, const struct cal_meas *m, struct ss_error *err)
{
	sqlite3_stmt *st = s->ins_point;
	int64_t sid;
	int rc;

	if (!s->writable)
		return ss_error_set(err, -EROFS, s->sdb.path, 0, "calibration store opened read-only");
	rc = check_meas(s, m, err);
	if (!rc)
		rc = series_id(s, m, &sid, err);
	if (rc)
		return rc;
	sqlite3_reset(st);
	rc = sqlite3_bind_int64(st, 1, sid);
	for (size_t i = 0; i < N_POINT_COLS && rc == SQLITE_OK; i++) {
		const char *p = (const char *)m + point_cols[i].off;
		int idx = (int)i + 2;
		int64_t iv;
		double dv;

		switch (point_cols[i].kind) {
		case COL_SHAPE:
			memcpy(&iv, p, sizeof(iv));
			rc = iv == CAL_NA ? sqlite3_bind_null(st, idx) : sqlite3_bind_int64(st, idx, iv);
			break;
		case COL_COUNT:
			memcpy(&iv, p, sizeof(iv));
			rc = sqlite3_bind_int64(st, idx, iv);
			break;
		case COL_STAT:
			memcpy(&dv, p, sizeof(dv));
			rc = isnan(dv) ? sqlite3_bind_null(st, idx) : sqlite3_bind_double(st, idx, dv);
			break;
		}
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, (int)N_POINT_COLS + 2, m->source_line);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return db_error(s, rc, err, "cannot insert a measurement");
	return 0;
}

/* ---- query -------------------------------------------------------------- */

static void copy_text(char *dst, size_t size, const unsigned char *src)
{
	snprintf(dst, size, "%s", src ? (const char *)src : "");
}

/* Bind the filter of the WHERE built by filter_sql(): ?1 device, ?2 op. */
static int bind_filter(sqlite3_stmt *st, const char *device, int op)
{
	int rc = device ? sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC)
			: sqlite3_bind_null(st, 1);

	if (rc == SQLITE_OK)
		rc = op >= 0 ? sqlite3_bind_text(st, 2, cal_op_name((enum cal_op)op), -1, SQLITE_STATIC)
			     : sqlite3_bind_null(st, 2);
	return rc;
}

#define SERIES_FILTER "(?1 IS NULL OR device = ?1) AND (?2 IS NULL OR op = ?2)"

static int check_filter(struct cal_store *s, int op, struct ss_error *err)
{
	if (op >= CAL_OP_COUNT || op < -1)
		return ss_error_set(err, -EINVAL, s->sdb.path, 0, "operator %d out of range", op);
	return 0;
}

/* The series matching the filter, by id. */
static int load_series(struct cal_store *s, const char *device, int op,
		       struct series **out, size_t *n_out, struct ss_error *err)
{
	struct series *v = NULL, *nv;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st = NULL;
	int rc;

	rc = prepare(s, "SELECT id, op, device, device_raw, dtype, variant, driver, source"
		     " FROM series WHERE " SERIES_FILTER " ORDER BY id", &st, err);
	if (rc)
		return rc;
	rc = bind_filter(st, device, op);
	while (rc == SQLITE_OK || rc == SQLITE_ROW) {
		struct series *r;
		const char *opname;

		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			break;
		opname = (const char *)sqlite3_column_text(st, 1);
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = SQLITE_NOMEM;
				break;
			}
			v = nv;
		}
		r = &v[n];
		r->id = sqlite3_column_int64(st, 0);
		if (!opname || cal_op_from_name(opname, &r->op)) {
			rc = ss_error_set(err, -EINVAL, s->sdb.path, 0,
					  "unknown operator '%s' in series %lld (written by a newer servesim?)",
					  opname ? opname : "", (long long)r->id);
			sqlite3_finalize(st);
			free(v);
			return rc;
		}
		copy_text(r->device, sizeof(r->device), sqlite3_column_text(st, 2));
		copy_text(r->device_raw, sizeof(r->device_raw), sqlite3_column_text(st, 3));
		copy_text(r->dtype, sizeof(r->dtype), sqlite3_column_text(st, 4));
		copy_text(r->variant, sizeof(r->variant), sqlite3_column_text(st, 5));
		copy_text(r->driver, sizeof(r->driver), sqlite3_column_text(st, 6));
		copy_text(r->source, sizeof(r->source), sqlite3_column_text(st, 7));
		n++;
	}
	if (rc != SQLITE_DONE) {
		rc = rc == SQLITE_NOMEM ? ss_error_set(err, -ENOMEM, s->sdb.path, 0, "out of memory")
					: db_error(s, rc, err, "cannot read the series table");
		sqlite3_finalize(st);
		free(v);
		return rc;
	}
	sqlite3_finalize(st);
	*out = v;
	*n_out = n;
	return 0;
}

static const struct series *find_row(const struct series *v, size_t n, int64_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].id < id)
			lo = mid + 1;
		else if (v[mid].id > id)
			hi = mid;
		else
			return &v[mid];
	}
	return NULL;
}

/* Lean queries read only what cost models use: the mean, the median, the
 * energy and power where any row of the query has them, and the shape
 * columns of the operator asked for (all shape columns when any operator
 * is); every other statistic comes back NAN, count 0, and an operator's
 * other shape fields CAL_NA. */
static bool shape_used(int op, size_t off)
{
#define F(f) (off == offsetof(struct cal_meas, f))
	if (F(tp))
		return true;
	switch (op) {
	case CAL_GEMM:
		return F(m) || F(n) || F(k);
	case CAL_ATTN_PREFILL:
	case CAL_ATTN_DECODE:
		return F(batch) || F(q_len) || F(kv_len) || F(heads) || F(kv_heads) || F(head_dim);
	case CAL_ALL_REDUCE:
	case CAL_ALL_GATHER:
	case CAL_SEND_RECV:
	case CAL_KV_COPY:
		return F(num_gpus) || F(bytes);
	case CAL_HOST_OVERHEAD:
		return F(batch);
	case CAL_LORA:
		return F(m) || F(n) || F(k) || F(batch) || F(width);
	case -1:
		return true;
	default:                /* element-wise kinds */
		return F(tokens) || F(width);
	}
#undef F
}

static bool lean_skip(size_t i, int op, bool with_energy)
{
	size_t off = point_cols[i].off;

	if (point_cols[i].kind == COL_SHAPE)
		return !shape_used(op, off);
	return point_cols[i].kind == COL_COUNT ||
	       (off != offsetof(struct cal_meas, mean_ms) &&
		off != offsetof(struct cal_meas, median_ms) &&
		!(with_energy && (off == offsetof(struct cal_meas, energy_j) ||
				  off == offsetof(struct cal_meas, power_w))));
}

/* Do any of the filtered series' measurements carry energy or power?
 * Answered from the partial index points_energy, so it costs nothing on
 * a store without energy; stores made before the index say yes. */
static int has_energy(struct cal_store *s, const char *device, int op, bool *out,
		      struct ss_error *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(s->sdb.db, "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE"
			       " type = 'index' AND name = 'points_energy')", -1, &st, NULL);
	if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 0) {
		sqlite3_finalize(st);
		*out = true;
		return 0;
	}
	sqlite3_finalize(st);
	rc = prepare(s, "SELECT EXISTS (SELECT 1 FROM points WHERE series_id IN"
		     " (SELECT id FROM series WHERE " SERIES_FILTER ")"
		     " AND (energy_j IS NOT NULL OR power_w IS NOT NULL))", &st, err);
	if (rc)
		return rc;
	rc = bind_filter(st, device, op);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		sqlite3_finalize(st);
		return db_error(s, rc, err, "cannot query measurements");
	}
	*out = sqlite3_column_int(st, 0) != 0;
	sqlite3_finalize(st);
	return 0;
}

/* A point query()'s row cannot be: its error, naming the store, the row
 * (its id, the statement's last column) and the column. */
static int bad_point(struct cal_store *s, sqlite3_stmt *st, const char *col,
		     struct ss_error *err, const char *fmt, ...)
{
	char what[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ss_error_set(err, -EINVAL, s->sdb.path, 0,
			    "measurement %lld: %s is %s (a damaged or edited store?)",
			    (long long)sqlite3_column_int64(st, sqlite3_column_count(st) - 1), col, what);
}

static int query(struct cal_store *s, const char *device, int op, bool lean, int64_t head_dim,
		 cal_visit_fn fn, void *ctx, struct ss_error *err)
{
	struct series *ser = NULL;
	const struct series *cur = NULL;
	struct cal_meas m;
	sqlite3_stmt *st = NULL;
	char sql[1024];
	size_t nser = 0, o = 0;
	bool with_energy = true;
	int rc, ret = 0, c;

	rc = check_filter(s, op, err);
	if (!rc)
		rc = load_series(s, device, op, &ser, &nser, err);
	if (rc || nser == 0)
		goto out;
	if (lean && (device || op >= 0)) {
		rc = has_energy(s, device, op, &with_energy, err);
		if (rc)
			goto out;
	}
	o += (size_t)snprintf(sql + o, sizeof(sql) - o, "SELECT series_id");
	for (size_t i = 0; i < N_POINT_COLS; i++)
		if (!(lean && lean_skip(i, op, with_energy)))
			o += (size_t)snprintf(sql + o, sizeof(sql) - o, ", %s", point_cols[i].name);
	/* Filtered: through the points_series index, series by series (each
	 * in insertion order), so a query reads only the rows it returns.
	 * Unfiltered: the whole table in insertion order. */
	snprintf(sql + o, sizeof(sql) - o, ", source_line, id FROM points%s%s%s",
		 device || op >= 0 ? " WHERE series_id IN (SELECT id FROM series WHERE "
				     SERIES_FILTER ")" : "",
		 head_dim > 0 ? (device || op >= 0 ? " AND" : " WHERE") : "",
		 head_dim > 0 ? " (head_dim IS NULL OR head_dim = ?9)" : "");
	o = strlen(sql);
	snprintf(sql + o, sizeof(sql) - o, "%s",
		 device || op >= 0 ? " ORDER BY series_id, id" : " ORDER BY id");
	rc = prepare(s, sql, &st, err);
	if (rc)
		goto out;
	rc = device || op >= 0 ? bind_filter(st, device, op) : SQLITE_OK;
	if (rc == SQLITE_OK && head_dim > 0)
		rc = sqlite3_bind_int64(st, 9, head_dim);
	if (rc != SQLITE_OK) {
		rc = db_error(s, rc, err, "cannot query measurements");
		goto out;
	}
	memset(&m, 0, sizeof(m));
	if (lean)
		cal_meas_init(&m, CAL_GEMM);   /* the skipped statistics stay NAN */
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t sid = sqlite3_column_int64(st, 0);

		if (!cur || cur->id != sid) {
			cur = find_row(ser, nser, sid);
			if (!cur) {
				rc = ss_error_set(err, -EIO, s->sdb.path, 0,
						  "measurement of series %lld, which is not in the series table",
						  (long long)sid);
				goto out;
			}
			m.op = cur->op;
			memcpy(m.device, cur->device, sizeof(m.device));
			memcpy(m.device_raw, cur->device_raw, sizeof(m.device_raw));
			memcpy(m.dtype, cur->dtype, sizeof(m.dtype));
			memcpy(m.variant, cur->variant, sizeof(m.variant));
			memcpy(m.driver, cur->driver, sizeof(m.driver));
			memcpy(m.source, cur->source, sizeof(m.source));
		}
		c = 1;
		for (size_t i = 0; i < N_POINT_COLS; i++) {
			char *p = (char *)&m + point_cols[i].off;
			sqlite3_value *v;
			bool null;
			int64_t iv;
			double dv;

			if (lean && lean_skip(i, op, with_energy))
				continue;
			/* One fetch per column: the value, then its type. */
			v = sqlite3_column_value(st, c++);
			null = sqlite3_value_type(v) == SQLITE_NULL;
			/* text or a blob would read as 0: a damaged or edited
			 * store is refused, not priced from zeros or silently
			 * passed over for the shipped data (issue 34 §5) */
			if (!null && sqlite3_value_type(v) != SQLITE_INTEGER &&
			    sqlite3_value_type(v) != SQLITE_FLOAT) {
				rc = bad_point(s, st, point_cols[i].name, err,
					       "'%.40s', expected a number",
					       (const char *)sqlite3_value_text(v));
				goto out;
			}

			switch (point_cols[i].kind) {
			case COL_SHAPE:
			case COL_COUNT:
				iv = null ? CAL_NA : sqlite3_value_int64(v);
				memcpy(p, &iv, sizeof(iv));
				break;
			case COL_STAT:
				dv = null ? NAN : sqlite3_value_double(v);
				memcpy(p, &dv, sizeof(dv));
				break;
			}
		}
		m.source_line = sqlite3_column_int64(st, c);
		/* what cal_store_insert() refuses, refused when read back */
		if (!latency_ok(&m)) {
			rc = bad_point(s, st, "mean_ms", err, "%g, expected a latency > 0",
				       m.mean_ms);
			goto out;
		}
		ret = fn(ctx, &m);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		rc = db_error(s, rc, err, "cannot query measurements");
	else
		rc = 0;
out:
	sqlite3_finalize(st);
	free(ser);
	return rc ? rc : ret;
}

int cal_store_query(struct cal_store *s, const char *device, int op, cal_visit_fn fn,
		    void *ctx, struct ss_error *err)
{
	return query(s, device, op, false, 0, fn, ctx, err);
}

int cal_store_query_lean(struct cal_store *s, const char *device, int op, int64_t head_dim,
			 cal_visit_fn fn, void *ctx, struct ss_error *err)
{
	return query(s, device, op, true, head_dim, fn, ctx, err);
}

int64_t cal_store_count(struct cal_store *s, const char *device, int op, struct ss_error *err)
{
	sqlite3_stmt *st = NULL;
	int64_t n = 0;
	int rc;

	rc = check_filter(s, op, err);
	if (rc)
		return rc;
	rc = prepare(s, device || op >= 0
		     ? "SELECT count(*) FROM points WHERE series_id IN"
		       " (SELECT id FROM series WHERE " SERIES_FILTER ")"
		     : "SELECT count(*) FROM points", &st, err);
	if (rc)
		return rc;
	rc = device || op >= 0 ? bind_filter(st, device, op) : SQLITE_OK;
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	else
		n = db_error(s, rc, err, "cannot count measurements");
	sqlite3_finalize(st);
	return n;
}

/* ---- list and export ---------------------------------------------------- */

struct list_row {
	char *f[6];   /* device, op, dtype, variant, rows, source */
};

/* ---- engine profiles ------------------------------------------------------ */

/* Does the engine_profiles table exist, and is it a plain table with our
 * columns?  0 (with *exists), or an error naming what is wrong. */
static int engine_table(struct cal_store *s, bool *exists, struct ss_error *err)
{
	sqlite3_stmt *st = NULL;
	const char *type, *text;
	int rc;

	*exists = false;
	rc = prepare(s, "SELECT type, sql FROM sqlite_master WHERE name = 'engine_profiles'"
		     " COLLATE NOCASE", &st, err);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		rc = 0;
		goto out;
	}
	if (rc != SQLITE_ROW) {
		rc = db_error(s, rc, err, "cannot read the schema");
		goto out;
	}
	type = (const char *)sqlite3_column_text(st, 0);
	text = (const char *)sqlite3_column_text(st, 1);
	if (!type || strcmp(type, "table") || !text || sqlite3_strnicmp(text, "CREATE TABLE", 12)) {
		rc = ss_error_set(err, -EINVAL, s->sdb.path, 0,
				  "not a servesim calibration store: 'engine_profiles' is not a table");
		goto out;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (sqlite3_prepare_v2(s->sdb.db, "SELECT format, name, profile, source FROM engine_profiles"
			       " LIMIT 0", -1, &st, NULL) != SQLITE_OK) {
		rc = ss_error_set(err, -EINVAL, s->sdb.path, 0,
				  "not a servesim calibration store: engine_profiles: %s",
				  sqlite3_errmsg(s->sdb.db));
		goto out;
	}
	*exists = true;
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

int cal_store_put_engine(struct cal_store *s, const char *name, const char *profile_json,
			 const char *source, struct ss_error *err)
{
	sqlite3_stmt *st = NULL;
	bool exists;
	int rc;

	rc = cal_store_begin(s, err);
	if (rc)
		return rc;
	rc = engine_table(s, &exists, err);
	if (!rc && !exists) {
		int e = sqlite3_exec(s->sdb.db, "CREATE TABLE engine_profiles (format INTEGER NOT NULL,"
				     " name TEXT PRIMARY KEY, profile TEXT NOT NULL, source TEXT NOT NULL)",
				     NULL, NULL, NULL);

		if (e != SQLITE_OK)
			rc = db_error(s, e, err, "cannot create the engine_profiles table");
	}
	if (!rc)
		rc = prepare(s, "INSERT OR REPLACE INTO engine_profiles (format, name, profile, source)"
			     " VALUES (?1, ?2, ?3, ?4)", &st, err);
	if (!rc) {
		int e = sqlite3_bind_int(st, 1, CAL_ENGINE_FORMAT);

		if (e == SQLITE_OK)
			e = sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
		if (e == SQLITE_OK)
			e = sqlite3_bind_text(st, 3, profile_json, -1, SQLITE_STATIC);
		if (e == SQLITE_OK)
			e = sqlite3_bind_text(st, 4, source, -1, SQLITE_STATIC);
		if (e == SQLITE_OK)
			e = sqlite3_step(st);
		if (e != SQLITE_DONE)
			rc = db_error(s, e, err, "cannot write the engine profile");
	}
	sqlite3_finalize(st);
	if (!rc)
		rc = cal_store_commit(s, err);
	if (rc)
		cal_store_rollback(s);
	return rc;
}

int cal_store_each_engine(struct cal_store *s, cal_engine_fn fn, void *ctx, struct ss_error *err)
{
	sqlite3_stmt *st = NULL;
	bool exists;
	int rc;

	rc = engine_table(s, &exists, err);
	if (rc || !exists)
		return rc;
	rc = prepare(s, "SELECT name, profile FROM engine_profiles WHERE format = ?1 ORDER BY name",
		     &st, err);
	if (rc)
		return rc;
	if (sqlite3_bind_int(st, 1, CAL_ENGINE_FORMAT) != SQLITE_OK) {
		rc = db_error(s, SQLITE_ERROR, err, "cannot read the engine profiles");
		goto out;
	}
	for (;;) {
		int e = sqlite3_step(st);
		const char *name, *json;

		if (e == SQLITE_DONE)
			break;
		if (e != SQLITE_ROW) {
			rc = db_error(s, e, err, "cannot read the engine profiles");
			break;
		}
		name = (const char *)sqlite3_column_text(st, 0);
		json = (const char *)sqlite3_column_text(st, 1);
		if (!name || !json) {
			rc = ss_error_set(err, -EINVAL, s->sdb.path, 0,
					  "engine_profiles: a row without a name or profile");
			break;
		}
		rc = fn(ctx, name, json, err);
		if (rc)
			break;
	}
out:
	sqlite3_finalize(st);
	return rc;
}

int cal_store_list(struct cal_store *s, FILE *f, struct ss_error *err)
{
	static const char *const head[6] = { "device", "op", "dtype", "variant", "rows", "source" };
	struct list_row *v = NULL, *nv;
	size_t n = 0, cap = 0, w[6];
	sqlite3_stmt *st = NULL;
	int64_t total = 0;
	int rc;

	rc = prepare(s, "SELECT s.device, s.op, s.dtype, s.variant, c.n, s.source FROM series s"
		     " JOIN (SELECT series_id, count(*) AS n FROM points GROUP BY series_id) c"
		     " ON c.series_id = s.id ORDER BY s.device, s.op, s.dtype, s.variant, s.source",
		     &st, err);
	if (rc)
		return rc;
	for (int j = 0; j < 6; j++)
		w[j] = strlen(head[j]);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = SQLITE_NOMEM;
				break;
			}
			v = nv;
		}
		memset(&v[n], 0, sizeof(v[n]));
		for (int j = 0; j < 6; j++) {
			const unsigned char *t = sqlite3_column_text(st, j);

			v[n].f[j] = strdup(t && *t ? (const char *)t : "-");
			if (!v[n].f[j]) {
				rc = SQLITE_NOMEM;
				break;
			}
			if (strlen(v[n].f[j]) > w[j])
				w[j] = strlen(v[n].f[j]);
		}
		total += sqlite3_column_int64(st, 4);
		n++;
		if (rc == SQLITE_NOMEM)
			break;
	}
	if (rc == SQLITE_DONE) {
		rc = 0;
		fprintf(f, "%-*s  %-*s  %-*s  %-*s  %*s  %s\n", (int)w[0], head[0], (int)w[1],
			head[1], (int)w[2], head[2], (int)w[3], head[3], (int)w[4], head[4], head[5]);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%-*s  %-*s  %-*s  %-*s  %*s  %s\n", (int)w[0], v[i].f[0],
				(int)w[1], v[i].f[1], (int)w[2], v[i].f[2], (int)w[3], v[i].f[3],
				(int)w[4], v[i].f[4], v[i].f[5]);
		fprintf(f, "%lld measurements in %zu series\n", (long long)total, n);
		if (ferror(f))
			rc = ss_error_set(err, -EIO, NULL, 0, "write error");
	} else if (rc == SQLITE_NOMEM) {
		rc = ss_error_set(err, -ENOMEM, s->sdb.path, 0, "out of memory");
	} else {
		rc = db_error(s, rc, err, "cannot list the store");
	}
	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < 6; j++)
			free(v[i].f[j]);
	free(v);
	sqlite3_finalize(st);
	return rc;
}

/* A text field, quoted by libcsv only when it needs to be. */
static void csv_text(FILE *f, const char *t)
{
	if (strpbrk(t, ",\"\r\n"))
		csv_fwrite(f, t, strlen(t));
	else
		fputs(t, f);
}

/* Shortest "%.*g" that reads back as the same double. */
static void csv_double(FILE *f, double v)
{
	char buf[40];

	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, f);
}

static int export_row(void *ctx, const struct cal_meas *m)
{
	FILE *f = ctx;

	fprintf(f, "%s,", cal_op_name(m->op));
	csv_text(f, m->device);
	fputc(',', f);
	csv_text(f, m->device_raw);
	fputc(',', f);
	csv_text(f, m->dtype);
	fputc(',', f);
	csv_text(f, m->variant);
	for (size_t i = 0; i < N_POINT_COLS; i++) {
		const char *p = (const char *)m + point_cols[i].off;
		int64_t iv;
		double dv;

		fputc(',', f);
		switch (point_cols[i].kind) {
		case COL_SHAPE:
		case COL_COUNT:
			memcpy(&iv, p, sizeof(iv));
			if (point_cols[i].kind == COL_COUNT || iv != CAL_NA)
				fprintf(f, "%lld", (long long)iv);
			break;
		case COL_STAT:
			memcpy(&dv, p, sizeof(dv));
			if (!isnan(dv))
				csv_double(f, dv);
			break;
		}
	}
	fputc(',', f);
	csv_text(f, m->driver);
	fputc(',', f);
	csv_text(f, m->source);
	fprintf(f, ",%lld\n", (long long)m->source_line);
	return ferror(f) ? -EIO : 0;
}

int cal_store_export_csv(struct cal_store *s, FILE *f, struct ss_error *err)
{
	int rc;

	fputs("op,device,device_raw,dtype,variant", f);
	for (size_t i = 0; i < N_POINT_COLS; i++)
		fprintf(f, ",%s", point_cols[i].name);
	fputs(",driver,source,source_line\n", f);
	rc = cal_store_query(s, NULL, -1, export_row, f, err);
	if (rc == -EIO || (!rc && ferror(f)))
		return ss_error_set(err, -EIO, NULL, 0, "write error");
	return rc;
}
