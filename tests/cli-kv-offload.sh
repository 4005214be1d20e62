#!/bin/sh
# --kv-offload on the command line (docs/kv-cache.md, "Offload to host
# memory"): a run with prefixes flushed out of a small GPU cache finds them
# in host memory; kv_tiers appears in summary.json only with offload; bad
# specs and a clash with --preemption swap exit 2 with one line.
. "$(dirname "$0")/cli-lib.sh"

# A Mooncake-format trace: 8 conversations of 4 shared 512-token blocks
# each, visited round-robin 25 times, 2 s apart; each prompt adds one
# block of its own (request i) and asks 16 output tokens.
awk 'BEGIN { for (i = 0; i < 200; i++) { g = i % 8;
	printf "{\"timestamp\": %d, \"input_length\": 2560, \"output_length\": 16, \"hash_ids\": [%d, %d, %d, %d, %d]}\n",
		i * 2000, g * 10, g * 10 + 1, g * 10 + 2, g * 10 + 3, 1000 + i } }' >"$T/conv.jsonl"
R="run --trace $T/conv.jsonl --kv-blocks 400 --seed 1"

if "$BIN" $R --prefix-cache on --out "$T/off" --quiet 2>"$T/err" &&
   "$BIN" $R --kv-offload host_gb=8 --out "$T/on" --quiet 2>>"$T/err"; then
	pass "runs with and without --kv-offload"
else
	fail "runs: $(cat "$T/err")"
fi
grep -q '"kv_tiers"' "$T/off/summary.json" && fail "kv_tiers without --kv-offload" ||
	pass "no kv_tiers without --kv-offload"
# 400 blocks (6,400 tokens) hold 2 conversations' prefixes: the other 6
# of every 8 visits miss the GPU and hit host memory
hits() { sed -n "/\"$2\": {/,/}/s/.*\"hit_tokens\": \([0-9]*\).*/\1/p" "$1" | head -1; }
host=$(hits "$T/on/summary.json" host)
pc_off=$(sed -n '/"prefix_cache"/,/}/s/.*"hit_tokens": \([0-9]*\).*/\1/p' "$T/off/summary.json")
pc_on=$(sed -n '/"prefix_cache"/,/}/s/.*"hit_tokens": \([0-9]*\).*/\1/p' "$T/on/summary.json")
if [ -n "$host" ] && [ "$host" -gt 0 ] && [ "$pc_on" -gt "$pc_off" ]; then
	pass "host hits $host tokens; prefix hits $pc_off -> $pc_on tokens"
else
	fail "host hits '$host', prefix hits '$pc_off' -> '$pc_on'"
fi
grep -q '^KV tiers: hits [0-9]* tokens on GPU, [1-9][0-9]* from host' "$T/on/summary.txt" &&
	pass "text summary has the KV tiers line" || fail "summary.txt: $(grep -i tier "$T/on/summary.txt")"

# Both tiers below the GPU on 2 instances: every hit is counted once, in
# the first tier that held it (GPU, then host, then the remote store), so
# the tiers' hits add up to the prefix cache's exactly.
if "$BIN" $R --instances 2 --kv-offload host_gb=0.2 --kv-remote gb=8 --out "$T/both" \
	--quiet 2>"$T/err"; then
	gpu=$(hits "$T/both/summary.json" gpu)
	hst=$(hits "$T/both/summary.json" host)
	rem=$(hits "$T/both/summary.json" remote)
	all=$(sed -n '/"prefix_cache"/,/}/s/.*"hit_tokens": \([0-9]*\).*/\1/p' "$T/both/summary.json")
	if [ -n "$rem" ] && [ "$rem" -gt 0 ] && [ "$hst" -gt 0 ] &&
	   [ $((gpu + hst + rem)) -eq "$all" ]; then
		pass "host and remote tiers together: $gpu + $hst + $rem = $all hit tokens"
	else
		fail "tiers: gpu '$gpu' host '$hst' remote '$rem', prefix cache '$all'"
	fi
	grep -q '^KV tiers: hits [0-9]* tokens on GPU, [0-9]* from host (.*), [0-9]* from the remote store' \
		"$T/both/summary.txt" && pass "one KV tiers line names the three tiers" ||
		fail "summary.txt: $(grep -i tier "$T/both/summary.txt")"
else
	fail "run with both tiers: $(cat "$T/err")"
fi

expect_error 2 "^servesim: --kv-offload: expected 0 < host_gb < 1e6 and 0 < bw_gbps < 1e6, got 0 and 1$" -- \
	$R --kv-offload host_gb=0
expect_error 2 "^servesim: --kv-offload: expected off or host_gb=G\[,bw_gbps=B\], got 'bw_gbps=5'$" -- \
	$R --kv-offload bw_gbps=5
expect_error 2 "^servesim: --kv-offload: expected 0 < host_gb < 1e6 and 0 < bw_gbps < 1e6, got 1 and -3$" -- \
	$R --kv-offload host_gb=1,bw_gbps=-3
expect_error 2 "^servesim: --kv-offload: unknown parameter" -- $R --kv-offload host_gb=1,gb=2
expect_error 2 "^servesim: --kv-offload and --preemption swap share host memory" -- \
	$R --kv-offload host_gb=8 --preemption swap:host_gb=4
"$BIN" $R --kv-offload host_gb=8 --preemption swap:host_gb=8 --quiet >/dev/null 2>"$T/err" &&
	pass "--preemption swap with the same host_gb is taken" || fail "same host_gb: $(cat "$T/err")"
"$BIN" $R --kv-offload off --prefix-cache on --out "$T/off2" --quiet 2>"$T/err" &&
	cmp -s "$T/off/summary.txt" "$T/off2/summary.txt" &&
	pass "--kv-offload off is no offload" || fail "--kv-offload off: $(cat "$T/err")"
# a tier that holds no KV block is refused, as --kv-remote's (issue 34 §5)
expect_error 2 "^servesim: --kv-offload: host_gb=1e-300 holds no KV block of [0-9]+ bytes per GPU$" -- \
	run --num-requests 5 --kv-offload host_gb=1e-300
finish
