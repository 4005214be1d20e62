#!/usr/bin/env python3
"""Derive data/acceptance.json from ../shared/data/specdec and validate it.

    python3 bench/acceptance-fit.py SHARED_DATA OUT.json     write the catalog
    python3 bench/acceptance-fit.py --validate SHARED_DATA   print the tables
                                                             (docs/validation.md)

SHARED_DATA is the folder holding specdec/ (../shared/data from the
repository root).  Standard library only; no number here is a measurement:
every figure is read from the CSVs, whose rows cite their upstream files.

The model (docs/speculation.md "Acceptance"): draft position i (1-based) is
accepted, given that positions 1..i-1 were, with probability
alpha * decay^(i-1); the cumulative acceptance of position i is the product
of those, and AL(k) = 1 + the sum over i <= k.  Two parameters per entry:
alpha (the first draft token's acceptance) and decay (how fast the
conditional acceptance falls with depth), both in (0, 1].
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # loaded by path, too
from benchlib import BadInput, read_csv  # noqa: E402

SPEC_MAX_K = 16          # sim/spec-accept.h
K_UNSTATED = 8           # where a figure whose k the source does not state is placed
DIGITS = 4               # catalog rounding of alpha and decay


def al(alpha, decay, k):
    """Expected acceptance length for k draft tokens (1 + sum of cumulative)."""
    total, cum = 1.0, 1.0
    for i in range(k):
        cum *= min(1.0, alpha * decay ** i)
        total += cum
    return total


def loss(alpha, decay, pts):
    return sum(((al(alpha, decay, k) - y) / y) ** 2 for k, y in pts)


def fit2(pts):
    """(alpha, decay) minimising the squared relative AL error over pts
    [(k, AL)]: a grid, then shrinking coordinate steps."""
    best = None
    for i in range(1, 101):
        for j in range(5, 101):
            a, r = i / 100.0, j / 100.0
            v = loss(a, r, pts)
            if best is None or v < best[0]:
                best = (v, a, r)
    v, a, r = best
    step = 0.005
    while step > 1e-7:
        moved = False
        for da, dr in ((step, 0), (-step, 0), (0, step), (0, -step)):
            na, nr = min(1.0, max(1e-4, a + da)), min(1.0, max(0.05, r + dr))
            nv = loss(na, nr, pts)
            if nv < v - 1e-15:
                v, a, r, moved = nv, na, nr, True
        if not moved:
            step /= 2
    return a, r


def solve_alpha(decay, k, y):
    """alpha with AL(k) = y at the given decay (bisection), or None when
    even alpha = 1 falls short."""
    if al(1.0, decay, k) < y:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if al(mid, decay, k) < y:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def solve_decay(k, y):
    lo, hi = 0.05, 1.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if al(1.0, mid, k) < y:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def slug(s):
    s = s.split("/")[-1].lower()
    out = "".join(c if c.isalnum() or c == "." else "-" for c in s)
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-")


def cite(row):
    return "%s@%s:%s" % (row["source_repo"], row["source_commit"], row["source_path"])


# --- reading the measurements ------------------------------------------------
# Each group is one catalog entry: a dict with name, method (catalog's),
# variant (the source's own method name), target, draft, dataset, source
# (the source family), pts [(k, AL)], stated (whether k is the source's),
# and cites [text].

SPECBENCH_METHOD = {   # Spec-Bench method -> (catalog method, what drafts)
    "EAGLE": ("eagle", "EAGLE-1 feature-level draft head (tree)"),
    "EAGLE2": ("eagle", "EAGLE-2 draft head (dynamic tree)"),
    "EAGLE3": ("eagle3", "EAGLE-3 draft head (dynamic tree)"),
    "SAMD[EAGLE2]": ("eagle", "SAM-Decoding: suffix automaton with EAGLE-2"),
    "Hydra": ("medusa", "Hydra heads (sequentially dependent Medusa heads)"),
    "Medusa": ("medusa", "Medusa heads (tree)"),
    "SpS": ("draft", "small draft model (not named by the leaderboard)"),
    "PLD": ("ngram", "prompt lookup decoding"),
    "REST": ("ngram", "REST retrieval from a datastore"),
    "Lookahead": ("ngram", "Lookahead decoding n-gram pool"),
    "Recycling": ("ngram", "Token Recycling adjacency matrix"),
}


def num(row, col, lo=1.0, hi=SPEC_MAX_K + 1.0):
    """row[col] as a number in [lo, hi]."""
    try:
        v = float(row[col])
    except (TypeError, ValueError):
        v = None
    if v is None or not lo <= v <= hi:
        raise BadInput("%s: %s is '%s', expected a number from %g to %g" %
                       (row["_where"], col, row[col], lo, hi))
    return v


SOURCE_COLS = ("source_repo", "source_commit", "source_path")


def groups_specbench(d):
    out = {}
    for row in read_csv(os.path.join(d, "specbench_leaderboard.csv"),
                        SOURCE_COLS + ("gpu", "target_model", "method", "mean_accepted_tokens")):
        if row["method"] not in SPECBENCH_METHOD:
            raise BadInput("%s: method '%s', expected one of %s" % (
                row["_where"], row["method"], ", ".join(sorted(SPECBENCH_METHOD))))
        meth, draft = SPECBENCH_METHOD[row["method"]]
        key = (row["method"], row["target_model"])
        g = out.setdefault(key, {
            "name": "specbench-%s-%s" % (slug(row["method"]).replace("[", "").replace("]", ""),
                                         slug(row["target_model"])),
            "method": meth, "variant": row["method"], "target": row["target_model"],
            "draft": draft, "dataset": "spec-bench", "family": "specbench",
            "pts": [], "stated": False, "cites": [], "repo": cite(row)})
        g["pts"].append((K_UNSTATED, num(row, "mean_accepted_tokens")))
        g["cites"].append("%s: %s" % (row["gpu"].split(" (")[0], row["mean_accepted_tokens"]))
    for g in out.values():
        g["name"] = g["name"].replace("samd-eagle2", "samd")
        g["source"] = ("%s, mean accepted tokens over the 6 Spec-Bench tasks, greedy, batch 1 (%s); "
                       "k not stated (tree drafting), figure placed at k=%d" %
                       (g["repo"], "; ".join(g["cites"]), K_UNSTATED))
    return list(out.values())


def groups_angelslim(d):
    out = []
    for row in read_csv(os.path.join(d, "angelslim_eagle3_qwen3_by_dataset.csv"),
                        SOURCE_COLS + ("target_model", "method", "dataset", "accept_length")):
        if row["method"] != "Eagle3" or row["dataset"] == "Mean":
            continue   # Vanilla is AL 1 by definition; Mean is the others' mean
        out.append({
            "name": "angelslim-eagle3-%s-%s" % (slug(row["target_model"]), slug(row["dataset"])),
            "method": "eagle3", "variant": "Eagle3", "target": row["target_model"],
            "draft": "AngelSlim Eagle3 head (not named)", "dataset": row["dataset"].lower(),
            "family": "angelslim", "pts": [(K_UNSTATED, num(row, "accept_length"))],
            "stated": False,
            "source": "%s, Qwen3 Eagle3 table: accept length %s on %s; engine, GPU and k not "
                      "stated, figure placed at k=%d" % (cite(row), row["accept_length"],
                                                         row["dataset"], K_UNSTATED)})
    return out


def groups_vllm(d):
    out = {}
    for row in read_csv(os.path.join(d, "vllm_eagle3_acceptance_mtbench.csv"),
                        SOURCE_COLS + ("platform", "target_model", "draft_model", "num_speculative_tokens",
                                       "mean_acceptance_length", "accept_rate_pos1")):
        k = int(num(row, "num_speculative_tokens", 1, 3))
        key = row["target_model"]
        g = out.setdefault(key, {
            "name": "vllm-eagle3-%s-mt-bench" % slug(row["target_model"]),
            "method": "eagle3", "variant": "eagle3", "target": row["target_model"],
            "draft": row["draft_model"], "dataset": "mt-bench", "family": "vllm",
            "pts": [], "stated": True, "cites": [], "repo": cite(row)})
        pos = [num(row, "accept_rate_pos%d" % (i + 1), 0.0, 1.0) for i in range(k)]
        # the cumulative per-position rates are AL at k = 1..3 of the same drafts
        for j in range(1, k + 1):
            g["pts"].append((j, 1.0 + sum(pos[:j])))
        g["cites"].append("%s: per-position %s%s" % (
            row["platform"], "/".join(row["accept_rate_pos%d" % (i + 1)] for i in range(k)),
            ", AL %s" % row["mean_acceptance_length"] if row["mean_acceptance_length"] else ""))
    for g in out.values():
        g["source"] = ("%s, CI baselines at k=3 on MT-Bench (80 prompts, temperature 0): %s; "
                       "fitted to the cumulative per-position rates" % (g["repo"], "; ".join(g["cites"])))
    return list(out.values())


def groups_inferencex(d):
    out = {}
    for row in read_csv(os.path.join(d, "inferencex_golden_acceptance_length.csv"),
                        SOURCE_COLS + ("source_actions_run", "model", "thinking_mode",
                                       "num_speculative_tokens", "mean_acceptance_length")):
        meth = "eagle3" if "eagle3" in row["source_path"] else "mtp"
        mode = row["thinking_mode"].replace("_", "-")
        key = (row["model"], mode)
        g = out.setdefault(key, {
            "name": "inferencex-%s-%s-coding-%s" % (meth, slug(row["model"]), mode.replace("thinking", "think")),
            "method": meth, "variant": meth, "target": row["model"],
            "draft": "the model's own MTP layers" if meth == "mtp" else "EAGLE-3 head (not named)",
            "dataset": "speed-bench-coding-" + mode, "family": "inferencex",
            "pts": [], "stated": True, "run": row["source_actions_run"], "repo": cite(row)})
        g["pts"].append((int(num(row, "num_speculative_tokens", 1, SPEC_MAX_K)),
                         num(row, "mean_acceptance_length")))
    for g in out.values():
        g["pts"].sort()
        g["source"] = ("%s (run %s), golden AL on B300 with vLLM, 80 SPEED-Bench coding prompts, "
                       "temperature 1, k=1..8: %s" % (g["repo"], g["run"],
                                                      " ".join("%g" % y for _, y in g["pts"])))
    return list(out.values())


def read_all(shared):
    d = os.path.join(shared, "specdec")
    gs = groups_vllm(d) + groups_inferencex(d) + groups_angelslim(d) + groups_specbench(d)
    names = [g["name"] for g in gs]
    assert len(names) == len(set(names)), "duplicate entry names"
    for g in gs:   # the sizes of struct spec_accept's strings (sim/spec-accept.h)
        assert all(len(g[f].encode()) < 64 for f in ("name", "target", "draft", "dataset")), g["name"]
        assert len(g["method"]) < 16, g["name"]
    return gs


# --- fitting ------------------------------------------------------------------

def shape_fit(g):
    """Whether g's points fix both parameters (two or more values of k)."""
    return len(set(k for k, _ in g["pts"])) >= 2


