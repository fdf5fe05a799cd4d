# gpulsed keeps what it samples in its store (--storage-path) and answers
# Prometheus's query API from it: instant and range queries, series,
# labels and label values in Prometheus's JSON; bad input gets 400 with
# Prometheus's error envelope; the history survives a restart; a store
# held by another gpulsed or a foreign file stops the daemon (exit 2);
# with no storage the API answers 503.
source "$(dirname "$0")/lib.sh"

DB="$WORK/db"
start_daemon api --replay "$REC" --replay-speed 1 --storage-path "$DB"

# q PATH: the JSON body of PATH, whatever the status (curl -f would hide
# the error envelope).
q() { curl -s --max-time 5 "$URL$1"; }
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL$1"; }
# jcheck PYTHON-EXPR: evaluates EXPR with d = the JSON on stdin.
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
enc() { python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

wait_for '[ "$(q "/api/v1/query?query=gpulse_gpu_power_watts" | jcheck "len(d[\"data\"][\"result\"])==1" && echo y)" = y ]' ||
	fail "no power sample in the store: $(q "/api/v1/query?query=gpulse_gpu_power_watts")"
sleep 6

# An instant vector in Prometheus's format: labels as on /metrics (a replayed
# GPU's series carry source="replay"), the
# value a string, the time a number.
q "/api/v1/query?query=gpulse_gpu_power_watts" | jcheck '
d["status"]=="success" and d["data"]["resultType"]=="vector" and
[set(r["metric"]) for r in d["data"]["result"]]==[{"__name__","gpu","uuid","model","source"}] and
d["data"]["result"][0]["metric"]["gpu"]=="0" and
isinstance(d["data"]["result"][0]["value"][0],(int,float)) and
isinstance(d["data"]["result"][0]["value"][1],str) and float(d["data"]["result"][0]["value"][1])>0' ||
	fail "instant query: $(q "/api/v1/query?query=gpulse_gpu_power_watts")"

# The stored value is the one /metrics shows (the replay holds each row 100 ms).
now=$(date +%s.%N | cut -c1-14)
avg=$(q "/api/v1/query?query=$(enc 'avg_over_time(gpulse_gpu_utilization_ratio[5s])')&time=$now" |
	python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; assert len(r)==1 and "__name__" not in r[0]["metric"]; v=float(r[0]["value"][1]); assert 0<=v<=1; print(v)') ||
	fail "avg_over_time"
# The same average from the raw points of a range selector.
q "/api/v1/query?query=$(enc 'gpulse_gpu_utilization_ratio[5s]')&time=$now" | python3 -c '
import json,sys
d=json.load(sys.stdin); assert d["data"]["resultType"]=="matrix"
vs=[float(v) for t,v in d["data"]["result"][0]["values"]]
assert 40<=len(vs)<=52, len(vs)
a=sum(vs)/len(vs); b=float(sys.argv[1]); assert abs(a-b)<=1e-9*max(1,abs(a)), (a,b)' "$avg" ||
	fail "avg_over_time does not match the raw samples"
q "/api/v1/query?query=$(enc 'sum by (gpu) (gpulse_gpu_memory_used_bytes)')" |
	jcheck 'd["data"]["result"][0]["metric"]=={"gpu":"0"}' || fail "sum by (gpu)"
q "/api/v1/query?query=1%2B1" | jcheck 'd["data"]["resultType"]=="scalar" and d["data"]["result"][1]=="2"' ||
	fail "scalar result"
# Sample values as Prometheus's API writes them (Go's FormatFloat, 'e'
# when |v| < 1e-6 or |v| >= 1e21, else 'f'), asked of Debian's
# Prometheus 2.42.
for pair in '1e21 1e+21' '5.62181803979911e-07 5.62181803979911e-07' '1e-6 0.000001' \
	'-1e-7 -1e-07' '123456789012345680000 123456789012345680000' '9.99999e20 999999000000000000000'; do
	set -- $pair
	q "/api/v1/query?query=$(enc "vector($1)")" | jcheck "d['data']['result'][0]['value'][1]=='$2'" ||
		fail "vector($1) is not \"$2\": $(q "/api/v1/query?query=$(enc "vector($1)")")"
done
# A scalar answer is written with 'f' always (promql.Scalar's MarshalJSON).
for pair in '1e21 1000000000000000000000' '1e-7 0.0000001' '-2.5e22 -25000000000000000000000'; do
	set -- $pair
	q "/api/v1/query?query=$(enc "$1")" | jcheck "d['data']['resultType']=='scalar' and d['data']['result'][1]=='$2'" ||
		fail "scalar $1 is not \"$2\": $(q "/api/v1/query?query=$(enc "$1")")"
done

# query_range, step 1s, Grafana-style parameters (fractional seconds).
end=$(date +%s.%N | cut -c1-14); start=$(python3 -c "print(round($end-4,3))")
q "/api/v1/query_range?query=gpulse_gpu_power_watts&start=$start&end=$end&step=1" | python3 -c '
import json,sys
d=json.load(sys.stdin); assert d["status"]=="success" and d["data"]["resultType"]=="matrix", d
vals=d["data"]["result"][0]["values"]; s=float(sys.argv[1])
assert len(vals)==5, vals
assert all(abs(t-(s+i))<1e-6 for i,(t,v) in enumerate(vals)), vals' "$start" || fail "query_range step 1s"
q "/api/v1/query_range?query=$(enc 'avg_over_time(gpulse_gpu_power_watts[2s])')&start=$start&end=$end&step=2s" |
	jcheck 'len(d["data"]["result"][0]["values"])==3' || fail "query_range step=2s"
rfc_start=$(date -u -d "@${start%.*}" +%Y-%m-%dT%H:%M:%S.000Z); rfc_end=$(date -u -d "@${end%.*}" +%Y-%m-%dT%H:%M:%SZ)
q "/api/v1/query_range?query=gpulse_gpu_up&start=$rfc_start&end=$rfc_end&step=15" |
	jcheck 'd["status"]=="success" and d["data"]["result"][0]["values"][0][1]=="1"' || fail "RFC 3339 times"
q "/api/v1/query?query=gpulse_gpu_up&time=$rfc_end" | jcheck 'd["data"]["result"][0]["value"][1]=="1"' ||
	fail "instant query at an RFC 3339 time"

# Prometheus refuses (end-start)/step > 11000, so 11,001 points are
# answered (200 in both) and one step more is 400.
q "/api/v1/query_range?query=1&start=0&end=11000&step=1" |
	jcheck 'd["status"]=="success" and len(d["data"]["result"][0]["values"])==11001' ||
	fail "11,001 points: $(q "/api/v1/query_range?query=1&start=0&end=11000&step=1" | head -c 300)"
[ "$(code "/api/v1/query_range?query=1&start=0&end=11001&step=1")" = 400 ] || fail "11,002 points: not 400"

# A NUL byte in a parameter is refused, naming it, in the query string
# and in a form body (it used to cut query=1%00+5 to "1").
for p in "query=1%00+5" "query=1&time=1%00" "match%5B%5D=up%00"; do
	path=/api/v1/query
	[ "${p#match}" != "$p" ] && path=/api/v1/series
	name=$(python3 -c 'import sys,urllib.parse; print([k for k,v in urllib.parse.parse_qsl(sys.argv[1]) if "\0" in v][0])' "$p")
	for how in get post; do
		if [ $how = get ]; then
			out=$(curl -s -w '\n%{http_code}' --max-time 5 "$URL$path?$p")
		else
			out=$(curl -s -w '\n%{http_code}' --max-time 5 --data "$p" "$URL$path")
		fi
		[ "${out##*$'\n'}" = 400 ] && jcheck "d['errorType']=='bad_data' and 'invalid parameter \"$name\"' in d['error']" <<<"${out%$'\n'*}" ||
			fail "NUL in $p ($how): $out"
	done
done

# Form bodies of many pairs (each pair used to take MHD's per-connection
# pool, and 4,000 left no room even to answer) and at the 1 MiB bound.
form_post() { curl -s -o "$WORK/form.json" -w '%{http_code}' --max-time 30 \
	-H 'Content-Type: application/x-www-form-urlencoded' --data-binary @"$WORK/form" "$URL/api/v1/query"; }
for n in 4000 100000; do
	python3 -c 'import sys; n=int(sys.argv[1]); sys.stdout.write("&".join("a%d=b" % i for i in range(n)) + "&query=2%2B3")' "$n" >"$WORK/form"
	[ "$(form_post)" = 200 ] && jcheck 'd["data"]["result"][1]=="5"' <"$WORK/form.json" ||
		fail "a form of $n pairs: $(head -c 300 "$WORK/form.json")"
done
for n in 1048576 1048577; do
	python3 -c 'import sys; n=int(sys.argv[1]); h="query=2%2B3&pad="; sys.stdout.write(h + "x" * (n - len(h)))' "$n" >"$WORK/form"
	want=200
	[ "$n" -gt 1048576 ] && want=413
	[ "$(form_post)" = $want ] || fail "a form body of $n bytes: not $want: $(head -c 300 "$WORK/form.json")"
done

# series, labels, label values.
q "/api/v1/series?match%5B%5D=gpulse_gpu_up&match%5B%5D=$(enc 'gpulse_gpu_power_watts{gpu="0"}')" | jcheck '
d["status"]=="success" and sorted(s["__name__"] for s in d["data"])==["gpulse_gpu_power_watts","gpulse_gpu_up"]' ||
	fail "series: $(q "/api/v1/series?match%5B%5D=gpulse_gpu_up")"
q "/api/v1/labels" | jcheck 'd["status"]=="success" and {"__name__","gpu","uuid","model"}<=set(d["data"])' ||
	fail "labels"
q "/api/v1/label/__name__/values" | jcheck '"gpulse_gpu_utilization_ratio" in d["data"] and "gpulse_gpu_up" in d["data"] and d["data"]==sorted(d["data"])' ||
	fail "label values"
q "/api/v1/label/gpu/values" | jcheck 'd["data"]==["0"]' || fail "gpu values"

# Errors in Prometheus's envelope.
[ "$(code "/api/v1/query?query=sum(")" = 400 ] || fail "bad query: not 400"
q "/api/v1/query?query=sum(" | jcheck 'd["status"]=="error" and d["errorType"]=="bad_data" and d["error"].startswith("invalid parameter \"query\"")' ||
	fail "bad query envelope: $(q "/api/v1/query?query=sum(")"
[ "$(code "/api/v1/query?query=up&time=yesterday")" = 400 ] || fail "bad time: not 400"
[ "$(code "/api/v1/query_range?query=up&start=10&end=5&step=1")" = 400 ] || fail "end before start"
[ "$(code "/api/v1/query_range?query=up&start=0&end=10&step=0")" = 400 ] || fail "zero step"
q "/api/v1/query_range?query=up&start=0&end=20000&step=1" | jcheck 'd["error"].startswith("exceeded maximum resolution of 11,000 points per timeseries")' ||
	fail "11,000 points"
[ "$(code "/api/v1/query_range?query=$(enc 'up[5m]')&start=0&end=10&step=1")" = 400 ] || fail "range vector in query_range"
[ "$(code "/api/v1/series")" = 400 ] || fail "series without match[]"
[ "$(code "/api/v1/label/1bad/values")" = 400 ] || fail "bad label name"

# Bytes that are not UTF-8 in a request come back, if at all, as U+FFFD:
# every body is strict UTF-8 and JSON, as Prometheus's are.
for path in "/api/v1/label/%ff%fe/values" "/api/v1/query?query=%ff" "/api/v1/series?match%5B%5D=%ff"; do
	[ "$(code "$path")" = 400 ] || fail "$path: not 400"
	curl -s --max-time 5 "$URL$path" | python3 -c '
import json,sys
d=json.loads(sys.stdin.buffer.read().decode("utf-8", "strict"))
assert d["status"]=="error" and d["errorType"]=="bad_data", d' || fail "$path: not UTF-8 JSON: $(q "$path" | od -c | head -5)"
done
q "/api/v1/label/%ff%fe/values" | jcheck 'd["error"]=="invalid label name: \"\ufffd\ufffd\""' ||
	fail "bad label name message: $(q "/api/v1/label/%ff%fe/values")"
q "/api/v1/query?query=%22%ff%22" | python3 -c '
import json,sys
d=json.loads(sys.stdin.buffer.read().decode("utf-8", "strict"))
assert d["data"]["resultType"]=="string" and d["data"]["result"][1]=="\ufffd", d' ||
	fail "string result not UTF-8: $(q "/api/v1/query?query=%22%ff%22" | od -c | head -5)"

# Storage families on /metrics, and the exposition stays clean.
wait_for '[ "$(metric gpulse_storage_series)" -gt 20 ] 2>/dev/null' || fail "gpulse_storage_series"
[ "$(metric gpulse_storage_samples_appended_total)" -gt 100 ] || fail "samples appended"
[ "$(metric gpulse_storage_errors_total)" = 0 ] || fail "storage errors"
if command -v promtool >/dev/null; then
	fetch /metrics | promtool check metrics >"$WORK/promtool.txt" 2>&1 || fail "promtool: $(cat "$WORK/promtool.txt")"
fi

# A second gpulsed on the same store is refused with the store's message
# and exit status 1, a failure at run time as a taken port is.
set +e
"$GPULSED" --listen 127.0.0.1:0 --replay "$REC" --storage-path "$DB" 2>"$WORK/second.txt"
rc=$?
set -e
[ "$rc" = 1 ] || fail "second gpulsed on the same store: exit $rc, want 1"
grep -q "$DB" "$WORK/second.txt" || fail "no message naming the store: $(cat "$WORK/second.txt")"

# The history survives a restart: what the store answered for a past
# time before SIGTERM, it answers again after.
past=$(python3 -c "print(round($end-2,3))")
before=$(q "/api/v1/query_range?query=gpulse_gpu_power_watts&start=$start&end=$past&step=0.5")
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly"
start_daemon again --replay "$REC" --storage-path "$DB"
after=$(q "/api/v1/query_range?query=gpulse_gpu_power_watts&start=$start&end=$past&step=0.5")
[ "$before" = "$after" ] || fail "history changed across the restart: $before vs $after"
jcheck 'len(d["data"]["result"][0]["values"])>=5' <<<"$after" || fail "no history after restart: $after"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || true

# A file that is not a gpulse store: exit 2, the message names it.
echo "not a database" >"$WORK/foreign.db"
set +e
"$GPULSED" --listen 127.0.0.1:0 --replay "$REC" --storage-path "$WORK/foreign.db" 2>"$WORK/foreign.txt"
rc=$?
set -e
[ "$rc" = 2 ] || fail "foreign file: exit $rc, want 2"
grep -q "foreign.db" "$WORK/foreign.txt" || fail "foreign file: $(cat "$WORK/foreign.txt")"

# No storage: the API says so with 503.
start_daemon nostore --replay "$REC"
[ "$(code "/api/v1/query?query=up")" = 503 ] || fail "no storage: not 503"
q "/api/v1/query?query=up" | jcheck 'd["status"]=="error" and d["errorType"]=="unavailable"' || fail "503 envelope"
echo PASS
