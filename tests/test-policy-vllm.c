/* Invariants of the vllm batch policy, on hand-built instance views:
 * token and sequence budgets hold, running decodes are served before new
 * prefills, preemption takes the newest running request, admission is FCFS
 * without overtaking, and chunking splits long prompts. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check-main.h"
#include "policy.h"

extern const struct batch_policy_ops batch_vllm_ops;

struct fixture {
	struct req_view req[64];
	const struct req_view *running[64], *waiting[64];
	struct inst_view inst;
	struct step_item items[128];
	const struct req_view *preempt[64], *scratch[192];
	struct step_plan plan;
	char priv[256];
};

static void setup(struct fixture *f, const char *spec, int32_t free_blocks)
{
	struct ss_params p;
	struct ss_error err = { 0 };

	memset(f, 0, sizeof(*f));
	ck_assert_int_eq(ss_params_parse(&p, "--policy", spec, true, &err), 0);
	ck_assert_uint_le(batch_vllm_ops.priv_size, sizeof(f->priv));
	ck_assert_int_eq(batch_vllm_ops.init(f->priv, &p, &err), 0);
	ck_assert_int_eq(ss_params_check_unused(&p, &err), 0);
	f->inst.block_size = 16;
	f->inst.total_blocks = 1000;
	f->inst.free_blocks = free_blocks;
	f->inst.max_model_len = 100000;
	f->inst.running = f->running;
	f->inst.waiting = f->waiting;
	f->plan = (struct step_plan){ .items = f->items, .cap_items = 128,
				      .preempt = f->preempt, .cap_preempt = 64,
				      .scratch = f->scratch, .cap_scratch = 192 };
}

/* A decoding request: prompt p, g tokens generated, KV holds p + g - 1. */
static const struct req_view *add_running(struct fixture *f, int id, int32_t p, int32_t g)
{
	struct req_view *r = &f->req[id];

	*r = (struct req_view){ .id = (uint32_t)id, .prompt_tokens = p, .generated_tokens = g,
				.computed_tokens = p + g - 1, .state = REQ_RUNNING };
	r->kv_blocks = (r->computed_tokens + 15) / 16;
	f->running[f->inst.n_running++] = r;
	return r;
}

static const struct req_view *add_waiting(struct fixture *f, int id, int32_t p)
{
	struct req_view *r = &f->req[id];

	*r = (struct req_view){ .id = (uint32_t)id, .prompt_tokens = p, .state = REQ_QUEUED };
	f->waiting[f->inst.n_waiting++] = r;
	return r;
}

static void pick(struct fixture *f)
{
	batch_vllm_ops.pick_step(f->priv, &f->inst, 0, NULL, &f->plan);
}

static int32_t plan_tokens(const struct fixture *f)
{
	int32_t t = 0;

	for (uint32_t i = 0; i < f->plan.n_items; i++)
		t += f->plan.items[i].tokens;
	return t;
}

START_TEST(decodes_first_then_fcfs_prefills_within_budget)
{
	struct fixture f;

	setup(&f, "vllm:max_num_batched_tokens=1000,chunked=off", 500);
	add_running(&f, 0, 100, 5);
	add_running(&f, 1, 200, 9);
	add_waiting(&f, 2, 600);
	add_waiting(&f, 3, 500);   /* does not fit after request 2 */
	add_waiting(&f, 4, 10);    /* would fit, but FCFS does not overtake */
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 3);
	ck_assert_uint_eq(f.plan.items[0].req->id, 0);
	ck_assert_int_eq(f.plan.items[0].tokens, 1);
	ck_assert_uint_eq(f.plan.items[1].req->id, 1);
	ck_assert_uint_eq(f.plan.items[2].req->id, 2);
	ck_assert_int_eq(f.plan.items[2].tokens, 600);
	ck_assert_int_le(plan_tokens(&f), 1000);
	ck_assert_uint_eq(f.plan.n_preempt, 0);
}
END_TEST

