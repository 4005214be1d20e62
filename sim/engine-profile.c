/* servesim — engine profiles: composing a step from its kernels and the
 * engine's host work (engine-profile.h, docs/engines.md).
 *
 * The step's timeline, for one instance:
 *
 *   host:  [sched + prep][launch ...........]          [output]
 *   GPU:                 [kernels ..............][AR floor]
 *
 * Scheduling and input preparation run before the first kernel can start.
 * An eager step's kernels are launched one by one, so its GPU work ends no
 * earlier than the launches (launch_us + n_layers x launch_us_per_layer)
 * less the part of them the GPU's own work hid (launch_overlap of its
 * kernel time): a GPU faster than the host waits (a launch stall).  A
 * graph replay is one launch.  Output processing follows the step; with
 * async output it overlaps the next step's GPU work, so only what exceeds
 * that work is on the critical path (steady state: the next step is like
 * this one).  Everything the host adds is charged at the instance's
 * gap power (GPUs waiting).
 */
#include "engine-profile.h"
#include "catalog-field.h"
#include "costmodel.h"
#include "sstime.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

int32_t engine_profile_graph_size(const struct engine_profile *p, uint32_t n)
{
	for (int32_t i = 0; i < p->n_graph_sizes; i++)
		if ((uint32_t)p->graph_sizes[i] >= n)
			return p->graph_sizes[i];
	return 0;
}

/* engine_profile_graphed, inline in engine_profile_step_part (a global
 * function is not inlined in a position-independent build). */
static inline bool graphed(const struct engine_profile *p, uint32_t n_items, uint32_t n_prefill,
			   int64_t total_tokens)
{
	int32_t max;

	if (!p->n_graph_sizes)
		return false;
	max = p->graph_sizes[p->n_graph_sizes - 1];
	if (n_prefill == 0 && total_tokens == (int64_t)n_items)
		return n_items <= (uint32_t)max;
	return p->graph_mixed && total_tokens <= max;
}

bool engine_profile_graphed(const struct engine_profile *p, uint32_t n_items, uint32_t n_prefill,
			    int64_t total_tokens)
{
	return graphed(p, n_items, n_prefill, total_tokens);
}

/* us -> ns, as a double (the sum is checked once at the end) */
#define US 1e3

int engine_profile_step(const struct engine_profile *p, const struct engine_step_ctx *ctx,
			uint32_t n_items, uint32_t n_prefill, uint32_t n_emit, int64_t total_tokens,
			struct cost_result *r, struct ss_error *err)
{
	return engine_profile_step_part(p, ctx, n_items, n_prefill, total_tokens, 0, n_emit, r, err);
}

/* A multi-step burst (scheduler_steps k > 1: vLLM 0.6's multi-step
 * scheduling) is k steps of the decision's batch:
 *
 *   host:  [sched + prep][launch]   [launch]  ...  [launch]           [output of k tokens]
 *   GPU:                 [kernels]  [kernels] ...  [kernels][AR floor]
 *
 * the scheduler and input preparation run once, before the first step
 * (vLLM advances the inputs of the next steps on the GPU); each step is
 * launched (graph replay or eager launches, with its stall); sampled
 * tokens are processed once, after the last step, for every sequence and
 * step (output_us once, output_us_per_seq per token). */
int engine_profile_step_part(const struct engine_profile *p, const struct engine_step_ctx *ctx,
			     uint32_t n_items, uint32_t n_prefill, int64_t total_tokens,
			     unsigned part, uint32_t n_out,
			     struct cost_result *r, struct ss_error *err)
{
	double tok = (double)total_tokens;
	double kernels, ar_extra = 0.0, stall = 0.0, serial, out, tail, host, added;
	int64_t host_ns, ar_ns, total = 0;

	/* the backend's own host estimate is replaced by the profile's */
	kernels = (double)(r->duration_ns - r->op_ns[COST_OP_HOST]);
	added = -(double)r->op_ns[COST_OP_HOST];
	if (ctx->tp > 1 && p->allreduce_floor_us > 0.0) {
		double floor = 2.0 * ctx->n_layers * p->allreduce_floor_us * US;

		if ((double)r->op_ns[COST_OP_ALLREDUCE] < floor)
			ar_extra = floor - (double)r->op_ns[COST_OP_ALLREDUCE];
	}
	serial = 0.0;
	if (!(part & ENGINE_PART_NO_SCHED)) {
		serial = p->sched_us + p->sched_us_per_seq * n_items + p->sched_us_per_token * tok +
			 p->prep_us + p->prep_us_per_layer * ctx->n_layers + p->prep_us_per_token * tok;
		serial *= US;
	}
	if (ctx->tp > 1)
		serial += p->dispatch_us_per_worker * ctx->tp * US;
	if (graphed(p, n_items, n_prefill, total_tokens)) {
		serial += p->graph_launch_us * US;
	} else {
		double launch = (p->launch_us + ctx->n_layers * p->launch_us_per_layer) * US;
		double hidden = (p->launch_overlap > 0.0 ? p->launch_overlap : 1.0) *
				(kernels + ar_extra);

		if (launch > hidden)
			stall = launch - hidden;
	}
	out = part & ENGINE_PART_NO_OUTPUT ? 0.0 : (p->output_us + p->output_us_per_seq * n_out) * US;
	tail = out;
	if (p->async_output)
		tail = out > kernels + ar_extra + stall ? out - (kernels + ar_extra + stall) : 0.0;
	host = serial + stall + tail;

