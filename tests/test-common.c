/* Behaviours of the shared utilities: spec parsing and quantiles. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "hist.h"
#include "params.h"
#include "sstime.h"
#include "ss-file.h"
#include "ss-grow.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

START_TEST(params_name_and_values)
{
	struct ss_params p;
	struct ss_error err = { 0 };
	double d;
	int64_t i;

	ck_assert_int_eq(ss_params_parse(&p, "--policy", "vllm:max_num_seqs=8,chunked=off", true, &err), 0);
	ck_assert_str_eq(p.name, "vllm");
	ck_assert_int_eq(p.n, 2);
	ck_assert_int_eq(ss_params_int(&p, "max_num_seqs", 1, &i, &err), 0);
	ck_assert_int_eq(i, 8);
	ck_assert_int_eq(ss_params_double(&p, "absent", 2.5, &d, &err), 0);
	ck_assert_double_eq(d, 2.5);
	/* chunked was never read: reported as unknown */
	ck_assert_int_lt(ss_params_check_unused(&p, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "chunked"));
}
END_TEST

START_TEST(params_errors)
{
	struct ss_params p;
	struct ss_error err = { 0 };
	int64_t i;

	ck_assert_int_lt(ss_params_parse(&p, "--policy", ":a=1", true, &err), 0);
	ck_assert_int_lt(ss_params_parse(&p, "--policy", "x:a=1,a=2", true, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "twice"));
	ck_assert_int_lt(ss_params_parse(&p, "--policy", "x:a=1,,b=2", true, &err), 0);
	ck_assert_int_eq(ss_params_parse(&p, "--policy", "x:a=12abc", true, &err), 0);
	ck_assert_int_lt(ss_params_int(&p, "a", 0, &i, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "12abc"));
}
END_TEST

START_TEST(params_positional_and_bare)
{
	struct ss_params p;
	struct ss_error err = { 0 };

	ck_assert_int_eq(ss_params_parse(&p, "--lengths", "empirical:/tmp/x.csv", true, &err), 0);
	ck_assert_str_eq(ss_params_str(&p, "_", NULL), "/tmp/x.csv");
	ck_assert_int_eq(ss_params_parse(&p, "--slo", "ttft_ms=200,tpot_ms=50", false, &err), 0);
	ck_assert_str_eq(p.name, "");
	ck_assert_str_eq(ss_params_str(&p, "tpot_ms", NULL), "50");
}
END_TEST

START_TEST(strict_numbers)
{
	double d;
	int64_t i;

	ck_assert(ss_parse_double("1.5", &d) && d == 1.5);
	ck_assert(!ss_parse_double("", &d));
	ck_assert(!ss_parse_double("1.5x", &d));
	ck_assert(!ss_parse_double("nan", &d));
	ck_assert(ss_parse_int64("-3", &i) && i == -3);
	ck_assert(!ss_parse_int64("3.0", &i));
}
END_TEST

/* ss_parse_double reads plain decimals without strtod (params.c's fast
 * path); its value must be strtod's bit for bit, and what the fast path
 * leaves to strtod (exponents, 16+ digits, '+') still reads. */
/* Ranged numbers and KEY=VALUE tokens of --spec / --lora style specs. */
struct kdoc {
	const char *key, *arg;
};

