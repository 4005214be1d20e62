#!/bin/sh
# Simulated versus measured energy per output token for the ML.ENERGY
# leaderboard v2 chat setups (Llama-3.1-8B, Llama-3.1-70B, Mistral-7B on
# A100-SXM4-40GB and H100-SXM; vLLM 0.4.2; ShareGPT prompts; every max batch
# size measured).  Prints a Markdown table (docs/energy.md).
#
#   sh scripts/compare-mlenergy.sh [extra servesim run options...]
#
# Each setup is simulated as ML.ENERGY ran it, as far as ../shared/data tells:
# requests arriving at once (Poisson at 10,000 req/s), enough of them to keep
# the batch full (3 x max_num_seqs, at least 500), vLLM without chunked
# prefill (0.4.2's default), max_num_seqs = the measured max batch size.
# Output lengths: lognormal with the measured mean output length of the setup
# and cv 0.6.  Prompt lengths are NOT in the data: ML.ENERGY v2 prompts are
# first turns of ShareGPT conversations, assumed lognormal with mean 250
# tokens and cv 1.5 (docs/energy.md discusses the effect).
set -eu
cd "$(dirname "$0")/.."
BIN=${SERVESIM_BIN:-./build/servesim}
SHARED=${SERVESIM_SHARED_DATA:-../shared/data}
CSV=$SHARED/profiles/mlenergy_v2/mlenergy_v2_llm_flat.csv
[ -f "$CSV" ] || { echo "compare-mlenergy: $CSV not found" >&2; exit 77; }

echo "| model | GPU x TP | max batch | J/token measured | J/token simulated | error | TPOT ms measured | TPOT ms simulated | W/GPU measured | W/GPU simulated | avg batch measured | avg batch simulated |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
# task,gpu,model,max_num_seqs,tp,pp,energy_per_request_J,avg_tpot_s,throughput,avg_output_tokens,...
grep '^chat,' "$CSV" | grep -E 'Meta-Llama-3.1-8B-Instruct|Meta-Llama-3.1-70B-Instruct|Mistral-7B-Instruct-v0.3' |
	sort -t, -k2,2 -k3,3 -k4,4n | while IFS=, read -r _ gpu model seqs tp _ ereq tpot thr outtok rest; do
	case "$gpu" in
	A100-SXM4-40GB) g=a100-40gb-sxm ;;
	"H100 80GB HBM3") g=h100-sxm ;;
	*) continue ;;
	esac
	case "$model" in
	*Llama-3.1-8B*) m=llama-3.1-8b ;;
	*Llama-3.1-70B*) m=llama-3.1-70b ;;
	*Mistral-7B*) m=mistral-7b ;;
	esac
	n=$((3 * seqs))
	[ "$n" -ge 500 ] || n=500
	json=$("$BIN" run --model "$m" --gpu "$g" --tp "$tp" \
		--lengths "lognormal:prompt_mean=250,prompt_cv=1.5,prompt_max=4000,output_mean=$outtok,output_cv=0.6,output_max=4000" \
		--arrival poisson:rate=10000 --num-requests "$n" \
		--policy "vllm:chunked=off,max_num_seqs=$seqs,max_num_batched_tokens=4096" \
		--json "$@" 2>/dev/null) || { echo "| $m | $g x $tp | $seqs | (run failed) |"; continue; }
	sbatch=$(printf '%s\n' "$json" | sed -n '/"seqs"/,/}/s/.*"mean": \([0-9.e+-]*\).*/\1/p' | head -1)
	spow=$(printf '%s\n' "$json" | sed -n 's/.*"avg_power_w": \([0-9.e+-]*\).*/\1/p' | head -1)
	sim=$(printf '%s\n' "$json" | sed -n 's/.*"j_per_output_token": \([0-9.e+-]*\).*/\1/p' | head -1)
	stpot=$(printf '%s\n' "$json" | sed -n '/"tpot_ms"/,/}/s/.*"mean": \([0-9.e+-]*\).*/\1/p' | head -1)
	mbatch=$(printf '%s' "$rest" | cut -d, -f1)
	awk -v m="$m" -v g="$g" -v tp="$tp" -v b="$seqs" -v e="$ereq" -v o="$outtok" -v s="$sim" \
	    -v t="$tpot" -v st="$stpot" -v mb="$mbatch" -v sb="$sbatch" -v thr="$thr" -v sp="$spow" 'BEGIN {
		meas = e / o
		printf "| %s | %s x %d | %d | %.3f | %.3f | %+.0f%% | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f |\n", m, g, tp, b, meas, s, 100 * (s / meas - 1), 1000 * t, st, meas * thr / tp, sp, mb, sb
	}'
done
