#!/bin/sh
# Expert parallelism and data-parallel attention (docs/cost-models.md,
# "Expert parallelism and data-parallel attention"): bad layouts are one
# line and exit 2; --ep 1 --dp-attention 1 is the run without them, byte
# for byte; 2 instances of TP 4 with 4 attention ranks count 8 GPUs and
# 8 GPUs' price; disaggregated pools take their own layout.
. "$(dirname "$0")/cli-lib.sh"

expect_error 2 "^servesim: --ep 3: expected a divisor of --tp 8$" -- \
	run --model qwen3-30b-a3b --tp 8 --ep 3 --num-requests 5
expect_error 2 "^servesim: --dp-attention 3: expected a divisor of --tp 4$" -- \
	run --model qwen3-30b-a3b --tp 4 --dp-attention 3 --num-requests 5
expect_error 2 "^servesim: --ep 2: expert parallelism needs a mixture-of-experts model; llama-3.1-8b is dense$" -- \
	run --model llama-3.1-8b --tp 2 --ep 2 --num-requests 5
expect_error 2 "^servesim: --dp-attention 2: data-parallel attention is modelled for mixture-of-experts models only" -- \
	run --model llama-3.1-8b --tp 2 --dp-attention 2 --num-requests 5
expect_error 2 "^servesim: --ep 16: expected a divisor of the 8 experts of mixtral-8x7b$" -- \
	run --model mixtral-8x7b --tp 16 --ep 16 --num-requests 5
expect_error 2 "^servesim: --decode-ep 8: expected a divisor of --decode-tp 4$" -- \
	run --model qwen3-30b-a3b --tp 8 --ep 8 --prefill-instances 1 --decode-instances 1 \
	--decode-tp 4 --decode-ep 8 --num-requests 5
expect_error 2 "^servesim: --cost-model fit: expert parallelism and data-parallel attention are priced by the roofline, table and scaled models only$" -- \
	run --model qwen3-30b-a3b --tp 2 --ep 2 --cost-model fit --num-requests 5

# attention ranks step in lock-step, one step at a time: multi-step
# scheduling is refused with DP attention
printf '%s\n' '{"engines": [{"name": "k4", "versions": "test", "source": "test", "scheduler_steps": 4}]}' \
	>"$T/k4.json"
expect_error 2 "^servesim: --dp-attention with engine k4's multi-step scheduling \(scheduler_steps=4\): not modelled$" -- \
	run --model qwen3-30b-a3b --tp 2 --ep 2 --dp-attention 2 --engine-catalog "$T/k4.json" \
	--engine k4 --num-requests 5

# TensorRT-LLM's attention-DP balancer as a profile setting: named in the
# run's engine description; a bad value is the catalog file's error
printf '%s\n' '{"engines": [{"name": "bal", "versions": "test", "source": "test", "attention_dp_balance": true, "attention_dp_timeout_iters": 5}]}' \
	>"$T/bal.json"
"$BIN" run --model qwen3-30b-a3b --tp 2 --ep 2 --dp-attention 2 --engine-catalog "$T/bal.json" \
	--engine bal --num-requests 20 --json >"$T/bal.out" || fail "balanced dp run"
grep -q '"engine": "[^"]*attention_dp_balance=1 timeout_iters=5 batching_wait_iters=0' "$T/bal.out" &&
	pass "the balancer is named in summary.json" || fail "balancer not in: $(grep '"engine"' "$T/bal.out")"
printf '%s\n' '{"engines": [{"name": "bal", "versions": "test", "source": "test", "attention_dp_timeout_iters": -1}]}' \
	>"$T/badbal.json"
expect_error 1 "badbal.json.*attention_dp_timeout_iters.*expected 0\.\.1000000" -- \
	run --model qwen3-30b-a3b --engine-catalog "$T/badbal.json" --num-requests 5

"$BIN" run --model qwen3-30b-a3b --tp 2 --num-requests 40 --json >"$T/a.json" || fail "tp 2 run"
"$BIN" run --model qwen3-30b-a3b --tp 2 --ep 1 --dp-attention 1 --num-requests 40 --json \
	>"$T/b.json" || fail "tp 2 ep 1 dp 1 run"
