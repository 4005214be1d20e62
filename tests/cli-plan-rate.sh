# servesim plan --rate R and --objective (docs/plan.md, "The target
# rate"): only deployments sustaining R are listed, with headroom = max
# rate / R and cost per million output tokens computed from the catalog
# price by hand; a configuration that cannot reach R stops its search
# early and otherwise finds what the plain plan finds; bisection on the
# instance count finds the smallest count the exhaustive enumeration finds;
# a rate above every configuration's lists nothing, says why and exits 0;
# rows priced by the roofline carry the warning in the table, plan.json,
# plan.csv and plan.db; bad --rate / --objective exit 2.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

# Every request has 128 output tokens, so a deployment's cost per million
# output tokens at R is USD/h / (R x 128 x 3600) x 1e6.  h100-sxm has
# measured tables in the shipped store (priced by "table"); h200-sxm has
# none, but its family's H100 has (priced by "scaled"); mi300x's family has
# none (priced by the roofline).
W="--arrival poisson:rate=4 --lengths fixed:prompt=512,output=128 --num-requests 100"
P="plan $W --modes colocated --max-gpus 4 --gpus h100-sxm,h200-sxm,mi300x"

"$BIN" $P --out "$T/plain" --quiet 2>"$T/err" || fail "plain plan failed: $(cat "$T/err")"
if "$BIN" $P --rate 22 --out "$T/rate" >"$T/out" 2>"$T/err"; then
	grep -q "deployments sustaining 22 req/s" "$T/out" && pass "the --rate table is printed" ||
		fail "no --rate table: $(head -8 "$T/out")"
	grep -q '! .* rows\? priced by the roofline' "$T/out" && grep -q '^ .*mi300x .* ! roofline' "$T/out" &&
		pass "roofline rows carry '!' and the table a footer" || fail "no roofline marker: $(cat "$T/out")"
	grep -q '^ .*h100-sxm .*   table ' "$T/out" && pass "measured rows say table" ||
		fail "h100 rows do not say table: $(cat "$T/out")"
	if "$PY" - "$T/plain" "$T/rate" <<'EOF'
import csv, json, sqlite3, sys
plain = {c["config"]: c for c in json.load(open(sys.argv[1] + "/plan.json"))["configurations"]}
doc = json.load(open(sys.argv[2] + "/plan.json"))
cfgs = doc["configurations"]
R = 22.0
rate = doc["rate"]
assert rate["target_rps"] == R and rate["objective"] == "cost" and rate["objective_used"] == "cost"
assert abs(rate["scale"] - R / doc["workload"]["rate_rps"]) < 1e-9 * rate["scale"]
listed = rate["configurations"]
assert listed, "nothing sustains 22 req/s"
price = {"h100-sxm": 3.78, "h200-sxm": 4.00, "mi300x": 1.85}   # data/gpus.json cost_per_hour
for c in cfgs:
    a = c["at_rate"]
    if c["index"] in listed:
        assert a["sustains"] and c["max_rate_rps"] >= R
        assert abs(a["headroom"] - c["max_rate_rps"] / R) <= 1e-9 * a["headroom"], a
        want = price[c["gpu"]] * c["gpus"] / (R * 128 * 3600) * 1e6
        assert abs(a["usd_per_million_output_tokens"] - want) <= 1e-9 * want, (a, want)
        assert a["j_per_output_token"] > 0 and a["energy_from"]
    else:
        assert not a["sustains"] and c["status"] in ("below_rate", "skipped", "ok", "none"), c
    # a configuration that sustains R is searched as without --rate; one
    # stopped early would not have reached R either
    p = plain[c["config"]]
    if c["status"] in ("ok", "capped"):
        assert c["max_rate_rps"] == p["max_rate_rps"] and c["probes"] == p["probes"], c["config"]
    if c["status"] == "below_rate":
        assert (p["max_rate_rps"] or 0) < R and len(c["probes"]) <= len(p["probes"]), c["config"]
