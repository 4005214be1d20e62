# servesim live on the CPU backend with a tiny model and a short trace:
# it completes every request with the same results schema, marked live;
# `servesim compare` reads it against its simulation; a kernel failure ends
# the run with one clear line and keeps the results recorded so far.
. "$(dirname "$0")/cli-lib.sh"

args="--model llama-3.2-1b --width-div 16 --layers 2 --threads 1 --kv-blocks 512 --arrival poisson:rate=40 --lengths fixed:prompt=48,output=12 --num-requests 30 --quiet"
if "$BIN" live $args --out "$T/live" 2>"$T/err"; then
	grep -q '"mode": "live"' "$T/live/summary.json" && grep -q '"requests_completed": 30' "$T/live/summary.json" &&
		pass "live run completes all 30 requests, marked live" ||
		fail "live summary: $(grep -E '"(mode|requests_completed)"' "$T/live/summary.json")"
	for f in requests.csv results.db summary.txt; do
		[ -s "$T/live/$f" ] || fail "live run did not write $f"
	done
	# the live loop is its own engine: no profile, though run's default is vllm
	grep -q '"engine": "none"' "$T/live/summary.json" &&
		pass "live run takes no engine profile (summary.json engine none)" ||
		fail "live summary names an engine: $(grep '"engine"' "$T/live/summary.json")"
else
	fail "live run failed: $(cat "$T/err")"
fi
sim_args=$(printf '%s' "$args" | sed 's/--width-div 16 --layers 2 --threads 1 //')
"$BIN" run $sim_args --out "$T/sim" 2>"$T/err" || fail "simulation of the same scenario: $(cat "$T/err")"
"$BIN" compare "$T/live" "$T/sim" >"$T/cmp" 2>"$T/err" && pass "compare live against sim" ||
	fail "compare: $(cat "$T/err")"

SERVESIM_LIVE_FAIL_AT_STEP=4 "$BIN" live $args --out "$T/failed" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "kernel failure" "$T/err" &&
	pass "a kernel failure ends the run: $(cat "$T/err")" || fail "failure path: rc=$rc $(cat "$T/err")"
grep -q '"status": "failed"' "$T/failed/summary.json" && [ -s "$T/failed/requests.csv" ] &&
	pass "results so far are kept, marked failed" || fail "no failed-run results"

# Energy is metered where the backend has a meter (RAPL on the CPU) and
# reported absent, not zero, where it has none.
SERVESIM_POWERCAP_ROOT="$T/none" "$BIN" live $args --out "$T/nometer" 2>"$T/err" &&
	grep -q '^energy: not metered' "$T/nometer/summary.txt" &&
	grep -q '"metered": false' "$T/nometer/summary.json" &&
	pass "no meter: energy reported as not metered" ||
	fail "no meter: $(grep energy "$T/nometer/summary.txt") $(cat "$T/err")"
# ... null in summary.json, not 0, and no power panel in the plot; a CPU
# is not priced (no cost line, null cost: --gpu only sized the KV pool);
# the header names the backend and the model as run, scaled down
python3 - "$T/nometer/summary.json" <<'EOF' && pass "no meter: energy and power null, no price for the CPU" || fail "no meter: $(grep -A12 '"energy"' "$T/nometer/summary.json")"
import json, sys
s = json.load(open(sys.argv[1]))
e = s["energy"]
for k in ("total_j", "busy_j", "idle_j", "j_per_request", "j_per_output_token",
          "avg_power_w_per_gpu", "avg_power_w", "peak_power_w", "prefill_j", "decode_j"):
    assert e[k] is None, (k, e[k])
assert s["cost"] == {"usd_per_hour": None, "usd": None, "usd_per_million_output_tokens": None}, s["cost"]
assert s["scenario"]["backend"].startswith("cpu (CPU: "), s["scenario"]
assert s["scenario"]["model_run"] == "llama-3.2-1b scaled: width/16, 2 layers instead of 16 (synthetic weights)", s["scenario"]
assert s["stack"]["engine"] == {"spec": "none", "source": "default"}, s["stack"]
EOF
! grep -q '^cost:\|power per GPU' "$T/nometer/summary.txt" &&
	grep -q '^scenario: live: llama-3.2-1b scaled: width/16, 2 layers instead of 16 (synthetic weights)$' "$T/nometer/summary.txt" &&
	grep -q '^          backend cpu (CPU: ' "$T/nometer/summary.txt" &&
	! grep -q 'power per GPU' "$T/nometer/timeseries.gp" &&
	pass "no meter: the header names the CPU and the scaled model, no price or power" ||
	fail "no meter header: $(head -3 "$T/nometer/summary.txt"; grep -E '^cost|power' "$T/nometer/summary.txt")"
