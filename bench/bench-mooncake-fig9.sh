#!/bin/sh
# Mooncake FAST'25 Fig. 9's comparison (docs/kv-cache.md "Global against
# local caches"): prefix-cache hit rate (cached prompt tokens / prompt
# tokens) against the cache capacity in tokens, on the conversation and
# synthetic traces, over 10 instances standing for Mooncake's 10 prefill
# nodes, with
#   local    each instance's own cache holds capacity/10 tokens
#            (--prefix-cache blocks=N, N = capacity / 10 / 16, in a pool
#            of N + 100,000 blocks so the running requests never crowd it);
#            round-robin routing, and with --router prefix (cache-aware);
#   global   one store of the whole capacity shared by all (--kv-remote,
#            gb = capacity x the model's KV bytes per token), each
#            instance keeping only 1,000 evictable blocks of its own;
#            round-robin routing.
# Llama-3.2-1B on H100s keeps the runs cheap: the hit rate hardly depends
# on timing (only through which request is in flight when another looks
# its prefix up).  The traces at their own rates.  Prints one row per
# (trace, capacity); about 8 s per run, 30 runs.
#
#   sh bench/bench-mooncake-fig9.sh [SHARED_DATA_DIR]
#   CAPS="1000000 10000000" sh bench/bench-mooncake-fig9.sh   # fewer capacities
set -eu
cd "$(dirname "$0")/.."
BIN=${SERVESIM_BIN:-./build/servesim}
D=${1:-../shared/data}/traces/mooncake_fast25
CAPS=${CAPS:-"1000000 3000000 10000000 30000000 100000000"}
[ -r "$D/conversation_trace.jsonl" ] || { echo "no traces in $D" >&2; exit 1; }
C="--model llama-3.2-1b --gpu h100-sxm --instances 10 --quiet --json"

hit() {   # the run's prefix_cache.hit_rate, as a percentage
	"$BIN" run "$@" | python3 -c 'import json, sys
print("%.1f" % (100 * json.load(sys.stdin)["prefix_cache"]["hit_rate"]))'
}
# whole-model KV bytes per 16-token block, from a probe's store
bb=$("$BIN" run --trace "$D/synthetic_trace.jsonl" --num-requests 1 $C --prefix-cache on \
	--kv-remote gb=1 | python3 -c 'import json, sys
r = json.load(sys.stdin)["kv_tiers"]["remote"]
print(repr(r["capacity_gb"] * 1e9 / r["capacity_blocks"]))')

printf '%-13s %12s %10s %12s %10s\n' trace "cap tokens" "local rr" "local prefix" "global"
for t in conversation synthetic; do
	tr="--trace $D/${t}_trace.jsonl"
	for cap in $CAPS; do
		n=$((cap / 160))
		lrr=$(hit $tr $C --prefix-cache blocks=$n --kv-blocks $((n + 100000)))
		lpx=$(hit $tr $C --prefix-cache blocks=$n --kv-blocks $((n + 100000)) --router prefix)
		gb=$(python3 -c "print(($cap // 16 + 0.5) * $bb / 1e9)")
		glb=$(hit $tr $C --prefix-cache blocks=1000 --kv-remote gb=$gb)
		printf '%-13s %12d %9s%% %11s%% %9s%%\n' $t $cap $lrr $lpx $glb
	done
done
