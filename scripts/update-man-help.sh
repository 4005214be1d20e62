#!/bin/sh
# Refresh the `servesim run --help` block of docs/servesim.1.md from the
# built binary (tests/cli-run.sh checks that the two agree).
set -eu
cd "$(dirname "$0")/.."
bin=${1:-./build/servesim}
tmp=$(mktemp)
"$bin" run --help >"$tmp"
awk -v help="$tmp" '
	/<!-- run-help:begin -->/ { print; print "```"; while ((getline l < help) > 0) print l; print "```"; skip = 1; next }
	/<!-- run-help:end -->/ { skip = 0 }
	!skip { print }
' docs/servesim.1.md >"$tmp.md"
mv "$tmp.md" docs/servesim.1.md
rm -f "$tmp"
