/* servesim — serving benchmark results: the set, detection, the JSON family
 * (vLLM / SGLang bench results, DistServe .exp, LLMServingSim requests.jsonl)
 * and the dispatch.  The CSV family is in serving-csv.c.
 *
 * Every file is read whole into memory (at most SERVING_MAX_BYTES): JSON
 * results are often one long line, and the readers need to count lines to
 * name them in errors.  Two of the JSON sources are not strict JSON; each
 * gets one well-defined, byte-for-byte transformation before jansson reads
 * it, and anything outside what the transformation accepts is an error:
 *  - Python's json.dumps writes float('inf') and float('nan') as the bare
 *    tokens Infinity and NaN (SGLang's request_rate when unpaced).  Outside
 *    JSON strings they become the strings "inf" and "n" padded with blanks to
 *    the same length, so offsets and line numbers do not move; a reader
 *    takes "inf" where it allows an infinite value and rejects the rest.
 *  - DistServe's .exp is Python's repr() of a list of dicts whose keys are
 *    identifiers and whose values are numbers.  Each ' becomes "; a " or \
 *    anywhere, or a quoted key with a character other than [A-Za-z0-9_], is
 *    rejected, so the result is JSON exactly when the input was such a list.
 *    A list with no ' at all (DistServe's workload files, json.dump) is
 *    read as JSON unchanged.
 */
#define _GNU_SOURCE     /* memmem */
#include "serving-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "params.h"
#include "sstime.h"

/* ---- the set ----------------------------------------------------------- */

void serving_set_init(struct serving_set *set)
{
	*set = (struct serving_set){ 0 };
}

void serving_set_release(struct serving_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++) {
		free(set->run[i].req);
		free(set->run[i].itl_ns);
	}
	free(set->run);
	serving_set_init(set);
}

static const struct {
	enum serving_format fmt;
	const char *name;
	bool per_request;
} formats[] = {
#define SERVING_FORMAT_ROW_(e, name, per_request, what) { e, name, per_request },
	SERVING_FORMATS(SERVING_FORMAT_ROW_)
#undef SERVING_FORMAT_ROW_
};

const char *serving_format_name(enum serving_format fmt)
{
	if (fmt == SERVING_AUTO)
		return "auto";
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (formats[i].fmt == fmt)
			return formats[i].name;
	return "unknown";
}

int serving_format_from_name(const char *name, enum serving_format *fmt)
{
	if (!strcmp(name, "auto")) {
		*fmt = SERVING_AUTO;
		return 0;
	}
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		if (!strcmp(name, formats[i].name)) {
			*fmt = formats[i].fmt;
			return 0;
		}
	}
	return -EINVAL;
}

bool serving_format_per_request(enum serving_format fmt)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (formats[i].fmt == fmt)
			return formats[i].per_request;
	return false;
}

struct serving_run *serving_run_append(struct serving_set *set, enum serving_format fmt,
				       long line)
{
	struct serving_run *r;

	if (set->n == set->cap) {
		size_t nc = set->cap ? 2 * set->cap : 4;
		struct serving_run *nr = realloc(set->run, nc * sizeof(*nr));

		if (!nr)
			return NULL;
		set->run = nr;
		set->cap = nc;
	}
	r = &set->run[set->n++];
	*r = (struct serving_run){
		.format = fmt,
		.request_rate = NAN,
		.duration_ns = SERVING_NONE,
		.mean_ttft_ns = SERVING_NONE, .median_ttft_ns = SERVING_NONE,
		.p99_ttft_ns = SERVING_NONE,
		.mean_tpot_ns = SERVING_NONE, .median_tpot_ns = SERVING_NONE,
		.p99_tpot_ns = SERVING_NONE,
		.mean_itl_ns = SERVING_NONE,
		.p95_ttft_ns = SERVING_NONE, .p95_tpot_ns = SERVING_NONE,
		.median_itl_ns = SERVING_NONE, .p99_itl_ns = SERVING_NONE,
		.mean_e2e_ns = SERVING_NONE, .p95_e2e_ns = SERVING_NONE,
		.prompt_ns = SERVING_NONE, .token_ns = SERVING_NONE, .e2e_ns = SERVING_NONE,
		.peak_power = NAN, .avg_power = NAN,
		.line = line,
	};
	return r;
}

struct serving_request *serving_req_append(struct serving_run *r)
{
	struct serving_request *q;

	if (r->n_req >= SERVING_MAX_REQUESTS)
		return NULL;
	if (r->n_req == r->cap_req) {
		size_t nc = r->cap_req ? 2 * r->cap_req : 64;
		struct serving_request *nq = realloc(r->req, nc * sizeof(*nq));

		if (!nq)
			return NULL;
		r->req = nq;
		r->cap_req = nc;
	}
	q = &r->req[r->n_req++];
	*q = (struct serving_request){
		.issue_ns = SERVING_NONE, .ttft_ns = SERVING_NONE,
		.tpot_ns = SERVING_NONE, .e2e_ns = SERVING_NONE,
		.itl_off = (uint32_t)r->n_itl, .ok = true,
	};
	return q;
}

