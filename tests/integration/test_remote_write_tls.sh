# Remote write over TLS with HTTP Basic authentication to the real Debian
# Prometheus (its --web.config.file: a certificate for the name
# "prom.test" only, from a CA made here, and a bcrypt user): gpulsed
# connects to 127.0.0.1 and verifies the certificate for
# tls_config.server_name with ca_file, the password read from
# password_file. Then a wrong password is refused (401, dropped and
# counted, as Prometheus does), and without server_name the certificate
# does not match 127.0.0.1: retried, never delivered.
# test-clock: real (Prometheus is Go and reads the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"

need prometheus
need openssl

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/ca.key" -out "$WORK/ca.pem" \
	-days 2 -subj "/CN=gpulse test CA" >/dev/null 2>&1 || fail "openssl CA"
openssl req -newkey rsa:2048 -nodes -keyout "$WORK/srv.key" -out "$WORK/srv.csr" \
	-subj "/CN=prom.test" >/dev/null 2>&1 || fail "openssl CSR"
printf 'subjectAltName=DNS:prom.test\n' >"$WORK/ext.cnf"
openssl x509 -req -in "$WORK/srv.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" \
	-CAcreateserial -out "$WORK/srv.pem" -days 2 -extfile "$WORK/ext.cnf" >/dev/null 2>&1 ||
	fail "openssl sign"

PPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/web.yml" <<YML
tls_server_config:
  cert_file: $WORK/srv.pem
  key_file: $WORK/srv.key
basic_auth_users:
  # "correct horse" at bcrypt cost 4 (a fixed test vector).
  bob: "\$2b\$04\$gpulsetestsaltgpulse.usdyC1vXtlPhUkTAUkyESI9kLY5zIeCe"
YML
printf 'global:\n  evaluation_interval: 1s\n' >"$WORK/prom.yml"
prometheus --config.file="$WORK/prom.yml" --storage.tsdb.path="$WORK/prom" \
	--web.listen-address="127.0.0.1:$PPORT" --web.enable-remote-write-receiver \
	--web.config.file="$WORK/web.yml" --log.level=warn 2>"$WORK/prometheus.log" &
PIDS+=("$!")
PROM="https://127.0.0.1:$PPORT"
pq() {  # QUERY: Prometheus's first value, or 0
	curl -s --cacert "$WORK/ca.pem" --resolve "prom.test:$PPORT:127.0.0.1" -u "bob:correct horse" \
		"https://prom.test:$PPORT/api/v1/query" --data-urlencode "query=$1" |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)'
}
wait_for 'curl -sf --cacert "$WORK/ca.pem" --resolve "prom.test:$PPORT:127.0.0.1" -u "bob:correct horse" "https://prom.test:$PPORT/-/ready" >/dev/null' ||
	fail "prometheus did not start with TLS"

printf 'correct horse\n' >"$WORK/pw"
printf 'wrong\n' >"$WORK/badpw"
cat >"$WORK/gpulse.yml" <<YML
storage:
  path: $WORK/db
remote_write:
  - url: $PROM/api/v1/write
    name: tls
    basic_auth: {username: bob, password_file: $WORK/pw}
    tls_config: {ca_file: $WORK/ca.pem, server_name: prom.test}
    write_relabel_configs:
      - {source_labels: [__name__], regex: gpulse_gpu_up, action: keep}
    queue_config: {batch_send_deadline: 200ms, min_backoff: 50ms, max_backoff: 500ms}
  - url: $PROM/api/v1/write
    name: badpw
    basic_auth: {username: bob, password_file: $WORK/badpw}
    tls_config: {ca_file: $WORK/ca.pem, server_name: prom.test}
    write_relabel_configs:
      - {source_labels: [__name__], regex: gpulse_gpu_up, action: keep}
    queue_config: {batch_send_deadline: 200ms}
  - url: $PROM/api/v1/write
    name: noname
    tls_config: {ca_file: $WORK/ca.pem}
    write_relabel_configs:
      - {source_labels: [__name__], regex: gpulse_gpu_up, action: keep}
    queue_config: {batch_send_deadline: 200ms, min_backoff: 50ms, max_backoff: 200ms}
YML
start_daemon tls --config "$WORK/gpulse.yml" --replay "$REC"
wait_for '[ "$(pq "count_over_time(gpulse_gpu_up[5m])")" != 0 ]' ||
	fail "nothing arrived over TLS: $(grep remote_write "$WORK/tls.log" | tail -3)"
wait_for '[ "$(metric prometheus_remote_storage_samples_failed_total "remote_name=\"badpw\"")" != 0 ]' ||
	fail "the wrong password was not refused and counted"
[ "$(metric prometheus_remote_storage_samples_total 'remote_name="badpw"')" = 0 ] ||
	fail "the wrong password delivered"
wait_for '[ "$(metric prometheus_remote_storage_samples_retried_total "remote_name=\"noname\"")" != 0 ]' ||
	fail "a certificate for another name was not retried"
[ "$(metric prometheus_remote_storage_samples_total 'remote_name="noname"')" = 0 ] ||
	fail "a certificate for another name was accepted"
grep -q 'remote_write noname: .*retrying' "$WORK/tls.log" || fail "no log line for the TLS failure"
echo "PASS"
