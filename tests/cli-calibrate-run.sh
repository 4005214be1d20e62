# servesim calibrate run on the CPU backend: a small sweep writes
# measurements a rerun skips (resumable); the energy meter is RAPL where a
# powercap counter is readable and absent (never zero) otherwise.
. "$(dirname "$0")/cli-lib.sh"

small="--model llama-3.2-1b --width-div 32 --layers 1 --max-tokens 32 --max-kv 64 --warmup 0 --repeats 2"
if SERVESIM_POWERCAP_ROOT="$T/none" "$BIN" calibrate run $small --store "$T/c.db" >"$T/out" 2>"$T/err"; then
	n=$(sed -n 's/calibrate run: \([0-9]*\) points measured.*/\1/p' "$T/out")
	[ "${n:-0}" -gt 20 ] && pass "sweep measured $n points" || fail "sweep measured '${n}' points: $(cat "$T/out")"
	grep -q "energy: no RAPL" "$T/out" && pass "absent meter reported" || fail "meter line: $(cat "$T/out")"
else
	fail "calibrate run: $(cat "$T/err")"
fi
"$BIN" calibrate list --store "$T/c.db" >"$T/list" && grep -q "host_overhead" "$T/list" &&
	grep -q "attn_decode" "$T/list" && pass "store holds the operators" || fail "list: $(cat "$T/list")"
SERVESIM_POWERCAP_ROOT="$T/none" "$BIN" calibrate run $small --store "$T/c.db" >"$T/out2" 2>"$T/err" &&
	grep -q "calibrate run: 0 points measured, $n already" "$T/out2" &&
	pass "a rerun resumes: nothing measured twice" || fail "rerun: $(cat "$T/out2" "$T/err")"

# Whole steps: stored as their own series, and --catalog-out fits the host
# terms to them (residual over the table model's operators) as the engine
# profile servesim-cpu, which `servesim run --engine` composes.
grep -q "step:llama-3.2-1b" "$T/list" && pass "whole steps stored" || fail "no whole-step series: $(cat "$T/list")"
SERVESIM_POWERCAP_ROOT="$T/none" "$BIN" calibrate run $small --store "$T/c.db" \
	--catalog-out "$T/cat" >"$T/out4" 2>"$T/err" &&
	grep -q "host terms (engine servesim-cpu" "$T/out4" &&
	python3 - "$T/cat/engines.json" <<'PY' && pass "host terms written as an engine profile" || fail "engine profile: $(cat "$T/out4" "$T/err" "$T/cat/engines.json")"
import json, sys
e = json.load(open(sys.argv[1]))["engines"][0]
assert e["name"] == "servesim-cpu", e
for k in ("prep_us", "prep_us_per_layer", "prep_us_per_token", "output_us_per_seq"):
    assert e[k] >= 0, (k, e[k])
assert "whole steps" in e["source"], e["source"]
m = json.load(open(sys.argv[1].replace("engines.json", "models.json")))["models"][0]
assert m["dtype_bytes"] == 4, m   # the CPU backend stores fp32
PY
"$BIN" run --model-catalog "$T/cat/models.json" --gpu-catalog "$T/cat/gpus.json" \
	--model llama-3.2-1b-w32-l1 --gpu cpu --cost-model table --calibration "$T/c.db" \
	--engine servesim-cpu --engine-catalog "$T/cat/engines.json" --arrival poisson:rate=50 --lengths fixed:prompt=24,output=4 \
	--num-requests 5 --out "$T/sim" --quiet 2>"$T/err" &&
	grep -q "engine servesim-cpu" "$T/sim/summary.txt" && pass "run composes the calibrated host terms" ||
	fail "run with the profile: $(cat "$T/err")"

# The adapter kernels: stored as op lora, fitted (one line), and a
# --lora run on the calibration prices its adapter GEMMs from them
# ("table" in cost_model.operators), where the roofline's priors price
# them without the rows.
grep -q "^cpu *lora " "$T/list" && grep -q "lora kernels (the table model's fit to 36 rows)" "$T/out" &&
	pass "lora kernels stored and fitted" || fail "lora rows: $(cat "$T/list" "$T/out")"
for cm in table roofline; do
	"$BIN" run --model-catalog "$T/cat/models.json" --gpu-catalog "$T/cat/gpus.json" \
		--model llama-3.2-1b-w32-l1 --gpu cpu --cost-model $cm --calibration "$T/c.db" \
		--lora adapters=8,mix=8:0.5/64:0.5,max_loras=4 --arrival poisson:rate=50 \
		--lengths fixed:prompt=24,output=4 --num-requests 20 --out "$T/lora-$cm" --quiet 2>"$T/err" ||
		fail "run --lora --cost-model $cm: $(cat "$T/err")"
done
python3 - "$T/lora-table/summary.json" "$T/lora-roofline/summary.json" <<'PY' && pass "adapter GEMMs priced by the calibration, else the priors" || fail "lora pricing: $(cat "$T/err")"
import json, sys
t, r = (json.load(open(f))["cost_model"] for f in sys.argv[1:3])
assert t["operators"]["lora"] == "table", t
assert r["operators"]["lora"] == "roofline", r
assert t["op_share"]["lora"] > 0 and r["op_share"]["lora"] > 0, (t, r)
PY

# A model of two layers: its one-layer slice's decode steps are timed too
# ("step1:"), so that the per-layer host term can be told from the
# per-step one (a one-layer drafter's pass pays the one, not the other).
two="--model llama-3.2-1b --width-div 32 --layers 2 --max-tokens 32 --max-kv 64 --warmup 0 --repeats 2"
SERVESIM_POWERCAP_ROOT="$T/none" "$BIN" calibrate run $two --store "$T/two.db" \
	--catalog-out "$T/cat2" >"$T/out5" 2>"$T/err" &&
	"$BIN" calibrate list --store "$T/two.db" >"$T/list2" &&
	grep -q "step1:llama-3.2-1b" "$T/list2" && grep -q "us per layer" "$T/out5" &&
	python3 - "$T/cat2/engines.json" <<'PY' && pass "one-layer steps timed and the per-layer term fitted" || fail "two layers: $(cat "$T/out5" "$T/err" "$T/list2")"
import json, sys
e = json.load(open(sys.argv[1]))["engines"][0]
assert e["prep_us_per_layer"] >= 0 and e["prep_us"] >= 0, e
PY

mkdir -p "$T/pc/intel-rapl:0"
echo 123456789 >"$T/pc/intel-rapl:0/energy_uj"
echo 262143328850 >"$T/pc/intel-rapl:0/max_energy_range_uj"
SERVESIM_POWERCAP_ROOT="$T/pc" "$BIN" calibrate run $small --store "$T/d.db" >"$T/out3" 2>"$T/err" &&
	grep -q "energy: RAPL" "$T/out3" && pass "RAPL counter found" || fail "RAPL: $(cat "$T/out3" "$T/err")"

expect_error 2 "expected --device" -- calibrate run --backend cuda
expect_error 2 "--repeats" -- calibrate run --repeats 0
finish
