# Generative differential test of the PromQL engine and the query API
# against Debian's Prometheus 2.42 (tests/promql_gen/promql_gen.py draws
# the expressions; docs/internals/promql.md, "Generative differential
# test"). gpulsed replays the H200 recording with a store and remote_write
# into Prometheus (--web.enable-remote-write-receiver); then it stops
# collecting (restarted without a GPU, to serve its store), the queue
# drains, the two stores are checked equal sample by sample, and only
# then are queries compared.
#
# CI: a fixed seed and a bounded count. By hand, any arguments go to the
# generator, e.g.
#   GPULSED=build/gpulsed GPULSE=build/gpulse GPULSE_TEST_DATA=data \
#     tests/integration/test_promql_generative.sh --seconds 3600
# (a random seed, printed), or --seed S --only N to repeat one case.
# COLLECT_SECONDS (default 40) is how long gpulsed collects first.
# test-clock: real (Prometheus is Go and reads the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"

if ! command -v prometheus >/dev/null; then
	[ "${CI:-}" = true ] && fail "prometheus is not installed (scripts/install-deps.sh installs it)"
	echo "SKIP: prometheus not installed"
	exit 77
fi
GEN="$(dirname "$0")/../promql_gen/promql_gen.py"
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(--seed 20240607 --count 1000)

PPORT=$(free_port)
PROM="http://127.0.0.1:$PPORT"
# Prometheus's defaults otherwise: a subquery without a step takes the
# evaluation interval, 1m, as gpulse's subquery_step_ms does.
: >"$WORK/prom.yml"
prometheus --config.file="$WORK/prom.yml" --storage.tsdb.path="$WORK/prom" \
	--web.listen-address="127.0.0.1:$PPORT" --web.enable-remote-write-receiver \
	--log.level=warn 2>>"$WORK/prometheus.log" &
PIDS+=("$!")
wait_for 'curl -sf "$PROM/-/ready" >/dev/null' || fail "prometheus did not start"

# No external label: what leaves gpulsed is what it stores.
cat >"$WORK/gpulse.yml" <<YML
alerting:
  external_labels:
    instance: ""
storage:
  path: $WORK/db
remote_write:
  - url: $PROM/api/v1/write
    name: prom
    queue_config:
      batch_send_deadline: 200ms
      min_backoff: 50ms
      max_backoff: 500ms
YML

# Collection runs an hour in the past (libfaketime): gpulsed keeps
# storing its self-metrics while it serves afterwards, and those samples
# land an hour later, out of reach of every query (offsets, ranges and @
# stay within minutes of the collected window).
FAKETIME_LIB=$(dpkg -L libfaketime 2>/dev/null | grep -m1 '/libfaketimeMT\.so\.1$' || true)
if [ -z "$FAKETIME_LIB" ]; then
	[ "${CI:-}" = true ] && fail "libfaketime is not installed (scripts/install-deps.sh installs it)"
	echo "SKIP: libfaketime not installed"
	exit 77
fi
ASAN_OPTIONS="$(preload_asan_options)" LD_PRELOAD="$FAKETIME_LIB" FAKETIME="-3600s" FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME_FORCE_MONOTONIC_FIX=0 \
	start_daemon collect --config "$WORK/gpulse.yml" --replay "$REC" --replay-speed 1
count_prom() {
	curl -s "$PROM/api/v1/query" --data-urlencode 'query=count(last_over_time({__name__=~".+"}[2h]))' |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)'
}
wait_for '[ "$(count_prom)" -gt 0 ]' || fail "no samples reached Prometheus"
# Data for the queries to read: collection runs on the wall clock.
sleep "${COLLECT_SECONDS:-40}"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# gpulsed again, without a GPU: it serves its store and sends what its
# queue still holds, and collects nothing more.
serve() {
	start_daemon "serve$1" --config "$WORK/gpulse.yml" --nvml-library /nonexistent/libnvidia-ml.so.1
	wait_for '[ "$(metric prometheus_remote_storage_samples_pending "remote_name=\"prom\"")" = 0 ]' ||
		fail "the remote_write queue did not drain"
}
END=$(python3 -c 'import time; print("%.3f" % (time.time() - 3600 + 30))')
serve 0

# A crash is a disagreement too (exit 1 at the end); the run goes on
# after it with a fresh gpulsed over the same store, from the next index.
rc=0 first=0 restarts=0 crashed=0
while :; do
	set +e
	python3 "$GEN" --gpulse "$URL" --prometheus "$PROM" --end "$END" --first "$first" "${ARGS[@]}" |
		tee "$WORK/gen.out"
	rc=${PIPESTATUS[0]}
	set -e
	[ "$rc" = 3 ] || break
	crashed=1
	restarts=$((restarts + 1))
	echo "gpulsed stopped answering (restart $restarts): $(tail -n 5 "$WORK/serve$((restarts - 1)).log")"
	[ "$restarts" -le 20 ] || fail "gpulsed crashed 20 times"
	first=$(sed -n 's/^NEXT //p' "$WORK/gen.out")
	[ -n "$first" ] || break
	# The same seed goes on (a random one was printed first).
	ARGS+=(--seed "$(sed -n '1s/^seed //p' "$WORK/gen.out")")
	serve "$restarts"
done
[ "$crashed" = 0 ] || fail "gpulsed crashed $restarts times"
[ "$rc" = 0 ] || fail "gpulsed and Prometheus disagree (exit $rc)"
echo PASS
