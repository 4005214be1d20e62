/* The calibration store keeps every field of every measurement, answers
 * queries by device and operator in insertion order, undoes rolled-back
 * transactions byte for byte, and refuses databases that are not a
 * servesim calibration store of its schema version. */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-main.h"
#include "store.h"

/* ---- fixtures ----------------------------------------------------------- */

static char dir[256];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ss-store-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void teardown(void)
{
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static void path_in(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static struct cal_store *create(const char *name)
{
	struct ss_error err = { 0 };
	struct cal_store *s;
	char path[512];

	path_in(path, sizeof(path), name);
	ck_assert_msg(cal_store_open(&s, path, CAL_OPEN_CREATE, &err) == 0, "%s", err.msg);
	return s;
}

/* A measurement with every field set to something distinctive. */
static void full_meas(struct cal_meas *m, int i)
{
	cal_meas_init(m, CAL_ATTN_DECODE);
	snprintf(m->device, sizeof(m->device), "h100-sxm");
	snprintf(m->device_raw, sizeof(m->device_raw), "NVIDIA H100 80GB HBM3");
	snprintf(m->dtype, sizeof(m->dtype), "bf16");
	snprintf(m->variant, sizeof(m->variant), "fa3, \"quoted\"");
	m->m = 1 + i;
	m->n = 2;
	m->k = 3;
	m->batch = 4;
	m->q_len = 5;
	m->kv_len = 6;
	m->heads = 7;
	m->kv_heads = 8;
	m->head_dim = 128;
	m->tokens = 10;
	m->width = 11;
	m->num_gpus = 12;
	m->bytes = (int64_t)1 << 40;   /* beyond 32 bits */
	m->tp = 0;                     /* 0 is a value, not NA */
	m->mean_ms = 0.1 + i;
	m->median_ms = 1.0 / 3.0;
	m->min_ms = 0.0;
	m->max_ms = 1e-9;
	m->std_ms = 123456.789;
	m->count = 6;
	m->energy_j = 0.25;
	m->power_w = 700;
	m->clock_mhz = 1980;
	snprintf(m->driver, sizeof(m->driver), "550.54.15");
	snprintf(m->source, sizeof(m->source), "sweeps/h100/decode.csv");
	m->source_line = 42 + i;
}

/* A sparse one: only what an aiconfigurator GEMM row has. */
static void sparse_meas(struct cal_meas *m, const char *device, enum cal_op op, int64_t x)
{
	cal_meas_init(m, op);
	snprintf(m->device, sizeof(m->device), "%s", device);
	snprintf(m->dtype, sizeof(m->dtype), "bf16");
	m->m = x;
	m->mean_ms = (double)x / 1000;
	snprintf(m->source, sizeof(m->source), "t.csv");
	m->source_line = x;
}

static void insert_ok(struct cal_store *s, const struct cal_meas *m)
{
	struct ss_error err = { 0 };

	ck_assert_msg(cal_store_insert(s, m, &err) == 0, "%s", err.msg);
}

struct collect {
	struct cal_meas *v;
	size_t n, cap;
	size_t stop_after;   /* 0 = never */
};

static int collect_fn(void *ctx, const struct cal_meas *m)
{
	struct collect *c = ctx;

	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 16;
		c->v = realloc(c->v, c->cap * sizeof(*c->v));
		ck_assert_ptr_nonnull(c->v);
	}
	c->v[c->n++] = *m;
	return c->stop_after && c->n == c->stop_after ? 7 : 0;
}

static void query_ok(struct cal_store *s, const char *device, int op, struct collect *c)
{
	struct ss_error err = { 0 };

	memset(c, 0, sizeof(*c));
	ck_assert_msg(cal_store_query(s, device, op, collect_fn, c, &err) == 0, "%s", err.msg);
}

static bool same_double(double a, double b)
{
	return (isnan(a) && isnan(b)) || a == b;
}

static void assert_same(const struct cal_meas *a, const struct cal_meas *b)
{
	ck_assert_int_eq(a->op, b->op);
	ck_assert_str_eq(a->device, b->device);
	ck_assert_str_eq(a->device_raw, b->device_raw);
	ck_assert_str_eq(a->dtype, b->dtype);
	ck_assert_str_eq(a->variant, b->variant);
	ck_assert_int_eq(a->m, b->m);
	ck_assert_int_eq(a->n, b->n);
	ck_assert_int_eq(a->k, b->k);
	ck_assert_int_eq(a->batch, b->batch);
	ck_assert_int_eq(a->q_len, b->q_len);
	ck_assert_int_eq(a->kv_len, b->kv_len);
	ck_assert_int_eq(a->heads, b->heads);
	ck_assert_int_eq(a->kv_heads, b->kv_heads);
	ck_assert_int_eq(a->head_dim, b->head_dim);
	ck_assert_int_eq(a->tokens, b->tokens);
	ck_assert_int_eq(a->width, b->width);
	ck_assert_int_eq(a->num_gpus, b->num_gpus);
	ck_assert_int_eq(a->bytes, b->bytes);
	ck_assert_int_eq(a->tp, b->tp);
	/* exact: the store keeps doubles bit for bit */
	ck_assert(same_double(a->mean_ms, b->mean_ms));
	ck_assert(same_double(a->median_ms, b->median_ms));
	ck_assert(same_double(a->min_ms, b->min_ms));
	ck_assert(same_double(a->max_ms, b->max_ms));
	ck_assert(same_double(a->std_ms, b->std_ms));
	ck_assert_int_eq(a->count, b->count);
	ck_assert(same_double(a->energy_j, b->energy_j));
	ck_assert(same_double(a->power_w, b->power_w));
	ck_assert(same_double(a->clock_mhz, b->clock_mhz));
	ck_assert_str_eq(a->driver, b->driver);
	ck_assert_str_eq(a->source, b->source);
	ck_assert_int_eq(a->source_line, b->source_line);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Run SQL on a database file directly (to build foreign or altered ones). */
static void sql(const char *path, const char *text)
{
	sqlite3 *db;

	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, text, NULL, NULL, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_close(db);
}

/* ---- operators and measurements ------------------------------------------ */

START_TEST(op_names_round_trip)
{
	enum cal_op op;

	for (int i = 0; i < CAL_OP_COUNT; i++) {
		ck_assert_int_eq(cal_op_from_name(cal_op_name((enum cal_op)i), &op), 0);
		ck_assert_int_eq(op, i);
	}
	ck_assert_str_eq(cal_op_name(CAL_GEMM), "gemm");
	ck_assert_str_eq(cal_op_name(CAL_ATTN_DECODE), "attn_decode");
	ck_assert_str_eq(cal_op_name(CAL_HOST_OVERHEAD), "host_overhead");
	ck_assert_int_eq(cal_op_from_name("matmul", &op), -EINVAL);
}
END_TEST

START_TEST(meas_init_marks_everything_unknown)
{
	struct cal_meas m;

	memset(&m, 0x5a, sizeof(m));
	cal_meas_init(&m, CAL_ROPE);
	ck_assert_int_eq(m.op, CAL_ROPE);
	ck_assert_int_eq(m.m, CAL_NA);
	ck_assert_int_eq(m.kv_len, CAL_NA);
	ck_assert_int_eq(m.tp, CAL_NA);
	ck_assert(isnan(m.mean_ms) && isnan(m.std_ms) && isnan(m.energy_j) && isnan(m.clock_mhz));
	ck_assert_int_eq(m.count, 0);
	ck_assert_str_eq(m.device, "");
	ck_assert_str_eq(m.source, "");
}
END_TEST

/* ---- round trip, filters, order ----------------------------------------- */

START_TEST(every_field_round_trips)
{
	struct cal_store *s = create("rt.db");
	struct cal_meas in[3];
	struct collect c;

	full_meas(&in[0], 0);
	sparse_meas(&in[1], "a100-80gb-sxm", CAL_GEMM, 4096);
	cal_meas_init(&in[2], CAL_HOST_OVERHEAD);   /* host rows: no device, no dtype */
	in[2].mean_ms = 0.5;
	in[2].batch = 8;
	for (int i = 0; i < 3; i++)
		insert_ok(s, &in[i]);
	query_ok(s, NULL, -1, &c);
	ck_assert_uint_eq(c.n, 3);
	for (int i = 0; i < 3; i++)
		assert_same(&c.v[i], &in[i]);
	ck_assert_int_eq(c.v[1].n, CAL_NA);     /* NA stays NA */
	ck_assert(isnan(c.v[1].std_ms));        /* NAN stays NAN */
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(queries_filter_by_device_and_op_series_by_series)
{
	struct cal_store *s = create("q.db");
	struct ss_error err = { 0 };
	struct cal_meas m;
	struct collect c;

	/* interleave devices and operators so that insertion order differs
	 * from any grouping by series */
	for (int i = 1; i <= 40; i++) {
		sparse_meas(&m, i % 2 ? "h100-sxm" : "a100-80gb-sxm",
			    i % 3 ? CAL_GEMM : CAL_ATTN_PREFILL, i);
		insert_ok(s, &m);
	}
	query_ok(s, "h100-sxm", -1, &c);
	ck_assert_uint_eq(c.n, 20);
	/* series by series in order of creation (the GEMM series came first,
	 * with row 1), each in insertion order: odd i not divisible by 3, then
	 * odd i divisible by 3 */
	{
		int64_t want = 1;
		size_t i = 0;

		for (int pass = 0; pass < 2; pass++)
			for (want = 1; want <= 40; want += 2)
				if ((want % 3 != 0) == (pass == 0)) {
					ck_assert_str_eq(c.v[i].device, "h100-sxm");
					ck_assert_int_eq(c.v[i++].m, want);
				}
		ck_assert_uint_eq(i, 20);
	}
	free(c.v);
	query_ok(s, "a100-80gb-sxm", CAL_ATTN_PREFILL, &c);
	for (size_t i = 0; i < c.n; i++) {
		ck_assert_int_eq(c.v[i].op, CAL_ATTN_PREFILL);
		ck_assert_int_eq(c.v[i].m % 6, 0);
	}
	ck_assert_uint_eq(c.n, 6);      /* 6, 12, ..., 36 */
	free(c.v);
	query_ok(s, NULL, CAL_GEMM, &c);
	ck_assert_uint_eq(c.n, 27);
	free(c.v);
	query_ok(s, "l40s", -1, &c);
	ck_assert_uint_eq(c.n, 0);
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 40);
	ck_assert_int_eq(cal_store_count(s, "h100-sxm", -1, &err), 20);
	ck_assert_int_eq(cal_store_count(s, "h100-sxm", CAL_GEMM, &err), 13);
	ck_assert_int_eq(cal_store_count(s, NULL, CAL_ALL_REDUCE, &err), 0);
	ck_assert_int_eq(cal_store_count(s, NULL, CAL_OP_COUNT, &err), -EINVAL);
	/* a non-zero return stops the visit and is returned */
	memset(&c, 0, sizeof(c));
	c.stop_after = 5;
	ck_assert_int_eq(cal_store_query(s, NULL, -1, collect_fn, &c, &err), 7);
	ck_assert_uint_eq(c.n, 5);
	free(c.v);
	cal_store_close(s);
}
END_TEST

START_TEST(reopens_read_only_and_refuses_writes)
{
	struct ss_error err = { 0 };
	struct cal_store *s = create("ro.db");
	struct cal_meas m;
	char path[512];

	sparse_meas(&m, "h100-sxm", CAL_GEMM, 1);
	insert_ok(s, &m);
	cal_store_close(s);
	path_in(path, sizeof(path), "ro.db");
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), 0);
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 1);
	ck_assert_int_eq(cal_store_insert(s, &m, &err), -EROFS);
	ck_assert_ptr_nonnull(strstr(err.msg, "read-only"));
	ck_assert_str_eq(cal_store_path(s), path);
	cal_store_close(s);
	/* CAL_OPEN_CREATE on an existing store opens it */
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_CREATE, &err), 0);
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 1);
	cal_store_close(s);
}
END_TEST

