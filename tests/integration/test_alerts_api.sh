# Alerting rules in gpulsed: a replayed recording makes one alert fire at
# once (for: 0s) and another stay pending (for: 1h); /api/v1/alerts and
# /api/v1/rules show them in Prometheus's shape with expanded annotations;
# ALERTS series are queryable; the gpulse_alerts families are on /metrics;
# `gpulse alerts` prints them (table, --state, --json) and fails clearly
# when the daemon is unreachable; a restart over the same store restores
# both alerts with their activeAt (the firing one unchanged, the pending
# one not restarted from the new start).
source "$(dirname "$0")/lib.sh"

q() { curl -s --max-time 5 "$URL$1"; }
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
jget() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

mkdir -p "$WORK/rules"
cat >"$WORK/rules/alerts.yml" <<'YML'
groups:
  - name: gpu-alerts
    interval: 1s
    rules:
      - alert: GpuPowerSeen
        expr: gpulse_gpu_power_watts > 0
        labels:
          severity: info
        annotations:
          summary: 'GPU {{ $labels.gpu }} draws {{ $value | humanize }}W'
      - alert: GpuPowerLong
        expr: gpulse_gpu_power_watts > 0
        for: 1h
        annotations:
          summary: 'pending for an hour on {{ $labels.gpu }}'
YML
cat >"$WORK/cfg.yml" <<'YML'
rule_files:
  - rules/alerts.yml
YML

start_daemon alerts --replay "$REC" --storage-path "$WORK/db" --config "$WORK/cfg.yml"

wait_for '[ "$(q /api/v1/alerts | jcheck "len(d[\"data\"][\"alerts\"])==2" && echo y)" = y ]' ||
	fail "no alerts: $(q /api/v1/alerts)"

