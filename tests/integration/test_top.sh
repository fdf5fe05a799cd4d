# gpulse top in a real terminal (tmux): gpulsed on the fake NVML frozen on
# one recorded row of the bf16 phase, serving processes this test owns
# (GPULSE_FAKE_NVML_PROCESSES) and one process of the synthetic injection
# library; an always-firing alert rule; then what the screen shows is read
# back with capture-pane and checked against the API: the GPU header's
# values, the bottleneck, the alert, the top kernel, the sort order per
# sort key, the filter, the layout at 80x24 and 120x40, the help overlay,
# the signal dialog (cancel, SIGUSR1 chosen, the SIGTERM default, a
# refusal), ASCII under LANG=C, monochrome with --no-color, a gpulsed
# that never answers (keys still work, then "disconnected"), gpulsed
# stopping (disconnected, values kept) and coming back, and the graphs
# starting from the store's history; then a replay, whose process count
# without a list top and status report alike, and --gpu of a GPU the host
# lacks refused as gpulse diagnose refuses it.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_BUILD_DIR:?}"
command -v tmux >/dev/null || fail "tmux is not installed (scripts/install-deps.sh)"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"

# One recorded row: busy tensor work, power near its cap.
python3 - "$REC" "$WORK/row.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, body = rows[0], rows[1:]
t = head.index("t_s")
row = next(x for x in body if float(x[t]) >= 1795965322.0)
w = csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n")
w.writerow(head); w.writerow(row)
PY

# Processes the test owns. VICTIM records the signals it gets.
bash -c "trap 'echo USR1 >>$WORK/sig' USR1; trap 'echo TERM >>$WORK/sig; exit 0' TERM; while :; do sleep 0.1; done" &
VICTIM=$!
sleep 300 &
A=$!
sleep 301 &
B=$!
PIDS+=("$VICTIM" "$A" "$B")
# MiB and SM% per process: memory order VICTIM > B > A > 1, SM order A > B > VICTIM > 1.
export GPULSE_FAKE_NVML_PROCESSES="$VICTIM:3000:10,$A:1000:80,$B:2000:40,1:100:0"
export GPULSE_FAKE_NVML_RECORDING="$WORK/row.csv" GPULSE_FAKE_NVML_SPEED=0

SOCK="$WORK/inject.sock"
cat >"$WORK/rules.yml" <<'EOF'
groups:
  - name: top
    rules:
      - alert: TopTestAlwaysFiring
        expr: gpulse_gpu_up == 1
        labels:
          severity: warning
        annotations:
          summary: "GPU {{ $labels.gpu }} is up (a test alert)"
EOF
cat >"$WORK/g.yml" <<EOF
storage:
  path: "$WORK/db"
diagnosis:
  window: 1s
profiling:
  socket: "$SOCK"
rule_files: ["$WORK/rules.yml"]
EOF
start_daemon top --config "$WORK/g.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -S "$SOCK" ]' || fail "no profiling socket"
"$FAKE" "$SOCK" basic >"$WORK/inject.out" 2>"$WORK/inject.log" &
INJ=$!
PIDS+=("$INJ")
wait_for 'has /api/v1/kernels gemm_kernel' || fail "the injected process sent no kernels"
wait_for 'has /api/v1/alerts TopTestAlwaysFiring' || fail "the test alert does not fire"
wait_for 'has "/api/v1/diagnosis?since=15s" bottleneck' || fail "no diagnosis window"
# GPM values need two samples; the header is compared once they are in.
wait_for 'has /api/v1/gpus "\"gpm_tensor\":"' || fail "no GPM values on /api/v1/gpus"

# A tmux server of our own, with no user configuration.
TM=(tmux -S "$WORK/tmux.sock" -f /dev/null)  # removed with $WORK
cleanup_tmux() { "${TM[@]}" kill-server 2>/dev/null || true; }
trap 'rc=$?; cleanup_tmux; set +e; (exit $rc); cleanup' EXIT

