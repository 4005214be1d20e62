#!/bin/sh
# The capacity-planning benchmark of issue 6: a plan over more than 200
# configurations on the Azure LLM 2023 conversation trace, -j 2.  Prints the
# number of configurations and the wall time (measured, never pass/fail).
#
#   sh bench/bench-plan.sh [JOBS] [OUTDIR]     (default 2 and a temporary directory)
#
# The space (264 configurations): H100-SXM and A100-80GB-SXM, tp 1 and 2,
# up to 8 GPUs, colocated (1, 2, 4, 8 instances) and disaggregated (every
# prefill:decode split of 2, 4 and 8 instances), vllm, sarathi and
# splitfuse, running-set limits 128 and 256; the first 2,000 requests of
# the trace, default SLOs (TTFT 2 s, TPOT 100 ms), target 90%.
set -eu
cd "$(dirname "$0")/.."
BIN=${SERVESIM_BIN:-./build/servesim}
JOBS=${1:-2}
OUT=${2:-$(mktemp -d)}
TRACE=${SERVESIM_SHARED_DATA:-../shared/data}/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv
[ -f "$TRACE" ] || { echo "bench-plan: $TRACE not found" >&2; exit 77; }
rm -f "$OUT/plan.db" "$OUT/plan.db-wal" "$OUT/plan.db-shm"
SPACE="--trace $TRACE --num-requests 2000 --gpus h100-sxm,a100-80gb-sxm --tp 1,2 --max-gpus 8 \
	--modes colocated,disaggregated --policies vllm,sarathi,splitfuse --max-batch 128,256"
n=$("$BIN" plan $SPACE --dry-run | head -1 | cut -d' ' -f1)
start=$(date +%s.%N)
"$BIN" plan $SPACE -j "$JOBS" --out "$OUT" --quiet
end=$(date +%s.%N)
echo "bench-plan: $n configurations, -j $JOBS on $(nproc) cores: $(awk "BEGIN { printf \"%.1f\", $end - $start }") s wall; results in $OUT"
