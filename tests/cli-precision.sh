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
# (live --kv-dtype fp8 runs: tests/cli-live.sh)
expect_error 1 "^servesim: --weight-dtype fp8: live runs compute with bf16 weights only" -- \
	live --weight-dtype fp8 --num-requests 2
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
# the text summary says the precision; the table prices the fp8 GEMMs from
# the shipped store's measured H100 fp8 GEMMs
"$BIN" run --model qwen3-32b --weight-dtype fp8 --num-requests 20 >"$T/txt" 2>&1 &&
	grep -q "^ *weights fp8, KV in the model's dtype$" "$T/txt" &&
	! grep -q "gemm=roofline" "$T/txt" &&
	pass "summary: the precision and the GEMMs' backend" || fail "summary: $(head -5 "$T/txt")"
"$BIN" run --model qwen3-32b --num-requests 20 | grep -q "weights" &&
	fail "a default run's summary names a precision"
# weight-only where the GPU has no such tensor cores: the summary says so
"$BIN" run --model llama-3.1-8b --gpu a100-80gb-sxm --weight-dtype fp8 --num-requests 10 >"$T/txt" 2>&1 &&
	grep -q "^ *weights fp8 (weight-only W8A16 on a100-80gb-sxm), KV in the model's dtype$" "$T/txt" &&
	"$BIN" run --model llama-3.1-8b --gpu h100-sxm --weight-dtype fp4 --num-requests 10 >"$T/txt" 2>&1 &&
	grep -q "^ *weights fp4 (weight-only W4A16 on h100-sxm), KV in the model's dtype$" "$T/txt" &&
	pass "summary: weight-only fp8 / fp4 named with the GPU" || fail "weight-only summary: $(head -4 "$T/txt")"

# plan: a GPU without fp4 tensor cores runs fp4 weight-only (W4A16)
"$BIN" plan --model llama-3.1-70b --gpus h100-sxm,b200 --tp 4,8 --weight-dtype fp4 --dry-run \
	--num-requests 50 >"$T/plan" 2>&1 &&
	grep -q "^8 configurations (left out: 0 over budget, 0 unpriced, 0 not fitting in memory" "$T/plan" &&
	grep -q "gpu=h100-sxm" "$T/plan" && grep -q "gpu=b200" "$T/plan" &&
	pass "plan --weight-dtype fp4 keeps the H100 (weight-only)" || fail "plan fp4: $(cat "$T/plan")"

# plan: --weight-dtype and --kv-dtype lists are search axes, weight dtype
# outermost; the key, the table, plan.csv and plan.json name the dtypes;
# fp4 on the H100 runs weight-only; bad lists exit 2
"$BIN" plan --model llama-3.1-70b --gpus h100-sxm,b200 --tp 4 --instances 1 --modes colocated \
	--weight-dtype bf16,fp4 --kv-dtype bf16,fp8 --dry-run >"$T/plan" 2>&1 &&
	grep -q "^8 configurations (left out: 0 over budget, 0 unpriced, 0 not fitting in memory" "$T/plan" &&
	grep -q "^0 colocated gpu=h100-sxm tp=4 instances=1 policy=vllm weight=bf16 kv=bf16$" "$T/plan" &&
	grep -q "^1 colocated gpu=b200 tp=4 instances=1 policy=vllm weight=bf16 kv=bf16$" "$T/plan" &&
	grep -q "^3 colocated gpu=b200 tp=4 instances=1 policy=vllm weight=bf16 kv=fp8$" "$T/plan" &&
	grep -q "^6 colocated gpu=h100-sxm tp=4 instances=1 policy=vllm weight=fp4 kv=fp8$" "$T/plan" &&
	grep -q "^7 colocated gpu=b200 tp=4 instances=1 policy=vllm weight=fp4 kv=fp8$" "$T/plan" &&
	pass "plan --weight-dtype bf16,fp4 --kv-dtype bf16,fp8: 2 x 2 axes, fp4 weight-only on the H100" ||
	fail "plan dtype axes: $(cat "$T/plan")"
"$BIN" plan --model llama-3.1-8b --gpus h100-sxm --tp 1 --instances 1 --modes colocated \
	--weight-dtype bf16,fp8 --kv-dtype bf16,fp8 --num-requests 60 --out "$T/pd" >"$T/txt" 2>&1 ||
	fail "plan dtype axes run: $(cat "$T/txt")"
grep -q "weights/KV$" "$T/txt" && grep -q " fp8/fp8$" "$T/txt" ||
	fail "plan text: no weights/KV column: $(cat "$T/txt")"
"$PY" - "$T/pd" <<'PYEOF' && pass "plan dtype axes: plan.json and plan.csv name the dtypes, fp8 serves more" || fail "plan dtype axes: outputs"
import csv, json, os, sys
d = sys.argv[1]
cfg = json.load(open(os.path.join(d, "plan.json")))["configurations"]
rows = list(csv.DictReader(open(os.path.join(d, "plan.csv"))))
want = [("bf16", "bf16"), ("bf16", "fp8"), ("fp8", "bf16"), ("fp8", "fp8")]
assert [(c["weight_dtype"], c["kv_dtype"]) for c in sorted(cfg, key=lambda c: c["index"])] == want, cfg
assert [(r["weight_dtype"], r["kv_dtype"]) for r in sorted(rows, key=lambda r: int(r["index"]))] == want
rate = {(c["weight_dtype"], c["kv_dtype"]): c["max_rate_rps"] for c in cfg}
# fp8 weights and KV: more KV blocks and faster GEMMs, a higher maximum rate
assert rate[("fp8", "fp8")] > rate[("bf16", "bf16")], rate
assert all(c["config"].endswith(" weight=%s kv=%s" % (c["weight_dtype"], c["kv_dtype"])) for c in cfg)
PYEOF
# without lists: no dtype columns in plan.csv (as before)
"$BIN" plan --model llama-3.1-8b --gpus h100-sxm --tp 1 --instances 1 --modes colocated \
	--weight-dtype fp8 --num-requests 40 --out "$T/p1" >/dev/null 2>&1 &&
	head -1 "$T/p1/plan.csv" | grep -q ",decode_gpu,decode_tp,priced_by," &&
	! head -1 "$T/p1/plan.csv" | grep -q "weight_dtype" && ! grep -q "weight=" "$T/p1/plan.csv" &&
	pass "plan --weight-dtype fp8 (one dtype): keys and plan.csv as before" ||
	fail "plan one dtype: $(head -2 "$T/p1/plan.csv")"
expect_error 2 "^servesim: --weight-dtype: expected a list of bf16, fp8 and fp4, got 'int4'$" -- \
	plan --weight-dtype bf16,int4 --dry-run
expect_error 2 "^servesim: --kv-dtype: expected a list of bf16 and fp8, got 'fp4'$" -- \
	plan --kv-dtype bf16,fp4 --dry-run
expect_error 2 "^servesim: --weight-dtype: 'fp8' appears twice$" -- plan --weight-dtype fp8,fp8 --dry-run
expect_error 2 "^servesim: --weight-dtype: expected bf16, fp8 or fp4, got 'bf16,fp8'$" -- \
	run --weight-dtype bf16,fp8 --num-requests 2
finish
