# TLS client certificates (issue 14): with http.tls_client_ca_file, gpulsed
# answers only clients whose certificate that CA signed; others get 403
# and nothing else, /metrics included. Certificates are made here with
# openssl (install-deps installs it).
source "$(dirname "$0")/lib.sh"
command -v openssl >/dev/null || fail "openssl is not installed (scripts/install-deps.sh installs it)"

cd "$WORK"
O() { openssl "$@" >/dev/null 2>&1 || fail "openssl $*"; }
O req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=gpulse-test-ca
O req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 2 -subj /CN=other-ca
O req -x509 -newkey rsa:2048 -nodes -keyout srv.key -out srv.pem -days 2 -subj /CN=localhost \
	-addext subjectAltName=IP:127.0.0.1
O req -newkey rsa:2048 -nodes -keyout cli.key -out cli.csr -subj /CN=prometheus
O x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cli.pem -days 2
O x509 -req -in cli.csr -CA other.pem -CAkey other.key -CAcreateserial -out bad.pem -days 2
cd - >/dev/null

printf 'http:\n  tls_cert_file: %s\n  tls_key_file: %s\n  tls_client_ca_file: %s\n' \
	"$WORK/srv.pem" "$WORK/srv.key" "$WORK/ca.pem" >"$WORK/g.yml"
start_daemon a --config "$WORK/g.yml" --replay "$REC"
grep -q 'https://' "$WORK/a.log" || fail "no https"
U="https://127.0.0.1:$PORT"
code() { curl -sk --max-time 10 -o "$WORK/body" -w '%{http_code}' "$@" || true; }

[ "$(code --cert "$WORK/cli.pem" --key "$WORK/cli.key" "$U/metrics")" = 200 ] ||
	fail "the CA's client: $(cat "$WORK/body")"
grep -q '^gpulse_' "$WORK/body" || fail "/metrics body"
[ "$(code --cert "$WORK/cli.pem" --key "$WORK/cli.key" "$U/api/v1/gpus")" = 200 ] || fail "/api/v1/gpus"
[ "$(code "$U/metrics")" = 403 ] || fail "no client certificate was not refused"
grep -q 'client certificate signed by the configured CA is required' "$WORK/body" ||
	fail "403 body: $(cat "$WORK/body")"
c=$(code --cert "$WORK/bad.pem" --key "$WORK/cli.key" "$U/metrics")
[ "$c" = 403 ] || [ "$c" = 000 ] || fail "another CA's client: $c"
[ "$(code "$U/healthz")" = 403 ] || fail "/healthz without a certificate"

# The CLI presents GPULSE_CERT_FILE (and verifies gpulsed with
# GPULSE_CA_FILE); without it, gpulsed refuses it.
GPULSE_URL=$U GPULSE_CA_FILE=$WORK/srv.pem GPULSE_CERT_FILE=$WORK/cli.pem GPULSE_KEY_FILE=$WORK/cli.key \
	"$GPULSE" status >"$WORK/status.out" 2>"$WORK/status.err" || fail "gpulse status with a certificate: $(cat "$WORK/status.err")"
if GPULSE_URL=$U GPULSE_CA_FILE=$WORK/srv.pem "$GPULSE" status >/dev/null 2>"$WORK/status2.err"; then
	fail "gpulse status without a certificate succeeded"
fi
grep -q "403\|client certificate" "$WORK/status2.err" || fail "gpulse status error: $(cat "$WORK/status2.err")"

# Without TLS the key is refused at start, naming it.
printf 'http:\n  tls_client_ca_file: %s\n' "$WORK/ca.pem" >"$WORK/bad.yml"
set +e
"$GPULSED" --config "$WORK/bad.yml" --print-config >/dev/null 2>"$WORK/bad.err"
rc=$?
set -e
[ "$rc" = 2 ] || fail "exit status $rc"
grep -q 'http.tls_client_ca_file needs TLS' "$WORK/bad.err" || fail "error: $(cat "$WORK/bad.err")"
echo ok
