/* Behaviours of analysis/metrics: every figure of a small, hand-checked run.
 *
 * The fixture (times in ms):
 *
 *   id  state     arrival  first_sched  first_token  finish  prompt  output
 *   0   finished        0            0          100    1000     100      10
 *   1   finished      100          150          300     900     200       5
 *   2   finished      200          400          600     600     300       1
 *   3   finished      300          300         1100    2300     400       7
 *   4   rejected      400    (prompt_too_long, from a char buffer)
 *   5   rejected      450    (prompt_too_long, a literal)
 *   6   rejected      500    (kv_capacity)
 *
 * so for the four finished requests
 *   TTFT  = 100, 200, 400, 800        TPOT = 900/9, 600/4, -, 1200/6 = 100, 150, 200
 *   E2E   = 1000, 800, 400, 2000      queue = 0, 50, 200, 0
 * and the run spans 0 .. 2300 ms.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "metrics-int.h"

#include "check-main.h"

#define MS 1000000LL

static struct req_record reqs[8];
static struct instance_stats *inst;
static struct ss_hist *itl;
static struct engine_results res;
static char reason_buf[32];

static void set_req(struct req_record *q, uint32_t id, enum req_state st, int64_t arr,
		    int64_t sched, int64_t first, int64_t fin, int32_t prompt, int32_t out)
{
	memset(q, 0, sizeof(*q));
	q->id = id;
	q->state = st;
	q->arrival_ns = arr * MS;
	q->first_sched_ns = sched >= 0 ? sched * MS : -1;
	q->first_token_ns = first >= 0 ? first * MS : -1;
	q->finish_ns = fin >= 0 ? fin * MS : -1;
	q->prompt_tokens = prompt;
	q->output_tokens = out;
	q->generated_tokens = st == REQ_FINISHED ? out : 0;
	q->instance = st == REQ_FINISHED ? (int32_t)(id % 2) : -1;
}

/* Two instances of 100 KV blocks, idle power 100 W each, run end 2.5 s:
 *   instance 0: busy 2.0 s, 1000 J, mean 50 blocks used, peak 90, 10 steps,
 *               2 preemptions, gemm 1.5 s + attn_decode 0.5 s, batches 1,2,3,4
 *   instance 1: busy 1.0 s,  500 J, mean 25 blocks used, peak 60,  5 steps,
 *               1 preemption,  gemm 0.5 s + host 0.5 s,        batches 5,6 */
static void setup(void)
{
	set_req(&reqs[0], 0, REQ_FINISHED, 0, 0, 100, 1000, 100, 10);
	set_req(&reqs[1], 1, REQ_FINISHED, 100, 150, 300, 900, 200, 5);
	set_req(&reqs[2], 2, REQ_FINISHED, 200, 400, 600, 600, 300, 1);
	set_req(&reqs[3], 3, REQ_FINISHED, 300, 300, 1100, 2300, 400, 7);
	set_req(&reqs[4], 4, REQ_REJECTED, 400, -1, -1, -1, 9000, 10);
	set_req(&reqs[5], 5, REQ_REJECTED, 450, -1, -1, -1, 9000, 10);
	set_req(&reqs[6], 6, REQ_REJECTED, 500, -1, -1, -1, 50, 5000);
	/* equal text at a different address: reasons are compared by content */
	strcpy(reason_buf, "prompt_too_long");
	reqs[4].reject_reason = reason_buf;
	reqs[5].reject_reason = "prompt_too_long";
	reqs[6].reject_reason = "kv_capacity";

	inst = calloc(2, sizeof(*inst));
	itl = malloc(sizeof(*itl));
	ck_assert_ptr_nonnull(inst);
	ck_assert_ptr_nonnull(itl);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(ss_hist_init(&inst[i].batch_seqs), 0);
		ck_assert_int_eq(ss_hist_init(&inst[i].batch_tokens), 0);
		inst[i].total_blocks = 100;
	}
	inst[0].kv_block_ns = 50.0 * 2.5e9;
	inst[0].peak_used_blocks = 90;
	inst[0].steps = 10;
	inst[0].busy_ns = 2000 * MS;
	inst[0].busy_energy_j = 1000;
	inst[0].preemptions = 2;
	inst[0].op_ns[COST_OP_GEMM] = 1500 * MS;
	inst[0].op_ns[COST_OP_ATTN_DECODE] = 500 * MS;
	for (int v = 1; v <= 4; v++) {
		ss_hist_add(&inst[0].batch_seqs, v);
		ss_hist_add(&inst[0].batch_tokens, 100 * v);
	}
	inst[1].kv_block_ns = 25.0 * 2.5e9;
	inst[1].peak_used_blocks = 60;
	inst[1].steps = 5;
	inst[1].busy_ns = 1000 * MS;
	inst[1].busy_energy_j = 500;
	inst[1].preemptions = 1;
	inst[1].op_ns[COST_OP_GEMM] = 500 * MS;
	inst[1].op_ns[COST_OP_HOST] = 500 * MS;
	for (int v = 5; v <= 6; v++) {
		ss_hist_add(&inst[1].batch_seqs, v);
		ss_hist_add(&inst[1].batch_tokens, 100 * v);
	}
	/* inter-token gaps of 10, 20, 30, 40 ms */
	ck_assert_int_eq(ss_hist_init(itl), 0);
	for (int v = 1; v <= 4; v++)
		ss_hist_add(itl, v * 10 * MS);

	memset(&res, 0, sizeof(res));
	res.req = reqs;
	res.n_req = 7;
	res.n_instances = 2;
	res.inst = inst;
	res.itl = itl;
	res.end_ns = 2500 * MS;
	res.kv_blocks_per_instance = 100;
	res.idle_power_w = 100;
	res.cost_model_name = "constant";
}

