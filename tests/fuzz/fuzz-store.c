/* servesim — fuzz target: a calibration store given to --calibration
 * (any bytes as an SQLite file: malformed, hostile or of another schema),
 * opened read-only and read the way a simulation loads its tables, then
 * listed as `calibrate list` does. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>

#include "grid.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file("store.db", data, size);
	struct ss_error err = { 0 };
	struct cal_store *s = NULL;
	struct cal_data d;
	static FILE *null;
	int rc;

	if (!null && !(null = fopen("/dev/null", "w")))
		abort();
	rc = cal_store_open(&s, path, CAL_OPEN_READONLY, &err);
	fuzz_check_error(rc, &err);
	if (rc)
		return 0;
	cal_data_init(&d);
	rc = cal_data_load_store(&d, s, 0, NULL, ~0u, NULL, NULL, &err);
	fuzz_check_error(rc, &err);
	cal_data_release(&d);
	err = (struct ss_error){ 0 };
	if (cal_store_count(s, NULL, -1, &err) < 0 && !err.msg[0])
		abort();
	err = (struct ss_error){ 0 };
	rc = cal_store_list(s, null, &err);
	fuzz_check_error(rc, &err);
	cal_store_close(s);
	return 0;
}
