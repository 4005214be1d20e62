# Shared helpers for the command-line tests (sourced).
set -u
BIN=${SERVESIM_BIN:?SERVESIM_BIN must point at the servesim binary}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

# Under `meson test --setup valgrindcli` (SERVESIM_VALGRIND=1) every
# servesim a test runs goes through memcheck, each process logging to its
# own file; finish() fails the test when any of them reported an error or
# a definite leak.  (The wrapper lives outside $T: tests may empty $T.)
VG=
if [ "${SERVESIM_VALGRIND:-}" = 1 ]; then
	VG=$(mktemp -d)
	trap 'rm -rf "$T" "$VG"' EXIT
	printf '#!/bin/sh\nexec valgrind -q --error-exitcode=86 --num-callers=40 --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite --suppressions="%s" --log-file="%s/log.%%p" "%s" "$@"\n' \
		"$(cd "$(dirname "$0")" && pwd)/valgrind.supp" "$VG" "$BIN" >"$VG/servesim"
	chmod +x "$VG/servesim"
	BIN=$VG/servesim
fi

# expect_error STATUS PATTERN -- servesim args...
# Runs servesim, expects exit STATUS, exactly one line on stderr matching PATTERN.
expect_error() {
	want=$1 pat=$2
	shift 3
	"$BIN" "$@" >"$T/out" 2>"$T/err"
	got=$?
	lines=$(wc -l <"$T/err")
	if [ "$got" -ne "$want" ]; then
		fail "servesim $* exited $got, expected $want ($(cat "$T/err"))"
	elif [ "$lines" -ne 1 ]; then
		fail "servesim $*: expected one error line, got $lines: $(cat "$T/err")"
	elif ! grep -q -E -e "$pat" "$T/err"; then
		fail "servesim $*: error '$(cat "$T/err")' does not match '$pat'"
	else
		pass "servesim $* -> $(cat "$T/err")"
	fi
}
finish() {
	if [ -n "$VG" ]; then
		for f in "$VG"/log.*; do
			[ -s "$f" ] && fail "valgrind: $(grep -m 3 -v '^==[0-9]*== *$' "$f" | tr '\n' ' ')"
		done
	fi
	[ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
	exit 0
}
