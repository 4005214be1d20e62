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

bool engine_profile_graphed(const struct engine_profile *p, uint32_t n_items, uint32_t n_prefill,
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
			 p->prep_us + p->prep_us_per_token * tok;
		serial *= US;
	}
	if (ctx->tp > 1)
		serial += p->dispatch_us_per_worker * ctx->tp * US;
	if (engine_profile_graphed(p, n_items, n_prefill, total_tokens)) {
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

double *engine_profile_param(struct engine_profile *p, const char *key)
{
	static const struct {
		const char *key;
		size_t off;
	} num[] = {
#define N(f) { #f, offsetof(struct engine_profile, f) }
		N(sched_us), N(sched_us_per_seq), N(sched_us_per_token), N(prep_us),
		N(prep_us_per_token), N(output_us), N(output_us_per_seq), N(launch_us),
		N(launch_us_per_layer), N(launch_overlap),
		N(graph_launch_us), N(allreduce_floor_us), N(api_in_ms), N(api_out_ms), N(api_cv),
		N(dispatch_us_per_worker),
#undef N
	};

	for (size_t i = 0; i < sizeof(num) / sizeof(num[0]); i++)
		if (!strcmp(num[i].key, key))
			return (double *)(void *)((char *)p + num[i].off);
	return NULL;
}

void engine_profile_describe(const struct engine_profile *p, char *buf, size_t len)
{
	size_t at;

	if (!len)
		return;
	at = (size_t)snprintf(buf, len,
			      "%s: policy=%s sched_us=%.17g sched_us_per_seq=%.17g sched_us_per_token=%.17g"
			      " prep_us=%.17g prep_us_per_token=%.17g output_us=%.17g"
			      " output_us_per_seq=%.17g async_output=%d launch_us=%.17g"
			      " launch_us_per_layer=%.17g launch_overlap=%.17g"
			      " graph_launch_us=%.17g graph_mixed=%d allreduce=%s"
			      " allreduce_floor_us=%.17g api_in_ms=%.17g api_out_ms=%.17g"
			      " api_cv=%.17g graph_sizes=",
			      p->name, p->policy[0] ? p->policy : "-", p->sched_us, p->sched_us_per_seq, p->sched_us_per_token,
			      p->prep_us, p->prep_us_per_token, p->output_us, p->output_us_per_seq,
			      (int)p->async_output, p->launch_us, p->launch_us_per_layer,
			      p->launch_overlap, p->graph_launch_us,
			      (int)p->graph_mixed, p->allreduce == ENGINE_AR_NCCL ? "nccl" : "custom",
			      p->allreduce_floor_us, p->api_in_ms, p->api_out_ms, p->api_cv);
	for (int32_t i = 0; i < p->n_graph_sizes && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : "",
				       (int)p->graph_sizes[i]);
	/* only when set, so the description (a plan's fingerprint, summary.json)
	 * of a profile without multi-step scheduling is what it was */
	if (engine_profile_burst(p) > 1 && at < len)
		at += (size_t)snprintf(buf + at, len - at, " scheduler_steps=%d", p->scheduler_steps);
	if (p->dispatch_us_per_worker > 0.0 && at < len)
		at += (size_t)snprintf(buf + at, len - at, " dispatch_us_per_worker=%.17g",
				       p->dispatch_us_per_worker);
	/* the KV rule, likewise only when the profile sets one */
	if ((p->kv_memory != ENGINE_KV_TOTAL || p->kv_fraction > 0.0) && at < len)
		at += (size_t)snprintf(buf + at, len - at, " kv_memory=%s kv_fraction=%.17g",
				       p->kv_memory == ENGINE_KV_FREE ? "free" : "total",
				       p->kv_fraction > 0.0 ? p->kv_fraction
							    : ENGINE_KV_FRACTION_DEFAULT);
	if (p->kv_block_size > 0 && at < len)
		at += (size_t)snprintf(buf + at, len - at, " kv_block_size=%d",
				       (int)p->kv_block_size);
	if (p->adp_balance && at < len)
		at += (size_t)snprintf(buf + at, len - at,
				       " attention_dp_balance=1 timeout_iters=%d batching_wait_iters=%d",
				       p->adp_timeout_iters, p->adp_batching_wait_iters);
	if (p->kv_load == ENGINE_KV_LOAD_LAYERWISE && at < len)
		snprintf(buf + at, len - at, " kv_load=layerwise");
}

int engine_profile_validate(const struct engine_profile *p, const char *path, const char *where,
			    struct ss_error *err)
{
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
