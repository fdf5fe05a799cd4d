# The Grafana dashboards in deploy/grafana/ (gpulse-fleet.json,
# gpulse-host.json) against gpulsed's own query API on a replay: each file
# has the shape Grafana imports (the ${DS_PROMETHEUS} input, uid, title,
# schemaVersion, the instance and gpu variables, panels with unique ids
# and grid positions inside 24 columns that do not overlap, every panel
# on the input's data source, every target an expression), and every
# PromQL expression in them, with the variables set as Grafana would set
# them (gpu to a real GPU and to All, instance to All: gpulsed's own
# series have no instance label, which Prometheus adds at scrape, so All
# is the value Grafana sends there), parses and returns data. The replay
# is made to hold everything the panels read: two GPUs, an XID (the fake
# NVML's fault), a firing alert (a rule file), kernels (the synthetic
# injection library). Three kinds of series may be empty, each named below
# with why: gpulse_bench_* (no benchmark has run in a test), the HBM
# temperature (the bundled recordings have no column for it) and the max
# SM clock (an identity metric gpulsed does not store; Prometheus scrapes
# it); those are still checked to parse.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_SOURCE_DIR:?}" "${GPULSE_BUILD_DIR:?}"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"
DASH="$GPULSE_SOURCE_DIR/deploy/grafana"

mkdir -p "$WORK/rules"
cat >"$WORK/rules/t.yml" <<'YML'
groups:
  - name: grafana-test
    interval: 1s
    rules:
      - alert: GrafanaTestFiring
        expr: gpulse_gpu_up == 1
        labels:
          severity: info
YML
cat >"$WORK/g.yml" <<YML
storage:
  path: "$WORK/db"
rule_files:
  - rules/t.yml
profiling:
  socket: "$WORK/inject.sock"
  store_interval: 1s
YML
export GPULSE_FAKE_NVML_RECORDING="$REC,$GPULSE_TEST_DATA/recordings/h200-mixed-10hz.csv" \
	GPULSE_FAKE_NVML_SPEED=1 GPULSE_FAKE_NVML_FAULTS="xid:gpu=0:at=1:code=79"
start_daemon g --config "$WORK/g.yml" --nvml-library "$FAKE_NVML"
"$FAKE" "$WORK/inject.sock" basic >"$WORK/inject.out" 2>"$WORK/inject.log" &
PIDS+=($!)
q() { curl -s --max-time 10 "$URL$1"; }
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
wait_for '[ "$(q "/api/v1/query?query=ALERTS" | jcheck "len(d[\"data\"][\"result\"])==2" && echo y)" = y ]' ||
	fail "the test alert: $(q "/api/v1/query?query=ALERTS")"
wait_for '[ "$(q "/api/v1/query?query=gpulse_process_kernel_seconds_total" | jcheck "len(d[\"data\"][\"result\"])>0" && echo y)" = y ]' ||
	fail "kernel series in the store: $(q "/api/v1/query?query=gpulse_process_kernel_seconds_total")"
wait_for '[ "$(q "/api/v1/query?query=gpulse_gpu_xid_errors_total" | jcheck "len(d[\"data\"][\"result\"])>0" && echo y)" = y ]' ||
	fail "the XID in the store: $(q "/api/v1/query?query=gpulse_gpu_xid_errors_total")"
# A diagnosis window (5 s) and a few samples of the slow tier.
wait_for '[ "$(q "/api/v1/query?query=gpulse_gpu_bottleneck%3D%3D1" | jcheck "len(d[\"data\"][\"result\"])==2" && echo y)" = y ]' ||
	fail "no diagnosis window: $(q "/api/v1/query?query=gpulse_gpu_bottleneck")"
sleep 3

python3 - "$URL" "$DASH/gpulse-fleet.json" "$DASH/gpulse-host.json" <<'PY' || fail "the Grafana dashboards"
import json, re, sys, urllib.parse, urllib.request

url = sys.argv[1]
# Series that may be empty here, and why (parse-only for them).
MAY_BE_EMPTY = {
    "gpulse_bench_": "no benchmark has run in this test (gpulse bench writes gpulse_bench_*)",
    "gpulse_gpu_memory_temperature_celsius": "the bundled recordings have no HBM temperature column",
    "gpulse_gpu_max_sm_clock_hertz": "gpulsed keeps the cards' identity (max clocks) out of its store: Prometheus has it from the scrape",
}
PANEL_TYPES = {"row", "timeseries", "stat", "table", "histogram", "piechart", "state-timeline", "gauge", "bargauge", "heatmap", "text"}
DS = "${DS_PROMETHEUS}"
problems = []

def api(path):
    with urllib.request.urlopen(url + path, timeout=20) as r:
        return json.load(r)

def query(expr):
    try:
        return api("/api/v1/query?query=" + urllib.parse.quote(expr))
    except urllib.error.HTTPError as e:
        return json.load(e)

def substitute(expr, gpu):
    for k, v in (("$__rate_interval", "1m"), ("$__interval", "15s"), ("$__range", "5m"),
                 ("$instance", ".*"), ("${instance}", ".*"), ("$gpu", gpu), ("${gpu}", gpu)):
        expr = expr.replace(k, v)
    assert "$" not in expr, "a variable left unset in " + expr
    return expr

