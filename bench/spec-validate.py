#!/usr/bin/env python3
"""Speculative decoding against measured speedups (issue 32, section 3):
servesim runs every case with and without `--spec` and compares the ratio
it predicts with the one measured.

    python3 bench/spec-validate.py [--servesim BIN] [--shared DIR] [--quick]
                                   [--jobs N] [--json OUT] [--check] [--cases]
                                   [--only batch1|load] [--specbench-engine NAME]
                                   [--implied-al]

Checks (docs/validation.md, "Speculative decoding: speedups (issue 32)"):

* batch1: the wall-clock speedup at batch 1 (tokens/s with speculation over
  tokens/s without) of Spec-Bench's leaderboard rows and SGLang's H100
  EAGLE rows; band 15%.  Each Spec-Bench row's own mean accepted tokens is
  the acceptance assumed (alpha solved so that the chain's AL at the
  case's k is that figure, decay the catalog's `<method>-median`): the
  check is the time model of a speculative step, not acceptance.
* load: DeepSeek-R1 serving with MTP against its non-speculative twin at
  the same concurrency (InferenceX; where no twin was measured at that
  concurrency, one interpolated between the two around it, at most 4x
  apart, the case marked "twin cA-cB"): the TPOT ratio and the output
  throughput ratio (spec / none) at every concurrency, band 15%; and per
  configuration the concurrency where the TPOT ratio crosses 1, predicted
  against measured, on B200 and B300.  Nothing is fitted on these rows:
  every GPU is held out (leave-one-GPU-out by construction).

--implied-al: per under-load row, the acceptance length (AL) at which
servesim's predicted TPOT ratio equals the measured one (decay held at the
assumed entry's, alpha bisected), beside the AL assumed, and the extra time
per speculative step that would close the gap at the assumed AL instead.

--quick runs fewer requests per case (the test's setting; the figures move
by a point or two).  --cases prints the cases and what was left out, and
runs nothing.  --json OUT writes every row; --check exits 1 when a row
misses its band or was not run.  A case servesim runs without --spec but
refuses with it (a combination it does not model) is a row "not run" with
servesim's reason, not an error.  Bad input: one line naming the file and
line, exit 1; a bad command line: exit 2.  Standard library only.
"""
import datetime
import importlib.util
import json
import math
import os
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)   # benchlib, when loaded by path
from benchlib import harness_parser, servesim_json, write_json  # noqa: E402
ROOT = os.path.dirname(HERE)