START_TEST(insert_rejects_impossible_values)
{
	struct cal_store *s = create("bad.db");
	struct ss_error err = { 0 };
	struct cal_meas m;

	sparse_meas(&m, "h100-sxm", CAL_GEMM, 8);
	m.k = -5;
	ck_assert_int_eq(cal_store_insert(s, &m, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "k = -5"));
	ck_assert_str_eq(err.file, "t.csv");    /* the row's provenance */
	ck_assert_int_eq(err.line, 8);
	sparse_meas(&m, "h100-sxm", CAL_GEMM, 8);
	m.mean_ms = -0.1;
	ck_assert_int_eq(cal_store_insert(s, &m, &err), -EINVAL);
	sparse_meas(&m, "h100-sxm", CAL_GEMM, 8);
	m.std_ms = INFINITY;
	ck_assert_int_eq(cal_store_insert(s, &m, &err), -EINVAL);
	sparse_meas(&m, "h100-sxm", CAL_GEMM, 8);
	m.mean_ms = NAN;
	ck_assert_int_eq(cal_store_insert(s, &m, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "mean_ms missing"));
	sparse_meas(&m, "h100-sxm", CAL_GEMM, 8);
	m.op = CAL_OP_COUNT;
	ck_assert_int_eq(cal_store_insert(s, &m, &err), -EINVAL);
	sparse_meas(&m, "h100-sxm", CAL_GEMM, 8);
	m.count = -1;
	ck_assert_int_eq(cal_store_insert(s, &m, &err), -EINVAL);
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 0);
	cal_store_close(s);
}
END_TEST

