#!/bin/sh
# servesim test suite: set-up, the whole suite, then the suite again under
# AddressSanitizer and UndefinedBehaviorSanitizer.  Exit status 0 only if
# every test passes (skips, exit 77, are fine).  "The whole suite" is
# `meson test --setup full`: the default suite of a plain `meson test`
# plus the `slow` suite, which the default leaves out (tests/meson.build).
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh

echo "== test suite, slow suite included (build/)" >&2
meson test -C build --setup full --print-errorlogs --num-processes 2

echo "== test suite under ASan + UBSan (build-san/)" >&2
if [ -f build-san/build.ninja ]; then
	meson setup --reconfigure build-san >/dev/null
else
	meson setup build-san -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled >/dev/null
fi
meson compile -C build-san >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	meson test -C build-san --setup full --print-errorlogs --num-processes 2 --timeout-multiplier 4

# Every fuzz target for a few seconds with libFuzzer on its corpus
# (scripts/fuzz.sh): 12 targets x 5 s, plus building them with clang.
if command -v clang >/dev/null 2>&1 && \
   ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
	echo "== fuzz targets, 5 s each (build-fuzz/)" >&2
	log=$(mktemp)
	sh scripts/fuzz.sh --all 5 >"$log" 2>&1 || {
		grep -E 'ERROR|SUMMARY|==[0-9]+==|Test unit written|fuzz.sh' "$log" >&2
		echo "servesim tests: a fuzz target failed (log: $log)" >&2
		exit 1
	}
	grep -E '^== fuzz-|DONE' "$log" >&2
	rm -f "$log"
else
	echo "== fuzz targets skipped: clang or libFuzzer missing (scripts/setup.sh installs them)" >&2
fi
echo "servesim tests: all passed" >&2
