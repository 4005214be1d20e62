/* placeholder: being written (calibrate import / list / export) */
#include "cli.h"
int cal_cli_import(int argc, char **argv) { (void)argc; (void)argv; return SS_EXIT_FAILURE; }
int cal_cli_list(int argc, char **argv) { (void)argc; (void)argv; return SS_EXIT_FAILURE; }
int cal_cli_export(int argc, char **argv) { (void)argc; (void)argv; return SS_EXIT_FAILURE; }