START_TEST(ranged_numbers_and_keyvals)
{
	static const struct kdoc keys[] = { { "k", "K" }, { "alpha", "A" }, { "draft", "M" } };
	bool seen[3] = { false };
	const char *val = NULL;
	char tok[32], msg[160];
	long l = -7;
	double d = -7;

	ck_assert_int_eq(ss_parse_long_in("4", 1, 16, &l), 0);
	ck_assert_int_eq(l, 4);
	ck_assert_int_eq(ss_parse_long_in("17", 1, 16, &l), -1);
	ck_assert_int_eq(ss_parse_long_in("0", 1, 16, &l), -1);
	ck_assert_int_eq(ss_parse_long_in("4x", 1, 16, &l), -1);
	ck_assert_int_eq(l, 4);   /* untouched on failure */
	ck_assert_int_eq(ss_parse_double_in("1", 0, 1, &d), 0);
	ck_assert(d == 1.0);
	ck_assert_int_eq(ss_parse_double_in("0", 0, 1, &d), -1);   /* gt is exclusive */
	ck_assert_int_eq(ss_parse_double_in("nan", 0, 1, &d), -1);
	ck_assert_int_eq(ss_parse_double_in("1.5", 0, 1, &d), -1);

	strcpy(tok, "alpha=0.7");
	ck_assert_int_eq(ss_keyval_take(tok, keys, sizeof(*keys), 3, seen, &val, msg, sizeof(msg)), 1);
	ck_assert_str_eq(val, "0.7");
	ck_assert(seen[1] && !seen[0] && !seen[2]);
	strcpy(tok, "alpha=0.8");
	ck_assert_int_eq(ss_keyval_take(tok, keys, sizeof(*keys), 3, seen, &val, msg, sizeof(msg)), -1);
	ck_assert_str_eq(msg, "alpha= given twice");
	strcpy(tok, "depth=2");
	ck_assert_int_eq(ss_keyval_take(tok, keys, sizeof(*keys), 3, seen, &val, msg, sizeof(msg)), -1);
	ck_assert_str_eq(msg, "'depth': expected KEY=VALUE with KEY one of k, alpha, draft");
	strcpy(tok, "draft");
	ck_assert_int_eq(ss_keyval_take(tok, keys, sizeof(*keys), 3, seen, &val, msg, sizeof(msg)), -1);
	ck_assert_str_eq(msg, "'draft': expected KEY=VALUE with KEY one of k, alpha, draft");
}
END_TEST

START_TEST(decimals_read_as_strtod)
{
	static const char *const fixed[] = {
		"0", "-0", "0.0", "-0.000", "1.", ".5", "-.5", "1.020060287", "0.1", "0.3",
		"9007199254740992", "9007199254740993", "123456789012345678",
		"0.1234567890123456789012", "0.00000000000000000000001", "1e3", "+2.5",
		"2.5 ", "2.5\r", "17976931348623157", "1.7976931348623157e308", "2.5e-3",
	};
	unsigned long long x = 88172645463325252ull;   /* xorshift64 */
	char buf[64];
	double d, ref;
	int64_t i;

	for (size_t n = 0; n < sizeof(fixed) / sizeof(fixed[0]); n++) {
		ref = strtod(fixed[n], NULL);
		ck_assert_msg(ss_parse_double(fixed[n], &d), "%s", fixed[n]);
		ck_assert_msg(memcmp(&d, &ref, sizeof(d)) == 0, "%s: %a, strtod %a", fixed[n], d,
			      ref);
	}
	for (int n = 0; n < 200000; n++) {
		int ip, fp;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		ip = (int)(x % 100000);
		fp = (int)((x >> 20) % 24);   /* digits after the point, 0 .. 23 */
		snprintf(buf, sizeof(buf), "%s%d.%0*llu", (x >> 62) ? "" : "-", ip, fp ? fp : 1,
			 fp ? (x >> 8) % 10000000000000000000ull : 0ull);
		buf[strlen(buf) - (fp ? 0 : 1)] = '\0';
		ref = strtod(buf, NULL);
		ck_assert_msg(ss_parse_double(buf, &d), "%s", buf);
		ck_assert_msg(memcmp(&d, &ref, sizeof(d)) == 0, "%s: %a, strtod %a", buf, d, ref);
	}
	ck_assert(ss_parse_int64("123456789012345678", &i) && i == 123456789012345678ll);
	ck_assert(ss_parse_int64("-9223372036854775808", &i) && i == INT64_MIN);
	ck_assert(!ss_parse_int64("9223372036854775808", &i));
	ck_assert(ss_parse_int64("9223372036854775807", &i) && i == INT64_MAX);
	ck_assert(ss_parse_int64("9999999999999999999 ", &i) == false);
	ck_assert(ss_parse_int64("999999999999999999", &i) && i == 999999999999999999ll);
	ck_assert(ss_parse_int64(" 42 \r", &i) && i == 42);
	ck_assert(!ss_parse_int64("-", &i));
	ck_assert(!ss_parse_double("-", &d));
	ck_assert(!ss_parse_double(".", &d));
	ck_assert(!ss_parse_double("1..2", &d));
	ck_assert(!ss_parse_double("1.2.", &d));
}
END_TEST

