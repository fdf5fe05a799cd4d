# The HTTP API as Prometheus serves it (issue 18, items 1 and 2): Debian's
# Prometheus scrapes gpulsed (replaying the H200 recording) and both load
# the rule pack; then one list of requests goes to both, by GET and by
# POST (a form body, as Grafana's data source sends), and the answers
# must agree: the status code, the JSON's shape (keys and value types,
# recursively) and, where both hold the same data, `data` itself.
# Regex matchers in RE2's dialect (\d, \x5f, \Q..\E, (?i), (?:), [[:alpha:]],
# \pL) must select the same series in both, and what RE2 refuses
# (lookahead, backreferences, possessive repetition) both refuse with 400
# bad_data. Then promtool's query subcommands, a Prometheus client, run
# against gpulsed.
#
# The differences that remain, by design, each stated where it is checked:
# - Series and label sets are compared without `job` and `instance`
#   (which only the scrape adds), and over the metrics both store.
# - status/buildinfo: gpulsed's version is the Prometheus API it answers
#   as ("2.42.0"; Debian's says "2.42.0+ds"), its revision "gpulsed V";
#   only the keys are compared. status/config, flags and runtimeinfo:
#   each side's own configuration and process, so keys (runtimeinfo) or
#   value types (config, flags) only. status/tsdb: gpulsed's headStats
#   has numSeries and numLabelPairs but not chunkCount, minTime, maxTime.
# - Error texts: same errorType and status code; the sentence may differ
#   (gpulsed names the regex construct and its byte).
# - A form body over 1 MiB: gpulsed answers 413 (Prometheus reads 10 MB).
# test-clock: real (the Go servers read the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"

need prometheus
PACK="${GPULSE_SOURCE_DIR:?}/deploy/rules/gpulse.rules.yml"
cat >"$WORK/gpulse.yml" <<YML
rule_files:
  - $PACK
YML
start_daemon src --config "$WORK/gpulse.yml" --replay "$REC" --replay-speed 1 --storage-path "$WORK/db"
cat >"$WORK/prom.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $PACK
scrape_configs:
  - job_name: gpulse
    static_configs:
      - targets: ["127.0.0.1:$PORT"]
YML
start_prometheus "$WORK/prom.yml"
wait_for '[ "$(curl -s "$PROM/api/v1/query?query=up" | python3 -c "import json,sys; r=json.load(sys.stdin)[\"data\"][\"result\"]; print(r[0][\"value\"][1] if r else 0)")" = 1 ]' ||
	fail "prometheus does not scrape gpulsed"
sleep 8

python3 - "$URL" "$PROM" "$PACK" <<'PY' || fail "gpulsed and Prometheus disagree"
import json, math, sys, time, urllib.error, urllib.parse, urllib.request
gp, pr, pack = sys.argv[1], sys.argv[2], sys.argv[3]

def call(base, method, path, params=(), body=None, ctype=None):
    q = urllib.parse.urlencode(list(params))
    url = base + path + ("?" + q if q and method == "GET" else "")
    data = None
    if method == "POST":
        data = body if body is not None else q.encode()
    req = urllib.request.Request(url, data=data, method=method)
    if method == "POST":
        req.add_header("Content-Type", ctype or "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            code, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, raw = e.code, e.read()
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = raw.decode(errors="replace")
    return code, doc

def shape(v):
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items() if k not in ("job", "instance")}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    return type(v).__name__

DROP = ("job", "instance")
def strip(m):
    return {k: v for k, v in m.items() if k not in DROP}

def norm(path, data):
    """The parts of `data` both sides must agree on."""
    if path in ("/api/v1/query", "/api/v1/query_range"):
        if data["resultType"] in ("scalar", "string"):
            return (data["resultType"], data["result"])
        out = []
        for s in data["result"]:
            pts = s.get("values") or [s.get("value")]
            out.append((json.dumps(strip(s["metric"]), sort_keys=True),
                        tuple(v for _, v in pts)))
        return (data["resultType"], sorted(out))
    if path == "/api/v1/series":
        return sorted(json.dumps(strip(m), sort_keys=True) for m in data)
    if path == "/api/v1/labels":
        return sorted(x for x in data if x not in DROP)
    return data

