/* Shared fixture for Check tests that read the shipped catalog: `cat`,
 * loaded from SERVESIM_DATA (default the source tree's data/) by setup()
 * and released by teardown() (tcase_add_checked_fixture). */
#ifndef SS_CATALOG_FIXTURE_H
#define SS_CATALOG_FIXTURE_H

#include <check.h>
#include <stdlib.h>

#include "catalog.h"
#include "config.h"

static struct catalog cat;

static const char *data_dir(void)
{
	const char *d = getenv("SERVESIM_DATA");

	return d && *d ? d : SERVESIM_SRC_DATADIR;
}

static void setup(void)
{
	struct ss_error err = { 0 };

	catalog_init(&cat);
	ck_assert_msg(catalog_load_dir(&cat, data_dir(), &err) == 0, "%s", err.msg);
}

static void teardown(void)
{
	catalog_release(&cat);
}

#endif
