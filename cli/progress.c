/* servesim — progress with an ETA (cli/progress.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "progress.h"
#include "params.h"

/* A terminal line is redrawn at most this often: faster is flicker, and
 * a redraw is a write(2). */
#define TTY_REDRAW_NS (200 * 1000000LL)
/* The status line's period in a log: often enough that a CI job shows it
 * is alive, rarely enough that a long plan does not fill the log. */
#define LOG_INTERVAL_S 30
#define NS_PER_S 1000000000LL

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* The period of the status lines in a log: SERVESIM_PROGRESS_INTERVAL
 * seconds (>= 0), else LOG_INTERVAL_S.  Only cli/ reads the environment. */
static int64_t log_interval(void)
{
	const char *env = getenv("SERVESIM_PROGRESS_INTERVAL");
	double s;

	if (!env || !*env)
		return LOG_INTERVAL_S * NS_PER_S;
	if (ss_parse_double(env, &s) && s >= 0 && s <= 1e6)
		return (int64_t)(s * 1e9);
	cli_errorf("SERVESIM_PROGRESS_INTERVAL: expected seconds in [0, 1e6], got '%s'; using %d",
		   env, LOG_INTERVAL_S);
	return LOG_INTERVAL_S * NS_PER_S;
}

/* ns as M:SS, or H:MM:SS from an hour on. */
static void hms(int64_t ns, char *buf, size_t len)
{
	long long s = (long long)(ns / NS_PER_S);

	if (s >= 3600)
		snprintf(buf, len, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(buf, len, "%lld:%02lld", s / 60, s % 60);
}

/* "WHAT: DONE/TOTAL UNIT (P%), elapsed E[, ETA R]" into buf. */
static int format(const struct cli_progress *p, int64_t t, bool eta, char *buf, size_t len)
{
	int64_t el = t - p->t0_ns;
	char e[32], r[32] = "?";
	unsigned pct = p->total ? (unsigned)(100.0 * (double)p->done / (double)p->total) : 100;

	hms(el, e, sizeof(e));
	if (p->done > 0 && p->done <= p->total)
		hms((int64_t)((double)el * (double)(p->total - p->done) / (double)p->done), r,
		    sizeof(r));
	return snprintf(buf, len, "%s: %llu/%llu %s (%u%%), elapsed %s%s%s", p->what,
			(unsigned long long)p->done, (unsigned long long)p->total, p->unit,
			pct > 100 ? 100 : pct, e, eta ? ", ETA " : "", eta ? r : "");
}

void cli_progress_start(struct cli_progress *p, const char *what, const char *unit,
			uint64_t total, bool quiet)
{
	memset(p, 0, sizeof(*p));
	p->what = what;
	p->unit = unit;
	p->total = total;
	p->on = !quiet;
	if (!p->on)
		return;
	p->tty = isatty(STDERR_FILENO);
	p->interval_ns = p->tty ? TTY_REDRAW_NS : log_interval();
	p->t0_ns = p->last_ns = now_ns();
}

void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total)
{
	char line[256];
	int64_t t;
	int n;

	if (!p->on)
		return;
	p->done = done;
	p->total = total;
	t = now_ns();
	if (t - p->last_ns < p->interval_ns)
		return;
	p->last_ns = t;
	n = format(p, t, true, line, sizeof(line));
	if (n < 0)
		return;
	if (p->tty) {
		/* pad over a longer line drawn before */
		fprintf(stderr, "\r%s%*s", line, p->width > n ? p->width - n : 0, "");
		if (n > p->width)
			p->width = n;
	} else {
		fprintf(stderr, "servesim %s\n", line);
		p->printed = true;
	}
	fflush(stderr);
}

void cli_progress_end(struct cli_progress *p)
{
	char line[256];

	if (!p->on)
		return;
	if (p->tty && p->width > 0)
		fprintf(stderr, "\r%*s\r", p->width, "");
	else if (p->printed && format(p, now_ns(), false, line, sizeof(line)) >= 0)
		fprintf(stderr, "servesim %s\n", line);
	fflush(stderr);
	p->on = false;
}
