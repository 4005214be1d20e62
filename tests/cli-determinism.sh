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

# A queue timeout under overload: the expired are found by deadline and
# dropped in the order the scan of the whole queue met them, identically
# from run to run, under fcfs, a static-key order and a tenant-key order.
# The counts are those the engine gave when it scanned every waiting
# request at every step (before the deadline index), which ran kernels
# only: --engine none keeps these runs the ones that were counted (the
# default vllm profile's host time and API latency move every deadline).
tq="--engine none --arrival poisson:rate=60 --lengths lognormal:prompt_mean=600,prompt_cv=1,output_mean=150,output_cv=1 --num-requests 1500 --tenants 3 --seed 5 --admission timeout:ms=1500 --quiet"
for want in fcfs:423 sjf:341 vtc:440; do
	o=${want%%:*} n=${want#*:}
	"$BIN" run $tq --order "$o" --out "$T/t1" || fail "timeout run $o"
	"$BIN" run $tq --order "$o" --out "$T/t2" || fail "timeout run $o again"
	for f in summary.json requests.csv; do
		cmp -s "$T/t1/$f" "$T/t2/$f" && pass "timeout, --order $o: identical $f" ||
			fail "timeout, --order $o: $f differs"
	done
	got=$(grep -c 'queue timeout' "$T/t1/requests.csv")
	[ "$got" = "$n" ] && pass "timeout, --order $o: $n requests dropped" ||
		fail "timeout, --order $o: $got requests dropped, expected $n"
	rm -rf "$T/t1" "$T/t2"
done
finish
