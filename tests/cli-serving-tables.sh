#!/bin/sh
# calibrate fit-engine on the aggregate end-to-end tables added for issue 31
# (docs/serving-results.md): NVIDIA NIM's GenAI-Perf sweep and GPUStack's
# `vllm bench serve` rows.  Each row is replayed as its client ran it, the
# figures beyond the fitted ones are reported (not fitted), the rows a
# reader cannot replay are skipped with their reason, and a malformed row
# is one line naming file and line, exit 1.
. "$(dirname "$0")/cli-lib.sh"
PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }
D=${SERVESIM_TEST_DATA:?}/serving

# NIM: closed loop of C clients, 12C requests, fixed 2000+2000 tokens;
# TTFT and TPOT means fitted, p95 and request latency reported
"$BIN" calibrate fit-engine --no-fit --engine trtllm --json="$T/nim.json" "$D/nim.csv" \
	>"$T/nim.txt" 2>"$T/err" || fail "fit-engine --no-fit on NIM rows: $(cat "$T/err")"
grep -q "^nim.csv:2 llama-3.1-8b h100-sxm bf16 tp1 c1 x 2000+2000 *ttft_mean *53.86 " "$T/nim.txt" &&
	grep -q "^nim.csv:4 llama-3.1-70b h100-sxm fp8 tp4 c1 x 200+1000 *e2e_p95 .*(reported, not fitted)$" "$T/nim.txt" &&
	pass "NIM rows: Llama-3 as llama-3.1 shapes, ns read as ms, p95 and E2E reported" ||
	fail "NIM rows: $(cat "$T/nim.txt" "$T/err")"
"$PY" - "$T/nim.json" <<'PYEOF' && pass "--json: every NIM figure with measured, predicted and whether it was fitted" || fail "NIM --json: $(head -c 400 "$T/nim.json")"
import json, sys
rep = json.load(open(sys.argv[1]))
runs = [r for r in rep["runs"] if r["run"].startswith("nim.csv:2 ")]
got = {r["metric"]: r for r in runs}
assert set(got) == {"ttft_mean", "tpot_mean", "ttft_p95", "tpot_p95", "e2e_mean", "e2e_p95"}, got
assert got["ttft_mean"]["fit"] and got["tpot_mean"]["fit"], got
assert not any(got[m]["fit"] for m in ("ttft_p95", "tpot_p95", "e2e_mean", "e2e_p95")), got
assert abs(got["e2e_p95"]["measured"] - 16124.05072) < 1e-3, got["e2e_p95"]
for r in rep["runs"]:
    assert r["fitted"] > 0, r
PYEOF

# GPUStack: closed loops of C clients from t=0 (vllm bench serve), a burst
# of 1000 at t=0 whose TTFT is reported only; the speculative row skipped
"$BIN" calibrate fit-engine --no-fit --engine vllm --json="$T/gs.json" "$D/gpustack.csv" \
	>"$T/gs.txt" 2>"$T/err" || fail "fit-engine --no-fit on GPUStack rows: $(cat "$T/err")"
grep -q "^servesim: skipped gpustack.csv:6 .*speculative decoding in serve_cmd (not modelled here; issue 32)" "$T/err" &&
	grep -q "^gpustack.csv:2 qwen3-8b h100-sxm bf16 tp1 vllm c1 x 233+221 (means) *ttft_p50 *60.38 " "$T/gs.txt" &&
	grep -q "^gpustack.csv:5 qwen3-14b a100-80gb-sxm bf16 tp1 vllm burst1000 x 217+202 (means) *ttft_p50 .*(reported, not fitted)$" "$T/gs.txt" &&
	pass "GPUStack rows: closed loops and a burst replayed (the A100 page as a100-80gb-sxm), the speculative row skipped with its reason" ||
	fail "GPUStack rows: $(cat "$T/gs.txt" "$T/err")"
"$PY" - "$T/gs.json" <<'PYEOF' && pass "GPUStack --json: a burst fits TPOT only and notes that its TTFT is queueing" || fail "GPUStack --json: $(head -c 400 "$T/gs.json")"
import json, sys
rep = json.load(open(sys.argv[1]))
burst = [r for r in rep["runs"] if "burst1000" in r["run"]]
fitted = {r["metric"] for r in burst if r["fit"]}
assert fitted == {"tpot_p50"}, fitted
assert all("TTFT is queueing" in r["note"] for r in burst), burst
closed = {r["metric"]: r for r in rep["runs"] if r["run"].startswith("gpustack.csv:2 ")}
assert {m for m in closed if closed[m]["fit"]} == {"ttft_p50", "tpot_p50"}, closed
assert {"itl_p50", "itl_p99", "ttft_p99", "tpot_p99"} <= set(closed), closed
assert "note" not in closed["ttft_p50"], closed
PYEOF
# two engines' rows of one configuration (lines 3 and 4) are not repeats;
# a row measured twice with one launch is (merged into medians), one with
# another launch (an attention backend servesim does not model) is not
grep -q "^predicting 4 configurations of 4 runs" "$T/gs.txt" &&
	pass "rows of two engines are never merged as repeats" ||
	fail "engines merged: $(head -1 "$T/gs.txt")"
{ cat "$D/gpustack.csv"; sed -n 3p "$D/gpustack.csv"
  sed -n 3p "$D/gpustack.csv" | sed 's|--model-path Qwen/Qwen3-8B|--model-path Qwen/Qwen3-8B --attention-backend triton|'
} >"$T/gs-rep.csv"
"$BIN" calibrate fit-engine --no-fit --engine sglang --select engine=sglang "$T/gs-rep.csv" \
	>"$T/out" 2>"$T/err" && grep -q "^predicting 2 configurations of 3 runs" "$T/out" &&
	pass "a repeated GPUStack row is merged, another launch of it is not" ||
	fail "GPUStack repeats: $(cat "$T/out" "$T/err" | head -3)"
