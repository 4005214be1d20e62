/* servesim — serving benchmark result readers (traces/serving.h): each
 * format on good input (fixtures in tests/data/serving, the real files in
 * SERVESIM_SHARED_DATA with `test-serving real`) and on malformed input,
 * format detection, and replay as a trace. */
#include <check.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serving.h"
#include "workload.h"

static const char *fixture(const char *name)
{
	static char p[2048];
	const char *d = getenv("SERVESIM_TEST_DATA");

	snprintf(p, sizeof(p), "%s/serving/%s", d ? d : "tests/data", name);
	return p;
}

static void read_fixture(struct serving_set *s, const char *name, enum serving_format fmt)
{
	struct ss_error err = { 0 };
	int rc;

	serving_set_init(s);
	rc = serving_read(s, fixture(name), fmt, &err);
	ck_assert_msg(rc == 0, "%s: %s", name, err.msg);
}

/* Write text (len bytes) to a scratch file called name and read it. */
static int read_text(const char *name, const char *text, size_t len, enum serving_format fmt,
		     struct serving_set *s, struct ss_error *err)
{
	char dir[] = "/tmp/ss-serving-XXXXXX", path[256];
	FILE *f;
	int rc;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	fclose(f);
	serving_set_init(s);
	*err = (struct ss_error){ 0 };
	rc = serving_read(s, path, fmt, err);
	unlink(path);
	rmdir(dir);
	return rc;
}

/* A malformed input: rejected with -EINVAL-like code, a message holding
 * want, at line `line` (0: any), and an empty set. */
