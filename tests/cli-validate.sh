#!/bin/sh
# Fidelity against real end-to-end serving measurements (issue 11 section 5),
# on held-out runs only: bench/validate.sh fits each engine profile without
# a group of runs and predicts that group; this test asserts the bands
# docs/validation.md ("Engine profiles against real serving measurements")
# reports.  Needs ../shared/data (skips, 77, without it).
. "$(dirname "$0")/cli-lib.sh"

# fidelity, not memory safety: the plain build runs it (tests/meson.build)
[ -z "${SERVESIM_SANITIZED:-}" ] || { echo "skip: sanitized build"; exit 77; }

SHARED=${SERVESIM_SHARED_DATA:-$(dirname "$0")/../../shared/data}
[ -d "$SHARED/serving" ] || { echo "skip: no $SHARED/serving"; exit 77; }
PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

SERVESIM_SHARED_DATA=$SHARED SERVESIM_VALIDATE_SKIP=llmservingsim,silicon \
	sh "$(dirname "$0")/../bench/validate.sh" "$BIN" "$T/val" \
	>"$T/table" 2>"$T/err" || { fail "bench/validate.sh: $(tail -3 "$T/err")"; finish; }

"$PY" - "$T/val" <<'EOF' && pass "held-out errors within the documented bands" || fail "held-out errors outside the bands (table: $(cat "$T/table"))"
import json, os, sys
d = sys.argv[1]

def groups(src):
    out = {}
    for r in json.load(open(os.path.join(d, src + ".json")))["runs"]:
        out.setdefault((os.path.basename(r["group"]), r["metric"]), []).append(
            abs(r["held_out"] / r["measured"] - 1))
    return {k: sum(v) / len(v) for k, v in out.items()}

bad = []
def band(what, err, limit):
    if not err <= limit:
        bad.append("%s: %.1f%% > %.0f%%" % (what, 100 * err, 100 * limit))

# Splitwise, each (model, TP) held out.  Measured today (2026-12-02):
# token_time 4.2 / 3.1 / 2.3% at TP 2 / 4 / 8 (the issue's 10% holds at
# each; the bands are that target) and 14.2% on BLOOM-176B, a whole model
# held out (the launch overlap is weakly identified by Llama alone: band
# 20%); prompt_time 13.3 / 20.1 / 22.1 / 21.0% (batched prefill is not
# modelled, docs/validation.md; the issue's 15% is met at TP 2 only, and
# the 27% band guards the figures with a few points of margin for the
# fit's resolution, tests/test-engine-fit.c).
sw = groups("splitwise")
band("splitwise llama tp2 token_time", sw[("llama-2-70b tp2", "tpot_mean")], 0.10)
band("splitwise llama tp4 token_time", sw[("llama-2-70b tp4", "tpot_mean")], 0.10)
band("splitwise llama tp8 token_time", sw[("llama-2-70b tp8", "tpot_mean")], 0.10)
band("splitwise bloom tp8 token_time", sw[("bloom-176b tp8", "tpot_mean")], 0.20)
for g in ("llama-2-70b tp2", "llama-2-70b tp4", "llama-2-70b tp8", "bloom-176b tp8"):
    band("splitwise %s prompt_time" % g, sw[(g, "ttft_mean")], 0.27)

# llm-d exp-0 (vLLM, Llama-3.1-70B TP 2): the issue's target, TTFT and TPOT
# p50 within 15% per QPS below saturation, each QPS held out (0.5, 0.67,
# 0.84 and 1 req/s), replayed with the deployment's own flags (0.95 of the
# A100's 80 GiB, 2048 tokens and 256 sequences per step).  Measured
# 2026-12-02: TTFT p50 3-8%, TPOT p50 1-6%.  TTFT p90 is held to 15% below
# 1 req/s (measured 2-9%; a p90 rests on a tenth of a few hundred
# requests); at 1 req/s the real engine is at its knee (TTFT p90 5.6 s)
# and the simulated one not yet (0.6 s), so its p90 is reported only.
ld = groups("llm-d-vllm")
for q in ("0.5", "0.67", "0.84", "1"):
    f = "LMBench_sharegpt_output_%s.csv" % q
    band("llm-d qps %s ttft_p50" % q, ld[(f, "ttft_p50")], 0.15)
    band("llm-d qps %s tpot_p50" % q, ld[(f, "tpot_p50")], 0.15)
    if q != "1":
        band("llm-d qps %s ttft_p90" % q, ld[(f, "ttft_p90")], 0.15)

