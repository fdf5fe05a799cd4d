# The web dashboard at gpulsed's / in headless Chromium (Debian's chromium,
# driven by tests/browser/check_page.js): gpulsed on the fake NVML with two
# GPUs replaying two different bundled recordings, a temporary store, a
# rule file with one firing and one pending alert, and the synthetic
# injection library sending kernels. The page loads with no console error;
# every chart draws points from /api/v1/query_range; the value a chart
# shows is what /api/v1/query returns at the chart's end; the GPU picker
# and the range picker change what is queried and drawn; the diagnosis
# timeline has windows with evidence on hover; at 7 days of range with
# seconds of history every chart still draws its points and the timeline
# stays within [first data, now] and says so; a GPU the host lacks is
# said and the URL fixed; alerts and kernels are listed; the page fits
# 390 px with no horizontal scroll and follows dark mode. Then with a
# bearer token required: the page asks for it, and works once given (by
# the form or by /#token=); with a Basic user; and with no store, where
# the page shows what needs none and says why it has no charts.
# WEB_SCREENSHOTS=DIR keeps the desktop, phone and dark screenshots there.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_SOURCE_DIR:?}" "${GPULSE_BUILD_DIR:?}"
CHECK="$GPULSE_SOURCE_DIR/tests/browser/check_page.js"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -d "$GPULSE_SOURCE_DIR/tests/browser/node_modules/playwright-core" ] ||
	fail "playwright-core is not installed in tests/browser (run scripts/install-deps.sh)"
[ -x "$FAKE" ] || fail "$FAKE is not built"