/* The byte-at-a-time definition of ss_line_bounded. */
static size_t line_bounded_ref(const char *buf, size_t n, size_t *run, size_t max)
{
	size_t r = *run;

	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n' || buf[i] == '\r') {
			r = 0;
		} else if (++r > max) {
			*run = r;
			return i;
		}
	}
	*run = r;
	return n;
}

/* ss_line_bounded (a line at a time) answers as the byte loop does, index
 * and run, over random buffers of short and long lines, carriage returns
 * and chunk boundaries anywhere in a line. */
START_TEST(line_bounded_as_bytes)
{
	static char buf[4096];
	unsigned long long x = 0x853c49e6748fea9bull;

	for (int k = 0; k < 20000; k++) {
		size_t n, max, run0, r1, r2, a, b;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		n = x % sizeof(buf);
		max = 1 + (x >> 12) % 200;
		run0 = (x >> 24) % (max + 1);
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = x % 97 == 0 ? '\n' : x % 89 == 0 ? '\r' : (char)('a' + x % 26);
			if ((k & 3) == 0 && x % 31 == 0)
				buf[i] = '\n';   /* some buffers of short lines */
		}
		r1 = r2 = run0;
		a = ss_line_bounded(buf, n, &r1, max);
		b = line_bounded_ref(buf, n, &r2, max);
		ck_assert_msg(a == b && r1 == r2, "buffer %d: %zu/%zu, run %zu/%zu", k, a, b, r1, r2);
	}
}
END_TEST

START_TEST(time_conversions_checked)
{
	int64_t ns = -1;
	struct ss_error err = {0};

	ck_assert(ss_time_from_units(1.5, SS_NS_PER_MS, &ns));
	ck_assert_int_eq(ns, 1500000);
	ck_assert(ss_time_from_units(0.0, SS_NS_PER_S, &ns));
	ck_assert_int_eq(ns, 0);
	/* 9.2e9 s is just under 2^63 ns; 9.3e9 s is not. */
	ck_assert(ss_time_from_s(9.2e9, &ns));
	ck_assert(!ss_time_from_s(9.3e9, &ns));
	ck_assert(!ss_time_from_s(-1e-9, &ns));
	ck_assert(!ss_time_from_s(NAN, &ns));
	ck_assert(!ss_time_from_s(INFINITY, &ns));
	ck_assert(!ss_time_from_units(1e300, SS_NS_PER_MS, &ns));
	ck_assert_int_eq(ss_time_parse_ms(1e300, "--slo ttft_ms", &ns, &err), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "--slo ttft_ms"));
	ck_assert_int_eq(ss_time_parse_s(2.0, "--duration", &ns, &err), 0);
	ck_assert_int_eq(ns, 2000000000);
	ck_assert(ss_time_add(INT64_MAX - 1, 1, &ns));
	ck_assert(!ss_time_add(INT64_MAX, 1, &ns));
	ck_assert_int_eq(ss_time_add_sat(INT64_MAX, 5), INT64_MAX);
}
END_TEST

START_TEST(quantile_matches_numpy)
{
	/* numpy.percentile([1, 2, 3, 4, 10], [50, 90, 99]) = 3, 7.6, 9.76 */
	double v[] = { 1, 2, 3, 4, 10 };

	ck_assert_double_eq_tol(ss_quantile_sorted(v, 5, 0.5), 3.0, 1e-12);
	ck_assert_double_eq_tol(ss_quantile_sorted(v, 5, 0.9), 7.6, 1e-12);
	ck_assert_double_eq_tol(ss_quantile_sorted(v, 5, 0.99), 9.76, 1e-12);
	ck_assert_double_eq(ss_quantile_sorted(v, 0, 0.5), 0.0);
}
END_TEST

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

