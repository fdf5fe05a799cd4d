# Attribution end to end: gpulsed on the fake NVML, whose GPUs serve the
# PIDs of the fake /proc in tests/data/attrib (cgroup v1 and v2, containerd,
# CRI-O, Docker, Slurm layouts), with a stand-in kubelet pod-resources
# server (real gRPC, python3-grpcio) that gives pod names and says which
# pod holds which GPU. Checks the labels of the per-process series, the
# info series, allocated-but-idle, `gpulse status` and the JSON status, a
# reload of attribution.labels, and a kubelet that goes away.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_SOURCE_DIR:?}"

PROC="$GPULSE_SOURCE_DIR/tests/data/attrib/proc"
# Debian's python3, where python3-grpcio is installed. The stand-in kubelet
# runs outside libfaketime (the shifted-clock stages): gRPC's core stalls
# under a shifted wall clock, and the kubelet is not what is tested.
PY=/usr/bin/python3
U0=$($PY -c 'import pwd; print(pwd.getpwuid(0).pw_name)')
U1000=$($PY -c 'import pwd
try: print(pwd.getpwuid(1000).pw_name)
except KeyError: print(1000)')
G0=GPU-fa4e0000-0000-4000-8000-000000000000
G1=GPU-fa4e0000-0000-4000-8000-000000000001

# trainer-0 (ml) holds GPU 0, where its process 1001 runs; notebook-3
# (research) holds GPU 1 and runs nothing there; web-a and web-b share
# GPU 0 by time-slicing (replica IDs) and run nothing either.
cat >"$WORK/pods.json" <<JSON
[{"name": "trainer-0", "namespace": "ml", "containers": [
   {"name": "main", "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": ["$G0"]}]},
   {"name": "sidecar", "devices": []}]},
 {"name": "notebook-3", "namespace": "research", "containers": [
   {"name": "jupyter", "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": ["$G1"]}]}]},
 {"name": "web-a", "namespace": "apps", "containers": [
   {"name": "srv", "devices": [{"resource_name": "nvidia.com/gpu.shared", "device_ids": ["$G0::0", "$G0::1"]}]}]}]
JSON
SOCK="$WORK/kubelet.sock"
env -u LD_PRELOAD $PY "$GPULSE_SOURCE_DIR/tests/integration/podres_server.py" "$SOCK" "$WORK/pods.json" \
	"$WORK/podres.ready" 2>"$WORK/podres.log" &
SERVER=$!
PIDS+=("$SERVER")
wait_for '[ -f "$WORK/podres.ready" ]' || fail "the pod-resources stand-in did not start"

cat >"$WORK/gpulse.yml" <<YML
attribution:
  labels: [container, pod, namespace, job, user]
  proc_root: "$PROC"
  cgroup_root: "$GPULSE_SOURCE_DIR/tests/data/attrib/cgroup"
  pod_resources_socket: "$SOCK"
  pod_resources_refresh: 1s
  pod_resources_timeout: 2s
YML
export GPULSE_FAKE_NVML_GPUS=2 GPULSE_FAKE_NVML_SPEED=0
export GPULSE_FAKE_NVML_PROCESSES="1001:2048:40:0,1002:1024:10:0,1003:512:5:0,1004:256:1:0,1006:4096:60:0,1007:128:0:0,1008:64:0:0"
start_daemon attrib --config "$WORK/gpulse.yml" --nvml-library "$FAKE_NVML"

wait_for '[ "$(metric gpulse_gpu_allocated_idle gpu=\"1\" pod=\"notebook-3\")" = 1 ]' ||
	fail "no allocated-but-idle sample for notebook-3 on GPU 1: $(fetch /metrics | grep -E 'alloc|pod_resources')"
wait_for '[ -n "$(metric gpulse_process_gpu_memory_bytes pid=\"1001\" pod=\"trainer-0\")" ]' ||
	fail "process 1001 not named trainer-0"
# A Slurm job's user comes from the process's environ, which a background
# thread reads after the process is first seen: the sample after that
# carries it.
wait_for '[ -n "$(fetch /metrics | grep -E "^gpulse_process_info\\{[^}]*pid=\"1006\"[^}]*job_user=\"alice\"")" ]' ||
	fail "the environ of 1006 was never read: $(fetch /metrics | grep 'pid="1006"')"
M=$(fetch /metrics)

