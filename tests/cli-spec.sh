#!/bin/sh
# Speculative decoding in the engine (issue 32; docs/speculation.md): a
# verify emits 1 + accepted tokens, the measured acceptance length follows
# the acceptance model, rejected drafts cost time, the drafter costs time
# and memory as its method says, every request still gets exactly its
# output tokens under every batch policy and a token budget that cuts
# verifies short, runs are deterministic, the dynamic rule turns drafting
# off, and bad or unsupported --spec exits 2 with one line.
# shellcheck source-path=SCRIPTDIR source=cli-lib.sh
. "$(dirname "$0")/cli-lib.sh"

BASE="--model llama-3.1-8b --gpu h100-sxm --lengths fixed:prompt=512,output=128 --seed 3"

# run NAME SPEC [options...]: a closed loop of one client, 20 requests
run() {
	name=$1 spec=$2
	shift 2
	# shellcheck disable=SC2086
	"$BIN" run $BASE --concurrency 1 --num-requests 20 --spec "$spec" --out "$T/$name" "$@" \
		>/dev/null 2>"$T/$name.err" || fail "run $name ($spec): $(cat "$T/$name.err")"
}

# field NAME EXPR: a value of run NAME's summary.json (j)
field() {
	python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$T/$1/summary.json"
}

run off off
run all eagle3:k=3,alpha=1
run none eagle3:k=3,alpha=0.000001
run some eagle3:k=3,alpha=0.8,decay=0.9 --num-requests 60
run ngram ngram:k=4,alpha=1
run draft draft:k=4,draft=llama-3.2-1b,alpha=0.8,decay=0.9

# no key "speculation" without --spec: summaries are as before
[ "$(field off "'speculation' in j")" = False ] && pass "no speculation figures without --spec" ||
	fail "summary.json of a run without --spec has speculation figures"

# every draft accepted: each verify emits k + 1 tokens, none rejected
[ "$(field all "j['speculation']['acceptance_length']")" = 4.0 ] &&
	[ "$(field all "j['speculation']['rejected_tokens']")" = 0 ] &&
	pass "alpha=1, k=3: 4.0 tokens per verify, no rejected token" ||
	fail "alpha=1, k=3: $(field all "j['speculation']")"
# nothing accepted: 1 token per verify, and slower than no speculation
# (the verify reads 4 tokens, the head drafts 3)
python3 - "$T/off/summary.json" "$T/none/summary.json" "$T/all/summary.json" <<'PY' &&
import json, sys
off, none, allacc = (json.load(open(p)) for p in sys.argv[1:])
assert none["speculation"]["acceptance_length"] == 1.0, none["speculation"]
assert none["tpot_ms"]["mean"] > off["tpot_ms"]["mean"] * 1.05, (none["tpot_ms"], off["tpot_ms"])
# all accepted at k = 3: faster than without, but not 4x (the drafter and
# the wider verify cost something)
r = off["tpot_ms"]["mean"] / allacc["tpot_ms"]["mean"]
assert 2.0 < r < 4.0, r
PY
	pass "nothing accepted is slower than no speculation; all accepted is 2-4x faster at k=3" ||
	fail "speculation's TPOT against none: $(field none "j['tpot_ms']['mean']") / $(field off "j['tpot_ms']['mean']") / $(field all "j['tpot_ms']['mean']")"

# the measured acceptance length is the model's AL(k) = 1 + 0.8 + 0.8^2 0.9
# + 0.8^3 0.9^3 = 2.7493, within sampling noise (~2,800 verifies)
python3 - "$T/some/summary.json" <<'PY' && pass "alpha=0.8, decay=0.9, k=3: measured acceptance length within 4% of AL(3) = 2.749" || fail "measured AL: $(field some "j['speculation']")"
import json, sys
s = json.load(open(sys.argv[1]))["speculation"]
al = 1 + 0.8 + 0.8**2 * 0.9 + 0.8**3 * 0.9**3
assert s["verifies"] > 2000 and abs(s["acceptance_length"] / al - 1) < 0.04, (s, al)
assert s["drafted_tokens"] == s["accepted_tokens"] + s["rejected_tokens"], s
PY

# ngram drafts without compute; eagle3 drafts k passes of a one-layer head;
# a draft model costs the most, in time and in KV memory
python3 - "$T" <<'PY' && pass "drafter costs: ngram none, eagle3 k passes of one layer, a 1B draft model more; KV shrinks by the drafter's memory" || fail "drafter costs: $(field draft "j['speculation']")"
import json, sys
d = {n: json.load(open("%s/%s/summary.json" % (sys.argv[1], n))) for n in ("off", "ngram", "some", "draft")}
ng, ea, dr = (d[n]["speculation"] for n in ("ngram", "some", "draft"))
assert ng["draft_passes"] == 0 and ng["draft_share"] == 0, ng
assert ea["draft_passes"] > 0 and 0.02 < ea["draft_share"] < 0.25, ea
assert dr["draft_share"] > ea["draft_share"], (dr, ea)
kv = {n: d[n]["kv_blocks_per_instance"] for n in d}
assert kv["ngram"] == kv["off"] and kv["draft"] < kv["some"] < kv["off"], kv
PY

