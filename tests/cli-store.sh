#!/bin/sh
# --calibration and --cost-model auto: a store the user names that cannot be
# opened or read is an error (exit 1, one line naming the file), never a
# silent fall-back to the roofline; a store that opens but has no data for
# the run's GPU falls back, and the summary says which model was used.
# Step costs beyond int64 nanoseconds (a hostile store, GPU or --semi-pd)
# are errors too.
. "$(dirname "$0")/cli-lib.sh"

SHIPPED=${SERVESIM_DATA:?}/calibration.db
RUN="run --num-requests 20 --seed 1"

expect_error 1 "$T/missing.db: cannot open calibration store: No such file" -- \
	$RUN --calibration "$T/missing.db"
mkdir "$T/dir.db"
expect_error 1 "$T/dir.db: is a directory" -- $RUN --calibration "$T/dir.db"
printf 'm,n,k,latency\n1,2,3,4\n%.0s' $(seq 40) >"$T/text.db"
expect_error 1 "$T/text.db: .*not an SQLite database" -- $RUN --calibration "$T/text.db"
head -c 65536 "$SHIPPED" >"$T/truncated.db"
expect_error 1 "$T/truncated.db: .*malformed" -- $RUN --calibration "$T/truncated.db"
# and the same for every cost model that reads stores, and for plan
expect_error 1 "$T/dir.db: is a directory" -- $RUN --cost-model table --calibration "$T/dir.db"

if command -v sqlite3 >/dev/null 2>&1; then
	cp "$SHIPPED" "$T/v2.db"
	sqlite3 "$T/v2.db" "PRAGMA user_version = 2;"
	expect_error 1 "$T/v2.db: calibration store schema version 2, this servesim reads version 1" -- \
		$RUN --calibration "$T/v2.db"
	sqlite3 "$T/foreign.db" "CREATE TABLE runs (id INTEGER PRIMARY KEY);"
	expect_error 1 "$T/foreign.db: not a servesim calibration store \\(application_id" -- \
		$RUN --calibration "$T/foreign.db"
	cp "$SHIPPED" "$T/view.db"
	sqlite3 "$T/view.db" "DROP VIEW measurements; ALTER TABLE points RENAME TO p0;
		CREATE VIEW points AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)
		SELECT p0.* FROM r, p0;"
	expect_error 1 "$T/view.db: .*'points' is a view, expected a table" -- \
		$RUN --calibration "$T/view.db"
	# a lock held by another process: reported after a short wait
	cp "$SHIPPED" "$T/locked.db"
	{ echo "BEGIN EXCLUSIVE;"; echo "SELECT 'held';"; sleep 6; echo "COMMIT;"; } |
		sqlite3 "$T/locked.db" >"$T/lock.out" &
	lock_pid=$!
	n=0
	while ! grep -q held "$T/lock.out" 2>/dev/null && [ $n -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	expect_error 1 "$T/locked.db: .*locked by another process" -- $RUN --calibration "$T/locked.db"
	wait "$lock_pid"
	# rows of 1e300 ms: a step beyond int64 nanoseconds is an error
	cp "$SHIPPED" "$T/huge.db"
	sqlite3 "$T/huge.db" "UPDATE points SET mean_ms = 1e300, median_ms = 1e300 WHERE series_id IN
		(SELECT id FROM series WHERE op = 'attn_decode');"
	expect_error 1 "cost model table: a step of .* would take .* s of attn_decode, not a duration" -- \
		$RUN --calibration "$T/huge.db"
	# a valid store with no measurements falls back, and says so
	cp "$SHIPPED" "$T/empty.db"
	sqlite3 "$T/empty.db" "DELETE FROM points; DELETE FROM series;"
	if "$BIN" $RUN --calibration "$T/empty.db" --gpu l40s >"$T/out" 2>"$T/err" &&
	   grep -q "cost model roofline" "$T/out"; then
		pass "a store without this GPU's data falls back to the roofline, and the summary says so"
	else
		fail "empty store: $(cat "$T/err")"
	fi
else
	echo "sqlite3 not installed: crafted-database cases skipped (test-store covers them)"
fi

# step times beyond int64 nanoseconds: errors, not wrapped or clamped to 1 ns
expect_error 1 "cost model roofline: a step of .* not a duration" -- \
	$RUN --cost-model roofline --semi-pd sm=1e-20
expect_error 1 "cost model roofline: a step of .* not a duration" -- $RUN --semi-pd sm=1e-20
cat >"$T/gpus.json" <<'JSON'
{"gpus": [{"name": "slow", "bf16_flops": 1e15, "hbm_bytes": 8e10, "hbm_bw": 1e-300,
  "nvlink_bw": 0, "pcie_bw": 6.4e10, "tdp_w": 700, "idle_w": 80, "cost_per_hour": 0,
  "source": "test"}]}
JSON
expect_error 1 "$T/gpus.json: .*\"slow\".*field \"hbm_bw\" is 1e-300 bytes/s, expected 1e\+06 to 1e\+16" -- \
	$RUN --gpu-catalog "$T/gpus.json" --gpu slow

# the shipped store read fine: the measured table
if "$BIN" $RUN --calibration "$SHIPPED" --gpu h100-sxm >"$T/out" 2>"$T/err" &&
   grep -q "cost model table" "$T/out"; then
	pass "a store with this GPU's data gives the table model"
else
	fail "shipped store: $(cat "$T/err")"
fi
# an edited store whose latency is text, zero or negative is refused with
# one line naming the measurement, not priced from zeros nor passed over
# for the shipped data (issue 34 §5)
if command -v python3 >/dev/null 2>&1; then
	for v in "'abc'" 0 -1; do
		cp "$SHIPPED" "$T/edit.db"
		python3 -c "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); d.execute('update points set mean_ms = %s where id = (select min(id) from points where series_id in (select id from series where device = \'h100-sxm\'))' % sys.argv[2]); d.commit()" "$T/edit.db" "$v"
		expect_error 1 "edit.db: measurement [0-9]+: mean_ms is .*(expected a number|expected a latency > 0) \(a damaged or edited store\?\)" -- \
			$RUN --calibration "$T/edit.db" --gpu h100-sxm
	done
fi

finish
