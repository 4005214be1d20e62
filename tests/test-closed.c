/* Closed-loop load (engine_config.concurrency, workload_spec.closed,
 * --think-time): N clients each send their next request when their previous
 * one leaves the run.  Stated behaviours: never more than N requests in the
 * system; Little's law (throughput = N / mean latency with no think time);
 * a constant think time delays the next send by exactly that time; the
 * completion-driven order is the same run after run; a trace's lengths are
 * taken in file order, its timestamps ignored; a rejected request frees its
 * client; the send limit stops the clients; bad values are errors. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "check-main.h"
#include "engine-fixture.h"

#define MS 1000000LL

static const char *cost_a = "constant:prefill_ms_per_token=0.1,decode_ms_per_step=1";

/* A closed workload from a generator, as `--lengths SPEC --num-requests n`. */
static void closed_gen(struct workload *wl, const char *lengths, uint64_t n, uint64_t seed)
{
	struct workload_spec ws = { .lengths = lengths, .num_requests = n, .seed = seed,
				    .closed = true };
	struct ss_error err = { 0 };

	workload_init(wl);
	if (workload_build(wl, &ws, &err))
		ck_abort_msg("workload_build: %s", err.msg);
}

/* The most requests in the system at once: each is in it from its
 * arrival (its send) to its finish (or its arrival, when rejected); at
 * one instant a leaving request is counted out before one arriving. */
static int64_t max_in_system(const struct engine_results *r)
{
	struct ev { int64_t t; int d; } *ev = calloc(2 * r->n_req, sizeof(*ev));
	int64_t cur = 0, max = 0;
	size_t n = 0;

	ck_assert_ptr_nonnull(ev);
	for (uint64_t i = 0; i < r->n_req; i++) {
		const struct req_record *q = &r->req[i];

		ev[n++] = (struct ev){ q->arrival_ns, +1 };
		ev[n++] = (struct ev){ q->state == REQ_FINISHED ? q->finish_ns : q->arrival_ns, -1 };
	}
	/* insertion sort by (time, leaving first): n is small here */
	for (size_t i = 1; i < n; i++) {
		struct ev x = ev[i];
		size_t j = i;

		while (j > 0 && (ev[j - 1].t > x.t || (ev[j - 1].t == x.t && ev[j - 1].d > x.d))) {
			ev[j] = ev[j - 1];
			j--;
		}
		ev[j] = x;
	}
	for (size_t i = 0; i < n; i++) {
		cur += ev[i].d;
		if (cur > max)
			max = cur;
	}
	free(ev);
	return max;
}

START_TEST(never_more_than_n_in_the_system)
{
	static const uint32_t ns[] = { 1, 3, 8 };

	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
		struct workload wl;
		struct engine_config c;
		struct engine_results r;
		struct engine *e;

		closed_gen(&wl, "uniform:prompt_min=10,prompt_max=300,output_min=1,output_max=40",
			   400, 1);
		cfg_tiny(&c, cost_a, "vllm", 4000);
		c.n_instances = 2;
		c.concurrency = ns[k];
		e = run_ok(&c, &wl);
		engine_results(e, &r);
		ck_assert_uint_eq(r.n_req, 400);
		/* N at once, never more */
		ck_assert_int_eq(max_in_system(&r), ns[k]);
		for (uint64_t i = 0; i < r.n_req; i++)
			ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		/* the first N are sent at 0, the rest later */
		for (uint64_t i = 0; i < r.n_req; i++)
			ck_assert(i < ns[k] ? r.req[i].arrival_ns == 0 : r.req[i].arrival_ns > 0);
		engine_free(e);
		workload_release(&wl);
	}
}
END_TEST

START_TEST(littles_law_with_no_think_time)
{
	/* With N clients and no think time, N requests are in the system
	 * all the time but for the drain at the end, so L = N and Little's
	 * law gives throughput = N / mean E2E.  The drain (the last N
	 * requests, each with fewer than N beside it) is the only departure:
	 * under 1% with 2000 requests and N = 8 (about N / 2 requests' worth
	 * of a latency out of 2000 / N waves). */
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	double lat = 0, x, little;

	closed_gen(&wl, "uniform:prompt_min=20,prompt_max=400,output_min=2,output_max=60", 2000, 7);
	cfg_tiny(&c, cost_a, "vllm", 4000);
	c.concurrency = 8;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (uint64_t i = 0; i < r.n_req; i++) {
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		lat += (double)(r.req[i].finish_ns - r.req[i].arrival_ns);
	}
	lat /= (double)r.n_req;
	x = (double)r.n_req / (double)r.end_ns;
	little = 8.0 / lat;
	ck_assert_msg(fabs(x / little - 1) < 0.01, "throughput %g req/ns, N / mean latency %g",
		      x, little);
	engine_free(e);
	workload_release(&wl);
}
END_TEST

