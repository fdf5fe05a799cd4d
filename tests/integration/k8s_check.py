"""Offline checks of deploy/kubernetes (test_kubernetes_manifests.sh).

usage: k8s_check.py SCHEMAS_DIR RENDERED.yaml [--base] [--config-out FILE]

Validates every document of a rendered kustomization against the
vendored schema for its kind (deploy/kubernetes/schemas), and with
--base checks that the DaemonSet, its ConfigMap's gpulse.yml, the
Service and the monitors agree with each other (paths under the right
mounts, ports and selectors); --config-out writes that gpulse.yml out for
gpulsed to check. Exit 1 with one line per problem.
"""
import json
import os
import sys

import jsonschema
import yaml

problems = []


def bad(msg):
    problems.append(msg)


def schema_for(schemas, doc):
    api = doc.get("apiVersion", "")
    group, _, version = api.rpartition("/")
    group = group.split(".")[0]
    name = doc.get("kind", "").lower() + ("-" + group if group else "") + "-" + version + ".json"
    path = os.path.join(schemas, name)
    if not os.path.exists(path):
        return None, name
    with open(path) as f:
        return json.load(f), name


def validate(schemas, docs):
    base_uri = "file://" + os.path.abspath(schemas) + "/"
    for doc in docs:
        schema, name = schema_for(schemas, doc)
        what = "%s/%s" % (doc.get("kind"), doc.get("metadata", {}).get("name"))
        if schema is None:
            bad("%s: no schema %s (a kind the manifests did not use before?)" % (what, name))
            continue
        resolver = jsonschema.RefResolver(base_uri, schema)
        v = jsonschema.Draft7Validator(schema, resolver=resolver)
        for e in sorted(v.iter_errors(doc), key=lambda e: list(e.path)):
            bad("%s: %s: %s" % (what, "/".join(str(p) for p in e.path) or "(top)", e.message))