	if (!cost_ns_fits(host) || !cost_ns_fits((double)r->op_ns[COST_OP_ALLREDUCE] + ar_extra))
		return ss_error_set(err, -ERANGE, NULL, 0,
				    "engine %s: a step of %u request%s would take %g s of host time,"
				    " not a duration (are its parameters far outside physical range?)",
				    p->name, n_items, n_items == 1 ? "" : "s", host * 1e-9);
	host_ns = cost_ns_round(host);
	ar_ns = r->op_ns[COST_OP_ALLREDUCE] + cost_ns_round(ar_extra);
	r->op_ns[COST_OP_ALLREDUCE] = ar_ns;
	r->op_ns[COST_OP_HOST] = host_ns;
	for (int op = 0; op < COST_OP_COUNT; op++)
		if (!ss_time_add(total, r->op_ns[op], &total))
			return ss_error_set(err, -ERANGE, NULL, 0,
					    "engine %s: a step of %u request%s does not fit in"
					    " int64 nanoseconds", p->name, n_items,
					    n_items == 1 ? "" : "s");
	added += (double)host_ns + (double)cost_ns_round(ar_extra);
	r->duration_ns = total > 0 ? total : 1;
	r->energy_j += ctx->gap_power_w * added * 1e-9;
	if (r->energy_j < 0.0)
		r->energy_j = 0.0;
	return 0;
}

int64_t engine_kv_load_added_ns(int kv_load, int n_layers, int64_t step_ns, int64_t lat_ns,
				int64_t xfer_ns)
{
	double s = (double)step_ns, a = (double)lat_ns, x = (double)xfer_ns, l, end;

	if (kv_load != ENGINE_KV_LOAD_LAYERWISE || n_layers < 1)
		return ss_time_add_sat(lat_ns, xfer_ns);
	/* layer i (1..L) starts at the later of the previous layer's end and
	 * its KV's arrival, a + x i / L; with layers alike (s / L each) the
	 * last ends at max over i of a + x i / L + s (L - i + 1) / L, linear
	 * in i, so at i = 1 or i = L */
	l = (double)n_layers;
	end = s + a + x / l;
	if (a + x + s / l > end)
		end = a + x + s / l;
	return end - s >= 9.2e18 ? INT64_MAX : (int64_t)(end - s);
}

/* ---- the profile's keys, declared once ------------------------------------ */

static const char *const allreduce_names[] = { "custom", "nccl", NULL };
static const char *const kv_memory_names[] = { "total", "free", NULL };
static const char *const kv_load_names[] = { "blocking", "layerwise", NULL };

_Static_assert(sizeof(enum engine_allreduce) == sizeof(int), "enum stored as int");
_Static_assert(sizeof(enum engine_kv_memory) == sizeof(int), "enum stored as int");
_Static_assert(sizeof(enum engine_kv_load) == sizeof(int), "enum stored as int");

#define ES(f) offsetof(struct engine_profile, f)
#define STR(k, f, h) .key = k, .kind = CF_STR, .off = ES(f), \
	.size = sizeof(((struct engine_profile *)0)->f), .help = h
/* a host time a step or request pays, us or ms: fittable, always described */
#define TIME(k, f, h_, u, h) .key = k, .kind = CF_NONNEG, .off = ES(f), .optional = true, \
	.lo = 1e-6, .hi = h_, .unit = u, .fit = true, .show = CF_SHOW_ALWAYS, .help = h
#define OPT(k, kd, f) .key = k, .kind = kd, .off = ES(f), .optional = true

/* Every parameter is optional (absent = 0: the engine adds nothing
 * there); the plausible ranges keep a step's time well inside int64 ns.
 * The order is the description's (engine_profile_describe: what a plan's
 * fingerprint and summary.json's engine line hold, so a new key goes
 * where it leaves them as they were: at the end, shown only when set). */
