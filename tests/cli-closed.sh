# Closed-loop load, --concurrency N [--think-time DIST], in run, plan and
# live (the CPU backend): the summaries say which load they measured, the
# clients send requests in order, --duration stops them, and every bad
# combination is one line with exit 2.
. "$(dirname "$0")/cli-lib.sh"

gen="--lengths fixed:prompt=256,output=32 --num-requests 40"

# run: a generator; summary.json and the text summary state the load
"$BIN" run --concurrency 4 --think-time constant:ms=20 $gen --json >"$T/run.json" 2>"$T/err" ||
	fail "run --concurrency: $(cat "$T/err")"
python3 - "$T/run.json" <<'EOF' && pass "run: summary.json says closed loop, 4 clients, constant 20 ms" || fail "run: load in summary.json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["load"] == {"mode": "closed", "concurrency": 4, "think_time": "constant 20 ms", "ramp_up_s": 0}, d["load"]
assert d["config"]["concurrency"] == 4 and d["config"]["think_time"] == "constant:ms=20"
assert d["requests"]["completed"] == 40
EOF
"$BIN" run --concurrency 4 $gen >"$T/run.txt" 2>"$T/err" &&
	grep -q '^load: *closed loop, 4 clients, think time none' "$T/run.txt" &&
	pass "run: the text summary names the closed loop" ||
	fail "run text: $(grep '^load' "$T/run.txt") $(cat "$T/err")"
"$BIN" run $gen --arrival poisson:rate=5 --json >"$T/open.json" 2>"$T/err" &&
	python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["load"] == {"mode": "open"}' "$T/open.json" &&
	pass "run: an open loop says so" || fail "open loop load: $(cat "$T/err")"

# run: --ramp-up spreads the clients' first sends: client k of 4 at k x 0.5 / 4 s
# (512 output tokens: no request finishes within the ramp)
"$BIN" run --concurrency 4 --ramp-up 0.5 --lengths fixed:prompt=256,output=512 --num-requests 8 --out "$T/ramp" --quiet 2>"$T/err" || fail "run --ramp-up: $(cat "$T/err")"
python3 - "$T/ramp" <<'EOF' && pass "run: --ramp-up 0.5 starts 4 clients at 0, 125, 250, 375 ms" || fail "ramp: $(head -5 "$T/ramp/requests.csv")"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1] + "/requests.csv")))
first = sorted(float(r["arrival_ms"]) for r in rows)[:4]
assert first == [0, 125, 250, 375], first
assert json.load(open(sys.argv[1] + "/summary.json"))["load"]["ramp_up_s"] == 0.5
EOF
grep -q '^load: *closed loop, 4 clients started over 0.5 s' "$T/ramp/summary.txt" &&
	pass "run: the text summary names the ramp" || fail "ramp text: $(grep '^load' "$T/ramp/summary.txt")"

# run: a trace's requests in file order, sent one at a time by one client;
# its timestamps are ignored
printf 'arrival_ms,prompt_tokens,output_tokens\n9000,101,3\n10,102,4\n5000,103,5\n0,104,6\n' >"$T/t.csv"
"$BIN" run --trace "$T/t.csv" --concurrency 1 --out "$T/tr" --quiet 2>"$T/err" ||
	fail "run --trace --concurrency: $(cat "$T/err")"
python3 - "$T/tr/requests.csv" <<'EOF' && pass "run: a trace's lengths in file order, each sent when the last finished" || fail "trace order: $(cat "$T/tr/requests.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [int(r["prompt_tokens"]) for r in rows] == [101, 102, 103, 104], rows
arr = [float(r["arrival_ms"]) for r in rows]
fin = [float(r["finish_ms"]) for r in rows]
assert arr[0] == 0
for i in range(1, 4):
    assert abs(arr[i] - fin[i - 1]) < 1e-6, (i, arr[i], fin[i - 1])
EOF

# run: --duration stops the clients sending; those sent all finish
"$BIN" run --concurrency 2 --lengths fixed:prompt=256,output=64 --num-requests 100000 --duration 2 --json \
	>"$T/dur.json" 2>"$T/err" || fail "run --duration: $(cat "$T/err")"