START_TEST(hist_quantiles_within_bound)
{
	struct ss_hist h;
	enum { N = 100000 };
	double *v = malloc(sizeof(double) * N);
	uint64_t x = 12345;

	ck_assert_int_eq(ss_hist_init(&h), 0);
	for (int i = 0; i < N; i++) {
		/* log-uniform values over 1 us .. 1 s, in ns */
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		v[i] = floor(exp(log(1e3) + (log(1e9) - log(1e3)) * (double)(x >> 11) / 9007199254740992.0));
		ss_hist_add(&h, (int64_t)v[i]);
	}
	qsort(v, N, sizeof(double), cmp_d);
	ck_assert_uint_eq(h.count, N);
	ck_assert_double_eq(h.min, v[0]);
	ck_assert_double_eq(h.max, v[N - 1]);
	/* Bucket width is 2^-8 of the value: a quantile lands within 0.4% of
	 * the exact one (midpoint error 0.2%, plus interpolation). */
	for (double q = 0.01; q < 1.0; q += 0.07)
		ck_assert_double_le(fabs(ss_hist_quantile(&h, q) / ss_quantile_sorted(v, N, q) - 1), 0.004);
	free(v);
	ss_hist_release(&h);
}
END_TEST

START_TEST(hist_small_values_exact)
{
	struct ss_hist h;

	ck_assert_int_eq(ss_hist_init(&h), 0);
	for (int i = 1; i <= 100; i++)
		ss_hist_add(&h, i);
	ck_assert_double_eq(ss_hist_quantile(&h, 0.5), 50.5);
	ck_assert_double_eq(ss_hist_mean(&h), 50.5);
	ck_assert_double_eq(ss_hist_quantile(&h, 1.0), 100);
	ss_hist_release(&h);
}
END_TEST

/* ss_advise_huge is advice only: any block (unaligned, small, NULL) is
 * accepted and no byte of it changes, before or after it is filled. */
START_TEST(advise_huge_keeps_contents)
{
	size_t n = (size_t)9 << 20;
	unsigned char *p = malloc(n + 3);
	size_t bad = 0;

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < n + 3; i++)
		p[i] = (unsigned char)(i * 31 + 7);
	ss_advise_huge(p + 3, n);
	ss_advise_huge(p, 100);
	ss_advise_huge(NULL, n);
	for (size_t i = 0; i < n + 3; i++)
		bad += p[i] != (unsigned char)(i * 31 + 7);
	ck_assert_uint_eq(bad, 0);
	free(p);
	p = calloc(1, n);
	ck_assert_ptr_nonnull(p);
	ss_advise_huge(p, n);
	for (size_t i = 0; i < n; i += 4096)
		bad += p[i] != 0;
	ck_assert_uint_eq(bad, 0);
	free(p);
}
END_TEST

/* ss_hist_add_n(h, v, n) is n calls of ss_hist_add(h, v): the same count,
 * min, max, buckets and quantiles, and the same sum bit for bit, also past
 * 2^53 where adding v * n at once would round differently. */
