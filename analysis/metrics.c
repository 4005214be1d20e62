/* servesim — run metrics (definitions: docs/metrics.md).
 *
 * Per-request distributions are exact: the values of one metric are
 * collected into a single scratch array (one double per completed request,
 * reused for every metric), sorted (metrics_sort: a radix sort on the
 * doubles' bits) and read with ss_quantile_sorted() (numpy's linear
 * interpolation, as vLLM's benchmark).  For 10^6 requests that is 8 MB
 * and four sorts.  Per-token and per-step quantities (ITL, batch sizes)
 * come from the engine's streaming histograms.
 */
#include "metrics.h"
#include "metrics-int.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bigmem.h"

#define NS_PER_MS 1e6
#define NS_PER_S 1e9

static bool finished(const struct req_record *r)
{
	return r->state == REQ_FINISHED;
}

double request_ttft_ms(const struct req_record *r)
{
	if (r->first_token_ns < 0 || r->arrival_ns < 0)
		return NAN;
	return (double)(r->first_token_ns - r->arrival_ns) / NS_PER_MS;
}

/* (finish - first token) / (output tokens - 1); the output length is the
 * request's real one (r->output_tokens), which a finished request has
 * emitted entirely. */
double request_tpot_ms(const struct req_record *r)
{
	if (!finished(r) || r->output_tokens <= 1 || r->first_token_ns < 0 ||
	    r->finish_ns < 0)
		return NAN;
	return (double)(r->finish_ns - r->first_token_ns) /
	       (double)(r->output_tokens - 1) / NS_PER_MS;
}

double request_e2e_ms(const struct req_record *r)
{
	if (!finished(r) || r->finish_ns < 0 || r->arrival_ns < 0)
		return NAN;
	return (double)(r->finish_ns - r->arrival_ns) / NS_PER_MS;
}

double request_queue_ms(const struct req_record *r)
{
	if (r->first_sched_ns < 0 || r->arrival_ns < 0)
		return NAN;
	return (double)(r->first_sched_ns - r->arrival_ns) / NS_PER_MS;
}

bool request_meets_slo(const struct req_record *r, const struct slo_config *slo)
{
	double v;

	if (!finished(r))
		return false;
	if (!slo)
		return true;
	if (slo->ttft_ms > 0) {
		v = request_ttft_ms(r);
		if (isnan(v) || v > slo->ttft_ms)
			return false;
	}
	/* one output token: no inter-token time, the TPOT target is met */
	if (slo->tpot_ms > 0 && r->output_tokens > 1) {
		v = request_tpot_ms(r);
		if (isnan(v) || v > slo->tpot_ms)
			return false;
	}
	if (slo->tbt_ms > 0 && (double)r->max_gap_ns / 1e6 > slo->tbt_ms)
		return false;
	if (slo->e2e_ms > 0) {
		v = request_e2e_ms(r);
		if (isnan(v) || v > slo->e2e_ms)
			return false;
	}
	return true;
}

const char *metrics_state_name(enum req_state st)
{
	switch (st) {
	case REQ_PENDING:
		return "pending";
	case REQ_QUEUED:
		return "queued";
	case REQ_RUNNING:
		return "running";
	case REQ_MIGRATING:
		return "migrating";
	case REQ_FINISHED:
		return "finished";
	case REQ_REJECTED:
		return "rejected";
	}
	return "unknown";
}

uint64_t metrics_collect(const struct engine_results *r, enum req_metric m, double *out)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < r->n_req; i++) {
		const struct req_record *q = &r->req[i];
		double v = NAN;

		if (!finished(q))
			continue;
		switch (m) {
		case REQ_METRIC_TTFT:
			v = request_ttft_ms(q);
			break;
		case REQ_METRIC_TPOT:
			v = request_tpot_ms(q);
			break;
		case REQ_METRIC_E2E:
			v = request_e2e_ms(q);
			break;
		case REQ_METRIC_QUEUE:
			v = request_queue_ms(q);
			break;
		}
		if (!isnan(v))
			out[n++] = v;
	}
	return n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* A double's bits as an unsigned key with the same order (NaN-free input):
 * negative values have every bit flipped, the others only the sign bit. */
static uint64_t sort_key(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u >> 63 ? ~u : u | (1ULL << 63);
}

static double from_key(uint64_t k)
{
	uint64_t u = k >> 63 ? k & ~(1ULL << 63) : ~k;
	double d;

	memcpy(&d, &u, sizeof(d));
	return d;
}

#define RADIX_BITS 16
#define RADIX_SIZE (1u << RADIX_BITS)

