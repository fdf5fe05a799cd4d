# The Grafana dashboards of deploy/grafana/ on what they are made for: a
# real Prometheus (Debian's) scraping gpulsed every second and evaluating
# the same test alert, so series carry the instance and job labels the
# scrape adds. As test_grafana_dashboards.sh (grafana_check.py), with
# $instance set to the real target: every expression parses and returns
# data, and the variables' label_values list that instance and both GPUs.
# Only the benchmark series (no benchmark runs in a test) and the HBM
# temperature (the recordings have no column for it) may be empty.
# Skipped when prometheus is not installed.
# test-clock: real (the Go server reads the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"
: "${GPULSE_SOURCE_DIR:?}" "${GPULSE_BUILD_DIR:?}"
need prometheus
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"

cat >"$WORK/t.yml" <<'YML'
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
profiling:
  socket: "$WORK/inject.sock"
YML
export GPULSE_FAKE_NVML_RECORDING="$REC,$GPULSE_TEST_DATA/recordings/h200-mixed-10hz.csv" \
	GPULSE_FAKE_NVML_SPEED=1 GPULSE_FAKE_NVML_FAULTS="xid:gpu=0:at=1:code=79"
start_daemon g --config "$WORK/g.yml" --nvml-library "$FAKE_NVML"
"$FAKE" "$WORK/inject.sock" basic >"$WORK/inject.out" 2>"$WORK/inject.log" &
PIDS+=($!)

cat >"$WORK/prom.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $WORK/t.yml
scrape_configs:
  - job_name: gpulse
    static_configs:
      - targets: ["127.0.0.1:$PORT"]
YML
start_prometheus "$WORK/prom.yml"
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
wait_for '[ "$(curl -s "$PROM/api/v1/query?query=ALERTS" | jcheck "len(d[\"data\"][\"result\"])==2" && echo y)" = y ]' ||
	fail "prometheus has no test alert: $(curl -s "$PROM/api/v1/query?query=ALERTS")"
wait_for '[ "$(curl -s "$PROM/api/v1/query?query=gpulse_process_kernel_seconds_total" | jcheck "len(d[\"data\"][\"result\"])>0" && echo y)" = y ]' ||
	fail "prometheus has no kernel series"
wait_for '[ "$(curl -s "$PROM/api/v1/query?query=gpulse_gpu_bottleneck%3D%3D1" | jcheck "len(d[\"data\"][\"result\"])==2" && echo y)" = y ]' ||
	fail "prometheus has no diagnosis class"
# A few scrapes more for rate() and increase(): counted, not slept for
# (a loaded machine scrapes less often than every second).
scrapes() {
	curl -s "$PROM/api/v1/query" --data-urlencode 'query=count_over_time(up[10m])' |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)'
}
n0=$(scrapes)
wait_for '[ "$(scrapes)" -ge $((n0 + 3)) ]' || fail "prometheus scraped $(($(scrapes) - n0)) times more, want 3"

python3 "$(dirname "$0")/grafana_check.py" "$PROM" "127.0.0.1:$PORT" \
	gpulse_bench_,gpulse_gpu_memory_temperature_celsius \
	"$GPULSE_SOURCE_DIR/deploy/grafana/gpulse-fleet.json" "$GPULSE_SOURCE_DIR/deploy/grafana/gpulse-host.json" ||
	fail "the Grafana dashboards on Prometheus"
echo PASS