START_TEST(v0_runs_prefill_only_steps_then_decode_only_steps)
{
	struct fixture f;

	/* waiting prompts fit: the step is theirs alone, decodes stall */
	setup(&f, "vllm:v0=on,max_num_batched_tokens=1000", 500);
	add_running(&f, 0, 100, 5);
	add_running(&f, 1, 200, 9);
	add_waiting(&f, 2, 600);
	add_waiting(&f, 3, 300);
	add_waiting(&f, 4, 500);   /* over the budget after 2 and 3 */
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 2);
	ck_assert_uint_eq(f.plan.items[0].req->id, 2);
	ck_assert_int_eq(f.plan.items[0].tokens, 600);
	ck_assert_uint_eq(f.plan.items[1].req->id, 3);
	ck_assert_int_eq(f.plan.items[1].tokens, 300);

	/* nothing waiting fits: every running request decodes */
	setup(&f, "vllm:v0=on,max_num_batched_tokens=1000", 500);
	add_running(&f, 0, 100, 5);
	add_running(&f, 1, 200, 9);
	add_waiting(&f, 2, 1001);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 2);
	ck_assert_int_eq(f.plan.items[0].tokens, 1);
	ck_assert_int_eq(f.plan.items[1].tokens, 1);

	/* decodes preempt the newest when blocks run out, as in V1 */
	setup(&f, "vllm:v0=on", 1);
	add_running(&f, 0, 30, 3);
	add_running(&f, 1, 30, 3);
	add_running(&f, 2, 30, 3);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_preempt, 1);
	ck_assert_uint_eq(f.plan.preempt[0]->id, 2);
	ck_assert_uint_eq(f.plan.n_items, 2);
}
END_TEST

START_TEST(sequence_limit_holds)
{
	struct fixture f;

	setup(&f, "vllm:max_num_seqs=4", 1000);
	for (int i = 0; i < 3; i++)
		add_running(&f, i, 50, 2);
	for (int i = 3; i < 10; i++)
		add_waiting(&f, i, 20);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 4);   /* 3 running + 1 new */
}
END_TEST

START_TEST(chunked_prefill_splits_to_the_budget)
{
	struct fixture f;

	setup(&f, "vllm:max_num_batched_tokens=512,chunked=on", 1000);
	add_running(&f, 0, 100, 3);
	add_waiting(&f, 1, 2000);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 2);
	ck_assert_int_eq(f.plan.items[1].tokens, 511);
	ck_assert_int_eq(plan_tokens(&f), 512);
}
END_TEST

START_TEST(unchunked_rejects_prompts_over_budget)
{
	struct fixture f;
	const char *reason = NULL;

	setup(&f, "vllm:max_num_batched_tokens=512,chunked=off", 1000);
	add_waiting(&f, 0, 513);
	ck_assert(!batch_vllm_ops.admissible(f.priv, &f.req[0], &f.inst, &reason));
	ck_assert_ptr_nonnull(reason);
	add_waiting(&f, 1, 512);
	ck_assert(batch_vllm_ops.admissible(f.priv, &f.req[1], &f.inst, &reason));
}
END_TEST

START_TEST(preempts_newest_when_blocks_run_out)
{
	struct fixture f;

	/* Three decodes each at a block boundary (KV = 32 tokens = 2 blocks),
	 * so each needs a new block; one free block: request 0 takes it,
	 * request 1 needs one more, so the newest (2) is preempted and its two
	 * blocks serve request 1. */
	setup(&f, "vllm", 1);
	add_running(&f, 0, 30, 3);
	add_running(&f, 1, 30, 3);
	add_running(&f, 2, 30, 3);
	add_waiting(&f, 3, 10);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_preempt, 1);
	ck_assert_uint_eq(f.plan.preempt[0]->id, 2);
	ck_assert_uint_eq(f.plan.n_items, 2);
	ck_assert_uint_eq(f.plan.items[0].req->id, 0);
	ck_assert_uint_eq(f.plan.items[1].req->id, 1);
	/* no admission in a step that preempted */
	for (uint32_t i = 0; i < f.plan.n_items; i++)
		ck_assert_uint_ne(f.plan.items[i].req->id, 3);
}
END_TEST

