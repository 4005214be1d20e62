/* Behaviours of analysis/report: summary.json's contract, the text summary,
 * and the output directory (every file, atomically, with clean failures). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "report.h"
#include "report-int.h"

#include "check-main.h"

#define MS 1000000LL
#define N_REQ 6
#define N_SAMPLES 40

static struct req_record reqs[N_REQ];
static struct instance_stats *inst;
static struct ss_hist *itl;
static struct ts_sample samples[N_SAMPLES];
static struct engine_results res;
static struct summary sum;
static struct run_info ri;
static char tmpdir[64];

static void set_req(struct req_record *q, uint32_t id, enum req_state st, int64_t arr,
		    int64_t sched, int64_t first, int64_t fin, int32_t prompt, int32_t out)
{
	memset(q, 0, sizeof(*q));
	q->id = id;
	q->state = st;
	q->arrival_ns = arr * MS;
	q->first_sched_ns = sched >= 0 ? sched * MS : -1;
	q->first_token_ns = first >= 0 ? first * MS : -1;
	q->finish_ns = fin >= 0 ? fin * MS : -1;
	q->prompt_tokens = prompt;
	q->output_tokens = out;
	q->generated_tokens = st == REQ_FINISHED ? out : 0;
	q->instance = st == REQ_FINISHED ? (int32_t)(id % 2) : -1;
	q->energy_j = st == REQ_FINISHED ? 1.25 * (id + 1) : 0;
}

static void rm_rf(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	char p[4096];

	if (lstat(path, &st) < 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		unlink(path);
		return;
	}
	d = opendir(path);
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		rm_rf(p);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

static void setup(void)
{
	struct slo_config slo = { .ttft_ms = 400, .tpot_ms = 150 };

	set_req(&reqs[0], 0, REQ_FINISHED, 0, 0, 100, 1000, 100, 10);
	set_req(&reqs[1], 1, REQ_FINISHED, 100, 150, 300, 900, 200, 5);
	set_req(&reqs[2], 2, REQ_FINISHED, 200, 400, 600, 600, 300, 1);
	set_req(&reqs[3], 3, REQ_FINISHED, 300, 300, 1100, 2300, 400, 7);
	set_req(&reqs[4], 4, REQ_REJECTED, 400, -1, -1, -1, 9000, 10);
	set_req(&reqs[5], 5, REQ_FINISHED, 450, 460, 470, 1470, 64, 101);
	reqs[4].reject_reason = "prompt_too_long";
	reqs[1].preemptions = 2;
	reqs[3].tenant = 3;
	reqs[3].tenant_id = 3;
	reqs[3].priority = -1;

	inst = calloc(2, sizeof(*inst));
	itl = malloc(sizeof(*itl));
	ck_assert_ptr_nonnull(inst);
	ck_assert_ptr_nonnull(itl);
	ck_assert_int_eq(ss_hist_init(itl), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(ss_hist_init(&inst[i].batch_seqs), 0);
		ck_assert_int_eq(ss_hist_init(&inst[i].batch_tokens), 0);
		inst[i].total_blocks = 100;
		inst[i].peak_used_blocks = 40 + 20 * i;
		inst[i].kv_block_ns = 30.0 * 2.5e9;
		inst[i].steps = 20;
		inst[i].busy_ns = 2000 * MS;
		inst[i].busy_energy_j = 800;
		inst[i].op_ns[COST_OP_GEMM] = 1400 * MS;
		inst[i].op_ns[COST_OP_ATTN_DECODE] = 600 * MS;
		for (int v = 1; v <= 20; v++) {
			ss_hist_add(&inst[i].batch_seqs, 1 + v % 4);
			ss_hist_add(&inst[i].batch_tokens, 64 * (1 + v % 4));
		}
	}
	for (int v = 1; v <= 100; v++)
		ss_hist_add(itl, (5 + v % 20) * MS);
	/* every 125 ms, both instances: a queue that builds and drains */
	for (int k = 0; k < N_SAMPLES; k++) {
		struct ts_sample *t = &samples[k];

		t->t_ns = (k / 2) * 125 * MS;
		t->instance = k % 2;
		t->queued = (k / 2) < 10 ? k / 2 : 20 - k / 2;
		t->running = 1 + (k / 2) % 4 + t->instance;
		t->kv_used_blocks = 5 * t->running;
	}

	memset(&res, 0, sizeof(res));
	res.req = reqs;
	res.n_req = N_REQ;
	res.n_instances = 2;
	res.inst = inst;
	res.itl = itl;
	res.samples = samples;
	res.n_samples = N_SAMPLES;
	res.end_ns = 2500 * MS;
	res.kv_blocks_per_instance = 100;
	res.idle_power_w = 100;
	res.cost_model_name = "constant";

	ri = (struct run_info){
		.version = "0.1.0-test", .mode = "sim", .seed = 42,
		.model = "llama-3-8b", .gpu = "H100-SXM", .tp = 1, .n_instances = 2,
		.policy = "vllm", .router = "rr", .cost_model = "constant",
		.workload = "hand-made", .config = json_pack("{s:s, s:i}", "policy", "vllm", "seed", 42),
	};
	ck_assert_ptr_nonnull(ri.config);
	ck_assert_int_eq(summary_compute(&sum, &res, &slo, ri.tp, NULL), 0);
	strcpy(tmpdir, "/tmp/ss-test-report-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	rm_rf(tmpdir);
	json_decref(ri.config);
	for (int i = 0; i < 2; i++) {
		ss_hist_release(&inst[i].batch_seqs);
		ss_hist_release(&inst[i].batch_tokens);
	}
	ss_hist_release(itl);
	free(inst);
	free(itl);
}

/* dir/name in one of a few rotating buffers (never nest two calls). */
static const char *path_in(const char *dir, const char *name)
{
	static char buf[4][1024];
	static int k;
	int n;

	k = (k + 1) % 4;
	n = snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	ck_assert(n > 0 && (size_t)n < sizeof(buf[k]));
	return buf[k];
}

static bool exists(const char *dir, const char *name)
{
	char p[1024];
	int n = snprintf(p, sizeof(p), "%s/%s", dir, name);

	ck_assert(n > 0 && (size_t)n < sizeof(p));
	return access(p, F_OK) == 0;
}

/* Files in dir whose name ends in .tmp (hidden ones included). */
static int count_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (len >= 4 && !strcmp(e->d_name + len - 4, ".tmp"))
			n++;
	}
	closedir(d);
	return n;
}

static bool gnuplot_on_path(void)
{
	const char *path = getenv("PATH");
	char dir[1024];

	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(dir, sizeof(dir), "%.*s", (int)n, path);
		if (n && exists(dir, "gnuplot"))
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

static long count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	long n = 0;
	int c;

	ck_assert_ptr_nonnull(f);
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long len;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)len, f), len);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

