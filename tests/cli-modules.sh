# The CPU and CUDA kernel backends and MPI are loadable modules
# (servesim-cpu.so, servesim-cuda.so, servesim-mpi.so), loaded only by a run
# that needs them: the servesim binary and the test programs (test-kernels
# and test-cuda-shapes too: they load the modules) link none of OpenBLAS,
# OpenMP, CUDA or MPI, a simulation maps none of them even where every
# module is built, a live run and a calibration on the cpu backend load
# servesim-cpu.so and work, and without the modules a simulation still runs
# while asking for the cpu or cuda backend is one clear line.
. "$(dirname "$0")/cli-lib.sh"

command -v readelf >/dev/null || { echo "skip: readelf not found"; exit 77; }
# What this test inspects (the libraries a process maps, a binary copied
# away from its modules) is the dynamic loader's work, which memcheck
# replaces; under `--setup valgrindcli` BIN is the memcheck wrapper.
[ -z "$VG" ] || { echo "skip: the loader's behaviour is not observable under valgrind"; exit 77; }
BUILD=$(dirname "$BIN")
MODS=${SERVESIM_MODULE_DIR:-$BUILD}
CPU_MOD="$MODS/servesim-cpu.so"
CUDA_MOD="$MODS/servesim-cuda.so"
# the CPU backend's libraries (OpenBLAS and what it pulls in, OpenMP's
# runtime), then CUDA's and MPI's
HEAVY='lib(openblas|gfortran|quadmath|gomp|cudart|cublas|cublasLt|cuda|nvidia-ml|mpi|open-pal|open-rte|pmix)\.so'

# 1. direct NEEDED entries of the binary and of the test programs, and what
# the dynamic loader maps for them (ldd's transitive list)
for exe in "$BIN" "$BUILD"/tests/test-*; do
	[ -f "$exe" ] && [ -x "$exe" ] || continue
	n=$(readelf -d "$exe" | grep NEEDED | grep -E -c "$HEAVY")
	[ "$n" -eq 0 ] && pass "$(basename "$exe"): no OpenBLAS, OpenMP, CUDA or MPI library in NEEDED" ||
		fail "$(basename "$exe") links: $(readelf -d "$exe" | grep NEEDED | grep -E "$HEAVY" | tr -s ' ')"
done
if command -v ldd >/dev/null; then
	ldd "$BIN" | grep -E -q "$HEAVY" && fail "servesim maps: $(ldd "$BIN" | grep -E "$HEAVY" | tr -s ' \t' ' ')" ||
		pass "ldd servesim: no OpenBLAS, OpenMP, CUDA or MPI library, directly or transitively"
fi
[ -e "$CPU_MOD" ] && pass "servesim-cpu.so is built next to the binary" ||
	fail "no $CPU_MOD (the cpu backend is always built as a module)"

# 2. with the modules next to the binary, a simulation loads none
# (LD_DEBUG=libs names every library the loader opens, dlopen included)
RUN="run --num-requests 200 --rate-scale 2 --quiet --json"
LD_DEBUG=libs "$BIN" $RUN >"$T/sum-with.json" 2>"$T/ld" || fail "run failed: $(grep -v '^ *[0-9]*:' "$T/ld")"
grep -E -q "servesim-(cpu|cuda|mpi)|$HEAVY" "$T/ld" &&
	fail "a simulation loaded: $(grep -E -o "[^ ]*(servesim-(cpu|cuda|mpi)|$HEAVY)[^ ]*" "$T/ld" | sort -u | tr '\n' ' ')" ||
	pass "servesim run maps no module and no OpenBLAS, OpenMP, CUDA or MPI library"

# ... and neither does a plan started without mpirun
LD_DEBUG=libs "$BIN" plan --num-requests 50 --max-gpus 1 --policies vllm --cost-model roofline \
	--quiet --out "$T/plan" >/dev/null 2>"$T/ld" || fail "plan failed: $(grep -v '^ *[0-9]*:' "$T/ld")"
grep -E -q "servesim-(cpu|cuda|mpi)|$HEAVY" "$T/ld" &&
	fail "a plan without mpirun loaded: $(grep -E -o "[^ ]*(servesim-(cpu|cuda|mpi)|$HEAVY)[^ ]*" "$T/ld" | sort -u | tr '\n' ' ')" ||
	pass "servesim plan without mpirun maps no module and no OpenBLAS, OpenMP, CUDA or MPI library"