# Labels: the configured set, only where known.
grep -E "^gpulse_process_gpu_memory_bytes\{gpu=\"0\",[^}]*pid=\"1001\",comm=\"python3\",pod=\"trainer-0\",namespace=\"ml\",container=\"main\",user=\"$U1000\"\} 2147483648$" <<<"$M" >/dev/null ||
	fail "labels of 1001: $(grep 'pid="1001"' <<<"$M")"
grep -E "^gpulse_process_gpu_memory_bytes\{[^}]*pid=\"1006\",[^}]*job=\"4711\",user=\"$U1000\"\}" <<<"$M" >/dev/null ||
	fail "labels of the Slurm process: $(grep 'pid="1006"' <<<"$M")"
grep -E '^gpulse_process_gpu_memory_bytes\{[^}]*pid="1004",' <<<"$M" | grep -q 'container_id=' &&
	fail "container_id is not a default label"
grep -E '^gpulse_process_gpu_memory_bytes\{[^}]*pid="1008",comm="[^"]*",user="'"$U0"'"\}' <<<"$M" >/dev/null ||
	fail "a host process carries only its user: $(grep 'pid="1008"' <<<"$M")"

# The info series: every field that is known.
info() { grep -E "^gpulse_process_info\{[^}]*pid=\"$1\"[,}]" <<<"$M"; }
info 1001 | grep -q 'runtime="containerd",container_id="201255379175636a9d8996b54b85f4d738e5b78e61870cf8cc630d505f274ad6",pod_uid="5f3c9a1e-2b7d-4e8f-9a0b-1c2d3e4f5a6b",pod="trainer-0",namespace="ml",container="main"' ||
	fail "info of 1001: $(info 1001)"
info 1001 | grep -q 'cgroup="/kubepods.slice/kubepods-burstable.slice/' || fail "cgroup of 1001: $(info 1001)"
info 1002 | grep -q 'container_id="36aa4512922faf45d9c2fb9066ff2dec72c627c2afe5dd1b6d06329f515e19ac",pod_uid="a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"' ||
	fail "info of 1002 (v1, cgroupfs driver): $(info 1002)"
info 1002 | grep -q 'pod="' && fail "1002's pod holds no GPU in pod-resources: no name to give"
info 1003 | grep -q 'runtime="cri-o"' || fail "info of 1003 (CRI-O): $(info 1003)"
info 1004 | grep -q 'runtime="docker",container_id="548f478bd3a1' || fail "info of 1004: $(info 1004)"
info 1006 | grep -q 'job="4711",job_user="alice"' || fail "info of 1006: $(info 1006)"
info 1007 | grep -q "job=\"4242\",job_user=\"$U1000\"" || fail "info of 1007 (v1 Slurm): $(info 1007)"

# Allocations and allocated-but-idle.
grep -q "^gpulse_gpu_allocation_info{gpu=\"1\",uuid=\"$G1\",[^}]*pod=\"notebook-3\",namespace=\"research\",container=\"jupyter\",resource=\"nvidia.com/gpu\",device_id=\"$G1\"} 1$" <<<"$M" ||
	fail "allocation of GPU 1: $(grep allocation_info <<<"$M")"
