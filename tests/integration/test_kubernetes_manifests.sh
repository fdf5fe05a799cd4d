# deploy/kubernetes: each kustomization (the base and every overlay)
# renders with `kubectl kustomize`, offline, and every document passes the
# vendored strict schema of its kind (deploy/kubernetes/schemas, checked
# with python3-jsonschema); a misspelt field is caught (the check can
# fail); the base's DaemonSet, ConfigMap, Service and monitors agree (the
# config's paths sit on the right mounts, ports and selectors match:
# tests/integration/k8s_check.py); gpulsed accepts the ConfigMap's
# gpulse.yml and answers the probes' paths with 200.
source "$(dirname "$0")/lib.sh"
K="$GPULSE_SOURCE_DIR/deploy/kubernetes"
CHECK="$GPULSE_SOURCE_DIR/tests/integration/k8s_check.py"
command -v kubectl >/dev/null || fail "kubectl is missing (scripts/install-deps.sh)"
python3 -c 'import jsonschema, yaml' || fail "python3-jsonschema or python3-yaml is missing"

n=0
for dir in "$K"/base "$K"/overlays/*/; do
	dir=${dir%/}
	name=${dir#"$K"/}
	out="$WORK/${name//\//_}.yaml"
	kubectl kustomize "$dir" >"$out" 2>"$WORK/kustomize.err" || fail "kubectl kustomize $name: $(cat "$WORK/kustomize.err")"
	python3 "$CHECK" "$K/schemas" "$out" --base --config-out "$WORK/gpulse.yml" >"$WORK/check.txt" ||
		fail "$name: $(cat "$WORK/check.txt")"
	n=$((n + 1))
done
[ "$n" -ge 4 ] || fail "only $n kustomizations"
grep -q '^kind: ServiceMonitor$' "$WORK/overlays_servicemonitor.yaml" || fail "no ServiceMonitor rendered"
grep -q '^kind: PodMonitor$' "$WORK/overlays_podmonitor.yaml" || fail "no PodMonitor rendered"
grep -q 'runtimeClassName: nvidia' "$WORK/overlays_nvidia-runtime.yaml" || fail "no runtimeClassName rendered"

# The check fails when it should: a misspelt field, a wrong type, a path
# off its mount.
sed 's/^      hostPID: true$/      hostPid: true/' "$WORK/base.yaml" >"$WORK/typo.yaml"
! python3 "$CHECK" "$K/schemas" "$WORK/typo.yaml" >"$WORK/typo.txt" || fail "a misspelt hostPID passed"
grep -q "hostPid" "$WORK/typo.txt" || fail "the misspelling is not named: $(cat "$WORK/typo.txt")"
sed 's/containerPort: 9401$/containerPort: "9401"/' "$WORK/base.yaml" >"$WORK/type.yaml"
! python3 "$CHECK" "$K/schemas" "$WORK/type.yaml" >/dev/null || fail "a string containerPort passed"
sed 's|cgroup_root: /host/sys/fs/cgroup|cgroup_root: /sys/fs/cgroup|' "$WORK/base.yaml" >"$WORK/mount.yaml"
! python3 "$CHECK" "$K/schemas" "$WORK/mount.yaml" --base >"$WORK/mount.txt" || fail "cgroup_root off its mount passed"
grep -q "attribution.cgroup_root" "$WORK/mount.txt" || fail "the wrong mount is not named: $(cat "$WORK/mount.txt")"

# gpulsed accepts the ConfigMap's gpulse.yml (with this tree's paths for
# the rule pack and the store); test_kubernetes_attribution runs it on a
# stand-in node through the DaemonSet's mounts.
cfg="$WORK/cfg.yml"
sed -e "s|/usr/share/gpulse/rules/|$GPULSE_SOURCE_DIR/deploy/rules/|" -e "s|/var/lib/gpulse/|$WORK/|" \
	-e "s|/run/gpulse/|$WORK/|" "$WORK/gpulse.yml" >"$cfg"
"$GPULSED" --config "$cfg" --print-config >"$WORK/print.txt" 2>&1 ||
	fail "gpulsed refuses the ConfigMap's gpulse.yml: $(cat "$WORK/print.txt")"
# The probes' paths answer 200 on a gpulsed run with it (on loopback).
start_daemon k8s --config "$cfg" --replay "$REC"
for p in /-/healthy /-/ready; do
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL$p")
	[ "$code" = 200 ] || fail "probe path $p answered $code"
done
echo "ok: $n kustomizations"
