/* Checks against published results (issue 6, revised in issue 11), with
 * `servesim plan`'s search (analysis/plan.h) on real data from
 * ../shared/data (exit 77 without it):
 *
 *   DistServe (OSDI'24), chatbot: OPT-13B on 4 x A100-80GB, DistServe's own
 *   ShareGPT requests, TTFT SLO 0.2 s and TPOT SLO 0.1 s at 90%
 *   attainment.  Colocated (vLLM V0's prefill-first scheduler, tp 1, 2, 4)
 *   against disaggregated (prefill and decode pools of any tp, as
 *   DistServe's placement search), both priced with ONE latency model,
 *   DistServe's own engine's fits, so the ratio measures disaggregation
 *   and not the difference between two engines' fits.  See
 *   distserve_disaggregation_ratio for the published ratio and its band.
 *
 *   Sarathi-Serve (OSDI'24): Mistral-7B on one A100-80GB, arXiv-summary
 *   lengths, TTFT 2 s and every token gap within 1 s at 90% attainment
 *   (servesim's measured A100 tables): stall-free chunked prefill
 *   (sarathi) serves a higher rate than vLLM V0.  The paper reports up to
 *   2.6x.
 *
 * Both print the figures servesim finds (docs/plan.md, docs/validation.md
 * record them). */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "plan.h"

static struct catalog cat;
static char shared[1024], tmpdir[256];

/* Copy a lengths file keeping the rows whose prompt + output <= max_total,
 * so that every request fits the model's context. */
static void filter_lengths(const char *src, const char *dst, long max_total)
{
	FILE *in = fopen(src, "r"), *out = fopen(dst, "w");
	char line[512];
	bool header = true;

	ck_assert_msg(in && out, "cannot open %s or %s", src, dst);
	while (fgets(line, sizeof(line), in)) {
		long p, o;

		if (header || (sscanf(line, "%ld,%ld", &p, &o) == 2 && p + o <= max_total))
			fputs(line, out);
		header = false;
	}
	fclose(in);
	ck_assert_int_eq(fclose(out), 0);
}

/* The best goodput per GPU over the configurations of sp. */
static double best_per_gpu(const struct plan_space *sp, const char *cost_model,
			   const char *lengths, const struct slo_config *slo, char *which,
			   size_t which_len)
{
	struct workload_spec ws = { .arrival = "poisson:rate=1", .lengths = lengths,
				    .num_requests = 1500, .rate_scale = 1, .seed = 1 };
	struct ss_error err = { 0 };
	struct engine_config base;
	struct plan_config *cfg = NULL;
	struct plan_excluded ex;
	struct plan_eval pe;
	struct workload wl;
	char store[1100];
	const char *stores[1] = { store };
	const char *data = getenv("SERVESIM_DATA");
	double best = 0;
	size_t n = 0;

	snprintf(store, sizeof(store), "%s/calibration.db", data ? data : "data");
	workload_init(&wl);
	if (workload_build(&wl, &ws, &err))
		ck_abort_msg("workload: %s", err.msg);
	engine_config_defaults(&base);
	base.model = sp->model;
	base.gpu = sp->gpus[0];
	base.cost_model = cost_model;
	base.stores = stores;
	base.n_stores = 1;
	base.shared_data = shared;   /* distserve's default fits */
	base.seed = 1;
	if (plan_enumerate(sp, &base, &cfg, &n, &ex, &err))
		ck_abort_msg("plan: %s", err.msg);
	ck_assert_uint_gt(n, 0);
	pe = (struct plan_eval){ .base = &base, .wl = &wl, .rate_rps = plan_workload_rate(&wl),
				 .slo = *slo };
	plan_search_defaults(&pe.search);
	pe.search.target = 0.9;
	for (size_t i = 0; i < n; i++) {
		struct plan_result r;
		struct plan_figures f;

		if (plan_evaluate(&pe, &cfg[i], &r, &err))
			ck_abort_msg("%s: %s", cfg[i].key, err.msg);
		plan_figures(&cfg[i], &r, &pe.search, &f);
		printf("  %-90s %8.3f req/s per GPU\n", cfg[i].key, f.goodput_per_gpu);
		if (f.goodput_per_gpu > best) {
			best = f.goodput_per_gpu;
			snprintf(which, which_len, "%s", cfg[i].key);
		}
	}
	free(cfg);
	workload_release(&wl);
	return best;
}

/* DistServe's own ShareGPT requests (the 1,600 of its benchmark run,
 * ../shared/data/serving/distserve_alignment) as a lengths file; output_len
 * counts DistServe's decode steps after the prefill, servesim's output
 * tokens the prefill's first token too, hence + 1 (docs/validation.md). */
