#!/bin/sh
# bench-outputs.sh [SERVESIM] [N]: what `run --out` costs over the same run
# without it (measured, never pass/fail): N synthetic requests (default
# 100,000; Poisson 40 req/s, 512-token prompts, 128-token outputs) on the
# default scenario, gnuplot kept off PATH so plots are their .dat and .gp
# only.  Prints the best of 5 CPU times (user + sys, s) of each and their
# difference: the cost of writing requests.csv, results.db, the plot data,
# summary.txt and summary.json.  CPU time rather than wall time: on a
# shared machine it is the steadier of the two.
BIN=${1:-build/servesim}
N=${2:-100000}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
best() {  # best CPU seconds of 5 runs of: servesim run ... "$@"
	b=
	for _ in 1 2 3 4 5; do
		env PATH=/nonexistent /usr/bin/time -f '%U %S' -o "$T/t" "$BIN" run \
			--arrival poisson:rate=40 --lengths fixed:prompt=512,output=128 \
			--num-requests "$N" --quiet "$@" 2>/dev/null >/dev/null || { echo "run failed" >&2; exit 1; }
		s=$(awk '{printf "%.3f", $1 + $2}' "$T/t")
		b=$(awk -v a="$b" -v s="$s" 'BEGIN{print (a == "" || s < a) ? s : a}')
	done
	echo "$b"
}
without=$(best)
with=$(best --out "$T/out")
echo "requests: $N"
echo "run without --out: $without s CPU (best of 5)"
echo "run with --out:    $with s CPU (best of 5)"
awk -v a="$without" -v b="$with" 'BEGIN{printf "writing the outputs: %.3f s CPU\n", b - a}'
ls -l "$T/out" | awk 'NR > 1 {printf "  %-16s %10d bytes\n", $9, $5}'
