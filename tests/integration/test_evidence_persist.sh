# Evidence kept on disk (issue 37, item 2): evidence gathered for a
# firing alert is written beside the store (STORAGE_PATH.evidence);
# gpulsed stopped and started again on the same data directory serves the
# alert's evidence URL with the same bytes, and the alert, still firing,
# links the same evidence. Then a directory that cannot take it: a full
# one (a 64 KiB tmpfs filled to the last byte) and a read-only one (a
# read-only bind mount): the evidence is gathered and served from memory,
# and the failure is said (the log, the list's "store") and counted
# (gpulse_evidence_store_available 0, gpulse_evidence_unsaved,
# gpulse_evidence_store_errors_total{op="write"}); once space is freed it
# is written within storage.retry_interval. The mounts need root: CI runs
# as root; elsewhere the test says so.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

MNT=$(mktemp -d /tmp/gpulse-evidence-mnt.XXXXXX)
RO=$(mktemp -d /tmp/gpulse-evidence-ro.XXXXXX)
# The daemons go first, then the mounts, then lib.sh's cleanup (which exits).
unmount_then_cleanup() {
	local rc=$?
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] && kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
	done
	umount "$MNT" 2>/dev/null || true
	umount "$RO" 2>/dev/null || true
	rm -rf "$MNT" "$RO" 2>/dev/null || true
	(exit $rc)
	cleanup
}
trap unmount_then_cleanup EXIT

mkdir -p "$WORK/rules" "$WORK/exec" "$WORK/store"
cat >"$WORK/hook.sh" <<SH
#!/bin/sh
n=\$(date +%s%N)
cat >"$WORK/exec/\$n.tmp" && mv "$WORK/exec/\$n.tmp" "$WORK/exec/\$n.json"
SH
chmod 700 "$WORK/hook.sh"
cat >"$WORK/rules/r.yml" <<'YML'
groups:
  - name: trouble
    interval: 1s
    rules:
      - alert: GPUTrouble
        expr: gpulse_gpu_power_watts > 0
        for: 0s
        labels: {severity: warning}
YML
# config FILE EXTRA: a configuration with the rule above, the exec hook,
# and EXTRA appended (the storage or evidence.path).
config() {
	cat >"$1" <<YML
sampling: {fast: 100ms, normal: 1s, slow: 5s}
rule_files: [rules/r.yml]
alerting:
  resend_delay: 1s
  exec: {path: $WORK/hook.sh, timeout: 5s}
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
evidence:
  alerts: [GPUTrouble]
  capture_seconds: 0
  anomaly_score: 0
  settle: 1s
$2
YML
}
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=1 GPULSE_FAKE_NVML_SPEED=1

# entry FIELD: the newest ready evidence entry's FIELD (json), or nothing;
# entry store FIELD: the list's store FIELD.
entry() {
	fetch /api/v1/evidence 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
if sys.argv[1] == "store":
    print(json.dumps(d["store"].get(sys.argv[2])).strip("\""))
    sys.exit()
ev = [e for e in d["evidence"] if e["state"] == "ready"]
if ev:
    print(json.dumps(ev[0][sys.argv[1]]).strip("\""))' "$@" 2>/dev/null || true
}

# ---- kept across a restart -------------------------------------------------
config "$WORK/g.yml" "storage: {path: $WORK/store/g.db, retry_interval: 1s}"
start_daemon one --config "$WORK/g.yml" --nvml-library "$FAKE_NVML"
wait_for '[ "$(entry saved)" = true ]' || fail "no evidence written: $(fetch /api/v1/evidence)"
id=$(entry id)
[ -f "$WORK/store/g.db.evidence/$id.evidence" ] || fail "no file for $id in $WORK/store/g.db.evidence: $(ls -la "$WORK/store/g.db.evidence")"
fetch "/api/v1/evidence/$id" >"$WORK/before.json" || fail "evidence $id not served"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; assert d["detail"] == "GPUTrouble" and d["diagnosis"]["windows"], d' \
	"$WORK/before.json" || fail "evidence document: $(cat "$WORK/before.json")"
