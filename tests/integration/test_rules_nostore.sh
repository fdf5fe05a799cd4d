# Rules without storage: a recording rule is refused at load (exit 2,
# naming rule_files, the file, the group and the rule), while alerting
# rules run over gpulsed's own /metrics held in memory: an instant
# condition and a range one (avg_over_time, count_over_time) fire, one
# log line says how, /api/v1/rules and /api/v1/alerts list them, `gpulse
# alerts` shows them, the query API still answers 503, nothing lands in
# the working directory, and a reload brings in a rule on a metric that
# no rule read before.
source "$(dirname "$0")/lib.sh"

q() { curl -s --max-time 5 "$URL$1"; }
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
# wait_long CMD... : as wait_for, for up to 30 s (range conditions need
# a few scrapes first).
wait_long() {
	for _ in $(seq 1 300); do
		if eval "$*"; then return 0; fi
		sleep 0.1
	done
	return 1
}

mkdir -p "$WORK/rules" "$WORK/run"
cat >"$WORK/rules/alerts.yml" <<'YML'
groups:
  - name: nostore
    interval: 1s
    rules:
      - alert: GpuPowerSeen
        expr: gpulse_gpu_power_watts > 0
        labels:
          severity: info
        annotations:
          summary: 'GPU {{ $labels.gpu }} draws {{ $value | humanize }}W'
      - alert: GpuPowerSustained
        expr: avg_over_time(gpulse_gpu_power_watts[10s]) > 0 and count_over_time(gpulse_gpu_power_watts[10s]) >= 3
        for: 2s
YML
cat >"$WORK/rules/rec.yml" <<'YML'
groups:
  - name: rec
    rules:
      - record: gpu:power:avg
        expr: avg(gpulse_gpu_power_watts)
YML
printf 'rule_files:\n  - rules/alerts.yml\n  - rules/rec.yml\n' >"$WORK/rec.yml"
printf 'rule_files:\n  - rules/alerts.yml\n' >"$WORK/cfg.yml"

set +e
"$GPULSED" --listen 127.0.0.1:0 --replay "$REC" --config "$WORK/rec.yml" >"$WORK/rec.out" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "recording rule without storage: exit $rc, want 2: $(cat "$WORK/rec.out")"
grep -q '^gpulsed: rule_files: .*rules/rec.yml:4:9: group "rec", recording rule "gpu:power:avg": recording rules need storage' \
	"$WORK/rec.out" || fail "recording rule message: $(cat "$WORK/rec.out")"

cd "$WORK/run"
start_daemon nostore --replay "$REC" --config "$WORK/cfg.yml"
grep -q 'rules: no storage: 2 alerting rule(s) read /metrics as sampled every 1s' "$WORK/nostore.log" ||
	fail "no start-up line on rules without storage: $(cat "$WORK/nostore.log")"

firing() { # NAME...: every named alert fires
	q /api/v1/alerts | jcheck "set(a[\"labels\"][\"alertname\"] for a in d[\"data\"][\"alerts\"] if a[\"state\"]==\"firing\") >= set(\"$*\".split())"
}
wait_long firing GpuPowerSeen GpuPowerSustained || fail "alerts do not fire: $(q /api/v1/alerts)"

q /api/v1/rules | jcheck '
[g["name"] for g in d["data"]["groups"]] == ["nostore"] and
[(r["name"], r["type"], r["health"], r["state"]) for r in d["data"]["groups"][0]["rules"]] ==
[("GpuPowerSeen","alerting","ok","firing"), ("GpuPowerSustained","alerting","ok","firing")]' ||
	fail "/api/v1/rules: $(q /api/v1/rules)"
q /api/v1/alerts | jcheck '
[a["annotations"]["summary"] for a in d["data"]["alerts"] if a["labels"]["alertname"]=="GpuPowerSeen"][0].startswith("GPU 0 draws ")' ||
	fail "annotation: $(q /api/v1/alerts)"

"$GPULSE" alerts --url "$URL" >"$WORK/cli.out" || fail "gpulse alerts failed: $(cat "$WORK/cli.out")"
grep -Eq '^firing +GpuPowerSeen ' "$WORK/cli.out" || fail "gpulse alerts: $(cat "$WORK/cli.out")"
grep -Eq '^firing +GpuPowerSustained ' "$WORK/cli.out" || fail "gpulse alerts: $(cat "$WORK/cli.out")"

code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/api/v1/query?query=gpulse_gpu_up")
[ "$code" = 503 ] || fail "query API without storage: HTTP $code, want 503"
[ -z "$(ls -A "$WORK/run")" ] || fail "files written without storage: $(ls -A "$WORK/run")"

# A reload: a rule on a metric no rule read before fires too.
cat >>"$WORK/rules/alerts.yml" <<'YML'
      - alert: GpuWarm
        expr: gpulse_gpu_temperature_celsius > 0
YML
kill -HUP "$DAEMON_PID"
wait_long firing GpuPowerSeen GpuWarm || fail "the reloaded rule does not fire: $(q /api/v1/alerts)"

kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly"
echo PASS
