#!/usr/bin/env bash
# Bytes per GPU-hour: remote write's summary mode against scraping
# /metrics at 10 Hz (issue 18, item 7). Replays the bundled H200
# recording (one GPU) in gpulsed with storage for 15 s, measures one
# /metrics response (plain and gzip, as Prometheus asks for it) and every
# stored series' sample rate, then runs bench_edge_bytes over one
# simulated hour of those series (0 and 15 minutes with the GPU hot: 15
# is GPUFallenOffBus's keep_firing_for, the longest of the bundled
# faults). Run by hand: bench/edge_bytes.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/gpulse-edge.XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$build/gpulsed" --listen 127.0.0.1:0 --replay "$src/data/recordings/h200-phases-10hz.csv" \
	--storage-path "$work/db" 2>"$work/log" &
pid=$!
for _ in $(seq 1 100); do
	port=$(sed -n 's/.*serving http:\/\/.* port \([0-9]*\) .*/\1/p' "$work/log" | head -n1)
	[ -n "$port" ] && break
	sleep 0.1
done
url="http://127.0.0.1:$port"
sleep 15
plain=$(curl -s "$url/metrics" | wc -c)
gz=$(curl -s "$url/metrics" | gzip -6 -c | wc -c)  # as if served gzip'd
curl -s "$url/api/v1/query" --data-urlencode 'query={__name__=~".+"}[10s]' |
	python3 -c '
import json, sys
for r in json.load(sys.stdin)["data"]["result"]:
    m = r["metric"]
    print("%g\t%s" % (len(r["values"]) / 10, "\x1f".join("%s=%s" % kv for kv in sorted(m.items()))))
' >"$work/series.txt"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ); nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
echo "/metrics: $plain bytes plain, $gz bytes gzip; 10 Hz for an hour: $((plain * 36000)) plain, $((gz * 36000)) gzip"
for hot in 0 15; do
	out=$("$build/bench/bench_edge_bytes" "$work/series.txt" "$hot")
	echo "$out"
	b=$(sed -n 's/.* \([0-9]*\) bytes per GPU-hour/\1/p' <<<"$out")
	python3 -c "import sys; b,p,g=map(int,sys.argv[1:]); print(f'  ratio to 10 Hz scraping: {b/p:.5f} of plain (1/{p/b:.0f}), {b/g:.5f} of gzip (1/{g/b:.0f})')" "$b" "$((plain * 36000))" "$((gz * 36000))"
done