[ "$(metric gpulse_evidence_store_available)" = 1 ] || fail "store not available"
[ "$(metric gpulse_evidence_unsaved)" = 0 ] || fail "unsaved: $(metric gpulse_evidence_unsaved)"
# The notice the hook got links it.
wait_for 'grep -qs "/api/v1/evidence/$id" "$WORK"/exec/*.json' || fail "the notice does not link $id"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly"
rm -f "$WORK"/exec/*.json

start_daemon two --config "$WORK/g.yml" --nvml-library "$FAKE_NVML"
fetch "/api/v1/evidence/$id" >"$WORK/after.json" || fail "evidence $id gone after the restart"
cmp "$WORK/before.json" "$WORK/after.json" || fail "evidence $id changed across the restart"
grep -q "keeping evidence in $WORK/store/g.db.evidence (1 loaded" "$WORK/two.log" || fail "the load was not said"
# The alert, restored from the store and still firing, links the same
# evidence and takes none anew.
wait_for 'grep -qs "\"evidence\"" "$WORK"/exec/*.json' || fail "no notice after the restart"
grep -qs "/api/v1/evidence/$id\"" "$WORK"/exec/*.json || fail "the alert links other evidence after the restart: $(cat "$WORK"/exec/*.json)"
[ "$(metric gpulse_evidence_taken_total 'cause="alert"')" = 0 ] || fail "evidence taken again after the restart"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || true

# ---- a full directory, then space freed ------------------------------------
[ "$(id -u)" = 0 ] && mount -t tmpfs -o size=64k tmpfs "$MNT" 2>/dev/null ||
	skip_or_fail "cannot mount a tmpfs here (needs root)"
mkdir "$MNT/ev"
dd if=/dev/zero of="$MNT/filler" bs=4k 2>/dev/null || true   # to the last byte
config "$WORK/full.yml" "  path: $MNT/ev
storage: {retry_interval: 1s}"
start_daemon full --config "$WORK/full.yml" --nvml-library "$FAKE_NVML"
# Gathered, then its write refused: the disk is full only to a write.
write_errors() { metric gpulse_evidence_store_errors_total 'op="write"'; }
wait_for '[ "$(write_errors)" -ge 1 ] 2>/dev/null' || fail "full: no write error counted: $(fetch /api/v1/evidence)"
[ "$(metric gpulse_evidence_unsaved)" = 1 ] || fail "full: unsaved $(metric gpulse_evidence_unsaved), want 1"
[ "$(metric gpulse_evidence_store_available)" = 0 ] || fail "full: store said available"
[ "$(entry saved)" = false ] || fail "full: the entry says saved"
entry store error | grep -q "No space left on device" || fail "full: the list does not say why: $(fetch /api/v1/evidence)"
grep -q "evidence.path: .*No space left on device" "$WORK/full.log" || fail "full: not said in the log"
fid=$(entry id)
fetch "/api/v1/evidence/$fid" >/dev/null || fail "full: the evidence is not served from memory"
rm -f "$MNT/filler"
wait_for '[ "$(metric gpulse_evidence_unsaved)" = 0 ] && [ "$(metric gpulse_evidence_store_available)" = 1 ]' ||
	fail "full: not written once space was freed"
[ -f "$MNT/ev/$fid.evidence" ] || fail "full: no file once space was freed"
grep -q "evidence.path: $MNT/ev can be written again" "$WORK/full.log" || fail "full: recovery not said"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || true

# ---- a read-only directory -------------------------------------------------
mkdir "$RO/ev"
mount --bind "$RO" "$RO" && mount -o remount,ro,bind "$RO" ||
	skip_or_fail "cannot make a read-only bind mount here (needs root)"
config "$WORK/ro.yml" "  path: $RO/ev"
start_daemon ro --config "$WORK/ro.yml" --nvml-library "$FAKE_NVML"
wait_for '[ "$(metric gpulse_evidence_unsaved)" = 1 ]' || fail "read-only: no unsaved evidence"
[ "$(metric gpulse_evidence_store_available)" = 0 ] || fail "read-only: store said available"
entry store error | grep -q "Read-only file system" || fail "read-only: the list does not say why: $(fetch /api/v1/evidence)"
"$GPULSE" alerts --url "$URL" --evidence >"$WORK/cli.txt" || fail "gpulse alerts --evidence failed"
grep -q "Read-only file system" "$WORK/cli.txt" || fail "gpulse alerts --evidence does not say the store failed: $(cat "$WORK/cli.txt")"
echo PASS
