/* servesim cost-model benchmark (measured, never pass/fail).
 *
 *   1. cost-model evaluations per second for roofline, table and fit on two
 *      typical steps of Llama-3.1-8B on one H100-SXM: a decode batch of 64
 *      with mixed KV lengths, and a mixed step (one 512-token prefill chunk
 *      after 1,024 cached tokens plus 63 decodes);
 *   2. the core benchmark's Azure-trace run (bench-core a) with each model;
 *   3. the mixed-length decode method against the mean length: decode
 *      attention of a batch whose halves have KV lengths L1 and L2, as the
 *      table prices it ((1/B) sum_i T(B, L_i)) and at the mean length.
 *
 *   bench-cost [STORE]
 * STORE defaults to $SERVESIM_DATA/calibration.db (or the source tree's
 * data/); the Azure trace comes from SERVESIM_SHARED_DATA as in bench-core.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <gsl/gsl_errno.h>

#include "catalog.h"
#include "config.h"
#include "costmodel.h"
#include "engine.h"
#include "metrics.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct cost_step make_step(struct cost_item *it, uint32_t n)
{
	struct cost_step s = { .items = it, .n_items = n };

	for (uint32_t i = 0; i < n; i++) {
		s.total_tokens += it[i].tokens;
		s.n_prefill += it[i].tokens > 1;
		s.n_emit++;
	}
	return s;
}

/* Evaluations per second of one step, over at least 0.3 s. */
static double rate(struct cost_model *cm, const struct cost_step *s, int64_t *sink)
{
	struct cost_result r;
	double t0 = now_s(), t;
	long n = 0;

	do {
		for (int i = 0; i < 10000; i++) {
			cost_model_step(cm, s, &r);
			*sink += r.duration_ns;
		}
		n += 10000;
		t = now_s() - t0;
	} while (t < 0.3);
	return (double)n / t;
}

static int azure(const struct catalog *cat, const char *spec, const char *const *stores,
		 const char *trace)
{
	struct ss_error err = { 0 };
	struct workload_spec ws = { .trace = trace, .rate_scale = 1.0 };
	struct workload wl;
	struct engine_config ec;
	struct engine *e = NULL;
	struct engine_results r;
	double t0, t1;

	workload_init(&wl);
	if (workload_build(&wl, &ws, &err))
		goto fail;
	engine_config_defaults(&ec);
	ec.model = catalog_model(cat, "llama-3.1-8b");
	ec.gpu = catalog_gpu(cat, "h100-sxm");
	ec.n_instances = 1;
	ec.router = "lot";
	ec.cost_model = spec;
	ec.stores = stores;
	ec.n_stores = 1;
	t0 = now_s();
	if (engine_new(&e, &ec, &wl, &err) || engine_run(e, &err))
		goto fail;
	t1 = now_s();
	engine_results(e, &r);
	printf("  %-9s %8.3f s wall (init + simulation), %llu requests, simulated %.0f s\n", spec,
	       t1 - t0, (unsigned long long)r.n_req, r.end_ns / 1e9);
	engine_free(e);
	workload_release(&wl);
	return 0;
fail:
	printf("  %-9s failed: %s\n", spec, err.msg);
	engine_free(e);
	workload_release(&wl);
	return 1;
}

/* Decode attention (ms) of n requests, half at L1 and half at L2. */
static double decode_ms(struct cost_model *cm, uint32_t n, int32_t l1, int32_t l2)
{
	struct cost_item it[512];
	struct cost_step s;
	struct cost_result r;

	for (uint32_t i = 0; i < n; i++)
		it[i] = (struct cost_item){ 1, (i % 2 ? l2 : l1) - 1 };
	s = make_step(it, n);
	cost_model_step(cm, &s, &r);
	return r.op_ns[COST_OP_ATTN_DECODE] * 1e-6;
}

