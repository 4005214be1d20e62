/* servesim list — what the catalogs and registries hold. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "backend.h"
#include "cli.h"
#include "costmodel.h"
#include "options.h"
#include "policy.h"
#include "workload.h"

/* Width of a name column: the longest name, at least 16, so that the
 * columns after it line up for every catalog entry. */
static int name_width(const char *first, size_t stride, size_t n)
{
	int w = 16;

	for (size_t i = 0; i < n; i++) {
		int len = (int)strlen(first + i * stride);

		if (len > w)
			w = len;
	}
	return w;
}

/* --json: each topic's rows as an array of objects, one per text line,
 * keyed by the text's columns with their units in the key names; NULL
 * for the text table. */
static void add(json_t *arr, json_t *row)
{
	json_array_append_new(arr, row);
}

static json_t *opt_real(double v)
{
	return v > 0 ? json_real(v) : json_null();
}

static int list_models(const struct catalog *c, json_t *arr)
{
	int w = c->n_models ? name_width(c->models[0].name, sizeof(c->models[0]), c->n_models) : 16;

	/* experts: routed/active[+shared] ("-" dense); attn: mha, gqa, mqa or
	 * mla, +swa (sliding window) or +chunk, +sinks (docs/catalogs.md) */
	if (!arr)
		printf("%-*s %7s %6s %6s %5s %3s %7s %8s %9s %13s  %s\n", w, "name", "params", "layers",
		       "hidden", "heads", "kv", "ffn", "context", "experts", "attn", "source");
	for (size_t i = 0; i < c->n_models; i++) {
		const struct model_spec *m = &c->models[i];
		char experts[32] = "-", attn[32];

		if (m->n_experts > 0)
			snprintf(experts, sizeof(experts), m->n_shared_experts ? "%d/%d+%d" : "%d/%d",
				 m->n_experts, m->experts_per_token, m->n_shared_experts);
		model_attn_label(m, attn, sizeof(attn));
		if (arr) {
			add(arr, json_pack("{s:s, s:f, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s}",
					   "name", m->name, "params_b", model_params(m) / 1e9,
					   "layers", m->n_layers, "hidden", m->hidden, "heads", m->n_heads,
					   "kv_heads", m->n_kv_heads, "ffn", m->intermediate,
					   "context", m->max_context, "experts", m->n_experts,
					   "experts_per_token", m->experts_per_token,
					   "shared_experts", m->n_shared_experts, "attn", attn,
					   "source", m->hf_id));
			continue;
		}
		printf("%-*s %6.1fB %6d %6d %5d %3d %7d %8d %9s %13s  %s\n", w, m->name,
		       model_params(m) / 1e9, m->n_layers, m->hidden, m->n_heads, m->n_kv_heads,
		       m->intermediate, m->max_context, experts, attn, m->hf_id);
	}
	return SS_EXIT_OK;
}

/* Memory in GiB, as nvidia-smi and the cards' names count it (80 GiB is
 * the "80GB" of an A100-SXM4-80GB). */
static int list_gpus(const struct catalog *c, json_t *arr)
{
	int w = c->n_gpus ? name_width(c->gpus[0].name, sizeof(c->gpus[0]), c->n_gpus) : 16;

	if (!arr)
		printf("%-*s %12s %8s %10s %11s %9s %6s %6s %7s %8s %8s\n", w, "name", "bf16 TFLOP/s",
		       "HBM GiB", "HBM TB/s", "NVLink GB/s", "PCIe GB/s", "TDP W", "idle W", "$/GPU-h",
		       "fp8 TF/s", "fp4 TF/s");
	for (size_t i = 0; i < c->n_gpus; i++) {
		const struct gpu_spec *g = &c->gpus[i];

		char f8[32] = "-", f4[32] = "-";   /* "-": no such tensor cores */

		if (g->fp8_flops > 0)
			snprintf(f8, sizeof(f8), "%.1f", g->fp8_flops / 1e12);
		if (g->fp4_flops > 0)
			snprintf(f4, sizeof(f4), "%.1f", g->fp4_flops / 1e12);
		if (arr) {
			add(arr, json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:o, s:o}",
					   "name", g->name, "bf16_tflops", g->bf16_flops / 1e12,
					   "hbm_gib", g->hbm_bytes / 1073741824.0,
					   "hbm_tbps", g->hbm_bw / 1e12, "nvlink_gbps", g->nvlink_bw / 1e9,
					   "pcie_gbps", g->pcie_bw / 1e9, "tdp_w", g->tdp_w,
					   "idle_w", g->idle_w,
					   "usd_per_gpu_hour", opt_real(g->cost_per_hour),
					   "fp8_tflops", opt_real(g->fp8_flops / 1e12),
					   "fp4_tflops", opt_real(g->fp4_flops / 1e12)));
			continue;
		}
		printf("%-*s %12.1f %8.1f %10.2f %11.0f %9.0f %6.0f %6.0f %7.2f %8s %8s\n", w, g->name,
		       g->bf16_flops / 1e12, g->hbm_bytes / 1073741824.0, g->hbm_bw / 1e12,
		       g->nvlink_bw / 1e9, g->pcie_bw / 1e9, g->tdp_w, g->idle_w,
		       g->cost_per_hour, f8, f4);
	}
	return SS_EXIT_OK;
}

