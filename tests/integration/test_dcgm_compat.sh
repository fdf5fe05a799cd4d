# DCGM-compatible series (issue 18, item 5): deploy/rules/dcgm-compat.rules.yml
# passes promtool's and gpulse's checks; its unit tests
# (tests/rules/dcgm_compat_test.yml) pass in `promtool test rules` and
# `gpulse rules test`, and fail in both once one unit conversion is
# wrong. Then gpulsed (fake NVML, the H200 recording frozen at one row)
# runs the file as recording rules over its store, and Debian's Prometheus
# scraping that gpulsed runs it too: both must answer every DCGM series
# with the same labels (but instance and job, which only the scrape adds)
# and values, and the queries of dcgm-exporter's Grafana dashboard
# (grafana.com 12239: temperature, power, SM clock, utilization,
# framebuffer, tensor activity, and its variables) must return data in
# both. Then `gpulse fleet` against gpulsed itself, and its refusals.
# test-clock: real (Prometheus is Go and reads the system clock)
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_SOURCE_DIR:?}"
command -v promtool >/dev/null || fail "promtool is not installed (scripts/install-deps.sh installs prometheus)"
command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps.sh installs it)"

RULES="$GPULSE_SOURCE_DIR/deploy/rules/dcgm-compat.rules.yml"
UNIT="$GPULSE_SOURCE_DIR/tests/rules/dcgm_compat_test.yml"

