#!/bin/sh
# The GPU check (issue 4, section 5; docs/kernels.md, "The CUDA backend"):
# one command for a machine with an NVIDIA GPU (A100/H100/H200 class) and a
# checkout where scripts/setup.sh has run.  It
#
#   1. configures and builds with CUDA into build-gpu/ (-Dcuda=enabled);
#   2. runs the kernel conformance suite on the CUDA backend
#      (build-gpu/tests/test-kernels cuda) and the larger-shape check
#      (kernels/cuda/test/shapes.c: head_dim 128 and 256, Llama-3 GQA);
#   3. runs a short calibration sweep of Llama-3.1-8B's operators on the
#      CUDA backend into $OUT/cuda.db (servesim calibrate run);
#   4. replays a short trace (100 requests of the shipped Azure conversation
#      trace at twice its rate) live on the GPU, simulates the same scenario
#      with the table cost model on that calibration, and compares them;
#   5. prints a compact report (also $OUT/report.txt).
#
# Expected 4-6 minutes on an H100 (the two 8B-parameter synthetic models'
# random weights are drawn on the host: ~20 s each); every step has a time
# limit inside an overall budget of 470 s, so the script ends within 8
# minutes, reporting what it could not finish.  Outputs go under
# ${OUT:-./gpu-out}: step logs, cuda.db, live/, sim/, compare.txt/.json,
# report.txt.  Exit status 0 when every step ran and the conformance checks
# passed.
#
#   sh scripts/gpu-check.sh
#   OUT=/tmp/x GPU=h100-sxm sh scripts/gpu-check.sh   (GPU: the catalog entry
#                                                     to calibrate and simulate)
#
# For testing the script itself: GPU_CHECK_BUILD=DIR uses another build
# directory, GPU_CHECK_NO_BUILD=1 skips configuring and building it,
# GPU_CHECK_BUDGET=S changes the overall budget.
set -u
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 1
cd "$(dirname "$0")/.." || exit 1
BUILD=${GPU_CHECK_BUILD:-build-gpu}
# meson finds the toolkit through nvcc on PATH; a toolkit installed in the
# usual place but not on PATH is added to it.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
	PATH=/usr/local/cuda/bin:$PATH
	export PATH
fi
MODEL=llama-3.1-8b
T0=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-470}
STATUS=0

say() {
	printf '[gpu-check %4ds] %s\n' $(($(date +%s) - T0)) "$*" >&2
}

# step NAME LIMIT RESERVE CMD...: run CMD with output to $OUT/NAME.log for
# at most LIMIT seconds, and never into the last RESERVE seconds of the
# budget (kept for the steps after it); its exit status, 124 when stopped.
step() {
	name=$1 limit=$2 reserve=$3
	shift 3
	left=$((T0 + BUDGET - reserve - $(date +%s)))
	[ "$left" -lt "$limit" ] && limit=$left
	if [ "$limit" -lt 10 ]; then
		say "$name: skipped, out of time"
		echo "skipped: the check's time budget was spent" >"$OUT/$name.log"
		return 124
	fi
	say "$name: $*"
	timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
	rc=$?
	[ $rc -eq 124 ] && say "$name: stopped after ${limit}s"
	[ $rc -eq 0 ] || say "$name: exit $rc (see $OUT/$name.log)"
	return $rc
}

# ---- the GPU and its catalog entry ----
SMI=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
if [ -z "${GPU:-}" ]; then
	case "$SMI" in
	*H200*) GPU=h200-sxm ;;
	*H100*) GPU=h100-sxm ;;
	*A100*80GB*) GPU=a100-80gb-sxm ;;
	*A100*) GPU=a100-40gb-sxm ;;
	*L40S*) GPU=l40s ;;
	*) GPU=h100-sxm
	   say "unrecognized GPU '${SMI:-none found}': calibrating and simulating as h100-sxm (set GPU= to choose)" ;;
	esac
fi
say "GPU: ${SMI:-nvidia-smi not available}; catalog entry $GPU; outputs in $OUT"

# ---- 1. build ----
if [ -z "${GPU_CHECK_NO_BUILD:-}" ]; then
	if [ -f "$BUILD/build.ninja" ]; then
		step build-setup 180 0 meson setup --reconfigure "$BUILD" -Dcuda=enabled -Dtests=enabled
	else
		step build-setup 180 0 meson setup "$BUILD" -Dcuda=enabled -Dtests=enabled
	fi || { say "cannot configure with CUDA"; exit 1; }
	step build 300 0 ninja -C "$BUILD" || { say "build failed"; exit 1; }
	if grep -q "warning:" "$OUT/build.log"; then
		say "build: compiler warnings (see $OUT/build.log)"
	fi
fi
BIN=$BUILD/servesim
# the CUDA backend is the module $BUILD/servesim-cuda.so, which the test
# programs load from here (servesim finds it next to itself)
export SERVESIM_MODULE_DIR="$BUILD"
TB=$(date +%s)

# ---- 2. conformance ----
CONF=FAIL
step conformance 120 300 "$BUILD/tests/test-kernels" cuda
case $? in
0) CONF=pass ;;
77) say "the CUDA backend found no GPU: $(tail -1 "$OUT/conformance.log")"; exit 1 ;;
*) STATUS=1 ;;
esac
SHAPES=FAIL
if [ -x "$BUILD/tests/test-cuda-shapes" ]; then
	step shapes 60 300 "$BUILD/tests/test-cuda-shapes" && SHAPES=pass || STATUS=1
