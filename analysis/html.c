/* servesim — report.html writer (see html.h). */
#include "html.h"
#include "outdir-int.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Readable on screen and in print without anything loaded: system fonts,
 * tables that scroll sideways on a narrow window, plots no wider than the
 * page. */
static const char style[] =
	"body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;"
	"margin:1.5em auto;max-width:1200px;padding:0 1em;color:#1a1a1a;background:#fff;"
	"line-height:1.4}\n"
	"h1{font-size:1.6em;margin:0 0 .2em}h2{font-size:1.25em;margin:1.6em 0 .5em;"
	"border-bottom:1px solid #ccc;padding-bottom:.15em}h3{font-size:1.05em;margin:1.2em 0 .4em}\n"
	".sub{color:#555;margin:0 0 1em}\n"
	"nav{margin:.5em 0 1em;font-size:.95em}nav a{margin-right:1em}\n"
	".scroll{overflow-x:auto;margin:.3em 0 1em}\n"
	"table{border-collapse:collapse;font-size:.9em}\n"
	"caption{text-align:left;font-weight:600;padding:.2em 0 .4em}\n"
	"th,td{border:1px solid #d0d0d0;padding:.25em .6em;vertical-align:top}\n"
	"table.wrap td{overflow-wrap:anywhere}table.wrap td.n{text-align:left}\n"
	"thead th{background:#eef1f5;text-align:center}\n"
	"tbody tr:nth-child(even){background:#f8f9fb}\n"
	"tbody th{text-align:left;font-weight:600;white-space:nowrap}\n"
	"td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
	"pre{background:#f5f5f5;border:1px solid #ddd;padding:.6em .8em;overflow-x:auto;"
	"font-size:.85em;line-height:1.3}\n"
	"code{overflow-wrap:anywhere}\n"
	".note{background:#fff8e1;border-left:4px solid #f0b400;padding:.4em .8em}\n"
	".plots{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}\n"
	"figure{margin:0 0 1em;flex:1 1 520px;max-width:900px}\n"
	"figure img{width:100%;height:auto;border:1px solid #ddd}\n"
	"figcaption{color:#555;font-size:.9em}\n";

void html_escape(FILE *f, const char *s)
{
	if (!s)
		return;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		switch (c) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default:
			/* control characters have no business in a page */
			fputc((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : c, f);
		}
	}
}

int html_file_open(struct ss_file *of, const char *dir, const char *title, const char *subtitle,
		   struct ss_error *err)
{
	int ret = outfile_open(of, dir, HTML_REPORT_NAME, 1u << 16, err);

	if (ret < 0)
		return ret;
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	      "<meta name=\"generator\" content=\"servesim\">\n<title>", of->f);
	html_escape(of->f, title);
	fprintf(of->f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>", style);
	html_escape(of->f, title);
	fputs("</h1>\n", of->f);
	if (subtitle) {
		fputs("<p class=\"sub\">", of->f);
		html_escape(of->f, subtitle);
		fputs("</p>\n", of->f);
	}
	return 0;
}

int html_file_commit(struct ss_file *of, struct ss_error *err)
{
	fputs("</body>\n</html>\n", of->f);
	return outfile_commit(of, err);
}

void html_heading(FILE *f, int level, const char *text, const char *id)
{
	level = level < 2 ? 2 : level > 3 ? 3 : level;
	fprintf(f, "<h%d", level);
	if (id) {
		fputs(" id=\"", f);
		html_escape(f, id);
		fputc('"', f);
	}
	fputc('>', f);
	html_escape(f, text);
	fprintf(f, "</h%d>\n", level);
}

static void vpara(FILE *f, const char *cls, const char *fmt, va_list ap)
{
	char buf[2048];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	fputs(cls ? "<p class=\"note\">" : "<p>", f);
	html_escape(f, buf);
	fputs("</p>\n", f);
}

void html_para(FILE *f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vpara(f, NULL, fmt, ap);
	va_end(ap);
}

void html_note(FILE *f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vpara(f, "note", fmt, ap);
	va_end(ap);
}

