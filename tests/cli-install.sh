# `meson install` of this build into a temporary DESTDIR: the binary, the
# data, the docs and the manual page land under the prefix, and the
# installed binary reads the data it is pointed at (--data-dir) from any
# working directory, and otherwise the prefix's, never the source tree.
# (DESTDIR moves the files, not the compiled-in prefix: that is why the
# installed binary is given --data-dir here.)  Usage: cli-install.sh BUILDDIR
. "$(dirname "$0")/cli-lib.sh"

BUILD=${1:?usage: cli-install.sh BUILDDIR}
[ -z "$VG" ] || { echo "under valgrind: skipped (the installed copy is not wrapped)"; exit 77; }
command -v meson >/dev/null || { echo "meson not found: skipped"; exit 77; }
D=$T/dest
if ! meson install -C "$BUILD" --destdir "$D" --no-rebuild --quiet >"$T/log" 2>&1; then
	fail "meson install --destdir: $(tail -n 3 "$T/log")"
	finish
fi
bin=$(find "$D" -path '*/bin/servesim' -type f | head -n 1)
data=$(dirname "$(find "$D" -path '*/servesim/models.json' | head -n 1)")
man1=$(find "$D" -path '*/man1/servesim.1' | head -n 1)
doc=$(dirname "$(find "$D" -path '*/doc/servesim/README.md' | head -n 1)")
for f in "$bin" "$data/gpus.json" "$data/engines.json" "$data/stacks.json" "$data/acceptance.json" "$data/intervals.json" "$data/calibration.db" \
	"$data/traces/azure_conv_2000.csv" "$man1" "$doc/README.md" "$doc/servesim.1.md" \
	"$doc/cost-models.md" "$doc/NOTICE"; do
	[ -s "$f" ] && pass "installed ${f#"$D"}" || fail "not installed: ${f#"$D"}"
done
# every docs/*.md
for f in "$(dirname "$0")"/../docs/*.md; do
	[ -f "$doc/$(basename "$f")" ] || fail "docs/$(basename "$f") not installed"
done
# the manual page is roff that man renders, with every section
head -n 1 "$man1" | grep -q '^\.TH SERVESIM 1 ' && pass "servesim.1 starts with .TH" ||
	fail "servesim.1: $(head -n 1 "$man1")"
if command -v man >/dev/null; then
	MANWIDTH=100 man -l "$man1" 2>/dev/null >"$T/man.txt"
	for s in NAME SYNOPSIS CONVENTIONS ENVIRONMENT "EXIT STATUS" SIGNALS; do
		grep -q "^$s" "$T/man.txt" || fail "man -l servesim.1: no section $s"
	done
	grep -q -- "--data-dir DIR" "$T/man.txt" && pass "man -l servesim.1 renders its sections" ||
		fail "man -l servesim.1: no --data-dir"
fi

# from another directory, with the installed data
cd "$T" || exit 1
env -u SERVESIM_DATA "$bin" --data-dir "$data" run --num-requests 20 --json >"$T/run.json" 2>"$T/err" &&
	grep -q '"completed": 20' "$T/run.json" && pass "installed binary: run with --data-dir" ||
	fail "installed binary, --data-dir: $(cat "$T/err")"
env -u SERVESIM_DATA "$bin" --data-dir "$data" -v list models >"$T/out" 2>"$T/err" &&
	grep -q "^servesim: data directory $data (--data-dir)\$" "$T/err" && grep -q llama-3.1-8b "$T/out" &&
	pass "installed binary lists the installed catalog" || fail "installed list models: $(cat "$T/err")"
# without --data-dir: the prefix's datadir (where `meson install` without
# DESTDIR puts it), not the destdir and not the source tree
env -u SERVESIM_DATA "$bin" -v version >/dev/null 2>"$T/err"
grep -q "^servesim: data directory ${data#"$D"} (installed)\$" "$T/err" &&
	pass "installed binary without --data-dir: $(cat "$T/err")" ||
	fail "installed binary without --data-dir: $(cat "$T/err") (expected ${data#"$D"})"
finish
