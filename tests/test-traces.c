/* Trace readers: every format on good input (values checked exactly), every
 * malformed case (error line and message), detection, and -- where
 * SERVESIM_SHARED_DATA holds the real traces -- the published statistics of
 * the Azure 2023 conversation trace, its Vidur copy and Mooncake's trace. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "params.h"
#include "rng.h"
#include "workload.h"

/* ---- helpers ----------------------------------------------------------- */

/* Write text to a new temporary file; path receives its name. */
static void tmp_write(char *path, size_t len, const char *text)
{
	int fd;

	snprintf(path, len, "/tmp/ss-traces-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* Read text as fmt; must succeed. */
static void read_ok(struct workload *wl, const char *text, enum trace_format fmt)
{
	struct ss_error err = { 0 };
	char path[64];
	int rc;

	tmp_write(path, sizeof(path), text);
	workload_init(wl);
	rc = trace_read(wl, path, fmt, &err);
	unlink(path);
	ck_assert_msg(rc == 0, "read failed: %s:%ld: %s", err.file, err.line, err.msg);
}

/* Read text as fmt; must fail with -EINVAL on line, the message containing
 * want, and leave the workload empty. */
static void read_bad(const char *text, enum trace_format fmt, long line, const char *want)
{
	struct ss_error err = { 0 };
	struct workload wl;
	char path[64];
	int rc;

	tmp_write(path, sizeof(path), text);
	workload_init(&wl);
	rc = trace_read(&wl, path, fmt, &err);
	unlink(path);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_int_eq(err.code, -EINVAL);
	ck_assert_str_eq(err.file, path);
	ck_assert_msg(err.line == line, "line %ld, want %ld (%s)", err.line, line, err.msg);
	ck_assert_msg(strstr(err.msg, want), "message '%s' lacks '%s'", err.msg, want);
	ck_assert_ptr_null(wl.req);
	ck_assert_uint_eq(wl.n, 0);
	ck_assert_uint_eq(wl.n_hashes, 0);
	workload_release(&wl);
}

static enum trace_format detect(const char *text)
{
	struct ss_error err = { 0 };
	enum trace_format fmt = TRACE_AUTO;
	char path[64];
	int rc;

	tmp_write(path, sizeof(path), text);
	rc = trace_detect(path, &fmt, &err);
	unlink(path);
	ck_assert_msg(rc == 0, "detect failed: %s", err.msg);
	return fmt;
}

#define AZ_HDR "TIMESTAMP,ContextTokens,GeneratedTokens\n"

/* ---- good input -------------------------------------------------------- */

START_TEST(azure_2023_two_rows)
{
	struct workload wl;

	read_ok(&wl, AZ_HDR
		"2023-11-16 18:17:03.4799600,374,44\n"
		"2023-11-16 18:17:03.9799600,396,109\n", TRACE_AZURE);
	ck_assert_uint_eq(wl.n, 2);
	ck_assert(wl.has_arrivals);
	ck_assert_int_eq(wl.format, TRACE_AZURE);
	ck_assert_int_eq(wl.req[0].arrival_ns, 0);
	ck_assert_int_eq(wl.req[1].arrival_ns, 500000000);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 374);
	ck_assert_int_eq(wl.req[0].output_tokens, 44);
	ck_assert_int_eq(wl.req[1].prompt_tokens, 396);
	ck_assert_int_eq(wl.req[1].output_tokens, 109);
	ck_assert_int_eq(wl.req[1].tenant, 0);
	ck_assert_int_eq(wl.req[1].priority, 0);
	ck_assert_uint_eq(wl.req[1].prefix_n, 0);
	ck_assert_uint_eq(wl.hash_block_tokens, 0);
	ck_assert_ptr_nonnull(strstr(wl.source, "ss-traces-"));
	workload_release(&wl);
}
END_TEST

START_TEST(azure_2024_offsets_and_digits)
{
	struct workload wl;

	/* 0..9 fractional digits, with and without a UTC offset; the +02:00 row
	 * is 00:00:01.5 UTC */
	read_ok(&wl, AZ_HDR
		"2024-05-12 00:00:00.001163+00:00,10,2\n"
		"2024-05-12 00:00:01+00:00,20,3\n"
		"2024-05-12 02:00:01.5+02:00,30,4\n"
		"2024-05-12 00:00:02.123456789,40,5\n"
		"2024-05-12T00:00:03Z,50,6\n", TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_AZURE);
	ck_assert_uint_eq(wl.n, 5);
	ck_assert_int_eq(wl.req[0].arrival_ns, 0);
	ck_assert_int_eq(wl.req[1].arrival_ns, 998837000);
	ck_assert_int_eq(wl.req[2].arrival_ns, 1498837000);
	ck_assert_int_eq(wl.req[3].arrival_ns, 2122293789);
	ck_assert_int_eq(wl.req[4].arrival_ns, 2998837000);
	ck_assert_int_eq(wl.req[2].prompt_tokens, 30);
	workload_release(&wl);
}
END_TEST

START_TEST(azure_calendar_arithmetic)
{
	struct workload wl;

	/* across a year end, a leap day (2024-02-29) and a non-leap February */
	read_ok(&wl, AZ_HDR
		"2023-12-31 23:59:59.5,1,1\n"
		"2024-01-01 00:00:00.5,1,1\n"
		"2024-03-01 00:00:00.5,1,1\n"
		"2025-03-01 00:00:00.5,1,1\n", TRACE_AZURE);
	ck_assert_int_eq(wl.req[1].arrival_ns, 1000000000LL);
	/* Jan (31) + Feb (29) days after 2024-01-01 */
	ck_assert_int_eq(wl.req[2].arrival_ns, 1000000000LL + 60LL * 86400 * 1000000000LL);
	ck_assert_int_eq(wl.req[3].arrival_ns - wl.req[2].arrival_ns, 365LL * 86400 * 1000000000LL);
	workload_release(&wl);
}
END_TEST

START_TEST(out_of_order_rows_are_stably_sorted)
{
	struct workload wl;

	/* file order: 1.0 s, 0.5 s, 2.0 s, 0.5 s: the first row is the time
	 * origin, then the sort moves both 0.5 s rows (in file order) to 0 */
	read_ok(&wl, AZ_HDR
		"2023-11-16 00:00:01.0,1,1\n"
		"2023-11-16 00:00:00.5,2,2\n"
		"2023-11-16 00:00:02.0,3,3\n"
		"2023-11-16 00:00:00.5,4,4\n", TRACE_AZURE);
	ck_assert_uint_eq(wl.n, 4);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 2);
	ck_assert_int_eq(wl.req[1].prompt_tokens, 4);
	ck_assert_int_eq(wl.req[2].prompt_tokens, 1);
	ck_assert_int_eq(wl.req[3].prompt_tokens, 3);
	ck_assert_int_eq(wl.req[0].arrival_ns, 0);
	ck_assert_int_eq(wl.req[1].arrival_ns, 0);
	ck_assert_int_eq(wl.req[2].arrival_ns, 500000000);
	ck_assert_int_eq(wl.req[3].arrival_ns, 1500000000);
	workload_release(&wl);
}
END_TEST

