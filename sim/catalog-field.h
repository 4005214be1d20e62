/* servesim — the fields of a catalog entry, declared once.
 *
 * A catalog entry (a model, a GPU, an engine profile) is a C struct read
 * from JSON.  Each of its keys is one struct catalog_field: its JSON name,
 * type, unit, bounds and offset in the struct, and, for engine profiles,
 * whether calibrate fit-engine may fit it, its help text and how it reads
 * in the profile's one-line description.  The reader (catalog.c), the
 * writer (catalog_entry_json: fit-engine's --out and --store, `list
 * engines --json`), the fittable parameter names and the description
 * (engine_profile_describe: a plan's fingerprint, summary.json's engine
 * line) are loops over one table, so a new key is one line there (and its
 * field in the struct), as git's parse-options declares an option once.
 */
#ifndef SS_CATALOG_FIELD_H
#define SS_CATALOG_FIELD_H

#include <stdbool.h>
#include <stddef.h>

enum catalog_field_kind {
	CF_STR,          /* string copied into a char[size] */
	CF_INT,          /* JSON integer in [min, max] stored as int */
	CF_POS,          /* JSON number > 0 stored as double */
	CF_NONNEG,       /* JSON number >= 0 stored as double */
	CF_BOOL,         /* JSON true/false stored as bool */
	CF_ENUM,         /* JSON string, one of names[], stored as int index */
	CF_INTS,         /* JSON array of integers in [min, max], at most size of
			  * them, stored as int32_t[]; the count goes to count_off */
};

/* How a field reads in an entry's one-line description
 * (catalog_fields_describe): " TAG=VALUE", VALUE as the field's JSON has
 * it (a bool 0 or 1, an enum its name, a list comma-separated, a double
 * at %.17g). */
enum catalog_field_show {
	CF_SHOW_NEVER = 0,  /* left out (name, versions, source) */
	CF_SHOW_ALWAYS,     /* always there */
	/* only when set: the field (group 0), or its group (some field of the
	 * same group flagged lead), is above its quiet value, so that the
	 * description of an entry without that feature is what it was
	 * before the key existed */
	CF_SHOW_SET,
};

struct catalog_field {
	const char *key;                /* the JSON name */
	enum catalog_field_kind kind;
	size_t off;                     /* offset in the entry's struct */
	size_t size;                    /* CF_STR: buffer size, bytes; CF_INTS: most entries */
	long min, max;                  /* CF_INT, CF_INTS: accepted range */
	/* CF_POS, CF_NONNEG: plausible range (CF_NONNEG also takes 0), in the
	 * field's unit; beyond it a step or transfer time overflows int64 ns
	 * or rounds to nothing (an hbm_bw of 1e-300 B/s, an rdma_bw of 0.1) */
	double lo, hi;
	const char *unit;
	const char *const *names;       /* CF_ENUM: NULL-terminated; index 0 is what absent means */
	size_t count_off;               /* CF_INTS: offset of the int32_t count */
	bool optional;                  /* may be absent: then 0 */
	bool fit;                       /* CF_POS/CF_NONNEG: calibrate fit-engine may fit it */
	const char *help;               /* what it is, with its unit */
	/* the description (catalog_fields_describe) */
	enum catalog_field_show show;
	const char *tag;                /* its name there; NULL: key */
	int group;                      /* CF_SHOW_SET: shown with its group (0: alone) */
	bool lead;                      /* CF_SHOW_SET in a group: being set shows the group */
	double quiet;                   /* CF_SHOW_SET: set means above this (1: a count whose 1 is off) */
	double zero_as;                 /* a 0 is shown as this (a default spelled out); 0: as 0 */
	const char *empty_as;           /* CF_STR: "" is shown as this */
};

/* The value of f in entry as a number: a string's length, a list's count,
 * an enum's index, a bool 0 or 1. */
double catalog_field_number(const struct catalog_field *f, const void *entry);

/* Append " TAG=VALUE" for every field of fields[0..n) that shows (see
 * enum catalog_field_show) to buf (len bytes), whose first at bytes are
 * written; returns the new at (>= len when truncated, as snprintf's). */
size_t catalog_fields_describe(const struct catalog_field *fields, size_t n, const void *entry,
			       char *buf, size_t len, size_t at);

/* The number field named key of entry (one of fields[0..n)) that
 * calibrate fit-engine may fit (.fit), or NULL when there is none. */
double *catalog_fields_fit_param(const struct catalog_field *fields, size_t n, void *entry,
				 const char *key);

/* Flags of catalog_entry_json. */
enum {
	/* every key, those at their absent value too, where the reader
	 * takes that value back (an enum's first name, false, 0, []): a
	 * listing; without it only the keys that differ from absent, as a
	 * catalog file is written */
	CATALOG_JSON_EVERY = 1,
};

/* entry as a JSON object of its fields (the reader's input: reading it
 * back gives every field as it is), or NULL out of memory.  (transfer
 * full) */
struct json_t;
struct json_t *catalog_entry_json(const struct catalog_field *fields, size_t n, const void *entry,
				  unsigned flags);

#endif