q() { curl -s --max-time 10 "$URL$1"; }
enc() { python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
# page OUT ARGS...: check_page.js's JSON into OUT (exit status kept).
page() {
	local out=$1
	shift
	node "$CHECK" "$@" >"$out" 2>"$out.err" || fail "check_page.js $*: $(cat "$out" "$out.err")"
}
# pyj FILE PYTHON: run PYTHON with d = the JSON in FILE; fails the test
# with the script's message on an assertion.
pyj() {
	python3 -c "import json,sys
d=json.load(open(sys.argv[1]))
$2" "$1" || fail "check on $1: $(head -c 3000 "$1")"
}

REC2="$GPULSE_TEST_DATA/recordings/h200-mixed-10hz.csv"
SOCK="$WORK/inject.sock"
mkdir -p "$WORK/rules"
cat >"$WORK/rules/web.yml" <<'YML'
groups:
  - name: web-test
    interval: 1s
    rules:
      - alert: WebTestFiring
        expr: gpulse_gpu_up{gpu="1"} == 1
        labels:
          severity: warning
        annotations:
          summary: 'GPU {{ $labels.gpu }} is up (a test alert)'
      - alert: WebTestPending
        expr: gpulse_gpu_up{gpu="0"} == 1
        for: 1h
        annotations:
          summary: 'pending for an hour'
YML
cat >"$WORK/g.yml" <<YML
storage:
  path: "$WORK/db"
rule_files:
  - rules/web.yml
profiling:
  socket: "$SOCK"
evidence:
  alerts: [WebTestFiring]
  settle: 1s
  capture_seconds: 0
  anomaly_score: 0
YML
export GPULSE_FAKE_NVML_RECORDING="$REC,$REC2" GPULSE_FAKE_NVML_SPEED=1
# No sample in the fresh store is older than this.
T0=$(date +%s)
echo "$T0" >"$WORK/t0"
start_daemon web --config "$WORK/g.yml" --nvml-library "$FAKE_NVML"
"$FAKE" "$SOCK" basic >"$WORK/inject.out" 2>"$WORK/inject.log" &
PIDS+=($!)
echo $! >"$WORK/fake.pid"

wait_for '[ "$(q "/api/v1/query?query=gpulse_gpu_up" | jcheck "len(d[\"data\"][\"result\"])==2" && echo y)" = y ]' ||
	fail "two GPUs in the store: $(q "/api/v1/query?query=gpulse_gpu_up")"
wait_for '[ "$(q /api/v1/alerts | jcheck "len(d[\"data\"][\"alerts\"])==2" && echo y)" = y ]' ||
	fail "the test alerts: $(q /api/v1/alerts)"
wait_for '[ "$(q /api/v1/evidence | jcheck "[e[\"state\"] for e in d[\"data\"][\"evidence\"]] == [\"ready\"]" && echo y)" = y ]' ||
	fail "no evidence for WebTestFiring: $(q /api/v1/evidence)"
EVURL=$(q /api/v1/evidence | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["evidence"][0]["url"])')
echo "$EVURL" >"$WORK/evurl"
wait_for '[ "$(q /api/v1/kernels | jcheck "d[\"data\"][\"total\"] > 0" && echo y)" = y ]' ||
	fail "no kernels from the fake injection library: $(q /api/v1/kernels)"
# Eight seconds of history: a window pinned 2 s in the past sees samples
# that have long reached the store, so the page and this script read the
# same ones.
sleep 8
END=$(( $(date +%s) - 2 ))

# ---- desktop: everything draws, from the API ----------------------------------
page "$WORK/desk.json" "$URL/?gpu=0&range=300&end=$END" --width 1280 --height 900 --requests \
	--do 'waitjs:window.gpulseDash && gpulseDash.refreshes >= 1 && Object.keys(gpulseDash.charts).length >= 7' \
	--do 'eval:JSON.stringify(Object.fromEntries(Object.entries(gpulseDash.charts).map(([k, c]) => [k, {points: c.points, keys: c.keys, query: c.query, start: c.start, end: c.end, step: c.step, last: c.last}])))' \
	--do 'eval:JSON.stringify({errors: gpulseDash.errors, timeline: gpulseDash.timeline, alerts: gpulseDash.alerts, tiles: document.querySelectorAll(".tile").length, kernels: [...document.querySelectorAll("#kernels table:not(#procs) td.k")].map(e => e.textContent), procs: [...document.querySelectorAll("#procs tbody tr")].map(e => [...e.children].map(c => c.textContent)), now: [...document.querySelectorAll(".chart[data-chart=power] .now span")].map(e => e.textContent), canvases: document.querySelectorAll(".chart canvas").length, evidence: [...document.querySelectorAll("#alerts a.evidence-link")].map(a => [a.closest("tr").children[1].textContent, a.getAttribute("href")])})' \
	--do 'eval:document.querySelectorAll(".timeline .seg").length' \
	--do 'click:.timeline .seg:last-child' \
	--do 'eval:document.querySelector("#diag-detail").textContent' \
	--do "screenshot:$WORK/desktop.png" \
	--do 'click:#alerts a.evidence-link' \
	--do 'waitjs:(document.querySelector("#evidence-detail") || {}).textContent?.startsWith("evidence ")' \
	--do 'eval:document.querySelector("#evidence-detail").textContent'
pyj "$WORK/desk.json" '
assert not d["console_errors"] and not d["page_errors"] and not d["failed_requests"], (d["console_errors"], d["page_errors"], d["failed_requests"])
assert d["status"] == 200 and d["title"] == "gpulse"
charts = json.loads(d["steps"][0]); info = json.loads(d["steps"][1])
want = {"all-gpus", "activity", "memory", "power", "temperature", "clocks", "pcie"}
assert want <= set(charts), charts.keys()
for k, c in charts.items():
    assert c["end"] - c["start"] == 300 and c["step"] == 1, (k, c)
    assert max(c["points"]) >= 5, (k, c["points"])
assert charts["all-gpus"]["keys"] == ["0", "1"], charts["all-gpus"]["keys"]
assert len(charts["activity"]["keys"]) == 5, charts["activity"]["keys"]
assert "gpu=\"0\"" in charts["power"]["query"]
assert not info["errors"], info["errors"]
assert info["tiles"] == 2 and info["canvases"] >= 7, info
assert any(k.startswith("gemm") for k in info["kernels"]), info["kernels"]
# The process list: the injected process with its top kernel.
fake_pid = int(open(sys.argv[1].rsplit("/", 1)[0] + "/fake.pid").read())
row = [p for p in info["procs"] if p[0] == str(fake_pid)]
assert row and row[0][4].startswith(info["kernels"][0] + " ("), (fake_pid, info["procs"], info["kernels"])
states = {(a["name"], a["state"]) for a in info["alerts"]}
assert ("WebTestFiring", "firing") in states and ("WebTestPending", "pending") in states, states
classes = {"idle","compute_bound","memory_bound","pcie_bound","launch_bound","input_starved","mixed"}
assert info["timeline"] and all(w["class"] in classes for w in info["timeline"]), info["timeline"]
assert d["steps"][2] == len(info["timeline"]) > 0
assert "advice:" in d["steps"][3], d["steps"][3]
# The firing alert links its evidence; the link shows what it holds.
evurl = open(sys.argv[1].rsplit("/", 1)[0] + "/evurl").read().strip()
assert info["evidence"] == [["WebTestFiring", evurl]], (info["evidence"], evurl)
assert d["steps"][4].startswith("evidence " + evurl.rsplit("/", 1)[1] + ": GPU 1") and "diagnosis: " in d["steps"][4], d["steps"][4]
# Only the query API drew the charts: query_range for each, on GPU 0.
qr = [r for r in d["requests"] if "/api/v1/query_range" in r["url"]]
assert len(qr) >= 7 and all(r["status"] == 200 for r in qr), qr
assert all(r["status"] in (200, 304) for r in d["requests"]), [r for r in d["requests"] if r["status"] not in (200, 304)]
json.dump(charts, open(sys.argv[1] + ".charts", "w"))
'
# What a chart shows is what the instant query says at its end.
check_values() { # CHARTS_JSON GPU
	python3 - "$1" "$2" "$URL" <<'PY' || fail "chart values against /api/v1/query ($2): $(cat "$1")"
import json, sys, urllib.parse, urllib.request
charts, gpu, url = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
checked = 0
for cid in ("power", "memory", "clocks", "temperature"):
    c = charts[cid]
    for name, shown in c["last"].items():
        q = urllib.parse.quote('%s{gpu="%s"}' % (name, gpu))
        r = json.load(urllib.request.urlopen("%s/api/v1/query?query=%s&time=%s" % (url, q, c["end"])))
        res = r["data"]["result"]
        assert len(res) == 1, (name, res)
        want = float(res[0]["value"][1])
        assert abs(want - shown) <= 1e-9 * max(1, abs(want)), (cid, name, shown, want)
        checked += 1
assert checked >= 6, checked
PY
}
check_values "$WORK/desk.json.charts" 0

# ---- the pickers change what is drawn ---------------------------------------------
page "$WORK/pick.json" "$URL/?gpu=0&range=300&end=$END" --requests \
	--do 'waitjs:window.gpulseDash && gpulseDash.refreshes >= 1 && gpulseDash.charts.power' \
	--do 'eval:JSON.stringify(gpulseDash.charts.power.last)' \
	--do 'select:#gpu=1' \
	--do 'waitjs:gpulseDash.charts.power && gpulseDash.charts.power.query.includes("gpu=\"1\"") && !gpulseDash.busy' \
	--do 'eval:JSON.stringify(Object.fromEntries(Object.entries(gpulseDash.charts).map(([k, c]) => [k, {points: c.points, keys: c.keys, query: c.query, start: c.start, end: c.end, step: c.step, last: c.last}])))' \
	--do 'eval:[location.search, document.querySelector(".tile.sel").dataset.gpu, document.querySelector("#charts-sub").textContent]' \
	--do 'select:#range=3600' \
	--do 'waitjs:gpulseDash.charts.power.end - gpulseDash.charts.power.start == 3600 && !gpulseDash.busy' \
	--do 'eval:JSON.stringify({step: gpulseDash.charts.power.step, start: gpulseDash.charts.power.start, from: gpulseDash.charts.power.from, end: gpulseDash.charts.power.end, search: location.search, sub: document.querySelector("#charts-sub").textContent})' \
	--do 'drag:.chart[data-chart=power] .u-over=0.9,1.03' \
	--do 'waitjs:gpulseDash.charts.power && gpulseDash.charts.power.end - gpulseDash.charts.power.start < 3600 && !gpulseDash.busy' \
	--do 'eval:JSON.stringify({start: gpulseDash.charts.power.start, end: gpulseDash.charts.power.end, step: gpulseDash.charts.power.step, activity: [gpulseDash.charts.activity.start, gpulseDash.charts.activity.end], range: document.querySelector("#range").value, live: document.querySelector("#live").checked, search: location.search})'
pyj "$WORK/pick.json" '
import math
assert not d["console_errors"] and not d["page_errors"], (d["console_errors"], d["page_errors"])
p0 = json.loads(d["steps"][0]); charts = json.loads(d["steps"][1]); search, tile, sub = d["steps"][2]; r = json.loads(d["steps"][3])
p0_end = charts["power"]["end"]
assert all("gpu=\"1\"" in c["query"] for k, c in charts.items() if k != "all-gpus"), charts
assert "gpu=1" in search and tile == "1" and sub.startswith("GPU 1"), (search, tile, sub)
# Two recordings: the two GPUs do not draw the same power.
assert p0["gpulse_gpu_power_watts"] != charts["power"]["last"]["gpulse_gpu_power_watts"], (p0, charts["power"]["last"])
# The hour holds a few seconds of data: the points are asked for from its
# first sample on, about 600 of them, and the axis keeps the whole hour.
assert r["start"] <= r["from"] < r["end"] and r["step"] == max(1, math.ceil((r["end"] - r["from"]) / 600)), r
assert "range=3600" in r["search"] and "60 min" in r["sub"], r
# A drag over the last tenth of the hour, to past the right edge of the plot
# (the data of the replay is all in its last seconds), zooms every chart to
# those 6 minutes, pinned at the end of the hour, not live.
z = json.loads(d["steps"][4])
assert 300 <= z["end"] - z["start"] <= 420 and z["activity"] == [z["start"], z["end"]], z
assert p0_end - 6 <= z["end"] <= p0_end and not z["live"] and z["range"] == str(z["end"] - z["start"]), (z, p0_end)
assert "range=%d" % (z["end"] - z["start"]) in z["search"] and "end=" in z["search"], z
urls = [x["url"] for x in d["requests"] if "/api/v1/query_range" in x["url"]]
assert any("gpu%3D%221%22" in u for u in urls) and any("start=%d&end=%d&step=%d" % (r["from"], r["end"], r["step"]) in u for u in urls), (r, urls)
assert any("/api/v1/diagnosis?gpu=1" in x["url"] for x in d["requests"]), d["requests"]
json.dump(charts, open(sys.argv[1] + ".charts", "w"))
'
check_values "$WORK/pick.json.charts" 1

# ---- 7 days of range, seconds of data: the charts draw where the data is -------
# A step of range/600 (17 min) is far over the 5-minute lookback: asked
# over the whole week, a few seconds of history drew one point or none.
# The points are asked for from the first sample on; the x axis is still
# the week. The timeline draws nothing outside [first data, now] and says
# what it covers.
page "$WORK/week.json" "$URL/?gpu=0&range=604800&end=$END" \
	--do 'waitjs:window.gpulseDash && gpulseDash.refreshes >= 1 && Object.keys(gpulseDash.charts).length >= 7 && gpulseDash.timeline' \
	--do 'eval:JSON.stringify(Object.fromEntries(Object.entries(gpulseDash.charts).map(([k, c]) => [k, {points: c.points, keys: c.keys, query: c.query, start: c.start, end: c.end, from: c.from, step: c.step, last: c.last, x: [c.plot.scales.x.min, c.plot.scales.x.max]}])))' \
	--do 'eval:(() => { const line = document.querySelector(".timeline").getBoundingClientRect(); return JSON.stringify({now: Date.now() / 1000, sub: document.querySelector("#diag-sub").textContent, timeline: gpulseDash.timeline, width: line.width, segs: [...document.querySelectorAll(".timeline .seg")].map((e) => { const r = e.getBoundingClientRect(); return [r.left - line.left, r.right - line.left]; })}); })()'
pyj "$WORK/week.json" '
import math, re, time
assert not d["console_errors"] and not d["page_errors"], (d["console_errors"], d["page_errors"])
charts, tl = json.loads(d["steps"][0]), json.loads(d["steps"][1])
t0 = int(open(sys.argv[1].rsplit("/", 1)[0] + "/t0").read())
want = {"all-gpus", "activity", "memory", "power", "temperature", "clocks", "pcie"}
assert want <= set(charts), charts.keys()
for k, c in charts.items():
    assert c["end"] - c["start"] == 604800 and c["x"] == [c["start"], c["end"]], (k, c)
    # From shortly before the first sample (the estimate is at most 4
    # minutes late, plus a 1-minute rollup), never before the range.
    assert c["start"] <= c["from"] and t0 - 360 <= c["from"] <= t0 + 60, (k, c["from"], t0)
    assert c["step"] == max(1, math.ceil((c["end"] - c["from"]) / 600)), (k, c)
    assert max(c["points"]) >= 5, (k, c["points"], c["step"])
json.dump(charts, open(sys.argv[1] + ".charts", "w"))
w = tl["timeline"]
start = charts["power"]["start"]; span = 604800.0
assert w and all(t0 <= x["start"] < x["end"] <= tl["now"] for x in w), (t0, tl["now"], w)
assert len(tl["segs"]) == len(w), tl
# Each window is drawn where it is on the axis, inside [first data, now],
# and seconds in a week are still a visible pixel.
for (l, r), x in zip(tl["segs"], w):
    assert tl["width"] * (t0 - start) / span - 1 <= l and r <= tl["width"] * (tl["now"] - start) / span + 1, (l, r, x, tl)
    assert r - l >= 0.99, (l, r, x)
# "N window(s), FROM-TO": what is drawn, with the plural right.
m = re.match(r"GPU 0 · (\d+) (windows?), (.+)–(.+) · from the ", tl["sub"])
assert m, tl["sub"]
n = int(m.group(1))
assert n == len(w) and m.group(2) == ("window" if n == 1 else "windows"), (tl["sub"], len(w))
fmt = lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
assert (m.group(3), m.group(4)) == (fmt(w[0]["start"]), fmt(w[-1]["end"])), (tl["sub"], w[0], w[-1])
'
check_values "$WORK/week.json.charts" 0

# ---- a GPU the host does not have: said, and the URL names the one shown -------
page "$WORK/nogpu.json" "$URL/?gpu=5&range=300&end=$END" \
	--do 'waitjs:window.gpulseDash && gpulseDash.refreshes >= 1 && gpulseDash.charts.power' \
	--do 'eval:[document.querySelector("#notice").hidden, document.querySelector("#notice").textContent, location.search, document.querySelector("#gpu").value, gpulseDash.charts.power.query]' \
	--do 'select:#gpu=1' \
	--do 'waitjs:gpulseDash.charts.power.query.includes("gpu=\"1\"") && !gpulseDash.busy' \
	--do 'eval:[document.querySelector("#notice").hidden, location.search]'
pyj "$WORK/nogpu.json" '
assert not d["console_errors"] and not d["page_errors"], (d["console_errors"], d["page_errors"])
hidden, text, search, picked, query = d["steps"][0]
assert not hidden and text.startswith("No GPU 5 on this host") and "showing GPU 0" in text, d["steps"][0]
assert "gpu=0" in search and "gpu=5" not in search and picked == "0" and "gpu=\"0\"" in query, d["steps"][0]
# Picking a GPU clears the notice.
assert d["steps"][1][0] is True and "gpu=1" in d["steps"][1][1], d["steps"][1]
'

# ---- phone width: one column, no horizontal scroll; then dark mode, which
# the page follows without a reload (the charts are rebuilt in its colours).
page "$WORK/phone.json" "$URL/?gpu=0&range=300&end=$END" --width 390 --height 844 \
	--do 'waitjs:window.gpulseDash && gpulseDash.refreshes >= 1 && Object.keys(gpulseDash.charts).length >= 7' \
	--do 'sleep:300' \
	--do 'eval:JSON.stringify({sw: document.documentElement.scrollWidth, cw: document.documentElement.clientWidth, widest: Math.max(...[...document.querySelectorAll("body *")].filter(e => !e.parentElement.closest(".tablewrap")).map(e => e.getBoundingClientRect().right)), tables: document.querySelectorAll(".tablewrap table").length})' \
	--do "screenshot:$WORK/phone.png" \
	--do 'viewport:1280x900' \
	--do 'eval:window.gpulseDash.refreshes' \
	--do 'scheme:dark' \
	--do 'waitjs:document.documentElement.dataset.scheme === "dark" && gpulseDash.refreshes > 1 && !gpulseDash.busy' \
	--do 'eval:[getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color, document.documentElement.dataset.scheme, gpulseDash.charts.power.key.endsWith("|dark")]' \
	--do "screenshot:$WORK/dark.png"
pyj "$WORK/phone.json" '
import re
assert not d["console_errors"] and not d["page_errors"], (d["console_errors"], d["page_errors"])
m = json.loads(d["steps"][0])
# Tables may scroll inside their own box (.tablewrap); nothing else is wider.
assert m["sw"] <= 390 and m["cw"] <= 390 and m["widest"] <= 390.5 and m["tables"] >= 2, m
bg, fg, scheme, rebuilt = d["steps"][2]
lum = lambda c: sum(int(x) for x in re.findall(r"\d+", c)[:3]) / 765
assert scheme == "dark" and lum(bg) < 0.2 and lum(fg) > 0.7 and rebuilt, d["steps"][2]
'
if [ -n "${WEB_SCREENSHOTS:-}" ]; then
	mkdir -p "$WEB_SCREENSHOTS"
	cp "$WORK/desktop.png" "$WORK/phone.png" "$WORK/dark.png" "$WEB_SCREENSHOTS/"
fi

# The assets: types, CSP, gzip and 304 as a browser gets them.
curl -s -D "$WORK/h" -o /dev/null -H 'Accept-Encoding: gzip' "$URL/ui/app.js"
grep -qi '^Content-Type: text/javascript' "$WORK/h" || fail "app.js type: $(cat "$WORK/h")"
grep -qi '^Content-Encoding: gzip' "$WORK/h" || fail "app.js not gzipped: $(cat "$WORK/h")"
grep -qi "^Content-Security-Policy: default-src 'none'" "$WORK/h" || fail "no CSP: $(cat "$WORK/h")"
etag=$(sed -n 's/^ETag: //Ip' "$WORK/h" | tr -d '\r')
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$URL/ui/app.js")" = 304 ] ||
	fail "no 304 for $etag"
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# ---- a bearer token required --------------------------------------------------------
printf 'web-tok3n\n' >"$WORK/read.token"
chmod 600 "$WORK/read.token"
cat >"$WORK/auth.yml" <<YML
http:
  auth_token_file: "$WORK/read.token"