START_TEST(large_shuffle_sorted_stably)
{
	/* 3,000 rows whose times cycle through 0..999 ms: many passes of the
	 * merge sort, and every time has three rows that must keep file order */
	enum { N = 3000 };
	size_t len = 64 + N * 32, off;
	char *text = malloc(len);
	struct workload wl;

	ck_assert_ptr_nonnull(text);
	off = (size_t)snprintf(text, len, "arrival_ms,prompt_tokens,output_tokens\n");
	for (int i = 0; i < N; i++)
		off += (size_t)snprintf(text + off, len - off, "%d,%d,1\n",
					(i * 7919 + 500) % 1000, i + 1);
	read_ok(&wl, text, TRACE_NATIVE);
	free(text);
	ck_assert_uint_eq(wl.n, N);
	ck_assert_int_eq(wl.req[0].arrival_ns, 0);
	for (size_t i = 1; i < wl.n; i++) {
		ck_assert_int_ge(wl.req[i].arrival_ns, wl.req[i - 1].arrival_ns);
		if (wl.req[i].arrival_ns == wl.req[i - 1].arrival_ns)
			ck_assert_int_gt(wl.req[i].prompt_tokens, wl.req[i - 1].prompt_tokens);
	}
	ck_assert_int_eq(wl.req[N - 1].arrival_ns, 999000000);
	workload_release(&wl);
}
END_TEST

START_TEST(integral_floats_and_crlf_accepted)
{
	struct workload wl;

	read_ok(&wl, AZ_HDR "2023-11-16 18:15:46.6805900,374.0,44.00\r\n"
		"2023-11-16 18:15:47.6805900, 12 ,1e1\r\n", TRACE_AZURE);
	ck_assert_uint_eq(wl.n, 2);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 374);
	ck_assert_int_eq(wl.req[0].output_tokens, 44);
	ck_assert_int_eq(wl.req[1].prompt_tokens, 12);
	ck_assert_int_eq(wl.req[1].output_tokens, 10);
	workload_release(&wl);
}
END_TEST

START_TEST(mooncake_with_hash_ids)
{
	struct workload wl;

	read_ok(&wl,
		"{\"timestamp\": 100, \"input_length\": 1000, \"output_length\": 10, \"hash_ids\": [0, 1]}\n"
		"\n"
		"{\"timestamp\": 1600, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 2, 4294967295]}\n"
		"{\"timestamp\": 1600.5, \"input_length\": 100.0, \"output_length\": 1, \"extra\": \"x\"}\n",
		TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_MOONCAKE);
	ck_assert(wl.has_arrivals);
	ck_assert_uint_eq(wl.n, 3);
	ck_assert_int_eq(wl.req[0].arrival_ns, 0);
	ck_assert_int_eq(wl.req[1].arrival_ns, 1500000000);
	ck_assert_int_eq(wl.req[2].arrival_ns, 1500500000);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 1000);
	ck_assert_int_eq(wl.req[1].output_tokens, 5);
	ck_assert_int_eq(wl.req[2].prompt_tokens, 100);
	ck_assert_uint_eq(wl.hash_block_tokens, 512);
	ck_assert_uint_eq(wl.n_hashes, 5);
	ck_assert_uint_eq(wl.req[0].prefix_off, 0);
	ck_assert_uint_eq(wl.req[0].prefix_n, 2);
	ck_assert_uint_eq(wl.req[1].prefix_off, 2);
	ck_assert_uint_eq(wl.req[1].prefix_n, 3);
	ck_assert_uint_eq(wl.req[2].prefix_n, 0);
	ck_assert_uint_eq(wl.hashes[0], 0);
	ck_assert_uint_eq(wl.hashes[1], 1);
	ck_assert_uint_eq(wl.hashes[2], 0);
	ck_assert_uint_eq(wl.hashes[3], 2);
	ck_assert_uint_eq(wl.hashes[4], 4294967295u);
	workload_release(&wl);
}
END_TEST

START_TEST(vidur_extra_columns_ignored)
{
	struct workload wl;

	read_ok(&wl, "arrived_at,num_prefill_tokens,num_decode_tokens,pd_ratio\n"
		"1.5,10,2,5.0\n"
		"2.25,20,3,x\n", TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_VIDUR);
	ck_assert_uint_eq(wl.n, 2);
	ck_assert_int_eq(wl.req[0].arrival_ns, 0);
	ck_assert_int_eq(wl.req[1].arrival_ns, 750000000);
	ck_assert_int_eq(wl.req[1].prompt_tokens, 20);
	ck_assert_int_eq(wl.req[1].output_tokens, 3);
	workload_release(&wl);
}
END_TEST

START_TEST(native_by_header_name)
{
	struct workload wl;

	/* columns in any order, optional tenant/priority, unknown columns and a
	 * quoted field with a comma ignored */
	read_ok(&wl, "request_id,prompt_tokens,arrival_ms,output_tokens,tenant,priority,note\n"
		"r0,100,10.5,5,1,-2,\"a, b\"\n"
		"r1,200,11.0,6,3,7,\n", TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_NATIVE);
	ck_assert_uint_eq(wl.n, 2);
	ck_assert_int_eq(wl.req[0].arrival_ns, 0);
	ck_assert_int_eq(wl.req[1].arrival_ns, 500000);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 100);
	ck_assert_int_eq(wl.req[0].output_tokens, 5);
	ck_assert_int_eq(wl.req[0].tenant, 1);
	ck_assert_int_eq(wl.req[0].priority, -2);
	ck_assert_int_eq(wl.req[1].tenant, 3);
	ck_assert_int_eq(wl.req[1].priority, 7);
	workload_release(&wl);

	/* no newline after the last row */
	read_ok(&wl, "arrival_ms,prompt_tokens,output_tokens\n0,1,1\n5,2,2", TRACE_NATIVE);
	ck_assert_uint_eq(wl.n, 2);
	ck_assert_int_eq(wl.req[1].arrival_ns, 5000000);
	ck_assert_int_eq(wl.req[0].tenant, 0);
	ck_assert_int_eq(wl.req[0].priority, 0);
	workload_release(&wl);
}
END_TEST

/* The documented hash of block j of declared prefix id (docs/workloads.md):
 * the upper 32 bits of splitmix64(splitmix64(id) ^ j). */
