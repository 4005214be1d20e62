# Options that can have no effect on the workload (issue 34 §2,
# docs/workloads.md "Options without effect"): one note each on stderr
# and in summary.json's notes, none where the option acts; a sweep says
# each note once, and that seeds over a replayed trace vary no request;
# plan says them before its search.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

# no priorities, no prefix content
printf 'arrival_ms,prompt_tokens,output_tokens\n0,100,10\n10,200,20\n20,300,5\n' >"$T/plain.csv"
# priorities and a shared prefix
printf 'arrival_ms,prompt_tokens,output_tokens,tenant,priority,prefix_id,prefix_tokens\n0,100,10,0,1,7,64\n10,200,20,0,0,7,64\n20,300,5,0,2,7,64\n' >"$T/rich.csv"

"$BIN" run --trace "$T/plain.csv" --order priority --prefix-cache on --predictor oracle --out "$T/a" >/dev/null 2>"$T/err" ||
	fail "run: $(cat "$T/err")"
grep -q "^servesim: note: --order priority: no request of .*plain.csv has a priority (all are 0), so the queue is first come, first served$" "$T/err" &&
	pass "--order priority without priorities is noted" || fail "priority note: $(cat "$T/err")"
grep -q "^servesim: note: --prefix-cache on: .*plain.csv has no prefix content" "$T/err" &&
	pass "--prefix-cache without prefix content is noted" || fail "prefix note: $(cat "$T/err")"
grep -q "^servesim: note: --predictor oracle: neither the queue order nor the batch policy reads predicted output lengths" "$T/err" &&
	pass "a --predictor nothing reads is noted" || fail "predictor note: $(cat "$T/err")"
"$PY" -c "
import json, sys
n = json.load(open(sys.argv[1]))['notes']
assert len(n) == 3 and n[0].startswith('--order priority') and n[1].startswith('--prefix-cache on') and n[2].startswith('--predictor oracle'), n" "$T/a/summary.json" &&
	pass "summary.json lists the three notes" || fail "summary.json notes"

# where each option acts: no note, and no notes key
"$BIN" run --trace "$T/rich.csv" --order priority --prefix-cache on --out "$T/b" >/dev/null 2>"$T/err" ||
	fail "run: $(cat "$T/err")"
"$BIN" run --trace "$T/plain.csv" --order sjf --predictor noisy:sigma=0.5 --out "$T/c" >/dev/null 2>>"$T/err" ||
	fail "run: $(cat "$T/err")"
! grep -q "note:" "$T/err" && pass "no note where the options act" || fail "notes without cause: $(cat "$T/err")"
"$PY" -c "
import json, sys
for d in sys.argv[1:]:
    assert 'notes' not in json.load(open(d + '/summary.json')), d" "$T/b" "$T/c" &&
	pass "no notes key without a note" || fail "a notes key without a note"

# sweep: each note once for its points; seeds over a replayed trace
"$BIN" sweep --trace "$T/plain.csv" --order priority --sweep rate-scale=1,2 --seeds 2 >/dev/null 2>"$T/err" ||
	fail "sweep: $(cat "$T/err")"
[ "$(grep -c -- "--order priority: no request" "$T/err")" = 1 ] && pass "a sweep says a note once" ||
	fail "sweep notes: $(cat "$T/err")"
grep -q "note: --seeds 2 on a replayed trace (no --arrival): every seed replays the same requests" "$T/err" &&
	pass "seeds over a replayed trace are noted" || fail "no seeds note: $(cat "$T/err")"
"$BIN" sweep --arrival poisson:rate=2 --lengths fixed:prompt=10,output=10 --num-requests 10 --sweep rate-scale=1,2 --seeds 2 \
	>/dev/null 2>"$T/err" || fail "sweep: $(cat "$T/err")"
! grep -q "note: --seeds" "$T/err" && pass "seeds over a generated workload: no note" || fail "seeds note without cause"

# plan: before the search
"$BIN" plan --order priority --arrival poisson:rate=4 --lengths fixed:prompt=128,output=16 --num-requests 20 \
	--gpus h100-sxm --tp 1 --max-gpus 1 --modes colocated >/dev/null 2>"$T/err" || fail "plan: $(cat "$T/err")"
grep -q "note: --order priority: no request of" "$T/err" && pass "plan notes --order priority" ||
	fail "plan note: $(cat "$T/err")"
finish
