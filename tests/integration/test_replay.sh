# gpulsed --replay serves a recording as live GPUs, unmistakably labelled;
# malformed recordings are refused with file, line and column.
source "$(dirname "$0")/lib.sh"

start_daemon replay --replay "$REC" --replay-speed 20
wait_for '[ -n "$(metric gpulse_gpu_power_watts gpu=\"0\")" ]' || fail "no replayed values"
has /metrics '^gpulse_gpu_info\{.*source="replay"' || fail "replayed GPU not labelled"
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

# Malformed recordings: exit 2, FILE:LINE:COL in the message.
head -n 5 "$REC" >"$WORK/ok.csv"
sed '4s/^\([^,]*\),[^,]*,/\1,12x,/' "$WORK/ok.csv" >"$WORK/badnum.csv"
head -n 3 "$REC" >"$WORK/unsorted.csv"; sed -n 2p "$REC" >>"$WORK/unsorted.csv"
cut -d, -f2- "$WORK/ok.csv" >"$WORK/nots.csv"
awk -F, 'NR==3{NF=NF-1} {print}' OFS=, "$WORK/ok.csv" >"$WORK/short.csv"
for case in "badnum.csv:4:2" "unsorted.csv:4:1" "nots.csv:1:" "short.csv:3:"; do
	f=${case%%:*}; want=${case#*:}
	set +e
	"$GPULSED" --listen 127.0.0.1:0 --replay "$WORK/$f" 2>"$WORK/err.txt"
	rc=$?
	set -e
	[ "$rc" = 2 ] || fail "$f: exit $rc, want 2"
	grep -q "$f:$want" "$WORK/err.txt" || fail "$f: message lacks $f:$want: $(cat "$WORK/err.txt")"
done
echo PASS
