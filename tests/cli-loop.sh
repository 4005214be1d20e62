# servesim loop (docs/loop.md): calibrate, live, simulate, compare in one
# command, on the CPU backend with a tiny scaled model and a short trace
# (as tests/cli-live.sh and tests/cli-calibrate-run.sh keep theirs small):
# the four outputs exist, the simulation and the comparison are those of
# the steps run by hand, the noise warning appears when forced (a threshold
# of 0, or one live run), --calibration skips the measuring, bad options
# exit 2.  Nothing here depends on how noisy the machine is.
. "$(dirname "$0")/cli-lib.sh"
command -v python3 >/dev/null || { echo "skip: python3 (to read the JSON) not found"; exit 77; }

wl="--model llama-3.2-1b --width-div 32 --layers 1 --arrival poisson:rate=50 --lengths fixed:prompt=24,output=4 --num-requests 12 --kv-blocks 256 --seed 2"
cal="--max-tokens 64 --max-kv 128 --cal-repeats 2 --cal-warmup 0"
D=$T/loop
if SERVESIM_POWERCAP_ROOT="$T/none" "$BIN" loop $wl $cal --noise-threshold 0 --out "$D" >"$T/out" 2>"$T/err"; then
	pass "loop ran"
	for f in calibration.db catalog/models.json catalog/engines.json live/summary.json live-2/summary.json live-3/summary.json \
		sim/summary.json compare/compare.json compare/compare.txt loop.json calibrate.txt; do
		[ -s "$D/$f" ] || fail "loop did not write $f"
	done
	grep -q '"mode": "live"' "$D/live/summary.json" && grep -q '"mode": "sim"' "$D/sim/summary.json" &&
		pass "DIR/live is live, DIR/sim simulated" || fail "modes: $(grep -h '"mode"' "$D/live/summary.json" "$D/sim/summary.json")"
	# the verdict: a table of the headline figures, then the warning (forced
	# by --noise-threshold 0: any noise is at or above it) on stderr, one line
	for fig in "TTFT p50" "TTFT p90" "TPOT p50" "TPOT p90"; do
		grep -q "^  $fig " "$T/out" || fail "verdict has no $fig line: $(cat "$T/out")"
	done
	# each live run's p50s and noise evidence, one line each
	[ "$(grep -c "^  live run [1-3]: TTFT p50 [0-9.]* ms, TPOT p50 [0-9.]* ms" "$T/out")" -eq 3 ] &&
		pass "the verdict has a line per live run" || fail "live run lines: $(cat "$T/out")"
	[ "$(grep -c . "$T/err")" -eq 1 ] &&
		grep -q "^servesim: warning: the comparison cannot distinguish model error from noise (live runs differ by the threshold or more): TTFT p50 error [-+][0-9.]*%, noise [0-9.]*%" "$T/err" &&
		pass "threshold 0 forces the noise warning: $(cut -c1-120 "$T/err")..." ||
		fail "noise warning: $(cat "$T/err")"
else
	fail "loop failed: $(cat "$T/err")"
fi

# Step 1 by hand: calibrate run's catalogs of that store are loop's (the
# host terms are fitted to the store's whole steps: the same store, the
# same fit, byte for byte).
"$BIN" calibrate run --model llama-3.2-1b --width-div 32 --layers 1 --store "$D/calibration.db" \
	--catalog-out "$T/cat" --catalog-only >"$T/out" 2>"$T/err" &&
	cmp -s "$T/cat/models.json" "$D/catalog/models.json" && cmp -s "$T/cat/engines.json" "$D/catalog/engines.json" &&
	pass "DIR/catalog is calibrate run's, by hand" || fail "catalogs by hand: $(cat "$T/err")"

# The simulation by hand, as docs/loop.md spells it: the same summary.
kv=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["kv_blocks_per_instance"])' \
	"$D/live/summary.json")
