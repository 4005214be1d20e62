/* Invariants of the batch policies, on hand-built instance views: every plan
 * of every registered policy keeps policy.h's contract (checked on many
 * random views), static batching admits nobody while a batch runs
 * and prefills a new batch whole within its KV reservations, orca mixes
 * whole prefills with decodes within its reservations, sarathi serves all
 * decodes before prefill chunks and chunks to its budget, splitfuse fills
 * its budget exactly, both preempt from the end of the running set, and bad
 * parameters and impossible requests are refused with a message. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "policy.h"

extern const struct batch_policy_ops batch_static_ops;
extern const struct batch_policy_ops batch_orca_ops;
extern const struct batch_policy_ops batch_sarathi_ops;
extern const struct batch_policy_ops batch_splitfuse_ops;
extern const struct batch_policy_ops batch_vllm_ops;

struct fixture {
	const struct batch_policy_ops *ops;
	struct req_view req[64];
	const struct req_view *running[64], *waiting[64];
	struct inst_view inst;
	struct step_item items[128];
	const struct req_view *preempt[64];
	struct step_plan plan;
	char priv[256];
};

/* An instance of 1000 blocks of 16 tokens, free_blocks of them free, with a
 * model context of 8192 tokens (512 blocks). */
static void setup(struct fixture *f, const struct batch_policy_ops *ops, const char *spec,
		  int32_t free_blocks)
{
	struct ss_params p;
	struct ss_error err = { 0 };

	memset(f, 0, sizeof(*f));
	f->ops = ops;
	ck_assert_int_eq(ss_params_parse(&p, "--policy", spec, true, &err), 0);
	ck_assert_uint_le(ops->priv_size, sizeof(f->priv));
	ck_assert_msg(ops->init(f->priv, &p, &err) == 0, "%s: %s", spec, err.msg);
	ck_assert_int_eq(ss_params_check_unused(&p, &err), 0);
	f->inst.block_size = 16;
	f->inst.total_blocks = 1000;
	f->inst.free_blocks = free_blocks;
	f->inst.max_model_len = 8192;
	f->inst.running = f->running;
	f->inst.waiting = f->waiting;
	f->plan = (struct step_plan){ .items = f->items, .cap_items = 128,
				      .preempt = f->preempt, .cap_preempt = 64 };
}

/* A decoding request: prompt p, g >= 1 tokens generated, KV holds p + g - 1. */
static struct req_view *add_running(struct fixture *f, int id, int32_t p, int32_t g)
{
	struct req_view *r = &f->req[id];

	*r = (struct req_view){ .id = (uint32_t)id, .prompt_tokens = p, .generated_tokens = g,
				.computed_tokens = p + g - 1, .state = REQ_RUNNING };
	r->kv_blocks = (r->computed_tokens + 15) / 16;
	f->running[f->inst.n_running++] = r;
	return r;
}

/* A running request part way through its prompt: c of p tokens computed. */
static struct req_view *add_prefilling(struct fixture *f, int id, int32_t p, int32_t c)
{
	struct req_view *r = &f->req[id];

	*r = (struct req_view){ .id = (uint32_t)id, .prompt_tokens = p, .computed_tokens = c,
				.kv_blocks = (c + 15) / 16, .state = REQ_RUNNING };
	f->running[f->inst.n_running++] = r;
	return r;
}

static struct req_view *add_waiting(struct fixture *f, int id, int32_t p)
{
	struct req_view *r = &f->req[id];

	*r = (struct req_view){ .id = (uint32_t)id, .prompt_tokens = p, .state = REQ_QUEUED };
	f->waiting[f->inst.n_waiting++] = r;
	return r;
}

static void pick(struct fixture *f)
{
	f->plan.n_items = 0;
	f->plan.n_preempt = 0;
	f->ops->pick_step(f->priv, &f->inst, 0, NULL, &f->plan);
}

static int32_t plan_tokens(const struct fixture *f)
{
	int32_t t = 0;

	for (uint32_t i = 0; i < f->plan.n_items; i++)
		t += f->plan.items[i].tokens;
	return t;
}

static void assert_item(const struct fixture *f, uint32_t k, uint32_t id, int32_t tokens)
{
	ck_assert_uint_lt(k, f->plan.n_items);
	ck_assert_uint_eq(f->plan.items[k].req->id, id);
	ck_assert_int_eq(f->plan.items[k].tokens, tokens);
}

static bool in_plan(const struct fixture *f, uint32_t id)
{
	for (uint32_t i = 0; i < f->plan.n_items; i++)
		if (f->plan.items[i].req->id == id)
			return true;
	return false;
}

/* ---- the contract, on random views --------------------------------------- */

static uint32_t rnd_state;

static uint32_t rnd(uint32_t n)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state % n;
}

/* A random mix of decodes, prefills under way, and waiting requests that are
 * new, hold prefix-cache blocks, or were swapped out. */
