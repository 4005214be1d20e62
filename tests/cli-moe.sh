#!/bin/sh
# Mixture of experts under tensor parallelism (docs/cost-models.md,
# "Mixture of experts"): Qwen3-30B-A3B runs on one H100 and, reading only
# the experts a step touches, decodes faster than the dense Qwen3-32B of
# the same hidden size's family; Mixtral runs at TP 2; the live executor
# and calibrate run (dense synthetic models) refuse MoE with one line;
# MoE with MLA or local attention runs too.
. "$(dirname "$0")/cli-lib.sh"

"$BIN" run --model qwen3-30b-a3b --gpu h100-sxm --tp 1 --num-requests 50 --json >"$T/moe.json" ||
	fail "qwen3-30b-a3b run failed"
"$BIN" run --model qwen3-32b --gpu h100-sxm --tp 1 --num-requests 50 --json >"$T/dense.json" ||
	fail "qwen3-32b run failed"
"$BIN" run --model qwen3-30b-a3b --gpu h100-sxm --tp 1 --num-requests 50 --weight-dtype fp8 \
	--json >"$T/fp8.json" || fail "qwen3-30b-a3b fp8 run failed"
PY=$(command -v python3) || { echo "skip rest: python3 not found"; finish; }
"$PY" - "$T/moe.json" "$T/dense.json" "$T/fp8.json" <<'PYEOF' && pass "qwen3-30b-a3b: TPOT below qwen3-32b's, fp8 below bf16, more KV blocks" || fail "MoE run not as expected"
import json, sys
m, d, f = (json.load(open(p)) for p in sys.argv[1:4])
assert m["requests_completed"] == 50, m["requests_completed"]
assert m["tpot_ms"]["p50"] < d["tpot_ms"]["p50"], (m["tpot_ms"]["p50"], d["tpot_ms"]["p50"])
assert m["tpot_ms"]["mean"] < d["tpot_ms"]["mean"], (m["tpot_ms"]["mean"], d["tpot_ms"]["mean"])
assert f["tpot_ms"]["mean"] < m["tpot_ms"]["mean"], (f["tpot_ms"]["mean"], m["tpot_ms"]["mean"])
assert f["kv_blocks_per_instance"] > m["kv_blocks_per_instance"]
PYEOF

# The cost model named truthfully (issue 34): an fp8 MoE run keeps the
# table for attention (auto), but its GEMMs and element-wise kernels are
# the roofline's, and summary.txt and report.html say so with their share
# of the busy time, not "table" alone; an H200 run says whose tables it
# scaled.
"$BIN" run --model qwen3-30b-a3b --gpu h100-sxm --weight-dtype fp8 --num-requests 30 \
	--out "$T/fp8run" -q 2>"$T/err" || fail "fp8 run: $(cat "$T/err")"
want="table; roofline for gemm, elementwise ([0-9.]*% of busy time)"
grep -q "^          cost model $want, engine" "$T/fp8run/summary.txt" &&
	grep -q "<th>cost model</th><td>$want</td>" "$T/fp8run/report.html" &&
	grep -q "cost model $want, engine vllm; servesim" "$T/fp8run/report.html" &&
	pass "summary.txt and report.html: gemm and elementwise from the roofline, with their share" ||
	fail "cost model line: $(grep 'cost model' "$T/fp8run/summary.txt")"
"$BIN" run --model qwen3-30b-a3b --gpu h200-sxm --weight-dtype fp8 --num-requests 30 \
	--out "$T/h200run" -q 2>"$T/err" || fail "h200 run: $(cat "$T/err")"
grep -q "cost model scaled (h100-sxm's tables x the roofline); roofline for gemm, elementwise" \
	"$T/h200run/summary.txt" && grep -q '"scaled_from": "h100-sxm"' "$T/h200run/summary.json" &&
	pass "an H200 run names the H100 tables it scaled" ||
	fail "h200 cost model line: $(grep 'cost model' "$T/h200run/summary.txt")"

