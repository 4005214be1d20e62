#!/bin/sh
# Arrival processes on the command line (issue 16 section 2): mmpp and on-off
# specs, --rate-curve files, --rate on a trace; bad specs and combinations
# exit 2 with one line, bad files exit 1 naming file and line.
. "$(dirname "$0")/cli-lib.sh"

L="--lengths fixed:prompt=64,output=8"

# mmpp and on-off run, and the same seed gives the same summary
for a in mmpp:rates=40,2,switch_s=5,30 onoff:rate=20,on_s=0.5,off_s=1.5; do
	if "$BIN" run --arrival "$a" $L --num-requests 300 --seed 3 --quiet >"$T/a1" 2>&1 &&
	   "$BIN" run --arrival "$a" $L --num-requests 300 --seed 3 --quiet >"$T/a2" 2>&1 &&
	   cmp -s "$T/a1" "$T/a2"; then
		pass "--arrival $a runs, deterministic by --seed"
	else
		fail "--arrival $a: $(head -3 "$T/a1")"
	fi
done

expect_error 2 "^servesim: --arrival mmpp: expected as many rates as switch_s, at least 2, got 2 and 1" -- \
	run --arrival mmpp:rates=1,2,switch_s=1 $L --num-requests 5
expect_error 2 "^servesim: --arrival mmpp: missing 'rates'" -- \
	run --arrival mmpp:switch_s=1,1 $L --num-requests 5
expect_error 2 "^servesim: --arrival mmpp: expected a number, got 'fast'" -- \
	run --arrival mmpp:rates=1,fast,switch_s=1,1 $L --num-requests 5
expect_error 2 "^servesim: --arrival mmpp: expected a cycle of the states to hold at least 0.001" -- \
	run --arrival mmpp:rates=0,0,switch_s=1,1 $L --num-requests 5
expect_error 2 "^servesim: --arrival onoff: missing 'off_s'" -- \
	run --arrival onoff:rate=5,on_s=1 $L --num-requests 5
expect_error 2 "^servesim: --arrival onoff: expected on_s > 0, got 0" -- \
	run --arrival onoff:rate=5,on_s=0,off_s=1 $L --num-requests 5
expect_error 2 "^servesim: --arrival: unknown process 'burst'" -- \
	run --arrival burst:rate=5 $L --num-requests 5

# --rate-curve: 1 req/s for 10 s, 20 req/s for 10 s, 1 req/s for 10 s,
# repeating: 220 requests expected a 30 s period, 440 in 60 s (sd 21)
printf 'time_s,rate\n0,1\n10,1\n10.001,20\n20,20\n20.001,1\n30,1\n' >"$T/c.csv"
if "$BIN" run --rate-curve "$T/c.csv" $L --duration 60 --seed 1 >"$T/out" 2>&1; then
	n=$(sed -n 's/^requests: *\([0-9]*\) total.*/\1/p' "$T/out")
	if [ -n "$n" ] && [ "$n" -gt 335 ] && [ "$n" -lt 545 ]; then
		pass "--rate-curve: $n requests in 60 s (440 expected)"
	else
		fail "--rate-curve: '$n' requests in 60 s, expected 440 +- 105"
	fi
	grep -q "^workload: rate-curve:$T/c.csv x fixed" "$T/out" || fail "--rate-curve: workload line: $(grep workload "$T/out")"
else
	fail "--rate-curve: $(cat "$T/out")"
fi
# on a trace: the trace's lengths, in file order, at the curve's times
printf 'arrival_ms,prompt_tokens,output_tokens\n0,100,10\n5,200,20\n10,300,30\n' >"$T/t.csv"
if "$BIN" run --trace "$T/t.csv" --rate-curve "$T/c.csv" --seed 1 >"$T/out" 2>&1 &&
   grep -q "^requests: *3 total" "$T/out"; then
	pass "--rate-curve on a trace times its requests"
else
	fail "--rate-curve on a trace: $(cat "$T/out")"
fi
printf 'time_s,rate\n0,1\n5,1\n5,2\n' >"$T/bad.csv"
expect_error 1 "^servesim: $T/bad.csv:4: time_s: expected times increasing row by row, got '5'" -- \
	run --rate-curve "$T/bad.csv" $L --num-requests 5
printf 'time,rate\n0,1\n' >"$T/bad.csv"
expect_error 1 "^servesim: $T/bad.csv:1: expected the header time_s,rate" -- \
	run --rate-curve "$T/bad.csv" $L --num-requests 5
expect_error 1 "^servesim: /dev/zero:1: line longer than 1048576 bytes" -- \
	run --rate-curve /dev/zero $L --num-requests 5
expect_error 1 "^servesim: $T/none.csv: cannot open rate curve" -- \
	run --rate-curve "$T/none.csv" $L --num-requests 5
expect_error 2 "^servesim: --rate-curve cannot be combined with --arrival" -- \
	run --rate-curve "$T/c.csv" --arrival poisson:rate=1 $L --num-requests 5
expect_error 2 "^servesim: --rate-curve cannot be combined with --concurrency" -- \
	run --rate-curve "$T/c.csv" --concurrency 2 $L --num-requests 5

# --rate on a trace: 4 gaps over 4 s is 1 req/s; --rate 4 replays them in 1 s
printf 'arrival_ms,prompt_tokens,output_tokens\n0,100,10\n1000,200,20\n2000,300,30\n4000,300,30\n4000,100,10\n' >"$T/r.csv"
if "$BIN" run --trace "$T/r.csv" --rate 4 --duration 1.0001 >"$T/out" 2>&1 &&
   grep -q "^requests: *5 total" "$T/out" &&
   "$BIN" run --trace "$T/r.csv" --rate 4 --duration 0.9999 >"$T/out" 2>&1 &&
   grep -q "^requests: *3 total" "$T/out"; then
	pass "--rate 4 replays a 1 req/s trace in 1 s"
else
	fail "--rate on a trace: $(cat "$T/out")"
fi
expect_error 2 "^servesim: --rate cannot be combined with --rate-scale" -- \
	run --trace "$T/r.csv" --rate 4 --rate-scale 1
expect_error 2 "^servesim: --rate applies to a trace replayed at its own times" -- \
	run --arrival poisson:rate=1 $L --num-requests 5 --rate 4
expect_error 2 "^servesim: --rate applies to a trace replayed at its own times .*--rate-curve" -- \
	run --trace "$T/r.csv" --rate-curve "$T/c.csv" --rate 4
expect_error 2 "^servesim: --rate: expected a rate in req/s, > 0, got '0'" -- \
	run --trace "$T/r.csv" --rate 0
expect_error 1 "^servesim: $T/r.csv: --rate 4: the trace's 1 request arrives at one instant" -- \
	run --trace "$T/r.csv" --rate 4 --num-requests 1
# plan's --rate keeps its meaning (the planner's target rate)
"$BIN" plan --help | grep -q -- "--rate R *list only deployments sustaining R req/s" ||
	fail "plan --rate: help changed"

finish
