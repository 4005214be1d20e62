# File-system safety of every writer: a symbolic link planted at a name a
# writer once used for its temporary file (FILE.tmp, FILE.tmp.PID,
# DIR/.NAME.gnuplot-err.tmp), or at the final name, is never followed: the
# file it points at survives untouched and the final name becomes a
# regular file.  (`exec` keeps the shell's PID, so $$ inside `sh -c` is the
# PID servesim runs with.)
. "$(dirname "$0")/cli-lib.sh"

victim="$T/victim"
printf 'precious\n' >"$victim"
intact() {
	[ "$(cat "$victim")" = precious ] && pass "$1: planted link not followed" ||
		fail "$1: the link target was written: $(head -c 80 "$victim")"
}
regular() {
	[ -f "$1" ] && [ ! -L "$1" ] && [ -s "$1" ] && pass "$1 is a regular file" ||
		fail "$1 is not a written regular file"
}

# compare --json=FILE: FILE.tmp was opened with fopen("w")
"$BIN" run --num-requests 50 --cost-model roofline --out "$T/a" --quiet || fail "run a"
ln -s "$victim" "$T/cmp.json.tmp"
ln -s "$victim" "$T/cmp2.json"
if "$BIN" compare "$T/a" "$T/a" --label a1 --label a2 --json="$T/cmp.json" >/dev/null 2>"$T/err" &&
   "$BIN" compare "$T/a" "$T/a" --label a1 --label a2 --json="$T/cmp2.json" >/dev/null 2>>"$T/err"; then
	intact "compare --json"
	regular "$T/cmp.json"
	regular "$T/cmp2.json"
else
	fail "compare: $(cat "$T/err")"
fi

# calibrate import into a new store (FILE.tmp.PID) and export (FILE.tmp.PID)
prof="${SERVESIM_SHARED_DATA:-}/profiles/aiconfigurator/a100_sxm/vllm0.14.0_custom_allreduce_perf.csv"
if [ -r "$prof" ]; then
	if sh -c 'ln -s "$1" "$2.tmp.$$" && exec "$3" calibrate import --quiet --store "$2" "$4"' \
		sh "$victim" "$T/s.db" "$BIN" "$prof" 2>"$T/err"; then
		intact "calibrate import"
		regular "$T/s.db"
	else
		fail "calibrate import: $(cat "$T/err")"
	fi
	if sh -c 'ln -s "$1" "$2.tmp.$$" && exec "$3" calibrate export --store "$4" --out "$2"' \
		sh "$victim" "$T/export.csv" "$BIN" "$T/s.db" 2>"$T/err"; then
		intact "calibrate export --out"
		regular "$T/export.csv"
	else
		fail "calibrate export: $(cat "$T/err")"
	fi
else
	echo "skip: calibrate import/export (no shared profiles at $prof)"
fi

# run --out DIR with a gnuplot on PATH: its stderr went to
# DIR/.NAME.gnuplot-err.tmp, opened with O_TRUNC
mkdir -p "$T/bin" "$T/out"
printf '#!/bin/sh\necho chatter >&2\necho png > "$4"\n' >"$T/bin/gnuplot"
chmod +x "$T/bin/gnuplot"
for n in ttft_cdf tpot_cdf timeseries; do
	ln -s "$victim" "$T/out/.$n.gnuplot-err.tmp"
	ln -s "$victim" "$T/out/.$n.png.tmp"
done
ln -s "$victim" "$T/out/.summary.json.tmp"
ln -s "$victim" "$T/out/requests.csv"
if PATH="$T/bin:$PATH" "$BIN" run --num-requests 50 --out "$T/out" --quiet 2>"$T/err"; then
	intact "run --out"
	regular "$T/out/requests.csv"
	regular "$T/out/ttft_cdf.png"
	left=$(find "$T/out" -name '*.tmp' ! -type l | wc -l)
	[ "$left" -eq 0 ] && pass "no temporary file left" || fail "$left temporary files left"
else
	fail "run --out: $(cat "$T/err")"
fi

rm -rf "$T/out"   # expect_error's scratch file from here on
# Devices and pipes.  A writer renamed its file over whatever stood at the
# name: as root, `calibrate export --out /dev/null` turned the system's
# /dev/null into a regular file.  A FIFO stands in for a device here (the
# same rule covers both): it is written through and stays a FIFO.
mkfifo "$T/pipe" || fail "mkfifo"
timeout 60 cat "$T/pipe" >"$T/piped" &
reader=$!
if timeout 60 "$BIN" compare "$T/a" "$T/a" --label a1 --label a2 --json="$T/pipe" >/dev/null 2>"$T/err"; then
	wait "$reader"
	[ -p "$T/pipe" ] && grep -q '"ttft_ms"' "$T/piped" &&
		pass "compare --json PIPE writes through the pipe, which stays a pipe" ||
		fail "compare --json PIPE: pipe replaced or nothing read ($(head -c 80 "$T/piped"))"
else
	fail "compare --json PIPE: $(cat "$T/err")"
	kill "$reader" 2>/dev/null
fi
# results.db is written by name (SQLite): a pipe there is refused
mkdir "$T/pipedir" && mkfifo "$T/pipedir/results.db"
expect_error 1 "results.db: is a device or a pipe; expected a regular file" -- \
	run --num-requests 5 --cost-model roofline --out "$T/pipedir" --quiet
expect_error 1 "$T: is a directory; expected a file name" -- compare "$T/a" "$T/a" --label a1 --label a2 --json="$T"
# SQLite blocked for ever opening a FIFO, and put its journal beside a device
expect_error 1 "pipe: is not a regular file; expected a calibration store" -- \
	run --num-requests 5 --calibration "$T/pipe" --quiet
expect_error 1 "pipe: is not a regular file; expected a plan database" -- \
	plan --num-requests 20 --max-gpus 1 --db "$T/pipe"
mkdir "$T/fifo-run" && mkfifo "$T/fifo-run/results.db"
expect_error 1 "results.db: is not a regular file" -- compare "$T/a" "$T/fifo-run"
finish
