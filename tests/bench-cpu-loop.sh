# bench/cpu-loop.sh (docs/validation.md, "The live loop on the CPU") on a
# tiny scenario given through CPU_LOOP_ARGS: one loop of two live runs, its
# table (the simulation against the live runs' median and interval, each
# live run's involuntary context switches and load) and the count of loops
# in target.  Whether the loop is in target depends on the machine, so only
# the count's form is checked; a bad loop option stops the script (exit 1).
. "$(dirname "$0")/cli-lib.sh"
command -v python3 >/dev/null || { echo "skip: python3 (the script's summary) not found"; exit 77; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
tiny="--model llama-3.2-1b --width-div 32 --layers 1 --arrival poisson:rate=50 --lengths fixed:prompt=24,output=4 --num-requests 8 --kv-blocks 256 --seed 2 --max-tokens 64 --max-kv 128 --cal-repeats 2 --cal-warmup 0"
if SERVESIM_BIN=$BIN CPU_LOOP_ARGS=$tiny sh "$SRC/bench/cpu-loop.sh" "$T/w" 1 2 >"$T/out" 2>"$T/err"; then
	grep -q "^model llama-3.2-1b-w32-l1, 2 live runs per loop, 95% interval" "$T/out" &&
		grep -q "^1 *TTFT p50 *[0-9.]* *[0-9.]* *[0-9.]*\.\.[0-9.]* *[-+][0-9.]*% *\(yes\|no\) *[0-9.]*%" "$T/out" &&
		grep -q "^1 *TPOT p50 " "$T/out" &&
		grep -q "live runs: TTFT p50 [0-9.]* [0-9.]* ms, TPOT p50 [0-9.]* [0-9.]* ms; ivcsw [0-9-]* [0-9-]*; load [0-9.-]* [0-9.-]*; loop [0-9]* s; in target: \(yes\|no\)" "$T/out" &&
		grep -q "^loops in target: [01] of 1$" "$T/out" &&
		[ -s "$T/w/loop1/loop.json" ] &&
		pass "one tiny loop: $(tail -1 "$T/out")" || fail "the script's table: $(cat "$T/out")"
else
	fail "bench/cpu-loop.sh failed: $(cat "$T/err")"
fi
# CPU_LOOP_REPORT: the table of the loops already there, running nothing
# (asked for two: the second is not done)
CPU_LOOP_REPORT=1 SERVESIM_BIN=/nonexistent sh "$SRC/bench/cpu-loop.sh" "$T/w" 2 >"$T/out2" 2>"$T/err" &&
	grep -q "^2 *not done (no loop2/loop.json)" "$T/out2" &&
	grep -q "^loops in target: [01] of 1 (1 of 2 loops done)$" "$T/out2" && [ ! -e "$T/w/loop2" ] &&
	pass "CPU_LOOP_REPORT: $(tail -1 "$T/out2")" || fail "CPU_LOOP_REPORT: $(cat "$T/out2" "$T/err")"
SERVESIM_BIN=$BIN CPU_LOOP_ARGS="--repeats 0" sh "$SRC/bench/cpu-loop.sh" "$T/w2" 1 >"$T/out" 2>"$T/err"
[ $? -eq 1 ] && grep -q "^servesim: --repeats: expected an integer in 1..100, got '0'" "$T/err" &&
	pass "a bad loop option stops the script with loop's message" || fail "bad option: $(cat "$T/err")"
finish
