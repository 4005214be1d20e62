# scripts/kernel-class.py, the GPU check's "kernel class" step: measured
# points against the shipped H100 tables scaled to the measured GPU by the
# roofline, with hand-computed ratios.
. "$(dirname "$0")/cli-lib.sh"
KC=$(dirname "$0")/../scripts/kernel-class.py
DATA=${SERVESIM_DATA:?}

# A store of three "h200-sxm" points.  The shipped H100 rows at these
# shapes (vLLM's FA3, aiconfigurator): decode batch 1 at KV 4096, 32/8
# heads of 128: 0.0168746672570705 ms; prefill of 1024 tokens: 0.0355199997623762 ms.
#  - decode moves 16.8 MB for 67 MFLOP: memory-bound on both GPUs, so the
#    H200 should take 3.35/4.8 of the H100's time = 0.011777 ms; measured
#    1.2x that.
#  - prefill: 8.60 GFLOP against 21.0 MB: compute-bound on both (the
#    same 989.4 TFLOPS), expected the H100's time; measured 3x that.
#  - a GEMM at a shape the tables do not have: not matched.
python3 - "$T/m.db" <<'PY' || fail "building the store"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE measurements (op, device, variant, m, n, k, batch, q_len, kv_len, "
           "heads, kv_heads, head_dim, median_ms, mean_ms)")
rows = [("attn_decode", None, None, None, 1, 1, 4096, 32, 8, 128,
         0.0168746672570705 * 3.35 / 4.8 * 1.2),
        ("attn_prefill", None, None, None, 1, 1024, 0, 32, 8, 128, 0.0355199997623762 * 3),
        ("gemm", 3, 5, 7, None, None, None, None, None, None, 0.01)]
for r in rows:
    db.execute("INSERT INTO measurements VALUES (?, 'h200-sxm', 'servesim', ?, ?, ?, ?, ?, ?, "
               "?, ?, ?, ?, NULL)", r)
db.commit()
PY
python3 "$KC" "$T/m.db" h200-sxm "$DATA/calibration.db" h100-sxm "$DATA/gpus.json" \
	"$T/kc.json" >"$T/out" 2>"$T/err" && pass "kernel-class runs" ||
	fail "kernel-class: $(cat "$T/err")"
python3 - "$T/kc.json" <<'PY' && pass "ratios: decode 1.2 (bandwidth-scaled), prefill 3.0 (compute-scaled), GEMM unmatched" || fail "kc.json: $(cat "$T/kc.json")"
import json, sys
o = json.load(open(sys.argv[1]))["ops"]
d, p, g = o["attn_decode"], o["attn_prefill"], o["gemm"]
assert d["n"] == 1 and abs(d["median"] - 1.2) < 1e-9 and d["target"] == 1.5, d
assert abs(d["worst"][0]["expected_ms"] - 0.0168746672570705 * 3.35 / 4.8) < 1e-12, d
assert d["worst"][0]["reference_kernel"] == "vllm_flash_attn_fa3", d
assert p["n"] == 1 and abs(p["median"] - 3.0) < 1e-9 and p["within_target"] == 0, p
assert g["n"] == 0 and g["measured_points"] == 1, g
PY
grep -q "attn_decode .*target <= 1.50: met" "$T/out" && grep -q "attn_prefill .*MISSED" "$T/out" &&
	grep -q "gemm .*no shape measured" "$T/out" && pass "the text names met and missed targets" ||
	fail "text: $(cat "$T/out")"

# Failures: a GPU the catalog lacks (1), a missing store (1), usage (2).
python3 "$KC" "$T/m.db" h900 "$DATA/calibration.db" h100-sxm "$DATA/gpus.json" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "gpus.json: no GPU named h900" "$T/err" && pass "unknown GPU: exit 1" ||
	fail "unknown GPU: $(cat "$T/err")"
python3 "$KC" "$T/none.db" h200-sxm "$DATA/calibration.db" h100-sxm "$DATA/gpus.json" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "kernel-class: " "$T/err" && pass "missing store: exit 1" ||
	fail "missing store: $(cat "$T/err")"
python3 "$KC" "$T/m.db" >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q usage "$T/err" && pass "usage: exit 2" || fail "usage: $(cat "$T/err")"
finish
