#!/usr/bin/env python3
"""End-to-end MI300X validation (issue 33, section 2): servesim runs every
usable measured row of ../shared/data/amd as the workload it measured and
reports the error per metric.

    python3 bench/amd-validate.py [--servesim BIN] [--shared DIR] [--quick]
                                  [--jobs N] [--json OUT] [--check] [--cases]
                                  [--only vllm|sglang|dstack] [--fit]

Sources (../shared/data/amd/PROVENANCE.md):

* rocm_vllm_devdocker_mi300x.csv, AMD's reference tables for its vLLM
  dev-docker images (vLLM 0.6.6, 0.7.3, 0.8.3, 0.8.5; Llama-3.1-70B and
  -405B FP8 with an FP8 KV cache, TP 8, 8x MI300X), run as the README's
  commands run them (ROCm/vllm docs/dev-docker/README.md, the same
  commands at 0.7.3 and 0.8.5; assumed for 0.6.6 and 0.8.3):
  - throughput: benchmark_throughput.py, offline: num_prompts requests of
    fixed lengths submitted at once, max_num_seqs = num_prompts,
    --max-num-batched-tokens 131072, --enable-chunked-prefill False,
    --num-scheduler-steps 10: servesim `--concurrency N --num-requests N`,
    `--policy vllm:v0=on,max_num_seqs=N,max_num_batched_tokens=131072` and
    the profile with scheduler_steps 10; the figure is total tokens/s
    (prompt + output over the elapsed time: the script's JSON
    tokens_per_second); band 10%;
  - latency: benchmark_latency.py, batch_size requests at once, the
    batch's end-to-end seconds (mean of 5 iterations after 3 warm-ups):
    servesim `--concurrency B --num-requests B`, the profile's own
    policy, the run's duration; decode-dominated (2048 output tokens), so
    it takes TPOT's band, 15%.
  Both run in process (the LLM class): `--stack none`.  Repeated
  measurements of one configuration within a version (the README was
  re-measured at several commits) are merged into their median.
* sglang_cookbook_bench_serving.csv, rows with is_amd = 1 (MI300X):
  sglang.bench_serving, a closed loop of max_concurrency clients over
  num_prompts requests (--request-rate inf), random lengths: servesim
  `--concurrency C --num-requests N` with uniform lengths from 1 to 2 m - 1
  (bench_serving's random dataset at --random-range-ratio 0 draws uniform
  [1, L]; m is the row's measured mean, total tokens / requests) behind
  the profile's default stack (local-sglang); median TTFT (band 25%),
  median TPOT and ITL (15%), output throughput (10%).  Medians, not
  means: several rows' mean TTFT holds one cold request (mean 4 s, median
  60 ms at one client).

* dstack_mi300x/ (dstackai/benchmarks), held out: Llama-3.1-405B on 8x
  MI300X (vLLM 0.6.3-0.6.4, ROCm) against 8x H100 SXM (vLLM 0.6.3), run
  as the upstream READMEs' commands ran them (the constants DSTACK_* say
  how; docs/validation.md "AMD Instinct: dstack's MI300X and H100 runs"):
  - offline sweeps (benchmark_throughput.py, ISL 128/2048/32784, OSL
    2048, batch 4-256): total tokens/s, band 10%; the MI300X runs were
    --enforce-eager (a profile variant without graphs);
  - QPS runs (benchmark_serving.py, ShareGPT, 1,000 prompts at 16, 32 and
    1000 req/s, Poisson): fixed lengths at the rows' means; median TTFT,
    TPOT, ITL and output tokens/s;
  - TGI vs vLLM, vLLM's rows (bf16 405B, sonnet prompts, all at once);
  and, per configuration, the MI300X / H100 ratio measured against
  predicted and whether the winner is the same.  The MI300X runs take
  vllm-rocm with the parameters fitted on the reference tables (with
  --fit: fitted on every version), the H100 runs the vllm profile.

Engines: vllm-rocm and sglang-rocm (data/engines.json, docs/engines.md).
--fit fits the vllm-rocm profile's all-reduce floor (allreduce_floor_us,
the per-call latency of its custom all-reduce over xGMI) on the latency
tables leaving one vLLM version out: each version is predicted by the
floor fitted on the other three, and the throughput rows and every SGLang
row are held out by construction (nothing is fitted on them).  Without
--fit nothing is fitted: every row is held out by construction.

--quick runs the SGLang closed loops with fewer requests (at most 4 C)
and the throughput rows with a quarter of their prompts at the same
max_num_seqs ratio (the test's setting).  --cases prints the cases and
what was left out, and runs nothing.  --json OUT writes every row;
--check exits 1 when a row misses its band.  Bad input: one line naming
the file and line, exit 1; a bad command line: exit 2.  Standard library
only.
"""
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # loaded by path, too
from benchlib import (BadInput, harness_parser, num, read_csv,  # noqa: E402
                      servesim_json, write_json)
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

BANDS = {"throughput": 0.10, "latency": 0.15, "ttft": 0.25, "tpot": 0.15, "itl": 0.15,
         "output_throughput": 0.10}
