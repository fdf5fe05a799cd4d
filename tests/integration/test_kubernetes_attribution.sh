# The DaemonSet's environment yields correct pod attribution: the base
# kustomization is rendered (`kubectl kustomize`, offline), and gpulsed
# runs with its ConfigMap's gpulse.yml on a stand-in node whose host paths
# (/proc, /sys/fs/cgroup, /var/lib/kubelet/pod-resources) hold the fake
# /proc and cgroup trees of tests/data/attrib and a stand-in kubelet
# (real gRPC). Every path in the config is resolved the way the container
# sees it: through the DaemonSet's own volumeMounts to the hostPath
# volumes behind them, so a mount that moves without the config (or a
# config key that points off its mount) leaves the process unnamed and
# fails here. Checks that a pod's process carries its pod, namespace and
# container, and that a GPU its pod holds without running anything is
# allocated-but-idle.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_SOURCE_DIR:?}"
K="$GPULSE_SOURCE_DIR/deploy/kubernetes"
command -v kubectl >/dev/null || fail "kubectl is missing (scripts/install-deps.sh)"
# Debian's python3 (python3-grpcio, python3-yaml), outside libfaketime as
# in test_attribution: gRPC's core stalls under a shifted wall clock.
PY=/usr/bin/python3

kubectl kustomize "$K/base" >"$WORK/base.yaml" 2>"$WORK/kustomize.err" ||
	fail "kubectl kustomize: $(cat "$WORK/kustomize.err")"

# The stand-in node: each hostPath volume of the DaemonSet is a folder
# under $NODE; the container's view maps each mountPath to it.
NODE="$WORK/node"
mkdir -p "$NODE/proc" "$NODE/sys/fs" "$NODE/var/lib/kubelet/pod-resources"
cp -r "$GPULSE_SOURCE_DIR/tests/data/attrib/proc/." "$NODE/proc/"
cp -r "$GPULSE_SOURCE_DIR/tests/data/attrib/cgroup" "$NODE/sys/fs/cgroup"
env -u LD_PRELOAD $PY - "$WORK/base.yaml" "$NODE" "$WORK/gpulse.yml" "$WORK" \
	"$GPULSE_SOURCE_DIR" >"$WORK/map.txt" 2>&1 <<'PY' || fail "mapping the DaemonSet: $(tail -n 3 "$WORK/map.txt")"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
node, out, work, src = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
cm = next(d for d in docs if d["kind"] == "ConfigMap")
pod = ds["spec"]["template"]["spec"]
assert pod.get("hostPID") is True, "the DaemonSet must share the host's PID namespace"
vols = {v["name"]: v for v in pod["volumes"]}
c = next(c for c in pod["containers"] if c["name"] == "gpulsed")
host_mounts = {}
for m in c["volumeMounts"]:
    v = vols[m["name"]]
    if "hostPath" in v:
        host_mounts[m["mountPath"].rstrip("/")] = v["hostPath"]["path"].rstrip("/")

def host_side(path):
    """The stand-in node's file for what the container sees at `path`."""
    best = max((mp for mp in host_mounts if path == mp or path.startswith(mp + "/")),
               key=len, default=None)
    if best is None:
        sys.exit("%s is on no hostPath mount of the DaemonSet" % path)
    return node + host_mounts[best] + path[len(best):]

cfg = yaml.safe_load(cm["data"]["gpulse.yml"])
a = cfg["attribution"]
for k in ("proc_root", "cgroup_root", "pod_resources_socket"):
    a[k] = host_side(a[k])
# The parts the node does not stand in for: this tree's rule pack, the
# store and the profiling socket in the test's folder, a loopback port.
cfg["rule_files"] = [r.replace("/usr/share/gpulse/rules/", src + "/deploy/rules/")
                     for r in cfg.get("rule_files", [])]
