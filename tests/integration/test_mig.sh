# MIG through the fake NVML's MIG layout (GPULSE_FAKE_NVML_MIG=1: three
# instances, GI 1, 2 and 5, with memory shares that add up to the GPU's use
# and GPM activity 1, 0.5 and 0 of the GPU's): gpulsed exports each
# instance's identity, memory and GPM per instance, in /metrics and the
# JSON status, and a pod-resources allocation of a MIG UUID (the NVIDIA
# device plugin's nvidia.com/mig-* resources) lands on the parent GPU.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_SOURCE_DIR:?}"
# Debian's python3 (python3-grpcio); the stand-in kubelet runs outside
# libfaketime, whose shifted wall clock stalls gRPC's core.
PY=/usr/bin/python3

# A frozen row from inside the bf16 tensor phase, so GPM values are not 0.
python3 - "$REC" "$WORK/slice.csv" <<'PYEOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, body = rows[0], rows[1:]
t = head.index("t_s"); sm = head.index("sm_util")
pick = [x for x in body if 1795965320.0 <= float(x[t]) <= 1795965324.0 and x[sm] and float(x[sm]) > 10]
assert pick, "no busy rows in the bf16 phase"
w = csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n")
w.writerow(head); w.writerows(pick)
PYEOF

# tiny-0 holds GI 5, where process 1001 (a pod's, in tests/data/attrib) runs;
# mid-0 holds GI 2 and runs nothing.
MIG5=MIG-fa4e0000-0000-5000-8000-000000000005
MIG2=MIG-fa4e0000-0000-5000-8000-000000000002
cat >"$WORK/pods.json" <<JSON
[{"name": "tiny-0", "namespace": "ml", "containers": [
   {"name": "main", "devices": [{"resource_name": "nvidia.com/mig-1g.18gb", "device_ids": ["$MIG5"]}]}]},
 {"name": "mid-0", "namespace": "ml", "containers": [
   {"name": "main", "devices": [{"resource_name": "nvidia.com/mig-2g.35gb", "device_ids": ["$MIG2"]}]}]}]
JSON
env -u LD_PRELOAD $PY "$GPULSE_SOURCE_DIR/tests/integration/podres_server.py" "$WORK/kubelet.sock" "$WORK/pods.json" \
	"$WORK/podres.ready" 2>"$WORK/podres.log" &
PIDS+=("$!")
wait_for '[ -f "$WORK/podres.ready" ]' || fail "the pod-resources stand-in did not start"
cat >"$WORK/gpulse.yml" <<YML
attribution:
  proc_root: "$GPULSE_SOURCE_DIR/tests/data/attrib/proc"
  pod_resources_socket: "$WORK/kubelet.sock"
  pod_resources_refresh: 1s
YML

export GPULSE_FAKE_NVML_RECORDING="$WORK/slice.csv" GPULSE_FAKE_NVML_SPEED=0 GPULSE_FAKE_NVML_MIG=1
export GPULSE_FAKE_NVML_PROCESSES="1001:1024:30:0:5"
start_daemon mig --config "$WORK/gpulse.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_mig_sm_active_ratio gpu_instance=\"1\")" ]' || fail "no GPM per MIG instance"
wait_for '[ -n "$(metric gpulse_gpu_allocated_idle pod=\"mid-0\")" ]' || fail "no allocation of the MIG instances"
wait_for '[ -n "$(metric gpulse_process_gpu_memory_bytes pid=\"1001\" pod=\"tiny-0\")" ]' ||
	fail "process 1001 in GI 5 not named by its instance's pod: $(fetch /metrics | grep 'pid="1001"')"
M=$(fetch /metrics)

[ "$(grep -c '^gpulse_mig_info{gpu="0",' <<<"$M")" = 3 ] || fail "want 3 MIG instances: $(grep mig_info <<<"$M")"
grep -q '^gpulse_mig_info{[^}]*gpu_instance="5",compute_instance="0",profile="1g.18gb",mig_uuid="'"$MIG5"'"} 1$' <<<"$M" ||
	fail "GI 5's identity: $(grep mig_info <<<"$M")"

# Memory: the instances' shares add up to the GPU's use; each has its own total.
$PY - "$M" <<'PYEOF' || fail "MIG memory and GPM: $(grep -E '^gpulse_(mig|gpu_memory_used|gpu_sm_active)' <<<"$M")"
import re, sys
M = sys.argv[1]
def vals(name):
    out = {}
    for line in M.splitlines():
        if line.startswith(name + "{"):
            gi = re.search(r'gpu_instance="(\d+)"', line)
            out[gi.group(1) if gi else "gpu"] = float(line.rsplit(" ", 1)[1])
    return out