static void teardown(void)
{
	for (int i = 0; i < 2; i++) {
		ss_hist_release(&inst[i].batch_seqs);
		ss_hist_release(&inst[i].batch_tokens);
	}
	ss_hist_release(itl);
	free(inst);
	free(itl);
}

/* Exact comparisons where the arithmetic is exact in binary; 1e-9 relative
 * where a division by a non-power of two rounds. */
#define EQ(a, b) ck_assert_double_eq_tol((a), (b), 1e-9 * (fabs((double)(b)) + 1))

START_TEST(request_values)
{
	EQ(request_ttft_ms(&reqs[1]), 200);
	EQ(request_tpot_ms(&reqs[1]), 150);
	EQ(request_e2e_ms(&reqs[1]), 800);
	EQ(request_queue_ms(&reqs[1]), 50);
	/* one output token: no TPOT */
	ck_assert(isnan(request_tpot_ms(&reqs[2])));
	/* rejected: nothing is defined */
	ck_assert(isnan(request_ttft_ms(&reqs[4])));
	ck_assert(isnan(request_tpot_ms(&reqs[4])));
	ck_assert(isnan(request_e2e_ms(&reqs[4])));
	ck_assert(isnan(request_queue_ms(&reqs[4])));
}
END_TEST

START_TEST(latency_distributions)
{
	struct summary s;
	struct ss_error err = { 0 };

	ck_assert_int_eq(summary_compute(&s, &res, NULL, 2, &err), 0);
	ck_assert_uint_eq(s.requests, 7);
	ck_assert_uint_eq(s.completed, 4);
	ck_assert_uint_eq(s.rejected, 3);
	ck_assert_uint_eq(s.unfinished, 0);

	/* TTFT 100 200 400 800: mean 375; numpy-linear p50 at rank 1.5 = 300,
	 * p90 at 2.7 = 400 + 0.7*400 = 680, p95 at 2.85 = 740, p99 at 2.97 = 788 */
	ck_assert_uint_eq(s.ttft_ms.n, 4);
	EQ(s.ttft_ms.mean, 375);
	EQ(s.ttft_ms.p50, 300);
	EQ(s.ttft_ms.p90, 680);
	EQ(s.ttft_ms.p95, 740);
	EQ(s.ttft_ms.p99, 788);
	EQ(s.ttft_ms.max, 800);
	/* TPOT 100 150 200 (request 2 has one token): mean 150, p50 at rank 1
	 * = 150, p90 at 1.8 = 190, p99 at 1.98 = 199 */
	ck_assert_uint_eq(s.tpot_ms.n, 3);
	EQ(s.tpot_ms.mean, 150);
	EQ(s.tpot_ms.p50, 150);
	EQ(s.tpot_ms.p90, 190);
	EQ(s.tpot_ms.p99, 199);
	EQ(s.tpot_ms.max, 200);
	/* E2E 400 800 1000 2000: mean 1050, p50 = 900, p90 = 1000 + 0.7*1000 */
	ck_assert_uint_eq(s.e2e_ms.n, 4);
	EQ(s.e2e_ms.mean, 1050);
	EQ(s.e2e_ms.p50, 900);
	EQ(s.e2e_ms.p90, 1700);
	EQ(s.e2e_ms.max, 2000);
	/* queue 0 0 50 200: mean 62.5, p50 = 25, p90 = 50 + 0.7*150 = 155 */
	ck_assert_uint_eq(s.queue_ms.n, 4);
	EQ(s.queue_ms.mean, 62.5);
	EQ(s.queue_ms.p50, 25);
	EQ(s.queue_ms.p90, 155);
	EQ(s.queue_ms.max, 200);
}
END_TEST