fails = []
def check(what, method, path, params=(), mode="data", **kw):
    a = call(gp, method, path, params, **kw)
    b = call(pr, method, path, params, **kw)
    tag = f"{method} {path} {list(params)} [{what}]"
    if a[0] != b[0]:
        fails.append(f"{tag}: status {a[0]} (gpulsed) vs {b[0]} (Prometheus): {a[1]} / {b[1]}")
        return a, b
    if mode == "status":
        return a, b
    if not isinstance(a[1], dict) and not isinstance(b[1], dict):
        return a, b  # both plain text (405, 404): the code is what counts
    if not isinstance(a[1], dict) or not isinstance(b[1], dict):
        fails.append(f"{tag}: not JSON: {a[1]!r} / {b[1]!r}")
        return a, b
    if a[1].get("status") != b[1].get("status") or a[1].get("errorType") != b[1].get("errorType"):
        fails.append(f"{tag}: {a[1]} vs {b[1]}")
        return a, b
    sa, sb = shape(a[1]), shape(b[1])
    if mode in ("data", "shape", "series") and sa != sb:
        fails.append(f"{tag}: shape {sa} vs {sb}")
    if mode in ("data", "series") and a[1].get("status") == "success":
        na, nb = norm(path, a[1]["data"]), norm(path, b[1]["data"])
        if mode == "series":  # which series, not their (changing) values
            na, nb = [m for m, _ in na[1]], [m for m, _ in nb[1]]
        if na != nb:
            fails.append(f"{tag}: data {na} vs {nb}")
    return a, b

t = math.floor(time.time()) - 2
constant = "gpulse_gpu_memory_total_bytes"
for method in ("GET", "POST"):
    # queries over series constant while both ran, so both hold the value
    for q in (constant, f"count({constant})", "gpulse_gpu_up", f"sum by (gpu) ({constant}) / 2^30",
              "scalar(count(gpulse_gpu_up))", '"text"', "vector(1)"):
        check("query", method, "/api/v1/query", [("query", q), ("time", t)])
    check("range", method, "/api/v1/query_range",
          [("query", constant), ("start", t - 3), ("end", t), ("step", "1s")])
    check("range", method, "/api/v1/query_range",
          [("query", "gpulse_gpu_up * 2"), ("start", t - 3), ("end", t), ("step", "1.5")])
    # series, labels and label values with match[], start, end
    sel = [("match[]", "gpulse_gpu_up"), ("match[]", constant)]
    check("series", method, "/api/v1/series", sel)
    check("series", method, "/api/v1/series", sel + [("start", t - 3), ("end", t)])
    check("labels", method, "/api/v1/labels", sel)
    check("labels", method, "/api/v1/labels", [("match[]", 'gpulse_gpu_up{gpu="0"}'), ("start", t - 3), ("end", t)])
    # (Prometheus serves label values by GET only: POST is 405 in both.)
    check("values", method, "/api/v1/label/gpu/values", [("match[]", 'gpulse_gpu_up{gpu="0"}')])
    check("values", method, "/api/v1/label/__name__/values",
          [("match[]", '{__name__=~"gpulse_gpu_(up|memory_total_bytes)"}')])
    check("values", method, "/api/v1/label/nosuchlabel/values", [("match[]", "gpulse_gpu_up")])
    check("values", method, "/api/v1/label/gpu/values", [("match[]", "gpulse_gpu_up"), ("start", t - 3), ("end", t)])
    # errors, as Prometheus words and codes them
    check("no query", method, "/api/v1/query", [])
    check("bad query", method, "/api/v1/query", [("query", "sum(")])
    check("bad time", method, "/api/v1/query", [("query", "1"), ("time", "yesterday")])
    check("bad step", method, "/api/v1/query_range", [("query", "1"), ("start", t - 1), ("end", t), ("step", "0")])
    check("end<start", method, "/api/v1/query_range", [("query", "1"), ("start", t), ("end", t - 9), ("step", "1")])
    check("no match", method, "/api/v1/series", [])
    check("bad match", method, "/api/v1/series", [("match[]", "1+1")])
    check("bad label", method, "/api/v1/label/1x/values", [])
    check("format", method, "/api/v1/format_query", [("query", "sum(rate(foo{a=\"b\"}[5m]))by(gpu)")])
    check("format", method, "/api/v1/format_query", [("query", "a+on(b)group_left c")])
    check("format bad", method, "/api/v1/format_query", [("query", "a +")])
    check("exemplars", method, "/api/v1/query_exemplars", [("query", constant), ("start", t - 5), ("end", t)])
    check("exemplars bad", method, "/api/v1/query_exemplars", [("query", "(")])

