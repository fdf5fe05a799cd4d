# A flood of refused injection-library connections does not flood the
# log: 500 HELLOs that lie about their pid (tests/profile/fake_inject_client
# lie) give one warning, the rest counted; once the back-off (10 s) is
# over, the next one is reported with the count of those suppressed.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"

SOCK="$WORK/run/inject.sock"
cat >"$WORK/g.yml" <<EOF
storage:
  path: "$WORK/db"
profiling:
  socket: "$SOCK"
  # Clients here go quiet after HELLO: never closed for it while the
  # test runs, however slowly (the 30 s default closed one on a loaded
  # machine, and it read as disconnected).
  idle_timeout: 1h
  max_clients: 64
  max_clients_per_uid: 64
EOF
start_daemon a --config "$WORK/g.yml"
[ -S "$SOCK" ] || wait_for '[ -S "$SOCK" ]' || fail "no socket at $SOCK"

# 500 lying clients, 20 at a time (under max_clients and the per-user
# bound, all of them being root here, so that every one reaches the HELLO
# check).
for _ in $(seq 1 25); do
	batch=()
	for _ in $(seq 1 20); do
		"$FAKE" "$SOCK" lie >/dev/null 2>>"$WORK/fake.err" &
		batch+=($!)
	done
	for p in "${batch[@]}"; do
		wait "$p" || fail "a lying client was not refused"
	done
done
wait_for '[ "$(metric gpulse_profile_connections_total result=\"pid_mismatch\")" = 500 ]' ||
	fail "pid_mismatch: $(metric gpulse_profile_connections_total result=\"pid_mismatch\"), want 500"

n=$(grep -c "refused a library whose HELLO" "$WORK/a.log" || true)
[ "$n" -le 3 ] || fail "$n log lines for 500 refused connections, want at most 3"
[ "$n" -ge 1 ] || fail "no warning for 500 refused connections"

# Past the back-off, one more liar is reported with the count. Every
# refusal is either a line or in a line's count: liars are sent, one every
# half second, until the lines account for all of them (a slow machine
# may see the back-off end during the flood, and print a counted line
# then, with later refusals still waiting for the next).
sent=500
deadline=$((SECONDS + 60))
tally() {
	lines=$(grep -c "refused a library whose HELLO" "$WORK/a.log")
	counted=$(sed -n 's/.*refused a library whose HELLO.*(and \([0-9]*\) more like it.*/\1/p' "$WORK/a.log" |
		awk '{ s += $1 } END { print s + 0 }')
}
tally
until grep -Eq "refused a library whose HELLO .*\(and [0-9]+ more like it since [0-9]{2}:[0-9]{2}:[0-9]{2}\)" "$WORK/a.log" &&
	[ $((lines + counted)) = "$sent" ]; do
	[ "$SECONDS" -lt "$deadline" ] ||
		fail "$lines lines and $counted suppressed, want $sent refusals in all (or no line with the count)"
	"$FAKE" "$SOCK" lie >/dev/null 2>>"$WORK/fake.err" || fail "a lying client was not refused"
	sent=$((sent + 1))
	sleep 0.5
	tally
done
[ "$lines" -le 4 ] || fail "$lines log lines in all, want at most 4"
echo "ok"
