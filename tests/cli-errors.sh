# Bad input gets one clear line naming the input and what was expected, a
# non-zero exit, and no output files.
. "$(dirname "$0")/cli-lib.sh"

expect_error 2 "unknown option '--bogus'" -- run --bogus
# a long option is spelt whole: getopt_long would take --gpus for
# --gpus-per-node; an abbreviation is refused and the full names suggested
expect_error 2 "^servesim: unknown option '--gpus' \(did you mean --gpus-per-node\?\)$" -- run --gpus 8
expect_error 2 "^servesim: unknown option '--gpus' \(did you mean --gpus-per-node\?\)$" -- run --gpus=8
expect_error 2 "^servesim: unknown option '--num-req' \(did you mean --num-requests\?\)$" -- live --num-req 5
expect_error 2 "^servesim: unknown option '--max-g' \(did you mean --max-gpus\?\)$" -- plan --max-g 8
expect_error 2 "unknown option '--prefill' \(did you mean --prefill-instances, --prefill-gpu, --prefill-tp, \.\.\.\?\)" -- run --prefill 2
expect_error 2 "unknown option '--he' \(did you mean --help\?\)" -- run --he
# --rate-scale is checked by the option table, before any trace is read
# (1e-300 used to reach the trace reader: "arrival times beyond 292 years")
for x in 1e-300 0 -1 1e-7 2e6 nan; do
	expect_error 2 "^servesim: --rate-scale: expected a factor in \\[1e-6, 1e6\\], got '$x'$" -- run --rate-scale "$x"
done
expect_error 2 "^servesim: --rate-scale: expected a factor in \\[1e-6, 1e6\\], got '1e-300'$" -- plan --rate-scale 1e-300
"$BIN" run --num-requests 20 --rate-scale 1e-6 --quiet 2>"$T/err" && "$BIN" run --num-requests 20 --rate-scale 1e6 --quiet 2>>"$T/err" &&
	pass "--rate-scale 1e-6 and 1e6 run" || fail "--rate-scale at its bounds: $(cat "$T/err")"
# the same for the commands with their own option lists
expect_error 2 "^servesim: unknown option '--js' \\(did you mean --json\\?\\)$" -- compare --js x a b
expect_error 2 "^servesim: unknown option '--fold' \\(did you mean --folds\\?\\)$" -- calibrate check --fold 3
expect_error 2 "^servesim: unknown option '--rep' \\(did you mean --repeats\\?\\)$" -- calibrate run --rep 3
expect_error 2 "^servesim: unknown option '--sto' \\(did you mean --store\\?\\)$" -- calibrate list --sto x
"$BIN" run --num-requests=5 --gpus-per-node 8 --quiet 2>"$T/err" && pass "whole names, also as --name=value, are taken" ||
	fail "run --num-requests=5 --gpus-per-node 8: $(cat "$T/err")"
expect_error 2 "unknown command 'fly'" -- fly
expect_error 2 "--tp: expected an integer in 1..64, got '0'" -- run --tp 0
expect_error 2 "--num-requests: expected a positive integer, got 'ten'" -- run --num-requests ten
expect_error 2 "unknown model 'gpt-9'" -- run --model gpt-9
expect_error 2 "unknown GPU 'tpu'" -- run --gpu tpu
expect_error 2 "--slo" -- run --slo fast
expect_error 2 "unknown batch policy 'magic'" -- run --policy magic
expect_error 2 "unknown parameter 'max_seqs'" -- run --policy vllm:max_seqs=3
expect_error 2 "unknown router" -- run --router fastest
expect_error 2 "cost" -- run --cost-model psychic
expect_error 2 "^servesim: --admission timeout: expected 0 < ms <= 1e12, got 0$" -- run --admission timeout:ms=0 --num-requests 5
expect_error 2 "^servesim: --preemption swap: expected 0 <= host_gb" -- run --preemption swap:host_gb=-1 --num-requests 5
# a model too large for the GPU it is given: two options that conflict (exit 2)
expect_error 2 "does not fit" -- run --model llama-3.1-70b --gpu l40s
expect_error 1 "nosuch.csv" -- run --trace "$T/nosuch.csv"

