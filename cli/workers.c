/* servesim — a pool of forked worker processes (workers.h). */
#include "workers.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

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

static bool interrupted(const struct cli_workers *w)
{
	return w->interrupted && *w->interrupted;
}

/* Group g's first index and its size. */
static const uint32_t *group_at(const struct cli_workers *w, size_t g, size_t *n)
{
	if (!w->group) {
		*n = 1;
		return &w->idx[g];
	}
	*n = w->group[g + 1] - w->group[g];
	return &w->idx[w->group[g]];
}

static int run_inline(const struct cli_workers *w, struct ss_error *err)
{
	size_t n_tasks = w->group ? w->group[w->n_groups] : w->n_groups;
	void *msg = malloc(w->msg_size);
	int st = 0;

	if (!msg)
		return ss_error_set(err, -ENOMEM, NULL, 0, "%s: out of memory", w->name);
	for (size_t k = 0; k < n_tasks && !interrupted(w); k++) {
		w->run(w->ctx, w->idx[k], msg);
		st = w->on_answer(w->ctx, msg, err);
		if (st)
			break;
	}
	free(msg);
	return st < 0 ? st : 0;
}

struct worker {
	pid_t pid;       /* 0 once reaped */
	int task_fd;     /* parent -> worker: indices; -1 once closed */
	int res_fd;      /* worker -> parent: answers; -1 once closed */
	size_t busy;     /* tasks handed to it and not answered yet */
};

static void worker_main(const struct cli_workers *w, int task_fd, int res_fd)
{
	void *msg = malloc(w->msg_size);
	uint32_t idx;

	if (!msg)
		_exit(3);
	while (read_full(task_fd, &idx, sizeof(idx)) == (ssize_t)sizeof(idx)) {
		w->run(w->ctx, idx, msg);
		if (write_full(res_fd, msg, w->msg_size) < 0)
			_exit(5);
	}
	free(msg);
	/* no atexit handlers, no stdio flush: the parent owns the outputs */
	_exit(0);
}

static int spawn(const struct cli_workers *w, struct worker *all, int k, struct ss_error *err)
{
	struct worker *me = &all[k];
	int tfd[2], rfd[2], e;

	if (pipe(tfd) < 0) {
		e = errno;
		return ss_error_set(err, -e, NULL, 0, "%s: pipe: %s", w->name, strerror(e));
	}
	if (pipe(rfd) < 0) {
		e = errno;
		close(tfd[0]);
		close(tfd[1]);
		return ss_error_set(err, -e, NULL, 0, "%s: pipe: %s", w->name, strerror(e));
	}
	fflush(NULL);
	me->pid = fork();
	if (me->pid < 0) {
		e = errno;
		close(tfd[0]);
		close(tfd[1]);
		close(rfd[0]);
		close(rfd[1]);
		me->pid = 0;
		return ss_error_set(err, -e, NULL, 0, "%s: fork: %s", w->name, strerror(e));
	}
	if (me->pid == 0) {
		/* a group of its own: a terminal's Ctrl-C reaches the parent
		 * alone, which passes it on once (a second SIGINT from the
		 * terminal would kill a worker: the first restores the default
		 * action) */
		if (w->interrupted)
			setpgid(0, 0);
		/* the pipes of the workers started before this one are not ours */
		for (int j = 0; j < k; j++) {
			if (all[j].task_fd >= 0)
				close(all[j].task_fd);
			if (all[j].res_fd >= 0)
				close(all[j].res_fd);
		}
		close(tfd[1]);
		close(rfd[0]);
		worker_main(w, tfd[0], rfd[1]);
	}
	/* the child's group is set here too (as shells do), so that it is in
	 * place before the parent can signal it, whichever runs first */
	if (w->interrupted)
		setpgid(me->pid, me->pid);
	close(tfd[0]);
	close(rfd[1]);
	me->task_fd = tfd[1];
	me->res_fd = rfd[0];
	me->busy = 0;
	return 0;
}