def priors(gs):
    """The decay a one-figure entry takes: the median decay fitted on the
    entries of its method that fix both parameters; across every method
    where its own has none."""
    by = {}
    for g in gs:
        if shape_fit(g):
            by.setdefault(g["method"], []).append(fit2(g["pts"])[1])
    pooled = median([r for rs in by.values() for r in rs])
    return {m: median(rs) for m, rs in by.items()}, pooled


def fit_entry(g, prior, pooled):
    if shape_fit(g):
        a, r = fit2(g["pts"])
        how = "alpha and decay fitted (least squares, relative AL error)"
    else:
        r = prior.get(g["method"], pooled)
        y = sum(v for _, v in g["pts"]) / len(g["pts"])
        k = g["pts"][0][0]
        a = solve_alpha(r, k, y)
        how = "decay the %s prior %.4f; alpha solved for AL(%d) = %g" % (
            g["method"] if g["method"] in prior else "all-method", r, k, y)
        if a is None:
            a, r = 1.0, solve_decay(k, y)
            how = ("AL(%d) = %g beyond the prior decay's reach: alpha 1, decay solved" % (k, y))
    return round(a, DIGITS), round(r, DIGITS), how


def build(shared):
    gs = read_all(shared)
    prior, pooled = priors(gs)
    entries = []
    for g in gs:
        a, r, how = fit_entry(g, prior, pooled)
        ks = sorted(set(k for k, _ in g["pts"]))
        entries.append({
            "name": g["name"], "method": g["method"], "target": g["target"], "draft": g["draft"],
            "dataset": g["dataset"], "alpha": a, "decay": r,
            "k_ref": ks[-1], "al_ref": round(sum(y for k, y in g["pts"] if k == ks[-1]) /
                                              sum(1 for k, _ in g["pts"] if k == ks[-1]), 4),
            "source": (g["source"] + "; " + how)[:1023]})
    return gs, entries, prior, pooled