static void random_view(struct fixture *f)
{
	uint32_t n_run = rnd(20), n_wait = rnd(20);
	int id = 0;

	for (uint32_t k = 0; k < n_run; k++, id++) {
		int32_t p = 1 + (int32_t)rnd(3000);

		if (rnd(2))
			add_running(f, id, p, 1 + (int32_t)rnd(60));
		else
			add_prefilling(f, id, p, (int32_t)rnd((uint32_t)p));
	}
	for (uint32_t k = 0; k < n_wait; k++, id++) {
		struct req_view *w = add_waiting(f, id, 1 + (int32_t)rnd(3000));

		int32_t hit_blocks = (w->prompt_tokens - 1) / 16;

		switch (rnd(4)) {
		case 0:   /* prefix-cache hit: whole blocks, fewer than the prompt */
			w->kv_blocks = (int32_t)rnd((uint32_t)hit_blocks + 1);
			w->computed_tokens = w->kv_blocks * 16;
			w->cached_tokens = w->computed_tokens;
			break;
		case 1:   /* swapped out after g outputs */
			w->generated_tokens = 1 + (int32_t)rnd(40);
			w->computed_tokens = w->prompt_tokens + w->generated_tokens - 1;
			w->host_blocks = (w->computed_tokens + 15) / 16;
			w->preemptions = 1;
			break;
		default:
			break;
		}
	}
	f->inst.free_blocks = (int32_t)rnd(1001);
}

/* policy.h's contract for the plan of f, plus the per-policy budgets. */
static void check_contract(const struct fixture *f, int32_t token_budget, int32_t max_seqs)
{
	const struct step_plan *pl = &f->plan;
	int64_t blocks = f->inst.free_blocks;
	uint32_t seqs = f->inst.n_running - pl->n_preempt, admitted = 0;
	bool seen[64] = { false };

	ck_assert_uint_le(pl->n_items, pl->cap_items);
	ck_assert_uint_le(pl->n_preempt, pl->cap_preempt);
	for (uint32_t k = 0; k < pl->n_preempt; k++) {
		const struct req_view *v = pl->preempt[k];

		ck_assert_int_eq(v->state, REQ_RUNNING);
		ck_assert(!seen[v->id]);
		seen[v->id] = true;
		blocks += v->kv_blocks;
	}
	for (uint32_t k = 0; k < pl->n_items; k++) {
		const struct req_view *r = pl->items[k].req;
		int32_t n = pl->items[k].tokens;

		ck_assert(!seen[r->id]);
		seen[r->id] = true;
		ck_assert_int_ge(n, 1);
		ck_assert_int_le(n, req_pending_tokens(r));
		blocks -= req_blocks_needed(r, n, f->inst.block_size);
		if (r->state == REQ_QUEUED)
			admitted++;
	}
	ck_assert_int_ge(blocks, 0);
	if (token_budget > 0)
		ck_assert_int_le(plan_tokens(f), token_budget);
	/* Admission keeps the running set (or the batch) within its limit. */
	if (max_seqs > 0 && admitted > 0)
		ck_assert_uint_le(seqs + admitted, (uint32_t)max_seqs);
	/* A non-empty running set always moves: an empty plan would stall the
	 * instance for good. */
	if (f->inst.n_running > 0)
		ck_assert_uint_gt(pl->n_items + pl->n_preempt, 0);
	/* No admission in a step that preempted. */
	if (pl->n_preempt > 0)
		for (uint32_t k = 0; k < pl->n_items; k++)
			ck_assert_int_eq(pl->items[k].req->state, REQ_RUNNING);
	ck_assert_uint_le(pl->n_items, f->inst.n_running + f->ops->max_items(f->priv));
}

/* The contract cases: every batch policy in policies/registry.def, so a new
 * policy is checked the day it is registered, each with its defaults and,
 * where it names its running-set limit and token budget for `servesim
 * plan` (plan_batch_key, plan_chunk_key), with small values of both, which
 * the plans must then keep; plus the variants below. */
struct contract_case {
	struct batch_policy_ops ops;     /* resolved by batch_policy_lookup */
	char spec[160];
	int32_t token_budget, max_seqs;  /* 0: not a limit checked for this case */
};

#define MAX_CONTRACT_CASES 64
static struct contract_case contract_cases[MAX_CONTRACT_CASES];
static int n_contract_cases;

/* Policy-specific modes the plan keys do not reach, with the limits each
 * keeps.  vllm's chunked=off and v0=on take prompts whole, so their token
 * budget binds prefills only (a whole prompt longer than the budget is
 * refused on arrival by admissible(); v0's decode-only steps have no
 * budget, as vLLM V0's) and is not checked here. */
static const struct {
	const char *spec;
	int32_t token_budget, max_seqs;
} contract_variants[] = {
	{ "static:max_len=2048", 0, 16 },
	{ "orca:max_len=1024", 0, 256 },
	{ "vllm:chunked=off,max_num_batched_tokens=3000,max_num_seqs=8", 0, 8 },
	{ "vllm:v0=on,max_num_seqs=12", 0, 12 },
	{ "vllm:admission=no_evict,max_num_batched_tokens=64,max_num_seqs=8", 64, 8 },
};