static void stop(struct worker *wk)
{
	if (wk->task_fd >= 0)
		close(wk->task_fd);
	wk->task_fd = -1;
}

/* Wait for a worker; how it ended goes to why, for a message.  True when
 * it exited with status 0. */
static bool reap(struct worker *wk, char *why, size_t len)
{
	int st = 0;

	if (wk->pid <= 0) {
		snprintf(why, len, "not started");
		return false;
	}
	while (waitpid(wk->pid, &st, 0) < 0 && errno == EINTR)
		;
	wk->pid = 0;
	if (WIFSIGNALED(st))
		snprintf(why, len, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(why, len, "exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Hand a worker group g; false when its pipe is closed. */
static bool hand(const struct cli_workers *w, struct worker *wk, size_t g)
{
	size_t n;
	const uint32_t *idx = group_at(w, g, &n);

	if (write_full(wk->task_fd, idx, n * sizeof(*idx)) != (ssize_t)(n * sizeof(*idx)))
		return false;
	wk->busy = n;
	return true;
}

int cli_workers_run(const struct cli_workers *w, struct ss_error *err)
{
	size_t n_tasks = w->group ? w->group[w->n_groups] : w->n_groups;
	int jobs = w->jobs, started = 0, rc = 0, forwarded = 0;
	struct worker *wk;
	struct pollfd *pfd;
	void *msg;
	void (*old_pipe)(int);
	size_t next = 0;   /* the next group to hand out */
	size_t busy = 0;   /* tasks handed out and not answered */
	bool stopping = false;
	char why[64];

	if (jobs <= 1 || n_tasks <= 1)
		return run_inline(w, err);
	if ((size_t)jobs > w->n_groups)
		jobs = (int)w->n_groups;
	/* one block for the workers and their poll entries: a worker, forked
	 * with a copy of it, still reaches all of it (valgrind's leak check at
	 * a worker's exit) */
	wk = calloc((size_t)jobs, sizeof(*wk) + sizeof(*pfd));
	pfd = wk ? (struct pollfd *)(wk + jobs) : NULL;
	msg = malloc(w->msg_size);
	if (!wk || !msg) {
		free(wk);
		free(msg);
		return ss_error_set(err, -ENOMEM, NULL, 0, "%s: out of memory", w->name);
	}
	/* a worker that died must not kill the parent when it writes its pipe */
	old_pipe = signal(SIGPIPE, SIG_IGN);
	for (int k = 0; k < jobs; k++)
		wk[k].task_fd = wk[k].res_fd = -1;
	for (; started < jobs && !rc; started++)
		rc = spawn(w, wk, started, err);
	if (rc) {
		started--;
		stopping = true;
	}
	/* give every worker its first group */
	for (int k = 0; k < started && !stopping && next < w->n_groups; k++) {
		if (!hand(w, &wk[k], next++)) {
			stop(&wk[k]);
			reap(&wk[k], why, sizeof(why));
			rc = ss_error_set(err, -EPIPE, NULL, 0, "%s: worker process %d %s", w->name, k,
					  why);
			stopping = true;
			break;
		}
		busy += wk[k].busy;
	}
	while (busy > 0) {
		int got;

		/* a signal: no more tasks; the workers, in groups of their own,
		 * get it from us, so that their tasks stop early */
		if (interrupted(w) && !forwarded) {
			forwarded = *w->interrupted;
			stopping = true;
			for (int k = 0; k < started; k++)
				if (wk[k].pid > 0 && wk[k].busy)
					kill(wk[k].pid, forwarded);
		}
		for (int k = 0; k < started; k++)
			pfd[k] = (struct pollfd){ .fd = wk[k].busy ? wk[k].res_fd : -1, .events = POLLIN };
		got = poll(pfd, (nfds_t)started, -1);
		if (got < 0) {
			int e = errno;

			if (e == EINTR)
				continue;
			if (!rc)
				rc = ss_error_set(err, -e, NULL, 0, "%s: poll: %s", w->name, strerror(e));
			break;
		}
		for (int k = 0; k < started; k++) {
			int st;

			if (!wk[k].busy || !(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (read_full(wk[k].res_fd, msg, w->msg_size) != (ssize_t)w->msg_size) {
				/* killed: by a signal's second delivery, or a crash */
				busy -= wk[k].busy;
				wk[k].busy = 0;
				stop(&wk[k]);
				reap(&wk[k], why, sizeof(why));
				if (!rc && !interrupted(w))
					rc = ss_error_set(err, -EPIPE, NULL, 0,
							  "%s: worker process %d %s before answering",
							  w->name, k, why);
				stopping = true;
				continue;
			}
			wk[k].busy--;
			busy--;
			st = w->on_answer(w->ctx, msg, err);
			if (st) {
				stopping = true;
				if (st < 0 && !rc)
					rc = st;
			}
			if (wk[k].busy)
				continue;   /* the rest of its group is on its way */
			if (!stopping && !interrupted(w) && next < w->n_groups) {
				if (hand(w, &wk[k], next++)) {
					busy += wk[k].busy;
					continue;
				}
				if (!rc)
					rc = ss_error_set(err, -EPIPE, NULL, 0,
							  "%s: worker process %d stopped taking work",
							  w->name, k);
				stopping = true;
			}
			stop(&wk[k]);
		}
	}
	for (int k = 0; k < started; k++) {
		stop(&wk[k]);
		if (wk[k].res_fd >= 0)
			close(wk[k].res_fd);
		if (wk[k].pid > 0 && !reap(&wk[k], why, sizeof(why)) && !rc && !interrupted(w))
			rc = ss_error_set(err, -EPIPE, NULL, 0, "%s: worker process %d %s", w->name, k,
					  why);
	}
	signal(SIGPIPE, old_pipe);
	free(wk);
	free(msg);
	return rc;
}

int cli_workers_run_ranks(const struct cli_workers *w, const struct cli_ranks *r,
			  struct ss_error *err)
{
	size_t n, expect = 0, got = 0;
	const uint32_t *idx;
	void *msg = malloc(w->msg_size);
	bool stopping = false;
	int rc = 0, st;

	if (!msg)
		return ss_error_set(err, -ENOMEM, NULL, 0, "%s: out of memory", w->name);
	if (r->rank != 0) {
		for (size_t g = (size_t)r->rank; g < w->n_groups; g += (size_t)r->size) {
			idx = group_at(w, g, &n);
			for (size_t k = 0; k < n; k++) {
				if (interrupted(w) && r->skip)
					r->skip(w->ctx, idx[k], msg);
				else
					w->run(w->ctx, idx[k], msg);
				r->send(msg, w->msg_size);
			}
		}
		free(msg);
		return 0;
	}
	for (size_t g = 0; g < w->n_groups; g++)
		if (g % (size_t)r->size != 0) {
			group_at(w, g, &n);
			expect += n;
		}
	for (size_t g = 0; g < w->n_groups && !stopping && !interrupted(w); g += (size_t)r->size) {
		idx = group_at(w, g, &n);
		for (size_t k = 0; k < n && !stopping && !interrupted(w); k++) {
			w->run(w->ctx, idx[k], msg);
			st = w->on_answer(w->ctx, msg, err);
			stopping = st != 0;
			if (st < 0 && !rc)
				rc = st;
			/* answers that arrived meanwhile */
			while (got < expect && r->recv(msg, w->msg_size, false)) {
				got++;
				st = w->on_answer(w->ctx, msg, err);
				stopping = stopping || st != 0;
				if (st < 0 && !rc)
					rc = st;
			}
		}
	}
	/* after a stop the other ranks' answers still come (one per task) and
	 * still go to on_answer */
	while (got < expect) {
		r->recv(msg, w->msg_size, true);
		got++;
		st = w->on_answer(w->ctx, msg, err);
		if (st < 0 && !rc)
			rc = st;
	}
	free(msg);
	return rc;
}