static long long db_count(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long long n;

	ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n;
}

/* ---- summary.json ------------------------------------------------------- */

/* The figure of catalog entry d in text: a value as the catalog formats
 * it (scale, decimals), J per output token with the energy line's 4
 * decimals; a distribution's statistic in its row of the latency table
 * ("  TTFT ...", the first word of its label), with the table's 3. */
static bool text_has_figure(const char *text, const struct metric_desc *d, double v)
{
	char want[64], row[32];
	const char *at;

	if (!d->dist) {
		if (d->energy)
			snprintf(want, sizeof(want), "%.4f J/output token", v);
		else
			snprintf(want, sizeof(want), " %.*f", d->decimals, d->scale * v);
		return strstr(text, want) != NULL;
	}
	snprintf(row, sizeof(row), "\n  %.*s ", (int)strcspn(d->label, " "), d->label);
	at = strstr(text, row);
	snprintf(want, sizeof(want), " %.3f ", v);
	return at && strstr(at + 1, want) && strstr(at + 1, want) < strchr(at + 1, '\n');
}

/* Every entry of the metric catalog (analysis/metrics.def) is where it
 * says in summary.json, in results.db's copy of it and in summary.txt,
 * with the figure the summary holds (null where NaN), and its get() is
 * that figure or NaN: the sweep and compare read the figures by the
 * catalog, so an entry that drifted from an output would make them read
 * another figure than the one written, and an entry added to the catalog
 * is in every output. */
START_TEST(metric_catalog_matches_summary_json)
{
	struct ss_error err = { 0 };
	struct plot_outcome po = { 0 };
	json_t *j = report_summary_json(&sum, &ri);
	char out[512], path[160], *text;
	sqlite3 *db;

	ck_assert_ptr_nonnull(j);
	snprintf(out, sizeof(out), "%s/catalog", tmpdir);
	ck_assert_msg(report_write_dir(out, &sum, &ri, &res, &po, &err) == 0, "%s", err.msg);
	text = slurp(path_in(out, "summary.txt"));
	ck_assert_int_eq(sqlite3_open_v2(path_in(out, "results.db"), &db, SQLITE_OPEN_READONLY,
					 NULL), SQLITE_OK);
	for (int m = 0; m < METRIC_COUNT; m++) {
		const struct metric_desc *d = metric_desc((enum metric_id)m);
		json_t *o = json_object_get(j, d->json);
		double want = metric_value(d, &sum), got = d->get(&sum);
		sqlite3_stmt *st;

		ck_assert_msg(o, "%s: no %s in summary.json", d->name, d->json);
		if (d->sub)
			o = json_object_get(o, d->sub);
		ck_assert_msg(o, "%s: no %s.%s in summary.json", d->name, d->json, d->sub);
		ck_assert_int_eq(metric_find(d->name), m);
		ck_assert_msg(isnan(got) || got == want, "%s: get() %g, the summary %g", d->name,
			      got, want);
		if (isnan(want)) {
			ck_assert_msg(json_is_null(o), "%s: expected null", d->name);
		} else {
			ck_assert_msg(json_is_number(o) && json_number_value(o) == want,
				      "%s: summary.json has %g, the summary %g", d->name,
				      json_number_value(o), want);
			ck_assert(metric_json_get(j, (enum metric_id)m) == want);
			ck_assert_msg(text_has_figure(text, d, want), "%s: %g not in summary.txt",
				      d->name, want);
		}
		/* results.db's summary table: the same figure at the same place */
		snprintf(path, sizeof(path), "$.%s%s%s", d->json, d->sub ? "." : "",
			 d->sub ? d->sub : "");
		ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT json_extract(json, ?1) FROM summary",
						    -1, &st, NULL), SQLITE_OK);
		sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
		ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
		if (isnan(want))
			ck_assert_int_eq(sqlite3_column_type(st, 0), SQLITE_NULL);
		else    /* summary.json's text has 10 significant digits (REPORT_JSON_FLAGS) */
			ck_assert_msg(fabs(sqlite3_column_double(st, 0) - want) <= 1e-9 * fabs(want),
				      "%s: results.db has %g at %s, the summary %g", d->name,
				      sqlite3_column_double(st, 0), path, want);
		sqlite3_finalize(st);
	}
	/* every figure had its place in the prose: no line of others */
	ck_assert_ptr_null(strstr(text, "other figures"));
	ck_assert_int_eq(metric_find("no_such_metric"), -1);
	sqlite3_close(db);
	free(text);
	json_decref(j);
}
END_TEST

/* An entry the text's prose does not print (here, as if new: its bit
 * clear) is on the last line, labelled and formatted by the catalog. */
START_TEST(text_lists_catalogued_figures_it_has_no_place_for)
{
	const struct metric_desc *e2e = metric_desc(METRIC_E2E_P99), *slo = metric_desc(METRIC_SLO);
	uint64_t all = (METRIC_COUNT == 64 ? 0 : 1ull << METRIC_COUNT) - 1;
	char *buf = NULL, want[160];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	report_text_other_figures(f, &sum, all);
	ck_assert_int_eq(ftell(f), 0);
	report_text_other_figures(f, &sum,
				  all & ~(1ull << METRIC_E2E_P99) & ~(1ull << METRIC_SLO));
	fclose(f);
	snprintf(want, sizeof(want), "other figures: %s %.*f; %s %.*f\n", e2e->label,
		 e2e->decimals, sum.e2e_ms.p99, slo->label, slo->decimals,
		 100 * sum.slo_attainment);
	ck_assert_str_eq(buf, want);
	free(buf);
}
END_TEST

/* What a reader builds in summary.json's shape (compare of a measured
 * result) it builds at the catalog's places, and reads back from there. */
/* A catalog of interval bounds from text (catalog_load_intervals). */
static void intervals_catalog(struct catalog *c, const char *text)
{
	struct ss_error err = { 0 };
	FILE *f;

	catalog_init(c);
	f = fopen(path_in(tmpdir, "intervals.json"), "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_msg(catalog_load_intervals(c, path_in(tmpdir, "intervals.json"), &err) == 0,
		      "%s", err.msg);
}

static const char test_intervals[] =
	"{\"intervals\": ["
	"{\"name\": \"eng\", \"ttft_lo\": 0.8, \"ttft_hi\": 1.25, \"tpot_lo\": 0.9,"
	" \"tpot_hi\": 1.1},"
	"{\"name\": \"prior\", \"ttft_lo\": 0.5, \"ttft_hi\": 2, \"tpot_lo\": 0.7,"
	" \"tpot_hi\": 1.5, \"e2e_lo\": 0.5, \"e2e_hi\": 2},"
	"{\"name\": \"none\", \"ttft_lo\": 0.4, \"ttft_hi\": 3}]}";

