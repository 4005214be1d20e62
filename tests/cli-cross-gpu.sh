#!/bin/sh
# calibrate check --cross-gpu FROM:TO (issue 33, docs/validation.md "AMD
# Instinct"): GPU TO's GEMM measurements predicted from GPU FROM's grid,
# scaled by the roofline ratio TO / FROM as --cost-model scaled scales a
# GEMM.  Synthetic AITER tables where the answer is known: the MI300X's
# block-scaled FP8 times are 1.3 x its roofline on a 4 x 2 x 2 grid of
# (m, n, k); the MI308X's are those times x the roofline ratio (0% error,
# the roofline alone 1.3 - 1 over 1.3 = 23.1%), or twice that (the scaled
# prediction is half: 50%; the other way round twice: 100%).  A point
# beyond the MI300X's m is counted outside, not scored.  A bad FROM:TO is
# one line, exit 2.
# shellcheck source=tests/cli-lib.sh
. "$(dirname "$0")/cli-lib.sh"

# The roofline of one fp8 GEMM (sim/cost-roofline.c, default parameters:
# gemm_fp8_eff 0.5, mem_eff 0.8, kernel_us 3; fp8 weights, bf16
# activations), in us, with the catalog's fp8_flops and hbm_bw
# (data/gpus.json: mi300x 2614.9 TFLOPS; mi308x 688.1, an ESTIMATE;
# both 5.3 TB/s).
table() {   # table SCALE_TO EXTRA_TO
	awk -v s="$1" -v extra="$2" 'BEGIN {
		print "source_path,gfx,cu_num,device,gemm_family,M,N,K,dtype,outdtype,bias,bpreshuffle,libtype,kernel_id,splitK,us,tflops,bw_GBps,err_ratio"
		split("1 64 4096 16384", M, " "); split("1024 4096", N, " "); split("1024 4096", K, " ")
		for (a = 1; a <= 4; a++) for (b = 1; b <= 2; b++) for (c = 1; c <= 2; c++) {
			m = M[a]; n = N[b]; k = K[c]
			f = 1.3 * rl(m, n, k, 2614.9e12); t = f * rl(m, n, k, 688.1e12) / rl(m, n, k, 2614.9e12)
			row(304, m, n, k, f); row(80, m, n, k, s * t)
		}
		if (extra) row(80, 65536, 1024, 1024, 1000)
	}
	function rl(m, n, k, fl,   tc, tm) {
		tc = 2 * m * n * k / (fl * 0.5); tm = (n * k + m * (n + k) * 2) / (5.3e12 * 0.8)
		return ((tc > tm ? tc : tm) + 3e-6) * 1e6
	}
	function row(cu, m, n, k, us) {
		printf "x.csv,gfx942,%d,x,a8w8_blockscale,%d,%d,%d,,,,,ck,1,0,%.17g,0,0,0\n", cu, m, n, k, us
	}'
}

check() {   # check NAME DB FROM:TO EXPECT_N EXPECT_OUT MEDIAN P90 RL_MEDIAN
	if "$BIN" calibrate check --store "$2" --cross-gpu "$3" >"$T/out" 2>"$T/err"; then
		got=$(awk '$2 == "gemm.aiter.fp8_block:all" { print $4, $5, $6, $7, $9 }' "$T/out")
		if [ "$got" = "$4 $5 $6 $7 $8" ]; then
			pass "$1: n, outside, median, p90, roofline median = $got"
		else
			fail "$1: got '$got', expected '$4 $5 $6 $7 $8': $(cat "$T/out")"
		fi
	else
		fail "$1: $(cat "$T/err")"
	fi
}

table 1 1 >"$T/exact.csv"
table 2 0 >"$T/double.csv"
for f in exact double; do
	"$BIN" calibrate import --store "$T/$f.db" "$T/$f.csv" >/dev/null 2>"$T/err" ||
		fail "import $f: $(cat "$T/err")"
done
check "exact ratio" "$T/exact.db" mi300x:mi308x 16 1 0.0 0.0 23.1
check "doubled TO" "$T/double.db" mi300x:mi308x 16 0 50.0 50.0 61.5
check "doubled FROM" "$T/double.db" mi308x:mi300x 16 0 100.0 100.0 23.1

# every class of the grid's (n, k) has its row: 1024x1024 square-s,
# 4096x1024 wide-m, 1024x4096 narrow-m, 4096x4096 square-m
for c in square-s wide-m narrow-m square-m; do
	if awk -v c="gemm.aiter.fp8_block:$c" '$2 == c && $4 == 4 { ok = 1 } END { exit !ok }' "$T/out"; then
		pass "class $c: 4 points"
	else
		fail "class $c: not 4 points in $(cat "$T/out")"
	fi
done

# --json: the same figures under {TO: {row: {...}}}
if "$BIN" calibrate check --store "$T/exact.db" --cross-gpu mi300x:mi308x --json >"$T/j" 2>"$T/err" &&
   python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["mi308x"]["gemm.aiter.fp8_block:all"]
assert r["n"] == 16 and r["n_outside"] == 1 and r["from_dtype"] == "fp8_block", r
assert r["median_ape_pct"] < 1e-6 and r["p90_ape_pct"] < 1e-6, r
# JSON keeps 6 significant digits
assert abs(r["roofline_median_ape_pct"] - 30 / 1.3) < 1e-3 and r["roofline_all_n"] == 17, r
assert abs(r["median_ratio"] - 1) < 1e-9, r
' "$T/j" 2>"$T/err"; then
	pass "--json: exact figures"
else
	fail "--json: $(cat "$T/err")"
fi

# bad FROM:TO: one line, exit 2
expect_error 2 "^servesim: --cross-gpu mi300x:mi300x: expected two different GPUs\$" -- \
	calibrate check --store "$T/exact.db" --cross-gpu mi300x:mi300x
expect_error 2 "^servesim: --cross-gpu mi300x:nope: no GPU named 'nope' in the catalog" -- \
	calibrate check --store "$T/exact.db" --cross-gpu mi300x:nope
expect_error 2 "^servesim: --cross-gpu h100-sxm:mi308x: the store has no GEMM grid measurements of h100-sxm\$" -- \
	calibrate check --store "$T/exact.db" --cross-gpu h100-sxm:mi308x
expect_error 2 "^servesim: --cross-gpu: expected FROM:TO, two GPUs of the catalog, got 'mi300x'\$" -- \
	calibrate check --store "$T/exact.db" --cross-gpu mi300x
expect_error 2 "^servesim: --cross-source, --gemm-classes and --cross-gpu: expected one of them\$" -- \
	calibrate check --store "$T/exact.db" --cross-gpu mi300x:mi308x --gemm-classes
finish
