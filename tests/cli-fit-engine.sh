#!/bin/sh
# servesim calibrate fit-engine (issue 11 section 2): a fit recovers the
# engine parameters behind "measurements" servesim made itself, writes a
# profile that --engine-catalog reads back and that reproduces them, and
# every bad command line or input is one line.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "skip: python3 not found"; exit 77; }

# The truth: a host launch floor of 30 ms per eager step and 15 ms of
# serving stack, on Llama-2-7B at TP 1 (roofline: no calibration needed).
cat >"$T/engines.json" <<'EOF'
{"engines": [
 {"name": "truth", "versions": "test", "source": "test", "launch_us": 30000, "api_in_ms": 15},
 {"name": "start", "versions": "test", "source": "test", "launch_us": 5000, "api_in_ms": 2}
]}
EOF
# Static batches measured "Splitwise style": the run's TTFT is its
# prompt_time, its TPOT its token_time.
echo "model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,prompt_time,token_time,e2e_time,tensor_parallel" >"$T/measured.csv"
for b in 1 4 16; do
	for p in 128 1024; do
		awk -v b="$b" -v p="$p" 'BEGIN { print "arrival_ms,prompt_tokens,output_tokens";
			for (i = 0; i < b; i++) print "0," p ",64" }' >"$T/batch.csv"
		"$BIN" run --model llama-2-7b --gpu a100-80gb-sxm --cost-model roofline \
			--engine truth --engine-catalog "$T/engines.json" --trace "$T/batch.csv" \
			--policy "static:max_batch=$b,max_len=$((p + 64))" --json >"$T/r.json" 2>"$T/err" ||
			fail "simulating the measurement b=$b p=$p: $(cat "$T/err")"
		"$PY" - "$T/r.json" "$b" "$p" >>"$T/measured.csv" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("llama2-7b,a100-80gb,%s,%s,64,1,1,%.6f,%.6f,,1" % (sys.argv[3], sys.argv[2],
      d["ttft_ms"]["mean"], d["tpot_ms"]["mean"]))
EOF
	done
done

"$BIN" calibrate fit-engine --engine start --engine-catalog "$T/engines.json" \
	--cost-model roofline --free launch_us:100:1e6,api_in_ms:0.01:1000 --group-by run \
	--name fitted --out "$T/fitted.json" --json="$T/report.json" "$T/measured.csv" \
	>"$T/fit.txt" 2>"$T/err" || fail "fit-engine: $(cat "$T/err")"
# --json (bare): the same report on stdout, alone; --json=FILE: FILE and the table
"$BIN" calibrate fit-engine --no-fit --engine start --engine-catalog "$T/engines.json" \
	--cost-model roofline --json "$T/measured.csv" >"$T/nofit-stdout.json" 2>"$T/err" &&
	"$BIN" calibrate fit-engine --no-fit --engine start --engine-catalog "$T/engines.json" \
	--cost-model roofline --json="$T/nofit.json" "$T/measured.csv" >"$T/nofit.txt" 2>>"$T/err" &&
	cmp -s "$T/nofit-stdout.json" "$T/nofit.json" && "$PY" -m json.tool "$T/nofit.json" >/dev/null &&
	[ -s "$T/nofit.txt" ] && pass "fit-engine --json prints on stdout what --json=FILE writes" ||
	fail "fit-engine --json on stdout: $(cat "$T/err") $(head -c 100 "$T/nofit-stdout.json")"
"$PY" - "$T/fitted.json" "$T/report.json" <<'EOF' && pass "fit-engine recovers launch_us and api_in_ms, held-out errors small" || fail "fit-engine did not recover the truth: $(cat "$T/fit.txt")"
import json, sys
prof = json.load(open(sys.argv[1]))["engines"][0]
rep = json.load(open(sys.argv[2]))
assert prof["name"] == "fitted", prof
# percentiles are whole-ns step sums here, so recovery is close: 3% covers
# the rounding of the measured CSV (6 decimals) and the simplex's tolerance
assert abs(prof["launch_us"] / 30000 - 1) < 0.03, prof
assert abs(prof["api_in_ms"] / 15 - 1) < 0.03, prof
p = rep["parameters"]
assert p["launch_us"]["ci_lo"] <= p["launch_us"]["value"] <= p["launch_us"]["ci_hi"], p
assert rep["training_mape"] < 0.02, rep["training_mape"]
for r in rep["runs"]:
    assert abs(r["held_out"] / r["measured"] - 1) < 0.05, r
EOF
grep -q "held-out group" "$T/fit.txt" && pass "fit-engine prints held-out errors by group" ||
	fail "no held-out table: $(cat "$T/fit.txt")"

# the fitted profile reproduces the measurement it was fitted to
"$BIN" run --model llama-2-7b --gpu a100-80gb-sxm --cost-model roofline --engine fitted \
	--engine-catalog "$T/fitted.json" --trace "$T/batch.csv" \
	--policy "static:max_batch=16,max_len=1088" --json >"$T/again.json" 2>"$T/err" ||
	fail "--engine-catalog on the fitted profile: $(cat "$T/err")"
"$PY" - "$T/again.json" "$T/measured.csv" <<'EOF' && pass "the fitted profile reproduces the last measurement within 3%" || fail "fitted profile does not reproduce"
import csv, json, sys
d = json.load(open(sys.argv[1]))
row = list(csv.DictReader(open(sys.argv[2])))[-1]
assert abs(d["ttft_ms"]["mean"] / float(row["prompt_time"]) - 1) < 0.03, (d["ttft_ms"], row)
assert abs(d["tpot_ms"]["mean"] / float(row["token_time"]) - 1) < 0.03, (d["tpot_ms"], row)
EOF

# a fitted profile keeps the start profile's multi-step scheduling
head -3 "$T/measured.csv" >"$T/two.csv"
printf '{"engines": [{"name": "ms", "versions": "test", "source": "test", "api_in_ms": 2, "scheduler_steps": 2}]}\n' >"$T/ms.json"
"$BIN" calibrate fit-engine --engine ms --engine-catalog "$T/ms.json" --cost-model roofline \
	--free api_in_ms:0.01:1000 --group-by run --name fitted-ms --out "$T/fitted-ms.json" \
	"$T/two.csv" >/dev/null 2>"$T/err" || fail "fit-engine from a multi-step profile: $(cat "$T/err")"