python3 - "$T/dur.json" <<'EOF' && pass "run: --duration 2 stops the sending" || fail "duration: $(head -c 300 "$T/dur.json")"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["requests"]
assert 2 < r["total"] < 100000 and r["completed"] == r["total"], r
EOF

# the same seed gives the same closed-loop run byte for byte
for k in a b; do
	"$BIN" run --concurrency 8 --think-time exponential:mean_ms=30 --instances 2 --router lot \
		--num-requests 200 --seed 5 --out "$T/d$k" --quiet 2>"$T/err" || fail "determinism run: $(cat "$T/err")"
done
cmp -s "$T/da/requests.csv" "$T/db/requests.csv" && cmp -s "$T/da/summary.json" "$T/db/summary.json" &&
	pass "closed loop: same seed, same results" || fail "closed loop runs differ"

# plan: the probes scale the clients; plan.json states the load
"$BIN" plan --concurrency 2 $gen --modes colocated --instances 1 --out "$T/plan" --quiet 2>"$T/err" ||
	fail "plan --concurrency: $(cat "$T/err")"
python3 - "$T/plan/plan.json" <<'EOF' && pass "plan: closed loop, probes at a measured rate" || fail "plan.json: $(head -c 400 "$T/plan/plan.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["workload"]["load"] == {"mode": "closed", "concurrency": 2, "think_time": "none", "ramp_up_s": 0}, d["workload"]
c = d["configurations"][0]
assert c["max_rate_rps"] and c["max_rate_rps"] > 0, c
EOF

# live on the CPU backend: the clients pace the run by its own steps
live="--model llama-3.2-1b --width-div 16 --layers 2 --threads 1 --kv-blocks 512"
"$BIN" live $live --concurrency 3 --lengths fixed:prompt=32,output=8 --num-requests 12 --json \
	>"$T/live.json" 2>"$T/err" || fail "live --concurrency: $(cat "$T/err")"
python3 - "$T/live.json" <<'EOF' && pass "live: a closed loop of 3 clients completes its 12 requests" || fail "live: $(head -c 300 "$T/live.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mode"] == "live" and d["load"]["mode"] == "closed" and d["load"]["concurrency"] == 3, d["load"]
assert d["requests"]["completed"] == 12, d["requests"]
EOF

# --help lists both options for every command
for cmd in run live plan; do
	"$BIN" $cmd --help | grep -q -- '--concurrency N' && "$BIN" $cmd --help | grep -q -- '--think-time SPEC' &&
		pass "$cmd --help lists --concurrency and --think-time" || fail "$cmd --help"
done

# errors: one line, exit 2
for cmd in run plan live; do
	expect_error 2 "^servesim: --concurrency: expected an integer in 1\.\.1000000000, got '0'" -- $cmd --concurrency 0
done
expect_error 2 "--concurrency: expected an integer" -- run --concurrency -3
expect_error 2 "--concurrency: expected an integer" -- run --concurrency lots
expect_error 2 "--arrival cannot be combined with --concurrency" -- run --concurrency 4 --arrival poisson:rate=3 $gen
expect_error 2 "--arrival cannot be combined with --concurrency" -- plan --concurrency 4 --arrival poisson:rate=3 $gen
expect_error 2 "--rate-scale cannot be combined with --concurrency" -- run --concurrency 4 --rate-scale 2
expect_error 2 "--concurrency with --lengths needs --num-requests" -- run --concurrency 4 --lengths fixed:prompt=1,output=1
expect_error 2 "--think-time needs --concurrency" -- run --think-time constant:ms=5
expect_error 2 "--ramp-up needs --concurrency" -- plan --ramp-up 2
expect_error 2 "--ramp-up: expected seconds" -- run --concurrency 2 --ramp-up -1
expect_error 2 "--think-time constant: expected ms >= 0" -- run --concurrency 2 --think-time constant:ms=-1
expect_error 2 "--think-time: unknown distribution 'normal'" -- live --concurrency 2 --think-time normal:mean_ms=3
expect_error 2 "--think-time gamma: missing 'cv'" -- plan --concurrency 2 --think-time gamma:mean_ms=3

finish
