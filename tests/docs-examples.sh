# Every command in README.md and docs/*.md written as "$ servesim ..." runs
# and exits 0 (examples that read ../shared/data are skipped where it is
# absent, with those reading a store such an example would have written,
# and those ending in "# minutes: ..." everywhere).  Commands run in a scratch directory.
. "$(dirname "$0")/cli-lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SERVESIM_SHARED_DATA:-$SRC/../shared/data}
n=0
unmade=
grep -h -E '^\$ servesim ' "$SRC/README.md" "$SRC"/docs/*.md | sed 's/^\$ servesim //' >"$T/cmds"
while IFS= read -r args; do
	case "$args" in
	*"# minutes:"*)
		# an example marked as taking minutes (a whole trace): not rerun here
		echo "skip (takes minutes): servesim $args"; continue ;;
	*../shared/data*)
		if [ ! -d "$SHARED" ]; then
			# a store it would have written: later examples reading it
			# are skipped too
			st=$(printf '%s' "$args" | sed -n 's/.*--store \([^ ]*\).*/\1/p')
			[ -n "$st" ] && unmade="$unmade $st"
			echo "skip (no shared data): servesim $args"
			continue
		fi
		args=$(printf '%s' "$args" | sed "s#\.\./shared/data#$SHARED#g") ;;
	esac
	skip=
	for st in $unmade; do
		case " $args " in *" --store $st "* | *" --calibration $st "*) skip=$st ;; esac
	done
	[ -z "$skip" ] || { echo "skip (no shared data made $skip): servesim $args"; continue; }
	n=$((n + 1))
	if (cd "$T" && eval "\"$BIN\" $args" >"$T/out" 2>"$T/err"); then
		pass "servesim $args"
	else
		fail "servesim $args: $(cat "$T/err")"
	fi
done <"$T/cmds"
[ "$n" -gt 0 ] || fail "no examples found"
finish
