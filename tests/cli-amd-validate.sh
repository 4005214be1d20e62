#!/bin/sh
# bench/amd-validate.py, issue 33 section 2's end-to-end MI300X harness
# (docs/validation.md "AMD Instinct: end-to-end MI300X (issue 33)"): its
# failure paths (a bad command line exits 2; no amd folder, a bad figure:
# exit 1, one line naming the file and line), the cases it draws from
# ../shared/data/amd (--cases --json), and the leave-one-vLLM-version-out
# run (--fit) with its figures as recorded on 2026-12-07: the bands the
# issue states where they are met (vLLM latency rows), the figures where
# they are not (throughput, every SGLang metric, every dstack metric and
# the MI300X / H100 winner), so that a change that moves them fails here.  Skipped (77) without python3 or
# ../shared/data/amd.
# shellcheck source-path=SCRIPTDIR source=cli-lib.sh
. "$(dirname "$0")/cli-lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AV=$ROOT/bench/amd-validate.py
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }

# one error line and a status
expect_av() {
	want=$1 pat=$2
	shift 2
	python3 "$AV" --servesim "$BIN" "$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -ne "$want" ]; then
		fail "amd-validate.py $* exited $got, expected $want ($(cat "$T/err"))"
	elif ! tail -n 1 "$T/err" | grep -q -E -e "$pat"; then
		fail "amd-validate.py $*: error '$(cat "$T/err")' does not match '$pat'"
	elif [ "$want" -eq 1 ] && [ "$(wc -l <"$T/err")" -ne 1 ]; then
		fail "amd-validate.py $*: expected one error line: $(cat "$T/err")"
	else
		pass "amd-validate.py $* -> exit $got, $(tail -n 1 "$T/err")"
	fi
}

expect_av 2 "--jobs: expected a positive integer, got 0" --jobs 0 --cases
expect_av 2 "unrecognized arguments: --bogus" --bogus
expect_av 2 "--fit: fits on the vLLM latency tables; not with --cases" --fit --cases
expect_av 2 "--fit: fits on the vLLM latency tables; not with --only sglang" --fit --only sglang
expect_av 1 "^amd-validate: $T/nowhere/amd: no such folder" --shared "$T/nowhere" --cases

SHARED=${SERVESIM_SHARED_DATA:-$ROOT/../shared/data}
if [ ! -d "$SHARED/amd" ]; then
	# shellcheck disable=SC2154
	[ "$fails" -eq 0 ] || finish
	echo "skip: no $SHARED/amd"
	exit 77
fi