START_TEST(hist_add_n_is_n_adds)
{
	struct ss_hist a, b;
	uint64_t x = 5;
	double once = 0;

	ck_assert_int_eq(ss_hist_init(&a), 0);
	ck_assert_int_eq(ss_hist_init(&b), 0);
	for (int i = 0; i < 5000; i++) {
		int64_t v;
		uint64_t n;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		v = (x >> 60) == 0 ? (int64_t)(x >> 8) : (int64_t)((x >> 20) % 100000000);
		n = 1 + (x >> 40) % 40;
		ss_hist_add_n(&a, v, n);
		for (uint64_t k = 0; k < n; k++)
			ss_hist_add(&b, v);
		once += (double)v * (double)n;
	}
	ck_assert_uint_eq(a.count, b.count);
	ck_assert_int_eq(a.min, b.min);
	ck_assert_int_eq(a.max, b.max);
	ck_assert(memcmp(&a.sum, &b.sum, sizeof(a.sum)) == 0);
	ck_assert(a.sum > 0x1p53);
	ck_assert(once != a.sum);   /* the shortcut would not be bit for bit */
	for (int q = 0; q <= 100; q++)
		ck_assert(ss_hist_quantile(&a, q / 100.0) == ss_hist_quantile(&b, q / 100.0));
	for (unsigned g = 0; g < SS_HIST_GROUPS; g++) {
		ck_assert(a.used[g] == b.used[g]);
		if (a.used[g])
			ck_assert(memcmp(&a.group[g], &b.group[g], sizeof(a.group[g])) == 0);
	}
	ss_hist_release(&a);
	ss_hist_release(&b);
}
END_TEST

/* The dense histogram ss_hist replaced (every bucket in one array, every
 * bucket scanned): the reference its quantiles must equal bit for bit. */
struct dense_hist {
	uint64_t count;
	int64_t min, max;
	uint64_t bucket[SS_HIST_BUCKETS];
};

static void dense_add(struct dense_hist *d, int64_t v)
{
	if (d->count == 0 || v < d->min)
		d->min = v;
	if (d->count == 0 || v > d->max)
		d->max = v;
	d->count++;
	d->bucket[ss_hist_bucket((uint64_t)v)]++;
}

static double dense_mid(unsigned b)
{
	unsigned e = b >> SS_HIST_SUB_BITS;
	unsigned sub = b & ((1u << SS_HIST_SUB_BITS) - 1);

	if (e == 0)
		return (double)sub;
	return (double)(((uint64_t)(1u << SS_HIST_SUB_BITS) + sub) << (e - 1)) +
	       ((double)(1ULL << (e - 1)) - 1) / 2.0;
}

static double dense_kth(const struct dense_hist *d, uint64_t k)
{
	uint64_t seen = 0;

	for (unsigned b = 0; b < SS_HIST_BUCKETS; b++) {
		seen += d->bucket[b];
		if (seen > k) {
			double m = dense_mid(b);

			return m < (double)d->min ? (double)d->min : m > (double)d->max ? (double)d->max : m;
		}
	}
	return (double)d->max;
}

static double dense_quantile(const struct dense_hist *d, double q)
{
	double pos, frac, a;
	uint64_t lo;

	if (d->count == 0)
		return 0.0;
	pos = q * (double)(d->count - 1);
	lo = (uint64_t)pos;
	frac = pos - (double)lo;
	a = dense_kth(d, lo);
	if (frac == 0.0 || lo + 1 >= d->count)
		return a;
	return a + frac * (dense_kth(d, lo + 1) - a);
}

/* A value from a few clusters over the whole int64 range, 0 and INT64_MAX
 * included, so that many exponent groups are used and most are not. */
static int64_t spread_value(uint64_t *x)
{
	uint64_t r;

	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	r = *x >> 11;
	switch (r % 8) {
	case 0: return 0;
	case 1: return INT64_MAX - (int64_t)(r % 3);
	case 2: return (int64_t)(r % 256);                /* the exact group */
	case 3: return (int64_t)(r % 4096);
	case 4: return 20000000 + (int64_t)(r % 30000000); /* ITL-like ns */
	case 5: return (int64_t)(r >> (r % 53));           /* any magnitude */
	default: return 1000 + (int64_t)(r % 7);
	}
}

/* Storing only the groups in use (hist.h) changes no result: count, min,
 * max, mean and every quantile equal the dense reference's bit for bit,
 * for one histogram and for merges of several (merge into an empty one,
 * into a filled one, from an empty one). */