GPU = "mi300x"
VLLM_ENGINE = "vllm-rocm"
SGLANG_ENGINE = "sglang-rocm"
# the throughput benchmark's command line (README): scheduler steps and token budget
THROUGHPUT_STEPS = 10
THROUGHPUT_TOKENS = 131072
# AMD's model column -> catalog model (the part before the parenthesis:
# some versions label the 405B latency rows "(amd/Llama-3.1-70B-Instruct-
# FP8-KV)", an upstream error kept in the data; their values are 405B's)
VLLM_MODELS = {"Llama 3.1 70B": "llama-3.1-70b", "Llama 3.1 405B": "llama-3.1-405b"}
# SGLang deployments -> catalog models; DeepSeek-V3.1 has DeepSeek-V3's
# architecture (its config.json differs in no shape), FP8 weights as shipped
SGLANG_MODELS = {
    "deepseek-ai/DeepSeek-V3": ("deepseek-v3", "fp8"),
    "deepseek-ai/DeepSeek-V3.1": ("deepseek-v3", "fp8"),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": ("llama-4-scout", "bf16"),
}
VLLM_COLS = ("image_vllm_version", "table", "model", "precision", "tp", "input_len",
             "output_len", "num_prompts", "max_num_seqs", "batch_size", "metric", "value",
             "readme_commit")
SGLANG_COLS = ("is_amd", "source_path", "result_block_line", "hardware_line", "deploy_model",
               "deploy_tp", "deploy_ep", "deploy_dp", "dp_attention", "bench_dataset",
               "bench_input_len", "bench_output_len", "bench_num_prompts",
               "bench_max_concurrency", "sglang_version_line", "m:Successful requests",
               "m:Total input tokens", "m:Total generated tokens", "m:Median TTFT (ms)",
               "m:Median TPOT (ms)", "m:Median ITL (ms)", "m:Output token throughput (tok/s)")
# The decode-attention efficiency of the vLLM runs' kernels (the roofline's
# attn_decode_mem_eff; its default 0.7 is NVIDIA's FlashAttention/FlashInfer
# decode): fitted by --fit with vllm-rocm's allreduce_floor_us on every
# version's latency rows.  A cost-model parameter of these runs, not shipped
# in any profile or catalog (docs/validation.md).
VLLM_ATTN_EFF = 0.07
# --fit's grid: vllm-rocm's allreduce_floor_us (us) and the roofline's
# attn_decode_mem_eff of its runs (its default, 0.7, first)
FIT_FLOOR_US = [8, 12, 16, 20, 24, 28, 32, 40, 48, 64]
FIT_ATTN_EFF = [0.7, 0.35, 0.2, 0.14, 0.1, 0.07, 0.05, 0.035, 0.025]


# --- cases --------------------------------------------------------------------

def vllm_cases(d):
    """The reference tables' configurations, each version's measurements
    of one configuration merged into their median."""
    path = os.path.join(d, "rocm_vllm_devdocker_mi300x.csv")
    groups, left = {}, {}
    for row in read_csv(path, VLLM_COLS):
        label = row["model"].split(" (")[0].strip()
        model = VLLM_MODELS.get(label)
        if model is None:
            raise BadInput("%s: model '%s', expected one starting with %s" % (
                row["_where"], row["model"], " or ".join(VLLM_MODELS)))
        if row["precision"] != "FP8":
            left["precision %s (the tables' runs are FP8 with an FP8 KV cache)" % row["precision"]] = \
                left.get("precision %s" % row["precision"], 0) + 1
            continue
        tp = num(row, "tp", 1, 64, True)
        isl = num(row, "input_len", 1, 1 << 20, True)
        osl = num(row, "output_len", 1, 1 << 20, True)
        value = num(row, "value", 1e-6)
        if row["table"] == "throughput":
            if not row["metric"].startswith("Throughput (tokens/s)"):
                raise BadInput("%s: metric '%s', expected 'Throughput (tokens/s)'" % (
                    row["_where"], row["metric"]))
            n = num(row, "num_prompts", 1, 1 << 20, True)
            seqs = num(row, "max_num_seqs", 1, 1 << 20, True)
            key = ("throughput", row["image_vllm_version"], model, tp, isl, osl, n, seqs)
        elif row["table"] == "latency":
            if row["metric"].endswith("(sec)"):
                scale = 1.0
            elif row["metric"].endswith("(ms)"):
                scale = 1e-3
            else:
                raise BadInput("%s: metric '%s', expected a latency in (sec) or (ms)" % (
                    row["_where"], row["metric"]))
            value *= scale
            b = num(row, "batch_size", 1, 1 << 20, True)
            key = ("latency", row["image_vllm_version"], model, tp, isl, osl, b, b)
        else:
            raise BadInput("%s: table '%s', expected throughput or latency" % (
                row["_where"], row["table"]))
        g = groups.setdefault(key, {"values": [], "commits": set(), "where": row["_where"]})
        g["values"].append(value)
        g["commits"].add(row["readme_commit"][:8])
    cases = []
    for key in sorted(groups, key=lambda k: (k[0], k[2], k[4], k[5], k[6], k[1])):
        table, version, model, tp, isl, osl, n, seqs = key
        g = groups[key]
        c = {"source": "vllm", "metric": table, "version": version, "model": model, "tp": tp,
             "isl": isl, "osl": osl, "where": g["where"], "n_measured": len(g["values"]),
             "commits": sorted(g["commits"]), "measured": statistics.median(g["values"]),
             "engine": VLLM_ENGINE, "weight_dtype": "fp8", "kv_dtype": "fp8"}
        if table == "throughput":
            c.update(requests=n, max_num_seqs=seqs,
                     case="%s %s %d/%d x%d (max_num_seqs %d)" % (model, version, isl, osl, n, seqs))
        else:
            c.update(requests=n, case="%s %s %d/%d batch %d" % (model, version, isl, osl, n))
        cases.append(c)
    return cases, left


