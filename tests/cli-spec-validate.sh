#!/bin/sh
# bench/spec-validate.py, issue 32 section 3's speedup harness
# (docs/validation.md "Speculative decoding: speedups (issue 32)"): its
# failure paths (a bad command line exits 2; no specdec folder, a bad
# figure: exit 1, one line naming the file and line), the cases it draws
# from ../shared/data/specdec (--cases --json), and, where servesim has
# `run --spec`, a --quick run of every case: each row predicted, the
# acceptance servesim drew at each Spec-Bench row's measured AL, in under
# five minutes.  Whether the rows are in their bands is --check's, not this
# test's.  Skipped (77) without python3 or ../shared/data/specdec.
# shellcheck source-path=SCRIPTDIR source=cli-lib.sh
. "$(dirname "$0")/cli-lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SV=$ROOT/bench/spec-validate.py
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }

# one error line and a status
expect_sv() {
	want=$1 pat=$2
	shift 2
	python3 "$SV" --servesim "$BIN" "$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -ne "$want" ]; then
		fail "spec-validate.py $* exited $got, expected $want ($(cat "$T/err"))"
	elif ! tail -n 1 "$T/err" | grep -q -E -e "$pat"; then
		fail "spec-validate.py $*: error '$(cat "$T/err")' does not match '$pat'"
	elif [ "$want" -eq 1 ] && [ "$(wc -l <"$T/err")" -ne 1 ]; then
		fail "spec-validate.py $*: expected one error line: $(cat "$T/err")"
	else
		pass "spec-validate.py $* -> exit $got, $(tail -n 1 "$T/err")"
	fi
}

expect_sv 2 "--jobs: expected a positive integer, got 0" --jobs 0 --cases
expect_sv 2 "unrecognized arguments: --bogus" --bogus
expect_sv 1 "^spec-validate: $T/nowhere/specdec: no such folder" --shared "$T/nowhere" --cases
expect_sv 2 "--implied-al: runs the under-load rows; not with --only batch1" --implied-al --only batch1
expect_sv 2 "--implied-al: runs the under-load rows; not with --cases" --implied-al --cases

SHARED=${SERVESIM_SHARED_DATA:-$ROOT/../shared/data}
if [ ! -d "$SHARED/specdec" ]; then
	# shellcheck disable=SC2154
	[ "$fails" -eq 0 ] || finish
	echo "skip: no $SHARED/specdec"
	exit 77
fi

