#!/bin/sh
# The shell scripts parse and pass shellcheck: every script in scripts/ and
# every *.sh of bench/, tests/ and kernels/cuda/test/, as found when the test
# runs.  `sh -n` on each (`bash -n` on those whose #! names bash);
# `shellcheck -S warning` (errors and warnings; the style notes are not
# enforced) where shellcheck is installed (scripts/setup.sh installs it),
# as sh for the scripts without a #! line (the tests, run with `sh FILE`).
# Deliberate patterns carry a `# shellcheck disable=SCxxxx` with a reason.
# Skipped (77) in sanitized builds: it checks sources, not the build.
cd "$(dirname "$0")/.." || exit 1
[ -z "$SERVESIM_SANITIZED" ] || { echo "skip: same sources as the plain build's run"; exit 77; }

fails=0
n=0
sc=$(command -v shellcheck) || echo "shellcheck not found: only sh -n / bash -n" >&2
for f in scripts/* bench/*.sh tests/*.sh kernels/cuda/test/*.sh; do
	[ -f "$f" ] || continue
	first=$(head -n 1 "$f")
	case "$f" in
	*.sh) ;;
	*) case "$first" in '#!'*sh*) ;; *) continue ;; esac ;;   # not a shell script
	esac
	n=$((n + 1))
	# a bash script's arrays and [[ ]] are syntax errors to sh
	case "$first" in
	'#!'*bash*) parse='bash' ;;
	*) parse='sh' ;;
	esac
	"$parse" -n "$f" || { echo "FAIL: $parse -n $f" >&2; fails=$((fails + 1)); }
	[ -n "$sc" ] || continue
	case "$first" in
	'#!'*) "$sc" -S warning "$f" ;;
	*) "$sc" -S warning -s sh "$f" ;;
	esac || { echo "FAIL: shellcheck $f" >&2; fails=$((fails + 1)); }
done
[ "$n" -gt 40 ] || { echo "FAIL: only $n scripts found" >&2; exit 1; }
[ "$fails" -eq 0 ] || { echo "$fails of $n scripts failed" >&2; exit 1; }
echo "ok: $n scripts"