"$PY" - "$T/fitted-ms.json" <<'EOF' && pass "a fitted profile keeps scheduler_steps" || fail "fitted profile lost scheduler_steps: $(cat "$T/fitted-ms.json")"
import json, sys
assert json.load(open(sys.argv[1]))["engines"][0]["scheduler_steps"] == 2
EOF

# Every shipped profile, fitted (one parameter pinned) and written by --out,
# reads back with every other key as data/engines.json has it (the writer
# once dropped kv_load: a fitted sglang lost its layer-wise loads, and
# trtllm its attention-DP iterations)
for e in $("$PY" -c 'import json, sys; print(" ".join(e["name"] for e in json.load(open(sys.argv[1]))["engines"]))' \
		"${SERVESIM_DATA:?}/engines.json"); do
	"$BIN" calibrate fit-engine --engine "$e" --cost-model roofline --free sched_us:42:42 \
		--no-holdout --out "$T/rt-$e.json" "$T/two.csv" >/dev/null 2>"$T/err" ||
		fail "fit-engine --engine $e --out: $(cat "$T/err")"
	"$PY" - "$SERVESIM_DATA/engines.json" "$T/rt-$e.json" "$e" <<'EOF' && pass "a fitted $e keeps every other key of its profile" || fail "fitted $e lost or changed keys: $(cat "$T/rt-$e.json")"
import json, math, sys
shipped = next(e for e in json.load(open(sys.argv[1]))["engines"] if e["name"] == sys.argv[3])
out = json.load(open(sys.argv[2]))["engines"][0]
assert out["sched_us"] == 42, out
# what an absent key means (sim/engine-profile.c's table)
absent = {"allreduce": "custom", "kv_memory": "total", "kv_load": "blocking", "graph_sizes": [], "policy": ""}
def get(d, k):
    return d.get(k, absent.get(k, 0))
for k in sorted(set(shipped) | set(out)):
    if k.startswith("_") or k in ("sched_us", "source"):
        continue
    a, b = get(shipped, k), get(out, k)
    same = math.isclose(a, b, rel_tol=1e-7) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else a == b
    assert same, (k, a, b)
EOF
done

# --store keeps the fitted profile in a calibration store; run --engine-store reads it
"$BIN" calibrate fit-engine --engine start --engine-catalog "$T/engines.json" --cost-model roofline \
	--free launch_us:100:1e6,api_in_ms:0.01:1000 --no-holdout --name stored --store "$T/fit.db" \
	"$T/measured.csv" >/dev/null 2>"$T/err" || fail "fit-engine --store: $(cat "$T/err")"
"$BIN" run --model llama-2-7b --gpu a100-80gb-sxm --cost-model roofline --engine stored \
	--engine-store "$T/fit.db" --trace "$T/batch.csv" --policy "static:max_batch=16,max_len=1088" \
	--json >"$T/stored.json" 2>"$T/err" || fail "run --engine-store: $(cat "$T/err")"
"$PY" - "$T/stored.json" "$T/again.json" <<'EOF' && pass "a profile kept in the store runs as the same profile from JSON" || fail "stored profile differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["engine"] == "stored", a["engine"]
assert abs(a["ttft_ms"]["mean"] / b["ttft_ms"]["mean"] - 1) < 0.03, (a["ttft_ms"], b["ttft_ms"])
EOF
# a hostile store: engine_profiles as a view, or a profile that is not one
"$PY" - "$T/fit.db" "$T/view.db" "$T/badrow.db" <<'EOF'
import shutil, sqlite3, sys
src, view, bad = sys.argv[1:4]
shutil.copy(src, view)
shutil.copy(src, bad)
c = sqlite3.connect(view)
c.execute("DROP TABLE engine_profiles")
c.execute("CREATE VIEW engine_profiles AS SELECT 1 AS format, 'x' AS name, '{}' AS profile, 's' AS source")
c.commit()
c = sqlite3.connect(bad)
c.execute("UPDATE engine_profiles SET profile = '{\"name\": \"stored\", \"versions\": \"v\", \"source\": \"s\", \"sched_us\": -5}'")
c.commit()
EOF
expect_error 1 "view.db: not a servesim calibration store: 'engine_profiles' is not a table" -- \
	run --engine-store "$T/view.db" --num-requests 2
expect_error 1 "badrow.db: engine_profiles 'stored': .*\"sched_us\" is -5, expected a number >= 0" -- \
	run --engine-store "$T/badrow.db" --num-requests 2
expect_error 1 "nowhere.db" -- run --engine-store "$T/nowhere.db" --num-requests 2

# a run the simulated deployment cannot hold is skipped, with its reason
printf 'model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,prompt_time,token_time,e2e_time,tensor_parallel\nllama2-7b,a100-80gb,4000,1,200,1,1,100,10,,1\nmystery-9b,a100-80gb,100,1,10,1,1,10,10,,1\n' >"$T/skips.csv"
"$BIN" calibrate fit-engine --engine start --engine-catalog "$T/engines.json" --cost-model roofline \
	"$T/skips.csv" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "exceed the model's context length" "$T/err" &&
	grep -q "model is not in the catalog" "$T/err" && grep -q "no run to fit" "$T/err" &&
	pass "unusable runs are skipped with reasons; nothing left is an error" ||
	fail "skips: $(cat "$T/err")"

# bad command lines: exit 2, one line
expect_error 2 "expected at least one RESULT file" -- calibrate fit-engine
expect_error 2 "--free: 'shed_us' is not a numeric engine parameter" -- \
	calibrate fit-engine --free shed_us "$T/measured.csv"
expect_error 2 "--free sched_us: expected bounds 0 < LO <= HI, got '5:1'" -- \
	calibrate fit-engine --free sched_us:5:1 "$T/measured.csv"
expect_error 2 "--free sched_us: expected KEY or KEY:LO:HI" -- \
	calibrate fit-engine --free sched_us:5 "$T/measured.csv"
expect_error 2 "--engine: unknown engine 'nope'" -- calibrate fit-engine --engine nope "$T/measured.csv"
expect_error 2 "--group-by: expected run, file, model, gpu, tp, model-tp, isl or source, got 'x'" -- \
	calibrate fit-engine --group-by x "$T/measured.csv"
expect_error 2 "--select: expected engine=, model=, gpu=, tp=, mode= or precision=VALUE" -- \
	calibrate fit-engine --select colour=red "$T/measured.csv"
