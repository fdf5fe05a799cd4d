# Edge aggregation (remote_write mode: summary) against the real Debian
# Prometheus evaluating the shipped rule pack on what it receives: on the
# bundled faults through the fake NVML (a GPU lost, an Xid 79), the
# central Prometheus fires the same alerts (alertname, gpu, instance) as
# gpulsed's own engine does at the edge, while it received summaries of
# every series and raw samples only of the GPUs in trouble.
# test-clock: real (Prometheus is Go and reads the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

need prometheus
PACK="$GPULSE_SOURCE_DIR/deploy/rules/gpulse.rules.yml"

PPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PROM="http://127.0.0.1:$PPORT"
cat >"$WORK/prom.yml" <<YML
global:
  evaluation_interval: 1s
rule_files: ["$PACK"]
YML
prometheus --config.file="$WORK/prom.yml" --storage.tsdb.path="$WORK/prom" \
	--web.listen-address="127.0.0.1:$PPORT" --web.enable-remote-write-receiver \
	--log.level=warn 2>"$WORK/prometheus.log" &
PIDS+=("$!")
wait_for 'curl -sf "$PROM/-/ready" >/dev/null' || fail "prometheus did not start"

cat >"$WORK/gpulse.yml" <<YML
sampling:
  fast: 100ms
  normal: 200ms
  slow: 1s
  rediscover: 1s
storage:
  path: $WORK/db
rule_files: ["$PACK"]
remote_write:
  - url: $PROM/api/v1/write
    name: central
    mode: summary
    summary:
      interval: 10s
    # The central Prometheus evaluates the pack itself: the edge's ALERTS
    # would collide with its own.
    write_relabel_configs:
      - source_labels: [__name__]
        regex: "ALERTS|ALERTS_FOR_STATE"
        action: drop
    queue_config:
      batch_send_deadline: 200ms
      min_backoff: 50ms
      max_backoff: 500ms
YML
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=3 GPULSE_FAKE_NVML_SPEED=1
export GPULSE_FAKE_NVML_FAULTS="lost:gpu=2:at=4:until=9;xid:gpu=0:at=4:code=79"
start_daemon edge --config "$WORK/gpulse.yml" --nvml-library "$FAKE_NVML"

# The edge's series carry no instance label: gpulsed adds it, its host
# name (alerting.external_labels' default), to what it sends and notifies.
HOST=$(hostname)
firing() {  # BASE: alertname/gpu/instance of what fired in the last 5 minutes
	curl -s "$1/api/v1/query" --data-urlencode 'query=max_over_time(ALERTS{alertstate="firing"}[5m])' |
		python3 -c 'import json,sys; print(" ".join(sorted({m["metric"]["alertname"]+"/"+m["metric"].get("gpu","-")+"/"+m["metric"].get("instance",sys.argv[1]) for m in json.load(sys.stdin)["data"]["result"]})))' "$HOST"
}
wait_for '[[ "$(firing "$URL")" == *GPULost/2* && "$(firing "$URL")" == *GPUFallenOffBus/0* ]]' ||
	fail "the edge did not fire GPULost and GPUFallenOffBus: $(firing "$URL")"
wait_for '[[ "$(firing "$PROM")" == *GPULost/2* && "$(firing "$PROM")" == *GPUFallenOffBus/0* ]]' ||
	fail "the central Prometheus did not fire them: $(firing "$PROM") (edge: $(firing "$URL"))"
# Summaries arrived for the GPUs that were never in trouble.
wait_for '[ "$(curl -s "$PROM/api/v1/query" --data-urlencode "query=count(gpulse_gpu_power_watts:max10s{gpu=\"1\"})" | python3 -c "import json,sys; r=json.load(sys.stdin)[\"data\"][\"result\"]; print(r[0][\"value\"][1] if r else 0)")" = 1 ]' ||
	fail "no summary of GPU 1's power reached Prometheus"
# GPU 1 was never hot: none of its raw fast-tier samples were sent.
raw1=$(curl -s "$PROM/api/v1/query" --data-urlencode 'query=count_over_time(gpulse_gpu_power_watts{gpu="1"}[5m])' |
	python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)')
[ "$raw1" = 0 ] || fail "raw samples of GPU 1 sent in summary mode ($raw1)"
raw2=$(curl -s "$PROM/api/v1/query" --data-urlencode 'query=count_over_time(gpulse_gpu_power_watts{gpu="0"}[5m])' |
	python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)')
[ "$raw2" != 0 ] || fail "no raw samples of GPU 0 while its alert fired"
# The same alerts at both ends, a few seconds after the faults (time for
# one to fire at one end only), once what the edge sent has reached the
# central Prometheus and been evaluated there (how long that takes is
# the machine's speed).
sleep 3
wait_for '[ "$(firing "$URL")" = "$(firing "$PROM")" ]' || true
edge=$(firing "$URL") central=$(firing "$PROM")
echo "edge:    $edge"
echo "central: $central"
[ "$edge" = "$central" ] || fail "the edge fired [$edge], the central Prometheus [$central]"
echo "PASS"
