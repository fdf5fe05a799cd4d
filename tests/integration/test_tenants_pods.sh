# Issue 36, per pod: the activity split rolled up by pod, each pod's class
# held against the GPU's, and allocated-but-idle judged from the split
# (not from the allocation alone). gpulsed on the fake NVML with a fake
# /proc (two processes in two pods, copied from tests/data/attrib) and the
# stand-in kubelet pod-resources server:
#  - GPU 0 is time-sliced between trainer-0 (its process busy 60% with
#    tensor-heavy work) and idle-0 (its process holds 1 GiB and runs
#    nothing); GPU 1 is allocated to notebook-3, which runs nothing there;
#  - idle-0 and notebook-3 are flagged allocated-but-idle once
#    attribution.idle_window has passed, trainer-0 never; idle-0 is not
#    idle by the allocation-only series (a process of its is there);
#  - /api/v1/gpus holders, workload classes and their share of what
#    bounds the GPU; gpulse status; gpulse top's per-owner view (tmux):
#    the idle pods marked IDLE with the API's time, the busy one not;
#    gpulse diagnose's per-owner line; the capacity report's time
#    allocated but idle per pod, against the stored series;
#  - a pod whose allocation goes away leaves the idle series (staleness).
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_SOURCE_DIR:?}"
PY=/usr/bin/python3   # with python3-grpcio (see test_attribution.sh)
G0=GPU-fa4e0000-0000-4000-8000-000000000000
G1=GPU-fa4e0000-0000-4000-8000-000000000001

# The fake /proc: 1001 as in the fixtures (trainer-0), 2001 its copy in
# another pod (idle-0: its own pod UID, container ID and HOSTNAME).
SRC="$GPULSE_SOURCE_DIR/tests/data/attrib/proc/1001"
mkdir -p "$WORK/proc/1001" "$WORK/proc/2001"
cp "$SRC"/* "$WORK/proc/1001/"
sed 's/5f3c9a1e_2b7d_4e8f_9a0b_1c2d3e4f5a6b/7a1b2c3d_0000_4000_8000_00000000beef/; s/cri-containerd-2012/cri-containerd-2013/' \
	"$SRC/cgroup" >"$WORK/proc/2001/cgroup"
tr '\0' '\n' <"$SRC/environ" | sed 's/^HOSTNAME=.*/HOSTNAME=idle-0/' | tr '\n' '\0' >"$WORK/proc/2001/environ"
sed 's/^1001 /2001 /' "$SRC/stat" >"$WORK/proc/2001/stat"
cp "$SRC/comm" "$SRC/status" "$WORK/proc/2001/"

write_pods() { # with notebook-3 or not
	{
		echo '[{"name": "trainer-0", "namespace": "ml", "containers": [{"name": "main", "devices": [{"resource_name": "nvidia.com/gpu.shared", "device_ids": ["'"$G0"'::0"]}]}]},'
		echo ' {"name": "idle-0", "namespace": "ml", "containers": [{"name": "main", "devices": [{"resource_name": "nvidia.com/gpu.shared", "device_ids": ["'"$G0"'::1"]}]}]}'
		[ "$1" = yes ] &&
			echo ',{"name": "notebook-3", "namespace": "research", "containers": [{"name": "jupyter", "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": ["'"$G1"'"]}]}]}'
		echo ']'
	} >"$WORK/pods.json.new"
	mv "$WORK/pods.json.new" "$WORK/pods.json"
}
write_pods yes
SOCK="$WORK/kubelet.sock"
env -u LD_PRELOAD $PY "$GPULSE_SOURCE_DIR/tests/integration/podres_server.py" "$SOCK" "$WORK/pods.json" \
	"$WORK/podres.ready" 2>"$WORK/podres.log" &
PIDS+=("$!")
wait_for '[ -f "$WORK/podres.ready" ]' || fail "the pod-resources stand-in did not start"