# DistServe's vLLM runs (vLLM 0.2.3, OPT-13B), each rate held out.
# Measured 2026-12-02 (A100 at 80 GiB): TTFT p50 mean 12.9%, TPOT p50
# mean 15.9% over the 7 rates (1-3.5 req/s; per rate 8-20% and 2-37%, the
# worst at 3.5 req/s, the knee; refits from other starts gave 10.6/10.8%
# and 14/16%).  The issue's 10% is not met: the runs disagree with each
# other by about that much (the two 2 req/s runs differ by 9% in TPOT p50;
# 2.5 req/s measures a lower TTFT p50 than 1 and 2), and the fit's optimum
# is shallow.  The bands guard the figures with that margin.
ds = groups("distserve-vllm")
ttft = [v for (g, m), v in ds.items() if m == "ttft_p50"]
tpot = [v for (g, m), v in ds.items() if m == "tpot_p50"]
band("distserve vllm ttft_p50 mean over rates", sum(ttft) / len(ttft), 0.20)
band("distserve vllm tpot_p50 mean over rates", sum(tpot) / len(tpot), 0.22)

# DistServe's own runs (prefill TP 2 + decode TP 1), each rate held out:
# the issue's target, TTFT p50 and TPOT p50 within 10% at each rate below
# saturation (measured today: at most 6.1% and 4.3%).  TTFT p90 within 15%
# (measured at most 12.3%, at 1 req/s: the p90 of 100 requests rests on
# its 10 slowest).
dd = groups("distserve")
for (g, m), v in sorted(dd.items()):
    band("distserve %s %s" % (g, m), v, 0.15 if m == "ttft_p90" else 0.10)

if bad:
    sys.exit("\n".join(bad))
EOF
# aiconfigurator silicon (closed loop, H100 SXM): bench/validate.sh holds
# out each TP with a refit per TP (minutes); here one held-out prediction
# each, in a few seconds: the profile fitted on the TP 4 rows alone
# (sched_us_per_seq and api_in_ms; the rest of the shipped profile) predicts
# the TP 8 rows it never saw.  The two fitted values were made by
#   servesim calibrate fit-engine --engine E --select engine=E --select gpu=h100_sxm
#     --select mode=agg --select tp=4 FLAGS --no-holdout
#     --free sched_us_per_seq:0.01:1e4,api_in_ms:0.01:1e4 silicon_sample_excl_h200.csv
# FLAGS (how each engine's rows are replayed, docs/validation.md): SGLang
# --closed-start burst; TRT-LLM --closed-start spread --closed-max-seqs C-1
# (the server held one request fewer than the C clients).
SIL=$SHARED/serving/aiconfigurator_silicon/silicon_sample_excl_h200.csv
"$PY" - "$(dirname "$0")/../data/engines.json" "$T/sil-tp4.json" <<'EOF'
import json, sys
fit = {"sglang": (13.515211, 345.81189), "trtllm": (18.578151, 94.703069)}
out = []
for e in json.load(open(sys.argv[1]))["engines"]:
    if e["name"] in fit:
        e = dict(e, name=e["name"] + "-tp4")
        e["sched_us_per_seq"], e["api_in_ms"] = fit[e["name"][:-4]]
        # fitted behind the silicon harness's stack: its api_out_ms and
        # api_cv (data/stacks.json silicon-*), as the legacy keys
        e.pop("stack", None)
        e["api_out_ms"], e["api_cv"] = 1, 0.5
        out.append(e)
json.dump({"engines": out}, open(sys.argv[2], "w"))
EOF
for e in sglang trtllm; do
	flags="--closed-start burst"
	[ $e = trtllm ] && flags="--closed-start spread --closed-max-seqs C-1"
	"$BIN" calibrate fit-engine --no-fit --engine $e-tp4 --engine-catalog "$T/sil-tp4.json" \
		--select engine=$e --select gpu=h100_sxm --select mode=agg --select tp=8 \
		$flags --json="$T/sil-$e.json" "$SIL" >"$T/sil-$e.txt" 2>"$T/err" ||
		fail "silicon $e TP 8: $(tail -1 "$T/err")"
done
"$PY" - "$T" <<'EOF' && pass "silicon TP 8 held out: within the documented bands" || fail "silicon TP 8 held out outside the bands: $(cat "$T/sil-sglang.txt" "$T/sil-trtllm.txt" | grep -A3 '^metric')"
import json, os, sys
bad = []
def mape(e, m):
    runs = [r for r in json.load(open(os.path.join(sys.argv[1], "sil-%s.json" % e)))["runs"]
            if r["metric"] == m]
    return sum(abs(r["fitted"] / r["measured"] - 1) for r in runs) / len(runs)
