#!/bin/sh
# --kv-remote on the command line (issue 16 section 4, docs/kv-cache.md
# "Remote tier"): a store shared by the instances finds on instance 1 the
# prefix instance 0 computed, summary.json gains kv_tiers only when it is
# on, and bad specs exit 2 with one line.
. "$(dirname "$0")/cli-lib.sh"

# Mooncake JSON lines: 4 requests 2 s apart with the same 2 hash blocks
# (1024 tokens) and 100 tokens of their own; round-robin over 2 instances
# puts them on 0, 1, 0, 1.
cat >"$T/t.jsonl" <<'J'
{"timestamp": 0, "input_length": 1124, "output_length": 4, "hash_ids": [1, 2, 3]}
{"timestamp": 2000, "input_length": 1124, "output_length": 4, "hash_ids": [1, 2, 4]}
{"timestamp": 4000, "input_length": 1124, "output_length": 4, "hash_ids": [1, 2, 5]}
{"timestamp": 6000, "input_length": 1124, "output_length": 4, "hash_ids": [1, 2, 6]}
J
A="--trace $T/t.jsonl --instances 2 --prefix-cache on --model llama-3.1-8b --gpu h100-sxm"

if "$BIN" run $A --out "$T/off" >"$T/o1" 2>&1 &&
   "$BIN" run $A --kv-remote gb=100 --out "$T/on" >"$T/o2" 2>&1; then
	pass "--kv-remote runs"
else
	fail "--kv-remote: $(cat "$T/o1" "$T/o2" | head -5)"
fi
grep -q '"kv_tiers"' "$T/off/summary.json" && fail "kv_tiers without --kv-remote"
grep -q '"kv_remote"' "$T/off/summary.json" && fail "config.kv_remote without --kv-remote"
grep -q '^KV tiers:' "$T/o1" && fail "KV tiers line without --kv-remote"
# request 2 (instance 1) fetches the 1024 shared tokens from the store;
# requests 3 and 4 hit their own GPU: 1024 of 4 x 1124 prompt tokens
# without the store (request 3 on instance 0), 3 x 1024 with it
if command -v python3 >/dev/null; then
	python3 - "$T/off/summary.json" "$T/on/summary.json" <<'P' || fail "summary.json: kv_tiers"
import json, sys
off = json.load(open(sys.argv[1]))
on = json.load(open(sys.argv[2]))
assert off["prefix_cache"]["hit_tokens"] == 2048, off["prefix_cache"]
assert on["prefix_cache"]["hit_tokens"] == 3072, on["prefix_cache"]
t = on["kv_tiers"]
assert set(t) == {"gpu", "remote"}, t
assert t["gpu"]["hit_tokens"] == 2048, t
r = t["remote"]
assert set(r) == {"hit_tokens", "blocks_fetched", "bytes", "fetches", "fetch_s", "puts",
                  "evictions", "capacity_blocks", "capacity_gb"}, r
assert r["hit_tokens"] == 1024 and r["blocks_fetched"] == 64 and r["fetches"] == 1, r
assert r["fetch_s"] > 0 and r["evictions"] == 0, r
assert abs(r["capacity_gb"] - 100) < 0.01, r
assert on["config"]["kv_remote"] == "gb=100", on["config"]
P
	pass "summary.json kv_tiers: gpu and remote hits"
fi
grep -q '^KV tiers: hits 2048 tokens on GPU, 1024 from the remote store (64 blocks' "$T/o2" ||
	fail "KV tiers line: $(grep 'KV tiers' "$T/o2")"

expect_error 2 \
	"^servesim: --kv-remote: expected gb=G\[,bw_gbps=B,latency_us=L\], got 'bw_gbps=1'" -- \
	run $A --kv-remote bw_gbps=1
expect_error 2 "^servesim: --kv-remote: expected 0 < gb <= 1e9, 0 < bw_gbps < 1e6 and \
0 <= latency_us <= 1e9, got 'gb=0'" -- \
	run $A --kv-remote gb=0
expect_error 2 "^servesim: --kv-remote: unknown parameter 'bw'" -- \
	run $A --kv-remote gb=1,bw=3
expect_error 2 \
	"^servesim: --kv-remote needs prefix caching: add --prefix-cache on .or blocks=N.$" -- \
	run --trace "$T/t.jsonl" --kv-remote gb=1
"$BIN" run --help | grep -q -- "--kv-remote SPEC" || fail "--help lacks --kv-remote"

finish
