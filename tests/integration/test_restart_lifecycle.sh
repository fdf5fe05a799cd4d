# gpulsed restarted on its own store, as systemd restarts it: every metric
# name /metrics exports, and every name the rules and the other writers
# store, must be stored again and remote-written again after the restart,
# exactly as before it. gpulsed runs on the fake NVML replaying the H200
# recording with a process, the DCGM rule pack, a store and remote write to
# Debian's Prometheus (--web.enable-remote-write-receiver). First run: the
# names it exports and stores are recorded, each checked stored and
# received. Then (a) SIGTERM and start again on the same store, (b) kill -9
# and start again, (c) SIGTERM, the store taken back to schema 2 (the
# previous schema: rollups as rows, no rollup_blocks) and start again
# (migrated on open): after each, every recorded name must have samples
# stamped after the restart in the store and in Prometheus, and the store
# must have held them before it (the restart met a store holding every
# name, which an ownership decided by "the store holds it" took for
# another writer's: nothing of /metrics was stored after a restart).
# Names that appear only sometimes are accounted for, not excused: the
# replay is frozen at one row (GPULSE_FAKE_NVML_SPEED=0), so no field
# comes and goes with the recording's rows; the process is fixed; a family
# that appears only after an event (a histogram's first observation: a
# remote-write batch, a query) is recorded when the first run showed it,
# and the check waits until it shows again (the check's own queries and
# remote write are those events); and every name exported after a restart
# is held to the same check, recorded or not.
# test-clock: real (Prometheus is Go and reads the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

need prometheus

PPORT=$(free_port)
PROM="http://127.0.0.1:$PPORT"
printf 'global:\n  evaluation_interval: 1s\n' >"$WORK/prom.yml"
prometheus --config.file="$WORK/prom.yml" --storage.tsdb.path="$WORK/prom" \
	--web.listen-address="127.0.0.1:$PPORT" --web.enable-remote-write-receiver \
	--log.level=warn 2>"$WORK/prometheus.log" &
PIDS+=("$!")
wait_for 'curl -sf --max-time 2 "$PROM/-/ready" >/dev/null' || fail "prometheus did not start"

DB="$WORK/db"
cat >"$WORK/gpulse.yml" <<YML
storage:
  path: $DB
rule_files: [$GPULSE_SOURCE_DIR/deploy/rules/dcgm-compat.rules.yml]
profiling:
  socket: $WORK/inject.sock
remote_write:
  - url: $PROM/api/v1/write
    name: central
    queue_config:
      batch_send_deadline: 200ms
      min_backoff: 50ms
      max_backoff: 500ms
YML
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_SPEED=0
export GPULSE_FAKE_NVML_PROCESSES="4242:1024:30"

# check.py URL PROM T0_MS BASE MODE: waits (polling, up to 90 s) until
# every name is stored in gpulsed and received by Prometheus with a sample
# stamped after T0_MS. MODE first: the names are those /metrics exports and
# those stored beside them (rules, the ingest's and the diagnosis's own),
# written to BASE. MODE restart: the names in BASE, each of which the
# store must also have held before T0_MS, and /metrics must export again
# every name of BASE it exported then.
cat >"$WORK/check.py" <<'PY'
import json, math, re, sys, time, urllib.error, urllib.parse, urllib.request
url, prom, t0, base, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
line = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]')

deadline = time.time() + 90

def get(u):
    # A request that times out or is refused is asked again until the
    # deadline: on a loaded machine a query over every name of the last
    # minute may take longer than any one timeout (the check polls a
    # condition; how fast the daemon answers is not what it checks).
    while True:
        try:
            with urllib.request.urlopen(u, timeout=30) as r:
                return r.read().decode()
        except (OSError, urllib.error.URLError) as e:  # timeouts, 5xx, refused
            if time.time() > deadline:
                sys.exit(f"{u}: {e}")
            time.sleep(0.5)

def exported():
    return {m.group(1) for l in get(url + "/metrics").splitlines() if (m := line.match(l))}

def names_after(base_url, after_ms, at_s=None):
    """Metric names with a sample stamped after after_ms (up to at_s)."""
    at = at_s if at_s is not None else time.time()
    rng = max(1, math.ceil(at - after_ms / 1000) + 1)
    q = {"query": '{__name__=~".+"}[%ds]' % rng, "time": "%.3f" % at}
    d = json.loads(get(base_url + "/api/v1/query?" + urllib.parse.urlencode(q)))
    assert d["status"] == "success", d
    return {s["metric"]["__name__"] for s in d["data"]["result"]
            if any(float(v[0]) * 1000 > after_ms for v in s["values"])}