START_TEST(itl_from_histogram)
{
	struct summary s;

	ck_assert_int_eq(summary_compute(&s, &res, NULL, 1, NULL), 0);
	/* count, sum and max are exact; quantiles within the histogram's 0.2% */
	ck_assert_uint_eq(s.itl_ms.n, 4);
	EQ(s.itl_ms.mean, 25);
	EQ(s.itl_ms.max, 40);
	ck_assert_double_eq_tol(s.itl_ms.p50, 25, 25 * 0.002);
	ck_assert_double_eq_tol(s.itl_ms.p90, 37, 37 * 0.002);
}
END_TEST

START_TEST(throughput)
{
	struct summary s;

	ck_assert_int_eq(summary_compute(&s, &res, NULL, 2, NULL), 0);
	/* first arrival 0, last finish 2300 ms; rejected requests count no tokens */
	EQ(s.duration_s, 2.3);
	EQ(s.requests_per_s, 4 / 2.3);
	EQ(s.input_tokens_per_s, 1000 / 2.3);
	EQ(s.output_tokens_per_s, 23 / 2.3);
}
END_TEST

START_TEST(slo_attainment_and_goodput)
{
	struct slo_config slo = { .ttft_ms = 400, .tpot_ms = 150 };
	struct summary s;

	/* request 0 (100, 100) and 1 (200, 150) meet both; 2 meets TTFT 400 and
	 * has one token, so TPOT is met; 3 misses TTFT (800); the three rejected
	 * requests miss: 3 of 7 */
	ck_assert_int_eq(summary_compute(&s, &res, &slo, 2, NULL), 0);
	EQ(s.slo_attainment, 3.0 / 7);
	EQ(s.goodput_rps, 3 / 2.3);
	/* 2 instances x tp 2 = 4 GPUs */
	ck_assert_int_eq(s.n_gpus, 4);
	EQ(s.goodput_rps_per_gpu, 3 / 2.3 / 4);
	ck_assert(request_meets_slo(&reqs[2], &slo));
	ck_assert(!request_meets_slo(&reqs[3], &slo));
	ck_assert(!request_meets_slo(&reqs[4], &slo));

	/* the longest token gap: a 151 ms stall misses a 150 ms TBT target
	 * however short the request's mean TPOT */
	{
		struct slo_config tbt = { .tbt_ms = 150 };
		struct req_record q = reqs[0];

		q.max_gap_ns = 150000000;
		ck_assert(request_meets_slo(&q, &tbt));
		q.max_gap_ns = 151000000;
		ck_assert(!request_meets_slo(&q, &tbt));
	}

	/* no SLO: every completed request is good, rejected ones still miss */
	ck_assert_int_eq(summary_compute(&s, &res, NULL, 2, NULL), 0);
	EQ(s.slo_attainment, 4.0 / 7);
	EQ(s.goodput_rps, s.requests_per_s);

	/* an E2E target alone: 1000, 800, 400 <= 1000; 2000 misses */
	slo = (struct slo_config){ .e2e_ms = 1000 };
	ck_assert_int_eq(summary_compute(&s, &res, &slo, 1, NULL), 0);
	EQ(s.slo_attainment, 3.0 / 7);
}
END_TEST

START_TEST(rejection_lowers_attainment)
{
	struct slo_config slo = { .ttft_ms = 10000 };
	struct summary s;

	/* only the four finished requests: all meet */
	res.n_req = 4;
	ck_assert_int_eq(summary_compute(&s, &res, &slo, 1, NULL), 0);
	EQ(s.slo_attainment, 1.0);
	/* one more, rejected: 4 of 5 */
	res.n_req = 5;
	ck_assert_int_eq(summary_compute(&s, &res, &slo, 1, NULL), 0);
	EQ(s.slo_attainment, 0.8);
	/* goodput counts completions only: unchanged */
	EQ(s.goodput_rps, 4 / 2.3);
	/* an unfinished request misses as well and is counted as such */
	reqs[4].state = REQ_QUEUED;
	reqs[4].reject_reason = NULL;
	ck_assert_int_eq(summary_compute(&s, &res, &slo, 1, NULL), 0);
	ck_assert_uint_eq(s.unfinished, 1);
	ck_assert_uint_eq(s.rejected, 0);
	EQ(s.slo_attainment, 0.8);
}
END_TEST

