# Request framing and targets (RFC 9112): a request a proxy could frame
# differently from gpulsed is answered 400 and its connection closed, so
# nothing behind it is read as a request (request smuggling): both
# Transfer-Encoding and Content-Length (section 6.1), Content-Lengths that
# differ or a Transfer-Encoding other than chunked (6.3), whitespace
# between a header name and its colon (5.1), and in HTTP/1.1 no Host or
# two (3.2). An absolute-form target is served as its origin form (3.2.2).
# Each case pipelines a valid request behind the one tested; controls show
# that such a request is answered when nothing is wrong. Before these
# checks every refused case but one was answered 200, most with the
# pipelined request answered too, and the absolute form got 404.
source "$(dirname "$0")/lib.sh"

start_daemon framing --nvml-library "$FAKE_NVML" --storage-path "$WORK/db"
# The query case needs the store to answer.
wait_for 'curl -sf --max-time 2 "$URL/api/v1/query?query=vector(1)" >/dev/null' ||
	fail "the query API did not answer"
python3 "$(dirname "$0")/raw_http.py" --port "$PORT" || fail "raw requests: see above"
# Every refusal is counted as a rejected request.
[ "$(metric gpulse_http_rejected_total)" -ge 10 ] ||
	fail "refusals not counted: $(metric gpulse_http_rejected_total)"
kill -TERM "$DAEMON_PID"
echo "ok"
