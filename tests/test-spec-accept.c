/* Speculative decoding acceptance (sim/spec-accept.h, docs/speculation.md
 * "Acceptance"): the per-position model's invariants, its k errors, the
 * shipped catalog against the figures it was fitted to, and the catalog
 * reader's one-line errors. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog-fixture.h"
#include "check-main.h"
#include "check-tmp.h"
#include "spec-accept.h"

static struct spec_accept entry(double alpha, double decay)
{
	struct spec_accept a = { .alpha = alpha, .decay = decay };

	snprintf(a.name, sizeof(a.name), "test");
	snprintf(a.method, sizeof(a.method), "eagle3");
	return a;
}

/* Cumulative acceptance never rises with position, stays in (0, 1], and
 * the first position's is alpha. */
START_TEST(positions_are_monotone_probabilities)
{
	static const double alphas[] = { 0.05, 0.3, 0.7307, 0.95, 1.0 };
	static const double decays[] = { 0.1, 0.74, 0.9642, 1.0 };
	double p[SPEC_MAX_K];

	for (size_t i = 0; i < sizeof(alphas) / sizeof(alphas[0]); i++)
		for (size_t j = 0; j < sizeof(decays) / sizeof(decays[0]); j++) {
			struct spec_accept a = entry(alphas[i], decays[j]);

			ck_assert_int_eq(spec_accept_positions(&a, SPEC_MAX_K, p, NULL), 0);
			ck_assert_double_eq_tol(p[0], alphas[i], 1e-15);
			for (int k = 0; k < SPEC_MAX_K; k++) {
				ck_assert(p[k] > 0.0 && p[k] <= 1.0);
				if (k)
					ck_assert_msg(p[k] <= p[k - 1], "alpha %g decay %g: p[%d] %g > p[%d] %g",
						      alphas[i], decays[j], k, p[k], k - 1, p[k - 1]);
			}
		}
}
END_TEST

/* The model: conditional acceptance alpha x decay^(i-1), so p_i is the
 * product; written out for alpha 0.8, decay 0.5. */
START_TEST(positions_follow_the_decay)
{
	struct spec_accept a = entry(0.8, 0.5);
	double p[3];

	ck_assert_int_eq(spec_accept_positions(&a, 3, p, NULL), 0);
	ck_assert_double_eq_tol(p[0], 0.8, 1e-15);
	ck_assert_double_eq_tol(p[1], 0.8 * 0.4, 1e-15);
	ck_assert_double_eq_tol(p[2], 0.8 * 0.4 * 0.2, 1e-15);
}
END_TEST

/* AL = 1 + sum p; the positions of k are the first k of any larger k
 * (a position's acceptance does not depend on how far the draft goes). */
START_TEST(length_is_one_plus_the_sum)
{
	struct spec_accept a = entry(0.7, 0.9);
	double p[SPEC_MAX_K], q[SPEC_MAX_K];

	ck_assert_int_eq(spec_accept_positions(&a, SPEC_MAX_K, q, NULL), 0);
	for (int k = 1; k <= SPEC_MAX_K; k++) {
		double sum = 1.0;

		ck_assert_int_eq(spec_accept_positions(&a, k, p, NULL), 0);
		for (int i = 0; i < k; i++) {
			ck_assert_double_eq(p[i], q[i]);
			sum += p[i];
		}
		ck_assert_double_eq_tol(spec_accept_length(&a, k), sum, 1e-12);
		if (k > 1)
			ck_assert(spec_accept_length(&a, k) > spec_accept_length(&a, k - 1));
	}
}
END_TEST

/* AL lies in [1, k + 1]: k + 1 when every draft is accepted, near 1 when
 * almost none is. */
START_TEST(length_bounds)
{
	struct spec_accept all = entry(1.0, 1.0), none = entry(1e-6, 1.0), mid = entry(0.6, 0.8);

	for (int k = 1; k <= SPEC_MAX_K; k++) {
		ck_assert_double_eq_tol(spec_accept_length(&all, k), k + 1.0, 1e-12);
		ck_assert_double_eq_tol(spec_accept_length(&none, k), 1.0, 1e-5);
		ck_assert(spec_accept_length(&mid, k) >= 1.0 && spec_accept_length(&mid, k) <= k + 1.0);
	}
}
END_TEST

/* k outside 1..SPEC_MAX_K: -EINVAL naming the entry and the range, p
 * untouched; the length is NAN. */