START_TEST(rejection_reasons)
{
	static const char *const names[10] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j" };
	struct req_record many[10];
	struct summary s;

	ck_assert_int_eq(summary_compute(&s, &res, NULL, 1, NULL), 0);
	ck_assert_int_eq(s.n_reject_reasons, 2);
	ck_assert_str_eq(s.reject_reasons[0].reason, "prompt_too_long");
	ck_assert_uint_eq(s.reject_reasons[0].count, 2);
	ck_assert_str_eq(s.reject_reasons[1].reason, "kv_capacity");
	ck_assert_uint_eq(s.reject_reasons[1].count, 1);

	/* more distinct reasons than the table holds: the rest are "other" */
	for (int i = 0; i < 10; i++) {
		set_req(&many[i], (uint32_t)i, REQ_REJECTED, i, -1, -1, -1, 10, 10);
		many[i].reject_reason = names[i];
	}
	res.req = many;
	res.n_req = 10;
	ck_assert_int_eq(summary_compute(&s, &res, NULL, 1, NULL), 0);
	ck_assert_int_eq(s.n_reject_reasons, SUMMARY_MAX_REASONS);
	ck_assert_str_eq(s.reject_reasons[SUMMARY_MAX_REASONS - 1].reason, "other");
	ck_assert_uint_eq(s.reject_reasons[SUMMARY_MAX_REASONS - 1].count,
			  10 - (SUMMARY_MAX_REASONS - 1));
	/* nothing completed: no duration, no rates, no division by zero */
	ck_assert_uint_eq(s.completed, 0);
	EQ(s.duration_s, 0);
	EQ(s.requests_per_s, 0);
	EQ(s.slo_attainment, 0);
	ck_assert_uint_eq(s.ttft_ms.n, 0);
}
END_TEST

START_TEST(instances_kv_batches_energy)
{
	struct summary s;

	ck_assert_int_eq(summary_compute(&s, &res, NULL, 2, NULL), 0);
	ck_assert_uint_eq(s.preemptions, 3);
	ck_assert_uint_eq(s.steps, 15);
	/* (50 + 25) * 2.5e9 block*ns / (200 blocks * 2.5e9 ns) */
	EQ(s.kv_util_mean, 0.375);
	EQ(s.kv_util_peak, 0.9);
	/* batches 1..6 (exact below 256): mean 3.5, p50 at rank 2.5 = 3.5 */
	ck_assert_uint_eq(s.batch_seqs.n, 6);
	EQ(s.batch_seqs.mean, 3.5);
	EQ(s.batch_seqs.p50, 3.5);
	EQ(s.batch_seqs.max, 6);
	ck_assert_uint_eq(s.batch_tokens.n, 6);
	EQ(s.batch_tokens.mean, 350);
	EQ(s.batch_tokens.max, 600);
	/* busy 1500 J; idle 100 W * (0.5 s + 1.5 s) = 200 J */
	EQ(s.energy_busy_j, 1500);
	EQ(s.energy_idle_j, 200);
	EQ(s.energy_j, 1700);
	EQ(s.j_per_request, 1700.0 / 4);
	EQ(s.j_per_output_token, 1700.0 / 23);
	/* 1700 J over 2.5 s on 4 GPUs */
	EQ(s.avg_power_w_per_gpu, 170);
	/* 3 s of operator time: gemm 2, attn_decode 0.5, host 0.5 */
	EQ(s.op_share[COST_OP_GEMM], 2.0 / 3);
	EQ(s.op_share[COST_OP_ATTN_DECODE], 0.5 / 3);
	EQ(s.op_share[COST_OP_HOST], 0.5 / 3);
	EQ(s.op_share[COST_OP_ALLREDUCE], 0);
	ck_assert_int_eq(s.n_gpus, 4);
	ck_assert_uint_eq(s.n_instances, 2);
	ck_assert_int_eq(s.kv_blocks_per_instance, 100);
	ck_assert_str_eq(s.cost_model, "constant");
}
END_TEST

