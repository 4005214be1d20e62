# Intervals on predicted latency figures (docs/metrics.md "Intervals"):
# summary.json carries *_lo <= p <= *_hi beside every statistic of TTFT,
# TPOT, ITL and E2E and the text shows them; a user's profile takes the
# prior, --engine none the "none" entry, the roofline at least the prior's
# width; a run priced more outside the measured grid gets a wider relative
# interval; a bad --interval-catalog is one line and exit 1; plan
# --conservative turns a verdict that passes nominally into a miss on a
# crafted case and marks the row.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

# $1: output directory; the rest: run's options
run() {
	d=$1
	shift
	"$BIN" run --quiet --seed 3 --out "$d" "$@" >"$d.out" 2>"$d.err" ||
		fail "servesim run $*: $(cat "$d.err")"
}

# the interval entry and the ordered bounds of every catalogued latency
check() {
	"$PY" - "$1/summary.json" "$2" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["interval"]["entry"] == sys.argv[2], j["interval"]
for dist in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
    d = j[dist]
    for stat in ("mean", "p50", "p90", "p95", "p99", "max"):
        lo, p, hi = d[stat + "_lo"], d[stat], d[stat + "_hi"]
        assert lo <= p <= hi and lo < hi, (dist, stat, lo, p, hi)
assert "p50_lo" not in j["queue_ms"]
EOF
}

run "$T/vllm" --num-requests 100
if check "$T/vllm" vllm; then
	pass "summary.json: lo <= p <= hi beside every TTFT, TPOT, ITL and E2E statistic (engine vllm)"
else
	fail "summary.json: bounds missing or out of order"
fi
grep -q "^    lo " "$T/vllm/summary.txt" && grep -q "^    hi " "$T/vllm/summary.txt" &&
	grep -q "^interval: lo and hi from engine vllm" "$T/vllm/summary.txt" &&
	pass "summary.txt shows the lo and hi rows and what they are" ||
	fail "summary.txt: no interval rows: $(sed -n 12,20p "$T/vllm/summary.txt")"
grep -q "<tr><th>lo</th><td class=\"n\">" "$T/vllm/report.html" &&
	grep -q "<tr><th>hi</th><td class=\"n\">" "$T/vllm/report.html" && pass "report.html shows the interval rows" ||
	fail "report.html: no interval rows"

cat >"$T/mine.json" <<'EOF'
{"engines": [{"name": "mine", "versions": "test", "source": "cli-intervals"}]}
EOF
run "$T/mine" --num-requests 100 --engine mine --engine-catalog "$T/mine.json"
check "$T/mine" prior && pass "a profile without an entry takes the prior" ||
	fail "user profile: not the prior"
cat >"$T/vllm-user.json" <<'EOF'
{"engines": [{"name": "vllm", "versions": "test", "source": "cli-intervals"}]}
EOF
run "$T/vllm-user" --num-requests 100 --engine-catalog "$T/vllm-user.json"
check "$T/vllm-user" prior && pass "a user's profile named like a shipped one takes the prior" ||
	fail "user vllm: not the prior"
run "$T/none" --num-requests 100 --engine none
check "$T/none" none && pass "--engine none takes the none entry" || fail "--engine none: not none"
run "$T/roof" --num-requests 100 --cost-model roofline
"$PY" - "$T/roof/summary.json" "$(dirname "$0")/../data/intervals.json" <<'EOF' && pass "the roofline's bounds are at least the prior's" || fail "roofline: narrower than the prior"
import json, sys
j = json.load(open(sys.argv[1]))["interval"]
assert j["spec_priced"] is True, j
prior = {e["name"]: e for e in json.load(open(sys.argv[2]))["intervals"]}["prior"]
for m in ("ttft", "tpot", "e2e"):
    assert j[m]["lo"] <= prior[m + "_lo"] + 1e-12 and j[m]["hi"] >= prior[m + "_hi"] - 1e-12, (m, j[m])
EOF

