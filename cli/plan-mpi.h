/* servesim plan — the MPI transport, in the loadable module servesim-mpi.so
 * (cli/plan-mpi.c, linked with libmpi; docs/plan.md).
 *
 * servesim itself never links MPI: a run or a plan started without mpirun
 * maps no MPI library.  When cli/plan-workers.c sees that mpirun started
 * the process (plan_mpi_launched), plan_mpi_init dlopens the module and
 * takes this table from it; the plan logic (dealing configurations, rank 0
 * storing results) stays in plan-workers.c and only moves bytes through
 * here.  The module and the binary come from one build.
 */
#ifndef SS_PLAN_MPI_H
#define SS_PLAN_MPI_H

#include <stdbool.h>
#include <stddef.h>

#include "ss-error.h"

#define PLAN_MPI_OPS_VERSION 1
#define PLAN_MPI_MODULE "servesim-mpi.so"
#define PLAN_MPI_SYMBOL "plan_mpi_ops"

struct plan_mpi_ops {
	int version;                /* PLAN_MPI_OPS_VERSION */
	const char *name;           /* "mpi" */
	/* MPI_Init; rank and size of MPI_COMM_WORLD. */
	int (*init)(int *argc, char ***argv, int *rank, int *size, struct ss_error *err);
	void (*finalize)(void);
	/* The largest v over the ranks, everywhere (MPI_Allreduce). */
	int (*max)(int v);
	/* n bytes from rank 0 to every rank. */
	void (*bcast)(void *buf, size_t n);
	/* Send n bytes to rank 0 (a result message). */
	void (*send_to_root)(const void *buf, size_t n);
	/* On rank 0: receive one result message of n bytes from any rank.
	 * With wait false, return false at once when none has arrived. */
	bool (*recv_any)(void *buf, size_t n, bool wait);
};

#endif
