/* servesim — replay a fuzz corpus through a target without libFuzzer.
 *
 * Usage: fuzz-TARGET FILE|DIR...  Every regular file named, and every file in
 * a directory named (not recursively), is passed once to
 * LLVMFuzzerTestOneInput.  A crash or sanitizer report ends the process;
 * otherwise the exit status is 0, or 1 when an argument cannot be read.
 * Files run in name order, so a failure reproduces the same way. */
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		perror(path);
		if (f)
			fclose(f);
		return 1;
	}
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		perror(path);
		free(buf);
		fclose(f);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int bad = 0, runs = 0;

	for (int i = 1; i < argc; i++) {
		struct dirent **ents;
		struct stat sb;
		int n;

		if (stat(argv[i], &sb) != 0) {
			perror(argv[i]);
			bad = 1;
			continue;
		}
		if (!S_ISDIR(sb.st_mode)) {
			bad |= run_file(argv[i]);
			runs++;
			continue;
		}
		n = scandir(argv[i], &ents, NULL, alphasort);
		if (n < 0) {
			perror(argv[i]);
			bad = 1;
			continue;
		}
		for (int k = 0; k < n; k++) {
			char path[4096];

			snprintf(path, sizeof(path), "%s/%s", argv[i], ents[k]->d_name);
			if (ents[k]->d_name[0] != '.' && stat(path, &sb) == 0 &&
			    S_ISREG(sb.st_mode)) {
				bad |= run_file(path);
				runs++;
			}
			free(ents[k]);
		}
		free(ents);
	}
	printf("replayed %d inputs\n", runs);
	return bad;
}
