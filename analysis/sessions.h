/* servesim — session metrics (docs/metrics.md, "Sessions"): what a run of
 * a session workload (traces/workload.h struct wl_call) did per session and
 * per turn.  Summaries and summary.json carry them only when the workload
 * has sessions.
 */
#ifndef SS_SESSIONS_METRICS_H
#define SS_SESSIONS_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "metrics.h"
#include "workload.h"

/* Turns reported one by one: 0 .. SESSION_TURNS_MAX - 2, and every later
 * turn together in the last entry. */
#define SESSION_TURNS_MAX 16

struct session_turn {
	uint64_t calls, completed;
	struct dist ttft_ms;          /* from the call's send (its arrival) */
	uint64_t prompt_tokens;       /* of the calls that ran (not rejected) */
	uint64_t cached_tokens;       /* of them found in the prefix cache */
};

struct session_summary {
	uint64_t count;               /* sessions in the workload */
	uint64_t completed;           /* every call finished */
	uint64_t dropped;             /* a call was rejected: the rest was not sent */
	uint64_t unfinished;          /* neither (an interrupted run) */
	uint64_t calls, calls_abandoned;
	struct dist completion_s;     /* completed sessions: first call's arrival to
				       * the last call's finish, s */
	uint32_t n_turns;             /* entries of turn[] used */
	struct session_turn turn[SESSION_TURNS_MAX];
};

/* Figures of the run's n records of workload wl (wl->sess not NULL):
 * 0 or -ENOMEM. */
int session_summary_compute(struct session_summary *ss, const struct workload *wl,
			    const struct req_record *rec, size_t n);
/* summary.json "sessions"; NULL when out of memory. */
json_t *session_summary_json(const struct session_summary *ss);
/* A few lines of summary.txt. */
void session_summary_text(FILE *f, const struct session_summary *ss);

#endif
