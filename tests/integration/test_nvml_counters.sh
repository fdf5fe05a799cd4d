# The counters DCGM exports that gpulse reads too: video encoder and
# decoder utilization, clock violation times as counters, NVLink error
# counters over the active links, retired pages. gpulsed on the fake NVML
# must export them in base units, the violation counters must grow only
# while the recording holds the clocks down, and a card that answers
# NOT_SUPPORTED must get no series at all, with the answer counted.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

cat >"$WORK/fast.yml" <<'EOF'
sampling: {fast: 100ms, normal: 200ms, slow: 500ms}
EOF

# The bf16 phase of the recording, where the software power cap bit
# (0x4) is set on most rows, played at 4x so the counters move.
export GPULSE_FAKE_NVML_SPEED=4
start_daemon on --config "$WORK/fast.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_gpu_clock_violation_seconds_total policy=\"power\" gpu=\"0\")" ]' ||
	fail "no clock violation counter after 15 s"

[ "$(metric gpulse_gpu_encoder_utilization_ratio 'gpu="0"')" = 0 ] || fail "encoder utilization not 0"
[ "$(metric gpulse_gpu_decoder_utilization_ratio 'gpu="0"')" = 0 ] || fail "decoder utilization not 0"
# The fake's 18 active links count kind+1 errors each: a kind read into
# another's series, or links left out, shows.
k=1
for t in replay recovery crc_flit crc_data; do
	[ "$(metric gpulse_gpu_nvlink_errors_total "type=\"$t\"" 'gpu="0"')" = $((18 * k)) ] ||
		fail "nvlink $t errors missing or not $((18 * k))"
	k=$((k + 1))
done
[ "$(metric gpulse_gpu_nvlinks_active 'gpu="0"')" = 18 ] || fail "active NVLinks not 18"
[ "$(metric gpulse_gpu_retired_pages 'cause="double_bit_ecc"' 'gpu="0"')" = 0 ] || fail "retired pages (dbe) missing"
[ "$(metric gpulse_gpu_retired_pages 'cause="multiple_single_bit_ecc"' 'gpu="0"')" = 0 ] ||
	fail "retired pages (sbe) missing"
[ "$(metric gpulse_gpu_retired_pages_pending 'gpu="0"')" = 0 ] || fail "retired pages pending missing"

# Every policy has a counter; each is bounded by the fake time played
# (4 s a second since start), never goes back, and "any limiter" holds at
# least as long as the power limiter alone.
fetch /metrics >"$WORK/m1.txt"
t0=$(date +%s.%N)
sleep 2
fetch /metrics >"$WORK/m2.txt"
python3 - "$WORK/m1.txt" "$WORK/m2.txt" <<'PY' || fail "violation counters wrong"
import re, sys
def read(path):
    out = {}
    for line in open(path):
        m = re.match(r'gpulse_gpu_clock_violation_seconds_total\{(.*)\} (\S+)$', line)
        if m and 'gpu="0"' in m.group(1):
            pol = re.search(r'policy="([^"]+)"', m.group(1)).group(1)
            out[pol] = float(m.group(2))
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
want = {"power", "thermal", "sync_boost", "board_limit", "low_utilization", "reliability",
        "total_app_clocks", "total_base_clocks"}
assert set(a) == want, f"policies {sorted(a)}"
for p in want:
    assert b[p] >= a[p], f"{p} went back: {a[p]} -> {b[p]}"
assert b["total_app_clocks"] >= b["power"], b
assert b["board_limit"] == 0 and b["reliability"] == 0, b
# The recording's first phases are idle or capped: some limiter held.
assert sum(b.values()) > sum(a.values()), (a, b)
PY
# No more held time than fake time elapsed (4x wall time since start,
# and the daemon started before t0): seconds, not ns or µs.
up=$(ps -o etimes= -p "$DAEMON_PID" | tr -d ' ')
held=$(metric gpulse_gpu_clock_violation_seconds_total 'policy="total_app_clocks"' 'gpu="0"')
python3 -c "import sys; h,u=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if 0 <= h <= 4*(u+1) else 1)" \
	"$held" "$up" || fail "held $held s in $up s of 4x fake time: wrong unit"
fetch /metrics | promtool check metrics >"$WORK/promtool.log" 2>&1 ||
	fail "promtool check metrics: $(cat "$WORK/promtool.log")"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# The same through the per-policy calls (nvmlDeviceGetFieldValues failing
# as a whole): the counters grow as before, in seconds.
GPULSE_FAKE_NVML_FAULTS="notsup:nvmlDeviceGetFieldValues" \
	start_daemon calls --config "$WORK/fast.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_gpu_clock_violation_seconds_total policy=\"power\" gpu=\"0\")" ]' ||
	fail "no clock violation counter on the per-policy path"
fetch /metrics >"$WORK/c1.txt"
sleep 2
fetch /metrics >"$WORK/c2.txt"
python3 - "$WORK/c1.txt" "$WORK/c2.txt" <<'PY' || fail "violation counters wrong on the per-policy path"
import re, sys
def read(path):
    return {re.search(r'policy="([^"]+)"', l).group(1): float(l.split()[-1]) for l in open(path)
            if l.startswith('gpulse_gpu_clock_violation_seconds_total{') and 'gpu="0"' in l}
a, b = read(sys.argv[1]), read(sys.argv[2])
assert len(a) == 8 and all(b[p] >= a[p] for p in a), (a, b)
assert sum(b.values()) > sum(a.values()), (a, b)
PY
[ -n "$(metric gpulse_nvml_calls_total 'call="nvmlDeviceGetViolationStatus"')" ] ||
	fail "no violation-status call on the per-policy path"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# A card that reports none of them (a PCIe card without NVLink, a card
# that remaps rows instead of retiring pages): its violation fields too.
export GPULSE_FAKE_NVML_NVLINKS=0
export GPULSE_FAKE_NVML_FAULTS="notsup:nvmlDeviceGetViolationStatus;notsup:nvmlDeviceGetNvLinkState;notsup:nvmlDeviceGetRetiredPages;notsup:nvmlDeviceGetEncoderUtilization"
for f in 74 75 76 77 78 79 80 81; do
	GPULSE_FAKE_NVML_FAULTS="$GPULSE_FAKE_NVML_FAULTS;notsup:field=$f"
done
start_daemon off --config "$WORK/fast.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_nvml_errors_total call=\"nvmlDeviceGetRetiredPages\")" ]' ||
	fail "NOT_SUPPORTED retired pages not counted"
wait_for '[ -n "$(metric gpulse_gpu_decoder_utilization_ratio gpu=\"0\")" ]' || fail "decoder missing"
for m in gpulse_gpu_clock_violation_seconds_total gpulse_gpu_nvlink_errors_total \
	gpulse_gpu_nvlinks gpulse_gpu_nvlinks_active \
	gpulse_gpu_retired_pages gpulse_gpu_encoder_utilization_ratio; do
	has /metrics "^$m\{" && fail "$m exported for a card that does not support it"
done
for c in nvmlDeviceGetViolationStatus nvmlDeviceGetNvLinkState nvmlDeviceGetEncoderUtilization; do
	[ -n "$(metric gpulse_nvml_errors_total "call=\"$c\"" 'NOT_SUPPORTED')" ] ||
		fail "$c NOT_SUPPORTED not counted"
done
# The pending status is its own call, still answered.
[ "$(metric gpulse_gpu_retired_pages_pending 'gpu="0"')" = 0 ] || fail "pending status lost with pages"
echo "PASS"
