# gpulsed --replay serves a recording as live GPUs, unmistakably labelled;
# malformed recordings are refused with file, line and column.
source "$(dirname "$0")/lib.sh"

start_daemon replay --replay "$REC" --replay-speed 20
wait_for '[ -n "$(metric gpulse_gpu_power_watts gpu=\"0\")" ]' || fail "no replayed values"
has /metrics '^gpulse_gpu_info\{.*source="replay"' || fail "replayed GPU not labelled"
# Every series of a replayed GPU says so, not only gpulse_gpu_info (a
# dashboard or query reading gpulse_gpu_power_watts must not take it for
# hardware), once each.
fetch /metrics >"$WORK/replay-metrics.txt"
grep -c '^[a-z_:]*{gpu="0"' "$WORK/replay-metrics.txt" >/dev/null || fail "no per-GPU series"
unlabelled=$(grep '^[a-z_:]*{gpu="0"' "$WORK/replay-metrics.txt" | grep -v 'source="replay"' || true)
[ -z "$unlabelled" ] || fail "replayed series without source=\"replay\": $(head -n 5 <<<"$unlabelled")"
! grep -q 'source="replay".*source=' "$WORK/replay-metrics.txt" || fail "source label given twice"
has /metrics '^gpulse_mode_info\{mode="replay"' || fail "mode not replay"
grep -q 'REPLAY' "$WORK/replay.log" || fail "replay not announced in the log"
"$GPULSE" status --url "$URL" --no-color >"$WORK/status.txt" || fail "gpulse status failed"
grep -qi 'replay' "$WORK/status.txt" || fail "gpulse status does not say REPLAY"
grep -q 'H200' "$WORK/status.txt" || fail "gpulse status lacks the model"
"$GPULSE" status --url "$URL" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["data"]["mode"]=="replay"' ||
	fail "gpulse status --json"
# Values move as the replay plays (power varies across phases).
p1=$(metric gpulse_gpu_power_watts 'gpu="0"'); sleep 1; p2=$(metric gpulse_gpu_power_watts 'gpu="0"')
[ "$p1" != "$p2" ] || fail "replay is not advancing ($p1)"
kill -TERM "$DAEMON_PID"

# The store keeps the label too: what the query API answers about a replay
# says it is one, as /metrics does.
start_daemon replaystore --replay "$REC" --replay-speed 20 --storage-path "$WORK/replay.db"
wait_for 'fetch "/api/v1/query?query=gpulse_gpu_power_watts" | grep -q "\"gpu\":\"0\""' ||
	fail "no stored replay: $(fetch "/api/v1/query?query=gpulse_gpu_power_watts")"
fetch '/api/v1/series?match[]=\{gpu="0"\}' | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
assert d, "no stored series of GPU 0"
bad = [s for s in d if s.get("source") != "replay"]
assert not bad, bad[:3]
' || fail "stored replay series without source=\"replay\""
kill -TERM "$DAEMON_PID"

# The power limit comes from the device file beside the recording (the
# recording has no column for it): on /metrics, in gpulse status, and as
# the live diagnosis's yardstick, marked as the device's (not the model
# table's default board power, which for an H200 would be 700 W too: the
# file here says 450 W).
mkdir -p "$WORK/pl"
cp "$REC" "$WORK/pl/card-phases-10hz.csv"
sed 's/700\.00 W/450.00 W/' "$GPULSE_TEST_DATA/recordings/h200-device.csv" >"$WORK/pl/card-device.csv"
grep -q '450.00 W' "$WORK/pl/card-device.csv" || fail "device file not rewritten"
start_daemon powerlimit --replay "$WORK/pl/card-phases-10hz.csv" --replay-speed 20
wait_for '[ -n "$(metric gpulse_gpu_power_limit_watts gpu=\"0\")" ]' || fail "no power limit on /metrics"
[ "$(metric gpulse_gpu_power_limit_watts 'gpu="0"')" = 450 ] ||
	fail "power limit $(metric gpulse_gpu_power_limit_watts 'gpu="0"'), want 450"
"$GPULSE" status --url "$URL" --no-color >"$WORK/pl-status.txt" || fail "gpulse status"
grep -Eq 'power .* / 450 W' "$WORK/pl-status.txt" || fail "status: $(grep power "$WORK/pl-status.txt")"
wait_for 'fetch /api/v1/diagnosis | python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin)[\"data\"][\"peaks\"] else 1)"' ||
	fail "no diagnosis peaks: $(fetch /api/v1/diagnosis)"
fetch /api/v1/diagnosis | python3 -c '
import json, sys
p = json.load(sys.stdin)["data"]["peaks"][0]
assert p["power_limit_watts"] == 450 and p["sources"]["power_limit"] == "device", p
' || fail "diagnosis peaks: $(fetch /api/v1/diagnosis)"
"$GPULSE" diagnose --url "$URL" >"$WORK/pl-diag.txt" || fail "gpulse diagnose"
grep -q '^GPU 0: NVIDIA H200, .*power limit 450 W (device)' "$WORK/pl-diag.txt" ||
	fail "gpulse diagnose: $(head -n 3 "$WORK/pl-diag.txt")"
kill -TERM "$DAEMON_PID"

# The bundled recording's nan cells (a recorder's word for a GPM counter
# with no value) are read as absent without a warning at every start.
! grep -q 'nan in column\|read as absent' "$WORK/replay.log" || fail "a warning for nan cells: $(cat "$WORK/replay.log")"
# A value no GPU reports (negative) is absent, and the log says where.
head -n 30 "$REC" >"$WORK/neg.csv"
sed -i '3s/^\([^,]*\),[^,]*,/\1,-7,/' "$WORK/neg.csv"
start_daemon neg --replay "$WORK/neg.csv"
grep -q "warning: replay: $WORK/neg.csv:3:2: negative value -7 in column gpu_util, read as absent" "$WORK/neg.log" ||
	fail "no warning for a negative value: $(cat "$WORK/neg.log")"
kill -TERM "$DAEMON_PID"

# Malformed recordings: exit 2, FILE:LINE:COL in the message.
head -n 5 "$REC" >"$WORK/ok.csv"
sed '4s/^\([^,]*\),[^,]*,/\1,12x,/' "$WORK/ok.csv" >"$WORK/badnum.csv"
head -n 3 "$REC" >"$WORK/unsorted.csv"; sed -n 2p "$REC" >>"$WORK/unsorted.csv"
cut -d, -f2- "$WORK/ok.csv" >"$WORK/nots.csv"
awk -F, 'NR==3{NF=NF-1} {print}' OFS=, "$WORK/ok.csv" >"$WORK/short.csv"
head -n 1 "$REC" >"$WORK/header.csv"
for case in "badnum.csv:4:2" "unsorted.csv:4:1" "nots.csv:1:" "short.csv:3:" \
	"header.csv:2:1: no samples after the header"; do
	f=${case%%:*}; want=${case#*:}
	set +e
	"$GPULSED" --listen 127.0.0.1:0 --replay "$WORK/$f" 2>"$WORK/err.txt"
	rc=$?
	set -e
	[ "$rc" = 2 ] || fail "$f: exit $rc, want 2"
	grep -q "$f:$want" "$WORK/err.txt" || fail "$f: message lacks $f:$want: $(cat "$WORK/err.txt")"
done
echo PASS