static int itl_push(struct serving_run *r, int64_t v)
{
	if (r->n_itl >= UINT32_MAX)
		return -E2BIG;
	if (r->n_itl == r->cap_itl) {
		size_t nc = r->cap_itl ? 2 * r->cap_itl : 256;
		int64_t *ni = realloc(r->itl_ns, nc * sizeof(*ni));

		if (!ni)
			return -ENOMEM;
		r->itl_ns = ni;
		r->cap_itl = nc;
	}
	r->itl_ns[r->n_itl++] = v;
	return 0;
}

void serving_copy_str(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

const char *serving_basename(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* Shift every recorded issue time so the earliest is 0; base_s holds the
 * raw times (seconds) of the requests, NAN where absent.  On a time that
 * does not fit, an error naming the request. */
int serving_issue_from_s(struct serving_run *r, const double *raw_s, const char *path,
			 const char *what, struct ss_error *err)
{
	double min = INFINITY;

	for (size_t i = 0; i < r->n_req; i++)
		if (!isnan(raw_s[i]) && raw_s[i] < min)
			min = raw_s[i];
	for (size_t i = 0; i < r->n_req; i++) {
		if (isnan(raw_s[i]))
			continue;
		if (!ss_time_from_s(raw_s[i] - min, &r->req[i].issue_ns) ||
		    r->req[i].issue_ns > SERVING_TIME_MAX_NS)
			return ss_error_set(err, -EINVAL, path, r->line,
					    "%s of request %zu is %.17g s after the earliest (expected a span below %.0f s)",
					    what, i, raw_s[i] - min, SERVING_TIME_MAX_NS / 1e9);
	}
	return 0;
}

/* ---- reading a whole stream -------------------------------------------- */

static int read_all(FILE *f, const char *path, char **out, size_t *len, struct ss_error *err)
{
	size_t cap = 1u << 16, n = 0, got;
	char *buf = malloc(cap + 1), *nb;

	if (!buf)
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			if (cap >= SERVING_MAX_BYTES) {
				free(buf);
				return ss_error_set(err, -EFBIG, path, 0,
						    "larger than %u bytes (expected a benchmark result file)",
						    SERVING_MAX_BYTES);
			}
			cap *= 2;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
			}
			buf = nb;
		}
	}
	if (ferror(f)) {
		int rc = errno ? -errno : -EIO;

		free(buf);
		return ss_error_set(err, rc, path, 0, "read error: %s", strerror(-rc));
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

long serving_line_at(const char *buf, size_t off)
{
	long line = 1;

	for (size_t i = 0; i < off; i++)
		line += buf[i] == '\n';
	return line;
}

/* A NUL byte would cut C strings short silently (and jansson refuses it
 * with a less helpful message): an error at its line. */
static int check_nul(const char *buf, size_t len, const char *path, struct ss_error *err)
{
	const char *z = memchr(buf, '\0', len);

	if (z)
		return ss_error_set(err, -EINVAL, path, serving_line_at(buf, (size_t)(z - buf)),
				    "NUL byte (expected text; is this a binary file?)");
	return 0;
}

/* ---- detection --------------------------------------------------------- */

static size_t skip_ws(const char *buf, size_t len, size_t i)
{
	while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'))
		i++;
	return i;
}

static bool has_text(const char *buf, size_t len, const char *s)
{
	return memmem(buf, len, s, strlen(s)) != NULL;
}

int serving_detect_bytes(const char *path, const char *buf, size_t len,
			 enum serving_format *fmt, struct ss_error *err)
{
	size_t i = 0, eol;

	if (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3))
		i = 3;
	i = skip_ws(buf, len, i);
	if (i == len)
		return ss_error_set(err, -EINVAL, path, 0,
				    "empty file: expected a serving benchmark result");
	if (buf[i] == '[') {
		*fmt = SERVING_DISTSERVE;
		return 0;
	}
	if (buf[i] == '{') {
		*fmt = has_text(buf + i, len - i, "\"input_toks\"") ? SERVING_LLMSERVINGSIM
								     : SERVING_BENCH;
		return 0;
	}
	eol = i;
	while (eol < len && buf[eol] != '\n')
		eol++;
	if (has_text(buf + i, eol - i, "silicon_ttft_ms"))
		*fmt = SERVING_SILICON;
	else if (has_text(buf + i, eol - i, "task_inputs-model") &&
		 has_text(buf + i, eol - i, "time_to_first_token-avg"))
		*fmt = SERVING_NIM;
	else if (has_text(buf + i, eol - i, "serve_cmd") && has_text(buf + i, eol - i, "ttft_p50_ms"))
		*fmt = SERVING_GPUSTACK;
	else if (has_text(buf + i, eol - i, "1st Token Latency (ms)") &&
		 has_text(buf + i, eol - i, "Token-to-token Latency (ms)"))
		*fmt = SERVING_TRTLLM_STATIC;
	else if (has_text(buf + i, eol - i, "prompt_time") && has_text(buf + i, eol - i, "token_time"))
		*fmt = SERVING_SPLITWISE;
	else if (has_text(buf + i, eol - i, "generation_tokens") &&
		 has_text(buf + i, eol - i, "launch_time"))
		*fmt = SERVING_LLMD;
	else
		return ss_error_set(err, -EINVAL, path, serving_line_at(buf, i),
				    "unrecognized result: expected a JSON object (vllm bench serve / SGLang bench_serving / LLMServingSim), "
				    "a Python list (DistServe .exp), or a CSV header with generation_tokens,launch_time (llm-d), "
				    "prompt_time,token_time (Splitwise), silicon_ttft_ms (aiconfigurator), "
				    "task_inputs-model,time_to_first_token-avg (NIM GenAI-Perf), "
				    "serve_cmd,ttft_p50_ms (GPUStack) or 1st Token Latency (ms),"
				    "Token-to-token Latency (ms) (TensorRT-LLM 0.9 static table)");
	return 0;
}