static uint32_t doc_prefix_hash(uint64_t id, uint32_t j)
{
	return (uint32_t)(ss_splitmix64(ss_splitmix64(id) ^ j) >> 32);
}

#define NATIVE_PFX_HDR "arrival_ms,prompt_tokens,output_tokens,tenant,priority,prefix_id,prefix_tokens\n"

START_TEST(native_declared_prefixes)
{
	const uint32_t *h;
	struct workload wl;

	read_ok(&wl, NATIVE_PFX_HDR
		"0,100,5,0,0,7,64\n"      /* id 7: 64 / 16 = 4 blocks */
		"1,200,5,1,0,7,40\n"      /* id 7 again: 40 / 16 = 2 blocks, the same first two */
		"2,300,5,0,0,9,64\n"      /* another id: 4 other hashes */
		"3,50,5,0,0,,\n"          /* no prefix: both empty */
		"4,50,5,0,0,-1,0\n"       /* no prefix: id -1 */
		"5,20,5,0,0,3,15\n"       /* under one block: no hash */
		"6,128,5,0,0,7,128\n"     /* id 7, 8 blocks: extends the first four */
		"7,16,5,0,0,7.0,16\n",    /* whole float id, prefix = the whole prompt */
		TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_NATIVE);
	ck_assert_uint_eq(wl.n, 8);
	ck_assert_uint_eq(wl.hash_block_tokens, 16);
	ck_assert_uint_eq(wl.req[0].prefix_n, 4);
	ck_assert_uint_eq(wl.req[1].prefix_n, 2);
	ck_assert_uint_eq(wl.req[2].prefix_n, 4);
	ck_assert_uint_eq(wl.req[3].prefix_n, 0);
	ck_assert_uint_eq(wl.req[4].prefix_n, 0);
	ck_assert_uint_eq(wl.req[5].prefix_n, 0);
	ck_assert_uint_eq(wl.req[6].prefix_n, 8);
	ck_assert_uint_eq(wl.req[7].prefix_n, 1);
	ck_assert_int_eq(wl.req[1].tenant, 1);   /* the other columns still read */
	/* every request's hashes are its id's sequence, by the documented formula */
	for (size_t i = 0; i < wl.n; i++) {
		static const uint64_t id[] = { 7, 7, 9, 0, 0, 0, 7, 7 };

		ck_assert_uint_le(wl.req[i].prefix_off + wl.req[i].prefix_n, wl.n_hashes);
		h = wl.hashes + wl.req[i].prefix_off;
		for (uint32_t j = 0; j < wl.req[i].prefix_n; j++)
			ck_assert_uint_eq(h[j], doc_prefix_hash(id[i], j));
	}
	/* equal ids share their leading hashes, different ids differ */
	for (uint32_t j = 0; j < 4; j++) {
		ck_assert_uint_eq(wl.hashes[wl.req[6].prefix_off + j],
				  wl.hashes[wl.req[0].prefix_off + j]);
		ck_assert_uint_ne(wl.hashes[wl.req[2].prefix_off + j],
				  wl.hashes[wl.req[0].prefix_off + j]);
	}
	/* one id's hashes are stored once (the longest), not per request:
	 * id 7 as 4 then 8 blocks, id 9 as 4 */
	ck_assert_uint_eq(wl.n_hashes, 4 + 4 + 8);
	workload_release(&wl);

	/* out of order: a request keeps its own prefix through the sort */
	read_ok(&wl, "arrival_ms,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n"
		"5,64,1,1,64\n0,32,1,2,32\n", TRACE_NATIVE);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 32);
	ck_assert_uint_eq(wl.req[0].prefix_n, 2);
	ck_assert_uint_eq(wl.hashes[wl.req[0].prefix_off], doc_prefix_hash(2, 0));
	ck_assert_uint_eq(wl.req[1].prefix_n, 4);
	ck_assert_uint_eq(wl.hashes[wl.req[1].prefix_off + 3], doc_prefix_hash(1, 3));
	workload_release(&wl);

	/* all seven columns, prefix columns empty (a trailing empty field too):
	 * no hashes at all */
	read_ok(&wl, NATIVE_PFX_HDR "0,10,5,2,1,,\n1,20,6,0,0,,\n", TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_NATIVE);
	ck_assert_uint_eq(wl.n, 2);
	ck_assert_int_eq(wl.req[0].tenant, 2);
	ck_assert_uint_eq(wl.n_hashes, 0);
	ck_assert_uint_eq(wl.hash_block_tokens, 0);
	ck_assert_uint_eq(wl.req[0].prefix_n, 0);
	workload_release(&wl);
}
END_TEST

START_TEST(native_many_prefix_ids)
{
	/* 2,000 rows over 700 ids, interleaved and growing: the id table is
	 * rehashed several times and every row still points at its own id's
	 * hashes, each id stored once per length increase at most */
	enum { N = 2000, IDS = 700 };
	size_t len = 64 + N * 48, off;
	char *text = malloc(len);
	struct workload wl;

	ck_assert_ptr_nonnull(text);
	off = (size_t)snprintf(text, len, "arrival_ms,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n");
	for (int i = 0; i < N; i++)
		off += (size_t)snprintf(text + off, len - off, "%d,1000,1,%d,%d\n",
					i, (i * 37) % IDS, 16 * (1 + i / IDS));
	read_ok(&wl, text, TRACE_NATIVE);
	free(text);
	ck_assert_uint_eq(wl.n, N);
	for (size_t i = 0; i < wl.n; i++) {
		const uint32_t *h = wl.hashes + wl.req[i].prefix_off;

		ck_assert_uint_eq(wl.req[i].prefix_n, 1 + i / IDS);
		for (uint32_t j = 0; j < wl.req[i].prefix_n; j++)
			ck_assert_uint_eq(h[j], doc_prefix_hash((i * 37) % IDS, j));
	}
	/* each id written at 1, 2 and (for ids seen in the last 600 rows) 3 blocks */
	ck_assert_uint_le(wl.n_hashes, IDS * (1 + 2 + 3));
	workload_release(&wl);
}
END_TEST

