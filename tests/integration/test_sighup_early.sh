# A SIGHUP while gpulsed starts does not kill it: the signal waits until
# the reload loop is ready, which answers it with a reload. Before, SIGHUP
# kept its default action (terminate) until daemon_run blocked it, after
# the configuration was read, so a SIGHUP racing a (re)start, as a
# logrotate postrotate can, ended the daemon.
# To send the signal at a known point of the start, with no timing: the
# configuration file is a FIFO, and gpulsed blocks opening it (in main,
# before daemon_run) until this test writes it; the signal goes while it
# waits there. A reload reads the FIFO again, so a feeder writes it once
# for every time gpulsed opens it. SIGTERM keeps its meaning: sent at the
# same point, it still stops gpulsed.
source "$(dirname "$0")/lib.sh"

mkfifo "$WORK/cfg.fifo"
# A profiling socket of its own (lib.sh's own_socket cannot write into a
# FIFO): the default one is the machine's.
printf 'log_level: info\nprofiling:\n  socket: "%s"\n' "$WORK/inject.sock" >"$WORK/cfg.yml"

# alive PID : the process exists and is not a zombie.
alive() {
	local s
	s=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) && [ -n "$s" ] && [ "$s" != Z ]
}
# opening_fifo PID : blocked opening the FIFO for reading (the kernel's
# wait for a writer).
opening_fifo() {
	[ "$(cat "/proc/$1/wchan" 2>/dev/null)" = wait_for_partner ]
}
# feed PID : write cfg.yml into the FIFO each time PID opens it, until PID
# exits; one copy per open (a second one in the same read would be a
# configuration with every key twice).
feed() {
	python3 - "$WORK/cfg.fifo" "$WORK/cfg.yml" "$1" <<'PY' &
import errno, os, sys, time
fifo, src, pid = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(src, "rb").read()
fifo_id = os.stat(fifo)
def holds():
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat("/proc/%s/fd/%s" % (pid, fd))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (fifo_id.st_dev, fifo_id.st_ino):
            return True
    return False
while os.path.exists("/proc/%s" % pid):
    try:
        w = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno != errno.ENXIO:
            raise
        time.sleep(0.005)  # no reader yet
        continue
    # The reader's open may not have returned yet: once it has, the
    # copy goes, and the next waits until that reader has closed.
    while not holds() and os.path.exists("/proc/%s" % pid):
        time.sleep(0.005)
    os.write(w, data)
    os.close(w)
    while holds():
        time.sleep(0.005)
PY
	PIDS+=("$!")
}

for round in 1 2 3; do
	log="$WORK/hup$round.log"
	: >"$log"
	"$GPULSED" --config "$WORK/cfg.fifo" --listen 127.0.0.1:0 --nvml-library "$FAKE_NVML" \
		2>"$log" &
	pid=$!
	PIDS+=("$pid")
	if ! wait_for "opening_fifo $pid"; then
		[ -r "/proc/$pid/wchan" ] && [ "$(cat "/proc/$pid/wchan")" != 0 ] ||
			fail "this kernel does not show a process's wait channel (/proc/PID/wchan)"
		fail "round $round: gpulsed never waited to open its configuration (wchan $(cat "/proc/$pid/wchan"))"
	fi
	kill -HUP "$pid"
	kill -HUP "$pid"
	feed "$pid"
	wait_for "grep -q 'serving http' '$log' || ! alive $pid" || fail "round $round: gpulsed did not start"
	alive "$pid" || fail "round $round: a SIGHUP during the start killed gpulsed"
	PORT=$(sed -n 's/.*serving http.* port \([0-9]*\) .*/\1/p' "$log" | head -n1)
	URL="http://127.0.0.1:$PORT"
	# The signal was kept, not lost: the loop answered it with a reload.
	wait_for '[ "$(metric gpulse_config_reloads_total result=\"success\")" = 1 ]' ||
		fail "round $round: the SIGHUP sent during the start was not answered with a reload" \
			"($(metric gpulse_config_reloads_total 'result="success"') reloads)"
	fetch /metrics >/dev/null || fail "round $round: /metrics does not answer"
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" = 0 ] || fail "round $round: gpulsed exited with status $rc after SIGTERM"
done

# SIGTERM at the same point still stops it.
log="$WORK/term.log"
"$GPULSED" --config "$WORK/cfg.fifo" --listen 127.0.0.1:0 --nvml-library "$FAKE_NVML" 2>"$log" &
pid=$!
PIDS+=("$pid")
wait_for "opening_fifo $pid" || fail "gpulsed never waited to open its configuration"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 143 ] || fail "SIGTERM during the start: exit status $rc, not 143 (terminated by SIGTERM)"
echo "ok"