/* ---- transactions ------------------------------------------------------- */

START_TEST(rollback_leaves_rows_unchanged)
{
	struct cal_store *s = create("tx.db");
	struct ss_error err = { 0 };
	struct cal_meas m;
	struct collect c;

	sparse_meas(&m, "h100-sxm", CAL_GEMM, 1);
	insert_ok(s, &m);
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	for (int i = 2; i < 10; i++) {
		/* new series inside the transaction */
		sparse_meas(&m, "a100-80gb-sxm", CAL_ROPE, i);
		insert_ok(s, &m);
	}
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 9);
	cal_store_rollback(s);
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 1);
	/* the series rolled back with its rows; using its labels again
	 * creates it afresh (the insert cache must not remember it) */
	sparse_meas(&m, "a100-80gb-sxm", CAL_ROPE, 50);
	insert_ok(s, &m);
	query_ok(s, "a100-80gb-sxm", CAL_ROPE, &c);
	ck_assert_uint_eq(c.n, 1);
	ck_assert_int_eq(c.v[0].m, 50);
	free(c.v);
	/* nesting: the inner rollback undoes only the inner part */
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	sparse_meas(&m, "h100-sxm", CAL_GEMM, 60);
	insert_ok(s, &m);
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	sparse_meas(&m, "h100-sxm", CAL_GEMM, 61);
	insert_ok(s, &m);
	cal_store_rollback(s);
	ck_assert_int_eq(cal_store_commit(s, &err), 0);
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 3);
	ck_assert_int_eq(cal_store_commit(s, &err), -EINVAL);   /* none open */
	cal_store_rollback(s);                                    /* harmless */
	/* close rolls back what is still open */
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	insert_ok(s, &m);
	cal_store_close(s);
	s = create("tx.db");
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 3);
	cal_store_close(s);
}
END_TEST

