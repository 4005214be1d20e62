#!/bin/sh
# The calibrate -> live -> simulate -> compare loop on the CPU backend
# (docs/loop.md, docs/validation.md "The live loop on the CPU"), LOOPS
# times (default 5).  Each loop is one `servesim loop` of its default CPU
# scenario (declared once, in cli/cmd-loop.c; `servesim loop --help` prints
# it): a fresh calibration of the scaled model on the CPU kernels with its
# whole-step host terms (engine profile servesim-cpu), R live runs of the
# same trace (loop's --repeats, default 3), the simulation of that trace
# on that calibration, and the comparison.
#
# Prints, per loop, the simulation's TTFT and TPOT p50 against the median
# of the R live runs, with the live runs' 95% interval of their median
# (Student's t on the logs: cli/cmd-loop.c, interval()), whether the
# simulation is inside it and within 5% of the median (issue 31's target,
# "in target" when both figures are), the live runs' spread ((max - min) /
# median), each live run's involuntary context switches (how often another
# process took the core during it: the machine's noise) and the 1-minute
# load average at its start, and the loop's wall time; then how many loops
# were in target.  Each loop's verdict is in WORKDIR/loopN.txt, its
# progress lines and warning in WORKDIR/loopN.err, the calibration's host
# terms in WORKDIR/loopN/calibrate.txt.
#
#   sh bench/cpu-loop.sh [WORKDIR [LOOPS [R]]]   (default: a temporary directory, 5, loop's 3)
#   CPU_LOOP_TASKSET="taskset -c 1" sh bench/cpu-loop.sh ...   (pin every loop)
#   CPU_LOOP_ARGS="--width-div 32 --layers 1 ..." sh bench/cpu-loop.sh ...
#       (options given to every `servesim loop`: another scenario or
#       calibration grid, e.g. tests/bench-cpu-loop.sh's tiny one)
#   CPU_LOOP_REPORT=1 sh bench/cpu-loop.sh WORKDIR LOOPS
#       (run nothing: the table of the loops already in WORKDIR, e.g. of a
#       set stopped part-way; a loop without its loop.json is "not done")
set -eu
cd "$(dirname "$0")/.."
BIN=${SERVESIM_BIN:-./build/servesim}
W=${1:-$(mktemp -d)}
LOOPS=${2:-5}
R=${3:-}
PIN=${CPU_LOOP_TASKSET:-}
ARGS=${CPU_LOOP_ARGS:-}
mkdir -p "$W"

i=1
[ -n "${CPU_LOOP_REPORT:-}" ] && i=$((LOOPS + 1))
while [ "$i" -le "$LOOPS" ]; do
	rm -rf "$W/loop$i"
	t0=$(date +%s)
	# PIN and ARGS are lists of words
	# shellcheck disable=SC2086
	if ! $PIN "$BIN" loop --out "$W/loop$i" ${R:+--repeats "$R"} $ARGS >"$W/loop$i.txt" 2>"$W/loop$i.err"; then
		cat "$W/loop$i.err" >&2
		exit 1
	fi
	echo $(($(date +%s) - t0)) >"$W/loop$i.wall"
	i=$((i + 1))
done

python3 - "$W" "$LOOPS" <<'PY'
import json, os, sys

w, loops = sys.argv[1], int(sys.argv[2])
names = ["TTFT p50", "TPOT p50"]
TARGET_PCT = 5.0

def fmt(v, f="%.3f"):
    return "-" if v is None else f % v

rows, ok_loops, done = [], 0, 0
print("simulation against the median of the live runs (err % = sim relative to the median;")
print("target: inside the live runs' 95% interval of their median and within 5% of it)")
for i in range(1, loops + 1):
    try:
        d = json.load(open(os.path.join(w, "loop%d" % i, "loop.json")))
    except OSError:
        print("%-5d not done (no loop%d/loop.json)" % (i, i))
        continue
    try:
        wall = open(os.path.join(w, "loop%d.wall" % i)).read().strip()
    except OSError:
        wall = "-"
    figs = {f["figure"]: f for f in d["figures"]}
    ok = True
    if not done:
        print("model %s, %d live runs per loop, %.0f%% interval" %
              (d["model_run"], d["repeats"], 100 * d["interval_level"]))
        print("%-5s %-9s %9s %9s %21s %9s %6s %8s" % ("loop", "figure", "sim ms", "median ms",
              "interval ms", "err", "in", "spread"))
    for n in names:
        f = figs[n]
        runs = f["live_runs_ms"]
        inside = f["in_interval"]
        within = f["err_median_pct"] is not None and abs(f["err_median_pct"]) <= TARGET_PCT
        ok = ok and inside and within
        spread = (100 * (max(runs) - min(runs)) / f["live_median_ms"]
                  if None not in runs and f["live_median_ms"] else None)
        print("%-5d %-9s %9s %9s %21s %8s%% %6s %7s%%" % (
            i, n, fmt(f["sim_ms"]), fmt(f["live_median_ms"]),
            "%s..%s" % (fmt(f["live_lo_ms"]), fmt(f["live_hi_ms"])),
            fmt(f["err_median_pct"], "%+.1f"), "yes" if inside else "no", fmt(spread, "%.1f")))
    lr = d["live_runs"]
    print("%-5s live runs: TTFT p50 %s ms, TPOT p50 %s ms; ivcsw %s; load %s; loop %s s; in target: %s" % (
        "", " ".join(fmt(v) for v in figs["TTFT p50"]["live_runs_ms"]),
        " ".join(fmt(v) for v in figs["TPOT p50"]["live_runs_ms"]),
        " ".join(fmt(r["involuntary_switches"], "%d") for r in lr),
        " ".join(fmt(r["load_1m"], "%.2f") for r in lr), wall, "yes" if ok else "no"))
    ok_loops += ok
    done += 1
print("loops in target: %d of %d" % (ok_loops, done) +
      ("" if done == loops else " (%d of %d loops done)" % (done, loops)))
PY
