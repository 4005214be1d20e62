#!/bin/sh
# The leave-one-source-out harness (bench/loso.sh, issue 31 section 2;
# docs/validation.md "Leave one source out (issue 31)"): the --no-fit
# matrix on a fixed budget of 6 rows per source, each source's TTFT p50 and
# TPOT/ITL p50 MAPE and its stack constant within bands around the figures
# recorded there, cells with no data printed "-", the intervals file
# well-formed; and its failure paths.  Skipped (77) without the shared
# data or python3.
# shellcheck source-path=SCRIPTDIR source=cli-lib.sh
. "$(dirname "$0")/cli-lib.sh"

# fidelity, not memory safety: the plain build runs it (tests/meson.build)
[ -z "${SERVESIM_SANITIZED:-}" ] || { echo "skip: sanitized build"; exit 77; }
PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }
SHARED=${SERVESIM_SHARED_DATA:-$(dirname "$0")/../../shared/data}
[ -d "$SHARED/serving" ] || { echo "skip: no $SHARED/serving"; exit 77; }
LOSO=$(dirname "$0")/../bench/loso.sh
export SERVESIM_SHARED_DATA="$SHARED"

# failure paths: a bad command line (2), no shared data (77), a bad
# manifest (1, one line naming the file)
sh "$LOSO" "$BIN" >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then pass "loso.sh without OUT: exit 2"; else fail "loso.sh without OUT: not exit 2"; fi
sh "$LOSO" "$T/no-such-servesim" "$T/x" >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then pass "loso.sh with no servesim: exit 2"; else fail "loso.sh with no servesim: not exit 2"; fi
SERVESIM_SHARED_DATA=$T/none sh "$LOSO" "$BIN" "$T/x" >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 77 ]; then pass "loso.sh without the shared data: exit 77"; else fail "loso.sh without the shared data: not exit 77"; fi
# --refit: a family's sources fitted jointly (fit-engine --sources), each
# held out: two llm-d exp-0 runs as two sources, a row each (seconds)
cat >"$T/r.json" <<'EOM'
{"sources": [
 {"id": "exp0a", "family": "vllm", "kind": "files", "format": "llm-d", "covered": true, "fitted_on": true,
  "files": ["llm_d_benchmark/data/exp-0/vllm-70b/LMBench_sharegpt_output_0.5.csv"],
  "load_regex": "_output_([0-9.]+)\\.csv$", "stack_class": "gateway", "light": {"max": 0.67}, "rows": 1,
  "flags": ["--model", "llama-3.1-70b", "--gpu", "a100-80gb-sxm", "--tp", "2"]},
 {"id": "exp0b", "family": "vllm", "kind": "files", "format": "llm-d", "covered": true, "fitted_on": true,
  "files": ["llm_d_benchmark/data/exp-0/vllm-70b/LMBench_sharegpt_output_1.csv"],
  "load_regex": "_output_([0-9.]+)\\.csv$", "stack_class": "gateway", "light": {"max": 0.67}, "rows": 1,
  "flags": ["--model", "llama-3.1-70b", "--gpu", "a100-80gb-sxm", "--tp", "2"]}
]}
EOM
sh "$LOSO" "$BIN" "$T/r" --manifest "$T/r.json" --refit >/dev/null 2>"$T/err" || fail "loso.sh --refit: $(tail -1 "$T/err")"
if grep -q -- "--sources" "$T/r/refit/vllm.cmd" && grep -E -q '^\| vllm \| exp0a \(fitted on\) \| gateway \| 1 \| [-+][0-9.]+ / [0-9.]+% ' "$T/r/matrix.md" &&
	grep -E -q '^\| vllm \| exp0b \(fitted on\) \| gateway \| 1 \| [-+][0-9.]+ / [0-9.]+% ' "$T/r/matrix.md"; then
	pass "loso.sh --refit: a joint fit per family, each source held out"
else
	fail "loso.sh --refit: $(grep -A6 '^### Refit' "$T/r/matrix.md")"
