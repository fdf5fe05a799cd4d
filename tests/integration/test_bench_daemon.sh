# gpulsed's baseline benchmarks (issue 15 item 2) on the fake NVML and the
# stand-in driver and cuBLASLt: the schedule starts a run once the GPU has
# been idle bench.idle_for with no process; a process that appears on the
# GPU kills the run, nothing is kept, and it is tried again when the GPU
# is idle; the result lands in the store (a record and gpulse_bench_*
# series the query API reads) and on /metrics; POST /api/v1/bench is a
# write action (403 without the write token, 409 while one runs), and
# `gpulse bench --via-daemon` and `--history` work through it.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}" "${FAKE_NVML:?}"
export GPULSE_CUDA_LIBRARY="$GPULSE_BUILD_DIR/fake_bench/libcuda.so.1"
export GPULSE_CUBLASLT="$GPULSE_BUILD_DIR/fake_bench/libcublasLt.so.13"
# Every event wait sleeps 0.3 times the virtual time: a quick run lasts
# about 4 s, long enough for a process to appear in the middle of it.
export GPULSE_FAKE_BENCH_REALTIME=0.3

# A recording: idle for 3 s, then a process at 90% for 3 s, then idle.
# (The fake NVML reports the first process as the caller itself: gpulsed
# sees it as another process, the benchmark child as itself.)
python3 - "$REC" "$WORK/rec.csv" <<'PY'
import sys
rows = open(sys.argv[1]).read().splitlines()
cols = rows[0].split(",")
base = rows[1].split(",")
out = [rows[0]]
t0 = float(base[0])
for i in range(1200):
    r = list(base)
    t = i / 10
    r[0] = "%.3f" % (t0 + t)
    busy = 3 <= t < 6
    r[cols.index("gpu_util")] = "90" if busy else "0"
    r[cols.index("proc_count")] = "1" if busy else "0"
    out.append(",".join(r))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
export GPULSE_FAKE_NVML_RECORDING="$WORK/rec.csv" GPULSE_FAKE_NVML_SPEED=1
# A stand-in for a central Prometheus (bench.fleet_prometheus_url): it
# records the query and answers three other H200s whose bf16 is 8% faster,
# and whose launch rate, from a gpulse before figures had a method (no
# method label: the median), is far above: not comparable with this
# gpulse's fast decile, so never judged against.
cat >"$WORK/prom.py" <<'PY'
import http.server, json, sys, urllib.parse
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query).get("query", [""])[0]
        open(sys.argv[1] + ".query", "a").write(q + "\n")
        res = [{"metric": {"__name__": "gpulse_bench_value", "uuid": "GPU-peer%d" % i,
                           "model": "NVIDIA H200", "figure": "matmul", "variant": "bf16"},
                "value": [0, str(756e12)]} for i in range(3)]
        res += [{"metric": {"__name__": "gpulse_bench_value", "uuid": "GPU-peer%d" % i,
                            "model": "NVIDIA H200", "figure": "launch_rate", "variant": "none"},
                 "value": [0, str(1e9)]} for i in range(3)]
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": res}}).encode()
        self.send_response(200 if u.path == "/api/v1/query" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1] + ".port.tmp", "w").write(str(s.server_port))
import os; os.rename(sys.argv[1] + ".port.tmp", sys.argv[1] + ".port")
s.serve_forever()
PY
python3 "$WORK/prom.py" "$WORK/prom" &
PIDS+=("$!")
wait_for '[ -s "$WORK/prom.port" ]' || fail "the stand-in Prometheus did not start"
PROM="http://127.0.0.1:$(cat "$WORK/prom.port")"
printf 'write-tok\n' >"$WORK/write.token"
chmod 600 "$WORK/write.token"
cat >"$WORK/g.yml" <<YML
http:
  write_token_file: "$WORK/write.token"
bench:
  schedule: weekly
  idle_for: 1s
  retry_interval: 1s
  command: "$GPULSE"
  fleet_prometheus_url: "$PROM"
screen:
  enabled: false
YML
start_daemon b --config "$WORK/g.yml" --nvml-library "$FAKE_NVML" --storage-path "$WORK/db"
LOG="$WORK/b.log"
wait_for 'grep -q "bench: GPU 0: quick run 1 started (idle window)" "$LOG"' ||
	fail "no scheduled run"
# The process at t=3 s ends run 1: nothing kept.
wait_for 'grep -q "process [0-9]* appeared on GPU 0: run aborted, nothing kept" "$LOG"' ||
	fail "the run was not aborted when a process appeared"