"$BIN" run --model llama-3.2-1b --arrival poisson:rate=50 --lengths fixed:prompt=24,output=4 --num-requests 12 \
	--kv-blocks 256 --seed 2 --model-catalog "$D/catalog/models.json" --gpu-catalog "$D/catalog/gpus.json" \
	--engine-catalog "$D/catalog/engines.json" --model llama-3.2-1b-w32-l1 --gpu cpu --engine servesim-cpu \
	--cost-model table --calibration "$D/calibration.db" --kv-blocks "$kv" --out "$T/sim" --quiet 2>"$T/err" ||
	fail "run by hand: $(cat "$T/err")"
cmp -s "$D/sim/summary.json" "$T/sim/summary.json" && pass "DIR/sim is the simulation run by hand (summary.json byte for byte)" ||
	fail "DIR/sim differs from the run by hand: $(diff "$D/sim/summary.json" "$T/sim/summary.json" | head -5)"
"$BIN" compare "$D/live" "$T/sim" --json="$T/cmp.json" >/dev/null 2>"$T/err" || fail "compare by hand: $(cat "$T/err")"
python3 - "$D/loop.json" "$T/cmp.json" "$D/compare/compare.json" <<'PY' && pass "loop.json's errors are compare's" || fail "loop.json against compare: see above"
import json, sys
loop, cmp, own = (json.load(open(p)) for p in sys.argv[1:])
keys = {"TTFT p50": ("ttft_ms", "p50"), "TTFT p90": ("ttft_ms", "p90"),
        "TPOT p50": ("tpot_ms", "p50"), "TPOT p90": ("tpot_ms", "p90")}
assert len(loop["figures"]) == 4, loop["figures"]
for f in loop["figures"]:
    m, p = keys[f["figure"]]
    for c in (cmp, own):
        e = c["metrics"][m]["percentiles"][p]["err_pct"]
        assert abs(f["err_pct"] - e) < 1e-6, (f, e)
    assert f["noise_pct"] is not None and f["noise_pct"] >= 0 and f["resolved"] is False, f
assert loop["repeats"] == 3 and loop["live"][2].endswith("/live-3"), loop["live"]
# the median of the three live runs and its 95% interval: Student's t on
# the logs, t(0.975, 2 degrees of freedom) = 4.302653 (any t table)
import math, statistics
assert loop["interval_level"] == 0.95, loop
for f in loop["figures"]:
    v = f["live_runs_ms"]
    assert len(v) == 3 and abs(v[0] - f["live_ms"]) < 1e-9, f
    assert abs(f["live_median_ms"] - statistics.median(v)) < 1e-9, f
    m, sd = statistics.mean(map(math.log, v)), statistics.stdev(map(math.log, v))
    half = 4.302653 * sd / math.sqrt(3)
    assert abs(f["live_lo_ms"] / math.exp(m - half) - 1) < 1e-6, f
    assert abs(f["live_hi_ms"] / math.exp(m + half) - 1) < 1e-6, f
    # with three runs t >= R - 1: the interval holds every run
    assert f["live_lo_ms"] <= min(v) and max(v) <= f["live_hi_ms"], f
    e = 100 * (f["sim_ms"] / f["live_median_ms"] - 1)
    assert abs(f["err_median_pct"] - e) <= 1e-6 * max(1, abs(e)), f   # 10 digits in the JSON
    assert f["in_interval"] == (f["live_lo_ms"] <= f["sim_ms"] <= f["live_hi_ms"]), f
# each live run's noise evidence: involuntary context switches, load average
assert [r["dir"] for r in loop["live_runs"]] == loop["live"], loop["live_runs"]
for r in loop["live_runs"]:
    assert r["involuntary_switches"] is None or r["involuntary_switches"] >= 0, r
    assert r["load_1m"] is None or r["load_1m"] >= 0, r
assert loop["calibration"]["measured"] is True and loop["model_run"] == "llama-3.2-1b-w32-l1", loop
assert loop["warning"].startswith("the comparison cannot distinguish"), loop["warning"]
PY

