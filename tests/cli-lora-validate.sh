#!/bin/sh
# bench/lora-validate.py, issue 33 section 1's validation against S-LoRA's
# A10G runs (docs/validation.md "Multi-LoRA: S-LoRA's runs (issue 33)"):
# its failure paths (a bad command line exits 2; a bad figure exits 1 with
# one line naming the file and line), the cases it draws from
# ../shared/data/lora, and the leave-one-factor-out run with its figures as
# recorded on 2026-12-08: the 15% throughput band where it is met (the
# adapter-count, request-rate and unified-memory sweeps), the figures where
# it is not (mean latency everywhere, throughput under bursty arrivals), so
# that a change that moves them fails here.  Skipped (77) without python3
# or ../shared/data/lora.
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
	grep -q 'adapters=200,mix=64:1/32:1/16:1/8:1,popularity=uniform,max_loras=200' "$T/cases" &&
	grep -q 'adapters=200,rank=8,popularity=uniform,paging=unified' "$T/cases" &&
	grep -q -- '--kv-blocks 9000 --arrival gamma:rate=2,cv=1 --num-requests 600' "$T/cases"; then
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
# the fitted per-step host time: 10 ms on every row, 10-13 ms per fold
assert d["sched_us_all"] == 10000, d["sched_us_all"]
assert all(r["sched_us"] in (10000, 13000) for r in d["rows"]), {r["sched_us"] for r in d["rows"]}
assert not any("error" in r for r in d["rows"])
# the bands met: held-out throughput within 15% on every row of the
# adapter-count sweep
g = S["factor adapter count"]
assert g["in_band"]["throughput"] == g["rows"], g
# the figures as recorded (S-LoRA's rows with paging=unified, every row
# with admission=peak; 2026-12-08), +-0.5 points: seeded runs are
# deterministic, so a move is a change in the model
rec = {"all": (70, 6.8, 42.6, 92.0, 61, 20),
       "factor adapter count": (25, 4.5, 41.2, 108.6, 25, 1),
       "factor arrival cv": (8, 17.1, 175.8, 342.9, 4, 0),
       "factor request rate": (9, 7.0, 9.8, 45.9, 8, 7),
       "factor unified-memory ablation": (28, 5.8, 16.5, 20.3, 24, 12)}
for k, (n, t, l, f, bt, bl) in rec.items():
    g = S[k]
    got = (g["rows"], g["mape"]["throughput"], g["mape"]["latency"], g["mape"]["ttft"],
           g["in_band"]["throughput"], g["in_band"]["latency"])
    assert g["rows"] == n and abs(got[1] - t) <= 0.5 and abs(got[2] - l) <= 0.5 \
        and abs(got[3] - f) <= 0.5 and got[4] == bt and got[5] == bl, (k, got)
# not met (stated, not hidden): mean latency's 15% band overall, and
# throughput under bursty arrivals (cv 2-8)
assert S["all"]["mape"]["latency"] > 15 and S["factor arrival cv"]["mape"]["throughput"] > 15
print("throughput MAPE %.1f%% (%d/%d in band), latency MAPE %.1f%% (%d/%d in band)" % (
    S["all"]["mape"]["throughput"], S["all"]["in_band"]["throughput"], S["all"]["rows"],
    S["all"]["mape"]["latency"], S["all"]["in_band"]["latency"], S["all"]["rows"]))
PY
then pass "held out: $(cat "$T/v.out")"; else fail "held out: $(cat "$T/v.out")"; fi

finish