# Measured today (docs/validation.md, "aiconfigurator silicon"): SGLang TP 8
# TPOT 5.3%, TTFT 13.9% (the issue's 15% / 25% met); TRT-LLM TP 8, its
# rows replayed with the server holding C - 1 of the C clients: TPOT 10.6%
# (met), TTFT 40.3% (not met: the C = 64 and 128 rows, 61% and 80% off,
# queue far more than one request; C = 8-32 are 17-25% off).  The bands
# add a few points for the merge's KV capacity change (+7%) and guard the
# figures: TRT-LLM TTFT above 44% would mean the C - 1 replay was lost (the
# same parameters without it: 45.6%).
for e, m, lim in (("sglang", "tpot_mean", 0.10), ("sglang", "ttft_mean", 0.20),
                  ("trtllm", "tpot_mean", 0.15), ("trtllm", "ttft_mean", 0.44)):
    v = mape(e, m)
    if not v <= lim:
        bad.append("%s %s: %.1f%% > %.0f%%" % (e, m, 100 * v, 100 * lim))
if bad:
    sys.exit("\n".join(bad))
EOF

# FP8 dense rows (issue 12 section 3; docs/validation.md, "FP8 dense rows"):
# the shipped profiles as they are (--no-fit), the rows' weights in fp8
# (their precision column), KV in bf16 (not recorded; the engines' default),
# each engine replayed as above.  Measured today: TRT-LLM Qwen3-32B, 180
# rows, TPOT 9.8%; vLLM Llama-3.1-70B and Qwen3-32B, 48 rows, TPOT 11.2%
# (the issue's target: 15%; the fp8 GEMMs at gemm_fp8_eff 0.5).  The row counts guard against the rows being
# skipped again.  TRT-LLM's dense rows are Qwen3-32B's (the other fp8 H100
# TRT-LLM rows, gpt-oss-120b's TP-only ones, are priced since MLA and local
# attention are, and are no dense rows).
for e in trtllm vllm; do
	# behind the stack each profile was fitted with (data/stacks.json)
	flags="--closed-start spread --stack llm-d-exp0"
	[ $e = trtllm ] && flags="--closed-start spread --closed-max-seqs C-1 --select model=Qwen/Qwen3-32B --stack silicon-trtllm"
	"$BIN" calibrate fit-engine --no-fit --engine $e --select engine=$e --select gpu=h100_sxm \
		--select mode=agg --select precision=fp8 $flags --json="$T/fp8-$e.json" "$SIL" \
		>"$T/fp8-$e.txt" 2>"$T/err" || fail "FP8 dense $e: $(tail -1 "$T/err")"
done
"$PY" - "$T" <<'EOF' && pass "FP8 dense rows: TPOT within the issue's 15%" || fail "FP8 dense rows: $(cat "$T/fp8-trtllm.txt" "$T/fp8-vllm.txt" | grep -A3 '^metric')"
import json, os, sys
bad = []
for e, n_want, lim in (("trtllm", 180, 0.15), ("vllm", 48, 0.15)):
    runs = [r for r in json.load(open(os.path.join(sys.argv[1], "fp8-%s.json" % e)))["runs"]
            if r["metric"] == "tpot_mean"]
    v = sum(abs(r["fitted"] / r["measured"] - 1) for r in runs) / max(len(runs), 1)
    if len(runs) != n_want:
        bad.append("%s: %d FP8 rows replayed, expected %d" % (e, len(runs), n_want))
    if not v <= lim:
        bad.append("%s tpot_mean: %.1f%% > %.0f%%" % (e, 100 * v, 100 * lim))
if bad:
    sys.exit("\n".join(bad))
EOF
# gpt-oss-120b (MoE, sliding window every other layer, sinks) on B200 in
# fp4, vLLM, TP only (docs/validation.md, "MLA, local attention and fp4"):
# the shipped vllm profile as it is, 66 configurations of 84 rows, TPOT
# 14.8% measured today; the issue's target is 20%.  The count guards
# against the rows being skipped again.
"$BIN" calibrate fit-engine --no-fit --engine vllm --stack llm-d-exp0 --select engine=vllm --select gpu=b200_sxm \
	--select mode=agg --select model=openai/gpt-oss-120b --closed-start spread \
	--json="$T/oss.json" "$SIL" >"$T/oss.txt" 2>"$T/err" || fail "gpt-oss-120b b200 vllm: $(tail -1 "$T/err")"
