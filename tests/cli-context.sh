# Requests longer than the context (docs/workloads.md, "Requests longer
# than the context"): run says how many up front with the attainment still
# reachable, refuses them by default and cuts their prompts with --overlong
# truncate (the prompt keeps its last tokens; an output that alone does
# not fit is cut to the context less one); --max-context overrides the
# model's context and is part of summary.json; plan says a --target above
# the reachable attainment cannot be met, in the note, the table and
# plan.json; bad values and truncation of session workloads exit 2.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

# With a 1000-token context: request 0 fits (110), 1 exceeds by 100
# (900 + 200), 2 by its prompt alone (2000 + 10), 3 by its output alone
# (50 + 1500); 3 of 4 exceed, 1010 tokens the most.
printf 'arrival_ms,prompt_tokens,output_tokens\n0,100,10\n10,900,200\n20,2000,10\n30,50,1500\n' >"$T/t.csv"

"$BIN" run --trace "$T/t.csv" --max-context 1000 --out "$T/rej" >"$T/out" 2>"$T/err" ||
	fail "run with --max-context failed: $(cat "$T/err")"
grep -q '^servesim: note: 3 of 4 requests (75.0%) exceed the 1000-token --max-context (prompt + output; 1 by their prompt alone, by up to 1010 tokens): they are refused, so at most 25.0% attainment is reachable' "$T/err" &&
	pass "the note gives the share, the cause and the reachable attainment" ||
	fail "no or a wrong note: $(cat "$T/err")"
grep -q '^requests: 4 total, 1 completed, 3 rejected' "$T/out" && pass "the three are refused" ||
	fail "not refused: $(grep requests: "$T/out")"

"$BIN" run --trace "$T/t.csv" --max-context 1000 --overlong truncate --out "$T/cut" >"$T/out" 2>"$T/err" ||
	fail "run with --overlong truncate failed: $(cat "$T/err")"
grep -q 'note: 3 of 4 requests (75.0%) exceed .*--overlong truncate cut their prompts to fit' "$T/err" &&
	pass "truncation is said" || fail "no truncation note: $(cat "$T/err")"
grep -q '^requests: 4 total, 4 completed, 0 rejected' "$T/out" && pass "truncated requests complete" ||
	fail "not all complete: $(grep requests: "$T/out")"
"$PY" - "$T/rej" "$T/cut" <<'PYEOF' && pass "requests.csv and summary.json hold the cut lengths and the figures" || fail "wrong lengths or figures"
import csv, json, sys
rej, cut = (json.load(open(d + "/summary.json"))["config"]["context"] for d in sys.argv[1:3])
assert rej == {"context": 1000, "requests": 4, "over": 3, "share": 0.75, "prompt_over": 1,
               "max_excess_tokens": 1010, "overlong": "reject", "truncated": 0,
               "reachable_attainment": 0.25}, rej
assert cut["overlong"] == "truncate" and cut["truncated"] == 3 and cut["reachable_attainment"] == 1.0, cut
rows = {int(r["id"]): (int(r["prompt_tokens"]), int(r["output_tokens"]))
        for r in csv.DictReader(open(sys.argv[2] + "/requests.csv"))}
# 900 + 200: the prompt keeps 800; 2000 + 10: 990; 50 + 1500: output 999, prompt 1
assert rows == {0: (100, 10), 1: (800, 200), 2: (990, 10), 3: (1, 999)}, rows
PYEOF

# no request over the context: no note, and no context key in summary.json
"$BIN" run --trace "$T/t.csv" --max-context 4096 --overlong truncate --quiet --out "$T/fit" 2>"$T/err" ||
	fail "run within the context failed: $(cat "$T/err")"
[ ! -s "$T/err" ] && pass "no note when every request fits" || fail "a note without cause: $(cat "$T/err")"
"$BIN" run --trace "$T/t.csv" --quiet --out "$T/plain" 2>"$T/err" || fail "plain run failed"
"$PY" -c "import json,sys; c=json.load(open(sys.argv[1]))['config']; assert 'context' not in c" "$T/plain/summary.json" &&
	pass "summary.json without --max-context or overlong requests has no context key" ||
	fail "context key in a plain summary"

# sweep: the note once for the points that share the workload and model
"$BIN" sweep --trace "$T/t.csv" --max-context 1000 --sweep rate-scale=1,2 --out "$T/sw" >"$T/out" 2>"$T/err" ||
	fail "sweep failed: $(cat "$T/err")"
[ "$(grep -c 'note: 3 of 4 requests (75.0%) exceed the 1000-token --max-context' "$T/err")" = 1 ] &&
	pass "sweep says the note once" || fail "sweep notes: $(cat "$T/err")"

# plan: prompts up to 1900 tokens against a 1024-token context
W="--arrival poisson:rate=4 --lengths uniform:prompt_min=100,prompt_max=1900,output_min=10,output_max=200 --num-requests 40"
"$BIN" plan $W --max-context 1024 --target 90% --gpus h100-sxm --tp 1 --max-gpus 1 --modes colocated --max-probes 3 \
	--out "$T/plan" >"$T/out" 2>"$T/err" || fail "plan failed: $(cat "$T/err")"
grep -q 'note: .* exceed the 1024-token --max-context .* at most [0-9.]*% attainment is reachable; --target 90% cannot be met' "$T/err" &&
	pass "plan says the target cannot be met, before its search" || fail "plan note: $(cat "$T/err")"
"$PY" - "$T/plan/plan.json" <<'PYEOF' && pass "plan.json's workload has the context figures" || fail "plan.json context"
import json, sys
c = json.load(open(sys.argv[1]))["workload"]["context"]
assert c["context"] == 1024 and c["over"] > 0 and c["overlong"] == "reject", c
assert abs(c["reachable_attainment"] - (1 - c["over"] / c["requests"])) < 1e-12, c
PYEOF

# bad input
expect_error 2 "--overlong: expected reject or truncate, got 'cut'" -- run --overlong cut
expect_error 2 "--max-context: expected an integer in 2..1073741824, got '1'" -- run --max-context 1
expect_error 2 "--overlong truncate with a session workload: not modelled" -- run --sessions rate=1,turns=2,think_s=1 --num-requests 4 --overlong truncate
finish