promtool check rules "$RULES" >"$WORK/pc.out" 2>&1 || fail "promtool check rules: $(cat "$WORK/pc.out")"
"$GPULSE" rules check "$RULES" >"$WORK/gc.out" 2>&1 || fail "gpulse rules check: $(cat "$WORK/gc.out")"
np=$(sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p' "$WORK/pc.out")
ng=$(sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p' "$WORK/gc.out")
[ -n "$np" ] && [ "$np" = "$ng" ] || fail "promtool found $np rules, gpulse $ng"

(cd "$(dirname "$UNIT")" && promtool test rules "$(basename "$UNIT")") >"$WORK/pt.out" 2>&1 ||
	fail "promtool test rules: $(cat "$WORK/pt.out")"
(cd "$(dirname "$UNIT")" && "$GPULSE" rules test "$(basename "$UNIT")") >"$WORK/gt.out" 2>&1 ||
	fail "gpulse rules test: $(cat "$WORK/gt.out")"
# The same tests against a copy whose SM clock is off by 1000 (kHz, not
# MHz): both tools must fail, on that series.
mkdir -p "$WORK/bad/deploy/rules" "$WORK/bad/tests/rules"
python3 - "$RULES" "$WORK/bad/deploy/rules/dcgm-compat.rules.yml" <<'PY'
import sys
s = open(sys.argv[1]).read()
old = "(gpulse_gpu_sm_clock_hertz / 1e6 "
assert s.count(old) == 1
open(sys.argv[2], "w").write(s.replace(old, "(gpulse_gpu_sm_clock_hertz / 1e3 "))
PY
cp "$UNIT" "$WORK/bad/tests/rules/"
(cd "$WORK/bad/tests/rules" && promtool test rules "$(basename "$UNIT")") >"$WORK/pt2.out" 2>&1 &&
	fail "promtool passed with the SM clock in kHz"
(cd "$WORK/bad/tests/rules" && "$GPULSE" rules test "$(basename "$UNIT")") >"$WORK/gt2.out" 2>&1 &&
	fail "gpulse passed with the SM clock in kHz"
grep -q 'DCGM_FI_DEV_SM_CLOCK' "$WORK/pt2.out" || fail "promtool failed elsewhere: $(cat "$WORK/pt2.out")"
grep -q 'DCGM_FI_DEV_SM_CLOCK' "$WORK/gt2.out" || fail "gpulse failed elsewhere: $(cat "$WORK/gt2.out")"

# gpulsed with the rules, two GPUs frozen at rows of the recording.
cat >"$WORK/g.yml" <<YML
rule_files: [$RULES]
sampling: {fast: 100ms, normal: 200ms, slow: 1s}
YML
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=2 GPULSE_FAKE_NVML_SPEED=0
start_daemon g --config "$WORK/g.yml" --nvml-library "$FAKE_NVML" --storage-path "$WORK/db"
cat >"$WORK/prom.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [$RULES]
scrape_configs:
  - job_name: gpulse
    static_configs:
      - targets: ["127.0.0.1:$PORT"]
YML
start_prometheus "$WORK/prom.yml"

python3 - "$URL" "$PROM" "$RULES" <<'PY' || fail "gpulsed and Prometheus disagree on the DCGM series"
import json, re, sys, time, urllib.parse, urllib.request
gp, pr, rules = sys.argv[1:4]
names = re.findall(r"^      - record: (DCGM_\w+)$", open(rules).read(), re.M)
assert len(names) >= 50, len(names)

def q(base, expr):
    u = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(u, timeout=10) as r:
        d = json.load(r)
    assert d["status"] == "success", d
    return d["data"]["result"]

def keyed(res):
    out = {}
    for s in res:
        m = {k: v for k, v in s["metric"].items() if k not in ("instance", "job")}
        out[tuple(sorted(m.items()))] = float(s["value"][1])
    return out

# Series whose gpulse source the fake NVML lacks (HBM temperature, NVLink
# traffic, the tensor pipes the recording has no column for) are absent
# in both; the others must be present and equal.
deadline = time.time() + 40
while True:
    a = {n: keyed(q(gp, n)) for n in names}
    b = {n: keyed(q(pr, n)) for n in names}
    present = [n for n in names if a[n]]
    if len(present) >= 40 and all(a[n] == b[n] for n in names):
        break
    if time.time() > deadline:
        for n in names:
            if a[n] != b[n]:
                print(f"{n}: gpulsed {a[n]} prometheus {b[n]}", file=sys.stderr)
        print(f"{len(present)} DCGM series present in gpulsed", file=sys.stderr)
        sys.exit(1)
    time.sleep(1)

# Labels as dcgm-exporter's, one series per GPU, DCGM's units.
util = a["DCGM_FI_DEV_GPU_UTIL"]
assert len(util) == 2, util
for labels, v in util.items():
    l = dict(labels)
    assert set(l) >= {"gpu", "UUID", "device", "modelName", "Hostname", "pci_bus_id",
                      "DCGM_FI_DRIVER_VERSION"}, l
    assert l["device"] == "nvidia" + l["gpu"] and l["UUID"].startswith("GPU-"), l
    assert "uuid" not in l and "model" not in l, l
    assert 0 <= v <= 100, v
raw = {s["metric"]["gpu"]: float(s["value"][1]) for s in q(gp, "gpulse_gpu_sm_clock_hertz")}
for labels, v in a["DCGM_FI_DEV_SM_CLOCK"].items():
    assert abs(v - raw[dict(labels)["gpu"]] / 1e6) < 1e-9, (v, raw)
for labels, v in a["DCGM_FI_PROF_SM_ACTIVE"].items():
    assert 0 <= v <= 1, v
print(f"{len(present)} of {len(names)} DCGM series equal in gpulsed and Prometheus")

# dcgm-exporter's dashboard: its queries with the variables as Grafana
# fills them (every instance and GPU), and its variable queries.
inst = "|".join(sorted({s["metric"]["instance"] for s in q(pr, "DCGM_FI_DEV_GPU_TEMP")}))
dash = [
    'DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"}',
    'avg(DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"})',
    'DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"}',
    'sum(DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"})',
    'DCGM_FI_DEV_SM_CLOCK{instance=~"$instance", gpu=~"$gpu"} * 1000000',
    'DCGM_FI_DEV_GPU_UTIL{instance=~"$instance", gpu=~"$gpu"}',
    'DCGM_FI_DEV_FB_USED{instance=~"$instance", gpu=~"$gpu"}',
    'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{instance=~"$instance", gpu=~"$gpu"}',
]
for e in dash:
    r = q(pr, e.replace("$instance", inst).replace("$gpu", "0|1"))
    assert r, f"no data in Prometheus for the dashboard's {e}"
    # gpulsed has no instance label of its own: Grafana on gpulsed
    # directly sets $instance to all (.*) as its variable query finds none.
    r = q(gp, e.replace("$instance", ".*").replace("$gpu", "0|1"))
    assert r, f"no data in gpulsed for the dashboard's {e}"
for base in (pr, gp):
    u = base + "/api/v1/label/gpu/values?" + urllib.parse.urlencode({"match[]": "DCGM_FI_DEV_GPU_TEMP"})
    with urllib.request.urlopen(u, timeout=10) as r:
        vals = json.load(r)["data"]
    assert sorted(vals) == ["0", "1"], (base, vals)
print("the DCGM dashboard's queries return data in both")
PY

# gpulse fleet asked of gpulsed itself (no instance label: the host's
# name stands in), and its refusals. First the live diagnosis's first
# 5 s windows must be in the store.
wait_for '[ "$(curl -sf --max-time 5 --get --data-urlencode "query=count(gpulse_gpu_bottleneck == 1)" "$URL/api/v1/query" | python3 -c "import json,sys; r=json.load(sys.stdin)[\"data\"][\"result\"]; print(r[0][\"value\"][1] if r else 0)")" = 2 ]' ||
	fail "no stored diagnosis verdicts for both GPUs"
"$GPULSE" fleet --prometheus "$URL" --since 20s --json >"$WORK/fleet.json" 2>"$WORK/fleet.err" ||
	fail "gpulse fleet on gpulsed: $(cat "$WORK/fleet.err")"
python3 - "$WORK/fleet.json" <<'PY' || fail "gpulse fleet on gpulsed: $(cat "$WORK/fleet.json")"
import json, socket, sys
d = json.load(open(sys.argv[1]))
g = d["gpus"]
assert [x["gpu"] for x in g] == ["0", "1"], g
for x in g:
    assert x["instance"] == "" and x["hostname"] == socket.gethostname(), x
    assert x["health"] == "ok" and x["up"] is True, x
    assert x["bottleneck_source"] == "diagnosis" and x["bottleneck"], x
    assert set(x["figures"]) == {"utilization", "power", "sm_clock", "temperature"}, x
# Two GPUs of a model are too few to call one odd.
assert all(x["outliers"] == [] for x in g), g
PY
"$GPULSE" fleet --prometheus "$URL" --since 20s >"$WORK/fleet.txt" || fail "gpulse fleet text"
grep -q "^$(hostname) " "$WORK/fleet.txt" || fail "the host's name is not in the rows: $(cat "$WORK/fleet.txt")"
rc=0
"$GPULSE" fleet --prometheus "$URL" --since 0s >/dev/null 2>"$WORK/e1" || rc=$?
[ "$rc" = 2 ] && grep -q -- '--since' "$WORK/e1" || fail "--since 0s: exit $rc, $(cat "$WORK/e1")"
rc=0
"$GPULSE" fleet --prometheus "http://127.0.0.1:$(free_port)" >/dev/null 2>"$WORK/e2" || rc=$?
[ "$rc" = 1 ] && grep -q 'gpulse_gpu_info' "$WORK/e2" || fail "unreachable: exit $rc, $(cat "$WORK/e2")"
rc=0
"$GPULSE" fleet --prometheus "$URL/-/healthy#" >/dev/null 2>"$WORK/e3" || rc=$?
[ "$rc" = 1 ] || fail "a server that is not Prometheus's API: exit $rc, $(cat "$WORK/e3")"
echo PASS
