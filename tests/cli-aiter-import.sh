#!/bin/sh
# calibrate import of AITER's tuned GEMM table (issue 33, docs/calibration.md
# "AITER"): tests/data/aiter-gemm.csv holds eleven real rows of
# ../shared/data/amd/aiter_tuned_gemm_gfx942.csv.  gfx942 with 304 CUs goes
# to mi300x and with 80 CUs to mi308x; the table's family gives the dtype;
# us becomes ms; batched tables and the tuner's `inf` are skipped.  A missing
# column, a bad number, an unknown CU count or table is one line naming the
# file and line, exit 1, and the store keeps what it had.
# shellcheck source=tests/cli-lib.sh
. "$(dirname "$0")/cli-lib.sh"

FIX=$(dirname "$0")/data/aiter-gemm.csv
DB=$T/a.db

# series, with row counts: 9 measurements of 11 rows
if "$BIN" calibrate import --store "$DB" "$FIX" >"$T/out" 2>"$T/err" &&
   "$BIN" calibrate list --store "$DB" >"$T/list" 2>>"$T/err"; then
	for want in "mi300x gemm fp8_block aiter:tuned 3" "mi300x gemm int8 aiter:tuned 1" \
		"mi308x gemm bf16 aiter:tuned 2" "mi308x gemm fp8 aiter:tuned 2" \
		"mi308x gemm fp8_block aiter:tuned 1" "9 measurements in 5 series"; do
		if tr -s ' ' <"$T/list" | grep -q -F -e "$want"; then
			pass "import: $want"
		else
			fail "import: no '$want' in $(cat "$T/list")"
		fi
	done
else
	fail "import of $FIX failed: $(cat "$T/err")"
fi

# values: M, N, K as given, us / 1000 as mean_ms, provenance line
"$BIN" calibrate export --store "$DB" >"$T/exp.csv" 2>"$T/err" || fail "export: $(cat "$T/err")"
if grep -q -E '^gemm,mi308x,gfx942 80 CUs,bf16,aiter:tuned,64,192,1024,.*,0\.0042782[0-9]*,.*/aiter-gemm\.csv,7$' "$T/exp.csv"; then
	pass "export: llama70B bf16 64x192x1024 4.2782 us -> 0.0042782 ms, line 7"
else
	fail "export: the 64x192x1024 bf16 row is not as imported: $(grep ',64,192,1024,' "$T/exp.csv")"
fi
if grep -q ',65536,24576,1536,' "$T/exp.csv" || grep -q ',32,1280,8192,' "$T/exp.csv"; then
	fail "export: the inf row or the batched row was imported"
else
	pass "export: the inf row and the batched row are skipped"
fi

# --device names the GPU for every row (an MI325X's own table); --dtype filters
if ! "$BIN" calibrate import --store "$T/d.db" --device mi325x --dtype bf16 "$FIX" 2>"$T/err" ||
   ! "$BIN" calibrate list --store "$T/d.db" >"$T/list" 2>>"$T/err"; then
	fail "import --device mi325x --dtype bf16: $(cat "$T/err")"
fi
if tr -s ' ' <"$T/list" | grep -q -F "mi325x gemm bf16 aiter:tuned 2" &&
   grep -q -F "2 measurements in 1 series" "$T/list"; then
	pass "import --device mi325x --dtype bf16: 2 rows, all mi325x"
else
	fail "import --device mi325x --dtype bf16: $(cat "$T/list")"
fi
expect_error 2 "unknown importer" -- calibrate import --store "$T/k.db" --kind aiter "$FIX"
if "$BIN" calibrate import --store "$T/k.db" --kind aiter-gemm "$FIX" 2>"$T/err"; then
	pass "--kind aiter-gemm"
else
	fail "--kind aiter-gemm: $(cat "$T/err")"
fi

# failure paths: one line naming the file and line, exit 1, store unchanged
cp "$DB" "$T/before.db"
cut -d, -f1-7,9- "$FIX" >"$T/nok.csv"   # the K column dropped
expect_error 1 "$T/nok.csv:1: missing column 'K' \\(aiter-gemm table" -- \
	calibrate import --store "$DB" "$T/nok.csv"