below = [c for c in cfgs if c["status"] == "below_rate"]
assert below and any(len(c["probes"]) < len(plain[c["config"]]["probes"]) for c in below), \
    "no configuration stopped its search early"
# best first by cost: USD/h ascending
cost = [cfgs[i]["usd_per_hour"] for i in listed]
assert cost == sorted(cost), cost
# provenance
for c in cfgs:
    if c["gpu"] == "mi300x":
        assert c["priced_by"] == "roofline" and "roofline" in c["warning"], c
    elif c["gpu"] == "h200-sxm":
        assert c["priced_by"] == "scaled" and "warning" not in c, c
    else:
        assert c["priced_by"] == "table" and "warning" not in c, c
    assert c["outside_grid"] is None or 0 <= c["outside_grid"] <= 1
rows = list(csv.DictReader(open(sys.argv[2] + "/plan.csv")))
for c, r in zip(cfgs, rows):
    assert r["priced_by"] == c["priced_by"] and r["roofline"] == ("1" if "warning" in c else "0")
    if c["index"] in listed:
        assert abs(float(r["headroom"]) - c["at_rate"]["headroom"]) <= 1e-8 * float(r["headroom"])
db = sqlite3.connect(sys.argv[2] + "/plan.db")
got = dict(db.execute("select config, priced_by from plan"))
assert got and all(got[k] == ("roofline" if "mi300x" in k else "scaled" if "h200" in k else "table")
                   for k in got), got
EOF
	then pass "headroom, cost per million tokens by hand, order, provenance in json/csv/db"
	else fail "--rate outputs wrong"; fi
else
	fail "plan --rate failed: $(cat "$T/err")"
fi

# Bisection on the instance count (the default counts 1..8) against every
# count (--instances 1,...,8, evaluated exhaustively): the same smallest
# count per GPU type sustains R, with the same maximum rate.
B="plan $W --modes colocated --max-gpus 8 --gpus h100-sxm,h200-sxm --rate 30 --json"
if "$BIN" $B >"$T/bis.json" 2>"$T/err" &&
	"$BIN" $B --instances 1,2,3,4,5,6,7,8 >"$T/all.json" 2>>"$T/err"; then
	if "$PY" - "$T/bis.json" "$T/all.json" <<'EOF'
import json, sys
def smallest(path):
    d = json.load(open(path))
    out = {}
    for i in d["rate"]["configurations"]:
        c = d["configurations"][i]
        if c["gpu"] not in out or c["instances"] < out[c["gpu"]][0]:
            out[c["gpu"]] = (c["instances"], c["max_rate_rps"])
    return d, out
b, sb = smallest(sys.argv[1])
a, sa = smallest(sys.argv[2])
assert sb == sa and sb, (sb, sa)
assert b["rate"]["instances_bisected"] and not a["rate"]["instances_bisected"]
skipped = sum(c["status"] == "skipped" for c in b["configurations"])
assert skipped > 0 and b["rate"]["skipped"] == skipped, skipped
assert not any(c["status"] == "skipped" for c in a["configurations"])
print("smallest counts", sb, "skipped", skipped)
EOF
	then pass "bisection finds the exhaustive enumeration's smallest instance counts"
	else fail "bisection and enumeration disagree"; fi
else
	fail "bisection plans failed: $(cat "$T/err")"
fi

# The bisection's rounds under -j 2 give the same plan as in one process
if "$BIN" $B --out "$T/j1" >/dev/null 2>"$T/err" && "$BIN" $B --out "$T/j2" -j 2 >/dev/null 2>>"$T/err"; then
	cmp -s "$T/j1/plan.csv" "$T/j2/plan.csv" && pass "--rate with -j 2 gives the same plan.csv" ||
		fail "-j 2 differs: $(diff "$T/j1/plan.csv" "$T/j2/plan.csv" | head -3)"
else
	fail "-j plans failed: $(cat "$T/err")"
fi

