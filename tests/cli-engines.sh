#!/bin/sh
# Engine profiles through the command line (issue 11 section 1): `list
# engines`, --engine and --engine-catalog in run and plan, the summary naming
# the profile, and the one-line errors.
. "$(dirname "$0")/cli-lib.sh"

# list engines: one per line, name first, every shipped profile and "none"
"$BIN" list engines >"$T/list" 2>"$T/err" || fail "list engines: $(cat "$T/err")"
for e in none vllm vllm-v0 sglang trtllm distserve splitwise-2023 vllm-rocm sglang-rocm; do
	if awk -v e="$e" '$1 == e { found = 1 } END { exit !found }' "$T/list"; then
		pass "list engines names $e first on its line"
	else
		fail "list engines lacks a line starting with $e: $(cat "$T/list")"
	fi
done
[ "$(wc -l <"$T/list")" -eq 9 ] && pass "list engines: one line per profile" ||
	fail "list engines: expected 9 lines, got $(wc -l <"$T/list")"
# a per-TP-worker dispatch term is shown where a profile has one, and only there
[ "$(grep -c 'us/TP worker' "$T/list")" -eq 1 ] && grep -q '^splitwise-2023 .* us/TP worker' "$T/list" &&
	pass "list engines shows splitwise-2023's per-worker dispatch" ||
	fail "list engines: dispatch term: $(grep 'TP worker' "$T/list")"
[ "$(grep -c '(default of run and plan)$' "$T/list")" -eq 1 ] &&
	grep -q '^vllm .*(default of run and plan)$' "$T/list" &&
	pass "list engines marks vllm, and only vllm, as the default" ||
	fail "list engines does not mark vllm as the default: $(cat "$T/list")"
# how offloaded KV comes back is shown where a profile loads layer by layer
[ "$(grep -c 'offloaded KV loaded layer by layer' "$T/list")" -eq 2 ] &&
	grep -q '^sglang .*offloaded KV loaded layer by layer' "$T/list" &&
	grep -q '^sglang-rocm .*offloaded KV loaded layer by layer' "$T/list" &&
	pass "list engines shows sglang's and sglang-rocm's layer-wise KV loads, and only those" ||
	fail "list engines: kv_load: $(grep 'layer by layer' "$T/list")"

# --engine adds its host work and serving stack: a light-load TTFT grows,
# and the summary names the profile
run() {
	"$BIN" run --model llama-3.1-8b --gpu h100-sxm --arrival poisson:rate=1 \
		--lengths fixed:prompt=256,output=32 --num-requests 20 --seed 3 --json "$@"
}
run --engine none >"$T/none.json" 2>"$T/err" || fail "run --engine none: $(cat "$T/err")"
run --engine vllm >"$T/vllm.json" 2>"$T/err" || fail "run --engine vllm: $(cat "$T/err")"
# vllm is the default of run: without --engine the run is --engine vllm's
run >"$T/default.json" 2>"$T/err" || fail "run without --engine: $(cat "$T/err")"
cmp -s "$T/default.json" "$T/vllm.json" && grep -q '"engine": "vllm"' "$T/default.json" &&
	pass "run without --engine is --engine vllm, and summary.json says so" ||
	fail "run without --engine differs from --engine vllm: $(grep '"engine"' "$T/default.json")"
"$BIN" run --model llama-3.1-8b --gpu h100-sxm --num-requests 5 >"$T/deftext" 2>&1 &&
	grep -q "engine vllm," "$T/deftext" && pass "text summary names the default engine" ||
	fail "text summary lacks 'engine vllm': $(head -3 "$T/deftext")"
python3 - "$T/none.json" "$T/vllm.json" <<'EOF' && pass "--engine vllm: named in summary.json, TTFT longer, TPOT from its host terms" || fail "--engine vllm did not change the run as expected"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["engine"] == "none" and b["engine"] == "vllm", (a["engine"], b["engine"])
# the shipped vllm entry's fitted scheduler (data/engines.json), printed at %.17g
sched = float(b["config"]["engine"].split(" sched_us=")[1].split()[0])
assert b["config"]["engine"].startswith("vllm: policy=- ") and abs(sched - 59.9) < 1e-9, b["config"]["engine"]
# vllm's default serving stack (local-vllm) adds about 10.3 ms on the way in
assert b["ttft_ms"]["p50"] > a["ttft_ms"]["p50"] + 5, (a["ttft_ms"], b["ttft_ms"])
# the profile's host work replaces the cost model's own host estimate
assert b["tpot_ms"]["p50"] != a["tpot_ms"]["p50"], (a["tpot_ms"], b["tpot_ms"])
EOF
"$BIN" run --model llama-3.1-8b --gpu h100-sxm --num-requests 5 --engine sglang >"$T/text" 2>&1 &&
	grep -q "engine sglang" "$T/text" && pass "text summary names the engine" ||
	fail "text summary lacks 'engine sglang': $(head -3 "$T/text")"

