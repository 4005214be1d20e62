#!/bin/sh
# Workload models on the command line (issue 16 section 3): `workload fit`
# writes a model (--out, --json), `run --workload` generates from it with
# --rate / --rate-scale / --prompt-scale / --output-scale; bad command lines
# exit 2 with one line, bad model files exit 1 naming the file and the
# field.  The shipped traces' round trip at the end is skipped (77) where
# ../shared/data is absent.
. "$(dirname "$0")/cli-lib.sh"

command -v jq >/dev/null || { echo "cli-workload: needs jq" >&2; exit 77; }

# a trace: 2,000 gamma arrivals at 4 req/s (cv 2) with lognormal lengths
"$BIN" run --arrival gamma:rate=4,cv=2 \
	--lengths lognormal:prompt_mean=800,prompt_cv=1,output_mean=150,output_cv=0.8 \
	--num-requests 2000 --seed 4 --out "$T/gen" --quiet >"$T/out" 2>&1 ||
	fail "making a trace: $(cat "$T/out")"
# the run's requests.csv has arrival_ms and the lengths: a native trace
if [ -f "$T/gen/requests.csv" ]; then
	awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i
		   print "arrival_ms,prompt_tokens,output_tokens"; next }
		 { printf "%s,%s,%s\n", $c["arrival_ms"], $c["prompt_tokens"], $c["output_tokens"] }' \
		"$T/gen/requests.csv" >"$T/trace.csv"
fi
[ "$(wc -l <"$T/trace.csv")" -eq 2001 ] || fail "trace: $(head -3 "$T/trace.csv")"

# fit: the summary, the file, --json on stdout, the same model either way
if "$BIN" workload fit "$T/trace.csv" --out "$T/m.json" >"$T/out" 2>"$T/err" &&
   grep -q "^workload model of trace.csv (native): 2000 requests over" "$T/out" &&
   grep -q "^arrivals: [0-9.]* req/s, gap cv" "$T/out" &&
   grep -q "^prompt tokens: p50 [0-9]*, p90" "$T/out" &&
   grep -q "^wrote $T/m.json" "$T/out" && [ ! -s "$T/err" ]; then
	pass "workload fit: summary and --out"
else
	fail "workload fit: $(cat "$T/out" "$T/err")"
fi
if "$BIN" workload fit "$T/trace.csv" --json >"$T/j.json" 2>"$T/err" &&
   cmp -s "$T/j.json" "$T/m.json"; then
	pass "workload fit --json prints the model --out writes"
else
	fail "workload fit --json: $(head -5 "$T/j.json") $(cat "$T/err")"