# RE2's dialect: each matcher selects the same series in both.
regexes = [
    r'{__name__=~"gpulse_gpu_(?:up|memory_total_bytes)"}',
    r'gpulse_gpu_up{gpu=~"\\d"}',
    r'gpulse_gpu_up{gpu=~"\\d+|x"}',
    r'{__name__=~"(?i)GPULSE_GPU_UP"}',
    r'{__name__=~"gpulse_gpu_\\Qup\\E"}',
    r'{__name__=~"gpulse\\x5fgpu_up"}',
    r'{__name__=~"gpulse\\x{5f}gpu_up"}',
    r'{__name__=~"gpulse_gpu_[[:alpha:]]+_total_bytes"}',
    r'{__name__=~"gpulse_gpu_\\pL+_watts"}',
    r'{__name__=~"gpulse_gpu_(?P<what>up)"}',
    r'{__name__=~"gpulse_gpu_u."}',
    r'{__name__=~"gpulse_gpu_(?s:u.)"}',
    r'{__name__=~"gpulse_gpu_up|"}',
    r'{__name__=~"gpulse_gpu_up", model=~".*H\\d{3}.*"}',
    r'{__name__=~"gpulse_gpu_up", model!~"(?i)nvidia.*"}',
    r'{__name__=~"gpulse_gpu_up", uuid=~"[^-]+-.*-\\w"}',
]
for m in regexes:
    check("regex", "GET", "/api/v1/series", [("match[]", m), ("start", t - 3), ("end", t)])
    check("regex", "GET", "/api/v1/query", [("query", m), ("time", t)], mode="series")
for q in (r'label_replace(gpulse_gpu_up, "x", "$1<${2}>", "uuid", "(\\w+)-(.*)")',
          r'label_replace(gpulse_gpu_up, "x", "$name", "model", "(?P<name>\\pL+) .*")',
          r'label_replace(gpulse_gpu_up, "x", "$1x", "model", "(.*)")',
          r'label_replace(gpulse_gpu_up, "x", "$$1", "gpu", "\\d")'):
    check("label_replace", "GET", "/api/v1/query", [("query", q), ("time", t)])
for bad in (r'up{a=~"a(?=b)"}', r'up{a=~"(a)\\1"}', r'up{a=~"a*+"}', r'up{a=~"a**"}',
            r'up{a=~"(?<!a)b"}', r'up{a=~"\\C"}', r'up{a=~"x{1001}"}', r'up{a=~"[z-a]"}',
            r'label_replace(up, "x", "", "a", "(?>a)")'):
    a, b = check("regex refused", "GET", "/api/v1/query", [("query", bad), ("time", t)], mode="status")
    want = (422, "execution") if bad.startswith("label_replace") else (400, "bad_data")
    if (a[0], a[1].get("errorType")) != want:
        fails.append(f"{bad}: gpulsed {a}, want {want}")

# A 9 KB query, as Grafana's templated dashboards send, by GET and POST.
long_sel = "gpulse_gpu_up{gpu=~\"" + "|".join(str(i) for i in range(2500)) + "\"}"
assert len(long_sel) > 9000
for method in ("GET", "POST"):
    check("9 KB", method, "/api/v1/query", [("query", long_sel), ("time", t)])
