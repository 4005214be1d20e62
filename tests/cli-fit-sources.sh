#!/bin/sh
# servesim calibrate fit-engine --sources (issue 31 sections 1 and 2): one
# engine fitted jointly on several deployments, each with its own serving
# stack as a nuisance term, each deployment held out in turn and predicted
# with the pooled stack; terms the runs cannot separate are warned about;
# every bad manifest is one line naming the file.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

# The truth: one engine (a 30 ms launch floor per eager step) behind three
# deployments' stacks: 5 ms and 40 ms of front end, and none (engine-side
# clocks).  Llama-2-7B at TP 1 on the roofline: no calibration needed.
cat >"$T/engines.json" <<'EOF'
{"engines": [
 {"name": "truth", "versions": "test", "source": "test", "launch_us": 30000},
 {"name": "start", "versions": "test", "source": "test", "launch_us": 5000}
]}
EOF
mkdir -p "$T/data"
# measured "Splitwise style": a static batch's TTFT is its prompt_time,
# its TPOT its token_time
measure() {   # FILE STACK BATCHES
	echo "model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,prompt_time,token_time,e2e_time,tensor_parallel" >"$1"
	for b in $3; do
		for p in 128 1024; do
			awk -v b="$b" -v p="$p" 'BEGIN { print "arrival_ms,prompt_tokens,output_tokens";
				for (i = 0; i < b; i++) print "0," p ",64" }' >"$T/batch.csv"
			"$BIN" run --model llama-2-7b --gpu a100-80gb-sxm --cost-model roofline \
				--engine truth --engine-catalog "$T/engines.json" --stack "$2" \
				--trace "$T/batch.csv" --policy "static:max_batch=$b,max_len=$((p + 64))" \
				--json >"$T/r.json" 2>"$T/err" ||
				fail "simulating the measurement b=$b p=$p: $(cat "$T/err")"
			"$PY" - "$T/r.json" "$b" "$p" >>"$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("llama2-7b,a100-80gb,%s,%s,64,1,1,%.6f,%.6f,,1" % (sys.argv[3], sys.argv[2],
      d["ttft_ms"]["mean"], d["tpot_ms"]["mean"]))
EOF
		done
	done
}
measure "$T/data/a.csv" none,frontend_ms=5 "1 4"
measure "$T/data/b.csv" none,frontend_ms=40 "1 8"
measure "$T/data/c.csv" none "2 4"
# paths in the manifest are against its folder; each source's options
# are its own deployment's (the starting stack: a 1 ms front end)
cat >"$T/sources.json" <<'EOF'
{"sources": [
 {"name": "dep-a", "files": ["data/a.csv"], "options": ["--stack", "none,frontend_ms=1"]},
 {"name": "dep-b", "files": ["data/b.csv"], "options": ["--stack", "none,frontend_ms=1", "--gpu", "a100-80gb-sxm"]},
 {"name": "dep-c", "files": ["data/c.csv"], "options": ["--stack", "none"],
  "_comment": "engine-side clocks: its stack is known, not fitted"}
]}
EOF
"$BIN" calibrate fit-engine --engine start --engine-catalog "$T/engines.json" --cost-model roofline \
	--model llama-2-7b --free launch_us:100:1e6,frontend_ms:0.01:1000 --sources "$T/sources.json" \
	--name joint --out "$T/joint.json" --json="$T/joint-report.json" >"$T/joint.txt" 2>"$T/err" ||
	fail "fit-engine --sources: $(cat "$T/err")"