void html_pre(FILE *f, const char *text)
{
	fputs("<pre>", f);
	html_escape(f, text);
	fputs("</pre>\n", f);
}

/* A figure, a difference, a percentage or "-": right-aligned. */
static bool numeric(const char *s)
{
	bool digit = false;

	if (!strcmp(s, "-"))
		return true;
	for (; *s; s++) {
		if (*s >= '0' && *s <= '9')
			digit = true;
		else if (!strchr(".+-%()$ ,*>=e", *s))
			return false;
	}
	return digit;
}

void html_table(FILE *f, const struct html_table *t)
{
	fputs(t->wrap ? "<div class=\"scroll\"><table class=\"wrap\">\n" :
	      "<div class=\"scroll\"><table>\n", f);
	if (t->caption) {
		fputs("<caption>", f);
		html_escape(f, t->caption);
		fputs("</caption>\n", f);
	}
	if (t->head) {
		fputs("<thead><tr>", f);
		for (int j = 0; j < t->n_cols; j++) {
			fputs("<th>", f);
			html_escape(f, t->head[j]);
			fputs("</th>", f);
		}
		fputs("</tr></thead>\n", f);
	}
	fputs("<tbody>\n", f);
	for (int i = 0; i < t->n_rows; i++) {
		fputs("<tr>", f);
		for (int j = 0; j < t->n_cols; j++) {
			const char *c = t->cells[(size_t)i * (size_t)t->n_cols + (size_t)j];

			if (!c)
				c = "-";
			fputs(j == 0 ? "<th>" : numeric(c) ? "<td class=\"n\">" : "<td>", f);
			html_escape(f, c);
			fputs(j == 0 ? "</th>" : "</td>", f);
		}
		fputs("</tr>\n", f);
	}
	fputs("</tbody></table></div>\n", f);
}

void html_kv(FILE *f, const char *caption, const char *const *kv, int n)
{
	fputs("<div class=\"scroll\"><table class=\"wrap\">\n", f);
	if (caption) {
		fputs("<caption>", f);
		html_escape(f, caption);
		fputs("</caption>\n", f);
	}
	fputs("<tbody>\n", f);
	for (int i = 0; i < n; i++) {
		if (!kv[2 * i + 1])
			continue;
		fputs("<tr><th>", f);
		html_escape(f, kv[2 * i]);
		fputs("</th><td>", f);
		html_escape(f, kv[2 * i + 1]);
		fputs("</td></tr>\n", f);
	}
	fputs("</tbody></table></div>\n", f);
}

/* ---- images -------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* n bytes as base64; n a multiple of 3 except in the last call. */
static void base64(FILE *f, const unsigned char *p, size_t n)
{
	char out[4];

	for (; n >= 3; p += 3, n -= 3) {
		out[0] = b64[p[0] >> 2];
		out[1] = b64[((p[0] & 3) << 4) | (p[1] >> 4)];
		out[2] = b64[((p[1] & 15) << 2) | (p[2] >> 6)];
		out[3] = b64[p[2] & 63];
		fwrite(out, 1, 4, f);
	}
	if (n) {
		out[0] = b64[p[0] >> 2];
		out[1] = b64[((p[0] & 3) << 4) | (n > 1 ? p[1] >> 4 : 0)];
		out[2] = n > 1 ? b64[(p[1] & 15) << 2] : '=';
		out[3] = '=';
		fwrite(out, 1, 4, f);
	}
}