: >"$T/empty.csv"
expect_error 1 "empty.csv" -- run --trace "$T/empty.csv"

printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,abc,109\n' >"$T/bad.csv"
expect_error 1 "bad.csv:3:" -- run --trace "$T/bad.csv" --out "$T/res"
[ ! -e "$T/res/summary.json" ] && pass "no summary.json after a failed run" || fail "summary.json written by a failed run"

printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,-5,109\n' >"$T/neg.csv"
expect_error 1 "neg.csv:3:" -- run --trace "$T/neg.csv"

printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,12\n' >"$T/trunc.csv"
expect_error 1 "trunc.csv:3:" -- run --trace "$T/trunc.csv"

printf 'when,prompt,out\n1,2,3\n' >"$T/unknown.csv"
expect_error 1 "unknown.csv:1:" -- run --trace "$T/unknown.csv"

expect_error 2 "lengths" -- run --arrival poisson:rate=2 --num-requests 10
expect_error 2 "rate" -- run --arrival poisson:rate=-1 --lengths fixed:prompt=10,output=5 --num-requests 10

# Times on the command line: each must be a duration the engine can hold
# (common/sstime.h), else one line and exit 2 before anything runs.
for k in ttft_ms tpot_ms e2e_ms tbt_ms; do
	expect_error 2 "^servesim: --slo $k: expected a duration between 0 and 9\.22e\+12 ms, got 1e\+300$" -- run --slo $k=1e300
done
expect_error 2 "^servesim: --slo ttft_ms: expected a duration between 0 and 9\.22e\+12 ms, got 1e\+13$" -- run --slo ttft_ms=1e13
expect_error 2 "^servesim: --slo ttft_ms: expected a duration" -- plan --slo ttft_ms=1e13
expect_error 2 "^servesim: --slo tpot_ms: expected a duration" -- live --slo tpot_ms=1e300
expect_error 2 "^servesim: --slo: expected targets >= 0 ms" -- run --slo ttft_ms=-1
expect_error 2 "^servesim: --duration: expected seconds in \[1e-9, 1e9\], got '1e-300'$" -- run --duration 1e-300
expect_error 2 "^servesim: --duration: expected seconds in \[1e-9, 1e9\], got '1e300'$" -- run --duration 1e300
expect_error 2 "^servesim: --duration: expected seconds" -- run --duration nan
expect_error 2 "^servesim: --duration: expected seconds" -- plan --duration 1e-300
expect_error 2 "^servesim: --sample-interval: expected seconds in \[1e-9, 1e6\], got '1e-300'$" -- run --sample-interval 1e-300
expect_error 2 "^servesim: --sample-interval: expected seconds in \[1e-9, 1e6\], got '1e300'$" -- run --sample-interval 1e300
expect_error 2 "^servesim: --sample-interval: expected seconds" -- run --sample-interval 0
# --num-requests above the workload limit is refused while parsing: this
# answers at once, where generating 10^8 requests first took seconds and GBs.
expect_error 2 "^servesim: --num-requests: expected a positive integer up to 100000000, got '100000001'$" -- run --arrival poisson:rate=1e6 --lengths fixed:prompt=1,output=1 --num-requests 100000001
expect_error 2 "^servesim: --num-requests: expected a positive integer up to 100000000" -- run --num-requests 99999999999999999999
expect_error 2 "^servesim: --num-requests: expected a positive integer up to 100000000" -- plan --num-requests 1000000000
expect_error 2 "^servesim: --num-requests: expected an integer >= 2, got '1'$" -- plan --num-requests 1
expect_error 2 "^servesim: --semi-pd: expected sm=F" -- run --semi-pd sm=2
expect_error 2 "^servesim: --jobs: expected an integer in 1\.\.1024, got '0'$" -- plan --jobs 0
expect_error 2 "^servesim: --pareto-cost: expected auto, gpus or usd, got 'x'$" -- plan --pareto-cost x
expect_error 2 "^servesim: unknown option '--modes'" -- run --modes colocated
expect_error 2 "^servesim: unknown option '--policy'" -- plan --policy vllm
expect_error 2 "^servesim: --tp: expected a value" -- run --tp
expect_error 2 "^servesim: unexpected argument 'extra'" -- live extra

