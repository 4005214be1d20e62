/* servesim — measured serving runs as engine-fit observations
 * (engine-obs.h). */
#include "engine-obs.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hist.h"

int efit_group_by_from_name(const char *name, enum efit_group_by *out)
{
	static const char *const names[] = { "run", "file", "model", "gpu", "tp", "model-tp", "isl", "source" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i])) {
			*out = (enum efit_group_by)i;
			return 0;
		}
	return -EINVAL;
}

/* name lowercased, '_' and ' ' as '-', into buf */
static void norm(const char *name, char *buf, size_t len)
{
	size_t i = 0;

	for (; name[i] && i + 1 < len; i++) {
		char c = (char)tolower((unsigned char)name[i]);

		buf[i] = c == '_' || c == ' ' ? '-' : c;
	}
	buf[i] = '\0';
}

/* Checkpoints with another name and the very architecture of a catalog
 * entry (their config.json differ in no key the catalog reads):
 * DeepSeek-R1 is DeepSeek-V3 post-trained (deepseek-ai/DeepSeek-R1's
 * config.json: model_type deepseek_v3, the same shapes). */
static const struct {
	const char *alias, *name;
} model_aliases[] = {
	{ "deepseek-r1", "deepseek-v3" },
	{ "deepseek-r1-0528", "deepseek-v3" },
	{ "deepseek-v3-0324", "deepseek-v3" },
	/* NIM's Llama-3 (the GenAI-Perf sweep, ../shared/data/serving/nim):
	 * Llama-3-8B/70B-Instruct have Llama-3.1's shapes (layers, hidden and
	 * FFN sizes, 32/64 heads, 8 KV heads, 128256-token vocabulary); they
	 * differ in the RoPE scaling and the 8k context, which no figure here
	 * depends on (the sweep's longest request, 7000 + 2000 tokens, is past
	 * Llama-3's 8192: as NIM ran it, not a servesim limit) */
	{ "meta-llama3-8b-instruct", "llama-3.1-8b" },
	{ "meta-llama3-70b-instruct", "llama-3.1-70b" },
	/* TensorRT-LLM 0.9's table names Llama 2 "LLaMA v2 7B" */
	{ "llama-v2-7b", "llama-2-7b" },
	{ "llama-v2-13b", "llama-2-13b" },
	{ "llama-v2-70b", "llama-2-70b" },
	/* Qwen3-235B-A22B-Instruct-2507 (GPUStack's pages) is Qwen3-235B-A22B
	 * post-trained: the same config.json shapes, a longer native context */
	{ "qwen3-235b-a22b-instruct-2507", "qwen3-235b-a22b" },
};

const struct model_spec *efit_match_model(const struct catalog *cat, const char *name)
{
	char want[160], dashed[160], have[160];
	const char *slash = strrchr(name, '/');
	size_t j = 0;

	if (!name[0])
		return NULL;
	norm(slash ? slash + 1 : name, want, sizeof(want));
	for (size_t i = 0; i < sizeof(model_aliases) / sizeof(model_aliases[0]); i++)
		if (!strcmp(want, model_aliases[i].alias)) {
			const struct model_spec *m = catalog_model(cat, model_aliases[i].name);

			if (m)
				return m;
		}
	/* "llama2-70b" -> "llama-2-70b": a dash between a letter and a digit */
	for (size_t i = 0; want[i] && j + 2 < sizeof(dashed); i++) {
		if (i && isalpha((unsigned char)want[i - 1]) && isdigit((unsigned char)want[i]))
			dashed[j++] = '-';
		dashed[j++] = want[i];
	}
	dashed[j] = '\0';
	for (size_t i = 0; i < cat->n_models; i++) {
		const struct model_spec *m = &cat->models[i];
		const char *hs = strrchr(m->hf_id, '/');

		norm(hs ? hs + 1 : m->hf_id, have, sizeof(have));
		if (!strcmp(m->name, want) || !strcmp(m->name, dashed) || !strcmp(have, want))
			return m;
	}
	return NULL;
}

/* Every dash-separated token of a GPU's catalog name but its form factor
 * ("sxm", "pcie") appears among the source name's tokens: "a100-80gb-sxm"
 * matches "a100-80gb", "A100-SXM4-80GB"; "h100-sxm" matches "h100_sxm". */
const struct gpu_spec *efit_match_gpu(const struct catalog *cat, const char *name)
{
	char src[128], tok[128];

	if (!name[0])
		return NULL;
	norm(name, src, sizeof(src));
	for (size_t i = 0; i < cat->n_gpus; i++) {
		const struct gpu_spec *g = &cat->gpus[i];
		bool all = true;
		char *save = NULL, *t;

		if (!strcmp(g->name, src))
			return g;
		snprintf(tok, sizeof(tok), "%s", g->name);
		for (t = strtok_r(tok, "-", &save); t && all; t = strtok_r(NULL, "-", &save)) {
			char *p = src;
			bool found = false;
			size_t n = strlen(t);

			if (!strcmp(t, "sxm") || !strcmp(t, "pcie"))
				continue;
			for (; (p = strstr(p, t)); p += n)
				if ((p == src || p[-1] == '-') && (p[n] == '\0' || p[n] == '-'))
					found = true;
			all = found;
		}
		if (all)
			return g;
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n) (sorted in place), as the summaries compute it. */
static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return ss_quantile_sorted(v, n, 0.5);
}

