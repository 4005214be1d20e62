# CUDA and MPI are loadable modules (servesim-cuda.so, servesim-mpi.so),
# loaded only by a run that needs them: the servesim binary and the
# test programs (test-cuda-shapes too: it loads the module) link neither, a simulation maps neither even where
# both modules are built, and without the modules a simulation still runs
# while asking for the cuda backend is one clear line.  Skipped (77) where
# neither module is built (nothing to load) after the link checks.
. "$(dirname "$0")/cli-lib.sh"

command -v readelf >/dev/null || { echo "skip: readelf not found"; exit 77; }
BUILD=$(dirname "$BIN")
MODS=${SERVESIM_MODULE_DIR:-$BUILD}
CUDA_MOD="$MODS/servesim-cuda.so"
MPI_MOD="$MODS/servesim-mpi.so"
HEAVY='lib(cudart|cublas|cublasLt|cuda|nvidia-ml|mpi|open-pal|open-rte|pmix)\.so'

# 1. direct NEEDED entries of the binary and of the test programs, and what
# the dynamic loader maps for them (ldd's transitive list)
for exe in "$BIN" "$BUILD"/tests/test-*; do
	[ -f "$exe" ] && [ -x "$exe" ] || continue
	n=$(readelf -d "$exe" | grep NEEDED | grep -E -c "$HEAVY")
	[ "$n" -eq 0 ] && pass "$(basename "$exe"): no CUDA or MPI library in NEEDED" ||
		fail "$(basename "$exe") links: $(readelf -d "$exe" | grep NEEDED | grep -E "$HEAVY" | tr -s ' ')"
done
if command -v ldd >/dev/null; then
	ldd "$BIN" | grep -E -q "$HEAVY" && fail "servesim maps: $(ldd "$BIN" | grep -E "$HEAVY" | tr -s ' \t' ' ')" ||
		pass "ldd servesim: no CUDA or MPI library, directly or transitively"
fi

[ -e "$CUDA_MOD" ] || [ -e "$MPI_MOD" ] || {
	[ "$fails" -eq 0 ] || finish
	echo "skip: neither servesim-cuda.so nor servesim-mpi.so is built"
	exit 77
}

# 2. with the modules next to the binary, a simulation loads neither
# (LD_DEBUG=libs names every library the loader opens, dlopen included)
RUN="run --num-requests 200 --rate-scale 2 --quiet --json"
LD_DEBUG=libs "$BIN" $RUN >"$T/sum-with.json" 2>"$T/ld" || fail "run failed: $(grep -v '^ *[0-9]*:' "$T/ld")"
grep -E -q "servesim-(cuda|mpi)|$HEAVY" "$T/ld" &&
	fail "a simulation loaded: $(grep -E -o "[^ ]*(servesim-(cuda|mpi)|$HEAVY)[^ ]*" "$T/ld" | sort -u | tr '\n' ' ')" ||
	pass "servesim run maps no module and no CUDA or MPI library"

# ... and neither does a plan started without mpirun
LD_DEBUG=libs "$BIN" plan --num-requests 50 --max-gpus 1 --policies vllm --cost-model roofline \
	--quiet --out "$T/plan" >/dev/null 2>"$T/ld" || fail "plan failed: $(grep -v '^ *[0-9]*:' "$T/ld")"
grep -E -q "servesim-(cuda|mpi)|$HEAVY" "$T/ld" &&
	fail "a plan without mpirun loaded: $(grep -E -o "[^ ]*(servesim-(cuda|mpi)|$HEAVY)[^ ]*" "$T/ld" | sort -u | tr '\n' ' ')" ||
	pass "servesim plan without mpirun maps no module and no CUDA or MPI library"

# 3. the binary alone, in a directory without the modules: the run works
# and gives the same summary; live --backend cuda says what is missing
mkdir "$T/bin"
cp "$BIN" "$T/bin/servesim"
"$T/bin/servesim" $RUN >"$T/sum-alone.json" 2>"$T/err" || fail "run without the modules failed: $(cat "$T/err")"
cmp -s "$T/sum-with.json" "$T/sum-alone.json" && pass "servesim run without the modules: same summary" ||
	fail "summary differs without the modules"
if [ ! -e "${SERVESIM_INSTALLED_MODULE_DIR:-/nonexistent}/servesim-cuda.so" ]; then
	saved=$BIN
	BIN="$T/bin/servesim"
	expect_error 1 'servesim-cuda\.so' -- live --backend cuda --num-requests 2
	expect_error 1 'servesim-cuda\.so' -- calibrate run --backend cuda --device h100-sxm --store "$T/cal.db"
	BIN=$saved
fi

# 4. with the module: live --backend cuda loads it (and its CUDA libraries)
# and, on a machine without a GPU, fails with CUDA's own reason
if [ -e "$CUDA_MOD" ]; then
	LD_DEBUG=libs "$BIN" live --backend cuda --num-requests 2 >"$T/out" 2>"$T/ld"
	st=$?
	grep -q "servesim-cuda.so" "$T/ld" && grep -E -q 'libcudart' "$T/ld" &&
		pass "live --backend cuda loads servesim-cuda.so and the CUDA runtime (exit $st)" ||
		fail "live --backend cuda did not load the module: $(grep -v '^ *[0-9]*:' "$T/ld" | head -3)"
	LD_DEBUG=libs "$BIN" calibrate run --backend cuda --device h100-sxm --store "$T/cal.db" \
		--max-tokens 16 --max-kv 16 --repeats 1 --warmup 0 >"$T/out" 2>"$T/ld"
	grep -q "servesim-cuda.so" "$T/ld" && pass "calibrate run --backend cuda loads servesim-cuda.so" ||
		fail "calibrate run --backend cuda did not load the module"
	if [ "$st" -ne 0 ]; then
		"$BIN" live --backend cuda --num-requests 2 >"$T/out" 2>"$T/err"
		[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "cuda" "$T/err" &&
			pass "without a GPU: one line: $(cat "$T/err")" || fail "live --backend cuda: $(cat "$T/err")"
	fi
fi
finish
