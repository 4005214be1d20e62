#!/bin/sh
# servesim live --lora (issue 33 §1; docs/lora.md, "Live"): a live run
# whose requests name adapters completes with the same lora component
# deciding residency as a simulation: no step holds more than max_loras
# adapters, adapters are loaded (real copies of the synthetic adapters'
# bytes, at the scaled model's size) and their GEMMs take time; with every
# request waiting from the start, the scheduling decisions (steps, hits,
# loads, evictions, the order requests are first scheduled) are the same
# in two live runs and in the simulation of the same (with no engine
# profile, as a live run has none), whatever the step times; what live runs cannot do is refused with one line, exit 2.
# shellcheck source-path=SCRIPTDIR source=cli-lib.sh
. "$(dirname "$0")/cli-lib.sh"

# 24 requests at time 0 over 6 adapters, prompts of 24..64 tokens
python3 - "$T/trace.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("arrival_ms,prompt_tokens,output_tokens,adapter\n")
    for i in range(24):
        f.write(f"0,{24 + (i * 7) % 41},6,{(i * 5) % 6}\n")
PY
SCALE="--width-div 16 --layers 2 --threads 1"
args="--model llama-3.2-1b --kv-blocks 512 --quiet --trace $T/trace.csv"
lora="mix=8:0.5/16:0.5,max_loras=2"

for n in 1 2; do
	# shellcheck disable=SC2086
	"$BIN" live $args $SCALE --lora "$lora" --out "$T/live$n" >"$T/live$n.txt" 2>"$T/live$n.err" ||
		fail "live --lora run $n: $(cat "$T/live$n.err")"
done
# shellcheck disable=SC2086
"$BIN" run $args --engine none --lora "$lora" --out "$T/sim" >"$T/sim.txt" 2>"$T/sim.err" ||
	fail "run --lora: $(cat "$T/sim.err")"

python3 - "$T" <<'PY' && pass "live --lora: max_loras per step, real loads and GEMMs, the simulation's decisions, deterministic" || fail "live --lora summaries"
import csv, json, sys
t = sys.argv[1]
live = [json.load(open(f"{t}/live{n}/summary.json")) for n in (1, 2)]
sim = json.load(open(f"{t}/sim/summary.json"))
for s in live:
    l = s["lora"]
    assert s["mode"] == "live" and l["adapters"] == 6 and l["max_loras"] == 2, l
    assert l["peak_adapters_per_step"] <= 2, l
    assert l["loads"] > 0 and l["evictions"] > 0 and l["host_misses"] == 0, l
    assert l["load_s"] > 0 and l["gemm_share"] > 0, l
    # bytes copied: per adapter rank x (d_in + d_out) of q, k, v, o over 2
    # layers of the scaled model (width 128, q 256, k and v 64), fp32:
    # 9,216 bytes a unit of rank, so 73,728 (rank 8) or 147,456 (16)
    unit = 2 * ((128 + 256) + 2 * (128 + 64) + (256 + 128)) * 4
    assert l["loads"] * 8 * unit <= l["load_bytes"] <= l["loads"] * 16 * unit, l
    assert l["load_bytes"] % (8 * unit) == 0, l
keys = ("steps", "hits", "loads", "evictions", "adapters_per_step", "peak_adapters_per_step")
for s in live[1:] + [sim]:
    for k in keys:
        assert s["lora"][k] == live[0]["lora"][k], (k, s["lora"][k], live[0]["lora"][k])
def order(d):
    rows = list(csv.DictReader(open(f"{t}/{d}/requests.csv")))
    assert all(r["state"] == "finished" for r in rows), d
    return [(r["id"], r["adapter"], r["preemptions"])
            for r in sorted(rows, key=lambda r: (float(r["first_scheduled_ms"]), int(r["id"])))]
assert order("live1") == order("live2") == order("sim")
PY

# what a live run cannot do
# shellcheck disable=SC2086
expect_error 2 "^servesim: --lora with a live executor and max_cpu_loras below the adapters" -- \
	live $args $SCALE --lora "adapters=6,rank=8,max_loras=2,max_cpu_loras=3"
# shellcheck disable=SC2086
expect_error 2 "^servesim: --lora with a live executor and targets=all" -- \
	live $args $SCALE --lora "adapters=6,rank=8,targets=all"

finish
