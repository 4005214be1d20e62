/* servesim — fuzz target: the NAME:key=value specs of a generated workload.
 * The input is up to three lines: --arrival (also tried as a --think-time),
 * --lengths and --tenants (an
 * empty or missing third line: no --tenants).  workload_build() generates
 * 64 requests from them; an accepted spec must give every request >= 1
 * prompt and output token and non-decreasing arrival times from 0.  A
 * --lengths empirical:FILE names a file that does not exist, so that the
 * target reads no file by chance (fuzz-empirical covers that reader). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "rng.h"
#include "workload.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "fuzz-spec: accepted a spec with !(%s)\n", #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct workload_spec spec = { .num_requests = 64, .seed = 1 };
	struct ss_error err = { 0 };
	struct ss_params p;
	struct workload wl;
	char *buf, *line[3] = { NULL, NULL, NULL }, *s;
	int rc;

	if (size > 4096)
		return 0;
	buf = malloc(size + 1);
	if (!buf)
		abort();
	memcpy(buf, data, size);
	buf[size] = '\0';
	s = buf;
	for (int i = 0; i < 3 && s; i++) {
		line[i] = s;
		s = strchr(s, '\n');
		if (s)
			*s++ = '\0';
	}
	/* the spec parser alone, both ways */
	for (int i = 0; i < 3; i++) {
		if (!line[i])
			continue;
		err = (struct ss_error){ 0 };
		rc = ss_params_parse(&p, "--fuzz", line[i], i != 2, &err);
		fuzz_check_error(rc, &err);
		if (rc == 0) {
			REQUIRE(p.n <= SS_PARAMS_MAX);
			for (int k = 0; k < p.n; k++) {
				double d;
				int64_t v;

				(void)ss_params_double(&p, p.kv[k].key, 0, &d, NULL);
				(void)ss_params_int(&p, p.kv[k].key, 0, &v, NULL);
			}
		}
	}
	/* the first line as a --think-time too: an accepted spec draws
	 * times >= 0 (or says a draw does not fit) */
	if (line[0]) {
		struct think_time tt;

		err = (struct ss_error){ 0 };
		rc = think_time_parse(line[0], &tt, &err);
		fuzz_check_error(rc, &err);
		if (rc == 0) {
			gsl_rng *r = ss_rng_new(1, SS_RNG_THINK);
			int64_t ns;

			if (!r)
				abort();
			for (int k = 0; k < 16; k++)
				if (think_time_draw(&tt, r, &ns))
					REQUIRE(ns >= 0);
			gsl_rng_free(r);
		}
	}
	if (strstr(line[1] ? line[1] : "", "empirical")) {
		free(buf);
		return 0;
	}
	spec.arrival = line[0];
	spec.lengths = line[1];
	spec.tenants = line[2] && *line[2] ? line[2] : NULL;
	workload_init(&wl);
	err = (struct ss_error){ 0 };
	rc = workload_build(&wl, &spec, &err);
	fuzz_check_error(rc, &err);
	if (rc == 0) {
		REQUIRE(wl.n >= 1 && wl.n <= 64);
		for (size_t i = 0; i < wl.n; i++) {
			REQUIRE(wl.req[i].prompt_tokens >= 1 && wl.req[i].output_tokens >= 1);
			REQUIRE(i ? wl.req[i].arrival_ns >= wl.req[i - 1].arrival_ns
				  : wl.req[i].arrival_ns == 0);
		}
	}
	workload_release(&wl);
	free(buf);
	return 0;
}
