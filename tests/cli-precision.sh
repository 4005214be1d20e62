#!/bin/sh
# --weight-dtype and --kv-dtype (docs/cost-models.md, "Precision"): bad
# values exit 2, what a GPU or the live executor cannot run exits 1 with one
# line, bf16 named explicitly is bit for bit the default run, and fp8
# weights and KV give Qwen3-32B on one H100 more KV blocks and faster steps.
. "$(dirname "$0")/cli-lib.sh"

expect_error 2 "^servesim: --weight-dtype: expected bf16, fp8 or fp4, got 'int4'$" -- \
	run --weight-dtype int4
expect_error 2 "^servesim: --kv-dtype: expected bf16 or fp8, got 'fp4'$" -- run --kv-dtype fp4
expect_error 2 "^servesim: --weight-dtype: expected bf16, fp8 or fp4, got 'x'$" -- \
	plan --weight-dtype x
expect_error 2 "^servesim: --kv-dtype: expected bf16 or fp8, got 'fp4'$" -- \
	calibrate fit-engine --kv-dtype fp4 x.csv
# fp4 on a GPU without fp4 tensor cores: weight-only (W4A16, Marlin)
"$BIN" run --gpu h100-sxm --weight-dtype fp4 --num-requests 5 >"$T/out" 2>"$T/err" &&
	pass "--weight-dtype fp4 runs on h100-sxm (weight-only)" || fail "h100 fp4: $(cat "$T/err")"
expect_error 1 "^servesim: --weight-dtype fp8: live runs compute in bf16 only" -- \
	live --weight-dtype fp8 --num-requests 2
expect_error 1 "^servesim: --kv-dtype fp8: live runs compute in bf16 only" -- \
	live --kv-dtype fp8 --num-requests 2
expect_error 2 "^servesim: --cost-model fit: weights or KV in another dtype than the model's are not modelled yet" -- \
	run --cost-model fit --weight-dtype fp8 --num-requests 5

# bf16 named: the default run, bit for bit (requests and summary, but for
# the two config keys that say it was named)
"$BIN" run --model qwen3-32b --num-requests 60 --out "$T/a" --quiet &&
"$BIN" run --model qwen3-32b --num-requests 60 --weight-dtype bf16 --kv-dtype bf16 --out "$T/b" --quiet ||
	fail "bf16 runs failed"
cmp -s "$T/a/requests.csv" "$T/b/requests.csv" && pass "bf16 named: requests.csv identical" ||
	fail "bf16 named: requests.csv differs"
# (grep ends the file with a newline, summary.json does not: compare lines)
grep -v '"weight_dtype"\|"kv_dtype"' "$T/b/summary.json" >"$T/b.json"
grep '' "$T/a/summary.json" | cmp -s - "$T/b.json" && pass "bf16 named: summary.json identical but for the dtype keys" ||
	fail "bf16 named: summary.json differs: $(diff "$T/a/summary.json" "$T/b.json" | head -5)"
grep -q '"weight_dtype"' "$T/a/summary.json" && fail "a default run's summary names a weight dtype"

# fp8: more KV blocks (hand-checked in tests/test-precision.c) and a lower TPOT
"$BIN" run --model qwen3-32b --num-requests 60 --weight-dtype fp8 --kv-dtype fp8 --json >"$T/f.json" ||
	fail "fp8 run failed"
"$BIN" run --model qwen3-32b --num-requests 60 --json >"$T/d.json"
PY=$(command -v python3) || { echo "skip rest: python3 not found"; finish; }
"$PY" - "$T/d.json" "$T/f.json" <<'PYEOF' && pass "fp8: more KV blocks, lower TPOT, dtypes in the config" || fail "fp8 run not as expected"
import json, sys
d, f = (json.load(open(p)) for p in sys.argv[1:3])
assert f["kv_blocks_per_instance"] > 2 * d["kv_blocks_per_instance"], (d["kv_blocks_per_instance"], f["kv_blocks_per_instance"])
assert f["tpot_ms"]["mean"] < 0.75 * d["tpot_ms"]["mean"], (d["tpot_ms"]["mean"], f["tpot_ms"]["mean"])
assert f["config"]["weight_dtype"] == "fp8" and f["config"]["kv_dtype"] == "fp8"
PYEOF
# the text summary says the precision; the table prices the fp8 GEMMs by its roofline
"$BIN" run --model qwen3-32b --weight-dtype fp8 --num-requests 20 >"$T/txt" 2>&1 &&
	grep -q "^ *weights fp8, KV in the model's dtype$" "$T/txt" &&
	grep -q "operators: gemm=roofline attn_prefill=table attn_decode=table" "$T/txt" &&
	pass "summary: the precision and the GEMMs' backend" || fail "summary: $(head -5 "$T/txt")"
"$BIN" run --model qwen3-32b --num-requests 20 | grep -q "weights" &&
	fail "a default run's summary names a precision"

# plan: a GPU without fp4 tensor cores runs fp4 weight-only (W4A16)
"$BIN" plan --model llama-3.1-70b --gpus h100-sxm,b200 --tp 4,8 --weight-dtype fp4 --dry-run \
	--num-requests 50 >"$T/plan" 2>&1 &&
	grep -q "^8 configurations (left out: 0 over budget, 0 unpriced, 0 not fitting in memory" "$T/plan" &&
	grep -q "gpu=h100-sxm" "$T/plan" && grep -q "gpu=b200" "$T/plan" &&
	pass "plan --weight-dtype fp4 keeps the H100 (weight-only)" || fail "plan fp4: $(cat "$T/plan")"
finish