/* Every registered policy, straight from the registry: a policy's name,
 * description and parameter summary live in its own ops table only. */
static int list_policies(json_t *arr)
{
	size_t n = policy_list(NULL, 0);
	struct policy_info *info = calloc(n ? n : 1, sizeof(*info));

	if (!info) {
		cli_errorf("list policies: out of memory");
		return SS_EXIT_FAILURE;
	}
	policy_list(info, n);
	for (size_t i = 0; arr && i < n; i++)
		add(arr, json_pack("{s:s, s:s, s:s, s:s, s:s}", "kind", info[i].kind_name,
				   "option", info[i].option, "name", info[i].name,
				   "description", info[i].description, "params", info[i].params));
	if (!arr)
		printf("%-9s %-11s %-10s %s\n", "kind", "option", "name",
		       "description; parameters with their defaults in parentheses");
	for (size_t i = 0; !arr && i < n; i++) {
		printf("%-9s %-11s %-10s %s\n", info[i].kind_name, info[i].option, info[i].name,
		       info[i].description);
		if (*info[i].params)
			printf("%-9s %-11s %-10s %s\n", "", "", "", info[i].params);
	}
	free(info);
	return SS_EXIT_OK;
}

static int list_cost_models(json_t *arr)
{
	size_t n;
	const struct cost_model_ops *const *cm = cost_model_registry(&n);

	for (size_t i = 0; arr && i < n; i++)
		add(arr, json_pack("{s:s, s:s}", "name", cm[i]->name, "description", cm[i]->description));
	if (arr)
		return SS_EXIT_OK;
	printf("%-10s %s\n", "name", "description");
	for (size_t i = 0; i < n; i++)
		printf("%-10s %s\n", cm[i]->name, cm[i]->description);
	return SS_EXIT_OK;
}

static int list_formats(json_t *arr)
{
	const struct trace_format_info *f;
	int w = 4;      /* the widest name sets the column */

	for (size_t i = 0; arr && (f = trace_format_at(i)); i++)
		add(arr, json_pack("{s:s, s:s}", "name", f->name, "description", f->description));
	if (arr)
		return SS_EXIT_OK;
	for (size_t i = 0; (f = trace_format_at(i)); i++)
		if ((int)strlen(f->name) > w)
			w = (int)strlen(f->name);
	printf("%-*s %s\n", w, "name", "description");
	for (size_t i = 0; (f = trace_format_at(i)); i++)
		printf("%-*s %s\n", w, f->name, f->description);
	return SS_EXIT_OK;
}

/* Every kernel backend (`live --backend`, `calibrate run --backend`): built
 * in, or the module file a run would load (looked for as a run does, next
 * to this binary, then in the installed module directory; nothing is
 * loaded), or that module's absence. */
static int list_backends(json_t *arr)
{
	size_t n = kernel_backend_list(NULL, 0);
	struct kernel_backend_info *info = calloc(n ? n : 1, sizeof(*info));

	if (!info) {
		cli_errorf("list backends: out of memory");
		return SS_EXIT_FAILURE;
	}
	kernel_backend_list(info, n);
	if (!arr)
		printf("%-5s %-55s %s\n", "name", "where", "description");
	for (size_t i = 0; i < n; i++) {
		char where[4096 + 32];

		if (!info[i].module) {
			snprintf(where, sizeof(where), "built in");
		} else if (kernel_backend_module_path(info[i].name, cli_module_dir(), where,
						      sizeof(where), NULL) != 0) {
			snprintf(where, sizeof(where), "not installed (module %s)", info[i].module);
		}
		if (arr)
			add(arr, json_pack("{s:s, s:s, s:s?, s:b, s:s}", "name", info[i].name,
					   "where", where, "module", info[i].module,
					   "available", strncmp(where, "not installed", 13) != 0,
					   "description", info[i].description));
		else
			printf("%-5s %-55s %s\n", info[i].name, where, info[i].description);
	}
	free(info);
	return SS_EXIT_OK;
}

