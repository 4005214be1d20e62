#!/bin/sh
# Sessions and agents on the command line (issue 16 section 1): the
# --sessions generator (the documented example), a session CSV, the
# exgentic agent trace, summary.json "sessions" only with sessions, and
# bad specs, combinations and files with their exit codes.
. "$(dirname "$0")/cli-lib.sh"

D=${SERVESIM_TEST_DATA:?}
X=${SERVESIM_SHARED_DATA:-}/traces/agent_sessions/exgentic_sessions.csv

# the example of the issue and docs/workloads.md, deterministic by --seed
if "$BIN" run --sessions rate=1,turns=5,think_s=5 --prefix-cache on --seed 2 \
	--out "$T/o1" >"$T/a1" 2>&1 &&
   "$BIN" run --sessions rate=1,turns=5,think_s=5 --prefix-cache on --seed 2 \
	--out "$T/o3" >/dev/null 2>&1 && cmp -s "$T/o1/summary.json" "$T/o3/summary.json"; then
	pass "--sessions rate=1,turns=5,think_s=5 runs, deterministic"
else
	fail "--sessions example: $(tail -3 "$T/a1")"
fi
grep -q "^sessions: 100 total, 100 completed" "$T/a1" ||
	fail "--sessions: 100 sessions by default: $(grep '^sessions' "$T/a1")"
python3 - "$T/o1/summary.json" <<'PY' || fail "summary.json sessions"
import json, sys
s = json.load(open(sys.argv[1]))["sessions"]
assert s["count"] == 100 and s["completed"] + s["dropped"] + s["unfinished"] == 100, s
assert s["completion_s"]["p50"] > 0 and s["completion_s"]["p99"] >= s["completion_s"]["p50"]
hit = s["cache_hit_by_turn"]
assert hit[0]["cached_tokens"] == 0, hit[0]
assert hit[1]["hit_ratio"] > 0.3, hit[1]     # turn 1 re-sends turn 0
assert s["ttft_ms_by_turn"][0]["n"] == 100
PY
pass "summary.json has sessions {count, completed, completion_s, by turn}"
# requests.csv names each call's session, turn and branch, and its cached
# prompt tokens; they agree with summary.json's per-turn figures
python3 - "$T/o1/requests.csv" "$T/o1/summary.json" <<'PY' || fail "requests.csv session columns"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
s = json.load(open(sys.argv[2]))["sessions"]
assert list(rows[0])[-4:] == ["session", "turn", "branch", "cached_tokens"], list(rows[0])
assert len({r["session"] for r in rows}) == s["count"] == 100
assert sum(1 for r in rows if r["turn"] == "0") == 100
assert all(r["branch"] == "0" for r in rows)          # no fan-out
for t in (0, 1, 2):
    want = s["cache_hit_by_turn"][t]["cached_tokens"]
    got = sum(int(r["cached_tokens"]) for r in rows if r["turn"] == str(t))
    assert got == want, (t, got, want)
# a session's calls are consecutive, turns counting up from 0
prev = None
for r in rows:
    k = (int(r["session"]), int(r["turn"]))
    assert prev is None or k == (prev[0], prev[1] + 1) or k == (prev[0] + 1, 0), (prev, k)
    prev = k
PY
pass "requests.csv has session, turn, branch and cached_tokens with sessions"

# without sessions, no "sessions" anywhere
"$BIN" run --arrival poisson:rate=5 --lengths fixed:prompt=64,output=8 --num-requests 20 \
	--out "$T/o2" >/dev/null 2>&1 || fail "plain run"
if grep -q '"sessions"' "$T/o2/summary.json" || grep -q '^sessions' "$T/o2/summary.txt"; then
	fail "a run without sessions reports sessions"
elif head -1 "$T/o2/requests.csv" | grep -q session; then
	fail "a run without sessions has session columns in requests.csv"
else
	pass "no sessions block without sessions"
fi

# the native session CSV, detected and listed
if "$BIN" run --trace "$D/sessions-example.csv" --prefix-cache on >"$T/out" 2>&1 &&
   grep -q "^sessions: 2 total, 2 completed" "$T/out"; then
	pass "session CSV replays"
else
	fail "session CSV: $(cat "$T/out")"
fi
"$BIN" list formats >"$T/formats" 2>&1
if grep -q "^ *sessions" "$T/formats" && grep -q "^ *exgentic" "$T/formats"; then
	pass "list formats names sessions and exgentic"
else
	fail "list formats: $(cat "$T/formats")"
fi