/* LSD radix sort on the keys: four passes of 16 bits, about 6x faster than
 * qsort for 10^6 values (the per-metric sort dominated summary_compute).
 * The result is the same sorted array qsort gives.  Falls back to qsort for
 * small arrays or when the temporary buffers cannot be allocated. */
void metrics_sort(double *v, uint64_t n)
{
	uint64_t *a = NULL, *b = NULL, *t;
	uint64_t *count = NULL;

	if (n < 4096)
		goto use_qsort;
	a = malloc(n * sizeof(*a));
	b = malloc(n * sizeof(*b));
	count = malloc(RADIX_SIZE * sizeof(*count));
	if (!a || !b || !count)
		goto use_qsort;
	ss_advise_huge(a, n * sizeof(*a));
	ss_advise_huge(b, n * sizeof(*b));
	for (uint64_t i = 0; i < n; i++)
		a[i] = sort_key(v[i]);
	for (unsigned shift = 0; shift < 64; shift += RADIX_BITS) {
		uint64_t sum = 0;

		memset(count, 0, RADIX_SIZE * sizeof(*count));
		for (uint64_t i = 0; i < n; i++)
			count[(a[i] >> shift) & (RADIX_SIZE - 1)]++;
		if (count[(a[0] >> shift) & (RADIX_SIZE - 1)] == n)
			continue;        /* every key has this digit: nothing moves */
		for (unsigned d = 0; d < RADIX_SIZE; d++) {
			uint64_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (uint64_t i = 0; i < n; i++)
			b[count[(a[i] >> shift) & (RADIX_SIZE - 1)]++] = a[i];
		t = a;
		a = b;
		b = t;
	}
	for (uint64_t i = 0; i < n; i++)
		v[i] = from_key(a[i]);
	free(a);
	free(b);
	free(count);
	return;
use_qsort:
	free(a);
	free(b);
	free(count);
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_double);
}

/* The quantiles metrics_dist*() give, in struct dist order. */
static const double dist_qs[4] = { 0.50, 0.90, 0.95, 0.99 };

/* d of v[0..n) (n > 0), its values summed in order to sum, from the ranks
 * ss_quantile_sorted() reads and the last: in place. */
static void dist_read(struct dist *d, const double *v, uint64_t n, double sum)
{
	d->mean = sum / (double)n;
	d->p50 = ss_quantile_sorted(v, n, dist_qs[0]);
	d->p90 = ss_quantile_sorted(v, n, dist_qs[1]);
	d->p95 = ss_quantile_sorted(v, n, dist_qs[2]);
	d->p99 = ss_quantile_sorted(v, n, dist_qs[3]);
	d->max = v[n - 1];
}

/* d's count, and the sum of v[0..n) in order (0 for n 0, d all 0). */
static double dist_begin(struct dist *d, const double *v, uint64_t n)
{
	double sum = 0;

	memset(d, 0, sizeof(*d));
	d->n = n;
	for (uint64_t i = 0; i < n; i++)
		sum += v[i];
	return sum;
}

/* Mean, percentiles and max of v[0..n), which this sorts. */
void metrics_dist_sorted(struct dist *d, double *v, uint64_t n)
{
	double sum = dist_begin(d, v, n);

	if (n == 0)
		return;
	metrics_sort(v, n);
	dist_read(d, v, n, sum);
}

/* Put into v[k], for every rank k in ks[0..nk) (ascending, each within
 * [lo, hi)), the value a sort of v[lo..hi) would put there; the rest of
 * the range is left in some order.  A quickselect over several ranks at
 * once: three-way partitions around a median of three, recursing only into
 * the parts that hold a rank.  Expected O(n) against the sort's O(n log n);
 * a range that has not shrunk enough after `depth` partitions is sorted
 * instead (O(n log n) at worst, whatever the input). */
static void select_ranks(double *v, uint64_t lo, uint64_t hi, const uint64_t *ks, int nk,
			 int depth)
{
	while (nk > 0 && hi - lo > 1) {
		uint64_t lt = lo, i = lo, gt = hi, mid = lo + (hi - lo) / 2;
		double a = v[lo], b = v[mid], c = v[hi - 1], p;
		int nl = 0, ng;

		if (hi - lo <= 32 || depth-- == 0) {
			metrics_sort(v + lo, hi - lo);
			return;
		}
		/* the median of a, b and c */
		p = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
		/* v[lo..lt) < p, v[lt..i) == p, v[gt..hi) > p */
		while (i < gt) {
			double x = v[i];

			if (x < p) {
				v[i++] = v[lt];
				v[lt++] = x;
			} else if (x > p) {
				v[i] = v[--gt];
				v[gt] = x;
			} else {
				i++;
			}
		}
		/* ranks below lt are in the lower part; ranks in [lt, gt)
		 * hold p already; the rest are in the upper part */
		while (nl < nk && ks[nl] < lt)
			nl++;
		ng = nl;
		while (ng < nk && ks[ng] < gt)
			ng++;
		if (nl > 0)
			select_ranks(v, lo, lt, ks, nl, depth);
		ks += ng;
		nk -= ng;
		lo = gt;
	}
}

