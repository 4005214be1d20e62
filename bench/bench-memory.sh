#!/bin/sh
# Peak memory (maximum resident set, from GNU time) of servesim runs of 1M
# and 10M requests: Poisson arrivals at 2000/s, 64 prompt + 16 output
# tokens, 16 instances, the constant cost model, no outputs.  Printed, never
# judged; best of RUNS runs for 1M (default 3), one run for 10M.  Needs about
# 2 GB free for 10M; SIZES overrides the sizes (e.g. SIZES=1000000).
# usage: bench/bench-memory.sh [BUILD_DIR]
set -u
B=${1:-build}/servesim
SIZES=${SIZES:-"1000000 10000000"}
RUNS=${RUNS:-3}
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench-memory: needs GNU time (apt-get install time)" >&2; exit 1; }
C="--arrival poisson:rate=2000 --lengths fixed:prompt=64,output=16 --instances 16"
C="$C --cost-model constant:prefill_ms_per_token=0.02,decode_ms_per_step=8 --quiet"
printf '%-10s %12s %14s %10s\n' requests peak_MB bytes/request wall_s
for n in $SIZES; do
	runs=$RUNS
	[ "$n" -ge 10000000 ] && runs=1
	best=""
	for _ in $(seq "$runs"); do
		out=$($TIME -f '%M %e' "$B" run $C --num-requests "$n" 2>&1 >/dev/null | tail -1)
		kb=${out% *}
		if [ -z "$best" ] || [ "$kb" -lt "${best% *}" ]; then best=$out; fi
	done
	kb=${best% *}
	awk -v n="$n" -v kb="$kb" -v s="${best#* }" \
		'BEGIN { printf "%-10d %12.0f %14.0f %10.2f\n", n, kb / 1024, kb * 1024 / n, s }'
done