def pooled_params(named, fam):
    """The median alpha and decay of the entries named (name -> (alpha,
    decay)), taken in steps so that no one source's many models or
    datasets outweigh another source: each (source, target) pair's
    median over its datasets, then each source's median over its targets,
    then the median over the sources."""
    pairs = {}
    for n, ar in named.items():
        pairs.setdefault(fam[n], []).append(ar)
    srcs = {}
    for (f, _), v in pairs.items():
        srcs.setdefault(f, []).append((median([a for a, _ in v]), median([r for _, r in v])))
    per = [(median([a for a, _ in v]), median([r for _, r in v])) for v in srcs.values()]
    return (median([a for a, _ in per]), median([r for _, r in per])), sorted(srcs), len(pairs)


def method_entries(entries, gs):
    """One entry per method, "<method>-median" (pooled_params over the
    method's entries): what a target or dataset without its own entry
    takes (docs/speculation.md)."""
    fam = {g["name"]: (g["family"], g["target"]) for g in gs}
    out = []
    for m in ("draft", "eagle", "eagle3", "mtp", "medusa", "ngram"):
        named = {e["name"]: (e["alpha"], e["decay"]) for e in entries if e["method"] == m}
        if not named:
            continue
        (a, r), srcs, npairs = pooled_params(named, fam)
        out.append({
            "name": "%s-median" % m, "method": m, "target": "", "draft": "", "dataset": "",
            "alpha": round(a, DIGITS), "decay": round(r, DIGITS),
            "source": ("median alpha and decay of the %s entries above: per (source, target) over "
                       "datasets, per source over its targets, then over the sources (%d pairs; %s); "
                       "bench/acceptance-fit.py; every figure's citation is in those entries"
                       % (m, npairs, ", ".join(srcs)))})
    return out


