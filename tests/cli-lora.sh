#!/bin/sh
# Multi-LoRA serving on the command line (issue 33 §1; docs/lora.md): bad
# or unsupported --lora exits 2 with one line; a run without --lora has no
# adapter figures; with it, summary.json's lora object, the lora operator
# and requests.csv's adapter column; a trace's adapter column is used as
# given and a bad one is named by file and line (exit 1); one GPU slot
# for many adapters is slower than many slots; runs are deterministic.
# shellcheck source-path=SCRIPTDIR source=cli-lib.sh
. "$(dirname "$0")/cli-lib.sh"

BASE="--model llama-2-7b --gpu h100-sxm --lengths fixed:prompt=256,output=32 --seed 5"

for bad in "adapters=0" "rank=8,mix=8:1" "popularity=pareto" "max_loras=4,max_cpu_loras=2" \
	"bogus=1" "targets=mlp"; do
	# shellcheck disable=SC2086
	expect_error 2 "^servesim: --lora: " -- run $BASE --num-requests 5 --lora "$bad"
done
# shellcheck disable=SC2086
expect_error 2 "^servesim: --lora with --spec: not modelled yet" -- run $BASE --num-requests 5 \
	--lora adapters=4 --spec ngram:k=2,alpha=0.5
expect_error 2 "^servesim: --lora: .*latent attention" -- run --model deepseek-v3 --gpu h100-sxm \
	--tp 8 --num-requests 5 --lora adapters=4
# shellcheck disable=SC2086
expect_error 2 "^servesim: --lora: adapters=N is required" -- run $BASE --num-requests 5 \
	--arrival poisson:rate=1 --lora rank=8

# run NAME [options...]: 200 Poisson requests
run() {
	name=$1
	shift
	# shellcheck disable=SC2086
	"$BIN" run $BASE --arrival poisson:rate=20 --num-requests 200 --out "$T/$name" "$@" \
		>"$T/$name.txt" 2>"$T/$name.err" || fail "run $name: $(cat "$T/$name.err")"
}

run plain
run one --lora adapters=50,rank=16,popularity=zipf:1.1,max_loras=1
run four --lora adapters=50,rank=16,popularity=zipf:1.1,max_loras=4
run four2 --lora adapters=50,rank=16,popularity=zipf:1.1,max_loras=4

python3 - "$T" <<'PY' && pass "summaries: no lora figures without --lora; slots, hit rate and shares with it" || fail "summaries"
import csv, json, sys
t = sys.argv[1]
plain, one, four = (json.load(open(f"{t}/{n}/summary.json")) for n in ("plain", "one", "four"))
assert "lora" not in plain and "lora" not in plain["cost_model"]["op_share"], plain.keys()
assert "adapter" not in open(f"{t}/plain/requests.csv").readline()
for s, slots in ((one, 1), (four, 4)):
    l = s["lora"]
    assert l["max_loras"] == slots and l["adapters"] == 50, l
    assert l["peak_adapters_per_step"] <= slots, l
    assert 0 < l["hit_rate"] < 1 and l["loads"] > 0, l
    assert s["cost_model"]["op_share"]["lora"] > 0, s["cost_model"]["op_share"]
# one slot serves the adapters one at a time: longer waits
assert one["e2e_ms"]["mean"] > four["e2e_ms"]["mean"], (one["e2e_ms"], four["e2e_ms"])
# the adapter slots take KV blocks
assert four["kv_blocks_per_instance"] < plain["kv_blocks_per_instance"]
rows = list(csv.DictReader(open(f"{t}/four/requests.csv")))
ids = [int(r["adapter"]) for r in rows]
assert all(0 <= a < 50 for a in ids) and ids.count(0) > ids.count(10), ids[:20]
PY
grep -q "^lora: adapters=50" "$T/four.txt" && pass "text summary has the lora line" ||
	fail "text summary: no lora line: $(cat "$T/four.txt")"
cmp -s "$T/four/summary.json" "$T/four2/summary.json" &&
	cmp -s "$T/four/requests.csv" "$T/four2/requests.csv" &&
	pass "a --lora run is deterministic" || fail "two --lora runs differ"

# a native trace's adapter column: used as given (the count from it)
printf 'arrival_ms,prompt_tokens,output_tokens,adapter\n0,100,10,3\n5,100,10,\n10,100,10,0\n20,100,10,3\n' \
	>"$T/tr.csv"
"$BIN" run --model llama-2-7b --gpu h100-sxm --trace "$T/tr.csv" --lora rank=8,max_loras=2 \
	--out "$T/tr" >/dev/null 2>"$T/tr.err" || fail "trace run: $(cat "$T/tr.err")"
[ "$(cut -d, -f19 "$T/tr/requests.csv" | tr '\n' ' ')" = "adapter 3 -1 0 3 " ] &&
	pass "a trace's adapter column names each request's adapter" ||
	fail "adapters from the trace: $(cut -d, -f19 "$T/tr/requests.csv" | tr '\n' ' ')"
printf 'arrival_ms,prompt_tokens,output_tokens,adapter\n0,100,10,x\n' >"$T/bad.csv"
expect_error 1 "bad.csv:2: adapter: expected an adapter id" -- run --model llama-2-7b \
	--gpu h100-sxm --trace "$T/bad.csv" --lora rank=8