# --num-requests counts sessions; --rate-scale scales their starts
"$BIN" run --sessions rate=2,turns=3,think_s=1 --num-requests 7 >"$T/out" 2>&1 &&
	grep -q "^sessions: 7 total" "$T/out" && pass "--num-requests counts sessions" ||
	fail "--num-requests with --sessions: $(grep '^sessions' "$T/out")"

expect_error 2 "^servesim: --sessions: missing turns" -- run --sessions rate=1,think_s=1
expect_error 2 "^servesim: --sessions: unknown key 'bogus'" -- \
	run --sessions rate=1,turns=2,think_s=1,bogus=1
expect_error 2 "^servesim: --sessions cannot be combined with --concurrency" -- \
	run --sessions rate=1,turns=2,think_s=1 --concurrency 4
expect_error 2 "^servesim: --sessions cannot be combined with --arrival" -- \
	run --sessions rate=1,turns=2,think_s=1 --arrival poisson:rate=1
expect_error 2 "^servesim: --sessions with --trace: 'rate' does not apply to a trace" -- \
	run --trace "$D/sessions-example.csv" --sessions rate=1
expect_error 2 "^servesim: --rate with a session trace: not supported" -- \
	run --trace "$D/sessions-example.csv" --rate 3
H=session,call,new_tokens,output_tokens,think_ms,arrival_ms
printf '%s\na,0,10,5,,0\na,2,1,1,1,\n' "$H" >"$T/bad.csv"
expect_error 1 "^servesim: $T/bad.csv:3: session's call 2 follows call 0" -- \
	run --trace "$T/bad.csv"
printf '%s\na,0,10,5,,0\n' "$H" >"$T/s.csv"
expect_error 2 "^servesim: a session trace cannot be replayed closed loop" -- \
	run --trace "$T/s.csv" --concurrency 2

# with a prefix-aware router over 4 instances, and disaggregated
S="--sessions rate=4,turns=4,think_s=2 --num-requests 40 --prefix-cache on"
for extra in "--instances 4 --router prefix" "--prefill-instances 1 --decode-instances 1"; do
	if "$BIN" run $S $extra >"$T/out" 2>&1 && grep -q "^sessions: 40 total, 40 completed" "$T/out"
	then
		pass "--sessions with $extra"
	else
		fail "--sessions with $extra: $(grep -E '^sessions|servesim:' "$T/out")"
	fi
done

# live runs the same session release against the CPU kernels: every call
# of every session finishes, and later turns find their prefix cached
if "$BIN" live --model llama-3.2-1b --width-div 16 --layers 2 --kv-blocks 512 \
	--sessions rate=5,turns=fixed:3,think=fixed:0.05 --lengths fixed:prompt=48,output=12 \
	--num-requests 3 --prefix-cache on --out "$T/live" -q 2>"$T/err"; then
	python3 - "$T/live/summary.json" <<'PY' && pass "live with --sessions" ||
import json, sys
s = json.load(open(sys.argv[1]))["sessions"]
assert s["count"] == 3 and s["completed"] == 3 and s["calls"] == 9, s
assert all(t["cached_tokens"] > 0 for t in s["cache_hit_by_turn"][1:]), s["cache_hit_by_turn"]
PY
		fail "live sessions: $(grep -A4 '"sessions"' "$T/live/summary.json")"
else
	fail "live with --sessions: $(cat "$T/err")"
fi

# the exgentic agent trace (shared data)
if [ ! -r "$X" ]; then
	echo "skip: $X absent"
	finish
	exit 77
fi
for pc in on off; do
	"$BIN" run --trace "$X" --prefix-cache $pc --out "$T/x$pc" >/dev/null 2>&1 ||
		fail "exgentic --prefix-cache $pc"
done
python3 - "$T/xon/summary.json" "$T/xoff/summary.json" <<'PY' || fail "exgentic hit ratios"
import json, sys
on = json.load(open(sys.argv[1]))["sessions"]
off = json.load(open(sys.argv[2]))["sessions"]
assert on["count"] == 18 and on["calls"] == 167, on["count"]
# later turns re-send a prompt of ~5-100K tokens growing by a few hundred:
# nearly all of it is found with the cache, none without
assert all(t["hit_ratio"] > 0.9 for t in on["cache_hit_by_turn"][1:]), on["cache_hit_by_turn"]
assert all(t["cached_tokens"] == 0 for t in off["cache_hit_by_turn"]), off
PY
pass "exgentic trace: hit ratio > 90% from turn 1 with the prefix cache, 0 without"
"$BIN" run --trace "$X" --sessions think=gap,max_turns=3 >"$T/out" 2>&1 &&
	grep -q "^sessions: 18 total" "$T/out" && pass "exgentic with think=gap,max_turns=3" ||
	fail "exgentic options: $(cat "$T/out")"
finish