static void distserve_lengths(const char *dst)
{
	char src[1200];
	json_error_t jerr;
	json_t *root;
	FILE *out;

	snprintf(src, sizeof(src),
		 "%s/serving/distserve_alignment/opt-13b-sharegpt-workload/distserve-c21d12-1600-16.exp",
		 shared);
	root = json_load_file(src, 0, &jerr);
	ck_assert_msg(root && json_is_array(root), "%s:%d: %s", src, jerr.line, jerr.text);
	out = fopen(dst, "w");
	ck_assert_ptr_nonnull(out);
	fputs("num_prefill_tokens,num_decode_tokens\n", out);
	for (size_t i = 0; i < json_array_size(root); i++) {
		json_t *r = json_array_get(root, i);
		json_t *p = json_object_get(r, "prompt_len"), *o = json_object_get(r, "output_len");

		ck_assert_msg(json_is_integer(p) && json_is_integer(o), "%s: request %zu", src, i);
		fprintf(out, "%lld,%lld\n", (long long)json_integer_value(p),
			(long long)json_integer_value(o) + 1);
	}
	ck_assert_int_eq(fclose(out), 0);
	json_decref(root);
}

/* The published ratio: DistServe's Figure 11a (the simulator's ablation
 * for exactly this setting; LLMServe/DistServe, simdistserve/benchmarks/
 * figure11-abalation/figure/figure_11a.json) gives the share of requests
 * meeting both SLOs at 1..5 req/s per GPU: "dist++" and "dist" (DistServe-
 * High and -Low, disaggregated at the best placement; the same values)
 * 98.3, 89.7, ... and "vllm++" (colocated vLLM at the best parallelism)
 * 95.5, 89.5, ...  At 90%, interpolated: 1 + 8.33 / 8.67 =
 * 1.962 and 1 + 5.5 / 6 = 1.917 req/s per GPU, a ratio of 1.02.  (The
 * paper's headline "up to 4.48x" compares DistServe with the real vLLM of
 * 2023 over every model and workload: engines, not placement.) */
#define DS_PUB_DIST_PER_GPU 1.962
#define DS_PUB_VLLMPP_PER_GPU 1.917

START_TEST(distserve_disaggregation_ratio)
{
	struct plan_space sp = { 0 };
	struct slo_config slo = { .ttft_ms = 200, .tpot_ms = 100 };
	char lengths[600], colo_cfg[384] = "", dis_cfg[384] = "", colo_v_cfg[384] = "";
	double colo, dis, colo_v, ratio, pub, fit, expect;

	snprintf(lengths, sizeof(lengths), "empirical:%s/distserve-sharegpt.csv", tmpdir);
	distserve_lengths(lengths + strlen("empirical:"));
	sp.model = catalog_model(&cat, "opt-13b");
	sp.gpus[0] = catalog_gpu(&cat, "a100-80gb-sxm");
	sp.n_gpus = 1;
	sp.max_gpus = 4;
	sp.policies[0] = plan_policy_find("vllm-v0");
	sp.n_policies = 1;
	sp.chunks[0] = 2048;
	sp.n_chunks = 1;
	sp.tp[0] = 1, sp.tp[1] = 2, sp.tp[2] = 4, sp.n_tp = 3;

	printf("DistServe chatbot, OPT-13B on A100-80GB, TTFT 0.2 s, TPOT 0.1 s, 90%%, "
	       "one latency model (DistServe's engine fits):\n");
	sp.colocated = true;
	colo = best_per_gpu(&sp, "distserve:engine=distserve", lengths, &slo, colo_cfg,
			    sizeof(colo_cfg));
	sp.colocated = false;
	sp.disaggregated = true;
	sp.mixed_pools = true;   /* prefill and decode tp chosen apart, as DistServe's search */
	dis = best_per_gpu(&sp, "distserve:engine=distserve", lengths, &slo, dis_cfg,
			   sizeof(dis_cfg));
	/* The published comparison prices its colocated side with vLLM's fit,
	 * which is slower than DistServe's (1.5x at tp 2 for a 761-token
	 * prompt); the same colocated search under that fit gives the factor
	 * that turns the published ratio into a ratio under one model. */
	sp.colocated = true;
	sp.disaggregated = false;
	sp.mixed_pools = false;
	colo_v = best_per_gpu(&sp, "distserve:engine=vllm", lengths, &slo, colo_v_cfg,
			      sizeof(colo_v_cfg));
	ck_assert_double_gt(colo, 0);
	ck_assert_double_gt(colo_v, 0);
	ratio = dis / colo;
	pub = DS_PUB_DIST_PER_GPU / DS_PUB_VLLMPP_PER_GPU;
	fit = colo_v / colo;
	expect = pub * fit;
	printf("best colocated     %.3f req/s per GPU (%s)\n"
	       "best disaggregated %.3f req/s per GPU (%s)\n"
	       "ratio %.2fx under one model; colocated under vLLM's fit %.3f (%s), fit factor %.2f\n"
	       "published %.2fx (DistServe Fig. 11a, DistServe's fit against vLLM's) -> %.2fx under one "
	       "model; disaggregated against vLLM's-fit colocated %.2fx\n",
	       colo, colo_cfg, dis, dis_cfg, ratio, colo_v, colo_v_cfg, fit, pub, expect,
	       dis / colo_v);
	/* Band: +-25% around the published ratio taken to one model.  Each
	 * search finds its rate to 5% (plan tolerance); DistServe's figure is
	 * interpolated between probes 1 req/s per GPU apart whose attainments
	 * each rest on 100-500 requests (about +-3 points of attainment, some
	 * 10% of rate at this slope), and both sides are searched over
	 * different placement sets (DistServe also tries pipeline
	 * parallelism, servesim does not).  Note that colo cancels out of
	 * ratio / expect: the assert is the same as dis / colo_v, each side
	 * under the fit DistServe's figure gives it, within 25% of the
	 * published 1.02.  No published figure prices both sides with one
	 * model; the one-model ratio (dis / colo, printed) is servesim's own
	 * answer to "what does disaggregation gain here", and is reported,
	 * not asserted. */
	ck_assert_msg(ratio >= 0.75 * expect && ratio <= 1.25 * expect,
		      "ratio %.3f outside [%.3f, %.3f]", ratio, 0.75 * expect, 1.25 * expect);
}
END_TEST