# weights the catalog prices above the GPUs' memory: skipped, not an error
# (DeepSeek-V3 at its FP8 checkpoint on one H100; gpt-oss-120b fits one
# at its MXFP4)
sed '3s|,Qwen/Qwen3-8B,|,DeepSeek-V3,|' "$D/gpustack.csv" >"$T/gs-big.csv"
"$BIN" calibrate fit-engine --no-fit --engine sglang --select engine=sglang "$T/gs-big.csv" \
	>"$T/out" 2>"$T/err"
[ $? -eq 1 ] && grep -q "skipped gs-big.csv:3 .*: its weights do not fit the GPUs' memory" "$T/err" &&
	pass "a row whose weights do not fit is skipped with the reason" ||
	fail "oversized weights: $(cat "$T/err")"
# a fit keeps only the figures it fits unless --reported; the fit is the
# same either way
for r in "" --reported; do
	"$BIN" calibrate fit-engine --engine vllm --select engine=vllm --free frontend_ms:1:200 \
		--no-holdout $r --json="$T/fit$r.json" "$D/gpustack.csv" >/dev/null 2>"$T/err" ||
		fail "fit-engine $r on GPUStack rows: $(cat "$T/err")"
done
"$PY" - "$T/fit.json" "$T/fit--reported.json" <<'PYEOF' && pass "a fit shows the reported figures with --reported only, and fits the same" || fail "--reported: $(cat "$T/err")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["parameters"] == b["parameters"] and a["training_mape"] == b["training_mape"], (a, b)
assert {r["metric"] for r in a["runs"]} == {"ttft_p50", "tpot_p50"}, a["runs"]
assert all(r["fit"] for r in a["runs"]), a["runs"]
assert {"itl_p50", "ttft_p99", "tpot_mean"} <= {r["metric"] for r in b["runs"] if not r["fit"]}, b["runs"]
PYEOF
# --select engine=: the rows of one engine
"$BIN" calibrate fit-engine --no-fit --engine sglang --select engine=sglang "$D/gpustack.csv" \
	>"$T/out" 2>"$T/err" && grep -q "predicting 1 configuration" "$T/out" &&
	pass "--select engine=sglang keeps GPUStack's SGLang row" || fail "--select engine=sglang: $(cat "$T/out" "$T/err")"

# TensorRT-LLM 0.9's static table through the static-batch path (prompt =
# 1st-token latency, token = token-to-token latency), batch latency reported;
# H100 NVL (not h100-sxm) and a row without latencies skipped
"$BIN" calibrate fit-engine --no-fit --engine trtllm --json="$T/ts.json" "$D/trtllm-static.csv" \
	>"$T/ts.txt" 2>"$T/err" || fail "fit-engine --no-fit on the TensorRT-LLM table: $(cat "$T/err")"
grep -q "^trtllm-static.csv:3 llama-2-70b a100-80gb-sxm bf16 tp4 b8 x 2048+128 *ttft_mean *2617.80 " "$T/ts.txt" &&
	grep -q "^trtllm-static.csv:2 llama-2-7b h100-sxm fp8 tp1 b1 x 128+128 *e2e_mean .*(reported, not fitted)$" "$T/ts.txt" &&
	grep -q "skipped trtllm-static.csv:4: its GPU (H100 NVL) is not in the catalog" "$T/err" &&
	grep -q "skipped trtllm-static.csv:5: its model is not in the catalog" "$T/err" &&
	pass "TensorRT-LLM static rows: static batches, LLaMA v2 names, H100 NVL skipped" ||
	fail "TensorRT-LLM static rows: $(cat "$T/ts.txt" "$T/err")"
# run --trace on an aggregate table: it names the table
expect_error 1 "gpustack.csv:1: an aggregate benchmark table \(GPUStack vllm bench serve\)" -- \
	run --trace "$D/gpustack.csv"

# a malformed row: one line naming the file and the line, exit 1
sed '3s/closed-loop, max concurrency 4, 100 prompts/closed-loop, max concurrency four/' \
	"$D/gpustack.csv" >"$T/gs-bad.csv"
expect_error 1 "gs-bad.csv:3: load: expected 'closed-loop, max concurrency C, N prompts'" -- \
	calibrate fit-engine --no-fit "$T/gs-bad.csv"
sed '4s/,ns,/,parsecs,/' "$D/nim.csv" >"$T/nim-bad.csv"
expect_error 1 "nim-bad.csv:4: request_throughput-unit|nim-bad.csv:4: .*-unit: expected ns, us, ms or s, got 'parsecs'" -- \
	calibrate fit-engine --no-fit "$T/nim-bad.csv"
finish
