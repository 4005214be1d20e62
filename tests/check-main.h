/* Shared main() for Check test programs: each defines make_suite(). */
#ifndef SS_CHECK_MAIN_H
#define SS_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

Suite *make_suite(void);

int main(void)
{
	SRunner *sr = srunner_create(make_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
