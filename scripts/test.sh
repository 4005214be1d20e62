#!/bin/sh
# servesim test suite: set-up, the whole suite, then the suite again under
# AddressSanitizer and UndefinedBehaviorSanitizer.  Exit status 0 only if
# every test passes (skips, exit 77, are fine).
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh

echo "== test suite (build/)" >&2
meson test -C build --print-errorlogs --num-processes 2

echo "== test suite under ASan + UBSan (build-san/)" >&2
if [ -f build-san/build.ninja ]; then
	meson setup --reconfigure build-san >/dev/null
else
	meson setup build-san -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled >/dev/null
fi
meson compile -C build-san >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	meson test -C build-san --print-errorlogs --num-processes 2 --timeout-multiplier 4
echo "servesim tests: all passed" >&2
