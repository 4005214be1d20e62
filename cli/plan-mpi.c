/* servesim plan — the MPI transport (plan-mpi.h), built into the loadable
 * module servesim-mpi.so, the only servesim object that links libmpi.
 * Results travel as MPI_BYTE messages of one struct plan_result (the ranks
 * run one build of servesim on machines of one architecture). */
#include "plan-mpi.h"

#include <errno.h>

#include <mpi.h>

#define TAG_RESULT 17

static int mpi_init(int *argc, char ***argv, int *rank, int *size, struct ss_error *err)
{
	if (MPI_Init(argc, argv) != MPI_SUCCESS)
		return ss_error_set(err, -EIO, NULL, 0, "MPI_Init failed");
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
	return 0;
}

static void mpi_finalize(void)
{
	MPI_Finalize();
}

static int mpi_max(int v)
{
	int out = v;

	MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return out;
}

static void mpi_bcast(void *buf, size_t n)
{
	MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
}

static void mpi_send_to_root(const void *buf, size_t n)
{
	MPI_Send(buf, (int)n, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
}

static bool mpi_recv_any(void *buf, size_t n, bool wait)
{
	MPI_Status st;
	int flag = 1;

	if (!wait) {
		MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st);
		if (!flag)
			return false;
		MPI_Recv(buf, (int)n, MPI_BYTE, st.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
		return true;
	}
	MPI_Recv(buf, (int)n, MPI_BYTE, MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD,
		 MPI_STATUS_IGNORE);
	return true;
}

const struct plan_mpi_ops plan_mpi_ops = {
	.version = PLAN_MPI_OPS_VERSION,
	.name = "mpi",
	.init = mpi_init,
	.finalize = mpi_finalize,
	.max = mpi_max,
	.bcast = mpi_bcast,
	.send_to_root = mpi_send_to_root,
	.recv_any = mpi_recv_any,
};