if mode == "first":
    want_exp = None
else:
    rec = json.load(open(base))
    want_exp, want = set(rec["exported"]), set(rec["exported"]) | set(rec["stored"])
    before = names_after(url, rec["t0"], t0 / 1000)
    held = want - before
    if held:
        sys.exit(f"the store did not hold these before the restart: {sorted(held)}")

while True:
    exp = exported()
    gone = sorted(want_exp - exp) if want_exp is not None else []
    stored, received = names_after(url, t0), names_after(prom, t0)
    # Every name exported now too, recorded or not.
    # Stored beside /metrics: the recording rules (gpulse:*, DCGM_FI_*),
    # the ingest's raw clock-reasons mask, the diagnosis history. (No
    # alerting rule is loaded: no ALERTS to come and go.)
    want = (exp | stored) if mode == "first" else want | exp
    missing_store, missing_prom = sorted(want - stored), sorted(want - received)
    if not gone and not missing_store and not missing_prom:
        break
    if time.time() > deadline:
        sys.exit(f"exported before, not now: {gone}\n"
                 f"not stored after the restart ({len(missing_store)} of {len(want)}): {missing_store}\n"
                 f"not received after the restart ({len(missing_prom)}): {missing_prom}")
    time.sleep(0.5)
if mode == "first":
    json.dump({"t0": t0, "exported": sorted(exp), "stored": sorted(want - exp)}, open(base, "w"))
if want_exp is not None and exp - want_exp:
    print(f"exported now, not before: {sorted(exp - want_exp)}")
print(f"{mode}: {len(want)} names ({len(exp)} exported), all stored and received after {t0}")
PY

now_ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }
run() {
	local name=$1 mode=$2 t0
	t0=$(now_ms)
	start_daemon "$name" --config "$WORK/gpulse.yml" --nvml-library "$FAKE_NVML"
	python3 "$WORK/check.py" "$URL" "$PROM" "$t0" "$WORK/base.json" "$mode" >"$WORK/$name.check" 2>&1 ||
		fail "$name: $(cat "$WORK/$name.check")"
	cat "$WORK/$name.check"
}
stop() {
	kill "-$1" "$DAEMON_PID"
	{ wait "$DAEMON_PID"; } 2>/dev/null || true
}

run first first
# The DCGM compatibility series and the self-scrape's own, named by the
# defect, are among the recorded names: the check above is not vacuous.
python3 - "$WORK/base.json" <<'PY' || fail "the recorded names lack what the restart lost"
import json, sys
b = json.load(open(sys.argv[1]))
names = set(b["exported"]) | set(b["stored"])
need = {"gpulse_gpu_info", "gpulse:dcgm_identity", "DCGM_FI_DEV_GPU_UTIL", "process_cpu_seconds_total",
        "gpulse_storage_self_scrape_series", "prometheus_remote_storage_samples_total",
        "gpulse_gpu_power_watts", "gpulse_process_gpu_memory_bytes"}
assert need <= names, sorted(need - names)
assert len(b["exported"]) > 80, len(b["exported"])
PY

stop TERM
run sigterm restart
stop KILL
run sigkill restart

stop TERM
python3 - "$DB" <<'PY' || fail "cannot take the store back to schema 2"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
assert c.execute("PRAGMA user_version").fetchone()[0] == 4
# Schema 2 as tsdb.c's migrations[] made it: the rollups as rows.
c.executescript("""
BEGIN;
DROP TABLE rollup_blocks;
DROP TABLE head_log;
CREATE TABLE rollups(series_id INTEGER NOT NULL, t INTEGER NOT NULL, min REAL, max REAL,
  sum REAL, count INTEGER NOT NULL, PRIMARY KEY(series_id, t)) WITHOUT ROWID;
INSERT INTO rollups SELECT id, (CAST(strftime('%s', 'now') AS INTEGER) / 60 - 60) * 60000,
  1, 1, 1, 1 FROM series WHERE id = 1;
PRAGMA user_version = 2;
COMMIT;""")
c.close()
PY
run migrated restart
python3 - "$DB" <<'PY' || fail "the store was not migrated"
import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
assert c.execute("PRAGMA user_version").fetchone()[0] == 4
assert c.execute("SELECT count(*) FROM rollup_blocks").fetchone()[0] >= 1
assert not c.execute("SELECT 1 FROM sqlite_master WHERE name = 'rollups'").fetchall()
PY
echo PASS
