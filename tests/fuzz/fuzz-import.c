/* servesim — fuzz target: a calibration profile table (aiconfigurator or
 * Vidur CSV, detected from its header) imported by cal_import_file() into a
 * scratch store.  The file lies under compute/a100/org/model/ so that a
 * Vidur table finds its GPU in the path as it would in a Vidur checkout.
 * Each input's import runs inside a transaction that is rolled back, so
 * inputs do not see each other's rows. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "import.h"
#include "store.h"

static struct cal_store *store;
static char table[1024];

static void setup(void)
{
	struct ss_error err = { 0 };
	char path[1024];
	const char *parts[] = { "compute", "a100", "org", "model" };

	snprintf(path, sizeof(path), "%s", fuzz_dir());
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		snprintf(path + strlen(path), sizeof(path) - strlen(path), "/%s", parts[i]);
		mkdir(path, 0700);
	}
	snprintf(table, sizeof(table), "%.900s/a100_table.csv", path);
	snprintf(path, sizeof(path), "%s/store.db", fuzz_dir());
	if (cal_store_open(&store, path, CAL_OPEN_CREATE, &err)) {
		fprintf(stderr, "fuzz-import: %s\n", err.msg);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ss_error err = { 0 };
	struct cal_import_stats st = { 0 };
	FILE *f;
	int rc;

	if (!store)
		setup();
	f = fopen(table, "wb");
	if (!f || fwrite(data, 1, size, f) != size || fclose(f)) {
		perror(table);
		abort();
	}
	if (cal_store_begin(store, &err)) {
		fprintf(stderr, "fuzz-import: %s\n", err.msg);
		abort();
	}
	rc = cal_import_file(store, table, CAL_IMPORT_AUTO, NULL, &st, &err);
	fuzz_check_error(rc, &err);
	cal_store_rollback(store);
	return 0;
}
