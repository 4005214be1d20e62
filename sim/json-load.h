/* servesim — reading a JSON document from memory faster than jansson's
 * lexer does, for the catalogs read at every start-up (sim/catalog.c).
 *
 * jansson reads every byte through its stream (with a UTF-8 check) and
 * every string byte through a growing buffer: about 156 instructions a
 * byte of the catalogs, half of a short run's start-up.  ss_json_loadb
 * parses the common case itself, building the same values through
 * jansson's own constructors, and hands anything else to json_loadb:
 * non-ASCII bytes, \u escapes, integers of more than 18 digits, a number
 * strtod does not read whole or that overflows, a duplicate key under
 * JSON_REJECT_DUPLICATES, nesting deeper than jansson allows, any syntax
 * error, out of memory, and any flag but JSON_REJECT_DUPLICATES.  So an
 * error is always jansson's own (text, line, column), and a document is
 * the same value either way (test-catalog's json_load_* tests).
 */
#ifndef SS_JSON_LOAD_H
#define SS_JSON_LOAD_H

#include <stddef.h>

#include <jansson.h>

/* json_loadb(buf, len, flags, err): the same value or the same error. */
json_t *ss_json_loadb(const char *buf, size_t len, size_t flags, json_error_t *err);

#endif
