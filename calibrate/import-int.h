/* servesim — importers' internals: the importer ops table, the CSV driver's
 * view of a file and row, and the helpers every importer uses.  Private to
 * calibrate/.
 *
 * The driver (import section of store.c) reads a CSV with libcsv, tracks
 * 1-based line numbers, checks every record has the header's field count,
 * picks the importer whose `match` accepts the header, and calls its
 * methods.  An importer only maps one row's fields to measurements.
 */
#ifndef SS_CAL_IMPORT_INT_H
#define SS_CAL_IMPORT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "import.h"

#define CAL_IMPORTER_VERSION 1

/* One CSV data record. */
struct imp_row {
	const char *const *f;   /* fields, NUL-terminated; as many as the header */
	long line;              /* 1-based line where the record starts */
};

/* One file being imported. */
struct imp_file {
	struct cal_store *store;
	const struct cal_import_opts *opts;
	struct cal_import_stats st;     /* this file's counts */
	const char *path;               /* as the caller gave it, for errors */
	char source[256];               /* provenance stored with each row */
	const char *const *cols;        /* header names */
	size_t ncols;
	long header_line;
	void *priv;                     /* importer state: priv_size bytes, zeroed */
};

struct cal_importer {
	int version;                    /* CAL_IMPORTER_VERSION */
	const char *name;               /* cal_import_kind_name() */
	size_t priv_size;               /* struct imp_file.priv, allocated zeroed */
	enum cal_import_kind kind;
	const char *expect;             /* identifying columns, for errors */
	/* Does this header belong to this importer's table? */
	bool (*match)(const char *const *cols, size_t n);
	/* Resolve the columns the importer reads (imp_col_req). */
	int (*begin)(struct imp_file *f, struct ss_error *err);
	int (*row)(struct imp_file *f, const struct imp_row *r, struct ss_error *err);
	/* Optional: after the last row; buffering importers insert here. */
	int (*end)(struct imp_file *f, struct ss_error *err);
	/* Optional: free what begin/row/end allocated in priv; called once,
	 * whether the import succeeded or not. */
	void (*release)(struct imp_file *f);
};

/* The registered importers (calibrate/importers.def). */
#define IMPORTER(ident) extern const struct cal_importer cal_importer_##ident;
#include "importers.def"
#undef IMPORTER

/* ---- helpers (store.c) ---------------------------------------------------- */

/* Is a column with this name in the header? */
bool imp_has_col(const char *const *cols, size_t n, const char *name);
/* Column index, or -1. */
int imp_col(const struct imp_file *f, const char *name);
/* Column index, or an error naming the missing column and the table. */
int imp_col_req(struct imp_file *f, const struct cal_importer *imp, const char *name,
		int *col, struct ss_error *err);

/* Field col of r as an integer >= min ("4096" or "4096.0"). */
int imp_int(const struct imp_file *f, const struct imp_row *r, int col, int64_t min,
	    int64_t *out, struct ss_error *err);
/* A time in ms: finite and >= 0.  An empty field is NAN when empty_ok. */
int imp_ms(const struct imp_file *f, const struct imp_row *r, int col, bool empty_ok,
	   double *out, struct ss_error *err);
/* True/False (pandas), true/false, 1/0. */
int imp_bool(const struct imp_file *f, const struct imp_row *r, int col, bool *out,
	     struct ss_error *err);
/* The store's dtype name ("bf16") for a source's ("bfloat16"), and its size
 * in bytes (0 when not a fixed-size element type, e.g. fp8_block). */
int imp_dtype(const struct imp_file *f, const struct imp_row *r, int col,
	      const char **dtype, int *elem_bytes, struct ss_error *err);
/* Error at r's line: "COLUMN: MESSAGE" about field col (err first, as in
 * ss_error_set, because of the variable arguments). */
int imp_field_error(struct ss_error *err, const struct imp_file *f, const struct imp_row *r,
		    int col, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Does dtype pass opts->dtypes? ("" always passes.) */
bool imp_keep_dtype(const struct imp_file *f, const char *dtype);

/* Catalog device for a row: opts->device if set, else cal_import_gpu_name(raw),
 * else an error at line (0 = about the file) naming raw. */
int imp_device(const struct imp_file *f, const char *raw, long line, char *out,
	       size_t len, struct ss_error *err);
/* The path component after the last component named dir ("compute" in
 * ".../compute/h100/meta-llama/..."), into out; false when there is none. */
bool imp_component_after(const char *path, const char *dir, char *out, size_t len);
/* The file name's text before its first '_' ("a100" for
 * "a100_cpu_overheads.csv"). */
void imp_basename_prefix(const char *path, char *out, size_t len);

/* Insert m with this file's source and line; counts it in f->st. */
int imp_insert(struct imp_file *f, struct cal_meas *m, long line, struct ss_error *err);

/* Thin a grid to opts->per_octave points per octave: vals[0..n) are one
 * group's values (any order, repeats allowed, all >= 1); keep[i] is set for
 * the smallest value in each 1/per_octave-octave bucket and for the largest
 * value (every repeat of a kept value is kept).  per_octave 0 keeps all.
 * Returns -ENOMEM on allocation failure. */
int imp_thin(const int64_t *vals, size_t n, int per_octave, bool *keep);

#endif
