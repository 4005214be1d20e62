# Bad input gets one clear line naming the input and what was expected, a
# non-zero exit, and no output files.
. "$(dirname "$0")/cli-lib.sh"

expect_error 2 "unknown option '--bogus'" -- run --bogus
expect_error 2 "unknown command 'fly'" -- fly
expect_error 2 "--tp: expected an integer in 1..64, got '0'" -- run --tp 0
expect_error 2 "--num-requests: expected a positive integer, got 'ten'" -- run --num-requests ten
expect_error 2 "unknown model 'gpt-9'" -- run --model gpt-9
expect_error 2 "unknown GPU 'tpu'" -- run --gpu tpu
expect_error 2 "--slo" -- run --slo fast
expect_error 1 "unknown batch policy 'magic'" -- run --policy magic
expect_error 1 "unknown parameter 'max_seqs'" -- run --policy vllm:max_seqs=3
expect_error 1 "unknown router" -- run --router fastest
expect_error 1 "cost" -- run --cost-model psychic
expect_error 1 "does not fit" -- run --model llama-3.1-70b --gpu l40s
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

expect_error 1 "lengths" -- run --arrival poisson:rate=2 --num-requests 10
expect_error 1 "rate" -- run --arrival poisson:rate=-1 --lengths fixed:prompt=10,output=5 --num-requests 10

: >"$T/file"
expect_error 1 "file" -- run --num-requests 5 --out "$T/file/sub"

finish