START_TEST(rolled_back_file_is_byte_identical)
{
	struct cal_store *s = create("bytes.db");
	struct ss_error err = { 0 };
	struct cal_meas m;
	char path[512], *before, *after;
	size_t nb, na;

	for (int i = 1; i <= 200; i++) {
		sparse_meas(&m, "h100-sxm", CAL_GEMM, i);
		insert_ok(s, &m);
	}
	cal_store_close(s);
	path_in(path, sizeof(path), "bytes.db");
	before = read_file(path, &nb);
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_WRITE, &err), 0);
	ck_assert_int_eq(cal_store_begin(s, &err), 0);
	/* enough rows to spill pages to the file before the rollback */
	for (int i = 1; i <= 20000; i++) {
		full_meas(&m, i);
		insert_ok(s, &m);
	}
	cal_store_rollback(s);
	cal_store_close(s);
	after = read_file(path, &na);
	ck_assert_uint_eq(na, nb);
	ck_assert(memcmp(before, after, nb) == 0);
	free(before);
	free(after);
}
END_TEST

/* ---- what is refused ---------------------------------------------------- */

START_TEST(refuses_a_foreign_sqlite_database)
{
	struct ss_error err = { 0 };
	struct cal_store *s;
	char path[512], want[600];

	path_in(path, sizeof(path), "results.db");
	sql(path, "CREATE TABLE runs (id INTEGER PRIMARY KEY, config TEXT);");
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), -EINVAL);
	ck_assert_ptr_null(s);
	ck_assert_str_eq(err.file, path);
	ck_assert_str_eq(err.msg,
			 "not a servesim calibration store (application_id 0x00000000, expected 0x53535643)");
	/* nor may CAL_OPEN_CREATE take it over */
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_CREATE, &err), -EINVAL);
	path_in(path, sizeof(path), "other.db");
	sql(path, "PRAGMA application_id = 305419896; CREATE TABLE t (x);");
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_WRITE, &err), -EINVAL);
	snprintf(want, sizeof(want), "application_id 0x12345678");
	ck_assert_ptr_nonnull(strstr(err.msg, want));
}
END_TEST

