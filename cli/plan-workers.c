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
 * Configurations that differ only in their running-set limit (--max-batch)
 * go to one worker as a group, smallest limit first, when the plan can
 * reuse probes across limits (plan_probe_cache): a worker then copies the
 * probes in which the running set never reached a smaller limit instead of
 * running them again.  The parent writes a group's indices at once and
 * gives the worker its next group when every one of them is answered;
 * groups are a few configurations each (one per limit), so they still
 * balance.  MPI ranks are dealt groups round robin the same way.
 *
 * MPI: the same contract over ranks, configurations dealt round robin;
 * results travel to rank 0 as MPI_BYTE messages of one struct plan_result
 * (the ranks run one build of servesim on machines of one architecture).
 * The MPI calls live in the module servesim-mpi.so (plan-mpi.h), loaded
 * only when mpirun started the process, so servesim never links libmpi.
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

#include <dlfcn.h>

#include "cli.h"
#include "config.h"
#include "plan-mpi.h"

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

/* ---- the order configurations are handed out in ------------------------- */

/* pending[] in groups: a group is a run of pending configurations that
 * differ only in their running-set limit, in ascending limit order (so a
 * worker meets the smaller limits first); each configuration is a group of
 * its own when probes cannot be reused, or when there would be fewer
 * groups than workers (grouping would leave one idle). */
struct dispatch {
	uint32_t *idx;       /* n_pending configuration indices */
	size_t *start;       /* n_groups + 1: group g is idx[start[g] .. start[g + 1]) */
	size_t n_groups;
};

static void dispatch_free(struct dispatch *d)
{
	free(d->idx);
	free(d->start);
	d->idx = NULL;
	d->start = NULL;
}

static int dispatch_plan(const struct plan_run *pr, int workers, struct dispatch *d,
			 struct ss_error *err)
{
	size_t n = pr->n_pending;
	bool group = pr->pe->probes && plan_probes_reusable(pr->pe->base);

	d->idx = malloc((n ? n : 1) * sizeof(*d->idx));
	d->start = malloc((n + 1) * sizeof(*d->start));
	d->n_groups = 0;
	if (!d->idx || !d->start) {
		dispatch_free(d);
		return ss_error_set(err, -ENOMEM, NULL, 0, "plan: out of memory");
	}
	memcpy(d->idx, pr->pending, n * sizeof(*d->idx));
	for (size_t k = 0; k < n; k++)
		if (k == 0 || !group ||
		    !plan_config_same_but_limit(&pr->cfg[d->idx[k - 1]], &pr->cfg[d->idx[k]]))
			d->start[d->n_groups++] = k;
	d->start[d->n_groups] = n;
	if (group && d->n_groups < (size_t)workers && d->n_groups < n) {
		for (size_t k = 0; k <= n; k++)
			d->start[k] = k;
		d->n_groups = n;
		return 0;
	}
	/* each group by ascending limit (insertion sort: a few entries) */
	for (size_t g = 0; g < d->n_groups; g++)
		for (size_t k = d->start[g] + 1; k < d->start[g + 1]; k++) {
			uint32_t x = d->idx[k];
			size_t j = k;

			while (j > d->start[g] && pr->cfg[d->idx[j - 1]].max_batch > pr->cfg[x].max_batch) {
				d->idx[j] = d->idx[j - 1];
				j--;
			}
			d->idx[j] = x;
		}
	return 0;
}

/* ---- local workers ------------------------------------------------------- */

struct worker {
	pid_t pid;
	int task_fd;     /* parent -> worker: indices; -1 once closed */
	int res_fd;      /* worker -> parent: results; -1 once closed */
	size_t busy;     /* configurations handed to it and not answered yet */
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
	w->busy = 0;
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
	struct dispatch d;
	int rc = 0;

