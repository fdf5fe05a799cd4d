# gpulse report capacity against gpulsed (fake NVML replaying the bundled
# H200 recording into a store): the JSON figures of the CLI (--url) agree
# with figures this test computes itself from the raw samples gpulsed
# serves (per-second slot means, nearest-rank percentiles of SM activity,
# idle seconds, the band's shares, memory high-water); --db on the same
# file while gpulsed writes it gives the same figures and leaves gpulsed
# serving and storing; text and HTML carry them; the edges (no store, an
# empty range, bad options, gpulsed unreachable) are answered plainly.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

cat >"$WORK/r.yml" <<YML
sampling:
  fast: 100ms
  normal: 250ms
diagnosis:
  window: 1s
storage:
  path: $WORK/store.db
  flush_interval: 1s
YML
# Fast enough that the short range holds idle and busy phases.
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_SPEED=4
start_daemon report --config "$WORK/r.yml" --nvml-library "$FAKE_NVML"
PORT_MAIN=$PORT
wait_for '[ "$(fetch "/api/v1/query?query=count_over_time(gpulse_gpu_sm_active_ratio%5B1m%5D)" | python3 -c "import json,sys; r=json.load(sys.stdin)[\"data\"][\"result\"]; print(int(float(r[0][\"value\"][1])) if r else 0)")" -ge 20 ]' ||
	fail "no SM activity stored"
sleep 1
T=$(($(date +%s) - 2))
SPAN=8

"$GPULSE" report capacity --url "$URL" --until "$T" --since "${SPAN}s" --step 1s --format json \
	>"$WORK/url.json" || fail "report --url"
fetch "/api/v1/query?query=gpulse_gpu_sm_active_ratio%5B$((SPAN + 1))s%5D&time=$T" >"$WORK/sm.json"
fetch "/api/v1/query?query=gpulse_gpu_utilization_ratio%5B$((SPAN + 1))s%5D&time=$T" >"$WORK/util.json"
fetch "/api/v1/query?query=gpulse_gpu_memory_used_bytes%5B$((SPAN + 1))s%5D&time=$T" >"$WORK/mem.json"

check() {
	python3 - "$1" "$T" "$SPAN" "$WORK/sm.json" "$WORK/util.json" "$WORK/mem.json" <<'PY' || fail "figures of $1 ($(head -c 3000 "$1"))"
import json, math, sys
rep = json.load(open(sys.argv[1]))
T, span = int(sys.argv[2]), int(sys.argv[3])
start = T - span
def slots(path, agg):
    res = json.load(open(path))["data"]["result"]
    assert len(res) == 1, res
    b = {}
    for t, v in res[0]["values"]:
        t = float(t)
        if start <= t < T and v not in ("NaN",):
            b.setdefault(int(math.floor(t - start)), []).append(float(v))
    return {k: agg(v) for k, v in b.items()}
mean = lambda v: sum(v) / len(v)
sm, util, mem = slots(sys.argv[4], mean), slots(sys.argv[5], mean), slots(sys.argv[6], max)
def nr(v, p):
    v = sorted(v)
    return v[max(1, math.ceil(p / 100 * len(v))) - 1]
g = rep["gpus"]
assert len(g) == 1, len(g)
g = g[0]
assert rep["slots"] == span, rep["slots"]
assert g["gpm"] is True and g["busy_metric"] == "sm_active"
assert g["busy"]["slots"] == len(sm), (g["busy"]["slots"], len(sm))
for p in ("p50", "p95", "p99"):
    want = nr(list(sm.values()), int(p[1:]))
    assert abs(g["busy"][p] - want) < 1e-6, (p, g["busy"][p], want)
covered = set(sm) | set(util)
assert abs(g["covered_h"] * 3600 - len(covered)) < 1e-6, (g["covered_h"] * 3600, len(covered))
idle = sum(1 for k in covered if (util[k] if k in util else sm[k]) < 0.05)
assert abs(g["idle_h"] * 3600 - idle) < 1e-6, (g["idle_h"] * 3600, idle)
assert abs(g["memory_high_bytes"] - max(mem.values())) < 1, (g["memory_high_bytes"], max(mem.values()))
h = rep["hosts"][0]
below = sum(1 for v in sm.values() if v < 0.70) / len(sm)
above = sum(1 for v in sm.values() if v > 0.80) / len(sm)
assert abs(h["below_share"] - below) < 1e-9 and abs(h["above_share"] - above) < 1e-9, (h, below, above)
assert rep["enough_history"] is False
assert any("too little history" in n for n in rep["notes"]), rep["notes"]
assert rep["recommendations"] == []
assert "raw samples" in rep["resolution"], rep["resolution"]
PY
}
check "$WORK/url.json"