START_TEST(a_request_can_preempt_itself)
{
	struct fixture f;

	setup(&f, "vllm", 0);
	add_running(&f, 0, 30, 3);   /* needs a block, none free, nobody newer */
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 0);
	ck_assert_uint_eq(f.plan.n_preempt, 1);
	ck_assert_uint_eq(f.plan.preempt[0]->id, 0);
}
END_TEST

START_TEST(admission_waits_for_blocks)
{
	struct fixture f;

	/* As in vLLM, a new request's whole scheduled chunk must fit in the
	 * free blocks: 3 blocks hold 48 tokens, so a 49-token prompt waits
	 * (even with chunking) and a 48-token one is admitted. */
	setup(&f, "vllm", 3);
	add_waiting(&f, 0, 49);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 0);
	setup(&f, "vllm:chunked=off", 3);
	add_waiting(&f, 0, 48);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 1);
	ck_assert_int_eq(f.plan.items[0].tokens, 48);
}
END_TEST

/* admission=peak (S-LoRA's LightLLM router): running request 0 (prompt
 * 100, 1 generated, 1000 at most) and waiting request 1 (prompt 100, 10 at
 * most), one token a block.  The sum of what each still needs, 1000 + 110,
 * does not fit 1050 free blocks, so no_evict lets 1 wait; the peak does:
 * when 1 finishes, 0 holds 110 and 1 110 (220), when 0 finishes it holds
 * 1100 alone, within 1050 + the 100 it holds.  With 990 free both refuse. */
START_TEST(peak_admits_what_the_sum_refuses)
{
	static const struct { const char *adm; int32_t free_blocks; uint32_t admitted; } cases[] = {
		{ "no_evict", 1050, 0 }, { "peak", 1050, 1 },
		{ "no_evict", 990, 0 }, { "peak", 990, 0 },
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct fixture f;
		char spec[96];
		struct req_view *r0, *w;

		snprintf(spec, sizeof(spec), "vllm:v0=on,chunked=off,admission=%s", cases[k].adm);
		setup(&f, spec, cases[k].free_blocks);
		f.inst.block_size = 1;
		f.inst.total_blocks = 5000;
		r0 = (struct req_view *)add_running(&f, 0, 100, 1);
		r0->kv_blocks = r0->computed_tokens;
		r0->predicted_output = 1000;
		w = (struct req_view *)add_waiting(&f, 1, 100);
		w->predicted_output = 10;
		pick(&f);
		ck_assert_msg(f.plan.n_items == cases[k].admitted || (cases[k].admitted == 0 &&
			      f.plan.n_items == 1 && f.plan.items[0].req == r0),
			      "admission=%s, %d free: %u items", cases[k].adm, cases[k].free_blocks,
			      f.plan.n_items);
		if (cases[k].admitted)
			ck_assert_ptr_eq(f.plan.items[0].req, w);
		ck_assert_uint_eq(f.plan.n_preempt, 0);
	}
}
END_TEST