mkdir -p "$T/pc/intel-rapl:0"
echo package-0 >"$T/pc/intel-rapl:0/name"
echo 262143328850 >"$T/pc/intel-rapl:0/max_energy_range_uj"
echo 123456789 >"$T/pc/intel-rapl:0/energy_uj"
SERVESIM_POWERCAP_ROOT="$T/pc" "$BIN" live $args --out "$T/meter" 2>"$T/err" &&
	grep -q '"metered": true' "$T/meter/summary.json" &&
	grep -q '"source": "RAPL' "$T/meter/summary.json" &&
	grep -q 'metered by RAPL' "$T/meter/summary.txt" &&
	pass "RAPL readable: energy metered by it" ||
	fail "RAPL meter: $(grep -E 'source|metered' "$T/meter/summary.json") $(cat "$T/err")"

# A live run's policies get the same prefill_ns estimate as a simulation of
# the same configuration: from --cost-model.  With a constant model of 10 ms
# per prompt token a 48-token prompt is predicted at 480 ms, over the 100 ms
# TTFT the admission policy enforces, so both reject all 30 requests (a live
# run estimating with the roofline instead predicts microseconds and admits
# every one).
adm="--cost-model constant:prefill_ms_per_token=10 --admission slo:ttft_ms=100 --json"
"$BIN" live $args $adm >"$T/live.json" 2>"$T/err" || fail "live with slo admission: $(cat "$T/err")"
"$BIN" run $sim_args $adm >"$T/sim.json" 2>"$T/err" || fail "run with slo admission: $(cat "$T/err")"
live_rej=$(grep -m1 '"rejected"' "$T/live.json" | tr -dc 0-9)
sim_rej=$(grep -m1 '"rejected"' "$T/sim.json" | tr -dc 0-9)
[ "$live_rej" = 30 ] && [ "$sim_rej" = 30 ] &&
	pass "live and simulated runs predict prefill alike (both reject $live_rej of 30)" ||
	fail "prefill estimates differ: live rejected '$live_rej', simulation '$sim_rej' of 30"

# --kv-dtype fp8: the kernels' fp8 E4M3 cache.  At a memory budget that
# leaves 0.19 GiB for KV, the engine sizes twice the blocks at one byte an
# element (375 -> 750 for llama-3.2-1b on an H100), the live run holds and
# fills that many and completes, and a simulation of the same budget has the
# same pool.
fp8_sim="--model llama-3.2-1b --gpu-memory-utilization 0.05 --arrival poisson:rate=40 --lengths fixed:prompt=48,output=12 --num-requests 30 --quiet"
fp8_args="$fp8_sim --width-div 16 --layers 2 --threads 1"
if "$BIN" live $fp8_args --kv-dtype fp8 --out "$T/fp8" 2>"$T/err" &&
	"$BIN" live $fp8_args --out "$T/bf16" 2>"$T/err" &&
	"$BIN" run $fp8_sim --kv-dtype fp8 --out "$T/fp8sim" 2>"$T/err"; then
	blocks() { grep -m1 '"kv_blocks_per_instance"' "$1" | tr -dc 0-9; }
	fb=$(blocks "$T/fp8/summary.json") bb=$(blocks "$T/bf16/summary.json")
	sb=$(blocks "$T/fp8sim/summary.json")
	grep -q '"requests_completed": 30' "$T/fp8/summary.json" &&
		grep -q '"kv_dtype": "fp8"' "$T/fp8/summary.json" &&
		grep -q '"live_executor": ".*, fp8 KV"' "$T/fp8/summary.json" &&
		[ "$bb" = 375 ] && [ "$fb" = 750 ] && [ "$sb" = 750 ] &&
		pass "live --kv-dtype fp8: twice the KV blocks (375 -> $fb), as the simulation sizes them, all requests done" ||
		fail "live --kv-dtype fp8: blocks bf16 '$bb', fp8 '$fb', simulated '$sb'; $(grep -E '"(requests_completed|kv_dtype|live_executor)"' "$T/fp8/summary.json")"
else
	fail "live --kv-dtype fp8 failed: $(cat "$T/err")"
fi

expect_error 1 "one instance" -- live $args --instances 2
expect_error 2 "unknown option '--backend'" -- run --backend cpu
finish
