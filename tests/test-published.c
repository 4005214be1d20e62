/* Checks against published results (issue 6, revised in issues 11 and 30),
 * on real data from ../shared/data (exit 77 without it):
 *
 *   DistServe (OSDI'24), chatbot: OPT-13B on 4 x A100-80GB, DistServe's own
 *   ShareGPT requests, TTFT SLO 0.2 s and TPOT SLO 0.1 s at 90%
 *   attainment.  Colocated (vLLM V0's prefill-first scheduler, tp 1, 2, 4)
 *   against disaggregated (prefill and decode pools of any tp, as
 *   DistServe's placement search), both priced with ONE latency model,
 *   DistServe's own engine's fits, so the ratio measures disaggregation
 *   and not the difference between two engines' fits.  See
 *   distserve_fig11a_cross_fit_ratio_within_band for the published ratio
 *   and its band.
 *
 *   Sarathi-Serve (OSDI'24): Mistral-7B on one A100-80GB, the paper's own
 *   capacity criterion (P99 time between tokens within 0.1 s or 0.5 s,
 *   median scheduling delay <= 2 s), its baselines (vLLM V0 at max batch
 *   32/64/128; Sarathi at token budget 512 or 2,048): the largest gain on
 *   the paper's openchat_sharegpt4 load within +-25% of the paper's "up to
 *   2.6x".  See sarathi_mistral_capacity_gain_within_band.
 *
 * Both print the figures servesim finds (docs/plan.md records them). */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "engine.h"
#include "metrics.h"
#include "plan.h"
#include "workload.h"

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

START_TEST(distserve_fig11a_cross_fit_ratio_within_band)
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
	/* What is asserted: the ratio Figure 11a measures, DistServe's
	 * disaggregation priced with DistServe's fit against colocated vLLM
	 * priced with vLLM's fit (dis / colo_v), within +-25% of the
	 * published 1.02.  (The same as the one-model ratio dis / colo
	 * within 25% of the published ratio taken to one model, pub * fit:
	 * colo cancels.)  Band: each search finds its rate to 5% (plan
	 * tolerance); DistServe's figure is interpolated between probes
	 * 1 req/s per GPU apart whose attainments each rest on 100-500
	 * requests (about +-3 points of attainment, some 10% of rate at this
	 * slope), and both sides are searched over different placement sets
	 * (DistServe also tries pipeline parallelism, servesim does not).
	 * No published figure prices both sides with one model; the
	 * one-model ratio (dis / colo, printed) is servesim's own answer to
	 * "what does disaggregation gain here", and is reported, not
	 * asserted. */
	ck_assert_msg(dis / colo_v >= 0.75 * pub && dis / colo_v <= 1.25 * pub,
		      "disaggregated (DistServe's fit) / colocated (vLLM's fit) %.3f outside "
		      "[%.3f, %.3f]", dis / colo_v, 0.75 * pub, 1.25 * pub);
}
END_TEST

/* ---- Sarathi-Serve's capacity, as the paper measures it ------------------ */

/* Sarathi-Serve (Agrawal et al., OSDI'24, arXiv 2403.02310) defines a
 * system's capacity as the largest request rate (Poisson arrivals) at which
 * the P99 of the time between tokens, over all tokens, is within the TBT
 * SLO and the median scheduling delay is at most 2 s.  For Mistral-7B on
 * one A100-80GB the SLOs are 0.1 s ("strict", about 5x a decode
 * iteration) and 0.5 s ("relaxed", 25x); vLLM (V0, prefill-first) runs at
 * a maximum batch of 32, 64 or 128, Sarathi-Serve at a token budget of
 * 512 under the strict SLO and 2,048 under the relaxed one, on two loads,
 * openchat_sharegpt4 and arxiv_summarization.  The paper's headline for
 * this model and GPU is "up to 2.6x" the capacity of vLLM: no panel (load
 * and SLO) gains more.
 *
 * Like with like: ../shared/data/traces/length_distributions has the
 * paper's openchat_sharegpt4 lengths (the file microsoft/sarathi-serve
 * ships; median prompt 1,730 tokens, as the paper's Table 2), but its
 * arxiv_summarization file is Vidur's filtered one (median prompt 2,730
 * against the paper's 7,059): a different load.  So the assertion is on
 * the openchat panels, the largest gain over the two SLOs; the arxiv
 * panels are printed only. */
#define SARATHI_PUB_MAX_GAIN 2.6
#define SARATHI_SCHED_DELAY_MS 2000.0   /* median scheduling delay limit */
#define SARATHI_REQUESTS 1000           /* per probe */

/* Does `policy` at `rate` req/s meet the paper's capacity criterion? */
static bool sarathi_probe(const char *policy, const char *lengths, double rate, double tbt_ms)
{
	struct workload_spec ws = { .arrival = "poisson:rate=1", .lengths = lengths,
				    .num_requests = SARATHI_REQUESTS, .rate_scale = rate,
				    .seed = 1 };
	struct ss_error err = { 0 };
	struct engine_results r;
	struct engine_config c;
	struct engine *e = NULL;
	struct workload wl;
	struct summary *s = calloc(1, sizeof(*s));
	char store[1100];
	const char *stores[1] = { store };
	const char *data = getenv("SERVESIM_DATA");
	bool ok;

	ck_assert_ptr_nonnull(s);
	snprintf(store, sizeof(store), "%s/calibration.db", data ? data : "data");
	workload_init(&wl);
	if (workload_build(&wl, &ws, &err))
		ck_abort_msg("workload: %s", err.msg);
	engine_config_defaults(&c);
	c.model = catalog_model(&cat, "mistral-7b");
	c.gpu = catalog_gpu(&cat, "a100-80gb-sxm");
	c.policy = policy;
	c.cost_model = "auto";   /* servesim's measured A100 tables */
	c.stores = stores;
	c.n_stores = 1;
	c.shared_data = shared;
	c.seed = 1;
	if (engine_new(&e, &c, &wl, &err) || engine_run(e, &err))
		ck_abort_msg("%s at %g req/s: %s", policy, rate, err.msg);
	engine_results(e, &r);
	if (summary_compute(s, &r, NULL, 1, &err))
		ck_abort_msg("summary: %s", err.msg);
	ok = s->completed == SARATHI_REQUESTS && s->itl_ms.p99 <= tbt_ms &&
	     s->queue_ms.p50 <= SARATHI_SCHED_DELAY_MS;
	engine_free(e);
	workload_release(&wl);
	free(s);
	return ok;
}

