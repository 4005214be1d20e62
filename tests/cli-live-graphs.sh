# servesim live --graphs: which engine profile's batch sizes a live run on
# CUDA captures as decode graphs (docs/live.md, docs/kernels.md "Graphs").
# A bad name is a usage error; the CPU backend has no graphs and runs as
# before; with the emulated CUDA backend (kernels/cuda/test, the directory
# in SERVESIM_EMU_MODULE_DIR; skipped without it) a run captures trtllm's 9
# sizes before its first step and completes every request, and --graphs
# none captures nothing.
. "$(dirname "$0")/cli-lib.sh"

tiny="--model llama-3.2-1b --width-div 32 --layers 1 --threads 1 --kv-blocks 256 --arrival poisson:rate=40 --lengths fixed:prompt=24,output=6 --num-requests 6 --quiet"

expect_error 2 "^servesim: --graphs: unknown engine profile 'bogus' .known: none, vllm," -- live --graphs bogus $tiny

"$BIN" live $tiny --graphs trtllm --out "$T/cpu" 2>"$T/err" &&
	grep -q '"requests_completed": 6' "$T/cpu/summary.json" &&
	! grep -q 'CUDA graphs' "$T/cpu/summary.json" &&
	pass "cpu: --graphs trtllm runs, no graphs (the CPU backend has none)" ||
	fail "cpu with --graphs: $(cat "$T/err") $(grep live_executor "$T/cpu/summary.json")"

if [ -n "${SERVESIM_EMU_MODULE_DIR:-}" ] && [ -f "$SERVESIM_EMU_MODULE_DIR/servesim-cuda.so" ]; then
	# the CLI loads modules from its own directory first
	mkdir -p "$T/bin"
	cp "$BIN" "$T/bin/servesim"
	cp "$SERVESIM_EMU_MODULE_DIR/servesim-cuda.so" "$T/bin/"
	"$T/bin/servesim" live --backend cuda $tiny --graphs trtllm --out "$T/g" 2>"$T/err" &&
		grep -q '"requests_completed": 6' "$T/g/summary.json" &&
		grep -q 'CPU emulation of CUDA.*; decode CUDA graphs at 9 batch sizes up to 256"' "$T/g/summary.json" &&
		pass "emulated cuda: trtllm's 9 sizes captured, every request completed" ||
		fail "emulated cuda with graphs: $(cat "$T/err") $(grep live_executor "$T/g/summary.json")"
	# a GPU backend: named with its device, and priced as --gpu (a CPU is not)
	python3 - "$T/g/summary.json" <<'EOF' && pass "emulated cuda: backend and scaled model named, priced as the h100-sxm" || fail "emulated cuda header: $(grep -E '"(backend|model_run|usd_per_hour)"' "$T/g/summary.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["scenario"]["backend"].startswith("cuda ("), s["scenario"]
assert s["scenario"]["model_run"] == "llama-3.2-1b scaled: width/32, 1 layer instead of 16 (synthetic weights)", s["scenario"]
assert s["cost"]["usd_per_hour"] is not None and s["cost"]["usd_per_hour"] > 0, s["cost"]
EOF
	"$T/bin/servesim" live --backend cuda $tiny --graphs none --out "$T/e" 2>"$T/err" &&
		grep -q '"requests_completed": 6' "$T/e/summary.json" &&
		grep -q 'CPU emulation of CUDA' "$T/e/summary.json" &&
		! grep -q 'CUDA graphs' "$T/e/summary.json" &&
		pass "emulated cuda: --graphs none captures nothing" ||
		fail "emulated cuda without graphs: $(cat "$T/err") $(grep live_executor "$T/e/summary.json")"
else
	echo "the emulated CUDA module is not built: its part skipped"
fi
finish