storage:
  path: "$WORK/db2"
profiling:
  socket: "$WORK/inject2.sock"
YML
export GPULSE_FAKE_NVML_RECORDING="$REC"
start_daemon auth --config "$WORK/auth.yml" --nvml-library "$FAKE_NVML"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v1/gpus")" = 401 ] || fail "the API without the token"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/")" = 200 ] || fail "the page without the token"
wait_for '[ "$(curl -s -H "Authorization: Bearer web-tok3n" "$URL/api/v1/query?query=gpulse_gpu_up" | jcheck "len(d[\"data\"][\"result\"])==1" && echo y)" = y ]' ||
	fail "no sample with auth"
sleep 2
page "$WORK/login.json" "$URL/" --requests \
	--do 'wait:#login:not([hidden])' \
	--do 'eval:[document.querySelector("#login-token").hidden, document.querySelector("#login-basic").hidden, document.querySelector("#main").hidden]' \
	--do 'fill:#token=web-tok3n' \
	--do 'click:#login-go' \
	--do 'waitjs:gpulseDash.refreshes >= 1 && gpulseDash.charts.power && Math.max(...gpulseDash.charts.power.points) > 0' \
	--do 'eval:[document.querySelector("#login").hidden, sessionStorage.getItem("gpulse.auth")]'
