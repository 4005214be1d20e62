/* servesim — sweep grids, per-run metrics, aggregation over seeds, CSV and
 * JSON (sweep-grid.h; docs/sweep.md). */
#include "sweep-grid.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_statistics_double.h>

#include "outdir-int.h"
#include "params.h"

/* ---- axes ----------------------------------------------------------------- */

void sweep_axis_release(struct sweep_axis *ax)
{
	if (!ax)
		return;
	for (size_t i = 0; i < ax->n; i++)
		free(ax->values[i]);
	free(ax->values);
	ax->values = NULL;
	ax->n = 0;
}

static int add_value(struct sweep_axis *ax, const char *v, size_t len, struct ss_error *err)
{
	char **nv;

	if (ax->n == SWEEP_MAX_VALUES)
		return ss_error_set(err, -EINVAL, NULL, 0, "--sweep %s: at most %d values", ax->key,
				    SWEEP_MAX_VALUES);
	nv = realloc(ax->values, (ax->n + 1) * sizeof(*nv));
	if (!nv)
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	ax->values = nv;
	nv[ax->n] = strndup(v, len);
	if (!nv[ax->n])
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	ax->n++;
	return 0;
}

/* START:STOP:STEP, all three numbers; false when spec is not of that form
 * (then it is a list of one value, "vllm:chunked=off" for instance). */
static bool range_parts(const char *spec, double v[3])
{
	char buf[3][64];
	const char *p = spec;

	for (int k = 0; k < 3; k++) {
		size_t len = strcspn(p, ":");

		if (len >= sizeof(buf[k]) || (k < 2 && p[len] != ':') || (k == 2 && p[len]))
			return false;
		memcpy(buf[k], p, len);
		buf[k][len] = '\0';
		if (!ss_parse_double(buf[k], &v[k]))
			return false;
		p += len + (k < 2);
	}
	return true;
}

int sweep_axis_parse(struct sweep_axis *ax, const char *spec, struct ss_error *err)
{
	const char *eq = strchr(spec, '=');
	const char *vals;
	double r[3];
	char sep;
	int rc = 0;

	memset(ax, 0, sizeof(*ax));
	if (!eq || eq == spec || !eq[1] || (size_t)(eq - spec) >= sizeof(ax->key))
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "--sweep: expected KEY=V1,V2,... or KEY=START:STOP:STEP, got '%s'",
				    spec);
	memcpy(ax->key, spec, (size_t)(eq - spec));
	ax->key[eq - spec] = '\0';
	vals = eq + 1;
	if (range_parts(vals, r)) {
		double span = r[1] - r[0], count;

		/* a step against the direction of the range, or none, never
		 * reaches STOP */
		if (!(r[2] != 0) || !isfinite(r[0]) || !isfinite(r[1]) || !isfinite(r[2]) ||
		    (span != 0 && (span > 0) != (r[2] > 0)))
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--sweep %s: expected START:STOP:STEP with a nonzero step towards STOP, got '%s'",
					    ax->key, vals);
		/* the 1e-9 (relative to a step) absorbs binary fractions:
		 * (4 - 1) / 0.5 is 6 exactly, (0.3 - 0.1) / 0.1 is 1.9999999999999998 */
		count = floor(span / r[2] + 1e-9) + 1;
		if (count > SWEEP_MAX_VALUES)
			return ss_error_set(err, -EINVAL, NULL, 0, "--sweep %s: %.0f values; at most %d",
					    ax->key, count, SWEEP_MAX_VALUES);
		for (int i = 0; i < (int)count && !rc; i++) {
			char buf[64];
			/* START + i STEP, not repeated additions: no drift */
			double x = r[0] + i * r[2];

			/* %.12g: 0.1 + 2 x 0.1 prints 0.3, as the user would write it */
			snprintf(buf, sizeof(buf), "%.12g", x);
			rc = add_value(ax, buf, strlen(buf), err);
		}
		return rc;
	}
	/* a list: ';' separates when there is one (values with commas) */
	sep = strchr(vals, ';') ? ';' : ',';
	for (const char *p = vals; !rc;) {
		size_t len = strcspn(p, sep == ';' ? ";" : ",");

		if (len == 0)
			return ss_error_set(err, -EINVAL, NULL, 0,
					    "--sweep %s: expected a list of values, got an empty one in '%s'",
					    ax->key, vals);
		for (size_t i = 0; i < ax->n; i++)
			if (strlen(ax->values[i]) == len && !strncmp(ax->values[i], p, len))
				return ss_error_set(err, -EINVAL, NULL, 0,
						    "--sweep %s: value '%.*s' given twice", ax->key,
						    (int)len, p);
		rc = add_value(ax, p, len, err);
		if (!p[len])
			break;
		p += len + 1;
	}
	return rc;
}

