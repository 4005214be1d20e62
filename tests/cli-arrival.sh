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

finish