# a profile's own batching rules apply unless --policy is given
run --engine vllm-v0 >"$T/v0.json" 2>"$T/err" || fail "run --engine vllm-v0: $(cat "$T/err")"
run --engine vllm-v0 --policy sarathi >"$T/v0s.json" 2>"$T/err" || fail "run --engine vllm-v0 --policy sarathi: $(cat "$T/err")"
python3 - "$T/v0.json" "$T/v0s.json" <<'EOF' && pass "--engine vllm-v0 sets vllm:v0=on,chunked=off; --policy overrides it" || fail "engine policy not applied as documented"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["config"]["policy"] == "vllm:v0=on,chunked=off", a["config"]["policy"]
assert b["config"]["policy"] == "sarathi", b["config"]["policy"]
EOF

# errors: an unknown name is a usage error naming the known ones; live takes no --engine
expect_error 2 "^servesim: --engine: unknown engine 'vlm' \(known: none, vllm, vllm-v0, sglang" -- \
	run --engine vlm
expect_error 2 "engine" -- live --engine vllm

# --engine-catalog adds or overrides profiles; a bad file is one line, exit 1
cat >"$T/eng.json" <<'EOF'
{"engines": [{"name": "slow", "versions": "test", "source": "test", "sched_us": 50000}]}
EOF
run --engine slow --engine-catalog "$T/eng.json" >"$T/slow.json" 2>"$T/err" ||
	fail "--engine-catalog: $(cat "$T/err")"
python3 - "$T/none.json" "$T/slow.json" <<'EOF' && pass "--engine-catalog: a 50 ms scheduler slows every step" || fail "--engine-catalog profile not applied"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["engine"] == "slow"
assert b["tpot_ms"]["p50"] > a["tpot_ms"]["p50"] + 45, (a["tpot_ms"], b["tpot_ms"])
EOF
printf '{"engines": [{"name": "x", "versions": "v", "source": "s", "graph_sizes": [8, 4]}]}\n' >"$T/bad.json"
expect_error 1 "bad.json: engines\[0\] \"x\": graph_sizes must be ascending" -- \
	run --engine x --engine-catalog "$T/bad.json"
printf '{"engines": [\n' >"$T/trunc.json"
expect_error 1 "trunc.json:2: invalid JSON" -- run --engine-catalog "$T/trunc.json"

# multi-step scheduling through --engine-catalog: a profile with
# scheduler_steps 4 delivers each request's tokens in bursts of 4 (3 of 4
# ITL gaps are 0, so the ITL median is 0) while its TPOT mean stays the
# k = 1 run's within 5% (outputs of 33 tokens: 32 gaps, 8 whole bursts;
# what remains is a mid-burst arrival waiting for the boundary and the
# prefill steps between bursts); summary.json names the setting
cat >"$T/ms.json" <<'EOF2'
{"engines": [{"name": "k1", "versions": "test", "source": "test"},
             {"name": "k4", "versions": "test", "source": "test", "scheduler_steps": 4}]}
