/* servesim plan — running configurations in parallel (see plan-run.h).
 *
 * Local workers: the parent forks `jobs` processes after everything is
 * loaded (catalogs, workload, configurations), so a worker needs no set-up
 * of its own.  Each worker has two pipes: the parent writes a configuration
 * index (uint32_t) on one, the worker writes the whole struct plan_result
 * back on the other; the parent poll()s the result pipes and hands a worker
 * its next index as soon as it answers, so long and short configurations
 * balance out.  Only the parent touches the database.  Closing a worker's
 * index pipe tells it to exit.  Results are the same whichever worker
 * computes them (plan_evaluate() is a pure function), so the output does
 * not depend on -j.
 *
 * MPI: the same contract over ranks, configurations dealt round robin;
 * results travel to rank 0 as MPI_BYTE messages of one struct plan_result
 * (the ranks run one build of servesim on machines of one architecture).
 * Rank 0 evaluates its share too and drains the messages that arrived
 * between its own configurations, so the database is written as results
 * come in and an interrupted MPI plan resumes like a local one.
 */
#include "plan-run.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if SERVESIM_MPI
#include <mpi.h>
#endif

static ssize_t read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -1 : (ssize_t)got;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static ssize_t write_full(int fd, const void *buf, size_t n)
{
	size_t put = 0;

	while (put < n) {
		ssize_t w = write(fd, (const char *)buf + put, n - put);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		put += (size_t)w;
	}
	return (ssize_t)put;
}

/* Evaluate one configuration; a failure becomes a PLAN_FAILED result. */
static void evaluate(const struct plan_run *pr, uint32_t idx, struct plan_result *r)
{
	struct ss_error e = { 0 };

	if (plan_evaluate(pr->pe, &pr->cfg[idx], r, &e)) {
		r->status = PLAN_FAILED;
		if (!r->error[0])
			ss_error_format(&e, r->error, sizeof(r->error));
	}
	r->index = idx;
}

static int deliver(const struct plan_run *pr, const struct plan_result *r, struct ss_error *err)
{
	if (r->index >= pr->n)
		return ss_error_set(err, -EPROTO, NULL, 0, "plan: a worker answered for configuration %u of %zu",
				    r->index, pr->n);
	pr->res[r->index] = *r;
	return pr->on_result(pr->ctx, r, err);
}

/* ---- local workers ------------------------------------------------------- */

struct worker {
	pid_t pid;
	int task_fd;     /* parent -> worker: indices; -1 once closed */
	int res_fd;      /* worker -> parent: results; -1 once closed */
	bool busy;
};

static void worker_main(const struct plan_run *pr, int task_fd, int res_fd)
{
	struct plan_result *r = malloc(sizeof(*r));
	uint32_t idx;

	if (!r)
		_exit(3);
	while (read_full(task_fd, &idx, sizeof(idx)) == (ssize_t)sizeof(idx)) {
		if (idx >= pr->n)
			_exit(4);
		evaluate(pr, idx, r);
		if (write_full(res_fd, r, sizeof(*r)) < 0)
			_exit(5);
	}
	free(r);
	/* no atexit handlers, no stdio flush: the parent owns the outputs */
	_exit(0);
}

static int spawn(const struct plan_run *pr, struct worker *w, struct worker *all, int n_started,
		 struct ss_error *err)
{
	int tfd[2], rfd[2], e;

	if (pipe(tfd) < 0) {
		e = errno;
		return ss_error_set(err, -e, NULL, 0, "plan: pipe: %s", strerror(e));
	}
	if (pipe(rfd) < 0) {
		e = errno;
		close(tfd[0]);
		close(tfd[1]);
		return ss_error_set(err, -e, NULL, 0, "plan: pipe: %s", strerror(e));
	}
	fflush(NULL);
	w->pid = fork();
	if (w->pid < 0) {
		e = errno;
		close(tfd[0]);
		close(tfd[1]);
		close(rfd[0]);
		close(rfd[1]);
		return ss_error_set(err, -e, NULL, 0, "plan: fork: %s", strerror(e));
	}
	if (w->pid == 0) {
		/* the pipes of the workers started before this one are not ours */
		for (int k = 0; k < n_started; k++) {
			if (all[k].task_fd >= 0)
				close(all[k].task_fd);
			if (all[k].res_fd >= 0)
				close(all[k].res_fd);
		}
		close(tfd[1]);
		close(rfd[0]);
		worker_main(pr, tfd[0], rfd[1]);
	}
	close(tfd[0]);
	close(rfd[1]);
	w->task_fd = tfd[1];
	w->res_fd = rfd[0];
	w->busy = false;
	return 0;
}

