#!/bin/sh
# Leave-one-source-out matrix of servesim's engine profiles (issue 31, section 2):
#
#   sh bench/loso.sh SERVESIM OUT [--refit] [--rows N] [--only ID,...] [--jobs N] [--fewshot]
#
# For every source (deployment) of bench/sources.json that this servesim
# reads: (i) the shipped profile of the source's family as it is
# (`calibrate fit-engine --no-fit`); (ii) the same profile without a
# serving stack, and the source's stack constant (median of measured -
# simulated TTFT over its light-load rows); (iii) each source held out,
# predicted with its family's default stack taken from the other sources'
# constants.  Writes OUT/matrix.md, OUT/matrix.json, OUT/constants.md,
# OUT/intervals.json and every fit-engine report under OUT/src/ID/
# (bench/loso.py says how).  --rows N caps every source's row budget (the
# test's quick matrix); --jobs N threads per fit-engine call (default 2;
# results do not depend on N).  --refit (refit the shared engine terms on
# the family's other sources) needs fit-engine --sources and exits 1 until
# then.
#
# SERVESIM_SHARED_DATA points at the shared data (default ../shared/data);
# exit 77 without it.
set -eu
[ $# -ge 2 ] || { echo "usage: sh bench/loso.sh SERVESIM OUT [--refit] [--rows N] [--only ID,...] [--jobs N] [--fewshot]" >&2; exit 2; }
BIN=$1
OUT=$2
shift 2
SHARED=${SERVESIM_SHARED_DATA:-../shared/data}
[ -d "$SHARED/serving" ] || { echo "loso: no $SHARED/serving (set SERVESIM_SHARED_DATA)" >&2; exit 77; }
PY=$(command -v python3) || { echo "loso: needs python3" >&2; exit 77; }
[ -x "$BIN" ] || { echo "loso: $BIN is not an executable" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
start=$(date +%s)
"$PY" "$HERE/loso.py" "$BIN" "$SHARED" "$OUT" "$@"
echo "loso: matrix in $OUT/matrix.md ($(($(date +%s) - start)) s)" >&2
