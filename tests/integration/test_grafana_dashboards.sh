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

# Series that may be empty here, and why (parse-only for them):
#   gpulse_bench_*: no benchmark runs in a test (gpulse bench writes them);
#   gpulse_gpu_memory_temperature_celsius: the recordings have no HBM
#     temperature column;
#   gpulse_gpu_max_sm_clock_hertz: gpulsed keeps the cards' identity (max
#     clocks) out of its store; Prometheus has it from the scrape.
# Every series name the dashboards read is one gpulsed exports: a string
# literal of the exposition's sources (its field table, families and the
# profiling series), ALERTS (which rules make) and gpulse_bench_* aside.
python3 - "$GPULSE_SOURCE_DIR" "$DASH/gpulse-fleet.json" "$DASH/gpulse-host.json" <<'PY' || fail "names not exported"
import json, os, re, sys
root = sys.argv[1]
src = ""
for d, _, fs in os.walk(os.path.join(root, "src")):
    if "/web" not in d:
        src += "".join(open(os.path.join(d, f), errors="replace").read() for f in fs if f.endswith((".c", ".h")))
exported = set(re.findall(r'"(gpulse_[a-z0-9_]+)"', src))
bad = set()
for path in sys.argv[2:]:
    for p in json.load(open(path))["panels"]:
        for t in p.get("targets", []):
            for name in re.findall(r"\b(gpulse_[a-z0-9_]+)", t["expr"]):
                if not name.startswith("gpulse_bench_") and name not in exported:
                    bad.add(name)
assert not bad, f"not exported by gpulsed: {sorted(bad)}"
PY
python3 "$(dirname "$0")/grafana_check.py" "$URL" '.*' \
	gpulse_bench_,gpulse_gpu_memory_temperature_celsius,gpulse_gpu_max_sm_clock_hertz \
	"$DASH/gpulse-fleet.json" "$DASH/gpulse-host.json" || fail "the Grafana dashboards"
echo PASS