expect_error 2 "--format: unknown result format 'xml'" -- calibrate fit-engine --format xml "$T/measured.csv"
expect_error 2 "--model: unknown model 'nope'" -- calibrate fit-engine --model nope "$T/measured.csv"
# bad input files: exit 1, one line naming the file
expect_error 1 "nonexistent.csv" -- calibrate fit-engine "$T/nonexistent.csv"
printf 'model,hardware,prompt_size\nllama2-7b,a100-80gb,x\n' >"$T/bad.csv"
expect_error 1 "bad.csv" -- calibrate fit-engine --format splitwise "$T/bad.csv"

# A result that records its engine settings (LLMServingSim's meta.json:
# vLLM's num_gpu_blocks, max_num_seqs, max_num_batched_tokens) is
# re-simulated with them: with the parameter pinned, the "fitted" TTFT is
# exactly what `run --kv-blocks --policy vllm:...` gives, and far from the
# run with a KV pool derived from memory (300 blocks hold 4 of these
# requests; an RTX 4090 would get ~1700).
mkdir -p "$T/lss"
"$PY" - "$T/lss" <<'EOF'
import json, sys
d = sys.argv[1]
with open(d + "/requests.jsonl", "w") as f:
    for i in range(40):
        t = 0.05 * i
        f.write(json.dumps({"request_id": "r%d" % i, "input_toks": 1000, "output_toks": 100,
                            "arrival_time": 1000 + t, "queued_ts": 50 + t, "scheduled_ts": 50 + t,
                            "first_token_ts": 51 + t + 0.1 * i, "last_token_ts": 55 + t + 0.1 * i}) + "\n")
json.dump({"schema_version": 1, "model": "meta-llama/Llama-3.1-8B",
           "engine_kwargs": {"tensor_parallel_size": 1, "max_num_seqs": 4, "max_num_batched_tokens": 512},
           "kv_cache": {"num_gpu_blocks": 300, "block_size": 16},
           "hardware": {"device_name": "NVIDIA GeForce RTX 4090"}}, open(d + "/meta.json", "w"))
EOF
"$BIN" calibrate fit-engine --engine vllm --free sched_us:59.9:59.9 --no-holdout \
	--json="$T/lss.json" "$T/lss/requests.jsonl" >/dev/null 2>"$T/err" ||
	fail "fit-engine on an LLMServingSim result: $(cat "$T/err")"
"$BIN" run --trace "$T/lss/requests.jsonl" --engine vllm --model llama-3.1-8b --gpu rtx-4090 \
	--kv-blocks 300 --policy vllm:max_num_seqs=4,max_num_batched_tokens=512 --json >"$T/lss-run.json" 2>"$T/err" ||
	fail "run with the recorded settings: $(cat "$T/err")"
"$BIN" run --trace "$T/lss/requests.jsonl" --engine vllm --model llama-3.1-8b --gpu rtx-4090 \
	--json >"$T/lss-derived.json" 2>"$T/err" || fail "run with derived settings: $(cat "$T/err")"
"$PY" - "$T/lss.json" "$T/lss-run.json" "$T/lss-derived.json" <<'EOF' && pass "fit-engine replays a result with its recorded KV blocks and vLLM limits" || fail "fit-engine ignored the recorded engine settings"
import json, sys
rep, run, derived = (json.load(open(p)) for p in sys.argv[1:4])
fit = {r["metric"]: r["fitted"] for r in rep["runs"]}
# the report rounds to 8 significant digits (JSON_REAL_PRECISION(8))
assert abs(fit["ttft_p50"] / run["ttft_ms"]["p50"] - 1) < 1e-6, (fit, run["ttft_ms"])
assert abs(fit["tpot_p50"] / run["tpot_ms"]["p50"] - 1) < 1e-6, (fit, run["tpot_ms"])
assert run["ttft_ms"]["p50"] > 2 * derived["ttft_ms"]["p50"], (run["ttft_ms"], derived["ttft_ms"])
EOF

# DistServe's own runs are disaggregated, and the layout is in its launch
# scripts, not in the result: --prefill-instances/--decode-instances (and
# their TPs) replay every run on that layout.  With the parameter pinned,
# the "fitted" TTFT is exactly what `run` gives on the same layout, and not
# the colocated one (prefill at TP 2 here).
DS=${SERVESIM_TEST_DATA:?}/serving/distserve-c21d11-2-1.5.exp
LAYOUT="--prefill-instances 1 --decode-instances 1 --prefill-tp 2 --decode-tp 1"
"$BIN" calibrate fit-engine --engine distserve --model opt-13b --gpu a100-80gb-sxm --tp 1 $LAYOUT \
	--stack distserve --free frontend_ms:5:5 --no-holdout --json="$T/pd.json" --out "$T/pd-prof.json" "$DS" >/dev/null 2>"$T/err" ||
	fail "fit-engine on a disaggregated layout: $(cat "$T/err")"
# --out holds the fitted stack beside the profile (which names it): one
# file for --engine-catalog and --stack-catalog
"$BIN" run --trace "$DS" --engine distserve --engine-catalog "$T/pd-prof.json" --stack-catalog "$T/pd-prof.json" \
	--model opt-13b --gpu a100-80gb-sxm --tp 1 $LAYOUT --json >"$T/pd-run.json" 2>"$T/err" || fail "run on the layout: $(cat "$T/err")"
"$BIN" run --trace "$DS" --engine distserve --engine-catalog "$T/pd-prof.json" --stack-catalog "$T/pd-prof.json" \
	--model opt-13b --gpu a100-80gb-sxm --tp 1 --json >"$T/pd-colo.json" 2>"$T/err" || fail "run colocated: $(cat "$T/err")"
"$PY" - "$T/pd-prof.json" "$T/pd-run.json" <<'EOF' && pass "fit-engine --out: the fitted stack beside the profile, which names it; run uses it" || fail "fit-engine --out stack: $(cat "$T/pd-prof.json")"
import json, sys
f, run = (json.load(open(p)) for p in sys.argv[1:3])
st, = f["stacks"]
assert st["name"] == "distserve-stack" and st["frontend_ms"] == 5 and st["cv"] == 0.5, st
assert f["engines"][0]["stack"] == "distserve-stack", f["engines"][0]
assert run["config"]["serving_stack"]["frontend_ms"] == 5, run["config"]["serving_stack"]
EOF
expect_error 2 "^servesim: --free api_in_ms: a legacy serving-stack key, and the runs have stack distserve" -- \
	calibrate fit-engine --engine distserve --stack distserve --free api_in_ms:5:5 --no-holdout "$DS"
