#!/bin/sh
# servesim against LLMServingSim's vLLM 0.19 runs (issue 11 section 5,
# docs/validation.md): each usable run of
# ../shared/data/serving/llmservingsim_bench replayed with its own vLLM
# settings (bench/llmservingsim.py), engine-side TTFT and TPOT p50 and the
# shape of the overloaded runs' waiting/running time series within bands.
# Skipped (77) without the shared data or python3.
. "$(dirname "$0")/cli-lib.sh"

# fidelity, not memory safety: the plain build runs it (tests/meson.build)
[ -z "${SERVESIM_SANITIZED:-}" ] || { echo "skip: sanitized build"; exit 77; }

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }
SHARED=${SERVESIM_SHARED_DATA:-$(dirname "$0")/../../shared/data}
[ -d "$SHARED/serving/llmservingsim_bench" ] || { echo "skip: no $SHARED/serving/llmservingsim_bench"; exit 77; }

"$PY" "$(dirname "$0")/../bench/llmservingsim.py" "$BIN" "$SHARED" "$T/out" --json "$T/r.json" \
	>"$T/table" 2>"$T/err" || fail "bench/llmservingsim.py: $(tail -3 "$T/err")"
cat "$T/table"
"$PY" - "$T/r.json" <<'EOF' && pass "LLMServingSim runs: TTFT and TPOT p50 and time-series shape within their bands" || fail "LLMServingSim runs outside their bands (table above)"
import json, sys
rep = json.load(open(sys.argv[1]))
runs = {r["run"]: r for r in rep["runs"]}
# the three dense runs and the MoE run (as vLLM ran it, 2 data-parallel
# ranks with EP 2: --tp 2 --ep 2 --dp-attention 2, bench/llmservingsim.py)
# are replayed; none is skipped
MOE = "RTXPRO6000/Qwen3-30B-A3B-Instruct-2507"
assert sorted(runs) == ["RTX4090/Llama-3.1-8B", "RTXPRO6000/Llama-3.1-8B", MOE,
                        "RTXPRO6000/Qwen3-32B"], sorted(runs)
assert rep["skipped"] == [], rep["skipped"]

def err(r, k):
    return r["servesim"][k] / r["measured"][k] - 1

bad = []
def band(what, value, tol):
    if not abs(value) <= tol:
        bad.append("%s: %.3f outside +-%.2f" % (what, value, tol))

# TTFT p50, engine-side.  The issue's target is 20%; it holds on the RTX PRO
# 6000 Llama-3.1-8B run (+6% today).  The other two miss it by what the
# kernels miss, not the engine: the RTX 4090 is priced by the roofline on
# its datasheet FP32-accumulate rate and 0.8 of GDDR6X bandwidth, no
# calibration (+21% today, TPOT +19%); Qwen3-32B at TP 2 on two PCIe GPUs
# spends more in its all-reduces than the roofline's PCIe link gives it
# (-26% today, TPOT -20%; docs/validation.md).  Bands: 20% where the target
# holds, 30% where it does not (today's error plus a few points for the
# cost model's small changes), so a regression past the known gap fails.
# The MoE run (not saturated: TTFT p50 0.14 s), replayed in vLLM's own
# layout (two schedulers, each prefilling on its one GPU, experts over
# both with all-to-alls): TTFT -11% today (-34% as the TP 2 stand-in it
# was replayed as before --ep / --dp-attention), TPOT +2% (-3%); the
# issue's 20% band for both.
ttft_tol = {"RTX4090/Llama-3.1-8B": 0.30, "RTXPRO6000/Llama-3.1-8B": 0.20, "RTXPRO6000/Qwen3-32B": 0.30,
            MOE: 0.20}
tpot_tol = {MOE: 0.20}
# the MoE run's queue peaks at 37 (38 in servesim, +3% today; 30, -19%,
# as TP 2); the dense runs' 15%
peak_tol = {}
for name, r in runs.items():
    band(name + " TTFT p50", err(r, "ttft_p50"), ttft_tol[name])
    # TPOT p50 is what sets a saturated run's pace: +19%, +7%, -20% today
    band(name + " TPOT p50", err(r, "tpot_p50"), tpot_tol.get(name, 0.25))
    # every run here queues (hundreds wait in the dense runs, 37 in the MoE one)
    assert r["overloaded"], name
    sh = r["shape"]
    # running requests, RMSE over the run / the measured peak: 29%, 12%,
    # 32% today, 6% for the MoE run (both ranks summed, as vLLM's series)
    # (the RTX 4090 run preempts in servesim where vLLM keeps fewer
    # running; Qwen3-32B drains 20% early)
    band(name + " running nRMSE", sh["running_nrmse"], 0.40)
    # waiting requests, the same: 12%, 8%, 16% today; the queue is built by
    # the arrivals (10 req/s for 30 s), so its shape is the easier one
    band(name + " waiting nRMSE", sh["waiting_nrmse"], 0.25)
    # the queue's peak: arrivals minus what the engine admits in the first
    # 30 s: +5%, +6%, 0% today; 15%
    band(name + " peak waiting", sh["waiting_peak_sim"] / sh["waiting_peak_meas"] - 1,
         peak_tol.get(name, 0.15))
    # when the queue drains: the engine's throughput over the whole run:
    # +21%, +4%, -21% today, as TTFT; 30%
    band(name + " drain time", sh["drain_s_sim"] / sh["drain_s_meas"] - 1, 0.30)
assert not bad, bad
EOF
finish
