/* servesim — the plan database (schema: docs/plan.md).
 *
 * Unlike results.db, which is written whole under a temporary name, the plan
 * database is the plan's journal: every configuration's result is committed
 * as soon as it is known (one INSERT, one transaction), so a plan that is
 * killed and started again with the same database skips what is done.  Rows
 * are keyed by the plan's fingerprint (everything the results depend on
 * besides the configuration: plan_fingerprint()) and the configuration's
 * canonical string; a row also records a hash of its GPU's specification, so
 * a catalog change invalidates it.  WAL journal, synchronous NORMAL: a
 * commit survives the process being killed (not necessarily a power cut,
 * after which the lost results are simply recomputed).  One writer: the
 * plan's parent process (or MPI rank 0).
 *
 * The readable columns are for queries; a stored result is read back from
 * status, max_scale, best and probes (a JSON array of the probes' figures,
 * 17 significant digits, so the values round-trip exactly and a resumed
 * plan prints what a fresh one would).
 *
 * decode_gpu and decode_tp (the decode pool's, equal to gpu and tp unless
 * the configuration mixes pools) came after the first databases of version
 * 1: a database without them gets them (NULL in its older rows) when
 * opened, so it stays version 1, resumable by older and newer builds.  A
 * mixed configuration's gpu_spec hashes both GPUs (plan_config_gpu_hash()).
 *
 * priced_by and outside_grid (plan --rate) came the same way, and with
 * them two more figures per probe (energy per output token, share outside
 * the grids): rows of 12 figures still load (those two unknown); a build
 * from before reads rows of 14 as malformed.
 */
#include "plan.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ss-sqlite.h"

