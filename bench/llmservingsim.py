#!/usr/bin/env python3
"""servesim against LLMServingSim's vLLM 0.19 runs (issue 11 section 5).

    python3 bench/llmservingsim.py SERVESIM SHARED_DATA OUTDIR [--json FILE] [--fit]

Replays each usable run of ../shared/data/serving/llmservingsim_bench
(300 requests, Poisson 10 req/s, lengths pinned; docs/validation.md) with
`servesim run --trace`, the run's own vLLM settings from meta.json and an
engine-side copy of the shipped `vllm` profile, and compares

  * TTFT p50 and TPOT p50, engine-side on both sides: the measured TTFT runs
    from the request entering vLLM's queue (queued_ts) to its first token
    (AsyncLLM in process: no HTTP server, no client), so the profile's
    serving stack is none (data/stacks.json) and every other term of the
    shipped profile is kept;
  * the shape of the waiting / running time series of the overloaded runs
    (vllm/timeseries.csv, one tick a second) against servesim's time series
    (OUTDIR/<run>/timeseries.dat, sampled every second): normalised RMSE of
    each over the union of both runs' durations, the peak of waiting, and
    the time the waiting queue drains (last second with a waiting request).

With --fit, also refits the vllm profile's host terms (sched_us,
sched_us_per_seq) with `servesim calibrate fit-engine --group-by file` on
the runs, each held out in turn, and prints the held-out rows (about a
minute on one core).

Prints `| source | metric | measured | servesim | error |` rows (the
format of bench/validate.sh); --json writes every figure for the test
(tests/cli-llmservingsim.sh).  Exit 77 when the data are absent.
"""
import csv
import datetime
import json
import math
import os
import subprocess
import sys

# (directory under bench/examples, catalog model, catalog GPU).  The GPU of
# the RTXPRO6000 runs is the Server Edition: LLMServingSim's configs give its
# 1,597 GB/s and its profiler's meta.yaml names it (docs/catalogs.md).
RUNS = [
    ("RTX4090/Llama-3.1-8B", "llama-3.1-8b", "rtx-4090"),
    ("RTXPRO6000/Llama-3.1-8B", "llama-3.1-8b", "rtx-pro-6000-server"),
    ("RTXPRO6000/Qwen3-32B", "qwen3-32b", "rtx-pro-6000-server"),
]
# The device name fit-engine matches a catalog GPU by, for the runs whose
# meta.json does not record one (the RTXPRO6000 runs).
DEVICE = {"rtx-4090": "NVIDIA GeForce RTX 4090",
          "rtx-pro-6000-server": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}
# The mixture-of-experts run: vLLM ran it data-parallel (2 ranks of TP 1)
# with expert parallelism over both GPUs, replayed as such: --tp 2 --ep 2
# --dp-attention 2, each rank with vLLM's per-rank limits and KV blocks
# (settings(); docs/validation.md).  Not in the host-term refit (fit()),
# which stays the dense runs'.
MOE_RUNS = [("RTXPRO6000/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b", "rtx-pro-6000-server")]
SKIPPED = []

# A run is overloaded when requests queue: its waiting series reaches this
# many requests (the runs here peak at 0, or at 100-250).
OVERLOAD_WAITING = 10


def quantile(v, q):
    """q-quantile by linear interpolation between ranks, as servesim's summaries."""
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo = int(pos)
    frac = pos - lo
    return v[lo] * (1 - frac) + v[lo + 1] * frac if lo + 1 < len(v) else v[lo]


