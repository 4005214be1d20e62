/* servesim — comparing N runs side by side (see compare.h, docs/compare.md). */
#include "compare.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "html.h"
#include "outdir-int.h"
#include "report-int.h"

/* The rows: entries of the metric catalog (analysis/metrics.def), which
 * gives each its label, summary.json path, direction, SLO dependence and
 * format.  TTFT, TPOT and E2E come from the requests (as compare_runs()
 * computes them), the others from each run's summary.json.  In compare's
 * JSON a distribution's row is at metrics.FIELD.STAT (as in summary.json),
 * a scalar's at metrics.NAME. */
struct row {
	enum metric_id id;
	int metric;              /* CMP_TTFT, CMP_TPOT, CMP_E2E: from the requests; else -1 */
	double q;                /* that metric's quantile */
};

static const struct row rows[CMP_SET_ROWS] = {
	{ METRIC_TTFT_P50, CMP_TTFT, 0.50 }, { METRIC_TTFT_P90, CMP_TTFT, 0.90 },
	{ METRIC_TTFT_P99, CMP_TTFT, 0.99 }, { METRIC_TPOT_P50, CMP_TPOT, 0.50 },
	{ METRIC_TPOT_P90, CMP_TPOT, 0.90 }, { METRIC_TPOT_P99, CMP_TPOT, 0.99 },
	{ METRIC_ITL_P50, -1, 0 }, { METRIC_ITL_P90, -1, 0 }, { METRIC_ITL_P99, -1, 0 },
	{ METRIC_E2E_P50, CMP_E2E, 0.50 }, { METRIC_E2E_P90, CMP_E2E, 0.90 },
	{ METRIC_E2E_P99, CMP_E2E, 0.99 },
	{ METRIC_REQ_S, -1, 0 }, { METRIC_OUT_TOK_S, -1, 0 }, { METRIC_SLO, -1, 0 },
	{ METRIC_GOODPUT, -1, 0 },
};

