#!/bin/sh
# Resource limits (docs/limits.md): a configuration that would need more
# memory than the machine has is refused with one line and exit 1 before
# anything big is allocated or generated; a run estimated above 1 GB says
# so first.  SERVESIM_MEMORY_LIMIT stands in for the machine's memory.
. "$(dirname "$0")/cli-lib.sh"

C="--cost-model constant:prefill_ms_per_token=0.02,decode_ms_per_step=8"
GEN="--arrival poisson:rate=1000 --lengths fixed:prompt=10,output=10"
export SERVESIM_MEMORY_LIMIT=2G

# instances x KV blocks: the pools' free lists, reference counts and block tables
expect_error 1 'this run needs about 16\.[0-9] GB \(1 instance x 1000000000 KV blocks, 2000 requests\); the machine has 2\.1 GB$' -- \
	run $C --kv-blocks 1000000000
expect_error 1 'needs about [0-9.]+ GB \(100000 instances x [0-9]+ KV blocks at most, 2000 requests\); the machine has 2\.1 GB$' -- \
	run $C --instances 100000
expect_error 1 'needs about [0-9.]+ GB \(6 instances x 30000000 KV blocks at most' -- \
	run $C --kv-blocks 30000000 --prefill-instances 2 --decode-instances 4 --instances 1000
# the prefix cache's hash, LRU and lookup tables are sized by blocks too:
# 60M blocks fit in 1.5 GB without them, not with them
SERVESIM_MEMORY_LIMIT=1.5G expect_error 1 'needs about 2\.[0-9] GB \(1 instance x 60000000 KV blocks' -- \
	run $C --kv-blocks 60000000 --prefix-cache blocks=1000

# requests: refused before generating them
expect_error 1 'needs about [0-9.]+ GB \(1 instance x [0-9]+ KV blocks, 100000000 requests\); the machine has 2\.1 GB$' -- \
	run $C $GEN --num-requests 100000000
expect_error 1 'needs about [0-9.]+ GB \(1 instance x [0-9]+ KV blocks, 100000000 requests\)' -- \
	run $C $GEN --duration 100000
expect_error 1 'needs about [0-9.]+ GB \(1 instance x [0-9]+ KV blocks, 40000000 requests\)' -- \
	run $C $GEN --duration 100000 --num-requests 40000000 --rate-scale 0.4
# a trace's size is known once read: refused then, before the engine
awk 'BEGIN { OFS = ","; print "arrival_ms,prompt_tokens,output_tokens"; for (i = 0; i < 200000; i++) print i, 10, 10 }' >"$T/big.csv"
SERVESIM_MEMORY_LIMIT=70M expect_error 1 'needs about (9[0-9]|10[0-9]) MB \(1 instance x 1000 KV blocks, 200000 requests\); the machine has 73 MB$' -- \
	run $C --trace "$T/big.csv" --kv-blocks 1000
SERVESIM_MEMORY_LIMIT=70M expect_error 1 'needs about (9[0-9]|10[0-9]) MB .*200000 requests\)' -- \
	live --trace "$T/big.csv" --kv-blocks 1000

# requests x tokens: a request never holds more blocks than its instance's
# pool, and one longer than the model's context is rejected on arrival, so
# a 10^8-token prompt costs nothing (200 MB is plenty)
SERVESIM_MEMORY_LIMIT=200M "$BIN" run --json $C --arrival poisson:rate=1 \
	--lengths fixed:prompt=100000000,output=10 --num-requests 3 >"$T/out" 2>"$T/err"
if [ $? -eq 0 ] && grep -q "\"prompt + output longer than the model's context length\": 3" "$T/out"
then pass "10^8-token prompts are rejected on arrival, not allocated"
else fail "10^8-token prompts: $(cat "$T/err")"; fi

# plan checks each configuration it validates against the same limit
SERVESIM_MEMORY_LIMIT=60M expect_error 1 "configuration 'colocated gpu=h100-sxm tp=1 instances=1 policy=vllm': this run needs about [0-9]+ MB \(1 instance x [0-9]+ KV blocks, 100 requests\); the machine has 63 MB$" -- \
	plan --num-requests 100 --max-gpus 1 --policies vllm --cost-model roofline

# within the limit: runs, quietly below 1 GB
SERVESIM_MEMORY_LIMIT=1G "$BIN" run $C --trace "$T/big.csv" --kv-blocks 1000 --num-requests 5000 >"$T/out" 2>"$T/err"
if [ $? -eq 0 ] && [ ! -s "$T/err" ]; then pass "a small run within the limit says nothing"
else fail "a small run within the limit: $(cat "$T/err")"; fi

# above 1 GB: one line on stderr before the run, none with --quiet
# (a generated workload: a cut of the embedded trace would add the slice
# warning's line, docs/workloads.md)
SERVESIM_MEMORY_LIMIT=4G "$BIN" run $C --arrival poisson:rate=4 --lengths fixed:prompt=256,output=32 \
	--kv-blocks 70000000 --num-requests 20 >"$T/out" 2>"$T/err"
if [ $? -eq 0 ] && [ "$(wc -l <"$T/err")" -eq 1 ] &&
   grep -q -E '^servesim: this run needs about 1\.[0-9] GB \(1 instance x 70000000 KV blocks, 20 requests\)$' "$T/err"
then pass "a run over 1 GB announces its estimate: $(cat "$T/err")"
else fail "a run over 1 GB: $(cat "$T/err")"; fi
SERVESIM_MEMORY_LIMIT=4G "$BIN" run $C --kv-blocks 70000000 --num-requests 20 --quiet >"$T/out" 2>"$T/err"
if [ $? -eq 0 ] && [ ! -s "$T/err" ]; then pass "--quiet keeps the estimate to itself"
else fail "--quiet printed: $(cat "$T/err")"; fi

# a malformed SERVESIM_MEMORY_LIMIT is named and ignored
SERVESIM_MEMORY_LIMIT=lots "$BIN" run $C --num-requests 10 $GEN --quiet >"$T/out" 2>"$T/err"
if [ $? -eq 0 ] && grep -q "SERVESIM_MEMORY_LIMIT: expected bytes with an optional K, M or G suffix, got 'lots'; ignored" "$T/err"
then pass "a malformed SERVESIM_MEMORY_LIMIT is named"
else fail "SERVESIM_MEMORY_LIMIT=lots: $(cat "$T/err")"; fi

finish
