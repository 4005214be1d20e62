/* servesim plan — running configurations in parallel (see plan-run.h).
 *
 * Local workers: the pool of cli/workers.h, forked once everything is
 * loaded (catalogs, workload, configurations); a task is a configuration
 * index, an answer the whole struct plan_result.  Only the parent touches
 * the database.  Results are the same whichever worker computes them
 * (plan_evaluate() is a pure function), so the output does not depend on
 * -j.
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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlfcn.h>

#include "cli.h"
#include "config.h"
#include "plan-mpi.h"
#include "workers.h"

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

/* ---- local workers (cli/workers.h) -------------------------------- */

struct local {
	const struct plan_run *pr;
	bool failed;     /* on_result() failed: later results are not delivered */
};

static void local_run(void *ctx, uint32_t idx, void *msg)
{
	const struct local *l = ctx;

	evaluate(l->pr, idx, msg);
}

/* Deliver a result, unless delivering an earlier one failed. */
static int answer(void *ctx, const void *msg, struct ss_error *err)
{
	struct local *l = ctx;
	int rc;

	if (l->failed)
		return 1;
	rc = deliver(l->pr, msg, err);
	if (rc)
		l->failed = true;
	return rc;
}

/* The same; in local workers a failed configuration also stops the handing
 * out (MPI ranks cannot hear of it: rank 0 goes on with its share). */
static int local_answer(void *ctx, const void *msg, struct ss_error *err)
{
	int rc = answer(ctx, msg, err);

	return rc ? rc : ((const struct plan_result *)msg)->status == PLAN_FAILED;
}

int plan_run_local(const struct plan_run *pr, struct ss_error *err)
{
	int jobs = pr->jobs;
	struct local l = { .pr = pr };
	struct dispatch d;
	struct cli_workers w;
	int rc;

	if (jobs <= 1 || pr->n_pending <= 1)
		jobs = 1;
	else if ((size_t)jobs > pr->n_pending)
		jobs = (int)pr->n_pending;
	rc = dispatch_plan(pr, jobs, &d, err);
	if (rc)
		return rc;
	w = (struct cli_workers){ .name = "plan", .idx = d.idx, .group = d.start,
				 .n_groups = d.n_groups, .msg_size = sizeof(struct plan_result),
				 .jobs = jobs, .run = local_run, .on_answer = local_answer,
				 .ctx = &l };
	rc = cli_workers_run(&w, err);
	dispatch_free(&d);
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
	struct local l = { .pr = pr };
	struct cli_ranks r = { .rank = rank, .size = size, .send = plan_mpi_send_to_root,
			       .recv = plan_mpi_recv_any };
	struct dispatch d;
	struct cli_workers w;
	int rc;

	if (!mpi || size <= 1)
		return plan_run_local(pr, err);
	/* every rank computes the same groups from the same inputs */
	rc = dispatch_plan(pr, size, &d, err);
	if (rc)
		return rc;
	w = (struct cli_workers){ .name = "plan", .idx = d.idx, .group = d.start,
				  .n_groups = d.n_groups, .msg_size = sizeof(struct plan_result),
				  .run = local_run, .on_answer = answer, .ctx = &l };
	rc = cli_workers_run_ranks(&w, &r, err);
	dispatch_free(&d);
	return rc;
}