START_TEST(hist_groups_match_dense_reference)
{
	enum { PARTS = 4, N = 20000 };
	struct dense_hist *ref = calloc(1, sizeof(*ref));
	struct dense_hist *one = calloc(1, sizeof(*one));
	struct ss_hist part[PARTS], all, empty;
	uint64_t x = 42;

	ck_assert_ptr_nonnull(ref);
	ck_assert_ptr_nonnull(one);
	ck_assert_int_eq(ss_hist_init(&all), 0);
	ck_assert_int_eq(ss_hist_init(&empty), 0);
	for (int p = 0; p < PARTS; p++) {
		ck_assert_int_eq(ss_hist_init(&part[p]), 0);
		/* part p draws from a narrower mix: fewer groups per part */
		for (int i = 0; i < N / (p + 1); i++) {
			int64_t v = spread_value(&x);

			if (p > 0 && v > (INT64_C(1) << (20 + 10 * p)))
				continue;
			ss_hist_add(&part[p], v);
			dense_add(ref, v);
			if (p == 0)
				dense_add(one, v);
		}
	}
	ss_hist_merge(&all, &empty);
	ck_assert_uint_eq(all.count, 0);
	ck_assert_double_eq(ss_hist_quantile(&all, 0.5), 0.0);
	for (int p = 0; p < PARTS; p++)
		ss_hist_merge(&all, &part[p]);
	ss_hist_merge(&all, &empty);
	ck_assert_uint_eq(all.count, ref->count);
	ck_assert_int_eq(all.min, ref->min);
	ck_assert_int_eq(all.max, ref->max);
	ck_assert_int_eq(all.min, 0);
	ck_assert_int_ge(all.max, INT64_MAX - 2);
	{
		int n_used = 0;

		for (int g = 0; g < SS_HIST_GROUPS; g++)
			n_used += all.used[g];
		ck_assert_int_gt(n_used, 3);            /* many groups in use ... */
		ck_assert_int_lt(n_used, SS_HIST_GROUPS); /* ... and some not */
	}
	for (int k = 0; k <= 1000; k++) {
		double q = k / 1000.0;

		/* == on doubles: the same buckets and rule give the same bits */
		ck_assert(ss_hist_quantile(&all, q) == dense_quantile(ref, q));
		ck_assert(ss_hist_quantile(&part[0], q) == dense_quantile(one, q));
	}
	ck_assert(ss_hist_quantile(&all, 0.999999) == dense_quantile(ref, 0.999999));
	for (int p = 0; p < PARTS; p++)
		ss_hist_release(&part[p]);
	ss_hist_release(&all);
	ss_hist_release(&empty);
	ck_assert_ptr_null(all.group);
	ck_assert_uint_eq(all.count, 0);
	ss_hist_release(&all); /* released twice, and NULL: no-ops */
	ss_hist_release(NULL);
	free(ref);
	free(one);
}
END_TEST

#ifdef MAP_ANONYMOUS
/* Pages of [p, p + len) that are mapped in (written, or read once). */
static int resident_pages(const void *p, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(page - 1);
	size_t n = ((uintptr_t)p + len - a + (size_t)page - 1) / (size_t)page;
	unsigned char vec[64];
	int in = 0;

	ck_assert_uint_le(n, sizeof(vec));
	ck_assert_int_eq(mincore((void *)a, n * (size_t)page, vec), 0);
	for (size_t i = 0; i < n; i++)
		in += vec[i] & 1;
	return in;
}

/* A histogram costs memory only where it counts: values in two exponent
 * groups map in at most two pages of the 114 KiB, through add, merge and
 * quantile alike (a dense clear or scan would map all 29). */
