# A POST to a path nothing serves is 404 in gpulsed, as Prometheus answers
# unknown paths, although the dashboard's route `/` takes every path left
# (http_route_known): the page's own files and the GET-only endpoints
# answer POST with 405, the query API's form routes serve POST, and a
# write action (POST /api/v1/bench) still reaches its write check and its
# handler.
source "$(dirname "$0")/lib.sh"

printf 'write-tok\n' >"$WORK/write.token"
chmod 600 "$WORK/write.token"
cat >"$WORK/g.yml" <<YML
profiling:
  socket: "$WORK/run/inject.sock"
http:
  write_token_file: "$WORK/write.token"
YML
start_daemon a --config "$WORK/g.yml" --replay "$REC" --storage-path "$WORK/store.db"

code() { curl -s --max-time 10 -o "$WORK/body" -w '%{http_code}' "$@"; }

# Unknown paths: 404 for POST as for GET, under the dashboard's mount too.
for p in /nope /ui/nope.js /api/v1/nope /ui/; do
	[ "$(code -X POST "$URL$p")" = 404 ] || fail "POST $p: $(code -X POST "$URL$p") $(cat "$WORK/body")"
	[ "$(code "$URL$p")" = 404 ] || fail "GET $p: $(code "$URL$p")"
done
[ "$(code -X POST -d 'x=1' "$URL/nope")" = 404 ] || fail "POST /nope with a form body"

# Known GET-only paths: 405 with their Allow.
for p in / /ui/app.js /api/v1/gpus /metrics; do
	[ "$(code -X POST "$URL$p")" = 405 ] || fail "POST $p: $(code -X POST "$URL$p")"
done
curl -s --max-time 10 -D "$WORK/h405" -o /dev/null -X POST "$URL/" || true
grep -qi '^Allow: GET, HEAD' "$WORK/h405" || fail "405 without Allow: $(cat "$WORK/h405")"
[ "$(code "$URL/")" = 200 ] || fail "GET / (the dashboard)"

# The query API's form routes serve POST.
wait_for '[ "$(code -X POST -d "query=gpulse_gpu_up" "$URL/api/v1/query")" = 200 ] &&
	grep -q "\"status\":\"success\"" "$WORK/body" && grep -q "gpulse_gpu_up" "$WORK/body"' ||
	fail "POST /api/v1/query: $(cat "$WORK/body")"
[ "$(code -X POST -d 'match[]=gpulse_gpu_up' "$URL/api/v1/labels")" = 200 ] &&
	grep -q '"gpu"' "$WORK/body" || fail "POST /api/v1/labels: $(cat "$WORK/body")"

# A write action: refused without the token (its write check ran), and
# with it its handler answers (a replay has no GPU to benchmark: 503).
[ "$(code -X POST "$URL/api/v1/bench?gpu=0")" = 403 ] || fail "POST /api/v1/bench without the token"
[ "$(code -X POST -H 'Authorization: Bearer write-tok' "$URL/api/v1/bench?gpu=0")" = 503 ] &&
	grep -q 'no GPU to benchmark' "$WORK/body" ||
	fail "POST /api/v1/bench with the token: $(cat "$WORK/body")"
echo "ok"
