# docs/writing-a-policy.md shows policies/router-kvfree.c verbatim: the ```c
# block between its example markers must be byte-identical to the file, so
# the tutorial cannot drift from the code.  The example policy runs from the
# command line, and a bad parameter is one error line with exit status 2 (a bad command line).
. "$(dirname "$0")/cli-lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
DOC=$SRC/docs/writing-a-policy.md
CODE=$SRC/policies/router-kvfree.c

# Everything strictly between the marker lines: a ```c fence, the file, a
# closing fence.
awk '/^<!-- example:end -->$/ { on = 0 } on { print } /^<!-- example:begin -->$/ { on = 1; n++ }
     END { if (n != 1) exit 1 }' "$DOC" >"$T/block" ||
	fail "$DOC: expected exactly one <!-- example:begin --> marker"
if [ "$(head -n 1 "$T/block")" != '```c' ] || [ "$(tail -n 1 "$T/block")" != '```' ]; then
	fail "$DOC: the example markers must enclose one \`\`\`c block"
else
	sed '1d;$d' "$T/block" >"$T/example.c"
	if cmp -s "$T/example.c" "$CODE"; then
		pass "the example in docs/writing-a-policy.md is policies/router-kvfree.c"
	else
		fail "docs/writing-a-policy.md's example differs from policies/router-kvfree.c: $(diff "$T/example.c" "$CODE" | head -n 5)"
	fi
fi

# The example runs as documented and routes every request.
if "$BIN" run --router kvfree --instances 3 --num-requests 200 --quiet --json >"$T/out" 2>"$T/err"; then
	grep -q '"router": "kvfree"' "$T/out" && grep -q '"requests_completed": 200' "$T/out" &&
		[ ! -s "$T/err" ] &&
		pass "servesim run --router kvfree --instances 3 completes 200 requests" ||
		fail "--router kvfree: $(grep -E '"(router|requests_completed)"' "$T/out") $(cat "$T/err")"
else
	fail "servesim run --router kvfree failed: $(cat "$T/err")"
fi
"$BIN" run --router kvfree:min_free=64 --instances 3 --num-requests 200 --quiet >"$T/out" 2>"$T/err" &&
	pass "--router kvfree:min_free=64 runs" || fail "--router kvfree:min_free=64: $(cat "$T/err")"

expect_error 2 '^servesim: --router kvfree: expected 1 <= min_free <= [0-9]+ \(blocks\), got -1$' -- \
	run --router kvfree:min_free=-1 --num-requests 10 --quiet
expect_error 2 "min_free" -- run --router kvfree:min_free=lots --num-requests 10 --quiet
expect_error 2 "free" -- run --router kvfree:free=10 --num-requests 10 --quiet
finish
