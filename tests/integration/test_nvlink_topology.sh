# NVLink and topology on hosts with several GPUs (issue 20, item 3), the
# batched slow-tier reads (item 1) and events across GPUs:
#  - three fake GPUs with a topology (0-1 one PCIe switch and 4 NVLinks,
#    0-2 one NUMA node and 2 NVLinks, 1-2 unnamed: across the system):
#    every GPU's NVLink count, its active links, each pair's common
#    ancestor and straight NVLinks, from both ends; the error totals of
#    the active links only, each kind its own (the fake counts kind+1 per
#    active link);
#  - those reads go through nvmlDeviceGetFieldValues: no violation-status
#    or per-link call is made; with that call failing as a whole the
#    per-policy and per-link calls give the same series and values; a
#    field NOT_SUPPORTED alone leaves out its series only;
#  - an XID on GPU 2 is counted on GPU 2 and no other;
#  - one GPU: no pair series; a card without NVLink: no NVLink series.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

cat >"$WORK/fast.yml" <<'EOF'
sampling: {fast: 100ms, normal: 200ms, slow: 300ms}
EOF
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_SPEED=0 GPULSE_FAKE_NVML_GPUS=3
export GPULSE_FAKE_NVML_TOPOLOGY="0-1:single:nvlink=4,0-2:node:nvlink=2"
export GPULSE_FAKE_NVML_FAULTS="xid:gpu=2:at=1:code=48"

# The series a path exports: NVLink, topology, violation; one per line.
series() {
	fetch /metrics | grep -E '^gpulse_gpu_(nvlink|topology|clock_violation)' |
		sed 's/,uuid="[^"]*",model="[^"]*"//' | sort
}

start_daemon batched --config "$WORK/fast.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_gpu_nvlink_errors_total gpu=\"2\" crc_data)" ] &&
	[ -n "$(metric gpulse_gpu_xid_errors_total gpu=\"2\")" ]' ||
	fail "no NVLink errors or XID for GPU 2 after 15 s"
series >"$WORK/batched.txt"
python3 - "$WORK/batched.txt" <<'PY' || fail "NVLink or topology series wrong: $(cat "$WORK/batched.txt")"
import re, sys
got = {}
for line in open(sys.argv[1]):
    name, labels, value = re.match(r'(\w+)\{(.*)\} (\S+)$', line.strip()).groups()
    got[(name, labels)] = float(value)
def want(name, labels, value):
    v = got.get((name, labels))
    assert v == value, f"{name}{{{labels}}} = {v}, want {value}"
for g in range(3):
    want("gpulse_gpu_nvlinks", f'gpu="{g}"', 18)
active = {0: 6, 1: 4, 2: 2}
for g, n in active.items():
    want("gpulse_gpu_nvlinks_active", f'gpu="{g}"', n)
    for k, t in enumerate(("replay", "recovery", "crc_flit", "crc_data")):
        want("gpulse_gpu_nvlink_errors_total", f'gpu="{g}",type="{t}"', n * (k + 1))
levels = {(0, 1): "single", (0, 2): "node", (1, 2): "system"}
links = {(0, 1): 4, (0, 2): 2, (1, 2): 0}
for (a, b), lv in levels.items():
    for x, y in ((a, b), (b, a)):
        want("gpulse_gpu_topology_info", f'gpu="{x}",peer_gpu="{y}",level="{lv}"', 1)
        want("gpulse_gpu_nvlink_peer_links", f'gpu="{x}",peer_gpu="{y}"', links[(a, b)])
topo = [k for k in got if k[0] == "gpulse_gpu_topology_info"]
assert len(topo) == 6, topo          # each ordered pair once, no GPU with itself
viol = [k for k in got if k[0] == "gpulse_gpu_clock_violation_seconds_total"]
assert len(viol) == 3 * 8, viol
PY
for c in nvmlDeviceGetViolationStatus nvmlDeviceGetNvLinkErrorCounter; do
	[ -z "$(metric gpulse_nvml_calls_total "call=\"$c\"")" ] || fail "$c called beside the batched read"
done
[ -n "$(metric gpulse_nvml_calls_total 'call="nvmlDeviceGetTopologyCommonAncestor"')" ] ||
	fail "no topology call"