const struct catalog_field engine_profile_fields[] = {
	{ STR("name", name, "catalog name") },
	{ STR("versions", versions, "the engine versions the profile stands for") },
	{ STR("policy", policy, "the engine's batching rules as a batch-policy spec (absent: the default policy)"),
	  .optional = true, .show = CF_SHOW_ALWAYS, .empty_as = "-" },
	{ TIME("sched_us", sched_us, 1e6, "us", "scheduling per step") },
	{ TIME("sched_us_per_seq", sched_us_per_seq, 1e4, "us", "scheduling per sequence in the step") },
	{ TIME("sched_us_per_token", sched_us_per_token, 1e3, "us", "scheduling per token scheduled") },
	{ TIME("prep_us", prep_us, 1e6, "us", "input preparation per step") },
	{ TIME("prep_us_per_token", prep_us_per_token, 1e3, "us", "input preparation per token") },
	{ TIME("output_us", output_us, 1e6, "us", "output processing per step") },
	{ TIME("output_us_per_seq", output_us_per_seq, 1e4, "us", "output processing per sequence that emits a token") },
	{ OPT("async_output", CF_BOOL, async_output), .show = CF_SHOW_ALWAYS,
	  .help = "output processing overlaps the next step's GPU work" },
	{ TIME("launch_us", launch_us, 1e6, "us", "launch floor of an eager step") },
	{ TIME("launch_us_per_layer", launch_us_per_layer, 1e5, "us", "launch floor of an eager step per layer") },
	{ OPT("launch_overlap", CF_NONNEG, launch_overlap), .lo = 1e-6, .hi = 1, .unit = "",
	  .fit = true, .show = CF_SHOW_ALWAYS,
	  .help = "share of the kernels' time that hides launches, 0..1 (absent: 1)" },
	{ TIME("graph_launch_us", graph_launch_us, 1e5, "us", "launch of a CUDA graph replay") },
	{ OPT("graph_mixed", CF_BOOL, graph_mixed), .show = CF_SHOW_ALWAYS,
	  .help = "steps with prefill tokens run as graphs too (piecewise graphs)" },
	{ OPT("allreduce", CF_ENUM, allreduce), .names = allreduce_names, .show = CF_SHOW_ALWAYS,
	  .help = "tensor-parallel all-reduce: custom or nccl" },
	{ TIME("allreduce_floor_us", allreduce_floor_us, 1e5, "us", "latency floor of one all-reduce call") },
	/* the legacy serving stack (now the stack's own schema: stack-profile.h) */
	{ TIME("api_in_ms", api_in_ms, 1e6, "ms", "legacy serving stack, API arrival to the engine's queue (mean; now a stack's frontend_ms)") },
	{ TIME("api_out_ms", api_out_ms, 1e6, "ms", "legacy serving stack, the engine's token to the client (mean; now a stack's detok_us_per_token)") },
	{ OPT("api_cv", CF_NONNEG, api_cv), .lo = 1e-6, .hi = 10, .unit = "", .fit = true,
	  .show = CF_SHOW_ALWAYS, .help = "legacy serving stack, coefficient of variation (now a stack's cv)" },
	{ OPT("graph_sizes", CF_INTS, graph_sizes), .size = ENGINE_GRAPH_SIZES_MAX,
	  .count_off = ES(n_graph_sizes), .min = 1, .max = 1 << 20, .show = CF_SHOW_ALWAYS,
	  .help = "batch sizes captured as CUDA graphs, ascending" },
	/* the keys below are described only when set */
	{ OPT("scheduler_steps", CF_INT, scheduler_steps), .min = 1, .max = 1024,
	  .show = CF_SHOW_SET, .quiet = 1,
	  .help = "decode steps per scheduling decision (multi-step scheduling; absent: 1)" },
	{ OPT("dispatch_us_per_worker", CF_NONNEG, dispatch_us_per_worker), .lo = 1e-6, .hi = 1e5,
	  .unit = "us", .fit = true, .show = CF_SHOW_SET,
	  .help = "host time per tensor-parallel worker process per step, us" },
	{ OPT("kv_memory", CF_ENUM, kv_memory), .names = kv_memory_names,
	  .show = CF_SHOW_SET, .group = 1, .lead = true,
	  .help = "KV cache sizing rule: total (vLLM) or free (TensorRT-LLM)" },
	{ OPT("kv_fraction", CF_POS, kv_fraction), .lo = 1e-3, .hi = 1, .unit = "",
	  .show = CF_SHOW_SET, .group = 1, .lead = true, .zero_as = ENGINE_KV_FRACTION_DEFAULT,
	  .help = "the KV rule's fraction of memory (absent: 0.9)" },
	{ OPT("kv_block_size", CF_INT, kv_block_size), .min = 1, .max = 4096, .show = CF_SHOW_SET,
	  .help = "KV block size, tokens (absent: 16)" },
	{ OPT("attention_dp_balance", CF_BOOL, adp_balance), .show = CF_SHOW_SET, .group = 2,
	  .lead = true, .help = "attention-DP context balancing (TensorRT-LLM's enable_balance)" },
	{ OPT("attention_dp_timeout_iters", CF_INT, adp_timeout_iters), .min = 0, .max = 1000000,
	  .show = CF_SHOW_SET, .group = 2, .tag = "timeout_iters",
	  .help = "attention-DP balancing: most group steps new context work is held back" },
	{ OPT("attention_dp_batching_wait_iters", CF_INT, adp_batching_wait_iters), .min = 0,
	  .max = 1000000, .show = CF_SHOW_SET, .group = 2, .tag = "batching_wait_iters",
	  .help = "attention-DP balancing: steps more while every rank decodes" },
	{ OPT("kv_load", CF_ENUM, kv_load), .names = kv_load_names, .show = CF_SHOW_SET,
	  .help = "loads of offloaded KV: blocking or layerwise" },
	{ STR("stack", stack, "the serving stack the engine runs behind without --stack: a `servesim list stacks` name (absent: none)"),
	  .optional = true, .show = CF_SHOW_SET },
	{ OPT("frontend_us_per_token", CF_NONNEG, frontend_us_per_token), .lo = 1e-6, .hi = 1e4,
	  .unit = "us", .fit = true, .show = CF_SHOW_SET,
	  .help = "output front end: serial work per streamed token (detokenise, write the chunk), us" },
	{ OPT("frontend_us_per_step", CF_NONNEG, frontend_us_per_step), .lo = 1e-6, .hi = 1e4,
	  .unit = "us", .fit = true, .show = CF_SHOW_SET,
	  .help = "output front end: serial work per engine step that emits tokens, us" },
	{ OPT("lora_load_overlap", CF_BOOL, lora_load_overlap), .show = CF_SHOW_SET,
	  .help = "multi-LoRA: adapter loads overlap the step's kernels (prefetched on a side stream, as S-LoRA does) rather than block it (vLLM)" },
	{ OPT("prep_us_per_layer", CF_NONNEG, prep_us_per_layer), .lo = 1e-6, .hi = 1e5,
	  .unit = "us", .fit = true, .show = CF_SHOW_SET,
	  .help = "input preparation per layer of the step's model (a step's weights reloaded into a CPU's caches; calibrate run measures it), us" },
	{ OPT("kv_profile_step", CF_BOOL, kv_profile_step), .show = CF_SHOW_SET,
	  .help = "the KV cache's activation reserve is a forward pass of the batch policy's whole step, its token budget and sequence limit, as vLLM's profiling run (absent: an 8192-token step of 256 sequences)" },
	{ STR("source", source, "where each number came from") },
};

