#!/usr/bin/env python3
"""Multi-LoRA validation against S-LoRA's A10G runs (issue 33, section 1):
servesim runs every usable measured row of ../shared/data/lora as the
workload S-LoRA's benchmark sent and reports the error of throughput,
mean latency and mean first-token latency.

    python3 bench/lora-validate.py [--servesim BIN] [--shared DIR] [--quick]
                                   [--jobs N] [--json OUT] [--check] [--cases]

Source: slora_paper_runs.csv (S-LoRA/S-LoRA @ c1ddf48, benchmarks/paper),
one A10G, llama-7b (huggyllama/llama-7b).  How a row becomes a run, from
the artifact's benchmarks/ (trace.py, run_exp.py, exp_suite.py,
launch_server.py and the exp_cmds.sh beside each result file):

* requests: the ones the client sent, replayed as a native trace:
  trace.py's draws after numpy.random.seed(42) (bench/nplegacy.py
  reproduces numpy's legacy stream): adapter index floor(N x X), X from
  numpy.random.power(alpha); input and output lengths numpy.randint(8,
  512), uniform on 8..511; int(rate x duration) gamma gaps of shape 1/cv^2
  and scale cv^2/rate, cumulated.  A law with servesim's own draw is a
  different workload: near saturation and under bursty arrivals the draw
  alone moves mean latency by a factor of two (docs/validation.md).  The
  prompt "Hello " x n is n tokens plus BOS; max_new_tokens = the output
  length with ignore_eos, so the engine knows every request's output
  (servesim's oracle predictor).  The client's clock starts one gap before
  the first arrival: throughput is over that wall time.
* adapters: the adapter list cycles through the setting's ranks (S2: 64,
  32, 16, 8, 64, ...), and so does servesim's:
  mix=64:1/32:1/16:1/8:1,rank_order=cycle gives adapter i the (i mod 4)-th
  rank (with one adapter, rank 64, as S-LoRA's).  S1 is rank 8; 0 adapters
  is the base model alone (no --lora).
* engine: S-LoRA's LightLLM router: prefill-only or decode-only steps
  (vllm:v0=on,chunked=off), a new batch's prompts within batch_max_tokens
  = max(max_total_token_num / 6, 3072) = 3072 tokens, admission only when
  the peak over time of the running and admitted requests' tokens fits the
  token pool (ReqQueue._can_add_new_req: admission=peak), never a
  preemption, and after each admission 10 decode steps before the queue
  is looked at again (RouterManager.max_wait_tokens: admit_wait=10), a
  token-granular KV pool of the launch's --num-token tokens (--block-size
  1 --kv-blocks N).  Adapters count 4 x rank tokens of that pool each
  (paging=unified): S-LoRA's rows hold them in its pages, and
  S-LoRA-no-unify-mem's router (--no-mem-pool) still counts them against
  it at admission though they live in a region of their own.  The profile
  (written here, not shipped) is vLLM's with no CUDA graphs (LightLLM
  runs eagerly) and synchronous output; its per-step host time sched_us
  is the one fitted parameter (--fit's grid below).
* the launch's --num-token per row: exp_cmds.sh launched the server again
  with fewer tokens for the rows an earlier launch did not write (run_exp
  --append skips the written ones), so the count depends on the adapters
  (NUM_TOKEN below).

Left out, each with its reason (--cases lists them): PEFT, S-LoRA-bmm,
vLLM-packed, PetS, adapter merging, the early-abort and LIFO schedulers,
and the backup/ runs (earlier runs the authors replaced).

Not modelled: the router's 10 ms sleep while idle, S2's adapter ranks in
S-LoRA's order (drawn instead), a trailing-space token the tokenizer may
add, and no-unify-mem's copies into its own adapter region (priced as
unified paging's loads).

Leave-one-factor-out: sched_us is fitted (grid, mean |log error| of
throughput and mean latency) on the rows outside a fold and predicts the
fold; folds are the factor sweeps (adapter count, request rate, arrival
cv, the unified-memory ablation) crossed with the rank setting (S1, S2),
so no row is predicted by a fit that saw its sweep or its ranks.

--quick runs the first third of each row's requests.  --json OUT writes
every row; --check exits 1 when a held-out error misses its band.  Bad input: one line naming the file and line,
exit 1; a bad command line: exit 2.  Standard library only.
"""
import json
import math
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # loaded by path, too
from benchlib import BadInput, harness_parser, num, read_csv  # noqa: E402
from nplegacy import LegacyRandomState  # noqa: E402
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