printf '{"engines": [{"name": "legacy", "versions": "t", "source": "t", "api_in_ms": 3}]}\n' >"$T/legacy.json"
expect_error 2 "^servesim: --free frontend_ms: a serving-stack term, and profile legacy's stack is its legacy api_in_ms" -- \
	calibrate fit-engine --engine legacy --engine-catalog "$T/legacy.json" --free frontend_ms:1:10 --no-holdout "$DS"
"$PY" - "$T/pd.json" "$T/pd-run.json" "$T/pd-colo.json" <<'EOF' && pass "fit-engine replays every run on the given disaggregated layout" || fail "fit-engine ignored the disaggregated layout"
import json, sys
rep, run, colo = (json.load(open(p)) for p in sys.argv[1:4])
fit = {r["metric"]: r["fitted"] for r in rep["runs"]}
assert abs(fit["ttft_p50"] / run["ttft_ms"]["p50"] - 1) < 1e-6, (fit, run["ttft_ms"])
assert abs(fit["ttft_p50"] / colo["ttft_ms"]["p50"] - 1) > 0.05, (fit, colo["ttft_ms"])
EOF
expect_error 2 "--prefill-instances and --decode-instances go together" -- \
	calibrate fit-engine --prefill-instances 1 "$DS"
expect_error 2 "--prefill-instances and --decode-instances go together" -- \
	calibrate fit-engine --prefill-tp 2 "$DS"
expect_error 2 "--decode-tp: expected an integer in 1..64, got '0'" -- \
	calibrate fit-engine --prefill-instances 1 --decode-instances 1 --decode-tp 0 "$DS"

# A closed-loop table row (aiconfigurator silicon) is re-run as its
# benchmark ran it: 12C requests from C clients, the first 2C a warm-up left
# out of the means; with --closed-start burst all clients start at 0, so
# the prediction is exactly `run --concurrency` over requests 2C..12C.
S=$SERVESIM_TEST_DATA/serving/silicon.csv
"$BIN" calibrate fit-engine --no-fit --closed-start burst --engine vllm --select mode=agg \
	--json="$T/sil.json" "$S" >"$T/sil.txt" 2>"$T/err" || fail "fit-engine --no-fit on silicon: $(cat "$T/err")"
"$BIN" run --engine vllm --model llama-3.1-8b --gpu h100-sxm --tp 2 --concurrency 16 \
	--lengths fixed:prompt=1024,output=128 --num-requests 192 --out "$T/sil-run" >/dev/null 2>"$T/err" ||
	fail "run --concurrency 16: $(cat "$T/err")"
"$PY" - "$T/sil.json" "$T/sil-run/requests.csv" <<'EOF' && pass "a closed-loop row is 12C requests with a 2C warm-up left out" || fail "closed-loop row not re-run as measured: $(cat "$T/sil.txt")"
import csv, json, sys
rep = json.load(open(sys.argv[1]))
rows = sorted(csv.DictReader(open(sys.argv[2])), key=lambda r: int(r["id"]))
assert len(rows) == 192, len(rows)
want = {m: sum(float(r[m + "_ms"]) for r in rows[32:]) / 160 for m in ("ttft", "tpot")}
allm = {m: sum(float(r[m + "_ms"]) for r in rows) / 192 for m in ("ttft", "tpot")}
got = {r["metric"].split("_")[0]: r["fitted"] for r in rep["runs"]}
for m in ("ttft", "tpot"):
    # the report keeps 8 significant digits, requests.csv about 6
    assert abs(got[m] / want[m] - 1) < 1e-5, (m, got, want)
EOF
# the warm-up matters: behind llm-d-exp0's 43 ms FIFO front end (the burst
# queues there; behind the default 10.3 ms stack the first 2C requests move
# the mean by only 0.07%) the mean of 2C..12C is the row's, not that of all
"$BIN" calibrate fit-engine --no-fit --closed-start burst --engine vllm --stack llm-d-exp0 --select mode=agg \
	--json="$T/sil43.json" "$S" >/dev/null 2>"$T/err" || fail "fit-engine --stack llm-d-exp0: $(cat "$T/err")"
"$BIN" run --engine vllm --stack llm-d-exp0 --model llama-3.1-8b --gpu h100-sxm --tp 2 --concurrency 16 \
	--lengths fixed:prompt=1024,output=128 --num-requests 192 --out "$T/sil43-run" >/dev/null 2>"$T/err" ||
	fail "run --stack llm-d-exp0: $(cat "$T/err")"
"$PY" - "$T/sil43.json" "$T/sil43-run/requests.csv" <<'EOF' && pass "the 2C warm-up is left out, and it matters" || fail "warm-up: the row's mean is not that of requests 2C..12C"
import csv, json, sys
rep = json.load(open(sys.argv[1]))
rows = sorted(csv.DictReader(open(sys.argv[2])), key=lambda r: int(r["id"]))
want = sum(float(r["ttft_ms"]) for r in rows[32:]) / 160
allm = sum(float(r["ttft_ms"]) for r in rows) / 192
got = [r["fitted"] for r in rep["runs"] if r["metric"] == "ttft_mean"][0]
assert abs(got / want - 1) < 1e-5 and abs(allm / want - 1) > 1e-3, (got, want, allm)
EOF
grep -q "^group .*MAPE" "$T/sil.txt" && grep -q "predicting 1 configuration" "$T/sil.txt" &&
	pass "--no-fit predicts with the profile as it is and prints the error by group" ||
	fail "--no-fit output: $(cat "$T/sil.txt")"
# out of phase (the default) the row's clients do not queue behind a burst
"$BIN" calibrate fit-engine --no-fit --engine vllm --select mode=agg --json="$T/sil-spread.json" \
	"$S" >/dev/null 2>"$T/err" || fail "fit-engine --closed-start spread: $(cat "$T/err")"
"$PY" - "$T/sil.json" "$T/sil-spread.json" <<'EOF' && pass "clients out of phase: a lower TTFT than a burst" || fail "--closed-start spread changed nothing"
import json, sys
b, s = ({r["metric"]: r["fitted"] for r in json.load(open(p))["runs"]} for p in sys.argv[1:3])
assert s["ttft_mean"] < b["ttft_mean"], (s, b)
EOF
# --closed-start drained: the measured phase as perf_analyzer runs it (the
# warm-up drains first): one round of all 16 clients at once on an idle
# engine, then nine out of phase; each mean is (first round's + 9 x the
# out-of-phase one's) / 10, the first round being `run --concurrency 16
# --num-requests 16`
"$BIN" calibrate fit-engine --no-fit --closed-start drained --engine vllm --select mode=agg \
	--json="$T/sil-drained.json" "$S" >/dev/null 2>"$T/err" ||
	fail "fit-engine --closed-start drained: $(cat "$T/err")"
