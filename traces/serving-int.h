/* servesim — serving result readers' internals, shared by serving.c,
 * serving-csv.c and the trace readers (readers.c).  Private to traces/. */
#ifndef SS_SERVING_INT_H
#define SS_SERVING_INT_H

#include "serving.h"
#include "workload.h"

/* Most requests one run may hold (as a workload: WL_MAX_REQUESTS). */
#define SERVING_MAX_REQUESTS 100000000u

/* Largest time or duration a reader accepts (ns): about 146 years, half of
 * INT64_MAX, so that sums and differences of two still fit. */
#define SERVING_TIME_MAX_NS 4.6e18

/* Append a run with every value "absent"; NULL when out of memory. */
struct serving_run *serving_run_append(struct serving_set *set, enum serving_format fmt,
				       long line);
/* Append a request with every value "absent", ok; NULL when out of memory
 * or past SERVING_MAX_REQUESTS. */
struct serving_request *serving_req_append(struct serving_run *r);

void serving_copy_str(char *dst, size_t cap, const char *src);
const char *serving_basename(const char *path);
/* 1-based line of byte off of buf. */
long serving_line_at(const char *buf, size_t off);

/* Set r->req[i].issue_ns from raw_s[i] (seconds on any origin; NAN: none)
 * relative to the earliest; what names the field in errors. */
int serving_issue_from_s(struct serving_run *r, const double *raw_s, const char *path,
			 const char *what, struct ss_error *err);

/* The CSV formats (serving-csv.c): buf holds the whole file, NUL-free. */
int serving_read_csv(struct serving_set *set, const char *buf, size_t len, const char *path,
		     enum serving_format fmt, struct ss_error *err);

/* A per-request result's requests as a workload (readers.c's trace
 * sources): exactly one run with per-request records and issue times, or
 * an error saying what is missing.  Failed requests (ok == false) are left
 * out. */
int serving_to_workload(struct workload *wl, FILE *f, const char *path,
			enum serving_format fmt, struct ss_error *err);

#endif
