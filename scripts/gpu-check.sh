#!/bin/sh
# The GPU check (issue 13, section 2; docs/kernels.md, "On a GPU: the
# bundle and its check"): one command on a machine with an NVIDIA GPU where
# nothing is compiled or installed.  Built here into the bundle by
# scripts/gpu-bundle.sh, which copies this script to .gpu/gpu-check.sh:
#
#   sh .gpu/gpu-check.sh OUTDIR
#
# It sources .gpu/env.sh (the bundle's LD_LIBRARY_PATH, SERVESIM_MODULE_DIR,
# SERVESIM_DATA) and runs, each step with a time limit inside an overall
# budget (GPU_CHECK_BUDGET, default 400 s, so the whole check stays under
# 7 minutes):
#
#   1. device: nvidia-smi's properties, driver and clocks (CSV), and the
#      CUDA backend's own view of its device (test-kernel-shapes prints it);
#   2. conformance of every CUDA kernel against the reference backend:
#      tests/test-kernels cuda, and tests/test-kernel-shapes --full
#      (contexts to 32K, batch 256, head_dim 64/128/256, GQA 1/4/8, block
#      tables with holes and shared blocks, a KV cache over 2^31 elements),
#      and tests/test-graph (decode steps through CUDA graphs against eager);
#   3. a calibration sweep of Llama-3.1-8B's operators and whole steps
#      (servesim calibrate run, resumable: a rerun into the same OUTDIR
#      measures only what is missing), and its attention and GEMM points
#      against the shipped H100 tables scaled to this GPU (kernel-class.py:
#      issue 13's targets, decode within 1.5x, prefill within 2x);
#   4. a short live run (100 requests of the shipped Azure conversation
#      trace at twice its rate), the same scenario simulated with the table
#      cost model on that fresh store, and servesim compare;
#   5. OUTDIR/report.txt and OUTDIR/report.json: the device, each step's
#      status and seconds, conformance counts, calibration rows per
#      operator, live against simulated TTFT/TPOT/throughput, energy.
#
# Exit status: 1 when a conformance check failed or could not run, 3 when
# conformance passed but another step failed or ran out of time, 0 when
# everything ran.  OUTDIR also keeps each step's log, cal.db (the store),
# catalog/, live/, sim/ and compare.json.
#
# Outside the bundle (testing the script): GPU_CHECK_BUILD=DIR runs the
# programs of a build directory of the checkout.  GPU_CHECK_BACKEND=cpu runs
# the same steps on the CPU backend at tiny sizes without nvidia-smi
# (tests/cli-gpu-check.sh).  GPU=NAME names the catalog GPU to calibrate
# and simulate as (default: chosen from nvidia-smi's name).
set -u
if [ $# -ne 1 ] || [ -z "$1" ]; then
	echo "usage: sh gpu-check.sh OUTDIR" >&2
	exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
mkdir -p "$1" && OUT=$(cd "$1" && pwd) || exit 1
BACKEND=${GPU_CHECK_BACKEND:-cuda}
case $BACKEND in
cuda|cpu) ;;
*) echo "GPU_CHECK_BACKEND: expected cuda or cpu, got '$BACKEND'" >&2; exit 2 ;;
esac

# ---- where the programs are: the bundle, else a build directory ----
if [ -f "$HERE/env.sh" ]; then
	# shellcheck disable=SC1091
	. "$HERE/env.sh"
	BIN=$HERE/bin/servesim
	TESTS=$HERE/tests
	WHERE="bundle $HERE"
elif [ -n "${GPU_CHECK_BUILD:-}" ]; then
	B=$(cd "$GPU_CHECK_BUILD" && pwd) || exit 1
	BIN=$B/servesim
	TESTS=$B/tests
	SERVESIM_MODULE_DIR=$B
	: "${SERVESIM_DATA:=$HERE/../data}"
	export SERVESIM_MODULE_DIR SERVESIM_DATA
	WHERE="build directory $B"
else
	echo "gpu-check: no env.sh beside the script (not in a bundle) and no GPU_CHECK_BUILD=DIR" >&2
	exit 2
fi
DATA=${SERVESIM_DATA:-$HERE/share/servesim/data}
[ -x "$BIN" ] || { echo "gpu-check: $BIN is missing" >&2; exit 2; }

T0=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-400}
STEPS=$OUT/steps.tsv
: >"$STEPS"

say() {
	printf '[gpu-check %4ds] %s\n' $(($(date +%s) - T0)) "$*" >&2
}