pyj "$WORK/login.json" '
assert not d["page_errors"], d["page_errors"]
# Before the token, the API answered 401 (Chromium logs each as a failed
# load); nothing else went wrong, and after it every request passed.
assert all("401" in e for e in d["console_errors"]), d["console_errors"]
tok_hidden, basic_hidden, main_hidden = d["steps"][0]
assert not tok_hidden and basic_hidden and main_hidden, d["steps"][0]  # a token, no users
assert d["steps"][1] == [True, "Bearer web-tok3n"], d["steps"][1]
api = [r for r in d["requests"] if "/api/" in r["url"]]
first_ok = next(i for i, r in enumerate(api) if r["status"] == 200)
assert all(r["status"] == 401 for r in api[:first_ok]) and all(r["status"] == 200 for r in api[first_ok:]), api
assert all(r["status"] == 200 for r in d["requests"] if "/api/" not in r["url"]), d["requests"]
'
page "$WORK/frag.json" "$URL/#token=web-tok3n" \
	--do 'waitjs:window.gpulseDash && gpulseDash.refreshes >= 1 && gpulseDash.charts.power && Math.max(...gpulseDash.charts.power.points) > 0' \
	--do 'eval:[location.hash, document.querySelector("#login").hidden, document.querySelector("#signout").hidden]' \
	--do 'click:#signout' \
	--do 'wait:#login:not([hidden])' \
	--do 'eval:sessionStorage.getItem("gpulse.auth")'