# Body values come before the query string's (Go's FormValue).
for base in (gp, pr):
    code, doc = call(base, "POST", "/api/v1/query?query=vector(2)", body=b"query=vector(3)&time=%d" % t)
    assert code == 200 and doc["data"]["result"][0]["value"][1] == "3", (base, doc)
# A body over gpulsed's bound: 413 with the API's JSON (Prometheus takes 10 MB).
# (curl, which waits for "100 Continue" and so reads the early answer
# instead of writing into a closed connection.)
import subprocess
out = subprocess.run(["curl", "-s", "-w", "\\n%{http_code}", "--data-binary", "@-", gp + "/api/v1/query"],
                     input=b"query=" + b"1" * (1 << 20), capture_output=True, timeout=20).stdout.decode()
body, code = out.rsplit("\n", 1)
assert code == "413" and json.loads(body)["errorType"] == "bad_data", out[:300]

# Rules: the same pack, and the same filters select the same rules.
# Debian's Prometheus (2.42) knows type= but not rule_name[], rule_group[]
# and file[] (Prometheus 2.46 added them, with the semantics gpulsed
# follows: each list, when given, must hold the rule's name, group or
# file), so for those the expected answer is Prometheus's unfiltered one,
# filtered here.
def rules(base, params):
    code, doc = call(base, "GET", "/api/v1/rules", params)
    if code != 200:
        return code, doc.get("errorType")
    return code, sorted((g["name"], g["file"], r["name"], r["type"]) for g in doc["data"]["groups"]
                        for r in g["rules"])
def expect(params):
    typ = [v.lower() for k, v in params if k == "type"]
    code, listed = rules(pr, [p for p in params if p[0] == "type"])
    if code != 200:
        return code, listed
    want = {k: [v for kk, v in params if kk == k] for k in ("rule_name[]", "rule_group[]", "file[]")}
    return code, [r for r in listed
                  if (not want["rule_group[]"] or r[0] in want["rule_group[]"])
                  and (not want["file[]"] or r[1] in want["file[]"])
                  and (not want["rule_name[]"] or r[2] in want["rule_name[]"])]
nonempty = 0
for params in ([], [("type", "alert")], [("type", "record")], [("type", "ALERT")],
               [("rule_group[]", "gpulse.fast")], [("rule_group[]", "gpulse.fast"), ("type", "record")],
               [("rule_group[]", "gpulse.fast"), ("rule_group[]", "gpulse.thresholds")],
               [("rule_name[]", "gpulse:threshold:busy:ratio"), ("rule_name[]", "GPULost")],
               [("file[]", pack)], [("file[]", "/nosuch.yml")], [("rule_group[]", "nosuch")],
               [("type", "foo")]):
    a, b = rules(gp, params), expect(params)
    if a != b:
        fails.append(f"rules {params}: {a} vs {b}")
    nonempty += a[0] == 200 and bool(a[1])
assert nonempty >= 8, nonempty
# type= alone: Prometheus answers it itself, and must agree.
for params in ([("type", "alert")], [("type", "record")], [("type", "foo")]):
    if rules(gp, params) != rules(pr, params):
        fails.append(f"rules {params}: {rules(gp, params)} vs {rules(pr, params)}")

# Status, metadata, health: shapes and the stated differences.
a, b = check("buildinfo", "GET", "/api/v1/status/buildinfo", mode="keys")
assert set(a[1]["data"]) == set(b[1]["data"]), (a, b)
assert a[1]["data"]["version"] == "2.42.0" and b[1]["data"]["version"].startswith("2.42.0")
assert a[1]["data"]["revision"].startswith("gpulsed ")
a, b = check("runtimeinfo", "GET", "/api/v1/status/runtimeinfo", mode="keys")
assert set(a[1]["data"]) <= set(b[1]["data"]), (set(a[1]["data"]) - set(b[1]["data"]))
assert {"startTime", "CWD", "reloadConfigSuccess", "lastConfigTime", "corruptionCount",
        "goroutineCount", "GOMAXPROCS", "storageRetention"} <= set(a[1]["data"])
