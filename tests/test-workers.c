/* Behaviours of the worker pool plan and sweep share (cli/workers.h):
 * every task answered once, a group in order by one worker, a stop or an
 * error from on_answer stops the handing out, a worker that dies is an
 * error naming it, and an interrupt stops everything without one; over
 * (fake) MPI ranks, groups dealt round robin and every answer reaching
 * rank 0. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workers.h"

#define N_MAX 64

struct answer {
	uint32_t idx;
	int32_t pid;       /* the process that ran it */
};

struct state {
	struct answer got[N_MAX];
	size_t n_got;
	int stop_after;    /* on_answer returns stop_code after this many (0: never) */
	int stop_code;
	uint32_t die_at;   /* a worker running this index is killed (UINT32_MAX: none) */
	long sleep_ms;     /* each task takes this long */
};

static void run(void *ctx, uint32_t idx, void *msg)
{
	const struct state *s = ctx;
	struct answer *a = msg;

	if (idx == s->die_at)
		raise(SIGKILL);   /* a crash; no exit handlers (valgrind's either) */
	if (s->sleep_ms > 0) {
		struct timespec ts = { s->sleep_ms / 1000, s->sleep_ms % 1000 * 1000000L };

		nanosleep(&ts, NULL);
	}
	memset(a, 0, sizeof(*a));
	a->idx = idx;
	a->pid = (int32_t)getpid();
}

static int on_answer(void *ctx, const void *msg, struct ss_error *err)
{
	struct state *s = ctx;

	ck_assert_uint_lt(s->n_got, N_MAX);
	memcpy(&s->got[s->n_got++], msg, sizeof(struct answer));
	if (s->stop_after && (int)s->n_got >= s->stop_after)
		return s->stop_code < 0 ? ss_error_set(err, s->stop_code, NULL, 0, "stop here")
					: s->stop_code;
	return 0;
}

static struct cli_workers pool(struct state *s, const uint32_t *idx, size_t n, int jobs)
{
	memset(s, 0, sizeof(*s));
	s->die_at = UINT32_MAX;
	return (struct cli_workers){ .name = "test", .idx = idx, .n_groups = n,
				    .msg_size = sizeof(struct answer), .jobs = jobs,
				    .run = run, .on_answer = on_answer, .ctx = s };
}

START_TEST(every_task_once_a_group_by_one_worker_in_order)
{
	static const uint32_t idx[10] = { 9, 8, 7, 6, 5, 4, 3, 2, 1, 0 };
	static const size_t group[5] = { 0, 3, 4, 6, 10 };
	struct ss_error err = { 0 };
	struct state s;
	struct cli_workers w = pool(&s, idx, 4, 3);
	int seen[10] = { 0 };

	w.group = group;
	ck_assert_int_eq(cli_workers_run(&w, &err), 0);
	ck_assert_uint_eq(s.n_got, 10);
	for (size_t k = 0; k < s.n_got; k++) {
		ck_assert_uint_lt(s.got[k].idx, 10);
		seen[s.got[k].idx]++;
		ck_assert_int_ne(s.got[k].pid, (int32_t)getpid());
	}
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(seen[i], 1);
	/* each group's answers come from one worker, in the group's order */
	for (size_t g = 0; g < 4; g++) {
		int32_t pid = 0;
		size_t next = group[g];

		for (size_t k = 0; k < s.n_got; k++) {
			size_t pos = 10 - 1 - s.got[k].idx;   /* its place in idx[] */

			if (pos < group[g] || pos >= group[g + 1])
				continue;
			ck_assert_uint_eq(pos, next++);
			if (!pid)
				pid = s.got[k].pid;
			ck_assert_int_eq(s.got[k].pid, pid);
		}
		ck_assert_uint_eq(next, group[g + 1]);
	}
}
END_TEST

START_TEST(one_job_runs_here_in_order)
{
	static const uint32_t idx[5] = { 4, 2, 0, 1, 3 };
	struct ss_error err = { 0 };
	struct state s;
	struct cli_workers w = pool(&s, idx, 5, 1);

	ck_assert_int_eq(cli_workers_run(&w, &err), 0);
	ck_assert_uint_eq(s.n_got, 5);
	for (size_t k = 0; k < 5; k++) {
		ck_assert_uint_eq(s.got[k].idx, idx[k]);
		ck_assert_int_eq(s.got[k].pid, (int32_t)getpid());
	}
}
END_TEST

START_TEST(a_stop_ends_the_handing_out)
{
	uint32_t idx[40];
	struct ss_error err = { 0 };
	struct state s;
	struct cli_workers w;

	for (uint32_t i = 0; i < 40; i++)
		idx[i] = i;
	/* > 0: stop, no error; only what was handed out is answered */
	w = pool(&s, idx, 40, 2);
	s.stop_after = 1;
	s.stop_code = 1;
	ck_assert_int_eq(cli_workers_run(&w, &err), 0);
	ck_assert_uint_ge(s.n_got, 1);
	ck_assert_uint_le(s.n_got, 2);
	/* < 0: the error comes back, here and in workers */
	for (int jobs = 1; jobs <= 2; jobs++) {
		w = pool(&s, idx, 40, jobs);
		s.stop_after = 3;
		s.stop_code = -ENOSPC;
		ck_assert_int_eq(cli_workers_run(&w, &err), -ENOSPC);
		ck_assert_str_eq(err.msg, "stop here");
		ck_assert_uint_le(s.n_got, 4);
	}
}
END_TEST

