# gpulsed under systemd's notification protocol (Type=notify), with a
# stand-in for systemd: a unix datagram socket as $NOTIFY_SOCKET and a
# watchdog in WATCHDOG_USEC. READY=1 comes once /metrics serves a GPU's
# sample, WATCHDOG=1 pings keep coming at about half the interval,
# SIGHUP gives RELOADING=1 then READY=1, SIGTERM STOPPING=1, and the
# messages are counted on /metrics.
source "$(dirname "$0")/lib.sh"

SOCK="$WORK/notify.sock"
MSGS="$WORK/notify.txt"
: >"$MSGS"
# The listener: one line per datagram (newlines inside as "|"), for at
# most 60 s.
python3 - "$SOCK" "$MSGS" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(0.5)
end = time.monotonic() + 60
with open(sys.argv[2], "a", buffering=1) as out:
    while time.monotonic() < end:
        try:
            m = s.recv(4096)
        except socket.timeout:
            continue
        out.write(m.decode().replace("\n", "|") + "\n")
PY
PIDS+=($!)
wait_for '[ -S "$SOCK" ]' || fail "the notify listener did not bind"

count() { grep -c -- "$1" "$MSGS" || true; }

# A 2 s watchdog: a ping every second.
NOTIFY_SOCKET="$SOCK" WATCHDOG_USEC=2000000 start_daemon d --replay "$REC" --replay-speed 10
wait_for '[ "$(count "^READY=1")" -ge 1 ]' || fail "no READY=1: $(cat "$MSGS")"
grep -q '^READY=1|STATUS=serving a replay (not real hardware) on 127.0.0.1:0 port '"$PORT"', 1 GPU(s)$' "$MSGS" ||
	fail "READY=1 without the expected STATUS=: $(cat "$MSGS")"
# Ready means a sample is in: the GPU's first reading is on /metrics.
[ "$(metric gpulse_gpu_up 'gpu="0"')" = 1 ] || fail "ready before the first sample"

# Pings: at least three within 15 s (one a second when on time; the
# bound leaves room for a loaded machine).
wait_for '[ "$(count "^WATCHDOG=1$")" -ge 3 ]' || fail "watchdog pings missing: $(cat "$MSGS")"

kill -HUP "$DAEMON_PID"
wait_for '[ "$(count "^RELOADING=1")" -ge 1 ] && [ "$(count "^READY=1")" -ge 2 ]' ||
	fail "reload not notified: $(cat "$MSGS")"
grep -q 'STATUS=serving; last reload applied' "$MSGS" || fail "reload status missing: $(cat "$MSGS")"
# Every message so far was sent and counted; none failed.
sent=$(metric gpulse_systemd_notifications_total 'result="sent"')
[ "${sent:-0}" -ge 5 ] || fail "sent count $sent, want >= 5"
[ "$(metric gpulse_systemd_notifications_total 'result="failed"')" = 0 ] || fail "failures counted"

kill -TERM "$DAEMON_PID"
rc=0
wait "$DAEMON_PID" || rc=$?
[ "$rc" = 0 ] || fail "gpulsed exited $rc on SIGTERM"
grep -q '^STOPPING=1' "$MSGS" || fail "no STOPPING=1: $(cat "$MSGS")"

# Not under systemd: no socket, nothing sent, nothing counted.
start_daemon plain --replay "$REC" --replay-speed 10
wait_for '[ "$(metric gpulse_gpu_up "gpu=\"0\"")" = 1 ]' || fail "plain gpulsed does not serve"
[ "$(metric gpulse_systemd_notifications_total 'result="sent"')" = 0 ] || fail "sent without a socket"
echo "ok"
