/* servesim — fuzz target: a serving benchmark result read by serving_read()
 * in the format FUZZ_FORMAT (SERVING_AUTO: detection, then whichever reader
 * it picks).  The file is named like the real ones
 * (vllm-c21d11-100-1.5.exp style names carry a rate) so that the name
 * parsing runs too.  An accepted result must satisfy serving.h's contract. */
#include "fuzz.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "serving.h"

#ifndef FUZZ_FORMAT
#define FUZZ_FORMAT SERVING_AUTO
#endif
#ifndef FUZZ_NAME
#define FUZZ_NAME "vllm-c21d11-100-1.5.exp"
#endif

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "fuzz-serving: accepted a result with !(%s)\n", #c); abort(); } } while (0)

static void check_time(int64_t t)
{
	REQUIRE(t == SERVING_NONE || t >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file(FUZZ_NAME, data, size);
	struct ss_error err = { 0 };
	struct serving_set set;
	int rc;

	serving_set_init(&set);
	rc = serving_read(&set, path, FUZZ_FORMAT, &err);
	fuzz_check_error(rc, &err);
	if (rc == 0) {
		REQUIRE(set.n >= 1);
		REQUIRE(FUZZ_FORMAT == SERVING_AUTO || set.format == FUZZ_FORMAT);
		for (size_t i = 0; i < set.n; i++) {
			const struct serving_run *r = &set.run[i];

			REQUIRE(r->n_failed <= r->n_req);
			REQUIRE(r->tp >= 0 && r->pp >= 0 && r->concurrency >= 0);
			REQUIRE(r->isl >= 0 && r->osl >= 0);
			REQUIRE(isnan(r->request_rate) || r->request_rate > 0);
			check_time(r->duration_ns);
			check_time(r->mean_ttft_ns);
			check_time(r->mean_tpot_ns);
			check_time(r->prompt_ns);
			check_time(r->token_ns);
			check_time(r->e2e_ns);
			for (size_t j = 0; j < r->n_req; j++) {
				const struct serving_request *q = &r->req[j];

				REQUIRE(q->prompt_tokens >= 0 && q->output_tokens >= 0);
				check_time(q->issue_ns);
				check_time(q->ttft_ns);
				check_time(q->tpot_ns);
				check_time(q->e2e_ns);
				REQUIRE((uint64_t)q->itl_off + q->itl_n <= r->n_itl);
				for (uint32_t k = 0; k < q->itl_n; k++)
					REQUIRE(r->itl_ns[q->itl_off + k] >= 0);
			}
		}
	} else {
		REQUIRE(set.n == 0);
	}
	serving_set_release(&set);
	return 0;
}