static void contract_case_add(const char *name, const char *params, int32_t token_budget,
			      int32_t max_seqs)
{
	struct contract_case *c = &contract_cases[n_contract_cases];
	struct ss_error err = { 0 };

	if (n_contract_cases >= MAX_CONTRACT_CASES) {
		fprintf(stderr, "test-policy-batch: more than %d contract cases\n", MAX_CONTRACT_CASES);
		abort();
	}
	if (batch_policy_lookup("--policy", name, &c->ops, &err)) {
		fprintf(stderr, "test-policy-batch: %s\n", err.msg);
		abort();
	}
	snprintf(c->spec, sizeof(c->spec), "%s%s%s", name, *params ? ":" : "", params);
	c->token_budget = token_budget;
	c->max_seqs = max_seqs;
	n_contract_cases++;
}

static void contract_cases_build(void)
{
	struct policy_info info[64];
	size_t n = policy_list(info, 64);

	if (n > 64)
		abort();
	for (size_t i = 0; i < n; i++) {
		const struct batch_policy_ops *t;
		const char *bk, *ck;
		/* a running-set limit and a token budget, the limit within the budget */
		static const struct { int32_t seqs, tokens; } small[] = { { 8, 64 }, { 3, 5 } };

		if (info[i].kind != POLICY_BATCH)
			continue;
		contract_case_add(info[i].name, "", 0, 0);
		t = batch_policy_find(info[i].name);
		bk = t->version >= 2 ? t->plan_batch_key : NULL;
		ck = t->version >= 2 ? t->plan_chunk_key : NULL;
		for (size_t k = 0; (bk || ck) && k < sizeof(small) / sizeof(small[0]); k++) {
			char params[128] = "";

			if (bk)
				snprintf(params, sizeof(params), "%s=%d", bk, small[k].seqs);
			if (ck)
				snprintf(params + strlen(params), sizeof(params) - strlen(params),
					 "%s%s=%d", bk ? "," : "", ck, small[k].tokens);
			contract_case_add(info[i].name, params, ck ? small[k].tokens : 0,
					  bk ? small[k].seqs : 0);
		}
	}
	if (n_contract_cases == 0) {
		fprintf(stderr, "test-policy-batch: no batch policy in the registry\n");
		abort();
	}
	for (size_t k = 0; k < sizeof(contract_variants) / sizeof(contract_variants[0]); k++) {
		char name[32];
		const char *colon = strchr(contract_variants[k].spec, ':');

		snprintf(name, sizeof(name), "%.*s", (int)(colon - contract_variants[k].spec),
			 contract_variants[k].spec);
		contract_case_add(name, colon + 1, contract_variants[k].token_budget,
				  contract_variants[k].max_seqs);
	}
}

START_TEST(contract_holds_on_random_views)
{
	struct fixture f;

	/* which case iteration _i is, for the log of a failure */
	printf("contract case %d: %s\n", _i, contract_cases[_i].spec);
	fflush(stdout);
	rnd_state = 2463534242u + (uint32_t)_i;
	for (int trial = 0; trial < 2000; trial++) {
		setup(&f, &contract_cases[_i].ops, contract_cases[_i].spec, 0);
		random_view(&f);
		pick(&f);
		check_contract(&f, contract_cases[_i].token_budget, contract_cases[_i].max_seqs);
	}
}
END_TEST

/* ---- the steady-decode promise (batch_policy_ops.steady_decode) --------- */

/* Whether f's plan is every running request for one token, in running
 * order, preempting nobody. */
static bool steady_shape(const struct fixture *f)
{
	if (f->plan.n_preempt || f->plan.n_items != f->inst.n_running)
		return false;
	for (uint32_t k = 0; k < f->plan.n_items; k++)
		if (f->plan.items[k].req != f->running[k] || f->plan.items[k].tokens != 1)
			return false;
	return true;
}

static int32_t decode_need(const struct fixture *f)
{
	int32_t need = 0;

	for (uint32_t k = 0; k < f->inst.n_running; k++)
		need += req_blocks_needed(f->running[k], 1, f->inst.block_size);
	return need;
}

static const struct {
	const struct batch_policy_ops *ops;
	const char *spec;
} steady_cases[] = {
	{ &batch_vllm_ops, "vllm" },
	{ &batch_vllm_ops, "vllm:max_num_batched_tokens=6,max_num_seqs=4" },
	{ &batch_vllm_ops, "vllm:chunked=off,max_num_batched_tokens=3000" },
	{ &batch_vllm_ops, "vllm:v0=on,max_num_seqs=12" },
	{ &batch_sarathi_ops, "sarathi" },
	{ &batch_sarathi_ops, "sarathi:token_budget=8,max_num_seqs=8" },
	{ &batch_splitfuse_ops, "splitfuse:token_budget=10,max_num_seqs=10" },
	{ &batch_orca_ops, "orca:max_batch=8,max_len=4096" },
	{ &batch_static_ops, "static:max_batch=4" },
};