/* metrics_dist_sorted()'s figures, bit for bit, without sorting v[0..n):
 * the mean sums v in the same order, and the percentiles and max read the
 * same ranks, which select_ranks() puts in place. */
void metrics_dist(struct dist *d, double *v, uint64_t n)
{
	uint64_t ks[2 * 4 + 1];
	int nk = 0;
	double sum = dist_begin(d, v, n);

	if (n == 0)
		return;
	/* the ranks ss_quantile_sorted() reads: floor(q (n - 1)) and the
	 * one after it, and the last (the max) */
	for (int j = 0; j < 4; j++) {
		uint64_t k = (uint64_t)(dist_qs[j] * (double)(n - 1));

		if (nk == 0 || ks[nk - 1] < k)
			ks[nk++] = k;
		if (k + 1 < n && ks[nk - 1] < k + 1)
			ks[nk++] = k + 1;
	}
	if (ks[nk - 1] < n - 1)
		ks[nk++] = n - 1;
	/* 2 log2(n) + 8 partitions before a range is sorted instead */
	select_ranks(v, 0, n, ks, nk, 2 * (64 - __builtin_clzll(n)) + 8);
	dist_read(d, v, n, sum);
}

/* The same from a histogram, every value multiplied by scale. */
static void dist_hist(struct dist *d, const struct ss_hist *h, double scale)
{
	memset(d, 0, sizeof(*d));
	if (!h || h->count == 0)
		return;
	d->n = h->count;
	d->mean = ss_hist_mean(h) * scale;
	d->p50 = ss_hist_quantile(h, 0.50) * scale;
	d->p90 = ss_hist_quantile(h, 0.90) * scale;
	d->p95 = ss_hist_quantile(h, 0.95) * scale;
	d->p99 = ss_hist_quantile(h, 0.99) * scale;
	d->max = (double)h->max * scale;
}

/* Count one rejection under its reason; reasons beyond the table's size
 * share its last slot, "other". */
static void count_reason(struct summary *s, const char *reason)
{
	if (!reason)
		reason = "unknown";
	for (int i = 0; i < s->n_reject_reasons; i++) {
		if (strcmp(s->reject_reasons[i].reason, reason) == 0) {
			s->reject_reasons[i].count++;
			return;
		}
	}
	if (s->n_reject_reasons < SUMMARY_MAX_REASONS - 1) {
		s->reject_reasons[s->n_reject_reasons].reason = reason;
		s->reject_reasons[s->n_reject_reasons].count = 1;
		s->n_reject_reasons++;
		return;
	}
	if (s->n_reject_reasons == SUMMARY_MAX_REASONS - 1) {
		s->reject_reasons[s->n_reject_reasons].reason = "other";
		s->reject_reasons[s->n_reject_reasons].count = 0;
		s->n_reject_reasons++;
	}
	s->reject_reasons[SUMMARY_MAX_REASONS - 1].count++;
}

/* Request counts, throughput, SLO attainment and goodput: one pass. */
static void requests_pass(struct summary *s, const struct engine_results *r,
			  uint64_t *out_tokens_ret)
{
	int64_t first_arrival = INT64_MAX, last_finish = INT64_MIN;
	uint64_t in_tokens = 0, out_tokens = 0, good = 0;

	for (uint64_t i = 0; i < r->n_req; i++) {
		const struct req_record *q = &r->req[i];

		if (q->arrival_ns < first_arrival)
			first_arrival = q->arrival_ns;
		if (q->state == REQ_REJECTED) {
			s->rejected++;
			count_reason(s, q->reject_reason);
			continue;
		}
		if (!finished(q)) {
			s->unfinished++;
			continue;
		}
		s->completed++;
		in_tokens += (uint64_t)(q->prompt_tokens > 0 ? q->prompt_tokens : 0);
		out_tokens += (uint64_t)(q->output_tokens > 0 ? q->output_tokens : 0);
		if (q->finish_ns > last_finish)
			last_finish = q->finish_ns;
		if (request_meets_slo(q, &s->slo))
			good++;
	}
	s->requests = r->n_req;
	if (s->completed > 0 && last_finish > first_arrival)
		s->duration_s = (double)(last_finish - first_arrival) / NS_PER_S;
	if (s->duration_s > 0) {
		s->requests_per_s = (double)s->completed / s->duration_s;
		s->input_tokens_per_s = (double)in_tokens / s->duration_s;
		s->output_tokens_per_s = (double)out_tokens / s->duration_s;
		s->goodput_rps = (double)good / s->duration_s;
		if (s->n_gpus > 0)
			s->goodput_rps_per_gpu = s->goodput_rps / s->n_gpus;
	}
	if (r->n_req > 0)
		s->slo_attainment = (double)good / (double)r->n_req;
	*out_tokens_ret = out_tokens;
}