# wider outside the measured grid: llama-3.1-8b on one H100 prices more of
# its busy time outside the table's grid than llama-3.1-70b on two
run "$T/in" --num-requests 100 --model llama-3.1-70b --tp 2
"$PY" - "$T/in/summary.json" "$T/vllm/summary.json" <<'EOF' && pass "a larger share outside the grid gives a wider relative interval" || fail "outside the grid: not wider"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["out_of_grid"]["share_of_time"] > a["out_of_grid"]["share_of_time"], (a["out_of_grid"], b["out_of_grid"])
for dist in ("ttft_ms", "tpot_ms", "e2e_ms"):
    wa = a[dist]["p50_hi"] / a[dist]["p50_lo"]
    wb = b[dist]["p50_hi"] / b[dist]["p50_lo"]
    assert wb > wa, (dist, wa, wb)
EOF

printf '{"intervals": [{"name": "vllm", "ttft_lo": 1.1, "ttft_hi": 1.3}]}\n' >"$T/bad.json"
expect_error 1 "^servesim: .*bad.json: intervals\[0\] \"vllm\": ttft_lo 1.1, ttft_hi 1.3, expected 0 < ttft_lo <= 1 <= ttft_hi$" \
	-- run --num-requests 10 --interval-catalog "$T/bad.json"
printf '{"intervals": [{"name": "vllm", "tpot_lo": 0.9}]}\n' >"$T/bad2.json"
expect_error 1 "^servesim: .*bad2.json: intervals\[0\] \"vllm\": tpot_lo without tpot_hi" \
	-- plan --num-requests 10 --interval-catalog "$T/bad2.json"

# plan --conservative: at 150 ms the workload's TTFT meets the 90% target
# as predicted (97% of requests) but not with the SLO divided by vLLM's hi
# bound (about 1.27: 87%)
CRAFT="plan --num-requests 100 --max-gpus 1 --tp 1 --policies vllm --modes colocated --slo ttft_ms=150,tpot_ms=100"
# shellcheck disable=SC2086  # CRAFT is a list of options
if "$BIN" $CRAFT --out "$T/nominal" >"$T/nominal.out" 2>"$T/err" &&
	"$BIN" $CRAFT --conservative --out "$T/cons" >"$T/cons.out" 2>"$T/err"; then
	"$PY" - "$T/nominal/plan.json" "$T/cons/plan.json" "$T/cons/plan.csv" "$T/nominal/plan.csv" <<'EOF' && pass "--conservative: the nominal pass is a miss on the hi bound, flagged in plan.json and plan.csv" || fail "--conservative: verdicts not as crafted"
import csv, json, sys
n, c = (json.load(open(p))["configurations"][0] for p in sys.argv[1:3])
assert n["at_scale_1"]["meets_target"] is True, n["at_scale_1"]
a = c["at_scale_1"]
assert a["meets_target"] is False and a["meets_target_nominal"] is True and a["verdict_changed"] is True, a
assert a["attainment"] < a["attainment_nominal"] == n["at_scale_1"]["attainment"], a
row = next(csv.DictReader(open(sys.argv[3])))
assert row["verdict_changed"] == "1" and row["meets_target_nominal_at_1"] == "1" and row["meets_target_at_1"] == "0", row
# the nominal plan's figures carry their interval
row = next(csv.DictReader(open(sys.argv[4])))
assert float(row["ttft_p99_ms_lo"]) < float(row["ttft_p99_ms"]) < float(row["ttft_p99_ms_hi"]), row
t = n["ttft_ms"]
assert t["p99_lo"] < t["p99"] < t["p99_hi"] and t["p50_lo"] < t["p50"] < t["p50_hi"], t
EOF
	grep -q "^  ~     0  coloc " "$T/cons.out" && grep -q "^  ~ 1 configuration meets the 90% target" "$T/cons.out" &&
		pass "--conservative: the row is marked ~ with its legend line" ||
		fail "--conservative: no marked row: $(tail -8 "$T/cons.out")"
	grep -q "^conservative" "$T/nominal.out" && fail "a plan without --conservative printed its section" ||
		pass "a plan without --conservative has no conservative section"
else
	fail "plan: $(cat "$T/err")"
fi
finish