static int skip(struct ss_error *err, const char *file, const struct serving_run *run,
		const char *why)
{
	return ss_error_set(err, -ENOENT, file, run->line, "%s: %s", run->label[0] ? run->label :
			    "run", why);
}

static void add_target(struct efit_obs *obs, enum efit_metric m, double v)
{
	if (v > 0 && isfinite(v) && obs->n_targets < EFIT_MAX_TARGETS)
		obs->targets[obs->n_targets++] = (struct efit_target){ .metric = m, .value = v };
}

/* A figure reported beside the fit, not fitted (efit_target.report). */
static void add_report(struct efit_obs *obs, enum efit_metric m, double v)
{
	int n = obs->n_targets;

	add_target(obs, m, v);
	if (obs->n_targets > n)
		obs->targets[n].report = true;
}

/* A source's aggregate in ms (NAN when absent). */
static double agg_ms(int64_t ns)
{
	return ns > 0 ? (double)ns / 1e6 : NAN;
}

/* Requests of equal lengths, all at 0 (a static batch, or a closed loop's
 * lengths). */
static int fixed_requests(struct workload *wl, size_t n, int32_t isl, int32_t osl)
{
	wl->req = calloc(n, sizeof(*wl->req));
	if (!wl->req)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		wl->req[i] = (struct wl_request){ .prompt_tokens = isl, .output_tokens = osl };
	wl->n = wl->cap = n;
	wl->has_arrivals = true;
	return 0;
}

/* A per-request run's served requests at their send times
 * (serving_run_workload), and their measured percentiles, computed as
 * servesim's own summaries compute them (serving_run_stats). */
static int per_request(const struct serving_run *run, struct efit_obs *obs, struct workload *wl,
		       const char *file, struct ss_error *err)
{
	struct serving_stats st;

	if (serving_run_workload(wl, run, err))
		return skip(err, file, run, "no replayable requests");
	if (serving_run_stats(run, &st))
		return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	if (st.n < 2)
		return skip(err, file, run, "fewer than 2 served requests");
	add_target(obs, EFIT_TTFT_P50, st.ttft_ms[SERVING_P50]);
	add_target(obs, EFIT_TTFT_P90, st.ttft_ms[SERVING_P90]);
	add_target(obs, EFIT_TPOT_P50, st.tpot_ms[SERVING_P50]);
	/* reported only, so the fits made on these targets stay as they were */
	add_report(obs, EFIT_TTFT_P99, st.ttft_ms[SERVING_P99]);
	add_report(obs, EFIT_E2E_P50, st.e2e_ms[SERVING_P50]);
	return 0;
}

/* Why a GPUStack row is not replayed, or NULL (data-quality filters,
 * ../shared/data/serving/gpustack and docs/serving-results.md). */
static const char *gpustack_skip(const struct serving_run *run)
{
	char model[160];

	norm(run->model, model, sizeof(model));
	if (run->speculative)
		return "speculative decoding in serve_cmd (not modelled here; issue 32)";
	if (strstr(model, "qwen3.5"))
		return "a Qwen3.5 row: TPOT p50 0.03-0.22 ms and ITL 0 are not per-token times "
		       "(multi-token prediction), and the model is not in the catalog";
	if (run->dp > 1)
		return "data-parallel replicas in serve_cmd (not replayed by this reader)";
	if (run->pp > 1)
		return "pipeline stages in serve_cmd (not replayed by this reader)";
	if (run->num_prompts < 1 || run->isl < 1 || run->osl < 1)
		return "no request count or lengths";
	return NULL;
}

/* A GPUStack row (`vllm bench serve`, aggregates only) as its benchmark
 * ran it: num_prompts requests of the row's (mean) lengths, either C
 * clients of a closed loop that all start at 0 (vllm bench serve's
 * --max-concurrency, no warm-up) or all at t = 0 (request rate inf).
 * Fitted: TTFT and TPOT p50 of a closed loop (as the per-request runs'),
 * TPOT p50 of a burst, whose TTFT is queueing (reported only); the other
 * figures the row gives are reported. */
static int gpustack_obs(const struct serving_run *run, struct efit_obs *obs, struct workload *wl)
{
	bool burst = run->load != SERVING_LOAD_CLOSED;

	if (fixed_requests(wl, (size_t)run->num_prompts, run->isl, run->osl))
		return -ENOMEM;
	if (!burst)
		obs->ec.concurrency = (uint32_t)run->concurrency;
	else
		obs->note = "burst: all requests at t=0, TTFT is queueing (reported only)";
	if (!burst)
		add_target(obs, EFIT_TTFT_P50, agg_ms(run->median_ttft_ns));
	add_target(obs, EFIT_TPOT_P50, agg_ms(run->median_tpot_ns));
	if (burst)
		add_report(obs, EFIT_TTFT_P50, agg_ms(run->median_ttft_ns));
	add_report(obs, EFIT_TTFT_MEAN, agg_ms(run->mean_ttft_ns));
	add_report(obs, EFIT_TTFT_P99, agg_ms(run->p99_ttft_ns));
	add_report(obs, EFIT_TPOT_MEAN, agg_ms(run->mean_tpot_ns));
	add_report(obs, EFIT_TPOT_P99, agg_ms(run->p99_tpot_ns));
	add_report(obs, EFIT_ITL_MEAN, agg_ms(run->mean_itl_ns));
	add_report(obs, EFIT_ITL_P50, agg_ms(run->median_itl_ns));
	add_report(obs, EFIT_ITL_P99, agg_ms(run->p99_itl_ns));
	add_report(obs, EFIT_E2E_MEAN, agg_ms(run->mean_e2e_ns));
	return 0;
}