static void bad(const char *name, const char *text, size_t len, enum serving_format fmt,
		long line, const char *want)
{
	struct serving_set s;
	struct ss_error err;
	int rc = read_text(name, text, len, fmt, &s, &err);

	ck_assert_msg(rc < 0, "accepted %s: %.60s", name, text);
	ck_assert_msg(strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
	if (line)
		ck_assert_int_eq(err.line, line);
	ck_assert_str_ne(err.file, "");
	ck_assert_uint_eq(s.n, 0);
	serving_set_release(&s);
}

#define BAD(name, text, fmt, line, want) bad(name, text, sizeof(text) - 1, fmt, line, want)

/* ---- good input -------------------------------------------------------- */

START_TEST(vllm_result)
{
	struct serving_set s;
	const struct serving_run *r;

	read_fixture(&s, "vllm-bench.json", SERVING_AUTO);
	ck_assert_int_eq(s.format, SERVING_BENCH);
	ck_assert_uint_eq(s.n, 1);
	r = &s.run[0];
	ck_assert_str_eq(r->engine, "vllm");
	ck_assert_str_eq(r->model, "meta-llama/Llama-3.1-8B-Instruct");
	ck_assert_int_eq(r->load, SERVING_LOAD_OPEN);
	ck_assert_double_eq(r->request_rate, 4.0);
	ck_assert_int_eq(r->concurrency, 0);
	ck_assert_int_eq(r->duration_ns, 2500000000);
	ck_assert_int_eq(r->mean_ttft_ns, 50000000);
	ck_assert_int_eq(r->p99_ttft_ns, 79400000);
	ck_assert_uint_eq(r->n_req, 4);
	ck_assert_uint_eq(r->n_failed, 1);
	/* start_times 1000.5, 1000.25, 1001.0, 1001.5 -> from the earliest */
	ck_assert_int_eq(r->req[0].issue_ns, 250000000);
	ck_assert_int_eq(r->req[1].issue_ns, 0);
	ck_assert_int_eq(r->req[3].issue_ns, 1250000000);
	ck_assert_int_eq(r->req[0].prompt_tokens, 100);
	ck_assert_int_eq(r->req[0].output_tokens, 3);
	ck_assert_int_eq(r->req[0].ttft_ns, 40000000);
	/* gaps 20 + 22 ms over 2 tokens after the first */
	ck_assert_uint_eq(r->req[0].itl_n, 2);
	ck_assert_int_eq(r->itl_ns[r->req[0].itl_off + 1], 22000000);
	ck_assert_int_eq(r->req[0].tpot_ns, 21000000);
	ck_assert_int_eq(r->req[0].e2e_ns, 82000000);
	/* one output token: no TPOT, E2E = TTFT */
	ck_assert_int_eq(r->req[1].tpot_ns, SERVING_NONE);
	ck_assert_int_eq(r->req[1].e2e_ns, 30000000);
	ck_assert_uint_eq(r->req[2].itl_n, 4);
	ck_assert(!r->req[3].ok);
	ck_assert_int_eq(r->req[3].ttft_ns, SERVING_NONE);
	serving_set_release(&s);
}
END_TEST

START_TEST(vllm_indented_closed_loop)
{
	struct serving_set s;
	const struct serving_run *r;

	read_fixture(&s, "vllm-closed.json", SERVING_AUTO);
	ck_assert_uint_eq(s.n, 1);
	r = &s.run[0];
	ck_assert_str_eq(r->engine, "");        /* an OpenAI client: engine unknown */
	ck_assert_str_eq(r->label, "openai");
	ck_assert_int_eq(r->load, SERVING_LOAD_CLOSED);
	ck_assert_int_eq(r->concurrency, 2);
	ck_assert(isinf(r->request_rate));
	ck_assert_uint_eq(r->n_req, 2);
	ck_assert_int_eq(r->req[1].prompt_tokens, 20);
	ck_assert_int_eq(r->req[1].tpot_ns, 6000000);
	serving_set_release(&s);
}
END_TEST

START_TEST(sglang_jsonl)
{
	struct serving_set s;

	read_fixture(&s, "sglang.jsonl", SERVING_AUTO);
	ck_assert_int_eq(s.format, SERVING_BENCH);
	ck_assert_uint_eq(s.n, 2);
	ck_assert_str_eq(s.run[0].engine, "sglang");
	ck_assert_int_eq(s.run[0].line, 1);
	ck_assert(isinf(s.run[0].request_rate));         /* Python's Infinity */
	ck_assert_int_eq(s.run[0].load, SERVING_LOAD_CLOSED);
	ck_assert_int_eq(s.run[0].concurrency, 8);
	ck_assert_uint_eq(s.run[0].n_req, 2);
	ck_assert(s.run[0].req[1].ok);                   /* errors: null */
	ck_assert_int_eq(s.run[0].req[0].tpot_ns, 4000000);
	/* the second line: aggregates only */
	ck_assert_int_eq(s.run[1].line, 2);
	ck_assert_uint_eq(s.run[1].n_req, 0);
	ck_assert_double_eq(s.run[1].request_rate, 2.5);
	ck_assert_int_eq(s.run[1].load, SERVING_LOAD_OPEN);
	ck_assert_int_eq(s.run[1].mean_tpot_ns, 6000000);
	serving_set_release(&s);
}
END_TEST

START_TEST(llmd_csv)
{
	struct serving_set s;
	const struct serving_run *r;

	read_fixture(&s, "LMBench_sharegpt_output_0.5.csv", SERVING_AUTO);
	ck_assert_int_eq(s.format, SERVING_LLMD);
	r = &s.run[0];
	ck_assert_double_eq(r->request_rate, 0.5);       /* from the file name */
	ck_assert_uint_eq(r->n_req, 2);
	ck_assert_int_eq(r->req[0].prompt_tokens, 689);
	ck_assert_int_eq(r->req[1].prompt_tokens, 543);  /* "543.0" */
	ck_assert_int_eq(r->req[0].ttft_ns, 250000000);
	ck_assert_int_eq(r->req[1].issue_ns, 2000000000);
	/* epoch seconds near 1.7e9 hold ~0.2 us: 1 us tolerance */
	ck_assert_int_lt(llabs(r->req[0].e2e_ns - 13950000000), 1000);
	/* generation_time 13.7 s over 274 tokens after the first */
	ck_assert_int_eq(r->req[0].tpot_ns, 50000000);
	ck_assert_int_eq(r->req[1].tpot_ns, SERVING_NONE);
	serving_set_release(&s);
}
END_TEST

START_TEST(distserve_exp)
{
	struct serving_set s;
	const struct serving_run *r;

	read_fixture(&s, "distserve-c21d11-2-1.5.exp", SERVING_AUTO);
	ck_assert_int_eq(s.format, SERVING_DISTSERVE);
	r = &s.run[0];
	ck_assert_str_eq(r->engine, "distserve");
	ck_assert_str_eq(r->mode, "c21d11");
	ck_assert_double_eq(r->request_rate, 1.5);
	ck_assert_uint_eq(r->n_req, 2);
	ck_assert_int_eq(r->req[0].issue_ns, 1000000000);
	ck_assert_int_eq(r->req[1].issue_ns, 0);
	ck_assert_int_eq(r->req[0].ttft_ns, 100000000);
	ck_assert_int_eq(r->req[0].tpot_ns, 25000000);
	ck_assert_int_eq(r->req[1].tpot_ns, SERVING_NONE);
	ck_assert_int_eq(r->req[0].e2e_ns, 175000000);
	/* the summary block after the list */
	ck_assert_int_eq(r->duration_ns, 1250500000);
	ck_assert_int_eq(r->mean_ttft_ns, 175000000);
	serving_set_release(&s);
}
END_TEST

START_TEST(distserve_workload_json)
{
	static const char txt[] = "[{\"prompt_len\": 5, \"output_len\": 2, \"start_time\": 0.0}, "
				  "{\"prompt_len\": 7, \"output_len\": 3, \"start_time\": 0.5}]";
	struct serving_set s;
	struct ss_error err;

	ck_assert_int_eq(read_text("vllm-2-2.exp", txt, sizeof(txt) - 1, SERVING_AUTO, &s, &err), 0);
	ck_assert_str_eq(s.run[0].engine, "vllm");
	ck_assert_int_eq(s.run[0].req[1].issue_ns, 500000000);
	ck_assert_int_eq(s.run[0].req[1].ttft_ns, SERVING_NONE);
	serving_set_release(&s);
}
END_TEST

START_TEST(llmservingsim)
{
	struct serving_set s;
	const struct serving_run *r;

	read_fixture(&s, "llmservingsim/requests.jsonl", SERVING_AUTO);
	ck_assert_int_eq(s.format, SERVING_LLMSERVINGSIM);
	r = &s.run[0];
	ck_assert_str_eq(r->engine, "vllm");
	ck_assert_str_eq(r->engine_version, "0.19.0");      /* meta.json */
	ck_assert_str_eq(r->model, "meta-llama/Llama-3.1-8B");
	ck_assert_str_eq(r->gpu, "NVIDIA GeForce RTX 4090");
	ck_assert_int_eq(r->tp, 1);
	ck_assert_int_eq(r->max_num_seqs, 256);
	ck_assert_int_eq(r->max_num_batched_tokens, 2048);
	ck_assert_int_eq(r->num_gpu_blocks, 2588);
	ck_assert_int_eq(r->block_size, 16);
	ck_assert_uint_eq(r->n_req, 2);
	ck_assert_int_eq(r->req[0].issue_ns, 250000000);
	/* engine-side: first_token_ts - queued_ts */
	ck_assert_int_eq(r->req[0].ttft_ns, 500000000);
	ck_assert_int_eq(r->req[1].ttft_ns, 750000000);
	ck_assert_int_eq(r->req[0].tpot_ns, 20000000);      /* 10.6 s / 530 */
	ck_assert_int_eq(r->req[0].e2e_ns, 11100000000);
	serving_set_release(&s);
}
END_TEST

START_TEST(splitwise_table)
{
	struct serving_set s;
	const struct serving_run *r;

	read_fixture(&s, "splitwise.csv", SERVING_AUTO);
	ck_assert_int_eq(s.format, SERVING_SPLITWISE);
	ck_assert_uint_eq(s.n, 2);
	r = &s.run[0];
	ck_assert_int_eq(r->load, SERVING_LOAD_STATIC);
	ck_assert_str_eq(r->model, "llama2-70b");
	ck_assert_str_eq(r->gpu, "a100-80gb");
	ck_assert_int_eq(r->tp, 2);
	ck_assert_int_eq(r->concurrency, 1);
	ck_assert_int_eq(r->isl, 512);
	ck_assert_int_eq(r->osl, 128);
	ck_assert_int_eq(r->prompt_ns, 196250000);
	ck_assert_int_eq(r->token_ns, 54875000);
	ck_assert_int_eq(r->e2e_ns, 7168500000);
	ck_assert_double_eq_tol(r->avg_power, 0.73599375, 1e-12);
	ck_assert_int_eq(r->line, 2);
	ck_assert_int_eq(s.run[1].e2e_ns, SERVING_NONE);    /* empty e2e_time */
	ck_assert_int_eq(s.run[1].tp, 8);
	ck_assert_uint_eq(s.run[1].n_req, 0);
	serving_set_release(&s);
}
END_TEST

START_TEST(silicon_table)
{
	struct serving_set s;
	const struct serving_run *r;

	read_fixture(&s, "silicon.csv", SERVING_AUTO);
	ck_assert_int_eq(s.format, SERVING_SILICON);
	ck_assert_uint_eq(s.n, 2);
	r = &s.run[0];
	ck_assert_int_eq(r->load, SERVING_LOAD_CLOSED);
	ck_assert_str_eq(r->engine, "vllm");
	ck_assert_str_eq(r->engine_version, "0.11.0");
	ck_assert_str_eq(r->gpu, "h100_sxm");
	ck_assert_str_eq(r->label, "llama_h100_vllm_agg_c16");
	ck_assert_int_eq(r->tp, 2);
	ck_assert_int_eq(r->concurrency, 16);
	ck_assert_int_eq(r->isl, 1024);
	ck_assert_int_eq(r->osl, 128);
	ck_assert_int_eq(r->mean_ttft_ns, 120500000);
	ck_assert_int_eq(r->mean_tpot_ns, 9250000);
	r = &s.run[1];
	ck_assert_str_eq(r->mode, "disagg");
	ck_assert_int_eq(r->tp, 0);
	ck_assert_int_eq(r->prefill.tp, 4);
	ck_assert_int_eq(r->decode.tp, 8);
	ck_assert_int_eq(r->decode.workers, 2);
	ck_assert_int_eq(r->prefill.workers, 1);
	ck_assert_int_eq(r->prefill.batch, 8);
	ck_assert_int_eq(r->decode.batch, 64);
	ck_assert_int_eq(r->decode.attn_dp, 1);
	ck_assert_int_eq(r->decode.moe_ep, 0);   /* empty */
	ck_assert_int_eq(r->concurrency, 64);   /* silicon_concurrency= in the source column */
	serving_set_release(&s);
}
END_TEST

START_TEST(run_stats)
{
	struct serving_set s;
	struct serving_stats st;

	read_fixture(&s, "vllm-bench.json", SERVING_AUTO);
	ck_assert_int_eq(serving_run_stats(&s.run[0], &st), 0);
	ck_assert_uint_eq(st.n, 3);     /* the failed request is not counted */
	/* TTFT 40, 30, 80 ms: linear interpolation between ranks */
	ck_assert_double_eq_tol(st.ttft_ms[SERVING_MEAN], 50, 1e-9);
	ck_assert_double_eq_tol(st.ttft_ms[SERVING_P50], 40, 1e-9);
	ck_assert_double_eq_tol(st.ttft_ms[SERVING_P90], 72, 1e-9);
	ck_assert_double_eq_tol(st.ttft_ms[SERVING_P99], 79.2, 1e-9);
	/* TPOT of the two multi-token requests: 42/2 and 84/4 ms */
	ck_assert_double_eq_tol(st.tpot_ms[SERVING_P50], 21, 1e-9);
	/* gaps 20, 22, 20, 20, 20, 24 ms */
	ck_assert_double_eq_tol(st.itl_ms[SERVING_MEAN], 21, 1e-9);
	ck_assert_double_eq_tol(st.itl_ms[SERVING_P90], 23, 1e-9);
	ck_assert_double_eq_tol(st.itl_ms[SERVING_P99], 23.9, 1e-9);
	ck_assert_double_eq_tol(st.e2e_ms[SERVING_MEAN], (82 + 30 + 164) / 3.0, 1e-9);
	/* 3 requests, 9 output tokens in the reported 2.5 s */
	ck_assert_double_eq_tol(st.requests_per_s, 1.2, 1e-12);
	ck_assert_double_eq_tol(st.output_tokens_per_s, 3.6, 1e-12);
	serving_set_release(&s);

	read_fixture(&s, "llmservingsim/requests.jsonl", SERVING_AUTO);
	ck_assert_int_eq(serving_run_stats(&s.run[0], &st), 0);
	ck_assert(isnan(st.itl_ms[SERVING_P50]));       /* no gaps recorded */
	/* no duration: first send (0) to last finish (0.25 + 11.1 s) */
	ck_assert_double_eq_tol(st.duration_s, 11.35, 1e-9);
	ck_assert_double_eq_tol(st.requests_per_s, 2 / 11.35, 1e-9);
	serving_set_release(&s);
}
END_TEST

/* A UTF-8 byte order mark before a CSV header or a JSON result. */
START_TEST(byte_order_mark)
{
	static const char csv[] = "\xef\xbb\xbfprompt_tokens,generation_tokens,ttft,generation_time,launch_time,finish_time\r\n"
				  "5,2,0.1,0.1,10,11\r\n";
	static const char json[] = "\xef\xbb\xbf{\"input_lens\": [3], \"output_lens\": [1], \"ttfts\": [0.5]}";
	struct serving_set s;
	struct ss_error err;

	ck_assert_msg(read_text("a.csv", csv, sizeof(csv) - 1, SERVING_AUTO, &s, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(s.format, SERVING_LLMD);
	ck_assert_int_eq(s.run[0].req[0].prompt_tokens, 5);
	ck_assert_int_eq(s.run[0].req[0].e2e_ns, 1000000000);
	serving_set_release(&s);
	ck_assert_msg(read_text("a.json", json, sizeof(json) - 1, SERVING_AUTO, &s, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(s.run[0].req[0].ttft_ns, 500000000);
	serving_set_release(&s);
}
END_TEST

/* A run held in memory (an SGLang file holds several) as a workload. */
START_TEST(run_workload)
{
	struct serving_set s;
	struct workload wl;
	struct ss_error err = { 0 };

	read_fixture(&s, "vllm-bench.json", SERVING_AUTO);
	workload_init(&wl);
	ck_assert_msg(serving_run_workload(&wl, &s.run[0], &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(wl.n, 3);
	ck_assert(wl.has_arrivals);
	ck_assert_int_eq(wl.req[0].prompt_tokens, 200);     /* sent first */
	ck_assert_int_eq(wl.req[0].arrival_ns, 0);
	ck_assert_int_eq(wl.req[2].arrival_ns, 750000000);
	ck_assert_uint_eq(wl.failed_skipped, 1);
	ck_assert_int_eq(wl.format, TRACE_BENCH);
	workload_release(&wl);
	serving_set_release(&s);

	read_fixture(&s, "sglang.jsonl", SERVING_AUTO);
	workload_init(&wl);
	ck_assert_int_eq(serving_run_workload(&wl, &s.run[0], &err), 0);
	ck_assert(!wl.has_arrivals);                        /* no send times */
	ck_assert_uint_eq(wl.closed_loop_clients, 8);
	ck_assert(isinf(wl.source_rate));
	ck_assert_int_eq(wl.req[1].output_tokens, 1);       /* the run's order */
	workload_release(&wl);
	workload_init(&wl);
	ck_assert_int_eq(serving_run_workload(&wl, &s.run[1], &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "no per-request records"));
	ck_assert_uint_eq(wl.n, 0);
	serving_set_release(&s);
}
END_TEST

START_TEST(format_names)
{
	enum serving_format f;

	ck_assert_int_eq(serving_format_from_name("llm-d", &f), 0);
	ck_assert_int_eq(f, SERVING_LLMD);
	ck_assert_str_eq(serving_format_name(SERVING_SILICON), "silicon");
	ck_assert_int_eq(serving_format_from_name("nim", &f), 0);
	ck_assert_int_eq(f, SERVING_NIM);
	ck_assert_int_eq(serving_format_from_name("gpustack", &f), 0);
	ck_assert_int_eq(f, SERVING_GPUSTACK);
	ck_assert_int_eq(serving_format_from_name("xml", &f), -EINVAL);
	ck_assert(serving_format_per_request(SERVING_BENCH));
	ck_assert(!serving_format_per_request(SERVING_SPLITWISE));
}
END_TEST

/* ---- malformed input --------------------------------------------------- */

START_TEST(bench_malformed)
{
	enum serving_format B = SERVING_BENCH;

	BAD("r.json", "{\"input_lens\": [1, 2], \"output_lens\": [1", B, 1, "invalid JSON");
	BAD("r.json", "{\"input_lens\": [1], \"output_lens\": [1]}", B, 1, "ttfts: missing");
	BAD("r.json", "{\"input_lens\": [1, 2], \"output_lens\": [1], \"ttfts\": [0.1, 0.1]}", B, 1,
	    "output_lens: 1 entries (expected 2");
	BAD("r.json", "{\"input_lens\": [\"10\"], \"output_lens\": [1], \"ttfts\": [0.1]}", B, 1,
	    "input_lens[0]: expected a token count, got string");
	BAD("r.json", "{\"input_lens\": [-3], \"output_lens\": [1], \"ttfts\": [0.1]}", B, 1,
	    "input_lens[0]: expected a whole number of tokens from 0 to 2147483647, got -3");
	BAD("r.json", "{\"input_lens\": [1e300], \"output_lens\": [1], \"ttfts\": [0.1]}", B, 1,
	    "input_lens[0]: expected a whole number");
	BAD("r.json", "{\"input_lens\": [1], \"output_lens\": [1], \"ttfts\": [-0.1]}", B, 1,
	    "ttfts[0]: expected a duration from 0");
	BAD("r.json", "{\"input_lens\": [1], \"output_lens\": [1], \"ttfts\": [NaN]}", B, 1,
	    "ttfts[0]: expected a duration (s), got string");
	BAD("r.json", "{\"input_lens\": [1], \"output_lens\": [1], \"ttfts\": [1e300]}", B, 1,
	    "ttfts[0]: expected a duration from 0");
	BAD("r.json", "{\"input_lens\": [1], \"output_lens\": [2], \"ttfts\": [0.1], \"itls\": [0.1]}",
	    B, 1, "itls[0]: expected an array");
	BAD("r.json", "{\"input_lens\": [1], \"output_lens\": [2], \"ttfts\": [0.1], \"start_times\": [1e300]}",
	    B, 1, "start_times[0]: expected a time stamp");
	BAD("r.json", "{\"request_rate\": -1, \"mean_ttft_ms\": 1}", B, 1, "request_rate: expected a rate > 0");
	BAD("r.json", "{\"request_rate\": -Infinity, \"mean_ttft_ms\": 1}", B, 1, "invalid JSON");
	BAD("r.json", "{\"backend\": \"vllm\"}", B, 1, "neither per-request arrays");
	BAD("r.json", "{\"mean_ttft_ms\": \"12\"}", B, 1, "mean_ttft_ms: expected a duration (ms), got string");
	BAD("r.json", "{\"mean_ttft_ms\": 1, \"p99_tpot_ms\": -2}", B, 1, "p99_tpot_ms: expected a duration from 0");
	BAD("r.json", "[1, 2]", B, 1, "expected a JSON object");
	BAD("r.json", "{\"mean_ttft_ms\": 1}\n{\"mean_ttft_ms\": 2}\n{oops}\n", B, 3, "invalid JSON");
	BAD("r.json", "{\"mean_ttft_ms\": 1}\n\n\0{}", B, 3, "NUL byte");
	BAD("r.json", "   \n ", B, 0, "empty file");
}
END_TEST

START_TEST(distserve_malformed)
{
	enum serving_format D = SERVING_DISTSERVE;

	BAD("vllm-1-1.exp", "[{'prompt_len': 5, 'output_len': 2, 'issue_time': None}]", D, 1,
	    "not a list of dicts of numbers");
	BAD("vllm-1-1.exp", "[{'prompt_len': 5, 'output_len': 2, 'issue_time': \"1\"}]", D, 1,
	    "unexpected '\"'");
	BAD("vllm-1-1.exp", "[{'prompt len': 5}]", D, 1, "unexpected ' '");
	BAD("vllm-1-1.exp", "[{'prompt_len': 5, 'output_len': 2}]", D, 1,
	    "[0].start_time: expected a time stamp in seconds, got nothing");
	BAD("vllm-1-1.exp", "[{'prompt_len': -5, 'output_len': 2, 'issue_time': 1}]", D, 1,
	    "[0].prompt_len: expected a whole number");
	BAD("vllm-1-1.exp", "[{'prompt_len': 5, 'output_len': 2, 'issue_time': 1, 'ttft_ms': -1}]", D, 1,
	    "[0].ttft_ms: expected a duration");
	BAD("vllm-1-1.exp", "[{'prompt_len': 5, 'output_len': 2, 'issue_time': 1", D, 1,
	    "not a list of dicts of numbers");
	BAD("vllm-1-1.exp", "[]", D, 1, "expected a non-empty list");
	BAD("vllm-1-1.exp", "[1]", D, 1, "[0]: expected a dict");
	BAD("vllm-1-1.exp", "[{'prompt_len': 5, 'output_len': 2, 'issue_time': 1}]\n{\n\tavg_ttft_ms: x\n}\n",
	    D, 3, "avg_ttft_ms: expected a number >= 0");
	{
		/* CRLF line ends in the summary */
		static const char crlf[] = "[{'prompt_len': 5, 'output_len': 2, 'issue_time': 1}]\r\n{\r\n\tavg_ttft_ms: 1.5\r\n}\r\n";
		struct serving_set s;
		struct ss_error err;

		ck_assert_msg(read_text("vllm-1-1.exp", crlf, sizeof(crlf) - 1, D, &s, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(s.run[0].mean_ttft_ns, 1500000);
		serving_set_release(&s);
	}
	BAD("vllm-1-1.exp", "[{'prompt_len': 5, 'output_len': 2, 'issue_time': 1}]\n{\n\tavg_ttft_ms: 1\n",
	    D, 3, "truncated summary block");
	BAD("vllm-1-1.exp", "[{'prompt_len': 5, 'output_len': 2, 'issue_time': 1}]\nimport os\n",
	    D, 2, "unexpected text after the request list");
	BAD("vllm-1-1.exp", "[{'prompt_len': 5, 'output_len': 2, 'issue_time': 1\0}]", D, 1, "NUL byte");
}
END_TEST

START_TEST(llmservingsim_malformed)
{
	enum serving_format L = SERVING_LLMSERVINGSIM;
	static const char ok[] = "{\"input_toks\": 5, \"output_toks\": 2, \"arrival_time\": 1, "
				 "\"queued_ts\": 1, \"first_token_ts\": 2, \"last_token_ts\": 3}\n";

	BAD("requests.jsonl", "{\"input_toks\": 5, \"output_toks\": 2, \"arrival_time\": 1, "
	    "\"queued_ts\": 3, \"first_token_ts\": 2, \"last_token_ts\": 3}\n", L, 1,
	    "expected queued_ts <= first_token_ts");
	BAD("requests.jsonl", "{\"input_toks\": 5.5, \"output_toks\": 2}\n", L, 1,
	    "input_toks: expected a whole number");
	BAD("requests.jsonl", "\n{\"input_toks\": 5, \"output_toks\": 2, \"arrival_time\": \"now\"}\n", L, 2,
	    "arrival_time: expected a time stamp in seconds, got string");
	{
		char txt[512];

		snprintf(txt, sizeof(txt), "%s{\"input_toks\": 5", ok);
		bad("requests.jsonl", txt, strlen(txt), L, 2, "truncated last line: invalid JSON");
	}
	BAD("requests.jsonl", "\n\n", L, 0, "empty file");
}
END_TEST

/* tests/data/serving/nim.csv: three rows of the NIM GenAI-Perf sweep as
 * they are (NOTICE) */
START_TEST(nim_table)
{
	struct serving_set s;
	const struct serving_run *r;

	read_fixture(&s, "nim.csv", SERVING_AUTO);
	ck_assert_int_eq(s.format, SERVING_NIM);
	ck_assert(!serving_format_per_request(SERVING_NIM));
	ck_assert_uint_eq(s.n, 3);
	r = &s.run[0];
	ck_assert_int_eq(r->load, SERVING_LOAD_CLOSED);
	ck_assert_str_eq(r->engine, "trtllm");
	ck_assert_str_eq(r->model, "meta-llama3-8b-instruct");
	ck_assert_str_eq(r->gpu, "H100_80GB_HBM3");
	ck_assert_str_eq(r->precision, "fp16");
	ck_assert_int_eq(r->tp, 1);
	ck_assert_int_eq(r->concurrency, 1);
	ck_assert_int_eq(r->isl, 2000);
	ck_assert_int_eq(r->osl, 2000);
	ck_assert_int_eq(r->line, 2);
	/* nanoseconds as the file gives them, rounded to whole ns */
	ck_assert_int_eq(r->mean_ttft_ns, 53856408);
	ck_assert_int_eq(r->p95_ttft_ns, 55763250);
	ck_assert_int_eq(r->mean_tpot_ns, 8035369);   /* GenAI-Perf's per-request ITL */
	ck_assert_int_eq(r->p95_e2e_ns, 16124050720);
	ck_assert_int_eq(s.run[1].concurrency, 2);
	ck_assert_str_eq(s.run[1].gpu, "A100-SXM4-80GB");
	ck_assert_int_eq(s.run[2].tp, 4);
	ck_assert_str_eq(s.run[2].precision, "fp8");
	serving_set_release(&s);
}
END_TEST

/* tests/data/serving/gpustack.csv: five rows of the GPUStack performance
 * lab as they are (NOTICE) */
START_TEST(gpustack_table)
{
	struct serving_set s;
	const struct serving_run *r;

	read_fixture(&s, "gpustack.csv", SERVING_AUTO);
	ck_assert_int_eq(s.format, SERVING_GPUSTACK);
	ck_assert_uint_eq(s.n, 5);
	r = &s.run[0];
	ck_assert_str_eq(r->engine, "vllm");
	ck_assert_str_eq(r->engine_version, "0.11.0");
	ck_assert_str_eq(r->model, "Qwen/Qwen3-8B");
	ck_assert_int_eq(r->load, SERVING_LOAD_CLOSED);
	ck_assert_int_eq(r->concurrency, 1);
	ck_assert_int_eq(r->num_prompts, 100);
	ck_assert_int_eq(r->tp, 1);
	ck_assert_int_eq(r->isl, 233);          /* 232.6 mean tokens */
	ck_assert_int_eq(r->osl, 221);
	ck_assert(r->mean_lengths);             /* ShareGPT */
	ck_assert_int_eq(r->median_ttft_ns, 60380000);
	ck_assert_int_eq(r->median_tpot_ns, 7220000);
	ck_assert_int_eq(r->p99_itl_ns, 8170000);
	ck_assert_int_eq(r->mean_e2e_ns, SERVING_NONE);   /* E2E is empty in every row */
	ck_assert(!r->speculative);
	ck_assert_str_eq(s.run[1].engine, "sglang");
	ck_assert_str_eq(s.run[1].engine_version, "0.5.3.post3");
	ck_assert_int_eq(s.run[1].concurrency, 4);
	ck_assert_str_eq(s.run[2].engine, "trtllm");
	ck_assert_str_eq(s.run[2].engine_version, "1.2.0rc1");
	r = &s.run[3];                          /* a burst on "A single NVIDIA A100 SXM GPU." */
	ck_assert_int_eq(r->load, SERVING_LOAD_OPEN);
	ck_assert(isinf(r->request_rate));
	ck_assert_int_eq(r->num_prompts, 1000);
	ck_assert_str_eq(r->gpu, "A100 SXM 80GB");
	ck_assert(s.run[4].speculative);
	ck_assert_str_eq(s.run[4].precision, "fp8");   /* Qwen/Qwen3-8B-FP8 */
	serving_set_release(&s);
}
END_TEST

/* serve_cmd's parallelism in each engine's spelling; a label that
 * overrides a flag is read after the command */
START_TEST(gpustack_serve_cmd)
{
	static const char hdr[] = "engine,engine_versions_page,hardware,model_page,serve_cmd,load,"
				  "dataset,mean_in_tokens,mean_out_tokens,ttft_p50_ms,label,"
				  "label_overrides_flag\n";
	static const struct { const char *cmd; int tp, dp, pp, ep; } cases[] = {
		{ "vllm serve m -tp 4", 4, 0, 0, 0 },
		{ "vllm serve m --tensor-parallel-size=2 --enable-expert-parallel", 2, 0, 0, 2 },
		{ "python3 -m sglang.launch_server --model-path m --tp-size 8 --ep-size 8", 8, 0, 0, 8 },
		{ "sglang --tp 2 --dp 2", 2, 2, 0, 0 },
		{ "trtllm-serve m --tp_size 4 --pp_size 2", 4, 0, 2, 0 },
		{ "vllm serve m", 1, 0, 0, 0 },
	};
	char txt[1024];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct serving_set s;
		struct ss_error err;

		snprintf(txt, sizeof(txt), "%svLLM,vLLM v0.17.1,H100,m,%s,\"closed-loop, max "
			 "concurrency 2, 10 prompts\",random,100,10,5,,no\n", hdr, cases[i].cmd);
		ck_assert_int_eq(read_text("g.csv", txt, strlen(txt), SERVING_AUTO, &s, &err), 0);
		ck_assert_msg(s.run[0].tp == cases[i].tp && s.run[0].dp == cases[i].dp &&
			      s.run[0].pp == cases[i].pp && s.run[0].moe_ep == cases[i].ep,
			      "%s: tp %d dp %d pp %d ep %d", cases[i].cmd, s.run[0].tp, s.run[0].dp,
			      s.run[0].pp, s.run[0].moe_ep);
		ck_assert(!s.run[0].mean_lengths);   /* vLLM's random dataset: fixed */
		ck_assert_str_eq(s.run[0].engine_version, "0.17.1");
		serving_set_release(&s);
	}
	snprintf(txt, sizeof(txt), "%sSGLang,,H100,m,sglang --tp 2,\"closed-loop, max concurrency 2, "
		 "10 prompts\",ShareGPT,100,10,5,--speculative-algorithm EAGLE3,yes\n", hdr);
	{
		struct serving_set s;
		struct ss_error err;

		ck_assert_int_eq(read_text("g.csv", txt, strlen(txt), SERVING_AUTO, &s, &err), 0);
		ck_assert(s.run[0].speculative);
		ck_assert_str_eq(s.run[0].engine_version, "");
		serving_set_release(&s);
	}
}
END_TEST

/* tests/data/serving/trtllm-static.csv: four rows of TensorRT-LLM 0.9's
 * static-batch table as they are (NOTICE), the last one without latencies */
START_TEST(trtllm_static_table)
{
	struct serving_set s;
	const struct serving_run *r;

	read_fixture(&s, "trtllm-static.csv", SERVING_AUTO);
	ck_assert_int_eq(s.format, SERVING_TRTLLM_STATIC);
	ck_assert_uint_eq(s.n, 4);
	r = &s.run[0];
	ck_assert_int_eq(r->load, SERVING_LOAD_STATIC);
	ck_assert_str_eq(r->engine, "trtllm");
	ck_assert_str_eq(r->model, "LLaMA v2 7B");
	ck_assert_str_eq(r->gpu, "H100 80GB HBM3");
	ck_assert_str_eq(r->precision, "fp8");
	ck_assert_int_eq(r->concurrency, 1);
	ck_assert_int_eq(r->isl, 128);
	ck_assert_int_eq(r->osl, 128);
	ck_assert_int_eq(r->prompt_ns, 6360000);
	ck_assert_int_eq(r->e2e_ns, 526760000);
	r = &s.run[1];
	ck_assert_str_eq(r->precision, "fp16");          /* "Mixed" */
	ck_assert_int_eq(r->tp, 4);
	ck_assert_int_eq(r->isl, 2048);
	ck_assert_int_eq(r->osl, 128);
	ck_assert_int_eq(s.run[3].prompt_ns, SERVING_NONE);   /* empty: absent */
	serving_set_release(&s);
}
END_TEST

START_TEST(csv_malformed)
{
	static const char hdr[] = "prompt_tokens,generation_tokens,ttft,generation_time,launch_time,finish_time\n";
	char txt[512];

	BAD("LMBench_x_qps1.csv", "prompt_tokens,generation_tokens,ttft,launch_time\n1,1,1,1\n",
	    SERVING_LLMD, 1, "missing required column 'generation_time'");
	snprintf(txt, sizeof(txt), "%s1,2,0.1,0.1,5,6\n1,2,0.1\n", hdr);
	bad("a.csv", txt, strlen(txt), SERVING_LLMD, 3, "expected 6 fields as in the header, got 3");
	snprintf(txt, sizeof(txt), "%s1,2,-0.1,0.1,5,6\n", hdr);
	bad("a.csv", txt, strlen(txt), SERVING_LLMD, 2, "ttft: expected a number from 0");
	snprintf(txt, sizeof(txt), "%s1,2,nan,0.1,5,6\n", hdr);
	bad("a.csv", txt, strlen(txt), SERVING_LLMD, 2, "ttft: expected a number, got 'nan'");
	snprintf(txt, sizeof(txt), "%s1,2,0.1,0.1,5,4\n", hdr);
	bad("a.csv", txt, strlen(txt), SERVING_LLMD, 2, "finish_time 4 before launch_time 5");
	snprintf(txt, sizeof(txt), "%s1,99999999999,0.1,0.1,5,6\n", hdr);
	bad("a.csv", txt, strlen(txt), SERVING_LLMD, 2, "generation_tokens: expected a number from 0 to 2.14748e+09");
	snprintf(txt, sizeof(txt), "%s1,2.5,0.1,0.1,5,6\n", hdr);
	bad("a.csv", txt, strlen(txt), SERVING_LLMD, 2, "generation_tokens: expected a whole number");
	snprintf(txt, sizeof(txt), "%s1,2,\"0.1,0.1,5,6\n", hdr);
	bad("a.csv", txt, strlen(txt), SERVING_LLMD, 2, "unterminated quoted field");
	snprintf(txt, sizeof(txt), "%s1,2,0.1x,0.1,5,6\n", hdr);
	txt[strlen(hdr) + 8] = '\0';
	bad("a.csv", txt, strlen(hdr) + 19, SERVING_LLMD, 2, "NUL byte");
	BAD("a.csv", "prompt_tokens,generation_tokens,ttft,generation_time,launch_time,finish_time\n",
	    SERVING_LLMD, 1, "header only");
	BAD("s.csv", "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,tensor_parallel\n"
	    "m,g,512,0,1,1,1,2\n", SERVING_SPLITWISE, 2, "batch_size: expected a number from 1");
	BAD("s.csv", "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,tensor_parallel\n"
	    "m,g,512,1,1,1,1e300,2\n", SERVING_SPLITWISE, 2, "token_time: expected a number from 0");
	BAD("s.csv", "backend,model_path,system,isl,osl,batch_size,silicon_ttft_ms,silicon_tpot_ms\n"
	    ",m,g,1,1,1,1,1\n", SERVING_SILICON, 2, "expected backend, model_path and system");
	BAD("s.csv", "backend,model_path,system,isl,osl,batch_size,silicon_ttft_ms,silicon_tpot_ms\n"
	    "vllm,m,g,1,1,1,,1\n", SERVING_SILICON, 2, "silicon_ttft_ms: expected a number, got ''");
	BAD("s.csv", "backend,model_path,system,isl,osl,batch_size,silicon_ttft_ms,silicon_tpot_ms\n"
	    "vllm,m,g,1,1,c4,1,1\n", SERVING_SILICON, 2, "batch_size: expected a number, got 'c4'");
	BAD("s.csv", "a,b\n1,2\n", SERVING_AUTO, 1, "unrecognized result");
	/* NIM: units, lengths, required columns */
	BAD("n.csv", "task_inputs-model,task_inputs-GPU,task_inputs-n_gpus,task_inputs-precision,"
	    "input_config-concurrency,input_config-synthetic_input_tokens_mean,"
	    "input_config-output_tokens_mean,time_to_first_token-unit,time_to_first_token-avg,"
	    "inter_token_latency-unit,inter_token_latency-avg,request_latency-unit,request_latency-avg\n"
	    "m,g,1,fp16,1,200,200,ns,1,ns,1,hours,1\n", SERVING_AUTO, 2,
	    "request_latency-unit: expected ns, us, ms or s, got 'hours'");
	BAD("n.csv", "task_inputs-model,task_inputs-GPU,task_inputs-n_gpus,task_inputs-precision,"
	    "input_config-concurrency,input_config-synthetic_input_tokens_mean,"
	    "input_config-output_tokens_mean,time_to_first_token-unit,time_to_first_token-avg,"
	    "inter_token_latency-unit,inter_token_latency-avg,request_latency-unit,request_latency-avg\n"
	    "m,g,0,fp16,1,200,200,ns,1,ns,1,ns,1\n", SERVING_AUTO, 2,
	    "task_inputs-n_gpus: expected a number from 1");
	BAD("n.csv", "task_inputs-model,task_inputs-GPU,task_inputs-n_gpus,task_inputs-precision,"
	    "input_config-concurrency,input_config-synthetic_input_tokens_mean,"
	    "input_config-output_tokens_mean,time_to_first_token-unit,time_to_first_token-avg,"
	    "input_config-synthetic_input_tokens_stddev,inter_token_latency-unit,inter_token_latency-avg,"
	    "request_latency-unit,request_latency-avg\n"
	    "m,g,1,fp16,1,200,200,ns,1,50,ns,1,ns,1\n", SERVING_AUTO, 2,
	    "input_config-synthetic_input_tokens_stddev: expected 0");
	BAD("n.csv", "task_inputs-model,task_inputs-GPU,task_inputs-n_gpus,task_inputs-precision,"
	    "input_config-concurrency,input_config-synthetic_input_tokens_mean,"
	    "input_config-output_tokens_mean,time_to_first_token-unit,time_to_first_token-avg\n"
	    "m,g,1,fp16,1,200,200,ns,1\n", SERVING_NIM, 1,
	    "missing required column 'inter_token_latency-unit'");
	/* TensorRT-LLM static table: lengths, precision */
	BAD("t.csv", "Model,GPU,Batch Size,Input/Output Lengths,Tensor Model Parallel Size,Precision,"
	    "1st Token Latency (ms),Token-to-token Latency (ms)\n"
	    "m,g,1,\"128,128\",1,FP8,1,1\nm,g,1,128,1,FP8,1,1\n", SERVING_AUTO, 3,
	    "Input/Output Lengths: expected \"ISL,OSL\" (two whole numbers from 1), got '128'");
	BAD("t.csv", "Model,GPU,Batch Size,Input/Output Lengths,Tensor Model Parallel Size,Precision,"
	    "1st Token Latency (ms),Token-to-token Latency (ms)\n"
	    "m,g,1,\"128,128\",1,INT4,1,1\n", SERVING_AUTO, 2, "Precision: expected FP8 or Mixed, got 'INT4'");
	/* GPUStack: engine, load, serve_cmd */
	BAD("g.csv", "engine,engine_versions_page,hardware,model_page,serve_cmd,load,dataset,"
	    "mean_in_tokens,mean_out_tokens,ttft_p50_ms\n"
	    "vLLM,,H100,m,vllm serve m,\"closed-loop, max concurrency 2, 10 prompts\",x,1,1,5\n"
	    "Ollama,,H100,m,ollama,\"closed-loop, max concurrency 2, 10 prompts\",x,1,1,5\n",
	    SERVING_AUTO, 3, "engine: expected vLLM, SGLang or TensorRT-LLM, got 'Ollama'");
	BAD("g.csv", "engine,engine_versions_page,hardware,model_page,serve_cmd,load,dataset,"
	    "mean_in_tokens,mean_out_tokens,ttft_p50_ms\n"
	    "vLLM,,H100,m,vllm serve m,poisson 5,x,1,1,5\n", SERVING_AUTO, 2,
	    "load: expected 'closed-loop, max concurrency C, N prompts' or");
	BAD("g.csv", "engine,engine_versions_page,hardware,model_page,serve_cmd,load,dataset,"
	    "mean_in_tokens,mean_out_tokens,ttft_p50_ms\n"
	    "vLLM,,H100,m,vllm serve m -tp four,\"closed-loop, max concurrency 2, 10 prompts\",x,1,1,5\n",
	    SERVING_AUTO, 2, "serve_cmd: -tp: expected a whole number from 1 to 1024, got 'four'");
	BAD("g.csv", "engine,engine_versions_page,hardware,model_page,serve_cmd,load,dataset,"
	    "mean_in_tokens,mean_out_tokens,ttft_p50_ms\n"
	    "vLLM,,H100,m,vllm serve m,\"closed-loop, max concurrency 2, 10 prompts\",x,1,1,-5\n",
	    SERVING_AUTO, 2, "ttft_p50_ms: expected a number from 0");
	/* a quoted field across lines is shown on one line */
	snprintf(txt, sizeof(txt), "%s1,2,\"0.1\nx\",0.1,5,6\n", hdr);
	bad("a.csv", txt, strlen(txt), SERVING_LLMD, 2, "ttft: expected a number, got '0.1?x'");
}
END_TEST

/* A stream that is one line of a megabyte: bounded, not read forever. */
START_TEST(csv_long_line)
{
	size_t n = (1u << 20) + 100;
	char *txt = malloc(n + 1);

	memcpy(txt, "prompt_tokens,generation_tokens,ttft,generation_time,launch_time,finish_time\n", 77);
	memset(txt + 77, '1', n - 77);
	txt[n] = '\0';
	bad("a.csv", txt, n, SERVING_LLMD, 0, "longer than");
	free(txt);
}
END_TEST

/* ---- replay as a trace ------------------------------------------------- */

START_TEST(replay_vllm)
{
	struct workload wl;
	struct ss_error err = { 0 };

	workload_init(&wl);
	ck_assert_msg(trace_read(&wl, fixture("vllm-bench.json"), TRACE_AUTO, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(wl.format, TRACE_BENCH);
	ck_assert(wl.has_arrivals);
	ck_assert_uint_eq(wl.n, 3);            /* the failed request is left out */
	ck_assert_uint_eq(wl.failed_skipped, 1);
	ck_assert_double_eq(wl.source_rate, 4.0);
	ck_assert_uint_eq(wl.closed_loop_clients, 0);
	/* sorted by issue time: 1000.25 (200), 1000.5 (100), 1001.0 (300) */
	ck_assert_int_eq(wl.req[0].prompt_tokens, 200);
	ck_assert_int_eq(wl.req[0].arrival_ns, 0);
	ck_assert_int_eq(wl.req[1].prompt_tokens, 100);
	ck_assert_int_eq(wl.req[1].arrival_ns, 250000000);
	ck_assert_int_eq(wl.req[2].arrival_ns, 750000000);
	ck_assert_int_eq(wl.req[2].output_tokens, 5);
	workload_release(&wl);
}
END_TEST

START_TEST(replay_formats)
{
	static const struct { const char *name; enum trace_format fmt; size_t n; uint32_t clients; } c[] = {
		{ "vllm-closed.json", TRACE_BENCH, 2, 2 },
		{ "LMBench_sharegpt_output_0.5.csv", TRACE_LLMD, 2, 0 },
		{ "distserve-c21d11-2-1.5.exp", TRACE_DISTSERVE, 2, 0 },
		{ "llmservingsim/requests.jsonl", TRACE_LLMSERVINGSIM, 2, 0 },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct workload wl;
		struct ss_error err = { 0 };

		workload_init(&wl);
		ck_assert_msg(trace_read(&wl, fixture(c[i].name), TRACE_AUTO, &err) == 0, "%s: %s",
			      c[i].name, err.msg);
		ck_assert_int_eq(wl.format, c[i].fmt);
		ck_assert_uint_eq(wl.n, c[i].n);
		ck_assert_uint_eq(wl.closed_loop_clients, c[i].clients);
		ck_assert(wl.has_arrivals);
		workload_release(&wl);
	}
}
END_TEST

START_TEST(replay_refusals)
{
	struct workload wl;
	struct ss_error err = { 0 };

	workload_init(&wl);
	ck_assert_int_eq(trace_read(&wl, fixture("sglang.jsonl"), TRACE_AUTO, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "2 benchmark results in one file"));
	ck_assert_int_eq(trace_read(&wl, fixture("silicon.csv"), TRACE_AUTO, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "no requests to replay"));
	ck_assert_int_eq(trace_read(&wl, fixture("splitwise.csv"), TRACE_AUTO, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "no requests to replay"));
	ck_assert_uint_eq(wl.n, 0);
}
END_TEST

/* ---- real data --------------------------------------------------------- */

static const char *shared;

static size_t read_glob(const char *pattern, enum serving_format want, size_t *runs, size_t *reqs)
{
	char pat[2048];
	glob_t g;
	size_t n = 0;

	snprintf(pat, sizeof(pat), "%s/serving/%s", shared, pattern);
	if (glob(pat, 0, NULL, &g))
		return 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		struct serving_set s;
		struct ss_error err = { 0 };

		serving_set_init(&s);
		ck_assert_msg(serving_read(&s, g.gl_pathv[i], SERVING_AUTO, &err) == 0, "%s: %s",
			      g.gl_pathv[i], err.msg);
		ck_assert_int_eq(s.format, want);
		*runs += s.n;
		for (size_t j = 0; j < s.n; j++)
			*reqs += s.run[j].n_req;
		serving_set_release(&s);
		n++;
	}
	globfree(&g);
	return n;
}

START_TEST(real_tables)
{
	size_t runs = 0, reqs = 0;

	/* row counts from ../shared/data/serving/PROVENANCE.md */
	ck_assert_uint_eq(read_glob("aiconfigurator_silicon/silicon_sample_excl_h200.csv",
				    SERVING_SILICON, &runs, &reqs), 1);
	ck_assert_uint_eq(runs, 4254);
	{
		/* the 1418 disaggregated rows take their concurrency from
		 * silicon_concurrency=; 7 name none (load unknown) */
		char path[2048];
		struct serving_set s;
		struct ss_error err = { 0 };
		size_t unknown = 0;

		snprintf(path, sizeof(path), "%s/serving/aiconfigurator_silicon/silicon_sample_excl_h200.csv",
			 shared);
		serving_set_init(&s);
		ck_assert_int_eq(serving_read(&s, path, SERVING_SILICON, &err), 0);
		for (size_t i = 0; i < s.n; i++)
			unknown += s.run[i].load == SERVING_LOAD_UNKNOWN;
		ck_assert_uint_eq(unknown, 7);
		serving_set_release(&s);
	}
	runs = 0;
	ck_assert_uint_eq(read_glob("splitwise_a100/perf_model_a100.csv", SERVING_SPLITWISE,
				    &runs, &reqs), 1);
	ck_assert_uint_eq(runs, 420);
	ck_assert_uint_eq(reqs, 0);
	/* detected from their headers (read_glob reads with SERVING_AUTO); row counts from their PROVENANCE.md */
	runs = 0;
	ck_assert_uint_eq(read_glob("nim/nim_genaiperf_dli_llama3.csv", SERVING_NIM, &runs, &reqs), 1);
	ck_assert_uint_eq(runs, 787);
	runs = 0;
	ck_assert_uint_eq(read_glob("gpustack/gpustack_perflab_vllm_bench.csv", SERVING_GPUSTACK, &runs,
				    &reqs), 1);
	ck_assert_uint_eq(runs, 251);
	runs = 0;
	ck_assert_uint_eq(read_glob("trtllm_tables/trtllm_0_9_0_static_dli.csv", SERVING_TRTLLM_STATIC,
				    &runs, &reqs), 1);
	ck_assert_uint_eq(runs, 2551);
	ck_assert_uint_eq(reqs, 0);
}
END_TEST

START_TEST(real_per_request)
{
	size_t runs = 0, reqs = 0, files;

	files = read_glob("distserve_alignment/*/*.exp", SERVING_DISTSERVE, &runs, &reqs);
	ck_assert_uint_eq(files, 74);
	ck_assert_uint_eq(runs, 74);
	runs = reqs = 0;
	files = read_glob("llm_d_benchmark/data/*/*/*.csv", SERVING_LLMD, &runs, &reqs);
	ck_assert_uint_eq(files, 184);
	runs = reqs = 0;
	files = read_glob("llmservingsim_bench/bench/examples/*/*/vllm/requests.jsonl",
			  SERVING_LLMSERVINGSIM, &runs, &reqs);
	ck_assert_uint_eq(files, 4);
	ck_assert_uint_eq(reqs, 4 * 300);    /* 4 runs x 300 requests */
}
END_TEST

/* The vLLM OPT-13B run at 1 req/s: its own summary's mean TTFT (the block
 * after the list) equals the mean of its per-request ttft_ms to rounding. */
START_TEST(real_distserve_summary_agrees)
{
	char path[2048];
	struct serving_set s;
	struct ss_error err = { 0 };
	double sum = 0;

	snprintf(path, sizeof(path), "%s/serving/distserve_alignment/opt-13b-sharegpt/vllm-100-1.exp",
		 shared);
	serving_set_init(&s);
	ck_assert_msg(serving_read(&s, path, SERVING_AUTO, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(s.run[0].n_req, 100);
	ck_assert_str_eq(s.run[0].engine, "vllm");
	ck_assert_double_eq(s.run[0].request_rate, 1.0);
	for (size_t i = 0; i < s.run[0].n_req; i++)
		sum += (double)s.run[0].req[i].ttft_ns;
	/* 1 us: the summary is the mean of the same numbers, each rounded to ns here */
	ck_assert_double_eq_tol(sum / 100, (double)s.run[0].mean_ttft_ns, 1e3);
	serving_set_release(&s);
}
END_TEST

START_TEST(real_llmservingsim_meta)
{
	char path[2048];
	struct serving_set s;
	struct ss_error err = { 0 };

	snprintf(path, sizeof(path),
		 "%s/serving/llmservingsim_bench/bench/examples/RTX4090/Llama-3.1-8B/vllm/requests.jsonl", shared);
	serving_set_init(&s);
	ck_assert_msg(serving_read(&s, path, SERVING_AUTO, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(s.run[0].engine_version, "0.19.0");
	ck_assert_str_eq(s.run[0].model, "meta-llama/Llama-3.1-8B");
	ck_assert_int_eq(s.run[0].tp, 1);
	ck_assert_int_eq(s.run[0].block_size, 16);
	serving_set_release(&s);
}
END_TEST

static Suite *real_suite(void)
{
	Suite *s = suite_create("serving-real-data");
	TCase *tc = tcase_create("real");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, real_tables);
	tcase_add_test(tc, real_per_request);
	tcase_add_test(tc, real_distserve_summary_agrees);
	tcase_add_test(tc, real_llmservingsim_meta);
	suite_add_tcase(s, tc);
	return s;
}

static Suite *readers_suite(void)
{
	Suite *s;
	TCase *tc;

	s = suite_create("serving");
	tc = tcase_create("readers");
	tcase_add_test(tc, vllm_result);
	tcase_add_test(tc, vllm_indented_closed_loop);
	tcase_add_test(tc, sglang_jsonl);
	tcase_add_test(tc, llmd_csv);
	tcase_add_test(tc, distserve_exp);
	tcase_add_test(tc, distserve_workload_json);
	tcase_add_test(tc, llmservingsim);
	tcase_add_test(tc, splitwise_table);
	tcase_add_test(tc, silicon_table);
	tcase_add_test(tc, nim_table);
	tcase_add_test(tc, gpustack_table);
	tcase_add_test(tc, gpustack_serve_cmd);
	tcase_add_test(tc, trtllm_static_table);
	tcase_add_test(tc, run_stats);
	tcase_add_test(tc, byte_order_mark);
	tcase_add_test(tc, run_workload);
	tcase_add_test(tc, format_names);
	tcase_add_test(tc, bench_malformed);
	tcase_add_test(tc, distserve_malformed);
	tcase_add_test(tc, llmservingsim_malformed);
	tcase_add_test(tc, csv_malformed);
	tcase_add_test(tc, csv_long_line);
	tcase_add_test(tc, replay_vllm);
	tcase_add_test(tc, replay_formats);
	tcase_add_test(tc, replay_refusals);
	suite_add_tcase(s, tc);
	return s;
}

/* `test-serving` runs the reader tests on the fixtures; `test-serving real`
 * the real-data tests, exiting 77 (skipped) without SERVESIM_SHARED_DATA. */
int main(int argc, char **argv)
{
	bool real = argc > 1 && strcmp(argv[1], "real") == 0;
	char p[2048];
	SRunner *sr;
	int failed;

	if (real) {
		shared = getenv("SERVESIM_SHARED_DATA");
		snprintf(p, sizeof(p), "%s/serving/PROVENANCE.md", shared ? shared : "");
		if (!shared || access(p, R_OK)) {
			fprintf(stderr, "SERVESIM_SHARED_DATA does not hold serving/: skipped\n");
			return 77;
		}
	}
	sr = srunner_create(real ? real_suite() : readers_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