EOF2
msrun() {
	"$BIN" run --model llama-3.1-8b --gpu h100-sxm --arrival poisson:rate=2 \
		--lengths fixed:prompt=256,output=33 --num-requests 40 --seed 5 --json \
		--engine-catalog "$T/ms.json" "$@"
}
msrun --engine k1 >"$T/k1.json" 2>"$T/err" || fail "run --engine k1: $(cat "$T/err")"
msrun --engine k4 >"$T/k4.json" 2>"$T/err" || fail "run --engine k4: $(cat "$T/err")"
msrun --engine k4 >"$T/k4b.json" 2>"$T/err" || fail "run --engine k4 again: $(cat "$T/err")"
python3 - "$T/k1.json" "$T/k4.json" <<'EOF2' && pass "scheduler_steps 4: tokens in bursts (ITL p50 0), TPOT mean kept, named in summary.json" || fail "scheduler_steps 4 through --engine-catalog not as documented"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["config"]["engine"].endswith(" scheduler_steps=4"), b["config"]["engine"]
assert "scheduler_steps" not in a["config"]["engine"], a["config"]["engine"]
assert a["itl_ms"]["p50"] > 0 and b["itl_ms"]["p50"] == 0, (a["itl_ms"], b["itl_ms"])
# the other gap of a burst spans its 4 steps
assert b["itl_ms"]["p90"] > 3.5 * a["itl_ms"]["p50"], (a["itl_ms"], b["itl_ms"])
assert abs(b["tpot_ms"]["mean"] / a["tpot_ms"]["mean"] - 1) < 0.05, (a["tpot_ms"], b["tpot_ms"])
EOF2
cmp -s "$T/k4.json" "$T/k4b.json" && pass "scheduler_steps 4: a second run is the same" ||
	fail "scheduler_steps 4: two runs differ"
printf '{"engines": [{"name": "x", "versions": "v", "source": "s", "scheduler_steps": 0}]}\n' >"$T/bad-ms.json"
expect_error 1 "bad-ms.json: engines\[0\] \"x\": field \"scheduler_steps\" is 0, expected 1..1024" -- \
	run --engine x --engine-catalog "$T/bad-ms.json"

# plan takes the profile too, vllm by default, and it changes the plan's
# fingerprint
"$BIN" plan --help | grep -q -- "--engine NAME" && pass "plan --help lists --engine" ||
	fail "plan --help lacks --engine"
"$BIN" plan --help | grep -q -- "--engine NAME.*(default vllm)" &&
	"$BIN" run --help | grep -q -- "--engine NAME.*(default vllm)" &&
	pass "run and plan --help name vllm as the default engine" ||
	fail "--help does not name the default engine"
PL="plan --num-requests 60 --max-gpus 1 --modes colocated --policies vllm --cost-model roofline --json"
"$BIN" $PL >"$T/pdef.json" 2>"$T/err" && "$BIN" $PL --engine vllm >"$T/pvllm.json" 2>>"$T/err" &&
	"$BIN" $PL --engine none >"$T/pnone.json" 2>>"$T/err" || fail "plan --engine runs: $(cat "$T/err")"
python3 - "$T/pdef.json" "$T/pvllm.json" "$T/pnone.json" <<'EOF' && pass "plan without --engine plans under vllm (its fingerprint, named in plan.json), --engine none differs" || fail "plan's default engine is not vllm"
import json, sys
d, v, n = (json.load(open(p)) for p in sys.argv[1:4])
assert d["fingerprint"] == v["fingerprint"] != n["fingerprint"], (d["fingerprint"], v["fingerprint"], n["fingerprint"])
assert d["configurations"] == v["configurations"], (d["configurations"], v["configurations"])
assert d["engine"] == "vllm" and n["engine"] == "none", (d["engine"], n["engine"])
EOF
"$BIN" plan --num-requests 60 --max-gpus 1 --modes colocated --policies vllm --cost-model roofline >"$T/ptext" 2>"$T/perr" &&
	head -1 "$T/ptext" | grep -q ', engine vllm$' && pass "plan's text names the engine profile" ||
	fail "plan's text lacks the engine: $(head -1 "$T/ptext")"

# KV capacity rules (docs/kv-cache.md, "Engine rules"): trtllm's profile
# sizes the KV by TensorRT-LLM's rule (0.9 of the memory free after weights
# and activations, blocks of 32) and the summary says so; an explicit
# --gpu-memory-utilization is vLLM's rule whatever the profile, and
# --kv-free-fraction TensorRT-LLM's with any profile.
kvrun() {
	"$BIN" run --model llama-3.1-8b --gpu h100-sxm --num-requests 5 --cost-model roofline "$@"
}
blocks() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["kv_blocks_per_instance"])' "$1"; }
PY=$(command -v python3) || PY=
if [ -n "$PY" ]; then
	kvrun --engine trtllm --json >"$T/kv-trt.json" 2>"$T/err" &&
		kvrun --engine vllm --json >"$T/kv-vllm.json" 2>>"$T/err" &&
		kvrun --engine trtllm --gpu-memory-utilization 0.9 --block-size 16 --json >"$T/kv-trt-total.json" 2>>"$T/err" &&
		kvrun --engine vllm --kv-free-fraction 0.9 --block-size 32 --json >"$T/kv-vllm-free.json" 2>>"$T/err" ||
		fail "KV rule runs: $(cat "$T/err")"
	"$PY" - "$T" <<'EOF2' && pass "KV rules: trtllm's free-memory rule in blocks of 32, summary.json says so; --gpu-memory-utilization wins over the profile; --kv-free-fraction works with any profile" || fail "KV rules: $(cat "$T"/kv-*.json | grep -E 'kv_blocks_per|kv_free|gpu_memory|block_size')"
