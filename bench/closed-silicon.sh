#!/bin/sh
# closed-silicon.sh [SERVESIM] [BACKEND] [TP]: the aiconfigurator silicon
# table's closed-loop rows (../shared/data/serving/aiconfigurator_silicon;
# batch_size = client concurrency, fixed isl/osl) for Llama-3.1-8B-Instruct
# on h100_sxm, colocated, re-run with `servesim run --concurrency B
# --lengths fixed:prompt=ISL,output=OSL --num-requests 5B` and printed with
# the measured mean TPOT and TTFT beside the simulated ones, and the TPOT
# MAPE.  Measured, never judged: servesim's default engine and cost model,
# nothing fitted to these rows (fitting is `calibrate fit-engine`'s).
# Defaults: BACKEND trtllm, TP 1.
BIN=${1:-build/servesim}
BACKEND=${2:-trtllm}
TP=${3:-1}
SRC=$(cd "$(dirname "$0")/.." && pwd)
CSV=${SERVESIM_SHARED_DATA:-$SRC/../shared/data}/serving/aiconfigurator_silicon/silicon_sample_excl_h200.csv
[ -r "$CSV" ] || { echo "closed-silicon: no $CSV" >&2; exit 1; }
python3 - "$BIN" "$CSV" "$BACKEND" "$TP" <<'EOF'
import csv, json, subprocess, sys
bin_, path, backend, tp = sys.argv[1:5]
rows = [r for r in csv.DictReader(open(path))
        if r["model_path"] == "meta-llama/Llama-3.1-8B-Instruct" and r["system"] == "h100_sxm"
        and r["mode"] == "agg" and r["backend"] == backend and r["tp_size"] == tp]
if not rows:
    sys.exit("closed-silicon: no rows for backend %s tp %s" % (backend, tp))
print("%5s %4s %4s | %9s %9s %7s | %9s %9s" % ("isl", "osl", "B", "TPOT meas", "sim", "err", "TTFT meas", "sim"))
errs = []
for r in sorted(rows, key=lambda r: (int(r["isl"]), int(r["osl"]), int(r["batch_size"]))):
    b, isl, osl = int(r["batch_size"]), int(r["isl"]), int(r["osl"])
    out = subprocess.run([bin_, "run", "--tp", tp, "--concurrency", str(b),
                          "--lengths", "fixed:prompt=%d,output=%d" % (isl, osl),
                          "--num-requests", str(5 * b), "--json"],
                         capture_output=True, text=True, check=True)
    d = json.loads(out.stdout)
    tpot, ttft = d["tpot_ms"]["mean"], d["ttft_ms"]["mean"]
    mt, mf = float(r["silicon_tpot_ms"]), float(r["silicon_ttft_ms"])
    errs.append(abs(tpot - mt) / mt)
    print("%5d %4d %4d | %9.2f %9.2f %+6.1f%% | %9.1f %9.1f" %
          (isl, osl, b, mt, tpot, 100 * (tpot - mt) / mt, mf, ttft))
print("TPOT MAPE %.1f%% over %d rows (%s, tp %s)" % (100 * sum(errs) / len(errs), len(errs), backend, tp))
EOF