def measured(run_dir):
    reqs = [json.loads(line) for line in open(os.path.join(run_dir, "requests.jsonl")) if line.strip()]
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    ttft = [(r["first_token_ts"] - r["queued_ts"]) * 1e3 for r in reqs]
    tpot = [(r["last_token_ts"] - r["first_token_ts"]) * 1e3 / (r["output_toks"] - 1)
            for r in reqs if r["output_toks"] > 1]
    q0 = min(r["queued_ts"] for r in reqs)
    # the time series' t counts from the run's start (started_at); servesim's
    # from its first arrival: shift by the first arrival's offset
    start = datetime.datetime.fromisoformat(meta["started_at"].replace("Z", "+00:00")).timestamp()
    offset = min(r["arrival_time"] for r in reqs) - start
    ts = []
    with open(os.path.join(run_dir, "timeseries.csv"), newline="") as f:
        for row in csv.DictReader(f):
            ts.append((float(row["t"]) - offset, float(row["running"]), float(row["waiting"])))
    return {
        "meta": meta, "n": len(reqs),
        "ttft_p50": quantile(ttft, 0.5), "ttft_p90": quantile(ttft, 0.9), "tpot_p50": quantile(tpot, 0.5),
        "duration_s": max(r["last_token_ts"] for r in reqs) - q0,
        "ts": ts,
    }


def engine_side_profile(data_dir, path):
    """The shipped vllm profile less its serving stack, as an engines file."""
    cat = json.load(open(os.path.join(data_dir, "engines.json")))
    prof = dict(next(e for e in cat["engines"] if e["name"] == "vllm"))
    prof["name"] = "vllm-engine-side"
    for k in ("api_in_ms", "api_out_ms", "api_cv"):
        prof.pop(k, None)
    prof["stack"] = "none"
    prof["source"] = "the shipped vllm profile behind the serving stack none (bench/llmservingsim.py)"
    json.dump({"engines": [prof]}, open(path, "w"), indent=1)


def settings(meta):
    """servesim options for the vLLM settings meta.json records."""
    kw = meta["engine_kwargs"]
    # vLLM's data-parallel ranks with expert parallelism (MOE_RUNS): one
    # instance of tp x dp GPUs, dp attention ranks of tp GPUs, each with
    # its own scheduler and limits, and the experts over all of them
    # (vLLM's EP = TP x DP; docs/cost-models.md)
    tp = kw.get("tensor_parallel_size") or 1
    dp = kw.get("data_parallel_size") or 1 if kw.get("enable_expert_parallel") else 1
    opts = ["--tp", str(tp * dp)]
    if dp > 1:
        opts += ["--ep", str(tp * dp), "--dp-attention", str(dp)]
    opts += ["--policy", "vllm:max_num_seqs=%d,max_num_batched_tokens=%d" %
             (kw["max_num_seqs"], kw["max_num_batched_tokens"])]
    kv = meta.get("kv_cache") or {}
    if kv.get("num_gpu_blocks"):
        opts += ["--kv-blocks", str(kv["num_gpu_blocks"])]
    # vLLM 0.19 caches prefixes by default; the runs that record it say on.
    # Without prompt hashes in requests.jsonl servesim finds no shared
    # prefix, so this mirrors the configuration and changes nothing.
    if kv.get("enable_prefix_caching", True):
        opts += ["--prefix-cache", "on"]
    opts += ["--gpu-memory-utilization", str(kv.get("gpu_memory_utilization", 0.9))]
    return opts


def simulate(binary, run_dir, model, gpu, meta, catalog, out):
    cmd = [binary, "run", "--trace", os.path.join(run_dir, "requests.jsonl"),
           "--engine", "vllm-engine-side", "--engine-catalog", catalog,
           "--model", model, "--gpu", gpu] + settings(meta) + ["--out", out, "--quiet"]
    subprocess.run(cmd, check=True)
    s = json.load(open(os.path.join(out, "summary.json")))
    ts = []
    cols = None
    for line in open(os.path.join(out, "timeseries.dat")):
        if line.startswith("#"):
            cols = line[1:].split()
            continue
        if not line.strip():
            continue
        f = line.split()
        # t, running, waiting (queued), summed over the instances: vLLM's
        # series count both data-parallel ranks of the MoE run together
        run_i = [i for i, c in enumerate(cols) if c.startswith("running_") and c[8:].isdigit()]
        wait_i = [i for i, c in enumerate(cols) if c.startswith("queued_") and c[7:].isdigit()]
        ts.append((float(f[0]), sum(float(f[i]) for i in run_i), sum(float(f[i]) for i in wait_i)))
    return {"cmd": cmd, "ttft_p50": s["ttft_ms"]["p50"], "ttft_p90": s["ttft_ms"]["p90"],
            "tpot_p50": s["tpot_ms"]["p50"], "preemptions": s.get("preemptions"),
            "duration_s": s["duration_s"] if "duration_s" in s else None, "ts": ts}


