# Every series /metrics exports is stored (issue 18, item 3): after a few
# seconds of replay, every metric name and every label set that two
# renderings of /metrics in a row show is in /api/v1/series, and the
# queries that need the non-field series answer: a group_left join on
# gpulse_gpu_info, scalar(gpulse_gpus), the self-metrics. No series has two
# writers: gpulse_gpu_up (the ingest's, once a second) holds one sample a
# second, not two.
source "$(dirname "$0")/lib.sh"

start_daemon src --replay "$REC" --replay-speed 1 --storage-path "$WORK/db"
sleep 4
fetch /metrics >"$WORK/m1" || fail "no /metrics"
sleep 1.5
fetch /metrics >"$WORK/m2" || fail "no /metrics"
sleep 1.5

python3 - "$URL" "$WORK/m1" "$WORK/m2" <<'PY' || fail "stored and exported differ"
import json, re, sys, time, urllib.parse, urllib.request
url = sys.argv[1]
line = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)')
lab = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
def unescape(v):
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), v)
def series(path):
    out = set()
    for l in open(path):
        m = line.match(l)
        if not m:
            continue
        labels = {"__name__": m.group(1)}
        for k, v in lab.findall(m.group(2) or ""):
            if v:
                labels[k] = unescape(v)
        out.add(json.dumps(labels, sort_keys=True))
    return out
stable = series(sys.argv[2]) & series(sys.argv[3])
names = {json.loads(s)["__name__"] for s in stable}
assert len(names) > 50, len(names)

def get(path, **params):
    with urllib.request.urlopen(url + path + "?" + urllib.parse.urlencode(params, doseq=True), timeout=10) as r:
        d = json.load(r)
    assert d["status"] == "success", d
    return d["data"]
now = time.time()
stored = {json.dumps(s, sort_keys=True) for s in
          get("/api/v1/series", **{"match[]": '{__name__=~".+"}', "start": now - 3, "end": now})}
missing_names = sorted(names - {json.loads(s)["__name__"] for s in stored})
assert not missing_names, ("exported names not stored", missing_names)
missing = sorted(stable - stored)
assert not missing, ("exported series not stored", missing[:20], len(missing))
print(f"{len(names)} names, {len(stable)} series: all stored")

# The queries the issue names.
r = get("/api/v1/query", query="gpulse_gpu_power_watts * on(gpu) group_left(driver_version) gpulse_gpu_info")
assert r["result"] and "driver_version" in r["result"][0]["metric"], r
r = get("/api/v1/query", query="scalar(gpulse_gpus)")
assert r["resultType"] == "scalar" and float(r["result"][1]) >= 1, r
r = get("/api/v1/query", query="gpulse_scrapes_total")
assert r["result"], r
r = get("/api/v1/query", query="process_resident_memory_bytes > 0")
assert r["result"], r
# One writer per series: the ingest writes gpulse_gpu_up once a second.
r = get("/api/v1/query", query="count_over_time(gpulse_gpu_up[4s])")
assert 3 <= float(r["result"][0]["value"][1]) <= 5, r
r = get("/api/v1/query", query="count_over_time(gpulse_gpus[4s])")
assert 3 <= float(r["result"][0]["value"][1]) <= 5, r
PY
echo PASS
