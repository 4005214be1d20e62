# The same seed and inputs give byte-identical outputs; another seed does not.
. "$(dirname "$0")/cli-lib.sh"

args="--arrival gamma:rate=8,cv=2 --lengths lognormal:prompt_mean=800,prompt_cv=1,output_mean=150,output_cv=1 --num-requests 1500 --instances 2 --router lot --quiet"
"$BIN" run $args --seed 7 --out "$T/a" || fail "run a"
"$BIN" run $args --seed 7 --out "$T/b" || fail "run b"
"$BIN" run $args --seed 8 --out "$T/c" || fail "run c"
for f in summary.json requests.csv summary.txt; do
	cmp -s "$T/a/$f" "$T/b/$f" && pass "same seed: identical $f" || fail "same seed: $f differs"
done
cmp -s "$T/a/summary.json" "$T/c/summary.json" && fail "different seeds gave identical summaries" ||
	pass "different seed: different summary"
finish