/* Instance i's KV tiers (--kv-offload) into the run's and its own. */
static void tier_add(struct summary *s, uint32_t i, const struct instance_stats *st)
{
	struct kv_tier_summary t = {
		.gpu_hit_tokens = st->prefix_hit_tokens - st->host_hit_tokens - st->remote_hit_tokens,
		.host_hit_tokens = st->host_hit_tokens,
		.offloaded_blocks = st->offload_blocks,
		.kept_blocks = st->offload_kept_blocks,
		.dropped_blocks = st->offload_dropped_blocks,
		.loaded_blocks = st->load_blocks,
		.host_evicted_blocks = st->host_evictions,
		.host_held_blocks = st->host_cached_blocks,
		.host_peak_blocks = st->host_peak_blocks,
		.host_capacity_blocks = st->host_cap_blocks,
		.d2h_bytes = st->offload_bytes,
		.h2d_bytes = st->load_bytes,
	};
	struct kv_tier_summary *a = &s->kv_tiers;

	s->kv_offload = true;
	if (i < SUMMARY_MAX_TIER_INSTANCES) {
		s->tier_inst[i] = t;
		s->n_tier_instances = i + 1;
	}
	a->gpu_hit_tokens += t.gpu_hit_tokens;
	a->host_hit_tokens += t.host_hit_tokens;
	a->offloaded_blocks += t.offloaded_blocks;
	a->kept_blocks += t.kept_blocks;
	a->dropped_blocks += t.dropped_blocks;
	a->loaded_blocks += t.loaded_blocks;
	a->host_evicted_blocks += t.host_evicted_blocks;
	a->host_held_blocks += t.host_held_blocks;
	if (t.host_peak_blocks > a->host_peak_blocks)
		a->host_peak_blocks = t.host_peak_blocks;
	a->host_capacity_blocks += t.host_capacity_blocks;
	a->d2h_bytes += t.d2h_bytes;
	a->h2d_bytes += t.h2d_bytes;
}

