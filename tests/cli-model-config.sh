# --model-config: a dense model read from its Hugging Face config.json runs
# exactly as the same model from the catalog; MoE, MLA, sliding-window and
# chunked attention run (roofline), and calibrate run, whose synthetic
# model is dense with full attention, refuses them with one line; a
# malformed config is one line naming the file and the key, exit 1.
. "$(dirname "$0")/cli-lib.sh"
D=$(cd "$(dirname "$0")" && pwd)/data/models

# bit for bit: Llama-3.1-8B's config.json against the catalog entry
"$BIN" run --num-requests 300 --seed 3 >"$T/cat.txt" 2>&1 &&
	"$BIN" run --num-requests 300 --seed 3 --model llama-3.1-8b --model-config "$D/llama-3.1-8b.json" \
		>"$T/cfg.txt" 2>&1 && cmp -s "$T/cat.txt" "$T/cfg.txt" &&
	pass "llama-3.1-8b from config.json = from the catalog (run)" ||
	fail "llama-3.1-8b from config.json differs from the catalog: $(diff "$T/cat.txt" "$T/cfg.txt" | head -5)"
"$BIN" plan --num-requests 200 --tp 1,2 --max-gpus 2 --modes colocated >"$T/pcat.txt" 2>&1 &&
	"$BIN" plan --num-requests 200 --tp 1,2 --max-gpus 2 --modes colocated --model llama-3.1-8b \
		--model-config "$D/llama-3.1-8b.json" >"$T/pcfg.txt" 2>&1 && cmp -s "$T/pcat.txt" "$T/pcfg.txt" &&
	pass "llama-3.1-8b from config.json = from the catalog (plan)" ||
	fail "plan differs: $(diff "$T/pcat.txt" "$T/pcfg.txt" | head -5)"
# without --model the model is named after the file; dense configs run
for f in qwen3-8b phi-3.5-mini qwen2.5-7b; do
	"$BIN" run --num-requests 20 --model-config "$D/$f.json" >"$T/out" 2>"$T/err" &&
		grep -q "$f" "$T/out" && pass "$f from config.json runs" || fail "$f: $(cat "$T/err")"
done

# MoE (tensor-parallel experts), MLA, sliding windows, chunks and sinks are
# priced; what stays refused is one line, exit 1
"$BIN" run --model-config "$D/qwen3-30b-a3b.json" --num-requests 5 >"$T/out" 2>"$T/err" &&
	grep -q "qwen3-30b-a3b" "$T/out" && pass "qwen3-30b-a3b (MoE) from config.json runs" ||
	fail "qwen3-30b-a3b: $(cat "$T/err")"
"$BIN" run --model deepseek-v3 --gpu b200 --tp 8 --weight-dtype fp8 --num-requests 5 >"$T/out" 2>"$T/err" &&
	grep -q "deepseek-v3" "$T/out" && pass "deepseek-v3 (MoE + MLA) runs on 8 x b200 in fp8" ||
	fail "deepseek-v3: $(cat "$T/err")"
"$BIN" plan --model gpt-oss-120b --gpus h100-sxm --tp 2,4 --num-requests 20 --modes colocated \
	>"$T/out" 2>"$T/err" && grep -q "gpt-oss-120b" "$T/out" &&
	pass "plan prices gpt-oss-120b (MoE + sliding window + sinks)" || fail "gpt-oss-120b plan: $(cat "$T/err")"
"$BIN" run --model mixtral-8x7b --tp 2 --num-requests 5 >"$T/out" 2>"$T/err" &&
	pass "mixtral-8x7b (MoE) runs at tp 2" || fail "mixtral-8x7b: $(cat "$T/err")"
for a in "--model gemma-3-27b" "--model-config $D/mistral-7b-v0.1.json" "--model llama-4-scout --tp 4"; do
	# shellcheck disable=SC2086
	"$BIN" run $a --num-requests 5 >"$T/out" 2>"$T/err" &&
		pass "local attention runs: $a" || fail "$a: $(cat "$T/err")"