START_TEST(native_bad_prefixes)
{
	read_bad(NATIVE_PFX_HDR "0,100,5,0,0,1,16\n1,100,5,0,0,1,101\n", TRACE_NATIVE, 3,
		 "prefix_tokens: 101 tokens, more than the prompt's 100 (expected 0..prompt_tokens)");
	read_bad(NATIVE_PFX_HDR "0,100,5,0,0,1,-16\n", TRACE_NATIVE, 2,
		 "prefix_tokens: negative value '-16' (expected an integer >= 0)");
	read_bad(NATIVE_PFX_HDR "0,100,5,0,0,1,16\n\n0,100,5,0,0,1,16.5\n", TRACE_AUTO, 4,
		 "prefix_tokens: expected an integer, got '16.5' (not a whole number)");
	read_bad(NATIVE_PFX_HDR "0,100,5,0,0,1,lots\n", TRACE_NATIVE, 2,
		 "prefix_tokens: expected an integer, got 'lots' (non-numeric)");
	read_bad(NATIVE_PFX_HDR "0,100,5,0,0,1,\n", TRACE_NATIVE, 2,
		 "prefix_tokens: empty for prefix_id 1 (expected 0..100 tokens)");
	read_bad(NATIVE_PFX_HDR "0,100,5,0,0,,32\n", TRACE_NATIVE, 2,
		 "prefix_tokens: 32 tokens but no prefix_id");
	read_bad(NATIVE_PFX_HDR "0,100,5,0,0,sys,32\n", TRACE_NATIVE, 2,
		 "prefix_id: expected an integer >= 0 (or -1 or empty for none), got 'sys'");
	read_bad(NATIVE_PFX_HDR "0,100,5,0,0,-2,32\n", TRACE_NATIVE, 2,
		 "prefix_id: expected an integer >= 0");
	read_bad(NATIVE_PFX_HDR "0,100,5,0,0,1.5,32\n", TRACE_NATIVE, 2,
		 "prefix_id: expected an integer >= 0");
	/* one prefix column without the other is an error on the header line */
	read_bad("arrival_ms,prompt_tokens,output_tokens,prefix_id\n0,1,1,3\n", TRACE_NATIVE, 1,
		 "column 'prefix_id' without 'prefix_tokens'");
	read_bad("arrival_ms,prompt_tokens,output_tokens,prefix_tokens\n0,1,1,3\n", TRACE_AUTO, 1,
		 "column 'prefix_tokens' without 'prefix_id'");
}
END_TEST

START_TEST(lengths_only)
{
	struct workload wl;

	read_ok(&wl, "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"
		"74,918,992,0.08\n290,905,1195,0.32\n1,1,2,1\n", TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_LENGTHS);
	ck_assert(!wl.has_arrivals);
	ck_assert_uint_eq(wl.n, 3);
	for (size_t i = 0; i < wl.n; i++)
		ck_assert_int_eq(wl.req[i].arrival_ns, 0);
	/* all ties: file order kept */
	ck_assert_int_eq(wl.req[0].prompt_tokens, 74);
	ck_assert_int_eq(wl.req[1].prompt_tokens, 290);
	ck_assert_int_eq(wl.req[2].output_tokens, 1);
	workload_release(&wl);

	/* a Vidur file read as lengths ignores its times */
	read_ok(&wl, "arrived_at,num_prefill_tokens,num_decode_tokens\n3.0,5,6\n", TRACE_LENGTHS);
	ck_assert(!wl.has_arrivals);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 5);
	workload_release(&wl);
}
END_TEST

/* ---- malformed input ---------------------------------------------------- */

START_TEST(missing_required_column)
{
	read_bad("TIMESTAMP,ContextTokens\n2023-11-16 00:00:00,1\n", TRACE_AZURE, 1,
		 "missing required column 'GeneratedTokens'");
	read_bad("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n", TRACE_NATIVE, 1,
		 "missing required column 'arrival_ms'");
	read_bad("num_prefill_tokens,num_decode_tokens\n1,1\n", TRACE_VIDUR, 1,
		 "missing required column 'arrived_at'");
}
END_TEST

START_TEST(wrong_field_count)
{
	read_bad(AZ_HDR "2023-11-16 00:00:00,1,1\n2023-11-16 00:00:01,1,1,9\n", TRACE_AZURE, 3,
		 "expected 3 fields");
	/* too few fields in the middle is not a truncated last line */
	read_bad(AZ_HDR "2023-11-16 00:00:00,1\n2023-11-16 00:00:01,1,1\n", TRACE_AZURE, 2,
		 "expected 3 fields as in the header, got 2");
	{
		struct ss_error err = { 0 };
		struct workload wl;
		char path[64];

		tmp_write(path, sizeof(path), AZ_HDR "2023-11-16 00:00:00,1\n2023-11-16 00:00:01,1,1\n");
		workload_init(&wl);
		ck_assert_int_eq(trace_read(&wl, path, TRACE_AZURE, &err), -EINVAL);
		unlink(path);
		ck_assert_ptr_null(strstr(err.msg, "truncated"));
	}
}
END_TEST

START_TEST(truncated_last_line)
{
	read_bad(AZ_HDR "2023-11-16 00:00:00,1,1\n2023-11-16 00:0", TRACE_AZURE, 3,
		 "truncated last line");
	read_bad(AZ_HDR "2023-11-16 00:00:00,1,1\n2023-11-16 00:00:01,5\n\n", TRACE_AZURE, 3,
		 "truncated last line: expected 3 fields");
	read_bad("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n"
		 "{\"timestamp\": 1, \"input_len", TRACE_MOONCAKE, 2, "truncated last line");
	read_bad("arrival_ms,prompt_tokens,output_tokens,note\n0,1,1,\"unterminated", TRACE_NATIVE,
		 2, "truncated last line");
}
END_TEST

START_TEST(non_numeric_negative_and_fractions)
{
	read_bad(AZ_HDR "2023-11-16 00:00:00,abc,1\n", TRACE_AZURE, 2,
		 "ContextTokens: expected an integer, got 'abc' (non-numeric)");
	read_bad(AZ_HDR "2023-11-16 00:00:00,1,\n", TRACE_AZURE, 2, "non-numeric");
	read_bad(AZ_HDR "2023-11-16 00:00:00,1,1\n2023-11-16 00:00:00,-5,1\n", TRACE_AZURE, 3,
		 "ContextTokens: negative value '-5'");
	read_bad(AZ_HDR "2023-11-16 00:00:00,374.5,1\n", TRACE_AZURE, 2, "not a whole number");
	read_bad(AZ_HDR "2023-11-16 00:00:00,99999999999,1\n", TRACE_AZURE, 2, "out of range");
	read_bad("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n-1.5,1,1\n", TRACE_VIDUR,
		 3, "arrived_at: negative value");
	read_bad("arrived_at,num_prefill_tokens,num_decode_tokens\nsoon,1,1\n", TRACE_VIDUR, 2,
		 "arrived_at: expected a number, got 'soon'");
	read_bad("arrival_ms,prompt_tokens,output_tokens,tenant\n0,1,1,-3\n", TRACE_NATIVE, 2,
		 "tenant: negative value");
	read_bad("arrival_ms,prompt_tokens,output_tokens,priority\n0,1,1,high\n", TRACE_NATIVE, 2,
		 "priority: expected an integer");
}
END_TEST

