#!/usr/bin/env bash
# The web dashboard's first paint and weight on loopback: gpulsed --demo
# (the bundled recording, a temporary store) or, with GPUS=N, the fake
# NVML serving N GPUs; then RUNS loads of / in headless chromium, each in
# a fresh browser (a cold cache), through tests/browser/check_page.js
# --paint. Prints each run and the median and worst of: first paint and
# first contentful paint (Chromium's performance timing), the moment the
# first chart drew data (window.gpulseDash.drawnAt), load, and the bytes
# transferred; then the page's weight, asset by asset, as stored and as
# sent gzipped.
#   bench/dashboard_paint.sh BUILD_DIR [RUNS]     (GPUS=8 for 8 fake GPUs)
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
RUNS=${2:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHECK="$ROOT/tests/browser/check_page.js"
PORT=${PORT:-9467}
WORK=$(mktemp -d /tmp/gpulse-paint.XXXXXX)
if [ -n "${GPUS:-}" ]; then
	export GPULSE_FAKE_NVML_RECORDING="$ROOT/data/recordings/h200-phases-10hz.csv" GPULSE_FAKE_NVML_GPUS="$GPUS"
	"$B/gpulsed" --listen 127.0.0.1:$PORT --nvml-library "$B/fake_nvml/libnvidia-ml.so.1" \
		--storage-path "$WORK/db" --log-level warn &
else
	TMPDIR="$WORK" "$B/gpulsed" --demo --listen 127.0.0.1:$PORT --nvml-library "$WORK/none.so" --log-level warn &
fi
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT
URL="http://127.0.0.1:$PORT"
for _ in $(seq 1 100); do curl -sf "$URL/healthz" >/dev/null && break; sleep 0.1; done
sleep "${WARMUP:-10}"   # some history to draw
echo "gpulsed: $("$B/gpulsed" --version 2>&1 | head -n1); ${GPUS:-demo (1)} GPU(s); chromium: $(chromium --version 2>/dev/null | head -n1)"
for i in $(seq 1 "$RUNS"); do
	node "$CHECK" "$URL/" --paint \
		--do 'waitjs:window.gpulseDash && gpulseDash.drawnAt != null && gpulseDash.refreshes >= 1' \
		--do 'eval:gpulseDash.drawnAt' >"$WORK/run$i.json"
done
python3 - "$WORK" "$RUNS" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
rows = []
for i in range(1, runs + 1):
    d = json.load(open(f"{work}/run{i}.json"))
    assert not d["console_errors"] and not d["page_errors"], d
    p = d["paint"]
    rows.append((p["first_paint"], p["first_contentful_paint"], d["steps"][0], p["load"], p["transfer_bytes"]))
    print("run %2d: first paint %6.1f ms, first contentful paint %6.1f ms, first chart drawn %6.1f ms, load %6.1f ms, %d bytes"
          % (i, *rows[-1]))
for name, k in (("first paint", 0), ("first contentful paint", 1), ("first chart drawn", 2), ("load", 3)):
    v = [r[k] for r in rows]
    print("%-24s median %6.1f ms, worst %6.1f ms (%d runs)" % (name, statistics.median(v), max(v), runs))
print("transferred per load (page, assets and the first API answers): median %d bytes" % statistics.median(r[4] for r in rows))
PY
echo "--- page weight (as stored / as sent with Accept-Encoding: gzip)"
total=0; total_gz=0
for p in / /ui/app.js /ui/style.css /ui/favicon.svg /ui/vendor/uPlot.iife.min.js /ui/vendor/uPlot.min.css; do
	raw=$(curl -s -o /dev/null -w '%{size_download}' "$URL$p")
	gz=$(curl -s -o /dev/null -w '%{size_download}' -H 'Accept-Encoding: gzip' "$URL$p")
	printf '%-30s %7d %7d\n' "$p" "$raw" "$gz"
	total=$((total + raw)); total_gz=$((total_gz + gz))
done
printf '%-30s %7d %7d\n' "total" "$total" "$total_gz"