"$BIN" run --model mixtral-8x7b --gpu h100-sxm --tp 2 --num-requests 20 >"$T/out" 2>"$T/err" &&
	grep -q "mixtral-8x7b" "$T/out" && pass "mixtral-8x7b runs at tp 2" || fail "mixtral: $(cat "$T/err")"
"$BIN" run --model qwen3-30b-a3b --cost-model fit --num-requests 5 >/dev/null 2>"$T/err"
grep -q "mixture-of-experts is not modelled by this cost model yet" "$T/err" &&
	pass "--cost-model fit refuses MoE" || fail "fit: $(cat "$T/err")"
expect_error 1 "^servesim: qwen3-30b-a3b: live runs execute dense models only" -- \
	live --model qwen3-30b-a3b --num-requests 2
expect_error 1 "^servesim: qwen3-30b-a3b: calibrate run measures dense models only" -- \
	calibrate run --model qwen3-30b-a3b --store "$T/cal.db"
[ ! -e "$T/cal.db" ] && pass "calibrate run refused MoE before creating its store" || fail "left $T/cal.db"
"$BIN" run --model gpt-oss-120b --tp 4 --num-requests 5 >"$T/out" 2>"$T/err" &&
	pass "gpt-oss-120b runs at tp 4" || fail "gpt-oss-120b: $(cat "$T/err")"

# aiconfigurator silicon rows with experts spread over GPUs (moe_ep_size 4
# or 8, moe_tp_size 1 or 2): replayed as --tp tp_size x attention_dp_size
# --ep moe_ep_size (docs/validation.md), grouped by layout; TPOT within
# the issue's 20% over all 127 (13% today, not tuned to them); a row whose
# moe_tp_size x moe_ep_size is not that tp is skipped with its reason
SIL=${SERVESIM_SHARED_DATA:-$(dirname "$0")/../../shared/data}/serving/aiconfigurator_silicon/silicon_sample_excl_h200.csv
if [ -f "$SIL" ]; then
	"$BIN" calibrate fit-engine --no-fit --engine trtllm --model qwen3-235b-a22b --select engine=trtllm \
		--select gpu=h100_sxm --select mode=agg --select precision=fp8 \
		--select model=Qwen/Qwen3-235B-A22B-FP8 --closed-start spread --closed-max-seqs C-1 \
		--group-by model-tp "$SIL" >"$T/sil" 2>"$T/err" || fail "silicon EP replay: $(cat "$T/err")"
	grep -q "^qwen3-235b-a22b tp4 ep4 *tpot_mean *62 " "$T/sil" &&
		grep -q "^qwen3-235b-a22b tp8 ep8 *tpot_mean *63 " "$T/sil" &&
		grep -q "^qwen3-235b-a22b tp4 ep2 *tpot_mean *2 " "$T/sil" &&
		awk '$1 == "tpot_mean" && $2 == 127 { v = $3; sub("%", "", v); ok = v + 0 <= 20 } END { exit !ok }' "$T/sil" &&
		pass "fit-engine replays the expert-parallel silicon rows by layout, TPOT MAPE <= 20%" ||
		fail "silicon EP rows: $(tail -12 "$T/sil") $(cat "$T/err")"
	{ head -1 "$SIL"; grep "_tp4_epnone_1," "$SIL" | head -1 | sed 's/,1,4,,,,,,,,,,,,,,,/,2,4,,,,,,,,,,,,,,,/'; } >"$T/bad.csv"
	"$BIN" calibrate fit-engine --no-fit --engine trtllm --model qwen3-235b-a22b "$T/bad.csv" \
		>/dev/null 2>"$T/err"
	grep -q "moe_tp_size x moe_ep_size is not tp_size x attention_dp_size" "$T/err" &&
		pass "a row with moe_tp x moe_ep != tp x attention_dp is skipped" ||
		fail "moe_tp mismatch: $(cat "$T/err")"
else
	echo "skip: no $SIL"
fi
finish
