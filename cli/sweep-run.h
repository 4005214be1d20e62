/* servesim sweep — running (point, seed) runs: in this process, in -j
 * worker processes, or over MPI ranks (cli/sweep-workers.c; docs/sweep.md).
 *
 * The pool is plan's (cli/workers.h): workers forked after the set-
 * up, an index down a pipe, a fixed-size answer back, only the parent (or
 * MPI rank 0) writing the database; sweep passes it the interrupt flag, so
 * its workers run in process groups of their own and get a signal from the
 * parent.  The MPI transport (the module servesim-mpi.so, loaded by
 * plan_mpi_init) is plan's, shared.
 */
#ifndef SS_SWEEP_RUN_H
#define SS_SWEEP_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "ss-error.h"
#include "sweep-grid.h"

/* One run's answer; travels whole through a pipe or as an MPI message. */
struct sweep_msg {
	uint32_t run;                /* point x seeds + seed index */
	int32_t status;              /* exit status: 0 finished, 130/143 stopped by a
				      * signal (or never started after one), else failed */
	double wall_s;               /* the run's wall-clock time, s */
	double v[SWM_COUNT];         /* its metrics (status 0) */
	char error[512];             /* why it failed */
};

struct sweep_runner {
	const uint32_t *pending;     /* the runs to do, ascending */
	size_t n_pending;
	int jobs;                    /* worker processes, >= 1 */
	/* Do one run (in whichever process: pure, its answer depends only
	 * on idx); fills every field of m. */
	void (*run)(void *ctx, uint32_t idx, struct sweep_msg *m);
	/* In the parent or on rank 0, for each answer: 0 goes on, > 0 stops
	 * handing out runs (a failed or interrupted one), < 0 is an error in
	 * err, which stops too. */
	int (*on_result)(void *ctx, const struct sweep_msg *m, struct ss_error *err);
	void *ctx;
};

/* Do every pending run, here (jobs 1) or in jobs workers, each taking the
 * next run when it answers.  SIGINT or SIGTERM (cli_interrupted) stops the
 * handing out; the parent passes the signal on to its workers, whose runs
 * stop at their next event and answer interrupted.  Returns 0 or the error
 * of on_result() or of a worker that died (not counted after a signal). */
int sweep_run_local(const struct sweep_runner *sr, struct ss_error *err);

/* The same over MPI ranks: rank r does pending runs k with k % size == r
 * and sends each answer to rank 0, which hands it to on_result(); after a
 * signal or a stop a rank answers its remaining runs without running them,
 * so rank 0 always receives one answer per run. */
int sweep_run_mpi(const struct sweep_runner *sr, int rank, int size, struct ss_error *err);

#endif
