#!/bin/sh
# DistServe's simulator example on servesim (docs/validation.md, "DistServe's
# simulator example"): OPT-13B, one prefill instance of TP 2 and one decode
# instance of TP 1 on A100-80GB, 300 of DistServe's own ShareGPT requests,
# DistServe's search (bisect the per-GPU rate over [0, 5] until hi - lo <=
# 0.25; a probe passes when P90 TTFT < 200 ms and P90 TPOT < 100 ms, each on
# its own) for each workload draw (seed).  tests/test-distserve-sim.c runs
# the same procedure through the library and asserts on it.
#
#   bench/distserve-sim.sh [SERVESIM [SHARED_DATA [SEEDS]]]
#
# Prints one line per setting: each draw's per-GPU rate, then the mean.
# DistServe's README reports 1.56 (its bisection's 1.5625).
set -eu
bin=${1:-build/servesim}
shared=${2:-../shared/data}
seeds=${3:-20}
exp="$shared/serving/distserve_alignment/opt-13b-sharegpt-workload/distserve-c21d12-1600-16.exp"
[ -r "$exp" ] || { echo "distserve-sim: $exp not readable" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# DistServe's output_len counts the decode steps after the prefill; servesim's
# output tokens count the prefill's first token too: + 1
{
	echo num_prefill_tokens,num_decode_tokens
	jq -r '.[] | "\(.prompt_len),\(.output_len + 1)"' "$exp"
} >"$tmp/lengths.csv"
# the ShareGPT lengths servesim's published-result test used before issue 11
# (Llama-2 tokenizer, prompt + output <= 2,048, OPT's context)
awk -F, 'NR == 1 || $1 + $2 <= 2048' \
	"$shared/traces/length_distributions/sharegpt_8k_filtered_stats_llama2_tokenizer.csv" \
	>"$tmp/etalon.csv"

# passes SETTING_ARGS... at RATE req/s with SEED: 0 when DistServe's criterion holds
# (--engine none: DistServe's simulator prices kernels only, like with like;
# run's default is the vllm profile)
probe() {
	rate=$1 seed=$2
	shift 2
	SERVESIM_SHARED_DATA=$shared "$bin" run --engine none --model opt-13b --gpu a100-80gb-sxm \
		--lengths "empirical:$lengths" --arrival poisson:rate=1 --rate-scale "$rate" \
		--num-requests 300 --seed "$seed" --prefill-instances 1 --decode-instances 1 \
		--prefill-tp 2 --decode-tp 1 \
		--policy vllm:v0=on,chunked=off,max_num_batched_tokens=163008,max_num_seqs=100000 \
		--slo ttft_ms=200,tpot_ms=100 --json "$@" >"$tmp/s.json"
	jq -e '.ttft_ms.p90 < 200 and .tpot_ms.p90 < 100' "$tmp/s.json" >/dev/null
}

bisect() {
	seed=$1
	shift
	lo=0 hi=5 best=0
	while awk -v l="$lo" -v h="$hi" 'BEGIN { exit !(h - l > 0.25) }'; do
		mid=$(awk -v l="$lo" -v h="$hi" 'BEGIN { printf "%.17g", (l + h) / 2 }')
		rate=$(awk -v m="$mid" 'BEGIN { printf "%.17g", m * 3 }')
		if probe "$rate" "$seed" "$@"; then
			lo=$mid best=$mid
		else
			hi=$mid
		fi
	done
	echo "$best"
}

setting() {
	name=$1 lengths=$2
	shift 2
	printf '%-26s' "$name"
	sum=0 s=0
	while [ "$s" -lt "$seeds" ]; do
		v=$(bisect "$s" "$@")
		printf ' %.4g' "$v"
		sum=$(awk -v a="$sum" -v b="$v" 'BEGIN { printf "%.17g", a + b }')
		s=$((s + 1))
	done
	awk -v a="$sum" -v n="$seeds" 'BEGIN { printf "   mean %.3f (%+.1f%% vs 1.5625)\n", a / n, 100 * (a / n / 1.5625 - 1) }'
}

setting "A DistServe's simulator" "$tmp/lengths.csv" \
	--cost-model distserve:fit_tp=2,step_extra_ms=2,step_extra_ms_per_token=0.0001 --kv-blocks 4134
setting "B servesim's model" "$tmp/lengths.csv" \
	--cost-model distserve:step_extra_ms=2,step_extra_ms_per_token=0.0001
setting "C B without Ray overhead" "$tmp/lengths.csv" --cost-model distserve
setting "D C on Llama-2 ShareGPT" "$tmp/etalon.csv" --cost-model distserve