# The same store file, read directly while gpulsed writes it.
before=$(metric gpulse_storage_samples_appended_total)
"$GPULSE" report capacity --db "$WORK/store.db" --until "$T" --since "${SPAN}s" --step 1s --format json \
	>"$WORK/db.json" || fail "report --db"
check "$WORK/db.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["source"]["kind"]=="store", d["source"]' "$WORK/db.json" ||
	fail "--db source kind"
wait_for '[ "$(metric gpulse_storage_samples_appended_total)" -gt "$before" ]' ||
	fail "gpulsed stopped storing after the --db report ($before -> $(metric gpulse_storage_samples_appended_total))"
[ "$(metric gpulse_storage_errors_total)" = 0 ] || fail "storage errors after the --db report"
has /healthz '^ok' || fail "gpulsed not healthy after the --db report"

# Text and HTML carry the same report.
"$GPULSE" report capacity --url "$URL" --until "$T" --since "${SPAN}s" --step 1s >"$WORK/r.txt" ||
	fail "text report"
grep -q '^GPUS' "$WORK/r.txt" && grep -q 'too little history' "$WORK/r.txt" &&
	grep -q 'NVIDIA H200' "$WORK/r.txt" || fail "text report: $(cat "$WORK/r.txt")"
"$GPULSE" report capacity --url "$URL" --until "$T" --since "${SPAN}s" --step 1s --format html \
	-o "$WORK/r.html" || fail "html report"
[ "$(grep -o '<svg' "$WORK/r.html" | wc -l)" -ge 5 ] || fail "html: fewer than 5 charts"
[ "$(stat -c %s "$WORK/r.html")" -lt 1048576 ] || fail "html over 1 MB"
! grep -Eq '<script|src="http|href="http' "$WORK/r.html" || fail "html is not self-contained"
# The daily profile is drawn wherever the text has one: a mark for every
# hour of day with data. A few minutes of history is one hour, a single
# point, which a line alone never draws (the chart was empty).
python3 - "$WORK/r.txt" "$WORK/r.html" <<'PY' || fail "daily profile: $(grep -A30 chart-hours "$WORK/r.html")"
import re, sys
txt, html = open(sys.argv[1]).read(), open(sys.argv[2]).read()
m = re.search(r"by hour \(UTC 00-23\) (.{24})", txt)
assert m, "no daily profile in the text"
hours = [i for i, ch in enumerate(m.group(1)) if ch != " "]
assert hours, "the text's daily profile is empty"
svg = re.search(r'<svg[^>]*id="chart-hours".*?</svg>', html, re.S).group(0)
dots = re.findall(r'<circle class="d\d" cx="([\d.]+)" cy="([\d.]+)"', svg)
assert len(dots) == len(hours), (hours, dots)
# Each at the hour the text has, its x the hour's middle on the axis.
xs = sorted(round((float(x) - 50) / 650 * 24 - 0.5) for x, _ in dots)
assert xs == hours, (xs, hours)
paths = re.findall(r'<path class="l\d" d="([^"]*)"', svg)
assert paths and all(p.strip() for p in paths), paths
# A line joins neighbouring hours only: as many M as runs of hours.
runs = sum(1 for i, h in enumerate(hours) if i == 0 or hours[i - 1] != h - 1)
assert sum(p.count("M") for p in paths) == runs, (paths, hours)
PY

# The page in headless Chromium: every chart drawn, no console or page
# errors, nothing fetched, no scripts; dark mode and print change the
# colours (prefers-color-scheme, @media print).
CHECK="$GPULSE_SOURCE_DIR/tests/browser/check_page.js"
page() {
	node "$CHECK" "$WORK/r.html" --count 'svg.chart' --count '#chart-distribution' \
		--count '#chart-hours' --count '#chart-idle' --count '#chart-memory' --count '#chart-band' \
		--count '#chart-bottlenecks' --count 'svg.chart rect, svg.chart polyline' --count '#chart-hours circle' \
		--eval 'getComputedStyle(document.body).backgroundColor' --eval 'document.scripts.length' "$@"
}
for mode in light dark print; do
	flag=()
	[ "$mode" = dark ] && flag=(--dark)
	[ "$mode" = print ] && flag=(--dark --print)
	page "${flag[@]}" --screenshot "$WORK/$mode.png" >"$WORK/$mode.page.json" ||
		fail "chromium could not open the report ($mode): $(cat "$WORK/$mode.page.json")"
	[ -s "$WORK/$mode.png" ] || fail "no screenshot ($mode)"