/* Every catalogued latency figure (metrics.def's DIST entries with an
 * interval) has its _lo and _hi beside it in summary.json, ordered lo <= p
 * <= hi and equal to p times the bounds; so has every other statistic of
 * its distribution; queue time has none. */
START_TEST(intervals_beside_every_catalogued_latency)
{
	struct catalog c;
	struct summary s = sum;
	json_t *j;
	int n = 0;

	intervals_catalog(&c, test_intervals);
	s.engine = "eng";
	summary_interval_set(&s, &c, true, "table");
	ck_assert_str_eq(s.interval.entry, "eng");
	j = report_summary_json(&s, &ri);
	ck_assert_ptr_nonnull(j);
	for (int m = 0; m < METRIC_COUNT; m++) {
		const struct metric_desc *d = metric_desc((enum metric_id)m);
		const json_t *o = json_object_get(j, d->json);
		char key[64];
		double v = metric_value(d, &s), lo, hi;

		if (!d->dist || d->interval == INTERVAL_NONE)
			continue;
		n++;
		ck_assert_msg(isfinite(v), "%s: the fixture has no figure", d->name);
		snprintf(key, sizeof(key), "%s_lo", d->sub);
		lo = json_number_value(json_object_get(o, key));
		snprintf(key, sizeof(key), "%s_hi", d->sub);
		hi = json_number_value(json_object_get(o, key));
		ck_assert_msg(json_is_number(json_object_get(o, key)), "%s: no %s.%s", d->name,
			      d->json, key);
		ck_assert_msg(lo <= v && v <= hi && lo < hi, "%s: %g not in %g..%g", d->name, v, lo,
			      hi);
		ck_assert(fabs(lo - v * s.interval.lo[d->interval]) <= 1e-9 * v);
		ck_assert(fabs(hi - v * s.interval.hi[d->interval]) <= 1e-9 * v);
		ck_assert(json_is_number(json_object_get(o, "mean_lo")));
		ck_assert(json_is_number(json_object_get(o, "p95_hi")));
	}
	ck_assert_int_eq(n, 12);
	/* ITL takes the entry's TPOT bounds; E2E, which eng has none of, the prior's */
	ck_assert_double_eq(s.interval.lo[INTERVAL_ITL], 0.9);
	ck_assert_double_eq(s.interval.hi[INTERVAL_E2E], 2);
	ck_assert_ptr_null(json_object_get(json_object_get(j, "queue_ms"), "p50_lo"));
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "interval"), "entry")),
			 "eng");
	json_decref(j);
	catalog_release(&c);
}
END_TEST

/* Which entry: the profile's own; the prior for a profile without one
 * and for a user's profile of a shipped name; "none" for --engine none;
 * at least the prior's width for a cost model from specifications; and
 * nothing without intervals. */
START_TEST(intervals_entry_chosen)
{
	struct catalog c;
	struct summary s = sum;
	json_t *j;

	intervals_catalog(&c, test_intervals);
	s.engine = "unknown-profile";
	summary_interval_set(&s, &c, true, "table");
	ck_assert_str_eq(s.interval.entry, "prior");
	ck_assert_double_eq(s.interval.hi[INTERVAL_TTFT], 2);
	s.engine = "eng";
	summary_interval_set(&s, &c, false, "table");   /* a user's "eng" */
	ck_assert_str_eq(s.interval.entry, "prior");
	s.engine = "none";
	summary_interval_set(&s, &c, true, "table");
	ck_assert_str_eq(s.interval.entry, "none");
	ck_assert_double_eq(s.interval.hi[INTERVAL_TTFT], 3);
	ck_assert_double_eq(s.interval.hi[INTERVAL_TPOT], 1.5);   /* the prior's */
	s.engine = "eng";
	summary_interval_set(&s, &c, true, "roofline");
	ck_assert(s.interval.spec_priced);
	ck_assert_double_eq(s.interval.lo[INTERVAL_TTFT], 0.5);
	ck_assert_double_eq(s.interval.hi[INTERVAL_TTFT], 2);
	catalog_release(&c);
	catalog_init(&c);
	summary_interval_set(&s, &c, true, "table");
	ck_assert_ptr_null(s.interval.entry);
	j = report_summary_json(&s, &ri);
	ck_assert_ptr_nonnull(j);
	ck_assert_ptr_null(json_object_get(j, "interval"));
	ck_assert_ptr_null(json_object_get(json_object_get(j, "ttft_ms"), "p50_lo"));
	json_decref(j);
	catalog_release(&c);
}
END_TEST

/* A run priced more outside the measured grid gets a wider relative
 * interval: the log-bounds times 1 + the share. */
START_TEST(intervals_wider_outside_the_grid)
{
	struct catalog c;
	struct summary in = sum, out = sum;

	intervals_catalog(&c, test_intervals);
	in.engine = out.engine = "eng";
	in.out_of_grid_share = 0;
	out.out_of_grid_share = 0.5;
	summary_interval_set(&in, &c, true, "table");
	summary_interval_set(&out, &c, true, "table");
	ck_assert_double_eq(in.interval.widen, 1);
	ck_assert_double_eq(out.interval.widen, 1.5);
	for (int m = 0; m < INTERVAL_METRICS; m++) {
		ck_assert(out.interval.lo[m] < in.interval.lo[m]);
		ck_assert(out.interval.hi[m] > in.interval.hi[m]);
		ck_assert(fabs(log(out.interval.hi[m]) - 1.5 * log(in.interval.hi[m])) < 1e-12);
	}
	catalog_release(&c);
}
END_TEST

START_TEST(metric_json_set_and_get)
{
	json_t *j = json_object();

	ck_assert_int_eq(metric_json_set(j, METRIC_REQ_S, json_real(2.5)), 0);
	ck_assert_int_eq(metric_json_set(j, METRIC_ITL_P90, json_real(7)), 0);
	ck_assert_int_eq(metric_json_set(j, METRIC_SLO, json_real(0.5)), 0);
	ck_assert(json_number_value(json_object_get(json_object_get(j, "throughput"),
						    "requests_per_s")) == 2.5);
	ck_assert(json_number_value(json_object_get(json_object_get(j, "itl_ms"), "p90")) == 7);
	ck_assert(metric_json_get(j, METRIC_SLO) == 0.5);
	ck_assert(isnan(metric_json_get(j, METRIC_ITL_P50)));
	/* a place whose parent is not an object */
	ck_assert_int_eq(json_object_set_new(j, "energy", json_integer(1)), 0);
	ck_assert_int_eq(metric_json_set(j, METRIC_J_TOKEN, json_real(1)), -EINVAL);
	ck_assert_int_eq(metric_json_set(j, METRIC_REQ_S, NULL), -ENOMEM);
	json_decref(j);
}
END_TEST

