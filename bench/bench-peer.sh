#!/bin/sh
# Time servesim on the peer workloads the way Vidur was timed on them
# (../shared/data/traces/peer_workloads/README.md): Llama-2-70B, TP2,
# A100-80GB, vllm and sarathi scheduling, 1,000 and 10,000 requests, one
# replica at 1 QPS and four at 4 QPS.  Each run is the whole command:
# start-up, the simulation and the summary (--json, written to a file).
# Prints the best wall time of RUNS runs and the speed-up over Vidur's
# published time on the same machine.  Measured, never pass/fail.
#
#   bench/bench-peer.sh [SERVESIM [RUNS]]     (defaults: build/servesim, 5)
#
# Times come from bash's `time` keyword (TIMEFORMAT %3R %3U %3S: wall,
# user and system time with 1 ms resolution; GNU time's %e has 10 ms and
# truncates, so it printed 10 ms for a 17.5 ms run).
#
# SERVESIM_SHARED_DATA points at the shared data (default ../shared/data).
# BENCH_IR=1 adds each run's instructions (valgrind --tool=callgrind, one
# more run per row), the figure to compare two builds by on a shared,
# loaded machine, where wall times are noise (docs/validation.md).
# Also writes each run's summary.json to $BENCH_OUT (default a temporary
# directory) so that two builds can be diffed for bit-for-bit results.
set -eu
BIN=${1:-build/servesim}
RUNS=${2:-5}
SHARED=${SERVESIM_SHARED_DATA:-../shared/data}
W=$SHARED/traces/peer_workloads
OUT=${BENCH_OUT:-$(mktemp -d)}
mkdir -p "$OUT"
[ -d "$W" ] || { echo "bench-peer: no $W (set SERVESIM_SHARED_DATA)" >&2; exit 77; }

# Vidur's wall time per run, s, from the workloads' README: 10,000 requests
# in 31.5 s (median of 8); 1,000 in 10-13 s (the low end is used, which
# favours Vidur).  The README does not split them by scheduler or replica
# count; issue 10 gives 12.7-68 s across all eight runs.
vidur_s() {
	case $1 in
	*n1000_*) echo 10.0 ;;
	*) echo 31.5 ;;
	esac
}

command -v bash >/dev/null || { echo "bench-peer: needs bash (for its time keyword)" >&2; exit 77; }

# timed TIMES OUT CMD...: run CMD with its stdout in OUT and append its
# wall, user and system time, s with 3 decimals, to TIMES (CMD's stderr
# stays the script's).  bash's time
# measures the command alone (getrusage for the CPU times), not bash's
# own start-up.
timed() {
	bash -c 'TIMEFORMAT="%3R %3U %3S"; t=$1 o=$2; shift 2
		{ time "$@" >"$o" 2>&3; } 3>&2 2>>"$t"' timed "$@"
}

# Wall time is what Vidur's figures are; CPU time (user + system) is shown
# beside it because on a shared machine wall time also counts waiting.
IR=${BENCH_IR:-0}
if [ "$IR" = 1 ] && ! command -v valgrind >/dev/null; then
	echo "bench-peer: BENCH_IR=1 needs valgrind" >&2
	exit 77
fi
printf '%-34s %-8s %4s %9s %9s %9s %8s' workload policy inst "best ms" "med ms" "CPU ms" "x Vidur"
[ "$IR" = 1 ] && printf ' %9s' "M instr"
printf '\n'
for w in conv_poisson_qps1.0_n1000_seed42:1 conv_poisson_qps1.0_n10000_seed42:1 \
	 conv_poisson_qps4.0_n10000_seed42:4; do
	name=${w%:*}
	inst=${w#*:}
	for policy in vllm sarathi; do
		: >"$OUT/times"
		i=0
		while [ "$i" -lt "$RUNS" ]; do
			timed "$OUT/times" "$OUT/$name.$policy.json" "$BIN" run --trace "$W/$name.csv" \
				--model llama-2-70b --gpu a100-80gb-sxm --tp 2 --policy "$policy" \
				--instances "$inst" --json
			i=$((i + 1))
		done
		# best and median wall, best CPU; s -> ms
		v=$(vidur_s "$name")
		sort -n "$OUT/times" | awk -v n="${name%_seed42}" -v p="$policy" -v i="$inst" -v v="$v" '
			{ w[NR] = $1; c = $2 + $3; if (NR == 1 || c < cpu) cpu = c }
			END { printf "%-34s %-8s %4d %9.1f %9.1f %9.1f %8.0f", n, p, i, w[1] * 1e3,
			      w[int((NR + 1) / 2)] * 1e3, cpu * 1e3, v / w[1] }'
		if [ "$IR" = 1 ]; then
			# instructions of the whole command (callgrind's "I refs")
			valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" run \
				--trace "$W/$name.csv" --model llama-2-70b --gpu a100-80gb-sxm --tp 2 \
				--policy "$policy" --instances "$inst" --json 2>"$OUT/ir" >/dev/null
			awk '/refs:/ { gsub(",", "", $NF); printf " %9.1f", $NF / 1e6 }' "$OUT/ir"
		fi
		printf '\n'
	done
done
echo "summaries in $OUT"