/* What the engine relies on to form steps without asking the policy
 * (sim/engine-sched.c): (a) with nobody waiting, n <= steady_decode pure
 * decodes whose next blocks are free are planned all, one token each, in
 * running order; (b) after such a plan made with requests waiting,
 * advancing every decode by one token, leaving no more free blocks after
 * the decodes than then, and queueing more requests behind the same head
 * gives the same plan again. */
START_TEST(steady_decode_promise_holds)
{
	struct fixture f;
	uint32_t b_cases = 0;

	rnd_state = 88172645u + (uint32_t)_i;
	for (int trial = 0; trial < 3000; trial++) {
		uint32_t n_run, n_wait, max;
		int32_t need, left;
		int id = 0;

		setup(&f, steady_cases[_i].ops, steady_cases[_i].spec, 0);
		max = f.ops->steady_decode(f.priv);
		ck_assert_uint_gt(max, 0);
		n_run = 1 + rnd(14);
		n_wait = rnd(2) ? 0 : 1 + rnd(6);
		if (n_run > max)
			continue;
		for (uint32_t k = 0; k < n_run; k++, id++)
			add_running(&f, id, 1 + (int32_t)rnd(3000), 1 + (int32_t)rnd(60));
		for (uint32_t k = 0; k < n_wait; k++, id++) {
			struct req_view *w = add_waiting(&f, id, 1 + (int32_t)rnd(3000));

			if (rnd(3) == 0) {   /* swapped out after some outputs */
				w->generated_tokens = 1 + (int32_t)rnd(40);
				w->computed_tokens = w->prompt_tokens + w->generated_tokens - 1;
				w->host_blocks = (w->computed_tokens + 15) / 16;
			}
		}
		need = decode_need(&f);
		f.inst.free_blocks = need + (int32_t)rnd(rnd(2) ? 4 : 300);
		pick(&f);
		if (n_wait == 0)
			ck_assert_msg(steady_shape(&f), "%s: (a) broken", steady_cases[_i].spec);
		if (!steady_shape(&f))
			continue;
		/* (b): one token later */
		left = f.inst.free_blocks - need;
		for (uint32_t k = 0; k < n_run; k++) {
			struct req_view *r = &f.req[k];

			r->kv_blocks += req_blocks_needed(r, 1, 16);
			r->computed_tokens++;
			r->generated_tokens++;
		}
		for (uint32_t k = rnd(3); k > 0 && n_wait > 0; k--, id++)
			add_waiting(&f, id, 1 + (int32_t)rnd(3000));
		need = decode_need(&f);
		f.inst.free_blocks = need + (int32_t)rnd((uint32_t)left + 1);
		pick(&f);
		ck_assert_msg(steady_shape(&f), "%s: (b) broken", steady_cases[_i].spec);
		b_cases += n_wait > 0;
	}
	ck_assert_uint_gt(b_cases, 50);
}
END_TEST

/* ---- static --------------------------------------------------------------- */

START_TEST(static_prefills_a_new_batch_whole)
{
	struct fixture f;

	setup(&f, &batch_static_ops, "static:max_batch=3,max_len=2048", 1000);
	add_waiting(&f, 0, 100);
	add_waiting(&f, 1, 1500);
	add_waiting(&f, 2, 7);
	add_waiting(&f, 3, 30);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 3);   /* max_batch */
	assert_item(&f, 0, 0, 100);
	assert_item(&f, 1, 1, 1500);
	assert_item(&f, 2, 2, 7);
	ck_assert_uint_eq(f.plan.n_preempt, 0);
}
END_TEST

START_TEST(static_batch_fits_its_reservations)
{
	struct fixture f;

	/* max_len=2048 reserves 128 blocks per request: 300 blocks hold two,
	 * although the prompts themselves would need only a few blocks. */
	setup(&f, &batch_static_ops, "static:max_len=2048", 1000);
	f.inst.total_blocks = 300;
	f.inst.free_blocks = 300;
	for (int i = 0; i < 5; i++)
		add_waiting(&f, i, 20);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 2);
	/* The default max_len is the model's 8192 tokens, 512 blocks: one. */
	setup(&f, &batch_static_ops, "static", 1000);
	for (int i = 0; i < 5; i++)
		add_waiting(&f, i, 20);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 1);
}
END_TEST

START_TEST(static_admits_nothing_while_a_batch_runs)
{
	struct fixture f;

	setup(&f, &batch_static_ops, "static:max_batch=8,max_len=1024", 1000);
	add_running(&f, 0, 100, 5);
	add_running(&f, 1, 300, 9);
	add_waiting(&f, 2, 10);
	add_waiting(&f, 3, 10);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 2);
	assert_item(&f, 0, 0, 1);
	assert_item(&f, 1, 1, 1);
	ck_assert(!in_plan(&f, 2) && !in_plan(&f, 3));
	/* Once the batch is gone, the waiting requests form the next one. */
	f.inst.n_running = 0;
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 2);
	assert_item(&f, 0, 2, 10);
	assert_item(&f, 1, 3, 10);
}
END_TEST

