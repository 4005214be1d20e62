# servesim compare: identical runs compare at zero error; different cost
# models give the errors the two runs' files imply; runs of different
# traces and non-result directories are refused with one line.  N runs
# (three policies): the table's columns, the spread or the differences from
# a reference, the JSON, the plots, and the bad command lines.
. "$(dirname "$0")/cli-lib.sh"

"$BIN" run --num-requests 200 --cost-model roofline --out "$T/a" --quiet || fail "run a"
"$BIN" run --num-requests 200 --cost-model roofline --out "$T/a2" --quiet || fail "run a2"
"$BIN" run --num-requests 200 --cost-model roofline:gemm_eff=0.4 --out "$T/b" --quiet || fail "run b"
"$BIN" run --num-requests 150 --out "$T/c" --quiet || fail "run c"

if "$BIN" compare "$T/a" "$T/a2" --json="$T/same.json" >"$T/out" 2>"$T/err"; then
	grep -q '"mape_pct": 0.0' "$T/same.json" && pass "identical runs: zero per-request error" ||
		fail "identical runs: nonzero error: $(grep mape "$T/same.json" | head -3)"
else
	fail "compare identical runs: $(cat "$T/err")"
fi

if "$BIN" compare "$T/a" "$T/b" --json="$T/diff.json" --plot "$T/plots" >"$T/out" 2>"$T/err"; then
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
expect_error 2 "two or more result directories, got 1" -- compare "$T/a"

# ---- N runs: three policies on one trace, loaded enough to differ ----------
for p in vllm sarathi orca; do
	"$BIN" run --num-requests 300 --rate-scale 3 --policy $p --out "$T/pol/$p" --quiet || fail "run $p"
done
# header WORD...: the table's header (the line above "TTFT p50 ms") is WORDs
header() {
	h=$(grep -B1 "TTFT p50 ms" "$T/out" | head -1 | tr -s ' ' | sed 's/^ //')
	[ "$h" = "$*" ] && pass "table header: $h" || fail "table header '$h', expected '$*'"
}
# summary RUN KEY: a top-level number of RUN's summary.json
summary() {
	grep -m1 "^  \"$2\": " "$T/pol/$1/summary.json" | sed 's/.*: //; s/,$//'
}
if "$BIN" compare "$T/pol/vllm" "$T/pol/sarathi" "$T/pol/orca" --json="$T/n.json" \
	--out "$T/nplots" >"$T/out" 2>"$T/err"; then
	header "vllm sarathi orca max/min best"
	for row in "TTFT p99 ms" "TPOT p50 ms" "E2E p90 ms" "throughput req/s" "output tok/s" \
		"SLO attainment %" "goodput req/s"; do
		grep -q "^  $row " "$T/out" || fail "no row '$row'"
	done
	grep -q "^SLOs: tpot_ms <= 100, ttft_ms <= 2000" "$T/out" && pass "the shared SLOs are named" ||
		fail "SLO line: $(grep SLO "$T/out" | head -2)"
	# spread of goodput: the largest of the three summaries' over the smallest
	g1=$(summary vllm goodput_rps) g2=$(summary sarathi goodput_rps) g3=$(summary orca goodput_rps)
	want=$(awk -v a="$g1" -v b="$g2" -v c="$g3" 'BEGIN{hi=a; lo=a; if(b>hi)hi=b; if(c>hi)hi=c;
		if(b<lo)lo=b; if(c<lo)lo=c; printf "%.3f", hi/lo}')
	got=$(grep "^  goodput req/s" "$T/out" | awk '{print $(NF-1)}')
	[ "$got" = "$want" ] && pass "goodput max/min $got from the summaries ($g1, $g2, $g3)" ||
		fail "goodput max/min '$got', expected $want"
	python3 - "$T/n.json" <<'EOF2' && pass "N-run JSON: runs, names, metrics, spread, reference null" || fail "N-run JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["reference"] is None and d["same_slo"] is True
assert [r["name"] for r in d["runs"]] == ["vllm", "sarathi", "orca"]
assert all(r["status"] == "complete" for r in d["runs"])
for r in d["runs"]:
    m = r["metrics"]
    assert set(m["ttft_ms"]) == {"p50", "p90", "p99"} and m["ttft_ms"]["p50"] > 0
    assert 0 <= m["slo_attainment"] <= 1 and m["goodput_rps"] >= 0 and m["requests_per_s"] > 0
    assert "difference" not in r
# orca (no chunked prefill, one batch at a time) queues far longer here
sp = d["spread"]["ttft_ms"]["p99"]
assert sp["max_over_min"] > 1 and "orca" not in sp["best"], sp
EOF2
	for k in ttft tpot e2e; do
		[ -s "$T/nplots/compare_${k}_cdf.dat" ] && [ -s "$T/nplots/compare_${k}_cdf.gp" ] ||
			fail "no compare_${k}_cdf data or script"
	done
	grep -q "set logscale x" "$T/nplots/compare_ttft_cdf.gp" && grep -q "title 'orca'" "$T/nplots/compare_ttft_cdf.gp" &&
		pass "CDF script: log x, a line per run named" || fail "CDF script: $(tail -3 "$T/nplots/compare_ttft_cdf.gp")"
	if command -v gnuplot >/dev/null; then
		for k in ttft tpot e2e; do
			head -c 8 "$T/nplots/compare_${k}_cdf.png" 2>/dev/null | od -c | grep -q "P   N   G" ||
				fail "compare_${k}_cdf.png is not a PNG"
		done
		pass "PNGs rendered"
	else
		echo "skip: PNGs (no gnuplot)"
	fi
else
	fail "compare of three runs: $(cat "$T/err")"
fi