# A rate no configuration reaches: nothing listed, the reason, exit 0.
if "$BIN" $P --rate 3000 >"$T/out" 2>"$T/err"; then
	grep -q "(none: no configuration sustains 3000 req/s" "$T/out" &&
		grep -q "0 configurations sustain 3000 req/s" "$T/out" &&
		pass "--rate above every capacity lists nothing, says why, exit 0" ||
		fail "no 'none' line: $(cat "$T/out")"
else
	fail "--rate 3000 exited $?: $(cat "$T/err")"
fi

# --objective energy: J per output token ascending
if "$BIN" $P --rate 10 --objective energy --json >"$T/e.json" 2>"$T/err"; then
	"$PY" - "$T/e.json" <<'EOF' && pass "--objective energy orders by J per output token" || fail "--objective energy order"
import json, sys
d = json.load(open(sys.argv[1]))
j = [d["configurations"][i]["at_rate"]["j_per_output_token"] for i in d["rate"]["configurations"]]
assert len(j) > 1 and j == sorted(j), j
EOF
else
	fail "--objective energy failed: $(cat "$T/err")"
fi

# --objective gpus and the fallback of cost with an unpriced GPU (rtx-4090
# has no price in the catalog)
if "$BIN" $P --rate 10 --objective gpus --json >"$T/g.json" 2>"$T/err" &&
	"$BIN" plan $W --modes colocated --max-gpus 2 --gpus h100-sxm,rtx-4090 --rate 5 >"$T/fb" 2>>"$T/err"; then
	"$PY" - "$T/g.json" <<'EOF' && pass "--objective gpus orders by GPUs, ties by cost" || fail "--objective gpus order"
import json, sys
d = json.load(open(sys.argv[1]))
l = [d["configurations"][i] for i in d["rate"]["configurations"]]
keys = [(c["gpus"], c["usd_per_hour"], c["index"]) for c in l]
assert l and keys == sorted(keys), keys
EOF
	grep -q "by gpus (cost asked for: a GPU has no price in the catalog)" "$T/fb" &&
		pass "cost falls back to GPUs with an unpriced GPU, and says so" || fail "no fallback line: $(cat "$T/fb")"
else
	fail "objective plans failed: $(cat "$T/err")"
fi

# --verify with --rate: the --rate table's first rows, each re-run at R
# itself (docs/plan.md, "Verifying on the whole workload")
if "$BIN" $P --rate 10 --verify 2 --json >"$T/vr.json" 2>"$T/err"; then
	"$PY" - "$T/vr.json" <<'EOF' && pass "--rate --verify re-runs the --rate table's best at R" ||
import json, sys
d = json.load(open(sys.argv[1]))
v = d["verified"]["configurations"]
assert [c["index"] for c in v] == d["rate"]["configurations"][:2], (v, d["rate"]["configurations"])
for c in v:
    assert abs(c["rate_rps"] - 10.0) < 1e-6, c
EOF
		fail "--rate --verify: $(head -c 600 "$T/vr.json")"
else
	fail "--rate --verify failed: $(cat "$T/err")"
fi

expect_error 2 "^servesim: --rate: expected a rate in req/s, > 0" -- $P --rate 0
expect_error 2 "^servesim: --rate: expected a rate in req/s, > 0" -- $P --rate -3
expect_error 2 "^servesim: --rate: expected a rate in req/s, > 0" -- $P --rate abc
expect_error 2 "^servesim: --rate: expected a rate in req/s, > 0" -- $P --rate nan
expect_error 2 "^servesim: --rate: expected a rate within .* x the workload's" -- $P --rate 100000
expect_error 2 "^servesim: --rate: expected an open-loop workload" -- plan --concurrency 4 --lengths fixed:prompt=64,output=8 --num-requests 20 --max-gpus 1 --rate 5
expect_error 2 "^servesim: --objective: expected cost, gpus, energy or ttft_p99" -- $P --rate 5 --objective cheap

finish