CATALOG_COMMENT = (
    "Speculative decoding acceptance (sim/spec-accept.h, docs/speculation.md 'Acceptance'). "
    "Draft position i is accepted, given positions 1..i-1 were, with probability alpha x decay^(i-1); "
    "AL(k) = 1 + sum over i <= k of the cumulative products. k_ref and al_ref: the deepest k the source "
    "measured and its AL there (k_ref 8 where the source does not state k). The <method>-median entries "
    "at the end are what a target or dataset without its own entry takes. Generated by "
    "`python3 bench/acceptance-fit.py ../shared/data data/acceptance.json` from ../shared/data/specdec "
    "(PROVENANCE.md); do not edit by hand.")


def write(shared, out):
    _, entries, _, _ = build(shared)
    gs = read_all(shared)
    doc = {"_comment": CATALOG_COMMENT, "acceptance": entries + method_entries(entries, gs)}
    with open(out, "w") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")


# --- validation ---------------------------------------------------------------

def mean_params(fits):
    """The held-out entry's parameters: the medians of the others' (one
    outlying model, the VL model of vLLM's set, does not drag them)."""
    return (median([a for a, _ in fits]), median([r for _, r in fits]))


def summary(errs):
    if not errs:
        return "n/a", "n/a", 0
    mape = 100.0 * sum(abs(e) for e in errs) / len(errs)
    within = 100.0 * sum(1 for e in errs if abs(e) <= 0.10) / len(errs)
    return "%.1f%%" % mape, "%.0f%%" % within, len(errs)


