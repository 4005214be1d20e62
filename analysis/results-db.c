/* servesim — results.db, a run's results as SQLite (schema: docs/outputs.md).
 *
 * The database is built under a temporary name and renamed into place, so
 * it is created from scratch every time and needs no journal: a crash
 * leaves only the temporary file.  Everything goes in one transaction
 * through prepared statements (10^6 request rows take about a second).
 * run_id is 1 in a fresh file; it is there so that the databases of several
 * runs can be merged into one (ATTACH, then INSERT ... SELECT with new ids).
 */
#include "outdir-int.h"
#include "metrics-int.h"
#include "report-int.h"

#include <errno.h>
#include <string.h>

#include "ss-sqlite.h"

#define RESULTS_DB_SCHEMA_VERSION 1
#define RUN_ID 1

static const char schema_sql[] =
	"PRAGMA journal_mode = OFF;"
	"PRAGMA synchronous = OFF;"
	"PRAGMA user_version = 1;"
	"CREATE TABLE runs ("
	" run_id INTEGER PRIMARY KEY, version TEXT, mode TEXT, seed INTEGER,"
	" model TEXT, gpu TEXT, tp INTEGER, instances INTEGER, policy TEXT,"
	" router TEXT, cost_model TEXT, workload TEXT, config_json TEXT);"
	"CREATE TABLE requests ("
	" run_id INTEGER NOT NULL REFERENCES runs(run_id), id INTEGER NOT NULL,"
	" instance INTEGER, tenant INTEGER, priority INTEGER, state TEXT NOT NULL,"
	" arrival_ns INTEGER, prompt_tokens INTEGER, output_tokens INTEGER,"
	" first_sched_ns INTEGER, first_token_ns INTEGER, finish_ns INTEGER,"
	" preemptions INTEGER, energy_j REAL, reject_reason TEXT);"
	"CREATE TABLE timeseries ("
	" run_id INTEGER NOT NULL REFERENCES runs(run_id), instance INTEGER NOT NULL,"
	" t_ns INTEGER NOT NULL, queued INTEGER, running INTEGER,"
	" kv_used_blocks INTEGER, kv_total_blocks INTEGER, power_w REAL);"
	"CREATE TABLE summary ("
	" run_id INTEGER PRIMARY KEY REFERENCES runs(run_id), json TEXT NOT NULL);";

_Static_assert(RESULTS_DB_SCHEMA_VERSION == 1, "schema_sql sets user_version = 1");

struct dbw {
	struct ss_db s;          /* messages name the final name */
	struct ss_error *err;
};

static const struct ss_db_kind results_db_kind = {
	.noun = "results database",
	.expect = "a new file",
	.own_file = true,
	.nofollow = true,
};

static int db_fail(struct dbw *w, const char *call)
{
	return ss_db_fail_last(&w->s, call, w->err);
}

static int exec(struct dbw *w, const char *sql, const char *what)
{
	return ss_db_exec(&w->s, sql, what, w->err);
}

static int prepare(struct dbw *w, const char *sql, sqlite3_stmt **st)
{
	return ss_db_prepare(&w->s, sql, st, "sqlite3_prepare_v2", w->err);
}