/* One engine profile per line, name first, then the versions it stands
 * for and its main terms (docs/engines.md has every parameter); --json:
 * every key of each profile (engine_profile_fields) and the line's sums. */
static int list_engines(const struct catalog *c, json_t *arr)
{
	if (arr)
		add(arr, json_pack("{s:s, s:s}", "name", "none", "description",
				   "kernels only: no engine host time, launches or serving stack"));
	else
		printf("%-15s %s\n", "none", "kernels only: no engine host time, launches or serving stack");
	for (size_t i = 0; i < c->n_engines; i++) {
		const struct engine_profile *p = &c->engines[i];

		char dispatch[64] = "", kv[96] = "", api[96];

		if (p->dispatch_us_per_worker > 0)
			snprintf(dispatch, sizeof(dispatch), " + %.0f us/TP worker",
				 p->dispatch_us_per_worker);
		/* only a profile that sets its own KV rule says so */
		if (p->kv_memory == ENGINE_KV_FREE || p->kv_fraction > 0 || p->kv_block_size > 0)
			snprintf(kv, sizeof(kv), ", KV %g of %s memory in blocks of %d",
				 p->kv_fraction > 0 ? p->kv_fraction : ENGINE_KV_FRACTION_DEFAULT,
				 p->kv_memory == ENGINE_KV_FREE ? "free" : "total",
				 p->kv_block_size > 0 ? (int)p->kv_block_size : ENGINE_BLOCK_SIZE_DEFAULT);
		if (arr) {
			/* the profile as engines.json holds it (every key, those
			 * at their absent value too), then the line's sums */
			json_t *e = catalog_entry_json(engine_profile_fields, engine_profile_n_fields,
						       p, CATALOG_JSON_EVERY);

			if (e && json_object_update_new(e, json_pack("{s:f, s:f, s:b, s:b}",
					"step_host_us", p->sched_us + p->prep_us + p->output_us,
					"step_host_us_per_seq", p->sched_us_per_seq + p->output_us_per_seq,
					"cuda_graphs", p->n_graph_sizes > 0,
					"default", !strcmp(p->name, CLI_DEFAULT_ENGINE)))) {
				json_decref(e);
				e = NULL;
			}
			add(arr, e);
			continue;
		}
		if (p->stack[0])
			snprintf(api, sizeof(api), "stack %s", p->stack);
		else if (engine_profile_legacy_stack(p))
			snprintf(api, sizeof(api), "API %.1f + %.1f ms", p->api_in_ms, p->api_out_ms);
		else
			snprintf(api, sizeof(api), "no serving stack");
		printf("%-15s %s; step host %.0f us + %.1f us/seq%s, %s, %s all-reduce (floor %.0f us),"
		       " %s%s%s%s\n",
		       p->name, p->versions, p->sched_us + p->prep_us + p->output_us,
		       p->sched_us_per_seq + p->output_us_per_seq, dispatch,
		       p->n_graph_sizes ? "CUDA graphs" : "eager",
		       p->allreduce == ENGINE_AR_NCCL ? "NCCL" : "custom", p->allreduce_floor_us,
		       api, kv,
		       p->kv_load == ENGINE_KV_LOAD_LAYERWISE ? ", offloaded KV loaded layer by layer" : "",
		       strcmp(p->name, CLI_DEFAULT_ENGINE) ? "" : " (default of run and plan)");
	}
	return SS_EXIT_OK;
}

/* One serving stack per line (stack-profile.h): name, its way in and
 * out, its spread and what it stands for; --json: every key of each
 * (stack_profile_fields). */