screen() { "${TM[@]}" capture-pane -p -t "$1" 2>/dev/null; }
# wait_screen SESSION ERE [SECONDS]: until the pane has a line matching ERE.
wait_screen() {
	local s=$1 re=$2 n=$((${3:-10} * 10))
	for _ in $(seq 1 "$n"); do
		screen "$s" | grep -Eq -- "$re" && return 0
		sleep 0.1
	done
	return 1
}
wait_screen_gone() {
	local s=$1 re=$2 n=$((${3:-10} * 10))
	for _ in $(seq 1 "$n"); do
		screen "$s" | grep -Eq -- "$re" || return 0
		sleep 0.1
	done
	return 1
}
keys() { "${TM[@]}" send-keys -t "$@"; }
dump() { echo "--- screen $1 ($(pane_state "$1" 2>&1)):" >&2; screen "$1" >&2; }
# The row number of pid's first line in the process list, or nothing.
row_of() { screen "$1" | grep -nE "^ *$2 " | head -n1 | cut -d: -f1; }

start_top() { # SESSION WIDTH HEIGHT ENV... -- ARGS...
	local s=$1 w=$2 h=$3
	shift 3
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	# The pane's shell writes top's exit status (tmux 3.3 may leave the
	# pane's process unreaped, without a status); the pane stays after
	# it ends, so what a crash left on the screen can be shown.
	"${TM[@]}" new-session -d -s "$s" -x "$w" -y "$h" \
		env "${envs[@]}" sh -c 'out=$1; shift; "$0" top "$@"; echo "exit $?" >"$out"' \
		"$GPULSE" "$WORK/exit.$s" --url "$URL" "$@" \; set-option -t "$s" remain-on-exit on
}
# pane_state SESSION: "alive", or "exit STATUS" once top has ended (a
# signal shows as 128 + its number).
pane_state() { cat "$WORK/exit.$1" 2>/dev/null || echo alive; }
pane_ended() { [ -s "$WORK/exit.$1" ]; }

start_top main 80 24 LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen
wait_screen main '^GPU 0 NVIDIA' || { dump main; fail "no GPU header"; }
wait_screen main "^ *$INJ .*gemm_kernel" || { dump main; fail "no top kernel for the injected process"; }

# ---- the header against /api/v1/gpus (frozen values, so "at that moment").
fetch /api/v1/gpus >"$WORK/gpus.json"
python3 - "$WORK/gpus.json" >"$WORK/want.txt" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["data"]["gpus"][0]
f = g["fields"]
def size(b):
    units = "BKMGTP"; u = 0
    while b >= 1000 and u < 5:
        b /= 1024; u += 1
    return ("%.1f%s" if u > 0 and b < 9.95 else "%.0f%s") % (b, units[u])
print("util=%.0f%%" % (f["gpu_util"] * 100))
print("SM=%.0f%%" % (f["gpm_sm"] * 100))
print("tensor=%.0f%%" % (f["gpm_tensor"] * 100))
print("power=%.0f/%.0fW" % (f["power"], f["power_limit"]))
print("temp=%.0fC" % f["temp"])
print("mem=%s/%s" % (size(f["mem_used"]), size(f["mem_total"])))
print("clock=%.0fMHz" % (f["sm_clock"] / 1e6))
PY
while IFS== read -r name want; do
	wait_screen main "(^| )$name +\[.*\] +${want//./\\.}( |\$)" ||
		{ dump main; fail "header $name: want $want"; }
done <"$WORK/want.txt"

