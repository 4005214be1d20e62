# report.html, written by run, live, plan and compare with --out: one file
# that refers to nothing outside itself (every src and href a data: URI or
# an in-page anchor; no script, no style sheet or font loaded), holding the
# headline figures as the command's other outputs state them (summary.json,
# plan.json, the comparison's JSON) and every user string escaped (a trace
# path and a label with <, > and &).  Without gnuplot the page says so.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

# check_page PAGE FIGURE... : self-contained, and each FIGURE (text as it
# must appear in the HTML source) present; prints what is wrong
check_page() {
	"$PY" - "$@" <<'EOF'
import re, sys
page, want = sys.argv[1], sys.argv[2:]
html = open(page, encoding="utf-8").read()
bad = []
for m in re.finditer(r'''(?:src|href)\s*=\s*["']?([^"'\s>]*)''', html, re.I):
    if not (m.group(1).startswith("data:") or m.group(1).startswith("#")):
        bad.append("external reference " + m.group(0)[:60])
for pat in (r"<script", r"<link", r"<iframe", r"<object", r"<embed", r"@import", r"url\("):
    if re.search(pat, html, re.I):
        bad.append("found " + pat)
if not html.startswith("<!DOCTYPE html>") or not html.rstrip().endswith("</html>"):
    bad.append("not a whole document")
for w in want:
    if w not in html:
        bad.append("missing " + w)
print("; ".join(bad))
EOF
}

# page_ok WHAT PAGE FIGURE...
page_ok() {
	what=$1
	shift
	if [ ! -s "$1" ]; then
		fail "$what: no $1"
		return
	fi
	r=$(check_page "$@")
	[ -z "$r" ] && pass "$what: report.html self-contained, with its figures" || fail "$what: $r"
}

