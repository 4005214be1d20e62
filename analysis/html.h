/* servesim — report.html: one self-contained HTML page per result.
 *
 * run, live, plan and compare write DIR/report.html beside their other
 * outputs (docs/outputs.md): the headline tables, the plots and the
 * configuration in one file that needs nothing else.  The PNGs are embedded
 * as base64 data: URIs, the style sheet is inline, there is no script and
 * no reference to any other file or to the network, so the page can be
 * mailed, archived or opened offline and still shows everything.
 *
 * Two levels of API:
 *
 * 1. html_page_write(): a whole page from a title, tables and image paths,
 *    for a command that has its figures as text already (a sweep, say):
 *
 *	const char *head[] = { "rate", "TTFT p99 ms" };
 *	const char *cells[] = { "1", "80.1", "2", "95.3" };      // row-major
 *	struct html_table t = { .caption = "results", .n_cols = 2, .n_rows = 2,
 *				.head = head, .cells = cells };
 *	const char *img[] = { "sweep_ttft.png" };                // in dir
 *	html_page_write(dir, &(struct html_page){ .title = "servesim sweep",
 *			.command_line = cmdline, .tables = &t, .n_tables = 1,
 *			.images = img, .n_images = 1 }, &err);
 *
 * 2. The pieces, for a page built by hand inside html_file_open() /
 *    html_file_commit(): headings, paragraphs, key/value lists, tables,
 *    preformatted text and images, written to a stdio stream.
 *
 * Every string given to these functions is text, never markup: each is
 * HTML-escaped (& < > " ' become entities, control characters '?'), so a
 * label, trace path or model name cannot break the page.  Output is
 * deterministic (no timestamps), like summary.json.
 */
#ifndef SS_HTML_H
#define SS_HTML_H

#include <stdbool.h>
#include <stdio.h>

#include "ss-error.h"
#include "ss-file.h"

/* The file name every command writes in its --out directory. */
#define HTML_REPORT_NAME "report.html"

/* A table: n_rows rows of n_cols cells, row-major in cells[n_rows * n_cols];
 * head[n_cols] the column headings (NULL: none).  A NULL cell is shown as
 * "-".  The first column is a row heading (left-aligned, bold); the others
 * are right-aligned when they look like numbers. */
struct html_table {
	const char *caption;         /* shown above the table; NULL: none */
	int n_cols, n_rows;
	const char *const *head;
	const char *const *cells;
	/* A table of settings rather than figures: cells may break anywhere
	 * (long paths) rather than widen the table past the page, and numbers
	 * are left-aligned like the text around them.  false: a table wider
	 * than the page scrolls. */
	bool wrap;
};

/* A whole page (html_page_write()).  Every field but title may be NULL / 0. */
struct html_page {
	const char *title;           /* the <title> and the top heading */
	const char *subtitle;        /* a line under the heading (what was run) */
	const char *command_line;    /* shown under "Configuration" */
	const struct html_table *tables;
	int n_tables;
	/* PNG files (paths relative to the directory the page is written to,
	 * or absolute), embedded in order; a missing one is named in a note */
	const char *const *images;
	int n_images;
	/* Why there are no images, when there are none or some are missing
	 * ("gnuplot was not found ..."); NULL: nothing said. */
	const char *plots_note;
	const char *text;            /* preformatted text at the end (a summary as printed) */
	const char *text_title;      /* its heading; NULL: "Text summary" */
};

/* Write dir/report.html from p, atomically (a temporary file renamed; on
 * failure nothing is left under either name). */
int html_page_write(const char *dir, const struct html_page *p, struct ss_error *err);

/* ---- the pieces ----------------------------------------------------------- */

/* Open dir/report.html's temporary file (outdir-int.h's rules) and write
 * the document head, inline style, <h1>title</h1> and, when subtitle is
 * not NULL, a line under it.  Then write with the functions below to of->f
 * and finish with html_file_commit() (or ss_file_abort() on an error). */
int html_file_open(struct ss_file *of, const char *dir, const char *title, const char *subtitle,
		   struct ss_error *err);
/* Close the document and rename it into place. */
int html_file_commit(struct ss_file *of, struct ss_error *err);

/* s, escaped; NULL writes nothing. */
void html_escape(FILE *f, const char *s);
/* A section heading (level 2 or 3) with an id for in-page links (may be NULL). */
void html_heading(FILE *f, int level, const char *text, const char *id);
/* A paragraph of printf-formatted text, escaped after formatting. */
void html_para(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A note (a paragraph set apart: warnings, missing plots), formatted and escaped. */
void html_note(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Preformatted text (a summary as printed, a command line). */
void html_pre(FILE *f, const char *text);
/* A table. */
void html_table(FILE *f, const struct html_table *t);
/* A two-column table of n (key, value) pairs in kv[2 * n]; NULL values are
 * left out. */
void html_kv(FILE *f, const char *caption, const char *const *kv, int n);
/* The PNG at path embedded as a data: URI, with alt text, in a figure with
 * caption alt.  Returns 0, or a negative errno when the file cannot be read
 * or is not a PNG: then a note naming it is written instead (a page with a
 * missing plot is still a page). */
int html_image(FILE *f, const char *path, const char *alt);
/* The images of a directory: dir/names[i].png for each i, under a "Plots"
 * heading; note (may be NULL) is shown first, and instead of the images
 * when skipped (gnuplot absent: no PNG exists). */
void html_plots(FILE *f, const char *dir, const char *const *names, int n, bool skipped,
		const char *note);

/* An arena of formatted table cells for a page built in memory: cap
 * strings of HTML_CELL bytes, .c = calloc(cap, HTML_CELL) by the caller,
 * who sizes it for every cell the page has and frees .c. */
#define HTML_CELL 192
struct html_cells {
	char (*c)[HTML_CELL];
	size_t n, cap;
};
/* The next cell of the arena, printf-formatted (truncated at HTML_CELL);
 * "?" when the arena is full (a sizing bug: asserted in debug builds). */
const char *html_cellf(struct html_cells *cs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A command line as one string, each argument shell-quoted where it needs
 * it: "servesim run --label 'a b'".  prog is what stands first ("servesim
 * run"), argv[1..argc) follow.  (transfer full) NULL when out of memory. */
char *html_command_line(const char *prog, int argc, char *const *argv);

/* The whole of a stream-writing function's output as a string: fn(f, ctx)
 * into memory.  (transfer full) NULL when out of memory. */
char *html_capture(void (*fn)(FILE *f, const void *ctx), const void *ctx);

#endif
