#!/bin/sh
# Serving benchmark results replayed with `run --trace RESULT` (docs/workloads.md):
# the recorded requests run, notes name what the replay leaves out, and bad
# results are one clear line with exit 1.
. "$(dirname "$0")/cli-lib.sh"
D=${SERVESIM_TEST_DATA:?}/serving

# a vLLM result: 4 requests, one failed (left out, with a note)
if "$BIN" run --trace "$D/vllm-bench.json" --seed 1 >"$T/out" 2>"$T/err" &&
   grep -q 'requests: 3 total, 3 completed' "$T/out" &&
   grep -q 'note: 1 requests that failed in .*vllm-bench.json are left out' "$T/err"; then
	pass "vllm bench result replayed without its failed request"
else
	fail "vllm bench result: $(cat "$T/out" "$T/err" | head -5)"
fi

# closed loop: a note, and the requests still replay (open loop)
if "$BIN" run --trace "$D/vllm-closed.json" --format bench >"$T/out" 2>"$T/err" &&
   grep -q 'requests: 2 total' "$T/out" &&
   grep -q 'measured closed loop with 2 clients' "$T/err"; then
	pass "closed-loop result: replayed with a note"
else
	fail "closed-loop result: $(cat "$T/out" "$T/err" | head -5)"
fi
# with --concurrency it replays as the closed loop it was, without the note
if "$BIN" run --trace "$D/vllm-closed.json" --format bench --concurrency 2 >"$T/out" 2>"$T/err" &&
   grep -q 'requests: 2 total' "$T/out" && grep -q 'closed' "$T/out" && ! grep -q 'measured closed loop' "$T/err"; then
	pass "closed-loop result with --concurrency: replayed closed loop"
else
	fail "closed-loop result with --concurrency: $(cat "$T/out" "$T/err" | head -5)"
fi

# every per-request format replays
for f in LMBench_sharegpt_output_0.5.csv distserve-c21d11-2-1.5.exp llmservingsim/requests.jsonl; do
	if "$BIN" run --trace "$D/$f" >"$T/out" 2>"$T/err" && grep -q 'requests: 2 total, 2 completed' "$T/out"; then
		pass "replay $f"
	else
		fail "replay $f: $(cat "$T/err")"
	fi
done

# a one-line result longer than a line of a CSV may be, on a pipe: detected
# from its first bytes and read whole
awk 'BEGIN { n = 40000; printf "{\"backend\": \"vllm\", \"request_rate\": 100.0, \"input_lens\": [";
	for (i = 0; i < n; i++) printf "%s%d", i ? ", " : "", 100 + i % 7;
	printf "], \"output_lens\": ["; for (i = 0; i < n; i++) printf "%s2", i ? ", " : "";
	printf "], \"ttfts\": ["; for (i = 0; i < n; i++) printf "%s0.0123456789", i ? ", " : "";
	printf "], \"start_times\": ["; for (i = 0; i < n; i++) printf "%s%.6f", i ? ", " : "", i / 100.0;
	printf "]}\n" }' >"$T/long.json"
[ "$(wc -c <"$T/long.json")" -gt 1048576 ] || fail "long.json is not longer than a line"
if cat "$T/long.json" | "$BIN" run --trace /dev/stdin --num-requests 50 >"$T/out" 2>"$T/err" &&
   grep -q 'requests: 50 total' "$T/out"; then
	pass "a one-line result of $(wc -c <"$T/long.json") bytes on a pipe"
else
	fail "long one-line result on a pipe: $(cat "$T/err")"
fi

# bad results: one line naming the file, line and what was expected; exit 1
printf '{"input_lens": [10], "output_lens": [2], "ttfts": [-0.5]}\n' >"$T/neg.json"
expect_error 1 'neg.json:1: ttfts\[0\]: expected a duration from 0' -- run --trace "$T/neg.json"
printf '{"input_lens": [10, 20], "output_lens": [2], "ttfts": [0.1, 0.1]}\n' >"$T/len.json"
expect_error 1 'len.json:1: output_lens: 1 entries \(expected 2' -- run --trace "$T/len.json"
printf '{"backend": "vllm", "request_rate": 1.0, "mean_ttft_ms": 10}\n' >"$T/agg.json"
expect_error 1 'agg.json:1: no per-request records' -- run --trace "$T/agg.json"
printf '{"backend": "vllm", "input_lens": [10], "output_lens": [2], "ttfts": [0.1]}\n' >"$T/notime.json"
expect_error 1 'notime.json: bench trace has no arrival times; expected --arrival' -- run --trace "$T/notime.json"
expect_error 1 'sglang.jsonl:2: 2 benchmark results in one file' -- run --trace "$D/sglang.jsonl"
expect_error 1 'silicon.csv:1: an aggregate benchmark table \(aiconfigurator silicon\)' -- run --trace "$D/silicon.csv"
expect_error 1 'splitwise.csv:1: an aggregate benchmark table \(Splitwise' -- run --trace "$D/splitwise.csv"
printf "[{'prompt_len': 5, 'output_len': 2, 'issue_time': None}]\n" >"$T/vllm-1-1.exp"
expect_error 1 'vllm-1-1.exp:1: not a list of dicts of numbers' -- run --trace "$T/vllm-1-1.exp"
printf 'prompt_tokens,generation_tokens,ttft,generation_time,launch_time,finish_time\n5,2,0.1,0.1,10,9\n' >"$T/llmd.csv"
expect_error 1 'llmd.csv:2: finish_time 9 before launch_time 10' -- run --trace "$T/llmd.csv"
# a lengths-only replay of a result without send times, under synthetic arrivals
if "$BIN" run --trace "$T/notime.json" --arrival poisson:rate=1 >"$T/out" 2>"$T/err" &&
   grep -q 'requests: 1 total' "$T/out"; then
	pass "a result without send times under --arrival"
