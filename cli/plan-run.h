/* servesim plan — running configurations: in this process, in -j worker
 * processes, or over MPI ranks (cli/plan-workers.c; docs/plan.md). */
#ifndef SS_PLAN_RUN_H
#define SS_PLAN_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "plan.h"

/* What the runners share.  res[] is filled for every index in pending[]
 * that completes; each result goes to on_result() as it arrives (in the
 * parent, or on MPI rank 0), which stores it. */
struct plan_run {
	const struct plan_eval *pe;
	const struct plan_config *cfg;
	size_t n;                    /* configurations */
	const uint32_t *pending;     /* indices to evaluate, ascending */
	size_t n_pending;
	struct plan_result *res;     /* n entries */
	int jobs;                    /* worker processes, >= 1 */
	/* Called for each result; nonzero stops dispatching (the error is in err). */
	int (*on_result)(void *ctx, const struct plan_result *r, struct ss_error *err);
	void *ctx;
};

/* Evaluate every pending configuration: in-process when jobs == 1, else in
 * jobs forked workers, each taking the next configuration as it finishes
 * one -- or the next group of configurations that differ only in their
 * running-set limit, smallest limit first, when probes are reused across
 * limits (plan_eval.probes).  A configuration that fails does not stop the
 * others already running or handed out in a group; no new ones are started
 * after it.  Returns 0, or the error of a worker that died or of
 * on_result(); failed configurations come back as PLAN_FAILED results, not
 * as an error. */
int plan_run_local(const struct plan_run *pr, struct ss_error *err);

/* ---- MPI (the module servesim-mpi.so, built with -Dmpi; plan-mpi.h) ------- */

/* Is this process one of several started by an MPI launcher?  Reads the
 * launcher's environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK); set
 * *size to the world size (0 when unknown). */
bool plan_mpi_launched(int *size);
/* The MPI module is there (next to the binary or installed). */
bool plan_mpi_available(void);

/* Load the MPI module (dlopen; an error with dlerror()'s message when it
 * fails), then MPI_Init; rank and size of MPI_COMM_WORLD.  MPI_Finalize. */
int plan_mpi_init(int *argc, char ***argv, int *rank, int *size, struct ss_error *err);
void plan_mpi_finalize(void);
/* Combine a status over ranks: the largest, everywhere. */
int plan_mpi_max(int v);
/* Broadcast n bytes from rank 0. */
void plan_mpi_bcast(void *buf, size_t n);
/* Send n bytes to rank 0; on rank 0, receive one such message from any
 * rank (wait false: false at once when none has arrived).  The loaded
 * transport's, for `servesim sweep` (cli/sweep-workers.c). */
void plan_mpi_send_to_root(const void *buf, size_t n);
bool plan_mpi_recv_any(void *buf, size_t n, bool wait);

/* Evaluate the pending configurations over the ranks: rank r takes the
 * groups g of configurations that differ only in their limit (one
 * configuration each when probes are not reused) with g % size == r; every
 * result is sent to rank 0, which
 * calls on_result() for it (its own and the others').  Returns on every
 * rank; res[] is complete on rank 0 only. */
int plan_run_mpi(const struct plan_run *pr, int rank, int size, struct ss_error *err);

#endif