def sglang_cases(d, models):
    path = os.path.join(d, "sglang_cookbook_bench_serving.csv")
    cases, left = [], []
    for row in read_csv(path, SGLANG_COLS):
        if row["is_amd"] != "1":
            continue
        label = "%s:%s %s %s/%s C%s" % (os.path.basename(row["source_path"]),
                                        row["result_block_line"], row["deploy_model"] or "-",
                                        row["bench_input_len"], row["bench_output_len"],
                                        row["bench_max_concurrency"])
        if row["bench_dataset"] != "random":
            left.append((label, "dataset '%s': image inputs servesim does not model" %
                         row["bench_dataset"]))
            continue
        m = SGLANG_MODELS.get(row["deploy_model"])
        if m is None:
            left.append((label, "model %s is not in the catalog" % (row["deploy_model"] or "(none)")))
            continue
        model, wdt = m
        if model not in models:
            left.append((label, "model %s is not in the catalog" % model))
            continue
        n = num(row, "m:Successful requests", 1, 1 << 24, True)
        conc = num(row, "bench_max_concurrency", 1, 1 << 20, True)
        tp = num(row, "deploy_tp", 1, 64, True)
        ep = num(row, "deploy_ep", 1, 64, True) if row["deploy_ep"] else 1
        dp = num(row, "deploy_dp", 1, 64, True) if row["dp_attention"] == "1" else 1
        isl_mean = num(row, "m:Total input tokens", 1) / n
        osl_mean = num(row, "m:Total generated tokens", 1) / n
        c = {"source": "sglang", "metric": "serving", "case": label, "where": row["_where"],
             "version": row["sglang_version_line"], "model": model, "deploy_model": row["deploy_model"],
             "tp": tp, "ep": ep, "dp": dp, "requests": n, "concurrency": conc,
             "isl_mean": isl_mean, "osl_mean": osl_mean, "engine": SGLANG_ENGINE,
             "weight_dtype": wdt, "kv_dtype": "bf16",
             "measured": {"ttft": num(row, "m:Median TTFT (ms)", 1e-3),
                          "tpot": num(row, "m:Median TPOT (ms)", 1e-3),
                          "itl": num(row, "m:Median ITL (ms)", 1e-3),
                          "output_throughput": num(row, "m:Output token throughput (tok/s)", 1e-3)}}
        cases.append(c)
    return cases, left


# --- dstack: 8x MI300X against 8x H100 SXM (held out) ----------------------------
#
# dstackai/benchmarks @ 06c957ab (../shared/data/amd/dstack_mi300x, its
# PROVENANCE.md), Llama-3.1-405B, run as the sources' commands ran them:
# comparison/h100sxm5_vs_mi300x/README.md for the offline sweeps and the
# QPS runs, amd/tgi_vs_vllm/README.md for the vLLM side of TGI vs vLLM.
# Nothing is fitted on these rows: the MI300X runs take vllm-rocm with the
# parameters fitted on AMD's reference tables, the H100 runs the NVIDIA
# vllm profile on the cost model servesim picks for the H100.
DSTACK = "dstack_mi300x"
DSTACK_PREFIX = "comparison__h100sxm5_vs_mi300x__csv_data__"
DSTACK_MODEL = "llama-3.1-405b"
# benchmark_throughput.py's engine limits: --max-model-len 91680 with
# chunked prefill off (the script's default) gives a step budget of
# max(max_model_len, 2048) tokens; max_num_seqs is V0's default 256
DSTACK_OFFLINE_TOKENS = 91680
DSTACK_OFFLINE_SEQS = 256
# gpu label (stripped) -> (gpu, tp, instances, kv dtype, engine variant,
# serving policy); variants: "" = graphs, "-eager" = --enforce-eager,
# "-msN" = --num-scheduler-step N.  Meta's FP8 checkpoint has no KV
# scales (bf16 KV cache), AMD's Quark FP8-KV one has them (fp8 KV).
# Serving flags from qps_comparison.csv's own columns: H100 chunked prefill
# at 512 tokens and 512 sequences; MI300X chunked prefill off (the step
# budget is then max_model_len, 131072), 1,024 sequences, 15 steps.
DSTACK_H100_SERVE = "vllm:max_num_seqs=512,max_num_batched_tokens=512"
DSTACK_MI300X_SERVE = "vllm:v0=on,max_num_seqs=1024,max_num_batched_tokens=131072"
DSTACK_OFFLINE = {
    "8xH100 1FP8-meta": ("h100-sxm", 8, "bf16", "vllm", ""),
    "8xMi300x 1FP8-meta": ("mi300x", 8, "bf16", VLLM_ENGINE, "-eager-ms15"),
    "8xMi300 1FP8-amd": ("mi300x", 8, "fp8", VLLM_ENGINE, "-eager"),
    "4xMi300x 1FP8-amd": ("mi300x", 4, "fp8", VLLM_ENGINE, "-eager"),
}
DSTACK_QPS = {
    "8xH100 1FP8-meta": ("h100-sxm", 8, 1, "bf16", "vllm", "", DSTACK_H100_SERVE),
    "8xMi300x 1FP8-meta": ("mi300x", 8, 1, "bf16", VLLM_ENGINE, "-ms15", DSTACK_MI300X_SERVE),
    "8xMi300x 1FP8-amd": ("mi300x", 8, 1, "fp8", VLLM_ENGINE, "-ms15", DSTACK_MI300X_SERVE),
    "4xMi300x 1FP8-amd": ("mi300x", 4, 1, "fp8", VLLM_ENGINE, "-ms15", DSTACK_MI300X_SERVE),
    "8xMi300x  2FP8-amd": ("mi300x", 4, 2, "fp8", VLLM_ENGINE, "-ms15", DSTACK_MI300X_SERVE),
}
# the H100 each MI300X deployment is compared with, per configuration
DSTACK_PAIRS = (("8xMi300 1FP8-amd", "8xH100 1FP8-meta"), ("8xMi300x 1FP8-meta", "8xH100 1FP8-meta"),
                ("8xMi300x 1FP8-amd", "8xH100 1FP8-meta"), ("8xMi300x  2FP8-amd", "8xH100 1FP8-meta"))
