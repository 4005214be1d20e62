#!/usr/bin/env python3
"""Are servesim's CUDA kernels in the class real engines run?  (issue 13,
section 3; docs/kernels.md, "On a GPU: the bundle and its check")

Compares the operators a calibration sweep measured on one GPU with a
reference device's measured tables at the same shapes, the reference scaled
to the measured GPU by the roofline: a point's expected time is

    t_ref x max(F / C_gpu, B / W_gpu) / max(F / C_ref, B / W_ref)

with F the operator's floating-point work, B the bytes it must move, C a
device's dense bf16 peak and W its HBM bandwidth (gpus.json bf16_flops and
hbm_bw).  A memory-bound decode scales by the bandwidths, a compute-bound
prefill by the peaks, a GEMM by whichever bound it is at both.  Shapes must
match exactly (the keys below); where the reference has several kernels
(variants) at a shape, the fastest is the reference, so the target is the
best engine kernel measured there.

    kernel-class.py MEASURED_DB GPU REF_DB REF_GPU GPUS_JSON [JSON_OUT]

Prints one line per operator and writes JSON_OUT (ops: n matched, ratios
measured / expected: median, geometric mean, max, share within the target,
the worst points).  Exit 0 whatever the ratios (they are figures for the
report, not a conformance check); 1 when a file cannot be read; 2 for a bad
command line.
"""
import json
import math
import sqlite3
import sys

# operator: (shape columns that must match, target ratio from issue 13)
OPS = {
    "attn_decode": (("batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim"), 1.5),
    "attn_prefill": (("batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim"), 2.0),
    "gemm": (("m", "n", "k"), 1.25),
}
ELEM = 2  # bytes per bf16 element: both sides run bf16


def work(op, s):
    """(floating-point operations, bytes moved) of one call at shape s."""
    if op == "gemm":
        m, n, k = s["m"], s["n"], s["k"]
        return 2.0 * m * n * k, ELEM * (m * k + n * k + m * n)
    b, q, kv, h, kvh, d = (s[c] for c in OPS[op][0])
    if op == "attn_decode":
        # q . K over kv_len keys and P . V, per query head; the whole K and V
        # of each sequence read once (GQA: per KV head)
        return 4.0 * b * h * kv * d, ELEM * (2.0 * b * kv * kvh * d + 2.0 * b * h * d)
    # prefill: q_len queries over kv_len cached keys plus their own causal
    # triangle; K and V of the cached context and the chunk, Q and the output
    pairs = q * kv + q * (q + 1) / 2.0
    return 4.0 * b * h * d * pairs, ELEM * (2.0 * b * (kv + q) * kvh * d + 2.0 * b * q * h * d)


def roofline_s(op, s, dev):
    f, by = work(op, s)
    return max(f / dev["bf16_flops"], by / dev["hbm_bw"])


def points(db, gpu, op):
    """{shape tuple: (time_ms, variant)} of gpu's op; the fastest variant."""
    keys = OPS[op][0]
    out = {}
    rows = db.execute("SELECT %s, COALESCE(median_ms, mean_ms), variant FROM measurements "
                      "WHERE device = ? AND op = ? AND COALESCE(median_ms, mean_ms) > 0"
                      % ", ".join(keys), (gpu, op))
    for r in rows:
        shape, t, var = tuple(r[:len(keys)]), r[len(keys)], r[len(keys) + 1]
        if None in shape:
            continue
        if shape not in out or t < out[shape][0]:
            out[shape] = (t, var)
    return out


def compare(mdb, gpu, rdb, ref, devs):
    res = {}
    for op, (keys, target) in OPS.items():
        mine, theirs = points(mdb, gpu, op), points(rdb, ref, op)
        rows = []
        for shape in sorted(set(mine) & set(theirs)):
            s = dict(zip(keys, shape))
            t_ref, var = theirs[shape]
            expect = t_ref * roofline_s(op, s, devs[gpu]) / roofline_s(op, s, devs[ref])
            rows.append({"shape": s, "measured_ms": mine[shape][0], "reference_ms": t_ref,
                         "reference_kernel": var, "expected_ms": expect,
                         "ratio": mine[shape][0] / expect})
        r = {"target": target, "n": len(rows), "measured_points": len(mine)}
        if rows:
            ratios = sorted(x["ratio"] for x in rows)
            r.update({"median": ratios[len(ratios) // 2] if len(ratios) % 2 else
                      (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2,
                      "geomean": math.exp(sum(math.log(x) for x in ratios) / len(ratios)),
                      "max": ratios[-1],
                      "within_target": sum(x <= target for x in ratios) / len(ratios),
                      "worst": sorted(rows, key=lambda x: -x["ratio"])[:3]})
        res[op] = r
    return res


def line(op, r, gpu, ref):
    if not r["n"]:
        return "%-12s no shape measured on %s is in %s's tables (%d measured)" % (
            op, gpu, ref, r["measured_points"])
    w = r["worst"][0]
    return ("%-12s %3d shapes: measured / expected median %.2f, geomean %.2f, max %.2f "
            "(target <= %.2f: %s, %.0f%% of shapes within); worst %s, %.3g ms vs %.3g ms" % (
                op, r["n"], r["median"], r["geomean"], r["max"], r["target"],
                "met" if r["median"] <= r["target"] else "MISSED", 100 * r["within_target"],
                ",".join("%s=%s" % kv for kv in w["shape"].items()), w["measured_ms"],
                w["expected_ms"]))


def main(argv):
    if len(argv) not in (6, 7):
        sys.stderr.write("usage: kernel-class.py MEASURED_DB GPU REF_DB REF_GPU GPUS_JSON "
                         "[JSON_OUT]\n")
        return 2
    mpath, gpu, rpath, ref, gpath = argv[1:6]
    try:
        with open(gpath) as f:
            devs = {g["name"]: g for g in json.load(f)["gpus"]}
        mdb = sqlite3.connect("file:%s?mode=ro" % mpath, uri=True)
        rdb = sqlite3.connect("file:%s?mode=ro" % rpath, uri=True)
        for name in (gpu, ref):
            if name not in devs:
                sys.stderr.write("kernel-class: %s: no GPU named %s\n" % (gpath, name))
                return 1
        res = compare(mdb, gpu, rdb, ref, devs)
    except (OSError, ValueError, KeyError, sqlite3.Error) as e:
        sys.stderr.write("kernel-class: %s\n" % e)
        return 1
    print("kernel class: %s measured against %s's tables scaled by the roofline" % (gpu, ref))
    for op, r in res.items():
        print("  " + line(op, r, gpu, ref))
    if len(argv) == 7:
        with open(argv[6], "w") as f:
            json.dump({"gpu": gpu, "reference_gpu": ref, "ops": res}, f, indent=2,
                      sort_keys=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