/* admission= names a known rule: one line naming the three. */
START_TEST(admission_value_is_checked)
{
	struct ss_params p;
	struct ss_error err = { 0 };
	char priv[256];

	ck_assert_int_eq(ss_params_parse(&p, "--policy", "vllm:admission=sum", true, &err), 0);
	ck_assert_int_eq(batch_vllm_ops.init(priv, &p, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "--policy vllm: expected admission=greedy, no_evict or peak, got 'sum'");
}
END_TEST

/* admission=no_evict (TensorRT-LLM's GUARANTEED_NO_EVICT): request 0
 * decodes with 32 tokens in 2 blocks and may reach 30 + 100 = 130 tokens
 * (9 blocks), so it still needs 7; request 1 may reach 32 + 32 = 64 tokens
 * (4 blocks).  With 10 free blocks greedy admission takes request 1 (2
 * blocks now); no_evict sees 10 - 7 = 3 < 4 and lets it wait; with 11
 * free it admits it, and not request 2 behind it. */
START_TEST(no_evict_reserves_the_maximum_output)
{
	static const char *const specs[] = { "vllm:chunked=off", "vllm:v0=on" };
	struct fixture f;

	for (int k = 0; k < 2; k++) {
		char spec[64];

		setup(&f, specs[k], 10);
		((struct req_view *)add_running(&f, 0, 30, 3))->predicted_output = 100;
		((struct req_view *)add_waiting(&f, 1, 32))->predicted_output = 32;
		pick(&f);
		ck_assert_uint_eq(f.plan.items[f.plan.n_items - 1].req->id, 1);

		snprintf(spec, sizeof(spec), "%s,admission=no_evict", specs[k]);
		setup(&f, spec, 10);
		((struct req_view *)add_running(&f, 0, 30, 3))->predicted_output = 100;
		((struct req_view *)add_waiting(&f, 1, 32))->predicted_output = 32;
		pick(&f);
		ck_assert_uint_eq(f.plan.n_preempt, 0);
		ck_assert_uint_eq(f.plan.n_items, 1);   /* the decode only */
		ck_assert_uint_eq(f.plan.items[0].req->id, 0);

		setup(&f, spec, 11);
		((struct req_view *)add_running(&f, 0, 30, 3))->predicted_output = 100;
		((struct req_view *)add_waiting(&f, 1, 32))->predicted_output = 32;
		((struct req_view *)add_waiting(&f, 2, 1))->predicted_output = 1;
		pick(&f);
		ck_assert_uint_eq(f.plan.n_preempt, 0);
		ck_assert_uint_eq(f.plan.items[f.plan.n_items - 1].req->id, 1);
		for (uint32_t i = 0; i < f.plan.n_items; i++)
			ck_assert_uint_ne(f.plan.items[i].req->id, 2);
	}
}
END_TEST

/* Without a prediction a request may reach the model's context; one whose
 * prompt plus maximum output cannot fit the whole cache is rejected on
 * arrival rather than left waiting for ever.  no_evict asks for
 * predictions, greedy does not. */
START_TEST(no_evict_without_prediction_reserves_the_context)
{
	struct fixture f;
	const char *reason = NULL;
	struct req_view *w;

	setup(&f, "vllm:admission=no_evict", 1000);
	f.inst.max_model_len = 16 * 1000;
	w = (struct req_view *)add_waiting(&f, 0, 100);
	w->predicted_output = -1;
	ck_assert(batch_vllm_ops.admissible(f.priv, w, &f.inst, &reason));
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 1);   /* all 1000 blocks reserved */
	setup(&f, "vllm:admission=no_evict", 999);
	f.inst.max_model_len = 16 * 1000;
	w = (struct req_view *)add_waiting(&f, 0, 100);
	w->predicted_output = -1;
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 0);
	w->predicted_output = 16 * 1000 + 1 - 100;   /* capped at the context */
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 0);
	f.inst.max_model_len = 16 * 1000 + 1;        /* 1001 blocks */
	ck_assert(!batch_vllm_ops.admissible(f.priv, w, &f.inst, &reason));
	ck_assert_ptr_nonnull(strstr(reason, "no_evict"));
	ck_assert(batch_vllm_ops.uses_predictions(f.priv));
	setup(&f, "vllm", 1000);
	ck_assert(!batch_vllm_ops.uses_predictions(f.priv));
}
END_TEST

/* A running request that outgrew its reservation (a prediction below the
 * truth) is still served; when the pool runs out the newest is preempted
 * so that the run progresses, as in greedy mode. */
START_TEST(no_evict_preempts_only_past_the_reservation)
{
	struct fixture f;

	setup(&f, "vllm:admission=no_evict", 1);
	((struct req_view *)add_running(&f, 0, 30, 3))->predicted_output = 2;
	((struct req_view *)add_running(&f, 1, 30, 3))->predicted_output = 2;
	pick(&f);
	ck_assert_uint_eq(f.plan.n_preempt, 1);
	ck_assert_uint_eq(f.plan.preempt[0]->id, 1);
}
END_TEST

