#!/bin/sh
# Refresh the option lists of docs/servesim.1.md from the option table: each
# <!-- CMD-help:begin --> ... <!-- CMD-help:end --> block (run, live, plan, sweep, loop)
# becomes `servesim help --man CMD`, which is `servesim CMD --help` without
# build-dependent lines.  tests/cli-run.sh fails when they differ.
set -eu
cd "$(dirname "$0")/.."
bin=${1:-./build/servesim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp docs/servesim.1.md "$tmp/doc"
for cmd in run live plan sweep loop; do
	"$bin" help --man "$cmd" >"$tmp/help"
	awk -v help="$tmp/help" -v cmd="$cmd" '
		$0 == "<!-- " cmd "-help:begin -->" { print; print "```"; while ((getline l < help) > 0) print l; print "```"; skip = 1; next }
		$0 == "<!-- " cmd "-help:end -->" { skip = 0 }
		!skip { print }
	' "$tmp/doc" >"$tmp/doc.new"
	grep -q "^<!-- $cmd-help:begin -->" "$tmp/doc.new" || { echo "no $cmd-help block in docs/servesim.1.md" >&2; exit 1; }
	mv "$tmp/doc.new" "$tmp/doc"
done
cp "$tmp/doc" docs/servesim.1.md