START_TEST(quantiles_match_numpy)
{
	/* numpy.percentile([15, 20, 35, 40, 50], q), linear: rank q/100 * 4 */
	static const double v[] = { 15, 20, 35, 40, 50 };

	EQ(ss_quantile_sorted(v, 5, 0.40), 29);   /* 20 + 0.6 * 15 */
	EQ(ss_quantile_sorted(v, 5, 0.50), 35);
	EQ(ss_quantile_sorted(v, 5, 0.90), 46);   /* 40 + 0.6 * 10 */
	EQ(ss_quantile_sorted(v, 5, 0.99), 49.6); /* 40 + 0.96 * 10 */
	EQ(ss_quantile_sorted(v, 5, 1.00), 50);
	EQ(ss_quantile_sorted(v, 5, 0.00), 15);
}
END_TEST

START_TEST(unsorted_input_is_sorted)
{
	struct summary s;
	struct req_record q[5];
	/* TTFTs 50 10 40 20 30 in workload order: sorted 10..50, p50 = 30 */
	static const int ttft[5] = { 50, 10, 40, 20, 30 };

	for (int i = 0; i < 5; i++)
		set_req(&q[i], (uint32_t)i, REQ_FINISHED, 0, 0, ttft[i], 100, 1, 2);
	res.req = q;
	res.n_req = 5;
	ck_assert_int_eq(summary_compute(&s, &res, NULL, 1, NULL), 0);
	EQ(s.ttft_ms.p50, 30);
	EQ(s.ttft_ms.p90, 46);   /* rank 3.6: 40 + 0.6 * 10 */
	EQ(s.ttft_ms.max, 50);
}
END_TEST

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

START_TEST(sort_matches_qsort)
{
	/* large arrays take the radix path: same result as qsort, negative
	 * values, duplicates and a wide range of exponents included */
	enum { N = 100003 };
	double *a = malloc(N * sizeof(*a)), *b = malloc(N * sizeof(*b));
	uint64_t x = 88172645463325252ULL;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	for (int i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		a[i] = (double)(int64_t)(x % 2000001) - 1000000.0;
		if (i % 3 == 0)
			a[i] *= 1e-9;
		if (i % 5 == 0)
			a[i] = 42.0;
		b[i] = a[i];
	}
	metrics_sort(a, N);
	qsort(b, N, sizeof(*b), cmp_double);
	ck_assert_mem_eq(a, b, N * sizeof(*a));
	free(a);
	free(b);
}
END_TEST

/* summary_compute_slo() gives what summary_compute() gives in the fields
 * it fills, bit for bit: the fixture, runs with many equal latencies, and
 * sizes around the selection's cut-over to sorting (32) and beyond */
static void check_slo_matches(const struct engine_results *r, const struct slo_config *slo)
{
	struct summary a, b;

	ck_assert_int_eq(summary_compute(&a, r, slo, 1, NULL), 0);
	ck_assert_int_eq(summary_compute_slo(&b, r, slo, 1, NULL), 0);
	ck_assert_uint_eq(b.requests, a.requests);
	ck_assert_uint_eq(b.completed, a.completed);
	ck_assert_uint_eq(b.rejected, a.rejected);
	ck_assert_uint_eq(b.unfinished, a.unfinished);
	ck_assert_int_eq(b.n_gpus, a.n_gpus);
	ck_assert_mem_eq(&b.duration_s, &a.duration_s, sizeof(double));
	ck_assert_mem_eq(&b.requests_per_s, &a.requests_per_s, sizeof(double));
	ck_assert_mem_eq(&b.input_tokens_per_s, &a.input_tokens_per_s, sizeof(double));
	ck_assert_mem_eq(&b.output_tokens_per_s, &a.output_tokens_per_s, sizeof(double));
	ck_assert_mem_eq(&b.slo_attainment, &a.slo_attainment, sizeof(double));
	ck_assert_mem_eq(&b.goodput_rps, &a.goodput_rps, sizeof(double));
	ck_assert_mem_eq(&b.goodput_rps_per_gpu, &a.goodput_rps_per_gpu, sizeof(double));
	ck_assert_mem_eq(&b.ttft_ms, &a.ttft_ms, sizeof(a.ttft_ms));
	ck_assert_mem_eq(&b.tpot_ms, &a.tpot_ms, sizeof(a.tpot_ms));
	ck_assert_mem_eq(&b.e2e_ms, &a.e2e_ms, sizeof(a.e2e_ms));
	/* what it leaves out */
	ck_assert_uint_eq(b.queue_ms.n, 0);
	ck_assert_uint_eq(b.itl_ms.n, 0);
}

