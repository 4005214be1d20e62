# Progress of long jobs (cli/progress.h, docs/servesim.1.md "PROGRESS"):
# where stderr is not a terminal (here: a file), a status line of the
# documented form every SERVESIM_PROGRESS_INTERVAL seconds (0: at every
# update) and a last one at the end; none with --quiet; none before the
# interval (a large one).  No assertion on timing: interval 0 prints at
# every update, and an interval of 10^6 s is never reached.
. "$(dirname "$0")/cli-lib.sh"

# WHAT: DONE/TOTAL UNIT (P%), elapsed M:SS[, ETA M:SS]
form() {
	printf '^servesim %s: [0-9]+/[0-9]+ %s \\([0-9]+%%\\), elapsed [0-9]+:[0-9]{2}(, ETA ([0-9]+:[0-9]{2}|\\?))?$' "$1" "$2"
}
# check NAME WHAT UNIT FILE: every line of FILE is a status line, the
# last without an ETA, at 100%
check() {
	re=$(form "$2" "$3")
	n=$(grep -c . "$4")
	bad=$(grep -v -E "$re" "$4" | head -n 2)
	if [ "$n" -ge 2 ] && [ -z "$bad" ] && tail -n 1 "$4" | grep -q -E "\\(100%\\), elapsed [0-9:]+\$"; then
		pass "$1: $n status lines, e.g. $(head -n 1 "$4")"
	else
		fail "$1: $n lines, not of the form: ${bad:-$(tail -n 1 "$4")}"
	fi
}

sim="--arrival poisson:rate=50 --lengths fixed:prompt=100,output=20 --num-requests 200"
SERVESIM_PROGRESS_INTERVAL=0 "$BIN" run $sim >/dev/null 2>"$T/run.err" || fail "run: $(cat "$T/run.err")"
check "run" run requests "$T/run.err"
grep -q "^servesim run: 200/200 requests (100%), elapsed [0-9:]*, ETA 0:00\$" "$T/run.err" &&
	pass "run: done/total of the workload" || fail "run: $(cat "$T/run.err")"

SERVESIM_PROGRESS_INTERVAL=0 "$BIN" run $sim --quiet >"$T/out" 2>"$T/err" &&
	[ ! -s "$T/err" ] && [ ! -s "$T/out" ] && pass "run --quiet: no progress" || fail "run --quiet: $(cat "$T/err")"
SERVESIM_PROGRESS_INTERVAL=1000000 "$BIN" run $sim >/dev/null 2>"$T/err" && [ ! -s "$T/err" ] &&
	pass "run: nothing before the interval" || fail "run, long interval: $(cat "$T/err")"
SERVESIM_PROGRESS_INTERVAL=soon "$BIN" run $sim >/dev/null 2>"$T/err"
[ "$(grep -c . "$T/err")" -eq 1 ] &&
	grep -q "^servesim: SERVESIM_PROGRESS_INTERVAL: expected seconds in \[0, 1e6\], got 'soon'; using 30\$" "$T/err" &&
	pass "a bad interval: one warning, then the default" || fail "bad interval: $(cat "$T/err")"

# live: every event reaches the callback (a wall clock), so a short run
# prints lines too
live="live --model llama-3.2-1b --width-div 32 --layers 1 --arrival poisson:rate=100 --lengths fixed:prompt=16,output=3 --num-requests 10 --kv-blocks 128"
SERVESIM_PROGRESS_INTERVAL=0 "$BIN" $live >/dev/null 2>"$T/live.err" || fail "live: $(cat "$T/live.err")"
check "live" live requests "$T/live.err"

SERVESIM_PROGRESS_INTERVAL=0 "$BIN" plan --arrival poisson:rate=4 --lengths fixed:prompt=256,output=32 --num-requests 50 --max-gpus 1 --modes colocated \
	--cost-model roofline >/dev/null 2>"$T/plan.err" || fail "plan: $(cat "$T/plan.err")"
check "plan" plan configurations "$T/plan.err"
SERVESIM_PROGRESS_INTERVAL=0 "$BIN" plan --num-requests 50 --max-gpus 1 --modes colocated \
	--cost-model roofline --quiet >/dev/null 2>"$T/err" && [ ! -s "$T/err" ] &&
	pass "plan --quiet: no progress" || fail "plan --quiet: $(cat "$T/err")"

small="--model llama-3.2-1b --width-div 32 --layers 1 --max-tokens 32 --max-kv 64 --warmup 0 --repeats 1"
SERVESIM_POWERCAP_ROOT="$T/none" SERVESIM_PROGRESS_INTERVAL=0 "$BIN" calibrate run $small \
	--store "$T/c.db" >/dev/null 2>"$T/cal.err" || fail "calibrate run: $(cat "$T/cal.err")"
check "calibrate run" "calibrate run" points "$T/cal.err"
SERVESIM_POWERCAP_ROOT="$T/none" SERVESIM_PROGRESS_INTERVAL=0 "$BIN" calibrate run $small \
	--store "$T/d.db" --quiet >"$T/out" 2>"$T/err" && [ ! -s "$T/err" ] && [ ! -s "$T/out" ] &&
	pass "calibrate run --quiet: nothing printed" || fail "calibrate run --quiet: $(cat "$T/out" "$T/err")"
finish