BANDS = {"throughput": 0.15, "latency": 0.15, "ttft": None}
SEED = 42          # run_exp.py's --seed default, which the paper's runs kept
GPU = "a10g"
MODEL = "llama-7b"
BATCH_MAX_TOKENS = 3072
# RouterManager.max_wait_tokens: decode steps after a prefill before the
# router looks at the queue again
ADMIT_WAIT = 10
RANKS = {"S1": "rank=8", "S2": "mix=64:1/32:1/16:1/8:1,rank_order=cycle"}
# sched_us grid (us per step): LightLLM's router loop, model RPC and
# Python batch bookkeeping; 60 is vLLM V1's own figure
FIT_SCHED_US = [60, 1000, 2000, 3000, 4000, 5000, 6000, 8000, 10000, 13000, 16000, 20000]
USED = {"synthetic/slora": "S-LoRA", "synthetic/no_mem": "S-LoRA-no-unify-mem",
        "ablation_mem": None}
SYSTEMS = ("S-LoRA", "S-LoRA-no-unify-mem")
LEFT_OUT = {
    "HuggingFace PEFT": "one adapter per batch and padded PEFT kernels in HuggingFace's "
                        "generate loop: an engine servesim has no profile for",
    "S-LoRA-bmm (no unified memory, no custom kernels)": "padded batched matmul over the "
                        "batch's largest rank: servesim prices the adapter GEMMs SGMV-style",
    "vLLM-packed (merged adapters, one worker per adapter, MPS)": "one vLLM worker per "
                        "adapter sharing the GPU under MPS: not expressible",
    "PetS baseline": "PetS's scheduler and kernels: not expressible",
    "adapter merging (swap) baseline": "merges one adapter into the weights and swaps "
                        "between batches: not expressible",
    "S-LoRA + early-abort scheduler": "aborts requests predicted to miss the first-token "
                        "SLO: no such admission policy",
    "S-LoRA + LIFO scheduler": "last-in-first-out queue: no such order",
}
COLS = ("experiment", "backup_run", "gpu", "model_setting", "base_model", "system",
        "workload", "num_adapters", "alpha_powerlaw", "req_rate_rps", "cv_arrival",
        "duration_s", "input_len_min", "input_len_max", "output_len_min", "output_len_max",
        "throughput_req_s", "avg_latency_s", "avg_first_token_latency_s")


def num_token(system, setting, experiment, n):
    """The --num-token S-LoRA was launched with for a row (exp_cmds.sh)."""
    if system == "S-LoRA":
        return 14500
    if experiment == "ablation_mem":
        if setting == "S1":
            return 14500 if n < 50 else 13500
        return {0: 14500, 1: 14500, 10: 13500, 25: 10000, 50: 9500}.get(n, 9000)
    # synthetic/no_mem (S1 ran at 13500; S2: 13500, 10000 at 20, 9000 above)
    if setting == "S1":
        return 13500
    return 13500 if n <= 1 else (10000 if n == 20 else 9000)


def sweep(experiment, r):
    """The factor a row's sweep varies (its fold, with the rank setting)."""
    if experiment == "ablation_mem":
        return "unified-memory ablation"
    return r["factor"]