done
# the table model: measured GEMMs, the roofline's attention (sliding
# window) for Gemma 3; MLA's GEMMs and attention from the roofline
if PY=$(command -v python3); then
	"$BIN" run --model gemma-3-27b --cost-model table --num-requests 10 --json >"$T/g.json" 2>"$T/err" &&
		"$BIN" run --model deepseek-v3 --tp 8 --weight-dtype fp4 --cost-model table --num-requests 10 \
			--json >"$T/d.json" 2>>"$T/err" &&
		"$PY" - "$T/g.json" "$T/d.json" <<'PYEOF' && pass "table: local and MLA attention from its roofline" || fail "table backends: $(cat "$T/err")"
import json, sys
g, d = (json.load(open(p))["cost_model"]["operators"] for p in sys.argv[1:3])
assert g["attn_decode"] == g["attn_prefill"] == "roofline" and g["gemm"] == "table", g
assert d["attn_decode"] == d["attn_prefill"] == d["gemm"] == d["elementwise"] == "roofline", d
PYEOF
fi
# --kv-ref-tokens: a local-attention model's pool sized at shorter requests
# holds fewer blocks (each token carries more of the window layers' bytes);
# a full-attention model's pool does not change
if PY=$(command -v python3); then
	for a in "gemma-3-27b" "gemma-3-27b --kv-ref-tokens 8192" "llama-3.1-8b" "llama-3.1-8b --kv-ref-tokens 8192"; do
		# shellcheck disable=SC2086
		"$BIN" run --model $a --num-requests 2 --json 2>"$T/err" |
			"$PY" -c 'import json,sys; print(json.load(sys.stdin)["kv_blocks_per_instance"])' >>"$T/ref.txt" ||
			fail "--kv-ref-tokens $a: $(cat "$T/err")"
	done
	"$PY" - "$T/ref.txt" <<'PYEOF' && pass "--kv-ref-tokens sizes local-attention KV only" || fail "--kv-ref-tokens: $(cat "$T/ref.txt")"
import sys
g, g8, l, l8 = (int(x) for x in open(sys.argv[1]).read().split())
# 8192 x (10 x 8192 + 52 x 1040) / 8192 = 136,000 B a token against
# 8192 x (10 x 131072 + 52 x 1040) / 131072 = 85,300: 0.627 of the blocks
assert abs(g8 / g - 85300 / 136000) < 0.001, (g, g8)
assert l == l8, (l, l8)
PYEOF
fi
expect_error 1 "^servesim: gemma-3-27b: calibrate run measures full-attention models only; sliding-window attention is priced by the roofline$" -- \
	calibrate run --model gemma-3-27b --store "$T/cal.db"
[ ! -e "$T/cal.db" ] && pass "calibrate run refused before creating its store" || fail "calibrate run left $T/cal.db"
"$BIN" run --model gemma-3-27b --cost-model fit --num-requests 5 >/dev/null 2>"$T/err"
grep -q "^servesim: --cost-model fit: gemma-3-27b: sliding-window attention is not modelled by this cost model yet" "$T/err" &&
	pass "--cost-model fit refuses sliding-window attention" || fail "fit: $(cat "$T/err")"

expect_error 1 "^servesim: gpt-oss-20b: calibrate run measures dense models only" -- \
	calibrate run --model-config "$D/gpt-oss-20b.json" --store "$T/cal.db"
# calibrate run measures a dense model from its config under the config's name
"$BIN" calibrate run --model-config "$D/qwen3-8b.json" --store "$T/q.db" --max-tokens 16 --max-kv 16 \
	--repeats 1 --warmup 0 --width-div 64 --layers 1 >"$T/out" 2>"$T/err" &&
	"$BIN" calibrate list --store "$T/q.db" | grep -q "servesim-cpu:qwen3-8b" &&
	pass "calibrate run --model-config measures qwen3-8b" || fail "calibrate run --model-config: $(cat "$T/err")"

# calibrate fit-engine: the config's model predicts the runs as the catalog's does
S=$(cd "$(dirname "$0")" && pwd)/data/serving/vllm-bench.json
"$BIN" calibrate fit-engine --no-fit --model llama-3.1-8b --gpu h100-sxm "$S" >"$T/fa.txt" 2>&1 &&
	"$BIN" calibrate fit-engine --no-fit --model llama-3.1-8b --model-config "$D/llama-3.1-8b.json" \
		--gpu h100-sxm "$S" >"$T/fb.txt" 2>&1 && cmp -s "$T/fa.txt" "$T/fb.txt" &&
	pass "fit-engine --model-config = --model (dense)" || fail "fit-engine --model-config: $(diff "$T/fa.txt" "$T/fb.txt" | head -5)"
