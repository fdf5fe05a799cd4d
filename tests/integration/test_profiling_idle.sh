# Issue 14, item 8: libraries that said HELLO and then nothing cannot
# starve other users of the profiling socket. 40 silent HELLO-only
# clients of one user (tests/profile/fake_inject_client hold) get that
# user's share, a quarter of max_clients, and a library of another user
# still connects and its statistics reach /metrics; with a short
# profiling.idle_timeout the silent ones are closed and counted while a
# library that keeps sending stays.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"
if [ "$(id -u)" != 0 ]; then
	skip_or_fail "a client of another user needs root (setpriv)"
fi
# The other user (nobody) must reach the socket and the client.
chmod 755 "$WORK"
cp "$FAKE" "$WORK/fake" && chmod 755 "$WORK/fake"
FAKE="$WORK/fake"
NOBODY=65534

# ---- one user's silent connections leave room for another user.
SOCK="$WORK/run/a.sock"
cat >"$WORK/a.yml" <<EOF2
storage:
  path: "$WORK/db-a"
profiling:
  socket: "$SOCK"
  max_clients: 32
EOF2
start_daemon a --config "$WORK/a.yml"
[ -S "$SOCK" ] || wait_for '[ -S "$SOCK" ]' || fail "no socket at $SOCK"
for i in $(seq 1 40); do
	"$FAKE" "$SOCK" hold >"$WORK/hold$i.out" 2>&1 &
	PIDS+=("$!")
done
# A quarter of 32: 8 held, the 32 others refused for their user.
wait_for '[ "$(metric gpulse_profile_connections_total result=\"max_clients_per_uid\")" = 32 ]' ||
	fail "refused per uid: $(metric gpulse_profile_connections_total result=\"max_clients_per_uid\"), want 32"
[ "$(metric gpulse_profile_clients)" = 8 ] || fail "clients: $(metric gpulse_profile_clients), want 8"
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$FAKE" "$SOCK" launchy \
	>"$WORK/other.out" 2>"$WORK/other.log" &
OTHER=$!
PIDS+=("$OTHER")
wait_for '[ -n "$(metric gpulse_process_kernel_launches_total pid=\"$OTHER\")" ]' ||
	fail "another user's library was not served: $(cat "$WORK/other.out" "$WORK/other.log")"
[ "$(metric gpulse_profile_connections_total result=\"max_clients\")" = 0 ] || fail "max_clients reached"
[ "$(metric gpulse_profile_clients)" = 9 ] || fail "clients: $(metric gpulse_profile_clients), want 9"
kill "$OTHER" 2>/dev/null || true

# ---- silent libraries are closed after profiling.idle_timeout (1 s);
# a busy one stays.
SOCK="$WORK/run/b.sock"
cat >"$WORK/b.yml" <<EOF2
storage:
  path: "$WORK/db-b"
profiling:
  socket: "$SOCK"
  max_clients: 32
  idle_timeout: 1s
EOF2
start_daemon b --config "$WORK/b.yml"
[ -S "$SOCK" ] || wait_for '[ -S "$SOCK" ]' || fail "no socket at $SOCK"
# launchy sends KERNELS every 250 ms, and exits when a send fails.
"$FAKE" "$SOCK" launchy >"$WORK/busy.out" 2>&1 &
BUSY=$!
PIDS+=("$BUSY")
quiet=()
for i in $(seq 1 5); do
	"$FAKE" "$SOCK" hold >"$WORK/quiet$i.out" 2>&1 &
	quiet+=($!)
	PIDS+=("$!")
done
wait_for '[ "$(metric gpulse_profile_connections_total result=\"idle_timeout\")" = 5 ]' ||
	fail "idle_timeout: $(metric gpulse_profile_connections_total result=\"idle_timeout\"), want 5"
for p in "${quiet[@]}"; do
	timeout 5 tail --pid="$p" -f /dev/null || fail "a silent client is still connected"
done
for i in $(seq 1 5); do
	grep -q eof "$WORK/quiet$i.out" || fail "silent client $i was not closed: $(cat "$WORK/quiet$i.out")"
done
# Two more timeouts' worth: the busy library is still there and counted.
sleep 2
kill -0 "$BUSY" 2>/dev/null || fail "the busy client exited: $(cat "$WORK/busy.out")"
[ "$(metric gpulse_profile_clients)" = 1 ] || fail "clients: $(metric gpulse_profile_clients), want 1"
[ "$(metric gpulse_profile_connections_total result=\"idle_timeout\")" = 5 ] || fail "the busy client timed out"
[ -n "$(metric gpulse_process_kernel_launches_total pid=\"$BUSY\")" ] || fail "no stats from the busy client"
echo "ok"
