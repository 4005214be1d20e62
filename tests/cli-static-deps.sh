#!/bin/sh
# With -Dstatic_deps=true (the default), the libraries meson found as
# static archives (SERVESIM_STATIC_LIBS, from tests/meson.build: some of
# gsl, gslcblas, sqlite3, jansson, csv) are inside the binary: servesim
# does not list them as NEEDED and the dynamic loader maps none of them,
# which is what keeps a small run's start-up short (docs/validation.md,
# "Page faults at start-up").  With -Dstatic_deps=false, or where no
# archive was found, there is nothing to check (skipped).
. "$(dirname "$0")/cli-lib.sh"

command -v readelf >/dev/null || { echo "skip: readelf not found"; exit 77; }
[ -z "$VG" ] || { echo "skip: the loader's behaviour is not observable under valgrind"; exit 77; }
LIBS=${SERVESIM_STATIC_LIBS:-}
[ -n "$LIBS" ] || { echo "skip: no dependency linked statically (-Dstatic_deps=false or no archives)"; exit 77; }

readelf -d "$BIN" | grep NEEDED >"$T/needed"
for l in $LIBS; do
	if grep -q "\[lib$l\.so" "$T/needed"; then
		fail "servesim lists lib$l.so as NEEDED although lib$l.a was found: $(grep "lib$l" "$T/needed" | tr -s ' ')"
	else
		pass "lib$l is linked statically: not NEEDED"
	fi
done
if command -v ldd >/dev/null; then
	for l in $LIBS; do
		ldd "$BIN" | grep -q "lib$l\.so" && fail "ldd servesim maps lib$l.so" ||
			pass "ldd servesim: no lib$l.so"
	done
fi
# and the binary still runs a simulation that uses all of them (SQLite:
# the calibration store; GSL: the RNG streams; jansson: the catalogs and
# the summary; libcsv: the trace)
"$BIN" run --trace "$SERVESIM_DATA/traces/azure_conv_2000.csv" --num-requests 20 --json >"$T/s.json" 2>"$T/err" &&
	grep -q '"completed": 20' "$T/s.json" &&
	pass "a statically linked run of 20 trace requests completes" ||
	fail "run: $(cat "$T/err") $(head -c 300 "$T/s.json")"
finish