pyj "$WORK/frag.json" '
assert not d["page_errors"] and not d["failed_requests"], (d["page_errors"], d["failed_requests"])
# No error before signing out; after it, the 401s of the one refresh that
# shows the form: its first two requests (the GPUs and the verdicts, asked
# together), and nothing after.
assert all("401" in e for e in d["console_errors"]) and len(d["console_errors"]) <= 2, d["console_errors"]
assert d["steps"][0] == ["", True, False], d["steps"][0]
assert d["steps"][1] is None, d["steps"][1]
'
page "$WORK/wrong.json" "$URL/#token=wrong" \
	--do 'wait:#login:not([hidden])' \
	--do 'eval:document.querySelector("#login-why").textContent'
pyj "$WORK/wrong.json" '
assert "refused" in d["steps"][0], d["steps"][0]
'
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# ---- Basic users beside the token: the browser's own Basic credentials
# (a browser asks for them with its dialog on the first 401; here
# check_page.js answers it) serve every request of the page.
cat >"$WORK/basic.yml" <<YML
http:
  auth_token_file: "$WORK/read.token"
  basic_auth_users:
    alice: "\$2y\$10\$gpulsetestsaltgpulse.u9bzToBj4eZj15FTExTvvzxdnHDxia5e"
storage:
  path: "$WORK/db3"
