# Credentials in receiver URLs and headers never reach a reader of the API,
# the log or /metrics: remote_write's url (user:PASSWORD@, ?token=), its
# header values and credentials, and the alert receivers' URLs
# (alertmanagers, webhooks) are shown redacted, as Prometheus 2.42 shows a
# remote_write url's password ("xxxxx", Go's url.URL.Redacted) and its
# secrets ("<secret>"): in /api/v1/status/config, in the log lines of a
# receiver that fails (a python3 http.server answering 503), and in the
# url/receiver labels of /metrics.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

cat >"$WORK/recv.py" <<'PY'
import http.server, os, sys
work = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(os.path.join(work, "port.tmp"), "w") as f:
    f.write(str(s.server_address[1]))
os.rename(os.path.join(work, "port.tmp"), os.path.join(work, "port"))
s.serve_forever()
PY
python3 "$WORK/recv.py" "$WORK" 2>"$WORK/recv.log" &
PIDS+=("$!")
wait_for '[ -s "$WORK/port" ]' || fail "the receiver did not start"
R="127.0.0.1:$(cat "$WORK/port")"

SECRETS=(rw-Pass-5ecret rw-Token-5ecret rw-Header-5ecret rw-Cred-5ecret am-Pass-5ecret
	am-Token-5ecret hook-Pass-5ecret hook-Token-5ecret)
cat >"$WORK/rules.yml" <<'YML'
groups:
  - name: always
    interval: 1s
    rules:
      - alert: Always
        expr: vector(1)
YML
cat >"$WORK/gpulse.yml" <<YML
storage:
  path: $WORK/db
rule_files: ["$WORK/rules.yml"]
alerting:
  group_wait: 0s
  retry_backoff: 50ms
  alertmanagers:
    urls: ["http://amuser:am-Pass-5ecret@$R/am?token=am-Token-5ecret"]
  webhooks:
    urls: ["http://hookuser:hook-Pass-5ecret@$R/hook?token=hook-Token-5ecret&x=1"]
remote_write:
  - url: http://rwuser:rw-Pass-5ecret@$R/api/v1/write?token=rw-Token-5ecret
    name: guarded
    headers:
      X-API-Key: rw-Header-5ecret
    authorization:
      credentials: rw-Cred-5ecret
    queue_config:
      batch_send_deadline: 100ms
  - url: http://other:rw-Pass-5ecret@$R/api/v1/write
YML
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=1
start_daemon sec --config "$WORK/gpulse.yml" --nvml-library "$FAKE_NVML"

# no_secret WHAT FILE: none of the secrets is in FILE.
no_secret() {
	for s in "${SECRETS[@]}"; do
		if grep -qF -- "$s" "$2"; then
			fail "$1 shows the secret $s: $(grep -F -- "$s" "$2" | head -n 3)"
		fi
	done
}

# The config API: the URLs redacted as Prometheus shows them, the header
# value and credentials as <secret>.
fetch /api/v1/status/config |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["yaml"])' >"$WORK/config.yml" ||
	fail "no /api/v1/status/config"
no_secret "/api/v1/status/config" "$WORK/config.yml"
for want in "http://rwuser:xxxxx@$R/api/v1/write?token=xxxxx" "http://other:xxxxx@$R/api/v1/write" \
	"http://amuser:xxxxx@$R/am?token=xxxxx" "http://hookuser:xxxxx@$R/hook?token=xxxxx&x=xxxxx"; do
	grep -qF -- "$want" "$WORK/config.yml" || fail "the config API does not show $want: $(cat "$WORK/config.yml")"
done
grep -qE '"?X-API-Key"?: "?<secret>"?' "$WORK/config.yml" || fail "the header value is not <secret>"
grep -qE 'credentials: "?<secret>"?$' "$WORK/config.yml" || fail "the credentials are not <secret>"

# The log: each failing receiver is named, redacted.
wait_for 'grep -qF "remote_write guarded: http://rwuser:xxxxx@$R/api/v1/write?token=xxxxx answered 503" "$WORK/sec.log"' ||
	fail "no redacted remote_write failure in the log"
wait_for 'grep -qF "alerting: alertmanager http://amuser:xxxxx@$R/am?token=xxxxx" "$WORK/sec.log"' ||
	fail "no redacted alertmanager failure in the log"
wait_for 'grep -qF "alerting: webhook http://hookuser:xxxxx@$R/hook?token=xxxxx&x=xxxxx" "$WORK/sec.log"' ||
	fail "no redacted webhook failure in the log"
no_secret "the log" "$WORK/sec.log"

# /metrics: remote write's url label, alert delivery's receiver label.
fetch /metrics >"$WORK/metrics.txt" || fail "no /metrics"
no_secret "/metrics" "$WORK/metrics.txt"
grep -qF "url=\"http://rwuser:xxxxx@$R/api/v1/write?token=xxxxx\"" "$WORK/metrics.txt" ||
	fail "no redacted url label"
grep -qF "receiver=\"http://hookuser:xxxxx@$R/hook?token=xxxxx&x=xxxxx\"" "$WORK/metrics.txt" ||
	fail "no redacted receiver label"

# An error message quoting a URL: a bad one is refused at load, redacted.
sed 's|urls: \["http://amuser:|urls: ["htp://amuser:|' "$WORK/gpulse.yml" >"$WORK/bad.yml"
rc=0; "$GPULSED" --config "$WORK/bad.yml" --print-config >"$WORK/bad.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -qF "htp://amuser:xxxxx@$R/am?token=xxxxx" "$WORK/bad.out" ||
	fail "a bad receiver URL: exit status $rc, $(cat "$WORK/bad.out")"
no_secret "a refused configuration's message" "$WORK/bad.out"
echo "PASS"
