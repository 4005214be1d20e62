#!/bin/sh
# The serving stack as its own schema (issue 31 section 1; docs/engines.md,
# "The serving stack"): `list stacks`, --stack NAME | KEY=VALUE,... |
# NAME,KEY=VALUE,..., --stack-catalog, the engine profile's default stack,
# the legacy api_* keys of user catalogs, --engine none, the summary's stack
# line and summary.json, and the one-line errors.
. "$(dirname "$0")/cli-lib.sh"

RUN="--model llama-3.1-8b --gpu h100-sxm --num-requests 60 --quiet --json"
run() { "$BIN" run $RUN "$@"; }

# list stacks: one per line, name first; every stack the shipped profiles name
"$BIN" list stacks >"$T/list" 2>"$T/err" || fail "list stacks: $(cat "$T/err")"
for s in none local-vllm local-sglang local-trtllm gateway llm-d-exp0 distserve-vllm \
	silicon-sglang silicon-trtllm distserve splitwise-2023; do
	grep -q "^$s " "$T/list" && pass "list stacks names $s first on its line" ||
		fail "list stacks lacks $s: $(cat "$T/list")"
done
"$BIN" list stacks --json >"$T/list.json" 2>"$T/err" || fail "list stacks --json: $(cat "$T/err")"
python3 - "$T/list.json" <<'PY' && pass "list stacks --json: every key of each stack, local-vllm's values" || fail "list stacks --json: $(head -c 600 "$T/list.json")"
import json, sys
st = {s["name"]: s for s in json.load(open(sys.argv[1]))}
keys = {"name", "describes", "rtt_ms", "gateway_ms", "frontend_ms", "tokenize_us_per_token",
        "detok_us_per_token", "cv", "source"}
assert all(keys <= set(s) for s in st.values()), st
lv = st["local-vllm"]
assert (lv["frontend_ms"], lv["tokenize_us_per_token"], lv["detok_us_per_token"], lv["cv"]) == (10.3, 1, 20, 0.3), lv
assert st["gateway"]["gateway_ms"] == 2 and st["none"]["frontend_ms"] == 0, st
PY

# the default: the engine profile's stack, said as such in the text summary
"$BIN" run --model llama-3.1-8b --gpu h100-sxm --num-requests 20 >"$T/deftext" 2>&1 &&
	grep -q "serving stack local-vllm (default)" "$T/deftext" &&
	pass "text summary: serving stack local-vllm (default)" ||
	fail "text summary lacks 'serving stack local-vllm (default)': $(grep -A2 '^stack' "$T/deftext")"
run >"$T/def.json" 2>"$T/err" || fail "run: $(cat "$T/err")"
run --stack local-vllm >"$T/named.json" 2>"$T/err" || fail "--stack local-vllm: $(cat "$T/err")"
run --stack none >"$T/none.json" 2>"$T/err" || fail "--stack none: $(cat "$T/err")"
run --stack frontend_ms=100 >"$T/over.json" 2>"$T/err" || fail "--stack frontend_ms=100: $(cat "$T/err")"
run --stack none,frontend_ms=40 >"$T/nover.json" 2>"$T/err" || fail "--stack none,frontend_ms=40: $(cat "$T/err")"
run --stack gateway >"$T/gw.json" 2>"$T/err" || fail "--stack gateway: $(cat "$T/err")"
python3 - "$T" <<'PY' && pass "--stack by name and by override: summary.json carries the stack; TTFT follows its terms" || fail "--stack by name / override: see above"
import json, os, sys
d = {k: json.load(open(os.path.join(sys.argv[1], k + ".json")))
     for k in ("def", "named", "none", "over", "nover", "gw")}
st = lambda k: d[k]["config"]["serving_stack"]
p50 = lambda k: d[k]["ttft_ms"]["p50"]
# the default and the named default are the same run
assert st("def")["name"] == "local-vllm" and d["def"]["stack"]["serving_stack"]["source"] == "default", d["def"]["stack"]
assert d["named"]["stack"]["serving_stack"] == {"spec": "local-vllm", "source": "command line"}, d["named"]["stack"]
assert d["def"]["ttft_ms"] == d["named"]["ttft_ms"] and d["def"]["e2e_ms"] == d["named"]["e2e_ms"]
# overrides on top of the engine's default keep its other terms
assert st("over")["frontend_ms"] == 100 and st("over")["detok_us_per_token"] == 20 and st("over")["cv"] == 0.3, st("over")
assert st("nover")["frontend_ms"] == 40 and st("nover")["cv"] == 0 and st("nover")["detok_us_per_token"] == 0, st("nover")
assert st("gw")["gateway_ms"] == 2, st("gw")
# the way in moves TTFT: none < local-vllm (10.3 ms) < local-vllm at 100 ms
assert p50("none") + 5 < p50("def") < p50("over") - 20, [p50(k) for k in ("none", "def", "over")]
# none,frontend_ms=40 (constant) lands where 40 ms says, within the jitter
assert abs(p50("nover") - p50("none") - 40) < 5, (p50("nover"), p50("none"))
PY