START_TEST(zero_lengths)
{
	read_bad(AZ_HDR "2023-11-16 00:00:00,0,1\n", TRACE_AZURE, 2, "expected prompt >= 1");
	read_bad(AZ_HDR "2023-11-16 00:00:00,5,1\n2023-11-16 00:00:00,5,0\n", TRACE_AZURE, 3,
		 "expected output >= 1");
	read_bad("num_prefill_tokens,num_decode_tokens\n1,0\n", TRACE_LENGTHS, 2,
		 "num_decode_tokens: output of 0 tokens");
	read_bad("{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 1}\n", TRACE_MOONCAKE,
		 1, "expected prompt >= 1");
}
END_TEST

START_TEST(empty_and_header_only)
{
	read_bad("", TRACE_AZURE, 0, "empty file: expected a header line");
	read_bad("", TRACE_AUTO, 0, "empty file: expected a header line");
	read_bad("\n\n", TRACE_AUTO, 0, "empty file: expected a header line");
	read_bad(AZ_HDR, TRACE_AZURE, 1, "header only");
	read_bad(AZ_HDR "\n", TRACE_AUTO, 1, "header only");
	read_bad("", TRACE_MOONCAKE, 0, "empty file");
}
END_TEST

START_TEST(bad_timestamps)
{
	static const char *const bad[] = {
		"2023-13-16 00:00:00",          /* month 13 */
		"2023-02-29 00:00:00",          /* not a leap year */
		"2023-11-31 00:00:00",          /* November has 30 days */
		"2023-11-16 24:00:00",
		"2023-11-16 18:17",
		"2023-11-16 18:17:03.1234567890", /* 10 fractional digits */
		"2023-11-16 18:17:03+25:00",
		"16/11/2023 18:17:03",
		"1700000000",
		"2023-11-16 18:17:03 UTC",
	};
	char text[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), AZ_HDR "2023-11-16 00:00:00,1,1\n%s,1,1\n", bad[i]);
		read_bad(text, TRACE_AZURE, 3, "bad timestamp");
	}
}
END_TEST

START_TEST(line_numbers_count_blank_crlf_and_quoted_newlines)
{
	/* CRLF line ends; line 2 blank, a quoted field spans lines 3-4, line 5
	 * is good, line 6 is bad */
	read_bad("arrival_ms,prompt_tokens,output_tokens,note\r\n"
		 "\r\n"
		 "0,1,1,\"two\nlines\"\r\n"
		 "1,1,1,x\r\n"
		 "2,x,1,y\r\n", TRACE_NATIVE, 6, "prompt_tokens: expected an integer");
	read_bad(AZ_HDR "\n\n2023-11-16 00:00:00,1,1\n\n2023-11-16 00:00:00,1,z\n", TRACE_AZURE,
		 6, "GeneratedTokens");
}
END_TEST

START_TEST(malformed_csv_quotes)
{
	read_bad(AZ_HDR "2023-11-16 00:00:00,1\"2,1\n", TRACE_AZURE, 2, "malformed CSV");
}
END_TEST

START_TEST(mooncake_errors)
{
	read_bad("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n{oops}\n",
		 TRACE_MOONCAKE, 2, "invalid JSON");
	read_bad("{\"timestamp\": 0, \"output_length\": 1}\n", TRACE_MOONCAKE, 1,
		 "missing key 'input_length'");
	read_bad("{\"input_length\": 3, \"output_length\": 1}\n", TRACE_MOONCAKE, 1,
		 "missing key 'timestamp'");
	read_bad("{\"timestamp\": -1, \"input_length\": 3, \"output_length\": 1}\n", TRACE_MOONCAKE,
		 1, "timestamp: negative value");
	read_bad("{\"timestamp\": 0, \"input_length\": \"3\", \"output_length\": 1}\n",
		 TRACE_MOONCAKE, 1, "input_length: expected an integer");
	read_bad("{\"timestamp\": 0, \"input_length\": -3, \"output_length\": 1}\n",
		 TRACE_MOONCAKE, 1, "input_length: negative value");
	read_bad("{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1.5}\n",
		 TRACE_MOONCAKE, 1, "not a whole number");
	read_bad("{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1, \"hash_ids\": [1, -2]}\n",
		 TRACE_MOONCAKE, 1, "hash_ids[1]");
	read_bad("{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1, \"hash_ids\": 7}\n",
		 TRACE_MOONCAKE, 1, "hash_ids: expected an array");
	read_bad("[1, 2]\n", TRACE_MOONCAKE, 1, "expected a JSON object");
	read_bad(AZ_HDR "2023-11-16 00:00:00,1,1\n", TRACE_MOONCAKE, 1, "invalid JSON");
}
END_TEST

START_TEST(unreadable_files)
{
	struct ss_error err = { 0 };
	struct workload wl;
	enum trace_format fmt;
	char dir[] = "/tmp/ss-traces-dir-XXXXXX";

	workload_init(&wl);
	ck_assert_int_eq(trace_read(&wl, "/nonexistent/trace.csv", TRACE_AZURE, &err), -ENOENT);
	ck_assert_int_eq(err.code, -ENOENT);
	ck_assert_str_eq(err.file, "/nonexistent/trace.csv");
	ck_assert_ptr_nonnull(strstr(err.msg, strerror(ENOENT)));
	ck_assert_int_eq(trace_detect("/nonexistent/trace.csv", &fmt, &err), -ENOENT);
	ck_assert_int_eq(trace_read(&wl, "/nonexistent/trace.csv", TRACE_AUTO, &err), -ENOENT);

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(trace_read(&wl, dir, TRACE_AZURE, &err), -EISDIR);
	ck_assert_ptr_nonnull(strstr(err.msg, strerror(EISDIR)));
	ck_assert_int_eq(trace_read(&wl, dir, TRACE_MOONCAKE, &err), -EISDIR);
	ck_assert_int_eq(trace_detect(dir, &fmt, &err), -EISDIR);
	rmdir(dir);
	ck_assert_ptr_null(wl.req);
	ck_assert_uint_eq(wl.n, 0);
}
END_TEST

/* ---- detection and the format table ------------------------------------ */

