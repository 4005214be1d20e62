#!/bin/sh
# What a CUDA- and MPI-enabled build costs a simulation (issue 10): start-up
# (`servesim version`) and a 10,000-request run, best of N, for each binary
# given, with the summary's checksum so that builds can be compared.
# Measured, never pass/fail.  Needs GNU time (/usr/bin/time, package `time`).
#
#   sh bench/bench-startup.sh [-n N] BIN [BIN...]
#   e.g. sh bench/bench-startup.sh build/servesim build-plain/servesim
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
	for i in $(seq "$N"); do
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
