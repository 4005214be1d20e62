# The default scenario runs and prints a summary; --out writes every result
# file atomically; --json prints the summary document.
. "$(dirname "$0")/cli-lib.sh"

if "$BIN" >"$T/out" 2>"$T/err"; then
	grep -q "TTFT" "$T/out" && grep -q "goodput" "$T/out" && pass "default scenario prints a summary" ||
		fail "default scenario summary lacks TTFT/goodput: $(head -5 "$T/out")"
	grep -q "2000 completed" "$T/out" && pass "default scenario completes the 2,000-request sample" ||
		fail "default scenario did not complete 2000 requests"
else
	fail "default scenario failed: $(cat "$T/err")"
fi

if "$BIN" run --num-requests 300 --out "$T/res" --quiet 2>"$T/err"; then
	for f in summary.json summary.txt requests.csv results.db ttft_cdf.dat tpot_cdf.dat timeseries.dat; do
		[ -s "$T/res/$f" ] && pass "--out wrote $f" || fail "--out did not write $f"
	done
	[ -z "$(find "$T/res" -name '*.tmp*')" ] && pass "no temporary files left" || fail "temporary files left behind"
	rows=$(($(wc -l <"$T/res/requests.csv") - 1))
	[ "$rows" -eq 300 ] && pass "requests.csv has 300 rows" || fail "requests.csv has $rows rows"
	for k in requests_completed ttft_ms tpot_ms itl_ms e2e_ms queue_ms throughput requests_per_s \
		input_tokens_per_s output_tokens_per_s slo_attainment goodput_rps preemptions rejected \
		mean p50 p90 p95 p99; do
		grep -q "\"$k\"" "$T/res/summary.json" || fail "summary.json lacks \"$k\""
	done
	pass "summary.json holds the contract keys"
else
	fail "run --out failed: $(cat "$T/err")"
fi
[ -s "$T/out" ] || true

if "$BIN" run --num-requests 50 --json >"$T/json" 2>"$T/err"; then
	grep -q '"requests_completed": 50' "$T/json" && pass "--json prints the summary" || fail "--json output: $(head -3 "$T/json")"
else
	fail "--json failed: $(cat "$T/err")"
fi

"$BIN" --help | grep -q "usage: servesim" && pass "--help" || fail "--help"
"$BIN" run --help | grep -q -- "--rate-scale" && pass "run --help lists options" || fail "run --help"
"$BIN" --version | grep -q "servesim [0-9]" && pass "--version" || fail "--version"
for w in models gpus policies cost-models formats; do
	"$BIN" list "$w" >"$T/list" && [ "$(wc -l <"$T/list")" -gt 1 ] && pass "list $w" || fail "list $w"
done
grep -q vllm "$T/list" || "$BIN" list policies | grep -q vllm || fail "list policies lacks vllm"
# the tables line up: in list gpus and list models every data row ends each
# numeric column where the others do (names longer than 16 characters
# included), list gpus' rows end where its header does, and memory is in
# GiB, as nvidia-smi counts it (an A100-80GB has 80.0)
for w in gpus models; do
	"$BIN" list "$w" | python3 -c '
import re, sys
w = sys.argv[1]
rows = sys.stdin.read().splitlines()
ends = lambda line: [m.end() for m in re.finditer(r"\S+", line)]
cols = [ends(r)[1:] if w == "gpus" else ends(r)[1:10] for r in rows[1:]]
assert all(c == cols[0] for c in cols), cols
if w == "gpus":
    assert all(len(r) == len(rows[0]) for r in rows), [len(r) for r in rows]
    a = [r for r in rows if r.startswith("a100-80gb-sxm ")][0].split()
    assert a[2] == "80.0", a
' "$w" && pass "list $w: columns line up" || fail "list $w: columns do not line up"
done
SRC=$(cd "$(dirname "$0")/.." && pwd)
# The option lists of docs/servesim.1.md are the option table's
# (scripts/update-man-help.sh writes them); --help prints the same lines,
# plus, for plan, whether MPI is built in.
for cmd in run live plan; do
	sed -n "/<!-- $cmd-help:begin -->/,/<!-- $cmd-help:end -->/p" "$SRC/docs/servesim.1.md" | sed '1,2d;$d' | sed '$d' >"$T/manhelp"
	"$BIN" help --man "$cmd" >"$T/help"
	[ -s "$T/manhelp" ] && cmp -s "$T/help" "$T/manhelp" && pass "$cmd options in docs/servesim.1.md are the table's" ||
		fail "docs/servesim.1.md is out of date with the $cmd options (run scripts/update-man-help.sh): $(diff "$T/help" "$T/manhelp" | head -5)"
	"$BIN" "$cmd" --help | grep -v '^MPI: ' >"$T/cmdhelp"
	cmp -s "$T/cmdhelp" "$T/help" && pass "$cmd --help is the table's" ||
		fail "$cmd --help differs from help --man $cmd: $(diff "$T/cmdhelp" "$T/help" | head -5)"
