/* Behaviours of analysis/html (report.html's writer): every string is
 * escaped, images are embedded as exact base64 data: URIs (or named in a
 * note when missing), command lines are quoted for a shell, and a page is
 * written atomically with nothing referring outside itself. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "html.h"

#include "check-main.h"

static char tmpdir[64];

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ss-html-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	char p[320];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || !strcmp(e->d_name, "..")))
			continue;
		snprintf(p, sizeof(p), "%s/%s", tmpdir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(tmpdir);
}

/* What fn wrote to a memory stream, NUL-terminated (transfer full). */
static char *capture(void (*fn)(FILE *f, const void *ctx), const void *ctx)
{
	char *s = html_capture(fn, ctx);

	ck_assert_ptr_nonnull(s);
	return s;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_msg(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static int count_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strstr(e->d_name, ".tmp") != NULL;
	if (d)
		closedir(d);
	return n;
}

/* Every src="..." and href="..." of a page is a data: URI or an in-page
 * anchor; returns the first that is not, or NULL. */
static const char *external_ref(const char *page)
{
	static const char *const attrs[] = { "src=\"", "href=\"", "src='", "href='", "url(" };

	for (size_t k = 0; k < sizeof(attrs) / sizeof(attrs[0]); k++)
		for (const char *p = strstr(page, attrs[k]); p; p = strstr(p + 1, attrs[k])) {
			const char *v = p + strlen(attrs[k]);

			if (strncmp(v, "data:", 5) != 0 && v[0] != '#')
				return p;
		}
	return NULL;
}

static void escape_cb(FILE *f, const void *ctx)
{
	html_escape(f, ctx);
}

START_TEST(escapes_markup_and_control_characters)
{
	char *s = capture(escape_cb, "a<b>&c\"d'e\x01\x7f\tz\n");

	ck_assert_str_eq(s, "a&lt;b&gt;&amp;c&quot;d&#39;e??\tz\n");
	free(s);
}
END_TEST

static void table_cb(FILE *f, const void *ctx)
{
	static const char *const head[] = { "<h>", "x" };
	const char *cells[] = { "row <1>", "1.5", "row & 2", NULL };

	(void)ctx;
	html_table(f, &(struct html_table){ .caption = "cap <c>", .n_cols = 2, .n_rows = 2,
					    .head = head, .cells = cells });
}

START_TEST(table_cells_are_escaped_numbers_right_aligned)
{
	char *s = capture(table_cb, NULL);

	ck_assert_ptr_nonnull(strstr(s, "<caption>cap &lt;c&gt;</caption>"));
	ck_assert_ptr_nonnull(strstr(s, "<thead><tr><th>&lt;h&gt;</th><th>x</th></tr></thead>"));
	ck_assert_ptr_nonnull(strstr(s, "<tr><th>row &lt;1&gt;</th><td class=\"n\">1.5</td></tr>"));
	/* a NULL cell is "-" */
	ck_assert_ptr_nonnull(strstr(s, "<tr><th>row &amp; 2</th><td class=\"n\">-</td></tr>"));
	ck_assert_ptr_null(strstr(s, "<1>"));
	free(s);
}
END_TEST

START_TEST(command_line_is_shell_quoted)
{
	char *argv[] = { "run", "--label", "a b", "--x=it's", "plain-1.5/x.csv", "", "<&>", NULL };
	char *s = html_command_line("servesim run", 7, argv);

	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s, "servesim run --label 'a b' '--x=it'\\''s' plain-1.5/x.csv '' '<&>'");
	free(s);
}
END_TEST

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fwrite(p, 1, n, f), n);
	fclose(f);
}

struct image_ctx {
	const char *path;
	int ret;
};

static void image_cb(FILE *f, const void *ctx)
{
	struct image_ctx *c = (struct image_ctx *)ctx;

	c->ret = html_image(f, c->path, "plot <1>");
}

static int b64val(char c)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(a, c) : NULL;

	return p ? (int)(p - a) : -1;
}