def under(path, mount):
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def check_base(docs, config_out):
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    ds = by_kind.get("DaemonSet", [None])[0]
    if ds is None:
        bad("no DaemonSet")
        return
    pod = ds["spec"]["template"]["spec"]
    labels = ds["spec"]["template"]["metadata"].get("labels", {})
    c = pod["containers"][0]
    if not pod.get("hostPID"):
        bad("DaemonSet: hostPID is not true (attribution needs the host's PIDs)")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    if env.get("NVIDIA_VISIBLE_DEVICES") != "all":
        bad("DaemonSet: NVIDIA_VISIBLE_DEVICES is not all")
    caps = set((env.get("NVIDIA_DRIVER_CAPABILITIES") or "").split(","))
    if not {"utility", "compute"} <= caps:
        bad("DaemonSet: NVIDIA_DRIVER_CAPABILITIES lacks utility,compute")
    if any("nvidia.com/gpu" in (c.get("resources", {}).get(k) or {}) for k in ("limits", "requests")):
        bad("DaemonSet: requests a GPU (a monitor must not hold one)")
    sc = c.get("securityContext", {})
    if not sc.get("readOnlyRootFilesystem"):
        bad("DaemonSet: root filesystem is not read-only")
    if sc.get("allowPrivilegeEscalation") is not False or sc.get("privileged"):
        bad("DaemonSet: privilege escalation or privileged allowed")
    if "ALL" not in sc.get("capabilities", {}).get("drop", []):
        bad("DaemonSet: capabilities not dropped")
    lim = c.get("resources", {}).get("limits", {})
    if not lim.get("memory") or not lim.get("cpu"):
        bad("DaemonSet: no cpu and memory limits")
    for probe, path in (("livenessProbe", "/-/healthy"), ("readinessProbe", "/-/ready")):
        if c.get(probe, {}).get("httpGet", {}).get("path") != path:
            bad("DaemonSet: %s is not httpGet %s" % (probe, path))
    if pod.get("nodeSelector", {}).get("nvidia.com/gpu.present") != "true":
        bad("DaemonSet: not limited to GPU nodes (nvidia.com/gpu.present)")
    if not any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])):
        bad("DaemonSet: no toleration of the nvidia.com/gpu taint")

    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = []
    for m in c.get("volumeMounts", []):
        v = volumes.get(m["name"])
        if v is None:
            bad("DaemonSet: mount %s has no volume" % m["name"])
            continue
        mounts.append((m["mountPath"], bool(m.get("readOnly")), v))

    def mount_of(path):
        best = None
        for mp, ro, v in mounts:
            if under(path, mp) and (best is None or len(mp) > len(best[0])):
                best = (mp, ro, v)
        return best

    args = c.get("args", []) + c.get("command", [])
    cfg_path = next((a.split("=", 1)[1] for a in args if a.startswith("--config=")), None)
    if not cfg_path:
        bad("DaemonSet: no --config=FILE argument")
        return
    m = mount_of(cfg_path)
    if not m or "configMap" not in m[2]:
        bad("DaemonSet: --config %s is not on the ConfigMap's mount" % cfg_path)
        return
    cm_name = m[2]["configMap"]["name"]
    cm = next((d for d in by_kind.get("ConfigMap", []) if d["metadata"]["name"] == cm_name), None)
    key = os.path.relpath(cfg_path, m[0])
    if cm is None or key not in cm.get("data", {}):
        bad("DaemonSet: ConfigMap %s has no key %s" % (cm_name, key))
        return
    text = cm["data"][key]
    cfg = yaml.safe_load(text)
    if config_out:
        with open(config_out, "w") as f:
            f.write(text)

    def hostpath(path, host, what, socket=False):
        m = mount_of(path)
        if not m or "hostPath" not in m[2]:
            bad("%s %s is not on a hostPath mount" % (what, path))
            return
        mp, ro, v = m
        rel = os.path.relpath(path, mp)
        want = os.path.normpath(os.path.join(v["hostPath"]["path"], rel))
        if not under(want, host):
            bad("%s %s reads the host's %s, not %s" % (what, path, want, host))
        if not ro:
            bad("%s %s is mounted read-write" % (what, path))

    att = cfg.get("attribution", {})
    hostpath(att.get("proc_root", "/proc"), "/proc", "attribution.proc_root")
    hostpath(att.get("cgroup_root", "/sys/fs/cgroup"), "/sys/fs/cgroup", "attribution.cgroup_root")
    hostpath(att.get("pod_resources_socket", "/var/lib/kubelet/pod-resources/kubelet.sock"),
             "/var/lib/kubelet/pod-resources/kubelet.sock", "attribution.pod_resources_socket")
    for what, path in (("storage.path", cfg.get("storage", {}).get("path")),
                       ("profiling.socket", cfg.get("profiling", {}).get("socket", "/run/gpulse/inject.sock"))):
        if not path:
            bad("%s is not set" % what)
            continue
        m = mount_of(os.path.dirname(path))
        if not m or m[1] or ("emptyDir" not in m[2] and "hostPath" not in m[2]):
            bad("%s %s is not on a writable volume (the root is read-only)" % (what, path))
    port = int(str(cfg.get("listen", "")).rsplit(":", 1)[-1] or 0)
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    if port not in ports.values():
        bad("listen port %s is not a containerPort (%s)" % (port, ports))

    def selects(sel):
        return all(labels.get(k) == v for k, v in sel.items())

    for svc in by_kind.get("Service", []):
        if not selects(svc["spec"].get("selector", {})):
            bad("Service %s does not select the DaemonSet's pods" % svc["metadata"]["name"])
        for p in svc["spec"]["ports"]:
            tp = p.get("targetPort", p["port"])
            if (tp not in ports) if isinstance(tp, str) else (tp not in ports.values()):
                bad("Service port %s targets %s, not a container port" % (p.get("name"), tp))
    svc_ports = {p.get("name") for s in by_kind.get("Service", []) for p in s["spec"]["ports"]}
    for sm in by_kind.get("ServiceMonitor", []):
        svc_labels = [s["metadata"].get("labels", {}) for s in by_kind.get("Service", [])]
        if not any(all(l.get(k) == v for k, v in sm["spec"]["selector"].get("matchLabels", {}).items())
                   for l in svc_labels):
            bad("ServiceMonitor selects no Service")
        for e in sm["spec"]["endpoints"]:
            if e.get("port") not in svc_ports:
                bad("ServiceMonitor port %s is not a Service port" % e.get("port"))
    for pm in by_kind.get("PodMonitor", []):
        if not selects(pm["spec"]["selector"].get("matchLabels", {})):
            bad("PodMonitor does not select the DaemonSet's pods")
        for e in pm["spec"]["podMetricsEndpoints"]:
            if e.get("port") not in ports:
                bad("PodMonitor port %s is not a container port" % e.get("port"))


def main():
    schemas, rendered = sys.argv[1], sys.argv[2]
    base = "--base" in sys.argv
    config_out = sys.argv[sys.argv.index("--config-out") + 1] if "--config-out" in sys.argv else None
    with open(rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    if not docs:
        bad("nothing rendered")
    validate(schemas, docs)
    if base:
        check_base(docs, config_out)
    for p in problems:
        print("%s: %s" % (rendered, p))
    sys.exit(1 if problems else 0)


main()