def validate(shared, as_json):
    gs, entries, prior, pooled = build(shared)
    fitted = {e["name"]: (e["alpha"], e["decay"]) for e in entries}
    res = {}

    def rows(kind, pick):
        """For every measured (entry, k): the prediction from the entries
        pick(g) returns (the medians of their catalog parameters); groups with
        no others go uncounted."""
        errs, table = [], []
        for g in gs:
            others = [h for h in gs if h is not g and pick(g, h)]
            if not others:
                continue
            a, r = mean_params([fitted[h["name"]] for h in others])
            for k, y in g["pts"]:
                p = al(a, r, k)
                errs.append(p / y - 1)
                table.append((g["name"], k, y, p, len(others)))
        res[kind] = (errs, table)

    errs, table = [], []
    for g in gs:
        a, r = fitted[g["name"]]
        for k, y in g["pts"]:
            p = al(a, r, k)
            errs.append(p / y - 1)
            table.append((g["name"], k, y, p, 1))
    res["in-sample"] = (errs, table)
    # a dataset held out: the same target, method and source family on its other datasets
    rows("leave-one-dataset-out", lambda g, h: h["family"] == g["family"] and
         h["variant"] == g["variant"] and h["target"] == g["target"] and h["dataset"] != g["dataset"])
    # a model held out: the other targets of its method, same dataset and source family
    rows("leave-one-model-out", lambda g, h: h["family"] == g["family"] and
         h["variant"] == g["variant"] and h["dataset"] == g["dataset"] and h["target"] != g["target"])
    # a source held out: the method's pooled median (its <method>-median
    # entry) over the other sources, for every entry of a method measured
    # by two or more sources (eagle3 only, in this data)
    fam = {g["name"]: (g["family"], g["target"]) for g in gs}
    errs, table = [], []
    for g in gs:
        named = {h["name"]: fitted[h["name"]] for h in gs
                 if h["method"] == g["method"] and h["family"] != g["family"]}
        if not named:
            continue
        (a, r), _, _ = pooled_params(named, fam)
        for k, y in g["pts"]:
            p = al(a, r, k)
            errs.append(p / y - 1)
            table.append((g["name"], k, y, p, len(named)))
    res["leave-one-source-out (method median)"] = (errs, table)
    # AL against k: fit on k <= 3, predict k = 4..8 (InferenceX curves)
    errs, table = [], []
    for g in gs:
        if g["family"] != "inferencex":
            continue
        a, r = fit2([(k, y) for k, y in g["pts"] if k <= 3])
        for k, y in g["pts"]:
            if k >= 4:
                p = al(a, r, k)
                errs.append(p / y - 1)
                table.append((g["name"], k, y, p, 3))
    res["k<=3 -> k=4..8"] = (errs, table)

    if as_json:
        json.dump({kind: {"mape": (100.0 * sum(abs(e) for e in errs) / len(errs)) if errs else None,
                          "within10": (100.0 * sum(1 for e in errs if abs(e) <= 0.10) / len(errs))
                          if errs else None, "rows": len(errs),
                          "table": [{"entry": n, "k": k, "measured": y, "predicted": round(p, 4)}
                                    for n, k, y, p, _ in table]}
                   for kind, (errs, table) in res.items()}, sys.stdout, indent=1)
        print()
        return
    print("decay priors (median over entries with AL at two or more k): " +
          ", ".join("%s %.4f" % kv for kv in sorted(prior.items())) + "; all methods %.4f" % pooled)
    print()
    print("| validation | rows | MAPE | within 10% |")
    print("|---|---|---|---|")
    for kind, (errs, _) in res.items():
        m, w, n = summary(errs)
        print("| %s | %d | %s | %s |" % (kind, n, m, w))
    print()
    print("| validation | source | rows | MAPE | within 10% |")
    print("|---|---|---|---|---|")
    fams = {g["name"]: g["family"] for g in gs}
    for kind, (errs, table) in res.items():
        by = {}
        for (n, _, _, _, _), e in zip(table, errs):
            by.setdefault(fams[n], []).append(e)
        for f, es in by.items():
            m, w, n = summary(es)
            print("| %s | %s | %d | %s | %s |" % (kind, f, n, m, w))
    for kind, (errs, table) in res.items():
        if kind == "in-sample":
            continue
        print()
        print("%s, each entry at its worst k:" % kind)
        print()
        print("| entry | k | measured AL | predicted AL | error |")
        print("|---|---|---|---|---|")
        by = {}
        for n, k, y, p, _ in table:
            by.setdefault(n, []).append((k, y, p))
        for n, lst in by.items():
            k, y, p = max(lst, key=lambda t: abs(t[2] / t[1] - 1))
            ks = "%d" % k if len(lst) == 1 else "%d (of %d)" % (k, len(lst))
            print("| %s | %s | %.2f | %.2f | %+.1f%% |" % (n, ks, y, p, 100 * (p / y - 1)))


def main(argv):
    if len(argv) == 3 and argv[1] == "--validate":
        return validate(argv[2], False) or 0
    if len(argv) == 4 and argv[1] == "--validate" and argv[2] == "--json":
        return validate(argv[3], True) or 0
    if len(argv) == 3 and not argv[1].startswith("-"):
        if not os.path.isdir(os.path.join(argv[1], "specdec")):
            print("acceptance-fit: %s/specdec: no such folder (expected ../shared/data)" % argv[1],
                  file=sys.stderr)
            return 1
        write(argv[1], argv[2])
        return 0
    print("usage: acceptance-fit.py SHARED_DATA OUT.json | --validate [--json] SHARED_DATA",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BadInput as e:
        print("acceptance-fit: %s" % e, file=sys.stderr)
        sys.exit(1)