static int list_stacks(const struct catalog *c, json_t *arr)
{
	for (size_t i = 0; i < c->n_stacks; i++) {
		const struct stack_profile *s = &c->stacks[i];

		if (arr) {
			add(arr, catalog_entry_json(stack_profile_fields, stack_profile_n_fields, s,
						    CATALOG_JSON_EVERY));
			continue;
		}
		printf("%-15s in %g ms + %g us/prompt token, out %g ms/token, cv %g; %s\n", s->name,
		       s->in_ms, s->tokenize_us_per_token, s->out_ms, s->cv, s->describes);
	}
	return SS_EXIT_OK;
}

/* One speculative-decoding acceptance entry per line (spec-accept.h):
 * name, method, its parameters, AL at k = 1, 3 and 8 and what it was
 * measured on; --json: every key of each (spec_accept_fields). */
static int list_acceptance(const struct catalog *c, json_t *arr)
{
	for (size_t i = 0; i < c->n_acceptance; i++) {
		const struct spec_accept *a = &c->acceptance[i];

		if (arr) {
			add(arr, catalog_entry_json(spec_accept_fields, spec_accept_n_fields, a,
						    CATALOG_JSON_EVERY));
			continue;
		}
		printf("%-62s %-6s alpha %.4f decay %.4f, AL %.2f/%.2f/%.2f at k=1/3/8; %s on %s\n",
		       a->name, a->method, a->alpha, a->decay, spec_accept_length(a, 1),
		       spec_accept_length(a, 3), spec_accept_length(a, 8),
		       a->target[0] ? a->target : "any target", a->dataset[0] ? a->dataset : "any dataset");
	}
	return SS_EXIT_OK;
}

int cmd_list(int argc, char **argv)
{
	static const char *const topics[] = { "models", "gpus", "engines", "stacks", "acceptance",
					      "policies", "cost-models", "formats", "backends", NULL };
	struct ss_error err = { 0 };
	struct catalog cat;
	const char *topic = NULL;
	bool json = false, quiet = false;
	json_t *arr = NULL;
	int rc, k = -1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: servesim list models|gpus|engines|stacks|acceptance|policies|cost-models|formats|backends"
			       " [--json] [-q] [-v]\n");
			return SS_EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
			quiet = true;
		} else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
			cli_verbose = 1;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			cli_errorf("unknown option '%s' (see `servesim list --help`)", argv[i]);
			return SS_EXIT_USAGE;
		} else if (topic) {
			cli_errorf("list: expected one topic, got '%s' and '%s'", topic, argv[i]);
			return SS_EXIT_USAGE;
		} else {
			topic = argv[i];
		}
	}
	for (int i = 0; topic && topics[i]; i++)
		if (!strcmp(topic, topics[i]))
			k = i;
	if (quiet && cli_verbose) {
		cli_errorf("-q and -v: expected one of them (--quiet prints nothing, --verbose more)");
		return SS_EXIT_USAGE;
	}
	if (k < 0) {
		cli_errorf("list: expected models, gpus, engines, stacks, acceptance, policies, cost-models, formats or backends, got '%s'",
			   topic ? topic : "");
		return SS_EXIT_USAGE;
	}
	/* -q: the exit status alone (the catalogs load, the topic exists) */
	if (json && !(arr = json_array())) {
		cli_errorf("list: out of memory");
		return SS_EXIT_FAILURE;
	}
	catalog_init(&cat);
	if (k <= 4 && cli_load_catalog(&cat, NULL, NULL, NULL, &err)) {
		cli_error(&err);
		catalog_release(&cat);
		json_decref(arr);
		return SS_EXIT_FAILURE;
	}
	if (quiet)
		rc = SS_EXIT_OK;
	else if (k == 0)
		rc = list_models(&cat, arr);
	else if (k == 1)
		rc = list_gpus(&cat, arr);
	else if (k == 2)
		rc = list_engines(&cat, arr);
	else if (k == 3)
		rc = list_stacks(&cat, arr);
	else if (k == 4)
		rc = list_acceptance(&cat, arr);
	else if (k == 5)
		rc = list_policies(arr);
	else if (k == 6)
		rc = list_cost_models(arr);
	else if (k == 7)
		rc = list_formats(arr);
	else
		rc = list_backends(arr);
	if (!rc && arr && !quiet &&
	    (json_dumpf(arr, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) || puts("") == EOF)) {
		cli_errorf("list: cannot write to standard output");
		rc = SS_EXIT_FAILURE;
	}
	json_decref(arr);
	catalog_release(&cat);
	return rc;
}
