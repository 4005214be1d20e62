/* servesim — a pool of forked worker processes for work that is a pure
 * function of an index (plan's configurations, sweep's (point, seed) runs).
 *
 * The parent forks `jobs` workers after everything is loaded, so a worker
 * needs no set-up of its own.  Each worker has two pipes: the parent writes
 * task indices (uint32_t) on one, the worker writes one fixed-size answer
 * per index back on the other; the parent poll()s the answer pipes and
 * hands a worker its next group of tasks as soon as it has answered the
 * last, so long and short tasks balance out.  Only the parent sees the
 * answers (on_answer: it alone writes databases and outputs).  Closing a
 * worker's task pipe tells it to exit.  Since a task's answer depends only
 * on its index, the outputs do not depend on jobs.
 *
 * Tasks go out in groups: a group's indices are written at once to one
 * worker (plan's configurations that differ only in their running-set
 * limit, so one worker can reuse probes across them); a group is answered
 * in full before its worker gets the next.  Without groups each index is
 * one.
 *
 * Stopping: on_answer returning nonzero stops the handing out (the tasks
 * already handed out are still answered and passed to on_answer); so does
 * *interrupted becoming nonzero (a signal number, set by the program's
 * handler), when the caller passes it: the workers then run in process
 * groups of their own, so that a terminal's Ctrl-C reaches the parent
 * alone, which passes the signal on to its busy workers once.
 *
 * The pool lives in cli/ because it ignores SIGPIPE while it runs (a
 * worker that died must not kill the parent writing to its pipe): only the
 * program touches signal dispositions (tests/lib-no-signals.sh).
 *
 * Alternatives rejected: threads (a crash or an abort in one task would end
 * the whole plan, and a worker's memory is returned whole when it exits); a
 * shared-memory queue (pipes need no locking and tell the parent at once
 * when a worker dies).  Over MPI ranks the same tasks and answers travel as
 * messages (cli_workers_run_ranks()).
 */
#ifndef SS_CLI_WORKERS_H
#define SS_CLI_WORKERS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ss-error.h"

struct cli_workers {
	const char *name;            /* prefix of messages: "plan", "sweep" */
	const uint32_t *idx;         /* task indices, in the order handed out */
	/* n_groups + 1 offsets into idx, group g being idx[group[g] ..
	 * group[g + 1]); NULL: each index is a group of its own. */
	const size_t *group;
	size_t n_groups;             /* groups (indices when group is NULL) */
	size_t msg_size;             /* bytes of one answer */
	int jobs;                    /* worker processes wanted, >= 1 */
	/* In a worker (or in the parent with one job): do task idx, filling
	 * all msg_size bytes of msg.  Must not fail: a failure is an answer. */
	void (*run)(void *ctx, uint32_t idx, void *msg);
	/* In the parent, for each answer, in the order they arrive: 0 goes
	 * on, > 0 stops handing out tasks, < 0 is an error (in err) that
	 * stops too and is returned. */
	int (*on_answer)(void *ctx, const void *msg, struct ss_error *err);
	void *ctx;
	/* NULL, or the program's interrupt flag (see above). */
	volatile sig_atomic_t *interrupted;
};

/* Do the tasks: in this process when jobs is 1 or there is one task, else
 * in min(jobs, n_groups) workers.  Returns 0, the first error of
 * on_answer(), or the error of a worker that died or stopped answering
 * (not counted once interrupted). */
int cli_workers_run(const struct cli_workers *w, struct ss_error *err);

/* MPI ranks in place of workers (the transport of cli/plan-mpi.h): rank r
 * does the groups g with g % size == r, in order, and sends each answer to
 * rank 0.  Rank 0 does its own share (until a stop or an interrupt), passes
 * every answer to on_answer as it arrives -- its own, and between them
 * those received meanwhile -- then waits for the rest: it always receives
 * one answer per task of the other ranks, which cannot hear of its stop.
 * After an interrupt a rank answers its remaining tasks with skip() instead
 * of running them, when skip is set.  jobs is not used. */
struct cli_ranks {
	int rank, size;              /* this process's rank, of size >= 2 */
	/* Send n bytes to rank 0; on rank 0, receive one such message from any
	 * rank (wait false: false at once when none has arrived). */
	void (*send)(const void *msg, size_t n);
	bool (*recv)(void *msg, size_t n, bool wait);
	/* NULL, or fill msg as the answer of task idx, not run. */
	void (*skip)(void *ctx, uint32_t idx, void *msg);
};

/* Returns 0 or the first error of on_answer() (rank 0; others return 0). */
int cli_workers_run_ranks(const struct cli_workers *w, const struct cli_ranks *r,
			  struct ss_error *err);

#endif