/* ---- JSON helpers ------------------------------------------------------ */

static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return "string";
	case JSON_INTEGER: return "integer";
	case JSON_REAL: return "number";
	case JSON_TRUE: case JSON_FALSE: return "boolean";
	default: return "null";
	}
}

/* A JSON number as a double; false for anything else. */
static bool json_num(const json_t *v, double *out)
{
	if (json_is_integer(v))
		*out = (double)json_integer_value(v);
	else if (json_is_real(v))
		*out = json_real_value(v);
	else
		return false;
	return true;
}

/* A count: a JSON integer, or an integral real, in 0..INT32_MAX. */
static int jcount(const json_t *v, const char *path, long line, const char *jpath,
		  int32_t *out, struct ss_error *err)
{
	double d;

	if (!v || !json_num(v, &d))
		return ss_error_set(err, -EINVAL, path, line, "%s: expected a token count, got %s",
				    jpath, v ? json_kind(v) : "nothing (missing)");
	if (d != floor(d) || d < 0 || d > INT32_MAX)
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: expected a whole number of tokens from 0 to %d, got %.17g",
				    jpath, INT32_MAX, d);
	*out = (int32_t)d;
	return 0;
}

/* A duration in seconds (scale 1) or ms (scale 1e-3): finite, >= 0, below
 * SERVING_TIME_MAX_NS. */
static int jdur(const json_t *v, double scale, const char *path, long line, const char *jpath,
		int64_t *out, struct ss_error *err)
{
	double d;

	if (!v || !json_num(v, &d))
		return ss_error_set(err, -EINVAL, path, line, "%s: expected a duration (%s), got %s",
				    jpath, scale == 1 ? "s" : "ms", v ? json_kind(v) : "nothing (missing)");
	if (!ss_time_from_s(d * scale, out) || *out > SERVING_TIME_MAX_NS)
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: expected a duration from 0 to %.0f s, got %.17g %s",
				    jpath, SERVING_TIME_MAX_NS / 1e9, d, scale == 1 ? "s" : "ms");
	return 0;
}

/* An optional aggregate in ms: absent, null or "n" (Python's NaN, see the
 * top of the file) leave *out. */
static int jopt_ms(json_t *obj, const char *key, const char *path, long line,
		   int64_t *out, struct ss_error *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v) || (json_is_string(v) && !strcmp(json_string_value(v), "n")))
		return 0;
	return jdur(v, 1e-3, path, line, key, out, err);
}

static void jopt_str(json_t *obj, const char *key, char *dst, size_t cap)
{
	json_t *v = json_object_get(obj, key);

	if (json_is_string(v) && !dst[0])
		serving_copy_str(dst, cap, json_string_value(v));
}

/* A time stamp (s): finite; may be any sign (a monotonic clock's origin is
 * arbitrary). */
static int jstamp(const json_t *v, const char *path, long line, const char *jpath,
		  double *out, struct ss_error *err)
{
	if (!v || !json_num(v, out) || !isfinite(*out) || fabs(*out) > 1e15)
		return ss_error_set(err, -EINVAL, path, line,
				    "%s: expected a time stamp in seconds, got %s", jpath,
				    v ? (json_num(v, out) ? "a value out of range" : json_kind(v))
				      : "nothing (missing)");
	return 0;
}

/* ---- Python's Infinity / NaN tokens ------------------------------------ */

static void normalise_py_floats(char *buf, size_t len)
{
	bool in_str = false;

	for (size_t i = 0; i < len; i++) {
		if (in_str) {
			if (buf[i] == '\\')
				i++;
			else if (buf[i] == '"')
				in_str = false;
			continue;
		}
		if (buf[i] == '"') {
			in_str = true;
		} else if (buf[i] == 'I' && len - i >= 8 && !memcmp(buf + i, "Infinity", 8)) {
			memcpy(buf + i, "\"inf\"   ", 8);
			i += 7;
		} else if (buf[i] == 'N' && len - i >= 3 && !memcmp(buf + i, "NaN", 3)) {
			memcpy(buf + i, "\"n\"", 3);
			i += 2;
		}
	}
}

/* ---- vLLM / SGLang bench results --------------------------------------- */

static const char *engine_of_backend(const char *b)
{
	if (!strncmp(b, "sglang", 6))
		return "sglang";
	if (!strncmp(b, "vllm", 4))
		return "vllm";
	if (!strncmp(b, "lmdeploy", 8))
		return "lmdeploy";
	if (!strncmp(b, "trt", 3) || !strncmp(b, "tensorrt", 8))
		return "trtllm";
	return "";
}