# step NAME LIMIT RESERVE CMD...: run CMD with its output in $OUT/NAME.log
# for at most LIMIT seconds, and never into the last RESERVE seconds of the
# budget (kept for the steps after it).  Records NAME, its status (ok,
# failed (exit N), timeout, skipped) and seconds in $STEPS; returns CMD's
# exit status, 124 when stopped or skipped.
step() {
	name=$1 limit=$2 reserve=$3
	shift 3
	left=$((T0 + BUDGET - reserve - $(date +%s)))
	[ "$left" -lt "$limit" ] && limit=$left
	if [ "$limit" -lt 5 ]; then
		say "$name: skipped, out of time"
		echo "skipped: the check's time budget was spent" >"$OUT/$name.log"
		printf '%s\tskipped\t0\n' "$name" >>"$STEPS"
		return 124
	fi
	say "$name: $*"
	ts=$(date +%s)
	timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
	rc=$?
	case $rc in
	0) st=ok ;;
	124|137) st=timeout; say "$name: stopped after ${limit}s" ;;
	*) st="failed (exit $rc)"; say "$name: exit $rc (see $OUT/$name.log)" ;;
	esac
	printf '%s\t%s\t%d\n' "$name" "$st" $(($(date +%s) - ts)) >>"$STEPS"
	return $rc
}

# ---- sizes: Llama-3.1-8B on the GPU; a scaled 1B model on the CPU ----
if [ "$BACKEND" = cuda ]; then
	MODEL=llama-3.1-8b
	SHAPES_ARGS="--full"
	# 2 warm-up and 3 timed runs per point; chunks to 2048 tokens (the
	# trace's prompts and vLLM's default chunk), attention to 8K of KV
	CAL_ARGS="--width-div 1 --layers 32 --threads 1 --warmup 2 --repeats 3 --max-tokens 2048 --max-kv 8192"
	LIVE_ARGS="--width-div 1 --layers 32"
	SCENARIO="--trace $DATA/traces/azure_conv_2000.csv --num-requests 100 --rate-scale 2 --kv-blocks 4096 --block-size 16 --seed 0"
else
	MODEL=llama-3.2-1b
	SHAPES_ARGS="--backend cpu"
	CAL_ARGS="--width-div 32 --layers 1 --threads 1 --warmup 1 --repeats 2 --max-tokens 32 --max-kv 64"
	LIVE_ARGS="--width-div 32 --layers 1 --threads 1"
	SCENARIO="--arrival poisson:rate=40 --lengths fixed:prompt=24,output=6 --num-requests 12 --kv-blocks 256 --block-size 16 --seed 0"
	GPU=cpu
fi

# ---- 1. the device ----
SMI_FIELDS=index,name,uuid,pci.bus_id,driver_version,compute_cap,memory.total,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu,persistence_mode
if [ "$BACKEND" = cuda ]; then
	# a driver that does not know one of the fields refuses the whole
	# query: then the fields every driver has
	step device 20 0 nvidia-smi --query-gpu=$SMI_FIELDS --format=csv ||
		nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total \
			--format=csv >"$OUT/device.log" 2>&1
	cp "$OUT/device.log" "$OUT/device.csv"
	NAME=$(sed -n 2p "$OUT/device.csv" | cut -d, -f2)
	if [ -z "${GPU:-}" ]; then
		case $NAME in
		*H200*) GPU=h200-sxm ;;
		*H100*) GPU=h100-sxm ;;
		*A100*80GB*) GPU=a100-80gb-sxm ;;
		*A100*) GPU=a100-40gb-sxm ;;
		*L40S*) GPU=l40s ;;
		*) GPU=h100-sxm
		   say "unrecognized GPU '${NAME:-none found}': calibrating and simulating as h100-sxm (set GPU= to choose)" ;;
		esac
	fi
else
	printf 'skipped: GPU_CHECK_BACKEND=cpu\n' >"$OUT/device.log"
	printf 'device\tskipped\t0\n' >>"$STEPS"
	: >"$OUT/device.csv"
fi
say "backend $BACKEND, catalog GPU $GPU, programs from $WHERE, outputs in $OUT"

