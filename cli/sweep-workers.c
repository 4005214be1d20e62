/* servesim sweep — runs in this process, in worker processes or over MPI
 * ranks (sweep-run.h).  Results do not depend on which process does a run:
 * each is a pure function of its index. */
#include "sweep-run.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "plan-run.h"

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

/* The answer of a run not started because the sweep is stopping. */
static void skipped(uint32_t idx, struct sweep_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->run = idx;
	m->status = cli_interrupt_status(cli_interrupted ? cli_interrupted : SIGINT);
}

static int run_inline(const struct sweep_runner *sr, struct ss_error *err)
{
	struct sweep_msg *m = malloc(sizeof(*m));
	int rc = 0;

	if (!m)
		return ss_error_set(err, -ENOMEM, NULL, 0, "sweep: out of memory");
	for (size_t k = 0; k < sr->n_pending && !cli_interrupted; k++) {
		sr->run(sr->ctx, sr->pending[k], m);
		rc = sr->on_result(sr->ctx, m, err);
		if (rc)
			break;
	}
	free(m);
	return rc < 0 ? rc : 0;
}

struct worker {
	pid_t pid;
	int task_fd;     /* parent -> worker: run indices; -1 once closed */
	int res_fd;      /* worker -> parent: answers; -1 once closed */
	bool busy;
};

static void worker_main(const struct sweep_runner *sr, int task_fd, int res_fd)
{
	struct sweep_msg *m = malloc(sizeof(*m));
	uint32_t idx;

	if (!m)
		_exit(3);
	while (read_full(task_fd, &idx, sizeof(idx)) == (ssize_t)sizeof(idx)) {
		sr->run(sr->ctx, idx, m);
		if (write_full(res_fd, m, sizeof(*m)) < 0)
			_exit(5);
	}
	free(m);
	/* no atexit handlers, no stdio flush: the parent owns the outputs */
	_exit(0);
}

static int spawn(const struct sweep_runner *sr, struct worker *w, struct worker *all, int started,
		 struct ss_error *err)
{
	int tfd[2], rfd[2], e;