/* Is a the same deployment and workload as b, with the same metrics? */
static bool same(const struct efit_obs *a, const struct efit_obs *b)
{
	/* two deployments' runs (their stacks) are never repeats */
	if (a->ec.stack != b->ec.stack || a->stack_known != b->stack_known ||
	    a->ec.model != b->ec.model || a->ec.gpu != b->ec.gpu || a->ec.tp != b->ec.tp ||
	    a->ec.ep != b->ec.ep || a->ec.dp_attention != b->ec.dp_attention || a->ec.pp != b->ec.pp ||
	    a->ec.concurrency != b->ec.concurrency || strcmp(a->ec.policy, b->ec.policy) ||
	    !engine_pool_config_equal(&a->ec.pools[0], &b->ec.pools[0]) ||
	    !engine_pool_config_equal(&a->ec.pools[1], &b->ec.pools[1]) ||
	    a->ec.weight_dtype != b->ec.weight_dtype || a->ec.kv_dtype != b->ec.kv_dtype ||
	    a->wl->n != b->wl->n || a->n_targets != b->n_targets ||
	    strcmp(a->engine ? a->engine : "", b->engine ? b->engine : "") ||
	    strcmp(a->launch ? a->launch : "", b->launch ? b->launch : ""))
		return false;
	for (int k = 0; k < a->n_targets; k++)
		if (a->targets[k].metric != b->targets[k].metric)
			return false;
	for (size_t i = 0; i < a->wl->n; i++)
		if (a->wl->req[i].arrival_ns != b->wl->req[i].arrival_ns ||
		    a->wl->req[i].prompt_tokens != b->wl->req[i].prompt_tokens ||
		    a->wl->req[i].output_tokens != b->wl->req[i].output_tokens)
			return false;
	return true;
}

size_t efit_obs_merge_repeats(struct efit_obs *obs, size_t n, double *scratch)
{
	bool *gone = calloc(n ? n : 1, sizeof(*gone));
	size_t kept = 0;

	if (!gone)
		return n;
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		if (gone[i])
			continue;
		for (int t = 0; t < obs[i].n_targets; t++) {
			k = 0;
			for (size_t j = i; j < n; j++)
				if (!gone[j] && (j == i || same(&obs[i], &obs[j])))
					scratch[k++] = obs[j].targets[t].value;
			obs[i].targets[t].value = median(scratch, k);
		}
		for (size_t j = i + 1; j < n; j++)
			if (!gone[j] && same(&obs[i], &obs[j]))
				gone[j] = true;
		obs[i].repeats = (int)k;
	}
	for (size_t i = 0; i < n; i++) {
		if (gone[i])
			continue;
		if (kept != i) {
			struct efit_obs o = obs[i];

			obs[i] = obs[kept];
			obs[kept] = o;
		}
		kept++;
	}
	free(gone);
	return kept;
}

/* The engine settings a source records (LLMServingSim's meta.json: vLLM's
 * resolved num_gpu_blocks, block_size, max_num_seqs, max_num_batched_tokens)
 * replace what servesim would derive, so the run is re-simulated with the
 * KV capacity and batch limits it was measured with.  The recorded limits
 * are added to a vllm batch policy unless its spec sets either already.
 * derived_seqs > 0 is a running-set limit the caller derives from how the
 * run was launched (efit_source_opts.closed_seqs_short), used when the run
 * records none and the spec sets no max_num_seqs.  derived_tokens > 0 is a
 * token budget derived from the launch (efit_source_opts.closed_tokens_set)
 * that replaces the spec's max_num_batched_tokens.  The policy string lives
 * in the tail of the caller's name buffer (obs keeps pointers). */