import json, sys
t = sys.argv[1]
j = {k: json.load(open("%s/kv-%s.json" % (t, k))) for k in ("trt", "vllm", "trt-total", "vllm-free")}
c = j["trt"]["config"]
assert c["block_size"] == 32 and c["kv_free_fraction"] == 0.9 and c["gpu_memory_utilization"] == 0, c
assert "kv_free_fraction" not in j["vllm"]["config"] and j["vllm"]["config"]["block_size"] == 16
b = {k: v["kv_blocks_per_instance"] for k, v in j.items()}
# the same rule and block size give the same pool, whichever profile
assert b["trt-total"] == b["vllm"], b
assert b["vllm-free"] == b["trt"], b
# Llama-3.1-8B on one H100 leaves more to the free rule: more tokens in blocks of 32
assert 32 * b["trt"] > 16 * b["vllm"], b
EOF2
fi
kvrun --engine trtllm >"$T/kv-trt.txt" 2>"$T/err" &&
	grep -q "^          KV cache sized by 0.9 of the memory free after weights and activations (TensorRT-LLM's free_gpu_memory_fraction, engine trtllm), blocks of 32 tokens$" "$T/kv-trt.txt" &&
	kvrun --engine trtllm --gpu-memory-utilization 0.85 >"$T/kv-trt85.txt" 2>>"$T/err" &&
	grep -q "KV cache sized by 0.85 of GPU memory for weights, activations and KV (vLLM's gpu_memory_utilization, --gpu-memory-utilization), blocks of 32 tokens$" "$T/kv-trt85.txt" &&
	kvrun --engine vllm >"$T/kv-vllm.txt" 2>>"$T/err" && ! grep -q "KV cache sized by" "$T/kv-vllm.txt" &&
	pass "the summary names the KV rule unless it is vLLM's default" ||
	fail "summary KV rule line: $(cat "$T/err"; grep 'KV cache' "$T"/kv-*.txt)"
expect_error 2 "^servesim: --kv-free-fraction: expected a fraction in \(0, 1\], got '0'$" -- run --kv-free-fraction 0
expect_error 2 "^servesim: --kv-free-fraction: expected a fraction in \(0, 1\], got '1.5'$" -- run --kv-free-fraction 1.5
expect_error 2 "^servesim: --kv-free-fraction: expected a fraction in \(0, 1\], got 'most'$" -- plan --kv-free-fraction most
expect_error 2 "^servesim: --gpu-memory-utilization and --kv-free-fraction: expected one of them" -- run --gpu-memory-utilization 0.9 --kv-free-fraction 0.9
expect_error 2 "^servesim: --kv-free-fraction: expected a fraction in \(0, 1\], got '2'$" -- calibrate fit-engine --no-fit --kv-free-fraction 2 x.csv
expect_error 2 "^servesim: --gpu-memory-utilization and --kv-free-fraction: expected one of them" -- calibrate fit-engine --no-fit --gpu-memory-utilization 0.9 --kv-free-fraction 0.9 x.csv
expect_error 2 "^servesim: --block-size: expected an integer in 1..4096, got '0'$" -- calibrate fit-engine --no-fit --block-size 0 x.csv

# an unknown engine names a dozen known ones at most, then how many more
# (a user catalog of thousands made the line a page; issue 34 §5)
python3 -c "
import json, sys
json.dump({'engines': [{'name': 'e%d' % i, 'versions': 't', 'source': 't'} for i in range(500)]}, open(sys.argv[1], 'w'))" "$T/many.json"
expect_error 2 "^servesim: --engine: unknown engine 'nope' \(known: none, vllm, .* and [0-9]+ more: \`servesim list engines\`\)$" -- \
	run --num-requests 5 --engine-catalog "$T/many.json" --engine nope
finish