static int bench_requests(struct serving_run *r, json_t *obj, const char *path, long line,
			  struct ss_error *err)
{
	json_t *in = json_object_get(obj, "input_lens"), *out = json_object_get(obj, "output_lens");
	json_t *tt = json_object_get(obj, "ttfts"), *itls = json_object_get(obj, "itls");
	json_t *st = json_object_get(obj, "start_times"), *errs = json_object_get(obj, "errors");
	const char *names[] = { "input_lens", "output_lens", "ttfts", "itls", "start_times", "errors" };
	json_t *arr[] = { in, out, tt, itls, st, errs };
	double *raw = NULL;
	char jp[96];
	size_t n;
	int rc = 0;

	if (!in && !out && !tt)
		return 0;       /* aggregate-only (saved without per-request detail) */
	for (int k = 0; k < 6; k++) {
		if (k < 3 && !arr[k])
			return ss_error_set(err, -EINVAL, path, line,
					    "%s: missing (expected input_lens, output_lens and ttfts together)",
					    names[k]);
		if (arr[k] && !json_is_null(arr[k]) && !json_is_array(arr[k]))
			return ss_error_set(err, -EINVAL, path, line, "%s: expected an array, got %s",
					    names[k], json_kind(arr[k]));
		if (arr[k] && json_is_null(arr[k]))
			arr[k] = NULL;
	}
	itls = arr[3];
	st = arr[4];
	errs = arr[5];
	n = json_array_size(in);
	for (int k = 1; k < 6; k++)
		if (arr[k] && json_array_size(arr[k]) != n)
			return ss_error_set(err, -EINVAL, path, line,
					    "%s: %zu entries (expected %zu, one per request as in input_lens)",
					    names[k], json_array_size(arr[k]), n);
	if (n > SERVING_MAX_REQUESTS)
		return ss_error_set(err, -E2BIG, path, line, "%zu requests (expected at most %u)",
				    n, SERVING_MAX_REQUESTS);
	if (st && n) {
		raw = malloc(n * sizeof(*raw));
		if (!raw)
			return ss_error_set(err, -ENOMEM, path, line, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		struct serving_request *q = serving_req_append(r);
		json_t *e = errs ? json_array_get(errs, i) : NULL;

		if (!q) {
			rc = ss_error_set(err, -ENOMEM, path, line, "out of memory");
			goto out;
		}
		if (e && !json_is_null(e) && !(json_is_string(e) && !json_string_length(e)))
			q->ok = false;
		snprintf(jp, sizeof(jp), "input_lens[%zu]", i);
		if ((rc = jcount(json_array_get(in, i), path, line, jp, &q->prompt_tokens, err)))
			goto out;
		snprintf(jp, sizeof(jp), "output_lens[%zu]", i);
		if ((rc = jcount(json_array_get(out, i), path, line, jp, &q->output_tokens, err)))
			goto out;
		snprintf(jp, sizeof(jp), "ttfts[%zu]", i);
		if ((rc = jdur(json_array_get(tt, i), 1, path, line, jp, &q->ttft_ns, err)))
			goto out;
		if (st) {
			snprintf(jp, sizeof(jp), "start_times[%zu]", i);
			if ((rc = jstamp(json_array_get(st, i), path, line, jp, &raw[i], err)))
				goto out;
		}
		if (itls) {
			json_t *g = json_array_get(itls, i);
			int64_t sum = 0, v;
			size_t j;
			json_t *x;

			if (!json_is_array(g)) {
				rc = ss_error_set(err, -EINVAL, path, line,
						  "itls[%zu]: expected an array of gaps (s), got %s", i,
						  json_kind(g));
				goto out;
			}
			json_array_foreach(g, j, x) {
				snprintf(jp, sizeof(jp), "itls[%zu][%zu]", i, j);
				if ((rc = jdur(x, 1, path, line, jp, &v, err)))
					goto out;
				if ((rc = itl_push(r, v))) {
					ss_error_set(err, rc, path, line, "%s: %s", jp,
						     rc == -E2BIG ? "too many gaps" : "out of memory");
					goto out;
				}
				sum = ss_time_add_sat(sum, v);
			}
			q->itl_n = (uint32_t)json_array_size(g);
			if (q->ok) {
				q->e2e_ns = ss_time_add_sat(q->ttft_ns, sum);
				if (q->output_tokens > 1)
					q->tpot_ns = sum / (q->output_tokens - 1);
			}
		}
		if (!q->ok) {
			r->n_failed++;
			q->ttft_ns = SERVING_NONE;
		}
	}
	if (st)
		rc = serving_issue_from_s(r, raw, path, "start_times", err);
out:
	free(raw);
	return rc;
}

static int bench_run(struct serving_set *set, json_t *obj, const char *path, long line,
		     struct ss_error *err)
{
	struct serving_run *r;
	json_t *v;
	double d;
	int rc;