"$BIN" run --engine vllm --model llama-3.1-8b --gpu h100-sxm --tp 2 --concurrency 16 \
	--lengths fixed:prompt=1024,output=128 --num-requests 16 --json >"$T/round1.json" 2>"$T/err" ||
	fail "run one round: $(cat "$T/err")"
"$PY" - "$T/sil-drained.json" "$T/sil-spread.json" "$T/round1.json" <<'EOF' && pass "--closed-start drained: a burst's first round and nine rounds out of phase" || fail "--closed-start drained is not (round 1 + 9 x out of phase) / 10"
import json, sys
d, s = ({r["metric"]: r["fitted"] for r in json.load(open(p))["runs"]} for p in sys.argv[1:3])
r1 = json.load(open(sys.argv[3]))
for m in ("ttft", "tpot"):
    want = (r1[m + "_ms"]["mean"] + 9 * s[m + "_mean"]) / 10
    assert abs(d[m + "_mean"] / want - 1) < 1e-6, (m, d, s, r1[m + "_ms"])
assert d["ttft_mean"] > s["ttft_mean"] * 1.01, (d, s)   # the first round's queue shows
EOF
# --closed-max-seqs C-K: the row is re-run with the server admitting C - K of
# its C clients (max_num_seqs; aiconfigurator launched TensorRT-LLM with
# max_batch_size = C): exactly `run --concurrency 16 --policy
# vllm:max_num_seqs=15`
"$BIN" calibrate fit-engine --no-fit --closed-start burst --closed-max-seqs C-1 --engine vllm \
	--select mode=agg --json="$T/sil-s15.json" "$S" >/dev/null 2>"$T/err" ||
	fail "fit-engine --closed-max-seqs C-1: $(cat "$T/err")"
"$BIN" run --engine vllm --policy vllm:max_num_seqs=15 --model llama-3.1-8b --gpu h100-sxm --tp 2 \
	--concurrency 16 --lengths fixed:prompt=1024,output=128 --num-requests 192 --out "$T/sil-s15-run" \
	>/dev/null 2>"$T/err" || fail "run --policy vllm:max_num_seqs=15: $(cat "$T/err")"
"$PY" - "$T/sil-s15.json" "$T/sil-s15-run/requests.csv" "$T/sil.json" <<'EOF' && pass "--closed-max-seqs C-1: the server holds C - 1 of a row's C clients" || fail "--closed-max-seqs C-1 not re-run as max_num_seqs = C - 1"
import csv, json, sys
rep = json.load(open(sys.argv[1]))
rows = sorted(csv.DictReader(open(sys.argv[2])), key=lambda r: int(r["id"]))
want = {m: sum(float(r[m + "_ms"]) for r in rows[32:]) / 160 for m in ("ttft", "tpot")}
got = {r["metric"].split("_")[0]: r["fitted"] for r in rep["runs"]}
full = {r["metric"].split("_")[0]: r["fitted"] for r in json.load(open(sys.argv[3]))["runs"]}
for m in ("ttft", "tpot"):
    assert abs(got[m] / want[m] - 1) < 1e-5, (m, got, want)
# the limit is in force: one client in 16 waits for a slot (here it also
# breaks the burst's lock-step, so the mean TTFT moves either way)
assert abs(got["ttft"] / full["ttft"] - 1) > 0.05, (got, full)
EOF
"$BIN" calibrate fit-engine --no-fit --closed-start burst --closed-max-seqs C --engine vllm \
	--select mode=agg --json="$T/sil-s16.json" "$S" >/dev/null 2>"$T/err" &&
	"$PY" - "$T/sil-s16.json" "$T/sil.json" <<'EOF' && pass "--closed-max-seqs C: no client waits for a slot" || fail "--closed-max-seqs C changed the row"
import json, sys
a, b = ({r["metric"]: r["fitted"] for r in json.load(open(p))["runs"]} for p in sys.argv[1:3])
assert a == b, (a, b)
EOF
expect_error 2 "--closed-max-seqs: expected C or C-K" -- \
	calibrate fit-engine --closed-max-seqs C+1 "$S"
expect_error 2 "--closed-max-seqs: needs a vllm batch policy that does not set max_num_seqs" -- \
	calibrate fit-engine --policy vllm:max_num_seqs=8 --closed-max-seqs C-1 "$S"
# a precision servesim does not model is skipped with the reason, one line
# per reason however many rows share it (a table of hundreds would bury the
# fit's output); fp8 rows are replayed with fp8 weights, fp4 ones too on a
# GPU without fp4 tensor cores (weight-only W4A16: fewer weight bytes)
sed -n '1p;2p' "$S" >"$T/q.csv"
sed -n '2p' "$S" | sed 's/,bf16,agg,/,int4_wo,agg,/' >>"$T/q.csv"
"$BIN" calibrate fit-engine --no-fit --engine vllm "$T/q.csv" >/dev/null 2>"$T/err" &&
	grep -q "its precision is none of bf16, fp8, fp4 (not modelled)" "$T/err" &&
	pass "an int4 row is skipped with its reason" || fail "int4 row: $(cat "$T/err")"
sed -n '1p;2p' "$S" >"$T/q8.csv"
sed -n '2p' "$S" | sed 's/,bf16,agg,/,fp8,agg,/' >>"$T/q8.csv"
sed -n '2p' "$S" | sed 's/,bf16,agg,/,fp4,agg,/' >>"$T/q8.csv"
"$BIN" calibrate fit-engine --no-fit --engine vllm --json="$T/q8.json" "$T/q8.csv" >/dev/null 2>"$T/err" &&
	"$PY" - "$T/q8.json" <<'EOF' && pass "an fp8 row is replayed in fp8 (a lower TPOT than its bf16 twin, not merged with it), an fp4 row on an H100 weight-only (lower still)" || fail "fp8 row: $(cat "$T/err")"
import json, sys
q = {r["run"].split(" ")[0].rsplit(":", 1)[1]: r["fitted"]
     for r in json.load(open(sys.argv[1]))["runs"] if r["metric"] == "tpot_mean"}