def _load_fit():
    """bench/acceptance-fit.py: the acceptance model (al, solve_alpha) and
    its CSV reader, declared once there."""
    spec = importlib.util.spec_from_file_location("acceptance_fit",
                                                  os.path.join(HERE, "acceptance-fit.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FIT = _load_fit()
BadInput = FIT.BadInput

BAND_SPEEDUP = 0.15      # batch-1 speedup, relative
BAND_LOAD = 0.15         # under-load TPOT and throughput ratios, relative

# --- batch 1: Spec-Bench ------------------------------------------------------
# Spec-Bench method -> (servesim method, k, tree or None for a chain, why).
# k is the draft depth, tree the candidate tokens verified per step besides
# the bonus position, both from the defaults of Spec-Bench's own scripts
# (hemingkx/Spec-Bench, evaluation/inference_*.py) which eval_script.sh runs
# without overriding them.
SPECBENCH_CASES = {
    "EAGLE": ("eagle", 5, 25,
              "inference_eagle.py's default tree mc_sim_7b_63, EAGLE's static tree: 25 nodes, "
              "depth 5 (model/eagle3/choices.py@c9b83873 lists it)"),
    "EAGLE2": ("eagle", 6, 59,
               "inference_eagle2.py@a5fd1a3e defaults total_token 60, depth 5, top_k 10: one top-k "
               "level then `depth` expansions (topK_genrate in model/eagle3/cnets.py@c9b83873), so "
               "6 levels, and total_token - 1 = 59 draft tokens verified"),
    "EAGLE3": ("eagle3", 6, 59,
               "inference_eagle3.py@7f214e23 defaults total_token 60, depth 5, top_k 10, as EAGLE2"),
    "Medusa": ("medusa", 4, 63,
               "inference_medusa.py@60884d29: 4 heads, medusa_choices mc_sim_7b_63 (63 nodes, depth 4)"),
    "Hydra": ("eagle", 4, 63,
              "inference_hydra.py@02afedb1: hydra_choices mc_sim_7b_63 "
              "(model/hydra/hydra_choices.py: 63 nodes, depth 4); Hydra's heads are "
              "sequentially dependent (each conditioned on the candidate continuation so far, "
              "arXiv:2402.05109), so the tree is drafted a level a pass, as EAGLE's is, not in "
              "one pass as Medusa's independent heads"),
    "PLD": ("ngram", 10, None,
            "inference_pld.py@1bc7de13: draft_num_candidate_tokens 10 (a chain), "
            "draft_matching_window_size 3"),
}
SPECBENCH_LEFT_OUT = {
    "SAMD[EAGLE2]": "a suffix automaton's retrievals merged into EAGLE-2's tree (samd_n_predicts 40): "
                    "no servesim method drafts that way",
    "SpS": "the draft length is transformers' assisted-generation schedule (num_assistant_tokens "
           "and its schedule changed across releases; Spec-Bench pins neither), and vicuna-68m is not "
           "in data/models.json",
    "Recycling": "Token Recycling's adjacency-matrix tree: no servesim method",
    "REST": "REST's datastore retrieval runs on the CPU (RAYON threads): no servesim method",
    "Lookahead": "Lookahead's Jacobi window and n-gram pool (level 5, window 7, guess 7): "
                 "no servesim method",
}
# Spec-Bench's targets -> catalog models of the same shapes (Vicuna v1.3 is
# a LLaMA fine-tune: LLaMA-7B and -13B have Llama-2-7B's and -13B's layer
# shapes; the context length differs and does not enter these runs).
SPECBENCH_TARGET = {
    "lmsys/vicuna-7b-v1.3": "llama-2-7b",
    "lmsys/vicuna-13b-v1.3": "llama-2-13b",
    "lmsys/vicuna-33b-v1.3": "vicuna-33b",
}
SPECBENCH_GPU = {"RTX 3090": "rtx-3090", "A100 80GB": "a100-80gb-sxm"}
# Research code, PyTorch eager at batch 1: no serving engine's scheduler,
# front end or CUDA graphs (its launches are in no profile) -> kernels only.
SPECBENCH_ENGINE = "none"

# --- batch 1: SGLang's H100 table -----------------------------------------------
# Its spec parameters are not in the table; the page's own launch examples
# for EAGLE-2 and EAGLE-3 use --speculative-num-steps 3, --speculative-eagle-
# topk 4, --speculative-num-draft-tokens 16 (the root counted): k 3, tree 15.
# The table gives no acceptance: EAGLE-3 takes vLLM's measured Llama-3.1-8B
# MT-Bench entry, EAGLE-2 the eagle median (both assumed, not measured with
# the row).
SGLANG_CASES = {
    "EAGLE-2": ("eagle", 3, 15, "eagle-median"),
    "EAGLE-3": ("eagle3", 3, 15, "vllm-eagle3-llama-3.1-8b-instruct-mt-bench"),
}

# Lengths of a batch-1 request: neither source states them (Spec-Bench's
# six tasks and MT-Bench's prompts run from tens to ~1,000 tokens, outputs
# up to max_new_tokens 1024); assumed, the same for every batch-1 case.
BATCH1_PROMPT, BATCH1_OUTPUT = 256, 256
BATCH1_REQUESTS = (48, 8)        # (full, --quick)

# --- under load: InferenceX DeepSeek-R1, MTP against none -------------------------
# MTP depth per framework, from InferenceX's recipes
# (SemiAnalysisAI/InferenceX benchmarks/dsr1_fp8_b200_mtp.sh@719be18d:
# --speculative-num-steps 2, --speculative-num-draft-tokens 3, topk 1, a chain of 2;
# dsr1_fp{8,4}_b200_trt_mtp.sh@7506aeee/@6c5e4c55: num_nextn_predict_layers 3,
# 1 with attention DP).
def mtp_k(framework, dp_attention):
    if framework == "sglang":
        return 2
    return 1 if dp_attention else 3


# The acceptance of DeepSeek-R1's MTP is not recorded (no AL, no k) and the
# golden AL curves hold DeepSeek-V4-Pro, not V3/R1: the catalog's mtp median
# (alpha 0.8703) is assumed, which the DeepSeek-V3 report's 85-90% acceptance
# of the second token (arXiv:2412.19437, section 5.4.3) brackets.
LOAD_ACCEPT = "mtp-median"
LOAD_ENGINE = {"sglang": "sglang", "trt": "trtllm"}
LOAD_GPU = {"b200": "b200", "b300": "b300", "h100": "h100-sxm", "gb200": "gb200"}
LOAD_DTYPE = {"fp8": "fp8", "fp4": "fp4"}
# Requests per run (per client, floor, cap): InferenceX sends 10 x C
# (--num-prompts $((CONC * 10))), which the full run replays; --quick sends
# 2 x C, at least 16 and at most 256.
LOAD_REQUESTS = ((10, 1, 1 << 20), (2, 16, 256))
# An MTP row without a twin at its concurrency is paired with one
# interpolated between the non-speculative rows of its layout at the two
# measured concurrencies around it (log TPOT and log throughput linear in
# log C), when those are at most TWIN_SPAN apart (adjacent points of
# InferenceX's 4x sweeps); wider gaps are left out.
TWIN_SPAN = 4


def round64(x):
    return (x + 63) // 64 * 64


def token_budget(framework, conc_rank, isl, k, hardware="b200"):
    """The recipes' step token budget (max_num_tokens / chunked prefill
    size), per attention rank: TRT-LLM (C + ISL + 64) rounded up to 64, at
    least 8192 (dsr1_fp8_b200_trt.sh@0a919c5f), with MTP ((k + 1) C + ISL + 64)
    rounded (the _mtp recipes); SGLang's chunked-prefill and max-prefill 32768
    on B200, 16384 on B300 (single_node/dsr1_fp8_b300_mtp.sh@56324839: the
    B200 MTP recipe otherwise as is, MTP a chain of 2)."""
    if framework == "sglang":
        return 16384 if hardware == "b300" else 32768
    if k:
        return round64((k + 1) * conc_rank + isl + 64)
    return max(8192, round64(conc_rank + isl + 64))


# --- reading ------------------------------------------------------------------

def catalog(binary):
    out = {}
    for what in ("gpus", "models", "engines", "acceptance"):
        out[what] = {e["name"]: e for e in servesim_json(binary, ["list", what, "--json"])}
    return out


def specbench_cases(d, cat, engine):
    cases, left = [], []
    path = os.path.join(d, "specbench_leaderboard.csv")
    for row in FIT.read_csv(path, FIT.SOURCE_COLS + ("gpu", "target_model", "method",
                                                     "mean_accepted_tokens", "speedup_overall")):
        label = "%s %s %s" % (row["gpu"].split(" (")[0], row["target_model"].split("/")[-1],
                              row["method"])
        if row["method"] in SPECBENCH_LEFT_OUT:
            left.append((label, SPECBENCH_LEFT_OUT[row["method"]]))
            continue
        if row["method"] not in SPECBENCH_CASES:
            raise BadInput("%s: method '%s', expected one of %s" % (
                row["_where"], row["method"],
                ", ".join(sorted(list(SPECBENCH_CASES) + list(SPECBENCH_LEFT_OUT)))))
        gpu = next((g for k, g in SPECBENCH_GPU.items() if row["gpu"].startswith(k)), None)
        if gpu is None:
            raise BadInput("%s: gpu '%s', expected one starting with %s" % (
                row["_where"], row["gpu"], " or ".join(SPECBENCH_GPU)))
        model = SPECBENCH_TARGET.get(row["target_model"])
        if model is None:
            raise BadInput("%s: target_model '%s', expected one of %s" % (
                row["_where"], row["target_model"], ", ".join(SPECBENCH_TARGET)))
        if gpu not in cat["gpus"]:
            left.append((label, "GPU %s is not in the catalog" % gpu))
            continue
        if model not in cat["models"]:
            left.append((label, "model %s is not in the catalog" % model))
            continue
        method, k, tree, why = SPECBENCH_CASES[row["method"]]
        al = FIT.num(row, "mean_accepted_tokens")
        prior = cat["acceptance"].get("%s-median" % method)
        if prior is None:
            raise BadInput("%s: the acceptance catalog has no %s-median entry (servesim list acceptance)"
                           % (row["_where"], method))
        decay = prior["decay"]
        alpha = FIT.solve_alpha(decay, k, al)
        if alpha is None:
            left.append((label, "AL %.2f beyond k = %d at decay %.4f" % (al, k, decay)))
            continue
        spec = "%s:k=%d%s,alpha=%.6f,decay=%.4f" % (
            method, k, ",tree=%d" % tree if tree else "", alpha, decay)
        cases.append({
            "check": "batch1", "case": label, "where": row["_where"],
            "cite": FIT.cite(row), "gpu": gpu, "model": model, "engine": engine,
            "method": method, "k": k, "tree": tree, "why": why, "spec": spec,
            "al_measured": al, "acceptance": "measured (the row's AL)",
            "measured": FIT.num(row, "speedup_overall", 0.01, 100.0)})
    return cases, left


def sglang_cases(d, cat):
    path = os.path.join(d, "sglang_docs_eagle_h100.csv")
    rows = FIT.read_csv(path, FIT.SOURCE_COLS + ("method", "target_model", "throughput_tok_s"))
    base = [r for r in rows if r["method"] == "none"]
    if len(base) != 1:
        raise BadInput("%s:2: expected one row of method none, found %d" % (path, len(base)))
    cases = []
    for row in rows:
        if row["method"] == "none":
            continue
        if row["method"] not in SGLANG_CASES:
            raise BadInput("%s: method '%s', expected none or one of %s" % (
                row["_where"], row["method"], ", ".join(SGLANG_CASES)))
        method, k, tree, accept = SGLANG_CASES[row["method"]]
        if accept not in cat["acceptance"]:
            raise BadInput("%s: acceptance entry %s is not in the catalog" % (row["_where"], accept))
        spd = (FIT.num(row, "throughput_tok_s", 1e-3, 1e7) /
               FIT.num(base[0], "throughput_tok_s", 1e-3, 1e7))
        cases.append({
            "check": "batch1", "case": "H100 Llama-3.1-8B SGLang %s" % row["method"],
            "where": row["_where"], "cite": FIT.cite(row), "gpu": "h100-sxm",
            "model": "llama-3.1-8b", "engine": "sglang", "method": method, "k": k, "tree": tree,
            "why": "SGLang docs' EAGLE launch examples: num-steps 3, topk 4, num-draft-tokens 16",
            "spec": "%s:k=%d,tree=%d,accept=%s" % (method, k, tree, accept),
            "al_measured": None, "acceptance": "assumed (%s)" % accept, "measured": spd})
    return cases


def _bool(row, col):
    v = row[col]
    if v not in ("True", "False"):
        raise BadInput("%s: %s is '%s', expected True or False" % (row["_where"], col, v))
    return v == "True"


def _int(row, col):
    try:
        v = int(row[col])
    except ValueError:
        v = 0
    if v < 1:
        raise BadInput("%s: %s is '%s', expected a positive integer" % (row["_where"], col, row[col]))
    return v


def _sec(row, col):
    """A positive figure of the row (the metrics columns)."""
    return FIT.num(row, col, 1e-9, 1e9)


def load_cases(d):
    """InferenceX pairs: every MTP row with its non-speculative twin (same
    hardware, framework, precision, ISL, OSL, concurrency, layout), the
    twin measured nearest in date; per (configuration, concurrency) the
    median ratio over the MTP rows."""
    path = os.path.join(d, "inferencex_dsr1_mtp_vs_none.csv")
    need = FIT.SOURCE_COLS + ("hardware", "framework", "precision", "spec_method", "disagg",
                              "is_multinode", "decode_tp", "decode_ep", "decode_dp_attention",
                              "isl", "osl", "conc", "date", "run_url", "m_median_tpot",
                              "m_output_tput_per_gpu")
    rows = FIT.read_csv(path, need)
    left = {}

    def leave(reason):
        left[reason] = left.get(reason, 0) + 1

    kept = []
    for r in rows:
        if r["spec_method"] not in ("mtp", "none"):
            raise BadInput("%s: spec_method '%s', expected mtp or none" % (r["_where"], r["spec_method"]))
        if _bool(r, "disagg"):
            leave("disaggregated prefill/decode (servesim's disaggregation is not this check's)")
        elif _bool(r, "is_multinode"):
            leave("multi-node")
        elif r["framework"] not in LOAD_ENGINE:
            leave("framework %s (Dynamo) has no engine profile" % r["framework"])
        elif r["hardware"] not in LOAD_GPU:
            leave("GPU %s is not in the catalog" % r["hardware"])
        else:
            _sec(r, "m_median_tpot")
            _sec(r, "m_output_tput_per_gpu")
            _days(r)
            kept.append(r)

    def key(r):
        return (r["hardware"], r["framework"], r["precision"], _int(r, "isl"), _int(r, "osl"),
                _int(r, "decode_tp"), _int(r, "decode_ep"), _bool(r, "decode_dp_attention"),
                _int(r, "conc"))

    by = {}
    for r in kept:
        by.setdefault(key(r), {"mtp": [], "none": []})[r["spec_method"]].append(r)
    cases = []
    # the none rows of each layout by concurrency (interpolated twins)
    nones = {}
    for kk, side in by.items():
        if side["none"]:
            nones.setdefault(kk[:-1], {})[kk[-1]] = side["none"]

    def nearest(rows_, m):
        return min(rows_, key=lambda z: (abs(_days(z) - _days(m)), z["date"]))

    for kk in sorted(by):
        side = by[kk]
        hw, fw, prec, isl, osl, tp, ep, dp, conc = kk
        span = None
        if side["mtp"] and not side["none"]:
            # no twin at this concurrency: one interpolated between the two
            # measured around it, when they are at most TWIN_SPAN apart
            cs = nones.get(kk[:-1], {})
            lo = max([c for c in cs if c < conc], default=None)
            hi = min([c for c in cs if c > conc], default=None)
            if lo is not None and hi is not None and hi <= TWIN_SPAN * lo:
                span = (lo, hi)
        if not side["mtp"] or (not side["none"] and span is None):
            for r in side["mtp"] + side["none"]:
                leave("no twin at the same concurrency and layout (%s %s)" % (kk[0], kk[1]))
            continue
        tpot, tput, pairs = [], [], []
        for m in side["mtp"]:
            if span is None:
                twin = nearest(side["none"], m)
                t_tpot, t_tput = _sec(twin, "m_median_tpot"), _sec(twin, "m_output_tput_per_gpu")
                pairs.append("%s (%s) / %s (%s)" % (m["run_url"], m["date"], twin["run_url"], twin["date"]))
            else:
                lo, hi = span
                a, b = nearest(nones[kk[:-1]][lo], m), nearest(nones[kk[:-1]][hi], m)
                w = math.log2(conc / lo) / math.log2(hi / lo)
                t_tpot = _sec(a, "m_median_tpot") ** (1 - w) * _sec(b, "m_median_tpot") ** w
                t_tput = (_sec(a, "m_output_tput_per_gpu") ** (1 - w) *
                          _sec(b, "m_output_tput_per_gpu") ** w)
                pairs.append("%s (%s) / interpolated c%d %s (%s), c%d %s (%s)" % (
                    m["run_url"], m["date"], lo, a["run_url"], a["date"], hi, b["run_url"], b["date"]))
            tpot.append(_sec(m, "m_median_tpot") / t_tpot)
            tput.append(_sec(m, "m_output_tput_per_gpu") / t_tput)
        k = mtp_k(fw, dp)
        conf = "%s %s %s %dk/%dk tp%d ep%d%s" % (hw, fw, prec, isl // 1024, osl // 1024, tp, ep,
                                                 " dp" if dp else "")
        cases.append({
            "check": "load", "config": conf,
            "case": "%s c%d%s" % (conf, conc, " (twin c%d-c%d)" % span if span else ""), "conc": conc,
            "twin": "interpolated c%d-c%d" % span if span else "matched",
            "hardware": hw, "framework": fw, "precision": prec, "isl": isl, "osl": osl,
            "tp": tp, "ep": ep, "dp": dp, "k": k, "method": "mtp",
            "spec": "mtp:k=%d,accept=%s" % (k, LOAD_ACCEPT), "acceptance": "assumed (%s)" % LOAD_ACCEPT,
            "n_pairs": len(pairs), "pairs": pairs,
            "measured_tpot": statistics.median(tpot), "measured_tput": statistics.median(tput),
            "where": "%s (%d MTP rows)" % (path, len(pairs))})
    return cases, left


def _days(row):
    """The row's date as a day number (an order for "nearest in date")."""
    try:
        y, m, dd = (int(x) for x in row["date"].split("-"))
        return (datetime.date(y, m, dd) - datetime.date(2000, 1, 1)).days
    except ValueError:
        raise BadInput("%s: date is '%s', expected YYYY-MM-DD" % (row["_where"], row["date"])) from None


# --- running --------------------------------------------------------------------

def batch1_args(c, quick):
    return ["run", "--json", "--seed", "0", "--concurrency", "1",
            "--lengths", "fixed:prompt=%d,output=%d" % (BATCH1_PROMPT, BATCH1_OUTPUT),
            "--num-requests", str(BATCH1_REQUESTS[1 if quick else 0]),
            "--model", c["model"], "--gpu", c["gpu"], "--engine", c["engine"]]


def load_args(c, cat, quick, spec):
    per, floor, cap = LOAD_REQUESTS[1 if quick else 0]
    n = min(cap, max(floor, per * c["conc"]))
    engine = LOAD_ENGINE[c["framework"]]
    conc_rank = -(-c["conc"] // c["tp"]) if c["dp"] else c["conc"]
    budget = token_budget(c["framework"], conc_rank, c["isl"], c["k"] if spec else 0, c["hardware"])
    # the profile's policy with the recipe's token budget
    name, _, params = cat["engines"][engine]["policy"].partition(":")
    policy = name + ":" + ",".join([p for p in params.split(",")
                                    if p and not p.startswith("max_num_batched_tokens=")] +
                                   ["max_num_batched_tokens=%d" % budget])
    a = ["run", "--json", "--seed", "0", "--concurrency", str(c["conc"]),
         "--lengths", "fixed:prompt=%d,output=%d" % (c["isl"], c["osl"]),
         "--num-requests", str(n), "--model", "deepseek-v3", "--gpu", LOAD_GPU[c["hardware"]],
         "--tp", str(c["tp"]), "--ep", str(c["ep"]),
         "--weight-dtype", LOAD_DTYPE[c["precision"]], "--kv-dtype", "fp8",
         "--engine", engine, "--policy", policy]
    if c["dp"]:
        a += ["--dp-attention", str(c["tp"])]
    return a


def run_case(binary, cat, c, quick):
    if c["check"] == "batch1":
        base = batch1_args(c, quick)
        off, on = base, base + ["--spec", c["spec"]]
    else:
        off = load_args(c, cat, quick, False)
        on = load_args(c, cat, quick, True) + ["--spec", c["spec"]]
    r = dict(c)
    r["command_off"] = "servesim " + " ".join(off)
    r["command_on"] = "servesim " + " ".join(on)
    try:
        a = servesim_json(binary, off)
    except (RuntimeError, ValueError) as e:
        r["error"] = "without --spec: %s" % e
        return r
    try:
        b = servesim_json(binary, on)
    except RuntimeError as e:
        # the case runs without speculation but servesim refuses it with:
        # a combination it does not model (not a harness error)
        r["refused"] = str(e)
        return r
    except ValueError as e:
        r["error"] = "with --spec: %s" % e
        return r
    sp = b.get("speculation") or {}
    r["al_sim"] = sp.get("acceptance_length")
    if c["check"] == "batch1":
        r["predicted"] = b["throughput"]["output_tokens_per_s"] / a["throughput"]["output_tokens_per_s"]
        r["error_pct"] = 100 * (r["predicted"] / r["measured"] - 1)
        r["in_band"] = abs(r["predicted"] / r["measured"] - 1) <= BAND_SPEEDUP
    else:
        r["tpot_off_ms"], r["tpot_on_ms"] = a["tpot_ms"]["p50"], b["tpot_ms"]["p50"]
        r["predicted_tpot"] = b["tpot_ms"]["p50"] / a["tpot_ms"]["p50"]
        r["predicted_tput"] = (b["throughput"]["output_tokens_per_s"] /
                               a["throughput"]["output_tokens_per_s"])
        r["error_tpot_pct"] = 100 * (r["predicted_tpot"] / r["measured_tpot"] - 1)
        r["error_tput_pct"] = 100 * (r["predicted_tput"] / r["measured_tput"] - 1)
        r["in_band"] = (abs(r["error_tpot_pct"]) <= 100 * BAND_LOAD and
                        abs(r["error_tput_pct"]) <= 100 * BAND_LOAD)
    return r


def crossover(points):
    """The concurrency where the TPOT ratio crosses 1, interpolated on
    log2(C) between the two measured concurrencies around it, or None;
    points [(C, ratio)] sorted by C."""
    for (c0, r0), (c1, r1) in zip(points, points[1:]):
        if (r0 - 1) * (r1 - 1) <= 0 and r0 != r1:
            t = (1 - r0) / (r1 - r0)
            return 2 ** (math.log2(c0) + t * (math.log2(c1) - math.log2(c0)))
    return None


def bracket(points, x):
    if x is None:
        return None
    cs = [c for c, _ in points]
    for c0, c1 in zip(cs, cs[1:]):
        if c0 <= x <= c1:
            return (c0, c1)
    return None


def crossovers(rows):
    """Per configuration with two or more concurrencies: measured and
    predicted crossover; in band when both say none within the measured
    concurrencies, or both fall between the same two of them."""
    out = []
    confs = {}
    for r in rows:
        if r["check"] == "load" and not not_run(r):
            confs.setdefault(r["config"], []).append(r)
    for conf, rs in sorted(confs.items()):
        if len(rs) < 2:
            continue
        rs.sort(key=lambda r: r["conc"])
        meas = [(r["conc"], r["measured_tpot"]) for r in rs]
        pred = [(r["conc"], r["predicted_tpot"]) for r in rs]
        xm, xp = crossover(meas), crossover(pred)
        ok = bracket(meas, xm) == bracket(pred, xp)
        out.append({"check": "crossover", "config": conf,
                    "concurrencies": [c for c, _ in meas],
                    "measured": xm, "predicted": xp, "in_band": ok})
    return out


# --- implied acceptance (--implied-al) ------------------------------------------
# Per under-load row: the acceptance length at which servesim's predicted
# TPOT ratio equals the measured one.  alpha is bisected through the AL it
# gives (FIT.solve_alpha) with decay held at the assumed entry's, so the
# per-position shape stays the mtp median's; AL runs from IMPLIED_AL_LO (all
# but no acceptance) to alpha = 1 at that decay (the most the chain gives).
IMPLIED_AL_LO = 1.01
IMPLIED_STEPS = 8        # bisection steps: the AL interval shrinks 256-fold (to < 0.01)


def implied_al(binary, cat, r, quick):
    """Adds to r (a load row run with the assumed acceptance): al_assumed,
    al_implied (None when out of range, then implied_bound says which
    side), the runs it made, and the per-step cost that would close the gap
    at the assumed AL."""
    prior = cat["acceptance"][LOAD_ACCEPT]
    decay, k, meas = prior["decay"], r["k"], r["measured_tpot"]
    on = load_args(r, cat, quick, True)
    runs = []

    def ratio(al):
        alpha = FIT.solve_alpha(decay, k, al)
        spec = "mtp:k=%d,alpha=%.6f,decay=%.4f" % (k, alpha, decay)
        b = servesim_json(binary, on + ["--spec", spec])
        x = b["tpot_ms"]["p50"] / r["tpot_off_ms"]
        runs.append({"al": al, "spec": spec, "ratio": x})
        return x

    r["al_assumed"] = FIT.al(prior["alpha"], decay, k)
    # The per-step time, per sequence, that a speculative step would have to
    # take beyond servesim's to give the measured ratio at the assumed AL:
    # TPOT x AL is a step's time (each step emits AL tokens per sequence).
    step_ms = r["tpot_on_ms"] * (r["al_sim"] or r["al_assumed"])
    r["step_ms"] = step_ms
    need_ms = meas * r["tpot_off_ms"] * (r["al_sim"] or r["al_assumed"])
    r["gap_us_per_step"] = 1000 * (need_ms - step_ms)
    lo, hi = IMPLIED_AL_LO, FIT.al(1.0, decay, k)
    r["al_range"] = (lo, hi)
    r["implied_bound"] = None
    r["al_implied"] = None
    try:
        r_lo, r_hi = ratio(lo), ratio(hi)
        if meas >= r_lo:
            r["implied_bound"] = "<"      # slower than servesim's with no acceptance
        elif meas <= r_hi:
            r["implied_bound"] = ">"      # faster than the longest chain at this decay
        else:
            for _ in range(IMPLIED_STEPS):
                mid = (lo + hi) / 2
                if ratio(mid) > meas:
                    lo = mid
                else:
                    hi = mid
            r["al_implied"] = (lo + hi) / 2
    except (RuntimeError, ValueError) as e:
        r["error"] = "implied AL: %s" % e
    r["implied_runs"] = runs
    return r


def fmt_implied(r):
    if r["al_implied"] is not None:
        return "%.2f" % r["al_implied"]
    lo, hi = r["al_range"]
    return "< %.2f" % lo if r["implied_bound"] == "<" else "> %.2f" % hi


def print_implied(rows):
    print("Implied acceptance: the AL at which servesim's TPOT ratio (MTP / none) equals the "
          "measured one; decay held at %s's, alpha bisected\n" % LOAD_ACCEPT)
    print("| row | k | C | measured ratio | predicted at assumed | AL assumed | AL implied | "
          "step ms | gap us/step | gap us/step/seq |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if not_run(r):
            print("| %s | %d | %d | %.3f | - | - | - | - | - | not run: %s |" % (
                r["case"], r["k"], r["conc"], r["measured_tpot"], not_run(r)))
            continue
        print("| %s | %d | %d | %.3f | %.3f | %.2f | %s | %.1f | %+.0f | %+.0f |" % (
            r["case"], r["k"], r["conc"], r["measured_tpot"], r["predicted_tpot"],
            r["al_assumed"], fmt_implied(r), r["step_ms"], r["gap_us_per_step"],
            r["gap_us_per_step"] / r["conc"]))
    print("\nstep ms: servesim's speculative step at the assumed AL (TPOT x AL); gap: the time a "
          "step would have to take beyond it for the measured ratio at the assumed AL (per step, "
          "and per sequence of the C running)")


# --- output ---------------------------------------------------------------------

def not_run(r):
    """Why a row has no prediction ("" when it has one)."""
    if "error" in r:
        return r["error"]
    if "refused" in r:
        return "servesim refuses --spec here: " + r["refused"]
    return ""


def fmt_x(x):
    return "none in range" if x is None else "%.0f" % x


def print_tables(rows, cross, left_b1, left_load):
    b1 = [r for r in rows if r["check"] == "batch1"]
    ld = [r for r in rows if r["check"] == "load"]
    print("Batch 1: speedup (tokens/s with speculation / without), band %d%%\n" % (100 * BAND_SPEEDUP))
    print("| case | method k tree | acceptance | AL row / sim | measured | predicted | error | in band |")
    print("|---|---|---|---|---|---|---|---|")
    for r in b1:
        mk = "%s %d %s" % (r["method"], r["k"], r["tree"] or "chain")
        if not_run(r):
            print("| %s | %s | %s | - | %.2f | - | - | not run: %s |" % (
                r["case"], mk, r["acceptance"].split(" (")[0], r["measured"], not_run(r)))
            continue
        al = "%s / %s" % ("%.2f" % r["al_measured"] if r["al_measured"] else "-",
                          "%.2f" % r["al_sim"] if r["al_sim"] else "-")
        print("| %s | %s | %s | %s | %.2f | %.2f | %+.1f%% | %s |" % (
            r["case"], mk, r["acceptance"].split(" (")[0], al, r["measured"], r["predicted"],
            r["error_pct"], "yes" if r["in_band"] else "**no**"))
    print("\nUnder load: DeepSeek-R1 MTP / none at matched concurrency, band %d%% on each ratio\n" %
          (100 * BAND_LOAD))
    print("| case | k | MTP rows | TPOT measured | TPOT predicted | error | "
          "tput/GPU measured | tput/GPU predicted | error | AL sim | in band |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in ld:
        if not_run(r):
            print("| %s | %d | %d | %.3f | - | - | %.3f | - | - | - | not run: %s |" % (
                r["case"], r["k"], r["n_pairs"], r["measured_tpot"], r["measured_tput"], not_run(r)))
            continue
        print("| %s | %d | %d | %.3f | %.3f | %+.1f%% | %.3f | %.3f | %+.1f%% | %s | %s |" % (
            r["case"], r["k"], r["n_pairs"], r["measured_tpot"], r["predicted_tpot"],
            r["error_tpot_pct"], r["measured_tput"], r["predicted_tput"], r["error_tput_pct"],
            "%.2f" % r["al_sim"] if r["al_sim"] else "-", "yes" if r["in_band"] else "**no**"))
    print("\nCrossover: the concurrency where the TPOT ratio crosses 1 (in band: both in the same "
          "interval of measured concurrencies, or both none)\n")
    print("| configuration | concurrencies | measured | predicted | in band |")
    print("|---|---|---|---|---|")
    for x in cross:
        print("| %s | %s | %s | %s | %s |" % (x["config"], ", ".join(map(str, x["concurrencies"])),
                                             fmt_x(x["measured"]), fmt_x(x["predicted"]),
                                             "yes" if x["in_band"] else "**no**"))
    run = [r for r in rows + cross if not not_run(r)]
    print("\nin band: %d of %d rows run (batch 1 %d of %d, under load %d of %d, crossover %d of %d); "
          "not run: %d" % (
              sum(r["in_band"] for r in run), len(run),
              sum(r["in_band"] for r in b1 if not not_run(r)), sum(not not_run(r) for r in b1),
              sum(r["in_band"] for r in ld if not not_run(r)), sum(not not_run(r) for r in ld),
              sum(x["in_band"] for x in cross), len(cross),
              sum(bool(not_run(r)) for r in rows)))
    print_left(left_b1, left_load)


def print_left(left_b1, left_load):
    print("\nLeft out, batch 1:\n")
    for label, why in left_b1:
        print("* %s: %s" % (label, why))
    print("\nLeft out, under load (rows):\n")
    for why, n in sorted(left_load.items(), key=lambda kv: -kv[1]):
        print("* %d: %s" % (n, why))


def print_cases(cases):
    print("| check | case | servesim | spec | measured |")
    print("|---|---|---|---|---|")
    for c in cases:
        if c["check"] == "batch1":
            where = "%s on %s, engine %s" % (c["model"], c["gpu"], c["engine"])
            meas = "speedup %.2f" % c["measured"]
        else:
            where = "deepseek-v3 on %s, engine %s, C %d" % (c["hardware"], LOAD_ENGINE[c["framework"]],
                                                             c["conc"])
            meas = "TPOT %.3f, tput/GPU %.3f (%d MTP rows)" % (c["measured_tpot"], c["measured_tput"],
                                                              c["n_pairs"])
        print("| %s | %s | %s | `%s` | %s |" % (c["check"], c["case"], where, c["spec"], meas))


def main(argv):
    ap = harness_parser("spec-validate.py", "servesim's speculative decoding against measured speedups",
                        ROOT, "specdec", "fewer requests per run (the test's setting)")
    ap.add_argument("--only", choices=("batch1", "load"), help="run one check")
    ap.add_argument("--implied-al", action="store_true",
                    help="per under-load row, the acceptance length that would make the predicted "
                         "TPOT ratio the measured one (bisected; implies --only load)")
    ap.add_argument("--specbench-engine", default=SPECBENCH_ENGINE, metavar="NAME",
                    help="engine profile of the Spec-Bench runs (default %s: kernels only)" % SPECBENCH_ENGINE)
    a = ap.parse_args(argv)
    if a.jobs < 1:
        ap.error("--jobs: expected a positive integer, got %d" % a.jobs)
    # a bad command line is refused (2) before any file is read
    if a.implied_al and (a.only == "batch1" or a.cases):
        ap.error("--implied-al: runs the under-load rows; not with %s" % (
            "--only batch1" if a.only == "batch1" else "--cases"))
    d = os.path.join(a.shared, "specdec")
    if not os.path.isdir(d):
        print("spec-validate: %s: no such folder (expected ../shared/data/specdec)" % d, file=sys.stderr)
        return 1
    try:
        cat = catalog(a.servesim)
    except (OSError, RuntimeError, ValueError) as e:
        print("spec-validate: %s" % e, file=sys.stderr)
        return 1
    if a.specbench_engine not in cat["engines"]:
        ap.error("--specbench-engine: expected one of %s, got '%s'" % (
            ", ".join(sorted(cat["engines"])), a.specbench_engine))
    sb, left_b1 = specbench_cases(d, cat, a.specbench_engine)
    ld, left_load = load_cases(d)
    cases = sb + sglang_cases(d, cat) + ld
    if a.implied_al:
        if LOAD_ACCEPT not in cat["acceptance"]:
            print("spec-validate: the acceptance catalog has no %s entry (servesim list acceptance)"
                  % LOAD_ACCEPT, file=sys.stderr)
            return 1
        a.only = "load"
    if a.only:
        cases = [c for c in cases if c["check"] == a.only]
    left_out = {"batch1": [{"case": l, "why": w} for l, w in left_b1], "load": left_load}
    if a.cases:
        print_cases(cases)
        print_left(left_b1, left_load)
        if a.json:
            write_json(a.json, {"cases": cases, "left_out": left_out})
        return 0
    with ThreadPoolExecutor(max_workers=a.jobs) as ex:
        rows = list(ex.map(lambda c: run_case(a.servesim, cat, c, a.quick), cases))
    if a.implied_al:
        with ThreadPoolExecutor(max_workers=a.jobs) as ex:
            rows = list(ex.map(lambda r: r if not_run(r) else implied_al(a.servesim, cat, r, a.quick),
                               rows))
        print_implied(rows)
        if a.json:
            write_json(a.json, {"quick": a.quick, "accept": LOAD_ACCEPT, "rows": rows})
        if any("error" in r for r in rows):
            print("spec-validate: %d of %d cases did not run (first: %s)" % (
                sum("error" in r for r in rows), len(rows),
                next(r["error"] for r in rows if "error" in r)), file=sys.stderr)
            return 1
        return 0
    cross = crossovers(rows)
    print_tables(rows, cross, left_b1, left_load)
    if a.json:
        write_json(a.json, {"bands": {"batch1_speedup": BAND_SPEEDUP, "load_ratio": BAND_LOAD},
                            "quick": a.quick, "rows": rows, "crossover": cross,
                            "left_out": left_out})
    if any("error" in r for r in rows):
        print("spec-validate: %d of %d cases did not run (first: %s)" % (
            sum("error" in r for r in rows), len(rows),
            next(r["error"] for r in rows if "error" in r)), file=sys.stderr)
        return 1
    if a.check and not all(not not_run(r) and r["in_band"] for r in rows + cross):
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print("spec-validate: %s" % e, file=sys.stderr)
        sys.exit(1)