# GPU 0: busy 60%, SM active 57%, tensor 40%, DRAM 10% (all trainer-0's);
# GPU 1: nothing runs.
python3 - "$WORK/rec.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("t_s,gpu,gpu_util,mem_util,mem_used_mib,mem_total_mib,power_w,"
            "sm_util,tensor_util,dram_bw_util\n")
    for i in range(100):
        f.write(f"{i / 10:.1f},0,60,10,4096,81559,400,57,40,10\n")
        f.write(f"{i / 10:.1f},1,0,0,600,81559,70,0,0,0\n")
PY
export GPULSE_FAKE_NVML_RECORDING="$WORK/rec.csv" GPULSE_FAKE_NVML_SPEED=1
export GPULSE_FAKE_NVML_PROCESSES="1001:2048:60:0:-:5,2001:1024:0:0:-:0"
cat >"$WORK/g.yml" <<YML
attribution:
  labels: [pod, namespace]
  proc_root: "$WORK/proc"
  cgroup_root: ""
  pod_resources_socket: "$SOCK"
  pod_resources_refresh: 1s
  idle_sm_ratio: 0.01
  idle_window: 3s
diagnosis:
  window: 2s
storage:
  path: "$WORK/store.db"
  flush_interval: 1s
YML
start_daemon pods --config "$WORK/g.yml" --nvml-library "$FAKE_NVML"

