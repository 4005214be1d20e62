/* Energy meters: RAPL read through a powercap tree (with counter wrap), and
 * absent meters (no RAPL file, no NVML device) report "no energy", never 0. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check-main.h"
#include "meter.h"

static char root[64];

static void write_file(const char *name, const char *text)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/intel-rapl:0/%s", root, name);
	f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(rapl_reads_and_wraps)
{
	struct meter m;
	double a, b;
	char dir[128];

	snprintf(root, sizeof(root), "/tmp/ss-meter-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/intel-rapl:0", root);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	write_file("energy_uj", "1000000\n");
	write_file("max_energy_range_uj", "4000000\n");
	meter_open(&m, "cpu", NULL, root);
	ck_assert_int_eq(m.kind, METER_RAPL);
	ck_assert(meter_read(&m, &a));
	ck_assert_double_eq_tol(a, 1.0, 1e-12);          /* µJ -> J */
	write_file("energy_uj", "500000\n");              /* wrapped past 4 J */
	ck_assert(meter_read(&m, &b));
	ck_assert_double_eq_tol(meter_delta(&m, a, b), 3.5, 1e-12);
	meter_close(&m);
	{
		char p[256];

		snprintf(p, sizeof(p), "%s/energy_uj", dir);
		unlink(p);
		snprintf(p, sizeof(p), "%s/max_energy_range_uj", dir);
		unlink(p);
		rmdir(dir);
		rmdir(root);
	}
}
END_TEST

START_TEST(absent_meters)
{
	struct meter m;
	double j = 42;

	meter_open(&m, "cpu", NULL, "/nonexistent-powercap");
	ck_assert_int_eq(m.kind, METER_NONE);
	ck_assert(!meter_read(&m, &j));
	ck_assert_double_eq(j, 42);                       /* untouched: no fake zero */
	ck_assert_ptr_nonnull(strstr(m.what, "no RAPL"));
	meter_close(&m);
	/* No GPU here (and maybe no NVML): the CUDA meter must be absent, not
	 * an error; where a GPU exists this test only checks it is sane. */
	meter_open(&m, "cuda", "0000:FF:1F.7", NULL);
	if (m.kind == METER_NONE)
		ck_assert(!meter_read(&m, &j));
	meter_close(&m);
	/* The GPU meter is the backend's device, by PCI bus id, never a
	 * default index: without one (a host backend's) there is none. */
	meter_open(&m, "cuda", NULL, NULL);
	ck_assert_int_eq(m.kind, METER_NONE);
	ck_assert_ptr_nonnull(strstr(m.what, "no PCI bus id"));
	meter_close(&m);
	meter_open(&m, "cuda", "", NULL);
	ck_assert_int_eq(m.kind, METER_NONE);
	meter_close(&m);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("meter");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, rapl_reads_and_wraps);
	tcase_add_test(tc, absent_meters);
	suite_add_tcase(s, tc);
	return s;
}
