#!/bin/sh
# What a CUDA- and MPI-enabled build costs a simulation (issue 10): start-up
# (`servesim version`) and a 10,000-request run, best of N, for each binary
# given, with the summary's checksum so that builds can be compared; then
# the milliseconds of the smallest commands, `servesim --version`, a
# 2-request roofline run (what loading the binary's libraries costs: the
# CPU backend's OpenBLAS and OpenMP were ~9 ms of it) and, where the shared
# data is (SERVESIM_SHARED_DATA, default ../shared/data), the first two
# requests of the peer workload on the calibrated Llama-2-70B/A100 tables,
# as the mean over 30 runs, best of N such batches (`perf stat -r 30` where
# perf is installed: wall, task-clock and page faults, which cost ~14 us
# each on our VMs; otherwise wall from date +%s%N).
# Measured, never pass/fail.  Needs GNU time (/usr/bin/time, package `time`).
#
#   sh bench/bench-startup.sh [-n N] BIN [BIN...]
#   e.g. sh bench/bench-startup.sh /work/main/build/servesim build/servesim
set -eu
N=5
[ "${1:-}" = "-n" ] && { N=$2; shift 2; }
[ $# -gt 0 ] || { echo "usage: $0 [-n N] BIN [BIN...]" >&2; exit 2; }
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "$0: needs GNU time ($TIME)" >&2; exit 2; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
RUN="run --num-requests 10000 --rate-scale 2 --quiet --json"

# best(FILE): the smallest wall time and the smallest peak RSS of N lines
# "wall_s user_s sys_s maxrss_kb"
best() {
	printf "%s s wall (user+sys %s s), %s MB peak RSS" \
		"$(cut -d' ' -f1 "$1" | sort -n | head -1)" \
		"$(awk '{ print $2 + $3 }' "$1" | sort -n | head -1)" \
		"$(cut -d' ' -f4 "$1" | sort -n | head -1 | awk '{ printf "%.1f", $1 / 1024 }')"
}

for bin in "$@"; do
	: >"$W/start"
	: >"$W/run"
	for _ in $(seq "$N"); do
		$TIME -f "%e %U %S %M" -o "$W/t" "$bin" version >/dev/null
		cat "$W/t" >>"$W/start"
		$TIME -f "%e %U %S %M" -o "$W/t" "$bin" $RUN >"$W/summary.json"
		cat "$W/t" >>"$W/run"
	done
	echo "$bin (best of $N)"
	echo "  start-up (servesim version): $(best "$W/start")"
	echo "  servesim $RUN: $(best "$W/run")"
	echo "  summary sha256: $(sha256sum <"$W/summary.json" | cut -d' ' -f1)"
done

# small(BIN ARGS...): "wall_ms task_ms faults" per command, mean of 30 runs
small() {
	if command -v perf >/dev/null && perf stat -o "$W/perf" true 2>/dev/null; then
		perf stat -r 30 -e task-clock,page-faults -o "$W/perf" "$@" >/dev/null 2>&1
		awk '/msec task-clock/ { task = $1 }
		     /page-faults/ { faults = $1 }
		     /seconds time elapsed/ { wall = $1 * 1000 }
		     END { printf "%.2f %.2f %s\n", wall, task, faults }' "$W/perf"
	else
		t0=$(date +%s%N)
		for _ in $(seq 30); do "$@" >/dev/null 2>&1; done
		t1=$(date +%s%N)
		echo "$(( (t1 - t0) / 30000 )).$(( (t1 - t0) / 300 % 100 )) - -"
	fi
}
# best(FILE): the batch with the least task-clock (the steadier figure on a
# shared machine; page faults vary by one or two between batches)
best_small() {
	sort -n -k2 "$1" | head -1 |
		awk '{ print $1 " ms wall, " $2 " ms task-clock, " $3 " page faults" }'
}
PEER=${SERVESIM_SHARED_DATA:-../shared/data}/traces/peer_workloads/conv_poisson_qps1.0_n1000_seed42.csv
if [ -r "$PEER" ]; then head -3 "$PEER" >"$W/two.csv"; fi
for bin in "$@"; do
	: >"$W/v"
	: >"$W/r2"
	: >"$W/p2"
	for _ in $(seq "$N"); do
		small "$bin" --version >>"$W/v"
		small "$bin" run --num-requests 2 --cost-model roofline --quiet --json >>"$W/r2"
		if [ -r "$W/two.csv" ]; then
			small "$bin" run --trace "$W/two.csv" --model llama-2-70b --gpu a100-80gb-sxm \
				--tp 2 --policy vllm --json >>"$W/p2"
		fi
	done
	echo "$bin (per command: mean of 30, best of $N batches)"
	echo "  servesim --version: $(best_small "$W/v")"
	echo "  servesim run --num-requests 2 --cost-model roofline: $(best_small "$W/r2")"
	if [ -s "$W/p2" ]; then
		echo "  servesim run --trace (2 peer requests) --model llama-2-70b --gpu a100-80gb-sxm --tp 2 --policy vllm --json: $(best_small "$W/p2")"
	fi
done