# ... nor does `list backends`, which names the module files it would load
LD_DEBUG=libs "$BIN" list backends >"$T/list" 2>"$T/ld" || fail "list backends: $(grep -v '^ *[0-9]*:' "$T/ld")"
grep -E -q "servesim-(cpu|cuda|mpi)|$HEAVY" "$T/ld" &&
	fail "list backends loaded a module: $(grep -E -o "[^ ]*(servesim-(cpu|cuda)|$HEAVY)[^ ]*" "$T/ld" | sort -u | tr '\n' ' ')" ||
	pass "list backends maps no module"
grep -q "^ref  *built in " "$T/list" && grep -q "^cpu  *$CPU_MOD " "$T/list" &&
	pass "list backends: ref built in, cpu at $CPU_MOD" || fail "list backends: $(cat "$T/list")"

# ... while a live run and a calibration on the cpu backend load
# servesim-cpu.so with OpenBLAS and OpenMP, and work; the GEMM is
# OpenBLAS's sgemm_ although servesim's own scope holds GSL's CBLAS
# (calibrate names the library the GEMM resolved to)
LIVE="live --model llama-3.2-1b --width-div 16 --layers 1 --threads 2 --kv-blocks 64 --arrival poisson:rate=40 --lengths fixed:prompt=16,output=4 --num-requests 2 --quiet --json"
if LD_DEBUG=libs "$BIN" $LIVE >"$T/live.json" 2>"$T/ld"; then
	grep -q "servesim-cpu\.so" "$T/ld" && grep -q "libopenblas" "$T/ld" && grep -q "libgomp" "$T/ld" &&
		pass "live --backend cpu loads servesim-cpu.so, OpenBLAS and OpenMP" ||
		fail "live did not load the cpu module: $(grep -E -o "[^ ]*(servesim-cpu|$HEAVY)[^ ]*" "$T/ld" | sort -u | tr '\n' ' ')"
	grep -q '"requests_completed": 2' "$T/live.json" && pass "live on the cpu module completes its 2 requests" ||
		fail "live summary: $(grep requests_completed "$T/live.json")"
else
	fail "live on the cpu backend failed: $(grep -v '^ *[0-9]*:' "$T/ld")"
fi
CAL="calibrate run --backend cpu --model llama-3.2-1b --width-div 32 --layers 1 --max-tokens 16 --max-kv 16 --warmup 0 --repeats 1"
if LD_DEBUG=libs SERVESIM_POWERCAP_ROOT="$T/none" "$BIN" $CAL --store "$T/cpu.db" >"$T/out" 2>"$T/ld"; then
	grep -q "servesim-cpu\.so" "$T/ld" && pass "calibrate run --backend cpu loads servesim-cpu.so" ||
		fail "calibrate run --backend cpu did not load the module"
	grep -q "points measured" "$T/out" && pass "calibrate run on the cpu module measures: $(head -1 "$T/out")" ||
		fail "calibrate run: $(cat "$T/out")"
	grep -q "OpenBLAS .*(libopenblas" "$T/out" && pass "its GEMM is OpenBLAS's: $(grep 'device cpu' "$T/out")" ||
		fail "the cpu module's GEMM is not OpenBLAS's: $(grep 'device' "$T/out")"
else
	fail "calibrate run --backend cpu failed: $(grep -v '^ *[0-9]*:' "$T/ld")"
fi

# 3. the binary alone, in a directory without the modules: the run works
# and gives the same summary; live and calibrate run with the cpu or cuda
# backend say which module is missing (one line, exit 1)
mkdir "$T/bin"
cp "$BIN" "$T/bin/servesim"
"$T/bin/servesim" $RUN >"$T/sum-alone.json" 2>"$T/err" || fail "run without the modules failed: $(cat "$T/err")"
cmp -s "$T/sum-with.json" "$T/sum-alone.json" && pass "servesim run without the modules: same summary" ||
	fail "summary differs without the modules"
if [ ! -e "${SERVESIM_INSTALLED_MODULE_DIR:-/nonexistent}/servesim-cpu.so" ]; then
	saved=$BIN
	BIN="$T/bin/servesim"
	"$BIN" list backends | grep -q "^cpu  *not installed (module servesim-cpu\.so)" &&
		pass "list backends without the modules: cpu not installed" ||
		fail "list backends without the modules: $("$BIN" list backends)"
	expect_error 1 'kernel backend "cpu" is not installed: no servesim-cpu\.so in ' -- live --num-requests 2
	expect_error 1 'servesim-cpu\.so' -- live --backend cpu --num-requests 2
	rm -f "$T/cal.db"
	expect_error 1 'kernel backend "cpu" is not installed: no servesim-cpu\.so in ' -- calibrate run --store "$T/cal.db"
	# a store the failed run created, with nothing in it, is not left behind
	[ ! -e "$T/cal.db" ] && pass "a failed calibrate run leaves no empty store" ||
		fail "a failed calibrate run left $T/cal.db"
	BIN=$saved
fi
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