START_TEST(json_contract_keys)
{
	static const char *const top[] = {
		"version", "mode", "seed", "config", "requests", "requests_completed",
		"rejected", "reject_reasons", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms",
		"queue_ms", "throughput", "duration_s", "slo", "slo_attainment",
		"goodput_rps", "goodput_rps_per_gpu", "preemptions", "kv_utilization",
		"batch_size", "steps", "energy", "cost_model", "instances", "gpus",
		"kv_blocks_per_instance",
	};
	static const char *const dists[] = { "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms" };
	static const char *const stats[] = { "mean", "p50", "p90", "p95", "p99", "max", "n" };
	static const char *const energy[] = { "total_j", "busy_j", "idle_j", "j_per_request",
					      "j_per_output_token", "avg_power_w_per_gpu" };
	json_t *j = report_summary_json(&sum, &ri), *o;

	ck_assert_ptr_nonnull(j);
	for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
		ck_assert_msg(json_object_get(j, top[i]), "missing key %s", top[i]);
	for (size_t i = 0; i < 5; i++)
		for (size_t k = 0; k < 7; k++)
			ck_assert_msg(json_object_get(json_object_get(j, dists[i]), stats[k]),
				      "missing %s.%s", dists[i], stats[k]);
	for (size_t k = 0; k < 7; k++) {
		ck_assert(json_object_get(json_object_get(json_object_get(j, "batch_size"), "seqs"), stats[k]));
		ck_assert(json_object_get(json_object_get(json_object_get(j, "batch_size"), "tokens"), stats[k]));
	}
	for (size_t k = 0; k < 6; k++)
		ck_assert_msg(json_is_number(json_object_get(json_object_get(j, "energy"), energy[k])),
			      "energy.%s", energy[k]);

	o = json_object_get(j, "requests");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "total")), 6);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "completed")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "rejected")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "unfinished")), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "requests_completed")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "reject_reasons"),
							     "prompt_too_long")), 1);
	ck_assert(json_is_number(json_object_get(json_object_get(j, "throughput"), "requests_per_s")));
	ck_assert(json_is_number(json_object_get(json_object_get(j, "throughput"), "input_tokens_per_s")));
	ck_assert(json_is_number(json_object_get(json_object_get(j, "throughput"), "output_tokens_per_s")));
	ck_assert(json_is_number(json_object_get(json_object_get(j, "kv_utilization"), "mean")));
	ck_assert(json_is_number(json_object_get(json_object_get(j, "kv_utilization"), "peak")));
	/* the configuration is the caller's object, shared */
	ck_assert_ptr_eq(json_object_get(j, "config"), ri.config);
	/* SLOs: set ones are numbers, the unset E2E one is null */
	o = json_object_get(j, "slo");
	ck_assert_double_eq(json_number_value(json_object_get(o, "ttft_ms")), 400);
	ck_assert_double_eq(json_number_value(json_object_get(o, "tpot_ms")), 150);
	ck_assert(json_is_null(json_object_get(o, "e2e_ms")));
	/* TTFT p50 of 100 200 400 800 20 (sorted 20 100 200 400 800) */
	ck_assert_double_eq_tol(json_number_value(json_object_get(json_object_get(j, "ttft_ms"), "p50")),
				200, 1e-9);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "tpot_ms"), "n")), 4);
	o = json_object_get(json_object_get(j, "cost_model"), "op_share");
	/* every operator, less the adapters' (lora) in a run without --lora */
	ck_assert_int_eq(json_object_size(o), COST_OP_LORA);
	ck_assert_ptr_null(json_object_get(o, cost_op_name(COST_OP_LORA)));
	ck_assert_double_eq_tol(json_number_value(json_object_get(o, cost_op_name(COST_OP_GEMM))),
				0.7, 1e-12);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "cost_model"), "name")),
			 "constant");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "gpus")), 2);
	json_decref(j);
}
END_TEST

START_TEST(json_is_deterministic)
{
	json_t *a = report_summary_json(&sum, &ri), *b;
	char *sa, *sb;
	struct summary again;

	/* recomputed from the same inputs, dumped twice: the same bytes */
	ck_assert_int_eq(summary_compute(&again, &res, &sum.slo, ri.tp, NULL), 0);
	b = report_summary_json(&again, &ri);
	sa = json_dumps(a, REPORT_JSON_FLAGS);
	sb = json_dumps(b, REPORT_JSON_FLAGS);
	ck_assert_ptr_nonnull(sa);
	ck_assert_ptr_nonnull(sb);
	ck_assert_str_eq(sa, sb);
	free(sa);
	free(sb);
	json_decref(a);
	json_decref(b);
}
END_TEST

START_TEST(json_empty_dist_is_null)
{
	struct summary s;
	json_t *j;

	/* only the rejected request: no latencies, null statistics, n = 0 */
	res.req = &reqs[4];
	res.n_req = 1;
	ck_assert_int_eq(summary_compute(&s, &res, NULL, 1, NULL), 0);
	j = report_summary_json(&s, &ri);
	ck_assert(json_is_null(json_object_get(json_object_get(j, "ttft_ms"), "p50")));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "ttft_ms"), "n")), 0);
	ck_assert(json_is_null(json_object_get(json_object_get(j, "slo"), "ttft_ms")));
	json_decref(j);
}
END_TEST

/* ---- summary.txt -------------------------------------------------------- */

START_TEST(text_summary)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int lines = 0;

	ck_assert_ptr_nonnull(f);
	report_summary_text(f, &sum, &ri);
	fclose(f);
	for (size_t i = 0; i < len; i++)
		lines += buf[i] == '\n';
	ck_assert_int_le(lines, 30);
	ck_assert_ptr_nonnull(strstr(buf, "llama-3-8b"));
	ck_assert_ptr_nonnull(strstr(buf, "5 completed"));
	ck_assert_ptr_nonnull(strstr(buf, "prompt_too_long: 1"));
	ck_assert_ptr_nonnull(strstr(buf, "TTFT <= 400 ms"));
	ck_assert_ptr_nonnull(strstr(buf, "TPOT <= 150 ms"));
	/* the table: TTFT 100 200 400 800 20 ms: mean 304, p50 200 */
	ck_assert_ptr_nonnull(strstr(buf, "  TTFT       304.000     200.000"));
	ck_assert_ptr_nonnull(strstr(buf, "  queue "));
	ck_assert_ptr_nonnull(strstr(buf, "energy:"));
	free(buf);
}
END_TEST

/* ---- the serving stack and unmetered energy ------------------------------- */

