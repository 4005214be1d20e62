#!/bin/sh
# Turn the manual page's Markdown (docs/servesim.1.md) into roff for man(1):
#   sh scripts/md2man.sh docs/servesim.1.md VERSION >servesim.1
# meson builds and installs servesim.1 with it (MANDIR/man1).  Only the
# Markdown the page uses: headings, paragraphs, ``` blocks, `code`,
# **bold**, lists, tables and <!-- comments --> (dropped).
set -eu
[ $# -eq 2 ] || { echo "usage: sh scripts/md2man.sh FILE.md VERSION" >&2; exit 2; }
awk -v version="$2" '
function esc(s) {
	gsub(/\\/, "\\e", s)
	return s
}
function inline(s,    out, i, c, code, bold) {
	s = esc(s)
	out = ""
	code = 0
	bold = 0
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (c == "`") {
			out = out (code ? "\\fR" : "\\fB")
			code = !code
		} else if (!code && substr(s, i, 2) == "**") {
			out = out (bold ? "\\fR" : "\\fB")
			bold = !bold
			i++
		} else {
			out = out c
		}
	}
	if (code || bold)
		out = out "\\fR"
	sub(/^[.\047]/, "\\\\\\&&", out)
	return out
}
NR == 1 && /^# / {
	printf ".TH SERVESIM 1 \"\" \"servesim %s\" \"User Commands\"\n", version
	next
}
/^<!--.*-->$/ { next }
/^```/ {
	if (pre) { print ".fi"; print ".RE"; pre = 0 } else { print ".RS 2"; print ".nf"; pre = 1 }
	next
}
pre { line = esc($0); sub(/^[.\047]/, "\\\\\\&&", line); print line; next }
/^## / { sub(/^## /, ""); printf ".SH \"%s\"\n", esc($0); next }
/^### / { sub(/^### /, ""); printf ".SS \"%s\"\n", esc($0); next }
/^\|[- :|]+\|$/ { next }
/^\|/ {
	row = $0
	gsub(/^\| *| *\|$/, "", row)
	gsub(/ *\| */, "  \t", row)
	print ".br"
	print inline(row)
	next
}
/^[-*] / { sub(/^[-*] /, ""); print ".IP \\(bu 2"; print inline($0); next }
/^$/ { print ".PP"; next }
{ print inline($0) }
' "$1"
