#!/bin/sh
# moe-silicon.sh [SERVESIM] [OUTDIR]: issue 12's validation on the MoE rows
# of the aiconfigurator silicon set (../shared/data/serving/
# aiconfigurator_silicon): every colocated DeepSeek-V3/R1, gpt-oss-120b and
# Qwen3-235B-A22B row on h100_sxm and b200_sxm, and the disaggregated
# DeepSeek rows there, replayed with the shipped engine profiles as they
# are (`calibrate fit-engine --no-fit`: nothing is fitted, every figure is
# held out), with aiconfigurator's benchmark launch limits
# (--closed-max-tokens C+ISL+1500) and the benchmark's drained start
# (--closed-start drained; MOE_SILICON_START=spread or burst for the
# others).  Prints TPOT and TTFT MAPE over configurations by engine, GPU,
# model, precision and layout (servesim's tp / ep / attention DP, or both
# pools' for disaggregated rows), then totals; the JSON reports stay in
# OUTDIR (default a temporary directory).  docs/validation.md, "MoE models
# by parallelism layout" and "Where issue 12's validation stands", gives the
# figures and what they mean.  Extra fit-engine options for every call:
# MOE_SILICON_OPTS.
BIN=${1:-build/servesim}
SRC=$(cd "$(dirname "$0")/.." && pwd)
CSV=${SERVESIM_SHARED_DATA:-$SRC/../shared/data}/serving/aiconfigurator_silicon/silicon_sample_excl_h200.csv
[ -r "$CSV" ] || { echo "moe-silicon: no $CSV" >&2; exit 1; }
OUT=${2:-$(mktemp -d)}
START=${MOE_SILICON_START:-drained}
mkdir -p "$OUT" || exit 1
n=0
while read -r mode e g m cat; do
	n=$((n + 1))
	# shellcheck disable=SC2086
	"$BIN" calibrate fit-engine --no-fit --engine "$e" --select engine="$e" --select gpu="$g" \
		--select mode="$mode" ${m:+--select model=$m} ${cat:+--model $cat} \
		--closed-start "$START" --closed-max-tokens C+ISL+1500 --group-by model-tp \
		$MOE_SILICON_OPTS --json="$OUT/$n.json" "$CSV" >"$OUT/$n.txt" 2>"$OUT/$n.err" ||
		{ echo "moe-silicon: $mode $e $g $m failed: $(tail -1 "$OUT/$n.err")" >&2; exit 1; }
done <<LIST
agg trtllm h100_sxm Qwen/Qwen3-235B-A22B-FP8 qwen3-235b-a22b
agg trtllm h100_sxm openai/gpt-oss-120b
agg trtllm b200_sxm openai/gpt-oss-120b
agg trtllm b200_sxm deepseek-ai/DeepSeek-R1
agg trtllm b200_sxm deepseek-ai/DeepSeek-V3
agg trtllm b200_sxm nvidia/DeepSeek-R1-NVFP4 deepseek-v3
agg trtllm b200_sxm nvidia/DeepSeek-V3.1-NVFP4 deepseek-v3
agg sglang b200_sxm deepseek-ai/DeepSeek-R1
agg sglang b200_sxm deepseek-ai/DeepSeek-V3
agg vllm b200_sxm openai/gpt-oss-120b
agg vllm h100_sxm openai/gpt-oss-120b
disagg trtllm b200_sxm
disagg sglang b200_sxm
disagg trtllm h100_sxm
LIST
python3 - "$CSV" "$OUT" "$n" <<'PYEOF'
import csv, json, re, sys
from collections import defaultdict
path, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = {}
with open(path, newline="") as f:
    rd = csv.DictReader(f)
    for r in rd:
        rows[rd.line_num] = r
fam = lambda m: ("DeepSeek-V3/R1" if "DeepSeek" in m else "gpt-oss-120b" if "gpt-oss" in m
                 else "Qwen3-235B-A22B" if "235B" in m else m.split("/")[-1])
eng = {"trtllm": "TRT-LLM", "sglang": "SGLang", "vllm": "vLLM"}
gpu = {"h100_sxm": "H100", "b200_sxm": "B200"}
# "FILE:LINE MODEL LAYOUT cC x ISL+OSL": the layout is what lies between
lay_re = re.compile(r"^\S+ \S+ (.*) c\d+ x \d+\+\d+$")
agg_re = re.compile(r"^tp(\d+)(?: ep(\d+))?(?: dp(\d+))?$")
cfg = defaultdict(dict)      # (report, run) -> metric -> (measured, simulated)
for k in range(1, n + 1):
    for r in json.load(open("%s/%d.json" % (out, k)))["runs"]:
        cfg[(k, r["run"])][r["metric"]] = (r["measured"], r["fitted"])
groups = {"agg": defaultdict(lambda: defaultdict(list)), "disagg": defaultdict(lambda: defaultdict(list))}
for (k, run), ms in cfg.items():
    row = rows[int(run.split()[0].rsplit(":", 1)[1])]
    lay = lay_re.match(run).group(1)
    t = agg_re.match(lay)
    if t:
        lay = "%s / %s / %s" % (t.group(1), t.group(2) or 1, t.group(3) or 1)
    prec = row["precision"] or "bf16"
    e, g, m = eng[row["backend"]], gpu[row["system"]], fam(row["model_path"])
    keys = [(e, g, m, prec, lay), (e, g, m, "all", "all"), ("all", "", m, "", "all"),
            ("all", "", "all", "", "all")]
    for key in keys:
        for met, (me, si) in ms.items():
            if me and me > 0 and si == si:
                groups[row["mode"]][key][met].append(abs(si - me) / me)
def table(title, gr):
    print("%s\n" % title)
    print("| engine | GPU | model | precision | layout | configs | TPOT MAPE | TTFT MAPE |")
    print("|---|---|---|---|---|---|---|---|")
    def line(key):
        g = gr[key]
        mape = lambda m: "%.1f%%" % (100 * sum(g[m]) / len(g[m])) if g[m] else "-"
        print("| %s | %d | %s | %s |" % (" | ".join(key), len(g["tpot_mean"]),
                                          mape("tpot_mean"), mape("ttft_mean")))
    for key in sorted(k for k in gr if k[3] not in ("all", "")):
        line(key)
    for key in sorted(k for k in gr if k[3] == "all"):
        line(key)
    for key in sorted((k for k in gr if k[3] == ""), key=lambda k: k[2] == "all"):
        line(key)
    print()
table("Colocated rows (layout: tp / ep / attention DP)", groups["agg"])
table("Disaggregated rows (layout: prefill pool / decode pool)", groups["disagg"])
PYEOF