static int engine_settings(const struct serving_run *run, int64_t derived_seqs,
			   int64_t derived_tokens, struct efit_obs *obs, char *name,
			   size_t name_len, struct ss_error *err)
{
	const char *pol = obs->ec.policy;
	size_t used = strlen(name) + 1;
	char *buf = name + used;
	int64_t seqs = 0, tokens = 0;
	bool vllm = !strncmp(pol, "vllm", 4) && (pol[4] == '\0' || pol[4] == ':');
	int n;

	if (run->num_gpu_blocks > 0)
		obs->ec.kv_blocks_override = run->num_gpu_blocks;
	if (run->block_size > 0)
		obs->ec.block_size = run->block_size;
	if (!vllm)
		return 0;
	if ((run->max_num_seqs > 0 || run->max_num_batched_tokens > 0) &&
	    !strstr(pol, "max_num_seqs") && !strstr(pol, "max_num_batched_tokens")) {
		seqs = run->max_num_seqs;
		tokens = run->max_num_batched_tokens;
	}
	if (run->max_num_seqs <= 0 && derived_seqs > 0 && !strstr(pol, "max_num_seqs"))
		seqs = derived_seqs;
	if (run->max_num_batched_tokens <= 0 && derived_tokens > 0)
		tokens = derived_tokens;
	if (seqs <= 0 && tokens <= 0)
		return 0;
	if (used + 96 + strlen(pol) > name_len)
		return ss_error_set(err, -EINVAL, NULL, 0, "name buffer too small");
	if (derived_tokens > 0 && tokens == derived_tokens) {
		/* the spec's items less its max_num_batched_tokens (a key given
		 * twice is an error), the derived budget appended below */
		const char *item = pol[4] == ':' ? pol + 5 : pol + 4;

		n = snprintf(buf, name_len - used, "vllm");
		while (*item) {
			size_t len = strcspn(item, ",");

			if (strncmp(item, "max_num_batched_tokens=", 23))
				n += snprintf(buf + n, name_len - used - (size_t)n, "%c%.*s",
					      buf[4] ? ',' : ':', (int)len, item);
			item += len + (item[len] == ',');
		}
		n += snprintf(buf + n, name_len - used - (size_t)n, "%c", buf[4] ? ',' : ':');
	} else {
		n = snprintf(buf, name_len - used, "%s%c", pol, pol[4] == ':' ? ',' : ':');
	}
	if (seqs > 0)
		n += snprintf(buf + n, name_len - used - (size_t)n, "max_num_seqs=%d%s",
			      (int)seqs, tokens > 0 ? "," : "");
	if (tokens > 0)
		snprintf(buf + n, name_len - used - (size_t)n, "max_num_batched_tokens=%d",
			 (int)tokens);
	obs->ec.policy = buf;
	return 0;
}

/* pol (a vllm spec) with max_num_seqs = seqs and max_num_batched_tokens =
 * tokens where they are > 0, each replacing the spec's own, into buf.
 * Returns the length written, or -1 when buf is too small. */
static int policy_with(const char *pol, int64_t seqs, int64_t tokens, char *buf, size_t len)
{
	const char *item = pol[4] == ':' ? pol + 5 : pol + 4;
	size_t n = (size_t)snprintf(buf, len, "vllm");

	while (*item && n < len) {
		size_t l = strcspn(item, ",");

		if (!(seqs > 0 && !strncmp(item, "max_num_seqs=", 13)) &&
		    !(tokens > 0 && !strncmp(item, "max_num_batched_tokens=", 23)))
			n += (size_t)snprintf(buf + n, len - n, "%c%.*s", buf[4] ? ',' : ':', (int)l, item);
		item += l + (item[l] == ',');
	}
	if (seqs > 0 && n < len)
		n += (size_t)snprintf(buf + n, len - n, "%cmax_num_seqs=%d", buf[4] ? ',' : ':',
				      (int)seqs);
	if (tokens > 0 && n < len)
		n += (size_t)snprintf(buf + n, len - n, "%cmax_num_batched_tokens=%d",
				      buf[4] ? ',' : ':', (int)tokens);
	return n < len ? (int)n : -1;
}

/* A disaggregated pool in servesim's terms: n instances of tp GPUs (every
 * GPU of a worker, tp_size x attention_dp_size), ep, dp attention ranks,
 * pp stages. */
struct pool_layout {
	int n, tp, ep, dp, pp;
};

/* One pool of a disaggregated silicon row (docs/validation.md,
 * "Disaggregated MoE rows"): the config_id dumps write each pool as
 * workers x (tp_size x attention_dp_size GPUs, moe_ep_size, moe_tp_size),
 * the agg rows' convention, so a DEP8 worker is tp_size 1,
 * attention_dp_size 8, moe_ep_size 8.  NULL, or why the pool cannot be
 * replayed. */
static const char *pool_layout(const struct serving_pool *p, const struct model_spec *m,
			       struct pool_layout *l)
{
	if (p->workers < 1 || p->tp < 1)
		return "no prefill_num_workers / decode_num_workers (a dump that drops the pool "
		       "sizes: the 2026-03-25 and 2026-04-06 dumps; layout not recoverable)";
	l->n = p->workers;
	l->dp = p->attn_dp > 1 ? p->attn_dp : 1;
	l->ep = p->moe_ep > 1 ? p->moe_ep : 1;
	l->pp = p->pp > 1 ? p->pp : 1;
	if (p->tp > 64 / l->dp)
		return "a pool's tp_size x attention_dp_size above 64 GPUs";
	l->tp = p->tp * l->dp;
	if (m->n_experts > 0 && p->moe_tp > 0 && p->moe_tp * l->ep != l->tp)
		return "a pool's moe_tp_size x moe_ep_size is not its tp_size x attention_dp_size "
		       "(a layout servesim does not model)";
	if (l->pp > 1 && (l->ep > 1 || l->dp > 1))
		return "a pool with pipeline stages and expert or attention data parallelism "
		       "(not modelled)";
	if ((l->ep > 1 || l->dp > 1) &&
	    cost_layout_check(m, l->tp, l->ep, l->dp, "tp", "moe_ep_size", "attention_dp_size", NULL))
		return "a pool's expert parallelism or attention data parallelism does not fit the "
		       "model (cost_layout_check)";
	return NULL;
}

