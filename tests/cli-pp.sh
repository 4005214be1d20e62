#!/bin/sh
# Pipeline parallelism (--pp, docs/cost-models.md "Pipeline parallelism"):
# Llama-3.1-70B does not fit on one H100 but runs as two pipeline stages of
# one; the summary and the JSON name the layout and count tp x pp GPUs;
# more stages than layers, --pp with --semi-pd and with --dp-attention,
# are refused with one line; MoE models whose layers are not alike and
# pipelines of expert-parallel stages run; plan's --pp list adds tp x pp
# configurations (with --ep) whose keys carry pp=N while those of pp 1
# stay as they were.
. "$(dirname "$0")/cli-lib.sh"

# a model too large for --gpu: the command line asks for the impossible (exit 2)
expect_error 2 "does not fit on 1 x h100-sxm" -- run --model llama-3.1-70b --num-requests 5
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
# an MoE model whose layers are all MoE runs; so do those whose layers are
# not alike (formerly refused), each stage priced from its own layers:
# every second layer dense (decoder_sparse_step 2), DeepSeek-V3's 3 dense
# layers first (on stage 0), Llama-4-Scout's chunked layers, gpt-oss's
# and gemma-3's sliding-window layers
"$BIN" run --model qwen3-30b-a3b --pp 2 --num-requests 10 >"$T/out" 2>"$T/err" &&
	pass "qwen3-30b-a3b (every layer MoE) at pp 2" || fail "qwen3-30b-a3b pp 2: $(cat "$T/err")"
D=$(cd "$(dirname "$0")" && pwd)/data/models
sed 's/"decoder_sparse_step": 1/"decoder_sparse_step": 2/' "$D/qwen3-30b-a3b.json" >"$T/sparse2.json"
"$BIN" run --model-config "$T/sparse2.json" --pp 2 --num-requests 5 >"$T/out" 2>"$T/err" &&
	pass "every second layer MoE at pp 2" || fail "sparse2 pp 2: $(cat "$T/err")"
for m in "deepseek-v3 --tp 4 --pp 2 --weight-dtype fp8" "deepseek-v3 --tp 2 --pp 4 --weight-dtype fp8" \
	"llama-4-scout --tp 2 --pp 2" "gpt-oss-120b --pp 2" "gemma-3-27b --pp 4"; do
	# shellcheck disable=SC2086
	"$BIN" run --model $m --gpu h200-sxm --num-requests 10 >"$T/out" 2>"$T/err" &&
		grep -q "requests: 10 total, 10 completed" "$T/out" &&
		pass "$m runs" || fail "$m: $(cat "$T/err") $(head -6 "$T/out")"
done
# the table model prices each stage from its slice too (its measured GEMMs,
# element-wise and all-reduce for the slice's layers, the roofline's local
# attention)
"$BIN" run --model gemma-3-27b --gpu h100-sxm --tp 2 --pp 2 --cost-model table --num-requests 10 \
	>"$T/table" 2>"$T/err" && grep -q "cost model table" "$T/table" &&
	grep -q "requests: 10 total, 10 completed" "$T/table" &&
	pass "gemma-3-27b at pp 2 with the table model" || fail "table pp: $(cat "$T/err")"
# (the last, gemma-3-27b at pp 4): each stage's busy and bubble share
grep -E -q "^pipeline stages busy: [0-9.]+%, [0-9.]+%, [0-9.]+%, [0-9.]+% of the run; bubbles against the busiest stage: [0-9.]+%, [0-9.]+%, [0-9.]+%, [0-9.]+%$" "$T/out" &&
	pass "summary: four stages' busy and bubble shares" || fail "pipeline line: $(grep pipeline "$T/out")"
# expert parallelism within each stage runs; data-parallel attention in a
# pipeline stays refused with one line
"$BIN" run --model qwen3-235b-a22b --gpu h200-sxm --tp 4 --pp 2 --ep 4 --num-requests 10 \
	>"$T/out" 2>"$T/err" && grep -q "requests: 10 total, 10 completed" "$T/out" &&
	pass "qwen3-235b-a22b at tp 4 x pp 2 x ep 4" || fail "pp x ep: $(cat "$T/err")"
expect_error 2 "--pp with --dp-attention: not modelled yet" -- \
	run --model qwen3-30b-a3b --tp 2 --pp 2 --dp-attention 2 --num-requests 5
"$BIN" plan --model qwen3-30b-a3b --num-requests 20 --max-gpus 4 --tp 2 --pp 1,2 --ep 1,2 \
	--dp-attention 1,2 --modes colocated --policies vllm --dry-run >"$T/plan" 2>"$T/err" ||
	fail "plan --pp --ep: $(cat "$T/err")"
grep -q "tp=2 pp=2 instances=1" "$T/plan" && grep -q "tp=2 ep=2 instances=2" "$T/plan" &&
	grep -q "tp=2 pp=2 ep=2 instances=1" "$T/plan" && grep -q "tp=2 dp-attention=2 instances=2" "$T/plan" &&
	! grep -q "pp=2 ep=2 dp-attention" "$T/plan" && ! grep -q "pp=2 dp-attention" "$T/plan" &&
	pass "plan --pp with --ep: pipelines of expert-parallel stages searched, of attention ranks left out" ||
	fail "plan --pp --ep: $(cat "$T/plan")"

"$BIN" plan --num-requests 20 --max-gpus 4 --tp 1,2 --pp 1,2 --modes colocated --policies vllm \
	--dry-run >"$T/plan" 2>"$T/err" || fail "plan --pp: $(cat "$T/err")"
grep -q "^9 configurations" "$T/plan" &&   # tp 1: 1-4 instances; tp 1 pp 2, tp 2: 1-2; tp 2 pp 2: 1
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
p = d["pipeline"]
assert len(p["stage_busy_share"]) == 2 and len(p["stage_bubble_share"]) == 2, p
assert 0 < min(p["stage_busy_share"]) and max(p["stage_busy_share"]) <= 1, p
assert min(p["stage_bubble_share"]) == 0, p
PYEOF
"$BIN" run --num-requests 5 --json >"$T/tp.json" || fail "tp --json"
"$PY" -c 'import json, sys; assert "pipeline" not in json.load(open(sys.argv[1]))' "$T/tp.json" &&
	pass "JSON: no pipeline without --pp" || fail "JSON without --pp has a pipeline key"
finish