# --calibration: the store is used as it is (nothing measured, no
# calibrate.txt), and one live run measures no noise: the warning says so.
sum0=$(cksum <"$D/calibration.db")
if "$BIN" loop $wl --calibration "$D/calibration.db" --repeats 1 --out "$T/again" --quiet >"$T/out" 2>"$T/err"; then
	[ ! -s "$T/out" ] && [ ! -e "$T/again/calibrate.txt" ] && [ ! -e "$T/again/calibration.db" ] &&
		[ -s "$T/again/catalog/engines.json" ] && [ "$(cksum <"$D/calibration.db")" = "$sum0" ] &&
		pass "--calibration: the store untouched, its catalogs written, --quiet prints nothing" ||
		fail "--calibration: $(ls "$T/again"; cat "$T/out")"
	[ "$(grep -c . "$T/err")" -eq 1 ] && grep -q "one live run (--repeats 1) measures no noise" "$T/err" &&
		grep -q '"noise_pct": null' "$T/again/loop.json" && grep -q '"live_lo_ms": null' "$T/again/loop.json" &&
		grep -q '"in_interval": false' "$T/again/loop.json" &&
		pass "--repeats 1: the warning says the noise is unknown, no interval" || fail "--repeats 1: $(cat "$T/err")"
else
	fail "loop --calibration: $(cat "$T/err")"
fi

# Bad command lines: one line, exit 2.
expect_error 2 "expected --out DIR" -- loop $wl
expect_error 2 "^servesim: --repeats: expected an integer in 1..100, got '0'" -- loop --repeats 0 --out "$T/x"
expect_error 2 "^servesim: --noise-threshold: expected a percentage" -- loop --noise-threshold -1 --out "$T/x"
expect_error 2 "^servesim: --max-kv: expected an integer" -- loop --max-kv 3 --out "$T/x"
expect_error 2 "^servesim: --cost-model: not a loop option" -- loop --cost-model table --out "$T/x"
expect_error 2 "unknown option '--engine'" -- loop --engine vllm --out "$T/x"
expect_error 2 "^servesim: --num-requests: expected a positive integer" -- loop --num-requests 0 --out "$T/x"
expect_error 2 "^servesim: --out: expected a value" -- loop --out
expect_error 2 "^servesim: --json: takes no value" -- loop --json=1 --out "$T/x"
# loop's calibration options are calibrate run's, with the same bounds (one table)
expect_error 2 "^servesim: --cal-warmup: expected an integer in 0..1000, got '1001'" -- loop --cal-warmup 1001 --out "$T/x"
expect_error 2 "^servesim: --warmup: expected an integer in 0..1000, got '1001'" -- calibrate run --warmup 1001
expect_error 2 "^servesim: --cal-repeats: expected an integer in 1..10000, got '0'" -- loop --cal-repeats 0 --out "$T/x"
expect_error 2 "^servesim: unexpected argument 'x' \(see .servesim loop --help.\)" -- loop x --out "$T/x"
[ ! -e "$T/x" ] && pass "a bad command line creates nothing" || fail "$T/x created"
# a store that is not there: a bad input file (exit 1), named
expect_error 1 "nothing.db: cannot open calibration store" -- loop $wl --calibration "$T/nothing.db" --out "$T/y"
"$BIN" loop --help >"$T/help" && grep -q "^usage: servesim loop --out DIR" "$T/help" && pass "loop --help" || fail "loop --help"
# the man page's option list is loop's --help (scripts/update-man-help.sh)
SRC=$(cd "$(dirname "$0")/.." && pwd)
sed -n "/<!-- loop-help:begin -->/,/<!-- loop-help:end -->/p" "$SRC/docs/servesim.1.md" | sed '1,2d;$d' | sed '$d' >"$T/manhelp"
"$BIN" help --man loop >"$T/help2"
[ -s "$T/manhelp" ] && cmp -s "$T/help2" "$T/manhelp" && cmp -s "$T/help" "$T/help2" &&
	pass "loop options in docs/servesim.1.md are loop's --help" ||
	fail "docs/servesim.1.md is out of date with loop --help (run scripts/update-man-help.sh): $(diff "$T/help2" "$T/manhelp" | head -5)"