# --engine none: no stack unless given, and the same run as --stack none there
run --engine none >"$T/en.json" 2>"$T/err" || fail "--engine none: $(cat "$T/err")"
run --engine none --stack none >"$T/enn.json" 2>"$T/err" || fail "--engine none --stack none: $(cat "$T/err")"
run --engine none --stack frontend_ms=30,cv=0 >"$T/enf.json" 2>"$T/err" || fail "--engine none --stack frontend_ms=30: $(cat "$T/err")"
python3 - "$T" <<'PY' && pass "--engine none implies stack none (not named: its summary reads as before stacks); --stack still applies" || fail "--engine none and stacks"
import json, os, sys
a, b, c = (json.load(open(os.path.join(sys.argv[1], k + ".json"))) for k in ("en", "enn", "enf"))
assert "serving_stack" not in a["config"] and "serving_stack" not in a["stack"], a["stack"]
assert b["config"]["serving_stack"]["name"] == "none", b["config"]
assert b["stack"]["serving_stack"] == {"spec": "none", "source": "command line"}, b["stack"]
assert a["ttft_ms"] == b["ttft_ms"] and a["e2e_ms"] == b["e2e_ms"]
assert abs(c["ttft_ms"]["p50"] - a["ttft_ms"]["p50"] - 30) < 1e-6 * 30 + 0.5, (a["ttft_ms"], c["ttft_ms"])
PY

# a user catalog with the legacy api_* keys runs as the same stack given by
# --stack, to the bit (requests.csv and every figure of summary.json)
cat >"$T/legacy.json" <<'J'
{"engines": [{"name": "old", "versions": "test", "source": "test", "sched_us": 100,
              "api_in_ms": 12.345678901, "api_out_ms": 0.37, "api_cv": 0.7}]}
J
cat >"$T/new.json" <<'J'
{"engines": [{"name": "old", "versions": "test", "source": "test", "sched_us": 100}]}
J
cat >"$T/stacks.json" <<'J'
{"stacks": [{"name": "old-stack", "describes": "test", "source": "test",
             "frontend_ms": 12.345678901, "detok_us_per_token": 370, "cv": 0.7}]}
J
"$BIN" run $RUN --engine old --engine-catalog "$T/legacy.json" --out "$T/leg" >/dev/null 2>"$T/err" ||
	fail "legacy catalog: $(cat "$T/err")"
"$BIN" run $RUN --engine old --engine-catalog "$T/new.json" --stack-catalog "$T/stacks.json" \
	--stack old-stack --out "$T/stk" >/dev/null 2>"$T/err" || fail "--stack-catalog: $(cat "$T/err")"
cmp -s "$T/leg/requests.csv" "$T/stk/requests.csv" &&
	pass "legacy api_* catalog: requests.csv byte for byte that of the same --stack" ||
	fail "legacy api_* catalog and --stack differ in requests.csv"
python3 - "$T/leg/summary.json" "$T/stk/summary.json" <<'PY' && pass "legacy api_* catalog: summary.json's figures those of the same --stack" || fail "legacy api_* catalog and --stack differ in summary.json"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["stack"]["serving_stack"]["source"].startswith("the engine profile's api_in_ms"), a["stack"]
for d in (a, b):
    d["config"].pop("engine"); d["config"].pop("serving_stack"); d["stack"].pop("serving_stack")
    d.pop("run", None)
assert a == b, [k for k in a if a[k] != b.get(k)]
PY

# plan takes --stack too; its fingerprint moves with the stack
"$BIN" plan --model llama-3.1-8b --gpus h100-sxm --tp 1 --max-gpus 1 --num-requests 40 --dry-run \
	--stack gateway >/dev/null 2>"$T/err" && pass "plan --stack gateway --dry-run" ||
	fail "plan --stack gateway: $(cat "$T/err")"

# errors: one line; a bad command line exits 2, a bad catalog file 1
expect_error 2 "^servesim: --stack: unknown stack 'lokal' \(known: none, local-vllm" -- run $RUN --stack lokal
expect_error 2 "^servesim: --stack: unknown key 'frontend' \(expected one of rtt_ms, gateway_ms, frontend_ms" -- run $RUN --stack frontend=3
expect_error 2 "^servesim: --stack: field \"rtt_ms\" is -1, expected a number >= 0" -- run $RUN --stack local-vllm,rtt_ms=-1
expect_error 2 "^servesim: --stack: frontend_ms=abc: expected a number" -- run $RUN --stack frontend_ms=abc
expect_error 2 "^servesim: --stack: 'gateway': expected a stack name first" -- run $RUN --stack frontend_ms=1,gateway
expect_error 2 "^servesim: unknown option '--stack'" -- live --stack none
printf '{"stacks": [{"name": "bad", "describes": "t", "source": "t", "frontend_ms": -2}]}\n' >"$T/bad.json"
expect_error 1 "bad.json: stacks\[0\] \"bad\": field \"frontend_ms\" is -2, expected a number >= 0" -- run $RUN --stack-catalog "$T/bad.json"
printf '{"stacks": [{"name": "bad", "describes": "t", "source": "t", "frontend": 2}]}\n' >"$T/typo.json"
expect_error 1 "typo.json: .*frontend" -- run $RUN --stack-catalog "$T/typo.json"
printf '{"engines": [{"name": "e", "versions": "t", "source": "t", "stack": "nowhere"}]}\n' >"$T/ens.json"
expect_error 1 "^servesim: engine e: its stack 'nowhere' is not in the stack catalog" -- run $RUN --engine e --engine-catalog "$T/ens.json"
printf '{"engines": [{"name": "e", "versions": "t", "source": "t", "stack": "none", "api_in_ms": 3}]}\n' >"$T/both.json"
expect_error 1 "both.json: .*\"stack\" with api_in_ms, api_out_ms or api_cv" -- run $RUN --engine e --engine-catalog "$T/both.json"
finish
