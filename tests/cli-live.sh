# servesim live on the CPU backend with a tiny model and a short trace:
# it completes every request with the same results schema, marked live;
# `servesim compare` reads it against its simulation; a kernel failure ends
# the run with one clear line and keeps the results recorded so far.
. "$(dirname "$0")/cli-lib.sh"

args="--model llama-3.2-1b --width-div 16 --layers 2 --threads 1 --kv-blocks 512 --arrival poisson:rate=40 --lengths fixed:prompt=48,output=12 --num-requests 30 --quiet"
if "$BIN" live $args --out "$T/live" 2>"$T/err"; then
	grep -q '"mode": "live"' "$T/live/summary.json" && grep -q '"requests_completed": 30' "$T/live/summary.json" &&
		pass "live run completes all 30 requests, marked live" ||
		fail "live summary: $(grep -E '"(mode|requests_completed)"' "$T/live/summary.json")"
	for f in requests.csv results.db summary.txt; do
		[ -s "$T/live/$f" ] || fail "live run did not write $f"
	done
else
	fail "live run failed: $(cat "$T/err")"
fi
sim_args=$(printf '%s' "$args" | sed 's/--width-div 16 --layers 2 --threads 1 //')
"$BIN" run $sim_args --out "$T/sim" 2>"$T/err" || fail "simulation of the same scenario: $(cat "$T/err")"
"$BIN" compare "$T/live" "$T/sim" >"$T/cmp" 2>"$T/err" && pass "compare live against sim" ||
	fail "compare: $(cat "$T/err")"

SERVESIM_LIVE_FAIL_AT_STEP=4 "$BIN" live $args --out "$T/failed" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "kernel failure" "$T/err" &&
	pass "a kernel failure ends the run: $(cat "$T/err")" || fail "failure path: rc=$rc $(cat "$T/err")"
grep -q '"status": "failed"' "$T/failed/summary.json" && [ -s "$T/failed/requests.csv" ] &&
	pass "results so far are kept, marked failed" || fail "no failed-run results"

# Energy is metered where the backend has a meter (RAPL on the CPU) and
# reported absent, not zero, where it has none.
SERVESIM_POWERCAP_ROOT="$T/none" "$BIN" live $args --out "$T/nometer" 2>"$T/err" &&
	grep -q '^energy: not metered' "$T/nometer/summary.txt" &&
	grep -q '"metered": false' "$T/nometer/summary.json" &&
	pass "no meter: energy reported as not metered" ||
	fail "no meter: $(grep energy "$T/nometer/summary.txt") $(cat "$T/err")"
mkdir -p "$T/pc/intel-rapl:0"
echo package-0 >"$T/pc/intel-rapl:0/name"
echo 262143328850 >"$T/pc/intel-rapl:0/max_energy_range_uj"
echo 123456789 >"$T/pc/intel-rapl:0/energy_uj"
SERVESIM_POWERCAP_ROOT="$T/pc" "$BIN" live $args --out "$T/meter" 2>"$T/err" &&
	grep -q '"metered": true' "$T/meter/summary.json" &&
	grep -q '"source": "RAPL' "$T/meter/summary.json" &&
	grep -q 'metered by RAPL' "$T/meter/summary.txt" &&
	pass "RAPL readable: energy metered by it" ||
	fail "RAPL meter: $(grep -E 'source|metered' "$T/meter/summary.json") $(cat "$T/err")"

expect_error 1 "one instance" -- live $args --instances 2
expect_error 2 "unknown option '--backend'" -- run --backend cpu
finish