profiling:
  socket: "$WORK/inject3.sock"
YML
start_daemon basic --config "$WORK/basic.yml" --nvml-library "$FAKE_NVML"
wait_for '[ "$(curl -s -u alice:hunter2 "$URL/api/v1/query?query=gpulse_gpu_up" | jcheck "len(d[\"data\"][\"result\"])==1" && echo y)" = y ]' ||
	fail "no sample with Basic auth"
sleep 2
page "$WORK/basic.json" "$URL/" --credentials alice:hunter2 \
	--do 'waitjs:window.gpulseDash && gpulseDash.refreshes >= 1 && gpulseDash.charts.power && Math.max(...gpulseDash.charts.power.points) > 0' \
	--do 'eval:document.querySelector("#login").hidden'
pyj "$WORK/basic.json" '
assert not d["page_errors"], d["page_errors"]
assert all("401" in e for e in d["console_errors"]), d["console_errors"]
assert d["steps"][0] is True
'
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# ---- no store: the tiles, the timeline (the diagnosis in memory) and the
# alerts still show; the charts say why there is no history, once, and the
# page asks the query API only once per refresh.
cat >"$WORK/nostore.yml" <<YML
profiling:
  socket: "$WORK/inject4.sock"
YML
start_daemon nostore --config "$WORK/nostore.yml" --replay "$REC"
wait_for '[ "$(q /api/v1/diagnosis | jcheck "len(d[\"data\"][\"windows\"]) > 0" && echo y)" = y ]' ||
	fail "no diagnosis window in memory: $(q /api/v1/diagnosis | head -c 300)"
page "$WORK/nostore.json" "$URL/" --requests \
	--do 'waitjs:window.gpulseDash && gpulseDash.refreshes >= 1 && gpulseDash.timeline && gpulseDash.timeline.length > 0' \
	--do 'eval:[document.querySelectorAll(".tile").length, document.querySelector("#charts-note").textContent, document.querySelectorAll(".chart").length, document.querySelector("#status").textContent]'
pyj "$WORK/nostore.json" '
assert not d["page_errors"], d["page_errors"]
tiles, note, charts, status = d["steps"][0]
assert tiles == 1 and charts == 0 and status == "", d["steps"][0]
assert note.startswith("No history to draw: storage is disabled"), note
# Each refresh asks the store one instant query and, answered 503, asks
# it nothing more (no history, no ALERTS series); a slow run (ASan) may
# refresh twice before the check, so count per refresh, not once.
q = [r for r in d["requests"] if "/api/v1/query" in r["url"]]
assert q and all("/api/v1/query?query=gpulse_gpu_bottleneck" in r["url"] and r["status"] == 503
                 for r in q), q
assert len(d["console_errors"]) == len(q) and all("503" in e for e in d["console_errors"]), \
    (d["console_errors"], q)
'
echo PASS