# every request gets exactly its output tokens, whatever the policy and
# however a token budget cuts a verify short
for pol in "vllm:max_num_batched_tokens=2" "sarathi:token_budget=4,max_num_seqs=4" \
	"splitfuse:token_budget=4,max_num_seqs=4" "orca" "static"; do
	name=$(echo "$pol" | cut -d: -f1)
	# shellcheck disable=SC2086
	"$BIN" run $BASE --lengths fixed:prompt=64,output=40 --num-requests 30 \
		--arrival poisson:rate=20 --policy "$pol" --spec eagle3:k=3 --out "$T/pol-$name" \
		>/dev/null 2>"$T/pol.err" || fail "--policy $pol with --spec: $(cat "$T/pol.err")"
	python3 - "$T/pol-$name" <<'PY' && pass "--policy $pol with --spec: 30 requests, each 40 output tokens, drafts verified" || fail "--policy $pol with --spec: $(cat "$T/pol-$name/summary.txt" | grep -i spec)"
import csv, json, sys
j = json.load(open(sys.argv[1] + "/summary.json"))
assert j["requests_completed"] == 30, j["requests_completed"]
assert j["speculation"]["verifies"] > 0 and j["speculation"]["acceptance_length"] > 1.2, j["speculation"]
rows = list(csv.DictReader(open(sys.argv[1] + "/requests.csv")))
assert len(rows) == 30 and all(r["state"] == "finished" and r["output_tokens"] == "40" for r in rows)
PY
done

# requests.csv: each request's verifies and accepted drafts, adding up to
# the summary's; report.html names the speculation
python3 - "$T/some" <<'PY' && pass "requests.csv's spec_verifies and spec_accepted add up to summary.json's; report.html has the speculation row" || fail "requests.csv spec columns: $(head -2 "$T/some/requests.csv")"
import csv, json, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/requests.csv")))
s = json.load(open(d + "/summary.json"))["speculation"]
assert list(rows[0])[-2:] == ["spec_verifies", "spec_accepted"], list(rows[0])
assert sum(int(r["spec_verifies"]) for r in rows) == s["verifies"]
assert sum(int(r["spec_accepted"]) for r in rows) == s["accepted_tokens"]
assert "<th>speculation</th><td>eagle3:k=3,alpha=0.8,decay=0.9, acceptance given" in open(d + "/report.html").read()
PY
head -1 "$T/off/requests.csv" | grep -q ',reject_reason$' && pass "requests.csv without --spec: no spec columns" ||
	fail "requests.csv without --spec: $(head -1 "$T/off/requests.csv")"

# acceptance classes: tenant 1's requests accept by ngram-median (AL 1.69
# at k = 3), the others by the --spec's alpha=1 (4 tokens a verify)
"$BIN" run --num-requests 100 --tenants 2 --spec "eagle3:k=3,alpha=1,accept_tenant=1:ngram-median" \
	--out "$T/classes" >/dev/null 2>"$T/classes.err" || fail "accept_tenant: $(cat "$T/classes.err")"
python3 - "$T/classes/requests.csv" <<'PY' && pass "accept_tenant=1:ngram-median: tenant 1 accepts as ngram-median (AL 1.69), tenant 0 every draft (AL 4)" || fail "accept_tenant: per-tenant acceptance off"
import csv, sys
v = {}
for r in csv.DictReader(open(sys.argv[1])):
    a = v.setdefault(r["tenant"], [0, 0])
    a[0] += int(r["spec_verifies"])
    a[1] += int(r["spec_accepted"])
al = {t: 1 + a[1] / a[0] for t, a in v.items()}
assert al["0"] == 4.0 and abs(al["1"] / 1.69 - 1) < 0.05, al
PY
expect_error 2 "^servesim: --spec: accept_tenant: nope: no such acceptance entry" -- run $BASE --spec "eagle3:k=3,accept_tenant=1:nope"
expect_error 2 "^servesim: --spec: accept_tenant: 'x': expected T:NAME" -- run $BASE --spec "eagle3:k=3,accept_tenant=x:eagle3-median"
expect_error 2 "^servesim: --spec: accept_tenant: tenant 1 given twice" -- run $BASE --spec "eagle3:k=3,accept_tenant=1:eagle3-median/1:ngram-median"

