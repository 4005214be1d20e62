# servesim plan's pricing across GPUs (docs/plan.md "Like for like"): a
# plan whose GPUs are priced differently says so in one line (text and
# plan.json's pricing_note); --like-for-like prices every GPU the same
# way -- by the roofline where some GPU's family has no measured tables
# (the H100, which has tables, then moves off them), else from each
# family's measured tables (the H200 scaled from the H100, the default
# already) -- and says whether the winner changes against the default
# pricing, whose winner is the plain plan's; bad combinations exit 2.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

W="--arrival poisson:rate=4 --lengths fixed:prompt=512,output=128 --num-requests 100 --modes colocated --max-gpus 4"
# H100 (tables) and L40S (none in its family, sm89): at 20 req/s one H100
# priced from its tables (19.5 req/s) falls short and two win; priced by
# the roofline one (21.2 req/s) wins
P="plan $W --gpus h100-sxm,l40s --rate 20"
"$BIN" $P --out "$T/plain" >"$T/plain.txt" 2>"$T/err" || fail "plain plan: $(cat "$T/err")"
"$BIN" $P --like-for-like --out "$T/lfl" >"$T/lfl.txt" 2>"$T/err" || fail "like-for-like plan: $(cat "$T/err")"
grep -q "^pricing: h100-sxm from its measured tables; l40s by the roofline (no measured GPU of its family sm89); .*--like-for-like prices every GPU by the roofline$" \
	"$T/plain.txt" && pass "the plain plan says in one line that its GPUs are priced differently" ||
	fail "no pricing line: $(head -6 "$T/plain.txt")"
grep -q "^like for like: every GPU priced by the roofline; the winner changes: #1 .*h100-sxm, tp 1, 2 instances under the default pricing, #0 .*h100-sxm, tp 1, 1 instance like for like$" \
	"$T/lfl.txt" && pass "--like-for-like: the winner changes, in one line" ||
	fail "no like-for-like line: $(head -7 "$T/lfl.txt")"
"$PY" - "$T/plain/plan.json" "$T/lfl/plan.json" <<'EOF' && pass "plan.json: pricing_note, like_for_like; the H100 moved off its tables; the default winner is the plain plan's" || fail "plan.json wrong"
import json, sys
plain, lfl = (json.load(open(p)) for p in sys.argv[1:3])
assert "like_for_like" not in plain and "l40s by the roofline" in plain["pricing_note"]
assert {c["gpu"]: c["priced_by"] for c in plain["configurations"]} == {"h100-sxm": "table", "l40s": "roofline"}
assert all(c["priced_by"] == "roofline" for c in lfl["configurations"])
l = lfl["like_for_like"]
assert l["pricing"] == "roofline" and l["default_pricing_differs"] and l["winner_changes"], l
assert l["winner"] == lfl["rate"]["configurations"][0] == 0, l
assert l["default_winner"] == plain["rate"]["configurations"][0] == 1, (l, plain["rate"])
assert lfl["fingerprint"] != plain["fingerprint"]
EOF

# H100 and H200: the H200 is priced from the H100's tables already, so
# like for like changes nothing
"$BIN" plan $W --gpus h100-sxm,h200-sxm --rate 20 --like-for-like --json >"$T/h200.json" 2>"$T/err" ||
	fail "h100,h200: $(cat "$T/err")"
"$PY" - "$T/h200.json" <<'EOF' && pass "h100+h200: priced from the H100's tables both ways, the winner the same" || fail "h100+h200 wrong"
import json, sys
d = json.load(open(sys.argv[1]))
l = d["like_for_like"]
assert l["pricing"] == "tables" and not l["default_pricing_differs"] and not l["winner_changes"], l
assert "h200-sxm from h100-sxm's tables x the roofline" in d["pricing_note"], d["pricing_note"]
assert {c["gpu"]: c["priced_by"] for c in d["configurations"]} == {"h100-sxm": "table", "h200-sxm": "scaled"}
EOF

# one GPU type: nothing to say
"$BIN" plan $W --gpus h100-sxm --json >"$T/one.json" 2>"$T/err" || fail "one GPU: $(cat "$T/err")"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "pricing_note" not in d and "like_for_like" not in d' \
	"$T/one.json" && pass "one GPU type: no pricing line" || fail "one GPU type has a pricing note"

expect_error 2 "^servesim: --like-for-like: chooses each GPU's pricing itself; expected --cost-model auto \(the default\), got 'roofline'$" -- \
	plan $W --gpus h100-sxm,l40s --like-for-like --cost-model roofline
expect_error 2 "like-for-like" -- run --num-requests 10 --like-for-like
finish
