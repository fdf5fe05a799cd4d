# Recording rules in gpulsed: rule_files in the config, a group evaluated
# every 2 s at aligned times, its results stored and queryable (equal to
# the expression evaluated at the same time), /api/v1/rules listing the
# group, the gpulse_rule_* families on /metrics, a broken rule file at
# SIGHUP keeping the old rules (a failed reload counted), and a broken
# rule file at start exiting 2 with FILE:LINE:COL.
source "$(dirname "$0")/lib.sh"

q() { curl -s --max-time 5 "$URL$1"; }
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
enc() { python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

mkdir -p "$WORK/rules"
cat >"$WORK/rules/power.yml" <<'YML'
groups:
  - name: power
    interval: 2s
    rules:
      - record: job:power:avg2s
        expr: avg_over_time(gpulse_gpu_power_watts[2s])
        labels:
          job: gpulse
      - record: job:power:avg2s_x2
        expr: job:power:avg2s * 2
      - alert: PowerHigh
        expr: gpulse_gpu_power_watts > 10000
YML
# Every evaluation is compared with the expression at its time, so all
# samples up to it must be in when it runs, on a loaded sanitizer build too.
cat >"$WORK/cfg.yml" <<'YML'
rule_files:
  - rules/power.yml
rule_evaluation_delay: 1s
YML

start_daemon rules --replay "$REC" --storage-path "$WORK/db" --config "$WORK/cfg.yml"

wait_for '[ "$(q "/api/v1/query?query=$(enc "job:power:avg2s_x2")" | jcheck "len(d[\"data\"][\"result\"])==1" && echo y)" = y ]' ||
	fail "no recorded series: $(q "/api/v1/query?query=job:power:avg2s")"
sleep 5

# Every stored evaluation equals the expression evaluated at its time
# (the evaluation times are multiples of 2 s).
q "/api/v1/query?query=$(enc 'job:power:avg2s[10s]')" | python3 -c '
import json,sys,urllib.request,urllib.parse
d=json.load(sys.stdin)
r=d["data"]["result"]; assert len(r)==1, r
m=r[0]["metric"]; assert m["__name__"]=="job:power:avg2s" and m["job"]=="gpulse" and m["gpu"]=="0", m
vals=r[0]["values"]; assert len(vals)>=3, vals
url=sys.argv[1]
def q(e,t):
    u=url+"/api/v1/query?query="+urllib.parse.quote(e,safe="")+"&time="+str(t)
    return json.load(urllib.request.urlopen(u))["data"]["result"]
for t,v in vals:
    assert abs(t/2-round(t/2))<1e-9, t
    e=q("avg_over_time(gpulse_gpu_power_watts[2s])",t)
    assert len(e)==1 and e[0]["value"][1]==v, (t,v,e)
    x=q("job:power:avg2s_x2",t)
    assert len(x)==1 and float(x[0]["value"][1])==2*float(v), (t,v,x)
' "$URL" || fail "recorded values differ from the expression"

q /api/v1/rules | jcheck '
d["status"]=="success" and len(d["data"]["groups"])==1 and
d["data"]["groups"][0]["name"]=="power" and d["data"]["groups"][0]["interval"]==2 and
d["data"]["groups"][0]["file"].endswith("rules/power.yml") and
[r["type"] for r in d["data"]["groups"][0]["rules"]]==["recording","recording","alerting"] and
d["data"]["groups"][0]["rules"][0]["health"]=="ok" and
d["data"]["groups"][0]["rules"][0]["labels"]=={"job":"gpulse"} and
d["data"]["groups"][0]["rules"][2]["state"]=="inactive"' || fail "/api/v1/rules: $(q /api/v1/rules)"

ev=$(metric gpulse_rule_evaluations_total 'power"')
[ -n "$ev" ] && [ "${ev%.*}" -ge 4 ] || fail "gpulse_rule_evaluations_total: $ev"
[ "$(metric gpulse_rule_evaluation_failures_total 'power"')" = 0 ] || fail "rule failures"
[ -n "$(metric gpulse_rule_group_last_duration_seconds 'power"')" ] || fail "no duration"
if command -v promtool >/dev/null; then
	fetch /metrics | promtool check metrics || fail "promtool check metrics"
fi

# A broken rule file at SIGHUP: the old rules keep running, the reload is
# counted as failed, the log names FILE:LINE:COL.
cat >"$WORK/rules/power.yml" <<'YML'
groups:
  - name: power
    rules:
      - record: job:power:broken
        expr: sum(
YML
kill -HUP "$DAEMON_PID"
wait_for '[ "$(metric gpulse_config_reloads_total "result=\"failure\"")" = 1 ]' || fail "failed reload not counted"
grep -Eq 'rules/power.yml:[0-9]+:[0-9]+' "$WORK/rules.log" || fail "no FILE:LINE:COL in the log"
before=$(metric gpulse_rule_evaluations_total 'power"')
wait_for 'after=$(metric gpulse_rule_evaluations_total "power\""); [ "${after%.*}" -gt "${before%.*}" ]' ||
	fail "the old rules stopped after a failed reload"
q /api/v1/rules | jcheck 'd["data"]["groups"][0]["rules"][0]["name"]=="job:power:avg2s"' || fail "old rules replaced"
kill "$DAEMON_PID"
wait "$DAEMON_PID" || true

# A broken rule file at start: exit 2 with FILE:LINE:COL.
set +e
"$GPULSED" --listen 127.0.0.1:0 --replay "$REC" --storage-path "$WORK/db2" --config "$WORK/cfg.yml" \
	2>"$WORK/broken.log"
rc=$?
set -e
[ "$rc" = 2 ] || fail "broken rule file at start: exit $rc, wanted 2"
grep -Eq 'rules/power.yml:[0-9]+:[0-9]+: ' "$WORK/broken.log" || fail "no FILE:LINE:COL: $(cat "$WORK/broken.log")"
echo "ok"