START_TEST(refuses_another_schema_version)
{
	struct cal_store *s = create("v2.db");
	struct ss_error err = { 0 };
	char path[512];

	cal_store_close(s);
	path_in(path, sizeof(path), "v2.db");
	sql(path, "PRAGMA user_version = 2;");
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "calibration store schema version 2, this servesim reads version 1");
	sql(path, "PRAGMA user_version = 0;");
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_WRITE, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "calibration store schema version 0, this servesim reads version 1");
}
END_TEST

START_TEST(refuses_a_file_that_is_not_sqlite)
{
	struct ss_error err = { 0 };
	struct cal_store *s;
	char path[512], buf[1100];
	FILE *f;

	path_in(path, sizeof(path), "profile.csv");
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	/* longer than SQLite's 100-byte header */
	for (int i = 0; i < 50; i++)
		fprintf(f, "m,n,k,latency\n");
	fclose(f);
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), -EINVAL);
	ss_error_format(&err, buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, path));
	ck_assert_ptr_nonnull(strstr(buf, "not an SQLite database"));
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_CREATE, &err), -EINVAL);
}
END_TEST

START_TEST(missing_store_read_only_is_an_error)
{
	struct ss_error err = { 0 };
	struct cal_store *s;
	char path[512];

	path_in(path, sizeof(path), "nope.db");
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), -ENOENT);
	ck_assert_str_eq(err.file, path);
	ck_assert_ptr_nonnull(strstr(err.msg, "cannot open calibration store"));
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_WRITE, &err), -ENOENT);
	ck_assert_int_eq(access(path, F_OK), -1);   /* nothing created */
	ck_assert_int_eq(cal_store_open(&s, dir, CAL_OPEN_READONLY, &err), -EISDIR);
}
END_TEST

START_TEST(empty_file_is_initialized_only_on_create)
{
	struct ss_error err = { 0 };
	struct cal_store *s;
	char path[512];
	FILE *f;

	path_in(path, sizeof(path), "empty.db");
	f = fopen(path, "w");
	fclose(f);
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "empty database"));
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_CREATE, &err), 0);
	ck_assert_int_eq(cal_store_count(s, NULL, -1, &err), 0);
	cal_store_close(s);
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), 0);
	cal_store_close(s);
}
END_TEST

/* ---- list and export ---------------------------------------------------- */

static char *capture(struct cal_store *s, bool export)
{
	struct ss_error err = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	if (export)
		ck_assert_msg(cal_store_export_csv(s, f, &err) == 0, "%s", err.msg);
	else
		ck_assert_msg(cal_store_list(s, f, &err) == 0, "%s", err.msg);
	fclose(f);
	return buf;
}

START_TEST(export_writes_every_column_with_a_header)
{
	struct cal_store *s = create("x.db");
	struct cal_meas m;
	char *out, *line2, *line3;

	full_meas(&m, 0);
	insert_ok(s, &m);
	sparse_meas(&m, "a100-80gb-sxm", CAL_GEMM, 4096);
	m.mean_ms = 0.116;
	insert_ok(s, &m);
	out = capture(s, true);
	line2 = strchr(out, '\n') + 1;
	line3 = strchr(line2, '\n') + 1;
	ck_assert(strncmp(out,
			  "op,device,device_raw,dtype,variant,m,n,k,batch,q_len,kv_len,heads,kv_heads,"
			  "head_dim,tokens,width,num_gpus,bytes,tp,mean_ms,median_ms,min_ms,max_ms,std_ms,"
			  "count,energy_j,power_w,clock_mhz,driver,source,source_line\n",
			  (size_t)(line2 - out)) == 0);
	/* text with a comma or quote is quoted; doubles in the shortest
	 * form that reads back exactly */
	ck_assert(strncmp(line2,
			  "attn_decode,h100-sxm,NVIDIA H100 80GB HBM3,bf16,\"fa3, \"\"quoted\"\"\","
			  "1,2,3,4,5,6,7,8,128,10,11,12,1099511627776,0,"
			  "0.1,0.3333333333333333,0,1e-09,123456.789,6,0.25,700,1980,"
			  "550.54.15,sweeps/h100/decode.csv,42\n",
			  (size_t)(line3 - line2)) == 0);
	/* NA and NAN are empty fields */
	ck_assert_str_eq(line3, "gemm,a100-80gb-sxm,,bf16,,4096,,,,,,,,,,,,,,0.116,,,,,0,,,,,t.csv,4096\n");
	free(out);
	cal_store_close(s);
}
END_TEST