q /api/v1/alerts | jcheck '
d["status"]=="success" and
sorted(a["labels"]["alertname"]+":"+a["state"] for a in d["data"]["alerts"])==["GpuPowerLong:pending","GpuPowerSeen:firing"] and
all(set(a)>={"labels","annotations","state","activeAt","value"} for a in d["data"]["alerts"]) and
all(a["labels"]["gpu"]=="0" and "__name__" not in a["labels"] for a in d["data"]["alerts"]) and
[a for a in d["data"]["alerts"] if a["state"]=="firing"][0]["labels"]["severity"]=="info" and
__import__("re").fullmatch(r"GPU 0 draws [0-9.]+k?W", [a for a in d["data"]["alerts"] if a["state"]=="firing"][0]["annotations"]["summary"]) and
all(float(a["value"])>0 for a in d["data"]["alerts"]) and
all(__import__("re").fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", a["activeAt"]) for a in d["data"]["alerts"])' ||
	fail "/api/v1/alerts: $(q /api/v1/alerts)"

q /api/v1/rules | jcheck '
[ (r["name"], r["type"], r["state"], r["health"], len(r["alerts"])) for r in d["data"]["groups"][0]["rules"] ] ==
[("GpuPowerSeen","alerting","firing","ok",1), ("GpuPowerLong","alerting","pending","ok",1)] and
d["data"]["groups"][0]["rules"][1]["duration"]==3600' || fail "/api/v1/rules: $(q /api/v1/rules)"

wait_for '[ "$(q "/api/v1/query?query=ALERTS%7Balertstate%3D%22firing%22%7D" | jcheck "len(d[\"data\"][\"result\"])==1 and d[\"data\"][\"result\"][0][\"metric\"][\"alertname\"]==\"GpuPowerSeen\"" && echo y)" = y ]' ||
	fail "ALERTS series: $(q "/api/v1/query?query=ALERTS")"

[ "$(metric gpulse_alerts 'state="firing"')" = 1 ] || fail "gpulse_alerts firing: $(metric gpulse_alerts 'state="firing"')"
[ "$(metric gpulse_alerts 'state="pending"')" = 1 ] || fail "gpulse_alerts pending"
[ -n "$(metric gpulse_alert_notifications_total)" ] || fail "no gpulse_alert_notifications_total"
[ -n "$(metric gpulse_alert_flaps_held_total)" ] || fail "no gpulse_alert_flaps_held_total"
if command -v promtool >/dev/null; then
	fetch /metrics | promtool check metrics || fail "promtool check metrics"
fi

# The CLI: a table with both alerts, firing first, each with its summary
# annotation; --state; --json.
"$GPULSE" alerts --url "$URL" >"$WORK/cli.out" || fail "gpulse alerts failed"
head -n1 "$WORK/cli.out" | grep -Eq '^STATE +ALERT +SINCE +VALUE +LABELS +SUMMARY$' || fail "no header: $(cat "$WORK/cli.out")"
sed -n 2p "$WORK/cli.out" | grep -Eq '^firing +GpuPowerSeen +[0-9]+[smhd]' || fail "firing row: $(cat "$WORK/cli.out")"
sed -n 2p "$WORK/cli.out" | grep -q 'gpu=0' || fail "labels: $(cat "$WORK/cli.out")"
sed -n 2p "$WORK/cli.out" | grep -Eq ' GPU 0 draws [0-9.]+k?W$' || fail "firing summary: $(cat "$WORK/cli.out")"
sed -n 3p "$WORK/cli.out" | grep -Eq '^pending +GpuPowerLong ' || fail "pending row: $(cat "$WORK/cli.out")"
sed -n 3p "$WORK/cli.out" | grep -Eq ' pending for an hour on 0$' || fail "pending summary: $(cat "$WORK/cli.out")"
"$GPULSE" alerts --url "$URL" --state pending | grep -c GpuPower | grep -qx 1 || fail "--state pending"
"$GPULSE" alerts --url "$URL" --json | jcheck 'len(d["data"]["alerts"])==2' || fail "--json"
set +e
"$GPULSE" alerts --url http://127.0.0.1:1 >"$WORK/down.out" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "unreachable daemon: exit $rc"
grep -q '127.0.0.1:1' "$WORK/down.out" || fail "unreachable message: $(cat "$WORK/down.out")"
"$GPULSE" alerts --state bogus >/dev/null 2>&1 && fail "bad --state accepted"

# Restart over the same store: both alerts come back with their times.
# The pending alert has been pending for 6 s when the daemon stops; a
# restored one moves forward by the time the daemon was down (Prometheus's
# rule: down time does not count toward `for`), at most the time from the
# stop to the restarted daemon's answer plus 3 s of evaluation delays; a
# new one would start after the restart, 6 s or more later.
ts() { python3 -c 'import datetime,sys; print(datetime.datetime.fromisoformat(sys.argv[1].replace("Z","+00:00")).timestamp())' "$1"; }
before=$(q /api/v1/alerts)
fired_at=$(jget '[a["activeAt"] for a in d["data"]["alerts"] if a["state"]=="firing"][0]' <<<"$before")
pending_at=$(jget '[a["activeAt"] for a in d["data"]["alerts"] if a["state"]=="pending"][0]' <<<"$before")
p0=$(ts "$pending_at")
wait_for '[ "$(python3 -c "import time; print(int(time.time() - $p0 >= 6))")" = 1 ]' || fail "clock"
stop_s=$(date +%s.%N)
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
start_daemon alerts2 --replay "$REC" --storage-path "$WORK/db" --config "$WORK/cfg.yml"
wait_for '[ "$(q /api/v1/alerts | jcheck "len(d[\"data\"][\"alerts\"])==2" && echo y)" = y ]' ||
	fail "no alerts after restart: $(q /api/v1/alerts)"
up_s=$(date +%s.%N)
after=$(q /api/v1/alerts)
[ "$(jget '[a["activeAt"] for a in d["data"]["alerts"] if a["state"]=="firing"][0]' <<<"$after")" = "$fired_at" ] ||
	fail "firing alert's activeAt changed: $fired_at -> $after"
p1=$(ts "$(jget '[a["activeAt"] for a in d["data"]["alerts"] if a["state"]=="pending"][0]' <<<"$after")")
python3 -c "import sys; b,a,s,u=map(float,sys.argv[1:]); sys.exit(0 if b <= a <= b + (u - s) + 3 else 1)" \
	"$p0" "$p1" "$stop_s" "$up_s" || fail "pending alert not restored: activeAt $p0 -> $p1 (stopped $stop_s, up $up_s)"
[ "$(metric gpulse_alerts_restored_total)" = 2 ] || fail "restored: $(metric gpulse_alerts_restored_total)"
kill -TERM "$DAEMON_PID"

# No alert to show: "none now" when alerting rules are loaded, "no rules"
# when there is none (before, both read "no firing or pending alerts").
cat >"$WORK/rules/quiet.yml" <<'YML'
groups:
  - name: quiet
    rules:
      - alert: Never
        expr: gpulse_gpu_power_watts < 0
YML
printf 'rule_files:\n  - rules/quiet.yml\n' >"$WORK/quiet.yml"
start_daemon quiet --replay "$REC" --storage-path "$WORK/db-quiet" --config "$WORK/quiet.yml"
wait_for 'q /api/v1/rules | jcheck "d[\"data\"][\"groups\"][0][\"rules\"][0][\"health\"]==\"ok\""' ||
	fail "quiet rule not evaluated: $(q /api/v1/rules)"
"$GPULSE" alerts --url "$URL" >"$WORK/quiet.out" || fail "gpulse alerts (quiet)"
[ "$(cat "$WORK/quiet.out")" = "no firing or pending alerts" ] || fail "quiet: $(cat "$WORK/quiet.out")"
kill -TERM "$DAEMON_PID"
start_daemon norules --replay "$REC"
"$GPULSE" alerts --url "$URL" >"$WORK/norules.out" || fail "gpulse alerts (no rules)"
grep -q '^no alerting rules loaded' "$WORK/norules.out" || fail "no rules: $(cat "$WORK/norules.out")"
"$GPULSE" alerts --url "$URL" --state firing >"$WORK/norules.out" || fail "gpulse alerts --state (no rules)"
grep -q '^no alerting rules loaded' "$WORK/norules.out" || fail "no rules, --state: $(cat "$WORK/norules.out")"
echo ok
