/* Queue orders, preemption victims and admission policies, called directly
 * on hand-built views: spf/sjf/priority/vtc keys (and vtc's counter lift),
 * victim sort orders, and queue/timeout/slo admission decisions. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "policy.h"

#define MS 1000000LL        /* ns */
#define SEC 1000000000LL    /* ns */

/* Zeroed private state for ops, as the engine allocates it. */
static void *priv_new(size_t size)
{
	void *p = calloc(1, size ? size : 1);

	ck_assert_ptr_nonnull(p);
	return p;
}

/* Resolve ops, parse spec and run init (then the unused-key check), as the
 * engine does: the resolved table's init is never NULL. */
static int order_setup(const struct order_ops *ops, const char *spec, void *priv,
		       uint32_t n_tenants, struct ss_error *err)
{
	struct order_ops o;
	struct ss_params p;
	int rc;

	ck_assert_ptr_nonnull(ops);
	ck_assert_int_eq(order_resolve("--order", ops, &o, err), 0);
	ck_assert_int_eq(ss_params_parse(&p, "--order", spec, true, err), 0);
	rc = o.init(priv, &p, n_tenants, err);
	return rc ? rc : ss_params_check_unused(&p, err);
}

static int admission_setup(const struct admission_ops *ops, const char *spec, void *priv,
			   struct ss_error *err)
{
	struct admission_ops a;
	struct ss_params p;
	int rc;

	ck_assert_ptr_nonnull(ops);
	ck_assert_int_eq(admission_resolve("--admission", ops, &a, err), 0);
	ck_assert_int_eq(ss_params_parse(&p, "--admission", spec, true, err), 0);
	rc = a.init(priv, &p, err);
	return rc ? rc : ss_params_check_unused(&p, err);
}

/* ---- sorting as the engine does ----------------------------------------- */

static const struct order_ops *sort_ops;
static const void *sort_priv;
static int64_t sort_now;