START_TEST(a_worker_that_dies_is_an_error_naming_it)
{
	uint32_t idx[12];
	struct ss_error err = { 0 };
	struct state s;
	struct cli_workers w;

	for (uint32_t i = 0; i < 12; i++)
		idx[i] = i;
	w = pool(&s, idx, 12, 2);
	s.die_at = 5;
	ck_assert_int_eq(cli_workers_run(&w, &err), -EPIPE);
	ck_assert_msg(strstr(err.msg, "test: worker process ") &&
		      strstr(err.msg, " killed by signal 9 before answering"), "%s", err.msg);
	ck_assert_uint_lt(s.n_got, 12);
}
END_TEST

START_TEST(an_interrupt_stops_without_an_error)
{
	static volatile sig_atomic_t flag;
	uint32_t idx[20];
	struct ss_error err = { 0 };
	struct state s;
	struct cli_workers w;

	for (uint32_t i = 0; i < 20; i++)
		idx[i] = i;
	/* here: nothing runs */
	flag = SIGTERM;
	w = pool(&s, idx, 20, 1);
	w.interrupted = &flag;
	ck_assert_int_eq(cli_workers_run(&w, &err), 0);
	ck_assert_uint_eq(s.n_got, 0);
	/* in workers: those running get the signal (and die of it: Check's
	 * handler, which a worker would inherit, signals the test's process
	 * group), no more are handed out, no error */
	signal(SIGTERM, SIG_DFL);
	w = pool(&s, idx, 20, 2);
	w.interrupted = &flag;
	s.sleep_ms = 2000;
	ck_assert_int_eq(cli_workers_run(&w, &err), 0);
	ck_assert_uint_eq(s.n_got, 0);
}
END_TEST

/* A fake MPI transport: what rank 1 sends, and what rank 0 receives. */
static struct answer sent[N_MAX], inbox[N_MAX];
static size_t n_sent, n_inbox, n_taken;

static void fake_send(const void *msg, size_t n)
{
	ck_assert_uint_eq(n, sizeof(struct answer));
	memcpy(&sent[n_sent++], msg, n);
}

static bool fake_recv(void *msg, size_t n, bool wait)
{
	ck_assert_uint_eq(n, sizeof(struct answer));
	if (n_taken == n_inbox) {
		ck_assert_msg(!wait, "rank 0 waits for an answer that never comes");
		return false;
	}
	memcpy(msg, &inbox[n_taken++], n);
	return true;
}

static void skip(void *ctx, uint32_t idx, void *msg)
{
	struct answer *a = msg;

	(void)ctx;
	a->idx = idx;
	a->pid = -1;
}

START_TEST(ranks_share_groups_round_robin_and_rank_0_gets_every_answer)
{
	static const uint32_t idx[7] = { 10, 11, 12, 13, 14, 15, 16 };
	static const size_t group[5] = { 0, 2, 3, 5, 7 };   /* {10,11} {12} {13,14} {15,16} */
	static volatile sig_atomic_t flag;
	struct cli_ranks r = { .rank = 1, .size = 2, .send = fake_send, .recv = fake_recv,
			       .skip = skip };
	struct ss_error err = { 0 };
	struct state s;
	struct cli_workers w = pool(&s, idx, 4, 2);

	w.group = group;
	/* rank 1: groups 1 and 3, in order, all sent */
	n_sent = 0;
	ck_assert_int_eq(cli_workers_run_ranks(&w, &r, &err), 0);
	ck_assert_uint_eq(n_sent, 3);
	ck_assert_uint_eq(sent[0].idx, 12);
	ck_assert_uint_eq(sent[1].idx, 15);
	ck_assert_uint_eq(sent[2].idx, 16);
	ck_assert_uint_eq(s.n_got, 0);
	/* after an interrupt, skipped, still one answer each */
	flag = SIGINT;
	w.interrupted = &flag;
	n_sent = 0;
	ck_assert_int_eq(cli_workers_run_ranks(&w, &r, &err), 0);
	ck_assert_uint_eq(n_sent, 3);
	ck_assert_int_eq(sent[0].pid, -1);
	/* rank 0: its groups 0 and 2, and the 3 answers of rank 1 */
	w = pool(&s, idx, 4, 2);
	w.group = group;
	r.rank = 0;
	memcpy(inbox, sent, sizeof(inbox));
	n_inbox = 3;
	n_taken = 0;
	ck_assert_int_eq(cli_workers_run_ranks(&w, &r, &err), 0);
	ck_assert_uint_eq(s.n_got, 7);
	ck_assert_uint_eq(s.got[0].idx, 10);
	/* a stop at the first answer ends rank 0's share, not the receiving */
	w = pool(&s, idx, 4, 2);
	w.group = group;
	s.stop_after = 1;
	s.stop_code = -EIO;
	n_taken = 0;
	ck_assert_int_eq(cli_workers_run_ranks(&w, &r, &err), -EIO);
	ck_assert_uint_eq(n_taken, 3);
	ck_assert_uint_eq(s.n_got, 4);   /* 10, then the 3 received */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("workers");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, every_task_once_a_group_by_one_worker_in_order);
	tcase_add_test(tc, one_job_runs_here_in_order);
	tcase_add_test(tc, a_stop_ends_the_handing_out);
	tcase_add_test(tc, a_worker_that_dies_is_an_error_naming_it);
	tcase_add_test(tc, an_interrupt_stops_without_an_error);
	tcase_add_test(tc, ranks_share_groups_round_robin_and_rank_0_gets_every_answer);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