def cases(rows):
    """(usable cases, [(label, reason)] left out)."""
    used, left = [], []
    for row in rows:
        label = "%s line %s" % (row["experiment"], row["_where"].rsplit(":", 1)[1])
        if row["gpu"] != "A10G-24GB" or row["workload"] != "synthetic":
            left.append((label, "not an A10G synthetic run"))
            continue
        if row["backup_run"] == "1":
            left.append((label, "backup/: an earlier run the authors replaced"))
            continue
        if row["system"] in LEFT_OUT:
            left.append((label, "%s: %s" % (row["system"], LEFT_OUT[row["system"]])))
            continue
        if row["experiment"] not in USED or row["system"] not in SYSTEMS:
            left.append((label, "%s in %s: not a run this script maps" % (
                row["system"], row["experiment"])))
            continue
        if row["base_model"] != "huggyllama/llama-7b" or row["model_setting"] not in RANKS:
            raise BadInput("%s: model_setting is '%s' with base_model '%s', expected S1 or S2 "
                           "on huggyllama/llama-7b" % (row["_where"], row["model_setting"],
                                                       row["base_model"]))
        c = {"where": row["_where"], "experiment": row["experiment"], "system": row["system"],
             "setting": row["model_setting"],
             "adapters": num(row, "num_adapters", 0, 1e6, True),
             "alpha": num(row, "alpha_powerlaw", 0.01, 1),
             "rate": num(row, "req_rate_rps", 0.01, 1e4),
             "cv": num(row, "cv_arrival", 0.001, 1000),
             "duration": num(row, "duration_s", 1, 1e6),
             "in": (num(row, "input_len_min", 1, 1e6, True), num(row, "input_len_max", 2, 1e6, True)),
             "out": (num(row, "output_len_min", 1, 1e6, True), num(row, "output_len_max", 2, 1e6, True)),
             "measured": {"throughput": num(row, "throughput_req_s", 1e-6, 1e6),
                          "latency": num(row, "avg_latency_s", 1e-6, 1e7),
                          "ttft": num(row, "avg_first_token_latency_s", 1e-6, 1e7)}}
        used.append(c)
    # the factor each row's sweep varies: the level that differs from the
    # sweep's other rows (exp_suite.py's a10g-num-adapter, -req-rate, -cv)
    for c in used:
        c["factor"] = ("unified-memory ablation" if c["experiment"] == "ablation_mem" else
                       "request rate" if c["rate"] != 2 else
                       "arrival cv" if c["cv"] != 1 else "adapter count")
        c["fold"] = "%s %s" % (c["factor"], c["setting"])
    return used, left


def workload(c, quick):
    """The requests S-LoRA's client sent for case c, drawn as its trace.py
    draws them (numpy.random.seed(42); power, randint, randint, gamma, in
    that order; bench/nplegacy.py): [(arrival s, prompt, output, adapter
    or None)], arrival times as the client's schedule, the first one after
    the benchmark's clock started.  The prompt is "Hello " x n, which the
    LLaMA tokenizer encodes as n tokens plus BOS (+1).  --quick: the first
    third of the requests."""
    n = int(c["rate"] * c["duration"])
    rs = LegacyRandomState(SEED)
    ind = [int(x * c["adapters"]) for x in rs.power(c["alpha"], n)]
    ins = rs.randint(c["in"][0], c["in"][1], n)
    outs = rs.randint(c["out"][0], c["out"][1], n)
    gaps = rs.gamma(1.0 / (c["cv"] * c["cv"]), c["cv"] * c["cv"] / c["rate"], n)
    reqs, tic = [], 0.0
    for i in range(n):
        tic += gaps[i]
        reqs.append((tic, ins[i] + 1, outs[i], ind[i] if c["adapters"] > 0 else None))
    return reqs[:max(1, n // 3)] if quick else reqs


def trace_name(c, quick):
    return "slora-n%d-r%g-cv%g-a%d-al%g%s.csv" % (
        int(c["rate"] * c["duration"]), c["rate"], c["cv"], c["adapters"], c["alpha"],
        "-quick" if quick else "")


def write_trace(tmp, c, quick):
    """A native trace of workload(c) in tmp (once per workload); its path
    and the first arrival, s (servesim starts the trace's clock there)."""
    reqs = workload(c, quick)
    path = os.path.join(tmp, trace_name(c, quick))
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write("arrival_ms,prompt_tokens,output_tokens,adapter\n")
            for t, pin, pout, ad in reqs:
                f.write("%.6f,%d,%d,%d\n" % (t * 1e3, pin, pout, -1 if ad is None else ad))
    return path, reqs[0][0]


def run_args(c, catalog, trace):
    a = ["run", "--json", "--model", MODEL, "--gpu", GPU, "--engine", "slora",
         "--engine-catalog", catalog, "--stack", "local-vllm", "--seed", "42",
         "--block-size", "1",
         "--kv-blocks", str(num_token(c["system"], c["setting"], c["experiment"], c["adapters"])),
         "--trace", trace]
    if c["adapters"] > 0:
        # S-LoRA: adapters in pages of the token pool (unified paging).
        # no-unify-mem (--no-mem-pool) keeps them in a region of its own,
        # but its router (ReqQueue._can_add_new_req, the same in both
        # modes) still counts 4 x rank tokens for each adapter of the
        # running and admitted requests against the pool: the pool admits
        # as unified paging does, on that launch's smaller pool.  The
        # trace names each request's adapter.
        a += ["--lora", "adapters=%d,%s,paging=unified" % (c["adapters"], RANKS[c["setting"]])]
    return a


def write_catalog(tmp, sched_us):
    """An engines file with the S-LoRA profile at sched_us."""
    with open(os.path.join(ROOT, "data", "engines.json"), encoding="utf-8") as f:
        base = next(e for e in json.load(f)["engines"] if e["name"] == "vllm")
    p = {k: v for k, v in base.items() if not k.startswith("_") and
         k not in ("graph_sizes", "graph_launch_us", "graph_mixed")}
    p.update({"name": "slora", "versions": "S-LoRA @ c1ddf48 (LightLLM router, eager)",
              "policy": "vllm:v0=on,chunked=off,admission=peak,max_num_batched_tokens=%d,"
                        "max_num_seqs=1000,admit_wait=%d" % (BATCH_MAX_TOKENS, ADMIT_WAIT),
              "async_output": False, "sched_us": sched_us,
              "source": "bench/lora-validate.py: vLLM's profile, eager, sched_us fitted"})
    path = os.path.join(tmp, "engines-%g.json" % sched_us)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"engines": [p]}, f)
    return path


