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
# crafted results.db files: nonsense is refused with one line naming the
# file (times far apart once overflowed int64 in the TTFT subtraction)
if command -v sqlite3 >/dev/null; then
	craft() {  # craft NAME SQL: a copy of run a with SQL applied to its results.db
		rm -rf "${T:?}/$1"
		cp -r "$T/a" "$T/$1"
		sqlite3 "$T/$1/results.db" "$2" || fail "sqlite3 $1"
	}
	craft overflow "UPDATE requests SET arrival_ns = -9223372036854775807,
		first_token_ns = 9223372036854775807 WHERE id = 0 AND state = 'finished'"
	expect_error 1 "overflow/results.db: finished request 0: arrival_ns '-9223372036854775807': expected a time >= 0 ns" -- compare "$T/a" "$T/overflow"
	craft order "UPDATE requests SET finish_ns = first_token_ns - 1 WHERE id = 0"
	expect_error 1 "order/results.db: request 0: .*expected arrival <= first token <= finish" -- compare "$T/a" "$T/order"
	craft nulltime "UPDATE requests SET first_token_ns = NULL WHERE id = 1"
	expect_error 1 "nulltime/results.db: finished request 1: first_token_ns 'NULL'" -- compare "$T/a" "$T/nulltime"
	craft realtime "UPDATE requests SET finish_ns = 1e300 WHERE id = 1"
	expect_error 1 "realtime/results.db: finished request 1: finish_ns" -- compare "$T/a" "$T/realtime"
	craft tokens "UPDATE requests SET output_tokens = -4 WHERE id = 2"
	expect_error 1 "tokens/results.db: request 2: output_tokens '-4': expected an integer" -- compare "$T/tokens" "$T/a"
	craft dup "UPDATE requests SET id = 3 WHERE id = 4"
	expect_error 1 "dup/results.db: requests: id 3 appears twice" -- compare "$T/a" "$T/dup"
	craft badid "UPDATE requests SET id = 100000 WHERE id = 4"
	expect_error 1 "badid/results.db: requests: id 100000 out of range" -- compare "$T/a" "$T/badid"
	craft negrps "UPDATE summary SET json = json_set(json, '$.throughput.requests_per_s', -5)"
	expect_error 1 "negrps/results.db: summary: throughput.requests_per_s is not a number >= 0" -- compare "$T/a" "$T/negrps"
	craft textitl "UPDATE summary SET json = json_set(json, '$.itl_ms.p50', 'NaN')"
	expect_error 1 "textitl/results.db: summary: itl_ms.p50 is not a number" -- compare "$T/a" "$T/textitl"
	# a view is code a SELECT runs: a recursive requests view once hung compare
	craft view "ALTER TABLE requests RENAME TO r0; CREATE VIEW requests AS
		WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x AS id FROM c"
	expect_error 1 "view/results.db: not a servesim results database .*no views or triggers" -- compare "$T/a" "$T/view"
	craft trigger "CREATE TRIGGER t AFTER INSERT ON runs BEGIN SELECT 1; END"
	expect_error 1 "trigger/results.db: not a servesim results database" -- compare "$T/trigger" "$T/a"
else
	echo "skip: crafted results.db (no sqlite3 command)"
fi
finish