/* KV, batches, steps, preemptions, energy and operator shares. */
static int instances_pass(struct summary *s, const struct engine_results *r,
			  uint64_t out_tokens, struct ss_error *err)
{
	struct ss_hist seqs = { 0 }, tokens = { 0 };
	double kv_block_ns = 0, kv_capacity = 0, op_total = 0;
	double op_ns[COST_OP_COUNT] = { 0 };
	double oog_ns = 0, busy_ns = 0;
	double end_s = r->end_ns > 0 ? (double)r->end_ns / NS_PER_S : 0;
	int ret = 0;

	if (ss_hist_init(&seqs) || ss_hist_init(&tokens)) {
		ret = ss_error_set(err, -ENOMEM, NULL, 0,
				   "summary: out of memory for batch histograms");
		goto out;
	}

	for (uint32_t i = 0; i < r->n_instances; i++) {
		const struct instance_stats *st = &r->inst[i];
		int64_t idle_ns = r->end_ns - st->busy_ns;

		s->preemptions += st->preemptions;
		s->swap_outs += st->swap_outs;
		s->swap_ins += st->swap_ins;
		s->swap_s += (double)st->swap_ns / NS_PER_S;
		s->prefix_lookup_tokens += st->prefix_lookup_tokens;
		s->prefix_hit_tokens += st->prefix_hit_tokens;
		s->prefix_evictions += st->prefix_evictions;
		if (st->host_cap_blocks > 0)
			tier_add(s, i, st);
		s->steps += st->steps;
		kv_block_ns += st->kv_block_ns;
		kv_capacity += (double)st->total_blocks * (double)(r->end_ns > 0 ? r->end_ns : 0);
		if (st->total_blocks > 0) {
			double peak = (double)st->peak_used_blocks / st->total_blocks;

			if (peak > s->kv_util_peak)
				s->kv_util_peak = peak;
		}
		ss_hist_merge(&seqs, &st->batch_seqs);
		ss_hist_merge(&tokens, &st->batch_tokens);
		s->energy_busy_j += st->busy_energy_j;
		s->energy_prefill_j += st->prefill_energy_j;
		s->energy_decode_j += st->decode_energy_j;
		{
			int g = st->gpus > 0 ? st->gpus : r->tp > 0 ? r->tp : 1;

			if (st->peak_power_w / g > s->peak_power_w_per_gpu)
				s->peak_power_w_per_gpu = st->peak_power_w / g;
		}
		s->out_of_grid += st->out_of_grid;
		oog_ns += (double)st->out_of_grid_ns;
		busy_ns += (double)st->busy_ns;
		spec_stats_add(&s->spec_st, &st->spec);
		lora_stats_add(&s->lora_st, &st->lora);
		if (idle_ns > 0)
			s->energy_idle_j += (st->idle_power_w > 0 ? st->idle_power_w : r->idle_power_w) *
					    (double)idle_ns / NS_PER_S;
		s->cost_usd_per_hour += st->cost_per_hour;
		s->kv_transfers += st->kv_transfers_out;
		for (int op = 0; op < COST_OP_COUNT; op++)
			op_ns[op] += (double)st->op_ns[op];
	}
	if (kv_capacity > 0)
		s->kv_util_mean = kv_block_ns / kv_capacity;
	dist_hist(&s->batch_seqs, &seqs, 1.0);
	dist_hist(&s->batch_tokens, &tokens, 1.0);

	for (int op = 0; op < COST_OP_COUNT; op++)
		op_total += op_ns[op];
	for (int op = 0; op < COST_OP_COUNT; op++)
		s->op_share[op] = op_total > 0 ? op_ns[op] / op_total : 0;

	s->out_of_grid_share = busy_ns > 0 ? oog_ns / busy_ns : 0;
	if (r->spec) {
		const struct spec_stats *sp = &s->spec_st;

		s->spec = r->spec;
		s->spec_acceptance_length = sp->verifies ?
			(double)sp->spec_emitted / (double)sp->verifies : 0;
		s->spec_accept_rate = sp->drafted ? (double)sp->accepted / (double)sp->drafted : 0;
		s->spec_draft_share = busy_ns > 0 ? (double)sp->draft_ns / busy_ns : 0;
		s->spec_verify_share = busy_ns > 0 ? (double)sp->verify_ns / busy_ns : 0;
	}
	if (r->lora) {
		const struct lora_stats *ls = &s->lora_st;
		uint64_t seen = ls->hits + ls->misses;

		s->lora = r->lora;
		s->lora_hit_rate = seen ? (double)ls->hits / (double)seen : 0;
		s->lora_load_share = busy_ns > 0 ? (double)ls->load_ns / busy_ns : 0;
		s->lora_gemm_share = busy_ns > 0 ? (double)ls->gemm_ns / busy_ns : 0;
		s->lora_adapters_per_step = ls->steps ?
			(double)ls->adapter_steps / (double)ls->steps : 0;
	}
	{
		double stage_ns[64] = { 0 }, n_with[64] = { 0 }, top = 0;

		for (uint32_t i = 0; i < r->n_instances; i++)
			for (int k = 0; r->inst[i].stage_busy_ns && k < r->inst[i].pp && k < 64; k++) {
				stage_ns[k] += (double)r->inst[i].stage_busy_ns[k];
				n_with[k] += 1.0;
				if (k + 1 > s->pp_stages)
					s->pp_stages = k + 1;
			}
		for (int k = 0; k < s->pp_stages; k++) {
			stage_ns[k] /= n_with[k];   /* per instance */
			if (stage_ns[k] > top)
				top = stage_ns[k];
		}
		for (int k = 0; k < s->pp_stages; k++) {
			s->stage_busy_share[k] = r->end_ns > 0 ? stage_ns[k] / (double)r->end_ns : 0;
			s->stage_bubble_share[k] = top > 0 ? 1.0 - stage_ns[k] / top : 0;
		}
	}
	s->sample_requested_ns = r->sample_requested_ns;
	s->sample_interval_ns = r->sample_interval_ns;
	s->sampling_times = r->n_instances ? r->n_samples / r->n_instances : 0;
	for (int op = 0; op < COST_OP_COUNT; op++)
		s->op_backend[op] = r->op_backend[op];
	s->energy_j = s->energy_busy_j + s->energy_idle_j;
	s->j_per_request = s->completed ? s->energy_j / (double)s->completed : 0;
	s->j_per_output_token = out_tokens > 0 ? s->energy_j / (double)out_tokens : 0;
	if (end_s > 0 && s->n_gpus > 0)
		s->avg_power_w_per_gpu = s->energy_j / end_s / s->n_gpus;
out:
	ss_hist_release(&seqs);
	ss_hist_release(&tokens);
	return ret;
}

/* Per-tenant figures and Jain's fairness index of service (scratch holds
 * at least n_req doubles). */