	if (!json_is_object(obj))
		return ss_error_set(err, -EINVAL, path, line,
				    "expected a JSON object (a benchmark result), got %s", json_kind(obj));
	r = serving_run_append(set, SERVING_BENCH, line);
	if (!r)
		return ss_error_set(err, -ENOMEM, path, line, "out of memory");
	jopt_str(obj, "backend", r->label, sizeof(r->label));
	serving_copy_str(r->engine, sizeof(r->engine), engine_of_backend(r->label));
	jopt_str(obj, "model_id", r->model, sizeof(r->model));
	jopt_str(obj, "model", r->model, sizeof(r->model));
	jopt_str(obj, "backend_version", r->engine_version, sizeof(r->engine_version));
	v = json_object_get(obj, "request_rate");
	if (v && !json_is_null(v)) {
		if (json_is_string(v) && (!strcmp(json_string_value(v), "inf") ||
					  !strcmp(json_string_value(v), "Infinity")))
			r->request_rate = INFINITY;
		else if (!json_num(v, &d) || !(d > 0))
			return ss_error_set(err, -EINVAL, path, line,
					    "request_rate: expected a rate > 0 (req/s) or \"inf\", got %s",
					    json_kind(v));
		else
			r->request_rate = d;
		r->load = SERVING_LOAD_OPEN;
	}
	v = json_object_get(obj, "max_concurrency");
	if (v && !json_is_null(v)) {
		if ((rc = jcount(v, path, line, "max_concurrency", &r->concurrency, err)))
			return rc;
		if (r->concurrency > 0)
			r->load = SERVING_LOAD_CLOSED;
	}
	v = json_object_get(obj, "duration");
	if (v && !json_is_null(v) && (rc = jdur(v, 1, path, line, "duration", &r->duration_ns, err)))
		return rc;
	if ((rc = jopt_ms(obj, "mean_ttft_ms", path, line, &r->mean_ttft_ns, err)) ||
	    (rc = jopt_ms(obj, "median_ttft_ms", path, line, &r->median_ttft_ns, err)) ||
	    (rc = jopt_ms(obj, "p99_ttft_ms", path, line, &r->p99_ttft_ns, err)) ||
	    (rc = jopt_ms(obj, "mean_tpot_ms", path, line, &r->mean_tpot_ns, err)) ||
	    (rc = jopt_ms(obj, "median_tpot_ms", path, line, &r->median_tpot_ns, err)) ||
	    (rc = jopt_ms(obj, "p99_tpot_ms", path, line, &r->p99_tpot_ns, err)) ||
	    (rc = jopt_ms(obj, "mean_itl_ms", path, line, &r->mean_itl_ns, err)))
		return rc;
	rc = bench_requests(r, obj, path, line, err);
	if (!rc && r->n_req == 0 && r->mean_ttft_ns == SERVING_NONE)
		rc = ss_error_set(err, -EINVAL, path, line,
				  "neither per-request arrays (input_lens, output_lens, ttfts) nor mean_ttft_ms: "
				  "expected a vllm bench serve / SGLang bench_serving result");
	return rc;
}

/* One result (vLLM: one JSON document, possibly indented) or several (SGLang
 * appends one line per run). */
static int read_bench(struct serving_set *set, char *buf, size_t len, const char *path,
		      struct ss_error *err)
{
	size_t off = 0;

	normalise_py_floats(buf, len);
	for (;;) {
		json_error_t jerr;
		json_t *obj;
		long line;
		int rc;

		off = skip_ws(buf, len, off);
		if (off == len)
			break;
		line = serving_line_at(buf, off);
		obj = json_loadb(buf + off, len - off, JSON_DISABLE_EOF_CHECK, &jerr);
		if (!obj)
			return ss_error_set(err, -EINVAL, path, line + jerr.line - 1,
					    "invalid JSON: %s (expected one benchmark result object per line, or one JSON document)",
					    jerr.text);
		rc = bench_run(set, obj, path, line, err);
		json_decref(obj);
		if (rc)
			return rc;
		if (jerr.position <= 0)
			break;
		off += (size_t)jerr.position;
	}
	if (set->n == 0)
		return ss_error_set(err, -EINVAL, path, 0, "empty file: expected a benchmark result");
	return 0;
}

/* ---- DistServe .exp ---------------------------------------------------- */

/* Python repr -> JSON, in place (see the top of the file).  Returns the
 * offset of the first byte outside the literal's rules, or len. */
static size_t exp_to_json(char *buf, size_t len)
{
	bool in_str = false;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];

		if (c == '"' || c == '\\')
			return i;
		if (c == '\'') {
			in_str = !in_str;
			buf[i] = '"';
		} else if (in_str && !(c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
				       (c >= 'A' && c <= 'Z'))) {
			return i;
		}
	}
	return len;
}

/* The optional summary DistServe prints after the list:
 *   {\n\tkey: number\n ... }\n
 * Only the keys servesim uses are kept; the shape is checked line by line. */
