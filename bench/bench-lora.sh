#!/bin/sh
# bench-lora.sh [SERVESIM] [N]: what multi-LoRA serving costs the
# simulator per simulated request (measured, never pass/fail; issue 33's
# target: at most 1.3x a plain run).  N synthetic requests (default
# 200,000; Poisson 40 req/s, 512-token prompts, 128-token outputs) on the
# default scenario, run plain and with each --lora below; prints the best
# of 5 CPU times (user + sys, s) of each, per request, and the ratio to the
# plain run.  CPU time rather than wall time: on a shared machine it is the
# steadier of the two; the five rounds run every configuration in turn, so
# a slow spell of the machine falls on all of them alike.
BIN=${1:-build/servesim}
N=${2:-200000}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
set -- "" adapters=100,rank=16,max_loras=8 \
	adapters=1000,mix=8:0.5/16:0.3/64:0.2,popularity=zipf:1.1,max_loras=16 \
	adapters=1000,rank=16,max_loras=4,max_cpu_loras=64 \
	adapters=1000,mix=8:0.5/16:0.3/64:0.2,popularity=zipf:1.1,paging=unified
for _ in 1 2 3 4 5; do
	i=0
	for s in "$@"; do
		i=$((i + 1))
		if [ -n "$s" ]; then set_lora="--lora $s"; else set_lora=; fi
		# shellcheck disable=SC2086
		/usr/bin/time -f '%U %S' -o "$T/t" "$BIN" run \
			--arrival poisson:rate=40 --lengths fixed:prompt=512,output=128 \
			--num-requests "$N" --quiet $set_lora 2>/dev/null >/dev/null ||
			{ echo "run failed: $s" >&2; exit 1; }
		awk '{printf "%.3f\n", $1 + $2}' "$T/t" >>"$T/c$i"
	done
done
best() { sort -n "$T/c$1" | head -1; }
plain=$(best 1)
echo "requests: $N (best of 5 CPU times)"
i=0
for s in "$@"; do
	i=$((i + 1))
	t=$(best $i)
	label=plain
	[ -n "$s" ] && label="--lora $s"
	printf '%-72s %8s s %10s us/request %6s\n' "$label" "$t" \
		"$(awk -v t="$t" -v n="$N" 'BEGIN{printf "%.2f", t * 1e6 / n}')" \
		"$(awk -v t="$t" -v p="$plain" 'BEGIN{printf "%.2fx", t / p}')"
done