START_TEST(constant_think_time_delays_the_next_send_exactly)
{
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	closed_gen(&wl, "uniform:prompt_min=10,prompt_max=200,output_min=1,output_max=20", 50, 2);
	cfg_tiny(&c, cost_a, "vllm", 4000);
	c.concurrency = 1;
	c.think_time = "constant:ms=50";
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].arrival_ns, 0);
	for (uint64_t i = 1; i < r.n_req; i++)
		ck_assert_int_eq(r.req[i].arrival_ns, r.req[i - 1].finish_ns + 50 * MS);
	engine_free(e);

	/* two clients: every send after the first two is 50 ms after some
	 * request's finish, and there are exactly as many sends as finishes
	 * that had a request left to send */
	c.concurrency = 2;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (uint64_t i = 2; i < r.n_req; i++) {
		bool found = false;

		for (uint64_t j = 0; j < i && !found; j++)
			found = r.req[j].finish_ns + 50 * MS == r.req[i].arrival_ns;
		ck_assert_msg(found, "request %" PRIu64 " sent at %" PRId64 " ns, 50 ms after no finish",
			      i, r.req[i].arrival_ns);
	}
	engine_free(e);
	workload_release(&wl);
}
END_TEST

/* arrival, first token and finish of every request */
static void run_times(const struct engine_config *c, const struct workload *wl, int64_t *t)
{
	struct engine_results r;
	struct engine *e = run_ok(c, wl);

	engine_results(e, &r);
	for (uint64_t i = 0; i < r.n_req; i++) {
		t[3 * i] = r.req[i].arrival_ns;
		t[3 * i + 1] = r.req[i].first_token_ns;
		t[3 * i + 2] = r.req[i].finish_ns;
	}
	engine_free(e);
}

START_TEST(completion_driven_order_is_deterministic)
{
	struct workload wl;
	struct engine_config c;
	int64_t a[3 * 300], b[3 * 300];

	closed_gen(&wl, "lognormal:prompt_mean=200,prompt_cv=1,output_mean=20,output_cv=1", 300, 3);
	cfg_tiny(&c, cost_a, "vllm", 4000);
	c.n_instances = 3;
	c.router = "lot";
	c.concurrency = 16;
	c.think_time = "exponential:mean_ms=20";
	c.seed = 11;
	run_times(&c, &wl, a);
	run_times(&c, &wl, b);
	ck_assert(memcmp(a, b, sizeof(a)) == 0);
	/* another seed draws other think times */
	c.seed = 12;
	run_times(&c, &wl, b);
	ck_assert(memcmp(a, b, sizeof(a)) != 0);
	workload_release(&wl);
}
END_TEST

START_TEST(trace_lengths_in_file_order_timestamps_ignored)
{
	/* rows out of time order: an open loop would sort them; a closed
	 * loop takes them as written, and sends them when clients are free */
	static const char rows[] = "arrival_ms,prompt_tokens,output_tokens\n"
				   "9000,101,3\n" "10,102,4\n" "5000,103,5\n" "0,104,6\n";
	char path[] = "/tmp/ss-closed-XXXXXX";
	int fd = mkstemp(path);
	struct workload_spec ws = { .trace = path, .closed = true };
	struct ss_error err = { 0 };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, rows, sizeof(rows) - 1), (ssize_t)(sizeof(rows) - 1));
	close(fd);
	workload_init(&wl);
	ck_assert_msg(workload_build(&wl, &ws, &err) == 0, "%s", err.msg);
	unlink(path);
	ck_assert_uint_eq(wl.n, 4);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(wl.req[i].prompt_tokens, 101 + i);
		ck_assert_int_eq(wl.req[i].arrival_ns, 0);
	}
	cfg_tiny(&c, cost_a, "vllm", 4000);
	c.concurrency = 1;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	/* one client: request i is sent when i - 1 finishes, in file order */
	ck_assert_int_eq(r.req[0].arrival_ns, 0);
	ck_assert_int_eq(r.req[0].prompt_tokens, 101);
	for (int i = 1; i < 4; i++) {
		ck_assert_int_eq(r.req[i].prompt_tokens, 101 + i);
		ck_assert_int_eq(r.req[i].arrival_ns, r.req[i - 1].finish_ns);
	}
	engine_free(e);
	/* --num-requests keeps the first rows in file order */
	ws.trace = path;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, rows, sizeof(rows) - 1), (ssize_t)(sizeof(rows) - 1));
	close(fd);
	ws.num_requests = 2;
	ck_assert_int_eq(workload_build(&wl, &ws, &err), 0);
	unlink(path);
	ck_assert_uint_eq(wl.n, 2);
	ck_assert_int_eq(wl.req[1].prompt_tokens, 102);
	workload_release(&wl);
}
END_TEST