	if (!r)
		return ss_error_set(err, -ENOMEM, NULL, 0, "plan: out of memory");
	rc = dispatch_plan(pr, 1, &d, err);
	for (size_t k = 0; k < pr->n_pending && !rc; k++) {
		evaluate(pr, d.idx[k], r);
		rc = deliver(pr, r, err);
		if (r->status == PLAN_FAILED)
			break;
	}
	if (d.idx)
		dispatch_free(&d);
	free(r);
	return rc;
}

/* Hand worker w group g; false when its pipe is closed. */
static bool hand_group(struct worker *w, const struct dispatch *d, size_t g)
{
	size_t n = d->start[g + 1] - d->start[g];

	if (write_full(w->task_fd, &d->idx[d->start[g]], n * sizeof(*d->idx)) !=
	    (ssize_t)(n * sizeof(*d->idx)))
		return false;
	w->busy = n;
	return true;
}

int plan_run_local(const struct plan_run *pr, struct ss_error *err)
{
	int jobs = pr->jobs;
	struct worker *w = NULL;
	struct pollfd *pfd = NULL;
	struct plan_result *r = NULL;
	struct dispatch d = { 0 };
	void (*old_pipe)(int);
	size_t next = 0;   /* the next group to hand out */
	size_t busy = 0;   /* configurations handed out and not answered */
	int started = 0, rc = 0;
	bool stopping = false;

	if (jobs <= 1 || pr->n_pending <= 1)
		return run_inline(pr, err);
	if ((size_t)jobs > pr->n_pending)
		jobs = (int)pr->n_pending;
	rc = dispatch_plan(pr, jobs, &d, err);
	if (rc)
		return rc;
	if ((size_t)jobs > d.n_groups)
		jobs = (int)d.n_groups;
	w = calloc((size_t)jobs, sizeof(*w));
	pfd = calloc((size_t)jobs, sizeof(*pfd));
	r = malloc(sizeof(*r));
	if (!w || !pfd || !r) {
		free(w);
		free(pfd);
		free(r);
		dispatch_free(&d);
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
	/* give every worker its first group */
	for (int k = 0; k < started && !stopping && next < d.n_groups; k++) {
		if (!hand_group(&w[k], &d, next++)) {
			char why[64];

			stop(&w[k]);
			reap(&w[k], why, sizeof(why));
			rc = ss_error_set(err, -EPIPE, NULL, 0, "plan: worker process %d %s", k, why);
			stopping = true;
			break;
		}
		busy += w[k].busy;
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
			if (n != (ssize_t)sizeof(*r)) {
				char why[64];

				busy -= w[k].busy;
				w[k].busy = 0;
				stop(&w[k]);
				reap(&w[k], why, sizeof(why));
				if (!rc)
					rc = ss_error_set(err, -EPIPE, NULL, 0,
							  "plan: worker process %d %s before answering",
							  k, why);
				stopping = true;
				continue;
			}
			w[k].busy--;
			busy--;
			if (!rc) {
				rc = deliver(pr, r, err);
				if (rc)
					stopping = true;
			}
			if (r->status == PLAN_FAILED)
				stopping = true;
			if (w[k].busy)
				continue;   /* the rest of its group is on its way */
			if (!stopping && next < d.n_groups) {
				if (hand_group(&w[k], &d, next++)) {
					busy += w[k].busy;
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
	dispatch_free(&d);
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

/* The loaded transport: one MPI world per process, so one table for the
 * process (set by plan_mpi_init, never unloaded: MPI must not be unmapped
 * after MPI_Init). */
static const struct plan_mpi_ops *mpi;

/* Where the module is: next to the binary (the build tree), else the
 * installed module directory.  Fills path; false when neither has it. */
static bool mpi_module_path(char *path, size_t len)
{
	const char *dirs[2] = { cli_module_dir(), SERVESIM_MODULEDIR };

	for (size_t i = 0; i < 2; i++) {
		int w;

		if (!dirs[i])
			continue;
		w = snprintf(path, len, "%s/%s", dirs[i], PLAN_MPI_MODULE);
		if (w > 0 && (size_t)w < len && access(path, F_OK) == 0)
			return true;
	}
	return false;
}

bool plan_mpi_available(void)
{
	char path[4096];

	return mpi_module_path(path, sizeof(path));
}

int plan_mpi_init(int *argc, char ***argv, int *rank, int *size, struct ss_error *err)
{
	char path[4096];
	const char *why;
	void *h;

	*rank = 0;
	*size = 1;
	if (!mpi_module_path(path, sizeof(path)))
		return ss_error_set(err, -ENOTSUP, NULL, 0,
				    "servesim was built without MPI (no %s next to the binary or in %s)",
				    PLAN_MPI_MODULE, SERVESIM_MODULEDIR);
	/* RTLD_GLOBAL: Open MPI dlopens its own components, which resolve
	 * libmpi's symbols through the global scope. */
	h = dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
	if (!h) {
		why = dlerror();
		return ss_error_set(err, -ENODEV, NULL, 0, "cannot load %s: %s", path,
				    why ? why : "unknown dlopen error");
	}
	dlerror();
	mpi = dlsym(h, PLAN_MPI_SYMBOL);
	if (!mpi || mpi->version < PLAN_MPI_OPS_VERSION) {
		why = mpi ? "an older table" : dlerror();
		mpi = NULL;
		dlclose(h);
		return ss_error_set(err, -ENOTSUP, NULL, 0, "%s: no usable %s (%s)", path,
				    PLAN_MPI_SYMBOL, why ? why : "NULL symbol");
	}
	return mpi->init(argc, argv, rank, size, err);
}

void plan_mpi_finalize(void)
{
	if (mpi)
		mpi->finalize();
}

int plan_mpi_max(int v)
{
	return mpi ? mpi->max(v) : v;
}

void plan_mpi_bcast(void *buf, size_t n)
{
	if (mpi)
		mpi->bcast(buf, n);
}

void plan_mpi_send_to_root(const void *buf, size_t n)
{
	if (mpi)
		mpi->send_to_root(buf, n);
}

bool plan_mpi_recv_any(void *buf, size_t n, bool wait)
{
	return mpi ? mpi->recv_any(buf, n, wait) : false;
}

int plan_run_mpi(const struct plan_run *pr, int rank, int size, struct ss_error *err)
{
	struct plan_result *r;
	struct dispatch d = { 0 };
	size_t expect = 0, got = 0;
	int rc = 0;

	if (!mpi || size <= 1)
		return plan_run_local(pr, err);
	r = malloc(sizeof(*r));
	if (!r)
		return ss_error_set(err, -ENOMEM, NULL, 0, "plan: out of memory");
	/* every rank computes the same groups from the same inputs */
	rc = dispatch_plan(pr, size, &d, err);
	if (rc) {
		free(r);
		return rc;
	}
	if (rank != 0) {
		for (size_t g = (size_t)rank; g < d.n_groups; g += (size_t)size)
			for (size_t k = d.start[g]; k < d.start[g + 1]; k++) {
				evaluate(pr, d.idx[k], r);
				mpi->send_to_root(r, sizeof(*r));
			}
		dispatch_free(&d);
		free(r);
		return 0;
	}
	for (size_t g = 0; g < d.n_groups; g++)
		if (g % (size_t)size != 0)
			expect += d.start[g + 1] - d.start[g];
	for (size_t g = 0; g < d.n_groups; g += (size_t)size)
		for (size_t k = d.start[g]; k < d.start[g + 1]; k++) {
			evaluate(pr, d.idx[k], r);
			if (!rc)
				rc = deliver(pr, r, err);
			/* results that arrived meanwhile */
			while (got < expect && mpi->recv_any(r, sizeof(*r), false)) {
				got++;
				if (!rc)
					rc = deliver(pr, r, err);
			}
		}
	while (got < expect) {
		mpi->recv_any(r, sizeof(*r), true);
		got++;
		if (!rc)
			rc = deliver(pr, r, err);
	}
	dispatch_free(&d);
	free(r);
	return rc;
}
