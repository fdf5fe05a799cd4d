# gpulsed started on a full disk: an existing store (WAL, closed cleanly)
# and a new one on a tmpfs that a filler file has filled to the last page.
# The open fails as what it is, exit 1 and "storage.path: FILE: disk full
# (SQLITE_FULL) ..." or "...: I/O error ...", never "not a gpulse database"
# with exit 2 (the configuration is not at fault). Needs `mount -t tmpfs`:
# CI runs as root, so it runs there; where mount is refused it says so and
# passes (test_tsdb's test_open_full_disk covers the same path).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
MNT=$(mktemp -d /tmp/gpulse-tsdb-fullopen.XXXXXX)
# The daemons go first (cleanup kills them), then the mount.
umount_mnt() {
	cleanup
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] && wait "$p" 2>/dev/null || true
	done
	umount "$MNT" 2>/dev/null || true
	rmdir "$MNT" 2>/dev/null || true
}
trap umount_mnt EXIT

if ! mount -t tmpfs -o size=1m tmpfs "$MNT" 2>/dev/null; then
	echo "SKIP: cannot mount a tmpfs here (needs root); covered by test_tsdb (test_open_full_disk)"
	exit 0
fi

# A store written by a gpulsed that stopped cleanly.
start_daemon first --replay "$REC" --storage-path "$MNT/store.db"
wait_for '[ "$(metric gpulse_storage_db_bytes)" != "" ] && [ "$(metric gpulse_storage_db_bytes)" != 0 ]' ||
	fail "the first gpulsed wrote nothing"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "the first gpulsed did not stop cleanly"
[ -s "$MNT/store.db" ] || fail "no store written"

# Fill the disk to its last byte.
dd if=/dev/zero of="$MNT/filler" bs=4k status=none 2>/dev/null || true
dd if=/dev/zero of="$MNT/filler2" bs=1 status=none 2>/dev/null || true

# expect_disk_error NAME PATH : gpulsed on PATH exits 1 saying disk full
# or I/O error for that file.
expect_disk_error() {
	local name=$1 db=$2 rc
	set +e
	timeout 20 "$GPULSED" --listen 127.0.0.1:0 --replay "$REC" --storage-path "$db" 2>"$WORK/$name.log"
	rc=$?
	set -e
	[ "$rc" = 1 ] || fail "$name: exit $rc, want 1: $(cat "$WORK/$name.log")"
	grep -Eq "storage\.path: $db: (disk full \(SQLITE_FULL\)|I/O error)" "$WORK/$name.log" ||
		fail "$name: no disk-full or I/O error line: $(cat "$WORK/$name.log")"
	! grep -Eq "not a gpulse database|damaged" "$WORK/$name.log" ||
		fail "$name: a full disk reported as a bad file: $(cat "$WORK/$name.log")"
}
expect_disk_error existing "$MNT/store.db"
expect_disk_error new "$MNT/new.db"

# Space again: the existing store opens.
rm -f "$MNT/filler" "$MNT/filler2" "$MNT/new.db" "$MNT/new.db.lock"
start_daemon again --replay "$REC" --storage-path "$MNT/store.db"
grep -q "storage: keeping samples in $MNT/store.db" "$WORK/again.log" || fail "store not opened once space returned"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly"
echo "ok: a full disk at start is reported as a full disk (exit 1), and the store opens once space returns"
