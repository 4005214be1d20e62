#!/bin/sh
# Hostile file names never reach a shell through the plots: the workload's
# file name goes into every plot title, and the gnuplot scripts must carry
# it as data (a single-quoted string, backquotes and control characters
# replaced), not as gnuplot syntax where `...` runs a command and a newline
# starts a new one.  Each surface that names a file in a title is tried:
# run --trace, --workload, --rate-curve, --lengths empirical:, live,
# plan --out and compare.  With gnuplot installed the PNGs must render too
# (the quoting keeps the scripts valid); without it the .gp files are
# checked alone.
# shellcheck disable=SC2016  # the names' backquotes and $(...) are meant literally
. "$(dirname "$0")/cli-lib.sh"

cd "$T" || exit 1
mkdir -p 'x`touch PWNED`' "q'\$(touch PWNED2)\"" || exit 1
# names with a backquoted command, a $(...) and both kinds of quote
N1='x`touch PWNED`/`touch PWNED`.csv'
N2="q'\$(touch PWNED2)\"/it's \"\`touch PWNED3\`\".csv"
for n in "$N1" "$N2"; do
	printf 'arrival_ms,prompt_tokens,output_tokens\n0,100,10\n40,80,12\n90,120,8\n' >"$n" || exit 1
done
have_gnuplot=false
command -v gnuplot >/dev/null 2>&1 && have_gnuplot=true

# no_pwn WHAT: nothing a name asked for was run, anywhere under $T
no_pwn() {
	if find "$T" -name 'PWNED*' | grep -q .; then
		fail "$1: a command in a file name ran ($(find "$T" -name 'PWNED*' | head -3 | tr '\n' ' '))"
		find "$T" -name 'PWNED*' -exec rm -f {} +
	else
		pass "$1: no command in the file name ran"
	fi
}

# plots_ok WHAT DIR STEM...: each STEM.gp exists, quotes the name in single
# quotes only (no backquote left), and (with gnuplot) renders a non-empty STEM.png
plots_ok() {
	what=$1 dir=$2
	shift 2
	for stem in "$@"; do
		gp="$dir/$stem.gp"
		if [ ! -s "$gp" ]; then
			fail "$what: $gp not written"
			continue
		fi
		# every backquote of a name is written as '?'; the scripts have none
		if grep -q '`' "$gp"; then
			fail "$what: $gp carries a backquote: $(grep '`' "$gp" | head -1)"
		else
			pass "$what: $stem.gp carries the name as data"
		fi
		if $have_gnuplot && [ ! -s "$dir/$stem.png" ]; then
			fail "$what: $stem.png not rendered (the quoting broke the script?)"
		fi
	done
}

for n in "$N1" "$N2"; do
	rm -rf o
	if "$BIN" run --trace "$n" --out o >out 2>err; then
		plots_ok "run --trace" o ttft_cdf tpot_cdf
		grep -q 'PWNED' o/ttft_cdf.gp || fail "run --trace: the title lost the file name"
	else
		fail "run --trace on a hostile name failed: $(cat err)"
	fi
	no_pwn "run --trace"
done

# the title keeps the name legible: quotes kept, backquotes as '?'
rm -rf o
"$BIN" run --trace "$N2" --out o >/dev/null 2>&1
grep -q "it''s \"?touch PWNED3?\"\\.csv'" o/ttft_cdf.gp ||
	fail "run --trace: title not as expected: $(grep 'set title' o/ttft_cdf.gp)"

# a newline in the name ends no gnuplot command
NL="$(printf 'nl\nsystem "touch PWNED4"\n#.csv')"
printf 'arrival_ms,prompt_tokens,output_tokens\n0,100,10\n' >"$NL"
rm -rf o
if "$BIN" run --trace "$NL" --out o >/dev/null 2>err; then
	if grep -q '^system' o/ttft_cdf.gp; then
		fail "run --trace: a newline in the name started a gnuplot command"
	else
		pass "run --trace: a newline in the name stays inside the title"
	fi
	plots_ok "run --trace (newline)" o ttft_cdf
else
	fail "run --trace on a name with a newline failed: $(cat err)"
fi
no_pwn "run --trace (newline)"

# --workload: a model fitted from the hostile-named trace, saved under a
# hostile name
W='x`touch PWNED`/m`touch PWNED`.json'
if "$BIN" workload fit "$N1" --out "$W" >/dev/null 2>err; then
	rm -rf o
	"$BIN" run --workload "$W" --num-requests 5 --out o >/dev/null 2>err ||
		fail "run --workload failed: $(cat err)"
	plots_ok "run --workload" o ttft_cdf
else
	fail "workload fit of a hostile name failed: $(cat err)"
fi
no_pwn "run --workload"

# --rate-curve and --lengths empirical:
C='x`touch PWNED`/c`touch PWNED`.csv'
printf 'time_s,rate\n0,20\n10,20\n' >"$C"
rm -rf o
"$BIN" run --rate-curve "$C" --lengths fixed:prompt=100,output=10 --num-requests 5 --out o >/dev/null 2>err ||
	fail "run --rate-curve failed: $(cat err)"
plots_ok "run --rate-curve" o ttft_cdf
no_pwn "run --rate-curve"
rm -rf o
"$BIN" run --arrival poisson:rate=10 --lengths "empirical:$N1" --num-requests 5 --out o \
	>/dev/null 2>err || fail "run --lengths empirical: failed: $(cat err)"
plots_ok "run --lengths empirical:" o ttft_cdf
no_pwn "run --lengths empirical:"

# live, on the CPU kernels (tiny model)
rm -rf o
if "$BIN" live --model llama-3.2-1b --width-div 16 --layers 2 --kv-blocks 256 \
	--trace "$N1" --out o >/dev/null 2>err; then
	plots_ok "live" o ttft_cdf
else
	fail "live on a hostile name failed: $(cat err)"
fi
no_pwn "live"

# plan into a hostile --out: the attainment and Pareto plots name the trace
P='p`touch PWNED`'
if "$BIN" plan --trace "$N2" --max-gpus 1 --out "$P" >/dev/null 2>err; then
	ls "$P"/*.gp >/dev/null 2>&1 || fail "plan --out: no plot script written"
	for gp in "$P"/*.gp; do
		plots_ok "plan --out" "$P" "$(basename "$gp" .gp)"
	done
else
	fail "plan on a hostile name failed: $(cat err)"
fi
no_pwn "plan --out"

# compare of two runs whose directories and workloads have hostile names
rm -rf 'a`touch PWNED`' 'b`touch PWNED`'
"$BIN" run --trace "$N1" --out 'a`touch PWNED`' >/dev/null 2>&1
"$BIN" run --trace "$N2" --out 'b`touch PWNED`' >/dev/null 2>&1
rm -rf c
if "$BIN" compare 'a`touch PWNED`' 'b`touch PWNED`' --out c >/dev/null 2>err; then
	for gp in c/*.gp; do
		plots_ok "compare" c "$(basename "$gp" .gp)"
	done
else
	fail "compare of hostile names failed: $(cat err)"
fi
no_pwn "compare"

finish