/* Each stack item is in summary.json as {spec, source} and in the text as
 * "LABEL SPEC (FROM)"; a run without a stack has neither. */
START_TEST(stack_named_in_both_summaries)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	json_t *j, *st;

	j = report_summary_json(&sum, &ri);
	ck_assert_ptr_nonnull(j);
	ck_assert_ptr_null(json_object_get(j, "stack"));
	json_decref(j);
	ri.stack[0] = (struct stack_item){ "policy", "policy", "sarathi:token_budget=512", NULL };
	ri.stack[1] = (struct stack_item){ "order", "order", "fcfs", "default" };
	ri.stack[2] = (struct stack_item){ "prefix_cache", "prefix cache", "on", NULL };
	ri.n_stack = 3;
	j = report_summary_json(&sum, &ri);
	ck_assert_ptr_nonnull(j);
	st = json_object_get(j, "stack");
	ck_assert_int_eq((int)json_object_size(st), 3);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "policy"), "spec")),
			 "sarathi:token_budget=512");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "policy"),
							   "source")), "command line");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "order"), "source")),
			 "default");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "prefix_cache"),
							   "spec")), "on");
	json_decref(j);
	f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	report_summary_text(f, &sum, &ri);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(buf, "\nstack:    policy sarathi:token_budget=512, order fcfs (default), prefix cache on\n"));
	free(buf);
}
END_TEST

/* A live run whose meter read nothing: every energy and power figure is
 * null in summary.json (not 0), the text says "not metered", the energy
 * columns of requests.csv and results.db are empty, and the time-series
 * plot has no power panel. */
START_TEST(unmetered_energy_is_absent)
{
	struct ss_error err = { 0 };
	struct plot_outcome po = { 0 };
	static const char *const energy[] = {
		"total_j", "busy_j", "idle_j", "j_per_request", "j_per_output_token",
		"avg_power_w_per_gpu", "avg_power_w", "peak_power_w", "prefill_j", "decode_j",
	};
	char out[512], *text, *csv, *gp;
	json_t *j, *e;
	sqlite3 *db;

	ri.mode = "live";
	ri.energy_meter = "no RAPL domain under /tmp/none";
	ri.energy_metered = false;
	j = report_summary_json(&sum, &ri);
	ck_assert_ptr_nonnull(j);
	e = json_object_get(j, "energy");
	for (size_t k = 0; k < sizeof(energy) / sizeof(energy[0]); k++)
		ck_assert_msg(json_is_null(json_object_get(e, energy[k])), "energy.%s not null",
			      energy[k]);
	ck_assert(json_is_false(json_object_get(e, "metered")));
	json_decref(j);

	snprintf(out, sizeof(out), "%s/unmetered", tmpdir);
	ck_assert_msg(report_write_dir(out, &sum, &ri, &res, &po, &err) == 0, "%s", err.msg);
	text = slurp(path_in(out, "summary.txt"));
	ck_assert_ptr_nonnull(strstr(text, "\nenergy: not metered (no RAPL domain under /tmp/none)\n"));
	ck_assert_ptr_null(strstr(text, "power per GPU"));
	free(text);
	/* request 1 of the fixture had 2.5 J: now an empty field */
	csv = slurp(path_in(out, "requests.csv"));
	ck_assert_ptr_nonnull(strstr(csv, "\n1,1,0,0,finished,100,200,5,150,300,900,200,150,800,50,2,,\n"));
	free(csv);
	gp = slurp(path_in(out, "timeseries.gp"));
	ck_assert_ptr_null(strstr(gp, "power per GPU"));
	ck_assert_ptr_nonnull(strstr(gp, "set multiplot layout 3,1"));
	free(gp);
	ck_assert_int_eq(sqlite3_open_v2(path_in(out, "results.db"), &db, SQLITE_OPEN_READONLY,
					 NULL), SQLITE_OK);
	ck_assert_int_eq(db_count(db, "SELECT count(*) FROM requests WHERE energy_j IS NULL"),
			 N_REQ);
	ck_assert_int_eq(db_count(db, "SELECT count(*) FROM timeseries WHERE power_w IS NULL"),
			 N_SAMPLES);
	sqlite3_close(db);
}
END_TEST

/* ---- the output directory ------------------------------------------------ */

START_TEST(write_dir_writes_every_file)
{
	struct ss_error err = { 0 };
	char out[512];
	struct plot_outcome po = { .skipped = true };
	sqlite3 *db;
	char *json_file, *json_db;
	sqlite3_stmt *st;

	snprintf(out, sizeof(out), "%s/a/b/out", tmpdir);
	ck_assert_msg(report_write_dir(out, &sum, &ri, &res, &po, &err) == 0, "%s: %s",
		      err.file, err.msg);
	/* PNGs exactly when gnuplot is installed (Debian gnuplot-nox) */
	ck_assert_int_eq(po.skipped, !gnuplot_on_path());
	ck_assert(exists(out, "requests.csv"));
	ck_assert(exists(out, "results.db"));
	ck_assert(exists(out, "summary.txt"));
	ck_assert(exists(out, "summary.json"));
	ck_assert(exists(out, "ttft_cdf.dat") && exists(out, "ttft_cdf.gp"));
	ck_assert(exists(out, "tpot_cdf.dat") && exists(out, "tpot_cdf.gp"));
	ck_assert(exists(out, "timeseries.dat") && exists(out, "timeseries.gp"));
	ck_assert_int_eq(exists(out, "ttft_cdf.png"), !po.skipped);
	ck_assert_int_eq(exists(out, "tpot_cdf.png"), !po.skipped);
	ck_assert_int_eq(exists(out, "timeseries.png"), !po.skipped);
	ck_assert_int_eq(count_tmp(out), 0);
	ck_assert(!exists(out, "results.db-journal"));

	/* requests.csv: header + one row per request; exact rows for two */
	ck_assert_int_eq(count_lines(path_in(out, "requests.csv")), 1 + N_REQ);
	{
		char *csv = slurp(path_in(out, "requests.csv"));

		ck_assert_ptr_nonnull(strstr(csv, "id,instance,tenant,priority,state,arrival_ms,"
					    "prompt_tokens,output_tokens,first_scheduled_ms,"
					    "first_token_ms,finish_ms,ttft_ms,tpot_ms,e2e_ms,"
					    "queue_ms,preemptions,energy_j,reject_reason\n"));
		ck_assert_ptr_nonnull(strstr(csv, "\n1,1,0,0,finished,100,200,5,150,300,900,200,150,800,50,2,2.5,\n"));
		ck_assert_ptr_nonnull(strstr(csv, "\n2,0,0,0,finished,200,300,1,400,600,600,400,,400,200,0,3.75,\n"));
		ck_assert_ptr_nonnull(strstr(csv, "\n3,1,3,-1,finished,"));
		ck_assert_ptr_nonnull(strstr(csv, "\n4,,0,0,rejected,400,9000,10,,,,,,,,0,0,prompt_too_long\n"));
		/* TPOT 1000 ms / 100 = 10 ms */
		ck_assert_ptr_nonnull(strstr(csv, "\n5,1,0,0,finished,450,64,101,460,470,1470,20,10,1020,10,0,7.5,\n"));
		free(csv);
	}

	/* results.db: schema version 1, one run, every request and sample */
	ck_assert_int_eq(sqlite3_open_v2(path_in(out, "results.db"), &db, SQLITE_OPEN_READONLY, NULL),
			 SQLITE_OK);
	ck_assert_int_eq(db_count(db, "PRAGMA user_version"), 1);
	ck_assert_int_eq(db_count(db, "SELECT count(*) FROM runs"), 1);
	ck_assert_int_eq(db_count(db, "SELECT count(*) FROM requests"), N_REQ);
	ck_assert_int_eq(db_count(db, "SELECT count(*) FROM requests WHERE state = 'rejected'"
				      " AND reject_reason = 'prompt_too_long' AND finish_ns IS NULL"), 1);
	ck_assert_int_eq(db_count(db, "SELECT finish_ns - arrival_ns FROM requests WHERE id = 3"),
			 2000 * MS);
	ck_assert_int_eq(db_count(db, "SELECT count(*) FROM timeseries"), N_SAMPLES);
	ck_assert_int_eq(db_count(db, "SELECT count(*) FROM timeseries WHERE kv_total_blocks = 100"),
			 N_SAMPLES);
	ck_assert_int_eq(db_count(db, "SELECT count(*) FROM summary"), 1);
	ck_assert_int_eq(db_count(db, "SELECT count(*) FROM runs WHERE seed = 42 AND tp = 1"
				      " AND instances = 2 AND model = 'llama-3-8b'"
				      " AND json_extract(config_json, '$.policy') = 'vllm'"), 1);
	/* the stored summary is summary.json, byte for byte */
	ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT json FROM summary WHERE run_id = 1", -1,
					    &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	json_db = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
	json_file = slurp(path_in(out, "summary.json"));
	ck_assert_str_eq(json_file, json_db);
	free(json_file);
	free(json_db);
}
END_TEST

