/* servesim — fit the power model (docs/energy.md) on measured power and
 * report hold-out errors per source.  Prints Markdown tables.
 *
 *   build/bench/power-fit [CATALOG_DIR [SHARED_DATA_DIR]]
 *
 * defaults: data and ../shared/data.  Exit 77 when the shared data is
 * absent (as the tests do), 1 on an error.
 */
#include "catalog.h"
#include "power-fit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

static const struct power_params start = { .mem_lo = 0.4, .mem_hi = 0.6, .mem_batch = 16,
					   .gap_frac = 0.2 };

static struct power_obs *obs;
static size_t n_obs;
static struct catalog cat;

static bool sel(size_t i, enum power_source src, const char *gpu, const char *model,
		const char *not_model)
{
	const struct power_obs *o = &obs[i];

	return o->src == src && (!gpu || !strcmp(o->gpu, gpu)) &&
	       (!model || !strcmp(o->model, model)) && (!not_model || strcmp(o->model, not_model));
}

static void pick(bool *use, enum power_source src, const char *gpu, const char *model,
		 const char *not_model)
{
	for (size_t i = 0; i < n_obs; i++)
		use[i] = sel(i, src, gpu, model, not_model);
}

static int fit_what(const bool *use, unsigned what, struct power_params *p)
{
	struct ss_error err = { 0 };

	if (power_fit(obs, n_obs, use, &cat, what, p, &err)) {
		fprintf(stderr, "power-fit: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int fit(const bool *use, struct power_params *p)
{
	*p = start;
	return fit_what(use, POWER_FIT_MEM | POWER_FIT_GAP, p);
}

static int row(const char *fit_on, const char *report_on, const struct power_params *p,
	       const bool *use)
{
	struct ss_error err = { 0 };
	double mape, bias;
	size_t k;

	if (power_error(obs, n_obs, use, &cat, p, &mape, &bias, &k, &err)) {
		fprintf(stderr, "power-fit: %s\n", err.msg);
		return -1;
	}
	printf("| %s | %s | %zu | %.1f%% | %+.1f%% |\n", fit_on, report_on, k, 100 * mape,
	       100 * bias);
	return 0;
}

static void params_row(const char *what, const char *gpu, const struct power_params *p)
{
	const struct gpu_spec *g = catalog_gpu(&cat, gpu);

	printf("| %s | %s | %.3f | %.3f | %.1f | %.3f (%.0f W) |\n", what, gpu, p->mem_lo, p->mem_hi,
	       p->mem_batch, p->gap_frac, g->idle_w + p->gap_frac * (g->tdp_w - g->idle_w));
}

/* use[i]: observations of src (any when src is POWER_SRC_COUNT) on gpu
 * (any when NULL), not of model skip (none when NULL). */
static void pick2(bool *use, bool anl, bool mle, const char *mle_gpu, const char *skip_model)
{
	for (size_t i = 0; i < n_obs; i++) {
		const struct power_obs *o = &obs[i];

		use[i] = (anl && o->src == POWER_SRC_ANL) ||
			 (mle && o->src == POWER_SRC_MLENERGY &&
			  (!mle_gpu || !strcmp(o->gpu, mle_gpu)) &&
			  (!skip_model || strcmp(o->model, skip_model)));
	}
}

int main(int argc, char **argv)
{
	static const char *const models[] = { "llama-3.1-8b", "mistral-7b", "llama-3.1-70b" };
	static const char *const gpus[] = { "h100-sxm", "a100-40gb-sxm" };
	const char *data = argc > 1 ? argv[1] : "data";
	const char *shared = argc > 2 ? argv[2] : "../shared/data";
	/* the model before this fit: a constant memory-bound share of 0.5,
	 * host time at idle power */
	const struct power_params before = { .mem_lo = 0.5, .mem_hi = 0.5, .mem_batch = 1,
					     .gap_frac = 0 };
	struct power_params ship, p, gap[2];
	struct ss_error err = { 0 };
	bool *use;
	int rc;

	gsl_set_error_handler_off();
	catalog_init(&cat);
	if (catalog_load_dir(&cat, data, &err)) {
		fprintf(stderr, "power-fit: %s\n", err.msg);
		return 1;
	}
	rc = power_obs_load(shared, &cat, &obs, &n_obs, &err);
	if (rc == -ENOENT) {
		fprintf(stderr, "power-fit: %s: %s (skipped)\n", err.file, err.msg);
		return 77;
	}
	if (rc) {
		fprintf(stderr, "power-fit: %s:%ld: %s\n", err.file, err.line, err.msg);
		return 1;
	}
	use = calloc(n_obs, sizeof(*use));
	if (!use)
		return 1;

	/* shipped: one set of fractions fitted on ML.ENERGY (both GPUs) and
	 * LLM-Inference-Bench together; Splitwise is never fitted */
	pick2(use, true, true, NULL, NULL);
	if (fit(use, &ship))
		return 1;
	printf("Fitted constants (fractions of tdp_w - idle_w; mem_power_batch in requests)\n\n");
	printf("| fit on | GPU | mem_power_lo | mem_power_hi | mem_power_batch | host gap |\n");
	printf("|---|---|---|---|---|---|\n");
	for (size_t g = 0; g < sizeof(gpus) / sizeof(gpus[0]); g++)
		params_row("ML.ENERGY + LLM-Inference-Bench", gpus[g], &ship);
	params_row("ML.ENERGY + LLM-Inference-Bench", "a100-80gb-sxm", &ship);
	for (size_t g = 0; g < 2; g++) {
		char a[128];
		gap[g] = ship;
		pick(use, POWER_SRC_MLENERGY, gpus[g], NULL, NULL);
		if (fit_what(use, POWER_FIT_GAP, &gap[g]))
			return 1;
		snprintf(a, sizeof(a), "then host gap on ML.ENERGY %s", gpus[g]);
		params_row(a, gpus[g], &gap[g]);
	}

	printf("\nMean absolute error of mean power per GPU (bias: mean signed error)\n\n");
	printf("| fit on | reported on | runs | error | bias |\n|---|---|---|---|---|\n");
	for (int b = 0; b < 2; b++) {
		const struct power_params *q = b ? &before : &ship;
		const char *what = b ? "(model before the fit)" : "ML.ENERGY + LLM-Inference-Bench";

		for (size_t g = 0; g < 2; g++) {
			char r[128];

			pick(use, POWER_SRC_MLENERGY, gpus[g], NULL, NULL);
			snprintf(r, sizeof(r), "ML.ENERGY %s%s", gpus[g], b ? "" : " (in sample)");
			rc |= row(what, r, q, use);
		}
		pick(use, POWER_SRC_ANL, NULL, NULL, NULL);
		rc |= row(what, b ? "LLM-Inference-Bench A100" : "LLM-Inference-Bench A100 (in sample)",
			  q, use);
		pick(use, POWER_SRC_SPLITWISE, NULL, NULL, NULL);
		rc |= row(what, b ? "Splitwise A100-80GB" : "Splitwise A100-80GB (held out)", q, use);
	}
	for (size_t g = 0; g < 2; g++) {
		char r[128];
		pick(use, POWER_SRC_MLENERGY, gpus[g], NULL, NULL);
		snprintf(r, sizeof(r), "ML.ENERGY %s", gpus[g]);
		rc |= row("per-GPU gap", r, &gap[g], use);
	}
	pick(use, POWER_SRC_ANL, NULL, NULL, NULL);
	rc |= row("per-GPU gap (A100)", "ANL", &gap[1], use);
	pick(use, POWER_SRC_SPLITWISE, NULL, NULL, NULL);
	rc |= row("per-GPU gap (A100)", "Splitwise", &gap[1], use);
	/* a whole GPU held out */
	for (size_t g = 0; g < 2; g++) {
		char a[128], r[128];

		pick2(use, true, true, gpus[1 - g], NULL);
		if (fit(use, &p))
			return 1;
		pick(use, POWER_SRC_MLENERGY, gpus[g], NULL, NULL);
		snprintf(a, sizeof(a), "ML.ENERGY %s + LLM-Inference-Bench", gpus[1 - g]);
		snprintf(r, sizeof(r), "ML.ENERGY %s (held out)", gpus[g]);
		rc |= row(a, r, &p, use);
	}
	/* a whole model held out */
	for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		char a[128], r[128];

		pick2(use, true, true, NULL, models[m]);
		if (fit(use, &p))
			return 1;
		pick(use, POWER_SRC_MLENERGY, NULL, models[m], NULL);
		snprintf(a, sizeof(a), "ML.ENERGY without %s + LLM-Inference-Bench", models[m]);
		snprintf(r, sizeof(r), "ML.ENERGY %s (held out)", models[m]);
		rc |= row(a, r, &p, use);
	}
	/* a whole source held out */
	pick2(use, false, true, NULL, NULL);
	if (fit(use, &p))
		return 1;
	pick(use, POWER_SRC_ANL, NULL, NULL, NULL);
	rc |= row("ML.ENERGY", "LLM-Inference-Bench A100 (held out)", &p, use);
	pick(use, POWER_SRC_SPLITWISE, NULL, NULL, NULL);
	rc |= row("ML.ENERGY", "Splitwise A100-80GB (held out)", &p, use);
	pick2(use, true, false, NULL, NULL);
	if (fit(use, &p))
		return 1;
	pick(use, POWER_SRC_MLENERGY, NULL, NULL, NULL);
	rc |= row("LLM-Inference-Bench", "ML.ENERGY (held out)", &p, use);

	printf("\nPer run (shipped constants)\n\n");
	printf("| source | run | batch | measured W/GPU | model W/GPU | error |\n|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < n_obs; i++) {
		double w;

		if (power_predict(&obs[i], &cat, &ship, &w, &err)) {
			fprintf(stderr, "power-fit: %s\n", err.msg);
			return 1;
		}
		printf("| %s | %s | %.0f | %.0f | %.0f | %+.1f%% |\n", power_source_name(obs[i].src),
		       obs[i].label, obs[i].batch, obs[i].measured_w, w,
		       100 * (w / obs[i].measured_w - 1));
	}
	free(use);
	free(obs);
	catalog_release(&cat);
	return rc ? 1 : 0;
}
