/* Sessions and agent call chains (traces/sessions.c, sim/engine.c
 * "sessions", analysis/sessions.c).  Stated behaviours: a later call is
 * sent exactly its think time after the previous step's completion, and
 * that send is its recorded arrival; consecutive calls share their prefix
 * through the prefix cache, the previous call's output included, to the
 * block; a fan-out step's calls arrive together and the next step waits for
 * the last of them; a rejected call ends its session (the rest is recorded
 * "session abandoned", never sent); the generator's means are those asked
 * for; the readers' errors name file, line and what was expected, and the
 * exgentic reader derives new tokens and think times as documented. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-main.h"
#include "engine-fixture.h"
#include "sessions.h"

#define MS 1000000LL

static const char *cost_a = "constant:prefill_ms_per_token=0.1,decode_ms_per_step=1";

/* A temporary file holding text; its name in path (caller unlinks). */
static void write_tmp(char *path, size_t len, const char *text)
{
	FILE *f;
	int fd;

	snprintf(path, len, "/tmp/ss-sessions-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* Build a workload from a session CSV given as text (and options). */
static int build_text(struct workload *wl, const char *text, const char *opts,
		      struct ss_error *err)
{
	char path[64];
	struct workload_spec ws = { .seed = 1, .sessions = opts };
	int rc;

	write_tmp(path, sizeof(path), text);
	ws.trace = path;
	workload_init(wl);
	rc = workload_build(wl, &ws, err);
	unlink(path);
	return rc;
}

static void build_ok(struct workload *wl, const char *text, const char *opts)
{
	struct ss_error err = { 0 };

	if (build_text(wl, text, opts, &err))
		ck_abort_msg("workload_build: %s", err.msg);
}

static struct engine *run_sessions(const struct workload *wl, const char *prefix_cache)
{
	struct engine_config c;

	cfg_tiny(&c, cost_a, "vllm", 2000);
	c.prefix_cache = prefix_cache;
	return run_ok(&c, wl);
}

START_TEST(think_time_is_honoured_and_is_the_arrival)
{
	struct workload wl;
	struct engine_results r;
	struct engine *e;

	build_ok(&wl,
		 "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		 "a,0,100,10,,0\n"
		 "a,1,50,5,1000,\n"
		 "a,2,20,8,2.5,\n"
		 "b,0,30,3,,7\n", NULL);
	ck_assert_uint_eq(wl.n, 4);
	ck_assert_uint_eq(wl.n_sessions, 2);
	e = run_sessions(&wl, "off");
	engine_results(e, &r);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(r.req[i].state, REQ_FINISHED);
	/* a's calls are 0..2, b's call 3 (b starts later) */
	ck_assert_int_eq(r.req[0].arrival_ns, 0);
	ck_assert_int_eq(r.req[3].arrival_ns, 7 * MS);
	ck_assert_int_eq(r.req[1].arrival_ns, r.req[0].finish_ns + 1000 * MS);
	ck_assert_int_eq(r.req[2].arrival_ns, r.req[1].finish_ns + 2500000);
	/* prompts re-send the conversation: 100, 100+10+50, 160+5+20 */
	ck_assert_int_eq(r.req[0].prompt_tokens, 100);
	ck_assert_int_eq(r.req[1].prompt_tokens, 160);
	ck_assert_int_eq(r.req[2].prompt_tokens, 185);
	/* alone on the instance, a call's TTFT is its prefill: 0.1 ms a token */
	ck_assert_int_eq(r.req[1].first_token_ns - r.req[1].arrival_ns, 16 * MS);
	engine_free(e);
	workload_release(&wl);
}
END_TEST

START_TEST(prefix_shared_per_turn_output_included)
{
	struct workload wl;
	struct engine_results r;
	struct engine *e;
	struct session_summary ss;

	/* blocks of 16 tokens.  Turn 0: 100 + 20 out, KV written for 119
	 * tokens: 7 whole blocks (112) registered, output blocks among them.
	 * Turn 1: prompt 120 + 37 = 157, finds those 7 (112 tokens); writes
	 * 157 + 30 - 1 = 186: 11 blocks.  Turn 2: prompt 187 + 40 = 227,
	 * finds 11 blocks (176 tokens). */
	build_ok(&wl,
		 "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		 "s,0,100,20,,0\n"
		 "s,1,37,30,100,\n"
		 "s,2,40,5,100,\n", NULL);
	e = run_sessions(&wl, "on");
	engine_results(e, &r);
	ck_assert_int_eq(r.req[1].prompt_tokens, 157);
	ck_assert_int_eq(r.req[2].prompt_tokens, 227);
	ck_assert_int_eq(r.req[0].cached_tokens, 0);
	ck_assert_int_eq(r.req[1].cached_tokens, 112);
	ck_assert_int_eq(r.req[2].cached_tokens, 176);
	ck_assert_int_eq(session_summary_compute(&ss, &wl, r.req, r.n_req), 0);
	ck_assert_uint_eq(ss.completed, 1);
	ck_assert_uint_eq(ss.n_turns, 3);
	ck_assert_uint_eq(ss.turn[1].cached_tokens, 112);
	ck_assert_uint_eq(ss.turn[2].prompt_tokens, 227);
	ck_assert_double_eq_tol(ss.completion_s.p50, (double)r.req[2].finish_ns / 1e9, 1e-12);
	engine_free(e);
	/* without the prefix cache nothing is found */
	e = run_sessions(&wl, "off");
	engine_results(e, &r);
	ck_assert_int_eq(r.req[2].cached_tokens, 0);
	engine_free(e);
	workload_release(&wl);
}
END_TEST

START_TEST(fanout_waits_for_all)
{
	struct workload wl;
	struct engine_results r;
	struct engine *e;
	int64_t last;

	build_ok(&wl,
		 "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		 "s,0,64,4,,0\n"
		 "s,1,32,10,200,\n"
		 "s,1,32,40,200,\n"
		 "s,2,16,4,500,\n", NULL);
	ck_assert_uint_eq(wl.sess[1].step_n, 2);
	ck_assert_uint_eq(wl.sess[2].step_first, 1);
	e = run_sessions(&wl, "on");
	engine_results(e, &r);
	/* both branches are sent together, think after call 0 */
	ck_assert_int_eq(r.req[1].arrival_ns, r.req[0].finish_ns + 200 * MS);
	ck_assert_int_eq(r.req[2].arrival_ns, r.req[1].arrival_ns);
	ck_assert_int_lt(r.req[1].finish_ns, r.req[2].finish_ns);
	last = r.req[2].finish_ns;
	ck_assert_int_eq(r.req[3].arrival_ns, last + 500 * MS);
	/* prompts: branch prompts 68 + 32; next step: 68 + 32 + 10 (branch
	 * 0) + 40 (branch 1's output appended) + 16 */
	ck_assert_int_eq(r.req[1].prompt_tokens, 100);
	ck_assert_int_eq(r.req[2].prompt_tokens, 100);
	ck_assert_int_eq(r.req[3].prompt_tokens, 166);
	/* both branches find call 0's 4 whole blocks (64 + 4 - 1 = 67
	 * tokens written); step 2 finds branch 0's 6 (100 + 10 - 1 = 109) */
	ck_assert_int_eq(r.req[1].cached_tokens, 64);
	ck_assert_int_eq(r.req[2].cached_tokens, 64);
	ck_assert_int_eq(r.req[3].cached_tokens, 96);
	engine_free(e);
	workload_release(&wl);
}
END_TEST

START_TEST(rejected_call_ends_its_session)
{
	struct workload wl;
	struct engine_results r;
	struct engine *e;
	struct session_summary ss;

	/* call 1's prompt + output exceed the tiny model's 4096 tokens */
	build_ok(&wl,
		 "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		 "x,0,100,10,,0\n"
		 "x,1,5000,10,10,\n"
		 "x,2,10,10,10,\n"
		 "x,3,10,10,10,\n"
		 "y,0,50,5,,1\n"
		 "y,1,50,5,10,\n", NULL);
	e = run_sessions(&wl, "off");
	engine_results(e, &r);
	ck_assert_int_eq(r.req[0].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[1].state, REQ_REJECTED);
	ck_assert_int_eq(r.req[2].state, REQ_REJECTED);
	ck_assert_int_eq(r.req[3].state, REQ_REJECTED);
	ck_assert_ptr_nonnull(strstr(r.req[2].reject_reason, "session abandoned"));
	ck_assert_int_eq(r.req[2].instance, -1);
	ck_assert_int_eq(r.req[4].state, REQ_FINISHED);
	ck_assert_int_eq(r.req[5].state, REQ_FINISHED);
	ck_assert_int_eq(session_summary_compute(&ss, &wl, r.req, r.n_req), 0);
	ck_assert_uint_eq(ss.count, 2);
	ck_assert_uint_eq(ss.completed, 1);
	ck_assert_uint_eq(ss.dropped, 1);
	ck_assert_uint_eq(ss.calls_abandoned, 2);
	engine_free(e);
	workload_release(&wl);
}
END_TEST

static void gen(struct workload *wl, const char *spec, uint64_t n, uint64_t seed)
{
	struct workload_spec ws = { .sessions = spec, .num_requests = n, .seed = seed,
				    .lengths = "fixed:prompt=10,output=5" };
	struct ss_error err = { 0 };

	workload_init(wl);
	if (workload_build(wl, &ws, &err))
		ck_abort_msg("workload_build: %s", err.msg);
}

START_TEST(generator_means)
{
	struct workload wl;
	double turns = 0, think = 0, n_think = 0, last = 0;

	gen(&wl, "rate=2,turns=4,think_s=3", 4000, 7);
	ck_assert_uint_eq(wl.n_sessions, 4000);
	for (size_t i = 0; i < wl.n; i++) {
		if (wl.sess[i].step == 0) {
			turns++;
			last = (double)wl.req[i].arrival_ns / 1e9;
		} else {
			think += (double)wl.sess[i].think_ns / 1e9;
			n_think++;
		}
	}
	/* Turns: geometric of mean 4 (p = 1/4), sd sqrt(1 - p) / p = 3.46;
	 * the mean of 4000 has a standard error of 0.055: 0.3 is > 5 of
	 * them, so a correct generator fails about once in 10^6 seeds. */
	ck_assert_double_eq_tol((double)wl.n / turns, 4.0, 0.3);
	/* Think: exponential of mean 3 s (sd 3 s) over ~12000 draws, standard
	 * error 0.027 s: 0.15 s is > 5 of them. */
	ck_assert_double_eq_tol(think / n_think, 3.0, 0.15);
	/* Starts: 3999 exponential gaps of mean 0.5 s, standard error of the
	 * mean gap 0.0079 s: 0.04 s is 5 of them. */
	ck_assert_double_eq_tol(last / 3999, 0.5, 0.04);
	/* each call's prompt re-sends the conversation: +15 a turn */
	for (size_t i = 1; i < wl.n; i++)
		if (wl.sess[i].step > 0)
			ck_assert_int_eq(wl.req[i].prompt_tokens, wl.req[i - 1].prompt_tokens + 15);
	workload_release(&wl);

	gen(&wl, "rate=1,turns=fixed:3,think=fixed:2,fanout=3", 10, 1);
	ck_assert_uint_eq(wl.n, 10 * (1 + 3 + 3));
	for (size_t i = 0; i < wl.n; i++) {
		ck_assert_uint_eq(wl.sess[i].step_n, wl.sess[i].step ? 3 : 1);
		if (wl.sess[i].step)
			ck_assert_int_eq(wl.sess[i].think_ns, 2000 * MS);
	}
	workload_release(&wl);

	gen(&wl, "rate=1,turns=50,think_s=1,max_turns=2", 200, 1);
	for (size_t i = 0; i < wl.n; i++)
		ck_assert_uint_lt(wl.sess[i].step, 2);
	workload_release(&wl);
}
END_TEST

START_TEST(generator_is_deterministic_and_bad_specs_fail)
{
	static const char *const bad[] = {
		"turns=5,think_s=5", "rate=1,think_s=5", "rate=1,turns=5",
		"rate=0,turns=5,think_s=1",
		"rate=1,turns=0.5,think_s=1", "rate=1,turns=fixed:2.5,think_s=1",
		"rate=1,turns=5,think_s=-1", "rate=1,turns=5,think=uniform:3",
		"rate=1,turns=5,think_s=1,fanout=0", "rate=1,turns=5,think_s=1,bogus=2",
		"rate=1,turns=5,think_s=1,max_turns=0", "rate", "",
	};
	struct workload a, b;

	gen(&a, "rate=3,turns=3,think_s=1", 50, 9);
	gen(&b, "rate=3,turns=3,think_s=1", 50, 9);
	ck_assert_uint_eq(a.n, b.n);
	ck_assert_int_eq(memcmp(a.req, b.req, a.n * sizeof(*a.req)), 0);
	ck_assert_int_eq(memcmp(a.sess, b.sess, a.n * sizeof(*a.sess)), 0);
	workload_release(&a);
	workload_release(&b);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct workload_spec ws = { .sessions = bad[k], .num_requests = 5 };
		struct ss_error err = { 0 };

		workload_init(&a);
		ck_assert_msg(workload_build(&a, &ws, &err) == -EINVAL, "accepted '%s'", bad[k]);
		ck_assert_msg(strstr(err.msg, "--sessions") && strstr(err.msg, "expected"),
			      "'%s': %s", bad[k], err.msg);
		ck_assert_ptr_null(err.file[0] ? err.file : NULL);
	}
}
END_TEST

START_TEST(reader_errors_name_line)
{
	static const struct { const char *text, *what; long line; } bad[] = {
		{ "session,call,new_tokens,output_tokens,think_ms\n",
		  "missing column 'arrival_ms'", 1 },
		{ "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		  "a,0,10,5,,0\na,2,10,5,1,\n", "expected calls 0, 1, 2", 3 },
		{ "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		  "a,0,ten,5,,0\n", "new_tokens: expected an integer >= 1", 2 },
		{ "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		  "a,0,10,5,,\n", "arrival_ms: expected a time", 2 },
		{ "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		  "a,0,10,5,,0\na,1,10,5,,\n", "think_ms: expected a time", 3 },
		{ "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		  "a,0,10,5,,0\na,1,10,5,1,\na,1,10,5,2,\n", "different think times", 4 },
		{ "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		  "a,1,10,5,1,\n", "expected a call 0", 2 },
		{ "session,call,new_tokens,output_tokens,think_ms,arrival_ms\n", "header only", 1 },
		{ "benchmark,session,call,completed_at_s,prompt_tokens,completion_tokens\n"
		  "b,s,0,10.0,100,5\nb,s,2,11.0,120,5\n", "expected consecutive calls", 3 },
		{ "benchmark,session,call,completed_at_s,prompt_tokens,completion_tokens\n"
		  "b,s,0,10.0,100,5\nb,s,1,9.0,120,5\n", "goes back", 3 },
	};

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct workload wl;
		struct ss_error err = { 0 };

		ck_assert_int_ne(build_text(&wl, bad[k].text, NULL, &err), 0);
		ck_assert_msg(strstr(err.msg, bad[k].what), "case %zu: %s", k, err.msg);
		ck_assert_msg(err.line == bad[k].line, "case %zu: line %ld: %s", k, err.line,
			      err.msg);
		ck_assert_msg(strstr(err.file, "ss-sessions-"), "case %zu: no file", k);
		ck_assert_uint_eq(wl.n, 0);
	}
}
END_TEST

START_TEST(exgentic_derivation)
{
	static const char text[] =
		"benchmark,session,call,completed_at_s,prompt_tokens,completion_tokens\n"
		"b,s,0,100.0,1000,250\n"
		"b,s,1,103.0,1300,500\n"   /* grows 1300 - 1000 - 250 = 50 */
		"b,s,2,103.5,1700,100\n";  /* shrinks: 1700 - 1800 < 1: 1 */
	struct workload wl;

	/* net (default): gap less output / 250 tok/s: 3 - 2 = 1 s, then
	 * 0.5 - 0.4 = 0.1 s; the session starts 250 / 250 = 1 s before its
	 * first completion */
	build_ok(&wl, text, NULL);
	ck_assert_uint_eq(wl.n, 3);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 1000);
	ck_assert_int_eq(wl.req[1].prompt_tokens, 1000 + 250 + 50);
	ck_assert_int_eq(wl.req[2].prompt_tokens, 1300 + 500 + 1);
	ck_assert_int_eq(wl.sess[1].think_ns, 1000 * MS);
	ck_assert_int_eq(wl.sess[2].think_ns, 100 * MS);
	workload_release(&wl);
	build_ok(&wl, text, "think=gap");
	ck_assert_int_eq(wl.sess[1].think_ns, 3000 * MS);
	ck_assert_int_eq(wl.sess[2].think_ns, 500 * MS);
	workload_release(&wl);
	build_ok(&wl, text, "think=net,remote_tps=1000,max_turns=2");
	ck_assert_uint_eq(wl.n, 2);
	ck_assert_int_eq(wl.sess[1].think_ns, 2500 * MS);
	workload_release(&wl);
	build_ok(&wl, text, "think=none");
	ck_assert_int_eq(wl.sess[1].think_ns, 0);
	workload_release(&wl);
}
END_TEST

START_TEST(rate_scale_and_cuts_keep_whole_sessions)
{
	static const char text[] =
		"session,call,new_tokens,output_tokens,think_ms,arrival_ms\n"
		"a,0,10,5,,0\na,1,10,5,1000,\n"
		"b,0,10,5,,4000\nb,1,10,5,1000,\n"
		"c,0,10,5,,8000\n";
	char path[64];
	struct workload_spec ws = { .seed = 1, .rate_scale = 2 };
	struct workload wl;
	struct ss_error err = { 0 };

	write_tmp(path, sizeof(path), text);
	ws.trace = path;
	workload_init(&wl);
	ck_assert_int_eq(workload_build(&wl, &ws, &err), 0);
	/* --rate-scale 2 halves the session starts, not the think times */
	ck_assert_int_eq(wl.req[2].arrival_ns, 2000 * MS);
	ck_assert_int_eq(wl.req[4].arrival_ns, 4000 * MS);
	ck_assert_int_eq(wl.sess[3].think_ns, 1000 * MS);
	workload_release(&wl);
	/* --num-requests counts sessions, whole */
	ws = (struct workload_spec){ .seed = 1, .trace = path, .num_requests = 2 };
	ck_assert_int_eq(workload_build(&wl, &ws, &err), 0);
	ck_assert_uint_eq(wl.n_sessions, 2);
	ck_assert_uint_eq(wl.n, 4);
	workload_release(&wl);
	/* --duration keeps the sessions starting before it, whole */
	ws = (struct workload_spec){ .seed = 1, .trace = path, .duration_ns = 4000 * MS };
	ck_assert_int_eq(workload_build(&wl, &ws, &err), 0);
	ck_assert_uint_eq(wl.n_sessions, 1);
	ck_assert_uint_eq(wl.n, 2);
	workload_release(&wl);
	/* refused: a closed loop, synthetic arrivals, --rate, --tenants */
	ws = (struct workload_spec){ .trace = path, .closed = true };
	ck_assert_int_eq(workload_build(&wl, &ws, &err), -EINVAL);
	ws = (struct workload_spec){ .trace = path, .arrival = "poisson:rate=1" };
	ck_assert_int_eq(workload_build(&wl, &ws, &err), -EINVAL);
	ws = (struct workload_spec){ .trace = path, .target_rate = 3 };
	ck_assert_int_eq(workload_build(&wl, &ws, &err), -EINVAL);
	ws = (struct workload_spec){ .trace = path, .tenants = "2" };
	ck_assert_int_eq(workload_build(&wl, &ws, &err), -EINVAL);
	ck_assert_uint_eq(wl.n, 0);
	unlink(path);
}
END_TEST

START_TEST(exgentic_trace_replays)
{
	const char *dir = getenv("SERVESIM_SHARED_DATA");
	char path[1024];
	struct workload_spec ws = { .trace = path, .seed = 1 };
	struct workload wl;
	struct ss_error err = { 0 };
	enum trace_format fmt;

	snprintf(path, sizeof(path), "%s/traces/agent_sessions/exgentic_sessions.csv",
		 dir ? dir : "../shared/data");
	if (access(path, R_OK))
		return;   /* shared data absent: cli-sessions.sh skips (77) then */
	ck_assert_int_eq(trace_detect(path, &fmt, &err), 0);
	ck_assert_int_eq(fmt, TRACE_EXGENTIC);
	workload_init(&wl);
	ck_assert_int_eq(workload_build(&wl, &ws, &err), 0);
	/* PROVENANCE.md: 167 calls in 18 sessions */
	ck_assert_uint_eq(wl.n, 167);
	ck_assert_uint_eq(wl.n_sessions, 18);
	workload_release(&wl);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("sessions");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, think_time_is_honoured_and_is_the_arrival);
	tcase_add_test(tc, prefix_shared_per_turn_output_included);
	tcase_add_test(tc, fanout_waits_for_all);
	tcase_add_test(tc, rejected_call_ends_its_session);
	tcase_add_test(tc, generator_means);
	tcase_add_test(tc, generator_is_deterministic_and_bad_specs_fail);
	tcase_add_test(tc, reader_errors_name_line);
	tcase_add_test(tc, exgentic_derivation);
	tcase_add_test(tc, rate_scale_and_cuts_keep_whole_sessions);
	tcase_add_test(tc, exgentic_trace_replays);
	suite_add_tcase(s, tc);
	return s;
}
