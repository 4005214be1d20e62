/* servesim sweep — runs in this process, in worker processes (the pool of
 * cli/workers.h, plan's too) or over MPI ranks (sweep-run.h).  Results
 * do not depend on which process does a run: each is a pure function of its
 * index. */
#include "sweep-run.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plan-run.h"
#include "workers.h"

/* The answer of a run not started because the sweep is stopping. */
static void skipped(uint32_t idx, struct sweep_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->run = idx;
	m->status = cli_interrupt_status(cli_interrupted ? cli_interrupted : SIGINT);
}

static void pool_run(void *ctx, uint32_t idx, void *msg)
{
	const struct sweep_runner *sr = ctx;

	sr->run(sr->ctx, idx, msg);
}

static int pool_answer(void *ctx, const void *msg, struct ss_error *err)
{
	const struct sweep_runner *sr = ctx;

	return sr->on_result(sr->ctx, msg, err);
}

int sweep_run_local(const struct sweep_runner *sr, struct ss_error *err)
{
	struct cli_workers w = {
		.name = "sweep", .idx = sr->pending, .n_groups = sr->n_pending,
		.msg_size = sizeof(struct sweep_msg), .jobs = sr->jobs,
		.run = pool_run, .on_answer = pool_answer, .ctx = (void *)sr,
		.interrupted = &cli_interrupted,
	};

	return cli_workers_run(&w, err);
}

int sweep_run_mpi(const struct sweep_runner *sr, int rank, int size, struct ss_error *err)
{
	struct sweep_msg *m;
	size_t expect = 0, got = 0;
	bool stopping = false;
	int rc = 0;

	if (size <= 1)
		return sweep_run_local(sr, err);
	m = malloc(sizeof(*m));
	if (!m)
		return ss_error_set(err, -ENOMEM, NULL, 0, "sweep: out of memory");
	if (rank != 0) {
		/* a rank cannot hear of another's failure: it stops at a signal
		 * (mpirun passes SIGINT and SIGTERM on to every rank) */
		for (size_t k = (size_t)rank; k < sr->n_pending; k += (size_t)size) {
			if (cli_interrupted)
				skipped(sr->pending[k], m);
			else
				sr->run(sr->ctx, sr->pending[k], m);
			plan_mpi_send_to_root(m, sizeof(*m));
		}
		free(m);
		return 0;
	}
	for (size_t k = 0; k < sr->n_pending; k++)
		if (k % (size_t)size != 0)
			expect++;
	for (size_t k = 0; k < sr->n_pending; k += (size_t)size) {
		int st;

		if (stopping || cli_interrupted)
			break;
		sr->run(sr->ctx, sr->pending[k], m);
		st = sr->on_result(sr->ctx, m, err);
		if (st)
			stopping = true;
		if (st < 0 && !rc)
			rc = st;
		/* answers that arrived meanwhile */
		while (got < expect && plan_mpi_recv_any(m, sizeof(*m), false)) {
			got++;
			st = sr->on_result(sr->ctx, m, err);
			if (st)
				stopping = true;
			if (st < 0 && !rc)
				rc = st;
		}
	}
	while (got < expect) {
		int st;

		plan_mpi_recv_any(m, sizeof(*m), true);
		got++;
		/* after a stop the other ranks' answers still come (one per
		 * run) and are still stored when they finished */
		st = sr->on_result(sr->ctx, m, err);
		if (st < 0 && !rc)
			rc = st;
	}
	free(m);
	return rc;
}
