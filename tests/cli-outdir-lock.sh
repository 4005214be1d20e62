# One writer per --out directory (docs/outputs.md, "One writer per
# directory"): while another process holds DIR/.servesim.lock, run, sweep
# and plan on DIR are refused at once with one line and exit 1, leaving the
# directory's results as they were; once the holder is gone (or killed:
# the lock goes with it) the same command succeeds.
. "$(dirname "$0")/cli-lib.sh"

command -v flock >/dev/null || { echo "skip: flock(1) not found"; exit 77; }

O=$T/res
mkdir -p "$O"
# hold the lock as another writer would, until $T/go exists
flock "$O/.servesim.lock" sh -c "while [ ! -e '$T/go' ]; do sleep 0.1; done" &
holder=$!
for _ in $(seq 50); do
	# wait until the holder has the lock (flock -n fails then)
	flock -n "$O/.servesim.lock" true 2>/dev/null || break
	sleep 0.1
done

for cmd in "run --num-requests 20" "sweep --num-requests 20 --sweep rate-scale=1,2" \
	"plan --arrival poisson:rate=4 --lengths fixed:prompt=128,output=16 --num-requests 20 --gpus h100-sxm --tp 1 --max-gpus 1 --modes colocated"; do
	name=${cmd%% *}
	# shellcheck disable=SC2086
	expect_error 1 "another servesim is writing its results here \(\.servesim\.lock is locked\): expected one writer per --out directory" -- $cmd --out "$O"
	[ ! -e "$O/summary.json" ] && [ ! -e "$O/sweep.db" ] && [ ! -e "$O/plan.json" ] &&
		pass "$name wrote nothing while the directory was locked" || fail "$name wrote into a locked directory: $(ls -A "$O")"
done

touch "$T/go"
wait "$holder"
"$BIN" run --num-requests 20 --out "$O" --quiet 2>"$T/err" && [ -s "$O/summary.json" ] &&
	pass "run writes once the other writer is gone" || fail "run after the lock was released: $(cat "$T/err")"

# a writer killed while holding the lock leaves no stale lock: a long run
# killed mid-simulation
"$BIN" run --arrival poisson:rate=50 --lengths fixed:prompt=100,output=100 --num-requests 2000000 \
	--out "$O" --quiet 2>/dev/null &
k=$!
for _ in $(seq 100); do
	flock -n "$O/.servesim.lock" true 2>/dev/null || break
	sleep 0.05
done
kill -9 "$k" 2>/dev/null
wait "$k" 2>/dev/null
"$BIN" run --num-requests 20 --out "$O" --quiet 2>"$T/err" &&
	pass "a killed writer's lock is gone with it" || fail "stale lock after a kill: $(cat "$T/err")"
finish
