#!/bin/sh
# Rebuild data/calibration.db, the shipped calibration store, from the
# third-party profile tables in ../shared/data/profiles with servesim's own
# importers (docs/calibration.md, "The shipped store").
#
#   scripts/build-calibration.sh [PROFILES_DIR]
#
# The store is written under a temporary name and renamed, so an interrupted
# run never leaves a partial store in data/.  The same inputs with the same
# servesim give the same rows; tests/test-importers.c (`real` mode) checks
# that the shipped store matches a fresh build.  SERVESIM_BIN overrides the
# binary (default build/servesim).
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SERVESIM_BIN:-$SRC/build/servesim}
P=${1:-$SRC/../shared/data/profiles}
OUT=$SRC/data/calibration.db
TMP=$OUT.build.$$

[ -x "$BIN" ] || { echo "build-calibration: $BIN not found (run ninja -C build)" >&2; exit 1; }
[ -f "$P/PROVENANCE.md" ] || { echo "build-calibration: no profiles in $P" >&2; exit 1; }
trap 'rm -f "$TMP" "$TMP-journal"' EXIT INT TERM

# --compact: bf16/fp16 only (no fp8 KV cache, no int8 NCCL), full attention
# only (window 0), the CUDA-graph custom all-reduce, and the Vidur grids
# thinned to 8 points per octave.  A new store is vacuumed.  Then the H100
# per-tensor fp8 GEMMs (the table model's --weight-dtype fp8 layer GEMMs;
# fp8_block is left out: docs/calibration.md), after the bf16 rows, so every
# bf16 row keeps its place.
"$BIN" calibrate import --compact --quiet --store "$TMP" \
	"$P/aiconfigurator/h100_sxm" \
	"$P/aiconfigurator/a100_sxm" \
	"$P/vidur/profiling/compute/h100" \
	"$P/vidur/profiling/compute/a100" \
	"$P/vidur/profiling/network/h100_dgx" \
	"$P/vidur/profiling/network/a100_dgx" \
	"$P/vidur/profiling/legacy_attention" \
	"$P/vidur/profiling/legacy_cpu_overheads/a100_cpu_overheads.csv"
"$BIN" calibrate import --compact --dtype fp8 --quiet --store "$TMP" \
	"$P/aiconfigurator/h100_sxm/vllm0.24.0_gemm_perf.csv"
mv "$TMP" "$OUT"
install -m 0644 "$P/aiconfigurator/LICENSE-APACHE" "$SRC/data/LICENSE-aiconfigurator-APACHE"
install -m 0644 "$P/vidur/LICENSE-MIT" "$SRC/data/LICENSE-vidur-MIT"
echo "build-calibration: wrote $OUT ($(wc -c <"$OUT") bytes)" >&2