START_TEST(hist_touches_only_used_groups)
{
	struct ss_hist a, b;

	ck_assert_int_eq(ss_hist_init(&a), 0);
	ck_assert_int_eq(ss_hist_init(&b), 0);
	ck_assert_int_eq(resident_pages(a.group, SS_HIST_BUCKET_BYTES), 0);
	for (int i = 0; i < 1000; i++)
		ss_hist_add(&a, 30000000 + 1000 * i); /* 30-31 ms in ns: group 17 */
	ss_hist_add(&a, 7);
	ss_hist_merge(&b, &a);
	ck_assert_double_eq(ss_hist_quantile(&b, 0.0), 7);
	ck_assert(ss_hist_quantile(&b, 0.99) > 3e7);
	ck_assert(ss_hist_quantile(&a, 0.5) == ss_hist_quantile(&b, 0.5));
	ck_assert_int_ge(resident_pages(a.group, SS_HIST_BUCKET_BYTES), 1);
	ck_assert_int_le(resident_pages(a.group, SS_HIST_BUCKET_BYTES), 2);
	ck_assert_int_le(resident_pages(b.group, SS_HIST_BUCKET_BYTES), 2);
	ss_hist_release(&a);
	ss_hist_release(&b);
}
END_TEST
#endif

/* Entries of dir other than . and .. */
static int n_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

START_TEST(atomic_file_never_follows_links)
{
	char dir[] = "/tmp/ss-test-file-XXXXXX", victim[64], out[64], buf[32] = "";
	struct ss_error err = { 0 };
	struct ss_file sf, sf2;
	struct stat sb;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	f = fopen(victim, "w");
	ck_assert_ptr_nonnull(f);
	fputs("precious", f);
	fclose(f);
	ck_assert_int_eq(symlink(victim, out), 0);
	/* two writers of one name at once get two temporary files */
	ck_assert_int_eq(ss_file_open(&sf, out, 0, &err), 0);
	ck_assert_int_eq(ss_file_open(&sf2, out, 0, &err), 0);
	ck_assert_str_ne(sf.tmp, sf2.tmp);
	ck_assert_ptr_nonnull(strstr(sf.tmp, "/.out."));
	ss_file_abort(&sf2);
	fputs("new", sf.f);
	ck_assert_int_eq(ss_file_commit(&sf, &err), 0);
	/* the link was replaced, its target untouched */
	ck_assert_int_eq(lstat(out, &sb), 0);
	ck_assert(S_ISREG(sb.st_mode));
	f = fopen(victim, "r");
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	ck_assert_str_eq(buf, "precious");
	ck_assert_int_eq(n_entries(dir), 2);
	/* a name that is a directory's: one clear error, nothing left */
	ck_assert_int_lt(ss_file_create(&sf, "/tmp/", &err), 0);
	ck_assert_int_eq(err.code, -EISDIR);
	unlink(out);
	unlink(victim);
	rmdir(dir);
}
END_TEST

/* A pipe (like a device) at the final name is written through, never
 * renamed over (as root that destroyed /dev/full); a writer that needs a
 * real file (ss_file_create) refuses it. */
START_TEST(atomic_file_writes_through_pipes)
{
	char dir[] = "/tmp/ss-fifo-XXXXXX", fifo[64], buf[16] = "";
	struct ss_error err = { 0 };
	struct ss_file sf;
	struct stat sb;
	int rd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/p", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	rd = open(fifo, O_RDONLY | O_NONBLOCK);   /* a reader, so opening to write does not block */
	ck_assert_int_ge(rd, 0);
	ck_assert_int_eq(ss_file_open(&sf, fifo, 0, &err), 0);
	ck_assert(sf.stream);
	fputs("through", sf.f);
	ck_assert_int_eq(ss_file_commit(&sf, &err), 0);
	ck_assert_int_eq(read(rd, buf, sizeof(buf) - 1), 7);
	ck_assert_str_eq(buf, "through");
	ck_assert_int_eq(lstat(fifo, &sb), 0);
	ck_assert(S_ISFIFO(sb.st_mode));
	ck_assert_int_lt(ss_file_create(&sf, fifo, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "is a device or a pipe"));
	ck_assert_int_eq(n_entries(dir), 1);   /* no temporary file left */
	close(rd);
	unlink(fifo);
	rmdir(dir);
}
END_TEST

/* SS_GROW: the capacity doubles from 8 (or jumps to what is needed), the
 * contents survive, the element size is the array's own, and a size that
 * does not fit size_t fails with nothing changed. */