sed '8s/,12\.9122,/,12.9x,/' "$FIX" >"$T/badus.csv"
expect_error 1 "$T/badus.csv:8: us: expected a time in us, got '12.9x' \\(non-numeric\\)" -- \
	calibrate import --store "$DB" "$T/badus.csv"
sed '8s/,12\.9122,/,-1,/' "$FIX" >"$T/negus.csv"
expect_error 1 "$T/negus.csv:8: us: '-1' \\(expected a time in us > 0\\)" -- \
	calibrate import --store "$DB" "$T/negus.csv"
sed '3s/,2,3072,1536,/,2.5,3072,1536,/' "$FIX" >"$T/badm.csv"
expect_error 1 "$T/badm.csv:3: M: expected an integer, got '2.5' \\(not a whole number\\)" -- \
	calibrate import --store "$DB" "$T/badm.csv"
sed '5s/,gfx942,304,/,gfx942,228,/' "$FIX" >"$T/cu.csv"
expect_error 1 "$T/cu.csv:5: cu_num: unknown GPU gfx942 with 228 CUs \\(expected gfx942 with 304 CUs \\(mi300x\\) or 80 CUs \\(mi308x\\); pass --device NAME\\)" -- \
	calibrate import --store "$DB" "$T/cu.csv"
sed '2s/,gfx942,304,/,gfx950,304,/' "$FIX" >"$T/gfx.csv"
expect_error 1 "$T/gfx.csv:2: cu_num: unknown GPU gfx950 with 304 CUs" -- \
	calibrate import --store "$DB" "$T/gfx.csv"
sed '9s/,torch\.float8_e4m3fnuz,/,torch.float16,/' "$FIX" >"$T/dt.csv"
expect_error 1 "$T/dt.csv:9: dtype: a8w8 row with dtype 'torch.float16' \\(expected torch.int8 or torch.float8_e4m3fnuz\\)" -- \
	calibrate import --store "$DB" "$T/dt.csv"
sed '7s/,llama70B_bf16,/,llama70B_fp16,/' "$FIX" >"$T/fam.csv"
expect_error 1 "$T/fam.csv:7: gemm_family: unknown table 'llama70B_fp16'" -- \
	calibrate import --store "$DB" "$T/fam.csv"
sed '12s/,0\.0063$/,0.0063,7/' "$FIX" >"$T/fields.csv"   # one field too many
expect_error 1 "$T/fields.csv:12: " -- calibrate import --store "$DB" "$T/fields.csv"
"$BIN" calibrate export --store "$DB" >"$T/after.csv" 2>/dev/null
"$BIN" calibrate export --store "$T/before.db" >"$T/before.csv" 2>/dev/null
if cmp -s "$T/before.csv" "$T/after.csv"; then
	pass "failed imports left the store as it was"
else
	fail "a failed import changed the store"
fi

# calibrate check --gemm-classes: (n, k) classes by aspect and weight size
# (64x192x1024: narrow-s; 1x1280x8192: narrow-m; 1x3072x1536: n = 2k is
# wide, 4.7M weights: wide-m; 2x4096x512: wide-s), every measurement either
# scored or counted outside, once per series in its ":all" row
if "$BIN" calibrate check --store "$DB" --gemm-classes >"$T/cls" 2>"$T/err"; then
	for want in "mi308x gemm.aiter.bf16:narrow-s" "mi308x gemm.aiter.bf16:narrow-m" \
		"mi300x gemm.aiter.fp8_block:wide-m" "mi300x gemm.aiter.fp8_block:wide-s"; do
		if tr -s ' ' <"$T/cls" | grep -q -F -e "$want "; then
			pass "--gemm-classes: $want"
		else
			fail "--gemm-classes: no '$want' in $(cat "$T/cls")"
		fi
	done
	total=$(awk '$2 ~ /:all$/ { t += $3 + $4 } END { print t + 0 }' "$T/cls")
	if [ "$total" = 9 ]; then
		pass "--gemm-classes: all 9 measurements scored or outside"
	else
		fail "--gemm-classes: $total measurements in the :all rows, expected 9"
	fi
else
	fail "calibrate check --gemm-classes: $(cat "$T/err")"
