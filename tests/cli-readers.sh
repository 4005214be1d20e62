#!/bin/sh
# Hostile inputs to the readers through the command line (issue 10 section 3):
# one clear line and exit 1 (bad file) or 2 (bad option), or the right result.
. "$(dirname "$0")/cli-lib.sh"

printf 'arrival_ms,prompt_tokens,output_tokens\n0,100,10\n5,200,20\n10,300,30\n' > "$T/t.csv"

# a trace on a pipe: detection must not consume what the reader needs
"$BIN" run --trace "$T/t.csv" --format native --seed 1 >"$T/file.txt" 2>&1 || fail "run on a file"
if cat "$T/t.csv" | "$BIN" run --trace /dev/stdin --seed 1 >"$T/pipe.txt" 2>"$T/pipe.err"; then
	if grep -q '3 requests\|requests: *3\|3 finished' "$T/pipe.txt" && \
	   [ "$(grep -v '^ *trace\|/dev/stdin' "$T/pipe.txt")" = "$(grep -v '^ *trace\|t.csv' "$T/file.txt")" ]; then
		pass "--trace /dev/stdin on a pipe reads the whole trace"
	else
		fail "--trace /dev/stdin: output differs from the file's: $(diff "$T/file.txt" "$T/pipe.txt" | head -5)"
	fi
else
	fail "--trace /dev/stdin on a pipe failed: $(cat "$T/pipe.err")"
fi

# a stream without newlines: a bounded error, not a read until memory runs out
expect_error 1 "/dev/zero:1: line longer than 1048576 bytes" -- run --trace /dev/zero
expect_error 1 "/dev/zero:1: line longer than 1048576 bytes" -- run --trace /dev/zero --format mooncake

# a UTF-8 byte order mark before Mooncake JSON lines
printf '\357\273\277{"timestamp": 0, "input_length": 10, "output_length": 2}\n' > "$T/bom.jsonl"
if "$BIN" run --trace "$T/bom.jsonl" >/dev/null 2>"$T/err"; then
	pass "Mooncake trace with a BOM"
else
	fail "Mooncake trace with a BOM: $(cat "$T/err")"
fi

# hexadecimal, inf and nan are not token counts; a NUL byte is not text
for v in 0x10 0x1p4 inf nan; do
	printf 'arrival_ms,prompt_tokens,output_tokens\n0,%s,5\n' "$v" > "$T/h.csv"
	expect_error 1 "h.csv:2: prompt_tokens: expected an integer, got '$v'" -- run --trace "$T/h.csv"
done
printf 'arrival_ms,prompt_tokens,output_tokens\n0,1\0002,5\n' > "$T/nul.csv"
expect_error 1 "nul.csv:2: NUL byte in field 2" -- run --trace "$T/nul.csv"
# ... nor in the session, agent-session and rate-curve readers (issue 34 §5:
# they cut the field at the NUL and went on)
printf 'session,call,new_tokens,output_tokens,think_ms,arrival_ms\ns,0,12\00000,10,,0\n' > "$T/nuls.csv"
expect_error 1 "nuls.csv:2: NUL byte in field 3" -- run --trace "$T/nuls.csv"
printf 'benchmark,session,call,completed_at_s,prompt_tokens,completion_tokens\nb,s\000x,0,1,100,10\n' > "$T/nule.csv"
expect_error 1 "nule.csv:2: NUL byte in field 2" -- run --trace "$T/nule.csv"
printf 'time_s,rate\n0,1\n10,2\0005\n' > "$T/nulr.csv"
expect_error 1 "nulr.csv:3: NUL byte in field 2" -- run --rate-curve "$T/nulr.csv" --lengths fixed:prompt=10,output=10 --num-requests 10

# control bytes from an input file never reach the terminal raw: an escape
# sequence in a field or a file name is printed as \x1b (issue 34 §5)
printf 'arrival_ms,prompt_tokens,output_tokens\n0,1\033[2J\033]0;pwn\007,5\n' > "$T/esc.csv"
expect_error 1 "esc.csv:2: prompt_tokens: expected an integer, got '1\\\\x1b\\[2J\\\\x1b\\]0;pwn\\\\x07'" -- run --trace "$T/esc.csv"
if tr -d '\n' <"$T/err" | LC_ALL=C grep -q "$(printf '[\001-\037\177]')"; then
	fail "a control byte reached stderr: $(od -c "$T/err" | head -3)"
else
	pass "no control byte reaches stderr"
fi
mkdir -p "$T/d$(printf '\033')x"
expect_error 1 'd\\x1bx/none.csv: cannot open' -- run --trace "$T/d$(printf '\033')x/none.csv"

# absurd generator parameters: an error, never 0, wrapped or NaN lengths (bad --arrival or --lengths values: exit 2)
expect_error 2 "expected output_mean <= 2147483647 tokens" -- \
	run --arrival poisson:rate=1 --lengths geometric:prompt=10,output_mean=1e18 --num-requests 5
expect_error 2 "expected output_mean <= 2147483647 tokens" -- \
	run --arrival poisson:rate=1 --lengths geometric:prompt=10,output_mean=3e9 --num-requests 5
expect_error 2 "expected prompt_cv <= 1000" -- \
	run --arrival poisson:rate=1 --num-requests 5 \
	--lengths lognormal:prompt_mean=100,prompt_cv=1e200,output_mean=10,output_cv=1
expect_error 2 "expected cv from 0.001 to 1000, got 1e-300" -- \
	run --arrival gamma:rate=1,cv=1e-300 --lengths fixed:prompt=1,output=1 --num-requests 5
expect_error 2 "duration" -- \
	run --arrival poisson:rate=1 --lengths fixed:prompt=1,output=1 --duration 1e-300
expect_error 2 "duration" -- \
	plan --arrival poisson:rate=1 --lengths fixed:prompt=1,output=1 --duration 1e-300

finish