idle() { metric gpulse_workload_allocated_idle gpu=\"$1\" pod=\"$2\"; }
wait_for '[ "$(idle 0 idle-0)" = 1 ] && [ "$(idle 1 notebook-3)" = 1 ]' ||
	wait_for '[ "$(idle 0 idle-0)" = 1 ] && [ "$(idle 1 notebook-3)" = 1 ]' ||
	fail "idle-0 and notebook-3 not flagged: $(fetch /metrics | grep -E '^gpulse_(workload|gpu_allocated)')"
M=$(fetch /metrics)
[ "$(idle 0 trainer-0)" = 0 ] || fail "trainer-0 works: $(grep allocated_idle <<<"$M")"
grep -qE '^gpulse_workload_allocated_idle\{gpu="0",[^}]*,pod="idle-0",namespace="ml"\} 1$' <<<"$M" ||
	fail "labels of the idle series: $(grep allocated_idle <<<"$M")"
# Not from the allocation alone: by it, idle-0 is busy (its process is there).
[ "$(metric gpulse_gpu_allocated_idle gpu=\"0\" pod=\"idle-0\")" = 0 ] ||
	fail "allocation-only idle of idle-0: $(grep allocated_idle <<<"$M")"
python3 - "$(metric gpulse_workload_idle_for_seconds gpu=\"0\" pod=\"idle-0\")" \
	"$(metric gpulse_workload_idle_for_seconds gpu=\"0\" pod=\"trainer-0\")" <<'PY' || fail "idle_for_seconds: $(grep idle_for <<<"$M")"
import sys
a, b = map(float, sys.argv[1:])
assert a >= 3 and b == 0, (a, b)
PY
# The per-pod split: trainer-0 has all of GPU 0's activity.
python3 - <<PY || fail "per-pod parts: $(grep -E '^gpulse_workload_(sm|tensor)' <<<"$M")"
import re
m = """$M"""
def v(name, pod):
    x = re.search(r'^%s\{gpu="0",[^}]*pod="%s"[^}]*\} (\S+)$' % (name, pod), m, re.M)
    return float(x.group(1)) if x else None
assert abs(v("gpulse_workload_sm_active_ratio", "trainer-0") - 0.57) < 1e-3
assert abs(v("gpulse_workload_tensor_active_ratio", "trainer-0") - 0.40) < 1e-3
assert v("gpulse_workload_sm_active_ratio", "idle-0") < 1e-3
PY

# The API: holders with their verdicts; each pod's class beside the GPU's.
api_ok() {
	fetch /api/v1/gpus >"$WORK/gpus.json" && python3 - "$WORK/gpus.json" 2>"$WORK/api.err" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["data"]
g0, g1 = [[x for x in d["gpus"] if x["gpu"] == i][0] for i in (0, 1)]
h = {x["pod"]: x for x in g0["holders"]}
assert h["idle-0"]["idle"] is True and h["idle-0"]["allocated"] and h["idle-0"]["processes"] == 1, h
assert h["trainer-0"]["idle"] is False and h["trainer-0"]["sm_active"] > 0.5, h
h1 = {x["pod"]: x for x in g1["holders"]}
assert h1["notebook-3"]["idle"] is True and h1["notebook-3"]["processes"] == 0, h1
w = {x["owner"].get("pod"): x for x in g0["workloads"]}
assert (w["trainer-0"]["bound"], w["trainer-0"]["bound_detail"]) == ("compute_bound", "tensor cores"), w
assert w["idle-0"]["bound"] == "idle", w
assert g0["device_bound"] not in (None, "idle"), g0["device_bound"]
assert w["trainer-0"]["bottleneck_share"] > 0.99 and w["idle-0"]["bottleneck_share"] < 0.01, w
PY
}
until_ok() { local end=$((SECONDS + $1)); shift; while [ $SECONDS -lt $end ]; do "$@" && return 0; sleep 0.5; done; return 1; }
until_ok 30 api_ok || fail "API: $(cat "$WORK/api.err")"
S=$("$GPULSE" status --url "$URL" --no-color) || fail "gpulse status"
grep -E "ml/idle-0 +allocated +1 proc .*\(allocated but idle\)" <<<"$S" >/dev/null ||
	fail "gpulse status: idle-0 not flagged: $S"
grep -E "ml/trainer-0 .*allocated but idle" <<<"$S" && fail "gpulse status flags trainer-0: $S"
grep -E "research/notebook-3 +allocated +0 proc .*\(allocated but idle\)" <<<"$S" >/dev/null ||
	fail "gpulse status: notebook-3 not flagged: $S"
grep -E "trainer-0\S* .*compute_bound on tensor cores, 1 process; GPU [a-z_]+, 100% of its [a-z]+ activity" <<<"$S" >/dev/null ||
	fail "gpulse status: trainer-0 against the device: $S"

# gpulse top (in tmux, as test_top.sh drives it), per-owner view: idle-0
# and notebook-3 (a row of its own: nothing of it runs) marked IDLE with
# how long, trainer-0 not; the time shown is the API's (holders'
# idle_for_s, read before and after), not made up.
command -v tmux >/dev/null || fail "tmux is not installed (scripts/install-deps.sh)"
TM=(tmux -S "$WORK/tmux.sock" -f /dev/null)  # its socket removed with $WORK
trap 'rc=$?; "${TM[@]}" kill-server 2>/dev/null || true; set +e; (exit $rc); cleanup' EXIT
"${TM[@]}" new-session -d -s top -x 120 -y 30 env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen \
	sh -c '"$0" top --url "$1"; echo "exit $?" >"$2"' "$GPULSE" "$URL" "$WORK/top.exit" \; \
	set-option -t top remain-on-exit on
pane() { "${TM[@]}" capture-pane -p -t top; }
wait_for 'pane | grep -q "^GPU 0 "' || fail "gpulse top shows no GPU: $(pane; cat "$WORK/top.exit" 2>/dev/null)"
"${TM[@]}" send-keys -t top o
wait_for 'pane | grep -qE "^GPU OWNER +IDLE +PROCS"' || fail "no per-owner view: $(pane)"
held_for() { # POD: the API's idle_for_s of the pod, on whichever GPU it holds
	fetch /api/v1/gpus | python3 -c 'import json, sys
print(min(h["idle_for_s"] for g in json.load(sys.stdin)["data"]["gpus"] for h in g["holders"] if h["pod"] == sys.argv[1]))' "$1"
}
top_ok() {
	local a b
	a=$(held_for idle-0) && pane >"$WORK/top.txt" && b=$(held_for idle-0) || return 1
	python3 - "$WORK/top.txt" "$a" "$b" 2>"$WORK/top.err" <<'PY'
import re, sys
screen, a, b = open(sys.argv[1]).read(), float(sys.argv[2]), float(sys.argv[3])
def row(gpu, owner):
    m = [l for l in screen.splitlines() if re.match(r" *%d %s\S* " % (gpu, re.escape(owner)), l)]
    assert len(m) == 1, (gpu, owner, m)
    return m[0]
def secs(t):  # top's ages: 12s, 3m05s, 1h02m
    h, m, s = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", t).groups()
    return int(h or 0) * 3600 + int(m or 0) * 60 + int(s or 0)
idle = re.search(r" IDLE (\S+) ", row(0, "ml/idle-0"))
assert idle, row(0, "ml/idle-0")
# At least the idle window (3s), and what the API said: top refreshes
# once a second, so its figure may be up to a period older than a.
assert 3 <= secs(idle.group(1)) and a - 2 <= secs(idle.group(1)) <= b, (idle.group(1), a, b)
assert "IDLE" not in row(0, "ml/trainer-0"), row(0, "ml/trainer-0")
nb = row(1, "research/notebook-3")
assert re.search(r" IDLE \d+[hms]\S* +0 +- ", nb), nb  # no process, no busy figure
PY
}
until_ok 30 top_ok || fail "gpulse top's per-owner view: $(cat "$WORK/top.err"; cat "$WORK/top.txt")"
"${TM[@]}" send-keys -t top q
wait_for '[ -s "$WORK/top.exit" ]' || fail "gpulse top did not quit: $(pane)"
[ "$(cat "$WORK/top.exit")" = "exit 0" ] || fail "gpulse top: $(cat "$WORK/top.exit")"

# gpulse diagnose: per owner, against the window's class.
diag_ok() {
	"$GPULSE" diagnose --url "$URL" --gpu 0 >"$WORK/diag.txt" 2>&1 &&
		grep -E "^ +by owner \(GPU [a-z_]+\):.*trainer-0\S*: compute_bound on tensor cores, 100% of" "$WORK/diag.txt" |
			grep -qE "idle-0\S*: idle"
}
until_ok 30 diag_ok || fail "gpulse diagnose: $(cat "$WORK/diag.txt")"

# The capacity report: per pod, the time it held its GPU and, of it, the
# time allocated but idle, from the stored gpulse_workload_allocated_idle
# (this test's own count over the raw samples, per 1 s slot: held where
# a sample is, idle where the slot's mean is 0.5 or more); the text's
# PODS table says the same.
SPAN=6
stored() { fetch "/api/v1/query?query=count_over_time(gpulse_workload_allocated_idle%7Bpod%3D%22notebook-3%22%7D%5B${SPAN}s%5D)" |
	python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)'; }
# notebook-3 judged idle over the whole span (its verdict came at 3 s
# under the line), and stored.
wait_for 'python3 -c "import sys; sys.exit(float(sys.argv[1]) < 3 + $SPAN + 2)" "$(held_for notebook-3)"' ||
	fail "notebook-3 not idle for long: $(held_for notebook-3)"
wait_for '[ "$(stored)" -ge "$SPAN" ]' || fail "the idle verdicts are not stored: $(stored)"
T=$(($(date +%s) - 1))
"$GPULSE" report capacity --url "$URL" --until "$T" --since "${SPAN}s" --step 1s --format json \
	>"$WORK/report.json" || fail "gpulse report capacity"
fetch "/api/v1/query?query=gpulse_workload_allocated_idle%5B$((SPAN + 1))s%5D&time=$T" >"$WORK/raw.json"
python3 - "$WORK/report.json" "$WORK/raw.json" "$T" "$SPAN" <<'PY' || fail "report's pods: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pods"])' "$WORK/report.json")"
import json, math, sys
rep, raw = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["data"]["result"]
T, span = int(sys.argv[3]), int(sys.argv[4])
want = {}
for s in raw:
    b = {}
    for t, v in s["values"]:
        if T - span <= float(t) < T:
            b.setdefault(int(math.floor(float(t) - (T - span))), []).append(float(v))
    m = s["metric"]
    want[(m["gpu"], m["pod"])] = (len(b), sum(1 for v in b.values() if sum(v) / len(v) >= 0.5))