# TGI vs vLLM's vLLM side: vllm serve meta-llama/Llama-3.1-405B-Instruct
# (bf16) --tensor-parallel-size 8, its 0.6.3 defaults: a 131072-token
# context turns chunked prefill on at 512 tokens a step, 256 sequences,
# hipGraphs; benchmark_serving.py --dataset-name sonnet at request rate inf
DSTACK_TGI_SERVE = "vllm:max_num_seqs=256,max_num_batched_tokens=512"
DSTACK_SERVE_COLS = ("Successful requests", "Total input tokens", "Total generated tokens",
                     "Output token throughput (tok/s)", "Median TTFT (ms)", "Median TPOT (ms)",
                     "Median ITL (ms)")


def dstack_cases(d):
    """Every usable dstack row as a case, and the rows left out, with why."""
    dd = os.path.join(d, DSTACK)
    cases, left = [], []
    path = os.path.join(dd, DSTACK_PREFIX + "throughput_comparsion.csv")
    for row in read_csv(path, ("gpu", "input_len", "output_len", "batch_size", "num_requests",
                               "total_num_tokens", "tokens_per_second")):
        label = row["gpu"].strip()
        isl = num(row, "input_len", 1, 1 << 20, True)
        osl = num(row, "output_len", 1, 1 << 20, True)
        b = num(row, "batch_size", 1, 1 << 20, True)
        cfg = DSTACK_OFFLINE.get(label)
        if cfg is None:
            left.append(("offline %s %d/%d batch %d" % (label, isl, osl, b),
                         "upstream's sum of two 4x MI300X runs (raw_data/8xMi300x-throughput-"
                         "quark-2fp8/README.md), not a measurement" if "2FP8" in label else
                         "deployment not described upstream"))
            continue
        gpu, tp, kv, engine, var = cfg
        cases.append({"source": "dstack", "metric": "offline", "deploy": label, "gpu": gpu,
                      "tp": tp, "instances": 1, "model": DSTACK_MODEL, "weight_dtype": "fp8",
                      "kv_dtype": kv, "engine": engine, "variant": var, "isl": isl, "osl": osl,
                      "requests": b, "config": "%d/%d batch %d" % (isl, osl, b),
                      "policy": "vllm:v0=on,max_num_seqs=%d,max_num_batched_tokens=%d" % (
                          DSTACK_OFFLINE_SEQS, DSTACK_OFFLINE_TOKENS),
                      "case": "offline %s %d/%d batch %d" % (label, isl, osl, b),
                      "where": row["_where"],
                      "measured": {"throughput": num(row, "tokens_per_second", 1e-6)}})
    for f in ("throughput_latency_curve", "throughput_latency_curve_128_2048",
              "throughput_latency_curve_2048_2048", "throughput_latency_curve_32784_2048"):
        n = len(read_csv(os.path.join(dd, DSTACK_PREFIX + f + ".csv"), ("gpu",)))
        left.append(("%s (%d rows)" % (f, n), "the offline sweeps' runs again (end-to-end latency = "
                     "elapsed time, upstream's plotting input), scored once from "
                     "throughput_comparsion.csv"))
    path = os.path.join(dd, DSTACK_PREFIX + "qps_comparison.csv")
    for row in read_csv(path, ("gpu", "request_rate", "completed", "total_input_tokens",
                               "total_output_tokens", "output_throughput", "median_ttft_ms",
                               "median_tpot_ms", "median_itl_ms")):
        cfg = DSTACK_QPS.get(row["gpu"])
        qps = num(row, "request_rate", 1e-3, 1e6)
        if cfg is None:
            raise BadInput("%s: gpu '%s', expected one of %s" % (
                row["_where"], row["gpu"], ", ".join(sorted(DSTACK_QPS))))
        gpu, tp, inst, kv, engine, var, pol = cfg
        n = num(row, "completed", 1, 1 << 24, True)
        cases.append({"source": "dstack", "metric": "serving", "deploy": row["gpu"], "gpu": gpu,
                      "tp": tp, "instances": inst, "model": DSTACK_MODEL, "weight_dtype": "fp8",
                      "kv_dtype": kv, "engine": engine, "variant": var, "policy": pol,
                      "requests": n, "rate": qps, "config": "sharegpt %g qps" % qps,
                      "isl": max(1, round(num(row, "total_input_tokens", 1) / n)),
                      "osl": max(1, round(num(row, "total_output_tokens", 1) / n)),
                      "case": "serving %s sharegpt %g qps" % (row["gpu"].strip(), qps),
                      "where": row["_where"],
                      "measured": {"ttft": num(row, "median_ttft_ms", 1e-3),
                                   "tpot": num(row, "median_tpot_ms", 1e-3),
                                   "itl": num(row, "median_itl_ms", 1e-3),
                                   "output_throughput": num(row, "output_throughput", 1e-3)}})
        if "-ms" in var:
            # multi-step streams a request's tokens in bursts of up to N:
            # benchmark_serving.py times the gaps between chunks, servesim's
            # ITL is per token (0 inside a burst); TPOT is comparable
            del cases[-1]["measured"]["itl"]
    for kind in ("short", "long", "single_prompt", "QPS_high"):
        path = os.path.join(dd, "amd__tgi_vs_vllm__vllm__data__result_vllm_%s.csv" % kind)
        for row in read_csv(path, DSTACK_SERVE_COLS):
            n = num(row, "Successful requests", 1, 1 << 24, True)
            isl = max(1, round(num(row, "Total input tokens", 1) / n))
            osl = max(1, round(num(row, "Total generated tokens", 1) / n))
            label = "tgi_vs_vllm vllm %s %d x %d/%d" % (kind, n, isl, osl)
            if kind == "QPS_high":
                left.append((label, "request rate not recorded"))
                continue
            cases.append({"source": "dstack", "metric": "serving", "deploy": "8xMi300x vLLM bf16",
                          "gpu": "mi300x", "tp": 8, "instances": 1, "model": DSTACK_MODEL,
                          "weight_dtype": "bf16", "kv_dtype": "bf16", "engine": VLLM_ENGINE,
                          "variant": "", "policy": DSTACK_TGI_SERVE, "requests": n, "rate": None,
                          "isl": isl, "osl": osl, "config": "sonnet %s" % kind, "case": label,
                          "where": row["_where"],
                          "measured": {"ttft": num(row, "Median TTFT (ms)", 1e-3),
                                       "tpot": num(row, "Median TPOT (ms)", 1e-3),
                                       "itl": num(row, "Median ITL (ms)", 1e-3),
                                       "output_throughput": num(
                                           row, "Output token throughput (tok/s)", 1e-3)}})
    for kind in ("short", "long", "single_prompt", "QPS_high"):
        n = len(read_csv(os.path.join(dd, "amd__tgi_vs_vllm__tgi__data__result_tgi_%s.csv" % kind),
                         ("Successful requests",)))
        left.append(("tgi_vs_vllm tgi %s (%d rows)" % (kind, n),
                     "TGI: servesim has no TGI engine profile"))
    return cases, left