def predict(binary, c, catalog, trace):
    path, first = trace
    p = subprocess.run([binary] + run_args(c, catalog, path), capture_output=True, text=True,
                       check=False)
    if p.returncode != 0:
        err = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return {"error": err}
    s = json.loads(p.stdout)
    # the client's wall time starts `first` before the first arrival
    return {"throughput": s["requests_completed"] / (s["duration_s"] + first),
            "latency": s["e2e_ms"]["mean"] / 1e3, "ttft": s["ttft_ms"]["mean"] / 1e3}


def simulate(binary, cs, tmp, grid, quick, jobs):
    """{sched_us: [prediction per case]}"""
    work = [(g, i) for g in grid for i in range(len(cs))]
    cats = {g: write_catalog(tmp, g) for g in grid}
    traces = [write_trace(tmp, c, quick) for c in cs]
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        out = list(ex.map(lambda w: predict(binary, cs[w[1]], cats[w[0]], traces[w[1]]), work))
    res = {g: [None] * len(cs) for g in grid}
    for (g, i), p in zip(work, out):
        res[g][i] = p
    return res


def loss(cs, preds, idx):
    tot, n = 0.0, 0
    for i in idx:
        p = preds[i]
        if "error" in p:
            return math.inf
        for m in ("throughput", "latency"):
            tot += abs(math.log(p[m] / cs[i]["measured"][m]))
            n += 1
    return tot / max(n, 1)


def err_pct(pred, meas):
    return 100.0 * (pred / meas - 1.0)


def score(cs, sims, grid):
    rows = []
    for fold in sorted({c["fold"] for c in cs}):
        train = [i for i, c in enumerate(cs) if c["fold"] != fold]
        best = min(grid, key=lambda g: loss(cs, sims[g], train))
        for i, c in enumerate(cs):
            if c["fold"] != fold:
                continue
            p = sims[best][i]
            r = {k: v for k, v in c.items()}
            r["sched_us"] = best
            if "error" in p:
                r["error"] = p["error"]
            else:
                r["predicted"] = p
                r["error_pct"] = {m: err_pct(p[m], c["measured"][m]) for m in p}
                r["in_band"] = {m: abs(r["error_pct"][m]) <= 100 * BANDS[m]
                                for m in BANDS if BANDS[m] is not None}
            rows.append(r)
    return rows


def mape(rs, m):
    v = [abs(r["error_pct"][m]) for r in rs if "error_pct" in r]
    return statistics.mean(v) if v else float("nan")