START_TEST(write_dir_is_repeatable)
{
	struct ss_error err = { 0 };
	struct plot_outcome po;
	char *a, *b;

	/* a second run into the same directory replaces every file */
	ck_assert_int_eq(report_write_dir(tmpdir, &sum, &ri, &res, &po, &err), 0);
	a = slurp(path_in(tmpdir, "summary.json"));
	ck_assert_int_eq(report_write_dir(tmpdir, &sum, &ri, &res, &po, &err), 0);
	b = slurp(path_in(tmpdir, "summary.json"));
	ck_assert_str_eq(a, b);
	ck_assert_int_eq(count_tmp(tmpdir), 0);
	free(a);
	free(b);
}
END_TEST

START_TEST(write_dir_under_a_file_fails)
{
	struct ss_error err = { 0 };
	char file[512], dir[1024];
	struct plot_outcome po;
	FILE *f;

	snprintf(file, sizeof(file), "%s/plain", tmpdir);
	f = fopen(file, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	snprintf(dir, sizeof(dir), "%s/out", file);
	ck_assert_int_eq(report_write_dir(dir, &sum, &ri, &res, &po, &err), -ENOTDIR);
	ck_assert_int_eq(err.code, -ENOTDIR);
	ck_assert_ptr_nonnull(strstr(err.msg, "mkdir"));
	ck_assert(!exists(dir, "summary.json"));
	ck_assert_int_eq(count_tmp(tmpdir), 0);
}
END_TEST

START_TEST(write_dir_failing_midway_leaves_no_summary)
{
	struct ss_error err = { 0 };
	struct plot_outcome po;
	FILE *f;

	/* a stale summary.json from an earlier run, and a directory where
	 * results.db should go: refused once requests.csv is done */
	f = fopen(path_in(tmpdir, "summary.json"), "w");
	ck_assert_ptr_nonnull(f);
	fputs("{}", f);
	fclose(f);
	ck_assert_int_eq(mkdir(path_in(tmpdir, "results.db"), 0755), 0);
	ck_assert_int_lt(report_write_dir(tmpdir, &sum, &ri, &res, &po, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.file, "results.db"));
	ck_assert_ptr_nonnull(strstr(err.msg, "is a directory"));
	ck_assert(exists(tmpdir, "requests.csv"));
	ck_assert(!exists(tmpdir, "summary.json"));
	ck_assert(!exists(tmpdir, "summary.txt"));
	ck_assert_int_eq(count_tmp(tmpdir), 0);
}
END_TEST

START_TEST(plots_skipped_without_gnuplot)
{
	struct ss_error err = { 0 };
	char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
	char empty[512], out[512];
	struct plot_outcome po = { 0 };
	int ret;

	snprintf(empty, sizeof(empty), "%s/empty-bin", tmpdir);
	snprintf(out, sizeof(out), "%s/out", tmpdir);
	ck_assert_int_eq(mkdir(empty, 0755), 0);
	setenv("PATH", empty, 1);
	ret = report_write_dir(out, &sum, &ri, &res, &po, &err);
	if (old)
		setenv("PATH", old, 1);
	else
		unsetenv("PATH");
	free(old);
	ck_assert_msg(ret == 0, "%s", err.msg);
	ck_assert(po.skipped);
	ck_assert(exists(out, "ttft_cdf.gp"));
	ck_assert(exists(out, "ttft_cdf.dat"));
	ck_assert(exists(out, "timeseries.gp"));
	ck_assert(!exists(out, "ttft_cdf.png"));
	ck_assert(exists(out, "summary.json"));
	ck_assert_int_eq(count_tmp(out), 0);
}
END_TEST

START_TEST(failing_gnuplot_is_an_error)
{
	struct ss_error err = { 0 };
	char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
	char bin[512], out[512];
	struct plot_outcome po = { .skipped = true };
	FILE *f;
	int ret;

	snprintf(bin, sizeof(bin), "%s/bin", tmpdir);
	snprintf(out, sizeof(out), "%s/out", tmpdir);
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	f = fopen(path_in(bin, "gnuplot"), "w");
	ck_assert_ptr_nonnull(f);
	fputs("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n", f);
	fclose(f);
	ck_assert_int_eq(chmod(path_in(bin, "gnuplot"), 0755), 0);
	setenv("PATH", bin, 1);
	ret = report_write_dir(out, &sum, &ri, &res, &po, &err);
	if (old)
		setenv("PATH", old, 1);
	free(old);
	ck_assert_int_lt(ret, 0);
	ck_assert(!po.skipped);
	ck_assert_ptr_nonnull(strstr(err.file, "ttft_cdf.gp"));
	ck_assert_ptr_nonnull(strstr(err.msg, "status 3"));
	ck_assert_ptr_nonnull(strstr(err.msg, "cannot open display"));
	ck_assert(!exists(out, "summary.json"));
	ck_assert_int_eq(count_tmp(out), 0);
}
END_TEST

/* A fake gnuplot in tmpdir/bin with the given script body. */
static void fake_gnuplot(const char *body)
{
	char bin[512];
	FILE *f;

	snprintf(bin, sizeof(bin), "%s/bin", tmpdir);
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	f = fopen(path_in(bin, "gnuplot"), "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	ck_assert_int_eq(chmod(path_in(bin, "gnuplot"), 0755), 0);
}

/* report_write_dir with PATH = tmpdir/bin only. */
static int write_with_fake_path(const char *out, struct plot_outcome *po, struct ss_error *err)
{
	char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
	int ret;

	setenv("PATH", path_in(tmpdir, "bin"), 1);
	ret = report_write_dir(out, &sum, &ri, &res, po, err);
	if (old)
		setenv("PATH", old, 1);
	free(old);
	return ret;
}

START_TEST(hung_gnuplot_is_killed_and_the_run_completes)
{
	struct ss_error err = { 0 };
	struct plot_outcome po;
	char out[512];
	int ret;

	/* a gnuplot that never exits (its child, too, is in its group):
	 * without a time limit report_write_dir never returns */
	fake_gnuplot("/bin/sleep 1000\nexit 0");
	snprintf(out, sizeof(out), "%s/out", tmpdir);
	ri.plot_timeout_ns = 1000000000;    /* 1 s */
	ret = write_with_fake_path(out, &po, &err);
	ri.plot_timeout_ns = 0;
	ck_assert_msg(ret == 0, "%s", err.msg);
	ck_assert_int_eq(po.warning.code, -ETIMEDOUT);
	ck_assert_ptr_nonnull(strstr(po.warning.msg, "ttft_cdf.gp"));
	ck_assert_ptr_nonnull(strstr(po.warning.msg, "3 of 3 PNGs not rendered"));
	ck_assert(!po.skipped);
	ck_assert(!exists(out, "ttft_cdf.png"));
	ck_assert(exists(out, "ttft_cdf.gp"));
	ck_assert(exists(out, "requests.csv"));
	ck_assert(exists(out, "summary.txt"));
	ck_assert(exists(out, "summary.json"));
	ck_assert_int_eq(count_tmp(out), 0);
}
END_TEST

START_TEST(planted_links_are_never_followed)
{
	/* symbolic links at every name the writers once used for their
	 * temporary files, and at a final name, pointing at a file that must
	 * survive untouched */
	static const char *const planted[] = {
		".requests.csv.tmp", ".results.db.tmp", ".summary.txt.tmp",
		".summary.json.tmp", ".ttft_cdf.png.tmp", ".ttft_cdf.gnuplot-err.tmp",
		".timeseries.gnuplot-err.tmp", ".ttft_cdf.dat.tmp", "requests.csv",
	};
	const int n_planted = (int)(sizeof(planted) / sizeof(planted[0]));
	struct ss_error err = { 0 };
	struct plot_outcome po;
	char out[512], victim[512];
	struct stat sb;
	char *text;
	FILE *f;
	int ret;

	/* a gnuplot that writes its PNG (ARG2) and complains on stderr */
	fake_gnuplot("echo chatter >&2\necho png > \"$4\"\nexit 0");
	snprintf(out, sizeof(out), "%s/out", tmpdir);
	snprintf(victim, sizeof(victim), "%s/victim", tmpdir);
	ck_assert_int_eq(mkdir(out, 0755), 0);
	f = fopen(victim, "w");
	ck_assert_ptr_nonnull(f);
	fputs("precious\n", f);
	fclose(f);
	for (int i = 0; i < n_planted; i++)
		ck_assert_int_eq(symlink(victim, path_in(out, planted[i])), 0);
	ret = write_with_fake_path(out, &po, &err);
	ck_assert_msg(ret == 0, "%s", err.msg);
	ck_assert_int_eq(po.warning.code, 0);
	text = slurp(victim);
	ck_assert_str_eq(text, "precious\n");
	free(text);
	/* the final name was replaced, not written through */
	ck_assert_int_eq(lstat(path_in(out, "requests.csv"), &sb), 0);
	ck_assert(S_ISREG(sb.st_mode));
	ck_assert(exists(out, "ttft_cdf.png"));
	/* nothing of ours left behind: only the planted .tmp links */
	ck_assert_int_eq(count_tmp(out), n_planted - 1);
}
END_TEST

START_TEST(many_requests_quickly)
{
	/* 200,000 requests through summary_compute and the files: a guard
	 * against quadratic work (the 10^6 figures are in docs/outputs.md) */
	enum { N = 200000 };
	struct req_record *big = calloc(N, sizeof(*big));
	struct ss_error err = { 0 };
	struct summary s;
	struct plot_outcome po;

	ck_assert_ptr_nonnull(big);
	for (uint32_t i = 0; i < N; i++) {
		struct req_record *q = &big[i];

		q->id = i;
		q->state = i % 50 ? REQ_FINISHED : REQ_REJECTED;
		q->arrival_ns = (int64_t)i * 10 * MS;
		q->prompt_tokens = 100 + (int32_t)(i % 1000);
		q->output_tokens = 1 + (int32_t)(i * 7919 % 300);
		q->instance = q->state == REQ_FINISHED ? (int32_t)(i % 2) : -1;
		q->first_sched_ns = q->state == REQ_FINISHED ? q->arrival_ns + (i % 97) * MS : -1;
		q->first_token_ns = q->state == REQ_FINISHED ? q->first_sched_ns + 20 * MS : -1;
		q->finish_ns = q->state == REQ_FINISHED ?
			q->first_token_ns + (int64_t)(q->output_tokens - 1) * 15 * MS : -1;
		q->reject_reason = q->state == REQ_REJECTED ? "prompt_too_long" : NULL;
	}
	res.req = big;
	res.n_req = N;
	ck_assert_int_eq(summary_compute(&s, &res, &sum.slo, 1, &err), 0);
	ck_assert_uint_eq(s.completed, N - N / 50);
	ck_assert_double_eq_tol(s.tpot_ms.p50, 15, 1e-9);
	ck_assert_msg(report_write_dir(tmpdir, &s, &ri, &res, &po, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(count_lines(path_in(tmpdir, "requests.csv")), 1 + N);
	/* CDFs are thinned to at most 2000 points (+ a header line) */
	ck_assert_int_le(count_lines(path_in(tmpdir, "ttft_cdf.dat")), 2001);
	free(big);
}
END_TEST

/* report.html: written with the other files, before summary.json; the
 * latency table holds summary.txt's figures; user strings are escaped; the
 * PNGs are embedded and nothing refers outside the page. */
START_TEST(report_html_is_self_contained)
{
	struct ss_error err = { 0 };
	struct plot_outcome po = { 0 };
	char out[512], want[128], *html, *text;
	const char *p;

	ri.model = "m<1>&\"x";
	ri.workload = "traces/<a>&b.csv";
	ri.command_line = "servesim run --trace 'traces/<a>&b.csv'";
	snprintf(out, sizeof(out), "%s/html", tmpdir);
	ck_assert_msg(report_write_dir(out, &sum, &ri, &res, &po, &err) == 0, "%s", err.msg);
	html = slurp(path_in(out, "report.html"));
	text = slurp(path_in(out, "summary.txt"));
	/* TTFT p99 as summary.txt prints it, in the page's latency table */
	snprintf(want, sizeof(want), " %.3f ", sum.ttft_ms.p99);
	ck_assert_ptr_nonnull(strstr(text, want));
	snprintf(want, sizeof(want), "<td class=\"n\">%.3f</td>", sum.ttft_ms.p99);
	ck_assert_msg(strstr(html, want) != NULL, "no %s", want);
	ck_assert_ptr_nonnull(strstr(html, "<title>servesim run: m&lt;1&gt;&amp;&quot;x, 2 instances of 1 x H100-SXM</title>"));
	ck_assert_ptr_nonnull(strstr(html, "<td>traces/&lt;a&gt;&amp;b.csv</td>"));
	ck_assert_ptr_nonnull(strstr(html, "<pre>servesim run --trace &#39;traces/&lt;a&gt;&amp;b.csv&#39;</pre>"));
	ck_assert_ptr_null(strstr(html, "m<1>"));
	ck_assert_ptr_null(strstr(html, "<a>&b"));
	/* the stack and every option */
	ck_assert_ptr_nonnull(strstr(html, "<caption>Every option, as given or defaulted</caption>"));
	ck_assert_ptr_nonnull(strstr(html, "<tr><th>seed</th><td class=\"n\">42</td></tr>"));
	/* plots: one <img> per PNG, all data: URIs; without gnuplot a note */
	for (p = strstr(html, "src=\""); p; p = strstr(p + 1, "src=\""))
		ck_assert(!strncmp(p, "src=\"data:image/png;base64,", 27));
	for (p = strstr(html, "href=\""); p; p = strstr(p + 1, "href=\""))
		ck_assert(p[6] == '#');
	if (po.skipped) {
		ck_assert_ptr_null(strstr(html, "<img"));
		ck_assert_ptr_nonnull(strstr(html, "gnuplot was not found"));
	} else {
		ck_assert_ptr_nonnull(strstr(html, "alt=\"ttft_cdf.png\""));
		ck_assert_ptr_nonnull(strstr(html, "alt=\"tpot_cdf.png\""));
		ck_assert_ptr_nonnull(strstr(html, "alt=\"timeseries.png\""));
	}
	ck_assert_int_eq(count_tmp(out), 0);
	free(text);
	free(html);
}
END_TEST

/* Without gnuplot the page says so and embeds nothing. */
START_TEST(report_html_without_gnuplot)
{
	struct ss_error err = { 0 };
	char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
	char empty[512], out[512], *html;
	struct plot_outcome po = { 0 };
	int ret;

	snprintf(empty, sizeof(empty), "%s/empty-bin", tmpdir);
	snprintf(out, sizeof(out), "%s/out", tmpdir);
	ck_assert_int_eq(mkdir(empty, 0755), 0);
	setenv("PATH", empty, 1);
	ret = report_write_dir(out, &sum, &ri, &res, &po, &err);
	if (old)
		setenv("PATH", old, 1);
	free(old);
	ck_assert_msg(ret == 0, "%s", err.msg);
	html = slurp(path_in(out, "report.html"));
	ck_assert_ptr_null(strstr(html, "<img"));
	ck_assert_ptr_nonnull(strstr(html, "<p class=\"note\">gnuplot was not found, so no plots were made"));
	free(html);
}
END_TEST

/* A report.html that cannot be written (a directory in its place) fails
 * the run's output before summary.json, leaving no temporary file. */
START_TEST(report_html_failure_leaves_no_summary)
{
	struct ss_error err = { 0 };
	struct plot_outcome po;

	ck_assert_int_eq(mkdir(path_in(tmpdir, "report.html"), 0755), 0);
	ck_assert_int_lt(report_write_dir(tmpdir, &sum, &ri, &res, &po, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.file, "report.html"));
	ck_assert(exists(tmpdir, "summary.txt"));
	ck_assert(!exists(tmpdir, "summary.json"));
	ck_assert_int_eq(count_tmp(tmpdir), 0);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("report");
	TCase *tc = tcase_create("report");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, json_contract_keys);
	tcase_add_test(tc, metric_catalog_matches_summary_json);
	tcase_add_test(tc, text_lists_catalogued_figures_it_has_no_place_for);
	tcase_add_test(tc, metric_json_set_and_get);
	tcase_add_test(tc, intervals_beside_every_catalogued_latency);
	tcase_add_test(tc, intervals_entry_chosen);
	tcase_add_test(tc, intervals_wider_outside_the_grid);
	tcase_add_test(tc, json_is_deterministic);
	tcase_add_test(tc, json_empty_dist_is_null);
	tcase_add_test(tc, text_summary);
	tcase_add_test(tc, stack_named_in_both_summaries);
	tcase_add_test(tc, unmetered_energy_is_absent);
	tcase_add_test(tc, write_dir_writes_every_file);
	tcase_add_test(tc, write_dir_is_repeatable);
	tcase_add_test(tc, write_dir_under_a_file_fails);
	tcase_add_test(tc, write_dir_failing_midway_leaves_no_summary);
	tcase_add_test(tc, plots_skipped_without_gnuplot);
	tcase_add_test(tc, failing_gnuplot_is_an_error);
	tcase_add_test(tc, hung_gnuplot_is_killed_and_the_run_completes);
	tcase_add_test(tc, planted_links_are_never_followed);
	tcase_add_test(tc, many_requests_quickly);
	tcase_add_test(tc, report_html_is_self_contained);
	tcase_add_test(tc, report_html_without_gnuplot);
	tcase_add_test(tc, report_html_failure_leaves_no_summary);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}