done
"$BIN" plan --help | grep -q '^MPI: ' && pass "plan --help says whether MPI is built in" || fail "plan --help: no MPI line"
"$BIN" plan --help | grep -q -- '^  -j, --jobs N ' && pass "plan --help shows -j" || fail "plan --help lacks -j, --jobs"
"$BIN" live --help | grep -q -- '--backend' && ! "$BIN" run --help | grep -q -- '--backend' &&
	pass "live-only options only in live --help" || fail "live-only options leak into run --help"
# Every registered policy is named on its option's --help line (the lines
# are built from policies/registry.def, not written by hand); --pairing
# picks among the routers.  For each command that takes the option.
"$BIN" list policies | awk '$1 ~ /^(batch|order|victim|router|admission)$/ { print $2, $3 }' >"$T/pols"
[ "$(wc -l <"$T/pols")" -ge 20 ] || fail "list policies: only $(wc -l <"$T/pols") policies"
for cmd in run live plan; do
	"$BIN" "$cmd" --help >"$T/cmdhelp"
	missing=
	while read -r opt name; do
		for o in "$opt" $([ "$opt" = --router ] && echo --pairing); do
			line=$(grep -- "^  $o " "$T/cmdhelp") || continue   # not an option of $cmd
			printf '%s\n' "$line" | grep -qE -- "[:|] $name( \\|| \\()" || missing="$missing $o:$name"
		done
	done <"$T/pols"
	[ -z "$missing" ] && pass "$cmd --help names every registered policy" ||
		fail "$cmd --help lacks registered policies:$missing"
done
# an absurdly fine --sample-interval: the time series coarsens itself to
# stay bounded (it used to grow until memory ran out) and says so
if "$BIN" run --num-requests 100 --sample-interval 1e-9 --out "$T/fine" --quiet 2>"$T/err"; then
	rows=$(grep -vc '^#' "$T/fine/timeseries.dat")
	[ "$rows" -le 100000 ] && [ "$rows" -ge 1000 ] && pass "time series bounded: $rows sampling times" ||
		fail "time series has $rows sampling times"
	grep -q '"coarsened": true' "$T/fine/summary.json" &&
	grep -q '"requested_interval_s": 1e-9' "$T/fine/summary.json" &&
		pass "summary.json gives the coarsened interval" ||
		fail "summary.json: $(grep -A5 '"timeseries"' "$T/fine/summary.json")"
	grep -q "time series: sampled every .* not the 1e-09 s asked for" "$T/fine/summary.txt" &&
		pass "summary.txt notes the coarsening" || fail "no note in summary.txt"
else
	fail "run --sample-interval 1e-9: $(cat "$T/err")"
fi
"$BIN" run --num-requests 20 --out "$T/plain" --quiet || fail "run plain"
grep -q '"coarsened": false' "$T/plain/summary.json" &&
	! grep -q "time series:" "$T/plain/summary.txt" &&
	pass "default interval: not coarsened, no note" || fail "default interval reported coarsened"
# --policy vllm:admission=no_evict (TensorRT-LLM's GUARANTEED_NO_EVICT): on a
# KV cache of 400 blocks the default admission preempts; no_evict admits a
# request only when its prompt plus its (oracle) output fits beside what the
# running requests still need, so nobody is preempted and every request
# completes; without --predictor it gets the oracle, with chunking on or off
# and with v0's prefill-first steps
for pol in vllm vllm:chunked=off; do
	"$BIN" run --num-requests 200 --kv-blocks 400 --policy $pol --json >"$T/greedy" 2>"$T/err" ||
		fail "run --policy $pol: $(cat "$T/err")"
	grep -q '"preemptions": [1-9]' "$T/greedy" && pass "$pol preempts on 400 KV blocks" ||
		fail "$pol: $(grep '"preemptions"' "$T/greedy")"
done
for pol in vllm:admission=no_evict vllm:chunked=off,admission=no_evict vllm:v0=on,admission=no_evict; do
	if "$BIN" run --num-requests 200 --kv-blocks 400 --policy $pol --json >"$T/ne" 2>"$T/err"; then
		grep -q '"preemptions": 0,' "$T/ne" && grep -q '"requests_completed": 200' "$T/ne" &&
			grep -q '"predictor": "oracle"' "$T/ne" &&
			pass "$pol: no preemption, 200 completed, oracle predictor" ||
			fail "$pol: $(grep -E '"preemptions"|"requests_completed"|"predictor": "' "$T/ne")"
	else
		fail "run --policy $pol: $(cat "$T/err")"
	fi
