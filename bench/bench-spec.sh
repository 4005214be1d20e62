#!/bin/sh
# bench-spec.sh [SERVESIM] [N]: what speculative decoding costs the
# simulator per simulated request (measured, never pass/fail; issue 32's
# target: at most 1.5x a plain run).  N synthetic requests (default 50,000;
# Poisson 40 req/s, 512-token prompts, 128-token outputs) on the default
# scenario, run plain and with each --spec below; prints the best of 5 CPU
# times (user + sys, s) of each, per request, and the ratio to the plain
# run.  CPU time rather than wall time: on a shared machine it is the
# steadier of the two.
BIN=${1:-build/servesim}
N=${2:-50000}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
best() {  # best CPU seconds of 5 runs of: servesim run ... "$@"
	b=
	for _ in 1 2 3 4 5; do
		/usr/bin/time -f '%U %S' -o "$T/t" "$BIN" run \
			--arrival poisson:rate=40 --lengths fixed:prompt=512,output=128 \
			--num-requests "$N" --quiet "$@" 2>/dev/null >/dev/null || { echo fail; return; }
		s=$(awk '{printf "%.3f", $1 + $2}' "$T/t")
		b=$(awk -v a="$b" -v s="$s" 'BEGIN{print (a == "" || s < a) ? s : a}')
	done
	echo "$b"
}
# (best runs in a subshell: a failed run says "fail", and the script stops)
plain=$(best)
[ "$plain" = fail ] && { echo "bench-spec: servesim run failed: $BIN run ... (plain)" >&2; exit 1; }
echo "requests: $N (best of 5 CPU times)"
printf '%-34s %8s s %10s us/request %6s\n' "plain" "$plain" \
	"$(awk -v t="$plain" -v n="$N" 'BEGIN{printf "%.2f", t * 1e6 / n}')" "1.00x"
for s in ngram:k=3 eagle3:k=3 eagle3:k=3,tree=8 draft:k=4,draft=llama-3.2-1b; do
	t=$(best --spec "$s")
	[ "$t" = fail ] && { echo "bench-spec: servesim run failed: --spec $s" >&2; exit 1; }
	printf '%-34s %8s s %10s us/request %6s\n' "--spec $s" "$t" \
		"$(awk -v t="$t" -v n="$N" 'BEGIN{printf "%.2f", t * 1e6 / n}')" \
		"$(awk -v t="$t" -v p="$plain" 'BEGIN{printf "%.2fx", t / p}')"
done