assert shape({k: a[1]["data"][k] for k in a[1]["data"]}) == shape({k: b[1]["data"][k] for k in a[1]["data"]})
a, b = check("config", "GET", "/api/v1/status/config", mode="shape")
assert "rule_files" in a[1]["data"]["yaml"] and pack in a[1]["data"]["yaml"]
a, b = check("flags", "GET", "/api/v1/status/flags", mode="keys")
assert all(isinstance(v, str) for v in a[1]["data"].values()) and a[1]["data"]["storage-path"]
a, b = check("tsdb", "GET", "/api/v1/status/tsdb", mode="keys")
hs = a[1]["data"]["headStats"]
assert set(hs) == {"numSeries", "numLabelPairs"} and set(hs) < set(b[1]["data"]["headStats"])
assert set(a[1]["data"]) == set(b[1]["data"]), (set(a[1]["data"]), set(b[1]["data"]))
assert shape(a[1]["data"]["seriesCountByMetricName"]) == shape(b[1]["data"]["seriesCountByMetricName"])
assert hs["numSeries"] > 10 and len(a[1]["data"]["seriesCountByMetricName"]) == 10
# metadata: gpulsed reads its /metrics as Prometheus's scrape did.
# (Prometheus scrapes OpenMetrics, whose counter families drop _total.)
for params in ([("metric", "gpulse_gpu_up")], [("metric", constant)], [("metric", "nosuch")],
               [("metric", "gpulse_queries_cancelled")], [("metric", "gpulse_queries_cancelled_total")]):
    check("metadata", "GET", "/api/v1/metadata", params)
a, b = call(gp, "GET", "/api/v1/metadata"), call(pr, "GET", "/api/v1/metadata")
gm, pm = a[1]["data"], b[1]["data"]
missing = sorted(set(pm) - set(gm))
assert not missing, ("families Prometheus has from gpulsed's scrape but gpulsed's metadata lacks", missing)
for k in pm:
    if gm[k] != pm[k]:
        fails.append(f"metadata {k}: {gm[k]} vs {pm[k]}")
a, b = check("metadata", "GET", "/api/v1/metadata", [("limit", "3")], mode="keys")
assert len(a[1]["data"]) == 3 and len(b[1]["data"]) == 3
check("metadata bad", "GET", "/api/v1/metadata", [("limit", "x")])
for p in ("/-/healthy", "/-/ready"):
    check("health", "GET", p, mode="status")
check("no route", "GET", "/api/v1/nosuch", mode="status")
check("PUT", "PUT", "/api/v1/query", [("query", "1")], mode="status", body=b"")

for f in fails:
    print("FAIL:", f)
if fails:
    sys.exit(1)
print("all requests agree")
PY

# promtool's query subcommands are a Prometheus API client (POST first).
if promtool query instant --help >/dev/null 2>&1; then
	out=$(promtool query instant "$URL" 'count(gpulse_gpu_memory_total_bytes)') || fail "promtool query instant: $out"
	grep -q '=> 1 @' <<<"$out" || fail "promtool query instant: $out"
	now=$(date +%s)
	out=$(promtool query range --start=$((now - 5)) --end=$((now - 1)) --step=1s "$URL" 'gpulse_gpu_up') ||
		fail "promtool query range: $out"
	grep -q 'gpulse_gpu_up{' <<<"$out" || fail "promtool query range: $out"
	out=$(promtool query series --match='gpulse_gpu_up' "$URL") || fail "promtool query series: $out"
	grep -q '__name__="gpulse_gpu_up"' <<<"$out" || fail "promtool query series: $out"
	out=$(promtool query labels --match='gpulse_gpu_up' "$URL" gpu) || fail "promtool query labels: $out"
	[ "$out" = 0 ] || fail "promtool query labels: $out"
fi
echo PASS