: >"$T/file"
expect_error 1 "file" -- run --num-requests 5 --out "$T/file/sub"

# Only cli/ reads the environment: the CLI hands SERVESIM_SHARED_DATA to the
# cost model through the engine's config (DistServe's default fits).
old_shared=${SERVESIM_SHARED_DATA-}
export SERVESIM_SHARED_DATA=/nonexistent-shared
expect_error 1 "^servesim: .*/nonexistent-shared/profiles/distserve/profiler-a100-80g\.distserve\.json" -- run --num-requests 5 --model opt-13b --gpu a100-80gb-sxm --cost-model distserve
export SERVESIM_SHARED_DATA="$old_shared"

# Durations past the int64 ns clock are errors from the run (exit 1), not a
# SIGABRT on engine_run's time assertion: a swap over a 1 B/s PCIe link
# (accepted by --preemption) and semi-PD with 1e-20 of the SMs to prefill.
expect_error 1 "^servesim: a step on instance 0 would end at .* past the simulator's time range" -- run --arrival gamma:rate=120,cv=3 --lengths lognormal:prompt_mean=1500,prompt_cv=1.5,output_mean=300,output_cv=1 --num-requests 400 --seed 5 --kv-blocks 3000 --order sjf --preemption swap:pcie_gbps=1e-9
expect_error 1 "^servesim: cost model roofline: a step of 1 request .* not a duration" -- run --num-requests 50 --semi-pd sm=1e-20

# Names as users type them: case, a unique prefix, a Hugging Face id map to
# the catalog entry (whose own name the run reports); otherwise the nearest
# names are suggested.  A spec's unknown key lists the keys it takes.
for g in H100-SXM h100 H200; do
	"$BIN" run --gpu $g --num-requests 3 --out "$T/g-$g" --quiet 2>"$T/err" ||
		fail "--gpu $g: $(cat "$T/err")"
done
grep -q "1 x h100-sxm" "$T/g-H100-SXM/summary.txt" && grep -q "1 x h100-sxm" "$T/g-h100/summary.txt" &&
	grep -q "1 x h200-sxm" "$T/g-H200/summary.txt" &&
	pass "--gpu H100-SXM, h100, H200: the catalog's entries" || fail "--gpu by case or prefix"
"$BIN" run --model meta-llama/Llama-3.1-8B-Instruct --num-requests 3 --out "$T/m-hf" --quiet 2>"$T/err" &&
	grep -q "^scenario: llama-3.1-8b," "$T/m-hf/summary.txt" &&
	pass "--model by Hugging Face id" || fail "--model meta-llama/Llama-3.1-8B-Instruct: $(cat "$T/err")"
expect_error 2 "^servesim: unknown GPU 'mi3' \(did you mean mi300x, mi325x, mi355x\? see \`servesim list gpus\`\)$" -- run --gpu mi3
expect_error 2 "^servesim: unknown model 'lama-3.1-8b' \(did you mean llama-3.1-8b" -- run --model lama-3.1-8b
expect_error 2 "^servesim: unknown model 'foo' \(see \`servesim list models\`\)$" -- run --model foo
expect_error 2 "^servesim: --gpus: unknown GPU 'hx00' \(did you mean" -- plan --gpus h100,hx00 --num-requests 20
expect_error 2 "^servesim: --slo: unknown parameter 'foo' \(expected ttft_ms, tpot_ms, e2e_ms or tbt_ms\)$" -- run --slo foo=3

finish
