# servesim sweep end to end: a small grid writes sweep.csv and sweep.db
# with one row per point (and per run), its means are those of `servesim
# run` at each seed; -j 2 gives the same sweep.csv as -j 1, byte for byte;
# a sweep whose database lost rows, or that was killed, resumes and gives
# the same sweep.csv; a rerun with another grid is refused; seeds that change
# nothing give intervals of zero width; bad keys and values fail with one
# line, exit 2.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

# 50 requests drawn from the seed (Poisson arrivals, lognormal lengths), so
# that seeds differ
W="--num-requests 50 --arrival poisson:rate=5 --lengths lognormal:prompt_mean=400,prompt_cv=0.5,output_mean=80,output_cv=0.5"
GRID="--sweep policy=vllm,sarathi --sweep rate-scale=1:2:0.5 --seeds 3"

# ---- a sweep and its outputs -------------------------------------------------
if "$BIN" sweep $GRID $W --out "$T/a" >"$T/a.out" 2>"$T/a.err"; then
	pass "a 2 x 3 x 3 sweep ran"
else
	fail "sweep failed: $(cat "$T/a.err")"
fi
[ -s "$T/a/sweep.csv" ] && [ -s "$T/a/sweep.db" ] && pass "--out wrote sweep.csv and sweep.db" ||
	fail "--out: $(ls "$T/a")"
[ "$(grep -c '^sweep: point' "$T/a.err")" -eq 6 ] && pass "one progress line per point" ||
	fail "progress: $(cat "$T/a.err")"
grep -q "policy *rate-scale *seeds *ttft_p99_ms" "$T/a.out" && grep -q "±" "$T/a.out" &&
	pass "the table names the keys, with intervals" || fail "table: $(cat "$T/a.out")"
"$BIN" sweep $GRID $W --json -q >"$T/a.json" 2>"$T/a.jerr" && [ ! -s "$T/a.jerr" ] ||
	fail "--json -q: $(cat "$T/a.jerr")"
# the point (vllm, 1.5) at seeds 0, 1, 2 as `servesim run` gives them
for s in 0 1 2; do
	"$BIN" run --policy vllm --rate-scale 1.5 --seed $s $W --json >"$T/run$s.json" ||
		fail "run --seed $s"
done
if "$PY" - "$T" <<'EOF'
import csv, json, math, sqlite3, sys
t = sys.argv[1]
rows = list(csv.DictReader(open(t + "/a/sweep.csv")))
assert len(rows) == 6, len(rows)
assert [(r["policy"], r["rate-scale"]) for r in rows] == [
    ("vllm", "1"), ("vllm", "1.5"), ("vllm", "2"),
    ("sarathi", "1"), ("sarathi", "1.5"), ("sarathi", "2")], rows
assert all(r["seeds"] == "3" for r in rows)
runs = [json.load(open("%s/run%d.json" % (t, s))) for s in range(3)]
x = [r["ttft_ms"]["p99"] for r in runs]
g = [r["goodput_rps"] for r in runs]
mean = sum(x) / 3
sd = math.sqrt(sum((v - mean) ** 2 for v in x) / 2)
ci = 4.302652729911275 * sd / math.sqrt(3)     # t(0.975, 2)
r = rows[1]
assert abs(float(r["ttft_p99_ms_mean"]) - mean) < 1e-6 * mean, (r["ttft_p99_ms_mean"], mean)
assert abs(float(r["ttft_p99_ms_ci95"]) - ci) < 1e-6 * max(ci, 1e-9), (r["ttft_p99_ms_ci95"], ci)
assert abs(float(r["goodput_rps_mean"]) - sum(g) / 3) < 1e-6, (r["goodput_rps_mean"], g)
assert float(r["ttft_p99_ms_ci95"]) > 0
j = json.load(open(t + "/a.json"))
assert len(j["points"]) == 6 and j["seeds"] == 3
p = j["points"][1]
assert p["keys"] == {"policy": "vllm", "rate-scale": "1.5"}, p["keys"]
assert abs(p["metrics"]["ttft_p99_ms"]["mean"] - mean) < 1e-6 * mean
db = sqlite3.connect(t + "/a/sweep.db")
assert db.execute("select count(*) from runs").fetchone()[0] == 18
assert db.execute("select count(*) from aggregates").fetchone()[0] == 6
v = db.execute("select ttft_p99_ms from runs_by_point where policy = 'vllm'"
               " and rate_scale = 1.5 order by seed").fetchall()
# summary.json keeps 10 significant digits
assert all(abs(a[0] - b) < 1e-9 * b for a, b in zip(v, x)), (v, x)
EOF
then
	pass "sweep.csv, --json and sweep.db hold the means and intervals of servesim run's figures"