START_TEST(k_out_of_range)
{
	static const int bad[] = { 0, -1, SPEC_MAX_K + 1, 1000 };
	struct spec_accept a = entry(0.7, 0.9);
	double p[1] = { -7.0 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ss_error err = { 0 };

		ck_assert_int_eq(spec_accept_positions(&a, bad[i], p, &err), -EINVAL);
		ck_assert_double_eq(p[0], -7.0);
		ck_assert_msg(strstr(err.msg, "test: k") && strstr(err.msg, "expected 1..16"), "%s",
			      err.msg);
		ck_assert(isnan(spec_accept_length(&a, bad[i])));
	}
	ck_assert_int_eq(spec_accept_positions(&a, 1, p, NULL), 0);
}
END_TEST

/* One uniform decides a step: the accepted count is a prefix length in
 * 0..k whose mean over u (a fine midpoint grid standing in for the
 * request's stream) is AL - 1, and whose tail P(n >= i) is p_i. */
START_TEST(draw_matches_the_positions)
{
	struct spec_accept a = entry(0.8, 0.9);
	enum { N = 100000 };
	double p[5], mean = 0.0, tail[6] = { 0 };

	ck_assert_int_eq(spec_accept_positions(&a, 5, p, NULL), 0);
	for (int j = 0; j < N; j++) {
		int n = spec_accept_draw(&a, 5, (j + 0.5) / N);

		ck_assert(n >= 0 && n <= 5);
		mean += (double)n / N;
		for (int i = 1; i <= n; i++)
			tail[i] += 1.0 / N;
	}
	/* a midpoint grid of N points is off by at most 1/N per position */
	ck_assert_double_eq_tol(mean, spec_accept_length(&a, 5) - 1.0, 5.0 / N);
	for (int i = 1; i <= 5; i++)
		ck_assert_double_eq_tol(tail[i], p[i - 1], 1.0 / N);
	ck_assert_int_eq(spec_accept_draw(&a, 5, 0.0), 5);
	ck_assert_int_eq(spec_accept_draw(&a, 5, 0.81), 0);
	ck_assert_int_eq(spec_accept_draw(&a, 0, 0.5), -EINVAL);
	ck_assert_int_eq(spec_accept_draw(&a, SPEC_MAX_K + 1, 0.5), -EINVAL);
}
END_TEST

/* The shipped catalog: every entry's method is known, its source cites a
 * commit, and its AL at k_ref is within 5% of the figure it was fitted to
 * (al_ref; the largest such error of the shipped fit is 1.3%, glm-5.2's
 * k = 8, so 5% fails a catalog refitted with a wrong model, not rounding). */
START_TEST(shipped_catalog_reproduces_its_figures)
{
	ck_assert_uint_ge(cat.n_acceptance, 66);
	for (size_t i = 0; i < cat.n_acceptance; i++) {
		const struct spec_accept *a = &cat.acceptance[i];
		double al;

		ck_assert_ptr_eq(catalog_acceptance(&cat, a->name), a);
		ck_assert_int_eq(spec_accept_validate(a, "x", "y", NULL), 0);
		if (!a->k_ref) {
			/* a <method>-median entry: pooled from the measured ones */
			ck_assert_msg(strstr(a->name, "-median") && !a->target[0] && a->al_ref == 0.0,
				      "%s: no k_ref, but not a method median", a->name);
			continue;
		}
		al = spec_accept_length(a, a->k_ref);
		ck_assert_msg(strstr(a->source, "@") != NULL, "%s: source cites no commit", a->name);
		ck_assert_msg(fabs(al / a->al_ref - 1) < 0.05, "%s: AL(%d) %g, measured %g", a->name,
			      a->k_ref, al, a->al_ref);
	}
	/* vLLM's EAGLE-3 Llama-3.1-8B baseline, AL 2.60 at k = 3 on MT-Bench */
	ck_assert_ptr_nonnull(catalog_acceptance(&cat, "vllm-eagle3-llama-3.1-8b-instruct-mt-bench"));
	ck_assert_double_eq_tol(spec_accept_length(catalog_acceptance(&cat,
				"vllm-eagle3-llama-3.1-8b-instruct-mt-bench"), 3), 2.60, 0.03);
	ck_assert_ptr_null(catalog_acceptance(&cat, "no-such-entry"));
	/* every method has its median, for a target without its own entry */
	for (size_t m = 0; spec_accept_methods[m]; m++) {
		char name[64];

		snprintf(name, sizeof(name), "%s-median", spec_accept_methods[m]);
		ck_assert_msg(catalog_acceptance(&cat, name) != NULL, "no %s", name);
	}
}
END_TEST