# ---- the bottleneck of the last window, and the firing alert.
class=$(fetch "/api/v1/diagnosis?gpu=0&since=15s" | python3 -c '
import json, sys
w = json.load(sys.stdin)["data"]["windows"]
print(max(w, key=lambda x: x["end_s"])["bottleneck"])')
wait_screen main "^GPU 0 NVIDIA.*\[$class\]" || { dump main; fail "bottleneck: want [$class]"; }
wait_screen main "^GPU 0 $class.*: " || { dump main; fail "no advice line for $class"; }
wait_screen main 'ALERTS 1 firing.*TopTestAlwaysFiring' || { dump main; fail "the alert is not shown"; }

# ---- the top kernel's share of the process's kernel time, from the API.
share=$(fetch "/api/v1/kernels?pid=$INJ" | python3 -c '
import json, sys
k = json.load(sys.stdin)["data"]["kernels"]
print("%.0f%%" % (100 * k[0]["seconds"] / sum(x["seconds"] for x in k)))')
wait_screen main "^ *$INJ .*gemm_kernel +$share" || { dump main; fail "top kernel share: want $share"; }
# per_process=1, what top asks: the heaviest row of each process and GPU only.
rows=$(fetch "/api/v1/kernels?pid=$INJ&per_process=1" | python3 -c '
import json, sys
print(" ".join(k["kernel"] for k in json.load(sys.stdin)["data"]["kernels"]))')
[ "$rows" = gemm_kernel ] || fail "/api/v1/kernels?per_process=1: $rows, want gemm_kernel alone"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v1/kernels?per_process=0")
[ "$code" = 400 ] || fail "/api/v1/kernels?per_process=0: HTTP $code, want 400"

# ---- sorting: memory (the default), SM share, PID.
wait_screen main "^ *$A " || { dump main; fail "process $A not listed"; }
order() { # SESSION PID... : the pids' rows are in this order
	local s=$1 prev=0 r
	shift
	for p in "$@"; do
		r=$(row_of "$s" "$p")
		[ -n "$r" ] && [ "$r" -gt "$prev" ] || return 1
		prev=$r
	done
}
# The owner comes from gpulsed (/api/v1/gpus "uid"), the name from this host.
uid=$(fetch /api/v1/gpus | python3 -c '
import json, sys
p = [x for x in json.load(sys.stdin)["data"]["gpus"][0]["processes"] if x["pid"] == '"$A"']
print(p[0]["uid"] if p else "none")')
[ "$uid" = "$(id -u)" ] || fail "/api/v1/gpus: uid of $A is $uid, want $(id -u)"
user=$(id -un | cut -c1-7)
wait_screen main "^ *$A $user" || { dump main; fail "the USER column of $A does not show $user"; }
order main "$VICTIM" "$B" "$A" 1 || { dump main; fail "memory order: want $VICTIM $B $A 1"; }
keys main P
wait_screen main 'SM%▼' || { dump main; fail "no sort mark on SM%"; }
wait_for 'order main "$A" "$B" "$VICTIM" 1' || { dump main; fail "SM order: want $A $B $VICTIM 1"; }
keys main N
wait_screen main 'PID▼' || { dump main; fail "no sort mark on PID"; }
read -r -a by_pid <<<"$(printf '%s\n' 1 "$VICTIM" "$A" "$B" "$INJ" | sort -n | tr '\n' ' ')"
wait_for 'order main "${by_pid[@]}"' || { dump main; fail "PID order: want ${by_pid[*]}"; }
keys main N
wait_screen main 'PID▲' || { dump main; fail "N twice does not reverse"; }
read -r -a by_pid_rev <<<"$(printf '%s\n' "${by_pid[@]}" | sort -rn | tr '\n' ' ')"
wait_for 'order main "${by_pid_rev[@]}"' || { dump main; fail "reversed PID order: want ${by_pid_rev[*]}"; }
keys main M

# ---- the filter narrows the list, Esc widens it again.
keys main /
keys main -l 'sleep 301'
wait_screen main 'Filter: sleep 301_' || { dump main; fail "no filter prompt"; }
wait_for '[ -z "$(row_of main "$A")" ] && [ -z "$(row_of main "$VICTIM")" ] && [ -n "$(row_of main "$B")" ]' ||
	{ dump main; fail "the filter 'sleep 301' does not narrow the list to $B"; }
keys main Enter
wait_screen main '/:filter\(sleep 301\)' || { dump main; fail "the kept filter is not shown"; }
keys main Escape
wait_for '[ -n "$(row_of main "$A")" ] && [ -n "$(row_of main "$VICTIM")" ]' ||
	{ dump main; fail "Esc does not clear the filter"; }

# ---- the layout follows the terminal's size.
grep -Eq '^tensor +\[.*DRAM +\[' <<<"$(screen main)" || { dump main; fail "80x24: want two bar columns"; }
"${TM[@]}" resize-window -t main -x 120 -y 40
wait_screen main '^util +\[.*SM +\[.*tensor +\[' || { dump main; fail "120x40: want three bar columns"; }
h120=$(screen main | grep -c '│' || true)
"${TM[@]}" resize-window -t main -x 80 -y 24
wait_screen main '^tensor +\[.*DRAM +\[' || { dump main; fail "back at 80x24: want two bar columns"; }
h80=$(screen main | grep -c '│' || true)
[ "$h120" -gt "$h80" ] || fail "the graph is not taller at 120x40 ($h120 rows) than at 80x24 ($h80)"

# ---- help overlay: on with h, off with any key.
keys main h
wait_screen main 'gpulse top: keys' || { dump main; fail "no help overlay"; }
wait_screen main 'k, F9 +send a signal' || { dump main; fail "the help lacks the signal key"; }
keys main x
wait_screen_gone main 'gpulse top: keys' || { dump main; fail "the help does not close"; }

# ---- signals: the dialog, cancel, a chosen signal, the default, a refusal.
keys main / "$VICTIM" Enter
wait_for '[ -n "$(row_of main "$VICTIM")" ]' || { dump main; fail "filter on $VICTIM"; }
keys main Home
keys main k
wait_screen main "Send a signal to PID $VICTIM" || { dump main; fail "no signal dialog"; }
wait_screen main '15 SIGTERM \(default\)' || { dump main; fail "SIGTERM is not the default"; }
keys main Enter
wait_screen main "Send SIGTERM \(15\) to PID $VICTIM .*\[y/N\]" || { dump main; fail "no confirmation"; }
keys main n
wait_screen main 'cancelled: no signal sent' || { dump main; fail "no word of the cancel"; }
sleep 0.3
[ ! -s "$WORK/sig" ] || fail "a cancelled dialog sent a signal: $(cat "$WORK/sig")"
kill -0 "$VICTIM" || fail "the victim died on a cancelled dialog"

keys main k
wait_screen main "Send a signal to PID $VICTIM" || { dump main; fail "no signal dialog (2)"; }
keys main Down Down Down Down Enter
wait_screen main "Send SIGUSR1 \(10\) to PID $VICTIM" || { dump main; fail "SIGUSR1 not chosen"; }
keys main y
wait_screen main "sent SIGUSR1 to PID $VICTIM" || { dump main; fail "no word of SIGUSR1 sent"; }
wait_for 'grep -q USR1 "$WORK/sig"' || fail "the victim did not get SIGUSR1"

keys main k
wait_screen main "Send a signal to PID $VICTIM" || { dump main; fail "no signal dialog (3)"; }
keys main Enter y
wait_screen main "sent SIGTERM to PID $VICTIM" || { dump main; fail "no word of SIGTERM sent"; }
wait_for 'grep -q TERM "$WORK/sig"' || fail "the victim did not get SIGTERM"
wait_for '! kill -0 "$VICTIM" 2>/dev/null' || fail "the victim did not exit on SIGTERM"

keys main Escape N / 1 Enter
wait_for '[ -n "$(row_of main 1)" ]' || { dump main; fail "filter on pid 1"; }
keys main Home k  # by PID, 1 comes first
wait_screen main 'refused: PID 1 cannot be signalled' || { dump main; fail "PID 1 not refused"; }
keys main Escape

# ---- a process of another user: refused with the reason, nothing sent.
# Needs root, to run top as nobody; said when not run.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	"${TM[@]}" new-session -d -s other -x 80 -y 24 \
		env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$GPULSE" top --url "$URL" --filter "$A" \
		\; set-option -t other remain-on-exit on
	wait_for '[ -n "$(row_of other "$A")" ]' || { dump other; fail "nobody's top does not list $A"; }
	keys other Home k
	wait_screen other "Send a signal to PID $A" || { dump other; fail "no signal dialog as nobody"; }
	keys other Enter y
	wait_screen other "not permitted: PID $A belongs to root \(you are uid 65534\); no SIGTERM sent" ||
		{ dump other; fail "no clear refusal for another user's process"; }
	kill -0 "$A" || fail "$A died although the signal was refused"
	"${TM[@]}" kill-session -t other
else
	echo "note: not root, so the refusal of another user's process (EPERM) is not exercised"
fi

# ---- ASCII without a UTF-8 locale, monochrome with --no-color.
start_top ascii 80 24 LANG=C LC_ALL=C TERM=screen -- --no-color --delay 0.5
wait_screen ascii '^GPU 0 NVIDIA' || { dump ascii; fail "LANG=C: no GPU header"; }
wait_screen ascii 'every 0\.5s' || { dump ascii; fail "--delay 0.5 is not the refresh"; }
wait_screen ascii '^util +\[\|+' || { dump ascii; fail "LANG=C: the util bar is not drawn with |"; }
if screen ascii | LC_ALL=C grep -q '[^ -~]'; then
	dump ascii
	fail "LANG=C: the screen holds characters beyond ASCII"
fi
"${TM[@]}" capture-pane -e -p -t ascii >"$WORK/mono.txt"
"${TM[@]}" capture-pane -e -p -t main >"$WORK/color.txt"
grep -qE $'\e\\[([0-9;]*;)?3[1-7](;[0-9;]*)?m' "$WORK/color.txt" ||
	fail "the colour screen has no colour (capture-pane -e)"
! grep -qE $'\e\\[([0-9;]*;)?[34][0-7](;[0-9;]*)?m' "$WORK/mono.txt" ||
	fail "--no-color still paints colours"
"${TM[@]}" kill-session -t ascii

# ---- a gpulsed that never answers does not freeze the screen: keys work
# while the request hangs, and it times out as "disconnected".
python3 - "$WORK/hole.port" <<'PY' &
import signal, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)  # connections complete in the backlog; nothing is ever read or sent
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
signal.pause()  # not time.sleep: libfaketime's shifted stages break it
PY
PIDS+=($!)
wait_for '[ -s "$WORK/hole.port" ]' || fail "no black-hole listener"
URL_SAVED=$URL
URL="http://127.0.0.1:$(cat "$WORK/hole.port")"
start_top hole 80 24 LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen
wait_screen hole 'connecting' 5 || { dump hole; fail "no 'connecting' while the first answer is awaited"; }
keys hole h
wait_screen hole 'gpulse top: keys' 2 || { dump hole; fail "keys are not handled while a request hangs"; }
keys hole x
wait_screen hole 'disconnected [0-9]+s, retrying' 10 ||
	{ dump hole; fail "a gpulsed that never answers is not shown as disconnected"; }
wait_screen hole '^gpulsed at .* did not answer within [0-9]+ ms' 5 ||
	{ dump hole; fail "the footer does not say why"; }
keys hole q
wait_for 'pane_ended hole' || { dump hole; fail "q does not quit while requests hang"; }
[ "$(pane_state hole)" = "exit 0" ] || fail "top's exit against a silent gpulsed: $(pane_state hole)"
URL=$URL_SAVED

# ---- gpulsed stops: "disconnected", the last values kept; it comes back.
power_line=$(screen main | grep -E '^mem .*power' | head -n1)
kill -TERM "$DAEMON_PID"
wait_for '! kill -0 "$DAEMON_PID" 2>/dev/null' || fail "gpulsed did not stop"
wait_screen main 'disconnected [0-9]+s, retrying' 10 || { dump main; fail "no 'disconnected'"; }
wait_screen main '^cannot reach gpulsed at ' 5 || { dump main; fail "the footer does not say why"; }
screen main | grep -qF "$power_line" || { dump main; fail "the last values are gone when disconnected"; }
keys main q
: >"$WORK/again.log"
"$GPULSED" --listen "127.0.0.1:$PORT" --config "$WORK/g.yml" --nvml-library "$FAKE_NVML" \
	2>"$WORK/again.log" &
PIDS+=($!)
wait_for 'curl -sf --max-time 1 "$URL/healthz" >/dev/null' || fail "the restarted gpulsed does not serve"
t0=$(date +%s.%N)
start_top back 80 24 LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen
wait_screen back '^GPU 0 NVIDIA' 15 || { dump back; fail "no GPU header from the restarted gpulsed"; }
# The graph starts with the store's past (the first gpulsed's samples):
# more filled columns than seconds since this top started.
screen back >"$WORK/back.txt"
python3 - "$WORK/back.txt" "$t0" "$(date +%s.%N)" <<'PY' || { dump back; fail "the graph did not start from the store's history"; }
import sys
rows = [l for l in open(sys.argv[1], encoding="utf-8") if l.startswith("  0%\u2502")]
cols = sum(1 for c in rows[0].rstrip("\n")[5:] if c != " ") if rows else 0
elapsed = float(sys.argv[3]) - float(sys.argv[2])
print("graph columns at start: %d, %.1f s after start" % (cols, elapsed))
sys.exit(0 if cols > elapsed + 2 else 1)
PY
# And one that outlives a restart: down, then up again on the same port.
# The next gpulsed starts once this one has exited: while it still holds
# the port and the store (a loaded machine stops it slowly), the next one
# could not start, and top had nothing to reconnect to.
gone=${PIDS[-1]}
kill -TERM "$gone"
wait_screen back 'disconnected' 10 || { dump back; fail "no 'disconnected' (second time)"; }
wait_for '! kill -0 "$gone" 2>/dev/null' || fail "the restarted gpulsed did not stop"
"$GPULSED" --listen "127.0.0.1:$PORT" --config "$WORK/g.yml" --nvml-library "$FAKE_NVML" \
	2>>"$WORK/again.log" &
PIDS+=($!)
wait_for 'curl -sf --max-time 1 "$URL/healthz" >/dev/null' ||
	fail "gpulsed did not start again: $(tail -n 5 "$WORK/again.log")"
wait_screen_gone back 'disconnected' 15 || { dump back; fail "top did not reconnect"; }
wait_screen back '^GPU 0 NVIDIA' || { dump back; fail "no GPU header after reconnecting"; }
keys back q
wait_for 'pane_ended back' || { dump back; fail "q does not quit"; }
[ "$(pane_state back)" = "exit 0" ] || { dump back; fail "top's exit: $(pane_state back), want status 0"; }
wait_for 'pane_ended main'
[ "$(pane_state main)" = "exit 0" ] || { dump main; fail "the first top's exit: $(pane_state main)"; }

# ---- a replay of one recorded row: the recording counts one process but
# carries no process list. gpulse status and top say the same of it (top
# said "no processes" where status said "1 running").
start_daemon replay --replay "$WORK/row.csv"
wait_for '"$GPULSE" status --url "$URL" | grep -q "processes"' || fail "replay: no status"
"$GPULSE" status --url "$URL" >"$WORK/replay-status.txt" || fail "replay: status failed"
grep -Eq 'processes +1 running \(the recording has no process details\)' "$WORK/replay-status.txt" ||
	fail "replay: status: $(cat "$WORK/replay-status.txt")"
start_top replay 100 30 LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen
wait_screen replay '^ +1 running on the GPUs \(the recording has no process details\)' ||
	{ dump replay; fail "replay: top does not say what status says"; }
screen replay | grep -q 'no processes' && { dump replay; fail "replay: top says no processes"; }
keys replay q
wait_for 'pane_ended replay' || { dump replay; fail "q does not quit (replay)"; }

# ---- --gpu of a GPU the host lacks: refused as gpulse diagnose refuses
# it (exit 1, naming the GPUs there are), before the screen is taken.
set +e
"$GPULSE" top --url "$URL" --gpu 5 </dev/null >"$WORK/g5.out" 2>"$WORK/g5.err"; rc=$?
set -e
[ "$rc" = 1 ] || fail "top --gpu 5 on a 1-GPU host: exit $rc, want 1: $(cat "$WORK/g5.err")"
grep -q "no GPU 5 at $URL (its GPUs: 0)" "$WORK/g5.err" || fail "top --gpu 5: $(cat "$WORK/g5.err")"
"$GPULSE" diagnose --url "$URL" --gpu 5 >/dev/null 2>"$WORK/d5.err" && fail "diagnose --gpu 5 succeeded"
[ "$(sed 's/^gpulse [a-z]*: //' "$WORK/g5.err")" = "$(sed 's/^gpulse [a-z]*: //' "$WORK/d5.err")" ] ||
	fail "top and diagnose refuse --gpu 5 differently: $(cat "$WORK/g5.err" "$WORK/d5.err")"
# A GPU it has gets past the check (to the terminal check, here).
set +e
"$GPULSE" top --url "$URL" --gpu 0 </dev/null >/dev/null 2>"$WORK/g0.err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q 'needs a terminal' "$WORK/g0.err" || fail "top --gpu 0: exit $rc: $(cat "$WORK/g0.err")"
echo "ok"