# bad figures: one line naming the file and line, exit 1
mkdir -p "$T/bad/amd"
cp "$SHARED"/amd/*.csv "$T/bad/amd/"
sed -i '4s/,12664\.0\(\r\{0,1\}\)$/,x12664\1/' "$T/bad/amd/rocm_vllm_devdocker_mi300x.csv"
expect_av 1 "rocm_vllm_devdocker_mi300x.csv:4: value is 'x12664', expected a number" --shared "$T/bad" --cases
cp "$SHARED"/amd/rocm_vllm_devdocker_mi300x.csv "$T/bad/amd/"
sed -i '2s/Llama 3.1 70B (amd/Llama 3.2 70B (amd/' "$T/bad/amd/rocm_vllm_devdocker_mi300x.csv"
expect_av 1 "rocm_vllm_devdocker_mi300x.csv:2: model 'Llama 3.2 70B .*', expected one starting with" \
	--shared "$T/bad" --cases

# the cases: 4 versions x (8 throughput + 32 latency configurations), 13
# SGLang MI300X rows, 28 left out with the reason
python3 "$AV" --servesim "$BIN" --shared "$SHARED" --cases --json "$T/cases.json" >"$T/cases.md" 2>"$T/err" ||
	fail "amd-validate.py --cases: $(cat "$T/err")"
if python3 - "$T/cases.json" >"$T/c.out" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
v = [c for c in d["cases"] if c["source"] == "vllm"]
s = [c for c in d["cases"] if c["source"] == "sglang"]
assert len(v) == 160 and sum(c["metric"] == "latency" for c in v) == 128, len(v)
assert sorted({c["version"] for c in v}) == ["0.6.6", "0.7.3", "0.8.3", "0.8.5"]
cs = {c["case"]: c for c in v}
# 0.8.5's four commits: the median of 16.3649, 16.8926, 16.6222 thousand tok/s
t = cs["llama-3.1-70b 0.8.5 128/2048 x3200 (max_num_seqs 3200)"]
assert t["n_measured"] == 3 and abs(t["measured"] - 16622.2) < 1e-6, t
# 0.6.6's latency in ms and in s: one configuration, seconds
l = cs["llama-3.1-70b 0.6.6 128/2048 batch 1"]
assert l["n_measured"] == 2 and 17 < l["measured"] < 20, l
# the 405B rows labelled with the 70B checkpoint are 405B's
assert cs["llama-3.1-405b 0.8.5 128/2048 batch 1"]["measured"] > 40
assert len(s) == 13 and {c["model"] for c in s} == {"deepseek-v3", "llama-4-scout"}, s
dv3 = [c for c in s if c["dp"] == 8]
assert len(dv3) == 1 and dv3[0]["ep"] == 8, dv3
assert len(d["left_out"]["sglang"]) == 28 and not d["left_out"]["vllm"], d["left_out"]
# dstack (held out): 74 offline sweep rows (8x H100, 8x MI300X with each
# checkpoint, 4x MI300X), 15 QPS runs, 23 TGI-vs-vLLM vLLM rows; left out:
# 19 two-instance offline rows upstream summed from the 4x runs, the 4
# curve files (the sweeps again), 5 QPS_high rows without a rate, 4 TGI files
ds = [c for c in d["cases"] if c["source"] == "dstack"]
assert sum(c["metric"] == "offline" for c in ds) == 74, len(ds)
assert sum(c["metric"] == "serving" and c["rate"] is not None for c in ds) == 15, len(ds)
assert sum(c["metric"] == "serving" and c["rate"] is None for c in ds) == 23, len(ds)
assert len(d["left_out"]["dstack"]) == 32, d["left_out"]["dstack"]
h = [c for c in ds if c["gpu"] == "h100-sxm"]
assert len(h) == 20 and all(c["engine"] == "vllm" for c in h), h
eager = [c for c in ds if c["metric"] == "offline" and c["gpu"] == "mi300x"]
assert all("-eager" in c["variant"] for c in eager), eager
print("%d vLLM and %d SGLang cases, %d SGLang rows left out" % (len(v), len(s), len(d["left_out"]["sglang"])))
PY
then pass "the cases: $(cat "$T/c.out")"; else fail "the cases: $(cat "$T/c.out")"; fi

# the leave-one-version-out fit and every held-out row
python3 "$AV" --servesim "$BIN" --shared "$SHARED" --fit --json "$T/v.json" >"$T/v.md" 2>"$T/err" ||
	fail "amd-validate.py --fit: $(cat "$T/err")"
if python3 - "$T/v.json" >"$T/v.out" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = d["fit"]
# each version left out: a floor of 24-28 us per all-reduce call and a
# decode-attention efficiency of 0.07 (the grid's points)
assert all(24 <= p["allreduce_floor_us"] <= 28 and p["attn_decode_mem_eff"] == 0.07
           for p in f["held_out"].values()), f
assert f["all"] == {"allreduce_floor_us": 28, "attn_decode_mem_eff": 0.07}, f
S = d["summary"]
def s(k):
    return S[k]["n"], S[k]["in_band"], S[k]["median_abs_error_pct"]
# recorded 2026-12-07 (docs/validation.md): vLLM latency, each version
# held out: 102 of 128 within 15%, median |error| 6.8%
n, ok, med = s("vllm latency")
assert n == 128 and ok >= 100 and med <= 8.0, (n, ok, med)
# throughput, held out by construction: 8 of 32 within 10%, median 24.0%
n, ok, med = s("vllm throughput")
assert n == 32 and ok >= 8 and med <= 26.0, (n, ok, med)
# SGLang MI300X, held out: the bands are not met (median |error| TTFT
# 72.0%, TPOT 54.7%, ITL 49.2%, output throughput 123.2%); a change that
# moves them further fails
for k, cap in (("ttft", 75.0), ("tpot", 57.0), ("itl", 52.0), ("output_throughput", 130.0)):
    n, ok, med = s("sglang " + k)
    assert n == 13 and med <= cap, (k, n, ok, med)
rows = {r["case"]: r for r in d["rows"]}
assert all("error" not in r for r in d["rows"])
# in band where the issue's band is met: the decode-bound latency rows
for c in ("llama-3.1-405b 0.8.5 2048/2048 batch 16", "llama-3.1-70b 0.8.5 128/2048 batch 64",
          "llama-3.1-405b 0.6.6 128/2048 batch 1", "llama-3.1-70b 0.6.6 2048/2048 batch 4"):
    assert rows[c]["in_band"], (c, rows[c]["error_pct"])
t = rows["llama-3.1-70b 0.8.5 2048/2048 x1500 (max_num_seqs 1500)"]
assert t["in_band"] and abs(t["error_pct"] + 1.8) < 1.0, t["error_pct"]
# dstack (held out, recorded 2026-12-07): the bands are not met; offline
# total tok/s 7 of 74 within 10% (median |error| 39.1%), QPS and sonnet
# TPOT 7 of 38 within 15% (44.2%); the MI300X / H100 winner is the same in
# 41 of 61 comparisons (38 before the vllm profile's kv_profile_step,
# 2026-12-08).  A change that moves these further fails.
for k, n_want, cap in (("throughput", 74, 41.0), ("tpot", 38, 46.0), ("ttft", 38, 82.0),
                       ("itl", 26, 47.0), ("output_throughput", 38, 235.0)):
    n, ok, med = s("dstack " + k)
    assert n == n_want and med <= cap, (k, n, ok, med)
rat = d["dstack_ratios"]
assert len(rat) == 61 and sum(q["same_winner"] for q in rat) >= 41, len(rat)
# the AMD checkpoint's 8x MI300X sweep against the H100's, offline: the
# winner as measured in 15 of 17 configurations (12 before kv_profile_step)
amd = [q for q in rat if q["mi300x"] == "8xMi300 1FP8-amd"]
assert len(amd) == 17 and sum(q["same_winner"] for q in amd) >= 15, amd
print("latency %d/%d, throughput %d/%d in band; SGLang TPOT median |error| %.1f%%" % (
    S["vllm latency"]["in_band"], 128, S["vllm throughput"]["in_band"], 32,
    S["sglang tpot"]["median_abs_error_pct"]))
PY
then pass "--fit: $(cat "$T/v.out")"; else fail "--fit: $(cat "$T/v.out")"; fi
finish
