/* servesim — progress with an ETA for long jobs (run, live, plan,
 * calibrate run; sweep and loop call the same three functions).
 *
 * On a terminal (stderr a tty): one line rewritten in place with \r,
 *
 *     run: 1200/2000 requests (60%), elapsed 0:42, ETA 0:28
 *
 * redrawn at most every 0.2 s and cleared by cli_progress_end(), so the
 * command's own output starts on a clean line.  Otherwise (a pipe, a CI
 * log): the same text as a line of its own, prefixed "servesim ", every
 * SERVESIM_PROGRESS_INTERVAL seconds (default 30; 0 = at every update),
 * never more often, and a last line at the end when any was printed.
 * Nothing with quiet.  The ETA is the linear one, elapsed x (total -
 * done) / done; it reads "?" until something is done.
 *
 * Cheap to call often: an update reads the monotonic clock and returns
 * unless the interval has passed.  Callers in hot loops call it every K
 * events (the engine: every 65,536 events in simulation), not per event.
 * Single-threaded: one progress per process at a time.
 */
#ifndef SS_CLI_PROGRESS_H
#define SS_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct cli_progress {
	const char *what;            /* "run", "plan", "calibrate run" (transfer none) */
	const char *unit;            /* "requests", "configurations", "points" */
	bool on;                     /* printing at all (not quiet) */
	bool tty;                    /* stderr is a terminal: the \r line */
	int64_t interval_ns;         /* between two prints, ns */
	int64_t t0_ns;               /* CLOCK_MONOTONIC at start, ns */
	int64_t last_ns;             /* at the last print, ns */
	uint64_t done, total;        /* units */
	int width;                   /* characters of the terminal line shown, 0 = none */
	bool printed;                /* a status line was printed (not a tty) */
};

/* Start reporting what's progress over total units (total may change
 * with each update).  quiet: print nothing, ever.  Reads
 * SERVESIM_PROGRESS_INTERVAL (a bad value: one warning line, then the
 * default). */
void cli_progress_start(struct cli_progress *p, const char *what, const char *unit,
			uint64_t total, bool quiet);
/* done of total units now; prints when the interval has passed. */
void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total);
/* Clear the terminal line, or print the last status line where one was
 * printed before; call it before printing anything else on stderr (an
 * error, the interrupted line).  Safe to call twice. */
void cli_progress_end(struct cli_progress *p);

#endif