# json FILE EXPR: a figure of a JSON file, formatted in Python
json() {
	"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

# ---- run: a trace whose path holds markup -----------------------------------
mkdir -p "$T/tr"
W="$T/tr/a<b>&c.csv"
head -201 "$SERVESIM_DATA/traces/azure_conv_2000.csv" >"$W"
if "$BIN" run --trace "$W" --out "$T/run" --quiet 2>"$T/err"; then
	ttft=$(json "$T/run/summary.json" '"%.3f" % d["ttft_ms"]["p99"]')
	e2e=$(json "$T/run/summary.json" '"%.3f" % d["e2e_ms"]["p50"]')
	rps=$(json "$T/run/summary.json" '"%.3f" % d["throughput"]["requests_per_s"]')
	# the same figure in summary.txt's table and the page's
	grep -q "^  TTFT .* $ttft " "$T/run/summary.txt" || fail "TTFT p99 $ttft not in summary.txt"
	page_ok run "$T/run/report.html" "<td class=\"n\">$ttft</td>" "<td class=\"n\">$e2e</td>" \
		"$rps req/s" "tr/a&lt;b&gt;&amp;c.csv" "<caption>Serving stack</caption>" \
		"<caption>Latency (ms)</caption>" "<h3>Command line</h3>"
	grep -q 'a<b>&c' "$T/run/report.html" && fail "run: the trace path is not escaped" ||
		pass "run: the trace path is escaped"
	if command -v gnuplot >/dev/null; then
		n=$(grep -c '<img alt="[a-z_]*\.png" src="data:image/png;base64,' "$T/run/report.html")
		[ "$n" -eq 3 ] && pass "run: the three plots embedded" || fail "run: $n plots embedded, expected 3"
	fi
else
	fail "run: $(cat "$T/err")"
fi

# ---- without gnuplot: the page says so -----------------------------------------
mkdir -p "$T/nobin"
if PATH="$T/nobin" "$BIN" run --num-requests 50 --out "$T/nogp" --quiet 2>"$T/err"; then
	page_ok "run without gnuplot" "$T/nogp/report.html" "gnuplot was not found, so no plots were made"
	grep -q "<img" "$T/nogp/report.html" && fail "an image without gnuplot" || pass "no image without gnuplot"
else
	fail "run without gnuplot: $(cat "$T/err")"
fi

# ---- live shares run's writer -----------------------------------------------------
if "$BIN" live --model llama-3.2-1b --width-div 16 --layers 2 --threads 1 --kv-blocks 512 \
	--arrival poisson:rate=40 --lengths fixed:prompt=48,output=12 --num-requests 20 --quiet \
	--out "$T/live" 2>"$T/err"; then
	ttft=$(json "$T/live/summary.json" '"%.3f" % d["ttft_ms"]["p99"]')
	page_ok live "$T/live/report.html" "<td class=\"n\">$ttft</td>" "<title>servesim live: llama-3.2-1b on cpu"
else
	fail "live: $(cat "$T/err")"
fi

# ---- plan ------------------------------------------------------------------------
if "$BIN" plan --num-requests 100 --max-gpus 2 --policies vllm,sarathi --cost-model roofline \
	--out "$T/plan" >"$T/plan.out" 2>"$T/err"; then
	# the top configuration by goodput per GPU: its maximum rate and goodput per GPU
	top=$(json "$T/plan/plan.json" 'd["top_goodput_per_gpu"][0]')
	rate=$(json "$T/plan/plan.json" '"%.3f" % d["configurations"][d["top_goodput_per_gpu"][0]]["max_rate_rps"]')
	gpg=$(json "$T/plan/plan.json" '"%.3f" % d["configurations"][d["top_goodput_per_gpu"][0]]["goodput_rps_per_gpu"]')
	grep -q " $rate " "$T/plan.out" || fail "plan: $rate not in the text table"
	page_ok plan "$T/plan/report.html" "<tr><th>$top</th>" "$rate</td>" "<td class=\"n\">$gpg</td>" \
		"Pareto frontier" "servesim plan --num-requests 100"
	if command -v gnuplot >/dev/null; then
		n=$(grep -c 'src="data:image/png;base64,' "$T/plan/report.html")
		[ "$n" -eq 2 ] && pass "plan: attainment and pareto embedded" || fail "plan: $n plots embedded"
	fi
	[ -z "$(find "$T/plan" -name '.*tmp*')" ] && pass "plan: no temporary files" || fail "plan: temporary files left"
else
	fail "plan: $(cat "$T/err")"
fi

# ---- plan --rate --verify: the target-rate table, priced-by and verified ----------
if "$BIN" plan --arrival poisson:rate=4 --lengths fixed:prompt=512,output=128 --num-requests 100 \
	--gpus h100-sxm,l40s --modes colocated --max-gpus 2 --rate 10 --verify 1 \
	--out "$T/prate" -q 2>"$T/err"; then
	first=$(json "$T/prate/plan.json" 'd["rate"]["configurations"][0]')
	head=$(json "$T/prate/plan.json" '"%.2f" % d["configurations"][d["rate"]["configurations"][0]]["at_rate"]["headroom"]')
	page_ok "plan --rate" "$T/prate/report.html" "Deployments sustaining 10 req/s, by cost" \
		"<tr><th>$first</th>" "<td class=\"n\">$head</td>" "! roofline" "Verified on the whole workload"
else
	fail "plan --rate --verify: $(cat "$T/err")"
fi

# ---- compare: a label with markup -------------------------------------------------
"$BIN" run --num-requests 100 --out "$T/c1" --quiet || fail "run c1"
"$BIN" run --num-requests 100 --policy sarathi --out "$T/c2" --quiet || fail "run c2"
if "$BIN" compare "$T/c1" "$T/c2" --label 'x<y>&z' --label plain --json="$T/cmp.json" \
	--out "$T/cmp" >"$T/cmp.out" 2>"$T/err"; then
	p99=$(json "$T/cmp.json" '"%.3f" % d["runs"][0]["metrics"]["ttft_ms"]["p99"]')
	grep -q "TTFT p99 ms .* $p99 " "$T/cmp.out" || fail "compare: $p99 not in the printed table"
	page_ok compare "$T/cmp/report.html" "<td class=\"n\">$p99</td>" "x&lt;y&gt;&amp;z (ref)" \
		"Per-request errors of plain against x&lt;y&gt;&amp;z"
	grep -q 'x<y>' "$T/cmp/report.html" && fail "compare: the label is not escaped" ||
		pass "compare: the label is escaped"
else
	fail "compare: $(cat "$T/err")"
fi

# ---- a report.html that cannot be written fails the run before summary.json ---------
mkdir -p "$T/blocked/report.html"
expect_error 1 "report.html" -- run --num-requests 20 --out "$T/blocked" --quiet
[ ! -e "$T/blocked/summary.json" ] && [ -z "$(find "$T/blocked" -name '.*tmp*')" ] &&
	pass "blocked report.html: no summary.json, no temporary file" ||
	fail "blocked report.html left $(ls -A "$T/blocked")"

# ---- sweep: the table of means and intervals, the command line escaped -------
if "$BIN" sweep --sweep policy=vllm,sarathi --seeds 2 --trace "$W" --num-requests 100 --out "$T/sw" -q 2>"$T/err"; then
	# the first point's TTFT p99 mean as the table writes it (4 significant digits)
	fig=$("$PY" - "$T/sw/sweep.csv" <<'EOF'
import csv, math, sys
x = float(next(csv.DictReader(open(sys.argv[1])))["ttft_p99_ms_mean"])
print(f"{x:.{max(0, 3 - math.floor(math.log10(abs(x))))}f} ± ")
EOF
)
	page_ok "sweep" "$T/sw/report.html" "<td>$fig" "mean ± 95% confidence interval" \
		"a&lt;b&gt;&amp;c.csv" "servesim sweep --sweep policy=vllm,sarathi"
	grep -q "a<b>" "$T/sw/report.html" && fail "sweep: the trace path is not escaped" ||
		pass "sweep: the trace path is escaped"
else
	fail "sweep --out failed: $(cat "$T/err")"
fi

finish
