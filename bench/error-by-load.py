#!/usr/bin/env python3
"""Signed error of servesim's predictions against load, from `servesim
calibrate fit-engine --json` reports (docs/validation.md, "Load dynamics
(issue 31 §3)"): one row per load, one column per report, each cell the
mean signed error (simulated / measured - 1) and the MAPE of the runs at
that load.

The load of a run is its closed-loop client count (`c128` in a silicon
row's name) or its open-loop rate (`..._output_1.34.csv`, llm-d's file
names).  --field held_out reads each run's held-out prediction (a fit made
without its group) instead of the fitted one; runs without one keep the
fitted figure.

usage: error-by-load.py [--field fitted|held_out] NAME=REPORT.json ...
"""
import collections
import json
import re
import statistics
import sys


def load_of(run):
    m = re.search(r' c(\d+) ', run['run'])
    if m:
        return int(m.group(1))
    m = re.search(r'output_([0-9.]+)\.csv', run.get('group') or run['run'])
    return float(m.group(1)) if m else run['run']


def main(argv):
    field = 'fitted'
    if len(argv) > 1 and argv[0] == '--field':
        field, argv = argv[1], argv[2:]
    if not argv or field not in ('fitted', 'held_out'):
        sys.exit(__doc__.strip().splitlines()[-1])
    reps = []
    for a in argv:
        name, _, path = a.partition('=')
        with open(path, encoding='utf-8') as f:
            reps.append((name, json.load(f)))
    metrics = []
    for _, d in reps:
        for r in d['runs']:
            if r['metric'] not in metrics:
                metrics.append(r['metric'])
    for metric in metrics:
        rows = collections.defaultdict(lambda: collections.defaultdict(list))
        for name, d in reps:
            for r in d['runs']:
                if r['metric'] != metric:
                    continue
                v = r.get(field)
                if v is None:
                    v = r['fitted']
                rows[load_of(r)][name].append(v / r['measured'] - 1)
        print(f"\n{metric} ({field}), mean signed error / MAPE (runs)\n")
        print("| load | " + " | ".join(n for n, _ in reps) + " |")
        print("|---|" + "---|" * len(reps))
        for load in sorted(rows, key=lambda x: (isinstance(x, str), x)):
            cells = []
            for name, _ in reps:
                e = rows[load].get(name)
                cells.append(f"{100 * statistics.mean(e):+.1f}% / "
                             f"{100 * statistics.mean(abs(x) for x in e):.1f}% ({len(e)})"
                             if e else "-")
            print(f"| {load} | " + " | ".join(cells) + " |")


if __name__ == '__main__':
    main(sys.argv[1:])
