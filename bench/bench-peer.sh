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
# SERVESIM_SHARED_DATA points at the shared data (default ../shared/data).
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

now_ns() { date +%s%N; }

printf '%-40s %-8s %4s %10s %10s %9s\n' workload policy inst "best ms" "median ms" "x Vidur"
for w in conv_poisson_qps1.0_n1000_seed42:1 conv_poisson_qps1.0_n10000_seed42:1 \
	 conv_poisson_qps4.0_n10000_seed42:4; do
	name=${w%:*}
	inst=${w#*:}
	for policy in vllm sarathi; do
		times=""
		i=0
		while [ "$i" -lt "$RUNS" ]; do
			t0=$(now_ns)
			"$BIN" run --trace "$W/$name.csv" --model llama-2-70b --gpu a100-80gb-sxm --tp 2 \
				--policy "$policy" --instances "$inst" --json >"$OUT/$name.$policy.json"
			t1=$(now_ns)
			times="$times $(( (t1 - t0) / 1000 ))"
			i=$((i + 1))
		done
		# best and median, us -> ms
		set -- $(printf '%s\n' $times | sort -n)
		best=$1
		shift $(( ($# - 1) / 2 ))
		med=$1
		v=$(vidur_s "$name")
		awk -v n="$name" -v p="$policy" -v i="$inst" -v b="$best" -v m="$med" -v v="$v" \
			'BEGIN { printf "%-40s %-8s %4d %10.1f %10.1f %9.0f\n", n, p, i, b / 1e3, m / 1e3, v * 1e6 / b }'
	done
done
echo "summaries in $OUT"
