# Faults through the fake NVML, each with its documented behaviour:
#  - a call that hangs on one GPU marks that GPU stale; the others go on;
#  - a GPU lost at time T shows as down and comes back (same UUID);
#  - a NOT_SUPPORTED field is absent, never zero;
#  - an XID event is counted by code;
#  - a missing library or driver leaves gpulsed serving, and saying why.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

cat >"$WORK/fast.yml" <<'YML'
sampling:
  fast: 100ms
  normal: 200ms
  slow: 1s
  call_deadline: 500ms
  rediscover: 1s
YML

export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=3 GPULSE_FAKE_NVML_SPEED=1
export GPULSE_FAKE_NVML_FAULTS="hang:nvmlDeviceGetPowerUsage:gpu=1:after=1.5;lost:gpu=2:at=1.5:until=4;notsup:nvmlDeviceGetTemperature:gpu=0;xid:gpu=0:at=1:code=79"
start_daemon faults --config "$WORK/fast.yml" --nvml-library "$FAKE_NVML"

# Hang on GPU 1: stale, not up, and GPU 0 keeps sampling.
wait_for '[ "$(metric gpulse_gpu_stale gpu=\"1\")" = 1 ]' || fail "GPU 1 never marked stale"
# (Up is judged on the collector's next look, which a loaded machine may
# hold back past the moment stale was read.)
wait_for '[ "$(metric gpulse_gpu_up gpu=\"1\")" = 0 ]' || fail "stuck GPU 1 still up"
grep -q 'nvmlDeviceGetPowerUsage has not returned' "$WORK/faults.log" || fail "no log line naming the stuck call"
[ "$(metric gpulse_collector_stalls_total)" -ge 1 ] || fail "stall not counted"
# GPU 1's fast-tier fields are dropped once they are late.
wait_for '[ -z "$(metric gpulse_gpu_utilization_ratio gpu=\"1\")" ]' || fail "stale GPU 1 still exports values"
# (Waited for: GPU 1's call hangs for good, and how soon GPU 0's next
# sample comes is the machine's speed, not the collector's.)
s0=$(metric gpulse_samples_total 'gpu="0"' 'tier="fast"')
wait_for '[ "$(metric gpulse_samples_total gpu=\"0\" tier=\"fast\")" -gt "$s0" ]' ||
	fail "GPU 0 stopped sampling while GPU 1 hangs ($s0 -> $(metric gpulse_samples_total 'gpu="0"' 'tier="fast"'))"
[ "$(metric gpulse_gpu_up 'gpu="0"')" = 1 ] || fail "GPU 0 not up"

# Lost GPU 2: down while lost, back afterwards with the same UUID.
wait_for '[ "$(metric gpulse_gpu_lost_total gpu=\"2\")" = 1 ]' || fail "GPU 2 loss not counted"
wait_for '[ "$(metric gpulse_gpu_up gpu=\"2\")" = 1 ]' || fail "GPU 2 did not come back"
[ "$(metric gpulse_collector_rediscoveries_total)" -ge 1 ] || fail "rediscovery not counted"
has /metrics '^gpulse_gpu_info\{gpu="2",uuid="GPU-fa4e0000-0000-4000-8000-000000000002"' ||
	fail "GPU 2 came back under another identity"

# NOT_SUPPORTED temperature on GPU 0: absent there, present on GPU 2.
[ -z "$(metric gpulse_gpu_temperature_celsius 'gpu="0"')" ] || fail "unsupported temperature exported"
[ -n "$(metric gpulse_gpu_temperature_celsius 'gpu="2"')" ] || fail "temperature missing on GPU 2"

# XID 79 on GPU 0.
wait_for '[ "$(metric gpulse_gpu_xid_errors_total xid=\"79\")" = 1 ]' || fail "XID 79 not counted"
grep -q 'XID 79' "$WORK/faults.log" || fail "XID not logged"

kill -TERM "$DAEMON_PID"
# A lane is stuck inside NVML forever: shutdown must still be prompt.
wait_for '! kill -0 $DAEMON_PID 2>/dev/null' || fail "gpulsed hung at shutdown with a stuck NVML call"

# Library missing: serves self-metrics, says why, exits cleanly.
unset GPULSE_FAKE_NVML_FAULTS
start_daemon nolib --nvml-library /nonexistent/libnvidia-ml.so.1
grep -q 'cannot load NVML' "$WORK/nolib.log" || fail "no message for a missing library"
has /metrics '^gpulse_mode_info\{mode="none"' || fail "mode none not exported"
kill -TERM "$DAEMON_PID"

# Driver not loaded: same, with that reason.
GPULSE_FAKE_NVML_FAULTS=nodriver start_daemon nodriver --nvml-library "$FAKE_NVML"
grep -q 'driver is not loaded' "$WORK/nodriver.log" || fail "no message for a missing driver"
has /healthz ok || fail "healthz"
kill -TERM "$DAEMON_PID"
echo PASS