START_TEST(static_batch_is_fcfs_without_overtaking)
{
	struct fixture f;

	/* Each request needs its whole prompt's blocks free now: the second
	 * (100 blocks) does not fit in the 50 left, so the third waits too. */
	setup(&f, &batch_static_ops, "static:max_len=2048", 60);
	add_waiting(&f, 0, 160);
	add_waiting(&f, 1, 1600);
	add_waiting(&f, 2, 16);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 1);
	assert_item(&f, 0, 0, 160);
}
END_TEST

START_TEST(reserving_policies_reject_what_cannot_fit)
{
	const struct batch_policy_ops *ops[] = { &batch_static_ops, &batch_orca_ops };
	const char *names[] = { "static", "orca" };
	char spec[64];
	struct fixture f;
	const char *reason;

	for (int k = 0; k < 2; k++) {
		snprintf(spec, sizeof(spec), "%s:max_len=2048", names[k]);
		setup(&f, ops[k], spec, 1000);
		reason = NULL;
		ck_assert(!ops[k]->admissible(f.priv, add_waiting(&f, 0, 2048), &f.inst, &reason));
		ck_assert_ptr_nonnull(reason);
		ck_assert_ptr_nonnull(strstr(reason, "max_len"));
		ck_assert(ops[k]->admissible(f.priv, add_waiting(&f, 1, 2047), &f.inst, &reason));
		/* max_len=0 (the default) is the model's context length... */
		snprintf(spec, sizeof(spec), "%s:max_len=0", names[k]);
		setup(&f, ops[k], spec, 1000);
		ck_assert(!ops[k]->admissible(f.priv, add_waiting(&f, 0, 8192), &f.inst, &reason));
		ck_assert(ops[k]->admissible(f.priv, add_waiting(&f, 1, 8191), &f.inst, &reason));
		/* ... which also caps a larger max_len. */
		snprintf(spec, sizeof(spec), "%s:max_len=100000", names[k]);
		setup(&f, ops[k], spec, 1000);
		ck_assert(!ops[k]->admissible(f.priv, add_waiting(&f, 0, 9000), &f.inst, &reason));
		/* A reservation larger than the KV cache can never be served. */
		setup(&f, ops[k], names[k], 1000);
		f.inst.total_blocks = 400;   /* < 512 blocks for 8192 tokens */
		reason = NULL;
		ck_assert(!ops[k]->admissible(f.priv, add_waiting(&f, 0, 10), &f.inst, &reason));
		ck_assert_ptr_nonnull(strstr(reason, "KV"));
	}
}
END_TEST

/* ---- orca ----------------------------------------------------------------- */

START_TEST(orca_mixes_whole_prefills_with_decodes)
{
	struct fixture f;

	/* max_len=4096: 256 blocks per request.  The two running reserve 512
	 * of 1000 blocks, so one more fits (768) and a second would not
	 * (1024), however short its prompt. */
	setup(&f, &batch_orca_ops, "orca:max_len=4096", 900);
	add_running(&f, 0, 100, 5);
	add_running(&f, 1, 200, 9);
	add_waiting(&f, 2, 3000);   /* whole, no chunking */
	add_waiting(&f, 3, 10);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 3);
	assert_item(&f, 0, 0, 1);
	assert_item(&f, 1, 1, 1);
	assert_item(&f, 2, 2, 3000);
	ck_assert(!in_plan(&f, 3));
	ck_assert_uint_eq(f.plan.n_preempt, 0);
}
END_TEST

START_TEST(orca_reservation_counts_outgrown_requests)
{
	struct fixture f;

	/* max_len=160 reserves 10 blocks; request 0 has outgrown it and holds
	 * 25 blocks, so 30 - 25 leaves no room for another 10. */
	setup(&f, &batch_orca_ops, "orca:max_len=160", 5);
	f.inst.total_blocks = 30;
	add_running(&f, 0, 150, 250);
	add_waiting(&f, 1, 10);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 1);
	assert_item(&f, 0, 0, 1);
	/* With 35 blocks it is admitted. */
	f.inst.total_blocks = 35;
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 2);
	assert_item(&f, 1, 1, 10);
}
END_TEST

START_TEST(orca_finishes_a_running_prefill_whole)
{
	struct fixture f;

	setup(&f, &batch_orca_ops, "orca:max_len=1024", 1000);
	add_prefilling(&f, 0, 900, 100);
	add_running(&f, 1, 50, 3);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 2);
	assert_item(&f, 0, 0, 800);
	assert_item(&f, 1, 1, 1);
}
END_TEST

START_TEST(orca_batch_size_limit_holds)
{
	struct fixture f;

	setup(&f, &batch_orca_ops, "orca:max_batch=4,max_len=256", 1000);
	for (int i = 0; i < 3; i++)
		add_running(&f, i, 50, 2);
	for (int i = 3; i < 10; i++)
		add_waiting(&f, i, 20);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 4);
	assert_item(&f, 3, 3, 20);
}
END_TEST

