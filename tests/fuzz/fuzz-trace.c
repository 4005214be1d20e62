/* servesim — fuzz target: a trace file read by trace_read() in the format
 * FUZZ_FORMAT (TRACE_AUTO: format detection, then whichever reader it
 * picks).  An accepted trace must satisfy the workload contract. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>

#include "workload.h"

#ifndef FUZZ_FORMAT
#define FUZZ_FORMAT TRACE_AUTO
#endif

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "fuzz-trace: accepted a trace with !(%s)\n", #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file("trace", data, size);
	struct ss_error err = { 0 };
	struct workload wl;
	int rc;

	workload_init(&wl);
	rc = trace_read(&wl, path, FUZZ_FORMAT, &err);
	fuzz_check_error(rc, &err);
	if (rc == 0) {
		REQUIRE(wl.n >= 1);
		REQUIRE(wl.req[0].arrival_ns == 0);
		for (size_t i = 0; i < wl.n; i++) {
			const struct wl_request *r = &wl.req[i];

			REQUIRE(r->prompt_tokens >= 1 && r->output_tokens >= 1);
			REQUIRE(r->arrival_ns >= 0);
			REQUIRE(i == 0 || r->arrival_ns >= wl.req[i - 1].arrival_ns);
			REQUIRE((uint64_t)r->prefix_off + r->prefix_n <= wl.n_hashes);
		}
	}
	workload_release(&wl);
	return 0;
}