"$BIN" calibrate fit-engine --no-fit --model-config "$D/gpt-oss-20b.json" --gpu h100-sxm "$S" \
	>"$T/out" 2>"$T/err" && grep -q "gpt-oss-20b tp1 vllm *tpot_p50" "$T/out" &&
	pass "fit-engine replays a run as gpt-oss-20b (MoE, sliding window, sinks)" ||
	fail "fit-engine gpt-oss-20b: $(cat "$T/err")"

# malformed configs: one line naming the file and the key
printf '{"model_type": "mamba", "hidden_size": 64}\n' >"$T/mamba.json"
expect_error 1 "^servesim: $T/mamba.json: key \"model_type\" is \"mamba\", expected one of llama, " -- \
	run --model-config "$T/mamba.json"
printf '{"model_type": "llama", "hidden_size": 64}\n' >"$T/nolayers.json"
expect_error 1 "^servesim: $T/nolayers.json: missing key \"num_hidden_layers\", expected an integer" -- \
	plan --model-config "$T/nolayers.json"
printf '{"model_type": "llama",\n "hidden_size": 64,,\n}\n' >"$T/bad.json"
expect_error 1 "^servesim: $T/bad.json:2: invalid JSON" -- run --model-config "$T/bad.json"
expect_error 1 "^servesim: $T/none.json: cannot open" -- run --model-config "$T/none.json"
expect_error 1 "bad name \"Llama 8B\"" -- run --model "Llama 8B" --model-config "$D/llama-3.1-8b.json"

# A quantized checkpoint's quantization_config sets the weights a run
# prices without --weight-dtype: compressed-tensors FP8 (RedHatAI's
# FP8-dynamic checkpoints) as fp8; integer AWQ weights are not priced
# (the model's 16-bit dtype), and --weight-dtype still wins
if [ -n "${PY:-}" ]; then
"$PY" - "$D/llama-3.1-8b.json" "$T" <<'EOF2' || fail "writing quantized configs"
import json, sys
d = json.load(open(sys.argv[1]))
d["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
    "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}, "targets": ["Linear"]}}}
json.dump(d, open(sys.argv[2] + "/fp8ckpt.json", "w"))
d["quantization_config"] = {"quant_method": "awq", "bits": 4}
json.dump(d, open(sys.argv[2] + "/awq.json", "w"))
EOF2
"$BIN" run --model-config "$T/fp8ckpt.json" --num-requests 20 >"$T/out" 2>"$T/err" &&
	grep -q "weights fp8 (the model's checkpoint), KV in the model's dtype" "$T/out" &&
	"$BIN" run --model-config "$T/fp8ckpt.json" --weight-dtype bf16 --num-requests 20 >"$T/out2" 2>"$T/err" &&
	grep -q "weights bf16, KV" "$T/out2" &&
	"$BIN" run --model-config "$T/awq.json" --num-requests 20 >"$T/out3" 2>"$T/err" &&
	! grep -q "weights " "$T/out3" &&
	pass "a checkpoint's FP8 quantization_config is its default weights; AWQ is not priced" ||
	fail "checkpoint dtype: $(cat "$T/err") $(grep weights "$T/out" "$T/out2" "$T/out3")"
fi
"$BIN" run --model gpt-oss-120b --gpu h100-sxm --num-requests 20 >"$T/out" 2>"$T/err" &&
	grep -q "weights fp4 (the model's checkpoint; weight-only W4A16 on h100-sxm)" "$T/out" &&
	pass "gpt-oss-120b runs on one H100 at its MXFP4 checkpoint" ||
	fail "gpt-oss-120b on one H100: $(cat "$T/err")"

# list models: the new columns
"$BIN" list models >"$T/list" && grep -E -q "^deepseek-v3 .* 256/8\+1 +mla " "$T/list" &&
	grep -E -q "^gpt-oss-120b .* 128/4 gqa\+swa\+sinks " "$T/list" &&
	grep -E -q "^llama-3.1-8b .* - +gqa " "$T/list" && pass "list models: experts and attn columns" ||
	fail "list models: $(grep -E 'deepseek|gpt-oss-120b' "$T/list")"
finish