fi
expect_error 2 "^servesim: --cross-source, --gemm-classes and --cross-gpu: expected one of them\$" -- \
	calibrate check --store "$DB" --gemm-classes --cross-source

# the real table, where ../shared/data is present (counts: docs/calibration.md)
REAL=$(dirname "$0")/../../shared/data/amd/aiter_tuned_gemm_gfx942.csv
if [ -f "$REAL" ]; then
	if ! "$BIN" calibrate import --store "$T/real.db" "$REAL" 2>"$T/err" ||
	   ! "$BIN" calibrate list --store "$T/real.db" >"$T/list" 2>>"$T/err"; then
		fail "import of the real table: $(cat "$T/err")"
	fi
	if grep -q -F "26097 measurements in 6 series" "$T/list" &&
	   tr -s ' ' <"$T/list" | grep -q -F "mi300x gemm fp8_block aiter:tuned 23414"; then
		pass "the real table: 26097 measurements in 6 series"
	else
		fail "the real table: $(cat "$T/list")"
	fi
	# leave one class out on it: every row accounted for, most predicted
	"$BIN" calibrate check --store "$T/real.db" --gemm-classes >"$T/cls" 2>"$T/err" ||
		fail "--gemm-classes on the real table: $(cat "$T/err")"
	total=$(awk '$2 ~ /:all$/ { t += $3 + $4 } END { print t + 0 }' "$T/cls")
	scored=$(awk '$2 ~ /:all$/ { t += $3 } END { print t + 0 }' "$T/cls")
	if [ "$total" = 26097 ] && [ "$scored" -gt 13000 ]; then
		pass "--gemm-classes on the real table: $scored of 26097 scored"
	else
		fail "--gemm-classes on the real table: $scored scored of $total"
	fi
	# --weight-dtype fp8 on the MI300X: its only fp8 GEMMs are block-scaled,
	# and they price Qwen3-32B's layer GEMMs at tp 8 (QKV 1280x5120, O
	# 5120x1024, gate/up 6400x5120, down 5120x3200: all in AITER's table);
	# bf16 weights have no MI300X grid and stay on the roofline
	for w in fp8 bf16; do
		"$BIN" run --gpu mi300x --model qwen3-32b --tp 8 --weight-dtype "$w" \
			--cost-model table --calibration "$T/real.db" --num-requests 20 \
			>"$T/run-$w" 2>"$T/err" || fail "run --weight-dtype $w: $(cat "$T/err")"
	done
	if grep -q -E 'operators: gemm=table ' "$T/run-fp8"; then
		pass "run --gpu mi300x --weight-dtype fp8: GEMMs from the fp8_block grid"
	else
		fail "run --gpu mi300x --weight-dtype fp8: $(grep operators "$T/run-fp8")"
	fi
	if grep -q -E 'operators: gemm=roofline ' "$T/run-bf16"; then
		pass "run --gpu mi300x --weight-dtype bf16: GEMMs on the roofline (no bf16 grid)"
	else
		fail "run --gpu mi300x --weight-dtype bf16: $(grep operators "$T/run-bf16")"
	fi
else
	echo "skip: $REAL absent"
fi
# Several imports creating one new store at once (issue 34 §5): each
# builds its own temporary store and publishes it only if none exists yet,
# else imports again into the one that won, so every import's rows are kept
# (before, each renamed over the others and all exited 0).  Each names its
# rows' GPU, so the store must hold 6 x 9 measurements.
for dev in h100-sxm a100-80gb-sxm h200-sxm mi300x mi325x l40s; do
	"$BIN" calibrate import --store "$T/race.db" --device "$dev" "$FIX" 2>"$T/race-$dev.err" &
done
wait
cat "$T"/race-*.err >"$T/err"
if [ ! -s "$T/err" ] && "$BIN" calibrate list --store "$T/race.db" >"$T/list" 2>"$T/err" &&
   grep -q -E "(^| )54 measurements in" "$T/list"; then
	pass "six imports creating one store at once keep all 54 rows"
else
	fail "concurrent imports lost rows: $(tail -1 "$T/list") $(cat "$T/err")"
fi
finish