int main(int argc, char **argv)
{
	static const char *const specs[] = { "roofline", "table", "fit" };
	const char *data = getenv("SERVESIM_DATA") ? getenv("SERVESIM_DATA") : SERVESIM_SRC_DATADIR;
	const char *shared = getenv("SERVESIM_SHARED_DATA");
	struct ss_error err = { 0 };
	struct catalog cat;
	char store[4096], trace[4096];
	const char *stores[1];
	struct cost_item dec[64], mixed[64];
	struct cost_step s_dec, s_mixed;
	unsigned seed = 12345;
	struct stat st;
	int64_t sink = 0;
	int rc = 0;

	gsl_set_error_handler_off();
	snprintf(store, sizeof(store), "%s/calibration.db", data);
	stores[0] = argc > 1 ? argv[1] : store;
	if (!shared)
		shared = SERVESIM_SRC_DATADIR "/../../shared/data";
	snprintf(trace, sizeof(trace), "%s/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv",
		 shared);
	catalog_init(&cat);
	if (catalog_load_dir(&cat, data, &err)) {
		fprintf(stderr, "bench-cost: %s\n", err.msg);
		return 1;
	}
	if (stat(stores[0], &st)) {
		printf("bench-cost: no calibration store at %s (give one as the argument)\n", stores[0]);
		catalog_release(&cat);
		return 0;
	}
	for (int i = 0; i < 64; i++) {
		seed = seed * 1103515245u + 12345u;
		dec[i] = (struct cost_item){ 1, (int32_t)(100 + (seed >> 8) % 3900) };
		mixed[i] = dec[i];
	}
	mixed[0] = (struct cost_item){ 512, 1024 };
	s_dec = make_step(dec, 64);
	s_mixed = make_step(mixed, 64);

	printf("cost-model evaluations per second, Llama-3.1-8B, 1 x H100-SXM, store %s\n",
	       stores[0]);
	printf("  %-9s %16s %16s\n", "model", "decode x64 mixed", "prefill+63 dec");
	for (size_t k = 0; k < 3; k++) {
		struct cost_config cfg = {
			.model = catalog_model(&cat, "llama-3.1-8b"),
			.gpu = catalog_gpu(&cat, "h100-sxm"), .tp = 1, .stores = stores, .n_stores = 1,
		};
		struct cost_model *cm;

		if (cost_model_new(&cm, specs[k], &cfg, &err)) {
			printf("  %-9s failed: %s\n", specs[k], err.msg);
			rc = 1;
			continue;
		}
		printf("  %-9s %14.2fM %14.2fM\n", specs[k], rate(cm, &s_dec, &sink) / 1e6,
		       rate(cm, &s_mixed, &sink) / 1e6);
		cost_model_free(cm);
	}

	printf("\nAzure LLM 2023 conversation trace (bench-core a), per cost model:\n");
	if (stat(trace, &st) == 0) {
		for (size_t k = 0; k < 3; k++)
			rc |= azure(&cat, specs[k], stores, trace);
	} else {
		printf("  skipped: %s not found\n", trace);
	}

	printf("\nmixed-length decode attention (table, all layers, ms): half the batch at L1, "
	       "half at L2\n  %5s %6s %6s %10s %10s %8s\n", "batch", "L1", "L2", "average",
	       "mean len", "diff %");
	{
		struct cost_config cfg = {
			.model = catalog_model(&cat, "llama-3.1-8b"),
			.gpu = catalog_gpu(&cat, "h100-sxm"), .tp = 1, .stores = stores, .n_stores = 1,
		};
		static const int32_t pairs[][2] = { { 16, 2048 }, { 128, 4096 }, { 64, 8192 },
						    { 1024, 3072 } };
		static const uint32_t batches[] = { 8, 32, 64, 128 };
		struct cost_model *cm;

		if (!cost_model_new(&cm, "table", &cfg, &err)) {
			for (size_t b = 0; b < 4; b++)
				for (size_t p = 0; p < 4; p++) {
					int32_t l1 = pairs[p][0], l2 = pairs[p][1];
					double avg = decode_ms(cm, batches[b], l1, l2);
					double mean = decode_ms(cm, batches[b], (l1 + l2) / 2, (l1 + l2) / 2);

					printf("  %5u %6d %6d %10.3f %10.3f %+8.1f\n", batches[b], l1, l2,
					       avg, mean, 100.0 * (avg - mean) / mean);
				}
			cost_model_free(cm);
		}
	}
	catalog_release(&cat);
	if (sink == 42)
		printf("\n");
	return rc;
}