int html_image(FILE *f, const char *path, const char *alt)
{
	static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	unsigned char buf[3 * 4096];
	const char *base = strrchr(path, '/');
	FILE *in = fopen(path, "rb");
	size_t n;
	int e;

	base = base ? base + 1 : path;
	if (!in) {
		e = errno;
		html_note(f, "%s: not available (%s)", base, strerror(e));
		return -e;
	}
	n = fread(buf, 1, sizeof(buf), in);
	if (n < sizeof(sig) || memcmp(buf, sig, sizeof(sig)) != 0) {
		e = ferror(in) ? EIO : EINVAL;
		fclose(in);
		html_note(f, "%s: not a PNG image, not shown", base);
		return -e;
	}
	fputs("<figure><img alt=\"", f);
	html_escape(f, alt);
	fputs("\" src=\"data:image/png;base64,", f);
	/* every full read is a multiple of 3 bytes: the groups never straddle */
	do {
		base64(f, buf, n);
	} while (n == sizeof(buf) && (n = fread(buf, 1, sizeof(buf), in)) > 0);
	e = ferror(in) ? EIO : 0;
	fclose(in);
	fputs("\"><figcaption>", f);
	html_escape(f, alt);
	fputs("</figcaption></figure>\n", f);
	return -e;
}

void html_plots(FILE *f, const char *dir, const char *const *names, int n, bool skipped,
		const char *note)
{
	html_heading(f, 2, "Plots", "plots");
	if (note)
		html_note(f, "%s", note);
	if (skipped || n == 0) {
		if (!note)
			html_note(f, "No plots were made.");
		return;
	}
	fputs("<div class=\"plots\">\n", f);
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX], alt[256];

		snprintf(path, sizeof(path), "%s/%s.png", dir, names[i]);
		snprintf(alt, sizeof(alt), "%s.png", names[i]);
		html_image(f, path, alt);
	}
	fputs("</div>\n", f);
}

/* ---- strings ------------------------------------------------------------- */

/* Arguments made only of these characters need no quoting in a shell. */
static bool shell_plain(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr("-_./:=,+@%", *s)))
			return false;
	return true;
}

char *html_command_line(const char *prog, int argc, char *const *argv)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fputs(prog, f);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		fputc(' ', f);
		if (shell_plain(a)) {
			fputs(a, f);
			continue;
		}
		/* 'it'\''s' */
		fputc('\'', f);
		for (; *a; a++) {
			if (*a == '\'')
				fputs("'\\''", f);
			else
				fputc(*a, f);
		}
		fputc('\'', f);
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

char *html_capture(void (*fn)(FILE *f, const void *ctx), const void *ctx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fn(f, ctx);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ---- a whole page -------------------------------------------------------- */

int html_page_write(const char *dir, const struct html_page *p, struct ss_error *err)
{
	struct ss_file of;
	FILE *f;
	int ret;

	ret = html_file_open(&of, dir, p->title, p->subtitle, err);
	if (ret < 0)
		return ret;
	f = of.f;
	if (p->n_tables > 0)
		html_heading(f, 2, "Results", "results");
	for (int i = 0; i < p->n_tables; i++)
		html_table(f, &p->tables[i]);
	if (p->n_images > 0 || p->plots_note) {
		html_heading(f, 2, "Plots", "plots");
		if (p->plots_note)
			html_note(f, "%s", p->plots_note);
		fputs("<div class=\"plots\">\n", f);
		for (int i = 0; i < p->n_images; i++) {
			char path[PATH_MAX];
			const char *im = p->images[i], *base = strrchr(im, '/');

			if (im[0] == '/')
				snprintf(path, sizeof(path), "%s", im);
			else
				snprintf(path, sizeof(path), "%s/%s", dir, im);
			html_image(f, path, base ? base + 1 : im);
		}
		fputs("</div>\n", f);
	}
	if (p->command_line) {
		html_heading(f, 2, "Configuration", "configuration");
		html_pre(f, p->command_line);
	}
	if (p->text) {
		html_heading(f, 2, p->text_title ? p->text_title : "Text summary", "text");
		html_pre(f, p->text);
	}
	return html_file_commit(&of, err);
}

const char *html_cellf(struct html_cells *cs, const char *fmt, ...)
{
	va_list ap;

	assert(cs->n < cs->cap);
	if (cs->n >= cs->cap)
		return "?";
	va_start(ap, fmt);
	vsnprintf(cs->c[cs->n], HTML_CELL, fmt, ap);
	va_end(ap);
	return cs->c[cs->n++];
}
