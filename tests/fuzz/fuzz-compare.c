/* servesim — fuzz target: a run's results.db as `servesim compare` and
 * `plan` read it back (analysis/compare.c run_data_load), then compared
 * with itself. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ss_error err = { 0 };
	struct run_data rd;
	char dir[512];
	int rc;

	fuzz_file("results.db", data, size);
	snprintf(dir, sizeof(dir), "%s", fuzz_dir());
	run_data_init(&rd);
	rc = run_data_load(&rd, dir, &err);
	fuzz_check_error(rc, &err);
	if (rc == 0) {
		struct cmp_result c;
		static FILE *null;

		if (!null && !(null = fopen("/dev/null", "w")))
			abort();
		rc = compare_runs(&rd, &rd, &c, &err);
		fuzz_check_error(rc, &err);
		if (rc == 0) {
			json_decref(compare_json(&rd, &rd, &c));
			compare_print(null, &rd, &rd, &c);
		}
	}
	run_data_release(&rd);
	return 0;
}