START_TEST(generator_lengths_match_the_open_loop)
{
	/* request i has the lengths it has under an open loop of the seed */
	struct workload_spec ws = { .arrival = "poisson:rate=5", .num_requests = 100, .seed = 4,
				    .lengths = "lognormal:prompt_mean=300,prompt_cv=1,output_mean=50,output_cv=1" };
	struct ss_error err = { 0 };
	struct workload open, closed;

	workload_init(&open);
	ck_assert_int_eq(workload_build(&open, &ws, &err), 0);
	closed_gen(&closed, ws.lengths, 100, 4);
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(open.req[i].prompt_tokens, closed.req[i].prompt_tokens);
		ck_assert_int_eq(open.req[i].output_tokens, closed.req[i].output_tokens);
	}
	workload_release(&open);
	workload_release(&closed);
}
END_TEST

START_TEST(a_rejected_request_frees_its_client)
{
	/* request 1 cannot fit the context (4096): rejected at its send,
	 * and its client sends request 2 at once */
	struct wl_request rq[] = {
		{ .prompt_tokens = 100, .output_tokens = 3 },
		{ .prompt_tokens = 5000, .output_tokens = 3 },
		{ .prompt_tokens = 100, .output_tokens = 3 },
	};
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 3);
	cfg_tiny(&c, cost_a, "vllm", 4000);
	c.concurrency = 1;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[1].state, REQ_REJECTED);
	ck_assert_int_eq(r.req[1].arrival_ns, r.req[0].finish_ns);
	ck_assert_int_eq(r.req[2].arrival_ns, r.req[1].arrival_ns);
	ck_assert_int_eq(r.req[2].state, REQ_FINISHED);
	/* 10 ms prefill + 2 decodes of 1 ms */
	ck_assert_int_eq(r.req[2].finish_ns, r.req[2].arrival_ns + 12 * MS);
	engine_free(e);
}
END_TEST

START_TEST(a_request_expired_in_the_queue_frees_its_client)
{
	/* one running at a time (max_num_seqs=1), 30 ms each; a queue
	 * deadline of 5 ms drops the second client's requests while the
	 * first runs, and each drop sends that client's next one */
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;
	uint64_t fin = 0, rej = 0;

	closed_gen(&wl, "fixed:prompt=100,output=21", 60, 1);
	cfg_tiny(&c, cost_a, "vllm:max_num_seqs=1", 4000);
	c.admission = "timeout:ms=5";
	c.concurrency = 2;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_uint_eq(r.n_req, 60);
	for (uint64_t i = 0; i < r.n_req; i++) {
		fin += r.req[i].state == REQ_FINISHED;
		rej += r.req[i].state == REQ_REJECTED;
	}
	ck_assert_uint_eq(fin + rej, 60);
	ck_assert_uint_gt(fin, 0);
	ck_assert_uint_gt(rej, 0);
	engine_free(e);
	workload_release(&wl);
}
END_TEST

START_TEST(ramp_starts_client_k_at_k_ramp_over_n)
{
	/* long requests, so no client finishes within the ramp: the first
	 * sends are exactly the ramp's */
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	closed_gen(&wl, "fixed:prompt=100,output=500", 10, 1);
	cfg_tiny(&c, cost_a, "vllm", 4000);
	c.concurrency = 4;
	c.ramp_ns = 30 * MS;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(r.req[k].arrival_ns, k * 30 * MS / 4);
	ck_assert_int_gt(r.req[4].arrival_ns, 30 * MS);
	engine_free(e);
	/* a ramp longer than the send limit starts only the clients before it */
	c.ramp_ns = 400 * MS;
	c.send_until_ns = 150 * MS;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[1].arrival_ns, 100 * MS);
	for (uint64_t i = 0; i < r.n_req; i++)
		ck_assert_int_lt(r.req[i].arrival_ns, 150 * MS);
	engine_free(e);
	workload_release(&wl);
}
END_TEST

START_TEST(send_limit_stops_the_clients)
{
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	closed_gen(&wl, "fixed:prompt=100,output=11", 1000, 1);
	cfg_tiny(&c, cost_a, "vllm", 4000);
	c.concurrency = 2;
	c.send_until_ns = 200 * MS;
	c.sample_interval_ns = 10 * MS;   /* sampling must stop too */
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_uint_gt(r.n_req, 2);
	ck_assert_uint_lt(r.n_req, 1000);
	for (uint64_t i = 0; i < r.n_req; i++) {
		ck_assert_int_lt(r.req[i].arrival_ns, 200 * MS);
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
	}
	engine_free(e);
	workload_release(&wl);
}
END_TEST

