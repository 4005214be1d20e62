#!/bin/sh
# The scenario matrix: fixed-seed runs over every engine feature (each batch
# policy, order, victim, preemption mode, router, admission, prefix cache,
# KV tiers, disaggregation, PP, EP and DP attention, sessions, closed loop,
# engine profiles, multi-step bursts, cost models, power cap), each run's
# summary.json and requests.csv reduced to a SHA-256 and compared with
# tests/data/scenario-matrix.txt.  It is the safety net of refactors that
# must not change results: a refactor that moves a figure fails here, with
# the scenarios that moved.
#
#   sh tests/scenario-matrix.sh BIN              compare (the test)
#   sh tests/scenario-matrix.sh BIN --update     rewrite the digests (only
#                      for a change that is meant to move results: say in
#                      the commit which scenarios moved and why)
#   sh tests/scenario-matrix.sh BIN --keep DIR   compare, keep the outputs
#                      in DIR/NAME/ (diff them against a build of main)
#
# Only data shipped in the repository is used (data/, tests/data/), so it
# runs everywhere; the checkout's own path, which summary.json records for
# the shipped trace, is digested as <root>.  Runs are small (150 to 400 requests) and take about a
# second each in the plain build.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd -P)
BIN=${1:?usage: scenario-matrix.sh BIN [--update | --keep DIR]}
MODE=${2:-compare}
GOLDEN=tests/data/scenario-matrix.txt
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
KEEP=
if [ "$MODE" = --keep ]; then
	KEEP=${3:?--keep needs a directory}
	mkdir -p "$KEEP" || exit 1
fi

# An engine catalog with multi-step scheduling (vLLM 0.6's bursts).
cat >"$T/engines.json" <<'EOF'
{"engines": [{"name": "burst4", "versions": "test", "source": "scenario matrix",
              "scheduler_steps": 4}]}
EOF

GEN="--arrival poisson:rate=12 --lengths lognormal:prompt_mean=700,prompt_cv=1,output_mean=150,output_cv=1"
HOT="--arrival poisson:rate=40 --lengths lognormal:prompt_mean=900,prompt_cv=1,output_mean=200,output_cv=1"
SESS="--sessions rate=2,turns=4,think_s=2 --prefix-cache on --num-requests 40"

# name|arguments (the default workload, the shipped Azure sample, unless given)
matrix() {
	cat <<EOF
default|--num-requests 300
engine-none|--num-requests 300 --engine none
engine-vllm-v0|--num-requests 150 --engine vllm-v0
engine-sglang|--num-requests 300 --engine sglang
engine-trtllm|--num-requests 300 --engine trtllm
engine-distserve|--num-requests 150 --engine distserve
engine-splitwise|--num-requests 150 --engine splitwise-2023
engine-bursts|--num-requests 300 --engine burst4 --engine-catalog $T/engines.json
policy-vllm-unchunked|$HOT --num-requests 300 --policy vllm:chunked=off
policy-vllm-v0|$HOT --num-requests 300 --policy vllm:v0=on
policy-vllm-noevict|$HOT --num-requests 300 --policy vllm:admission=no_evict --kv-blocks 1500
policy-static|$GEN --num-requests 200 --policy static
policy-orca|$GEN --num-requests 200 --policy orca
policy-sarathi|$HOT --num-requests 300 --policy sarathi:token_budget=512
policy-splitfuse|$HOT --num-requests 300 --policy splitfuse
order-spf|$HOT --num-requests 300 --order spf --kv-blocks 2000
order-sjf|$HOT --num-requests 300 --order sjf --kv-blocks 1500
order-sjf-noisy|$HOT --num-requests 300 --order sjf --predictor noisy:sigma=0.5 --kv-blocks 1500
order-priority|$HOT --num-requests 300 --order priority:aging=1 --victim priority --kv-blocks 1500
order-vtc|$HOT --num-requests 300 --tenants 3,1 --order vtc --kv-blocks 1500
victim-largest|$HOT --num-requests 300 --victim largest --kv-blocks 1500
preempt-swap|$HOT --num-requests 300 --preemption swap --kv-blocks 1500
router-rr|$HOT --num-requests 400 --instances 3 --router rr
router-lot|$HOT --num-requests 400 --instances 3 --router lot
router-random|$HOT --num-requests 400 --instances 3 --router random
router-lor|$HOT --num-requests 400 --instances 3 --router lor
router-p2c|$HOT --num-requests 400 --instances 3 --router p2c:load=tokens
router-kvfree|$HOT --num-requests 400 --instances 3 --router kvfree
router-prefix|$SESS --instances 3 --router prefix
admit-queue|$HOT --rate-scale 3 --num-requests 300 --admission queue:max=20
admit-timeout|$HOT --rate-scale 3 --num-requests 300 --admission timeout:ms=800 --order sjf
admit-slo|$HOT --rate-scale 3 --num-requests 300 --admission slo:ttft_ms=500
prefix-cache|$SESS
prefix-cache-bounded|$SESS --prefix-cache blocks=64
kv-offload|$SESS --kv-blocks 600 --kv-offload host_gb=1
kv-remote|$SESS --instances 2 --router lor --kv-blocks 600 --kv-remote gb=4
sessions-fanout|--sessions rate=1,turns=fixed:3,think_s=1,fanout=3 --prefix-cache on --num-requests 20
sessions-trace|--trace tests/data/sessions-example.csv --prefix-cache on
closed-loop|--concurrency 16 --num-requests 200 --think-time exponential:mean_ms=200
disagg|$HOT --num-requests 300 --prefill-instances 1 --decode-instances 2
disagg-mixed|$HOT --num-requests 300 --prefill-instances 2 --decode-instances 1 --decode-gpu a100-80gb-sxm --kv-overlap
semi-pd|$HOT --num-requests 300 --semi-pd sm=0.4
pp|$HOT --num-requests 300 --model llama-3.1-70b --tp 2 --pp 2
moe-ep|$GEN --num-requests 200 --model qwen3-30b-a3b --tp 2 --ep 2
moe-dp-attention|$GEN --num-requests 200 --model qwen3-30b-a3b --tp 2 --dp-attention 2
cost-roofline|$HOT --num-requests 300 --cost-model roofline
cost-constant|--num-requests 300 --cost-model constant:prefill_ms_per_token=0.05,decode_ms_per_step=10
fp8|$HOT --num-requests 300 --weight-dtype fp8 --kv-dtype fp8
power-cap|$HOT --num-requests 300 --power-cap 400
rate-scale|--num-requests 400 --rate-scale 4
EOF
}