static void tenants_pass(struct summary *s, const struct engine_results *r, double *scratch)
{
	double sum = 0, sum2 = 0, window_s = (double)r->service_window_ns / NS_PER_S;

	s->n_tenants = r->n_tenants;
	for (uint32_t t = 0; t < r->n_tenants; t++) {
		double x = window_s > 0 ? r->tenant_service[t] / window_s : 0;

		sum += x;
		sum2 += x * x;
	}
	s->fairness_jain = sum2 > 0 ? sum * sum / (r->n_tenants * sum2) : 1.0;
	for (uint32_t t = 0; t < r->n_tenants && t < SUMMARY_MAX_TENANTS; t++) {
		struct tenant_summary *ts = &s->tenants[t];
		uint64_t n_ttft = 0, n_tpot = 0, good = 0;

		ts->tenant = r->tenant_ids[t];
		ts->service_tokens_per_s = window_s > 0 ? r->tenant_service[t] / window_s : 0;
		for (uint64_t i = 0; i < r->n_req; i++) {
			const struct req_record *q = &r->req[i];

			if (q->tenant != (int32_t)t)
				continue;
			ts->requests++;
			if (q->state == REQ_REJECTED)
				ts->rejected++;
			if (!finished(q))
				continue;
			ts->completed++;
			scratch[n_ttft++] = request_ttft_ms(q);
			if (request_meets_slo(q, &s->slo))
				good++;
		}
		metrics_dist(&ts->ttft_ms, scratch, n_ttft);
		for (uint64_t i = 0; i < r->n_req; i++) {
			const struct req_record *q = &r->req[i];

			if (q->tenant == (int32_t)t && finished(q) && !isnan(request_tpot_ms(q)))
				scratch[n_tpot++] = request_tpot_ms(q);
		}
		metrics_dist(&ts->tpot_ms, scratch, n_tpot);
		ts->slo_attainment = ts->requests ? (double)good / (double)ts->requests : 0;
	}
}

/* What summary_compute() and summary_compute_slo() begin with: checks,
 * SLOs, GPUs and instances. */
static int summary_begin(struct summary *s, const struct engine_results *r,
			 const struct slo_config *slo, int tp, struct ss_error *err)
{
	memset(s, 0, sizeof(*s));
	if (tp < 1)
		return ss_error_set(err, -EINVAL, NULL, 0,
				    "summary: tensor-parallel degree %d, expected >= 1", tp);
	if (r->n_req > 0 && !r->req)
		return ss_error_set(err, -EINVAL, NULL, 0, "summary: no request array");
	if (r->n_instances > 0 && !r->inst)
		return ss_error_set(err, -EINVAL, NULL, 0, "summary: no instance statistics");
	if (slo)
		s->slo = *slo;
	/* instances as deployed; with attention DP, a rank's KV blocks times
	 * the ranks of an instance */
	s->n_instances = r->n_deployed > 0 ? r->n_deployed : r->n_instances;
	s->attention_dp = r->attention_dp > 1 ? r->attention_dp : 1;
	s->n_gpus = (int)r->n_instances * tp;
	if (r->n_instances > 0 && r->inst[0].gpus > 0) {
		/* pools may differ in tp */
		s->n_gpus = 0;
		for (uint32_t i = 0; i < r->n_instances; i++)
			s->n_gpus += r->inst[i].gpus;
	}
	s->kv_blocks_per_instance = r->kv_blocks_per_instance * s->attention_dp;
	s->cost_model = r->cost_model_name;
	s->cost_reference = r->cost_reference;
	s->engine = r->engine_name ? r->engine_name : "none";
	return 0;
}

/* The TTFT, TPOT and E2E distributions of the run (s->completed > 0),
 * in a scratch array of s->completed values that the caller frees; NULL
 * with err set when it cannot be allocated. */
static double *latency_dists(struct summary *s, const struct engine_results *r,
			     struct ss_error *err)
{
	double *scratch = malloc(s->completed * sizeof(*scratch));
	uint64_t n;

	if (!scratch) {
		ss_error_set(err, -ENOMEM, NULL, 0, "summary: out of memory for %llu latencies",
			     (unsigned long long)s->completed);
		return NULL;
	}
	ss_advise_huge(scratch, s->completed * sizeof(*scratch));
	n = metrics_collect(r, REQ_METRIC_TTFT, scratch);
	metrics_dist(&s->ttft_ms, scratch, n);
	n = metrics_collect(r, REQ_METRIC_TPOT, scratch);
	metrics_dist(&s->tpot_ms, scratch, n);
	n = metrics_collect(r, REQ_METRIC_E2E, scratch);
	metrics_dist(&s->e2e_ms, scratch, n);
	return scratch;
}