#define PLAN_DB_APP_ID 0x73737066    /* "sspf" */
#define PLAN_DB_VERSION 1

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS plans ("
	" fingerprint TEXT PRIMARY KEY, description TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS plan ("
	" fingerprint TEXT NOT NULL, config TEXT NOT NULL, gpu_spec TEXT NOT NULL,"
	" mode TEXT NOT NULL, gpu TEXT NOT NULL, tp INTEGER NOT NULL,"
	" instances INTEGER NOT NULL, prefill INTEGER NOT NULL, decode INTEGER NOT NULL,"
	" policy TEXT NOT NULL, gpus INTEGER NOT NULL, usd_per_hour REAL,"
	" status TEXT NOT NULL, max_scale REAL NOT NULL, max_rate_rps REAL,"
	" attainment REAL, goodput_rps REAL, ttft_p99_ms REAL, tpot_p99_ms REAL,"
	" best INTEGER NOT NULL, workload_limited INTEGER NOT NULL, probes TEXT NOT NULL,"
	" decode_gpu TEXT, decode_tp INTEGER, priced_by TEXT, outside_grid REAL,"
	" PRIMARY KEY (fingerprint, config));";

struct plan_db {
	/* Budget reset by every entry point: a database that is not what it
	 * claims cannot make one call run forever. */
	struct ss_db s;
	char fingerprint[17];
	sqlite3_stmt *insert;
};

static const struct ss_db_kind plan_db_kind = {
	.noun = "plan database",
	.expect = "a plan database or a new file for --db",
	.busy_ms = 10000,
};

static int db_fail(struct plan_db *d, struct ss_error *err, const char *call)
{
	return ss_db_fail_last(&d->s, call, err);
}

static int exec(struct plan_db *d, const char *sql, struct ss_error *err)
{
	return ss_db_exec(&d->s, sql, NULL, err);
}

static int query_int(struct plan_db *d, const char *sql, int64_t *out, struct ss_error *err)
{
	return ss_db_query_int(&d->s, sql, out, err);
}

/* Add decode_gpu and decode_tp to a plan table created without them. */
static int add_decode_columns(struct plan_db *d, struct ss_error *err)
{
	int64_t have = 0;
	int rc = query_int(d, "SELECT count(*) FROM pragma_table_info('plan')"
			      " WHERE name IN ('decode_gpu', 'decode_tp')", &have, err);

	if (!rc && have == 0)
		rc = exec(d, "ALTER TABLE plan ADD COLUMN decode_gpu TEXT;"
			     " ALTER TABLE plan ADD COLUMN decode_tp INTEGER;", err);
	else if (!rc && have != 2)
		rc = ss_error_set(err, -EINVAL, d->s.path, 0,
				  "plan table with one of decode_gpu, decode_tp; expected both or neither");
	return rc;
}

/* Add priced_by and outside_grid (plan --rate's pricing provenance) to a
 * plan table created without them; older rows read NULL. */
static int add_priced_columns(struct plan_db *d, struct ss_error *err)
{
	int64_t have = 0;
	int rc = query_int(d, "SELECT count(*) FROM pragma_table_info('plan')"
			      " WHERE name IN ('priced_by', 'outside_grid')", &have, err);

	if (!rc && have == 0)
		rc = exec(d, "ALTER TABLE plan ADD COLUMN priced_by TEXT;"
			     " ALTER TABLE plan ADD COLUMN outside_grid REAL;", err);
	else if (!rc && have != 2)
		rc = ss_error_set(err, -EINVAL, d->s.path, 0,
				  "plan table with one of priced_by, outside_grid; expected both or neither");
	return rc;
}

/* A file that is already something else is refused, not written into. */
static int check_kind(struct plan_db *d, struct ss_error *err)
{
	int64_t app = 0, ver = 0, others = 0;
	int rc;

	int64_t code = 0;

	rc = query_int(d, "PRAGMA application_id", &app, err);
	if (!rc)
		rc = query_int(d, "PRAGMA user_version", &ver, err);
	if (!rc)
		rc = query_int(d, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
				  " AND name NOT IN ('plans', 'plan')", &others, err);
	/* Views and triggers are code that our statements would run (a
	 * trigger on INSERT with a recursive query never returns): a plan
	 * database has none, and plans and plan are tables.  (Indexes a user
	 * added for queries are harmless and allowed.) */
	if (!rc)
		rc = query_int(d, "SELECT count(*) FROM sqlite_master WHERE type IN ('view', 'trigger')"
				  " OR (name IN ('plans', 'plan') AND type <> 'table')", &code, err);
	if (rc)
		return rc;
	if ((app != 0 && app != PLAN_DB_APP_ID) || (app == 0 && others > 0))
		return ss_error_set(err, -EINVAL, d->s.path, 0,
				    "not a servesim plan database; expected a plan database or a new file for --db");
	if (code > 0)
		return ss_error_set(err, -EINVAL, d->s.path, 0,
				    "holds views or triggers; expected a plan database, which has"
				    " only the tables plans and plan (start a new --db)");
	if (app == PLAN_DB_APP_ID && ver != PLAN_DB_VERSION)
		return ss_error_set(err, -EINVAL, d->s.path, 0,
				    "plan database version %lld; expected version %d (start a new --db)",
				    (long long)ver, PLAN_DB_VERSION);
	return 0;
}

int plan_db_open(struct plan_db **out, const char *path, const char *fingerprint,
		 const char *description, struct ss_error *err)
{
	struct plan_db *d = calloc(1, sizeof(*d));
	sqlite3_stmt *st = NULL;
	char sql[128];
	int rc;

	*out = NULL;
	if (!d)
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	snprintf(d->fingerprint, sizeof(d->fingerprint), "%s", fingerprint);
	rc = ss_db_open(&d->s, path, NULL, SS_DB_CREATE, &plan_db_kind, err);
	if (rc)
		goto fail;
	rc = check_kind(d, err);
	if (rc)
		goto fail;
	snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; PRAGMA user_version = %d;",
		 PLAN_DB_APP_ID, PLAN_DB_VERSION);
	rc = exec(d, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;", err);
	if (!rc)
		rc = exec(d, sql, err);
	if (!rc)
		rc = exec(d, schema_sql, err);
	if (!rc)
		rc = add_decode_columns(d, err);
	if (!rc)
		rc = add_priced_columns(d, err);
	if (rc)
		goto fail;
	if (sqlite3_prepare_v2(d->s.db, "INSERT OR IGNORE INTO plans (fingerprint, description)"
			       " VALUES (?1, ?2)", -1, &st, NULL) != SQLITE_OK) {
		rc = db_fail(d, err, "sqlite3_prepare_v2");
		goto fail;
	}
	if (sqlite3_bind_text(st, 1, fingerprint, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_text(st, 2, description ? description : "", -1, SQLITE_STATIC) !=
		    SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_DONE) {
		rc = db_fail(d, err, "insert plans");
		goto fail;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (sqlite3_prepare_v2(d->s.db,
			       "INSERT OR REPLACE INTO plan (fingerprint, config, gpu_spec, mode, gpu,"
			       " tp, instances, prefill, decode, policy, gpus, usd_per_hour, status,"
			       " max_scale, max_rate_rps, attainment, goodput_rps, ttft_p99_ms,"
			       " tpot_p99_ms, best, workload_limited, probes, decode_gpu, decode_tp,"
			       " priced_by, outside_grid)"
			       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
			       " ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)",
			       -1, &d->insert, NULL) != SQLITE_OK) {
		rc = db_fail(d, err, "sqlite3_prepare_v2");
		goto fail;
	}
	*out = d;
	return 0;
fail:
	sqlite3_finalize(st);
	plan_db_close(d);
	return rc;
}

void plan_db_close(struct plan_db *d)
{
	if (!d)
		return;
	sqlite3_finalize(d->insert);
	ss_db_close(&d->s, NULL);
	free(d);
}

/* ---- probes as JSON ----------------------------------------------------- */

/* 14 since plan --rate (energy per output token, share outside the
 * grids); rows of 12 (older databases) load with those two NAN and 0;
 * 15 with the nominal attainment of plan --conservative, written only
 * there (so a plan without it stores the rows it stored before) */
#define PROBE_FIELDS 15
#define PROBE_FIELDS_V2 14
#define PROBE_FIELDS_V1 12

static void probe_values(const struct plan_probe *p, double *v)
{
	v[0] = p->scale;
	v[1] = p->rate_rps;
	v[2] = p->attainment;
	v[3] = p->goodput_rps;
	v[4] = p->throughput_rps;
	v[5] = p->ttft_p50_ms;
	v[6] = p->ttft_p99_ms;
	v[7] = p->tpot_p50_ms;
	v[8] = p->tpot_p99_ms;
	v[9] = p->e2e_p99_ms;
	v[10] = p->e2e_mean_ms;
	v[11] = p->span_s;
	v[12] = p->j_per_output_token;
	v[13] = p->outside_grid;
	v[14] = p->attainment_nominal;
}

static void probe_set(struct plan_probe *p, const double *v)
{
	p->scale = v[0];
	p->rate_rps = v[1];
	p->attainment = v[2];
	p->goodput_rps = v[3];
	p->throughput_rps = v[4];
	p->ttft_p50_ms = v[5];
	p->ttft_p99_ms = v[6];
	p->tpot_p50_ms = v[7];
	p->tpot_p99_ms = v[8];
	p->e2e_p99_ms = v[9];
	p->e2e_mean_ms = v[10];
	p->span_s = v[11];
	p->j_per_output_token = v[12];
	p->outside_grid = isfinite(v[13]) ? v[13] : 0;
	p->attainment_nominal = v[14];
}

/* (transfer full) NULL when out of memory. */
static char *probes_dump(const struct plan_result *r)
{
	json_t *a = json_array();
	char *s = NULL;

	if (!a)
		return NULL;
	for (int k = 0; k < r->n_probes; k++) {
		json_t *row = json_array();
		double v[PROBE_FIELDS];
		int nv;

		if (!row || json_array_append_new(a, row))
			goto out;
		probe_values(&r->probes[k], v);
		nv = isfinite(v[14]) ? PROBE_FIELDS : PROBE_FIELDS_V2;
		for (int i = 0; i < nv; i++)
			if (json_array_append_new(row, isfinite(v[i]) ? json_real(v[i]) : json_null()))
				goto out;
	}
	s = json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(17));
out:
	json_decref(a);
	return s;
}

static bool probes_load(const char *text, struct plan_result *r)
{
	json_t *a = json_loads(text, 0, NULL);
	bool ok = json_is_array(a) && json_array_size(a) <= PLAN_MAX_PROBES;

	for (size_t k = 0; ok && k < json_array_size(a); k++) {
		json_t *row = json_array_get(a, k);
		double v[PROBE_FIELDS];
		size_t nv = json_is_array(row) ? json_array_size(row) : 0;

		ok = nv == PROBE_FIELDS || nv == PROBE_FIELDS_V2 || nv == PROBE_FIELDS_V1;
		for (size_t i = nv; i < PROBE_FIELDS; i++)
			v[i] = NAN;
		for (size_t i = 0; ok && i < nv; i++) {
			json_t *x = json_array_get(row, i);

			ok = json_is_number(x) || json_is_null(x);
			v[i] = json_is_number(x) ? json_number_value(x) : NAN;
		}
		if (ok)
			probe_set(&r->probes[k], v);
	}
	if (ok)
		r->n_probes = (int32_t)json_array_size(a);
	json_decref(a);
	return ok;
}

/* ---- load and store ------------------------------------------------------ */

static int key_cmp(const void *a, const void *b)
{
	const struct plan_config *const *x = a, *const *y = b;

	return strcmp((*x)->key, (*y)->key);
}

int plan_db_load(struct plan_db *d, const struct plan_config *cfg, size_t n,
		 struct plan_result *res, bool *done, size_t *n_done, struct ss_error *err)
{
	const struct plan_config **by_key = malloc((n ? n : 1) * sizeof(*by_key));
	sqlite3_stmt *st = NULL;
	int rc = 0, s;

	ss_db_budget_reset(&d->s);
	*n_done = 0;
	for (size_t i = 0; i < n; i++)
		done[i] = false;
	if (!by_key)
		return ss_error_set(err, -ENOMEM, d->s.path, 0, "out of memory");
	for (size_t i = 0; i < n; i++)
		by_key[i] = &cfg[i];
	qsort(by_key, n, sizeof(*by_key), key_cmp);
	if (sqlite3_prepare_v2(d->s.db, "SELECT config, gpu_spec, status, max_scale, best, probes,"
			       " workload_limited"
			       " FROM plan WHERE fingerprint = ?1", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_bind_text(st, 1, d->fingerprint, -1, SQLITE_STATIC) != SQLITE_OK) {
		rc = db_fail(d, err, "select plan");
		goto out;
	}
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(st, 0);
		const char *gspec = (const char *)sqlite3_column_text(st, 1);
		const char *status = (const char *)sqlite3_column_text(st, 2);
		const char *probes = (const char *)sqlite3_column_text(st, 5);
		struct plan_config probe_key, *pk = &probe_key;
		const struct plan_config **hit;
		struct plan_result r;
		enum plan_status stv;
		char hex[17];
		size_t i;

		if (!key || !gspec || !status || !probes || strlen(key) >= sizeof(pk->key))
			continue;
		snprintf(pk->key, sizeof(pk->key), "%s", key);
		hit = bsearch(&pk, by_key, n, sizeof(*by_key), key_cmp);
		if (!hit)
			continue;    /* a configuration of another search space */
		i = (size_t)(*hit - cfg);
		snprintf(hex, sizeof(hex), "%016llx",
			 (unsigned long long)plan_config_gpu_hash(&cfg[i]));
		if (strcmp(hex, gspec) != 0)
			continue;    /* a GPU's specification changed: recompute */
		memset(&r, 0, sizeof(r));
		r.index = cfg[i].index;
		if (plan_status_from_name(status, &stv) || stv == PLAN_FAILED || stv == PLAN_BELOW ||
		    stv == PLAN_SKIPPED) {
			rc = ss_error_set(err, -EINVAL, d->s.path, 0,
					  "configuration '%s': unexpected status '%s'", key, status);
			goto out;
		}
		r.status = stv;
		r.max_scale = sqlite3_column_double(st, 3);
		r.best = sqlite3_column_int(st, 4);
		r.workload_limited = sqlite3_column_int(st, 6);
		if (!probes_load(probes, &r) || r.n_probes < 1 || r.best < -1 ||
		    r.best >= r.n_probes) {
			rc = ss_error_set(err, -EINVAL, d->s.path, 0,
					  "configuration '%s': malformed probes", key);
			goto out;
		}
		res[i] = r;
		if (!done[i])
			(*n_done)++;
		done[i] = true;
	}
	if (s != SQLITE_DONE)
		rc = db_fail(d, err, "sqlite3_step (select plan)");
out:
	sqlite3_finalize(st);
	free(by_key);
	return rc;
}

static int bind_real(sqlite3_stmt *st, int i, double v)
{
	return isfinite(v) ? sqlite3_bind_double(st, i, v) : sqlite3_bind_null(st, i);
}

int plan_db_store(struct plan_db *d, const struct plan_config *c,
		  const struct plan_result *r, struct ss_error *err)
{
	return plan_db_store_priced(d, c, r, NULL, err);
}

int plan_db_store_priced(struct plan_db *d, const struct plan_config *c,
			 const struct plan_result *r, const char *priced_by, struct ss_error *err)
{
	const struct plan_probe *b = plan_result_best(r);
	sqlite3_stmt *st = d->insert;
	char hex[17], *probes;
	int rc = SQLITE_OK, ret = 0;

	if (r->status == PLAN_FAILED || r->status == PLAN_BELOW || r->status == PLAN_SKIPPED)
		return 0;   /* BELOW depends on --rate, which the fingerprint leaves out */
	ss_db_budget_reset(&d->s);
	probes = probes_dump(r);
	if (!probes)
		return ss_error_set(err, -ENOMEM, d->s.path, 0, "out of memory");
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)plan_config_gpu_hash(c));
	rc |= sqlite3_bind_text(st, 1, d->fingerprint, -1, SQLITE_STATIC);
	rc |= sqlite3_bind_text(st, 2, c->key, -1, SQLITE_STATIC);
	rc |= sqlite3_bind_text(st, 3, hex, -1, SQLITE_STATIC);
	rc |= sqlite3_bind_text(st, 4, plan_mode_name(c->mode), -1, SQLITE_STATIC);
	rc |= sqlite3_bind_text(st, 5, c->gpu->name, -1, SQLITE_STATIC);
	rc |= sqlite3_bind_int(st, 6, c->tp);
	rc |= sqlite3_bind_int64(st, 7, c->instances);
	rc |= sqlite3_bind_int64(st, 8, c->n_prefill);
	rc |= sqlite3_bind_int64(st, 9, c->n_decode);
	rc |= sqlite3_bind_text(st, 10, c->policy_spec, -1, SQLITE_STATIC);
	rc |= sqlite3_bind_int(st, 11, c->gpus);
	rc |= c->usd_per_hour > 0 ? sqlite3_bind_double(st, 12, c->usd_per_hour) :
				    sqlite3_bind_null(st, 12);
	rc |= sqlite3_bind_text(st, 13, plan_status_name((enum plan_status)r->status), -1,
				SQLITE_STATIC);
	rc |= sqlite3_bind_double(st, 14, r->max_scale);
	rc |= bind_real(st, 15, b ? b->rate_rps : NAN);
	rc |= bind_real(st, 16, b ? b->attainment : NAN);
	rc |= bind_real(st, 17, b ? b->rate_rps * b->attainment : NAN);   /* as plan_figures() */
	rc |= bind_real(st, 18, b ? b->ttft_p99_ms : NAN);
	rc |= bind_real(st, 19, b ? b->tpot_p99_ms : NAN);
	rc |= sqlite3_bind_int(st, 20, r->best);
	rc |= sqlite3_bind_int(st, 21, r->workload_limited);
	rc |= sqlite3_bind_text(st, 22, probes, -1, SQLITE_STATIC);
	rc |= sqlite3_bind_text(st, 23, plan_config_decode_gpu(c)->name, -1, SQLITE_STATIC);
	rc |= sqlite3_bind_int(st, 24, plan_config_decode_tp(c));
	rc |= priced_by ? sqlite3_bind_text(st, 25, priced_by, -1, SQLITE_STATIC) :
			  sqlite3_bind_null(st, 25);
	rc |= bind_real(st, 26, b ? b->outside_grid : NAN);
	if (rc != SQLITE_OK)
		ret = db_fail(d, err, "sqlite3_bind (plan)");
	else if (sqlite3_step(st) != SQLITE_DONE)
		ret = db_fail(d, err, "insert plan");
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	free(probes);
	return ret;
}

int plan_db_count(struct plan_db *d, int64_t *n, struct ss_error *err)
{
	sqlite3_stmt *st = NULL;
	int rc = 0;

	ss_db_budget_reset(&d->s);
	if (sqlite3_prepare_v2(d->s.db, "SELECT count(*) FROM plan WHERE fingerprint = ?1", -1, &st,
			       NULL) != SQLITE_OK ||
	    sqlite3_bind_text(st, 1, d->fingerprint, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		rc = db_fail(d, err, "count plan");
	else
		*n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return rc;
}