fails=0
n=0
: >"$T/got"
matrix >"$T/matrix"
while IFS='|' read -r name args; do
	n=$((n + 1))
	out="$T/run"
	[ -n "$KEEP" ] && out="$KEEP/$name"
	rm -rf "$out"
	# shellcheck disable=SC2086  # args is a list of options
	if ! "$BIN" run $args --seed 11 --quiet --out "$out" 2>"$T/err" </dev/null; then
		echo "FAIL: $name: servesim run $args: $(cat "$T/err")" >&2
		fails=$((fails + 1))
		echo "$name failed failed" >>"$T/got"
		continue
	fi
	# the shipped trace's path names the checkout: digest it as <root>
	s=$(sed "s|$ROOT/|<root>/|g" "$out/summary.json" | sha256sum | cut -c1-64)
	r=$(sha256sum <"$out/requests.csv" | cut -c1-64)
	echo "$name $s $r" >>"$T/got"
done <"$T/matrix"

if [ "$MODE" = --update ]; then
	{
		echo "# tests/scenario-matrix.sh: scenario, SHA-256 of summary.json, of requests.csv"
		cat "$T/got"
	} >"$GOLDEN.tmp" && mv "$GOLDEN.tmp" "$GOLDEN"
	echo "scenario matrix: $n scenarios written to $GOLDEN"
	[ "$fails" -eq 0 ] || exit 1
	exit 0
fi

if [ ! -f "$GOLDEN" ]; then
	echo "FAIL: $GOLDEN missing (sh tests/scenario-matrix.sh BIN --update)" >&2
	exit 1
fi
while read -r name s r; do
	want=$(grep "^$name " "$GOLDEN" || true)
	if [ -z "$want" ]; then
		echo "FAIL: $name: not in $GOLDEN" >&2
		fails=$((fails + 1))
		continue
	fi
	set -- $want
	if [ "$2" != "$s" ]; then
		echo "FAIL: $name: summary.json differs from the recorded run" >&2
		fails=$((fails + 1))
	elif [ "$3" != "$r" ]; then
		echo "FAIL: $name: requests.csv differs from the recorded run" >&2
		fails=$((fails + 1))
	else
		echo "ok: $name"
	fi
done <"$T/got"
# every recorded scenario still runs
grep -v '^#' "$GOLDEN" | while read -r name _; do
	grep -q "^$name " "$T/got" || echo "FAIL: $name: recorded but no longer in the matrix" >&2
done | grep . >&2 && fails=$((fails + 1))
if [ "$fails" -ne 0 ]; then
	echo "scenario matrix: $fails of $n scenarios differ (keep the outputs with --keep DIR and diff them against a build of the previous commit)" >&2
	exit 1
fi
echo "scenario matrix: $n scenarios identical"