/* admit_wait=2: after a step that admits, two steps decode although a
 * prompt waits; the third admits again; an idle instance admits at once;
 * V1 (chunked) steps keep decoding and only skip admission. */
START_TEST(admit_wait_decodes_between_admissions)
{
	static const char *const specs[] = { "vllm:v0=on,admit_wait=2",
					      "vllm:chunked=off,admit_wait=2" };

	for (int k = 0; k < 2; k++) {
		struct fixture f;
		bool v0 = k == 0;

		setup(&f, specs[k], 500);
		add_waiting(&f, 0, 100);
		pick(&f);   /* nothing runs: admits at once */
		ck_assert_uint_eq(f.plan.n_items, 1);
		ck_assert_uint_eq(f.plan.items[0].req->id, 0);

		f.inst.n_waiting = 0;
		add_running(&f, 0, 100, 1);
		add_waiting(&f, 1, 100);
		for (int step = 0; step < 2; step++) {
			f.plan.n_items = 0;
			pick(&f);   /* waits: decodes only */
			ck_assert_uint_eq(f.plan.n_items, 1);
			ck_assert_uint_eq(f.plan.items[0].req->id, 0);
			ck_assert_int_eq(f.plan.items[0].tokens, 1);
		}
		f.plan.n_items = 0;
		pick(&f);   /* the wait is over: admits request 1 */
		ck_assert_uint_eq(f.plan.n_items, v0 ? 1 : 2);
		ck_assert_uint_eq(f.plan.items[f.plan.n_items - 1].req->id, 1);
		ck_assert_int_eq(f.plan.items[f.plan.n_items - 1].tokens, 100);

		add_waiting(&f, 2, 100);
		f.inst.waiting = f.waiting + 1;
		f.inst.n_waiting = 1;
		f.plan.n_items = 0;
		pick(&f);   /* just admitted: waits again */
		ck_assert_uint_eq(f.plan.n_items, 1);
		ck_assert_uint_eq(f.plan.items[0].req->id, 0);
	}
}
END_TEST

START_TEST(bad_parameters_are_errors)
{
	struct ss_params p;
	struct ss_error err = { 0 };
	char priv[64];

	ss_params_parse(&p, "--policy", "vllm:max_num_seqs=0", true, &err);
	ck_assert_int_lt(batch_vllm_ops.init(priv, &p, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "max_num_seqs"));
	ss_params_parse(&p, "--policy", "vllm:chunked=maybe", true, &err);
	ck_assert_int_lt(batch_vllm_ops.init(priv, &p, &err), 0);
	ss_params_parse(&p, "--policy", "vllm:admission=evict", true, &err);
	ck_assert_int_lt(batch_vllm_ops.init(priv, &p, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "no_evict or peak"));
	ss_params_parse(&p, "--policy", "vllm:admit_wait=-1", true, &err);
	ck_assert_int_lt(batch_vllm_ops.init(priv, &p, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "admit_wait"));
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("policy-vllm");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, decodes_first_then_fcfs_prefills_within_budget);
	tcase_add_test(tc, sequence_limit_holds);
	tcase_add_test(tc, v0_runs_prefill_only_steps_then_decode_only_steps);
	tcase_add_test(tc, chunked_prefill_splits_to_the_budget);
	tcase_add_test(tc, unchunked_rejects_prompts_over_budget);
	tcase_add_test(tc, preempts_newest_when_blocks_run_out);
	tcase_add_test(tc, a_request_can_preempt_itself);
	tcase_add_test(tc, admission_waits_for_blocks);
	tcase_add_test(tc, no_evict_reserves_the_maximum_output);
	tcase_add_test(tc, peak_admits_what_the_sum_refuses);
	tcase_add_test(tc, admission_value_is_checked);
	tcase_add_test(tc, no_evict_without_prediction_reserves_the_context);
	tcase_add_test(tc, no_evict_preempts_only_past_the_reservation);
	tcase_add_test(tc, admit_wait_decodes_between_admissions);
	tcase_add_test(tc, bad_parameters_are_errors);
	suite_add_tcase(s, tc);
	return s;
}