# --- running ------------------------------------------------------------------

def shipped_profile(name):
    with open(os.path.join(ROOT, "data", "engines.json"), encoding="utf-8") as f:
        for e in json.load(f)["engines"]:
            if e["name"] == name:
                return e
    raise BadInput("%s: no engine profile %s" % (os.path.join(ROOT, "data", "engines.json"), name))


def write_catalog(tmp, floor):
    """An engines file with vllm-rocm (allreduce_floor_us = floor when
    given) and its throughput-benchmark twin, scheduler_steps 10."""
    base = dict(shipped_profile(VLLM_ENGINE))
    if floor is not None:
        base["allreduce_floor_us"] = floor
    engines = [base, shipped_profile("vllm")]
    # the dstack runs' variants: --num-scheduler-step N, --enforce-eager
    # (no graphs: every step launched kernel by kernel)
    for var, steps, eager in (("-ms%d" % THROUGHPUT_STEPS, THROUGHPUT_STEPS, False),
                              ("-ms15", 15, False), ("-eager", 1, True),
                              ("-eager-ms15", 15, True)):
        e = dict(base)
        e["name"] = VLLM_ENGINE + var
        if steps > 1:
            e["scheduler_steps"] = steps
        if eager:
            for k in [k for k in e if k.startswith("graph_") or k.startswith("_source_graph")]:
                del e[k]
        engines.append(e)
    path = os.path.join(tmp, "engines-%s.json" % ("prior" if floor is None else "%.6g" % floor))
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"engines": engines}, f, indent=1, sort_keys=True)
    return path


def uniform(mean):
    hi = max(1, int(round(2.0 * mean - 1.0)))
    return hi


