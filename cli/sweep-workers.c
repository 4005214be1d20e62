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

static void pool_skip(void *ctx, uint32_t idx, void *msg)
{
	(void)ctx;
	skipped(idx, msg);
}

static struct cli_workers pool_of(const struct sweep_runner *sr)
{
	return (struct cli_workers){
		.name = "sweep", .idx = sr->pending, .n_groups = sr->n_pending,
		.msg_size = sizeof(struct sweep_msg), .jobs = sr->jobs,
		.run = pool_run, .on_answer = pool_answer, .ctx = (void *)sr,
		.interrupted = &cli_interrupted,
	};
}

int sweep_run_local(const struct sweep_runner *sr, struct ss_error *err)
{
	struct cli_workers w = pool_of(sr);

	return cli_workers_run(&w, err);
}

int sweep_run_mpi(const struct sweep_runner *sr, int rank, int size, struct ss_error *err)
{
	struct cli_workers w = pool_of(sr);
	struct cli_ranks r = { .rank = rank, .size = size, .send = plan_mpi_send_to_root,
			       .recv = plan_mpi_recv_any, .skip = pool_skip };

	if (size <= 1)
		return sweep_run_local(sr, err);
	return cli_workers_run_ranks(&w, &r, err);
}
