#!/usr/bin/env bash
# Samples lost by gpulsed's store under faults (issue 14, items 4 and 5),
# measured by hand (docs/RELIABILITY.md, "Storage faults"); not a test.
#
#   bench/storage_faults.sh [BUILD_DIR] [KILL_RUNS]
#
# gpulsed replays the bundled H200 recording (10 Hz fast tier) into a store
# with storage.flush_interval 1s; lost samples are counted on the stored
# series gpulse_gpu_power_watts{gpu="0"} (read back raw through
# /api/v1/query with a range selector) as gaps in its 100 ms cadence.
#   1. kill -9 runs: KILL_RUNS (default 10) times, gpulsed runs 3-8 s
#      (random) and is killed; per run: samples lost beyond one flush
#      interval before the kill (rows missing in [start + 1 s, kill - 1 s];
#      goal 0) and the stretch lost at the end (kill time - newest stored
#      sample: up to a flush interval, plus the flush's duration, plus a
#      sampling period or a gap of the recording).
#   2. disk-full run (root: a tmpfs): the disk fills 5 s into a run and
#      stays full 10 s (flushes fail, samples wait in memory), then space
#      returns; gaps over the whole run (goal 0) and storage errors.
#   3. start on a full disk: gpulsed starts without history, space returns
#      after 6 s, the store opens within storage.retry_interval (2 s
#      here); samples before it opened are not stored (by design), gaps
#      after it opened (goal 0).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build-s}
RUNS=${2:-10}
GPULSED=$B/gpulsed
REC=$ROOT/data/recordings/h200-phases-10hz.csv
W=$(mktemp -d /tmp/gpulse-faults.XXXXXX)
MNT=""
PID=""
finish() {
	[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null || true
	[ -n "$MNT" ] && umount "$MNT" 2>/dev/null || true
	rm -rf "$W"
}
trap finish EXIT
now_ms() { date +%s%3N; }

# start NAME DB [RETRY] : gpulsed on DB; sets PID and URL.
start() {
	local name=$1 db=$2 retry=${3:-30s}
	printf 'storage:\n  path: %s\n  flush_interval: 1s\n  retry_interval: %s\n' "$db" "$retry" >"$W/$name.yml"
	: >"$W/$name.log"
	"$GPULSED" --config "$W/$name.yml" --listen 127.0.0.1:0 --replay "$REC" 2>"$W/$name.log" &
	PID=$!
	local port=""
	for _ in $(seq 100); do
		port=$(sed -n 's/.*serving http[s]*:\/\/.* port \([0-9]*\) .*/\1/p' "$W/$name.log" | head -n1)
		[ -n "$port" ] && break
		sleep 0.1
	done
	[ -n "$port" ] || { cat "$W/$name.log"; exit 1; }
	URL=http://127.0.0.1:$port
}
stop() { kill -TERM "$PID"; wait "$PID" || true; PID=""; }
metric() { curl -sf "$URL/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }

# dump DB OUT : the stored samples of the series, as "t_ms" lines.
dump() {
	start dump "$1"
	local t
	t=$(python3 -c 'import time; print(time.time())')
	curl -sf -G "$URL/api/v1/query" --data-urlencode 'query=gpulse_gpu_power_watts{gpu="0"}[2h]' \
		--data-urlencode "time=$t" >"$W/q.json"
	python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["data"]["result"]
for ts, v in (r[0]["values"] if r else []):
    print(round(float(ts) * 1000), v)' "$W/q.json" >"$2"
	stop
}

# gaps FILE FROM_MS TO_MS : samples missing from the 100 ms cadence in
# [FROM, TO] (a gap of dt holds round(dt / 100) - 1 missing samples),
# and the newest stored sample.
gaps() {
	python3 - "$@" <<'PY'
import sys
ts = [int(l.split()[0]) for l in open(sys.argv[1]) if l.strip()]
lo, hi = int(sys.argv[2]), int(sys.argv[3])
w = [t for t in ts if lo <= t <= hi]
miss = sum(max(0, round((b - a) / 100) - 1) for a, b in zip(w, w[1:]))
for a, b in zip(w, w[1:]):
    if b - a > 140:
        print("gap: %d ms after %d" % (b - a, a), file=sys.stderr)
print(miss, len(w), max(w) if w else 0)
PY
}

# rows FILE FROM_MS TO_MS : recording rows missing among the stored
# samples in [FROM, TO], by their values: each stored value should be the
# recording's next power_w (the replay publishes every row in order); a
# jump of the timestamps alone may be the replay's pacing, not a loss.
rows() {
	python3 - "$REC" "$@" <<'PY'
import csv, sys
rec = [float(r["power_w"]) for r in csv.DictReader(open(sys.argv[1]))]
lo, hi = int(sys.argv[3]), int(sys.argv[4])
st = [(int(t), float(v)) for t, v in (l.split() for l in open(sys.argv[2]) if l.strip())]
vs = [v for t, v in st if lo <= t <= hi]
n = len(rec)
def start():
    for p in range(n):
        if all(rec[(p + k) % n] == vs[k] for k in range(min(20, len(vs)))):
            return p
    return None
p = start() if vs else None
miss = 0
if p is None and vs:
    print("unaligned", len(vs)); sys.exit()
for v in vs[1:]:
    j = 1
    while j < n and rec[(p + j) % n] != v:
        j += 1
    miss += j - 1
    p = (p + j) % n
print(miss, len(vs))
PY
}

echo "== gpulsed $("$GPULSED" --version 2>&1 | head -n1); $(nproc) CPUs; $(uname -r); $(date -u +%FT%TZ)"
echo "== 1. kill -9 runs ($RUNS), flush_interval 1s"
DB=$W/kill.db
declare -a S K
for i in $(seq "$RUNS"); do
	start "kill$i" "$DB"
	S[i]=$(now_ms)
	sleep "$(python3 -c 'import random; print(round(random.uniform(3, 8), 2))')"
	K[i]=$(now_ms)
	kill -9 "$PID"
	wait "$PID" 2>/dev/null || true
	PID=""
done
dump "$DB" "$W/kill.txt"
tot_beyond=0
tot_cadence=0
worst_end=0
for i in $(seq "$RUNS"); do
	read -r miss n _ < <(gaps "$W/kill.txt" $((S[i] + 1000)) $((K[i] - 1000)))
	read -r _ _ newest < <(gaps "$W/kill.txt" "${S[i]}" "${K[i]}")
	end=$((K[i] - newest))
	[ "$end" -gt "$worst_end" ] && worst_end=$end
	read -r rmiss _ < <(rows "$W/kill.txt" $((S[i] + 1000)) $((K[i] - 1000)))
	tot_beyond=$((tot_beyond + rmiss))
	tot_cadence=$((tot_cadence + miss))
	echo "run $i: $n samples stored in [start+1s, kill-1s], $miss missing by the cadence, $rmiss rows by value; lost at the end: $end ms ($((end / 100)) samples)"
done
echo "kill -9: $tot_beyond samples (recording rows, by value) lost beyond one flush interval over $RUNS runs ($tot_cadence by the 100 ms cadence, which counts the recording's own 197 ms gaps); worst end loss $worst_end ms"

if [ "$(id -u)" != 0 ] || ! { MNT=$(mktemp -d /tmp/gpulse-faults-mnt.XXXXXX) && mount -t tmpfs -o size=8m tmpfs "$MNT"; }; then
	echo "== 2, 3: skipped (needs root for a tmpfs)"
	exit 0
fi
echo "== 2. disk full for 10 s during a run"
start full "$MNT/full.db"
s=$(now_ms)
sleep 5
dd if=/dev/zero of="$MNT/filler" bs=4k status=none 2>/dev/null || true
dd if=/dev/zero of="$MNT/filler2" bs=1 status=none 2>/dev/null || true
sleep 10
errs=$(metric gpulse_storage_errors_total)
rm -f "$MNT/filler" "$MNT/filler2"
sleep 5
e=$(now_ms)
stop
cp "$MNT/full.db" "$W/full.db"
dump "$W/full.db" "$W/full.txt"
read -r miss n _ < <(gaps "$W/full.txt" $((s + 1000)) $((e - 1000)))
read -r rmiss _ < <(rows "$W/full.txt" $((s + 1000)) $((e - 1000)))
echo "disk full 10 s: $errs failed flushes; $n samples stored over the run, $miss missing by the 100 ms cadence, $rmiss recording rows missing by value"

echo "== 3. start on a full disk, space back after 6 s, retry_interval 2s"
rm -f "$MNT"/full.db*
dd if=/dev/zero of="$MNT/filler" bs=4k status=none 2>/dev/null || true
dd if=/dev/zero of="$MNT/filler2" bs=1 status=none 2>/dev/null || true
start pending "$MNT/new.db" 2s
s=$(now_ms)
sleep 6
rm -f "$MNT/filler" "$MNT/filler2"
freed=$(now_ms)
for _ in $(seq 100); do
	[ "$(metric gpulse_storage_available)" = 1 ] && break
	sleep 0.1
done
opened=$(now_ms)
sleep 5
e=$(now_ms)
att=$(metric gpulse_storage_open_attempts_total)
stop
cp "$MNT/new.db" "$W/new.db"
dump "$W/new.db" "$W/new.txt"
first=$(head -n1 "$W/new.txt" | cut -d' ' -f1)
read -r miss n _ < <(gaps "$W/new.txt" "$first" $((e - 1000)))
read -r rmiss _ < <(rows "$W/new.txt" "$first" $((e - 1000)))
echo "start on a full disk ($rmiss rows missing by value after it opened): opened $((opened - freed)) ms after space returned ($att attempts); first stored sample $((first - s)) ms after start (not stored before: $(((first - s) / 100)) samples, by design); after it opened $n stored, $miss missing"