def at(series, t, k):
    """Value k (1 running, 2 waiting) of a sampled series at time t: the last
    sample at or before t; 0 before the first and after the last (idle)."""
    v = 0.0
    if not series or t > series[-1][0]:
        return 0.0
    for s in series:
        if s[0] > t:
            break
        v = s[k]
    return v


def shape(meas_ts, sim_ts):
    """Compare two time series on every measured tick plus the seconds after
    the longer run's end: nRMSE of running and waiting (RMSE over the
    measured peak), peak waiting, and the drain time (last second with a
    waiting request)."""
    end = max(meas_ts[-1][0], sim_ts[-1][0])
    grid = [t for t, _, _ in meas_ts]
    t = grid[-1] + 1
    while t <= end:
        grid.append(t)
        t += 1
    out = {}
    for k, name in ((1, "running"), (2, "waiting")):
        m = [at(meas_ts, t, k) for t in grid]
        s = [at(sim_ts, t, k) for t in grid]
        rmse = math.sqrt(sum((a - b) ** 2 for a, b in zip(m, s)) / len(grid))
        out[name + "_nrmse"] = rmse / max(m)
        out[name + "_mean_meas"] = sum(m) / len(m)
        out[name + "_mean_sim"] = sum(s) / len(s)
    out["waiting_peak_meas"] = max(w for _, _, w in meas_ts)
    out["waiting_peak_sim"] = max(w for _, _, w in sim_ts)
    out["drain_s_meas"] = max((t for t, _, w in meas_ts if w > 0), default=0.0)
    out["drain_s_sim"] = max((t for t, _, w in sim_ts if w > 0), default=0.0)
    return out


