# servesim plan under MPI: `mpirun -n 2` shares the configurations over two
# ranks and gives the same plan.csv as -j 1 (with --mixed-pools too, and
# with probes reused across --max-batch limits), and resumes from its
# database.
# Without MPI compiled in, a plan started by mpirun fails with one line.
# Skipped (77) where mpirun is missing.
. "$(dirname "$0")/cli-lib.sh"

PLAN="plan --num-requests 100 --max-gpus 2 --policies vllm,sarathi --cost-model roofline"

if ! "$BIN" plan --help | grep -q "^MPI: compiled in"; then
	# what `mpirun -n 2` does to a servesim built without MPI: two
	# processes, each told the world has two ranks
	OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$BIN" $PLAN >"$T/out" 2>"$T/err"
	st=$?
	[ "$st" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "built without MPI" "$T/err" &&
		pass "without MPI, a plan under mpirun fails with one line" ||
		fail "without MPI under mpirun: exit $st, $(cat "$T/err")"
	# shellcheck disable=SC2154  # fails: set by cli-lib.sh
	[ "$fails" -eq 0 ] || finish
	echo "skip: servesim was built without MPI"
	exit 77
fi
command -v mpirun >/dev/null || { echo "skip: mpirun not found"; exit 77; }
PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

# OpenMPI's own allocations are not ours to check under LeakSanitizer.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN="mpirun --oversubscribe --allow-run-as-root -n 2"

"$BIN" $PLAN --out "$T/one" --quiet 2>"$T/err" || fail "plan -j 1 failed: $(cat "$T/err")"
if timeout 300 $MPIRUN "$BIN" $PLAN --out "$T/mpi" >"$T/out" 2>"$T/err"; then
	cmp -s "$T/one/plan.csv" "$T/mpi/plan.csv" && pass "mpirun -n 2 gives the same plan.csv as -j 1" ||
		fail "mpirun plan.csv differs: $(diff "$T/one/plan.csv" "$T/mpi/plan.csv" | head -3)"
	[ "$(grep -c "^plan: 6 configurations" "$T/out")" -eq 1 ] && pass "only rank 0 prints" ||
		fail "rank output: $(head -3 "$T/out")"
else
	fail "mpirun plan failed: $(cat "$T/err")"
fi

"$PY" -c "import sqlite3,sys; d=sqlite3.connect(sys.argv[1]); d.execute('delete from plan where rowid % 2 = 1'); d.commit()" "$T/mpi/plan.db"
if timeout 300 $MPIRUN "$BIN" $PLAN --out "$T/mpi" >"$T/out" 2>"$T/err"; then
	grep -q "(3 from the database)" "$T/out" && pass "an MPI plan resumes from its database" ||
		fail "MPI rerun did not resume: $(head -1 "$T/out")"
	cmp -s "$T/one/plan.csv" "$T/mpi/plan.csv" && pass "the resumed MPI plan is the same plan" ||
		fail "resumed MPI plan.csv differs"
else
	fail "mpirun resume failed: $(cat "$T/err")"
fi

# --mixed-pools: every rank enumerates the same mixed configurations
MIXED="plan --num-requests 100 --gpus h100-sxm,a100-80gb-sxm --max-gpus 2 --modes disaggregated --mixed-pools --cost-model roofline"
"$BIN" $MIXED --out "$T/mone" --quiet 2>"$T/err" || fail "mixed plan -j 1 failed: $(cat "$T/err")"
if timeout 300 $MPIRUN "$BIN" $MIXED --out "$T/mmpi" --quiet >"$T/out" 2>"$T/err"; then
	cmp -s "$T/mone/plan.csv" "$T/mmpi/plan.csv" && pass "--mixed-pools: mpirun -n 2 gives the same plan.csv as -j 1" ||
		fail "mixed mpirun plan.csv differs: $(diff "$T/mone/plan.csv" "$T/mmpi/plan.csv" | head -3)"
else
	fail "mixed mpirun plan failed: $(cat "$T/err")"
fi

# --max-batch 16,32,256: the ranks are dealt groups of configurations that
# differ only in their limit, so they copy the probes -j 1 copies
LIM="$PLAN --num-requests 200 --max-batch 16,32,256"
"$BIN" $LIM --out "$T/lone" --quiet --stats 2>"$T/lerr1" || fail "limits plan -j 1 failed: $(cat "$T/lerr1")"
if timeout 300 $MPIRUN "$BIN" $LIM --out "$T/lmpi" --quiet --stats >"$T/out" 2>"$T/lerr2"; then
	cmp -s "$T/lone/plan.csv" "$T/lmpi/plan.csv" && pass "--max-batch 16,32,256: mpirun -n 2 gives the same plan.csv as -j 1" ||
		fail "limits mpirun plan.csv differs: $(diff "$T/lone/plan.csv" "$T/lmpi/plan.csv" | head -3)"
	cmp -s "$T/lerr1" "$T/lerr2" && ! grep -q " 0 reused " "$T/lerr2" &&
		pass "mpirun -n 2 reuses the probes -j 1 does" ||
		fail "mpirun reuse: $(cat "$T/lerr1" "$T/lerr2")"
else
	fail "limits mpirun plan failed: $(cat "$T/lerr2")"
fi

# bad options: rank 0 says so once, every rank exits 2
timeout 120 $MPIRUN "$BIN" plan --tp x >"$T/out" 2>"$T/err"
[ "$(grep -c "^servesim: --tp" "$T/err")" -eq 1 ] && pass "a bad option under mpirun is reported once" ||
	fail "bad option under mpirun: $(cat "$T/err" | head -3)"
timeout 120 $MPIRUN "$BIN" $PLAN -j 2 >"$T/out" 2>"$T/err"
grep -q "^servesim: -j 2 under mpirun" "$T/err" && pass "-j with mpirun is refused" ||
	fail "-j under mpirun: $(head -3 "$T/err")"
# --rate: the bisection on the instance count goes in rounds, every rank
# taking part in each; the result is -j 1's
RATE="plan --arrival poisson:rate=4 --lengths fixed:prompt=512,output=128 --num-requests 100 --modes colocated,disaggregated --max-gpus 6 --gpus h100-sxm --rate 30"
if "$BIN" $RATE --out "$T/r1" --quiet 2>"$T/err" &&
	timeout 300 $MPIRUN "$BIN" $RATE --out "$T/rm" >"$T/out" 2>>"$T/err"; then
	cmp -s "$T/r1/plan.csv" "$T/rm/plan.csv" && grep -q ',skipped,' "$T/rm/plan.csv" &&
		pass "--rate: mpirun -n 2 bisects as -j 1 does" ||
		fail "--rate mpirun plan.csv differs: $(diff "$T/r1/plan.csv" "$T/rm/plan.csv" | head -3)"
else
	fail "--rate mpirun plan failed: $(cat "$T/err")"
fi

finish
