/* servesim — plots: gnuplot data and scripts, and PNGs when gnuplot exists.
 *
 * Each plot is a data file NAME.dat and a script NAME.gp that renders
 * NAME.png.  The script runs as it stands from the output directory
 * (`gnuplot ttft_cdf.gp`); we run it as `gnuplot -c NAME.gp DIR OUTFILE`
 * (ARG1 = directory of the data, ARG2 = the PNG to write), so no path is
 * ever pasted into gnuplot syntax and the PNG, too, is written under a
 * temporary name and renamed.  gnuplot is looked up on PATH by hand and
 * started with posix_spawn (no shell) in its own process group; its stderr
 * goes to a fresh temporary file whose telling line ends up in the error
 * when it fails.  A gnuplot that runs past the time limit is killed: plots
 * are optional, so that is a warning for the caller, not an error.  Without gnuplot the
 * .dat and .gp files are kept and the caller is told the PNGs were skipped.
 */
#include "outdir-int.h"
#include "metrics-int.h"
#include "report-int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define CDF_MAX_POINTS 2000
#define TS_MAX_SHOWN 4          /* instances drawn one by one; more: instance 0 and mean */

/* Lines every script starts with: its arguments and a PNG terminal. */
void plots_gp_prologue(FILE *f, const char *name, const char *what, int height)
{
	fprintf(f,
		"# servesim: %s.\n"
		"# Run from this directory: gnuplot %s.gp  (writes %s.png)\n"
		"# servesim runs it as: gnuplot -c %s.gp DATADIR OUTFILE\n"
		"datadir = \".\"\n"
		"outfile = \"%s.png\"\n"
		"if (exists(\"ARGC\") && ARGC >= 1) datadir = ARG1\n"
		"if (exists(\"ARGC\") && ARGC >= 2) outfile = ARG2\n"
		"if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
		"    set terminal pngcairo size 900,%d enhanced font \"sans,11\"\n"
		"} else {\n"
		"    set terminal png size 900,%d\n"
		"}\n"
		"set output outfile\n"
		"set grid\n",
		what, name, name, name, name, height, height);
}

static bool gp_unsafe(unsigned char c)
{
	return c < 0x20 || c == 0x7f || c == '`';
}

void plots_gp_string(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		fputc(gp_unsafe((unsigned char)*s) ? '?' : *s, f);
	}
	fputc('\'', f);
}

void plots_dat_text(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(gp_unsafe((unsigned char)*s) || *s == '"' ? '?' : *s, f);
}

/* ---- CDF of a per-request latency --------------------------------------- */

struct cdf_plot {
	const char *name;        /* file stem */
	enum req_metric metric;
	const char *label;       /* "TTFT" */
	const char *long_name;   /* "time to first token" */
};

static const struct cdf_plot cdf_plots[] = {
	{ "ttft_cdf", REQ_METRIC_TTFT, "TTFT", "time to first token" },
	{ "tpot_cdf", REQ_METRIC_TPOT, "TPOT", "time per output token" },
};

/* v sorted, n > 0: at most CDF_MAX_POINTS points (value, fraction of
 * requests <= value), always including the smallest and the largest. */
static void cdf_dat(FILE *f, const struct cdf_plot *p, const double *v, uint64_t n)
{
	uint64_t m = n < CDF_MAX_POINTS ? n : CDF_MAX_POINTS;

	fprintf(f, "# %s CDF: %s_ms fraction_of_requests (%llu requests)\n", p->label,
		p->label, (unsigned long long)n);
	for (uint64_t k = 0; k < m; k++) {
		uint64_t i = m == n ? k : (uint64_t)((double)k * (double)(n - 1) / (double)(m - 1) + 0.5);

		fprintf(f, "%.9g %.9g\n", v[i], (double)(i + 1) / (double)n);
	}
}

/* A latency for a label: 4 significant digits, never an exponent. */
static void fmt_ms(char *buf, size_t len, double ms)
{
	if (ms >= 1000)
		snprintf(buf, len, "%.0f ms", ms);
	else
		snprintf(buf, len, "%.4g ms", ms);
}

/* slo_ms > 0: the SLO as a vertical line, labelled with the share of
 * the plotted requests within it, the x range widened to show it. */