/* "tp8 ep8 dp8" (ep, dp, pp shown when above 1) into buf. */
static void layout_name(char *buf, size_t len, int tp, int ep, int dp, int pp)
{
	snprintf(buf, len, "tp%d%s%.0d%s%.0d%s%.0d", tp, ep > 1 ? " ep" : "", ep > 1 ? ep : 0,
		 dp > 1 ? " dp" : "", dp > 1 ? dp : 0, pp > 1 ? " pp" : "", pp > 1 ? pp : 0);
}

/* The pools of a disaggregated row into obs->ec and their layout's name
 * ("p tp8 ep8 dp8 x1 / d tp8 ep8 x2") into lay.  Returns 0 or, err set,
 * -ENOENT (skip). */
static int disagg_pools(const struct serving_run *run, const char *file,
			const struct model_spec *m, struct efit_obs *obs, char *lay, size_t lay_len,
			struct ss_error *err)
{
	struct pool_layout p, d;
	const char *why = pool_layout(&run->prefill, m, &p);
	char pn[64], dn[64];

	if (!why)
		why = pool_layout(&run->decode, m, &d);
	if (why)
		return skip(err, file, run, why);
	for (int k = 0; k < ENGINE_POOLS; k++) {
		const struct pool_layout *l = k ? &d : &p;
		struct engine_pool_config *pc = &obs->ec.pools[k];

		pc->n = (uint32_t)l->n;
		pc->tp = l->tp;
		pc->ep = l->ep;
		pc->dp_attention = l->dp;
		pc->pp = l->pp;
	}
	/* the colocated fields stay the base's but for tp, which the
	 * summaries divide by: the decode pool's */
	obs->ec.tp = d.tp;
	/* a pool whose weights leave no KV under servesim's memory rule
	 * (docs/kv-cache.md) cannot be replayed: skipped, as an engine
	 * error would end the whole command */
	for (int k = 0; k < 2; k++) {
		const struct pool_layout *l = k ? &d : &p;
		struct engine_config pc = obs->ec;
		int32_t blocks = 0;

		pc.pools[0].n = pc.pools[1].n = 0;
		pc.tp = l->tp;
		pc.ep = l->ep;
		pc.dp_attention = l->dp;
		pc.pp = l->pp;
		if (engine_kv_capacity(&pc, &blocks, NULL) == -EINVAL)
			return skip(err, file, run, "a pool's weights do not fit its GPUs' memory "
				    "(servesim's KV rule, engine_kv_capacity)");
	}
	layout_name(pn, sizeof(pn), p.tp, p.ep, p.dp, p.pp);
	layout_name(dn, sizeof(dn), d.tp, d.ep, d.dp, d.pp);
	snprintf(lay, lay_len, "p %s x%d / d %s x%d", pn, p.n, dn, d.n);
	return 0;
}

/* The launch limits of a disaggregated row's pools, aiconfigurator's
 * benchmark rules for disagg (benchmark/{trtllm,sglang,vllm}.rule): each
 * worker's max_batch_size as the row records it (prefill_batch_size,
 * 1 by the rules' default; decode_batch_size), per attention rank as
 * agg rows' batch_size is, as the pool's max_num_seqs; with
 * --closed-max-tokens C+ISL+K the prefill workers' token budget ISL + K
 * (the rules' prefill max_num_tokens = ISL + 1500).  The decode workers'
 * budget (max_num_tokens = max_batch_size) is not applied: a decode
 * instance here recomputes the prompt of a request it preempted, which
 * such a budget would never schedule with chunking off (TensorRT-LLM's
 * decode workers never preempt).  A vllm batch policy only; the specs
 * live in the tail of the caller's name buffer. */
static int disagg_policies(const struct serving_run *run, const struct efit_source_opts *o,
			   struct efit_obs *obs, char *name, size_t name_len, struct ss_error *err)
{
	const char *pol = obs->ec.policy;
	size_t used = strlen(name) + 1;
	int n;

	if (strncmp(pol, "vllm", 4) || (pol[4] != '\0' && pol[4] != ':'))
		return 0;
	if (run->prefill.batch > 0 || (o->closed_tokens_set && run->isl > 0)) {
		n = policy_with(pol, run->prefill.batch, o->closed_tokens_set && run->isl > 0 ?
				(int64_t)run->isl + o->closed_tokens_extra : 0, name + used,
				name_len - used);
		if (n < 0)
			return ss_error_set(err, -EINVAL, NULL, 0, "name buffer too small");
		obs->ec.pools[ENGINE_POOL_PREFILL].policy = name + used;
		used += (size_t)n + 1;
	}
	if (run->decode.batch > 0) {
		n = policy_with(pol, run->decode.batch, 0, name + used, name_len - used);
		if (n < 0)
			return ss_error_set(err, -EINVAL, NULL, 0, "name buffer too small");
		obs->ec.pools[ENGINE_POOL_DECODE].policy = name + used;
	}
	return 0;
}