	if (pipe(tfd) < 0) {
		e = errno;
		return ss_error_set(err, -e, NULL, 0, "sweep: pipe: %s", strerror(e));
	}
	if (pipe(rfd) < 0) {
		e = errno;
		close(tfd[0]);
		close(tfd[1]);
		return ss_error_set(err, -e, NULL, 0, "sweep: pipe: %s", strerror(e));
	}
	fflush(NULL);
	w->pid = fork();
	if (w->pid < 0) {
		e = errno;
		close(tfd[0]);
		close(tfd[1]);
		close(rfd[0]);
		close(rfd[1]);
		return ss_error_set(err, -e, NULL, 0, "sweep: fork: %s", strerror(e));
	}
	if (w->pid == 0) {
		/* a group of its own: a terminal's Ctrl-C reaches the parent
		 * alone, which passes it on once (a second SIGINT from the
		 * terminal would kill a worker: the first restores the default
		 * action) */
		setpgid(0, 0);
		/* the pipes of the workers started before this one are not ours */
		for (int k = 0; k < started; k++) {
			if (all[k].task_fd >= 0)
				close(all[k].task_fd);
			if (all[k].res_fd >= 0)
				close(all[k].res_fd);
		}
		close(tfd[1]);
		close(rfd[0]);
		worker_main(sr, tfd[0], rfd[1]);
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

static bool hand(struct worker *w, uint32_t idx)
{
	if (write_full(w->task_fd, &idx, sizeof(idx)) != (ssize_t)sizeof(idx))
		return false;
	w->busy = true;
	return true;
}

int sweep_run_local(const struct sweep_runner *sr, struct ss_error *err)
{
	int jobs = sr->jobs, started = 0, rc = 0, forwarded = 0;
	struct worker *w;
	struct pollfd *pfd;
	struct sweep_msg *m;
	void (*old_pipe)(int);
	size_t next = 0, busy = 0;
	bool stopping = false;

	if (jobs <= 1 || sr->n_pending <= 1)
		return run_inline(sr, err);
	if ((size_t)jobs > sr->n_pending)
		jobs = (int)sr->n_pending;
	w = calloc((size_t)jobs, sizeof(*w));
	pfd = calloc((size_t)jobs, sizeof(*pfd));
	m = malloc(sizeof(*m));
	if (!w || !pfd || !m) {
		free(w);
		free(pfd);
		free(m);
		return ss_error_set(err, -ENOMEM, NULL, 0, "sweep: out of memory");
	}
	/* a worker that died must not kill the parent when it writes its pipe */
	old_pipe = signal(SIGPIPE, SIG_IGN);
	for (int k = 0; k < jobs; k++)
		w[k].task_fd = w[k].res_fd = -1;
	for (; started < jobs && !rc; started++)
		rc = spawn(sr, &w[started], w, started, err);
	if (rc) {
		started--;
		stopping = true;
	}
	for (int k = 0; k < started && !stopping && next < sr->n_pending; k++) {
		if (!hand(&w[k], sr->pending[next++])) {
			rc = ss_error_set(err, -EPIPE, NULL, 0, "sweep: worker process %d stopped", k);
			stopping = true;
			break;
		}
		busy++;
	}
	while (busy > 0) {
		int got;

		/* a signal: no more runs; the workers, in groups of their own,
		 * get it from us, so that their runs stop at their next event */
		if (cli_interrupted && !forwarded) {
			forwarded = cli_interrupted;
			stopping = true;
			for (int k = 0; k < started; k++)
				if (w[k].pid > 0 && w[k].busy)
					kill(w[k].pid, forwarded);
		}
		for (int k = 0; k < started; k++)
			pfd[k] = (struct pollfd){ .fd = w[k].busy ? w[k].res_fd : -1, .events = POLLIN };
		got = poll(pfd, (nfds_t)started, -1);
		if (got < 0) {
			int e = errno;

			if (e == EINTR)
				continue;
			if (!rc)
				rc = ss_error_set(err, -e, NULL, 0, "sweep: poll: %s", strerror(e));
			break;
		}
		for (int k = 0; k < started; k++) {
			int st;

			if (!w[k].busy || !(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			w[k].busy = false;
			busy--;
			if (read_full(w[k].res_fd, m, sizeof(*m)) != (ssize_t)sizeof(*m)) {
				/* killed: by the signal's second delivery, or a crash */
				stop(&w[k]);
				if (!rc && !cli_interrupted)
					rc = ss_error_set(err, -EPIPE, NULL, 0,
							  "sweep: worker process %d ended before answering", k);
				stopping = true;
				continue;
			}
			st = sr->on_result(sr->ctx, m, err);
			if (st) {
				stopping = true;
				if (st < 0 && !rc)
					rc = st;
			}
			if (!stopping && !cli_interrupted && next < sr->n_pending) {
				if (hand(&w[k], sr->pending[next++])) {
					busy++;
					continue;
				}
				if (!rc)
					rc = ss_error_set(err, -EPIPE, NULL, 0,
							  "sweep: worker process %d stopped taking work", k);
				stopping = true;
			}
			stop(&w[k]);
		}
	}
	for (int k = 0; k < started; k++) {
		int st = 0;

		stop(&w[k]);
		if (w[k].res_fd >= 0)
			close(w[k].res_fd);
		if (w[k].pid <= 0)
			continue;
		while (waitpid(w[k].pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!rc && !cli_interrupted && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
			rc = ss_error_set(err, -EPIPE, NULL, 0, "sweep: worker process %d %s %d", k,
					  WIFSIGNALED(st) ? "killed by signal" : "exited with status",
					  WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
	signal(SIGPIPE, old_pipe);
	free(w);
	free(pfd);
	free(m);
	return rc;
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