/* Bind helpers: each returns the sqlite3_bind_* result. */
static int bind_text(sqlite3_stmt *st, int i, const char *s)
{
	return s ? sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

/* A time or index that is -1 when it did not happen becomes NULL. */
static int bind_opt(sqlite3_stmt *st, int i, int64_t v)
{
	return v >= 0 ? sqlite3_bind_int64(st, i, v) : sqlite3_bind_null(st, i);
}

/* Run a bound statement to completion and reset it for the next row. */
static int step_reset(struct dbw *w, sqlite3_stmt *st, int bind_rc)
{
	if (bind_rc != SQLITE_OK)
		return db_fail(w, "sqlite3_bind");
	if (sqlite3_step(st) != SQLITE_DONE)
		return db_fail(w, "sqlite3_step");
	if (sqlite3_reset(st) != SQLITE_OK)
		return db_fail(w, "sqlite3_reset");
	return 0;
}

static int insert_run(struct dbw *w, const struct run_info *ri, const char *summary_json)
{
	sqlite3_stmt *st = NULL;
	char *config = NULL;
	int rc = SQLITE_OK, ret;

	if (ri->config) {
		config = json_dumps(ri->config, JSON_COMPACT | JSON_SORT_KEYS |
					       JSON_REAL_PRECISION(17));
		if (!config)
			return ss_error_set(w->err, -ENOMEM, w->s.path, 0,
					    "json_dumps (config): out of memory");
	}
	ret = prepare(w, "INSERT INTO runs (run_id, version, mode, seed, model, gpu, tp,"
		      " instances, policy, router, cost_model, workload, config_json)"
		      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)", &st);
	if (ret < 0)
		goto out;
	rc |= sqlite3_bind_int64(st, 1, RUN_ID);
	rc |= bind_text(st, 2, ri->version);
	rc |= bind_text(st, 3, ri->mode);
	/* SQLite integers are signed: a seed above 2^63 is stored as its bits */
	rc |= sqlite3_bind_int64(st, 4, (sqlite3_int64)ri->seed);
	rc |= bind_text(st, 5, ri->model);
	rc |= bind_text(st, 6, ri->gpu);
	rc |= sqlite3_bind_int(st, 7, ri->tp);
	rc |= sqlite3_bind_int64(st, 8, ri->n_instances);
	rc |= bind_text(st, 9, ri->policy);
	rc |= bind_text(st, 10, ri->router);
	rc |= bind_text(st, 11, ri->cost_model);
	rc |= bind_text(st, 12, ri->workload);
	rc |= bind_text(st, 13, config);
	ret = step_reset(w, st, rc);
	if (ret < 0)
		goto out;
	if (sqlite3_finalize(st) != SQLITE_OK) {
		st = NULL;
		ret = db_fail(w, "sqlite3_finalize");
		goto out;
	}
	st = NULL;

	ret = prepare(w, "INSERT INTO summary (run_id, json) VALUES (?1, ?2)", &st);
	if (ret < 0)
		goto out;
	rc = sqlite3_bind_int64(st, 1, RUN_ID);
	rc |= bind_text(st, 2, summary_json);
	ret = step_reset(w, st, rc);
out:
	sqlite3_finalize(st);
	free(config);
	return ret;
}

/* metered false: energy_j is NULL (no meter read; unknown, not 0) */
static int insert_requests(struct dbw *w, const struct engine_results *r, bool metered)
{
	sqlite3_stmt *st = NULL;
	int ret;

	ret = prepare(w, "INSERT INTO requests (run_id, id, instance, tenant, priority, state,"
		      " arrival_ns, prompt_tokens, output_tokens, first_sched_ns,"
		      " first_token_ns, finish_ns, preemptions, energy_j, reject_reason)"
		      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
		      &st);
	if (ret < 0)
		return ret;
	/* bindings survive sqlite3_reset(): the run id is bound once */
	if (sqlite3_bind_int64(st, 1, RUN_ID) != SQLITE_OK)
		ret = db_fail(w, "sqlite3_bind");
	for (uint64_t i = 0; i < r->n_req && ret == 0; i++) {
		const struct req_record *q = &r->req[i];
		int rc = SQLITE_OK;

		rc |= sqlite3_bind_int64(st, 2, q->id);
		rc |= bind_opt(st, 3, q->instance);
		rc |= sqlite3_bind_int(st, 4, q->tenant_id);
		rc |= sqlite3_bind_int(st, 5, q->priority);
		rc |= sqlite3_bind_text(st, 6, metrics_state_name(q->state), -1, SQLITE_STATIC);
		rc |= sqlite3_bind_int64(st, 7, q->arrival_ns);
		rc |= sqlite3_bind_int(st, 8, q->prompt_tokens);
		rc |= sqlite3_bind_int(st, 9, q->output_tokens);
		rc |= bind_opt(st, 10, q->first_sched_ns);
		rc |= bind_opt(st, 11, q->first_token_ns);
		rc |= bind_opt(st, 12, q->finish_ns);
		rc |= sqlite3_bind_int(st, 13, q->preemptions);
		rc |= metered ? sqlite3_bind_double(st, 14, q->energy_j) :
				sqlite3_bind_null(st, 14);
		rc |= bind_text(st, 15, q->state == REQ_REJECTED ? q->reject_reason : NULL);
		ret = step_reset(w, st, rc);
	}
	sqlite3_finalize(st);
	return ret;
}

static int insert_timeseries(struct dbw *w, const struct engine_results *r, bool metered)
{
	sqlite3_stmt *st = NULL;
	int ret;

	if (r->n_samples == 0)
		return 0;
	ret = prepare(w, "INSERT INTO timeseries (run_id, instance, t_ns, queued, running,"
		      " kv_used_blocks, kv_total_blocks, power_w)"
		      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
		      &st);
	if (ret < 0)
		return ret;
	if (sqlite3_bind_int64(st, 1, RUN_ID) != SQLITE_OK)
		ret = db_fail(w, "sqlite3_bind");
	for (uint64_t i = 0; i < r->n_samples && ret == 0; i++) {
		const struct ts_sample *t = &r->samples[i];
		int64_t total = r->kv_blocks_per_instance;
		int rc = SQLITE_OK;

		if (t->instance >= 0 && (uint32_t)t->instance < r->n_instances &&
		    r->inst[t->instance].total_blocks > 0)
			total = r->inst[t->instance].total_blocks;
		rc |= sqlite3_bind_int(st, 2, t->instance);
		rc |= sqlite3_bind_int64(st, 3, t->t_ns);
		rc |= sqlite3_bind_int(st, 4, t->queued);
		rc |= sqlite3_bind_int(st, 5, t->running);
		rc |= sqlite3_bind_int(st, 6, t->kv_used_blocks);
		rc |= sqlite3_bind_int64(st, 7, total);
		rc |= metered ? sqlite3_bind_double(st, 8, t->power_w) : sqlite3_bind_null(st, 8);
		ret = step_reset(w, st, rc);
	}
	sqlite3_finalize(st);
	return ret;
}

int results_db_write(const char *dir, const struct run_info *ri,
		     const struct engine_results *r, const char *summary_json,
		     struct ss_error *err)
{
	struct ss_file of;
	struct dbw w = { .err = err };
	int ret;

	ret = outfile_prepare(&of, dir, "results.db", err);
	if (ret < 0)
		return ret;
	ret = ss_db_open(&w.s, of.tmp, of.path, SS_DB_WRITE, &results_db_kind, err);
	if (ret < 0)
		goto fail;
	ret = exec(&w, schema_sql, "schema");
	if (ret < 0)
		goto fail;
	ret = exec(&w, "BEGIN", "begin");
	if (ret < 0)
		goto fail;
	ret = insert_run(&w, ri, summary_json);
	if (ret < 0)
		goto fail;
	ret = insert_requests(&w, r, !run_info_unmetered(ri));
	if (ret < 0)
		goto fail;
	ret = insert_timeseries(&w, r, !run_info_unmetered(ri));
	if (ret < 0)
		goto fail;
	ret = exec(&w, "COMMIT", "commit");
	if (ret < 0)
		goto fail;
	ret = ss_db_close(&w.s, err);
	if (ret < 0) {
		w.s.db = NULL;  /* not closed: statements leaked, a bug caught in tests */
		goto fail;
	}
	return outfile_commit(&of, err);
fail:
	ss_db_close(&w.s, NULL);
	outfile_abort(&of);
	return ret;
}