# SIGINT ends the loop in whichever step it is in (a slow live run: 20
# requests at 2/s), that step's one line, exit 130, no loop.json.  As in
# tests/cli-signals.sh: sent once the handler is in (SigCgt), background
# job's ignored SIGINT reset by env; skipped where that cannot be done.
# interrupt NAME FILE -- loop args: start the loop, wait for its handler
# (and for FILE, when not -), send SIGINT; exit 130, one line, no loop.json
interrupt() {
	name=$1 file=$2
	shift 3
	env --default-signal=INT,TERM "$BIN" loop "$@" --out "$T/$name" --quiet >"$T/$name.out" 2>"$T/$name.err" &
	pid=$!
	i=0
	while [ "$i" -lt 1200 ]; do
		cgt=$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || break
		[ -n "$cgt" ] && [ $((0x$cgt & 0x4002)) -eq $((0x4002)) ] &&
			{ [ "$file" = - ] || [ -e "$T/$name/$file" ]; } && break
		sleep 0.05
		i=$((i + 1))
	done
	kill -INT "$pid"
	wait "$pid"
	got=$?
	[ "$got" -eq 130 ] && [ "$(grep -c . "$T/$name.err")" -eq 1 ] &&
		grep -q "^servesim: interrupted by SIGINT" "$T/$name.err" && [ ! -e "$T/$name/loop.json" ] &&
		pass "SIGINT ($name): exit 130, one line: $(cat "$T/$name.err")" ||
		fail "SIGINT ($name): exit $got, stderr: $(cat "$T/$name.err")"
}
slow="--model llama-3.2-1b --width-div 32 --layers 1 --arrival poisson:rate=2 --lengths fixed:prompt=24,output=4 --num-requests 20 --kv-blocks 256"
if [ -z "$VG" ] && [ -r /proc/self/status ] && env --default-signal=INT true 2>/dev/null; then
	interrupt int - -- $slow $cal
	# with the first run's store, the catalogs come at once: the signal
	# lands in the live run (10 s of arrivals), which keeps its results
	interrupt int-live catalog/engines.json -- $slow --calibration "$D/calibration.db"
	grep -q "^servesim: interrupted by SIGINT after [0-9]* of 20 requests; results so far in $T/int-live/live\$" \
		"$T/int-live.err" && grep -q '"status": "interrupted"' "$T/int-live/live/summary.json" &&
		pass "SIGINT in the live step: its results so far written, marked interrupted" ||
		fail "SIGINT in the live step: $(cat "$T/int-live.err")"
	# the default scenario on the CPU (no --model, no scale, no workload
	# option; cli/cmd-loop.c): its live run, stopped at once, says what ran
	interrupt int-default catalog/engines.json -- --calibration "$D/calibration.db"
	python3 - "$T/int-default/live/summary.json" <<'PY' && pass "the default scenario: Llama-3.2-1B at width/4, 8 layers, 30 requests at 1/s, seed 3" || fail "default scenario: see above"
import json, sys
s = json.load(open(sys.argv[1]))
c = s["config"]
assert s["scenario"]["model_run"].startswith("llama-3.2-1b scaled: width/4, 8 layers"), s["scenario"]
assert (c["arrival"], c["num_requests"], c["seed"]) == ("poisson:rate=1", 30, 3), c
assert c["lengths"] == "lognormal:prompt_mean=64,prompt_cv=0.5,output_mean=32,output_cv=0.5", c
PY
else
	echo "skip: SIGINT test (valgrind, no /proc or no env --default-signal)"
fi
finish