# deterministic: the same seed gives the same figures
run some2 eagle3:k=3,alpha=0.8,decay=0.9 --num-requests 60
cmp -s "$T/some/summary.txt" "$T/some2/summary.txt" && pass "the same seed gives the same speculative run" ||
	fail "two runs of one seed differ: $(diff "$T/some/summary.txt" "$T/some2/summary.txt" | head -5)"

# dynamic rule: no drafts in steps of more than max_batch running sequences
# shellcheck disable=SC2086
"$BIN" run $BASE --concurrency 8 --num-requests 40 --spec eagle3:k=3,max_batch=4 --out "$T/dyn" \
	>/dev/null 2>"$T/dyn.err" || fail "max_batch: $(cat "$T/dyn.err")"
# shellcheck disable=SC2086
"$BIN" run $BASE --concurrency 8 --num-requests 40 --spec eagle3:k=3 --out "$T/nodyn" \
	>/dev/null 2>"$T/dyn.err" || fail "max_batch: $(cat "$T/dyn.err")"
python3 - "$T/dyn/summary.json" "$T/nodyn/summary.json" <<'PY' && pass "max_batch=4 with 8 clients: drafting off nearly always" || fail "max_batch: $(field dyn "j['speculation']")"
import json, sys
dyn, nodyn = (json.load(open(p))["speculation"] for p in sys.argv[1:])
assert nodyn["verifies"] > 1000 and dyn["verifies"] < nodyn["verifies"] / 10, (dyn, nodyn)
PY

# live: the same scheduling on the CPU kernels, the drafter's passes run
# as kernels of their own (a one-layer head here, a draft model below)
for s in eagle3:k=3,alpha=0.8,decay=0.9 draft:k=2,draft=llama-3.2-1b; do
	"$BIN" live --model llama-3.2-1b --lengths fixed:prompt=32,output=16 --concurrency 2 \
		--num-requests 4 --spec "$s" --out "$T/live" >/dev/null 2>"$T/live.err" ||
		fail "live --spec $s: $(cat "$T/live.err")"
	python3 - "$T/live/summary.json" <<'PY' && pass "live --spec $s: 4 requests, drafts run and verified" || fail "live --spec $s: $(grep -i spec "$T/live/summary.txt")"
import json, sys
j = json.load(open(sys.argv[1]))
s = j["speculation"]
assert j["requests_completed"] == 4 and j["mode"] == "live", (j["requests_completed"], j["mode"])
assert s["draft_passes"] > 0 and s["verifies"] > 0 and s["draft_share"] > 0, s
PY
done

# plan: --spec auto searches off and the model's method at k = 1..4 (mtp
# for a model with MTP layers), each a configuration of its own; the table
# names each one's speculation and acceptance
"$BIN" plan --model deepseek-v3 --gpus h200-sxm --tp 8 --instances 1 --modes colocated \
	--lengths fixed:prompt=512,output=64 --arrival poisson:rate=2 --num-requests 40 --spec auto \
	--dry-run >"$T/plan-dry" 2>"$T/plan.err" || fail "plan --spec auto --dry-run: $(cat "$T/plan.err")"
grep -q "^0 colocated gpu=h200-sxm tp=8 instances=1 policy=vllm spec=off$" "$T/plan-dry" &&
	grep -q "^4 colocated gpu=h200-sxm tp=8 instances=1 policy=vllm spec=mtp:k=4$" "$T/plan-dry" &&
	pass "plan --spec auto: deepseek-v3 gets off and mtp:k=1..4" ||
	fail "plan --spec auto: $(cat "$T/plan-dry")"
"$BIN" plan --model llama-3.1-8b --gpus h100-sxm --tp 1 --instances 1 --modes colocated \
	--lengths fixed:prompt=512,output=256 --arrival poisson:rate=2 --num-requests 100 \
	--slo ttft_ms=500,tpot_ms=10 --spec "off;eagle3:k=2,accept=vllm-eagle3-llama-3.1-8b-instruct-mt-bench" \
	>"$T/plan" 2>"$T/plan.err" || fail "plan --spec: $(cat "$T/plan.err")"
grep -q "eagle3:k=2,accept=vllm-eagle3-llama-3.1-8b-instruct-mt-bench: vllm-eagle3-llama-3.1-8b-instruct-mt-bench, alpha 0.7307 decay 0.9707, 2.25 tokens per verify expected" "$T/plan" &&
	grep -q "vllm spec=off" "$T/plan" &&
	pass "plan --spec: the table names each configuration's speculation and its acceptance" ||
	fail "plan --spec output: $(head -20 "$T/plan")"