int efit_obs_from_run(const struct serving_run *run, const char *file,
		      const struct catalog *cat, const struct engine_config *base,
		      const struct efit_source_opts *o, struct efit_obs *obs,
		      struct workload *wl, char *name, size_t name_len, char *group,
		      size_t group_len, struct ss_error *err)
{
	const struct model_spec *m = o->model ? catalog_model(cat, o->model) :
				     efit_match_model(cat, run->model);
	const struct gpu_spec *g = o->gpu ? catalog_gpu(cat, o->gpu) : efit_match_gpu(cat, run->gpu);
	/* Layout (docs/validation.md): servesim's tp is every GPU of the
	 * instance, tp_size x attention_dp_size; dp-attention is
	 * attention_dp_size and ep moe_ep_size (moe_tp_size x moe_ep_size
	 * must be that tp).  --tp overrides the instance's GPUs. */
	int dp = run->attn_dp > 1 ? run->attn_dp : 1;
	int ep = run->moe_ep > 1 ? run->moe_ep : 1;
	int tp = o->tp > 0 ? o->tp : run->tp > 0 ? run->tp * dp : 1;
	/* prefill and decode pools (aiconfigurator's mode=disagg rows) */
	bool pd = !strcmp(run->mode, "disagg") || run->prefill.tp > 0 || run->decode.tp > 0;
	char lay[160];  /* the layout's name: "tp8 ep8", "p tp8 x1 / d tp8 ep8 dp8 x2" */
	int64_t seqs;   /* a running-set limit derived from the launch (0: none) */
	int64_t tokens; /* a token budget derived from the launch (0: none) */
	enum ss_dtype wdt;   /* the replay's weight dtype */
	const char *base_name = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	/* a GPUStack row's data-quality filter (gpustack_skip) */
	const char *why = run->format == SERVING_GPUSTACK ? gpustack_skip(run) : NULL;
	int rc;

	memset(obs, 0, sizeof(*obs));
	if (why)
		return skip(err, file, run, why);
	/* the token matcher would take "H100 NVL" (a 94 GB PCIe card with its
	 * own clocks) for h100-sxm; the catalog has no H100 NVL */
	if (run->format == SERVING_TRTLLM_STATIC && strstr(run->gpu, "NVL"))
		return skip(err, file, run, "its GPU (H100 NVL) is not in the catalog");
	if (run->format == SERVING_TRTLLM_STATIC && run->pp > 1)
		return skip(err, file, run, "pipeline stages (not replayed by this reader)");
	if (!m)
		return skip(err, file, run, o->model ? "--model is not in the catalog" :
			    "its model is not in the catalog (give --model)");
	if (!g)
		return skip(err, file, run, o->gpu ? "--gpu is not in the catalog" :
			    "its GPU is not in the catalog (give --gpu)");
	/* The row's precision (aiconfigurator's column: the linear layers'
	 * weights, gemm_quant_mode) sets the weight dtype; --weight-dtype
	 * covers files without one.  The KV dtype is not recorded: base's
	 * (--kv-dtype). */
	wdt = base->weight_dtype;
	if (run->precision[0]) {
		enum ss_dtype d;

		if (ss_dtype_parse(run->precision, &d))
			return skip(err, file, run,
				    "its precision is none of bf16, fp8, fp4 (not modelled)");
		/* bf16 is the model's dtype, unless its checkpoint is
		 * another (model_spec.weight_dtype) */
		if (d != SS_DTYPE_BF16 || m->weight_dtype)
			wdt = d;
	}
	if (precision_check(g, wdt, base->kv_dtype, NULL))
		return skip(err, file, run, "fp4 weights on a GPU without fp4 tensor cores");
	/* experts spread over GPUs and data-parallel attention: replayed
	 * as --ep / --dp-attention where the layout is one servesim has */
	if (!pd && m->n_experts > 0 && run->moe_tp > 0 && run->moe_tp * ep != tp)
		return skip(err, file, run, "moe_tp_size x moe_ep_size is not tp_size x "
			    "attention_dp_size (a layout servesim does not model)");
	if (model_unpriced(m)) {
		char why[160];

		snprintf(why, sizeof(why), "its model's architecture (%s) is not priced yet (issue 12)",
			 model_unpriced(m));
		return skip(err, file, run, why);
	}
	if (run->isl > 0 && run->osl > 0 && (int64_t)run->isl + run->osl > m->max_context)
		return skip(err, file, run, "prompt + output tokens exceed the model's context length");
	/* The 2026-04 dumps of the silicon set write an EP layout of N GPUs
	 * as moe_tp_size N x moe_ep_size E on tp_size N x E (or attention_dp_size
	 * D x E) GPUs: the same measurement appears in the 2026-03-25 dump as
	 * tp 8, moe_tp 1, moe_ep 8 and as tp 64, moe_tp 8, moe_ep 8 (DeepSeek-R1,
	 * B200, TTFT 212 ms, TPOT 8.93 ms).  Such a row names more GPUs than a
	 * node holds while splitting the experts both ways: its layout is not
	 * recoverable from the columns, so it is skipped, not replayed on N x E
	 * GPUs (NVL72 rows, moe_ep_size 1, are not affected). */
	if (!pd && run->format == SERVING_SILICON && run->moe_tp > 1 && ep > 1 &&
	    tp > (base->gpus_per_node > 0 ? base->gpus_per_node : 8))
		return skip(err, file, run, "moe_tp_size and moe_ep_size both above 1 on more GPUs "
			    "than a node (a dump's tp x ep encoding, layout not recoverable)");
	if (!pd && (ep > 1 || dp > 1) &&
	    cost_layout_check(m, tp, ep, dp, "tp", "moe_ep_size", "attention_dp_size", NULL))
		return skip(err, file, run, "its expert parallelism or attention data parallelism "
			    "does not fit the model (cost_layout_check)");
	layout_name(lay, sizeof(lay), tp, ep, dp, 1);
	obs->ec = *base;
	obs->ec.model = m;
	obs->ec.gpu = g;
	obs->ec.tp = tp;
	obs->ec.ep = ep;
	obs->ec.dp_attention = dp;
	obs->ec.weight_dtype = wdt;
	obs->ec.n_instances = 1;
	obs->ec.policy = o->policy ? o->policy : "vllm";
	obs->wl = wl;
	if (pd && run->concurrency < 1)
		return skip(err, file, run, "no client concurrency recorded (a disaggregated row "
			    "without silicon_concurrency)");
	if (pd) {
		/* the row's own pools, whatever --prefill-instances and the
		 * like gave every run (those are for results that do not say) */
		rc = disagg_pools(run, file, m, obs, lay, sizeof(lay), err);
		if (rc)
			return rc;
	}
	/* the tables added for issue 31 mix GPUs, precisions and (GPUStack)
	 * engines in one file: their names say which (the weight dtype; a
	 * 16-bit catalog entry's as bf16) */
	const char *dt = wdt != SS_DTYPE_MODEL ? ss_dtype_name(wdt) :
			 m->dtype_bytes == 2 ? "bf16" : "model";

	if (run->format == SERVING_GPUSTACK)
		snprintf(name, name_len, "%s:%ld %s %s %s %s %s %s%d x %d+%d%s", base_name, run->line,
			 m->name, g->name, dt, lay, run->engine, run->load == SERVING_LOAD_CLOSED ? "c" : "burst",
			 (int)(run->load == SERVING_LOAD_CLOSED ? run->concurrency : run->num_prompts),
			 (int)run->isl, (int)run->osl, run->mean_lengths ? " (means)" : "");
	else if (run->format == SERVING_NIM || run->format == SERVING_TRTLLM_STATIC)
		snprintf(name, name_len, "%s:%ld %s %s %s %s %s%d x %d+%d", base_name, run->line,
			 m->name, g->name, dt, lay, run->load == SERVING_LOAD_STATIC ? "b" : "c", (int)run->concurrency,
			 (int)run->isl, (int)run->osl);
	else if (run->load == SERVING_LOAD_STATIC || !serving_format_per_request(run->format))
		snprintf(name, name_len, "%s:%ld %s %s %s%d x %d+%d", base_name, run->line, m->name,
			 lay, run->load == SERVING_LOAD_STATIC ? "b" : "c", (int)run->concurrency,
			 (int)run->isl, (int)run->osl);
	else
		snprintf(name, name_len, "%s %s %s %s", base_name, m->name, lay, run->label);
	switch (o->group_by) {
	case EFIT_GROUP_RUN:   snprintf(group, group_len, "%s:%ld", file, run->line); break;
	case EFIT_GROUP_FILE:  snprintf(group, group_len, "%s", file); break;   /* the path: results share base names */
	case EFIT_GROUP_MODEL: snprintf(group, group_len, "%s", m->name); break;
	case EFIT_GROUP_GPU:   snprintf(group, group_len, "%s", g->name); break;
	case EFIT_GROUP_TP:    snprintf(group, group_len, "%s", lay); break;
	case EFIT_GROUP_MODEL_TP: snprintf(group, group_len, "%s %s", m->name, lay); break;
	case EFIT_GROUP_ISL:   snprintf(group, group_len, "isl%d", (int)run->isl); break;
	case EFIT_GROUP_SOURCE: snprintf(group, group_len, "%s", file); break;   /* the caller's */
	}
	obs->name = name;
	obs->group = group;
	obs->engine = run->engine;
	obs->launch = run->launch[0] ? run->launch : NULL;

	/* the tables added for issue 31 hold deployments whose weights
	 * servesim may price above the GPUs' memory (gpt-oss at its
	 * catalog dtype, not the MXFP4 it was served in): skipped with the
	 * reason, as an engine error would end the whole command (the
	 * formats fitted before keep their behaviour) */
	if (run->format == SERVING_GPUSTACK || run->format == SERVING_NIM ||
	    run->format == SERVING_TRTLLM_STATIC) {
		int32_t blocks = 0;

		if (engine_kv_capacity(&obs->ec, &blocks, NULL) == -EINVAL)
			return skip(err, file, run, "its weights do not fit the GPUs' memory "
				    "(servesim's KV rule, engine_kv_capacity)");
	}
	if (run->format == SERVING_GPUSTACK) {
		if (gpustack_obs(run, obs, wl))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
	} else switch (run->load) {
	case SERVING_LOAD_STATIC:
		if (run->concurrency < 1 || run->isl < 1 || run->osl < 1)
			return skip(err, file, run, "a static batch without batch size and lengths");
		{
			/* a batch the simulated KV cache cannot hold at once would be
			 * served in parts: not the measured configuration */
			int32_t blocks = 0;
			int64_t bs = engine_block_size(&obs->ec);
			int64_t per = ((int64_t)run->isl + run->osl + bs - 1) / bs;

			if (engine_kv_capacity(&obs->ec, &blocks, err) == 0 &&
			    per * run->concurrency > blocks)
				return skip(err, file, run, "the batch does not fit the simulated KV cache");
		}
		if (fixed_requests(wl, (size_t)run->concurrency, run->isl, run->osl))
			return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
		/* the policy string lives in the caller's name buffer's tail:
		 * obs keeps pointers, so it must outlive obs */
		{
			size_t used = strlen(name) + 1;
			char *pol = name + used;

			if (used + 64 > name_len)
				return ss_error_set(err, -EINVAL, NULL, 0, "name buffer too small");
			snprintf(pol, name_len - used, "static:max_batch=%d,max_len=%d",
				 (int)run->concurrency, (int)(run->isl + run->osl));
			obs->ec.policy = pol;
		}
		add_target(obs, EFIT_TTFT_MEAN, run->prompt_ns > 0 ? (double)run->prompt_ns / 1e6 : NAN);
		add_target(obs, EFIT_TPOT_MEAN, run->token_ns > 0 ? (double)run->token_ns / 1e6 : NAN);
		/* the whole batch's latency, reported (TensorRT-LLM's table;
		 * Splitwise's e2e_time is left as its fits have it) */
		if (run->format == SERVING_TRTLLM_STATIC)
			add_report(obs, EFIT_E2E_MEAN, agg_ms(run->e2e_ns));
		break;
	case SERVING_LOAD_CLOSED:
		if (!serving_format_per_request(run->format)) {
			size_t n = (size_t)((EFIT_CLOSED_WARMUP_PER_CLIENT +
					     EFIT_CLOSED_REQUESTS_PER_CLIENT) * run->concurrency);

			if (run->concurrency < 1 || run->isl < 1 || run->osl < 1)
				return skip(err, file, run, "a closed loop without concurrency and lengths");
			if (fixed_requests(wl, n, run->isl, run->osl))
				return ss_error_set(err, -ENOMEM, NULL, 0, "out of memory");
			obs->ec.concurrency = (uint32_t)run->concurrency;
			obs->warmup = (uint32_t)(EFIT_CLOSED_WARMUP_PER_CLIENT * run->concurrency);
			obs->spread = !o->closed_burst;
			obs->drained = o->closed_drained ? EFIT_CLOSED_REQUESTS_PER_CLIENT : 0;
			add_target(obs, EFIT_TTFT_MEAN, run->mean_ttft_ns > 0 ?
				   (double)run->mean_ttft_ns / 1e6 : NAN);
			add_target(obs, EFIT_TPOT_MEAN, run->mean_tpot_ns > 0 ?
				   (double)run->mean_tpot_ns / 1e6 : NAN);
			/* what else the table gives (NIM: p95 and request
			 * latency), over the same measured requests */
			add_report(obs, EFIT_TTFT_P95, agg_ms(run->p95_ttft_ns));
			add_report(obs, EFIT_TPOT_P95, agg_ms(run->p95_tpot_ns));
			add_report(obs, EFIT_E2E_MEAN, agg_ms(run->mean_e2e_ns));
			add_report(obs, EFIT_E2E_P95, agg_ms(run->p95_e2e_ns));
			break;
		}
		rc = per_request(run, obs, wl, file, err);
		if (rc)
			return rc;
		if (run->concurrency > 0)
			obs->ec.concurrency = (uint32_t)run->concurrency;
		break;
	default:
		if (!serving_format_per_request(run->format))
			return skip(err, file, run, "an aggregate row without a static batch or closed loop");
		rc = per_request(run, obs, wl, file, err);
		if (rc)
			return rc;
		break;
	}
	/* a figure to fit, not only reported ones (a burst without TPOT) */
	{
		int fitted = 0;

		for (int k = 0; k < obs->n_targets; k++)
			fitted += !obs->targets[k].report;
		if (!fitted)
			return skip(err, file, run, "no measured figure to fit");
	}
	if (!o->reported) {
		int n = 0;

		for (int k = 0; k < obs->n_targets; k++)
			if (!obs->targets[k].report)
				obs->targets[n++] = obs->targets[k];
		obs->n_targets = n;
	}
	if (pd)
		return disagg_policies(run, o, obs, name, name_len, err);
	seqs = 0;
	tokens = 0;
	/* The launch's limits are per scheduler, i.e. per attention rank
	 * (each rank of --dp-attention D runs the policy on its own batch):
	 * the C clients over D ranks give each ceil(C / D) (aiconfigurator's
	 * batch_size, the per-rank max_batch_size of its benchmark launch). */
	if (run->load == SERVING_LOAD_CLOSED && run->concurrency > 0) {
		int64_t c = (run->concurrency + dp - 1) / dp;

		if (o->closed_seqs_set)
			seqs = c - o->closed_seqs_short > 1 ? c - o->closed_seqs_short : 1;
		if (o->closed_tokens_set && run->isl > 0 && !serving_format_per_request(run->format))
			tokens = c + run->isl + o->closed_tokens_extra;
	}
	return engine_settings(run, seqs, tokens, obs, name, name_len, err);
}