def fit(binary, base, outdir, catalog):
    """Leave-one-run-out refit of the host terms; returns fit-engine's report.
    Each run is staged under its own file name (fit-engine groups by file
    name, and every run is called requests.jsonl) with its meta.json, the
    device name added where the run does not record it."""
    files = []
    for rel, model, gpu in RUNS:
        name = rel.replace("/", "-")
        d = os.path.join(outdir, "stage", name)
        os.makedirs(d, exist_ok=True)
        src = os.path.join(base, rel, "vllm")
        with open(os.path.join(src, "requests.jsonl")) as f, open(os.path.join(d, name + ".jsonl"), "w") as g:
            g.write(f.read())
        meta = json.load(open(os.path.join(src, "meta.json")))
        meta.setdefault("hardware", {}).setdefault("device_name", DEVICE[gpu])
        json.dump(meta, open(os.path.join(d, "meta.json"), "w"))
        files.append(os.path.join(d, name + ".jsonl"))
    rep = os.path.join(outdir, "fit.json")
    with open(os.path.join(outdir, "fit.txt"), "w") as out:
        subprocess.run([binary, "calibrate", "fit-engine", "--engine", "vllm-engine-side",
                        "--engine-catalog", catalog,
                        "--free", "sched_us:1:1e5,sched_us_per_seq:0.01:1e4", "--group-by", "file",
                        "--json=" + rep] + files, check=True, stdout=out)
    return json.load(open(rep))


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    binary, shared, outdir = argv[1:4]
    js = argv[argv.index("--json") + 1] if "--json" in argv else None
    base = os.path.join(shared, "serving", "llmservingsim_bench", "bench", "examples")
    if not os.path.isdir(base):
        print("llmservingsim: no %s" % base, file=sys.stderr)
        return 77
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(outdir, exist_ok=True)
    catalog = os.path.join(outdir, "engines-engine-side.json")
    engine_side_profile(os.path.join(here, "..", "data"), catalog)
    report = {"runs": [], "skipped": [{"run": r, "why": w} for r, w in SKIPPED]}
    for rel, model, gpu in RUNS + MOE_RUNS:
        run_dir = os.path.join(base, rel, "vllm")
        m = measured(run_dir)
        s = simulate(binary, run_dir, model, gpu, m["meta"], catalog,
                     os.path.join(outdir, rel.replace("/", "-")))
        row = {"run": rel, "model": model, "gpu": gpu, "cmd": " ".join(s["cmd"]),
               "measured": {k: m[k] for k in ("ttft_p50", "ttft_p90", "tpot_p50", "duration_s")},
               "servesim": {k: s[k] for k in ("ttft_p50", "ttft_p90", "tpot_p50", "preemptions")},
               "overloaded": max(w for _, _, w in m["ts"]) >= OVERLOAD_WAITING}
        if row["overloaded"]:
            row["shape"] = shape(m["ts"], s["ts"])
        report["runs"].append(row)
    for r in report["runs"]:
        src = "LLMServingSim vLLM 0.19, %s" % r["run"]
        for k, label in (("ttft_p50", "TTFT p50 (engine-side), ms"), ("tpot_p50", "TPOT p50, ms")):
            a, b = r["measured"][k], r["servesim"][k]
            print("| %s | %s | %.1f | %.1f | %+.1f%% |" % (src, label, a, b, 100 * (b / a - 1)))
        if "shape" in r:
            sh = r["shape"]
            print("| %s | running, nRMSE over the run (mean %.1f vs %.1f) | - | - | %.1f%% |" % (
                src, sh["running_mean_meas"], sh["running_mean_sim"], 100 * sh["running_nrmse"]))
            print("| %s | waiting, nRMSE over the run (mean %.1f vs %.1f) | - | - | %.1f%% |" % (
                src, sh["waiting_mean_meas"], sh["waiting_mean_sim"], 100 * sh["waiting_nrmse"]))
            print("| %s | peak waiting, requests | %.0f | %.0f | %+.1f%% |" % (
                src, sh["waiting_peak_meas"], sh["waiting_peak_sim"],
                100 * (sh["waiting_peak_sim"] / sh["waiting_peak_meas"] - 1)))
            print("| %s | queue drained at, s | %.0f | %.0f | %+.1f%% |" % (
                src, sh["drain_s_meas"], sh["drain_s_sim"],
                100 * (sh["drain_s_sim"] / sh["drain_s_meas"] - 1)))
    if "--fit" in argv:
        rep = fit(binary, base, outdir, catalog)
        report["fit"] = rep
        par = ", ".join("%s %.3g" % (k, v["value"]) for k, v in rep["parameters"].items())
        for r in rep["runs"]:
            if r["held_out"] is None or r["metric"] not in ("ttft_p50", "tpot_p50"):
                continue
            print("| LLMServingSim vLLM 0.19, %s, host terms refitted on the other runs (on all: %s) | "
                  "%s, ms | %.1f | %.1f | %+.1f%% |" % (
                      r["group"].replace(".jsonl", "").replace("-", "/", 1), par,
                      "TTFT p50 (engine-side)" if r["metric"] == "ttft_p50" else "TPOT p50", r["measured"],
                      r["held_out"], 100 * (r["held_out"] / r["measured"] - 1)))
    for sk in report["skipped"]:
        print("| LLMServingSim vLLM 0.19, %s | skipped: %s | - | - | - |" % (sk["run"], sk["why"]))
    if js:
        json.dump(report, open(js, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