assert sorted(q) == ["2", "3", "4"], q
assert q["3"] < 0.9 * q["2"], q
assert q["4"] < q["3"], q
EOF
sed -n '2p' "$S" | sed 's/,bf16,agg,/,int4_wo,agg,/' >>"$T/q.csv"
sed -n '2p' "$S" | sed 's/,bf16,agg,/,int4_wo,agg,/' >>"$T/q.csv"
"$BIN" calibrate fit-engine --no-fit --engine vllm "$T/q.csv" >"$T/out" 2>"$T/err" &&
	[ "$(grep -c skipped "$T/err")" = 1 ] &&
	grep -q "^servesim: skipped 3 runs (.* and 2 more): its precision is none of" "$T/err" &&
	! grep -q nan "$T/out" && grep -q "measured  *predicted  *error" "$T/out" &&
	pass "three rows skipped for one reason are one line; --no-fit prints predictions and errors, no nan" ||
	fail "grouped skips: $(cat "$T/err" "$T/out")"

# --jobs N: the same fit, bit for bit, on any number of threads
for j in 1 3; do
	"$BIN" calibrate fit-engine --engine start --engine-catalog "$T/engines.json" --cost-model roofline \
		--free launch_us:100:1e6,api_in_ms:0.01:1000 --group-by run --jobs $j \
		--json="$T/j$j.json" "$T/measured.csv" >"$T/j$j.txt" 2>"$T/err" || fail "--jobs $j: $(cat "$T/err")"
done
cmp -s "$T/j1.txt" "$T/j3.txt" && cmp -s "$T/j1.json" "$T/j3.json" &&
	pass "--jobs 3 gives the fit and held-out table of --jobs 1" || fail "--jobs changes the fit"
expect_error 2 "--jobs: expected an integer in 1..64, got '0'" -- calibrate fit-engine --jobs 0 "$T/measured.csv"
expect_error 2 "--closed-start: expected spread, burst or drained, got 'x'" -- \
	calibrate fit-engine --closed-start x "$T/measured.csv"

# A row whose replay leaves requests that never complete (B200 TRT-LLM
# Llama-3.1-70B fp8, TP 1, C = 128, 1024 + 8192 with --closed-max-seqs C-1:
# a preempted request's re-prefill above max_num_batched_tokens, chunking
# off, is rejected) is skipped with its reason, counted like the other
# skips; the TP 4 row beside it is still predicted.  Two rows of
# ../shared/data/serving/aiconfigurator_silicon/silicon_sample_excl_h200.csv.
cat >"$T/silicon.csv" <<'EOF'
id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,prefill_batch_size,prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms
2026_04_06_llama_3_1_70b_b200_sxm_trtllm_fp8_agg_1024x8192_c128_tp4_ep1_297,source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=128; measured=2025-10-29T00:00:00.000Z; wip=False,trtllm,,meta-llama/Llama-3.1-70B,b200_sxm,fp8,agg,1024,8192,fp8,fp8,128,4,1,1,4,1,,,,,,,,,,,,,,,259.8850148395286,14.43307644344074
2026_04_06_llama_3_1_70b_b200_sxm_trtllm_fp8_agg_1024x8192_c128_tp1_ep1_298,source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=128; measured=2025-10-29T00:00:00.000Z; wip=False,trtllm,,meta-llama/Llama-3.1-70B,b200_sxm,fp8,agg,1024,8192,fp8,fp8,128,1,1,1,1,1,,,,,,,,,,,,,,,136621.79120965282,26.617496446551424
EOF
"$BIN" calibrate fit-engine --no-fit --engine trtllm --closed-start spread --closed-max-seqs C-1 \
	"$T/silicon.csv" >"$T/out" 2>"$T/err" || fail "unschedulable row: exit $?: $(cat "$T/err")"
grep -q "^servesim: skipped silicon.csv:3 llama-3.1-70b tp1 c128 x 1024+8192: its replay leaves requests that never complete (could not be scheduled on an idle instance)$" "$T/err" &&
	grep -q "^predicting 1 configuration of 2 runs" "$T/out" &&
	grep -q "^silicon.csv:2 llama-3.1-70b tp4 c128 x 1024+8192 *tpot_mean" "$T/out" &&
	pass "fit-engine skips a row whose replay leaves requests unscheduled" ||
	fail "unschedulable row: $(cat "$T/err" "$T/out")"
# a second such row (another TP 1 row, C = 64): one summary line for both
sed -n '3p' "$T/silicon.csv" | sed 's/_c128_/_c64_/; s/silicon_concurrency=128/silicon_concurrency=64/; s/,128,1,1,1,1,1,/,64,1,1,1,1,1,/' >>"$T/silicon.csv"
"$BIN" calibrate fit-engine --no-fit --engine trtllm --closed-start spread --closed-max-seqs C-1 \
	"$T/silicon.csv" >"$T/out" 2>"$T/err" || fail "unschedulable rows: $(cat "$T/err")"
[ "$(grep -c 'never complete' "$T/err")" = 1 ] &&
	grep -q "^servesim: skipped 2 runs (silicon.csv:3 .* and 1 more): its replay leaves requests that never complete" "$T/err" &&
	pass "unschedulable rows: one summary line" || fail "unschedulable rows: $(cat "$T/err")"

# --closed-max-tokens C+ISL+K: a closed-loop row's step token budget is its
# clients plus its prompt plus K (aiconfigurator's TensorRT-LLM benchmark
# launch: max_num_tokens = max_batch_size + isl + 1500), replacing the
# policy's.  B200 TRT-LLM Llama-3.1-70B fp8, TP 4, C = 4, 8192 + 1024 (line
# 3212 of the silicon CSV; 265.7 ms TTFT, 7.67 ms TPOT measured): with the
# trtllm profile's 8192-token budget and chunking off an 8192-token prompt
# fits only an empty step, so the replay serves one request at a time
# (TTFT tens of seconds); with 4 + 8192 + 1500 = 9696 it is exactly `run
# --policy vllm:chunked=off,max_num_batched_tokens=9696`.
sed -n '1p' "$T/silicon.csv" >"$T/s8k.csv"
cat >>"$T/s8k.csv" <<'EOF'
2026_04_06_llama_3_1_70b_b200_sxm_trtllm_fp8_agg_8192x1024_c4_tp4_ep1_867,source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=4; measured=2025-10-29T00:00:00.000Z; wip=False,trtllm,,meta-llama/Llama-3.1-70B,b200_sxm,fp8,agg,8192,1024,fp8,fp8,4,4,1,1,4,1,,,,,,,,,,,,,,,265.7011513831094,7.671108176249255
EOF
"$BIN" calibrate fit-engine --no-fit --engine trtllm --closed-start burst --closed-max-tokens C+ISL+1500 \
	--json="$T/s8k-tok.json" "$T/s8k.csv" >/dev/null 2>"$T/err" ||
	fail "fit-engine --closed-max-tokens: $(cat "$T/err")"