cfg.setdefault("storage", {})["path"] = work + "/store.db"
cfg.setdefault("profiling", {})["socket"] = work + "/inject.sock"
cfg.pop("listen", None)
a["pod_resources_refresh"] = "1s"
yaml.safe_dump(cfg, open(out, "w"))
print(a["pod_resources_socket"])
PY
SOCK=$(tail -n 1 "$WORK/map.txt")
[ "$SOCK" = "$NODE/var/lib/kubelet/pod-resources/kubelet.sock" ] ||
	fail "the kubelet's socket resolves to $SOCK, not the node's pod-resources folder"

G0=GPU-fa4e0000-0000-4000-8000-000000000000
G1=GPU-fa4e0000-0000-4000-8000-000000000001
cat >"$WORK/pods.json" <<JSON
[{"name": "trainer-0", "namespace": "ml", "containers": [
   {"name": "main", "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": ["$G0"]}]}]},
 {"name": "notebook-3", "namespace": "research", "containers": [
   {"name": "jupyter", "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": ["$G1"]}]}]}]
JSON
env -u LD_PRELOAD $PY "$GPULSE_SOURCE_DIR/tests/integration/podres_server.py" "$SOCK" "$WORK/pods.json" \
	"$WORK/podres.ready" 2>"$WORK/podres.log" &
PIDS+=("$!")
wait_for '[ -f "$WORK/podres.ready" ]' || fail "the pod-resources stand-in did not start"

# Process 1001 of the fake /proc is trainer-0's container (cgroup v2,
# containerd, systemd driver); 1008 is a host process.
export GPULSE_FAKE_NVML_GPUS=2 GPULSE_FAKE_NVML_SPEED=0
export GPULSE_FAKE_NVML_PROCESSES="1001:2048:40:0,1008:64:0:0"
start_daemon k8sattr --config "$WORK/gpulse.yml" --nvml-library "$FAKE_NVML"
"$GPULSED" --config "$WORK/gpulse.yml" --print-config >/dev/null 2>"$WORK/print.err" ||
	fail "gpulsed refuses the ConfigMap's gpulse.yml: $(cat "$WORK/print.err")"

wait_for '[ -n "$(metric gpulse_process_gpu_memory_bytes pid=\"1001\" pod=\"trainer-0\")" ]' ||
	fail "process 1001 not named trainer-0 under the DaemonSet's paths: $(fetch /metrics | grep -E 'pid="1001"|pod_resources|attribution')"
M=$(fetch /metrics)
grep -E '^gpulse_process_gpu_memory_bytes\{gpu="0",[^}]*pid="1001",[^}]*pod="trainer-0",namespace="ml",container="main"' \
	<<<"$M" >/dev/null || fail "labels of 1001: $(grep 'pid="1001"' <<<"$M")"
grep -E '^gpulse_process_gpu_memory_bytes\{[^}]*pid="1008",' <<<"$M" | grep -q 'pod=' &&
	fail "a host process got a pod: $(grep 'pid="1008"' <<<"$M")"
wait_for '[ "$(metric gpulse_gpu_allocated_idle gpu=\"1\" pod=\"notebook-3\")" = 1 ]' ||
	fail "notebook-3 holds GPU 1 and runs nothing there: $(fetch /metrics | grep -E 'allocat')"
[ "$(metric gpulse_gpu_allocated_idle gpu=\"0\" pod=\"trainer-0\")" = 0 ] || fail "trainer-0 runs on GPU 0"

# The check can fail: with the cgroup mount moved and the config left as
# it is, the config's cgroup_root is on no mount.
sed 's|mountPath: /host/sys/fs/cgroup$|mountPath: /host/cgroup|' "$WORK/base.yaml" >"$WORK/moved.yaml"
! env -u LD_PRELOAD $PY - "$WORK/moved.yaml" <<'PY' >/dev/null 2>&1 || fail "a moved mount still resolved"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
cm = next(d for d in docs if d["kind"] == "ConfigMap")
c = ds["spec"]["template"]["spec"]["containers"][0]
mounts = [m["mountPath"] for m in c["volumeMounts"]]
root = yaml.safe_load(cm["data"]["gpulse.yml"])["attribution"]["cgroup_root"]
sys.exit(0 if any(root == m or root.startswith(m + "/") for m in mounts) else 1)
PY
echo "ok: pod attribution under the DaemonSet's mounts"