used, total = vals("gpulse_mig_memory_used_bytes"), vals("gpulse_mig_memory_total_bytes")
gpu_used = vals("gpulse_gpu_memory_used_bytes")["gpu"]
assert sorted(used) == ["1", "2", "5"], used
assert abs(sum(used.values()) - gpu_used) <= 3, (used, gpu_used)   # rounding per instance
assert total["1"] > total["2"] > total["5"] > 0, total
sm = vals("gpulse_mig_sm_active_ratio")
gpu_sm = vals("gpulse_gpu_sm_active_ratio")["gpu"]
assert gpu_sm > 0.1, gpu_sm
assert abs(sm["1"] - gpu_sm) < 1e-9 and abs(sm["2"] - gpu_sm / 2) < 1e-9 and sm["5"] == 0, (sm, gpu_sm)
for n in ("sm_occupancy", "tensor_active", "dram_active"):
    assert sorted(vals("gpulse_mig_%s_ratio" % n)) == ["1", "2", "5"], n
PYEOF

# The allocations of MIG UUIDs are on GPU 0: GI 5's busy, GI 2's idle.
grep -q '^gpulse_gpu_allocation_info{gpu="0",[^}]*pod="tiny-0",namespace="ml",container="main",resource="nvidia.com/mig-1g.18gb",device_id="'"$MIG5"'"} 1$' <<<"$M" ||
	fail "MIG allocation: $(grep allocation <<<"$M")"
[ "$(metric gpulse_gpu_allocated_idle pod=\"tiny-0\")" = 0 ] || fail "tiny-0 runs in GI 5"
[ "$(metric gpulse_gpu_allocated_idle pod=\"mid-0\")" = 1 ] || fail "mid-0 runs nothing"
# The process carries its instance.
grep -q '^gpulse_process_gpu_memory_bytes{gpu="0",[^}]*pid="1001",comm="python3",gpu_instance="5",pod="tiny-0",namespace="ml",container="main",' <<<"$M" ||
	fail "process in GI 5: $(grep 'pid="1001"' <<<"$M")"

promtool check metrics <<<"$M" >"$WORK/promtool.log" 2>&1 || fail "promtool: $(cat "$WORK/promtool.log")"

J=$(fetch /api/v1/gpus)
$PY - "$J" <<'PYEOF' || fail "status JSON: $J"
import json, sys
g = json.loads(sys.argv[1])["data"]["gpus"][0]
assert g["mig_mode"] == "enabled"
assert [m["gpu_instance"] for m in g["mig"]] == [1, 2, 5], g["mig"]
assert g["mig"][2]["uuid"].startswith("MIG-") and g["mig"][2]["profile"] == "1g.18gb"
al = {a["pod"]: a for a in g["allocations"]}
assert al["tiny-0"]["device_id"].startswith("MIG-") and al["tiny-0"]["idle"] is False
assert al["mid-0"]["idle"] is True
assert g["processes"][0]["gpu_instance"] == 5 and g["processes"][0]["owner"]["pod"] == "tiny-0"
PYEOF

S=$("$GPULSE" status --url "$URL" --no-color)
grep -E 'mig +GI 1 +CI 0 +3g\.71gb +mem ' <<<"$S" >/dev/null || fail "gpulse status, MIG: $S"
grep -E '^ +GI 5 +CI 0 +1g\.18gb .* SM 0%' <<<"$S" >/dev/null || fail "gpulse status, GI 5: $S"
grep -E 'ml/mid-0/main \(idle' <<<"$S" >/dev/null || fail "gpulse status, MIG allocation: $S"

# Without MIG mode, no MIG series and "mig": null.
kill -TERM "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null || true
GPULSE_FAKE_NVML_MIG=0 start_daemon nomig --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_gpu_sm_active_ratio gpu=\"0\")" ]' || fail "no GPM without MIG"
has /metrics '^gpulse_mig_' && fail "MIG series without MIG mode"
has /metrics 'gpu_instance=' && fail "a GPU instance without MIG mode"
fetch /api/v1/gpus | grep -q '"mig":null' || fail "mig not null without MIG mode"
echo "ok: mig"
