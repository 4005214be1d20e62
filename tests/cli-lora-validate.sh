#!/bin/sh
# bench/lora-validate.py, issue 33 section 1's validation against S-LoRA's
# A10G runs (docs/validation.md "Multi-LoRA: S-LoRA's runs (issue 33)"):
# its failure paths (a bad command line exits 2; a bad figure exits 1 with
# one line naming the file and line), the cases it draws from
# ../shared/data/lora, numpy's legacy stream as bench/nplegacy.py redraws
# it (the requests S-LoRA's client sent), and the leave-one-factor-out run
# with its figures as recorded on 2026-12-08: the 15% throughput band met
# on every row, the latency band on 62 of 70 (not met: 8 rows of S2), so
# that a change that moves them fails here.  Skipped (77)
# without python3 or ../shared/data/lora.
# shellcheck source-path=SCRIPTDIR source=cli-lib.sh
. "$(dirname "$0")/cli-lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LV=$ROOT/bench/lora-validate.py
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }

# one error line and a status
expect_lv() {
	want=$1 pat=$2
	shift 2
	python3 "$LV" --servesim "$BIN" "$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -ne "$want" ]; then
		fail "lora-validate.py $* exited $got, expected $want ($(cat "$T/err"))"
	elif ! tail -n 1 "$T/err" | grep -q -E -e "$pat"; then
		fail "lora-validate.py $*: error '$(cat "$T/err")' does not match '$pat'"
	elif [ "$want" -eq 1 ] && [ "$(wc -l <"$T/err")" -ne 1 ]; then
		fail "lora-validate.py $*: expected one error line: $(cat "$T/err")"
	else
		pass "lora-validate.py $* -> exit $got, $(tail -n 1 "$T/err")"
	fi
}

expect_lv 2 "--jobs: expected a positive integer" --jobs 0 --cases
expect_lv 2 "unrecognized arguments: --bogus" --bogus
expect_lv 1 "^lora-validate: $T/nowhere/lora/slora_paper_runs.csv: No such file" --shared "$T/nowhere" --cases

# numpy's legacy stream: its documented first values after seed(42) and
# seed(0) (random_sample, randint(0, 10, 10), randn), which the workload's
# power, randint and gamma draws are built on
if python3 - "$ROOT/bench" >"$T/np.out" 2>&1 <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from nplegacy import LegacyRandomState as R
r = R(42)
assert [r.double() for _ in range(3)] == [0.3745401188473625, 0.9507143064099162,
                                         0.7319939418114051]
assert R(42).randint(0, 10, 10) == [6, 3, 7, 4, 6, 9, 2, 6, 7, 4]
r = R(42)
assert [r.gauss() for _ in range(4)] == [0.4967141530112327, -0.13826430117118466,
                                        0.6476885381006925, 1.5230298564080254]
assert R(0).double() == 0.5488135039273248
print("numpy's legacy stream: seed 42 and 0 as numpy draws them")
PY
then pass "$(cat "$T/np.out")"; else fail "nplegacy: $(cat "$T/np.out")"; fi

SHARED=${SERVESIM_SHARED_DATA:-$ROOT/../shared/data}
if [ ! -f "$SHARED/lora/slora_paper_runs.csv" ]; then
	# shellcheck disable=SC2154
	[ "$fails" -eq 0 ] || finish
	echo "skip: no $SHARED/lora"
	exit 77
fi

# bad figures: one line naming the file and line, exit 1 (line 2 is
# ablation_mem's first S-LoRA-bmm row, line 8 its first S-LoRA row)
mkdir -p "$T/bad/lora"
sed '8s/,2\.5,1,300,8,512,8,512,/,2.5,1,300,8,x512,8,512,/' "$SHARED/lora/slora_paper_runs.csv" >"$T/bad/lora/slora_paper_runs.csv"
expect_lv 1 "slora_paper_runs.csv:8: input_len_max is 'x512', expected an integer" --shared "$T/bad" --cases
sed '8s/,S1,huggyllama\/llama-7b,/,S3,huggyllama\/llama-7b,/' "$SHARED/lora/slora_paper_runs.csv" >"$T/bad/lora/slora_paper_runs.csv"
expect_lv 1 "slora_paper_runs.csv:8: model_setting is 'S3' with base_model 'huggyllama/llama-7b', expected S1 or S2" \
	--shared "$T/bad" --cases