START_TEST(orca_preempts_from_the_end_when_the_pool_runs_dry)
{
	struct fixture f;

	/* Requests past their reservation need a block each at a boundary; one
	 * block is free: request 0 takes it, request 1 needs the blocks of the
	 * last running request, and nobody is admitted. */
	setup(&f, &batch_orca_ops, "orca:max_len=16", 1);
	f.inst.total_blocks = 6;
	add_running(&f, 0, 10, 23);
	add_running(&f, 1, 10, 23);
	add_running(&f, 2, 10, 23);
	add_waiting(&f, 3, 10);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_preempt, 1);
	ck_assert_uint_eq(f.plan.preempt[0]->id, 2);
	ck_assert_uint_eq(f.plan.n_items, 2);
	ck_assert(!in_plan(&f, 3));
}
END_TEST

/* ---- sarathi -------------------------------------------------------------- */

START_TEST(sarathi_serves_decodes_before_prefill_chunks)
{
	struct fixture f;

	/* A prefill under way is listed first in the running set, yet both
	 * decodes come first and it gets what is left of the 512 tokens. */
	setup(&f, &batch_sarathi_ops, "sarathi", 1000);
	add_prefilling(&f, 0, 1000, 200);
	add_running(&f, 1, 100, 4);
	add_running(&f, 2, 300, 8);
	add_waiting(&f, 3, 300);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 3);
	assert_item(&f, 0, 1, 1);
	assert_item(&f, 1, 2, 1);
	assert_item(&f, 2, 0, 510);
	ck_assert_int_eq(plan_tokens(&f), 512);
	ck_assert(!in_plan(&f, 3));
}
END_TEST

START_TEST(sarathi_chunks_new_prompts_to_the_budget)
{
	struct fixture f;

	setup(&f, &batch_sarathi_ops, "sarathi:token_budget=256,max_num_seqs=16", 1000);
	add_running(&f, 0, 100, 4);
	add_waiting(&f, 1, 100);
	add_waiting(&f, 2, 400);
	add_waiting(&f, 3, 10);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 3);
	assert_item(&f, 0, 0, 1);
	assert_item(&f, 1, 1, 100);
	assert_item(&f, 2, 2, 155);
	ck_assert_int_eq(plan_tokens(&f), 256);
}
END_TEST

START_TEST(sarathi_sequence_limit_holds)
{
	struct fixture f;

	setup(&f, &batch_sarathi_ops, "sarathi:max_num_seqs=4", 1000);
	for (int i = 0; i < 3; i++)
		add_running(&f, i, 50, 2);
	for (int i = 3; i < 10; i++)
		add_waiting(&f, i, 20);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 4);
}
END_TEST

START_TEST(sarathi_admits_only_when_the_whole_prompt_fits)
{
	struct fixture f;

	/* 10 free blocks hold 160 tokens: a 161-token prompt waits even though
	 * a chunk of it would fit; a 160-token one is admitted. */
	setup(&f, &batch_sarathi_ops, "sarathi", 10);
	add_waiting(&f, 0, 161);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 0);
	setup(&f, &batch_sarathi_ops, "sarathi", 10);
	add_waiting(&f, 0, 160);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 1);
}
END_TEST

START_TEST(sarathi_keeps_a_running_prefill_s_blocks)
{
	struct fixture f;

	/* Request 1 is under way and still needs 20 blocks for its prompt;
	 * 20 are free.  As in Sarathi-Serve, where they were allocated when it
	 * was admitted, the decode of request 0 may not take one of them: the
	 * last running request (1) is preempted instead. */
	setup(&f, &batch_sarathi_ops, "sarathi", 20);
	add_running(&f, 0, 30, 3);           /* needs a block */
	add_prefilling(&f, 1, 336, 16);      /* holds 1, needs 20 more */
	pick(&f);
	ck_assert_uint_eq(f.plan.n_preempt, 1);
	ck_assert_uint_eq(f.plan.preempt[0]->id, 1);
	ck_assert_uint_eq(f.plan.n_items, 1);
	assert_item(&f, 0, 0, 1);
}
END_TEST

/* ---- preemption, sarathi and splitfuse -------------------------------------- */

START_TEST(chunking_policies_preempt_from_the_end)
{
	const struct batch_policy_ops *ops[] = { &batch_sarathi_ops, &batch_splitfuse_ops };
	struct fixture f;

	for (int k = 0; k < 2; k++) {
		/* Three decodes at a block boundary, one free block: request 0
		 * takes it, request 1 takes the last one's blocks. */
		setup(&f, ops[k], ops[k]->name, 1);
		add_running(&f, 0, 30, 3);
		add_running(&f, 1, 30, 3);
		add_running(&f, 2, 30, 3);
		add_waiting(&f, 3, 10);
		pick(&f);
		ck_assert_uint_eq(f.plan.n_preempt, 1);
		ck_assert_uint_eq(f.plan.preempt[0]->id, 2);
		ck_assert_uint_eq(f.plan.n_items, 2);
		assert_item(&f, 0, 0, 1);
		assert_item(&f, 1, 1, 1);
		ck_assert(!in_plan(&f, 3));

		/* Alone and out of blocks, a decode preempts itself. */
		setup(&f, ops[k], ops[k]->name, 0);
		add_running(&f, 0, 30, 3);
		pick(&f);
		ck_assert_uint_eq(f.plan.n_items, 0);
		ck_assert_uint_eq(f.plan.n_preempt, 1);
		ck_assert_uint_eq(f.plan.preempt[0]->id, 0);

		/* A prefill that cannot get a block for even one token gives
		 * its blocks up rather than stall the instance. */
		setup(&f, ops[k], ops[k]->name, 0);
		add_prefilling(&f, 0, 100, 32);
		pick(&f);
		ck_assert_uint_eq(f.plan.n_items, 0);
		ck_assert_uint_eq(f.plan.n_preempt, 1);
	}
}
END_TEST