def check_shape(name, d):
    for key, kind in (("title", str), ("uid", str), ("schemaVersion", int), ("panels", list),
                      ("templating", dict), ("time", dict), ("__inputs", list)):
        if not isinstance(d.get(key), kind):
            problems.append(f"{name}: {key} missing or not a {kind.__name__}")
    if not 0 < len(d["uid"]) <= 40:
        problems.append(f"{name}: uid {d['uid']!r} must be 1-40 characters")
    if d["schemaVersion"] < 36:
        problems.append(f"{name}: schemaVersion {d['schemaVersion']} is older than Grafana 9")
    inputs = [i for i in d["__inputs"] if i.get("name") == "DS_PROMETHEUS"]
    if not (inputs and inputs[0].get("type") == "datasource" and inputs[0].get("pluginId") == "prometheus"):
        problems.append(f"{name}: no DS_PROMETHEUS datasource input for prometheus: {d['__inputs']}")
    variables = {v["name"]: v for v in d["templating"]["list"]}
    for v in ("instance", "gpu"):
        if v not in variables:
            problems.append(f"{name}: no template variable {v}")
            continue
        q = variables[v]["query"]
        q = q["query"] if isinstance(q, dict) else q
        if not re.fullmatch(r"label_values\((.+), *" + v + r"\)", q):
            problems.append(f"{name}: variable {v}'s query {q!r} is not label_values(..., {v})")
        if variables[v].get("datasource", {}).get("uid") != DS:
            problems.append(f"{name}: variable {v} is not on {DS}")
    ids, cells = set(), {}
    for p in d["panels"]:
        pid = p.get("id")
        if not isinstance(pid, int) or pid in ids:
            problems.append(f"{name}: panel {p.get('title')!r}: id {pid!r} missing or repeated")
        ids.add(pid)
        if p.get("type") not in PANEL_TYPES:
            problems.append(f"{name}: panel {p.get('title')!r}: type {p.get('type')!r}")
        if not p.get("title"):
            problems.append(f"{name}: panel {pid}: no title")
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in "hwxy") or g["x"] + g["w"] > 24 or g["w"] <= 0 or g["h"] <= 0:
            problems.append(f"{name}: panel {p.get('title')!r}: gridPos {g}")
            continue
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    problems.append(f"{name}: panels {cells[(x, y)]!r} and {p['title']!r} overlap at {x},{y}")
                cells[(x, y)] = p["title"]
        if p["type"] == "row":
            continue
        if p.get("datasource", {}).get("uid") != DS:
            problems.append(f"{name}: panel {p['title']!r} is not on {DS}")
        refs = [t.get("refId") for t in p.get("targets", [])]
        if not refs or len(set(refs)) != len(refs):
            problems.append(f"{name}: panel {p['title']!r}: targets' refIds {refs}")
        for t in p.get("targets", []):
            if not t.get("expr") or t.get("datasource", {}).get("uid") != DS:
                problems.append(f"{name}: panel {p['title']!r}: target {t.get('refId')} has no expr or is not on {DS}")
    return variables

checked = empty_allowed = 0
for path in sys.argv[2:]:
    name = path.rsplit("/", 1)[-1]
    d = json.load(open(path))
    variables = check_shape(name, d)
    # The variables' own queries: label_values(SELECTOR, LABEL) is the
    # series API; the gpu label must have values, instance has none here.
    for v in ("instance", "gpu"):
        q = variables[v]["query"]
        q = q["query"] if isinstance(q, dict) else q
        sel = substitute(re.fullmatch(r"label_values\((.+), *\w+\)", q).group(1), ".*")
        s = api("/api/v1/series?match[]=" + urllib.parse.quote(sel))
        if s["status"] != "success" or not s["data"]:
            problems.append(f"{name}: variable {v}: no series for {sel}")
        elif v == "gpu" and sorted({x["gpu"] for x in s["data"]}) != ["0", "1"]:
            problems.append(f"{name}: variable gpu's values {sorted({x.get('gpu') for x in s['data']})}")
    # Each target with gpu set to All, and to each real GPU: All must have
    # data, and so must at least one GPU on its own (a field a recording
    # marks unsupported, "nan", is absent from then on for that GPU only).
    for p in d["panels"]:
        for t in p.get("targets", []):
            has = {}
            for gpu in (".*", "0", "1"):
                expr = substitute(t["expr"], gpu)
                r = query(expr)
                checked += 1
                if r.get("status") != "success":
                    problems.append(f"{name}: {p['title']!r}: {expr}: {r.get('error')}")
                    continue
                has[gpu] = r["data"]["resultType"] == "vector" and bool(r["data"]["result"])
            if len(has) < 3 or (has[".*"] and (has["0"] or has["1"] or "$gpu" not in t["expr"])):
                continue
            if any(k in t["expr"] for k in MAY_BE_EMPTY):
                empty_allowed += 1
                continue
            problems.append(f"{name}: {p['title']!r}: {t['expr']}: no data (gpu: {has})")
if problems:
    print("\n".join(problems))
    sys.exit(1)
assert checked >= 150, checked
print(f"{checked} queries answered, {empty_allowed} empty as allowed")
PY
echo PASS