/* The capacity of `policy`, req/s: double the rate from 1/16 req/s until a
 * probe fails, then bisect until the bracket is within 5%. */
static double sarathi_capacity(const char *policy, const char *lengths, double tbt_ms)
{
	double lo = 0, hi = 1.0 / 16;

	while (hi < 64 && sarathi_probe(policy, lengths, hi, tbt_ms)) {
		lo = hi;
		hi *= 2;
	}
	if (lo == 0)
		return 0;
	while (hi / lo > 1.05) {
		double mid = sqrt(lo * hi);

		if (sarathi_probe(policy, lengths, mid, tbt_ms))
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

START_TEST(sarathi_mistral_capacity_gain_within_band)
{
	static const struct {
		const char *name, *file;
		bool paper_load;   /* the paper's lengths: asserted */
	} loads[] = {
		{ "openchat_sharegpt4", "sharegpt_8k_filtered_stats_llama2_tokenizer.csv", true },
		{ "arxiv_summarization",
		  "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv", false },
	};
	static const struct {
		const char *name;
		double tbt_ms;
		const char *sarathi;
	} slos[] = {
		{ "strict", 100, "sarathi:token_budget=512" },
		{ "relaxed", 500, "sarathi:token_budget=2048" },
	};
	static const char *const vllm[] = {
		"vllm:v0=on,max_num_seqs=32,max_num_batched_tokens=16384",
		"vllm:v0=on,max_num_seqs=64,max_num_batched_tokens=16384",
		"vllm:v0=on,max_num_seqs=128,max_num_batched_tokens=16384",
	};
	double max_gain = 0;

	printf("Sarathi-Serve, Mistral-7B on one A100-80GB: capacity (P99 TBT within the SLO,\n"
	       "median scheduling delay <= 2 s), %d requests a probe, req/s:\n", SARATHI_REQUESTS);
	for (size_t l = 0; l < sizeof(loads) / sizeof(loads[0]); l++) {
		char src[1400], lengths[600];

		snprintf(src, sizeof(src), "%s/traces/length_distributions/%s", shared,
			 loads[l].file);
		snprintf(lengths, sizeof(lengths), "empirical:%s/%s.csv", tmpdir, loads[l].name);
		/* every request within Mistral-7B's context */
		filter_lengths(src, lengths + strlen("empirical:"), 16000);
		for (size_t k = 0; k < sizeof(slos) / sizeof(slos[0]); k++) {
			double v = 0, sarathi, gain;

			for (size_t i = 0; i < sizeof(vllm) / sizeof(vllm[0]); i++) {
				double c = sarathi_capacity(vllm[i], lengths, slos[k].tbt_ms);

				printf("  %-20s %-7s %-58s %7.3f\n", loads[l].name, slos[k].name,
				       vllm[i], c);
				v = c > v ? c : v;
			}
			sarathi = sarathi_capacity(slos[k].sarathi, lengths, slos[k].tbt_ms);
			gain = v > 0 ? sarathi / v : INFINITY;
			printf("  %-20s %-7s %-58s %7.3f  gain %.2fx\n", loads[l].name,
			       slos[k].name, slos[k].sarathi, sarathi, gain);
			if (loads[l].paper_load && gain > max_gain)
				max_gain = gain;
		}
	}
	printf("largest gain on the paper's load (openchat_sharegpt4) %.2fx; the paper's: up to %.1fx\n",
	       max_gain, SARATHI_PUB_MAX_GAIN);
	/* Band: +-25% around the paper's 2.6x, as for DistServe above.  Each
	 * capacity here is found to 5% (the bisection), so a gain, the ratio
	 * of two, to about 10%; the paper's capacities come from its own
	 * search on a real A100, priced here by servesim's measured tables
	 * rather than that machine, each probe one seed of SARATHI_REQUESTS
	 * requests.  Above 3.25x servesim disagrees with every panel of the
	 * paper.  The lower side assumes the 2.6x is an openchat panel's
	 * (the strict one, where vLLM's stalls cost most); were it an arxiv
	 * panel's, the openchat gain could be lower in the paper too. */
	ck_assert_msg(max_gain >= 0.75 * SARATHI_PUB_MAX_GAIN &&
		      max_gain <= 1.25 * SARATHI_PUB_MAX_GAIN,
		      "largest openchat_sharegpt4 gain %.3f outside [%.2f, %.2f]", max_gain,
		      0.75 * SARATHI_PUB_MAX_GAIN, 1.25 * SARATHI_PUB_MAX_GAIN);
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
	tcase_add_test(tc, distserve_fig11a_cross_fit_ratio_within_band);
	tcase_add_test(tc, sarathi_mistral_capacity_gain_within_band);
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