fi
sh "$LOSO" "$BIN" "$T/x" --bogus >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then pass "loso.sh --bogus: exit 2"; else fail "loso.sh --bogus: not exit 2"; fi
printf '{"sources": [{"id": "x"}]}\n' >"$T/bad.json"
sh "$LOSO" "$BIN" "$T/x" --manifest "$T/bad.json" >/dev/null 2>"$T/err"
rc=$?
if [ "$rc" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "bad.json: sources\[0\]: missing family" "$T/err"; then pass "a manifest entry without its keys: one line, exit 1"; else fail "bad manifest: $(cat "$T/err")"; fi
printf '{"sources": [\n' >"$T/bad.json"
sh "$LOSO" "$BIN" "$T/x" --manifest "$T/bad.json" >/dev/null 2>"$T/err"
rc=$?
if [ "$rc" -eq 1 ] && grep -q "bad.json: line 2: not JSON" "$T/err"; then pass "a manifest that is not JSON: exit 1, file and line"; else fail "non-JSON manifest: $(cat "$T/err")"; fi
# a source whose format this servesim does not read gets a row of "-" and
# the reason; a source whose files are missing stops the harness
cat >"$T/m.json" <<'EOM'
{"sources": [
 {"id": "exp0", "family": "vllm", "kind": "files", "format": "llm-d", "covered": true, "fitted_on": true,
  "files": ["llm_d_benchmark/data/exp-0/vllm-70b/LMBench_sharegpt_output_0.5.csv",
            "llm_d_benchmark/data/exp-0/vllm-70b/LMBench_sharegpt_output_1.csv"],
  "load_regex": "_output_([0-9.]+)\\.csv$", "stack_class": "gateway", "light": {"max": 0.67}, "rows": 2,
  "flags": ["--model", "llama-3.1-70b", "--gpu", "a100-80gb-sxm", "--tp", "2"]},
 {"id": "future", "family": "vllm", "kind": "table", "format": "no-such-format", "covered": true,
  "files": ["gpustack/gpustack_perflab_vllm_bench.csv"], "stack_class": "local", "light": {"max": 4}}
]}
EOM
sh "$LOSO" "$BIN" "$T/m" --manifest "$T/m.json" >/dev/null 2>"$T/err" || fail "loso.sh on a small manifest: $(tail -1 "$T/err")"
if grep -q '^| vllm | future | local | - | - | - | - | - | format no-such-format not in this servesim' "$T/m/matrix.md"; then pass "an unreadable format: a row of '-' and the reason"; else fail "unreadable format row: $(grep future "$T/m/matrix.md")"; fi
sed 's/output_1.csv/output_9.csv/' "$T/m.json" >"$T/m2.json"
sh "$LOSO" "$BIN" "$T/m2" --manifest "$T/m2.json" >/dev/null 2>"$T/err"
rc=$?
if [ "$rc" -eq 1 ] && grep -q "exp0: no .*output_9.csv" "$T/err"; then pass "a missing source file: exit 1, named"; else fail "missing source file: $(cat "$T/err")"; fi

# the quick matrix of the shipped manifest, with the few-shot pass (about
# 15 s on two cores)
sh "$LOSO" "$BIN" "$T/q" --rows 6 --fewshot >"$T/out" 2>"$T/err" || fail "loso.sh --rows 6 --fewshot: $(tail -3 "$T/err")"
sed -n '/^### Per-source/,/^### The shipped profiles without/p' "$T/q/matrix.md"
"$PY" - "$T/q" "$(dirname "$0")/../bench/sources.json" <<'EOP'
import json, os, sys
out, manifest = sys.argv[1:3]
doc = json.load(open(os.path.join(out, "matrix.json")))
man = json.load(open(manifest))
src = {s["id"]: s for s in doc["sources"]}
bad = []
# Recorded 2026-12-07 (docs/validation.md, "Leave one source out (issue 31)"),
# --rows 6: (rows, TTFT p50 MAPE %, TPOT/ITL p50 MAPE %, stack constant K ms)
# of the shipped profiles behind their default stacks ("as is": local-vllm,
# local-sglang and local-trtllm at 10.3 ms; vllm-v0, distserve and
# splitwise-2023 behind the stacks of the one deployment each was fitted on).  Bands: +-max(5 points,
# 25%) on each MAPE, +-max(5 ms, 25%) on each constant, so a cost-model,
# profile or stack change that moves a source fails here and is recorded on
# purpose.
RECORDED = {
    "llmd-exp0-vllm": (6, 23.2, 3.0, 12.8),   # TPOT 2.8 before kv_profile_step (2026-12-08)
    "llmd-exp4-vllm": (6, 7.6, 16.2, 8.9),
    "llmservingsim-vllm": (3, 18.3, 15.6, None),
    "silicon-vllm-h100-0.12": (6, 67.7, 28.4, 57.2),
    "silicon-vllm-h100-llama70b-fp8": (6, 21.9, 6.8, -36.4),
    "silicon-vllm-h100-gptoss": (6, 42.7, 22.3, 56.4),
    "silicon-vllm-b200-llama70b": (6, 22.7, 19.3, 45.6),
    "distserve-vllm": (6, 9.5, 11.3, 9.0),
    "distserve-own": (6, 1.9, 2.5, 5.2),
    "splitwise-a100": (6, 26.1, 2.3, 26.1),
    "silicon-sglang-h100": (6, 28.1, 12.4, 164.7),
    "silicon-sglang-b200-deepseek": (6, 40.0, 15.9, 114.9),
    "silicon-trtllm-h100-1.0": (6, 36.2, 7.8, 4.3),
    "silicon-trtllm-b200-llama70b": (6, 53.1, 11.7, 262.9),
    "gpustack-vllm-h100": (6, 39.8, 14.8, 27.9),
    "gpustack-vllm-a100": (2, 52.0, 32.7, 10.0),
    "gpustack-sglang": (5, 21.2, 2.0, 10.3),
    "gpustack-trtllm": (1, 41.9, 4.6, 24.6),
    "nim-trtllm-h100": (6, 29.4, 20.8, 13.6),
    "nim-trtllm-a100": (6, 38.1, 17.1, 19.7),
}
# "before" (--stack OLD: the stacks holding the profiles' former api_*
# values) is the old binary's "as is", recorded 2026-12-07 on main 2818065
# before the stack was split from the engine profiles: the same figures, to
# the printed digit, or --stack OLD no longer reproduces the old profiles.
# (llm-d exp-4 left out since its manifest entry runs the deployment's FP8
# weights, which the old record did not.)
# llm-d exp-0 excepted since 2026-12-08: the vllm profile's kv_profile_step
# reserves its 2048-token step's activations, not 8192 tokens' (0.75 GB more
# KV a GPU for 70B at TP 2), which --stack OLD cannot undo: (23.1, 2.6) before.
BEFORE = {
    "llmd-exp0-vllm": (23.2, 2.9), "llmservingsim-vllm": (18.7, 15.5),
    "silicon-vllm-h100-0.12": (56.3, 28.6), "silicon-vllm-h100-llama70b-fp8": (44.0, 6.8),
    "silicon-vllm-h100-gptoss": (17.0, 22.3), "silicon-vllm-b200-llama70b": (6.4, 19.3),
    "distserve-vllm": (9.5, 11.3), "distserve-own": (1.9, 2.5), "splitwise-a100": (26.1, 2.3),
    "silicon-sglang-h100": (24.9, 12.6), "silicon-sglang-b200-deepseek": (36.9, 15.9),
    "silicon-trtllm-h100-1.0": (38.5, 7.6), "silicon-trtllm-b200-llama70b": (43.6, 11.7),
}
def band(what, got, want, floor):
    if want is None:
        if got is not None:
            bad.append("%s: %r, recorded none" % (what, got))
        return
    if got is None or abs(got - want) > max(floor, 0.25 * abs(want)):
        bad.append("%s: %r, recorded %r" % (what, got, want))
for sid, (rows, ttft, tpot, k) in RECORDED.items():
    s = src.get(sid)
    if s is None or not s["asis"]:
        bad.append("%s: not run (%s)" % (sid, s and s["why"]))
        continue
    if s["rows"] != rows:
        bad.append("%s: %d rows, recorded %d" % (sid, s["rows"], rows))
    band(sid + " TTFT p50 MAPE", s["asis"]["ttft_p50"] and s["asis"]["ttft_p50"]["mape"], ttft, 5)
    band(sid + " TPOT p50 MAPE", s["asis"]["tpot_p50"] and s["asis"]["tpot_p50"]["mape"], tpot, 5)
    band(sid + " stack constant", s["constant"] and s["constant"]["ms"], k, 5)
for sid, (ttft, tpot) in BEFORE.items():
    s = src.get(sid)
    got = tuple(s["before"][c] and round(s["before"][c]["mape"], 1) for c in ("ttft_p50", "tpot_p50")) if s and s["before"] else None
    if got != (ttft, tpot):
        bad.append("%s before (--stack OLD): %r, the old profiles' %r" % (sid, got, (ttft, tpot)))
# every readable source of the manifest ran; the others say why; a source
# that is gated on a format ran exactly when this servesim reads it
for m in man["sources"]:
    s = src[m["id"]]
    if m.get("readable") is False:
        if s["asis"] or "not readable" not in (s["why"] or ""):
            bad.append("%s: should be marked not readable" % m["id"])
    elif m["id"] not in RECORDED and not s["asis"] and "format" not in (s["why"] or ""):
        bad.append("%s: neither run nor gated on its format: %s" % (m["id"], s["why"]))
# the held-out default of a source never uses the source's own constant
for s in doc["sources"]:
    if s["default"] and s["id"] in s["default"]["from"]:
        bad.append("%s: its own constant in its held-out default" % s["id"])
# a cell without data is "-" in the markdown, never a number
md = open(os.path.join(out, "matrix.md")).read().splitlines()
cols = ["ttft_p50", "ttft_p99", "tpot_p50", "e2e_p50"]
before = md[md.index("### As is: the shipped profiles behind their default stacks (no `--stack`)"):]
for s in doc["sources"]:
    if not s["asis"]:
        continue
    line = next(l for l in before if l.startswith("| %s | %s" % (s["family"], s["id"])))
    cells = [c.strip() for c in line.split("|")[5:9]]
    for c, text in zip(cols, cells):
        if (s["asis"][c] is None) != (text == "-"):
            bad.append("%s %s: cell %r against %r" % (s["id"], c, text, s["asis"][c]))
# intervals: lo <= hi; the prior no narrower than any family's bounds
iv = {e["name"]: e for e in json.load(open(os.path.join(out, "intervals.json")))["intervals"]}
for name, e in iv.items():
    for m in ("ttft", "tpot", "itl", "e2e"):
        if m + "_lo" in e and not 0 < e[m + "_lo"] <= e[m + "_hi"]:
            bad.append("interval %s %s: %r .. %r" % (name, m, e[m + "_lo"], e[m + "_hi"]))
        if name != "prior" and m + "_lo" in e and not (iv["prior"][m + "_lo"] <= e[m + "_lo"] and e[m + "_hi"] <= iv["prior"][m + "_hi"]):
            bad.append("interval %s %s: outside the prior" % (name, m))
if iv["vllm"]["sources"] != 8 or "distserve" in iv:
    bad.append("intervals: vllm from %d sources, distserve %r" % (iv["vllm"]["sources"], iv.get("distserve")))
for name, e in iv.items():
    for m in ("ttft", "tpot", "itl", "e2e"):
        if m + "_lo" in e and not e[m + "_lo"] <= 1 <= e[m + "_hi"]:
            bad.append("interval %s %s: %r .. %r does not hold 1" % (name, m, e[m + "_lo"], e[m + "_hi"]))
# few-shot: the constant is the calibration row's measured - simulated TTFT
# (at least fit-engine's bound 0.01 ms), that row is not among the predicted
# ones; DistServe's own runs are in target with it, GPUStack vLLM's row at
# C = 1 gives its 51 ms; a source of one row has nothing to predict
few = {f["id"]: f for f in json.load(open(os.path.join(out, "fewshot.json")))["sources"]}
for fid, f in few.items():
    if abs(f["row"]["ms"] - max(f["row"]["raw_ms"], 0.01)) > 1e-9:
        bad.append("%s few-shot: constant %r from %r" % (fid, f["row"]["ms"], f["row"]["raw_ms"]))
    if max(c["n"] for c in f["errors"].values() if c) >= src[fid]["rows"]:
        bad.append("%s few-shot: the calibration row among the predicted ones" % fid)
if few.get("distserve-own", {}).get("in_target") != "yes":
    bad.append("distserve-own few-shot: %r" % few.get("distserve-own"))
if "gpustack-vllm-h100" not in few or abs(few["gpustack-vllm-h100"]["row"]["ms"] - 51.1) > 5:
    bad.append("gpustack-vllm-h100 few-shot: %r" % few.get("gpustack-vllm-h100"))
if "gpustack-trtllm" in few or "one row: nothing left to predict" not in open(os.path.join(out, "fewshot.md")).read():
    bad.append("gpustack-trtllm few-shot: one row, yet predicted")
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
EOP
rc=$?
if [ "$rc" -eq 0 ]; then pass "the quick matrix: every source's errors and stack constant within their bands"; else fail "the quick matrix is outside its bands (above)"; fi
finish
