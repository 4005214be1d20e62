# SIGINT and SIGTERM end `servesim run` and `servesim live` cleanly
# (docs/servesim.1.md "SIGNALS"): the results so far are written and
# marked interrupted (summary.json "status": "interrupted", "interrupted":
# the signal; summary.txt says so in its first line), one line on stderr
# names the signal, the exit status is 128 + the signal (130, 143), and no
# temporary file is left.  A complete run has no "interrupted" key.
. "$(dirname "$0")/cli-lib.sh"

# The signal is sent once servesim's handler is in place, seen in
# /proc/PID/status (SigCgt has SIGINT's bit 0x2 and SIGTERM's 0x4000): a
# signal before it would kill by the default action, a different test.
# Valgrind catches every signal itself from its start, so there the bits
# say nothing about servesim's handler: skip under it.
if [ -n "$VG" ]; then
	echo "skip: under valgrind the handler's installation cannot be observed (SigCgt is valgrind's)"
	exit 77
fi
[ -r /proc/self/status ] || { echo "skip: no /proc/PID/status to see the handler in"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 (to read summary.json) not found"; exit 77; }
# A shell's background job starts with SIGINT ignored, and servesim keeps a
# signal ignored at its start ignored (a test of that below): env resets
# them to the default first (coreutils 8.31 or later).
env --default-signal=INT true 2>/dev/null ||
	{ echo "skip: env --default-signal (coreutils >= 8.31) not available"; exit 77; }

# wait_handler PID: 0 once PID catches SIGINT and SIGTERM; 1 if it exits or
# 60 s pass first (polled every 50 ms: no fixed sleep to guess on a loaded
# machine)
wait_handler() {
	i=0
	while [ "$i" -lt 1200 ]; do
		cgt=$(awk '/^SigCgt:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 1
		[ -n "$cgt" ] || return 1
		[ $((0x$cgt & 0x4002)) -eq $((0x4002)) ] && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# interrupt NAME SIGNAL STATUS -- servesim args...: run in the background
# with --out $T/NAME, send SIGNAL once the handler is in, check the outcome
interrupt() {
	name=$1 sig=$2 want=$3
	shift 4
	env --default-signal=INT,TERM "$BIN" "$@" --out "$T/$name" >"$T/$name.out" 2>"$T/$name.err" &
	pid=$!
	if ! wait_handler "$pid"; then
		wait "$pid"
		fail "$name: servesim never caught SIGINT/SIGTERM (exit $?): $(cat "$T/$name.err")"
		return
	fi
	t0=$(date +%s)
	kill "-$sig" "$pid"
	wait "$pid"
	got=$?
	took=$(($(date +%s) - t0))
	[ "$got" -eq "$want" ] && pass "$name: SIG$sig -> exit $got" ||
		fail "$name: SIG$sig gave exit $got, expected $want: $(cat "$T/$name.err")"
	[ "$(wc -l <"$T/$name.err")" -eq 1 ] &&
		grep -qE "^servesim: interrupted by SIG$sig after [0-9]+ of [0-9]+ requests; results so far in $T/$name\$" \
			"$T/$name.err" && pass "$name: one line on stderr: $(cat "$T/$name.err")" ||
		fail "$name: stderr: $(cat "$T/$name.err")"
	python3 - "$T/$name/summary.json" "SIG$sig" <<'PY' && pass "$name: summary.json marked interrupted by SIG$sig, partial" ||
import json, sys
j = json.load(open(sys.argv[1]))
r = j["requests"]
# total: the workload's requests, or in a closed loop those sent, all of
# which may have finished (config.requests: the workload's)
ok = (j["status"] == "interrupted" and j["interrupted"] == sys.argv[2]
      and r["completed"] < j["config"]["requests"]
      and r["completed"] + r["rejected"] + r["unfinished"] == r["total"])
if not ok:
    print(j["status"], j.get("interrupted"), r, file=sys.stderr)
sys.exit(0 if ok else 1)
PY
		fail "$name: summary.json not marked interrupted"
	head -n 1 "$T/$name/summary.txt" | grep -q "^INTERRUPTED by SIG$sig: results so far" &&
		pass "$name: summary.txt says so in its first line" ||
		fail "$name: summary.txt starts '$(head -n 1 "$T/$name/summary.txt")'"
	for f in requests.csv results.db; do
		[ -s "$T/$name/$f" ] || fail "$name: $f not written"
	done
	left=$(find "$T/$name" -name '*.tmp')
	[ -z "$left" ] && pass "$name: no temporary file left" || fail "$name: left $left"
}

# A simulation of 200k requests on 4 instances: seconds of CPU on any
# machine, interrupted in the event loop.
sim="run --model llama-3.1-8b --gpu h100-sxm --instances 4 --arrival poisson:rate=200 --lengths lognormal:prompt_mean=1000,prompt_cv=1,output_mean=200,output_cv=1 --num-requests 200000 --quiet"
interrupt sim-int INT 130 -- $sim
interrupt sim-term TERM 143 -- $sim

# A live run on the CPU with the tiny model of cli-live.sh whose 200
# arrivals spread over about 100 s: the signal ends the wait for the next
# one (no SA_RESTART), and the run stops at once.
tiny="--model llama-3.2-1b --width-div 16 --layers 2 --threads 1 --kv-blocks 512 --lengths fixed:prompt=48,output=12 --quiet"
interrupt live-term TERM 143 -- live $tiny --arrival poisson:rate=2 --num-requests 200
# One client that thinks 10 minutes after its first request: the live clock
# waits for its second send, and the signal must end that wait, not the
# next send (the results of 3 requests are written in well under a minute)
interrupt live-int INT 130 -- live $tiny --concurrency 1 --think-time constant:ms=600000 --num-requests 3
[ "$took" -lt 60 ] && pass "live-int: stopped ${took} s after the signal, not at the next send" ||
	fail "live-int: took ${took} s after the signal: the wait was not interrupted"

# wait_cpu PID TICKS: 0 once PID has run TICKS clock ticks of user time
# (utime, field 14 of /proc/PID/stat; 100 a second on Linux), 1 if it exits
wait_cpu() {
	while :; do
		ut=$(awk '{ print $14 }' "/proc/$1/stat" 2>/dev/null) || return 1
		[ -n "$ut" ] || return 1
		[ "$ut" -ge "$2" ] && return 0
		sleep 0.05
	done
}

# calibrate run stops before its next point, commits the points measured
# (a store that got none is removed, as after a failure) and exits 130:
# once as soon as the handler is in (usually before the first point), once
# after 1.5 s of CPU, well into the GEMMs (the whole sweep takes over 20 s)
for when in handler cpu; do
	rm -rf "$T/cal"
	mkdir -p "$T/cal"
	SERVESIM_POWERCAP_ROOT="$T/none" env --default-signal=INT,TERM "$BIN" calibrate run --model llama-3.2-1b --width-div 32 \
		--layers 1 --warmup 0 --repeats 20 --store "$T/cal/c.db" >"$T/cal.out" 2>"$T/cal.err" &
	pid=$!
	if wait_handler "$pid" && { [ "$when" = handler ] || wait_cpu "$pid" 150; }; then
		kill -INT "$pid"
		wait "$pid"
		got=$?
		n=$(sed -n 's/^servesim: interrupted by SIGINT after \([0-9]*\) points measured (0 already there); they are in .*, and a rerun resumes$/\1/p' "$T/cal.err")
		grep -q "^servesim: interrupted by SIGINT before a point was measured; $T/cal/c.db removed\$" \
			"$T/cal.err" && n=0
		[ "$got" -eq 130 ] && [ "$(wc -l <"$T/cal.err")" -eq 1 ] && [ -n "$n" ] &&
			pass "calibrate run: SIGINT -> exit 130, $(cat "$T/cal.err")" ||
			fail "calibrate run: exit $got, stderr $(cat "$T/cal.err")"
		[ "$when" = cpu ] && [ "${n:-0}" -eq 0 ] &&
			fail "calibrate run: no point measured after 1.5 s of CPU: the commit path is untested"
		if [ "${n:-0}" -gt 0 ]; then
			"$BIN" calibrate list --store "$T/cal/c.db" 2>&1 | grep -q "^$n measurements" &&
				pass "calibrate run: the $n points are committed" ||
				fail "calibrate run: store holds $("$BIN" calibrate list --store "$T/cal/c.db" 2>&1 | tail -n 1), said $n"
		else
			[ ! -e "$T/cal/c.db" ] && pass "calibrate run: a store with no point is removed" ||
				fail "calibrate run: empty store left"
		fi
		left=$(find "$T/cal" -name '*.tmp' -o -name '*-journal' -o -name '*-wal')
		[ -z "$left" ] && pass "calibrate run: no temporary or journal file left" || fail "calibrate run left $left"
	else
		wait "$pid"
		fail "calibrate run ($when) ended before SIGINT: $(cat "$T/cal.err")"
	fi
done

# A second signal, SIGTERM after SIGINT, kills at once (the default
# action): no summary, no line; the 200k requests' results take seconds to
# write, so the second signal comes while they are written.
env --default-signal=INT,TERM "$BIN" $sim --out "$T/twice" >/dev/null 2>"$T/twice.err" &
pid=$!
if wait_handler "$pid"; then
	kill -INT "$pid"
	sleep 0.2
	kill -TERM "$pid"
	wait "$pid"
	got=$?
	[ "$got" -eq 143 ] && [ ! -s "$T/twice.err" ] && [ ! -e "$T/twice/summary.json" ] &&
		pass "a second signal kills at once (exit $got, nothing printed, no summary.json)" ||
		fail "second signal: exit $got, $(cat "$T/twice.err"), $(ls "$T/twice" 2>&1 | tr '\n' ' ')"
else
	wait "$pid"
	fail "twice: never caught SIGINT/SIGTERM"
fi

# SIGINT ignored when servesim starts (as in a script's background job)
# stays ignored: the run is not stopped by it, and SIGTERM still is.
env --ignore-signal=INT "$BIN" $sim --out "$T/ign" >/dev/null 2>"$T/ign.err" &
pid=$!
i=0
until [ $((0x$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0) & 0x4000)) -ne 0 ] ||
	[ "$i" -ge 1200 ]; do
	sleep 0.05
	i=$((i + 1))
done
cgt=$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status")
kill -INT "$pid"
sleep 0.5
kill -TERM "$pid"
wait "$pid"
got=$?
[ $((0x$cgt & 0x2)) -eq 0 ] && [ "$got" -eq 143 ] && grep -q "interrupted by SIGTERM" "$T/ign.err" &&
	pass "an ignored SIGINT stays ignored; SIGTERM still stops the run" ||
	fail "ignored SIGINT: SigCgt $cgt, exit $got, $(cat "$T/ign.err")"

# A complete run: status complete, no "interrupted" key, first line the scenario.
"$BIN" run --num-requests 50 --quiet --out "$T/done" 2>"$T/err" || fail "complete run: $(cat "$T/err")"
python3 - "$T/done/summary.json" <<'PY' && pass "a complete run has no interrupted key" ||
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if j["status"] == "complete" and "interrupted" not in j else 1)
PY
	fail "complete run's summary.json: $(grep -E '"(status|interrupted)"' "$T/done/summary.json")"
head -n 1 "$T/done/summary.txt" | grep -q '^scenario:' && pass "a complete run's summary starts with its scenario" ||
	fail "complete summary.txt starts '$(head -n 1 "$T/done/summary.txt")'"
finish