/* The bytes of the base64 text at s up to '"'; *n of them. */
static unsigned char *unbase64(const char *s, size_t *n)
{
	size_t len = strcspn(s, "\""), k = 0;
	unsigned char *out = malloc(len);

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(len % 4, 0);
	for (size_t i = 0; i < len; i += 4) {
		int v[4];

		for (int j = 0; j < 4; j++)
			v[j] = s[i + j] == '=' ? 0 : b64val(s[i + j]);
		ck_assert(v[0] >= 0 && v[1] >= 0 && v[2] >= 0 && v[3] >= 0);
		out[k++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (s[i + 2] != '=')
			out[k++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
		if (s[i + 3] != '=')
			out[k++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
	}
	*n = k;
	return out;
}

START_TEST(image_is_embedded_exactly)
{
	static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	static const char *const want[] = { "iVBORw0KGgpB\"", "iVBORw0KGgpBQg==\"",
					    "iVBORw0KGgpBQkM=\"", "iVBORw0KGgpBQkNE\"" };
	char path[128];
	unsigned char big[40000];
	struct image_ctx c;
	char *s, *uri;
	unsigned char *back;
	size_t n;

	snprintf(path, sizeof(path), "%s/p.png", tmpdir);
	/* 9..12 bytes: every padding case, against base64 worked out by hand */
	for (int k = 0; k < 4; k++) {
		unsigned char b[12];

		memcpy(b, sig, 8);
		memcpy(b + 8, "ABCD", (size_t)k + 1);
		write_file(path, b, 9 + (size_t)k);
		c = (struct image_ctx){ path, 1 };
		s = capture(image_cb, &c);
		ck_assert_int_eq(c.ret, 0);
		uri = strstr(s, "src=\"data:image/png;base64,");
		ck_assert_ptr_nonnull(uri);
		ck_assert_msg(!strncmp(uri + 27, want[k], strlen(want[k])), "%d: %s", k, uri);
		ck_assert_ptr_nonnull(strstr(s, "alt=\"plot &lt;1&gt;\""));
		free(s);
	}
	/* larger than the reader's 12 KiB chunks, not a multiple of 3: decodes back */
	memcpy(big, sig, 8);
	for (size_t i = 8; i < sizeof(big); i++)
		big[i] = (unsigned char)(i * 7 + i / 251);
	write_file(path, big, sizeof(big) - 1);
	c = (struct image_ctx){ path, 1 };
	s = capture(image_cb, &c);
	ck_assert_int_eq(c.ret, 0);
	uri = strstr(s, "base64,");
	ck_assert_ptr_nonnull(uri);
	back = unbase64(uri + 7, &n);
	ck_assert_int_eq(n, sizeof(big) - 1);
	ck_assert(memcmp(back, big, n) == 0);
	free(back);
	free(s);
}
END_TEST

START_TEST(missing_or_bad_image_becomes_a_note)
{
	char path[128];
	struct image_ctx c;
	char *s;

	snprintf(path, sizeof(path), "%s/none.png", tmpdir);
	c = (struct image_ctx){ path, 0 };
	s = capture(image_cb, &c);
	ck_assert_int_eq(c.ret, -ENOENT);
	ck_assert_ptr_null(strstr(s, "<img"));
	ck_assert_ptr_nonnull(strstr(s, "<p class=\"note\">none.png: not available"));
	free(s);
	snprintf(path, sizeof(path), "%s/text.png", tmpdir);
	write_file(path, "<svg>not a png</svg>", 20);
	c = (struct image_ctx){ path, 0 };
	s = capture(image_cb, &c);
	ck_assert_int_eq(c.ret, -EINVAL);
	ck_assert_ptr_null(strstr(s, "<img"));
	ck_assert_ptr_nonnull(strstr(s, "text.png: not a PNG image"));
	free(s);
}
END_TEST

START_TEST(page_is_written_whole_and_self_contained)
{
	static const unsigned char png[12] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 1, 2, 3, 4 };
	static const char *const head[] = { "rate", "TTFT p99 ms" };
	static const char *const cells[] = { "1", "80.125", "2 <x>", "95.5" };
	static const char *const images[] = { "a.png", "missing.png" };
	struct html_table t = { .caption = "results & more", .n_cols = 2, .n_rows = 2,
				.head = head, .cells = cells };
	struct html_page p = { .title = "servesim sweep: <m>", .subtitle = "a & b",
			       .command_line = "servesim sweep --label '<l>'", .tables = &t,
			       .n_tables = 1, .images = images, .n_images = 2,
			       .text = "plain <text>\n" };
	struct ss_error err = { 0 };
	char path[128], *s;

	snprintf(path, sizeof(path), "%s/a.png", tmpdir);
	write_file(path, png, sizeof(png));
	ck_assert_msg(html_page_write(tmpdir, &p, &err) == 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/%s", tmpdir, HTML_REPORT_NAME);
	s = slurp(path);
	ck_assert(!strncmp(s, "<!DOCTYPE html>\n", 16));
	ck_assert_ptr_nonnull(strstr(s, "<title>servesim sweep: &lt;m&gt;</title>"));
	ck_assert_ptr_nonnull(strstr(s, "<h1>servesim sweep: &lt;m&gt;</h1>"));
	ck_assert_ptr_nonnull(strstr(s, "<p class=\"sub\">a &amp; b</p>"));
	ck_assert_ptr_nonnull(strstr(s, "<caption>results &amp; more</caption>"));
	ck_assert_ptr_nonnull(strstr(s, "<td class=\"n\">80.125</td>"));
	ck_assert_ptr_nonnull(strstr(s, "<th>2 &lt;x&gt;</th>"));
	ck_assert_ptr_nonnull(strstr(s, "src=\"data:image/png;base64,iVBORw0KGgoBAgME\""));
	ck_assert_ptr_nonnull(strstr(s, "missing.png: not available"));
	ck_assert_ptr_nonnull(strstr(s, "<pre>servesim sweep --label &#39;&lt;l&gt;&#39;</pre>"));
	ck_assert_ptr_nonnull(strstr(s, "<pre>plain &lt;text&gt;\n</pre>"));
	ck_assert_ptr_nonnull(strstr(s, "</body>\n</html>\n"));
	ck_assert_ptr_null(strstr(s, "<script"));
	ck_assert_msg(external_ref(s) == NULL, "external reference: %.60s", external_ref(s));
	ck_assert_int_eq(count_tmp(tmpdir), 0);
	free(s);
}
END_TEST

/* The test's own check of external references catches what it should. */
START_TEST(external_reference_check_sees_links)
{
	ck_assert_ptr_nonnull(external_ref("<img src=\"plot.png\">"));
	ck_assert_ptr_nonnull(external_ref("<a href=\"http://x\">"));
	ck_assert_ptr_nonnull(external_ref("body{background:url(x.png)}"));
	ck_assert_ptr_null(external_ref("<img src=\"data:image/png;base64,AA==\"><a href=\"#plots\">"));
}
END_TEST

START_TEST(page_in_a_missing_directory_fails_cleanly)
{
	struct html_page p = { .title = "t" };
	struct ss_error err = { 0 };
	char dir[128];

	snprintf(dir, sizeof(dir), "%s/no/such", tmpdir);
	ck_assert_int_lt(html_page_write(dir, &p, &err), 0);
	ck_assert(err.code < 0);
	ck_assert_int_eq(count_tmp(tmpdir), 0);
}
END_TEST

Suite *make_suite(void)
{
	Suite *s = suite_create("html");
	TCase *tc = tcase_create("html");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, escapes_markup_and_control_characters);
	tcase_add_test(tc, table_cells_are_escaped_numbers_right_aligned);
	tcase_add_test(tc, command_line_is_shell_quoted);
	tcase_add_test(tc, image_is_embedded_exactly);
	tcase_add_test(tc, missing_or_bad_image_becomes_a_note);
	tcase_add_test(tc, page_is_written_whole_and_self_contained);
	tcase_add_test(tc, external_reference_check_sees_links);
	tcase_add_test(tc, page_in_a_missing_directory_fails_cleanly);
	suite_add_tcase(s, tc);
	return s;
}