[ "$(metric gpulse_gpu_allocated_idle gpu=\"0\" pod=\"trainer-0\")" = 0 ] || fail "trainer-0 runs on GPU 0"
# web-a holds two replicas of GPU 0: one allocation sample each, one idle sample.
[ "$(grep -c '^gpulse_gpu_allocation_info{gpu="0",[^}]*pod="web-a"' <<<"$M")" = 2 ] || fail "web-a's replicas"
[ "$(grep -c '^gpulse_gpu_allocated_idle{gpu="0",[^}]*pod="web-a"' <<<"$M")" = 1 ] || fail "web-a idle once"
[ "$(metric gpulse_pod_resources_up)" = 1 ] || fail "pod-resources not up"
# Slurm (cgroup v1 device rules of tests/data/attrib/cgroup): job 4242 holds
# GPU 0, where its process 1007 runs; job 5000 holds GPU 1 and runs nothing.
U1001=$($PY -c 'import pwd
try: print(pwd.getpwuid(1001).pw_name)
except KeyError: print(1001)')
grep -q "^gpulse_gpu_allocation_info{gpu=\"1\",[^}]*job=\"5000\",job_user=\"$U1001\",resource=\"slurm\"} 1$" <<<"$M" ||
	fail "Slurm allocation: $(grep allocation_info <<<"$M")"
[ "$(metric gpulse_gpu_allocated_idle gpu=\"1\" job=\"5000\")" = 1 ] || fail "job 5000 runs nothing on GPU 1"
[ "$(metric gpulse_gpu_allocated_idle gpu=\"0\" job=\"4242\")" = 0 ] || fail "job 4242 runs on GPU 0"
grep -q 'job="6000"' <<<"$M" && fail "job 6000 may use every device: no GPU in particular"
[ "$(metric gpulse_slurm_jobs_with_gpus)" = 2 ] || fail "Slurm jobs with GPUs"
[ "$(metric gpulse_attribution_processes_resolved_total)" -ge 7 ] || fail "resolved count"

# The exposition stays valid.
promtool check metrics <<<"$M" 2>&1 | grep -vE 'counter metrics should have "_total" suffix|no help text' |
	grep -E 'error|invalid' && fail "promtool check metrics"

# The JSON status and `gpulse status`.
J=$(fetch /api/v1/gpus)
$PY - "$J" <<'PYEOF' || fail "status JSON: $J"
import json, sys
d = json.loads(sys.argv[1])["data"]
assert d["attribution"]["pod_resources"]["available"] is True
g0 = [g for g in d["gpus"] if g["gpu"] == 0][0]
g1 = [g for g in d["gpus"] if g["gpu"] == 1][0]
p = {x["pid"]: x for x in g0["processes"]}
assert p[1001]["owner"]["pod"] == "trainer-0" and p[1001]["owner"]["summary"] == "ml/trainer-0/main"
assert p[1006]["owner"]["job"] == "4711"
assert p[1004]["owner"]["runtime"] == "docker"
pods1 = [a for a in g1["allocations"] if a["pod"]]
assert [a["pod"] for a in pods1] == ["notebook-3"] and pods1[0]["idle"] is True
assert [(a["job"], a["idle"]) for a in g1["allocations"] if a["job"]] == [("5000", True)]
assert [(a["job"], a["idle"]) for a in g0["allocations"] if a["job"]] == [("4242", False)]
assert any(a["pod"] == "trainer-0" and a["idle"] is False for a in g0["allocations"])
PYEOF
S=$("$GPULSE" status --url "$URL" --no-color)
grep -E '^ *1001 .*ml/trainer-0/main \('"$U1000"'\)$' <<<"$S" >/dev/null || fail "gpulse status, 1001: $S"
grep -E '^ *1006 .*job 4711 alice' <<<"$S" >/dev/null || fail "gpulse status, 1006: $S"
grep -E 'allocated +research/notebook-3/jupyter \(idle' <<<"$S" >/dev/null || fail "gpulse status, idle allocation: $S"
grep -E 'ml/trainer-0/main$' <<<"$S" >/dev/null || fail "gpulse status, busy allocation: $S"
grep -E 'Slurm job 5000 \('"$U1001"'\) \(idle' <<<"$S" >/dev/null || fail "gpulse status, Slurm: $S"

# A reload changes the labels.
sed -i 's/labels: \[container, pod, namespace, job, user\]/labels: [runtime]/' "$WORK/gpulse.yml"
kill -HUP "$DAEMON_PID"
wait_for 'has /metrics "^gpulse_process_gpu_memory_bytes\\{[^}]*pid=\"1004\",comm=\"[^\"]*\",runtime=\"docker\"\\} "' ||
	fail "labels after reload: $(fetch /metrics | grep 'pid="1004"')"
has /metrics '^gpulse_process_gpu_memory_bytes\{[^}]*pod="trainer-0"' && fail "pod label after reload"

# The kubelet goes away: counted, the last table kept.
kill -TERM "$SERVER"
wait "$SERVER" 2>/dev/null || true
wait_for '[ "$(metric gpulse_pod_resources_up)" = 0 ]' || fail "pod-resources still up"
[ "$(metric gpulse_pod_resources_refreshes_total 'result="failure"')" -ge 1 ] || fail "failure not counted"
[ "$(metric gpulse_gpu_allocated_idle gpu=\"1\" pod=\"notebook-3\")" = 1 ] || fail "table not kept"
echo "ok: attribution"
