#!/bin/sh
# servesim coverage-guided fuzzing with libFuzzer (clang).
#
#   sh scripts/fuzz.sh TARGET [SECONDS [LIBFUZZER-OPTION...]]
#   sh scripts/fuzz.sh --list
#   sh scripts/fuzz.sh --all SECONDS      (every target in turn, one core;
#                                          all run even when one reports)
#
# Builds ./build-fuzz with clang, -fsanitize=fuzzer-no-link,address,undefined
# and -Dfuzzing=true, then runs build-fuzz/tests/fuzz-TARGET for SECONDS
# (default 60) on a scratch copy of tests/fuzz/corpus/TARGET, seeded from it.
# New inputs stay in build-fuzz/corpus/TARGET (not in the repository: copy
# the ones worth keeping, reproducers above all, into tests/fuzz/corpus/TARGET
# yourself).  Crashes go to build-fuzz/crash/TARGET/.  Exit status: 0 when
# no crash, leak, timeout or sanitizer report; non-zero otherwise.
# Needs clang and libFuzzer (Debian: clang libclang-rt-14-dev).
set -eu
cd "$(dirname "$0")/.."

targets() {
	sed -n "s/^  \['\([a-z-]*\)', *'fuzz-.*/\1/p" tests/meson.build
}

if [ "${1:-}" = "--list" ]; then
	targets
	exit 0
fi
[ $# -ge 1 ] || { echo "usage: sh scripts/fuzz.sh TARGET|--all|--list [SECONDS [OPTION...]]" >&2; exit 2; }
target=$1
secs=${2:-60}
[ $# -ge 2 ] && shift 2 || shift $#

if ! command -v clang >/dev/null 2>&1; then
	echo "fuzz.sh: clang not found (apt-get install clang libclang-rt-14-dev)" >&2
	exit 2
fi
if [ ! -f build-fuzz/build.ninja ]; then
	CC=clang meson setup build-fuzz -Dfuzzing=true -Dcuda=disabled -Dmpi=disabled \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fsanitize=fuzzer-no-link >/dev/null
fi
# regenerate first when a meson.build changed (a new target is unknown to
# meson compile until then), then only the fuzz targets and what they link
ninja -C build-fuzz build.ninja >/dev/null
# shellcheck disable=SC2046  # target names, one word each
meson compile -C build-fuzz $(targets | sed 's/^/fuzz-/') >/dev/null

run_one() {
	t=$1
	shift
	exe=build-fuzz/tests/fuzz-$t
	[ -x "$exe" ] || { echo "fuzz.sh: no target '$t' (see --list)" >&2; exit 2; }
	mkdir -p build-fuzz/corpus/$t build-fuzz/crash/$t
	echo "== fuzz-$t for ${secs}s" >&2
	# Options: a 10 s hang or 2 GB of memory is a finding; dictionary-free,
	# one process; inputs up to 64 kB (long enough for several CSV chunks).
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	"$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
		-print_final_stats=1 -artifact_prefix=build-fuzz/crash/$t/ "$@" \
		build-fuzz/corpus/$t tests/fuzz/corpus/$t
}

if [ "$target" = "--all" ]; then
	# every target runs even after one reports: a long unattended run
	# should not stop at the first finding
	failed=""
	for t in $(targets); do
		run_one "$t" "$@" || failed="$failed $t"
	done
	if [ -n "$failed" ]; then
		echo "fuzz.sh: findings in:$failed (see build-fuzz/crash/)" >&2
		exit 1
	fi
else
	run_one "$target" "$@"
fi
