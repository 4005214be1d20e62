#!/bin/sh
# The capacity-planning benchmark of issue 6: a plan over more than 200
# configurations on the Azure LLM 2023 conversation trace, -j 2.  Prints the
# number of configurations, the wall time and the CPU time of the plan and
# its workers (measured, never pass/fail).
#
#   sh bench/bench-plan.sh [JOBS [OUTDIR [SIZE]]]
#       (defaults: 2, a temporary directory, 264)
#
# SIZE 264 is issue 6's space; SIZE 1000 is issue 10's "a plan of 1,000
# configurations" (1,056: the same space with running-set limits 64, 128,
# 256 and 512 and token budgets 2048 and 8192 per step).
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
mkdir -p "$OUT"
SIZE=${3:-264}
TRACE=${SERVESIM_SHARED_DATA:-../shared/data}/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv
[ -f "$TRACE" ] || { echo "bench-plan: $TRACE not found" >&2; exit 77; }
rm -f "$OUT/plan.db" "$OUT/plan.db-wal" "$OUT/plan.db-shm"
# --instances 1,2,4,8: issue 6's counts (the default became every count
# 1..8 in issue 15), so that figures stay comparable across versions
SPACE="--trace $TRACE --num-requests 2000 --gpus h100-sxm,a100-80gb-sxm --tp 1,2 --max-gpus 8 \
	--instances 1,2,4,8 --modes colocated,disaggregated --policies vllm,sarathi,splitfuse"
case $SIZE in
264) SPACE="$SPACE --max-batch 128,256" ;;
1000) SPACE="$SPACE --max-batch 64,128,256,512 --chunk 2048,8192" ;;
*) echo "bench-plan: SIZE is 264 or 1000, not $SIZE" >&2; exit 2 ;;
esac
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench-plan: needs GNU time (apt-get install time)" >&2; exit 77; }
n=$("$BIN" plan $SPACE --dry-run | head -1 | cut -d' ' -f1)
# GNU time counts the workers too (waited-for children): CPU time is the
# steadier figure on a shared machine
# --stats: the probes simulated and those copied from the same
# configuration with a smaller --max-batch (running sets that never reached
# it: docs/plan.md)
"$TIME" -f '%e %U %S' -o "$OUT/time" "$BIN" plan $SPACE -j "$JOBS" --out "$OUT" --quiet \
	--stats 2>"$OUT/stats" || { cat "$OUT/stats" >&2; exit 1; }
awk -v n="$n" -v j="$JOBS" -v c="$(nproc)" -v o="$OUT" '{ printf "bench-plan: %d configurations, -j %d on %d cores: %.1f s wall, %.1f s CPU; results in %s\n", n, j, c, $1, $2 + $3, o }' "$OUT/time"
# simulations (probes) the searches ran, and CPU per simulation: the figure
# to compare when the search itself is unchanged
if command -v sqlite3 >/dev/null 2>&1; then
	probes=$(sqlite3 "$OUT/plan.db" "SELECT sum(json_array_length(probes)) FROM plan")
	reused=$(sed -n 's/.* \([0-9][0-9]*\) reused .*/\1/p' "$OUT/stats")
	sims=$((probes - ${reused:-0}))
	awk -v s="$sims" -v p="$probes" -v r="${reused:-0}" '{ printf "bench-plan: %d probes: %d simulations of 2,000 requests, %.1f ms CPU each (set-up and outputs included), %d reused\n", p, s, ($2 + $3) * 1000 / s, r }' "$OUT/time"
fi