/* ---- splitfuse ------------------------------------------------------------ */

START_TEST(splitfuse_fills_the_forward_pass_exactly)
{
	struct fixture f;

	/* FastGen's default forward size is 768 tokens: three decodes, two
	 * short prompts composed whole and a third split to fill it. */
	setup(&f, &batch_splitfuse_ops, "splitfuse", 1000);
	add_running(&f, 0, 100, 4);
	add_running(&f, 1, 100, 4);
	add_running(&f, 2, 100, 4);
	add_waiting(&f, 3, 100);
	add_waiting(&f, 4, 200);
	add_waiting(&f, 5, 1000);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 6);
	assert_item(&f, 3, 3, 100);
	assert_item(&f, 4, 4, 200);
	assert_item(&f, 5, 5, 465);
	ck_assert_int_eq(plan_tokens(&f), 768);
	/* With fewer prompt tokens waiting it takes them all. */
	setup(&f, &batch_splitfuse_ops, "splitfuse", 1000);
	add_running(&f, 0, 100, 4);
	add_waiting(&f, 1, 50);
	pick(&f);
	ck_assert_int_eq(plan_tokens(&f), 51);
}
END_TEST

START_TEST(splitfuse_spreads_a_long_prompt_over_passes)
{
	struct fixture f;

	setup(&f, &batch_splitfuse_ops, "splitfuse:token_budget=512,max_num_seqs=64", 1000);
	add_waiting(&f, 0, 5000);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 1);
	assert_item(&f, 0, 0, 512);
	/* Next pass: the remainder goes ahead of a new prompt, decodes ahead
	 * of both. */
	setup(&f, &batch_splitfuse_ops, "splitfuse:token_budget=512,max_num_seqs=64", 1000);
	add_prefilling(&f, 0, 5000, 512);
	add_running(&f, 1, 40, 2);
	add_waiting(&f, 2, 50);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 2);
	assert_item(&f, 0, 1, 1);
	assert_item(&f, 1, 0, 511);
	/* The last piece leaves room for the new prompt. */
	setup(&f, &batch_splitfuse_ops, "splitfuse:token_budget=512,max_num_seqs=64", 1000);
	add_prefilling(&f, 0, 5000, 4800);
	add_waiting(&f, 1, 500);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 2);
	assert_item(&f, 0, 0, 200);
	assert_item(&f, 1, 1, 312);
}
END_TEST

START_TEST(splitfuse_starts_a_prompt_only_if_all_of_it_fits)
{
	struct fixture f;

	/* MII's deadlock guard: 10 free blocks (160 tokens) do not start a
	 * 200-token prompt, although a chunk would fit. */
	setup(&f, &batch_splitfuse_ops, "splitfuse", 10);
	add_waiting(&f, 0, 200);
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 0);
	/* A prompt under way is cut to the blocks left instead. */
	setup(&f, &batch_splitfuse_ops, "splitfuse", 10);
	add_prefilling(&f, 0, 1000, 100);   /* holds 7 blocks = 112 tokens */
	pick(&f);
	ck_assert_uint_eq(f.plan.n_items, 1);
	assert_item(&f, 0, 0, 17 * 16 - 100);
	ck_assert_uint_eq(f.plan.n_preempt, 0);
}
END_TEST

START_TEST(waiting_requests_may_hold_kv_already)
{
	const struct batch_policy_ops *ops[] = { &batch_static_ops, &batch_orca_ops,
						 &batch_sarathi_ops, &batch_splitfuse_ops };
	struct fixture f;
	struct req_view *w;

	for (int k = 0; k < 4; k++) {
		/* A prefix-cache hit of 64 tokens (4 blocks): only the other 36
		 * prompt tokens are fed, and they need 3 new blocks... */
		setup(&f, ops[k], ops[k]->name, 3);
		w = add_waiting(&f, 0, 100);

		w->computed_tokens = 64;
		w->kv_blocks = 4;
		pick(&f);
		ck_assert_uint_eq(f.plan.n_items, 1);
		assert_item(&f, 0, 0, 36);
		/* ... and a swapped-out request resumes with one token. */
		setup(&f, ops[k], ops[k]->name, 1000);
		w = add_waiting(&f, 0, 100);
		w->generated_tokens = 10;
		w->computed_tokens = 109;
		w->host_blocks = 7;
		pick(&f);
		ck_assert_uint_eq(f.plan.n_items, 1);
		assert_item(&f, 0, 0, 1);
	}
}
END_TEST

