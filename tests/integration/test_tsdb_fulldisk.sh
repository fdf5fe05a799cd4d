# A full disk: the store's file lives on a small tmpfs that a filler file
# has nearly filled; flushes fail, the store keeps every sample in memory
# and serves it, counts the errors, and writes everything once the filler
# is deleted. Needs `mount -t tmpfs` (root in CI); without it the same
# path is tested by test_tsdb's full-disk case (SQLite's max_page_count),
# and this test says so and is skipped (under CI it fails).
set -euo pipefail
source "$(dirname "$0")/need.sh"
: "${GPULSE_BUILD_DIR:?}"
HELPER="$GPULSE_BUILD_DIR/tests/tsdb_crash_helper"
MNT=$(mktemp -d /tmp/gpulse-tsdb-full.XXXXXX)
cleanup() {
	umount "$MNT" 2>/dev/null || true
	rmdir "$MNT" 2>/dev/null || true
}
trap cleanup EXIT

if ! mount -t tmpfs -o size=4m tmpfs "$MNT" 2>/dev/null; then
	skip_or_fail "cannot mount a tmpfs here (needs root); full disk is covered by test_tsdb (max_page_count)"
fi
# Leave about 1 MiB for the database and its WAL.
dd if=/dev/zero of="$MNT/filler" bs=1k count=3000 status=none
"$HELPER" fulldisk "$MNT/store.db" "$MNT/filler" || { echo "FAIL: full disk" >&2; exit 1; }
echo "ok: full disk survived, resumed writing when space returned"