# --label and --reference: differences from the named run, by hand
if "$BIN" compare "$T/pol/vllm" "$T/pol/sarathi" "$T/pol/orca" --label V --label S --label O \
	--reference S --json="$T/r.json" >"$T/out" 2>"$T/err"; then
	header "V S (ref) O"
	g1=$(summary vllm goodput_rps) g2=$(summary sarathi goodput_rps)
	want=$(awk -v a="$g1" -v r="$g2" 'BEGIN{printf "%+.3f (%+.2f%%)", a - r, 100 * (a - r) / r}')
	got=$(grep "^  goodput req/s" "$T/out" | sed 's/^  goodput req\/s *//' | awk '{print $1, $2}')
	[ "$got" = "$want" ] && pass "V's goodput against S: $got from the summaries ($g1, $g2)" ||
		fail "V's goodput against S '$got', expected '$want'"
	grep -q "per-request errors of O against S" "$T/out" && pass "per-request errors against the reference" ||
		fail "no per-request errors: $(cat "$T/out")"
	python3 - "$T/r.json" "$g1" "$g2" <<'EOF2' && pass "reference JSON: differences and per-request errors" || fail "reference JSON"
import json, sys
d = json.load(open(sys.argv[1]))
v, s = float(sys.argv[2]), float(sys.argv[3])
assert d["reference"] == "S" and "spread" not in d
r = {x["name"]: x for x in d["runs"]}
assert "difference" not in r["S"]
g = r["V"]["difference"]["goodput_rps"]
assert abs(g["abs"] - (v - s)) < 1e-6 and abs(g["pct"] - 100 * (v - s) / s) < 1e-6, g
assert r["O"]["per_request"]["ttft_ms"]["n_matched"] > 0
EOF2
else
	fail "compare --reference S: $(cat "$T/err")"
fi
# names that are not gnuplot-safe as they stand: a quote, an underscore
if "$BIN" compare "$T/pol/vllm" "$T/pol/sarathi" --label "it's" --label 'a_b"c' --out "$T/qplots" \
	>"$T/out" 2>"$T/err"; then
	grep -q "title 'it''s'" "$T/qplots/compare_ttft_cdf.gp" && pass "a quote in a name is escaped for gnuplot" ||
		fail "quoted name: $(grep title "$T/qplots/compare_ttft_cdf.gp")"
	if command -v gnuplot >/dev/null; then
		[ -s "$T/qplots/compare_ttft_cdf.png" ] && pass "quoted names render" || fail "no PNG with quoted names"
	fi
else
	fail "compare with quoted labels: $(cat "$T/err")"
fi
# by position; two runs default to the first as reference, none on request
"$BIN" compare "$T/pol/vllm" "$T/pol/sarathi" "$T/pol/orca" --reference 3 >"$T/out" 2>"$T/err" &&
	header "vllm sarathi orca (ref)" || fail "--reference 3: $(cat "$T/err")"
"$BIN" compare "$T/pol/vllm" "$T/pol/orca" --reference none >"$T/out" 2>"$T/err" &&
	header "vllm orca max/min best" || fail "--reference none: $(cat "$T/err")"
# the SLOs differ: attainment and goodput are shown, not compared
"$BIN" run --num-requests 300 --rate-scale 3 --slo ttft_ms=100,tpot_ms=20 --out "$T/pol/tight" --quiet || fail "run tight"
if "$BIN" compare "$T/pol/vllm" "$T/pol/tight" --reference none >"$T/out" 2>"$T/err"; then
	grep -q "SLOs differ" "$T/out" && grep -q "^  goodput req/s .* -  *- *$" "$T/out" &&
		pass "unlike SLOs: attainment not compared" || fail "unlike SLOs: $(cat "$T/out")"
else
	fail "compare unlike SLOs: $(cat "$T/err")"
fi
expect_error 2 "--label: given 2 times for 3 runs" -- compare "$T/pol/vllm" "$T/pol/sarathi" "$T/pol/orca" --label a --label b
expect_error 2 "runs 1 and 2 .* both named 'vllm'.*--label" -- compare "$T/pol/vllm" "$T/pol/vllm/" "$T/pol/orca"
expect_error 2 "runs 1 and 2 .* both named 'x'" -- compare "$T/pol/vllm" "$T/pol/orca" --label x --label x
expect_error 2 "--reference 'fcfs': expected a run's name, its position 1..3, or none" -- compare "$T/pol/vllm" "$T/pol/sarathi" "$T/pol/orca" --reference fcfs
expect_error 2 "--reference '4'" -- compare "$T/pol/vllm" "$T/pol/sarathi" "$T/pol/orca" --reference 4
mkdir -p "$T/empty"
expect_error 1 "empty/results.db: cannot open" -- compare "$T/pol/vllm" "$T/pol/sarathi" "$T/empty"
expect_error 1 "same trace" -- compare "$T/pol/vllm" "$T/pol/sarathi" "$T/c" --reference vllm
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
	# a run that did not complete says so beside its name
	craft stopped "UPDATE summary SET json = json_set(json, '$.status', 'interrupted')"
	"$BIN" compare "$T/a" "$T/stopped" >"$T/out" 2>"$T/err" &&
		grep -q "^  stopped .*(sim, 200 requests, interrupted)" "$T/out" &&
		grep -q "^  a .*(sim, 200 requests)" "$T/out" && pass "an interrupted run is marked" ||
		fail "interrupted run not marked: $(head -4 "$T/out") $(cat "$T/err")"
	craft trigger "CREATE TRIGGER t AFTER INSERT ON runs BEGIN SELECT 1; END"
	expect_error 1 "trigger/results.db: not a servesim results database" -- compare "$T/trigger" "$T/a"
else
	echo "skip: crafted results.db (no sqlite3 command)"
fi
finish
