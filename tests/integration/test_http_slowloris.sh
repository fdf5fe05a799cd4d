# Slow clients cannot take /metrics down (issue 14, item 1): while slow-loris
# connections (a request head one byte a second, never finished) are open,
# from 127.0.0.1 and from other loopback addresses, plain and over TLS with
# a token, /metrics answers; each slow connection is closed once its head
# deadline (http.header_timeout) passes, and the closures are counted.
# Before the connection guard the slow connections stayed open for as long
# as they dripped and /metrics timed out once they filled the slots.
# Then 500 connections that send nothing at all, each reopened as soon as
# it is closed: every scrape must answer. Over TLS a scrape waits for a
# head through its whole handshake, and before the guard preferred silent
# connections for eviction (and the kernel held them back, TCP_DEFER_ACCEPT)
# about one scrape in six was closed mid-handshake (plain HTTP lost none:
# its head is in the socket when it is accepted).
# Margins are generous: a deadline of 2 s is checked as "closed between
# 1.5 s and 6 s", a scrape as "answered within 3 s".
source "$(dirname "$0")/lib.sh"
SLOW="python3 $(dirname "$0")/slowloris.py"

# Other loopback addresses (127.0.0.2..5) where this machine has them.
ADDRS=127.0.0.1
for a in 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5; do
	python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 0))' "$a" 2>/dev/null &&
		ADDRS="$ADDRS,$a"
done
echo "slow clients from $ADDRS"

printf 'http:\n  header_timeout: 2s\n' >"$WORK/plain.yml"
start_daemon plain --config "$WORK/plain.yml" --replay "$REC" --replay-speed 20

# Fewer than http.max_connections (64): nothing is evicted, so every one
# must be closed by its deadline, and not before it.
$SLOW deadline --port "$PORT" --count 48 --header-timeout 2 --margin 4 ||
	fail "plain: slow connections not closed at their head deadline"
# 80 from 127.0.0.1 alone (more than every slot), then 200 from every
# address, each reopened as soon as it is closed: /metrics answers throughout.
$SLOW saturate --port "$PORT" --count 80 --seconds 5 ||
	fail "plain: /metrics did not answer under 80 slow connections from 127.0.0.1"
$SLOW saturate --port "$PORT" --count 200 --addrs "$ADDRS" --seconds 5 ||
	fail "plain: /metrics did not answer under 200 slow connections from $ADDRS"
$SLOW silent --port "$PORT" --count 500 --addrs "$ADDRS" --fetches 150 ||
	fail "plain: a scrape failed under 500 silent connections from $ADDRS"
[ "$(metric gpulse_http_shed_connections_total 'reason="head_timeout"')" -ge 48 ] ||
	fail "head timeouts not counted: $(metric gpulse_http_shed_connections_total 'reason="head_timeout"')"
[ "$(metric gpulse_http_shed_connections_total 'reason="evicted"')" -gt 0 ] ||
	fail "evictions not counted"
kill -TERM "$DAEMON_PID"

# The same over TLS with a token: half the slow connections finish the
# handshake and then drip a head, half never finish the handshake.
if ! openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" \
	-days 1 -subj /CN=localhost >/dev/null 2>&1; then
	skip_or_fail "openssl cannot make a certificate: TLS cases not run"
fi
printf 's3cret-token\n' >"$WORK/token"
chmod 600 "$WORK/token"
printf 'http:\n  header_timeout: 2s\n  tls_cert_file: %s\n  tls_key_file: %s\n  auth_token_file: %s\n' \
	"$WORK/cert.pem" "$WORK/key.pem" "$WORK/token" >"$WORK/tls.yml"
start_daemon tls --config "$WORK/tls.yml" --replay "$REC" --replay-speed 20
grep -q 'https://' "$WORK/tls.log" || fail "TLS daemon does not say https"
TLS_ARGS=(--port "$PORT" --tls --token s3cret-token)
$SLOW deadline "${TLS_ARGS[@]}" --count 48 --header-timeout 2 --margin 4 ||
	fail "TLS: slow connections not closed at their head deadline"
$SLOW saturate "${TLS_ARGS[@]}" --count 128 --addrs "$ADDRS" --seconds 5 ||
	fail "TLS: /metrics did not answer under 128 slow TLS connections from $ADDRS"
$SLOW silent "${TLS_ARGS[@]}" --count 500 --addrs "$ADDRS" --fetches 150 ||
	fail "TLS: a scrape failed under 500 silent connections from $ADDRS"
n=$(curl -skf --max-time 5 -H 'Authorization: Bearer s3cret-token' "https://127.0.0.1:$PORT/metrics" |
	awk '/^gpulse_http_shed_connections_total\{reason="head_timeout"\}/ {print $2}')
[ "${n:-0}" -ge 48 ] || fail "TLS: head timeouts not counted (${n:-none})"
kill -TERM "$DAEMON_PID"
echo "ok"
