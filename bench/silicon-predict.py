#!/usr/bin/env python3
"""silicon-predict.py SERVESIM SHARED BACKEND ENGINE [--catalog FILE] [--jobs N]

Predict, with no refit, the aiconfigurator silicon table's dense bf16
colocated rows of one backend (vllm, sglang or trtllm) on h100_sxm with the
engine profile ENGINE, re-running each row as fit-engine does: `servesim run
--concurrency C --lengths fixed:prompt=ISL,output=OSL --num-requests 10C`
(aiconfigurator's benchmark: genai-perf --request-count 10C after a
warm-up phase of 2C).  Prints each row and the TPOT and TTFT MAPE per TP.
Measured, never judged (docs/validation.md, "aiconfigurator silicon").
"""
import argparse, collections, csv, json, os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

MODELS = {"Qwen/Qwen3-32B": "qwen3-32b", "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b"}

ap = argparse.ArgumentParser()
ap.add_argument("bin"); ap.add_argument("shared"); ap.add_argument("backend"); ap.add_argument("engine")
ap.add_argument("--catalog"); ap.add_argument("--jobs", type=int, default=1)
ap.add_argument("--json")
a = ap.parse_args()
path = os.path.join(a.shared, "serving", "aiconfigurator_silicon", "silicon_sample_excl_h200.csv")
rows = [r for r in csv.DictReader(open(path))
        if r["backend"] == a.backend and r["system"] == "h100_sxm" and r["mode"] == "agg"
        and r["precision"] == "" and r["model_path"] in MODELS]
if not rows:
    sys.exit("silicon-predict: no dense bf16 h100_sxm rows of backend %s" % a.backend)

def one(r):
    c, isl, osl, tp = int(r["batch_size"]), int(r["isl"]), int(r["osl"]), int(r["tp_size"])
    cmd = [a.bin, "run", "--engine", a.engine, "--model", MODELS[r["model_path"]], "--gpu", "h100-sxm",
           "--tp", str(tp), "--concurrency", str(c), "--lengths", "fixed:prompt=%d,output=%d" % (isl, osl),
           "--num-requests", str(10 * c), "--json"]
    if a.catalog:
        cmd += ["--engine-catalog", a.catalog]
    d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    return dict(tp=tp, c=c, isl=isl, osl=osl, version=r["backend_version"],
                ttft=float(r["silicon_ttft_ms"]), tpot=float(r["silicon_tpot_ms"]),
                sim_ttft=d["ttft_ms"]["mean"], sim_tpot=d["tpot_ms"]["mean"])

with ThreadPoolExecutor(a.jobs) as ex:
    res = list(ex.map(one, rows))
res.sort(key=lambda x: (x["tp"], x["isl"], x["osl"], x["c"]))
print("%3s %5s %5s %4s | %9s %9s %7s | %9s %9s %7s" % ("tp", "isl", "osl", "C", "TPOT", "sim", "err",
                                                      "TTFT", "sim", "err"))
by = collections.defaultdict(list)
for x in res:
    et, ef = x["sim_tpot"] / x["tpot"] - 1, x["sim_ttft"] / x["ttft"] - 1
    by[x["tp"]].append((abs(et), abs(ef)))
    print("%3d %5d %5d %4d | %9.2f %9.2f %+6.1f%% | %9.1f %9.1f %+6.1f%%" % (
        x["tp"], x["isl"], x["osl"], x["c"], x["tpot"], x["sim_tpot"], 100 * et, x["ttft"], x["sim_ttft"], 100 * ef))
print("\n%s rows with --engine %s, no refit:" % (a.backend, a.engine))
allv = []
for tp in sorted(by):
    v = by[tp]; allv += v
    print("  TP %d (%d rows): TPOT MAPE %.1f%%, TTFT MAPE %.1f%%" % (
        tp, len(v), 100 * sum(e[0] for e in v) / len(v), 100 * sum(e[1] for e in v) / len(v)))
print("  all (%d rows): TPOT MAPE %.1f%%, TTFT MAPE %.1f%%" % (
    len(allv), 100 * sum(e[0] for e in allv) / len(allv), 100 * sum(e[1] for e in allv) / len(allv)))
if a.json:
    json.dump(res, open(a.json, "w"), indent=1)