# bad figures: one line naming the file and line, exit 1
mkdir -p "$T/bad/specdec"
cp "$SHARED"/specdec/*.csv "$T/bad/specdec/"
sed -i '3s/,2\.19\(\r\{0,1\}\)$/,x2.19\1/' "$T/bad/specdec/specbench_leaderboard.csv"
expect_sv 1 "specbench_leaderboard.csv:3: speedup_overall is 'x2.19', expected a number" --shared "$T/bad" --cases
cp "$SHARED"/specdec/specbench_leaderboard.csv "$T/bad/specdec/"
python3 - "$T/bad/specdec/inferencex_dsr1_mtp_vs_none.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
i = rows[0].index("m_median_tpot")
n = next(j for j, r in enumerate(rows) if j and r[rows[0].index("disagg")] == "False"
         and r[rows[0].index("is_multinode")] == "False" and r[rows[0].index("spec_method")] == "mtp")
rows[n][i] = "-1"
csv.writer(open(sys.argv[1], "w", newline="")).writerows(rows)
print(n + 1, file=open(sys.argv[1] + ".line", "w"))
PY
line=$(cat "$T/bad/specdec/inferencex_dsr1_mtp_vs_none.csv.line")
expect_sv 1 "inferencex_dsr1_mtp_vs_none.csv:$line: m_median_tpot is '-1', expected a number" --shared "$T/bad" --cases

# the cases
python3 "$SV" --servesim "$BIN" --shared "$SHARED" --cases --json "$T/cases.json" >"$T/cases.md" 2>"$T/err" ||
	fail "spec-validate.py --cases: $(cat "$T/err")"
if python3 - "$T/cases.json" "$ROOT/bench" >"$T/c.out" 2>&1 <<'PY'
import importlib.util, json, os, sys
d = json.load(open(sys.argv[1]))
spec = importlib.util.spec_from_file_location("fit", os.path.join(sys.argv[2], "acceptance-fit.py"))
fit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fit)
cs = {c["case"]: c for c in d["cases"]}
b1 = [c for c in d["cases"] if c["check"] == "batch1"]
ld = [c for c in d["cases"] if c["check"] == "load"]
# Spec-Bench: 5 methods on the 3090, 5 + 6 on the A100 (Vicuna-7B, -13B); SGLang's two
assert len(b1) == 18 and len(ld) == 32, (len(b1), len(ld))
# each Spec-Bench case's alpha reproduces the row's AL at its k
for c in b1:
    if c["al_measured"]:
        kv = dict(p.split("=") for p in c["spec"].split(":")[1].split(","))
        al = fit.al(float(kv["alpha"]), float(kv["decay"]), int(kv["k"]))
        assert abs(al - c["al_measured"]) < 1e-3, (c["case"], al, c["al_measured"])
e = cs["A100 80GB vicuna-7b-v1.3 EAGLE2"]
assert e["spec"].startswith("eagle:k=6,tree=59,alpha=0.88") and e["measured"] == 2.36, e
assert e["gpu"] == "a100-80gb-sxm" and e["model"] == "llama-2-7b", e
assert cs["RTX 3090 24GB vicuna-7b-v1.3 PLD"]["spec"].startswith("ngram:k=10,alpha="), cs
# SGLang: EAGLE-3 / none = 373.25 / 158.34
s = cs["H100 Llama-3.1-8B SGLang EAGLE-3"]
assert abs(s["measured"] - 373.25 / 158.34) < 1e-9 and s["engine"] == "sglang", s
# InferenceX: MTP depth by framework and attention DP; the twin's ratio
c = cs["b200 trt fp8 1k/8k tp8 ep8 dp c256"]
assert c["spec"] == "mtp:k=1,accept=mtp-median" and c["n_pairs"] == 2, c
assert cs["b200 sglang fp8 8k/1k tp8 ep1 c16"]["spec"].startswith("mtp:k=2,"), cs
x = cs["b200 trt fp8 1k/8k tp8 ep1 c32"]
assert abs(x["measured_tpot"] - 9.37 / 16.47) < 2e-3, x
# no twin at C 2: one interpolated in log C between the none rows at C 1
# and 4 (7.2238 and 9.2116 ms, InferenceX runs 26306422380 and 26129885146)
b3 = cs["b300 sglang fp8 8k/1k tp8 ep1 c2 (twin c1-c4)"]
twin = (0.007223753410588108 * 0.009211643935952122) ** 0.5
assert abs(b3["measured_tpot"] - 0.004197757750898626 / twin) < 1e-9, b3
assert b3["twin"] == "interpolated c1-c4" and b3["spec"].startswith("mtp:k=2,"), b3
# 32 apart (C 4 and 128): no twin
assert not any(c.startswith("b200 trt fp8 1k/1k tp8 ep1 c32") for c in cs), cs
lo = d["left_out"]["load"]
assert sum(lo.values()) + sum(c["n_pairs"] for c in ld) <= 641, lo
assert lo["disaggregated prefill/decode (servesim's disaggregation is not this check's)"] == 250, lo
print("%d batch-1 and %d under-load cases, %d left out of batch 1" % (len(b1), len(ld), len(d["left_out"]["batch1"])))
PY
then pass "the cases: $(cat "$T/c.out")"; else fail "the cases: $(cat "$T/c.out")"; fi

# a --quick run of every case, where servesim runs --spec
if ! "$BIN" run --spec off --concurrency 1 --num-requests 1 --lengths fixed:prompt=16,output=4 --json >/dev/null 2>&1; then
	echo "note: this servesim has no run --spec; the --quick run is not made"
	finish
fi
start=$(date +%s)
python3 "$SV" --servesim "$BIN" --shared "$SHARED" --quick --json "$T/v.json" >"$T/v.md" 2>"$T/err" ||
	fail "spec-validate.py --quick: $(cat "$T/err")"
took=$(($(date +%s) - start))
if [ "$took" -le 300 ]; then
	pass "spec-validate.py --quick in ${took} s"
else
	fail "spec-validate.py --quick took ${took} s, over 300"
fi
if python3 - "$T/v.json" >"$T/v.out" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["quick"] and len(d["rows"]) == 50, len(d["rows"])
run = {"batch1": 0, "load": 0}
for r in d["rows"]:
    assert "error" not in r, r
    if "refused" in r:
        # a combination servesim does not model: its own one-line reason
        assert r["refused"].startswith("servesim: ") and "\n" not in r["refused"], r
        continue
    run[r["check"]] += 1
    if r["check"] == "batch1":
        assert r["predicted"] > 0 and isinstance(r["in_band"], bool), r
        # servesim drew the acceptance it was given: within 5% of the row's
        # AL over 8 requests of 256 tokens (about 600 draws)
        if r["al_measured"]:
            assert abs(r["al_sim"] / r["al_measured"] - 1) < 0.05, (r["case"], r["al_sim"], r["al_measured"])
    else:
        assert r["predicted_tpot"] > 0 and r["predicted_tput"] > 0, r
assert run["batch1"] == 18 and run["load"] >= 13 and d["crossover"], (run, d["crossover"])
print("%d batch-1 and %d under-load rows run, %d crossovers, %d in band" % (
    run["batch1"], run["load"], len(d["crossover"]),
    sum(r.get("in_band", False) for r in d["rows"] + d["crossover"])))
PY
then pass "every case predicted: $(cat "$T/v.out")"; else fail "spec-validate.py --quick: $(cat "$T/v.out")"; fi

# --implied-al: per under-load row, the AL whose predicted TPOT ratio is the
# measured one, bisected between AL 1.01 and alpha 1 at mtp-median's decay
python3 "$SV" --servesim "$BIN" --shared "$SHARED" --quick --implied-al --json "$T/i.json" >"$T/i.md" 2>"$T/err" ||
	fail "spec-validate.py --quick --implied-al: $(cat "$T/err")"
if python3 - "$T/i.json" >"$T/i.out" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = [r for r in d["rows"] if "refused" not in r]
assert d["accept"] == "mtp-median" and len(d["rows"]) == 32 and len(rows) >= 20, (len(d["rows"]), len(rows))
n = 0
for r in rows:
    assert r["check"] == "load" and "error" not in r, r
    runs = r["implied_runs"]
    lo, hi = r["al_range"]
    # the two ends first: the ratio falls as acceptance rises
    assert runs[0]["al"] == lo and runs[1]["al"] == hi and runs[0]["ratio"] > runs[1]["ratio"], runs[:2]
    if r["al_implied"] is None:
        assert r["implied_bound"] in ("<", ">") and len(runs) == 2, r
        continue
    n += 1
    assert lo < r["al_implied"] < hi and len(runs) == 2 + 8, r
    # the last bisection step's ratio is within 3% of the measured one
    assert abs(runs[-1]["ratio"] / r["measured_tpot"] - 1) < 0.03, (r["case"], runs[-1], r["measured_tpot"])
    # every run at its AL: the alpha solved for it at the assumed decay
    assert all(x["spec"].startswith("mtp:k=%d,alpha=" % r["k"]) and x["spec"].endswith(",decay=0.9579")
               for x in runs), runs
assert n >= 20, n
print("%d rows, %d with an implied AL" % (len(rows), n))
PY
then pass "--implied-al: $(cat "$T/i.out")"; else fail "--implied-al: $(cat "$T/i.out")"; fi
finish