static int exp_summary(struct serving_run *r, const char *buf, size_t len, size_t off,
		       const char *path, struct ss_error *err)
{
	long line = serving_line_at(buf, off);
	size_t i = off;
	bool open = false, closed = false;

	while (i < len) {
		size_t e = i, k;
		char key[64], val[64];
		double d;

		while (e < len && buf[e] != '\n')
			e++;
		k = skip_ws(buf, e, i);
		if (k == e) {
			/* blank */
		} else if (!open && buf[k] == '{' && skip_ws(buf, e, k + 1) == e) {
			open = true;
		} else if (open && !closed && buf[k] == '}' && skip_ws(buf, e, k + 1) == e) {
			closed = true;
		} else if (open && !closed) {
			size_t c = k, vs;

			while (c < e && (buf[c] == '_' || (buf[c] >= 'a' && buf[c] <= 'z') ||
					 (buf[c] >= 'A' && buf[c] <= 'Z') || (buf[c] >= '0' && buf[c] <= '9')))
				c++;
			vs = skip_ws(buf, e, c + 1);
			if (c == k || c >= e || buf[c] != ':' || c - k >= sizeof(key) ||
			    e - vs >= sizeof(val))
				return ss_error_set(err, -EINVAL, path, line,
						    "expected 'name: number' in DistServe's summary block");
			memcpy(key, buf + k, c - k);
			key[c - k] = '\0';
			memcpy(val, buf + vs, e - vs);
			val[e - vs] = '\0';
			if (!ss_parse_double(val, &d) || d < 0) {
				for (char *p = val; *p; p++)
					if ((unsigned char)*p < ' ')
						*p = '?';       /* the message stays one line */
				return ss_error_set(err, -EINVAL, path, line,
						    "%s: expected a number >= 0, got '%s'", key, val);
			}
			if (!strcmp(key, "test_duration_ms") &&
			    !ss_time_from_units(d, SS_NS_PER_MS, &r->duration_ns))
				return ss_error_set(err, -EINVAL, path, line, "%s: out of range", key);
			if (!strcmp(key, "avg_ttft_ms") &&
			    !ss_time_from_units(d, SS_NS_PER_MS, &r->mean_ttft_ns))
				return ss_error_set(err, -EINVAL, path, line, "%s: out of range", key);
			if (!strcmp(key, "avg_tpot_ms") &&
			    !ss_time_from_units(d, SS_NS_PER_MS, &r->mean_tpot_ns))
				return ss_error_set(err, -EINVAL, path, line, "%s: out of range", key);
		} else {
			return ss_error_set(err, -EINVAL, path, line,
					    "unexpected text after the request list (expected DistServe's { name: number } summary)");
		}
		i = e + 1;
		line++;
	}
	if (open && !closed)
		return ss_error_set(err, -EINVAL, path, line - 1,
				    "truncated summary block: expected a closing '}'");
	return 0;
}

/* "<engine>[-<placement>]-<N>-<rate>.exp": engine, placement and rate. */
static void exp_name(struct serving_run *r, const char *path)
{
	const char *b = serving_basename(path);
	char name[160], *dash, *dot;
	double rate;

	serving_copy_str(r->label, sizeof(r->label), b);
	serving_copy_str(name, sizeof(name), b);
	dot = strrchr(name, '.');
	if (!dot || strcmp(dot, ".exp"))
		return;
	*dot = '\0';
	dash = strrchr(name, '-');
	if (!dash || !ss_parse_double(dash + 1, &rate) || !(rate > 0))
		return;
	r->request_rate = rate;
	r->load = SERVING_LOAD_OPEN;
	*dash = '\0';
	dash = strrchr(name, '-');      /* the request count */
	if (!dash)
		return;
	*dash = '\0';
	dash = strchr(name, '-');
	if (dash) {
		*dash = '\0';
		serving_copy_str(r->mode, sizeof(r->mode), dash + 1);
	}
	if (!strcmp(name, "vllm") || !strcmp(name, "distserve"))
		serving_copy_str(r->engine, sizeof(r->engine), name);
}

static int read_distserve(struct serving_set *set, char *buf, size_t len, const char *path,
			  struct ss_error *err)
{
	struct serving_run *r;
	json_error_t jerr;
	json_t *list = NULL, *o;
	double *raw = NULL;
	size_t bad, end, i;
	char jp[64];
	int rc = 0;

	/* the list is the first line; DistServe's summary may follow */
	end = 0;
	while (end < len && buf[end] != '\n')
		end++;
	/* a list without a single quote is JSON already (DistServe writes its
	 * workload files with json.dump): given to jansson as it is */
	bad = memchr(buf, '\'', end) ? exp_to_json(buf, len) : len;
	if (bad < end)
		return ss_error_set(err, -EINVAL, path, serving_line_at(buf, bad),
				    "unexpected '%c' at byte %zu (expected a Python list of dicts with identifier keys and number values)",
				    buf[bad] >= ' ' && buf[bad] < 127 ? buf[bad] : '?', bad + 1);
	list = json_loadb(buf, end, 0, &jerr);
	if (!list)
		return ss_error_set(err, -EINVAL, path, jerr.line,
				    "not a list of dicts of numbers: %s (expected DistServe's .exp)", jerr.text);
	if (!json_is_array(list) || json_array_size(list) == 0) {
		rc = ss_error_set(err, -EINVAL, path, 1, "expected a non-empty list of requests, got %s",
				  json_is_array(list) ? "an empty list" : json_kind(list));
		goto out;
	}
	if (json_array_size(list) > SERVING_MAX_REQUESTS) {
		rc = ss_error_set(err, -E2BIG, path, 1, "more than %u requests", SERVING_MAX_REQUESTS);
		goto out;
	}
	r = serving_run_append(set, SERVING_DISTSERVE, 1);
	raw = malloc(json_array_size(list) * sizeof(*raw));
	if (!r || !raw) {
		rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
		goto out;
	}
	exp_name(r, path);
	json_array_foreach(list, i, o) {
		struct serving_request *q = serving_req_append(r);
		json_t *t;

		if (!q) {
			rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
			goto out;
		}
		if (!json_is_object(o)) {
			rc = ss_error_set(err, -EINVAL, path, 1, "[%zu]: expected a dict, got %s", i,
					  json_kind(o));
			goto out;
		}
		snprintf(jp, sizeof(jp), "[%zu].prompt_len", i);
		if ((rc = jcount(json_object_get(o, "prompt_len"), path, 1, jp, &q->prompt_tokens, err)))
			goto out;
		snprintf(jp, sizeof(jp), "[%zu].output_len", i);
		if ((rc = jcount(json_object_get(o, "output_len"), path, 1, jp, &q->output_tokens, err)))
			goto out;
		/* results say issue_time; DistServe's workload files start_time */
		t = json_object_get(o, "issue_time");
		snprintf(jp, sizeof(jp), "[%zu].%s", i, t ? "issue_time" : "start_time");
		if (!t)
			t = json_object_get(o, "start_time");
		if ((rc = jstamp(t, path, 1, jp, &raw[i], err)))
			goto out;
		if ((t = json_object_get(o, "ttft_ms"))) {
			snprintf(jp, sizeof(jp), "[%zu].ttft_ms", i);
			if ((rc = jdur(t, 1e-3, path, 1, jp, &q->ttft_ns, err)))
				goto out;
		}
		if ((t = json_object_get(o, "tpot_ms"))) {
			snprintf(jp, sizeof(jp), "[%zu].tpot_ms", i);
			if ((rc = jdur(t, 1e-3, path, 1, jp, &q->tpot_ns, err)))
				goto out;
			if (q->output_tokens <= 1)
				q->tpot_ns = SERVING_NONE;
		}
		if ((t = json_object_get(o, "latency_ms"))) {
			snprintf(jp, sizeof(jp), "[%zu].latency_ms", i);
			if ((rc = jdur(t, 1e-3, path, 1, jp, &q->e2e_ns, err)))
				goto out;
		}
	}
	if ((rc = serving_issue_from_s(r, raw, path, "issue_time", err)))
		goto out;
	rc = exp_summary(r, buf, len, end < len ? end + 1 : len, path, err);
out:
	free(raw);
	json_decref(list);
	return rc;
}

