# Remote write to the real Debian Prometheus (--web.enable-remote-write-
# receiver) through an outage: gpulsed replays the H200 recording with
# storage and remote_write on; Prometheus is stopped, gpulsed runs on and
# is restarted during the outage, Prometheus comes back; then every
# sample timestamp of a chosen series that gpulsed's store holds over the
# whole window must be in Prometheus exactly once (same count, same
# timestamps, same values), and write_relabel_configs' drop is counted.
# test-clock: real (Prometheus is Go and reads the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"

need prometheus

PPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PROM="http://127.0.0.1:$PPORT"
cat >"$WORK/prom.yml" <<YML
global:
  evaluation_interval: 1s
YML
start_prom() {
	prometheus --config.file="$WORK/prom.yml" --storage.tsdb.path="$WORK/prom" \
		--web.listen-address="127.0.0.1:$PPORT" --web.enable-remote-write-receiver \
		--log.level=warn 2>>"$WORK/prometheus.log" &
	PROM_PID=$!
	PIDS+=("$PROM_PID")
	wait_for 'curl -sf "$PROM/-/ready" >/dev/null' || fail "prometheus did not start"
}
cat >"$WORK/gpulse.yml" <<YML
storage:
  path: $WORK/db
remote_write:
  - url: $PROM/api/v1/write
    name: central
    remote_timeout: 2s
    headers:
      X-Scope-OrgID: gpulse-test
    write_relabel_configs:
      - source_labels: [__name__]
        regex: "gpulse_gpu_(power_watts|utilization_ratio|memory_used_bytes)"
        action: keep
    queue_config:
      max_samples_per_send: 500
      batch_send_deadline: 200ms
      min_backoff: 50ms
      max_backoff: 500ms
  # A path Prometheus answers 404: dropped and counted, as Prometheus does
  # on a 4xx, never retried.
  - url: $PROM/api/v1/no-such-endpoint
    name: refused
    write_relabel_configs:
      - source_labels: [__name__]
        regex: "gpulse_gpu_up"
        action: keep
    queue_config:
      batch_send_deadline: 200ms
YML

# Refusals at load, exit status 2: remote_write without storage, and a
# bad relabel rule named by file and line.
printf 'remote_write:\n  - url: %s/api/v1/write\n' "$PROM" >"$WORK/nostore.yml"
rc=0; "$GPULSED" --config "$WORK/nostore.yml" 2>"$WORK/nostore.out" || rc=$?
[ "$rc" = 2 ] && grep -q 'needs storage' "$WORK/nostore.out" || fail "remote_write without storage: $rc $(cat "$WORK/nostore.out")"
printf 'remote_write:\n  - url: %s/api/v1/write\n    write_relabel_configs:\n      - action: explode\n' "$PROM" >"$WORK/bad.yml"
rc=0; "$GPULSED" --config "$WORK/bad.yml" 2>"$WORK/bad.out" || rc=$?
[ "$rc" = 2 ] && grep -q 'bad.yml:4:9: remote_write\[0\].write_relabel_configs\[0\]: unknown relabel action' "$WORK/bad.out" ||
	fail "bad relabel action: $rc $(cat "$WORK/bad.out")"

start_prom
start_daemon gp1 --config "$WORK/gpulse.yml" --replay "$REC" --replay-speed 1
SERIES='gpulse_gpu_power_watts{gpu="0"}'
count_prom() {
	curl -s "$PROM/api/v1/query" --data-urlencode "query=count_over_time(${SERIES}[10m])" |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)'
}
wait_for '[ "$(count_prom)" -gt 10 ]' || fail "no samples reached Prometheus"
# The relabel keep dropped the other families, counted as Prometheus does.
dropped=$(metric prometheus_remote_storage_samples_dropped_total 'remote_name="central"')
[ -n "$dropped" ] && approx "$dropped" 0 0 && fail "write_relabel_configs dropped nothing"
has /metrics '^prometheus_remote_storage_samples_total\{remote_name="central",url="' ||
	fail "no prometheus_remote_storage_samples_total"
wait_for '[ "$(metric prometheus_remote_storage_samples_failed_total "remote_name=\"refused\"")" != 0 ]' ||
	fail "a 404 was not counted as failed"
[ "$(metric prometheus_remote_storage_samples_retried_total 'remote_name="refused"')" = 0 ] ||
	fail "a 404 was retried"
