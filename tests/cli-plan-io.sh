# What run and plan load and what the plan checks (docs/plan.md,
# docs/workloads.md, docs/catalogs.md): the warning when --num-requests or
# --duration keeps a slice of a trace unlike the whole, plan --verify on the
# whole workload, --price and partial --gpu-catalog entries, with their
# errors.  Every figure below is worked out by hand from the small traces
# this test writes.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

# ---- the slice warning -----------------------------------------------------

# 10 requests: 5 at 0, 1, 2, 3, 4 s with 100-token prompts, then 5 every
# 0.5 s (4.5 .. 6.5 s) with 1000-token prompts; outputs all 20.
#   slice of 5: rate (5 - 1) / 4 s = 1 req/s; prompts all 100.
#   whole: rate 9 / 6.5 s = 1.3846 req/s (-28%); prompts five 100s and five
#   1000s: p50 between ranks 4 and 5 (numpy's linear rule, position 4.5) =
#   550, p90 (position 8.1) = 1000, p99 = 1000; outputs equal throughout.
{
	echo "arrival_ms,prompt_tokens,output_tokens"
	for t in 0 1000 2000 3000 4000; do echo "$t,100,20"; done
	for t in 4500 5000 5500 6000 6500; do echo "$t,1000,20"; done
} >"$T/ten.csv"
WANT="rate 1 vs 1.385 req/s (-28%); prompt p50 100 vs 550 tokens (-82%); prompt p90 100 vs 1000 tokens (-90%); prompt p99 100 vs 1000 tokens (-90%)"
if "$BIN" run --trace "$T/ten.csv" --num-requests 5 --cost-model roofline >"$T/out" 2>"$T/err"; then
	[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q -F "warning: --num-requests keeps 5 of the 10 requests" "$T/err" &&
		grep -q -F "$WANT" "$T/err" && pass "run --num-requests 5: one warning line with the figures" ||
		fail "run slice warning: $(cat "$T/err")"
else
	fail "run on a slice failed: $(cat "$T/err")"
fi
# --duration 2.5 keeps the arrivals before 2.5 s: 3 requests, rate 2 / 2 s = 1
"$BIN" run --trace "$T/ten.csv" --duration 2.5 --cost-model roofline >"$T/out" 2>"$T/err"
grep -q -F "warning: --duration keeps 3 of the 10 requests" "$T/err" && grep -q -F "$WANT" "$T/err" &&
	pass "run --duration: the same warning" || fail "run --duration warning: $(cat "$T/err")"
"$BIN" run --trace "$T/ten.csv" --num-requests 5 --cost-model roofline --quiet >"$T/out" 2>"$T/err"
[ ! -s "$T/err" ] && pass "--quiet: no warning" || fail "--quiet printed: $(cat "$T/err")"
# the whole trace, and a slice like its whole (evenly spaced, equal
# lengths: every figure equal), warn about nothing
"$BIN" run --trace "$T/ten.csv" --cost-model roofline >"$T/out" 2>"$T/err"
[ ! -s "$T/err" ] && pass "no cut: no warning" || fail "no cut: $(cat "$T/err")"
{
	echo "arrival_ms,prompt_tokens,output_tokens"
	for i in 0 1 2 3 4 5 6 7 8 9; do echo "$((i * 500)),300,30"; done
} >"$T/even.csv"
"$BIN" run --trace "$T/even.csv" --num-requests 4 --cost-model roofline >"$T/out" 2>"$T/err"
[ ! -s "$T/err" ] && pass "a slice like the whole: no warning" || fail "even slice: $(cat "$T/err")"

# plan.json records the comparison
if "$BIN" plan --trace "$T/ten.csv" --num-requests 5 --max-gpus 1 --modes colocated --min-span 0 \
	--cost-model roofline --out "$T/p" >"$T/out" 2>"$T/err"; then
	grep -q -F "$WANT" "$T/err" && pass "plan warns as run does" || fail "plan warning: $(cat "$T/err")"
	if "$PY" - "$T/p/plan.json" "$WANT" <<'EOF'
import json, sys
w = json.load(open(sys.argv[1]))["workload"]
s = w["slice"]
assert w["warning"] == sys.argv[2], w["warning"]
assert s["slice"]["requests"] == 5 and s["whole"]["requests"] == 10
assert abs(s["slice"]["rate_rps"] - 1) < 1e-9 and abs(s["whole"]["rate_rps"] - 9 / 6.5) < 1e-9
assert s["whole"]["prompt_tokens"] == {"p50": 550, "p90": 1000, "p99": 1000}, s["whole"]
assert s["slice"]["output_tokens"] == s["whole"]["output_tokens"]
assert s["differs"] == ["rate", "prompt_p50", "prompt_p90", "prompt_p99"], s["differs"]
assert s["tolerance"] == {"rate": 0.1, "length_percentile": 0.15}
EOF
	then pass "plan.json: workload.slice and workload.warning"
	else fail "plan.json workload.slice"; fi
else
	fail "plan on a slice failed: $(cat "$T/err")"
fi
"$BIN" plan --trace "$T/even.csv" --num-requests 4 --max-gpus 1 --modes colocated --min-span 0 \
	--cost-model roofline --json >"$T/even.json" 2>"$T/err"
"$PY" -c 'import json, sys; w = json.load(open(sys.argv[1]))["workload"]; assert w["warning"] is None and w["slice"]["differs"] == []' \
	"$T/even.json" && pass "plan.json: a like slice has warning null" || fail "even plan.json: $(cat "$T/err")"

# ---- --verify -----------------------------------------------------------------

# 200 requests every 0.1 s, outputs of 20 tokens; the first 100 prompts of
# 100 tokens, the last 100 of 8,000.  The plan runs on the first 100; on the
# whole trace each 8,000-token prompt needs 2 x 8e9 x 8000 = 1.28e14 FLOP
# of Llama-3.1-8B, 0.13 s on an H100 at its 989 TFLOP/s peak: more than the
# 100 ms TTFT SLO, so at least those 100 miss and the whole trace's
# attainment is at most 0.5, whatever the rate.
"$PY" -c '
import sys
f = open(sys.argv[1], "w")
f.write("arrival_ms,prompt_tokens,output_tokens\n")
for i in range(200):
    f.write("%d,%d,20\n" % (i * 100, 100 if i < 100 else 8000))
' "$T/two.csv"
VPLAN="plan --trace $T/two.csv --max-gpus 2 --modes colocated --min-span 0 --cost-model roofline --slo ttft_ms=100,tpot_ms=100"
if "$BIN" $VPLAN --num-requests 100 --verify 3 --out "$T/v" >"$T/out" 2>"$T/err"; then
	grep -q "verified on the whole workload (200 requests at 10.000 req/s)" "$T/out" &&
		grep -q "MISSES the target" "$T/out" && pass "--verify: the section, and the misses flagged" ||
		fail "--verify table: $(cat "$T/out")"
	if "$PY" - "$T/v" <<'EOF'
import csv, json, sys
d = sys.argv[1]
p = json.load(open(d + "/plan.json"))
v = p["verified"]
assert v["requests"] == 200 and abs(v["rate_rps"] - 10) < 1e-9, v
cfgs = p["configurations"]
assert len(v["configurations"]) == 2, v   # 1 and 2 instances: both have a maximum rate
rows = {int(r["index"]): r for r in csv.DictReader(open(d + "/plan.csv"))}
for x in v["configurations"]:
    c = cfgs[x["index"]]
    # at the rate the plan found (req/s), which is scale x 10 req/s on the whole
    assert abs(x["rate_rps"] - c["max_rate_rps"]) <= 1e-9 * c["max_rate_rps"], (x, c["max_rate_rps"])
    assert abs(x["scale"] * 10 - x["rate_rps"]) <= 1e-9 * x["rate_rps"]
    assert x["predicted_attainment"] == c["attainment"] >= 0.9
    assert x["attainment"] <= 0.5 and x["meets_target"] is False, x
    r = rows[x["index"]]
    assert r["verified_meets_target"] == "0" and abs(float(r["verified_attainment"]) - x["attainment"]) < 1e-9
# the table's order: the best by goodput per GPU first
top = p["top_goodput_per_gpu"]
assert [x["index"] for x in v["configurations"]] == top[:2], (top, v)
EOF
	then pass "--verify: plan.json and plan.csv, at the rate found, attainment <= 0.5 on the whole"
	else fail "--verify outputs"; fi
else
	fail "plan --verify failed: $(cat "$T/err")"
fi
# without a cut the whole workload is the plan's: each re-run is the
# search's best probe again, the same simulation, so the same attainment
if "$BIN" plan --trace "$T/even.csv" --max-gpus 1 --modes colocated --min-span 0 --cost-model roofline \
	--verify 1 --json >"$T/v1.json" 2>"$T/err" && "$PY" - "$T/v1.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
x = p["verified"]["configurations"][0]
c = p["configurations"][x["index"]]
assert p["verified"]["requests"] == 10 and "slice" not in p["workload"]
assert abs(x["scale"] - c["max_rate_scale"]) <= 1e-12 * c["max_rate_scale"], (x, c)
assert x["attainment"] == c["attainment"] and x["meets_target"] is True, (x, c["attainment"])
assert x["ttft_p99_ms"] == c["ttft_ms"]["p99"]
EOF
then pass "--verify without a cut repeats the best probe exactly"
else fail "--verify without a cut: $(cat "$T/err")"; fi
# the whole trace misses the target at every rate: nothing to verify, said so
"$BIN" $VPLAN --verify 2 --out "$T/v0" >"$T/out" 2>"$T/err" &&
	grep -q "(no configuration has a maximum rate to verify)" "$T/out" &&
	"$PY" -c 'import json, sys; assert json.load(open(sys.argv[1]))["verified"]["configurations"] == []' "$T/v0/plan.json" &&
	pass "--verify with nothing to verify: an empty section" || fail "--verify, none: $(cat "$T/out" "$T/err")"
# the CSV of a plan without --verify keeps its columns
head -1 "$T/p/plan.csv" | grep -q "verified" && fail "plan.csv without --verify has verified columns" ||
	pass "plan.csv without --verify: no verified columns"
expect_error 2 "^servesim: --verify: expected an integer in 0..100, got 'x'" -- plan --num-requests 50 --verify x
expect_error 2 "^servesim: .*--verify" -- run --num-requests 50 --verify 3

# ---- plots ------------------------------------------------------------------------

# two GPU types, two instance counts, two policies: the attainment plot draws
# one curve per GPU type (its best by goodput per GPU), zoomed on [0.8, 1]
# for the target 0.9; the Pareto labels name deployments; both titles the
# scenario
if "$BIN" plan --trace "$T/even.csv" --gpus h100-sxm,a100-80gb-sxm --max-gpus 2 --modes colocated \
	--policies vllm,sarathi --min-span 0 --cost-model roofline --out "$T/pl" >"$T/out" 2>"$T/err"; then
	[ "$(grep -c '^# #' "$T/pl/attainment.dat")" -eq 2 ] &&
		grep -q '^# #[0-9]* colocated h100-sxm' "$T/pl/attainment.dat" &&
		grep -q '^# #[0-9]* colocated a100-80gb-sxm' "$T/pl/attainment.dat" &&
		pass "attainment: one curve per GPU type" || fail "attainment curves: $(grep '^# #' "$T/pl/attainment.dat")"
	grep -q -F 'set yrange [0.8:1.01]' "$T/pl/attainment.gp" && grep -q -F 'title "target 90%"' "$T/pl/attainment.gp" &&
		pass "attainment: zoomed on the target, drawn" || fail "attainment zoom: $(grep yrange "$T/pl/attainment.gp")"
	for f in attainment pareto; do
		grep -q -F 'llama-3.1-8b, even.csv: 10 requests at 2 req/s; TTFT <= 2000 ms, TPOT <= 100 ms, target 90%' "$T/pl/$f.gp" &&
			pass "$f: the scenario in the title" || fail "$f title: $(grep title "$T/pl/$f.gp")"
	done
	grep -q -E '^[0-9.e+]+ [0-9.e+]+ [0-9]+ "[0-9]+x (h100-sxm|a100-80gb-sxm) tp1 (vllm|sarathi)"$' "$T/pl/pareto.dat" &&
		grep -q 'using 1:2:4 with labels' "$T/pl/pareto.gp" &&
		pass "pareto: frontier points labelled with their deployment" || fail "pareto labels: $(tail -3 "$T/pl/pareto.dat")"
else
	fail "plot plan failed: $(cat "$T/err")"
fi
# run: the SLOs on the CDFs, the share within each (hand count: even.csv's
# 10 requests all have TTFT above 1 us, so none is within ttft_ms=0.001)
if "$BIN" run --trace "$T/even.csv" --cost-model roofline --slo ttft_ms=0.001,tpot_ms=1000 --out "$T/r" \
	>"$T/out" 2>"$T/err"; then
	grep -q -F 'set arrow 1 from 0.001, graph 0 to 0.001, graph 1 nohead' "$T/r/ttft_cdf.gp" &&
		grep -q -F '"SLO 0.001 ms: 0.0% within"' "$T/r/ttft_cdf.gp" &&
		grep -q -F '"SLO 1000 ms: 100.0% within"' "$T/r/tpot_cdf.gp" &&
		grep -q -F 'llama-3.1-8b on 1x h100-sxm tp1, vllm, even.csv' "$T/r/ttft_cdf.gp" &&
		pass "run CDFs: the SLO lines and the scenario" || fail "run CDFs: $(grep -e label -e arrow "$T/r/ttft_cdf.gp")"
else
	fail "run --out failed: $(cat "$T/err")"
fi

# ---- --price and --gpu-catalog -------------------------------------------------

PP="plan --trace $T/ten.csv --max-gpus 2 --modes colocated --min-span 0 --cost-model roofline --gpus h100-sxm,a100-80gb-sxm --json"
# partial entry: only h100-sxm's price; a100's from data/gpus.json (2.4984)
echo '{"gpus": [{"name": "h100-sxm", "cost_per_hour": 2.5}]}' >"$T/price.json"
if "$BIN" $PP --gpu-catalog "$T/price.json" >"$T/g.json" 2>"$T/err" &&
	"$BIN" $PP --gpu-catalog "$T/price.json" --price a100-80gb-sxm=1.25 --price h100-sxm=3 \
		>"$T/gp.json" 2>>"$T/err" && "$PY" - "$T/g.json" "$T/gp.json" <<'EOF'
import json, sys
for path, h100, a100 in ((sys.argv[1], 2.5, 2.4984), (sys.argv[2], 3, 1.25)):
    for c in json.load(open(path))["configurations"]:
        per = h100 if c["gpu"] == "h100-sxm" else a100
        assert abs(c["usd_per_hour"] - c["gpus"] * per) < 1e-9, (path, c["config"], c["usd_per_hour"])
EOF
then pass "--gpu-catalog merges a partial entry; --price overrides it"
else fail "prices: $(cat "$T/err")"; fi
# the merged GPU keeps its other figures: the same simulation, only the price differs
"$PY" -c '
import json, sys
a, b = (json.load(open(p))["configurations"] for p in sys.argv[1:])
assert [c["max_rate_rps"] for c in a] == [c["max_rate_rps"] for c in b]
' "$T/g.json" "$T/gp.json" && pass "a price changes no simulated figure" || fail "prices changed the search"
if "$BIN" run --trace "$T/ten.csv" --cost-model roofline --price h100-sxm=4 --json 2>"$T/err" |
	"$PY" -c 'import json, sys; assert json.load(sys.stdin)["cost"]["usd_per_hour"] == 4'; then
	pass "run --price sets the run's price"
else fail "run --price: $(cat "$T/err")"; fi
expect_error 2 "^servesim: --price: unknown GPU 'h100' \(see" -- plan --num-requests 50 --price h100=2
# a GPU priced twice is refused, not the later one taken (issue 34 §5)
expect_error 2 "^servesim: --price: h100-sxm given twice \(9 and 3\); expected one price per GPU" -- \
	run --num-requests 50 --price h100-sxm=9,h100-sxm=3
expect_error 2 "^servesim: --price: h100-sxm given twice" -- plan --num-requests 50 --price h100-sxm=9 --price h100-sxm=3
expect_error 2 "^servesim: --price: unknown GPU 'nope'" -- run --num-requests 50 --price h100-sxm=2,nope=1
expect_error 2 "^servesim: --price: expected a price in USD per GPU-hour, 0 or 1e-6..1e6, for 'h100-sxm', got 'two'" -- \
	plan --num-requests 50 --price h100-sxm=two
expect_error 2 "^servesim: --price: expected a price .* got '-1'" -- run --num-requests 50 --price h100-sxm=-1
expect_error 2 "^servesim: --price: expected GPU=USD_PER_HOUR" -- run --num-requests 50 --price h100-sxm
expect_error 2 "^servesim: --price: expected GPU=USD_PER_HOUR" -- run --num-requests 50 --price =2
# a new GPU needs every field: the error names the file, the GPU and the key
echo '{"gpus": [{"name": "h100-new", "cost_per_hour": 2.5}]}' >"$T/new.json"
expect_error 1 "^servesim: $T/new.json: gpus\[0\] \"h100-new\": missing field \"bf16_flops\" \(a new entry needs every field" -- \
	plan --num-requests 50 --gpu-catalog "$T/new.json"
expect_error 1 "^servesim: $T/new.json: gpus\[0\] \"h100-new\": missing field \"bf16_flops\"" -- \
	run --num-requests 50 --gpu-catalog "$T/new.json"
# a merged entry is checked as a whole: idle power above h100-sxm's 700 W TDP
echo '{"gpus": [{"name": "h100-sxm", "idle_w": 800}]}' >"$T/idle.json"
expect_error 1 "^servesim: $T/idle.json: gpus\[0\] \"h100-sxm\": idle_w \(800\) is above tdp_w \(700\)" -- \
	run --num-requests 50 --gpu-catalog "$T/idle.json"
finish