START_TEST(list_counts_by_series)
{
	struct cal_store *s = create("l.db");
	struct cal_meas m;
	char *out;

	for (int i = 1; i <= 5; i++) {
		sparse_meas(&m, "h100-sxm", CAL_GEMM, i);
		snprintf(m.variant, sizeof(m.variant), "torch.nn.functional.linear");
		insert_ok(s, &m);
	}
	cal_meas_init(&m, CAL_HOST_OVERHEAD);
	m.mean_ms = 1;
	insert_ok(s, &m);
	out = capture(s, false);
	ck_assert_ptr_nonnull(strstr(out, "device"));
	ck_assert_ptr_nonnull(strstr(out, "source"));
	ck_assert_ptr_nonnull(strstr(out, "h100-sxm  gemm"));
	ck_assert_ptr_nonnull(strstr(out, "torch.nn.functional.linear     5  t.csv\n"));
	ck_assert_ptr_nonnull(strstr(out, "6 measurements in 2 series\n"));
	free(out);
	cal_store_close(s);
}
END_TEST

/* A `points` view that recurses forever is refused when the store opens,
 * before any query could read it (without the check, loading hangs). */
START_TEST(refuses_a_view_in_place_of_a_table)
{
	struct cal_store *s = create("view.db");
	struct ss_error err = { 0 };
	char path[512];

	cal_store_close(s);
	path_in(path, sizeof(path), "view.db");
	sql(path, "DROP VIEW measurements; DROP TABLE points;"
		  "CREATE VIEW points AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)"
		  " SELECT x AS id, 1 AS series_id, x AS m, x AS n, x AS k, x AS batch, x AS q_len,"
		  " x AS kv_len, x AS heads, x AS kv_heads, x AS head_dim, x AS tokens, x AS width,"
		  " x AS num_gpus, x AS bytes, x AS tp, x AS mean_ms, x AS median_ms, x AS min_ms,"
		  " x AS max_ms, x AS std_ms, x AS count, x AS energy_j, x AS power_w, x AS clock_mhz,"
		  " x AS source_line FROM r;");
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), -EINVAL);
	ck_assert_ptr_null(s);
	ck_assert_str_eq(err.file, path);
	ck_assert_str_eq(err.msg, "not a servesim calibration store of schema version 1:"
				  " 'points' is a view, expected a table");
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_WRITE, &err), -EINVAL);
	/* and a missing table */
	sql(path, "DROP VIEW points;");
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "not a servesim calibration store of schema version 1:"
				  " no table 'points'");
}
END_TEST

/* A table without a column we read is another schema: one line naming
 * the column, at open. */
START_TEST(refuses_a_table_missing_a_column)
{
	struct cal_store *s = create("col.db");
	struct ss_error err = { 0 };
	char path[512];

	cal_store_close(s);
	path_in(path, sizeof(path), "col.db");
	sql(path, "DROP VIEW measurements; ALTER TABLE points DROP COLUMN median_ms;");
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), -EINVAL);
	ck_assert_str_eq(err.file, path);
	ck_assert_msg(strstr(err.msg, "not a servesim calibration store of schema version 1") &&
		      strstr(err.msg, "median_ms"), "%s", err.msg);
}
END_TEST

/* A store another process holds locked is reported as locked after a short
 * wait, not read as missing or waited on in silence. */
START_TEST(locked_store_is_a_clear_error)
{
	struct cal_store *s = create("locked.db");
	struct ss_error err = { 0 };
	char path[512];
	sqlite3 *db;

	cal_store_close(s);
	path_in(path, sizeof(path), "locked.db");
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), -EBUSY);
	ck_assert_ptr_null(s);
	ck_assert_str_eq(err.file, path);
	ck_assert_msg(strstr(err.msg, "locked by another process"), "%s", err.msg);
	ck_assert_int_eq(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), 0);
	cal_store_close(s);
}
END_TEST

