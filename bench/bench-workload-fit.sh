#!/bin/sh
# Fitted workload models against the traces they were fitted to
# (docs/workloads.md, "Workload models"; docs/validation.md).  For each
# shipped trace with arrival times: `servesim workload fit`, then
# `servesim run` on the trace and on the model -- the same model, GPU,
# engine and policy (the defaults: Llama-3.1-8B on one H100, vLLM), the
# same mean rate (--rate R, chosen per trace so that the deployment is
# busy but not overloaded: see LOADS below) and the same number of
# requests (the whole trace) -- with SEEDS seeds on the fitted side.
# Prints, per trace, TTFT / TPOT / E2E p50, p90, p99 (ms) and throughput
# (req/s, output tok/s): the trace's, the fitted side's mean over the seeds
# with its range, and the difference of the mean from the trace's, %.
# A last column, "shuffled", replays the trace's own arrival times with its
# (prompt, output) pairs shuffled among the requests (awk, srand(1)): what
# is lost by drawing lengths independently of time, as the model does,
# with the arrivals kept exact.  Measured, never pass/fail.
#
#   bench/bench-workload-fit.sh [SERVESIM [SEEDS]]   (defaults: build/servesim, 3)
#
# SERVESIM_SHARED_DATA points at the shared data (default ../shared/data).
set -eu
BIN=${1:-build/servesim}
SEEDS=${2:-3}
SHARED=${SERVESIM_SHARED_DATA:-../shared/data}
T=$SHARED/traces
[ -d "$T" ] || { echo "bench-workload-fit: no $T (set SERVESIM_SHARED_DATA)" >&2; exit 77; }
command -v jq >/dev/null || { echo "bench-workload-fit: needs jq" >&2; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# trace (under $T) and the mean rate it is replayed at, req/s: each the
# rate where the trace's own replay on the default deployment has a TTFT
# p99 between about 0.3 s and 15 s (a scan of rates; the Mooncake traces'
# prompts are long -- p50 7k, p99 85k tokens -- so their rates are low).
LOADS="azure_llm_2023/AzureLLMInferenceTrace_code.csv 4
azure_llm_2023/AzureLLMInferenceTrace_conv.csv 15
azure_llm_2024_subset/azure_llm_code_v3_1024.csv 8
mooncake_fast25/conversation_trace.jsonl 0.4
mooncake_fast25/synthetic_trace.jsonl 0.8
peer_workloads/conv_poisson_qps1.0_n10000_seed42.csv 15
peer_workloads/conv_poisson_qps4.0_n10000_seed42.csv 15"

# the figures compared, as jq paths into summary.json
FIGS='ttft_ms.p50 ttft_ms.p90 ttft_ms.p99 tpot_ms.p50 tpot_ms.p90 tpot_ms.p99
e2e_ms.p50 e2e_ms.p90 e2e_ms.p99 throughput.requests_per_s throughput.output_tokens_per_s'

echo "$LOADS" | while read -r f rate; do
	[ -f "$T/$f" ] || { echo "bench-workload-fit: no $T/$f, skipped" >&2; continue; }
	name=$(basename "$f")
	"$BIN" workload fit "$T/$f" --out "$TMP/model.json" -q
	n=$(jq .source.requests "$TMP/model.json")
	"$BIN" run --trace "$T/$f" --rate "$rate" --json --out "$TMP/trace" --quiet > "$TMP/trace.json"
	# the replayed times (after --rate) with the length pairs shuffled
	awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		 { print $c["arrival_ms"] "," $c["prompt_tokens"] "," $c["output_tokens"] }' \
		"$TMP/trace/requests.csv" | sort -t, -k1,1g >"$TMP/times"
	cut -d, -f2,3 "$TMP/times" | awk 'BEGIN { srand(1) } { printf "%.17f,%s\n", rand(), $0 }' |
		sort -t, -k1,1g | cut -d, -f2,3 >"$TMP/lens"
	{ echo arrival_ms,prompt_tokens,output_tokens
	  cut -d, -f1 "$TMP/times" | paste -d, - "$TMP/lens"; } >"$TMP/shuffled.csv"
	"$BIN" run --trace "$TMP/shuffled.csv" --json > "$TMP/shuffled.json"
	rm -rf "$TMP/trace"
	s=1
	while [ "$s" -le "$SEEDS" ]; do
		"$BIN" run --workload "$TMP/model.json" --rate "$rate" --num-requests "$n" \
			--seed "$s" --json > "$TMP/fit$s.json"
		s=$((s + 1))
	done
	proc=$(jq -r .arrivals.process "$TMP/model.json")
	cv=$(jq -r ".arrivals.gap_cv * 1000 | round / 1000" "$TMP/model.json")
	echo "== $name: $n requests at $rate req/s (fitted: $proc, gap cv $cv, seeds 1..$SEEDS)"
	printf '%-31s %10s %10s %21s %7s %10s %7s\n' figure trace fitted "fitted range" "diff %" \
		shuffled "diff %"
	for fig in $FIGS; do
		tv=$(jq ".$fig" "$TMP/trace.json")
		sv=$(jq ".$fig" "$TMP/shuffled.json")
		vals=$(for s in $(seq 1 "$SEEDS"); do jq ".$fig" "$TMP/fit$s.json"; done)
		echo "$vals" | awk -v fig="$fig" -v tv="$tv" -v sv="$sv" '
			{ v[NR] = $1; sum += $1; if (NR == 1 || $1 < lo) lo = $1; if (NR == 1 || $1 > hi) hi = $1 }
			END { m = sum / NR; d = tv != 0 ? 100 * (m - tv) / tv : 0
			      ds = tv != 0 ? 100 * (sv - tv) / tv : 0
			      printf "%-31s %10.1f %10.1f %10.1f..%-10.1f %+7.1f %10.1f %+7.1f\n", fig, tv, m,
				     lo, hi, d, sv, ds }'
	done
	echo
done
