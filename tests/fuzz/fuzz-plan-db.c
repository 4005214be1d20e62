/* servesim — fuzz target: a plan database given to `servesim plan --db`
 * (analysis/plan-db.c).  The input is the database file.  It is opened
 * under a fixed fingerprint, its results are loaded for a fixed search
 * space (the shipped catalogs; the space tests/fuzz/corpus/plan-db's seeds
 * were written for: llama-3.1-8b on h100-sxm and a100-80gb-sxm, tp 1 and 2,
 * at most 4 GPUs, vllm and sarathi, both modes), then one result is stored
 * and the rows counted, as a resumed plan does.  A loaded result must be
 * one a plan could have written: a known status other than failed, 1 to
 * PLAN_MAX_PROBES probes, its best probe among them. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "plan.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "fuzz-plan-db: loaded a result with !(%s)\n", #c); abort(); } } while (0)

/* What the seeds' plan and fingerprint columns hold. */
#define FINGERPRINT "f00dfeedf00dfeed"

static struct catalog cat;
static struct plan_config *cfg;
static size_t n_cfg;

static void setup(void)
{
	struct ss_error err = { 0 };
	struct plan_space sp = { 0 };
	struct plan_excluded ex;

	catalog_init(&cat);
	if (catalog_load_dir(&cat, FUZZ_DATADIR, &err)) {
		fprintf(stderr, "fuzz-plan-db: %s\n", err.msg);
		abort();
	}
	sp.model = catalog_model(&cat, "llama-3.1-8b");
	sp.gpus[0] = catalog_gpu(&cat, "h100-sxm");
	sp.gpus[1] = catalog_gpu(&cat, "a100-80gb-sxm");
	sp.n_gpus = 2;
	sp.tp[0] = 1;
	sp.tp[1] = 2;
	sp.n_tp = 2;
	sp.max_gpus = 4;
	sp.policies[0] = plan_policy_find("vllm");
	sp.policies[1] = plan_policy_find("sarathi");
	sp.n_policies = 2;
	sp.colocated = sp.disaggregated = true;
	if (!sp.model || !sp.gpus[0] || !sp.gpus[1] || !sp.policies[0] || !sp.policies[1] ||
	    plan_enumerate(&sp, NULL, &cfg, &n_cfg, &ex, &err) || n_cfg == 0) {
		fprintf(stderr, "fuzz-plan-db: cannot set up the search space: %s\n", err.msg);
		abort();
	}
}

static void unlink_side(const char *path, const char *suffix)
{
	char p[4200];

	snprintf(p, sizeof(p), "%s%s", path, suffix);
	unlink(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ss_error err = { 0 };
	struct plan_result *res;
	struct plan_db *db = NULL;
	const char *path;
	bool *done;
	size_t n_done = 0;
	int rc;

	if (!cfg)
		setup();
	path = fuzz_file("plan.db", data, size);
	/* a journal left by the previous input would be replayed into this one */
	unlink_side(path, "-wal");
	unlink_side(path, "-shm");
	unlink_side(path, "-journal");
	rc = plan_db_open(&db, path, FINGERPRINT, "fuzz", &err);
	fuzz_check_error(rc, &err);
	if (rc)
		return 0;
	res = calloc(n_cfg, sizeof(*res));
	done = calloc(n_cfg, sizeof(*done));
	if (!res || !done)
		abort();
	err = (struct ss_error){ 0 };
	rc = plan_db_load(db, cfg, n_cfg, res, done, &n_done, &err);
	fuzz_check_error(rc, &err);
	if (rc == 0) {
		size_t k = 0;

		for (size_t i = 0; i < n_cfg; i++) {
			if (!done[i])
				continue;
			k++;
			REQUIRE(res[i].index == cfg[i].index);
			REQUIRE(res[i].status >= PLAN_OK && res[i].status <= PLAN_NONE);
			REQUIRE(res[i].n_probes >= 1 && res[i].n_probes <= PLAN_MAX_PROBES);
			REQUIRE(res[i].best >= -1 && res[i].best < res[i].n_probes);
		}
		REQUIRE(k == n_done);
	}
	/* store one result into whatever was opened, then count */
	{
		struct plan_result r = { .index = cfg[0].index, .status = PLAN_OK, .n_probes = 1,
					 .best = 0, .max_scale = 1.0 };
		int64_t n = 0;

		r.probes[0] = (struct plan_probe){ .scale = 1.0, .rate_rps = 1.0, .attainment = 1.0,
						   .goodput_rps = 1.0, .throughput_rps = 1.0,
						   .span_s = 10.0 };
		err = (struct ss_error){ 0 };
		rc = plan_db_store(db, &cfg[0], &r, &err);
		fuzz_check_error(rc, &err);
		err = (struct ss_error){ 0 };
		rc = plan_db_count(db, &n, &err);
		fuzz_check_error(rc, &err);
	}
	plan_db_close(db);
	free(res);
	free(done);
	return 0;
}