static void stop(struct worker *w)
{
	if (w->task_fd >= 0)
		close(w->task_fd);
	w->task_fd = -1;
}

/* Why a worker is gone, for the error message. */
static void reap(struct worker *w, char *why, size_t len)
{
	int st = 0;

	if (w->pid <= 0) {
		snprintf(why, len, "not started");
		return;
	}
	while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(st))
		snprintf(why, len, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(why, len, "exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	w->pid = 0;
}

static int run_inline(const struct plan_run *pr, struct ss_error *err)
{
	struct plan_result *r = malloc(sizeof(*r));
	int rc = 0;

	if (!r)
		return ss_error_set(err, -ENOMEM, NULL, 0, "plan: out of memory");
	for (size_t k = 0; k < pr->n_pending && !rc; k++) {
		evaluate(pr, pr->pending[k], r);
		rc = deliver(pr, r, err);
		if (r->status == PLAN_FAILED)
			break;
	}
	free(r);
	return rc;
}

int plan_run_local(const struct plan_run *pr, struct ss_error *err)
{
	int jobs = pr->jobs;
	struct worker *w = NULL;
	struct pollfd *pfd = NULL;
	struct plan_result *r = NULL;
	void (*old_pipe)(int);
	size_t next = 0;
	int started = 0, busy = 0, rc = 0;
	bool stopping = false;

	if (jobs <= 1 || pr->n_pending <= 1)
		return run_inline(pr, err);
	if ((size_t)jobs > pr->n_pending)
		jobs = (int)pr->n_pending;
	w = calloc((size_t)jobs, sizeof(*w));
	pfd = calloc((size_t)jobs, sizeof(*pfd));
	r = malloc(sizeof(*r));
	if (!w || !pfd || !r) {
		free(w);
		free(pfd);
		free(r);
		return ss_error_set(err, -ENOMEM, NULL, 0, "plan: out of memory");
	}
	/* a worker that died must not kill the parent when it writes its pipe */
	old_pipe = signal(SIGPIPE, SIG_IGN);
	for (int k = 0; k < jobs; k++)
		w[k].task_fd = w[k].res_fd = -1;
	for (; started < jobs; started++) {
		rc = spawn(pr, &w[started], w, started, err);
		if (rc)
			break;
	}
	if (rc)
		stopping = true;
	/* give every worker its first configuration */
	for (int k = 0; k < started && !stopping && next < pr->n_pending; k++) {
		uint32_t idx = pr->pending[next++];

		if (write_full(w[k].task_fd, &idx, sizeof(idx)) < 0) {
			char why[64];

			stop(&w[k]);
			reap(&w[k], why, sizeof(why));
			rc = ss_error_set(err, -EPIPE, NULL, 0, "plan: worker process %d %s", k, why);
			stopping = true;
			break;
		}
		w[k].busy = true;
		busy++;
	}
	while (busy > 0) {
		int np = 0, got;

		for (int k = 0; k < started; k++)
			pfd[k] = (struct pollfd){ .fd = w[k].busy ? w[k].res_fd : -1, .events = POLLIN };
		np = started;
		got = poll(pfd, (nfds_t)np, -1);
		if (got < 0) {
			int e = errno;

			if (e == EINTR)
				continue;
			if (!rc)
				rc = ss_error_set(err, -e, NULL, 0, "plan: poll: %s", strerror(e));
			break;
		}
		for (int k = 0; k < np; k++) {
			ssize_t n;

			if (!w[k].busy || !(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read_full(w[k].res_fd, r, sizeof(*r));
			w[k].busy = false;
			busy--;
			if (n != (ssize_t)sizeof(*r)) {
				char why[64];

				stop(&w[k]);
				reap(&w[k], why, sizeof(why));
				if (!rc)
					rc = ss_error_set(err, -EPIPE, NULL, 0,
							  "plan: worker process %d %s before answering",
							  k, why);
				stopping = true;
				continue;
			}
			if (!rc) {
				rc = deliver(pr, r, err);
				if (rc)
					stopping = true;
			}
			if (r->status == PLAN_FAILED)
				stopping = true;
			if (!stopping && next < pr->n_pending) {
				uint32_t idx = pr->pending[next++];

				if (write_full(w[k].task_fd, &idx, sizeof(idx)) == (ssize_t)sizeof(idx)) {
					w[k].busy = true;
					busy++;
					continue;
				}
				if (!rc)
					rc = ss_error_set(err, -EPIPE, NULL, 0,
							  "plan: worker process %d stopped taking work", k);
				stopping = true;
			}
			stop(&w[k]);
		}
	}
	for (int k = 0; k < started; k++) {
		char why[64];

		stop(&w[k]);
		if (w[k].res_fd >= 0)
			close(w[k].res_fd);
		if (w[k].pid > 0) {
			int st = 0;

			while (waitpid(w[k].pid, &st, 0) < 0 && errno == EINTR)
				;
			if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
				snprintf(why, sizeof(why), "%s %d",
					 WIFSIGNALED(st) ? "killed by signal" : "exited with status",
					 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
				rc = ss_error_set(err, -EPIPE, NULL, 0, "plan: worker process %d %s", k,
						  why);
			}
		}
	}
	signal(SIGPIPE, old_pipe);
	free(w);
	free(pfd);
	free(r);
	return rc;
}

/* ---- MPI ----------------------------------------------------------------- */

bool plan_mpi_launched(int *size)
{
	static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
					    "MPI_LOCALNRANKS" };

	*size = 0;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);

		if (v && *v) {
			*size = atoi(v);
			return true;
		}
	}
	if (getenv("PMIX_RANK") || getenv("PMI_RANK"))
		return true;
	return false;
}

