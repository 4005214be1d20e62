#!/usr/bin/env python3
"""DistServe's pipeline-parallel runs on servesim (docs/validation.md,
"DistServe's own runs"): the `c21d12` runs of OPT-13B on A100-80GB, one
prefill instance of TP 2 and one decode instance of TP 1 with PP 2
(DistServe's name: context tp 2 pp 1, decode tp 1 pp 2), replayed open loop
with the shipped `distserve` engine profile and the launch flags of the
c21d11 replays (bench/validate.sh), once with --decode-pp 2 and once
with the pipeline left out (--decode-pp 1) for contrast.  Nothing is
fitted to these runs: held out by construction.

    bench/distserve-pp.py [SERVESIM [SHARED_DATA]]

Prints one line per run: measured and simulated TTFT p50 / p90 and TPOT
p50 (ms; TPOT over requests with more than one output token, as the runs'
own tpot_ms), and the errors."""
import ast, json, os, subprocess, sys

bin_ = sys.argv[1] if len(sys.argv) > 1 else "build/servesim"
shared = sys.argv[2] if len(sys.argv) > 2 else "../shared/data"
d = os.path.join(shared, "serving/distserve_alignment/opt-13b-sharegpt")
runs = sorted((f for f in os.listdir(d) if f.startswith("distserve-c21d12-")),
              key=lambda f: float(f.rsplit("-", 1)[1][:-4]))
if not runs:
    print("distserve-pp: no c21d12 runs in " + d, file=sys.stderr)
    sys.exit(77)


def pct(v, q):
    """numpy's default (linear) percentile"""
    v = sorted(v)
    x = (len(v) - 1) * q / 100.0
    i = int(x)
    return v[i] if i + 1 >= len(v) else v[i] + (v[i + 1] - v[i]) * (x - i)


FLAGS = ["--engine", "distserve", "--model", "opt-13b", "--gpu", "a100-80gb-sxm",
         "--prefill-instances", "1", "--decode-instances", "1", "--prefill-tp", "2",
         "--decode-tp", "1", "--policy",
         "vllm:chunked=off,max_num_seqs=1024,max_num_batched_tokens=8192",
         "--gpu-memory-utilization", "0.95", "--json", "--quiet"]
print("| run | req/s | decode pp | TTFT p50 meas/sim | TTFT p90 meas/sim | TPOT p50 meas/sim |")
print("|---|---|---|---|---|---|")
err = {1: [], 2: []}
for f in runs:
    path = os.path.join(d, f)
    with open(path) as fh:
        rows = ast.literal_eval(fh.readline())
    ttft = [r["ttft_ms"] for r in rows]
    tpot = [r["tpot_ms"] for r in rows if r["output_len"] > 1]
    meas = (pct(ttft, 50), pct(ttft, 90), pct(tpot, 50))
    rate = f.rsplit("-", 1)[1][:-4]
    for pp in (2, 1):
        out = subprocess.run([bin_, "run", "--trace", path, "--decode-pp", str(pp)] + FLAGS,
                             check=True, capture_output=True, text=True).stdout
        s = json.loads(out)
        sim = (s["ttft_ms"]["p50"], s["ttft_ms"]["p90"], s["tpot_ms"]["p50"])
        e = [sim[k] / meas[k] - 1 for k in range(3)]
        err[pp].append(e)
        print("| %s | %s | %d | %.1f / %.1f (%+.1f%%) | %.1f / %.1f (%+.1f%%) | %.1f / %.1f (%+.1f%%) |" % (
            f[:-4], rate, pp, meas[0], sim[0], 100 * e[0], meas[1], sim[1], 100 * e[1],
            meas[2], sim[2], 100 * e[2]))
for pp in (2, 1):
    n = len(err[pp])
    print("decode pp %d: mean |error| TTFT p50 %.1f%%, TTFT p90 %.1f%%, TPOT p50 %.1f%% over %d runs" % (
        pp, *(100 * sum(abs(e[k]) for e in err[pp]) / n for k in range(3)), n))