else
	say "shapes check: $BUILD/tests/test-cuda-shapes was not built"
	SHAPES="not built"
	STATUS=1
fi
TC=$(date +%s)

# ---- 3. calibration sweep ----
# Resumable: a rerun with the same $OUT measures only what is missing.
step calibrate 240 150 "$BIN" calibrate run --backend cuda --device "$GPU" --model $MODEL \
	--store "$OUT/cuda.db" --max-tokens 4096 --max-kv 8192 --repeats 5 || STATUS=1
TL=$(date +%s)

# ---- 4. live versus simulated ----
# The same scenario for both: 100 requests of the shipped trace at twice its
# rate (~21 s of arrivals), a KV pool of 4096 blocks of 16 tokens (8.6 GB).
SCENARIO="--trace data/traces/azure_conv_2000.csv --num-requests 100 --rate-scale 2
	--model $MODEL --gpu $GPU --kv-blocks 4096 --block-size 16 --seed 0"
rm -rf "$OUT/live" "$OUT/sim"
# shellcheck disable=SC2086
step live 300 40 "$BIN" live --backend cuda $SCENARIO --out "$OUT/live" || STATUS=1
# shellcheck disable=SC2086
step sim 60 10 "$BIN" run $SCENARIO --cost-model table --calibration "$OUT/cuda.db" \
	--out "$OUT/sim" || STATUS=1
rm -f "$OUT/compare.txt"
if step compare 30 0 "$BIN" compare "$OUT/live" "$OUT/sim" --json "$OUT/compare.json"; then
	cp "$OUT/compare.log" "$OUT/compare.txt"
else
	STATUS=1
fi
TE=$(date +%s)

# ---- 5. report ----
{
	echo "servesim GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
	echo "GPU: ${SMI:-?} (catalog $GPU)"
	echo "times: build $((TB - T0)) s, conformance $((TC - TB)) s, calibration $((TL - TC)) s, live + sim $((TE - TL)) s, total $((TE - T0)) s"
	echo
	echo "conformance (test-kernels cuda): $CONF; $(grep -E '^[0-9]+%: Checks' "$OUT/conformance.log" 2>/dev/null || echo 'no summary')"
	echo "larger shapes (kernels/cuda/test/shapes.c): $SHAPES; $(tail -1 "$OUT/shapes.log" 2>/dev/null)"
	if [ -f "$OUT/cuda.db" ]; then
		python3 - "$OUT/cuda.db" "$GPU" <<'EOF' || echo "(python3 could not read the store)"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
dev = sys.argv[2]
q = lambda sql, *a: db.execute(sql, a).fetchall()
rows = q("SELECT op, COUNT(*) FROM measurements WHERE device = ? GROUP BY op ORDER BY op", dev)
raw = q("SELECT device_raw FROM measurements WHERE device = ? LIMIT 1", dev)
print("calibration: %d points (%s)" % (sum(n for _, n in rows), ", ".join("%s %d" % r for r in rows)))
if raw:
    print("  measured on: %s" % raw[0][0])
names = {}
for n, k in q("SELECT DISTINCT n, k FROM measurements WHERE device = ? AND op = 'gemm'", dev):
    names[(n, k)] = "%dx%d" % (n, k)
print("GEMM at m = 4096 (bf16, cuBLAS):")
for n, k, ms in q("SELECT n, k, median_ms FROM measurements WHERE device = ? AND op = 'gemm' "
                  "AND m = 4096 ORDER BY n * k", dev):
    print("  n %6d  k %5d  %7.3f ms  %6.1f TFLOP/s" % (n, k, ms, 2.0 * 4096 * n * k / (ms * 1e-3) / 1e12))
for b, ql, kv, h, kvh, d, ms in q(
        "SELECT batch, q_len, kv_len, heads, kv_heads, head_dim, median_ms FROM measurements "
        "WHERE device = ? AND op = 'attn_prefill' AND q_len = (SELECT MAX(q_len) FROM measurements "
        "WHERE device = ? AND op = 'attn_prefill') ORDER BY kv_len", dev, dev):
    fl = 4.0 * h * d * ql * (kv + (ql + 1) / 2.0)
    print("prefill attention q %d after %5d: %8.3f ms  %5.1f TFLOP/s" % (ql, kv, ms, fl / (ms * 1e-3) / 1e12))
for b, kv, kvh, d, ms in q(
        "SELECT batch, kv_len, kv_heads, head_dim, median_ms FROM measurements WHERE device = ? "
        "AND op = 'attn_decode' AND batch = (SELECT MAX(batch) FROM measurements WHERE device = ? "
        "AND op = 'attn_decode') ORDER BY kv_len", dev, dev):
    by = 2.0 * 2 * b * kv * kvh * d
    print("decode attention %d x %5d: %8.3f ms  %6.0f GB/s of K and V" % (b, kv, ms, by / (ms * 1e-3) / 1e9))
EOF
	else
		echo "calibration: no store"
	fi
	echo
	echo "live (reference) versus simulated (table cost model on this calibration):"
	if [ -s "$OUT/compare.txt" ]; then
		cat "$OUT/compare.txt"
	else
		echo "(no comparison; see $OUT/live.log, $OUT/sim.log, $OUT/compare.log)"
		for f in live sim compare; do
			[ -f "$OUT/$f.log" ] && echo "  $f: $(tail -1 "$OUT/$f.log")"
		done
	fi
	echo
	echo "status: $([ $STATUS -eq 0 ] && echo ok || echo FAILED)"
} >"$OUT/report.txt" 2>&1
cat "$OUT/report.txt"
exit $STATUS