cmp -s "$T/a.json" "$T/b.json" && pass "--ep 1 --dp-attention 1 is the TP run byte for byte" ||
	fail "--ep 1 --dp-attention 1 changed the results"

"$BIN" run --model qwen3-30b-a3b --tp 4 --ep 4 --dp-attention 4 --instances 2 --num-requests 80 \
	--json >"$T/dp.json" || fail "dp run"
"$BIN" run --model qwen3-30b-a3b --tp 4 --ep 4 --dp-attention 4 --instances 2 --num-requests 10 \
	>"$T/dp.txt" || fail "dp text run"
grep -q "expert parallelism 4, data-parallel attention 4: 4 attention ranks of 1 GPU per instance" \
	"$T/dp.txt" && pass "the summary states the layout" || fail "layout line: $(cat "$T/dp.txt")"
"$BIN" run --model qwen3-30b-a3b --tp 4 --ep 4 --dp-attention 2 --prefill-instances 1 \
	--decode-instances 1 --decode-dp-attention 4 --num-requests 40 --json >"$T/pd.json" ||
	fail "disaggregated dp run"
# plan: --ep and --dp-attention lists; layouts a model cannot run are skipped
"$BIN" plan --model qwen3-30b-a3b --tp 1,2,4 --ep 1,4 --dp-attention 1,2 --instances 1 \
	--modes colocated --num-requests 50 --dry-run >"$T/plan.txt" 2>&1 || fail "plan dry run"
grep -q "^7 configurations" "$T/plan.txt" &&
	grep -q "^6 colocated gpu=h100-sxm tp=4 ep=4 dp-attention=2 instances=1 policy=vllm$" "$T/plan.txt" &&
	grep -q "^1 colocated gpu=h100-sxm tp=2 instances=1 policy=vllm$" "$T/plan.txt" &&
	! grep -q "tp=2 ep=4\|tp=1 .*dp-attention" "$T/plan.txt" &&
	pass "plan: 7 of the 12 tp x ep x dp combinations, named in the keys" ||
	fail "plan keys: $(cat "$T/plan.txt")"
"$BIN" plan --model llama-3.1-8b --tp 1,2 --ep 1,2 --instances 1 --modes colocated \
	--num-requests 50 --dry-run >"$T/plan2.txt" 2>&1 || fail "plan dense dry run"
grep -q "^2 configurations" "$T/plan2.txt" && pass "plan: a dense model skips --ep 2" ||
	fail "plan dense: $(cat "$T/plan2.txt")"
"$BIN" plan --model qwen3-30b-a3b --tp 4 --ep 1,4 --dp-attention 1,4 --instances 1 \
	--modes colocated --num-requests 60 --max-probes 2 >"$T/plan3.txt" 2>&1 || fail "plan run"
grep -q " 4,ep4,dp4 " "$T/plan3.txt" && pass "plan output labels the layout" ||
	fail "plan labels: $(cat "$T/plan3.txt")"

PY=$(command -v python3) || { echo "skip rest: python3 not found"; finish; }
"$PY" - "$T/dp.json" "$T/pd.json" <<'PYEOF' && pass "DP attention: 8 GPUs, 8 ranks, 8 GPUs' price; pools 8 GPUs" || fail "GPU counting with DP attention"
import json, sys
d, p = (json.load(open(f)) for f in sys.argv[1:3])
assert d["requests_completed"] == 80, d["requests_completed"]
assert d["gpus"] == 8, d["gpus"]
assert d["instances"] == 2, d["instances"]           # as deployed: 2 instances of 4 ranks
assert d["attention_dp_ranks_per_instance"] == 4, d
# qwen3-30b-a3b on one H100 per rank: every rank holds the same number of blocks
assert d["kv_blocks_per_instance"] % 4 == 0, d["kv_blocks_per_instance"]
assert abs(d["cost"]["usd_per_hour"] - 8 * 3.78) < 1e-9, d["cost"]
assert d["config"]["ep"] == 4 and d["config"]["dp_attention"] == 4, d["config"]
assert p["requests_completed"] == 40 and p["gpus"] == 8, (p["requests_completed"], p["gpus"])
assert p["config"]["decode_dp_attention"] == 4, p["config"]
PYEOF
finish
