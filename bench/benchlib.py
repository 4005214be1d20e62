"""What the standard-library harnesses in bench/ share (acceptance-fit.py,
spec-validate.py, amd-validate.py, lora-validate.py): one error type for bad
input and one CSV reader that names the file and line of every row."""

import argparse
import csv
import json
import os
import subprocess


class BadInput(Exception):
    """One line naming the file, the line and what was expected."""


def read_csv(path, need):
    """The rows of a CSV file as dicts, each with "_where" (file:line);
    every column of need must be in the header.  BadInput otherwise, or when
    the file cannot be read or is not CSV."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rd = csv.DictReader(f)
            missing = [c for c in need if c not in (rd.fieldnames or [])]
            if missing:
                raise BadInput("%s:1: expected columns %s" % (path, ", ".join(missing)))
            rows = []
            for row in rd:
                row["_where"] = "%s:%d" % (path, rd.line_num)
                rows.append(row)
            return rows
    except OSError as e:
        raise BadInput("%s: %s" % (path, e.strerror))
    except (csv.Error, UnicodeDecodeError) as e:
        raise BadInput("%s: %s" % (path, e))


def num(row, col, lo=0.0, hi=1e12, integer=False):
    """row[col] as a number in [lo, hi] (an integer with integer), else
    BadInput naming the row's file and line."""
    try:
        v = float(row[col])
    except (TypeError, ValueError, KeyError):
        v = None
    if v is None or not lo <= v <= hi or (integer and v != int(v)):
        raise BadInput("%s: %s is '%s', expected %s from %g to %g" % (
            row["_where"], col, row.get(col), "an integer" if integer else "a number", lo, hi))
    return int(v) if integer else v


def write_json(path, obj):
    """obj to path as indented JSON with sorted keys."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def harness_parser(prog, description, root, folder, quick_help):
    """The options every validation harness takes: the binary, the shared
    data (holding folder/), --quick, --jobs, --json, --check, --cases."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--servesim", default=os.path.join(root, "build", "servesim"),
                    help="the servesim binary (default build/servesim)")
    ap.add_argument("--shared", default=os.path.join(root, "..", "shared", "data"),
                    help="the folder holding %s/ (default ../shared/data)" % folder)
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    ap.add_argument("--json", metavar="OUT",
                    help="write every row (with --cases: every case) to OUT as JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 when a row misses its band")
    ap.add_argument("--cases", action="store_true", help="print the cases and run nothing")
    return ap


def servesim_json(binary, args):
    """servesim's JSON output of `binary args`; RuntimeError with its last
    error line when it fails."""
    p = subprocess.run([binary] + args, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        err = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        raise RuntimeError(err)
    return json.loads(p.stdout)
