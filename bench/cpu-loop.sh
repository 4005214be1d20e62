#!/bin/sh
# The calibrate -> simulate -> live -> compare loop on the CPU backend
# (docs/live.md): calibrate a scaled Llama-3.2-1B on the CPU kernels,
# replay a short trace live on the CPU, simulate the same scenario with that
# calibration, and compare.  Prints the comparison; issue 4's target is TTFT
# and TPOT p50 within 10% and p99 within 20%.
#
#   sh bench/cpu-loop.sh [WORKDIR]     (default: a temporary directory)
set -eu
cd "$(dirname "$0")/.."
BIN=${SERVESIM_BIN:-./build/servesim}
W=${1:-$(mktemp -d)}
mkdir -p "$W"
MODEL=llama-3.2-1b DIV=16 LAYERS=2
TRACE="--arrival poisson:rate=30 --lengths lognormal:prompt_mean=200,prompt_cv=0.5,output_mean=40,output_cv=0.5 --num-requests 200 --kv-blocks 1024 --seed 3"

rm -f "$W/cal.db"
"$BIN" calibrate run --store "$W/cal.db" --model $MODEL --width-div $DIV --layers $LAYERS \
	--max-tokens 1024 --max-kv 2048 --catalog-out "$W/catalog"
"$BIN" live --model $MODEL --width-div $DIV --layers $LAYERS $TRACE --out "$W/live" --quiet
"$BIN" run --model-catalog "$W/catalog/models.json" --gpu-catalog "$W/catalog/gpus.json" \
	--model $MODEL-w$DIV-l$LAYERS --gpu cpu --cost-model table --calibration "$W/cal.db" \
	$TRACE --out "$W/sim" --quiet
"$BIN" compare "$W/live" "$W/sim" --json "$W/compare.json"