/* ---- metrics -------------------------------------------------------------- */

/* The DIST entries, in the order of their interval columns, and those
 * columns' names. */
static const enum metric_id interval_of[] = {
#define DIST(ID, ...) METRIC_##ID,
#define VALUE(...)
#include "metrics.def"
#undef DIST
#undef VALUE
};
static const char *const interval_names[] = {
#define DIST(ID, name, ...) name "_lo", name "_hi",
#define VALUE(...)
#include "metrics.def"
#undef DIST
#undef VALUE
};
_Static_assert(SWM_COUNT - SWM_CATALOG == 2 * sizeof(interval_of) / sizeof(interval_of[0]),
	       "two interval columns per DIST entry");

const char *sweep_metric_name(enum sweep_metric m)
{
	if ((unsigned)m < SWM_CATALOG)
		return metric_desc((enum metric_id)m)->name;
	return (unsigned)m < SWM_COUNT ? interval_names[m - SWM_CATALOG] : "?";
}

void sweep_values_from_summary(const struct summary *s, double v[SWM_COUNT])
{
	for (int m = 0; m < SWM_CATALOG; m++)
		v[m] = metric_desc((enum metric_id)m)->get(s);
	for (int m = SWM_CATALOG; m < SWM_COUNT; m += 2) {
		const struct metric_desc *d = metric_desc(interval_of[(m - SWM_CATALOG) / 2]);

		summary_interval_of(s, d->interval, d->get(s), &v[m], &v[m + 1]);
	}
}

void sweep_aggregate(const double *x, size_t n, struct sweep_stat *out)
{
	out->n = (uint32_t)n;
	out->mean = out->ci95 = NAN;
	if (n == 0)
		return;
	for (size_t i = 0; i < n; i++)
		if (isnan(x[i]))
			return;
	out->mean = gsl_stats_mean(x, 1, n);
	if (n < 2)
		return;
	/* the t quantile with n - 1 degrees of freedom: 12.706 for 2 runs,
	 * 2.776 for 5, towards 1.960 */
	out->ci95 = gsl_cdf_tdist_Pinv(0.975, (double)(n - 1)) * gsl_stats_sd(x, 1, n) /
		    sqrt((double)n);
}

/* ---- the table ------------------------------------------------------------ */

size_t sweep_point_value(const struct sweep_table *t, size_t p, size_t a)
{
	for (size_t b = t->n_axes; b-- > a + 1;)
		p /= t->axes[b].n;
	return p % t->axes[a].n;
}

uint32_t sweep_point_stats(const struct sweep_table *t, size_t p, struct sweep_stat st[SWM_COUNT])
{
	double x[t->n_seeds ? t->n_seeds : 1];

	for (int m = 0; m < SWM_COUNT; m++) {
		size_t n = 0;

		for (uint32_t k = 0; k < t->n_seeds; k++) {
			size_t r = p * t->n_seeds + k;

			if (t->done[r])
				x[n++] = t->values[r * SWM_COUNT + (size_t)m];
		}
		sweep_aggregate(x, n, &st[m]);
	}
	return st[0].n;
}

