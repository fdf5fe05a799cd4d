# Read-only unless a token allows writes (issue 14): /api/v1/trace, the
# one endpoint that changes state (it makes a process trace everything),
# needs http.write_token_file's token once one is configured; the read
# token (http.auth_token_file) reads everything else and gets 403 with a
# JSON error there. Without a write token, a trace is served on a numeric
# loopback listen only (403 on every interface, token or not).
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"

SOCK="$WORK/run/inject.sock"
printf 'read-tok\n' >"$WORK/read.token"
printf 'write-tok\n' >"$WORK/write.token"
chmod 600 "$WORK/read.token" "$WORK/write.token"
cat >"$WORK/g.yml" <<YML
profiling:
  socket: "$SOCK"
http:
  auth_token_file: "$WORK/read.token"
  write_token_file: "$WORK/write.token"
YML
start_daemon a --config "$WORK/g.yml" --replay "$REC"
wait_for '[ -S "$SOCK" ]' || fail "no socket at $SOCK"
"$FAKE" "$SOCK" basic >"$WORK/basic.out" 2>&1 &
BASIC=$!
PIDS+=("$BASIC")

RD=(-H "Authorization: Bearer read-tok")
WR=(-H "Authorization: Bearer write-tok")
code() { curl -s --max-time 20 -o "$WORK/body" -w '%{http_code}' "$@"; }
wait_for '[ "$(code "${RD[@]}" "$URL/api/v1/processes")" = 200 ] && grep -q "\"pid\":$BASIC" "$WORK/body"' ||
	fail "the fake library never connected: $(cat "$WORK/body")"

# Reads: the read token, or the write token; nothing without one.
[ "$(code "$URL/metrics")" = 401 ] || fail "/metrics without a token"
[ "$(code "${RD[@]}" "$URL/metrics")" = 200 ] || fail "/metrics with the read token"
[ "$(code "${WR[@]}" "$URL/api/v1/gpus")" = 200 ] || fail "/api/v1/gpus with the write token"

# The write: 401 without a token, 403 (JSON) with the read one, served
# with the write one.
[ "$(code "$URL/api/v1/trace?pid=$BASIC&seconds=1")" = 401 ] || fail "trace without a token"
[ "$(code "${RD[@]}" "$URL/api/v1/trace?pid=$BASIC&seconds=1")" = 403 ] ||
	fail "a trace with the read token was not refused: $(cat "$WORK/body")"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "error" and d["errorType"] == "forbidden", d
assert "needs the write token" in d["error"], d
' "$WORK/body" || fail "403 body: $(cat "$WORK/body")"
# Refused before the handler: no capture was started.
started() { curl -s --max-time 5 "${RD[@]}" "$URL/metrics" |
	sed -n 's/^gpulse_profile_captures_total{result="started"} //p'; }
[ "$(started)" = 0 ] || fail "a refused trace started a capture: $(started)"
# (/metrics is rendered at most every 50 ms: the count may lag a little.)
forbidden() { curl -s --max-time 5 "${RD[@]}" "$URL/metrics" |
	sed -n 's/^gpulse_http_denied_total{reason="forbidden"} //p'; }
wait_for '[ "$(forbidden)" = 1 ]' || fail "the 403 was not counted as forbidden: $(forbidden)"
[ "$(code "${WR[@]}" "$URL/api/v1/trace?pid=$BASIC&seconds=1")" = 200 ] ||
	fail "a trace with the write token: $(cat "$WORK/body")"
grep -q '"traceEvents"' "$WORK/body" || fail "trace body: $(head -c 300 "$WORK/body")"
wait_for '[ "$(started)" = 1 ]' || fail "captures started: $(started)"
# gpulse trace presents whichever token file it is given.
if GPULSE_URL=$URL GPULSE_TOKEN_FILE=$WORK/read.token "$GPULSE" trace --pid "$BASIC" --seconds 1 \
	-o "$WORK/t0.json" 2>"$WORK/trace0.log"; then fail "gpulse trace with the read token succeeded"; fi
grep -q "write token" "$WORK/trace0.log" || fail "gpulse trace's error: $(cat "$WORK/trace0.log")"
GPULSE_URL=$URL GPULSE_TOKEN_FILE=$WORK/write.token "$GPULSE" trace --pid "$BASIC" --seconds 1 \
	-o "$WORK/t1.json" 2>"$WORK/trace1.log" || fail "gpulse trace with the write token: $(cat "$WORK/trace1.log")"
kill "$DAEMON_PID"

# No write token, every interface (allowed in the clear for the test):
# refused with the read token too, and the answer names the key to set.
cat >"$WORK/d.yml" <<YML
profiling:
  socket: "$WORK/run2/inject.sock"
http:
  auth_token_file: "$WORK/read.token"
  allow_insecure_remote: true
YML
start_daemon d --config "$WORK/d.yml" --replay "$REC" --listen 0.0.0.0:0
[ "$(code "${RD[@]}" "$URL/metrics")" = 200 ] || fail "/metrics on every interface"
[ "$(code "${RD[@]}" "$URL/api/v1/trace?pid=1&seconds=1")" = 403 ] ||
	fail "a trace without a write token off loopback: $(cat "$WORK/body")"
grep -q 'no write token is configured.*set http.write_token_file' "$WORK/body" ||
	fail "403 body: $(cat "$WORK/body")"
kill "$DAEMON_PID"

# No write token on numeric loopback: the read token suffices, as before.
sed -i '/allow_insecure_remote/d; s|run2|run3|' "$WORK/d.yml"
start_daemon e --config "$WORK/d.yml" --replay "$REC"
[ "$(code "${RD[@]}" "$URL/api/v1/trace?pid=1&seconds=1")" = 404 ] ||
	fail "a trace on loopback without a write token: $(code "${RD[@]}" "$URL/api/v1/trace?pid=1&seconds=1") $(cat "$WORK/body")"
kill "$DAEMON_PID"
echo ok