/* ---- LLMServingSim requests.jsonl (+ meta.json) ------------------------ */

static int jopt_int(json_t *obj, const char *key, const char *path, int32_t *out,
		    struct ss_error *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v))
		return 0;
	return jcount(v, path, 0, key, out, err);
}

/* meta.json beside requests.jsonl: the engine's resolved settings.  Absent
 * is fine (the file may have been copied alone); present and malformed is
 * an error naming it. */
static int lss_meta(struct serving_run *r, const char *path, struct ss_error *err)
{
	char meta[4096];
	const char *slash = strrchr(path, '/');
	json_error_t jerr;
	json_t *m, *o;
	FILE *f;
	int rc = 0;

	snprintf(meta, sizeof(meta), "%.*smeta.json", slash ? (int)(slash - path + 1) : 0, path);
	f = fopen(meta, "rb");
	if (!f)
		return 0;
	m = json_loadf(f, 0, &jerr);
	fclose(f);
	if (!m)
		return ss_error_set(err, -EINVAL, meta, jerr.line, "invalid JSON: %s", jerr.text);
	if (!json_is_object(m)) {
		rc = ss_error_set(err, -EINVAL, meta, 1, "expected a JSON object (LLMServingSim meta.json)");
		goto out;
	}
	jopt_str(m, "model", r->model, sizeof(r->model));
	jopt_str(m, "vllm_version", r->engine_version, sizeof(r->engine_version));
	if ((o = json_object_get(m, "engine_kwargs")) && json_is_object(o)) {
		if ((rc = jopt_int(o, "tensor_parallel_size", meta, &r->tp, err)) ||
		    (rc = jopt_int(o, "max_num_seqs", meta, &r->max_num_seqs, err)) ||
		    (rc = jopt_int(o, "max_num_batched_tokens", meta, &r->max_num_batched_tokens, err)))
			goto out;
	}
	if ((o = json_object_get(m, "hardware")) && json_is_object(o))
		jopt_str(o, "device_name", r->gpu, sizeof(r->gpu));
	if ((o = json_object_get(m, "kv_cache")) && json_is_object(o)) {
		if ((rc = jopt_int(o, "num_gpu_blocks", meta, &r->num_gpu_blocks, err)) ||
		    (rc = jopt_int(o, "block_size", meta, &r->block_size, err)))
			goto out;
	}
out:
	json_decref(m);
	return rc;
}