const size_t engine_profile_n_fields = sizeof(engine_profile_fields) / sizeof(engine_profile_fields[0]);

#undef ES
#undef STR
#undef TIME
#undef OPT

double *engine_profile_param(struct engine_profile *p, const char *key)
{
	return catalog_fields_fit_param(engine_profile_fields, engine_profile_n_fields, p, key);
}

size_t engine_profile_fit_names(char *buf, size_t len)
{
	size_t at = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < engine_profile_n_fields; i++)
		if (engine_profile_fields[i].fit && at < len)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "",
					       engine_profile_fields[i].key);
	return at;
}

void engine_profile_describe(const struct engine_profile *p, char *buf, size_t len)
{
	size_t at;

	if (!len)
		return;
	at = (size_t)snprintf(buf, len, "%s:", p->name);
	catalog_fields_describe(engine_profile_fields, engine_profile_n_fields, p, buf, len, at);
}

bool engine_profile_legacy_stack(const struct engine_profile *p)
{
	return p->api_in_ms > 0.0 || p->api_out_ms > 0.0 || p->api_cv > 0.0;
}

int engine_profile_validate(const struct engine_profile *p, const char *path, const char *where,
			    struct ss_error *err)
{
	if (p->stack[0] && engine_profile_legacy_stack(p))
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: \"stack\" with api_in_ms, api_out_ms or api_cv: expected one serving stack (the api_* keys are its legacy form)",
				    where);
	for (int32_t i = 0; i < p->n_graph_sizes; i++) {
		if (p->graph_sizes[i] < 1 || (i && p->graph_sizes[i] <= p->graph_sizes[i - 1]))
			return ss_error_set(err, -EINVAL, path, 0,
					    "%s: graph_sizes must be ascending sizes >= 1 (entry %d is %d)",
					    where, (int)i, (int)p->graph_sizes[i]);
	}
	if (p->graph_mixed && !p->n_graph_sizes)
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: graph_mixed needs graph_sizes", where);
	if (p->graph_launch_us > 0.0 && !p->n_graph_sizes)
		return ss_error_set(err, -EINVAL, path, 0,
				    "%s: graph_launch_us needs graph_sizes", where);
	return 0;
}