[ -s "$T/err" ] && fail "fit-engine --sources warned on separable terms: $(cat "$T/err")"
"$PY" - "$T/joint.json" "$T/joint-report.json" <<'EOF' && pass "a joint fit recovers the shared launch floor and each deployment's front end" || fail "joint fit did not recover the truth: $(cat "$T/joint.txt")"
import json, sys
out = json.load(open(sys.argv[1]))
prof = out["engines"][0]
rep = json.load(open(sys.argv[2]))
p = rep["parameters"]
# one engine value, one front end per deployment whose stack is fitted
assert sorted(p) == ["frontend_ms[dep-a]", "frontend_ms[dep-b]", "launch_us"], sorted(p)
assert abs(prof["launch_us"] / 30000 - 1) < 0.03, prof
assert abs(p["frontend_ms[dep-a]"]["value"] / 5 - 1) < 0.05, p
assert abs(p["frontend_ms[dep-b]"]["value"] / 40 - 1) < 0.03, p
# the stacks are written beside the profile, named by source; the
# profile keeps its starting stack (no deployment's is the engine's)
st = {s["name"]: s for s in out["stacks"]}
assert sorted(st) == ["joint-dep-a", "joint-dep-b"], sorted(st)
assert abs(st["joint-dep-b"]["frontend_ms"] / 40 - 1) < 0.03, st
assert prof.get("stack", "") == "", prof
# held out by source: the engine term carries over (TPOT); a held-out
# deployment is predicted behind the stack it was given (1 ms: its prior,
# the others' fitted front ends being theirs), so dep-b (40 ms) comes out
# short, and dep-c (no stack) stays exact
for r in rep["runs"]:
    e = r["held_out"] / r["measured"] - 1
    if r["metric"].startswith("tpot"):
        assert abs(e) < 0.05, r
    elif r["group"] == "dep-c":
        assert abs(e) < 0.05, r
    elif r["group"] == "dep-b" and r["run"].find(" b1 p128") >= 0:
        assert e < -0.2, r
EOF
grep -q "frontend_ms\[dep-b\]" "$T/joint.txt" && grep -q "^dep-a " "$T/joint.txt" &&
	pass "the table names each source's stack term and holds each source out" ||
	fail "joint table: $(cat "$T/joint.txt")"
# the written stacks read back: the profile behind dep-b's stack reproduces dep-b
awk -v b=8 -v p=1024 'BEGIN { print "arrival_ms,prompt_tokens,output_tokens";
	for (i = 0; i < b; i++) print "0," p ",64" }' >"$T/batch.csv"
"$BIN" run --model llama-2-7b --gpu a100-80gb-sxm --cost-model roofline --engine joint \
	--engine-catalog "$T/joint.json" --stack-catalog "$T/joint.json" --stack joint-dep-b \
	--trace "$T/batch.csv" --policy "static:max_batch=8,max_len=1088" --json >"$T/again.json" 2>"$T/err" ||
	fail "run behind a fitted source stack: $(cat "$T/err")"
"$PY" - "$T/again.json" "$T/data/b.csv" <<'EOF' && pass "a source's fitted stack and the joint profile reproduce its measurement" || fail "source stack does not reproduce dep-b"
import csv, json, sys
d = json.load(open(sys.argv[1]))
row = list(csv.DictReader(open(sys.argv[2])))[-1]
assert abs(d["ttft_ms"]["mean"] / float(row["prompt_time"]) - 1) < 0.03, (d["ttft_ms"], row)
EOF

# --model-config on the command line is every source's model where the
# source names none (its runs then replay that model)
"$BIN" calibrate fit-engine --engine start --engine-catalog "$T/engines.json" --cost-model roofline \
	--model-config "${SERVESIM_TEST_DATA:?}/models/llama-3.1-8b.json" --no-fit \
	--sources "$T/sources.json" >"$T/mc.txt" 2>"$T/err" &&
	grep -q "llama-3.1-8b" "$T/mc.txt" && ! grep -q "llama-2-7b" "$T/mc.txt" &&
	pass "--model-config is the model of every source that names none" ||
	fail "--model-config with --sources: $(cat "$T/err") $(head -5 "$T/mc.txt")"

# A single RESULT list fits its one stack and predicts held-out groups with
# it (not with the starting stack: before issue 31's joint fit, a held-out
# run ignored the fitted front end)
"$BIN" calibrate fit-engine --engine start --engine-catalog "$T/engines.json" --cost-model roofline \
	--stack none,frontend_ms=1 --free launch_us:100:1e6,frontend_ms:0.01:1000 --group-by run \
	--json="$T/one.json" "$T/data/b.csv" >/dev/null 2>"$T/err" || fail "fit-engine on one source: $(cat "$T/err")"
"$PY" - "$T/one.json" <<'EOF' && pass "held-out runs of one deployment use its fitted stack" || fail "held-out runs ignore the fitted stack"
import json, sys
rep = json.load(open(sys.argv[1]))
assert "frontend_ms" in rep["parameters"], rep["parameters"]
for r in rep["runs"]:
    assert abs(r["held_out"] / r["measured"] - 1) < 0.05, r
EOF

# Terms no run can tell apart: the gateway hop and the front end both add
# once per request on the way in
"$BIN" calibrate fit-engine --engine start --engine-catalog "$T/engines.json" --cost-model roofline \
	--stack none,frontend_ms=1,gateway_ms=1 --free launch_us:100:1e6,frontend_ms:0.01:1000,gateway_ms:0.01:1000 \
	--no-holdout --json="$T/conf.json" "$T/data/b.csv" >/dev/null 2>"$T/err" ||
	fail "fit-engine with confounded terms: $(cat "$T/err")"