#if SERVESIM_MPI

bool plan_mpi_available(void)
{
	return true;
}

int plan_mpi_init(int *argc, char ***argv, int *rank, int *size, struct ss_error *err)
{
	if (MPI_Init(argc, argv) != MPI_SUCCESS)
		return ss_error_set(err, -EIO, NULL, 0, "MPI_Init failed");
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
	return 0;
}

void plan_mpi_finalize(void)
{
	MPI_Finalize();
}

int plan_mpi_max(int v)
{
	int out = v;

	MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return out;
}

void plan_mpi_bcast(void *buf, size_t n)
{
	MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
}

#define TAG_RESULT 17

int plan_run_mpi(const struct plan_run *pr, int rank, int size, struct ss_error *err)
{
	struct plan_result *r = malloc(sizeof(*r));
	size_t expect = 0, got = 0;
	int rc = 0, flag;
	MPI_Status st;

	if (!r)
		return ss_error_set(err, -ENOMEM, NULL, 0, "plan: out of memory");
	if (rank != 0) {
		for (size_t k = (size_t)rank; k < pr->n_pending; k += (size_t)size) {
			evaluate(pr, pr->pending[k], r);
			MPI_Send(r, (int)sizeof(*r), MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
		}
		free(r);
		return 0;
	}
	for (size_t k = 0; k < pr->n_pending; k++)
		expect += k % (size_t)size != 0;
	for (size_t k = 0; k < pr->n_pending; k += (size_t)size) {
		evaluate(pr, pr->pending[k], r);
		if (!rc)
			rc = deliver(pr, r, err);
		/* results that arrived meanwhile */
		while (got < expect) {
			MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st);
			if (!flag)
				break;
			MPI_Recv(r, (int)sizeof(*r), MPI_BYTE, st.MPI_SOURCE, TAG_RESULT,
				 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			got++;
			if (!rc)
				rc = deliver(pr, r, err);
		}
	}
	while (got < expect) {
		MPI_Recv(r, (int)sizeof(*r), MPI_BYTE, MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
		got++;
		if (!rc)
			rc = deliver(pr, r, err);
	}
	free(r);
	return rc;
}

#else

bool plan_mpi_available(void)
{
	return false;
}

int plan_mpi_init(int *argc, char ***argv, int *rank, int *size, struct ss_error *err)
{
	(void)argc;
	(void)argv;
	*rank = 0;
	*size = 1;
	return ss_error_set(err, -ENOTSUP, NULL, 0, "servesim was built without MPI");
}

void plan_mpi_finalize(void)
{
}

int plan_mpi_max(int v)
{
	return v;
}

void plan_mpi_bcast(void *buf, size_t n)
{
	(void)buf;
	(void)n;
}

int plan_run_mpi(const struct plan_run *pr, int rank, int size, struct ss_error *err)
{
	(void)rank;
	(void)size;
	return plan_run_local(pr, err);
}

#endif