START_TEST(grow_doubles_and_keeps_contents)
{
	int64_t *a = NULL;
	uint32_t cap = 0;
	struct big { char b[SIZE_MAX / 4]; } *huge = NULL;
	uint32_t hcap = 0;

	ck_assert_int_eq(SS_GROW(&a, &cap, cap), 0);   /* nothing needed */
	ck_assert_ptr_null(a);
	ck_assert_int_eq(SS_GROW(&a, &cap, 1), 0);
	ck_assert_uint_eq(cap, 8);
	for (int i = 0; i < 8; i++)
		a[i] = (int64_t)i << 40;
	ck_assert_int_eq(SS_GROW(&a, &cap, 8), 0);
	ck_assert_uint_eq(cap, 8);
	ck_assert_int_eq(SS_GROW(&a, &cap, 9), 0);
	ck_assert_uint_eq(cap, 16);
	ck_assert_int_eq(SS_GROW(&a, &cap, 100), 0);
	ck_assert_uint_eq(cap, 128);
	a[127] = -1;   /* the whole capacity is there (ASan, valgrind) */
	for (int i = 0; i < 8; i++)
		ck_assert(a[i] == (int64_t)i << 40);
	free(a);
	ck_assert_int_eq(SS_GROW(&huge, &hcap, 1), -ENOMEM);
	ck_assert_ptr_null(huge);
	ck_assert_uint_eq(hcap, 0);
}
END_TEST

/* After ss_heap_prefault, small blocks carved from the heap below its
 * break are already faulted in: touching them faults (almost) nothing. */
START_TEST(heap_prefault_faults_in_the_top)
{
	struct rusage a, b;
	char *blocks[2048], *probe, *top;
	size_t room, n = 0;

	if (ss_heap_prefault((size_t)1 << 20) != 0)
		return;   /* no such feature here: nothing to state */
	probe = malloc(1);
	ck_assert_ptr_nonnull(probe);
	top = sbrk(0);
	room = top > probe ? (size_t)(top - probe) : 0;
	free(probe);
	ck_assert_uint_ge(room, (size_t)64 << 10);
	ck_assert_int_eq(getrusage(RUSAGE_SELF, &a), 0);
	/* 1 KiB blocks over half of what lies below the break */
	while (n < 2048 && (n + 1) * 1100 < room / 2) {
		blocks[n] = malloc(1000);
		ck_assert_ptr_nonnull(blocks[n]);
		memset(blocks[n], 1, 1000);
		n++;
	}
	ck_assert_int_eq(getrusage(RUSAGE_SELF, &b), 0);
	ck_assert_uint_ge(n, 16);
	/* (a fault or two of the check framework's own is not the heap's) */
	ck_assert_int_le(b.ru_minflt - a.ru_minflt, 2);
	while (n)
		free(blocks[--n]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("common");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, params_name_and_values);
	tcase_add_test(tc, grow_doubles_and_keeps_contents);
	tcase_add_test(tc, atomic_file_never_follows_links);
	tcase_add_test(tc, atomic_file_writes_through_pipes);
	tcase_add_test(tc, params_errors);
	tcase_add_test(tc, params_positional_and_bare);
	tcase_add_test(tc, strict_numbers);
	tcase_add_test(tc, ranged_numbers_and_keyvals);
	tcase_add_test(tc, decimals_read_as_strtod);
	tcase_add_test(tc, line_bounded_as_bytes);
	tcase_add_test(tc, time_conversions_checked);
	tcase_add_test(tc, quantile_matches_numpy);
	tcase_add_test(tc, hist_quantiles_within_bound);
	tcase_add_test(tc, hist_small_values_exact);
	tcase_add_test(tc, hist_add_n_is_n_adds);
	tcase_add_test(tc, advise_huge_keeps_contents);
	tcase_add_test(tc, hist_groups_match_dense_reference);
#ifdef MAP_ANONYMOUS
	tcase_add_test(tc, hist_touches_only_used_groups);
	tcase_add_test(tc, heap_prefault_faults_in_the_top);
#endif
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
