# The conventions every command shares (docs/servesim.1.md, CONVENTIONS):
# list --json, traces from standard input (--trace -), -q and -v, --json
# on stdout and nothing else there, and the data directory an uninstalled
# binary finds from any working directory.
. "$(dirname "$0")/cli-lib.sh"

PY=$(command -v python3) || { echo "python3 not found: skipped"; exit 77; }
DATA=${SERVESIM_DATA:?}
TRACE=$DATA/traces/azure_conv_2000.csv
# is_json FILE: FILE holds one JSON value and nothing else
is_json() { "$PY" -m json.tool "$1" >/dev/null 2>&1; }

# list --json: every topic, an array whose names are the text list's rows
for topic in models gpus engines acceptance policies cost-models formats backends; do
	if ! "$BIN" list "$topic" --json >"$T/l.json" 2>"$T/err" || ! is_json "$T/l.json"; then
		fail "list $topic --json: not JSON ($(head -c 200 "$T/err" "$T/l.json"))"
		continue
	fi
	"$BIN" list "$topic" >"$T/l.txt" 2>>"$T/err" || fail "list $topic: $(cat "$T/err")"
	"$PY" -c 'import json, sys; print("\n".join(r["name"] for r in json.load(open(sys.argv[1]))))' \
		"$T/l.json" >"$T/names.json"
	case $topic in
	policies) awk 'NR > 1 && $1 != "" && substr($0, 1, 1) != " " { print $3 }' "$T/l.txt" ;;
	engines | acceptance) awk '{ print $1 }' "$T/l.txt" ;;
	*) awk 'NR > 1 { print $1 }' "$T/l.txt" ;;
	esac >"$T/names.txt"
	if [ -s "$T/names.txt" ] && cmp -s "$T/names.txt" "$T/names.json"; then
		pass "list $topic --json: the $(wc -l <"$T/names.txt") rows of the text list"
	else
		fail "list $topic --json names differ from the text: $(diff "$T/names.txt" "$T/names.json" | head -5 | tr '\n' ' ')"
	fi
done
# values checked against the text table: h100-sxm's HBM GiB and $/GPU-h
"$BIN" list gpus >"$T/l.txt"
"$BIN" list gpus --json | "$PY" -c '
import json, sys
g = {r["name"]: r for r in json.load(sys.stdin)}["h100-sxm"]
row = [l.split() for l in open(sys.argv[1]) if l.startswith("h100-sxm ")][0]
assert "%.1f" % g["hbm_gib"] == row[2] and "%.2f" % g["usd_per_gpu_hour"] == row[8], (g, row)' \
	"$T/l.txt" 2>"$T/err" && pass "list gpus --json: h100-sxm as in the text table" ||
	fail "list gpus --json: $(cat "$T/err")"

# --trace -: the same run as from the file, the workload named <stdin>
head -n 21 "$TRACE" | "$BIN" run --trace - --json >"$T/stdin.json" 2>"$T/err" ||
	fail "run --trace - from a pipe: $(cat "$T/err")"
"$BIN" run --trace "$TRACE" --num-requests 20 --json >"$T/file.json" 2>>"$T/err" ||
	fail "run --trace FILE: $(cat "$T/err")"
"$PY" - "$T/stdin.json" "$T/file.json" <<'PYEOF' 2>"$T/err" && pass "run --trace - gives the file's results (20 requests, <stdin>)" || fail "run --trace -: $(cat "$T/err")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["config"]["workload"] == "<stdin>", a["config"]["workload"]
assert a["requests"]["completed"] == b["requests"]["completed"] == 20, (a["requests"], b["requests"])
assert a["ttft_ms"] == b["ttft_ms"] and a["tpot_ms"] == b["tpot_ms"]
PYEOF
# the format is detected on the pipe (Mooncake JSON lines here)
printf '{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]}\n{"timestamp": 500, "input_length": 50, "output_length": 5, "hash_ids": [2]}\n' |
	"$BIN" run --trace - -v >/dev/null 2>"$T/err" &&
	grep -q '^servesim: workload <stdin> (mooncake): 2 requests$' "$T/err" &&
	pass "run --trace -: mooncake detected on stdin" || fail "run --trace - (mooncake): $(cat "$T/err")"
