#!/usr/bin/env python3
"""servesim — the shape of the code, as issue 30's review measured it.

    python3 scripts/code-shape.py [ROOT]

Prints: lines of the engine's units; the fields of struct engine and struct
instance and the functions declared in sim/engine-int.h; the test files that
include engine-int.h; and, over library and CLI code (sim, policies,
traces, analysis, calibrate, cli, common, kernels), the functions longer
than 100 lines and the deepest nesting.  A function is a definition that
starts at column 0 and whose body's braces close at column 0 (the kernel
style the code follows); its length counts the lines from its name to its
closing brace, and its depth is the deepest brace level inside the body
(the body itself is depth 0).
"""
import glob
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
DIRS = ["sim", "policies", "traces", "analysis", "calibrate", "cli", "common", "kernels"]


def strip(text):
    """Comments, strings and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, lines, depth) of each function defined in path."""
    lines = strip(open(path, encoding="utf-8", errors="replace").read()).split("\n")
    res, i = [], 0
    while i < len(lines):
        if lines[i] == "{" and i > 0:
            # the signature: back to the line holding the name and '('
            k = i - 1
            while k > 0 and "(" not in lines[k]:
                k -= 1
            m = re.search(r"([A-Za-z_]\w*)\s*\(", lines[k])
            depth = maxd = 0
            j = i
            while j < len(lines):
                for ch in lines[j]:
                    if ch == "{":
                        depth += 1
                        maxd = max(maxd, depth)
                    elif ch == "}":
                        depth -= 1
                if depth == 0:
                    break
                j += 1
            if m:
                res.append((m.group(1), k + 1, j - k + 1, maxd - 1))
            i = j + 1
        else:
            i += 1
    return res


def struct_fields(text, name):
    """Declarations (fields, counting 'int a, b;' as two) in struct name."""
    m = re.search(r"\nstruct %s \{\n" % name, text)
    if not m:
        return 0
    depth, i, body = 1, m.end(), []
    while depth and i < len(text):
        c = text[i]
        depth += c == "{"
        depth -= c == "}"
        body.append(c if depth == 1 or c in "{}" else " " if c != ";" else ";")
        i += 1
    body = "".join(body)
    # nested struct/union bodies collapse to one field each
    body = re.sub(r"\{[^{}]*\}", "{}", body)
    count = 0
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl or decl == "}":
            continue
        # commas outside brackets separate declarators
        count += 1 + len(re.findall(r",(?![^(]*\))", re.sub(r"\{\}", "", decl)))
    return count


def main():
    os.chdir(ROOT)
    print("engine units (lines):")
    total = 0
    for f in sorted(glob.glob("sim/engine*.[ch]") + glob.glob("sim/waitq*.[ch]") +
                    glob.glob("sim/kvm*.[ch]") + glob.glob("sim/step*.[ch]") +
                    glob.glob("sim/steady*.[ch]")):
        n = sum(1 for _ in open(f))
        total += n
        print("  %-28s %5d" % (f, n))
    print("  %-28s %5d" % ("total", total))
    if os.path.exists("sim/engine-int.h"):
        text = strip(open("sim/engine-int.h").read())
        decls = re.findall(r"^[a-z].*\b(\w+)\s*\([^;{]*\)\s*(?:__attribute__\(\(.*\)\))?\s*[;{]",
                           text, re.M)
        print("sim/engine-int.h: struct engine %d fields, struct instance %d fields, %d functions"
              % (struct_fields(text, "engine"), struct_fields(text, "instance"), len(decls)))
    tests = [f for f in sorted(glob.glob("tests/*.c"))
             if re.search(r'#include\s+"engine-int\.h"', open(f).read())]
    print("tests including engine-int.h: %d %s" % (len(tests), " ".join(tests)))
    longs, deepest = [], []
    for d in DIRS:
        for f in sorted(glob.glob(d + "/**/*.c", recursive=True)):
            for name, line, n, depth in functions(f):
                if n > 100:
                    longs.append((n, f, line, name, depth))
                deepest.append((depth, f, line, name, n))
    longs.sort(reverse=True)
    print("functions over 100 lines: %d" % len(longs))
    for n, f, line, name, depth in longs[:15]:
        print("  %5d lines, depth %d  %s:%d %s" % (n, depth, f, line, name))
    deepest.sort(reverse=True)
    print("deepest nesting:")
    for depth, f, line, name, n in deepest[:5]:
        print("  depth %d  %s:%d %s (%d lines)" % (depth, f, line, name, n))


if __name__ == "__main__":
    main()