START_TEST(sarathi_chunked_prefill_raises_capacity)
{
	struct plan_space sp = { 0 };
	struct slo_config slo = { .ttft_ms = 2000, .tbt_ms = 1000 };
	char src[1400], lengths[600], v_cfg[384] = "", s_cfg[384] = "";
	double v0, sarathi;

	snprintf(src, sizeof(src),
		 "%s/traces/length_distributions/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
		 shared);
	snprintf(lengths, sizeof(lengths), "empirical:%s/arxiv-16k.csv", tmpdir);
	filter_lengths(src, lengths + strlen("empirical:"), 16000);
	sp.model = catalog_model(&cat, "mistral-7b");
	sp.gpus[0] = catalog_gpu(&cat, "a100-80gb-sxm");
	sp.n_gpus = 1;
	sp.tp[0] = 1;
	sp.n_tp = 1;
	sp.instances[0] = 1;
	sp.n_instances = 1;
	sp.max_gpus = 1;
	sp.colocated = true;
	sp.n_policies = 1;

	printf("Sarathi-Serve, Mistral-7B on one A100-80GB, TTFT 2 s, token gaps <= 1 s, 90%%:\n");
	sp.policies[0] = plan_policy_find("vllm-v0");
	sp.chunks[0] = 16384;   /* V0 takes whole prompts */
	sp.n_chunks = 1;
	v0 = best_per_gpu(&sp, "auto", lengths, &slo, v_cfg, sizeof(v_cfg));
	sp.policies[0] = plan_policy_find("sarathi");
	sp.chunks[0] = 512;
	sp.chunks[1] = 2048;
	sp.n_chunks = 2;
	sarathi = best_per_gpu(&sp, "auto", lengths, &slo, s_cfg, sizeof(s_cfg));
	printf("vLLM V0 %.3f req/s (%s)\nsarathi %.3f req/s (%s)\nratio %.2fx (the paper reports up to 2.6x)\n",
	       v0, v_cfg, sarathi, s_cfg, v0 > 0 ? sarathi / v0 : INFINITY);
	ck_assert_double_gt(sarathi, v0);
}
END_TEST

int main(void)
{
	const char *d = getenv("SERVESIM_SHARED_DATA");
	const char *data = getenv("SERVESIM_DATA");
	struct ss_error err = { 0 };
	char probe[1200];
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;

	snprintf(shared, sizeof(shared), "%s", d ? d : "");
	snprintf(probe, sizeof(probe), "%s/profiles/distserve/profiler-a100-80g.distserve.json", shared);
	if (!d || access(probe, R_OK) != 0) {
		printf("SKIP: %s not readable\n", probe);
		return 77;
	}
	snprintf(probe, sizeof(probe),
		 "%s/serving/distserve_alignment/opt-13b-sharegpt-workload/distserve-c21d12-1600-16.exp",
		 shared);
	if (access(probe, R_OK) != 0) {
		printf("SKIP: %s not readable\n", probe);
		return 77;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/servesim-published-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	catalog_init(&cat);
	if (catalog_load_dir(&cat, data ? data : "data", &err)) {
		fprintf(stderr, "catalog: %s\n", err.msg);
		return 1;
	}
	s = suite_create("published");
	tc = tcase_create("published");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, distserve_disaggregation_ratio);
	tcase_add_test(tc, sarathi_chunked_prefill_raises_capacity);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	catalog_release(&cat);
	snprintf(probe, sizeof(probe), "rm -rf '%s'", tmpdir);
	if (system(probe) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