[ "$(metric gpulse_bench_runs_total 'outcome="aborted"')" = 1 ] || fail "aborted not counted"
[ -z "$(metric gpulse_bench_value)" ] || fail "an aborted run published figures"
# Idle again from t=6 s: run 2 starts and is kept.
wait_for 'grep -q "bench: GPU 0: quick run 2 started (idle window)" "$LOG"' || fail "no retry"
for _ in 1 2; do # up to 30 s
	wait_for '[ "$(metric gpulse_bench_runs_total "outcome=\"kept\"")" = 1 ]' && break
done
[ "$(metric gpulse_bench_runs_total 'outcome="kept"')" = 1 ] || fail "run 2 not kept"
v=$(metric gpulse_bench_value 'figure="matmul"' 'variant="bf16"')
approx "$v" 700e12 0.002 || fail "bf16 on /metrics: $v"
[ "$(metric gpulse_bench_last_run_baseline)" = 1 ] || fail "baseline flag"
# The fleet: the stand-in's three faster H200s flag bf16 (7.4% below their
# median, beyond the 5% tolerance); figures without peers are not judged.
grep -q 'gpulse_bench_value{model="NVIDIA H200",uuid!="GPU-fa4e0000-0000-4000-8000-000000000000"} and on(uuid) (gpulse_bench_last_run_baseline == 1)' \
	"$WORK/prom.query" || fail "the fleet query: $(cat "$WORK/prom.query" 2>&1)"
[ "$(metric gpulse_bench_regression 'basis="fleet"' 'variant="bf16"')" = 1 ] || fail "no fleet regression"
d=$(metric gpulse_bench_deficit_ratio 'basis="fleet"' 'variant="bf16"')
approx "$d" "$(python3 -c 'print(1 - 700 / 756)')" 0.01 || fail "fleet deficit $d"
[ -z "$(metric gpulse_bench_regression 'basis="fleet"' 'variant="fp16"')" ] || fail "fp16 judged without peers"
[ -z "$(metric gpulse_bench_regression 'basis="fleet"' 'figure="launch_rate"')" ] ||
	fail "launch_rate (fast_p90) judged against peers' medians"
[ -n "$(metric gpulse_bench_value 'figure="launch_rate"' 'method="fast_p90"')" ] ||
	fail "launch_rate's value without its method label"
[ -n "$(metric gpulse_bench_value 'figure="dram_copy"' 'method="median"')" ] ||
	fail "dram_copy's value without its method label"
[ -z "$(metric gpulse_bench_regression 'basis="own"')" ] || fail "judged against an own baseline of no runs"
# The store: the series through the query API, and one record (the
# aborted run left none).
q=$(curl -sf "$URL/api/v1/query" --data-urlencode 'query=gpulse_bench_value{figure="dram_copy"}' -G)
python3 -c '
import json, sys
d = json.loads(sys.argv[1])["data"]["result"]
assert len(d) == 1 and abs(float(d[0]["value"][1]) / 4300e9 - 1) < 0.002, d
assert d[0]["metric"]["uuid"] == "GPU-fa4e0000-0000-4000-8000-000000000000", d
' "$q" || fail "stored series: $q"
# One stored point per kept run: the self-scrape of /metrics (every second)
# leaves the bench results to benchd (benchd_store_metrics), so after a
# few scrapes each series still holds the run's one sample.
sleep 3
q=$(curl -sf "$URL/api/v1/query" --data-urlencode 'query=count_over_time(gpulse_bench_value[1h])' -G)
python3 -c '
import json, sys
d = json.loads(sys.argv[1])["data"]["result"]
assert len(d) >= 5 and all(x["value"][1] == "1" for x in d), d
' "$q" || fail "bench series written more than once a run: $q"
fetch "/api/v1/bench/results?gpu=0" >"$WORK/res.json" || fail "results"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["data"]
assert len(d["runs"]) == 1 and d["runs"][0]["baseline"] is True, d["runs"]
f = {(x["figure"], x["variant"]): x for x in d["figures"]}
assert len(f[("matmul", "bf16")]["points"]) == 1, f
p = f[("h2d", "pageable")]["points"][0]
assert p["method"] == "fast_p90" and p["value"] >= p["median"], p
assert f[("matmul", "bf16")]["points"][0]["method"] == "median", f
' "$WORK/res.json" || fail "results: $(cat "$WORK/res.json")"
# No second scheduled run: the next is due in a week.
fetch "/api/v1/bench/status?gpu=0" >"$WORK/st.json"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["data"]
assert d["state"] == "done" and d["id"] == 2 and d["scheduled"] is True, d
assert "next_due" in d and d["result"]["gpu"]["index"] == 0, d
assert len(d["verdicts"]) == 14 and d["verdicts"][0]["own"]["points"] == 0, d["verdicts"][0]
' "$WORK/st.json" || fail "status: $(cat "$WORK/st.json")"