static void cdf_gp(FILE *f, const struct cdf_plot *p, const double *v, uint64_t n,
		   const char *scenario, double slo_ms)
{
	static const double qs[] = { 0.50, 0.90, 0.99 };
	static const char *const qn[] = { "p50", "p90", "p99" };
	double lo_v = slo_ms > 0 && slo_ms < v[0] ? slo_ms : v[0];
	double hi_v = slo_ms > v[n - 1] ? slo_ms : v[n - 1];
	bool logx = lo_v > 0 && hi_v / lo_v > 100;
	char what[96], val[32];

	snprintf(what, sizeof(what), "CDF of the %s", p->long_name);
	plots_gp_prologue(f, p->name, what, 600);
	fprintf(f, "set title \"CDF of %s (%s), %llu completed requests%s\"", p->long_name,
		p->label, (unsigned long long)n, scenario ? "\\n" : "");
	if (scenario) {
		fputc('.', f);
		plots_gp_string(f, scenario);
	}
	fprintf(f, " noenhanced\n");
	fprintf(f, "set xlabel \"%s (ms)%s\"\n", p->label, logx ? ", log scale" : "");
	fprintf(f, "set ylabel \"fraction of requests\"\n");
	if (logx)
		fprintf(f, "set logscale x\nset autoscale xfix\n");
	if (slo_ms > 0) {
		uint64_t within = 0;

		while (within < n && v[within] <= slo_ms)
			within++;
		/* the data's range and the SLO's, with a margin on the SLO's side */
		fprintf(f, "set xrange [%.9g:%.9g]\n", slo_ms < v[0] ? slo_ms / (logx ? 1.3 : 1.1) : v[0],
			slo_ms > v[n - 1] ? slo_ms * (logx ? 1.3 : 1.1) : v[n - 1]);
		fmt_ms(val, sizeof(val), slo_ms);
		fprintf(f, "set arrow 1 from %.9g, graph 0 to %.9g, graph 1 nohead dashtype 2 linewidth 2 linecolor rgb \"#c00000\"\n",
			slo_ms, slo_ms);
		fprintf(f, "set label 4 \"SLO %s: %.1f%% within\" at %.9g, graph 0.18 %s offset %s,0 textcolor rgb \"#c00000\"\n",
			val, 100.0 * (double)within / (double)n, slo_ms,
			slo_ms > v[n - 1] ? "right" : "left", slo_ms > v[n - 1] ? "-1" : "1");
	}
	fprintf(f, "set yrange [0:1.02]\nset key bottom right\n");
	for (int i = 0; i < 3; i++) {
		double x = ss_quantile_sorted(v, n, qs[i]);
		double lo = logx ? log(v[0]) : v[0], hi = logx ? log(v[n - 1]) : v[n - 1];
		double at = hi > lo ? ((logx ? log(x) : x) - lo) / (hi - lo) : 0;

		/* labels right of their point, or left of it near the right edge */
		fmt_ms(val, sizeof(val), x);
		fprintf(f, "set label %d \"%s %s\" at %.9g, %.2f %s point pointtype 7 offset %s,-0.6\n",
			i + 1, qn[i], val, x, qs[i], at > 0.6 ? "right" : "left",
			at > 0.6 ? "-1" : "1");
	}
	fprintf(f, "plot datadir.\"/%s.dat\" using 1:2 with lines linewidth 2 title \"%s\"\n",
		p->name, p->label);
}

/* ---- queue, running set and KV use over time ---------------------------- */

static int64_t total_blocks(const struct engine_results *r, int32_t inst)
{
	if (inst >= 0 && (uint32_t)inst < r->n_instances && r->inst[inst].total_blocks > 0)
		return r->inst[inst].total_blocks;
	return r->kv_blocks_per_instance;
}

/* One row per sampling time: t_s, then queued running kv_util power_w (per
 * GPU) of each shown instance, then their means over all instances.
 * Samples are in time order; an instance missing from a time keeps its
 * previous values. */
#define TS_COLS 4

static int ts_dat(FILE *f, const struct engine_results *r, uint32_t shown, bool metered,
		  struct ss_error *err)
{
	uint32_t ni = r->n_instances;
	struct ts_sample *last = calloc(ni, sizeof(*last));
	double tp = r->tp > 0 ? r->tp : 1;
	uint64_t i = 0;