# ---- 2. conformance ----
# Exit 1 for the check when either fails, is stopped, or cannot run.
CONF_OK=1
step conformance 100 260 "$TESTS/test-kernels" "$BACKEND" || CONF_OK=0
SHAPES=$TESTS/test-kernel-shapes
[ -x "$SHAPES" ] || SHAPES=$TESTS/test-cuda-shapes
# shellcheck disable=SC2086
step shapes 90 220 "$SHAPES" $SHAPES_ARGS || CONF_OK=0
# Decode steps replayed through CUDA graphs against eager ones (on the CPU:
# with no argument, that the host backends' graph calls refuse, -ENOTSUP).
if [ "$BACKEND" = cuda ]; then
	step graphs 40 200 "$TESTS/test-graph" cuda || CONF_OK=0
else
	step graphs 40 200 "$TESTS/test-graph" || CONF_OK=0
fi

# ---- 3. calibration ----
# Warm-up: calibrate run times each point after --warmup untimed runs.
rm -rf "$OUT/catalog"
# shellcheck disable=SC2086
step calibrate 150 90 "$BIN" calibrate run --backend "$BACKEND" --device "$GPU" --model $MODEL \
	$CAL_ARGS --store "$OUT/cal.db" --catalog-out "$OUT/catalog"
CAL_RC=$?
# Are the kernels in the class engines run?  The sweep's attention and GEMM
# points against the H100 tables shipped in calibration.db (aiconfigurator's
# vLLM measurements), scaled to this GPU by the roofline (kernel-class.py).
# On the CPU there is nothing to hold them to.
if [ "$BACKEND" = cuda ] && [ -s "$OUT/cal.db" ]; then
	step kernel-class 20 0 python3 "$HERE/kernel-class.py" "$OUT/cal.db" "$GPU" \
		"$DATA/calibration.db" "${GPU_CHECK_REFERENCE:-h100-sxm}" "$DATA/gpus.json" \
		"$OUT/kernel-class.json"
else
	echo "skipped: no CUDA calibration to compare" >"$OUT/kernel-class.log"
	printf 'kernel-class\tskipped\t0\n' >>"$STEPS"
fi
# What the simulation runs: on the GPU the catalog's own model and GPU (the
# sweep ran the full model in bf16, as the catalog it wrote says); on the CPU the scaled model and "cpu"
# device the sweep wrote (MODEL-wDIV-lLAYERS).  Both with the engine profile
# servesim-BACKEND whose host terms the sweep fitted to its whole steps.
if [ "$BACKEND" = cuda ]; then
	SIM_MODEL="--model $MODEL"
else
	SIM_MODEL=$(sed -n 's/^ *"name": *"\([^"]*\)".*/\1/p' "$OUT/catalog/models.json" 2>/dev/null | head -1)
	SIM_MODEL="--model-catalog $OUT/catalog/models.json --gpu-catalog $OUT/catalog/gpus.json --model $SIM_MODEL"
fi

# ---- 4. live against simulated ----
rm -rf "$OUT/live" "$OUT/sim"
# shellcheck disable=SC2086
step live 100 30 "$BIN" live --backend "$BACKEND" --model $MODEL $LIVE_ARGS $SCENARIO --quiet \
	--out "$OUT/live"
if [ $CAL_RC -eq 0 ] && [ -s "$OUT/catalog/engines.json" ]; then
	# shellcheck disable=SC2086
	step sim 30 10 "$BIN" run $SIM_MODEL --gpu "$GPU" --engine "servesim-$BACKEND" \
		--engine-catalog "$OUT/catalog/engines.json" --cost-model table \
		--calibration "$OUT/cal.db" $SCENARIO --quiet --out "$OUT/sim"
elif [ "$BACKEND" = cuda ] && [ -s "$OUT/cal.db" ]; then
	# A sweep stopped before its whole steps (no fitted host terms, no
	# catalog): the operators it did measure, with the table model's own
	# host series (--engine none); report.json marks the step sim-partial.
	# shellcheck disable=SC2086
	step sim-partial 30 10 "$BIN" run $SIM_MODEL --gpu "$GPU" --engine none --cost-model table \
		--calibration "$OUT/cal.db" $SCENARIO --quiet --out "$OUT/sim"
else
	echo "skipped: the calibration did not finish (no catalog to simulate from)" >"$OUT/sim.log"
	printf 'sim\tskipped\t0\n' >>"$STEPS"
fi
if [ -d "$OUT/live" ] && [ -d "$OUT/sim" ]; then
	step compare 20 0 "$BIN" compare "$OUT/live" "$OUT/sim" --json="$OUT/compare.json"
else
	echo "skipped: no live or no simulated run" >"$OUT/compare.log"
	printf 'compare\tskipped\t0\n' >>"$STEPS"