/* metrics_dist (selection) gives metrics_dist_sorted's figures bit for
 * bit: sizes around the radix sort's threshold and beyond, values spread
 * out, a few repeated, already sorted, reversed, all equal, and with
 * zeros and negative zero. */
START_TEST(dist_selection_matches_sorting)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 9, 10, 100, 4095, 4096, 4097, 20000, 100003 };
	uint64_t x = 0x243f6a8885a308d3ULL;

	for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
		size_t n = sizes[t];
		double *a = malloc((n ? n : 1) * sizeof(*a)), *b = malloc((n ? n : 1) * sizeof(*b));

		ck_assert(a && b);
		for (int shape = 0; shape < 6; shape++) {
			struct dist da, db;

			for (size_t i = 0; i < n; i++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				a[i] = shape == 0 ? (double)(x % 1000000) / 7.0 :
				       shape == 1 ? (double)(x % 5) * 0.25 :
				       shape == 2 ? (double)i * 0.5 :
				       shape == 3 ? (double)(n - i) :
				       shape == 4 ? 42.0 : ((x & 1) ? 0.0 : -0.0) + (double)(x % 3);
			}
			memcpy(b, a, n * sizeof(*a));
			memset(&da, 0x5a, sizeof(da));
			memset(&db, 0x5a, sizeof(db));
			metrics_dist(&da, a, n);
			metrics_dist_sorted(&db, b, n);
			ck_assert_msg(memcmp(&da, &db, sizeof(da)) == 0, "n %zu shape %d differs", n,
				      shape);
		}
		free(a);
		free(b);
	}
}
END_TEST

START_TEST(slo_summary_matches_full_summary)
{
	static const size_t sizes[] = { 1, 2, 3, 31, 32, 33, 100, 101, 2000, 4099 };
	struct slo_config slo = { .ttft_ms = 300, .tpot_ms = 160 };
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	check_slo_matches(&res, &slo);
	for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
		size_t n = sizes[t];

		for (int shape = 0; shape < 3; shape++) {
			struct req_record *q = calloc(n, sizeof(*q));

			ck_assert_ptr_nonnull(q);
			for (size_t i = 0; i < n; i++) {
				int64_t first, fin;

				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				/* shape 0: spread out; 1: a few values, many
				 * equal; 2: ascending (a sorted input) */
				first = shape == 0 ? (int64_t)(x % 100000) :
					shape == 1 ? (int64_t)(x % 4) * 100 : (int64_t)i;
				fin = first + (shape == 1 ? 500 : (int64_t)(x >> 40) % 5000);
				set_req(&q[i], (uint32_t)i, i % 17 == 5 ? REQ_REJECTED : REQ_FINISHED,
					(int64_t)i, (int64_t)i, (int64_t)i + first, (int64_t)i + fin,
					10, 1 + (int32_t)(x % 7));
			}
			res.req = q;
			res.n_req = n;
			check_slo_matches(&res, &slo);
			free(q);
		}
	}
}
END_TEST

START_TEST(bad_arguments)
{
	struct summary s;
	struct ss_error err = { 0 };

	ck_assert_int_lt(summary_compute(&s, &res, NULL, 0, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "tensor-parallel"));
}
END_TEST

START_TEST(empty_run)
{
	struct summary s;

	res.n_req = 0;
	res.n_instances = 0;
	res.itl = NULL;
	ck_assert_int_eq(summary_compute(&s, &res, NULL, 1, NULL), 0);
	ck_assert_uint_eq(s.requests, 0);
	EQ(s.slo_attainment, 0);
	EQ(s.kv_util_mean, 0);
	ck_assert_uint_eq(s.itl_ms.n, 0);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("summary");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, request_values);
	tcase_add_test(tc, latency_distributions);
	tcase_add_test(tc, itl_from_histogram);
	tcase_add_test(tc, throughput);
	tcase_add_test(tc, slo_attainment_and_goodput);
	tcase_add_test(tc, rejection_lowers_attainment);
	tcase_add_test(tc, rejection_reasons);
	tcase_add_test(tc, instances_kv_batches_energy);
	tcase_add_test(tc, quantiles_match_numpy);
	tcase_add_test(tc, unsorted_input_is_sorted);
	tcase_add_test(tc, sort_matches_qsort);
	tcase_add_test(tc, slo_summary_matches_full_summary);
	tcase_add_test(tc, dist_selection_matches_sorting);
	tcase_add_test(tc, bad_arguments);
	tcase_add_test(tc, empty_run);
	suite_add_tcase(s, tc);
	return s;
}