"$BIN" plan --model llama-3.1-8b --gpus h100-sxm --tp 1 --instances 1 --modes colocated \
	--lengths fixed:prompt=512,output=256 --arrival poisson:rate=2 --num-requests 60 \
	--slo ttft_ms=500,tpot_ms=10 --spec "off;eagle3:k=2,alpha=0.7" --verify 2 --out "$T/plan-out" \
	>"$T/plan-v" 2>"$T/plan.err" || fail "plan --spec --verify --out: $(cat "$T/plan.err")"
python3 - "$T/plan-out" <<'PY' && grep -q "colocated h100-sxm tp=1 x1 vllm eagle3:k=2,alpha=0.7 " "$T/plan-v" &&
import csv, json, sys
d = sys.argv[1]
assert [r["spec"] for r in csv.DictReader(open(d + "/plan.csv"))] == ["off", "eagle3:k=2,alpha=0.7"]
assert [c["spec"] for c in json.load(open(d + "/plan.json"))["configurations"]] == ["off", "eagle3:k=2,alpha=0.7"]
PY
	pass "plan --spec: plan.csv's spec column, plan.json's spec, --verify's rows name it" ||
	fail "plan --spec outputs: $(grep -A4 verified "$T/plan-v")"
expect_error 2 "^servesim: --spec: expected auto or at most 8 items" -- plan --num-requests 50 --spec "off;;"
expect_error 2 "^servesim: --spec: unknown method 'foo'" -- plan --num-requests 50 --spec "off;foo:k=1"

# An engine without graphs: each drafter pass prepares its inputs as a step
# does (the fixed term and the per-layer one at the drafter's depth, 1 for
# EAGLE-3), where a graphed pass pays one graph launch.  Two graphless
# profiles that differ by prep_us 3000 and prep_us_per_layer 1000: 4 ms a
# pass more (one request at a time, so busy time is the run's duration).
cat >"$T/eager.json" <<'JSON'
{"engines": [
 {"name": "eager0", "versions": "test", "source": "test"},
 {"name": "eager1", "versions": "test", "prep_us": 3000, "prep_us_per_layer": 1000, "source": "test"}
]}
JSON
for e in eager0 eager1; do
	"$BIN" run --concurrency 1 --num-requests 4 --lengths fixed:prompt=64,output=32 \
		--spec eagle3:k=3 --engine-catalog "$T/eager.json" --engine $e --out "$T/$e" --quiet \
		2>"$T/err" || fail "run --engine $e: $(cat "$T/err")"
done
python3 - "$T/eager0/summary.json" "$T/eager1/summary.json" <<'PY' && pass "graphless drafter passes pay the profile's preparation at the drafter's depth" || fail "drafter preparation per pass"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
def draft_s(j):
    return j["speculation"]["draft_share"] * j["duration_s"]
passes = b["speculation"]["draft_passes"]
assert passes == a["speculation"]["draft_passes"] > 0, passes
per_pass_ms = (draft_s(b) - draft_s(a)) / passes * 1e3
assert abs(per_pass_ms - 4.0) < 0.08, per_pass_ms
PY

# bad --spec: exit 2, one line
expect_error 2 "^servesim: --spec: k=K is required" -- run $BASE --spec eagle3
expect_error 2 "^servesim: --spec: unknown method 'lookahead', expected draft, eagle, eagle3, mtp, medusa or ngram" -- run $BASE --spec lookahead:k=3
expect_error 2 "^servesim: --spec: k=17: expected K, draft tokens per step, 1..16" -- run $BASE --spec eagle3:k=17
expect_error 2 "^servesim: --spec: 'depth': expected KEY=VALUE with KEY one of k, tree, draft" -- run $BASE --spec eagle3:k=3,depth=2
expect_error 2 "^servesim: --spec: method draft needs draft=MODEL" -- run $BASE --spec draft:k=3
expect_error 2 "^servesim: --spec: draft=nope: unknown model" -- run $BASE --spec draft:k=3,draft=nope
expect_error 2 "^servesim: --spec: accept=nope: no such acceptance entry" -- run $BASE --spec eagle3:k=3,accept=nope
expect_error 2 "^servesim: --spec: alpha=0: expected A" -- run $BASE --spec eagle3:k=3,alpha=0
expect_error 2 "^servesim: --spec: accept= and alpha=/decay= are alternatives" -- run $BASE --spec eagle3:k=3,accept=eagle3-median,alpha=0.5
expect_error 2 "^servesim: --spec: tree=2: expected at least k \(3\)" -- run $BASE --spec eagle3:k=3,tree=2
expect_error 2 "^servesim: --spec with --pp: not modelled yet" -- run $BASE --pp 2 --spec eagle3:k=3
expect_error 2 "^servesim: --spec with --dp-attention: not modelled yet" -- run --model qwen3-30b-a3b --tp 2 --dp-attention 2 --spec eagle3:k=1
finish