fetch /metrics >"$WORK/m.txt"
promtool check metrics <"$WORK/m.txt" >"$WORK/pt.log" 2>&1 || fail "promtool: $(cat "$WORK/pt.log")"
# OpenMetrics too: the counters' families are named without _total.
# (The body is read whole first: grep -q leaving early would end curl by
# SIGPIPE and fail the pipeline under pipefail.)
om=$(curl -sf -H 'Accept: application/openmetrics-text; version=1.0.0' "$URL/metrics") ||
	fail "no OpenMetrics exposition"
grep -q '^# TYPE prometheus_remote_storage_samples counter' <<<"$om" || fail "OpenMetrics family name"

# The outage: Prometheus goes, gpulsed keeps queueing, then restarts.
kill -TERM "$PROM_PID"
wait "$PROM_PID" 2>/dev/null || true
sleep 3
wait_for '[ "$(metric prometheus_remote_storage_samples_pending "remote_name=\"central\"")" != 0 ]' ||
	fail "nothing pending during the outage"
retried=$(metric prometheus_remote_storage_samples_retried_total 'remote_name="central"')
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
[ -n "$(ls "$WORK"/db.remote-write-central/*.seg 2>/dev/null)" ] || fail "no queue segment on disk"
start_daemon gp2 --config "$WORK/gpulse.yml" --replay "$REC" --replay-speed 1
sleep 3
start_prom
wait_for '[ "$(metric prometheus_remote_storage_samples_pending "remote_name=\"central\"")" = 0 ]' ||
	fail "the queue did not drain after the outage"
# Stop gpulsed so that nothing more is written, and let it send its last.
sleep 1
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
start_daemon gp3 --config "$WORK/gpulse.yml"
wait_for '[ "$(metric prometheus_remote_storage_samples_pending "remote_name=\"central\"")" = 0 ]' ||
	fail "the queue did not drain at the last start"
sleep 1

python3 - "$URL" "$PROM" "$SERIES" <<'PY' || fail "Prometheus does not hold every stored sample exactly once"
import json, sys, time, urllib.parse, urllib.request
gp, pr, series = sys.argv[1:4]
def raw(base):
    q = urllib.parse.urlencode({"query": series + "[15m]", "time": str(time.time())})
    with urllib.request.urlopen(base + "/api/v1/query?" + q, timeout=10) as r:
        d = json.load(r)
    assert d["status"] == "success", d
    res = d["data"]["result"]
    assert len(res) == 1, (base, [x["metric"] for x in res])
    return [(round(float(t) * 1000), v) for t, v in res[0]["values"]]
a, b = raw(gp), raw(pr)
assert len(a) > 50, len(a)
ta, tb = [t for t, _ in a], [t for t, _ in b]
assert len(set(tb)) == len(tb), "duplicate timestamps in Prometheus"
missing = sorted(set(ta) - set(tb))
extra = sorted(set(tb) - set(ta))
print(f"store {len(a)} samples, Prometheus {len(b)}; missing {len(missing)}, extra {len(extra)}")
assert not missing, missing[:10]
assert not extra, extra[:10]
assert dict(a) == dict(b), "values differ"
PY
# Nothing sent twice: what the three gpulsed runs say they delivered is
# what Prometheus holds (these series have no staleness markers, and
# Prometheus keeps one copy of an identical sample).
sent=$(sed -n 's/.*remote_write central: stopped; \([0-9]*\) samples delivered.*/\1/p' \
	"$WORK"/gp1.log "$WORK"/gp2.log | paste -sd+ | bc)
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
sent3=$(sed -n 's/.*remote_write central: stopped; \([0-9]*\) samples delivered.*/\1/p' "$WORK/gp3.log")
held=0
for m in gpulse_gpu_power_watts gpulse_gpu_utilization_ratio gpulse_gpu_memory_used_bytes; do
	n=$(curl -s "$PROM/api/v1/query" --data-urlencode "query=sum(count_over_time(${m}[15m]))" |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)')
	held=$((held + n))
done
echo "delivered $sent + $sent3 samples over three runs; Prometheus holds $held"
[ "$((sent + sent3))" = "$held" ] || fail "delivered $((sent + sent3)) samples, Prometheus holds $held"
echo "retried during the outage: $retried samples"
echo "PASS"