START_TEST(closed_loop_over_disaggregated_pools)
{
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	closed_gen(&wl, "uniform:prompt_min=50,prompt_max=500,output_min=2,output_max=30", 300, 5);
	cfg_tiny(&c, cost_a, "vllm", 4000);
	c.pools[ENGINE_POOL_PREFILL].n = 1;
	c.pools[ENGINE_POOL_DECODE].n = 2;
	c.concurrency = 6;
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(max_in_system(&r), 6);
	for (uint64_t i = 0; i < r.n_req; i++) {
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
		ck_assert_int_ge(r.req[i].kv_xfer_ns, 0);
	}
	engine_free(e);
	workload_release(&wl);
}
END_TEST

START_TEST(bad_values_are_errors)
{
	static const char *const bad[] = {
		"constant", "constant:ms=-1", "exponential:mean_ms=0", "exponential",
		"gamma:mean_ms=10", "gamma:mean_ms=10,cv=0", "gamma:mean_ms=10,cv=1e9",
		"uniform:ms=3", "constant:ms=1,x=2", "exponential:mean_ms=1e12", "",
	};
	static const char *const good[] = {
		"none", "constant:ms=0", "constant:ms=2.5", "exponential:mean_ms=100",
		"gamma:mean_ms=100,cv=2",
	};
	struct ss_error err = { 0 };
	struct think_time tt;
	struct workload_spec ws = { 0 };
	struct workload wl;
	struct wl_request rq[] = { { .prompt_tokens = 10, .output_tokens = 2 } };
	struct engine_config c;
	struct engine *e = NULL;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		ck_assert_msg(think_time_parse(bad[i], &tt, &err) == -EINVAL, "accepted '%s'", bad[i]);
		ck_assert_msg(strstr(err.msg, "--think-time"), "'%s': %s", bad[i], err.msg);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(think_time_parse(good[i], &tt, &err) == 0, "'%s': %s", good[i], err.msg);

	/* closed workloads: no arrival process, a size for a generator */
	workload_init(&wl);
	ws = (struct workload_spec){ .closed = true, .arrival = "poisson:rate=1",
				     .lengths = "fixed:prompt=1,output=1", .num_requests = 5 };
	ck_assert_int_eq(workload_build(&wl, &ws, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--concurrency"));
	ws = (struct workload_spec){ .closed = true, .lengths = "fixed:prompt=1,output=1" };
	ck_assert_int_eq(workload_build(&wl, &ws, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--num-requests"));
	ws = (struct workload_spec){ .closed = true, .lengths = "fixed:prompt=1,output=1",
				     .num_requests = 5, .rate_scale = 2 };
	ck_assert_int_eq(workload_build(&wl, &ws, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--rate-scale"));

	/* the engine: a think time without clients, a bad spec */
	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, cost_a, "vllm", 100);
	c.think_time = "constant:ms=1";
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_ptr_null(e);
	c.concurrency = 2;
	c.think_time = "constant:ms=-3";
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_ptr_null(e);
	c.think_time = NULL;
	c.ramp_ns = -1;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_ptr_null(e);
	c.concurrency = 0;
	c.ramp_ns = MS;
	ck_assert_int_eq(engine_new(&e, &c, &wl, &err), -EINVAL);
	ck_assert_ptr_null(e);
}
END_TEST

START_TEST(open_loop_is_unchanged_by_the_new_fields)
{
	/* concurrency 0 (the default) replays arrival times as before */
	struct wl_request rq[] = { { .arrival_ns = 5 * MS, .prompt_tokens = 100, .output_tokens = 3 } };
	struct workload wl;
	struct engine_config c;
	struct engine_results r;
	struct engine *e;

	wl_fill(&wl, rq, 1);
	cfg_tiny(&c, cost_a, "vllm", 100);
	e = run_ok(&c, &wl);
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].arrival_ns, 5 * MS);
	ck_assert_int_eq(r.req[0].finish_ns, 17 * MS);
	engine_free(e);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("closed");
	TCase *tc = tcase_create("closed");

	tcase_add_test(tc, never_more_than_n_in_the_system);
	tcase_add_test(tc, littles_law_with_no_think_time);
	tcase_add_test(tc, constant_think_time_delays_the_next_send_exactly);
	tcase_add_test(tc, completion_driven_order_is_deterministic);
	tcase_add_test(tc, trace_lengths_in_file_order_timestamps_ignored);
	tcase_add_test(tc, generator_lengths_match_the_open_loop);
	tcase_add_test(tc, a_rejected_request_frees_its_client);
	tcase_add_test(tc, a_request_expired_in_the_queue_frees_its_client);
	tcase_add_test(tc, ramp_starts_client_k_at_k_ramp_over_n);
	tcase_add_test(tc, send_limit_stops_the_clients);
	tcase_add_test(tc, closed_loop_over_disaggregated_pools);
	tcase_add_test(tc, bad_values_are_errors);
	tcase_add_test(tc, open_loop_is_unchanged_by_the_new_fields);
	suite_add_tcase(s, tc);
	return s;
}
