#!/bin/sh
# Prefix-cache hit rate against cache capacity on the Mooncake FAST'25
# traces (docs/kv-cache.md): one Llama-3.1-8B instance on an H100 with
# prefix caching on, the KV pool set to each capacity with --kv-blocks (a
# pool beyond the GPU's ~26,000 blocks stands for a larger cache tier).
# Both traces are replayed at a quarter of their rates so that the instance
# is not overloaded.  Prints one table row per capacity.
#
#   sh scripts/prefix-capacity.sh [SHARED_DATA_DIR]
set -eu
cd "$(dirname "$0")/.."
BIN=${SERVESIM_BIN:-./build/servesim}
D=${1:-../shared/data}/traces/mooncake_fast25
printf '%-14s %12s %14s %12s\n' trace "KV blocks" "tokens" "hit rate"
for t in conversation synthetic; do
	rs=0.25
	for kv in 25747 100000 400000 1600000 10000000; do
		rate=$("$BIN" run --trace "$D/${t}_trace.jsonl" --prefix-cache on --kv-blocks $kv \
			--rate-scale $rs --json | sed -n '/"prefix_cache"/,/}/s/.*"hit_rate": \([0-9.e-]*\).*/\1/p')
		printf '%-14s %12s %14s %11.1f%%\n' $t $kv $((kv * 16)) "$(echo "$rate * 100" | bc -l)"
	done
done