# an error names <stdin> and the line
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\nbad\n' >"$T/bad.csv"
for cmd in run plan live; do
	"$BIN" $cmd --trace - <"$T/bad.csv" >/dev/null 2>"$T/err"
	st=$?
	if [ "$st" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q '^servesim: <stdin>:3: ' "$T/err"; then
		pass "$cmd --trace - with a bad line 3: exit 1, $(cat "$T/err")"
	else
		fail "$cmd --trace - with a bad line: exit $st, $(cat "$T/err")"
	fi
done
head -n 41 "$TRACE" | "$BIN" plan --trace - --max-gpus 1 --modes colocated --json >"$T/plan.json" 2>"$T/err" &&
	is_json "$T/plan.json" && pass "plan --trace - --json" || fail "plan --trace -: $(cat "$T/err")"
head -n 3 "$TRACE" | "$BIN" live --trace - --rate-scale 100 --model llama-3.2-1b --width-div 16 --layers 1 \
	--kv-blocks 64 --json >"$T/live.json" 2>"$T/err" && is_json "$T/live.json" &&
	grep -q '"workload": "<stdin>"' "$T/live.json" && pass "live --trace - --json" ||
	fail "live --trace -: $(cat "$T/err")"

# --json: stdout is one JSON value, for every command with a result
"$BIN" run --num-requests 20 --out "$T/ra" --quiet 2>"$T/err" &&
	"$BIN" run --num-requests 20 --policy sarathi --out "$T/rb" --quiet 2>>"$T/err" ||
	fail "runs to compare: $(cat "$T/err")"
for args in "run --num-requests 20" "live --model llama-3.2-1b --width-div 16 --layers 1 --kv-blocks 64 --arrival poisson:rate=50 --lengths fixed:prompt=16,output=2 --num-requests 3" \
	"plan --num-requests 40 --max-gpus 1 --modes colocated" "compare $T/ra $T/rb" "list models" \
	"calibrate check --device h100-sxm"; do
	# shellcheck disable=SC2086  # args is a word list
	if "$BIN" $args --json >"$T/j" 2>"$T/err" && is_json "$T/j"; then
		pass "$args --json: stdout is JSON"
	else
		fail "$args --json: stdout is not JSON: $(head -c 120 "$T/j") $(cat "$T/err")"
	fi
done
# compare --json=FILE: the table on stdout, the JSON in FILE
"$BIN" compare "$T/ra" "$T/rb" --json="$T/c.json" >"$T/c.txt" 2>"$T/err" && is_json "$T/c.json" &&
	! is_json "$T/c.txt" && pass "compare --json=FILE writes FILE beside the table" ||
	fail "compare --json=FILE: $(cat "$T/err")"

# -q: nothing at all on success; -v: what was resolved, on stderr only
for args in "run --num-requests 20" "plan --num-requests 40 --max-gpus 1 --modes colocated" \
	"compare $T/ra $T/rb" "list gpus" "calibrate list" "calibrate check --device h100-sxm" "version"; do
	# shellcheck disable=SC2086
	"$BIN" $args -q >"$T/out" 2>"$T/err" && [ ! -s "$T/out" ] && [ ! -s "$T/err" ] &&
		pass "$args -q: silent" || fail "$args -q: $(head -c 200 "$T/out" "$T/err")"
	# shellcheck disable=SC2086
	"$BIN" $args >"$T/plain" 2>/dev/null
	# shellcheck disable=SC2086
	"$BIN" $args -v >"$T/out" 2>"$T/err" && cmp -s "$T/out" "$T/plain" && [ -s "$T/err" ] &&
		pass "$args -v: stdout unchanged, $(wc -l <"$T/err") lines on stderr" ||
		fail "$args -v: stdout changed or nothing on stderr ($(head -c 200 "$T/err"))"
done
"$BIN" run --num-requests 20 -v >/dev/null 2>"$T/err"
for want in "servesim: data directory $DATA (\$SERVESIM_DATA)" "servesim: catalogs: " \
	"servesim: workload $TRACE (azure): 20 requests" \
	"servesim: cost model table for h100-sxm (--cost-model auto)" "servesim: stack policy: vllm (default)"; do
	grep -q -F -e "$want" "$T/err" &&
		pass "run -v says '$want'" || fail "run -v: no '$want' in $(cat "$T/err")"
done
# before the command, too
"$BIN" -v list gpus >"$T/out" 2>"$T/err" && grep -q "data directory" "$T/err" && pass "servesim -v list gpus" ||
	fail "servesim -v list gpus: $(cat "$T/err")"

# the data directory: an uninstalled binary run from elsewhere finds its
# source tree's data; a copy outside the build directory never does
ABS=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
(cd / && env -u SERVESIM_DATA "$ABS" -v list gpus >"$T/out" 2>"$T/err") &&
	grep -q "(the source tree of this uninstalled build)" "$T/err" && grep -q h100-sxm "$T/out" &&
	pass "uninstalled binary from /: $(head -n 1 "$T/err")" || fail "uninstalled binary from /: $(cat "$T/err")"
if [ -z "$VG" ]; then
	mkdir "$T/elsewhere"
	cp "$BIN" "$T/elsewhere/servesim"
	(cd "$(dirname "$ABS")" && env -u SERVESIM_DATA "$T/elsewhere/servesim" -v version >/dev/null 2>"$T/err")
	grep -q "(installed)\$" "$T/err" && pass "a copy outside the build directory: $(cat "$T/err")" ||
		fail "a copy outside the build directory read: $(cat "$T/err")"
	(cd / && env -u SERVESIM_DATA "$T/elsewhere/servesim" --data-dir "$DATA" run --num-requests 5 -q 2>"$T/err") &&
		pass "a copy outside the build directory runs with --data-dir" || fail "--data-dir: $(cat "$T/err")"
fi
finish
