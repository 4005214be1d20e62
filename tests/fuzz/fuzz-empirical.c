/* servesim — fuzz target: a lengths file given to --lengths empirical:FILE
 * (any trace format, detected), sampled for 64 requests. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>

#include "workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file("lengths.csv", data, size);
	struct workload_spec spec = { .num_requests = 64, .seed = 1,
				      .arrival = "poisson:rate=10" };
	struct ss_error err = { 0 };
	struct workload wl;
	char lengths[1100];
	int rc;

	snprintf(lengths, sizeof(lengths), "empirical:%s", path);
	spec.lengths = lengths;
	workload_init(&wl);
	rc = workload_build(&wl, &spec, &err);
	fuzz_check_error(rc, &err);
	for (size_t i = 0; rc == 0 && i < wl.n; i++)
		if (wl.req[i].prompt_tokens < 1 || wl.req[i].output_tokens < 1)
			abort();
	workload_release(&wl);
	return 0;
}