else
	fail "the outputs disagree with servesim run"
fi

# ---- -j 2 = -j 1 -------------------------------------------------------------
"$BIN" sweep $GRID $W -j 2 -q --out "$T/b" 2>"$T/b.err" || fail "-j 2: $(cat "$T/b.err")"
cmp -s "$T/a/sweep.csv" "$T/b/sweep.csv" && pass "-j 2 gives -j 1's sweep.csv byte for byte" ||
	fail "-j 2 differs: $(diff "$T/a/sweep.csv" "$T/b/sweep.csv" | head -3)"

# ---- resume --------------------------------------------------------------------
"$PY" -c "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); d.execute('delete from runs where point in (1, 4) or seed = 2'); d.commit()" "$T/b/sweep.db"
"$BIN" sweep $GRID $W -j 2 --out "$T/b" >/dev/null 2>"$T/b.err" || fail "resume: $(cat "$T/b.err")"
grep -q "8 of 18 runs already in" "$T/b.err" && pass "a rerun runs only the 10 missing runs" ||
	fail "resume: $(head -1 "$T/b.err")"
cmp -s "$T/a/sweep.csv" "$T/b/sweep.csv" && pass "the resumed sweep.csv is the uninterrupted one" ||
	fail "resumed sweep.csv differs"

# a tampered sweep.db whose metric is text: refused, not aggregated as 0
# (issue 34 §5); likewise a point that is not an integer
cp -r "$T/b" "$T/tx"
"$PY" -c "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); d.execute(\"update runs set ttft_p99_ms = 'abc' where point = 1 and seed = 1\"); d.commit()" "$T/tx/sweep.db"
expect_error 1 "sweep.db: runs: point 1, seed 1: ttft_p99_ms is 'abc', expected a number or NULL" -- sweep $GRID $W --out "$T/tx"
cp "$T/b/sweep.db" "$T/tx/sweep.db"
"$PY" -c "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); d.execute(\"update runs set point = 'one' where point = 1 and seed = 1\"); d.commit()" "$T/tx/sweep.db"
expect_error 1 "sweep.db: runs: point 'one', seed '1': expected integers" -- sweep $GRID $W --out "$T/tx"

# a changed grid, or changed run options, over the same --out: refused
expect_error 2 "sweep.db: holds a sweep of other options" -- sweep $GRID $W --sweep tp=1,2 --out "$T/b"
expect_error 2 "sweep.db: holds a sweep of other options" -- sweep $GRID $W --gpu h200-sxm --out "$T/b"
# the run options in another order are the same sweep
"$BIN" sweep $GRID --arrival poisson:rate=5 --num-requests 50 \
	--lengths lognormal:prompt_mean=400,prompt_cv=0.5,output_mean=80,output_cv=0.5 \
	-q --out "$T/b" 2>"$T/b.err" && pass "options in another order resume the same sweep" ||
	fail "reordered options: $(cat "$T/b.err")"

# sweep.db is data: a trigger on its runs table that never returns (once it
# hung the rerun for ever) is stopped by the instruction budget, one line
"$BIN" sweep --sweep policy=vllm,sarathi --seeds 2 $W -q --out "$T/h" 2>"$T/h.err" || fail "sweep: $(cat "$T/h.err")"
"$PY" -c "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); d.execute('delete from runs where seed = 1'); d.execute('create trigger forever after insert on runs begin select count(*) from (with recursive c(x) as (select 1 union all select x + 1 from c) select x from c); end'); d.commit()" "$T/h/sweep.db"
expect_error 1 "h/sweep.db: insert runs: gave up after [0-9]+ million SQLite instructions .*expected a sweep database" -- \
	sweep --sweep policy=vllm,sarathi --seeds 2 $W -q --out "$T/h"

