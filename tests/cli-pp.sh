#!/bin/sh
# Pipeline parallelism (--pp, docs/cost-models.md "Pipeline parallelism"):
# Llama-3.1-70B does not fit on one H100 but runs as two pipeline stages of
# one; the summary and the JSON name the layout and count tp x pp GPUs;
# more stages than layers, and --pp with --semi-pd, are refused with one
# line; plan's --pp list adds tp x pp configurations whose keys carry
# pp=N while those of pp 1 stay as they were.
. "$(dirname "$0")/cli-lib.sh"

expect_error 1 "does not fit on 1 x h100-sxm" -- run --model llama-3.1-70b --num-requests 5
"$BIN" run --model llama-3.1-70b --pp 2 --num-requests 20 >"$T/out" 2>"$T/err" &&
	grep -q "1 instance of 1 x 2 x h100-sxm (tp x pp; 2 GPUs)" "$T/out" &&
	pass "llama-3.1-70b runs on 2 stages of 1 H100" || fail "pp 2: $(cat "$T/err") $(head -2 "$T/out")"
"$BIN" run --model llama-3.1-70b --pp 2 --num-requests 20 --json >"$T/pp.json" || fail "pp 2 --json"
expect_error 2 "--pp: expected at most llama-3.1-8b's 32 layers as pipeline stages, got 33" -- \
	run --pp 33 --num-requests 5
expect_error 2 "--decode-pp: expected at most llama-3.1-8b's 32 layers" -- \
	run --prefill-instances 1 --decode-instances 1 --decode-pp 40 --num-requests 5
expect_error 2 "--pp: expected an integer in 1..64" -- run --pp 0 --num-requests 5
expect_error 2 "--semi-pd with --pp" -- run --pp 2 --semi-pd sm=0.5 --num-requests 5
expect_error 2 "--pp: expected at most llama-3.1-8b's 32 layers" -- \
	plan --pp 1,40 --num-requests 20 --dry-run
# an MoE model whose layers are all MoE runs; one with every second layer
# dense (decoder_sparse_step 2) is refused: stages are priced by layer count
"$BIN" run --model qwen3-30b-a3b --pp 2 --num-requests 10 >"$T/out" 2>"$T/err" &&
	pass "qwen3-30b-a3b (every layer MoE) at pp 2" || fail "qwen3-30b-a3b pp 2: $(cat "$T/err")"
D=$(cd "$(dirname "$0")" && pwd)/data/models
sed 's/"decoder_sparse_step": 1/"decoder_sparse_step": 2/' "$D/qwen3-30b-a3b.json" >"$T/sparse2.json"
expect_error 2 "--pp with sparse2: not modelled \(24 of its 48 layers are MoE" -- \
	run --model-config "$T/sparse2.json" --pp 2 --num-requests 5

expect_error 2 "--pp with --ep or --dp-attention: not modelled yet" -- \
	run --model qwen3-30b-a3b --tp 2 --pp 2 --ep 2 --num-requests 5
"$BIN" plan --model qwen3-30b-a3b --num-requests 20 --max-gpus 4 --tp 2 --pp 1,2 --ep 1,2 \
	--modes colocated --policies vllm --dry-run >"$T/plan" 2>"$T/err" || fail "plan --pp --ep: $(cat "$T/err")"
grep -q "tp=2 pp=2 instances=1" "$T/plan" && grep -q "tp=2 ep=2 instances=2" "$T/plan" &&
	! grep -q "pp=2 ep=" "$T/plan" && ! grep -q "ep=2 pp=" "$T/plan" &&
	pass "plan --pp with --ep: pipelines of expert-parallel instances left out" ||
	fail "plan --pp --ep: $(cat "$T/plan")"

"$BIN" plan --num-requests 20 --max-gpus 4 --tp 1,2 --pp 1,2 --modes colocated --policies vllm \
	--dry-run >"$T/plan" 2>"$T/err" || fail "plan --pp: $(cat "$T/err")"
grep -q "^8 configurations" "$T/plan" &&
	grep -q "colocated gpu=h100-sxm tp=1 instances=4 policy=vllm" "$T/plan" &&
	grep -q "colocated gpu=h100-sxm tp=2 pp=2 instances=1 policy=vllm" "$T/plan" &&
	! grep -q "tp=2 pp=2 instances=2" "$T/plan" &&
	pass "plan --pp 1,2: tp x pp GPUs per instance within --max-gpus" ||
	fail "plan --pp: $(cat "$T/plan")"

PY=$(command -v python3) || { echo "skip rest: python3 not found"; finish; }
"$PY" - "$T/pp.json" <<'PYEOF' && pass "JSON: pp 2, 2 GPUs" || fail "JSON of a pp run"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["scenario"]["pp"] == 2 and d["scenario"]["tp"] == 1, d["scenario"]
assert d["gpus"] == 2, d["gpus"]
assert d["requests_completed"] == 20
PYEOF
finish