"$BIN" calibrate fit-engine --no-fit --engine trtllm --closed-start burst \
	--json="$T/s8k-8192.json" "$T/s8k.csv" >/dev/null 2>"$T/err" ||
	fail "fit-engine 8192-token row: $(cat "$T/err")"
"$BIN" run --engine trtllm --policy vllm:chunked=off,max_num_batched_tokens=9696 --model llama-3.1-70b \
	--gpu b200 --tp 4 --weight-dtype fp8 --concurrency 4 --lengths fixed:prompt=8192,output=1024 \
	--num-requests 48 --out "$T/s8k-run" >/dev/null 2>"$T/err" || fail "run 9696-token budget: $(cat "$T/err")"
"$PY" - "$T/s8k-tok.json" "$T/s8k-run/requests.csv" "$T/s8k-8192.json" <<'EOF' && pass "--closed-max-tokens C+ISL+1500: an 8192-token prompt joins running decodes (the budget C + ISL + 1500)" || fail "--closed-max-tokens not re-run as max_num_batched_tokens = C + ISL + 1500"
import csv, json, sys
rep = json.load(open(sys.argv[1]))
rows = sorted(csv.DictReader(open(sys.argv[2])), key=lambda r: int(r["id"]))
assert len(rows) == 48, len(rows)
want = {m: sum(float(r[m + "_ms"]) for r in rows[8:]) / 40 for m in ("ttft", "tpot")}
got = {r["metric"].split("_")[0]: r["fitted"] for r in rep["runs"]}
old = {r["metric"].split("_")[0]: r["fitted"] for r in json.load(open(sys.argv[3]))["runs"]}
for m in ("ttft", "tpot"):
    assert abs(got[m] / want[m] - 1) < 1e-5, (m, got, want)
# the 8192-token budget serialises the row: a whole request's wait per
# client, and a batch of one
assert old["ttft"] > 20 * got["ttft"], (old, got)
assert old["tpot"] < 0.9 * got["tpot"], (old, got)
EOF
expect_error 2 "--closed-max-tokens: expected C.ISL.K .K an integer 0..1000000., got .C.1." -- \
	calibrate fit-engine --closed-max-tokens C+1 "$T/s8k.csv"
expect_error 2 "--closed-max-tokens: needs a vllm batch policy" -- \
	calibrate fit-engine --policy static --closed-max-tokens C+ISL+1500 "$T/s8k.csv"

# Silicon rows by parallelism layout (real rows of the silicon CSV, gpt-oss-120b
# on B200): a TP 2 row and the same row with its experts over both GPUs
# (moe_tp 1 x moe_ep 2) are two configurations, not repeats of one (the
# merge compared tp only); an attention-DP row's batch_size is per rank, so
# the row of batch_size 16 on attention_dp_size 4 is 64 clients (its id:
# _c64_); the same measurement written by the 2026-04-06 dump as
# attention_dp_size 16, moe_tp 4 x moe_ep 4, batch_size 4 (16 GPUs on an
# 8-GPU node) is skipped with its reason.
sed -n '1p' "$T/silicon.csv" >"$T/lay.csv"
cat >>"$T/lay.csv" <<'EOF'
2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c8_tp2_ep1_456,source_file=2026-04-06.csv,trtllm,1.2.0rc2.post2,openai/gpt-oss-120b,b200_sxm,fp4,agg,1024,1024,nvfp4,nvfp4,8,2,1,1,2,1,,,,,,,,,,,,,,,41.772589008905925,3.3759476326001594
2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c8_tp2_ep2_test,source_file=test,trtllm,1.2.0rc2.post2,openai/gpt-oss-120b,b200_sxm,fp4,agg,1024,1024,nvfp4,nvfp4,8,2,1,1,1,2,,,,,,,,,,,,,,,41.772589008905925,3.3759476326001594
2026_03_25_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c64_tp4_0_ep4_0_1007,source_file=2026-03-25.csv,trtllm,1.2.0rc2.post2,openai/gpt-oss-120b,b200_sxm,fp4,agg,1024,1024,nvfp4,nvfp4,16,1,1,4,1,4,,,,,,,,,,,,,,,194.0538869210286,6.423807455536409
2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c64_tp4_ep4_1904,source_file=2026-04-06.csv,trtllm,1.2.0rc2.post2,openai/gpt-oss-120b,b200_sxm,fp4,agg,1024,1024,nvfp4,nvfp4,4,1,1,16,4,4,,,,,,,,,,,,,,,194.0538869210286,6.423807455536409
EOF
"$BIN" calibrate fit-engine --no-fit --engine trtllm --closed-max-tokens C+ISL+1500 --group-by model-tp \
	"$T/lay.csv" >"$T/out" 2>"$T/err" || fail "silicon layouts: $(cat "$T/err")"
grep -q "^predicting 3 configurations of 3 runs" "$T/out" &&
	grep -q "^gpt-oss-120b tp2 *tpot_mean *1 " "$T/out" &&
	grep -q "^gpt-oss-120b tp2 ep2 *tpot_mean *1 " "$T/out" &&
	grep -q "^lay.csv:4 gpt-oss-120b tp4 ep4 dp4 c64 x 1024+1024 *tpot_mean" "$T/out" &&
	pass "silicon layouts: an EP row is not a repeat of its TP row; attention-DP rows are batch_size x attention_dp_size clients" ||
	fail "silicon layouts: $(cat "$T/out" "$T/err")"
grep -q "^servesim: skipped 2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c64_tp4_ep4_1904: moe_tp_size and moe_ep_size both above 1 on more GPUs than a node" "$T/err" &&
	pass "a 16-GPU moe_tp 4 x moe_ep 4 row on an 8-GPU node (a dump's tp x ep encoding) is skipped" ||
	fail "tp x ep encoding not skipped: $(cat "$T/err")"