done
python3 - "$WORK" <<'PY' || fail "the page in chromium: $(cat "$WORK"/*.page.json)"
import json, sys
w = sys.argv[1]
pages = {m: json.load(open(f"{w}/{m}.page.json")) for m in ("light", "dark", "print")}
for m, p in pages.items():
    assert p["console_errors"] == [] and p["page_errors"] == [], (m, p)
    assert p["failed_requests"] == [], (m, p["failed_requests"])
    c = p["counts"]
    assert c["svg.chart"] == 6, (m, c)
    for sel in ("#chart-distribution", "#chart-hours", "#chart-idle", "#chart-memory", "#chart-band", "#chart-bottlenecks"):
        assert c[sel] == 1, (m, sel, c)
    assert c["svg.chart rect, svg.chart polyline"] > 20, (m, c)
    assert c["#chart-hours circle"] >= 1, (m, c)
    assert p["evals"][1] == 0, (m, "scripts", p["evals"])
assert pages["light"]["evals"][0] != pages["dark"]["evals"][0], "dark mode did not change the background"
assert pages["print"]["evals"][0] == pages["light"]["evals"][0], "print is not on white"
PY

# Edges, each said plainly.
out=$("$GPULSE" report capacity --db "$WORK/none.db" 2>&1) && fail "a missing store succeeded"
grep -q 'no such store' <<<"$out" || fail "missing store: $out"
[ ! -e "$WORK/none.db" ] || fail "a missing store was created"
"$GPULSE" report capacity --url "$URL" --until "$((T - 86400))" --since 1h --format json >"$WORK/empty.json" ||
	fail "an empty range failed"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["gpus"]==[] and any("no data" in n for n in d["notes"]), d["notes"]' "$WORK/empty.json" ||
	fail "empty range: $(cat "$WORK/empty.json")"
# One GPU on one host is said in the singular (was "1 GPUs on 1 hosts").
printf 'storage:\n  path: %s\n' "$WORK/one.db" >"$WORK/one.yml"
start_daemon onegpu --config "$WORK/one.yml" --replay "$REC"
# (until the store holds the GPU's first samples: its row)
wait_for '"$GPULSE" fleet --prometheus "$URL" --since 1m >"$WORK/fleet1.txt" 2>&1 && grep -q REPLAY- "$WORK/fleet1.txt"' ||
	fail "fleet against one gpulsed: $(cat "$WORK/fleet1.txt")"
tail -n1 "$WORK/fleet1.txt" | grep -q '^1 GPU on 1 host: 0 not ok, 0 outliers ' ||
	fail "fleet summary of one GPU: $(tail -n1 "$WORK/fleet1.txt")"
kill -TERM "$DAEMON_PID"
start_daemon nostore --replay "$REC"
NOSTORE=$URL
URL="http://127.0.0.1:${PORT_MAIN:?}"
set +e
"$GPULSE" report capacity --url "$NOSTORE" --since 1m 2>"$WORK/nostore.txt"
[ $? = 1 ] || fail "a gpulsed without storage is not a runtime failure"
"$GPULSE" report capacity --target 0.9-0.1 --url "$URL" 2>"$WORK/err.txt"
[ $? = 2 ] || fail "a bad --target is not a usage error"
"$GPULSE" report capacity --url http://127.0.0.1:1 --since 1m 2>"$WORK/err2.txt"
[ $? = 1 ] || fail "an unreachable gpulsed is not a runtime failure"
"$GPULSE" report capacity --prometheus http://127.0.0.1:1 --since 1m 2>"$WORK/err4.txt"
[ $? = 1 ] || fail "an unreachable Prometheus is not a runtime failure"
"$GPULSE" fleet --prometheus http://127.0.0.1:1 2>"$WORK/err5.txt"
[ $? = 1 ] || fail "fleet: an unreachable Prometheus is not a runtime failure"
"$GPULSE" report utilisation 2>"$WORK/err3.txt"
[ $? = 2 ] || fail "an unknown report is not a usage error"
set -e
grep -q -- '--target' "$WORK/err.txt" || fail "bad target: $(cat "$WORK/err.txt")"
grep -q 'storage is disabled' "$WORK/nostore.txt" || fail "no storage: $(cat "$WORK/nostore.txt")"
grep -q 'cannot reach gpulsed at http://127.0.0.1:1' "$WORK/err2.txt" || fail "unreachable: $(cat "$WORK/err2.txt")"
# A Prometheus is named as one, without gpulsed's 'make run' hint.
for f in err4 err5; do
	grep -q 'cannot reach Prometheus at http://127.0.0.1:1' "$WORK/$f.txt" || fail "$f: $(cat "$WORK/$f.txt")"
	! grep -q 'gpulsed\|make run' "$WORK/$f.txt" || fail "$f names gpulsed: $(cat "$WORK/$f.txt")"
done
grep -q 'capacity' "$WORK/err3.txt" || fail "unknown report: $(cat "$WORK/err3.txt")"
echo "ok"