static const struct metric_desc *row_m(int r)
{
	return metric_desc(rows[r].id);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sorted copy of the values of v[0..n) that are finite and > lo into buf. */
static uint64_t sorted_above(const double *v, uint64_t n, double lo, double *buf)
{
	uint64_t k = 0;

	for (uint64_t i = 0; i < n; i++)
		if (isfinite(v[i]) && v[i] > lo)
			buf[k++] = v[i];
	qsort(buf, k, sizeof(double), cmp_double);
	return k;
}

static const double *metric_values(const struct run_data *rd, int metric)
{
	return metric == CMP_TTFT ? rd->ttft_ms : metric == CMP_TPOT ? rd->tpot_ms : rd->e2e_ms;
}

/* The run's SLOs as summary.json records them (absent in a measured result). */
static json_t *run_slo(const struct run_data *rd)
{
	return json_object_get(rd->summary, "slo");
}

/* summary.json "status" ("complete", "failed", ...), NULL where absent. */
static const char *run_status(const struct run_data *rd)
{
	return json_string_value(json_object_get(rd->summary, "status"));
}

static bool same_json(json_t *a, json_t *b)
{
	return (!a && !b) || (a && b && json_equal(a, b));
}

void cmp_set_release(struct cmp_set *s)
{
	free(s->v);
	free(s->pair);
	memset(s, 0, sizeof(*s));
}

int cmp_set_build(struct cmp_set *s, int n, const struct run_data *runs,
		  const char *const *names, int ref, struct ss_error *err)
{
	uint64_t most = 1;
	double *buf;

	memset(s, 0, sizeof(*s));
	s->n = n;
	s->runs = runs;
	s->names = names;
	s->ref = ref;
	s->same_slo = true;
	for (int i = 0; i < n; i++) {
		if (runs[i].n > most)
			most = runs[i].n;
		if (!same_json(run_slo(&runs[0]), run_slo(&runs[i])))
			s->same_slo = false;
	}
	s->v = calloc((size_t)n, sizeof(*s->v));
	s->pair = calloc((size_t)n, sizeof(*s->pair));
	buf = malloc(most * sizeof(double));
	if (!s->v || !s->pair || !buf) {
		free(buf);
		cmp_set_release(s);
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	}
	for (int i = 0; i < n; i++)
		for (int r = 0; r < CMP_SET_ROWS; r++) {
			const struct row *w = &rows[r];

			if (w->metric >= 0) {
				uint64_t k = sorted_above(metric_values(&runs[i], w->metric),
							  runs[i].n, -INFINITY, buf);

				s->v[i][r] = k ? ss_quantile_sorted(buf, k, w->q) : NAN;
			} else {
				s->v[i][r] = metric_json_get(runs[i].summary, w->id);
			}
		}
	free(buf);
	for (int i = 0; ref >= 0 && i < n; i++)
		if (i != ref && compare_runs(&runs[ref], &runs[i], &s->pair[i], err)) {
			cmp_set_release(s);
			return err->code;
		}
	return 0;
}

/* Across runs: max/min (NAN unless every run has the figure and min > 0)
 * and the best value (NAN when a figure is missing or the SLOs differ);
 * is_best() then tells the runs that have it (several on a tie). */
static double spread(const struct cmp_set *s, int r, double *best)
{
	double lo = INFINITY, hi = -INFINITY;

	*best = NAN;
	if (row_m(r)->slo && !s->same_slo)
		return NAN;
	for (int i = 0; i < s->n; i++) {
		double x = s->v[i][r];

		if (!isfinite(x))
			return NAN;
		lo = x < lo ? x : lo;
		hi = x > hi ? x : hi;
	}
	*best = row_m(r)->higher_better ? hi : lo;
	return lo > 0 ? hi / lo : NAN;
}

static bool is_best(const struct cmp_set *s, int r, int i, double best)
{
	return isfinite(best) && s->v[i][r] == best;
}

/* Run i's figure r minus the reference's, and that as % of the reference. */
static void difference(const struct cmp_set *s, int i, int r, double *abs_d, double *pct)
{
	double a = s->v[s->ref][r], b = s->v[i][r];

	*abs_d = *pct = NAN;
	if (row_m(r)->slo && !s->same_slo)
		return;
	if (isfinite(a) && isfinite(b)) {
		*abs_d = b - a;
		*pct = a > 0 ? 100.0 * (b - a) / a : NAN;
	}
}

/* ---- the table ------------------------------------------------------------ */

#define CELL 48

static void print_slo(FILE *f, json_t *slo)
{
	const char *k;
	json_t *v;
	bool any = false;

	json_object_foreach(slo, k, v)
		if (json_is_number(v) && json_number_value(v) > 0) {
			fprintf(f, "%s%s <= %g", any ? ", " : "", k, json_number_value(v));
			any = true;
		}
	if (!any)
		fprintf(f, "%s", slo ? "none" : "not recorded");
}

/* The table's cells, cell[r * nc + j] for row r and value column j (the
 * runs, then, without a reference, max/min and best); returns nc. */
static int table_cells(const struct cmp_set *s, char (*cell)[CELL])
{
	int nc = s->n + (s->ref < 0 ? 2 : 0);

	for (int r = 0; r < CMP_SET_ROWS; r++) {
		const struct metric_desc *w = row_m(r);
		double best, sp = spread(s, r, &best);

		for (int i = 0; i < s->n; i++) {
			char *c = cell[r * nc + i];
			double d, pct;

			if (!isfinite(s->v[i][r])) {
				snprintf(c, CELL, "-");
			} else if (s->ref < 0 || i == s->ref) {
				snprintf(c, CELL, "%.*f", w->decimals, w->scale * s->v[i][r]);
			} else {
				difference(s, i, r, &d, &pct);
				if (!isfinite(d))
					snprintf(c, CELL, "(%.*f)", w->decimals, w->scale * s->v[i][r]);
				else if (!isfinite(pct))
					snprintf(c, CELL, "%+.*f", w->decimals, w->scale * d);
				else
					snprintf(c, CELL, "%+.*f (%+.2f%%)", w->decimals, w->scale * d, pct);
			}
		}
		if (s->ref < 0) {
			char *c = cell[r * nc + s->n + 1];
			size_t at = 0;

			snprintf(cell[r * nc + s->n], CELL, isfinite(sp) ? "%.3f" : "-", sp);
			snprintf(c, CELL, "-");
			for (int i = 0; i < s->n && at < CELL; i++)
				if (is_best(s, r, i, best))
					at += (size_t)snprintf(c + at, CELL - at, "%s%s", at ? "," : "",
							       s->names[i]);
		}
	}
	return nc;
}

/* A value column's heading: a run's name, "max/min" or "best". */
static const char *column_head(const struct cmp_set *s, int j)
{
	return j < s->n ? s->names[j] : j == s->n ? "max/min" : "best";
}

void cmp_set_print(FILE *f, const struct cmp_set *s)
{
	int nc = s->n + (s->ref < 0 ? 2 : 0);      /* value columns */
	int lw = 18, *width = calloc((size_t)nc, sizeof(int));
	char (*cell)[CELL] = calloc((size_t)nc * CMP_SET_ROWS, CELL);

	if (!cell || !width) {
		free(cell);
		free(width);
		return;
	}
	fprintf(f, "%d runs:\n", s->n);
	for (int i = 0; i < s->n; i++) {
		const char *st = run_status(&s->runs[i]);

		/* a failed or interrupted run's figures cover only part of its workload */
		fprintf(f, "  %-16s %s (%s, %llu requests%s%s)%s\n", s->names[i], s->runs[i].dir,
			s->runs[i].mode, (unsigned long long)s->runs[i].n,
			st && strcmp(st, "complete") ? ", " : "",
			st && strcmp(st, "complete") ? st : "", i == s->ref ? "  <- reference" : "");
	}
	if (s->same_slo) {
		fprintf(f, "SLOs: ");
		print_slo(f, run_slo(&s->runs[0]));
		fprintf(f, "\n");
	} else {
		fprintf(f, "SLOs differ, so attainment and goodput are not compared:\n");
		for (int i = 0; i < s->n; i++) {
			fprintf(f, "  %-16s ", s->names[i]);
			print_slo(f, run_slo(&s->runs[i]));
			fprintf(f, "\n");
		}
	}
	fprintf(f, "\n");
	table_cells(s, cell);
	for (int j = 0; j < nc; j++) {
		const char *head = j < s->n ? s->names[j] : j == s->n ? "max/min" : "best";

		width[j] = (int)strlen(head) + (j == s->ref ? 6 : 0);
		for (int r = 0; r < CMP_SET_ROWS; r++)
			if ((int)strlen(cell[r * nc + j]) > width[j])
				width[j] = (int)strlen(cell[r * nc + j]);
	}
	fprintf(f, "  %-*s", lw, "");
	for (int j = 0; j < nc; j++) {
		const char *head = j < s->n ? s->names[j] : j == s->n ? "max/min" : "best";
		char h[200];

		snprintf(h, sizeof(h), "%s%s", head, j == s->ref ? " (ref)" : "");
		fprintf(f, "  %*s", width[j], h);
	}
	fprintf(f, "\n");
	for (int r = 0; r < CMP_SET_ROWS; r++) {
		fprintf(f, "  %-*s", lw, row_m(r)->label);
		for (int j = 0; j < nc; j++)
			fprintf(f, "  %*s", width[j], cell[r * nc + j]);
		fprintf(f, "\n");
	}
	if (s->ref >= 0)
		fprintf(f, "\n  (each run but the reference: run - reference, and %% of the reference;"
			   " attainment in points;\n   values in parentheses are not compared)\n");
	else
		fprintf(f, "\n  (max/min: the largest value over the smallest; best: the run(s) with the"
			   " lowest\n   latency, the highest throughput, attainment and goodput)\n");
	free(cell);
	free(width);
	for (int i = 0; s->ref >= 0 && i < s->n; i++)
		if (i != s->ref) {
			fprintf(f, "\nper-request errors of %s against %s:\n", s->names[i],
				s->names[s->ref]);
			compare_print(f, &s->runs[s->ref], &s->runs[i], &s->pair[i]);
		}
}

/* ---- JSON ------------------------------------------------------------------ */

static json_t *jnum(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

/* Put x at row r's place in o: metrics.FIELD.STAT for a distribution's
 * percentile, metrics.NAME for a scalar, creating the inner object. */
static void put(json_t *o, int r, json_t *x)
{
	const struct metric_desc *w = row_m(r);
	json_t *in;

	if (!w->dist) {
		json_object_set_new(o, w->name, x);
		return;
	}
	in = json_object_get(o, w->json);
	if (!in) {
		in = json_object();
		json_object_set_new(o, w->json, in);
	}
	json_object_set_new(in, w->sub, x);
}

static json_t *runs_json(const struct cmp_set *s)
{
	json_t *arr = json_array();

	for (int i = 0; arr && i < s->n; i++) {
		json_t *o = json_object(), *m = json_object(), *slo = run_slo(&s->runs[i]);

		json_object_set_new(o, "name", json_string(s->names[i]));
		json_object_set_new(o, "dir", json_string(s->runs[i].dir));
		json_object_set_new(o, "mode", json_string(s->runs[i].mode));
		json_object_set_new(o, "requests", json_integer((json_int_t)s->runs[i].n));
		json_object_set_new(o, "status", run_status(&s->runs[i]) ?
					 json_string(run_status(&s->runs[i])) : json_null());
		json_object_set(o, "slo", slo ? slo : json_null());
		for (int r = 0; r < CMP_SET_ROWS; r++)
			put(m, r, jnum(s->v[i][r]));
		json_object_set_new(o, "metrics", m);
		if (s->ref >= 0 && i != s->ref) {
			json_t *d = json_object(), *pr = json_object();

			for (int r = 0; r < CMP_SET_ROWS; r++) {
				double a, p;

				difference(s, i, r, &a, &p);
				put(d, r, json_pack("{s:o, s:o}", "abs", jnum(a), "pct", jnum(p)));
			}
			json_object_set_new(o, "difference", d);
			for (int k = 0; k < CMP_ITL; k++) {
				const struct cmp_metric *cm = &s->pair[i].m[k];

				json_object_set_new(pr, cm->name,
						    json_pack("{s:I, s:o, s:o, s:o}", "n_matched",
							      (json_int_t)cm->n_matched, "mape_pct",
							      jnum(cm->mape_pct), "p50_ape_pct",
							      jnum(cm->p50_ape_pct), "p90_ape_pct",
							      jnum(cm->p90_ape_pct)));
			}
			json_object_set_new(o, "per_request", pr);
		}
		json_array_append_new(arr, o);
	}
	return arr;
}

json_t *cmp_set_json(const struct cmp_set *s)
{
	json_t *o;

	if (s->n == 2 && s->ref >= 0) {
		/* the two-run form of earlier versions, names added */
		o = compare_json(&s->runs[s->ref], &s->runs[1 - s->ref], &s->pair[1 - s->ref]);
		if (!o)
			return NULL;
		json_object_set_new(json_object_get(o, "reference"), "name",
				    json_string(s->names[s->ref]));
		json_object_set_new(json_object_get(o, "other"), "name",
				    json_string(s->names[1 - s->ref]));
	} else {
		o = json_object();
		if (!o)
			return NULL;
		json_object_set_new(o, "reference",
				    s->ref >= 0 ? json_string(s->names[s->ref]) : json_null());
	}
	json_object_set_new(o, "runs", runs_json(s));
	json_object_set_new(o, "same_slo", json_boolean(s->same_slo));
	if (s->ref < 0) {
		json_t *sp = json_object();

		for (int r = 0; r < CMP_SET_ROWS; r++) {
			double best, x = spread(s, r, &best);
			json_t *b = json_array();

			for (int i = 0; i < s->n; i++)
				if (is_best(s, r, i, best))
					json_array_append_new(b, json_string(s->names[i]));
			put(sp, r, json_pack("{s:o, s:o}", "max_over_min", jnum(x), "best", b));
		}
		json_object_set_new(o, "spread", sp);
	}
	return o;
}

/* ---- plots ----------------------------------------------------------------- */

#define CDF_POINTS 1000

/* What every run shares of its scenario (model, GPU, TP, instances, the
 * workload's file name), for the titles; differing keys are left out. */
static void scenario_title(const struct cmp_set *s, char *buf, size_t len)
{
	static const char *const keys[] = { "model", "gpu", "tp", "instances", "workload" };
	size_t at = 0;

	buf[0] = 0;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		json_t *first = NULL;
		bool same = true;
		char val[160];

		for (int i = 0; i < s->n && same; i++) {
			json_t *v = json_object_get(json_object_get(s->runs[i].summary, "scenario"),
						    keys[k]);

			if (!v || json_is_null(v))
				continue;
			if (!first)
				first = v;
			else if (!json_equal(first, v))
				same = false;
		}
		if (!first || !same)
			continue;
		if (json_is_integer(first)) {
			if (json_integer_value(first) == 1)
				continue;   /* tp 1, one instance: the default, not worth saying */
			snprintf(val, sizeof(val), "%s %lld", keys[k],
				 (long long)json_integer_value(first));
		} else if (json_is_string(first)) {
			const char *v = json_string_value(first), *slash = strrchr(v, '/');

			snprintf(val, sizeof(val), "%s", slash ? slash + 1 : v);
		} else {
			continue;
		}
		at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%s", at ? ", " : "", val);
		if (at >= len)
			break;
	}
}

static int write_cdf(const char *dir, const struct cmp_set *s, const char *name,
		     const char *label, const char *long_name, int metric, const char *title,
		     double *buf, struct ss_error *err)
{
	static const double qs[3] = { 0.50, 0.90, 0.99 };
	struct ss_file of;
	char fname[64];
	int ret, shown = 0;
	double lo = INFINITY, hi = 0;    /* over all runs */
	uint64_t *cnt = calloc((size_t)s->n, sizeof(*cnt));

	if (!cnt)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	snprintf(fname, sizeof(fname), "%s.dat", name);
	ret = outfile_open(&of, dir, fname, 1 << 16, err);
	if (ret < 0)
		goto out;
	/* blocks 0..n-1: each run's CDF (at most CDF_POINTS points);
	 * blocks n..2n-1: its p50, p90 and p99 */
	fprintf(of.f, "# %s CDFs of %d runs: %s_ms fraction_of_requests, one block per run,\n"
		      "# then one block of p50/p90/p99 per run (values <= 0 left out: log axis)\n",
		label, s->n, label);
	for (int i = 0; i < s->n; i++) {
		uint64_t n = sorted_above(metric_values(&s->runs[i], metric), s->runs[i].n, 0, buf);
		uint64_t m = n < CDF_POINTS ? n : CDF_POINTS;

		cnt[i] = n;
		if (n) {
			lo = buf[0] < lo ? buf[0] : lo;
			hi = buf[n - 1] > hi ? buf[n - 1] : hi;
		}
		fprintf(of.f, "# run %d: ", i);
		plots_dat_text(of.f, s->names[i]);
		fprintf(of.f, " (%llu requests)\n", (unsigned long long)n);
		for (uint64_t k = 0; k < m; k++) {
			uint64_t j = m == n ? k : (uint64_t)((double)k * (double)(n - 1) /
							     (double)(m - 1) + 0.5);

			fprintf(of.f, "%.9g %.9g\n", buf[j], (double)(j + 1) / (double)n);
		}
		fprintf(of.f, "\n\n");
	}
	for (int i = 0; i < s->n; i++) {
		uint64_t n = sorted_above(metric_values(&s->runs[i], metric), s->runs[i].n, 0, buf);

		fprintf(of.f, "# run %d: ", i);
		plots_dat_text(of.f, s->names[i]);
		fprintf(of.f, " p50 p90 p99\n");
		for (int q = 0; q < 3 && n; q++)
			fprintf(of.f, "%.9g %.2f\n", ss_quantile_sorted(buf, n, qs[q]), qs[q]);
		fprintf(of.f, "\n\n");
	}
	ret = outfile_commit(&of, err);
	if (ret < 0)
		goto out;
	snprintf(fname, sizeof(fname), "%s.gp", name);
	ret = outfile_open(&of, dir, fname, 0, err);
	if (ret < 0)
		goto out;
	plots_gp_prologue(of.f, name, "CDFs of the compared runs", 600);
	fprintf(of.f, "set title ");
	{
		char t[400];

		snprintf(t, sizeof(t), "CDF of %s (%s)%s%s", long_name, label, title[0] ? ": " : "",
			 title);
		plots_gp_string(of.f, t);
	}
	fprintf(of.f, " noenhanced\nset xlabel \"%s (ms), log scale\"\n"
		      "set ylabel \"fraction of requests\"\nset logscale x\n"
		      "set autoscale xfix\nset offsets graph 0.01, graph 0.03, 0, 0\nset yrange [0:1.02]\n"
		      "set key below center horizontal noenhanced height 1\n", label);
	/* under three decades, gnuplot's log ticks (one per decade) leave the
	 * axis almost bare: ticks at 1, 2 and 5 of each decade instead, or at
	 * every digit within one decade */
	if (hi > 0 && hi / lo < 1000) {
		static const double m125[] = { 1, 2, 5 }, m19[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
		bool fine = hi / lo < 10;
		const double *mant = fine ? m19 : m125;
		int nm = fine ? 9 : 3;

		fprintf(of.f, "set format x \"%%g\"\nset xtics (");
		for (int e = -3, first = 1; e <= 7; e++)
			for (int m = 0; m < nm; m++, first = 0)
				fprintf(of.f, "%s%g", first ? "" : ", ", mant[m] * pow(10, e));
		fprintf(of.f, ")\n");
	}
	for (int q = 0; q < 3; q++)
		fprintf(of.f, "set arrow %d from graph 0, first %.2f to graph 1, first %.2f nohead"
			      " dashtype 3 linecolor rgb \"gray50\"\n"
			      "set label %d \"p%d\" at graph 1, first %.2f offset 0.5,0 textcolor rgb"
			      " \"gray40\"\n",
			q + 1, qs[q], qs[q], q + 1, (int)(qs[q] * 100 + 0.5), qs[q]);
	fprintf(of.f, "set rmargin 6\n");
	for (int i = 0; i < s->n; i++)
		shown += cnt[i] > 0;
	if (!shown) {
		fprintf(of.f, "set xrange [1:10]\nset label 10 \"no run has a %s\" at graph 0.5, 0.5"
			      " center\nplot 2 notitle\n", label);
	} else {
		/* the percentile marks in the colour of their run's line */
		fprintf(of.f, "plot");
		for (int i = 0, c = 0; i < s->n; i++) {
			if (!cnt[i])
				continue;
			fprintf(of.f, "%s datadir.\"/%s.dat\" index %d using 1:2 with lines linewidth 2"
				      " linecolor %d title ", c ? ", \\\n    " : "", name, i, i + 1);
			plots_gp_string(of.f, s->names[i]);
			fprintf(of.f, ", \\\n     datadir.\"/%s.dat\" index %d using 1:2 with points"
				      " pointtype 7 pointsize 1.3 linecolor %d notitle",
				name, s->n + i, i + 1);
			c++;
		}
		fprintf(of.f, "\n");
	}
	ret = outfile_commit(&of, err);
out:
	free(cnt);
	return ret;
}

int cmp_set_plots(const char *dir, const struct cmp_set *s, struct plot_outcome *plots,
		  struct ss_error *err)
{
	static const char *const names[] = { "compare_ttft_cdf", "compare_tpot_cdf",
					     "compare_e2e_cdf" };
	static const char *const labels[] = { "TTFT", "TPOT", "E2E" };
	static const char *const long_names[] = { "time to first token", "time per output token",
						  "end-to-end latency" };
	static const int metrics[] = { CMP_TTFT, CMP_TPOT, CMP_E2E };
	char title[300];
	uint64_t most = 1;
	double *buf;
	int ret = outdir_mkdirs(dir, err);

	if (ret)
		return ret;
	for (int i = 0; i < s->n; i++)
		most = s->runs[i].n > most ? s->runs[i].n : most;
	buf = malloc(most * sizeof(double));
	if (!buf)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	scenario_title(s, title, sizeof(title));
	for (int k = 0; k < 3 && !ret; k++)
		ret = write_cdf(dir, s, names[k], labels[k], long_names[k], metrics[k], title, buf,
				err);
	free(buf);
	if (!ret)
		ret = plots_render(dir, names, 3, 0, plots, err);
	return ret;
}

/* ---- report.html ----------------------------------------------------------- */

/* What every run's summary.json says of one scenario key or one stack
 * choice, as text; "-" where a run (a measured result) has none. */
static void scenario_cell(const struct cmp_set *s, int i, const char *sect, const char *key,
			  char *buf, size_t len)
{
	json_t *v = json_object_get(json_object_get(s->runs[i].summary, sect), key);

	if (!strcmp(sect, "stack"))
		v = json_object_get(v, "spec");
	if (json_is_string(v))
		snprintf(buf, len, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else
		snprintf(buf, len, "-");
}

/* The runs' scenarios and stacks side by side: a row per key any run has. */
static void scenario_html(FILE *f, const struct cmp_set *s)
{
	static const char *const keys[] = { "model", "gpu", "tp", "instances", "policy", "router",
					    "cost_model", "workload" };
	const char **head = calloc((size_t)s->n + 1, sizeof(*head));
	const char **cells = NULL, **names = NULL;
	char (*buf)[CELL] = NULL;
	int nk = (int)(sizeof(keys) / sizeof(keys[0])), n_stack = 0, cap = 0, nrow;

	for (int i = 0; i < s->n; i++)
		cap += (int)json_object_size(json_object_get(s->runs[i].summary, "stack"));
	names = calloc((size_t)cap + 1, sizeof(*names));
	if (!head || !names)
		goto out;
	/* the stack choices, in the first run's order, then any others */
	for (int i = 0; i < s->n; i++) {
		const char *k;
		json_t *v;

		json_object_foreach(json_object_get(s->runs[i].summary, "stack"), k, v) {
			int j = 0;
			bool dup = false;

			/* the scenario's policy and router are the stack's */
			for (int q = 0; q < nk; q++)
				dup = dup || !strcmp(keys[q], k);
			while (j < n_stack && strcmp(names[j], k))
				j++;
			if (j == n_stack && !dup)
				names[n_stack++] = k;
		}
	}
	nrow = nk + n_stack;
	cells = calloc((size_t)nrow * (size_t)(s->n + 1), sizeof(*cells));
	buf = calloc((size_t)nrow * (size_t)s->n, CELL);
	if (!cells || !buf)
		goto out;
	head[0] = "";
	for (int i = 0; i < s->n; i++)
		head[i + 1] = s->names[i];
	for (int r = 0; r < nrow; r++) {
		const char *sect = r < nk ? "scenario" : "stack", *key = r < nk ? keys[r] : names[r - nk];

		cells[r * (s->n + 1)] = key;
		for (int i = 0; i < s->n; i++) {
			char *b = buf[r * s->n + i];

			scenario_cell(s, i, sect, key, b, CELL);
			cells[r * (s->n + 1) + i + 1] = b;
		}
	}
	html_table(f, &(struct html_table){ .caption = "Scenario and serving stack of each run",
					    .n_cols = s->n + 1, .n_rows = nrow, .head = head,
					    .cells = cells, .wrap = true });
out:
	free(buf);
	free(cells);
	free(names);
	free(head);
}

/* compare_print()'s table of per-request errors of run i against the reference. */
static void per_request_html(FILE *f, const struct cmp_set *s, int i)
{
	static const char *const head[] = { "", "MAPE %", "p50 APE %", "p90 APE %", "p50 ref",
					    "p50 other", "err %", "p99 ref", "p99 other", "err %" };
	static const char *const label[CMP_N_METRICS] = { "TTFT", "TPOT", "E2E", "ITL" };
	const struct cmp_result *c = &s->pair[i];
	char buf[CMP_N_METRICS * 10][24], caption[600];
	const char *cells[CMP_N_METRICS * 10];

	for (int k = 0; k < CMP_N_METRICS; k++) {
		const struct cmp_metric *m = &c->m[k];
		const double v[9] = { m->mape_pct, m->p50_ape_pct, m->p90_ape_pct, m->ref[0],
				      m->other[0], m->err_pct[0], m->ref[2], m->other[2],
				      m->err_pct[2] };
		static const char *const fmt[9] = { "%.2f", "%.2f", "%.2f", "%.3f", "%.3f", "%+.2f",
						    "%.3f", "%.3f", "%+.2f" };

		cells[k * 10] = label[k];
		for (int j = 0; j < 9; j++) {
			if (isfinite(v[j]))
				snprintf(buf[k * 10 + j + 1], sizeof(buf[0]), fmt[j], v[j]);
			else
				snprintf(buf[k * 10 + j + 1], sizeof(buf[0]), "-");
			cells[k * 10 + j + 1] = buf[k * 10 + j + 1];
		}
	}
	snprintf(caption, sizeof(caption), "Per-request errors of %s against %s (ms; %llu requests)",
		 s->names[i], s->names[s->ref], (unsigned long long)c->n_requests);
	html_table(f, &(struct html_table){ .caption = caption, .n_cols = 10,
					    .n_rows = CMP_N_METRICS, .head = head, .cells = cells });
	html_para(f, "throughput: %.3f vs %.3f req/s (%+.2f%%), %.1f vs %.1f output tok/s (%+.2f%%); errors are %s relative to %s; ITL percentiles from each run's summary",
		  c->ref_rps, c->other_rps, c->rps_err_pct, c->ref_otps, c->other_otps,
		  c->otps_err_pct, s->names[i], s->names[s->ref]);
}

static void print_cb(FILE *f, const void *ctx)
{
	cmp_set_print(f, ctx);
}

static void slo_text(char *buf, size_t len, json_t *slo)
{
	char *p = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&p, &n);

	buf[0] = 0;
	if (!m)
		return;
	print_slo(m, slo);
	if (fclose(m) == 0)
		snprintf(buf, len, "%s", p);
	free(p);
}

int cmp_set_html(const char *dir, const struct cmp_set *s, const struct plot_outcome *plots,
		 const char *command_line, struct ss_error *err)
{
	static const char *const pnames[] = { "compare_ttft_cdf", "compare_tpot_cdf",
					      "compare_e2e_cdf" };
	static const char *const run_head[] = { "run", "directory", "mode", "requests", "status",
						"SLOs" };
	int nc = s->n + (s->ref < 0 ? 2 : 0);
	char (*cell)[CELL] = calloc((size_t)nc * CMP_SET_ROWS, CELL);
	char (*rbuf)[CELL] = calloc((size_t)s->n * 4, CELL);
	const char **cells = calloc((size_t)(nc + 1) * CMP_SET_ROWS, sizeof(*cells));
	const char **head = calloc((size_t)nc + 1, sizeof(*head));
	const char **rcells = calloc((size_t)s->n * 6, sizeof(*rcells));
	char (*hbuf)[CELL] = calloc((size_t)nc, CELL);
	char title[400], sub[400];
	struct ss_file of;
	char *text = html_capture(print_cb, s);
	FILE *f;
	int ret;

	if (!cell || !rbuf || !cells || !head || !rcells || !hbuf || !text) {
		ret = ss_error_set(err, -ENOMEM, dir, 0, HTML_REPORT_NAME ": out of memory");
		goto out;
	}
	if (s->ref >= 0)
		snprintf(title, sizeof(title), "servesim compare: %d runs against %s", s->n,
			 s->names[s->ref]);
	else
		snprintf(title, sizeof(title), "servesim compare: %d runs", s->n);
	scenario_title(s, sub, sizeof(sub));
	ret = html_file_open(&of, dir, title, sub[0] ? sub : NULL, err);
	if (ret < 0)
		goto out;
	f = of.f;
	fputs("<nav><a href=\"#results\">Results</a><a href=\"#plots\">Plots</a>"
	      "<a href=\"#configuration\">Configuration</a><a href=\"#text\">Text</a></nav>\n", f);

	html_heading(f, 2, "Results", "results");
	for (int i = 0; i < s->n; i++) {
		const char *st = run_status(&s->runs[i]);

		rcells[i * 6] = s->names[i];
		rcells[i * 6 + 1] = s->runs[i].dir;
		snprintf(rbuf[i * 4], CELL, "%s%s", s->runs[i].mode, i == s->ref ? " (reference)" : "");
		rcells[i * 6 + 2] = rbuf[i * 4];
		snprintf(rbuf[i * 4 + 1], CELL, "%llu", (unsigned long long)s->runs[i].n);
		rcells[i * 6 + 3] = rbuf[i * 4 + 1];
		rcells[i * 6 + 4] = st ? st : "-";
		slo_text(rbuf[i * 4 + 2], CELL, run_slo(&s->runs[i]));
		rcells[i * 6 + 5] = rbuf[i * 4 + 2];
	}
	html_table(f, &(struct html_table){ .caption = "Runs", .n_cols = 6, .n_rows = s->n,
					    .head = run_head, .cells = rcells });
	if (!s->same_slo)
		html_note(f, "The runs' SLOs differ, so attainment and goodput are not compared.");

	table_cells(s, cell);
	head[0] = "";
	for (int j = 0; j < nc; j++) {
		snprintf(hbuf[j], CELL, "%s%s", column_head(s, j), j == s->ref ? " (ref)" : "");
		head[j + 1] = hbuf[j];
	}
	for (int r = 0; r < CMP_SET_ROWS; r++) {
		cells[r * (nc + 1)] = row_m(r)->label;
		for (int j = 0; j < nc; j++)
			cells[r * (nc + 1) + j + 1] = cell[r * nc + j];
	}
	html_table(f, &(struct html_table){ .caption = "Figures of each run", .n_cols = nc + 1,
					    .n_rows = CMP_SET_ROWS, .head = head, .cells = cells });
	if (s->ref >= 0)
		html_para(f, "Each run but the reference: run - reference, and %% of the reference; attainment in points; values in parentheses are not compared.");
	else
		html_para(f, "max/min: the largest value over the smallest; best: the run(s) with the lowest latency, the highest throughput, attainment and goodput.");
	for (int i = 0; s->ref >= 0 && i < s->n; i++)
		if (i != s->ref)
			per_request_html(f, s, i);

	html_plots(f, dir, pnames, 3, plots->skipped,
		   plots->warning.code ? plots->warning.msg : plots->skipped ?
		   "gnuplot was not found, so no plots were made (their scripts, .gp, and data, .dat, are in the output directory)." :
		   NULL);

	html_heading(f, 2, "Configuration", "configuration");
	if (command_line) {
		html_heading(f, 3, "Command line", NULL);
		html_pre(f, command_line);
	}
	scenario_html(f, s);

	html_heading(f, 2, "Text", "text");
	html_para(f, "The comparison as printed:");
	html_pre(f, text);
	ret = html_file_commit(&of, err);
out:
	free(text);
	free(hbuf);
	free(rcells);
	free(head);
	free(cells);
	free(rbuf);
	free(cell);
	return ret;
}