"$PY" - "$T/oss.json" <<'EOF' && pass "gpt-oss-120b B200 vLLM rows: TPOT within the issue's 20%" || fail "gpt-oss-120b: $(grep -A3 '^metric' "$T/oss.txt")"
import json, sys
runs = [r for r in json.load(open(sys.argv[1]))["runs"] if r["metric"] == "tpot_mean"]
v = sum(abs(r["fitted"] / r["measured"] - 1) for r in runs) / max(len(runs), 1)
assert len(runs) == 66, len(runs)
assert v <= 0.20, v
EOF

# B200 TRT-LLM Llama-3.1-70B FP8 rows (docs/validation.md, "FP8 dense rows",
# B200): replayed with the benchmark launch's token budget (max_num_tokens =
# C + ISL + 1500: --closed-max-tokens) and all C slots.  With the profile's
# 8192 tokens an 8192-token prompt ran only in an empty step and TTFT MAPE
# was ~12,000%; measured today TPOT 11.2%, TTFT 88.5% over 69 rows (three
# KV-starved TP 1 / 2 rows skipped: no GUARANTEED_NO_EVICT admission).
"$BIN" calibrate fit-engine --no-fit --engine trtllm --stack silicon-trtllm --select engine=trtllm --select gpu=b200_sxm \
	--select mode=agg --select precision=fp8 --select model=meta-llama/Llama-3.1-70B --closed-start spread \
	--closed-max-tokens C+ISL+1500 \
	--json="$T/b200-trtllm.json" "$SIL" >"$T/b200-trtllm.txt" 2>"$T/err" ||
	fail "B200 TRT-LLM FP8: $(tail -1 "$T/err")"
"$PY" - "$T/b200-trtllm.json" <<'EOF' && pass "B200 TRT-LLM FP8 rows with the benchmark's token budget: TPOT within 15%, TTFT within 100%" || fail "B200 TRT-LLM FP8 rows: $(grep -A3 '^metric' "$T/b200-trtllm.txt")"
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
bad = []
for m, lim in (("tpot_mean", 0.15), ("ttft_mean", 1.0)):
    r = [x for x in runs if x["metric"] == m]
    v = sum(abs(x["fitted"] / x["measured"] - 1) for x in r) / max(len(r), 1)
    if len(r) != 69:
        bad.append("%s: %d rows replayed, expected 69" % (m, len(r)))
    if not v <= lim:
        bad.append("%s: %.1f%% > %.0f%%" % (m, 100 * v, 100 * lim))
if bad:
    sys.exit("\n".join(bad))
EOF

# MoE with expert parallelism and attention data parallelism (docs/validation.md,
# "MoE models by parallelism layout"): the B200 TRT-LLM DeepSeek-R1 rows of
# attention DP 4 / 8 with the experts over all GPUs (moe_ep_size 4 / 8,
# moe_tp_size 1; 17 rows, 13 configurations), replayed as --tp D --ep D
# --dp-attention D with batch_size x D clients, the benchmark's token budget
# per rank and all slots.  TPOT 20.9% measured today with the ranks in
# lock-step (12.4% with independent ranks; docs/validation.md,
# "Attention-DP ranks in lock-step": a prefill on one rank now holds the
# others, which clients out of phase make frequent), held to 22%; the
# count guards against the rows being skipped or merged again.
{ head -1 "$SIL"; awk -F, '$3 == "trtllm" && $5 == "deepseek-ai/DeepSeek-R1" && $6 == "b200_sxm" &&
	$8 == "agg" && $16 > 1 && $17 == 1 && $18 > 1' "$SIL"; } >"$T/dep.csv"
"$BIN" calibrate fit-engine --no-fit --engine trtllm --stack silicon-trtllm --closed-start spread --closed-max-tokens C+ISL+1500 \
	--group-by model-tp --json="$T/dep.json" "$T/dep.csv" >"$T/dep.txt" 2>"$T/err" ||
	fail "DeepSeek-R1 attention-DP rows: $(tail -1 "$T/err")"
"$PY" - "$T/dep.json" <<'EOF' && pass "B200 TRT-LLM DeepSeek-R1 EP + attention-DP rows: 13 configurations, TPOT within 22%" || fail "DeepSeek-R1 EP/DP rows: $(cat "$T/dep.txt" "$T/err" | tail -12)"
import json, sys
runs = [r for r in json.load(open(sys.argv[1]))["runs"] if r["metric"] == "tpot_mean"]
v = sum(abs(r["fitted"] / r["measured"] - 1) for r in runs) / max(len(runs), 1)
groups = sorted({r["group"] for r in runs})
assert len(runs) == 13, len(runs)
assert groups == ["deepseek-v3 tp4 ep4 dp4", "deepseek-v3 tp8 ep8 dp8"], groups
assert v <= 0.22, v
EOF
finish