fi

# ---- 5. the report ----
python3 - "$OUT" "$BACKEND" "$GPU" "$((CONF_OK == 0))" "$(($(date +%s) - T0))" "$BUDGET" \
	"$WHERE" <<'EOF' || echo "gpu-check: python3 could not write report.json" >&2
import csv, json, os, re, sqlite3, sys
out, backend, gpu, conf_failed, total, budget, where = sys.argv[1:8]

def text(name):
    try:
        with open(os.path.join(out, name)) as f:
            return f.read()
    except OSError:
        return ""

def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

steps = []
for line in text("steps.tsv").splitlines():
    n, st, s = line.split("\t")
    steps.append({"name": n, "status": st, "seconds": int(s)})
status = {s["name"]: s["status"] for s in steps}

dev = {"backend": backend, "catalog_gpu": gpu, "programs": where,
       "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
rows = list(csv.reader(text("device.csv").splitlines()))
if len(rows) > 1:
    dev["nvidia_smi"] = [{k.strip(): v.strip() for k, v in zip(rows[0], r)} for r in rows[1:]]
m = re.search(r"^device: (.*)$", text("shapes.log"), re.M)
dev["backend_device"] = m.group(1) if m else None
m = re.search(r"^pci bus id: (.*)$", text("shapes.log"), re.M)
dev["backend_pci_bus_id"] = m.group(1) if m else None

conf = {}
m = re.search(r"(\d+)%: Checks: (\d+), Failures: (\d+), Errors: (\d+)", text("conformance.log"))
conf["test_kernels"] = {"status": status.get("conformance"),
                        "checks": int(m.group(2)) if m else None,
                        "failed": int(m.group(3)) + int(m.group(4)) if m else None}
m = re.search(r"^(\d+) checks, (\d+) failed$", text("shapes.log"), re.M)
conf["shapes"] = {"status": status.get("shapes"),
                  "checks": int(m.group(1)) if m else None,
                  "failed": int(m.group(2)) if m else None,
                  "failures": re.findall(r"^(.*\S)\s+\S.*FAIL$", text("shapes.log"), re.M)}
m = re.search(r"(\d+)%: Checks: (\d+), Failures: (\d+), Errors: (\d+)", text("graphs.log"))
conf["graphs"] = {"status": status.get("graphs"),
                  "checks": int(m.group(2)) if m else None,
                  "failed": int(m.group(3)) + int(m.group(4)) if m else None}
conf["passed"] = conf_failed == "0"
for k, log in (("test_kernels", "conformance.log"), ("shapes", "shapes.log"),
               ("graphs", "graphs.log")):
    if conf[k]["status"] == "failed (exit 77)":    # the backend found no device
        conf[k]["note"] = (text(log).strip().splitlines() or [""])[-1]

cal = {"status": status.get("calibrate"), "store": os.path.join(out, "cal.db"), "rows": {}}
m = re.search(r"energy: (.*)$", text("calibrate.log"), re.M)
cal["meter"] = m.group(1) if m else None
if os.path.exists(cal["store"]):
    try:
        db = sqlite3.connect(cal["store"])
        cal["rows"] = dict(db.execute("SELECT op, COUNT(*) FROM measurements WHERE device = ? "
                                      "GROUP BY op ORDER BY op", (gpu,)).fetchall())
        r = db.execute("SELECT device_raw FROM measurements WHERE device = ? LIMIT 1",
                       (gpu,)).fetchone()
        cal["measured_on"] = r[0] if r else None
    except sqlite3.Error as e:
        cal["error"] = str(e)

live = {"status": status.get("live"),
        "sim_status": status.get("sim") or "partial: " + status.get("sim-partial", "?"),
        "compare_status": status.get("compare")}
cmp = load("compare.json")
if cmp:
    for k in ("ttft_ms", "tpot_ms"):
        t = cmp.get("metrics", {}).get(k)
        if t:
            p = t.get("percentiles", {})
            live[k] = {"mape_pct": t.get("mape_pct"),
                       "p50": p.get("p50"), "p99": p.get("p99")}
    live["throughput"] = cmp.get("throughput")
kclass = load("kernel-class.json")
summ = load("live/summary.json")
energy = {"live": summ.get("energy") if summ else None, "calibration_meter": cal["meter"]}

report = {"status": "conformance failed" if conf_failed != "0" else
          "ok" if all(s["status"] == "ok" or (s["name"] in ("device", "kernel-class") and
                                               backend == "cpu")
                      for s in steps) else "incomplete",
          "seconds": int(total), "budget_seconds": int(budget), "device": dev, "steps": steps,
          "conformance": conf, "calibration": cal, "kernel_class": kclass,
          "live_vs_sim": live, "energy": energy}
with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f, indent=2, sort_keys=True)
    f.write("\n")