# The XID of GPU 2 is GPU 2's alone.
[ "$(metric gpulse_gpu_xid_errors_total 'gpu="2"' 'xid="48"')" = 1 ] || fail "XID 48 not on GPU 2"
for g in 0 1; do
	[ -z "$(metric gpulse_gpu_xid_errors_total "gpu=\"$g\"")" ] || fail "XID counted on GPU $g"
done
fetch /metrics | promtool check metrics >"$WORK/promtool.log" 2>&1 ||
	fail "promtool check metrics: $(cat "$WORK/promtool.log")"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# FieldValues failing as a whole: the per-policy and per-link calls, the
# same series and values.
GPULSE_FAKE_NVML_FAULTS="notsup:nvmlDeviceGetFieldValues" \
	start_daemon fallback --config "$WORK/fast.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_gpu_nvlink_errors_total gpu=\"2\" crc_data)" ] &&
	[ -n "$(metric gpulse_gpu_clock_violation_seconds_total gpu=\"2\" base_clocks)" ]' ||
	fail "no NVLink errors or violations on the fallback path"
series >"$WORK/fallback.txt"
# The link count comes from the per-link states there: the same 18.
diff "$WORK/batched.txt" "$WORK/fallback.txt" >"$WORK/diff.txt" ||
	fail "the fallback path exports other series: $(cat "$WORK/diff.txt")"
[ -n "$(metric gpulse_nvml_calls_total 'call="nvmlDeviceGetViolationStatus"')" ] ||
	fail "fallback made no violation-status call"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# One field NOT_SUPPORTED: its series alone is left out, nothing is made
# up for it, and the batch still stands (no per-policy or per-link call).
GPULSE_FAKE_NVML_FAULTS="notsup:field=75;notsup:field=52:gpu=1" \
	start_daemon field --config "$WORK/fast.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_gpu_nvlink_errors_total gpu=\"2\" crc_data)" ]' ||
	fail "no NVLink errors with one field unsupported"
series >"$WORK/field.txt"
grep -v -e 'policy="thermal"' -e 'gpu="1",type="replay"' "$WORK/batched.txt" >"$WORK/expect.txt"
diff "$WORK/expect.txt" "$WORK/field.txt" >"$WORK/diff.txt" ||
	fail "one unsupported field changed other series: $(cat "$WORK/diff.txt")"
for c in nvmlDeviceGetViolationStatus nvmlDeviceGetNvLinkErrorCounter; do
	[ -z "$(metric gpulse_nvml_calls_total "call=\"$c\"")" ] || fail "$c called for one missing field"
done
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# One GPU: its NVLinks, no pairs.
unset GPULSE_FAKE_NVML_TOPOLOGY
GPULSE_FAKE_NVML_GPUS=1 GPULSE_FAKE_NVML_FAULTS="" \
	start_daemon one --config "$WORK/fast.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_gpu_nvlinks_active gpu=\"0\")" ]' || fail "no active NVLinks on one GPU"
[ "$(metric gpulse_gpu_nvlinks_active 'gpu="0"')" = 18 ] || fail "one GPU: not 18 active links"
has /metrics '^gpulse_gpu_(topology_info|nvlink_peer_links)\{' && fail "pair series on a one-GPU host"
[ -z "$(metric gpulse_nvml_calls_total 'call="nvmlDeviceGetTopologyCommonAncestor"')" ] ||
	fail "topology asked on a one-GPU host"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# Two GPUs without NVLink (PCIe cards): the pair's common ancestor, no
# NVLink series at all.
GPULSE_FAKE_NVML_GPUS=2 GPULSE_FAKE_NVML_NVLINKS=0 GPULSE_FAKE_NVML_FAULTS="" \
	start_daemon pcie --config "$WORK/fast.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_gpu_topology_info gpu=\"1\" peer_gpu=\"0\")" ] &&
	[ -n "$(metric gpulse_gpu_clock_violation_seconds_total gpu=\"1\")" ]' ||
	fail "no topology for two PCIe GPUs"
[ -n "$(metric gpulse_gpu_topology_info 'gpu="0"' 'peer_gpu="1"' 'level="system"')" ] ||
	fail "unnamed pair not across the system"
has /metrics '^gpulse_gpu_nvlink[a-z_]*\{' && fail "NVLink series for cards without NVLink"
echo "PASS"