# the cases: 70 rows of S-LoRA and S-LoRA-no-unify-mem, 934 left out
python3 "$LV" --servesim "$BIN" --shared "$SHARED" --cases >"$T/cases" 2>"$T/err" ||
	fail "lora-validate.py --cases: $(cat "$T/err")"
used=$(grep -c -v '^left out' "$T/cases")
left=$(grep -c '^left out' "$T/cases")
if [ "$used" -eq 70 ] && [ "$left" -eq 934 ] &&
	grep -q -- '--kv-blocks 9000 --trace slora-n600-r2-cv1-a200-al1.csv --lora adapters=200,mix=64:1/32:1/16:1/8:1,rank_order=cycle,paging=unified' "$T/cases" &&
	grep -q 'adapters=200,rank=8,paging=unified' "$T/cases" &&
	grep -q -- '--trace slora-n600-r2-cv8-a200-al1.csv' "$T/cases"; then
	pass "the cases: $used used, $left left out"
else
	fail "the cases: $used used, $left left out (expected 70 and 934)"
fi

# the leave-one-factor-out run and every held-out row
python3 "$LV" --servesim "$BIN" --shared "$SHARED" --json "$T/v.json" >"$T/v.md" 2>"$T/err" ||
	fail "lora-validate.py: $(cat "$T/err")"
if python3 - "$T/v.json" >"$T/v.out" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
S = d["summary"]
# the fitted per-step host time: 8 ms on every row, 6-8 ms per fold
assert d["sched_us_all"] == 8000, d["sched_us_all"]
assert all(r["sched_us"] in (6000, 8000) for r in d["rows"]), {r["sched_us"] for r in d["rows"]}
assert not any("error" in r for r in d["rows"])
# the throughput band met on every held-out row
assert S["all"]["in_band"]["throughput"] == S["all"]["rows"] == 70, S["all"]
# the figures as recorded (the client's own requests replayed, admit_wait=10,
# every row with paging=unified and admission=peak, S2's ranks in S-LoRA's
# order, rank_order=cycle; 2026-12-08), +-0.5
# points: seeded runs are deterministic, so a move is a change in the model
rec = {"all": (70, 2.1, 8.4, 15.3, 70, 62),
       "factor adapter count": (25, 2.4, 11.8, 24.1, 25, 19),
       "factor arrival cv": (8, 1.2, 3.6, 5.0, 8, 8),
       "factor request rate": (9, 1.9, 7.7, 21.7, 9, 8),
       "factor unified-memory ablation": (28, 2.2, 6.9, 8.3, 28, 27)}
for k, (n, t, l, f, bt, bl) in rec.items():
    g = S[k]
    got = (g["rows"], g["mape"]["throughput"], g["mape"]["latency"], g["mape"]["ttft"],
           g["in_band"]["throughput"], g["in_band"]["latency"])
    assert g["rows"] == n and abs(got[1] - t) <= 0.5 and abs(got[2] - l) <= 0.5 \
        and abs(got[3] - f) <= 0.5 and got[4] == bt and got[5] == bl, (k, got)
# not met (stated, not hidden): mean latency's 15% band on 8 rows, all S2
miss = [r for r in d["rows"] if not r["in_band"]["latency"]]
assert len(miss) == 8 and all(r["setting"] == "S2" for r in miss), miss
print("throughput MAPE %.1f%% (%d/%d in band), latency MAPE %.1f%% (%d/%d in band)" % (
    S["all"]["mape"]["throughput"], S["all"]["in_band"]["throughput"], S["all"]["rows"],
    S["all"]["mape"]["latency"], S["all"]["in_band"]["latency"], S["all"]["rows"]))
PY
then pass "held out: $(cat "$T/v.out")"; else fail "held out: $(cat "$T/v.out")"; fi

finish
