#!/usr/bin/env python3
# Checks Grafana dashboard files for the shape Grafana imports and runs
# every PromQL expression in them against a Prometheus query API, with
# the template variables set as Grafana sets them. Used by
# test_grafana_dashboards.sh (gpulsed's own API) and
# test_grafana_prometheus.sh (a real Prometheus scraping gpulsed).
import json, re, sys, urllib.parse, urllib.request

# grafana_check.py URL INSTANCE EMPTY_OK DASHBOARD.json...
#   URL: a Prometheus query API (gpulsed's own, or a Prometheus)
#   INSTANCE: what $instance is set to (a regex, as Grafana sends it)
#   EMPTY_OK: comma-separated series names (or prefixes) whose queries
#     may return nothing; they must still parse
url, instance = sys.argv[1], sys.argv[2]
MAY_BE_EMPTY = [k for k in sys.argv[3].split(",") if k]
DASHBOARDS = sys.argv[4:]
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
                 ("$instance", instance), ("${instance}", instance), ("$gpu", gpu), ("${gpu}", gpu)):
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
for path in DASHBOARDS:
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
        elif v == "instance" and instance != ".*" and {x.get("instance") for x in s["data"]} != {instance}:
            problems.append(f"{name}: variable instance's values {sorted({str(x.get('instance')) for x in s['data']})}, want {instance}")
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
