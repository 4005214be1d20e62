/* servesim — summary.json, the text summary, requests.csv, and the order in
 * which report_write_dir() writes a run's files (docs/outputs.md). */
#include "report.h"
#include "metrics-int.h"
#include "outdir-int.h"
#include "report-int.h"
#include "sessions.h"
#include "tseries.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- summary.json ------------------------------------------------------ */

/* Accumulates allocation failures so the builder can check once. */
struct jb {
	bool failed;
};

static void put(struct jb *b, json_t *o, const char *key, json_t *v)
{
	/* json_object_set_new() consumes v even on failure; v may be NULL */
	if (!o || !v || json_object_set_new(o, key, v) < 0)
		b->failed = true;
}

/* A finite real, or null (JSON has no NaN or infinity). */
static json_t *jreal(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

static json_t *jstr(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *jcount(uint64_t n)
{
	return json_integer((json_int_t)n);
}

/* An SLO target: null when unset. */
static json_t *jslo(double ms)
{
	return ms > 0 ? json_real(ms) : json_null();
}

/* An energy or power figure: null when nothing metered it. */
static json_t *jenergy(const struct run_info *ri, double x)
{
	return run_info_unmetered(ri) ? json_null() : jreal(x);
}

/* "stack": {"policy": {"spec": "vllm", "source": "default"}, ...}: each
 * choice as given on the command line and what chose it. */
static json_t *jstack(struct jb *b, const struct run_info *ri)
{
	json_t *o = json_object();

	for (int i = 0; i < ri->n_stack; i++) {
		const struct stack_item *it = &ri->stack[i];
		json_t *e = json_object();

		put(b, e, "spec", jstr(it->spec));
		put(b, e, "source", jstr(it->from ? it->from : "command line"));
		put(b, o, it->key, e);
	}
	return o;
}

/* {"n", "mean", "p50", "p90", "p95", "p99", "max"}; statistics are null
 * when there are no samples. */
static json_t *jdist(struct jb *b, const struct dist *d)
{
	json_t *o = json_object();
	bool empty = d->n == 0;

	put(b, o, "n", jcount(d->n));
	put(b, o, "mean", empty ? json_null() : jreal(d->mean));
	put(b, o, "p50", empty ? json_null() : jreal(d->p50));
	put(b, o, "p90", empty ? json_null() : jreal(d->p90));
	put(b, o, "p95", empty ? json_null() : jreal(d->p95));
	put(b, o, "p99", empty ? json_null() : jreal(d->p99));
	put(b, o, "max", empty ? json_null() : jreal(d->max));
	return o;
}

/* The statistics of a distribution an interval applies to, in
 * summary.json's names; their _lo and _hi keys go beside them. */
static const struct {
	const char *lo, *hi;
	size_t off;
} dist_stats[] = {
	{ "mean_lo", "mean_hi", offsetof(struct dist, mean) },
	{ "p50_lo", "p50_hi", offsetof(struct dist, p50) },
	{ "p90_lo", "p90_hi", offsetof(struct dist, p90) },
	{ "p95_lo", "p95_hi", offsetof(struct dist, p95) },
	{ "p99_lo", "p99_hi", offsetof(struct dist, p99) },
	{ "max_lo", "max_hi", offsetof(struct dist, max) },
};

/* jdist with the interval of metric m (enum interval_metric) of s beside
 * each statistic ("p50_lo", "p50_hi"; docs/metrics.md "Intervals"), null
 * for an empty distribution; as jdist where s has no interval for m. */
static json_t *jdist_interval(struct jb *b, const struct dist *d, const struct summary *s,
			      int m)
{
	json_t *o = jdist(b, d);

	if (m < 0 || !(s->interval.lo[m] > 0))
		return o;
	for (size_t i = 0; i < sizeof(dist_stats) / sizeof(dist_stats[0]); i++) {
		double v = *(const double *)((const char *)d + dist_stats[i].off), lo, hi;
		bool has = d->n > 0 && summary_interval_of(s, m, v, &lo, &hi);

		put(b, o, dist_stats[i].lo, has ? jreal(lo) : json_null());
		put(b, o, dist_stats[i].hi, has ? jreal(hi) : json_null());
	}
	return o;
}

/* "interval": which bounds the figures' _lo and _hi came from and how
 * they were widened (docs/metrics.md "Intervals"). */
static json_t *jinterval(struct jb *b, const struct summary *s)
{
	const struct summary_interval *iv = &s->interval;
	json_t *o = json_object();

	put(b, o, "entry", jstr(iv->entry));
	put(b, o, "spec_priced", json_boolean(iv->spec_priced));
	put(b, o, "widen", jreal(iv->widen));
	for (int m = 0; m < INTERVAL_METRICS; m++) {
		json_t *r;

		if (!(iv->lo[m] > 0))
			continue;
		r = json_object();
		put(b, r, "lo", jreal(iv->lo[m]));
		put(b, r, "hi", jreal(iv->hi[m]));
		put(b, o, interval_metric_name((enum interval_metric)m), r);
	}
	return o;
}

/* {"gpu": {...}, "host": {...}} of one instance or of the run. */
static json_t *jtiers(struct jb *b, const struct kv_tier_summary *k)
{
	json_t *o = json_object(), *g = json_object(), *h = json_object();

	put(b, g, "hit_tokens", jcount(k->gpu_hit_tokens));
	put(b, o, "gpu", g);
	put(b, h, "hit_tokens", jcount(k->host_hit_tokens));
	put(b, h, "loaded_blocks", jcount(k->loaded_blocks));
	put(b, h, "offloaded_blocks", jcount(k->offloaded_blocks));
	put(b, h, "kept_blocks", jcount(k->kept_blocks));
	put(b, h, "dropped_blocks", jcount(k->dropped_blocks));
	put(b, h, "evicted_blocks", jcount(k->host_evicted_blocks));
	put(b, h, "held_blocks", json_integer(k->host_held_blocks));
	put(b, h, "peak_blocks", json_integer(k->host_peak_blocks));
	put(b, h, "capacity_blocks", json_integer(k->host_capacity_blocks));
	put(b, h, "d2h_bytes", jreal(k->d2h_bytes));
	put(b, h, "h2d_bytes", jreal(k->h2d_bytes));
	put(b, o, "host", h);
	return o;
}

/* The metric catalog's figures (analysis/metrics.def), each where its entry
 * says: a distribution whole ({"n", "mean", ...}, once for all its
 * entries), a value at json.sub (the object json made when the rest of the
 * document has not), null where it is not finite or is an energy figure of
 * a run nothing metered. */
static void put_catalog(struct jb *b, json_t *o, const struct summary *s,
			const struct run_info *ri)
{
	for (int m = 0; m < METRIC_COUNT; m++) {
		const struct metric_desc *d = metric_desc((enum metric_id)m);
		double v = metric_value(d, s);

		if (!d->dist)
			b->failed |= metric_json_set(o, (enum metric_id)m,
						     d->energy ? jenergy(ri, v) : jreal(v)) < 0;
		else if (!json_object_get(o, d->json))
			put(b, o, d->json, jdist_interval(b, metric_dist(d, s), s, d->interval));
	}
}

json_t *report_context_json(const struct wl_context *c)
{
	double share = c->requests ? (double)c->over / (double)c->requests : 0.0;

	return json_pack("{s:i, s:I, s:I, s:f, s:I, s:I, s:s, s:I, s:f}", "context", (int)c->context,
			 "requests", (json_int_t)c->requests, "over", (json_int_t)c->over,
			 "share", share, "prompt_over", (json_int_t)c->prompt_over,
			 "max_excess_tokens", (json_int_t)c->max_excess,
			 "overlong", c->truncated ? "truncate" : "reject",
			 "truncated", (json_int_t)c->truncated,
			 "reachable_attainment", c->truncated ? 1.0 : 1.0 - share);
}

json_t *report_summary_json(const struct summary *s, const struct run_info *ri)
{
	struct jb b = { false };
	json_t *o = json_object(), *t;

	put(&b, o, "version", jstr(ri->version));
	put(&b, o, "mode", jstr(ri->mode));
	put(&b, o, "status", jstr(ri->status ? "failed" : ri->interrupted ? "interrupted" :
				  "complete"));
	if (ri->status)
		put(&b, o, "error", jstr(ri->status));
	/* absent unless interrupted, like "error" unless failed */
	if (ri->interrupted)
		put(&b, o, "interrupted", jstr(ri->interrupted));
	/* JSON integers are signed 64-bit here: larger seeds are kept as text */
	put(&b, o, "seed", ri->seed <= INT64_MAX ? json_integer((json_int_t)ri->seed) :
		json_sprintf("%" PRIu64, ri->seed));
	put(&b, o, "config", ri->config ? json_incref(ri->config) : json_null());
	/* only with something to say, so other summaries stay byte for byte */
	if (ri->notes)
		put(&b, o, "notes", json_incref(ri->notes));

	t = json_object();
	put(&b, t, "model", jstr(ri->model));
	put(&b, t, "gpu", jstr(ri->gpu));
	put(&b, t, "tp", json_integer(ri->tp));
	if (ri->pp > 1)
		put(&b, t, "pp", json_integer(ri->pp));
	put(&b, t, "instances", json_integer(ri->n_instances));
	put(&b, t, "policy", jstr(ri->policy));
	put(&b, t, "router", jstr(ri->router));
	put(&b, t, "cost_model", jstr(ri->cost_model));
	put(&b, t, "workload", jstr(ri->workload));
	if (ri->backend) {
		/* live: what ran the steps */
		put(&b, t, "backend", jstr(ri->backend));
		put(&b, t, "model_run", jstr(ri->model_run));
	}
	put(&b, o, "scenario", t);
	if (ri->n_stack > 0)
		put(&b, o, "stack", jstack(&b, ri));

	/* open or closed loop: a result says which load it measured */
	t = json_object();
	put(&b, t, "mode", jstr(ri->concurrency ? "closed" : "open"));
	if (ri->concurrency) {
		put(&b, t, "concurrency", json_integer(ri->concurrency));
		put(&b, t, "think_time", jstr(ri->think_time ? ri->think_time : "none"));
		put(&b, t, "ramp_up_s", json_real((double)ri->ramp_ns / 1e9));
	}
	put(&b, o, "load", t);

	t = json_object();
	put(&b, t, "total", jcount(s->requests));
	put(&b, t, "completed", jcount(s->completed));
	put(&b, t, "rejected", jcount(s->rejected));
	put(&b, t, "unfinished", jcount(s->unfinished));
	put(&b, o, "requests", t);
	put(&b, o, "requests_completed", jcount(s->completed));
	put(&b, o, "rejected", jcount(s->rejected));
	t = json_object();
	for (int i = 0; i < s->n_reject_reasons; i++)
		put(&b, t, s->reject_reasons[i].reason, jcount(s->reject_reasons[i].count));
	put(&b, o, "reject_reasons", t);

	/* ttft_ms, tpot_ms, itl_ms, e2e_ms and throughput: put_catalog() */
	put(&b, o, "queue_ms", jdist(&b, &s->queue_ms));
	put(&b, o, "duration_s", jreal(s->duration_s));

	t = json_object();
	put(&b, t, "ttft_ms", jslo(s->slo.ttft_ms));
	put(&b, t, "tpot_ms", jslo(s->slo.tpot_ms));
	put(&b, t, "e2e_ms", jslo(s->slo.e2e_ms));
	put(&b, t, "tbt_ms", jslo(s->slo.tbt_ms));
	put(&b, o, "slo", t);
	/* slo_attainment, goodput_rps: put_catalog() */
	put(&b, o, "goodput_rps_per_gpu", jreal(s->goodput_rps_per_gpu));

	put(&b, o, "preemptions", jcount(s->preemptions));
	t = json_object();
	put(&b, t, "mode", jstr(s->swap ? "swap" : "recompute"));
	put(&b, t, "swap_outs", jcount(s->swap_outs));
	put(&b, t, "swap_ins", jcount(s->swap_ins));
	put(&b, t, "swap_s", jreal(s->swap_s));
	put(&b, o, "preemption", t);
	t = json_object();
	put(&b, t, "enabled", json_boolean(s->prefix_cache));
	put(&b, t, "hit_rate", jreal(s->prefix_hit_rate));
	put(&b, t, "hit_tokens", jcount(s->prefix_hit_tokens));
	put(&b, t, "lookup_tokens", jcount(s->prefix_lookup_tokens));
	put(&b, t, "evicted_blocks", jcount(s->prefix_evictions));
	put(&b, o, "prefix_cache", t);
	if (s->spec) {
		/* speculative decoding (docs/speculation.md): only with --spec */
		const struct spec_stats *sp = &s->spec_st;

		t = json_object();
		put(&b, t, "spec", jstr(s->spec->text));
		put(&b, t, "method", jstr(spec_method_name(s->spec->method)));
		put(&b, t, "k", json_integer(s->spec->k));
		put(&b, t, "acceptance", jstr(s->spec->accept.name));
		put(&b, t, "acceptance_length", jreal(s->spec_acceptance_length));
		put(&b, t, "accept_rate", jreal(s->spec_accept_rate));
		put(&b, t, "verifies", jcount(sp->verifies));
		put(&b, t, "drafted_tokens", jcount(sp->drafted));
		put(&b, t, "accepted_tokens", jcount(sp->accepted));
		put(&b, t, "rejected_tokens", jcount(sp->drafted - sp->accepted));
		put(&b, t, "draft_passes", jcount(sp->draft_passes));
		put(&b, t, "draft_share", jreal(s->spec_draft_share));
		put(&b, t, "verify_share", jreal(s->spec_verify_share));
		put(&b, t, "draft_energy_j", jenergy(ri, sp->draft_energy_j));
		put(&b, t, "rejected_energy_j", jenergy(ri, sp->rejected_energy_j));
		put(&b, o, "speculation", t);
	}
	if (s->lora) {
		/* multi-LoRA serving (docs/lora.md): only with --lora */
		const struct lora_stats *ls = &s->lora_st;

		t = json_object();
		put(&b, t, "lora", jstr(s->lora->text));
		put(&b, t, "adapters", jcount(s->lora->n_adapters));
		put(&b, t, "max_loras", json_integer(s->lora->max_loras));
		put(&b, t, "max_cpu_loras", jcount(s->lora->max_cpu_loras));
		put(&b, t, "max_rank", json_integer(s->lora->max_rank));
		put(&b, t, "steps", jcount(ls->steps));
		put(&b, t, "adapters_per_step", jreal(s->lora_adapters_per_step));
		put(&b, t, "peak_adapters_per_step", jcount(ls->peak_adapters));
		put(&b, t, "hits", jcount(ls->hits));
		put(&b, t, "loads", jcount(ls->misses));
		put(&b, t, "hit_rate", jreal(s->lora_hit_rate));
		put(&b, t, "host_misses", jcount(ls->host_misses));
		put(&b, t, "evictions", jcount(ls->evictions));
		put(&b, t, "load_bytes", jreal(ls->load_bytes));
		put(&b, t, "load_s", jreal((double)ls->load_ns / 1e9));
		put(&b, t, "load_share", jreal(s->lora_load_share));
		put(&b, t, "gemm_share", jreal(s->lora_gemm_share));
		put(&b, o, "lora", t);
	}
	if (s->kv_offload || s->kv_remote) {
		/* hits by tier, one object per tier (docs/outputs.md) */
		if (s->kv_offload) {
			json_t *a = json_array();

			t = jtiers(&b, &s->kv_tiers);
			put(&b, t, "swap_outs", jcount(s->swap_outs));
			put(&b, t, "swap_ins", jcount(s->swap_ins));
			put(&b, t, "pcie_s", jreal(s->swap_s));
			for (uint32_t i = 0; i < s->n_tier_instances; i++)
				if (!a || json_array_append_new(a, jtiers(&b, &s->tier_inst[i])) < 0)
					b.failed = true;
			put(&b, t, "per_instance", a);
		} else {
			json_t *g = json_object();

			t = json_object();
			put(&b, g, "hit_tokens", jcount(s->prefix_hit_tokens - s->remote.hit_tokens));
			put(&b, t, "gpu", g);
		}
		if (s->kv_remote) {
			const struct kv_remote_stats *rs = &s->remote;
			json_t *r = json_object();

			put(&b, r, "hit_tokens", jcount(rs->hit_tokens));
			put(&b, r, "blocks_fetched", jcount(rs->blocks_fetched));
			put(&b, r, "bytes", jreal(rs->bytes));
			put(&b, r, "fetches", jcount(rs->fetches));
			put(&b, r, "fetch_s", jreal((double)rs->fetch_ns / 1e9));
			put(&b, r, "puts", jcount(rs->puts));
			put(&b, r, "evictions", jcount(rs->evictions));
			put(&b, r, "capacity_blocks", jcount((uint64_t)rs->capacity_blocks));
			put(&b, r, "capacity_gb",
			    jreal((double)rs->capacity_blocks * rs->block_bytes / 1e9));
			put(&b, t, "remote", r);
		}
		put(&b, o, "kv_tiers", t);
	}
	t = json_array();
	for (uint32_t i = 0; i < s->n_tenants && i < SUMMARY_MAX_TENANTS; i++) {
		const struct tenant_summary *ts = &s->tenants[i];
		json_t *o2 = json_object();

		put(&b, o2, "tenant", json_integer(ts->tenant));
		put(&b, o2, "requests", jcount(ts->requests));
		put(&b, o2, "completed", jcount(ts->completed));
		put(&b, o2, "rejected", jcount(ts->rejected));
		put(&b, o2, "ttft_ms", jdist(&b, &ts->ttft_ms));
		put(&b, o2, "tpot_ms", jdist(&b, &ts->tpot_ms));
		put(&b, o2, "slo_attainment", jreal(ts->slo_attainment));
		put(&b, o2, "service_tokens_per_s", jreal(ts->service_tokens_per_s));
		if (!t || json_array_append_new(t, o2) < 0)
			b.failed = true;
	}
	put(&b, o, "per_tenant", t);
	put(&b, o, "tenants", jcount(s->n_tenants));
	put(&b, o, "fairness_jain", jreal(s->fairness_jain));
	put(&b, o, "predictor", jstr(s->predictor ? s->predictor : "none"));
	put(&b, o, "disaggregated", json_boolean(s->disaggregated));
	put(&b, o, "pools", jstr(ri->pools));
	put(&b, o, "kv_transfers", jcount(s->kv_transfers));
	put(&b, o, "kv_transfer_ms", jdist(&b, &s->kv_transfer_ms));
	t = json_object();
	put(&b, t, "usd_per_hour", s->cost_usd_per_hour > 0 ? jreal(s->cost_usd_per_hour) : json_null());
	put(&b, t, "usd", s->cost_usd_per_hour > 0 ? jreal(s->cost_usd) : json_null());
	put(&b, t, "usd_per_million_output_tokens",
	    s->cost_usd_per_hour > 0 ? jreal(s->usd_per_million_output_tokens) : json_null());
	put(&b, o, "cost", t);
	t = json_object();
	put(&b, t, "mean", jreal(s->kv_util_mean));
	put(&b, t, "peak", jreal(s->kv_util_peak));
	put(&b, o, "kv_utilization", t);
	t = json_object();
	put(&b, t, "seqs", jdist(&b, &s->batch_seqs));
	put(&b, t, "tokens", jdist(&b, &s->batch_tokens));
	put(&b, o, "batch_size", t);
	put(&b, o, "steps", jcount(s->steps));

	t = json_object();
	/* nothing metered: the figures are unknown (null), not zero */
	put(&b, t, "total_j", jenergy(ri, s->energy_j));
	put(&b, t, "busy_j", jenergy(ri, s->energy_busy_j));
	put(&b, t, "idle_j", jenergy(ri, s->energy_idle_j));
	put(&b, t, "j_per_request", jenergy(ri, s->j_per_request));
	/* j_per_output_token: put_catalog() */
	put(&b, t, "avg_power_w_per_gpu", jenergy(ri, s->avg_power_w_per_gpu));
	put(&b, t, "avg_power_w", jenergy(ri, s->avg_power_w_per_gpu));
	put(&b, t, "peak_power_w", jenergy(ri, s->peak_power_w_per_gpu));
	put(&b, t, "prefill_j", jenergy(ri, s->energy_prefill_j));
	put(&b, t, "decode_j", jenergy(ri, s->energy_decode_j));
	put(&b, t, "source", jstr(ri->energy_meter ? ri->energy_meter : "model"));
	put(&b, t, "metered", json_boolean(!ri->energy_meter || ri->energy_metered));
	put(&b, o, "energy", t);

	t = json_object();
	put(&b, t, "predictions", jcount(s->out_of_grid));
	put(&b, t, "share_of_time", jreal(s->out_of_grid_share));
	put(&b, o, "out_of_grid", t);

	t = json_object();
	put(&b, t, "name", jstr(s->cost_model ? s->cost_model : ri->cost_model));
	{
		json_t *share = json_object();

		/* the adapters' operator only in a run that has them */
		int n_ops = s->lora ? COST_OP_COUNT : COST_OP_LORA;

		for (int op = 0; op < n_ops; op++)
			put(&b, share, cost_op_name((enum cost_op)op), jreal(s->op_share[op]));
		put(&b, t, "op_share", share);
		share = json_object();
		for (int op = 0; op < n_ops; op++)
			put(&b, share, cost_op_name((enum cost_op)op),
			    jstr(s->op_backend[op] ? s->op_backend[op] :
				 s->cost_model ? s->cost_model : ri->cost_model));
		put(&b, t, "operators", share);
	}
	/* only for a scaled model, so every other summary stays as it was */
	if (s->cost_reference)
		put(&b, t, "scaled_from", jstr(s->cost_reference));
	put(&b, o, "cost_model", t);
	put(&b, o, "engine", jstr(s->engine ? s->engine : "none"));
	if (s->interval.entry)
		put(&b, o, "interval", jinterval(&b, s));

	if (s->pp_stages > 0) {
		/* only for pipelines, so every other output stays as it was */
		json_t *busy = json_array(), *bubble = json_array();

		for (int k = 0; k < s->pp_stages; k++)
			if (!busy || !bubble ||
			    json_array_append_new(busy, jreal(s->stage_busy_share[k])) < 0 ||
			    json_array_append_new(bubble, jreal(s->stage_bubble_share[k])) < 0)
				b.failed = true;
		t = json_object();
		put(&b, t, "stage_busy_share", busy);
		put(&b, t, "stage_bubble_share", bubble);
		put(&b, o, "pipeline", t);
	}
	put(&b, o, "instances", json_integer(s->n_instances));
	put(&b, o, "gpus", json_integer(s->n_gpus));
	put(&b, o, "kv_blocks_per_instance", json_integer(s->kv_blocks_per_instance));
	if (s->attention_dp > 1)
		put(&b, o, "attention_dp_ranks_per_instance", json_integer(s->attention_dp));

	if (ri->sessions)
		put(&b, o, "sessions", session_summary_json(ri->sessions));
	if (s->sample_requested_ns > 0) {
		/* the interval the time series was kept at: coarser than asked
		 * when the samples would have exceeded their bounds */
		t = json_object();
		put(&b, t, "requested_interval_s", jreal((double)s->sample_requested_ns / 1e9));
		put(&b, t, "interval_s", jreal((double)s->sample_interval_ns / 1e9));
		put(&b, t, "sampling_times", jcount(s->sampling_times));
		put(&b, t, "coarsened", json_boolean(s->sample_interval_ns > s->sample_requested_ns));
		put(&b, o, "timeseries", t);
	}
	/* last: its values go into objects written above (energy) */
	put_catalog(&b, o, s, ri);

	if (b.failed) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- summary.txt ------------------------------------------------------- */

static const char *orq(const char *s)
{
	return s && s[0] ? s : "-";
}

/* summary.txt's figures of the metric catalog (analysis/metrics.def): the
 * prose prints each where it has a place for it, with the catalog's scale
 * and decimals (fig()), and the ones it has not printed go on a last line
 * (report_text_other_figures()), so that an entry added to the catalog is
 * in the text without an edit here. */
struct txt_figs {
	const struct summary *s;
	uint64_t shown;              /* bit m: metric m printed */
	char buf[4][48];             /* fig()'s last four */
	int next;
};

_Static_assert(METRIC_COUNT <= 64, "txt_figs.shown has a bit per metric");

const struct report_latency_row report_latency_rows[REPORT_LATENCY_ROWS] = {
	{ "TTFT", offsetof(struct summary, ttft_ms) },
	{ "TPOT", offsetof(struct summary, tpot_ms) },
	{ "ITL", offsetof(struct summary, itl_ms) },
	{ "E2E", offsetof(struct summary, e2e_ms) },
	{ "queue", offsetof(struct summary, queue_ms) },
};

char *report_metric_text(char *buf, size_t size, const struct summary *s, enum metric_id id)
{
	const struct metric_desc *d = metric_desc(id);

	snprintf(buf, size, "%.*f", d->decimals, d->scale * metric_value(d, s));
	return buf;
}

/* Metric m as the catalog formats it, marked printed. */
static const char *fig(struct txt_figs *t, enum metric_id m)
{
	t->shown |= 1ull << m;
	return report_metric_text(t->buf[t->next++ % 4], sizeof(t->buf[0]), t->s, m);
}

/* The catalog's entries of distribution x whose statistic a row of the
 * latency table shows (mean, p50, p90, p99, max): printed. */
static void shown_dist(struct txt_figs *t, const struct dist *x)
{
	for (int m = 0; m < METRIC_COUNT; m++) {
		const struct metric_desc *d = metric_desc((enum metric_id)m);

		if (d->dist && metric_dist(d, t->s) == x &&
		    (d->stat == offsetof(struct dist, mean) || d->stat == offsetof(struct dist, p50) ||
		     d->stat == offsetof(struct dist, p90) || d->stat == offsetof(struct dist, p99) ||
		     d->stat == offsetof(struct dist, max)))
			t->shown |= 1ull << m;
	}
}

void report_text_other_figures(FILE *f, const struct summary *s, uint64_t shown)
{
	struct txt_figs t = { .s = s };
	bool any = false;

	for (int m = 0; m < METRIC_COUNT; m++) {
		if (shown & (1ull << m))
			continue;
		fprintf(f, "%s%s %s", any ? "; " : "other figures: ",
			metric_desc((enum metric_id)m)->label, fig(&t, (enum metric_id)m));
		any = true;
	}
	if (any)
		fputc('\n', f);
}

static void text_dist_row(FILE *f, struct txt_figs *t, const char *name, const struct dist *d)
{
	shown_dist(t, d);
	if (d->n == 0) {
		fprintf(f, "  %-6s %11s %11s %11s %11s %11s %10d\n", name, "-", "-", "-", "-",
			"-", 0);
		return;
	}
	fprintf(f, "  %-6s %11.3f %11.3f %11.3f %11.3f %11.3f %10" PRIu64 "\n", name, d->mean,
		d->p50, d->p90, d->p99, d->max, d->n);
}

/* Under a row of the latency table, its interval's two ends ("  lo",
 * "  hi"), where the catalog gives its distribution one. */
static void text_interval_rows(FILE *f, const struct summary *s, size_t field)
{
	const struct dist *d = (const struct dist *)((const char *)s + field);
	int m = metric_field_interval(field);
	const double v[5] = { d->mean, d->p50, d->p90, d->p99, d->max };
	double lo[5], hi[5];

	if (m < 0 || !(s->interval.lo[m] > 0) || d->n == 0)
		return;
	for (int i = 0; i < 5; i++)
		summary_interval_of(s, m, v[i], &lo[i], &hi[i]);
	fprintf(f, "  %-6s %11.3f %11.3f %11.3f %11.3f %11.3f\n", "  lo", lo[0], lo[1], lo[2],
		lo[3], lo[4]);
	fprintf(f, "  %-6s %11.3f %11.3f %11.3f %11.3f %11.3f\n", "  hi", hi[0], hi[1], hi[2],
		hi[3], hi[4]);
}

/* What the lo and hi rows are: "interval: ...". */
static void text_interval_line(FILE *f, const struct summary *s)
{
	const struct summary_interval *iv = &s->interval;
	bool profile = strcmp(iv->entry ? iv->entry : "prior", "prior") &&
		       strcmp(iv->entry ? iv->entry : "none", "none");

	if (!iv->entry)
		return;
	fprintf(f, "interval: lo and hi from %s%s%s leave-one-source-out bounds", profile ? "engine " : "the ",
		iv->entry, profile ? "'s" : "");
	if (iv->spec_priced)
		fprintf(f, ", at least the prior's");
	if (iv->widen > 1.0)
		fprintf(f, ", to the power %.3f off the grid", iv->widen);
	fprintf(f, "; queue: none (docs/metrics.md)\n");
}

static void text_slo(FILE *f, struct txt_figs *t, const struct summary *s)
{
	const char *sep = "";

	fputs("SLOs: ", f);
	if (s->slo.ttft_ms > 0) {
		fprintf(f, "TTFT <= %g ms", s->slo.ttft_ms);
		sep = ", ";
	}
	if (s->slo.tpot_ms > 0) {
		fprintf(f, "%sTPOT <= %g ms", sep, s->slo.tpot_ms);
		sep = ", ";
	}
	if (s->slo.e2e_ms > 0) {
		fprintf(f, "%sE2E <= %g ms", sep, s->slo.e2e_ms);
		sep = ", ";
	}
	if (s->slo.tbt_ms > 0) {
		fprintf(f, "%severy token gap <= %g ms", sep, s->slo.tbt_ms);
		sep = ", ";
	}
	if (!sep[0])
		fputs("none set (every completed request counts)", f);
	fprintf(f, "\n  attainment %s%% of all requests; goodput %s req/s, %.4f req/s per GPU\n",
		fig(t, METRIC_SLO), fig(t, METRIC_GOODPUT), s->goodput_rps_per_gpu);
}

char *report_cost_label(char *buf, size_t len, const struct summary *s, const struct run_info *ri)
{
	const char *name = orq(s->cost_model ? s->cost_model : ri->cost_model);
	const char *seen[COST_OP_COUNT];
	int n_ops = s->lora ? COST_OP_COUNT : COST_OP_LORA, n_seen = 0;
	size_t at;

	at = (size_t)snprintf(buf, len, "%s", name);
	if (s->cost_reference && at < len)
		at += (size_t)snprintf(buf + at, len - at, " (%s's tables x the roofline)",
				       s->cost_reference);
	/* every other backend with busy time, in operator order */
	for (int op = 0; op < n_ops; op++) {
		const char *b = s->op_backend[op];
		double share = 0.0;
		bool dup = false, first = true;

		if (!b || !strcmp(b, name) || !(s->op_share[op] > 0))
			continue;
		for (int k = 0; k < n_seen; k++)
			dup |= !strcmp(seen[k], b);
		if (dup)
			continue;
		seen[n_seen++] = b;
		if (at < len)
			at += (size_t)snprintf(buf + at, len - at, "; %s for", b);
		for (int o = op; o < n_ops; o++)
			if (s->op_backend[o] && !strcmp(s->op_backend[o], b) && s->op_share[o] > 0) {
				share += s->op_share[o];
				if (at < len)
					at += (size_t)snprintf(buf + at, len - at, "%s %s",
							       first ? "" : ",",
							       cost_op_name((enum cost_op)o));
				first = false;
			}
		if (at < len)
			at += (size_t)snprintf(buf + at, len - at, " (%.1f%% of busy time)",
					       100.0 * share);
	}
	return buf;
}

/* When operators come from different backends (a table with roofline
 * fallbacks), say which, and how much was predicted outside the grid. */
static void operators_line(FILE *f, const struct summary *s, const struct run_info *ri)
{
	const char *name = s->cost_model ? s->cost_model : ri->cost_model;
	int n_ops = s->lora ? COST_OP_COUNT : COST_OP_LORA;   /* lora: only with adapters */
	bool mixed = false;

	for (int op = 0; op < n_ops; op++)
		if (s->op_backend[op] && name && strcmp(s->op_backend[op], name) != 0)
			mixed = true;
	if (mixed) {
		fprintf(f, "          operators:");
		for (int op = 0; op < n_ops; op++)
			fprintf(f, " %s=%s", cost_op_name((enum cost_op)op),
				s->op_backend[op] ? s->op_backend[op] : orq(name));
		fputc('\n', f);
	}
	if (s->out_of_grid > 0)
		fprintf(f, "          %" PRIu64 " predictions outside the measured grid, %.1f%% of busy time\n",
			s->out_of_grid, 100.0 * s->out_of_grid_share);
}

/* "stack:    policy vllm (default), order sjf, ...", wrapped at 100 columns. */
static void text_stack(FILE *f, const struct run_info *ri)
{
	int col = 0;

	for (int i = 0; i < ri->n_stack; i++) {
		const struct stack_item *it = &ri->stack[i];
		char item[256];
		int n;

		n = snprintf(item, sizeof(item), "%s %s%s%s%s", it->label, orq(it->spec),
			     it->from ? " (" : "", it->from ? it->from : "", it->from ? ")" : "");
		if (i == 0)
			col = fprintf(f, "stack:    %s", item);
		else if (col + 2 + n > 100)
			col = fprintf(f, ",\n          %s", item) - 2;
		else
			col += fprintf(f, ", %s", item);
	}
	if (ri->n_stack > 0)
		fputc('\n', f);
}

void report_summary_text(FILE *f, const struct summary *s, const struct run_info *ri)
{
	struct txt_figs t = { .s = s };
	const char *sep = "";

	if (ri->interrupted)
		fprintf(f, "INTERRUPTED by %s: results so far, %" PRIu64 " of %" PRIu64
			" requests finished or rejected, %" PRIu64 " unfinished\n", ri->interrupted,
			s->requests - s->unfinished, s->requests, s->unfinished);
	if (ri->backend)
		/* live: the model as run and the device that ran it; --gpu only
		 * sized the KV pool and priced the policies' estimates */
		fprintf(f, "scenario: live: %s\n          backend %s\n          KV pool sized as on %d x %s, policy %s, router %s\n",
			orq(ri->model_run), ri->backend, ri->tp, orq(ri->gpu), orq(ri->policy),
			orq(ri->router));
	else if (ri->pools)
		fprintf(f, "scenario: %s, disaggregated: %s (%d GPU%s), policy %s, router %s\n",
			orq(ri->model), ri->pools, s->n_gpus, s->n_gpus == 1 ? "" : "s",
			orq(ri->policy), orq(ri->router));
	else if (ri->pp > 1)
		fprintf(f, "scenario: %s, %" PRIu32 " instance%s of %d x %d x %s (tp x pp; %d GPU%s), policy %s, router %s\n",
			orq(ri->model), ri->n_instances, ri->n_instances == 1 ? "" : "s", ri->tp,
			ri->pp, orq(ri->gpu), s->n_gpus, s->n_gpus == 1 ? "" : "s", orq(ri->policy),
			orq(ri->router));
	else
		fprintf(f, "scenario: %s, %" PRIu32 " instance%s of %d x %s (%d GPU%s), policy %s, router %s\n",
			orq(ri->model), ri->n_instances, ri->n_instances == 1 ? "" : "s", ri->tp,
			orq(ri->gpu), s->n_gpus, s->n_gpus == 1 ? "" : "s", orq(ri->policy),
			orq(ri->router));
	{
		char label[512];

		fprintf(f, "          cost model %s, engine %s, seed %" PRIu64 ", servesim %s (%s)\n",
			report_cost_label(label, sizeof(label), s, ri), orq(s->engine), ri->seed,
			orq(ri->version), orq(ri->mode));
	}
	if (ri->precision)
		fprintf(f, "          %s\n", ri->precision);
	if (ri->layout)
		fprintf(f, "          %s\n", ri->layout);
	if (ri->kv_rule)
		fprintf(f, "          %s\n", ri->kv_rule);
	operators_line(f, s, ri);
	text_stack(f, ri);
	fprintf(f, "workload: %s\n", orq(ri->workload));
	if (ri->concurrency) {
		char ramp[64] = "";

		if (ri->ramp_ns)
			snprintf(ramp, sizeof(ramp), " started over %.9g s", (double)ri->ramp_ns / 1e9);
		fprintf(f, "load:     closed loop, %" PRIu32 " client%s%s, think time %s\n",
			ri->concurrency, ri->concurrency == 1 ? "" : "s", ramp,
			orq(ri->think_time ? ri->think_time : "none"));
	} else
		fprintf(f, "load:     open loop (arrival times of the workload)\n");
	fprintf(f, "requests: %" PRIu64 " total, %" PRIu64 " completed, %" PRIu64 " rejected",
		s->requests, s->completed, s->rejected);
	if (s->n_reject_reasons > 0) {
		fputs(" (", f);
		for (int i = 0; i < s->n_reject_reasons; i++)
			fprintf(f, "%s%s: %" PRIu64, i ? "; " : "", s->reject_reasons[i].reason,
				s->reject_reasons[i].count);
		fputs(")", f);
	}
	fprintf(f, ", %" PRIu64 " unfinished\n\n", s->unfinished);

	fprintf(f, "  %-6s %11s %11s %11s %11s %11s %10s\n", "ms", "mean", "p50", "p90", "p99",
		"max", "n");
	/* one format for the whole table (E2E with 3 decimals, not the
	 * catalog's 1): the table keeps its columns aligned */
	for (int i = 0; i < REPORT_LATENCY_ROWS; i++) {
		text_dist_row(f, &t, report_latency_rows[i].name,
			      (const struct dist *)((const char *)s + report_latency_rows[i].dist));
		text_interval_rows(f, s, report_latency_rows[i].dist);
	}
	text_interval_line(f, s);
	fputc('\n', f);

	fprintf(f, "throughput: %s req/s, %s input tok/s, %s output tok/s over %.3f s\n",
		fig(&t, METRIC_REQ_S), fig(&t, METRIC_IN_TOK_S), fig(&t, METRIC_OUT_TOK_S),
		s->duration_s);
	text_slo(f, &t, s);
	fprintf(f, "KV cache: %" PRId64 " blocks per instance", s->kv_blocks_per_instance);
	if (s->attention_dp > 1)
		fprintf(f, " (%d attention-DP ranks of %" PRId64 ")", s->attention_dp,
			s->kv_blocks_per_instance / s->attention_dp);
	fprintf(f, ", utilization mean %.1f%%, peak %.1f%%; %" PRIu64 " preemptions\n",
		100.0 * s->kv_util_mean, 100.0 * s->kv_util_peak, s->preemptions);
	if (s->disaggregated)
		fprintf(f, "KV transfers: %" PRIu64 ", prefill end to decode queue mean %.3f ms, p50 %.3f, p99 %.3f\n",
			s->kv_transfers, s->kv_transfer_ms.mean, s->kv_transfer_ms.p50,
			s->kv_transfer_ms.p99);
	if (s->cost_usd_per_hour > 0)
		fprintf(f, "cost: $%.2f per hour, $%.4f for the run, $%.4f per million output tokens\n",
			s->cost_usd_per_hour, s->cost_usd, s->usd_per_million_output_tokens);
	if (s->swap)
		fprintf(f, "swap: %" PRIu64 " swapped out, %" PRIu64 " back in, %.3f s of PCIe transfers\n",
			s->swap_outs, s->swap_ins, s->swap_s);
	if (s->spec)
		fprintf(f, "speculation: %s, acceptance %s; %.2f tokens per verify (%.1f%% of "
			"%" PRIu64 " drafts accepted, %" PRIu64 " rejected); drafting %.1f%% and "
			"drafts verified %.1f%% of busy time\n",
			s->spec->text, s->spec->accept.name, s->spec_acceptance_length,
			100.0 * s->spec_accept_rate, s->spec_st.drafted,
			s->spec_st.drafted - s->spec_st.accepted, 100.0 * s->spec_draft_share,
			100.0 * s->spec_verify_share);
	if (s->lora)
		fprintf(f, "lora: %s; %u adapters, %d GPU slots, %u in host memory; GPU hit rate %.1f%% "
			"(%" PRIu64 " loads, %" PRIu64 " from storage, %" PRIu64 " evictions); loads %.3f s "
			"(%.1f%% of busy time), adapter GEMMs %.1f%%; %.2f adapters per step (peak %u)\n",
			s->lora->text, s->lora->n_adapters, s->lora->max_loras, s->lora->max_cpu_loras,
			100.0 * s->lora_hit_rate, s->lora_st.misses, s->lora_st.host_misses,
			s->lora_st.evictions, (double)s->lora_st.load_ns / 1e9,
			100.0 * s->lora_load_share, 100.0 * s->lora_gemm_share,
			s->lora_adapters_per_step, s->lora_st.peak_adapters);
	if (s->prefix_cache)
		fprintf(f, "prefix cache: hit rate %.1f%% (%" PRIu64 " of %" PRIu64 " prompt tokens looked up), %" PRIu64 " blocks evicted\n",
			100.0 * s->prefix_hit_rate, s->prefix_hit_tokens, s->prefix_lookup_tokens,
			s->prefix_evictions);
	if (s->kv_offload || s->kv_remote) {
		const struct kv_tier_summary *k = &s->kv_tiers;
		const struct kv_remote_stats *rs = &s->remote;

		fprintf(f, "KV tiers: hits %" PRIu64 " tokens on GPU",
			s->prefix_hit_tokens - k->host_hit_tokens - (s->kv_remote ? rs->hit_tokens : 0));
		if (s->kv_offload)
			fprintf(f, ", %" PRIu64 " from host (%" PRIu64 " blocks loaded, %.3f GB)",
				k->host_hit_tokens, k->loaded_blocks, k->h2d_bytes / 1e9);
		if (s->kv_remote)
			fprintf(f, ", %" PRIu64 " from the remote store (%" PRIu64 " blocks, %.3f GB in %"
				PRIu64 " fetches, %.3f s)", rs->hit_tokens, rs->blocks_fetched,
				rs->bytes / 1e9, rs->fetches, (double)rs->fetch_ns / 1e9);
		fputc('\n', f);
	}
	if (s->kv_offload) {
		const struct kv_tier_summary *k = &s->kv_tiers;

		fprintf(f, "host KV: %" PRIu64 " blocks offloaded (%.3f GB), %" PRIu64
			" already held, %" PRIu64 " dropped, %" PRIu64 " evicted; %" PRId64
			" of %" PRId64 " blocks held at the end\n",
			k->offloaded_blocks, k->d2h_bytes / 1e9, k->kept_blocks, k->dropped_blocks,
			k->host_evicted_blocks, k->host_held_blocks, k->host_capacity_blocks);
	}
	if (s->kv_remote)
		fprintf(f, "remote KV store: %" PRIu64 " blocks put, %" PRIu64 " evicted, capacity %"
			PRId64 " blocks\n", s->remote.puts, s->remote.evictions,
			s->remote.capacity_blocks);
	if (ri->sessions)
		session_summary_text(f, ri->sessions);
	if (s->n_tenants > 1) {
		fprintf(f, "tenants: %u, Jain's fairness of service %.3f\n", s->n_tenants,
			s->fairness_jain);
		for (uint32_t i = 0; i < s->n_tenants && i < SUMMARY_MAX_TENANTS; i++) {
			const struct tenant_summary *ts = &s->tenants[i];

			fprintf(f, "  tenant %d: %" PRIu64 " requests, TTFT p50 %.3f p99 %.3f ms, attainment %.1f%%, service %.1f tok/s\n",
				ts->tenant, ts->requests, ts->ttft_ms.p50, ts->ttft_ms.p99,
				100.0 * ts->slo_attainment, ts->service_tokens_per_s);
		}
	}
	fprintf(f, "batch per step: %.1f seqs (p50 %.0f, p99 %.0f, max %.0f), %.0f tokens (p50 %.0f, p99 %.0f, max %.0f); %" PRIu64 " steps\n",
		s->batch_seqs.mean, s->batch_seqs.p50, s->batch_seqs.p99, s->batch_seqs.max,
		s->batch_tokens.mean, s->batch_tokens.p50, s->batch_tokens.p99,
		s->batch_tokens.max, s->steps);
	/* J per output token with 4 decimals (the catalog's tables: 3), as
	 * the line always had; unmetered, the line says why it has none */
	t.shown |= 1ull << METRIC_J_TOKEN;
	if (ri->energy_meter && !ri->energy_metered) {
		fprintf(f, "energy: not metered (%s)\n", ri->energy_meter);
	} else {
		fprintf(f, "energy: %.3f kJ (prefill %.3f, decode %.3f, idle %.3f); %.3f J/request, %.4f J/output token%s%s\n",
			s->energy_j / 1e3, s->energy_prefill_j / 1e3, s->energy_decode_j / 1e3,
			s->energy_idle_j / 1e3, s->j_per_request, s->j_per_output_token,
			ri->energy_meter ? "; metered by " : "", ri->energy_meter ? ri->energy_meter : "");
		fprintf(f, "power per GPU: %.1f W average, %.1f W peak\n", s->avg_power_w_per_gpu,
			s->peak_power_w_per_gpu);
	}
	fputs("busy time by operator:", f);
	for (int op = 0; op < COST_OP_COUNT; op++) {
		if (s->op_share[op] <= 0)
			continue;
		fprintf(f, "%s %s %.1f%%", sep, cost_op_name((enum cost_op)op),
			100.0 * s->op_share[op]);
		sep = ",";
	}
	if (!sep[0])
		fputs(" -", f);
	fputc('\n', f);
	if (s->pp_stages > 0) {
		fputs("pipeline stages busy:", f);
		for (int k = 0; k < s->pp_stages; k++)
			fprintf(f, "%s %.1f%%", k ? "," : "", 100.0 * s->stage_busy_share[k]);
		fputs(" of the run; bubbles against the busiest stage:", f);
		for (int k = 0; k < s->pp_stages; k++)
			fprintf(f, "%s %.1f%%", k ? "," : "", 100.0 * s->stage_bubble_share[k]);
		fputc('\n', f);
	}
	if (s->sample_interval_ns > s->sample_requested_ns && s->sample_requested_ns > 0)
		fprintf(f, "time series: sampled every %.6g s, not the %.6g s asked for, to stay within %d sampling times and %d samples (%" PRIu64 " times kept)\n",
			(double)s->sample_interval_ns / 1e9, (double)s->sample_requested_ns / 1e9,
			TSERIES_MAX_TIMES, TSERIES_MAX_SAMPLES, s->sampling_times);
	report_text_other_figures(f, s, t.shown);
}

/* ---- requests.csv ------------------------------------------------------ */


static char *put_u64(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *put_i64(char *p, int64_t v)
{
	if (v < 0) {
		*p++ = '-';
		return put_u64(p, (uint64_t)0 - (uint64_t)v);
	}
	return put_u64(p, (uint64_t)v);
}

/* v / 10^6 in fixed point, trailing zeros dropped: 1500000 -> "1.5".
 * Used for ns -> ms and uJ -> J. */
static char *put_micro(char *p, int64_t v)
{
	uint64_t a, frac;
	char digits[6];
	int n = 6;

	if (v < 0)
		*p++ = '-';
	a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	p = put_u64(p, a / 1000000);
	frac = a % 1000000;
	if (!frac)
		return p;
	for (int i = 5; i >= 0; i--) {
		digits[i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	while (n > 0 && digits[n - 1] == '0')
		n--;
	*p++ = '.';
	memcpy(p, digits, (size_t)n);
	return p + n;
}

/* A field of at most room bytes, quoted when it holds a separator, a quote
 * or a line break (reasons are short static strings; longer ones are cut). */
static char *put_csv_str(char *p, const char *s, size_t room)
{
	size_t len = strlen(s);

	if (strcspn(s, ",\"\r\n") == len) {
		if (len > room)
			len = room;
		memcpy(p, s, len);
		return p + len;
	}
	if (room < 2)
		return p;
	*p++ = '"';
	room -= 2;
	for (; *s; s++) {
		size_t need = *s == '"' ? 2 : 1;

		if (need > room)
			break;
		if (*s == '"')
			*p++ = '"';
		*p++ = *s;
		room -= need;
	}
	*p++ = '"';
	return p;
}

static const char csv_header[] =
	"id,instance,tenant,priority,state,arrival_ms,prompt_tokens,output_tokens,"
	"first_scheduled_ms,first_token_ms,finish_ms,ttft_ms,tpot_ms,e2e_ms,queue_ms,"
	"preemptions,energy_j,reject_reason\n";

/* One row; the field conditions mirror request_*_ms() in metrics.c. */
static size_t csv_row(char *line, size_t cap, const struct req_record *q, bool metered)
{
	char *p = line;
	bool done = q->state == REQ_FINISHED;
	int64_t arr = q->arrival_ns;

	p = put_u64(p, q->id);
	*p++ = ',';
	if (q->instance >= 0)
		p = put_i64(p, q->instance);
	*p++ = ',';
	p = put_i64(p, q->tenant_id);
	*p++ = ',';
	p = put_i64(p, q->priority);
	*p++ = ',';
	p = put_csv_str(p, metrics_state_name(q->state), 16);
	*p++ = ',';
	p = put_micro(p, arr);
	*p++ = ',';
	p = put_i64(p, q->prompt_tokens);
	*p++ = ',';
	p = put_i64(p, q->output_tokens);
	*p++ = ',';
	if (q->first_sched_ns >= 0)
		p = put_micro(p, q->first_sched_ns);
	*p++ = ',';
	if (q->first_token_ns >= 0)
		p = put_micro(p, q->first_token_ns);
	*p++ = ',';
	if (q->finish_ns >= 0)
		p = put_micro(p, q->finish_ns);
	*p++ = ',';
	if (q->first_token_ns >= 0 && arr >= 0)
		p = put_micro(p, q->first_token_ns - arr);
	*p++ = ',';
	if (done && q->output_tokens > 1 && q->first_token_ns >= 0 && q->finish_ns >= 0)
		p = put_micro(p, llround((double)(q->finish_ns - q->first_token_ns) /
					 (q->output_tokens - 1)));
	*p++ = ',';
	if (done && q->finish_ns >= 0 && arr >= 0)
		p = put_micro(p, q->finish_ns - arr);
	*p++ = ',';
	if (q->first_sched_ns >= 0 && arr >= 0)
		p = put_micro(p, q->first_sched_ns - arr);
	*p++ = ',';
	p = put_i64(p, q->preemptions);
	*p++ = ',';
	if (!metered)
		;                     /* no meter read: empty, not 0 */
	else if (isfinite(q->energy_j) && fabs(q->energy_j) < 9e12)
		p = put_micro(p, llround(q->energy_j * 1e6));
	else
		p += snprintf(p, 32, "%.9g", q->energy_j);
	*p++ = ',';
	if (q->state == REQ_REJECTED && q->reject_reason)
		p = put_csv_str(p, q->reject_reason, cap - (size_t)(p - line) - 4);
	*p++ = '\n';
	return (size_t)(p - line);
}

/* A session workload's columns, after the row's reject_reason: the call's
 * session, turn (step), branch within a fanned-out step, and the prompt
 * tokens its prefix lookup found cached (c: the call, k: its index). */
static const char csv_session_header[] = ",session,turn,branch,cached_tokens\n";

static size_t csv_session_cols(char *end, const struct wl_call *c, uint64_t k,
			       const struct req_record *q)
{
	char *p = end - 1;   /* over the row's '\n' */

	*p++ = ',';
	p = put_u64(p, c->session);
	*p++ = ',';
	p = put_u64(p, c->step);
	*p++ = ',';
	p = put_u64(p, k - c->step_first);
	*p++ = ',';
	p = put_i64(p, q->cached_tokens);
	*p++ = '\n';
	return (size_t)(p - end);
}

/* With speculative decoding (--spec), after the row's other columns: the
 * request's steps that verified drafts and the drafts they accepted (its
 * acceptance length is 1 + accepted / verifies). */
static const char csv_spec_header[] = ",spec_verifies,spec_accepted\n";

static size_t csv_spec_cols(char *end, const struct req_record *q)
{
	char *p = end - 1;   /* over the row's '\n' */

	*p++ = ',';
	p = put_u64(p, q->spec_verifies);
	*p++ = ',';
	p = put_u64(p, q->spec_accepted);
	*p++ = '\n';
	return (size_t)(p - end);
}

/* With multi-LoRA serving (--lora), after the others: the adapter the
 * request named (-1: none). */
static size_t csv_lora_col(char *end, const struct req_record *q)
{
	char *p = end - 1;   /* over the row's '\n' */

	*p++ = ',';
	p = put_i64(p, q->adapter);
	*p++ = '\n';
	return (size_t)(p - end);
}

/* Rows are formatted into a chunk of CSV_CHUNK bytes and written a chunk
 * at a time: one fwrite() (and its stream lock) per chunk instead of one
 * per row. */
#define CSV_CHUNK (256u << 10)
#define CSV_ROW_MAX 1024         /* csv_row() never writes more */

static int write_requests_csv(const char *dir, const struct engine_results *r, bool metered,
			      const struct wl_call *calls, struct ss_error *err)
{
	struct ss_file of;
	char *chunk;
	size_t used = 0;
	int ret;

	chunk = malloc(CSV_CHUNK);
	if (!chunk)
		return ss_error_set(err, -ENOMEM, dir, 0, "requests.csv: out of memory");
	ret = outfile_open(&of, dir, "requests.csv", 0, err);
	if (ret < 0) {
		free(chunk);
		return ret;
	}
	fwrite(csv_header, 1, sizeof(csv_header) - 2, of.f);   /* without its '\n' */
	if (calls)
		fwrite(csv_session_header, 1, sizeof(csv_session_header) - 2, of.f);
	if (r->spec)
		fwrite(csv_spec_header, 1, sizeof(csv_spec_header) - 2, of.f);
	fputs(r->lora ? ",adapter\n" : "\n", of.f);
	for (uint64_t i = 0; i < r->n_req; i++) {
		if (CSV_CHUNK - used < CSV_ROW_MAX) {
			if (fwrite(chunk, 1, used, of.f) != used)
				break;    /* reported by outfile_commit() through ferror() */
			used = 0;
		}
		/* a session row keeps room for its 4 columns (at most 46 bytes),
		 * a speculative one for its 2 (at most 22) */
		used += csv_row(chunk + used, CSV_ROW_MAX - (calls ? 64 : 0) - (r->spec ? 32 : 0) -
				(r->lora ? 16 : 0), &r->req[i], metered);
		if (calls)
			used += csv_session_cols(chunk + used, &calls[i], i, &r->req[i]);
		if (r->spec)
			used += csv_spec_cols(chunk + used, &r->req[i]);
		if (r->lora)
			used += csv_lora_col(chunk + used, &r->req[i]);
	}
	if (used)
		fwrite(chunk, 1, used, of.f);
	free(chunk);
	return outfile_commit(&of, err);
}

/* ---- the output directory ---------------------------------------------- */

static int write_summary_txt(const char *dir, const struct summary *s,
			     const struct run_info *ri, struct ss_error *err)
{
	struct ss_file of;
	int ret;

	ret = outfile_open(&of, dir, "summary.txt", 0, err);
	if (ret < 0)
		return ret;
	report_summary_text(of.f, s, ri);
	return outfile_commit(&of, err);
}

static int write_summary_json(const char *dir, const char *doc_text, struct ss_error *err)
{
	struct ss_file of;
	int ret;

	ret = outfile_open(&of, dir, "summary.json", 0, err);
	if (ret < 0)
		return ret;
	fputs(doc_text, of.f);      /* json_dumps() text: REPORT_JSON_FLAGS, no newline */
	return outfile_commit(&of, err);
}

/* The run's plots, their titles naming the scenario and the TTFT and TPOT
 * CDFs marking the SLOs (docs/outputs.md). */
static int plot_run(const char *dir, const struct summary *s, const struct run_info *ri,
		    const struct engine_results *r, struct plot_outcome *po, struct ss_error *err)
{
	const char *wl = ri->workload ? ri->workload : "";
	char line[512];
	struct plot_scenario sc = { line, s->slo.ttft_ms, s->slo.tpot_ms };

	wl = strrchr(wl, '/') ? strrchr(wl, '/') + 1 : wl;
	if (ri->pools)
		snprintf(line, sizeof(line), "%s on %s, %s", ri->model, ri->pools, wl);
	else
		snprintf(line, sizeof(line), "%s on %ux %s tp%d, %s, %s", ri->model, ri->n_instances,
			 ri->gpu, ri->tp, ri->policy ? ri->policy : "", wl);
	/* the line is written as a gnuplot string by plots_gp_string() */
	return plots_write_scenario(dir, r, !run_info_unmetered(ri), &sc, ri->plot_timeout_ns, po,
				    err);
}

int report_write_dir(const char *dir, const struct summary *s, const struct run_info *ri,
		     const struct engine_results *r, struct plot_outcome *plots,
		     struct ss_error *err)
{
	json_t *doc = NULL;
	char *doc_text = NULL;
	struct plot_outcome po = { 0 };
	int ret;

	ret = outdir_mkdirs(dir, err);
	if (ret < 0)
		goto out;
	/* summary.json, written last, marks a complete directory: a stale one
	 * from an earlier run must not survive a failure of this one */
	ret = outdir_remove(dir, "summary.json", err);
	if (ret < 0)
		goto out;
	doc = report_summary_json(s, ri);
	if (doc)
		doc_text = json_dumps(doc, REPORT_JSON_FLAGS);
	if (!doc || !doc_text) {
		ret = ss_error_set(err, -ENOMEM, dir, 0, "summary.json: out of memory");
		goto out;
	}

	ret = write_requests_csv(dir, r, !run_info_unmetered(ri), ri->session_calls, err);
	if (ret < 0)
		goto out;
	ret = results_db_write(dir, ri, r, doc_text, err);
	if (ret < 0)
		goto out;
	ret = plot_run(dir, s, ri, r, &po, err);
	if (ret < 0)
		goto out;
	ret = write_summary_txt(dir, s, ri, err);
	if (ret < 0)
		goto out;
	ret = report_html_write(dir, s, ri, &po, err);
	if (ret < 0)
		goto out;
	ret = write_summary_json(dir, doc_text, err);
out:
	if (plots)
		*plots = po;
	free(doc_text);
	json_decref(doc);
	return ret;
}