grep -q "warning: frontend_ms and gateway_ms are not separable" "$T/err" &&
	"$PY" -c 'import json, sys; p = json.load(open(sys.argv[1]))["parameters"]; assert p["frontend_ms"]["confounded_with"] == "gateway_ms", p' "$T/conf.json" &&
	pass "confounded terms are warned about and marked in the report" ||
	fail "no confounding warning: $(cat "$T/err")"

# A term no run moves: the all-reduce floor at TP 1
"$BIN" calibrate fit-engine --engine start --engine-catalog "$T/engines.json" --cost-model roofline \
	--stack none --free launch_us:100:1e6,allreduce_floor_us:1:1000 --no-holdout \
	--json="$T/flat.json" "$T/data/c.csv" >/dev/null 2>"$T/err" ||
	fail "fit-engine with a flat term: $(cat "$T/err")"
grep -q "warning: allreduce_floor_us is not identifiable from these runs" "$T/err" &&
	! grep -q "launch_us is not" "$T/err" &&
	"$PY" -c 'import json, sys; p = json.load(open(sys.argv[1]))["parameters"]; assert p["allreduce_floor_us"]["identifiable"] is False and "identifiable" not in p["launch_us"], p' "$T/flat.json" &&
	pass "a term no run moves is warned about and marked in the report" ||
	fail "no identifiability warning: $(cat "$T/err")"

# Bad manifests and command lines: one line, the file, what was expected
S=$T/sources.json
expect_error 2 "expected no RESULT operand" -- calibrate fit-engine --sources "$S" "$T/data/a.csv"
expect_error 2 "group-by source: needs --sources" -- calibrate fit-engine --group-by source "$T/data/a.csv"
printf '{"sources": [\n  {"name": "x",\n' >"$T/bad.json"
expect_error 1 "bad.json:3: .*expected a JSON object" -- calibrate fit-engine --sources "$T/bad.json"
printf '{"sources": []}\n' >"$T/bad.json"
expect_error 1 "bad.json: expected an object with \"sources\": a non-empty array" -- calibrate fit-engine --sources "$T/bad.json"
printf '{"sources": [{"name": "a b", "files": ["x"]}]}\n' >"$T/bad.json"
expect_error 1 "bad.json: sources\[0\]: expected \"name\"" -- calibrate fit-engine --sources "$T/bad.json"
printf '{"sources": [{"name": "a", "files": ["data/a.csv"]}, {"name": "a", "files": ["data/a.csv"]}]}\n' >"$T/bad.json"
expect_error 1 "bad.json: sources\[1\]: name 'a' is another source's" -- calibrate fit-engine --sources "$T/bad.json"
printf '{"sources": [{"name": "a", "files": []}]}\n' >"$T/bad.json"
expect_error 1 "bad.json: source 'a': expected \"files\": a non-empty array" -- calibrate fit-engine --sources "$T/bad.json"
printf '{"sources": [{"name": "a", "files": ["data/a.csv"], "weights": 1}]}\n' >"$T/bad.json"
expect_error 1 "bad.json: sources\[0\]: unknown key 'weights'" -- calibrate fit-engine --sources "$T/bad.json"
printf '{"sources": [{"name": "a", "files": ["data/a.csv"], "options": ["--jobs", "2"]}]}\n' >"$T/bad.json"
expect_error 1 "bad.json: source 'a': .*jobs.*a source sets only" -- calibrate fit-engine --sources "$T/bad.json"
printf '{"sources": [{"name": "a", "files": ["data/a.csv"], "options": ["--tp", "x"]}]}\n' >"$T/bad.json"
expect_error 1 "bad.json: source 'a': .*tp" -- calibrate fit-engine --sources "$T/bad.json"
printf '{"sources": [{"name": "a", "files": ["data/a.csv"], "options": ["--gpu", "nope"]}]}\n' >"$T/bad.json"
expect_error 1 "bad.json: source 'a': --gpu: unknown GPU 'nope'" -- calibrate fit-engine --sources "$T/bad.json"
printf '{"sources": [{"name": "a", "files": ["data/missing.csv"]}]}\n' >"$T/bad.json"
expect_error 1 "missing.csv" -- calibrate fit-engine --sources "$T/bad.json"
finish