def run_args(c, setting, quick):
    """servesim's command line for case c under setting (engines file,
    decode-attention efficiency of the vLLM runs or None)."""
    catalog_path, attn_eff = setting
    a = ["run", "--gpu", c.get("gpu", GPU), "--model", c["model"], "--tp", str(c["tp"]),
         "--weight-dtype", c["weight_dtype"], "--kv-dtype", c["kv_dtype"], "--json",
         "--engine-catalog", catalog_path]
    if c["source"] == "dstack":
        a += ["--engine", c["engine"] + c["variant"], "--policy", c["policy"],
              "--gpu-memory-utilization", "0.9",
              "--lengths", "fixed:prompt=%d,output=%d" % (c["isl"], c["osl"])]
        if c["gpu"] == GPU and attn_eff is not None:    # vLLM's ROCm kernels (above)
            a += ["--cost-model", "roofline:attn_decode_mem_eff=%.6g" % attn_eff]
        if c["instances"] > 1:
            a += ["--instances", str(c["instances"])]
        n = c["requests"]
        if c["metric"] == "offline":
            a += ["--stack", "none", "--concurrency", str(n), "--num-requests", str(n)]
        elif c["rate"] is None:      # request rate inf: every prompt at t = 0
            a += ["--concurrency", str(n), "--num-requests", str(n)]
        else:
            if quick:
                n = min(n, 200)
            a += ["--arrival", "poisson:rate=%g" % c["rate"], "--num-requests", str(n)]
        return a
    if c["source"] == "vllm":
        a += ["--stack", "none", "--gpu-memory-utilization", "0.9"]
        if attn_eff is not None:
            a += ["--cost-model", "roofline:attn_decode_mem_eff=%.6g" % attn_eff]
        n = c["requests"]
        if c["metric"] == "throughput":
            seqs = c["max_num_seqs"]
            if quick:
                n, seqs = max(1, n // 4), max(1, seqs // 4)
            a += ["--engine", VLLM_ENGINE + "-ms%d" % THROUGHPUT_STEPS,
                  "--policy", "vllm:v0=on,max_num_seqs=%d,max_num_batched_tokens=%d" % (
                      seqs, THROUGHPUT_TOKENS)]
        else:
            a += ["--engine", VLLM_ENGINE]
        a += ["--concurrency", str(n), "--num-requests", str(n),
              "--lengths", "fixed:prompt=%d,output=%d" % (c["isl"], c["osl"])]
    else:
        n = c["requests"]
        if quick:
            n = min(n, 4 * c["concurrency"])
        a += ["--engine", c["engine"], "--concurrency", str(c["concurrency"]),
              "--num-requests", str(n),
              "--lengths", "uniform:prompt_min=1,prompt_max=%d,output_min=1,output_max=%d" % (
                  uniform(c["isl_mean"]), uniform(c["osl_mean"]))]
        if c["ep"] > 1:
            a += ["--ep", str(c["ep"])]
        if c["dp"] > 1:
            a += ["--dp-attention", str(c["dp"])]
    return a


def err_pct(pred, meas):
    return 100.0 * (pred / meas - 1.0)


def predict(binary, c, setting, quick):
    """servesim's figures for case c: {metric: value}, or an error."""
    s = servesim_json(binary, run_args(c, setting, quick))
    if c["source"] == "dstack" and c["metric"] == "offline":
        t = s["throughput"]
        return {"throughput": t["input_tokens_per_s"] + t["output_tokens_per_s"],
                "cost_model": s.get("cost_model", {}).get("name")}
    if c["source"] == "dstack":
        return {"ttft": s["ttft_ms"]["p50"], "tpot": s["tpot_ms"]["p50"], "itl": s["itl_ms"]["p50"],
                "output_throughput": s["throughput"]["output_tokens_per_s"],
                "cost_model": s.get("cost_model", {}).get("name")}
    if c["source"] == "vllm":
        if c["metric"] == "throughput":
            t = s["throughput"]
            return {"throughput": t["input_tokens_per_s"] + t["output_tokens_per_s"]}
        return {"latency": s["duration_s"]}
    return {"ttft": s["ttft_ms"]["p50"], "tpot": s["tpot_ms"]["p50"], "itl": s["itl_ms"]["p50"],
            "output_throughput": s["throughput"]["output_tokens_per_s"]}


def simulate(binary, cases, setting, quick, jobs):
    """Each distinct simulation once (a configuration measured in several
    versions is one run)."""
    keyed = {}
    for c in cases:
        keyed.setdefault(tuple(run_args(c, setting, quick)), c)

    def one(item):
        k, c = item
        try:
            return k, predict(binary, c, setting, quick)
        except RuntimeError as e:
            return k, {"error": str(e)}

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        return dict(ex.map(one, keyed.items()))


def score(cases, sims, setting, quick):
    rows = []
    for c in cases:
        p = sims[tuple(run_args(c, setting, quick))]
        r = dict(c)
        if "error" in p:
            r["error"] = p["error"]
            rows.append(r)
            continue
        if c["source"] == "vllm":
            m = c["metric"]
            r["predicted"] = p[m]
            r["error_pct"] = err_pct(p[m], c["measured"])
            r["in_band"] = abs(r["error_pct"]) <= 100 * BANDS[m]
        else:
            r["predicted"] = {k: p[k] for k in c["measured"]}
            r["cost_model"] = p.get("cost_model")
            r["error_pct"] = {k: err_pct(p[k], v) for k, v in c["measured"].items()}
            r["in_band"] = {k: abs(e) <= 100 * BANDS[k] for k, e in r["error_pct"].items()}
        rows.append(r)
    return rows


def med_abs(xs):
    return statistics.median([abs(x) for x in xs]) if xs else None


def fit(binary, cases, tmp, quick, jobs):
    """vllm-rocm's allreduce_floor_us and the decode-attention efficiency
    of its kernels on the latency rows, leaving each version out: the grid
    point minimising the median |log(predicted / measured)| over the other
    versions' rows.  Returns {version: (floor, eff)} and the point fitted
    on every version."""
    lat = [c for c in cases if c["source"] == "vllm" and c["metric"] == "latency"]
    versions = sorted({c["version"] for c in lat})
    sims = {}
    for f in FIT_FLOOR_US:
        path = write_catalog(tmp, f)
        for e in FIT_ATTN_EFF:
            sims[(f, e)] = ((path, e), simulate(binary, lat, (path, e), quick, jobs))

    def loss(pt, keep):
        setting, s = sims[pt]
        errs = []
        for c in lat:
            if not keep(c):
                continue
            p = s[tuple(run_args(c, setting, quick))]
            if "error" in p:
                return float("inf")
            errs.append(abs(math.log(p["latency"] / c["measured"])))
        return statistics.median(errs)

    held = {v: min(sims, key=lambda pt, v=v: loss(pt, lambda c: c["version"] != v))
            for v in versions}
    return held, min(sims, key=lambda pt: loss(pt, lambda c: True))


def dstack_ratios(rows):
    """The planner's question per configuration: MI300X / H100 (8 GPUs
    each, or 4 + 4) measured and predicted, and whether the winner is the
    same: throughput (more wins), TPOT and TTFT (less wins)."""
    by = {(r["deploy"], r["metric"], r["config"]): r for r in rows
          if r["source"] == "dstack" and "error" not in r}
    out = []
    for mi, h in DSTACK_PAIRS:
        for (dep, metric, config), r in sorted(by.items(), key=lambda kv: kv[0][1:]):
            if dep != mi or (h, metric, config) not in by:
                continue
            rh = by[(h, metric, config)]
            keys = (("throughput", True),) if metric == "offline" else (
                ("output_throughput", True), ("tpot", False), ("ttft", False))
            for k, more_wins in keys:
                meas = r["measured"][k] / rh["measured"][k]
                pred = r["predicted"][k] / rh["predicted"][k]
                win_m = (meas > 1) == more_wins
                win_p = (pred > 1) == more_wins
                out.append({"mi300x": mi.strip(), "h100": h.strip(), "metric": k,
                            "config": config, "measured_ratio": meas, "predicted_ratio": pred,
                            "ratio_error_pct": err_pct(pred, meas),
                            "winner_measured": "mi300x" if win_m else "h100",
                            "winner_predicted": "mi300x" if win_p else "h100",
                            "same_winner": win_m == win_p})
    return out


# --- output -------------------------------------------------------------------

def fmt(v, nd=1):
    return "-" if v is None else ("%%.%df" % nd) % v


def summarise(rows):
    """Per source and metric: rows scored, in band, median |error|."""
    out = {}
    for r in rows:
        if "error" in r:
            continue
        if r["source"] == "vllm":
            items = [(r["metric"], r["error_pct"], r["in_band"])]
        else:
            items = [(k, r["error_pct"][k], r["in_band"][k]) for k in r["error_pct"]]
        for m, e, ok in items:
            s = out.setdefault("%s %s" % (r["source"], m), {"n": 0, "in_band": 0, "errors": []})
            s["n"] += 1
            s["in_band"] += ok
            s["errors"].append(e)
    for s in out.values():
        s["median_abs_error_pct"] = med_abs(s["errors"])
        s["mean_error_pct"] = statistics.mean(s["errors"])
        del s["errors"]
    return out


def print_tables(rows, summary, left_vllm, left_sglang, left_dstack, fitted):
    if fitted:
        print("Fitted on the latency tables (allreduce_floor_us, attn_decode_mem_eff), each vLLM "
              "version left out: %s; on every version: %g us, %g\n" % (
                  ", ".join("%s held out -> %g us, %g" % (v, p["allreduce_floor_us"],
                                                          p["attn_decode_mem_eff"])
                            for v, p in sorted(fitted["held_out"].items())),
                  fitted["all"]["allreduce_floor_us"], fitted["all"]["attn_decode_mem_eff"]))
    print("| source | metric | rows | in band | band | median abs error | mean error |")
    print("|---|---|---|---|---|---|---|")
    for k in sorted(summary):
        s = summary[k]
        print("| %s | %s | %d | %d | %d%% | %.1f%% | %+.1f%% |" % (
            k.split()[0], k.split()[1], s["n"], s["in_band"], 100 * BANDS[k.split()[1]],
            s["median_abs_error_pct"], s["mean_error_pct"]))
    print("\nvLLM reference tables (vllm-rocm; measured = median over a version's commits)\n")
    print("| case | measured | predicted | error | in band |")
    print("|---|---|---|---|---|")
    for r in rows:
        if r["source"] != "vllm":
            continue
        unit = "tok/s" if r["metric"] == "throughput" else "s"
        if "error" in r:
            print("| %s | %.4g %s | - | - | not run: %s |" % (r["case"], r["measured"], unit, r["error"]))
            continue
        print("| %s | %.4g %s | %.4g | %+.1f%% | %s |" % (
            r["case"], r["measured"], unit, r["predicted"], r["error_pct"],
            "yes" if r["in_band"] else "**no**"))
    print("\nSGLang cookbook, MI300X (sglang-rocm; medians; measured / predicted, error)\n")
    print("| case | model tp ep dp | TTFT ms | TPOT ms | ITL ms | output tok/s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if r["source"] != "sglang":
            continue
        lay = "%s %d %d %d" % (r["model"], r["tp"], r["ep"], r["dp"])
        if "error" in r:
            print("| %s | %s | not run: %s | | | |" % (r["case"], lay, r["error"]))
            continue
        cells = []
        for k in ("ttft", "tpot", "itl", "output_throughput"):
            cells.append("%.4g / %.4g, %+.1f%%%s" % (
                r["measured"][k], r["predicted"][k], r["error_pct"][k],
                "" if r["in_band"][k] else " **out**"))
        print("| %s | %s | %s |" % (r["case"], lay, " | ".join(cells)))
    if any(r["source"] == "dstack" for r in rows):
        print_dstack(rows)
    print_left(left_vllm, left_sglang, left_dstack)


def print_dstack(rows):
    print("\ndstack, Llama-3.1-405B FP8 (held out; measured / predicted, error)\n")
    print("| case | cost model | throughput tok/s | TTFT ms | TPOT ms | ITL ms | output tok/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if r["source"] != "dstack":
            continue
        if "error" in r:
            print("| %s | not run: %s | | | | | |" % (r["case"], r["error"]))
            continue
        cells = []
        for k in ("throughput", "ttft", "tpot", "itl", "output_throughput"):
            if k not in r["measured"]:
                cells.append("")
                continue
            cells.append("%.4g / %.4g, %+.1f%%%s" % (
                r["measured"][k], r["predicted"][k], r["error_pct"][k],
                "" if r["in_band"][k] else " **out**"))
        print("| %s | %s | %s |" % (r["case"], r["cost_model"], " | ".join(cells)))
    rat = dstack_ratios(rows)
    print("\nMI300X / H100 per configuration (measured, predicted; winner measured / predicted)\n")
    print("| MI300X deployment | configuration | metric | measured | predicted | winner |")
    print("|---|---|---|---|---|---|")
    for q in rat:
        print("| %s | %s | %s | %.3g | %.3g | %s / %s%s |" % (
            q["mi300x"], q["config"], q["metric"], q["measured_ratio"], q["predicted_ratio"],
            q["winner_measured"], q["winner_predicted"], "" if q["same_winner"] else " **differs**"))
    n_same = sum(q["same_winner"] for q in rat)
    print("\nsame winner in %d of %d comparisons; median |ratio error| %.1f%%" % (
        n_same, len(rat), med_abs([q["ratio_error_pct"] for q in rat]) or 0.0))


def print_left(left_vllm, left_sglang, left_dstack=()):
    print("\nLeft out, vLLM tables (rows):\n")
    if not left_vllm:
        print("* none")
    for why, n in sorted(left_vllm.items()):
        print("* %d: %s" % (n, why))
    print("\nLeft out, SGLang MI300X rows:\n")
    for label, why in left_sglang:
        print("* %s: %s" % (label, why))
    if left_dstack:
        print("\nLeft out, dstack rows:\n")
        for label, why in left_dstack:
            print("* %s: %s" % (label, why))


def print_cases(cases, setting, quick):
    print("| source | case | measured | servesim |")
    print("|---|---|---|---|")
    for c in cases:
        meas = ("%.4g" % c["measured"] if c["source"] == "vllm" else
                ", ".join("%s %.4g" % kv for kv in sorted(c["measured"].items())))
        print("| %s | %s | %s | `servesim %s` |" % (
            c["source"], c["case"], meas,
            " ".join(x for x in run_args(c, setting, quick)
                     if x != "--json" and not x.startswith(os.sep))))


def main(argv):
    ap = harness_parser("amd-validate.py", "servesim against AMD MI300X serving measurements", ROOT,
                        "amd", "fewer requests per run (the test's setting)")
    ap.add_argument("--only", choices=("vllm", "sglang", "dstack"), help="one source")
    ap.add_argument("--fit", action="store_true",
                    help="fit vllm-rocm's allreduce_floor_us on the latency tables, "
                         "leaving one vLLM version out")
    a = ap.parse_args(argv)
    if a.jobs < 1:
        ap.error("--jobs: expected a positive integer, got %d" % a.jobs)
    if a.fit and (a.cases or a.only in ("sglang", "dstack")):
        ap.error("--fit: fits on the vLLM latency tables; not with %s" % (
            "--cases" if a.cases else "--only " + a.only))
    d = os.path.join(a.shared, "amd")
    if not os.path.isdir(d):
        print("amd-validate: %s: no such folder (expected ../shared/data/amd)" % d, file=sys.stderr)
        return 1
    try:
        models = {m["name"] for m in servesim_json(a.servesim, ["list", "models", "--json"])}
    except (OSError, RuntimeError, ValueError) as e:
        print("amd-validate: %s" % e, file=sys.stderr)
        return 1
    vc, left_v = vllm_cases(d)
    sc, left_s = sglang_cases(d, models)
    dc, left_d = dstack_cases(d)
    cases = [c for c in vc + sc + dc if a.only in (None, c["source"])]
    left_out = {"vllm": left_v, "sglang": [{"case": l, "why": w} for l, w in left_s],
                "dstack": [{"case": l, "why": w} for l, w in left_d]}
    with tempfile.TemporaryDirectory(prefix="amd-validate.") as tmp:
        prior = (write_catalog(tmp, None), VLLM_ATTN_EFF)
        if a.cases:
            print_cases(cases, prior, a.quick)
            print_left(left_v, left_s, left_d)
            if a.json:
                write_json(a.json, {"cases": cases, "left_out": left_out})
            return 0
        fitted = None
        if a.fit:
            held, every = fit(a.servesim, cases, tmp, a.quick, a.jobs)
            fitted = {"held_out": {v: {"allreduce_floor_us": f, "attn_decode_mem_eff": e}
                                   for v, (f, e) in held.items()},
                      "all": {"allreduce_floor_us": every[0], "attn_decode_mem_eff": every[1]},
                      "grid": {"allreduce_floor_us": FIT_FLOOR_US,
                               "attn_decode_mem_eff": FIT_ATTN_EFF}}
            rows = []
            for v, (f, e) in sorted(held.items()):
                setting = (write_catalog(tmp, f), e)
                part = [c for c in cases if c["source"] == "vllm" and c["metric"] == "latency"
                        and c["version"] == v]
                rows += score(part, simulate(a.servesim, part, setting, a.quick, a.jobs),
                              setting, a.quick)
            setting = (write_catalog(tmp, every[0]), every[1])
            rest = [c for c in cases if not (c["source"] == "vllm" and c["metric"] == "latency")]
            rows += score(rest, simulate(a.servesim, rest, setting, a.quick, a.jobs), setting,
                          a.quick)
        else:
            rows = score(cases, simulate(a.servesim, cases, prior, a.quick, a.jobs), prior, a.quick)
    summary = summarise(rows)
    print_tables(rows, summary, left_v, left_s, left_d, fitted)
    if a.json:
        write_json(a.json, {"bands": BANDS, "quick": a.quick, "fit": fitted, "rows": rows,
                            "summary": summary, "left_out": left_out,
                            "dstack_ratios": dstack_ratios(rows)})
    bad = [r for r in rows if "error" in r]
    if bad:
        print("amd-validate: %d of %d cases did not run (first: %s)" % (
            len(bad), len(rows), bad[0]["error"]), file=sys.stderr)
        return 1
    if a.check:
        ok = all(r["in_band"] if r["source"] == "vllm" else all(r["in_band"].values()) for r in rows)
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print("amd-validate: %s" % e, file=sys.stderr)
        sys.exit(1)