got = {(p["gpu"], p["pod"]): (round(p["held_h"] * 3600), round(p["allocated_idle_h"] * 3600))
       for p in rep["pods"]}
assert got == want, (got, want)
# (A scrape late under load may leave a slot empty: counted alike.)
nb, tr = got[("1", "notebook-3")], got[("0", "trainer-0")]
assert got[("0", "idle-0")][1] > 0 and nb[1] == nb[0] >= span - 2, got
assert tr[0] >= span - 2 and tr[1] == 0, got
PY
"$GPULSE" report capacity --url "$URL" --until "$T" --since "${SPAN}s" --step 1s >"$WORK/report.txt" ||
	fail "gpulse report capacity (text)"
sed -n '/^PODS/,/^$/p' "$WORK/report.txt" | grep -qE "^  research/notebook-3 +1 +([0-9]+)s +\1s +100%$" ||
	fail "report text: notebook-3: $(cat "$WORK/report.txt")"
sed -n '/^PODS/,/^$/p' "$WORK/report.txt" | grep -qE "^  ml/trainer-0 +0 +[1-9][0-9]*s +0s +0%$" ||
	fail "report text: trainer-0: $(cat "$WORK/report.txt")"

# notebook-3's allocation goes: its judgement is no longer current.
write_pods no
wait_for '[ -z "$(idle 1 notebook-3)" ]' || wait_for '[ -z "$(idle 1 notebook-3)" ]' ||
	fail "notebook-3 still judged after its allocation went"