done
"$BIN" run --num-requests 20 --policy vllm:admission=maybe >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "expected admission=greedy, no_evict or peak" "$T/err" && pass "a bad admission mode is a usage error" ||
	fail "admission=maybe: $(cat "$T/err")"
# The summaries name the whole serving stack, each choice as given on the
# command line, and a choice not given as the default it is.
"$BIN" run --num-requests 20 --out "$T/stackdef" --quiet 2>"$T/err" || fail "default stack run: $(cat "$T/err")"
for item in "policy vllm (default)" "order fcfs (default)" "predictor none (default)" \
	"victim newest (default)" "preemption recompute (default)" "admission none (default)" \
	"router rr (default)" "prefix cache off (default)" "engine vllm (default)" \
	"serving stack local-vllm (default)"; do
	grep -A3 '^stack:' "$T/stackdef/summary.txt" | grep -q "$item" || fail "default stack: no '$item' in $(grep -A3 '^stack:' "$T/stackdef/summary.txt")"
done
python3 - "$T/stackdef/summary.json" <<'EOF2' && pass "a default run names each default in summary.txt and summary.json" || fail "default stack in summary.json"
import json, sys
st = json.load(open(sys.argv[1]))["stack"]
want = {"policy": "vllm", "order": "fcfs", "predictor": "none", "victim": "newest",
        "preemption": "recompute", "admission": "none", "router": "rr", "prefix_cache": "off",
        "engine": "vllm", "serving_stack": "local-vllm"}
got = {k: v["spec"] for k, v in st.items()}
assert got == want, got
assert all(v["source"] == "default" for v in st.values()), st
EOF2
"$BIN" run --num-requests 20 --instances 2 --policy sarathi:token_budget=1024 --order sjf --predictor noisy:sigma=0.3 \
	--victim largest --admission queue:max=64 --router lor --prefix-cache on --engine sglang \
	--out "$T/stackset" --quiet 2>"$T/err" || fail "stack run: $(cat "$T/err")"
for item in "policy sarathi:token_budget=1024," "order sjf," "predictor noisy:sigma=0.3," "victim largest," \
	"admission queue:max=64," "router lor," "prefix cache on," "engine sglang," \
	"serving stack local-sglang (default)$"; do
	grep -A3 '^stack:' "$T/stackset/summary.txt" | grep -q "$item" || fail "stack: no '$item' in $(grep -A3 '^stack:' "$T/stackset/summary.txt")"
done
python3 - "$T/stackset/summary.json" <<'EOF2' && pass "choices given are named as given in summary.txt and summary.json" || fail "given stack in summary.json"
import json, sys
st = json.load(open(sys.argv[1]))["stack"]
want = {"policy": "sarathi:token_budget=1024", "order": "sjf", "predictor": "noisy:sigma=0.3",
        "victim": "largest", "admission": "queue:max=64", "router": "lor", "prefix_cache": "on",
        "engine": "sglang"}
for k, v in want.items():
    assert st[k] == {"spec": v, "source": "command line"}, (k, st[k])
assert st["preemption"] == {"spec": "recompute", "source": "default"}, st["preemption"]
EOF2
# an engine profile's own batch policy is named as that engine's; sjf
# without --predictor gets the oracle, said to be the default there
"$BIN" run --num-requests 20 --engine sglang --order sjf --json >"$T/stackeng" 2>"$T/err" || fail "sglang: $(cat "$T/err")"
python3 - "$T/stackeng" <<'EOF2' && pass "engine's policy and the implied oracle are named as such" || fail "stack from the engine: $(grep -A30 '"stack"' "$T/stackeng")"
import json, sys
st = json.load(open(sys.argv[1]))["stack"]
assert st["policy"] == {"spec": "vllm:v0=on,max_num_batched_tokens=8192",
                        "source": "engine sglang's default"}, st["policy"]
assert st["predictor"] == {"spec": "oracle",
                           "source": "default where the order or policy reads predictions"}, st["predictor"]
EOF2
# disaggregated: the pairing router too
"$BIN" run --num-requests 20 --prefill-instances 1 --decode-instances 1 --pairing rr --json >"$T/stackpd" 2>"$T/err" || fail "pd: $(cat "$T/err")"
python3 -c 'import json,sys; st = json.load(open(sys.argv[1]))["stack"]; assert st["pairing"] == {"spec": "rr", "source": "command line"}, st' "$T/stackpd" &&
	pass "a disaggregated run names its pairing router" || fail "pairing: $(grep -A3 '"pairing"' "$T/stackpd")"
finish