fi
v=$(jq -r '.servesim_workload_model, .source.requests,
	(.arrivals.rate_rps > 3.6 and .arrivals.rate_rps < 4.4), (.lengths.p | length)' \
	"$T/m.json" | tr '\n' ' ')
[ "$v" = "1 2000 true 103 " ] && pass "model: version, requests, rate 4 +- 10%, 103 quantiles" ||
	fail "model fields: $v"
"$BIN" workload fit "$T/trace.csv" -q --out "$T/q.json" >"$T/out" 2>&1 && [ ! -s "$T/out" ] &&
	cmp -s "$T/q.json" "$T/m.json" && pass "workload fit -q: silent" || fail "-q: $(cat "$T/out")"

# run --workload: as many requests as the trace by default; deterministic
if "$BIN" run --workload "$T/m.json" --seed 2 --json >"$T/a.json" 2>"$T/err" &&
   "$BIN" run --workload "$T/m.json" --seed 2 --json >"$T/b.json" 2>>"$T/err" &&
   cmp -s "$T/a.json" "$T/b.json" &&
   [ "$(jq .requests.total "$T/a.json")" = 2000 ] &&
   [ "$(jq -r .config.workload "$T/a.json")" = "model:$T/m.json" ]; then
	pass "run --workload: 2000 requests (the trace's), the same for the same seed"
else
	fail "run --workload: $(cat "$T/err") $(jq -c '.requests, .config.workload' "$T/a.json")"
fi
"$BIN" run --workload "$T/m.json" --seed 3 --json >"$T/c.json" 2>&1
cmp -s "$T/a.json" "$T/c.json" && fail "run --workload: --seed 3 gave seed 2's run" ||
	pass "run --workload: another seed, another workload"

# the knobs, from summary.json: 3x the rate (--rate 12: the offered rate of
# the requests generated is 12 exactly, so the served rate, with the queue
# drained at the end, is just under it), prompts 20% longer (input tokens
# per request x1.2 within 0.5%: each length is the same draw x1.2,
# rounded), outputs halved, --num-requests
per_req() { jq "$1 / .throughput.requests_per_s" "$2"; }
"$BIN" run --workload "$T/m.json" --seed 2 --num-requests 500 --json >"$T/base.json" 2>"$T/err" ||
	fail "base: $(cat "$T/err")"
"$BIN" run --workload "$T/m.json" --seed 2 --num-requests 500 --rate 12 --prompt-scale 1.2 \
	--output-scale 0.5 --json >"$T/k.json" 2>"$T/err" || fail "knobs: $(cat "$T/err")"
if [ "$(jq .requests.total "$T/k.json")" = 500 ]; then
	pass "--num-requests 500"
else
	fail "--num-requests: $(jq -c .requests "$T/k.json")"
fi
ok=$(jq -n --slurpfile b "$T/base.json" --slurpfile k "$T/k.json" '
	($b[0].throughput.input_tokens_per_s / $b[0].throughput.requests_per_s) as $pb |
	($k[0].throughput.input_tokens_per_s / $k[0].throughput.requests_per_s) as $pk |
	($b[0].throughput.output_tokens_per_s / $b[0].throughput.requests_per_s) as $ob |
	($k[0].throughput.output_tokens_per_s / $k[0].throughput.requests_per_s) as $ok |
	[(($pk / $pb) - 1.2 | fabs) < 0.006, (($ok / $ob) - 0.5 | fabs) < 0.01,
	 $k[0].throughput.requests_per_s > 10 and $k[0].throughput.requests_per_s <= 12.0001,
	 $k[0].config.workload_model.prompt_scale == 1.2, $k[0].config.workload_model.rate_req_s == 12]')
[ "$ok" = "$(printf '[\n  true,\n  true,\n  true,\n  true,\n  true\n]')" ] &&
	pass "--rate 12 --prompt-scale 1.2 --output-scale 0.5 change the workload as asked" ||
	fail "knobs: $ok"
"$BIN" run --workload "$T/m.json" --seed 2 --num-requests 500 --rate-scale 3 --json \
	>"$T/s.json" 2>&1
ok=$(jq -n --slurpfile b "$T/base.json" --slurpfile s "$T/s.json" \
	'$s[0].duration_s < $b[0].duration_s / 2')
[ "$ok" = true ] && pass "--rate-scale 3: the run is over in under half the time" ||
	fail "--rate-scale 3: $(jq .duration_s "$T/s.json") vs $(jq .duration_s "$T/base.json")"
"$BIN" run --workload "$T/m.json" --duration 60 --json >"$T/d.json" 2>&1
n=$(jq .requests.total "$T/d.json")
# 60 s at 4 req/s with cv 2: 240 expected, sd about sqrt(240 x 4) = 31
[ -n "$n" ] && [ "$n" -gt 120 ] && [ "$n" -lt 360 ] && pass "--duration 60: $n requests" ||
	fail "--duration 60: $n requests"

# bad command lines: exit 2, one line
expect_error 2 "^servesim: --workload cannot be combined with --trace" -- \
	run --workload "$T/m.json" --trace "$T/trace.csv"
expect_error 2 "^servesim: --workload cannot be combined with --lengths" -- \
	run --workload "$T/m.json" --lengths fixed:prompt=1,output=1
expect_error 2 "^servesim: --workload cannot be combined with --arrival" -- \
	run --workload "$T/m.json" --arrival poisson:rate=1
expect_error 2 "^servesim: --workload cannot be combined with --concurrency" -- \
	run --workload "$T/m.json" --concurrency 4
expect_error 2 "^servesim: --rate cannot be combined with --rate-scale" -- \
	run --workload "$T/m.json" --rate 3 --rate-scale 2
expect_error 2 "^servesim: --prompt-scale needs --workload MODEL" -- \
	run --trace "$T/trace.csv" --prompt-scale 1.2
expect_error 2 "^servesim: --prompt-scale: expected a factor in \[0.001, 1000\], got '0'" -- \
	run --workload "$T/m.json" --prompt-scale 0
expect_error 2 "^servesim: workload: expected a subcommand: fit" -- workload
expect_error 2 "^servesim: workload: unknown subcommand 'fits'" -- workload fits
expect_error 2 "^servesim: workload fit: expected one TRACE, got 0 arguments" -- workload fit
expect_error 2 "^servesim: workload fit: --format: unknown format 'csv'" -- \
	workload fit "$T/trace.csv" --format csv
"$BIN" workload fit --help | grep -q "^usage: servesim workload fit TRACE" &&
	pass "workload fit --help" || fail "workload fit --help"

# bad inputs: exit 1 naming the file (and the field)
expect_error 1 "^servesim: $T/none.csv: cannot open trace" -- workload fit "$T/none.csv"
printf 'num_prefill_tokens,num_decode_tokens\n10,2\n20,3\n' >"$T/len.csv"
expect_error 1 "^servesim: $T/len.csv: the trace has no arrival times" -- workload fit "$T/len.csv"
jq '.arrivals.gap_cv = "high"' "$T/m.json" >"$T/bad.json"
expect_error 1 \
	"^servesim: $T/bad.json: arrivals.gap_cv: expected a number >= 0.001 and <= 1000, .* string" -- \
	run --workload "$T/bad.json"
jq 'del(.lengths.output_tokens)' "$T/m.json" >"$T/bad.json"
expect_error 1 \
	"^servesim: $T/bad.json: lengths.output_tokens: expected an array of numbers, got nothing" -- \
	run --workload "$T/bad.json"
jq '.servesim_workload_model = 7' "$T/m.json" >"$T/bad.json"
expect_error 1 "^servesim: $T/bad.json: servesim_workload_model: expected version 1, got 7" -- \
	run --workload "$T/bad.json"
expect_error 1 "^servesim: $T/trace.csv:1: expected a servesim workload model \(JSON\)" -- \
	run --workload "$T/trace.csv"
# a failed fit leaves no model behind
rm -f "$T/none.json"
"$BIN" workload fit "$T/len.csv" --out "$T/none.json" 2>/dev/null
[ ! -e "$T/none.json" ] && pass "a failed fit writes nothing" ||
	fail "a failed fit wrote $T/none.json"

# plan and sweep take --workload too (the shared workload options)
"$BIN" plan --workload "$T/m.json" --num-requests 200 --max-probes 3 --json >"$T/p.json" \
	2>"$T/err" &&
	pass "plan --workload" || fail "plan --workload: $(tail -2 "$T/err")"

# a session trace (tests/data/sessions-example.csv, hand-checked): two
# sessions of 3 steps; later steps of 1, 1, 2 and 1 calls; think times 4,
# 6.5, 0.3 and 0.25 s; later calls' new tokens 80, 60 (chat-a) and 200,
# 150, 90 (agent-b, its step-2 prompt less step 1's prompt and both outputs)
SX=${SERVESIM_TEST_DATA:?}/sessions-example.csv
if "$BIN" workload fit "$SX" --out "$T/s.json" >"$T/out" 2>"$T/err" &&
   grep -q "^workload model of sessions-example.csv (sessions): 2 sessions, 7 calls over 1.5 s" \
	"$T/out" &&
   grep -q "^turns a session: mean 3, p50 3, p90 3, max 3; calls a later step: mean 1.25 (max 2)" \
	"$T/out" &&
   grep -q "^think time before a later step: p50 2.15 s, p90 5.75 s, max 6.5 s" "$T/out" &&
   grep -q "^later calls: new tokens p50 90, p90 180, max 200; output tokens p50 200," "$T/out"
then
	pass "workload fit on a session trace: the session summary"
else
	fail "workload fit sessions: $(cat "$T/out" "$T/err")"
fi
ok=$(jq -c '.sessions | [.sessions, .calls, .turns.values, .fanout.values,
	.fanout.probabilities, .think_s[0], .think_s[-1], .new_tokens[0], .new_tokens[-1],
	.output_tokens[-1]]' "$T/s.json")
[ "$ok" = '[2,7,[3],[1,2],[0.75,0.25],0.25,6.5,60,200,400]' ] &&
	pass "sessions model: turns, fan-out, think time and new tokens as read off by hand" ||
	fail "sessions model: $ok"
if "$BIN" run --workload "$T/s.json" --num-requests 5 --seed 3 >"$T/out" 2>&1 &&
   grep -q "^sessions: 5 total, 5 completed" "$T/out"; then
	pass "run --workload on a sessions model: --num-requests counts sessions"
else
	fail "run --workload sessions: $(cat "$T/out")"
fi
jq '.sessions.turns.mean = 2' "$T/s.json" >"$T/bad.json"
expect_error 1 \
	"^servesim: $T/bad.json: sessions.turns.mean: expected the mean of sessions.turns.values" -- \
	run --workload "$T/bad.json"
jq '.sessions.think_s = 5' "$T/s.json" >"$T/bad.json"
expect_error 1 \
	"^servesim: $T/bad.json: sessions.think_s: expected an array of numbers, got a number" -- \
	run --workload "$T/bad.json"
expect_error 2 "^servesim: --tenants with a sessions model" -- \
	run --workload "$T/s.json" --tenants 2

# a shipped trace, fitted and generated: the model's rate and length
# percentiles come back from the generated workload (2 x 12,000 requests:
# the rate within 10% with --rate making it exact, p50 lengths within 5%)
TR=${SERVESIM_SHARED_DATA:-../shared/data}/traces/mooncake_fast25/conversation_trace.jsonl
if [ ! -f "$TR" ]; then
	echo "cli-workload: no shared data ($TR): skipping the real-trace round trip"
	# shellcheck disable=SC2154  # fails: set by cli-lib.sh
	[ "$fails" -eq 0 ] || finish
	exit 77
fi
"$BIN" workload fit "$TR" --out "$T/mc.json" -q || fail "fit $TR"
"$BIN" run --workload "$T/mc.json" --rate 0.4 --out "$T/mcrun" --quiet 2>"$T/err" ||
	fail "run on the Mooncake model: $(cat "$T/err")"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i
	   print "arrival_ms,prompt_tokens,output_tokens"; next }
	 { printf "%s,%s,%s\n", $c["arrival_ms"], $c["prompt_tokens"], $c["output_tokens"] }' \
	"$T/mcrun/requests.csv" >"$T/mctrace.csv"
"$BIN" workload fit "$T/mctrace.csv" --out "$T/mc2.json" -q || fail "refit"
ok=$(jq -n --slurpfile a "$T/mc.json" --slurpfile b "$T/mc2.json" '
	[(($b[0].arrivals.rate_rps / 0.4) - 1 | fabs) < 1e-6,
	 (($b[0].lengths.prompt_tokens[50] / $a[0].lengths.prompt_tokens[50]) - 1 | fabs) < 0.05,
	 (($b[0].lengths.output_tokens[50] / $a[0].lengths.output_tokens[50]) - 1 | fabs) < 0.05,
	 (($b[0].lengths.spearman_rho - $a[0].lengths.spearman_rho) | fabs) < 0.05,
	 $b[0].source.requests == $a[0].source.requests]')
[ "$ok" = "$(printf '[\n  true,\n  true,\n  true,\n  true,\n  true\n]')" ] &&
	pass "Mooncake conversation: fit, generate at 0.4 req/s, refit: rate, p50s, rho back" ||
	fail "Mooncake round trip: $ok"

# the exgentic agent trace (18 sessions): replayed, and generated from its
# fitted model with seeds 1 to 5 (18 sessions each), with the prefix cache.
# Session completion p50: the median over the seeds within 0.5x to 2x of
# the trace's (the seeds range from 0.9x to 2.1x: a seed that draws several
# 92k-token sessions together queues them; docs/workloads.md "Sessions").
# The cache hit ratio of turns 1 to 5 (mean): within 0.06 of the trace's on
# every seed (the trace 0.993, the seeds 0.96 to 0.996).
X=${SERVESIM_SHARED_DATA:-../shared/data}/traces/agent_sessions/exgentic_sessions.csv
"$BIN" workload fit "$X" --out "$T/x.json" >"$T/out" 2>&1 &&
	grep -q "^workload model of exgentic_sessions.csv (exgentic): 18 sessions, 167 calls" \
		"$T/out" || fail "fit exgentic: $(cat "$T/out")"
"$BIN" run --trace "$X" --prefix-cache on --out "$T/xt" --quiet 2>"$T/err" ||
	fail "exgentic replay: $(cat "$T/err")"
for s in 1 2 3 4 5; do
	"$BIN" run --workload "$T/x.json" --prefix-cache on --seed $s --out "$T/xm$s" --quiet \
		2>"$T/err" || fail "exgentic model seed $s: $(cat "$T/err")"
done
ok=$(jq -n --slurpfile t "$T/xt/summary.json" --slurpfile a "$T/xm1/summary.json" \
	--slurpfile b "$T/xm2/summary.json" --slurpfile c "$T/xm3/summary.json" \
	--slurpfile d "$T/xm4/summary.json" --slurpfile e "$T/xm5/summary.json" '
	def hit: [.sessions.cache_hit_by_turn[1:6][].hit_ratio] | add / length;
	($t[0] | hit) as $th |
	[$a[0], $b[0], $c[0], $d[0], $e[0]] as $m |
	([$m[].sessions.completion_s.p50] | sort | .[2]) as $p50 |
	[($m | length) == 5, ($m | all(.sessions.count == 18)),
	 ($p50 / $t[0].sessions.completion_s.p50 | . > 0.5 and . < 2),
	 ($m | all((hit - $th) | fabs < 0.06))]')
[ "$ok" = "$(printf '[\n  true,\n  true,\n  true,\n  true\n]')" ] &&
	pass "exgentic: fitted model's session completion p50 and hit ratio by turn near the trace's" ||
	fail "exgentic trace vs model: $ok"

# A trace with an adapter column: the fit records the adapters' count, the
# share naming none and their popularity (a Zipf exponent by rank, maximum
# likelihood): a trace drawn from Zipf(1.1) over 200 adapters, 20,000
# requests, a fifth of them the base model, gives back 1.1 within 0.1
# (the fitted exponent's spread at this size is under 0.05; the top ranks
# dominate the likelihood); a model without adapters has no such key.
python3 - "$T/lora.csv" <<'PY'
import random, sys
rng = random.Random(7)
w = [1 / (i + 1) ** 1.1 for i in range(200)]
tot = sum(w)
cum, acc = [], 0.0
for x in w:
    acc += x / tot
    cum.append(acc)
with open(sys.argv[1], "w") as f:
    f.write("arrival_ms,prompt_tokens,output_tokens,adapter\n")
    for i in range(20000):
        u = rng.random()
        a = -1 if rng.random() < 0.2 else next(k for k, c in enumerate(cum) if u <= c)
        f.write("%d,100,20,%d\n" % (i * 10, a))
PY
"$BIN" workload fit "$T/lora.csv" --out "$T/lora.json" >"$T/lora.out" 2>"$T/err" &&
	grep -q "^LoRA adapters: 200 named by 79.9% of requests" "$T/lora.out" &&
	jq -e '.adapters.count == 200 and (.adapters.zipf_s - 1.1 | fabs) < 0.1 and
		(.adapters.base_share - 0.2 | fabs) < 0.02' "$T/lora.json" >/dev/null &&
	jq -e 'has("adapters") | not' "$T/m.json" >/dev/null &&
	pass "workload fit: adapter count, base share and Zipf exponent recorded" ||
	fail "workload fit of adapters: $(cat "$T/lora.out" "$T/err"; jq .adapters "$T/lora.json")"
"$BIN" run --workload "$T/lora.json" --num-requests 50 --quiet 2>"$T/err" &&
	pass "a model with adapters generates" || fail "run --workload with adapters: $(cat "$T/err")"
jq '.adapters.zipf_s = 9' "$T/lora.json" >"$T/lora-bad.json"
expect_error 1 "lora-bad.json: adapters.zipf_s: expected" -- run --workload "$T/lora-bad.json"
finish