	if (!last)
		return ss_error_set(err, -ENOMEM, NULL, 0, "timeseries: out of memory");
	fprintf(f, "# t_s");
	for (uint32_t k = 0; k < shown; k++)
		fprintf(f, " queued_%u running_%u kv_util_%u power_w_%u", k, k, k, k);
	fprintf(f, " queued_mean running_mean kv_util_mean power_w_mean\n");
	while (i < r->n_samples) {
		int64_t t = r->samples[i].t_ns;
		double q = 0, run = 0, kv = 0, pw = 0;

		for (; i < r->n_samples && r->samples[i].t_ns == t; i++) {
			int32_t k = r->samples[i].instance;

			if (k >= 0 && (uint32_t)k < ni)
				last[k] = r->samples[i];
		}
		fprintf(f, "%.9g", (double)t / 1e9);
		for (uint32_t k = 0; k < ni; k++) {
			int64_t tb = total_blocks(r, (int32_t)k);
			double u = tb > 0 ? (double)last[k].kv_used_blocks / (double)tb : 0;

			/* unmetered power is unknown: nan, which gnuplot skips */
			if (k < shown)
				fprintf(f, " %d %d %.6g %.6g", last[k].queued, last[k].running, u,
					metered ? last[k].power_w / tp : NAN);
			q += last[k].queued;
			run += last[k].running;
			kv += u;
			pw += last[k].power_w / tp;
		}
		fprintf(f, " %.6g %.6g %.6g %.6g\n", q / ni, run / ni, kv / ni,
			metered ? pw / ni : NAN);
	}
	free(last);
	return 0;
}

/* metered false: the power panel is left out (nothing measured power). */
static void ts_gp(FILE *f, const struct engine_results *r, uint32_t shown, bool metered)
{
	static const char *const panel[TS_COLS] = { "waiting requests", "running requests",
						    "KV cache used (%)", "power per GPU (W)" };
	uint32_t ni = r->n_instances;
	uint32_t mean_col = 2 + TS_COLS * shown;
	int panels = metered ? TS_COLS : TS_COLS - 1;

	plots_gp_prologue(f, "timeseries", metered ?
			  "queue length, running set, KV cache use and power over time" :
			  "queue length, running set and KV cache use over time (power not metered)",
			  900);
	fprintf(f, "set multiplot layout %d,1 title \"Instances over time (%u instance%s%s)\"\n",
		panels, ni, ni == 1 ? "" : "s", ni > shown ? "; instance 0 and the mean" : "");
	fprintf(f, "set key outside right\nset lmargin 12\nset rmargin 22\n");
	for (int p = 0; p < panels; p++) {
		const char *scale = p == 2 ? "100*" : "";
		const char *sep = "";

		fprintf(f, "set ylabel \"%s\"\n", panel[p]);
		fprintf(f, p == panels - 1 ? "set xlabel \"time (s)\"\n" : "unset xlabel\n");
		if (p == 1)
			fprintf(f, "unset key\n");    /* the top panel's key serves all */
		fprintf(f, p == 2 ? "set yrange [0:100]\n" : "set yrange [0:*]\n");
		fprintf(f, "plot");
		for (uint32_t k = 0; k < shown; k++) {
			const char *role = r->disaggregated && r->inst && r->inst[k].role ?
					   r->inst[k].role : NULL;

			fprintf(f, "%s datadir.\"/timeseries.dat\" using 1:(%s$%u) with steps title \"instance %u%s%s%s\"",
				sep, scale, 2 + TS_COLS * k + (uint32_t)p, k, role ? " (" : "",
				role ? role : "", role ? ")" : "");
			sep = ", \\\n    ";
		}
		if (ni > shown || ni > 1)
			fprintf(f, "%s datadir.\"/timeseries.dat\" using 1:(%s$%u) with steps linewidth 2 title \"mean\"",
				sep, scale, mean_col + (uint32_t)p);
		fprintf(f, "\n");
	}
	fprintf(f, "unset multiplot\n");
}

/* ---- running gnuplot ---------------------------------------------------- */

/* The telling line of gnuplot's stderr, for the error message: the first
 * one naming a script position ("FILE" line N: ...) or an error, else the
 * last non-blank line (gnuplot also echoes the failing command). */