START_TEST(detection)
{
	struct ss_error err = { 0 };
	enum trace_format fmt;
	char path[64];

	ck_assert_int_eq(detect(AZ_HDR "x\n"), TRACE_AZURE);
	ck_assert_int_eq(detect("\xef\xbb\xbf" AZ_HDR), TRACE_AZURE);
	ck_assert_int_eq(detect("  {\"timestamp\": 0}\n"), TRACE_MOONCAKE);
	ck_assert_int_eq(detect("arrived_at,num_prefill_tokens,num_decode_tokens\n"), TRACE_VIDUR);
	ck_assert_int_eq(detect("num_prefill_tokens,num_decode_tokens,pd_ratio\r\n"), TRACE_LENGTHS);
	ck_assert_int_eq(detect("request_id,arrival_ms,output_tokens,split,prompt_tokens\n"),
			 TRACE_NATIVE);
	ck_assert_int_eq(detect("\n\"arrival_ms\",\"prompt_tokens\",\"output_tokens\"\n"),
			 TRACE_NATIVE);
	ck_assert_int_eq(detect(NATIVE_PFX_HDR), TRACE_NATIVE);
	ck_assert_int_eq(detect("arrival_ms,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n"),
			 TRACE_NATIVE);
	/* prefix columns do not make another format's header native */
	ck_assert_int_eq(detect("arrived_at,num_prefill_tokens,num_decode_tokens,prefix_id,prefix_tokens\n"),
			 TRACE_VIDUR);

	tmp_write(path, sizeof(path), "\ntime,in,out\n1,2,3\n");
	ck_assert_int_eq(trace_detect(path, &fmt, &err), -EINVAL);
	ck_assert_int_eq(err.line, 2);
	ck_assert_ptr_nonnull(strstr(err.msg, "time,in,out"));
	ck_assert_ptr_nonnull(strstr(err.msg, "TIMESTAMP,ContextTokens,GeneratedTokens"));
	ck_assert_ptr_nonnull(strstr(err.msg, "arrived_at,num_prefill_tokens,num_decode_tokens"));
	ck_assert_ptr_nonnull(strstr(err.msg, "arrival_ms,prompt_tokens,output_tokens"));
	ck_assert_ptr_nonnull(strstr(err.msg, "mooncake"));
	unlink(path);
	read_bad("time,in,out\n1,2,3\n", TRACE_AUTO, 1, "unrecognized header");
}
END_TEST

START_TEST(format_table)
{
	/* traces/registry.def's order: the order detection tries them */
	static const char *const names[] = { "distserve", "llmservingsim", "bench", "mooncake",
					      "sessions", "exgentic", "azure", "native", "vidur",
					      "lengths", "llm-d" };
	const struct trace_format_info *t;
	enum trace_format fmt;
	size_t n = 0;

	for (; (t = trace_format_at(n)); n++) {
		ck_assert_uint_lt(n, 11);
		ck_assert_str_eq(t->name, names[n]);
		ck_assert_ptr_nonnull(t->description);
		ck_assert_ptr_null(strchr(t->description, '\n'));
		ck_assert_str_eq(trace_format_name(t->fmt), names[n]);
		ck_assert_int_eq(trace_format_from_name(names[n], &fmt), 0);
		ck_assert_int_eq(fmt, t->fmt);
	}
	ck_assert_uint_eq(n, 11);
	ck_assert_int_eq(trace_format_from_name("auto", &fmt), 0);
	ck_assert_int_eq(fmt, TRACE_AUTO);
	ck_assert_str_eq(trace_format_name(TRACE_AUTO), "auto");
	ck_assert_int_eq(trace_format_from_name("csv", &fmt), -EINVAL);
}
END_TEST

START_TEST(release_accepts_null_and_repeats)
{
	struct workload wl;

	workload_release(NULL);
	workload_init(&wl);
	workload_release(&wl);
	workload_release(&wl);
	ck_assert_ptr_null(wl.req);
}
END_TEST


/* ---- hostile input (issue 10 section 3) -------------------------------- */

/* Read n bytes of data as fmt; the result code, err filled. */
static int read_bytes(const void *data, size_t n, enum trace_format fmt,
		      struct workload *wl, struct ss_error *err, char *path, size_t plen)
{
	int fd, rc;

	snprintf(path, plen, "/tmp/ss-traces-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
	close(fd);
	workload_init(wl);
	rc = trace_read(wl, path, fmt, err);
	unlink(path);
	return rc;
}

START_TEST(hex_inf_nan_are_not_numbers)
{
	static const char *const bad[] = { "0x10", "0x1p4", "inf", "nan", "-inf", "infinity",
					   "1e400", "0X1A" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[256];

		snprintf(text, sizeof(text), "arrival_ms,prompt_tokens,output_tokens\n0,%s,5\n", bad[i]);
		read_bad(text, TRACE_AUTO, 2, "prompt_tokens: expected an integer");
		snprintf(text, sizeof(text), "arrival_ms,prompt_tokens,output_tokens\n%s,5,5\n", bad[i]);
		read_bad(text, TRACE_NATIVE, 2, "arrival_ms: expected a number");
		snprintf(text, sizeof(text),
			 "{\"timestamp\": 0, \"input_length\": \"%s\", \"output_length\": 1}\n", bad[i]);
		read_bad(text, TRACE_MOONCAKE, 1, "input_length");
	}
}
END_TEST

START_TEST(nul_byte_in_a_field_is_an_error)
{
	static const char native[] = "arrival_ms,prompt_tokens,output_tokens\n0,12,5\n1,1\0" "00,5\n";
	static const char header[] = "arrival_ms,prompt\0_tokens,output_tokens\n0,12,5\n";
	struct ss_error err = { 0 };
	struct workload wl;
	char path[64];
	int rc;

	rc = read_bytes(native, sizeof(native) - 1, TRACE_NATIVE, &wl, &err, path, sizeof(path));
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_str_eq(err.file, path);
	ck_assert_int_eq(err.line, 3);
	ck_assert_msg(strstr(err.msg, "NUL byte in field 2"), "%s", err.msg);
	ck_assert_uint_eq(wl.n, 0);
	err = (struct ss_error){ 0 };
	rc = read_bytes(header, sizeof(header) - 1, TRACE_NATIVE, &wl, &err, path, sizeof(path));
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_int_eq(err.line, 1);
	ck_assert_msg(strstr(err.msg, "NUL byte in field 2"), "%s", err.msg);
}
END_TEST

START_TEST(mooncake_with_bom)
{
	struct workload wl;

	read_ok(&wl, "\xef\xbb\xbf{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2}\n"
		"{\"timestamp\": 7, \"input_length\": 11, \"output_length\": 3}\n", TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_MOONCAKE);
	ck_assert_uint_eq(wl.n, 2);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 10);
	ck_assert_int_eq(wl.req[1].arrival_ns, 2000000);
	workload_release(&wl);
	read_ok(&wl, "\xef\xbb\xbf{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2}\n",
		TRACE_MOONCAKE);
	ck_assert_uint_eq(wl.n, 1);
	workload_release(&wl);
	/* only at the start of the file */
	read_bad("{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2}\n"
		 "\xef\xbb\xbf{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2}\n",
		 TRACE_MOONCAKE, 2, "invalid JSON");
}
END_TEST