# On demand: a write action.
code() { curl -s --max-time 10 -o "$WORK/body" -w '%{http_code}' "$@"; }
[ "$(code -X POST "$URL/api/v1/bench?gpu=0")" = 403 ] || fail "POST without the token: $(cat "$WORK/body")"
grep -q '"errorType":"forbidden"' "$WORK/body" || fail "403 body: $(cat "$WORK/body")"
[ "$(code -X POST -H 'Authorization: Bearer wrong' "$URL/api/v1/bench?gpu=0")" != 202 ] ||
	fail "a wrong token started a run"
[ "$(code -X PUT -H 'Authorization: Bearer write-tok' "$URL/api/v1/bench")" = 405 ] || fail "PUT"
[ "$(code -X POST -H 'Authorization: Bearer write-tok' "$URL/api/v1/gpus")" = 405 ] ||
	fail "POST to a read route"
[ "$(code -H 'Authorization: Bearer write-tok' "$URL/api/v1/bench")" = 405 ] || fail "GET of the write route"
[ "$(code -X POST -H 'Authorization: Bearer write-tok' "$URL/api/v1/bench?gpu=0&mode=fast")" = 400 ] ||
	fail "bad mode"
[ "$(metric gpulse_bench_runs_total 'outcome="kept"')" = 1 ] || fail "a refused POST ran"

# Without the token, --via-daemon says why.
rc=0
"$GPULSE" --url "$URL" bench --via-daemon >/dev/null 2>"$WORK/via403.err" || rc=$?
[ "$rc" = 1 ] && grep -q "HTTP 403" "$WORK/via403.err" ||
	fail "--via-daemon without the token: $rc $(cat "$WORK/via403.err")"

# gpulse bench --via-daemon starts one and waits for it; a POST while it
# runs gets 409.
"$GPULSE" --url "$URL" --token-file "$WORK/write.token" bench --via-daemon >"$WORK/via.out" \
	2>"$WORK/via.err" &
VP=$!
PIDS+=("$VP")
wait_for 'grep -q "gpulsed started run 3 on GPU 0" "$WORK/via.err"' || fail "via-daemon: $(cat "$WORK/via.err")"
wait_for '[ "$(metric gpulse_bench_running)" = 1 ]' || fail "not running"
[ "$(code -X POST -H 'Authorization: Bearer write-tok' "$URL/api/v1/bench?gpu=0")" = 409 ] ||
	fail "a second run at once: $(cat "$WORK/body")"
rc=0
wait "$VP" || rc=$?
[ "$rc" = 0 ] || fail "via-daemon: status $rc: $(cat "$WORK/via.err")"
grep -Eq '^matmul +bf16 +700\.0 TFLOP/s' "$WORK/via.out" || fail "via-daemon table: $(cat "$WORK/via.out")"
grep -q "building (1 runs)" "$WORK/via.out" || fail "via-daemon verdicts: $(cat "$WORK/via.out")"

# --history: both kept runs per figure.
"$GPULSE" --url "$URL" bench --history >"$WORK/h.out" || fail "history"
grep -q "2 stored runs" "$WORK/h.out" || fail "history: $(cat "$WORK/h.out")"
[ "$(grep -c 'driver 580' "$WORK/h.out")" = 28 ] || fail "history points: $(cat "$WORK/h.out")"
"$GPULSE" --url "$URL" bench --history --json >"$WORK/h.json" || fail "history --json"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["data"]
assert len(d["runs"]) == 2, d["runs"]
' "$WORK/h.json" || fail "history json: $(cat "$WORK/h.json")"
# A gpulsed replaying a recording has no GPU to measure: 503, and no
# schedule.
URL_B=$URL
start_daemon r --replay "$REC"
[ "$(code -X POST "$URL/api/v1/bench?gpu=0")" = 503 ] && grep -q "replays a recording" "$WORK/body" ||
	fail "POST on a replay: $(cat "$WORK/body")"
! grep -q "bench: weekly" "$WORK/r.log" || fail "a replay scheduled benchmarks"
URL=$URL_B

# A local run (not through gpulsed) is judged against the history gpulsed
# keeps for the card: its two kept runs.
GPULSE_NVML_LIBRARY="$FAKE_NVML" GPULSE_FAKE_NVML_SPEED=0 GPULSE_FAKE_BENCH_REALTIME=0 \
	"$GPULSE" --url "$URL" bench --json --only matmul >"$WORK/local.json" || fail "local run"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
v = {(x["figure"], x["variant"]): x for x in r["verdicts"]}
own = v[("matmul", "bf16")]["own"]
assert own["points"] == 2 and own["regression"] is False and "median" not in own, own
' "$WORK/local.json" || fail "local verdicts: $(cat "$WORK/local.json")"
echo ok