#define OK_FIELDS "\"method\": \"mtp\", \"alpha\": 0.8, \"decay\": 0.9, \"source\": \"t\""

/* A bad file: -EINVAL, one line naming the file, the entry and what was
 * expected; the catalog keeps what it had. */
START_TEST(reader_failure_paths)
{
	static const struct { const char *text, *want; } bad[] = {
		{ "{\"acceptance\": [{\"name\": \"x\", " OK_FIELDS ", \"alhpa\": 1}]}",
		  "acceptance[0] \"x\": unknown field \"alhpa\"" },
		{ "{\"acceptance\": [{\"name\": \"x\", \"method\": \"mtp\", \"alpha\": 1.5, \"decay\": 0.9, \"source\": \"t\"}]}",
		  "acceptance[0] \"x\": field \"alpha\" is 1.5" },
		{ "{\"acceptance\": [{\"name\": \"x\", \"method\": \"mtp\", \"alpha\": 0.5, \"decay\": 0, \"source\": \"t\"}]}",
		  "field \"decay\" is 0, expected a number > 0" },
		{ "{\"acceptance\": [{\"name\": \"x\", " OK_FIELDS ", \"k_ref\": 17}]}",
		  "field \"k_ref\"" },
		{ "{\"acceptance\": [{\"name\": \"x\", \"method\": \"lookahead\", \"alpha\": 0.5, \"decay\": 0.9, \"source\": \"t\"}]}",
		  "method 'lookahead', expected draft, eagle, eagle3, mtp, medusa or ngram" },
		{ "{\"acceptance\": [{\"name\": \"x\", \"method\": \"mtp\", \"alpha\": 0.5, \"source\": \"t\"}]}",
		  "missing field \"decay\"" },
		{ "{\"acceptance\": [{\"name\": \"x\", " OK_FIELDS "}, {\"name\": \"x\", " OK_FIELDS "}]}",
		  "acceptance[1]: name \"x\" already used by acceptance[0]" },
		{ "{\"stacks\": []}", "expected an object {\"acceptance\": [ ... ]}" },
		{ "{\"acceptance\": [", "invalid JSON" },
	};
	struct ss_error err;
	char path[256];
	size_t n = cat.n_acceptance;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		check_write_tmp(path, sizeof(path), "accept", bad[i].text);
		ck_assert_int_eq(catalog_load_acceptance(&cat, path, &err), -EINVAL);
		unlink(path);
		ck_assert_msg(strstr(err.msg, bad[i].want), "%zu: got '%s', expected '%s'", i, err.msg,
			      bad[i].want);
		ck_assert_msg(!strchr(err.msg, '\n'), "%zu: more than one line: '%s'", i, err.msg);
		ck_assert_str_eq(err.file, path);
		ck_assert_uint_eq(cat.n_acceptance, n);
		ck_assert_ptr_null(catalog_acceptance(&cat, "x"));
	}
	/* a good one adds; one of the same name replaces */
	check_write_tmp(path, sizeof(path), "accept", "{\"acceptance\": [{\"name\": \"x\", " OK_FIELDS "}]}");
	ck_assert_int_eq(catalog_load_acceptance(&cat, path, &err), 0);
	unlink(path);
	ck_assert_uint_eq(cat.n_acceptance, n + 1);
	ck_assert_double_eq(catalog_acceptance(&cat, "x")->alpha, 0.8);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("spec-accept");
	TCase *tc = tcase_create("model");
	TCase *cc = tcase_create("catalog");

	tcase_add_test(tc, positions_are_monotone_probabilities);
	tcase_add_test(tc, positions_follow_the_decay);
	tcase_add_test(tc, length_is_one_plus_the_sum);
	tcase_add_test(tc, length_bounds);
	tcase_add_test(tc, k_out_of_range);
	tcase_add_test(tc, draw_matches_the_positions);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(cc, setup, teardown);
	tcase_add_test(cc, shipped_catalog_reproduces_its_figures);
	tcase_add_test(cc, reader_failure_paths);
	suite_add_tcase(s, cc);
	return s;
}
