# servesim compare: identical runs compare at zero error; different cost
# models give the errors the two runs' files imply; runs of different
# traces and non-result directories are refused with one line.
. "$(dirname "$0")/cli-lib.sh"

"$BIN" run --num-requests 200 --cost-model roofline --out "$T/a" --quiet || fail "run a"
"$BIN" run --num-requests 200 --cost-model roofline --out "$T/a2" --quiet || fail "run a2"
"$BIN" run --num-requests 200 --cost-model roofline:gemm_eff=0.4 --out "$T/b" --quiet || fail "run b"
"$BIN" run --num-requests 150 --out "$T/c" --quiet || fail "run c"

if "$BIN" compare "$T/a" "$T/a2" --json "$T/same.json" >"$T/out" 2>"$T/err"; then
	grep -q '"mape_pct": 0.0' "$T/same.json" && pass "identical runs: zero per-request error" ||
		fail "identical runs: nonzero error: $(grep mape "$T/same.json" | head -3)"
else
	fail "compare identical runs: $(cat "$T/err")"
fi

if "$BIN" compare "$T/a" "$T/b" --json "$T/diff.json" --plot "$T/plots" >"$T/out" 2>"$T/err"; then
	grep -q "TTFT" "$T/out" && pass "compare prints a table" || fail "no table: $(cat "$T/out")"
	# a slower GEMM makes every step longer: TPOT p50 of b is above a's
	awk '/"tpot_ms"/{t=1} t && /"p50"/{p=1} p && /"err_pct"/{gsub(/[^0-9.eE+-]/,"",$2); print $2; exit}' \
		"$T/diff.json" >"$T/tpot_err"
	e=$(cat "$T/tpot_err")
	awk -v e="$e" 'BEGIN{exit !(e > 5)}' && pass "slower GEMMs raise TPOT p50 (${e}%)" ||
		fail "TPOT p50 error '$e' not > 5%"
	[ -s "$T/plots/compare_ttft_cdf.dat" ] && pass "plot data written" || fail "no plot data"
else
	fail "compare a b: $(cat "$T/err")"
fi

expect_error 1 "same trace" -- compare "$T/a" "$T/c"
expect_error 1 "results.db" -- compare "$T/a" "$T/nowhere"
expect_error 2 "two result directories" -- compare "$T/a"
finish
