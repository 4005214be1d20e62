#!/bin/sh
# servesim coverage: build into ./build-cov with gcov instrumentation
# (-Db_coverage=true, CUDA off as in the sanitized build), run the default
# test suite there (the `slow` suite is left out, as in a plain `meson
# test`), and print the line and branch coverage of the simulator's core:
# sim/, policies/ and traces/, each on its own and together.  Needs gcovr
# (scripts/setup.sh installs it).  Not part of scripts/test.sh or .ci/run:
# it rebuilds everything instrumented and takes about as long as the
# default suite again.  Per-file figures: build-cov/meson-logs/coverage.json.
#
#   sh scripts/coverage.sh            # build, test, report
#   sh scripts/coverage.sh --report   # report the counts of the last run only
#
# Exit status: the test suite's (1 if a test failed; the report is printed
# either way), or 1 when gcovr is missing.
set -eu
cd "$(dirname "$0")/.."

if ! command -v gcovr >/dev/null 2>&1; then
	echo "servesim coverage: gcovr is missing (scripts/setup.sh installs it)" >&2
	exit 1
fi

status=0
if [ "${1:-}" != "--report" ]; then
	# atomic counters: plan's and fit-engine's worker threads run the same
	# code at once, and plain counters can then read -1, which gcovr
	# refuses ("branch taken -1")
	if [ -f build-cov/build.ninja ]; then
		meson configure build-cov -Dc_args=-fprofile-update=atomic >/dev/null
	else
		meson setup build-cov -Db_coverage=true -Dcuda=disabled \
			-Dc_args=-fprofile-update=atomic >/dev/null
	fi
	meson compile -C build-cov >/dev/null
	# counts from this run only
	find build-cov -name '*.gcda' -exec rm -f {} +
	# instrumented code runs slower: x3 every test's timeout
	meson test -C build-cov --print-errorlogs --num-processes 2 --timeout-multiplier 3 ||
		status=1
fi

# One gcovr pass over the three folders, per file, as JSON; then the totals
# per folder.  Branches are gcc's (each outcome of a condition, asserts'
# included), so branch coverage reads lower than line coverage.
json=build-cov/meson-logs/coverage.json
gcovr -r . --object-directory build-cov -j 2 --filter 'sim/' --filter 'policies/' \
	--filter 'traces/' --json-summary "$json" build-cov >/dev/null
python3 - "$json" <<'EOF'
import json
import sys

files = json.load(open(sys.argv[1]))["files"]
rows = {}
for f in files:
    top = f["filename"].split("/")[0] + "/"
    for key in (top, "all three"):
        r = rows.setdefault(key, [0, 0, 0, 0, 0])
        r[0] += f["line_covered"]
        r[1] += f["line_total"]
        r[2] += f["branch_covered"]
        r[3] += f["branch_total"]
        r[4] += 1


def pct(a, b):
    return "%5.1f%%" % (100.0 * a / b) if b else "    -"


print("servesim coverage (default test suite, build-cov/):")
print("%-10s %5s %16s %6s %16s %6s" % ("", "files", "lines", "", "branches", ""))
for key in ("sim/", "policies/", "traces/", "all three"):
    if key not in rows:
        continue
    r = rows[key]
    print("%-10s %5d %7d / %6d %s %7d / %6d %s"
          % (key, r[4], r[0], r[1], pct(r[0], r[1]), r[2], r[3], pct(r[2], r[3])))
EOF
exit $status
