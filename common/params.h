/* servesim — "name:key=value,key=value" specifications.
 *
 * Every pluggable choice on the command line (policy, cost model, arrival
 * process, length distribution, SLO) is written as a name with optional
 * parameters.  A parameter without '=' is positional and is stored under the
 * key "_" (e.g. "empirical:trace.csv").  Getters mark keys as used so that
 * ss_params_check_unused() can reject typos instead of ignoring them.
 */
#ifndef SS_PARAMS_H
#define SS_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ss-error.h"

#define SS_PARAMS_MAX 24

struct ss_param {
	char key[48];
	char val[464];
	bool used;
};

struct ss_params {
	char what[32];   /* option the spec came from, e.g. "--policy", for errors */
	char name[64];   /* part before ':'; may be empty for pure key=value lists */
	int n;
	struct ss_param kv[SS_PARAMS_MAX];
	/* the keys the getters asked for, in order, for the unknown-key error */
	int n_asked;
	char asked[SS_PARAMS_MAX][48];
};

/* Parse spec.  With name_required false, a spec without ':' whose first item
 * contains '=' is a bare key=value list (used by --slo). */
int ss_params_parse(struct ss_params *p, const char *what, const char *spec,
		    bool name_required, struct ss_error *err);

bool ss_params_has(const struct ss_params *p, const char *key);
/* Raw string value or def; marks the key used. */
const char *ss_params_str(struct ss_params *p, const char *key, const char *def);
int ss_params_double(struct ss_params *p, const char *key, double def,
		     double *out, struct ss_error *err);
int ss_params_int(struct ss_params *p, const char *key, int64_t def,
		  int64_t *out, struct ss_error *err);
int ss_params_bool(struct ss_params *p, const char *key, bool def, bool *out,
		   struct ss_error *err);
/* Error naming the first key no getter asked for, and the keys they asked
 * for ("unknown parameter 'x' (expected a, b or c)"). */
int ss_params_check_unused(const struct ss_params *p, struct ss_error *err);

/* Strict number parsing shared by readers and options: the whole string
 * (less leading spaces and trailing spaces or CR) must be one decimal
 * number -- no hexadecimal, inf or nan -- and a double must be finite.
 * *out is written only on success. */
bool ss_parse_double(const char *s, double *out);
bool ss_parse_int64(const char *s, int64_t *out);
/* The same within a range, for KEY=VALUE specs (--spec, --lora): 0 when s
 * is an integer in lo..hi / a number with gt < x <= le, else -1; *out is
 * written only on success. */
int ss_parse_long_in(const char *s, long lo, long hi, long *out);
int ss_parse_double_in(const char *s, double gt, double le, double *out);

/* One token of a KEY=VALUE,KEY=VALUE... spec (--spec, --lora) against a
 * key table: n entries of stride bytes, each starting with its name (a
 * const char *).  tok is split at its '=' (written over); returns the
 * key's index and sets *value, or -1 with msg (len bytes) saying
 * "'TOK': expected KEY=VALUE with KEY one of a, b, c" (the table's keys)
 * or "KEY= given twice" (seen[] marks the keys taken). */
int ss_keyval_take(char *tok, const void *keys, size_t stride, size_t n, bool *seen,
		   const char **value, char *msg, size_t len);

/* Longest line a reader accepts (bytes, not counting its CR/LF): a real
 * record is a few hundred bytes; a stream without newlines (/dev/zero, a
 * binary file) is an error instead of a read until memory runs out. */
#define SS_LINE_MAX (1u << 20)

/* Account for the next n bytes of a stream: *run is the length of the
 * current line so far (0 at the start; updated).  Returns n when every line
 * stays within max bytes, else the index of the byte that made one longer
 * (the bytes before it may still be parsed, to learn its line number). */
size_t ss_line_bounded(const char *buf, size_t n, size_t *run, size_t max);

#endif
