/* placeholder: being written (calibrate check) */
#include "cli.h"
int cal_cli_check(int argc, char **argv) { (void)argc; (void)argv; return SS_EXIT_FAILURE; }