# Disaggregated silicon rows (tests/data/serving/silicon-disagg.csv: eight
# rows of the silicon CSV as they are, NOTICE).  The config_id dump writes
# each pool as workers x (tp_size x attention_dp_size GPUs, moe_ep_size):
# line 2 is one DEP4 prefill worker (tp_size 1, attention_dp_size 4,
# moe_ep_size 4) and five TEP8 decode workers (tp_size 8, moe_ep_size 8);
# line 3 DEP16 and three TEP16 on H100 (two nodes each); line 4 DEP8 and a
# TP8 decode worker (moe_tp_size 8); line 5 TP8 and TP8.  Lines 7 and 8
# (the 2026-03-25 and 2026-04-06 dumps) give no worker counts, line 6
# no concurrency, and line 9's FP8 DeepSeek on 4 GB200 GPUs as 4 attention
# ranks (each a copy of the attention weights) leaves no KV under vLLM's
# rule (--gpu-memory-utilization 0.9: 0.9 M - W; TensorRT-LLM's own rule,
# 0.9 (M - W), would hold some): skipped with their reasons.
D=$SERVESIM_TEST_DATA/serving/silicon-disagg.csv
"$BIN" calibrate fit-engine --no-fit --engine trtllm --gpu-memory-utilization 0.9 \
	--closed-max-tokens C+ISL+1500 --group-by model-tp \
	--json="$T/pd-sil.json" "$D" >"$T/out" 2>"$T/err" || fail "disaggregated silicon rows: $(cat "$T/err")"
grep -q "^predicting 4 configurations of 4 runs" "$T/out" &&
	grep -q "^silicon-disagg.csv:2 deepseek-v3 p tp4 ep4 dp4 x1 / d tp8 ep8 x5 c10 x 1024+1024 *tpot_mean" "$T/out" &&
	grep -q "^silicon-disagg.csv:3 deepseek-v3 p tp16 ep16 dp16 x1 / d tp16 ep16 x3 c6 x 8192+1024 *ttft_mean" "$T/out" &&
	grep -q "^silicon-disagg.csv:4 deepseek-v3 p tp8 ep8 dp8 x1 / d tp8 x1 c1 x 8192+1024 *tpot_mean" "$T/out" &&
	grep -q "^silicon-disagg.csv:5 deepseek-v3 p tp8 x1 / d tp8 x1 c1 x 8192+1024 *tpot_mean" "$T/out" &&
	grep -q "^deepseek-v3 p tp4 ep4 dp4 x1 / d tp8 ep8 x5 *ttft_mean *1 " "$T/out" &&
	grep -q "^deepseek-v3 p tp16 ep16 dp16 x1 / d tp16 ep16 x3 *tpot_mean *1 " "$T/out" &&
	pass "disaggregated silicon rows replay on both pools' layouts (run names and groups)" ||
	fail "disaggregated silicon rows: $(cat "$T/out" "$T/err")"
grep -q "^servesim: skipped 2 runs (2026_03_25_deepseek_r1_h100_sxm_trtllm_fp8_disagg_8192x1024_c154_tp16_0_ep16_0_851 and 1 more): no prefill_num_workers / decode_num_workers" "$T/err" &&
	grep -q "^servesim: skipped qwen3_32b_qwen3_32b_h100_sxm_vllm_disagg_4000x1000_c_tp_epnone_2: no client concurrency recorded" "$T/err" &&
	grep -q "^servesim: skipped dsr1_gb200_sglang_fp8_disagg_1024x1024_c128_cfg227: a pool's weights do not fit its GPUs' memory" "$T/err" &&
	pass "disaggregated rows without worker counts or concurrency are skipped with their reasons" ||
	fail "disaggregated skips: $(cat "$T/err")"
# Each pool's recorded max_batch_size is its limit: line 3's decode workers
# hold 2 of the 6 clients each (decode_batch_size 2); at 1 a second request
# waits on each worker for a whole first one, so TPOT (first to last token)
# grows.
sed -n '1p;3p' "$D" >"$T/pd-b2.csv"
sed -n '1p;3p' "$D" | sed '2s/,16,2,3,16,1,1,1,16,/,16,1,3,16,1,1,1,16,/' >"$T/pd-b1.csv"
for b in b2 b1; do
	"$BIN" calibrate fit-engine --no-fit --engine trtllm --json="$T/pd-$b.json" "$T/pd-$b.csv" \
		>/dev/null 2>"$T/err" || fail "decode batch $b: $(cat "$T/err")"
done
"$PY" - "$T/pd-b2.json" "$T/pd-b1.json" <<'EOF' && pass "a disaggregated row's decode_batch_size caps each decode worker" || fail "decode_batch_size ignored"
import json, sys
tpot = [next(r["fitted"] for r in json.load(open(f))["runs"] if r["metric"] == "tpot_mean") for f in sys.argv[1:]]
sys.exit(0 if tpot[1] > 1.3 * tpot[0] else 1)
EOF
# --gpus-per-node is the NVLink domain of the link and collective model:
# line 3's DEP16 prefill worker spans two 8-GPU H100 nodes by default and
# one domain at 16, where its prefill (its MoE all-to-all) is faster.
for n in 8 16; do
	"$BIN" calibrate fit-engine --no-fit --engine trtllm --gpus-per-node $n --json="$T/pd-n$n.json" \
		"$T/pd-b2.csv" >/dev/null 2>"$T/err" || fail "--gpus-per-node $n: $(cat "$T/err")"
done
"$PY" - "$T/pd-n8.json" "$T/pd-n16.json" <<'EOF' && pass "--gpus-per-node 16 puts a 16-GPU prefill worker on one NVLink domain (shorter TTFT)" || fail "--gpus-per-node ignored"
import json, sys
ttft = [next(r["fitted"] for r in json.load(open(f))["runs"] if r["metric"] == "ttft_mean") for f in sys.argv[1:]]
sys.exit(0 if ttft[1] < 0.9 * ttft[0] else 1)
EOF
expect_error 2 "--gpus-per-node: expected an integer in 1..1024, got '0'" -- \
	calibrate fit-engine --gpus-per-node 0 "$D"
sed -n '1,2p' "$D" | sed '2s/,1,1,1,1,4,1,4,2,5,8,/,1,1,1,1,4,1,4,2,five,8,/' >"$T/pd-bad.csv"
expect_error 1 "pd-bad.csv:2: decode_num_workers: expected a number, got 'five'" -- \
	calibrate fit-engine --no-fit --engine trtllm "$T/pd-bad.csv"

finish