else
	fail "result without send times under --arrival: $(cat "$T/err")"
fi

# compare a measured result with the simulation of its replay
if "$BIN" run --trace "$D/vllm-bench.json" --out "$T/sim" >/dev/null 2>&1 &&
   "$BIN" compare --json="$T/cmp.json" "$D/vllm-bench.json" "$T/sim" >"$T/out" 2>"$T/err"; then
	# measured: TTFT 40, 30, 80 ms (p50 40); ITL gaps 20, 22, 20, 20, 20, 24 ms
	# (p50 20, p99 23.9 by linear interpolation); 3 served requests in 2.5 s
	if grep -q 'vllm-bench.json (measured)' "$T/out" && grep -q '^3 requests' "$T/out" &&
	   grep -E -q '^  TTFT .* 40\.000 ' "$T/out" && grep -E -q '^  ITL .* 20\.000 .* 23\.900 ' "$T/out" &&
	   grep -q '1.200 vs' "$T/out" && grep -q '"mode": "measured"' "$T/cmp.json"; then
		pass "compare RESULT SIM_DIR"
	else
		fail "compare RESULT SIM_DIR: $(cat "$T/out")"
	fi
else
	fail "compare RESULT SIM_DIR: $(cat "$T/err")"
fi
expect_error 1 'agg.json:1: no per-request records' -- compare "$T/agg.json" "$T/sim"
expect_error 1 'sglang.jsonl:2: 2 benchmark results in one file' -- compare "$D/sglang.jsonl" "$T/sim"
expect_error 1 'requests, .*vllm-closed.json has 2' -- compare "$D/vllm-closed.json" "$T/sim"

# list formats names every result format, descriptions in one column
"$BIN" list formats >"$T/fmts"
for f in bench llm-d distserve llmservingsim; do
	grep -q "^$f " "$T/fmts" || fail "list formats lacks $f"
done
if [ "$(awk '{ match($0, /^[^ ]+ +/); print RLENGTH }' "$T/fmts" | sort -u | wc -l)" -eq 1 ]; then
	pass "list formats: one description column"
else
	fail "list formats: descriptions not aligned: $(cat "$T/fmts")"
fi

# a result without send times: the error names the arrival that reproduces
# it, from the result's request_rate (issue 34 §4)
if command -v python3 >/dev/null 2>&1; then
	python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
del d['start_times']
json.dump(d, open(sys.argv[2] + '/rate.json', 'w'))
d['request_rate'] = 'inf'
json.dump(d, open(sys.argv[2] + '/inf.json', 'w'))" "$D/vllm-bench.json" "$T"
	expect_error 1 "rate.json: bench trace has no arrival times; expected --arrival to generate them \(it was measured at request_rate 4: --arrival poisson:rate=4 reproduces that\)" -- \
		run --trace "$T/rate.json"
	expect_error 1 "inf.json: bench trace has no arrival times; .*sent all at once, request_rate inf: --concurrency 3 reproduces that\)" -- \
		run --trace "$T/inf.json"
fi
# a result measured on another model: a note naming both; none for its own
"$BIN" run --trace "$D/vllm-bench.json" --model qwen3-32b >/dev/null 2>"$T/err" || fail "run on another model: $(cat "$T/err")"
grep -q "note: .*vllm-bench.json was measured with meta-llama/Llama-3.1-8B-Instruct, servesim's llama-3.1-8b; this run simulates qwen3-32b (--model)" "$T/err" &&
	pass "another model than the result's is noted" || fail "no model note: $(cat "$T/err")"
"$BIN" run --trace "$D/vllm-bench.json" >/dev/null 2>"$T/err"
grep -q "was measured with" "$T/err" && fail "a model note for the result's own model: $(cat "$T/err")" ||
	pass "the result's own model: no model note"

finish
