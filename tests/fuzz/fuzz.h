/* servesim — helpers shared by the fuzz targets in tests/fuzz/.
 *
 * Every target is one LLVMFuzzerTestOneInput.  It is built twice: with
 * clang -fsanitize=fuzzer for coverage-guided fuzzing (scripts/fuzz.sh), and
 * in the ordinary build linked with replay.c, whose main runs every file of
 * the target's corpus through it (the corpus is a regression suite under the
 * plain, ASan/UBSan and valgrind test runs).
 *
 * A target must never crash, hang, leak or trip a sanitizer on any input, and
 * an input the library rejects must come with an error message (checked by
 * fuzz_check_error): a parser that returns an error code with an empty
 * message would reach the user as a blank line.
 */
#ifndef SS_FUZZ_H
#define SS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "ss-error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Path of a private scratch directory (created on first use, removed at
 * exit); the same for the whole process. */
const char *fuzz_dir(void);

/* Write data to fuzz_dir()/name (replacing it) and return its path, a
 * static buffer valid until the next call.  Aborts on I/O errors: those
 * are failures of the harness, not findings. */
const char *fuzz_file(const char *name, const uint8_t *data, size_t size);

/* Abort unless rc == 0 or err holds a message for a negative rc: every
 * rejected input must say why. */
void fuzz_check_error(int rc, const struct ss_error *err);

#endif