def g(x, k):
    return x.get(k) if isinstance(x, dict) else None

with open(os.path.join(out, "report.txt"), "w") as f:
    p = lambda *a: print(*a, file=f)
    p("servesim GPU check: %s, %s s of a %s s budget" % (report["status"], total, budget))
    for d in dev.get("nvidia_smi", []):
        p("GPU %s: %s, %s, bus %s, driver %s, cc %s, %s, SM %s (max %s), mem %s (max %s), "
          "power limit %s" % tuple(d.get(k, "?") for k in (
              "index", "name", "uuid", "pci.bus_id", "driver_version", "compute_cap",
              "memory.total [MiB]", "clocks.current.sm [MHz]", "clocks.max.sm [MHz]",
              "clocks.current.memory [MHz]", "clocks.max.memory [MHz]", "power.limit [W]")))
    p("backend %s (%s, PCI bus id %s), catalog GPU %s; CUDA_VISIBLE_DEVICES=%s" % (
        backend, dev["backend_device"] or "device not reported",
        dev["backend_pci_bus_id"] or "none", gpu,
        dev["cuda_visible_devices"] or "unset"))
    p("")
    for s in steps:
        p("  %-12s %-18s %4d s" % (s["name"], s["status"], s["seconds"]))
    p("")
    tk, sh, gr = conf["test_kernels"], conf["shapes"], conf["graphs"]
    p("conformance: %s; test-kernels %s of %s failed; shapes %s of %s failed; graphs %s of %s "
      "failed%s" % (
        "pass" if conf["passed"] else "FAIL", tk["failed"], tk["checks"], sh["failed"],
        sh["checks"], gr["failed"], gr["checks"],
        "".join("\n  FAIL " + x for x in sh["failures"])))
    for k in ("test_kernels", "shapes", "graphs"):
        if conf[k].get("note"):
            p("  %s did not run: %s" % (k, conf[k]["note"]))
    p("calibration: %d rows (%s)%s" % (sum(cal["rows"].values()), ", ".join(
        "%s %d" % kv for kv in cal["rows"].items()), "; measured on " +
        cal["measured_on"] if cal.get("measured_on") else ""))
    if kclass:
        p("kernel class: %s against %s's tables, scaled by the roofline (measured / expected)"
          % (kclass["gpu"], kclass["reference_gpu"]))
        for op, r in sorted(kclass["ops"].items()):
            if r["n"]:
                p("  %-12s %3d shapes: median %.2f, max %.2f, target <= %.2f: %s" % (
                    op, r["n"], r["median"], r["max"], r["target"],
                    "met" if r["median"] <= r["target"] else "MISSED"))
            else:
                p("  %-12s no matching shape" % op)
    else:
        p("kernel class: %s" % status.get("kernel-class"))
    for k in ("ttft_ms", "tpot_ms"):
        if k in live:
            t = live[k]
            p("%s: live p50 %s, simulated %s; p99 live %s, simulated %s; MAPE %s%%" % (
                k[:4].upper() + " (ms)", g(t["p50"], "reference"), g(t["p50"], "other"),
                g(t["p99"], "reference"), g(t["p99"], "other"), t["mape_pct"]))
    if live.get("throughput"):
        p("throughput: %s" % json.dumps(live["throughput"], sort_keys=True))
    if "ttft_ms" not in live:
        p("live vs simulated: no comparison (live %s, sim %s, compare %s)" % (
            live["status"], live["sim_status"], live["compare_status"]))
    e = energy["live"]
    p("energy (live): %s" % (json.dumps(e, sort_keys=True) if e else "none"))
    p("energy (calibration meter): %s" % cal["meter"])
EOF
if [ -f "$OUT/report.txt" ]; then
	cat "$OUT/report.txt"
else
	cat "$STEPS"
fi
[ $CONF_OK -eq 1 ] || exit 1
while IFS="$(printf '\t')" read -r n st _; do
	[ "$st" = ok ] || { [ "$BACKEND" = cpu ] && { [ "$n" = device ] || [ "$n" = kernel-class ]; }; } ||
		exit 3
done <"$STEPS"
exit 0