/* The engine's waiting-queue order: key, then arrival, then id. */
static int by_key(const void *a, const void *b)
{
	const struct req_view *x = *(const struct req_view *const *)a;
	const struct req_view *y = *(const struct req_view *const *)b;
	double kx = sort_ops->key(sort_priv, x, sort_now);
	double ky = sort_ops->key(sort_priv, y, sort_now);

	if (kx != ky)
		return kx < ky ? -1 : 1;
	if (x->arrival_ns != y->arrival_ns)
		return x->arrival_ns < y->arrival_ns ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static void sort_queue(const struct order_ops *ops, const void *priv, int64_t now,
		       const struct req_view **q, size_t n)
{
	sort_ops = ops;
	sort_priv = priv;
	sort_now = now;
	qsort(q, n, sizeof(*q), by_key);
}

static int (*victim_cmp)(const struct req_view *, const struct req_view *);

static int victim_wrap(const void *a, const void *b)
{
	return victim_cmp(*(const struct req_view *const *)a, *(const struct req_view *const *)b);
}

/* ---- orders --------------------------------------------------------------- */

START_TEST(spf_orders_by_tokens_left_to_prefill)
{
	const struct order_ops *spf = order_find("spf");
	struct req_view a = { .id = 1, .arrival_ns = 0, .prompt_tokens = 100 };
	struct req_view b = { .id = 2, .arrival_ns = 1, .prompt_tokens = 100, .computed_tokens = 64 };
	/* Preempted by recompute: its 5 outputs must be prefilled again. */
	struct req_view c = { .id = 3, .arrival_ns = 2, .prompt_tokens = 10, .generated_tokens = 5 };
	struct req_view d = { .id = 4, .arrival_ns = 3, .prompt_tokens = 36 };
	const struct req_view *q[4] = { &a, &b, &c, &d };

	ck_assert_ptr_nonnull(spf);
	ck_assert_double_eq(spf->key(NULL, &a, 0), 100);
	ck_assert_double_eq(spf->key(NULL, &b, 0), 36);
	ck_assert_double_eq(spf->key(NULL, &c, 0), 15);
	sort_queue(spf, NULL, 0, q, 4);
	ck_assert_ptr_eq(q[0], &c);
	ck_assert_ptr_eq(q[1], &b);   /* ties with d at 36; b arrived first */
	ck_assert_ptr_eq(q[2], &d);
	ck_assert_ptr_eq(q[3], &a);
}
END_TEST

START_TEST(sjf_orders_by_predicted_output_left)
{
	const struct order_ops *sjf = order_find("sjf");
	struct req_view a = { .prompt_tokens = 10, .predicted_output = 50, .generated_tokens = 10 };
	struct req_view over = { .prompt_tokens = 10, .predicted_output = 5, .generated_tokens = 9 };
	struct req_view none = { .prompt_tokens = 300, .predicted_output = -1 };

	ck_assert_ptr_nonnull(sjf);
	ck_assert_double_eq(sjf->key(NULL, &a, 0), 40);
	ck_assert_double_eq(sjf->key(NULL, &over, 0), 0);    /* outran its prediction */
	ck_assert_double_eq(sjf->key(NULL, &none, 0), 300);  /* no predictor: prompt length */
}
END_TEST

START_TEST(priority_strict_and_aging)
{
	const struct order_ops *prio = order_find("priority");
	void *priv = priv_new(prio->priv_size);
	struct ss_error err = { 0 };
	struct req_view old = { .id = 1, .priority = 0, .arrival_ns = 0 };
	struct req_view mid = { .id = 2, .priority = 2, .arrival_ns = 1 * SEC };
	struct req_view late = { .id = 3, .priority = 2, .arrival_ns = 3 * SEC };
	const struct req_view *q[3] = { &old, &mid, &late };
	int64_t now = 3500 * MS;

	/* Strict classes: both priority-2 requests first, FCFS among them. */
	ck_assert_int_eq(order_setup(prio, "priority", priv, 1, &err), 0);
	ck_assert_double_eq(prio->key(priv, &old, now), 0);
	ck_assert_double_eq(prio->key(priv, &mid, 100 * SEC), -2);
	sort_queue(prio, priv, now, q, 3);
	ck_assert_ptr_eq(q[0], &mid);
	ck_assert_ptr_eq(q[1], &late);
	ck_assert_ptr_eq(q[2], &old);

	/* One level per second: old (0 + 3.5) overtakes late (2 + 0.5) but not
	 * mid (2 + 2.5), which arrived less than 2 s after it. */
	ck_assert_int_eq(order_setup(prio, "priority:aging=1", priv, 1, &err), 0);
	ck_assert_double_eq_tol(prio->key(priv, &old, now), -3.5, 1e-9);
	sort_queue(prio, priv, now, q, 3);
	ck_assert_ptr_eq(q[0], &mid);
	ck_assert_ptr_eq(q[1], &old);
	ck_assert_ptr_eq(q[2], &late);

	ck_assert_int_lt(order_setup(prio, "priority:aging=-1", priv, 1, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "aging"));
	ck_assert_int_lt(order_setup(prio, "priority:aging=fast", priv, 1, &err), 0);
	ck_assert_int_lt(order_setup(prio, "priority:age=1", priv, 1, &err), 0);
	free(priv);
}
END_TEST

START_TEST(vtc_charges_and_serves_least_served_first)
{
	const struct order_ops *vtc = order_find("vtc");
	void *priv = priv_new(vtc->priv_size);
	struct ss_error err = { 0 };
	struct req_view a1 = { .id = 1, .tenant = 0, .arrival_ns = 0 };
	struct req_view a2 = { .id = 2, .tenant = 0, .arrival_ns = 1 };
	struct req_view b1 = { .id = 3, .tenant = 1, .arrival_ns = 2 };
	struct req_view b2 = { .id = 4, .tenant = 1, .arrival_ns = 3 };
	const struct req_view *q[4] = { &a1, &a2, &b1, &b2 };

	ck_assert_int_eq(order_setup(vtc, "vtc", priv, 2, &err), 0);
	/* wp = 1, wq = 2: 100 prompt tokens then 3 output tokens. */
	vtc->served(priv, &a1, 100, 0);
	vtc->served(priv, &a1, 0, 3);
	ck_assert_double_eq(vtc->key(priv, &a2, 0), 106);
	ck_assert_double_eq(vtc->key(priv, &b1, 0), 0);
	/* Tenant 1 is least served: both of its requests first, FCFS within. */
	sort_queue(vtc, priv, 0, q, 4);
	ck_assert_ptr_eq(q[0], &b1);
	ck_assert_ptr_eq(q[1], &b2);
	ck_assert_ptr_eq(q[2], &a1);
	ck_assert_ptr_eq(q[3], &a2);
	/* Once tenant 1 has received more, tenant 0 leads. */
	vtc->served(priv, &b1, 200, 0);
	sort_queue(vtc, priv, 0, q, 4);
	ck_assert_ptr_eq(q[0], &a1);
	ck_assert_ptr_eq(q[1], &a2);

	/* Other weights, on fresh state. */
	memset(priv, 0, vtc->priv_size);
	ck_assert_int_eq(order_setup(vtc, "vtc:wp=0.5,wq=3", priv, 2, &err), 0);
	vtc->served(priv, &b2, 10, 2);
	ck_assert_double_eq_tol(vtc->key(priv, &b2, 0), 5 + 6, 1e-9);
	free(priv);
}
END_TEST

START_TEST(vtc_lifts_newly_active_tenant)
{
	const struct order_ops *vtc = order_find("vtc");
	void *priv = priv_new(vtc->priv_size);
	struct ss_error err = { 0 };
	struct req_view t0 = { .id = 1, .tenant = 0 };
	struct req_view t1 = { .id = 2, .tenant = 1 };
	struct req_view t2 = { .id = 3, .tenant = 2 };
	struct req_view t2b = { .id = 4, .tenant = 2 };
	struct req_view t3 = { .id = 5, .tenant = 3 };
	const struct req_view *running[1] = { &t0 };
	const struct req_view *waiting[2] = { &t1, &t2 };
	/* requests waiting or running per tenant (the engine keeps these) */
	uint32_t active[4] = { 1, 1, 1, 0 }, none[4] = { 0 };
	struct inst_view inst = { .running = running, .n_running = 1,
				  .waiting = waiting, .n_waiting = 2, .tenant_active = active };
	struct inst_view empty = { .tenant_active = none };

	ck_assert_int_eq(order_setup(vtc, "vtc", priv, 4, &err), 0);
	/* Before any service an arrival on an empty instance stays at 0. */
	vtc->enqueued(priv, &t3, &empty);
	ck_assert_double_eq(vtc->key(priv, &t3, 0), 0);

	vtc->served(priv, &t0, 300, 0);   /* running tenant 0: 300 */
	vtc->served(priv, &t1, 100, 0);   /* waiting tenant 1: 100 */
	vtc->served(priv, &t2, 50, 0);    /* waiting tenant 2: 50 */

	/* Tenant 3 idle, arrives: lifted to the least active counter, 50, so it
	 * does not get 50 tokens of banked credit. */
	vtc->enqueued(priv, &t3, &inst);
	ck_assert_double_eq(vtc->key(priv, &t3, 0), 50);

	/* Tenant 2 already has a request waiting: no lift for its next one. */
	vtc->enqueued(priv, &t2b, &inst);
	ck_assert_double_eq(vtc->key(priv, &t2b, 0), 50);

	/* Tenant 2 active only in the running set: no lift either, although
	 * every waiting tenant has more (a lift would give it 250). */
	running[0] = &t2;
	waiting[1] = &t3;
	active[0] = 0;
	active[3] = 1;
	vtc->served(priv, &t1, 0, 100);   /* tenant 1: 300 */
	vtc->served(priv, &t3, 0, 100);   /* tenant 3: 250 */
	vtc->enqueued(priv, &t2b, &inst);
	ck_assert_double_eq(vtc->key(priv, &t2b, 0), 50);

	/* A lift never lowers: tenant 0 (300) arrives while the least active
	 * counter is 50, and keeps 300. */
	vtc->enqueued(priv, &t0, &inst);
	ck_assert_double_eq(vtc->key(priv, &t0, 0), 300);

	/* An empty instance: lifted to the counter of the tenant charged last
	 * (the last to leave): tenant 1, at 300. */
	vtc->served(priv, &t1, 0, 0);
	vtc->enqueued(priv, &t3, &empty);
	ck_assert_double_eq(vtc->key(priv, &t3, 0), 300);
	free(priv);
}
END_TEST

START_TEST(vtc_rejects_bad_params)
{
	const struct order_ops *vtc = order_find("vtc");
	void *priv = priv_new(vtc->priv_size);
	struct ss_error err = { 0 };

	ck_assert_int_lt(order_setup(vtc, "vtc:wp=-1", priv, 2, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "--order vtc"));
	ck_assert_int_lt(order_setup(vtc, "vtc:wp=0,wq=0", priv, 2, &err), 0);
	ck_assert_int_lt(order_setup(vtc, "vtc:wq=x", priv, 2, &err), 0);
	ck_assert_int_eq(order_setup(vtc, "vtc", priv, 4096, &err), 0);
	ck_assert_int_lt(order_setup(vtc, "vtc", priv, 4097, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "tenants"));
	free(priv);
}
END_TEST

/* ---- victims -------------------------------------------------------------- */

START_TEST(victim_priority_sorts_lowest_latest_last)
{
	const struct victim_ops *v = victim_find("priority");
	struct req_view r[5] = {
		{ .id = 0, .priority = 1, .arrival_ns = 10 },
		{ .id = 1, .priority = 0, .arrival_ns = 5 },
		{ .id = 2, .priority = 3, .arrival_ns = 50 },
		{ .id = 3, .priority = 0, .arrival_ns = 20 },
		{ .id = 4, .priority = 1, .arrival_ns = 1 },
	};
	const struct req_view *run[5] = { &r[0], &r[1], &r[2], &r[3], &r[4] };
	const uint32_t want[5] = { 2, 4, 0, 1, 3 };

	ck_assert_ptr_nonnull(v);
	victim_cmp = v->compare;
	qsort(run, 5, sizeof(run[0]), victim_wrap);
	for (int i = 0; i < 5; i++)
		ck_assert_uint_eq(run[i]->id, want[i]);
	ck_assert_int_eq(v->compare(&r[0], &r[0]), 0);
	ck_assert_ptr_null(victim_find("newest")->compare);
}
END_TEST

START_TEST(victim_largest_sorts_most_blocks_last)
{
	const struct victim_ops *v = victim_find("largest");
	struct req_view r[4] = {
		{ .id = 0, .kv_blocks = 8, .arrival_ns = 10 },
		{ .id = 1, .kv_blocks = 30, .arrival_ns = 1 },
		{ .id = 2, .kv_blocks = 8, .arrival_ns = 40 },
		{ .id = 3, .kv_blocks = 1, .arrival_ns = 99, .host_blocks = 500 },
	};
	const struct req_view *run[4] = { &r[0], &r[1], &r[2], &r[3] };
	const uint32_t want[4] = { 3, 0, 2, 1 };

	ck_assert_ptr_nonnull(v);
	victim_cmp = v->compare;
	qsort(run, 4, sizeof(run[0]), victim_wrap);
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(run[i]->id, want[i]);
}
END_TEST

/* ---- admission ------------------------------------------------------------ */

START_TEST(queue_rejects_at_max)
{
	const struct admission_ops *qa = admission_find("queue");
	void *priv = priv_new(qa->priv_size);
	struct ss_error err = { 0 };
	struct req_view r = { 0 };
	struct inst_view inst = { .n_running = 100 };
	const char *reason = NULL;

	ck_assert_int_eq(admission_setup(qa, "queue:max=2", priv, &err), 0);
	inst.n_waiting = 0;
	ck_assert(qa->admit(priv, &r, &inst, 0, NULL, &reason));
	inst.n_waiting = 1;
	ck_assert(qa->admit(priv, &r, &inst, 0, NULL, &reason));
	ck_assert_ptr_null(reason);
	inst.n_waiting = 2;
	ck_assert(!qa->admit(priv, &r, &inst, 0, NULL, &reason));
	ck_assert_str_eq(reason, "queue full");

	ck_assert_int_eq(admission_setup(qa, "queue:max=0", priv, &err), 0);
	inst.n_waiting = 0;
	ck_assert(!qa->admit(priv, &r, &inst, 0, NULL, &reason));

	ck_assert_int_lt(admission_setup(qa, "queue", priv, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "max="));
	ck_assert_int_lt(admission_setup(qa, "queue:max=-1", priv, &err), 0);
	ck_assert_int_lt(admission_setup(qa, "queue:max=1.5", priv, &err), 0);
	free(priv);
}
END_TEST

START_TEST(timeout_expires_only_unstarted_past_deadline)
{
	const struct admission_ops *to = admission_find("timeout");
	void *priv = priv_new(to->priv_size);
	struct ss_error err = { 0 };
	struct req_view fresh = { .arrival_ns = 1 * SEC, .prompt_tokens = 10 };
	/* A prefix-cache hit does not count as having started. */
	struct req_view cached = { .arrival_ns = 1 * SEC, .prompt_tokens = 10,
				   .computed_tokens = 8, .cached_tokens = 8 };
	struct req_view preempted = { .arrival_ns = 0, .prompt_tokens = 10, .preemptions = 1 };
	struct req_view decoding = { .arrival_ns = 0, .prompt_tokens = 10, .generated_tokens = 1 };
	const char *reason = NULL;

	ck_assert_ptr_null(to->admit);
	ck_assert_int_eq(admission_setup(to, "timeout:ms=100", priv, &err), 0);
	ck_assert(!to->expire(priv, &fresh, 1 * SEC + 100 * MS, &reason));
	ck_assert_ptr_null(reason);
	ck_assert(to->expire(priv, &fresh, 1 * SEC + 100 * MS + 1, &reason));
	ck_assert_str_eq(reason, "queue timeout");
	ck_assert(to->expire(priv, &cached, 2 * SEC, &reason));
	ck_assert(!to->expire(priv, &preempted, 10 * SEC, &reason));
	ck_assert(!to->expire(priv, &decoding, 10 * SEC, &reason));
	/* its deadline is the first now at which it expires: the engine asks
	 * nothing before it */
	ck_assert_int_eq(to->deadline(priv, &fresh), 1 * SEC + 100 * MS + 1);
	/* past the clock's range: never, not a wrapped time */
	fresh.arrival_ns = INT64_MAX - 50 * MS;
	ck_assert_int_eq(to->deadline(priv, &fresh), INT64_MAX);
	fresh.arrival_ns = 1 * SEC;

	ck_assert_int_eq(admission_setup(to, "timeout:ms=0.5", priv, &err), 0);
	ck_assert(to->expire(priv, &fresh, 1 * SEC + MS, &reason));

	ck_assert_int_lt(admission_setup(to, "timeout", priv, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "ms="));
	ck_assert_int_lt(admission_setup(to, "timeout:ms=0", priv, &err), 0);
	ck_assert_int_lt(admission_setup(to, "timeout:ms=-5", priv, &err), 0);
	free(priv);
}
END_TEST

/* 1 ms per step plus 1 us per prefilled token. */
static int64_t fake_prefill_ns(void *ctx, int32_t tokens)
{
	int *calls = ctx;

	(*calls)++;
	return 1 * MS + 1000LL * tokens;
}

START_TEST(slo_rejects_predicted_ttft_over_slo)
{
	const struct admission_ops *slo = admission_find("slo");
	void *priv = priv_new(slo->priv_size);
	struct ss_error err = { 0 };
	int calls = 0;
	struct policy_host host = { .ctx = &calls, .prefill_ns = fake_prefill_ns,
				    .slo_ttft_ns = 40 * MS };
	struct req_view w1 = { .prompt_tokens = 10000 };
	struct req_view w2 = { .prompt_tokens = 30000, .computed_tokens = 10000 };
	struct req_view w3 = { .prompt_tokens = 15000 };
	const struct req_view *waiting[3] = { &w1, &w2, &w3 };
	struct inst_view inst = { .waiting = waiting, .n_waiting = 2 };
	struct req_view r = { .arrival_ns = 5 * SEC, .prompt_tokens = 5000 };
	int64_t now = 5 * SEC;
	const char *reason = NULL;

	/* Ahead: 10000 + 20000 tokens, own 5000: 1 + 35 = 36 ms <= 50 ms. */
	ck_assert_int_eq(admission_setup(slo, "slo:ttft_ms=50", priv, &err), 0);
	ck_assert(slo->admit(priv, &r, &inst, now, &host, &reason));
	/* A step in flight adds 1.001 ms: 37.001 ms. */
	inst.busy = true;
	ck_assert(slo->admit(priv, &r, &inst, now, &host, &reason));
	ck_assert_ptr_null(reason);
	/* 15000 more tokens ahead: 52.001 ms > 50 ms. */
	inst.n_waiting = 3;
	ck_assert(!slo->admit(priv, &r, &inst, now, &host, &reason));
	ck_assert_str_eq(reason, "predicted TTFT over the SLO");

	/* margin 0.5: 26 ms. */
	ck_assert_int_eq(admission_setup(slo, "slo:ttft_ms=50,margin=0.5", priv, &err), 0);
	ck_assert(slo->admit(priv, &r, &inst, now, &host, &reason));

	/* Default: the run's SLO (40 ms). */
	ck_assert_int_eq(admission_setup(slo, "slo", priv, &err), 0);
	inst.n_waiting = 2;
	inst.busy = false;
	ck_assert(slo->admit(priv, &r, &inst, now, &host, &reason));        /* 36 ms */
	inst.n_waiting = 3;
	ck_assert(!slo->admit(priv, &r, &inst, now, &host, &reason));       /* 51 ms */

	/* No SLO anywhere, or no estimate: nothing is rejected. */
	host.slo_ttft_ns = 0;
	calls = 0;
	ck_assert(slo->admit(priv, &r, &inst, now, &host, &reason));
	ck_assert_int_eq(calls, 0);
	host.slo_ttft_ns = 1;
	host.prefill_ns = NULL;
	ck_assert(slo->admit(priv, &r, &inst, now, &host, &reason));

	ck_assert_int_lt(admission_setup(slo, "slo:margin=0", priv, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "margin"));
	ck_assert_int_lt(admission_setup(slo, "slo:ttft_ms=-1", priv, &err), 0);
	ck_assert_int_lt(admission_setup(slo, "slo:ttft=50", priv, &err), 0);
	free(priv);
}
END_TEST

START_TEST(registry_finds_every_new_policy)
{
	const char *orders[] = { "fcfs", "spf", "sjf", "priority", "vtc" };
	const char *victims[] = { "newest", "priority", "largest" };
	const char *admissions[] = { "none", "queue", "timeout", "slo" };

	for (size_t i = 0; i < sizeof(orders) / sizeof(orders[0]); i++) {
		const struct order_ops *o = order_find(orders[i]);

		ck_assert_ptr_nonnull(o);
		ck_assert_int_eq(o->version, POLICY_VERSION);
		ck_assert_str_eq(o->name, orders[i]);
	}
	for (size_t i = 0; i < sizeof(victims) / sizeof(victims[0]); i++)
		ck_assert_ptr_nonnull(victim_find(victims[i]));
	for (size_t i = 0; i < sizeof(admissions) / sizeof(admissions[0]); i++)
		ck_assert_ptr_nonnull(admission_find(admissions[i]));
	ck_assert_ptr_null(order_find("nope"));
	ck_assert_ptr_null(victim_find("nope"));
	ck_assert_ptr_null(admission_find("nope"));
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("policy-misc");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, spf_orders_by_tokens_left_to_prefill);
	tcase_add_test(tc, sjf_orders_by_predicted_output_left);
	tcase_add_test(tc, priority_strict_and_aging);
	tcase_add_test(tc, vtc_charges_and_serves_least_served_first);
	tcase_add_test(tc, vtc_lifts_newly_active_tenant);
	tcase_add_test(tc, vtc_rejects_bad_params);
	tcase_add_test(tc, victim_priority_sorts_lowest_latest_last);
	tcase_add_test(tc, victim_largest_sorts_most_blocks_last);
	tcase_add_test(tc, queue_rejects_at_max);
	tcase_add_test(tc, timeout_expires_only_unstarted_past_deadline);
	tcase_add_test(tc, slo_rejects_predicted_ttft_over_slo);
	tcase_add_test(tc, registry_finds_every_new_policy);
	suite_add_tcase(s, tc);
	return s;
}
