/* servesim — workload arrays and trace_read() (the readers: registry.c).
 *
 * Readers (readers.c) append rows in file order; this file turns that into
 * the workload contract: sorted by arrival (stable, so ties keep file order)
 * and shifted so that the first arrival is 0.
 */
#define _GNU_SOURCE     /* fopencookie */
#include "workload-int.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "bigmem.h"
#include "ss-sort.h"

void workload_init(struct workload *wl)
{
	*wl = (struct workload){ .format = TRACE_AUTO };
}

void workload_release(struct workload *wl)
{
	if (!wl)
		return;
	free(wl->req);
	free(wl->hashes);
	free(wl->sess);
	free(wl->adapter);
	workload_init(wl);
}

/* Capacity for at least need entries: doubling from 1024, so n appends cost
 * O(n) copies and O(log n) reallocations. */
static int grow(void **buf, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 1024;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		c *= 2;
	}
	p = realloc(*buf, c * elem);
	if (!p)
		return -ENOMEM;
	ss_advise_huge(p, c * elem);
	*buf = p;
	*cap = c;
	return 0;
}

int wl_reserve(struct workload *wl, size_t n)
{
	void *p = wl->req;
	int rc = grow(&p, &wl->cap, n, sizeof(*wl->req));

	wl->req = p;
	return rc;
}

int wl_reserve_hashes(struct workload *wl, size_t n)
{
	void *p = wl->hashes;
	int rc = grow(&p, &wl->cap_hashes, n, sizeof(*wl->hashes));

	wl->hashes = p;
	return rc;
}

static inline bool arrival_before(const void *ctx, const struct wl_request *a,
				  const struct wl_request *b)
{
	(void)ctx;
	return a->arrival_ns < b->arrival_ns;
}

/* Stable by arrival_ns (common/ss-sort.h): qsort() is not stable and an
 * index tiebreak would cost a second array anyway. */
SS_SORT_DEFINE(sort_arrivals, struct wl_request, arrival_before);

/* Stable sort by arrival_ns.  Traces are nearly always sorted already, so
 * check first. */
/* A request and the adapter it names, sorted together. */
struct tagged {
	struct wl_request r;
	int32_t adapter;
};

static inline bool tagged_before(const void *ctx, const struct tagged *a, const struct tagged *b)
{
	(void)ctx;
	return a->r.arrival_ns < b->r.arrival_ns;
}

SS_SORT_DEFINE(sort_tagged, struct tagged, tagged_before);

/* sort_by_arrival for a workload with an adapter column: the two arrays
 * through one of pairs (only for such traces: they are rare). */
static int sort_tagged_by_arrival(struct workload *wl)
{
	size_t n = wl->n;
	struct tagged *t = malloc(n * sizeof(*t)), *b = malloc(n * sizeof(*b));

	if (!t || !b) {
		free(t);
		free(b);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		t[i] = (struct tagged){ wl->req[i], wl->adapter[i] };
	sort_tagged(t, b, n, NULL);
	for (size_t i = 0; i < n; i++) {
		wl->req[i] = t[i].r;
		wl->adapter[i] = t[i].adapter;
	}
	free(t);
	free(b);
	return 0;
}

static int sort_by_arrival(struct workload *wl)
{
	struct wl_request *a = wl->req, *b;
	size_t n = wl->n, i;

	for (i = 1; i < n; i++)
		if (a[i].arrival_ns < a[i - 1].arrival_ns)
			break;
	if (i >= n)
		return 0;
	if (wl->adapter)
		return sort_tagged_by_arrival(wl);
	b = malloc(n * sizeof(*b));
	if (!b)
		return -ENOMEM;
	ss_advise_huge(b, n * sizeof(*b));
	sort_arrivals(a, b, n, NULL);
	free(b);
	return 0;
}

/* A stream that gives the peeked bytes, then the rest of the underlying
 * stream (which it does not close). */
struct peek_cookie {
	const struct trace_peek *pk;
	size_t off;     /* peeked bytes already given */
	FILE *rest;
};

static ssize_t peek_read(void *cookie, char *buf, size_t n)
{
	struct peek_cookie *pc = cookie;
	size_t k;

	if (pc->off < pc->pk->len) {
		k = pc->pk->len - pc->off < n ? pc->pk->len - pc->off : n;
		memcpy(buf, pc->pk->buf + pc->off, k);
		pc->off += k;
		return (ssize_t)k;
	}
	k = fread(buf, 1, n, pc->rest);
	if (k == 0 && ferror(pc->rest))
		return -1;
	return (ssize_t)k;
}

static int peek_close(void *cookie)
{
	(void)cookie;
	return 0;
}

int trace_read_ordered(struct workload *wl, const char *path,
		       enum trace_format fmt, bool sort, struct ss_error *err)
{
	const struct trace_reader *rd;
	struct trace_peek pk = { 0 };
	struct peek_cookie pc = { .pk = &pk };
	void *priv = NULL;
	FILE *f = NULL, *in = NULL;
	int64_t min;
	int rc;

	assert(wl->n == 0 && wl->n_hashes == 0);
	if (fmt != TRACE_AUTO && !trace_reader_for(fmt)) {
		rc = ss_error_set(err, -EINVAL, path, 0, "unknown trace format %d", (int)fmt);
		goto out;
	}
	/* "-": standard input, read once as a stream like a pipe; errors
	 * name it "<stdin>" */
	if (!strcmp(path, "-")) {
		path = TRACE_STDIN_NAME;
		f = stdin;
	} else {
		f = fopen(path, "rb");
	}
	if (!f) {
		rc = -errno;
		ss_error_set(err, rc, path, 0, "cannot open trace: %s", strerror(-rc));
		goto out;
	}
	in = f;
	if (fmt == TRACE_AUTO) {
		/* detect from the first line, then read on from the same stream
		 * (a pipe cannot be reopened or rewound) */
		pc.rest = f;
		rc = trace_peek_detect(f, path, &pk, &fmt, err);
		if (rc)
			goto out;
		in = fopencookie(&pc, "rb", (cookie_io_functions_t){ .read = peek_read,
								      .close = peek_close });
		if (!in) {
			rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
			goto out;
		}
	}
	rd = trace_reader_for(fmt);
	assert(rd && rd->version == TRACE_READER_VERSION && rd->info.fmt == fmt);
	if (rd->priv_size) {
		priv = calloc(1, rd->priv_size);
		if (!priv) {
			rc = ss_error_set(err, -ENOMEM, path, 0, "out of memory");
			goto out;
		}
	}
	rc = rd->read(wl, in, path, priv, err);
	if (rc)
		goto out;
	if (sort) {
		rc = sort_by_arrival(wl);
		if (rc) {
			ss_error_set(err, rc, path, 0, "out of memory sorting the trace");
			goto out;
		}
	}
	min = wl->n ? wl->req[0].arrival_ns : 0;
	for (size_t i = 1; i < wl->n; i++)
		if (wl->req[i].arrival_ns < min)
			min = wl->req[i].arrival_ns;
	for (size_t i = 0; i < wl->n; i++)
		wl->req[i].arrival_ns -= min;
	wl->format = fmt;
	snprintf(wl->source, sizeof(wl->source), "%s", path);
out:
	free(priv);
	if (in && in != f)
		fclose(in);
	if (f && f != stdin)
		fclose(f);
	free(pk.buf);
	if (rc) {
		workload_release(wl);
		workload_init(wl);
	}
	return rc;
}

int trace_read(struct workload *wl, const char *path, enum trace_format fmt,
	       struct ss_error *err)
{
	return trace_read_ordered(wl, path, fmt, true, err);
}