static int lss_row(struct serving_run *r, json_t *o, const char *path, long line,
		   double *arrival, struct ss_error *err)
{
	struct serving_request *q;
	double queued, first, last;
	int rc;

	if (!json_is_object(o))
		return ss_error_set(err, -EINVAL, path, line, "expected a JSON object, got %s",
				    json_kind(o));
	q = serving_req_append(r);
	if (!q)
		return ss_error_set(err, -ENOMEM, path, line, "out of memory");
	if ((rc = jcount(json_object_get(o, "input_toks"), path, line, "input_toks",
			 &q->prompt_tokens, err)) ||
	    (rc = jcount(json_object_get(o, "output_toks"), path, line, "output_toks",
			 &q->output_tokens, err)) ||
	    (rc = jstamp(json_object_get(o, "arrival_time"), path, line, "arrival_time", arrival, err)) ||
	    (rc = jstamp(json_object_get(o, "queued_ts"), path, line, "queued_ts", &queued, err)) ||
	    (rc = jstamp(json_object_get(o, "first_token_ts"), path, line, "first_token_ts", &first, err)) ||
	    (rc = jstamp(json_object_get(o, "last_token_ts"), path, line, "last_token_ts", &last, err)))
		return rc;
	/* engine-side times: from entering the engine's queue */
	if (!(first >= queued) || !(last >= first))
		return ss_error_set(err, -EINVAL, path, line,
				    "expected queued_ts <= first_token_ts <= last_token_ts, got %.17g, %.17g, %.17g",
				    queued, first, last);
	if (!ss_time_from_s(first - queued, &q->ttft_ns) || !ss_time_from_s(last - queued, &q->e2e_ns))
		return ss_error_set(err, -EINVAL, path, line, "times out of range");
	if (q->output_tokens > 1 && !ss_time_from_s((last - first) / (q->output_tokens - 1), &q->tpot_ns))
		return ss_error_set(err, -EINVAL, path, line, "times out of range");
	return 0;
}

static int read_llmservingsim(struct serving_set *set, char *buf, size_t len, const char *path,
			      struct ss_error *err)
{
	struct serving_run *r = serving_run_append(set, SERVING_LLMSERVINGSIM, 1);
	double *raw = NULL;
	size_t cap = 0, off = 0;
	long line = 1;
	int rc = 0;

	if (!r)
		return ss_error_set(err, -ENOMEM, path, 0, "out of memory");
	serving_copy_str(r->engine, sizeof(r->engine), "vllm");
	serving_copy_str(r->label, sizeof(r->label), path);
	while (off < len) {
		size_t e = off;
		json_error_t jerr;
		json_t *o;

		while (e < len && buf[e] != '\n')
			e++;
		if (skip_ws(buf, e, off) < e) {
			if (r->n_req == cap) {
				size_t nc = cap ? 2 * cap : 256;
				double *nr = realloc(raw, nc * sizeof(*nr));

				if (!nr) {
					rc = ss_error_set(err, -ENOMEM, path, line, "out of memory");
					goto out;
				}
				raw = nr;
				cap = nc;
			}
			o = json_loadb(buf + off, e - off, 0, &jerr);
			if (!o) {
				rc = ss_error_set(err, -EINVAL, path, line,
						  "%sinvalid JSON: %s (expected one request object per line)",
						  e == len ? "truncated last line: " : "", jerr.text);
				goto out;
			}
			rc = lss_row(r, o, path, line, &raw[r->n_req], err);
			json_decref(o);
			if (rc)
				goto out;
		}
		off = e + 1;
		line++;
	}
	if (r->n_req == 0) {
		rc = ss_error_set(err, -EINVAL, path, 0, "empty file: expected a request object per line");
		goto out;
	}
	if ((rc = serving_issue_from_s(r, raw, path, "arrival_time", err)))
		goto out;
	r->load = SERVING_LOAD_OPEN;
	rc = lss_meta(r, path, err);
out:
	free(raw);
	return rc;
}

/* ---- dispatch ---------------------------------------------------------- */

static int read_buf(struct serving_set *set, char *buf, size_t len, const char *path,
		    enum serving_format fmt, struct ss_error *err)
{
	bool bom;
	int rc;

	if (fmt == SERVING_AUTO && (rc = serving_detect_bytes(path, buf, len, &fmt, err)))
		return rc;
	if ((rc = check_nul(buf, len, path, err)))
		return rc;
	bom = len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3);
	if (bom)
		memcpy(buf, "   ", 3);  /* a UTF-8 byte order mark: blanks to JSON, offsets kept */
	set->format = fmt;
	serving_copy_str(set->source, sizeof(set->source), path);
	switch (fmt) {
	case SERVING_BENCH:
		return read_bench(set, buf, len, path, err);
	case SERVING_DISTSERVE:
		return read_distserve(set, buf, len, path, err);
	case SERVING_LLMSERVINGSIM:
		return read_llmservingsim(set, buf, len, path, err);
	case SERVING_LLMD:
	case SERVING_SPLITWISE:
	case SERVING_SILICON:
	case SERVING_NIM:
	case SERVING_GPUSTACK:
	case SERVING_TRTLLM_STATIC:
		/* not blanks to CSV: they would be part of the first name */
		return serving_read_csv(set, buf + (bom ? 3 : 0), len - (bom ? 3 : 0), path, fmt, err);
	default:
		return ss_error_set(err, -EINVAL, path, 0, "unknown result format %d", (int)fmt);
	}
}

int serving_read_stream(struct serving_set *set, FILE *f, const char *path,
			enum serving_format fmt, struct ss_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	int rc;

	rc = read_all(f, path, &buf, &len, err);
	if (rc)
		return rc;
	rc = read_buf(set, buf, len, path, fmt, err);
	free(buf);
	if (rc)
		serving_set_release(set);
	return rc;
}

int serving_read(struct serving_set *set, const char *path, enum serving_format fmt,
		 struct ss_error *err)
{
	FILE *f = fopen(path, "rb");
	int rc;

	if (!f) {
		rc = -errno;
		return ss_error_set(err, rc, path, 0, "cannot open result: %s", strerror(-rc));
	}
	rc = serving_read_stream(set, f, path, fmt, err);
	fclose(f);
	return rc;
}
