/* Validation against queueing theory.
 *
 * With the constant cost model, max_num_seqs=1 and one instance, the
 * simulator is a single FCFS server: a request's service time is its
 * prefill (prompt x a) plus (output - 1) decode steps of b, and its
 * queueing delay (first scheduled - arrival) is the waiting time in queue.
 * Under Poisson arrivals the mean wait must match Pollaczek-Khinchine,
 *   Wq = lambda E[S^2] / (2 (1 - rho)),
 * which for deterministic service (M/D/1) is rho D / (2 (1 - rho)).
 *
 * Tolerances.  The estimate is a sample mean of strongly correlated waits,
 * so its spread shrinks slowly with n and grows fast with load.  With
 * n = 1,000,000 customers, the relative error measured over 12 seeds
 * (SERVESIM_QUEUEING_SEED=1..12, docs/validation.md) has a standard deviation
 * of about 0.35% at rho 0.5, 0.7% at rho 0.8 (M/D/1) and 0.9% for the
 * geometric service at rho 0.8 (heavier tail).  The 3% and 5% are
 * therefore 4-5 standard deviations: a correct engine passes with any seed,
 * while a systematic error of a few percent (a lost step, an extra step per
 * request, a wrong order at equal times) fails.
 */
#include <math.h>
#include <stdio.h>

#include "check-main.h"
#include "engine-fixture.h"

#define N_REQ 1000000

static double mean_queue_ms(const char *arrival, const char *lengths)
{
	struct workload_spec ws = { .arrival = arrival, .lengths = lengths,
				    .num_requests = N_REQ, .rate_scale = 1.0, .seed = 42 };
	const char *seed = getenv("SERVESIM_QUEUEING_SEED");  /* for docs/validation.md */

	if (seed)
		ws.seed = strtoull(seed, NULL, 10);
	struct ss_error err = { 0 };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	double sum = 0;

	workload_init(&wl);
	if (workload_build(&wl, &ws, &err))
		ck_abort_msg("workload: %s", err.msg);
	/* prefill 100 x 0.01 ms = 1 ms, each further token 1 ms */
	cfg_tiny(&c, "constant:prefill_ms_per_token=0.01,decode_ms_per_step=1",
		 "vllm:max_num_seqs=1", 10000);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (uint64_t i = 0; i < r.n_req; i++) {
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		sum += (double)(r.req[i].first_sched_ns - r.req[i].arrival_ns) / 1e6;
	}
	engine_free(e);
	workload_release(&wl);
	return sum / N_REQ;
}

static void check_md1(double rho, double tol)
{
	double d_ms = 10.0;   /* 1 ms prefill + 9 decodes of 1 ms */
	double lambda = rho / d_ms * 1000.0;   /* req/s */
	double expect = rho * d_ms / (2 * (1 - rho));
	char arrival[64];
	double got;

	snprintf(arrival, sizeof(arrival), "poisson:rate=%.10g", lambda);
	got = mean_queue_ms(arrival, "fixed:prompt=100,output=10");
	fprintf(stderr, "M/D/1 rho=%.1f: Wq %.4f ms, Pollaczek-Khinchine %.4f ms (%+.2f%%)\n",
		rho, got, expect, 100 * (got / expect - 1));
	ck_assert_double_le(fabs(got / expect - 1), tol);
}

START_TEST(md1_rho_05) { check_md1(0.5, 0.03); }
END_TEST

START_TEST(md1_rho_08) { check_md1(0.8, 0.03); }
END_TEST

START_TEST(mg1_geometric_rho_08)
{
	/* Service S = 1 ms + (O - 1) ms = O ms with O geometric, mean 10:
	 * E[S] = 10 ms, E[S^2] = (2 - p) / p^2 = 190 ms^2 (p = 0.1).  An
	 * exponential service of the same mean (M/M/1) would give 200 ms^2;
	 * the geometric is its discrete counterpart. */
	double rho = 0.8, es = 10.0, es2 = 190.0;
	double lambda = rho / es;   /* per ms */
	double expect = lambda * es2 / (2 * (1 - rho));
	char arrival[64];
	double got;

	snprintf(arrival, sizeof(arrival), "poisson:rate=%.10g", lambda * 1000);
	got = mean_queue_ms(arrival, "geometric:prompt=100,output_mean=10");
	fprintf(stderr, "M/G/1 geometric rho=%.1f: Wq %.4f ms, Pollaczek-Khinchine %.4f ms (%+.2f%%)\n",
		rho, got, expect, 100 * (got / expect - 1));
	ck_assert_double_le(fabs(got / expect - 1), 0.05);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("queueing");
	TCase *tc = tcase_create("pollaczek-khinchine");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, md1_rho_05);
	tcase_add_test(tc, md1_rho_08);
	tcase_add_test(tc, mg1_geometric_rho_08);
	suite_add_tcase(s, tc);
	return s;
}