/* ---- parameters ----------------------------------------------------------- */

START_TEST(bad_parameters_are_errors)
{
	static const struct {
		const struct batch_policy_ops *ops;
		const char *spec, *names;
	} bad[] = {
		{ &batch_static_ops, "static:max_batch=0", "max_batch" },
		{ &batch_static_ops, "static:max_len=-1", "max_len" },
		{ &batch_static_ops, "static:max_batch=many", "max_batch" },
		{ &batch_orca_ops, "orca:max_batch=-3", "max_batch" },
		{ &batch_orca_ops, "orca:max_len=x", "max_len" },
		{ &batch_sarathi_ops, "sarathi:token_budget=0", "token_budget" },
		{ &batch_sarathi_ops, "sarathi:max_num_seqs=0", "max_num_seqs" },
		{ &batch_sarathi_ops, "sarathi:token_budget=128", "max_num_seqs" },
		{ &batch_splitfuse_ops, "splitfuse:token_budget=-1", "token_budget" },
		{ &batch_splitfuse_ops, "splitfuse:max_num_seqs=1000", "max_num_seqs" },
	};
	char priv[256];

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct ss_params p;
		struct ss_error err = { 0 };

		ck_assert_int_eq(ss_params_parse(&p, "--policy", bad[k].spec, true, &err), 0);
		ck_assert_msg(bad[k].ops->init(priv, &p, &err) < 0, "%s accepted", bad[k].spec);
		ck_assert_msg(strstr(err.msg, bad[k].names) != NULL, "%s: %s", bad[k].spec, err.msg);
	}
}
END_TEST

START_TEST(defaults_are_the_systems)
{
	struct fixture f;

	/* max_items reports the batch / sequence limit of each policy. */
	setup(&f, &batch_static_ops, "static", 1000);
	ck_assert_uint_eq(f.ops->max_items(f.priv), 16);
	setup(&f, &batch_orca_ops, "orca", 1000);
	ck_assert_uint_eq(f.ops->max_items(f.priv), 256);
	setup(&f, &batch_sarathi_ops, "sarathi", 1000);
	ck_assert_uint_eq(f.ops->max_items(f.priv), 256);
	add_waiting(&f, 0, 5000);
	pick(&f);
	ck_assert_int_eq(plan_tokens(&f), 512);
	setup(&f, &batch_splitfuse_ops, "splitfuse", 1000);
	ck_assert_uint_eq(f.ops->max_items(f.priv), 512);
	add_waiting(&f, 0, 5000);
	pick(&f);
	ck_assert_int_eq(plan_tokens(&f), 768);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("policy-batch");
	TCase *tc = tcase_create("core");

	contract_cases_build();
	tcase_add_loop_test(tc, contract_holds_on_random_views, 0, n_contract_cases);
	tcase_add_loop_test(tc, steady_decode_promise_holds, 0,
			    (int)(sizeof(steady_cases) / sizeof(steady_cases[0])));
	tcase_add_test(tc, static_prefills_a_new_batch_whole);
	tcase_add_test(tc, static_batch_fits_its_reservations);
	tcase_add_test(tc, static_admits_nothing_while_a_batch_runs);
	tcase_add_test(tc, static_batch_is_fcfs_without_overtaking);
	tcase_add_test(tc, reserving_policies_reject_what_cannot_fit);
	tcase_add_test(tc, orca_mixes_whole_prefills_with_decodes);
	tcase_add_test(tc, orca_reservation_counts_outgrown_requests);
	tcase_add_test(tc, orca_finishes_a_running_prefill_whole);
	tcase_add_test(tc, orca_batch_size_limit_holds);
	tcase_add_test(tc, orca_preempts_from_the_end_when_the_pool_runs_dry);
	tcase_add_test(tc, sarathi_serves_decodes_before_prefill_chunks);
	tcase_add_test(tc, sarathi_chunks_new_prompts_to_the_budget);
	tcase_add_test(tc, sarathi_sequence_limit_holds);
	tcase_add_test(tc, sarathi_admits_only_when_the_whole_prompt_fits);
	tcase_add_test(tc, sarathi_keeps_a_running_prefill_s_blocks);
	tcase_add_test(tc, chunking_policies_preempt_from_the_end);
	tcase_add_test(tc, splitfuse_fills_the_forward_pass_exactly);
	tcase_add_test(tc, splitfuse_spreads_a_long_prompt_over_passes);
	tcase_add_test(tc, splitfuse_starts_a_prompt_only_if_all_of_it_fits);
	tcase_add_test(tc, waiting_requests_may_hold_kv_already);
	tcase_add_test(tc, bad_parameters_are_errors);
	tcase_add_test(tc, defaults_are_the_systems);
	suite_add_tcase(s, tc);
	return s;
}