def summary(rows):
    """Per factor, rank setting, system and all: held-out MAPE per metric
    and the rows within the 15% bands."""
    groups = {}
    for r in rows:
        for key in ("factor " + r["factor"], "ranks " + r["setting"], "system " + r["system"]):
            groups.setdefault(key, []).append(r)
    groups["all"] = rows
    out = {}
    for k in sorted(groups, key=lambda k: (k == "all", k)):
        rs = [r for r in groups[k] if "error_pct" in r]
        out[k] = {"rows": len(rs), "errors": len(groups[k]) - len(rs),
                  "mape": {m: mape(rs, m) for m in BANDS},
                  "in_band": {m: sum(r["in_band"][m] for r in rs) for m in BANDS
                              if BANDS[m] is not None}}
    return out


def report(rows, left, every_fit):
    print("S-LoRA's A10G runs: %d rows held out by factor sweep x rank setting, %d left out" % (
        len(rows), len(left)))
    print("sched_us fitted on all rows: %g us; per fold: %s" % (every_fit, ", ".join(
        sorted({"%s %g" % (r["fold"], r["sched_us"]) for r in rows}))))
    print()
    print("| system | ranks | adapters | rate | cv | tput meas | tput err | lat meas s | lat err |"
          " ttft meas s | ttft err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print("| %s | %s | %d | %g | %g | error: %s |" % (
                r["system"], r["setting"], r["adapters"], r["rate"], r["cv"], r["error"]))
            continue
        e, m = r["error_pct"], r["measured"]
        print("| %s | %s | %d | %g | %g | %.3f | %+.1f%% | %.1f | %+.1f%% | %.2f | %+.0f%% |" % (
            r["system"], r["setting"], r["adapters"], r["rate"], r["cv"], m["throughput"],
            e["throughput"], m["latency"], e["latency"], m["ttft"], e["ttft"]))
    print()
    print("| factor | rows | throughput MAPE | latency MAPE | first-token MAPE |"
          " in 15%% (tput / lat) |".replace("%%", "%"))
    print("|---|---|---|---|---|---|")
    for k, g in summary(rows).items():
        print("| %s | %d | %.1f%% | %.1f%% | %.1f%% | %d / %d of %d |" % (
            k, g["rows"], g["mape"]["throughput"], g["mape"]["latency"], g["mape"]["ttft"],
            g["in_band"]["throughput"], g["in_band"]["latency"], g["rows"]))
    print()
    print("left out:")
    reasons = {}
    for label, why in left:
        reasons.setdefault(why, []).append(label)
    for why, labels in sorted(reasons.items()):
        print("  %d rows: %s" % (len(labels), why))


def main():
    ap = harness_parser("lora-validate.py", "servesim against S-LoRA's A10G runs", ROOT, "lora",
                        "the first third of each row's requests")
    a = ap.parse_args()
    if a.jobs < 1:
        ap.error("--jobs: expected a positive integer")
    path = os.path.join(a.shared, "lora", "slora_paper_runs.csv")
    try:
        cs, left = cases(read_csv(path, COLS))
    except BadInput as e:
        print("lora-validate: %s" % e, file=sys.stderr)
        return 1
    if not cs:
        print("lora-validate: %s: no usable row" % path, file=sys.stderr)
        return 1
    if a.cases:
        for c in cs:
            print("%s\t%s\t%s\tservesim %s" % (c["where"], c["fold"], c["system"], " ".join(
                run_args(c, "ENGINES.json", trace_name(c, a.quick)))))
        for label, why in left:
            print("left out\t%s\t%s" % (label, why))
        return 0
    if not os.access(a.servesim, os.X_OK):
        print("lora-validate: %s: not an executable servesim" % a.servesim, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        sims = simulate(a.servesim, cs, tmp, FIT_SCHED_US, a.quick, a.jobs)
    every = min(FIT_SCHED_US, key=lambda g: loss(cs, sims[g], range(len(cs))))
    rows = score(cs, sims, FIT_SCHED_US)
    report(rows, left, every)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"sched_us_all": every, "summary": summary(rows), "rows": rows,
                       "left_out": left}, f, indent=1)
    if a.check:
        bad = [r for r in rows if "error" in r or not all(r["in_band"].values())]
        if bad:
            print("lora-validate: %d of %d rows miss a 15%% band" % (len(bad), len(rows)),
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
