# A GET query string of many pairs is answered up to the 64 KiB target
# limit, and one byte beyond it is 414. libmicrohttpd kept each pair of
# the query string in the connection's memory pool, and 5,000 pairs
# (10 KB) left no room to answer at all: the connection closed at the
# head deadline, 5 s later. A pair Go's url.ParseQuery rejects (a bad
# percent escape, a ';') is skipped, as Prometheus skips it.
source "$(dirname "$0")/lib.sh"

start_daemon longargs --replay "$REC" --replay-speed 1 --storage-path "$WORK/db"

# jcheck PYTHON-EXPR: evaluates EXPR with d = the JSON on stdin.
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
# long_get: GET the target in $WORK/target; the status, the body in $WORK/long.json.
# The time limit is the head deadline's double: the failure was no answer.
long_get() { curl -s -o "$WORK/long.json" -w '%{http_code}' --max-time 10 "$URL$(cat "$WORK/target")"; }

wait_for 'curl -sf --max-time 5 "$URL/api/v1/query?query=1" >/dev/null' || fail "the query API does not answer"

# 5,000 pairs (10 KB) and 30,000 pairs (60 KB, under the limit), the
# query last, so every pair before it is read.
for n in 5000 30000; do
	python3 -c 'import sys; n=int(sys.argv[1]); sys.stdout.write("/api/v1/query?" + "a&" * n + "query=2%2B3")' "$n" >"$WORK/target"
	[ "$(long_get)" = 200 ] && jcheck 'd["status"]=="success" and d["data"]["result"][1]=="5"' <"$WORK/long.json" ||
		fail "a query string of $n pairs ($(wc -c <"$WORK/target") bytes): $(head -c 300 "$WORK/long.json")"
done
# Exactly 64 KiB of target made of pairs is served; one byte more is 414.
for n in 65536 65537; do
	python3 -c 'import sys; n=int(sys.argv[1]); h="/api/v1/query?query=2%2B3&"; t=h + "a&" * ((n - len(h)) // 2); sys.stdout.write(t + "b" * (n - len(t)))' "$n" >"$WORK/target"
	[ "$(wc -c <"$WORK/target")" = "$n" ] || fail "the target is not $n bytes"
	want=200
	[ "$n" -gt 65536 ] && want=414
	[ "$(long_get)" = $want ] || fail "a target of $n bytes (pairs): not $want: $(head -c 300 "$WORK/long.json")"
done
[ "$(long_get)" = 414 ] && grep -q "request target too long" "$WORK/long.json" || fail "the 414 does not say why"

# Pairs Go rejects are skipped: the next query= is the one read, and a
# query= that is skipped leaves no query (Prometheus: 400, "no
# expression found").
for p in "query=%zz&query=2%2B3" "query=1;2&query=2%2B3" "x=%4&query=2%2B3"; do
	echo "/api/v1/query?$p" >"$WORK/target"
	[ "$(long_get)" = 200 ] && jcheck 'd["data"]["result"][1]=="5"' <"$WORK/long.json" ||
		fail "$p: $(cat "$WORK/long.json")"
done
echo "/api/v1/query?query=1%zz" >"$WORK/target"
[ "$(long_get)" = 400 ] && jcheck 'd["errorType"]=="bad_data"' <"$WORK/long.json" ||
	fail "query=1%zz (skipped): not 400: $(cat "$WORK/long.json")"
# A NUL in the query string is still refused, naming the parameter.
echo "/api/v1/query?a&query=1%00+5" >"$WORK/target"
[ "$(long_get)" = 400 ] && jcheck '"invalid parameter \"query\"" in d["error"]' <"$WORK/long.json" ||
	fail "a NUL: $(cat "$WORK/long.json")"
echo ok