/* A CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\n\r")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void csv_real(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.10g", v);
}

int sweep_write_csv(FILE *f, const struct sweep_table *t)
{
	for (size_t a = 0; a < t->n_axes; a++) {
		csv_field(f, t->axes[a].key);
		fputc(',', f);
	}
	fputs("seeds", f);
	for (int m = 0; m < SWM_COUNT; m++)
		fprintf(f, ",%s_mean,%s_ci95", sweep_metric_name((enum sweep_metric)m),
			sweep_metric_name((enum sweep_metric)m));
	fputc('\n', f);
	for (size_t p = 0; p < t->n_points; p++) {
		struct sweep_stat st[SWM_COUNT];
		uint32_t n = sweep_point_stats(t, p, st);

		if (!n)
			continue;
		for (size_t a = 0; a < t->n_axes; a++) {
			csv_field(f, t->axes[a].values[sweep_point_value(t, p, a)]);
			fputc(',', f);
		}
		fprintf(f, "%u", n);
		for (int m = 0; m < SWM_COUNT; m++) {
			fputc(',', f);
			csv_real(f, st[m].mean);
			fputc(',', f);
			csv_real(f, st[m].ci95);
		}
		fputc('\n', f);
	}
	return ferror(f) ? -EIO : 0;
}

int sweep_prepare_dir(const char *dir, struct ss_error *err)
{
	return outdir_mkdirs(dir, err);
}

int sweep_write_dir_csv(const char *dir, const struct sweep_table *t, bool done,
			struct ss_error *err)
{
	struct ss_file of = { 0 };
	int rc;

	if (!done) {
		/* report.html too: it is written with sweep.csv (cli/cmd-sweep.c) */
		int rc0 = outdir_remove(dir, "sweep.csv", err);

		return rc0 ? rc0 : outdir_remove(dir, "report.html", err);
	}
	rc = outfile_open(&of, dir, "sweep.csv", 0, err);
	if (rc)
		return rc;
	if (sweep_write_csv(of.f, t)) {
		outfile_abort(&of);
		return ss_error_set(err, -EIO, dir, 0, "sweep.csv: write error");
	}
	return outfile_commit(&of, err);
}

static json_t *jreal(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

json_t *sweep_json(const struct sweep_table *t, const char *version, const char *description)
{
	json_t *doc = json_object(), *axes = json_array(), *points = json_array();

	if (!doc || !axes || !points)
		goto fail;
	for (size_t a = 0; a < t->n_axes; a++) {
		json_t *vals = json_array();

		if (!vals || json_array_append_new(axes, json_pack("{s:s, s:o}", "key",
								    t->axes[a].key, "values", vals)))
			goto fail;
		for (size_t i = 0; i < t->axes[a].n; i++)
			json_array_append_new(vals, json_string(t->axes[a].values[i]));
	}
	for (size_t p = 0; p < t->n_points; p++) {
		struct sweep_stat st[SWM_COUNT];
		uint32_t n = sweep_point_stats(t, p, st);
		json_t *keys = json_object(), *metrics = json_object();

		if (!keys || !metrics ||
		    json_array_append_new(points, json_pack("{s:I, s:o, s:i, s:o}", "point",
							     (json_int_t)p, "keys", keys, "seeds", (int)n,
							     "metrics", metrics)))
			goto fail;   /* json_pack took keys and metrics ("o") */
		for (size_t a = 0; a < t->n_axes; a++)
			json_object_set_new(keys, t->axes[a].key,
					    json_string(t->axes[a].values[sweep_point_value(t, p, a)]));
		for (int m = 0; n && m < SWM_COUNT; m++)
			json_object_set_new(metrics, sweep_metric_name((enum sweep_metric)m),
					    json_pack("{s:o, s:o}", "mean", jreal(st[m].mean), "ci95",
						      jreal(st[m].ci95)));
	}
	json_object_set_new(doc, "servesim_version", json_string(version));
	json_object_set_new(doc, "description", json_string(description));
	json_object_set_new(doc, "seed", json_integer(t->seed0));
	json_object_set_new(doc, "seeds", json_integer(t->n_seeds));
	json_object_set_new(doc, "confidence", json_real(0.95));
	json_object_set_new(doc, "axes", axes);
	json_object_set_new(doc, "points", points);
	return doc;
fail:
	json_decref(doc);
	json_decref(axes);
	json_decref(points);
	return NULL;
}