int summary_compute(struct summary *s, const struct engine_results *r,
		    const struct slo_config *slo, int tp, struct ss_error *err)
{
	double *scratch = NULL;
	uint64_t n, out_tokens = 0;
	int ret;

	ret = summary_begin(s, r, slo, tp, err);
	if (ret < 0)
		return ret;
	requests_pass(s, r, &out_tokens);
	ret = instances_pass(s, r, out_tokens, err);
	if (ret < 0)
		return ret;
	dist_hist(&s->itl_ms, r->itl, 1.0 / NS_PER_MS);
	s->swap = r->swap;
	s->prefix_cache = r->prefix_cache;
	if (r->kv_remote) {
		s->kv_remote = true;
		s->remote = *r->kv_remote;
	}
	s->prefix_hit_rate = s->prefix_lookup_tokens ?
		(double)s->prefix_hit_tokens / (double)s->prefix_lookup_tokens : 0;
	s->predictor = r->predictor;
	s->disaggregated = r->disaggregated;
	s->cost_usd = s->cost_usd_per_hour * s->duration_s / 3600.0;
	s->usd_per_million_output_tokens = out_tokens > 0 ? s->cost_usd / ((double)out_tokens / 1e6) : 0;
	s->fairness_jain = 1.0;

	if (s->completed == 0)
		return 0;
	scratch = latency_dists(s, r, err);
	if (!scratch)
		return -ENOMEM;
	n = metrics_collect(r, REQ_METRIC_QUEUE, scratch);
	metrics_dist(&s->queue_ms, scratch, n);
	if (r->n_tenants > 0 && r->tenant_ids && r->tenant_service)
		tenants_pass(s, r, scratch);
	n = 0;
	for (uint64_t i = 0; i < r->n_req; i++)
		if (r->disaggregated && r->req[i].kv_xfer_ns >= 0 && n < s->completed)
			scratch[n++] = (double)r->req[i].kv_xfer_ns / NS_PER_MS;
	metrics_dist(&s->kv_transfer_ms, scratch, n);
	free(scratch);
	return 0;
}

int summary_compute_slo(struct summary *s, const struct engine_results *r,
			const struct slo_config *slo, int tp, struct ss_error *err)
{
	double *scratch = NULL;
	uint64_t out_tokens = 0;
	int ret;

	ret = summary_begin(s, r, slo, tp, err);
	if (ret < 0)
		return ret;
	requests_pass(s, r, &out_tokens);
	if (s->completed == 0)
		return 0;
	scratch = latency_dists(s, r, err);
	if (!scratch)
		return -ENOMEM;
	free(scratch);
	return 0;
}

/* ---- the metric catalog (metrics.def) ------------------------------------ */

#define DIST(ID, name, field, stat, label, decimals, interval)        \
	static double get_##ID(const struct summary *s)                \
	{                                                              \
		return s->field.n ? s->field.stat : NAN;               \
	}
#define VALUE(ID, name, label, json, sub, field, defined, better, slo, scale, decimals, \
	      energy)                                                  \
	static double get_##ID(const struct summary *s)                \
	{                                                              \
		return (defined) ? s->field : NAN;                     \
	}
#include "metrics.def"
#undef DIST
#undef VALUE

