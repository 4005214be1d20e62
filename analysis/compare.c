/* servesim — comparing two runs (see compare.h). */
#include "compare.h"

#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ss-sqlite.h"

#include "hist.h"
#include "metrics.h"

#define NS_PER_MS 1e6

void run_data_init(struct run_data *rd)
{
	memset(rd, 0, sizeof(*rd));
}

void run_data_release(struct run_data *rd)
{
	if (!rd)
		return;
	free(rd->prompt);
	free(rd->output);
	free(rd->finished);
	free(rd->ttft_ms);
	free(rd->tpot_ms);
	free(rd->e2e_ms);
	json_decref(rd->summary);
	run_data_init(rd);
}

/* A results.db is data written by `run --out`: its runs, requests and
 * summary are tables and it holds no views or triggers (a view is code
 * that a SELECT runs: a recursive one never returns).  The whole load runs
 * under one instruction budget (ss-sqlite.h), so a database that is not
 * what it claims cannot make compare run forever. */
static const struct ss_db_kind results_db_kind = {
	.noun = "results database",
	.expect = "the --out directory of a servesim run",
};

static int results_db_check(struct ss_db *d, struct ss_error *err)
{
	sqlite3_stmt *st = NULL;
	int64_t bad = -1;

	if (sqlite3_prepare_v2(d->db, "SELECT count(*) FROM sqlite_master WHERE type IN ('view', 'trigger')"
			       " OR (name IN ('runs', 'requests', 'summary') AND type <> 'table')",
			       -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		bad = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (bad != 0)
		return ss_error_set(err, -EINVAL, d->path, 0,
				    "not a servesim results database (expected tables runs, requests,"
				    " summary and no views or triggers)");
	return 0;
}

static int alloc_arrays(struct run_data *rd, uint64_t n)
{
	size_t k = n ? n : 1;

	rd->n = n;
	rd->prompt = calloc(k, sizeof(*rd->prompt));
	rd->output = calloc(k, sizeof(*rd->output));
	rd->finished = calloc(k, sizeof(*rd->finished));
	rd->ttft_ms = malloc(k * sizeof(double));
	rd->tpot_ms = malloc(k * sizeof(double));
	rd->e2e_ms = malloc(k * sizeof(double));
	if (!rd->prompt || !rd->output || !rd->finished || !rd->ttft_ms || !rd->tpot_ms ||
	    !rd->e2e_ms)
		return -ENOMEM;
	for (uint64_t i = 0; i < k; i++)
		rd->ttft_ms[i] = rd->tpot_ms[i] = rd->e2e_ms[i] = NAN;
	return 0;
}

/* Column col of a request row as a token count: an integer in 0..2^31-1. */
static int column_count(sqlite3_stmt *st, int col, const char *name, int64_t id, int64_t *v,
			const char *path, struct ss_error *err)
{
	*v = sqlite3_column_int64(st, col);
	if (sqlite3_column_type(st, col) != SQLITE_INTEGER || *v < 0 || *v > INT32_MAX)
		return ss_error_set(err, -EINVAL, path, 0,
				    "request %lld: %s '%s': expected an integer in 0..%d",
				    (long long)id, name,
				    sqlite3_column_text(st, col) ?
					    (const char *)sqlite3_column_text(st, col) : "NULL",
				    INT32_MAX);
	return 0;
}

/* Column col of a finished request's row as a time: an integer >= 0 ns. */
static int column_time(sqlite3_stmt *st, int col, const char *name, int64_t id, int64_t *v,
		       const char *path, struct ss_error *err)
{
	*v = sqlite3_column_int64(st, col);
	if (sqlite3_column_type(st, col) != SQLITE_INTEGER || *v < 0)
		return ss_error_set(err, -EINVAL, path, 0,
				    "finished request %lld: %s '%s': expected a time >= 0 ns",
				    (long long)id, name,
				    sqlite3_column_text(st, col) ?
					    (const char *)sqlite3_column_text(st, col) : "NULL");
	return 0;
}

/* The summary figures compare reads, every entry of the metric catalog
 * (analysis/metrics.def; none is negative), where present, must be finite
 * and >= 0. */
static int check_summary(json_t *sum, const char *path, struct ss_error *err)
{
	for (int m = 0; m < METRIC_COUNT; m++) {
		const struct metric_desc *d = metric_desc((enum metric_id)m);
		json_t *o = json_object_get(sum, d->json);
		double v;

		if (o && d->sub)
			o = json_object_get(o, d->sub);
		if (!o || json_is_null(o))
			continue;
		v = json_is_number(o) ? json_number_value(o) : NAN;
		if (!isfinite(v) || v < 0)
			return ss_error_set(err, -EINVAL, path, 0,
					    "summary: %s%s%s is not a number >= 0", d->json,
					    d->sub ? "." : "", d->sub ? d->sub : "");
	}
	return 0;
}

int run_data_load(struct run_data *rd, const char *dir, struct ss_error *err)
{
	char path[1200];
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	uint8_t *seen = NULL;     /* ids read so far */
	struct ss_db sdb = { 0 };
	int rc = 0;
	int64_t n = 0;

	run_data_release(rd);
	snprintf(rd->dir, sizeof(rd->dir), "%s", dir);
	snprintf(path, sizeof(path), "%s/results.db", dir);
	rc = ss_db_open(&sdb, path, NULL, SS_DB_READ, &results_db_kind, err);
	if (rc)
		goto out;
	db = sdb.db;
	rc = results_db_check(&sdb, err);
	if (rc)
		goto out;
	if (sqlite3_prepare_v2(db, "SELECT r.mode, (SELECT count(*) FROM requests),"
			       " (SELECT json FROM summary LIMIT 1) FROM runs r LIMIT 1", -1, &st,
			       NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW) {
		rc = ss_error_set(err, -EINVAL, path, 0,
				  "not a servesim results database (expected tables runs, requests, summary)");
		goto out;
	}
	snprintf(rd->mode, sizeof(rd->mode), "%s",
		 sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "?");
	n = sqlite3_column_int64(st, 1);
	if (sqlite3_column_text(st, 2)) {
		json_error_t jerr;

		rd->summary = json_loads((const char *)sqlite3_column_text(st, 2), 0, &jerr);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (!rd->summary) {
		rc = ss_error_set(err, -EINVAL, path, 0, "summary table holds no readable summary");
		goto out;
	}
	if (alloc_arrays(rd, (uint64_t)n)) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	if (sqlite3_prepare_v2(db, "SELECT id, state, arrival_ns, prompt_tokens, output_tokens,"
			       " first_token_ns, finish_ns FROM requests", -1, &st,
			       NULL) != SQLITE_OK) {
		rc = ss_db_fail_last(&sdb, "cannot read requests", err);
		goto out;
	}
	seen = calloc(n ? (size_t)n : 1, 1);
	if (!seen) {
		rc = ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		const char *state = (const char *)sqlite3_column_text(st, 1);
		int64_t arr, ft, fin, prompt, out_tok;

		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || id < 0 || id >= n) {
			rc = ss_error_set(err, -EINVAL, path, 0,
					  "requests: id %s out of range: expected 0..%lld",
					  sqlite3_column_text(st, 0) ?
						  (const char *)sqlite3_column_text(st, 0) : "NULL",
					  (long long)n - 1);
			goto out;
		}
		if (seen[id]) {
			rc = ss_error_set(err, -EINVAL, path, 0,
					  "requests: id %lld appears twice: expected one row per request",
					  (long long)id);
			goto out;
		}
		seen[id] = 1;
		rc = column_count(st, 3, "prompt_tokens", id, &prompt, path, err);
		if (!rc)
			rc = column_count(st, 4, "output_tokens", id, &out_tok, path, err);
		if (rc)
			goto out;
		rd->prompt[id] = (int32_t)prompt;
		rd->output[id] = (int32_t)out_tok;
		rd->finished[id] = state && !strcmp(state, "finished");
		if (!rd->finished[id])
			continue;
		/* A finished request has all three times, in order, all >= 0:
		 * then the differences below cannot overflow. */
		rc = column_time(st, 2, "arrival_ns", id, &arr, path, err);
		if (!rc)
			rc = column_time(st, 5, "first_token_ns", id, &ft, path, err);
		if (!rc)
			rc = column_time(st, 6, "finish_ns", id, &fin, path, err);
		if (!rc && (ft < arr || fin < ft))
			rc = ss_error_set(err, -EINVAL, path, 0,
					  "request %lld: arrival %lld, first token %lld, finish %lld ns: expected arrival <= first token <= finish",
					  (long long)id, (long long)arr, (long long)ft, (long long)fin);
		if (rc)
			goto out;
		rd->ttft_ms[id] = (double)(ft - arr) / NS_PER_MS;
		rd->e2e_ms[id] = (double)(fin - arr) / NS_PER_MS;
		if (out_tok > 1)
			rd->tpot_ms[id] = (double)(fin - ft) / NS_PER_MS / (double)(out_tok - 1);
	}
	if (rc != SQLITE_DONE) {
		rc = ss_db_fail_last(&sdb, "cannot read requests", err);
		goto out;
	}
	rc = check_summary(rd->summary, path, err);
out:
	free(seen);
	sqlite3_finalize(st);
	ss_db_close(&sdb, NULL);
	if (rc)
		run_data_release(rd);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sorted copy of the finite values of v[0..n) into buf; returns count. */
static uint64_t sorted_finite(const double *v, uint64_t n, double *buf)
{
	uint64_t k = 0;

	for (uint64_t i = 0; i < n; i++)
		if (isfinite(v[i]))
			buf[k++] = v[i];
	qsort(buf, k, sizeof(double), cmp_double);
	return k;
}

static const double pcts[3] = { 0.50, 0.90, 0.99 };

static double pct_err(double ref, double other)
{
	return ref > 0 ? 100.0 * (other - ref) / ref : NAN;
}

static void per_request(struct cmp_metric *m, const double *ref, const double *other,
			uint64_t n, double *buf, double *buf2)
{
	uint64_t k = 0, na, nb;
	double sum = 0;

	for (uint64_t i = 0; i < n; i++)
		if (isfinite(ref[i]) && isfinite(other[i]) && ref[i] > 0) {
			buf[k] = 100.0 * fabs(other[i] - ref[i]) / ref[i];
			sum += buf[k++];
		}
	m->n_matched = k;
	m->mape_pct = k ? sum / (double)k : NAN;
	qsort(buf, k, sizeof(double), cmp_double);
	m->p50_ape_pct = k ? ss_quantile_sorted(buf, k, 0.5) : NAN;
	m->p90_ape_pct = k ? ss_quantile_sorted(buf, k, 0.9) : NAN;
	na = sorted_finite(ref, n, buf);
	nb = sorted_finite(other, n, buf2);
	for (int p = 0; p < 3; p++) {
		m->ref[p] = na ? ss_quantile_sorted(buf, na, pcts[p]) : NAN;
		m->other[p] = nb ? ss_quantile_sorted(buf2, nb, pcts[p]) : NAN;
		m->err_pct[p] = pct_err(m->ref[p], m->other[p]);
	}
}

int compare_runs(const struct run_data *ref, const struct run_data *other,
		 struct cmp_result *out, struct ss_error *err)
{
	static const char *const names[CMP_N_METRICS] = { "ttft_ms", "tpot_ms", "e2e_ms", "itl_ms" };
	static const enum metric_id itl[3] = { METRIC_ITL_P50, METRIC_ITL_P90, METRIC_ITL_P99 };
	double *buf, *buf2;

	memset(out, 0, sizeof(*out));
	if (ref->n != other->n)
		return ss_error_set(err, -EINVAL, other->dir, 0,
				    "%llu requests, %s has %llu: expected two runs of the same trace",
				    (unsigned long long)other->n, ref->dir,
				    (unsigned long long)ref->n);
	for (uint64_t i = 0; i < ref->n; i++)
		if (ref->prompt[i] != other->prompt[i] || ref->output[i] != other->output[i])
			return ss_error_set(err, -EINVAL, other->dir, 0,
					    "request %llu has %d/%d prompt/output tokens, %d/%d in %s: expected two runs of the same trace",
					    (unsigned long long)i, other->prompt[i], other->output[i],
					    ref->prompt[i], ref->output[i], ref->dir);
	buf = malloc((ref->n ? ref->n : 1) * sizeof(double));
	buf2 = malloc((ref->n ? ref->n : 1) * sizeof(double));
	if (!buf || !buf2) {
		free(buf);
		free(buf2);
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	}
	out->n_requests = ref->n;
	for (int k = 0; k < CMP_N_METRICS; k++)
		out->m[k].name = names[k];
	per_request(&out->m[CMP_TTFT], ref->ttft_ms, other->ttft_ms, ref->n, buf, buf2);
	per_request(&out->m[CMP_TPOT], ref->tpot_ms, other->tpot_ms, ref->n, buf, buf2);
	per_request(&out->m[CMP_E2E], ref->e2e_ms, other->e2e_ms, ref->n, buf, buf2);
	/* ITL: every token gap, only as percentiles in each run's summary */
	out->m[CMP_ITL].mape_pct = out->m[CMP_ITL].p50_ape_pct = out->m[CMP_ITL].p90_ape_pct = NAN;
	for (int p = 0; p < 3; p++) {
		out->m[CMP_ITL].ref[p] = metric_json_get(ref->summary, itl[p]);
		out->m[CMP_ITL].other[p] = metric_json_get(other->summary, itl[p]);
		out->m[CMP_ITL].err_pct[p] = pct_err(out->m[CMP_ITL].ref[p], out->m[CMP_ITL].other[p]);
	}
	out->ref_rps = metric_json_get(ref->summary, METRIC_REQ_S);
	out->other_rps = metric_json_get(other->summary, METRIC_REQ_S);
	out->rps_err_pct = pct_err(out->ref_rps, out->other_rps);
	out->ref_otps = metric_json_get(ref->summary, METRIC_OUT_TOK_S);
	out->other_otps = metric_json_get(other->summary, METRIC_OUT_TOK_S);
	out->otps_err_pct = pct_err(out->ref_otps, out->other_otps);
	free(buf);
	free(buf2);
	return 0;
}

void compare_print(FILE *f, const struct run_data *ref, const struct run_data *other,
		   const struct cmp_result *c)
{
	fprintf(f, "reference: %s (%s)\nother:     %s (%s)\n%llu requests\n\n", ref->dir,
		ref->mode, other->dir, other->mode, (unsigned long long)c->n_requests);
	fprintf(f, "  %-5s %8s %8s %8s   %10s %10s %8s   %10s %10s %8s\n", "", "MAPE %", "p50 APE",
		"p90 APE", "p50 ref", "p50 other", "err %", "p99 ref", "p99 other", "err %");
	for (int k = 0; k < CMP_N_METRICS; k++) {
		static const char *const label[CMP_N_METRICS] = { "TTFT", "TPOT", "E2E", "ITL" };
		const struct cmp_metric *m = &c->m[k];
		char mape[3][16];

		/* per-request errors do not exist for ITL (gaps are not stored) */
		if (isfinite(m->mape_pct))
			snprintf(mape[0], sizeof(mape[0]), "%8.2f", m->mape_pct);
		else
			snprintf(mape[0], sizeof(mape[0]), "%8s", "-");
		if (isfinite(m->p50_ape_pct))
			snprintf(mape[1], sizeof(mape[1]), "%8.2f", m->p50_ape_pct);
		else
			snprintf(mape[1], sizeof(mape[1]), "%8s", "-");
		if (isfinite(m->p90_ape_pct))
			snprintf(mape[2], sizeof(mape[2]), "%8.2f", m->p90_ape_pct);
		else
			snprintf(mape[2], sizeof(mape[2]), "%8s", "-");
		fprintf(f, "  %-5s %s %s %s   %10.3f %10.3f %+8.2f   %10.3f %10.3f %+8.2f\n",
			label[k], mape[0], mape[1], mape[2], m->ref[0], m->other[0],
			m->err_pct[0], m->ref[2], m->other[2], m->err_pct[2]);
	}
	fprintf(f, "\n  throughput: %.3f vs %.3f req/s (%+.2f%%), %.1f vs %.1f output tok/s (%+.2f%%)\n",
		c->ref_rps, c->other_rps, c->rps_err_pct, c->ref_otps, c->other_otps,
		c->otps_err_pct);
	fprintf(f, "  (ms; errors are other relative to reference; ITL percentiles from each run's summary)\n");
}

static json_t *jnum(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

json_t *compare_json(const struct run_data *ref, const struct run_data *other,
		     const struct cmp_result *c)
{
	static const char *const pnames[3] = { "p50", "p90", "p99" };
	json_t *o = json_object(), *metrics = json_object();

	if (!o || !metrics) {
		json_decref(o);
		json_decref(metrics);
		return NULL;
	}
	json_object_set_new(o, "reference", json_pack("{s:s, s:s}", "dir", ref->dir, "mode", ref->mode));
	json_object_set_new(o, "other", json_pack("{s:s, s:s}", "dir", other->dir, "mode", other->mode));
	json_object_set_new(o, "requests", json_integer((json_int_t)c->n_requests));
	for (int k = 0; k < CMP_N_METRICS; k++) {
		const struct cmp_metric *m = &c->m[k];
		json_t *t = json_object(), *pr = json_object();

		json_object_set_new(t, "n_matched", json_integer((json_int_t)m->n_matched));
		json_object_set_new(t, "mape_pct", jnum(m->mape_pct));
		json_object_set_new(t, "p50_ape_pct", jnum(m->p50_ape_pct));
		json_object_set_new(t, "p90_ape_pct", jnum(m->p90_ape_pct));
		for (int p = 0; p < 3; p++)
			json_object_set_new(pr, pnames[p],
					    json_pack("{s:o, s:o, s:o}", "reference", jnum(m->ref[p]),
						      "other", jnum(m->other[p]), "err_pct",
						      jnum(m->err_pct[p])));
		json_object_set_new(t, "percentiles", pr);
		json_object_set_new(metrics, m->name, t);
	}
	json_object_set_new(o, "metrics", metrics);
	json_object_set_new(o, "throughput",
			    json_pack("{s:{s:o, s:o, s:o}, s:{s:o, s:o, s:o}}",
				      "requests_per_s", "reference", jnum(c->ref_rps), "other",
				      jnum(c->other_rps), "err_pct", jnum(c->rps_err_pct),
				      "output_tokens_per_s", "reference", jnum(c->ref_otps), "other",
				      jnum(c->other_otps), "err_pct", jnum(c->otps_err_pct)));
	return o;
}