[ "$(idle 0 idle-0)" = 1 ] || fail "idle-0 lost its verdict"
[ "$(metric gpulse_workload_holders_dropped_total)" = 0 ] || fail "holders dropped under the bound"
if command -v promtool >/dev/null; then
	fetch /metrics | promtool check metrics 2>&1 | grep -E 'gpulse_workload_' &&
		fail "promtool objects to the workload families"
fi
# The dashboard's card shows the same (Debian's chromium, as the web
# page tests use, rendering the page once).
command -v chromium >/dev/null || fail "chromium is not installed"
timeout 90 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=8000 \
	--user-data-dir="$WORK/chromium" --dump-dom "$URL/" >"$WORK/dom.html" 2>"$WORK/chromium.log" ||
	fail "chromium could not render the dashboard: $(tail -n 5 "$WORK/chromium.log")"
python3 - "$WORK/dom.html" <<'PY' || fail "dashboard: no per-pod tables: $(grep -o 'id="tenants".\{0,400\}' "$WORK/dom.html")"
import re, sys
dom = open(sys.argv[1]).read()
def rows(table):
    m = re.search(r'<table id="%s">(.*?)</table>' % table, dom, re.S)
    assert m, f"no table {table}"
    return [[re.sub(r'<[^>]+>', '', c) for c in re.findall(r'<td[^>]*>(.*?)</td>', r, re.S)]
            for r in re.findall(r'<tr>(.*?)</tr>', m.group(1), re.S) if '<td' in r]
h = {r[0]: r for r in rows("split-holders")}
assert h["ml/idle-0"][-1] == "allocated but idle" and h["ml/trainer-0"][-1] == "working", h
o = {r[0]: r for r in rows("split-owners")}
assert o["ml/trainer-0/main"][7] == "compute_bound (tensor cores)" and o["ml/idle-0/main"][7] == "idle", o
assert len(rows("split-procs")) == 2
PY
echo PASS
