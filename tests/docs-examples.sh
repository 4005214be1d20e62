# Every command in README.md and docs/*.md written as "$ servesim ..." runs
# and exits 0 (examples that read ../shared/data are skipped where it is
# absent, and those ending in "# minutes: ..." everywhere).  Commands run in a scratch directory.
. "$(dirname "$0")/cli-lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SERVESIM_SHARED_DATA:-$SRC/../shared/data}
n=0
grep -h -E '^\$ servesim ' "$SRC/README.md" "$SRC"/docs/*.md | sed 's/^\$ servesim //' >"$T/cmds"
while IFS= read -r args; do
	case "$args" in
	*"# minutes:"*)
		# an example marked as taking minutes (a whole trace): not rerun here
		echo "skip (takes minutes): servesim $args"; continue ;;
	*../shared/data*)
		[ -d "$SHARED" ] || { echo "skip (no shared data): servesim $args"; continue; }
		args=$(printf '%s' "$args" | sed "s#\.\./shared/data#$SHARED#g") ;;
	esac
	n=$((n + 1))
	if (cd "$T" && eval "\"$BIN\" $args" >"$T/out" 2>"$T/err"); then
		pass "servesim $args"
	else
		fail "servesim $args: $(cat "$T/err")"
	fi
done <"$T/cmds"
[ "$n" -gt 0 ] || fail "no examples found"
finish