expect_error 2 "^servesim: --lora: the trace names adapter 3, expected ids below adapters=2" -- \
	run --model llama-2-7b --gpu h100-sxm --trace "$T/tr.csv" --lora adapters=2,rank=8
# The adapter-affinity router: over four instances, sending a request where
# its adapter is resident loads fewer adapters (and reads fewer from
# storage) than the least-outstanding-requests router on the same workload.
for r in lor lora; do
	"$BIN" run --instances 4 --router $r --num-requests 1500 \
		--lora adapters=200,rank=16,popularity=zipf:1.1,max_loras=4,max_cpu_loras=64 \
		--arrival poisson:rate=20 --lengths fixed:prompt=512,output=128 \
		--out "$T/route-$r" --quiet 2>"$T/err" || fail "--router $r: $(cat "$T/err")"
done
python3 - "$T/route-lor/summary.json" "$T/route-lora/summary.json" <<'PY' && pass "--router lora loads fewer adapters than lor" || fail "--router lora: $(grep -h '^lora' "$T"/route-*/summary.txt)"
import json, sys
a, b = (json.load(open(f))["lora"] for f in sys.argv[1:3])
assert b["loads"] < 0.9 * a["loads"], (a["loads"], b["loads"])
assert b["host_misses"] < a["host_misses"], (a["host_misses"], b["host_misses"])
PY
expect_error 2 "^servesim: --router lora: expected balance_abs >= 0" -- \
	run --instances 2 --router lora:balance_abs=-1 --lora adapters=4,rank=8

# An engine that prefetches adapters (lora_load_overlap) hides a load behind
# the step's kernels: the step waits only for what is left (here nothing: a
# rank-64 adapter of 8B crosses PCIe in under 2 ms, a step takes longer).
cat >"$T/eng-ov.json" <<'JSON'
{"engines": [
 {"name": "block", "versions": "test", "source": "test"},
 {"name": "prefetch", "versions": "test", "lora_load_overlap": true, "source": "test"}
]}
JSON
for e in block prefetch; do
	"$BIN" run --engine-catalog "$T/eng-ov.json" --engine $e --num-requests 300 \
		--lora adapters=300,rank=64,popularity=zipf:0.8,max_loras=4,max_cpu_loras=300 \
		--arrival poisson:rate=8 --lengths fixed:prompt=512,output=128 --out "$T/ov-$e" \
		--quiet 2>"$T/err" || fail "--engine $e: $(cat "$T/err")"
done
python3 - "$T/ov-block/summary.json" "$T/ov-prefetch/summary.json" <<'PY' && pass "lora_load_overlap: loads hidden behind the step's kernels" || fail "lora_load_overlap: $(grep -h '^lora' "$T"/ov-*/summary.txt)"
import json, sys
a, b = (json.load(open(f))["lora"] for f in sys.argv[1:3])
assert a["loads"] > 50 and abs(a["loads"] - b["loads"]) <= 0.05 * a["loads"], (a["loads"], b["loads"])
assert a["load_s"] > 0 and b["load_s"] < 0.05 * a["load_s"], (a["load_s"], b["load_s"])
PY

# plan --lora: every configuration serves the adapters (colocated only, the
# default then), the plan says so, and its fingerprint is not a plain
# plan's (a plan database never mixes the two).
PL="--model llama-3.1-8b --gpus h100-sxm --tp 1 --max-gpus 2 --lengths fixed:prompt=256,output=64 --arrival poisson:rate=5 --num-requests 120 --slo ttft_ms=1000,tpot_ms=100"
"$BIN" plan $PL --lora adapters=50,rank=16,max_loras=4 --out "$T/plan-lora" >"$T/plan-lora.txt" 2>"$T/err" &&
	"$BIN" plan $PL --out "$T/plan-plain" >/dev/null 2>&1 &&
	grep -q "^LoRA adapters: adapters=50,rank=16,max_loras=4" "$T/plan-lora.txt" &&
	python3 - "$T/plan-lora/plan.json" "$T/plan-plain/plan.json" <<'PY' && pass "plan --lora: colocated, stated, its own fingerprint" || fail "plan --lora: $(cat "$T/err" "$T/plan-lora.txt")"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["workload"]["lora"] == "adapters=50,rank=16,max_loras=4", a["workload"]
assert b["workload"]["lora"] is None, b["workload"]
assert a["fingerprint"] != b["fingerprint"]
assert all(c["mode"] == "colocated" for c in a["configurations"]), [c["mode"] for c in a["configurations"]]
assert any(c["mode"] != "colocated" for c in b["configurations"])
PY
expect_error 2 "^servesim: --lora with --modes disaggregated: not modelled yet" -- \
	plan --num-requests 50 --lora adapters=10,rank=8 --modes colocated,disaggregated
expect_error 2 "^servesim: --lora with --pp: not modelled yet" -- \
	plan --num-requests 50 --lora adapters=10,rank=8 --pp 1,2
expect_error 2 "^servesim: --lora: rank=9999: expected R" -- \
	plan --num-requests 50 --lora adapters=10,rank=9999

finish