/* A stream without newlines is refused after SS_LINE_MAX bytes, in every
 * reader and in detection, instead of being read until memory runs out. */
START_TEST(endless_line_is_an_error)
{
	size_t n = 3 * (size_t)SS_LINE_MAX;
	char *buf = malloc(n);
	static const enum trace_format fmts[] = { TRACE_AUTO, TRACE_NATIVE, TRACE_MOONCAKE,
						  TRACE_AZURE };

	ck_assert_ptr_nonnull(buf);
	for (size_t k = 0; k < sizeof(fmts) / sizeof(fmts[0]); k++) {
		struct ss_error err = { 0 };
		struct workload wl;
		char path[64];
		int rc;

		memset(buf, 0, n);      /* like /dev/zero */
		rc = read_bytes(buf, n, fmts[k], &wl, &err, path, sizeof(path));
		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_int_eq(err.line, 1);
		ck_assert_msg(strstr(err.msg, "line longer than 1048576 bytes"), "%d: %s",
			      (int)fmts[k], err.msg);
		/* a long line after good ones: its own number */
		memset(buf, 'x', n);
		memcpy(buf, "arrival_ms,prompt_tokens,output_tokens\n0,1,1\n",
		       strlen("arrival_ms,prompt_tokens,output_tokens\n0,1,1\n"));
		err = (struct ss_error){ 0 };
		rc = read_bytes(buf, n, fmts[k] == TRACE_MOONCAKE ? TRACE_NATIVE : fmts[k], &wl,
				&err, path, sizeof(path));
		ck_assert_int_eq(rc, -EINVAL);
		if (fmts[k] != TRACE_AZURE) {
			ck_assert_int_eq(err.line, 3);
			ck_assert_msg(strstr(err.msg, "line longer than"), "%s", err.msg);
		}
	}
	free(buf);
}
END_TEST

/* Format detection on a pipe: the peeked bytes go to the reader, so
 * --trace /dev/stdin works (nothing can be reopened or rewound). */
START_TEST(detection_on_a_pipe)
{
	static const char *const texts[] = {
		"\n\narrival_ms,prompt_tokens,output_tokens\n0,10,2\n1.5,20,3\n",
		"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\n"
		"{\"timestamp\": 1.5, \"input_length\": 20, \"output_length\": 3}",
	};

	for (size_t k = 0; k < 2; k++) {
		struct ss_error err = { 0 };
		struct workload wl;
		char path[64];
		int fds[2];
		pid_t pid;
		int rc;

		ck_assert_int_eq(pipe(fds), 0);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			close(fds[0]);
			if (write(fds[1], texts[k], strlen(texts[k])) != (ssize_t)strlen(texts[k]))
				_exit(1);
			_exit(0);
		}
		close(fds[1]);
		snprintf(path, sizeof(path), "/dev/fd/%d", fds[0]);
		workload_init(&wl);
		rc = trace_read(&wl, path, TRACE_AUTO, &err);
		close(fds[0]);
		waitpid(pid, NULL, 0);
		ck_assert_msg(rc == 0, "%s", err.msg);
		ck_assert_int_eq(wl.format, k ? TRACE_MOONCAKE : TRACE_NATIVE);
		ck_assert_uint_eq(wl.n, 2);
		ck_assert_int_eq(wl.req[1].prompt_tokens, 20);
		ck_assert_int_eq(wl.req[1].arrival_ns, 1500000);
		workload_release(&wl);
	}
}
END_TEST

/* ---- real data ---------------------------------------------------------- */

static const char *shared;

static void shared_path(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/traces/%s", shared, rel);
}

static void read_shared(struct workload *wl, const char *rel, enum trace_format fmt)
{
	struct ss_error err = { 0 };
	char path[4096];
	int rc;

	shared_path(path, sizeof(path), rel);
	workload_init(wl);
	rc = trace_read(wl, path, fmt, &err);
	ck_assert_msg(rc == 0, "%s:%ld: %s", err.file, err.line, err.msg);
}

START_TEST(real_azure_conv)
{
	struct workload wl;
	double sp = 0, so = 0;

	read_shared(&wl, "azure_llm_2023/AzureLLMInferenceTrace_conv.csv", TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_AZURE);
	ck_assert_uint_eq(wl.n, 19366);
	for (size_t i = 0; i < wl.n; i++) {
		sp += wl.req[i].prompt_tokens;
		so += wl.req[i].output_tokens;
		if (i)
			ck_assert_int_ge(wl.req[i].arrival_ns, wl.req[i - 1].arrival_ns);
	}
	/* PROVENANCE.md: mean context 1155, generated 211, 3,502 s */
	ck_assert_double_eq_tol(sp / wl.n, 1155, 1);
	ck_assert_double_eq_tol(so / wl.n, 211, 1);
	ck_assert_double_eq_tol(wl.req[wl.n - 1].arrival_ns * 1e-9, 3502, 1);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 374);
	ck_assert_int_eq(wl.req[1].arrival_ns, 4314579000LL);
	workload_release(&wl);
}
END_TEST

START_TEST(real_vidur_copy_matches_azure)
{
	struct workload az, vi;

	read_shared(&az, "azure_llm_2023/AzureLLMInferenceTrace_conv.csv", TRACE_AZURE);
	read_shared(&vi, "length_distributions/vidur_splitwise_conv.csv", TRACE_AUTO);
	ck_assert_int_eq(vi.format, TRACE_VIDUR);
	ck_assert_uint_eq(vi.n, az.n);
	for (size_t i = 0; i < az.n; i++) {
		ck_assert_int_eq(vi.req[i].prompt_tokens, az.req[i].prompt_tokens);
		ck_assert_int_eq(vi.req[i].output_tokens, az.req[i].output_tokens);
		/* Vidur rounds seconds to 6 digits: within 1 us */
		ck_assert_int_le(llabs(vi.req[i].arrival_ns - az.req[i].arrival_ns), 1000);
	}
	workload_release(&az);
	workload_release(&vi);
}
END_TEST