static void stderr_line(const char *path, char *buf, size_t len)
{
	char line[256];
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	if (!f)
		return;
	while (fgets(line, (int)sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (strspn(line, " \t^") == strlen(line))
			continue;
		snprintf(buf, len, "%s", line);
		if (line[0] == '"' || strstr(line, "rror"))
			break;
	}
	fclose(f);
}

/* Wait for pid until deadline (CLOCK_MONOTONIC, ns); *timed_out when it
 * had to be killed.  Polls with sleeps growing from 1 to 50 ms: gnuplot
 * takes a tenth of a second or more per plot, so the poll costs nothing
 * that matters, and it needs no SIGCHLD handler (library code must not
 * install one). */
static int wait_child(pid_t pid, int64_t deadline_ns, int *status, bool *timed_out)
{
	long sleep_ns = 1000000;
	struct timespec now;

	*timed_out = false;
	for (;;) {
		pid_t w = waitpid(pid, status, WNOHANG);

		if (w == pid)
			return 0;
		if (w < 0 && errno != EINTR)
			return -errno;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((int64_t)now.tv_sec * 1000000000 + now.tv_nsec >= deadline_ns)
			break;
		nanosleep(&(struct timespec){ .tv_sec = 0, .tv_nsec = sleep_ns }, NULL);
		if (sleep_ns < 50000000)
			sleep_ns *= 2;
	}
	/* gnuplot leads its own process group: take any helper it started too */
	*timed_out = true;
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static int run_gnuplot(const char *gnuplot, const char *dir, const char *name,
		       int64_t timeout_ns, bool *timed_out, struct ss_error *err)
{
	struct ss_file png;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	struct timespec t0;
	char script[PATH_MAX], errlog[PATH_MAX], msg[256];
	char png_name[64];
	char *argv[6];
	pid_t pid;
	int ret, status, e, logfd;

	*timed_out = false;
	errlog[0] = '\0';
	snprintf(png_name, sizeof(png_name), "%s.png", name);
	ret = outfile_prepare(&png, dir, png_name, err);
	if (ret < 0)
		return ret;
	snprintf(script, sizeof(script), "%s/%s.gp", dir, name);
	/* gnuplot's stderr: a fresh file created exclusively (never a name
	 * someone could have planted a link at), handed over as fd 2 */
	logfd = ss_file_scratch(png.path, errlog, sizeof(errlog), err);
	if (logfd < 0) {
		ret = logfd;
		goto out;
	}
	argv[0] = (char *)"gnuplot";
	argv[1] = (char *)"-c";
	argv[2] = script;
	argv[3] = (char *)dir;
	argv[4] = png.tmp;
	argv[5] = NULL;

	e = posix_spawn_file_actions_init(&fa);
	if (e) {
		ret = ss_error_set(err, -e, script, 0, "posix_spawn_file_actions_init: %s",
				   strerror(e));
		goto out;
	}
	e = posix_spawnattr_init(&attr);
	if (e) {
		posix_spawn_file_actions_destroy(&fa);
		ret = ss_error_set(err, -e, script, 0, "posix_spawnattr_init: %s", strerror(e));
		goto out;
	}
	e = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	if (!e)
		e = posix_spawnattr_setpgroup(&attr, 0);
	if (!e)
		e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!e)
		e = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (!e)
		e = posix_spawn_file_actions_adddup2(&fa, logfd, 2);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!e)
		e = posix_spawnp(&pid, gnuplot, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(logfd);
	if (e == ENOENT || e == EACCES) {
		ret = 1;   /* not installed: the caller skips the plots */
		goto out;
	}
	if (e) {
		ret = ss_error_set(err, -e, script, 0, "posix_spawn %s: %s", gnuplot,
				   strerror(e));
		goto out;
	}
	e = -wait_child(pid, (int64_t)t0.tv_sec * 1000000000 + t0.tv_nsec + timeout_ns, &status,
			timed_out);
	if (e) {
		ret = ss_error_set(err, -e, script, 0, "waitpid (gnuplot): %s", strerror(e));
		goto out;
	}
	if (*timed_out) {
		ret = 0;
		goto out;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		/* the exec failed in the child (where posix_spawnp is emulated
		 * with fork, as under valgrind, ENOENT arrives as status 127) */
		ret = 1;
		goto out;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		stderr_line(errlog, msg, sizeof(msg));
		if (WIFEXITED(status))
			ret = ss_error_set(err, -EIO, script, 0, "gnuplot exited with status %d%s%s",
					   WEXITSTATUS(status), msg[0] ? ": " : "", msg);
		else
			ret = ss_error_set(err, -EIO, script, 0, "gnuplot killed by signal %d",
					   WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		goto out;
	}
	unlink(errlog);
	return outfile_commit(&png, err);
out:
	if (errlog[0])
		unlink(errlog);
	outfile_abort(&png);
	return ret;
}

/* ---- the plots ----------------------------------------------------------- */

/* Write NAME.dat and NAME.gp for every plot with data; names[] gets the
 * stems of the plots written. */
static int write_cdfs(const char *dir, const struct engine_results *r,
		      const struct plot_scenario *sc, const char **names, int *n_names,
		      struct ss_error *err)
{
	double *v = NULL;
	int ret = 0;

	if (r->n_req == 0)
		return 0;
	v = malloc(r->n_req * sizeof(*v));
	if (!v)
		return ss_error_set(err, -ENOMEM, dir, 0, "plots: out of memory");
	for (size_t c = 0; c < sizeof(cdf_plots) / sizeof(cdf_plots[0]); c++) {
		const struct cdf_plot *p = &cdf_plots[c];
		struct ss_file of;
		char fname[64];
		uint64_t n = metrics_collect(r, p->metric, v);

		if (n == 0)
			continue;
		metrics_sort(v, n);
		snprintf(fname, sizeof(fname), "%s.dat", p->name);
		ret = outfile_open(&of, dir, fname, 1u << 16, err);
		if (ret < 0)
			break;
		cdf_dat(of.f, p, v, n);
		ret = outfile_commit(&of, err);
		if (ret < 0)
			break;
		snprintf(fname, sizeof(fname), "%s.gp", p->name);
		ret = outfile_open(&of, dir, fname, 0, err);
		if (ret < 0)
			break;
		cdf_gp(of.f, p, v, n, sc ? sc->line : NULL,
		       !sc ? 0 : p->metric == REQ_METRIC_TTFT ? sc->ttft_slo_ms :
		       p->metric == REQ_METRIC_TPOT ? sc->tpot_slo_ms : 0);
		ret = outfile_commit(&of, err);
		if (ret < 0)
			break;
		names[(*n_names)++] = p->name;
	}
	free(v);
	return ret;
}

static int write_timeseries(const char *dir, const struct engine_results *r, bool metered,
			    const char **names, int *n_names, struct ss_error *err)
{
	struct ss_file of;
	uint32_t shown;
	int ret;

	if (r->n_samples == 0 || r->n_instances == 0)
		return 0;
	shown = r->n_instances <= TS_MAX_SHOWN ? r->n_instances : 1;
	ret = outfile_open(&of, dir, "timeseries.dat", 1u << 20, err);
	if (ret < 0)
		return ret;
	ret = ts_dat(of.f, r, shown, metered, err);
	if (ret < 0) {
		outfile_abort(&of);
		return ret;
	}
	ret = outfile_commit(&of, err);
	if (ret < 0)
		return ret;
	ret = outfile_open(&of, dir, "timeseries.gp", 0, err);
	if (ret < 0)
		return ret;
	ts_gp(of.f, r, shown, metered);
	ret = outfile_commit(&of, err);
	if (ret < 0)
		return ret;
	names[(*n_names)++] = "timeseries";
	return 0;
}

int plots_write(const char *dir, const struct engine_results *r, bool metered, int64_t timeout_ns,
		struct plot_outcome *po, struct ss_error *err)
{
	return plots_write_scenario(dir, r, metered, NULL, timeout_ns, po, err);
}

int plots_write_scenario(const char *dir, const struct engine_results *r, bool metered,
			 const struct plot_scenario *sc, int64_t timeout_ns, struct plot_outcome *po,
			 struct ss_error *err)
{
	const char *names[4];
	int n = 0, ret;

	ret = write_cdfs(dir, r, sc, names, &n, err);
	if (ret < 0)
		return ret;
	ret = write_timeseries(dir, r, metered, names, &n, err);
	if (ret < 0)
		return ret;
	ret = plots_render(dir, names, n, timeout_ns, po, err);
	for (int i = 0; i < n; i++)
		po->names[i] = names[i];
	po->n_names = n;
	return ret;
}

int plots_render(const char *dir, const char *const *names, int n, int64_t timeout_ns,
		 struct plot_outcome *po, struct ss_error *err)
{
	bool timed_out;
	int ret;

	memset(po, 0, sizeof(*po));
	if (n == 0)
		return 0;
	if (timeout_ns <= 0)
		timeout_ns = REPORT_PLOT_TIMEOUT_NS;
	for (int i = 0; i < n; i++) {
		/* posix_spawnp searches PATH in the child's environment, as
		 * execvp does: library code never reads the environment */
		ret = run_gnuplot("gnuplot", dir, names[i], timeout_ns, &timed_out, err);
		if (ret < 0)
			return ret;
		if (ret > 0) {
			po->skipped = true;
			return 0;
		}
		if (timed_out) {
			/* a gnuplot that hangs on one plot will hang on the next */
			ss_error_set(&po->warning, -ETIMEDOUT, NULL, 0,
				     "gnuplot did not finish %s/%s.gp within %.3g s and was killed; %d of %d PNGs not rendered (the .gp and .dat files are written)",
				     dir, names[i], (double)timeout_ns / 1e9, n - i, n);
			return 0;
		}
	}
	return 0;
}

const char *plot_outcome_warning(const struct plot_outcome *po, const char *dir, char *buf,
				 size_t len)
{
	if (po->warning.code) {
		snprintf(buf, len, "warning: %s", po->warning.msg);
		return buf;
	}
	if (po->skipped) {
		snprintf(buf, len, "warning: gnuplot not found; wrote the plot scripts (.gp) and data (.dat) to %s",
			 dir);
		return buf;
	}
	return NULL;
}
