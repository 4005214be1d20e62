#!/bin/sh
# servesim bench: loading a large user catalog (issue 34 §5, "catalog
# loading is quadratic").  Writes engine files of N entries (each a new
# profile, the last one used) and times `servesim run --engine-catalog`
# of 10 requests, best of 3 wall-clock seconds.  Prints one line per N.
#
#   sh bench/bench-catalog.sh build/servesim [N...]
set -eu
BIN=${1:?usage: bench-catalog.sh SERVESIM [N...]}
shift
[ $# -gt 0 ] || set -- 10000 30000 100000
exec python3 - "$BIN" "$@" <<'PYEOF'
import json, subprocess, sys, tempfile, time

bin_ = sys.argv[1]
with tempfile.TemporaryDirectory() as d:
    for n in map(int, sys.argv[2:]):
        path = d + "/e.json"
        json.dump({"engines": [{"name": "e%d" % i, "versions": "bench", "source": "bench",
                                "sched_us": 10} for i in range(n)]}, open(path, "w"))
        best = None
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run([bin_, "run", "--engine-catalog", path, "--engine", "e%d" % (n - 1),
                            "--num-requests", "10", "--quiet"], check=True)
            t = time.perf_counter() - t
            best = t if best is None or t < best else best
        print("catalog: %d engine entries loaded and run in %.3f s (best of 3)" % (n, best))
PYEOF
