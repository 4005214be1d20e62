# scripts/gpu-check.sh end to end on the CPU backend at tiny sizes
# (GPU_CHECK_BACKEND=cpu, programs from the build directory): every step
# runs, report.json has the agreed structure, and a conformance program
# that fails makes the check exit 1 with the failure counted.
. "$(dirname "$0")/cli-lib.sh"
SCRIPT=$(dirname "$0")/../scripts/gpu-check.sh
BUILD=$(dirname "$BIN")
if [ "${SERVESIM_VALGRIND:-}" = 1 ]; then
	echo "skipped under valgrind (the check runs servesim itself)"
	exit 77
fi

sh -n "$SCRIPT" && pass "sh -n gpu-check.sh" || fail "sh -n gpu-check.sh"
if command -v dash >/dev/null; then
	dash -n "$SCRIPT" && pass "dash -n gpu-check.sh" || fail "dash -n gpu-check.sh"
fi

# report.json against its structure: python3 prints what is missing or wrong
check_report() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
want_conf = sys.argv[2]
bad = []
names = [s["name"] for s in r["steps"]]
if names != ["device", "conformance", "shapes", "graphs", "calibrate", "kernel-class", "live",
             "sim", "compare"]:
    bad.append("steps %s" % names)
for s in r["steps"]:
    if not isinstance(s["seconds"], int) or s["seconds"] < 0:
        bad.append("step %s seconds %r" % (s["name"], s["seconds"]))
if r["device"]["backend"] != "cpu" or r["device"]["catalog_gpu"] != "cpu":
    bad.append("device %r" % r["device"])
if not r["device"]["backend_device"]:
    bad.append("no backend device line")
c = r["conformance"]
if want_conf == "pass":
    if not (c["passed"] and c["test_kernels"]["failed"] == 0 and c["test_kernels"]["checks"] > 0
            and c["shapes"]["failed"] == 0 and c["shapes"]["checks"] > 10
            and c["graphs"]["failed"] == 0 and c["graphs"]["checks"] > 0):
        bad.append("conformance %r" % c)
    if r["status"] != "ok" or [s for s in r["steps"]
                               if s["name"] not in ("device", "kernel-class") and s["status"] != "ok"]:
        bad.append("status %s, steps %r" % (r["status"], r["steps"]))
    rows = r["calibration"]["rows"]
    for op in ("gemm", "attn_prefill", "attn_decode"):
        if rows.get(op, 0) < 1:
            bad.append("calibration rows %r" % rows)
    for k in ("ttft_ms", "tpot_ms"):
        t = r["live_vs_sim"].get(k)
        if not t or not t["p50"]["reference"] > 0 or not t["p50"]["other"] > 0:
            bad.append("%s %r" % (k, t))
    if not r["live_vs_sim"].get("throughput"):
        bad.append("no throughput")
    if "live" not in r["energy"]:
        bad.append("no energy")
else:
    if c["passed"] or c["test_kernels"]["failed"] != 3 or c["test_kernels"]["checks"] != 10:
        bad.append("forced failure not counted: %r" % c["test_kernels"])
    if r["status"] != "conformance failed":
        bad.append("status %s" % r["status"])
print("; ".join(bad))
EOF
}

# The whole check on the CPU backend.
if GPU_CHECK_BACKEND=cpu GPU_CHECK_BUILD="$BUILD" SERVESIM_POWERCAP_ROOT="$T/none" \
	sh "$SCRIPT" "$T/out" >"$T/stdout" 2>"$T/stderr"; then
	pass "gpu-check on the CPU exits 0"
else
	fail "gpu-check on the CPU exited $?: $(tail -5 "$T/stderr") $(cat "$T/out/steps.tsv")"
fi
for f in report.txt report.json cal.db steps.tsv live/summary.json sim/summary.json compare.json; do
	[ -s "$T/out/$f" ] || fail "gpu-check wrote no $f"
done
bad=$(check_report "$T/out/report.json" pass 2>&1)
[ -z "$bad" ] && pass "report.json: every step ok, counts, rows, live and simulated figures" ||
	fail "report.json: $bad"
grep -q "^conformance: pass" "$T/out/report.txt" && pass "report.txt states conformance" ||
	fail "report.txt: $(cat "$T/out/report.txt")"

# From a bundle (the layout scripts/gpu-bundle.sh writes: the script as
# gpu-check.sh beside env.sh, bin/, lib/servesim/, tests/, share/), with a
# conformance program that fails (3 of 10 checks, as check(1) reports
# them): exit 1, counted, the later steps still run.
G=$T/bundle
mkdir -p "$G/bin" "$G/lib/servesim" "$G/tests" "$G/share/servesim"
cp "$SCRIPT" "$G/gpu-check.sh"
ln -s "$BUILD/servesim" "$G/bin/servesim"
ln -s "$BUILD/servesim-cpu.so" "$G/lib/servesim/servesim-cpu.so"
ln -s "$BUILD/tests/test-kernel-shapes" "$G/tests/test-kernel-shapes"
ln -s "$BUILD/tests/test-graph" "$G/tests/test-graph"
ln -s "$SERVESIM_DATA" "$G/share/servesim/data"
printf 'G=%s\nexport SERVESIM_MODULE_DIR=$G/lib/servesim SERVESIM_DATA=$G/share/servesim/data\n' \
	"$G" >"$G/env.sh"
printf '#!/bin/sh\necho "70%%: Checks: 10, Failures: 2, Errors: 1"\nexit 1\n' >"$G/tests/test-kernels"
chmod +x "$G/tests/test-kernels"
(unset SERVESIM_MODULE_DIR; GPU_CHECK_BACKEND=cpu SERVESIM_POWERCAP_ROOT="$T/none" \
	sh "$G/gpu-check.sh" "$T/bad" >"$T/stdout" 2>"$T/stderr")
rc=$?
[ $rc -eq 1 ] && pass "a conformance failure exits 1" ||
	fail "a conformance failure exited $rc: $(tail -3 "$T/stderr")"
bad=$(check_report "$T/bad/report.json" fail 2>&1)
[ -z "$bad" ] && pass "report.json counts the forced failure" || fail "report.json: $bad"
grep -q "programs\": \"bundle $G\"" "$T/bad/report.json" && pass "the bundle's programs ran" ||
	fail "report.json: $(grep programs "$T/bad/report.json")"
grep -q "calibrate	ok" "$T/bad/steps.tsv" && pass "later steps run after a conformance failure" ||
	fail "steps: $(cat "$T/bad/steps.tsv")"

# Bad invocations: usage, an unknown backend.
sh "$SCRIPT" >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "usage" "$T/err" && pass "no OUTDIR: usage, exit 2" || fail "no OUTDIR: $(cat "$T/err")"
GPU_CHECK_BACKEND=tpu GPU_CHECK_BUILD="$BUILD" sh "$SCRIPT" "$T/x" >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "GPU_CHECK_BACKEND: expected cuda or cpu" "$T/err" &&
	pass "bad GPU_CHECK_BACKEND: exit 2" || fail "bad GPU_CHECK_BACKEND: $(cat "$T/err")"
finish