static const struct metric_desc catalog[METRIC_COUNT] = {
#define DIST(ID, name, field, stat, label, decimals, interval)                 \
	[METRIC_##ID] = { name, label, #field, #stat, true, false, false, false,   \
			  INTERVAL_##interval, 1, decimals,                        \
			  offsetof(struct summary, field), offsetof(struct dist, stat), get_##ID },
#define VALUE(ID, name, label, json, sub, field, defined, better, slo, scale, decimals, \
	      energy)                                                          \
	[METRIC_##ID] = { name, label, json, sub, false, better, slo, energy,     \
			  INTERVAL_NONE, scale, decimals,                          \
			  offsetof(struct summary, field), 0, get_##ID },
#include "metrics.def"
#undef DIST
#undef VALUE
};

/* the fields a VALUE names are doubles */
#define VALUE(ID, name, label, json, sub, field, ...) \
	_Static_assert(_Generic(((struct summary *)0)->field, double: 1, default: 0), \
		       #field " is not a double");
#define DIST(...)
#include "metrics.def"
#undef DIST
#undef VALUE

const struct metric_desc *metric_desc(enum metric_id id)
{
	return &catalog[id];
}

int metric_find(const char *name)
{
	for (int i = 0; i < METRIC_COUNT; i++)
		if (!strcmp(catalog[i].name, name))
			return i;
	return -1;
}

int metric_field_interval(size_t field)
{
	for (int i = 0; i < METRIC_COUNT; i++)
		if (catalog[i].dist && catalog[i].field == field)
			return catalog[i].interval;
	return INTERVAL_NONE;
}

/* The bounds of entry e for metric m, ITL's from its TPOT where it has
 * none; false when e has neither. */
static bool entry_bounds(const struct interval_entry *e, int m, double *lo, double *hi)
{
	if (e && !(e->lo[m] > 0) && m == INTERVAL_ITL)
		m = INTERVAL_TPOT;
	if (!e || !(e->lo[m] > 0))
		return false;
	*lo = e->lo[m];
	*hi = e->hi[m];
	return true;
}

const char *interval_bounds(const struct catalog *cat, const char *engine, bool shipped,
			    const char *cost_model, bool *spec_priced, double lo[INTERVAL_METRICS],
			    double hi[INTERVAL_METRICS])
{
	const struct interval_entry *prior, *e = NULL;
	const char *entry;

	for (int m = 0; m < INTERVAL_METRICS; m++)
		lo[m] = hi[m] = 0;
	*spec_priced = false;
	if (!cat || cat->n_intervals == 0)
		return NULL;
	prior = catalog_interval(cat, "prior");
	if (!engine || !strcmp(engine, "none"))
		e = catalog_interval(cat, "none");
	else if (shipped)
		e = catalog_interval(cat, engine);
	entry = e ? e->name : "prior";
	if (!e)
		e = prior;
	/* "scaled": another GPU's measurements moved by the datasheets'
	 * ratio, which no held-out run of this GPU has validated */
	*spec_priced = cost_model && (!strcmp(cost_model, "roofline") ||
				      !strcmp(cost_model, "constant") ||
				      !strcmp(cost_model, "scaled"));
	for (int m = 0; m < INTERVAL_METRICS; m++) {
		double l, h, plo = 1, phi = 1;
		bool has_prior = entry_bounds(prior, m, &plo, &phi);

		if (!entry_bounds(e, m, &l, &h)) {
			if (!has_prior)
				continue;
			l = plo;
			h = phi;
		}
		if (*spec_priced && has_prior) {
			l = fmin(l, plo);
			h = fmax(h, phi);
		}
		lo[m] = l;
		hi[m] = h;
	}
	return entry;
}

void summary_interval_set(struct summary *s, const struct catalog *cat, bool shipped,
			  const char *cost_model)
{
	struct summary_interval *iv = &s->interval;

	memset(iv, 0, sizeof(*iv));
	iv->entry = interval_bounds(cat, s->engine, shipped, cost_model, &iv->spec_priced,
				    iv->lo, iv->hi);
	if (!iv->entry)
		return;
	iv->widen = 1.0 + (s->out_of_grid_share > 0 ? s->out_of_grid_share : 0);
	/* the log-width x widen: lo^w, hi^w */
	for (int m = 0; m < INTERVAL_METRICS; m++)
		if (iv->lo[m] > 0) {
			iv->lo[m] = pow(iv->lo[m], iv->widen);
			iv->hi[m] = pow(iv->hi[m], iv->widen);
		}
}

bool summary_interval_of(const struct summary *s, int m, double v, double *lo, double *hi)
{
	*lo = *hi = NAN;
	if (m < 0 || m >= INTERVAL_METRICS || !(s->interval.lo[m] > 0) || !isfinite(v))
		return false;
	*lo = v * s->interval.lo[m];
	*hi = v * s->interval.hi[m];
	return true;
}

const struct dist *metric_dist(const struct metric_desc *d, const struct summary *s)
{
	assert(d->dist);
	return (const struct dist *)((const char *)s + d->field);
}

double metric_value(const struct metric_desc *d, const struct summary *s)
{
	const struct dist *x;

	if (!d->dist)
		return *(const double *)((const char *)s + d->field);
	x = metric_dist(d, s);
	return x->n ? *(const double *)((const char *)x + d->stat) : NAN;
}

double metric_json_get(const json_t *summary, enum metric_id id)
{
	const struct metric_desc *d = &catalog[id];
	const json_t *o = json_object_get(summary, d->json);

	if (d->sub)
		o = json_object_get(o, d->sub);
	return json_is_number(o) ? json_number_value(o) : NAN;
}

int metric_json_set(json_t *summary, enum metric_id id, json_t *v)
{
	const struct metric_desc *d = &catalog[id];
	json_t *at = summary;

	if (!v)
		return -ENOMEM;
	if (d->sub && !(at = json_object_get(summary, d->json))) {
		at = json_object();
		/* json_object_set_new() takes at, also when it fails */
		if (!at || json_object_set_new(summary, d->json, at) < 0) {
			json_decref(v);
			return -ENOMEM;
		}
	}
	if (!json_is_object(at)) {
		json_decref(v);
		return -EINVAL;
	}
	return json_object_set_new(at, d->sub ? d->sub : d->json, v) < 0 ? -ENOMEM : 0;
}