# ---- killed mid-way, then resumed ---------------------------------------------
# 5 points x 2 seeds of 50,000 requests (about 0.15 s each); SIGTERM once the
# first run is committed
K="--sweep rate-scale=1:2:0.25 --seeds 2 --arrival poisson:rate=20 --lengths fixed:prompt=200,output=50 --num-requests 50000"
"$BIN" sweep $K -q --out "$T/ref" 2>"$T/ref.err" || fail "reference sweep: $(cat "$T/ref.err")"
env --default-signal=INT,TERM true 2>/dev/null && DEF="env --default-signal=INT,TERM" || DEF=
for j in 1 2; do
	$DEF "$BIN" sweep $K -j $j --out "$T/k$j" >/dev/null 2>"$T/k$j.err" &
	pid=$!
	n=0
	while [ $n -lt 400 ]; do
		c=$("$PY" -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from runs').fetchone()[0])" "$T/k$j/sweep.db" 2>/dev/null)
		[ "${c:-0}" -ge 1 ] && break
		sleep 0.05
		n=$((n + 1))
	done
	kill -TERM $pid 2>/dev/null
	wait $pid
	rc=$?
	if [ $rc -eq 143 ]; then
		grep -q "interrupted by SIGTERM after .* of 10 runs; the finished ones are in" "$T/k$j.err" &&
			[ ! -e "$T/k$j/sweep.csv" ] &&
			pass "-j $j: SIGTERM stops the sweep (exit 143), no sweep.csv" ||
			fail "-j $j SIGTERM: $(cat "$T/k$j.err"); $(ls "$T/k$j")"
	elif [ $rc -eq 0 ]; then
		echo "note: -j $j: the sweep finished before the signal (a fast machine)"
	else
		fail "-j $j: SIGTERM gave exit $rc: $(cat "$T/k$j.err")"
	fi
	"$BIN" sweep $K -j $j -q --out "$T/k$j" 2>"$T/k$j.err" || fail "-j $j resume: $(cat "$T/k$j.err")"
	cmp -s "$T/ref/sweep.csv" "$T/k$j/sweep.csv" &&
		pass "-j $j: killed and resumed, the same sweep.csv as uninterrupted" ||
		fail "-j $j: the resumed sweep.csv differs"
done

# ---- seeds that change nothing ---------------------------------------------------
# the shipped trace replayed as recorded with kernels only (--engine none:
# no serving-stack draws, docs/engines.md): no randomness, every interval 0
"$BIN" sweep --sweep policy=vllm,orca --seeds 3 --num-requests 50 --engine none --out "$T/z" >/dev/null 2>"$T/z.err" ||
	fail "trace sweep: $(cat "$T/z.err")"
if "$PY" - "$T/z/sweep.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 2
for r in rows:
    for k, v in r.items():
        if k.endswith("_ci95") and v != "":
            assert float(v) == 0, (k, v)
    assert r["ttft_p99_ms_ci95"] == "0", r
EOF
then
	pass "identical seeds give intervals of zero width"
else
	fail "identical seeds: nonzero intervals"
fi
grep -q "note: every seed gave the same figures" "$T/z.err" && pass "and a note says the seeds changed nothing" ||
	fail "no note: $(cat "$T/z.err")"

# ---- bad command lines: one line, exit 2, before anything runs --------------------
expect_error 2 "--sweep polcy: expected a .servesim run. option" -- sweep --sweep polcy=vllm $W
expect_error 2 "policy=sarathii: --policy: unknown batch policy 'sarathii'" -- sweep --sweep policy=vllm,sarathii $W
expect_error 2 "rate-scale=abc: --rate-scale: expected a factor" -- sweep --sweep rate-scale=1,abc $W
expect_error 2 "gpu=h1000: unknown GPU 'h1000'" -- sweep --sweep gpu=h100-sxm,h1000 $W
expect_error 2 "--sweep kv-overlap: a flag; expected on and off, got 'yes'" -- sweep --sweep kv-overlap=on,yes $W
expect_error 2 "--sweep tp: given twice" -- sweep --sweep tp=1 --sweep tp=2 $W
expect_error 2 "--sweep policy: also given as --policy" -- sweep --sweep policy=vllm --policy orca $W
expect_error 2 "--sweep rate-scale: expected START:STOP:STEP" -- sweep --sweep rate-scale=1:2:0 $W
expect_error 2 "--sweep tp: value '1' given twice" -- sweep --sweep tp=1,2,1 $W
expect_error 2 "--seeds: expected an integer in 1..10000" -- sweep --seeds 0 $W
expect_error 2 "-j: expected an integer in 1..1024" -- sweep -j 0 $W
expect_error 2 "unknown option '--polcy'" -- sweep --polcy vllm $W
expect_error 2 "--sweep chunk: expected integers in 1..16777216, got '0'" -- sweep --sweep chunk=0 --policy vllm $W
expect_error 2 "--sweep seed: the seeds are --seed S --seeds N" -- sweep --sweep seed=1,2 $W
expect_error 2 "--keep-runs: expected --out DIR" -- sweep --keep-runs $W
# sweep's options come from the one option table: the message names the
# option as spelt; a run option's value is handed through, even one that
# reads like an option
expect_error 2 "^servesim: --jobs: expected an integer in 1..1024, got '0'" -- sweep --jobs=0 $W
expect_error 2 "^servesim: --seed: expected a non-negative integer" -- sweep --seed 9223372036854775807 $W
# 17 axes: the printed options are meant to split into words
# shellcheck disable=SC2046
expect_error 2 "^servesim: --sweep: at most 16 axes" -- sweep $(for k in $(seq 17); do printf -- '--sweep tp=%s ' "$k"; done) $W
expect_error 2 "^servesim: policy=vllm: --slo: unknown parameter '-5'" -- sweep --sweep policy=vllm --slo -5 $W
expect_error 1 "cannot open trace" -- sweep --sweep policy=vllm --trace "$T/nonexistent.csv"
# a typo in the last of 200 points fails at once, before the first run
expect_error 2 "rate-scale=x" -- sweep --sweep "rate-scale=$(seq -s, 1 199),x" $W --out "$T/typo"
[ ! -e "$T/typo/sweep.db" ] && pass "nothing was run or written" || fail "the typo sweep wrote $(ls "$T/typo")"

# chunk and max-batch set the policy's own parameters (replacing the spec's)
"$BIN" sweep --sweep chunk=256,2048 --sweep max-batch=16 --policy sarathi:token_budget=999,max_num_seqs=3 \
	$W --out "$T/ch" -q 2>"$T/ch.err" || fail "chunk sweep: $(cat "$T/ch.err")"
"$BIN" run --policy sarathi:token_budget=2048,max_num_seqs=16 $W --json >"$T/ch.json" || fail "run sarathi"
if "$PY" - "$T" <<'EOF'
import csv, json, sys
t = sys.argv[1]
rows = list(csv.DictReader(open(t + "/ch/sweep.csv")))
assert [(r["chunk"], r["max-batch"]) for r in rows] == [("256", "16"), ("2048", "16")], rows
run = json.load(open(t + "/ch.json"))
assert abs(float(rows[1]["tpot_p99_ms_mean"]) - run["tpot_ms"]["p99"]) < 1e-6 * run["tpot_ms"]["p99"]
assert rows[0]["tpot_p99_ms_mean"] != rows[1]["tpot_p99_ms_mean"]
EOF
then
	pass "--sweep chunk/max-batch run sarathi:token_budget=C,max_num_seqs=B"
else
	fail "chunk/max-batch sweep disagrees with run"
fi
expect_error 2 "--sweep chunk: expected --policy or --sweep policy" -- sweep --sweep chunk=256 $W
expect_error 2 "chunk=256: --sweep chunk: policy 'orca' has no token budget" -- sweep --sweep chunk=256 --policy orca $W

# --keep-runs writes each run's own directory
"$BIN" sweep --sweep policy=vllm,orca $W -q --keep-runs --out "$T/kr" 2>"$T/kr.err" || fail "--keep-runs: $(cat "$T/kr.err")"
[ -s "$T/kr/runs/p0-s0/summary.json" ] && [ -s "$T/kr/runs/p1-s0/summary.json" ] &&
	pass "--keep-runs wrote runs/p0-s0 and runs/p1-s0" || fail "--keep-runs: $(ls -R "$T/kr" | head)"

# ---- MPI ranks (where MPI is built in and mpirun is there) -------------------------
if "$BIN" plan --help | grep -q "^MPI: compiled in" && command -v mpirun >/dev/null; then
	MPIRUN="mpirun --oversubscribe --allow-run-as-root -n 2"
	if ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 $MPIRUN \
		"$BIN" sweep $GRID $W --out "$T/mpi" >"$T/mpi.out" 2>"$T/mpi.err"; then
		cmp -s "$T/a/sweep.csv" "$T/mpi/sweep.csv" &&
			pass "mpirun -n 2 gives -j 1's sweep.csv byte for byte" ||
			fail "mpirun sweep.csv differs: $(diff "$T/a/sweep.csv" "$T/mpi/sweep.csv" | head -3)"
		[ "$(grep -c "^sweep: 6 points" "$T/mpi.out")" -eq 1 ] && pass "only rank 0 prints" ||
			fail "rank output: $(head -3 "$T/mpi.out")"
	else
		fail "mpirun sweep failed: $(cat "$T/mpi.err")"
	fi
	"$PY" -c "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); d.execute('delete from runs where seed = 1'); d.commit()" "$T/mpi/sweep.db"
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 $MPIRUN \
		"$BIN" sweep $GRID $W -q --out "$T/mpi" 2>"$T/mpi.err" || fail "mpirun resume: $(cat "$T/mpi.err")"
	cmp -s "$T/a/sweep.csv" "$T/mpi/sweep.csv" && pass "a resumed MPI sweep gives the same sweep.csv" ||
		fail "resumed MPI sweep.csv differs"
else
	echo "note: MPI not built in or mpirun missing: the MPI part is skipped"
fi

# standard input can be read once; a sweep reads its trace for every point
expect_error 2 "^servesim: --trace -: a sweep reads its trace once for every point" -- sweep --trace - --sweep rate-scale=1,2
finish