START_TEST(real_mooncake_conversation)
{
	struct workload wl;
	double si = 0, so = 0;

	read_shared(&wl, "mooncake_fast25/conversation_trace.jsonl", TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_MOONCAKE);
	ck_assert_uint_eq(wl.n, 12031);
	for (size_t i = 0; i < wl.n; i++) {
		si += wl.req[i].prompt_tokens;
		so += wl.req[i].output_tokens;
		ck_assert_uint_le((size_t)wl.req[i].prefix_off + wl.req[i].prefix_n, wl.n_hashes);
	}
	/* PROVENANCE.md: mean input 12,035, mean output 343, 3,537 s */
	ck_assert_double_eq_tol(si / wl.n, 12035, 1);
	ck_assert_double_eq_tol(so / wl.n, 343, 1);
	ck_assert_double_eq_tol(wl.req[wl.n - 1].arrival_ns * 1e-9, 3537, 1);
	ck_assert_uint_eq(wl.hash_block_tokens, 512);
	ck_assert_uint_gt(wl.n_hashes, wl.n);
	/* 512-token blocks: a request's hash count covers its prompt */
	ck_assert_uint_eq(wl.req[0].prefix_n, (uint32_t)((wl.req[0].prompt_tokens + 511) / 512));
	workload_release(&wl);
}
END_TEST

START_TEST(real_azure_2024_subset_as_native)
{
	struct workload wl;

	read_shared(&wl, "azure_llm_2024_subset/azure_llm_code_v3_1024.csv", TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_NATIVE);
	ck_assert_uint_eq(wl.n, 1024);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 1911);
	ck_assert_int_eq(wl.req[0].output_tokens, 8);
	ck_assert_int_eq(wl.req[1].arrival_ns, 233880000);
	/* 350.8 s from the first to the last request */
	ck_assert_double_eq_tol(wl.req[wl.n - 1].arrival_ns * 1e-9, 350.8, 0.1);
	workload_release(&wl);
}
END_TEST

START_TEST(real_lengths_only)
{
	struct workload wl;

	read_shared(&wl, "length_distributions/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
		    TRACE_AUTO);
	ck_assert_int_eq(wl.format, TRACE_LENGTHS);
	ck_assert(!wl.has_arrivals);
	ck_assert_uint_eq(wl.n, 30731);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 74);
	ck_assert_int_eq(wl.req[0].output_tokens, 918);
	workload_release(&wl);
}
END_TEST

/* data/traces/azure_conv_2000.csv (shipped with servesim) is the first 2,000
 * rows of the shared conversation trace. */
START_TEST(real_shipped_subset_is_a_prefix)
{
	struct ss_error err = { 0 };
	struct workload az, sub;
	const char *data = getenv("SERVESIM_DATA");
	char path[4096];

	if (!data)
		return;
	snprintf(path, sizeof(path), "%s/traces/azure_conv_2000.csv", data);
	workload_init(&sub);
	ck_assert_msg(trace_read(&sub, path, TRACE_AUTO, &err) == 0, "%s", err.msg);
	read_shared(&az, "azure_llm_2023/AzureLLMInferenceTrace_conv.csv", TRACE_AZURE);
	ck_assert_uint_eq(sub.n, 2000);
	for (size_t i = 0; i < sub.n; i++) {
		ck_assert_int_eq(sub.req[i].arrival_ns, az.req[i].arrival_ns);
		ck_assert_int_eq(sub.req[i].prompt_tokens, az.req[i].prompt_tokens);
		ck_assert_int_eq(sub.req[i].output_tokens, az.req[i].output_tokens);
	}
	workload_release(&az);
	workload_release(&sub);
}
END_TEST

static bool shared_present(void)
{
	char path[4096];
	struct stat st;

	shared = getenv("SERVESIM_SHARED_DATA");
	if (!shared)
		return false;
	shared_path(path, sizeof(path), "azure_llm_2023/AzureLLMInferenceTrace_conv.csv");
	return stat(path, &st) == 0;
}

static Suite *readers_suite(void)
{
	Suite *s = suite_create("traces");
	TCase *tc = tcase_create("readers");

	tcase_add_test(tc, azure_2023_two_rows);
	tcase_add_test(tc, azure_2024_offsets_and_digits);
	tcase_add_test(tc, azure_calendar_arithmetic);
	tcase_add_test(tc, out_of_order_rows_are_stably_sorted);
	tcase_add_test(tc, large_shuffle_sorted_stably);
	tcase_add_test(tc, integral_floats_and_crlf_accepted);
	tcase_add_test(tc, mooncake_with_hash_ids);
	tcase_add_test(tc, vidur_extra_columns_ignored);
	tcase_add_test(tc, native_by_header_name);
	tcase_add_test(tc, native_declared_prefixes);
	tcase_add_test(tc, native_many_prefix_ids);
	tcase_add_test(tc, native_bad_prefixes);
	tcase_add_test(tc, lengths_only);
	tcase_add_test(tc, missing_required_column);
	tcase_add_test(tc, wrong_field_count);
	tcase_add_test(tc, truncated_last_line);
	tcase_add_test(tc, non_numeric_negative_and_fractions);
	tcase_add_test(tc, zero_lengths);
	tcase_add_test(tc, empty_and_header_only);
	tcase_add_test(tc, bad_timestamps);
	tcase_add_test(tc, hex_inf_nan_are_not_numbers);
	tcase_add_test(tc, nul_byte_in_a_field_is_an_error);
	tcase_add_test(tc, mooncake_with_bom);
	tcase_add_test(tc, endless_line_is_an_error);
	tcase_add_test(tc, detection_on_a_pipe);
	tcase_add_test(tc, line_numbers_count_blank_crlf_and_quoted_newlines);
	tcase_add_test(tc, malformed_csv_quotes);
	tcase_add_test(tc, mooncake_errors);
	tcase_add_test(tc, unreadable_files);
	tcase_add_test(tc, detection);
	tcase_add_test(tc, format_table);
	tcase_add_test(tc, release_accepts_null_and_repeats);
	suite_add_tcase(s, tc);
	return s;
}

/* Real traces from SERVESIM_SHARED_DATA (run as `test-traces real`). */
static Suite *real_data_suite(void)
{
	Suite *s = suite_create("traces-real-data");
	TCase *td = tcase_create("real-data");

	tcase_add_test(td, real_azure_conv);
	tcase_add_test(td, real_vidur_copy_matches_azure);
	tcase_add_test(td, real_mooncake_conversation);
	tcase_add_test(td, real_azure_2024_subset_as_native);
	tcase_add_test(td, real_lengths_only);
	tcase_add_test(td, real_shipped_subset_is_a_prefix);
	suite_add_tcase(s, td);
	return s;
}

/* `test-traces` runs the reader tests on synthetic files; `test-traces
 * real` runs the real-trace tests and exits 77 (skipped) without the data. */
int main(int argc, char **argv)
{
	bool real = argc > 1 && strcmp(argv[1], "real") == 0;
	SRunner *sr;
	int failed;

	if (real && !shared_present()) {
		fprintf(stderr, "SERVESIM_SHARED_DATA does not hold the traces: skipped\n");
		return 77;
	}
	sr = srunner_create(real ? real_data_suite() : readers_suite());

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