struct engines_seen {
	char names[4][32];
	char json[4][128];
	int n;
};

static int engine_fn(void *ctx, const char *name, const char *json, struct ss_error *err)
{
	struct engines_seen *x = ctx;

	(void)err;
	ck_assert_int_lt(x->n, 4);
	snprintf(x->names[x->n], sizeof(x->names[0]), "%s", name);
	snprintf(x->json[x->n], sizeof(x->json[0]), "%s", json);
	x->n++;
	return 0;
}

START_TEST(engine_profiles_are_kept_replaced_and_read_in_name_order)
{
	struct ss_error err = { 0 };
	struct cal_store *s = create("eng.db");
	struct engines_seen seen = { 0 };
	char path[512];
	sqlite3 *db;

	/* a store without the table has no profiles */
	ck_assert_int_eq(cal_store_each_engine(s, engine_fn, &seen, &err), 0);
	ck_assert_int_eq(seen.n, 0);
	ck_assert_int_eq(cal_store_put_engine(s, "b", "{\"v\": 1}", "test", &err), 0);
	ck_assert_int_eq(cal_store_put_engine(s, "a", "{\"v\": 2}", "test", &err), 0);
	ck_assert_int_eq(cal_store_put_engine(s, "b", "{\"v\": 3}", "test", &err), 0);
	cal_store_close(s);
	/* a row of another (newer) format is skipped */
	path_in(path, sizeof(path), "eng.db");
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "INSERT INTO engine_profiles VALUES (99, 'c', 'x', 's')",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_READONLY, &err), 0);
	ck_assert_int_eq(cal_store_each_engine(s, engine_fn, &seen, &err), 0);
	ck_assert_int_eq(seen.n, 2);
	ck_assert_str_eq(seen.names[0], "a");
	ck_assert_str_eq(seen.names[1], "b");
	ck_assert_str_eq(seen.json[1], "{\"v\": 3}");
	/* read-only stores refuse writes */
	ck_assert_int_lt(cal_store_put_engine(s, "d", "{}", "test", &err), 0);
	cal_store_close(s);
}
END_TEST

START_TEST(an_engine_profiles_table_of_other_columns_is_refused)
{
	struct ss_error err = { 0 };
	struct cal_store *s = create("eng2.db");
	struct engines_seen seen = { 0 };
	char path[512];
	sqlite3 *db;

	cal_store_close(s);
	path_in(path, sizeof(path), "eng2.db");
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE engine_profiles (name TEXT, json TEXT)",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(cal_store_open(&s, path, CAL_OPEN_WRITE, &err), 0);
	ck_assert_int_eq(cal_store_each_engine(s, engine_fn, &seen, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "engine_profiles"));
	ck_assert_int_eq(cal_store_put_engine(s, "a", "{}", "test", &err), -EINVAL);
	cal_store_close(s);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("store");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, op_names_round_trip);
	tcase_add_test(tc, meas_init_marks_everything_unknown);
	tcase_add_test(tc, every_field_round_trips);
	tcase_add_test(tc, queries_filter_by_device_and_op_series_by_series);
	tcase_add_test(tc, reopens_read_only_and_refuses_writes);
	tcase_add_test(tc, insert_rejects_impossible_values);
	tcase_add_test(tc, rollback_leaves_rows_unchanged);
	tcase_add_test(tc, rolled_back_file_is_byte_identical);
	tcase_add_test(tc, refuses_a_foreign_sqlite_database);
	tcase_add_test(tc, refuses_another_schema_version);
	tcase_add_test(tc, refuses_a_file_that_is_not_sqlite);
	tcase_add_test(tc, missing_store_read_only_is_an_error);
	tcase_add_test(tc, empty_file_is_initialized_only_on_create);
	tcase_add_test(tc, export_writes_every_column_with_a_header);
	tcase_add_test(tc, list_counts_by_series);
	tcase_add_test(tc, refuses_a_view_in_place_of_a_table);
	tcase_add_test(tc, refuses_a_table_missing_a_column);
	tcase_add_test(tc, locked_store_is_a_clear_error);
	tcase_add_test(tc, engine_profiles_are_kept_replaced_and_read_in_name_order);
	tcase_add_test(tc, an_engine_profiles_table_of_other_columns_is_refused);
	suite_add_tcase(s, tc);
	return s;
}
